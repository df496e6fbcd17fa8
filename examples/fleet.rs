//! A fleet runner: many concurrent simulated agent turns, some stalling,
//! exported to Prometheus with bounded labels (R6.8).
//!
//! Serves `/metrics` on `STALLWARDEN_METRICS_ADDR` (default `127.0.0.1:9464`)
//! with `metrics-exporter-prometheus`. Turns are named `agent/turn-N` and
//! `review/turn-N`; the metrics sink's profile label is the part before the
//! `/`. Every fifth turn goes quiet past its idle budget once and recovers;
//! `FLEET_HUNG` turns (default 3) go quiet for good: one stall strikes them
//! out, and they stay `cancelling` (a grace period of an hour) until the
//! example exits. When the turns are done it prints one JSON line with
//! the numbers it produced (stalls it saw, live tasks by state), also
//! written to `FLEET_REPORT` if set, then keeps serving for `FLEET_HOLD_SECS`
//! (default 5) so a scraper sees the final state.
//!
//! ```text
//! cargo run --example fleet
//! curl -s 127.0.0.1:9464/metrics | grep stallwarden_
//! ```

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use metrics_exporter_prometheus::PrometheusBuilder;
use stallwarden_sinks::metrics::MetricsSink;
use watchdog_core::{Delivery, Event, EventKind, Guard, Profile, Sink, SinkError};

/// Counts what the guard said, inline, so the count is final when the
/// turns are.
#[derive(Clone, Default)]
struct Tally {
    stalls: Arc<AtomicU64>,
}

impl Sink for Tally {
    fn on_event(&self, event: &Event) -> Result<(), SinkError> {
        if let EventKind::Stalled { .. } = event.kind {
            self.stalls.fetch_add(1, Ordering::Relaxed);
        }
        Ok(())
    }

    fn delivery(&self) -> Delivery {
        Delivery::Inline
    }

    fn name(&self) -> &str {
        "tally"
    }
}

fn env_or<T: std::str::FromStr>(key: &str, default: T) -> Result<T, String> {
    match std::env::var(key) {
        Ok(v) => v
            .parse()
            .map_err(|_| format!("{key}={v:?} is not a valid value")),
        Err(_) => Ok(default),
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let addr: SocketAddr = env_or("STALLWARDEN_METRICS_ADDR", "127.0.0.1:9464".parse()?)?;
    let turns: usize = env_or("FLEET_TURNS", 40)?;
    let hung: usize = env_or("FLEET_HUNG", 3)?;
    let hold = Duration::from_secs(env_or("FLEET_HOLD_SECS", 5)?);

    PrometheusBuilder::new()
        .with_http_listener(addr)
        .set_buckets(&[0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0])?
        .install()?;
    MetricsSink::describe();

    let tally = Tally::default();
    let sink = MetricsSink::new()
        .profile_of(|name| name.split('/').next().unwrap_or("").to_owned().into());
    let guard = Guard::builder().sink(sink).sink(tally.clone()).build();
    // An idle budget well apart from the turns' pauses: a busy turn speaks
    // every 50 ms, a stalling one is quiet 1.5 budgets, so one stall each.
    let profile = Profile::default()
        .idle(Duration::from_millis(400))
        .terminate_after(0)
        .heartbeat_interval(None);

    let hung_turns: Vec<_> = (0..hung)
        .map(|i| {
            let strike_out = profile
                .clone()
                .terminate_after(1)
                .grace_period(Duration::from_secs(3600));
            let t = guard.start(format!("agent/hung-{i}"), strike_out)?;
            t.output(10, 1);
            Ok(t)
        })
        .collect::<Result<_, watchdog_core::GuardError>>()?;

    let workers: Vec<_> = (0..turns)
        .map(|i| {
            let guard = guard.clone();
            let profile = profile.clone();
            std::thread::spawn(move || -> Result<(), watchdog_core::GuardError> {
                let kind = if i % 2 == 0 { "agent" } else { "review" };
                let turn = guard.start(format!("{kind}/turn-{i}"), profile)?;
                for step in 0..20 {
                    turn.output(64, 1);
                    let pause = if i % 5 == 0 && step == 10 { 600 } else { 50 };
                    std::thread::sleep(Duration::from_millis(pause));
                }
                turn.finish_completed();
                Ok(())
            })
        })
        .collect();
    for w in workers {
        w.join().map_err(|_| "a turn panicked")??;
    }
    // The hung turns have been silent for the whole run: cancelling by now.
    std::thread::sleep(Duration::from_millis(500));

    let stalls = tally.stalls.load(Ordering::Relaxed);
    let report = serde_json::json!({
        "turns": turns,
        "stalls": stalls,
        "tasks": { "working": 0, "stalled": 0, "cancelling": hung },
        "metrics": format!("http://{addr}/metrics"),
    });
    println!("{report}");
    if let Ok(path) = std::env::var("FLEET_REPORT") {
        std::fs::write(path, format!("{report}\n"))?;
    }
    std::thread::sleep(hold);
    for t in hung_turns {
        t.finish(watchdog_core::Outcome::Cancelled, None, Some(15))?;
    }
    Ok(())
}
