//! File growth (R5.7) on real temp files, and MCP progress (R5.8, R2.6).

mod common;

use common::Captured;

use std::fs::{self, OpenOptions};
use std::io::Write;
use std::time::Duration;

use stallwarden_sources::file::{Change, FileError, FileGrowth};
use stallwarden_sources::mcp::{McpProgress, McpRejection, Step, MAX_TOKENS};
use watchdog_core::{Guard, ManualClock, Profile, RecordingSink, SignalKind, TaskHandle};

const IDLE: Duration = Duration::from_millis(100);

fn setup(name: &str) -> (Guard, RecordingSink, TaskHandle) {
    let rec = RecordingSink::new();
    let guard = Guard::builder()
        .clock(ManualClock::new())
        .sink(rec.clone())
        .build();
    let profile = Profile::default().idle(IDLE).heartbeat_interval(None);
    let task = guard.start(name, profile).unwrap();
    (guard, rec, task)
}

fn append(path: &std::path::Path, bytes: &[u8]) {
    OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .unwrap()
        .write_all(bytes)
        .unwrap();
}

#[test]
fn a_file_that_does_not_exist_yet_counts_from_zero_when_it_appears() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("log.txt");
    let (_guard, _rec, task) = setup("appear");
    let mut g = FileGrowth::new(&path, task.recorder());
    assert_eq!(g.poll().unwrap(), Change::Missing);
    assert_eq!(g.poll().unwrap(), Change::Missing);
    fs::File::create(&path).unwrap();
    assert_eq!(
        g.poll().unwrap(),
        Change::Unchanged,
        "an empty file is no output"
    );
    append(&path, b"hello\n");
    assert_eq!(g.poll().unwrap(), Change::Grew(6));
    append(&path, b"world");
    assert_eq!(g.poll().unwrap(), Change::Grew(5));
    assert_eq!(g.poll().unwrap(), Change::Unchanged);
    assert_eq!(task.status().unwrap().total_bytes, 11);
}

#[test]
fn content_present_at_the_first_poll_is_the_baseline_not_progress() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("transcript.jsonl");
    append(&path, b"old line\n");
    let (_guard, _rec, task) = setup("baseline");
    let mut g = FileGrowth::new(&path, task.recorder());
    assert_eq!(g.poll().unwrap(), Change::Baseline(9));
    assert!(task.last_signal(SignalKind::Output).is_none());
    append(&path, b"new\n");
    assert_eq!(g.poll().unwrap(), Change::Grew(4));
    assert_eq!(task.status().unwrap().total_bytes, 4);
}

#[test]
fn a_truncated_or_replaced_file_starts_over_from_zero() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("app.log");
    append(&path, b"0123456789");
    let (guard, _rec, task) = setup("truncate");
    let mut g = FileGrowth::new(&path, task.recorder());
    g.poll().unwrap();
    // `: > app.log` then a short write: shorter than before, all new.
    fs::write(&path, b"abc").unwrap();
    assert_eq!(g.poll().unwrap(), Change::Restarted(3));
    // Truncated to nothing: a restart with no output, so no output signal
    // (the last one stays the write of 10 ms ago).
    guard.advance(Duration::from_millis(10));
    fs::File::create(&path).unwrap();
    assert_eq!(g.poll().unwrap(), Change::Restarted(0));
    let last = task.last_signal(SignalKind::Output).unwrap();
    assert_eq!(last.age, Duration::from_millis(10));
    append(&path, b"xy");
    assert_eq!(g.poll().unwrap(), Change::Grew(2));
    // Rotation: a new file renamed over the old one, even a longer one.
    let fresh = dir.path().join("app.log.new");
    fs::write(&fresh, b"rotated content").unwrap();
    fs::rename(&fresh, &path).unwrap();
    assert_eq!(g.poll().unwrap(), Change::Restarted(15));
    // Deleted, then recreated.
    fs::remove_file(&path).unwrap();
    assert_eq!(g.poll().unwrap(), Change::Missing);
    append(&path, b"again");
    assert_eq!(g.poll().unwrap(), Change::Grew(5));
    assert_eq!(task.status().unwrap().total_bytes, 3 + 2 + 15 + 5);
}

