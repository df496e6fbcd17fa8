//! Headless agent CLI event streams (R5.10).
//!
//! A headless agent CLI (Claude Code `--output-format stream-json`, Codex
//! `exec --json`, Gemini CLI and Qwen Code `--output-format stream-json`)
//! writes its events as JSON lines on stdout. [`AgentStream`] reads those
//! bytes as they pass through (it never changes or holds them back), splits
//! them into lines, and turns each line it recognises into signals on the
//! task's [`Recorder`]: tool start and finish by call id (so the execution
//! budget holds while the agent's own tool runs, R2.2, R5.3), argument
//! deltas of Claude Code's `stream_event` wrappers (through the Anthropic
//! adapter, [`crate::args::anthropic`]), text, and the end of the turn.
//!
//! A line that is not JSON, not an object with a `type`, or not an event
//! the format knows is plain output: counted, never an error. A line longer
//! than [`MAX_EVENT_LINE`] is never buffered whole: its head is dropped from
//! the parser's buffer and the line counts as plain output.
//!
//! Each format lives in a module of its own that maps one parsed line to
//! format-neutral [`AgentEvent`]s; this module applies them.

pub mod claude_code;
pub mod codex;
pub mod gemini;
mod names;
pub mod qwen;
mod said;
mod tasks;

pub use names::{call_name, MAX_SHOWN_COMMAND};

use std::fmt;
use std::str::FromStr;

use serde_json::Value;
use watchdog_core::{BackgroundKind, CallOutcome, Recorder};

use crate::args::anthropic::AnthropicStream;
use crate::args::StreamAdapter;
use crate::background::{EndStatus, Provenance};
use crate::tools::{self, ToolCallError};

/// The longest line parsed as an event, in bytes (4 MiB); longer lines are
/// plain output.
pub const MAX_EVENT_LINE: usize = 4 << 20;

/// The most tool calls tracked in flight at once; starts beyond it are
/// refused by the core and counted on the task (`tools.too_many`), so a
/// runaway stream cannot grow memory:
/// the core's [`watchdog_core::MAX_CALLS_IN_FLIGHT`].
pub const MAX_IN_FLIGHT: usize = watchdog_core::MAX_CALLS_IN_FLIGHT;

/// Which agent CLI wrote the stream.
///
/// # Examples
///
/// ```
/// use stallwarden_sources::agent::Format;
/// let f: Format = "claude-code".parse().unwrap();
/// assert_eq!(f, Format::ClaudeCode);
/// assert_eq!(f.to_string(), "claude-code");
/// assert!("cursor".parse::<Format>().is_err());
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Format {
    /// Claude Code `claude -p --output-format stream-json --verbose`.
    ClaudeCode,
    /// Codex `codex exec --json`.
    Codex,
    /// Gemini CLI `gemini -p … --output-format stream-json`.
    Gemini,
    /// Qwen Code `qwen -p … --output-format stream-json`.
    Qwen,
}

impl Format {
    /// Every format, in the order the CLI lists them.
    pub const ALL: [Format; 4] = [
        Format::ClaudeCode,
        Format::Codex,
        Format::Gemini,
        Format::Qwen,
    ];

    /// Returns the format's name as `--stream` and the config take it.
    pub fn name(self) -> &'static str {
        match self {
            Format::ClaudeCode => "claude-code",
            Format::Codex => "codex",
            Format::Gemini => "gemini",
            Format::Qwen => "qwen",
        }
    }

    /// Maps one parsed line to events; an empty list for plain output.
    pub fn parse<'v>(self, line: &'v Value, out: &mut Vec<AgentEvent<'v>>) {
        match self {
            Format::ClaudeCode => claude_code::parse(line, out),
            Format::Codex => codex::parse(line, out),
            Format::Gemini => gemini::parse(line, out),
            Format::Qwen => qwen::parse(line, out),
        }
    }
}

impl fmt::Display for Format {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A stream format name that is not one of [`Format::ALL`].
///
/// # Examples
///
/// ```
/// use stallwarden_sources::agent::Format;
/// let e = "cursor".parse::<Format>().unwrap_err();
/// assert_eq!(e.to_string(), "unknown stream format `cursor`, expected one of claude-code, codex, gemini, qwen");
/// ```
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("unknown stream format `{0}`, expected one of claude-code, codex, gemini, qwen")]
pub struct UnknownFormat(pub String);

