//! What `run` does at a stall before the stop (R8.14): the user's
//! `on-stall` command, run through the library's bounded
//! [`OnStall`](stallwarden::sinks::hook::OnStall), and the lines the stall
//! report adds for it. Its output goes into the `stalled` event.

use std::sync::Arc;
use std::time::Duration;

use stallwarden::sinks::hook::OnStall;
use stallwarden::sinks::stacks::{Stacks, TOOL_BOUND};
use stallwarden::{AtStall, Event, EventKind, Profile, StallReport};

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

/// The lines a stall adds to the report after its stall line: the stacks'
/// frames that matter, then how the `on-stall` command ended, in one plain line (its output is in the
/// event, not on stderr).
pub(crate) fn report_lines(kind: &EventKind) -> Vec<String> {
    let mut lines = stack_lines(kind);
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

/// The lines a stall's stacks add to the report (R8.14): per suspect, its frames
/// that matter, innermost first, or why there are none.
fn stack_lines(kind: &EventKind) -> Vec<String> {
    let EventKind::Stalled {
        stacks, children, ..
    } = kind
    else {
        return Vec::new();
    };
    let name_of = |pid: u32| {
        children
            .iter()
            .flatten()
            .find(|c| c.pid == pid)
            .map_or_else(|| format!("pid {pid}"), |c| format!("{}[{pid}]", c.name))
    };
    // Stacks with no frame of the program's own code (a stripped system
    // binary: `sh`, `sleep`) are said together, in one line.
    let mut bare: Vec<(String, &str)> = Vec::new();
    let mut lines: Vec<String> = stacks
        .iter()
        .filter_map(|n| {
            let who = n.pid.map_or_else(|| "a suspect".to_owned(), name_of);
            match (n.status.as_str(), n.frames.is_empty()) {
                ("ok", false) => Some(format!(
                    "stallwarden: stack of {who} ({}): {}",
                    n.source,
                    n.frames.join(" < ")
                )),
                ("ok", true) => {
                    bare.push((who, n.source.as_str()));
                    None
                }
                (status, _) => Some(format!("stallwarden: no stack of {who}: {status}")),
            }
        })
        .collect();
    if !bare.is_empty() {
        let whose: Vec<String> = bare.iter().map(|(w, src)| format!("{w} ({src})")).collect();
        lines.push(format!(
            "stallwarden: {} {}: no frame of the program's own code (the whole stack{} in the stalled event)",
            if bare.len() == 1 { "stack of" } else { "stacks of" },
            whose.join(", "),
            if bare.len() == 1 { " is" } else { "s are" },
        ));
    }
    lines
}
