//! R5.12: progress that only repeats itself is not progress. The line
//! fingerprint on real lines, the window, the line cutter, and the stall
//! that says what repeats, all in virtual time.

use std::time::Duration;

use proptest::prelude::*;
use watchdog_core::repeat::{fingerprint, RepeatSource, MAX_LINE, WINDOW};

mod common;
use common::{differ, same};
use watchdog_core::{
    EventKind, Guard, KindSet, ManualClock, Profile, RecordingSink, SignalKind, TaskHandle,
};

fn setup(profile: Profile) -> (Guard, TaskHandle, RecordingSink) {
    let sink = RecordingSink::new();
    let guard = Guard::builder()
        .clock(ManualClock::new())
        .sink(sink.clone())
        .build();
    let task = guard.start("job", profile).unwrap();
    (guard, task, sink)
}

// What only a clock, a spinner frame or a retry counter changes is set
// aside; lines from the issue's cases (apple/cups#5817, #2951) and common
// loggers' shapes.
#[test]
fn a_clock_a_spinner_frame_or_a_retry_counter_does_not_make_a_line_new() {
    same(
        "Waiting for printer to become available.",
        "Waiting for printer to become available.",
    );
    same(
        "[2026-12-07 20:55:13,123] WARNING connect to 127.0.0.1:5432 refused (attempt 3/10), will retry in 10 seconds",
        "[2026-12-07 20:55:23,456] WARNING connect to 127.0.0.1:5432 refused (attempt 4/10), will retry in 10 seconds",
    );
    same(
        "2026-12-07T20:55:13Z curl: (7) Failed to connect to localhost port 8080 after 0 ms: Connection refused",
        "2026-12-07T20:55:14Z curl: (7) Failed to connect to localhost port 8080 after 1 ms: Connection refused",
    );
    same(
        "Unable to connect to printer; will retry in 10 seconds...",
        "Unable to connect to printer; will retry in 30 seconds...",
    );
    same("retrying (3/5) in 2s", "retrying (4/5) in 4s");
    same(
        "attempt=3 elapsed=1.2s status=refused",
        "attempt=4 elapsed=2.4s status=refused",
    );
    same(
        "3 attempts so far, still waiting",
        "4 attempts so far, still waiting",
    );
    same(
        "ts=1733600000 msg=\"db not ready\"",
        "ts=1733600001 msg=\"db not ready\"",
    );
    same("[ 42%] building |", "[ 42%] building /");
    same(
        "⠋ Installing dependencies [00:12]",
        "⠙ Installing dependencies [00:13]",
    );
    same("Loading.", "Loading...");
    same("waiting for db...", "waiting for db..");
    same("12:00:01 PM heartbeat", "12:00:02 PM heartbeat");
    same("took 350ms", "took 1.2s");
}

// What reports new work stays new, however alike the lines look.
#[test]
fn a_count_a_percent_a_name_or_a_result_makes_a_line_new() {
    differ("progress 3/5", "progress 4/5");
    differ("[ 42%] building |", "[ 43%] building /");
    differ(
        "12:00:01 processed 1000 rows",
        "12:00:02 processed 2000 rows",
    );
    differ(
        "Downloaded 10.5 MB of 200 MB",
        "Downloaded 11.0 MB of 200 MB",
    );
    differ(
        "test tests::a_wait_loop_is_stopped ... ok",
        "test tests::a_busy_twin_runs ... ok",
    );
    differ(
        "PASSED tests/test_a.py::test_one",
        "FAILED tests/test_a.py::test_one",
    );
    differ("5 passed, 2 failed in 1.2s", "6 passed, 1 failed in 1.3s");
    differ("items done: 41", "items done: 42");
    differ("epoch 3 loss 0.4121", "epoch 3 loss 0.4007");
    differ("", "x");
}

