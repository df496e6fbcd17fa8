//! What a process is blocked on (R8.13): the system call it sleeps in, from
//! `/proc/PID/syscall` (the call number and its arguments), and the target
//! of the descriptor it waits on, from `/proc/PID/fd/N`, with
//! `/proc/PID/net/{tcp,tcp6,unix}` for sockets. The files are read and
//! parsed by the core's one owner of the process table
//! ([`watchdog_core::sys`], R10.7); what is judged of them is here.

use std::collections::HashMap;
use std::path::Path;

use watchdog_core::sys::{
    cwd_is_fifo, fd_flags, fd_is_fifo, fd_links, fd_target, fdinfo, read_syscall, read_tcp,
    read_unix, socket_inode, thread_ids, thread_syscall, SyscallError,
};
use watchdog_core::ProcState;

use super::net::TcpConn;
use super::syscall::weight;
pub use super::syscall::{classify, epoll_targets, sanitize, Blocked, Wait};
use super::ProcStat;

/// The most threads of one process looked at.
const MAX_THREADS: usize = 64;
/// The most descriptors a `poll` is read for.
const MAX_POLL_FDS: usize = 256;

/// Describes blocking points for the processes of one sample, reading the
/// socket tables and the tree's pipes at most once per sample.
pub(crate) struct Inspector<'a> {
    root: &'a Path,
    system: bool,
    tree: &'a [ProcStat],
    tcp: Option<HashMap<u64, TcpConn>>,
    unix: Option<HashMap<u64, String>>,
    /// Pipe or FIFO link text -> (holder pid, may write).
    pipes: Option<HashMap<String, Vec<(u32, bool)>>>,
    /// Look through each process's descriptors for a connection in
    /// `CLOSE_WAIT` (a verdict's look only: it reads every descriptor).
    dead_connections: bool,
}

