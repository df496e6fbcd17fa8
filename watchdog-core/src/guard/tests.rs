//! Unit tests of the registry (R9.3).

use super::*;
use crate::clock::ManualClock;

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
