//! Tests that kill surviving mutants of `stallwarden-sources` found by
//! cargo-mutants (issue 14, R10.4): each pins a behaviour a mutant changed
//! without any other test noticing.

mod common;

use common::Captured;

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use stallwarden_sources::agent::{call_name, codex, AgentEvent};
use stallwarden_sources::args::openai::OpenAiStream;
use stallwarden_sources::args::{Rejection, Step, StreamAdapter, StreamFormat};
use stallwarden_sources::background::{BackgroundError, BackgroundRecord, MAX_ID, MAX_PER_OWNER};
use stallwarden_sources::procs::{
    sample_once, state_from_code, ProcTable, ProcessSampler, FULL_WALK_EVERY,
};
use stallwarden_sources::tools::{ToolCallError, ToolCallFeed, MAX_CALL_ID};
use watchdog_core::{
    BackgroundKind, CallOutcome, ChildProbe, Guard, ManualClock, ProcState, Profile, TaskHandle,
};

fn owner() -> (Guard, TaskHandle) {
    let guard = Guard::builder().clock(ManualClock::new()).build();
    let task = guard.start("turn", Profile::default()).unwrap();
    (guard, task)
}

/// An id whose byte `limit` falls inside a two-byte character: one ASCII
/// byte, then `é` (2 bytes) repeated past the limit.
fn id_cut_mid_char(limit: usize) -> String {
    let mut id = String::from("a");
    while id.len() <= limit + 8 {
        id.push('é');
    }
    id
}

// R5.6: `has_unnamed` says whether a task past the cap runs unnamed, and a
// complete inventory within the cap clears it (kills `has_unnamed -> bool`).
#[test]
fn has_unnamed_follows_the_cap_and_the_inventory() {
    let (_guard, task) = owner();
    let mut bg = BackgroundRecord::new(task.recorder());
    assert!(!bg.has_unnamed());
    for i in 0..MAX_PER_OWNER {
        bg.launch(
            &format!("bg_{i}"),
            &format!("call_{i}"),
            BackgroundKind::Command,
        )
        .unwrap();
    }
    assert!(!bg.has_unnamed(), "at the cap, every task is named");
    let over = bg.launch("bg_over", "call_over", BackgroundKind::Command);
    assert_eq!(over, Err(BackgroundError::Full("bg_over".into())));
    assert!(bg.has_unnamed());
    assert!(!bg.is_empty());
    assert!(bg.inventory([("bg_0", BackgroundKind::Command)]).is_empty());
    assert!(!bg.has_unnamed(), "a complete inventory clears the mark");
}

// R6.5-style hygiene: an unknown id in an error is cut to MAX_ID bytes, on
// a character boundary, never past it and never panicking mid-character
// (kills the mutants of the cut's bound and its boundary walk).
#[test]
fn unknown_background_ids_are_cut_on_a_char_boundary() {
    let (_guard, task) = owner();
    let mut bg = BackgroundRecord::new(task.recorder());
    let long = id_cut_mid_char(MAX_ID);
    let Err(BackgroundError::UnknownTask(shown)) = bg.kill_result(&long) else {
        panic!("an unknown id must be refused");
    };
    assert_eq!(
        shown.len(),
        MAX_ID - 1,
        "cut back to the boundary below {MAX_ID}"
    );
    assert!(long.starts_with(&shown));

    let ascii = "b".repeat(MAX_ID + 10);
    let Err(BackgroundError::UnknownTask(shown)) = bg.kill_result(&ascii) else {
        panic!("an unknown id must be refused");
    };
    assert_eq!(shown.len(), MAX_ID);

    let short = "bg_short";
    assert_eq!(
        bg.kill_result(short),
        Err(BackgroundError::UnknownTask(short.into()))
    );

    bg.launch("bg_1", "call_1", BackgroundKind::Command)
        .unwrap();
    let wrong = "c".repeat(MAX_ID + 1);
    let Err(BackgroundError::LaunchMismatch { task: t, launch }) = bg.end("bg_1", &wrong) else {
        panic!("a wrong launch id must be refused");
    };
    assert_eq!((t.as_str(), launch.len()), ("bg_1", MAX_ID));
}

// R5.3: a finish for an unknown call names it cut to MAX_CALL_ID bytes on a
// character boundary (kills the mutants of `truncated`).
#[test]
fn unknown_call_ids_are_cut_on_a_char_boundary() {
    let (_guard, task) = owner();
    let feed = ToolCallFeed::new(task.recorder());
    let long = id_cut_mid_char(MAX_CALL_ID);
    let Err(ToolCallError::UnknownCall(shown)) = feed.finished(&long, CallOutcome::Success) else {
        panic!("an unknown call must be refused");
    };
    assert_eq!(shown.len(), MAX_CALL_ID - 1);
    assert!(long.starts_with(&shown));

    let ascii = "d".repeat(MAX_CALL_ID + 3);
    let Err(ToolCallError::UnknownCall(shown)) = feed.finished(&ascii, CallOutcome::Success) else {
        panic!("an unknown call must be refused");
    };
    assert_eq!(shown.len(), MAX_CALL_ID);
    assert_eq!(
        feed.finished("toolu_9", CallOutcome::Success),
        Err(ToolCallError::UnknownCall("toolu_9".into()))
    );
}

