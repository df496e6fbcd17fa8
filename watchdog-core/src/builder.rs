//! Building a guard, and starting the threads it needs: the driver on a
//! real clock, one per isolated sink. A thread that cannot start is an
//! error to the caller, never a guard that silently judges nothing or a
//! sink queue that grows forever (R10.5).

use std::any::Any;
use std::fmt;
use std::io;
use std::sync::Arc;

use crate::at_stall::AtStall;
use crate::clock::{Clock, LaggingClock, ManualClock, MonotonicClock};
use crate::dispatch::Dispatcher;
use crate::error::GuardError;
use crate::guard::{Guard, Inner};
use crate::sink::Sink;

/// Called with a thread's name before the guard starts it; an error stands
/// for the spawn's own (see [`GuardBuilder::spawn_gate`]).
pub(crate) type SpawnGate = fn(&str) -> io::Result<()>;

/// Starts a thread named `name` with `spawn`, after asking `gate`; either
/// one's error becomes [`GuardError::Thread`].
pub(crate) fn spawn_checked<T>(
    gate: Option<SpawnGate>,
    name: &str,
    spawn: impl FnOnce() -> io::Result<T>,
) -> Result<T, GuardError> {
    gate.map_or(Ok(()), |gate| gate(name))
        .and_then(|()| spawn())
        .map_err(|e| GuardError::Thread {
            thread: name.to_owned(),
            reason: e.to_string(),
        })
}

/// Builds a [`Guard`].
///
/// # Examples
///
/// ```
/// use watchdog_core::{Guard, ManualClock, RecordingSink};
///
/// let guard = Guard::builder()
///     .clock(ManualClock::new())
///     .sink(RecordingSink::new())
///     .try_build()
///     .expect("no thread to start on a virtual clock with an inline sink");
/// assert!(!guard.is_busy());
/// ```
#[must_use]
pub struct GuardBuilder {
    clock: Arc<dyn Clock>,
    manual: Option<ManualClock>,
    fast_clock: Option<MonotonicClock>,
    sinks: Vec<Arc<dyn Sink>>,
    at_stall: Vec<Arc<dyn AtStall>>,
    gate: Option<SpawnGate>,
}

impl fmt::Debug for GuardBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GuardBuilder")
            .field("clock", &self.clock)
            .field("sinks", &self.sinks.len())
            .finish()
    }
}

impl GuardBuilder {
    /// A builder on the real clock with no sinks; see [`Guard::builder`].
    pub(crate) fn new() -> Self {
        let clock = MonotonicClock::new();
        GuardBuilder {
            clock: Arc::new(clock.clone()),
            fast_clock: Some(clock),
            manual: None,
            sinks: Vec::new(),
            at_stall: Vec::new(),
            gate: None,
        }
    }

    /// Uses `clock` instead of the real monotonic clock.
    ///
    /// A [`ManualClock`] or a [`LaggingClock`] makes the guard virtual: no
    /// driver thread, time moves with [`Guard::advance`].
    pub fn clock<C: Clock + Any>(mut self, clock: C) -> Self {
        let any = &clock as &dyn Any;
        self.manual = any.downcast_ref::<ManualClock>().cloned().or_else(|| {
            any.downcast_ref::<LaggingClock>()
                .map(|c| c.manual().clone())
        });
        self.fast_clock = (&clock as &dyn Any)
            .downcast_ref::<MonotonicClock>()
            .cloned();
        self.clock = Arc::new(clock);
        self
    }

    /// Adds a sink. Sinks are called in the order added.
    pub fn sink(mut self, sink: impl Sink) -> Self {
        self.sinks.push(Arc::new(sink));
        self
    }

    /// Adds a step taken at each stall verdict before its `stalled` event
    /// reaches any sink, and so before the stop (R8.14): its stacks and
    /// `on-stall` run go into the event. Steps run in the order added, on
    /// the thread that delivers events; each must bound its own time. See
    /// [`AtStall`] for an example.
    pub fn at_stall(mut self, step: impl AtStall) -> Self {
        self.at_stall.push(Arc::new(step));
        self
    }

    /// Adds a shared sink.
    pub fn shared_sink(mut self, sink: Arc<dyn Sink>) -> Self {
        self.sinks.push(sink);
        self
    }

    /// For tests of failure: `gate` is called with the name of every
    /// thread the guard is about to start (`stallwarden-driver`,
    /// `stallwarden-sink-NAME`), and an error from it is taken as that
    /// spawn's own.
    #[doc(hidden)]
    pub fn spawn_gate(mut self, gate: fn(&str) -> io::Result<()>) -> Self {
        self.gate = Some(gate);
        self
    }

    /// Builds the guard and starts its threads: the driver on a real
    /// clock, one per isolated sink ([`crate::Delivery::Isolated`]).
    ///
    /// Fails with [`GuardError::Thread`] when one of them cannot start:
    /// a guard without its driver would never take a verdict, and a sink
    /// without its thread would queue events forever (R10.5). Whatever had
    /// started by then is stopped.
    ///
    /// # Examples
    ///
    /// ```
    /// use watchdog_core::{Guard, GuardError};
    ///
    /// match Guard::builder().try_build() {
    ///     Ok(guard) => assert!(!guard.is_busy()),
    ///     Err(GuardError::Thread { thread, reason }) => {
    ///         eprintln!("no watchdog: could not start {thread}: {reason}")
    ///     }
    ///     Err(e) => unreachable!("{e}"),
    /// }
    /// ```
    pub fn try_build(self) -> Result<Guard, GuardError> {
        let mut dispatch = Dispatcher::new(self.sinks, self.gate)?;
        dispatch.at_stall = self.at_stall;
        Inner::start(
            self.clock,
            self.fast_clock,
            self.manual,
            dispatch,
            self.gate,
        )
    }

    /// Builds the guard and starts its threads, as [`GuardBuilder::try_build`].
    ///
    /// # Panics
    ///
    /// Panics, naming the thread and the system's reason, if a thread the
    /// guard needs cannot start, as [`std::thread::spawn`] does: a guard
    /// that cannot watch is not returned. Use
    /// [`GuardBuilder::try_build`] to handle that instead.
    ///
    /// # Examples
    ///
    /// ```
    /// use watchdog_core::{Guard, ManualClock, RecordingSink};
    ///
    /// let guard = Guard::builder()
    ///     .clock(ManualClock::new())
    ///     .sink(RecordingSink::new())
    ///     .build();
    /// assert!(!guard.is_busy());
    /// ```
    pub fn build(self) -> Guard {
        match self.try_build() {
            Ok(guard) => guard,
            Err(e) => panic!("stallwarden: {e}"),
        }
    }
}
