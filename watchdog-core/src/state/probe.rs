//! What a task knows of its process tree: the [`ChildProbe`] a runner
//! attaches, read cached for status and fresh for a stall (R8.13, R3.1).

use crate::vocab::event::ChildInfo;

/// Reads a cached sample of a watched process's descendants.
///
/// Implementations of [`ChildProbe::children`] must return what they
/// already have: the guard calls it on the request path (status), where
/// reading a process table is not allowed (R4.2, R5.5). `None` means
/// unknown. A stall asks [`ChildProbe::verdict_children`] instead.
///
/// # Examples
///
/// ```
/// use watchdog_core::{ChildInfo, ChildProbe};
///
/// #[derive(Debug)]
/// struct NoChildren;
/// impl ChildProbe for NoChildren {
///     fn children(&self) -> Option<Vec<ChildInfo>> { Some(Vec::new()) }
/// }
/// assert_eq!(NoChildren.children(), Some(vec![]));
/// ```
pub trait ChildProbe: Send + Sync + std::fmt::Debug + 'static {
    /// Returns the last sample, eldest first, or `None` when unknown.
    fn children(&self) -> Option<Vec<ChildInfo>>;

    /// Returns a fresh look at the watched process and its descendants for
    /// a verdict (R8.13, R3.1): the process itself first, then its
    /// descendants, each with what it is blocked on. Called once per stall,
    /// after the verdict and before any sink sees the `stalled` event, on
    /// the thread that delivers events (the driver, or the caller whose
    /// operation stalled the task), never under the guard's scheduler lock:
    /// it may read the process table, and may call back into the guard
    /// (`status`, a recorder) without deadlock. The default is the cached
    /// [`ChildProbe::children`].
    fn verdict_children(&self) -> Option<Vec<ChildInfo>> {
        self.children()
    }
}

/// A look a runner takes just before a task's timer is judged (R3.10,
/// R8.16): progress that happened before the verdict but that the
/// runner's own threads have not recorded yet (bytes waiting in a pipe it
/// has not read, a write of the task's output its own reader holds up) is
/// recorded here, so it counts.
///
/// [`VerdictLook::before_verdict`] is called on the thread that takes the
/// verdicts (the driver, or the caller of `Guard::tick`), outside the
/// guard's scheduler lock, once per due instant of the task's timer, just
/// before that instant is judged; it may record through the task's
/// [`Recorder`](crate::Recorder). A look after a long gap (the process was
/// stopped or starved past the budget) is what keeps the gap from being
/// counted as the task's silence. It must be quick: every task's verdict
/// waits for it.
///
/// # Examples
///
/// ```
/// use std::sync::Arc;
/// use std::time::Duration;
/// use watchdog_core::{Guard, ManualClock, Profile, Recorder, VerdictLook};
///
/// /// Bytes a reader thread has yet to pass on count as output.
/// #[derive(Debug)]
/// struct Pending(Recorder);
/// impl VerdictLook for Pending {
///     fn before_verdict(&self) {
///         self.0.signal(watchdog_core::SignalKind::Output);
///     }
/// }
///
/// let guard = Guard::builder().clock(ManualClock::new()).build();
/// let task = guard.start("cmd", Profile::default().idle(Duration::from_secs(2))).unwrap();
/// task.recorder().set_verdict_look(Arc::new(Pending(task.recorder())));
/// guard.advance(Duration::from_secs(10));
/// assert_eq!(task.status().unwrap().stall_count, 0);
/// ```
pub trait VerdictLook: Send + Sync + std::fmt::Debug + 'static {
    /// Records what happened before now and is not recorded yet.
    fn before_verdict(&self);
}
