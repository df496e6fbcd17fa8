//! One refusal path for every source (R10.6, R4.2, R8.7).
//!
//! Whatever a source of this crate turns away (a malformed stream event, a
//! datagram, a tool call the core's set refuses, a background report it
//! cannot apply) is counted once, on the task, with
//! [`Recorder::refused`]: the status snapshot shows the counts by key
//! (`refused`), `stallwarden describe` prints them, and `stallwarden run -v`
//! logs each refusal and a summary at the end. No source keeps a private
//! counter of its own; the per-source views ([`ArgumentTracker::rejections`],
//! [`McpProgress::rejections`], [`NotifySocket::malformed`]) read the task.
//!
//! A key is the source's namespace, a dot, and the reason in snake case:
//!
//! | namespace     | source                                                    | reason type        |
//! |---------------|-----------------------------------------------------------|--------------------|
//! | `args.`       | [`ArgumentTracker`] and the four stream adapters          | [`args::Rejection`] |
//! | `mcp.`        | [`McpProgress`]                                           | [`mcp::McpRejection`] |
//! | `notify.`     | [`NotifySocket`]                                          | [`notify::Malformed`] |
//! | `tools.`      | [`ToolCallFeed`] and [`AgentStream`]'s tool calls          | [`tools::ToolCallError`] |
//! | `background.` | [`BackgroundRecord`] and [`AgentStream`]'s task reports    | [`background::BackgroundError`] |
//!
//! Every reason type implements [`Refusal`], whose one method,
//! [`Refusal::key`], names the key.
//!
//! [`ArgumentTracker`]: crate::args::ArgumentTracker
//! [`ArgumentTracker::rejections`]: crate::args::ArgumentTracker::rejections
//! [`McpProgress`]: crate::mcp::McpProgress
//! [`McpProgress::rejections`]: crate::mcp::McpProgress::rejections
//! [`NotifySocket`]: crate::notify::NotifySocket
//! [`NotifySocket::malformed`]: crate::notify::NotifySocket::malformed
//! [`ToolCallFeed`]: crate::tools::ToolCallFeed
//! [`AgentStream`]: crate::agent::AgentStream
//! [`BackgroundRecord`]: crate::background::BackgroundRecord
//! [`args::Rejection`]: crate::args::Rejection
//! [`mcp::McpRejection`]: crate::mcp::McpRejection
//! [`notify::Malformed`]: crate::notify::Malformed
//! [`tools::ToolCallError`]: crate::tools::ToolCallError
//! [`background::BackgroundError`]: crate::background::BackgroundError

use std::collections::BTreeMap;
use std::fmt;

use watchdog_core::Recorder;

/// The separator between a key's namespace and its reason.
pub const SEPARATOR: char = '.';

/// A reason a source refused an input, counted on the task under
/// [`Refusal::key`] (R10.6).
///
/// # Examples
///
/// ```
/// use stallwarden_sources::args::Rejection;
/// use stallwarden_sources::notify::Malformed;
/// use stallwarden_sources::Refusal;
///
/// assert_eq!(Rejection::EmptyDelta.key(), "args.empty_delta");
/// assert_eq!(Malformed::BadValue.key(), "notify.bad_value");
/// ```
pub trait Refusal: fmt::Display {
    /// Returns the key the task's status counts this reason under: the
    /// source's namespace, a `.`, and the reason in snake case.
    fn key(&self) -> &'static str;
}

/// Counts `reason` on the task and logs it at debug (`stallwarden run -v`);
/// returns it, for the caller's `Err`.
pub(crate) fn refuse<R: Refusal>(recorder: &Recorder, reason: R) -> R {
    recorder.refused(reason.key());
    tracing::debug!(task = %recorder.id(), key = reason.key(), "input refused: {reason}");
    reason
}

/// Returns the task's refusals whose key is in `namespace` (`"args"`,
/// `"mcp"`, …), by key; empty once the task finished.
///
/// # Examples
///
/// ```
/// use stallwarden_sources::refusal::refusals;
/// use stallwarden_sources::tools::ToolCallFeed;
/// use watchdog_core::{CallOutcome, Guard, ManualClock, Profile};
///
/// let guard = Guard::builder().clock(ManualClock::new()).build();
/// let task = guard.start("turn", Profile::default()).unwrap();
/// let calls = ToolCallFeed::new(task.recorder());
/// assert!(calls.finished("call_9", CallOutcome::Success).is_err());
/// assert_eq!(refusals(&task.recorder(), "tools")["tools.unknown_call"], 1);
/// assert!(refusals(&task.recorder(), "args").is_empty());
/// ```
pub fn refusals(recorder: &Recorder, namespace: &str) -> BTreeMap<&'static str, u64> {
    let Some(status) = recorder.status() else {
        return BTreeMap::new();
    };
    status
        .refused
        .into_iter()
        .filter(|(key, _)| {
            key.strip_prefix(namespace)
                .is_some_and(|rest| rest.starts_with(SEPARATOR))
        })
        .collect()
}

/// Returns how many refusals the task counted under `key`.
pub(crate) fn count(recorder: &Recorder, key: &str) -> u64 {
    recorder
        .status()
        .and_then(|s| s.refused.get(key).copied())
        .unwrap_or(0)
}

/// What a source did with an input it accepted (a refused one is the
/// source's [`Refusal`]).
///
/// # Examples
///
/// ```
/// use stallwarden_sources::Step;
/// assert_ne!(Step::Renewed, Step::Ignored);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Step {
    /// Fresh progress (a delta, a rising progress value): the task was
    /// renewed.
    Renewed,
    /// A boundary was accepted (a message or block start or stop); nothing
    /// renewed.
    Tracked,
    /// Not progress of this source's kind (a ping, text, a response):
    /// nothing renewed, nothing counted.
    Ignored,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::args::Rejection;
    use watchdog_core::{Guard, ManualClock, Profile};

    // R10.6: a key's count is what the task counted under it, and 0 for a key
    // never refused (kills the issue-26 mutants that make count 0 or 1).
    #[test]
    fn count_reads_the_tasks_count_of_one_key() {
        let guard = Guard::builder().clock(ManualClock::new()).build();
        let task = guard.start("turn", Profile::default()).unwrap();
        let recorder = task.recorder();
        assert_eq!(count(&recorder, "args.empty_delta"), 0);
        refuse(&recorder, Rejection::EmptyDelta);
        refuse(&recorder, Rejection::EmptyDelta);
        refuse(&recorder, Rejection::InvalidJson);
        assert_eq!(count(&recorder, "args.empty_delta"), 2);
        assert_eq!(count(&recorder, "args.invalid_json"), 1);
        assert_eq!(count(&recorder, "args.block_closed"), 0);
    }
}
