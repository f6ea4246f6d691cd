//! [`KeyMap`]: a map of `u64` keys whose first line a lookup reads can be named before the
//! lookup, so that it can be prefetched.
//!
//! # Why not `HashMap`
//! Two maps of keys are probed once per event: the listener index (a key's listeners, R6.9) and
//! a pool dispatcher's set of keys with a live instance. At 100,000 keys and more both probes are
//! cache misses, and each was the larger part of its caller's samples (`perf annotate` of
//! `workload/keys/1m`: the group load and the key compare of `std`'s map, one line each). The
//! look-ahead (`context::ahead`) knows an event's key several events before its dispatch, and
//! could ask for those lines early if it knew where they are; `std`'s map does not say where a
//! key's group and bucket are. Here a lookup starts at one slot of one array of `(key, value)`
//! pairs, and [`KeyMap::slot_hint`] names it.
//!
//! # Layout
//! Open addressing with linear probing over `slots`, a power-of-two number `2^b` of `(key, value)`
//! pairs. A key's home slot is the top `b` bits of `key * 2^64/φ` (Fibonacci hashing: one
//! multiply; each of the top bits depends on every bit of the key, and consecutive keys land
//! far apart). `fmix64`, which these maps used first, cost about fifteen instructions more per
//! lookup, a tenth of registering and ending a listener (callgrind of `workload/unconfirmed`). A
//! lookup reads from the home slot on and stops at its key or at an empty slot. An empty slot holds the key [`EMPTY`] and a default value; the value of
//! the key `EMPTY` itself is kept beside the table. The table doubles before it is more than
//! three quarters full (a hit then reads 2.5 slots on average, at most, and the next one or two
//! slots are usually on the same line). Removal shifts the entries after the removed one back
//! towards their homes (backward shift), so there are no tombstones and the table never needs a
//! clean-up; it does not shrink (as `std`'s map does not).
//!
//! The hash has no random seed: keys are the application's own, as kinds are for
//! [`KindMap`](super::KindMap), and the maps it replaced (a `KindMap` and a map hashed by
//! `fmix64`) had none either.
//!
//! Owns [`KeyMap`]. May import nothing of the engine.

/// The key of an empty slot. The key itself is stored beside the table.
const EMPTY: u64 = u64::MAX;

/// `2^64/φ`, odd: the multiplier of Fibonacci hashing (see the module docs).
const GOLDEN: u64 = 0x9e37_79b9_7f4a_7c15;

/// A map of `u64` keys (see the module docs).
pub(crate) struct KeyMap<V> {
    /// A power-of-two number of slots, or none before the first insertion.
    slots: Vec<(u64, V)>,
    /// Keys in `slots`.
    len: usize,
    /// `64 - b` for `2^b` slots: a product shifted right by it is a slot number.
    shift: u32,
    /// The value of the key [`EMPTY`], which cannot live in `slots`.
    max: Option<V>,
}

impl<V> Default for KeyMap<V> {
    fn default() -> Self {
        Self {
            slots: Vec::new(),
            len: 0,
            shift: 64,
            max: None,
        }
    }
}

