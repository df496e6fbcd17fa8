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
//! Every inherent method of [`Task`] is in this file, in four parts: the
//! task's fields and the helpers that emit its events (first), the
//! runner's slow-path operations, the verdicts (the rules of §2 and §3
//! taken at an instant), and status snapshots (R4.2). The probes a stall
//! looks through ([`ChildProbe`], [`VerdictLook`]) are in `probe.rs`.

use std::ops::{Deref, DerefMut};
use std::sync::Arc;
use std::time::Duration;

use crate::state::calls::{CallRecord, Calls};
use crate::state::cell::{
    CounterSlot, TaskCell, LIVENESS_LOST, LIVENESS_UNARMED, STALLED, STARTUP_PENDING,
};
use crate::state::outbox::{Emitted, Item};
use crate::state::probe::{ChildProbe, VerdictLook};
use crate::vocab::clock::{Clock, Nanos};
use crate::vocab::error::{check as check_call, GuardError};
use crate::vocab::event::{Action, ActionKind, Budget, Event, EventKind, Outcome, TaskId};
use crate::vocab::profile::Profile;
use crate::vocab::signal::SignalKind;
use crate::vocab::status::{
    BackgroundTask, BudgetStatus, CallOutcome, LastCall, Phase, Stamp, TaskState, TaskStatus,
};

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

// ---------------------------------------------------------------------------
// Operations: the runner's slow-path operations on one task (tool calls, pause,
// resume, extend, trigger, cancel, finish, process reports), each under
// the scheduler lock and refused once the task is settling.

