//! Tests of the socket readers: /proc/net tables, the sock_diag dump on
//! real and crafted replies (R5.11, R8.13).

use super::*;

use std::io::{Read, Write};
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::fs::MetadataExt;
use std::os::unix::net::UnixDatagram;

fn inode(fd: &impl AsRawFd) -> u64 {
    std::fs::metadata(format!("/proc/self/fd/{}", fd.as_raw_fd()))
        .unwrap()
        .ino()
}

/// A loopback connection on `addr` whose client end received `n` bytes.
fn connection(addr: &str, n: usize) -> Option<(std::net::TcpStream, std::net::TcpStream)> {
    let server = std::net::TcpListener::bind(addr).ok()?;
    let mut client = std::net::TcpStream::connect(server.local_addr().unwrap()).unwrap();
    let (mut conn, _) = server.accept().unwrap();
    conn.write_all(&vec![1; n]).unwrap();
    client.read_exact(&mut vec![0; n]).unwrap();
    Some((client, conn))
}

// R5.11: the one dump of both families and the per-family fallback see
// the same IPv4 and IPv6 sockets (IPv6 where the machine has ::1), and
// leave listeners out.
#[test]
fn both_dumps_read_ipv4_and_ipv6_sockets_alike() {
    let (v4, _v4_server) = connection("127.0.0.1:0", 300).unwrap();
    let v6 = connection("[::1]:0", 700);
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    for both in [true, false] {
        let got = dump_tcp(both).unwrap();
        assert_eq!(got.get(&inode(&v4)), Some(&300), "both at once: {both}");
        if let Some((v6, _)) = &v6 {
            assert_eq!(got.get(&inode(v6)), Some(&700), "both at once: {both}");
        }
        assert!(!got.contains_key(&inode(&listener)), "a listener");
    }
}

#[test]
fn tcp6_loopback_and_mapped_addresses_read_back() {
    let t = "sl local rem st\n 0: 00000000000000000000000001000000:1F90 0000000000000000FFFF00000100007F:0050 01 0:0 0:0 0 0 0 99\n";
    let c = &parse_tcp(t)[&99];
    assert_eq!(c.local.to_string(), "[::1]:8080");
    assert_eq!(c.remote.to_string(), "127.0.0.1:80");
    assert_eq!(c.state, "ESTABLISHED");
    assert!(parse_tcp("header\n garbage line\n").is_empty());
}

// R8.13: a connection still being opened says so.
#[test]
fn a_connection_in_syn_sent_is_shown_connecting() {
    let t = "sl local rem st\n 0: 0100007F:D431 0100007F:1F90 02 0:0 0:0 0 0 0 77\n";
    assert_eq!(
        parse_tcp(t)[&77].to_string(),
        "TCP 127.0.0.1:54321 -> 127.0.0.1:8080 SYN_SENT (connecting)"
    );
}

// R8.13: /proc/net/unix read back: a bound socket's path by its inode,
// an unnamed one empty (kills the issue-26 mutants of parse_unix that
// return an empty or made-up table).
#[test]
fn a_unix_socket_path_is_found_by_its_inode() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("app.sock");
    let listener = std::os::unix::net::UnixListener::bind(&path).unwrap();
    let (unnamed, _peer) = std::os::unix::net::UnixStream::pair().unwrap();
    let table = parse_unix(&std::fs::read_to_string("/proc/net/unix").unwrap());
    assert_eq!(
        table.get(&inode(&listener)),
        Some(&path.display().to_string())
    );
    assert_eq!(table.get(&inode(&unnamed)), Some(&String::new()));
    assert!(!table.contains_key(&0), "the header is no socket");
}

