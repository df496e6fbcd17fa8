//! Streamed tool-argument deltas (R5.2, R10.2) in virtual time: only fresh
//! progress renews, every refusal is a counted typed rejection, and state
//! stays bounded.

use std::time::Duration;

use stallwarden_sources::args::anthropic::AnthropicStream;
use stallwarden_sources::args::openai::OpenAiStream;
use stallwarden_sources::args::{
    ArgumentTracker, Freshness, Rejection, Step, StreamAdapter, StreamFormat, MAX_FINGERPRINTS,
};
use watchdog_core::{Guard, ManualClock, Profile, RecordingSink, TaskHandle};

const IDLE: Duration = Duration::from_millis(100);

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

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

fn message_start(id: &str) -> String {
    format!(
        r#"{{"type":"message_start","message":{{"id":"{id}","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[],"stop_reason":null,"stop_sequence":null,"usage":{{"input_tokens":10,"output_tokens":1}}}}}}"#
    )
}

fn tool_start(index: u64, id: &str, name: &str) -> String {
    format!(
        r#"{{"type":"content_block_start","index":{index},"content_block":{{"type":"tool_use","id":"{id}","name":"{name}","input":{{}}}}}}"#
    )
}

fn json_delta(index: u64, partial: &str) -> String {
    let partial = serde_json::to_string(partial).unwrap();
    format!(
        r#"{{"type":"content_block_delta","index":{index},"delta":{{"type":"input_json_delta","partial_json":{partial}}}}}"#
    )
}