impl<'a> Inspector<'a> {
    pub(crate) fn new(root: &'a Path, system: bool, tree: &'a [ProcStat]) -> Inspector<'a> {
        Inspector {
            root,
            system,
            tree,
            tcp: None,
            unix: None,
            pipes: None,
            dead_connections: false,
        }
    }

    /// Also names a connection in `CLOSE_WAIT` that a process holds,
    /// whatever it waits on (R8.13); for a verdict's look, not for the
    /// periodic samples (R9.4's budget).
    pub(crate) fn with_dead_connections(mut self) -> Self {
        self.dead_connections = true;
        self
    }

    /// What process `pid` (in `state`, kernel wait `wchan`) is blocked on;
    /// `None` when it is gone or neither sleeping nor running.
    pub(crate) fn describe(
        &mut self,
        pid: u32,
        state: ProcState,
        wchan: Option<&str>,
    ) -> Option<String> {
        if !matches!(
            state,
            ProcState::Sleeping | ProcState::DiskWait | ProcState::Running
        ) {
            return None;
        }
        let main = match read_syscall(self.root, pid) {
            Ok(main) => main,
            Err(SyscallError::Gone { .. }) => return None,
            Err(why) => return Some(sanitize(&with_wchan(why.to_string(), wchan))),
        };
        let (mut thread, blocked) = self.busiest_thread(pid, main);
        let mut text = match blocked {
            Blocked::Running if state == ProcState::Running => "running on a CPU".to_owned(),
            Blocked::Running => with_wchan("blocked outside a system call".into(), wchan),
            Blocked::In { nr, args } => self.call(pid, nr, &args),
        };
        // An event loop's main thread waits on everything it serves (the
        // terminal, a wake-up fd); where it waits on no TCP connection and
        // another thread does (a runtime's HTTP thread, as in Bun), that
        // thread's wait is the one that says why it is silent (R8.13).
        if thread.is_none() && is_multiplexer(&blocked) && !names_tcp_connection(&text) {
            if let Some((tid, on_tcp)) = self.thread_on_tcp(pid) {
                thread = Some(tid);
                text = on_tcp;
            }
        }
        let mut text = match thread {
            Some(tid) => format!("{text} (thread {tid})"),
            None => text,
        };
        // R8.13, R8.16: a connection its peer closed is a dead stream
        // whatever the process waits on (a sleep, a futex, a retry loop):
        // worth a word even when the wait names something else.
        if self.dead_connections && !text.contains("CLOSE_WAIT") {
            if let Some(dead) = self.dead_connection(pid) {
                text.push_str(&format!("; holds {dead}"));
            }
        }
        Some(sanitize(&text))
    }

    /// The first TCP connection in `CLOSE_WAIT` among `pid`'s descriptors
    /// (the first [`MAX_POLL_FDS`] looked at), with how many more.
    fn dead_connection(&mut self, pid: u32) -> Option<String> {
        let mut inodes: Vec<u64> = fd_links(self.root, pid, MAX_POLL_FDS)
            .ok()?
            .iter()
            .filter_map(|(_, link)| socket_inode(link))
            .collect();
        if inodes.is_empty() {
            return None;
        }
        inodes.sort_unstable();
        // The connection table, read once per look (as `socket` does).
        let _ = self.socket(pid, inodes[0]);
        let tcp = self.tcp.as_ref()?;
        let dead: Vec<&TcpConn> = inodes
            .iter()
            .filter_map(|i| tcp.get(i))
            .filter(|c| c.state == "CLOSE_WAIT")
            .collect();
        let first = dead.first()?;
        Some(match dead.len() {
            1 => format!("a dead connection: {first}"),
            n => format!("a dead connection: {first}; {} more", n - 1),
        })
    }

    /// The main thread's blocking point unless another thread's says more
    /// (the main thread of a runtime parks in a lock while a worker reads).
    fn busiest_thread(&self, pid: u32, main: Blocked) -> (Option<u32>, Blocked) {
        if weight(&main) >= 3 {
            return (None, main);
        }
        let Ok(tids) = thread_ids(self.root, pid) else {
            return (None, main);
        };
        let mut best = (None, main);
        for tid in tids.into_iter().take(MAX_THREADS) {
            if tid == pid {
                continue;
            }
            let Some(b) = thread_syscall(self.root, pid, Some(tid)).ok().flatten() else {
                continue;
            };
            if weight(&b) > weight(&best.1) {
                best = (Some(tid), b);
            }
        }
        best
    }

    /// The first thread of `pid` (not the main one) whose blocking point
    /// names a TCP connection, with that blocking point.
    fn thread_on_tcp(&mut self, pid: u32) -> Option<(u32, String)> {
        let mut tids: Vec<u32> = thread_ids(self.root, pid)
            .ok()?
            .into_iter()
            .take(MAX_THREADS)
            .filter(|&tid| tid != pid)
            .collect();
        tids.sort_unstable();
        tids.into_iter().find_map(|tid| {
            let Ok(Some(Blocked::In { nr, args })) = thread_syscall(self.root, pid, Some(tid))
            else {
                return None;
            };
            let said = self.call(pid, nr, &args);
            names_tcp_connection(&said).then_some((tid, said))
        })
    }

    fn call(&mut self, pid: u32, nr: libc::c_long, args: &[u64; 6]) -> String {
        let fd = args[0];
        match nr {
            libc::SYS_futex => "waiting on a lock (futex)".into(),
            libc::SYS_nanosleep | libc::SYS_clock_nanosleep => "sleeping (nanosleep)".into(),
            libc::SYS_wait4 => self.wait_child(pid, args[0] as i32),
            libc::SYS_waitid => match args[0] {
                1 => self.wait_child(pid, args[1] as i32),
                _ => self.wait_child(pid, -1),
            },
            libc::SYS_flock => format!("waiting for a lock (flock) on {}", self.target(pid, fd)),
            libc::SYS_fcntl
                if args[1] == libc::F_SETLKW as u64 || args[1] == libc::F_OFD_SETLKW as u64 =>
            {
                format!("waiting for a lock (fcntl) on {}", self.target(pid, fd))
            }
            libc::SYS_accept | libc::SYS_accept4 => {
                format!("waiting for a connection: {}", self.target(pid, fd))
            }
            libc::SYS_connect => format!("connecting: {}", self.target(pid, fd)),
            libc::SYS_write
            | libc::SYS_writev
            | libc::SYS_pwrite64
            | libc::SYS_sendto
            | libc::SYS_sendmsg => {
                let t = self.target(pid, fd);
                if t.starts_with("a pipe") || t.starts_with("the FIFO") {
                    format!("writing {}", self.pipe_peers(pid, fd, &t, false))
                } else {
                    format!("writing {t}")
                }
            }
            // A shell's `wait` builtin sleeps in sigsuspend for SIGCHLD.
            libc::SYS_rt_sigsuspend if self.tree.iter().any(|p| p.ppid == pid) => {
                format!("{} (sigsuspend)", self.wait_child(pid, -1))
            }
            libc::SYS_rt_sigsuspend | libc::SYS_rt_sigtimedwait => "waiting for a signal".into(),
            #[cfg(target_arch = "x86_64")]
            libc::SYS_pause => "waiting for a signal".into(),
            libc::SYS_openat => self.opening(pid, args[1]),
            #[cfg(target_arch = "x86_64")]
            libc::SYS_open => self.opening(pid, args[0]),
            _ => match classify(nr, args) {
                Wait::Reads(fd) => self.reading(pid, fd),
                Wait::Epoll(epfd) => {
                    let fds = fdinfo(self.root, pid, epfd)
                        .map(|i| epoll_targets(&i))
                        .unwrap_or_default();
                    self.waiting_on(pid, "epoll", &fds)
                }
                Wait::Below(nfds) => {
                    let fds = self.select_fds(pid, nfds, args[1], args[2]);
                    self.waiting_on(pid, "select", &fds)
                }
                Wait::Any => {
                    let fds = self.poll_fds(pid, args[0], args[1]);
                    self.waiting_on(pid, "poll", &fds)
                }
                Wait::Other => format!("in system call {nr}"),
            },
        }
    }

    /// An `open` that blocks: a FIFO waiting for its other end, mostly.
    fn opening(&self, pid: u32, path_ptr: u64) -> String {
        let path = self.peek(pid, path_ptr, 256).map(|b| {
            let end = b.iter().position(|&c| c == 0).unwrap_or(b.len());
            String::from_utf8_lossy(&b[..end]).into_owned()
        });
        let Some(path) = path.filter(|p| !p.is_empty()) else {
            return "opening a file".into();
        };
        if cwd_is_fifo(self.root, pid, &path) {
            format!("opening the FIFO {path}, which no process has open at the other end")
        } else {
            format!("opening the file {path}")
        }
    }

    fn reading(&mut self, pid: u32, fd: u64) -> String {
        let t = self.target(pid, fd);
        if t.starts_with("the terminal") {
            format!("waiting for input: reading {t}")
        } else if t.starts_with("a pipe") || t.starts_with("the FIFO") {
            format!("reading {}", self.pipe_peers(pid, fd, &t, true))
        } else {
            format!("reading {t}")
        }
    }

    fn waiting_on(&mut self, pid: u32, how: &str, fds: &[u64]) -> String {
        let named: Vec<String> = fds
            .iter()
            .filter_map(|&fd| {
                let t = self.target(pid, fd);
                (!t.starts_with("an anon")).then(|| format!("{fd}: {t}"))
            })
            .collect();
        let mut s = format!("waiting ({how}) on {} fds", fds.len());
        if !named.is_empty() {
            let more = named.len().saturating_sub(3);
            s.push_str(&format!(" ({}", named[..named.len().min(3)].join("; ")));
            if more > 0 {
                s.push_str(&format!("; {more} more"));
            }
            s.push(')');
        }
        s
    }

    fn wait_child(&self, pid: u32, which: i32) -> String {
        let kids: Vec<String> = self
            .tree
            .iter()
            .filter(|p| p.ppid == pid && (which <= 0 || p.pid == which as u32))
            .take(3)
            .map(|p| format!("{}[{}]", p.comm, p.pid))
            .collect();
        if !kids.is_empty() {
            format!("waiting for child {}", kids.join(", "))
        } else if which > 0 {
            format!("waiting for child {which}")
        } else {
            "waiting for a child".into()
        }
    }

    /// Names what `pid`'s descriptor `fd` is: the terminal, a pipe, a
    /// FIFO, a file, a TCP or Unix socket.
    fn target(&mut self, pid: u32, fd: u64) -> String {
        let Ok(link) = fd_target(self.root, pid, fd) else {
            return format!("fd {fd}");
        };
        if let Some(inode) = socket_inode(&link) {
            return self.socket(pid, inode);
        }
        if link.starts_with("pipe:[") {
            return "a pipe".into();
        }
        if let Some(kind) = link.strip_prefix("anon_inode:") {
            return format!("an anon {kind}");
        }
        if link.starts_with("/dev/pts/") || link.starts_with("/dev/tty") || link == "/dev/console" {
            return format!("the terminal {link}");
        }
        if fd_is_fifo(self.root, pid, fd) {
            return format!("the FIFO {link}");
        }
        if link.starts_with('/') {
            return format!("the file {link}");
        }
        link
    }

    fn socket(&mut self, pid: u32, inode: u64) -> String {
        if self.tcp.is_none() {
            self.tcp = Some(read_tcp(self.root, pid));
        }
        if let Some(c) = self.tcp.as_ref().and_then(|t| t.get(&inode)) {
            return c.to_string();
        }
        if self.unix.is_none() {
            self.unix = Some(read_unix(self.root, pid));
        }
        match self.unix.as_ref().and_then(|u| u.get(&inode)) {
            Some(p) if p.is_empty() => "an unnamed Unix socket".into(),
            Some(p) => format!("the Unix socket {p}"),
            None => format!("socket:[{inode}]"),
        }
    }

    /// `what` ("a pipe", "the FIFO ...") with the task's processes that
    /// hold its other end: writers for a reader, readers for a writer.
    fn pipe_peers(&mut self, pid: u32, fd: u64, what: &str, reading: bool) -> String {
        let key = fd_target(self.root, pid, fd).unwrap_or_default();
        let (root, tree) = (self.root, self.tree);
        let pipes = self.pipes.get_or_insert_with(|| pipe_holders(root, tree));
        let peers: Vec<String> = pipes
            .get(&key)
            .into_iter()
            .flatten()
            .filter(|(p, w)| *p != pid && *w == reading)
            .filter_map(|(p, _)| tree.iter().find(|s| s.pid == *p))
            .take(3)
            .map(|s| format!("{}[{}]", s.comm, s.pid))
            .collect();
        let role = if reading { "written" } else { "read" };
        if peers.is_empty() {
            format!("{what} that no other process of the task holds open to be {role}")
        } else {
            format!("{what} {role} by {}", peers.join(", "))
        }
    }

    /// The descriptors of a `poll`, read from the process's memory.
    fn poll_fds(&self, pid: u32, ptr: u64, nfds: u64) -> Vec<u64> {
        let n = (nfds as usize).min(MAX_POLL_FDS);
        let Some(bytes) = self.peek(pid, ptr, n * 8) else {
            return Vec::new();
        };
        bytes
            .chunks_exact(8)
            .filter_map(|c| {
                let fd = i32::from_ne_bytes([c[0], c[1], c[2], c[3]]);
                u64::try_from(fd).ok()
            })
            .collect()
    }

    /// The descriptors of a `select`'s read and write sets.
    fn select_fds(&self, pid: u32, nfds: u64, readfds: u64, writefds: u64) -> Vec<u64> {
        let n = (nfds as usize).min(1024);
        let len = n.div_ceil(64) * 8;
        let mut fds = Vec::new();
        for set in [readfds, writefds] {
            if set == 0 {
                continue;
            }
            let Some(bytes) = self.peek(pid, set, len) else {
                continue;
            };
            for fd in 0..n {
                if bytes[fd / 8] & (1 << (fd % 8)) != 0 && !fds.contains(&(fd as u64)) {
                    fds.push(fd as u64);
                }
            }
        }
        fds
    }

    /// Reads `len` bytes at `addr` in process `pid`'s memory (the same
    /// right as reading its `syscall` file); `None` in fixtures.
    fn peek(&self, pid: u32, addr: u64, len: usize) -> Option<Vec<u8>> {
        if !self.system || len == 0 || addr == 0 {
            return None;
        }
        let mut buf = vec![0u8; len];
        let local = libc::iovec {
            iov_base: buf.as_mut_ptr().cast(),
            iov_len: len,
        };
        let remote = libc::iovec {
            iov_base: addr as *mut libc::c_void,
            iov_len: len,
        };
        // SAFETY: `local` points at `len` writable bytes we own; the remote
        // range is only read by the kernel, which checks it.
        let got = unsafe { libc::process_vm_readv(pid as libc::pid_t, &local, 1, &remote, 1, 0) };
        (got == len as isize).then_some(buf)
    }
}

