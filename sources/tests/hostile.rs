//! Hostile input to the stream adapters (R5.2, R5.8, R10.2): arbitrary bytes
//! and near-valid JSON give a typed rejection or a valid result, never a
//! panic, and the adapters' state stays bounded. Cases default to 256; set
//! PROPTEST_CASES to run more.

use std::collections::{HashMap, HashSet};

use proptest::prelude::*;
use serde_json::{json, Value};
use stallwarden_sources::args::anthropic::AnthropicStream;
use stallwarden_sources::args::gemini::GeminiStream;
use stallwarden_sources::args::openai::OpenAiStream;
use stallwarden_sources::args::responses::ResponsesStream;
use stallwarden_sources::args::{Step, StreamAdapter, MAX_BLOCKS, MAX_FINGERPRINTS};
use stallwarden_sources::mcp::{self, McpProgress, MAX_TOKENS};
use watchdog_core::{Guard, ManualClock, Profile, TaskHandle};

fn config() -> ProptestConfig {
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(256);
    ProptestConfig {
        cases,
        ..ProptestConfig::default()
    }
}

fn task() -> (Guard, TaskHandle) {
    let guard = Guard::builder().clock(ManualClock::new()).build();
    let task = guard.start("hostile", Profile::default()).unwrap();
    (guard, task)
}

/// A JSON value that is sometimes right and often slightly wrong.
fn index() -> impl Strategy<Value = Value> {
    prop_oneof![
        4 => (0u64..4).prop_map(Value::from),
        1 => Just(json!(4095)),
        1 => Just(json!(4096)),
        1 => Just(json!(-1)),
        1 => Just(json!("0")),
        1 => Just(json!(1.5)),
        1 => Just(Value::Null),
        1 => Just(json!(u64::MAX)),
    ]
}

fn text() -> impl Strategy<Value = Value> {
    prop_oneof![
        6 => "[a-z{}\":, ]{0,6}".prop_map(Value::from),
        1 => Just(json!("")),
        1 => Just(json!(7)),
        1 => Just(Value::Null),
        1 => Just(json!(["x"])),
        1 => Just(json!("x".repeat(1000))),
    ]
}

fn maybe(v: impl Strategy<Value = Value>) -> impl Strategy<Value = Option<Value>> {
    prop_oneof![6 => v.prop_map(Some), 1 => Just(None)]
}

