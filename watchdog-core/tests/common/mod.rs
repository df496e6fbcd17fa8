//! Helpers shared by the core's integration tests: short duration
//! constructors and a guard on a virtual clock with a recording sink.

#![allow(dead_code)] // each test file uses part of it

use std::time::Duration;

use watchdog_core::{Guard, ManualClock, Profile, RecordingSink};

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