/// Every pipe and FIFO the tree's processes hold, with who holds it and
/// whether it may write (from `/proc/PID/fdinfo/N`'s `flags`).
fn pipe_holders(root: &Path, tree: &[ProcStat]) -> HashMap<String, Vec<(u32, bool)>> {
    let mut map: HashMap<String, Vec<(u32, bool)>> = HashMap::new();
    for p in tree {
        let Ok(links) = fd_links(root, p.pid, usize::MAX) else {
            continue;
        };
        for (fd, link) in links {
            let fifo = link.starts_with('/') && fd_is_fifo(root, p.pid, fd);
            if !link.starts_with("pipe:[") && !fifo {
                continue;
            }
            let writes = fd_flags(root, p.pid, fd)
                .is_some_and(|f| f & libc::O_ACCMODE as u32 != libc::O_RDONLY as u32);
            let holders = map.entry(link).or_default();
            if !holders.contains(&(p.pid, writes)) {
                holders.push((p.pid, writes));
            }
        }
    }
    map
}

fn with_wchan(text: String, wchan: Option<&str>) -> String {
    match wchan.filter(|w| !w.is_empty() && *w != "0") {
        Some(w) => format!("{text}; kernel wait: {w}"),
        None => text,
    }
}

/// Whether a thread waits in `poll`, `select` or `epoll`: on many fds.
fn is_multiplexer(b: &Blocked) -> bool {
    match b {
        Blocked::In { nr, args } => {
            matches!(
                classify(*nr, args),
                Wait::Epoll(_) | Wait::Below(_) | Wait::Any
            )
        }
        Blocked::Running => false,
    }
}