impl FromStr for Format {
    type Err = UnknownFormat;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Format::ALL
            .into_iter()
            .find(|f| f.name() == s)
            .ok_or_else(|| UnknownFormat(s.to_owned()))
    }
}

/// One thing a line of an agent stream says, the same for every format.
///
/// # Examples
///
/// ```
/// use stallwarden_sources::agent::{AgentEvent, Format};
/// let line = serde_json::json!({"type":"tool_use","tool_name":"run_shell_command","tool_id":"t1","parameters":{}});
/// let mut out = Vec::new();
/// Format::Gemini.parse(&line, &mut out);
/// assert_eq!(out, [AgentEvent::ToolStarted { id: "t1", name: "run_shell_command", detail: None }]);
/// ```
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum AgentEvent<'v> {
    /// The agent started its tool `name` as call `id`.
    ToolStarted {
        /// The call id the agent gave.
        id: &'v str,
        /// The tool's name, e.g. `Bash`.
        name: &'v str,
        /// For a shell tool, the command it runs (shown, truncated and
        /// sanitised, in the call's name: `Bash(sleep 4)`).
        detail: Option<&'v str>,
    },
    /// A tool call reported only as completed (a Codex `file_change`,
    /// written once the patch is applied): if `id` is in flight it
    /// finishes; otherwise it is recorded as a call that ran whole, with no
    /// execution budget and no change to the in-flight set.
    ToolCompleted {
        /// The call id.
        id: &'v str,
        /// The tool's name.
        name: &'v str,
        /// As in [`AgentEvent::ToolStarted`].
        detail: Option<&'v str>,
        /// False when the tool failed.
        ok: bool,
    },
    /// Call `id` returned; `ok` is false for an error result.
    ToolFinished {
        /// The call id of the start.
        id: &'v str,
        /// False when the tool reported an error.
        ok: bool,
    },
    /// A partial-message event (Anthropic streaming shape) to track
    /// argument deltas with.
    Partial(&'v Value),
    /// Text from the model.
    Text,
    /// The agent is working with no tool in flight (Claude Code's
    /// `system`/`status` `compacting`): the execution budget holds until
    /// the next event line (R5.10).
    Working {
        /// The status word, e.g. `compacting`.
        status: &'v str,
    },
    /// A task the agent tracks started (Claude Code `system`/`task_started`);
    /// it is a background task (R5.6) once `backgrounded`, or once its
    /// launching call returned while it still runs.
    TaskStarted {
        /// The task's id.
        task: &'v str,
        /// The call that launched it, when named.
        launch: Option<&'v str>,
        /// Its kind.
        kind: BackgroundKind,
        /// Launched to the background from the start (`run_in_background`).
        backgrounded: bool,
        /// The agent itself or one of its subagents.
        from: Provenance<'v>,
    },
    /// A task ended (Claude Code `system`/`task_notification`).
    TaskEnded {
        /// The task's id.
        task: &'v str,
        /// The call that launched it, when named.
        launch: Option<&'v str>,
        /// What the notification says.
        status: EndStatus,
    },
    /// The complete list of background tasks still running (Claude Code
    /// `system`/`background_tasks_changed`): an inventory (R5.6).
    TaskInventory(Vec<(&'v str, BackgroundKind)>),
    /// The session the agent runs in (Claude Code `system`/`init`): a new
    /// session id clears the background record (R5.6).
    Session {
        /// The session id.
        id: &'v str,
    },
    /// The turn ended (a result, a completed or failed turn).
    TurnEnd,
    /// A known event that carries no signal (init, usage, heartbeats).
    Other,
}

/// What [`AgentStream`] has seen so far. What it refused is not here: it
/// is counted on the task (R10.6), `tools.` for tool calls the core's set
/// refused (a bad id, a duplicate, an unknown finish, a full set),
/// `background.` for task reports the record did not apply, `args.` for
/// argument events.
///
/// # Examples
///
/// ```
/// use stallwarden_sources::agent::StreamCounts;
/// let c = StreamCounts::default();
/// assert_eq!(c.events + c.plain, 0);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct StreamCounts {
    /// Lines recognised as events of the format.
    pub events: u64,
    /// Lines passed as plain output (not JSON, unknown, or too long).
    pub plain: u64,
    /// Lines longer than [`MAX_EVENT_LINE`] (counted in `plain` too).
    pub oversized: u64,
    /// Tool calls started.
    pub tools_started: u64,
    /// Tool calls finished.
    pub tools_finished: u64,
    /// Turns ended.
    pub turns: u64,
    /// Tool calls reported only as completed, recorded as run whole.
    pub tools_whole: u64,
}

/// Reads one agent CLI's JSON-lines stream and reports what it says to a
/// task (R5.10).
///
/// Feed it the bytes as they pass through, in any chunking; it keeps at
/// most one line of up to [`MAX_EVENT_LINE`] bytes.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use stallwarden_sources::agent::{AgentStream, Format};
/// use watchdog_core::{Guard, ManualClock, Phase, Profile};
///
/// let guard = Guard::builder().clock(ManualClock::new()).build();
/// let task = guard.start("claude", Profile::default()).unwrap();
/// let mut stream = AgentStream::new(Format::ClaudeCode, task.recorder());
/// stream.feed(br#"{"type":"assistant","message":{"content":[{"type":"tool_use","id":"toolu_1","name":"Bash","input":{}}]}}
/// not json, passed as plain output
/// "#);
/// assert_eq!(task.status().unwrap().phase, Phase::Executing { tools: 1 });
/// assert_eq!(task.last_call().unwrap().name, "Bash");
/// assert_eq!(stream.counts().plain, 1);
/// ```
pub struct AgentStream {
    format: Format,
    recorder: Recorder,
    partial: AnthropicStream,
    tasks: tasks::Tasks,
    line: Vec<u8>,
    /// The current line passed [`MAX_EVENT_LINE`]: skip to its end.
    oversized: bool,
    counts: StreamCounts,
    /// Report every fed chunk as output (R5.1) too.
    count_output: bool,
    /// The task's judge of repetition (R5.12).
    repeats: watchdog_core::repeat::Repeats,
    /// The words of the line being handled, reused.
    words: Vec<u8>,
}

impl fmt::Debug for AgentStream {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AgentStream")
            .field("format", &self.format)
            .field("task", &self.recorder.id())
            .field("counts", &self.counts)
            .finish()
    }
}

