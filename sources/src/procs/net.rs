//! The socket tables of `/proc/net` (`tcp`, `tcp6`, `unix`), read to say
//! what a process blocked on a socket waits for (R8.13).

use std::collections::HashMap;
use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

/// One TCP connection from `/proc/net/tcp` or `tcp6`.
///
/// # Examples
///
/// ```
/// use stallwarden_sources::procs::net::parse_tcp;
///
/// let table = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n   \
///     0: 0100007F:1F90 0100007F:D431 08 00000000:00000000 00:00000000 00000000     0        0 4242 1 0 20 4 30 10 -1\n";
/// let conns = parse_tcp(table);
/// let c = &conns[&4242];
/// assert_eq!(c.remote.to_string(), "127.0.0.1:54321");
/// assert_eq!(c.to_string(), "TCP 127.0.0.1:8080 -> 127.0.0.1:54321 CLOSE_WAIT (the peer closed the connection)");
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TcpConn {
    /// This end's address.
    pub local: SocketAddr,
    /// The peer's address (`0.0.0.0:0` for a listener).
    pub remote: SocketAddr,
    /// The state's name as `ss` prints it (`ESTABLISHED`, `CLOSE_WAIT`, ...).
    pub state: &'static str,
}

impl TcpConn {
    /// Returns true for a listening socket.
    pub fn listening(&self) -> bool {
        self.state == "LISTEN"
    }
}

impl fmt::Display for TcpConn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.listening() {
            return write!(f, "TCP listening on {}", self.local);
        }
        write!(f, "TCP {} -> {} {}", self.local, self.remote, self.state)?;
        match self.state {
            "CLOSE_WAIT" => f.write_str(" (the peer closed the connection)"),
            "SYN_SENT" => f.write_str(" (connecting)"),
            _ => Ok(()),
        }
    }
}

const STATES: [&str; 12] = [
    "UNKNOWN",
    "ESTABLISHED",
    "SYN_SENT",
    "SYN_RECV",
    "FIN_WAIT1",
    "FIN_WAIT2",
    "TIME_WAIT",
    "CLOSE",
    "CLOSE_WAIT",
    "LAST_ACK",
    "LISTEN",
    "CLOSING",
];

/// Parses `/proc/net/tcp` or `/proc/net/tcp6` into connections keyed by
/// socket inode; lines that do not parse are skipped.
pub fn parse_tcp(text: &str) -> HashMap<u64, TcpConn> {
    text.lines()
        .skip(1)
        .filter_map(|line| {
            let f: Vec<&str> = line.split_ascii_whitespace().take(10).collect();
            if f.len() < 10 {
                return None;
            }
            let state = usize::from_str_radix(f[3], 16).ok()?;
            let conn = TcpConn {
                local: addr(f[1])?,
                remote: addr(f[2])?,
                state: STATES.get(state).copied().unwrap_or("UNKNOWN"),
            };
            Some((f[9].parse().ok()?, conn))
        })
        .collect()
}

/// `0100007F:1F90` (IPv4, host-order words) or 32 hex digits (IPv6, four
/// host-order words) then the port.
fn addr(text: &str) -> Option<SocketAddr> {
    let (ip, port) = text.split_once(':')?;
    let port = u16::from_str_radix(port, 16).ok()?;
    let word = |i: usize| -> Option<[u8; 4]> {
        let w = u32::from_str_radix(ip.get(i * 8..i * 8 + 8)?, 16).ok()?;
        // The kernel prints each 32-bit word in the machine's byte order.
        Some(w.to_ne_bytes())
    };
    let ip = match ip.len() {
        8 => IpAddr::V4(Ipv4Addr::from(word(0)?)),
        32 => {
            let mut b = [0u8; 16];
            for i in 0..4 {
                b[i * 4..i * 4 + 4].copy_from_slice(&word(i)?);
            }
            let v6 = Ipv6Addr::from(b);
            v6.to_ipv4_mapped().map_or(IpAddr::V6(v6), IpAddr::V4)
        }
        _ => return None,
    };
    Some(SocketAddr::new(ip, port))
}

