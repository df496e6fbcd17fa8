//! What the guard says: events (SPEC §3, shapes of §8.3) and the actions
//! it dispatches to sinks (notify is an event; cancel and kill are actions).
//!
//! The `Serialize` impl of [`Event`] is the JSON-lines shape of R8.3, so every
//! sink that writes JSON writes the same thing.

use std::fmt;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use serde::Serialize;

use crate::vocab::at_stall::StallNote;
use crate::vocab::clock::Nanos;
use crate::vocab::duration::{ms, opt_ms};
use crate::vocab::fingerprint::Repeating;

/// Identifies a task within one guard; never reused.
///
/// # Examples
///
/// ```
/// use watchdog_core::TaskId;
/// assert_eq!(TaskId::from_raw(7).to_string(), "#7");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(transparent)]
pub struct TaskId(u64);

impl TaskId {
    /// Builds an id from its number (for tests and sinks keyed by id).
    pub const fn from_raw(n: u64) -> Self {
        TaskId(n)
    }

    /// Returns the id's number.
    pub const fn as_raw(self) -> u64 {
        self.0
    }
}

impl fmt::Display for TaskId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "#{}", self.0)
    }
}

/// The silence budget a stall verdict names (R3.1).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Budget {
    /// No tool call in flight (R2.1).
    Idle,
    /// At least one tool call in flight (R2.2).
    Execution,
    /// No progress yet (R2.3).
    Startup,
}

impl Budget {
    /// Returns the name used in events and configs.
    pub const fn as_str(self) -> &'static str {
        match self {
            Budget::Idle => "idle",
            Budget::Execution => "execution",
            Budget::Startup => "startup",
        }
    }
}

impl fmt::Display for Budget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// How a task ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// The work succeeded.
    Completed,
    /// The work failed on its own.
    Failed,
    /// The guard (or the runner) cancelled it.
    Cancelled,
    /// Its handle was dropped without finishing (R3.9).
    Abandoned,
}

/// The state a process was in when sampled (R5.5).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ProcState {
    /// On a CPU or runnable.
    Running,
    /// Interruptible sleep.
    Sleeping,
    /// Uninterruptible sleep, usually waiting on I/O (`D`).
    DiskWait,
    /// Exited but not reaped.
    Zombie,
    /// Stopped by a signal or a tracer.
    Stopped,
    /// Anything else the OS reports.
    Other,
}

/// One descendant of a watched process, as last sampled (R5.5).
///
/// Only the executable name is kept, never argv: arguments carry credentials.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ChildInfo {
    /// Process id.
    pub pid: u32,
    /// Executable name (`comm`), never the command line.
    pub name: String,
    /// Scheduler state.
    pub state: ProcState,
    /// The kernel function it is blocked in, where the OS says (Linux `wchan`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub wchan: Option<String>,
    /// What it is blocked on, in words (R8.13): the terminal ("waiting for
    /// input"), a pipe and who holds its other end, a file, a TCP peer and
    /// the connection's state, a child, a lock; absent when unknown.
    /// Terminal-safe: control characters are escaped.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub blocked_on: Option<String>,
    /// Start time, Unix milliseconds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub started_unix_ms: Option<u64>,
    /// Cumulative CPU time (user + system).
    pub cpu_ms: u64,
    /// CPU used since the previous sample; absent on the first sample.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cpu_delta_ms: Option<u64>,
}

impl ChildInfo {
    /// Returns true for a child worth naming in a stall: blocked in
    /// uninterruptible I/O, or alive across two samples with no CPU used.
    ///
    /// # Examples
    ///
    /// ```
    /// use watchdog_core::{ChildInfo, ProcState};
    /// let grep = ChildInfo { pid: 7, name: "grep".into(), state: ProcState::DiskWait,
    ///     wchan: Some("io_schedule".into()), blocked_on: None, started_unix_ms: None, cpu_ms: 3,
    ///     cpu_delta_ms: None };
    /// assert!(grep.is_suspect());
    /// ```
    pub fn is_suspect(&self) -> bool {
        self.state == ProcState::DiskWait
            || (self.cpu_delta_ms == Some(0) && self.state != ProcState::Zombie)
    }

