//! Leaks (R8.5): when the command has exited but its stdout or stderr is
//! still open, the processes holding the pipe's write end are found through
//! `/proc/*/fd` (each fd links to `pipe:[INODE]`, or `/dev/pts/N` for
//! `--pty`, R8.11) and named.

use std::collections::HashSet;
use std::os::fd::AsRawFd;

use stallwarden::ProcessName;

/// The inode of the pipe behind `fd`, as `/proc/self/fd` shows it; `None`
/// when it is not a pipe (or `/proc` is not there).
pub(crate) fn pipe_inode(fd: &impl AsRawFd) -> Option<u64> {
    let link = std::fs::read_link(format!("/proc/self/fd/{}", fd.as_raw_fd())).ok()?;
    parse_pipe_link(link.to_str()?)
}

/// Parses `pipe:[12345]`.
pub(crate) fn parse_pipe_link(link: &str) -> Option<u64> {
    link.strip_prefix("pipe:[")?.strip_suffix(']')?.parse().ok()
}

/// Every process other than stallwarden with an fd on one of `inodes`,
/// ordered by pid. Processes that vanish, or whose fds we may not read, are
/// left out.
pub(crate) fn holders(inodes: &HashSet<u64>) -> Vec<ProcessName> {
    let me = std::process::id();
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    let mut found: Vec<ProcessName> = dir
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|&pid| pid != me && holds(pid, inodes))
        .map(|pid| ProcessName {
            pid,
            name: std::fs::read_to_string(format!("/proc/{pid}/comm"))
                .map(|s| s.trim_end().to_owned())
                .unwrap_or_else(|_| "?".into()),
        })
        .collect();
    found.sort_unstable_by_key(|p| p.pid);
    found
}

fn holds(pid: u32, inodes: &HashSet<u64>) -> bool {
    let Ok(fds) = std::fs::read_dir(format!("/proc/{pid}/fd")) else {
        return false;
    };
    fds.filter_map(Result::ok).any(|fd| {
        let Ok(link) = std::fs::read_link(fd.path()) else {
            return false;
        };
        let key = match link.to_str() {
            Some(l) if l.starts_with("/dev/pts/") => pty_key(&fd.path()),
            Some(l) => parse_pipe_link(l),
            None => None,
        };
        key.is_some_and(|k| inodes.contains(&k))
    })
}

/// The key of a pty slave (`--pty`, R8.11) behind an fd link: its
/// device number, marked as a pty's.
fn pty_key(fd: &std::path::Path) -> Option<u64> {
    use std::os::unix::fs::MetadataExt;
    let meta = std::fs::metadata(fd).ok()?;
    Some(meta.rdev() | super::pty::PTY_KEY)
}

/// Renders holders as `sleep (pid 12), tee (pid 13)`.
pub(crate) fn names(procs: &[ProcessName]) -> String {
    procs
        .iter()
        .map(ProcessName::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pipe_links_parse_and_others_do_not() {
        assert_eq!(parse_pipe_link("pipe:[4026532]"), Some(4_026_532));
        assert_eq!(parse_pipe_link("socket:[1]"), None);
        assert_eq!(parse_pipe_link("pipe:[x]"), None);
        assert_eq!(parse_pipe_link("/dev/null"), None);
    }

    #[test]
    fn a_child_holding_our_pipe_is_named_by_pid() {
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let out = child.stdout.take().unwrap();
        let ino = pipe_inode(&out).expect("a pipe");
        let found = holders(&HashSet::from([ino]));
        child.kill().unwrap();
        child.wait().unwrap();
        assert!(
            found
                .iter()
                .any(|p| p.pid == child.id() && p.name == "sleep"),
            "{found:?}"
        );
        assert!(found.iter().all(|p| p.pid != std::process::id()));
    }
}