impl AgentStream {
    /// Creates a reader of `format` reporting to `recorder`'s task.
    pub fn new(format: Format, recorder: Recorder) -> Self {
        AgentStream {
            format,
            partial: AnthropicStream::new(recorder.clone()),
            tasks: tasks::Tasks::new(recorder.clone()),
            repeats: recorder.repeats(),
            words: Vec::new(),
            recorder,
            line: Vec::new(),
            oversized: false,
            counts: StreamCounts::default(),
            count_output: false,
        }
    }

    /// Also counts the bytes and lines fed in the task's output totals
    /// (R5.1), for a runner whose bytes are not already counted elsewhere;
    /// `stallwarden run` counts them in its pump (a
    /// [`crate::output::CountingReader::counting_only`]) and leaves this
    /// off. Either way the stream signals each line by what it says
    /// (R5.12): a plain line judged as a line of output, text by its
    /// words, a call by its name, input and result.
    ///
    /// # Examples
    ///
    /// ```
    /// use stallwarden_sources::agent::{AgentStream, Format};
    /// use watchdog_core::{Guard, ManualClock, Profile};
    ///
    /// let guard = Guard::builder().clock(ManualClock::new()).build();
    /// let task = guard.start("codex", Profile::default()).unwrap();
    /// let mut stream = AgentStream::new(Format::Codex, task.recorder()).counting_output();
    /// stream.feed(b"{\"type\":\"turn.started\"}\n");
    /// assert_eq!(task.status().unwrap().total_lines, 1);
    /// ```
    pub fn counting_output(mut self) -> Self {
        self.count_output = true;
        self
    }

    /// Feeds the next bytes of the stream; complete lines are handled now.
    pub fn feed(&mut self, mut bytes: &[u8]) {
        if self.count_output && !bytes.is_empty() {
            let lines = memchr::memchr_iter(b'\n', bytes).count() as u64;
            self.recorder
                .output_counter()
                .count(bytes.len() as u64, lines);
        }
        while !bytes.is_empty() {
            let (head, rest, complete) = match memchr::memchr(b'\n', bytes) {
                Some(i) => (&bytes[..i], &bytes[i + 1..], true),
                None => (bytes, &[][..], false),
            };
            if !self.oversized {
                if self.line.len() + head.len() > MAX_EVENT_LINE {
                    self.oversized = true;
                    self.line = Vec::new();
                } else {
                    self.line.extend_from_slice(head);
                }
            }
            if complete {
                self.end_line();
            }
            bytes = rest;
        }
    }

