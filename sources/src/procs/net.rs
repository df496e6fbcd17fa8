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
/// use stallguard_sources::procs::net::parse_tcp;
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
/// use stallguard_sources::procs::net::parse_unix;
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tcp6_loopback_and_mapped_addresses_read_back() {
        let t = "sl local rem st\n 0: 00000000000000000000000001000000:1F90 0000000000000000FFFF00000100007F:0050 01 0:0 0:0 0 0 0 99\n";
        let c = &parse_tcp(t)[&99];
        assert_eq!(c.local.to_string(), "[::1]:8080");
        assert_eq!(c.remote.to_string(), "127.0.0.1:80");
        assert_eq!(c.state, "ESTABLISHED");
        assert!(parse_tcp("header\n garbage line\n").is_empty());
    }
}
