//! Errors of the guard's API, each naming the task and what was wrong;
//! the problems a tool call can have (with the limits they cite); and the
//! one error of a refused profile option. Every tier above names these, so
//! they sit below it: this file imports only the task id.

use std::borrow::Cow;
use std::fmt;
use std::time::Duration;

use crate::vocab::event::TaskId;

/// Why a guard or task operation was refused.
///
/// None of these is fatal to the guard; each leaves the task as it was.
///
/// # Examples
///
/// ```
/// use watchdog_core::{Guard, ManualClock, Profile, GuardError};
///
/// let guard = Guard::builder().clock(ManualClock::new()).build();
/// let task = guard.start("probe", Profile::default()).unwrap();
/// let err = task.tool_finished("call-9", watchdog_core::CallOutcome::Success).unwrap_err();
/// assert_eq!(err.to_string(), "task `probe` has no tool call `call-9` in flight");
/// ```
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum GuardError {
    /// Task names are unique among live tasks.
    #[error("a live task is already named `{0}`")]
    DuplicateName(String),
    /// The profile failed validation.
    #[error("invalid profile for task `{task}`: {source}")]
    Profile {
        /// The task that was being started.
        task: String,
        /// What was wrong.
        source: ProfileError,
    },
    /// No live task has this name.
    #[error("no live task named `{0}`")]
    UnknownTask(String),
    /// The task has already finished (R3.8): named as every other error
    /// names its task, with its id, which stays unique after the name is
    /// free for a new task.
    ///
    /// ```
    /// use watchdog_core::{Guard, GuardError, ManualClock, Profile};
    ///
    /// let guard = Guard::builder().clock(ManualClock::new()).build();
    /// let task = guard.start("job", Profile::default()).unwrap();
    /// task.finish_completed();
    /// let err = task.trigger("late").unwrap_err();
    /// assert_eq!(err, GuardError::Finished { task: "job".into(), id: task.id() });
    /// assert_eq!(err.to_string(), "task `job` (#1) has already finished");
    /// ```
    #[error("task `{task}` ({id}) has already finished")]
    Finished {
        /// The task's name.
        task: String,
        /// The task's id.
        id: TaskId,
    },
    /// The task is being cancelled; its budgets no longer move.
    #[error("task `{0}` is cancelling")]
    Cancelling(String),
    /// A tool finish named a call that is not in flight (R5.3).
    #[error("task `{task}` has no tool call `{call}` in flight")]
    UnknownCall {
        /// The task.
        task: String,
        /// The call id given.
        call: String,
    },
    /// A tool start named a call already in flight (R5.3).
    #[error("task `{task}` already has tool call `{call}` in flight")]
    DuplicateCall {
        /// The task.
        task: String,
        /// The call id given.
        call: String,
    },
    /// A tool call whose id or name breaks the limits, or one more start
    /// than a task keeps in flight (R5.3, R10.6).
    #[error("task `{task}`: {problem}")]
    BadCall {
        /// The task.
        task: String,
        /// What was wrong.
        problem: CallProblem,
    },
    /// Every slot of the guard is taken (about four billion live tasks).
    #[error("the guard already watches {0} tasks, the most it can hold")]
    TooManyTasks(usize),
    /// `extend` on a task without a deadline (R2.9).
    #[error("task `{0}` has no deadline to extend")]
    NoDeadline(String),
    /// A thread the guard needs (its driver, an isolated sink's) could not
    /// start: the guard is not built (R10.5).
    #[error("could not start thread `{thread}`: {reason}")]
    Thread {
        /// The thread's name, `stallwarden-driver` or `stallwarden-sink-…`.
        thread: String,
        /// The system's reason.
        reason: String,
    },
    /// An extension past `max-deadline` (R2.9): refused, not capped.
    #[error("task `{task}`: extension refused, the deadline would be {} after start, past max-deadline {}", humantime::format_duration(*.requested), humantime::format_duration(*.max))]
    ExtensionRefused {
        /// The task.
        task: String,
        /// The deadline asked for, from the start.
        requested: Duration,
        /// The bound.
        max: Duration,
    },
    /// An extension longer than [`crate::MAX_DURATION`] (R8.12): refused
    /// with the range, never an overflow.
    #[error("task `{task}`: extension refused, {} is out of range (at most 100 years)", humantime::format_duration(*.requested))]
    ExtensionTooLong {
        /// The task.
        task: String,
        /// The extension asked for.
        requested: Duration,
    },
}

