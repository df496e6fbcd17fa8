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
use watchdog_core::BackgroundKind;

use super::{str_at, AgentEvent};
use crate::background::{EndStatus, Provenance};

/// Maps one Claude Code stream-json line to events.
///
/// # Examples
///
/// ```
/// use stallwarden_sources::agent::{claude_code, AgentEvent};
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
        Some("system") => system(line, out),
        Some("tool_progress") | Some("rate_limit_event") => out.push(AgentEvent::Other),
        _ => {}
    }
}

/// A `system` line: init (the session), status (a working status holds
/// the execution budget), and the background tasks' start, end and list.
fn system<'v>(line: &'v Value, out: &mut Vec<AgentEvent<'v>>) {
    let event = match str_at(line, "subtype") {
        Some("init") => match str_at(line, "session_id") {
            Some(id) if !id.is_empty() => AgentEvent::Session { id },
            _ => AgentEvent::Other,
        },
        // `compacting` is the only status Claude Code 2.1 sends while it
        // works with no tool in flight (it re-sends it every 30 s during a
        // long compaction); `null` ends it, and `requesting` is never
        // written to the stream.
        Some("status") => match str_at(line, "status") {
            Some(status @ "compacting") => AgentEvent::Working { status },
            _ => AgentEvent::Other,
        },
        Some("task_started") => match str_at(line, "task_id") {
            Some(task) => AgentEvent::TaskStarted {
                task,
                launch: str_at(line, "tool_use_id"),
                kind: kind(line),
                backgrounded: line.get("is_backgrounded").and_then(Value::as_bool) == Some(true),
                from: provenance(line),
            },
            None => AgentEvent::Other,
        },
        Some("task_notification") => match (str_at(line, "task_id"), str_at(line, "status")) {
            (Some(task), Some(status)) => AgentEvent::TaskEnded {
                task,
                launch: str_at(line, "tool_use_id"),
                status: EndStatus::from_wire(status),
            },
            _ => AgentEvent::Other,
        },
        Some("background_tasks_changed") => match line.get("tasks").and_then(Value::as_array) {
            Some(tasks) => AgentEvent::TaskInventory(
                tasks
                    .iter()
                    .filter_map(|t| Some((str_at(t, "task_id")?, kind(t))))
                    .collect(),
            ),
            None => AgentEvent::Other,
        },
        _ => AgentEvent::Other,
    };
    out.push(event);
}

/// A task's kind from its `task_type` (`local_bash` is a shell).
fn kind(v: &Value) -> BackgroundKind {
    match str_at(v, "task_type") {
        Some("local_bash") => BackgroundKind::Command,
        Some(t) if t.contains("monitor") => BackgroundKind::Monitor,
        Some(t) if t.contains("workflow") => BackgroundKind::Workflow,
        _ => BackgroundKind::Unknown,
    }
}

/// A launch row of a subagent (`owned_by_subagent`, or a
/// `parent_tool_use_id`) is the subagent's own work.
fn provenance(line: &Value) -> Provenance<'_> {
    let parent = str_at(line, "parent_tool_use_id").filter(|p| !p.is_empty());
    if parent.is_some() || line.get("owned_by_subagent").and_then(Value::as_bool) == Some(true) {
        Provenance::Subagent {
            parent_tool_use_id: parent,
        }
    } else {
        Provenance::Agent
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
                    // A shell tool (Bash, run_shell_command) says its command.
                    let detail = block.get("input").and_then(|i| str_at(i, "command"));
                    out.push(AgentEvent::ToolStarted { id, name, detail });
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
