//! The clocks every budget is read on (R2.7): `Nanos`, the saturating
//! instant; the real `MonotonicClock`, whose wall labels follow monotonic
//! time; and the virtual `ManualClock`, whose wall clock jumps without
//! moving monotonic time. `LaggingClock` and what its lag does to budgets
//! is `lagging_clock.rs`.
//!
//! Pure values and the virtual clock: no waiting. The one reading of the
//! real clock asserts order and a wall-clock gap, never how long a call took.

use std::time::{Duration, SystemTime};

use watchdog_core::{Clock, ManualClock, MonotonicClock, Nanos};

mod common;
use common::{ms, secs};

// R2.7: instants are plain saturating nanosecond counts.
#[test]
fn nanos_arithmetic_saturates() {
    assert_eq!(Nanos::from_millis(1500).as_nanos(), 1_500_000_000);
    assert_eq!(Nanos::from_secs(2).as_nanos(), 2_000_000_000);
    assert_eq!(Nanos::from_secs(u64::MAX), Nanos::MAX);
    assert_eq!(Nanos::from_millis(u64::MAX), Nanos::MAX);
    assert_eq!(Nanos::from_nanos(7).as_nanos(), 7);
    assert_eq!(
        Nanos::from_secs(3).saturating_since(Nanos::from_secs(1)),
        secs(2)
    );
    assert_eq!(
        Nanos::from_secs(1).saturating_since(Nanos::from_secs(3)),
        Duration::ZERO
    );
    assert_eq!(
        Nanos::from_secs(3).saturating_sub(secs(1)),
        Nanos::from_secs(2)
    );
    assert_eq!(Nanos::from_secs(1).saturating_sub(secs(3)), Nanos::ZERO);
    assert_eq!(Nanos::from_secs(1) + ms(500), Nanos::from_millis(1500));
    assert_eq!(Nanos::from_secs(1) + Duration::MAX, Nanos::MAX);
    assert_eq!(Nanos::MAX + secs(1), Nanos::MAX);
    assert_eq!(format!("{:?}", Nanos::from_millis(1500)), "1.5s");
}

// R2.7: the real clock's wall labels keep the monotonic spacing, and its
// readings never go back and are never the "never observed" zero.
#[test]
fn monotonic_clock_wall_labels_follow_monotonic_time() {
    let c = MonotonicClock::default();
    assert!(!c.is_virtual());
    let a = c.now();
    let b = c.now();
    assert!(a > Nanos::ZERO && b >= a);
    let gap = c
        .wall_at(Nanos::from_secs(3600))
        .duration_since(c.wall_at(Nanos::ZERO))
        .unwrap();
    assert_eq!(gap, secs(3600));
    let drift = SystemTime::now()
        .duration_since(c.wall_at(c.now()))
        .unwrap_or_else(|e| e.duration());
    assert!(drift < secs(3600), "wall labels are near the wall clock");
}

// R2.7: the virtual clock starts at 1 ns on 2026-01-01, saturates, and its
// wall clock jumps both ways without moving monotonic time.
#[test]
fn manual_clock_starts_in_2026_and_jumps_its_wall_clock_both_ways() {
    let c = ManualClock::default();
    assert!(c.is_virtual());
    assert_eq!(c.now(), Nanos::from_nanos(1));
    let epoch = SystemTime::UNIX_EPOCH + secs(1_767_225_600);
    assert_eq!(c.wall_at(Nanos::ZERO), epoch);
    assert_eq!(c.wall_at(Nanos::from_secs(5)), epoch + secs(5));
    c.jump_wall(10);
    assert_eq!(c.wall_at(Nanos::ZERO), epoch + secs(10));
    c.jump_wall(-25);
    assert_eq!(c.wall_at(Nanos::ZERO), epoch - secs(15));
    c.jump_wall(0);
    assert_eq!(c.wall_at(Nanos::ZERO), epoch - secs(15));
    assert_eq!(c.now(), Nanos::from_nanos(1));
    c.advance(Duration::MAX);
    assert_eq!(c.now(), Nanos::MAX);
}
