//! The monitor sink: runs a [`MonitorState`] per registered task on the
//! guard's events, calls the runner's [`MonitorAgent`]s, and keeps what they
//! say as [`Observation`]s. Agents run on a thread per monitor (or inline, for
//! tests); their errors and panics become observations, never task faults.

use std::collections::{HashMap, VecDeque};
use std::fmt;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::PathBuf;
use std::sync::mpsc;
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};
use watchdog_core::{Clock, Delivery, Event, EventKind, Nanos, Sink, SinkError, TaskId};

use super::state::{MonitorSettings, MonitorState};
use super::{
    MonitorAgent, MonitorBrief, MonitorCall, Observation, ObservationKind, OutputTail, RuleMonitor,
};

/// Builds the agent for one monitor from its brief (to pick a model per
/// command, say).
type Factory = dyn Fn(&MonitorBrief) -> Box<dyn MonitorAgent> + Send + Sync;

/// What the runner tells the monitor about one task: the command, where it
/// runs, and where its output tail comes from.
///
/// # Examples
///
/// ```
/// use stallguard_sinks::monitor::MonitorTarget;
/// let target = MonitorTarget::new("cargo build", || b"Compiling\n".to_vec()).cwd("/src/app");
/// assert_eq!(target.command(), "cargo build");
/// ```
#[derive(Clone)]
pub struct MonitorTarget {
    command: String,
    cwd: Option<PathBuf>,
    tail: Arc<dyn OutputTail>,
}

impl MonitorTarget {
    /// Describes a task running `command` whose output `tail` returns.
    pub fn new(command: impl Into<String>, tail: impl OutputTail + 'static) -> Self {
        MonitorTarget {
            command: command.into(),
            cwd: None,
            tail: Arc::new(tail),
        }
    }

    /// Sets the working directory shown in the brief.
    #[must_use]
    pub fn cwd(mut self, dir: impl Into<PathBuf>) -> Self {
        self.cwd = Some(dir.into());
        self
    }

    /// Returns the command.
    pub fn command(&self) -> &str {
        &self.command
    }
}

impl fmt::Debug for MonitorTarget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MonitorTarget")
            .field("command", &self.command)
            .field("cwd", &self.cwd)
            .finish_non_exhaustive()
    }
}

/// A monitor setting out of its range.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use stallguard_sinks::monitor::MonitorSink;
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
/// use stallguard_sinks::monitor::{MonitorSink, RuleMonitor};
/// use watchdog_core::Delivery;
///
/// let sink = MonitorSink::builder(|_brief| Box::new(RuleMonitor::new()))
///     .delivery(Delivery::Isolated)
///     .build()
///     .unwrap();
/// assert_eq!(sink.drain_observations().len(), 0);
/// ```
#[must_use]
pub struct MonitorSinkBuilder {
    factory: Arc<Factory>,
    delivery: Delivery,
    clock: Option<Arc<dyn Clock>>,
    settings: MonitorSettings,
    poll_interval: Option<Duration>,
    limits: Limits,
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

#[derive(Clone, Copy, Debug)]
struct Limits {
    observation_chars: usize,
    per_task: usize,
    tasks: usize,
    unread: usize,
}

impl MonitorSinkBuilder {
    /// `Isolated` (the default): the guard delivers events on the sink's own
    /// thread and each monitor's agent runs on a thread of its own, so a slow
    /// or hung agent delays nothing. `Inline`: events are handled and agents
    /// called synchronously on the delivering thread — deterministic, for
    /// tests and for agents that never block.
    pub fn delivery(mut self, delivery: Delivery) -> Self {
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
            spawn_poller(Arc::downgrade(&shared), ticker, interval);
        }
        Ok(MonitorSink { shared })
    }
}

