//! The side-agent monitor for long-running commands (R6.6).
//!
//! When a task is still running at its `long_running` event (the core emits
//! it once, at the profile's `long-running-after`; the monitor wants 3 s, see
//! [`monitored`]), [`MonitorSink`] opens one monitor for it: a
//! [`MonitorAgent`] the runner plugs in (a model, or the rule-based
//! [`RuleMonitor`] that needs none). The agent gets a structured
//! [`MonitorBrief`], then throttled [`MonitorUpdate`]s, then a
//! [`MonitorFinal`]; what it says comes back as [`Observation`]s with
//! provenance, for the runner to hand to the main agent.
//!
//! Layout: this file holds the messages and the agent trait; `state.rs` the
//! pure per-task state machine ([`MonitorState`], testable in virtual time);
//! `sink.rs` the sink that runs it (`builder.rs` builds it, `runner.rs`
//! calls agents and keeps what they say, `poller.rs` drives updates between
//! events); `redact.rs` the secret
//! redaction every byte of output passes before an agent sees it; `rules.rs`
//! the model-free agent. Nothing here ever stops or changes the task.
//!
//! # Examples
//!
//! ```
//! use std::sync::Arc;
//! use std::time::Duration;
//! use parking_lot::Mutex;
//! use stallwarden_sinks::monitor::{monitored, MonitorSink, MonitorTarget};
//! use watchdog_core::{Delivery, Guard, ManualClock, Outcome, Profile};
//!
//! let clock = ManualClock::new();
//! let monitor = MonitorSink::rule_based().with_delivery(Delivery::Inline).clock(clock.clone()).build().unwrap();
//! let guard = Guard::builder().clock(clock).sink(monitor.clone()).build();
//!
//! let output = Arc::new(Mutex::new(Vec::new()));
//! let task = guard.start("migrate", monitored(Profile::default())).unwrap();
//! let tail = Arc::clone(&output);
//! monitor.watch(task.id(), MonitorTarget::new("./migrate.sh", move || tail.lock().clone()));
//!
//! output.lock().extend_from_slice(b"applying 0042_add_index\n");
//! guard.advance(Duration::from_secs(3)); // long_running: the monitor opens
//! task.finish(Outcome::Completed, Some(0), None).unwrap();
//!
//! let seen = monitor.observations(task.id());
//! assert!(seen.last().unwrap().to_string().contains("exited with code 0"));
//! ```

use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use watchdog_core::{Outcome, Profile, TaskId, TaskState};

mod builder;
mod poller;
mod redact;
mod rules;
mod runner;
mod sink;
mod state;

pub use builder::{MonitorConfigError, MonitorSinkBuilder};
pub use redact::{clean_output, redact};
pub use rules::RuleMonitor;
pub use sink::{MonitorSink, MonitorTarget};
pub use state::{MonitorSettings, MonitorState};

/// The `long-running-after` the monitor is designed for (R6.6): 3 s.
pub const LONG_RUNNING_AFTER: Duration = Duration::from_secs(3);

/// Returns `profile` with `long-running-after` set to 3 s, so the core emits
/// the `long_running` event that opens a monitor (R3.6, R6.6).
///
/// The core's default is off: a runner that wants monitors must use this (or
/// set `long_running_after` itself) on the tasks it registers.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use stallwarden_sinks::monitor::monitored;
/// use watchdog_core::Profile;
///
/// let p = monitored(Profile::default());
/// assert_eq!(p.long_running_after, Some(Duration::from_secs(3)));
/// ```
pub fn monitored(profile: Profile) -> Profile {
    profile.long_running_after(LONG_RUNNING_AFTER)
}

/// What the monitor is told to do, sent with every brief.
pub const INSTRUCTIONS: &str = "Monitor the running command below. Report normal progress, \
observable success signals and observable failure signals. Flag suspicious stalls or \
intervals with no progress, repeated retries, blocked input, lock waits, and dangerous \
behaviour or unexpected writes. Do not assume the command succeeded because output \
stopped: only an exit code says how it ended, and it is unavailable while the command \
runs. Report observations and your uncertainty; do not interrupt or modify the process.";