#[test]
fn a_directory_is_an_error_that_names_it() {
    let dir = tempfile::tempdir().unwrap();
    let (_guard, _rec, task) = setup("dir");
    let mut g = FileGrowth::new(dir.path(), task.recorder());
    let err = g.poll().unwrap_err();
    assert!(matches!(err, FileError::NotAFile(_)));
    assert!(err.to_string().contains(&*dir.path().to_string_lossy()));
}

#[test]
fn a_path_that_cannot_be_looked_at_is_an_error_not_a_missing_file() {
    // R5.7: only "no such file" means the file is not there yet; a path
    // through a regular file (ENOTDIR) is a mistake to report, naming it.
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("plain");
    append(&file, b"x");
    let path = file.join("log.txt");
    let (_guard, _rec, task) = setup("notdir");
    let err = FileGrowth::new(&path, task.recorder()).poll().unwrap_err();
    assert!(matches!(err, FileError::Stat { .. }), "{err:?}");
    assert!(err.to_string().contains(&*path.to_string_lossy()), "{err}");
}

#[test]
fn growth_renews_the_idle_budget() {
    // R5.7: file growth is an `output` signal.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("grow.log");
    let (guard, rec, task) = setup("grow");
    let mut g = FileGrowth::new(&path, task.recorder());
    g.poll().unwrap();
    for i in 0..3 {
        guard.advance(Duration::from_millis(90));
        append(&path, b"tick\n");
        assert_eq!(g.poll().unwrap(), Change::Grew(5), "poll {i}");
    }
    guard.advance(Duration::from_millis(90));
    assert_eq!(g.poll().unwrap(), Change::Unchanged);
    assert_eq!(rec.types_for("grow"), ["started"], "at {:?}", guard.now());
    guard.advance(Duration::from_millis(10));
    assert_eq!(rec.types_for("grow"), ["started", "stalled", "cancelling"]);
}

#[tokio::test(start_paused = true)]
async fn run_polls_on_its_interval() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("run.log");
    let (_guard, _rec, task) = setup("run");
    let poller = tokio::spawn(FileGrowth::new(&path, task.recorder()).run(Duration::from_secs(1)));
    tokio::time::sleep(Duration::from_millis(100)).await; // first poll: missing
    append(&path, b"12345");
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(task.status().unwrap().total_bytes, 0, "no poll before 1 s");
    tokio::time::sleep(Duration::from_millis(500)).await; // poll at 1 s
    assert_eq!(task.status().unwrap().total_bytes, 5);
    poller.abort();

    let zero = FileGrowth::new(&path, task.recorder())
        .run(Duration::ZERO)
        .await;
    assert!(matches!(zero, Err(FileError::ZeroInterval)));
}

// R5.7: "errors are logged once until a poll succeeds again": a watched
// path that is a directory for three polls, a file for one, then a
// directory again gives exactly two warnings (kills the issue-26 mutants
// of FileGrowth::run's `reported_error` guard: always true warned on every
// failed poll, false or a deleted `!` never warned).
#[tokio::test(start_paused = true)]
async fn a_failing_file_poll_is_warned_about_once_per_stretch_of_failures() {
    let captured = Captured::default();
    let subscriber = captured.warnings();
    // This thread's only: the test's runtime runs the poller here too.
    let _default = tracing::subscriber::set_default(subscriber);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("watched");
    std::fs::create_dir(&path).unwrap();
    let (_guard, _rec, task) = setup("poll-errors");
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

fn progress(token: &str, value: f64) -> String {
    format!(
        r#"{{"jsonrpc":"2.0","method":"notifications/progress","params":{{"progressToken":{token},"progress":{value},"total":100,"message":"working"}}}}"#
    )
}

#[test]
fn mcp_fixture_renews_only_on_rising_progress() {
    let (_guard, _rec, task) = setup("mcp");
    let mut mcp = McpProgress::new(task.recorder());
    let path = format!(
        "{}/tests/fixtures/mcp_progress.jsonl",
        env!("CARGO_MANIFEST_DIR")
    );
    let steps: Vec<_> = fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| mcp.feed(l))
        .collect();
    assert_eq!(
        steps,
        [
            Ok(Step::Renewed),
            Ok(Step::Renewed),
            Ok(Step::Ignored), // notifications/message
            Ok(Step::Ignored), // a response
            Err(McpRejection::NotRising),
            Ok(Step::Renewed),
            Ok(Step::Renewed),
        ]
    );
    assert_eq!(mcp.total_rejections(), 1);
}

