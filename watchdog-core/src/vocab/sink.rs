//! The sink trait (R6.1): where events and actions go. Every hook has a no-op
//! default so adding one breaks nobody, and `Box`, `Arc`, `Option` and `Vec`
//! of sinks are sinks. Concrete sinks live in the `stallwarden-sinks` crate;
//! this module ships only [`RecordingSink`], for tests.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::{Condvar, Mutex};

use crate::vocab::at_stall::StallReport;
use crate::vocab::clock::{Clock, Nanos};
use crate::vocab::duration::instant_after;
use crate::vocab::event::{Action, Event, TaskId};

/// The error a sink returns when it could not handle an event or action.
///
/// The guard reports it through `tracing` and carries on (R6.2).
///
/// # Examples
///
/// ```
/// use watchdog_core::SinkError;
/// let e = SinkError::new("disk full");
/// assert_eq!(e.to_string(), "disk full");
/// ```
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct SinkError(Box<dyn std::error::Error + Send + Sync>);

impl SinkError {
    /// Wraps any error or message.
    pub fn new(e: impl Into<Box<dyn std::error::Error + Send + Sync>>) -> Self {
        SinkError(e.into())
    }
}

/// How the guard calls a sink.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Delivery {
    /// On a thread of its own with its own queue: a sink that hangs or is
    /// slow delays nobody else (R6.2). The default.
    Isolated,
    /// On the thread that produced the event, in order, before that call
    /// returns. Only for sinks that never block (an in-memory recorder, an
    /// unbounded channel); panics are still caught.
    Inline,
}

/// A destination for a guard's events and actions.
///
/// Hooks are synchronous: recording a signal never awaits, and the guard
/// must deliver cancels even when the host's async runtime is stuck (R6.3).
/// A sink that needs async work (kill, then confirm) spawns it.
///
/// # Examples
///
/// ```
/// use watchdog_core::{Event, Sink, SinkError};
///
/// #[derive(Debug)]
/// struct Printer;
/// impl Sink for Printer {
///     fn on_event(&self, event: &Event) -> Result<(), SinkError> {
///         println!("{} {}", event.name, event.kind.type_name());
///         Ok(())
///     }
/// }
/// ```
pub trait Sink: Send + Sync + 'static {
    /// Receives every event, in order per task.
    fn on_event(&self, event: &Event) -> Result<(), SinkError> {
        let _ = event;
        Ok(())
    }

    /// Receives every cancel and kill action.
    fn on_action(&self, action: &Action) -> Result<(), SinkError> {
        let _ = action;
        Ok(())
    }

    /// Says how the guard should call this sink.
    fn delivery(&self) -> Delivery {
        Delivery::Isolated
    }

    /// A short name for diagnostics.
    fn name(&self) -> &str {
        std::any::type_name::<Self>()
    }
}

impl<S: Sink + ?Sized> Sink for Box<S> {
    fn on_event(&self, event: &Event) -> Result<(), SinkError> {
        (**self).on_event(event)
    }
    fn on_action(&self, action: &Action) -> Result<(), SinkError> {
        (**self).on_action(action)
    }
    fn delivery(&self) -> Delivery {
        (**self).delivery()
    }
    fn name(&self) -> &str {
        (**self).name()
    }
}

impl<S: Sink + ?Sized> Sink for Arc<S> {
    fn on_event(&self, event: &Event) -> Result<(), SinkError> {
        (**self).on_event(event)
    }
    fn on_action(&self, action: &Action) -> Result<(), SinkError> {
        (**self).on_action(action)
    }
    fn delivery(&self) -> Delivery {
        (**self).delivery()
    }
    fn name(&self) -> &str {
        (**self).name()
    }
}

impl<S: Sink> Sink for Option<S> {
    fn on_event(&self, event: &Event) -> Result<(), SinkError> {
        self.as_ref().map_or(Ok(()), |s| s.on_event(event))
    }
    fn on_action(&self, action: &Action) -> Result<(), SinkError> {
        self.as_ref().map_or(Ok(()), |s| s.on_action(action))
    }
    fn delivery(&self) -> Delivery {
        self.as_ref().map_or(Delivery::Inline, Sink::delivery)
    }
    fn name(&self) -> &str {
        self.as_ref().map_or("none", Sink::name)
    }
}

