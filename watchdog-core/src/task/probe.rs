//! What a task knows of its process tree: the [`ChildProbe`] a runner
//! attaches, read cached for status and fresh for a stall (R8.13, R3.1).

use crate::event::ChildInfo;

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
