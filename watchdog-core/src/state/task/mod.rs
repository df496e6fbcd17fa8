//! One task's slow state and its verdict logic (SPEC §2, §3).
//!
//! Everything here runs under the scheduler lock, either when a timer the
//! driver armed comes due or when the runner calls a slow-path operation
//! (tool calls, pause, extend, finish). The hot path never comes here except
//! through the few flags of [`crate::state::cell`].
//!
//! Decisions are taken at an instant `e` that the caller passes in: the
//! timer's due instant when the driver catches up, the clock's reading for a
//! runner call. A verdict reads the cell's atomics when it is taken, so
//! progress recorded before it counts even if the timer was armed earlier
//! (R3.10).
//!
//! The room is split by idea: `probe.rs` (the [`ChildProbe`] and the fresh
//! look a stall names), `verdict.rs` (the rules of §2 and §3 taken at an
//! instant), `ops.rs` (the runner's slow-path operations) and
//! `snapshot.rs` (status snapshots, R4.2).

use std::ops::{Deref, DerefMut};
use std::sync::Arc;
use std::time::Duration;

use crate::state::calls::{CallRecord, Calls};
use crate::state::cell::{CounterSlot, TaskCell, LIVENESS_UNARMED, STARTUP_PENDING};
use crate::state::outbox::{Emitted, Item};
use crate::vocab::clock::{Clock, Nanos};
use crate::vocab::error::GuardError;
use crate::vocab::event::{Action, ActionKind, Event, EventKind, TaskId};
use crate::vocab::profile::Profile;
use crate::vocab::status::{BackgroundTask, CallOutcome};

mod ops;
pub(crate) mod probe;
mod snapshot;
mod verdict;

use probe::{ChildProbe, VerdictLook};

/// The signal a process sink sends for a cancel action.
pub(crate) const CANCEL_SIGNAL: &str = "SIGTERM";
/// The signal a process sink sends for a kill action.
pub(crate) const KILL_SIGNAL: &str = "SIGKILL";

/// Where a task is in its life. `Monitoring` is derived for status only.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Life {
    Working,
    Stalled,
    Cancelling,
    Finished,
}

/// Events and actions produced under the scheduler lock, in order.
pub(crate) struct Out<'a> {
    pub(crate) clock: &'a dyn Clock,
    pub(crate) items: Vec<Emitted>,
    /// A flag that sends recorders down the slow path (`STALLED`,
    /// `LIVENESS_LOST`) was raised: the caller owes the task the driver's
    /// half of the handshake, a heavy barrier then another look at its
    /// stamps (see [`TaskCell::record`]).
    pub(crate) raised: bool,
}

impl<'a> Out<'a> {
    pub(crate) fn new(clock: &'a dyn Clock) -> Self {
        Out {
            clock,
            items: Vec::new(),
            raised: false,
        }
    }
}

