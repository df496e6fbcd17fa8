//! Status snapshots of one task (R4.1, R4.2): its state, budgets, last
//! step and call, signals, totals and children. Unknown is absent.

use std::time::Duration;

use super::{Life, Task};
use crate::vocab::clock::{Clock, Nanos};
use crate::vocab::event::Budget;
use crate::vocab::signal::SignalKind;
use crate::vocab::status::{BudgetStatus, LastCall, Phase, Stamp, TaskState, TaskStatus};

impl Task<'_> {
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
