//! What happens between the command's exit and stallguard's (R8.5, R8.6):
//! a bounded wait for its output pipes, the processes still holding them
//! named as `leaked`, then what is left of its tree stopped or kept and
//! named as `leftover`. Nothing here waits without a bound.

use std::collections::HashSet;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use stallguard::{LeftoverAction, TaskHandle};

use super::console::Console;
use super::{leaks, reaper};
use stallguard::config::OnLeftover;

/// How long SIGKILL gets to be confirmed, as the process sink's default.
const CONFIRM: Duration = Duration::from_secs(2);
/// How long the pumps get to copy the last bytes once the holders were
/// stopped.
const LAST_BYTES: Duration = Duration::from_millis(500);

/// What the run loop hands over once the command's status is in.
pub(crate) struct Aftermath<'a> {
    /// One message per pump that reached end of file.
    pub(crate) done: mpsc::Receiver<()>,
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
    /// stallguard cancelled the command: its SIGTERM also went to what
    /// escaped, which gets the grace period to act on it.
    pub(crate) stopped: bool,
    pub(crate) console: &'a Console,
    pub(crate) task: &'a TaskHandle,
}

impl Aftermath<'_> {
    /// Runs the steps in order; returns once nothing is left to wait for.
    pub(crate) fn settle(self) {
        let mut open = self.pumps - drain(&self.done, self.pumps, self.leak_timeout);
        if open > 0 {
            let holders = leaks::holders(&self.inodes);
            if !holders.is_empty() {
                let _ = self.task.leaked(holders);
            }
        }
        if self.stopped {
            // The cancel's SIGTERM reached them too (R8.6): what obeys it
            // is not a leftover.
            reaper::wait_gone(self.grace);
        }
        let left = reaper::leftovers();
        if left.is_empty() {
            // Without a subreaper (not Linux) the group may still hold some.
            reaper::stop_group(self.pgid, self.grace, CONFIRM);
            return;
        }
        match self.on_leftover {
            OnLeftover::Keep => {
                let _ = self.task.leftover(LeftoverAction::Kept, left);
            }
            OnLeftover::Kill => {
                let _ = self.task.leftover(LeftoverAction::Killed, left);
                let still = reaper::stop_all(self.grace, CONFIRM);
                reaper::stop_group(self.pgid, Duration::ZERO, Duration::ZERO);
                if !still.is_empty() {
                    self.console.line(&format!(
                        "stallguard: cleanup unconfirmed: {} still running",
                        leaks::names(&still)
                    ));
                }
                if open > 0 {
                    open -= drain(&self.done, open, LAST_BYTES);
                }
            }
        }
        if open > 0 {
            tracing::info!(open, "not waiting for output pipes still held open");
        }
    }
}

/// Waits up to `bound` for `n` pumps to finish; returns how many did.
fn drain(done: &mpsc::Receiver<()>, n: usize, bound: Duration) -> usize {
    let until = stallguard::instant_after(bound);
    let mut finished = 0;
    while finished < n {
        let left = until.saturating_duration_since(Instant::now());
        if done.recv_timeout(left).is_err() {
            break;
        }
        finished += 1;
    }
    finished
}
