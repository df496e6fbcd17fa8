//! R5.12 on the recordings the project keeps: none of the real streams
//! (fixtures/recorded, SOURCES.md there) nor the recorded agent CLI runs
//! (fixtures/agent, SOURCES.md there) is judged a loop. Each is replayed
//! one line per second on the virtual clock under a 10 s idle budget, the
//! worst pace a loop detector could meet: a run of ten lines that only
//! repeat would stall it. None does.

use std::path::{Path, PathBuf};
use std::time::Duration;

use stallwarden_sources::agent::{AgentStream, Format};
use watchdog_core::{Guard, ManualClock, Profile, RecordingSink, SignalKind};

fn files(dir: &str) -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(dir);
    let mut out = Vec::new();
    for sub in std::fs::read_dir(&root).unwrap() {
        let sub = sub.unwrap().path();
        if sub.is_dir() {
            for f in std::fs::read_dir(&sub).unwrap() {
                out.push(f.unwrap().path());
            }
        }
    }
    out.sort();
    assert!(!out.is_empty(), "no recordings under {}", root.display());
    out
}

fn guard() -> (Guard, RecordingSink) {
    let sink = RecordingSink::new();
    let guard = Guard::builder()
        .clock(ManualClock::new())
        .sink(sink.clone())
        .build();
    (guard, sink)
}

fn idle_10s() -> Profile {
    // No deadline or execution budget of the runs' own: silence only.
    Profile::default().idle(Duration::from_secs(10))
}

// The raw lines of the services' streams, as a plain command's output:
// each line its own read, so nothing hides a repeat in a larger read.
#[test]
fn no_recorded_service_stream_is_judged_a_loop_line_by_line() {
    for file in files("recorded") {
        let (guard, sink) = guard();
        let task = guard.start("stream", idle_10s()).unwrap();
        let rec = task.recorder();
        let counter = rec.output_counter();
        let mut lines = rec.repeats().lines();
        let text = std::fs::read_to_string(&file).unwrap();
        let mut repeats = 0;
        for line in text.lines() {
            let v = lines.feed(format!("{line}\n").as_bytes());
            counter.record_as(line.len() as u64 + 1, v.newlines, v.kind);
            repeats += usize::from(v.kind == SignalKind::Repeat);
            guard.advance(Duration::from_secs(1));
        }
        let stalls = sink
            .events_of(task.id())
            .into_iter()
            .filter(|e| e.kind.type_name() == "stalled")
            .count();
        assert_eq!(stalls, 0, "{}: {repeats} repeats", file.display());
    }
}

// The agent CLIs' recorded runs, read as `--stream` reads them.
#[test]
fn no_recorded_agent_cli_run_is_judged_a_loop() {
    for file in files("agent") {
        if file.extension().is_none_or(|e| e != "jsonl") {
            continue;
        }
        let dir = file
            .parent()
            .unwrap()
            .file_name()
            .unwrap()
            .to_str()
            .unwrap();
        let format: Format = dir.parse().unwrap();
        let (guard, sink) = guard();
        let task = guard.start("agent", idle_10s()).unwrap();
        let mut stream = AgentStream::new(format, task.recorder()).counting_output();
        let text = std::fs::read_to_string(&file).unwrap();
        for line in text.lines() {
            stream.feed(format!("{line}\n").as_bytes());
            guard.advance(Duration::from_secs(1));
        }
        let stalled: Vec<_> = sink
            .events_of(task.id())
            .into_iter()
            .filter(|e| e.kind.type_name() == "stalled")
            .collect();
        assert!(stalled.is_empty(), "{}: {stalled:?}", file.display());
        // Nothing in them even repeats once since the last renewal.
        assert_eq!(task.status().unwrap().repeating, None, "{}", file.display());
    }
}
