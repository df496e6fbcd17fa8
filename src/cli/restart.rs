//! Restart with backoff (R8.15): `restart = "on-stall"` starts the command
//! again when a stall (or lost liveness) stopped it, after a backoff that
//! doubles from `restart-delay` to `restart-max-delay`, at most
//! `max-restarts` times. Each run is a task of its own, so budgets and
//! strikes start fresh; its first event after `started` is `restarted`,
//! with the count, the delay and the stall that stopped the run before.
//!
//! A signal during a backoff ends the run at once, as it would have ended
//! the command: exit 128+N. A run that a signal reached while it was being
//! stopped is not restarted either. Restarts spent: 124, as any stop. A command
//! that exits by itself: its own status, never restarted.

use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use stallwarden::config::Restart;
use stallwarden::{Delivery, Event, EventKind, Profile, Sink, SinkError};

use super::args::RunArgs;
use super::signals::Incoming;
use super::EXIT_STOPPED;

/// The backoff before restart `n` (1 for the first): `first` doubled
/// `n - 1` times, never past `cap` (R8.15). A pure function of its inputs.
pub(crate) fn backoff(n: u32, first: Duration, cap: Duration) -> Duration {
    let mut d = first.min(cap);
    // Past 64 doublings any first delay but zero is at the cap.
    for _ in 1..n.min(64) {
        d = d.saturating_mul(2).min(cap);
    }
    d
}

/// How a run restarts, from the config and the flags.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Plan {
    pub(crate) restart: Restart,
    pub(crate) first: Duration,
    pub(crate) cap: Duration,
    pub(crate) max: u32,
}

impl Plan {
    /// The plan of `args`: flags over the config. A config that does not
    /// load plans no restart; the run itself then says what is wrong.
    pub(crate) fn of(args: &RunArgs) -> Plan {
        let options = super::check::load(args.config.as_deref())
            .ok()
            .and_then(|c| c.run_options(args.profile.as_deref()).ok())
            .unwrap_or_default();
        Plan {
            restart: args.restart.map_or(options.restart, Restart::from),
            first: args.restart_delay.unwrap_or(options.restart_delay),
            cap: args.restart_max_delay.unwrap_or(options.restart_max_delay),
            max: args.max_restarts.unwrap_or(options.max_restarts),
        }
    }
}

/// What one run is told of the restart that started it.
#[derive(Clone, Debug)]
pub(crate) struct Restarted {
    /// 1 for the first restart.
    pub(crate) count: u32,
    /// The backoff waited before it.
    pub(crate) delay: Duration,
    /// The stall line that stopped the run before.
    pub(crate) last_stall: Option<String>,
}

/// What one run is given: the restart that started it, if any, and the
/// watch that tells the loop why it stopped.
#[derive(Debug, Default)]
pub(crate) struct Attempt {
    pub(crate) restarted: Option<Restarted>,
    pub(crate) watch: Watch,
}

#[derive(Debug, Default)]
struct Seen {
    /// The stall line of the latest stall.
    last_stall: Option<String>,
    /// The latest verdict was a stall or lost liveness.
    hung: bool,
    /// A cancel followed such a verdict.
    stopped_hung: bool,
    /// A signal sent to stallwarden reached the command: the user wants
    /// it to end, not to come back.
    signalled: bool,
}

/// Watches one run's events for a stop that a restart answers: a
/// `cancelling` after a `stalled` or `liveness_lost` verdict.
#[derive(Clone, Debug, Default)]
pub(crate) struct Watch(Arc<Mutex<Seen>>);

impl Watch {
    /// The sink to add to the run's guard; `profile` renders stall lines.
    pub(crate) fn sink(&self, profile: &Profile) -> WatchSink {
        WatchSink {
            seen: Arc::clone(&self.0),
            profile: profile.clone(),
        }
    }

    /// Notes that a signal sent to stallwarden was passed to the command.
    pub(crate) fn signalled(&self) {
        self.0.lock().signalled = true;
    }

    /// Whether the run stopped for a stall and nobody asked it to end.
    fn stopped_hung(&self) -> bool {
        let seen = self.0.lock();
        seen.stopped_hung && !seen.signalled
    }

    fn last_stall(&self) -> Option<String> {
        self.0.lock().last_stall.clone()
    }
}

/// The sink half of a [`Watch`].
#[derive(Debug)]
pub(crate) struct WatchSink {
    seen: Arc<Mutex<Seen>>,
    profile: Profile,
}

impl Sink for WatchSink {
    fn on_event(&self, event: &Event) -> Result<(), SinkError> {
        let mut seen = self.seen.lock();
        match &event.kind {
            EventKind::Stalled { .. } => {
                seen.hung = true;
                seen.last_stall = super::report::verdict_line(&self.profile, &event.kind)
                    .map(|l| l.trim_start_matches("stallwarden: ").to_owned());
            }
            EventKind::LivenessLost { reason } => {
                seen.hung = true;
                seen.last_stall = Some(format!("liveness lost: {reason}"));
            }
            EventKind::Recovered { .. }
            | EventKind::DeadlineExceeded { .. }
            | EventKind::Triggered { .. } => seen.hung = false,
            EventKind::Cancelling { .. } => seen.stopped_hung = seen.hung,
            _ => {}
        }
        Ok(())
    }

