//! Building a [`MonitorSink`]: its delivery, clock, limits and settings,
//! each checked against its range (R6.6).

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::{Condvar, Mutex};
use watchdog_core::{Clock, Delivery};

use super::poller::{spawn_poller, Ticker};
use super::runner::{Core, Factory, Limits, Store};
use super::sink::{MonitorSink, Shared, Tasks};
use super::state::MonitorSettings;

/// A monitor setting out of its range.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use stallwarden_sinks::monitor::MonitorSink;
///
/// let err = MonitorSink::rule_based().update_interval(Duration::from_millis(500)).build().unwrap_err();
/// assert_eq!(err.to_string(), "monitor setting `update-interval` must be 2s..=1h, got 500ms");
/// ```
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("monitor setting `{setting}` must be {expected}, got {got}")]
pub struct MonitorConfigError {
    /// The setting's name.
    pub setting: &'static str,
    /// The allowed range.
    pub expected: &'static str,
    /// The value given.
    pub got: String,
}

/// Builds a [`MonitorSink`].
///
/// # Examples
///
/// ```
/// use stallwarden_sinks::monitor::{MonitorSink, RuleMonitor};
/// use watchdog_core::Delivery;
///
/// let sink = MonitorSink::builder(|_brief| Box::new(RuleMonitor::new()))
///     .with_delivery(Delivery::Isolated)
///     .build()
///     .unwrap();
/// assert_eq!(sink.drain_observations().len(), 0);
/// ```
#[must_use]
pub struct MonitorSinkBuilder {
    pub(super) factory: Arc<Factory>,
    pub(super) delivery: Delivery,
    pub(super) clock: Option<Arc<dyn Clock>>,
    pub(super) settings: MonitorSettings,
    pub(super) poll_interval: Option<Duration>,
    pub(super) limits: Limits,
}

impl fmt::Debug for MonitorSinkBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MonitorSinkBuilder")
            .field("delivery", &self.delivery)
            .field("clock", &self.clock)
            .field("settings", &self.settings)
            .field("poll_interval", &self.poll_interval)
            .field("limits", &self.limits)
            .finish_non_exhaustive()
    }
}

impl MonitorSinkBuilder {
    /// `Isolated` (the default): the guard delivers events on the sink's own
    /// thread and each monitor's agent runs on a thread of its own, so a slow
    /// or hung agent delays nothing. `Inline`: events are handled and agents
    /// called synchronously on the delivering thread — deterministic, for
    /// tests and for agents that never block.
    ///
    /// Every sink spells this setting `with_delivery` (R10.6): on a sink
    /// configured by chaining, a setter named `delivery` would hide the
    /// [`Sink::delivery`](watchdog_core::Sink::delivery) getter.
    pub fn with_delivery(mut self, delivery: Delivery) -> Self {
        self.delivery = delivery;
        self
    }

    /// Reads "now" for [`MonitorSink::poll`] from `clock` (share the guard's
    /// clock). A virtual clock ([`watchdog_core::ManualClock`]) also turns the
    /// background poller off: the test polls. Without a clock, "now" is the
    /// latest event's instant plus the real time since it arrived.
    pub fn clock(mut self, clock: impl Clock) -> Self {
        self.clock = Some(Arc::new(clock));
        self
    }

    /// Sets the least time between two messages to one monitor (default and
    /// minimum 2 s, R6.6).
    pub fn update_interval(mut self, d: Duration) -> Self {
        self.settings.update_interval = d;
        self
    }

    /// Sets the most output bytes in one message (default 4096).
    pub fn max_output_bytes(mut self, n: usize) -> Self {
        self.settings.max_output_bytes = n;
        self
    }

    /// Sets how often the background poller looks for new output while a
    /// monitor is open (default 500 ms); `None` disables it, leaving updates
    /// to guard events and explicit [`MonitorSink::poll`] calls.
    pub fn poll_interval(mut self, d: Option<Duration>) -> Self {
        self.poll_interval = d;
        self
    }

    /// Sets the most characters kept of one observation (default 600).
    pub fn max_observation_chars(mut self, n: usize) -> Self {
        self.limits.observation_chars = n;
        self
    }

    /// Checks the settings and builds the sink (starting its poller thread
    /// unless the clock is virtual or polling is off).
    pub fn build(self) -> Result<MonitorSink, MonitorConfigError> {
        let s = &self.settings;
        let bad = |setting, expected, got: String| MonitorConfigError {
            setting,
            expected,
            got,
        };
        let dur = |d: Duration| humantime::format_duration(d).to_string();
        if !(Duration::from_secs(2)..=Duration::from_secs(3600)).contains(&s.update_interval) {
            return Err(bad("update-interval", "2s..=1h", dur(s.update_interval)));
        }
        if !(256..=1 << 20).contains(&s.max_output_bytes) {
            return Err(bad(
                "max-output-bytes",
                "256..=1048576",
                s.max_output_bytes.to_string(),
            ));
        }
        if let Some(p) = self.poll_interval {
            if !(Duration::from_millis(10)..=s.update_interval).contains(&p) {
                return Err(bad("poll-interval", "10ms..=update-interval", dur(p)));
            }
        }
        if !(80..=100_000).contains(&self.limits.observation_chars) {
            return Err(bad(
                "max-observation-chars",
                "80..=100000",
                self.limits.observation_chars.to_string(),
            ));
        }
        let virtual_clock = self.clock.as_ref().is_some_and(|c| c.is_virtual());
        let ticker = Arc::new(Ticker::default());
        let shared = Arc::new(Shared {
            core: Arc::new(Core {
                factory: self.factory,
                store: Mutex::new(Store::default()),
                pending: Mutex::new(0),
                idle: Condvar::new(),
                limits: self.limits,
            }),
            delivery: self.delivery,
            clock: self.clock,
            settings: self.settings,
            tasks: Mutex::new(Tasks::default()),
            ticker: Arc::clone(&ticker),
        });
        if let (Some(interval), false) = (self.poll_interval, virtual_clock) {
            let shared = Arc::downgrade(&shared);
            // The poller holds the sink only weakly: once the sink is
            // dropped it finds nothing to poll and stops.
            let poll = move || {
                let shared = shared.upgrade()?;
                Some(shared.now().is_some_and(|now| shared.poll_at(now)))
            };
            spawn_poller(poll, ticker, interval);
        }
        Ok(MonitorSink { shared })
    }
}
