//! Gemini CLI `--output-format stream-json` (R5.10).
//!
//! Lines are events with a `type`: `init` (session and model), `message`
//! (user or assistant text, `delta: true` for chunks), `tool_use`
//! (`tool_name`, `tool_id`, `parameters`), `tool_result` (`tool_id`,
//! `status` `success` or `error`), `error` (a non-fatal warning) and
//! `result` (the end of the turn), as the CLI's headless-mode reference
//! documents them.

use serde_json::Value;

use super::{str_at, AgentEvent};

/// Maps one Gemini CLI stream-json line to events.
///
/// # Examples
///
/// ```
/// use stallwarden_sources::agent::{gemini, AgentEvent};
/// let line = serde_json::json!({"type":"tool_result","tool_id":"t1","status":"error"});
/// let mut out = Vec::new();
/// gemini::parse(&line, &mut out);
/// assert_eq!(out, [AgentEvent::ToolFinished { id: "t1", ok: false }]);
/// ```
pub fn parse<'v>(line: &'v Value, out: &mut Vec<AgentEvent<'v>>) {
    match str_at(line, "type") {
        Some("tool_use") => {
            if let (Some(id), Some(name)) = (str_at(line, "tool_id"), str_at(line, "tool_name")) {
                let detail = line.get("parameters").and_then(|p| str_at(p, "command"));
                out.push(AgentEvent::ToolStarted { id, name, detail });
            }
        }
        Some("tool_result") => {
            if let Some(id) = str_at(line, "tool_id") {
                let ok = str_at(line, "status") != Some("error");
                out.push(AgentEvent::ToolFinished { id, ok });
            }
        }
        Some("message") => out.push(AgentEvent::Text),
        Some("result") => out.push(AgentEvent::TurnEnd),
        Some("init") | Some("error") => out.push(AgentEvent::Other),
        _ => {}
    }
}
