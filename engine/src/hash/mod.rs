//! Small, fast hashing for the engine's trusted keys (a leaf): the kind map's hasher, and the
//! map of `u64` keys that the listener index and the pools' dispatchers probe per event.
//!
//! Owns [`KindHasher`], [`KindMap`], [`fmix64`] and [`KeyMap`]. May import nothing of the engine.

mod key_map;

pub(crate) use key_map::KeyMap;

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

/// A small, fast hasher for event kinds (the multiply-rotate of rustc's `FxHasher`): kinds are
/// trusted values, so no defence against hash flooding is needed here.
#[derive(Default, Clone, Copy)]
pub(crate) struct KindHasher(u64);

impl Hasher for KindHasher {
    #[inline]
    fn finish(&self) -> u64 {
        self.0
    }

    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(u64::from(b));
        }
    }

    #[inline]
    fn write_u8(&mut self, i: u8) {
        self.write_u64(u64::from(i));
    }

    #[inline]
    fn write_u32(&mut self, i: u32) {
        self.write_u64(u64::from(i));
    }

    #[inline]
    fn write_usize(&mut self, i: usize) {
        self.write_u64(i as u64);
    }

    #[inline]
    fn write_u64(&mut self, i: u64) {
        self.0 = (self.0.rotate_left(5) ^ i).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }
}

pub(crate) type KindMap<K, V> = HashMap<K, V, BuildHasherDefault<KindHasher>>;

/// MurmurHash3's 64-bit finaliser: a bijection of `u64` whose every output bit depends on every
/// input bit.
#[inline]
pub(crate) fn fmix64(mut k: u64) -> u64 {
    k ^= k >> 33;
    k = k.wrapping_mul(0xff51_afd7_ed55_8ccd);
    k ^= k >> 33;
    k = k.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    k ^ (k >> 33)
}