/// Runs `f` on a thread of its own that may not open netlink sockets
/// (a seccomp filter: `socket(AF_NETLINK, ..)` fails with `EACCES`),
/// as where `NETLINK_SOCK_DIAG` is unavailable; `None` where the
/// kernel takes no seccomp filter.
pub(in crate::procs) fn without_netlink<T: Send + 'static>(
    f: impl FnOnce() -> T + Send + 'static,
) -> Option<T> {
    std::thread::spawn(move || {
        let stmt = |code: u32, k: u32| libc::sock_filter {
            code: code as u16,
            jt: 0,
            jf: 0,
            k,
        };
        let jeq = |k: u32, jf: u8| libc::sock_filter {
            code: (libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K) as u16,
            jt: 0,
            jf,
            k,
        };
        // seccomp_data: nr at 0, args[0] at 16 (its low word first on
        // a little-endian machine).
        let arg0 = if cfg!(target_endian = "little") {
            16
        } else {
            20
        };
        let ld = libc::BPF_LD | libc::BPF_W | libc::BPF_ABS;
        let ret = libc::BPF_RET | libc::BPF_K;
        let mut prog = [
            stmt(ld, 0),
            jeq(libc::SYS_socket as u32, 3),
            stmt(ld, arg0),
            jeq(libc::AF_NETLINK as u32, 1),
            stmt(ret, libc::SECCOMP_RET_ERRNO | libc::EACCES as u32),
            stmt(ret, libc::SECCOMP_RET_ALLOW),
        ];
        let fprog = libc::sock_fprog {
            len: prog.len() as u16,
            filter: prog.as_mut_ptr(),
        };
        // SAFETY: prctl(2) with plain integers, then with a filter
        // program that outlives the call; both bind this thread only.
        let ok = unsafe {
            libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0
                && libc::prctl(
                    libc::PR_SET_SECCOMP,
                    libc::SECCOMP_MODE_FILTER,
                    &fprog as *const libc::sock_fprog,
                ) == 0
        };
        if !ok {
            eprintln!(
                "skipped: no seccomp filter ({})",
                std::io::Error::last_os_error()
            );
            return None;
        }
        Some(f())
    })
    .join()
    .unwrap()
}

// R5.11: a machine whose kernel refuses the netlink socket gets an
// error, not a panic or an empty table (kills the issue-26 mutant of
// dump_tcp that takes -1 for a descriptor).
#[test]
fn a_refused_netlink_socket_is_an_error() {
    let Some(got) = without_netlink(|| dump_tcp(true)) else {
        return;
    };
    assert_eq!(got.unwrap_err().raw_os_error(), Some(libc::EACCES));
}

// R5.11: a stallwarden started with its stdin closed gets descriptor 0
// for the netlink socket, and the dump works all the same (kills the
// issue-26 mutant of dump_tcp that takes 0 for an error). Runs in a
// child (this test binary again) so closing 0 touches no other test.
#[test]
fn the_dump_works_on_descriptor_zero() {
    const CHILD: &str = "STALLWARDEN_TEST_STDIN_CLOSED";
    if std::env::var_os(CHILD).is_some() {
        let (client, _server) = connection("127.0.0.1:0", 300).unwrap();
        // SAFETY: descriptor 0 belongs to this child and nothing in it
        // reads stdin; F_GETFD only asks whether 0 is open.
        unsafe {
            assert_eq!(libc::close(0), 0);
            assert!(libc::fcntl(0, libc::F_GETFD) < 0, "0 is free");
        }
        let got = dump_tcp(true).expect("the dump on descriptor 0");
        assert_eq!(got.get(&inode(&client)), Some(&300));
        return;
    }
    let name = "procs::net::tests::the_dump_works_on_descriptor_zero";
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args([name, "--exact", "--test-threads=1"])
        .env(CHILD, "1")
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{said}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(said.contains("1 passed"), "the child ran the test: {said}");
}

