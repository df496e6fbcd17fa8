//! A sink that writes events as structured tracing records (R6.4).
//!
//! Each event becomes one `tracing` event under the target `stallwarden`,
//! with the task's name and id and the event's own fields as structured
//! fields, at a level that says how worried to be. Formatting and filtering
//! are the subscriber's business, not this sink's.
//!
//! Each task is also a span, [`SPAN`] (fields `task`, `task_id`, `profile`),
//! opened at its `started` event and closed after its `finished` one, with
//! every event of the task recorded inside it: a host whose subscriber has
//! `tracing-opentelemetry` exports one trace span per task with its events
//! as span events, with no code of ours (R6.8).

use std::collections::HashMap;
use std::fmt::{self, Write as _};
use std::sync::Arc;

use parking_lot::Mutex;
use tracing::{Level, Span};
use watchdog_core::{
    Action, ActionKind, ChildInfo, Delivery, Event, EventKind, Outcome, Sink, SinkError, TaskId,
};

/// Derives a task's profile from its name.
type ProfileOf = dyn Fn(&str) -> String + Send + Sync;

/// The name of the span each task is recorded in.
pub const SPAN: &str = "stallwarden.task";

/// The target every record of this sink is emitted under.
pub const TARGET: &str = "stallwarden";

/// Emits one tracing event at a level chosen at run time; the `tracing`
/// macros want the level as a constant, so each arm names one.
macro_rules! event_at {
    ($level:expr, $($rest:tt)+) => {
        match $level {
            Level::ERROR => tracing::event!(target: TARGET, Level::ERROR, $($rest)+),
            Level::WARN => tracing::event!(target: TARGET, Level::WARN, $($rest)+),
            Level::INFO => tracing::event!(target: TARGET, Level::INFO, $($rest)+),
            Level::DEBUG => tracing::event!(target: TARGET, Level::DEBUG, $($rest)+),
            _ => tracing::event!(target: TARGET, Level::TRACE, $($rest)+),
        }
    };
}

/// A sink that logs every event through `tracing` with structured fields.
///
/// Levels: `stalled`, `deadline_exceeded`, `liveness_lost` and `triggered`
/// are `WARN`; `cancelling` and `killed` are `ERROR`; `started`,
/// `long_running`, `recovered` and `finished` are `INFO`; `heartbeat` is
/// `DEBUG` unless [`TracingSink::heartbeat_level`] says otherwise. Cancel and
/// kill actions are logged at `DEBUG` (their `cancelling` and `killed`
/// events already carry the news).
///
/// Every record has the fields `task`, `task_id`, `event` (the R8.3 `type`)
/// and `elapsed_ms`, then the event's own: `pid`; `budget`, `strike`,
/// `terminate_after`, `silent_ms`, `last_step`, `children`, `suspects`;
/// `reason`; `signal`; `outcome`, `exit_code`, `exit_signal`;
/// `last_output_age_ms`, `total_lines`, `total_bytes`, `idle_remaining_ms`,
/// `deadline_ms`. Fields whose value is unknown are left out, never zero.
///
/// Every record of a task is emitted inside the task's span, [`SPAN`],
/// opened (as a child of whatever span is current where the task starts)
/// at `started` and closed after `finished`. Its `profile` field comes from
/// the function given to [`TracingSink::profile_of`], and is absent without
/// one.
///
/// It is delivered [`Delivery::Inline`] by default: a tracing subscriber is
/// expected not to block (use a non-blocking writer for slow outputs), and
/// inline delivery lets a thread-local subscriber (`with_default`) see the
/// records. Choose [`Delivery::Isolated`] for a subscriber that may block.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use stallwarden_sinks::trace::TracingSink;
/// use watchdog_core::{Guard, ManualClock, Profile};
///
/// let guard = Guard::builder()
///     .clock(ManualClock::new())
///     .sink(TracingSink::new().heartbeat_level(tracing::Level::TRACE))
///     .build();
/// let task = guard.start("probe", Profile::default().idle(Duration::from_secs(5))).unwrap();
/// guard.advance(Duration::from_secs(5)); // logs `stalled` at WARN, `cancelling` at ERROR
/// task.finish_completed();
/// ```
#[derive(Clone)]
pub struct TracingSink {
    heartbeat_level: Level,
    delivery: Delivery,
    profile_of: Option<Arc<ProfileOf>>,
    /// The open span of each live task, shared by clones.
    spans: Arc<Mutex<HashMap<TaskId, Span>>>,
}

