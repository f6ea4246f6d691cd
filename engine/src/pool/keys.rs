//! Which member owns a key: [`partition_of`] (a fixed mapping, part of the contract, on
//! MurmurHash3's 64-bit finaliser). (A dispatcher's key set is the context's hook's:
//! `entry::DispatcherHook`.)
//!
//! Owns the mapping. May import `id` and `hash`.

use crate::hash::fmix64;
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