proptest! {
    // Any time, date and attempt number in a retry line: the same line.
    #[test]
    fn a_retry_line_is_one_line_whatever_its_time_and_attempt(
        h in 0u32..24, m in 0u32..60, s in 0u32..60, ms in 0u32..1000,
        attempt in 1u32..10_000, of in 1u32..10_000, wait in 1u32..600,
    ) {
        let a = format!("[2026-12-07 {h:02}:{m:02}:{s:02}.{ms:03}] connect refused, attempt {attempt} of {of}; will retry in {wait} seconds");
        let b = "[2026-01-01 00:00:00.000] connect refused, attempt 1 of 5; will retry in 1 seconds";
        prop_assert_eq!(fingerprint(a.as_bytes()), fingerprint(b.as_bytes()), "{}", a);
    }

    // Any two different counts of work done: two different lines.
    #[test]
    fn a_different_count_of_work_done_is_a_new_line(
        done in 0u64..1_000_000, other in 0u64..1_000_000, total in 1u64..1_000_000,
    ) {
        prop_assume!(done != other);
        let a = format!("12:00:00 progress {done}/{total} rows");
        let b = format!("12:00:01 progress {other}/{total} rows");
        prop_assert_ne!(fingerprint(a.as_bytes()), fingerprint(b.as_bytes()));
        let a = format!("{done} rows processed");
        let b = format!("{other} rows processed");
        prop_assert_ne!(fingerprint(a.as_bytes()), fingerprint(b.as_bytes()));
    }

    // Any bytes: no panic, every newline counted, and a read of a few
    // lines judged the same whole or in pieces.
    #[test]
    fn any_bytes_are_judged_the_same_in_one_read_or_in_pieces(
        data in proptest::collection::vec(any::<u8>(), 0..600), cut in 0usize..600,
    ) {
        let (_g1, t1, _) = setup(Profile::default());
        let (_g2, t2, _) = setup(Profile::default());
        let mut whole = t1.recorder().repeats().lines();
        let mut pieces = t2.recorder().repeats().lines();
        let cut = cut.min(data.len());
        let mut data = data;
        data.push(b'\n');
        let w = whole.feed(&data);
        let p1 = pieces.feed(&data[..cut]);
        let p2 = pieces.feed(&data[cut..]);
        let nl = data.iter().filter(|&&b| b == b'\n').count() as u64;
        prop_assert_eq!(w.newlines, nl);
        prop_assert_eq!(p1.newlines + p2.newlines, nl);
        let ends = data.iter().filter(|&&b| b == b'\n' || b == b'\r').count();
        if ends <= 16 {
            // Every line was judged either way: the window holds the same.
            prop_assert_eq!(whole.feed(&data).kind, pieces.feed(&data).kind);
        }
    }
}

#[test]
fn a_line_seen_in_the_window_is_a_repeat_and_a_new_one_is_output() {
    let (_g, task, _) = setup(Profile::default());
    let mut lines = task.recorder().repeats().lines();
    let kind = |l: &mut watchdog_core::repeat::LineJudge, s: &str| l.feed(s.as_bytes()).kind;
    assert_eq!(kind(&mut lines, "waiting...\n"), SignalKind::Output);
    assert_eq!(kind(&mut lines, "waiting...\n"), SignalKind::Repeat);
    // A/B alternation: both are in the window.
    assert_eq!(kind(&mut lines, "connecting\n"), SignalKind::Output);
    for _ in 0..5 {
        assert_eq!(kind(&mut lines, "waiting...\n"), SignalKind::Repeat);
        assert_eq!(kind(&mut lines, "connecting\n"), SignalKind::Repeat);
    }
    // A read that ends one new line among repeats is output.
    assert_eq!(
        kind(&mut lines, "waiting...\nready after 3 tries\nwaiting...\n"),
        SignalKind::Output
    );
}