impl fmt::Debug for TracingSink {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TracingSink")
            .field("heartbeat_level", &self.heartbeat_level)
            .field("delivery", &self.delivery)
            .field("profile_of", &self.profile_of.is_some())
            .field("open_spans", &self.spans.lock().len())
            .finish()
    }
}

impl Default for TracingSink {
    fn default() -> Self {
        Self::new()
    }
}

impl TracingSink {
    /// Creates a sink logging heartbeats at `DEBUG`, delivered inline.
    ///
    /// # Examples
    ///
    /// ```
    /// use stallwarden_sinks::trace::TracingSink;
    /// use watchdog_core::{Delivery, Sink};
    /// assert_eq!(TracingSink::new().delivery(), Delivery::Inline);
    /// ```
    pub fn new() -> Self {
        TracingSink {
            heartbeat_level: Level::DEBUG,
            delivery: Delivery::Inline,
            profile_of: None,
            spans: Arc::default(),
        }
    }

    /// Derives the `profile` field of a task's span from its name.
    ///
    /// # Examples
    ///
    /// ```
    /// use stallwarden_sinks::trace::TracingSink;
    /// let sink = TracingSink::new()
    ///     .profile_of(|name| name.split('/').next().unwrap_or("").to_owned());
    /// # let _ = sink;
    /// ```
    #[must_use]
    pub fn profile_of(mut self, f: impl Fn(&str) -> String + Send + Sync + 'static) -> Self {
        self.profile_of = Some(Arc::new(f));
        self
    }

    /// The task's span: opened at `started`, looked up after.
    fn span_of(&self, e: &Event) -> Span {
        let mut spans = self.spans.lock();
        if let EventKind::Started { .. } = e.kind {
            let profile = self.profile_of.as_ref().map(|f| f(&e.name));
            let span = tracing::info_span!(
                target: TARGET,
                SPAN,
                task = &*e.name,
                task_id = e.task.as_raw(),
                profile = profile.as_deref(),
            );
            spans.insert(e.task, span.clone());
            return span;
        }
        spans.get(&e.task).cloned().unwrap_or_else(Span::none)
    }

    /// Sets the level of `heartbeat` records (`DEBUG` by default).
    ///
    /// # Examples
    ///
    /// ```
    /// use stallwarden_sinks::trace::TracingSink;
    /// let sink = TracingSink::new().heartbeat_level(tracing::Level::TRACE);
    /// # let _ = sink;
    /// ```
    #[must_use]
    pub fn heartbeat_level(mut self, level: Level) -> Self {
        self.heartbeat_level = level;
        self
    }

    /// Sets how the guard calls this sink (inline by default).
    ///
    /// # Examples
    ///
    /// ```
    /// use stallwarden_sinks::trace::TracingSink;
    /// use watchdog_core::{Delivery, Sink};
    /// let sink = TracingSink::new().with_delivery(Delivery::Isolated);
    /// assert_eq!(sink.delivery(), Delivery::Isolated);
    /// ```
    #[must_use]
    pub fn with_delivery(mut self, delivery: Delivery) -> Self {
        self.delivery = delivery;
        self
    }
}

impl TracingSink {
    /// Records one event inside its task's span.
    fn on_task_event(&self, e: &Event) -> Result<(), SinkError> {
        let span = self.span_of(e);
        let entered = span.enter();
        self.record(e);
        drop(entered);
        if let EventKind::Finished { .. } = e.kind {
            // R3.8: `finished` is the last event; the span closes with it.
            self.spans.lock().remove(&e.task);
        }
        Ok(())
    }

