//! What `run` does at a stall before the stop (R8.14): the user's
//! `on-stall` command, run through the library's bounded
//! [`OnStall`](stallwarden::sinks::hook::OnStall). Its output goes into the
//! `stalled` event; the lines the stall report adds for it and for the
//! stacks are src/cli/report.rs's, which owns every line of the report.

use std::sync::Arc;
use std::time::Duration;

use stallwarden::sinks::hook::OnStall;
use stallwarden::sinks::stacks::{Stacks, TOOL_BOUND};
use stallwarden::{AtStall, Event, Profile, StallReport};

/// The CLI's step at a stall: the `on-stall` command (and, with them, the
/// stacks), each bounded.
#[derive(Debug)]
pub(crate) struct AtVerdict {
    hook: Option<OnStall>,
    /// R8.14: the suspects' stacks, taken first (a hook that looks at the
    /// process itself then finds it free of the stack tools' ptrace).
    stacks: Option<Stacks>,
}

impl AtVerdict {
    /// The step for `on_stall` (none when `None`), bounded by `timeout`;
    /// the hook's `STALLWARDEN_STALL` is the stall line of `profile`.
    pub(crate) fn new(
        on_stall: Option<String>,
        timeout: Duration,
        stacks: bool,
        profile: &Profile,
    ) -> Self {
        let profile = profile.clone();
        let hook = on_stall.map(|cmd| {
            OnStall::new(cmd)
                .timeout(timeout)
                .stall_line(Arc::new(move |e: &Event| {
                    super::report::verdict_line(&profile, &e.kind)
                }))
        });
        let stacks = stacks.then(|| Stacks::new(TOOL_BOUND));
        AtVerdict { hook, stacks }
    }

    /// Whether there is anything to do at a stall.
    pub(crate) fn is_active(&self) -> bool {
        self.hook.is_some() || self.stacks.is_some()
    }
}

impl AtStall for AtVerdict {
    fn at_stall(&self, event: &Event, pid: Option<u32>) -> StallReport {
        StallReport {
            stacks: self
                .stacks
                .as_ref()
                .map_or_else(Vec::new, |s| s.take(event, pid)),
            on_stall: self.hook.as_ref().map(|h| Box::new(h.run(event, pid))),
        }
    }
}
