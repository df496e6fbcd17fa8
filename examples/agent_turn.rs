//! A simulated agent session driven through the engine, printing every event
//! as the JSON line `--events` would write (SPEC §8.3).
//!
//! The session replays the incidents stallwarden comes from, on a virtual
//! clock so the 41 minutes take milliseconds:
//! 1. the model streams tool arguments (each delta renews the idle budget);
//! 2. a 165 s silent SQL probe runs on the execution budget, with outbound
//!    heartbeats so a headless consumer sees "still running";
//! 3. a recursive `grep` wedges; the guard strikes twice, cancels, and kills
//!    after the grace period; the runner reports the process's end;
//! 4. a second session loops: the model asks for the same call and gets the
//!    same result (R5.12). Strike 1 is the runner's cue to nudge the model;
//!    the model keeps looping, and strike 2 stops the turn.
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

    // 4. A loud hang: never silent, only repeating itself (R5.12).
    let looping = guard
        .start(
            "session-loop",
            Profile::default().idle(s(60)).terminate_after(2),
        )
        .expect("valid profile");
    let mut nudged = false;
    for i in 0..20 {
        let id = format!("toolu_1{i:02}");
        let input = br#"{"command":"cat config.yaml"}"#;
        if looping
            .tool_started_with(&id, "Bash(cat config.yaml)", input)
            .is_err()
        {
            break; // cancelled: the turn is over
        }
        guard.advance(s(10));
        let _ = looping.tool_finished_with(&id, CallOutcome::Success, b"port: 8080\n");
        guard.advance(s(10));
        let Some(status) = looping.status() else {
            break;
        };
        if status.strikes == 1 && !nudged {
            // What a runner would add to the model's next message.
            let what = status.repeating.map(|r| r.to_string()).unwrap_or_default();
            eprintln!("runner: nudging the model: you are repeating yourself ({what})");
            nudged = true;
        }
    }

    let status = guard.statuses();
    eprintln!("live tasks after the session: {}", status.len());
}
