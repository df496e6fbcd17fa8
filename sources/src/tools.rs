//! Tool-call start/finish feeds (R5.3).
//!
//! [`ToolCallFeed`] is a stateless translator onto the task's [`Recorder`]:
//! the core keeps the one set of calls in flight (R10.6), with the limits on
//! ids and names and the cap, and drives the execution budget (R2.2) and
//! the last call (R4.1) from it. So a call started on the recorder (or by
//! another feed, an agent stream, a binding) finishes through this feed and
//! the other way round. Every start or finish the core refuses (a finish
//! for an id not in flight, a bad id, the cap) is an error to the caller,
//! never a panic, and is counted on the task under `tools.` and the reason
//! (R10.6), whichever source fed it: this feed or an agent stream.
//! Streamed arguments of a call not yet final live in [`crate::args`].

use std::fmt;

use watchdog_core::{CallOutcome, CallProblem, GuardError, Recorder};

use crate::refusal::{refuse, Refusal};

/// The longest call id or tool name accepted, in bytes: the core's
/// [`watchdog_core::MAX_CALL_ID`].
pub const MAX_CALL_ID: usize = watchdog_core::MAX_CALL_ID;

/// Why a tool-call start or finish was refused; counted on the task under
/// `tools.` and the reason (R10.6).
///
/// # Examples
///
/// ```
/// use stallwarden_sources::tools::ToolCallError;
/// use stallwarden_sources::Refusal;
/// let e = ToolCallError::UnknownCall("call_9".into());
/// assert_eq!(e.to_string(), "no tool call `call_9` is in flight");
/// assert_eq!(e.key(), "tools.unknown_call");
/// ```
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ToolCallError {
    /// The call id was empty.
    #[error("tool call id is empty")]
    EmptyId,
    /// The tool name was empty.
    #[error("tool name is empty")]
    EmptyName,
    /// An id or name longer than [`MAX_CALL_ID`] bytes.
    #[error("tool call id or name is {0} bytes, more than 256")]
    TooLong(usize),
    /// A start for an id already in flight.
    #[error("tool call `{0}` is already in flight")]
    AlreadyInFlight(String),
    /// A finish for an id not in flight.
    #[error("no tool call `{0}` is in flight")]
    UnknownCall(String),
    /// The guard refused (the task finished or is cancelling, or
    /// [`watchdog_core::MAX_CALLS_IN_FLIGHT`] calls are in flight).
    #[error(transparent)]
    Guard(GuardError),
}

impl From<GuardError> for ToolCallError {
    fn from(e: GuardError) -> Self {
        match e {
            GuardError::BadCall {
                problem: CallProblem::EmptyId,
                ..
            } => ToolCallError::EmptyId,
            GuardError::BadCall {
                problem: CallProblem::EmptyName,
                ..
            } => ToolCallError::EmptyName,
            GuardError::BadCall {
                problem: CallProblem::TooLong(n),
                ..
            } => ToolCallError::TooLong(n),
            GuardError::DuplicateCall { call, .. } => ToolCallError::AlreadyInFlight(call),
            GuardError::UnknownCall { call, .. } => ToolCallError::UnknownCall(call),
            e => ToolCallError::Guard(e),
        }
    }
}

impl Refusal for ToolCallError {
    /// `tools.` and the reason, e.g. `tools.unknown_call`; a refusal of
    /// the guard's own is `tools.too_many` past the cap, else
    /// `tools.not_taken` (the task is cancelling or finished).
    fn key(&self) -> &'static str {
        match self {
            ToolCallError::EmptyId => "tools.empty_id",
            ToolCallError::EmptyName => "tools.empty_name",
            ToolCallError::TooLong(_) => "tools.too_long",
            ToolCallError::AlreadyInFlight(_) => "tools.already_in_flight",
            ToolCallError::UnknownCall(_) => "tools.unknown_call",
            ToolCallError::Guard(GuardError::BadCall {
                problem: CallProblem::TooMany,
                ..
            }) => "tools.too_many",
            ToolCallError::Guard(_) => "tools.not_taken",
        }
    }
}

/// Starts call `id` of tool `name` on the core's one set of calls in
/// flight; a refusal is counted on the task (R10.6).
pub(crate) fn start(recorder: &Recorder, id: &str, name: &str) -> Result<(), ToolCallError> {
    recorder
        .tool_started(id, name)
        .map_err(|e| refuse(recorder, ToolCallError::from(e)))
}

