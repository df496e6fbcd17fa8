//! The sd_notify socket against real clients (R5.4): Python's standard
//! library as an always-available independent client, `systemd-notify` where
//! Debian's `systemd` package is installed, and hand-made malformed datagrams
//! from a std socket. Budgets move in virtual time (ManualClock); the only
//! waiting is on real client processes and on the socket's own thread, always
//! bounded.

use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::UnixDatagram;
use std::path::Path;
use std::process::{Command, Output};
use std::time::Duration;

use proptest::prelude::*;
use stallwarden_sources::notify::{
    Malformed, Notification, NotifySocket, MAX_STATUS, TRIGGER_REASON,
};
use watchdog_core::{EventKind, Guard, KindSet, ManualClock, Profile, RecordingSink, SignalKind};

const WAIT: Duration = Duration::from_secs(20);

fn guard() -> (Guard, RecordingSink) {
    let rec = RecordingSink::new();
    let guard = Guard::builder()
        .clock(ManualClock::new())
        .sink(rec.clone())
        .build();
    (guard, rec)
}

fn quiet(profile: Profile) -> Profile {
    profile.heartbeat_interval(None)
}

/// An independent client in Python's standard library. Each argument is one
/// datagram; `fd:` before it passes the write end of a fresh pipe alongside
/// (SCM_RIGHTS) and then waits, at most 10 s, for the server to close it:
/// the script prints `closed` on EOF and exits 3 on timeout.
const PY_CLIENT: &str = r#"
import os, select, socket, sys
path = sys.argv[1]
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
for arg in sys.argv[2:]:
    if arg.startswith("fd:"):
        r, w = os.pipe()
        rights = [(socket.SOL_SOCKET, socket.SCM_RIGHTS, w.to_bytes(4, sys.byteorder))]
        s.sendmsg([os.fsencode(arg[3:])], rights, 0, path)
        os.close(w)
        ready, _, _ = select.select([r], [], [], 10)
        if not ready or os.read(r, 1) != b"":
            print("timeout")
            sys.exit(3)
        os.close(r)
        print("closed")
    else:
        s.sendto(os.fsencode(arg), path)
"#;