// R5.11: a dump of more sockets than one read holds (300 sockets of
// some 400 bytes each, 64 KiB a read) is read to its end: every socket
// of ours that /proc/net/tcp lists is in it, with its own count.
#[test]
fn a_dump_longer_than_one_read_misses_no_socket() {
    let conns: Vec<_> = (1..=150)
        .map(|n| connection("127.0.0.1:0", n).unwrap())
        .collect();
    let listed = parse_tcp(&std::fs::read_to_string("/proc/net/tcp").unwrap());
    for both in [true, false] {
        let got = dump_tcp(both).unwrap();
        for (n, (client, server)) in (1..).zip(&conns) {
            for (end, bytes) in [(inode(client), n), (inode(server), 0)] {
                assert!(listed.contains_key(&end), "in /proc/net/tcp");
                assert_eq!(
                    got.get(&end),
                    Some(&bytes),
                    "connection {n}, both at once: {both}"
                );
            }
        }
    }
}

// R5.11: both requests ask for every state but LISTEN and the two that
// have no inode, SYN_RECV and TIME_WAIT: a busy server holds tens of
// thousands of TIME_WAIT sockets, which every dump would carry for
// nothing (kills the issue-26 mutants of request that ask for them).
#[test]
fn the_request_leaves_out_listeners_and_sockets_without_an_inode() {
    let wanted = STATES
        .iter()
        .enumerate()
        .filter(|(_, s)| !["LISTEN", "SYN_RECV", "TIME_WAIT"].contains(s))
        .fold(0u32, |m, (i, _)| m | 1 << i);
    let states =
        |req: Vec<u8>, at: usize| u32::from_ne_bytes(req[16 + at..20 + at].try_into().unwrap());
    assert_eq!(states(request(TCPDIAG_GETSOCK, 0, 1), 52), wanted);
    assert_eq!(states(request(SOCK_DIAG_BY_FAMILY, 10, 1), 4), wanted);
}

// R5.11: a request the kernel refuses (here one too short to be an
// inet_diag request) is the kernel's error.
#[test]
fn a_request_the_kernel_refuses_is_its_error() {
    use nix::sys::socket::{self, sockopt, AddressFamily, SockFlag, SockProtocol, SockType};
    let sock = socket::socket(
        AddressFamily::Netlink,
        SockType::Datagram,
        SockFlag::SOCK_CLOEXEC,
        SockProtocol::NetlinkSockDiag,
    )
    .unwrap();
    // Reading past the kernel's answer fails after 10 s, not never.
    let wait = nix::sys::time::TimeVal::new(10, 0);
    socket::setsockopt(&sock, sockopt::ReceiveTimeout, &wait).unwrap();
    let mut header_only = request(SOCK_DIAG_BY_FAMILY, libc::AF_INET as u8, 1);
    header_only.truncate(16);
    header_only[0..4].copy_from_slice(&16u32.to_ne_bytes());
    let got = diag_dump(
        &sock,
        &mut vec![0; 64 * 1024],
        &header_only,
        &mut HashMap::new(),
    );
    assert_eq!(got.unwrap_err().raw_os_error(), Some(libc::EINVAL));
}

// Replies no kernel sends, or sends only when something went wrong,
// replayed to diag_dump through a Unix datagram socket in the netlink
// socket's place.

/// A netlink message of `kind`: the 16-byte header (length, kind, no
/// flags, sequence and port 0) then `body`, padded to 4 bytes.
fn nlmsg(kind: u16, body: &[u8]) -> Vec<u8> {
    let mut m = ((16 + body.len()) as u32).to_ne_bytes().to_vec();
    m.extend_from_slice(&kind.to_ne_bytes());
    m.extend_from_slice(&[0; 10]);
    m.extend_from_slice(body);
    m.resize(m.len().next_multiple_of(4), 0);
    m
}

/// A netlink attribute: length, type, payload, padded to 4 bytes.
fn attr(kind: u16, payload: &[u8]) -> Vec<u8> {
    let mut a = ((4 + payload.len()) as u16).to_ne_bytes().to_vec();
    a.extend_from_slice(&kind.to_ne_bytes());
    a.extend_from_slice(payload);
    a.resize(a.len().next_multiple_of(4), 0);
    a
}

