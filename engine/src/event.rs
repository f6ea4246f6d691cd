//! The event trait.
//!
//! A leaf: imports nothing from the engine.

use std::fmt::Debug;
use std::hash::Hash;

/// An event the correlator carries: a plain Rust value with a *kind* that listeners are indexed by
/// (SPEC R6.9).
///
/// `Clone` is needed because a channel send delivers one copy per receiving context (R4.2). Keep
/// events small and cheap to clone (an enum of plain data, `Arc` for large payloads): the engine moves
/// them through queues without boxing.
///
/// ```
/// use correlator::Event;
///
/// #[derive(Clone, Debug)]
/// enum Market {
///     Trade { symbol: u32, price: f64 },
///     Cancel { symbol: u32 },
/// }
///
/// #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
/// enum Kind { Trade, Cancel }
///
/// impl Event for Market {
///     type Kind = Kind;
///     fn kind(&self) -> Kind {
///         match self {
///             Market::Trade { .. } => Kind::Trade,
///             Market::Cancel { .. } => Kind::Cancel,
///         }
///     }
/// }
/// assert_eq!(Market::Cancel { symbol: 1 }.kind(), Kind::Cancel);
/// ```
pub trait Event: Clone + Send + 'static {
    /// What listeners are indexed by: usually a field-less enum, or a small integer.
    type Kind: Copy + Eq + Hash + Debug + Send + Sync + 'static;

    /// The kind of this event.
    fn kind(&self) -> Self::Kind;

    /// The value of the event's key field, if it has one (a device id, a symbol). Templates with an
    /// equality on the key ([`Pattern::key`](crate::Pattern::key)) are dispatched through a hash
    /// index, so many listeners on distinct keys cost the same per event as one (R6.9). Default:
    /// no key.
    fn key(&self) -> Option<u64> {
        None
    }
}
