//! Nothing silent (R8.7): the `--events` sink's first failure is a plain
//! stderr line at the default verbosity, since events the user asked for are
//! being lost; later failures are left to `tracing` (`-v`), which the
//! engine's own "sink failed" warning reaches.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use stallwarden::{Action, Delivery, Event, Sink, SinkError};

use super::console::Console;

/// Wraps a sink; says once, out loud, that it failed.
pub(crate) struct LoudOnFailure {
    inner: Box<dyn Sink>,
    console: Arc<Console>,
    said: AtomicBool,
}

impl LoudOnFailure {
    /// Wraps `inner`, reporting through `console`.
    pub(crate) fn new(inner: Box<dyn Sink>, console: Arc<Console>) -> LoudOnFailure {
        LoudOnFailure {
            inner,
            console,
            said: AtomicBool::new(false),
        }
    }

    fn note<T>(&self, r: Result<T, SinkError>) -> Result<T, SinkError> {
        if let Err(e) = &r {
            if !self.said.swap(true, Ordering::Relaxed) {
                self.console.line(&format!(
                    "stallwarden: events are being lost: {e} (further failures under -v)"
                ));
            }
        }
        r
    }
}

impl Sink for LoudOnFailure {
    fn on_event(&self, event: &Event) -> Result<(), SinkError> {
        self.note(self.inner.on_event(event))
    }

    fn on_action(&self, action: &Action) -> Result<(), SinkError> {
        self.note(self.inner.on_action(action))
    }

    fn delivery(&self) -> Delivery {
        self.inner.delivery()
    }

    fn name(&self) -> &str {
        self.inner.name()
    }
}
