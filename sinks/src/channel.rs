//! A sink that streams events to subscribers (R6.4).
//!
//! Each subscriber gets its own unbounded queue, so a slow reader never
//! loses a critical event and never slows the guard; what a reader does not
//! take stays queued until it does or drops its [`Subscription`]. This
//! module holds the sink and the subscription; it does not filter by kind
//! (readers match on [`EventKind`] themselves).

use std::fmt;
use std::sync::Arc;
use std::task::{Context, Poll};

use parking_lot::Mutex;
use tokio::sync::mpsc::{self, error::TryRecvError as MpscTryRecvError};
use watchdog_core::{Delivery, Event, EventKind, Sink, SinkError, TaskId};

use crate::TaskRef;

/// Which task a subscription follows.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Filter {
    All,
    Name(Arc<str>),
    Id(TaskId),
}

impl Filter {
    fn matches(&self, e: &Event) -> bool {
        match self {
            Filter::All => true,
            Filter::Name(n) => *e.name == **n,
            Filter::Id(id) => e.task == *id,
        }
    }
}

struct Subscriber {
    filter: Filter,
    /// For a name filter: the run of the task it latched onto, so a later
    /// task reusing the name is not mixed in.
    latched: Option<TaskId>,
    tx: mpsc::UnboundedSender<Event>,
}

/// A sink that fans every event out to live subscribers.
///
/// Cloning shares the subscriber list, so keep a clone to subscribe after
/// handing the sink to a guard. Delivery is [`Delivery::Inline`]: sending on
/// an unbounded queue never blocks. A subscriber whose [`Subscription`] was
/// dropped is removed at the next event. Subscribers see events, not
/// actions: every cancel and kill action follows a `cancelling` or `killed`
/// event.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use stallwarden_sinks::channel::ChannelSink;
/// use watchdog_core::{Guard, ManualClock, Profile};
///
/// let events = ChannelSink::new();
/// let mut all = events.subscribe();
/// let guard = Guard::builder().clock(ManualClock::new()).sink(events.clone()).build();
/// let task = guard.start("turn", Profile::default().idle(Duration::from_secs(5))).unwrap();
/// guard.advance(Duration::from_secs(5));
/// task.finish_completed();
/// let types: Vec<_> = std::iter::from_fn(|| all.try_recv().ok())
///     .map(|e| e.kind.type_name())
///     .collect();
/// assert_eq!(types, ["started", "stalled", "cancelling", "finished"]);
/// ```
#[derive(Clone, Default)]
pub struct ChannelSink {
    subscribers: Arc<Mutex<Vec<Subscriber>>>,
}

impl fmt::Debug for ChannelSink {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ChannelSink")
            .field("subscribers", &self.subscriber_count())
            .finish()
    }
}

impl ChannelSink {
    /// Creates a sink with no subscribers.
    ///
    /// # Examples
    ///
    /// ```
    /// use stallwarden_sinks::channel::ChannelSink;
    /// assert_eq!(ChannelSink::new().subscriber_count(), 0);
    /// ```
    pub fn new() -> Self {
        Self::default()
    }

    /// Subscribes to the events of every task, from now on.
    ///
    /// # Examples
    ///
    /// ```
    /// use stallwarden_sinks::channel::ChannelSink;
    /// let sink = ChannelSink::new();
    /// let sub = sink.subscribe();
    /// assert_eq!(sink.subscriber_count(), 1);
    /// drop(sub);
    /// ```
    pub fn subscribe(&self) -> Subscription {
        self.add(Filter::All)
    }

    /// Subscribes to one task, by name or by id (a [`TaskRef`]), from now
    /// on; the subscription ends (`recv` returns `None`) after that task's
    /// `finished` event.
    ///
    /// By name, it follows one run: it latches onto the first task of that
    /// name it sees (the live one, or the next to start), so a later task
    /// reusing the name is not mixed in.
    ///
    /// # Examples
    ///
    /// ```
    /// use stallwarden_sinks::channel::ChannelSink;
    /// use watchdog_core::{Guard, ManualClock, Profile};
    ///
    /// let sink = ChannelSink::new();
    /// let mut build = sink.subscribe_task("build");
    /// let guard = Guard::builder().clock(ManualClock::new()).sink(sink.clone()).build();
    /// guard.start("test", Profile::default()).unwrap().finish_completed();
    /// let task = guard.start("build", Profile::default()).unwrap();
    /// let mut by_id = sink.subscribe_task(task.id());
    /// task.finish_completed();
    /// assert_eq!(build.try_recv().unwrap().kind.type_name(), "started");
    /// assert_eq!(build.try_recv().unwrap().kind.type_name(), "finished");
    /// assert!(build.try_recv().unwrap_err().is_closed());
    /// assert_eq!(by_id.try_recv().unwrap().kind.type_name(), "finished");
    /// ```
    pub fn subscribe_task(&self, task: impl Into<TaskRef>) -> Subscription {
        self.add(match task.into() {
            TaskRef::Name(name) => Filter::Name(name),
            TaskRef::Id(id) => Filter::Id(id),
        })
    }

