//! The driver's timers: one entry per armed task, moved in place.
//!
//! A binary min-heap of slots ordered by (due, slot). Each task's due
//! instant lives in the slab beside its cell, and its position in its cell
//! (see [`crate::state::cell`]), so
//! re-arming a task moves its one entry up or down instead of pushing a
//! new one and leaving the old one stale: the heap holds exactly the armed
//! tasks, four bytes each (R9.3), whatever the task count and the number
//! of re-arms. `std::collections::BinaryHeap` cannot move an entry, and the
//! indexed-heap crates keep a hash map beside the heap, which would cost
//! more than the task itself.
//!
//! # Invariants
//!
//! - For every slot in `heap` at index `i`, its recorded position
//!   (`TimerKeys::pos`) is `i`; for every slot not in it, the position is
//!   `ABSENT` and its due instant `Nanos::MAX`. Every move below writes
//!   the position of each entry it moves, so `set` finds an armed entry
//!   in O(1) instead of searching.
//! - Heap order is on `(due, slot)`, which never ties: equal due instants
//!   come out lowest slot first, so a run is reproducible.
//! - The heap, the due instants and the positions are written only under
//!   the scheduler lock (the `TimerKeys` of the guard is its slab).

use std::sync::atomic::Ordering::Relaxed;

use crate::vocab::clock::Nanos;

/// Where the heap reads and writes each slot's due instant and position.
pub(crate) trait TimerKeys {
    fn due(&self, slot: u32) -> Nanos;
    fn set_due(&self, slot: u32, due: Nanos);
    fn pos(&self, slot: u32) -> u32;
    fn set_pos(&self, slot: u32, pos: u32);
}

const ABSENT: u32 = u32::MAX;

impl TimerKeys for crate::engine::slab::Slab {
    fn due(&self, slot: u32) -> Nanos {
        self.due(slot).get()
    }
    fn set_due(&self, slot: u32, due: Nanos) {
        self.due(slot).set(due);
    }
    fn pos(&self, slot: u32) -> u32 {
        self.cell(slot).heap_pos.load(Relaxed)
    }
    fn set_pos(&self, slot: u32, pos: u32) {
        self.cell(slot).heap_pos.store(pos, Relaxed);
    }
}

/// A min-heap of armed slots, each present at most once.
#[derive(Debug, Default)]
pub(crate) struct TimerHeap {
    heap: Vec<u32>,
}

impl TimerHeap {
    /// Number of armed slots.
    pub(crate) fn len(&self) -> usize {
        self.heap.len()
    }

    /// Returns the earliest due instant and its slot.
    pub(crate) fn peek(&self, keys: &impl TimerKeys) -> Option<(Nanos, u32)> {
        self.heap.first().map(|&slot| (keys.due(slot), slot))
    }

    /// Calls `f` with each armed slot due at or before `now` (and its due
    /// instant), in no set order: O(due), the heap below them unvisited.
    pub(crate) fn each_due(
        &self,
        keys: &impl TimerKeys,
        now: Nanos,
        mut f: impl FnMut(Nanos, u32),
    ) {
        // A depth-first walk that stops at the first entry not yet due: in
        // a min-heap nothing below it is due either, so the walk costs the
        // due entries (and their immediate children), not the heap.
        let mut stack = vec![0usize];
        while let Some(pos) = stack.pop() {
            let Some(&slot) = self.heap.get(pos) else {
                continue;
            };
            let due = keys.due(slot);
            if due > now {
                continue;
            }
            f(due, slot);
            stack.extend([2 * pos + 1, 2 * pos + 2]);
        }
    }

    /// Arms `slot` at `due`, moves it if armed, or disarms it on `None`.
    pub(crate) fn set(&mut self, keys: &impl TimerKeys, slot: u32, due: Option<Nanos>) {
        let pos = keys.pos(slot);
        match (pos, due) {
            (ABSENT, None) => {}
            (ABSENT, Some(due)) => {
                keys.set_due(slot, due);
                let at = self.heap.len();
                if at == self.heap.capacity() {
                    // Grow by a quarter, not double: at most 25 % slack.
                    self.heap.reserve_exact((at / 4).max(64));
                }
                self.heap.push(slot);
                keys.set_pos(slot, at as u32);
                self.sift_up(keys, at);
            }
            // Disarm: the last entry fills the hole, then moves up or down
            // to where its own key belongs.
            (pos, None) => {
                keys.set_due(slot, Nanos::MAX);
                keys.set_pos(slot, ABSENT);
                let last = self.heap.pop().expect("an armed slot is in the heap");
                let pos = pos as usize;
                if pos < self.heap.len() {
                    self.heap[pos] = last;
                    keys.set_pos(last, pos as u32);
                    self.restore(keys, pos);
                }
            }
            // Re-arm in place: the one entry moves, none is left stale.
            (pos, Some(due)) => {
                keys.set_due(slot, due);
                self.restore(keys, pos as usize);
            }
        }
    }

    fn less(keys: &impl TimerKeys, a: u32, b: u32) -> bool {
        (keys.due(a), a) < (keys.due(b), b)
    }

    /// Moves the entry at `pos` to where its key now belongs.
    fn restore(&mut self, keys: &impl TimerKeys, pos: usize) {
        let pos = self.sift_up(keys, pos);
        self.sift_down(keys, pos);
    }

