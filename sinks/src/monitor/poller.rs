//! The background poller: drives monitor updates on a real clock between
//! guard events, since flowing output produces none (R6.6).

use std::sync::{Arc, Weak};
use std::time::Duration;

use parking_lot::{Condvar, Mutex};

use super::sink::Shared;

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

/// Polls every `interval` while a monitor is open and sleeps otherwise; holds
/// the sink only weakly and stops when it is dropped.
pub(super) fn spawn_poller(shared: Weak<Shared>, ticker: Arc<Ticker>, interval: Duration) {
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
