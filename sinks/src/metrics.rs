//! A sink that exports stalls, cancels, live tasks and durations through the
//! metrics facade, with bounded labels (R6.4, R6.8).
//!
//! It records through whatever recorder the host installed (Prometheus,
//! StatsD, …); it installs none itself. Labels are bounded: a series is
//! keyed by profile, budget, state, reason kind or outcome, never by task
//! name unless the host opts in with [`MetricsSink::per_task`] (one series
//! per agent turn, never deleted, is unbounded cardinality). Gauges are
//! kept current by the events themselves, not by polling. Unix-time gauges
//! are set only once the thing they stamp has been observed: unknown is
//! absent, never 0 (R4.1).

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use ::metrics::{
    counter, describe_counter, describe_gauge, describe_histogram, gauge, histogram, SharedString,
    Unit,
};
use parking_lot::Mutex;
use watchdog_core::{
    Delivery, Event, EventKind, Outcome, SignalKind, Sink, SinkError, TaskId, TaskStatus,
};

/// Gauge: Unix time (seconds) of the last progress signal of any task of a
/// profile (`profile`; with [`MetricsSink::per_task`], also `task`).
pub const LAST_PROGRESS: &str = "stallwarden_last_progress_unix_seconds";
/// Gauge: Unix time (seconds) of the last observed tool call event (its
/// finish, or its start while in flight), labelled like [`LAST_PROGRESS`].
pub const LAST_CALL: &str = "stallwarden_last_call_unix_seconds";
/// Counter: stalls (`profile`, `budget`: the budget that ran out).
pub const STALLS: &str = "stallwarden_stalls_total";
/// Counter: cancels dispatched (`profile`, `reason`: the kind of verdict
/// behind the cancel, one of [`CANCEL_REASONS`]).
pub const CANCELS: &str = "stallwarden_cancels_total";
/// Counter: kills dispatched after the grace period (`profile`).
pub const KILLS: &str = "stallwarden_kills_total";
/// Counter: restarts of stopped work after a stall (`profile`, R8.15).
pub const RESTARTS: &str = "stallwarden_restarts_total";
/// Counter: outbound heartbeats emitted (`profile`, R3.7).
pub const HEARTBEATS: &str = "stallwarden_heartbeats_total";
/// Gauge: live tasks (`state`: `working`, `stalled` or `cancelling`).
pub const TASKS: &str = "stallwarden_tasks";
/// Histogram: silence at each stall verdict, in seconds (`profile`, `budget`).
pub const STALL_SILENCE: &str = "stallwarden_stall_silence_seconds";
/// Histogram: task duration from start to settle, in seconds (`profile`,
/// `outcome`: `completed`, `failed`, `cancelled` or `abandoned`).
pub const TASK_DURATION: &str = "stallwarden_task_duration_seconds";

/// The values of the `reason` label of [`CANCELS`]: a stall that struck
/// out, a deadline, lost liveness, the task's own trigger, or a cancel the
/// runner requested (anything not preceded by a verdict).
pub const CANCEL_REASONS: [&str; 5] = ["stall", "deadline", "liveness", "triggered", "requested"];

/// The values of the `state` label of [`TASKS`].
pub const STATES: [&str; 3] = ["working", "stalled", "cancelling"];

/// The signal kinds that prove progress, not mere liveness (SPEC §1): a
/// heartbeat or CPU use must not move the progress gauge.
const PROGRESS_KINDS: [SignalKind; 4] = [
    SignalKind::ArgumentDelta,
    SignalKind::Output,
    SignalKind::ToolCall,
    SignalKind::Progress,
];

/// The profile label of a task whose host gave no classifier.
const DEFAULT_PROFILE: &str = "default";