#[test]
fn the_window_holds_a_fixed_number_of_lines_and_forgets_the_oldest() {
    let (_g, task, _) = setup(Profile::default());
    let mut lines = task.recorder().repeats().lines();
    assert_eq!(lines.feed(b"first line\n").kind, SignalKind::Output);
    for i in 0..WINDOW {
        assert_eq!(
            lines.feed(format!("row {i} done\n").as_bytes()).kind,
            SignalKind::Output
        );
    }
    // WINDOW new lines later, the first has left the window.
    assert_eq!(lines.feed(b"first line\n").kind, SignalKind::Output);
    assert_eq!(
        lines
            .feed(format!("row {} done\n", WINDOW - 1).as_bytes())
            .kind,
        SignalKind::Repeat
    );
}

// A spinner redraws its line with `\r`: a frozen percent repeats, an
// advancing one is new; a frame written before its `\r` is judged too.
#[test]
fn a_carriage_return_ends_a_line_so_a_frozen_spinner_repeats() {
    let (_g, task, _) = setup(Profile::default());
    let mut lines = task.recorder().repeats().lines();
    let frames = ["|", "/", "-", "\\"];
    let mut kinds = Vec::new();
    for i in 0..12 {
        kinds.push(
            lines
                .feed(format!("\r[ 42%] {}", frames[i % 4]).as_bytes())
                .kind,
        );
    }
    assert!(
        kinds[3..].iter().all(|k| *k == SignalKind::Repeat),
        "{kinds:?}"
    );

    let (_g, task, _) = setup(Profile::default());
    let mut lines = task.recorder().repeats().lines();
    let mut kinds = Vec::new();
    for i in 0..12 {
        kinds.push(
            lines
                .feed(format!("\r[ {:2}%] {}", 40 + i, frames[i % 4]).as_bytes())
                .kind,
        );
    }
    assert!(kinds.iter().all(|k| *k == SignalKind::Output), "{kinds:?}");
}

// pytest's dots: bytes of a line not yet ended are work.
#[test]
fn bytes_of_a_line_not_yet_ended_count_as_output() {
    let (_g, task, _) = setup(Profile::default());
    let mut lines = task.recorder().repeats().lines();
    assert_eq!(lines.feed(b"tests/test_a.py ").kind, SignalKind::Output);
    for _ in 0..20 {
        assert_eq!(lines.feed(b".").kind, SignalKind::Output);
    }
    assert_eq!(lines.feed(b"  [100%]\n").kind, SignalKind::Output);
    // A `\r\n` ends one line, not two.
    let v = lines.feed(b"one\r\ntwo\r\n");
    assert_eq!((v.kind, v.newlines), (SignalKind::Output, 2));
    assert_eq!(lines.feed(b"one\r\n").kind, SignalKind::Repeat);
}

// An endless line is cut at MAX_LINE bytes: memory stays bounded and its
// bytes are output.
#[test]
fn an_endless_line_is_cut_and_counts_as_output() {
    let (_g, task, _) = setup(Profile::default());
    let mut lines = task.recorder().repeats().lines();
    let chunk = vec![b'x'; 64 * 1024];
    for _ in 0..32 {
        assert_eq!(lines.feed(&chunk).kind, SignalKind::Output);
    }
    assert!(format!("{lines:?}").contains(&format!("pending: {MAX_LINE}")));
    assert_eq!(lines.feed(b"\n").kind, SignalKind::Output);
}

// Block-buffered output cuts lines anywhere; a loop is still a loop.
#[test]
fn a_loop_written_in_blocks_that_cut_its_lines_still_repeats() {
    // (Each block is one read; the first is output, its lines new.)
    let (_g, task, _) = setup(Profile::default());
    let mut lines = task.recorder().repeats().lines();
    let text: String = (0..400)
        .map(|i| {
            format!(
                "2026-12-07 12:{:02}:{:02} waiting for db\n",
                i / 60 % 60,
                i % 60
            )
        })
        .collect();
    let kinds: Vec<_> = text
        .as_bytes()
        .chunks(4096)
        .map(|c| lines.feed(c).kind)
        .collect();
    assert_eq!(kinds[0], SignalKind::Output);
    assert!(
        kinds[1..].iter().all(|k| *k == SignalKind::Repeat),
        "{kinds:?}"
    );
}