/// A source of a task's recent output, registered by the runner.
///
/// Any `Fn() -> Vec<u8> + Send + Sync` is one; the output reader of
/// `stallwarden-sources` provides a bounded tail. Implement
/// [`OutputTail::total_bytes`] when the count of bytes ever written is known:
/// it makes "what is new since the last update" exact even when the same
/// line repeats; without it the monitor compares snapshots.
///
/// # Examples
///
/// ```
/// use stallwarden_sinks::monitor::OutputTail;
/// let tail = || b"line 1\n".to_vec();
/// assert_eq!(tail.snapshot(), b"line 1\n");
/// assert_eq!(tail.total_bytes(), None);
/// ```
pub trait OutputTail: Send + Sync {
    /// Returns the current tail of the output (the most recent bytes).
    fn snapshot(&self) -> Vec<u8>;

    /// Returns how many bytes were ever written, if known.
    fn total_bytes(&self) -> Option<u64> {
        None
    }
}

impl<F: Fn() -> Vec<u8> + Send + Sync> OutputTail for F {
    fn snapshot(&self) -> Vec<u8> {
        self()
    }
}

/// A shared tail is a tail: the runner keeps one handle to write into it
/// and registers another.
impl<T: OutputTail + ?Sized> OutputTail for Arc<T> {
    fn snapshot(&self) -> Vec<u8> {
        (**self).snapshot()
    }
    fn total_bytes(&self) -> Option<u64> {
        (**self).total_bytes()
    }
}

/// The structured first message a monitor gets (R6.6).
///
/// `output_tail` is redacted. The exit status is unavailable by construction:
/// the command is still running.
#[derive(Clone, Debug, PartialEq)]
pub struct MonitorBrief {
    /// The watched task.
    pub task: TaskId,
    /// The task's name.
    pub name: Arc<str>,
    /// The command, as the runner registered it, redacted.
    pub command: String,
    /// The working directory, when the runner knows it.
    pub cwd: Option<PathBuf>,
    /// When the task started (wall time, a label only).
    pub started: SystemTime,
    /// How long it has run.
    pub elapsed: Duration,
    /// The most recent output, cleaned and redacted.
    pub output_tail: String,
    /// What to report and what not to claim ([`INSTRUCTIONS`]).
    pub instructions: &'static str,
}

impl MonitorBrief {
    /// Renders the brief as one prompt for a model.
    pub fn to_prompt(&self) -> String {
        let cwd = self
            .cwd
            .as_ref()
            .map_or_else(|| "unknown".to_owned(), |p| p.display().to_string());
        format!(
            "{}\n\nCommand: {}\nWorking directory: {}\nStarted: {}\nElapsed: {}\n\
             Exit status: unavailable (still running)\nOutput so far:\n{}\n",
            self.instructions,
            self.command,
            cwd,
            humantime::format_rfc3339_millis(self.started),
            fmt_elapsed(self.elapsed),
            fenced(&self.output_tail),
        )
    }
}

/// A throttled update: what changed since the last message (R6.6).
#[derive(Clone, Debug, PartialEq)]
pub struct MonitorUpdate {
    /// The watched task.
    pub task: TaskId,
    /// The task's name.
    pub name: Arc<str>,
    /// How long the task has run.
    pub elapsed: Duration,
    /// Output written since the last message, cleaned and redacted; may
    /// start with the rest of a line already shown, for context.
    pub new_output: String,
    /// Whether any output arrived since the last message.
    pub output_changed: bool,
    /// How long no new output has been seen (zero when `output_changed`).
    pub output_quiet_for: Duration,
    /// The task's state as the guard's events describe it.
    pub state: TaskState,
    /// What changed the state since the last message (`stalled: idle budget…`).
    pub note: Option<String>,
}

impl MonitorUpdate {
    /// Renders the update as one prompt for a model.
    pub fn to_prompt(&self) -> String {
        let mut s = format!(
            "Update at {} (state: {:?})",
            fmt_elapsed(self.elapsed),
            self.state
        );
        if let Some(note) = &self.note {
            s.push_str(&format!("\nGuard: {note}"));
        }
        if self.output_changed {
            s.push_str(&format!("\nNew output:\n{}", fenced(&self.new_output)));
        } else {
            s.push_str(&format!(
                "\nNo new output for {}.",
                fmt_elapsed(self.output_quiet_for)
            ));
        }
        s
    }

