//! A sink that cancels one tokio-util cancellation token per task (R6.4).
//!
//! The runner asks for a task's token (by name or id, before or after the
//! task starts) and hands it to the work; the sink cancels it when the
//! guard dispatches a cancel (or kill) action for that task. This module
//! does not signal processes: that is the process sink's job.

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;

use parking_lot::Mutex;
use tokio_util::sync::CancellationToken;
use watchdog_core::{Action, ActionKind, Delivery, Event, EventKind, Sink, SinkError, TaskId};

use crate::TaskRef;

/// A started, unfinished task's tokens: usually one; two when the runner
/// asked both by id and by name before the task started.
struct Live {
    name: Arc<str>,
    tokens: Vec<CancellationToken>,
}

impl Live {
    fn token(&self) -> CancellationToken {
        self.tokens[0].clone()
    }
}

#[derive(Default)]
struct Tokens {
    /// Tokens of started, unfinished tasks.
    live: HashMap<TaskId, Live>,
    /// Live task names, to find a live task's token by name.
    names: HashMap<Arc<str>, TaskId>,
    /// Tokens asked for by name before a task of that name started.
    pending_names: HashMap<Arc<str>, CancellationToken>,
    /// Tokens asked for by id before that task started.
    pending_ids: HashMap<TaskId, CancellationToken>,
    /// The highest id seen starting: a lower id that is not live has
    /// already finished (ids are never reused within a guard).
    highest_started: Option<TaskId>,
}

/// A sink that owns one [`CancellationToken`] per task and cancels it on
/// the guard's cancel action (and on its kill action, in case the cancel
/// was missed).
///
/// Tokens are created on demand by [`CancelTokenSink::token_for`], before
/// or after the task starts; a task's token leaves the sink after its
/// `finished` event (clones already handed out keep working). Cloning the
/// sink shares the tokens, so keep a clone to ask for tokens after handing
/// the sink to a guard. Delivery is [`Delivery::Inline`]: cancelling a
/// token only wakes its waiters, so the cancel reaches the work even when
/// the host runtime is busy (R6.3).
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use stallwarden_sinks::token::CancelTokenSink;
/// use watchdog_core::{Guard, ManualClock, Profile};
///
/// let tokens = CancelTokenSink::new();
/// let guard = Guard::builder().clock(ManualClock::new()).sink(tokens.clone()).build();
/// let task = guard.start("turn", Profile::default().idle(Duration::from_secs(5))).unwrap();
/// let token = tokens.token_for("turn");
/// assert!(!token.is_cancelled());
/// guard.advance(Duration::from_secs(5)); // stalled at strike 1: cancel
/// assert!(token.is_cancelled());
/// task.finish_completed();
/// assert_eq!(tokens.live_tokens(), 0);
/// ```
#[derive(Clone, Default)]
pub struct CancelTokenSink {
    parent: Option<CancellationToken>,
    tokens: Arc<Mutex<Tokens>>,
}

impl fmt::Debug for CancelTokenSink {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let t = self.tokens.lock();
        f.debug_struct("CancelTokenSink")
            .field("live", &t.live.len())
            .field("pending", &(t.pending_names.len() + t.pending_ids.len()))
            .field("has_parent", &self.parent.is_some())
            .finish()
    }
}

impl CancelTokenSink {
    /// Creates a sink with no tokens yet.
    ///
    /// # Examples
    ///
    /// ```
    /// use stallwarden_sinks::token::CancelTokenSink;
    /// assert_eq!(CancelTokenSink::new().live_tokens(), 0);
    /// ```
    pub fn new() -> Self {
        Self::default()
    }

    /// Creates a sink whose tokens are children of `parent`: cancelling the
    /// parent (a runner shutting down) cancels every task's token too.
    ///
    /// # Examples
    ///
    /// ```
    /// use stallwarden_sinks::token::CancelTokenSink;
    /// use tokio_util::sync::CancellationToken;
    ///
    /// let shutdown = CancellationToken::new();
    /// let tokens = CancelTokenSink::with_parent(shutdown.clone());
    /// let t = tokens.token_for("job");
    /// shutdown.cancel();
    /// assert!(t.is_cancelled());
    /// ```
    pub fn with_parent(parent: CancellationToken) -> Self {
        CancelTokenSink {
            parent: Some(parent),
            tokens: Arc::default(),
        }
    }

