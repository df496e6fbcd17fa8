//! File growth (R5.7) on real temp files, and MCP progress (R5.8, R2.6).

use std::fs::{self, OpenOptions};
use std::io::Write;
use std::time::Duration;

use stallguard_sources::file::{Change, FileError, FileGrowth};
use stallguard_sources::mcp::{McpProgress, McpRejection, Step, MAX_TOKENS};
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
    let (_guard, _rec, task) = setup("truncate");
    let mut g = FileGrowth::new(&path, task.recorder());
    g.poll().unwrap();
    // `: > app.log` then a short write: shorter than before, all new.
    fs::write(&path, b"abc").unwrap();
    assert_eq!(g.poll().unwrap(), Change::Restarted(3));
    // Truncated to nothing: a restart with no output.
    fs::File::create(&path).unwrap();
    assert_eq!(g.poll().unwrap(), Change::Restarted(0));
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
fn tracked_tokens_are_capped() {
    let (_guard, _rec, task) = setup("cap");
    let mut mcp = McpProgress::new(task.recorder());
    for i in 0..MAX_TOKENS {
        assert_eq!(mcp.feed(&progress(&i.to_string(), 1.0)), Ok(Step::Renewed));
    }
    assert_eq!(
        mcp.feed(&progress("\"one-more\"", 1.0)),
        Err(McpRejection::TooManyTokens)
    );
    assert!(mcp.forget(&serde_json::json!(0)));
    assert_eq!(mcp.feed(&progress("\"one-more\"", 1.0)), Ok(Step::Renewed));
    assert_eq!(mcp.tokens(), MAX_TOKENS);
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
