//! How the command's stdout and stderr are wired to stallwarden (R8.11).
//!
//! - Two pipes, as before, when stallwarden's stdout and stderr are
//!   different files: each is copied to ours by a pump of its own.
//! - One pipe for both when stallwarden's stdout and stderr are the same
//!   open file (`> log 2>&1`, `2>&1 | cat`, and a terminal whose 1 and 2 are
//!   one open of it): the command's writes reach the pipe in the order it
//!   made them, and one pump copies them in that order. Two pipes could not
//!   keep it: two pumps race.
//! - With `--pty`, a pseudo-terminal instead of each pipe
//!   (src/cli/pty.rs), so `isatty(1)` is true and runtimes that buffer a
//!   pipe (Python, C stdio) flush per line.
//!
//! Stdin is never touched: inherited, as R8.1 says, terminal or not.

use std::fs::File;
use std::io::{self, Read};
use std::os::fd::{FromRawFd, OwnedFd};
use std::os::unix::fs::MetadataExt;
use std::process::{Child, Command, Stdio};

use super::console::Stream;
use super::pty::Pty;

/// The parent's side of the command's outputs, between `prepare` and the
/// pumps.
pub(crate) struct Outputs {
    kind: Kind,
    /// The command's ends (stdout, stderr) until it has them; `None` for
    /// two pipes, which std makes at the spawn.
    ends: Option<(OwnedFd, OwnedFd)>,
}

enum Kind {
    /// `Stdio::piped()` for each: the readers come from the `Child`.
    Pipes,
    /// One pipe: our read end, until a pump has it.
    Shared(Option<OwnedFd>),
    /// One pseudo-terminal per distinct output of ours: (master, stream).
    Ptys(Vec<(Pty, Stream)>),
}

impl Outputs {
    /// Opens the command's outputs: a pty each (one for both when ours are
    /// the same open file) when `pty`, else one pipe for both when ours
    /// are the same open file, else two pipes. `shared` is
    /// [`same_open_file`] of our stdout and stderr. Give them to a command
    /// with [`Outputs::wire`]; after the spawn, [`Outputs::spawned`].
    pub(crate) fn prepare(pty: bool, shared: bool) -> io::Result<Outputs> {
        if pty {
            let mut out = Pty::open()?;
            let slave = out.take_slave()?;
            let mut ptys = vec![(out, Stream::Stdout)];
            let err_end = if shared {
                slave.try_clone()?
            } else {
                let mut err = Pty::open()?;
                let end = err.take_slave()?;
                ptys.push((err, Stream::Stderr));
                end
            };
            return Ok(Outputs {
                kind: Kind::Ptys(ptys),
                ends: Some((slave, err_end)),
            });
        }
        if shared {
            let (read, write) = pipe()?;
            return Ok(Outputs {
                kind: Kind::Shared(Some(read)),
                ends: Some((write.try_clone()?, write)),
            });
        }
        Ok(Outputs {
            kind: Kind::Pipes,
            ends: None,
        })
    }

    /// Sets `command`'s stdout and stderr to the command's ends (copies:
    /// `command` holds them until it is dropped, so drop it right after
    /// the spawn, or the pumps never see the end of the output).
    pub(crate) fn wire(&self, command: &mut Command) -> io::Result<()> {
        match &self.ends {
            Some((out, err)) => {
                command.stdout(Stdio::from(out.try_clone()?));
                command.stderr(Stdio::from(err.try_clone()?));
            }
            None => {
                command.stdout(Stdio::piped()).stderr(Stdio::piped());
            }
        }
        Ok(())
    }

    /// Closes stallwarden's copies of the command's ends, once it has them.
    pub(crate) fn spawned(&mut self) {
        self.ends = None;
    }

    /// Whether the command's outputs are pseudo-terminals (`--pty`).
    pub(crate) fn is_pty(&self) -> bool {
        matches!(self.kind, Kind::Ptys(_))
    }

    /// The pseudo-terminals, for window-size changes (empty without `--pty`).
    pub(crate) fn ptys(&self) -> Vec<&Pty> {
        match &self.kind {
            Kind::Ptys(p) => p.iter().map(|(p, _)| p).collect(),
            _ => Vec::new(),
        }
    }

