//! What a suspect is blocked on (R8.13), asked of real processes: a read
//! of a terminal, a pipe and a FIFO, a `flock` waiter, a shell waiting for
//! its child, a TCP client in `recv`, a server in `accept`, a `poll` over a
//! socket the peer closed (`CLOSE_WAIT`), a worker thread in `read` while
//! the main one waits in a lock. Each process says "ready" on its stdout
//! just before it blocks; the test then samples until the blocking point
//! shows, a bounded spin with no sleep. What no real process can be made
//! to block in on demand (a `connect`, a `fcntl` lock, a `waitid` for one
//! child, a Unix socket, a thread on TCP behind a listener) is asked of a
//! fake `/proc` (`FakeProc`), whose text the test writes.

use std::io::{BufRead, BufReader};
use std::net::TcpListener;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

use nix::sys::signal::{killpg, Signal};
use nix::unistd::Pid;
use stallwarden_sources::procs::ProcTable;
use watchdog_core::ChildInfo;

const WAIT: Duration = Duration::from_secs(30);

/// A process group spawned for one test, killed (and reaped) on drop.
struct Group {
    child: Child,
    out: BufReader<ChildStdout>,
}

impl Group {
    fn spawn(program: &str, args: &[&str], stdin: Stdio) -> Group {
        let mut child = Command::new(program)
            .args(args)
            .stdin(stdin)
            .stdout(Stdio::piped())
            .process_group(0)
            .spawn()
            .unwrap_or_else(|e| panic!("{program} spawns: {e}"));
        let out = BufReader::new(child.stdout.take().unwrap());
        Group { child, out }
    }

    fn sh(script: &str) -> Group {
        Group::spawn("sh", &["-c", script], Stdio::null())
    }

    fn python(script: &str) -> Group {
        Group::spawn("python3", &["-c", script], Stdio::null())
    }

    /// Reads lines until one is `ready` (a blocking read, bounded by the
    /// process's own life).
    fn ready(&mut self) {
        let mut line = String::new();
        loop {
            line.clear();
            let n = self.out.read_line(&mut line).unwrap();
            assert!(n > 0, "the process ended before it was ready");
            if line.trim() == "ready" {
                return;
            }
        }
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }
}

impl Drop for Group {
    fn drop(&mut self) {
        let _ = killpg(Pid::from_raw(self.child.id() as i32), Signal::SIGKILL);
        let _ = self.child.wait();
    }
}

/// Looks at the tree (the root first) until process `name` is blocked on
/// something that contains `expect`; returns that process.
fn blocked(root: u32, name: &str, expect: &str) -> ChildInfo {
    let mut table = ProcTable::new();
    let start = Instant::now();
    loop {
        let look = table.peek(root).expect("/proc is readable");
        let all: Vec<ChildInfo> = look.root.into_iter().chain(look.children).collect();
        if let Some(c) = all
            .iter()
            .find(|c| c.name == name && c.blocked_on.as_deref().is_some_and(|b| b.contains(expect)))
        {
            return c.clone();
        }
        assert!(
            start.elapsed() < WAIT,
            "{name} never showed blocked on {expect:?}: {all:#?}"
        );
        std::thread::yield_now();
    }
}

#[test]
fn a_reader_of_a_terminal_is_waiting_for_input() {
    // SAFETY: plain libc calls on a descriptor we own.
    let master = unsafe { libc::posix_openpt(libc::O_RDWR | libc::O_NOCTTY) };
    assert!(master >= 0, "no pty");
    let mut name = [0 as libc::c_char; 64];
    unsafe {
        assert_eq!(libc::grantpt(master), 0);
        assert_eq!(libc::unlockpt(master), 0);
        assert_eq!(libc::ptsname_r(master, name.as_mut_ptr(), name.len()), 0);
    }
    let slave = unsafe { std::ffi::CStr::from_ptr(name.as_ptr()) }
        .to_str()
        .unwrap()
        .to_owned();
    let tty = std::fs::File::options()
        .read(true)
        .write(true)
        .open(&slave)
        .unwrap();
    let mut g = Group::spawn(
        "sh",
        &["-c", "echo ready; read answer; echo $answer"],
        Stdio::from(tty),
    );
    g.ready();
    let sh = blocked(g.pid(), "sh", "waiting for input");
    assert_eq!(
        sh.blocked_on.unwrap(),
        format!("waiting for input: reading the terminal {slave}")
    );
    unsafe { libc::close(master) };
}

