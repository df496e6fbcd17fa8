//! What `run` does at a stall before the stop (R8.14): the user's
//! `on-stall` command, run through the library's bounded
//! [`OnStall`](stallwarden::sinks::hook::OnStall), and the lines the stall
//! report adds for it. Its output goes into the `stalled` event.

use std::sync::Arc;
use std::time::Duration;

use stallwarden::sinks::hook::OnStall;
use stallwarden::{AtStall, Event, EventKind, Profile, StallReport};

/// The CLI's step at a stall: the `on-stall` command (and, with them, the
/// stacks), each bounded.
#[derive(Debug)]
pub(crate) struct AtVerdict {
    hook: Option<OnStall>,
}

impl AtVerdict {
    /// The step for `on_stall` (none when `None`), bounded by `timeout`;
    /// the hook's `STALLWARDEN_STALL` is the stall line of `profile`.
    pub(crate) fn new(on_stall: Option<String>, timeout: Duration, profile: &Profile) -> Self {
        let profile = profile.clone();
        let hook = on_stall.map(|cmd| {
            OnStall::new(cmd)
                .timeout(timeout)
                .stall_line(Arc::new(move |e: &Event| {
                    super::report::verdict_line(&profile, &e.kind)
                }))
        });
        AtVerdict { hook }
    }

    /// Whether there is anything to do at a stall.
    pub(crate) fn is_active(&self) -> bool {
        self.hook.is_some()
    }
}

impl AtStall for AtVerdict {
    fn at_stall(&self, event: &Event, pid: Option<u32>) -> StallReport {
        StallReport {
            stacks: Vec::new(),
            on_stall: self.hook.as_ref().map(|h| Box::new(h.run(event, pid))),
        }
    }
}

/// The lines a stall adds to the report after its stall line: how the
/// `on-stall` command ended, in one plain line (its output is in the
/// event, not on stderr).
pub(crate) fn report_lines(kind: &EventKind) -> Vec<String> {
    let mut lines = Vec::new();
    if let EventKind::Stalled {
        on_stall: Some(run),
        ..
    } = kind
    {
        let bytes = run.output.len();
        let cut = if run.truncated { ", cut" } else { "" };
        lines.push(match run.status.as_str() {
            "exit 0" => {
                format!("stallwarden: on-stall command done ({bytes} bytes of output{cut})")
            }
            status => format!(
                "stallwarden: on-stall command failed: {status} ({bytes} bytes of output{cut})"
            ),
        });
    }
    lines
}
