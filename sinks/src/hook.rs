//! The user's own command at a stall (R8.14): `on-stall = "CMD"` runs
//! through `/bin/sh -c` at the verdict, before the stop, with the task's
//! pid, process group, suspects and stall line in its environment, bounded
//! in time and output; its run goes into the `stalled` event.
//!
//! [`OnStall`] is an [`AtStall`] step: a guard calls it before the
//! `stalled` event reaches any sink, so it is done before the process
//! sink's SIGTERM of the same verdict. [`run_bounded`] is the bounded
//! runner it uses, shared with the stack takers of the `stallwarden` CLI.

use std::fmt;
use std::io::Read;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::process::{Command, ExitStatus, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use nix::sys::signal::{killpg, Signal};
use nix::unistd::Pid;
use parking_lot::Mutex;
use watchdog_core::sys::Pidfd;
use watchdog_core::{AtStall, Event, EventKind, StallNote, StallReport};

/// How long an `on-stall` command may run by default before its process
/// group is killed.
pub const DEFAULT_HOOK_TIMEOUT: Duration = Duration::from_secs(5);

/// The most output kept from one bounded run (64 KiB); the rest is read
/// and dropped, and the run is marked truncated.
pub const MAX_OUTPUT: usize = 64 * 1024;

/// How long a killed run is waited for before it is left to the host's
/// reaper.
const REAP_AFTER_KILL: Duration = Duration::from_secs(1);

/// How long the output is still read after the run ended, for a process
/// that escaped its group and holds the pipe open.
const DRAIN_AFTER_EXIT: Duration = Duration::from_millis(200);

/// How a [`run_bounded`] run ended.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Ended {
    /// It exited with this code.
    Exited(i32),
    /// It died of this signal.
    Signalled(i32),
    /// It outlived its bound: its process group was killed.
    TimedOut(Duration),
    /// It could not be started (not found, not executable).
    NotStarted(String),
    /// It ended, but its status was collected by another waiter.
    Unknown,
}

impl fmt::Display for Ended {
    /// The end in a few plain words: `exit 0`, `killed by signal 9`,
    /// `timed out after 5s (killed)`, `could not start: ...`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Ended::Exited(code) => write!(f, "exit {code}"),
            Ended::Signalled(sig) => write!(f, "killed by signal {sig}"),
            Ended::TimedOut(after) => write!(
                f,
                "timed out after {} (killed)",
                humantime::format_duration(*after)
            ),
            Ended::NotStarted(why) => write!(f, "could not start: {why}"),
            Ended::Unknown => f.write_str("ended (status unknown)"),
        }
    }
}

/// What a [`run_bounded`] run gave: how it ended, its output (stdout and
/// stderr as one stream, in the order written), and whether that was cut.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Bounded {
    /// How it ended.
    pub ended: Ended,
    /// Its output, at most the cap, lossily UTF-8.
    pub output: String,
    /// True when more than the cap was written.
    pub truncated: bool,
    /// How long it ran.
    pub took: Duration,
}