    /// Ends the stream: a last line without a newline is handled, and
    /// calls still in flight are finished as cancelled.
    pub fn finish(&mut self) {
        if !self.line.is_empty() || self.oversized {
            self.end_line();
        }
        self.tasks.release_hold();
        self.abandon_calls();
    }

    /// Returns what the stream has seen so far.
    pub fn counts(&self) -> StreamCounts {
        self.counts
    }

    /// Returns how many of the task's tool calls are in flight: the core's
    /// one set (R10.6), which this stream keeps no copy of.
    pub fn in_flight(&self) -> usize {
        self.recorder.calls_in_flight()
    }

    /// Returns the background tasks the agent runs (R5.6), as pushed to
    /// the task's status.
    pub fn background(&self) -> &[watchdog_core::BackgroundTask] {
        self.tasks.record().tasks()
    }

    /// Returns the format being read.
    pub fn format(&self) -> Format {
        self.format
    }

    fn end_line(&mut self) {
        if std::mem::take(&mut self.oversized) {
            self.counts.oversized += 1;
            self.counts.plain += 1;
            // Too long to judge: output, as a line not yet ended is.
            self.recorder.signal(watchdog_core::SignalKind::Output);
            return;
        }
        let line = std::mem::take(&mut self.line);
        self.handle_line(&line);
        // Keep a modest buffer for the next line, not the largest seen.
        self.line = line;
        self.line.clear();
        // A no-op for a buffer already within it.
        self.line.shrink_to(64 * 1024);
    }

    /// Handles one complete line (without its newline).
    fn handle_line(&mut self, line: &[u8]) {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        // Cheap pre-check: an event is a JSON object.
        let first = line.iter().find(|b| !b.is_ascii_whitespace());
        let value = match first {
            Some(b'{') => serde_json::from_slice::<Value>(line).ok(),
            _ => None,
        };
        let Some(value) = value else {
            self.counts.plain += 1;
            self.plain(line);
            return;
        };
        let mut events = Vec::new();
        self.format.parse(&value, &mut events);
        if events.is_empty() {
            self.counts.plain += 1;
            self.plain(line);
        } else {
            self.counts.events += 1;
            // A working status holds only until the next event (R5.10).
            self.tasks.release_hold();
        }
        // R5.12: what the line says is judged, not its raw bytes. A call's
        // start and end are judged by the core with their input and result;
        // text by its words; any other event renews as output did.
        let calls = events.iter().any(|e| {
            matches!(
                e,
                AgentEvent::ToolStarted { .. }
                    | AgentEvent::ToolFinished { .. }
                    | AgentEvent::ToolCompleted { .. }
            )
        });
        let text = events.iter().any(|e| matches!(e, AgentEvent::Text));
        if !calls && text {
            self.words.clear();
            said::words(&value, &mut self.words);
            let kind = self.repeats.said(&self.words, said::text(&value));
            self.recorder.signal(kind);
        } else if !calls && !events.is_empty() {
            self.recorder.signal(watchdog_core::SignalKind::Output);
        }
        for event in events {
            self.apply(event, &value);
        }
    }

    /// A line that is not an event: judged as a line of output.
    fn plain(&mut self, line: &[u8]) {
        let kind = self.repeats.line(line);
        self.recorder.signal(kind);
    }

    /// The words of the object in `value` that carries call `id`.
    fn call_words(&mut self, value: &Value, id: &str) -> Vec<u8> {
        let mut words = Vec::new();
        if let Some(holder) = said::holder(value, id) {
            said::words(holder, &mut words);
        }
        words
    }

