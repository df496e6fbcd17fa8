//! Bytes received on the TCP sockets a process tree holds, sample to
//! sample: what the `net` signal measures (R5.11).

use std::collections::HashMap;
use std::io;
use std::os::fd::AsRawFd;
use std::path::PathBuf;

use watchdog_core::sys::{fd_links, proc_root, socket_inode, Pidfd};

use super::net::tcp_bytes_received;

/// Samples a socket no process of the tree held stays remembered, so one
/// out of sight for a moment is not counted in full again.
const FORGET_AFTER: u32 = 4;

/// Counts the bytes a process tree's TCP sockets (IPv4 and IPv6) received
/// between two samples (R5.11), so a download that is still receiving can
/// be told from a stream that stopped sending: both sit in `poll` using no
/// CPU.
///
/// Each sample lists the tree's sockets (`socket:[INODE]` in
/// `/proc/PID/fd`) and reads each one's `tcpi_bytes_received`: through a
/// copy of the descriptor taken with `pidfd_getfd` (Linux 5.6+, allowed to
/// an ancestor such as stallwarden) and `getsockopt(TCP_INFO)`, closed at
/// once; for a process that refuses that, from one `sock_diag` dump of the
/// machine's TCP sockets ([`tcp_bytes_received`]). The dump walks the
/// kernel's whole connection table (about 1 ms here, whatever the socket
/// count), the copies cost a few system calls per socket. The first sample
/// is the baseline: it counts nothing. After that, per socket the tree
/// holds:
///
/// - a socket seen at the previous sample counts what it received since;
/// - a socket new since the previous sample counts everything it received
///   since it opened: those bytes arrived after the last look, so they are
///   progress (a client that reconnects and resumes is receiving);
/// - a socket the tree no longer holds counts nothing more; its reading is
///   kept for a few samples, so one that could not be read once is not
///   counted in full again when it is seen again.
///
/// Not seen: bytes a socket received between the last sample and its
/// close, and a connection that opened and closed between two samples.
/// The kernel keeps no per-process total of a closed socket's bytes (as it
/// does a reaped child's CPU in `cutime`), so a command made of short
/// requests is better kept alive by its output or `cpu`. Through the dump,
/// only sockets of stallwarden's network namespace are seen.
///
/// # Examples
///
/// ```
/// use std::io::{Read, Write};
/// use stallwarden_sources::procs::NetMeter;
/// # #[cfg(target_os = "linux")] {
/// let me = std::process::id();
/// let mut meter = NetMeter::new();
/// assert_eq!(meter.sample(&[me]).unwrap(), None); // the baseline
/// let server = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
/// let mut client = std::net::TcpStream::connect(server.local_addr().unwrap()).unwrap();
/// let (mut conn, _) = server.accept().unwrap();
/// conn.write_all(&[1; 500]).unwrap();
/// client.read_exact(&mut [0; 500]).unwrap();
/// // A new socket counts what it received since it opened; the accepted
/// // end, held by this process too, received nothing.
/// assert_eq!(meter.sample(&[me]).unwrap(), Some(500));
/// assert_eq!(meter.sample(&[me]).unwrap(), Some(0)); // silent since
/// # }
/// ```
#[derive(Debug)]
pub struct NetMeter {
    proc_root: PathBuf,
    /// Read every socket from the dump, never through a descriptor copy.
    dump_only: bool,
    /// Bytes received by every socket the tree held, by inode, as last
    /// read, with the sample it was last held at; absent before the
    /// baseline.
    prev: Option<HashMap<u64, (u64, u32)>>,
    samples: u32,
}

impl Default for NetMeter {
    fn default() -> Self {
        NetMeter::new()
    }
}

impl NetMeter {
    /// A meter reading the system's `/proc` and the kernel's TCP sockets.
    pub fn new() -> NetMeter {
        NetMeter {
            proc_root: proc_root().into(),
            dump_only: false,
            prev: None,
            samples: 0,
        }
    }

    /// Reads every socket from the `sock_diag` dump, as for a process that
    /// refuses `pidfd_getfd`: kept for comparing the two ways.
    ///
    /// # Examples
    ///
    /// ```
    /// use stallwarden_sources::procs::NetMeter;
    /// let mut meter = NetMeter::new().dump_only();
    /// # #[cfg(target_os = "linux")]
    /// assert_eq!(meter.sample(&[std::process::id()]).unwrap(), None);
    /// ```
    #[must_use]
    pub fn dump_only(mut self) -> NetMeter {
        self.dump_only = true;
        self
    }

