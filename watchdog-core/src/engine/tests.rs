//! Unit tests of the registry (R9.3).

use std::sync::Arc;
use std::time::Duration;

use crate::engine::driver::Inner;
use crate::engine::guard::Guard;
use crate::vocab::clock::ManualClock;
use crate::vocab::profile::Profile;
use crate::ChildProbe;

// R9.3: the name index and the timer heap hold the live tasks and
// nothing else, however many have come and gone.
#[test]
fn finished_tasks_leave_no_name_or_timer_behind() {
    let guard = Guard::builder().clock(ManualClock::new()).build();
    let inner = &guard.owner.inner;
    for round in 0..3 {
        let tasks: Vec<_> = (0..300)
            .map(|i| {
                guard
                    .start(format!("t{round}-{i}"), Profile::default())
                    .unwrap()
            })
            .collect();
        {
            let s = inner.sched.lock();
            assert_eq!(
                (s.names.len(), s.timers.len(), s.slab.len()),
                (300, 300, 300)
            );
        }
        for (i, t) in tasks.iter().enumerate() {
            if i % 2 == 0 {
                t.finish_completed();
            }
        }
        {
            let s = inner.sched.lock();
            assert_eq!(
                (s.names.len(), s.timers.len(), s.slab.len()),
                (150, 150, 150)
            );
        }
        drop(tasks);
        let s = inner.sched.lock();
        assert_eq!((s.names.len(), s.timers.len(), s.slab.len()), (0, 0, 0));
    }
}

/// A probe that notes, at each fresh look, whether the scheduler lock was
/// held by anyone (this thread included: the lock is not re-entrant).
#[derive(Debug, Default)]
struct LockSpy {
    inner: std::sync::OnceLock<std::sync::Weak<Inner>>,
    looks: parking_lot::Mutex<Vec<bool>>,
}

impl ChildProbe for LockSpy {
    fn children(&self) -> Option<Vec<crate::ChildInfo>> {
        Some(Vec::new())
    }

    fn verdict_children(&self) -> Option<Vec<crate::ChildInfo>> {
        let inner = self.inner.get().and_then(std::sync::Weak::upgrade);
        let held = inner.is_some_and(|i| i.sched.try_lock().is_none());
        self.looks.lock().push(held);
        Some(Vec::new())
    }
}

// R8.13, R3.1: the fresh look a stall names reads `/proc`; it is taken
// when the event leaves the outbox, with the guard-wide scheduler lock
// free, whether a timer (the driver's pass) or a slow-path operation took
// the verdict, and every sink still gets the event with the look in it.
#[test]
fn the_fresh_look_of_a_stall_is_taken_outside_the_scheduler_lock() {
    let rec = crate::RecordingSink::new();
    let clock = ManualClock::new();
    let guard = Guard::builder()
        .clock(clock.clone())
        .sink(rec.clone())
        .build();
    let spy = Arc::new(LockSpy::default());
    spy.inner
        .set(Arc::downgrade(&guard.owner.inner))
        .expect("set once");
    let quiet = Profile::default()
        .heartbeat_interval(None)
        .idle(Duration::from_secs(5))
        .terminate_after(0);
    let t = guard.start("spied", quiet).unwrap();
    t.set_children_probe(spy.clone());
    // A timer's verdict, in the pass `advance` runs.
    guard.advance(Duration::from_secs(5));
    // Progress recovers it; then a verdict that came due before the driver
    // ran, taken by the next slow-path operation on the task.
    t.output(1, 1);
    clock.advance(Duration::from_secs(5));
    t.set_step("waiting");
    assert_eq!(*spy.looks.lock(), [false, false]);
    let stalls: Vec<_> = rec
        .events()
        .into_iter()
        .filter_map(|e| match e.kind {
            crate::EventKind::Stalled { children, .. } => Some(children),
            _ => None,
        })
        .collect();
    assert_eq!(stalls, [Some(Vec::new()), Some(Vec::new())]);
}