/// A `Vec` of sinks is called in order; the first error is returned after
/// every element has been called, so one failing element hides no other.
impl<S: Sink> Sink for Vec<S> {
    fn on_event(&self, event: &Event) -> Result<(), SinkError> {
        self.iter()
            .map(|s| s.on_event(event))
            .fold(Ok(()), Result::and)
    }
    fn on_action(&self, action: &Action) -> Result<(), SinkError> {
        self.iter()
            .map(|s| s.on_action(action))
            .fold(Ok(()), Result::and)
    }
    fn delivery(&self) -> Delivery {
        if self.iter().all(|s| s.delivery() == Delivery::Inline) {
            Delivery::Inline
        } else {
            Delivery::Isolated
        }
    }
}

/// One thing a [`RecordingSink`] received.
#[derive(Clone, Debug, PartialEq)]
pub enum Delivered {
    /// An event.
    Event(Event),
    /// An action.
    Action(Action),
}

/// A sink that records everything it receives, for asserting on in tests.
///
/// It is delivered inline, so with a virtual clock everything a call to
/// [`Guard::advance`](crate::Guard::advance) produced has arrived when it
/// returns. With a real clock, [`RecordingSink::wait_for`] blocks (with a
/// bound) until an event type shows up.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use watchdog_core::{Guard, ManualClock, Profile, RecordingSink};
///
/// let clock = ManualClock::new();
/// let rec = RecordingSink::new();
/// let guard = Guard::builder().clock(clock.clone()).sink(rec.clone()).build();
/// let task = guard.start("turn", Profile::default().idle(Duration::from_secs(5))).unwrap();
/// guard.advance(Duration::from_secs(5));
/// assert_eq!(rec.types_for("turn"), ["started", "stalled", "cancelling"]);
/// task.finish_completed();
/// rec.assert_settled("turn");
/// ```
///
/// Each delivery is kept with the instant it arrived at, so a test reads
/// when things happened from [`RecordingSink::timeline`] and
/// [`RecordingSink::offsets`] instead of writing its own helper:
///
/// ```
/// use std::time::Duration;
/// use watchdog_core::{Guard, ManualClock, Profile, RecordingSink};
///
/// let rec = RecordingSink::new();
/// let guard = Guard::builder().clock(ManualClock::new()).sink(rec.clone()).build();
/// let p = Profile::default().idle(Duration::from_secs(5)).terminate_after(2);
/// let _task = guard.start("turn", p.heartbeat_interval(None)).unwrap();
/// guard.advance(Duration::from_secs(12)); // one advance over two verdicts
/// let s = Duration::from_secs;
/// assert_eq!(
///     rec.timeline("turn"),
///     [(s(0), "started"), (s(5), "stalled"), (s(10), "stalled"), (s(10), "cancelling")]
/// );
/// assert_eq!(rec.offsets("turn", "stalled"), [s(5), s(10)]);
/// ```
#[derive(Clone, Debug, Default)]
pub struct RecordingSink {
    inner: Arc<Shared>,
}

#[derive(Debug, Default)]
struct Shared {
    /// Every delivery, in order, with the instant it arrived at.
    got: Mutex<Vec<(Nanos, Delivered)>>,
    arrived: Condvar,
    /// The clock that stamps deliveries; without one, the instant an item
    /// was emitted at.
    clock: Option<Arc<dyn Clock>>,
}

impl RecordingSink {
    /// Creates an empty recorder that stamps each delivery with the
    /// instant it was emitted at: an event's `at`, an action's the `at` of
    /// the event of its task it follows (a cancel or kill is emitted right
    /// after its `cancelling` or `killed`).
    pub fn new() -> Self {
        Self::default()
    }