/// A task's rarely used state: tool calls, steps, background tasks,
/// children, a pid, a pause, a pending kill, output counters. Boxed on
/// first use so a task that only records signals stays small (R9.3).
#[derive(Debug, Default)]
struct Cold {
    /// The one set of calls in flight and the last call (R5.3, R10.6).
    calls: Calls,
    step: Option<String>,
    background: Vec<BackgroundTask>,
    unnamed_background: bool,
    children: Option<Arc<dyn ChildProbe>>,
    /// R8.16: looked at before each due instant is judged.
    look: Option<Arc<dyn VerdictLook>>,
    /// The due instant the look was last taken for.
    looked_for: Option<Nanos>,
    pid: Option<u32>,
    paused_at: Option<Nanos>,
    paused_total: Duration,
    kill_at: Option<Nanos>,
    counters: Vec<Arc<CounterSlot>>,
    /// Inputs a source refused, by reason (a handful of static names).
    refused: Vec<(&'static str, u64)>,
    /// How many times the runner restarted the work, and the stall that
    /// led to the latest restart (R8.15).
    restarts: u32,
    last_stall: Option<String>,
    /// What the guard's at-stall steps took at the latest stall (R8.14).
    report: Option<crate::vocab::at_stall::ReportSlot>,
    /// The judge of repetition its sources share (R5.12), once one asked.
    judge: Option<crate::state::window::SharedJudge>,
}

/// A task's slow state, kept by the scheduler beside the task's cell.
///
/// Three instants the verdicts read most (`anchor`, `seen_renewal`,
/// `silent_since`) live in the cell's spare room instead; [`Task`] joins
/// the two.
#[derive(Debug)]
pub(crate) struct TaskCtl {
    pub(crate) id: TaskId,
    pub(crate) name: Arc<str>,
    profile: Arc<Profile>,
    /// What most tasks never use, allocated on first use (R9.3).
    cold: Option<Box<Cold>>,
    start: Nanos,
    hb_anchor: Nanos,
    seen_heartbeat: Nanos,
    /// `Nanos::MAX`: no deadline.
    deadline_at: Nanos,
    /// `Nanos::MAX`: no outbound heartbeat.
    next_heartbeat: Nanos,
    strikes: u32,
    stall_count: u32,
    pub(crate) life: Life,
    startup_pending: bool,
    liveness_armed: bool,
    liveness_lost: bool,
    deadline_fired: bool,
    long_running_done: bool,
}

// R9.3: with its 128-byte cell and a few bytes of tables, a task stays
// under 256 bytes.
const _: () = assert!(std::mem::size_of::<TaskCtl>() <= 96);

fn some(t: Nanos) -> Option<Nanos> {
    (t != Nanos::MAX).then_some(t)
}

impl TaskCtl {
    pub(crate) fn new(
        id: TaskId,
        name: Arc<str>,
        profile: Arc<Profile>,
        pid: Option<u32>,
        start: Nanos,
    ) -> Self {
        let cold = pid.map(|pid| {
            Box::new(Cold {
                pid: Some(pid),
                ..Cold::default()
            })
        });
        TaskCtl {
            id,
            name,
            cold,
            start,
            hb_anchor: start,
            seen_heartbeat: Nanos::ZERO,
            deadline_at: profile.deadline.map_or(Nanos::MAX, |d| start + d),
            next_heartbeat: profile.heartbeat_interval.map_or(Nanos::MAX, |i| start + i),
            strikes: 0,
            stall_count: 0,
            life: Life::Working,
            startup_pending: true,
            liveness_armed: false,
            liveness_lost: false,
            deadline_fired: false,
            long_running_done: false,
            profile,
        }
    }

    /// Prepares the task's cell for its start.
    pub(crate) fn init_cell(&self, cell: &TaskCell) {
        let mut flags = STARTUP_PENDING;
        if self.profile.liveness.is_some() {
            flags |= LIVENESS_UNARMED;
        }
        cell.reset(self.profile.renewed_by, flags, self.start);
    }

    /// Adds a single-writer output counter to the task's totals.
    pub(crate) fn add_counter(&mut self, slot: Arc<CounterSlot>) {
        self.cold_mut().counters.push(slot);
    }

    /// The judge of repetition the task's sources share (R5.12), made on
    /// first use.
    pub(crate) fn judge(&mut self) -> crate::state::window::SharedJudge {
        Arc::clone(
            self.cold_mut()
                .judge
                .get_or_insert_with(crate::state::window::new_judge),
        )
    }

    /// What repeats, if something repeated at or after `since`. Takes the
    /// judge's lock under the scheduler's (the order `repeat` documents).
    pub(crate) fn repeating(
        &self,
        since: Nanos,
        now: Nanos,
    ) -> Option<crate::vocab::fingerprint::Repeating> {
        self.cold
            .as_deref()?
            .judge
            .as_ref()?
            .lock()
            .repeating(since, now)
    }

    fn cold_mut(&mut self) -> &mut Cold {
        self.cold.get_or_insert_with(Box::default)
    }

    fn probe(&self) -> Option<&Arc<dyn ChildProbe>> {
        self.cold.as_deref()?.children.as_ref()
    }

    fn in_flight(&self) -> &[CallRecord] {
        self.cold.as_deref().map_or(&[], |c| c.calls.in_flight())
    }

    fn counters(&self) -> &[Arc<CounterSlot>] {
        self.cold.as_deref().map_or(&[], |c| &c.counters)
    }