fn python(path: &Path, datagrams: &[&str]) -> Output {
    let out = Command::new("python3")
        .arg("-c")
        .arg(PY_CLIENT)
        .arg(path)
        .args(datagrams)
        .output()
        .expect("python3 runs");
    assert!(
        out.status.success(),
        "python client failed: {:?}\nstdout: {}\nstderr: {}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// Sends raw datagrams from a std socket, then waits until the server has
/// handled `expected_total` datagrams in all.
fn send_raw(socket: &NotifySocket, datagrams: &[&[u8]], expected_total: u64) {
    let client = UnixDatagram::unbound().unwrap();
    for d in datagrams {
        client.send_to(d, socket.path()).unwrap();
    }
    assert!(
        socket.wait_for_datagrams(expected_total, WAIT),
        "server handled {} of {expected_total} datagrams",
        socket.datagrams()
    );
}

fn heartbeat(socket: &NotifySocket) {
    let before = socket.datagrams();
    send_raw(socket, &[b"WATCHDOG=1"], before + 1);
}

#[test]
fn python_heartbeat_reaches_the_task() {
    // R5.4: WATCHDOG=1 is a heartbeat.
    let (guard, _rec) = guard();
    let task = guard.start("py", quiet(Profile::default())).unwrap();
    let socket = NotifySocket::bind_temp(task.recorder()).unwrap();
    assert!(task.last_signal(SignalKind::Heartbeat).is_none());

    python(socket.path(), &["WATCHDOG=1"]);
    assert!(socket.wait_for_datagrams(1, WAIT));
    assert_eq!(socket.heartbeats(), 1);
    assert!(task.last_signal(SignalKind::Heartbeat).is_some());
}

#[test]
fn barrier_fd_is_closed_after_the_earlier_datagrams_took_effect() {
    // R5.4: BARRIER=1 carries a pipe end; closing it releases the client,
    // and by then everything it sent before has been applied.
    let (guard, _rec) = guard();
    let task = guard.start("barrier", quiet(Profile::default())).unwrap();
    let socket = NotifySocket::bind_temp(task.recorder()).unwrap();

    let out = python(
        socket.path(),
        &["STATUS=step one", "WATCHDOG=1", "fd:BARRIER=1"],
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "closed");
    // No waiting here: the barrier is the synchronisation.
    assert_eq!(
        task.status().unwrap().last_step.as_deref(),
        Some("step one")
    );
    let stats = socket.stats();
    assert_eq!(
        (stats.heartbeats, stats.barriers, stats.fds_closed),
        (1, 1, 1)
    );
}

#[test]
fn fds_passed_with_any_datagram_are_closed_even_malformed_ones() {
    // R5.4 + R10.2: a descriptor is closed whatever it came with.
    let (guard, _rec) = guard();
    let task = guard.start("fds", quiet(Profile::default())).unwrap();
    let socket = NotifySocket::bind_temp(task.recorder()).unwrap();

    let out = python(
        socket.path(),
        &[
            "fd:WATCHDOG=1",
            "fd:no assignment here",
            "fd:",
            "fd:WATCHDOG=sometimes",
        ],
    );
    assert_eq!(
        String::from_utf8_lossy(&out.stdout)
            .matches("closed")
            .count(),
        4
    );
    let stats = socket.stats();
    assert_eq!(stats.fds_closed, 4);
    assert_eq!(stats.heartbeats, 1);
    let m = socket.malformed_by_reason();
    assert_eq!(m["notify.no_assignment"], 1);
    assert_eq!(m["notify.empty"], 1);
    assert_eq!(m["notify.bad_value"], 1);
    assert_eq!(socket.malformed(), 3);
}

#[test]
fn malformed_datagrams_are_counted_and_the_socket_survives() {
    // R5.4, R10.2: malformed datagrams are counted and ignored, never fatal.
    let (guard, rec) = guard();
    let task = guard.start("junk", quiet(Profile::default())).unwrap();
    let socket = NotifySocket::bind_temp(task.recorder()).unwrap();

    let oversize = vec![b'A'; 5000];
    let junk: [&[u8]; 11] = [
        b"\xff\xfe\xfd",
        b"WATCHDOG=1\0",
        b"",
        b"\n\n",
        &oversize,
        b"no equals sign",
        b"=1",
        b"WATCHDOG=2",
        b"EXTEND_TIMEOUT_USEC=-5",
        b"EXTEND_TIMEOUT_USEC=99999999999999999999999",
        b"READY=yes",
    ];
    send_raw(&socket, &junk, junk.len() as u64);
    // R10.6: by reason on the task, under `notify.` keys.
    let m = socket.malformed_by_reason();
    let want = [
        ("notify.bad_value", 4),
        ("notify.empty", 2),
        ("notify.no_assignment", 2),
        ("notify.not_text", 2),
        ("notify.oversize", 1),
    ];
    assert_eq!(m.into_iter().collect::<Vec<_>>(), want);
    assert_eq!(task.status().unwrap().refused.values().sum::<u64>(), 11);
    assert_eq!(socket.malformed(), 11);
    assert_eq!(socket.heartbeats(), 0);
    assert_eq!(rec.types_for("junk"), ["started"]);

    // Still serving, and a mixed datagram applies its good lines.
    send_raw(
        &socket,
        &[b"WATCHDOG=1\nbogus\nMAINPID=4242\nSTATUS=fine"],
        12,
    );
    let stats = socket.stats();
    assert_eq!(stats.heartbeats, 1);
    assert_eq!(stats.ignored, 1);
    assert_eq!(socket.malformed_by_reason()["notify.no_assignment"], 3);
    assert_eq!(socket.malformed(), 12);
    assert_eq!(task.status().unwrap().last_step.as_deref(), Some("fine"));
}

#[test]
fn heartbeats_renew_the_idle_budget_when_opted_in() {
    // R2.6 + R5.4: heartbeat renews only when it is in renewed-by.
    let (guard, rec) = guard();
    let renewing = KindSet::DEFAULT_RENEWING.with(SignalKind::Heartbeat);
    let task = guard
        .start(
            "opted-in",
            quiet(
                Profile::default()
                    .idle(Duration::from_secs(30))
                    .renewed_by(renewing),
            ),
        )
        .unwrap();
    let socket = NotifySocket::bind_temp(task.recorder()).unwrap();
    for _ in 0..4 {
        guard.advance(Duration::from_secs(20));
        heartbeat(&socket);
    }
    assert_eq!(
        rec.types_for("opted-in"),
        ["started"],
        "at {:?}",
        guard.now()
    );

    // The same heartbeats without the opt-in prove liveness only.
    let plain = guard
        .start(
            "liveness-only",
            quiet(Profile::default().idle(Duration::from_secs(30))),
        )
        .unwrap();
    let socket = NotifySocket::bind_temp(plain.recorder()).unwrap();
    for _ in 0..2 {
        guard.advance(Duration::from_secs(20));
        heartbeat(&socket);
    }
    let types = rec.types_for("liveness-only");
    assert_eq!(types[..2], ["started", "stalled"], "at {:?}", guard.now());
}

#[test]
fn watchdog_trigger_cancels_with_its_reason() {
    // R2.10: WATCHDOG=trigger is a cancel with that reason.
    let (guard, rec) = guard();
    let task = guard.start("faulty", quiet(Profile::default())).unwrap();
    let socket = NotifySocket::bind_temp(task.recorder()).unwrap();
    python(socket.path(), &["WATCHDOG=trigger"]);
    assert!(rec.wait_for("faulty", "triggered", WAIT));
    assert!(rec.wait_for("faulty", "cancelling", WAIT));
    let reason = rec.events().into_iter().find_map(|e| match e.kind {
        EventKind::Triggered { reason } => Some(reason),
        _ => None,
    });
    assert_eq!(reason.as_deref(), Some(TRIGGER_REASON));
    // The counters are updated after the datagram's effects are delivered.
    assert!(socket.wait_for_datagrams(1, WAIT));
    assert_eq!(socket.stats().triggers, 1);
}

#[test]
fn extend_timeout_moves_the_deadline_and_refusals_are_counted() {
    // R2.9: EXTEND_TIMEOUT_USEC extends; past max-deadline it is refused,
    // counted, and the socket carries on.
    let (guard, rec) = guard();
    let profile = Profile::default()
        .idle(Duration::from_secs(1000))
        .deadline(Duration::from_secs(60))
        .max_deadline(Duration::from_secs(120));
    let task = guard.start("extends", quiet(profile)).unwrap();
    let socket = NotifySocket::bind_temp(task.recorder()).unwrap();

    python(
        socket.path(),
        &["EXTEND_TIMEOUT_USEC=90000000", "fd:BARRIER=1"],
    );
    assert_eq!(socket.stats().extensions, 1);
    guard.advance(Duration::from_secs(70));
    assert_eq!(
        rec.types_for("extends"),
        ["started"],
        "at {:?}",
        guard.now()
    );

    python(
        socket.path(),
        &["EXTEND_TIMEOUT_USEC=200000000", "fd:BARRIER=1"],
    );
    assert_eq!(socket.stats().extensions_refused, 1);
    guard.advance(Duration::from_secs(20));
    // R8.7: the refusal is an event as well as a count.
    assert_eq!(
        rec.types_for("extends"),
        [
            "started",
            "extension_refused",
            "deadline_exceeded",
            "cancelling"
        ],
        "at {:?}",
        guard.now()
    );
}

#[test]
fn ready_ends_the_startup_budget() {
    // R2.3 + R5.4: READY=1 ends startup; the idle budget runs from then.
    let (guard, rec) = guard();
    let profile = || {
        quiet(
            Profile::default()
                .startup(Duration::from_secs(10))
                .idle(Duration::from_secs(100)),
        )
    };
    let ready = guard.start("ready", profile()).unwrap();
    let never = guard.start("never-ready", profile()).unwrap();
    let socket = NotifySocket::bind_temp(ready.recorder()).unwrap();
    guard.advance(Duration::from_secs(5));
    python(socket.path(), &["READY=1", "fd:BARRIER=1"]);
    assert_eq!(socket.stats().readies, 1);
    guard.advance(Duration::from_secs(50));
    assert_eq!(rec.types_for("ready"), ["started"], "at {:?}", guard.now());
    assert_eq!(rec.types_for("never-ready")[..2], ["started", "stalled"]);
    drop(never);
}

#[test]
fn status_text_is_bounded_and_cleaned() {
    let (guard, _rec) = guard();
    let task = guard.start("chatty", quiet(Profile::default())).unwrap();
    let socket = NotifySocket::bind_temp(task.recorder()).unwrap();
    let long = format!("STATUS={}", "é".repeat(400));
    send_raw(&socket, &[long.as_bytes()], 1);
    let step = task.status().unwrap().last_step.unwrap();
    assert!(
        step.len() <= MAX_STATUS && step.len() >= MAX_STATUS - 1,
        "{}",
        step.len()
    );
    send_raw(&socket, &[b"STATUS=red \x1b[31mtext\r"], 2);
    assert_eq!(
        task.status().unwrap().last_step.as_deref(),
        Some("red  [31mtext ")
    );
    // Each STATUS= is counted, the long one and the cleaned one alike.
    assert_eq!(socket.stats().statuses, 2);
}

#[test]
fn a_flood_of_heartbeats_is_all_counted() {
    let (guard, _rec) = guard();
    let task = guard.start("flood", quiet(Profile::default())).unwrap();
    let socket = NotifySocket::bind_temp(task.recorder()).unwrap();
    let beats = vec![&b"WATCHDOG=1"[..]; 2000];
    send_raw(&socket, &beats, 2000);
    assert_eq!(socket.heartbeats(), 2000);
}

/// A handler that does nothing: a caught signal, not an ignored one, is
/// what makes a blocking `poll(2)` return `EINTR`.
extern "C" fn caught(_: libc::c_int) {}

/// The serving threads of this process (all named `stallwarden-notify`,
/// which the kernel's 15-byte `comm` cuts to `stallwarden-not`).
fn notify_threads() -> Vec<libc::pid_t> {
    std::fs::read_dir("/proc/self/task")
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
        .filter(|tid: &libc::pid_t| {
            std::fs::read_to_string(format!("/proc/self/task/{tid}/comm"))
                .is_ok_and(|c| c.trim_end() == "stallwarden-not")
        })
        .collect()
}

/// Whether a thread is asleep (state `S`), as the serving thread is
/// while it waits in `poll(2)` (and, for a moment, on a lock).
fn asleep(tid: libc::pid_t) -> bool {
    std::fs::read_to_string(format!("/proc/self/task/{tid}/stat"))
        .ok()
        .and_then(|s| Some(s[s.rfind(')')? + 2..].starts_with('S')))
        .unwrap_or(false)
}

/// Whether a thread is asleep in `poll(2)` itself, from the system call
/// it is blocked in (`/proc/self/task/TID/syscall`). Asleep alone is not
/// enough: a thread asleep on a lock restarts its futex wait after a
/// caught signal, and the signal then tests nothing.
fn asleep_in_poll(tid: libc::pid_t) -> bool {
    let calls: &[libc::c_long] = &[
        #[cfg(target_arch = "x86_64")]
        libc::SYS_poll,
        libc::SYS_ppoll,
    ];
    asleep(tid)
        && std::fs::read_to_string(format!("/proc/self/task/{tid}/syscall"))
            .ok()
            .and_then(|s| s.split_whitespace().next()?.parse::<libc::c_long>().ok())
            .is_some_and(|nr| calls.contains(&nr))
}

/// Whether a signal is pending for one thread (the `SigPnd` mask of
/// `/proc/self/task/TID/status`); a thread that is gone has none.
fn pending(tid: libc::pid_t, signal: libc::c_int) -> bool {
    std::fs::read_to_string(format!("/proc/self/task/{tid}/status"))
        .ok()
        .and_then(|s| {
            let mask = s.lines().find_map(|l| l.strip_prefix("SigPnd:"))?;
            u64::from_str_radix(mask.trim(), 16).ok()
        })
        .is_some_and(|mask| mask & (1 << (signal - 1)) != 0)
}

#[test]
fn a_signal_caught_on_the_serving_thread_does_not_stop_it() {
    // R5.4 and R10.5 (fail closed only on real failure): poll(2) returns
    // EINTR whenever a caught signal lands on its thread, SA_RESTART or not.
    // That is no failure: the thread must wait again and go on serving.
    // SAFETY: installs a handler that does nothing, for a signal no other
    // test in this binary uses.
    unsafe {
        let mut action: libc::sigaction = std::mem::zeroed();
        action.sa_sigaction = caught as extern "C" fn(libc::c_int) as usize;
        libc::sigemptyset(&mut action.sa_mask);
        assert_eq!(
            libc::sigaction(libc::SIGUSR1, &action, std::ptr::null_mut()),
            0
        );
    }
    let (guard, _rec) = guard();
    let task = guard.start("eintr", quiet(Profile::default())).unwrap();
    let before = notify_threads();
    let socket = NotifySocket::bind_temp(task.recorder()).unwrap();
    // Served once, the serving thread has run and taken its name. Other
    // tests of this binary may start theirs meanwhile: all new ones are
    // signalled, ours among them.
    heartbeat(&socket);
    let mut ours = notify_threads();
    ours.retain(|tid| !before.contains(tid));
    assert!(
        !ours.is_empty(),
        "binding started no stallwarden-notify thread"
    );
    for round in 0..3 {
        let mut signalled = 0;
        for &tid in &ours {
            // Bounded: a serving thread goes back to poll(2) at once and
            // nothing is sent to ours until the signal has landed; another
            // test's thread may end instead.
            let in_poll = (0..5000)
                .find_map(|_| {
                    if asleep_in_poll(tid) {
                        return Some(true);
                    }
                    if !std::path::Path::new(&format!("/proc/self/task/{tid}")).exists() {
                        return Some(false);
                    }
                    std::thread::sleep(Duration::from_millis(1));
                    None
                })
                .unwrap_or(false);
            if in_poll {
                // SAFETY: tgkill on a thread of this process, with a caught signal.
                unsafe { libc::syscall(libc::SYS_tgkill, libc::getpid(), tid, libc::SIGUSR1) };
                signalled += 1;
                // Until the thread has taken the signal: a datagram that
                // reached the socket first would make poll(2) return it,
                // not EINTR, and the handler would run on the way out.
                let taken = (0..5000).any(|_| {
                    !pending(tid, libc::SIGUSR1) || {
                        std::thread::sleep(Duration::from_millis(1));
                        false
                    }
                });
                assert!(taken, "thread {tid} never took its signal");
            }
        }
        assert!(signalled > 0, "no new serving thread waited in poll(2)");
        heartbeat(&socket);
        assert_eq!(socket.heartbeats(), round + 2);
    }
}

/// Times a thread of this process slept and was woken (voluntary and
/// involuntary context switches), from `/proc/self/task/TID/status`.
fn context_switches(tid: libc::pid_t) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/self/task/{tid}/status")).ok()?;
    let field = |key: &str| -> Option<u64> {
        status
            .lines()
            .find(|l| l.starts_with(key))?
            .split_whitespace()
            .nth(1)?
            .parse()
            .ok()
    };
    Some(field("voluntary_ctxt_switches:")? + field("nonvoluntary_ctxt_switches:")?)
}

#[test]
fn an_idle_socket_costs_no_wake_ups() {
    // R5.4 and R9.3 (no busy work while nothing happens): the serving thread
    // waits in poll(2) with no timeout, so a socket no one writes to wakes it
    // for nothing. A timeout of a millisecond would still pass every other
    // test while waking the thread a thousand times a second. Counted, not
    // timed: the idle stretch only gives a spinning thread room to show.
    let (guard, _rec) = guard();
    let task = guard.start("idle", quiet(Profile::default())).unwrap();
    let before = notify_threads();
    let _socket = NotifySocket::bind_temp(task.recorder()).unwrap();
    // Other tests of this binary bind sockets too, and drop them: a new
    // thread seen here may be theirs, busy, or gone before the look ends.
    // Ours is asleep all along and outlives every look, so the quietest
    // thread alive at both ends of a look is at most as busy as ours; a
    // look that kept no thread at all (only theirs, gone) is taken again.
    let mut fewest = None;
    for _ in 0..20 {
        let mut ours = Vec::new();
        for _ in 0..2000 {
            ours = notify_threads();
            ours.retain(|tid| !before.contains(tid));
            if ours.iter().any(|&tid| asleep(tid)) {
                break;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        assert!(
            !ours.is_empty(),
            "binding started no stallwarden-notify thread"
        );
        let start: Vec<_> = ours.iter().map(|&t| (t, context_switches(t))).collect();
        std::thread::sleep(Duration::from_millis(300));
        fewest = start
            .iter()
            .filter_map(|&(tid, was)| Some(context_switches(tid)? - was?))
            .min();
        if fewest.is_some() {
            break;
        }
    }
    let fewest = fewest.expect("the serving thread's /proc status is readable");
    assert!(
        fewest < 30,
        "an idle notify socket's thread woke {fewest} times in 300 ms"
    );
}

#[test]
fn socket_is_owner_only_and_removed_on_drop() {
    // R6.5's rule for control sockets applies here too: owner-only.
    let (guard, _rec) = guard();
    let task = guard.start("perm", quiet(Profile::default())).unwrap();
    let socket = NotifySocket::bind_temp(task.recorder()).unwrap();
    let path = socket.path().to_path_buf();
    let dir = path.parent().unwrap().to_path_buf();
    let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&path), 0o600);
    assert_eq!(mode(&dir), 0o700);
    drop(socket);
    assert!(!path.exists(), "socket file left behind");
    assert!(!dir.exists(), "private directory left behind");

    // Binding at an explicit path: same rules, and an occupied path is an
    // error naming it.
    let tmp = tempfile::tempdir().unwrap();
    let at = tmp.path().join("n.sock");
    let socket = NotifySocket::bind(&at, task.recorder()).unwrap();
    assert_eq!(mode(&at), 0o600);
    let err = NotifySocket::bind(&at, task.recorder())
        .unwrap_err()
        .to_string();
    assert!(err.contains("n.sock"), "{err}");
    drop(socket);
    assert!(!at.exists());
}

/// Runs `systemd-notify` against `socket`, or returns `None` (after saying
/// so) where Debian's `systemd` package is not installed.
fn systemd_notify(socket: &NotifySocket, args: &[&str]) -> Option<Output> {
    let Ok(out) = Command::new("systemd-notify")
        .args(args)
        .env("NOTIFY_SOCKET", socket.path())
        .output()
    else {
        eprintln!("SKIPPED: systemd-notify is not installed (apt-get install systemd); Python client tests still ran");
        return None;
    };
    assert!(
        out.status.success(),
        "systemd-notify {args:?} failed: {:?}: {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    Some(out)
}

#[test]
fn systemd_notify_heartbeat_with_barrier_returns() {
    // R5.4: without --no-block, systemd-notify sends BARRIER=1 with a pipe
    // end and waits for it to close (it gives up, failing, after 5 s).
    let (guard, _rec) = guard();
    let task = guard.start("sd", quiet(Profile::default())).unwrap();
    let socket = NotifySocket::bind_temp(task.recorder()).unwrap();
    let Some(_) = systemd_notify(&socket, &["WATCHDOG=1"]) else {
        return;
    };
    let stats = socket.stats();
    assert_eq!(stats.heartbeats, 1, "{stats:?}");
    assert!(stats.barriers >= 1 && stats.fds_closed >= 1, "{stats:?}");
    assert!(task.last_signal(SignalKind::Heartbeat).is_some());
}

#[test]
fn systemd_notify_status_ready_and_trigger() {
    let (guard, rec) = guard();
    let task = guard.start("sd2", quiet(Profile::default())).unwrap();
    let socket = NotifySocket::bind_temp(task.recorder()).unwrap();
    let Some(_) = systemd_notify(&socket, &["--status=compiling crate 3 of 9"]) else {
        return;
    };
    assert_eq!(
        task.status().unwrap().last_step.as_deref(),
        Some("compiling crate 3 of 9")
    );
    systemd_notify(&socket, &["--ready"]);
    assert_eq!(socket.stats().readies, 1);
    assert_eq!(socket.malformed(), 0, "{:?}", socket.stats());

    let before = socket.datagrams();
    systemd_notify(&socket, &["--no-block", "WATCHDOG=trigger"]);
    assert!(socket.wait_for_datagrams(before + 1, WAIT));
    assert!(rec.wait_for("sd2", "triggered", WAIT));
}

#[test]
fn parse_splits_lines_and_keeps_going_past_bad_ones() {
    let parsed = Notification::parse_datagram(b"READY=1\nWATCHDOG=0\nFDSTORE=1\n").unwrap();
    assert_eq!(
        parsed,
        [
            Ok(Notification::Ready),
            Err(Malformed::BadValue),
            Ok(Notification::Other("FDSTORE".into()))
        ]
    );
}

proptest! {
    #[test]
    fn parse_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..600)) {
        let _ = Notification::parse_datagram(&bytes);
    }

    #[test]
    fn status_stays_bounded(text in "\\PC{0,400}") {
        let line = format!("STATUS={text}");
        if let Ok(Notification::Status(s)) = Notification::parse_line(&line) {
            prop_assert!(s.len() <= MAX_STATUS);
        }
    }
}