#[test]
fn equal_or_lower_progress_does_not_renew() {
    // R5.8 / R2.6, in virtual time.
    let (guard, rec, task) = setup("mcp-time");
    let mut mcp = McpProgress::new(task.recorder());
    assert_eq!(mcp.feed(&progress("\"t\"", 1.0)), Ok(Step::Renewed));
    guard.advance(Duration::from_millis(90));
    assert_eq!(mcp.feed(&progress("\"t\"", 2.5)), Ok(Step::Renewed));
    guard.advance(Duration::from_millis(90));
    assert_eq!(
        mcp.feed(&progress("\"t\"", 2.5)),
        Err(McpRejection::NotRising)
    );
    assert_eq!(
        mcp.feed(&progress("\"t\"", 2.0)),
        Err(McpRejection::NotRising)
    );
    assert_eq!(rec.types_for("mcp-time"), ["started"]);
    guard.advance(Duration::from_millis(10));
    assert_eq!(
        rec.types_for("mcp-time"),
        ["started", "stalled", "cancelling"]
    );
    assert_eq!(mcp.rejections(McpRejection::NotRising), 2);
}

#[test]
fn progress_rises_per_token() {
    // Two requests in flight: a new token starting low is still progress,
    // though the task's own high-water mark is higher.
    let (guard, rec, task) = setup("tokens");
    let mut mcp = McpProgress::new(task.recorder());
    assert_eq!(mcp.feed(&progress("\"a\"", 50.0)), Ok(Step::Renewed));
    guard.advance(Duration::from_millis(90));
    assert_eq!(mcp.feed(&progress("7", 1.0)), Ok(Step::Renewed));
    guard.advance(Duration::from_millis(90));
    assert_eq!(mcp.feed(&progress("7", 2.0)), Ok(Step::Renewed));
    // The string "7" is another token than the number 7.
    assert_eq!(mcp.feed(&progress("\"7\"", 0.0)), Ok(Step::Renewed));
    assert_eq!(mcp.tokens(), 3);
    assert_eq!(rec.types_for("tokens"), ["started"]);
    assert!(mcp.forget(&serde_json::json!(7)));
    assert!(!mcp.forget(&serde_json::json!(7)));
}

#[test]
fn past_the_cap_the_oldest_token_is_evicted_never_a_new_one_refused() {
    // R5.8: tokens never retired are evicted oldest first.
    let (_guard, _rec, task) = setup("cap");
    let mut mcp = McpProgress::new(task.recorder());
    for i in 0..MAX_TOKENS {
        assert_eq!(mcp.feed(&progress(&i.to_string(), 1.0)), Ok(Step::Renewed));
    }
    assert_eq!(mcp.feed(&progress("\"one-more\"", 1.0)), Ok(Step::Renewed));
    assert_eq!(mcp.tokens(), MAX_TOKENS);
    // Token 0 was the oldest: it is gone, so its next value is a first one.
    assert!(!mcp.forget(&serde_json::json!(0)));
    assert!(mcp.forget(&serde_json::json!(1)));
}