// A wait-for loop runs out of its idle budget as a silent job would, and
// the stall says what repeats, how often and over how long.
#[test]
fn a_job_that_only_repeats_itself_stalls_and_the_stall_says_what_repeats() {
    let profile = Profile::default().idle(Duration::from_secs(10));
    let (guard, task, sink) = setup(profile);
    let rec = task.recorder();
    let counter = rec.output_counter();
    let mut lines = rec.repeats().lines();
    for i in 0..12 {
        let line = format!("[12:00:{i:02}] waiting for db to become ready (attempt {i})\n");
        let v = lines.feed(line.as_bytes());
        counter.record_as(line.len() as u64, v.newlines, v.kind);
        guard.advance(Duration::from_secs(1));
    }
    let stalled = sink
        .events_of(task.id())
        .into_iter()
        .find(|e| e.kind.type_name() == "stalled")
        .expect("a stall at the idle budget");
    assert_eq!(stalled.elapsed, Duration::from_secs(10), "{stalled:?}");
    let EventKind::Stalled { repeating, .. } = &stalled.kind else {
        unreachable!()
    };
    let r = repeating.as_ref().expect("what repeats");
    assert_eq!(r.source, RepeatSource::Output);
    assert_eq!(
        r.shown,
        "[12:00:01] waiting for db to become ready (attempt 1)"
    );
    assert_eq!(r.count, 10);
    assert_eq!(r.over, Duration::from_secs(10));
    assert!(r
        .to_string()
        .starts_with("the output repeats \"[12:00:01] waiting"));
    let json = serde_json::to_value(&stalled.kind).unwrap();
    assert_eq!(json["repeating"]["count"], 10);
    assert_eq!(json["repeating"]["over_ms"], 10_000);
    // The snapshot says it too.
    let status = task.status().unwrap();
    assert_eq!(status.repeating.as_ref().map(|r| r.count), Some(12));
    // Totals count every byte, repeated or not.
    assert_eq!(status.total_lines, 12);
}

// Its busy twin, a counter that advances, is never stopped.
#[test]
fn a_job_whose_lines_report_new_work_never_stalls() {
    let profile = Profile::default().idle(Duration::from_secs(10));
    let (guard, task, sink) = setup(profile);
    let rec = task.recorder();
    let counter = rec.output_counter();
    let mut lines = rec.repeats().lines();
    for i in 0..60 {
        let line = format!("[12:{:02}:{:02}] progress {}/60\n", i / 60, i % 60, i + 1);
        let v = lines.feed(line.as_bytes());
        counter.record_as(line.len() as u64, v.newlines, v.kind);
        guard.advance(Duration::from_secs(5));
    }
    assert!(
        sink.events_of(task.id())
            .iter()
            .all(|e| e.kind.type_name() != "stalled"),
        "{:?}",
        sink.events_of(task.id())
    );
    assert!(task.status().unwrap().repeating.is_none());
}

// The old behaviour on request: `repeat` in renewed-by renews as output.
#[test]
fn repeat_in_renewed_by_renews_as_output_did() {
    let renewing = KindSet::DEFAULT_RENEWING.with(SignalKind::Repeat);
    let profile = Profile::default()
        .idle(Duration::from_secs(10))
        .renewed_by(renewing);
    let (guard, task, sink) = setup(profile);
    let rec = task.recorder();
    assert!(rec.renews(SignalKind::Repeat));
    let counter = rec.output_counter();
    let mut lines = rec.repeats().lines();
    for _ in 0..30 {
        let v = lines.feed(b"waiting...\n");
        counter.record_as(11, v.newlines, v.kind);
        guard.advance(Duration::from_secs(1));
    }
    assert!(sink
        .events_of(task.id())
        .iter()
        .all(|e| e.kind.type_name() != "stalled"));
    assert!(!Guard::builder()
        .clock(ManualClock::new())
        .build()
        .start("x", Profile::default())
        .unwrap()
        .renews(SignalKind::Repeat));
}

