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
//! Inside an expression a template can also be [`named`](Pattern::named) and hold a condition on
//! the events matched before it in the same match ([`given`](Pattern::given), SPEC R7.5); what
//! such a condition sees is a [`Prior`], a view of the match in progress without copies.
//!
//! Owns templates, their names and [`Prior`]. May import `event` only.

use std::any::TypeId;
use std::fmt;
use std::hash::{Hash, Hasher};
use std::ops::{Bound, RangeBounds};
use std::sync::Arc;

use crate::event::Event;

type Filter<E> = Box<dyn Fn(&E) -> bool + Send>;
type Given<E> = Box<dyn Fn(&Prior<'_, E>, &E) -> bool + Send>;

/// A template: an event kind, an optional key, constraints on further fields as data, an optional
/// filter and an optional condition on the events matched before it ([`Pattern::given`]).
pub(crate) struct Template<E: Event> {
    pub(crate) kind: E::Kind,
    pub(crate) key: Option<u64>,
    /// Boxed once more: 8 bytes, so a template listener's slot does not grow (a template with
    /// field constraints pays one more load to test them).
    #[allow(clippy::box_collection)]
    fields: Option<Box<Vec<FieldTest>>>,
    filter: Option<Filter<E>>,
    given: Option<Given<E>>,
}

/// A constraint on a field ([`Event::field`]): its value within `lo..=hi` (an equality: `lo ==
/// hi`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct FieldTest {
    field: usize,
    lo: u64,
    hi: u64,
}

/// What a template's closures are, as far as that can be known: what lets one program serve the
/// expression listeners of every instance that registers the same expression (`expr::programs`).
/// A closure that captures nothing (zero-sized) behaves as its type says, so its [`TypeId`] names
/// it; one that captures something, or two filters combined, cannot be named, and an expression
/// holding it gets a program of its own.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct Ident {
    /// The filter's and the `given` condition's: the type of the closure, [`NoClosure`]'s for
    /// none, [`Unnamed`]'s for one its type does not name (two words each, where an `Option`
    /// would take three: a pattern is moved into every listener registration).
    closures: [TypeId; 2],
}

/// No closure (see [`Ident`]).
struct NoClosure;
/// A closure that captures something, or two combined (see [`Ident`]).
struct Unnamed;

impl Default for Ident {
    fn default() -> Self {
        Self {
            closures: [TypeId::of::<NoClosure>(); 2],
        }
    }
}

impl Ident {
    /// Whether some closure is not named by its type.
    pub(crate) fn opaque(&self) -> bool {
        self.closures.contains(&TypeId::of::<Unnamed>())
    }

    /// Notes a closure of type `F` as the filter (`at` 0) or the `given` condition (1): named by
    /// its type if it is the first there and captures nothing.
    fn closure<F: 'static>(&mut self, at: usize) {
        let first = self.closures[at] == TypeId::of::<NoClosure>();
        self.closures[at] = if first && std::mem::size_of::<F>() == 0 {
            TypeId::of::<F>()
        } else {
            TypeId::of::<Unnamed>()
        };
    }
}

/// Where a listener is listed in its kind's lists: unkeyed, under its key, or under the value of
/// an indexed field (SPEC R6.9, R6.10).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum IndexKey {
    Plain,
    Key(u64),
    /// A field's number (`u32`: 16 bytes in all, so a listener's registrations stay small) and
    /// value.
    Field(u32, u64),
}

/// `x` as a `u64` that orders as `x` does, for [`Event::field`] (`i64::MIN` is 0).
///
/// ```
/// use correlator::ordered_i64;
/// assert!(ordered_i64(-5) < ordered_i64(3));
/// assert_eq!(ordered_i64(i64::MIN), 0);
/// ```
pub fn ordered_i64(x: i64) -> u64 {
    (x as u64) ^ (1 << 63)
}