/// An `INET_DIAG_INFO` attribute: the first `len` bytes of a 232-byte
/// `tcp_info` whose `tcpi_bytes_received` is `bytes`.
fn info_of(len: usize, bytes: u64) -> Vec<u8> {
    let mut info = vec![0u8; 232];
    info[128..136].copy_from_slice(&bytes.to_ne_bytes());
    info.truncate(len);
    attr(INET_DIAG_INFO, &info)
}

fn info(bytes: u64) -> Vec<u8> {
    info_of(232, bytes)
}

/// One socket of a dump: an `inet_diag_msg` with `inode`, then `attrs`.
fn socket(inode: u32, attrs: &[Vec<u8>]) -> Vec<u8> {
    let mut body = vec![0u8; 72];
    body[0] = libc::AF_INET as u8;
    body[1] = 1; // ESTABLISHED
    body[68..72].copy_from_slice(&inode.to_ne_bytes());
    body.extend(attrs.concat());
    nlmsg(SOCK_DIAG_BY_FAMILY, &body)
}

fn done() -> Vec<u8> {
    nlmsg(3, &0i32.to_ne_bytes())
}

/// `NLMSG_ERROR` with `code` (0 or a negated errno) and the request's
/// header.
fn error(code: i32) -> Vec<u8> {
    let mut body = code.to_ne_bytes().to_vec();
    body.extend_from_slice(&request(SOCK_DIAG_BY_FAMILY, 2, 2)[..16]);
    nlmsg(2, &body)
}

/// What diag_dump makes of `datagrams` waiting on its socket after it
/// sent `req`. The socket is non-blocking: reading past them is an
/// error (`WouldBlock`), not a hang.
fn replay_after(req: &[u8], datagrams: &[Vec<u8>]) -> std::io::Result<HashMap<u64, u64>> {
    let (ours, kernel) = UnixDatagram::pair().unwrap();
    for d in datagrams {
        kernel.send(d).unwrap();
    }
    ours.set_nonblocking(true).unwrap();
    // A send buffer of 128 KiB whatever the machine's default, so a
    // larger request cannot be sent.
    nix::sys::socket::setsockopt(&ours, nix::sys::socket::sockopt::SndBuf, &(64 << 10)).unwrap();
    let sock = OwnedFd::from(ours);
    let mut out = HashMap::new();
    diag_dump(&sock, &mut vec![0; 64 * 1024], req, &mut out).map(|()| out)
}

fn replay(datagrams: &[Vec<u8>]) -> std::io::Result<HashMap<u64, u64>> {
    replay_after(
        &request(SOCK_DIAG_BY_FAMILY, libc::AF_INET as u8, 2),
        datagrams,
    )
}

// R5.11: a dump spread over datagrams is read to its NLMSG_DONE,
// through header-only and unpadded messages, empty and unknown
// attributes; a socket without an inode is left out (kills the
// issue-26 mutants of diag_dump that stop at a 16-byte message, stop
// at an empty attribute, or read the count from another attribute).
#[test]
fn a_dump_is_read_across_datagrams_to_its_done() {
    let noop = 1;
    let shutdown = 8;
    let got = replay(&[
        [
            nlmsg(noop, &[]),
            socket(1, &[info(100)]),
            nlmsg(noop, &[0; 5]),
            socket(2, &[attr(shutdown, &[0]), attr(99, &[]), info(200)]),
            socket(0, &[info(5)]),
        ]
        .concat(),
        [
            socket(3, &[info(300), attr(99, &info(999)[4..])]),
            done(),
            socket(4, &[info(400)]),
        ]
        .concat(),
        socket(5, &[info(500)]),
    ]);
    assert_eq!(got.unwrap(), HashMap::from([(1, 100), (2, 200), (3, 300)]));
}