    /// Keeps the processes a stall names (R3.1, R8.13): the suspects, or,
    /// when none is one (a first sample, a busy process), every process
    /// still alive, so a stall never says "none" while the task lives.
    ///
    /// # Examples
    ///
    /// ```
    /// use watchdog_core::{ChildInfo, ProcState};
    /// let p = |pid, state, delta| ChildInfo { pid, name: "p".into(), state, wchan: None,
    ///     blocked_on: None, started_unix_ms: None, cpu_ms: 0, cpu_delta_ms: delta };
    /// let kept = ChildInfo::suspects(vec![p(1, ProcState::Sleeping, Some(0)), p(2, ProcState::Running, Some(9))]);
    /// assert_eq!(kept.iter().map(|c| c.pid).collect::<Vec<_>>(), [1]);
    /// let kept = ChildInfo::suspects(vec![p(2, ProcState::Running, Some(9)), p(3, ProcState::Zombie, None)]);
    /// assert_eq!(kept.iter().map(|c| c.pid).collect::<Vec<_>>(), [2]);
    /// ```
    pub fn suspects(children: Vec<ChildInfo>) -> Vec<ChildInfo> {
        if children.iter().any(ChildInfo::is_suspect) {
            children.into_iter().filter(ChildInfo::is_suspect).collect()
        } else {
            children
                .into_iter()
                .filter(|c| c.state != ProcState::Zombie)
                .collect()
        }
    }
}

/// A process named by a `leaked` or `leftover` event (R8.5, R8.6): its pid
/// and executable name, never its command line.
///
/// # Examples
///
/// ```
/// use watchdog_core::ProcessName;
/// let p = ProcessName { pid: 42, name: "tee".into() };
/// assert_eq!(p.to_string(), "tee (pid 42)");
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize)]
pub struct ProcessName {
    /// Process id.
    pub pid: u32,
    /// Executable name (`comm`).
    pub name: String,
}

impl fmt::Display for ProcessName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} (pid {})", self.name, self.pid)
    }
}

/// What became of the processes left over after a command ended (R8.6).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum LeftoverAction {
    /// They were sent SIGTERM, then SIGKILL after the grace period.
    Killed,
    /// They were left running (`on-leftover = "keep"`).
    Kept,
}