/// Finishes call `id` with `outcome`; a refusal is counted on the task.
pub(crate) fn finish(
    recorder: &Recorder,
    id: &str,
    outcome: CallOutcome,
) -> Result<(), ToolCallError> {
    recorder
        .tool_finished(id, outcome)
        .map_err(|e| refuse(recorder, ToolCallError::from(e)))
}

/// Starts call `id` with its input's words, for the judgement of repeated
/// calls (R5.12); a refusal is counted on the task.
pub(crate) fn start_with(
    recorder: &Recorder,
    id: &str,
    name: &str,
    input: &[u8],
) -> Result<(), ToolCallError> {
    recorder
        .tool_started_with(id, name, input)
        .map_err(|e| refuse(recorder, ToolCallError::from(e)))
}

/// Finishes call `id` with its result's words (R5.12); a refusal is
/// counted on the task.
pub(crate) fn finish_with(
    recorder: &Recorder,
    id: &str,
    outcome: CallOutcome,
    result: &[u8],
) -> Result<(), ToolCallError> {
    recorder
        .tool_finished_with(id, outcome, result)
        .map_err(|e| refuse(recorder, ToolCallError::from(e)))
}

/// Reports tool calls of one task by call id (R5.3).
///
/// Shareable by reference across threads: starts and finishes may come from
/// different places of a runner. It keeps no calls of its own: the set in
/// flight is the task's, in the core, and what it refuses is counted there
/// too (`tools.` keys).
///
/// # Examples
///
/// ```
/// use stallwarden_sources::tools::{ToolCallError, ToolCallFeed};
/// use watchdog_core::{CallOutcome, Guard, ManualClock, Profile};
///
/// let guard = Guard::builder().clock(ManualClock::new()).build();
/// let task = guard.start("turn", Profile::default()).unwrap();
/// let calls = ToolCallFeed::new(task.recorder());
/// calls.started("toolu_1", "bash").unwrap();
/// assert_eq!(calls.in_flight(), 1);
/// calls.finished("toolu_1", CallOutcome::Success).unwrap();
/// assert_eq!(
///     calls.finished("toolu_1", CallOutcome::Success),
///     Err(ToolCallError::UnknownCall("toolu_1".into()))
/// );
/// assert_eq!(task.last_call().unwrap().name, "bash");
/// assert_eq!(task.status().unwrap().refused["tools.unknown_call"], 1);
/// ```
pub struct ToolCallFeed {
    recorder: Recorder,
}

impl fmt::Debug for ToolCallFeed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ToolCallFeed")
            .field("task", &self.recorder.id())
            .field("in_flight", &self.in_flight())
            .finish()
    }
}

impl ToolCallFeed {
    /// Creates a feed for `recorder`'s task.
    pub fn new(recorder: Recorder) -> Self {
        ToolCallFeed { recorder }
    }

    /// Reports that call `id` of tool `name` started: a `tool-call` signal,
    /// and the execution budget applies until every started call finished.
    pub fn started(&self, id: &str, name: &str) -> Result<(), ToolCallError> {
        start(&self.recorder, id, name)
    }

    /// Reports that call `id` ended with `outcome`; updates the last call.
    pub fn finished(&self, id: &str, outcome: CallOutcome) -> Result<(), ToolCallError> {
        finish(&self.recorder, id, outcome)
    }

