//! A sink that writes the JSON-lines events of R8.3.
//!
//! One JSON object per line, written in one `write_all` and flushed per
//! event, to any writer (a file, stderr, a pipe). The line shape is the
//! core's [`Event`] serialization, so every JSON-writing part of stallwarden
//! agrees on it. A heartbeat-only mode writes the `shell_progress` object
//! headless agent gateways already understand.

use std::collections::{HashSet, VecDeque};
use std::fmt;
use std::fs::File;
use std::io::{self, BufWriter, Stderr, Write};
use std::path::{Path, PathBuf};

use parking_lot::Mutex;
use serde::Serialize;
use watchdog_core::{Delivery, Event, EventKind, Sink, SinkError, TaskId};

/// How many settled task ids the gate remembers; a line arriving for an
/// older settled task than that would slip through. The guard itself never
/// emits after `finished` (R3.8): this gate is a second line of defence.
const SETTLED_MEMORY: usize = 65_536;

/// What the sink writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mode {
    /// Every event, R8.3 shape.
    Events,
    /// Only heartbeats, as `shell_progress` objects.
    ShellProgress,
}

/// The Qwen-compatible heartbeat shape (seed 000): durations are monotonic
/// ages, optional fields are absent rather than zero.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ShellProgress {
    #[serde(rename = "type")]
    ty: &'static str,
    elapsed_ms: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    last_output_age_ms: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    total_lines: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    total_bytes: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    timeout_ms: Option<u64>,
}

struct State<W> {
    writer: W,
    settled: HashSet<TaskId>,
    settled_order: VecDeque<TaskId>,
    late_dropped: u64,
}

impl<W> State<W> {
    fn is_settled(&self, id: TaskId) -> bool {
        self.settled.contains(&id)
    }

    fn settle(&mut self, id: TaskId) {
        if self.settled.insert(id) {
            self.settled_order.push_back(id);
            if self.settled_order.len() > SETTLED_MEMORY {
                if let Some(old) = self.settled_order.pop_front() {
                    self.settled.remove(&old);
                }
            }
        }
    }
}

/// A sink that writes one JSON object per event, one per line (R8.3).
///
/// Every line has `type`, `task`, `at` (RFC 3339, milliseconds) and
/// `elapsed_ms`, then the fields R8.3 lists for its type. Each line is
/// flushed as it is written, so a reader tailing the file sees events as
/// they happen. A task's `finished` line is its last: a line for a task that
/// has already finished is dropped with a warning (R3.8).
///
/// Delivery is [`Delivery::Isolated`] (the default): writes may block on a
/// slow disk or a full pipe without delaying the guard or other sinks. Call
/// [`Guard::flush`](watchdog_core::Guard::flush) before the process exits so
/// the last lines are written.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use stallwarden_sinks::jsonl::JsonLinesSink;
/// use watchdog_core::{Guard, ManualClock, Profile};
///
/// let dir = tempfile::tempdir().unwrap();
/// let path = dir.path().join("events.jsonl");
/// let guard = Guard::builder()
///     .clock(ManualClock::new())
///     .sink(JsonLinesSink::create(&path).unwrap())
///     .build();
/// guard.start("build", Profile::default()).unwrap().finish_completed();
/// assert!(guard.flush(Duration::from_secs(5)));
///
/// let text = std::fs::read_to_string(&path).unwrap();
/// let lines: Vec<serde_json::Value> =
///     text.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
/// assert_eq!(lines[0]["type"], "started");
/// assert_eq!(lines[1]["type"], "finished");
/// assert_eq!(lines[1]["outcome"], "completed");
/// ```
pub struct JsonLinesSink<W: Write + Send + 'static> {
    state: Mutex<State<W>>,
    mode: Mode,
    name: String,
}

impl<W: Write + Send + 'static> fmt::Debug for JsonLinesSink<W> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let st = self.state.lock();
        f.debug_struct("JsonLinesSink")
            .field("name", &self.name)
            .field("mode", &self.mode)
            .field("settled", &st.settled.len())
            .field("late_dropped", &st.late_dropped)
            .finish()
    }
}

/// The error [`JsonLinesSink::create`] returns: the file that could not be
/// created, and why.
#[derive(Debug, thiserror::Error)]
#[error("cannot create events file {}: {source}", path.display())]
pub struct CreateError {
    /// The path given.
    pub path: PathBuf,
    /// What the OS said.
    #[source]
    pub source: io::Error,
}

impl JsonLinesSink<Stderr> {
    /// Creates a sink writing to the process's stderr (`--events -`).
    ///
    /// # Examples
    ///
    /// ```
    /// use stallwarden_sinks::jsonl::JsonLinesSink;
    /// let sink = JsonLinesSink::stderr();
    /// # let _ = sink;
    /// ```
    pub fn stderr() -> Self {
        Self::with_name(io::stderr(), "jsonl:stderr".into())
    }
}

impl JsonLinesSink<BufWriter<File>> {
    /// Creates (or truncates) the file at `path` and writes events to it.
    ///
    /// # Errors
    ///
    /// A [`CreateError`] naming the path when the file cannot be created.
    ///
    /// # Examples
    ///
    /// ```
    /// use stallwarden_sinks::jsonl::JsonLinesSink;
    /// let err = JsonLinesSink::create("/nonexistent-dir/events.jsonl").unwrap_err();
    /// assert!(err.to_string().contains("/nonexistent-dir/events.jsonl"));
    /// ```
    pub fn create(path: impl AsRef<Path>) -> Result<Self, CreateError> {
        let path = path.as_ref();
        let file = File::create(path).map_err(|source| CreateError {
            path: path.to_owned(),
            source,
        })?;
        Ok(Self::with_name(
            BufWriter::new(file),
            format!("jsonl:{}", path.display()),
        ))
    }
}