#[test]
fn repeat_without_output_in_renewed_by_is_refused_with_its_reason() {
    let mut p = Profile::default();
    let err = p
        .set("renewed-by", vec!["repeat", "tool-call"])
        .unwrap_err();
    let text = err.to_string();
    assert!(text.starts_with("renewed-by:"), "{text}");
    assert!(text.contains("add `output` too"), "{text}");
    let mut p = Profile::default();
    p.set("renewed-by", vec!["output", "repeat"]).unwrap();
    assert!(p.renewed_by.contains(SignalKind::Repeat));
}

// R5.12, R10.6: the refusal says both what is wrong and what is wanted,
// whether the list comes as text (a door's value) or is already set on
// the profile and validated.
#[test]
fn a_refused_repeat_without_output_names_the_wanted_list_and_the_reason() {
    let mut p = Profile::default();
    let err = p.set("renewed-by", vec!["repeat"]).unwrap_err();
    assert_eq!(
        err.expected,
        "a list that has `output` wherever it has `repeat`"
    );
    assert_eq!(
        err.why.as_deref(),
        Some("`repeat` renews as the output it is: add `output` too")
    );
    let p = Profile {
        renewed_by: KindSet::EMPTY.with(SignalKind::Repeat),
        ..Profile::default()
    };
    let err = p.validate().unwrap_err();
    assert_eq!(err.key, "renewed-by");
    assert_eq!(
        err.expected,
        "a list that has `output` wherever it has `repeat`"
    );
    assert_eq!(
        err.why.as_deref(),
        Some("`repeat` renews as the output it is: add `output` too")
    );
}

// A flood of one line, blank lines included, is judged at the speed of a
// comparison and every line counted.
#[test]
fn a_flood_of_one_line_is_all_repeats_and_every_line_is_counted() {
    let (_g, task, _) = setup(Profile::default());
    let mut lines = task.recorder().repeats().lines();
    let yes = b"y\n".repeat(32 * 1024);
    let first = lines.feed(&yes);
    assert_eq!(
        (first.kind, first.newlines),
        (SignalKind::Output, 32 * 1024)
    );
    let again = lines.feed(&yes);
    assert_eq!(
        (again.kind, again.newlines),
        (SignalKind::Repeat, 32 * 1024)
    );
    let r = task.recorder().repeats().repeating().unwrap();
    assert_eq!((r.shown.as_str(), r.count), ("y", 64 * 1024));
    let blank = vec![b'\n'; 64 * 1024];
    assert_eq!(lines.feed(&blank).newlines, 64 * 1024);
    let v = lines.feed(&blank);
    assert_eq!((v.kind, v.newlines), (SignalKind::Repeat, 64 * 1024));
}

// A flood of new lines: the read is output, every newline counted, and the
// line not yet ended carried to the next read.
#[test]
fn a_flood_of_new_lines_is_output_and_its_last_line_carries_over() {
    let (_g, task, _) = setup(Profile::default());
    let mut lines = task.recorder().repeats().lines();
    let text: String = (0..5000).map(|i| format!("row {i} done\n")).collect();
    let v = lines.feed(format!("{text}row 5000 do").as_bytes());
    assert_eq!((v.kind, v.newlines), (SignalKind::Output, 5000));
    // The carried head and its end make `row 5000 done`, a new line.
    assert_eq!(lines.feed(b"ne\n").kind, SignalKind::Output);
    assert_eq!(lines.feed(b"row 5000 done\n").kind, SignalKind::Repeat);
}

