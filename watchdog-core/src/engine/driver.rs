//! The engine state every handle shares ([`Inner`]): the timer passes,
//! the driver's half of the record/stall handshake (R10.5), the slow-path
//! runner, and the driver thread that wakes only when a budget can have
//! run out (R6.3, R9.3).
//!
//! # Invariants
//!
//! - `sched` is the guard's one scheduler lock. It guards the `Scheduler`:
//!   every task's slow state and timer due instant (the slab), the name
//!   index, the timer heap, `planned_wake` and the shared last profile.
//!   Every verdict and every slow-path operation runs under it, at an
//!   instant fixed for the whole pass, so a verdict and the operation that
//!   raced it are ordered by the lock, never interleaved.
//! - A live task with something to judge is armed in the heap once, at
//!   its next due instant (never before the instant just judged, so the
//!   driver cannot spin), re-armed by [`Inner::rearm`] after every change;
//!   a task whose life is `Finished` leaves the registry there, so no
//!   timer fires after its `finished` event (R3.8).
//! - `planned_wake` is when the driver will next wake. It is written under
//!   `sched`: by the driver after a pass, and by a re-arm whose due is
//!   earlier, which then unparks the driver. The driver parks only after
//!   letting go of `sched`; an unpark that comes in between is kept by the
//!   thread's park token, so the earlier due is never slept through.
//! - The record path takes none of this: a recorder stores into its cell
//!   and comes here (through [`Inner::with_task`]) only when the cell's
//!   flags ask it to (see `state/cell.rs`). A pass that raised such a flag
//!   pays the driver's half of the handshake, one `heavy_barrier`, then
//!   looks at those tasks' stamps again ([`Inner::absorb_raced`]).
//! - `next_id` only hands out unique task ids (`Relaxed`); `driver` is set
//!   once, before any task exists; `shutdown` is raised (`SeqCst`) by the
//!   last `Guard` or `TaskHandle` to go, then the driver is unparked, and
//!   the driver reads it at the top of every pass.
//!
//! # Lock order
//!
//! `sched` first; under it a task's repeat judge (a stall verdict reads
//! it), the dispatcher's `outbox` (emitted items are pushed before the
//! lock is let go, which keeps their order), the slab's free list, and
//! whatever the clock takes to read itself (`ManualClock`'s wall-time
//! lock). Each of those is a leaf. Held across `sched`: a clock read
//! (so a [`Clock`] must never call into the guard), the heavy barrier,
//! and a status snapshot's call to [`ChildProbe::children`], which must
//! return what it already has.
//!
//! Never under `sched`: a sink call or an at-stall step (the outbox is
//! drained after the lock is let go), a [`VerdictLook`] (its looks are
//! collected under the lock and taken outside it, and
//! [`Inner::with_task`] lets go of the lock, takes the look, and starts
//! over), and [`ChildProbe::verdict_children`] (taken by the drainer).
//! So any of them may call back into the guard.
//!
//! [`ChildProbe::children`]: crate::ChildProbe::children
//! [`ChildProbe::verdict_children`]: crate::ChildProbe::verdict_children

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

use crate::engine::dispatch::Dispatcher;
use crate::engine::spawn::{spawn_checked, SpawnGate};
use crate::loom::heavy_barrier;
use crate::loom::sync::Mutex;
use crate::state::probe::VerdictLook;
use crate::state::task::{Life, Out, Task};
use crate::vocab::clock::{Clock, ManualClock, MonotonicClock, Nanos};
use crate::vocab::error::GuardError;
use crate::vocab::event::TaskId;

use crate::engine::scheduler::Scheduler;

pub(crate) struct Inner {
    pub(super) clock: Arc<dyn Clock>,
    pub(super) fast_clock: Option<MonotonicClock>,
    pub(super) manual: Option<ManualClock>,
    pub(super) sched: Mutex<Scheduler>,
    pub(super) dispatch: Dispatcher,
    pub(super) next_id: AtomicU64,
    pub(super) driver: OnceLock<std::thread::Thread>,
    pub(super) shutdown: AtomicBool,
}

