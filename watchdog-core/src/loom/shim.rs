//! loom's locks behind the `parking_lot` calls the crate makes, compiled
//! only under `--cfg loom`. `.cargo/mutants.toml` leaves this file out: a
//! mutant of it changes nothing a normal build runs, and the loom step of
//! `.ci/run` exercises it (R10.4, R10.5).

use std::ops::{Deref, DerefMut};
use std::sync::atomic::Ordering::Relaxed;
use std::time::Instant;

use loom::sync::atomic::AtomicUsize;

pub(crate) mod atomic {
    pub(crate) use loom::sync::atomic::{fence, AtomicU32, AtomicU64};
}

/// loom's mutex, plus a point where loom may switch threads right
/// after an unlock: loom's own unlock is none, which would hide every
/// window that opens between two unlocks (the drain hand-off has one).
#[derive(Debug)]
pub(crate) struct Mutex<T>(loom::sync::Mutex<T>, AtomicUsize);

#[derive(Debug)]
pub(crate) struct MutexGuard<'a, T>(Option<loom::sync::MutexGuard<'a, T>>, &'a AtomicUsize);

impl<T> Drop for MutexGuard<'_, T> {
    fn drop(&mut self) {
        drop(self.0.take());
        self.1.fetch_add(1, Relaxed);
    }
}

impl<T: Default> Default for Mutex<T> {
    fn default() -> Self {
        Mutex::new(T::default())
    }
}

impl<T> Mutex<T> {
    pub(crate) fn new(t: T) -> Self {
        Mutex(loom::sync::Mutex::new(t), AtomicUsize::new(0))
    }

    pub(crate) fn lock(&self) -> MutexGuard<'_, T> {
        MutexGuard(Some(self.0.lock().unwrap()), &self.1)
    }

    pub(crate) fn try_lock(&self) -> Option<MutexGuard<'_, T>> {
        self.0.try_lock().ok().map(|g| MutexGuard(Some(g), &self.1))
    }

    /// loom has no time: waits for the lock.
    pub(crate) fn try_lock_until(&self, _deadline: Instant) -> Option<MutexGuard<'_, T>> {
        Some(self.lock())
    }
}

impl<T> Deref for MutexGuard<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        self.0.as_ref().expect("guard held")
    }
}

impl<T> DerefMut for MutexGuard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        self.0.as_mut().expect("guard held")
    }
}

#[derive(Debug, Default)]
pub(crate) struct Condvar(loom::sync::Condvar);

/// Whether a wait ran out of time: never, under loom.
#[derive(Debug)]
pub(crate) struct WaitTimeoutResult;

impl WaitTimeoutResult {
    pub(crate) fn timed_out(&self) -> bool {
        false
    }
}

impl Condvar {
    pub(crate) fn new() -> Self {
        Condvar(loom::sync::Condvar::new())
    }

    pub(crate) fn wait<T>(&self, guard: &mut MutexGuard<'_, T>) {
        let g = guard.0.take().expect("guard held");
        guard.0 = Some(self.0.wait(g).unwrap());
    }

    /// loom has no time: waits without a deadline.
    pub(crate) fn wait_until<T>(
        &self,
        guard: &mut MutexGuard<'_, T>,
        _deadline: Instant,
    ) -> WaitTimeoutResult {
        self.wait(guard);
        WaitTimeoutResult
    }

    pub(crate) fn notify_one(&self) {
        self.0.notify_one();
    }

    pub(crate) fn notify_all(&self) {
        self.0.notify_all();
    }
}