/// `x` as a `u64` that orders as `x` does (total order: `-0.0` before `0.0`, NaNs after +∞ or
/// before −∞ by their sign), for [`Event::field`].
///
/// ```
/// use correlator::ordered_f64;
/// assert!(ordered_f64(-1.5) < ordered_f64(-0.5));
/// assert!(ordered_f64(-0.5) < ordered_f64(0.25));
/// assert!(ordered_f64(0.25) < ordered_f64(f64::INFINITY));
/// ```
pub fn ordered_f64(x: f64) -> u64 {
    let b = x.to_bits();
    if b >> 63 == 1 {
        !b
    } else {
        b | (1 << 63)
    }
}

/// What an expression's [`Prior`] needs besides the matched events: for each definition of the
/// flattened expression, the template's number in expression order (`u32::MAX`: not a template),
/// and each template's name.
#[derive(Debug, Default)]
pub(crate) struct Labels {
    /// For each definition: its template number (`u32::MAX`: not a template), the first
    /// definition of its subtree (a subtree is the range `lo..=d`: children come before their
    /// parent), and its outcome when just started, as the matcher encodes it (filled in by the
    /// expression listener). One vector, allocated once with the definitions' count.
    pub(crate) meta: Vec<(u32, u32, u32)>,
    /// Whether some definition is satisfied or fails the moment it starts (a repetition with no
    /// minimum, a `not` of one): only then does starting a definition look its outcome up.
    pub(crate) odd_start: bool,
    /// Each template's name, by template number, up to the last named one (empty, allocating
    /// nothing, when no template is named).
    pub(crate) names: Vec<Option<&'static str>>,
    /// `names`, shared with the matches the handler gets, if any template is named.
    pub(crate) shared: Option<Arc<[Option<&'static str>]>>,
}

impl Labels {
    /// The template number of definition `d`, if it is a template.
    #[inline]
    pub(crate) fn ordinal(&self, d: usize) -> Option<u32> {
        self.meta.get(d).map(|m| m.0).filter(|&o| o != u32::MAX)
    }

    /// The first definition of definition `d`'s subtree.
    #[inline]
    pub(crate) fn lo(&self, d: usize) -> usize {
        self.meta.get(d).map_or(d, |m| m.1 as usize)
    }

    /// Definition `d`'s outcome when just started, as the matcher encoded it.
    #[inline]
    pub(crate) fn start(&self, d: usize) -> u32 {
        self.meta.get(d).map_or(0, |m| m.2)
    }

    /// The number of the first template named `name`.
    pub(crate) fn find(&self, name: &str) -> Option<u32> {
        template_named(&self.names, name)
    }
}

/// The number of the first template named `name` in `names` (template numbers' names): what a
/// [`Prior`] and a [`Match`](crate::Match) look names up with.
pub(crate) fn template_named(names: &[Option<&'static str>], name: &str) -> Option<u32> {
    names
        .iter()
        .position(|n| *n == Some(name))
        .map(|i| i as u32)
}

/// No templates: what a template listener's condition sees (nothing matched before it).
static NO_LABELS: Labels = Labels {
    meta: Vec::new(),
    odd_start: false,
    names: Vec::new(),
    shared: None,
};

/// The events a match in progress has matched so far, as a [`given`](Pattern::given) condition
/// sees them (SPEC R7.5): borrowed from the match, never copied.
///
/// Templates are numbered in expression order, left to right, from 0 (`a.then(b.or(c))`: `a` is 0,
/// `b` 1, `c` 2), a repetition ([`Pattern::times`]) counting as one template; the events are in
/// the order they were matched. A template under a `not` is not part of the match, and neither is
/// what it matched.
///
/// ```
/// use std::time::Duration;
/// use correlator::{Event, Expr, Pattern};
/// # #[derive(Clone, Debug)]
/// # struct Tx { card: u64, amount: u64, country: u16 }
/// # impl Event for Tx { type Kind = (); fn kind(&self) {} fn key(&self) -> Option<u64> { Some(self.card) } }
/// // A large transaction, then one in another country within 10 minutes of it.
/// let large = Pattern::<Tx>::any().filter(|t| t.amount > 5_000).named("large");
/// let abroad = Pattern::any().given(|p, t: &Tx| {
///     p.named("large").is_some_and(|large| large.country != t.country)
/// });
/// let rule: Expr<Tx> = large.then(abroad.within(Duration::from_secs(600)));
/// # let _ = rule;
/// ```
pub struct Prior<'a, E> {
    got: &'a [(u32, E)],
    labels: &'a Labels,
}

impl<'a, E> Prior<'a, E> {
    /// A view of `got`, `(definition, event)` in match order, labelled by `labels`.
    pub(crate) fn new(got: &'a [(u32, E)], labels: &'a Labels) -> Self {
        Prior { got, labels }
    }

