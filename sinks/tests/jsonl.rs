//! The JSON-lines sink against a guard on virtual time: every line's shape
//! checked field by field against R8.3, flush per event, the settled gate
//! (R3.8), the `shell_progress` heartbeat mode (seed 000), and a `Vec` of
//! sinks as a sink (R6.1).

use std::collections::BTreeSet;
use std::io::{self, Write};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use serde_json::Value;
use stallwarden_sinks::jsonl::JsonLinesSink;
use watchdog_core::{
    CallOutcome, ChildInfo, ChildProbe, Guard, ManualClock, Outcome, ProcState, Profile,
    RecordingSink, Sink, TaskId,
};

const SECOND: Duration = Duration::from_secs(1);
const FLUSH: Duration = Duration::from_secs(10);

/// A writer whose bytes and flushes the test can read after the sink has
/// moved into the guard.
#[derive(Clone, Default)]
struct SharedBuf {
    bytes: Arc<Mutex<Vec<u8>>>,
    flushes: Arc<AtomicUsize>,
}

impl Write for SharedBuf {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.bytes.lock().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        self.flushes.fetch_add(1, Ordering::SeqCst);
        Ok(())
    }
}

impl SharedBuf {
    fn text(&self) -> String {
        String::from_utf8(self.bytes.lock().clone()).expect("lines are UTF-8")
    }

    fn lines(&self) -> Vec<Value> {
        self.text()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("bad line {l:?}: {e}")))
            .collect()
    }
}

/// Runs `scenario` on a virtual-time guard whose only sink is a JSON-lines
/// sink, and returns the parsed lines.
fn lines_of(scenario: impl FnOnce(&Guard)) -> Vec<Value> {
    let buf = SharedBuf::default();
    let guard = Guard::builder()
        .clock(ManualClock::new())
        .sink(JsonLinesSink::new(buf.clone()))
        .build();
    scenario(&guard);
    assert!(guard.flush(FLUSH), "the JSON-lines sink did not drain");
    buf.lines()
}

fn quiet() -> Profile {
    Profile::default().idle(5 * SECOND).heartbeat_interval(None)
}

fn types(lines: &[Value]) -> Vec<&str> {
    lines.iter().map(|l| l["type"].as_str().unwrap()).collect()
}

fn keys(line: &Value) -> BTreeSet<&str> {
    line.as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect()
}

/// R8.3: every line has `type`, `task`, `at` and `elapsed_ms`, then exactly
/// the fields listed for its type (plus `extra`, fields the core documents
/// beyond R8.3).
fn assert_fields(line: &Value, fields: &[&str]) {
    let mut want: BTreeSet<&str> = ["type", "task", "at", "elapsed_ms"].into();
    want.extend(fields);
    assert_eq!(keys(line), want, "line {line}");
    let at = line["at"].as_str().expect("at is a string");
    assert!(
        is_rfc3339_millis(at),
        "at is not RFC 3339 with milliseconds: {at}"
    );
    assert!(
        line["elapsed_ms"].is_u64(),
        "elapsed_ms is not an integer: {line}"
    );
    assert!(line["task"].is_string());
}

/// `YYYY-MM-DDTHH:MM:SS.mmmZ`.
fn is_rfc3339_millis(s: &str) -> bool {
    let b = s.as_bytes();
    b.len() == 24
        && b.iter().enumerate().all(|(i, c)| match i {
            4 | 7 => *c == b'-',
            10 => *c == b'T',
            13 | 16 => *c == b':',
            19 => *c == b'.',
            23 => *c == b'Z',
            _ => c.is_ascii_digit(),
        })
}

fn only<'a>(lines: &'a [Value], ty: &str) -> Vec<&'a Value> {
    lines.iter().filter(|l| l["type"] == ty).collect()
}

// R8.3 `started`: `pid`, absent when no process is attached; `at` is the
// wall clock taken with the monotonic reading (R2.7).
#[test]
fn started_line_has_pid_only_when_a_process_is_attached() {
    let lines = lines_of(|g| {
        g.start_process("proc", quiet(), 4242)
            .unwrap()
            .finish_completed();
        g.start("plain", quiet()).unwrap().finish_completed();
    });
    assert_eq!(
        types(&lines),
        ["started", "finished", "started", "finished"]
    );
    assert_fields(&lines[0], &["pid"]);
    assert_eq!(lines[0]["pid"], 4242);
    assert_eq!(lines[0]["task"], "proc");
    assert_eq!(lines[0]["elapsed_ms"], 0);
    assert_eq!(lines[0]["at"], "2026-01-01T00:00:00.000Z");
    assert_fields(&lines[2], &[]);
}