/// A Unix-time gauge's series: metric, profile, task (only per task).
type StampKey = (&'static str, SharedString, Option<String>);

type Classifier = dyn Fn(&str) -> SharedString + Send + Sync;

/// A sink that turns events into `metrics` counters, gauges and histograms
/// with bounded labels (R6.8).
///
/// Counters: [`STALLS`], [`CANCELS`], [`KILLS`], [`HEARTBEATS`],
/// [`RESTARTS`] (each `restarted` event). Gauges:
/// [`TASKS`] by state, moved on `started`, `stalled`, `recovered`,
/// `cancelling` and `finished`, so it is current without polling; and the
/// Unix-time stamps [`LAST_PROGRESS`] (from `heartbeat` events — now minus
/// the last output's age — and `recovered` events) and [`LAST_CALL`], both
/// also from status snapshots passed to [`MetricsSink::observe`]; a stamp
/// only moves forward. Histograms: [`STALL_SILENCE`] and [`TASK_DURATION`]
/// (buckets are the exporter's to choose).
///
/// Every series but [`TASKS`] carries a `profile` label. Events carry no
/// profile, so the sink derives it from the task's name with the function
/// given to [`MetricsSink::profile_of`] (called once per task, at its
/// `started` event); without one it is `default`. The function must map
/// names onto a small fixed set, e.g. the part before a `/`.
///
/// Delivery is [`Delivery::Inline`]: the facade's calls are meant to be
/// cheap and non-blocking, and inline delivery lets a thread-local recorder
/// see them. The sink keeps one small record per live task (its profile and
/// state), dropped when the task finishes.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use stallwarden_sinks::metrics::MetricsSink;
/// use watchdog_core::{Guard, ManualClock, Profile};
///
/// // With no recorder installed the metrics go nowhere; install one
/// // (e.g. metrics-exporter-prometheus) to export them.
/// let sink = MetricsSink::new().profile_of(|name| name.split('/').next().unwrap_or("").to_owned().into());
/// let guard = Guard::builder().clock(ManualClock::new()).sink(sink).build();
/// let task = guard.start("agent/turn-1", Profile::default().idle(Duration::from_secs(5))).unwrap();
/// guard.advance(Duration::from_secs(5)); // stallwarden_stalls_total{profile="agent",budget="startup"} 1
/// task.finish_completed();
/// ```
#[derive(Clone)]
pub struct MetricsSink {
    profile_of: Option<Arc<Classifier>>,
    per_task: bool,
    /// Shared by clones, so a runner's copy for `observe` sees the guard's.
    tables: Arc<Tables>,
}

#[derive(Default)]
struct Tables {
    live: Mutex<HashMap<TaskId, Live>>,
    /// Latest stamp written per (gauge, profile, task), so a stamp never moves back.
    stamps: Mutex<HashMap<StampKey, f64>>,
}

/// What the sink remembers of one live task.
struct Live {
    profile: SharedString,
    state: &'static str,
    /// The kind of the last verdict, the `reason` of a cancel that follows.
    verdict: Option<&'static str>,
}

impl fmt::Debug for MetricsSink {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MetricsSink")
            .field("classifier", &self.profile_of.is_some())
            .field("per_task", &self.per_task)
            .field("live", &self.tables.live.lock().len())
            .finish()
    }
}

impl Default for MetricsSink {
    fn default() -> Self {
        MetricsSink::new()
    }
}

impl MetricsSink {
    /// Creates the sink: every task in profile `default`, no task label.
    ///
    /// # Examples
    ///
    /// ```
    /// use stallwarden_sinks::metrics::MetricsSink;
    /// let sink = MetricsSink::new();
    /// # let _ = sink;
    /// ```
    pub fn new() -> Self {
        MetricsSink {
            profile_of: None,
            per_task: false,
            tables: Arc::default(),
        }
    }

    /// Derives the `profile` label from a task's name; the function must
    /// return one of a small fixed set of values. Call before handing the
    /// sink to a guard.
    ///
    /// # Examples
    ///
    /// ```
    /// use stallwarden_sinks::metrics::MetricsSink;
    /// let sink = MetricsSink::new().profile_of(|name| {
    ///     if name.starts_with("review") { "review".into() } else { "agent".into() }
    /// });
    /// # let _ = sink;
    /// ```
    pub fn profile_of(self, f: impl Fn(&str) -> SharedString + Send + Sync + 'static) -> Self {
        MetricsSink {
            profile_of: Some(Arc::new(f)),
            ..self
        }
    }

    /// Opts in to per-task series: the Unix-time gauges also carry a
    /// `task` label. Each task name is a new series that is never deleted,
    /// so use this only where task names are few and reused.
    ///
    /// # Examples
    ///
    /// ```
    /// use stallwarden_sinks::metrics::MetricsSink;
    /// let sink = MetricsSink::new().per_task(true);
    /// # let _ = sink;
    /// ```
    pub fn per_task(self, on: bool) -> Self {
        MetricsSink {
            per_task: on,
            ..self
        }
    }