    /// Nothing matched: what a template outside an expression sees.
    pub(crate) fn none() -> Self {
        Prior {
            got: &[],
            labels: &NO_LABELS,
        }
    }

    /// The events template number `template` matched, in the order they came.
    fn of(&self, template: u32) -> impl Iterator<Item = &'a E> + 'a {
        events_of(self.got, self.labels, template)
    }

    /// The first event template number `template` (expression order, from 0) matched, if it has.
    pub fn get(&self, template: usize) -> Option<&'a E> {
        self.of(u32::try_from(template).ok()?).next()
    }

    /// The first event the template named `name` ([`Pattern::named`]) matched, if it has.
    pub fn named(&self, name: &str) -> Option<&'a E> {
        self.of(self.labels.find(name)?).next()
    }

    /// Every event the template named `name` matched so far (more than one for a repetition),
    /// in the order they came.
    pub fn all_named(&self, name: &str) -> impl Iterator<Item = &'a E> + 'a {
        let (got, labels) = (self.got, self.labels);
        labels
            .find(name)
            .into_iter()
            .flat_map(move |t| events_of(got, labels, t))
    }

    /// The latest event matched so far, by any template.
    pub fn last(&self) -> Option<&'a E> {
        self.got.last().map(|(_, e)| e)
    }

    /// How many events have been matched so far.
    pub fn len(&self) -> usize {
        self.got.len()
    }

    /// Whether nothing has been matched yet.
    pub fn is_empty(&self) -> bool {
        self.got.is_empty()
    }
}

/// The events of `got` (`(definition, event)` in match order) that template number `template`
/// matched.
fn events_of<'a, E>(
    got: &'a [(u32, E)],
    labels: &'a Labels,
    template: u32,
) -> impl Iterator<Item = &'a E> + 'a {
    got.iter()
        .filter(move |(d, _)| labels.ordinal(*d as usize) == Some(template))
        .map(|(_, e)| e)
}

impl<E: Event> Template<E> {
    /// Whether the template has filters beyond kind and key.
    #[inline]
    pub(crate) fn has_filter(&self) -> bool {
        self.fields.is_some() || self.filter.is_some() || self.given.is_some()
    }

    /// Where the listener index lists the template: under its key; else under its first field
    /// equality; else unkeyed.
    pub(crate) fn index(&self) -> IndexKey {
        if let Some(k) = self.key {
            return IndexKey::Key(k);
        }
        // Field numbers from `u32::MAX - 1` up are not indexed (the listener table's
        // registrations keep them for the key and the unkeyed lists).
        let indexable = |t: &&FieldTest| t.lo == t.hi && t.field < (u32::MAX - 1) as usize;
        match self.fields.iter().flat_map(|f| f.iter()).find(indexable) {
            Some(t) => IndexKey::Field(t.field as u32, t.lo),
            None => IndexKey::Plain,
        }
    }

    /// The conditions that need no match in progress: the fields, then the filters.
    #[inline]
    fn passes_alone(&self, event: &E) -> bool {
        self.fields.as_ref().is_none_or(|fs| {
            fs.iter()
                .all(|t| event.field(t.field).is_some_and(|v| t.lo <= v && v <= t.hi))
        }) && self.filter.as_ref().is_none_or(|f| f(event))
    }

