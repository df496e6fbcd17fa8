//! The sink that carries the engine's events and cancels into Python: the
//! R8.3 dicts to `on_event` on a sink thread of its own, and each cancel to
//! the task's flag and its `await task.cancelled()` futures.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;
use pyo3::prelude::*;
use watchdog_core::{Action, ActionKind, Delivery, Event, Sink, SinkError, TaskId};

/// What a cancel has to reach for one task: its flag and the futures that
/// `await task.cancelled()` handed out.
#[derive(Default)]
pub(crate) struct CancelState {
    pub(crate) cancelled: AtomicBool,
    /// `(future, loop)` pairs still waiting.
    pub(crate) waiters: Mutex<Vec<(Py<PyAny>, Py<PyAny>)>>,
}

/// Everything the sink thread shares with the Python objects.
pub(crate) struct Shared {
    pub(crate) on_event: Option<Py<PyAny>>,
    pub(crate) loads: Py<PyAny>,
    /// `resolve(future)`: sets the future's result unless it is done.
    pub(crate) resolve: Py<PyAny>,
    pub(crate) tasks: Mutex<HashMap<TaskId, Arc<CancelState>>>,
}

impl Shared {
    pub(crate) fn cancel_state(&self, id: TaskId) -> Arc<CancelState> {
        Arc::clone(self.tasks.lock().entry(id).or_default())
    }
}

/// The sink that carries the engine's events and cancels into Python.
pub(crate) struct PySink(pub(crate) Arc<Shared>);

impl Sink for PySink {
    fn on_event(&self, event: &Event) -> Result<(), SinkError> {
        if let Some(callback) = &self.0.on_event {
            let json = serde_json::to_string(event).map_err(SinkError::new)?;
            Python::attach(|py| {
                let call = self
                    .0
                    .loads
                    .bind(py)
                    .call1((json,))
                    .and_then(|dict| callback.bind(py).call1((dict,)));
                if let Err(e) = call {
                    // A failing callback is the runner's bug; the guard goes
                    // on and Python reports it where it reports such errors.
                    e.write_unraisable(py, Some(callback.bind(py)));
                }
            });
        }
        if event.kind.type_name() == "finished" {
            self.0.tasks.lock().remove(&event.task);
        }
        Ok(())
    }

    fn on_action(&self, action: &Action) -> Result<(), SinkError> {
        if let ActionKind::Cancel { .. } = action.kind {
            let state = self.0.cancel_state(action.task);
            let mut waiters = state.waiters.lock();
            state.cancelled.store(true, Ordering::Release);
            if !waiters.is_empty() {
                Python::attach(|py| {
                    for (future, event_loop) in waiters.drain(..) {
                        let resolve = self.0.resolve.bind(py);
                        if let Err(e) = event_loop
                            .bind(py)
                            .call_method1("call_soon_threadsafe", (resolve, future))
                        {
                            // The loop is closed: nobody awaits any more.
                            e.write_unraisable(py, None);
                        }
                    }
                });
            }
        }
        Ok(())
    }

    fn delivery(&self) -> Delivery {
        // Its own thread: a slow Python callback delays nobody (R6.2), and
        // the GIL is never taken while the engine holds its lock.
        Delivery::Isolated
    }

    fn name(&self) -> &str {
        "python"
    }
}
