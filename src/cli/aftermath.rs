//! What happens between the command's exit and stallwarden's (R8.5, R8.6):
//! a bounded wait for its output pipes, the processes still holding them
//! named as `leaked`, then what is left of its tree stopped or kept and
//! named as `leftover`. Nothing here waits without a bound.
//!
//! The budgets stopped judging when the command exited (R8.8): these waits
//! have their own timers and never change the command's status. A signal
//! sent to stallwarden meanwhile ends the wait at once (R8.9): what is left
//! is then handled per `on-leftover` without a grace period.

use std::collections::HashSet;
use std::time::{Duration, Instant};

use nix::sys::signal::Signal;
use stallwarden::{LeftoverAction, ProcessName, TaskHandle};
use tokio::sync::mpsc::UnboundedReceiver;

use super::console::Console;
use super::reaper::{self, Proc};
use super::signals::{self, Incoming};
use super::{leaks, reaper::our_tree};
use stallwarden::config::OnLeftover;

/// How long SIGKILL gets to be confirmed, as the process sink's default.
const CONFIRM: Duration = Duration::from_secs(2);
/// How long the pumps get to copy the last bytes once the holders were
/// stopped.
const LAST_BYTES: Duration = Duration::from_millis(500);
/// The first and the longest pause between two looks at what is left.
const FIRST_LOOK: Duration = Duration::from_millis(20);
const LONGEST_LOOK: Duration = Duration::from_millis(250);

/// What the run loop hands over once the command's status is in.
pub(crate) struct Aftermath<'a> {
    /// One message per pump that is done with its pipe.
    pub(crate) done: UnboundedReceiver<()>,
    /// How many pumps run.
    pub(crate) pumps: usize,
    /// The inodes of the command's stdout and stderr pipes.
    pub(crate) inodes: HashSet<u64>,
    /// `--leak-timeout`.
    pub(crate) leak_timeout: Duration,
    /// `--on-leftover`.
    pub(crate) on_leftover: OnLeftover,
    /// The command's process group (its pid).
    pub(crate) pgid: u32,
    /// The grace period between SIGTERM and SIGKILL.
    pub(crate) grace: Duration,
    /// stallwarden cancelled the command: its SIGTERM also went to what
    /// escaped, which gets the grace period to act on it.
    pub(crate) stopped: bool,
    pub(crate) console: &'a Console,
    pub(crate) task: &'a TaskHandle,
    /// A signal ended the waits (R8.9).
    pub(crate) interrupted: bool,
}

impl Aftermath<'_> {
    /// Runs the steps in order; returns once nothing is left to wait for.
    /// `signals` end any wait at once.
    pub(crate) async fn settle(mut self, signals: &mut Incoming) {
        let pumps = self.pumps;
        let mut open = pumps - self.drain(pumps, self.leak_timeout, signals, true).await;
        if open > 0 {
            let holders = leaks::holders(&self.inodes);
            if holders.is_empty() {
                // Nothing holds them (a signal cut the wait short, R8.9):
                // what is in them is the command's last output, copied
                // whole (R8.10).
                open -= self.drain(open, LAST_BYTES, signals, false).await;
            } else {
                let _ = self.task.leaked(holders);
            }
        }
        if self.stopped {
            // The cancel's SIGTERM reached them too (R8.6): what obeys it
            // is not a leftover.
            self.wait_gone(self.grace, signals).await;
        }
        let left = reaper::leftovers();
        if left.is_empty() {
            // Without a subreaper (not Linux) the group may still hold some.
            let grace = if self.interrupted {
                Duration::ZERO
            } else {
                self.grace
            };
            reaper::stop_group(self.pgid, grace, CONFIRM);
            return;
        }
        match self.on_leftover {
            OnLeftover::Keep => {
                let _ = self.task.leftover(LeftoverAction::Kept, left);
            }
            OnLeftover::Kill => {
                let _ = self.task.leftover(LeftoverAction::Killed, left);
                let still = self.stop_all(signals).await;
                reaper::stop_group(self.pgid, Duration::ZERO, Duration::ZERO);
                if !still.is_empty() {
                    self.console.line(&format!(
                        "stallwarden: cleanup unconfirmed: {} still running",
                        leaks::names(&still)
                    ));
                }
                if open > 0 {
                    open -= self.drain(open, LAST_BYTES, signals, false).await;
                }
            }
        }
        if open > 0 {
            tracing::info!(open, "not waiting for output pipes still held open");
        }
    }

    /// Waits up to `bound` for `n` pumps to finish; returns how many did.
    /// An `interruptible` wait ends at the first signal.
    async fn drain(
        &mut self,
        n: usize,
        bound: Duration,
        signals: &mut Incoming,
        interruptible: bool,
    ) -> usize {
        let timer = tokio::time::sleep(bound);
        tokio::pin!(timer);
        let mut finished = 0;
        while finished < n && !(interruptible && self.interrupted) {
            tokio::select! {
                got = self.done.recv() => match got {
                    Some(()) => finished += 1,
                    None => break,
                },
                () = &mut timer => break,
                sig = signals.recv(), if interruptible => self.interrupt(sig),
            }
        }
        finished
    }

    /// Stops every live process below stallwarden: SIGTERM (and SIGCONT),
    /// the grace period for them to go (ended by a signal), then SIGKILL
    /// and up to [`CONFIRM`] more. Returns what is still alive.
    async fn stop_all(&mut self, signals: &mut Incoming) -> Vec<ProcessName> {
        let left = live(our_tree(None));
        if left.is_empty() {
            reaper::reap_orphans(None);
            return Vec::new();
        }
        reaper::signal_all(&left, Signal::SIGTERM);
        let left = self.wait_gone(self.grace, signals).await;
        if left.is_empty() {
            return Vec::new();
        }
        reaper::signal_all(&left, Signal::SIGKILL);
        reaper::wait_gone(CONFIRM)
            .into_iter()
            .map(|p| ProcessName {
                pid: p.pid,
                name: p.name,
            })
            .collect()
    }

    /// Waits up to `bound` (ended by a signal) for stallwarden to have no
    /// live descendant, reaping meanwhile; returns what is still alive.
    async fn wait_gone(&mut self, bound: Duration, signals: &mut Incoming) -> Vec<Proc> {
        let until = Instant::now().checked_add(bound);
        let mut step = FIRST_LOOK;
        loop {
            let left = reaper::wait_gone(Duration::ZERO);
            let now = Instant::now();
            let remaining = until.map_or(LONGEST_LOOK, |u| u.saturating_duration_since(now));
            if left.is_empty() || self.interrupted || remaining.is_zero() {
                return left;
            }
            tokio::select! {
                () = tokio::time::sleep(step.min(remaining)) => {}
                sig = signals.recv() => self.interrupt(sig),
            }
            step = (step * 2).min(LONGEST_LOOK);
        }
    }

    /// Ends every wait from now on, saying which signal did (once).
    pub(crate) fn interrupt(&mut self, sig: i32) {
        if !self.interrupted {
            self.interrupted = true;
            self.console.line(&format!(
                "stallwarden: {} after the command exited: not waiting any longer",
                signals::name(sig)
            ));
        }
    }
}

fn live(procs: Vec<Proc>) -> Vec<Proc> {
    procs.into_iter().filter(|p| !p.zombie).collect()
}
