//! The background poller: drives monitor updates on a real clock between
//! guard events, since flowing output produces none (R6.6).

use std::sync::Arc;
use std::time::Duration;

use parking_lot::{Condvar, Mutex};

#[derive(Default)]
pub(super) struct Ticker {
    pub(super) state: Mutex<TickState>,
    pub(super) cv: Condvar,
}

#[derive(Default)]
pub(super) struct TickState {
    pub(super) stop: bool,
    /// A monitor opened since the poller last looked.
    pub(super) wake: bool,
}

/// Calls `poll` every `interval` while a monitor is open and sleeps
/// otherwise. `poll` says whether a monitor is still open, or `None` once
/// the sink is gone, which stops the poller as `ticker`'s stop does.
pub(super) fn spawn_poller(
    poll: impl Fn() -> Option<bool> + Send + 'static,
    ticker: Arc<Ticker>,
    interval: Duration,
) {
    let spawned = std::thread::Builder::new()
        .name("stallwarden-monitor-poll".into())
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
                let Some(open) = poll() else {
                    return;
                };
                active = open;
            }
        });
    if let Err(e) = spawned {
        tracing::error!(error = %e, "could not start the monitor poller; updates follow guard events only");
    }
}