    /// Creates an empty recorder that stamps each delivery with `clock`'s
    /// reading when it arrives; give it the guard's clock, so offsets from
    /// a task's start are on one scale. For an isolated sink or a real
    /// clock, where delivery can trail emission.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use watchdog_core::{Clock, Guard, ManualClock, Profile, RecordingSink};
    ///
    /// let clock = ManualClock::new();
    /// let rec = RecordingSink::with_clock(clock.clone());
    /// let guard = Guard::builder().clock(clock.clone()).sink(rec.clone()).build();
    /// let p = Profile::default().idle(Duration::from_secs(5)).heartbeat_interval(None);
    /// let _task = guard.start("turn", p).unwrap();
    /// guard.advance(Duration::from_secs(8)); // the verdict is due at 5 s
    /// let (at, _) = rec.timed()[1].clone();
    /// assert_eq!(at, clock.now()); // delivered when `advance` took it
    /// assert_eq!(rec.timeline("turn")[1], (Duration::from_secs(8), "stalled"));
    /// ```
    pub fn with_clock(clock: impl Clock) -> Self {
        RecordingSink {
            inner: Arc::new(Shared {
                clock: Some(Arc::new(clock)),
                ..Shared::default()
            }),
        }
    }

    /// Returns everything received, events and actions, in order.
    pub fn delivered(&self) -> Vec<Delivered> {
        self.inner
            .got
            .lock()
            .iter()
            .map(|(_, d)| d.clone())
            .collect()
    }

    /// Returns everything received, in order, each with the instant it
    /// arrived at (see [`RecordingSink::new`] and
    /// [`RecordingSink::with_clock`] for which instant).
    pub fn timed(&self) -> Vec<(Nanos, Delivered)> {
        self.inner.got.lock().clone()
    }

    /// Returns one task's events as a timeline: each event's type with the
    /// offset of its instant from the task's start, in order.
    ///
    /// With [`RecordingSink::new`] the offset is the event's `elapsed`, the
    /// instant the verdict was taken at (R9.3: exactly at the budget in
    /// virtual time); with [`RecordingSink::with_clock`], when it arrived.
    pub fn timeline(&self, name: &str) -> Vec<(Duration, &'static str)> {
        self.inner
            .got
            .lock()
            .iter()
            .filter_map(|(at, d)| match d {
                Delivered::Event(e) if &*e.name == name => {
                    let start = e.at.saturating_sub(e.elapsed);
                    Some((at.saturating_since(start), e.kind.type_name()))
                }
                _ => None,
            })
            .collect()
    }

    /// Returns the offsets from the task's start of one task's events of
    /// type `ty`, in order: the [`RecordingSink::timeline`] of one type.
    pub fn offsets(&self, name: &str, ty: &str) -> Vec<Duration> {
        self.timeline(name)
            .into_iter()
            .filter(|(_, t)| *t == ty)
            .map(|(at, _)| at)
            .collect()
    }

    /// Returns the events received, in order.
    pub fn events(&self) -> Vec<Event> {
        self.inner
            .got
            .lock()
            .iter()
            .filter_map(|(_, d)| match d {
                Delivered::Event(e) => Some(e.clone()),
                Delivered::Action(_) => None,
            })
            .collect()
    }

    /// Returns the actions received, in order.
    pub fn actions(&self) -> Vec<Action> {
        self.inner
            .got
            .lock()
            .iter()
            .filter_map(|(_, d)| match d {
                Delivered::Action(a) => Some(a.clone()),
                Delivered::Event(_) => None,
            })
            .collect()
    }