/// Runs a call to its end with its input and result, then a second.
fn call(task: &TaskHandle, guard: &Guard, id: &str, name: &str, input: &str, result: &str) {
    task.tool_started_with(id, name, input.as_bytes()).unwrap();
    guard.advance(Duration::from_secs(1));
    task.tool_finished_with(id, watchdog_core::CallOutcome::Success, result.as_bytes())
        .unwrap();
    guard.advance(Duration::from_secs(1));
}

fn stalls(sink: &RecordingSink, task: &TaskHandle) -> Vec<watchdog_core::Event> {
    sink.events_of(task.id())
        .into_iter()
        .filter(|e| e.kind.type_name() == "stalled")
        .collect()
}

// qwen-code#5234, goose#9758: one call with the same input and the same
// result, again and again, renews nothing after the first.
#[test]
fn the_same_call_with_the_same_result_stalls_and_says_so() {
    let (guard, task, sink) = setup(Profile::default().idle(Duration::from_secs(10)));
    for i in 0..8 {
        call(
            &task,
            &guard,
            &format!("c{i}"),
            "Bash(cat config.yaml)",
            r#"{"command":"cat config.yaml"}"#,
            "port: 8080\n",
        );
    }
    let stalled = stalls(&sink, &task);
    assert_eq!(stalled.len(), 1, "{stalled:?}");
    // The first call's finish at 1 s was the last renewal.
    assert_eq!(stalled[0].elapsed, Duration::from_secs(11));
    let EventKind::Stalled { repeating, .. } = &stalled[0].kind else {
        unreachable!()
    };
    let r = repeating.as_ref().unwrap();
    assert_eq!(r.source, RepeatSource::ToolCall);
    assert!(
        r.to_string()
            .starts_with("Bash(cat config.yaml) returned the same result"),
        "{r}"
    );
}

// OpenHands' A/B alternation: two calls that undo each other in turn.
#[test]
fn two_calls_alternating_with_the_same_results_stall() {
    let (guard, task, sink) = setup(Profile::default().idle(Duration::from_secs(10)));
    for i in 0..6 {
        call(
            &task,
            &guard,
            &format!("a{i}"),
            "Edit",
            r#"{"old":"x","new":"y"}"#,
            "ok",
        );
        call(
            &task,
            &guard,
            &format!("b{i}"),
            "Edit",
            r#"{"old":"y","new":"x"}"#,
            "ok",
        );
    }
    assert_eq!(stalls(&sink, &task).len(), 1);
}

