//! Recorded streams of the real services (R5.2, R5.9), replayed event by
//! event on the virtual clock: every genuine argument delta renews, nothing
//! else does, and no argument text reaches an event, a status, a `Debug` or
//! a log line. The recordings and where they come from are listed in
//! `tests/fixtures/recorded/SOURCES.md`; which event is a genuine delta is
//! decided here from the JSON itself, independently of the adapters.

mod common;

use common::LogCapture;

use std::time::Duration;

use serde_json::Value;
use stallwarden_sources::args::anthropic::AnthropicStream;
use stallwarden_sources::args::gemini::GeminiStream;
use stallwarden_sources::args::openai::OpenAiStream;
use stallwarden_sources::args::responses::ResponsesStream;
use stallwarden_sources::args::Step;
use watchdog_core::{Guard, ManualClock, Profile, RecordingSink, SignalKind};

/// The one face every adapter shows (R5.2, R5.9): every recording runs the
/// same checks through it.
use stallwarden_sources::args::StreamAdapter as Adapter;

/// The argument fragments a line carries, read straight from the JSON.
type Fragments = fn(&Value) -> Vec<String>;

fn anthropic_fragments(v: &Value) -> Vec<String> {
    let delta = &v["delta"];
    if v["type"] == "content_block_delta" && delta["type"] == "input_json_delta" {
        vec![delta["partial_json"].as_str().unwrap().to_owned()]
    } else {
        vec![]
    }
}

fn responses_fragments(v: &Value) -> Vec<String> {
    match v["type"].as_str() {
        Some(
            "response.function_call_arguments.delta" | "response.custom_tool_call_input.delta",
        ) => {
            vec![v["delta"].as_str().unwrap().to_owned()]
        }
        _ => vec![],
    }
}

fn gemini_fragments(v: &Value) -> Vec<String> {
    let mut out = vec![];
    for part in v["candidates"][0]["content"]["parts"]
        .as_array()
        .into_iter()
        .flatten()
    {
        for arg in part["functionCall"]["partialArgs"]
            .as_array()
            .into_iter()
            .flatten()
        {
            match arg.get("stringValue") {
                Some(s) => out.push(s.as_str().unwrap().to_owned()),
                None => out.push(arg.to_string()),
            }
        }
    }
    out
}

fn openai_fragments(v: &Value) -> Vec<String> {
    let mut out = vec![];
    for call in v["choices"][0]["delta"]["tool_calls"]
        .as_array()
        .into_iter()
        .flatten()
    {
        if let Some(a) = call["function"]["arguments"].as_str() {
            out.push(a.to_owned());
        }
    }
    out
}

struct Replay {
    /// Lines that renewed, by position.
    renewed: Vec<usize>,
    genuine: Vec<usize>,
    empty: usize,
    accepted: u64,
    rejections: u64,
    /// What the task's status snapshot shows as refused, by reason.
    refused: std::collections::BTreeMap<&'static str, u64>,
}

/// Replays `file` through `adapter`, 10 ms apart under a 100 ms idle
/// budget, and checks what every recording must satisfy.
fn replay(
    file: &str,
    fragments: Fragments,
    make: impl FnOnce(watchdog_core::Recorder) -> Box<dyn Adapter>,
) -> Replay {
    let path = format!(
        "{}/tests/fixtures/recorded/{file}",
        env!("CARGO_MANIFEST_DIR")
    );
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("reading {path}: {e}"));
    let rec = RecordingSink::new();
    let guard = Guard::builder()
        .clock(ManualClock::new())
        .sink(rec.clone())
        .build();
    let profile = Profile::default()
        .idle(Duration::from_millis(100))
        .heartbeat_interval(None);
    let task = guard.start(file, profile).unwrap();
    let logs = LogCapture::default();
    let mut adapter = make(task.recorder());

    let mut out = Replay {
        renewed: vec![],
        genuine: vec![],
        empty: 0,
        accepted: 0,
        rejections: 0,
        refused: Default::default(),
    };
    let mut fragments_seen = vec![];
    tracing::subscriber::with_default(logs.clone(), || {
        for (n, line) in text.lines().enumerate() {
            let value: Value = serde_json::from_str(line).unwrap();
            let frags = fragments(&value);
            if frags.iter().any(|f| !f.is_empty()) {
                out.genuine.push(n);
            }
            out.empty += frags.iter().filter(|f| f.is_empty()).count();
            fragments_seen.extend(frags);
            let before = task.last_signal(SignalKind::ArgumentDelta);
            let step = adapter.feed(line);
            if step == Ok(Step::Renewed) {
                out.renewed.push(n);
                assert_ne!(
                    task.last_signal(SignalKind::ArgumentDelta),
                    before,
                    "{file}:{n}: Renewed without a signal"
                );
            }
            guard.advance(Duration::from_millis(10));
        }
    });
    out.accepted = adapter.tracker().accepted();
    out.rejections = adapter.tracker().rejections().total();
    out.refused = task.status().unwrap().refused;

    // R5.2: partial arguments never counted as a tool call ...
    assert!(task.last_call().is_none(), "{file}");
    assert!(task.last_signal(SignalKind::ToolCall).is_none(), "{file}");
    // ... never exposed: not in an event, a status, a Debug or a log line.
    let exposed = [
        format!("{:?}", rec.events()),
        serde_json::to_string(&task.status()).unwrap(),
        format!("{adapter:?}"),
        logs.0.lock().unwrap().clone(),
    ];
    for fragment in fragments_seen.iter().filter(|f| f.len() >= 6) {
        for (what, text) in ["events", "status", "debug", "logs"].iter().zip(&exposed) {
            assert!(
                !text.contains(fragment.as_str()),
                "{file}: {fragment:?} in {what}"
            );
        }
    }
    drop(task);
    out
}