/// Something the guard observed or decided about a task.
///
/// # Examples
///
/// ```
/// use watchdog_core::{Budget, EventKind};
/// let kind = EventKind::Recovered { silent: std::time::Duration::from_secs(3) };
/// assert_eq!(kind.type_name(), "recovered");
/// ```
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
#[non_exhaustive]
pub enum EventKind {
    /// The task was registered.
    Started {
        /// The watched process, if any.
        #[serde(skip_serializing_if = "Option::is_none")]
        pid: Option<u32>,
    },
    /// Still active `long-running-after` past its start (R3.6).
    LongRunning,
    /// Outbound liveness for headless consumers (R3.7).
    Heartbeat {
        /// Age of the last output; absent before any output.
        #[serde(
            rename = "last_output_age_ms",
            with = "opt_ms",
            skip_serializing_if = "Option::is_none"
        )]
        last_output_age: Option<Duration>,
        /// Lines of output so far.
        total_lines: u64,
        /// Bytes of output so far.
        total_bytes: u64,
        /// Time left on the current silence budget; absent when off.
        #[serde(
            rename = "idle_remaining_ms",
            with = "opt_ms",
            skip_serializing_if = "Option::is_none"
        )]
        idle_remaining: Option<Duration>,
        /// The deadline, if any, measured from the start.
        #[serde(
            rename = "deadline_ms",
            with = "opt_ms",
            skip_serializing_if = "Option::is_none"
        )]
        deadline: Option<Duration>,
    },
    /// A silence budget ran out (R3.1).
    Stalled {
        /// Which budget.
        budget: Budget,
        /// 1 for the first stall since the last progress.
        strike: u32,
        /// The strike that cancels; 0 for never.
        terminate_after: u32,
        /// Silence at the verdict.
        #[serde(rename = "silent_ms", with = "ms")]
        silent: Duration,
        /// The task's last step, e.g. `tool "bash" still running`.
        #[serde(skip_serializing_if = "Option::is_none")]
        last_step: Option<String>,
        /// Suspect children; absent when unknown.
        #[serde(skip_serializing_if = "Option::is_none")]
        children: Option<Vec<ChildInfo>>,
        /// Each suspect's stack, taken at the verdict before the stop
        /// (R8.14, [`crate::AtStall`]); absent when none was taken.
        #[serde(skip_serializing_if = "Vec::is_empty")]
        stacks: Vec<StallNote>,
        /// The user's `on-stall` command's run at the verdict (R8.14);
        /// absent when none is configured.
        #[serde(skip_serializing_if = "Option::is_none")]
        on_stall: Option<Box<StallNote>>,
        /// What only repeated itself during the silence (R5.12); absent
        /// when nothing did.
        #[serde(skip_serializing_if = "Option::is_none")]
        repeating: Option<Repeating>,
    },
    /// Progress arrived after a stall; strikes reset (R3.3).
    Recovered {
        /// How long the task had been silent.
        #[serde(rename = "silent_ms", with = "ms")]
        silent: Duration,
    },
    /// The deadline passed (R2.4, R3.4).
    DeadlineExceeded {
        /// Why, for people.
        reason: String,
    },
    /// No heartbeat within the liveness budget (R2.5, R3.4).
    LivenessLost {
        /// Why, for people.
        reason: String,
    },
    /// The task reported its own fault (R2.10).
    Triggered {
        /// The task's reason.
        reason: String,
    },
    /// A cancel action was dispatched (R3.5).
    Cancelling {
        /// Why.
        reason: String,
        /// The signal a process sink sends.
        signal: &'static str,
    },
    /// The grace period ran out; a kill action was dispatched (R3.5).
    Killed {
        /// The signal a process sink sends.
        signal: &'static str,
    },
    /// An extension past `max-deadline` was refused (R2.9, R8.7).
    ExtensionRefused {
        /// The deadline the extension asked for, measured from the start.
        #[serde(rename = "requested_ms", with = "ms")]
        requested: Duration,
        /// The most that is allowed (`max-deadline`).
        #[serde(rename = "allowed_ms", with = "ms")]
        allowed: Duration,
    },
    /// The command exited but these processes still held its stdout or
    /// stderr after `leak-timeout` (R8.5).
    Leaked {
        /// The holders.
        processes: Vec<ProcessName>,
    },
    /// The command exited and these processes of its tree were still
    /// running (R8.6).
    Leftover {
        /// Whether they were stopped or kept.
        action: LeftoverAction,
        /// The processes.
        processes: Vec<ProcessName>,
    },
    /// The runner started the work again after a stall stopped it
    /// (R8.15): the first event after `started` of the new run.
    Restarted {
        /// 1 for the first restart.
        restart: u32,
        /// The backoff waited before this start.
        #[serde(rename = "delay_ms", with = "ms")]
        delay: Duration,
        /// The stall line that stopped the previous run.
        #[serde(skip_serializing_if = "Option::is_none")]
        last_stall: Option<String>,
    },
    /// The task settled; always its last event (R3.8).
    Finished {
        /// How it ended.
        outcome: Outcome,
        /// Exit code, absent if killed by a signal or not a process.
        #[serde(skip_serializing_if = "Option::is_none")]
        exit_code: Option<i32>,
        /// Terminating signal number, absent otherwise.
        #[serde(skip_serializing_if = "Option::is_none")]
        signal: Option<i32>,
    },
}

