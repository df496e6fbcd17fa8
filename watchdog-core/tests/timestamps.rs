//! When events and actions are stamped (R3.1, R3.10, R10.2): an event's wall
//! time is the clock's wall time at its monotonic (due) instant, and a
//! recording sink stamps an action with its own task's event. Virtual time
//! (`ManualClock` + `Guard::advance`), never a real sleep.

use watchdog_core::{Clock, RecordingSink};

mod common;
use common::{ms, quiet, secs, setup};

// R3.1, R3.10: the wall time of an event is the clock's wall time at the
// event's monotonic instant.
#[test]
fn event_wall_time_is_taken_with_its_monotonic_instant() {
    let (guard, rec, clock) = setup();
    let _t = guard.start("w", quiet().idle(ms(1500))).unwrap();
    guard.advance(secs(2));
    let e = &rec.events()[1];
    assert_eq!(e.elapsed, ms(1500));
    assert_eq!(e.wall, clock.wall_at(e.at));
    assert_eq!(
        e.at,
        watchdog_core::Nanos::from_nanos(1) + ms(1500),
        "due instant, not the advance's end"
    );
}

// R10.2: a recording sink with no clock of its own stamps an action with the
// instant of its own task's event, even when another task's event arrived
// between the two (an isolated, reordering or replaying sink delivers so).
#[test]
fn a_recorded_action_takes_the_time_of_its_own_tasks_event() {
    use watchdog_core::{Delivered, Sink};
    let (guard, rec, _) = setup();
    let _a = guard.start("a", quiet().idle(secs(5))).unwrap();
    let _b = guard.start("b", quiet().idle(secs(7))).unwrap();
    guard.advance(secs(7));
    let find = |name: &str, action: bool| {
        rec.delivered()
            .into_iter()
            .find(|d| match d {
                Delivered::Event(e) => {
                    !action && &*e.name == name && e.kind.type_name() == "cancelling"
                }
                Delivered::Action(a) => action && &*a.name == name,
            })
            .unwrap_or_else(|| panic!("no {name} cancel"))
    };
    let replay = RecordingSink::new();
    for d in [find("a", false), find("b", false), find("a", true)] {
        match &d {
            Delivered::Event(e) => replay.on_event(e).unwrap(),
            Delivered::Action(a) => replay.on_action(a).unwrap(),
        }
    }
    let at: Vec<_> = replay.timed().into_iter().map(|(at, _)| at).collect();
    assert_eq!(at[1].saturating_since(at[0]), secs(2));
    assert_eq!(at[2], at[0]);
}
