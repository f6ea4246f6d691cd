//! The expression tree and its builders: [`Expr`], the primaries [`wait`], [`at`] and [`not`],
//! the combinators (`then`, `and`, `or`, `within`, `within_from_first`) on [`Expr`] and on a single
//! [`Pattern`], the repetitions of a template (`times`, `at_least`, `between`), the after-match
//! policy ([`AfterMatch`]), and the program a matcher steps through ([`Def`], with the templates'
//! [`Labels`]). The language itself is described in the [module docs](crate::expr).
//!
//! # The tree, held flat
//! An [`Expr`] holds its tree as the definitions it compiles to, in the program's order
//! (children before parents, left before right, the root last), in one vector: a combinator
//! appends the right side's definitions to the left side's (its children's numbers moved up)
//! and pushes its own. Compiling moves them into the program; looking a per-key registration's
//! program up (`expr::programs`) hashes and compares them in one pass each; dropping one frees
//! one buffer. A tree of boxed nodes cost a recursive walk for each and an allocation per node:
//! about 800 instructions per registration of `trade.then(confirm).within_from_first(d)`.
//!
//! Owns the tree and the definitions. May import `event`, `hash`, `pattern` and `time`.

use std::hash::{Hash, Hasher};
use std::time::Duration;

use smallvec::SmallVec;

use crate::event::Event;
use crate::hash::KindHasher;
use crate::pattern::{Ident, Labels, Pattern, Template};
use crate::time::Time;

/// One definition of a flattened expression: children before parents, left before right, the
/// root last; the indices name other definitions.
pub(crate) enum Def<E: Event> {
    Leaf(Template<E>),
    /// A template matched `min..=max` times (`max`: `u32::MAX` for no upper bound), greedily.
    Repeat(Template<E>, u32, u32),
    Wait(Duration),
    At(Time),
    Then(usize, usize),
    And(usize, usize),
    Or(usize, usize),
    Not(usize),
    Within(usize, Duration),
    /// `within_from_first`: the bound starts at the first event a template of the inner part
    /// (outside a `not`) matches.
    WithinFirst(usize, Duration),
    /// `all(x)`: each time `x` matches, the match goes on as a copy in which `x` starts again.
    All(usize),
}

impl<E: Event> Def<E> {
    /// The template of a `Leaf` or `Repeat` definition.
    fn template(&self) -> Option<&Template<E>> {
        match self {
            Def::Leaf(t) | Def::Repeat(t, ..) => Some(t),
            _ => None,
        }
    }
}

/// A binary definition's constructor (`Def::Then`, `Def::And`, `Def::Or`), from its children.
type Binary<E> = fn(usize, usize) -> Def<E>;

/// A flattened expression: its definitions and its templates' labels. Once compiled it does not
/// change, so one program serves every listener registered with the same expression
/// (`programs`); what differs between them, the key of their keyed templates, each listener
/// keeps itself.
///
/// `repr(C)`, the fields an event's test reads first ([`Prog::ADMIT_HEAD`] bytes: the definitions'
/// buffer, the plan, the keyed bits): a program of its own (a capturing filter) is cold when
/// its listener's key comes, and the look-ahead prefetches those lines, then the template the
/// plan names (`context::ahead`).
#[repr(C)]
pub(crate) struct Prog<E: Event> {
    pub(crate) defs: Vec<Def<E>>,
    /// The templates an event offered to a listener is tested against, each distinct one once
    /// (see [`admit_plan`](super::matcher::admit_plan)).
    pub(crate) admits: SmallVec<[(u32, u64); 4]>,
    /// Bit `d`: definition `d` is a template keyed by its listener's key, moved out of the
    /// template when it was compiled (every keyed template of an expression with one key and at
    /// most [`ADMIT_BITS`](super::matcher::ADMIT_BITS) definitions; otherwise 0, and each
    /// template keeps its own key).
    pub(crate) keyed: u64,
    pub(crate) labels: Labels,
    /// What each template's closures are, by template number.
    pub(crate) idents: Vec<Ident>,
    /// Why the expression can never match, if it cannot (the registration warning, see
    /// [`never_matches`](super::analysis::never_matches)): found once per program.
    pub(crate) never: Option<&'static str>,
    /// The states every match starts in, if its start sets no time (see
    /// [`StartImage`](super::matcher::StartImage)): found once per program.
    pub(crate) start: Option<super::matcher::StartImage>,
}

impl<E: Event> Prog<E> {
    /// The bytes at the start of a program that testing an event reads: `defs`, `admits`,
    /// `keyed`.
    pub(crate) const ADMIT_HEAD: usize = std::mem::offset_of!(Self, keyed) + 8;

