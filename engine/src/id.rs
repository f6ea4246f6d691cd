//! Context references: [`ContextRef`], the id every other module names a context by (SPEC R1.2);
//! and [`EmitId`], the id a context gives what it emits (SPEC R11.14).
//!
//! A leaf: owns the reference's one-word layout (`id | correlator_tag << 32`); imports nothing
//! from the engine. With the `serde` feature a reference is written as its two parts,
//! `{"id": 3, "correlator": 1}`, not as the packed word, so that readers need not know the layout.

use std::fmt;

/// A reference to a context: a small `Copy` value (8 bytes) that can be stored in events and state,
/// compared and hashed (SPEC R1.2). Every context of a correlator has a unique one; `main` is the
/// first.
///
/// A reference also names its correlator (a tag unique in the process), so that a reference of
/// another correlator is refused rather than delivered to whichever context has the same id:
/// sends, spawns and loads into it fail with `UnknownContext`
/// ([`SendErrorKind::UnknownContext`](crate::SendErrorKind::UnknownContext),
/// [`Error::UnknownContext`](crate::Error::UnknownContext)), and references of two correlators
/// are never equal. Ordering compares the correlator's tag first, then the id.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ContextRef {
    /// `id | correlator_tag << 32`: one word, so that a sender checks tag and id with one
    /// subtraction and one comparison (`Links::knows`).
    word: u64,
}

impl ContextRef {
    /// The context's unique id within its correlator (`main` is 0).
    #[inline(always)]
    pub fn id(self) -> u32 {
        self.word as u32
    }

    /// The reference of context `id` of the correlator tagged `correlator`.
    #[inline(always)]
    pub(crate) fn new(correlator: u32, id: u32) -> Self {
        Self {
            word: u64::from(id) | u64::from(correlator) << 32,
        }
    }

    /// The tag of the correlator the context belongs to.
    #[inline(always)]
    pub(crate) fn correlator(self) -> u32 {
        (self.word >> 32) as u32
    }

    /// The reference as one word: `id | correlator << 32`.
    #[inline(always)]
    pub(crate) fn word(self) -> u64 {
        self.word
    }
}

/// A reference as its two parts (the `serde` feature).
#[cfg(feature = "serde")]
#[derive(serde::Serialize, serde::Deserialize)]
#[serde(rename = "ContextRef")]
struct ContextRefParts {
    id: u32,
    correlator: u32,
}

/// Written as `{"id": .., "correlator": ..}`.
#[cfg(feature = "serde")]
impl serde::Serialize for ContextRef {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        ContextRefParts {
            id: self.id(),
            correlator: self.correlator(),
        }
        .serialize(serializer)
    }
}

/// Read back from `{"id": .., "correlator": ..}`. A reference read back names the same context
/// of the same correlator while that correlator lives in this process; one of another
/// correlator (or process) is refused by sends with `UnknownContext`, as usual.
#[cfg(feature = "serde")]
impl<'de> serde::Deserialize<'de> for ContextRef {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let parts = ContextRefParts::deserialize(deserializer)?;
        Ok(Self::new(parts.correlator, parts.id))
    }
}

impl fmt::Debug for ContextRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "ContextRef({}, correlator {})",
            self.id(),
            self.correlator()
        )
    }
}

impl fmt::Display for ContextRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "context #{}", self.id())
    }
}

/// The id of a value a context emits, for a sink to recognise a value it has already published
/// (SPEC R11.14): the context's id and a number that counts up in that context
/// ([`Scope::emit_id`](crate::Scope::emit_id)). A checkpoint saves each context's count and a
/// recovery restores it, so a value that a recovered run derives again from the same entries
/// gets the id it had before the crash, and a sink that keeps the ids it has published (a
/// JetStream stream's de-duplication by message id) drops the repeat: outputs effectively once.
///
/// Written as `{context}.{seq}` (`3.1042`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[cfg_attr(
    any(feature = "serde", feature = "checkpoint"),
    derive(serde::Serialize, serde::Deserialize)
)]
pub struct EmitId {
    /// The context's id ([`ContextRef::id`]).
    pub context: u32,
    /// Its number in that context, from 0.
    pub seq: u64,
}

impl fmt::Display for EmitId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}", self.context, self.seq)
    }
}
