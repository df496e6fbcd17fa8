//! Where tasks live (R9.3): hot cells in cache-line-aligned chunks that
//! recorders share, slow state in chunks the scheduler owns, both indexed
//! by one slot number.
//!
//! A task costs its 128-byte cell, its timer's due instant and its slow
//! state, with no allocator
//! header, no `Arc` per task and no table grown to a power of two: chunks
//! hold [`CHUNK`] tasks each. A recorder holds its chunk and counts itself
//! in the cell's `refs`; a slot is reused only when the task has finished
//! and the last recorder is gone, so a late signal from an old recorder can
//! never land in a new task's cell.
//!
//! # Invariants
//!
//! - The [`Slab`] itself (`ctls`, `dues`, `live`, the chunk list) belongs
//!   to the scheduler: it lives inside `Scheduler`, behind the guard's one
//!   scheduler lock, and every method that takes `&mut self` or reads a
//!   task's slow state runs under that lock.
//! - A cell's `refs` counts its holders: one for the scheduler while the
//!   task is live (dropped by [`Slab::remove`]) and one per [`CellRef`]
//!   (recorders, output counters, repeat judges, on any thread). Clones
//!   add with `Relaxed`, as `Arc` does; drops subtract with `Release`, and
//!   the holder that brings it to zero takes an `Acquire` fence before it
//!   puts the slot on the free list. So every write of an old holder
//!   happens before the slot's next [`Slab::insert`].
//! - A slot is on the free list only while its `refs` is zero and its
//!   `ctls` entry is `None`; [`Slab::insert`] resets the cell (`init_cell`)
//!   while nobody holds it, then stores `refs = 2` (the scheduler and the
//!   recorder it returns) before anyone else can see the slot.
//! - A [`CellRef`] keeps its whole chunk alive (`Arc<CellChunk>`), so a
//!   recorder's store never lands in freed memory, even after the guard is
//!   gone.
//! - `dues` holds each slot's timer due instant, `Nanos::MAX` when
//!   unarmed; only the scheduler reads or writes it (R9.3).
//!
//! # Lock order
//!
//! The free list's `Mutex` is a leaf: it is taken under the scheduler lock
//! (insert, remove, grow) or under no lock at all (the last [`CellRef`]
//! dropped on a recorder's thread), and nothing else is taken while it is
//! held. The record path never takes it: only a drop that frees a slot
//! does.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use crate::loom::sync::atomic::fence;
use crate::loom::sync::Mutex;

use crate::state::cell::{TaskCell, Word};
use crate::state::task::TaskCtl;
use crate::vocab::clock::Nanos;

/// Tasks per chunk: 32 KiB of cells.
#[cfg(not(loom))]
pub(crate) const CHUNK: usize = 256;
/// Under loom every cell is a dozen modelled atomics: a few per chunk.
#[cfg(loom)]
pub(crate) const CHUNK: usize = 4;

/// Slots whose task finished and whose last holder let go.
type FreeList = Arc<Mutex<Vec<u32>>>;

/// [`CHUNK`] cells, shared by the recorders of their tasks.
#[derive(Debug)]
pub(crate) struct CellChunk {
    cells: [TaskCell; CHUNK],
    /// Slot of `cells[0]`.
    base: u32,
    free: FreeList,
}

/// A counted reference to one task's cell: what a recorder writes through.
#[derive(Debug)]
pub(crate) struct CellRef {
    chunk: Arc<CellChunk>,
    index: u8,
}

// A `u8` indexes a chunk; at 256 cells, with no bounds check.
const _: () = assert!(CHUNK - 1 <= u8::MAX as usize);

impl CellRef {
    /// Returns the slot of this cell's task.
    pub(crate) fn slot(&self) -> u32 {
        self.chunk.base + u32::from(self.index)
    }
}

impl std::ops::Deref for CellRef {
    type Target = TaskCell;
    #[inline]
    fn deref(&self) -> &TaskCell {
        // A `u8` index into 256 cells: no bounds check on the record path.
        &self.chunk.cells[usize::from(self.index)]
    }
}

impl Clone for CellRef {
    fn clone(&self) -> Self {
        self.refs.fetch_add(1, Ordering::Relaxed);
        CellRef {
            chunk: Arc::clone(&self.chunk),
            index: self.index,
        }
    }
}

impl Drop for CellRef {
    fn drop(&mut self) {
        release(&self.chunk, self.index);
    }
}

