//! Patterns: what a listener waits for.
//!
//! Today a pattern is one *template*: an event kind plus an optional filter on the event's fields.
//! The type is opaque on purpose: event expressions (followed-by, `and`, `or`, `not`, `within`, SPEC
//! R7.3) are further variants of the private `Expr`, built through methods on [`Pattern`], so the
//! listener API (`on`, `on_all`, ...) does not change when they arrive.

use std::fmt;

use crate::event::Event;

type Filter<E> = Box<dyn Fn(&E) -> bool + Send>;

/// A template: an event kind and an optional filter.
pub(crate) struct Template<E: Event> {
    pub(crate) kind: E::Kind,
    filter: Option<Filter<E>>,
}

impl<E: Event> Template<E> {
    #[inline]
    pub(crate) fn matches(&self, event: &E) -> bool {
        match &self.filter {
            None => true,
            Some(f) => f(event),
        }
    }
}

pub(crate) enum Expr<E: Event> {
    Template(Template<E>),
}

/// What a listener matches.
///
/// ```
/// use correlator::{Event, Pattern};
/// #[derive(Clone, Debug)]
/// struct Trade { symbol: u32, price: f64 }
/// impl Event for Trade {
///     type Kind = ();
///     fn kind(&self) {}
/// }
/// // Every trade of symbol 7 above 100.
/// let p = Pattern::<Trade>::kind(()).filter(|t| t.symbol == 7).filter(|t| t.price > 100.0);
/// assert!(p.matches(&Trade { symbol: 7, price: 101.0 }));
/// assert!(!p.matches(&Trade { symbol: 7, price: 99.0 }));
/// ```
pub struct Pattern<E: Event> {
    pub(crate) expr: Expr<E>,
}

impl<E: Event> Pattern<E> {
    /// Every event of `kind`.
    pub fn kind(kind: E::Kind) -> Self {
        Self {
            expr: Expr::Template(Template { kind, filter: None }),
        }
    }

    /// Narrows the pattern to events for which `f` returns true (filters combine with *and*).
    pub fn filter(self, f: impl Fn(&E) -> bool + Send + 'static) -> Self {
        match self.expr {
            Expr::Template(Template { kind, filter }) => {
                let filter: Filter<E> = match filter {
                    None => Box::new(f),
                    Some(prev) => Box::new(move |e| prev(e) && f(e)),
                };
                Self {
                    expr: Expr::Template(Template {
                        kind,
                        filter: Some(filter),
                    }),
                }
            }
        }
    }

    /// The event kind this pattern is indexed under.
    pub fn event_kind(&self) -> E::Kind {
        match &self.expr {
            Expr::Template(t) => t.kind,
        }
    }

    /// Whether `event` matches this pattern on its own (kind and filters).
    pub fn matches(&self, event: &E) -> bool {
        match &self.expr {
            Expr::Template(t) => t.kind == event.kind() && t.matches(event),
        }
    }
}

impl<E: Event> fmt::Debug for Pattern<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.expr {
            Expr::Template(t) => f
                .debug_struct("Pattern")
                .field("kind", &t.kind)
                .field("filtered", &t.filter.is_some())
                .finish(),
        }
    }
}
