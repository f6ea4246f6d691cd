//! The event trait.
//!
//! A leaf. May import `time` (the type of an event's timestamp), itself a leaf.

use std::fmt::Debug;
use std::hash::Hash;

use crate::time::Time;

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
    ///
    /// The engine may call `kind`, [`key`](Self::key) and [`time`](Self::time) more than once for
    /// one event (an input handle, a pool's router, the listener index, a matcher, and a context
    /// looking ahead at the events waiting in its inbox for cache hints each ask), on any thread
    /// that holds the event: each must return the same value every time for the same
    /// event and must not panic. Derive them from the event's fields; an answer that changes
    /// between calls sends the event to the wrong place (a pool member, a listener list) with no
    /// error. A panic in them counts as a panic in user code: where a context calls them the
    /// event is dropped and counted in
    /// [`ContextStatus::events_dropped_by_panic`](crate::ContextStatus::events_dropped_by_panic).
    fn kind(&self) -> Self::Kind;

    /// The value of the event's key field, if it has one (a device id, a symbol). Templates with an
    /// equality on the key ([`Pattern::key`](crate::Pattern::key)) are dispatched through a hash
    /// index, so many listeners on distinct keys cost the same per event as one (R6.9). Default:
    /// no key.
    fn key(&self) -> Option<u64> {
        None
    }

    /// The value of the event's field number `field`, if it has one: what templates constrain as
    /// data ([`Pattern::field`](crate::Pattern::field), [`Pattern::field_in`](crate::Pattern::field_in),
    /// SPEC R6.10), numbered as the event type chooses. A template with an equality on a field
    /// (and no key) is dispatched through a hash index on that field, as a keyed one is on the
    /// key. Values are `u64`: map signed integers and floating-point numbers with
    /// [`ordered_i64`](crate::ordered_i64) and [`ordered_f64`](crate::ordered_f64), which keep
    /// their order, so ranges work. Same contract as [`kind`](Self::kind): the same answer every
    /// time, no panic. Default: no fields.
    ///
    /// ```
    /// use correlator::{ordered_f64, Event, Pattern};
    /// #[derive(Clone, Debug)]
    /// struct Trade { venue: u64, side: u64, price: f64 }
    /// impl Event for Trade {
    ///     type Kind = ();
    ///     fn kind(&self) {}
    ///     fn field(&self, field: usize) -> Option<u64> {
    ///         match field {
    ///             0 => Some(self.venue),
    ///             1 => Some(self.side),
    ///             2 => Some(ordered_f64(self.price)),
    ///             _ => None,
    ///         }
    ///     }
    /// }
    /// // Buys (side 1) on venue 3 between 100 and 110: indexed on the venue.
    /// let p = Pattern::<Trade>::any().field(0, 3).field(1, 1).field_in(2, ordered_f64(100.0)..=ordered_f64(110.0));
    /// assert!(p.matches(&Trade { venue: 3, side: 1, price: 105.5 }));
    /// assert!(!p.matches(&Trade { venue: 3, side: 1, price: 99.0 }));
    /// assert!(!p.matches(&Trade { venue: 4, side: 1, price: 105.5 }));
    /// ```
    fn field(&self, field: usize) -> Option<u64> {
        let _ = field;
        None
    }

    /// The event's own timestamp, if it has one (a trade's exchange time, a sensor reading's
    /// sample time), on the same scale as the context clocks: [`Time`] counts from an origin the
    /// stream chooses (the first event's time, midnight, the Unix epoch). Default: none.
    ///
    /// It matters only for a correlator built with
    /// [`event_time`](crate::CorrelatorBuilder::event_time): there a context advances its logical
    /// clock to the stamp of each event it takes from its inbox before dispatching it, firing the
    /// timers due at or before that stamp first, in time order (SPEC R7.1, R7.2). An event without
    /// a stamp keeps the clock where it is; an event stamped before its context's clock (*late*)
    /// is processed at the clock's time and counted in
    /// [`ContextStatus::late_events`](crate::ContextStatus::late_events) (and handled as the
    /// [`LateEvents`](crate::LateEvents) policy says). Under external time it is never called;
    /// under ticks it is called on a context's first 16 inbox events only, to warn (once) that
    /// the events carry times the tick clock ignores.
    ///
    /// Called once per inbox event under event time: keep it cheap (read a field).
    ///
    /// ```
    /// use correlator::{Event, Time};
    ///
    /// #[derive(Clone, Debug)]
    /// struct Trade { at_ms: u64, qty: u32 }
    ///
    /// impl Event for Trade {
    ///     type Kind = ();
    ///     fn kind(&self) {}
    ///     fn time(&self) -> Option<Time> {
    ///         Some(Time::from_millis(self.at_ms))
    ///     }
    /// }
    /// assert_eq!(Trade { at_ms: 49, qty: 5 }.time(), Some(Time::from_millis(49)));
    /// ```
    fn time(&self) -> Option<Time> {
        None
    }

    /// Where the event sits in its durable source, if it has such a place: a JetStream stream
    /// sequence, an offset in a log (feature `checkpoint`'s input positions, SPEC R11.9). A
    /// checkpoint records, for each named input and context, the position of the last event the
    /// context took from it, so that a recovered program reads the source again from the next
    /// one. Called once per input event on a correlator that takes checkpoints; never
    /// otherwise. Default: none (a recovery then says how many events were taken, not where).
    fn position(&self) -> Option<u64> {
        None
    }
}
