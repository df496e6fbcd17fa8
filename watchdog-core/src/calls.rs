//! The one set of tool calls in flight (R5.3, R10.6).
//!
//! Every door that reports tool calls lands here: [`Recorder`] itself, the
//! sources' tool-call feed and agent-stream reader, the Node and Python
//! bindings. So the limits on ids and names, the duplicate and unknown
//! checks and the cap on calls in flight are one rule whichever feeds them,
//! and a call started through one door finishes through any other.
//!
//! The set lives in the task's slow state, under the scheduler lock; the
//! [`Recorder`] methods below are its only entrances. The stateless part of
//! the check (an id or name that is empty or too long) runs before the
//! signal is recorded, so garbage never renews a budget.

use crate::clock::Nanos;
use crate::error::{check, shown, CallProblem, GuardError, MAX_CALLS_IN_FLIGHT};
use crate::guard::Recorder;
use crate::status::CallOutcome;

/// One tool call, in flight or the last one seen.
#[derive(Debug)]
pub(crate) struct CallRecord {
    pub(crate) id: String,
    pub(crate) name: String,
    pub(crate) started: Nanos,
    pub(crate) finished: Option<(Nanos, CallOutcome)>,
    /// A digest of the tool's name and input, when the runner gave the
    /// input (R5.12).
    pub(crate) input: Option<u64>,
}

/// Why [`Calls::start`] refused a call whose id and name are well formed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum StartRefusal {
    /// The id is already in flight.
    Duplicate,
    /// [`MAX_CALLS_IN_FLIGHT`] are in flight.
    Full,
}

/// A task's calls in flight, in start order, and the last call seen (R4.1).
#[derive(Debug, Default)]
pub(crate) struct Calls {
    in_flight: Vec<CallRecord>,
    last: Option<CallRecord>,
}

impl Calls {
    /// Starts call `id` of tool `name` at `e`; the caller checked both.
    pub(crate) fn start(
        &mut self,
        e: Nanos,
        id: &str,
        name: &str,
        input: Option<u64>,
    ) -> Result<(), StartRefusal> {
        if self.contains(id) {
            return Err(StartRefusal::Duplicate);
        }
        if self.in_flight.len() >= MAX_CALLS_IN_FLIGHT {
            return Err(StartRefusal::Full);
        }
        let record = || CallRecord {
            id: id.to_owned(),
            name: name.to_owned(),
            started: e,
            finished: None,
            input,
        };
        self.last = Some(record());
        self.in_flight.push(record());
        Ok(())
    }

    /// Finishes call `id` at `e`; returns the finished call, now the last
    /// one, or `None` when `id` is not in flight.
    pub(crate) fn finish(
        &mut self,
        e: Nanos,
        id: &str,
        outcome: CallOutcome,
    ) -> Option<&CallRecord> {
        let pos = self.in_flight.iter().position(|c| c.id == id)?;
        let mut call = self.in_flight.remove(pos);
        call.finished = Some((e, outcome));
        Some(self.last.insert(call))
    }

    /// Finishes every call in flight at `e`, in start order; returns how
    /// many and the last of them.
    pub(crate) fn finish_all(
        &mut self,
        e: Nanos,
        outcome: CallOutcome,
    ) -> (usize, Option<&CallRecord>) {
        let n = self.in_flight.len();
        let last = self.in_flight.pop();
        self.in_flight.clear();
        match last {
            Some(mut call) => {
                call.finished = Some((e, outcome));
                (n, Some(self.last.insert(call)))
            }
            None => (0, None),
        }
    }

    /// The name and input digest of call `id`, if it is in flight.
    pub(crate) fn digest(&self, id: &str) -> Option<(String, Option<u64>)> {
        let c = self.in_flight.iter().find(|c| c.id == id)?;
        Some((c.name.clone(), c.input))
    }

    pub(crate) fn contains(&self, id: &str) -> bool {
        self.in_flight.iter().any(|c| c.id == id)
    }

    pub(crate) fn in_flight(&self) -> &[CallRecord] {
        &self.in_flight
    }

    pub(crate) fn last(&self) -> Option<&CallRecord> {
        self.last.as_ref()
    }
}

