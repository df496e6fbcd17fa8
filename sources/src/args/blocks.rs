//! What a generation of [`super::ArgumentTracker`] remembers: which blocks
//! were announced and closed, and in [`super::Freshness::Deduplicated`]
//! mode the positional fingerprints of its deltas (R5.2).

use std::collections::{HashMap, HashSet, VecDeque};
use std::hash::{BuildHasher, RandomState};

use super::{Rejection, MAX_BLOCKS, MAX_FINGERPRINTS};

/// One bit per block index in `0..4096`.
#[derive(Clone)]
pub(super) struct BlockSet(Box<[u64; (MAX_BLOCKS / 64) as usize]>);

impl Default for BlockSet {
    fn default() -> Self {
        BlockSet(Box::new([0; (MAX_BLOCKS / 64) as usize]))
    }
}

impl BlockSet {
    pub(super) fn contains(&self, i: u16) -> bool {
        self.0[usize::from(i / 64)] & (1 << (i % 64)) != 0
    }
    pub(super) fn insert(&mut self, i: u16) {
        self.0[usize::from(i / 64)] |= 1 << (i % 64);
    }
    pub(super) fn clear(&mut self) {
        self.0.fill(0);
    }
    pub(super) fn count(&self) -> usize {
        self.0.iter().map(|w| w.count_ones() as usize).sum()
    }
}

/// What [`super::Freshness::Deduplicated`] remembers of a generation: the last
/// [`MAX_FINGERPRINTS`] positional fingerprints, oldest first, and each open
/// block's accumulated length.
pub(super) struct Replays {
    /// Keys the fingerprints; random per tracker so that no input can be
    /// crafted offline to collide.
    hasher: RandomState,
    seen: HashSet<u64, IdentityHash>,
    pub(super) order: VecDeque<u64>,
    pub(super) lengths: HashMap<u16, u64>,
}

impl Default for Replays {
    fn default() -> Self {
        Replays {
            hasher: RandomState::new(),
            seen: HashSet::with_hasher(IdentityHash),
            order: VecDeque::new(),
            lengths: HashMap::new(),
        }
    }
}

impl Replays {
    /// Offers `text` at `at` (the wire's own offset), or at the end of what
    /// the block accepted so far when the wire carries none.
    pub(super) fn offer(
        &mut self,
        block: u16,
        at: Option<u64>,
        text: &str,
    ) -> Result<(), Rejection> {
        let accumulated = self.lengths.get(&block).copied().unwrap_or(0);
        let before = at.unwrap_or(accumulated);
        let fp = self.hasher.hash_one((block, before, text));
        if self.seen.contains(&fp) {
            return Err(Rejection::DuplicateDelta);
        }
        if self.order.len() >= MAX_FINGERPRINTS {
            if let Some(oldest) = self.order.pop_front() {
                self.seen.remove(&oldest);
            }
        }
        self.seen.insert(fp);
        self.order.push_back(fp);
        let end = before.saturating_add(text.len() as u64);
        self.lengths.insert(block, accumulated.max(end));
        Ok(())
    }

    pub(super) fn clear(&mut self) {
        self.seen.clear();
        self.order.clear();
        self.lengths.clear();
    }
}

/// The fingerprints are already keyed SipHash outputs; hashing them again
/// would only cost time.
#[derive(Clone, Copy, Default)]
struct IdentityHash;

impl BuildHasher for IdentityHash {
    type Hasher = IdentityHasher;
    fn build_hasher(&self) -> IdentityHasher {
        IdentityHasher(0)
    }
}

struct IdentityHasher(u64);

impl std::hash::Hasher for IdentityHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        // Only u64 keys are hashed; fold anything else for completeness.
        for b in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(*b);
        }
    }
    fn write_u64(&mut self, n: u64) {
        self.0 = n;
    }
}

#[cfg(test)]
mod tests {
    use std::hash::{BuildHasher, Hasher};

    use super::IdentityHash;

    // R5.2: the fingerprint set hashes a fingerprint as itself (it is already
    // a keyed SipHash, so no input can be made to collide offline), and folds
    // every byte of any other key (kills the issue-26 mutants of
    // IdentityHasher's finish, write and write_u64).
    #[test]
    fn a_fingerprint_hashes_as_itself_and_other_keys_fold_every_byte() {
        let hash = |fp: u64| IdentityHash.hash_one(fp);
        assert_eq!(hash(0x0123_4567_89ab_cdef), 0x0123_4567_89ab_cdef);
        assert_eq!(hash(7), 7);
        let bytes = |b: &[u8]| {
            let mut h = IdentityHash.build_hasher();
            h.write(b);
            h.finish()
        };
        assert_eq!(bytes(&[1, 2]), 0x0102);
        // The ninth byte meets the first again, rotated round: they cancel.
        assert_eq!(bytes(&[0xff, 0, 0, 0, 0, 0, 0, 0, 0xff]), 0);
    }
}