// R5.11: a message that claims less than its header or more than the
// datagram holds ends the dump with what was read (kills the issue-26
// mutants of diag_dump that slice past it).
#[test]
fn a_message_shorter_than_its_header_or_past_its_datagram_ends_the_dump() {
    let mut short = nlmsg(1, &[]);
    short[0..4].copy_from_slice(&8u32.to_ne_bytes());
    let mut long = socket(2, &[info(200)]);
    let claimed = long.len() as u32 + 100;
    long[0..4].copy_from_slice(&claimed.to_ne_bytes());
    for bad in [short, long] {
        let got = replay(&[
            [socket(1, &[info(100)]), bad].concat(),
            [socket(3, &[info(300)]), done()].concat(),
        ]);
        assert_eq!(got.unwrap(), HashMap::from([(1, 100)]));
    }
}

// R5.11: an attribute that claims less than its header or more than the
// socket's message holds ends that socket's attributes (kills the
// issue-26 mutants of diag_dump that slice past it).
#[test]
fn an_attribute_shorter_than_its_header_or_past_its_socket_ends_that_socket() {
    let header = |len: u16| [len.to_ne_bytes(), INET_DIAG_INFO.to_ne_bytes()].concat();
    let got = replay(&[[
        socket(1, &[header(2), info(100)]),
        socket(2, &[info(200), header(9000)]),
        socket(3, &[header(9000), info(300)]),
        done(),
    ]
    .concat()]);
    assert_eq!(got.unwrap(), HashMap::from([(2, 200)]));
}

// R5.11: a tcp_info too short to hold tcpi_bytes_received (Linux before
// 4.1) leaves its socket out (kills the issue-26 mutants of diag_dump
// that read past it).
#[test]
fn a_tcp_info_without_the_count_leaves_its_socket_out() {
    let got = replay(&[[
        socket(1, &[info_of(130, 100)]),
        socket(2, &[info_of(100, 200)]),
        socket(3, &[info_of(136, 300)]),
        done(),
    ]
    .concat()]);
    assert_eq!(got.unwrap(), HashMap::from([(3, 300)]));
}

// R5.11: NLMSG_ERROR ends the dump: as done for an acknowledgement (0)
// and for a family or protocol the kernel lacks (ENOENT, EAFNOSUPPORT:
// no IPv6), as that error otherwise (kills the issue-26 mutants of
// diag_dump's error codes and of its NLMSG_ERROR arm).
#[test]
fn an_error_reply_ends_the_dump_as_done_or_as_its_error() {
    let after = |code: i32| {
        replay(&[
            [socket(1, &[info(100)]), error(code)].concat(),
            [socket(2, &[info(200)]), done()].concat(),
        ])
    };
    for code in [0, -libc::ENOENT, -libc::EAFNOSUPPORT] {
        assert_eq!(
            after(code).unwrap(),
            HashMap::from([(1, 100)]),
            "code {code}"
        );
    }
    assert_eq!(
        after(-libc::EINVAL).unwrap_err().raw_os_error(),
        Some(libc::EINVAL)
    );
}

// R5.11: an empty read ends the dump; a read that fails is an error
// (kills the issue-26 mutants of diag_dump that take an empty read for
// an error, slice a failed one, or retry every error but EINTR).
#[test]
fn an_empty_read_ends_the_dump_and_a_failed_one_is_an_error() {
    let got = replay(&[
        socket(1, &[info(100)]),
        Vec::new(),
        [socket(2, &[info(200)]), done()].concat(),
    ]);
    assert_eq!(got.unwrap(), HashMap::from([(1, 100)]));
    let got = replay(&[socket(1, &[info(100)])]);
    assert_eq!(got.unwrap_err().kind(), std::io::ErrorKind::WouldBlock);
}

// R5.11: a request that cannot be sent is an error, whatever waits to be
// read (kills the issue-26 mutant of diag_dump that reads on).
#[test]
fn a_request_that_cannot_be_sent_is_an_error() {
    // 4 MiB: more than a Unix datagram socket sends at once (its send
    // buffer, 208 KiB by default).
    let got = replay_after(
        &vec![0; 4 << 20],
        &[[socket(1, &[info(100)]), done()].concat()],
    );
    assert_eq!(got.unwrap_err().raw_os_error(), Some(libc::EMSGSIZE));
}