impl<W: Write + Send + 'static> JsonLinesSink<W> {
    /// Creates a sink writing every event to `writer`.
    ///
    /// # Examples
    ///
    /// ```
    /// use stallwarden_sinks::jsonl::JsonLinesSink;
    /// let sink = JsonLinesSink::new(std::io::stdout());
    /// # let _ = sink;
    /// ```
    pub fn new(writer: W) -> Self {
        Self::with_name(writer, "jsonl".into())
    }

    /// Creates a sink writing every event to `writer`, named `name` in its
    /// errors (`jsonl:PATH`), for a writer opened by the caller: each line
    /// is one `write_all` followed by a flush.
    ///
    /// # Examples
    ///
    /// ```
    /// use stallwarden_sinks::jsonl::JsonLinesSink;
    /// use watchdog_core::Sink;
    /// let sink = JsonLinesSink::named(Vec::new(), "jsonl:memory".into());
    /// assert_eq!(sink.name(), "jsonl:memory");
    /// ```
    pub fn named(writer: W, name: String) -> Self {
        Self::with_name(writer, name)
    }

    fn with_name(writer: W, name: String) -> Self {
        JsonLinesSink {
            state: Mutex::new(State {
                writer,
                settled: HashSet::new(),
                settled_order: VecDeque::new(),
                late_dropped: 0,
            }),
            mode: Mode::Events,
            name,
        }
    }

    /// Writes only heartbeats, each as the Qwen-compatible object
    /// `{"type":"shell_progress","elapsedMs":…,"lastOutputAgeMs":…,
    /// "totalLines":…,"totalBytes":…,"timeoutMs":…}` (seed 000), for
    /// gateways that already understand it.
    ///
    /// `lastOutputAgeMs` is absent before any output; `totalLines` and
    /// `totalBytes` are always present; `timeoutMs` is the task's deadline,
    /// absent when it has none. Every other event is skipped. The object
    /// carries no task name: use one sink per task stream.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use stallwarden_sinks::jsonl::JsonLinesSink;
    /// use watchdog_core::{Guard, ManualClock, Profile};
    ///
    /// let dir = tempfile::tempdir().unwrap();
    /// let path = dir.path().join("progress.jsonl");
    /// let guard = Guard::builder()
    ///     .clock(ManualClock::new())
    ///     .sink(JsonLinesSink::create(&path).unwrap().heartbeat_only())
    ///     .build();
    /// let task = guard.start("sql", Profile::default()
    ///     .idle(Duration::from_secs(60))
    ///     .heartbeat_interval(Some(Duration::from_secs(10)))).unwrap();
    /// guard.advance(Duration::from_secs(10));
    /// task.finish_completed();
    /// guard.flush(Duration::from_secs(5));
    /// let line = std::fs::read_to_string(&path).unwrap();
    /// assert_eq!(line.trim(), r#"{"type":"shell_progress","elapsedMs":10000,"totalLines":0,"totalBytes":0}"#);
    /// ```
    #[must_use]
    pub fn heartbeat_only(mut self) -> Self {
        self.mode = Mode::ShellProgress;
        self
    }

    /// Returns how many lines the settled gate dropped because their task
    /// had already finished (always 0 with a correct guard).
    pub fn late_dropped(&self) -> u64 {
        self.state.lock().late_dropped
    }

    /// Renders the line for `event`, or `None` when this mode skips it.
    fn render(&self, event: &Event) -> Result<Option<Vec<u8>>, serde_json::Error> {
        let mut line = match self.mode {
            Mode::Events => serde_json::to_vec(event)?,
            Mode::ShellProgress => match &event.kind {
                EventKind::Heartbeat {
                    last_output_age,
                    total_lines,
                    total_bytes,
                    deadline,
                    ..
                } => serde_json::to_vec(&ShellProgress {
                    ty: "shell_progress",
                    elapsed_ms: millis(event.elapsed),
                    last_output_age_ms: last_output_age.map(millis),
                    total_lines: Some(*total_lines),
                    total_bytes: Some(*total_bytes),
                    timeout_ms: deadline.map(millis),
                })?,
                _ => return Ok(None),
            },
        };
        line.push(b'\n');
        Ok(Some(line))
    }
}

impl<W: Write + Send + 'static> Sink for JsonLinesSink<W> {
    fn on_event(&self, event: &Event) -> Result<(), SinkError> {
        let mut st = self.state.lock();
        if st.is_settled(event.task) {
            st.late_dropped += 1;
            tracing::warn!(
                sink = %self.name,
                task = %event.name,
                event = event.kind.type_name(),
                "event after the task finished: dropped (R3.8)"
            );
            return Ok(());
        }
        if matches!(event.kind, EventKind::Finished { .. }) {
            // Settle even if the write below fails: nothing may follow it.
            st.settle(event.task);
        }
        let Some(line) = self.render(event).map_err(SinkError::new)? else {
            return Ok(());
        };
        st.writer
            .write_all(&line)
            .and_then(|()| st.writer.flush())
            .map_err(|e| {
                SinkError::new(format!(
                    "{}: cannot write {} event of task {}: {e}",
                    self.name,
                    event.kind.type_name(),
                    event.name
                ))
            })
    }

    fn delivery(&self) -> Delivery {
        Delivery::Isolated
    }

    fn name(&self) -> &str {
        &self.name
    }
}

fn millis(d: std::time::Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}
