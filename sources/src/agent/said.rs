//! What an agent's event line says, with what changes from one identical
//! step to the next left out (R5.12): ids, session and message ids,
//! timestamps, durations, token usage and cost. Under `--stream` the
//! judgement of repetition is on this, never on the raw JSON line, whose
//! ids always differ.
//!
//! The same rule serves every format: a call's input is the object that
//! carries its id (Claude Code's `tool_use` block, Codex's `item`, Gemini's
//! `tool_use` line), its result the object that carries the id of its
//! start (`tool_result`, the completed `item`), both written out without
//! those fields.

use serde_json::Value;

/// Fields that differ between two identical steps of an agent.
const CHANGING: [&str; 22] = [
    "id",
    "uuid",
    "session_id",
    "sessionId",
    "parent_tool_use_id",
    "tool_use_id",
    "tool_id",
    "call_id",
    "callId",
    "item_id",
    "request_id",
    "message_id",
    "thread_id",
    "turn_id",
    "timestamp",
    "ts",
    "created_at",
    "duration_ms",
    "duration_api_ms",
    "usage",
    "total_cost_usd",
    "stats",
];

/// The longest text written out for one line: the judge reads at most this
/// many bytes of a line (the core's `MAX_LINE`).
const MAX_SAID: usize = watchdog_core::repeat::MAX_LINE;

/// Writes `v` out as plain words, without the changing fields, into `out`
/// (at most [`MAX_SAID`] bytes).
pub(super) fn words(v: &Value, out: &mut Vec<u8>) {
    if out.len() >= MAX_SAID {
        return;
    }
    match v {
        Value::Object(map) => {
            for (k, v) in map {
                if CHANGING.contains(&k.as_str()) {
                    continue;
                }
                out.extend_from_slice(k.as_bytes());
                out.extend_from_slice(b"= ");
                words(v, out);
                out.push(b' ');
            }
        }
        Value::Array(items) => {
            for v in items {
                words(v, out);
                out.push(b' ');
            }
        }
        Value::String(s) => out.extend_from_slice(s.as_bytes()),
        other => out.extend_from_slice(other.to_string().as_bytes()),
    }
    out.truncate(MAX_SAID);
}

/// The object in `v` that carries `id` as a string value: a call's own
/// block or item.
pub(super) fn holder<'v>(v: &'v Value, id: &str) -> Option<&'v Value> {
    match v {
        Value::Object(map) => {
            if map.values().any(|x| x.as_str() == Some(id)) {
                return Some(v);
            }
            map.values().find_map(|x| holder(x, id))
        }
        Value::Array(items) => items.iter().find_map(|x| holder(x, id)),
        _ => None,
    }
}

/// What a person reads of a text line: its first `text` (or `message`,
/// `content`, `result`) string.
pub(super) fn text(v: &Value) -> Option<&str> {
    match v {
        Value::Object(map) => {
            for key in ["text", "message", "content", "result"] {
                if let Some(s) = map.get(key).and_then(Value::as_str) {
                    return Some(s);
                }
            }
            map.values().find_map(text)
        }
        Value::Array(items) => items.iter().find_map(text),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn two_identical_steps_say_the_same_whatever_their_ids() {
        let a = serde_json::json!({"type":"assistant","session_id":"s1","uuid":"u1",
            "message":{"id":"msg_1","usage":{"input_tokens":10},
            "content":[{"type":"tool_use","id":"toolu_1","name":"Bash","input":{"command":"ls"}}]}});
        let b = serde_json::json!({"type":"assistant","session_id":"s1","uuid":"u2",
            "message":{"id":"msg_2","usage":{"input_tokens":99},
            "content":[{"type":"tool_use","id":"toolu_2","name":"Bash","input":{"command":"ls"}}]}});
        let (mut wa, mut wb) = (Vec::new(), Vec::new());
        words(holder(&a, "toolu_1").unwrap(), &mut wa);
        words(holder(&b, "toolu_2").unwrap(), &mut wb);
        assert_eq!(wa, wb);
        assert_eq!(
            String::from_utf8_lossy(&wa),
            "input= command= ls  name= Bash type= tool_use "
        );
        assert_eq!(text(&serde_json::json!({"item":{"text":"hi"}})), Some("hi"));
    }
}
