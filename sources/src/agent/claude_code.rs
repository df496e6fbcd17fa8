//! Claude Code `--output-format stream-json` (R5.10).
//!
//! Lines are objects with a `type`: `system` (init, status, background
//! tasks), `assistant` and `user` (a whole API message: `tool_use` blocks
//! start calls, `tool_result` blocks finish them by `tool_use_id`),
//! `stream_event` (under `--include-partial-messages`: one Anthropic
//! streaming event, fed to the Anthropic adapter for argument deltas),
//! `tool_progress` (a heartbeat of a running tool), `rate_limit_event`, and
//! `result` (the end of the turn).

use serde_json::Value;

use super::{str_at, AgentEvent};

/// Maps one Claude Code stream-json line to events.
///
/// # Examples
///
/// ```
/// use stallguard_sources::agent::{claude_code, AgentEvent};
/// let line = serde_json::json!({"type":"user","message":{"content":[
///     {"type":"tool_result","tool_use_id":"toolu_1","content":"ok","is_error":false}]}});
/// let mut out = Vec::new();
/// claude_code::parse(&line, &mut out);
/// assert_eq!(out, [AgentEvent::ToolFinished { id: "toolu_1", ok: true }]);
/// ```
pub fn parse<'v>(line: &'v Value, out: &mut Vec<AgentEvent<'v>>) {
    match str_at(line, "type") {
        Some("assistant") | Some("user") => blocks(line, out),
        Some("stream_event") => {
            if let Some(event) = line.get("event").filter(|e| e.is_object()) {
                out.push(AgentEvent::Partial(event));
            }
        }
        Some("result") => out.push(AgentEvent::TurnEnd),
        Some("system") | Some("tool_progress") | Some("rate_limit_event") => {
            out.push(AgentEvent::Other)
        }
        _ => {}
    }
}

/// The content blocks of an `assistant` or `user` message.
fn blocks<'v>(line: &'v Value, out: &mut Vec<AgentEvent<'v>>) {
    let Some(message) = line.get("message") else {
        return;
    };
    let content = match message.get("content") {
        Some(Value::Array(blocks)) => blocks,
        // A user prompt echoed as a plain string: known, no signal.
        Some(Value::String(_)) => {
            out.push(AgentEvent::Other);
            return;
        }
        _ => return,
    };
    let before = out.len();
    for block in content {
        match str_at(block, "type") {
            Some("tool_use") | Some("server_tool_use") | Some("mcp_tool_use") => {
                if let (Some(id), Some(name)) = (str_at(block, "id"), str_at(block, "name")) {
                    out.push(AgentEvent::ToolStarted { id, name });
                }
            }
            Some("tool_result") | Some("mcp_tool_result") => {
                if let Some(id) = str_at(block, "tool_use_id") {
                    let ok = block.get("is_error").and_then(Value::as_bool) != Some(true);
                    out.push(AgentEvent::ToolFinished { id, ok });
                }
            }
            Some("text") | Some("thinking") | Some("redacted_thinking") => {
                out.push(AgentEvent::Text)
            }
            _ => {}
        }
    }
    if out.len() == before {
        out.push(AgentEvent::Other);
    }
}
