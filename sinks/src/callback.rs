//! A sink that calls a closure (R6.4).
//!
//! The quickest way to wire the guard into a runner's own code: one closure
//! for events and, optionally, one for cancel and kill actions. The guard
//! contains the closures' panics and reports them through `tracing` (R6.2).

use std::fmt;

use watchdog_core::{Action, Delivery, Event, Sink, SinkError};

type EventFn = Box<dyn Fn(&Event) + Send + Sync + 'static>;
type ActionFn = Box<dyn Fn(&Action) + Send + Sync + 'static>;

/// A sink that hands every event (and, if asked, every action) to a closure.
///
/// Delivery is [`Delivery::Isolated`] by default: the closure runs on a
/// thread of its own, so a closure that blocks or hangs delays neither the
/// guard nor other sinks. Choose [`Delivery::Inline`] with
/// [`CallbackSink::with_delivery`] for a closure that never blocks and must
/// run before the guard call that produced the event returns.
///
/// # Examples
///
/// ```
/// use std::sync::{Arc, Mutex};
/// use std::time::Duration;
/// use stallwarden_sinks::callback::CallbackSink;
/// use watchdog_core::{Delivery, Guard, ManualClock, Profile};
///
/// let seen = Arc::new(Mutex::new(Vec::new()));
/// let log = Arc::clone(&seen);
/// let sink = CallbackSink::new(move |e| log.lock().unwrap().push(e.kind.type_name()))
///     .with_delivery(Delivery::Inline);
/// let guard = Guard::builder().clock(ManualClock::new()).sink(sink).build();
/// guard.start("job", Profile::default()).unwrap().finish_completed();
/// assert_eq!(*seen.lock().unwrap(), ["started", "finished"]);
/// ```
pub struct CallbackSink {
    on_event: EventFn,
    on_action: Option<ActionFn>,
    delivery: Delivery,
    name: String,
}

impl fmt::Debug for CallbackSink {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CallbackSink")
            .field("name", &self.name)
            .field("delivery", &self.delivery)
            .field("on_action", &self.on_action.is_some())
            .finish()
    }
}

impl CallbackSink {
    /// Creates a sink calling `on_event` for every event, isolated.
    ///
    /// # Examples
    ///
    /// ```
    /// use stallwarden_sinks::callback::CallbackSink;
    /// let sink = CallbackSink::new(|e| eprintln!("{}: {}", e.name, e.kind.type_name()));
    /// # let _ = sink;
    /// ```
    pub fn new(on_event: impl Fn(&Event) + Send + Sync + 'static) -> Self {
        CallbackSink {
            on_event: Box::new(on_event),
            on_action: None,
            delivery: Delivery::Isolated,
            name: "callback".into(),
        }
    }

    /// Also calls `on_action` for every cancel and kill action.
    ///
    /// # Examples
    ///
    /// ```
    /// use stallwarden_sinks::callback::CallbackSink;
    /// use watchdog_core::ActionKind;
    ///
    /// let sink = CallbackSink::new(|_| {}).on_action(|a| {
    ///     if let ActionKind::Cancel { reason } = &a.kind {
    ///         eprintln!("stop {}: {reason}", a.name);
    ///     }
    /// });
    /// # let _ = sink;
    /// ```
    #[must_use]
    pub fn on_action(mut self, on_action: impl Fn(&Action) + Send + Sync + 'static) -> Self {
        self.on_action = Some(Box::new(on_action));
        self
    }

    /// Sets how the guard calls the closures (isolated by default).
    ///
    /// # Examples
    ///
    /// ```
    /// use stallwarden_sinks::callback::CallbackSink;
    /// use watchdog_core::{Delivery, Sink};
    /// let sink = CallbackSink::new(|_| {}).with_delivery(Delivery::Inline);
    /// assert_eq!(sink.delivery(), Delivery::Inline);
    /// ```
    #[must_use]
    pub fn with_delivery(mut self, delivery: Delivery) -> Self {
        self.delivery = delivery;
        self
    }

    /// Names the sink in diagnostics (a failing sink is reported by name).
    ///
    /// # Examples
    ///
    /// ```
    /// use stallwarden_sinks::callback::CallbackSink;
    /// use watchdog_core::Sink;
    /// assert_eq!(CallbackSink::new(|_| {}).named("ui").name(), "ui");
    /// ```
    #[must_use]
    pub fn named(mut self, name: impl Into<String>) -> Self {
        self.name = name.into();
        self
    }
}

impl Sink for CallbackSink {
    fn on_event(&self, event: &Event) -> Result<(), SinkError> {
        (self.on_event)(event);
        Ok(())
    }

    fn on_action(&self, action: &Action) -> Result<(), SinkError> {
        if let Some(f) = &self.on_action {
            f(action);
        }
        Ok(())
    }

    fn delivery(&self) -> Delivery {
        self.delivery
    }

    fn name(&self) -> &str {
        &self.name
    }
}