/// A sink that opens one side-agent monitor per long-running task (R6.6).
///
/// Register each task to watch with [`MonitorSink::watch`] (command, working
/// directory, output tail) and give it a profile with `long-running-after`
/// (see [`super::monitored`]). At its `long_running` event one monitor opens
/// — never two — with a [`MonitorBrief`]; updates follow no more often than
/// every 2 s and only when output or state changed; at `finished` a final
/// update. Tasks not registered are ignored. Every byte of output is cleaned
/// and redacted before an agent sees it.
///
/// What agents say is kept per task after the task ends
/// ([`MonitorSink::observations`]) and queued for the main agent
/// ([`MonitorSink::drain_observations`]). An agent that errors or panics is
/// reported there and monitoring of that task stops; the task never notices.
///
/// Updates need a notion of "now" between events, because flowing output
/// produces no guard events: a background poller (default every 500 ms)
/// drives them on a real clock; on a virtual clock call
/// [`MonitorSink::poll`].
///
/// Clones share one sink: give one to the guard, keep one to read.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use stallguard_sinks::monitor::{monitored, MonitorSink, MonitorTarget};
/// use watchdog_core::{Delivery, Guard, ManualClock, Profile};
///
/// let clock = ManualClock::new();
/// let monitor = MonitorSink::rule_based().delivery(Delivery::Inline).clock(clock.clone()).build().unwrap();
/// let guard = Guard::builder().clock(clock).sink(monitor.clone()).build();
/// let task = guard.start("sleep", monitored(Profile::default())).unwrap();
/// monitor.watch(task.id(), MonitorTarget::new("sleep 10", Vec::new));
/// guard.advance(Duration::from_secs(3));
/// assert!(monitor.is_open(task.id()));
/// task.finish_completed();
/// assert!(!monitor.is_open(task.id()));
/// assert!(monitor.observations(task.id())[0].to_string().starts_with("monitor update for task sleep at 00:03:"));
/// ```
#[derive(Clone)]
pub struct MonitorSink {
    shared: Arc<Shared>,
}

impl fmt::Debug for MonitorSink {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let t = self.shared.tasks.lock();
        f.debug_struct("MonitorSink")
            .field("delivery", &self.shared.delivery)
            .field("watched", &t.watched.len())
            .field(
                "open",
                &t.watched.values().filter(|w| w.state.is_open()).count(),
            )
            .field("pending_calls", &*self.shared.core.pending.lock())
            .finish()
    }
}

impl MonitorSink {
    /// Starts building a sink whose monitors are made by `factory`.
    pub fn builder(
        factory: impl Fn(&MonitorBrief) -> Box<dyn MonitorAgent> + Send + Sync + 'static,
    ) -> MonitorSinkBuilder {
        MonitorSinkBuilder {
            factory: Arc::new(factory),
            delivery: Delivery::Isolated,
            clock: None,
            settings: MonitorSettings::default(),
            poll_interval: Some(Duration::from_millis(500)),
            limits: Limits {
                observation_chars: 600,
                per_task: 64,
                tasks: 256,
                unread: 1024,
            },
        }
    }

    /// Starts building a sink whose monitors are [`RuleMonitor`]s.
    pub fn rule_based() -> MonitorSinkBuilder {
        Self::builder(|_| Box::new(RuleMonitor::new()))
    }

    /// Registers a task to monitor if it runs long. Registering a task again
    /// before its monitor opens replaces the target; after, it is ignored
    /// (one monitor per task), and so is a task that already finished.
    pub fn watch(&self, task: TaskId, target: MonitorTarget) {
        let mut t = self.shared.tasks.lock();
        if t.finished.contains(&task) {
            return;
        }
        if t.watched.get(&task).is_none_or(|w| !w.state.is_open()) {
            let state = MonitorState::new(target.command, target.cwd, self.shared.settings.clone());
            t.watched.insert(
                task,
                Watched {
                    state,
                    tail: target.tail,
                    runner: None,
                },
            );
        }
    }

    /// Returns true while a monitor is open for `task`.
    pub fn is_open(&self, task: TaskId) -> bool {
        self.shared
            .tasks
            .lock()
            .watched
            .get(&task)
            .is_some_and(|w| w.state.is_open())
    }

    /// Sends due updates, reading "now" from the sink's clock (or from the
    /// latest event plus real time since). Returns whether a monitor is open.
    pub fn poll(&self) -> bool {
        match self.shared.now() {
            Some(now) => self.poll_at(now),
            None => false,
        }
    }