    /// Folds a later update into this one, for an agent that fell behind:
    /// output is joined, the rest comes from the later update.
    pub fn absorb(&mut self, later: MonitorUpdate) {
        if later.output_changed {
            if self.output_changed
                && !self.new_output.is_empty()
                && !self.new_output.ends_with('\n')
            {
                self.new_output.push('\n');
            }
            self.new_output.push_str(&later.new_output);
        }
        self.output_changed |= later.output_changed;
        self.elapsed = later.elapsed;
        self.output_quiet_for = later.output_quiet_for;
        self.state = later.state;
        if later.note.is_some() {
            self.note = later.note;
        }
    }
}

/// The last message: how the task ended (R6.6).
#[derive(Clone, Debug, PartialEq)]
pub struct MonitorFinal {
    /// The watched task.
    pub task: TaskId,
    /// The task's name.
    pub name: Arc<str>,
    /// How long the task ran.
    pub elapsed: Duration,
    /// When it finished (wall time, a label only).
    pub completed_at: SystemTime,
    /// How it ended.
    pub outcome: Outcome,
    /// The exit code, absent when killed by a signal or not a process.
    pub exit_code: Option<i32>,
    /// The terminating signal, if any.
    pub signal: Option<i32>,
    /// Whether it was cancelled (by the guard or the runner).
    pub cancelled: bool,
    /// The final output tail, cleaned and redacted.
    pub output_tail: String,
}

impl MonitorFinal {
    /// Renders the final update as one prompt for a model.
    pub fn to_prompt(&self) -> String {
        let exit = match (self.exit_code, self.signal) {
            (Some(c), _) => format!("exit code {c}"),
            (None, Some(s)) => format!("killed by signal {s}, no exit code"),
            (None, None) => "no exit code".to_owned(),
        };
        format!(
            "Final update at {}: the command ended ({exit}; outcome {:?}; cancelled: {}) at {}.\n\
             Final output:\n{}\nSummarise what happened; only the exit code says whether it succeeded.",
            fmt_elapsed(self.elapsed),
            self.outcome,
            if self.cancelled { "yes" } else { "no" },
            humantime::format_rfc3339_millis(self.completed_at),
            fenced(&self.output_tail),
        )
    }
}

/// One message to a monitor agent.
#[derive(Clone, Debug, PartialEq)]
pub enum MonitorCall {
    /// Opens the monitor.
    Open(MonitorBrief),
    /// Something changed.
    Update(MonitorUpdate),
    /// The task finished; the monitor closes after this.
    Final(MonitorFinal),
}

impl MonitorCall {
    /// Returns the watched task.
    pub fn task(&self) -> TaskId {
        match self {
            MonitorCall::Open(b) => b.task,
            MonitorCall::Update(u) => u.task,
            MonitorCall::Final(f) => f.task,
        }
    }

    /// Returns the task's elapsed time when the message was made.
    pub fn elapsed(&self) -> Duration {
        match self {
            MonitorCall::Open(b) => b.elapsed,
            MonitorCall::Update(u) => u.elapsed,
            MonitorCall::Final(f) => f.elapsed,
        }
    }
}

/// The error a monitor agent returns (a rate limit, an unreachable model).
///
/// # Examples
///
/// ```
/// use stallwarden_sinks::monitor::MonitorError;
/// assert_eq!(MonitorError::new("rate limited").to_string(), "rate limited");
/// ```
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct MonitorError(String);

impl MonitorError {
    /// Builds an error from a message.
    pub fn new(msg: impl fmt::Display) -> Self {
        MonitorError(msg.to_string())
    }
}

/// A side agent that watches one long-running task (R6.6).
///
/// The runner implements it to plug a model in; [`RuleMonitor`] is a
/// model-free one. One instance serves one task: it gets [`open`], then any
/// number of [`update`]s, then [`finish`]. Each returns an observation (a
/// complete sentence or two, not a token stream) or `None` when there is
/// nothing worth saying. Calls run on the monitor's own thread by default, so
/// a slow agent blocks nothing; an error or panic ends the monitor, is
/// reported to the main agent, and never touches the task.
///
/// [`open`]: MonitorAgent::open
/// [`update`]: MonitorAgent::update
/// [`finish`]: MonitorAgent::finish
///
/// # Examples
///
/// ```
/// use stallwarden_sinks::monitor::{MonitorAgent, MonitorBrief, MonitorError, MonitorFinal, MonitorUpdate};
///
/// #[derive(Debug)]
/// struct Echo;
/// impl MonitorAgent for Echo {
///     fn open(&mut self, brief: &MonitorBrief) -> Result<Option<String>, MonitorError> {
///         Ok(Some(format!("watching `{}`", brief.command)))
///     }
///     fn update(&mut self, _: &MonitorUpdate) -> Result<Option<String>, MonitorError> {
///         Ok(None)
///     }
///     fn finish(&mut self, last: &MonitorFinal) -> Result<Option<String>, MonitorError> {
///         Ok(last.exit_code.map(|c| format!("exited with code {c}")))
///     }
/// }
/// ```
pub trait MonitorAgent: Send {
    /// Receives the structured first message.
    fn open(&mut self, brief: &MonitorBrief) -> Result<Option<String>, MonitorError>;