impl Inner {
    /// Builds the engine and, on a real clock, starts its driver thread;
    /// an error, not a guard that judges nothing, when the thread cannot
    /// start (R10.5).
    pub(crate) fn start(
        clock: Arc<dyn Clock>,
        fast_clock: Option<MonotonicClock>,
        manual: Option<ManualClock>,
        dispatch: Dispatcher,
        gate: Option<SpawnGate>,
    ) -> Result<Arc<Self>, GuardError> {
        crate::loom::register_barriers();
        let inner = Arc::new(Inner {
            clock,
            fast_clock,
            manual,
            sched: Mutex::new(Scheduler::default()),
            dispatch,
            next_id: AtomicU64::new(1),
            driver: OnceLock::new(),
            shutdown: AtomicBool::new(false),
        });
        if !inner.clock.is_virtual() {
            const NAME: &str = "stallwarden-driver";
            let driver_inner = Arc::clone(&inner);
            let handle = spawn_checked(gate, NAME, || {
                std::thread::Builder::new()
                    .name(NAME.into())
                    .spawn(move || driver_inner.drive())
            })?;
            let _ = inner.driver.set(handle.thread().clone());
        }
        Ok(inner)
    }

    pub(super) fn unpark_driver(&self) {
        if let Some(t) = self.driver.get() {
            t.unpark();
        }
    }

    /// Re-arms one task's timer after its state changed; finished tasks
    /// leave the registry here, so no tick can follow their `finished`.
    pub(super) fn rearm(&self, s: &mut Scheduler, slot: u32) {
        self.rearm_after(s, slot, Nanos::ZERO);
    }

    /// Like [`Inner::rearm`], but never earlier than `floor`: a timer just
    /// evaluated at `e` re-arms after `e`, so the driver cannot spin even if
    /// a rule forgot to move its own due instant.
    pub(super) fn rearm_after(&self, s: &mut Scheduler, slot: u32, floor: Nanos) {
        let Some(t) = s.task(slot) else {
            return;
        };
        if t.life == Life::Finished {
            s.remove(slot);
            return;
        }
        let due = t.next_due().map(|d| d.max(floor));
        // Most operations leave the due instant where it was (a renewal
        // does not move it, R3.10): then the heap is not touched at all.
        let armed = Some(s.slab.due(slot).get()).filter(|&d| d != Nanos::MAX);
        if due == armed {
            return;
        }
        s.timers.set(&s.slab, slot, due);
        if let Some(due) = due {
            if s.planned_wake.is_none_or(|w| due < w) {
                s.planned_wake = Some(due);
                self.unpark_driver();
            }
        }
    }

    /// The looks to take before the timers due by `now` are judged (R8.16,
    /// R3.10): one per task that has one, once per due instant. Empty
    /// (and cheap) when nothing is due or no due task has a look.
    pub(super) fn take_looks(&self, s: &mut Scheduler, now: Nanos) -> Vec<Arc<dyn VerdictLook>> {
        if s.timers.peek(&s.slab).is_none_or(|(due, _)| due > now) {
            return Vec::new();
        }
        let mut due = Vec::new();
        s.timers
            .each_due(&s.slab, now, |at, slot| due.push((at, slot)));
        due.into_iter()
            .filter_map(|(at, slot)| s.task(slot)?.look_for(at))
            .collect()
    }

    /// Takes the looks due by `now` (see [`Inner::take_looks`]), outside
    /// the scheduler lock; the verdicts that follow are taken at the same
    /// `now`, so none comes due between the looks and the judging.
    pub(super) fn look_before_verdicts(&self, now: Nanos) {
        let looks = {
            let mut s = self.sched.lock();
            self.take_looks(&mut s, now)
        };
        for look in looks {
            look.before_verdict();
        }
    }

    /// Evaluates every timer due at or before `now`, each at its due
    /// instant, earliest first (ties by slot, so runs are reproducible).
    pub(super) fn run_due(&self, s: &mut Scheduler, now: Nanos) {
        let mut out = Out::new(&*self.clock);
        let mut raised = Vec::new();
        while let Some((due, slot)) = s.timers.peek(&s.slab) {
            if due > now {
                break;
            }
            let Some(mut t) = s.task(slot) else {
                // Unreachable: removing a task disarms it. Never spin on it.
                s.timers.set(&s.slab, slot, None);
                continue;
            };
            t.evaluate(due, &mut out);
            if std::mem::take(&mut out.raised) {
                raised.push((slot, due));
            }
            // Re-arming moves the entry past `due`, or drops it.
            self.rearm_after(s, slot, Nanos::from_nanos(due.as_nanos() + 1));
        }
        self.absorb_raced(s, raised, &mut out);
        self.dispatch.push(out.items);
    }