    /// A hash of the program's tree: each definition's operator and the numbers that place it (its
    /// children, a repetition's bounds), not its durations, times or templates.
    #[cfg(feature = "checkpoint")]
    pub(crate) fn shape(&self) -> u64 {
        let defs = &self.defs;
        // FNV-1a over the words: stable across builds and platforms, unlike `DefaultHasher`.
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        let mut mix = |w: u64| {
            for b in w.to_le_bytes() {
                h ^= u64::from(b);
                h = h.wrapping_mul(0x0000_0100_0000_01b3);
            }
        };
        mix(defs.len() as u64);
        for def in defs {
            let (tag, a, b) = match def {
                Def::Leaf(_) => (1, 0, 0),
                Def::Repeat(_, min, max) => (2, u64::from(*min), u64::from(*max)),
                Def::Wait(_) => (3, 0, 0),
                Def::At(_) => (4, 0, 0),
                Def::Then(l, r) => (5, *l as u64, *r as u64),
                Def::And(l, r) => (6, *l as u64, *r as u64),
                Def::Or(l, r) => (7, *l as u64, *r as u64),
                Def::Not(x) => (8, *x as u64, 0),
                Def::Within(x, _) => (9, *x as u64, 0),
                Def::WithinFirst(x, _) => (10, *x as u64, 0),
                Def::All(x) => (11, *x as u64, 0),
            };
            mix(tag);
            mix(a);
            mix(b);
        }
        h
    }
}

/// One definition of an expression being built, in the order [`Expr::compile`] gives the
/// program's (children before parents, left before right, the root last), with what a template
/// carries beside its definition until it is compiled.
struct Part<E: Event> {
    def: Def<E>,
    /// A template's name (`None` for the other definitions).
    name: Option<&'static str>,
    /// What a template's closures are (the default for the other definitions).
    ident: Ident,
}

impl<E: Event> Part<E> {
    /// An operator's or a timer's definition.
    fn op(def: Def<E>) -> Self {
        Part {
            def,
            name: None,
            ident: Ident::default(),
        }
    }

    /// Moves its children's numbers up by `by` (its expression appended to one of `by`
    /// definitions).
    fn shift(&mut self, by: usize) {
        match &mut self.def {
            Def::Then(a, b) | Def::And(a, b) | Def::Or(a, b) => {
                *a += by;
                *b += by;
            }
            Def::Not(a) | Def::Within(a, _) | Def::WithinFirst(a, _) | Def::All(a) => *a += by,
            Def::Leaf(_) | Def::Repeat(..) | Def::Wait(_) | Def::At(_) => {}
        }
    }
}

/// An event expression; build one from [`Pattern`]s with the combinators, [`wait`], [`at`] and
/// [`not`] (see the [module docs](crate::expr) for the grammar).
///
/// An expression matches when an event or a clock tick completes it: never at the moment it is set
/// up. A [`not`] is a guard that counts as matched only inside `and` and at the bound of `within`
/// (unlike Apama EPL, where `on not x` fires at once); a timer already due when it starts fires at
/// the next clock tick.
///
/// The combinators' examples share a prelude that the docs hide
/// (`engine/doc/expr_example_prelude.txt`): the event `Ev(kind, second)` is stamped `second` seconds
/// into the stream, and `first_match(expr, events)` registers `expr` with `when` on a correlator on
/// event time, feeds `events` as `(kind, second)` pairs, moves the clock to 1,000 s and returns the
/// match, if any, as (the second it completed, its events' kinds).
pub struct Expr<E: Event> {
    /// The tree as the definitions it compiles to (a vector, not boxed nodes: building,
    /// comparing with a shared program and dropping an expression walk one allocation).
    parts: Vec<Part<E>>,
    after: AfterMatch,
}

impl<E: Event> From<Pattern<E>> for Expr<E> {
    fn from(p: Pattern<E>) -> Self {
        Expr::of(Part {
            def: Def::Leaf(p.template),
            name: p.name,
            ident: p.ident,
        })
    }
}

/// Which matches in progress survive a completed one, for a repeating listener
/// ([`when_all`](crate::Scope::when_all)); set with [`Expr::after_match`] (SPEC R7.6). The names
/// are Flink CEP's after-match skip strategies.
///
/// ```
#[doc = include_str!("../../doc/expr_example_prelude.txt")]
/// // Every run of three 1s, or only runs that do not overlap.
/// fn all_matches(expr: Expr<Ev>) -> Vec<u64> {
///     struct Listen(Option<Expr<Ev>>, std::sync::Arc<std::sync::Mutex<Vec<u64>>>);
///     impl Monitor<Ev> for Listen {
///         fn on_load(&mut self, cx: &mut Scope<'_, Ev, Self>) {
///             cx.when_all(self.0.take().unwrap(), |m, _cx, hit| {
///                 m.1.lock().unwrap().push(hit.time.as_nanos() / 1_000_000_000)
///             });
///         }
///     }
///     let got = std::sync::Arc::default();
///     let c = Correlator::<Ev>::builder().event_time().build().unwrap();
///     c.load(Listen(Some(expr), std::sync::Arc::clone(&got))).unwrap();
///     let input = c.input();
///     c.start();
///     for s in 1..=6 {
///         input.send_to(c.main(), Ev(1, s)).unwrap();
///     }
///     c.shutdown().unwrap();
///     let v = got.lock().unwrap().clone();
///     v
/// }
/// assert_eq!(all_matches(Pattern::kind(1).times(3)), [3, 4, 5, 6]);
/// assert_eq!(all_matches(Pattern::kind(1).times(3).after_match(AfterMatch::SkipPastLastEvent)), [3, 6]);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum AfterMatch {
    /// Every match in progress goes on: matches may overlap (the default).
    #[default]
    NoSkip,
    /// Every match in progress is dropped when one completes, so the next match starts after the
    /// completed match's last event and no two matches share an event; of matches that complete
    /// on the same stimulus, only the one that started first fires.
    SkipPastLastEvent,
}

