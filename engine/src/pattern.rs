//! Templates: an event kind, an optional key, and optional filters (SPEC R6.3, R6.9, R7.3).
//!
//! A [`Pattern`] is what `on`, `on_all`, `unmatched` and `completed` listen for. It is also the leaf
//! of an event expression: `Pattern`'s combinators ([`then`](Pattern::then), [`and`](Pattern::and),
//! [`or`](Pattern::or), [`within`](Pattern::within)) build an [`Expr`](crate::Expr) for `when` and
//! `when_all` (see the `expr` module for the grammar).
//!
//! A template with a [`key`](Pattern::key) is indexed by that key: delivering an event costs the same
//! whether 1 or 100,000 listeners wait on other keys of its kind.
//!
//! Owns templates. May import `event` only.

use std::fmt;

use crate::event::Event;

type Filter<E> = Box<dyn Fn(&E) -> bool + Send>;

/// A template: an event kind, an optional key and an optional filter.
pub(crate) struct Template<E: Event> {
    pub(crate) kind: E::Kind,
    pub(crate) key: Option<u64>,
    filter: Option<Filter<E>>,
}

impl<E: Event> Template<E> {
    /// Whether the template has filters beyond kind and key.
    #[inline]
    pub(crate) fn has_filter(&self) -> bool {
        self.filter.is_some()
    }

    /// Whether `event`, already known to be of this template's kind and to carry the template's
    /// key if it has one (the listener tables list a keyed template under its key, and offer it
    /// only events with that key), passes the filters.
    #[inline]
    pub(crate) fn matches_listed(&self, event: &E) -> bool {
        debug_assert!(self.key.is_none_or(|k| event.key() == Some(k)));
        match &self.filter {
            None => true,
            Some(f) => f(event),
        }
    }

    /// Whether `event` (already known to be of this template's kind) matches key and filter.
    #[inline]
    pub(crate) fn matches_same_kind(&self, event: &E) -> bool {
        if let Some(k) = self.key {
            if event.key() != Some(k) {
                return false;
            }
        }
        match &self.filter {
            None => true,
            Some(f) => f(event),
        }
    }

    /// Whether `event` matches (kind included).
    #[inline]
    pub(crate) fn matches(&self, event: &E) -> bool {
        self.kind == event.kind() && self.matches_same_kind(event)
    }
}

/// What a listener matches: every event of one kind, narrowed by an optional key and filters.
///
/// ```
/// use correlator::{Event, Pattern};
/// #[derive(Clone, Debug)]
/// struct Trade { symbol: u64, price: f64 }
/// impl Event for Trade {
///     type Kind = ();
///     fn kind(&self) {}
///     fn key(&self) -> Option<u64> { Some(self.symbol) }
/// }
/// // Every trade of symbol 7 (indexed by key) above 100.
/// let p = Pattern::<Trade>::kind(()).key(7).filter(|t| t.price > 100.0);
/// assert!(p.matches(&Trade { symbol: 7, price: 101.0 }));
/// assert!(!p.matches(&Trade { symbol: 7, price: 99.0 }));
/// assert!(!p.matches(&Trade { symbol: 8, price: 101.0 }));
/// ```
pub struct Pattern<E: Event> {
    pub(crate) template: Template<E>,
}

impl<E: Event> Pattern<E> {
    /// Every event of `kind`.
    ///
    /// The event type comes from where the pattern is used (`cx.on_all(Pattern::kind(k), ...)`)
    /// or from a typed closure (`.filter(|t: &Tx| ...)`); a filter whose argument has no type,
    /// on a pattern whose type nothing names yet, does not compile ("type annotations needed"):
    /// name it once with `Pattern::<Tx>::kind(k)`, or use [`Scope::pattern`](crate::Scope::pattern)
    /// inside a monitor.
    pub fn kind(kind: E::Kind) -> Self {
        Self {
            template: Template {
                kind,
                key: None,
                filter: None,
            },
        }
    }

    /// Only events whose [`Event::key`] is `Some(key)`. Keyed templates are dispatched through a hash
    /// index (R6.9).
    pub fn key(mut self, key: u64) -> Self {
        self.template.key = Some(key);
        self
    }

    /// Narrows the pattern to events for which `f` returns true (filters combine with *and*).
    pub fn filter(self, f: impl Fn(&E) -> bool + Send + 'static) -> Self {
        let Template { kind, key, filter } = self.template;
        let filter: Filter<E> = match filter {
            None => Box::new(f),
            Some(prev) => Box::new(move |e| prev(e) && f(e)),
        };
        Self {
            template: Template {
                kind,
                key,
                filter: Some(filter),
            },
        }
    }

    /// The event kind this pattern is indexed under.
    pub fn event_kind(&self) -> E::Kind {
        self.template.kind
    }

    /// Whether `event` matches this pattern (kind, key and filters).
    pub fn matches(&self, event: &E) -> bool {
        self.template.matches(event)
    }
}

impl<E: Event<Kind = ()>> Pattern<E> {
    /// Every event, for an event type with a single kind (`type Kind = ()`): the same as
    /// `Pattern::kind(())`.
    ///
    /// Like [`kind`](Self::kind), it cannot tell the event type from a closure that follows it:
    /// where nothing else names the type, write it once, on the pattern (`Pattern::<Tx>::any()`)
    /// or on the filter's argument (`|t: &Tx| ...`); or build the pattern from the handler's scope
    /// with [`Scope::pattern`](crate::Scope::pattern), which knows it.
    ///
    /// ```
    /// use correlator::{Event, Pattern};
    /// #[derive(Clone, Debug)]
    /// struct Tx { amount: f64 }
    /// impl Event for Tx {
    ///     type Kind = ();
    ///     fn kind(&self) {}
    /// }
    /// let large = Pattern::<Tx>::any().filter(|t| t.amount > 1_000.0);
    /// // The same, with the type on the closure instead:
    /// let also_large = Pattern::any().filter(|t: &Tx| t.amount > 1_000.0);
    /// assert!(large.matches(&Tx { amount: 1_500.0 }));
    /// assert!(!also_large.matches(&Tx { amount: 900.0 }));
    /// ```
    pub fn any() -> Self {
        Self::kind(())
    }
}

impl<E: Event> fmt::Debug for Pattern<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Pattern")
            .field("kind", &self.template.kind)
            .field("key", &self.template.key)
            .field("filtered", &self.template.filter.is_some())
            .finish()
    }
}