    /// Reads the TCP sockets held by `pids` and returns the bytes they
    /// received since the previous sample; `None` for the first sample,
    /// which is the baseline. Processes that are gone or cannot be read
    /// are skipped. An error means sockets had to be read from the
    /// kernel's socket table and it could not be (no `NETLINK_SOCK_DIAG`).
    pub fn sample(&mut self, pids: &[u32]) -> io::Result<Option<u64>> {
        let held = self.read_held(pids)?;
        self.samples = self.samples.wrapping_add(1);
        let now_at = self.samples;
        let prev = self.prev.take();
        let mut next = HashMap::with_capacity(held.len());
        let mut received = 0u64;
        for (inode, now) in held {
            let before = prev
                .as_ref()
                .map(|p| p.get(&inode).map_or(0, |&(bytes, _)| bytes));
            if let Some(before) = before {
                received = received.saturating_add(now.saturating_sub(before));
            }
            next.insert(inode, (now, now_at));
        }
        for (inode, &(bytes, at)) in prev.iter().flatten() {
            if now_at.wrapping_sub(at) < FORGET_AFTER {
                next.entry(*inode).or_insert((bytes, at));
            }
        }
        let first = prev.is_none();
        self.prev = Some(next);
        Ok((!first).then_some(received))
    }

    /// Bytes received by each TCP socket that `pids` hold, by inode.
    fn read_held(&self, pids: &[u32]) -> io::Result<HashMap<u64, u64>> {
        let mut held = HashMap::new();
        let mut unread = Vec::new();
        for &pid in pids {
            let sockets = self.sockets_of(pid);
            if sockets.is_empty() {
                continue;
            }
            let pidfd = (!self.dump_only).then(|| pidfd_open(pid)).flatten();
            for (fd, inode) in sockets {
                if held.contains_key(&inode) {
                    continue; // shared with a process already read
                }
                match pidfd.as_ref().map(|p| tcp_bytes_of(p, fd)) {
                    Some(Ok(Some(bytes))) => {
                        held.insert(inode, bytes);
                    }
                    Some(Ok(None)) => {} // not a TCP socket
                    _ => unread.push(inode),
                }
            }
        }
        if !unread.is_empty() {
            let all = tcp_bytes_received()?;
            for inode in unread {
                if let Some(&bytes) = all.get(&inode) {
                    held.insert(inode, bytes);
                }
            }
        }
        Ok(held)
    }

    /// The socket descriptors of `pid` and their inodes, from the
    /// `socket:[INODE]` links in `/proc/PID/fd`; none if it cannot be read.
    fn sockets_of(&self, pid: u32) -> Vec<(i32, u64)> {
        let Ok(links) = fd_links(&self.proc_root, pid, usize::MAX) else {
            return Vec::new();
        };
        links
            .iter()
            .filter_map(|(fd, link)| Some((i32::try_from(*fd).ok()?, socket_inode(link)?)))
            .collect()
    }
}

/// A pidfd for `pid`, if the kernel has them and the process lives.
fn pidfd_open(pid: u32) -> Option<Pidfd> {
    Pidfd::open(pid).ok()
}

/// `tcpi_bytes_received` of descriptor `fd` of the process behind `pidfd`,
/// read through a copy of it that is closed at once: `Ok(None)` for a
/// socket that is not TCP (or a kernel older than 4.1 that lacks the
/// count), an error when the copy is refused.
fn tcp_bytes_of(pidfd: &Pidfd, fd: i32) -> io::Result<Option<u64>> {
    /// `tcpi_bytes_received`'s offset in `struct tcp_info`.
    const BYTES_RECEIVED: usize = 128;
    let copy = match pidfd.get_fd(fd) {
        Ok(copy) => copy,
        // The descriptor was closed since it was listed: nothing to read.
        Err(e) if e.raw_os_error() == Some(libc::EBADF) => return Ok(None),
        Err(e) => return Err(e),
    };
    let mut info = [0u8; 256];
    let mut len = info.len() as libc::socklen_t;
    // SAFETY: `info` is writable for `len` bytes and `len` is its size.
    let ok = unsafe {
        libc::getsockopt(
            copy.as_raw_fd(),
            libc::SOL_TCP,
            libc::TCP_INFO,
            info.as_mut_ptr().cast(),
            &mut len,
        )
    };
    if ok != 0 {
        return Ok(None);
    }
    // What the kernel wrote; short of the count before Linux 4.1.
    let bytes = info
        .get(..len as usize)
        .and_then(|written| written.get(BYTES_RECEIVED..BYTES_RECEIVED + 8));
    Ok(bytes.map(|b| u64::from_ne_bytes(b.try_into().expect("8 bytes"))))
}

