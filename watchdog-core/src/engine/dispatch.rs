//! Sink dispatch (R6.2): events and actions leave the scheduler through one
//! FIFO outbox, so every sink sees each task's events in emission order.
//! Inline sinks are called by whichever thread drains the outbox; isolated
//! sinks each get a queue and a thread, so a sink that panics, errors or
//! never returns costs nobody else anything.
//!
//! A `stalled` event leaves the scheduler without its children: the fresh
//! look at the task's tree it names (R8.13, R3.1) reads `/proc`, which
//! must not happen under the guard-wide scheduler lock. The drainer takes
//! it as the event leaves the outbox, outside that lock and before any
//! sink sees the event, so every sink still gets the look taken at the
//! stall.
//!
//! # Invariants
//!
//! - `outbox` holds what the scheduler emitted, in emission order: it is
//!   pushed to only with the scheduler lock held ([`Dispatcher::push`]),
//!   which is what orders emissions across threads, and popped only by the
//!   holder of `draining`.
//! - At most one thread delivers at a time: the one holding `draining`.
//!   It pops one item at a time and lets go of `outbox` before resolving
//!   it (the child probe, the at-stall steps) and before calling any sink,
//!   so a producer never waits on a sink.
//! - A caller of [`Dispatcher::drain`] that finds `draining` taken returns
//!   at once: the holder's loop looks at `outbox` again after letting go of
//!   `draining`, so an item pushed meanwhile is never stranded.
//! - Each isolated sink's `QueueState` (its items, `busy`, `closed`, the
//!   heartbeat count) is guarded by its own `state` lock, with `cv` to wake
//!   its worker and whoever waits in [`Dispatcher::flush`]. The worker
//!   takes an item with the lock held and calls the sink without it.
//!   Heartbeats past [`HEARTBEAT_BACKLOG`] in one queue are counted and
//!   dropped; no other item is ever dropped.
//!
//! # Lock order
//!
//! scheduler lock, then `outbox` (push). `draining`, then `outbox` (pop),
//! then one queue's `state` at a time (hand-off). `outbox` and each
//! `state` are leaves: nothing is taken while either is held, and no sink,
//! probe or at-stall step runs under either.
//!
//! `draining` is only ever tried (`try_lock`, or `try_lock_until` with a
//! deadline in `flush`), never waited on without a bound, so it can sit
//! anywhere in the order: an inline sink that calls back into the guard
//! from `on_event` takes the scheduler lock while its thread holds
//! `draining`, and the nested drain simply returns. No lock of the guard is
//! held across a sink call except `draining` on the delivering thread;
//! never the scheduler lock (every caller drains after letting go of it).

use std::collections::VecDeque;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;
use std::time::Duration;

use crate::loom::sync::{Condvar, Mutex};
use crate::loom::thread;

use crate::engine::spawn::{spawn_checked, SpawnGate};
use crate::state::outbox::{Emitted, Item};
use crate::vocab::error::GuardError;
use crate::vocab::sink::{AtStall, Delivery, Sink};

/// Pending heartbeats beyond this many in a slow sink's queue are coalesced
/// (dropped); critical events are never dropped.
const HEARTBEAT_BACKLOG: usize = 64;

pub(crate) struct Dispatcher {
    outbox: Mutex<VecDeque<Emitted>>,
    draining: Mutex<()>,
    inline: Vec<Arc<dyn Sink>>,
    isolated: Vec<Arc<SinkQueue>>,
    /// Steps taken at each stall before its event leaves (R8.14).
    pub(crate) at_stall: Vec<Arc<dyn AtStall>>,
}

struct SinkQueue {
    name: String,
    state: Mutex<QueueState>,
    cv: Condvar,
}

#[derive(Default)]
struct QueueState {
    items: VecDeque<Item>,
    heartbeats: usize,
    busy: bool,
    closed: bool,
    coalesced: u64,
}

impl Dispatcher {
    /// Starts a thread for each isolated sink. One that cannot start is an
    /// error, and the threads started before it stop (R10.5): a sink
    /// without its thread would queue every event forever.
    pub(crate) fn new(
        sinks: Vec<Arc<dyn Sink>>,
        gate: Option<SpawnGate>,
    ) -> Result<Self, GuardError> {
        // Built up in place, so an early return drops it, and its `Drop`
        // closes the queues of the workers already started.
        let mut d = Dispatcher {
            outbox: Mutex::new(VecDeque::new()),
            draining: Mutex::new(()),
            inline: Vec::new(),
            isolated: Vec::new(),
            at_stall: Vec::new(),
        };
        for sink in sinks {
            match sink.delivery() {
                Delivery::Inline => d.inline.push(sink),
                Delivery::Isolated => d.isolated.push(spawn_worker(sink, gate)?),
            }
        }
        Ok(d)
    }

