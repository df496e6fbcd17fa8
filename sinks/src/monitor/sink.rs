//! The monitor sink: runs a [`MonitorState`] per registered task on the
//! guard's events, calls the runner's [`MonitorAgent`]s, and keeps what they
//! say as [`Observation`]s. Agents run on a thread per monitor (or inline, for
//! tests); their errors and panics become observations, never task faults.
//! The builder is in `builder.rs`, the agent calls and the kept observations
//! in `runner.rs`, the background poller in `poller.rs`.

use std::collections::{HashMap, VecDeque};
use std::fmt;
use std::path::PathBuf;
use std::sync::mpsc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use watchdog_core::{Clock, Delivery, Event, EventKind, Nanos, Sink, SinkError, TaskId};

use super::builder::MonitorSinkBuilder;
use super::poller::Ticker;
use super::runner::{run_call, worker, AgentSlot, Core, Limits};
use super::state::{MonitorSettings, MonitorState};
use crate::TaskRef;

use super::{
    MonitorAgent, MonitorBrief, MonitorCall, Observation, ObservationKind, OutputTail, RuleMonitor,
};

/// What the runner tells the monitor about one task: the command, where it
/// runs, and where its output tail comes from.
///
/// # Examples
///
/// ```
/// use stallwarden_sinks::monitor::MonitorTarget;
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
/// use stallwarden_sinks::monitor::{monitored, MonitorSink, MonitorTarget};
/// use watchdog_core::{Delivery, Guard, ManualClock, Profile};
///
/// let clock = ManualClock::new();
/// let monitor = MonitorSink::rule_based().with_delivery(Delivery::Inline).clock(clock.clone()).build().unwrap();
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
    pub(super) shared: Arc<Shared>,
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

    /// Registers a task to monitor if it runs long, by id or by name (a
    /// [`TaskRef`]: by name, the live task of that name or else the next one
    /// to start with it). Registering a task again before its monitor opens
    /// replaces the target; after, it is ignored (one monitor per task), and
    /// so is a task id that already finished.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use stallwarden_sinks::monitor::{monitored, MonitorSink, MonitorTarget};
    /// use watchdog_core::{Delivery, Guard, ManualClock, Profile};
    ///
    /// let clock = ManualClock::new();
    /// let monitor = MonitorSink::rule_based().with_delivery(Delivery::Inline).clock(clock.clone()).build().unwrap();
    /// let guard = Guard::builder().clock(clock).sink(monitor.clone()).build();
    /// monitor.watch("deploy", MonitorTarget::new("./deploy.sh", Vec::new)); // before it starts
    /// let task = guard.start("deploy", monitored(Profile::default())).unwrap();
    /// guard.advance(Duration::from_secs(3));
    /// assert!(monitor.is_open("deploy") && monitor.is_open(task.id()));
    /// task.finish_completed();
    /// assert_eq!(monitor.observations("deploy"), monitor.observations(task.id()));
    /// ```
    pub fn watch(&self, task: impl Into<TaskRef>, target: MonitorTarget) {
        let mut t = self.shared.tasks.lock();
        let id = match task.into() {
            TaskRef::Id(id) => id,
            TaskRef::Name(name) => match t.live.get(&name) {
                Some(&id) => id,
                None => {
                    t.pending_names.insert(name, target);
                    return;
                }
            },
        };
        if t.finished.contains(&id) {
            return;
        }
        if t.watched.get(&id).is_none_or(|w| !w.state.is_open()) {
            let watched = self.shared.watched(target);
            t.watched.insert(id, watched);
        }
    }

    /// Returns true while a monitor is open for `task` (by id or by name).
    pub fn is_open(&self, task: impl Into<TaskRef>) -> bool {
        let t = self.shared.tasks.lock();
        let id = match task.into() {
            TaskRef::Id(id) => id,
            TaskRef::Name(name) => match t.live.get(&name) {
                Some(&id) => id,
                None => return false,
            },
        };
        t.watched.get(&id).is_some_and(|w| w.state.is_open())
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
    /// for the last 256 tasks). By name: the latest task of that name that
    /// has observations.
    pub fn observations(&self, task: impl Into<TaskRef>) -> Vec<Observation> {
        let store = self.shared.core.store.lock();
        let queue = match task.into() {
            TaskRef::Id(id) => store.by_task.get(&id),
            TaskRef::Name(name) => store
                .order
                .iter()
                .rev()
                .filter_map(|id| store.by_task.get(id))
                .find(|q| q.front().is_some_and(|o| o.name == name)),
        };
        queue
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

pub(super) struct Shared {
    pub(super) core: Arc<Core>,
    pub(super) delivery: Delivery,
    pub(super) clock: Option<Arc<dyn Clock>>,
    pub(super) settings: MonitorSettings,
    pub(super) tasks: Mutex<Tasks>,
    pub(super) ticker: Arc<Ticker>,
}

impl Drop for Shared {
    fn drop(&mut self) {
        self.ticker.state.lock().stop = true;
        self.ticker.cv.notify_all();
    }
}

#[derive(Default)]
pub(super) struct Tasks {
    watched: HashMap<TaskId, Watched>,
    /// The latest event's instant and the real time it arrived, for "now"
    /// without a clock.
    anchor: Option<(Nanos, Instant)>,
    /// Recently finished tasks, so a late `watch` does not leave an entry
    /// that no `finished` will ever remove.
    finished: VecDeque<TaskId>,
    /// Live tasks by name, from their events, to resolve a watch by name.
    live: HashMap<Arc<str>, TaskId>,
    /// Targets watched by name before a task of that name was seen.
    pending_names: HashMap<Arc<str>, MonitorTarget>,
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
    pub(super) fn now(&self) -> Option<Nanos> {
        if let Some(c) = &self.clock {
            return Some(c.now());
        }
        let (at, when) = self.tasks.lock().anchor?;
        Some(at + when.elapsed())
    }

    /// A fresh registration for `target`.
    fn watched(&self, target: MonitorTarget) -> Watched {
        Watched {
            state: MonitorState::new(target.command, target.cwd, self.settings.clone()),
            tail: target.tail,
            runner: None,
        }
    }

    fn on_event(&self, event: &Event) {
        let opened = {
            let mut t = self.tasks.lock();
            t.anchor = Some((event.at, Instant::now()));
            let finished = matches!(event.kind, EventKind::Finished { .. });
            if finished {
                t.finished.push_back(event.task);
                if t.finished.len() > FINISHED_KEPT {
                    t.finished.pop_front();
                }
                if t.live.get(&event.name) == Some(&event.task) {
                    t.live.remove(&event.name);
                }
            } else if !t.live.contains_key(&event.name) {
                t.live.insert(Arc::clone(&event.name), event.task);
            }
            // A watch by name binds to the first task of that name seen.
            if !t.pending_names.is_empty() {
                if let Some(target) = t.pending_names.remove(&event.name) {
                    t.watched
                        .entry(event.task)
                        .or_insert_with(|| self.watched(target));
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

    pub(super) fn poll_at(&self, now: Nanos) -> bool {
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
            .name(format!("stallwarden-monitor-{}", brief.task.as_raw()))
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
