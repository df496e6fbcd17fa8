//! The look before a verdict (R8.16, R3.10), in virtual time: a runner's
//! [`VerdictLook`] is taken once per due instant, outside the scheduler
//! lock, before that instant is judged; progress it records counts, and
//! a look that finds nothing changes no verdict.

use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::Arc;

use watchdog_core::{Guard, Recorder, TaskHandle, VerdictLook};

mod common;
use common::{quiet, secs, setup};

/// Counts its looks; records output at a look while `pending` is set, as
/// a runner does for bytes its reader has not passed on yet.
#[derive(Debug)]
struct Pending {
    recorder: Recorder,
    guard: Guard,
    pending: AtomicBool,
    looks: AtomicU32,
}

impl VerdictLook for Pending {
    fn before_verdict(&self) {
        self.looks.fetch_add(1, Ordering::SeqCst);
        // Outside the scheduler lock: a look may read the guard's status.
        let _ = self.guard.statuses();
        if self.pending.load(Ordering::SeqCst) {
            self.recorder.output(0, 0);
        }
    }
}

fn attach(guard: &Guard, task: &TaskHandle) -> Arc<Pending> {
    let look = Arc::new(Pending {
        recorder: task.recorder(),
        guard: guard.clone(),
        pending: AtomicBool::new(false),
        looks: AtomicU32::new(0),
    });
    task.recorder().set_verdict_look(look.clone());
    look
}

// R8.16: progress the look records before the verdict counts: a task whose
// runner holds unpassed output at each due instant never stalls, however
// long the gap before the verdict (one advance of 7 budgets: a process
// stopped for that long); once nothing is pending, it stalls one budget
// after the last look's progress, exactly.
#[test]
fn progress_recorded_by_the_look_counts_and_a_gap_is_not_silence() {
    let (guard, rec, _) = setup();
    let t = guard.start("a", quiet().idle(secs(2))).unwrap();
    let look = attach(&guard, &t);
    look.pending.store(true, Ordering::SeqCst);
    guard.advance(secs(14));
    assert_eq!(rec.types_for("a"), ["started"]);
    assert_eq!(look.looks.load(Ordering::SeqCst), 1, "one look per due");
    guard.advance(secs(1));
    assert_eq!(look.looks.load(Ordering::SeqCst), 1, "nothing due: no look");
    look.pending.store(false, Ordering::SeqCst);
    guard.advance(secs(1));
    assert_eq!(look.looks.load(Ordering::SeqCst), 2);
    assert_eq!(rec.types_for("a"), ["started", "stalled", "cancelling"]);
    assert_eq!(rec.offsets("a", "stalled"), [secs(16)]);
}

// R8.16, R3.10: a look that finds nothing changes nothing: the stall comes
// exactly at the budget, as without a look, and the look was taken once
// for that instant.
#[test]
fn a_look_that_finds_nothing_changes_no_verdict() {
    let (guard, rec, _) = setup();
    let t = guard.start("b", quiet().idle(secs(5))).unwrap();
    let look = attach(&guard, &t);
    guard.advance(secs(4));
    t.output(1, 1);
    guard.advance(secs(1));
    let before = look.looks.load(Ordering::SeqCst);
    guard.advance(secs(4));
    assert_eq!(rec.types_for("b"), ["started", "stalled", "cancelling"]);
    assert_eq!(rec.offsets("b", "stalled"), [secs(9)]);
    assert_eq!(look.looks.load(Ordering::SeqCst), before + 1);
    guard.tick();
    assert_eq!(look.looks.load(Ordering::SeqCst), before + 1, "once");
}

// R8.16: each due task gets its own look, one task's look renewing only
// its own task.
#[test]
fn each_due_task_gets_its_own_look() {
    let (guard, rec, _) = setup();
    let tasks: Vec<_> = (0..5)
        .map(|i| guard.start(format!("t{i}"), quiet().idle(secs(3))).unwrap())
        .collect();
    let looks: Vec<_> = tasks.iter().map(|t| attach(&guard, t)).collect();
    for l in looks.iter().step_by(2) {
        l.pending.store(true, Ordering::SeqCst);
    }
    guard.advance(secs(3));
    for (i, l) in looks.iter().enumerate() {
        assert_eq!(l.looks.load(Ordering::SeqCst), 1, "t{i}");
        let stalled = rec.types_for(&format!("t{i}")).contains(&"stalled");
        assert_eq!(stalled, i % 2 == 1, "t{i}");
    }
}

// R8.16: a verdict an operation takes (the clock moved past the due
// instant and no tick ran yet: a driver starved or stopped) is looked
// before too: with output on its way, the operation finds no stall; with
// none, the same operation stalls the task, as without a look.
#[test]
fn an_operation_that_judges_a_due_timer_takes_the_look_first() {
    let (guard, rec, clock) = setup();
    let t = guard.start("c", quiet().idle(secs(2))).unwrap();
    let look = attach(&guard, &t);
    look.pending.store(true, Ordering::SeqCst);
    clock.advance(secs(3));
    t.recorder().set_step("build");
    assert_eq!(look.looks.load(Ordering::SeqCst), 1);
    assert_eq!(rec.types_for("c"), ["started"]);
    look.pending.store(false, Ordering::SeqCst);
    guard.tick();
    clock.advance(secs(3));
    t.recorder().set_step("test");
    assert_eq!(look.looks.load(Ordering::SeqCst), 2);
    assert_eq!(rec.types_for("c"), ["started", "stalled", "cancelling"]);
}