/// Runs `command` in a process group of its own, with stdin from
/// `/dev/null` and stdout and stderr into one pipe, for at most `timeout`:
/// at the bound its whole group is sent SIGKILL. Keeps at most `cap` bytes
/// of output. Never waits past `timeout` plus a second (for a killed
/// process the kernel is slow to let go of) and a 200 ms drain of the
/// pipe, even when a process that left the group holds the pipe open.
///
/// # Examples
///
/// ```
/// use std::process::Command;
/// use std::time::Duration;
/// use stallwarden_sinks::hook::{run_bounded, Ended};
///
/// let mut cmd = Command::new("/bin/sh");
/// cmd.args(["-c", "echo hello; exit 3"]);
/// let run = run_bounded(cmd, Duration::from_secs(30), 1024);
/// assert_eq!(run.ended, Ended::Exited(3));
/// assert_eq!(run.output, "hello\n");
///
/// let mut cmd = Command::new("/bin/sh");
/// cmd.args(["-c", "echo start; exec sleep 60"]);
/// let run = run_bounded(cmd, Duration::from_millis(300), 1024);
/// assert!(matches!(run.ended, Ended::TimedOut(_)));
/// assert_eq!(run.output, "start\n");
/// ```
pub fn run_bounded(mut command: Command, timeout: Duration, cap: usize) -> Bounded {
    let from = Instant::now();
    let not_started = |why: String| Bounded {
        ended: Ended::NotStarted(why),
        output: String::new(),
        truncated: false,
        took: from.elapsed(),
    };
    let (read, write) = match nix::unistd::pipe() {
        Ok(p) => p,
        Err(e) => return not_started(format!("no pipe: {e}")),
    };
    let write2 = match write.try_clone() {
        Ok(w) => w,
        Err(e) => return not_started(format!("no pipe: {e}")),
    };
    command
        .stdin(Stdio::null())
        .stdout(Stdio::from(write))
        .stderr(Stdio::from(write2))
        .process_group(0);
    let spawned = command.spawn();
    // Our copies of the write end must close, or the reader never ends.
    drop(command);
    let mut child = match spawned {
        Ok(c) => c,
        Err(e) => return not_started(e.to_string()),
    };
    let _helper = Helper::register(child.id());
    let kept = Arc::new(Mutex::new((Vec::new(), false)));
    let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
    let reader = {
        let kept = Arc::clone(&kept);
        let mut file = std::fs::File::from(read);
        std::thread::Builder::new()
            .name("stallwarden-hook-out".into())
            .spawn(move || {
                let mut buf = [0u8; 8192];
                loop {
                    match file.read(&mut buf) {
                        Ok(0) => break,
                        Ok(n) => {
                            let mut k = kept.lock();
                            let room = cap.saturating_sub(k.0.len());
                            k.0.extend_from_slice(&buf[..n.min(room)]);
                            if n > room {
                                k.1 = true;
                            }
                        }
                        Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                        Err(_) => break,
                    }
                }
                let _ = done_tx.send(());
            })
    };
    if reader.is_err() {
        // No reader: the output is lost, but the bound still holds.
        tracing::warn!("no thread to read a bounded command's output");
    }
    let pgid = Pid::from_raw(i32::try_from(child.id()).unwrap_or(i32::MAX));
    // The child is ours and not reaped, so its pid names it: a pidfd wakes
    // the wait the moment it ends (Linux 5.3+). Without one, a fine poll.
    let pidfd = Pidfd::open(child.id()).ok();
    let pause = |left: Duration| match pidfd.as_ref().map(|p| p.wait(left)) {
        Some(Ok(_)) => {}
        _ => std::thread::sleep(left.min(Duration::from_millis(5))),
    };
    let deadline = from + timeout;
    let ended = loop {
        match child.try_wait() {
            Ok(Some(status)) => break ended_of(status),
            Ok(None) => {}
            // A reaper of the host's reaped it (it should not: see
            // `is_helper`); the run is over all the same.
            Err(_) => break Ended::Unknown,
        }
        let now = Instant::now();
        if now >= deadline {
            let _ = killpg(pgid, Signal::SIGKILL);
            // A process the kernel holds (uninterruptible I/O) may die
            // late: collect it if it goes soon, never wait for it long.
            let killed = Instant::now();
            while matches!(child.try_wait(), Ok(None)) && killed.elapsed() < REAP_AFTER_KILL {
                pause(REAP_AFTER_KILL.saturating_sub(killed.elapsed()));
            }
            break Ended::TimedOut(timeout);
        }
        // A real process is waited for: woken by its end, never past the
        // bound.
        pause(deadline - now);
    };
    // Whatever is left of its group goes with it: a hook must not outlive
    // its bound through a background child.
    let _ = killpg(pgid, Signal::SIGKILL);
    let _ = done_rx.recv_timeout(DRAIN_AFTER_EXIT);
    let (bytes, truncated) = std::mem::take(&mut *kept.lock());
    Bounded {
        ended,
        output: String::from_utf8_lossy(&bytes).into_owned(),
        truncated,
        took: from.elapsed(),
    }
}

/// The pids of the commands [`run_bounded`] is running now.
static HELPERS: Mutex<Vec<u32>> = Mutex::new(Vec::new());

/// Whether `pid` is a command [`run_bounded`] runs now (a hook, a stack
/// taker): a host that reaps its orphans or stops what is left of a
/// command's tree (the `stallwarden` CLI, a child subreaper) leaves it be;
/// `run_bounded` collects its status and kills its group at the bound.
///
/// # Examples
///
/// ```
/// assert!(!stallwarden_sinks::hook::is_helper(std::process::id()));
/// ```
pub fn is_helper(pid: u32) -> bool {
    HELPERS.lock().contains(&pid)
}

/// Keeps a pid in [`HELPERS`] while its run lasts.
struct Helper(u32);

impl Helper {
    fn register(pid: u32) -> Helper {
        HELPERS.lock().push(pid);
        Helper(pid)
    }
}

impl Drop for Helper {
    fn drop(&mut self) {
        HELPERS.lock().retain(|p| *p != self.0);
    }
}

fn ended_of(status: ExitStatus) -> Ended {
    match (status.code(), status.signal()) {
        (Some(code), _) => Ended::Exited(code),
        (None, Some(sig)) => Ended::Signalled(sig),
        (None, None) => Ended::Exited(-1),
    }
}

/// Renders the stall line a hook gets in `STALLWARDEN_STALL`.
pub type StallLine = Arc<dyn Fn(&Event) -> Option<String> + Send + Sync>;