    /// Whether the template's `given` conditions hold for `event` after what `prior` holds (true
    /// without any).
    #[inline]
    pub(crate) fn given_holds(&self, prior: &Prior<'_, E>, event: &E) -> bool {
        self.given.as_ref().is_none_or(|g| g(prior, event))
    }

    /// Whether `event` matches the template's kind, key, fields and filters: everything but the
    /// `given` conditions, which need a match in progress (an expression listener asks this once
    /// per event for each template, whatever the number of its matches in progress).
    #[inline]
    pub(crate) fn admits(&self, event: &E) -> bool {
        self.kind == event.kind()
            && self.key.is_none_or(|k| event.key() == Some(k))
            && self.passes_alone(event)
    }

    /// Whether `other` is this template as data but for the key: kind and field constraints
    /// (what the closures are is the caller's [`Ident`], the key the caller's).
    pub(crate) fn same_data(&self, other: &Self) -> bool {
        self.kind == other.kind && self.fields == other.fields
    }

    /// Hashes what [`same_data`](Self::same_data) compares.
    pub(crate) fn hash_data(&self, h: &mut impl Hasher) {
        self.kind.hash(h);
        if let Some(fs) = &self.fields {
            for f in fs.iter() {
                (f.field, f.lo, f.hi).hash(h);
            }
        }
    }

    /// Whether `event`, already known to be of this template's kind and to carry the template's
    /// key if it has one (the listener tables list a keyed template under its key, and offer it
    /// only events with that key), passes the filters.
    #[inline]
    pub(crate) fn matches_listed(&self, event: &E) -> bool {
        debug_assert!(self.key.is_none_or(|k| event.key() == Some(k)));
        // The empty prior is made only for a `given` condition: made first, it cost four
        // instructions per offered event (callgrind of `workload/spike`).
        self.passes_alone(event) && self.given.as_ref().is_none_or(|g| g(&Prior::none(), event))
    }