#[test]
fn a_reader_of_a_pipe_names_who_writes_it() {
    let mut g = Group::sh("echo ready; sleep 30 | cat");
    g.ready();
    // Until the pipeline's left side has exec'd it is named `sh`: look
    // until the writer is `sleep` (raced in CI).
    let cat = blocked(g.pid(), "cat", "written by sleep[");
    let text = cat.blocked_on.unwrap();
    assert!(
        text.starts_with("reading a pipe written by sleep["),
        "{text}"
    );
}

#[test]
fn a_reader_of_a_fifo_nobody_writes_waits_in_open() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("feed");
    nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::S_IRWXU).unwrap();
    let mut g = Group::sh(&format!("echo ready; exec cat {}", fifo.display()));
    g.ready();
    let cat = blocked(g.pid(), "cat", "FIFO");
    assert_eq!(
        cat.blocked_on.unwrap(),
        format!(
            "opening the FIFO {}, which no process has open at the other end",
            fifo.display()
        )
    );
    // Opened read-write by the shell, the FIFO is read with no writer in
    // the task but the reader itself.
    let mut g = Group::sh(&format!(
        "exec 3<>{}; echo ready; exec cat <&3",
        fifo.display()
    ));
    g.ready();
    let cat = blocked(g.pid(), "cat", "reading");
    assert_eq!(
        cat.blocked_on.unwrap(),
        format!(
            "reading the FIFO {} that no other process of the task holds open to be written",
            fifo.display()
        )
    );
}

#[test]
fn a_flock_waiter_names_the_locked_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("lock");
    let held = std::fs::File::create(&path).unwrap();
    // SAFETY: flock on a descriptor we own.
    assert_eq!(
        unsafe { libc::flock(std::os::fd::AsRawFd::as_raw_fd(&held), libc::LOCK_EX) },
        0
    );
    let mut g = Group::sh(&format!("echo ready; exec flock {} true", path.display()));
    g.ready();
    let flock = blocked(g.pid(), "flock", "(flock)");
    assert_eq!(
        flock.blocked_on.unwrap(),
        format!("waiting for a lock (flock) on the file {}", path.display())
    );
}

#[test]
fn a_shell_waiting_for_its_child_names_the_child() {
    let mut g = Group::sh("echo ready; sleep 30; true");
    g.ready();
    // Until the forked child has exec'd, it is named `sh`: wait for `sleep`.
    let sh = blocked(g.pid(), "sh", "child sleep[");
    let sleep = blocked(g.pid(), "sleep", "sleeping");
    assert_eq!(
        sh.blocked_on.unwrap(),
        format!("waiting for child sleep[{}]", sleep.pid)
    );
    // The `wait` builtin sleeps in sigsuspend; the child is named all the same.
    let mut g = Group::sh("sleep 30 & echo ready; wait");
    g.ready();
    let sh = blocked(g.pid(), "sh", "child sleep[");
    assert!(sh
        .blocked_on
        .unwrap()
        .starts_with("waiting for child sleep["));
}

#[test]
fn a_command_with_no_children_in_recv_is_its_own_suspect() {
    let server = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = server.local_addr().unwrap().port();
    let mut g = Group::python(&format!(
        "import socket; s = socket.create_connection(('127.0.0.1', {port})); \
         print('ready', flush=True); s.recv(1)"
    ));
    let (_conn, peer) = server.accept().unwrap();
    g.ready();
    let py = blocked(g.pid(), "python3", "TCP");
    assert_eq!(py.pid, g.pid(), "the command itself is sampled");
    assert_eq!(
        py.blocked_on.unwrap(),
        format!("reading TCP {peer} -> 127.0.0.1:{port} ESTABLISHED")
    );
}

#[test]
fn a_server_in_accept_names_where_it_listens() {
    let mut g = Group::python(
        "import socket; s = socket.socket(); s.bind(('127.0.0.1', 0)); s.listen(); \
         print(s.getsockname()[1]); print('ready', flush=True); s.accept()",
    );
    let mut port = String::new();
    g.out.read_line(&mut port).unwrap();
    g.ready();
    let py = blocked(g.pid(), "python3", "connection");
    assert_eq!(
        py.blocked_on.unwrap(),
        format!(
            "waiting for a connection: TCP listening on 127.0.0.1:{}",
            port.trim()
        )
    );
}

