//! Bytes received on the TCP sockets a process tree holds, sample to
//! sample: what the `net` signal measures (R5.11).

use std::collections::{HashMap, HashSet};
use std::io;
use std::path::PathBuf;

use super::net::tcp_bytes_received;

/// Counts the bytes a process tree's TCP sockets (IPv4 and IPv6) received
/// between two samples (R5.11), so a download that is still receiving can
/// be told from a stream that stopped sending: both sit in `poll` using no
/// CPU.
///
/// Each sample asks the kernel for every TCP socket's
/// `tcpi_bytes_received` (one `sock_diag` dump per family, see
/// [`tcp_bytes_received`]) and reads the tree's socket inodes from
/// `/proc/PID/fd`. The first sample is the baseline: it counts nothing.
/// After that, per socket the tree holds:
///
/// - a socket seen at the previous sample counts what it received since;
/// - a socket new since the previous sample counts everything it received
///   since it opened: those bytes arrived after the last look, so they are
///   progress (a client that reconnects and resumes is receiving);
/// - a socket the tree no longer holds counts nothing more; its reading is
///   kept while the socket lives, so one that a process could not be read
///   for once (or passed back and forth) is not counted in full again when
///   it is seen again.
///
/// Not seen: bytes a socket received between the last sample and its
/// close, and a connection that opened and closed between two samples.
/// The kernel keeps no per-process total of a closed socket's bytes (as it
/// does a reaped child's CPU in `cutime`), so a command made of short
/// requests is better kept alive by its output or `cpu`. Sockets in
/// another network namespace than stallguard's are not seen either.
///
/// # Examples
///
/// ```
/// use std::io::{Read, Write};
/// use stallguard_sources::procs::NetMeter;
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
    /// Bytes received by every socket the tree held, by inode, as last
    /// read; absent before the baseline.
    prev: Option<HashMap<u64, u64>>,
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
            proc_root: PathBuf::from("/proc"),
            prev: None,
        }
    }

    /// Reads the TCP sockets held by `pids` and returns the bytes they
    /// received since the previous sample; `None` for the first sample,
    /// which is the baseline. Processes that are gone or cannot be read
    /// are skipped. An error means the kernel's socket table could not be
    /// read (no `NETLINK_SOCK_DIAG`); the baseline is kept.
    pub fn sample(&mut self, pids: &[u32]) -> io::Result<Option<u64>> {
        let all = tcp_bytes_received()?;
        let held = if all.is_empty() {
            HashSet::new()
        } else {
            self.socket_inodes(pids, &all)
        };
        let prev = self.prev.take();
        let mut next = HashMap::with_capacity(held.len());
        let mut received = 0u64;
        for inode in held {
            let now = all[&inode];
            let before = prev.as_ref().map(|p| p.get(&inode).copied().unwrap_or(0));
            if let Some(before) = before {
                received = received.saturating_add(now.saturating_sub(before));
            }
            next.insert(inode, now);
        }
        // Sockets out of sight but alive keep their last reading.
        for (inode, bytes) in prev.iter().flatten() {
            if all.contains_key(inode) {
                next.entry(*inode).or_insert(*bytes);
            }
        }
        let first = prev.is_none();
        self.prev = Some(next);
        Ok((!first).then_some(received))
    }

    /// The inodes of the TCP sockets (those in `tcp`) that `pids` hold
    /// open, from the `socket:[INODE]` links in `/proc/PID/fd`.
    fn socket_inodes(&self, pids: &[u32], tcp: &HashMap<u64, u64>) -> HashSet<u64> {
        let mut held = HashSet::new();
        for pid in pids {
            let Ok(fds) = std::fs::read_dir(self.proc_root.join(format!("{pid}/fd"))) else {
                continue;
            };
            for fd in fds.flatten() {
                let Ok(target) = std::fs::read_link(fd.path()) else {
                    continue;
                };
                let inode = target
                    .to_str()
                    .and_then(|t| t.strip_prefix("socket:["))
                    .and_then(|t| t.strip_suffix(']'))
                    .and_then(|t| t.parse::<u64>().ok());
                if let Some(inode) = inode.filter(|i| tcp.contains_key(i)) {
                    held.insert(inode);
                }
            }
        }
        held
    }
}