/// A timer primary: fires `d` after the expression (or the part of it) starts being evaluated.
///
/// Inclusive: with `start` the context's logical time when it starts, it fires as soon as the
/// clock reaches `start + d` (its handler sees the clock at exactly `start + d`), so under event
/// time it fires before an event stamped `start + d`. The clock is the context's logical clock
/// ([which one](crate::Time#which-clock)): in the default tick mode it fires at the first tick at or
/// after `start + d`, so a `d` shorter than the tick period (100 ms by default) cannot be honoured
/// and registering it logs a warning.
///
/// `wait(Duration::ZERO)` fires at the next clock tick (so `when_all(wait(Duration::ZERO))` fires
/// once per tick); a `d` that puts the trigger time beyond the end of logical time
/// (`u64::MAX` ns, e.g. `Duration::MAX`) never fires. See the [module docs](crate::expr).
///
/// ```
#[doc = include_str!("../../doc/expr_example_prelude.txt")]
/// // Five seconds after a kind-1 event.
/// let expr = Pattern::kind(1).then(wait(Duration::from_secs(5)));
/// assert_eq!(first_match(expr, &[(1, 2)]), Some((7, vec![1])));
/// ```
pub fn wait<E: Event>(d: Duration) -> Expr<E> {
    Expr::of(Part::op(Def::Wait(d)))
}

/// A timer primary: fires when the context's logical clock reaches `t`.
///
/// If the clock has already passed `t` when it starts, it fires at the next clock tick (so
/// `when_all(at(t))` then fires once per tick).
///
/// ```
#[doc = include_str!("../../doc/expr_example_prelude.txt")]
/// // A kind-1 event, then the clock reaching 30 s.
/// let expr = Pattern::kind(1).then(at(Time::from_secs(30)));
/// assert_eq!(first_match(expr, &[(1, 10), (2, 20)]), Some((30, vec![1])));
/// ```
pub fn at<E: Event>(t: Time) -> Expr<E> {
    Expr::of(Part::op(Def::At(t)))
}

/// Holds until `x` matches, then fails: `a.and(not(b))` matches `a` unless `b` comes first, and
/// `not(b).within(d)` matches at the bound if `b` did not come.
///
/// A `not` that holds counts as matched only inside `and` (once the other side matched) and at the
/// bound of `within`; it never completes a match by itself, so a bare `not(b)`, `a.or(not(b))` (for
/// its `not` side) and `not(b).then(a)` never fire. This differs on purpose from Apama EPL, where
/// `on not b` fires as soon as it is set up; see the [module docs](crate::expr) for why, and what to
/// write instead. Registering an expression with such a `not` logs a `tracing` warning.
///
/// ```
#[doc = include_str!("../../doc/expr_example_prelude.txt")]
/// // No kind 2 for 5 s: matches at the bound (with no events), or not at all if a 2 comes.
/// let silent = || not(Pattern::kind(2)).within(Duration::from_secs(5));
/// assert_eq!(first_match(silent(), &[(1, 1)]), Some((5, vec![])));
/// assert_eq!(first_match(silent(), &[(2, 3)]), None);
/// // A trade (1) not confirmed (2) within 5 s of it: the guard inside `then`.
/// let unconfirmed = Pattern::kind(1).then(not(Pattern::kind(2)).within(Duration::from_secs(5)));
/// assert_eq!(first_match(unconfirmed, &[(1, 10), (3, 12)]), Some((15, vec![1])));
/// ```
pub fn not<E: Event>(x: impl Into<Expr<E>>) -> Expr<E> {
    x.into().wrap(Def::Not)
}

