//! `workload/*`: what users run (keyed monitors, followed-by, `within`, `not`), each beside
//! `workload/<name>/twin`, the same rules written by hand as a per-key state machine over the
//! same kind of transport on the same threads. A scenario's check is that the engine's output
//! equals its twin's exactly; its headline is the paired ratio engine / twin (issue 31).
//!
//! One file per workload: [`fraud`], [`spike`], [`absence`], [`keys`]; a CEP peer of fraud in
//! [`varpulis`]. The pattern language's workloads (issue 33): [`travel`] (a condition across
//! events), [`burst`] (counted repetition), [`unconfirmed`] (timed-out partial matches). Stream
//! queries (issue 34): [`vwap`] (a sliding window's running sums, emitted every second),
//! [`logins`] (a sliding window's count, on every event). Checkpoints (issue 36):
//! [`checkpointed`] (their cost on the fraud rules, and a recovery's time).

use super::Scenario;

pub mod absence;
pub mod burst;
pub mod checkpointed;
mod common;
pub mod fraud;
pub mod keys;
pub mod logins;
pub mod spike;
pub mod travel;
pub mod unconfirmed;
pub mod varpulis;
pub mod vwap;

/// Registers every workload scenario and its twin, next to each other.
pub fn register(v: &mut Vec<Scenario>, cores: usize) {
    fraud::register(v, cores);
    varpulis::register(v);
    absence::register(v, cores);
    spike::register(v, cores);
    keys::register(v, cores);
    travel::register(v, cores);
    burst::register(v, cores);
    unconfirmed::register(v, cores);
    vwap::register(v, cores);
    logins::register(v, cores);
    checkpointed::register(v);
}