/// Parses `/proc/net/unix` into paths keyed by socket inode; unnamed
/// sockets have an empty path, abstract ones start with `@`.
///
/// # Examples
///
/// ```
/// use stallwarden_sources::procs::net::parse_unix;
/// let t = "Num       RefCount Protocol Flags    Type St Inode Path\n\
///          0000000000000000: 00000002 00000000 00010000 0001 01 777 /run/app.sock\n\
///          0000000000000000: 00000002 00000000 00000000 0001 03 778\n";
/// let u = parse_unix(t);
/// assert_eq!(u[&777], "/run/app.sock");
/// assert_eq!(u[&778], "");
/// ```
pub fn parse_unix(text: &str) -> HashMap<u64, String> {
    text.lines()
        .skip(1)
        .filter_map(|line| {
            let mut f = line.split_ascii_whitespace();
            let inode = f.nth(6)?.parse().ok()?;
            Some((inode, f.collect::<Vec<_>>().join(" ")))
        })
        .collect()
}

/// Bytes received so far on every TCP socket of this network namespace,
/// keyed by socket inode (R5.11): `tcp_info.tcpi_bytes_received`, asked of
/// the kernel through `NETLINK_SOCK_DIAG` (`inet_diag`, IPv4 and IPv6): one
/// dump of both families, or one per family on a kernel without the older
/// request that gives both. Listening sockets, and those in `SYN_RECV` or
/// `TIME_WAIT` (no inode), are left out. Match the inodes to a task's
/// processes through `/proc/PID/fd` (`socket:[INODE]`). Linux 4.1 and later
/// report the count; older kernels leave sockets out.
///
/// # Examples
///
/// ```
/// use std::io::{Read, Write};
/// use std::os::unix::fs::MetadataExt;
/// # #[cfg(target_os = "linux")] {
/// let server = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
/// let mut client = std::net::TcpStream::connect(server.local_addr().unwrap()).unwrap();
/// let (mut conn, _) = server.accept().unwrap();
/// conn.write_all(&[7; 1000]).unwrap();
/// client.read_exact(&mut [0; 1000]).unwrap();
/// // A socket's inode is what fstat says of its descriptor.
/// let inode = std::fs::metadata(format!("/proc/self/fd/{}", std::os::fd::AsRawFd::as_raw_fd(&client)))
///     .unwrap()
///     .ino();
/// let received = stallwarden_sources::procs::net::tcp_bytes_received().unwrap();
/// assert_eq!(received[&inode], 1000);
/// # }
/// ```
pub fn tcp_bytes_received() -> std::io::Result<HashMap<u64, u64>> {
    dump_tcp(true)
}

/// [`tcp_bytes_received`], trying the one dump of both families first when
/// `both_at_once`.
fn dump_tcp(both_at_once: bool) -> std::io::Result<HashMap<u64, u64>> {
    use std::io;
    use std::os::fd::{FromRawFd, OwnedFd};

    // SAFETY: socket(2) has no memory preconditions; the result is owned.
    let raw = unsafe {
        libc::socket(
            libc::AF_NETLINK,
            libc::SOCK_DGRAM | libc::SOCK_CLOEXEC,
            libc::NETLINK_SOCK_DIAG,
        )
    };
    if raw < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `raw` is a fresh descriptor nothing else owns.
    let sock = unsafe { OwnedFd::from_raw_fd(raw) };
    let mut out = HashMap::new();
    let mut buf = vec![0u8; 64 * 1024];
    // A dump walks the kernel's whole established-socket hash table
    // (262 144 buckets on a 24 GiB machine), whatever the socket count: the
    // most of its cost. The old `TCPDIAG_GETSOCK` request dumps both
    // families in one walk; the per-family requests are the fallback for a
    // kernel without it.
    if both_at_once && diag_dump(&sock, &mut buf, &request(TCPDIAG_GETSOCK, 0, 1), &mut out).is_ok()
    {
        return Ok(out);
    }
    out.clear();
    for (seq, family) in [(2u32, libc::AF_INET), (3, libc::AF_INET6)] {
        let req = request(SOCK_DIAG_BY_FAMILY, family as u8, seq);
        diag_dump(&sock, &mut buf, &req, &mut out)?;
    }
    Ok(out)
}

/// The old inet_diag request type: TCP sockets of both families at once.
const TCPDIAG_GETSOCK: u16 = 18;
const SOCK_DIAG_BY_FAMILY: u16 = 20;
const INET_DIAG_INFO: u16 = 2;

