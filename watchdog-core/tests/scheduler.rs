//! The scheduler's bookkeeping (R9.1, R9.3, R10.5): one timer entry per task
//! however many signals arrive or its due instant moves, verdicts taken at
//! `tick` after the clock moved elsewhere, a late recorder that cannot reach
//! a later task in a reused slot, and the record/stall handshake's
//! expedited barrier. Virtual time (`ManualClock` + `Guard::advance` or
//! `Guard::tick`), never a real sleep.

use std::sync::Arc;

mod common;
use common::{ms, quiet, secs, setup};

// R9.1, R9.3: recording a signal takes no lock and wakes nothing: a task
// fed a steady stream of output keeps one timer entry, re-armed only when
// it comes due, however many signals arrive in between.
#[test]
fn recording_signals_adds_no_timer_entries() {
    let (guard, rec, _) = setup();
    let t = guard.start("hot", quiet().idle(secs(10))).unwrap();
    assert_eq!(guard.timer_entries(), 1);
    t.output(1, 0); // ends startup: one slow-path visit, same due instant
    assert_eq!(guard.timer_entries(), 1);
    // 15 s of signals every 100 ms: the timer due at 10 s fires once, finds
    // the renewal and re-arms; nothing else touches the heap.
    for _ in 0..150 {
        guard.advance(ms(100));
        t.output(1, 0);
        t.argument_delta();
    }
    assert_eq!(guard.timer_entries(), 1, "no timer entry per signal");
    assert_eq!(rec.types_for("hot"), ["started"]);
}

// R9.3: a task holds one timer entry whatever its due instant does: a
// move re-keys the entry in place (no stale entry is left behind to cost
// memory and a wake-up), and finishing removes it at once.
#[test]
fn a_task_holds_one_timer_entry_while_its_due_instant_moves() {
    let (guard, rec, _) = setup();
    let t = guard
        .start("st", quiet().idle(secs(10)).execution(secs(100)))
        .unwrap();
    t.output(1, 0);
    assert_eq!(guard.timer_entries(), 1);
    t.tool_started("c", "sql").unwrap(); // due moves from 10 s to 100 s
    assert_eq!(guard.timer_entries(), 1, "the entry moved, none was added");
    guard.advance(secs(20));
    assert_eq!(guard.timer_entries(), 1);
    guard.advance(secs(80));
    assert_eq!(rec.timeline("st")[1], (secs(100), "stalled"));
    assert_eq!(guard.timer_entries(), 1, "re-armed after the strike");
    t.finish_completed();
    assert_eq!(guard.timer_entries(), 0, "a finished task leaves no entry");
    guard.advance(secs(200));
    assert_eq!(rec.timeline("st").len(), 4, "nothing after finished");
}

// R9.3: a guard on a moved virtual clock takes its verdicts at `tick`, each
// at its own due instant.
#[test]
fn tick_takes_verdicts_after_the_clock_was_moved_elsewhere() {
    let (guard, rec, clock) = setup();
    let _t = guard
        .start("tk", quiet().idle(secs(4)).terminate_after(0))
        .unwrap();
    clock.advance(secs(9));
    assert_eq!(rec.types_for("tk"), ["started"]);
    guard.tick();
    assert_eq!(
        rec.timeline("tk"),
        [
            (secs(0), "started"),
            (secs(4), "stalled"),
            (secs(8), "stalled")
        ]
    );
}

// R9.3: a recorder kept past its task's end writes into its own cell only:
// the slot is not reused while any recorder holds it, so a late signal
// cannot renew or show up in a task started later.
#[test]
fn a_late_recorder_never_touches_a_later_task() {
    let (guard, rec, _) = setup();
    let old = guard.start("old", quiet().idle(secs(10))).unwrap();
    let late = old.recorder();
    old.finish_completed();
    drop(old);
    let new = guard.start("new", quiet().idle(secs(10))).unwrap();
    guard.advance(secs(5));
    late.output(100, 3);
    late.argument_delta();
    let status = new.status().unwrap();
    assert_eq!((status.total_bytes, status.total_lines), (0, 0));
    assert!(status.last_signal.is_empty(), "{:?}", status.last_signal);
    assert!(late.status().is_none(), "the old task is gone");
    guard.advance(secs(5));
    assert_eq!(rec.timeline("new")[1], (secs(10), "stalled"));

    // Once the last recorder is gone the slot serves new tasks, cleanly.
    drop(late);
    for i in 0..3 {
        let t = guard.start(format!("reuse-{i}"), quiet()).unwrap();
        let status = t.status().unwrap();
        assert_eq!((status.total_bytes, status.strikes), (0, 0));
        assert!(status.last_signal.is_empty());
    }
}

/// Every `ERROR` the engine logs on this thread while `f` runs.
fn errors_logged_during(f: impl FnOnce()) -> Vec<String> {
    use std::fmt::Write as _;
    use tracing::field::{Field, Visit};
    use tracing::span::{Attributes, Id, Record};
    use tracing::{Event, Level, Metadata, Subscriber};

    struct Text(String);
    impl Visit for Text {
        fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
            let _ = write!(self.0, "{}={value:?} ", field.name());
        }
    }
    struct Errors(Arc<parking_lot::Mutex<Vec<String>>>);
    impl Subscriber for Errors {
        fn enabled(&self, _: &Metadata<'_>) -> bool {
            true
        }
        fn new_span(&self, _: &Attributes<'_>) -> Id {
            Id::from_u64(1)
        }
        fn record(&self, _: &Id, _: &Record<'_>) {}
        fn record_follows_from(&self, _: &Id, _: &Id) {}
        fn event(&self, event: &Event<'_>) {
            if *event.metadata().level() == Level::ERROR {
                let mut text = Text(String::new());
                event.record(&mut text);
                self.0.lock().push(text.0);
            }
        }
        fn enter(&self, _: &Id) {}
        fn exit(&self, _: &Id) {}
    }
    let errors = Arc::new(parking_lot::Mutex::new(Vec::new()));
    tracing::subscriber::with_default(Errors(errors.clone()), f);
    let logged = errors.lock().clone();
    logged
}

// R10.5: the driver's half of the record/stall handshake is the expedited
// membarrier, and once the process is registered it never fails: a stall
// verdict (which raises STALLED and so pays the heavy barrier) logs no
// error. With the wrong command (mutant `<< with >>` on
// `MEMBARRIER_CMD_PRIVATE_EXPEDITED`, which asks the kernel a query
// instead) the call "fails" on every pass, and the driver falls back to a
// plain fence and says so with this error.
#[test]
fn a_stall_pays_the_expedited_barrier_without_error() {
    let (guard, rec, _) = setup();
    let _t = guard
        .start("mb", quiet().idle(secs(10)).terminate_after(0))
        .unwrap();
    let errors = errors_logged_during(|| guard.advance(secs(11)));
    assert_eq!(rec.types_for("mb"), ["started", "stalled"]);
    assert!(errors.is_empty(), "{errors:?}");
}
