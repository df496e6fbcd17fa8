//! A process's network namespace's socket tables, `PID/net/tcp`,
//! `PID/net/tcp6` and `PID/net/unix` (R8.13): TCP connections
//! ([`TcpConn`]) and Unix socket paths, each keyed by socket inode, so a
//! descriptor's `socket:[INODE]` can be named.

use std::collections::HashMap;
use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::path::Path;

/// One TCP connection from `/proc/net/tcp` or `tcp6`.
///
/// # Examples
///
/// ```
/// use watchdog_core::sys::parse_tcp;
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

/// The TCP states by the number `/proc/net/tcp` gives them (its `st`
/// column), named as `ss` names them.
///
/// # Examples
///
/// ```
/// assert_eq!(watchdog_core::sys::TCP_STATES[8], "CLOSE_WAIT");
/// ```
pub const TCP_STATES: [&str; 12] = [
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
                state: TCP_STATES.get(state).copied().unwrap_or("UNKNOWN"),
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
/// use watchdog_core::sys::parse_unix;
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

/// Reads the TCP connections of `pid`'s network namespace, IPv4 and IPv6
/// (`root/PID/net/tcp` and `tcp6`), keyed by socket inode; a table that
/// cannot be read adds nothing.
///
/// # Examples
///
/// ```
/// use watchdog_core::sys::{proc_root, read_tcp};
/// # #[cfg(target_os = "linux")] {
/// let server = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
/// let conns = read_tcp(proc_root(), std::process::id());
/// let port = server.local_addr().unwrap().port();
/// assert!(conns.values().any(|c| c.listening() && c.local.port() == port));
/// # }
/// ```
pub fn read_tcp(root: &Path, pid: u32) -> HashMap<u64, TcpConn> {
    let mut tcp = HashMap::new();
    for name in ["tcp", "tcp6"] {
        if let Ok(text) = std::fs::read_to_string(root.join(format!("{pid}/net/{name}"))) {
            tcp.extend(parse_tcp(&text));
        }
    }
    tcp
}

/// Reads the Unix sockets of `pid`'s network namespace
/// (`root/PID/net/unix`): paths keyed by socket inode, empty for an
/// unnamed socket; none when the table cannot be read.
pub fn read_unix(root: &Path, pid: u32) -> HashMap<u64, String> {
    std::fs::read_to_string(root.join(format!("{pid}/net/unix")))
        .map(|t| parse_unix(&t))
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_lines_are_skipped_and_v6_mapped_reads_as_v4() {
        let t = "header\n\
                 0: 0100007F:1F90 00000000:0000 0A 0:0 0:0 0 0 0 11 1\n\
                 1: zz:1F90 00000000:0000 0A 0:0 0:0 0 0 0 12 1\n\
                 2: 0000000000000000FFFF00000100007F:0050 00000000000000000000000000000000:0000 0A 0:0 0:0 0 0 0 13 1\n\
                 3: 0100007F:1F90 0100007F:1F91 FF 0:0 0:0 0 0 0 14 1\n\
                 short\n";
        let conns = parse_tcp(t);
        assert_eq!(conns.len(), 3);
        assert_eq!(conns[&11].to_string(), "TCP listening on 127.0.0.1:8080");
        assert_eq!(conns[&13].local.to_string(), "127.0.0.1:80");
        assert_eq!(conns[&14].state, "UNKNOWN");
    }

    // R8.13: a Unix socket is named by its path, found by its inode in the
    // namespace's table: a named socket by its path (spaces kept), an
    // abstract one with its `@`, an unnamed one by an empty path; the
    // header and a line cut short are left out.
    #[test]
    fn a_unix_socket_table_maps_each_inode_to_its_path() {
        let t = "Num       RefCount Protocol Flags    Type St Inode Path\n\
                 0000000000000000: 00000002 00000000 00010000 0001 01 777 /run/app.sock\n\
                 0000000000000000: 00000002 00000000 00000000 0001 03 778\n\
                 0000000000000000: 00000002 00000000 00010000 0005 01 779 @/tmp/.X11-unix/X0\n\
                 0000000000000000: 00000002 00000000 00010000 0001 01 780 /tmp/my app.sock\n\
                 0000000000000000: 00000002 00000000\n";
        let expected: HashMap<u64, String> = [
            (777, "/run/app.sock"),
            (778, ""),
            (779, "@/tmp/.X11-unix/X0"),
            (780, "/tmp/my app.sock"),
        ]
        .into_iter()
        .map(|(i, p)| (i, p.to_owned()))
        .collect();
        assert_eq!(parse_unix(t), expected);
        assert!(parse_unix("Num RefCount Protocol Flags Type St Inode Path\n").is_empty());
    }

    // R8.13, R5.11: a process's namespace tables are read from its own
    // `net` directory: TCP of both families, and the Unix sockets; a
    // process whose tables cannot be read has none.
    #[test]
    fn a_fixture_namespace_reads_tcp_of_both_families_and_unix_sockets() {
        let dir = std::env::temp_dir().join(format!("sys-net-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("4/net")).unwrap();
        std::fs::write(
            dir.join("4/net/tcp"),
            "header\n0: 0100007F:1F90 0100007F:D431 01 0:0 0:0 0 0 0 21 1\n",
        )
        .unwrap();
        std::fs::write(
            dir.join("4/net/tcp6"),
            "header\n0: 00000000000000000000000001000000:0050 00000000000000000000000000000000:0000 0A 0:0 0:0 0 0 0 22 1\n",
        )
        .unwrap();
        std::fs::write(
            dir.join("4/net/unix"),
            "Num RefCount Protocol Flags Type St Inode Path\n0: 2 0 10000 1 1 23 /run/x.sock\n",
        )
        .unwrap();
        let tcp = read_tcp(&dir, 4);
        let unix = read_unix(&dir, 4);
        let (no_tcp, no_unix) = (read_tcp(&dir, 5), read_unix(&dir, 5));
        std::fs::remove_dir_all(&dir).unwrap();
        let mut shown: Vec<(u64, String)> = tcp.iter().map(|(i, c)| (*i, c.to_string())).collect();
        shown.sort();
        assert_eq!(
            shown,
            [
                (
                    21,
                    "TCP 127.0.0.1:8080 -> 127.0.0.1:54321 ESTABLISHED".to_owned()
                ),
                (22, "TCP listening on [::1]:80".to_owned()),
            ]
        );
        assert_eq!(unix, HashMap::from([(23, "/run/x.sock".to_owned())]));
        assert!(no_tcp.is_empty() && no_unix.is_empty());
    }

    // R8.13: a connection says its state; a stream whose peer closed it
    // (CLOSE_WAIT, a dead stream) and one still connecting say so in
    // words, and only a listener is listening.
    #[test]
    fn each_connection_says_its_state_and_a_dead_stream_says_so() {
        let conn = |state| TcpConn {
            local: "10.0.0.1:40000".parse().unwrap(),
            remote: "10.0.0.2:443".parse().unwrap(),
            state,
        };
        let said: Vec<(bool, String)> = ["ESTABLISHED", "CLOSE_WAIT", "SYN_SENT", "LISTEN"]
            .into_iter()
            .map(|s| (conn(s).listening(), conn(s).to_string()))
            .collect();
        assert_eq!(
            said,
            [
                (false, "TCP 10.0.0.1:40000 -> 10.0.0.2:443 ESTABLISHED".to_owned()),
                (
                    false,
                    "TCP 10.0.0.1:40000 -> 10.0.0.2:443 CLOSE_WAIT (the peer closed the connection)"
                        .to_owned()
                ),
                (
                    false,
                    "TCP 10.0.0.1:40000 -> 10.0.0.2:443 SYN_SENT (connecting)".to_owned()
                ),
                (true, "TCP listening on 10.0.0.1:40000".to_owned()),
            ]
        );
    }
}