#[test]
fn a_token_retired_and_seen_again_is_young_not_the_oldest() {
    // R5.8: eviction takes the oldest live token. Token 0 is retired, then
    // comes back after 1023 others: it is now the youngest, so the next new
    // token evicts 1, and 0 keeps its last value.
    let (_guard, _rec, task) = setup("seen-again");
    let mut mcp = McpProgress::new(task.recorder());
    assert_eq!(mcp.feed(&progress("0", 5.0)), Ok(Step::Renewed));
    assert!(mcp.forget(&serde_json::json!(0)));
    for i in 1..MAX_TOKENS {
        assert_eq!(mcp.feed(&progress(&i.to_string(), 1.0)), Ok(Step::Renewed));
    }
    assert_eq!(mcp.feed(&progress("0", 5.0)), Ok(Step::Renewed));
    assert_eq!(mcp.feed(&progress("\"new\"", 1.0)), Ok(Step::Renewed));
    assert_eq!(mcp.feed(&progress("0", 3.0)), Err(McpRejection::NotRising));
    assert!(!mcp.forget(&serde_json::json!(1)), "1 was the oldest");
}

#[test]
fn after_many_retired_tokens_the_oldest_live_one_is_still_evicted_first() {
    // R5.8: 1100 tokens that come and go (each retired at once) between
    // 1024 that stay push the eviction order past its compaction point;
    // what is compacted away are the retired ones, so the live tokens keep
    // their age: the oldest (1; 0 made way for the first passer-by) goes
    // first, a younger one stays.
    let (_guard, _rec, task) = setup("churn");
    let mut mcp = McpProgress::new(task.recorder());
    for i in 0..MAX_TOKENS {
        assert_eq!(mcp.feed(&progress(&i.to_string(), 5.0)), Ok(Step::Renewed));
    }
    for i in 0..1100 {
        let key = (100_000 + i).to_string();
        assert_eq!(mcp.feed(&progress(&key, 1.0)), Ok(Step::Renewed));
        assert!(mcp.forget(&serde_json::json!(100_000 + i)));
    }
    assert_eq!(mcp.tokens(), MAX_TOKENS - 1);
    assert_eq!(mcp.feed(&progress("200000", 1.0)), Ok(Step::Renewed));
    assert_eq!(mcp.feed(&progress("200001", 1.0)), Ok(Step::Renewed));
    assert_eq!(mcp.tokens(), MAX_TOKENS);
    assert!(!mcp.forget(&serde_json::json!(1)), "1 was the oldest");
    assert_eq!(
        mcp.feed(&progress("200000", 0.5)),
        Err(McpRejection::NotRising)
    );
    assert_eq!(mcp.feed(&progress("2", 4.0)), Err(McpRejection::NotRising));
}

fn request(id: u64, token: &str) -> String {
    format!(
        r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"probe","arguments":{{}},"_meta":{{"progressToken":{token}}}}}}}"#
    )
}

#[test]
fn a_response_an_error_or_a_cancel_retires_the_requests_token() {
    // R5.8: a token lives as long as its request.
    let (_guard, _rec, task) = setup("lifecycle");
    let mut mcp = McpProgress::new(task.recorder());
    for (id, token) in [(1, "\"tok-a\""), (2, "\"tok-b\""), (3, "\"tok-c\"")] {
        assert_eq!(mcp.feed(&request(id, token)), Ok(Step::Ignored));
        assert_eq!(mcp.feed(&progress(token, 5.0)), Ok(Step::Renewed));
    }
    assert_eq!(mcp.tokens(), 3);
    let done = r#"{"jsonrpc":"2.0","id":1,"result":{"content":[]}}"#;
    assert_eq!(mcp.feed(done), Ok(Step::Ignored));
    let failed = r#"{"jsonrpc":"2.0","id":2,"error":{"code":-32603,"message":"boom"}}"#;
    assert_eq!(mcp.feed(failed), Ok(Step::Ignored));
    let cancelled = r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":3,"reason":"user"}}"#;
    assert_eq!(mcp.feed(cancelled), Ok(Step::Ignored));
    assert_eq!(mcp.tokens(), 0);
    assert_eq!(mcp.total_rejections(), 0);
}

#[test]
fn a_response_retires_a_token_equal_to_its_id_as_the_typescript_sdk_makes_them() {
    // R5.8: the TypeScript SDK's client uses the request id as the token,
    // so the server's messages alone retire it.
    let (_guard, _rec, task) = setup("ts-sdk");
    let mut mcp = McpProgress::new(task.recorder());
    assert_eq!(mcp.feed(&progress("41", 1.0)), Ok(Step::Renewed));
    assert_eq!(mcp.tokens(), 1);
    let done = r#"{"jsonrpc":"2.0","id":41,"result":{}}"#;
    assert_eq!(mcp.feed(done), Ok(Step::Ignored));
    assert_eq!(mcp.tokens(), 0);
}

