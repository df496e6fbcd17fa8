//! Background-task records (R5.6).
//!
//! A [`BackgroundRecord`] holds what one owner task launched in the
//! background and still runs (a shell left running, a monitor, a workflow),
//! and pushes it to the owner after every change, so the owner shows as
//! `monitoring` (busy, not done) while the record is non-empty (R4.3).
//! Watching the background tasks' own output is not done here: each is a
//! task of its own if the runner wants one. A report the record cannot
//! apply is an error to the caller and is counted on the owner under
//! `background.` and the reason (R10.6).

use std::fmt;

use watchdog_core::{BackgroundKind, BackgroundTask, Recorder};

use crate::refusal::{refuse, Refusal};

/// The longest background task id accepted, in bytes.
pub const MAX_ID: usize = 256;

/// The most background tasks one owner's record holds.
pub const MAX_PER_OWNER: usize = 64;

/// Why a background-task report was refused or only partly applied;
/// counted on the owner task under `background.` and the reason (R10.6).
///
/// # Examples
///
/// ```
/// use stallwarden_sources::background::BackgroundError;
/// use stallwarden_sources::Refusal;
/// let e = BackgroundError::IdTooLong(300);
/// assert_eq!(e.to_string(), "background task id is 300 bytes, more than 256");
/// assert_eq!(e.key(), "background.id_too_long");
/// ```
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum BackgroundError {
    /// An empty background task id.
    #[error("background task id is empty")]
    EmptyId,
    /// An id longer than [`MAX_ID`] bytes; not stored.
    #[error("background task id is {0} bytes, more than 256")]
    IdTooLong(usize),
    /// The record already holds [`MAX_PER_OWNER`] tasks: the new one was not
    /// stored and the owner is marked as running an unnamed task.
    #[error("owner already records 64 background tasks; `{0}` runs unnamed")]
    Full(String),
    /// An end or kill result for a task not in the record.
    #[error("no background task `{0}` is recorded")]
    UnknownTask(String),
    /// A launch by a subagent (a launch row carrying the subagent's
    /// `parent_tool_use_id`): its shell is the subagent's own work, held by
    /// the subagent's call, and is not recorded for the owner.
    #[error("background task `{task}` was launched by a subagent (parent call `{parent}`); not recorded")]
    SubagentLaunch {
        /// The background task id.
        task: String,
        /// The subagent's parent call id, `-` when the row names none.
        parent: String,
    },
    /// An end row that retires nothing: a `remove` operation, not exactly
    /// one notification, or a status that is not an end (`running`).
    #[error("end row retires nothing: {0}")]
    NotAnEnd(&'static str),
    /// An end whose launch id does not match the recorded one; the task
    /// stays recorded.
    #[error("background task `{task}` was not launched by `{launch}`")]
    LaunchMismatch {
        /// The background task id.
        task: String,
        /// The launch id the end named.
        launch: String,
    },
    /// A launch or end that names no launching call, so no end can be
    /// matched with it (an agent stream's `task_started` without a
    /// `tool_use_id`); the next inventory names it if it runs.
    #[error("background task `{0}` names no launching call")]
    NoLaunch(String),
}

impl Refusal for BackgroundError {
    /// `background.` and the reason, e.g. `background.unknown_task`.
    fn key(&self) -> &'static str {
        match self {
            BackgroundError::EmptyId => "background.empty_id",
            BackgroundError::IdTooLong(_) => "background.id_too_long",
            BackgroundError::Full(_) => "background.full",
            BackgroundError::UnknownTask(_) => "background.unknown_task",
            BackgroundError::SubagentLaunch { .. } => "background.subagent_launch",
            BackgroundError::NotAnEnd(_) => "background.not_an_end",
            BackgroundError::LaunchMismatch { .. } => "background.launch_mismatch",
            BackgroundError::NoLaunch(_) => "background.no_launch",
        }
    }
}

