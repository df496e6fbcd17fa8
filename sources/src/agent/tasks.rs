//! What an agent stream says about work with no tool in flight: working
//! statuses (Claude Code's `compacting`), which hold the execution budget
//! until the next event, and the tasks it tracks, which feed the owner's
//! background record (R5.6, R5.10).
//!
//! Claude Code 2.1 (observed headless against a local model) writes
//! `system`/`task_started` for a Bash call about 3 s into it
//! (`is_backgrounded: false`) and at once for `run_in_background`
//! (`is_backgrounded: true`), `system`/`task_notification` with an end
//! status when the task ends, and `system`/`background_tasks_changed`
//! with the complete list of background tasks. A task whose launching call
//! is still in flight is that call's work (the call holds the execution
//! budget); it becomes a background task when launched as one, or when its
//! call returns while it still runs (a shell moved to the background).

use watchdog_core::{BackgroundKind, CallOutcome, Recorder, SignalKind};

use crate::background::{
    BackgroundError, BackgroundRecord, EndNotice, EndStatus, Provenance, RowOp, SessionBoundary,
    MAX_PER_OWNER,
};

/// The id of the call that stands for a working status while it holds.
const HOLD_ID: &str = "stallwarden:agent-working";

/// A `task_started` report.
pub(super) struct Started<'v> {
    pub(super) task: &'v str,
    pub(super) launch: Option<&'v str>,
    pub(super) kind: BackgroundKind,
    pub(super) backgrounded: bool,
    pub(super) from: Provenance<'v>,
}

/// A task whose launching call is still in flight.
struct Pending {
    task: String,
    launch: String,
    kind: BackgroundKind,
}

pub(super) struct Tasks {
    recorder: Recorder,
    record: BackgroundRecord,
    /// At most [`MAX_PER_OWNER`]; older ones are dropped first.
    pending: Vec<Pending>,
    session: Option<String>,
    holding: bool,
}

impl Tasks {
    pub(super) fn new(recorder: Recorder) -> Tasks {
        Tasks {
            record: BackgroundRecord::new(recorder.clone()),
            recorder,
            pending: Vec::new(),
            session: None,
            holding: false,
        }
    }

    pub(super) fn record(&self) -> &BackgroundRecord {
        &self.record
    }

    /// A working status: held as a call named by the status until the next
    /// event line, so the execution budget applies (R5.10, R2.2).
    pub(super) fn hold(&mut self, status: &str) {
        self.release_hold();
        let name = super::call_name(status, None);
        // A refusal is counted on the task (`tools.`, R10.6).
        self.holding = crate::tools::start(&self.recorder, HOLD_ID, &name).is_ok();
    }

    /// Ends a working status's hold, if one is held.
    pub(super) fn release_hold(&mut self) {
        if std::mem::take(&mut self.holding) {
            let _ = self.recorder.tool_finished(HOLD_ID, CallOutcome::Success);
        }
    }

    pub(super) fn started(&mut self, s: Started<'_>, call_in_flight: bool) {
        let Some(launch) = s.launch.filter(|l| !l.is_empty()) else {
            // No launching call to match an end with: the next inventory
            // names it if it runs in the background.
            self.record.refuse(BackgroundError::NoLaunch(cut(s.task)));
            return;
        };
        if matches!(s.from, Provenance::Agent) && !s.backgrounded && call_in_flight {
            if self.pending.len() >= MAX_PER_OWNER {
                self.pending.remove(0);
            }
            self.pending.retain(|p| p.task != s.task);
            self.pending.push(Pending {
                task: s.task.to_owned(),
                launch: launch.to_owned(),
                kind: s.kind,
            });
            return;
        }
        // A launch the record does not apply is counted on the task
        // (`background.`, R10.6).
        let _ = self.record.launch_from(s.task, launch, s.kind, s.from);
    }

    /// Call `id` returned: tasks it launched that still run are in the
    /// background now.
    pub(super) fn call_returned(&mut self, id: &str) {
        let (moved, kept): (Vec<Pending>, Vec<Pending>) = std::mem::take(&mut self.pending)
            .into_iter()
            .partition(|p| p.launch == id);
        self.pending = kept;
        for p in moved {
            let _ = self.record.launch(&p.task, &p.launch, p.kind);
        }
    }

    pub(super) fn ended(&mut self, task: &str, launch: Option<&str>, status: EndStatus) {
        self.recorder.signal(SignalKind::ToolCall);
        let before = self.pending.len();
        self.pending
            .retain(|p| !(p.task == task && status.is_end()));
        if self.pending.len() != before {
            return;
        }
        let Some(launch) = launch else {
            self.record.refuse(BackgroundError::NoLaunch(cut(task)));
            return;
        };
        let notice = EndNotice {
            task,
            launch,
            status,
        };
        let _ = self.record.end_row(RowOp::Enqueue, &[notice]);
    }

    /// The complete list of background tasks: replaces the record, leaving
    /// out tasks whose launching call is still in flight.
    pub(super) fn inventory(&mut self, items: &[(&str, BackgroundKind)]) {
        let pending = &self.pending;
        let listed = items
            .iter()
            .copied()
            .filter(|(id, _)| !pending.iter().any(|p| p.task == *id));
        // Each item not stored is counted on the task by the record.
        let _ = self.record.inventory(listed);
    }

    /// A session id: a new one clears the record (a new process can never
    /// end its predecessor's tasks); the same id again keeps it.
    pub(super) fn session(&mut self, id: &str) {
        let id = super::names::cut_bytes(id.to_owned(), 256);
        match self.session.as_deref() {
            Some(prev) if prev == id => {}
            Some(_) => {
                self.record.session(SessionBoundary::New);
                self.pending.clear();
                self.session = Some(id);
            }
            None => self.session = Some(id),
        }
    }

    /// The turn ended: calls still in flight were abandoned, and so were
    /// the tasks waiting on them.
    pub(super) fn turn_end(&mut self) {
        self.pending.clear();
    }
}

/// An untrusted task id for an error message, cut to 256 bytes.
fn cut(id: &str) -> String {
    super::names::cut_bytes(id.to_owned(), 256)
}
