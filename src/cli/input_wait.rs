//! `on-input-wait = "pause"` (R8.13, R2.8): while the command's foreground
//! process waits for what the user types on the terminal (an approval
//! prompt), every budget pauses as for Ctrl-Z; the step says "waiting for
//! input", so `describe` says it too; the first look that finds it no
//! longer waiting resumes them.
//!
//! # When the command counts as waiting for the user
//!
//! A pause hides a silence from the watchdog, so the rule errs towards
//! running the budgets. Every look (each [`EVERY`]) reads `/proc` for each
//! live process of the command's tree and each of its threads, as
//! src/cli/typing.rs does, and takes one of three answers ([`Look`]).
//!
//! The command is **held** for input when all of these are true:
//!
//! 1. A process of the terminal's foreground group has a thread blocked on
//!    the terminal: in a `read` of it, or in an `epoll`, `poll` or `select`
//!    whose descriptors include it.
//! 2. No thread of any process of the tree is blocked on a TCP connection
//!    (any state but `LISTEN`): in a `read`/`recv` of it, or in an `epoll`
//!    that holds it, or a `poll`/`select` while it is open (their sets are
//!    in the process's memory, so every open descriptor counts).
//! 3. Every other live process of the tree is an ancestor of one found in
//!    1 (a shell or wrapper that started it); a child or sibling that has
//!    run for a second or more (a tool the agent started, a helper it
//!    talks to) means work is in progress.
//! 4. Every thread's state could be read.
//!
//! It is **busy** when 2, 3 or 4 fails, or when no thread waits on the
//! terminal and none is on a CPU; **unsure** when no thread waits on the
//! terminal but one is on a CPU (an event loop runs a timer between two
//! waits at a prompt as much as it works on an answer), or when 1, 2 and 4
//! hold and the other processes are all younger than a second (Claude Code
//! runs `ps | grep` and a copy of itself now and then at a prompt). The budgets pause
//! after two held looks in a row, and resume after two busy looks in a row
//! or four looks in a row that are not held: a program between two
//! requests is not taken for one at a prompt, and a prompt's timer is not
//! taken for the answer (about 0.5 s to pause or resume, 1 s at most).
//!
//! Why 2: an event-loop program (Node, Bun, Python's asyncio, tokio: every
//! agent CLI's TUI) keeps the terminal among its `epoll` targets all the
//! time, while it streams from the model as much as at a prompt. Claude
//! Code 2.1 (Bun), measured: at an approval prompt its main thread is in
//! `epoll_pwait2` on the terminal, an eventfd and a listening Unix socket,
//! and its "HTTP Client" thread in `epoll_pwait2` on an eventfd alone; while
//! a model stream is silent the main thread is exactly the same and the
//! HTTP thread's epoll also holds the `ESTABLISHED` socket to the model. So
//! "the terminal is in the epoll set" alone would pause the budgets while a
//! stream silently dies, the very hang a watchdog is for. The terminal's
//! mode does not tell either (raw in both). What it costs: a program that
//! keeps an idle connection open while it asks (a keep-alive connection in
//! a pool, a websocket to an IDE) or a helper process running beside it is
//! never paused, and its prompt is judged like any silence, as with
//! `stall`. Pipes and Unix sockets do not count (an event loop wakes
//! itself through one), so a wait on a daemon over a Unix socket, by a
//! process that also waits on the terminal, is paused.

use std::collections::{HashMap, HashSet};
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::time::{Duration, Instant};

use super::reaper::Proc;
use super::report::Pauses;
use super::typing::{is_terminal, thread_waits, Waits};
use stallwarden::sys::{self, TcpConn};
use stallwarden::TaskHandle;

/// How often the terminal's readers are looked at.
pub(crate) const EVERY: Duration = Duration::from_millis(250);

/// The step a paused task shows (`describe`, the stall line's last step).
pub(crate) const STEP: &str = "waiting for input on the terminal (on-input-wait = pause)";

/// One look's answer (see the module's doc).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Look {
    /// The command waits for the user and nothing else.
    Held,
    /// The command works or waits on something else.
    Busy,
    /// No thread waits on the terminal, but one is on a CPU.
    Unsure,
}

