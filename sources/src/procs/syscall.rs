//! The one parser of `/proc/PID/syscall` (R8.13): a thread's blocking
//! system call and its arguments, how it waits for input, and what makes
//! text from `/proc` safe for a terminal.

/// What a thread is doing, from `/proc/PID/syscall`.
///
/// # Examples
///
/// ```
/// use stallwarden_sources::procs::blocked::Blocked;
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
/// use stallwarden_sources::procs::blocked::{classify, Wait};
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

/// The descriptors an epoll instance watches, from its
/// `/proc/PID/fdinfo/EPFD` (`tfd: N events: ...` lines).
///
/// # Examples
///
/// ```
/// use stallwarden_sources::procs::blocked::epoll_targets;
/// let info = "pos:\t0\ntfd:        0 events:       19 data: 0\ntfd:        7 events: 19 data: 7\n";
/// assert_eq!(epoll_targets(info), vec![0, 7]);
/// ```
pub fn epoll_targets(fdinfo: &str) -> Vec<u64> {
    fdinfo
        .lines()
        .filter_map(|l| l.strip_prefix("tfd:"))
        .filter_map(|rest| rest.split_ascii_whitespace().next()?.parse().ok())
        .collect()
}

/// Replaces control characters (an escape sequence in a file name) by
/// their escaped form, so nothing from `/proc` drives a terminal.
///
/// # Examples
///
/// ```
/// use stallwarden_sources::procs::blocked::sanitize;
/// assert_eq!(sanitize("a\x1b[2Jb\n"), "a\\u{1b}[2Jb\\n");
/// ```
pub fn sanitize(text: &str) -> String {
    text.chars()
        .flat_map(|c| {
            let escaped: Vec<char> = if c.is_control() {
                c.escape_default().collect()
            } else {
                vec![c]
            };
            escaped
        })
        .collect()
}

/// How much a blocking call says about why a process is silent: a thread
/// in I/O says more than one asleep, which says more than one in a lock.
pub(crate) fn weight(b: &Blocked) -> u8 {
    match b {
        Blocked::Running => 0,
        Blocked::In { nr, .. } if *nr == libc::SYS_futex => 1,
        Blocked::In { nr, .. }
            if *nr == libc::SYS_nanosleep || *nr == libc::SYS_clock_nanosleep =>
        {
            2
        }
        Blocked::In { .. } => 3,
    }
}