    fn apply(&mut self, event: AgentEvent<'_>, value: &Value) {
        match event {
            AgentEvent::ToolStarted { id, name, detail } => {
                let input = self.call_words(value, id);
                self.started(id, &call_name(name, detail), &input);
            }
            AgentEvent::ToolCompleted {
                id,
                name,
                detail,
                ok,
            } => {
                let outcome = if ok {
                    CallOutcome::Success
                } else {
                    CallOutcome::Error
                };
                let words = self.call_words(value, id);
                if self.recorder.is_call_in_flight(id) {
                    self.finished(id, outcome, &words);
                } else {
                    self.whole(id, &call_name(name, detail), outcome, &words);
                }
            }
            AgentEvent::Working { status } => self.tasks.hold(status),
            AgentEvent::TaskStarted {
                task,
                launch,
                kind,
                backgrounded,
                from,
            } => {
                let in_flight = launch.is_some_and(|l| self.recorder.is_call_in_flight(l));
                self.tasks.started(
                    tasks::Started {
                        task,
                        launch,
                        kind,
                        backgrounded,
                        from,
                    },
                    in_flight,
                );
            }
            AgentEvent::TaskEnded {
                task,
                launch,
                status,
            } => self.tasks.ended(task, launch, status),
            AgentEvent::TaskInventory(items) => self.tasks.inventory(&items),
            AgentEvent::Session { id } => self.tasks.session(id),
            AgentEvent::ToolFinished { id, ok } => {
                let outcome = if ok {
                    CallOutcome::Success
                } else {
                    CallOutcome::Error
                };
                let result = self.call_words(value, id);
                self.finished(id, outcome, &result);
            }
            AgentEvent::Partial(event) => {
                // Rejections are counted on the task by the adapter (`args.`).
                let _ = self.partial.feed_value(event);
            }
            AgentEvent::Text | AgentEvent::Other => {}
            AgentEvent::TurnEnd => {
                self.counts.turns += 1;
                self.partial.turn_end();
                self.abandon_calls();
                self.tasks.turn_end();
            }
        }
    }

    /// Starts a call on the core's one set of calls in flight, which
    /// checks the id and name and the cap (R10.6); a refusal is counted on
    /// the task (`tools.`).
    fn started(&mut self, id: &str, name: &str, input: &[u8]) {
        if tools::start_with(&self.recorder, id, name, input).is_ok() {
            self.counts.tools_started += 1;
        }
    }

    fn finished(&mut self, id: &str, outcome: CallOutcome, result: &[u8]) {
        match tools::finish_with(&self.recorder, id, outcome, result) {
            Ok(()) => self.counts.tools_finished += 1,
            // A result for a call that never started (a Codex item that
            // completes without starting, a resumed session): counted.
            Err(ToolCallError::UnknownCall(_)) => return,
            Err(_) => {}
        }
        // A task that outlives the call that launched it runs in the
        // background from now on (R5.6).
        self.tasks.call_returned(id);
    }

    /// Records a call reported only as completed: started and finished at
    /// once, so the last call shows it and the in-flight set is untouched.
    fn whole(&mut self, id: &str, name: &str, outcome: CallOutcome, words: &[u8]) {
        let ran = tools::start_with(&self.recorder, id, name, words)
            .and_then(|()| tools::finish_with(&self.recorder, id, outcome, words));
        if ran.is_ok() {
            self.counts.tools_whole += 1;
        }
    }

    /// Finishes every call still in flight as cancelled: the turn or the
    /// stream ended without their results.
    fn abandon_calls(&mut self) {
        if let Ok(n) = self.recorder.finish_calls(CallOutcome::Cancelled) {
            self.counts.tools_finished += n as u64;
        }
    }
}

/// Returns `v[key]` as a string, if it is one.
fn str_at<'v>(v: &'v Value, key: &str) -> Option<&'v str> {
    v.get(key).and_then(Value::as_str)
}

#[cfg(test)]
mod tests {
    use super::*;
    use watchdog_core::{Guard, ManualClock, Profile};

    // Bounded memory (R5.10): after a long line the buffer keeps 64 KiB for
    // the next one, not the largest line seen, and a short line leaves it
    // alone (kills the issue-26 mutants of end_line's `> 64 * 1024` test and
    // its `shrink_to(64 * 1024)`).
    #[test]
    fn the_line_buffer_shrinks_to_64_kib_after_a_long_line() {
        let guard = Guard::builder().clock(ManualClock::new()).build();
        let task = guard.start("agent", Profile::default()).unwrap();
        let mut stream = AgentStream::new(Format::Gemini, task.recorder());
        let mut long = vec![b'x'; 1 << 20];
        long.push(b'\n');
        stream.feed(&long);
        assert_eq!(stream.counts().plain, 1);
        let cap = stream.line.capacity();
        assert!((64 * 1024..2 * 64 * 1024).contains(&cap), "{cap}");
        stream.feed(b"{\"type\":\"init\"}\n");
        assert_eq!(stream.counts().events, 1);
        assert_eq!(stream.line.capacity(), cap);
    }
}
