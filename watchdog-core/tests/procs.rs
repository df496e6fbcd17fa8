//! Processes as the core reads them from `/proc` (`watchdog_core::sys`):
//! which children are suspects (R3.1, R5.5), a stat line and its state
//! letters (R10.2), a stopped child read as stopped, the pidfd wait for a
//! process's end (R8.7), and a leftover process's name as people read it
//! (R8.13).
//!
//! Pure values, and real short-lived children (`sleep`, `true`) that each
//! test stops, kills and reaps itself; every wait on them is bounded
//! (`waitpid`, `wait_exit` with a timeout), no sleep and no timing assert.

use watchdog_core::sys::{state_from_code, ProcStat};
use watchdog_core::{ChildInfo, ProcState};

mod common;
use common::{ms, secs};

// R3.1, R5.5: a suspect child is blocked in I/O, or alive across two
// samples with no CPU; a zombie with no CPU is not a suspect, and a first
// sample (no delta) names nobody.
#[test]
fn suspects_are_io_blocked_or_idle_live_children() {
    let child = |state, delta| ChildInfo {
        pid: 1,
        name: "c".into(),
        state,
        wchan: None,
        blocked_on: None,
        started_unix_ms: None,
        cpu_ms: 0,
        cpu_delta_ms: delta,
    };
    assert!(child(ProcState::DiskWait, Some(50)).is_suspect());
    assert!(child(ProcState::DiskWait, None).is_suspect());
    assert!(child(ProcState::Sleeping, Some(0)).is_suspect());
    assert!(child(ProcState::Stopped, Some(0)).is_suspect());
    assert!(!child(ProcState::Zombie, Some(0)).is_suspect());
    assert!(!child(ProcState::Sleeping, None).is_suspect());
    assert!(!child(ProcState::Running, Some(3)).is_suspect());
}

// R10.2: a stat line whose last `)` comes before its first `(` has no
// command name; each state letter the verdict names is read as itself.
#[test]
fn stat_lines_and_state_letters_read_exactly() {
    assert_eq!(
        ProcStat::parse(b"12 )x( S 1 2 3"),
        Err(watchdog_core::sys::StatError::NoCommand)
    );
    for (code, state) in [
        (b'R', ProcState::Running),
        (b'S', ProcState::Sleeping),
        (b'D', ProcState::DiskWait),
        (b'Z', ProcState::Zombie),
        (b'T', ProcState::Stopped),
        (b't', ProcState::Stopped),
        (b'I', ProcState::Other),
    ] {
        assert_eq!(state_from_code(code), state, "{}", code as char);
    }
}

// R3.1, R5.5: a stopped child (`T`, or `t` when a tracer stopped it) is
// reported as stopped, which makes it a suspect when it uses no CPU. A real
// child is stopped with SIGSTOP and its /proc stat line read once
// `waitpid(WUNTRACED)` says it stopped. (Mutant: `delete match arm b'T' |
// b't'` in `state_from_code`, which reported it as "other".)
#[test]
fn a_stopped_child_reads_as_stopped() {
    assert_eq!(state_from_code(b't'), ProcState::Stopped);
    let mut child = std::process::Command::new("sleep")
        .arg("60")
        .spawn()
        .expect("spawn sleep");
    let pid = child.id() as libc::pid_t;
    // SAFETY: plain syscalls on our own child's pid; `status` outlives the call.
    let stopped = unsafe {
        let mut status = 0;
        libc::kill(pid, libc::SIGSTOP) == 0
            && libc::waitpid(pid, &mut status, libc::WUNTRACED) == pid
            && libc::WIFSTOPPED(status)
    };
    let line = std::fs::read(format!("/proc/{pid}/stat"));
    child.kill().expect("kill sleep");
    child.wait().expect("reap sleep");
    assert!(stopped, "the child stopped");
    let line = line.expect("read stat");
    let stat = ProcStat::parse(&line).unwrap();
    assert_eq!(
        (stat.pid, stat.state_code, stat.state),
        (pid as u32, b'T', ProcState::Stopped)
    );
}

// R8.7: the one pidfd wait of the crate returns the moment a process
// ends, waits the timeout out while it runs, and takes a process that is
// gone (reaped, so no pidfd can be had) as ended.
#[test]
fn wait_exit_sees_an_end_a_run_and_an_absence() {
    use watchdog_core::sys::wait_exit;
    let mut child = std::process::Command::new("true").spawn().unwrap();
    assert!(wait_exit(child.id(), secs(30)), "a child that exited");
    let pid = child.id();
    child.wait().unwrap();
    assert!(wait_exit(pid, secs(30)), "a reaped child is gone");
    assert!(wait_exit(u32::MAX, secs(30)), "no pid of that size");
    let mut sleeper = std::process::Command::new("sleep")
        .arg("30")
        .spawn()
        .unwrap();
    assert!(!wait_exit(sleeper.id(), ms(10)), "still running");
    sleeper.kill().unwrap();
    assert!(wait_exit(sleeper.id(), secs(30)), "killed, now a zombie");
    sleeper.wait().unwrap();
}

// R8.13: a leftover process is named as people read it.
#[test]
fn a_process_name_reads_name_then_pid() {
    let p = watchdog_core::ProcessName {
        pid: 42,
        name: "sleep".into(),
    };
    assert_eq!(p.to_string(), "sleep (pid 42)");
}

// R8.7: where no pidfd can be had, `wait_exit` waits the timeout out and
// says the process has not ended; only "no such process" (ESRCH) is taken
// as an end. A live thread's id is such a pid: the kernel gives no pidfd
// for a thread that leads no process (EINVAL, or ENOENT on newer kernels).
#[test]
fn a_pid_with_no_pidfd_is_not_taken_for_an_end() {
    use std::sync::mpsc;
    use watchdog_core::sys::wait_exit;
    let (tid_tx, tid_rx) = mpsc::channel();
    let (stop_tx, stop_rx) = mpsc::channel::<()>();
    let thread = std::thread::spawn(move || {
        // SAFETY: gettid has no preconditions.
        tid_tx.send(unsafe { libc::gettid() } as u32).unwrap();
        let _ = stop_rx.recv();
    });
    let tid = tid_rx.recv_timeout(secs(30)).expect("the thread's id");
    let ended = wait_exit(tid, ms(10));
    drop(stop_tx);
    thread.join().unwrap();
    assert_ne!(tid, std::process::id());
    assert!(!ended, "a live thread has not ended");
}