    /// Sends the updates due at `now` (an instant on the guard's clock).
    /// Returns whether a monitor is open.
    pub fn poll_at(&self, now: Nanos) -> bool {
        self.shared.poll_at(now)
    }

    /// Returns every observation kept for `task`, oldest first, whether or
    /// not it was drained; kept after the task ends (the last 64 per task,
    /// for the last 256 tasks).
    pub fn observations(&self, task: TaskId) -> Vec<Observation> {
        self.shared
            .core
            .store
            .lock()
            .by_task
            .get(&task)
            .map(|q| q.iter().cloned().collect())
            .unwrap_or_default()
    }

    /// Takes the observations not yet drained, oldest first, across tasks:
    /// what to append to the main agent's context.
    pub fn drain_observations(&self) -> Vec<Observation> {
        self.shared.core.store.lock().unread.drain(..).collect()
    }

    /// Waits until every agent call made so far has returned, or `timeout`
    /// passes; false if some agent is still busy. Call it (after
    /// [`watchdog_core::Guard::flush`]) to have the final summary before
    /// handing the command's result to the main agent.
    pub fn flush(&self, timeout: Duration) -> bool {
        let deadline = watchdog_core::instant_after(timeout);
        let core = &self.shared.core;
        let mut pending = core.pending.lock();
        while *pending > 0 {
            if core.idle.wait_until(&mut pending, deadline).timed_out() {
                return *pending == 0;
            }
        }
        true
    }
}

impl Sink for MonitorSink {
    fn on_event(&self, event: &Event) -> Result<(), SinkError> {
        self.shared.on_event(event);
        Ok(())
    }

    fn delivery(&self) -> Delivery {
        self.shared.delivery
    }

    fn name(&self) -> &str {
        "monitor"
    }
}

struct Shared {
    core: Arc<Core>,
    delivery: Delivery,
    clock: Option<Arc<dyn Clock>>,
    settings: MonitorSettings,
    tasks: Mutex<Tasks>,
    ticker: Arc<Ticker>,
}

impl Drop for Shared {
    fn drop(&mut self) {
        self.ticker.state.lock().stop = true;
        self.ticker.cv.notify_all();
    }
}

#[derive(Default)]
struct Tasks {
    watched: HashMap<TaskId, Watched>,
    /// The latest event's instant and the real time it arrived, for "now"
    /// without a clock.
    anchor: Option<(Nanos, Instant)>,
    /// Recently finished tasks, so a late `watch` does not leave an entry
    /// that no `finished` will ever remove.
    finished: VecDeque<TaskId>,
}

/// How many finished task ids `Tasks::finished` remembers.
const FINISHED_KEPT: usize = 1024;

struct Watched {
    state: MonitorState,
    tail: Arc<dyn OutputTail>,
    runner: Option<Runner>,
}

enum Runner {
    Inline(AgentSlot),
    Worker(mpsc::Sender<MonitorCall>),
}

impl Shared {
    fn now(&self) -> Option<Nanos> {
        if let Some(c) = &self.clock {
            return Some(c.now());
        }
        let (at, when) = self.tasks.lock().anchor?;
        Some(at + when.elapsed())
    }

    fn on_event(&self, event: &Event) {
        let opened = {
            let mut t = self.tasks.lock();
            t.anchor = Some((event.at, Instant::now()));
            if matches!(event.kind, EventKind::Finished { .. }) {
                t.finished.push_back(event.task);
                if t.finished.len() > FINISHED_KEPT {
                    t.finished.pop_front();
                }
            }
            let Some(w) = t.watched.get_mut(&event.task) else {
                return;
            };
            let calls = w.state.on_event(event, &*w.tail);
            let opened = calls.iter().any(|c| matches!(c, MonitorCall::Open(_)));
            for call in calls {
                self.dispatch(w, call);
            }
            if matches!(event.kind, EventKind::Finished { .. }) {
                // Dropping the runner closes a worker's queue: it finishes
                // what is queued and exits.
                t.watched.remove(&event.task);
            }
            opened
        };
        if opened {
            let mut tick = self.ticker.state.lock();
            tick.wake = true;
            self.ticker.cv.notify_all();
        }
    }