/// Drops one hold on a cell; the last one frees its slot. The same protocol
/// as `Arc`: a release decrement, and an acquire fence before reuse.
fn release(chunk: &CellChunk, index: u8) {
    let cell = &chunk.cells[usize::from(index)];
    if cell.refs.fetch_sub(1, Ordering::Release) == 1 {
        fence(Ordering::Acquire);
        chunk.free.lock().push(chunk.base + u32::from(index));
    }
}

/// Every task's cell and slow state, by slot.
#[derive(Debug, Default)]
pub(crate) struct Slab {
    cells: Vec<Arc<CellChunk>>,
    ctls: Vec<Box<[Option<TaskCtl>]>>,
    /// Each slot's timer due instant, `Nanos::MAX` when unarmed: only the
    /// scheduler reads it, so it stays out of the recorders' cells (R9.3).
    dues: Vec<Box<[Word]>>,
    pub(crate) free: FreeList,
    live: usize,
}

/// The first slot of chunk number `n`, if every slot of it fits a `u32`.
fn chunk_base(n: usize) -> Option<u32> {
    let base = u32::try_from(n.checked_mul(CHUNK)?).ok()?;
    base.checked_add(CHUNK as u32 - 1)?;
    Some(base)
}

fn split(slot: u32) -> (usize, usize) {
    let slot = slot as usize;
    (slot / CHUNK, slot % CHUNK)
}

impl Slab {
    /// Number of live tasks.
    pub(crate) fn len(&self) -> usize {
        self.live
    }

    /// Claims a free slot for a task, prepares its cell and returns the slot
    /// and a recorder's reference to the cell.
    ///
    /// Fails only when four billion slots are in use.
    pub(crate) fn insert(&mut self, ctl: TaskCtl) -> Option<(u32, CellRef)> {
        let reused = self.free.lock().pop();
        let slot = match reused {
            Some(slot) => slot,
            None => self.grow()?,
        };
        let (c, i) = split(slot);
        let chunk = &self.cells[c];
        let cell = &chunk.cells[i];
        debug_assert_eq!(cell.refs.load(Ordering::Relaxed), 0);
        ctl.init_cell(cell);
        self.dues[c][i].set(Nanos::MAX);
        // One hold for the scheduler, one for the recorder returned.
        cell.refs.store(2, Ordering::Relaxed);
        let cell = CellRef {
            chunk: Arc::clone(chunk),
            index: i as u8,
        };
        self.ctls[c][i] = Some(ctl);
        self.live += 1;
        Some((slot, cell))
    }

    /// Adds a chunk when every slot is taken; returns its first slot and
    /// frees the others.
    fn grow(&mut self) -> Option<u32> {
        let base = chunk_base(self.cells.len())?;
        self.cells.push(Arc::new(CellChunk {
            cells: std::array::from_fn(|_| TaskCell::vacant()),
            base,
            free: Arc::clone(&self.free),
        }));
        self.ctls
            .push(std::iter::repeat_with(|| None).take(CHUNK).collect());
        self.dues.push(
            std::iter::repeat_with(|| Word::new(Nanos::MAX))
                .take(CHUNK)
                .collect(),
        );
        // Hand out the chunk's slots lowest first.
        self.free
            .lock()
            .extend((base + 1..base + CHUNK as u32).rev());
        Some(base)
    }

    /// Takes a task's slow state out and drops the scheduler's hold on its
    /// cell.
    pub(crate) fn remove(&mut self, slot: u32) -> Option<TaskCtl> {
        let (c, i) = split(slot);
        let ctl = self.ctls.get_mut(c)?[i].take()?;
        self.live -= 1;
        release(&self.cells[c], i as u8);
        Some(ctl)
    }

    /// Returns the cell of `slot`, live or not.
    pub(crate) fn cell(&self, slot: u32) -> &TaskCell {
        let (c, i) = split(slot);
        &self.cells[c].cells[i]
    }

    /// Returns the due instant of `slot`'s timer, `Nanos::MAX` when
    /// unarmed.
    pub(crate) fn due(&self, slot: u32) -> &Word {
        let (c, i) = split(slot);
        &self.dues[c][i]
    }

    /// Returns a live task's slow state and its cell.
    pub(crate) fn get_mut(&mut self, slot: u32) -> Option<(&mut TaskCtl, &TaskCell)> {
        let (c, i) = split(slot);
        let ctl = self.ctls.get_mut(c)?[i].as_mut()?;
        Some((ctl, &self.cells[c].cells[i]))
    }

    /// Returns a live task's slow state.
    pub(crate) fn ctl(&self, slot: u32) -> Option<&TaskCtl> {
        let (c, i) = split(slot);
        self.ctls.get(c)?[i].as_ref()
    }