// R8.3 `long_running` has no fields of its own (R3.6).
#[test]
fn long_running_line_has_common_fields_only() {
    let lines = lines_of(|g| {
        let t = g
            .start(
                "long",
                quiet().idle(60 * SECOND).long_running_after(3 * SECOND),
            )
            .unwrap();
        g.advance(3 * SECOND);
        t.finish_completed();
    });
    assert_eq!(types(&lines), ["started", "long_running", "finished"]);
    assert_fields(&lines[1], &[]);
    assert_eq!(lines[1]["elapsed_ms"], 3000);
    assert_eq!(lines[1]["at"], "2026-01-01T00:00:03.000Z");
}

// R8.3 `heartbeat`: `last_output_age_ms` absent before any output,
// `total_lines`, `total_bytes`, `idle_remaining_ms`, `deadline_ms` (absent
// without a deadline). R3.7: only after a whole silent interval.
#[test]
fn heartbeat_line_fields_follow_r8_3() {
    let lines = lines_of(|g| {
        let profile = Profile::default()
            .idle(60 * SECOND)
            .deadline(120 * SECOND)
            .heartbeat_interval(Some(10 * SECOND));
        let t = g.start("sql", profile).unwrap();
        g.advance(10 * SECOND);
        t.output(300, 4);
        g.advance(20 * SECOND);
        t.finish_completed();

        let t = g
            .start(
                "nodeadline",
                quiet()
                    .idle(60 * SECOND)
                    .heartbeat_interval(Some(10 * SECOND)),
            )
            .unwrap();
        g.advance(10 * SECOND);
        t.finish_completed();
    });
    let beats = only(&lines, "heartbeat");
    let first = beats[0];
    assert_fields(
        first,
        &[
            "total_lines",
            "total_bytes",
            "idle_remaining_ms",
            "deadline_ms",
        ],
    );
    assert_eq!(first["total_lines"], 0);
    assert_eq!(first["total_bytes"], 0);
    assert_eq!(first["deadline_ms"], 120_000);
    assert_eq!(first["idle_remaining_ms"], 50_000);

    let last_sql = beats.iter().rev().find(|l| l["task"] == "sql").unwrap();
    assert_fields(
        last_sql,
        &[
            "last_output_age_ms",
            "total_lines",
            "total_bytes",
            "idle_remaining_ms",
            "deadline_ms",
        ],
    );
    assert_eq!(last_sql["elapsed_ms"], 30_000);
    assert_eq!(last_sql["last_output_age_ms"], 20_000);
    assert_eq!(last_sql["total_lines"], 4);
    assert_eq!(last_sql["total_bytes"], 300);
    assert_eq!(last_sql["idle_remaining_ms"], 40_000);

    let no_deadline = beats.iter().find(|l| l["task"] == "nodeadline").unwrap();
    assert_fields(
        no_deadline,
        &["total_lines", "total_bytes", "idle_remaining_ms"],
    );
}

// R8.3 `stalled`: `budget` (each of idle, execution, startup), `strike`,
// `terminate_after`, `silent_ms`, no `children` when unknown; `recovered`:
// `silent_ms` (R3.3). `last_step` is an extra the core documents (R3.1).
#[test]
fn stalled_and_recovered_lines_name_each_budget() {
    let lines = lines_of(|g| {
        let profile = quiet().execution(20 * SECOND).terminate_after(0);
        let t = g.start("turn", profile).unwrap();
        g.advance(5 * SECOND); // no progress yet: startup
        g.advance(SECOND);
        t.output(10, 1); // recovered after 6 s of silence
        g.advance(5 * SECOND); // idle
        t.tool_started("call-1", "bash").unwrap(); // recovered
        g.advance(20 * SECOND); // execution
        t.tool_finished("call-1", CallOutcome::Success).unwrap();
        t.finish_completed();
    });
    let stalls = only(&lines, "stalled");
    let budgets: Vec<_> = stalls
        .iter()
        .map(|l| l["budget"].as_str().unwrap())
        .collect();
    assert_eq!(budgets, ["startup", "idle", "execution"]);
    for s in &stalls {
        let extra: &[&str] = if s.get("last_step").is_some() {
            &["last_step"]
        } else {
            &[]
        };
        let mut fields = vec!["budget", "strike", "terminate_after", "silent_ms"];
        fields.extend(extra);
        assert_fields(s, &fields);
        assert_eq!(s["strike"], 1);
        assert_eq!(s["terminate_after"], 0);
    }
    assert_eq!(stalls[0]["silent_ms"], 5_000);
    assert_eq!(stalls[1]["silent_ms"], 5_000);
    assert_eq!(stalls[2]["silent_ms"], 20_000);
    assert_eq!(
        stalls[2]["last_step"], "tool \"bash\" still running",
        "R3.1 last step"
    );

    let recovered = only(&lines, "recovered");
    assert_eq!(recovered.len(), 3, "after output, tool start, tool finish");
    for r in &recovered {
        assert_fields(r, &["silent_ms"]);
    }
    assert_eq!(recovered[0]["silent_ms"], 6_000);
    assert_eq!(types(&lines).last(), Some(&"finished"));
}