#[test]
fn a_poll_over_several_fds_names_them_and_a_closed_peer() {
    let server = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = server.local_addr().unwrap().port();
    let mut g = Group::python(&format!(
        "import socket, select, os; a = socket.create_connection(('127.0.0.1', {port})); \
         b = socket.create_connection(('127.0.0.1', {port})); r, w = os.pipe(); \
         p = select.poll(); p.register(a, select.POLLIN); p.register(b, 0); p.register(r, select.POLLIN); \
         print('ready', flush=True); p.poll()"
    ));
    let (a, _) = server.accept().unwrap();
    let (b, _) = server.accept().unwrap();
    // The server closes the second connection: the client's end of it is
    // in CLOSE_WAIT, which a poll asking for no events does not notice.
    drop(b);
    g.ready();
    // The poll itself, not an earlier instant where a verdict's look names
    // the dead connection beside whatever the process does (R8.16).
    let py = blocked(g.pid(), "python3", "waiting (poll)");
    let text = py.blocked_on.unwrap();
    assert!(text.starts_with("waiting (poll) on 3 fds ("), "{text}");
    assert!(text.contains("ESTABLISHED"), "{text}");
    assert!(
        text.contains("CLOSE_WAIT (the peer closed the connection)"),
        "{text}"
    );
    assert!(text.contains("a pipe"), "{text}");
    drop(a);
}

#[test]
fn a_worker_thread_in_read_is_the_blocking_point_not_the_main_threads_lock() {
    let mut g = Group::python(
        "import os, threading; r, w = os.pipe(); \
         t = threading.Thread(target=lambda: os.read(r, 1)); t.start(); \
         print('ready', flush=True); t.join()",
    );
    g.ready();
    let py = blocked(g.pid(), "python3", "thread");
    let text = py.blocked_on.unwrap();
    assert!(
        text.starts_with("reading a pipe") && text.contains("(thread "),
        "{text}"
    );
}

#[test]
fn an_event_loop_waiting_on_no_connection_yields_to_the_thread_reading_one() {
    // R8.13: Claude Code (Bun) waits in the main thread's epoll on the
    // terminal and a wake-up fd while its HTTP thread waits on the model's
    // TCP stream; the stream is why it is silent, so that thread is named.
    let server = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = server.local_addr().unwrap().port();
    let mut g = Group::python(&format!(
        "import os, select, socket, threading; r, w = os.pipe(); \
         s = socket.create_connection(('127.0.0.1', {port})); \
         t = threading.Thread(target=lambda: s.recv(1), daemon=True); t.start(); \
         e = select.epoll(); e.register(r, select.EPOLLIN); \
         print('ready', flush=True); e.poll()"
    ));
    let (_conn, peer) = server.accept().unwrap();
    g.ready();
    let py = blocked(g.pid(), "python3", "(thread ");
    let text = py.blocked_on.unwrap();
    assert!(
        text.starts_with(&format!(
            "reading TCP {peer} -> 127.0.0.1:{port} ESTABLISHED (thread "
        )),
        "{text}"
    );
}

#[test]
fn an_event_loop_waiting_on_a_connection_itself_is_named_as_it_is() {
    // R8.13: where the main thread's own wait holds the connection, it
    // says why, and no other thread is looked for.
    let server = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = server.local_addr().unwrap().port();
    let mut g = Group::python(&format!(
        "import os, select, socket, threading; r, w = os.pipe(); \
         s = socket.create_connection(('127.0.0.1', {port})); \
         t = threading.Thread(target=lambda: os.read(r, 1), daemon=True); t.start(); \
         e = select.epoll(); e.register(s, select.EPOLLIN); \
         print('ready', flush=True); e.poll()"
    ));
    let (_conn, _) = server.accept().unwrap();
    g.ready();
    let py = blocked(g.pid(), "python3", "epoll");
    let text = py.blocked_on.unwrap();
    assert!(text.starts_with("waiting (epoll) on 1 fds ("), "{text}");
    assert!(
        text.contains("ESTABLISHED") && !text.contains("(thread "),
        "{text}"
    );
}

#[test]
fn a_main_thread_reading_a_pipe_is_named_though_a_thread_waits_on_tcp() {
    // R8.13: only an event loop's wait (epoll, poll, select) yields to a
    // thread on a TCP stream; a main thread in a plain read says why it is
    // silent itself.
    let server = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = server.local_addr().unwrap().port();
    let mut g = Group::python(&format!(
        "import os, socket, threading; r, w = os.pipe(); \
         s = socket.create_connection(('127.0.0.1', {port})); \
         t = threading.Thread(target=lambda: s.recv(1), daemon=True); t.start(); \
         print('ready', flush=True); os.read(r, 1)"
    ));
    let (_conn, _) = server.accept().unwrap();
    g.ready();
    let py = blocked(g.pid(), "python3", "reading a pipe");
    let text = py.blocked_on.unwrap();
    assert!(!text.contains("(thread "), "{text}");
}