#[test]
fn a_session_ten_times_the_token_cap_keeps_renewing_with_one_token_each() {
    // R5.8: one adapter, a new token per request, every one renews, and the
    // tracked set never grows past what is in flight: ten times
    // MAX_TOKENS requests (five times the order queue's compaction point),
    // where a cap that refused new tokens, or one that kept retired ones,
    // would show. (It ran 100 000 requests, 8 s a run; issue 26.)
    let (guard, rec, task) = setup("session");
    let mut mcp = McpProgress::new(task.recorder());
    for id in 0..10 * MAX_TOKENS as u64 {
        let token = format!("\"req-{id}\"");
        assert_eq!(mcp.feed(&request(id, &token)), Ok(Step::Ignored));
        for v in [0.25, 0.5, 1.0] {
            assert_eq!(
                mcp.feed(&progress(&token, v)),
                Ok(Step::Renewed),
                "request {id}"
            );
        }
        guard.advance(Duration::from_millis(90));
        let done = format!(r#"{{"jsonrpc":"2.0","id":{id},"result":{{}}}}"#);
        assert_eq!(mcp.feed(&done), Ok(Step::Ignored));
        assert_eq!(mcp.tokens(), 0, "request {id}");
    }
    assert_eq!(mcp.total_rejections(), 0);
    assert_eq!(rec.types_for("session"), ["started"]);
}

#[test]
fn malformed_mcp_messages_are_counted_typed_rejections() {
    let (_guard, _rec, task) = setup("mcp-bad");
    let mut mcp = McpProgress::new(task.recorder());
    let cases: [(&[u8], McpRejection); 12] = [
        (b"{\"jsonrpc\":\"2.0\",\"method\":\"notifications/pro", McpRejection::InvalidJson),
        (b"\xff\xfe", McpRejection::InvalidJson),
        (b"[]", McpRejection::NotJsonRpc),
        (b"42", McpRejection::NotJsonRpc),
        (br#"{"jsonrpc":"1.0","method":"notifications/progress"}"#, McpRejection::NotJsonRpc),
        (br#"{"jsonrpc":"2.0","method":"notifications/progress"}"#, McpRejection::MalformedParams),
        (br#"{"jsonrpc":"2.0","method":"notifications/progress","params":[1]}"#, McpRejection::MalformedParams),
        (br#"{"jsonrpc":"2.0","method":"notifications/progress","params":{"progress":1}}"#, McpRejection::BadToken),
        (br#"{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":{},"progress":1}}"#, McpRejection::BadToken),
        (br#"{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"t","progress":"50%"}}"#, McpRejection::BadProgress),
        (br#"{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"t","progress":-1}}"#, McpRejection::BadProgress),
        (br#"{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"t","progress":1e999}}"#, McpRejection::InvalidJson),
    ];
    for (bytes, expected) in cases {
        assert_eq!(
            mcp.feed_bytes(bytes),
            Err(expected),
            "{}",
            String::from_utf8_lossy(bytes)
        );
    }
    assert_eq!(mcp.total_rejections(), 12);
    assert_eq!(mcp.tokens(), 0);
}

#[test]
fn a_batch_renews_when_any_member_rises() {
    let (_guard, _rec, task) = setup("batch");
    let mut mcp = McpProgress::new(task.recorder());
    let batch = format!(
        r#"[{}, {{"jsonrpc":"2.0","method":"ping","id":4}}, {{"nope":true}}]"#,
        progress("\"b\"", 3.0)
    );
    assert_eq!(mcp.feed(&batch), Ok(Step::Renewed));
    assert_eq!(mcp.rejections(McpRejection::NotJsonRpc), 1);
    assert_eq!(mcp.feed(&batch), Err(McpRejection::NotRising));
}