// Busy twins: reading many files, and re-running one test command whose
// result improves, are progress however alike the calls look.
#[test]
fn many_files_read_or_one_test_command_with_improving_results_never_stall() {
    let (guard, task, sink) = setup(Profile::default().idle(Duration::from_secs(10)));
    for i in 0..30 {
        let input = format!(r#"{{"file_path":"src/module_{i}.rs"}}"#);
        call(
            &task,
            &guard,
            &format!("r{i}"),
            "Read",
            &input,
            &format!("mod m{i};"),
        );
    }
    for i in 0..10 {
        let result = format!("{} passed, {} failed in 0.{i}3s", 10 + i, 10 - i);
        call(
            &task,
            &guard,
            &format!("t{i}"),
            "Bash(cargo test)",
            r#"{"command":"cargo test"}"#,
            &result,
        );
    }
    assert!(
        stalls(&sink, &task).is_empty(),
        "{:?}",
        stalls(&sink, &task)
    );
}

// R5.12: a spinner that writes its frame and then its `\r` in two writes:
// the frame, a line not yet ended, is judged against the window as the
// line it will be (a mutant once called every such frame output, another
// cut every line not yet ended).
#[test]
fn a_spinner_frame_before_its_carriage_return_is_judged_with_its_line() {
    let (_g, task, _) = setup(Profile::default());
    let mut lines = task.recorder().repeats().lines();
    let kinds: Vec<_> = [
        "[ 42%] |",
        "\r",
        "[ 42%] /",
        "\r",
        "[ 42%] -",
        "\r",
        "[ 43%] \\",
    ]
    .iter()
    .map(|s| lines.feed(s.as_bytes()).kind)
    .collect();
    use SignalKind::{Output, Repeat};
    assert_eq!(
        kinds,
        [Output, Output, Repeat, Repeat, Repeat, Repeat, Output]
    );
}

// R5.12: a line of exactly MAX_LINE bytes not yet ended is whole, and
// judged; one byte more and it is cut, and a cut line's bytes are output
// even when its first MAX_LINE bytes are a line in the window (mutants
// once cut the exact line, or judged the cut one).
#[test]
fn a_line_of_max_line_bytes_is_judged_whole_and_one_byte_more_is_cut_to_output() {
    let (_g, task, _) = setup(Profile::default());
    let repeats = task.recorder().repeats();
    let long = vec![b'a'; MAX_LINE];
    let mut ended = long.clone();
    ended.push(b'\n');
    assert_eq!(repeats.lines().feed(&ended).kind, SignalKind::Output);
    // Each stream its own line not yet ended, the window the task's.
    assert_eq!(repeats.lines().feed(&long).kind, SignalKind::Repeat);
    let mut over = long.clone();
    over.push(b'a');
    assert_eq!(repeats.lines().feed(&over).kind, SignalKind::Output);
}

// R5.12: once a read is known to be output, its first new line and the 16
// judged after it enter the window; the rest are only counted (a mutant
// once judged every line of a flood).
#[test]
fn a_read_known_to_be_output_teaches_the_window_only_its_first_seventeen_lines() {
    let (_g, task, _) = setup(Profile::default());
    let mut lines = task.recorder().repeats().lines();
    let text: String = (0..20).map(|i| format!("row {i} done\n")).collect();
    let v = lines.feed(text.as_bytes());
    assert_eq!((v.kind, v.newlines), (SignalKind::Output, 20));
    assert_eq!(lines.feed(b"row 0 done\n").kind, SignalKind::Repeat);
    assert_eq!(lines.feed(b"row 16 done\n").kind, SignalKind::Repeat);
    assert_eq!(lines.feed(b"row 17 done\n").kind, SignalKind::Output);
    assert_eq!(lines.feed(b"row 19 done\n").kind, SignalKind::Output);
}

// R5.12: a frame redrawn byte for byte with `\r` is a repeat, and its
// carriage returns are no newlines of the line count (a mutant once
// counted a run of `\r` frames as lines).
#[test]
fn carriage_returns_of_a_frame_redrawn_byte_for_byte_are_not_newlines() {
    let (_g, task, _) = setup(Profile::default());
    let mut lines = task.recorder().repeats().lines();
    let v = lines.feed(b"\rworking |\rworking |\rworking |\r");
    assert_eq!((v.kind, v.newlines), (SignalKind::Output, 0));
    let v = lines.feed(b"working |\rworking |\rworking |\r");
    assert_eq!((v.kind, v.newlines), (SignalKind::Repeat, 0));
    let v = lines.feed(b"working |\r\n");
    assert_eq!((v.kind, v.newlines), (SignalKind::Repeat, 1));
}

// R5.12: a `\r\n` split across two reads ends one line, also when the
// `\r` came in the counted rest of a flood of new lines: the next read's
// `\n` ends no empty line (mutants once lost the `\r`, or carried it into
// the next line).
#[test]
fn a_crlf_split_after_a_flood_of_new_lines_ends_one_line() {
    let (_g, task, _) = setup(Profile::default());
    let mut lines = task.recorder().repeats().lines();
    let mut text = String::from("waiting for db\r\n");
    text.extend((0..20).map(|i| format!("row {i} done\r\n")));
    text.pop();
    let v = lines.feed(text.as_bytes());
    assert_eq!((v.kind, v.newlines), (SignalKind::Output, 20));
    let v = lines.feed(b"\nwaiting for db\r\n");
    assert_eq!((v.kind, v.newlines), (SignalKind::Repeat, 2));
}

// R5.12: what a source says is judged by its key and, when it repeats,
// shown as the source asked (mutants once called it always a repeat, or
// never).
#[test]
fn what_a_source_says_repeats_by_its_key_and_is_shown_as_it_asked() {
    let (_g, task, _) = setup(Profile::default());
    let repeats = task.recorder().repeats();
    let said = |key: &str| repeats.said(key.as_bytes(), Some("Let me check the config"));
    assert_eq!(said("check config"), SignalKind::Output);
    assert_eq!(said("check config"), SignalKind::Repeat);
    assert_eq!(said("check the tests"), SignalKind::Output);
    let r = repeats.repeating().unwrap();
    assert_eq!((r.shown.as_str(), r.count), ("Let me check the config", 2));
}

// R5.12: the report says the line that repeats now, how often and since
// when, not the first line that ever repeated (a mutant once kept the
// first line's words and start with the second line's count).
#[test]
fn the_report_names_the_line_that_repeats_now_not_the_first_that_repeated() {
    let (guard, task, _) = setup(Profile::default());
    let repeats = task.recorder().repeats();
    assert_eq!(repeats.line(b"waiting for db"), SignalKind::Output);
    assert_eq!(repeats.line(b"waiting for db"), SignalKind::Repeat);
    guard.advance(Duration::from_secs(5));
    assert_eq!(repeats.line(b"waiting for cache"), SignalKind::Output);
    guard.advance(Duration::from_secs(2));
    for _ in 0..2 {
        assert_eq!(repeats.line(b"waiting for cache"), SignalKind::Repeat);
    }
    guard.advance(Duration::from_secs(1));
    let r = repeats.repeating().unwrap();
    assert_eq!(r.source, RepeatSource::Output);
    assert_eq!(r.shown, "waiting for cache");
    assert_eq!(r.count, 3);
    assert_eq!(r.over, Duration::from_secs(3));
}

// R5.12: a call's first start is a `tool-call` signal; its retry, the same
// tool on the same input, a `repeat` that renews nothing (a mutant once
// called every start a repeat).
#[test]
fn a_first_start_of_a_call_is_a_tool_call_and_its_retry_a_repeat() {
    let (guard, task, _) = setup(Profile::default());
    let last_call = |task: &TaskHandle| task.status().unwrap().last_of(SignalKind::ToolCall);
    assert_eq!(last_call(&task), None);
    task.tool_started_with("c1", "Read", b"src/main.rs")
        .unwrap();
    assert_eq!(last_call(&task).unwrap().age, Duration::ZERO);
    guard.advance(Duration::from_secs(3));
    task.tool_started_with("c2", "Read", b"src/main.rs")
        .unwrap();
    assert_eq!(last_call(&task).unwrap().age, Duration::from_secs(3));
}

// R5.12: one tool on two inputs is two calls, started and finished, even
// with the same result (mutants once gave every input one digest).
#[test]
fn one_tool_on_two_inputs_is_two_calls_even_with_the_same_result() {
    let (guard, task, _) = setup(Profile::default());
    let last_call = |task: &TaskHandle| task.status().unwrap().last_of(SignalKind::ToolCall);
    let ok = watchdog_core::CallOutcome::Success;
    task.tool_started_with("c1", "Read", b"src/a.rs").unwrap();
    task.tool_finished_with("c1", ok, b"ok").unwrap();
    guard.advance(Duration::from_secs(3));
    task.tool_started_with("c2", "Read", b"src/b.rs").unwrap();
    assert_eq!(last_call(&task).unwrap().age, Duration::ZERO);
    guard.advance(Duration::from_secs(3));
    task.tool_finished_with("c2", ok, b"ok").unwrap();
    assert_eq!(last_call(&task).unwrap().age, Duration::ZERO);
    assert!(task.status().unwrap().repeating.is_none());
}