fn block_stop(index: u64) -> String {
    format!(r#"{{"type":"content_block_stop","index":{index}}}"#)
}

const MESSAGE_STOP: &str = r#"{"type":"message_stop"}"#;

/// An Anthropic stream with message 1 active and tool block 0 open.
fn open_stream(task: &TaskHandle) -> AnthropicStream {
    let mut s = AnthropicStream::new(task.recorder());
    assert_eq!(s.feed(&message_start("msg_1")), Ok(Step::Tracked));
    assert_eq!(s.feed(&tool_start(0, "toolu_1", "bash")), Ok(Step::Tracked));
    s
}

#[test]
fn deltas_80ms_apart_keep_a_100ms_idle_budget_and_101ms_of_silence_stalls() {
    // R5.2 / R2.1: each fresh delta renews the idle budget.
    let (guard, rec, task) = setup("stream");
    let mut s = open_stream(&task);
    for (i, chunk) in [r#"{"command":"#, r#" "cargo"#, r#" test"#, r#" --all"}"#]
        .into_iter()
        .enumerate()
    {
        guard.advance(ms(80));
        assert_eq!(
            s.feed(&json_delta(0, chunk)),
            Ok(Step::Renewed),
            "delta {i} at {:?}",
            guard.now()
        );
    }
    guard.advance(ms(99));
    assert_eq!(rec.types_for("stream"), ["started"], "at {:?}", guard.now());
    guard.advance(ms(2)); // 101 ms after the last delta
    assert_eq!(
        rec.types_for("stream"),
        ["started", "stalled", "cancelling"],
        "at {:?}",
        guard.now()
    );
    assert_eq!(s.tracker().accepted(), 4);
}

/// Renews at 0, waits 90 ms, offers `probe`, waits 10 ms: a renewing probe
/// would hold the stall off until 190 ms.
fn assert_does_not_renew(
    name: &str,
    prepare: impl FnOnce(&mut AnthropicStream),
    probe: impl FnOnce(&mut AnthropicStream) -> Result<Step, Rejection>,
    expect: Result<Step, Rejection>,
) {
    let (guard, rec, task) = setup(name);
    let mut s = open_stream(&task);
    assert_eq!(s.feed(&json_delta(0, "{\"a\":")), Ok(Step::Renewed));
    prepare(&mut s);
    guard.advance(ms(90));
    assert_eq!(probe(&mut s), expect, "{name}: probe result");
    if let Err(reason) = expect {
        assert!(
            s.tracker().rejections().get(reason) >= 1,
            "{name}: not counted"
        );
    }
    guard.advance(ms(10));
    assert_eq!(
        rec.types_for(name),
        ["started", "stalled", "cancelling"],
        "{name} renewed the task (at {:?})",
        guard.now()
    );
}

#[test]
fn in_ordered_mode_a_repeated_fragment_renews() {
    // R5.2 (Ordered, the adapters' default): real streams repeat short
    // fragments, and each is new text at a new place in the arguments.
    let (guard, rec, task) = setup("repeat");
    let mut s = open_stream(&task);
    for _ in 0..3 {
        assert_eq!(s.feed(&json_delta(0, "\",\"")), Ok(Step::Renewed));
        guard.advance(ms(90));
    }
    assert_eq!(s.tracker().accepted(), 3);
    assert_eq!(s.tracker().fingerprints(), 0, "ordered mode keeps none");
    assert_eq!(rec.types_for("repeat"), ["started"]);
}

/// A deduplicated tracker with message 1 active and block 0 open.
fn dedup_tracker(task: &TaskHandle) -> ArgumentTracker {
    let mut t = ArgumentTracker::with_freshness(task.recorder(), Freshness::Deduplicated);
    t.message_start(1).unwrap();
    t.block_start(0, "call_1", "write").unwrap();
    t
}

#[test]
fn in_deduplicated_mode_a_replay_at_the_same_offset_does_not_renew() {
    // R5.2 (Deduplicated): a replayed chunk never renews.
    let (guard, rec, task) = setup("replay");
    let mut t = dedup_tracker(&task);
    assert_eq!(t.delta_at(0, 0, "{\"a\":"), Ok(()));
    guard.advance(ms(90));
    assert_eq!(t.delta_at(0, 0, "{\"a\":"), Err(Rejection::DuplicateDelta));
    assert_eq!(t.rejections().get(Rejection::DuplicateDelta), 1);
    guard.advance(ms(10));
    assert_eq!(
        rec.types_for("replay"),
        ["started", "stalled", "cancelling"]
    );
}

#[test]
fn in_deduplicated_mode_a_repeated_fragment_at_a_new_position_renews() {
    // R5.2 (Deduplicated): the fingerprint holds the position, so the same
    // text further on is progress, by the wire's offset or by the block's
    // accumulated length.
    let (guard, rec, task) = setup("new-position");
    let mut t = dedup_tracker(&task);
    assert_eq!(t.delta_at(0, 0, ","), Ok(()));
    guard.advance(ms(90));
    assert_eq!(t.delta_at(0, 1, ","), Ok(()));
    guard.advance(ms(90));
    assert_eq!(t.delta(0, ","), Ok(()), "accumulated length 2");
    guard.advance(ms(90));
    assert_eq!(t.accepted(), 3);
    assert_eq!(rec.types_for("new-position"), ["started"]);
}

#[test]
fn deduplicated_mode_forgets_the_oldest_fingerprint_past_4096_and_never_fails_closed() {
    // R5.2: past 4096 fingerprints the oldest are dropped; a replay older
    // than that counts as fresh, a new delta is never refused.
    let (_guard, _rec, task) = setup("evict");
    let mut t = dedup_tracker(&task);
    for i in 0..MAX_FINGERPRINTS as u64 + 10 {
        assert_eq!(t.delta_at(0, i, "x"), Ok(()), "delta {i}");
    }
    assert_eq!(t.fingerprints(), MAX_FINGERPRINTS);
    // The 10 oldest were forgotten: replaying one of them is fresh ...
    assert_eq!(t.delta_at(0, 3, "x"), Ok(()));
    // ... while a recent one is still a replay.
    assert_eq!(
        t.delta_at(0, MAX_FINGERPRINTS as u64, "x"),
        Err(Rejection::DuplicateDelta)
    );
    assert_eq!(t.fingerprints(), MAX_FINGERPRINTS);
}

#[test]
fn an_empty_delta_does_not_renew() {
    assert_does_not_renew(
        "empty",
        |_| {},
        |s| s.feed(&json_delta(0, "")),
        Err(Rejection::EmptyDelta),
    );
}

#[test]
fn a_non_string_delta_does_not_renew() {
    assert_does_not_renew(
        "non-string",
        |_| {},
        |s| {
            s.feed(r#"{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":42}}"#)
        },
        Err(Rejection::MalformedEvent),
    );
}

#[test]
fn a_delta_on_an_unannounced_block_does_not_renew() {
    assert_does_not_renew(
        "unannounced",
        |_| {},
        |s| s.feed(&json_delta(3, "{\"b\":")),
        Err(Rejection::BlockNotAnnounced),
    );
}

#[test]
fn a_delta_on_a_closed_block_does_not_renew() {
    assert_does_not_renew(
        "closed",
        |s| assert_eq!(s.feed(&block_stop(0)), Ok(Step::Tracked)),
        |s| s.feed(&json_delta(0, "\"fresh\"}")),
        Err(Rejection::BlockClosed),
    );
}

#[test]
fn a_closed_block_never_reopens_in_its_generation() {
    assert_does_not_renew(
        "reopen",
        |s| assert_eq!(s.feed(&block_stop(0)), Ok(Step::Tracked)),
        |s| s.feed(&tool_start(0, "toolu_1", "bash")),
        Err(Rejection::BlockAlreadyAnnounced),
    );
}

#[test]
fn a_re_sent_block_start_does_not_renew() {
    assert_does_not_renew(
        "resent",
        |_| {},
        |s| s.feed(&tool_start(0, "toolu_1", "bash")),
        Err(Rejection::BlockAlreadyAnnounced),
    );
}

#[test]
fn a_message_start_while_one_is_active_does_not_renew() {
    assert_does_not_renew(
        "second-start",
        |_| {},
        |s| s.feed(&message_start("msg_2")),
        Err(Rejection::GenerationActive),
    );
}

#[test]
fn non_progress_events_do_not_renew() {
    // Pings, text, thinking, message_delta and unknown types are ignored.
    for (i, event) in [
        r#"{"type":"ping"}"#,
        r#"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Let me check"}}"#,
        r#"{"type":"content_block_delta","index":2,"delta":{"type":"thinking_delta","thinking":"hmm"}}"#,
        r#"{"type":"message_delta","delta":{"stop_reason":"tool_use","stop_sequence":null},"usage":{"output_tokens":89}}"#,
        r#"{"type":"content_block_start","index":5,"content_block":{"type":"text","text":""}}"#,
        r#"{"type":"some_future_event","payload":{}}"#,
    ]
    .into_iter()
    .enumerate()
    {
        assert_does_not_renew(
            &format!("non-progress-{i}"),
            |_| {},
            |s| s.feed(event),
            Ok(Step::Ignored),
        );
    }
}

#[test]
fn a_message_start_with_an_equal_timestamp_is_refused() {
    // R5.2: strictly greater than the last accepted timestamp.
    let (guard, rec, task) = setup("equal-ts");
    let mut t = ArgumentTracker::new(task.recorder());
    t.message_start(7).unwrap();
    t.block_start(0, "call_1", "bash").unwrap();
    t.delta(0, "{").unwrap();
    t.message_end();
    guard.advance(ms(90));
    assert_eq!(t.message_start(7), Err(Rejection::StaleTimestamp));
    assert_eq!(t.message_start(6), Err(Rejection::StaleTimestamp));
    assert_eq!(t.message_start(-1), Err(Rejection::NegativeTimestamp));
    // Without an active generation nothing below can renew.
    assert_eq!(
        t.block_start(0, "call_1", "bash"),
        Err(Rejection::NoActiveGeneration)
    );
    assert_eq!(t.delta(0, "{\"x\""), Err(Rejection::NoActiveGeneration));
    guard.advance(ms(10));
    assert_eq!(
        rec.types_for("equal-ts"),
        ["started", "stalled", "cancelling"]
    );
    assert_eq!(t.rejections().get(Rejection::StaleTimestamp), 2);
    assert_eq!(t.message_start(8), Ok(()));
}

#[test]
fn block_announcements_need_an_id_a_name_and_an_index_below_4096() {
    let (_guard, _rec, task) = setup("blocks");
    let mut t = ArgumentTracker::new(task.recorder());
    t.message_start(0).unwrap();
    assert_eq!(
        t.block_start(4096, "c", "n"),
        Err(Rejection::IndexOutOfRange)
    );
    assert_eq!(
        t.block_start(u64::MAX, "c", "n"),
        Err(Rejection::IndexOutOfRange)
    );
    assert_eq!(t.block_start(1, "", "n"), Err(Rejection::EmptyId));
    assert_eq!(t.block_start(1, "c", ""), Err(Rejection::EmptyName));
    assert_eq!(t.block_start(4095, "c", "n"), Ok(()));
    assert_eq!(t.delta(4095, "x"), Ok(()));
    assert_eq!(t.block_stop(4095), Ok(()));
    assert_eq!(t.block_stop(4095), Err(Rejection::BlockClosed));
    assert_eq!(t.block_stop(7), Err(Rejection::BlockNotAnnounced));
    assert_eq!(t.open_blocks(), 0);
    assert_eq!(t.rejections().total(), 6);
}

#[test]
fn deduplicated_fingerprints_are_cleared_by_a_new_message() {
    // R5.2: fingerprints belong to one generation.
    let (_guard, _rec, task) = setup("generations");
    let mut t = dedup_tracker(&task);
    assert_eq!(t.delta_at(0, 0, "{"), Ok(()));
    assert_eq!(t.fingerprints(), 1);
    t.message_end();
    assert_eq!(t.fingerprints(), 0);
    t.message_start(2).unwrap();
    t.block_start(0, "call_2", "write").unwrap();
    assert_eq!(t.delta_at(0, 0, "{"), Ok(()));
}

#[test]
fn a_new_message_accepts_a_previously_seen_chunk_again() {
    let (_guard, _rec, task) = setup("again");
    let mut s = open_stream(&task);
    assert_eq!(s.feed(&json_delta(0, "{\"path\":")), Ok(Step::Renewed));
    assert_eq!(s.feed(MESSAGE_STOP), Ok(Step::Tracked));
    // Between messages nothing renews.
    assert_eq!(
        s.feed(&json_delta(0, "{\"path\":")),
        Err(Rejection::NoActiveGeneration)
    );
    assert_eq!(s.feed(&message_start("msg_2")), Ok(Step::Tracked));
    assert_eq!(s.feed(&tool_start(0, "toolu_2", "read")), Ok(Step::Tracked));
    assert_eq!(s.feed(&json_delta(0, "{\"path\":")), Ok(Step::Renewed));
}

#[test]
fn turn_end_releases_a_message_that_never_stopped() {
    let (_guard, _rec, task) = setup("turn-end");
    let mut s = open_stream(&task);
    assert_eq!(
        s.feed(&message_start("msg_2")),
        Err(Rejection::GenerationActive)
    );
    s.turn_end();
    assert_eq!(s.feed(&message_start("msg_2")), Ok(Step::Tracked));
}

fn oa_chunk(id: &str, created: i64, delta: &str, finish: &str) -> String {
    format!(
        r#"{{"id":"{id}","object":"chat.completion.chunk","created":{created},"model":"gpt-4o","choices":[{{"index":0,"delta":{delta},"logprobs":null,"finish_reason":{finish}}}]}}"#
    )
}

fn oa_start(id: &str, created: i64, call: &str) -> String {
    let delta = format!(
        r#"{{"role":"assistant","content":null,"tool_calls":[{{"index":0,"id":"{call}","type":"function","function":{{"name":"bash","arguments":""}}}}]}}"#
    );
    oa_chunk(id, created, &delta, "null")
}

fn oa_args(id: &str, created: i64, args: &str) -> String {
    let args = serde_json::to_string(args).unwrap();
    let delta = format!(r#"{{"tool_calls":[{{"index":0,"function":{{"arguments":{args}}}}}]}}"#);
    oa_chunk(id, created, &delta, "null")
}

#[test]
fn openai_responses_sharing_a_created_second_are_distinct_messages() {
    // `created` has one-second resolution: a derived counter keeps message
    // timestamps strictly rising (R5.2).
    let (_guard, _rec, task) = setup("same-second");
    let mut s = OpenAiStream::new(task.recorder());
    assert_eq!(
        s.feed(&oa_start("chatcmpl-a", 100, "call_a")),
        Ok(Step::Tracked)
    );
    assert_eq!(
        s.feed(&oa_args("chatcmpl-a", 100, "{\"x\"")),
        Ok(Step::Renewed)
    );
    assert_eq!(
        s.feed(&oa_chunk("chatcmpl-a", 100, "{}", "\"tool_calls\"")),
        Ok(Step::Tracked)
    );
    assert_eq!(
        s.feed(&oa_start("chatcmpl-b", 100, "call_b")),
        Ok(Step::Tracked)
    );
    assert_eq!(
        s.feed(&oa_args("chatcmpl-b", 100, "{\"x\"")),
        Ok(Step::Renewed)
    );
    // A new id without a finish first still moves on.
    assert_eq!(
        s.feed(&oa_start("chatcmpl-c", 101, "call_c")),
        Ok(Step::Tracked)
    );
    assert_eq!(
        s.feed(&oa_args("chatcmpl-c", 101, "{\"x\"")),
        Ok(Step::Renewed)
    );
}

// R5.2: an OpenAI message's place within its `created` second counts from
// 0 in each new second, so a long stream with one message a second is never
// refused for running out of room in a second (kills the match guard
// `sec == created -> true` in `OpenAiStream::new_message`, which carried
// the count across seconds and refused the 65 537th message).
#[test]
fn openai_messages_in_new_seconds_count_from_zero() {
    let (_guard, _rec, task) = setup("new-seconds");
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

#[test]
fn openai_replayed_older_response_is_refused_and_the_current_one_continues() {
    let (_guard, _rec, task) = setup("replay");
    let mut s = OpenAiStream::new(task.recorder());
    s.feed(&oa_start("chatcmpl-new", 200, "call_1")).unwrap();
    assert_eq!(
        s.feed(&oa_args("chatcmpl-old", 150, "{\"y\"")),
        Err(Rejection::StaleTimestamp)
    );
    assert!(s.tracker().is_active());
    assert_eq!(
        s.feed(&oa_args("chatcmpl-new", 200, "{\"y\"")),
        Ok(Step::Renewed)
    );
    // The same fragment again is more text of an ordered stream (R5.2); a
    // re-sent start does not renew.
    assert_eq!(
        s.feed(&oa_args("chatcmpl-new", 200, "{\"y\"")),
        Ok(Step::Renewed)
    );
    assert_eq!(
        s.feed(&oa_start("chatcmpl-new", 200, "call_1")),
        Err(Rejection::BlockAlreadyAnnounced)
    );
}

#[test]
fn openai_choices_other_than_zero_are_refused() {
    let (_guard, _rec, task) = setup("choices");
    let mut s = OpenAiStream::new(task.recorder());
    let chunk = r#"{"id":"c","object":"chat.completion.chunk","created":1,"choices":[{"index":1,"delta":{"content":"hi"},"finish_reason":null}]}"#;
    assert_eq!(s.feed(chunk), Err(Rejection::UnsupportedChoice));
}

/// An OpenAI chunk announcing call `call_1`, and one streaming a fragment
/// of its arguments.
const OA_START: &str = r#"{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1767225600,"model":"gpt-4o","choices":[{"index":0,"delta":{"role":"assistant","content":null,"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"bash","arguments":""}}]},"finish_reason":null}]}"#;
const OA_ARGS: &str = r#"{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1767225600,"model":"gpt-4o","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"cmd\""}}]},"finish_reason":null}]}"#;

// R5.2: a runner that drops an OpenAI stream midway ends the turn; the
// message closes, so a late delta of it no longer renews the idle budget
// and `[DONE]` has nothing left to end (kills `OpenAiStream::turn_end -> ()`).
#[test]
fn openai_turn_end_closes_the_message_midway() {
    let (_guard, _rec, task) = setup("openai-turn-end");
    let mut s = OpenAiStream::new(task.recorder());
    assert_eq!(s.feed(OA_START), Ok(Step::Tracked));
    assert_eq!(s.feed(OA_ARGS), Ok(Step::Renewed));
    assert!(s.tracker().is_active());
    s.turn_end();
    assert!(!s.tracker().is_active());
    assert_eq!(s.feed(OA_ARGS), Err(Rejection::NoActiveGeneration));
    assert_eq!(s.feed("[DONE]"), Ok(Step::Ignored));
}

#[test]
fn malformed_input_is_a_counted_typed_rejection() {
    // R10.2: truncated JSON, wrong types, garbage — never a panic.
    let (_guard, _rec, task) = setup("malformed");
    let mut a = open_stream(&task);
    let huge_id = "x".repeat(1 << 20);
    let cases: Vec<(Vec<u8>, Rejection)> = vec![
        (br#"{"type":"content_block_delta","index":0,"delta":{"type":"input_js"#.to_vec(), Rejection::InvalidJson),
        (b"\xff\xfe\x00garbage".to_vec(), Rejection::InvalidJson),
        (b"".to_vec(), Rejection::InvalidJson),
        (b"[1,2,3]".to_vec(), Rejection::MalformedEvent),
        (b"null".to_vec(), Rejection::MalformedEvent),
        (br#"{"type":7}"#.to_vec(), Rejection::MalformedEvent),
        (br#"{"type":"content_block_delta","index":"0","delta":{"type":"input_json_delta","partial_json":"x"}}"#.to_vec(), Rejection::MalformedEvent),
        (br#"{"type":"content_block_delta","index":-1,"delta":{"type":"input_json_delta","partial_json":"x"}}"#.to_vec(), Rejection::IndexOutOfRange),
        (br#"{"type":"content_block_delta","index":1.5,"delta":{"type":"input_json_delta","partial_json":"x"}}"#.to_vec(), Rejection::MalformedEvent),
        (br#"{"type":"content_block_delta","index":99999999999999999999,"delta":{}}"#.to_vec(), Rejection::MalformedEvent),
        (br#"{"type":"content_block_delta","index":0}"#.to_vec(), Rejection::MalformedEvent),
        (br#"{"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":null,"name":"x"}}"#.to_vec(), Rejection::MalformedEvent),
        (br#"{"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"","name":"x"}}"#.to_vec(), Rejection::EmptyId),
        (br#"{"type":"message_start","message":{}}"#.to_vec(), Rejection::MalformedEvent),
        (tool_start(2, &huge_id, "bash").into_bytes(), Rejection::MalformedEvent),
    ];
    let n = cases.len();
    for (i, (bytes, expected)) in cases.into_iter().enumerate() {
        let got = a.feed_bytes(&bytes);
        if i == n - 1 {
            // A huge id is valid input: accepted, and never stored.
            assert_eq!(got, Ok(Step::Tracked));
        } else {
            assert_eq!(
                got,
                Err(expected),
                "case {i}: {}",
                String::from_utf8_lossy(&bytes)
            );
        }
    }
    assert_eq!(a.tracker().rejections().total(), n as u64 - 1);
    assert!(format!("{a:?}").len() < 1024, "the huge id is not kept");

    let mut o = OpenAiStream::new(task.recorder());
    for (chunk, expected) in [
        (
            r#"{"id":"c","created":-5,"choices":[]}"#,
            Rejection::NegativeTimestamp,
        ),
        (
            r#"{"id":"c","created":1.5,"choices":[]}"#,
            Rejection::BadTimestamp,
        ),
        (
            r#"{"id":"c","created":18446744073709551615,"choices":[]}"#,
            Rejection::BadTimestamp,
        ),
        (
            r#"{"id":"c","created":"now","choices":[]}"#,
            Rejection::MalformedEvent,
        ),
        (
            r#"{"id":42,"created":1,"choices":[]}"#,
            Rejection::MalformedEvent,
        ),
        (
            r#"{"id":"c","created":1,"choices":{}}"#,
            Rejection::MalformedEvent,
        ),
        (
            r#"{"id":"c","created":1,"choices":[{"index":0,"delta":{"tool_calls":{}}}]}"#,
            Rejection::MalformedEvent,
        ),
        (
            r#"{"id":"c","created":1,"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":7}}]}}]}"#,
            Rejection::MalformedEvent,
        ),
        (
            r#"{"id":"c","created":1,"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call","function":{}}]}}]}"#,
            Rejection::EmptyName,
        ),
        (
            r#"{"id":"c","created":1,"choices":[{"index":0,"delta":{},"finish_reason":3}]}"#,
            Rejection::MalformedEvent,
        ),
        ("data: {}", Rejection::InvalidJson),
    ] {
        assert_eq!(o.feed(chunk), Err(expected), "{chunk}");
    }
    // R10.6: counted once, on the task: both adapters' refusals together.
    assert_eq!(o.tracker().rejections().total(), n as u64 - 1 + 11);
    assert_eq!(
        task.status().unwrap().refused.values().sum::<u64>(),
        n as u64 - 1 + 11
    );
}

#[test]
fn a_flood_of_deltas_keeps_memory_bounded_and_every_delta_renews() {
    // R10.2 / R5.2: 100 000 deltas, in both modes, all accepted; ordered
    // mode keeps no fingerprint, deduplicated mode at most 4096.
    let (_guard, _rec, task) = setup("flood");
    for freshness in [Freshness::Ordered, Freshness::Deduplicated] {
        let mut t = ArgumentTracker::with_freshness(task.recorder(), freshness);
        t.message_start(1).unwrap();
        t.block_start(0, "call", "bash").unwrap();
        let total = 100_000u64;
        for i in 0..total {
            assert_eq!(t.delta(0, &format!("chunk-{}", i % 7)), Ok(()));
        }
        assert_eq!(t.accepted(), total);
        assert!(t.fingerprints() <= MAX_FINGERPRINTS, "{freshness:?}");
        assert_eq!(t.rejections().total(), 0);
    }
}

/// R5.2 (Ordered): a 50 000-delta stream made only of the short fragments
/// real streams repeat keeps renewing to its last delta, with no per-delta
/// state kept.
///
/// Each case is 50 000 deltas through the adapter (the scale of seed 004);
/// the gaps and picks vary, the rule under test does not, so three cases
/// prove it. The runner is built here rather than by `proptest!`, whose
/// macro lets `PROPTEST_CASES` (raised for the other properties in a
/// mutation run) override the count: 32 cases cost 13 s per mutant
/// (issue 26: per-mutant test time).
#[test]
fn fifty_thousand_repeated_fragments_renew_to_the_last_delta_in_ordered_mode() {
    use proptest::test_runner::{Config, TestRunner};
    const FRAGMENTS: [&str; 6] = [":", ",", "  ", "\"", "\",\"", "\n    "];
    let events = FRAGMENTS.map(|f| json_delta(0, f));
    let mut runner = TestRunner::new(Config {
        cases: 3,
        failure_persistence: None,
        ..Config::default()
    });
    let strategy = (proptest::collection::vec(0usize..6, 50_000), 1u64..100);
    let outcome = runner.run(&strategy, |(picks, gap)| {
        let (guard, rec, task) = setup("fifty-thousand");
        let mut s = open_stream(&task);
        for (n, pick) in picks.iter().enumerate() {
            guard.advance(ms(gap));
            proptest::prop_assert_eq!(
                s.feed(&events[*pick]),
                Ok(Step::Renewed),
                "delta {} at {:?}",
                n,
                guard.now()
            );
            proptest::prop_assert_eq!(s.tracker().fingerprints(), 0);
        }
        proptest::prop_assert_eq!(s.tracker().accepted(), 50_000);
        proptest::prop_assert_eq!(rec.types_for("fifty-thousand"), ["started"]);
        // The last delta renewed: a full budget from it is the first stall.
        guard.advance(IDLE - ms(1));
        proptest::prop_assert_eq!(rec.types_for("fifty-thousand"), ["started"]);
        guard.advance(ms(1));
        proptest::prop_assert_eq!(
            rec.types_for("fifty-thousand"),
            ["started", "stalled", "cancelling"]
        );
        Ok(())
    });
    if let Err(e) = outcome {
        panic!("{e}");
    }
}

// R5.2: the tracker says its freshness mode, which blocks are open and how
// many (kills the issue-26 mutants of ArgumentTracker::freshness, is_open and
// open_blocks, and of BlockSet::count, which only doctests saw).
#[test]
fn the_tracker_reports_its_mode_and_its_open_blocks() {
    let (_guard, _rec, task) = setup("accessors");
    assert_eq!(
        ArgumentTracker::new(task.recorder()).freshness(),
        Freshness::Ordered
    );
    let mut t = ArgumentTracker::with_freshness(task.recorder(), Freshness::Deduplicated);
    assert_eq!(t.freshness(), Freshness::Deduplicated);
    t.message_start(1).unwrap();
    for (i, id) in ["call_0", "call_1", "call_2"].into_iter().enumerate() {
        t.block_start(i as u64, id, "bash").unwrap();
    }
    t.block_stop(1).unwrap();
    assert_eq!(t.open_blocks(), 2);
    let open: Vec<bool> = (0..4).map(|i| t.is_open(i)).collect();
    assert_eq!(open, [true, false, true, false]);
    t.message_end();
    assert_eq!((t.open_blocks(), t.is_open(0)), (0, false));
}

// R10.6: the task's `args.` refusals iterate in declaration order with their
// counts, and print by key (kills the issue-26 mutant that makes
// RejectionCounts::iter empty).
#[test]
fn rejection_counts_iterate_the_reasons_counted() {
    let (_guard, _rec, task) = setup("counts");
    let mut t = ArgumentTracker::new(task.recorder());
    t.message_start(1).unwrap();
    t.block_start(0, "call_0", "bash").unwrap();
    assert_eq!(t.delta(0, ""), Err(Rejection::EmptyDelta));
    assert_eq!(t.delta(0, ""), Err(Rejection::EmptyDelta));
    assert_eq!(t.delta(5, "x"), Err(Rejection::BlockNotAnnounced));
    let counts = t.rejections();
    let seen: Vec<_> = counts.iter().collect();
    assert_eq!(
        seen,
        [
            (Rejection::BlockNotAnnounced, 1),
            (Rejection::EmptyDelta, 2)
        ]
    );
    assert_eq!(
        format!("{counts:?}"),
        r#"{"args.block_not_announced": 1, "args.empty_delta": 2}"#
    );
}

fn rs_created(id: &str) -> String {
    format!(
        r#"{{"type":"response.created","response":{{"id":"{id}","object":"response","status":"in_progress","output":[]}},"sequence_number":0}}"#
    )
}

fn rs_added(index: u64) -> String {
    format!(
        r#"{{"type":"response.output_item.added","item":{{"id":"fc_{index}","type":"function_call","status":"in_progress","arguments":"","call_id":"call_{index}","name":"get_weather"}},"output_index":{index},"sequence_number":1}}"#
    )
}

fn rs_delta(index: u64) -> String {
    format!(
        r#"{{"type":"response.function_call_arguments.delta","delta":"{{\"city\"","item_id":"fc_{index}","output_index":{index},"sequence_number":2}}"#
    )
}

fn rs_args_done(index: u64) -> String {
    format!(
        r#"{{"type":"response.function_call_arguments.done","arguments":"{{\"city\":\"Paris\"}}","item_id":"fc_{index}","output_index":{index},"sequence_number":3}}"#
    )
}

fn rs_item_done(index: u64) -> String {
    format!(
        r#"{{"type":"response.output_item.done","item":{{"id":"fc_{index}","type":"function_call","status":"completed","arguments":"{{\"city\":\"Paris\"}}","call_id":"call_{index}","name":"get_weather"}},"output_index":{index},"sequence_number":4}}"#
    )
}

// R5.9, R5.2: in the Responses API, `function_call_arguments.done` closes
// its block and `output_item.done` closes one still open (and is ignored
// for one already closed); no delta renews a closed block (kills the
// issue-26 mutants that drop those two arms of ResponsesStream::dispatch and
// make ArgumentTracker::is_open false).
#[test]
fn responses_done_events_close_the_block() {
    use stallwarden_sources::args::responses::ResponsesStream;
    let (_guard, _rec, task) = setup("responses-done");
    let mut s = ResponsesStream::new(task.recorder());
    assert_eq!(s.feed(&rs_created("resp_1")), Ok(Step::Tracked));
    assert_eq!(s.feed(&rs_added(0)), Ok(Step::Tracked));
    assert_eq!(s.feed(&rs_delta(0)), Ok(Step::Renewed));
    assert_eq!(s.feed(&rs_args_done(0)), Ok(Step::Tracked));
    assert_eq!(s.feed(&rs_delta(0)), Err(Rejection::BlockClosed));
    assert_eq!(s.feed(&rs_item_done(0)), Ok(Step::Ignored));
    // An item whose arguments' `done` was lost closes with the item.
    assert_eq!(s.feed(&rs_added(1)), Ok(Step::Tracked));
    assert_eq!(s.feed(&rs_delta(1)), Ok(Step::Renewed));
    assert_eq!(s.feed(&rs_item_done(1)), Ok(Step::Tracked));
    assert_eq!(s.feed(&rs_delta(1)), Err(Rejection::BlockClosed));
    assert_eq!(s.tracker().open_blocks(), 0);
}

// R5.9: `response.completed`, `response.failed`, `response.incomplete` and
// `error` each end the generation, and so does the runner's turn_end (kills
// the issue-26 mutants that drop the terminal arm of
// ResponsesStream::dispatch and make its turn_end a no-op).
#[test]
fn responses_terminal_events_and_turn_end_end_the_generation() {
    use stallwarden_sources::args::responses::ResponsesStream;
    let (_guard, _rec, task) = setup("responses-end");
    let mut s = ResponsesStream::new(task.recorder());
    let terminal = [
        r#"{"type":"response.completed","response":{"id":"resp_1","object":"response","status":"completed"},"sequence_number":5}"#,
        r#"{"type":"response.failed","response":{"id":"resp_2","object":"response","status":"failed","error":{"code":"server_error","message":"x"}},"sequence_number":5}"#,
        r#"{"type":"response.incomplete","response":{"id":"resp_3","object":"response","status":"incomplete","incomplete_details":{"reason":"max_output_tokens"}},"sequence_number":5}"#,
        r#"{"type":"error","code":"server_error","message":"The server had an error","param":null,"sequence_number":5}"#,
    ];
    for (n, end) in terminal.into_iter().enumerate() {
        assert_eq!(
            s.feed(&rs_created(&format!("resp_{}", n + 1))),
            Ok(Step::Tracked)
        );
        assert_eq!(s.feed(&rs_added(0)), Ok(Step::Tracked));
        assert_eq!(s.feed(end), Ok(Step::Tracked), "{end}");
        assert!(!s.tracker().is_active(), "{end}");
        assert_eq!(s.feed(&rs_delta(0)), Err(Rejection::NoActiveGeneration));
    }
    assert_eq!(s.feed(&rs_created("resp_5")), Ok(Step::Tracked));
    assert_eq!(s.feed(&rs_added(0)), Ok(Step::Tracked));
    s.turn_end();
    assert!(!s.tracker().is_active());
    assert_eq!(s.feed(&rs_delta(0)), Err(Rejection::NoActiveGeneration));
    // The runner may retry the same response after dropping it.
    assert_eq!(s.feed(&rs_created("resp_5")), Ok(Step::Tracked));
}

// R5.9: the same response created twice while it is active is refused; a
// response created while another is active (its terminal event lost) ends
// the old one and starts (kills the issue-26 mutants of dispatch's
// `self.current == Some(id) && self.tracker.is_active()`).
#[test]
fn responses_created_again_is_refused_and_another_response_moves_on() {
    use stallwarden_sources::args::responses::ResponsesStream;
    let (_guard, _rec, task) = setup("responses-created");
    let mut s = ResponsesStream::new(task.recorder());
    assert_eq!(s.feed(&rs_created("resp_1")), Ok(Step::Tracked));
    assert_eq!(s.feed(&rs_added(0)), Ok(Step::Tracked));
    assert_eq!(
        s.feed(&rs_created("resp_1")),
        Err(Rejection::GenerationActive)
    );
    assert_eq!(s.feed(&rs_delta(0)), Ok(Step::Renewed));
    assert_eq!(s.feed(&rs_created("resp_2")), Ok(Step::Tracked));
    assert_eq!(s.feed(&rs_delta(0)), Err(Rejection::BlockNotAnnounced));
}

fn gm(response: Option<&str>, part: &str) -> String {
    let id = response.map_or(String::new(), |r| format!(r#","responseId":"{r}""#));
    format!(
        r#"{{"candidates":[{{"content":{{"role":"model","parts":[{part}]}}}}],"modelVersion":"gemini-3.1-pro-preview"{id}}}"#
    )
}

const GM_CALL: &str = r#"{"functionCall":{"name":"getWeather","willContinue":true}}"#;
const GM_ARGS: &str = r#"{"functionCall":{"partialArgs":[{"jsonPath":"$.location","stringValue":"Boston","willContinue":true}],"willContinue":true}}"#;

// R5.9: a chunk of another `responseId` starts a new response, whose call
// must be announced again; a `responseId` first seen mid-response names the
// current one (kills the issue-26 mutants of GeminiStream::begin's
// `id != cur` guard and `(Some(id), None)` arm).
#[test]
fn gemini_another_response_id_starts_a_new_response() {
    use stallwarden_sources::args::gemini::GeminiStream;
    let (_guard, _rec, task) = setup("gemini-ids");
    let mut s = GeminiStream::new(task.recorder());
    assert_eq!(s.feed(&gm(Some("r1"), GM_CALL)), Ok(Step::Tracked));
    assert_eq!(s.feed(&gm(Some("r1"), GM_ARGS)), Ok(Step::Renewed));
    assert_eq!(
        s.feed(&gm(Some("r2"), GM_ARGS)),
        Err(Rejection::BlockNotAnnounced)
    );
    assert_eq!(s.feed(&gm(Some("r2"), GM_CALL)), Ok(Step::Tracked));
    assert_eq!(s.feed(&gm(Some("r2"), GM_ARGS)), Ok(Step::Renewed));
    assert_eq!(s.tracker().open_blocks(), 1);
    // No id first, then one: that id is the response's own.
    let mut s = GeminiStream::new(task.recorder());
    assert_eq!(s.feed(&gm(None, GM_CALL)), Ok(Step::Tracked));
    assert_eq!(s.feed(&gm(Some("r1"), GM_ARGS)), Ok(Step::Renewed));
    assert_eq!(s.feed(&gm(Some("r1"), GM_ARGS)), Ok(Step::Renewed));
    assert_eq!(
        s.feed(&gm(Some("r2"), GM_ARGS)),
        Err(Rejection::BlockNotAnnounced)
    );
}

// R5.9: the runner's turn_end drops the response and the call it streamed:
// its next argument part announces nothing (kills the issue-26 mutant that
// makes GeminiStream::turn_end a no-op).
#[test]
fn gemini_turn_end_drops_the_call_being_streamed() {
    use stallwarden_sources::args::gemini::GeminiStream;
    let (_guard, _rec, task) = setup("gemini-turn-end");
    let mut s = GeminiStream::new(task.recorder());
    assert_eq!(s.feed(&gm(Some("r1"), GM_CALL)), Ok(Step::Tracked));
    s.turn_end();
    assert!(!s.tracker().is_active());
    assert_eq!(
        s.feed(&gm(Some("r1"), GM_ARGS)),
        Err(Rejection::BlockNotAnnounced)
    );
}

// R5.9: a candidate other than index 0 is refused and starts nothing; index
// 0 said outright is read (kills the issue-26 mutant of GeminiStream::apply's
// `json_index(index)? != 0` guard).
#[test]
fn gemini_candidates_other_than_index_zero_are_refused() {
    use stallwarden_sources::args::gemini::GeminiStream;
    let (_guard, _rec, task) = setup("gemini-candidates");
    let mut s = GeminiStream::new(task.recorder());
    let with_index = |i: u64| {
        format!(
            r#"{{"candidates":[{{"content":{{"role":"model","parts":[{GM_CALL}]}},"index":{i}}}],"responseId":"r1"}}"#
        )
    };
    assert_eq!(s.feed(&with_index(1)), Err(Rejection::UnsupportedChoice));
    assert!(!s.tracker().is_active());
    assert_eq!(s.feed(&with_index(0)), Ok(Step::Tracked));
    assert_eq!(s.tracker().open_blocks(), 1);
}

// R5.2: three responses within one real `created` second get rising message
// timestamps (kills the issue-26 mutant of OpenAiStream::new_message's
// `ts % PER_SECOND`, which small test seconds hid).
#[test]
fn openai_responses_within_one_real_second_all_start() {
    let (_guard, _rec, task) = setup("real-second");
    let mut s = OpenAiStream::new(task.recorder());
    for id in ["chatcmpl-a", "chatcmpl-b", "chatcmpl-c"] {
        assert_eq!(
            s.feed(&oa_start(id, 1770764938, "call_1")),
            Ok(Step::Tracked),
            "{id}"
        );
        assert_eq!(
            s.feed(&oa_args(id, 1770764938, "{\"x\"")),
            Ok(Step::Renewed),
            "{id}"
        );
    }
}

// R5.2, R10.2: `created` is read from 0 up to the last second that leaves
// room for the per-second counter; below 0 it is negative, from
// i64::MAX / 65536 on it is refused, never an overflow (kills the issue-26
// mutants of timestamp's bounds).
#[test]
fn openai_created_is_read_within_its_bounds() {
    let (_guard, _rec, task) = setup("created-bounds");
    let first = |created: &str| {
        let chunk = oa_start("chatcmpl-a", 0, "call_1")
            .replace(r#""created":0"#, &format!(r#""created":{created}"#));
        OpenAiStream::new(task.recorder()).feed(&chunk)
    };
    let last = i64::MAX / 65536;
    assert_eq!(first("0"), Ok(Step::Tracked));
    assert_eq!(first("-1"), Err(Rejection::NegativeTimestamp));
    assert_eq!(first(&(last - 1).to_string()), Ok(Step::Tracked));
    assert_eq!(first(&last.to_string()), Err(Rejection::BadTimestamp));
    assert_eq!(first(&i64::MAX.to_string()), Err(Rejection::BadTimestamp));
    assert_eq!(first(&u64::MAX.to_string()), Err(Rejection::BadTimestamp));
    // The last second still takes a second response in it.
    let mut s = OpenAiStream::new(task.recorder());
    assert_eq!(
        s.feed(&oa_start("chatcmpl-a", last - 1, "call_1")),
        Ok(Step::Tracked)
    );
    assert_eq!(
        s.feed(&oa_start("chatcmpl-b", last - 1, "call_1")),
        Ok(Step::Tracked)
    );
}

fn oa_entries(id: &str, entries: &str) -> String {
    oa_chunk(
        id,
        1769088854,
        &format!(r#"{{"content":null,"tool_calls":[{entries}]}}"#),
        "null",
    )
}

// R5.9: without `index` (Mistral, Gemini's OpenAI-compatible endpoint), an
// entry with a new id announces the next block, and an entry repeating the
// last call's id continues it (kills the issue-26 mutants of
// OpenAiStream::tool_call's `id == last` guard and of
// OpenAiStream::arguments).
#[test]
fn openai_entries_without_index_announce_by_new_id_and_continue_by_the_same() {
    let (_guard, _rec, task) = setup("no-index");
    let mut s = OpenAiStream::new(task.recorder());
    let two = r#"{"id":"call_a","function":{"name":"weather","arguments":"{\"location\": \"Paris\"}"}},{"id":"call_b","function":{"name":"weather","arguments":"{\"location\": \"Rome\"}"}}"#;
    assert_eq!(s.feed(&oa_entries("resp-1", two)), Ok(Step::Renewed));
    assert_eq!(s.tracker().open_blocks(), 2);
    assert_eq!(s.tracker().accepted(), 2);
    let mut s = OpenAiStream::new(task.recorder());
    let announce = r#"{"id":"call_1","type":"function","function":{"name":"bash","arguments":""}}"#;
    let more = r#"{"id":"call_1","type":"function","function":{"arguments":"{\"cmd\""}}"#;
    assert_eq!(s.feed(&oa_entries("resp-2", announce)), Ok(Step::Tracked));
    assert_eq!(s.feed(&oa_entries("resp-2", more)), Ok(Step::Renewed));
    assert_eq!(s.feed(&oa_entries("resp-2", more)), Ok(Step::Renewed));
    assert_eq!(s.tracker().open_blocks(), 1);
    assert_eq!(s.tracker().rejections().total(), 0);
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
