//! The ACP sink against a guard on virtual time (R6.7): heartbeat events of
//! a watched tool call become meta-only `tool_call_update` frames with
//! status `in_progress` and the §8.3 heartbeat fields under `_meta`,
//! written as JSON-RPC `session/update` notifications and parsed back here
//! through the protocol crate's own types; none is ever written after the
//! call's `completed` / `failed` (the settled gate, R3.8), even when a
//! heartbeat races the settle on another thread.

use std::time::Duration;

use agent_client_protocol_schema::rpc::{JsonRpcMessage, Notification};
use agent_client_protocol_schema::v1::{
    SessionNotification, SessionUpdate, ToolCallStatus, ToolCallUpdate,
};
use stallwarden_sinks::acp::{AcpSink, META, METHOD};
use tokio::io::AsyncReadExt;
use watchdog_core::{Guard, ManualClock, Profile};

const SECOND: Duration = Duration::from_secs(1);

type Frame = JsonRpcMessage<Notification<SessionNotification>>;

/// Runs `scenario` with an ACP sink writing into a pipe; returns every
/// frame written, parsed through the crate's types, in order.
fn frames(scenario: impl FnOnce(&Guard, &AcpSink) + Send + 'static) -> Vec<ToolCallUpdate> {
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    rt.block_on(async {
        let (out, mut read) = tokio::io::duplex(1 << 20);
        let (acp, writer) = AcpSink::spawn(out, "session-1");
        let reader = tokio::spawn(async move {
            let mut text = String::new();
            read.read_to_string(&mut text).await.map(|_| text)
        });
        tokio::task::spawn_blocking(move || {
            let guard = Guard::builder()
                .clock(ManualClock::new())
                .sink(acp.clone())
                .build();
            scenario(&guard, &acp);
        })
        .await
        .expect("scenario");
        writer.await.expect("writer task").expect("writes");
        let text = reader.await.expect("reader task").expect("reads");
        text.lines()
            .map(|line| {
                let frame: Frame = serde_json::from_str(line)
                    .unwrap_or_else(|e| panic!("not an ACP notification: {e}: {line}"));
                let n = frame.into_inner();
                assert_eq!(&*n.method, METHOD);
                let params = n.params.expect("params");
                assert_eq!(&*params.session_id.0, "session-1");
                match params.update {
                    SessionUpdate::ToolCallUpdate(u) => u,
                    other => panic!("not a tool_call_update: {other:?}"),
                }
            })
            .collect()
    })
}

fn heartbeating() -> Profile {
    Profile::default()
        .idle(600 * SECOND)
        .deadline(900 * SECOND)
        .heartbeat_interval(Some(10 * SECOND))
}

// R6.7: each heartbeat of a watched call is one meta-only in_progress
// frame carrying the §8.3 heartbeat fields under `_meta`.
#[test]
fn heartbeats_become_meta_only_in_progress_frames() {
    let got = frames(|g, acp| {
        acp.watch("call-1", "toolu_01", Some("bash"));
        let t = g.start("call-1", heartbeating()).unwrap();
        let other = g.start("unwatched", heartbeating()).unwrap();
        g.advance(4 * SECOND);
        t.output(300, 3);
        g.advance(16 * SECOND); // heartbeats while it runs
        acp.settle("call-1", ToolCallStatus::Completed).unwrap();
        t.finish_completed();
        other.finish_completed();
    });
    let (last, beats) = got.split_last().expect("frames");
    assert!(!beats.is_empty(), "no heartbeat frame");
    for u in beats {
        assert_eq!(&*u.tool_call_id.0, "toolu_01");
        assert_eq!(u.fields.status, Some(ToolCallStatus::InProgress));
        // Meta-only: nothing a client would render changes.
        assert_eq!(u.fields.title, None);
        assert_eq!(u.fields.kind, None);
        assert_eq!(u.fields.content, None);
        assert_eq!(u.fields.raw_output, None);
        let meta = u.meta.as_ref().expect("_meta");
        assert_eq!(meta["toolName"], "bash");
        let hb = &meta[META];
        assert_eq!(hb["type"], "heartbeat");
        assert_eq!(hb["task"], "call-1");
        assert_eq!(hb["total_lines"], 3);
        assert_eq!(hb["total_bytes"], 300);
        assert!(hb["last_output_age_ms"].is_u64(), "{hb}");
        assert!(hb["idle_remaining_ms"].is_u64(), "{hb}");
        assert_eq!(hb["deadline_ms"], 900_000);
    }
    assert_eq!(&*last.tool_call_id.0, "toolu_01");
    assert_eq!(last.fields.status, Some(ToolCallStatus::Completed));
    assert_eq!(last.meta, None);
}