/// Every match of `x`, inside an expression (SPEC R7.8; Apama's `all` operator): each time `x`
/// matches, the match it is part of goes on (and may complete, firing the listener), and a copy of
/// that match, in which `x` starts again after the event, looks for the next match of `x`. So
/// `all(a).then(b)` pairs every `a` with the first `b` after it, and `a.then(all(b))` pairs the
/// first `a` with every `b` after it; a listener whose expression holds an `all` can fire more than
/// once even under [`when`](crate::Scope::when), and ends when no copy can match any more.
///
/// The copy keeps everything else of the match (the events matched outside `x`, the clocks of the
/// `within` bounds around `all`), so `a.then(all(b)).within(d)` pairs `a` with every `b` until the
/// bound. Under [`not`] an `all` is its inner part: the first match of `x` fails the `not`.
///
/// These are the Apama documentation's own examples, `on all A() -> B()` and `on A() -> all B()`
/// over the events `C1 A1 F1 A2 C2 B1 D1 E1 B2 A3 G1 B3`:
///
/// ```
/// use correlator::*;
/// # #[derive(Clone, Debug)]
/// # struct Ev(char, u32);
/// # impl Event for Ev { type Kind = char; fn kind(&self) -> char { self.0 } }
/// fn fire(expr: Expr<Ev>) -> Vec<String> {
///     struct Listen(Option<Expr<Ev>>, std::sync::Arc<std::sync::Mutex<Vec<String>>>);
///     impl Monitor<Ev> for Listen {
///         fn on_load(&mut self, cx: &mut Scope<'_, Ev, Self>) {
///             cx.when(self.0.take().unwrap(), |m, _cx, hit| {
///                 let names: Vec<String> = hit.events.iter().map(|e| format!("{}{}", e.0, e.1)).collect();
///                 m.1.lock().unwrap().push(names.join(" "));
///             });
///         }
///     }
///     let got = std::sync::Arc::default();
///     let c = Correlator::<Ev>::builder().build().unwrap();
///     c.load(Listen(Some(expr), std::sync::Arc::clone(&got))).unwrap();
///     let input = c.input();
///     c.start();
///     for (k, n) in [('C', 1), ('A', 1), ('F', 1), ('A', 2), ('C', 2), ('B', 1), ('D', 1),
///                    ('E', 1), ('B', 2), ('A', 3), ('G', 1), ('B', 3)] {
///         input.send_to(c.main(), Ev(k, n)).unwrap();
///     }
///     c.shutdown().unwrap();
///     let v = got.lock().unwrap().clone();
///     v
/// }
/// let (a, b) = (|| Pattern::kind('A'), || Pattern::kind('B'));
/// assert_eq!(fire(all(a()).then(b())), ["A1 B1", "A2 B1", "A3 B3"]);
/// assert_eq!(fire(a().then(all(b()))), ["A1 B1", "A1 B2", "A1 B3"]);
/// ```
pub fn all<E: Event>(x: impl Into<Expr<E>>) -> Expr<E> {
    x.into().wrap(Def::All)
}

impl<E: Event> Expr<E> {
    /// Followed-by (`self -> next`): `next` is looked for only after `self` matched.
    ///
    /// ```
    #[doc = include_str!("../../doc/expr_example_prelude.txt")]
    /// // 1 then 2: the 2 before the 1 does not count.
    /// let expr = Pattern::kind(1).then(Pattern::kind(2)).then(Pattern::kind(3));
    /// assert_eq!(first_match(expr, &[(2, 0), (1, 1), (2, 2), (3, 4)]), Some((4, vec![1, 2, 3])));
    /// ```
    pub fn then(self, next: impl Into<Expr<E>>) -> Expr<E> {
        self.join(next.into(), Def::Then)
    }

    /// Both, in any order.
    ///
    /// ```
    #[doc = include_str!("../../doc/expr_example_prelude.txt")]
    /// // 1 and 2 in any order; the match lists them in expression order.
    /// let expr = Pattern::kind(1).then(Pattern::kind(3)).and(Pattern::kind(2));
    /// assert_eq!(first_match(expr, &[(2, 0), (1, 1), (3, 2)]), Some((2, vec![1, 3, 2])));
    /// ```
    pub fn and(self, other: impl Into<Expr<E>>) -> Expr<E> {
        self.join(other.into(), Def::And)
    }

    /// Either.
    ///
    /// ```
    #[doc = include_str!("../../doc/expr_example_prelude.txt")]
    /// // Whichever side completes first; the match lists every event its templates had
    /// // matched by then, in expression order: here the 1 of the unfinished side too.
    /// let expr = Pattern::kind(1).then(Pattern::kind(3)).or(Pattern::kind(2));
    /// assert_eq!(first_match(expr, &[(1, 0), (2, 1), (3, 2)]), Some((1, vec![1, 2])));
    /// ```
    pub fn or(self, other: impl Into<Expr<E>>) -> Expr<E> {
        self.join(other.into(), Def::Or)
    }