#[derive(Debug)]
struct WedgedGrep;

impl ChildProbe for WedgedGrep {
    fn children(&self) -> Option<Vec<ChildInfo>> {
        Some(vec![
            ChildInfo {
                pid: 7,
                name: "grep".into(),
                state: ProcState::DiskWait,
                wchan: Some("io_schedule".into()),
                blocked_on: None,
                started_unix_ms: None,
                cpu_ms: 3,
                cpu_delta_ms: Some(0),
            },
            ChildInfo {
                pid: 8,
                name: "cc1".into(),
                state: ProcState::Running,
                wchan: None,
                blocked_on: None,
                started_unix_ms: None,
                cpu_ms: 900,
                cpu_delta_ms: Some(400),
            },
        ])
    }
}

// R8.3 `stalled` `children` when known: the suspects of R3.1/R5.5 only,
// each with its pid, name (never argv) and state.
#[test]
fn stalled_line_lists_suspect_children_when_known() {
    let lines = lines_of(|g| {
        let t = g
            .start_process("harness", quiet().terminate_after(0), 100)
            .unwrap();
        t.set_children_probe(Arc::new(WedgedGrep));
        g.advance(5 * SECOND);
        t.finish_completed();
    });
    let stall = only(&lines, "stalled")[0];
    let children = stall["children"].as_array().expect("children present");
    assert_eq!(children.len(), 1, "only the suspect: {stall}");
    assert_eq!(children[0]["pid"], 7);
    assert_eq!(children[0]["name"], "grep");
    assert_eq!(children[0]["state"], "disk_wait");
    assert_eq!(children[0]["wchan"], "io_schedule");
}

// R8.3 `deadline_exceeded` `reason`, `cancelling` `reason` + `signal`,
// `killed` `signal`, `finished` with a signal and no exit code (R3.4, R3.5).
#[test]
fn deadline_cancel_kill_finish_lines_follow_r8_3() {
    let lines = lines_of(|g| {
        let profile = quiet()
            .idle(60 * SECOND)
            .deadline(3 * SECOND)
            .grace_period(2 * SECOND);
        let t = g.start_process("build", profile, 4242).unwrap();
        g.advance(3 * SECOND);
        g.advance(2 * SECOND);
        t.finish(Outcome::Cancelled, None, Some(9)).unwrap();
    });
    assert_eq!(
        types(&lines),
        [
            "started",
            "deadline_exceeded",
            "cancelling",
            "killed",
            "finished"
        ]
    );
    assert_fields(&lines[1], &["reason"]);
    assert!(lines[1]["reason"].as_str().unwrap().contains("deadline"));
    assert_fields(&lines[2], &["reason", "signal"]);
    assert_eq!(lines[2]["signal"], "SIGTERM");
    assert_fields(&lines[3], &["signal"]);
    assert_eq!(lines[3]["signal"], "SIGKILL");
    assert_eq!(lines[3]["elapsed_ms"], 5_000);
    assert_fields(&lines[4], &["outcome", "signal"]);
    assert_eq!(lines[4]["outcome"], "cancelled");
    assert_eq!(lines[4]["signal"], 9);
}

// R8.3 `liveness_lost` and `triggered`: `reason` (R2.5, R2.10, R3.4).
#[test]
fn liveness_lost_and_triggered_lines_carry_a_reason() {
    let lines = lines_of(|g| {
        let t = g
            .start("worker", quiet().idle(60 * SECOND).liveness(2 * SECOND))
            .unwrap();
        t.heartbeat(); // arms liveness
        g.advance(2 * SECOND);
        t.finish_completed();
        let t = g.start("selfcheck", quiet()).unwrap();
        t.trigger("disk full").unwrap();
        t.finish_failed();
    });
    let lost = only(&lines, "liveness_lost")[0];
    assert_fields(lost, &["reason"]);
    assert!(lost["reason"].as_str().unwrap().contains("heartbeat"));
    let trig = only(&lines, "triggered")[0];
    assert_fields(trig, &["reason"]);
    assert_eq!(trig["reason"], "disk full");
    let cancel = only(&lines, "cancelling");
    assert_eq!(cancel.len(), 2, "both cancel at once (R3.4, R2.10)");
}

