//! A simulated agent session driven through the engine, printing every event
//! as the JSON line `--events` would write (SPEC §8.3).
//!
//! The session replays the incidents stallwarden comes from, on a virtual
//! clock so the 41 minutes take milliseconds:
//! 1. the model streams tool arguments (each delta renews the idle budget);
//! 2. a 165 s silent SQL probe runs on the execution budget, with outbound
//!    heartbeats so a headless consumer sees "still running";
//! 3. a recursive `grep` wedges; the guard strikes twice, cancels, and kills
//!    after the grace period; the runner reports the process's end.
//!
//! Run it with `cargo run --release --example agent_turn`.

use std::time::Duration;

use stallwarden::core::{
    CallOutcome, Event, Guard, ManualClock, Outcome, Profile, Sink, SinkError,
};

/// Prints each event as one JSON line.
#[derive(Debug)]
struct Print;

impl Sink for Print {
    fn on_event(&self, event: &Event) -> Result<(), SinkError> {
        let line = serde_json::to_string(event).map_err(SinkError::new)?;
        println!("{line}");
        Ok(())
    }
    fn delivery(&self) -> stallwarden::core::Delivery {
        stallwarden::core::Delivery::Inline
    }
}

fn main() {
    let s = Duration::from_secs;
    let clock = ManualClock::new();
    let guard = Guard::builder().clock(clock).sink(Print).build();
    let profile = Profile::default()
        .idle(s(60))
        .execution(s(300))
        .heartbeat_interval(Some(s(30)))
        .terminate_after(2)
        .grace_period(s(10))
        .long_running_after(s(3));
    let turn = guard
        .start("session-77255d98", profile)
        .expect("valid profile");

    // 1. Streamed tool arguments: 40 deltas, 2 s apart, each fresh progress.
    for _ in 0..40 {
        guard.advance(s(2));
        turn.argument_delta();
    }

    // 2. A silent 165 s SQL probe: legitimate on the execution budget.
    turn.tool_started("toolu_01", "sql_probe")
        .expect("live task");
    guard.advance(s(165));
    turn.tool_finished("toolu_01", CallOutcome::Success)
        .expect("call in flight");
    turn.output(4096, 12);

    // 3. A wedged grep: no output, no progress.
    turn.tool_started("toolu_02", "grep").expect("live task");
    guard.advance(s(900));
    turn.finish(Outcome::Failed, None, Some(9))
        .expect("first finish");

    let status = guard.statuses();
    eprintln!("live tasks after the session: {}", status.len());
}
