//! Unit tests of the pool's key mapping: `partition_of` is a contract, its values never change.
//!
//! May import nothing from the engine but `pool` and `hash`.

use super::keys::partition_of;
use crate::hash::fmix64;

// The mapping is a contract (documented on `partition_of`): these values must never change.
#[test]
fn partition_of_is_fixed_and_spread() {
    assert_eq!(fmix64(0), 0);
    assert_eq!(fmix64(1), 0xb456_bcfc_34c2_cb2c);
    assert_eq!(
        (0..8).map(|k| partition_of(k, 4)).collect::<Vec<_>>(),
        [0, 0, 3, 2, 1, 1, 3, 1]
    );
    assert_eq!(partition_of(7, 0), 0);
    let mut per = [0u32; 4];
    for k in 0..4000 {
        per[partition_of(k, 4)] += 1;
    }
    assert!(per.iter().all(|&n| (900..1100).contains(&n)), "{per:?}");
}