    /// Returns how many of the task's calls are in flight, whichever door
    /// started them.
    pub fn in_flight(&self) -> usize {
        self.recorder.calls_in_flight()
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use watchdog_core::{CallOutcome, Guard, ManualClock, Phase, Profile, RecordingSink};

    use super::{ToolCallError, ToolCallFeed};

    fn setup() -> (Guard, RecordingSink, watchdog_core::TaskHandle) {
        let rec = RecordingSink::new();
        let guard = Guard::builder()
            .clock(ManualClock::new())
            .sink(rec.clone())
            .build();
        let profile = Profile::default()
            .idle(Duration::from_secs(10))
            .execution(Duration::from_secs(300))
            .heartbeat_interval(None);
        let task = guard.start("turn", profile).unwrap();
        (guard, rec, task)
    }

    #[test]
    fn two_calls_in_flight_keep_the_execution_budget_until_both_finish() {
        // R5.3, R2.2.
        let (guard, rec, task) = setup();
        let calls = ToolCallFeed::new(task.recorder());
        calls.started("call_a", "sql_probe").unwrap();
        calls.started("call_b", "grep").unwrap();
        guard.advance(Duration::from_secs(100));
        calls.finished("call_a", CallOutcome::Success).unwrap();
        assert_eq!(task.status().unwrap().phase, Phase::Executing { tools: 1 });
        // 165 s of silence with call_b still in flight: fine.
        guard.advance(Duration::from_secs(165));
        assert_eq!(rec.types_for("turn"), ["started"], "at {:?}", guard.now());
        calls.finished("call_b", CallOutcome::Error).unwrap();
        assert_eq!(task.status().unwrap().phase, Phase::Idle);
        guard.advance(Duration::from_secs(10)); // idle applies again
        assert_eq!(rec.types_for("turn"), ["started", "stalled", "cancelling"]);
    }

    #[test]
    fn an_unknown_finish_is_an_error_not_a_panic() {
        let (_guard, _rec, task) = setup();
        let calls = ToolCallFeed::new(task.recorder());
        assert_eq!(
            calls.finished("nope", CallOutcome::Success),
            Err(ToolCallError::UnknownCall("nope".into()))
        );
        let long = "é".repeat(300);
        match calls.finished(&long, CallOutcome::Success) {
            Err(ToolCallError::UnknownCall(id)) => assert!(id.len() <= 256),
            other => panic!("expected UnknownCall, got {other:?}"),
        }
        assert_eq!(refused(&task, "tools.unknown_call"), 2);
        assert_eq!(calls.started("", "bash"), Err(ToolCallError::EmptyId));
        assert_eq!(calls.started("c", ""), Err(ToolCallError::EmptyName));
        assert_eq!(
            calls.started(&long, "bash"),
            Err(ToolCallError::TooLong(600))
        );
        calls.started("c", "bash").unwrap();
        assert_eq!(
            calls.started("c", "bash"),
            Err(ToolCallError::AlreadyInFlight("c".into()))
        );
        assert_eq!(task.status().unwrap().phase, Phase::Executing { tools: 1 });
        // R10.6: each refusal is counted on the task, by namespaced key.
        let keys = task.status().unwrap().refused;
        let want = [
            ("tools.already_in_flight", 1),
            ("tools.empty_id", 1),
            ("tools.empty_name", 1),
            ("tools.too_long", 1),
            ("tools.unknown_call", 2),
        ];
        assert_eq!(keys.into_iter().collect::<Vec<_>>(), want);
    }

    fn refused(task: &watchdog_core::TaskHandle, key: &str) -> u64 {
        task.status()
            .unwrap()
            .refused
            .get(key)
            .copied()
            .unwrap_or(0)
    }

    #[test]
    fn a_call_started_on_the_recorder_finishes_through_the_feed_and_back() {
        // R10.6, R5.3: one set of calls in flight, whichever door. Before,
        // the feed kept its own set: this finish was `UnknownCall` while
        // the core kept the call in flight and held the execution budget.
        let (guard, rec, task) = setup();
        let calls = ToolCallFeed::new(task.recorder());
        task.tool_started("direct", "bash").unwrap();
        assert_eq!(calls.in_flight(), 1);
        calls.finished("direct", CallOutcome::Success).unwrap();
        assert_eq!(task.status().unwrap().phase, Phase::Idle);
        calls.started("fed", "grep").unwrap();
        task.tool_finished("fed", CallOutcome::Error).unwrap();
        assert_eq!(calls.in_flight(), 0);
        assert!(task.status().unwrap().refused.is_empty());
        // No call holds the execution budget: idle applies.
        guard.advance(Duration::from_secs(10));
        assert_eq!(rec.types_for("turn"), ["started", "stalled", "cancelling"]);
    }

    #[test]
    fn finish_updates_the_last_call() {
        // R4.1: absent until observed, then name, outcome and both stamps.
        let (guard, _rec, task) = setup();
        let calls = ToolCallFeed::new(task.recorder());
        assert!(task.last_call().is_none());
        calls.started("call_1", "bash").unwrap();
        guard.advance(Duration::from_secs(2));
        let running = task.last_call().unwrap();
        assert_eq!((running.id.as_str(), running.outcome), ("call_1", None));
        calls.finished("call_1", CallOutcome::Cancelled).unwrap();
        let done = task.last_call().unwrap();
        assert_eq!(done.outcome, Some(CallOutcome::Cancelled));
        assert!(done.finished.is_some());
        assert_eq!(done.started.age, Duration::from_secs(2));
    }
}
