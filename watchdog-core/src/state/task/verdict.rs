//! The verdicts (SPEC §2, §3), taken at an instant `e` passed in: absorb
//! what the cell published, `long_running`, kill if cancelling, deadline,
//! liveness, silence (`stalled`, strikes, cancel), outbound heartbeat; and
//! the next instant any of them can come due.

use std::time::Duration;

use super::{fmt_dur, Life, Out, Task, CANCEL_SIGNAL, KILL_SIGNAL};
use crate::state::cell::{LIVENESS_LOST, LIVENESS_UNARMED, STALLED, STARTUP_PENDING};
use crate::vocab::clock::Nanos;
use crate::vocab::event::{ActionKind, Budget, EventKind};
use crate::vocab::signal::SignalKind;

impl Task<'_> {
    /// Absorbs what the record path published since the last look: the end
    /// of startup, a recovery (R3.3), the arming of liveness (R2.5).
    pub(crate) fn sync(&mut self, e: Nanos, out: &mut Out<'_>) {
        if self.is_settling() {
            // R3.5: after a cancel no signal renews anything.
            return;
        }
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

    pub(super) fn silence_from(&self) -> Nanos {
        self.cell.seen_renewal.get().max(self.cell.anchor.get())
    }

    /// Takes every verdict due at instant `e`.
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
        if !self.deadline_fired && self.deadline_at().is_some_and(|t| t <= e) {
            self.deadline_fired = true;
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
        if self.life == Life::Working {
            self.cell.silent_since.set(from);
        }
        self.life = Life::Stalled;
        self.strikes += 1;
        self.stall_count += 1;
        self.cell.anchor.set(e);
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
