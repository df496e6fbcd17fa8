//! The guard and handle surface: a handle's guard is the guard that started
//! it, `Guard::advance` moves virtual clocks only, and the hand-written
//! `Debug` output shows state. Virtual time (`ManualClock` +
//! `Guard::advance`) wherever time moves, never a real sleep.

use watchdog_core::{Guard, RecordingSink};

mod common;
use common::{quiet, secs, setup};

// The handle's guard is the guard that started it.
#[test]
fn handle_guard_is_the_guard_that_started_it() {
    let (guard, _, _) = setup();
    let t = guard.start("mine", quiet()).unwrap();
    let via_handle = t.guard();
    assert_eq!(via_handle.status("mine").unwrap().id, t.id());
    via_handle.advance(secs(1));
    assert_eq!(guard.status("mine").unwrap().elapsed, secs(1));
}

// `Guard::advance` is only for virtual clocks: real time cannot be moved.
#[test]
#[should_panic(expected = "ManualClock")]
fn advance_on_a_real_clock_panics() {
    Guard::builder().build().advance(secs(1));
}

// The hand-written Debug output shows state, not pointers (STYLE.md).
#[test]
fn debug_output_shows_state() {
    let (guard, _, _) = setup();
    let t = guard.start("dbg", quiet()).unwrap();
    let g = format!("{guard:?}");
    assert!(g.contains("tasks: 1") && g.contains("virtual: true"), "{g}");
    assert!(format!("{t:?}").contains("finished: false"));
    assert!(format!("{:?}", t.recorder()).contains("Recorder"));
    assert!(format!("{:?}", Guard::default()).contains("virtual: false"));
    let b = format!("{:?}", Guard::builder().sink(RecordingSink::new()));
    assert!(b.contains("sinks: 1"), "{b}");
    let c = format!("{:?}", t.output_counter());
    assert!(c.contains("OutputCounter"), "{c}");
}