    fn poll_at(&self, now: Nanos) -> bool {
        let mut t = self.tasks.lock();
        let mut open = false;
        for w in t.watched.values_mut() {
            if let Some(call) = w.state.poll(now, &*w.tail) {
                self.dispatch(w, call);
            }
            open |= w.state.is_open();
        }
        open
    }

    /// Hands one call to the task's agent. Called with the tasks lock held,
    /// which keeps each monitor's calls in order across the event and poll
    /// paths; a worker send never blocks.
    fn dispatch(&self, w: &mut Watched, call: MonitorCall) {
        if let MonitorCall::Open(brief) = &call {
            w.runner = match self.delivery {
                Delivery::Inline => Some(Runner::Inline(AgentSlot::default())),
                Delivery::Isolated => self.spawn_worker(brief),
            };
        }
        match &mut w.runner {
            Some(Runner::Inline(slot)) => run_call(&self.core, slot, &call),
            Some(Runner::Worker(tx)) => {
                *self.core.pending.lock() += 1;
                if tx.send(call).is_err() {
                    self.core.done(1);
                }
            }
            None => {}
        }
    }

    fn spawn_worker(&self, brief: &MonitorBrief) -> Option<Runner> {
        let (tx, rx) = mpsc::channel();
        let core = Arc::clone(&self.core);
        let spawned = std::thread::Builder::new()
            .name(format!("stallguard-monitor-{}", brief.task.as_raw()))
            .spawn(move || worker(&core, &rx));
        match spawned {
            Ok(_) => Some(Runner::Worker(tx)),
            Err(e) => {
                tracing::error!(task = %brief.name, error = %e, "could not start a monitor thread");
                self.core.record(
                    brief.task,
                    &brief.name,
                    brief.elapsed,
                    ObservationKind::MonitorFailed,
                    &format!("could not start the monitor thread: {e}"),
                );
                None
            }
        }
    }
}

/// Runs one monitor's calls in order; updates that queued up while the agent
/// was busy are folded into one, so a slow agent catches up instead of
/// falling further behind.
fn worker(core: &Core, rx: &mpsc::Receiver<MonitorCall>) {
    let mut slot = AgentSlot::default();
    while let Ok(mut call) = rx.recv() {
        let mut taken = 1;
        let mut next = None;
        if let MonitorCall::Update(u) = &mut call {
            while let Ok(more) = rx.try_recv() {
                taken += 1;
                match more {
                    MonitorCall::Update(v) => u.absorb(v),
                    other => {
                        next = Some(other);
                        break;
                    }
                }
            }
        }
        run_call(core, &mut slot, &call);
        if let Some(n) = &next {
            run_call(core, &mut slot, n);
        }
        let last =
            matches!(call, MonitorCall::Final(_)) || matches!(next, Some(MonitorCall::Final(_)));
        core.done(taken);
        if last {
            return;
        }
    }
}

/// One monitor's agent, made at its `Open` call.
#[derive(Default)]
struct AgentSlot {
    agent: Option<Box<dyn MonitorAgent>>,
    failed: bool,
}

/// Calls the agent, containing its panics; keeps what it says.
fn run_call(core: &Core, slot: &mut AgentSlot, call: &MonitorCall) {
    if slot.failed {
        return;
    }
    let result = catch_unwind(AssertUnwindSafe(|| match call {
        MonitorCall::Open(brief) => slot.agent.insert((core.factory)(brief)).open(brief),
        MonitorCall::Update(u) => slot.agent.as_mut().map_or(Ok(None), |a| a.update(u)),
        MonitorCall::Final(f) => slot.agent.take().map_or(Ok(None), |mut a| a.finish(f)),
    }));
    let (task, name, at) = match call {
        MonitorCall::Open(b) => (b.task, &b.name, b.elapsed),
        MonitorCall::Update(u) => (u.task, &u.name, u.elapsed),
        MonitorCall::Final(f) => (f.task, &f.name, f.elapsed),
    };
    let kind = match call {
        MonitorCall::Final(_) => ObservationKind::Summary,
        _ => ObservationKind::Update,
    };
    let failure = match result {
        Ok(Ok(Some(text))) => {
            core.record(task, name, at, kind, &text);
            return;
        }
        Ok(Ok(None)) => return,
        Ok(Err(e)) => format!("the monitor agent returned an error: {e}"),
        Err(panic) => {
            let msg = panic
                .downcast_ref::<&str>()
                .map(|s| (*s).to_owned())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "non-string panic".into());
            format!("the monitor agent panicked: {msg}")
        }
    };
    tracing::warn!(task = %name, failure = %failure, "monitor failed; monitoring of this task stopped");
    slot.failed = true;
    slot.agent = None;
    core.record(task, name, at, ObservationKind::MonitorFailed, &failure);
}

