//! Agent CLI stream readers on public recordings, in virtual time (R5.10,
//! R2.2, R5.3, R4.1), the tool-call feed under them (R5.3) and the names
//! their calls are shown by (R8.1, R8.13). Fixtures and their sources:
//! fixtures/agent/SOURCES.md.

use std::time::Duration;

use stallwarden_sources::agent::{
    call_name, codex, AgentEvent, AgentStream, Format, MAX_EVENT_LINE,
};
use stallwarden_sources::tools::{ToolCallError, ToolCallFeed, MAX_CALL_ID};
use watchdog_core::{CallOutcome, Guard, ManualClock, Phase, Profile, RecordingSink, TaskHandle};

fn fixture(path: &str) -> String {
    let full = format!("{}/tests/fixtures/agent/{path}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&full).unwrap_or_else(|e| panic!("{full}: {e}"))
}

fn setup() -> (Guard, RecordingSink, TaskHandle) {
    let rec = RecordingSink::new();
    let guard = Guard::builder()
        .clock(ManualClock::new())
        .sink(rec.clone())
        .build();
    let profile = Profile::default()
        .idle(Duration::from_secs(1))
        .execution(Duration::from_secs(600))
        .heartbeat_interval(None);
    let task = guard.start("agent", profile).unwrap();
    (guard, rec, task)
}

/// Feeds the lines of `text` up to and including the one containing `until`.
fn feed_until(stream: &mut AgentStream, text: &str, until: &str) -> usize {
    let mut fed = 0;
    for line in text.split_inclusive('\n') {
        stream.feed(line.as_bytes());
        fed += line.len();
        if line.contains(until) {
            break;
        }
    }
    fed
}

#[test]
fn claude_code_bash_call_holds_the_execution_budget_until_its_result() {
    // R5.10, R2.2: a silent Bash call longer than idle is not a stall.
    let (guard, rec, task) = setup();
    let text = fixture("claude-code/bash_session.jsonl");
    let mut stream = AgentStream::new(Format::ClaudeCode, task.recorder());
    let fed = feed_until(&mut stream, &text, "\"tool_use\"");
    assert_eq!(task.status().unwrap().phase, Phase::Executing { tools: 1 });
    let call = task.last_call().unwrap();
    assert_eq!(
        (call.id.as_str(), call.name.as_str()),
        ("toolu_1", "Bash(ls -la)")
    );
    guard.advance(Duration::from_secs(300));
    assert_eq!(rec.types_for("agent"), ["started"]);
    stream.feed(&text.as_bytes()[fed..]);
    let call = task.last_call().unwrap();
    assert_eq!(call.outcome, Some(CallOutcome::Success));
    let c = stream.counts();
    assert_eq!(
        (
            c.events,
            c.plain,
            c.tools_started,
            c.tools_finished,
            c.turns
        ),
        (5, 0, 1, 1, 1)
    );
}

#[test]
fn claude_code_silence_with_no_tool_in_flight_stalls_on_idle() {
    // R5.10, R2.1: between tools the idle budget applies.
    let (guard, rec, task) = setup();
    let text = fixture("claude-code/bash_session.jsonl");
    let mut stream = AgentStream::new(Format::ClaudeCode, task.recorder());
    feed_until(&mut stream, &text, "\"tool_result\"");
    assert_eq!(stream.in_flight(), 0);
    guard.advance(Duration::from_secs(2));
    assert!(rec.types_for("agent").contains(&"stalled"));
}

#[test]
fn claude_code_real_responses_start_and_finish_read() {
    // R5.3, R4.1 on ai-discord's recorded Claude CLI lines.
    let (_guard, _rec, task) = setup();
    let mut stream = AgentStream::new(Format::ClaudeCode, task.recorder());
    stream.feed(fixture("claude-code/read_session.jsonl").as_bytes());
    let call = task.last_call().unwrap();
    assert_eq!(
        (call.id.as_str(), call.name.as_str()),
        ("toolu_123", "Read")
    );
    assert_eq!(call.outcome, Some(CallOutcome::Success));
    assert_eq!(stream.counts().events, 4);
}

#[test]
fn claude_code_tool_progress_is_known_and_starts_nothing() {
    let (_guard, _rec, task) = setup();
    let mut stream = AgentStream::new(Format::ClaudeCode, task.recorder());
    stream.feed(fixture("claude-code/tool_progress.jsonl").as_bytes());
    assert_eq!(stream.counts().events, 1);
    assert!(task.last_call().is_none());
}

#[test]
fn claude_code_stream_events_renew_through_the_anthropic_adapter() {
    // R5.10, R5.2: `stream_event` wrappers carry argument deltas.
    let (guard, rec, task) = setup();
    let mut stream = AgentStream::new(Format::ClaudeCode, task.recorder());
    stream.feed(br#"{"type":"stream_event","event":{"type":"message_start","message":{"id":"msg_01","type":"message","role":"assistant","content":[]}}}
{"type":"stream_event","event":{"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"toolu_01","name":"Write","input":{}}}}
"#);
    for i in 0..5 {
        guard.advance(Duration::from_millis(800));
        let delta = format!(
            "{{\"type\":\"stream_event\",\"event\":{{\"type\":\"content_block_delta\",\"index\":0,\"delta\":{{\"type\":\"input_json_delta\",\"partial_json\":\"{{\\\"part{i}\\\": 1\"}}}}}}\n"
        );
        stream.feed(delta.as_bytes());
    }
    // 4 s in all, every gap under the 1 s idle budget: no stall.
    assert_eq!(rec.types_for("agent"), ["started"]);
    assert_eq!(stream.counts().events, 7);
}

#[test]
fn codex_command_execution_is_a_tool_call() {
    // R5.10 on openai/codex docs/exec.md's sample.
    let (guard, rec, task) = setup();
    let text = fixture("codex/exec_sample.jsonl");
    let mut stream = AgentStream::new(Format::Codex, task.recorder());
    let fed = feed_until(&mut stream, &text, "\"item.started\"");
    assert_eq!(task.status().unwrap().phase, Phase::Executing { tools: 1 });
    assert_eq!(
        task.last_call().unwrap().name,
        "command_execution(bash -lc ls)"
    );
    guard.advance(Duration::from_secs(120));
    assert_eq!(rec.types_for("agent"), ["started"]);
    stream.feed(&text.as_bytes()[fed..]);
    let c = stream.counts();
    assert_eq!(
        (c.events, c.tools_started, c.tools_finished, c.turns),
        (8, 1, 1, 1)
    );
    assert_eq!(
        task.last_call().unwrap().outcome,
        Some(CallOutcome::Success)
    );
}

#[test]
fn gemini_tool_use_and_result_pair_by_tool_id() {
    let (guard, rec, task) = setup();
    let text = fixture("gemini/schema_session.jsonl");
    let mut stream = AgentStream::new(Format::Gemini, task.recorder());
    let fed = feed_until(&mut stream, &text, "\"tool_use\"");
    assert_eq!(task.last_call().unwrap().name, "run_shell_command(ls -la)");
    guard.advance(Duration::from_secs(60));
    assert_eq!(rec.types_for("agent"), ["started"]);
    stream.feed(&text.as_bytes()[fed..]);
    let c = stream.counts();
    assert_eq!(
        (c.events, c.tools_started, c.tools_finished, c.turns),
        (6, 1, 1, 1)
    );
}

#[test]
fn qwen_silent_shell_call_holds_the_execution_budget() {
    // Seed 000: Qwen Code's 165 s silent SQL probe is not a dead chain.
    let (guard, rec, task) = setup();
    let text = fixture("qwen/schema_session.jsonl");
    let mut stream = AgentStream::new(Format::Qwen, task.recorder());
    let fed = feed_until(&mut stream, &text, "\"tool_use\"");
    assert_eq!(
        task.last_call().unwrap().name,
        "run_shell_command(psql -c 'select 1')"
    );
    guard.advance(Duration::from_secs(165));
    assert_eq!(rec.types_for("agent"), ["started"]);
    stream.feed(&text.as_bytes()[fed..]);
    let c = stream.counts();
    assert_eq!(
        (c.events, c.tools_started, c.tools_finished, c.turns),
        (4, 1, 1, 1)
    );
}

#[test]
fn garbage_lines_are_plain_output_never_errors() {
    // R5.10: not JSON, not an object, unknown type, broken UTF-8.
    let (_guard, _rec, task) = setup();
    let mut stream = AgentStream::new(Format::ClaudeCode, task.recorder());
    stream.feed(b"hello\n[1,2]\n{\"type\":\"mystery\"}\n{\"no_type\":1}\n\xff\xfe{\n{\"type\":\"assistant\"\n\n");
    let c = stream.counts();
    assert_eq!((c.events, c.plain), (0, 7));
    assert!(task.last_call().is_none());
}

#[test]
fn an_oversized_line_is_plain_output_and_the_next_line_still_parses() {
    // Bounded memory: a line past MAX_EVENT_LINE is never parsed whole.
    let (_guard, _rec, task) = setup();
    let mut stream = AgentStream::new(Format::Gemini, task.recorder());
    let chunk = vec![b'x'; 1 << 20];
    stream.feed(b"{\"type\":\"tool_use\",\"tool_id\":\"big\",\"tool_name\":\"t\",\"p\":\"");
    for _ in 0..(MAX_EVENT_LINE / chunk.len() + 2) {
        stream.feed(&chunk);
    }
    stream.feed(b"\"}\n{\"type\":\"tool_use\",\"tool_id\":\"t2\",\"tool_name\":\"grep\"}\n");
    let c = stream.counts();
    assert_eq!((c.oversized, c.plain, c.tools_started), (1, 1, 1));
    assert_eq!(task.last_call().unwrap().id, "t2");
}

#[test]
fn lines_split_across_reads_are_joined() {
    let (_guard, _rec, task) = setup();
    let mut stream = AgentStream::new(Format::Codex, task.recorder());
    let text = fixture("codex/exec_sample.jsonl");
    for b in text.as_bytes().chunks(7) {
        stream.feed(b);
    }
    assert_eq!(stream.counts().events, 8);
}

#[test]
fn turn_end_and_stream_end_finish_calls_left_in_flight_as_cancelled() {
    let (_guard, _rec, task) = setup();
    let mut stream = AgentStream::new(Format::Gemini, task.recorder());
    stream.feed(b"{\"type\":\"tool_use\",\"tool_id\":\"a\",\"tool_name\":\"grep\"}\n{\"type\":\"result\",\"status\":\"error\"}\n");
    assert_eq!(
        task.last_call().unwrap().outcome,
        Some(CallOutcome::Cancelled)
    );
    stream.feed(b"{\"type\":\"tool_use\",\"tool_id\":\"b\",\"tool_name\":\"ls\"}");
    stream.finish();
    assert_eq!(task.last_call().unwrap().id, "b");
    assert_eq!(
        task.last_call().unwrap().outcome,
        Some(CallOutcome::Cancelled)
    );
    assert_eq!(stream.in_flight(), 0);
}

#[test]
fn duplicate_and_unknown_ids_are_refused_not_panics() {
    let (_guard, _rec, task) = setup();
    let mut stream = AgentStream::new(Format::Gemini, task.recorder());
    stream.feed(b"{\"type\":\"tool_use\",\"tool_id\":\"a\",\"tool_name\":\"grep\"}\n{\"type\":\"tool_use\",\"tool_id\":\"a\",\"tool_name\":\"grep\"}\n{\"type\":\"tool_result\",\"tool_id\":\"zz\",\"status\":\"success\"}\n{\"type\":\"tool_use\",\"tool_id\":\"\",\"tool_name\":\"grep\"}\n");
    // R10.6: each refusal is counted on the task, by namespaced key.
    let refused = task.status().unwrap().refused;
    let want = [
        ("tools.already_in_flight", 1),
        ("tools.empty_id", 1),
        ("tools.unknown_call", 1),
    ];
    assert_eq!(refused.into_iter().collect::<Vec<_>>(), want);
    assert_eq!(stream.in_flight(), 1);
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

// R5.3: a finish for an unknown call names it cut to MAX_CALL_ID bytes on a
// character boundary (kills the mutants of `truncated`).
#[test]
fn unknown_call_ids_are_cut_on_a_char_boundary() {
    let (_guard, _rec, task) = setup();
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

// R5.3: `in_flight` counts the calls started through the feed and not yet
// finished (kills `ToolCallFeed::in_flight -> 1`).
#[test]
fn in_flight_counts_started_calls_until_they_finish() {
    let (_guard, _rec, task) = setup();
    let feed = ToolCallFeed::new(task.recorder());
    assert_eq!(feed.in_flight(), 0);
    feed.started("call_a", "bash").unwrap();
    feed.started("call_b", "grep").unwrap();
    assert_eq!(feed.in_flight(), 2);
    feed.finished("call_a", CallOutcome::Success).unwrap();
    feed.finished("call_b", CallOutcome::Error).unwrap();
    assert_eq!(feed.in_flight(), 0);
}

#[test]
fn the_stream_and_the_recorder_share_the_cores_one_set_of_calls() {
    // R10.6, R5.3: the stream keeps no set of its own, so a call started
    // by the runner on the recorder finishes on the agent's result line,
    // and the core's id limit refuses an over-long id from the stream.
    let (_guard, _rec, task) = setup();
    let mut stream = AgentStream::new(Format::Gemini, task.recorder());
    task.tool_started("runner-call", "grep").unwrap();
    assert_eq!(stream.in_flight(), 1);
    stream.feed(b"{\"type\":\"tool_result\",\"tool_id\":\"runner-call\",\"status\":\"success\"}\n");
    assert_eq!(stream.counts().tools_finished, 1);
    assert_eq!(task.status().unwrap().phase, Phase::Idle);
    let long = "x".repeat(watchdog_core::MAX_CALL_ID + 1);
    let line = format!("{{\"type\":\"tool_use\",\"tool_id\":\"{long}\",\"tool_name\":\"grep\"}}\n");
    stream.feed(line.as_bytes());
    assert_eq!(task.status().unwrap().refused["tools.too_long"], 1);
    assert_eq!(task.calls_in_flight(), 0);
}

#[test]
fn parsers_map_fixture_lines_to_events() {
    let line: serde_json::Value = serde_json::from_str(
        fixture("claude-code/bash_session.jsonl")
            .lines()
            .nth(2)
            .unwrap(),
    )
    .unwrap();
    let mut out = Vec::new();
    Format::ClaudeCode.parse(&line, &mut out);
    assert_eq!(
        out,
        [AgentEvent::ToolStarted {
            id: "toolu_1",
            name: "Bash",
            detail: Some("ls -la"),
        }]
    );
}

#[test]
fn counting_output_makes_text_lines_renew_the_idle_budget() {
    // R5.10, R5.1: a library runner without its own byte counting.
    let (guard, rec, task) = setup();
    let text = fixture("codex/exec_sample.jsonl");
    let mut stream = AgentStream::new(Format::Codex, task.recorder()).counting_output();
    for line in text.split_inclusive('\n') {
        guard.advance(Duration::from_millis(900));
        stream.feed(line.as_bytes());
    }
    assert_eq!(rec.types_for("agent"), ["started"], "at {:?}", guard.now());
    assert_eq!(task.status().unwrap().total_lines, 8);
}

#[test]
fn control_bytes_in_a_tool_name_never_reach_the_status() {
    // The name is shown on stderr (R8.1): an escape sequence is neutralised.
    let (_guard, _rec, task) = setup();
    let mut stream = AgentStream::new(Format::Gemini, task.recorder());
    stream.feed(b"{\"type\":\"tool_use\",\"tool_id\":\"a\",\"tool_name\":\"x\\u001b[2Jy\"}\n");
    assert_eq!(task.last_call().unwrap().name, "x?[2Jy");
}

// R10.6, R5.6: the task reports the stream could not apply to the
// background record are counted on the task under `background.` keys (they
// used to be a private `background_skipped` count no status showed); a
// good launch and its end count nothing.
#[test]
fn background_reports_not_applied_are_counted_on_the_task() {
    let (_guard, _rec, task) = setup();
    let mut stream = AgentStream::new(Format::ClaudeCode, task.recorder());
    stream.feed(br#"{"type":"system","subtype":"task_started","task_id":"b0","tool_use_id":"toolu_0","task_type":"local_bash","is_backgrounded":true}
{"type":"system","subtype":"task_notification","task_id":"b0","tool_use_id":"toolu_0","status":"completed"}
{"type":"system","subtype":"task_started","task_id":"b1","task_type":"local_bash","is_backgrounded":true}
{"type":"system","subtype":"task_started","task_id":"b2","tool_use_id":"toolu_2","is_backgrounded":true,"parent_tool_use_id":"toolu_task"}
{"type":"system","subtype":"task_notification","task_id":"zz","tool_use_id":"toolu_9","status":"completed"}
"#);
    let refused: Vec<_> = task.status().unwrap().refused.into_iter().collect();
    assert_eq!(
        refused,
        [
            ("background.no_launch", 1),
            ("background.subagent_launch", 1),
            ("background.unknown_task", 1),
        ]
    );
    assert!(stream.background().is_empty());
}

// R5.10: `--stream` and the config name a format by these words, and every
// name reads back as its format (kills the issue-26 mutants of Format::name,
// its Display and FromStr, which only doctests saw).
#[test]
fn format_names_read_back_as_their_format() {
    let names: Vec<String> = Format::ALL.iter().map(Format::to_string).collect();
    assert_eq!(names, ["claude-code", "codex", "gemini", "qwen"]);
    for f in Format::ALL {
        assert_eq!(f.name().parse::<Format>(), Ok(f));
    }
    let e = "cursor".parse::<Format>().unwrap_err();
    assert_eq!(
        e.to_string(),
        "unknown stream format `cursor`, expected one of claude-code, codex, gemini, qwen"
    );
}

// R5.10, R5.1: a stream made without `counting_output` (as `stallwarden run`
// makes it, counting bytes in its own pump) reports no output of its own
// (kills the issue-26 mutant of AgentStream::feed's `&&`).
#[test]
fn a_stream_not_counting_output_reports_none() {
    let (_guard, _rec, task) = setup();
    let mut stream = AgentStream::new(Format::Codex, task.recorder());
    stream.feed(fixture("codex/exec_sample.jsonl").as_bytes());
    assert_eq!(stream.counts().events, 8);
    let s = task.status().unwrap();
    assert_eq!((s.total_bytes, s.total_lines), (0, 0));
}

/// A Gemini `tool_use` line of exactly `len` bytes (without its newline).
fn tool_use_line_of(id: &str, len: usize) -> Vec<u8> {
    let head = format!(
        r#"{{"type":"tool_use","tool_id":"{id}","tool_name":"write_file","parameters":{{"content":""#
    );
    let tail = "\"}}";
    let mut line = head.into_bytes();
    line.resize(len - tail.len(), b'x');
    line.extend_from_slice(tail.as_bytes());
    assert_eq!(line.len(), len);
    line
}

// R5.10: MAX_EVENT_LINE is the longest line parsed: a line of exactly that
// many bytes is an event, one byte more is plain output, also when the whole
// line comes in one read (kills the issue-26 mutants of AgentStream::feed's
// bound, `>` to `>=` and `+` to `*`).
#[test]
fn a_line_of_max_event_line_bytes_is_an_event_and_one_more_byte_is_plain() {
    let (_guard, _rec, task) = setup();
    let mut stream = AgentStream::new(Format::Gemini, task.recorder());
    let mut line = tool_use_line_of("t1", MAX_EVENT_LINE);
    line.push(b'\n');
    stream.feed(&line);
    let c = stream.counts();
    assert_eq!((c.events, c.oversized, c.tools_started), (1, 0, 1));
    let mut line = tool_use_line_of("t2", MAX_EVENT_LINE + 1);
    line.push(b'\n');
    stream.feed(&line);
    let c = stream.counts();
    assert_eq!(
        (c.events, c.oversized, c.plain, c.tools_started),
        (1, 1, 1, 1)
    );
    assert_eq!(task.last_call().unwrap().id, "t1");
}

fn parse(format: Format, line: &str) -> Vec<AgentEvent<'static>> {
    let v: &'static serde_json::Value = Box::leak(Box::new(serde_json::from_str(line).unwrap()));
    let mut out = Vec::new();
    format.parse(v, &mut out);
    out
}

// R5.10: text from the model is text: Claude Code's `text`, `thinking` and
// `redacted_thinking` blocks, Codex's `agent_message` and `reasoning` items;
// a user prompt echoed as a plain string is a known line with no signal
// (kills the issue-26 mutants that drop those match arms).
#[test]
fn model_text_is_text_and_an_echoed_prompt_is_a_known_line() {
    let text = parse(
        Format::ClaudeCode,
        r#"{"type":"assistant","message":{"role":"assistant","content":[{"type":"thinking","thinking":"hm","signature":"s"},{"type":"redacted_thinking","data":"x"},{"type":"text","text":"Done."}]}}"#,
    );
    assert_eq!(text, [AgentEvent::Text, AgentEvent::Text, AgentEvent::Text]);
    let echoed = r#"{"type":"user","message":{"role":"user","content":"<local-command-stdout>Compacted </local-command-stdout>"}}"#;
    assert_eq!(parse(Format::ClaudeCode, echoed), [AgentEvent::Other]);
    let (_guard, _rec, task) = setup();
    let mut stream = AgentStream::new(Format::ClaudeCode, task.recorder());
    stream.feed(format!("{echoed}\n").as_bytes());
    assert_eq!((stream.counts().events, stream.counts().plain), (1, 0));
    for line in fixture("codex/exec_sample.jsonl").lines() {
        if line.contains("\"reasoning\"") || line.contains("\"agent_message\"") {
            assert_eq!(parse(Format::Codex, line), [AgentEvent::Text], "{line}");
        }
    }
}

// R5.10, R8.1: a Codex MCP call is shown by its tool's name; a collab call's
// `tool` is an enum word, and an MCP call with an empty `tool` names none, so
// both are shown by the item's kind (kills the issue-26 mutants of
// codex::item's `!t.is_empty() && kind == "mcp_tool_call"`).
#[test]
fn codex_names_an_mcp_call_by_its_tool_and_others_by_their_kind() {
    let started = |item: &str| {
        parse(
            Format::Codex,
            &format!(r#"{{"type":"item.started","item":{item}}}"#),
        )
    };
    assert_eq!(
        started(
            r#"{"id":"item_1","type":"mcp_tool_call","server":"docs","tool":"search","arguments":{"q":"x"},"status":"in_progress"}"#
        ),
        [AgentEvent::ToolStarted {
            id: "item_1",
            name: "search",
            detail: None
        }]
    );
    assert_eq!(
        started(
            r#"{"id":"item_2","type":"mcp_tool_call","server":"docs","tool":"","arguments":{},"status":"in_progress"}"#
        ),
        [AgentEvent::ToolStarted {
            id: "item_2",
            name: "mcp_tool_call",
            detail: None
        }]
    );
    assert_eq!(
        started(
            r#"{"id":"item_3","type":"collab_tool_call","tool":"spawn_agent","sender_thread_id":"t0","receiver_thread_ids":[],"prompt":"look","status":"in_progress"}"#
        ),
        [AgentEvent::ToolStarted {
            id: "item_3",
            name: "collab_tool_call",
            detail: None
        }]
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

// R5.10, R5.3: a Gemini `tool_result` with `status: error` finishes its call
// as an error, `success` as a success (kills the issue-26 mutant of
// gemini::parse's `!= Some("error")`).
#[test]
fn gemini_tool_result_status_is_the_calls_outcome() {
    let (_guard, _rec, task) = setup();
    let mut stream = AgentStream::new(Format::Gemini, task.recorder());
    let lines = fixture("gemini/real_shell_sleep.jsonl");
    let mut lines = lines.lines();
    for l in lines.by_ref() {
        stream.feed(format!("{l}\n").as_bytes());
        if l.contains("\"tool_result\"") {
            break;
        }
    }
    assert_eq!(
        task.last_call().unwrap().outcome,
        Some(CallOutcome::Success)
    );
    stream.feed(b"{\"type\":\"tool_use\",\"tool_id\":\"t2\",\"tool_name\":\"read_file\",\"parameters\":{\"file_path\":\"/nope\"}}\n{\"type\":\"tool_result\",\"tool_id\":\"t2\",\"status\":\"error\",\"output\":\"\",\"error\":{\"type\":\"file_not_found\",\"message\":\"no such file\"}}\n");
    let call = task.last_call().unwrap();
    assert_eq!(
        (call.id.as_str(), call.outcome),
        ("t2", Some(CallOutcome::Error))
    );
}

// R8.1: a call's name is cut to MAX_CALL_ID bytes on a character boundary,
// never past it, when the bound falls inside a multibyte character (kills
// the issue-26 mutants of names::cut_bytes's `end -= 1`).
#[test]
fn a_multibyte_name_is_cut_below_the_byte_bound_on_a_character_boundary() {
    let name = call_name(&"€".repeat(100), None); // 300 bytes, 3 per char
    assert_eq!(name, "€".repeat(watchdog_core::MAX_CALL_ID / 3));
    assert_eq!(name.len(), 255);
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