    /// Registers descriptions and units of every metric with the current
    /// recorder; call once after installing it.
    ///
    /// # Examples
    ///
    /// ```
    /// stallwarden_sinks::metrics::MetricsSink::describe();
    /// ```
    pub fn describe() {
        describe_gauge!(
            LAST_PROGRESS,
            Unit::Seconds,
            "Unix time of the last progress signal"
        );
        describe_gauge!(
            LAST_CALL,
            Unit::Seconds,
            "Unix time of the last tool call start or finish"
        );
        describe_counter!(
            STALLS,
            Unit::Count,
            "Silence budgets that ran out, by profile and budget"
        );
        describe_counter!(
            CANCELS,
            Unit::Count,
            "Cancels dispatched, by profile and reason kind"
        );
        describe_counter!(
            KILLS,
            Unit::Count,
            "Kills dispatched after the grace period"
        );
        describe_counter!(HEARTBEATS, Unit::Count, "Outbound heartbeats emitted");
        describe_counter!(
            RESTARTS,
            Unit::Count,
            "Restarts of work a stall had stopped"
        );
        describe_gauge!(TASKS, Unit::Count, "Live tasks by state");
        describe_histogram!(
            STALL_SILENCE,
            Unit::Seconds,
            "Silence at each stall verdict"
        );
        describe_histogram!(
            TASK_DURATION,
            Unit::Seconds,
            "Task duration from start to settle, by outcome"
        );
    }

    /// Exports the stamps a status snapshot knows: the latest progress
    /// signal (argument delta, output, tool call or progress value — not a
    /// heartbeat) and the latest tool call (its finish, or its start while
    /// in flight). Stamps the snapshot does not have are left unset.
    ///
    /// # Examples
    ///
    /// ```
    /// use stallwarden_sinks::metrics::MetricsSink;
    /// use watchdog_core::{Guard, ManualClock, Profile};
    ///
    /// let sink = MetricsSink::new();
    /// let guard = Guard::builder().clock(ManualClock::new()).sink(sink.clone()).build();
    /// let task = guard.start("turn", Profile::default()).unwrap();
    /// task.output(10, 1);
    /// for status in guard.statuses() {
    ///     sink.observe(&status); // sets stallwarden_last_progress_unix_seconds{profile="default"}
    /// }
    /// # task.finish_completed();
    /// ```
    pub fn observe(&self, status: &TaskStatus) {
        let profile = self.profile(status.id, &status.name);
        let progress = PROGRESS_KINDS
            .iter()
            .filter_map(|k| status.last_of(*k))
            .map(|s| s.at)
            .max();
        if let Some(at) = progress {
            self.stamp(LAST_PROGRESS, &profile, &status.name, at);
        }
        if let Some(call) = &status.last_call {
            let at = call.finished.unwrap_or(call.started).at;
            self.stamp(LAST_CALL, &profile, &status.name, at);
        }
    }

    /// The profile label of a task: remembered while it lives, derived
    /// from its name otherwise.
    fn profile(&self, id: TaskId, name: &str) -> SharedString {
        if let Some(live) = self.tables.live.lock().get(&id) {
            return live.profile.clone();
        }
        self.classify(name)
    }

    fn classify(&self, name: &str) -> SharedString {
        match &self.profile_of {
            Some(f) => f(name),
            None => SharedString::const_str(DEFAULT_PROFILE),
        }
    }

    /// Sets a Unix-time gauge unless it already holds a later stamp.
    fn stamp(&self, metric: &'static str, profile: &SharedString, task: &str, at: SystemTime) {
        let secs = unix_seconds(at);
        let task = self.per_task.then(|| task.to_owned());
        {
            let mut stamps = self.tables.stamps.lock();
            let slot = stamps
                .entry((metric, profile.clone(), task.clone()))
                .or_insert(f64::NEG_INFINITY);
            if secs <= *slot {
                return;
            }
            *slot = secs;
        }
        match task {
            Some(task) => gauge!(metric, "profile" => profile.clone(), "task" => task).set(secs),
            None => gauge!(metric, "profile" => profile.clone()).set(secs),
        }
    }

