//! The per-task monitor state machine: which message to send, when. Pure and
//! deterministic — it reads time only from the events' monotonic `at` and
//! from the `now` a caller passes to [`MonitorState::poll`], and output only
//! through the [`OutputTail`] it is handed — so tests drive it in virtual
//! time. Calling agents is the sink's business, not this module's.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use watchdog_core::{Event, EventKind, Nanos, Outcome, TaskId, TaskState};

use super::redact::{clean_output, redact};
use super::{MonitorBrief, MonitorCall, MonitorFinal, MonitorUpdate, OutputTail, INSTRUCTIONS};

/// How often and how much a monitor is told.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use stallwarden_sinks::monitor::MonitorSettings;
/// let s = MonitorSettings::default();
/// assert_eq!(s.update_interval, Duration::from_secs(2));
/// assert_eq!(s.max_output_bytes, 4096);
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MonitorSettings {
    /// The least time between two messages (brief or update): 2 s (R6.6).
    pub update_interval: Duration,
    /// The most output bytes in one message (before cleaning); older bytes
    /// are left out, from a line boundary.
    pub max_output_bytes: usize,
}

impl Default for MonitorSettings {
    fn default() -> Self {
        MonitorSettings {
            update_interval: Duration::from_secs(2),
            max_output_bytes: 4096,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    /// Registered; no `long_running` yet.
    Waiting,
    /// The brief went out; updates may follow.
    Open,
    /// Finished (with or without a monitor); nothing more is sent.
    Closed,
}

/// The monitor state machine for one task (R6.6).
///
/// Feed it the task's events with [`MonitorState::on_event`] and, between
/// events, the current instant with [`MonitorState::poll`] (output flowing
/// steadily produces no guard events at all). It answers with the
/// [`MonitorCall`]s to make: one `Open` at `long_running` (never two), an
/// `Update` at most every `update_interval` and only when output or state
/// changed, and a `Final` at `finished` if a monitor was opened.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use watchdog_core::{Guard, ManualClock, Profile, RecordingSink};
/// use stallwarden_sinks::monitor::{monitored, MonitorCall, MonitorSettings, MonitorState};
///
/// let rec = RecordingSink::new();
/// let guard = Guard::builder().clock(ManualClock::new()).sink(rec.clone()).build();
/// let task = guard.start("sleep 5", monitored(Profile::default())).unwrap();
/// guard.advance(Duration::from_secs(5));
/// task.finish_completed();
///
/// let mut state = MonitorState::new("sleep 5", None, MonitorSettings::default());
/// let tail = || Vec::new();
/// let calls: Vec<_> = rec.events().iter().flat_map(|e| state.on_event(e, &tail)).collect();
/// assert!(matches!(calls[0], MonitorCall::Open(ref b) if b.elapsed == Duration::from_secs(3)));
/// assert!(matches!(calls[1], MonitorCall::Final(_)));
/// ```
#[derive(Debug)]
pub struct MonitorState {
    command: String,
    cwd: Option<PathBuf>,
    settings: MonitorSettings,
    phase: Phase,
    task: Option<(TaskId, Arc<str>)>,
    /// Monotonic start of the task (event `at` minus `elapsed`).
    start: Nanos,
    last_sent: Nanos,
    last_output_change: Nanos,
    cursor: Cursor,
    state: TaskState,
    note: Option<String>,
    state_dirty: bool,
    cancelled: bool,
}

impl MonitorState {
    /// Creates the state for a task running `command` in `cwd`.
    pub fn new(
        command: impl Into<String>,
        cwd: Option<PathBuf>,
        settings: MonitorSettings,
    ) -> Self {
        MonitorState {
            command: command.into(),
            cwd,
            settings,
            phase: Phase::Waiting,
            task: None,
            start: Nanos::ZERO,
            last_sent: Nanos::ZERO,
            last_output_change: Nanos::ZERO,
            cursor: Cursor::default(),
            state: TaskState::Working,
            note: None,
            state_dirty: false,
            cancelled: false,
        }
    }

    /// Returns true between the brief and the final update.
    pub fn is_open(&self) -> bool {
        self.phase == Phase::Open
    }

    /// Returns true once the task finished.
    pub fn is_closed(&self) -> bool {
        self.phase == Phase::Closed
    }

    /// Takes one of the task's events and returns the calls to make.
    pub fn on_event(&mut self, event: &Event, tail: &dyn OutputTail) -> Vec<MonitorCall> {
        if self.phase == Phase::Closed {
            return Vec::new();
        }
        if self.task.is_none() {
            self.task = Some((event.task, Arc::clone(&event.name)));
            self.start = event.at.saturating_sub(event.elapsed);
        }
        let mut calls = Vec::new();
        match &event.kind {
            EventKind::LongRunning => {
                if self.phase == Phase::Waiting {
                    calls.push(self.open(event, tail));
                }
            }
            EventKind::Finished {
                outcome,
                exit_code,
                signal,
            } => {
                if self.phase == Phase::Open {
                    calls.push(self.finish(event, *outcome, *exit_code, *signal, tail));
                }
                self.phase = Phase::Closed;
            }
            EventKind::Heartbeat { .. } => calls.extend(self.poll(event.at, tail)),
            other => {
                self.note_state(other);
                calls.extend(self.poll(event.at, tail));
            }
        }
        calls
    }

    /// Returns an update if one is due at `now`: the interval has passed
    /// since the last message and output or state changed since.
    pub fn poll(&mut self, now: Nanos, tail: &dyn OutputTail) -> Option<MonitorCall> {
        if self.phase != Phase::Open
            || now.saturating_since(self.last_sent) < self.settings.update_interval
        {
            return None;
        }
        let snap = tail.snapshot();
        let fresh = self.cursor.advance(snap, tail.total_bytes());
        if !fresh.changed && !self.state_dirty {
            return None;
        }
        if fresh.changed {
            self.last_output_change = now;
        }
        let (task, name) = self.task.clone()?;
        let new_output = if fresh.changed {
            self.render(fresh.start, fresh.stream_start, true)
        } else {
            String::new()
        };
        self.last_sent = now;
        self.state_dirty = false;
        Some(MonitorCall::Update(MonitorUpdate {
            task,
            name,
            elapsed: now.saturating_since(self.start),
            new_output,
            output_changed: fresh.changed,
            output_quiet_for: now.saturating_since(self.last_output_change),
            state: self.state,
            note: self.note.take(),
        }))
    }

    fn open(&mut self, event: &Event, tail: &dyn OutputTail) -> MonitorCall {
        self.phase = Phase::Open;
        self.last_sent = event.at;
        let fresh = self.cursor.advance(tail.snapshot(), tail.total_bytes());
        self.last_output_change = if fresh.changed { event.at } else { self.start };
        // The brief describes the state as it is now; later updates carry
        // only later changes.
        self.state_dirty = false;
        self.note = None;
        MonitorCall::Open(MonitorBrief {
            task: event.task,
            name: Arc::clone(&event.name),
            // Command lines carry credentials too (`--password x`).
            command: redact(&self.command),
            cwd: self.cwd.clone(),
            started: event
                .wall
                .checked_sub(event.elapsed)
                .unwrap_or(SystemTime::UNIX_EPOCH),
            elapsed: event.elapsed,
            output_tail: self.render(0, fresh.stream_start, false),
            instructions: INSTRUCTIONS,
        })
    }

    fn finish(
        &mut self,
        event: &Event,
        outcome: Outcome,
        exit_code: Option<i32>,
        signal: Option<i32>,
        tail: &dyn OutputTail,
    ) -> MonitorCall {
        let fresh = self.cursor.advance(tail.snapshot(), tail.total_bytes());
        MonitorCall::Final(MonitorFinal {
            task: event.task,
            name: Arc::clone(&event.name),
            elapsed: event.elapsed,
            completed_at: event.wall,
            outcome,
            exit_code,
            signal,
            cancelled: self.cancelled || outcome == Outcome::Cancelled,
            output_tail: self.render(0, fresh.stream_start, false),
        })
    }

    fn note_state(&mut self, kind: &EventKind) {
        let (state, note) = match kind {
            EventKind::Stalled {
                budget,
                strike,
                silent,
                last_step,
                ..
            } => {
                let mut n = format!(
                    "stalled: {budget} budget ran out after {} of silence (strike {strike})",
                    humantime::format_duration(round_ms(*silent))
                );
                if let Some(step) = last_step {
                    n.push_str(&format!("; last step: {step}"));
                }
                (TaskState::Stalled, n)
            }
            EventKind::Recovered { silent } => (
                TaskState::Working,
                format!(
                    "recovered: progress after {} of silence",
                    humantime::format_duration(round_ms(*silent))
                ),
            ),
            EventKind::DeadlineExceeded { reason }
            | EventKind::LivenessLost { reason }
            | EventKind::Triggered { reason } => (self.state, reason.clone()),
            EventKind::Cancelling { reason, signal } => {
                self.cancelled = true;
                (
                    TaskState::Cancelling,
                    format!("cancelling ({signal}): {reason}"),
                )
            }
            EventKind::Killed { signal } => (
                TaskState::Cancelling,
                format!("killed with {signal} after the grace period"),
            ),
            _ => return,
        };
        self.state = state;
        self.note = Some(match self.note.take() {
            Some(prev) => format!("{prev}; {note}"),
            None => note,
        });
        self.state_dirty = true;
    }

    /// Cleans and redacts `snap[start..]`, bounded to `max_output_bytes` and
    /// aligned to a line so no secret is cut in half before redaction.
    fn render(&self, start: usize, stream_start: bool, context: bool) -> String {
        let snap = &self.cursor.prev;
        let max = self.settings.max_output_bytes;
        let (mut from, mut cut) = (start.min(snap.len()), false);
        if snap.len() - from > max {
            from = snap.len() - max;
            cut = true;
        }
        let from = align(snap, from, stream_start && !cut, context && !cut);
        redact(&clean_output(&snap[from..]))
    }
}

fn round_ms(d: Duration) -> Duration {
    Duration::from_millis(u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// Moves a cut point in `snap` to a line start: the text before a cut may
/// hold the first half of a secret (`password=` | `hunter2`) that redaction
/// would not recognise alone. With `context`, backs up to the start of the
/// cut line (up to 4 KiB: resending a little is fine); otherwise, or when
/// the line start is out of reach, skips to the next line.
fn align(snap: &[u8], from: usize, stream_start: bool, context: bool) -> usize {
    if from == 0 && stream_start {
        return 0;
    }
    if from > 0 && snap[from - 1] == b'\n' {
        return from;
    }
    if context && from > 0 {
        let low = from.saturating_sub(4096);
        if let Some(p) = snap[low..from].iter().rposition(|&c| c == b'\n') {
            return low + p + 1;
        }
        if low == 0 && stream_start {
            return 0;
        }
    }
    snap[from..]
        .iter()
        .position(|&c| c == b'\n')
        .map_or(snap.len(), |p| from + p + 1)
}

/// What was already shown of the output, to find what is new.
#[derive(Debug, Default)]
struct Cursor {
    prev: Vec<u8>,
    prev_total: Option<u64>,
    /// The window has dropped its oldest bytes at least once.
    slid: bool,
}

struct Fresh {
    changed: bool,
    /// Where the new bytes start in the snapshot.
    start: usize,
    /// Whether the snapshot starts at the first byte ever written.
    stream_start: bool,
}

impl Cursor {
    fn advance(&mut self, snap: Vec<u8>, total: Option<u64>) -> Fresh {
        let fresh = match total {
            Some(total) => {
                let grown = total.saturating_sub(self.prev_total.unwrap_or(0));
                let grown = usize::try_from(grown).unwrap_or(usize::MAX);
                Fresh {
                    changed: grown > 0,
                    start: snap.len().saturating_sub(grown),
                    stream_start: total <= snap.len() as u64,
                }
            }
            None => {
                let start = if snap == self.prev {
                    None
                } else if snap.starts_with(&self.prev) {
                    Some(self.prev.len())
                } else {
                    self.slid = true;
                    Some(overlap(&self.prev, &snap))
                };
                Fresh {
                    changed: start.is_some() && !snap.is_empty(),
                    start: start.unwrap_or(snap.len()),
                    stream_start: !self.slid,
                }
            }
        };
        self.prev = snap;
        self.prev_total = total;
        fresh
    }
}

/// Where new bytes start in `snap` when the window slid past the start of
/// `prev`: the smallest shift `d` with `prev[d..]` a prefix of `snap`. Tries
/// a bounded number of candidates; with none, all of `snap` is new.
fn overlap(prev: &[u8], snap: &[u8]) -> usize {
    let Some(&first) = snap.first() else {
        return 0;
    };
    (1..prev.len())
        .filter(|&d| prev[d] == first)
        .take(256)
        .find(|&d| snap.starts_with(&prev[d..]))
        .map_or(0, |d| prev.len() - d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cursor_finds_new_bytes_after_the_window_slid() {
        let mut c = Cursor::default();
        c.advance(b"aaa\nbbb\nccc\n".to_vec(), None);
        let f = c.advance(b"bbb\nccc\nddd\n".to_vec(), None);
        assert!(f.changed);
        assert_eq!(&c.prev[f.start..], b"ddd\n");
        assert!(!f.stream_start);
    }

    #[test]
    fn cursor_with_totals_sees_a_repeated_line_as_new() {
        let mut c = Cursor::default();
        c.advance(b"retry\nretry\n".to_vec(), Some(12));
        let f = c.advance(b"retry\nretry\n".to_vec(), Some(18));
        assert!(f.changed);
        assert_eq!(&c.prev[f.start..], b"retry\n");
    }

    #[test]
    fn align_never_starts_inside_a_line() {
        let snap = b"password=hun\nter2 next\nok\n";
        assert_eq!(align(snap, 16, false, false), 23);
        assert_eq!(align(snap, 16, false, true), 13);
        assert_eq!(align(snap, 0, false, false), 13);
        assert_eq!(align(snap, 0, true, false), 0);
    }
}
