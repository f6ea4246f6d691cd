//! `workload/keys`: not written yet.

use crate::scenario::Scenario;

/// Registers `workload/keys` and its twin.
pub fn register(_v: &mut Vec<Scenario>, _cores: usize) {}
