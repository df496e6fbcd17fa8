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
//!
//! The record/stall handshake's two barriers live here too: see
//! [`light_barrier`] and [`heavy_barrier`].

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
}

/// The recorder's side of the record/stall handshake, between its store of
/// a stamp and its load of the flags (see [`crate::cell`]).
///
/// With [`heavy_barrier`] on the stall side it orders the store before the
/// load as a pair of `SeqCst` fences would, but costs the record path only
/// a compiler barrier: the stall side, which is rare, pays (R9.1). Where
/// the kernel offers no such pair it is a real `SeqCst` fence. Under loom
/// it is a `SeqCst` fence, which is what the pair is equivalent to.
#[inline(always)]
pub(crate) fn light_barrier() {
    #[cfg(loom)]
    loom::sync::atomic::fence(std::sync::atomic::Ordering::SeqCst);
    #[cfg(not(loom))]
    membarrier::light();
}

/// The stall side of the record/stall handshake, between its raising of a
/// flag and its reading of the stamps (see [`crate::cell`]).
///
/// On Linux it is `membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED)`: when it
/// returns, every thread of the process has run a full memory barrier
/// since it was called (an interrupt on the CPUs running one, the context
/// switch of those that were not), which turns each [`light_barrier`] it
/// overlapped into a `SeqCst` fence (membarrier(2); folly's asymmetric
/// barriers use the same pair). A few microseconds, once per driver pass
/// that raised a flag. Elsewhere it is a `SeqCst` fence, and so is the
/// light side.
pub(crate) fn heavy_barrier() {
    #[cfg(loom)]
    loom::sync::atomic::fence(std::sync::atomic::Ordering::SeqCst);
    #[cfg(not(loom))]
    membarrier::heavy();
}

/// Registers the process for the asymmetric barrier pair; called once per
/// guard built, before any of its recorders exists.
pub(crate) fn register_barriers() {
    #[cfg(not(loom))]
    membarrier::register();
}

#[cfg(not(loom))]
mod membarrier {
    use std::sync::atomic::{compiler_fence, fence, AtomicBool, Ordering};
    use std::sync::Once;

    /// True once the process is registered for private expedited
    /// membarrier: from then on the light side is a compiler barrier.
    /// It only ever goes from false to true, before the first guard's
    /// recorders exist, and they reach their guard through its lock, so
    /// every recorder reads the value its guard was built with.
    static ASYMMETRIC: AtomicBool = AtomicBool::new(false);
    static REGISTER: Once = Once::new();

    #[cfg(target_os = "linux")]
    const MEMBARRIER_CMD_PRIVATE_EXPEDITED: libc::c_long = 1 << 3;
    #[cfg(target_os = "linux")]
    const MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED: libc::c_long = 1 << 4;

    #[cfg(target_os = "linux")]
    fn membarrier(cmd: libc::c_long) -> bool {
        // SAFETY: membarrier takes two integers and touches no memory of
        // ours; an unknown command or an old kernel is an error return.
        unsafe { libc::syscall(libc::SYS_membarrier, cmd, 0 as libc::c_long) == 0 }
    }

    pub(super) fn register() {
        REGISTER.call_once(|| {
            #[cfg(target_os = "linux")]
            if membarrier(MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED) {
                ASYMMETRIC.store(true, Ordering::SeqCst);
            }
        });
    }

    #[inline(always)]
    pub(super) fn light() {
        if ASYMMETRIC.load(Ordering::Relaxed) {
            compiler_fence(Ordering::SeqCst);
        } else {
            fence(Ordering::SeqCst);
        }
    }

    pub(super) fn heavy() {
        #[cfg(target_os = "linux")]
        if ASYMMETRIC.load(Ordering::Relaxed) {
            // Registered, so it cannot fail (membarrier(2)); if it ever
            // did, the fence below still covers this side.
            if membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED) {
                return;
            }
            tracing::error!("membarrier failed after registration");
        }
        fence(Ordering::SeqCst);
    }
}