impl Task<'_> {
    /// R3.8: the last event of the task, exactly once.
    pub(crate) fn finish(
        &mut self,
        e: Nanos,
        outcome: Outcome,
        exit_code: Option<i32>,
        signal: Option<i32>,
        out: &mut Out<'_>,
    ) -> Result<(), GuardError> {
        if self.life == Life::Finished {
            return Err(self.finished_error());
        }
        self.sync(e, out);
        // Work the guard cancelled ends as cancelled, whatever status the
        // process left with: the exit code and signal still say how.
        let outcome = if self.life == Life::Cancelling {
            Outcome::Cancelled
        } else {
            outcome
        };
        self.life = Life::Finished;
        self.emit(
            out,
            e,
            EventKind::Finished {
                outcome,
                exit_code,
                signal,
            },
        );
        Ok(())
    }

    /// Records that the runner restarted the work after a stall (R8.15):
    /// a `restarted` event, and the count and stall for the snapshot.
    pub(crate) fn restarted(
        &mut self,
        e: Nanos,
        restart: u32,
        delay: Duration,
        last_stall: Option<String>,
        out: &mut Out<'_>,
    ) -> Result<(), GuardError> {
        if self.life == Life::Finished {
            return Err(self.finished_error());
        }
        let cold = self.cold_mut();
        cold.restarts = restart;
        cold.last_stall.clone_from(&last_stall);
        self.emit(
            out,
            e,
            EventKind::Restarted {
                restart,
                delay,
                last_stall,
            },
        );
        Ok(())
    }

    /// R8.5, R8.6: names processes the runner found after the command
    /// ended (`leaked` or `leftover`); refused once the task finished.
    pub(crate) fn report_processes(
        &mut self,
        e: Nanos,
        kind: EventKind,
        out: &mut Out<'_>,
    ) -> Result<(), GuardError> {
        if self.life == Life::Finished {
            return Err(self.finished_error());
        }
        self.emit(out, e, kind);
        Ok(())
    }

    /// R5.3: a call enters the task's one table. Refused only once the
    /// task finished: a cancelling task's calls still end, and a start
    /// during the grace period is the runner's to report, not an error.
    /// The id and name are checked again here because the table is shared
    /// by every door (R10.6); the recorder checked them before recording
    /// the signal only so garbage never renews a budget.
    pub(crate) fn tool_started(
        &mut self,
        e: Nanos,
        id: &str,
        name: &str,
        input: Option<u64>,
    ) -> Result<(), GuardError> {
        if self.life == Life::Finished {
            return Err(self.settling_error());
        }
        check_call(id, name).map_err(|problem| GuardError::BadCall {
            task: self.name.to_string(),
            problem,
        })?;
        match self.cold_mut().calls.start(e, id, name, input) {
            Ok(()) => Ok(()),
            Err(refusal) => Err(refusal.error(&self.name, id)),
        }
    }

    /// The name and input digest of call `id`, if it is in flight.
    pub(crate) fn call_digest(&self, id: &str) -> Option<(String, Option<u64>)> {
        self.cold.as_deref()?.calls.digest(id)
    }

    pub(crate) fn tool_finished(
        &mut self,
        e: Nanos,
        id: &str,
        outcome: CallOutcome,
    ) -> Result<(), GuardError> {
        if self.life == Life::Finished {
            return Err(self.settling_error());
        }
        let cold = self.cold_mut();
        let Some(call) = cold.calls.finish(e, id, outcome) else {
            return Err(self.not_in_flight(id));
        };
        cold.step = Some(finished_step(call, outcome));
        Ok(())
    }

    /// Finishes every call in flight (R5.3); returns how many.
    pub(crate) fn finish_calls(
        &mut self,
        e: Nanos,
        outcome: CallOutcome,
    ) -> Result<usize, GuardError> {
        if self.life == Life::Finished {
            return Err(self.settling_error());
        }
        let Some(cold) = self.cold.as_deref_mut() else {
            return Ok(0);
        };
        let (n, last) = cold.calls.finish_all(e, outcome);
        if let Some(call) = last {
            cold.step = Some(finished_step(call, outcome));
        }
        Ok(n)
    }

    /// The error for a finish of `id`, which is not in flight.
    pub(crate) fn not_in_flight(&self, id: &str) -> GuardError {
        if self.life == Life::Finished {
            return self.settling_error();
        }
        GuardError::UnknownCall {
            task: self.name.to_string(),
            call: id.to_owned(),
        }
    }

    pub(crate) fn is_call_in_flight(&self, id: &str) -> bool {
        self.cold.as_deref().is_some_and(|c| c.calls.contains(id))
    }

    pub(crate) fn calls_in_flight(&self) -> usize {
        self.in_flight().len()
    }

    pub(crate) fn pause(&mut self, e: Nanos) -> Result<(), GuardError> {
        if self.is_settling() {
            return Err(self.settling_error());
        }
        if self.paused_at().is_none() {
            self.cold_mut().paused_at = Some(e);
        }
        Ok(())
    }

    /// R2.8: every budget resumes with the silence it had already used.
    pub(crate) fn resume(&mut self, e: Nanos) -> Result<(), GuardError> {
        if self.is_settling() {
            return Err(self.settling_error());
        }
        let Some(p) = self.cold.as_deref_mut().and_then(|c| c.paused_at.take()) else {
            return Ok(());
        };
        // Every instant a budget is measured from moves forward by the
        // pause, so the silence used before it still counts and the time
        // paused does not. A renewal recorded during the pause (`from`
        // past `p`) starts the silence afresh at the resume instead.
        let shift = e.saturating_since(p);
        self.cold_mut().paused_total += shift;
        let shifted = |from: Nanos| if from <= p { from + shift } else { e };
        self.cell.anchor.set(shifted(self.silence_from()));
        self.hb_anchor = shifted(self.seen_heartbeat.max(self.hb_anchor));
        if self.cell.silent_since.get() <= p {
            self.cell
                .silent_since
                .set(self.cell.silent_since.get() + shift);
        }
        if let Some(t) = self.deadline_at() {
            self.deadline_at = t + shift;
        }
        Ok(())
    }

    /// R2.9: move the deadline to at least `e + by`, within `max-deadline`.
    /// A refusal is an `extension_refused` event as well as an error, so
    /// the user learns why the deadline did not move (R8.7).
    pub(crate) fn extend(
        &mut self,
        e: Nanos,
        by: Duration,
        out: &mut Out<'_>,
    ) -> Result<Duration, GuardError> {
        if self.is_settling() {
            return Err(self.settling_error());
        }
        let Some(current) = self.deadline_at() else {
            return Err(GuardError::NoDeadline(self.name.to_string()));
        };
        // While paused the deadline is frozen at the pause; measuring the
        // extension from there keeps it in active time (R2.8).
        let wanted = current.max(self.paused_at().unwrap_or(e) + by);
        let total = wanted
            .saturating_since(self.start)
            .saturating_sub(self.paused_total());
        // R8.12: past 100 years is refused, never saturated or overflowed,
        // and said like any refused extension (R8.7).
        if crate::vocab::duration::check_duration(by).is_err() {
            self.emit(
                out,
                e,
                EventKind::ExtensionRefused {
                    requested: total,
                    allowed: crate::vocab::duration::MAX_DURATION,
                },
            );
            return Err(GuardError::ExtensionTooLong {
                task: self.name.to_string(),
                requested: by,
            });
        }
        if let Some(max) = self.profile.max_deadline {
            if total > max {
                self.emit(
                    out,
                    e,
                    EventKind::ExtensionRefused {
                        requested: total,
                        allowed: max,
                    },
                );
                return Err(GuardError::ExtensionRefused {
                    task: self.name.to_string(),
                    requested: total,
                    max,
                });
            }
        }
        // An extension never shortens the deadline; one past a deadline
        // that already fired arms it again (R2.9).
        if wanted > current {
            self.deadline_at = wanted;
            self.deadline_fired = false;
        }
        Ok(total)
    }

    /// R2.10: the task's own fault is a cancel with its reason.
    pub(crate) fn trigger(
        &mut self,
        e: Nanos,
        reason: &str,
        out: &mut Out<'_>,
    ) -> Result<(), GuardError> {
        if self.is_settling() {
            return Err(self.settling_error());
        }
        self.emit(
            out,
            e,
            EventKind::Triggered {
                reason: reason.to_owned(),
            },
        );
        self.cancel(e, format!("triggered: {reason}"), out);
        Ok(())
    }

    pub(crate) fn cancel_by_request(
        &mut self,
        e: Nanos,
        reason: &str,
        out: &mut Out<'_>,
    ) -> Result<(), GuardError> {
        if self.is_settling() {
            return Err(self.settling_error());
        }
        self.cancel(e, reason.to_owned(), out);
        Ok(())
    }

    /// `READY=1`: startup is over; the idle budget runs from now.
    pub(crate) fn ready(&mut self, e: Nanos) {
        if self.startup_pending && !self.is_settling() {
            self.startup_pending = false;
            // Renewals no longer need the slow path to end startup.
            self.cell.set_flag(STARTUP_PENDING, false);
            // The idle budget runs from `ready`, not from the start: the
            // anchor moves up, never back.
            self.cell.anchor.set(self.cell.anchor.get().max(e));
        }
    }

    pub(crate) fn set_step(&mut self, step: String) {
        self.cold_mut().step = Some(step);
    }

    pub(crate) fn set_pid(&mut self, pid: u32) {
        self.cold_mut().pid = Some(pid);
    }

    pub(crate) fn set_children(&mut self, probe: Arc<dyn ChildProbe>) {
        self.cold_mut().children = Some(probe);
    }

    pub(crate) fn set_look(&mut self, look: Arc<dyn VerdictLook>) {
        self.cold_mut().look = Some(look);
    }

    /// The look to take before instant `due` is judged, once per instant
    /// (R8.16): `None` when the task has none or it was taken already.
    pub(crate) fn look_for(&mut self, due: Nanos) -> Option<Arc<dyn VerdictLook>> {
        let cold = self.ctl.cold.as_deref_mut()?;
        let look = cold.look.as_ref()?;
        // The driver and `with_task` both ask before judging the same due
        // instant, and `with_task` starts over after a look: remembering
        // the instant keeps it to one look, so it cannot loop.
        if cold.looked_for == Some(due) {
            return None;
        }
        cold.looked_for = Some(due);
        Some(Arc::clone(look))
    }

    pub(crate) fn count_refused(&mut self, reason: &'static str) {
        let refused = &mut self.cold_mut().refused;
        match refused.iter_mut().find(|(r, _)| *r == reason) {
            Some((_, n)) => *n = n.saturating_add(1),
            None => refused.push((reason, 1)),
        }
    }

    pub(crate) fn set_background(&mut self, tasks: Vec<BackgroundTask>, unnamed: bool) {
        let cold = self.cold_mut();
        cold.background = tasks;
        cold.unnamed_background = unnamed;
    }
}