    /// Moves the entry at `pos` up past every parent with a larger key;
    /// returns where it ended. Parents moved down get their new position.
    fn sift_up(&mut self, keys: &impl TimerKeys, mut pos: usize) -> usize {
        let slot = self.heap[pos];
        while pos > 0 {
            let parent = (pos - 1) / 2;
            let p = self.heap[parent];
            if !Self::less(keys, slot, p) {
                break;
            }
            self.heap[pos] = p;
            keys.set_pos(p, pos as u32);
            pos = parent;
        }
        self.heap[pos] = slot;
        keys.set_pos(slot, pos as u32);
        pos
    }

    /// Moves the entry at `pos` down past every child with a smaller key,
    /// always to the smaller child, so the heap order holds behind it.
    fn sift_down(&mut self, keys: &impl TimerKeys, mut pos: usize) {
        let slot = self.heap[pos];
        let len = self.heap.len();
        loop {
            let left = 2 * pos + 1;
            if left >= len {
                break;
            }
            let right = left + 1;
            let child = if right < len && Self::less(keys, self.heap[right], self.heap[left]) {
                right
            } else {
                left
            };
            let c = self.heap[child];
            if !Self::less(keys, c, slot) {
                break;
            }
            self.heap[pos] = c;
            keys.set_pos(c, pos as u32);
            pos = child;
        }
        self.heap[pos] = slot;
        keys.set_pos(slot, pos as u32);
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;
    use std::sync::atomic::{AtomicU32, AtomicU64};

    use proptest::prelude::*;

    use super::*;

    /// Keys in plain arrays, as the slab's cells hold them.
    struct Keys {
        due: Vec<AtomicU64>,
        pos: Vec<AtomicU32>,
    }

    impl Keys {
        fn new(n: usize) -> Self {
            Keys {
                due: (0..n).map(|_| AtomicU64::new(u64::MAX)).collect(),
                pos: (0..n).map(|_| AtomicU32::new(ABSENT)).collect(),
            }
        }
    }

    impl TimerKeys for Keys {
        fn due(&self, slot: u32) -> Nanos {
            Nanos::from_nanos(self.due[slot as usize].load(Relaxed))
        }
        fn set_due(&self, slot: u32, due: Nanos) {
            self.due[slot as usize].store(due.as_nanos(), Relaxed);
        }
        fn pos(&self, slot: u32) -> u32 {
            self.pos[slot as usize].load(Relaxed)
        }
        fn set_pos(&self, slot: u32, pos: u32) {
            self.pos[slot as usize].store(pos, Relaxed);
        }
    }

    #[derive(Clone, Debug)]
    enum Op {
        Set(u32, Option<u64>),
        Pop,
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            4 => (0..40u32, proptest::option::weighted(0.8, 0..50u64)).prop_map(|(s, d)| Op::Set(s, d)),
            1 => Just(Op::Pop),
        ]
    }

    // R9.3: the heap grows by a quarter at a time, so it never holds more
    // than a quarter (or 64 slots) beyond the armed tasks.
    #[test]
    fn the_heap_grows_by_a_quarter_not_by_doubling() {
        let n = 10_000;
        let keys = Keys::new(n);
        let mut heap = TimerHeap::default();
        let mut growths = 0;
        for slot in 0..n as u32 {
            let before = heap.heap.capacity();
            heap.set(&keys, slot, Some(Nanos::from_nanos(u64::from(slot % 97))));
            let len = heap.heap.len();
            assert!(heap.heap.capacity() <= len + len / 4 + 64, "{len}");
            growths += usize::from(heap.heap.capacity() != before);
        }
        // And by a quarter each time, not by a fixed step nor on every
        // arm: about log(10 000 / 64) / log(1.25) + 2 = 25 reallocations.
        assert!(growths <= 30, "{growths} reallocations for {n} arms");
    }

    proptest! {
        /// The heap agrees with an ordered set after any sequence of arms,
        /// moves, disarms and pops, and holds each slot at most once.
        #[test]
        fn heap_matches_an_ordered_set(ops in proptest::collection::vec(op(), 0..300)) {
            let keys = Keys::new(40);
            let mut heap = TimerHeap::default();
            let mut model: BTreeSet<(u64, u32)> = BTreeSet::new();
            let mut armed: Vec<Option<u64>> = vec![None; 40];
            for op in ops {
                match op {
                    Op::Set(slot, due) => {
                        heap.set(&keys, slot, due.map(Nanos::from_nanos));
                        if let Some(old) = armed[slot as usize].take() {
                            model.remove(&(old, slot));
                        }
                        if let Some(d) = due {
                            model.insert((d, slot));
                            armed[slot as usize] = Some(d);
                        }
                    }
                    Op::Pop => {
                        if let Some((due, slot)) = heap.peek(&keys) {
                            heap.set(&keys, slot, None);
                            let first = model.pop_first();
                            prop_assert_eq!(first, Some((due.as_nanos(), slot)));
                            armed[slot as usize] = None;
                        } else {
                            prop_assert!(model.is_empty());
                        }
                    }
                }
                prop_assert_eq!(heap.len(), model.len());
                prop_assert_eq!(
                    heap.peek(&keys).map(|(d, s)| (d.as_nanos(), s)),
                    model.first().copied()
                );
                for (i, &slot) in heap.heap.iter().enumerate() {
                    prop_assert_eq!(keys.pos(slot) as usize, i);
                }
            }
        }
    }
}
