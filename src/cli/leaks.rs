//! Leaks (R8.5): when the command has exited but its stdout or stderr is
//! still open, the processes holding the pipe's write end are found through
//! `/proc/*/fd` (each fd links to `pipe:[INODE]`, or `/dev/pts/N` for
//! `--pty`, R8.11) and named.

use std::collections::HashSet;
use std::os::fd::AsRawFd;

use stallwarden::sys;
use stallwarden::ProcessName;

/// The inode of the pipe behind `fd`, as `/proc/self/fd` shows it; `None`
/// when it is not a pipe (or `/proc` is not there).
pub(crate) fn pipe_inode(fd: &impl AsRawFd) -> Option<u64> {
    let link = sys::own_fd_target(fd.as_raw_fd()).ok()?;
    parse_pipe_link(&link)
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
    let Ok(pids) = sys::pids(sys::proc_root()) else {
        return Vec::new();
    };
    let mut found: Vec<ProcessName> = pids
        .into_iter()
        .filter(|&pid| pid != me && holds(pid, inodes))
        .map(|pid| ProcessName {
            pid,
            name: sys::comm(sys::proc_root(), pid)
                .map(|s| s.trim_end().to_owned())
                .unwrap_or_else(|| "?".into()),
        })
        .collect();
    found.sort_unstable_by_key(|p| p.pid);
    found
}

fn holds(pid: u32, inodes: &HashSet<u64>) -> bool {
    let Ok(fds) = sys::fd_links(sys::proc_root(), pid, usize::MAX) else {
        return false;
    };
    fds.iter().any(|(fd, link)| {
        let key = if link.starts_with("/dev/pts/") {
            pty_key(pid, *fd)
        } else {
            parse_pipe_link(link)
        };
        key.is_some_and(|k| inodes.contains(&k))
    })
}

/// The key of a pty slave (`--pty`, R8.11) behind an fd link: its
/// device number, marked as a pty's.
fn pty_key(pid: u32, fd: u64) -> Option<u64> {
    use std::os::unix::fs::MetadataExt;
    let meta = sys::fd_metadata(sys::proc_root(), pid, fd).ok()?;
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
