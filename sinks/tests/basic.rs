//! Every sink of this crate on one guard at once, with threads finishing
//! tasks while another advances virtual time: across all of them, nothing
//! of a task arrives after its `finished`, which comes exactly once (R3.8,
//! R10.3), and no heartbeat sits between a cancel and the finish.

use std::collections::{BTreeMap, HashMap};
use std::io::{self, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use stallwarden_sinks::callback::CallbackSink;
use stallwarden_sinks::channel::ChannelSink;
use stallwarden_sinks::jsonl::JsonLinesSink;
use stallwarden_sinks::metrics::MetricsSink;
use stallwarden_sinks::token::CancelTokenSink;
use stallwarden_sinks::trace::TracingSink;
use watchdog_core::{Guard, ManualClock, Profile, RecordingSink};

const WORKERS: usize = 4;
const TASKS_PER_WORKER: usize = 60;

#[derive(Clone, Default)]
struct SharedBuf(Arc<Mutex<Vec<u8>>>);

impl Write for SharedBuf {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0.lock().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// Checks one sink's view of one task: `finished` exactly once and last,
/// and no heartbeat after `cancelling` (R3.8).
fn assert_settled(sink: &str, task: &str, types: &[String]) {
    let finished = types.iter().filter(|t| *t == "finished").count();
    assert_eq!(
        finished, 1,
        "{sink}: {task} has {finished} finished: {types:?}"
    );
    assert_eq!(
        types.last().map(String::as_str),
        Some("finished"),
        "{sink}: {task}: {types:?}"
    );
    if let Some(c) = types.iter().position(|t| t == "cancelling") {
        assert!(
            !types[c..].iter().any(|t| t == "heartbeat"),
            "{sink}: {task}: heartbeat after cancel: {types:?}"
        );
    }
}

/// Waits (bounded, in real time) until the ticker has moved virtual time
/// by `d`.
fn wait_virtual(guard: &Guard, d: Duration) {
    let from = guard.now();
    let give_up = std::time::Instant::now() + Duration::from_secs(60);
    while guard.now().saturating_since(from) < d {
        assert!(std::time::Instant::now() < give_up, "the ticker stopped");
        std::thread::yield_now();
    }
}

fn without_heartbeats(types: &[String]) -> Vec<&str> {
    types
        .iter()
        .map(String::as_str)
        .filter(|t| *t != "heartbeat")
        .collect()
}

// R3.8 / R10.3 end to end: finishes race ticks (stalls, heartbeats, kills)
// on another thread; every sink ends every task with one `finished`, and
// sees the same per-task sequence as the reference recorder.
#[test]
fn no_sink_sees_anything_of_a_task_after_its_finished() {
    let reference = RecordingSink::new();
    let channel = ChannelSink::new();
    let mut sub = channel.subscribe();
    let buf = SharedBuf::default();
    let jsonl = Arc::new(JsonLinesSink::new(buf.clone()));
    let via_callback: Arc<Mutex<Vec<(String, String)>>> = Arc::default();
    let cb_log = Arc::clone(&via_callback);
    let tokens = CancelTokenSink::new();
    let guard = Guard::builder()
        .clock(ManualClock::new())
        .sink(reference.clone())
        .sink(channel.clone())
        .sink(Arc::clone(&jsonl))
        .sink(CallbackSink::new(move |e| {
            cb_log
                .lock()
                .push((e.name.to_string(), e.kind.type_name().to_owned()))
        }))
        .sink(tokens.clone())
        .sink(MetricsSink::new())
        .sink(TracingSink::new())
        .build();

    let done = Arc::new(AtomicBool::new(false));
    let ticker = {
        let guard = guard.clone();
        let done = Arc::clone(&done);
        std::thread::spawn(move || {
            while !done.load(Ordering::Relaxed) {
                guard.advance(Duration::from_millis(250));
                std::thread::yield_now();
            }
        })
    };
    let workers: Vec<_> = (0..WORKERS)
        .map(|w| {
            let guard = guard.clone();
            let tokens = tokens.clone();
            std::thread::spawn(move || {
                let profile = Profile::default()
                    .idle(Duration::from_millis(2500))
                    .grace_period(Duration::from_millis(500))
                    .heartbeat_interval(Some(Duration::from_secs(1)));
                for n in 0..TASKS_PER_WORKER {
                    let name = format!("w{w}-{n}");
                    let t = guard.start(name.as_str(), profile.clone()).unwrap();
                    let token = tokens.token_for(name.as_str());
                    // Vary how long each task lives, in rounds of work.
                    for i in 0..(n * 7 + w * 13) % 40 {
                        if i % 9 == 0 {
                            t.output(10, 1);
                        }
                        std::thread::yield_now();
                    }
                    if n % 4 == 1 {
                        // Let this one go silent through heartbeats, stall,
                        // cancel and kill, so finishes race the verdicts.
                        wait_virtual(&guard, Duration::from_millis(3200));
                    }
                    if n % 5 == 0 {
                        let _ = t.cancel("runner stop");
                    }
                    if token.is_cancelled() {
                        let _ = t.finish(watchdog_core::Outcome::Cancelled, None, Some(15));
                    } else if n % 3 == 0 {
                        drop(t); // abandoned (R3.9)
                    } else {
                        t.finish_completed();
                    }
                }
            })
        })
        .collect();
    for w in workers {
        w.join().unwrap();
    }
    done.store(true, Ordering::Relaxed);
    ticker.join().unwrap();
    assert!(
        guard.flush(Duration::from_secs(30)),
        "isolated sinks drained"
    );

    // The reference: the guard's own output, per task.
    let mut expected: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for e in reference.events() {
        expected
            .entry(e.name.to_string())
            .or_default()
            .push(e.kind.type_name().into());
    }
    assert_eq!(expected.len(), WORKERS * TASKS_PER_WORKER);
    let count = |ty: &str| expected.values().flatten().filter(|t| *t == ty).count();
    assert!(
        count("stalled") >= WORKERS * TASKS_PER_WORKER / 4,
        "stalls raced finishes"
    );
    assert!(
        count("killed") >= WORKERS * TASKS_PER_WORKER / 4,
        "kills raced finishes"
    );

    let mut views: HashMap<&str, BTreeMap<String, Vec<String>>> = HashMap::new();
    for e in sub.drain() {
        views
            .entry("channel")
            .or_default()
            .entry(e.name.to_string())
            .or_default()
            .push(e.kind.type_name().into());
    }
    let text = String::from_utf8(buf.0.lock().clone()).unwrap();
    for line in text.lines() {
        let v: serde_json::Value = serde_json::from_str(line).unwrap();
        views
            .entry("jsonl")
            .or_default()
            .entry(v["task"].as_str().unwrap().into())
            .or_default()
            .push(v["type"].as_str().unwrap().into());
    }
    for (task, ty) in via_callback.lock().iter() {
        views
            .entry("callback")
            .or_default()
            .entry(task.clone())
            .or_default()
            .push(ty.clone());
    }

    for (task, types) in &expected {
        assert_settled("reference", task, types);
    }
    for (sink, view) in &views {
        assert_eq!(view.len(), expected.len(), "{sink} saw every task");
        for (task, types) in view {
            assert_settled(sink, task, types);
            assert_eq!(
                without_heartbeats(types),
                without_heartbeats(&expected[task]),
                "{sink}: {task}"
            );
        }
    }
    assert_eq!(jsonl.late_dropped(), 0, "the guard never sent a late line");
    assert_eq!(tokens.live_tokens(), 0, "every token left with its task");
    assert!(!guard.is_busy());
}