    // A lock held for a few stores: deliver before the cancel's own
    // dispatch returns, so the loop cannot miss why the run stopped.
    fn delivery(&self) -> Delivery {
        Delivery::Inline
    }

    fn name(&self) -> &str {
        "restart-watch"
    }
}

/// Runs the command with `attempt` (one run, its exit status) and, per
/// the plan, again after each stall that stopped it; returns the exit
/// status of the whole run.
pub(crate) fn supervise(args: RunArgs, attempt: impl Fn(RunArgs, Attempt) -> u8) -> u8 {
    let plan = Plan::of(&args);
    let mut restarted = None;
    let mut count = 0;
    loop {
        let watch = Watch::default();
        let code = attempt(
            args.clone(),
            Attempt {
                restarted: restarted.take(),
                watch: watch.clone(),
            },
        );
        if plan.restart != Restart::OnStall || code != EXIT_STOPPED || !watch.stopped_hung() {
            return code;
        }
        if count >= plan.max {
            eprintln!(
                "stallwarden: not restarting: all {} restarts are spent",
                plan.max
            );
            return code;
        }
        count += 1;
        let delay = backoff(count, plan.first, plan.cap);
        eprintln!(
            "stallwarden: restarting the command in {} (restart {count} of {})",
            humantime::format_duration(delay),
            plan.max
        );
        if let Some(sig) = wait_out(delay) {
            eprintln!(
                "stallwarden: {} during the backoff: not restarting",
                super::signals::name(sig)
            );
            return u8::try_from(128 + sig).unwrap_or(255);
        }
        restarted = Some(Restarted {
            count,
            delay,
            last_stall: watch.last_stall(),
        });
    }
}

/// Waits out a backoff; returns the signal that ended it early, if one
/// did (R8.9: caught as while the command runs).
fn wait_out(delay: Duration) -> Option<i32> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build();
    let Ok(runtime) = runtime else {
        eprintln!("stallwarden: cannot catch signals during the backoff; waiting it out");
        std::thread::sleep(delay);
        return None;
    };
    runtime.block_on(async {
        match Incoming::catch() {
            Ok(mut incoming) => until_signal(delay, incoming.recv()).await,
            Err(e) => {
                eprintln!(
                    "stallwarden: cannot catch signals during the backoff ({e}); waiting it out"
                );
                tokio::time::sleep(delay).await;
                None
            }
        }
    })
}

/// Sleeps `delay` unless `signal` comes first; returns it if it did.
async fn until_signal(
    delay: Duration,
    signal: impl std::future::Future<Output = i32>,
) -> Option<i32> {
    tokio::select! {
        sig = signal => Some(sig),
        () = tokio::time::sleep(delay) => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: Duration = Duration::from_secs(1);

    // R8.15: the delay doubles from the first to the cap, and stays there.
    #[test]
    fn the_backoff_doubles_up_to_its_cap() {
        let got: Vec<Duration> = (1..=8).map(|n| backoff(n, S, 60 * S)).collect();
        assert_eq!(
            got,
            [S, 2 * S, 4 * S, 8 * S, 16 * S, 32 * S, 60 * S, 60 * S]
        );
        // Far past the cap, no overflow; a cap below the first wins.
        assert_eq!(backoff(u32::MAX, S, 60 * S), 60 * S);
        assert_eq!(backoff(1, 10 * S, 3 * S), 3 * S);
        assert_eq!(backoff(3, Duration::ZERO, S), Duration::ZERO);
        let ms = Duration::from_millis(100);
        assert_eq!(backoff(11, ms, Duration::MAX), ms * 1024);
        assert!(backoff(u32::MAX, ms, Duration::MAX) > backoff(40, ms, Duration::MAX));
    }

    // R8.15: a backoff is waited out in full, in virtual time.
    #[tokio::test(start_paused = true)]
    async fn a_backoff_is_waited_out_in_full() {
        let start = tokio::time::Instant::now();
        let got = until_signal(4 * S, std::future::pending()).await;
        assert_eq!(got, None);
        assert_eq!(start.elapsed(), 4 * S);
    }

    // R8.15, R8.9: a signal during the backoff ends it at once.
    #[tokio::test(start_paused = true)]
    async fn a_signal_during_a_backoff_ends_it_at_once() {
        let start = tokio::time::Instant::now();
        let signal = async {
            tokio::time::sleep(S).await;
            libc::SIGTERM
        };
        assert_eq!(until_signal(60 * S, signal).await, Some(libc::SIGTERM));
        assert_eq!(start.elapsed(), S);
    }
}