    /// Queues items in emission order. Called with the scheduler lock held,
    /// which is what orders emissions across threads.
    pub(crate) fn push<I: Into<Emitted>>(&self, items: impl IntoIterator<Item = I>) {
        self.outbox.lock().extend(items.into_iter().map(Into::into));
    }

    /// Delivers everything queued. Whoever holds the drain lock delivers for
    /// everyone; a re-entrant or concurrent caller returns at once and its
    /// items are picked up by the holder's loop, so nothing is lost and
    /// nothing is reordered.
    pub(crate) fn drain(&self) {
        loop {
            let Some(guard) = self.draining.try_lock() else {
                return;
            };
            loop {
                let next = self.outbox.lock().pop_front();
                match next {
                    Some(item) => self.deliver(&item.resolve(&self.at_stall)),
                    None => break,
                }
            }
            drop(guard);
            if self.outbox.lock().is_empty() {
                return;
            }
        }
    }

    fn deliver(&self, item: &Item) {
        for sink in &self.inline {
            call_sink(&**sink, item);
        }
        for q in &self.isolated {
            let mut st = q.state.lock();
            if item.is_heartbeat() {
                if st.heartbeats >= HEARTBEAT_BACKLOG {
                    st.coalesced += 1;
                    if st.coalesced.is_power_of_two() {
                        tracing::warn!(sink = %q.name, coalesced = st.coalesced, "slow sink: heartbeats coalesced");
                    }
                    continue;
                }
                st.heartbeats += 1;
            }
            st.items.push_back(item.clone());
            drop(st);
            q.cv.notify_one();
        }
    }

    /// Waits until every isolated sink has handled everything queued, or
    /// `timeout` passes. Returns false when some sink did not catch up (it is
    /// hung or slow).
    pub(crate) fn flush(&self, timeout: Duration) -> bool {
        let deadline = crate::vocab::duration::instant_after(timeout);
        // Another thread (the driver) may be draining: what it took from the
        // outbox but has not handed to the workers yet was emitted before
        // this call too, so wait for its loop to end instead of returning at
        // once as `drain` does, then deliver what is left ourselves.
        match self.draining.try_lock_until(deadline) {
            Some(guard) => {
                loop {
                    let next = self.outbox.lock().pop_front();
                    match next {
                        Some(item) => self.deliver(&item.resolve(&self.at_stall)),
                        None => break,
                    }
                }
                drop(guard);
            }
            // A sink flushing from inside its own delivery: nothing more to
            // wait for on this thread.
            None => return false,
        }
        let mut all = true;
        for q in &self.isolated {
            let mut st = q.state.lock();
            while !st.items.is_empty() || st.busy {
                if q.cv.wait_until(&mut st, deadline).timed_out() {
                    tracing::warn!(sink = %q.name, pending = st.items.len(), "sink did not drain in time");
                    all = false;
                    break;
                }
            }
        }
        all
    }
}

impl Drop for Dispatcher {
    fn drop(&mut self) {
        // Workers are told to stop once their queues are empty; they are not
        // joined, because a hung sink would hang the drop with it.
        for q in &self.isolated {
            q.state.lock().closed = true;
            q.cv.notify_all();
        }
    }
}

fn spawn_worker(
    sink: Arc<dyn Sink>,
    gate: Option<SpawnGate>,
) -> Result<Arc<SinkQueue>, GuardError> {
    let q = Arc::new(SinkQueue {
        name: sink.name().to_owned(),
        state: Mutex::new(QueueState::default()),
        cv: Condvar::new(),
    });
    let worker_q = Arc::clone(&q);
    let name = format!("stallwarden-sink-{}", short(&q.name));
    let builder = thread::Builder::new().name(name.clone());
    spawn_checked(gate, &name, || {
        builder.spawn(move || loop {
            let item = {
                let mut st = worker_q.state.lock();
                loop {
                    if let Some(item) = st.items.pop_front() {
                        if item.is_heartbeat() {
                            st.heartbeats -= 1;
                        }
                        st.busy = true;
                        break item;
                    }
                    if st.closed {
                        return;
                    }
                    worker_q.cv.wait(&mut st);
                }
            };
            call_sink(&*sink, &item);
            worker_q.state.lock().busy = false;
            worker_q.cv.notify_all();
        })
    })?;
    Ok(q)
}

fn short(name: &str) -> &str {
    name.rsplit("::").next().unwrap_or(name)
}

/// Calls one sink, containing its panics and reporting its errors (R6.2).
fn call_sink(sink: &dyn Sink, item: &Item) {
    let result = catch_unwind(AssertUnwindSafe(|| match item {
        Item::Event(e) => sink.on_event(e),
        Item::Action(a) => sink.on_action(a),
    }));
    match result {
        Ok(Ok(())) => {}
        Ok(Err(e)) => tracing::warn!(sink = sink.name(), error = %e, "sink failed"),
        Err(panic) => {
            let msg = panic
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "non-string panic".into());
            tracing::error!(sink = sink.name(), panic = %msg, "sink panicked");
        }
    }
}
