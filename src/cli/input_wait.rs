//! `on-input-wait = "pause"` (R8.13, R2.8): while the command's foreground
//! process waits for what the user types on the terminal (an approval
//! prompt), every budget pauses as for Ctrl-Z; the step says "waiting for
//! input", so `describe` says it too; the first look that finds it no
//! longer waiting resumes them.

use std::time::{Duration, Instant};

use super::report::Pauses;
use stallguard::TaskHandle;

/// How often the terminal's readers are looked at.
pub(crate) const EVERY: Duration = Duration::from_millis(250);

/// The step a paused task shows (`describe`, the stall line's last step).
pub(crate) const STEP: &str = "waiting for input on the terminal (on-input-wait = pause)";

/// Whether the budgets are paused for input now, and since when.
#[derive(Debug, Default)]
pub(crate) struct InputWait {
    since: Option<Instant>,
}

impl InputWait {
    /// Takes one look's answer: pauses when the command starts waiting,
    /// resumes (and records the pause for the status line) when it stops.
    pub(crate) fn look(&mut self, waiting: bool, task: &TaskHandle, pauses: &mut Pauses) {
        match (waiting, self.since) {
            (true, None) if task.pause().is_ok() => {
                task.set_step(STEP);
                self.since = Some(Instant::now());
            }
            (false, Some(from)) => {
                let _ = task.resume();
                task.set_step("input read; budgets resumed");
                pauses.add(from, Instant::now());
                self.since = None;
            }
            _ => {}
        }
    }
}
