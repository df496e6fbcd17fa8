//! A task's outbox: what its verdicts and operations emit while the
//! scheduler lock is held ([`Emitted`]), handed to the dispatcher once the
//! lock is released, and the item every sink receives ([`Item`]). A stall
//! is emitted unresolved: its fresh look at the process tree and its
//! at-stall steps run in [`Emitted::resolve`], on the draining thread,
//! with no lock of the guard held (R8.13, R8.14).

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;

use crate::state::probe::ChildProbe;
use crate::vocab::at_stall::{ReportSlot, StallReport};
use crate::vocab::event::{Action, ChildInfo, Event, EventKind};
use crate::vocab::sink::AtStall;

#[derive(Clone, Debug)]
pub(crate) enum Item {
    Event(Arc<Event>),
    Action(Arc<Action>),
}

/// What the scheduler puts into the outbox: an item ready for the sinks,
/// or a `stalled` event still owed its fresh look at the tree.
pub(crate) enum Emitted {
    Ready(Item),
    /// A `stalled` event whose `children` the drainer fills in from the
    /// probe's [`ChildProbe::verdict_children`], outside the scheduler
    /// lock (R8.13), and whose stacks and `on-stall` run the guard's
    /// [`AtStall`] steps take there too, with the task's pid (R8.14).
    Stalled(
        Box<Event>,
        Option<Arc<dyn ChildProbe>>,
        Option<u32>,
        ReportSlot,
    ),
}

impl From<Item> for Emitted {
    fn from(item: Item) -> Self {
        Emitted::Ready(item)
    }
}

impl Emitted {
    /// The item the sinks get: a pending stall takes its look at the tree
    /// now, on the draining thread, with no scheduler lock held, then the
    /// `at_stall` steps in order (R8.14).
    pub(crate) fn resolve(self, at_stall: &[Arc<dyn AtStall>]) -> Item {
        match self {
            Emitted::Ready(item) => item,
            Emitted::Stalled(mut event, probe, pid, slot) => {
                if let Some(probe) = probe {
                    // A probe is the runner's code: one that panics costs the
                    // stall its children, never the event (R6.2, R10.5).
                    let look = catch_unwind(AssertUnwindSafe(|| probe.verdict_children()));
                    let look = look.unwrap_or_else(|_| {
                        tracing::error!(task = %event.name, "child probe panicked: the stall names no children");
                        None
                    });
                    if let EventKind::Stalled { children, .. } = &mut event.kind {
                        *children = look.map(ChildInfo::suspects);
                    }
                }
                for step in at_stall {
                    let report = catch_unwind(AssertUnwindSafe(|| step.at_stall(&event, pid)));
                    let Ok(report) = report else {
                        tracing::error!(task = %event.name, step = ?step, "at-stall step panicked: the stall has no report from it");
                        continue;
                    };
                    if let EventKind::Stalled {
                        stacks, on_stall, ..
                    } = &mut event.kind
                    {
                        stacks.extend(report.stacks);
                        if report.on_stall.is_some() {
                            *on_stall = report.on_stall;
                        }
                    }
                }
                if let EventKind::Stalled {
                    stacks, on_stall, ..
                } = &event.kind
                {
                    if !at_stall.is_empty() {
                        *slot.lock() = Some(StallReport {
                            stacks: stacks.clone(),
                            on_stall: on_stall.clone(),
                        });
                    }
                }
                Item::Event(Arc::new(*event))
            }
        }
    }
}

impl Item {
    pub(crate) fn is_heartbeat(&self) -> bool {
        matches!(self, Item::Event(e) if matches!(e.kind, EventKind::Heartbeat { .. }))
    }
}