    /// What the pumps read, each with the stream of ours it is copied to,
    /// and the keys by which the leak check (R8.5) finds the processes
    /// that still hold the command's ends.
    ///
    /// The readers are handed over, not copied: when a pump drops one, the
    /// command's end breaks (R8.10).
    pub(crate) fn readers(&mut self, child: &mut Child) -> io::Result<Readers> {
        let mut r = Readers::default();
        match &mut self.kind {
            Kind::Pipes => {
                if let Some(out) = child.stdout.take() {
                    r.keys.extend(super::leaks::pipe_inode(&out));
                    r.files
                        .push((Box::new(File::from(OwnedFd::from(out))), Stream::Stdout));
                }
                if let Some(err) = child.stderr.take() {
                    r.keys.extend(super::leaks::pipe_inode(&err));
                    r.files
                        .push((Box::new(File::from(OwnedFd::from(err))), Stream::Stderr));
                }
            }
            Kind::Shared(read) => {
                let read = read
                    .take()
                    .ok_or_else(|| io::Error::other("already read"))?;
                r.keys.extend(super::leaks::pipe_inode(&read));
                r.files.push((Box::new(File::from(read)), Stream::Stdout));
            }
            Kind::Ptys(ptys) => {
                for (pty, stream) in ptys {
                    r.keys.push(pty.leak_key());
                    r.files.push((Box::new(pty.reader()), *stream));
                }
            }
        }
        Ok(r)
    }
}

/// A pipe, both ends close-on-exec: (read, write).
fn pipe() -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [-1; 2];
    // SAFETY: pipe2 writes two descriptors into a valid array.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: both are fresh descriptors that we now own.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

/// The pumps' sources (see [`Outputs::readers`]).
#[derive(Default)]
pub(crate) struct Readers {
    pub(crate) files: Vec<(Box<dyn OutputReader>, Stream)>,
    pub(crate) keys: Vec<u64>,
}

/// The read end of one of the command's outputs, for a pump: its
/// descriptor is polled and looked at before verdicts (R8.16).
pub(crate) trait OutputReader: Read + std::os::fd::AsRawFd + Send {}

impl<T: Read + std::os::fd::AsRawFd + Send> OutputReader for T {}

/// Whether descriptors `a` and `b` are the same open file description (as
/// after `dup`, or a shell's `2>&1`), not merely the same file opened
/// twice. Same device and inode first; then the kernel's own answer
/// (`kcmp(KCMP_FILE)`); where `kcmp` is refused (a seccomp filter, no
/// `CONFIG_KCMP`), the offset and status flags of each description from
/// `/proc/self/fdinfo` must agree.
pub(crate) fn same_open_file(a: libc::c_int, b: libc::c_int) -> bool {
    let (Ok(ma), Ok(mb)) = (metadata(a), metadata(b)) else {
        return false;
    };
    if ma.dev() != mb.dev() || ma.ino() != mb.ino() {
        return false;
    }
    // SAFETY: kcmp only compares kernel objects of our own process; the
    // descriptors are plain integers to it.
    let rc = unsafe {
        let me = libc::getpid();
        libc::syscall(libc::SYS_kcmp, me, me, KCMP_FILE, a, b)
    };
    match rc {
        0 => true,
        r if r > 0 => false,
        _ => fdinfo_agrees(a, b),
    }
}

/// `KCMP_FILE` from `<linux/kcmp.h>`.
const KCMP_FILE: libc::c_int = 0;

fn metadata(fd: libc::c_int) -> io::Result<std::fs::Metadata> {
    stallwarden::sys::own_fd_metadata(fd).or_else(|_| {
        // Without /proc: fstat through a borrowed descriptor.
        // SAFETY: the descriptor stays open (stdout/stderr) while borrowed.
        let fd = unsafe { std::os::fd::BorrowedFd::borrow_raw(fd) };
        File::from(fd.try_clone_to_owned()?).metadata()
    })
}

/// The `pos:` and `flags:` lines of `/proc/self/fdinfo/FD`.
fn fdinfo_agrees(a: libc::c_int, b: libc::c_int) -> bool {
    let read = |fd: libc::c_int| {
        stallwarden::sys::own_fdinfo(fd).ok().map(|t| {
            t.lines()
                .filter(|l| l.starts_with("pos:") || l.starts_with("flags:"))
                .map(str::to_owned)
                .collect::<Vec<_>>()
        })
    };
    matches!((read(a), read(b)), (Some(x), Some(y)) if x == y && !x.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsRawFd;

    // R8.11: a dup is the same open file; the same file opened twice is not.
    #[test]
    fn a_dup_is_the_same_open_file_and_a_second_open_is_not() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("log");
        let first = File::create(&path).unwrap();
        let dup = first.try_clone().unwrap();
        let again = std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .unwrap();
        let (a, b, c) = (first.as_raw_fd(), dup.as_raw_fd(), again.as_raw_fd());
        assert!(same_open_file(a, b));
        assert!(!same_open_file(a, c));
        let (r, w) = pipe().unwrap();
        let w2 = w.try_clone().unwrap();
        assert!(same_open_file(w.as_raw_fd(), w2.as_raw_fd()));
        assert!(!same_open_file(r.as_raw_fd(), w.as_raw_fd()));
    }
}
