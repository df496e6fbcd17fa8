//! The cancellation-token sink against a guard on virtual time, with real
//! tokio tasks awaiting their tokens: one token per task, cancelled by the
//! cancel action (R3.5) and by a kill, dropped after `finished` (R3.8).

use std::sync::Arc;
use std::time::Duration;

use stallwarden_sinks::token::CancelTokenSink;
use tokio_util::sync::CancellationToken;
use watchdog_core::{Action, ActionKind, Guard, ManualClock, Outcome, Profile, Sink, TaskId};

const SECOND: Duration = Duration::from_secs(1);
const BOUND: Duration = Duration::from_secs(30);

fn quiet() -> Profile {
    Profile::default()
        .idle(5 * SECOND)
        .grace_period(2 * SECOND)
        .heartbeat_interval(None)
}

fn guard_with(tokens: &CancelTokenSink) -> Guard {
    Guard::builder()
        .clock(ManualClock::new())
        .sink(tokens.clone())
        .build()
}

/// Real work: a tokio task that runs until its token is cancelled.
fn work(token: CancellationToken) -> tokio::task::JoinHandle<&'static str> {
    tokio::spawn(async move {
        tokio::select! {
            () = token.cancelled() => "cancelled",
            () = std::future::pending::<()>() => "never",
        }
    })
}

// R3.5: the stall's cancel action cancels the task's token; the work,
// awaiting it on the runtime, ends. Tokens asked for before the task started
// (by name) and after (by id) are the same cancellation.
#[tokio::test]
async fn a_stall_cancels_the_tasks_token_and_the_work_stops() {
    let tokens = CancelTokenSink::new();
    let early = tokens.token_for("turn");
    let guard = guard_with(&tokens);
    let t = guard.start("turn", quiet()).unwrap();
    let by_id = tokens.token_for(t.status().unwrap().id);
    let by_name = tokens.token_for("turn");
    let jobs = [work(early), work(by_id), work(by_name.clone())];

    guard.advance(4 * SECOND);
    assert!(!by_name.is_cancelled(), "not before the budget runs out");
    guard.advance(SECOND);
    assert!(by_name.is_cancelled(), "cancelled at the verdict (R3.5)");
    for job in jobs {
        let how = tokio::time::timeout(BOUND, job)
            .await
            .expect("work ended")
            .unwrap();
        assert_eq!(how, "cancelled");
    }
    guard.advance(2 * SECOND); // killed: still cancelled, nothing else
    t.finish(Outcome::Cancelled, None, Some(9)).unwrap();
    assert_eq!(tokens.live_tokens(), 0, "dropped after finished");
}

// Only the stalled task's token is cancelled; the others keep running.
#[tokio::test]
async fn only_the_stalled_task_is_cancelled() {
    let tokens = CancelTokenSink::new();
    let guard = guard_with(&tokens);
    let quiet_one = guard.start("quiet", quiet()).unwrap();
    let busy = guard.start("busy", quiet().idle(60 * SECOND)).unwrap();
    let q = tokens.token_for("quiet");
    let b = tokens.token_for("busy");
    let busy_job = work(b.clone());
    guard.advance(5 * SECOND);
    assert!(q.is_cancelled());
    assert!(!b.is_cancelled());
    assert!(!busy_job.is_finished());
    busy.finish_completed();
    quiet_one.finish_completed();
    busy_job.abort();
}

// R3.2: with `terminate-after = 2` the first strike only notifies; the
// token is cancelled at the second.
#[test]
fn the_token_waits_for_the_cancelling_strike() {
    let tokens = CancelTokenSink::new();
    let guard = guard_with(&tokens);
    let t = guard.start("turn", quiet().terminate_after(2)).unwrap();
    let token = tokens.token_for("turn");
    guard.advance(5 * SECOND);
    assert!(!token.is_cancelled(), "strike 1 notifies only");
    guard.advance(5 * SECOND);
    assert!(token.is_cancelled(), "strike 2 cancels");
    t.finish_completed();
}

// A cancel asked through the guard, or the task's own trigger (R2.10),
// reaches the token too.
#[test]
fn a_requested_cancel_and_a_trigger_cancel_the_token() {
    let tokens = CancelTokenSink::new();
    let guard = guard_with(&tokens);
    let a = guard.start("a", quiet()).unwrap();
    let b = guard.start("b", quiet()).unwrap();
    guard.cancel("a", "user pressed stop").unwrap();
    b.trigger("disk full").unwrap();
    assert!(tokens.token_for("a").is_cancelled());
    assert!(tokens.token_for("b").is_cancelled());
    a.finish_completed();
    b.finish_completed();
}

// A kill action cancels the token even if the cancel was never seen.
#[test]
fn a_kill_action_alone_cancels_the_token() {
    let tokens = CancelTokenSink::new();
    let token = tokens.token_for(TaskId::from_raw(9));
    tokens
        .on_action(&Action {
            task: TaskId::from_raw(9),
            name: Arc::from("nine"),
            pid: None,
            kind: ActionKind::Kill,
        })
        .unwrap();
    assert!(token.is_cancelled());
    assert!(tokens.token_for("nine").is_cancelled(), "same task by name");
}

// R3.8: a finished task's token leaves the sink; the name's next run gets
// a fresh token, and a late id lookup of a settled task gets one nothing
// will cancel (and that is not kept).
#[test]
fn finished_tasks_tokens_are_dropped() {
    let tokens = CancelTokenSink::new();
    let guard = guard_with(&tokens);
    let t = guard.start("job", quiet()).unwrap();
    let id = t.status().unwrap().id;
    let first = tokens.token_for("job");
    t.cancel("stop").unwrap();
    assert_eq!(tokens.live_tokens(), 1);
    t.finish_completed();
    assert_eq!(tokens.live_tokens(), 0);
    assert!(first.is_cancelled(), "handed-out clones keep their state");

    let late = tokens.token_for(id);
    assert!(!late.is_cancelled());
    let t2 = guard.start("job", quiet()).unwrap();
    let second = tokens.token_for("job");
    assert!(!second.is_cancelled(), "a new run starts uncancelled");
    t2.finish_completed();
    assert_eq!(tokens.live_tokens(), 0);
}

// A parent token (the runner shutting down) cancels every task's token.
#[test]
fn a_parent_token_cancels_every_task() {
    let shutdown = CancellationToken::new();
    let tokens = CancelTokenSink::with_parent(shutdown.clone());
    let guard = guard_with(&tokens);
    let a = guard.start("a", quiet()).unwrap();
    let pending = tokens.token_for("not-started-yet");
    let live = tokens.token_for("a");
    shutdown.cancel();
    assert!(live.is_cancelled() && pending.is_cancelled());
    a.finish_completed();
}

// R6.3: a token asked for by the id of a task that has not started yet is
// the one its cancel cancels, even after other tasks started and finished;
// a started task holds its token from its `started` event on.
#[test]
fn a_token_asked_for_by_a_future_id_is_cancelled_with_its_task() {
    let tokens = CancelTokenSink::new();
    let guard = guard_with(&tokens);
    guard.start("first", quiet()).unwrap().finish_completed(); // id 1 started and finished
    let early = tokens.token_for(TaskId::from_raw(2));
    let t = guard.start("second", quiet()).unwrap();
    assert_eq!(t.id(), TaskId::from_raw(2));
    assert_eq!(tokens.live_tokens(), 1, "held from `started` on");
    t.cancel("stop").unwrap();
    assert!(early.is_cancelled());
    t.finish_completed();
}
