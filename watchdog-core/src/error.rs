//! Errors of the guard's API: each names the task and what was wrong.

use std::time::Duration;

use crate::calls::CallProblem;
use crate::event::TaskId;
use crate::profile::ProfileError;

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
