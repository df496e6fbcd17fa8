//! The one owner of the kernel's process table (R10.6, R10.7): every read
//! of `/proc` the sources, the sinks and the CLI make goes through here,
//! with the one way to make an owner-only directory and the one way to
//! wait for another process's end. They live in the core because it is the
//! one crate all three depend on.
//!
//! One file per subject, each saying what kernel file it reads and what it
//! returns:
//!
//! | file | reads | returns |
//! |------|-------|---------|
//! | `stat` | `PID/stat`, `PID/comm`, `PID/exe`, `PID/wchan`, `stat`, `uptime` | [`ProcStat`], names, boot time, uptime |
//! | `table` | any small file under a held `/proc` directory | [`ProcDir`]: stat lines, wchan, the pid counter |
//! | `children` | `PID/task/TID/children`, every `PID/stat` | children lists, [`scan`] of the table |
//! | `syscall` | `PID/syscall`, `PID/task/TID/syscall` | [`Blocked`], [`Wait`], [`SyscallError`] |
//! | `fd` | `PID/fd/N`, `PID/fdinfo/N` | descriptor targets, flags, epoll targets |
//! | `net` | `PID/net/{tcp,tcp6,unix}` | [`TcpConn`] and Unix socket paths by inode |
//! | `pidfd` | (no file: `pidfd_open`, `poll`, `pidfd_getfd`) | [`Pidfd`], [`wait_exit`] |
//! | `private_dir` | (no file) | [`private_dir`] |
//!
//! Readers take a `/proc`-shaped root (`&Path`) where tests feed them a
//! fixture tree; [`proc_root`] is the system's.

use std::path::Path;

mod children;
mod exit_wait;
mod fd;
mod net;
mod pidfd;
mod private_dir;
mod stat;
mod syscall;
mod table;

pub use children::{children_of, scan};
pub use exit_wait::wait_exit;
pub use fd::{
    cwd_is_fifo, epoll_targets, fd_flags, fd_is_fifo, fd_links, fd_metadata, fd_target, fdinfo,
    open_fds, own_fd_metadata, own_fd_target, own_fdinfo, socket_inode,
};
pub use net::{parse_tcp, parse_unix, read_tcp, read_unix, TcpConn, TCP_STATES};
pub use pidfd::Pidfd;
pub use private_dir::{private_dir, PrivateDirError};
pub use stat::{
    btime_ms, comm, exe, parse_btime, read_stat, state_from_code, ticks_per_second, uptime,
    ProcStat, StatError,
};
pub use syscall::{
    classify, exists, read_syscall, thread_ids, thread_syscall, Blocked, SyscallError, Wait,
};
pub use table::{pids, ProcDir};

/// The system's process table, where every reader here looks unless given
/// a fixture root.
///
/// # Examples
///
/// ```
/// use watchdog_core::sys::proc_root;
/// # #[cfg(target_os = "linux")]
/// assert!(proc_root().join("self").exists());
/// ```
pub fn proc_root() -> &'static Path {
    Path::new("/proc")
}