#[cfg(test)]
mod tests {
    use super::super::net::tests::without_netlink;
    use super::*;

    use std::io::{Read, Write};
    use std::net::{TcpListener, TcpStream};
    use std::os::unix::fs::MetadataExt;
    use std::os::unix::net::UnixStream;

    /// A loopback connection whose client end received `n` bytes.
    fn connection(n: usize) -> (TcpStream, TcpStream) {
        let server = TcpListener::bind("127.0.0.1:0").unwrap();
        let mut client = TcpStream::connect(server.local_addr().unwrap()).unwrap();
        let (mut conn, _) = server.accept().unwrap();
        conn.write_all(&vec![1; n]).unwrap();
        client.read_exact(&mut vec![0; n]).unwrap();
        (client, conn)
    }

    // R5.11: a descriptor of a living process is read through a copy: a
    // TCP socket's count, nothing for a Unix socket (kills the issue-26
    // mutants of pidfd_open and tcp_bytes_of that lose the pidfd or the
    // copy, or read a Unix socket).
    #[test]
    fn a_copy_of_a_descriptor_reads_a_tcp_sockets_count() {
        let (client, _server) = connection(1000);
        let (unix, _peer) = UnixStream::pair().unwrap();
        let me = pidfd_open(std::process::id()).expect("a pidfd of this process");
        assert_eq!(tcp_bytes_of(&me, client.as_raw_fd()).unwrap(), Some(1000));
        assert_eq!(tcp_bytes_of(&me, unix.as_raw_fd()).unwrap(), None);
    }

    // R5.11: a descriptor closed since it was listed reads as nothing; a
    // process that is gone refuses the copy, an error, so its sockets are
    // looked up in the dump instead (kills the issue-26 mutant of
    // tcp_bytes_of that swaps the two).
    #[test]
    fn a_closed_descriptor_is_nothing_and_a_process_gone_an_error() {
        let mut child = std::process::Command::new("sleep")
            .arg("60")
            .stdin(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let pidfd = pidfd_open(child.id()).expect("a pidfd of the child");
        let got = tcp_bytes_of(&pidfd, 9999); // sleep holds 0, 1 and 2
        child.kill().unwrap();
        child.wait().unwrap();
        assert_eq!(got.unwrap(), None, "descriptor 9999");
        let got = tcp_bytes_of(&pidfd, 0);
        assert_eq!(got.unwrap_err().raw_os_error(), Some(libc::ESRCH));
    }

    // R5.11: a meter reads the sockets a process holds through copies and
    // does not need the kernel's socket table: it works where netlink is
    // refused (kills the issue-26 mutants of read_held and pidfd_open that
    // send a TCP or a Unix socket, or every socket, to the dump).
    #[test]
    fn a_meter_reads_held_sockets_without_the_socket_table() {
        let (client, _server) = connection(10);
        let (unix, _peer) = UnixStream::pair().unwrap();
        let got = without_netlink(|| {
            let me = [std::process::id()];
            let mut meter = NetMeter::new();
            (
                meter.sample(&me).map_err(|e| e.to_string()),
                meter.sample(&me).map_err(|e| e.to_string()),
            )
        });
        if let Some((baseline, next)) = got {
            assert_eq!(baseline, Ok(None));
            assert!(matches!(next, Ok(Some(_))), "{next:?}");
        }
        drop((client, unix));
    }

    // R5.11: a dump-only meter reads the kernel's socket table, and fails
    // where netlink is refused (kills the issue-26 mutant of dump_only).
    #[test]
    fn a_dump_only_meter_needs_the_socket_table() {
        let (client, _server) = connection(10);
        let got = without_netlink(|| {
            NetMeter::new()
                .dump_only()
                .sample(&[std::process::id()])
                .map_err(|e| e.raw_os_error())
        });
        if let Some(got) = got {
            assert_eq!(got, Err(Some(libc::EACCES)));
        }
        let inode = std::fs::metadata(format!("/proc/self/fd/{}", client.as_raw_fd()))
            .unwrap()
            .ino();
        assert!(tcp_bytes_received().unwrap().contains_key(&inode));
    }
}
