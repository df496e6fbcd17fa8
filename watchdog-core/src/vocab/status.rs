//! Status snapshots (SPEC §4): what a task is doing, as plain serializable
//! values. Taking one reads atomics and the scheduler's state; it never
//! reads a process table (children come from the last background sample).
//! Unknown is absent, never zero and never 1970 (R4.1).

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime};

use serde::Serialize;

use crate::vocab::event::{ChildInfo, TaskId};
use crate::vocab::signal::SignalKind;

/// A moment something was observed: its wall time and its age.
///
/// # Examples
///
/// ```
/// use std::time::{Duration, SystemTime};
/// use watchdog_core::Stamp;
/// let s = Stamp { at: SystemTime::UNIX_EPOCH, age: Duration::from_millis(1500) };
/// let json = serde_json::to_value(s).unwrap();
/// assert_eq!(json["age_ms"], 1500);
/// assert_eq!(json["at"], "1970-01-01T00:00:00.000Z");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Stamp {
    /// Wall time (RFC 3339 with milliseconds in JSON); a label only.
    #[serde(serialize_with = "rfc3339")]
    pub at: SystemTime,
    /// Monotonic age at the moment the snapshot was taken.
    #[serde(rename = "age_ms", with = "crate::vocab::duration::ms")]
    pub age: Duration,
}

/// How a tool call ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum CallOutcome {
    /// The tool returned a result.
    Success,
    /// The tool returned an error.
    Error,
    /// The call was cancelled before it returned.
    Cancelled,
}

/// The latest observed tool call of a task (R4.1).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct LastCall {
    /// The call id the runner gave.
    pub id: String,
    /// The tool's name.
    pub name: String,
    /// When it started.
    pub started: Stamp,
    /// When it finished; absent while in flight.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub finished: Option<Stamp>,
    /// How it finished; absent while in flight.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub outcome: Option<CallOutcome>,
}

/// The state of a task (R4.3).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum TaskState {
    /// Running within its budgets.
    Working,
    /// Its own work is quiet but background tasks it launched still run:
    /// busy, not done.
    Monitoring,
    /// A silence budget ran out and no progress has come since.
    Stalled,
    /// A cancel was dispatched; waiting for the work to end.
    Cancelling,
    /// Settled.
    Finished,
}

/// What a task is doing right now.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "phase", rename_all = "snake_case")]
pub enum Phase {
    /// No tool call in flight: the idle (or startup) budget applies.
    Idle,
    /// Tool calls in flight: the execution budget applies.
    Executing {
        /// How many.
        tools: usize,
    },
}

/// One budget and what is left of it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct BudgetStatus {
    /// `idle`, `execution`, `startup`, `deadline` or `liveness`.
    pub budget: &'static str,
    /// The configured limit.
    #[serde(rename = "limit_ms", with = "crate::vocab::duration::ms")]
    pub limit: Duration,
    /// Time left; zero once spent.
    #[serde(rename = "remaining_ms", with = "crate::vocab::duration::ms")]
    pub remaining: Duration,
    /// True for the silence budget that currently applies.
    pub active: bool,
}

/// The kind of a background task (R5.6).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum BackgroundKind {
    /// A shell command.
    Command,
    /// A monitor.
    Monitor,
    /// A workflow.
    Workflow,
    /// Not said.
    Unknown,
}

/// A background task an owner task launched and that still runs (R5.6).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct BackgroundTask {
    /// The background task's own id (at most 256 chars).
    pub id: String,
    /// The id of the tool call that launched it, when known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub launch_id: Option<String>,
    /// Its kind.
    pub kind: BackgroundKind,
}

/// A serializable snapshot of one task (R4.2).
///
/// # Examples
///
/// ```
/// use watchdog_core::{Guard, ManualClock, Profile, TaskState};
///
/// let guard = Guard::builder().clock(ManualClock::new()).build();
/// let task = guard.start("probe", Profile::default()).unwrap();
/// let status = task.status().unwrap();
/// assert_eq!(status.state, TaskState::Working);
/// assert!(status.last_call.is_none()); // unknown is absent (R4.1)
/// ```
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct TaskStatus {
    /// The task's name.
    pub name: String,
    /// The task's id.
    pub id: TaskId,
    /// Its state.
    pub state: TaskState,
    /// Whether its budgets are paused (R2.8).
    pub paused: bool,
    /// When it started.
    #[serde(serialize_with = "rfc3339")]
    pub started_at: SystemTime,
    /// Time since it started.
    #[serde(rename = "elapsed_ms", with = "crate::vocab::duration::ms")]
    pub elapsed: Duration,
    /// Idle or executing N tools.
    #[serde(flatten)]
    pub phase: Phase,
    /// The last step, e.g. `tool "bash" still running`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_step: Option<String>,
    /// The latest tool call.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_call: Option<LastCall>,
    /// Last signal of each kind seen; kinds never seen are absent.
    pub last_signal: BTreeMap<&'static str, Stamp>,
    /// Age of the last output; absent before any output.
    #[serde(
        rename = "last_output_age_ms",
        with = "crate::vocab::duration::opt_ms",
        skip_serializing_if = "Option::is_none"
    )]
    pub last_output_age: Option<Duration>,
    /// Bytes of output so far.
    pub total_bytes: u64,
    /// Lines of output so far.
    pub total_lines: u64,
    /// Strikes since the last progress.
    pub strikes: u32,
    /// Stalls over the task's life.
    pub stall_count: u32,
    /// How many times the runner restarted the work after a stall
    /// (R8.15); absent when it never did.
    #[serde(skip_serializing_if = "is_zero")]
    pub restarts: u32,
    /// The stall line that led to the latest restart (R8.15); absent when
    /// there was none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_stall: Option<String>,
    /// The stacks and `on-stall` run taken at the latest stall (R8.14);
    /// absent when no at-stall step ran.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stall_report: Option<crate::vocab::at_stall::StallReport>,
    /// Each configured budget with the time left.
    pub budgets: Vec<BudgetStatus>,
    /// Descendants of the attached process at the last sample; absent when
    /// unknown or no longer running.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub children: Option<Vec<ChildInfo>>,
    /// Background tasks still running (R5.6).
    pub background: Vec<BackgroundTask>,
    /// A background task past the cap is running unnamed (R5.6).
    pub unnamed_background: bool,
    /// How many inputs the task's sources refused, by key `source.reason`
    /// (for example `args.empty_delta`, `tools.unknown_call`; R10.6);
    /// absent when none was.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub refused: BTreeMap<&'static str, u64>,
    /// What only repeated itself since the last renewal (R5.12); absent
    /// when nothing did.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub repeating: Option<crate::vocab::fingerprint::Repeating>,
}

impl TaskStatus {
    /// Returns the last signal of `kind`, if any was seen.
    pub fn last_of(&self, kind: SignalKind) -> Option<Stamp> {
        self.last_signal.get(kind.as_str()).copied()
    }
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

fn rfc3339<S: serde::Serializer>(t: &SystemTime, s: S) -> Result<S::Ok, S::Error> {
    s.collect_str(&humantime::format_rfc3339_millis(*t))
}