impl<V: Default> KeyMap<V> {
    /// The number of keys.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.len + usize::from(self.max.is_some())
    }

    /// Whether the map holds no key.
    #[inline]
    pub(crate) fn is_empty(&self) -> bool {
        self.len == 0 && self.max.is_none()
    }

    /// The home slot of `key`; `slots` is not empty.
    #[inline(always)]
    fn home(&self, key: u64) -> usize {
        (key.wrapping_mul(GOLDEN) >> self.shift) as usize
    }

    /// Where `key` (not [`EMPTY`]) is: `Ok(slot)` if present, else `Err(slot)`, the first empty
    /// slot of its run, where it belongs (no tombstones: a key is never after an empty slot of
    /// its run). `slots` is not empty.
    #[inline]
    fn probe(&self, key: u64) -> Result<usize, usize> {
        let mask = self.slots.len() - 1;
        let mut i = self.home(key);
        loop {
            match self.slots[i].0 {
                k if k == key => return Ok(i),
                EMPTY => return Err(i),
                _ => i = (i + 1) & mask,
            }
        }
    }

    /// The slot of `key` (not [`EMPTY`]), if present.
    #[inline]
    fn find(&self, key: u64) -> Option<usize> {
        if self.slots.is_empty() {
            return None;
        }
        self.probe(key).ok()
    }

    /// The value of `key`.
    #[inline]
    pub(crate) fn get(&self, key: u64) -> Option<&V> {
        if key == EMPTY {
            return self.max.as_ref();
        }
        self.find(key).map(|i| &self.slots[i].1)
    }

    /// The value of `key`, to change.
    #[inline]
    pub(crate) fn get_mut(&mut self, key: u64) -> Option<&mut V> {
        if key == EMPTY {
            return self.max.as_mut();
        }
        self.find(key).map(|i| &mut self.slots[i].1)
    }

    /// Whether `key` is present.
    #[inline]
    pub(crate) fn contains_key(&self, key: u64) -> bool {
        self.get(key).is_some()
    }

    /// The value of `key`, inserted as `V::default()` if absent.
    pub(crate) fn get_or_insert_default(&mut self, key: u64) -> &mut V {
        if key == EMPTY {
            return self.max.get_or_insert_with(V::default);
        }
        if (self.len + 1) * 4 > self.slots.len() * 3 {
            // Full enough to grow if the key is new.
            if let Some(i) = self.find(key) {
                return &mut self.slots[i].1;
            }
            self.grow();
        }
        let i = match self.probe(key) {
            Ok(i) => return &mut self.slots[i].1,
            Err(i) => i,
        };
        self.slots[i].0 = key;
        self.len += 1;
        &mut self.slots[i].1
    }

    /// Removes `key`, returning its value.
    pub(crate) fn remove(&mut self, key: u64) -> Option<V> {
        if key == EMPTY {
            return self.max.take();
        }
        let mut hole = self.find(key)?;
        let value = std::mem::take(&mut self.slots[hole].1);
        self.slots[hole].0 = EMPTY;
        self.len -= 1;
        // Backward shift: each entry of the run after the hole moves into it if the hole lies on
        // its path from its home (cyclically in `home..j`), and its old place becomes the hole.
        let mask = self.slots.len() - 1;
        let mut j = hole;
        loop {
            j = (j + 1) & mask;
            let k = self.slots[j].0;
            if k == EMPTY {
                return Some(value);
            }
            let from_home = j.wrapping_sub(self.home(k)) & mask;
            let from_hole = j.wrapping_sub(hole) & mask;
            if from_home >= from_hole {
                self.slots.swap(hole, j);
                hole = j;
            }
        }
    }

    /// Where a lookup of `key` reads first (the start of its home slot), for a cache hint: null
    /// if no lookup would read the table. A lookup may read on into the next slots (its run).
    #[inline]
    pub(crate) fn slot_hint(&self, key: u64) -> *const u8 {
        if key == EMPTY || self.slots.is_empty() {
            return std::ptr::null();
        }
        self.slots.as_ptr().wrapping_add(self.home(key)).cast()
    }

    /// Doubles the table (8 slots at first) and puts every key in its place there.
    #[cold]
    fn grow(&mut self) {
        let cap = (self.slots.len() * 2).max(8);
        let mut slots = Vec::with_capacity(cap);
        slots.resize_with(cap, || (EMPTY, V::default()));
        let old = std::mem::replace(&mut self.slots, slots);
        self.shift = 64 - cap.trailing_zeros();
        for (k, v) in old {
            if k != EMPTY {
                // Keys are distinct: the probe ends at an empty slot.
                let (Ok(i) | Err(i)) = self.probe(k);
                self.slots[i] = (k, v);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    //! The map against `std`'s: the listener index and the dispatchers' key sets are these maps,
    //! so a key lost or kept too long would lose an event for a keyed listener or deliver one to
    //! another key's (R6.9).

    use super::{KeyMap, EMPTY};
    use proptest::prelude::*;
    use std::collections::HashMap;

    #[derive(Clone, Debug)]
    enum Op {
        Insert(u64, u32),
        Remove(u64),
    }

    /// Keys from a small set, so that inserts and removes meet, with the empty slot's own key,
    /// 0, and keys spread over the whole range (their homes collide in a small table).
    fn key() -> impl Strategy<Value = u64> {
        prop_oneof![
            0..48u64,
            Just(EMPTY),
            Just(EMPTY - 1),
            (0..16u64).prop_map(|k| k.wrapping_mul(0x0123_4567_89ab_cdef)),
        ]
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            3 => (key(), any::<u32>()).prop_map(|(k, v)| Op::Insert(k, v)),
            2 => key().prop_map(Op::Remove),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]

        #[test]
        fn r6_9_a_key_map_holds_what_a_hash_map_holds(ops in prop::collection::vec(op(), 0..300)) {
            let mut map = KeyMap::<u32>::default();
            let mut model = HashMap::new();
            for op in ops {
                match op {
                    Op::Insert(k, v) => {
                        *map.get_or_insert_default(k) = v;
                        model.insert(k, v);
                    }
                    Op::Remove(k) => prop_assert_eq!(map.remove(k), model.remove(&k)),
                }
                prop_assert_eq!(map.len(), model.len());
                prop_assert_eq!(map.is_empty(), model.is_empty());
                // Every key the runs could hide or keep: every key of the strategy's sets.
                for k in (0..48u64)
                    .chain([EMPTY, EMPTY - 1])
                    .chain((0..16u64).map(|k| k.wrapping_mul(0x0123_4567_89ab_cdef)))
                {
                    prop_assert_eq!(map.get(k), model.get(&k), "key {}", k);
                    prop_assert_eq!(map.contains_key(k), model.contains_key(&k));
                }
            }
        }
    }

    #[test]
    fn r6_9_get_or_insert_default_keeps_a_present_value_and_grows_only_for_a_new_key() {
        let mut map = KeyMap::<u32>::default();
        for k in 0..6u64 {
            *map.get_or_insert_default(k) = k as u32 + 1;
        }
        let cap = map.slots.len();
        assert_eq!(cap, 8);
        // Six of eight slots: a seventh key would pass three quarters; a present one must not.
        assert_eq!(*map.get_or_insert_default(3), 4);
        assert_eq!(map.slots.len(), cap, "a present key grew the table");
        assert_eq!(*map.get_or_insert_default(6), 0);
        assert_eq!(map.slots.len(), 16);
        for k in 0..6u64 {
            assert_eq!(map.get(k), Some(&(k as u32 + 1)));
        }
        if let Some(v) = map.get_mut(5) {
            *v = 60;
        }
        assert_eq!(map.get(5), Some(&60));
    }

    #[test]
    fn r6_9_the_slot_hint_names_the_slot_a_lone_key_is_found_in() {
        let mut map = KeyMap::<[u64; 4]>::default();
        assert!(map.slot_hint(7).is_null(), "no table: nothing to read");
        *map.get_or_insert_default(7) = [1, 2, 3, 4];
        let hint = map.slot_hint(7) as usize;
        let value = map.get(7).unwrap() as *const [u64; 4] as usize;
        let slot = std::mem::size_of::<(u64, [u64; 4])>();
        assert!(
            (hint..hint + slot).contains(&value),
            "the hint {hint:#x} does not name the slot of the value at {value:#x}"
        );
        assert!(
            map.slot_hint(EMPTY).is_null(),
            "the key EMPTY lives beside the table"
        );
    }
}
