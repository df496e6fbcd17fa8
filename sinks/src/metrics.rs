//! A sink that exports progress gauges and counters through the metrics facade (R6.4).
//!
//! It records through whatever recorder the host installed (Prometheus,
//! StatsD, …); it installs none itself. Gauges are Unix-time stamps that are
//! set only once the thing they stamp has been observed: unknown is absent,
//! never 0 (R4.1). Every series carries a `task` label with the task's name.

use std::time::{SystemTime, UNIX_EPOCH};

use ::metrics::{counter, describe_counter, describe_gauge, gauge, Unit};
use watchdog_core::{Delivery, Event, EventKind, SignalKind, Sink, SinkError, TaskStatus};

/// Gauge: Unix time (seconds) of the task's last progress signal.
pub const LAST_PROGRESS: &str = "stallguard_last_progress_unix_seconds";
/// Gauge: Unix time (seconds) of the task's last observed tool call event
/// (its finish, or its start while in flight).
pub const LAST_CALL: &str = "stallguard_last_call_unix_seconds";
/// Counter: stalls, labelled with the `budget` that ran out.
pub const STALLS: &str = "stallguard_stalls_total";
/// Counter: cancels dispatched.
pub const CANCELS: &str = "stallguard_cancels_total";
/// Counter: kills dispatched.
pub const KILLS: &str = "stallguard_kills_total";
/// Counter: outbound heartbeats emitted (R3.7).
pub const HEARTBEATS: &str = "stallguard_heartbeats_total";

/// The signal kinds that prove progress, not mere liveness (SPEC §1): a
/// heartbeat or CPU use must not move the progress gauge.
const PROGRESS_KINDS: [SignalKind; 4] = [
    SignalKind::ArgumentDelta,
    SignalKind::Output,
    SignalKind::ToolCall,
    SignalKind::Progress,
];

/// A sink that turns events into `metrics` counters and gauges.
///
/// Counters: [`STALLS`] (`task`, `budget`), [`CANCELS`], [`KILLS`] and
/// [`HEARTBEATS`] (`task`). Gauges, set only when observed: [`LAST_PROGRESS`]
/// from `heartbeat` events (now minus the last output's age) and `recovered`
/// events (progress just arrived), and [`LAST_CALL`]; both also from status
/// snapshots passed to [`MetricsSink::observe`], which a runner can call on
/// a timer with [`Guard::statuses`](watchdog_core::Guard::statuses) for
/// fresher stamps. Gauges of a finished task keep their last value: the
/// facade has no way to delete a series.
///
/// Delivery is [`Delivery::Inline`]: the facade's calls are meant to be
/// cheap and non-blocking, and inline delivery lets a thread-local recorder
/// see them.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use stallguard_sinks::metrics::MetricsSink;
/// use watchdog_core::{Guard, ManualClock, Profile};
///
/// // With no recorder installed the metrics go nowhere; install one
/// // (e.g. metrics-exporter-prometheus) to export them.
/// let guard = Guard::builder().clock(ManualClock::new()).sink(MetricsSink::new()).build();
/// let task = guard.start("probe", Profile::default().idle(Duration::from_secs(5))).unwrap();
/// guard.advance(Duration::from_secs(5)); // stallguard_stalls_total{task="probe",budget="startup"} 1
/// task.finish_completed();
/// ```
#[derive(Clone, Copy, Debug, Default)]
pub struct MetricsSink {
    _private: (),
}

impl MetricsSink {
    /// Creates the sink.
    ///
    /// # Examples
    ///
    /// ```
    /// use stallguard_sinks::metrics::MetricsSink;
    /// let sink = MetricsSink::new();
    /// # let _ = sink;
    /// ```
    pub fn new() -> Self {
        MetricsSink { _private: () }
    }

    /// Registers descriptions and units of every metric with the current
    /// recorder; call once after installing it.
    ///
    /// # Examples
    ///
    /// ```
    /// stallguard_sinks::metrics::MetricsSink::describe();
    /// ```
    pub fn describe() {
        describe_gauge!(
            LAST_PROGRESS,
            Unit::Seconds,
            "Unix time of the task's last progress signal"
        );
        describe_gauge!(
            LAST_CALL,
            Unit::Seconds,
            "Unix time of the task's last tool call start or finish"
        );
        describe_counter!(
            STALLS,
            Unit::Count,
            "Silence budgets that ran out, by budget"
        );
        describe_counter!(CANCELS, Unit::Count, "Cancels dispatched");
        describe_counter!(
            KILLS,
            Unit::Count,
            "Kills dispatched after the grace period"
        );
        describe_counter!(HEARTBEATS, Unit::Count, "Outbound heartbeats emitted");
    }

    /// Exports the stamps a status snapshot knows: the latest progress
    /// signal (argument delta, output, tool call or progress value — not a
    /// heartbeat) and the latest tool call (its finish, or its start while
    /// in flight). Stamps the snapshot does not have are left unset.
    ///
    /// # Examples
    ///
    /// ```
    /// use stallguard_sinks::metrics::MetricsSink;
    /// use watchdog_core::{Guard, ManualClock, Profile};
    ///
    /// let guard = Guard::builder().clock(ManualClock::new()).build();
    /// let task = guard.start("turn", Profile::default()).unwrap();
    /// task.output(10, 1);
    /// let sink = MetricsSink::new();
    /// for status in guard.statuses() {
    ///     sink.observe(&status); // sets stallguard_last_progress_unix_seconds{task="turn"}
    /// }
    /// # task.finish_completed();
    /// ```
    pub fn observe(&self, status: &TaskStatus) {
        let task = status.name.clone();
        let progress = PROGRESS_KINDS
            .iter()
            .filter_map(|k| status.last_of(*k))
            .map(|s| s.at)
            .max();
        if let Some(at) = progress {
            gauge!(LAST_PROGRESS, "task" => task.clone()).set(unix_seconds(at));
        }
        if let Some(call) = &status.last_call {
            let at = call.finished.unwrap_or(call.started).at;
            gauge!(LAST_CALL, "task" => task).set(unix_seconds(at));
        }
    }
}

impl Sink for MetricsSink {
    fn on_event(&self, event: &Event) -> Result<(), SinkError> {
        let task = event.name.to_string();
        match &event.kind {
            EventKind::Heartbeat {
                last_output_age, ..
            } => {
                counter!(HEARTBEATS, "task" => task.clone()).increment(1);
                // Absent before any output: the gauge stays unset (R4.1).
                if let Some(age) = last_output_age {
                    let at = event.wall.checked_sub(*age).unwrap_or(event.wall);
                    gauge!(LAST_PROGRESS, "task" => task).set(unix_seconds(at));
                }
            }
            EventKind::Recovered { .. } => {
                gauge!(LAST_PROGRESS, "task" => task).set(unix_seconds(event.wall));
            }
            EventKind::Stalled { budget, .. } => {
                counter!(STALLS, "task" => task, "budget" => budget.as_str()).increment(1);
            }
            EventKind::Cancelling { .. } => {
                counter!(CANCELS, "task" => task).increment(1);
            }
            EventKind::Killed { .. } => {
                counter!(KILLS, "task" => task).increment(1);
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

/// Unix time in seconds, with the fraction; a wall clock set before 1970
/// gives a negative value rather than a bogus 0.
fn unix_seconds(t: SystemTime) -> f64 {
    match t.duration_since(UNIX_EPOCH) {
        Ok(d) => d.as_secs_f64(),
        Err(e) => -e.duration().as_secs_f64(),
    }
}