const OA_START: &str = r#"{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1767225600,"model":"gpt-4o","choices":[{"index":0,"delta":{"role":"assistant","content":null,"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"bash","arguments":""}}]},"finish_reason":null}]}"#;
const OA_ARGS: &str = r#"{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1767225600,"model":"gpt-4o","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"cmd\""}}]},"finish_reason":null}]}"#;

// R5.2: a runner that drops an OpenAI stream midway ends the turn; the
// message closes, so a late delta of it no longer renews the idle budget
// and `[DONE]` has nothing left to end (kills `OpenAiStream::turn_end -> ()`).
#[test]
fn openai_turn_end_closes_the_message_midway() {
    let (_guard, task) = owner();
    let mut s = OpenAiStream::new(task.recorder());
    assert_eq!(s.feed(OA_START), Ok(Step::Tracked));
    assert_eq!(s.feed(OA_ARGS), Ok(Step::Renewed));
    assert!(s.tracker().is_active());
    s.turn_end();
    assert!(!s.tracker().is_active());
    assert_eq!(s.feed(OA_ARGS), Err(Rejection::NoActiveGeneration));
    assert_eq!(s.feed("[DONE]"), Ok(Step::Ignored));
}

// R4.2/R5.5: `probe` hands out the sampler's own cached view, so a task the
// probe is attached to later shows the sampled children in its status
// (kills `ProcessSampler::probe -> Arc::new(Default::default())`).
#[test]
fn the_probe_is_the_samplers_cached_view() {
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/proc");
    let sampler =
        ProcessSampler::with_table(ProcTable::at(fixture), 100, Duration::from_secs(60), None)
            .unwrap();
    let pids = |c: Option<Vec<watchdog_core::ChildInfo>>| {
        c.map(|c| c.iter().map(|c| c.pid).collect::<Vec<_>>())
    };
    let sampled = pids(sampler.sample_now());
    assert_eq!(sampled, Some(vec![102, 105, 101, 103]));
    let probe = sampler.probe();
    assert_eq!(pids(probe.children()), sampled);

    let (_guard, task) = owner();
    task.recorder()
        .set_children_probe(Arc::clone(&probe) as Arc<dyn ChildProbe>);
    assert_eq!(pids(task.status().unwrap().children), sampled);
}

// R5.5: a running child is reported as running, not as "other" (kills the
// deleted `b'R'` arm of `state_from_code`).
#[test]
fn a_running_process_reads_as_running() {
    assert_eq!(state_from_code(b'R'), ProcState::Running);
    assert_eq!(state_from_code(b'S'), ProcState::Sleeping);
    assert_eq!(state_from_code(b'X'), ProcState::Other);
}

// R5.3: `in_flight` counts the calls started through the feed and not yet
// finished (kills `ToolCallFeed::in_flight -> 1`).
#[test]
fn in_flight_counts_started_calls_until_they_finish() {
    let (_guard, task) = owner();
    let feed = ToolCallFeed::new(task.recorder());
    assert_eq!(feed.in_flight(), 0);
    feed.started("call_a", "bash").unwrap();
    feed.started("call_b", "grep").unwrap();
    assert_eq!(feed.in_flight(), 2);
    feed.finished("call_a", CallOutcome::Success).unwrap();
    feed.finished("call_b", CallOutcome::Error).unwrap();
    assert_eq!(feed.in_flight(), 0);
}

// R5.5: "a sampler that cannot read the table logs once": three failed
// samples (the thread's own and two on request) give exactly one warning
// (kills the deleted `!` on the sampler's `warned` flag, which stayed
// silent on the first failure and warned on every later one).
#[test]
fn an_unreadable_table_is_warned_about_exactly_once() {
    let captured = Captured::default();
    let subscriber = captured.warnings();
    // Process-wide, so the sampler's own thread is captured as well.
    tracing::subscriber::set_global_default(subscriber).unwrap();
    let sampler = ProcessSampler::with_table(
        ProcTable::at("/nonexistent/proc"),
        1,
        Duration::from_secs(60),
        None,
    )
    .unwrap();
    assert_eq!(sampler.sample_now(), None);
    assert_eq!(sampler.sample_now(), None);
    drop(sampler); // joins the thread, which sampled once before waiting
    let text = String::from_utf8(captured.0.lock().unwrap().clone()).unwrap();
    assert_eq!(
        text.matches("process sampler cannot read").count(),
        1,
        "{text}"
    );
}

