//! The runner's slow-path operations on one task (tool calls, pause,
//! resume, extend, trigger, cancel, finish, process reports), each under
//! the scheduler lock and refused once the task is settling.

use std::sync::Arc;
use std::time::Duration;

use super::probe::{ChildProbe, VerdictLook};
use super::{finished_step, Life, Out, Task};
use crate::state::cell::STARTUP_PENDING;
use crate::vocab::clock::Nanos;
use crate::vocab::error::check as check_call;
use crate::vocab::error::GuardError;
use crate::vocab::event::{EventKind, Outcome};
use crate::vocab::status::{BackgroundTask, CallOutcome};

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

    /// R8.5, R8.6: names processes the runner found after the command
    /// ended (`leaked` or `leftover`); refused once the task finished.
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
            self.cell.set_flag(STARTUP_PENDING, false);
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