fn object(fields: Vec<(&'static str, Option<Value>)>) -> Value {
    Value::Object(
        fields
            .into_iter()
            .filter_map(|(k, v)| v.map(|v| (k.to_owned(), v)))
            .collect(),
    )
}

fn anthropic_event() -> impl Strategy<Value = Value> {
    let ty = prop_oneof![
        Just("message_start"),
        Just("content_block_start"),
        Just("content_block_delta"),
        Just("content_block_delta"),
        Just("content_block_delta"),
        Just("content_block_stop"),
        Just("message_delta"),
        Just("message_stop"),
        Just("ping"),
        Just("error"),
        Just("bogus"),
    ];
    let block_ty = prop_oneof![
        Just("tool_use"),
        Just("text"),
        Just("server_tool_use"),
        Just("x")
    ];
    let delta_ty = prop_oneof![Just("input_json_delta"), Just("text_delta"), Just("x")];
    (
        ty,
        maybe(index()),
        block_ty,
        delta_ty,
        maybe(text()),
        maybe(text()),
        maybe(text()),
    )
        .prop_map(|(ty, index, block_ty, delta_ty, a, b, c)| match ty {
            "message_start" => object(vec![
                ("type", Some(json!(ty))),
                (
                    "message",
                    Some(object(vec![("id", a), ("type", Some(json!("message")))])),
                ),
            ]),
            "content_block_start" => object(vec![
                ("type", Some(json!(ty))),
                ("index", index),
                (
                    "content_block",
                    Some(object(vec![
                        ("type", Some(json!(block_ty))),
                        ("id", a),
                        ("name", b),
                        ("input", Some(json!({}))),
                    ])),
                ),
            ]),
            "content_block_delta" => object(vec![
                ("type", Some(json!(ty))),
                ("index", index),
                (
                    "delta",
                    Some(object(vec![
                        ("type", Some(json!(delta_ty))),
                        ("partial_json", c.clone()),
                        ("text", c),
                    ])),
                ),
            ]),
            "content_block_stop" => object(vec![("type", Some(json!(ty))), ("index", index)]),
            _ => object(vec![("type", Some(json!(ty))), ("index", index)]),
        })
}

fn openai_chunk() -> impl Strategy<Value = Value> {
    let id = prop_oneof![
        Just(json!("chatcmpl-a")),
        Just(json!("chatcmpl-b")),
        Just(json!("chatcmpl-c")),
        Just(json!(3))
    ];
    let created = prop_oneof![
        6 => (100i64..103).prop_map(Value::from),
        1 => Just(json!(-1)),
        1 => Just(json!(1.5)),
        1 => Just(json!(u64::MAX)),
    ];
    let call = (maybe(index()), maybe(text()), maybe(text()), maybe(text())).prop_map(
        |(index, id, name, args)| {
            object(vec![
                ("index", index),
                ("id", id),
                ("type", Some(json!("function"))),
                (
                    "function",
                    Some(object(vec![("name", name), ("arguments", args)])),
                ),
            ])
        },
    );
    let finish = prop_oneof![
        6 => Just(Value::Null),
        1 => Just(json!("tool_calls")),
        1 => Just(json!("stop")),
        1 => Just(json!(5)),
    ];
    let choice = (
        prop_oneof![8 => Just(json!(0)), 1 => Just(json!(1)), 1 => Just(json!("0"))],
        prop::collection::vec(call, 0..3),
        finish,
    )
        .prop_map(|(index, calls, finish)| {
            json!({"index": index, "delta": {"tool_calls": calls}, "finish_reason": finish})
        });
    (
        maybe(id),
        maybe(created),
        prop::collection::vec(choice, 0..2),
    )
        .prop_map(|(id, created, choices)| {
            object(vec![
                ("id", id),
                ("object", Some(json!("chat.completion.chunk"))),
                ("created", created),
                ("choices", Some(Value::Array(choices))),
            ])
        })
}

fn mcp_message() -> impl Strategy<Value = Value> {
    let version =
        prop_oneof![8 => Just(json!("2.0")), 1 => Just(json!("1.0")), 1 => Just(json!(2))];
    let method = prop_oneof![
        6 => Just(json!("notifications/progress")),
        1 => Just(json!("notifications/message")),
        1 => Just(json!(7)),
    ];
    let token = prop_oneof![
        Just(json!("t1")),
        Just(json!("t2")),
        Just(json!(1)),
        Just(json!("1")),
        Just(json!({})),
        Just(Value::Null),
    ];
    let progress = prop_oneof![
        6 => (0u32..20).prop_map(Value::from),
        2 => (0.0f64..20.0).prop_map(Value::from),
        1 => Just(json!(-3)),
        1 => Just(json!("5")),
    ];
    (maybe(version), maybe(method), maybe(token), maybe(progress)).prop_map(
        |(version, method, token, progress)| {
            object(vec![
                ("jsonrpc", version),
                ("method", method),
                (
                    "params",
                    Some(object(vec![
                        ("progressToken", token),
                        ("progress", progress),
                    ])),
                ),
            ])
        },
    )
}

/// Serializes, and sometimes cuts the text short, to mimic a torn frame.
fn wire(events: Vec<(Value, Option<usize>)>) -> Vec<Vec<u8>> {
    events
        .into_iter()
        .map(|(v, cut)| {
            let mut bytes = serde_json::to_vec(&v).unwrap();
            if let Some(c) = cut {
                bytes.truncate(c % (bytes.len() + 1));
            }
            bytes
        })
        .collect()
}

fn responses_event() -> impl Strategy<Value = Value> {
    let ty = prop_oneof![
        2 => Just(json!("response.created")),
        3 => Just(json!("response.output_item.added")),
        6 => Just(json!("response.function_call_arguments.delta")),
        1 => Just(json!("response.function_call_arguments.done")),
        1 => Just(json!("response.output_item.done")),
        1 => Just(json!("response.completed")),
        1 => Just(json!("response.output_text.delta")),
        1 => Just(json!(3)),
    ];
    let item_type = prop_oneof![
        4 => Just(json!("function_call")),
        1 => Just(json!("message")),
        1 => Just(json!("custom_tool_call")),
    ];
    let item = (maybe(item_type), maybe(text()), maybe(text()))
        .prop_map(|(ty, id, name)| object(vec![("type", ty), ("call_id", id), ("name", name)]));
    let response = maybe(prop_oneof![Just(json!("resp_1")), Just(json!("resp_2"))])
        .prop_map(|id| object(vec![("id", id)]));
    (
        maybe(ty),
        maybe(index()),
        maybe(text()),
        maybe(item),
        maybe(response),
    )
        .prop_map(|(ty, index, delta, item, response)| {
            object(vec![
                ("type", ty),
                ("output_index", index),
                ("delta", delta),
                ("item", item),
                ("response", response),
            ])
        })
}

fn gemini_chunk() -> impl Strategy<Value = Value> {
    let partial = (maybe(text()), maybe(text()))
        .prop_map(|(path, value)| object(vec![("jsonPath", path), ("stringValue", value)]));
    let call = (
        maybe(text()),
        maybe(prop_oneof![
            Just(json!(true)),
            Just(json!(false)),
            Just(json!(1))
        ]),
        maybe(prop::collection::vec(partial, 0..3).prop_map(Value::from)),
    )
        .prop_map(|(name, cont, partial)| {
            object(vec![
                ("name", name),
                ("willContinue", cont),
                ("partialArgs", partial),
            ])
        });
    let part = prop_oneof![
        4 => call.prop_map(|c| json!({"functionCall": c})),
        1 => text().prop_map(|t| json!({"text": t})),
    ];
    (
        prop::collection::vec(part, 0..3),
        maybe(prop_oneof![Just(json!("STOP")), Just(json!(2))]),
        maybe(prop_oneof![Just(json!("r1")), Just(json!("r2"))]),
    )
        .prop_map(|(parts, finish, id)| {
            let candidate = object(vec![
                ("content", Some(json!({"role": "model", "parts": parts}))),
                ("finishReason", finish),
            ]);
            object(vec![
                ("candidates", Some(json!([candidate]))),
                ("responseId", id),
            ])
        })
}

fn torn<S: Strategy<Value = Value>>(s: S) -> impl Strategy<Value = Vec<Vec<u8>>> {
    prop::collection::vec((s, prop::option::weighted(0.1, any::<usize>())), 0..48).prop_map(wire)
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn arbitrary_bytes_are_rejected_or_accepted_never_a_panic(
        frames in prop::collection::vec(prop::collection::vec(any::<u8>(), 0..160), 0..24)
    ) {
        // One task each: refusals are counted on the task (R10.6), so
        // adapters sharing one would count together.
        let tasks: Vec<_> = (0..5).map(|_| task()).collect();
        let mut a = AnthropicStream::new(tasks[0].1.recorder());
        let mut o = OpenAiStream::new(tasks[1].1.recorder());
        let mut m = McpProgress::new(tasks[2].1.recorder());
        let mut r = ResponsesStream::new(tasks[3].1.recorder());
        let mut g = GeminiStream::new(tasks[4].1.recorder());
        let (mut a_errs, mut r_errs, mut g_errs) = (0, 0, 0);
        for f in &frames {
            a_errs += u64::from(a.feed_bytes(f).is_err());
            let _ = o.feed_bytes(f);
            let _ = m.feed_bytes(f);
            r_errs += u64::from(r.feed_bytes(f).is_err());
            g_errs += u64::from(g.feed_bytes(f).is_err());
        }
        prop_assert_eq!(a.tracker().rejections().total(), a_errs);
        prop_assert_eq!(r.tracker().rejections().total(), r_errs);
        prop_assert!(g.tracker().rejections().total() >= g_errs);
        prop_assert!(a.tracker().fingerprints() <= MAX_FINGERPRINTS);
        prop_assert!(m.tokens() <= MAX_TOKENS);
    }

    #[test]
    fn near_valid_anthropic_streams_renew_only_on_non_empty_deltas_of_announced_blocks(
        frames in torn(anthropic_event())
    ) {
        // R5.2 (Ordered): a delta renews only on a block announced in the
        // active message and not closed, and only when non-empty.
        let (_guard, task) = task();
        let mut a = AnthropicStream::new(task.recorder());
        let mut announced: HashSet<u64> = HashSet::new();
        let mut closed: HashSet<u64> = HashSet::new();
        let mut renewed = 0u64;
        let mut errs = 0u64;
        for f in &frames {
            let result = a.feed_bytes(f);
            let v: Option<Value> = serde_json::from_slice(f).ok();
            let ty = v.as_ref().and_then(|v| v.get("type")).and_then(Value::as_str);
            match (&result, ty) {
                (Ok(Step::Tracked), Some("message_start" | "message_stop" | "error")) => {
                    announced.clear();
                    closed.clear();
                }
                (Ok(Step::Tracked), Some("content_block_start")) => {
                    announced.insert(v.as_ref().unwrap()["index"].as_u64().unwrap());
                }
                (Ok(Step::Tracked), Some("content_block_stop")) => {
                    closed.insert(v.as_ref().unwrap()["index"].as_u64().unwrap());
                }
                (Ok(Step::Renewed), _) => {
                    let v = v.as_ref().expect("a renewing frame parses");
                    let index = v["index"].as_u64().expect("a renewing delta has an index");
                    let text = v["delta"]["partial_json"].as_str().expect("a renewing delta is a string");
                    prop_assert!(index < MAX_BLOCKS);
                    prop_assert!(!text.is_empty(), "an empty delta renewed");
                    prop_assert!(announced.contains(&index), "unannounced block {} renewed", index);
                    prop_assert!(!closed.contains(&index), "closed block {} renewed", index);
                    renewed += 1;
                }
                (Err(_), _) => errs += 1,
                _ => {}
            }
        }
        prop_assert_eq!(a.tracker().accepted(), renewed);
        prop_assert_eq!(a.tracker().rejections().total(), errs);
        prop_assert!(a.tracker().fingerprints() <= MAX_FINGERPRINTS);
        prop_assert!(a.tracker().open_blocks() <= MAX_BLOCKS as usize);
    }

    #[test]
    fn near_valid_openai_chunks_are_rejected_or_accepted_with_bounded_state(frames in torn(openai_chunk())) {
        let (_guard, task) = task();
        let mut o = OpenAiStream::new(task.recorder());
        let mut errs = 0u64;
        let mut renewed = 0u64;
        for f in &frames {
            match o.feed_bytes(f) {
                Ok(Step::Renewed) => renewed += 1,
                Ok(_) => {}
                Err(_) => errs += 1,
            }
        }
        // A chunk can carry several deltas and several rejections.
        prop_assert!(o.tracker().accepted() >= renewed);
        prop_assert!(o.tracker().rejections().total() >= errs);
        prop_assert!(o.tracker().fingerprints() <= MAX_FINGERPRINTS);
    }

    #[test]
    fn near_valid_responses_events_renew_only_on_non_empty_deltas(frames in torn(responses_event())) {
        // R5.9: unknown events are ignored, malformed known ones refused
        // with a reason, and only a non-empty argument delta renews.
        let (_guard, task) = task();
        let mut r = ResponsesStream::new(task.recorder());
        let (mut errs, mut renewed) = (0u64, 0u64);
        for f in &frames {
            match r.feed_bytes(f) {
                Ok(Step::Renewed) => {
                    let v: Value = serde_json::from_slice(f).unwrap();
                    prop_assert_eq!(v["type"].as_str(), Some("response.function_call_arguments.delta"));
                    prop_assert!(!v["delta"].as_str().unwrap().is_empty());
                    renewed += 1;
                }
                Ok(_) => {}
                Err(_) => errs += 1,
            }
        }
        prop_assert_eq!(r.tracker().accepted(), renewed);
        prop_assert_eq!(r.tracker().rejections().total(), errs);
    }

    #[test]
    fn near_valid_gemini_chunks_renew_only_on_streamed_arguments(frames in torn(gemini_chunk())) {
        // R5.9: a whole call never renews; only `partialArgs` can.
        let (_guard, task) = task();
        let mut g = GeminiStream::new(task.recorder());
        for f in &frames {
            if g.feed_bytes(f) == Ok(Step::Renewed) {
                let v: Value = serde_json::from_slice(f).unwrap();
                let parts = v["candidates"][0]["content"]["parts"].as_array().unwrap();
                prop_assert!(
                    parts.iter().any(|p| p["functionCall"]["partialArgs"].is_array()),
                    "renewed without partialArgs: {}", v
                );
            }
        }
        prop_assert!(g.tracker().open_blocks() <= 1, "one streamed call at a time");
    }

    #[test]
    fn near_valid_mcp_progress_renews_only_when_a_token_rises(frames in torn(mcp_message())) {
        let (_guard, task) = task();
        let mut m = McpProgress::new(task.recorder());
        let mut last: HashMap<String, f64> = HashMap::new();
        for f in &frames {
            let result = m.feed_bytes(f);
            if result == Ok(mcp::Step::Renewed) {
                let v: Value = serde_json::from_slice(f).unwrap();
                let token = v["params"]["progressToken"].to_string();
                let p = v["params"]["progress"].as_f64().unwrap();
                if let Some(prev) = last.get(&token) {
                    prop_assert!(p > *prev, "token {} renewed at {} after {}", token, p, prev);
                }
                last.insert(token, p);
            }
        }
        prop_assert!(m.tokens() <= MAX_TOKENS);
    }
}