/// Who launched a background task (R5.6, seed 002).
///
/// # Examples
///
/// ```
/// use stallwarden_sources::background::Provenance;
/// let p = Provenance::Subagent { parent_tool_use_id: Some("toolu_task_1") };
/// assert_ne!(p, Provenance::Agent);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Provenance<'a> {
    /// The owner agent itself (a row with no `parent_tool_use_id`).
    Agent,
    /// A subagent the owner started: its shell is the subagent's work.
    Subagent {
        /// The call that started the subagent, when the row names it.
        parent_tool_use_id: Option<&'a str>,
    },
}

/// A session boundary the owner's agent crossed (R5.6, seed 002).
///
/// # Examples
///
/// ```
/// use stallwarden_sources::background::SessionBoundary;
/// assert_ne!(SessionBoundary::New, SessionBoundary::Clear);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum SessionBoundary {
    /// A new process or session (`startup`, `resume`, a new session id): it
    /// can never end its predecessor's tasks, so the record is cleared.
    New,
    /// `/clear` in the same process: its shells keep running and report
    /// their end in the new session, so the record is kept.
    Clear,
}

/// What an end row does with the notifications it carries.
///
/// # Examples
///
/// ```
/// use stallwarden_sources::background::RowOp;
/// assert_ne!(RowOp::Enqueue, RowOp::Remove);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum RowOp {
    /// The notification is added (written when the task ends).
    Enqueue,
    /// A queued notification is taken away: not an end.
    Remove,
}

/// The status an end notification reports for its task.
///
/// # Examples
///
/// ```
/// use stallwarden_sources::background::EndStatus;
/// assert_eq!(EndStatus::from_wire("completed"), EndStatus::Completed);
/// assert!(EndStatus::from_wire("killed").is_end());
/// assert!(!EndStatus::from_wire("running").is_end());
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum EndStatus {
    /// Ended by itself.
    Completed,
    /// Ended with a failure.
    Failed,
    /// Stopped or killed.
    Stopped,
    /// Still running (a progress row): not an end.
    Running,
    /// Any other word: not an end.
    Other,
}

impl EndStatus {
    /// Reads a status word as the agent CLIs write it (`completed`,
    /// `failed`, `stopped`, `killed`, `running`, `pending`, ...).
    pub fn from_wire(s: &str) -> EndStatus {
        match s {
            "completed" | "success" => EndStatus::Completed,
            "failed" | "error" => EndStatus::Failed,
            "stopped" | "killed" | "cancelled" => EndStatus::Stopped,
            "running" | "pending" | "paused" => EndStatus::Running,
            _ => EndStatus::Other,
        }
    }

    /// Returns true for a status that says the task ended.
    pub fn is_end(self) -> bool {
        matches!(
            self,
            EndStatus::Completed | EndStatus::Failed | EndStatus::Stopped
        )
    }
}

/// One notification of an end row: the task, the call that launched it,
/// and the status it reports.
///
/// # Examples
///
/// ```
/// use stallwarden_sources::background::{EndNotice, EndStatus};
/// let n = EndNotice { task: "b9miywpi3", launch: "toolu_1", status: EndStatus::Completed };
/// assert!(n.status.is_end());
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EndNotice<'a> {
    /// The background task id.
    pub task: &'a str,
    /// The id of the call that launched it.
    pub launch: &'a str,
    /// The status the notification reports.
    pub status: EndStatus,
}

/// One owner task's record of the background tasks it launched (R5.6).
///
/// Producers: [`launch`](Self::launch), [`inventory`](Self::inventory),
/// [`end`](Self::end) and [`kill_result`](Self::kill_result). After each
/// change the record is pushed to the owner with
/// [`Recorder::set_background`].
///
/// # Examples
///
/// ```
/// use stallwarden_sources::background::BackgroundRecord;
/// use watchdog_core::{BackgroundKind, Guard, ManualClock, Profile, TaskState};
///
/// let guard = Guard::builder().clock(ManualClock::new()).build();
/// let turn = guard.start("turn", Profile::default()).unwrap();
/// let mut bg = BackgroundRecord::new(turn.recorder());
/// bg.launch("shell-1", "toolu_7", BackgroundKind::Command).unwrap();
/// assert_eq!(turn.status().unwrap().state, TaskState::Monitoring);
/// assert!(bg.end("shell-1", "toolu_other").is_err()); // both ids must match
/// bg.end("shell-1", "toolu_7").unwrap();
/// assert_eq!(turn.status().unwrap().state, TaskState::Working);
/// ```
pub struct BackgroundRecord {
    recorder: Recorder,
    /// In launch order; at most [`MAX_PER_OWNER`], so a linear scan is fine.
    tasks: Vec<BackgroundTask>,
    unnamed: bool,
}

