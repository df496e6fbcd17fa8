//! `PID/syscall` and `PID/task/TID/syscall` (R8.13): the system call a
//! thread is blocked in, with its arguments ([`Blocked`]), how that call
//! waits for input ([`Wait`]), and why the file could not be read
//! ([`SyscallError`]). This is the one parser of these files: the
//! sampler's blocking points (sources) and the CLI's typing detector use
//! it.

use std::io;
use std::path::Path;

/// What a thread is doing, from `/proc/PID/syscall`.
///
/// # Examples
///
/// ```
/// use watchdog_core::sys::Blocked;
/// assert_eq!(Blocked::parse("running\n"), Some(Blocked::Running));
/// assert_eq!(Blocked::parse("-1 0x7ffd 0x7f3a\n"), Some(Blocked::Running));
/// assert_eq!(
///     Blocked::parse("0 0x3 0x55d0 0x2000 0x0 0x0 0x0 0x7ffd 0x7f3a\n"),
///     Some(Blocked::In { nr: 0, args: [3, 0x55d0, 0x2000, 0, 0, 0] })
/// );
/// assert_eq!(Blocked::parse("7 zz"), None);
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Blocked {
    /// On a CPU, or blocked outside a system call.
    Running,
    /// Blocked in system call `nr` with these arguments.
    In {
        /// The call's number on this machine's architecture.
        nr: libc::c_long,
        /// Its six arguments, as the kernel shows them.
        args: [u64; 6],
    },
}

impl Blocked {
    /// Parses `/proc/PID/syscall`: `running`, `-1 SP PC`, or
    /// `NR ARG1..ARG6 SP PC` (arguments in hex); `None` for anything else.
    pub fn parse(text: &str) -> Option<Blocked> {
        let mut words = text.split_ascii_whitespace();
        let first = words.next()?;
        if first == "running" {
            return Some(Blocked::Running);
        }
        let nr: libc::c_long = first.parse().ok()?;
        if nr < 0 {
            return Some(Blocked::Running);
        }
        let mut args = [0u64; 6];
        for a in &mut args {
            let w = words.next()?;
            *a = u64::from_str_radix(w.strip_prefix("0x")?, 16).ok()?;
        }
        Some(Blocked::In { nr, args })
    }
}

/// How a blocking system call relates to a process's descriptors.
///
/// # Examples
///
/// ```
/// use watchdog_core::sys::{classify, Wait};
/// assert_eq!(classify(libc::SYS_read, &[3, 0, 0, 0, 0, 0]), Wait::Reads(3));
/// assert_eq!(classify(libc::SYS_wait4, &[3, 0, 0, 0, 0, 0]), Wait::Other);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Wait {
    /// Reads descriptor `fd`.
    Reads(u64),
    /// Waits on the descriptors registered with epoll instance `epfd`.
    Epoll(u64),
    /// Waits on some of the descriptors below `nfds` (`select`).
    Below(u64),
    /// Waits on descriptors it names in its own memory (`poll`).
    Any,
    /// Not a wait for input.
    Other,
}

/// Classifies a blocking call by how it waits for input (see [`Wait`]).
pub fn classify(nr: libc::c_long, args: &[u64; 6]) -> Wait {
    match nr {
        libc::SYS_read
        | libc::SYS_readv
        | libc::SYS_pread64
        | libc::SYS_preadv
        | libc::SYS_preadv2
        | libc::SYS_recvfrom
        | libc::SYS_recvmsg
        | libc::SYS_recvmmsg => Wait::Reads(args[0]),
        libc::SYS_epoll_pwait | libc::SYS_epoll_pwait2 => Wait::Epoll(args[0]),
        libc::SYS_pselect6 => Wait::Below(args[0]),
        libc::SYS_ppoll => Wait::Any,
        #[cfg(target_arch = "x86_64")]
        libc::SYS_epoll_wait => Wait::Epoll(args[0]),
        #[cfg(target_arch = "x86_64")]
        libc::SYS_select => Wait::Below(args[0]),
        #[cfg(target_arch = "x86_64")]
        libc::SYS_poll => Wait::Any,
        _ => Wait::Other,
    }
}