    /// Returns the `type` names of one task's events, in order.
    pub fn types_for(&self, name: &str) -> Vec<&'static str> {
        self.events()
            .iter()
            .filter(|e| &*e.name == name)
            .map(|e| e.kind.type_name())
            .collect()
    }

    /// Returns one task's events by id, in order.
    pub fn events_of(&self, task: TaskId) -> Vec<Event> {
        self.events()
            .into_iter()
            .filter(|e| e.task == task)
            .collect()
    }

    /// Forgets everything received so far.
    pub fn clear(&self) {
        self.inner.got.lock().clear();
    }

    /// Panics unless the task's events end with exactly one `finished`.
    pub fn assert_settled(&self, name: &str) {
        let types = self.types_for(name);
        let finished = types.iter().filter(|t| **t == "finished").count();
        assert_eq!(
            finished, 1,
            "task {name} has {finished} finished events: {types:?}"
        );
        assert_eq!(
            types.last(),
            Some(&"finished"),
            "task {name}: finished is not last: {types:?}"
        );
    }

    /// Blocks until an event of type `ty` for task `name` arrives, or
    /// `timeout` passes; returns whether it arrived. For real-time tests.
    pub fn wait_for(&self, name: &str, ty: &str, timeout: std::time::Duration) -> bool {
        let deadline = instant_after(timeout);
        let mut got = self.inner.got.lock();
        loop {
            let seen = got.iter().any(|(_, d)| {
                matches!(d, Delivered::Event(e) if &*e.name == name && e.kind.type_name() == ty)
            });
            if seen {
                return true;
            }
            if self
                .inner
                .arrived
                .wait_until(&mut got, deadline)
                .timed_out()
            {
                return false;
            }
        }
    }
}

impl Sink for RecordingSink {
    fn on_event(&self, event: &Event) -> Result<(), SinkError> {
        let at = self.inner.clock.as_ref().map_or(event.at, |c| c.now());
        let mut got = self.inner.got.lock();
        got.push((at, Delivered::Event(event.clone())));
        drop(got);
        self.inner.arrived.notify_all();
        Ok(())
    }

    fn on_action(&self, action: &Action) -> Result<(), SinkError> {
        let mut got = self.inner.got.lock();
        let at = match &self.inner.clock {
            Some(c) => c.now(),
            // The event of its task it was emitted with, just before it.
            None => got
                .iter()
                .rev()
                .find_map(|(at, d)| match d {
                    Delivered::Event(e) if e.task == action.task => Some(*at),
                    _ => None,
                })
                .unwrap_or(Nanos::ZERO),
        };
        got.push((at, Delivered::Action(action.clone())));
        drop(got);
        self.inner.arrived.notify_all();
        Ok(())
    }

    fn delivery(&self) -> Delivery {
        Delivery::Inline
    }

    fn name(&self) -> &str {
        "recording"
    }
}

/// Work a runner does at each stall verdict, before the `stalled` event
/// reaches any sink and so before the stop (R8.14).
///
/// It is called on the thread that delivers events (the guard's driver,
/// or the caller whose operation stalled the task), outside the scheduler
/// lock, after the stall's look at the process tree, with the event (its
/// `children` filled in) and the task's pid. While it runs no event of any
/// task is delivered: it must bound its own time, as the stack taker and
/// the `on-stall` command of `stallwarden-sinks` do. A panic costs the
/// stall its report, never the event.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use watchdog_core::{AtStall, Event, EventKind, Guard, ManualClock, Profile, RecordingSink, StallNote, StallReport};
///
/// #[derive(Debug)]
/// struct Hello;
/// impl AtStall for Hello {
///     fn at_stall(&self, event: &Event, pid: Option<u32>) -> StallReport {
///         let note = StallNote::new("hello", pid, "ok").output(format!("{} stalled", event.name));
///         StallReport { stacks: Vec::new(), on_stall: Some(Box::new(note)) }
///     }
/// }
///
/// let rec = RecordingSink::new();
/// let guard = Guard::builder().clock(ManualClock::new()).at_stall(Hello).sink(rec.clone()).build();
/// let _task = guard.start("job", Profile::default().idle(Duration::from_secs(1))).unwrap();
/// guard.advance(Duration::from_secs(1));
/// let stalled = rec.events().into_iter().find(|e| e.kind.type_name() == "stalled").unwrap();
/// let EventKind::Stalled { on_stall, .. } = &stalled.kind else { unreachable!() };
/// assert_eq!(on_stall.as_ref().unwrap().output, "job stalled");
/// ```
pub trait AtStall: Send + Sync + fmt::Debug + 'static {
    /// Takes what it takes at the stall `event` of the task whose process
    /// is `pid` (absent for a task with no process).
    fn at_stall(&self, event: &Event, pid: Option<u32>) -> StallReport;
}