/// Whether the budgets are paused for input now, and since when.
#[derive(Debug, Default)]
pub(crate) struct InputWait {
    since: Option<Instant>,
    /// Held looks in a row.
    held: u32,
    /// Busy looks in a row.
    busy: u32,
    /// Looks in a row that were not held.
    not_held: u32,
}

impl InputWait {
    /// Takes one look's answer: pauses after two held looks in a row,
    /// resumes (and records the pause for the status line) after two busy
    /// looks in a row or four not held.
    pub(crate) fn look(&mut self, look: Look, task: &TaskHandle, pauses: &mut Pauses) {
        let bump = |n: &mut u32, yes: bool| *n = if yes { *n + 1 } else { 0 };
        bump(&mut self.held, look == Look::Held);
        bump(&mut self.busy, look == Look::Busy);
        bump(&mut self.not_held, look != Look::Held);
        match self.since {
            None if self.held >= 2 && task.pause().is_ok() => {
                task.set_step(STEP);
                self.since = Some(Instant::now());
            }
            Some(from) if self.busy >= 2 || self.not_held >= 4 => {
                let _ = task.resume();
                task.set_step("input read; budgets resumed");
                pauses.add(from, Instant::now());
                self.since = None;
            }
            _ => {}
        }
    }
}

/// Looks once at whether the command is held for what the user types
/// (the module's doc): `fg` is the terminal's foreground group, `tty` the
/// terminal's device number.
pub(crate) fn look(fg: u32, tty: u64) -> Look {
    look_at(&super::reaper::our_tree(None), fg, tty)
}

/// [`look`] at the processes of `tree`.
fn look_at(tree: &[Proc], fg: u32, tty: u64) -> Look {
    let tree: Vec<&Proc> = tree.iter().filter(|p| !p.zombie).collect();
    let mut waits = HashMap::new();
    for p in &tree {
        let w = thread_waits(p.pid);
        if w.contains(&Waits::Unknown) {
            return Look::Busy;
        }
        waits.insert(p.pid, w);
    }
    let readers: HashSet<u32> = tree
        .iter()
        .filter(|p| {
            p.pgid == fg
                && waits[&p.pid].iter().any(|w| match w {
                    Waits::On(fds) => fds.iter().any(|&fd| is_terminal(p.pid, fd, tty)),
                    _ => false,
                })
        })
        .map(|p| p.pid)
        .collect();
    if readers.is_empty() {
        let running = waits.values().flatten().any(|w| *w == Waits::Running);
        return if running { Look::Unsure } else { Look::Busy };
    }
    let parents: HashMap<u32, u32> = tree.iter().map(|p| (p.pid, p.ppid)).collect();
    let mut ancestors = HashSet::new();
    for &r in &readers {
        let mut at = r;
        while let Some(&up) = parents.get(&at) {
            if !ancestors.insert(up) {
                break;
            }
            at = up;
        }
    }
    let others: Vec<u32> = tree
        .iter()
        .filter(|p| !readers.contains(&p.pid) && !ancestors.contains(&p.pid))
        .map(|p| p.pid)
        .collect();
    if others.iter().any(|&pid| !young(pid)) {
        return Look::Busy;
    }
    let mut tcp = None;
    let on_network = tree.iter().any(|p| {
        waits[&p.pid].iter().any(|w| match w {
            Waits::On(fds) => fds.iter().any(|&fd| on_tcp(p.pid, fd, &mut tcp)),
            _ => false,
        })
    });
    if on_network {
        Look::Busy
    } else if others.is_empty() {
        Look::Held
    } else {
        Look::Unsure
    }
}

/// How long a process beside the reader may live and still be taken for a
/// helper of the prompt rather than work in progress.
const YOUNG: Duration = Duration::from_secs(1);

/// Whether process `pid` started less than [`YOUNG`] ago (from its start
/// time in `/proc/PID/stat` and the system's uptime); a process that
/// cannot be read is not.
fn young(pid: u32) -> bool {
    let Some(stat) = sys::read_stat(sys::proc_root(), pid) else {
        return false;
    };
    let Some(up) = sys::uptime(sys::proc_root()) else {
        return false;
    };
    // SAFETY: sysconf only reads a constant.
    let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if ticks <= 0 {
        return false;
    }
    let started = stat.starttime as f64 / ticks as f64;
    up - started < YOUNG.as_secs_f64()
}

