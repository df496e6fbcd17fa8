//! What a suspect is blocked on (R8.13), asked of real processes: a read
//! of a terminal, a pipe and a FIFO, a `flock` waiter, a shell waiting for
//! its child, a TCP client in `recv`, a server in `accept`, a `poll` over a
//! socket the peer closed (`CLOSE_WAIT`), a worker thread in `read` while
//! the main one waits in a lock. Each process says "ready" on its stdout
//! just before it blocks; the test then samples until the blocking point
//! shows, a bounded spin with no sleep.

use std::io::{BufRead, BufReader};
use std::net::TcpListener;
use std::os::unix::process::CommandExt;
use std::process::{Child, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

use nix::sys::signal::{killpg, Signal};
use nix::unistd::Pid;
use stallguard_sources::procs::ProcTable;
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
    let py = blocked(g.pid(), "python3", "CLOSE_WAIT");
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