/// Copies the `/proc` fixture into `to`, directories and all.
fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        if e.file_type().unwrap().is_dir() {
            copy_tree(&e.path(), &to.join(e.file_name()));
        } else {
            std::fs::copy(e.path(), to.join(e.file_name())).unwrap();
        }
    }
}

// R9.4/R5.5: a walk of the table re-reads everything exactly every
// FULL_WALK_EVERY samples, so an outsider's pid reused with no counter
// movement shows at the next full walk, not one sample later (kills
// `+ with *` in `ProcTable::read_table`'s `since_full_walk + 1`, which
// stretched the period to FULL_WALK_EVERY + 1).
#[test]
fn the_full_walk_comes_every_full_walk_every_samples_exactly() {
    let dir = tempfile::tempdir().unwrap();
    copy_tree(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/proc"),
        dir.path(),
    );
    std::fs::write(dir.path().join("loadavg"), "0.00 0.00 0.00 1/90 300\n").unwrap();
    let mut table = ProcTable::at(dir.path());
    let has =
        |t: &mut ProcTable, pid: u32| t.sample(100).unwrap().children.iter().any(|c| c.pid == pid);
    // Sample 1 is a full walk (no counter seen before); 106's stat is
    // garbage then, so it is listed as an outsider.
    assert!(!has(&mut table, 106));
    // 106 "reused" under the root with the counter unmoved.
    std::fs::write(
        dir.path().join("106/stat"),
        "106 (new) S 100 0 0 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 8000 0 0\n",
    )
    .unwrap();
    for n in 2..=FULL_WALK_EVERY {
        assert!(!has(&mut table, 106), "sample {n} is not a full walk");
    }
    assert!(
        has(&mut table, 106),
        "sample {} is the next full walk",
        FULL_WALK_EVERY + 1
    );
}

// R5.3/R8.13: a Codex item that completed is a failure when its status says
// so or when its exit code is not 0, either one alone (kills `|| with &&`
// in `codex::item`, which called both of these a success).
#[test]
fn a_codex_item_fails_on_its_status_or_its_exit_code_alone() {
    let completed = |item: serde_json::Value| {
        let line = serde_json::json!({"type": "item.completed", "item": item});
        let mut out = Vec::new();
        codex::parse(&line, &mut out);
        match out.as_slice() {
            [AgentEvent::ToolCompleted { ok, .. }] => *ok,
            other => panic!("one completed tool, got {other:?}"),
        }
    };
    let cmd = |status: &str, exit: Option<i64>| {
        let mut item = serde_json::json!({"id": "item_1", "type": "command_execution",
            "command": "bash -lc false", "status": status});
        if let Some(code) = exit {
            item["exit_code"] = code.into();
        }
        item
    };
    assert!(
        !completed(cmd("failed", None)),
        "failed status, no exit code"
    );
    assert!(!completed(cmd("declined", None)), "declined, never ran");
    assert!(!completed(cmd("completed", Some(2))), "exit code 2");
    assert!(completed(cmd("completed", Some(0))));
    assert!(completed(cmd("completed", None)));
}

// R8.13: a call's name shows its command while the name leaves room for
// `(`, `…` and `)` within MAX_CALL_ID bytes (kills `+ with *` in
// `call_name`'s room test, which dropped the command of any name over a
// fifth of the bound).
#[test]
fn a_call_name_shows_its_command_while_there_is_room() {
    let name = "n".repeat(60);
    assert_eq!(call_name(&name, Some("ls")), format!("{name}(ls)"));
    // 5 bytes short of the bound: one byte of command fits, cut.
    let long = "m".repeat(MAX_CALL_ID - 6);
    assert_eq!(call_name(&long, Some("ls -l")), format!("{long}(l…)"));
    let full = "m".repeat(MAX_CALL_ID - 5);
    assert_eq!(call_name(&full, Some("ls")), full, "no room left");
}

// R10.6: a stream format prints as the name it is parsed from, so an error
// or a status that shows it names a format the user can type back (kills
// `<impl Display for StreamFormat>::fmt -> Ok(())`, which printed nothing).
#[test]
fn a_stream_format_prints_as_the_name_it_parses_from() {
    let shown: Vec<String> = StreamFormat::ALL.iter().map(|f| f.to_string()).collect();
    assert_eq!(shown, ["anthropic", "openai", "responses", "gemini"]);
    for f in StreamFormat::ALL {
        assert_eq!(f.to_string().parse::<StreamFormat>(), Ok(f));
    }
}

