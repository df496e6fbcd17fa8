//! Starting the command as `execvp(3)` would (R8.12): a file that is
//! executable but has no `#!` line (`ENOEXEC`) runs through `/bin/sh`, as
//! GNU `timeout` and shells do; a script whose `#!` interpreter is missing
//! is named as such ("bad interpreter"), not "command not found", and
//! exits 127 as `timeout` does.

use std::ffi::{OsStr, OsString};
use std::io::{self, Read};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use super::outputs::Outputs;
use super::terminal::Terminal;
use super::{EXIT_NOT_EXECUTABLE, EXIT_NOT_FOUND};

/// The shell `execvp` falls back to.
const SH: &str = "/bin/sh";

/// Spawns `command` (running `program`); on `ENOEXEC`, spawns the same
/// command line through `/bin/sh` instead, with the same environment,
/// directory, process group, pipes and terminal hand-over.
///
/// On failure, returns the line to print and the exit status (R8.2).
pub(crate) fn spawn(
    command: &mut Command,
    program: &OsStr,
    terminal: Option<&Terminal>,
    outputs: &Outputs,
) -> Result<Child, (String, u8)> {
    let name = program.to_string_lossy().into_owned();
    // R8.16: the signals stallwarden ignores for its own writes are the
    // command's at their default.
    super::signals::command_defaults(command);
    match command.spawn() {
        Ok(c) => Ok(c),
        Err(e) if e.raw_os_error() == Some(libc::ENOEXEC) => {
            let Some(path) = resolve(program) else {
                return Err(failure(&name, &e));
            };
            let mut sh = through_sh(command, &path);
            // R8.11: the same outputs (pipes, one shared pipe, or ptys).
            if let Err(e) = outputs.wire(&mut sh) {
                return Err(failure(&name, &e));
            }
            if let Some(t) = terminal {
                t.hook(&mut sh);
            }
            super::signals::command_defaults(&mut sh);
            sh.spawn().map_err(|e| failure(&name, &e))
        }
        Err(e) => Err(failure(&name, &e)),
    }
}

/// Rebuilds `original` as `/bin/sh PATH ARGS...`, as `execvp` does for a
/// file without `#!`.
fn through_sh(original: &Command, path: &Path) -> Command {
    let mut sh = Command::new(SH);
    sh.arg(path)
        .args(original.get_args())
        .process_group(0)
        .stdin(Stdio::inherit());
    for (k, v) in original.get_envs() {
        match v {
            Some(v) => sh.env(k, v),
            None => sh.env_remove(k),
        };
    }
    if let Some(dir) = original.get_current_dir() {
        sh.current_dir(dir);
    }
    sh
}

/// The message and status for a command that could not be started.
fn failure(name: &str, e: &io::Error) -> (String, u8) {
    // R8.16: stallwarden's own limits (no process or descriptor to be had
    // for the start: a fork failing with EAGAIN, `ulimit -n`) are its
    // error, 125 as under GNU `timeout`, never the command's 126.
    if matches!(
        e.raw_os_error(),
        Some(libc::EAGAIN | libc::ENOMEM | libc::EMFILE | libc::ENFILE)
    ) {
        return (
            format!("stallwarden: cannot start {name}: {e}"),
            super::EXIT_ERROR,
        );
    }
    if e.kind() != io::ErrorKind::NotFound {
        return (
            format!("stallwarden: {name}: cannot execute: {e}"),
            EXIT_NOT_EXECUTABLE,
        );
    }
    // ENOENT for a file that exists: its interpreter (or loader) is what
    // is missing.
    let Some(path) = resolve(OsStr::new(name)) else {
        return (
            format!("stallwarden: {name}: command not found"),
            EXIT_NOT_FOUND,
        );
    };
    let line = match interpreter(&path) {
        Some(interp) => format!(
            "stallwarden: {name}: bad interpreter: {}: No such file or directory",
            interp.to_string_lossy()
        ),
        None => format!(
            "stallwarden: {name}: cannot execute: No such file or directory \
             (a missing program loader or library?)"
        ),
    };
    (line, EXIT_NOT_FOUND)
}

/// Finds the file `execvp` would run for `program`: the path itself when
/// it holds a `/`, else the first executable regular file of that name in
/// `$PATH`.
fn resolve(program: &OsStr) -> Option<PathBuf> {
    if program.as_bytes().contains(&b'/') {
        let p = PathBuf::from(program);
        return p.is_file().then_some(p);
    }
    if program.is_empty() {
        return None;
    }
    let path = std::env::var_os("PATH").unwrap_or_else(|| OsString::from("/bin:/usr/bin"));
    std::env::split_paths(&path)
        .map(|dir| {
            // An empty entry means the current directory.
            if dir.as_os_str().is_empty() {
                PathBuf::from(".").join(program)
            } else {
                dir.join(program)
            }
        })
        .find(|p| p.is_file() && executable(p))
}

fn executable(p: &Path) -> bool {
    let Ok(c) = std::ffi::CString::new(p.as_os_str().as_bytes()) else {
        return false;
    };
    // SAFETY: access reads the NUL-terminated path and touches nothing else.
    unsafe { libc::access(c.as_ptr(), libc::X_OK) == 0 }
}

/// The interpreter a `#!` line names, if the file starts with one.
fn interpreter(path: &Path) -> Option<OsString> {
    let mut head = [0u8; 256];
    let n = std::fs::File::open(path).ok()?.read(&mut head).ok()?;
    let line = head[..n].strip_prefix(b"#!")?;
    let line = line.split(|b| *b == b'\n').next()?;
    let interp = line
        .split(|b| *b == b' ' || *b == b'\t')
        .find(|w| !w.is_empty())?;
    Some(OsStr::from_bytes(interp).to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_shebang_interpreter_is_read_up_to_its_first_blank() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("s");
        std::fs::write(&p, "#! /usr/bin/env  python3\nprint()\n").unwrap();
        assert_eq!(interpreter(&p), Some(OsString::from("/usr/bin/env")));
        std::fs::write(&p, "echo hi\n").unwrap();
        assert_eq!(interpreter(&p), None);
    }
}
