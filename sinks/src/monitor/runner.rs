//! Running a monitor's agent: one worker thread per monitor (or inline),
//! calls kept in order and folded when the agent is slow, panics and errors
//! contained as observations, and the bounded store of what agents said.

use std::collections::{HashMap, VecDeque};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::mpsc;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::{Condvar, Mutex};
use watchdog_core::TaskId;

use super::{MonitorAgent, MonitorBrief, MonitorCall, Observation, ObservationKind};

/// Builds the agent for one monitor from its brief (to pick a model per
/// command, say).
pub(super) type Factory = dyn Fn(&MonitorBrief) -> Box<dyn MonitorAgent> + Send + Sync;

/// The bounds of what is kept of what agents said (the builder sets
/// `observation_chars`; the rest are fixed).
#[derive(Clone, Copy, Debug)]
pub(super) struct Limits {
    /// The most characters kept of one observation.
    pub(super) observation_chars: usize,
    /// The most observations kept per task.
    pub(super) per_task: usize,
    /// The most tasks whose observations are kept.
    pub(super) tasks: usize,
    /// The most observations not yet read.
    pub(super) unread: usize,
}

/// Runs one monitor's calls in order; updates that queued up while the agent
/// was busy are folded into one, so a slow agent catches up instead of
/// falling further behind.
pub(super) fn worker(core: &Core, rx: &mpsc::Receiver<MonitorCall>) {
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
pub(super) struct AgentSlot {
    agent: Option<Box<dyn MonitorAgent>>,
    failed: bool,
}

/// Calls the agent, containing its panics; keeps what it says.
pub(super) fn run_call(core: &Core, slot: &mut AgentSlot, call: &MonitorCall) {
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
pub(super) struct Core {
    pub(super) factory: Arc<Factory>,
    pub(super) store: Mutex<Store>,
    pub(super) pending: Mutex<usize>,
    pub(super) idle: Condvar,
    pub(super) limits: Limits,
}

impl Core {
    pub(super) fn done(&self, n: usize) {
        let mut p = self.pending.lock();
        *p = p.saturating_sub(n);
        if *p == 0 {
            self.idle.notify_all();
        }
    }

    pub(super) fn record(
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
pub(super) struct Store {
    pub(super) by_task: HashMap<TaskId, VecDeque<Observation>>,
    /// Tasks in the order their first observation came, for eviction.
    pub(super) order: VecDeque<TaskId>,
    pub(super) unread: VecDeque<Observation>,
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compact_collapses_and_bounds() {
        assert_eq!(compact("a \n\n b\tc", 80), "a b c");
        assert_eq!(compact(&"x".repeat(100), 80).chars().count(), 81);
    }
}
