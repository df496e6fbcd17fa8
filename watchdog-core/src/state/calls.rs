//! The one set of tool calls in flight (R5.3, R10.6).
//!
//! Every door that reports tool calls lands here: [`Recorder`] itself, the
//! sources' tool-call feed and agent-stream reader, the Node and Python
//! bindings. So the limits on ids and names, the duplicate and unknown
//! checks and the cap on calls in flight are one rule whichever feeds them,
//! and a call started through one door finishes through any other.
//!
//! The set lives in the task's slow state, under the scheduler lock; the
//! [`Recorder`]'s tool-call methods (in `engine/recorder.rs`) are its only
//! entrances. The stateless part of
//! the check (an id or name that is empty or too long) runs before the
//! signal is recorded, so garbage never renews a budget.
//!
//! [`Recorder`]: crate::Recorder

use crate::vocab::clock::Nanos;
use crate::vocab::error::{CallProblem, GuardError, MAX_CALLS_IN_FLIGHT};
use crate::vocab::status::CallOutcome;

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
