//! Codex `codex exec --json` (R5.10).
//!
//! Lines are thread events with a `type`: `thread.started`, `turn.started`,
//! `item.started` / `item.updated` / `item.completed` (an `item` with an
//! `id` and a `type`), `turn.completed` and `turn.failed` (the end of the
//! turn), `error` (`codex-rs/exec/src/exec_events.rs`). Items of type
//! `command_execution`, `mcp_tool_call`, `collab_tool_call`, `web_search`
//! and `file_change` are tools: started by `item.started`, finished by
//! `item.completed` of the same id; a command is shown by its `command`,
//! an MCP call by its `tool`. A `file_change` is written only as completed
//! (once the patch is applied): it is recorded as a call that ran whole.
//! `agent_message` and `reasoning` items are text. Codex writes no
//! working status and no background-task events in `exec --json`.

use serde_json::Value;

use super::{str_at, AgentEvent};

/// Maps one Codex exec JSON line to events.
///
/// # Examples
///
/// ```
/// use stallwarden_sources::agent::{codex, AgentEvent};
/// let line = serde_json::json!({"type":"item.started","item":{"id":"item_1",
///     "type":"command_execution","command":"bash -lc ls","status":"in_progress"}});
/// let mut out = Vec::new();
/// codex::parse(&line, &mut out);
/// assert_eq!(out, [AgentEvent::ToolStarted {
///     id: "item_1", name: "command_execution", detail: Some("bash -lc ls") }]);
/// ```
pub fn parse<'v>(line: &'v Value, out: &mut Vec<AgentEvent<'v>>) {
    match str_at(line, "type") {
        Some("item.started") => item(line, out, true),
        Some("item.completed") => item(line, out, false),
        Some("item.updated") | Some("thread.started") | Some("turn.started") | Some("error") => {
            out.push(AgentEvent::Other)
        }
        Some("turn.completed") | Some("turn.failed") => out.push(AgentEvent::TurnEnd),
        _ => {}
    }
}

fn item<'v>(line: &'v Value, out: &mut Vec<AgentEvent<'v>>, started: bool) {
    let Some(item) = line.get("item") else {
        return;
    };
    let (Some(id), Some(kind)) = (str_at(item, "id"), str_at(item, "type")) else {
        return;
    };
    match kind {
        "command_execution" | "mcp_tool_call" | "collab_tool_call" | "web_search"
        | "file_change" => {
            // An MCP call names its tool; the others are the kind. A
            // collab call's `tool` is an enum word, not a name: keep the kind.
            let name = str_at(item, "tool")
                .filter(|t| !t.is_empty() && kind == "mcp_tool_call")
                .unwrap_or(kind);
            let detail = str_at(item, "command");
            if started {
                out.push(AgentEvent::ToolStarted { id, name, detail });
            } else {
                let failed = matches!(str_at(item, "status"), Some("failed") | Some("declined"))
                    || item
                        .get("exit_code")
                        .and_then(Value::as_i64)
                        .is_some_and(|c| c != 0);
                out.push(AgentEvent::ToolCompleted {
                    id,
                    name,
                    detail,
                    ok: !failed,
                });
            }
        }
        "agent_message" | "reasoning" => out.push(AgentEvent::Text),
        _ => out.push(AgentEvent::Other),
    }
}
