//! Qwen Code `--output-format stream-json` (R5.10).
//!
//! Qwen Code's stream-json writer uses Claude Code's message shapes
//! (`system`, `assistant` and `user` messages with `tool_use` /
//! `tool_result` blocks, `stream_event` partials, a closing `result`; see
//! `packages/cli/src/nonInteractive/types.ts` of QwenLM/qwen-code), so it
//! is read the same way; `sources/tests/fixtures/agent/SOURCES.md` names
//! the commit.

use serde_json::Value;

use super::AgentEvent;

/// Maps one Qwen Code stream-json line to events.
///
/// # Examples
///
/// ```
/// use stallwarden_sources::agent::{qwen, AgentEvent};
/// let line = serde_json::json!({"type":"result","subtype":"success","is_error":false});
/// let mut out = Vec::new();
/// qwen::parse(&line, &mut out);
/// assert_eq!(out, [AgentEvent::TurnEnd]);
/// ```
pub fn parse<'v>(line: &'v Value, out: &mut Vec<AgentEvent<'v>>) {
    super::claude_code::parse(line, out);
}
