//! Which member owns a key: [`partition_of`] (a fixed mapping, part of the contract), and the
//! hasher of a dispatcher's key set, both on MurmurHash3's 64-bit finaliser.
//!
//! Owns the mapping. May import `id` only.

use std::collections::HashSet;
use std::hash::{BuildHasherDefault, Hasher};

use crate::id::ContextRef;

/// The partition (member index, `0..partitions`) that owns `key` in a pool of `partitions`
/// members: `fmix64(key) % partitions`, where `fmix64` is the 64-bit finaliser of MurmurHash3
/// (`k ^= k >> 33; k *= 0xff51afd7ed558ccd; k ^= k >> 33; k *= 0xc4ceb9fe1a85ec53; k ^= k >> 33`).
///
/// The mapping is part of the contract: it is fixed (no random seed, unlike `std`'s hasher), so
/// a key belongs to the same member in every run and every process for a given `partitions`.
/// The mixing spreads consecutive keys (sequence numbers, device ids) evenly. Changing the number
/// of partitions moves most keys.
///
/// `partitions` of 0 is taken as 1 (a pool always has at least one member).
///
/// ```
/// use correlator::partition_of;
/// assert_eq!(partition_of(42, 1), 0);
/// assert!(partition_of(42, 4) < 4);
/// assert_eq!(partition_of(42, 4), partition_of(42, 4)); // stable
/// ```
#[inline]
pub fn partition_of(key: u64, partitions: usize) -> usize {
    (fmix64(key) % partitions.max(1) as u64) as usize
}

/// The member of `members` (a pool's, in partition order; never empty) that owns `key`: the one
/// mapping [`Pool::member_of`](super::Pool::member_of), [`PoolInput::member_of`](super::PoolInput::member_of) and every `PoolInput` send use.
#[inline]
pub(super) fn member_in(members: &[ContextRef], key: u64) -> ContextRef {
    members[partition_of(key, members.len())]
}

/// MurmurHash3's 64-bit finaliser: a bijection of `u64` whose every output bit depends on every
/// input bit.
#[inline]
pub(super) fn fmix64(mut k: u64) -> u64 {
    k ^= k >> 33;
    k = k.wrapping_mul(0xff51_afd7_ed55_8ccd);
    k ^= k >> 33;
    k = k.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    k ^ (k >> 33)
}

/// The hasher of a dispatcher's key map. Not `fmix64` itself: every key of a member has the same
/// `fmix64(key) % partitions`, so with a power-of-two pool its low bits would be constant and
/// fill only part of the table. Adding the golden-ratio constant first decorrelates the two.
#[derive(Default)]
pub(super) struct KeyHasher(u64);

impl Hasher for KeyHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        // Only `u64` keys are hashed; this is the generic fallback.
        for &b in bytes {
            self.0 = fmix64(self.0 ^ u64::from(b));
        }
    }

    fn write_u64(&mut self, key: u64) {
        self.0 = fmix64(key.wrapping_add(0x9e37_79b9_7f4a_7c15));
    }
}

pub(super) type KeySet = HashSet<u64, BuildHasherDefault<KeyHasher>>;