// ---------------------------------------------------------------------------
// Verdicts: the verdicts (SPEC §2, §3), taken at an instant `e` passed in: absorb
// what the cell published, `long_running`, kill if cancelling, deadline,
// liveness, silence (`stalled`, strikes, cancel), outbound heartbeat; and
// the next instant any of them can come due.

impl Task<'_> {
    /// Absorbs what the record path published since the last look: the end
    /// of startup, a recovery (R3.3), the arming of liveness (R2.5).
    pub(crate) fn sync(&mut self, e: Nanos, out: &mut Out<'_>) {
        if self.is_settling() {
            // R3.5: after a cancel no signal renews anything.
            return;
        }
        // `seen_renewal` is the latest renewal already absorbed; one past it
        // is progress the scheduler has not acted on yet. Recorders never
        // tell the scheduler about a plain renewal (R9.1): it is found here,
        // at the next verdict or operation, which is early enough because
        // the silence is measured from it (`silence_from`).
        let lr = self.cell.last_renewal();
        if lr > self.cell.seen_renewal.get() {
            self.cell.seen_renewal.set(lr);
            if self.startup_pending {
                self.startup_pending = false;
                self.cell.set_flag(STARTUP_PENDING, false);
            }
            if self.life == Life::Stalled {
                self.life = Life::Working;
                self.strikes = 0;
                self.cell.set_flag(STALLED, false);
                // Active silence: time spent paused is not silence (R2.8).
                let upto = self.paused_at().map_or(lr, |p| lr.min(p));
                let silent = upto.saturating_since(self.cell.silent_since.get());
                self.emit(out, e, EventKind::Recovered { silent });
            }
        }
        if self.profile.liveness.is_some() {
            if let Some(hb) = self.cell.last(SignalKind::Heartbeat) {
                if hb > self.seen_heartbeat {
                    self.seen_heartbeat = hb;
                    self.liveness_armed = true;
                    self.liveness_lost = false;
                    self.cell.set_flag(LIVENESS_UNARMED | LIVENESS_LOST, false);
                }
            }
        }
    }

    /// The silence budget that applies now, and its name (R2.1–R2.3).
    /// Background tasks it launched still run (R5.6): the task is
    /// `monitoring`, and its silence is their work's (R4.3).
    pub(super) fn has_background(&self) -> bool {
        self.cold
            .as_deref()
            .is_some_and(|c| !c.background.is_empty() || c.unnamed_background)
    }

    /// The budget for the silence now: execution while a tool call is in
    /// flight (R2.2) or a background task it launched runs (R4.3, R5.6: a
    /// headless agent waits for its background shell in silence).
    pub(super) fn silence_budget(&self) -> Option<(Budget, Duration)> {
        if !self.in_flight().is_empty() || self.has_background() {
            self.profile
                .execution_budget()
                .map(|d| (Budget::Execution, d))
        } else if self.startup_pending {
            self.profile.startup_budget().map(|d| (Budget::Startup, d))
        } else {
            self.profile.idle_budget().map(|d| (Budget::Idle, d))
        }
    }

    /// Where the current silence is measured from: the latest renewal
    /// absorbed, or the anchor when that is later (the start, the last
    /// stall verdict so each strike gets a whole budget, R3.2, or a resume
    /// shifted back by the silence already used, R2.8).
    pub(super) fn silence_from(&self) -> Nanos {
        self.cell.seen_renewal.get().max(self.cell.anchor.get())
    }

    /// Takes every verdict due at instant `e`.
    ///
    /// The order is the rules' order: absorb what the cell published first
    /// (a renewal just before `e` is no silence, R3.10); then what holds
    /// whatever the phase (`long_running`); a cancelling task only waits
    /// for its kill; a paused task's budgets do not run (R2.8); and the
    /// outbound heartbeat comes last, so it reports the state the verdicts
    /// left.
    pub(crate) fn evaluate(&mut self, e: Nanos, out: &mut Out<'_>) {
        self.sync(e, out);
        if self.life == Life::Finished {
            return;
        }
        if self.long_running_at().is_some_and(|t| t <= e) {
            self.long_running_done = true;
            self.emit(out, e, EventKind::LongRunning);
        }
        if self.life == Life::Cancelling {
            if self.kill_at().is_some_and(|t| t <= e) {
                self.kill(e, out);
            }
            return;
        }
        if self.paused_at().is_none() && self.judge_budgets(e, out) {
            return;
        }
        if let (Some(t), Some(iv)) = (self.next_heartbeat(), self.profile.heartbeat_interval) {
            if t <= e {
                self.next_heartbeat = t + iv;
                // R3.7: only when nothing renewed during the whole interval.
                if self.cell.last_renewal() <= t.saturating_sub(iv) {
                    let kind = self.heartbeat_event(e);
                    self.emit(out, e, kind);
                }
            }
        }
    }

    /// Deadline, liveness and silence verdicts; true when the task is now
    /// cancelling.
    pub(super) fn judge_budgets(&mut self, e: Nanos, out: &mut Out<'_>) -> bool {
        // The deadline fires once (it does not renew, R2.4); with
        // `notify-only` the task goes on being judged on its other budgets.
        if !self.deadline_fired && self.deadline_at().is_some_and(|t| t <= e) {
            self.deadline_fired = true;
            // Reported as the budget the user set: the instant was pushed
            // back by every pause, so take the pauses off again.
            let d = self.deadline_at().map_or(Duration::ZERO, |t| {
                t.saturating_since(self.start)
                    .saturating_sub(self.paused_total())
            });
            let reason = format!("deadline of {} exceeded", fmt_dur(d));
            self.emit(
                out,
                e,
                EventKind::DeadlineExceeded {
                    reason: reason.clone(),
                },
            );
            if !self.profile.notify_only {
                self.cancel(e, reason, out);
                return true;
            }
        }
        // Liveness (R2.5) counts only once a first heartbeat armed it, and
        // is lost once per silence: the flag sends the next heartbeat down
        // the slow path, which re-arms it.
        if let Some(limit) = self.profile.liveness {
            let from = self.seen_heartbeat.max(self.hb_anchor);
            if self.liveness_armed && !self.liveness_lost && e.saturating_since(from) >= limit {
                self.liveness_lost = true;
                self.cell.set_flag(LIVENESS_LOST, true);
                out.raised = true;
                let reason = format!(
                    "no heartbeat for {} (liveness {})",
                    fmt_dur(e.saturating_since(from)),
                    fmt_dur(limit)
                );
                self.emit(
                    out,
                    e,
                    EventKind::LivenessLost {
                        reason: reason.clone(),
                    },
                );
                if !self.profile.notify_only {
                    self.cancel(e, reason, out);
                    return true;
                }
                // A heartbeat that raced the flag re-arms at once.
                self.sync(e, out);
            }
        }
        if let Some((budget, limit)) = self.silence_budget() {
            let from = self.silence_from();
            if e.saturating_since(from) >= limit {
                return self.stall(e, budget, limit, from, out);
            }
        }
        false
    }

    /// R3.1, R3.2: a strike; re-arm from the verdict, cancel at the last one.
    pub(super) fn stall(
        &mut self,
        e: Nanos,
        budget: Budget,
        limit: Duration,
        from: Nanos,
        out: &mut Out<'_>,
    ) -> bool {
        // A second strike continues the same silence: `silent_since` stays
        // where the first one found it, so every stall event reports the
        // whole silence, not one budget of it.
        if self.life == Life::Working {
            self.cell.silent_since.set(from);
        }
        self.life = Life::Stalled;
        self.strikes += 1;
        self.stall_count += 1;
        // The next strike is a whole budget after this verdict (R3.2).
        self.cell.anchor.set(e);
        // Recorders now take the slow path on their next renewal, so a
        // recovery is reported at once (R3.3); the caller owes the heavy
        // half of the handshake because `out.raised` is set.
        self.cell.set_flag(STALLED, true);
        out.raised = true;
        let silent = e.saturating_since(self.cell.silent_since.get());
        let terminate_after = self.profile.terminate_after;
        let strike = self.strikes;
        // The children are a fresh look at the tree (R8.13), taken when
        // the event leaves the outbox, outside the scheduler lock: reading
        // `/proc` here would hold every other task's verdicts and calls.
        self.emit_stalled(
            out,
            e,
            EventKind::Stalled {
                budget,
                strike,
                terminate_after,
                silent,
                last_step: self.last_step(),
                children: None,
                stacks: Vec::new(),
                on_stall: None,
                repeating: self.repeating(from, e),
            },
        );
        if terminate_after != 0 && strike >= terminate_after {
            // Before the first signal with no startup budget set, the limit
            // is the idle budget the user chose: name that one.
            let reason = if budget == Budget::Startup && self.profile.startup.is_none() {
                format!(
                    "idle budget of {} exceeded before any output: silent for {} (strike {strike} of {terminate_after})",
                    fmt_dur(limit),
                    fmt_dur(silent)
                )
            } else {
                format!(
                    "{budget} budget of {} exceeded: silent for {} (strike {strike} of {terminate_after})",
                    fmt_dur(limit),
                    fmt_dur(silent)
                )
            };
            self.cancel(e, reason, out);
            return true;
        }
        // A renewal already visible is a recovery now; one whose store
        // raced the flag is caught after the pass's heavy barrier
        // (`Out::raised`), still not one budget later.
        self.sync(e, out);
        #[cfg(test)]
        crate::state::race::after_stall(self.cell);
        false
    }

    /// R3.5: cancelling, the cancel action, and the kill timer.
    pub(crate) fn cancel(&mut self, e: Nanos, reason: String, out: &mut Out<'_>) {
        self.life = Life::Cancelling;
        // Nothing renews a cancelling task (R3.5): no signal needs the
        // slow path any more, so recorders stay on the lock-free store.
        self.cell.set_flag(STALLED | STARTUP_PENDING, false);
        self.emit(
            out,
            e,
            EventKind::Cancelling {
                reason: reason.clone(),
                signal: CANCEL_SIGNAL,
            },
        );
        self.act(out, ActionKind::Cancel { reason });
        if self.profile.grace_period.is_zero() {
            self.kill(e, out);
        } else {
            self.cold_mut().kill_at = Some(e + self.profile.grace_period);
        }
    }

    pub(super) fn kill(&mut self, e: Nanos, out: &mut Out<'_>) {
        if let Some(cold) = self.cold.as_deref_mut() {
            cold.kill_at = None;
        }
        self.emit(
            out,
            e,
            EventKind::Killed {
                signal: KILL_SIGNAL,
            },
        );
        self.act(out, ActionKind::Kill);
    }

    /// The next instant anything about this task can come due.
    ///
    /// It mirrors [`Task::evaluate`]: each rule that `evaluate` would take
    /// contributes its instant, so the driver wakes for exactly what can
    /// fire (R9.3) and a timer never fires for nothing. A renewal recorded
    /// since does not move it: the verdict at this instant absorbs it and
    /// re-arms later (R3.10).
    pub(crate) fn next_due(&self) -> Option<Nanos> {
        let min = |a: Option<Nanos>, b: Option<Nanos>| match (a, b) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        let mut due = self.long_running_at();
        match self.life {
            Life::Finished => return None,
            Life::Cancelling => return min(due, self.kill_at()),
            Life::Working | Life::Stalled => {}
        }
        due = min(due, self.next_heartbeat());
        if self.paused_at().is_none() {
            if !self.deadline_fired {
                due = min(due, self.deadline_at());
            }
            if let Some(limit) = self.profile.liveness {
                if self.liveness_armed && !self.liveness_lost {
                    due = min(due, Some(self.seen_heartbeat.max(self.hb_anchor) + limit));
                }
            }
            if let Some((_, limit)) = self.silence_budget() {
                due = min(due, Some(self.silence_from() + limit));
            }
        }
        due
    }

    /// The outbound heartbeat (R3.7): what a sink needs to tell a quiet
    /// task from a stuck one, measured as the verdicts measure (paused time
    /// is not silence, the deadline net of pauses).
    pub(super) fn heartbeat_event(&self, e: Nanos) -> EventKind {
        let active = self.paused_at().unwrap_or(e);
        let idle_remaining = self
            .silence_budget()
            .map(|(_, limit)| limit.saturating_sub(active.saturating_since(self.silence_from())));
        let (total_bytes, total_lines) = self.cell.totals(self.counters());
        EventKind::Heartbeat {
            last_output_age: self
                .cell
                .last(SignalKind::Output)
                .map(|t| e.saturating_since(t)),
            total_lines,
            total_bytes,
            idle_remaining,
            deadline: self.deadline_at().map(|t| {
                t.saturating_since(self.start)
                    .saturating_sub(self.paused_total())
            }),
        }
    }
}