/// The user's `on-stall` command (R8.14): run through `/bin/sh -c` at each
/// stall, before the `stalled` event reaches any sink and so before the
/// stop, bounded in time (its process group is killed at the bound) and
/// output ([`MAX_OUTPUT`]). Its output and how it ended go into the
/// event's `on_stall`.
///
/// Its environment: `STALLWARDEN_TASK` (the task's name),
/// `STALLWARDEN_PID` (the watched process), `STALLWARDEN_PGID` (its
/// process group), `STALLWARDEN_SUSPECTS` (the suspects' pids, most
/// likely first, separated by spaces) and `STALLWARDEN_STALL` (the stall
/// line). A task with no process gets no `PID`, `PGID` or `SUSPECTS`.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use stallwarden_sinks::hook::OnStall;
/// use watchdog_core::{EventKind, Guard, ManualClock, Profile, RecordingSink};
///
/// let rec = RecordingSink::new();
/// let guard = Guard::builder()
///     .clock(ManualClock::new())
///     .at_stall(OnStall::new("echo \"$STALLWARDEN_TASK: $STALLWARDEN_STALL\"").timeout(Duration::from_secs(30)))
///     .sink(rec.clone())
///     .build();
/// let _task = guard.start("job", Profile::default().idle(Duration::from_secs(2))).unwrap();
/// guard.advance(Duration::from_secs(2));
/// let stalled = rec.events().into_iter().find(|e| e.kind.type_name() == "stalled").unwrap();
/// let EventKind::Stalled { on_stall: Some(run), .. } = &stalled.kind else { unreachable!() };
/// assert_eq!(run.status, "exit 0");
/// assert_eq!(run.output, "job: task job stalled: startup budget exceeded, silent for 2s (strike 1 of 1)\n");
/// ```
#[derive(Clone)]
pub struct OnStall {
    command: String,
    timeout: Duration,
    cap: usize,
    line: Option<StallLine>,
}

impl fmt::Debug for OnStall {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OnStall")
            .field("command", &self.command)
            .field("timeout", &self.timeout)
            .field("cap", &self.cap)
            .finish_non_exhaustive()
    }
}

impl OnStall {
    /// Runs `command` (a shell command line) at each stall, for at most
    /// [`DEFAULT_HOOK_TIMEOUT`].
    pub fn new(command: impl Into<String>) -> Self {
        OnStall {
            command: command.into(),
            timeout: DEFAULT_HOOK_TIMEOUT,
            cap: MAX_OUTPUT,
            line: None,
        }
    }

    /// Sets how long the command may run before its group is killed.
    #[must_use]
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// Sets the most output kept (at most [`MAX_OUTPUT`]).
    #[must_use]
    pub fn max_output(mut self, cap: usize) -> Self {
        self.cap = cap.min(MAX_OUTPUT);
        self
    }

    /// Renders `STALLWARDEN_STALL` with `line` (the CLI passes its own stall
    /// line) instead of the plain default.
    #[must_use]
    pub fn stall_line(mut self, line: StallLine) -> Self {
        self.line = Some(line);
        self
    }

    /// Runs the command for the stall `event` of the process `pid`.
    pub fn run(&self, event: &Event, pid: Option<u32>) -> StallNote {
        let mut command = Command::new("/bin/sh");
        command.arg("-c").arg(&self.command);
        command.env("STALLWARDEN_TASK", &*event.name);
        let line = self
            .line
            .as_ref()
            .and_then(|l| l(event))
            .unwrap_or_else(|| plain_line(event));
        command.env("STALLWARDEN_STALL", line);
        if let Some(pid) = pid {
            let pgid = nix::unistd::getpgid(Some(Pid::from_raw(pid as i32)))
                .map_or(pid, |g| g.as_raw() as u32);
            command.env("STALLWARDEN_PID", pid.to_string());
            command.env("STALLWARDEN_PGID", pgid.to_string());
            command.env("STALLWARDEN_SUSPECTS", suspects(event, pid));
        }
        let run = run_bounded(command, self.timeout, self.cap);
        StallNote::new("on-stall", None, run.ended.to_string())
            .output(run.output)
            .truncated(run.truncated)
    }
}

impl AtStall for OnStall {
    fn at_stall(&self, event: &Event, pid: Option<u32>) -> StallReport {
        StallReport {
            stacks: Vec::new(),
            on_stall: Some(Box::new(self.run(event, pid))),
        }
    }
}

/// The suspects' pids, most likely first; the watched process when the
/// stall names none.
fn suspects(event: &Event, pid: u32) -> String {
    let named = match &event.kind {
        EventKind::Stalled {
            children: Some(c), ..
        } if !c.is_empty() => c.iter().map(|c| c.pid.to_string()).collect(),
        _ => vec![pid.to_string()],
    };
    named.join(" ")
}

/// The stall in plain words, for a guard with no stall line of its own.
fn plain_line(event: &Event) -> String {
    match &event.kind {
        EventKind::Stalled {
            budget,
            strike,
            terminate_after,
            silent,
            ..
        } => format!(
            "task {} stalled: {budget} budget exceeded, silent for {} (strike {strike} of {terminate_after})",
            event.name,
            humantime::format_duration(*silent)
        ),
        other => format!("task {}: {}", event.name, other.type_name()),
    }
}
