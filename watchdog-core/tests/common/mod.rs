//! Helpers shared by the core's integration tests: short duration
//! constructors, a guard on a virtual clock with a recording sink, and
//! readers of what that sink recorded (an event's reason, a budget's
//! status line).

#![allow(dead_code)] // each test file uses part of it

use std::time::Duration;

use watchdog_core::{BudgetStatus, EventKind, Guard, ManualClock, Profile, RecordingSink};

pub fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

pub fn secs(n: u64) -> Duration {
    Duration::from_secs(n)
}

/// A quiet profile: no outbound heartbeats unless a test asks for them.
pub fn quiet() -> Profile {
    Profile::default().heartbeat_interval(None)
}

/// A guard on a fresh virtual clock with one inline recording sink.
pub fn setup() -> (Guard, RecordingSink, ManualClock) {
    let clock = ManualClock::new();
    let rec = RecordingSink::new();
    let guard = Guard::builder()
        .clock(clock.clone())
        .sink(rec.clone())
        .build();
    (guard, rec, clock)
}

/// The `reason` of the first event of type `ty` for task `name`.
pub fn reason_of(rec: &RecordingSink, name: &str, ty: &str) -> String {
    rec.events()
        .into_iter()
        .filter(|e| &*e.name == name && e.kind.type_name() == ty)
        .find_map(|e| match e.kind {
            EventKind::Cancelling { reason, .. }
            | EventKind::DeadlineExceeded { reason }
            | EventKind::LivenessLost { reason }
            | EventKind::Triggered { reason } => Some(reason),
            _ => None,
        })
        .unwrap_or_else(|| panic!("no {ty} with a reason for {name}"))
}

/// A budget line of a status, as `TaskStatus::budgets` lists it.
pub fn budget(
    name: &'static str,
    limit: Duration,
    remaining: Duration,
    active: bool,
) -> BudgetStatus {
    BudgetStatus {
        budget: name,
        limit,
        remaining,
        active,
    }
}

/// Asserts that two lines have the same fingerprint (R5.12): one is a
/// repeat of the other.
pub fn same(a: &str, b: &str) {
    assert_eq!(
        watchdog_core::repeat::fingerprint(a.as_bytes()),
        watchdog_core::repeat::fingerprint(b.as_bytes()),
        "expected the same fingerprint:\n  {a}\n  {b}"
    );
}

/// Asserts that two lines have different fingerprints (R5.12): the second
/// is new work.
pub fn differ(a: &str, b: &str) {
    assert_ne!(
        watchdog_core::repeat::fingerprint(a.as_bytes()),
        watchdog_core::repeat::fingerprint(b.as_bytes()),
        "expected different fingerprints:\n  {a}\n  {b}"
    );
}