    /// Moves a live task to `state`, keeping [`TASKS`] current.
    fn move_to(&self, id: TaskId, state: &'static str) {
        let mut live = self.tables.live.lock();
        if let Some(task) = live.get_mut(&id) {
            if task.state != state {
                gauge!(TASKS, "state" => task.state).decrement(1.0);
                gauge!(TASKS, "state" => state).increment(1.0);
                task.state = state;
            }
        }
    }

    fn set_verdict(&self, id: TaskId, verdict: &'static str) {
        if let Some(task) = self.tables.live.lock().get_mut(&id) {
            task.verdict = Some(verdict);
        }
    }
}

impl Sink for MetricsSink {
    fn on_event(&self, event: &Event) -> Result<(), SinkError> {
        if let EventKind::Started { .. } = event.kind {
            let profile = self.classify(&event.name);
            self.tables.live.lock().insert(
                event.task,
                Live {
                    profile,
                    state: "working",
                    verdict: None,
                },
            );
            gauge!(TASKS, "state" => "working").increment(1.0);
            return Ok(());
        }
        let profile = self.profile(event.task, &event.name);
        match &event.kind {
            EventKind::Heartbeat {
                last_output_age, ..
            } => {
                counter!(HEARTBEATS, "profile" => profile.clone()).increment(1);
                // Absent before any output: the gauge stays unset (R4.1).
                if let Some(age) = last_output_age {
                    let at = event.wall.checked_sub(*age).unwrap_or(event.wall);
                    self.stamp(LAST_PROGRESS, &profile, &event.name, at);
                }
            }
            EventKind::Recovered { .. } => {
                self.stamp(LAST_PROGRESS, &profile, &event.name, event.wall);
                self.move_to(event.task, "working");
            }
            EventKind::Stalled { budget, silent, .. } => {
                counter!(STALLS, "profile" => profile.clone(), "budget" => budget.as_str())
                    .increment(1);
                histogram!(STALL_SILENCE, "profile" => profile, "budget" => budget.as_str())
                    .record(silent.as_secs_f64());
                self.set_verdict(event.task, "stall");
                self.move_to(event.task, "stalled");
            }
            EventKind::DeadlineExceeded { .. } => self.set_verdict(event.task, "deadline"),
            EventKind::LivenessLost { .. } => self.set_verdict(event.task, "liveness"),
            EventKind::Triggered { .. } => self.set_verdict(event.task, "triggered"),
            EventKind::Cancelling { .. } => {
                let reason = self
                    .tables
                    .live
                    .lock()
                    .get(&event.task)
                    .and_then(|t| t.verdict)
                    .unwrap_or("requested");
                counter!(CANCELS, "profile" => profile, "reason" => reason).increment(1);
                self.move_to(event.task, "cancelling");
            }
            EventKind::Killed { .. } => {
                counter!(KILLS, "profile" => profile).increment(1);
            }
            EventKind::Restarted { .. } => {
                counter!(RESTARTS, "profile" => profile).increment(1);
            }
            EventKind::Finished { outcome, .. } => {
                histogram!(TASK_DURATION, "profile" => profile, "outcome" => outcome_name(*outcome))
                    .record(event.elapsed.as_secs_f64());
                if let Some(task) = self.tables.live.lock().remove(&event.task) {
                    gauge!(TASKS, "state" => task.state).decrement(1.0);
                }
            }
            _ => {}
        }
        Ok(())
    }

    fn delivery(&self) -> Delivery {
        Delivery::Inline
    }

    fn name(&self) -> &str {
        "metrics"
    }
}

fn outcome_name(outcome: Outcome) -> &'static str {
    match outcome {
        Outcome::Completed => "completed",
        Outcome::Failed => "failed",
        Outcome::Cancelled => "cancelled",
        Outcome::Abandoned => "abandoned",
    }
}

/// Unix time in seconds, with the fraction; a wall clock set before 1970
/// gives a negative value rather than a bogus 0.
fn unix_seconds(t: SystemTime) -> f64 {
    match t.duration_since(UNIX_EPOCH) {
        Ok(d) => d.as_secs_f64(),
        Err(e) => -e.duration().as_secs_f64(),
    }
}