#[test]
fn of_two_worker_threads_in_read_the_first_is_named_tcp_or_not() {
    // R8.13: where the main thread waits in a lock, the first worker with
    // the weightiest wait is named (here a pipe read, started first); a
    // later thread on a TCP stream does not displace it: that rule is the
    // event loop's only.
    let server = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = server.local_addr().unwrap().port();
    let mut g = Group::python(&format!(
        "import os, socket, threading; r, w = os.pipe(); \
         s = socket.create_connection(('127.0.0.1', {port})); \
         a = threading.Thread(target=lambda: os.read(r, 1)); a.start(); \
         b = threading.Thread(target=lambda: s.recv(1), daemon=True); b.start(); \
         print('ready', flush=True); a.join()"
    ));
    let (_conn, _) = server.accept().unwrap();
    g.ready();
    let py = blocked(g.pid(), "python3", "reading a pipe");
    let text = py.blocked_on.unwrap();
    assert!(text.contains("(thread "), "{text}");
}

#[test]
fn names_from_the_file_system_are_escaped() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("evil\x1b[2J");
    let held = std::fs::File::create(&path).unwrap();
    // SAFETY: flock on a descriptor we own.
    assert_eq!(
        unsafe { libc::flock(std::os::fd::AsRawFd::as_raw_fd(&held), libc::LOCK_EX) },
        0
    );
    let g = Group::spawn(
        "flock",
        &[path.to_str().unwrap(), "sh", "-c", "true"],
        Stdio::null(),
    );
    let flock = blocked(g.pid(), "flock", "(flock)");
    let text = flock.blocked_on.unwrap();
    assert!(!text.contains('\x1b'), "{text:?}");
    assert!(text.ends_with("evil\\u{1b}[2J"), "{text:?}");
}

// R8.13: a writer blocked on a full pipe names who reads it (kills the
// deleted `SYS_write | ...` arm of `Inspector::call`, which left the
// write unnamed).
#[test]
fn a_writer_of_a_full_pipe_names_who_reads_it() {
    let mut g = Group::sh("echo ready; yes | sleep 30");
    g.ready();
    // Until the reader has exec'd, it is named `sh`: wait for `sleep`.
    let yes = blocked(g.pid(), "yes", "read by sleep[");
    let sleep = blocked(g.pid(), "sleep", "sleeping");
    assert_eq!(
        yes.blocked_on.unwrap(),
        format!("writing a pipe read by sleep[{}]", sleep.pid)
    );
}

// R8.13: a `waitid(P_ALL, ...)` waits for any child, and the children are
// named (kills the deleted `-` of `wait_child(pid, -1)` in
// `Inspector::call`, which waited for "child 1").
#[test]
fn a_waitid_for_any_child_names_the_children() {
    let mut g = Group::python(
        "import os, subprocess; p = subprocess.Popen(['sleep', '30']); \
         print('ready', flush=True); os.waitid(os.P_ALL, 0, os.WEXITED)",
    );
    g.ready();
    let py = blocked(g.pid(), "python3", "child sleep[");
    let sleep = blocked(g.pid(), "sleep", "sleeping");
    assert_eq!(
        py.blocked_on.unwrap(),
        format!("waiting for child sleep[{}]", sleep.pid)
    );
}

// R8.13: a `select` names the descriptors of its sets, read from the
// process's memory (kills `* with /` and `% with +` in
// `Inspector::select_fds`: a set read as zero bytes, a bit shifted out).
#[test]
fn a_select_names_the_descriptors_it_waits_on() {
    let mut g = Group::python(
        "import os, select, socket; r, w = os.pipe(); s = socket.socket(); \
         s.bind(('127.0.0.1', 0)); s.listen(); print(r, s.fileno(), s.getsockname()[1]); \
         print('ready', flush=True); select.select([r, s], [], [])",
    );
    let mut fds = String::new();
    g.out.read_line(&mut fds).unwrap();
    let fds: Vec<&str> = fds.split_whitespace().collect();
    g.ready();
    let py = blocked(g.pid(), "python3", "select");
    assert_eq!(
        py.blocked_on.unwrap(),
        format!(
            "waiting (select) on 2 fds ({}: a pipe; {}: TCP listening on 127.0.0.1:{})",
            fds[0], fds[1], fds[2]
        )
    );
}