impl StartRefusal {
    pub(crate) fn error(self, task: &str, id: &str) -> GuardError {
        match self {
            StartRefusal::Duplicate => GuardError::DuplicateCall {
                task: task.to_owned(),
                call: id.to_owned(),
            },
            StartRefusal::Full => GuardError::BadCall {
                task: task.to_owned(),
                problem: CallProblem::TooMany,
            },
        }
    }
}

impl Recorder {
    /// Records the start of tool call `id` running tool `name` (R5.3): a
    /// `tool-call` signal, and the execution budget while any is in flight.
    ///
    /// An empty or over-long ([`MAX_CALL_ID`]) id or name is refused before
    /// anything is recorded; an id already in flight, or a start past
    /// [`MAX_CALLS_IN_FLIGHT`], is refused with nothing changed but the
    /// signal.
    ///
    /// # Examples
    ///
    /// ```
    /// use watchdog_core::{Guard, ManualClock, Phase, Profile};
    ///
    /// let guard = Guard::builder().clock(ManualClock::new()).build();
    /// let task = guard.start("turn", Profile::default()).unwrap();
    /// task.tool_started("toolu_1", "bash").unwrap();
    /// assert_eq!(task.status().unwrap().phase, Phase::Executing { tools: 1 });
    /// let e = task.tool_started("", "bash").unwrap_err();
    /// assert_eq!(e.to_string(), "task `turn`: tool call id is empty");
    /// ```
    pub fn tool_started(&self, id: &str, name: &str) -> Result<(), GuardError> {
        check(id, name).map_err(|problem| self.bad_call(problem))?;
        self.tool_signal();
        self.slow(|t, now, _| t.tool_started(now, id, name, None))
    }

    /// Records the start of tool call `id` running tool `name` on `input`
    /// (its arguments, as the runner has them), for the judgement of
    /// repeated calls (R5.12): a start whose name and input repeat a call
    /// in the task's window is a `repeat` signal, not a `tool-call` one.
    /// Otherwise as [`Recorder::tool_started`].
    ///
    /// # Examples
    ///
    /// ```
    /// use watchdog_core::{CallOutcome, Guard, ManualClock, Profile};
    ///
    /// let guard = Guard::builder().clock(ManualClock::new()).build();
    /// let task = guard.start("agent", Profile::default()).unwrap();
    /// for id in ["c1", "c2", "c3"] {
    ///     task.tool_started_with(id, "Bash(cat config.yaml)", br#"{"command":"cat config.yaml"}"#).unwrap();
    ///     task.tool_finished_with(id, CallOutcome::Success, b"port: 8080").unwrap();
    /// }
    /// let r = task.status().unwrap().repeating.unwrap();
    /// assert_eq!(r.to_string(), "Bash(cat config.yaml) returned the same result 3 times in 0s");
    /// ```
    pub fn tool_started_with(&self, id: &str, name: &str, input: &[u8]) -> Result<(), GuardError> {
        check(id, name).map_err(|problem| self.bad_call(problem))?;
        let digest = crate::repeat::call_input(name, input);
        let judge = self.slow(|t, _, _| Ok(t.judge()))?;
        let seen = judge.lock().call_started(digest, self.now());
        if seen {
            self.signal(crate::SignalKind::Repeat);
        } else {
            self.tool_signal();
        }
        self.slow(|t, now, _| t.tool_started(now, id, name, Some(digest)))
    }

    /// Records the end of tool call `id` with its `result` (or a digest of
    /// it), for the judgement of repeated calls (R5.12): a call whose
    /// name, input and result repeat one in the task's window is a
    /// `repeat` signal, not a `tool-call` one, and the stall says so
    /// (`Bash(cat config.yaml) returned the same result 8 times`).
    /// Otherwise as [`Recorder::tool_finished`]. See
    /// [`Recorder::tool_started_with`].
    pub fn tool_finished_with(
        &self,
        id: &str,
        outcome: CallOutcome,
        result: &[u8],
    ) -> Result<(), GuardError> {
        if check(id, "-").is_err() {
            return self.slow(|t, _, _| Err(t.not_in_flight(shown(id))));
        }
        let peek = self.slow(|t, _, _| Ok((t.call_digest(id), t.judge())))?;
        let (Some((name, input)), judge) = peek else {
            // As `tool_finished`: nothing changes but the signal.
            self.tool_signal();
            return self.slow(|t, _, _| Err(t.not_in_flight(shown(id))));
        };
        let digest = crate::repeat::call_result(
            input.unwrap_or_else(|| crate::repeat::call_input(&name, b"")),
            outcome,
            result,
        );
        let seen = judge.lock().call_finished(digest, &name, self.now());
        if seen {
            self.signal(crate::SignalKind::Repeat);
        } else {
            self.tool_signal();
        }
        self.slow(|t, now, _| t.tool_finished(now, id, outcome))
    }