impl EventKind {
    /// Returns the event's `type` as written in JSON lines.
    pub fn type_name(&self) -> &'static str {
        match self {
            EventKind::Started { .. } => "started",
            EventKind::LongRunning => "long_running",
            EventKind::Heartbeat { .. } => "heartbeat",
            EventKind::Stalled { .. } => "stalled",
            EventKind::Recovered { .. } => "recovered",
            EventKind::DeadlineExceeded { .. } => "deadline_exceeded",
            EventKind::LivenessLost { .. } => "liveness_lost",
            EventKind::Triggered { .. } => "triggered",
            EventKind::Cancelling { .. } => "cancelling",
            EventKind::Killed { .. } => "killed",
            EventKind::ExtensionRefused { .. } => "extension_refused",
            EventKind::Leaked { .. } => "leaked",
            EventKind::Leftover { .. } => "leftover",
            EventKind::Restarted { .. } => "restarted",
            EventKind::Finished { .. } => "finished",
        }
    }

    /// Returns true for the events a sink must never miss (R6.2).
    pub fn is_critical(&self) -> bool {
        matches!(
            self,
            EventKind::Stalled { .. }
                | EventKind::Cancelling { .. }
                | EventKind::Killed { .. }
                | EventKind::Finished { .. }
        )
    }
}

/// One event of one task, stamped with monotonic and wall time.
///
/// Serializes to one R8.3 JSON line: `type`, `task`, `at` (RFC 3339,
/// milliseconds), `elapsed_ms`, then the kind's fields.
///
/// # Examples
///
/// ```
/// use watchdog_core::{ManualClock, Guard, Profile, RecordingSink, EventKind};
///
/// let rec = RecordingSink::new();
/// let guard = Guard::builder().clock(ManualClock::new()).sink(rec.clone()).build();
/// let task = guard.start("build", Profile::default()).unwrap();
/// let started = &rec.events()[0];
/// let json = serde_json::to_value(started).unwrap();
/// assert_eq!(json["type"], "started");
/// assert_eq!(json["task"], "build");
/// assert_eq!(json["elapsed_ms"], 0);
/// drop(task);
/// ```
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Event {
    /// The task's name.
    #[serde(rename = "task")]
    pub name: Arc<str>,
    /// The task's id.
    #[serde(skip)]
    pub task: TaskId,
    /// Wall time of the event (label only, R2.7).
    #[serde(rename = "at", serialize_with = "rfc3339")]
    pub wall: SystemTime,
    /// Monotonic instant of the event.
    #[serde(skip)]
    pub at: Nanos,
    /// Time since the task started.
    #[serde(rename = "elapsed_ms", with = "ms")]
    pub elapsed: Duration,
    /// What happened.
    #[serde(flatten)]
    pub kind: EventKind,
}

/// What an action asks a sink to do.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ActionKind {
    /// Ask the work to stop (SIGTERM, a cancellation token).
    Cancel {
        /// Why.
        reason: String,
    },
    /// Stop it now (SIGKILL) after the grace period.
    Kill,
}

/// A cancel or kill for one task, dispatched to every sink (R3.5).
///
/// # Examples
///
/// ```
/// use watchdog_core::{Action, ActionKind, TaskId};
/// let a = Action { task: TaskId::from_raw(1), name: "build".into(), pid: Some(42), kind: ActionKind::Kill };
/// assert!(matches!(a.kind, ActionKind::Kill));
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Action {
    /// The task's id.
    pub task: TaskId,
    /// The task's name.
    pub name: Arc<str>,
    /// The process (group leader) attached to the task, if any.
    pub pid: Option<u32>,
    /// Cancel or kill.
    pub kind: ActionKind,
}

fn rfc3339<S: serde::Serializer>(t: &SystemTime, s: S) -> Result<S::Ok, S::Error> {
    s.collect_str(&humantime::format_rfc3339_millis(*t))
}