/// Why a process's `syscall` file said nothing usable.
///
/// # Examples
///
/// ```
/// use watchdog_core::sys::SyscallError;
/// let e = SyscallError::Unparsable { pid: 7 };
/// assert_eq!(e.to_string(), "/proc/7/syscall is unreadable");
/// ```
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SyscallError {
    /// The process is gone.
    #[error("process {pid} is gone")]
    Gone {
        /// The process.
        pid: u32,
    },
    /// The process is there but the file is not: a kernel built without
    /// `CONFIG_HAVE_ARCH_TRACEHOOK`.
    #[error("this kernel has no /proc/PID/syscall")]
    NoFile,
    /// The file could not be read (permissions, mostly).
    #[error("cannot read /proc/{pid}/syscall ({reason})")]
    Unreadable {
        /// The process.
        pid: u32,
        /// What the OS said, in plain words.
        reason: String,
    },
    /// The file was read but is not what proc(5) describes.
    #[error("/proc/{pid}/syscall is unreadable")]
    Unparsable {
        /// The process.
        pid: u32,
    },
}

/// Reads and parses process `pid`'s `root/PID/syscall` (its main thread).
///
/// # Examples
///
/// ```
/// use watchdog_core::sys::{proc_root, read_syscall, SyscallError};
/// # #[cfg(target_os = "linux")] {
/// let mut child = std::process::Command::new("sleep").arg("30").spawn().unwrap();
/// // It reaches its sleep soon; until then it may be running.
/// assert!(read_syscall(proc_root(), child.id()).is_ok());
/// child.kill().unwrap();
/// child.wait().unwrap();
/// assert_eq!(read_syscall(proc_root(), child.id()), Err(SyscallError::Gone { pid: child.id() }));
/// # }
/// ```
pub fn read_syscall(root: &Path, pid: u32) -> Result<Blocked, SyscallError> {
    match std::fs::read_to_string(root.join(format!("{pid}/syscall"))) {
        Ok(text) => Blocked::parse(&text).ok_or(SyscallError::Unparsable { pid }),
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            if exists(root, pid) {
                Err(SyscallError::NoFile)
            } else {
                Err(SyscallError::Gone { pid })
            }
        }
        Err(e) => Err(SyscallError::Unreadable {
            pid,
            reason: match e.kind() {
                io::ErrorKind::PermissionDenied => "permission denied".into(),
                _ => e.to_string(),
            },
        }),
    }
}

/// Reads and parses one thread's `root/PID/task/TID/syscall`, or the
/// process's own `root/PID/syscall` when `tid` is `None`: `Ok(None)` when
/// the text is not what proc(5) describes, the OS error when the file
/// cannot be read (`NotFound` for a thread that is gone).
pub fn thread_syscall(root: &Path, pid: u32, tid: Option<u32>) -> io::Result<Option<Blocked>> {
    let path = match tid {
        Some(tid) => root.join(format!("{pid}/task/{tid}/syscall")),
        None => root.join(format!("{pid}/syscall")),
    };
    Ok(Blocked::parse(&std::fs::read_to_string(path)?))
}

/// Lists the thread ids of process `pid` (`root/PID/task`), in the order
/// the kernel gives them; the OS error when they cannot be listed
/// (`NotFound` for a process that is gone).
///
/// # Examples
///
/// ```
/// use watchdog_core::sys::{proc_root, thread_ids};
/// # #[cfg(target_os = "linux")] {
/// let me = std::process::id();
/// assert!(thread_ids(proc_root(), me).unwrap().contains(&me));
/// # }
/// ```
pub fn thread_ids(root: &Path, pid: u32) -> io::Result<Vec<u32>> {
    Ok(std::fs::read_dir(root.join(format!("{pid}/task")))?
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse().ok())
        .collect())
}