// ---------------------------------------------------------------------------
// Snapshots: status snapshots of one task (R4.1, R4.2): its state, budgets, last
// step and call, signals, totals and children. Unknown is absent.

impl Task<'_> {
    /// What the task was last doing, for a stall event and a snapshot
    /// (R4.1): a call still in flight says more than the step the runner
    /// set, and either says more than the last signal's kind.
    pub(crate) fn last_step(&self) -> Option<String> {
        if let Some(call) = self.in_flight().last() {
            return Some(format!("tool \"{}\" still running", call.name));
        }
        if let Some(step) = self.cold.as_deref().and_then(|c| c.step.as_ref()) {
            return Some(step.clone());
        }
        SignalKind::ALL
            .into_iter()
            .filter_map(|k| self.cell.last(k).map(|t| (t, k)))
            .max()
            .map(|(_, k)| format!("last signal: {k}"))
    }

    /// The last call seen, in flight or finished, with wall-clock stamps
    /// worked out from the monotonic ones at `now` (R4.1).
    pub(crate) fn last_call(&self, now: Nanos, clock: &dyn Clock) -> Option<LastCall> {
        let stamp = |t: Nanos| Stamp {
            at: clock.wall_at(t),
            age: now.saturating_since(t),
        };
        let call = self.cold.as_deref()?.calls.last();
        call.map(|c| LastCall {
            id: c.id.clone(),
            name: c.name.clone(),
            started: stamp(c.started),
            finished: c.finished.map(|(t, _)| stamp(t)),
            outcome: c.finished.map(|(_, o)| o),
        })
    }

    /// A snapshot of the task at `now` (R4.2), taken under the scheduler
    /// lock, so it reads the cell and the slow state at one instant. It
    /// reads the cell's latest renewal directly rather than what the
    /// scheduler absorbed, so a budget shows renewed the moment a signal
    /// lands, not at the next verdict; and it measures in active time (a
    /// paused task's budgets stand still, R2.8).
    pub(crate) fn status(&self, now: Nanos, clock: &dyn Clock) -> TaskStatus {
        let (total_bytes, total_lines) = self.cell.totals(self.counters());
        let active = self.paused_at().unwrap_or(now);
        let state = match self.life {
            Life::Working if self.has_background() => TaskState::Monitoring,
            Life::Working => TaskState::Working,
            Life::Stalled => TaskState::Stalled,
            Life::Cancelling => TaskState::Cancelling,
            Life::Finished => TaskState::Finished,
        };
        let current = self.silence_budget().map(|(b, _)| b);
        let mut budgets = Vec::new();
        let from = self.cell.last_renewal().max(self.cell.anchor.get());
        let silent = active.saturating_since(from);
        let mut silence = |b: Budget, limit: Option<Duration>| {
            if let Some(limit) = limit {
                budgets.push(BudgetStatus {
                    budget: b.as_str(),
                    limit,
                    remaining: limit.saturating_sub(silent),
                    active: current == Some(b),
                });
            }
        };
        if self.startup_pending {
            silence(Budget::Startup, self.profile.startup_budget());
        }
        silence(Budget::Idle, self.profile.idle_budget());
        if self.profile.execution.is_some() || !self.in_flight().is_empty() {
            silence(Budget::Execution, self.profile.execution_budget());
        }
        // The deadline as extended so far (never below the profile's), in
        // active time.
        if let (Some(limit), Some(t)) = (self.profile.deadline, self.deadline_at()) {
            let total = t
                .saturating_since(self.start)
                .saturating_sub(self.paused_total());
            let used = active
                .saturating_since(self.start)
                .saturating_sub(self.paused_total());
            budgets.push(BudgetStatus {
                budget: "deadline",
                limit: total.max(limit),
                remaining: total.saturating_sub(used),
                active: false,
            });
        }
        if let (Some(limit), true) = (self.profile.liveness, self.liveness_armed) {
            let from = self
                .cell
                .last(SignalKind::Heartbeat)
                .unwrap_or(Nanos::ZERO)
                .max(self.hb_anchor);
            budgets.push(BudgetStatus {
                budget: "liveness",
                limit,
                remaining: limit.saturating_sub(active.saturating_since(from)),
                active: false,
            });
        }
        let last_signal = SignalKind::ALL
            .into_iter()
            .filter_map(|k| {
                self.cell.last(k).map(|t| {
                    (
                        k.as_str(),
                        Stamp {
                            at: clock.wall_at(t),
                            age: now.saturating_since(t),
                        },
                    )
                })
            })
            .collect();
        TaskStatus {
            name: self.name.to_string(),
            id: self.id,
            state,
            paused: self.paused_at().is_some(),
            started_at: clock.wall_at(self.start),
            elapsed: now.saturating_since(self.start),
            phase: if self.in_flight().is_empty() {
                Phase::Idle
            } else {
                Phase::Executing {
                    tools: self.in_flight().len(),
                }
            },
            last_step: self.last_step(),
            last_call: self.last_call(now, clock),
            last_signal,
            last_output_age: self
                .cell
                .last(SignalKind::Output)
                .map(|t| now.saturating_since(t)),
            total_bytes,
            total_lines,
            strikes: self.strikes,
            stall_count: self.stall_count,
            restarts: self.cold.as_deref().map_or(0, |c| c.restarts),
            last_stall: self.cold.as_deref().and_then(|c| c.last_stall.clone()),
            stall_report: self
                .cold
                .as_deref()
                .and_then(|c| c.report.as_ref())
                .and_then(|r| r.lock().clone()),
            budgets,
            children: if self.is_settling() {
                None
            } else {
                self.probe().and_then(|p| p.children())
            },
            background: self
                .cold
                .as_deref()
                .map_or_else(Vec::new, |c| c.background.clone()),
            unnamed_background: self.cold.as_deref().is_some_and(|c| c.unnamed_background),
            refused: self
                .cold
                .as_deref()
                .map(|c| c.refused.iter().copied().collect())
                .unwrap_or_default(),
            repeating: self.repeating(self.cell.last_renewal(), now),
        }
    }
}