/// A dump request for the TCP sockets that can hold received bytes: every
/// state but `LISTEN`, `SYN_RECV` and `TIME_WAIT` (the last two have no
/// inode), with `tcp_info`. For `TCPDIAG_GETSOCK` the body is an
/// `inet_diag_req` (family, lengths, ext, a zero 48-byte sockid, states,
/// dbs), for `SOCK_DIAG_BY_FAMILY` an `inet_diag_req_v2` (family, protocol,
/// ext, pad, states, the sockid).
fn request(kind: u16, family: u8, seq: u32) -> Vec<u8> {
    let states: u32 = 0xfff & !(1 << 10 | 1 << 6 | 1 << 3);
    let ext = 1u8 << (INET_DIAG_INFO - 1);
    let mut body = vec![0u8; if kind == TCPDIAG_GETSOCK { 60 } else { 56 }];
    if kind == TCPDIAG_GETSOCK {
        body[0] = libc::AF_INET as u8;
        body[3] = ext;
        body[52..56].copy_from_slice(&states.to_ne_bytes());
    } else {
        body[0] = family;
        body[1] = libc::IPPROTO_TCP as u8;
        body[2] = ext;
        body[4..8].copy_from_slice(&states.to_ne_bytes());
    }
    let len = 16 + body.len();
    let mut req = Vec::with_capacity(len);
    req.extend_from_slice(&(len as u32).to_ne_bytes());
    req.extend_from_slice(&kind.to_ne_bytes());
    req.extend_from_slice(&((libc::NLM_F_REQUEST | libc::NLM_F_DUMP) as u16).to_ne_bytes());
    req.extend_from_slice(&seq.to_ne_bytes());
    req.extend_from_slice(&0u32.to_ne_bytes());
    req.extend_from_slice(&body);
    req
}

/// Sends one dump request on `sock` and adds every socket's
/// `tcpi_bytes_received` to `out` by inode.
fn diag_dump(
    sock: &std::os::fd::OwnedFd,
    buf: &mut [u8],
    req: &[u8],
    out: &mut HashMap<u64, u64>,
) -> std::io::Result<()> {
    use std::io;
    use std::os::fd::AsRawFd;

    const NLMSG_ERROR: u16 = 2;
    const NLMSG_DONE: u16 = 3;
    /// `tcpi_bytes_received`'s offset in `struct tcp_info`.
    const BYTES_RECEIVED: usize = 128;

    // SAFETY: `req` is a valid buffer of its length.
    let sent = unsafe { libc::send(sock.as_raw_fd(), req.as_ptr().cast(), req.len(), 0) };
    if sent < 0 {
        return Err(io::Error::last_os_error());
    }
    loop {
        // SAFETY: `buf` is a valid writable buffer of its length.
        let n = unsafe { libc::recv(sock.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len(), 0) };
        if n < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        let mut msgs = &buf[..n as usize];
        if msgs.is_empty() {
            return Ok(());
        }
        while msgs.len() >= 16 {
            let len = u32::from_ne_bytes(msgs[0..4].try_into().expect("4 bytes")) as usize;
            let kind = u16::from_ne_bytes([msgs[4], msgs[5]]);
            if len < 16 || len > msgs.len() {
                return Ok(());
            }
            match kind {
                NLMSG_DONE => return Ok(()),
                NLMSG_ERROR => {
                    let code = msgs
                        .get(16..20)
                        .map_or(0, |c| i32::from_ne_bytes(c.try_into().expect("4 bytes")));
                    // An address family the kernel lacks (no IPv6).
                    if code == -libc::ENOENT || code == -libc::EAFNOSUPPORT || code == 0 {
                        return Ok(());
                    }
                    return Err(io::Error::from_raw_os_error(-code));
                }
                _ => {
                    let body = &msgs[16..len];
                    if body.len() >= 72 {
                        let inode = u64::from(u32::from_ne_bytes(
                            body[68..72].try_into().expect("4 bytes"),
                        ));
                        let mut attrs = &body[72..];
                        while attrs.len() >= 4 {
                            let alen = usize::from(u16::from_ne_bytes([attrs[0], attrs[1]]));
                            let atype = u16::from_ne_bytes([attrs[2], attrs[3]]);
                            if alen < 4 || alen > attrs.len() {
                                break;
                            }
                            let info = &attrs[4..alen];
                            if atype == INET_DIAG_INFO && info.len() >= BYTES_RECEIVED + 8 {
                                let bytes = u64::from_ne_bytes(
                                    info[BYTES_RECEIVED..BYTES_RECEIVED + 8]
                                        .try_into()
                                        .expect("8 bytes"),
                                );
                                if inode != 0 {
                                    out.insert(inode, bytes);
                                }
                            }
                            attrs = attrs.get((alen + 3) & !3..).unwrap_or(&[]);
                        }
                    }
                }
            }
            let step = (len + 3) & !3;
            msgs = msgs.get(step..).unwrap_or(&[]);
        }
    }
}

#[cfg(test)]
pub(super) mod tests;