/// Returns true while process `pid` has an entry in the table at `root`
/// (a zombie still has one).
pub fn exists(root: &Path, pid: u32) -> bool {
    root.join(pid.to_string()).exists()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_and_waits_are_told_apart() {
        let args = [3, 0, 0, 0, 0, 0];
        assert_eq!(classify(libc::SYS_read, &args), Wait::Reads(3));
        assert_eq!(classify(libc::SYS_recvfrom, &args), Wait::Reads(3));
        assert_eq!(classify(libc::SYS_epoll_pwait, &args), Wait::Epoll(3));
        assert_eq!(classify(libc::SYS_pselect6, &args), Wait::Below(3));
        assert_eq!(classify(libc::SYS_ppoll, &args), Wait::Any);
        assert_eq!(classify(libc::SYS_wait4, &args), Wait::Other);
        assert_eq!(classify(libc::SYS_nanosleep, &args), Wait::Other);
    }

    #[test]
    fn a_fixture_says_each_reason_in_words() {
        let dir = std::env::temp_dir().join(format!("sys-syscall-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("5/task/6")).unwrap();
        std::fs::create_dir_all(dir.join("8")).unwrap();
        std::fs::write(dir.join("5/syscall"), "7 zz\n").unwrap();
        std::fs::write(dir.join("5/task/6/syscall"), "running\n").unwrap();
        assert_eq!(
            read_syscall(&dir, 5),
            Err(SyscallError::Unparsable { pid: 5 })
        );
        assert_eq!(read_syscall(&dir, 8), Err(SyscallError::NoFile));
        assert_eq!(read_syscall(&dir, 9), Err(SyscallError::Gone { pid: 9 }));
        std::fs::create_dir_all(dir.join("8/syscall")).unwrap();
        assert!(matches!(
            read_syscall(&dir, 8),
            Err(SyscallError::Unreadable { pid: 8, .. })
        ));
        assert_eq!(thread_ids(&dir, 5).unwrap(), vec![6]);
        assert_eq!(
            thread_syscall(&dir, 5, Some(6)).unwrap(),
            Some(Blocked::Running)
        );
        assert_eq!(thread_syscall(&dir, 5, None).unwrap(), None);
        assert_eq!(
            thread_syscall(&dir, 5, Some(7)).unwrap_err().kind(),
            io::ErrorKind::NotFound
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    // R8.13: a thread outside any call (`-1 SP PC`) is running, while a
    // thread blocked in call number 0 (`read` on x86_64) is blocked in it,
    // with its arguments.
    #[test]
    fn a_syscall_line_reads_running_or_the_call_with_its_arguments() {
        assert_eq!(Blocked::parse("-1 0x7ffd 0x7f3a\n"), Some(Blocked::Running));
        assert_eq!(
            Blocked::parse("0 0x3 0x55d0 0x2000 0x0 0x0 0x0 0x7ffd 0x7f3a\n"),
            Some(Blocked::In {
                nr: 0,
                args: [3, 0x55d0, 0x2000, 0, 0, 0]
            })
        );
        assert_eq!(
            Blocked::parse("7 0x1 0x2 0x3 0x4 0x5 0x6 0x7ffd 0x7f3a\n"),
            Some(Blocked::In {
                nr: 7,
                args: [1, 2, 3, 4, 5, 6]
            })
        );
    }

    // R8.13: the older waits x86_64 still has are told apart like their
    // successors: `epoll_wait` on its epoll instance, `select` below its
    // `nfds`, `poll` on descriptors in its own memory.
    #[cfg(target_arch = "x86_64")]
    #[test]
    fn the_older_x86_64_waits_are_told_apart() {
        let args = [5, 0, 0, 0, 0, 0];
        assert_eq!(classify(libc::SYS_epoll_wait, &args), Wait::Epoll(5));
        assert_eq!(classify(libc::SYS_select, &args), Wait::Below(5));
        assert_eq!(classify(libc::SYS_poll, &args), Wait::Any);
    }

    // R8.13: a `syscall` file this process may not read (another user's
    // process, where stallwarden runs unprivileged) says so in plain
    // words. Root reads anything, so the read is made on a thread whose
    // file-system uid is nobody's (setfsuid is per thread, and drops the
    // override of file modes).
    #[test]
    fn a_syscall_file_it_may_not_read_says_permission_denied() {
        use std::os::unix::fs::PermissionsExt;
        let dir = std::env::temp_dir().join(format!("sys-syscall-perm-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("151")).unwrap();
        let file = dir.join("151/syscall");
        std::fs::write(&file, "0 0x3 0x7f00 0x1 0x0 0x0 0x0 0x7ffd 0x7f3a\n").unwrap();
        for (path, mode) in [(&dir, 0o755), (&dir.join("151"), 0o755), (&file, 0o000)] {
            std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
        }
        let said = std::thread::scope(|s| {
            s.spawn(|| {
                // SAFETY: setfsuid changes only this thread's file-system uid.
                unsafe { libc::setfsuid(65534) };
                read_syscall(&dir, 151)
            })
            .join()
            .unwrap()
        });
        std::fs::remove_dir_all(&dir).unwrap();
        let e = said.unwrap_err();
        assert_eq!(
            e,
            SyscallError::Unreadable {
                pid: 151,
                reason: "permission denied".into()
            }
        );
        assert_eq!(
            e.to_string(),
            "cannot read /proc/151/syscall (permission denied)"
        );
    }
}