    /// Must match within `d` of the moment it starts being evaluated; fails when the clock reaches
    /// the bound.
    ///
    /// **The bound is exclusive**: with `start` the context's logical time when it starts, an event
    /// taken while the clock is before `start + d` counts; once the clock reaches `start + d` it
    /// has failed (and `not(x).within(d)` has matched), so an event at exactly `start + d` is too
    /// late.
    ///
    /// **The clock** is the context's logical clock, never the wall clock
    /// ([which one](crate::Time#which-clock)). In the default tick mode (10 ticks per second) an
    /// event is evaluated at the time of the last tick its context took and the bound expires at
    /// the first tick at or after `start + d`: `d` is counted in whole ticks, so `within(50ms)`
    /// means "before the next tick", and registering a bound shorter than the tick period logs a
    /// warning. Under [`event_time`](crate::CorrelatorBuilder::event_time) it is measured on the
    /// events' own stamps, the same at any replay speed.
    ///
    /// A bound beyond the end of logical time (`u64::MAX` ns, e.g. `Duration::MAX`) never expires;
    /// `within(Duration::ZERO)` expires at the next clock tick.
    ///
    /// **It counts from the start, not from the first event.** Under
    /// [`when_all`](crate::Scope::when_all) the fresh match waiting for its first event started at
    /// registration (or at the previous match's progress), so after a quiet spell longer than `d`
    /// it has expired, the listener ends (logged at INFO) and, if it was the instance's last, the
    /// instance too. For a bound counted from the first event, use
    /// [`within_from_first`](Self::within_from_first):
    ///
    /// ```
    /// use std::time::Duration;
    /// use correlator::{Correlator, Event, Match, Monitor, Pattern, Scope, Time};
    /// # #[derive(Clone, Debug)] struct Ev(u32, u64);
    /// # impl Event for Ev {
    /// #     type Kind = u32;
    /// #     fn kind(&self) -> u32 { self.0 }
    /// #     fn time(&self) -> Option<Time> { Some(Time::from_secs(self.1)) }
    /// # }
    /// struct Pairs { from_first: bool, fired: std::sync::Arc<std::sync::Mutex<Vec<u64>>> }
    /// impl Monitor<Ev> for Pairs {
    ///     fn on_load(&mut self, cx: &mut Scope<'_, Ev, Self>) {
    ///         let ten = Duration::from_secs(10);
    ///         let pair = Pattern::kind(1).then(Pattern::kind(2));
    ///         let expr = if self.from_first { pair.within_from_first(ten) } else { pair.within(ten) };
    ///         cx.when_all(expr, |m: &mut Self, _: &mut Scope<'_, Ev, Self>, hit: &Match<Ev>| {
    ///             m.fired.lock().unwrap().push(hit.time.as_nanos() / 1_000_000_000)
    ///         });
    ///     }
    /// }
    /// for from_first in [false, true] {
    ///     let c = Correlator::<Ev>::builder().event_time().build()?;
    ///     let fired = std::sync::Arc::default();
    ///     c.load(Pairs { from_first, fired: std::sync::Arc::clone(&fired) })?;
    ///     let input = c.input();
    ///     c.start();
    ///     // A quiet spell of 60 s, then a pair 3 s apart, and another.
    ///     for (kind, at_s) in [(1, 60), (2, 63), (1, 70), (2, 71)] {
    ///         input.send_to(c.main(), Ev(kind, at_s))?;
    ///     }
    ///     c.shutdown()?;
    ///     let fired = fired.lock().unwrap().clone();
    ///     // `within`: expired at 10 s, before the first pair; `within_from_first`: both fire.
    ///     assert_eq!(fired, if from_first { vec![63, 71] } else { vec![] });
    /// }
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn within(self, d: Duration) -> Expr<E> {
        self.wrap(|x| Def::Within(x, d))
    }

    /// Must match within `d` of its first event: the clock starts when one of its templates
    /// (outside a `not`) first matches, and before that nothing expires. This is what Flink CEP's
    /// `within` means, and what "a then b within 10 s" usually means; [`within`](Self::within)
    /// counts from the moment the expression starts instead.
    ///
    /// With `first` the logical time of that event, it is `within(d)` started at `first`: an event
    /// taken while the clock is before `first + d` counts; once the clock reaches `first + d` it
    /// has failed (or, if its part holds a `not`, matched: `a.then(not(x)).within_from_first(d)`
    /// is "`a` not followed by `x` within `d`"). Under [`when_all`](crate::Scope::when_all) each
    /// new match runs its own clock, so a quiet spell of any length does not end the listener.
    /// "First" is the first template to match anywhere in it (either side of `and` or `or`, the
    /// left side of `then`). `not(x).within_from_first(d)` has no first event and never matches
    /// (registering it logs a warning): write `not(x).within(d)` for "no `x` for `d`". See
    /// [`within`](Self::within) for an example with a quiet spell, and for the clock and the
    /// tick-mode resolution, which are the same.
    ///
    /// ```
    /// use std::time::Duration;
    /// use correlator::{Expr, Event, Pattern};
    /// # #[derive(Clone, Debug)] struct Ev(u32);
    /// # impl Event for Ev { type Kind = u32; fn kind(&self) -> u32 { self.0 } }
    /// // Every trade (1) followed by a cancel (2) within 50 ms of the trade.
    /// let cancelled: Expr<Ev> = Pattern::kind(1)
    ///     .then(Pattern::kind(2))
    ///     .within_from_first(Duration::from_millis(50));
    /// # let _ = cancelled;
    /// ```
    pub fn within_from_first(self, d: Duration) -> Expr<E> {
        self.wrap(|x| Def::WithinFirst(x, d))
    }

    /// What a repeating listener ([`when_all`](crate::Scope::when_all)) does with its other
    /// matches in progress when one completes (SPEC R7.6): [`AfterMatch::NoSkip`] by default.
    /// It belongs to the whole expression, wherever it is set: an expression built from parts
    /// keeps the policy a part set (the leftmost, if parts set different ones).
    pub fn after_match(self, policy: AfterMatch) -> Expr<E> {
        Expr {
            parts: self.parts,
            after: policy,
        }
    }

