//! An expression listener's state as a checkpoint holds it (SPEC R11.10): its matches in
//! progress, each with the states of its definitions and the events it has matched (as the
//! correlator's `EventCodec` encodes them), and what the listener keeps beside them. Plain data
//! with serde's derives; `listener` and `matcher` fill and read it.
//!
//! What is not saved is what the listener's registration makes again after recovery: its program
//! (the definitions, their closures), its key and its traits. A saved state fits a listener whose
//! program has the same shape ([`Prog::shape`](super::Prog::shape)): the same operators in the same tree, whatever their durations
//! and templates (the saved matches keep the deadlines they had).
//!
//! Owns the saved forms. May import nothing.

use serde::{Deserialize, Serialize};

/// An expression listener's state.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct ExprPart {
    /// The program's shape ([`Prog::shape`](super::Prog::shape)).
    pub(crate) shape: u64,
    pub(crate) stepped: u64,
    pub(crate) due: u64,
    pub(crate) fresh: bool,
    pub(crate) unsettled: bool,
    /// The active matches, in order.
    pub(crate) matchers: Vec<MatcherPart>,
}

/// One match in progress.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct MatcherPart {
    /// `(started, final outcome code, timed, count, due)` of each definition.
    pub(crate) nodes: Vec<(bool, u8, bool, u32, u64)>,
    /// `(definition, encoded event)` of every template that matched, in order.
    pub(crate) got: Vec<(u32, Vec<u8>)>,
    pub(crate) hits: u32,
    pub(crate) next_due: u64,
}