/// The longest tool-call id or tool name accepted, in bytes (R10.6).
///
/// # Examples
///
/// ```
/// use watchdog_core::{Guard, ManualClock, Profile, MAX_CALL_ID};
///
/// let guard = Guard::builder().clock(ManualClock::new()).build();
/// let task = guard.start("turn", Profile::default()).unwrap();
/// assert!(task.tool_started(&"c".repeat(MAX_CALL_ID), "bash").is_ok());
/// assert!(task.tool_started(&"c".repeat(MAX_CALL_ID + 1), "bash").is_err());
/// ```
pub const MAX_CALL_ID: usize = 256;

/// The most tool calls one task keeps in flight; a start beyond it is
/// refused, so a runaway stream cannot grow memory (R10.6).
///
/// # Examples
///
/// ```
/// use watchdog_core::{CallProblem, Guard, GuardError, ManualClock, Profile, MAX_CALLS_IN_FLIGHT};
///
/// let guard = Guard::builder().clock(ManualClock::new()).build();
/// let task = guard.start("turn", Profile::default()).unwrap();
/// for i in 0..MAX_CALLS_IN_FLIGHT {
///     task.tool_started(&format!("c{i}"), "bash").unwrap();
/// }
/// let full = task.tool_started("one-more", "bash").unwrap_err();
/// assert!(matches!(full, GuardError::BadCall { problem: CallProblem::TooMany, .. }));
/// ```
pub const MAX_CALLS_IN_FLIGHT: usize = 1024;

/// What is wrong with a tool call a runner reported (R5.3, R10.6).
///
/// # Examples
///
/// ```
/// use watchdog_core::CallProblem;
/// assert_eq!(CallProblem::TooLong(300).to_string(), "tool call id or name is 300 bytes, more than 256");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CallProblem {
    /// The call id was empty.
    #[error("tool call id is empty")]
    EmptyId,
    /// The tool name was empty.
    #[error("tool name is empty")]
    EmptyName,
    /// An id or name longer than [`MAX_CALL_ID`] bytes; the length given.
    #[error("tool call id or name is {0} bytes, more than 256")]
    TooLong(usize),
    /// [`MAX_CALLS_IN_FLIGHT`] calls are already in flight.
    #[error("1024 tool calls are already in flight, the most one task tracks")]
    TooMany,
}

/// Checks a call's id and name against the limits, id first.
pub(crate) fn check(id: &str, name: &str) -> Result<(), CallProblem> {
    for (s, empty) in [(id, CallProblem::EmptyId), (name, CallProblem::EmptyName)] {
        if s.is_empty() {
            return Err(empty);
        }
        if s.len() > MAX_CALL_ID {
            return Err(CallProblem::TooLong(s.len()));
        }
    }
    Ok(())
}

/// Cuts an untrusted id for errors and logs to [`MAX_CALL_ID`] bytes, on a
/// character boundary.
pub(crate) fn shown(id: &str) -> &str {
    let mut end = id.len().min(MAX_CALL_ID);
    while !id.is_char_boundary(end) {
        end -= 1;
    }
    &id[..end]
}

/// A profile option that was refused: the one error of every door
/// (R7.2, R10.6), naming the key and what was wrong.
///
/// Its form is `KEY is FOUND, expected RANGE` for a value out of range and
/// `KEY: WHY, expected FORM` for a value of the wrong form or an unknown
/// key.
///
/// # Examples
///
/// ```
/// use watchdog_core::Profile;
///
/// let err = Profile::default().terminate_after(5000).validate().unwrap_err();
/// assert_eq!(err.to_string(), "terminate-after is 5000, expected 0..=1000 (0 means never cancel)");
/// let err = Profile::default().set("notifyOnly", "yes").unwrap_err();
/// assert_eq!(err.to_string(), "notifyOnly: \"yes\" is not a boolean, expected a boolean (true or false)");
/// assert_eq!(err.problem(), "\"yes\" is not a boolean, expected a boolean (true or false)");
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProfileError {
    /// The key as the caller spelt it (`idle`, `max_deadline`,
    /// `maxDeadline`, `--idle`); kebab-case from
    /// [`Profile::validate`](crate::Profile::validate).
    pub key: Cow<'static, str>,
    /// The refused value, as a person would write it.
    pub found: String,
    /// The allowed range or form.
    pub expected: Cow<'static, str>,
    /// What is wrong with the form, when it is not the range.
    pub why: Option<String>,
}

impl ProfileError {
    /// Returns the message without the key: what was wrong and what was
    /// expected (for a door that names the key its own way).
    pub fn problem(&self) -> String {
        match &self.why {
            Some(why) => format!("{why}, expected {}", self.expected),
            None => format!("{} is out of range, expected {}", self.found, self.expected),
        }
    }
}

impl fmt::Display for ProfileError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.why {
            Some(why) => write!(f, "{}: {why}, expected {}", self.key, self.expected),
            None => write!(
                f,
                "{} is {}, expected {}",
                self.key, self.found, self.expected
            ),
        }
    }
}

impl std::error::Error for ProfileError {}