/// Whether a blocking point's text names a TCP connection (not a
/// listener): `TCP a -> b STATE`, as `procs::net` writes it.
fn names_tcp_connection(text: &str) -> bool {
    text.match_indices("TCP ")
        .any(|(i, _)| !text[i + 4..].starts_with("listening"))
}

#[cfg(test)]
mod tests {
    use super::*;

    // R8.13: a kernel wait of "0" or nothing names no wait (kills `&&`
    // made `||` in `with_wchan`; ProcTable's reading of wchan drops both
    // as well, so only this function's own contract shows it).
    #[test]
    fn an_empty_or_zero_wchan_is_not_named() {
        assert_eq!(with_wchan("x".into(), Some("0")), "x");
        assert_eq!(with_wchan("x".into(), Some("")), "x");
        assert_eq!(with_wchan("x".into(), None), "x");
        assert_eq!(
            with_wchan("x".into(), Some("pipe_read")),
            "x; kernel wait: pipe_read"
        );
    }

    #[test]
    fn a_lock_says_less_than_io() {
        let io = Blocked::In {
            nr: libc::SYS_read,
            args: [0; 6],
        };
        let lock = Blocked::In {
            nr: libc::SYS_futex,
            args: [0; 6],
        };
        assert!(weight(&io) > weight(&lock) && weight(&lock) > weight(&Blocked::Running));
    }
}