    /// Records the end of tool call `id` (R5.3), whichever door started it;
    /// an id not in flight is an error that changes nothing but the
    /// signal, and names the id cut to [`MAX_CALL_ID`] bytes.
    ///
    /// # Examples
    ///
    /// ```
    /// use watchdog_core::{CallOutcome, Guard, ManualClock, Profile};
    ///
    /// let guard = Guard::builder().clock(ManualClock::new()).build();
    /// let task = guard.start("turn", Profile::default()).unwrap();
    /// task.tool_started("toolu_1", "bash").unwrap();
    /// task.tool_finished("toolu_1", CallOutcome::Success).unwrap();
    /// assert!(task.tool_finished("toolu_1", CallOutcome::Success).is_err());
    /// ```
    pub fn tool_finished(&self, id: &str, outcome: CallOutcome) -> Result<(), GuardError> {
        if check(id, "-").is_err() {
            // Never in flight: no signal, and the id is cut for the error.
            return self.slow(|t, _, _| Err(t.not_in_flight(shown(id))));
        }
        self.tool_signal();
        self.slow(|t, now, _| t.tool_finished(now, id, outcome))
    }

    /// Finishes every call in flight with `outcome`, as when a turn or a
    /// stream ended without their results; returns how many there were.
    ///
    /// # Examples
    ///
    /// ```
    /// use watchdog_core::{CallOutcome, Guard, ManualClock, Phase, Profile};
    ///
    /// let guard = Guard::builder().clock(ManualClock::new()).build();
    /// let task = guard.start("turn", Profile::default()).unwrap();
    /// task.tool_started("a", "bash").unwrap();
    /// task.tool_started("b", "grep").unwrap();
    /// assert_eq!(task.finish_calls(CallOutcome::Cancelled), Ok(2));
    /// assert_eq!(task.status().unwrap().phase, Phase::Idle);
    /// assert_eq!(task.last_call().unwrap().name, "grep");
    /// ```
    pub fn finish_calls(&self, outcome: CallOutcome) -> Result<usize, GuardError> {
        // Like each finish, a `tool-call` signal, before the silence is
        // handed back to the idle budget; none when nothing was in flight.
        if self.calls_in_flight() != 0 {
            self.tool_signal();
        }
        self.slow(|t, now, _| t.finish_calls(now, outcome))
    }

    /// Returns true while tool call `id` is in flight, whichever door
    /// started it.
    ///
    /// # Examples
    ///
    /// ```
    /// use watchdog_core::{Guard, ManualClock, Profile};
    ///
    /// let guard = Guard::builder().clock(ManualClock::new()).build();
    /// let task = guard.start("turn", Profile::default()).unwrap();
    /// task.tool_started("toolu_1", "bash").unwrap();
    /// assert!(task.is_call_in_flight("toolu_1"));
    /// assert!(!task.is_call_in_flight("toolu_2"));
    /// ```
    pub fn is_call_in_flight(&self, id: &str) -> bool {
        self.slow(|t, _, _| Ok(t.is_call_in_flight(id)))
            .unwrap_or(false)
    }

    /// Returns how many tool calls are in flight (0 once the task finished).
    ///
    /// # Examples
    ///
    /// ```
    /// use watchdog_core::{Guard, ManualClock, Profile};
    ///
    /// let guard = Guard::builder().clock(ManualClock::new()).build();
    /// let task = guard.start("turn", Profile::default()).unwrap();
    /// task.tool_started("toolu_1", "bash").unwrap();
    /// assert_eq!(task.calls_in_flight(), 1);
    /// ```
    pub fn calls_in_flight(&self) -> usize {
        self.slow(|t, _, _| Ok(t.calls_in_flight())).unwrap_or(0)
    }

    fn bad_call(&self, problem: CallProblem) -> GuardError {
        let task = self
            .slow(|t, _, _| Ok(t.name.to_string()))
            .unwrap_or_else(|_| self.id().to_string());
        GuardError::BadCall { task, problem }
    }
}