/// What monitor threads share with the sink. Holds no task state, so a
/// worker never keeps the sink (and its registrations) alive.
struct Core {
    factory: Arc<Factory>,
    store: Mutex<Store>,
    pending: Mutex<usize>,
    idle: Condvar,
    limits: Limits,
}

impl Core {
    fn done(&self, n: usize) {
        let mut p = self.pending.lock();
        *p = p.saturating_sub(n);
        if *p == 0 {
            self.idle.notify_all();
        }
    }

    fn record(
        &self,
        task: TaskId,
        name: &Arc<str>,
        at: Duration,
        kind: ObservationKind,
        text: &str,
    ) {
        let obs = Observation {
            task,
            name: Arc::clone(name),
            at_elapsed: at,
            kind,
            text: compact(text, self.limits.observation_chars),
        };
        let mut store = self.store.lock();
        if !store.by_task.contains_key(&task) {
            store.order.push_back(task);
            if store.order.len() > self.limits.tasks {
                if let Some(old) = store.order.pop_front() {
                    store.by_task.remove(&old);
                }
            }
        }
        let q = store.by_task.entry(task).or_default();
        q.push_back(obs.clone());
        if q.len() > self.limits.per_task {
            q.pop_front();
        }
        store.unread.push_back(obs);
        if store.unread.len() > self.limits.unread {
            store.unread.pop_front();
        }
    }
}

#[derive(Default)]
struct Store {
    by_task: HashMap<TaskId, VecDeque<Observation>>,
    /// Tasks in the order their first observation came, for eviction.
    order: VecDeque<TaskId>,
    unread: VecDeque<Observation>,
}

/// Collapses whitespace and bounds the length: observations are summaries,
/// not transcripts.
fn compact(text: &str, max_chars: usize) -> String {
    let mut out = String::with_capacity(text.len().min(max_chars * 4));
    for (n, word) in text.split_whitespace().enumerate() {
        if n > 0 {
            out.push(' ');
        }
        out.push_str(word);
    }
    match out.char_indices().nth(max_chars) {
        Some((i, _)) => {
            out.truncate(i);
            out.push('…');
            out
        }
        None => out,
    }
}

#[derive(Default)]
struct Ticker {
    state: Mutex<TickState>,
    cv: Condvar,
}

#[derive(Default)]
struct TickState {
    stop: bool,
    /// A monitor opened since the poller last looked.
    wake: bool,
}

/// Polls every `interval` while a monitor is open and sleeps otherwise; holds
/// the sink only weakly and stops when it is dropped.
fn spawn_poller(shared: Weak<Shared>, ticker: Arc<Ticker>, interval: Duration) {
    let spawned = std::thread::Builder::new()
        .name("stallguard-monitor-poll".into())
        .spawn(move || {
            let mut active = false;
            loop {
                {
                    let mut st = ticker.state.lock();
                    if st.stop {
                        return;
                    }
                    if active || st.wake {
                        ticker.cv.wait_for(&mut st, interval);
                    } else {
                        ticker.cv.wait(&mut st);
                    }
                    if st.stop {
                        return;
                    }
                    st.wake = false;
                }
                let Some(shared) = shared.upgrade() else {
                    return;
                };
                active = match shared.now() {
                    Some(now) => shared.poll_at(now),
                    None => false,
                };
            }
        });
    if let Err(e) = spawned {
        tracing::error!(error = %e, "could not start the monitor poller; updates follow guard events only");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compact_collapses_and_bounds() {
        assert_eq!(compact("a \n\n b\tc", 80), "a b c");
        assert_eq!(compact(&"x".repeat(100), 80).chars().count(), 81);
    }
}