    /// Emits the event's record, at its level, with its fields.
    fn record(&self, e: &Event) {
        let task = &*e.name;
        let task_id = e.task.as_raw();
        let event = e.kind.type_name();
        let elapsed_ms = millis(e.elapsed);
        match &e.kind {
            EventKind::Started { pid } => {
                tracing::info!(target: TARGET, task, task_id, event, elapsed_ms, pid = *pid, "task started");
            }
            EventKind::LongRunning => {
                tracing::info!(target: TARGET, task, task_id, event, elapsed_ms, "task is long-running");
            }
            EventKind::Heartbeat {
                last_output_age,
                total_lines,
                total_bytes,
                idle_remaining,
                deadline,
            } => {
                event_at!(
                    self.heartbeat_level,
                    task,
                    task_id,
                    event,
                    elapsed_ms,
                    last_output_age_ms = last_output_age.map(millis),
                    total_lines = *total_lines,
                    total_bytes = *total_bytes,
                    idle_remaining_ms = idle_remaining.map(millis),
                    deadline_ms = deadline.map(millis),
                    "task silent but still running"
                );
            }
            EventKind::Stalled {
                budget,
                strike,
                terminate_after,
                silent,
                last_step,
                children,
                stacks,
                on_stall,
                ..
            } => {
                let first_frame = stacks.iter().find_map(|s| s.frames.first());
                tracing::warn!(
                    target: TARGET,
                    task,
                    task_id,
                    event,
                    elapsed_ms,
                    budget = budget.as_str(),
                    strike = *strike,
                    terminate_after = *terminate_after,
                    silent_ms = millis(*silent),
                    last_step = last_step.as_deref(),
                    children = children.as_ref().map(Vec::len),
                    suspects = children.as_deref().map(describe_children).as_deref(),
                    frame = first_frame.map(String::as_str),
                    on_stall = on_stall.as_ref().map(|n| n.status.as_str()),
                    "task stalled"
                );
            }
            EventKind::Recovered { silent } => {
                tracing::info!(target: TARGET, task, task_id, event, elapsed_ms, silent_ms = millis(*silent), "task recovered");
            }
            EventKind::DeadlineExceeded { reason } => {
                tracing::warn!(target: TARGET, task, task_id, event, elapsed_ms, reason = reason.as_str(), "task deadline exceeded");
            }
            EventKind::LivenessLost { reason } => {
                tracing::warn!(target: TARGET, task, task_id, event, elapsed_ms, reason = reason.as_str(), "task liveness lost");
            }
            EventKind::Triggered { reason } => {
                tracing::warn!(target: TARGET, task, task_id, event, elapsed_ms, reason = reason.as_str(), "task reported its own fault");
            }
            EventKind::Cancelling { reason, signal } => {
                tracing::error!(target: TARGET, task, task_id, event, elapsed_ms, reason = reason.as_str(), signal = *signal, "cancelling task");
            }
            EventKind::Killed { signal } => {
                tracing::error!(target: TARGET, task, task_id, event, elapsed_ms, signal = *signal, "killing task: grace period over");
            }
            EventKind::Finished {
                outcome,
                exit_code,
                signal,
            } => {
                tracing::info!(
                    target: TARGET,
                    task,
                    task_id,
                    event,
                    elapsed_ms,
                    outcome = outcome_str(*outcome),
                    exit_code = *exit_code,
                    exit_signal = *signal,
                    "task finished"
                );
            }
            // An event kind added to the core after this sink was written
            // still shows up, with the fields every record has.
            _ => {
                tracing::info!(target: TARGET, task, task_id, event, elapsed_ms, "task event");
            }
        }
    }
}

impl Sink for TracingSink {
    fn on_event(&self, e: &Event) -> Result<(), SinkError> {
        self.on_task_event(e)
    }

    fn on_action(&self, action: &Action) -> Result<(), SinkError> {
        let span = self.spans.lock().get(&action.task).cloned();
        let _entered = span.as_ref().map(Span::enter);
        let task = &*action.name;
        let task_id = action.task.as_raw();
        match &action.kind {
            ActionKind::Cancel { reason } => {
                tracing::debug!(target: TARGET, task, task_id, pid = action.pid, reason = reason.as_str(), "cancel action dispatched");
            }
            ActionKind::Kill => {
                tracing::debug!(target: TARGET, task, task_id, pid = action.pid, "kill action dispatched");
            }
            _ => {
                tracing::debug!(target: TARGET, task, task_id, pid = action.pid, "action dispatched");
            }
        }
        Ok(())
    }

    fn delivery(&self) -> Delivery {
        self.delivery
    }

    fn name(&self) -> &str {
        "tracing"
    }
}

fn millis(d: std::time::Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// Returns the R8.3 name of an outcome.
pub(crate) fn outcome_str(outcome: Outcome) -> &'static str {
    match outcome {
        Outcome::Completed => "completed",
        Outcome::Failed => "failed",
        Outcome::Cancelled => "cancelled",
        Outcome::Abandoned => "abandoned",
    }
}

/// Names suspect children compactly: `grep[7] disk_wait in io_schedule`.
fn describe_children(children: &[ChildInfo]) -> String {
    let mut s = String::new();
    for (i, c) in children.iter().enumerate() {
        if i > 0 {
            s.push_str(", ");
        }
        let state = serde_json::to_value(c.state)
            .ok()
            .and_then(|v| v.as_str().map(str::to_owned))
            .unwrap_or_else(|| format!("{:?}", c.state));
        let _ = write!(s, "{}[{}] {}", c.name, c.pid, state);
        if let Some(w) = &c.wchan {
            let _ = write!(s, " in {w}");
        }
    }
    s
}
