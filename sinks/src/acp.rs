//! A sink that speaks the Agent Client Protocol the way seed 000's consumers
//! read it (R6.7): meta-only `tool_call_update` frames with status
//! `in_progress` for a watched tool call, the heartbeat fields of §8.3
//! under `_meta`, written as JSON-RPC `session/update` notifications, one
//! per line, to any [`AsyncWrite`]; never one after the call settled (R3.8).
//!
//! The frames are built from the protocol's own types
//! (`agent-client-protocol-schema`, the crate `agent-client-protocol`
//! re-exports as its `schema`), so a conforming client parses them as it
//! parses any other update. Behind the `acp` feature.

use std::collections::HashMap;
use std::fmt;
use std::io;
use std::sync::Arc;

use agent_client_protocol_schema::rpc::{JsonRpcMessage, Notification};
use agent_client_protocol_schema::v1::{
    Meta, SessionId, SessionNotification, SessionUpdate, ToolCallId, ToolCallStatus,
    ToolCallUpdate, ToolCallUpdateFields,
};
use parking_lot::Mutex;
use tokio::io::{AsyncWrite, AsyncWriteExt};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use watchdog_core::{Delivery, Event, EventKind, Sink, SinkError};

use crate::TaskRef;

/// The JSON-RPC method every frame is sent as.
pub const METHOD: &str = "session/update";

/// The key under `_meta` that holds the §8.3 heartbeat fields.
pub const META: &str = "stallwardenHeartbeat";

/// A watched tool call: its ACP id and name, and whether it settled.
#[derive(Clone, Debug)]
struct Call {
    id: ToolCallId,
    name: Option<String>,
    settled: bool,
}

/// A sink writing ACP heartbeat frames for watched tool calls (R6.7).
///
/// A runner that executes an ACP tool call under a guard task tells the
/// sink which task is which call with [`AcpSink::watch`]; each `heartbeat`
/// event of that task becomes one frame:
///
/// ```json
/// {"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1",
///  "update":{"sessionUpdate":"tool_call_update","toolCallId":"call-1",
///  "status":"in_progress","_meta":{"toolName":"bash",
///  "stallwardenHeartbeat":{"type":"heartbeat","task":"call-1", …}}}}}
/// ```
///
/// The settled gate (R3.8, seed 000): once the call settles — the runner
/// sends its `completed` / `failed` update through [`AcpSink::settle`], or
/// the task finishes — no frame for it is written again. `settle` writes
/// the final update through the same ordered queue as the heartbeats, so a
/// heartbeat queued before it is written before it and none after it.
///
/// Frames go through an unbounded queue to a writer task (spawned on the
/// current tokio runtime by [`AcpSink::spawn`]) that writes and flushes
/// each line; a heartbeat every few seconds per call keeps that queue
/// short. Delivery is [`Delivery::Inline`]: building a frame and queueing
/// it never blocks.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use stallwarden_sinks::acp::AcpSink;
/// use watchdog_core::{Guard, ManualClock, Profile};
///
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// let (out, mut read) = tokio::io::duplex(1 << 16);
/// let (acp, writer) = AcpSink::spawn(out, "session-1");
/// let guard = Guard::builder().clock(ManualClock::new()).sink(acp.clone()).build();
/// acp.watch("call-1", "call-1", Some("bash"));
/// let task = guard
///     .start("call-1", Profile::default().heartbeat_interval(Some(Duration::from_secs(10))))
///     .unwrap();
/// guard.advance(Duration::from_secs(10)); // one in_progress frame
/// acp.settle("call-1", agent_client_protocol_schema::v1::ToolCallStatus::Completed).unwrap();
/// task.finish_completed();
/// // The writer ends once no clone of the sink is left: the guard, and
/// // the handle that keeps the guard alive, hold one.
/// drop((task, guard, acp));
/// writer.await.unwrap().unwrap();
/// let mut text = String::new();
/// tokio::io::AsyncReadExt::read_to_string(&mut read, &mut text).await.unwrap();
/// assert_eq!(text.lines().count(), 2); // the heartbeat, then the completion
/// # });
/// ```
#[derive(Clone)]
pub struct AcpSink {
    session: SessionId,
    /// Watched calls by task (name or id); the lock also orders gate and
    /// queue.
    calls: Arc<Mutex<HashMap<TaskRef, Call>>>,
    frames: mpsc::UnboundedSender<Vec<u8>>,
}

impl fmt::Debug for AcpSink {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AcpSink")
            .field("session", &self.session.0)
            .field("calls", &self.calls.lock().len())
            .finish()
    }
}

impl AcpSink {
    /// Creates the sink for session `session` and spawns, on the current
    /// tokio runtime, the task that writes its frames to `out`. The task
    /// ends, returning the first write error if any, once every clone of
    /// the sink is dropped and its queue is written.
    ///
    /// # Panics
    ///
    /// Outside a tokio runtime, as [`tokio::spawn`] does.
    ///
    /// # Examples
    ///
    /// ```
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// let (acp, writer) = stallwarden_sinks::acp::AcpSink::spawn(tokio::io::sink(), "s1");
    /// drop(acp);
    /// writer.await.unwrap().unwrap();
    /// # });
    /// ```
    pub fn spawn(
        out: impl AsyncWrite + Unpin + Send + 'static,
        session: impl Into<Arc<str>>,
    ) -> (AcpSink, JoinHandle<io::Result<()>>) {
        let (tx, mut rx) = mpsc::unbounded_channel::<Vec<u8>>();
        let writer = tokio::spawn(async move {
            let mut out = out;
            while let Some(frame) = rx.recv().await {
                out.write_all(&frame).await?;
                out.flush().await?;
            }
            out.shutdown().await
        });
        let sink = AcpSink {
            session: SessionId::new(session),
            calls: Arc::default(),
            frames: tx,
        };
        (sink, writer)
    }