    fn pid(&self) -> Option<u32> {
        self.cold.as_deref()?.pid
    }

    fn paused_at(&self) -> Option<Nanos> {
        self.cold.as_deref()?.paused_at
    }

    fn paused_total(&self) -> Duration {
        self.cold
            .as_deref()
            .map_or(Duration::ZERO, |c| c.paused_total)
    }

    fn kill_at(&self) -> Option<Nanos> {
        self.cold.as_deref()?.kill_at
    }

    fn deadline_at(&self) -> Option<Nanos> {
        some(self.deadline_at)
    }

    fn next_heartbeat(&self) -> Option<Nanos> {
        some(self.next_heartbeat)
    }

    fn long_running_at(&self) -> Option<Nanos> {
        if self.long_running_done {
            return None;
        }
        self.profile.long_running_after.map(|d| self.start + d)
    }
}

/// A task's slow state joined with its cell: what verdicts and slow-path
/// operations work on, under the scheduler lock.
#[derive(Debug)]
pub(crate) struct Task<'a> {
    pub(crate) ctl: &'a mut TaskCtl,
    pub(crate) cell: &'a TaskCell,
}

impl Deref for Task<'_> {
    type Target = TaskCtl;
    fn deref(&self) -> &TaskCtl {
        self.ctl
    }
}

impl DerefMut for Task<'_> {
    fn deref_mut(&mut self) -> &mut TaskCtl {
        self.ctl
    }
}

impl Task<'_> {
    fn event(&self, out: &Out<'_>, e: Nanos, kind: EventKind) -> Event {
        Event {
            name: Arc::clone(&self.name),
            task: self.id,
            wall: out.clock.wall_at(e),
            at: e,
            elapsed: e.saturating_since(self.start),
            kind,
        }
    }

    fn emit(&self, out: &mut Out<'_>, e: Nanos, kind: EventKind) {
        let event = self.event(out, e, kind);
        out.items.push(Item::Event(Arc::new(event)).into());
    }

    /// Emits a `stalled` event; with a probe attached, its children are
    /// left for the fresh look the drainer takes outside the scheduler lock
    /// (R8.13, see [`crate::engine::dispatch`]).
    fn emit_stalled(&mut self, out: &mut Out<'_>, e: Nanos, kind: EventKind) {
        let event = self.event(out, e, kind);
        let slot = Arc::clone(self.cold_mut().report.get_or_insert_with(Default::default));
        out.items.push(Emitted::Stalled(
            Box::new(event),
            self.probe().map(Arc::clone),
            self.pid(),
            slot,
        ));
    }

    fn act(&self, out: &mut Out<'_>, kind: ActionKind) {
        out.items.push(Emitted::Ready(Item::Action(Arc::new(Action {
            task: self.id,
            name: Arc::clone(&self.name),
            pid: self.pid(),
            kind,
        }))));
    }

    pub(crate) fn started(&self, out: &mut Out<'_>) {
        self.emit(out, self.start, EventKind::Started { pid: self.pid() });
    }

    fn is_settling(&self) -> bool {
        matches!(self.life, Life::Cancelling | Life::Finished)
    }

    /// The error for any operation on this task once it has finished.
    fn finished_error(&self) -> GuardError {
        GuardError::Finished {
            task: self.name.to_string(),
            id: self.id,
        }
    }

    fn settling_error(&self) -> GuardError {
        match self.life {
            Life::Finished => self.finished_error(),
            _ => GuardError::Cancelling(self.name.to_string()),
        }
    }
}

/// The step a finished call leaves: `tool "bash" finished (success)`.
fn finished_step(call: &CallRecord, outcome: CallOutcome) -> String {
    format!("tool \"{}\" finished ({})", call.name, outcome_str(outcome))
}

fn outcome_str(o: CallOutcome) -> &'static str {
    match o {
        CallOutcome::Success => "success",
        CallOutcome::Error => "error",
        CallOutcome::Cancelled => "cancelled",
    }
}

/// Formats a duration for people, rounded to milliseconds.
pub(crate) fn fmt_dur(d: Duration) -> String {
    let ms = Duration::from_millis(u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
    humantime::format_duration(ms).to_string()
}