impl fmt::Debug for BackgroundRecord {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BackgroundRecord")
            .field("owner", &self.recorder.id())
            .field("tasks", &self.tasks.len())
            .field("unnamed", &self.unnamed)
            .finish()
    }
}

impl BackgroundRecord {
    /// Creates an empty record for the owner task behind `recorder`.
    pub fn new(recorder: Recorder) -> Self {
        BackgroundRecord {
            recorder,
            tasks: Vec::new(),
            unnamed: false,
        }
    }

    /// Records that call `launch_id` started background task `id` of `kind`.
    ///
    /// Launching an id already recorded replaces its launch id and kind.
    /// Past [`MAX_PER_OWNER`] the task is not stored, the owner is marked as
    /// running an unnamed task, and [`BackgroundError::Full`] says so.
    pub fn launch(
        &mut self,
        id: &str,
        launch_id: &str,
        kind: BackgroundKind,
    ) -> Result<(), BackgroundError> {
        let r = self.try_launch(id, launch_id, kind);
        self.counted(r)
    }

    fn try_launch(
        &mut self,
        id: &str,
        launch_id: &str,
        kind: BackgroundKind,
    ) -> Result<(), BackgroundError> {
        check_id(id)?;
        check_id(launch_id)?;
        let result = if let Some(t) = self.find_mut(id) {
            t.launch_id = Some(launch_id.to_owned());
            t.kind = kind;
            Ok(())
        } else if self.tasks.len() >= MAX_PER_OWNER {
            self.unnamed = true;
            Err(BackgroundError::Full(id.to_owned()))
        } else {
            self.tasks.push(BackgroundTask {
                id: id.to_owned(),
                launch_id: Some(launch_id.to_owned()),
                kind,
            });
            Ok(())
        };
        self.push();
        result
    }

