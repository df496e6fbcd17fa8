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
#[path = "shim.rs"]
pub(crate) mod sync;

/// The recorder's side of the record/stall handshake, between its store of
/// a stamp and its load of the flags (see [`crate::state::cell`]).
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
/// flag and its reading of the stamps (see [`crate::state::cell`]).
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
    #[cfg(all(test, not(loom)))]
    tests::HEAVY.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
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
    pub(super) static ASYMMETRIC: AtomicBool = AtomicBool::new(false);
    static REGISTER: Once = Once::new();

    #[cfg(target_os = "linux")]
    const MEMBARRIER_CMD_PRIVATE_EXPEDITED: libc::c_long = 1 << 3;
    #[cfg(target_os = "linux")]
    const MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED: libc::c_long = 1 << 4;

    #[cfg(target_os = "linux")]
    pub(super) fn membarrier(cmd: libc::c_long) -> bool {
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
                #[cfg(test)]
                super::tests::BY_MEMBARRIER.fetch_add(1, Ordering::Relaxed);
                return;
            }
            tracing::error!("membarrier failed after registration");
        }
        fence(Ordering::SeqCst);
    }
}

#[cfg(test)]
#[cfg(not(loom))]
mod tests {
    //! The asymmetric pair in a normal build (R10.5): the loom models
    //! check the protocol with `SeqCst` fences in its place; these check
    //! that a normal build really puts the kernel's pair there.

    use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
    use std::time::Duration;

    use super::membarrier;
    use crate::{Guard, ManualClock, Profile};

    /// Heavy barriers run, by any guard of this test binary.
    pub(super) static HEAVY: AtomicUsize = AtomicUsize::new(0);
    /// Of those, the ones the kernel's membarrier served.
    pub(super) static BY_MEMBARRIER: AtomicUsize = AtomicUsize::new(0);

    /// Whether this kernel offers private expedited membarrier
    /// (`MEMBARRIER_CMD_QUERY` lists it), asked without the code under test.
    fn kernel_offers_it() -> bool {
        // SAFETY: the query takes two integers and touches no memory.
        let mask =
            unsafe { libc::syscall(libc::SYS_membarrier, 0 as libc::c_long, 0 as libc::c_long) };
        mask > 0 && mask & (1 << 3) != 0
    }

    #[test]
    fn a_guard_registers_the_process_for_the_pair_where_the_kernel_has_it() {
        let _guard = Guard::builder().clock(ManualClock::new()).build();
        assert_eq!(membarrier::ASYMMETRIC.load(Relaxed), kernel_offers_it());
    }

    #[test]
    fn a_command_the_kernel_refuses_is_no_barrier() {
        // An unknown command is an error return, never taken for a barrier
        // (the heavy side then falls back to a fence).
        assert!(!membarrier::membarrier(1 << 30));
    }

    #[test]
    fn a_stall_runs_the_heavy_barrier_and_the_kernel_serves_it() {
        let clock = ManualClock::new();
        let guard = Guard::builder().clock(clock).build();
        let (heavy, by_kernel) = (HEAVY.load(Relaxed), BY_MEMBARRIER.load(Relaxed));
        let task = guard
            .start(
                "barrier",
                Profile::default().idle(Duration::from_millis(10)),
            )
            .unwrap();
        guard.advance(Duration::from_millis(11));
        assert_ne!(task.status().unwrap().state, crate::TaskState::Working);
        assert!(
            HEAVY.load(Relaxed) > heavy,
            "the stall raised a flag without the barrier"
        );
        if kernel_offers_it() {
            assert!(
                BY_MEMBARRIER.load(Relaxed) > by_kernel,
                "the barrier fell back to a fence"
            );
        }
    }
}
