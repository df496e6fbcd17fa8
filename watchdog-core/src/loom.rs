//! The concurrency primitives of the lock-free protocols, swapped for
//! loom's under `--cfg loom` so the models in `loom_models.rs` explore
//! their interleavings (R10.5), as tokio-util's `loom.rs` does.
//!
//! The task cell's atomics, the slab's reference counts, the output
//! counters, the scheduler's and the dispatcher's locks and the isolated
//! sinks' threads come from here. In a normal build they are `std`'s
//! atomics, `parking_lot`'s locks and `std::thread`, at no cost; under loom
//! the locks are thin wrappers giving loom's the `parking_lot` calls the
//! crate uses (a wait with a deadline waits without one: loom has no time).

#[cfg(not(loom))]
pub(crate) mod sync {
    pub(crate) use parking_lot::{Condvar, Mutex};

    pub(crate) mod atomic {
        pub(crate) use std::sync::atomic::{fence, AtomicU32, AtomicU64};
    }
}

#[cfg(not(loom))]
pub(crate) use std::thread;

#[cfg(loom)]
pub(crate) use loom::thread;

#[cfg(loom)]
pub(crate) mod sync {
    //! loom's locks behind the `parking_lot` calls the crate makes.

    use std::ops::{Deref, DerefMut};
    use std::time::Instant;

    pub(crate) mod atomic {
        pub(crate) use loom::sync::atomic::{fence, AtomicU32, AtomicU64};
    }

    #[derive(Debug, Default)]
    pub(crate) struct Mutex<T>(loom::sync::Mutex<T>);

    #[derive(Debug)]
    pub(crate) struct MutexGuard<'a, T>(Option<loom::sync::MutexGuard<'a, T>>);

    impl<T> Mutex<T> {
        pub(crate) fn new(t: T) -> Self {
            Mutex(loom::sync::Mutex::new(t))
        }

        pub(crate) fn lock(&self) -> MutexGuard<'_, T> {
            MutexGuard(Some(self.0.lock().unwrap()))
        }

        pub(crate) fn try_lock(&self) -> Option<MutexGuard<'_, T>> {
            self.0.try_lock().ok().map(|g| MutexGuard(Some(g)))
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
}