    /// Iterates the live tasks' slots and slow state.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (u32, &TaskCtl)> {
        self.ctls.iter().enumerate().flat_map(|(c, chunk)| {
            chunk
                .iter()
                .enumerate()
                .filter_map(move |(i, ctl)| ctl.as_ref().map(|ctl| ((c * CHUNK + i) as u32, ctl)))
        })
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use super::*;
    use crate::vocab::clock::Nanos;
    use crate::vocab::event::TaskId;
    use crate::vocab::profile::Profile;

    fn ctl(n: u64) -> TaskCtl {
        let name: Arc<str> = format!("t{n}").into();
        TaskCtl::new(
            TaskId::from_raw(n),
            name,
            Arc::new(Profile::default()),
            None,
            Nanos::from_secs(1),
        )
    }

    #[test]
    fn a_slot_is_reused_only_once_the_task_and_every_recorder_let_go() {
        let mut slab = Slab::default();
        let (a, rec) = slab.insert(ctl(1)).unwrap();
        let rec2 = rec.clone();
        assert!(slab.remove(a).is_some());
        assert!(slab.remove(a).is_none(), "removed once");
        drop(rec);
        let (b, _rb) = slab.insert(ctl(2)).unwrap();
        assert_ne!(a, b, "a recorder still holds slot {a}");
        rec2.record(
            crate::vocab::signal::SignalKind::Output,
            Nanos::from_secs(9),
        );
        drop(rec2);
        let (c, rc) = slab.insert(ctl(3)).unwrap();
        assert_eq!(c, a, "the slot came back once its last recorder went");
        assert_eq!(
            rc.last(crate::vocab::signal::SignalKind::Output),
            None,
            "reset"
        );
        assert_eq!(rc.anchor.get(), Nanos::from_secs(1));
        assert_eq!(slab.len(), 2);
    }

    #[test]
    fn the_last_chunk_is_the_one_whose_slots_all_fit_a_u32() {
        let chunks = (u32::MAX as usize + 1) / CHUNK;
        assert_eq!(chunk_base(0), Some(0));
        assert_eq!(chunk_base(1), Some(CHUNK as u32));
        assert_eq!(chunk_base(chunks - 1), Some(u32::MAX - (CHUNK as u32 - 1)));
        assert_eq!(chunk_base(chunks), None);
        assert_eq!(chunk_base(usize::MAX), None);
    }

    #[test]
    fn chunks_grow_without_moving_a_cell() {
        let mut slab = Slab::default();
        let tasks: Vec<_> = (0..3 * CHUNK as u64 + 5)
            .map(|n| slab.insert(ctl(n)).unwrap())
            .collect();
        let before: Vec<*const TaskCell> = tasks.iter().map(|(_, c)| &**c as *const _).collect();
        for n in 0..CHUNK as u64 {
            slab.insert(ctl(10_000 + n)).unwrap();
        }
        let after: Vec<*const TaskCell> = tasks.iter().map(|(_, c)| &**c as *const _).collect();
        assert_eq!(before, after);
        let slots: HashSet<u32> = tasks.iter().map(|(s, _)| *s).collect();
        assert_eq!(slots.len(), tasks.len());
        for (slot, cell) in &tasks {
            assert!(std::ptr::eq(slab.cell(*slot), &**cell));
            assert_eq!(
                slab.ctl(*slot).map(|t| t.id),
                slab.iter().find(|(s, _)| s == slot).map(|(_, t)| t.id)
            );
        }
        assert_eq!(slab.len(), tasks.len() + CHUNK);
    }

    #[test]
    fn recorders_dropped_on_many_threads_free_each_slot_exactly_once() {
        let mut slab = Slab::default();
        let mut recorders = Vec::new();
        let mut slots = Vec::new();
        for n in 0..500 {
            let (slot, rec) = slab.insert(ctl(n)).unwrap();
            slots.push(slot);
            for _ in 0..4 {
                recorders.push(rec.clone());
            }
            recorders.push(rec);
        }
        for &slot in &slots {
            slab.remove(slot);
        }
        // Each task's five holders are spread over four threads, so the
        // last drop of a slot races the others.
        let mut batches: Vec<Vec<CellRef>> = (0..4).map(|_| Vec::new()).collect();
        for (i, rec) in recorders.into_iter().enumerate() {
            batches[i % 4].push(rec);
        }
        std::thread::scope(|s| {
            for batch in batches {
                s.spawn(move || drop(batch));
            }
        });
        let mut freed = slab.free.lock().clone();
        freed.sort_unstable();
        let before = freed.len();
        freed.dedup();
        assert_eq!(freed.len(), before, "no slot freed twice");
        assert!(slots.iter().all(|s| freed.binary_search(s).is_ok()));
    }
}