// R5.2: an OpenAI message's place within its `created` second counts from
// 0 in each new second, so a long stream with one message a second is never
// refused for running out of room in a second (kills the match guard
// `sec == created -> true` in `OpenAiStream::new_message`, which carried
// the count across seconds and refused the 65 537th message).
#[test]
fn openai_messages_in_new_seconds_count_from_zero() {
    let (_guard, task) = owner();
    let mut s = OpenAiStream::new(task.recorder());
    // One more message than a second has room for (2^16).
    for k in 0..=(1u32 << 16) {
        let chunk = format!(
            r#"{{"id":"c{k}","created":{},"choices":[]}}"#,
            1_767_225_600 + u64::from(k)
        );
        assert_eq!(s.feed(&chunk), Ok(Step::Tracked), "message {k}");
    }
    assert_eq!(s.tracker().rejections().total(), 0);
}

// R8.13/R5.5: a verdict looks at the tree afresh, root first, through the
// sampler itself or its cached view; the sampler names its root (kills
// `ProcessSampler::verdict_children -> Some(vec![])`,
// `Sampling::verdict -> Some(vec![])` and `ProcessSampler::pid -> 1`).
#[test]
fn a_verdict_looks_at_the_whole_tree_root_first() {
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/proc");
    let sampler =
        ProcessSampler::with_table(ProcTable::at(fixture), 100, Duration::from_secs(60), None)
            .unwrap();
    assert_eq!(sampler.pid(), 100);
    let pids = |c: Option<Vec<watchdog_core::ChildInfo>>| {
        c.map(|c| c.iter().map(|c| c.pid).collect::<Vec<_>>())
    };
    let tree = Some(vec![100, 102, 105, 101, 103]);
    assert_eq!(pids(sampler.verdict_children()), tree);
    assert_eq!(pids(sampler.probe().verdict_children()), tree);
    // The periodic view has the children only.
    assert_eq!(pids(sampler.children()), Some(vec![102, 105, 101, 103]));
}

// R5.5: a one-off sample of a real process's tree finds its child (kills
// `sample_once -> Ok(vec![])`).
#[test]
fn a_one_off_sample_finds_a_real_child() {
    let mut child = std::process::Command::new("sleep")
        .arg("30")
        .spawn()
        .unwrap();
    let found = sample_once(std::process::id())
        .unwrap()
        .iter()
        .any(|c| c.pid == child.id());
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(found, "the child is one of the test's descendants");
}

// R8.13: on a kernel without `/proc/PID/syscall`, a live process's
// blocking point says so, with its kernel wait when there is one (kills the
// deleted `!` in `Inspector::describe`, which took the live process for a
// gone one and said nothing).
#[test]
fn a_kernel_without_syscall_files_says_so() {
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/proc");
    let look = ProcTable::at(fixture).peek(100).unwrap();
    let blocked: Vec<(u32, Option<String>)> = look
        .children
        .iter()
        .filter(|c| [101, 102].contains(&c.pid))
        .map(|c| (c.pid, c.blocked_on.clone()))
        .collect();
    assert_eq!(
        blocked,
        [
            (102, Some("this kernel has no /proc/PID/syscall".to_owned())),
            (
                101,
                Some("this kernel has no /proc/PID/syscall; kernel wait: io_schedule".to_owned())
            ),
        ]
    );
}

// R5.7: "errors are logged once until a poll succeeds again": a watched
// path that is a directory for three polls, a file for one, then a
// directory again gives exactly two warnings (kills the issue-26 mutants
// of FileGrowth::run's `reported_error` guard: always true warned on every
// failed poll, false or a deleted `!` never warned).
#[tokio::test(start_paused = true)]
async fn a_failing_file_poll_is_warned_about_once_per_stretch_of_failures() {
    use stallwarden_sources::file::FileGrowth;
    let captured = Captured::default();
    let subscriber = captured.warnings();
    // This thread's only: the test's runtime runs the poller here too.
    let _default = tracing::subscriber::set_default(subscriber);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("watched");
    std::fs::create_dir(&path).unwrap();
    let (_guard, task) = owner();
    let poller = tokio::spawn(FileGrowth::new(&path, task.recorder()).run(Duration::from_secs(1)));
    // Polls at 0, 1 and 2 s fail; the one at 3 s succeeds; 4 and 5 s fail.
    tokio::time::sleep(Duration::from_millis(2500)).await;
    std::fs::remove_dir(&path).unwrap();
    std::fs::write(&path, b"now a file").unwrap();
    tokio::time::sleep(Duration::from_secs(1)).await;
    std::fs::remove_file(&path).unwrap();
    std::fs::create_dir(&path).unwrap();
    tokio::time::sleep(Duration::from_secs(2)).await;
    poller.abort();
    let text = String::from_utf8(captured.0.lock().unwrap().clone()).unwrap();
    assert_eq!(text.matches("file growth poll failed").count(), 2, "{text}");
}