// R8.13: a main thread asleep says less than a worker reading a pipe, so
// the worker's read is the blocking point (kills the `nanosleep` match
// guard of `weight` replaced with true, which ranked every system call as
// a sleep and kept the main thread's).
#[test]
fn a_worker_thread_in_read_outranks_a_sleeping_main_thread() {
    let mut g = Group::python(
        "import os, threading, time; r, w = os.pipe(); \
         threading.Thread(target=lambda: os.read(r, 1), daemon=True).start(); \
         print('ready', flush=True); time.sleep(60)",
    );
    g.ready();
    let py = blocked(g.pid(), "python3", "(thread ");
    let text = py.blocked_on.unwrap();
    assert!(text.starts_with("reading a pipe"), "{text}");
}

// ---- a fake /proc: every blocking call, told apart deterministically ----

/// A `/proc`-shaped tree for `ProcTable::at` (R8.13): processes with a
/// stat line, a `syscall` file, descriptors as symlinks and the socket
/// tables, for the calls and targets a test cannot make a real process
/// block in on demand. Root 100 (`bash`) and its children.
struct FakeProc {
    dir: tempfile::TempDir,
}

/// `/proc/net/tcp`: 127.0.0.1:8080 listening (inode 5001), a connection
/// 127.0.0.1:40000 -> 127.0.0.1:8080 (5002), one connecting to
/// 10.0.0.1:80 (5003).
const FAKE_TCP: &str = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n\
   0: 0100007F:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 5001 1 0 20 4 30 10 -1\n\
   1: 0100007F:9C40 0100007F:1F90 01 00000000:00000000 00:00000000 00000000     0        0 5002 1 0 20 4 30 10 -1\n\
   2: 0100007F:9C41 0100000A:0050 02 00000000:00000000 00:00000000 00000000     0        0 5003 1 0 20 4 30 10 -1\n";

/// `/proc/net/unix`: an unnamed socket (7001) and /run/app.sock (7002).
const FAKE_UNIX: &str = "Num       RefCount Protocol Flags    Type St Inode Path\n\
    0000000000000000: 00000002 00000000 00000000 0001 03 7001\n\
    0000000000000000: 00000002 00000000 00010000 0001 01 7002 /run/app.sock\n";

impl FakeProc {
    fn new() -> FakeProc {
        let fake = FakeProc {
            dir: tempfile::tempdir().unwrap(),
        };
        fake.write("stat", "btime 1700000000\n");
        fake.process(100, 1, "bash");
        fake
    }

    fn path(&self, rel: &str) -> std::path::PathBuf {
        self.dir.path().join(rel)
    }

