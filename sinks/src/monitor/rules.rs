//! A deterministic, model-free monitor agent (R6.6): word lists and counters
//! over the redacted output. It speaks with uncertainty ("may", "appears")
//! and never calls a command successful: only a final update with an exit
//! code lets it say how the command ended, and then it says just that.

use std::time::Duration;

use watchdog_core::TaskState;

use super::{fmt_elapsed, MonitorAgent, MonitorBrief, MonitorError, MonitorFinal, MonitorUpdate};

/// Words whose presence may mean failure (matched case-insensitively).
const ERROR_WORDS: &[&str] = &[
    "error",
    "failed",
    "failure",
    "fatal",
    "panic",
    "exception",
    "traceback",
    "permission denied",
    "connection refused",
    "timed out",
    "no such file",
    "segmentation fault",
    "out of memory",
];

/// Words that suggest the process is waiting on something.
const WAIT_WORDS: &[&str] = &[
    "deadlock",
    "lock wait",
    "waiting for",
    "waiting on",
    "blocked",
    "password:",
    "[y/n]",
];

/// Words that suggest a retry.
const RETRY_WORDS: &[&str] = &[
    "retry",
    "retrying",
    "retries",
    "reconnecting",
    "backing off",
    "attempt ",
];

/// Words that suggest a destructive or unexpected write.
const DANGER_WORDS: &[&str] = &[
    "rm -rf",
    "drop table",
    "drop database",
    "truncate table",
    "delete from",
    "push --force",
    "push -f",
    "--force",
    "mkfs",
    "dd if=",
    "chmod -r 777",
    "overwriting",
];

/// A plain progress note is repeated at most this often.
const PROGRESS_EVERY: Duration = Duration::from_secs(30);

/// A line repeated this many times (in a row) is worth a flag.
const REPEATS: u32 = 3;

/// A rule-based [`MonitorAgent`] that needs no model.
///
/// It flags silence (no new output since the last update), repeated lines
/// and retries, error words, waits (locks, prompts), dangerous writes, guard
/// verdicts (stalls, cancels), and non-zero exits. Plain progress is noted at
/// most every 30 s, so the main agent is not flooded. It never claims success:
/// the final observation says "exited with code 0" and nothing more hopeful.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use stallwarden_sinks::monitor::{MonitorAgent, MonitorUpdate, RuleMonitor};
/// use watchdog_core::{TaskId, TaskState};
///
/// let mut rules = RuleMonitor::new();
/// let update = MonitorUpdate {
///     task: TaskId::from_raw(1), name: "db".into(), elapsed: Duration::from_secs(9),
///     new_output: String::new(), output_changed: false,
///     output_quiet_for: Duration::from_secs(6), state: TaskState::Stalled,
///     note: Some("stalled: idle budget ran out".into()),
/// };
/// let said = rules.update(&update).unwrap().unwrap();
/// assert!(said.contains("no new output for 00:06"), "{said}");
/// assert!(said.contains("may"), "{said}");
/// ```
#[derive(Debug, Default)]
pub struct RuleMonitor {
    retries: u32,
    last_line: Option<String>,
    repeats: u32,
    lines: u64,
    last_progress_note: Option<Duration>,
    last_error: Option<String>,
}

impl RuleMonitor {
    /// Creates a monitor with no history.
    pub fn new() -> Self {
        Self::default()
    }

    /// Scans new output, updating the counters; returns the flags it raises.
    fn scan(&mut self, text: &str) -> Vec<String> {
        let mut flags = Vec::new();
        let mut retries = 0;
        let mut error: Option<&str> = None;
        let mut wait: Option<&str> = None;
        let mut danger: Option<&str> = None;
        let mut repeated: Option<(String, u32)> = None;
        for line in text.lines().map(str::trim).filter(|l| !l.is_empty()) {
            self.lines += 1;
            let lower = line.to_ascii_lowercase();
            if RETRY_WORDS.iter().any(|w| lower.contains(w)) {
                retries += 1;
            }
            if let Some(w) = first_word(&lower, ERROR_WORDS) {
                error.get_or_insert(w);
                self.last_error = Some(clip(line, 120));
            }
            if let Some(w) = first_word(&lower, WAIT_WORDS) {
                wait.get_or_insert(w);
            }
            if let Some(w) = first_word(&lower, DANGER_WORDS) {
                danger.get_or_insert(w);
            }
            if self.last_line.as_deref() == Some(line) {
                self.repeats += 1;
                if self.repeats + 1 >= REPEATS {
                    repeated = Some((line.to_owned(), self.repeats + 1));
                }
            } else {
                self.last_line = Some(line.to_owned());
                self.repeats = 0;
            }
        }
        self.retries += retries;
        if retries > 0 {
            flags.push(format!(
                "output shows {} retr{} so far; the command may be failing repeatedly",
                self.retries,
                if self.retries == 1 { "y" } else { "ies" }
            ));
        }
        if let Some((line, n)) = repeated {
            flags.push(format!(
                "the line \"{}\" repeated {n} times in a row; it may be looping",
                clip(&line, 80)
            ));
        }
        if let Some(w) = error {
            flags.push(format!(
                "output mentions \"{w}\"; this may indicate a failure"
            ));
        }
        if let Some(w) = wait {
            flags.push(format!(
                "output mentions \"{w}\"; the process may be waiting on a lock or on input"
            ));
        }
        if let Some(w) = danger {
            flags.push(format!(
                "output mentions \"{w}\"; check that this write is expected"
            ));
        }
        flags
    }
}

