//! The stallwarden engine: tasks, renewable silence budgets, verdicts,
//! escalation and sink dispatch (SPEC §2–§4, R6.1–R6.3).
//!
//! A runner starts a task on a [`Guard`], records what its work is doing
//! through the task's [`Recorder`] (output bytes, streamed argument deltas,
//! tool calls, heartbeats), and the guard decides when it has been silent too
//! long: `stalled`, then a cancel action, then a kill action after the grace
//! period, delivered to every [`Sink`]. Recording is a lock-free store into
//! the task's own cell; verdicts are taken lazily by a driver thread that
//! wakes only when a budget can have run out.
//!
//! # Examples
//!
//! ```
//! use std::time::Duration;
//! use watchdog_core::{Guard, ManualClock, Profile, RecordingSink};
//!
//! let clock = ManualClock::new();
//! let events = RecordingSink::new();
//! let guard = Guard::builder().clock(clock).sink(events.clone()).build();
//!
//! let profile = Profile::default()
//!     .idle(Duration::from_secs(30))
//!     .execution(Duration::from_secs(300))
//!     .heartbeat_interval(None);
//! let turn = guard.start("turn-1", profile).unwrap();
//! turn.tool_started("call-1", "sql_probe").unwrap();
//! guard.advance(Duration::from_secs(165)); // a silent 165 s probe is fine (R2.2)
//! turn.tool_finished("call-1", watchdog_core::CallOutcome::Success).unwrap();
//! guard.advance(Duration::from_secs(30)); // back on the idle budget
//! assert_eq!(events.types_for("turn-1"), ["started", "stalled", "cancelling"]);
//! turn.finish_completed();
//! events.assert_settled("turn-1");
//! ```

#![warn(
    missing_docs,
    missing_debug_implementations,
    unreachable_pub,
    rust_2018_idioms
)]
// R10.7: no function outside tests passes 150 lines (clippy.toml); on only
// where cfg(test) is off, so tests are exempt.
#![cfg_attr(not(test), warn(clippy::too_many_lines))]

mod engine;
mod loom;
#[cfg(all(test, loom))]
mod loom_models;
mod state;
pub mod sys;
mod vocab;

pub use engine::guard::{Guard, GuardBuilder, TaskHandle};
pub use engine::recorder::{OutputCounter, Recorder};
pub use engine::repeat;
pub use state::probe::{ChildProbe, VerdictLook};
pub use vocab::at_stall::{StallNote, StallReport};
pub use vocab::clock::{Clock, LaggingClock, ManualClock, MonotonicClock, Nanos};
pub use vocab::duration::{
    check_duration, duration_from_millis, instant_after, parse_duration, DurationError,
    DURATION_RANGE, MAX_DURATION,
};
pub use vocab::error::{CallProblem, GuardError, ProfileError, MAX_CALLS_IN_FLIGHT, MAX_CALL_ID};
pub use vocab::event::{
    Action, ActionKind, Budget, ChildInfo, Event, EventKind, LeftoverAction, Outcome, ProcState,
    ProcessName, TaskId,
};
pub use vocab::profile::{OptionSpec, Profile, Setting, OPTIONS};
pub use vocab::signal::{KindSet, SignalKind, UnknownKind};
pub use vocab::sink::{AtStall, Delivered, Delivery, RecordingSink, Sink, SinkError};
pub use vocab::status::{
    BackgroundKind, BackgroundTask, BudgetStatus, CallOutcome, LastCall, Phase, Stamp, TaskState,
    TaskStatus,
};
pub use vocab::value::{Limit, OptionValue};