// R8.3 `finished`: `outcome` of each kind, `exit_code` absent when killed by
// a signal, `signal` absent otherwise; R3.9 a dropped handle is abandoned.
#[test]
fn finished_line_outcomes_and_exit_fields() {
    let lines = lines_of(|g| {
        g.start("ok", quiet())
            .unwrap()
            .finish(Outcome::Completed, Some(0), None)
            .unwrap();
        g.start("bad", quiet())
            .unwrap()
            .finish(Outcome::Failed, Some(3), None)
            .unwrap();
        drop(g.start("gone", quiet()).unwrap());
    });
    let fin = only(&lines, "finished");
    assert_fields(fin[0], &["outcome", "exit_code"]);
    assert_eq!(fin[0]["outcome"], "completed");
    assert_eq!(fin[0]["exit_code"], 0);
    assert_fields(fin[1], &["outcome", "exit_code"]);
    assert_eq!(fin[1]["outcome"], "failed");
    assert_eq!(fin[1]["exit_code"], 3);
    assert_fields(fin[2], &["outcome"]);
    assert_eq!(fin[2]["outcome"], "abandoned");
}

// R8.3: one object per line, flushed per event, `finished` last.
#[test]
fn each_line_is_flushed_as_it_is_written() {
    let buf = SharedBuf::default();
    let guard = Guard::builder()
        .clock(ManualClock::new())
        .sink(JsonLinesSink::new(buf.clone()))
        .build();
    let t = guard.start("turn", quiet().grace_period(SECOND)).unwrap();
    guard.advance(5 * SECOND);
    guard.advance(SECOND);
    t.finish_completed();
    assert!(guard.flush(FLUSH));
    let text = buf.text();
    assert!(text.ends_with('\n'));
    let n = text.lines().count();
    assert_eq!(n, 5, "{text}");
    assert_eq!(buf.flushes.load(Ordering::SeqCst), n, "one flush per line");
    assert_eq!(
        types(&buf.lines()),
        ["started", "stalled", "cancelling", "killed", "finished"]
    );
}

// R3.8: the sink's own gate drops a line of a task after its `finished`,
// even if one ever reached it.
#[test]
fn a_line_after_finished_is_dropped_by_the_gate() {
    let rec = RecordingSink::new();
    let guard = Guard::builder()
        .clock(ManualClock::new())
        .sink(rec.clone())
        .build();
    let t = guard.start("turn", quiet().terminate_after(0)).unwrap();
    guard.advance(5 * SECOND);
    t.finish_completed();
    let events = rec.events();
    let stalled = events
        .iter()
        .find(|e| e.kind.type_name() == "stalled")
        .unwrap();

    let buf = SharedBuf::default();
    let sink = JsonLinesSink::new(buf.clone());
    for e in &events {
        sink.on_event(e).unwrap();
    }
    sink.on_event(stalled).unwrap(); // a late tick
    assert_eq!(sink.late_dropped(), 1);
    assert_eq!(types(&buf.lines()), ["started", "stalled", "finished"]);
}

// R3.8: the JSON lines sink remembers the last 65 536 finished tasks, so a
// late event of any of them is dropped; the one before them is forgotten.
#[test]
fn the_json_lines_sink_remembers_exactly_the_last_65536_finished_tasks() {
    let rec = RecordingSink::new();
    let guard = Guard::builder()
        .clock(ManualClock::new())
        .sink(rec.clone())
        .build();
    guard
        .start("t", Profile::default())
        .unwrap()
        .finish_completed();
    let events = rec.events();
    let (started, finished) = (&events[0], &events[1]);
    let sink = JsonLinesSink::new(std::io::sink());
    let with_id = |e: &watchdog_core::Event, id: u64| {
        let mut e = e.clone();
        e.task = TaskId::from_raw(id);
        e
    };
    for id in 1..=65_536 {
        sink.on_event(&with_id(finished, id)).unwrap();
    }
    sink.on_event(&with_id(started, 1)).unwrap();
    assert_eq!(sink.late_dropped(), 1, "task 1 is among the last 65 536");
    sink.on_event(&with_id(finished, 65_537)).unwrap();
    sink.on_event(&with_id(started, 1)).unwrap();
    sink.on_event(&with_id(started, 2)).unwrap();
    assert_eq!(sink.late_dropped(), 2, "task 1 forgotten, task 2 not");
}

/// A writer whose disk is full.
struct FullDisk;