// R3.8: after the call settles — by `settle` or by the task finishing —
// no frame is written for it, however long the guard keeps running.
#[test]
fn nothing_after_completed_or_failed() {
    let got = frames(|g, acp| {
        acp.watch("a", "call-a", None);
        acp.watch("b", "call-b", None);
        let a = g.start("a", heartbeating()).unwrap();
        let b = g.start("b", heartbeating()).unwrap();
        g.advance(10 * SECOND);
        acp.settle("a", ToolCallStatus::Failed).unwrap();
        acp.settle("a", ToolCallStatus::Completed).unwrap(); // twice: nothing
        g.advance(30 * SECOND); // `a` still runs, but its call is settled
        b.finish_completed();
        g.advance(30 * SECOND);
        a.finish_completed();
    });
    let a: Vec<_> = got
        .iter()
        .filter(|u| &*u.tool_call_id.0 == "call-a")
        .map(|u| u.fields.status)
        .collect();
    assert_eq!(
        a,
        [
            Some(ToolCallStatus::InProgress),
            Some(ToolCallStatus::Failed)
        ]
    );
    let b: Vec<_> = got
        .iter()
        .filter(|u| &*u.tool_call_id.0 == "call-b")
        .collect();
    assert!(!b.is_empty());
    assert!(b
        .iter()
        .all(|u| u.fields.status == Some(ToolCallStatus::InProgress)));
    // b finished at 40 s: its last frame is from before then.
    let last = &b.last().unwrap().meta.as_ref().unwrap()[META];
    assert!(last["elapsed_ms"].as_u64().unwrap() <= 40_000, "{last}");
}

// R3.8 / seed 000: a heartbeat racing the settle on another thread is
// written before the completion or not at all, never after it.
#[test]
fn a_heartbeat_racing_the_settle_never_follows_it() {
    for round in 0..50 {
        let got = frames(move |g, acp| {
            let name = format!("call-{round}");
            acp.watch(&name, &name, None);
            let t = g
                .start(
                    name.clone(),
                    heartbeating().heartbeat_interval(Some(SECOND)),
                )
                .unwrap();
            let ticker = {
                let g = g.clone();
                std::thread::spawn(move || {
                    for _ in 0..200 {
                        g.advance(SECOND);
                    }
                })
            };
            for _ in 0..round {
                std::thread::yield_now();
            }
            acp.settle(&name, ToolCallStatus::Completed).unwrap();
            ticker.join().unwrap();
            t.finish_completed();
        });
        let done = got
            .iter()
            .position(|u| u.fields.status == Some(ToolCallStatus::Completed))
            .expect("the completion is written");
        assert_eq!(
            done,
            got.len() - 1,
            "round {round}: a frame after completed"
        );
    }
}

// A settle must be completed or failed: anything else is refused with
// the call named, and the gate stays open.
#[test]
fn settle_refuses_a_status_that_does_not_settle() {
    let got = frames(|g, acp| {
        acp.watch("c", "call-c", None);
        let t = g.start("c", heartbeating()).unwrap();
        let err = acp.settle("c", ToolCallStatus::InProgress).unwrap_err();
        assert!(err.to_string().contains("\"c\""), "{err}");
        g.advance(10 * SECOND);
        t.finish_completed();
    });
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].fields.status, Some(ToolCallStatus::InProgress));
}

// R3.8: the task finishing settles its call even when the runner never
// calls `settle`: a late `settle` then writes nothing, so no frame follows
// the call's end (kills the deleted `Finished` arm of `AcpSink::on_event`).
#[test]
fn a_finished_task_closes_its_call_for_a_late_settle() {
    let got = frames(|g, acp| {
        acp.watch("a", "call-a", None);
        let a = g.start("a", heartbeating()).unwrap();
        g.advance(10 * SECOND);
        a.finish_completed();
        acp.settle("a", ToolCallStatus::Completed).unwrap();
    });
    assert!(!got.is_empty(), "no heartbeat frame");
    for u in &got {
        assert_eq!(&*u.tool_call_id.0, "call-a");
        assert_eq!(u.fields.status, Some(ToolCallStatus::InProgress));
    }
}

// R6.7, R10.6: a call watched by task id (the one task reference every sink
// takes) gets its heartbeat frames and settles by that id; watched by name
// or by id, the frames are the same.
#[test]
fn a_call_watched_by_task_id_is_heartbeated_and_settled_by_id() {
    let got = frames(|g, acp| {
        let t = g.start("call-7", heartbeating()).unwrap();
        acp.watch(t.id(), "toolu_07", None);
        g.advance(25 * SECOND);
        acp.settle(t.id(), ToolCallStatus::Failed).unwrap();
        g.advance(20 * SECOND); // settled: no frame follows
        t.finish_completed();
    });
    let (last, beats) = got.split_last().expect("frames");
    assert_eq!(beats.len(), 2, "{got:?}");
    for u in beats {
        assert_eq!(&*u.tool_call_id.0, "toolu_07");
        assert_eq!(u.fields.status, Some(ToolCallStatus::InProgress));
        assert_eq!(u.meta.as_ref().expect("_meta")[META]["task"], "call-7");
    }
    assert_eq!(&*last.tool_call_id.0, "toolu_07");
    assert_eq!(last.fields.status, Some(ToolCallStatus::Failed));
}

// R8.7: the sink names itself, for the errors and logs that cite it.
#[test]
fn the_acp_sink_names_itself() {
    use watchdog_core::Sink;
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    rt.block_on(async {
        let (acp, _writer) = AcpSink::spawn(tokio::io::sink(), "s1");
        assert_eq!(acp.name(), "acp");
    });
}