/// Whether process `pid`'s descriptor `fd` is a TCP connection (a socket
/// found in its network namespace's TCP tables, not listening). `tcp` is
/// the tables, read on first need.
fn on_tcp(pid: u32, fd: u64, tcp: &mut Option<HashMap<u64, TcpConn>>) -> bool {
    let Ok(m) = sys::fd_metadata(sys::proc_root(), pid, fd) else {
        return false;
    };
    if !m.file_type().is_socket() {
        return false;
    }
    let table = tcp.get_or_insert_with(|| sys::read_tcp(sys::proc_root(), pid));
    table.get(&m.ino()).is_some_and(|c| !c.listening())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
    use std::process::{Child, Command, Stdio};

    // R2.8 with R8.13: two held looks pause, a look on a CPU between them
    // neither pauses nor resumes, two busy looks (or four not held) resume
    // and record the pause.
    #[test]
    fn looks_pause_and_resume_only_when_two_agree() {
        use Look::{Busy, Held, Unsure};
        let guard = stallwarden::Guard::builder()
            .clock(stallwarden::ManualClock::new())
            .build();
        let task = guard
            .start("probe", stallwarden::Profile::default())
            .unwrap();
        let mut pauses = Pauses::default();
        let mut wait = InputWait::default();
        let mut paused_after = |looks: &[Look]| {
            for &l in looks {
                wait.look(l, &task, &mut pauses);
            }
            task.status().unwrap().paused
        };
        assert!(!paused_after(&[Held, Unsure, Held]));
        assert!(paused_after(&[Held]));
        assert_eq!(task.status().unwrap().last_step.as_deref(), Some(STEP));
        assert!(paused_after(&[Busy, Held, Unsure, Unsure, Unsure]));
        assert!(paused_after(&[Held, Busy, Unsure]));
        assert!(!paused_after(&[Unsure, Unsure]));
        assert!(!paused_after(&[Held]));
        assert!(paused_after(&[Held, Busy]));
        assert!(!paused_after(&[Busy]));
        assert_eq!(
            task.status().unwrap().last_step.as_deref(),
            Some("input read; budgets resumed")
        );
    }

    /// A pseudo-terminal: the slave is the commands' stdin.
    struct Pty {
        _master: OwnedFd,
        slave: OwnedFd,
    }

    impl Pty {
        fn open() -> Pty {
            let (mut m, mut s) = (-1, -1);
            // SAFETY: pointers to live locals; null name, termios, size.
            let rc = unsafe {
                libc::openpty(
                    &mut m,
                    &mut s,
                    std::ptr::null_mut(),
                    std::ptr::null(),
                    std::ptr::null(),
                )
            };
            assert_eq!(rc, 0);
            // SAFETY: fresh descriptors we now own.
            unsafe {
                Pty {
                    _master: OwnedFd::from_raw_fd(m),
                    slave: OwnedFd::from_raw_fd(s),
                }
            }
        }

        fn device(&self) -> u64 {
            std::fs::metadata(format!("/proc/self/fd/{}", self.slave.as_raw_fd()))
                .unwrap()
                .rdev()
        }

        /// `python3 -c script` in a process group of its own, the
        /// terminal on its stdin; killed when dropped.
        fn python(&self, script: &str) -> Killed {
            use std::os::unix::process::CommandExt;
            Killed(
                Command::new("python3")
                    .args(["-c", script])
                    .stdin(Stdio::from(self.slave.try_clone().unwrap()))
                    .stdout(Stdio::null())
                    .process_group(0)
                    .spawn()
                    .unwrap(),
            )
        }
    }

    struct Killed(Child);

    impl Drop for Killed {
        fn drop(&mut self) {
            // SAFETY: kill(2) on the group our child leads.
            unsafe { libc::kill(-(self.0.id() as i32), libc::SIGKILL) };
            let _ = self.0.wait();
        }
    }

    /// The live processes of `pid`'s tree (it and its descendants).
    fn tree_of(pid: u32) -> Vec<Proc> {
        let all: Vec<Proc> = std::fs::read_dir("/proc")
            .unwrap()
            .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
            .filter_map(|p| Proc::parse(&std::fs::read_to_string(format!("/proc/{p}/stat")).ok()?))
            .collect();
        let mut ids = vec![pid];
        let mut i = 0;
        while i < ids.len() {
            let parent = ids[i];
            ids.extend(all.iter().filter(|p| p.ppid == parent).map(|p| p.pid));
            i += 1;
        }
        all.into_iter().filter(|p| ids.contains(&p.pid)).collect()
    }

    /// Waits (bounded) until `pid`'s tree has `n` processes and `pid`
    /// sits in its final wait, one that includes the terminal.
    fn settled(pid: u32, n: usize, tty: u64) -> Vec<Proc> {
        let start = Instant::now();
        loop {
            let tree = tree_of(pid);
            let waiting = thread_waits(pid).iter().any(|w| match w {
                Waits::On(fds) => fds.iter().any(|&fd| is_terminal(pid, fd, tty)),
                _ => false,
            });
            if waiting && tree.len() == n {
                return tree;
            }
            assert!(
                start.elapsed() < Duration::from_secs(30),
                "{pid} never settled"
            );
            // A real process is being waited on.
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    fn have_python() -> bool {
        let ok = Command::new("python3")
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success());
        if !ok {
            eprintln!("SKIPPED: python3 is not installed");
        }
        ok
    }

    /// An event loop's wait: the terminal and, if `register_socket`, a TCP
    /// connection to `port` in one epoll set; the connection is open
    /// either way.
    fn event_loop(port: u16, register_socket: bool) -> String {
        format!(
            "import select, socket\n\
             s = socket.create_connection(('127.0.0.1', {port}))\n\
             e = select.epoll()\n\
             e.register(0, select.EPOLLIN)\n\
             if {}: e.register(s.fileno(), select.EPOLLIN)\n\
             e.poll()\n",
            if register_socket { "True" } else { "False" }
        )
    }

    // R8.13: a process reading the terminal and nothing else is held; with
    // a child beside it that has run for a second (a tool at work) it is
    // busy.
    #[test]
    fn a_reader_of_the_terminal_is_held_unless_a_child_runs() {
        if !have_python() {
            return;
        }
        let pty = Pty::open();
        let tty = pty.device();
        let reader = pty.python("import sys; sys.stdin.readline()");
        let pid = reader.0.id();
        let tree = settled(pid, 1, tty);
        assert_eq!(look_at(&tree, pid, tty), Look::Held);
        assert_eq!(
            look_at(&tree, pid + 1, tty),
            Look::Busy,
            "not the foreground group"
        );

        let with_child = pty.python(
            "import subprocess, sys; c = subprocess.Popen(['sleep', '30']); sys.stdin.readline()",
        );
        let pid = with_child.0.id();
        let tree = settled(pid, 2, tty);
        // A helper younger than a second makes the look unsure; past that,
        // the child is work in progress.
        let child = tree.iter().find(|p| p.pid != pid).unwrap().pid;
        let start = Instant::now();
        while young(child) {
            assert!(start.elapsed() < Duration::from_secs(30));
            // A real process is being waited on.
            std::thread::sleep(Duration::from_millis(50));
        }
        assert_eq!(look_at(&tree, pid, tty), Look::Busy, "{tree:?}");
    }

    // R8.13: an event loop with the terminal and an established TCP
    // connection in one epoll set (an agent CLI streaming from its model)
    // is busy; the same with the connection open but not waited on is held.
    #[test]
    fn an_event_loop_waiting_on_a_tcp_stream_is_busy() {
        if !have_python() {
            return;
        }
        let server = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = server.local_addr().unwrap().port();
        let pty = Pty::open();
        let tty = pty.device();

        let streaming = pty.python(&event_loop(port, true));
        let _accepted = server.accept().unwrap();
        let pid = streaming.0.id();
        let tree = settled(pid, 1, tty);
        assert_eq!(look_at(&tree, pid, tty), Look::Busy);

        let asking = pty.python(&event_loop(port, false));
        let _accepted = server.accept().unwrap();
        let pid = asking.0.id();
        let tree = settled(pid, 1, tty);
        assert_eq!(look_at(&tree, pid, tty), Look::Held);
    }
}