/// Checks one replay against the counts read from the recording: every
/// genuine delta renewed, nothing else did, and the only refusals are the
/// empty fragments the service itself sent (R5.2: a delta counts only if
/// non-empty).
fn check(r: &Replay, file: &str, genuine: usize, empty_refused: u64) {
    assert_eq!(
        r.genuine.len(),
        genuine,
        "{file}: genuine deltas in the recording"
    );
    assert_eq!(
        r.renewed, r.genuine,
        "{file}: renewed exactly on the genuine deltas"
    );
    assert_eq!(r.accepted as usize, genuine, "{file}: accepted");
    assert_eq!(r.rejections, empty_refused, "{file}: refused");
    // The counts reach the user through the status snapshot (R4.2).
    let shown: u64 = r.refused.values().sum();
    assert_eq!(shown, empty_refused, "{file}: status {:?}", r.refused);
    if empty_refused > 0 {
        assert_eq!(
            r.refused.get("args.empty_delta"),
            Some(&empty_refused),
            "{file}"
        );
    }
}

#[test]
fn anthropic_recordings_renew_on_every_genuine_delta() {
    // R5.2: 1 077 deltas, repeated fragments among them, all renew; the
    // opening `""` of each tool block is the only refusal.
    for (file, genuine, empty) in [
        (
            "anthropic/anthropic-programmatic-tool-calling.1.chunks.txt",
            142,
            1,
        ),
        (
            "anthropic/anthropic-tool-search-deferred-regex.chunks.txt",
            29,
            3,
        ),
        (
            "anthropic/anthropic-code-execution-20250825.2.chunks.txt",
            906,
            3,
        ),
    ] {
        let r = replay(file, anthropic_fragments, |rec| {
            Box::new(AnthropicStream::new(rec))
        });
        assert_eq!(r.empty as u64, empty, "{file}");
        check(&r, file, genuine, empty);
    }
}

#[test]
fn responses_api_recordings_renew_on_every_genuine_delta() {
    // R5.9: four responses in one stream (a multi-step run), and hosted
    // tool-search items beside function calls.
    for (file, genuine) in [
        (
            "responses/openai-reasoning-encrypted-content.1.chunks.txt",
            39,
        ),
        ("responses/openai-tool-search.1.chunks.txt", 13),
    ] {
        let r = replay(file, responses_fragments, |rec| {
            Box::new(ResponsesStream::new(rec))
        });
        check(&r, file, genuine, 0);
    }
}

#[test]
fn gemini_recordings_renew_on_every_streamed_argument_and_not_on_a_whole_call() {
    // R5.9: streamed `partialArgs` renew; the empty `stringValue` closing a
    // string is a boundary, not a refused delta; a call that arrives whole
    // (gemini3) is an announcement and renews nothing.
    for (file, genuine) in [
        ("gemini/google-stream-tool-call-arguments.chunks.txt", 2),
        ("gemini/google-vertex-stream-tool-call-arguments-nested.1.chunks.txt", 33),
        ("gemini/google-stream-no-args-tool-call.chunks.txt", 3),
        ("gemini/google-tool-call-gemini3.chunks.txt", 0),
        (
            "gemini/google-stream-tool-call-array-arguments-missing-terminal-function-call.chunks.txt",
            8,
        ),
    ] {
        let r = replay(file, gemini_fragments, |rec| Box::new(GeminiStream::new(rec)));
        check(&r, file, genuine, 0);
    }
}

#[test]
fn openai_compatible_recordings_renew_with_or_without_index_and_whole_calls() {
    // R5.2 / R5.9: DeepSeek streams by index; Qwen (alibaba) repeats an
    // empty id on continuations and closes with one empty fragment; Mistral
    // sends the whole call in one chunk without `index`; Groq and xAI send
    // it whole with one.
    for (file, genuine, empty) in [
        ("openai-chat/deepseek-tool-call.chunks.txt", 10, 0),
        ("openai-chat/alibaba-tool-call.chunks.txt", 2, 1),
        ("openai-chat/mistral-tool-call.chunks.txt", 1, 0),
        ("openai-chat/groq-tool-call.chunks.txt", 1, 0),
        ("openai-chat/xai-tool-call.chunks.txt", 1, 0),
    ] {
        let r = replay(file, openai_fragments, |rec| {
            Box::new(OpenAiStream::new(rec))
        });
        check(&r, file, genuine, empty);
    }
}