impl Write for FullDisk {
    fn write(&mut self, _: &[u8]) -> io::Result<usize> {
        Err(io::Error::other("no space left on device"))
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

// R6.2: a write error is returned (the guard reports it) and names the
// event and task; it is not a panic.
#[test]
fn a_write_error_names_the_event_and_task() {
    let rec = RecordingSink::new();
    let guard = Guard::builder()
        .clock(ManualClock::new())
        .sink(rec.clone())
        .build();
    guard.start("turn", quiet()).unwrap().finish_completed();
    let sink = JsonLinesSink::new(FullDisk);
    let err = sink.on_event(&rec.events()[0]).unwrap_err().to_string();
    assert!(
        err.contains("started") && err.contains("turn") && err.contains("no space"),
        "{err}"
    );
}

// Seed 000: heartbeat-only mode writes `shell_progress` objects with
// camelCase keys; optional fields absent rather than zero; nothing else.
#[test]
fn heartbeat_only_mode_writes_shell_progress() {
    let buf = SharedBuf::default();
    let guard = Guard::builder()
        .clock(ManualClock::new())
        .sink(JsonLinesSink::new(buf.clone()).heartbeat_only())
        .build();
    let t = guard
        .start(
            "sql",
            Profile::default()
                .idle(300 * SECOND)
                .heartbeat_interval(Some(10 * SECOND)),
        )
        .unwrap();
    guard.advance(10 * SECOND);
    t.output(2048, 12);
    guard.advance(20 * SECOND);
    t.finish_completed();
    let t = guard
        .start(
            "timed",
            Profile::default()
                .idle(300 * SECOND)
                .deadline(30 * SECOND)
                .heartbeat_interval(Some(10 * SECOND)),
        )
        .unwrap();
    guard.advance(10 * SECOND);
    t.finish_completed();
    assert!(guard.flush(FLUSH));

    let lines = buf.lines();
    assert!(
        lines.iter().all(|l| l["type"] == "shell_progress"),
        "{lines:?}"
    );
    // Compared as values: with the `acp` feature serde_json keeps key order,
    // and the order of an object's keys is not part of the format.
    assert_eq!(
        lines[0],
        serde_json::json!({"elapsedMs": 10000, "totalBytes": 0, "totalLines": 0, "type": "shell_progress"})
    );
    let with_output = &lines[lines.len() - 2];
    assert_eq!(with_output["elapsedMs"], 30_000);
    assert_eq!(with_output["lastOutputAgeMs"], 20_000);
    assert_eq!(with_output["totalLines"], 12);
    assert_eq!(with_output["totalBytes"], 2048);
    assert!(with_output.get("timeoutMs").is_none());
    let timed = lines.last().unwrap();
    assert_eq!(timed["timeoutMs"], 30_000);
}

// `create` writes a real file; an uncreatable path is an error naming it.
#[test]
fn create_writes_a_real_file_and_names_a_bad_path() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("events.jsonl");
    let guard = Guard::builder()
        .clock(ManualClock::new())
        .sink(JsonLinesSink::create(&path).unwrap())
        .build();
    guard.start("job", quiet()).unwrap().finish_completed();
    assert!(guard.flush(FLUSH));
    let text = std::fs::read_to_string(&path).unwrap();
    assert_eq!(text.lines().count(), 2);

    let bad = dir.path().join("missing-dir").join("events.jsonl");
    let err = JsonLinesSink::create(&bad).unwrap_err();
    assert!(err.to_string().contains("missing-dir"), "{err}");
    assert_eq!(err.source.kind(), io::ErrorKind::NotFound);
}

// R6.1: a `Vec` of JSON-lines sinks is a sink; every element gets every line.
#[test]
fn a_vec_of_json_lines_sinks_is_a_sink() {
    let dir = tempfile::tempdir().unwrap();
    let paths = [dir.path().join("a.jsonl"), dir.path().join("b.jsonl")];
    let sinks: Vec<_> = paths
        .iter()
        .map(|p| JsonLinesSink::create(p).unwrap())
        .collect();
    let guard = Guard::builder()
        .clock(ManualClock::new())
        .sink(sinks)
        .build();
    let t = guard.start("turn", quiet().grace_period(SECOND)).unwrap();
    guard.advance(6 * SECOND);
    t.finish_completed();
    assert!(guard.flush(FLUSH));
    for p in &paths {
        let text = std::fs::read_to_string(p).unwrap();
        let lines: Vec<Value> = text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(
            types(&lines),
            ["started", "stalled", "cancelling", "killed", "finished"],
            "{}",
            p.display()
        );
    }
}