    fn of(part: Part<E>) -> Self {
        // Room for the usual expression (three templates and their operators) in one allocation:
        // a reallocation costs more than the larger first one.
        let mut parts = Vec::with_capacity(8);
        parts.push(part);
        Expr {
            parts,
            after: AfterMatch::NoSkip,
        }
    }

    /// `self` and `other` under a binary node; the policy is the one either part set (the left
    /// one's if both did).
    fn join(self, other: Expr<E>, node: Binary<E>) -> Expr<E> {
        let after = if self.after == AfterMatch::NoSkip {
            other.after
        } else {
            self.after
        };
        let (mut parts, mut right) = (self.parts, other.parts);
        let (left, by) = (parts.len() - 1, parts.len());
        // Room for the node and one more above it (`a.then(b).within(d)`), in whichever side's
        // buffer has it: the left side goes in front of the right side's (`a.then(b.then(c))`).
        let need = by + right.len() + 2;
        if parts.capacity() < need && right.capacity() >= need {
            right.splice(0..0, parts.drain(..));
            std::mem::swap(&mut parts, &mut right);
        } else {
            parts.reserve(right.len() + 2);
            parts.append(&mut right);
        }
        for p in &mut parts[by..] {
            p.shift(by);
        }
        let right = parts.len() - 1;
        parts.push(Part::op(node(left, right)));
        Expr { parts, after }
    }

    /// The root under a new one made by `node` from it, keeping the policy.
    fn wrap(mut self, node: impl FnOnce(usize) -> Def<E>) -> Expr<E> {
        let root = self.parts.len() - 1;
        self.parts.push(Part::op(node(root)));
        self
    }

    /// The program: the definitions as built (children before parents; the root is the last),
    /// each with its template number and the first definition of its subtree. Also returns the
    /// after-match policy and the listener's key, if the templates' keys were moved out
    /// ([`Prog::keyed`]).
    pub(crate) fn compile(self) -> (Prog<E>, AfterMatch, Option<u64>) {
        const NONE: u32 = u32::MAX;
        let n = self.parts.len();
        let mut defs = Vec::with_capacity(n);
        let mut labels = Labels {
            meta: Vec::with_capacity(n),
            ..Labels::default()
        };
        let mut idents = Vec::new();
        for Part { def, name, ident } in self.parts {
            let d = defs.len();
            let lo = match &def {
                Def::Leaf(_) | Def::Repeat(..) | Def::Wait(_) | Def::At(_) => d as u32,
                Def::Then(a, _)
                | Def::And(a, _)
                | Def::Or(a, _)
                | Def::Not(a)
                | Def::Within(a, _)
                | Def::WithinFirst(a, _)
                | Def::All(a) => labels.meta[*a].1,
            };
            let ordinal = if def.template().is_some() {
                let t = idents.len();
                idents.push(ident);
                if name.is_some() {
                    labels.names.resize(t, None);
                    labels.names.push(name);
                }
                t as u32
            } else {
                NONE
            };
            labels.meta.push((ordinal, lo, 0));
            defs.push(def);
        }
        if labels.names.iter().any(Option::is_some) {
            labels.shared = Some(labels.names.clone().into());
        }
        let (keyed, key) = take_keys(&mut defs);
        let admits = super::matcher::admit_plan(&defs, &labels, &idents);
        let prog = Prog {
            defs,
            labels,
            keyed,
            idents,
            never: None,
            start: None,
            admits,
        };
        (prog, self.after, key)
    }

    /// The after-match policy.
    pub(crate) fn policy(&self) -> AfterMatch {
        self.after
    }

    /// What a shared program of this expression is filed under, without compiling it: a hash of
    /// the program it compiles to, and the key [`compile`](Self::compile) would move out. `None`
    /// where that program could not be shared: a closure not named by its
    /// type, two keys, more definitions than the per-event test's bits.
    pub(crate) fn shape(&self) -> Option<(u64, Option<u64>)> {
        if self.parts.len() > super::matcher::ADMIT_BITS {
            return None;
        }
        let mut h = KindHasher::default();
        let mut key = None;
        // The definitions in order, each with its operator: with each operator's arity, the
        // sequence is the tree.
        for Part { def, name, ident } in &self.parts {
            if let Some(t) = def.template() {
                if ident.opaque() || !one_key(&mut key, t.key) {
                    return None;
                }
                t.hash_data(&mut h);
                (t.key.is_some(), name, ident).hash(&mut h);
            }
            match def {
                Def::Repeat(_, min, max) => (min, max).hash(&mut h),
                Def::Wait(d) | Def::Within(_, d) | Def::WithinFirst(_, d) => d.hash(&mut h),
                Def::At(t) => t.as_nanos().hash(&mut h),
                _ => {}
            }
            std::mem::discriminant(def).hash(&mut h);
        }
        Some((h.finish(), key))
    }