// R10.2: a datagram of exactly the largest size is read; one byte more is
// refused whole as oversize.
#[test]
fn a_datagram_of_the_largest_size_is_read_and_one_byte_more_is_refused() {
    let max = stallwarden_sources::notify::MAX_DATAGRAM;
    let mut exact = b"STATUS=".to_vec();
    exact.resize(max - 1, b'x');
    exact.push(b'\n');
    assert_eq!(exact.len(), max);
    assert!(Notification::parse_datagram(&exact).is_ok());
    exact.push(b'\n');
    assert_eq!(
        Notification::parse_datagram(&exact),
        Err(Malformed::Oversize)
    );
}

// A wait for datagrams that never come says so when its time is up.
#[test]
fn waiting_for_datagrams_that_never_come_is_false() {
    let (guard, _) = guard();
    let task = guard.start("none", quiet(Profile::default())).unwrap();
    let socket = NotifySocket::bind_temp(task.recorder()).unwrap();
    assert!(!socket.wait_for_datagrams(1, Duration::from_millis(20)));
}

// A socket prepared but never attached takes its file with it when dropped.
#[test]
fn a_prepared_socket_dropped_unattached_removes_its_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("notify.sock");
    let pending = NotifySocket::prepare(&path).unwrap();
    assert!(path.exists());
    drop(pending);
    assert!(!path.exists());
}