    /// Receives a throttled update.
    fn update(&mut self, update: &MonitorUpdate) -> Result<Option<String>, MonitorError>;

    /// Receives the final update; the monitor closes after it.
    fn finish(&mut self, last: &MonitorFinal) -> Result<Option<String>, MonitorError>;
}

/// What kind of observation a record is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ObservationKind {
    /// Said while the task ran (after the brief or an update).
    Update,
    /// Said after the final update.
    Summary,
    /// The monitor itself failed (error or panic); monitoring stopped.
    MonitorFailed,
}

/// An observation from a monitor, with provenance, for the main agent.
///
/// Its `Display` is the line to hand over, e.g. `monitor update for task
/// build at 00:07: no new output for 5 s; … This is an observation, not a
/// confirmed failure.` The text is compacted (whitespace collapsed) and
/// bounded.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use stallwarden_sinks::monitor::{Observation, ObservationKind};
/// use watchdog_core::TaskId;
///
/// let o = Observation {
///     task: TaskId::from_raw(3),
///     name: "build".into(),
///     at_elapsed: Duration::from_secs(7),
///     kind: ObservationKind::Update,
///     text: "no new output for 5 s; the process may be waiting on a lock".into(),
/// };
/// assert_eq!(
///     o.to_string(),
///     "monitor update for task build at 00:07: no new output for 5 s; the process may be \
///      waiting on a lock. This is an observation, not a confirmed failure."
/// );
/// ```
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Observation {
    /// The watched task's id.
    #[serde(skip)]
    pub task: TaskId,
    /// The watched task's name.
    #[serde(rename = "task")]
    pub name: Arc<str>,
    /// The task's elapsed time of the message this answers.
    #[serde(rename = "at_elapsed_ms", serialize_with = "ser_ms")]
    pub at_elapsed: Duration,
    /// Update, summary, or monitor failure.
    pub kind: ObservationKind,
    /// What the monitor said (compacted, bounded).
    pub text: String,
}

fn ser_ms<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_u64(u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

impl fmt::Display for Observation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let at = fmt_elapsed(self.at_elapsed);
        let text = self.text.trim_end_matches('.');
        match self.kind {
            ObservationKind::Update => write!(
                f,
                "monitor update for task {} at {at}: {text}. This is an observation, not a confirmed failure.",
                self.name
            ),
            ObservationKind::Summary => write!(
                f,
                "monitor summary for task {} at {at}: {text}. This is an observation; the exit status is authoritative.",
                self.name
            ),
            ObservationKind::MonitorFailed => write!(
                f,
                "monitor for task {} failed at {at}: {text}. Monitoring stopped; the task itself is unaffected.",
                self.name
            ),
        }
    }
}

/// Formats an elapsed time as `mm:ss`, or `h:mm:ss` from one hour.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use stallwarden_sinks::monitor::fmt_elapsed;
/// assert_eq!(fmt_elapsed(Duration::from_millis(7_900)), "00:07");
/// assert_eq!(fmt_elapsed(Duration::from_secs(3_725)), "1:02:05");
/// ```
pub fn fmt_elapsed(d: Duration) -> String {
    let s = d.as_secs();
    if s >= 3600 {
        format!("{}:{:02}:{:02}", s / 3600, s / 60 % 60, s % 60)
    } else {
        format!("{:02}:{:02}", s / 60, s % 60)
    }
}

fn fenced(text: &str) -> String {
    if text.is_empty() {
        "(no output)".to_owned()
    } else {
        format!("```\n{}\n```", text.trim_end_matches('\n'))
    }
}
