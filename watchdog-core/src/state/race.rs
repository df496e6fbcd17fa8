//! A test hook standing in for a recorder that raced a stall (R3.3,
//! R10.5), and the virtual-time test that uses it: the recorder's flags
//! load came before `STALLED` was raised, and its store of the stamp lands
//! only after the driver's first look at the stamps, the interleaving the
//! loom model `a_renewal_racing_a_stall_verdict_is_never_missed` explores.

use std::cell::RefCell;

use crate::state::cell::TaskCell;

type Hook = Box<dyn FnOnce(&TaskCell)>;

thread_local! {
    static AFTER_STALL: RefCell<Option<Hook>> = const { RefCell::new(None) };
}

/// Runs `hook` on the cell of the next task this thread stalls, right after
/// the stall's own look at the stamps.
pub(crate) fn on_next_stall(hook: impl FnOnce(&TaskCell) + 'static) {
    AFTER_STALL.with(|h| *h.borrow_mut() = Some(Box::new(hook)));
}

pub(crate) fn after_stall(cell: &TaskCell) {
    if let Some(hook) = AFTER_STALL.with(|h| h.borrow_mut().take()) {
        hook(cell);
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::Ordering::Relaxed;
    use std::time::Duration;

    use super::*;
    use crate::{Clock, EventKind, Guard, ManualClock, Profile, RecordingSink, SignalKind};

    // R3.3, R10.5: the renewal that raced the stall is a recovery at the
    // verdict's own instant, within the driver's pass, not one budget
    // (here 10 s) later.
    #[test]
    fn a_renewal_that_raced_a_stall_recovers_within_the_same_pass() {
        let clock = ManualClock::new();
        let rec = RecordingSink::new();
        let guard = Guard::builder()
            .clock(clock.clone())
            .sink(rec.clone())
            .build();
        let budget = Duration::from_secs(10);
        let profile = Profile::default()
            .idle(budget)
            .terminate_after(3)
            .heartbeat_interval(None);
        let task = guard.start("raced", profile).unwrap();
        task.signal(SignalKind::Output); // ends startup
        let late = clock.clone();
        on_next_stall(move |cell| {
            let stamp = late.now().as_nanos();
            cell.last_by_kind[SignalKind::Output.slot()].store(stamp, Relaxed);
        });
        guard.advance(budget);
        let events = rec.events_of(task.id());
        let at = |ty: &str| {
            events
                .iter()
                .find(|e| e.kind.type_name() == ty)
                .map(|e| e.at)
        };
        let stalled = at("stalled").expect("the verdict stalls: the renewal came too late for it");
        assert_eq!(
            at("recovered"),
            Some(stalled),
            "recovered at the verdict's instant, not a budget later: {:?}",
            rec.types_for("raced")
        );
        let recovered = events.iter().find_map(|e| match &e.kind {
            EventKind::Recovered { silent } => Some(*silent),
            _ => None,
        });
        assert_eq!(recovered, Some(budget));
        assert_eq!(task.status().unwrap().strikes, 0);
    }
}