    /// Whether `prog` is the program this expression compiles to, the key moved out: the
    /// confirmation of a [`shape`](Self::shape) found in the map (for an expression whose shape
    /// is `Some`).
    pub(crate) fn is_compiled_as(&self, prog: &Prog<E>) -> bool {
        if self.parts.len() != prog.defs.len() {
            return false;
        }
        let mut o = 0;
        for (d, (part, def)) in self.parts.iter().zip(&prog.defs).enumerate() {
            let same = match (&part.def, def) {
                (Def::Leaf(_), Def::Leaf(p)) => template_is(prog, d, o, part, p),
                (Def::Repeat(_, a0, a1), Def::Repeat(p, b0, b1)) => {
                    (a0, a1) == (b0, b1) && template_is(prog, d, o, part, p)
                }
                (Def::Wait(x), Def::Wait(y)) => x == y,
                (Def::At(x), Def::At(y)) => x == y,
                (Def::Then(a, b), Def::Then(x, y))
                | (Def::And(a, b), Def::And(x, y))
                | (Def::Or(a, b), Def::Or(x, y)) => (a, b) == (x, y),
                (Def::Not(a), Def::Not(x)) | (Def::All(a), Def::All(x)) => a == x,
                (Def::Within(a, p), Def::Within(x, q))
                | (Def::WithinFirst(a, p), Def::WithinFirst(x, q)) => a == x && p == q,
                _ => false,
            };
            if !same {
                return false;
            }
            o += usize::from(part.def.template().is_some());
        }
        o == prog.idents.len()
    }
}

/// Whether template `p`, definition `d` and template number `o` of `prog`, is `part`'s template
/// with its key moved out (see [`Expr::is_compiled_as`]).
fn template_is<E: Event>(
    prog: &Prog<E>,
    d: usize,
    o: usize,
    part: &Part<E>,
    p: &Template<E>,
) -> bool {
    let Some(t) = part.def.template() else {
        return false;
    };
    let keyed = prog.keyed >> d & 1 != 0;
    p.same_data(t)
        && p.key.is_none()
        && keyed == t.key.is_some()
        && prog.idents.get(o) == Some(&part.ident)
        && prog.labels.names.get(o).copied().flatten() == part.name
}

/// Moves the templates' key out of `defs` if there is one key and the templates fit the
/// per-event test's bits: the definitions keyed by it (one bit each), and the key.
fn take_keys<E: Event>(defs: &mut [Def<E>]) -> (u64, Option<u64>) {
    let mut key = None;
    for d in defs.iter() {
        if let Def::Leaf(t) | Def::Repeat(t, ..) = d {
            if !one_key(&mut key, t.key) {
                return (0, None);
            }
        }
    }
    if key.is_none() || defs.len() > super::matcher::ADMIT_BITS {
        return (0, None);
    }
    let mut keyed = 0;
    for (i, d) in defs.iter_mut().enumerate() {
        if let Def::Leaf(t) | Def::Repeat(t, ..) = d {
            if t.key.take().is_some() {
                keyed |= 1 << i;
            }
        }
    }
    (keyed, key)
}

/// Notes a template's `key` in `seen`, the key of the templates so far; false if it is another
/// one (an expression keyed by two keys keeps them in its templates and is not shared).
fn one_key(seen: &mut Option<u64>, key: Option<u64>) -> bool {
    match (*seen, key) {
        (_, None) => true,
        (None, k) => {
            *seen = k;
            true
        }
        (Some(a), Some(b)) => a == b,
    }
}

/// The expression builders of a single template: `Pattern` is the leaf of [`Expr`], so they live
/// here and `pattern` imports nothing from `expr`.
impl<E: Event> Pattern<E> {
    /// `self -> next`: this template, then `next` (see [`Expr::then`]).
    ///
    /// ```
    #[doc = include_str!("../../doc/expr_example_prelude.txt")]
    /// assert_eq!(first_match(Pattern::kind(1).then(Pattern::kind(2)), &[(2, 0), (1, 1), (2, 2)]), Some((2, vec![1, 2])));
    /// ```
    pub fn then(self, next: impl Into<Expr<E>>) -> Expr<E> {
        Expr::from(self).then(next)
    }

    /// Both this template and `other`, in any order (see [`Expr::and`]).
    ///
    /// ```
    #[doc = include_str!("../../doc/expr_example_prelude.txt")]
    /// assert_eq!(first_match(Pattern::kind(1).and(Pattern::kind(2)), &[(2, 0), (1, 1)]), Some((1, vec![1, 2])));
    /// ```
    pub fn and(self, other: impl Into<Expr<E>>) -> Expr<E> {
        Expr::from(self).and(other)
    }

    /// This template or `other` (see [`Expr::or`]).
    ///
    /// ```
    #[doc = include_str!("../../doc/expr_example_prelude.txt")]
    /// assert_eq!(first_match(Pattern::kind(1).or(Pattern::kind(2)), &[(3, 0), (2, 1)]), Some((1, vec![2])));
    /// ```
    pub fn or(self, other: impl Into<Expr<E>>) -> Expr<E> {
        Expr::from(self).or(other)
    }