    /// Replaces the whole record with `items` (id and kind of every
    /// background task still running), keeping each surviving task's launch
    /// id; the inventory's kind wins.
    ///
    /// An item with a bad id (empty, or over [`MAX_ID`] bytes) names a task
    /// that runs but cannot be stored: it is skipped and marks the owner as
    /// running an unnamed task, as do items past [`MAX_PER_OWNER`].
    /// Otherwise an inventory clears that mark: it is the complete list.
    /// Returns the problems found, empty when every item was stored.
    pub fn inventory<'a, I>(&mut self, items: I) -> Vec<BackgroundError>
    where
        I: IntoIterator<Item = (&'a str, BackgroundKind)>,
    {
        let mut problems = Vec::new();
        let mut next: Vec<BackgroundTask> = Vec::new();
        let mut unnamed = false;
        for (id, kind) in items {
            if let Err(e) = check_id(id) {
                unnamed = true;
                problems.push(e);
                continue;
            }
            if let Some(t) = next.iter_mut().find(|t| t.id == id) {
                t.kind = kind; // listed twice: the later entry wins
                continue;
            }
            if next.len() >= MAX_PER_OWNER {
                unnamed = true;
                problems.push(BackgroundError::Full(id.to_owned()));
                continue;
            }
            let launch_id = self.find_mut(id).and_then(|t| t.launch_id.take());
            next.push(BackgroundTask {
                id: id.to_owned(),
                launch_id,
                kind,
            });
        }
        self.tasks = next;
        self.unnamed = unnamed;
        self.push();
        problems
            .into_iter()
            .map(|e| refuse(&self.recorder, e))
            .collect()
    }

    /// Retires background task `id`, only if it was launched by call
    /// `launch_id`: either id alone does not retire it.
    ///
    /// A task known only from an inventory has no launch id and cannot be
    /// retired this way; a kill result or the next inventory retires it.
    pub fn end(&mut self, id: &str, launch_id: &str) -> Result<(), BackgroundError> {
        let r = self.try_end(id, launch_id);
        self.counted(r)
    }

    fn try_end(&mut self, id: &str, launch_id: &str) -> Result<(), BackgroundError> {
        let pos = self.position(id)?;
        if self.tasks[pos].launch_id.as_deref() != Some(launch_id) {
            return Err(BackgroundError::LaunchMismatch {
                task: id.to_owned(),
                launch: cut(launch_id).to_owned(),
            });
        }
        self.tasks.remove(pos);
        self.push();
        Ok(())
    }

    /// Records a launch with its provenance: an [`Provenance::Agent`] launch
    /// is [`launch`](Self::launch); a subagent's launch is not recorded
    /// (its shell is the subagent's own work, held by the subagent's call)
    /// and [`BackgroundError::SubagentLaunch`] says so.
    ///
    /// # Examples
    ///
    /// ```
    /// use stallwarden_sources::background::{BackgroundRecord, Provenance};
    /// use watchdog_core::{BackgroundKind, Guard, ManualClock, Profile};
    ///
    /// let guard = Guard::builder().clock(ManualClock::new()).build();
    /// let turn = guard.start("turn", Profile::default()).unwrap();
    /// let mut bg = BackgroundRecord::new(turn.recorder());
    /// let sub = Provenance::Subagent { parent_tool_use_id: Some("toolu_task") };
    /// assert!(bg.launch_from("b1", "toolu_2", BackgroundKind::Command, sub).is_err());
    /// assert!(bg.is_empty());
    /// bg.launch_from("b2", "toolu_3", BackgroundKind::Command, Provenance::Agent).unwrap();
    /// assert_eq!(bg.tasks().len(), 1);
    /// ```
    pub fn launch_from(
        &mut self,
        id: &str,
        launch_id: &str,
        kind: BackgroundKind,
        from: Provenance<'_>,
    ) -> Result<(), BackgroundError> {
        let r = match from {
            Provenance::Agent => self.try_launch(id, launch_id, kind),
            Provenance::Subagent { parent_tool_use_id } => Err(BackgroundError::SubagentLaunch {
                task: cut(id).to_owned(),
                parent: cut(parent_tool_use_id.unwrap_or("-")).to_owned(),
            }),
        };
        self.counted(r)
    }

    /// The owner's agent crossed a session boundary: a
    /// [`SessionBoundary::New`] session clears the record (and the unnamed
    /// mark); [`SessionBoundary::Clear`] keeps it.
    ///
    /// # Examples
    ///
    /// ```
    /// use stallwarden_sources::background::{BackgroundRecord, SessionBoundary};
    /// use watchdog_core::{BackgroundKind, Guard, ManualClock, Profile};
    ///
    /// let guard = Guard::builder().clock(ManualClock::new()).build();
    /// let turn = guard.start("turn", Profile::default()).unwrap();
    /// let mut bg = BackgroundRecord::new(turn.recorder());
    /// bg.launch("b1", "toolu_1", BackgroundKind::Command).unwrap();
    /// bg.session(SessionBoundary::Clear);
    /// assert_eq!(bg.tasks().len(), 1);
    /// bg.session(SessionBoundary::New);
    /// assert!(bg.is_empty());
    /// ```
    pub fn session(&mut self, boundary: SessionBoundary) {
        if boundary == SessionBoundary::New && !self.is_empty() {
            self.tasks.clear();
            self.unnamed = false;
            self.push();
        }
    }

    /// Applies an end row: it retires a task only when it is an
    /// [`RowOp::Enqueue`] of exactly one notification whose status is an
    /// end and that names both the task and its launching call
    /// ([`end`](Self::end)). A `remove`, two notifications in one row, or a
    /// `running` status retire nothing ([`BackgroundError::NotAnEnd`]).
    ///
    /// # Examples
    ///
    /// ```
    /// use stallwarden_sources::background::{BackgroundRecord, EndNotice, EndStatus, RowOp};
    /// use watchdog_core::{BackgroundKind, Guard, ManualClock, Profile};
    ///
    /// let guard = Guard::builder().clock(ManualClock::new()).build();
    /// let turn = guard.start("turn", Profile::default()).unwrap();
    /// let mut bg = BackgroundRecord::new(turn.recorder());
    /// bg.launch("b1", "toolu_1", BackgroundKind::Command).unwrap();
    /// let running = EndNotice { task: "b1", launch: "toolu_1", status: EndStatus::Running };
    /// assert!(bg.end_row(RowOp::Enqueue, &[running]).is_err());
    /// let done = EndNotice { status: EndStatus::Completed, ..running };
    /// assert!(bg.end_row(RowOp::Remove, &[done]).is_err());
    /// assert!(bg.end_row(RowOp::Enqueue, &[done, done]).is_err());
    /// bg.end_row(RowOp::Enqueue, &[done]).unwrap();
    /// assert!(bg.is_empty());
    /// ```
    pub fn end_row(&mut self, op: RowOp, notices: &[EndNotice<'_>]) -> Result<(), BackgroundError> {
        let r = self.try_end_row(op, notices);
        self.counted(r)
    }

    fn try_end_row(&mut self, op: RowOp, notices: &[EndNotice<'_>]) -> Result<(), BackgroundError> {
        if op == RowOp::Remove {
            return Err(BackgroundError::NotAnEnd("a remove operation"));
        }
        let [notice] = notices else {
            return Err(BackgroundError::NotAnEnd(if notices.is_empty() {
                "no notification"
            } else {
                "more than one notification in one row"
            }));
        };
        if !notice.status.is_end() {
            return Err(BackgroundError::NotAnEnd("the status is not an end"));
        }
        self.try_end(notice.task, notice.launch)
    }

    /// Retires background task `id` after a kill confirmed it ended.
    pub fn kill_result(&mut self, id: &str) -> Result<(), BackgroundError> {
        let r = self.position(id).map(|pos| {
            self.tasks.remove(pos);
            self.push();
        });
        self.counted(r)
    }

    /// Counts a report the record does not apply, reported by its caller
    /// rather than this record (an agent stream's `task_started` naming no
    /// launching call); returns it.
    pub(crate) fn refuse(&self, e: BackgroundError) -> BackgroundError {
        refuse(&self.recorder, e)
    }

    /// Returns the recorded background tasks, in launch order.
    pub fn tasks(&self) -> &[BackgroundTask] {
        &self.tasks
    }

    /// Returns true when a task past the cap runs unnamed.
    pub fn has_unnamed(&self) -> bool {
        self.unnamed
    }

    /// Returns true when nothing is recorded and nothing runs unnamed.
    pub fn is_empty(&self) -> bool {
        self.tasks.is_empty() && !self.unnamed
    }

    fn find_mut(&mut self, id: &str) -> Option<&mut BackgroundTask> {
        self.tasks.iter_mut().find(|t| t.id == id)
    }

    fn position(&self, id: &str) -> Result<usize, BackgroundError> {
        self.tasks
            .iter()
            .position(|t| t.id == id)
            .ok_or_else(|| BackgroundError::UnknownTask(cut(id).to_owned()))
    }

    /// Counts a refused report on the owner (R10.6).
    fn counted<T>(&self, r: Result<T, BackgroundError>) -> Result<T, BackgroundError> {
        r.map_err(|e| refuse(&self.recorder, e))
    }

    fn push(&self) {
        self.recorder
            .set_background(self.tasks.clone(), self.unnamed);
    }
}

fn check_id(id: &str) -> Result<(), BackgroundError> {
    if id.is_empty() {
        Err(BackgroundError::EmptyId)
    } else if id.len() > MAX_ID {
        Err(BackgroundError::IdTooLong(id.len()))
    } else {
        Ok(())
    }
}

/// Cuts an untrusted id for error messages to [`MAX_ID`] bytes.
fn cut(id: &str) -> &str {
    let mut end = id.len().min(MAX_ID);
    while !id.is_char_boundary(end) {
        end -= 1;
    }
    &id[..end]
}
