//! The CLI's own sinks: one clear stderr line per verdict for the person
//! watching (R8.1), and the flag that remembers stallwarden stopped the
//! command, which turns its exit status into 124 (R8.2). Also the text of
//! the live status line (R8.4), and the lines a stall's stacks and
//! `on-stall` command add after its stall line (R8.14).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use stallwarden::{
    Budget, ChildInfo, Delivery, Event, EventKind, LeftoverAction, ProcState, Profile, Sink,
    SinkError, TaskStatus,
};

use super::console::Console;

/// Remembers that the guard dispatched a cancel (stall, deadline, liveness,
/// trigger): the command was stopped by stallwarden, not by itself.
#[derive(Clone, Debug, Default)]
pub(crate) struct StopFlag(Arc<AtomicBool>);

impl StopFlag {
    /// Returns true once a `cancelling` event was emitted.
    pub(crate) fn stopped(&self) -> bool {
        self.0.load(Ordering::SeqCst)
    }
}

impl Sink for StopFlag {
    fn on_event(&self, event: &Event) -> Result<(), SinkError> {
        if matches!(event.kind, EventKind::Cancelling { .. }) {
            self.0.store(true, Ordering::SeqCst);
        }
        Ok(())
    }

    // An atomic store never blocks: deliver before the cancel's own
    // dispatch returns, so the exit status cannot miss it.
    fn delivery(&self) -> Delivery {
        Delivery::Inline
    }

    fn name(&self) -> &str {
        "stop-flag"
    }
}

/// Prints one line to stderr per verdict: which budget, how long silent,
/// and the suspect children (R8.1), then what stallwarden does about it.
#[derive(Debug)]
pub(crate) struct VerdictLines {
    pub(crate) console: Arc<Console>,
    pub(crate) profile: Profile,
    /// Whether the command wrote anything yet, when its stdout is a pipe
    /// (`None` under `--pty`): a stall before then hints at buffering.
    pub(crate) buffering: Option<super::pumps::OutputSeen>,
}

impl Sink for VerdictLines {
    fn on_event(&self, event: &Event) -> Result<(), SinkError> {
        if let Some(mut line) = verdict_line(&self.profile, &event.kind) {
            let silent_from_start = self.buffering.as_ref().is_some_and(|s| !s.seen());
            if silent_from_start && matches!(event.kind, EventKind::Stalled { .. }) {
                line.push_str(BUFFERING_HINT);
            }
            self.console.line(&line);
        }
        // R8.14: how the on-stall command ended, after the stall line.
        for line in report_lines(&event.kind) {
            self.console.line(&line);
        }
        Ok(())
    }

    fn name(&self) -> &str {
        "stderr-lines"
    }
}