    /// Watches `task` (by name or id, a [`TaskRef`]) as the ACP tool call
    /// `tool_call_id`; `tool_name` goes under `_meta.toolName` when given.
    /// A task watched both ways is found by its id first.
    ///
    /// # Examples
    ///
    /// ```
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// let (acp, _writer) = stallwarden_sinks::acp::AcpSink::spawn(tokio::io::sink(), "s1");
    /// acp.watch("turn-3/call-1", "call-1", Some("bash"));
    /// acp.watch(watchdog_core::TaskId::from_raw(7), "call-2", None);
    /// # });
    /// ```
    pub fn watch(&self, task: impl Into<TaskRef>, tool_call_id: &str, tool_name: Option<&str>) {
        self.calls.lock().insert(
            task.into(),
            Call {
                id: ToolCallId::new(tool_call_id),
                name: tool_name.map(str::to_owned),
                settled: false,
            },
        );
    }

    /// Settles the call watched as `task` (the same name or id it was
    /// watched by) with `status` (`completed`
    /// or `failed`): writes that update and closes the gate, so no
    /// heartbeat frame for the call follows it (R3.8). Settling twice, or
    /// a task not watched, writes nothing.
    ///
    /// # Errors
    ///
    /// When `status` is not `completed` or `failed`, or the writer has
    /// stopped (its task returned a write error or was dropped).
    ///
    /// # Examples
    ///
    /// ```
    /// use agent_client_protocol_schema::v1::ToolCallStatus;
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// let (acp, _writer) = stallwarden_sinks::acp::AcpSink::spawn(tokio::io::sink(), "s1");
    /// acp.watch("call-1", "call-1", None);
    /// acp.settle("call-1", ToolCallStatus::Completed).unwrap();
    /// assert!(acp.settle("call-1", ToolCallStatus::InProgress).is_err());
    /// # });
    /// ```
    pub fn settle(
        &self,
        task: impl Into<TaskRef>,
        status: ToolCallStatus,
    ) -> Result<(), SinkError> {
        let task = task.into();
        if !matches!(status, ToolCallStatus::Completed | ToolCallStatus::Failed) {
            return Err(SinkError::new(format!(
                "acp: settle({task}) needs status completed or failed, got {status:?}"
            )));
        }
        let mut calls = self.calls.lock();
        let Some(call) = calls.get_mut(&task) else {
            return Ok(());
        };
        if call.settled {
            return Ok(());
        }
        call.settled = true;
        let update =
            ToolCallUpdate::new(call.id.clone(), ToolCallUpdateFields::new().status(status));
        self.queue(update)
    }

    /// Serializes one update as a JSON-RPC notification line and queues it.
    fn queue(&self, update: ToolCallUpdate) -> Result<(), SinkError> {
        let params =
            SessionNotification::new(self.session.clone(), SessionUpdate::ToolCallUpdate(update));
        let message = JsonRpcMessage::wrap(Notification {
            method: Arc::from(METHOD),
            params: Some(params),
        });
        let mut line = serde_json::to_vec(&message).map_err(SinkError::new)?;
        line.push(b'\n');
        self.frames
            .send(line)
            .map_err(|_| SinkError::new("acp: the frame writer has stopped"))
    }
}

/// The call watched for the event's task: by its id, else by its name.
fn watched<'a>(calls: &'a HashMap<TaskRef, Call>, event: &Event) -> Option<&'a Call> {
    calls
        .get(&TaskRef::Id(event.task))
        .or_else(|| calls.get(&TaskRef::Name(Arc::clone(&event.name))))
}

impl Sink for AcpSink {
    fn on_event(&self, event: &Event) -> Result<(), SinkError> {
        match &event.kind {
            EventKind::Heartbeat { .. } => {
                // The gate and the queue under one lock: a settle cannot
                // slip between the check and the send.
                let calls = self.calls.lock();
                let Some(call) = watched(&calls, event) else {
                    return Ok(());
                };
                if call.settled {
                    return Ok(());
                }
                let mut meta = Meta::new();
                if let Some(name) = &call.name {
                    meta.insert("toolName".into(), name.clone().into());
                }
                meta.insert(
                    META.into(),
                    serde_json::to_value(event).map_err(SinkError::new)?,
                );
                let update = ToolCallUpdate::new(
                    call.id.clone(),
                    ToolCallUpdateFields::new().status(ToolCallStatus::InProgress),
                )
                .meta(meta);
                self.queue(update)
            }
            EventKind::Finished { .. } => {
                // The task is over, so is the call it ran: close the gate.
                let mut calls = self.calls.lock();
                for key in [
                    TaskRef::Id(event.task),
                    TaskRef::Name(Arc::clone(&event.name)),
                ] {
                    if let Some(call) = calls.get_mut(&key) {
                        call.settled = true;
                    }
                }
                Ok(())
            }
            _ => Ok(()),
        }
    }

    fn delivery(&self) -> Delivery {
        Delivery::Inline
    }

    fn name(&self) -> &str {
        "acp"
    }
}