    /// This template, within `d` of the moment it starts being looked for: an event taken while
    /// the context's logical clock is before `start + d` (exclusive), on the clock the correlator
    /// runs ([which one](crate::Time#which-clock): whole ticks by default, so a `d` shorter than
    /// the tick period means "before the next tick"; the events' own stamps under
    /// [`event_time`](crate::CorrelatorBuilder::event_time)). See [`Expr::within`].
    ///
    /// ```
    #[doc = include_str!("../../doc/expr_example_prelude.txt")]
    /// // Looked for from registration (time 0): at 3 s it counts, at 7 s it is too late.
    /// assert_eq!(first_match(Pattern::kind(2).within(Duration::from_secs(5)), &[(2, 3)]), Some((3, vec![2])));
    /// assert_eq!(first_match(Pattern::kind(2).within(Duration::from_secs(5)), &[(2, 7)]), None);
    /// ```
    pub fn within(self, d: Duration) -> Expr<E> {
        Expr::from(self).within(d)
    }

    /// This template within `d` of its own match: for a single template that is no bound at all
    /// (it matches at its first event), so this is for symmetry; see [`Expr::within_from_first`].
    ///
    /// ```
    #[doc = include_str!("../../doc/expr_example_prelude.txt")]
    /// // No bound for a single template: it matches at its event, however late.
    /// assert_eq!(first_match(Pattern::kind(2).within_from_first(Duration::from_secs(5)), &[(2, 70)]), Some((70, vec![2])));
    /// ```
    pub fn within_from_first(self, d: Duration) -> Expr<E> {
        Expr::from(self).within_from_first(d)
    }

    /// Exactly `n` events that match this template (SPEC R7.6): the repetition matches at the
    /// `n`-th and takes no more. The events need not be adjacent: others may come between them
    /// (Flink CEP's relaxed contiguity). Bound the whole run with [`Expr::within_from_first`]
    /// (from its first event) or [`Expr::within`]. `times(0)` can never match (registering it
    /// logs a warning).
    ///
    /// A [`given`](Pattern::given) condition of a repeated template sees the repetition's
    /// earlier events too ([`Prior::last`](crate::Prior::last) is the one before).
    ///
    /// ```
    #[doc = include_str!("../../doc/expr_example_prelude.txt")]
    /// // Three 1s within 10 s of the first.
    /// let burst = || Pattern::kind(1).times(3).within_from_first(Duration::from_secs(10));
    /// assert_eq!(first_match(burst(), &[(1, 0), (2, 1), (1, 4), (1, 9)]), Some((9, vec![1, 1, 1])));
    /// assert_eq!(first_match(burst(), &[(1, 0), (1, 4), (1, 10)]), None);
    /// ```
    pub fn times(self, n: u32) -> Expr<E> {
        self.between(n, n)
    }

    /// `n` or more events that match this template, greedily (SPEC R7.6): once it has `n` the
    /// repetition is *satisfied* and keeps taking every further event that matches the template.
    /// A satisfied repetition completes when what it is part of does: the right side of its
    /// `then` matching (`a.at_least(2).then(b)`: every `a` until the `b`), the other side of an
    /// `and`, or the bound of a `within` around it (`a.at_least(3).within(d)` matches at the
    /// bound with all the `a`s). On its own it never completes (registering it logs a warning).
    ///
    /// ```
    #[doc = include_str!("../../doc/expr_example_prelude.txt")]
    /// // Two or more 1s, then a 2: every 1 before the 2 is part of the match.
    /// let run = Pattern::kind(1).at_least(2).then(Pattern::kind(2));
    /// assert_eq!(first_match(run, &[(1, 0), (2, 1), (1, 2), (1, 3), (2, 4)]), Some((4, vec![1, 1, 1, 2])));
    /// ```
    pub fn at_least(self, n: u32) -> Expr<E> {
        self.between(n, u32::MAX)
    }

    /// From `min` to `max` events that match this template, greedily (SPEC R7.6): satisfied from
    /// the `min`-th event, as [`at_least`](Self::at_least), and complete at the `max`-th. There is
    /// no lazy variant: a repetition that stops at `min` is [`times(min)`](Self::times).
    /// `min > max` and `max == 0` can never match (registering them logs a warning).
    ///
    /// ```
    #[doc = include_str!("../../doc/expr_example_prelude.txt")]
    /// // Two to three 1s, then a 2: at most three 1s are taken, the 2 still completes it.
    /// let run = Pattern::kind(1).between(2, 3).then(Pattern::kind(2));
    /// assert_eq!(first_match(run, &[(1, 0), (1, 1), (1, 2), (1, 3), (2, 4)]), Some((4, vec![1, 1, 1, 2])));
    /// ```
    pub fn between(self, min: u32, max: u32) -> Expr<E> {
        Expr::of(Part {
            def: Def::Repeat(self.template, min, max),
            name: self.name,
            ident: self.ident,
        })
    }
}