    /// Whether `event` matches (kind, key and conditions), after what `prior` holds.
    #[inline]
    pub(crate) fn matches_after(&self, prior: &Prior<'_, E>, event: &E) -> bool {
        self.admits(event) && self.given_holds(prior, event)
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
    /// The name given with [`named`](Pattern::named).
    pub(crate) name: Option<&'static str>,
    /// What its closures are.
    pub(crate) ident: Ident,
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
                fields: None,
                filter: None,
                given: None,
            },
            name: None,
            ident: Ident::default(),
        }
    }

    /// Only events whose [`Event::key`] is `Some(key)`. Keyed templates are dispatched through a hash
    /// index (R6.9).
    pub fn key(mut self, key: u64) -> Self {
        self.template.key = Some(key);
        self
    }

    /// Only events whose field number `field` ([`Event::field`]) is `value` (SPEC R6.10): a
    /// constraint as data, checked before any filter closure. A template without a
    /// [`key`](Self::key) is indexed by its first field equality, as a keyed one is by its key:
    /// delivering an event costs no more because of listeners waiting on other values of that
    /// field (R6.9). Constraints combine with *and*.
    pub fn field(self, field: usize, value: u64) -> Self {
        self.field_in(field, value..=value)
    }

    /// Only events whose field number `field` ([`Event::field`]) lies in `range` (SPEC R6.10): a
    /// constraint as data, checked before any filter closure (not indexed). For signed and
    /// floating-point values, encode the field and the bounds with [`ordered_i64`] or
    /// [`ordered_f64`]. An empty range matches nothing.
    pub fn field_in(mut self, field: usize, range: impl RangeBounds<u64>) -> Self {
        let lo = match range.start_bound() {
            Bound::Included(&x) => Some(x),
            Bound::Excluded(&x) => x.checked_add(1),
            Bound::Unbounded => Some(0),
        };
        let hi = match range.end_bound() {
            Bound::Included(&x) => Some(x),
            Bound::Excluded(&x) => x.checked_sub(1),
            Bound::Unbounded => Some(u64::MAX),
        };
        // An empty range (`5..5`, `u64::MAX + 1..`): a test no value passes.
        let (lo, hi) = match (lo, hi) {
            (Some(lo), Some(hi)) => (lo, hi),
            _ => (1, 0),
        };
        self.template
            .fields
            .get_or_insert_with(Box::default)
            .push(FieldTest { field, lo, hi });
        self
    }

    /// Narrows the pattern to events for which `f` returns true (filters combine with *and*).
    ///
    /// In an event expression, a filter that captures nothing (`|t: &Tx| t.amount > 1_000`,
    /// constants included) lets every instance that registers the expression run one shared
    /// program; a filter that captures a value (`move |t| t.country != country`), or a second
    /// filter on the same template, gives each registration a program of its own, compiled and
    /// kept per listener (SPEC, Decisions: "One program per expression shape"). To compare with
    /// an event matched earlier in the same expression, [`given`](Self::given) without captures
    /// says it and stays shared.
    pub fn filter<F: Fn(&E) -> bool + Send + 'static>(mut self, f: F) -> Self {
        self.ident.closure::<F>(0);
        let filter: Filter<E> = match self.template.filter.take() {
            None => Box::new(f),
            Some(prev) => Box::new(move |e| prev(e) && f(e)),
        };
        self.template.filter = Some(filter);
        self
    }

    /// Narrows the pattern, inside an event expression, by a condition on the events the same
    /// match has matched before this one (SPEC R7.5): Apama's `A() as a -> B(x = a.x)`, Esper's
    /// `a.country != b.country`. `f` gets the match so far as a [`Prior`] (by position, by
    /// [name](Self::named), or the latest) and the candidate event; conditions combine with
    /// [`filter`](Self::filter) and each other by *and*, the filters asked first.
    ///
    /// The kind and key stay data, so the listener index still narrows by them; a condition such
    /// as "the same card as `a`" is best written as the key where the card is known (a per-key
    /// instance knows it). In a template listener (`on`, `on_all`, ...), or in the first template
    /// of an expression, nothing has been matched before: the `Prior` is empty.
    ///
    /// ```
    #[doc = include_str!("../doc/expr_example_prelude.txt")]
    /// // A 1, then a kind-2 event stamped at least 5 s after it.
    /// let first = Pattern::kind(1).named("a");
    /// let later = Pattern::kind(2).given(|p, e: &Ev| p.named("a").is_some_and(|a| e.1 >= a.1 + 5));
    /// assert_eq!(first_match(first.then(later), &[(1, 10), (2, 12), (2, 15)]), Some((15, vec![1, 2])));
    /// ```
    pub fn given<F>(mut self, f: F) -> Self
    where
        F: Fn(&Prior<'_, E>, &E) -> bool + Send + 'static,
    {
        self.ident.closure::<F>(1);
        let given: Given<E> = match self.template.given.take() {
            None => Box::new(f),
            Some(prev) => Box::new(move |p, e| prev(p, e) && f(p, e)),
        };
        self.template.given = Some(given);
        self
    }

    /// Names the template, for the conditions of later templates ([`Prior::named`]) and for the
    /// handler ([`Match::named`](crate::Match::named)). Names are the user's: two templates of one
    /// expression with the same name are found as the first of them (registering such an
    /// expression logs a warning).
    pub fn named(mut self, name: &'static str) -> Self {
        self.name = Some(name);
        self
    }

    /// The event kind this pattern is indexed under.
    pub fn event_kind(&self) -> E::Kind {
        self.template.kind
    }

    /// Whether `event` matches this pattern (kind, key and filters).
    pub fn matches(&self, event: &E) -> bool {
        self.template.matches_after(&Prior::none(), event)
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
            .field("filtered", &self.template.has_filter())
            .field("name", &self.name)
            .finish()
    }
}
