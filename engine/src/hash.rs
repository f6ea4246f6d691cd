//! A small, fast hasher for the engine's trusted keys (a leaf).
//!
//! Owns [`KindHasher`] and [`KindMap`]. May import nothing of the engine.

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