    /// The driver's half of the record/stall handshake (see
    /// `TaskCell::record`, R10.5): after a pass raised flags, one heavy
    /// barrier for the whole pass, then every task that raised one looks at
    /// its stamps again, so a renewal that raced the flag is a recovery at
    /// the verdict's instant (R3.3), not one budget later.
    pub(super) fn absorb_raced(
        &self,
        s: &mut Scheduler,
        raised: Vec<(u32, Nanos)>,
        out: &mut Out<'_>,
    ) {
        if raised.is_empty() {
            return;
        }
        heavy_barrier();
        for (slot, e) in raised {
            if let Some(mut t) = s.task(slot) {
                t.sync(e, out);
            }
            self.rearm_after(s, slot, Nanos::from_nanos(e.as_nanos() + 1));
        }
    }

    /// Runs a slow-path operation on one task at the clock's current reading,
    /// re-arms its timer and delivers what it emitted.
    pub(super) fn with_task<R>(
        &self,
        slot: u32,
        id: TaskId,
        f: impl FnOnce(&mut Task<'_>, Nanos, &mut Out<'_>) -> R,
    ) -> Option<R> {
        let r = loop {
            let mut s = self.sched.lock();
            let now = self.clock.now();
            // R8.16: a verdict this operation takes is looked before too:
            // with the task's timer due, its look first, outside the lock.
            let due = s.slab.due(slot).get();
            // The slot may hold a newer task than the caller's: then the
            // caller's task has finished and left (R3.8).
            let mut t = s.task(slot).filter(|t| t.id == id)?;
            if due <= now {
                if let Some(look) = t.look_for(due) {
                    // The look is the runner's code and may record or call
                    // back in: take it without the lock, then start over,
                    // since the task may have changed meanwhile. `look_for`
                    // gives one look per due instant, so the next round
                    // judges this instant instead of looking again.
                    drop(s);
                    look.before_verdict();
                    continue;
                }
            }
            let mut out = Out::new(&*self.clock);
            t.sync(now, &mut out);
            let r = f(&mut t, now, &mut out);
            // An operation can make a verdict due at once (a tool finish
            // that hands a long silence back to the idle budget): take it
            // now, not back-dated to when it would have been due.
            // Bounded at four passes, so a rule that forgot to move its
            // own due instant cannot make this loop spin (as the floor of
            // `rearm_after` keeps the driver from spinning).
            for _ in 0..4 {
                match t.next_due() {
                    Some(due) if due <= now => t.evaluate(now, &mut out),
                    _ => break,
                }
            }
            if std::mem::take(&mut out.raised) {
                // The driver's half of the handshake, as in `absorb_raced`:
                // here for the one task, with the lock still held, so the
                // renewal that raced the flag is absorbed at this `now`.
                heavy_barrier();
                t.sync(now, &mut out);
            }
            self.rearm(&mut s, slot);
            self.dispatch.push(out.items);
            break r;
        };
        self.dispatch.drain();
        Some(r)
    }

    /// The driver thread's loop: look, judge what is due, deliver, park
    /// until the next due instant. It holds the scheduler lock only for the
    /// judging, and never while it delivers or sleeps.
    pub(super) fn drive(self: Arc<Self>) {
        loop {
            if self.shutdown.load(Ordering::SeqCst) {
                return;
            }
            // R8.16: what the runner has not recorded yet is recorded
            // before the verdict; a wake long after the due instant (this
            // process stopped or starved) is judged on it, not on the gap.
            let now = self.clock.now();
            self.look_before_verdicts(now);
            let next = {
                let mut s = self.sched.lock();
                self.run_due(&mut s, now);
                let next = s.timers.peek(&s.slab).map(|(due, _)| due);
                s.planned_wake = next;
                next
            };
            self.dispatch.drain();
            match next {
                // The wait is measured from after the delivery: inline sinks
                // may take a while, and a wait measured from before them
                // would oversleep the next due by as long (R9.3). Waking a
                // little early just loops once more.
                Some(due) => std::thread::park_timeout(due.saturating_since(self.clock.now())),
                None => std::thread::park(),
            }
        }
    }
}