    /// Returns the token of a task, by name or id, creating it if needed.
    ///
    /// By name: the live task of that name, or else the next task to start
    /// with that name. By id: that task, started or not. A task that has
    /// already finished gets a fresh token that nothing will cancel (its
    /// own token left the sink with its `finished` event).
    ///
    /// # Examples
    ///
    /// ```
    /// use stallwarden_sinks::token::CancelTokenSink;
    /// use watchdog_core::{Guard, ManualClock, Profile};
    ///
    /// let tokens = CancelTokenSink::new();
    /// let early = tokens.token_for("job"); // before the task starts
    /// let guard = Guard::builder().clock(ManualClock::new()).sink(tokens.clone()).build();
    /// let task = guard.start("job", Profile::default()).unwrap();
    /// let by_id = tokens.token_for(task.status().unwrap().id);
    /// task.cancel("user pressed stop").unwrap();
    /// assert!(early.is_cancelled() && by_id.is_cancelled());
    /// # task.finish_completed();
    /// ```
    pub fn token_for(&self, task: impl Into<TaskRef>) -> CancellationToken {
        let mut t = self.tokens.lock();
        match task.into() {
            TaskRef::Name(name) => {
                if let Some(id) = t.names.get(&name).copied() {
                    if let Some(live) = t.live.get(&id) {
                        return live.token();
                    }
                }
                let fresh = self.fresh();
                t.pending_names.entry(name).or_insert(fresh).clone()
            }
            TaskRef::Id(id) => {
                if let Some(live) = t.live.get(&id) {
                    return live.token();
                }
                if t.highest_started.is_some_and(|h| id <= h) {
                    return self.fresh();
                }
                let fresh = self.fresh();
                t.pending_ids.entry(id).or_insert(fresh).clone()
            }
        }
    }

    /// Returns how many started, unfinished tasks hold a token.
    pub fn live_tokens(&self) -> usize {
        self.tokens.lock().live.len()
    }

    fn fresh(&self) -> CancellationToken {
        self.parent
            .as_ref()
            .map_or_else(CancellationToken::new, CancellationToken::child_token)
    }

    /// The live entry of `id`, created if the task's `started` was not seen.
    fn live_entry<'a>(&self, t: &'a mut Tokens, id: TaskId, name: &Arc<str>) -> &'a mut Live {
        if !t.live.contains_key(&id) {
            self.adopt(t, id, name);
        }
        t.live.get_mut(&id).expect("adopted above")
    }

    /// Binds the tokens asked for before `started` (by id and by name) to
    /// the task, so all of them are cancelled together.
    fn adopt(&self, t: &mut Tokens, id: TaskId, name: &Arc<str>) {
        let mut tokens: Vec<CancellationToken> = t
            .pending_ids
            .remove(&id)
            .into_iter()
            .chain(t.pending_names.remove(name))
            .collect();
        if tokens.is_empty() {
            tokens.push(self.fresh());
        }
        t.live.insert(
            id,
            Live {
                name: Arc::clone(name),
                tokens,
            },
        );
        t.names.insert(Arc::clone(name), id);
        if t.highest_started.is_none_or(|h| id > h) {
            t.highest_started = Some(id);
        }
    }
}

impl Sink for CancelTokenSink {
    fn on_event(&self, event: &Event) -> Result<(), SinkError> {
        let mut t = self.tokens.lock();
        match event.kind {
            EventKind::Started { .. } => {
                self.adopt(&mut t, event.task, &event.name);
            }
            EventKind::Finished { .. } => {
                if let Some(live) = t.live.remove(&event.task) {
                    if t.names.get(&live.name) == Some(&event.task) {
                        t.names.remove(&live.name);
                    }
                }
            }
            _ => {}
        }
        Ok(())
    }

    fn on_action(&self, action: &Action) -> Result<(), SinkError> {
        match action.kind {
            ActionKind::Cancel { .. } | ActionKind::Kill => {
                let mut t = self.tokens.lock();
                for token in &self.live_entry(&mut t, action.task, &action.name).tokens {
                    token.cancel();
                }
            }
            _ => {}
        }
        Ok(())
    }

    fn delivery(&self) -> Delivery {
        Delivery::Inline
    }

    fn name(&self) -> &str {
        "cancel-token"
    }
}