    fn write(&self, rel: &str, text: &str) {
        let path = self.path(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }

    /// A sleeping process `pid`, child of `ppid`, started in pid order.
    fn process(&self, pid: u32, ppid: u32, comm: &str) {
        self.write(
            &format!("{pid}/stat"),
            &format!(
                "{pid} ({comm}) S {ppid} {pid} {pid} 0 -1 4194560 120 0 0 0 0 0 0 0 20 0 1 0 {pid} \
                 9347072 512 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0\n"
            ),
        );
        self.write(&format!("{pid}/net/tcp"), FAKE_TCP);
        self.write(&format!("{pid}/net/unix"), FAKE_UNIX);
    }

    /// Process (or thread) `at` (`PID` or `PID/task/TID`) blocked in
    /// system call `nr` with these arguments.
    fn call(&self, at: &str, nr: libc::c_long, args: [u64; 6]) {
        let args: Vec<String> = args.iter().map(|a| format!("{a:#x}")).collect();
        self.write(
            &format!("{at}/syscall"),
            &format!("{nr} {} 0x7ffd0000 0x7f3a0000\n", args.join(" ")),
        );
    }

    /// Descriptor `fd` of `pid` is `link` (as `/proc/PID/fd/N` reads).
    fn fd(&self, pid: u32, fd: u64, link: &str) {
        let path = self.path(&format!("{pid}/fd/{fd}"));
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::os::unix::fs::symlink(link, path).unwrap();
    }

    /// What each process of root 100's tree is blocked on, by pid, as a
    /// verdict's look asks it.
    fn look(&self) -> std::collections::HashMap<u32, String> {
        let look = ProcTable::at(self.dir.path()).peek(100).unwrap();
        look.root
            .into_iter()
            .chain(look.children)
            .filter_map(|c| Some((c.pid, c.blocked_on?)))
            .collect()
    }
}

// R8.13: each blocking call a sampled process can sleep in is named for
// what it waits on (kills the deleted `futex`, `connect`, signal-wait,
// `pause` and `open` arms of `Inspector::call`, every mutant of its
// `fcntl` lock guard, and the deleted `select` arm of `classify`).
#[test]
fn each_blocking_call_is_named_for_what_it_waits_on() {
    let fake = FakeProc::new();
    let lock = fake.path("lock");
    std::fs::write(&lock, "").unwrap();
    let lock = lock.to_str().unwrap();
    let mut expect: Vec<(u32, String)> = Vec::new();
    let mut case = |pid: u32, nr: libc::c_long, args: [u64; 6], said: &str| {
        fake.process(pid, 100, "worker");
        fake.call(&pid.to_string(), nr, args);
        fake.fd(pid, 3, lock);
        fake.fd(pid, 4, "socket:[5003]");
        expect.push((pid, said.to_owned()));
    };
    case(
        101,
        libc::SYS_futex,
        [0x7f00, 0, 2, 0, 0, 0],
        "waiting on a lock (futex)",
    );
    case(
        102,
        libc::SYS_connect,
        [4, 0x7f00, 16, 0, 0, 0],
        "connecting: TCP 127.0.0.1:40001 -> 10.0.0.1:80 SYN_SENT (connecting)",
    );
    case(
        103,
        libc::SYS_rt_sigtimedwait,
        [0x7f00, 0, 0, 8, 0, 0],
        "waiting for a signal",
    );
    // No children: a sigsuspend waits for a signal, not for a child.
    case(
        104,
        libc::SYS_rt_sigsuspend,
        [0x7f00, 8, 0, 0, 0, 0],
        "waiting for a signal",
    );
    let setlkw = libc::F_SETLKW as u64;
    let ofd_setlkw = libc::F_OFD_SETLKW as u64;
    let on_lock = format!("waiting for a lock (fcntl) on the file {lock}");
    case(105, libc::SYS_fcntl, [3, setlkw, 0x7f00, 0, 0, 0], &on_lock);
    case(
        106,
        libc::SYS_fcntl,
        [3, ofd_setlkw, 0x7f00, 0, 0, 0],
        &on_lock,
    );
    // F_SETLK does not wait: a fcntl in it is no lock wait.
    let setlk = libc::F_SETLK as u64;
    let in_fcntl = format!("in system call {}", libc::SYS_fcntl);
    case(107, libc::SYS_fcntl, [3, setlk, 0x7f00, 0, 0, 0], &in_fcntl);
    // A fixture's memory is not read: the path opened is not known.
    case(
        108,
        libc::SYS_openat,
        [0xffffff9c, 0x7f00, 0, 0, 0, 0],
        "opening a file",
    );
    #[cfg(target_arch = "x86_64")]
    {
        case(109, libc::SYS_pause, [0; 6], "waiting for a signal");
        case(
            110,
            libc::SYS_open,
            [0x7f00, 0, 0, 0, 0, 0],
            "opening a file",
        );
        case(
            111,
            libc::SYS_select,
            [0, 0, 0, 0, 0, 0],
            "waiting (select) on 0 fds",
        );
    }
    let said = fake.look();
    for (pid, want) in expect {
        assert_eq!(said.get(&pid), Some(&want), "process {pid}: {said:#?}");
    }
}

// R8.13: a wait for one child names that child, a wait for any child names
// none when there is none, and a wait for a child that is not there says
// which (kills the deleted `P_PID` arm of `Inspector::call`, the `==` of
// `wait_child`'s filter, its deleted no-children arm, and every mutant of
// the `which > 0` guard that tells the two no-children texts apart).
#[test]
fn a_wait_names_the_child_it_waits_for() {
    let fake = FakeProc::new();
    fake.process(120, 100, "make");
    fake.process(121, 120, "sleep");
    fake.process(122, 120, "cat");
    fake.call("120", libc::SYS_waitid, [1, 122, 0x7f00, 4, 0, 0]);
    fake.process(123, 100, "sh");
    fake.call("123", libc::SYS_wait4, [0, 0x7f00, 0, 0, 0, 0]);
    fake.process(124, 100, "sh");
    fake.call("124", libc::SYS_wait4, [555, 0x7f00, 0, 0, 0, 0]);
    fake.process(125, 100, "sh");
    fake.call("125", libc::SYS_wait4, [u64::MAX, 0x7f00, 0, 0, 0, 0]);
    let said = fake.look();
    assert_eq!(said[&120], "waiting for child cat[122]");
    assert_eq!(said[&123], "waiting for a child");
    assert_eq!(said[&124], "waiting for child 555");
    assert_eq!(said[&125], "waiting for a child");
}

// R8.13: what a descriptor is: a terminal of each kind, a Unix socket with
// and without a name, a FIFO with its writer, and the first three of an
// epoll's many fds (kills the `||` of `Inspector::target`'s terminal test,
// both mutants of `socket`'s unnamed guard, the `>` of `waiting_on`'s "more"
// and the deleted `!` of `pipe_holders`, which left FIFOs out).
#[test]
fn each_descriptor_is_named_for_what_it_is() {
    let fake = FakeProc::new();
    let lock = fake.path("lock");
    std::fs::write(&lock, "").unwrap();
    let lock = lock.to_str().unwrap();
    let read = |pid: u32, fd: u64, link: &str| {
        fake.process(pid, 100, "reader");
        fake.fd(pid, fd, link);
        fake.call(&pid.to_string(), libc::SYS_read, [fd, 0x7f00, 1, 0, 0, 0]);
    };
    read(130, 0, "/dev/pts/5");
    read(131, 0, "/dev/tty1");
    read(132, 0, "/dev/console");
    read(133, 4, "socket:[7001]");
    read(134, 4, "socket:[7002]");

    fake.process(135, 100, "node");
    for (fd, link) in [
        (3, lock),
        (4, "socket:[5002]"),
        (5, "/dev/pts/5"),
        (6, "socket:[7001]"),
    ] {
        fake.fd(135, fd, link);
    }
    fake.write(
        "135/fdinfo/9",
        "pos:\t0\nflags:\t02000002\ntfd:        3 events: 19 data: 3\ntfd:        4 events: 19 data: 4\n\
         tfd:        5 events: 19 data: 5\ntfd:        6 events: 19 data: 6\n",
    );
    fake.call("135", libc::SYS_epoll_pwait, [9, 0x7f00, 8, u64::MAX, 0, 8]);

    let feed = fake.path("feed");
    nix::unistd::mkfifo(&feed, nix::sys::stat::Mode::S_IRWXU).unwrap();
    let feed = feed.to_str().unwrap();
    read(136, 0, feed);
    fake.write("136/fdinfo/0", "pos:\t0\nflags:\t0100000\n");
    fake.process(137, 100, "sh");
    fake.fd(137, 1, feed);
    fake.write("137/fdinfo/1", "pos:\t0\nflags:\t0100001\n");

    let said = fake.look();
    for (pid, tty) in [
        (130, "/dev/pts/5"),
        (131, "/dev/tty1"),
        (132, "/dev/console"),
    ] {
        assert_eq!(
            said[&pid],
            format!("waiting for input: reading the terminal {tty}")
        );
    }
    assert_eq!(said[&133], "reading an unnamed Unix socket");
    assert_eq!(said[&134], "reading the Unix socket /run/app.sock");
    assert_eq!(
        said[&135],
        format!(
            "waiting (epoll) on 4 fds (3: the file {lock}; \
             4: TCP 127.0.0.1:40000 -> 127.0.0.1:8080 ESTABLISHED; \
             5: the terminal /dev/pts/5; 1 more)"
        )
    );
    assert_eq!(
        said[&136],
        format!("reading the FIFO {feed} written by sh[137]")
    );
}

// R8.13: only an event loop's wait on no TCP connection (a listener is
// none) yields to a thread reading one; a plain read does not (kills
// `is_multiplexer -> true` and the `+` of `names_tcp_connection`, which
// read a listener as a connection).
#[test]
fn an_event_loop_on_a_listener_yields_to_a_thread_on_a_connection() {
    let fake = FakeProc::new();
    fake.process(140, 100, "bun");
    fake.fd(140, 3, "socket:[5001]");
    fake.fd(140, 4, "socket:[5002]");
    fake.write(
        "140/fdinfo/9",
        "pos:\t0\ntfd:        3 events: 19 data: 3\n",
    );
    fake.call("140", libc::SYS_epoll_pwait, [9, 0x7f00, 8, u64::MAX, 0, 8]);
    fake.call("140/task/141", libc::SYS_recvfrom, [4, 0x7f00, 1, 0, 0, 0]);

    fake.process(142, 100, "python3");
    fake.fd(142, 4, "socket:[5002]");
    fake.fd(142, 5, "pipe:[9001]");
    fake.call("142", libc::SYS_read, [5, 0x7f00, 1, 0, 0, 0]);
    fake.call("142/task/143", libc::SYS_recvfrom, [4, 0x7f00, 1, 0, 0, 0]);

    let said = fake.look();
    assert_eq!(
        said[&140],
        "reading TCP 127.0.0.1:40000 -> 127.0.0.1:8080 ESTABLISHED (thread 141)"
    );
    assert_eq!(
        said[&142],
        "reading a pipe that no other process of the task holds open to be written"
    );
}

// R8.13: a fixture's pids are no processes of this machine: their memory
// is never read, even where a pid is a live one's (kills the first `||` of
// `Inspector::peek` made `&&`, which read this process's poll array).
#[test]
fn a_fixtures_memory_is_never_read() {
    let fake = FakeProc::new();
    let me = std::process::id();
    fake.process(me, 100, "poller");
    let fds = [
        libc::pollfd {
            fd: 3,
            events: libc::POLLIN,
            revents: 0,
        },
        libc::pollfd {
            fd: 4,
            events: libc::POLLIN,
            revents: 0,
        },
    ];
    let ptr = std::hint::black_box(fds.as_ptr()) as u64;
    fake.call(&me.to_string(), libc::SYS_ppoll, [ptr, 2, 0, 0, 8, 0]);
    let said = fake.look();
    assert_eq!(said[&me], "waiting (poll) on 0 fds");
    std::hint::black_box(&fds);
}

// R8.13: a `syscall` file that cannot be read says why (kills `io_reason`
// returning "" or "xyzzy").
#[test]
fn an_unreadable_syscall_file_says_why() {
    let fake = FakeProc::new();
    fake.process(150, 100, "odd");
    std::fs::create_dir_all(fake.path("150/syscall")).unwrap();
    let said = fake.look();
    assert_eq!(
        said[&150],
        "cannot read /proc/150/syscall (Is a directory (os error 21))"
    );
}

// R8.13: on a kernel without `/proc/PID/syscall`, a live process's
// blocking point says so, with its kernel wait when there is one (kills the
// deleted `!` in `Inspector::describe`, which took the live process for a
// gone one and said nothing).
#[test]
fn a_kernel_without_syscall_files_says_so() {
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/proc");
    let look = ProcTable::at(fixture).peek(100).unwrap();
    let blocked: Vec<(u32, Option<String>)> = look
        .children
        .iter()
        .filter(|c| [101, 102].contains(&c.pid))
        .map(|c| (c.pid, c.blocked_on.clone()))
        .collect();
    assert_eq!(
        blocked,
        [
            (102, Some("this kernel has no /proc/PID/syscall".to_owned())),
            (
                101,
                Some("this kernel has no /proc/PID/syscall; kernel wait: io_schedule".to_owned())
            ),
        ]
    );
}

// R8.13: a `syscall` file this process may not read (another user's
// process, where stallwarden runs unprivileged) says so in plain words
// (kills the deleted `PermissionDenied` arm of `io_reason`). Root reads
// anything, so the look is taken on a thread whose file-system uid is
// nobody's (setfsuid is per thread and drops the override).
#[test]
fn a_syscall_file_it_may_not_read_says_permission_denied() {
    use std::os::unix::fs::PermissionsExt;
    let fake = FakeProc::new();
    fake.process(151, 100, "theirs");
    fake.write(
        "151/syscall",
        "0 0x3 0x7f00 0x1 0x0 0x0 0x0 0x7ffd 0x7f3a\n",
    );
    let mode = |rel: &str, m: u32| {
        std::fs::set_permissions(fake.path(rel), std::fs::Permissions::from_mode(m)).unwrap()
    };
    mode("", 0o755);
    mode("151/syscall", 0o000);
    let said = std::thread::scope(|s| {
        s.spawn(|| {
            // SAFETY: setfsuid changes only this thread's file-system uid.
            unsafe { libc::setfsuid(65534) };
            match std::fs::read(fake.path("151/syscall")) {
                Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => Some(fake.look()),
                _ => None,
            }
        })
        .join()
        .unwrap()
    });
    let Some(said) = said else {
        eprintln!("skipped: this thread reads a mode-000 file even as nobody");
        return;
    };
    assert_eq!(
        said[&151],
        "cannot read /proc/151/syscall (permission denied)"
    );
}

// R8.13: a `select` over a descriptor past 64 reads the second word of
// each set (kills `* with +` in `Inspector::select_fds`, which read 10
// bytes of a 16-byte set and indexed past them).
#[test]
fn a_select_on_a_descriptor_past_64_names_it() {
    let mut g = Group::python(
        "import os, select; r, w = os.pipe(); os.dup2(r, 100); \
         print('ready', flush=True); select.select([100], [], [])",
    );
    g.ready();
    let py = blocked(g.pid(), "python3", "select");
    assert_eq!(
        py.blocked_on.unwrap(),
        "waiting (select) on 1 fds (100: a pipe)"
    );
}