    /// Returns how many subscribers are registered; dropped ones count until
    /// the next event removes them.
    pub fn subscriber_count(&self) -> usize {
        self.subscribers.lock().len()
    }

    fn add(&self, filter: Filter) -> Subscription {
        let (tx, rx) = mpsc::unbounded_channel();
        self.subscribers.lock().push(Subscriber {
            filter,
            latched: None,
            tx,
        });
        Subscription { rx }
    }
}

impl Sink for ChannelSink {
    fn on_event(&self, event: &Event) -> Result<(), SinkError> {
        let finished = matches!(event.kind, EventKind::Finished { .. });
        self.subscribers.lock().retain_mut(|s| {
            if s.tx.is_closed() {
                return false;
            }
            if !s.filter.matches(event) {
                return true;
            }
            match s.latched {
                Some(id) if id != event.task => return true,
                Some(_) => {}
                None if matches!(s.filter, Filter::Name(_)) => s.latched = Some(event.task),
                None => {}
            }
            // A send fails only when the receiver is gone: drop it.
            let alive = s.tx.send(event.clone()).is_ok();
            // A task subscription ends with its task (R3.8: nothing follows).
            alive && !(finished && s.filter != Filter::All)
        });
        Ok(())
    }

    fn delivery(&self) -> Delivery {
        Delivery::Inline
    }

    fn name(&self) -> &str {
        "channel"
    }
}

/// The reason [`Subscription::try_recv`] returned no event.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum TryRecvError {
    /// Nothing is queued right now.
    #[error("no event queued")]
    Empty,
    /// Nothing will come any more: the task finished, or the sink is gone.
    #[error("subscription closed")]
    Closed,
}

impl TryRecvError {
    /// Returns true when no event will ever come.
    pub fn is_closed(self) -> bool {
        self == TryRecvError::Closed
    }
}

/// A stream of events from a [`ChannelSink`]; dropping it unsubscribes.
///
/// Use it from async code with [`Subscription::recv`], from blocking code
/// with [`Subscription::try_recv`] or [`Subscription::blocking_recv`].
///
/// # Examples
///
/// ```
/// use stallwarden_sinks::channel::ChannelSink;
/// use watchdog_core::{Guard, ManualClock, Profile};
///
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// let sink = ChannelSink::new();
/// let mut job = sink.subscribe_task("job");
/// let guard = Guard::builder().clock(ManualClock::new()).sink(sink.clone()).build();
/// guard.start("job", Profile::default()).unwrap().finish_completed();
/// while let Some(event) = job.recv().await {
///     println!("{}: {}", event.name, event.kind.type_name());
/// }
/// # });
/// ```
#[derive(Debug)]
pub struct Subscription {
    rx: mpsc::UnboundedReceiver<Event>,
}

impl Subscription {
    /// Waits for the next event; `None` once the subscription has ended and
    /// everything queued was taken.
    ///
    /// Cancel safe: if the future is dropped before it completes, no event
    /// is lost.
    pub async fn recv(&mut self) -> Option<Event> {
        self.rx.recv().await
    }

    /// Takes the next queued event without waiting.
    pub fn try_recv(&mut self) -> Result<Event, TryRecvError> {
        self.rx.try_recv().map_err(|e| match e {
            MpscTryRecvError::Empty => TryRecvError::Empty,
            MpscTryRecvError::Disconnected => TryRecvError::Closed,
        })
    }

    /// Blocks the thread until the next event; `None` once ended.
    ///
    /// # Panics
    ///
    /// Panics when called from inside an async runtime (use
    /// [`Subscription::recv`] there), as tokio's `blocking_recv` does.
    pub fn blocking_recv(&mut self) -> Option<Event> {
        self.rx.blocking_recv()
    }

    /// Polls for the next event, for hand-written futures and streams.
    pub fn poll_recv(&mut self, cx: &mut Context<'_>) -> Poll<Option<Event>> {
        self.rx.poll_recv(cx)
    }

    /// Takes everything queued now, without waiting.
    pub fn drain(&mut self) -> Vec<Event> {
        std::iter::from_fn(|| self.rx.try_recv().ok()).collect()
    }
}
