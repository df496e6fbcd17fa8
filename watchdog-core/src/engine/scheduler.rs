//! The registry under the scheduler lock: every live task in the slab,
//! indexed by name in four bytes a task, and the timer heap (R9.3).

use std::hash::{BuildHasher, RandomState};
use std::sync::Arc;

use hashbrown::HashTable;

use crate::engine::slab::Slab;
use crate::engine::timers::TimerHeap;
use crate::state::task::Task;
use crate::vocab::clock::Nanos;
use crate::vocab::profile::Profile;

#[derive(Default)]
pub(super) struct Scheduler {
    /// Every live task, by slot.
    pub(super) slab: Slab,
    /// Slots of live tasks, by the hash of their names: four bytes a task,
    /// where a map keyed by name would hold the name pointer again (R9.3).
    pub(super) names: HashTable<u32>,
    pub(super) hasher: RandomState,
    /// One entry per armed task, due instants kept in the cells.
    pub(super) timers: TimerHeap,
    /// When the driver plans to wake; an earlier due must unpark it.
    pub(super) planned_wake: Option<Nanos>,
    /// The profile of the last task started, shared with the next task
    /// started with an equal one.
    pub(super) last_profile: Option<Arc<Profile>>,
}

impl Scheduler {
    /// Returns the slot of the live task named `name`.
    pub(super) fn find(&self, name: &str) -> Option<u32> {
        let hash = self.hasher.hash_one(name);
        let slab = &self.slab;
        self.names
            .find(hash, |&slot| {
                slab.ctl(slot).is_some_and(|t| &*t.name == name)
            })
            .copied()
    }

    /// Indexes a just inserted task by its name.
    pub(super) fn add_name(&mut self, slot: u32) {
        let Scheduler {
            slab,
            names,
            hasher,
            ..
        } = self;
        let Some(t) = slab.ctl(slot) else {
            return;
        };
        let hash = hasher.hash_one(&*t.name);
        names.insert_unique(hash, slot, |&s| {
            slab.ctl(s).map_or(0, |t| hasher.hash_one(&*t.name))
        });
    }

    /// Returns a live task, joined with its cell.
    pub(super) fn task(&mut self, slot: u32) -> Option<Task<'_>> {
        self.slab
            .get_mut(slot)
            .map(|(ctl, cell)| Task { ctl, cell })
    }

    /// Forgets a finished task: its timer, its name and its slow state.
    pub(super) fn remove(&mut self, slot: u32) {
        self.timers.set(&self.slab, slot, None);
        let Some(t) = self.slab.ctl(slot) else {
            return;
        };
        let hash = self.hasher.hash_one(&*t.name);
        if let Ok(entry) = self.names.find_entry(hash, |&s| s == slot) {
            entry.remove();
        }
        self.slab.remove(slot);
    }
}