impl MonitorAgent for RuleMonitor {
    fn open(&mut self, brief: &MonitorBrief) -> Result<Option<String>, MonitorError> {
        let mut flags = Vec::new();
        if let Some(w) = first_word(&brief.command.to_ascii_lowercase(), DANGER_WORDS) {
            flags.push(format!(
                "the command contains \"{w}\"; check that its writes are expected"
            ));
        }
        flags.extend(self.scan(&brief.output_tail));
        let head = if brief.output_tail.trim().is_empty() {
            format!(
                "`{}` has run for {} with no output yet; no completion signal observed",
                clip(&brief.command, 80),
                fmt_elapsed(brief.elapsed)
            )
        } else {
            format!(
                "`{}` has run for {} ({} lines of output so far); no completion signal observed yet",
                clip(&brief.command, 80),
                fmt_elapsed(brief.elapsed),
                self.lines
            )
        };
        self.last_progress_note = Some(brief.elapsed);
        Ok(Some(join(head, flags)))
    }

    fn update(&mut self, update: &MonitorUpdate) -> Result<Option<String>, MonitorError> {
        let mut flags = Vec::new();
        match update.state {
            TaskState::Stalled => flags.push(format!(
                "the guard reports a stall ({}); the process appears stuck or is working silently",
                update.note.as_deref().unwrap_or("silence budget ran out")
            )),
            TaskState::Cancelling => flags.push(format!(
                "the guard is stopping the command ({})",
                update.note.as_deref().unwrap_or("cancel")
            )),
            _ => {
                if let Some(note) = &update.note {
                    flags.push(format!("the guard reports: {note}"));
                }
            }
        }
        if update.output_changed {
            flags.extend(self.scan(&update.new_output));
        } else {
            flags.insert(
                0,
                format!(
                    "no new output for {}; the process may be waiting (on a lock, the network, input) or working silently",
                    fmt_elapsed(update.output_quiet_for)
                ),
            );
        }
        if !flags.is_empty() {
            self.last_progress_note = Some(update.elapsed);
            return Ok(Some(flags.join("; ")));
        }
        let due = self
            .last_progress_note
            .is_none_or(|t| update.elapsed.saturating_sub(t) >= PROGRESS_EVERY);
        if !due {
            return Ok(None);
        }
        self.last_progress_note = Some(update.elapsed);
        Ok(Some(format!(
            "output is progressing ({} lines so far); no completion signal observed yet",
            self.lines
        )))
    }

    fn finish(&mut self, last: &MonitorFinal) -> Result<Option<String>, MonitorError> {
        let at = fmt_elapsed(last.elapsed);
        let mut text = match (last.exit_code, last.signal) {
            (Some(0), _) => format!("the command exited with code 0 after {at}"),
            (Some(code), _) => {
                format!("the command exited with code {code} after {at}; it appears to have failed")
            }
            (None, Some(sig)) => format!(
                "the command was terminated by signal {sig} after {at}; there is no exit code, so how it ended is not confirmed"
            ),
            (None, None) => format!(
                "the task ended after {at} (outcome {:?}) without an exit code; how it ended is not confirmed",
                last.outcome
            ),
        };
        if last.cancelled {
            text.push_str("; it was cancelled");
        }
        // Only errors seen in the final tail count here: earlier ones were
        // already reported with their update.
        let mut tail_scan = RuleMonitor::new();
        tail_scan.scan(&last.output_tail);
        if let Some(line) = tail_scan.last_error.or_else(|| {
            (last.exit_code != Some(0))
                .then(|| self.last_error.clone())
                .flatten()
        }) {
            text.push_str(&format!("; last error-like line: \"{line}\""));
        }
        if self.retries > 0 {
            text.push_str(&format!("; {} retries were seen", self.retries));
        }
        Ok(Some(text))
    }
}

/// The first word of `words` found in `lower`, skipping zero counts such as
/// "0 errors" or "0 failed" (a test summary, not a failure).
fn first_word(lower: &str, words: &[&'static str]) -> Option<&'static str> {
    words.iter().copied().find(|w| {
        lower.match_indices(w).any(|(i, _)| {
            let before = lower[..i].trim_end();
            !(before.ends_with(" 0") || before == "0" || before == "no" || before.ends_with(" no"))
        })
    })
}

fn join(head: String, flags: Vec<String>) -> String {
    if flags.is_empty() {
        head
    } else {
        format!("{head}; {}", flags.join("; "))
    }
}

/// Cuts `s` to at most `max` characters, marking the cut.
fn clip(s: &str, max: usize) -> String {
    match s.char_indices().nth(max) {
        Some((i, _)) => format!("{}…", &s[..i]),
        None => s.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zero_counts_are_not_errors() {
        assert_eq!(
            first_word("test result: ok. 12 passed; 0 failed", ERROR_WORDS),
            None
        );
        assert_eq!(first_word("3 failed", ERROR_WORDS), Some("failed"));
    }

    #[test]
    fn counts_retries_and_repeats() {
        let mut r = RuleMonitor::new();
        let flags = r.scan("retrying in 1s\nretrying in 1s\nretrying in 1s\n");
        assert!(flags[0].contains("3 retries"), "{flags:?}");
        assert!(flags[1].contains("repeated 3 times"), "{flags:?}");
    }
}
