//! The socket tables of `/proc/net` (`tcp`, `tcp6`, `unix`), read to say
//! what a process blocked on a socket waits for (R8.13), by the core's one
//! owner of the process table ([`watchdog_core::sys`], R10.7) and
//! re-exported here where they always were; and the kernel's count of the
//! bytes each TCP socket received, asked through `NETLINK_SOCK_DIAG`
//! (R5.11).

use std::collections::HashMap;

#[cfg(test)]
use watchdog_core::sys::TCP_STATES as STATES;
pub use watchdog_core::sys::{parse_tcp, parse_unix, TcpConn};

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