/// The lines a stall adds to the report after its stall line: the stacks'
/// frames that matter, then how the `on-stall` command ended, in one plain line (its output is in the
/// event, not on stderr).
fn report_lines(kind: &EventKind) -> Vec<String> {
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

/// Added to a stall line when the command has written nothing at all and
/// its stdout is a pipe (R8.11).
pub(crate) const BUFFERING_HINT: &str = "; the command may be buffering its output; try --pty";

/// Renders the stderr line for an event, or `None` for events a person
/// watching the command need not see.
pub(crate) fn verdict_line(profile: &Profile, kind: &EventKind) -> Option<String> {
    let line = match kind {
        EventKind::Stalled {
            budget,
            strike,
            terminate_after,
            silent,
            last_step,
            children,
            repeating,
            ..
        } => {
            // Name the budget the user set: an unset startup or execution
            // budget is the idle one (R2.2, R2.3), so the line says idle.
            let (name, limit) = match budget {
                Budget::Execution if profile.execution.is_some() => {
                    ("execution", profile.execution_budget())
                }
                Budget::Startup if profile.startup.is_some() => {
                    ("startup", profile.startup_budget())
                }
                _ => ("idle", profile.idle_budget()),
            };
            let mut l = format!("stallwarden: {name} budget");
            if let Some(limit) = limit {
                l.push_str(&format!(" {}", humantime::format_duration(limit)));
            }
            l.push_str(" exceeded");
            if *budget == Budget::Startup && profile.startup.is_none() {
                l.push_str(" before any output");
            }
            // R5.12: a job that was never silent but only repeated itself
            // is said as what it is.
            match repeating {
                Some(r) => l.push_str(&format!(": {r}")),
                None => l.push_str(&format!(": no output for {}", secs(*silent))),
            }
            match terminate_after {
                0 => l.push_str(&format!(" (strike {strike}, notify only)")),
                t => l.push_str(&format!(" (strike {strike} of {t})")),
            }
            l.push_str(&step_clause(last_step.as_deref()));
            if let Some(children) = children {
                l.push_str(&format!("; suspects: {}", suspects(children)));
            }
            l
        }
        EventKind::DeadlineExceeded { reason } => {
            format!("stallwarden: deadline exceeded: {reason}")
        }
        EventKind::LivenessLost { reason } => format!("stallwarden: liveness lost: {reason}"),
        EventKind::Triggered { reason } => {
            format!("stallwarden: the command reported a fault: {reason}")
        }
        EventKind::Recovered { silent } => {
            format!(
                "stallwarden: output resumed after {} of silence",
                secs(*silent)
            )
        }
        EventKind::Cancelling { signal, .. } => {
            format!("stallwarden: stopping the command ({signal} to its process group)")
        }
        EventKind::Killed { signal } => format!(
            "stallwarden: still running after the {} grace period: {signal}",
            humantime::format_duration(profile.grace_period)
        ),
        // R8.12: the core's 100-year limit, not the profile's max-deadline.
        EventKind::ExtensionRefused { allowed, .. } if *allowed == stallwarden::MAX_DURATION => {
            "stallwarden: extension refused: EXTEND_TIMEOUT_USEC asked for more than 100 years; the deadline stays".to_owned()
        }
        EventKind::ExtensionRefused { requested, allowed } => format!(
            "stallwarden: extension refused: EXTEND_TIMEOUT_USEC asked for a deadline {} from the start, past max-deadline {}; the deadline stays",
            humantime::format_duration(*requested),
            humantime::format_duration(*allowed)
        ),
        EventKind::Leaked { processes } => format!(
            "stallwarden: the command exited but its output is still held open by {}; not waiting for it",
            super::leaks::names(processes)
        ),
        EventKind::Leftover { action, processes } => match action {
            LeftoverAction::Killed => format!(
                "stallwarden: stopping what the command left running: {}",
                super::leaks::names(processes)
            ),
            LeftoverAction::Kept => format!(
                "stallwarden: leaving running (on-leftover = keep): {}",
                super::leaks::names(processes)
            ),
        },
        _ => return None,
    };
    Some(line)
}

/// The stall line's account of the last step (R8.1, R5.10): the tool still
/// running (`last step: tool "Bash(sleep 4)" still running`), a `STATUS=`
/// step, or with neither the kind of the last signal (`last signal: cpu`).
/// The core's fallback `last signal: output` repeats what "no output for"
/// already says and is left out.
fn step_clause(step: Option<&str>) -> String {
    match step {
        None => String::new(),
        Some(s) if s.starts_with("last signal: output") => String::new(),
        Some(s) if s.starts_with("last signal: ") => format!("; {s}"),
        Some(s) => format!("; last step: {s}"),
    }
}

/// Renders suspect children as `grep[1234] D (io_schedule)`, then what
/// each is blocked on (R8.13).
fn suspects(children: &[ChildInfo]) -> String {
    let named: Vec<String> = ChildInfo::suspects(children.to_vec())
        .iter()
        .map(|c| {
            let state = match c.state {
                ProcState::Running => "R",
                ProcState::Sleeping => "S",
                ProcState::DiskWait => "D",
                ProcState::Zombie => "Z",
                ProcState::Stopped => "T",
                _ => "?",
            };
            let mut s = format!("{}[{}] {state}", c.name, c.pid);
            if let Some(w) = c.wchan.as_deref().filter(|w| !w.is_empty() && *w != "0") {
                s.push_str(&format!(" ({w})"));
            }
            if c.cpu_delta_ms == Some(0) {
                s.push_str(" no cpu");
            }
            if let Some(b) = &c.blocked_on {
                s.push_str(&format!(": {b}"));
            }
            s
        })
        .collect();
    if named.is_empty() {
        "none".into()
    } else {
        named.join("; ")
    }
}

/// The spans the task spent paused by job control (R2.8), so that the
/// status line's silence leaves them out, as the budgets do.
#[derive(Debug, Default)]
pub(crate) struct Pauses(Vec<(Instant, Instant)>);

impl Pauses {
    /// Records a pause from `from` to `to`.
    pub(crate) fn add(&mut self, from: Instant, to: Instant) {
        if from < to {
            self.0.push((from, to));
        }
    }

    /// How much of the `window` that ends at `now` was spent paused.
    pub(crate) fn within(&self, window: Duration, now: Instant) -> Duration {
        let start = now.checked_sub(window);
        self.0
            .iter()
            .map(|&(from, to)| {
                let from = start.map_or(from, |s| from.max(s));
                to.min(now).saturating_duration_since(from)
            })
            .sum()
    }
}

/// Renders the live status line (R8.4). Its silence is the age of the
/// freshest signal that renews the budgets, less the time spent paused
/// (Ctrl-Z) within it; elapsed and output ages are wall time.
pub(crate) fn status_line(
    status: &TaskStatus,
    profile: &Profile,
    pauses: &Pauses,
    now: Instant,
) -> String {
    let age = profile
        .renewed_by
        .iter()
        .filter_map(|k| status.last_of(k).map(|s| s.age))
        .min()
        .unwrap_or(status.elapsed);
    let silence = age.saturating_sub(pauses.within(age, now));
    let output = status
        .last_output_age
        .map_or_else(|| "none yet".to_owned(), |a| format!("{} ago", secs(a)));
    let strikes = match profile.terminate_after {
        0 => format!("{}", status.strikes),
        t => format!("{}/{t}", status.strikes),
    };
    format!(
        "stallwarden: {} elapsed | silent {} | last output {output} | strikes {strikes}",
        secs(status.elapsed),
        secs(silence),
    )
}

/// Renders a duration as seconds with one decimal, `3.0s`.
fn secs(d: Duration) -> String {
    format!("{:.1}s", d.as_secs_f64())
}

#[cfg(test)]
mod tests {
    use super::*;

    // R2.8 / R8.4: a Ctrl-Z pause inside the silence does not count as
    // silence; one before it, or the part of one before it, does not
    // either way.
    #[test]
    fn pauses_are_taken_out_of_the_silence_window_they_overlap() {
        let t0 = Instant::now();
        let at = |s: u64| t0 + Duration::from_secs(s);
        let mut pauses = Pauses::default();
        pauses.add(at(10), at(13));
        pauses.add(at(20), at(21));
        pauses.add(at(5), at(5));
        let now = at(30);
        assert_eq!(pauses.within(Duration::from_secs(5), now), Duration::ZERO);
        assert_eq!(
            pauses.within(Duration::from_secs(10), now),
            Duration::from_secs(1)
        );
        assert_eq!(
            pauses.within(Duration::from_secs(18), now),
            Duration::from_secs(2)
        );
        assert_eq!(
            pauses.within(Duration::from_secs(30), now),
            Duration::from_secs(4)
        );
        assert_eq!(
            pauses.within(Duration::from_secs(99), now),
            Duration::from_secs(4)
        );
        // A pause still being recorded past `now` counts up to `now`.
        let mid_pause = at(20) + Duration::from_millis(500);
        assert_eq!(
            pauses.within(Duration::from_secs(1), mid_pause),
            Duration::from_millis(500)
        );
    }

    #[test]
    fn status_line_silence_leaves_out_a_pause() {
        let t0 = Instant::now();
        let profile = Profile::default().idle(Duration::from_secs(30));
        let clock = stallwarden::ManualClock::new();
        let guard = stallwarden::Guard::builder().clock(clock.clone()).build();
        let task = guard.start("probe", profile.clone()).unwrap();
        clock.advance(Duration::from_secs(2));
        task.recorder().output(6, 1);
        clock.advance(Duration::from_secs(10));
        let status = task.status().unwrap();
        let mut pauses = Pauses::default();
        pauses.add(t0 + Duration::from_secs(4), t0 + Duration::from_secs(7));
        let line = status_line(&status, &profile, &pauses, t0 + Duration::from_secs(12));
        assert!(line.contains("silent 7.0s"), "{line}");
        assert!(line.contains("12.0s elapsed"), "{line}");
        assert!(line.contains("last output 10.0s ago"), "{line}");
    }

    #[test]
    fn stall_line_names_budget_silence_and_suspects() {
        let grep = ChildInfo {
            pid: 1234,
            name: "grep".into(),
            state: ProcState::DiskWait,
            wchan: Some("io_schedule".into()),
            blocked_on: None,
            started_unix_ms: None,
            cpu_ms: 3,
            cpu_delta_ms: None,
        };
        let busy = ChildInfo {
            pid: 99,
            name: "cc".into(),
            state: ProcState::Running,
            wchan: None,
            blocked_on: None,
            started_unix_ms: None,
            cpu_ms: 900,
            cpu_delta_ms: Some(400),
        };
        let kind = EventKind::Stalled {
            budget: Budget::Idle,
            strike: 1,
            terminate_after: 1,
            silent: Duration::from_secs(3),
            last_step: None,
            children: Some(vec![grep, busy]),
            stacks: Vec::new(),
            on_stall: None,
            repeating: None,
        };
        let profile = Profile::default().idle(Duration::from_secs(3));
        assert_eq!(
            verdict_line(&profile, &kind).unwrap(),
            "stallwarden: idle budget 3s exceeded: no output for 3.0s (strike 1 of 1); \
             suspects: grep[1234] D (io_schedule)"
        );
    }

    fn stall(budget: Budget, last_step: Option<&str>) -> EventKind {
        EventKind::Stalled {
            budget,
            strike: 1,
            terminate_after: 1,
            silent: Duration::from_secs(2),
            last_step: last_step.map(str::to_owned),
            children: None,
            stacks: Vec::new(),
            on_stall: None,
            repeating: None,
        }
    }

    // R8.1, issue 24: with no tool in flight the core's fallback step is
    // "last signal: cpu"; the line says it once, not "last step: last
    // signal: cpu".
    #[test]
    fn stall_line_says_the_last_signal_without_calling_it_a_step() {
        let profile = Profile::default().idle(Duration::from_secs(2));
        let line = verdict_line(&profile, &stall(Budget::Idle, Some("last signal: cpu"))).unwrap();
        assert!(
            line.ends_with("(strike 1 of 1); last signal: cpu"),
            "{line}"
        );
        assert!(!line.contains("last step"), "{line}");
        let line = verdict_line(
            &profile,
            &stall(Budget::Idle, Some("tool \"Bash(sleep 4)\" still running")),
        )
        .unwrap();
        assert!(
            line.ends_with("; last step: tool \"Bash(sleep 4)\" still running"),
            "{line}"
        );
    }

    // R2.2, R2.3, issue 24: a budget the user never set is not named; the
    // unset startup and execution budgets are the idle one.
    #[test]
    fn stall_line_names_only_budgets_the_user_set() {
        let idle_only = Profile::default().idle(Duration::from_secs(2));
        let line = verdict_line(&idle_only, &stall(Budget::Startup, None)).unwrap();
        assert!(
            line.starts_with(
                "stallwarden: idle budget 2s exceeded before any output: no output for 2.0s"
            ),
            "{line}"
        );
        let line = verdict_line(&idle_only, &stall(Budget::Execution, None)).unwrap();
        assert!(
            line.starts_with("stallwarden: idle budget 2s exceeded"),
            "{line}"
        );
        let set = idle_only
            .clone()
            .execution(Duration::from_secs(30))
            .startup(Duration::from_secs(9));
        let line = verdict_line(&set, &stall(Budget::Execution, None)).unwrap();
        assert!(
            line.starts_with("stallwarden: execution budget 30s exceeded"),
            "{line}"
        );
        let line = verdict_line(&set, &stall(Budget::Startup, None)).unwrap();
        assert!(
            line.starts_with("stallwarden: startup budget 9s exceeded"),
            "{line}"
        );
    }
}
