//! Event expressions (SPEC R7.3) and their evaluation.
//!
//! # Grammar
//! ```text
//! expr := template                 an event: Pattern::kind(k).key(..).filter(..)
//!       | wait(d)                  a timer: d after the expression starts being evaluated
//!       | at(t)                    a timer: when the context's logical clock reaches t
//!       | expr.then(expr)          followed-by (a -> b): b is looked for only after a matched
//!       | expr.and(expr)           both, in any order
//!       | expr.or(expr)            either
//!       | not(expr)                holds until expr matches, then fails (a guard: use it with
//!                                  `and` or `within`, see "`not`" below)
//!       | expr.within(d)           expr must match within d of the moment it starts
//!       | expr.within_from_first(d)  expr must match within d of its first event
//! ```
//! Each primary matches once: a template matches the first matching event after it starts, a timer
//! fires once. `within(d)` expires when the clock reaches the bound: an event taken at a logical time
//! before `start + d` counts, a tick to exactly `start + d` ends it. `not(x).within(d)` matches at
//! the bound if `x` did not happen ("no heartbeat for 5 s").
//!
//! `within_from_first(d)` is the bound most CEP languages mean by "within" (Flink CEP's
//! `within`): its clock starts when a template of its part (outside a `not`) first matches an
//! event, at that event's logical time `first`; before that nothing expires, however long the
//! quiet spell. From then on it is `within` with `start = first`: an event taken before
//! `first + d` counts, the clock reaching `first + d` ends it (or, if its part holds, matches it).
//! Under `when_all` each new match (started at every first event, see "Listening") runs its own
//! clock. With the other combinators: in `a.and(b)` and `a.or(b)` "first" is whichever side's
//! template matches first; in `a.then(b)` it is `a`; a `not` inside it never starts the clock,
//! so `a.then(not(x)).within_from_first(d)` is "`a`, then no `x` for `d`" (matching at
//! `a`'s time + `d`), while `not(x).within_from_first(d)` has no first event and can never match
//! (registering it logs the warning below): write `not(x).within(d)` for "no `x` for `d`".
//!
//! ```
//! use std::time::Duration;
//! use correlator::{not, wait, Event, Expr, Pattern};
//! # #[derive(Clone, Debug)] struct Ev(u32);
//! # impl Event for Ev { type Kind = u32; fn kind(&self) -> u32 { self.0 } }
//! let spike = Pattern::<Ev>::kind(1);
//! let drop = Pattern::<Ev>::kind(2);
//! // A spike followed by a drop within 5 s.
//! let alert: Expr<Ev> = spike.then(drop.within(Duration::from_secs(5)));
//! // No heartbeat (kind 3) for 5 s.
//! let silent: Expr<Ev> = wait(Duration::from_secs(5)).and(not(Pattern::kind(3)));
//! # let _ = (alert, silent);
//! ```
//!
//! # Timers that are already due, and the end of time
//! A timer that is already due when it starts (`wait(Duration::ZERO)`, `at(t)` for a `t` the clock
//! has passed, the bound of `within(Duration::ZERO)`) fires when the context takes its next clock
//! tick, before that tick moves the clock on. So a repeating listener on such a timer
//! (`when_all(wait(Duration::ZERO))`) fires once per tick, never twice for one tick. A timer or a
//! `within` bound that would lie beyond the end of logical time (`u64::MAX` ns after the origin,
//! e.g. `wait(Duration::MAX)`) never fires, even when the clock reaches the end of time.
//!
//! # `not`
//! `not(x)` is a guard, not an event: it never completes a match by itself. A `not` that still holds
//! counts as matched in exactly two places: as a side of `and` once the other side has matched, and
//! at the bound of `within`. Everywhere else it is merely pending, so a bare `not(x)` never fires
//! (the listener ends when `x` comes), `a.or(not(x))` fires only for `a` (and `(a -> b) or not c`
//! only for `a -> b`), and `not(x).then(b)` never starts `b`. Registering an expression that can
//! never match, or whose `or` has a side that can never match, logs a `tracing` warning (target
//! `correlator::context`) saying so; the listener is registered all the same.
//!
//! This differs on purpose from Apama EPL, where a `not` that still holds is true from the moment
//! the listener is set up, so that `on not x` and `on a or not x` fire at once. Such a listener has
//! no event and no time of its own to fire at: it would fire inside the handler that registers it,
//! and a repeating one (`when_all`) would be true again as soon as it restarted and fire without
//! end within one step (the livelock of an already-due timer). Say what is meant instead: to fire
//! once at the next tick, `wait(Duration::ZERO)`; for "`a`, or `x` did not happen within `d`",
//! `a.or(not(x).within(d))`; for "`b`, unless `x` came first", `b.and(not(x))`.
//!
//! # Listening
//! [`Scope::when`](crate::Scope::when) fires once for the first match and then ends;
//! [`Scope::when_all`](crate::Scope::when_all) fires for every match: it keeps one *fresh* matcher
//! that has seen nothing yet, and as soon as it makes progress (`a` in `a.then(b)`, say), another
//! fresh one starts, so `when_all(a.then(b))` starts a new match at every `a`; a repeating timer
//! (`when_all(wait(d))`) fires every `d`, and a large jump of the clock fires every due occurrence in
//! order. A listener that can no longer fire (its expression failed, and for `when_all` its fresh
//! matcher failed too) is removed; for a repeating one (`when_all`) that is logged (`tracing`,
//! INFO, target `correlator::context`), since no handler of the user's asked for it and the
//! instance ends with it when it was its last listener. The usual cause is a `within` bound that
//! counts from registration expiring after a quiet spell: `when_all(a.then(b).within(d))` lives at
//! most `d`. For "every `a` followed by `b` within `d` of it", write
//! `when_all(a.then(b).within_from_first(d))`, or `when_all(a.then(b.within(d)))`.
//!
//! # Evaluation
//! An expression is flattened into a vector of definitions (children before parents, left before
//! right); a matcher is one vector of small states indexed like the definitions, each started
//! lazily (the right side of `then` only when the left side matched, with its own start time),
//! plus the events its templates matched. Every state ends as `Matched` or `Failed` and keeps that
//! result. A finished matcher's vectors are reused for the listener's next one, so a repeating
//! listener starts matches without allocating. Timers are
//! registered with the context's timer queue and come back as time stimuli, in trigger-time order,
//! then creation order.
//!
//! Owns the expression language, its matchers and the expression builders of a
//! [`Pattern`]. May import `event`, `pattern` and `time`.

use std::time::Duration;

use crate::event::Event;
use crate::pattern::{Pattern, Template};
use crate::time::Time;

pub(crate) enum Def<E: Event> {
    Leaf(Template<E>),
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
}

enum Node<E: Event> {
    Leaf(Template<E>),
    Wait(Duration),
    At(Time),
    Then(Box<Node<E>>, Box<Node<E>>),
    And(Box<Node<E>>, Box<Node<E>>),
    Or(Box<Node<E>>, Box<Node<E>>),
    Not(Box<Node<E>>),
    Within(Box<Node<E>>, Duration),
    WithinFirst(Box<Node<E>>, Duration),
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
    root: Node<E>,
}

impl<E: Event> From<Pattern<E>> for Expr<E> {
    fn from(p: Pattern<E>) -> Self {
        Expr {
            root: Node::Leaf(p.template),
        }
    }
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
#[doc = include_str!("../doc/expr_example_prelude.txt")]
/// // Five seconds after a kind-1 event.
/// let expr = Pattern::kind(1).then(wait(Duration::from_secs(5)));
/// assert_eq!(first_match(expr, &[(1, 2)]), Some((7, vec![1])));
/// ```
pub fn wait<E: Event>(d: Duration) -> Expr<E> {
    Expr {
        root: Node::Wait(d),
    }
}

/// A timer primary: fires when the context's logical clock reaches `t`.
///
/// If the clock has already passed `t` when it starts, it fires at the next clock tick (so
/// `when_all(at(t))` then fires once per tick).
///
/// ```
#[doc = include_str!("../doc/expr_example_prelude.txt")]
/// // A kind-1 event, then the clock reaching 30 s.
/// let expr = Pattern::kind(1).then(at(Time::from_secs(30)));
/// assert_eq!(first_match(expr, &[(1, 10), (2, 20)]), Some((30, vec![1])));
/// ```
pub fn at<E: Event>(t: Time) -> Expr<E> {
    Expr { root: Node::At(t) }
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
#[doc = include_str!("../doc/expr_example_prelude.txt")]
/// // No kind 2 for 5 s: matches at the bound (with no events), or not at all if a 2 comes.
/// let silent = || not(Pattern::kind(2)).within(Duration::from_secs(5));
/// assert_eq!(first_match(silent(), &[(1, 1)]), Some((5, vec![])));
/// assert_eq!(first_match(silent(), &[(2, 3)]), None);
/// // A trade (1) not confirmed (2) within 5 s of it: the guard inside `then`.
/// let unconfirmed = Pattern::kind(1).then(not(Pattern::kind(2)).within(Duration::from_secs(5)));
/// assert_eq!(first_match(unconfirmed, &[(1, 10), (3, 12)]), Some((15, vec![1])));
/// ```
pub fn not<E: Event>(x: impl Into<Expr<E>>) -> Expr<E> {
    Expr {
        root: Node::Not(Box::new(x.into().root)),
    }
}

impl<E: Event> Expr<E> {
    /// Followed-by (`self -> next`): `next` is looked for only after `self` matched.
    ///
    /// ```
    #[doc = include_str!("../doc/expr_example_prelude.txt")]
    /// // 1 then 2: the 2 before the 1 does not count.
    /// let expr = Pattern::kind(1).then(Pattern::kind(2)).then(Pattern::kind(3));
    /// assert_eq!(first_match(expr, &[(2, 0), (1, 1), (2, 2), (3, 4)]), Some((4, vec![1, 2, 3])));
    /// ```
    pub fn then(self, next: impl Into<Expr<E>>) -> Expr<E> {
        Expr {
            root: Node::Then(Box::new(self.root), Box::new(next.into().root)),
        }
    }

    /// Both, in any order.
    ///
    /// ```
    #[doc = include_str!("../doc/expr_example_prelude.txt")]
    /// // 1 and 2 in any order; the match lists them in expression order.
    /// let expr = Pattern::kind(1).then(Pattern::kind(3)).and(Pattern::kind(2));
    /// assert_eq!(first_match(expr, &[(2, 0), (1, 1), (3, 2)]), Some((2, vec![1, 3, 2])));
    /// ```
    pub fn and(self, other: impl Into<Expr<E>>) -> Expr<E> {
        Expr {
            root: Node::And(Box::new(self.root), Box::new(other.into().root)),
        }
    }

    /// Either.
    ///
    /// ```
    #[doc = include_str!("../doc/expr_example_prelude.txt")]
    /// // Whichever side completes first; the match lists every event its templates had
    /// // matched by then, in expression order: here the 1 of the unfinished side too.
    /// let expr = Pattern::kind(1).then(Pattern::kind(3)).or(Pattern::kind(2));
    /// assert_eq!(first_match(expr, &[(1, 0), (2, 1), (3, 2)]), Some((1, vec![1, 2])));
    /// ```
    pub fn or(self, other: impl Into<Expr<E>>) -> Expr<E> {
        Expr {
            root: Node::Or(Box::new(self.root), Box::new(other.into().root)),
        }
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
        Expr {
            root: Node::Within(Box::new(self.root), d),
        }
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
        Expr {
            root: Node::WithinFirst(Box::new(self.root), d),
        }
    }

    /// Flattens the tree: children before parents; the root is the last definition.
    pub(crate) fn compile(self) -> Vec<Def<E>> {
        fn go<E: Event>(n: Node<E>, out: &mut Vec<Def<E>>) -> usize {
            let d = match n {
                Node::Leaf(t) => Def::Leaf(t),
                Node::Wait(d) => Def::Wait(d),
                Node::At(t) => Def::At(t),
                Node::Then(a, b) => Def::Then(go(*a, out), go(*b, out)),
                Node::And(a, b) => Def::And(go(*a, out), go(*b, out)),
                Node::Or(a, b) => Def::Or(go(*a, out), go(*b, out)),
                Node::Not(a) => Def::Not(go(*a, out)),
                Node::Within(a, d) => Def::Within(go(*a, out), d),
                Node::WithinFirst(a, d) => Def::WithinFirst(go(*a, out), d),
            };
            out.push(d);
            out.len() - 1
        }
        let mut out = Vec::new();
        go(self.root, &mut out);
        out
    }
}

/// A completed match, handed to `when`/`when_all` handlers.
#[derive(Clone, Debug, PartialEq)]
pub struct Match<E> {
    /// The events that matched the expression's templates, in expression order (left to right).
    pub events: Vec<E>,
    /// The logical time at which the match completed.
    pub time: Time,
}

/// What happened to an expression (or part of it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Outcome {
    Pending,
    Matched,
    Failed,
    /// A `not` that has not failed: counts as matched inside `and`, pending elsewhere.
    Holding,
}

/// What a matcher is stepped with.
pub(crate) enum Stimulus<'a, E> {
    Event(&'a E),
    Time(Time),
}

impl<E> Clone for Stimulus<'_, E> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<E> Copy for Stimulus<'_, E> {}

/// Side effects of stepping a matcher.
pub(crate) struct StepOut {
    /// Timers the new states need, as trigger times.
    pub(crate) timers: Vec<Time>,
    /// Whether any state changed (an event was consumed or a timer fired).
    pub(crate) progressed: bool,
}

/// The state of one definition inside a [`Matcher`]: whether it has started, how it ended, and
/// the due time of a timer or the deadline of a `within` (`None`: beyond the end of logical time,
/// never).
#[derive(Clone, Copy, Debug, Default)]
struct NodeState {
    started: bool,
    /// `Matched` or `Failed` once final.
    fin: Option<Outcome>,
    time: Option<Time>,
}

/// One match in progress: the state of every definition of the expression, indexed like the
/// definitions (a definition is started at most once per matcher: the right side of `then` only
/// once its left side matched, with its own start time), and the events its templates matched.
///
/// One flat vector instead of a tree of boxes: stepping a matcher reads a few consecutive lines
/// rather than one cold line per node, and a finished matcher's vectors are reused for the next
/// one ([`ExprListener`] keeps them), so starting a match allocates nothing in the steady state.
pub(crate) struct Matcher<E> {
    nodes: Vec<NodeState>,
    /// `(definition, event)` of every template that matched, outside a `not`.
    got: Vec<(u32, E)>,
    /// Templates that matched, counting up (wrapping) through every part but a `not` (which puts
    /// it back after its inner part): a `within_from_first` whose inner part changed it has seen
    /// its first event.
    hits: u32,
}

impl<E: Event> Matcher<E> {
    /// A matcher of `defs` with its root started at `now`, in `reuse`'s vectors if given.
    pub(crate) fn start(
        defs: &[Def<E>],
        now: Time,
        out: &mut StepOut,
        reuse: Option<Matcher<E>>,
    ) -> Self {
        let mut m = reuse.unwrap_or(Matcher {
            nodes: Vec::new(),
            got: Vec::new(),
            hits: 0,
        });
        m.hits = 0;
        m.nodes.clear();
        m.nodes.resize(defs.len(), NodeState::default());
        m.got.clear();
        m.start_node(defs, defs.len() - 1, now, out);
        m
    }

    /// Starts definition `d` (and what of its subtree starts with it) at `now`.
    fn start_node(&mut self, defs: &[Def<E>], d: usize, now: Time, out: &mut StepOut) {
        let mut time = None;
        match &defs[d] {
            Def::Leaf(_) => {}
            Def::Wait(dur) => {
                time = now.checked_add(*dur);
                out.timers.extend(time);
            }
            Def::At(t) => {
                time = Some(*t);
                out.timers.push(*t);
            }
            // `within_from_first` sets no timer yet: its clock starts at its first event.
            Def::Then(a, _) | Def::Not(a) | Def::WithinFirst(a, _) => {
                self.start_node(defs, *a, now, out)
            }
            Def::And(a, b) | Def::Or(a, b) => {
                self.start_node(defs, *a, now, out);
                self.start_node(defs, *b, now, out);
            }
            Def::Within(a, dur) => {
                time = now.checked_add(*dur);
                out.timers.extend(time);
                self.start_node(defs, *a, now, out);
            }
        }
        self.nodes[d] = NodeState {
            started: true,
            fin: None,
            time,
        };
    }

    /// Steps the whole matcher with `stim` at logical time `now`.
    #[inline]
    pub(crate) fn step(
        &mut self,
        defs: &[Def<E>],
        stim: Stimulus<'_, E>,
        now: Time,
        out: &mut StepOut,
    ) -> Outcome {
        self.step_node(defs, defs.len() - 1, stim, now, out, true)
    }

    /// Steps definition `d`; `keep`: whether a template matched here is part of the match (not
    /// under a `not`).
    fn step_node(
        &mut self,
        defs: &[Def<E>],
        d: usize,
        stim: Stimulus<'_, E>,
        now: Time,
        out: &mut StepOut,
        keep: bool,
    ) -> Outcome {
        let node = self.nodes[d];
        if let Some(s) = node.fin {
            return s;
        }
        let status = match &defs[d] {
            Def::Leaf(t) => match stim {
                Stimulus::Event(e) if t.matches(e) => {
                    if keep {
                        self.got.push((d as u32, e.clone()));
                    }
                    self.hits = self.hits.wrapping_add(1);
                    out.progressed = true;
                    Outcome::Matched
                }
                _ => Outcome::Pending,
            },
            Def::Wait(_) | Def::At(_) => match stim {
                Stimulus::Time(t) if node.time.is_some_and(|due| t >= due) => {
                    out.progressed = true;
                    Outcome::Matched
                }
                _ => Outcome::Pending,
            },
            &Def::Then(a, b) => {
                if self.nodes[b].started {
                    self.step_node(defs, b, stim, now, out, keep)
                } else {
                    match self.step_node(defs, a, stim, now, out, keep) {
                        Outcome::Matched => {
                            // The right side starts now and does not see the stimulus that
                            // completed the left side.
                            self.start_node(defs, b, now, out);
                            initial(defs, b)
                        }
                        Outcome::Failed => Outcome::Failed,
                        Outcome::Pending | Outcome::Holding => Outcome::Pending,
                    }
                }
            }
            &Def::And(a, b) => {
                let sa = self.step_node(defs, a, stim, now, out, keep);
                let sb = self.step_node(defs, b, stim, now, out, keep);
                combine_and(sa, sb)
            }
            &Def::Or(a, b) => {
                let sa = self.step_node(defs, a, stim, now, out, keep);
                let sb = self.step_node(defs, b, stim, now, out, keep);
                match (sa, sb) {
                    (Outcome::Matched, _) | (_, Outcome::Matched) => Outcome::Matched,
                    (Outcome::Failed, Outcome::Failed) => Outcome::Failed,
                    _ => Outcome::Pending,
                }
            }
            &Def::Not(a) => {
                // What matched inside a `not` starts no `within_from_first` clock above it.
                let hits = self.hits;
                let inner = self.step_node(defs, a, stim, now, out, false);
                self.hits = hits;
                match inner {
                    Outcome::Matched => {
                        out.progressed = true;
                        Outcome::Failed
                    }
                    _ => Outcome::Holding,
                }
            }
            &Def::Within(a, _) => {
                let s = self.step_node(defs, a, stim, now, out, keep);
                let expired = matches!((stim, node.time), (Stimulus::Time(t), Some(d)) if t >= d);
                at_bound(s, expired, out)
            }
            &Def::WithinFirst(a, dur) => {
                let hits = self.hits;
                let s = self.step_node(defs, a, stim, now, out, keep);
                // Its first event starts the clock (once: a bound beyond the end of logical time
                // stays `None`, and so would every later try).
                if self.hits != hits
                    && node.time.is_none()
                    && matches!(s, Outcome::Pending | Outcome::Holding)
                {
                    let bound = now.checked_add(dur);
                    self.nodes[d].time = bound;
                    out.timers.extend(bound);
                }
                // Only a time stimulus expires it, and none starts its clock: `node.time` is the
                // bound as it was before this step.
                let expired = matches!((stim, node.time), (Stimulus::Time(t), Some(b)) if t >= b);
                at_bound(s, expired, out)
            }
        };
        if matches!(status, Outcome::Matched | Outcome::Failed) {
            self.nodes[d].fin = Some(status);
        }
        status
    }

    /// Moves the events the templates matched into `out`, left to right (definitions are
    /// numbered children first, left before right, so their order is the expression's).
    pub(crate) fn collect(&mut self, out: &mut Vec<E>) {
        self.got.sort_unstable_by_key(|&(d, _)| d);
        out.extend(self.got.drain(..).map(|(_, e)| e));
    }
}

/// The status of definition `d` just started (before any stimulus).
/// The outcome of a bounded part (`within`, `within_from_first`) whose inner part stepped to `s`:
/// at the bound (`expired`) a holding part matches and any other fails (R7.3).
fn at_bound(s: Outcome, expired: bool, out: &mut StepOut) -> Outcome {
    match s {
        Outcome::Matched => Outcome::Matched,
        Outcome::Failed => Outcome::Failed,
        Outcome::Holding if expired => {
            out.progressed = true;
            Outcome::Matched
        }
        _ if expired => {
            out.progressed = true;
            Outcome::Failed
        }
        other => other,
    }
}

fn initial<E: Event>(defs: &[Def<E>], d: usize) -> Outcome {
    match &defs[d] {
        Def::Not(_) => Outcome::Holding,
        &Def::And(a, b) => combine_and(initial(defs, a), initial(defs, b)),
        _ => Outcome::Pending,
    }
}

fn combine_and(a: Outcome, b: Outcome) -> Outcome {
    use Outcome::*;
    match (a, b) {
        (Failed, _) | (_, Failed) => Failed,
        (Matched, Matched) | (Matched, Holding) | (Holding, Matched) => Matched,
        (Holding, Holding) => Holding,
        _ => Pending,
    }
}

/// What an expression's part can come to: `(can match, can hold)`, following [`Matcher::step`]: a
/// primary can match; a `not` can only hold; `then` matches if both sides can and holds where its
/// right side holds; `and` holds if both sides hold and matches if one side matches and the other
/// matches or holds; `or` matches if a side does (a holding side is only pending there); `within`
/// matches if its inner part matches or holds (at the bound), and holds where it does.
fn reach<E: Event>(defs: &[Def<E>], d: usize) -> (bool, bool) {
    match &defs[d] {
        Def::Leaf(_) | Def::Wait(_) | Def::At(_) => (true, false),
        Def::Not(_) => (false, true),
        Def::Then(a, b) => {
            let ((ma, _), (mb, hb)) = (reach(defs, *a), reach(defs, *b));
            (ma && mb, ma && hb)
        }
        Def::And(a, b) => {
            let ((ma, ha), (mb, hb)) = (reach(defs, *a), reach(defs, *b));
            ((ma || ha) && (mb || hb) && (ma || mb), ha && hb)
        }
        Def::Or(a, b) => (reach(defs, *a).0 || reach(defs, *b).0, false),
        Def::Within(a, _) => {
            let (m, h) = reach(defs, *a);
            (m || h, h)
        }
        // Its bound, where a holding inner part matches, comes only after a first event: an
        // inner part with no template outside a `not` (`not(x)`) never starts the clock.
        Def::WithinFirst(a, _) => {
            let (m, h) = reach(defs, *a);
            (m || (h && has_template_outside_not(defs, *a)), h)
        }
    }
}

/// Whether part `d` has a template outside any `not`: one whose match can start a
/// `within_from_first` clock.
fn has_template_outside_not<E: Event>(defs: &[Def<E>], d: usize) -> bool {
    match &defs[d] {
        Def::Leaf(_) => true,
        Def::Wait(_) | Def::At(_) | Def::Not(_) => false,
        Def::Then(a, b) | Def::And(a, b) | Def::Or(a, b) => {
            has_template_outside_not(defs, *a) || has_template_outside_not(defs, *b)
        }
        Def::Within(a, _) | Def::WithinFirst(a, _) => has_template_outside_not(defs, *a),
    }
}

/// Why part of an expression can never produce a match, if some part cannot: the expression as a
/// whole, or one side of an `or` (in both cases because of a `not` used on its own, see the module
/// docs). Registration logs it as a warning: the listener is kept, with the documented semantics.
pub(crate) fn never_matches<E: Event>(defs: &[Def<E>]) -> Option<&'static str> {
    let root = defs.len() - 1;
    if !reach(defs, root).0 {
        return Some(
            "this event expression can never match: a `not` never completes a match by itself \
             (combine it with `and`, or bound it with `within`; `within_from_first` counts from \
             the first event, and a `not` alone has none)",
        );
    }
    let dead_or_side = defs.iter().any(|d| match d {
        Def::Or(a, b) => !reach(defs, *a).0 || !reach(defs, *b).0,
        _ => false,
    });
    dead_or_side.then_some(
        "a side of an `or` in this event expression can never match: a `not` never completes a \
         match by itself (combine it with `and`, or bound it with `within`)",
    )
}

/// The templates of an expression: `(kind, key)` of every leaf, for the listener index.
pub(crate) fn leaves<E: Event>(defs: &[Def<E>]) -> Vec<(E::Kind, Option<u64>)> {
    let mut v: Vec<(E::Kind, Option<u64>)> = Vec::new();
    for d in defs {
        if let Def::Leaf(t) = d {
            if !v.iter().any(|(k, key)| *k == t.kind && *key == t.key) {
                v.push((t.kind, t.key));
            }
        }
    }
    v
}

/// The matchers of one expression listener (see the module docs for `when` vs `when_all`).
pub(crate) struct ExprListener<E: Event> {
    defs: Vec<Def<E>>,
    /// The active matchers, `matchers[..live]` (for `when_all` the last active one is the fresh
    /// one, if `fresh`), then at most one finished matcher whose vectors the next one reuses.
    /// The spare sits in the same vector rather than in a field of its own: that keeps the
    /// listener (and so every listener slot, template ones too) 48 bytes smaller.
    matchers: Vec<Matcher<E>>,
    /// How many of `matchers` are active.
    live: u32,
    all: bool,
    /// Whether the last matcher has seen nothing yet (`when_all` only).
    fresh: bool,
}

impl<E: Event> ExprListener<E> {
    pub(crate) fn new(expr: Expr<E>, all: bool, now: Time, out: &mut StepOut) -> Self {
        let defs = expr.compile();
        let first = Matcher::start(&defs, now, out, None);
        Self {
            defs,
            matchers: vec![first],
            live: 1,
            all,
            fresh: all,
        }
    }

    pub(crate) fn leaves(&self) -> Vec<(E::Kind, Option<u64>)> {
        leaves(&self.defs)
    }

    /// The flattened expression.
    pub(crate) fn defs(&self) -> &[Def<E>] {
        &self.defs
    }

    /// Whether the expression holds a `within` (counted from the start, not the first event).
    pub(crate) fn has_within(&self) -> bool {
        self.defs.iter().any(|d| matches!(d, Def::Within(..)))
    }

    /// See [`never_matches`].
    pub(crate) fn never_matches(&self) -> Option<&'static str> {
        never_matches(&self.defs)
    }

    /// Steps every matcher; pushes completed matches to `fired`. Returns whether the stimulus
    /// advanced anything, and whether the listener can still fire.
    pub(crate) fn step(
        &mut self,
        stim: Stimulus<'_, E>,
        now: Time,
        out: &mut StepOut,
        fired: &mut Vec<Match<E>>,
    ) -> (bool, bool) {
        let mut progressed_any = false;
        let mut i = 0;
        let mut restart = false;
        while i < self.live as usize {
            let is_fresh = self.fresh && i + 1 == self.live as usize;
            out.progressed = false;
            let status = self.matchers[i].step(&self.defs, stim, now, out);
            progressed_any |= out.progressed;
            match status {
                Outcome::Matched => {
                    let mut m = self.retire(i);
                    let mut events = Vec::new();
                    m.collect(&mut events);
                    fired.push(Match { events, time: now });
                    self.matchers.push(m);
                    if is_fresh {
                        restart = true;
                    }
                }
                Outcome::Failed => {
                    let m = self.retire(i);
                    self.matchers.push(m);
                    if is_fresh {
                        // The expression can no longer start a match: no new fresh matcher.
                        self.fresh = false;
                    }
                }
                Outcome::Pending | Outcome::Holding => {
                    if is_fresh && out.progressed {
                        restart = true;
                    }
                    i += 1;
                }
            }
            if !self.all && !fired.is_empty() {
                self.matchers.clear();
                self.live = 0;
                return (true, false);
            }
        }
        if restart && self.all {
            out.progressed = false;
            let spare = if self.matchers.len() > self.live as usize {
                self.matchers.pop()
            } else {
                None
            };
            let fresh = Matcher::start(&self.defs, now, out, spare);
            self.matchers.push(fresh);
            self.live += 1;
            self.fresh = true;
        }
        (progressed_any, self.live > 0)
    }

    /// Takes active matcher `i` out, and drops the spare (the caller makes the taken matcher the
    /// new spare by pushing it back).
    fn retire(&mut self, i: usize) -> Matcher<E> {
        let m = self.matchers.remove(i);
        self.live -= 1;
        self.matchers.truncate(self.live as usize);
        m
    }
}

/// The expression builders of a single template: `Pattern` is the leaf of [`Expr`], so they live
/// here and `pattern` imports nothing from `expr`.
impl<E: Event> Pattern<E> {
    /// `self -> next`: this template, then `next` (see [`Expr::then`]).
    ///
    /// ```
    #[doc = include_str!("../doc/expr_example_prelude.txt")]
    /// assert_eq!(first_match(Pattern::kind(1).then(Pattern::kind(2)), &[(2, 0), (1, 1), (2, 2)]), Some((2, vec![1, 2])));
    /// ```
    pub fn then(self, next: impl Into<Expr<E>>) -> Expr<E> {
        Expr::from(self).then(next)
    }

    /// Both this template and `other`, in any order (see [`Expr::and`]).
    ///
    /// ```
    #[doc = include_str!("../doc/expr_example_prelude.txt")]
    /// assert_eq!(first_match(Pattern::kind(1).and(Pattern::kind(2)), &[(2, 0), (1, 1)]), Some((1, vec![1, 2])));
    /// ```
    pub fn and(self, other: impl Into<Expr<E>>) -> Expr<E> {
        Expr::from(self).and(other)
    }

    /// This template or `other` (see [`Expr::or`]).
    ///
    /// ```
    #[doc = include_str!("../doc/expr_example_prelude.txt")]
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
    #[doc = include_str!("../doc/expr_example_prelude.txt")]
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
    #[doc = include_str!("../doc/expr_example_prelude.txt")]
    /// // No bound for a single template: it matches at its event, however late.
    /// assert_eq!(first_match(Pattern::kind(2).within_from_first(Duration::from_secs(5)), &[(2, 70)]), Some((70, vec![2])));
    /// ```
    pub fn within_from_first(self, d: Duration) -> Expr<E> {
        Expr::from(self).within_from_first(d)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Clone, Debug, PartialEq)]
    struct Ev(u32, u64);
    impl Event for Ev {
        type Kind = u32;
        fn kind(&self) -> u32 {
            self.0
        }
    }

    fn p(k: u32) -> Pattern<Ev> {
        Pattern::kind(k)
    }

    struct Run {
        l: ExprListener<Ev>,
        timers: Vec<Time>,
        log: Vec<String>,
        alive: bool,
    }

    impl Run {
        fn new(e: Expr<Ev>, all: bool) -> Self {
            let mut out = StepOut {
                timers: Vec::new(),
                progressed: false,
            };
            let l = ExprListener::new(e, all, Time::ZERO, &mut out);
            Self {
                l,
                timers: out.timers,
                log: Vec::new(),
                alive: true,
            }
        }

        fn feed(&mut self, stim: Stimulus<'_, Ev>, now: Time) {
            let mut out = StepOut {
                timers: Vec::new(),
                progressed: false,
            };
            let mut fired = Vec::new();
            let (_, alive) = self.l.step(stim, now, &mut out, &mut fired);
            self.alive = alive;
            self.timers.extend(out.timers);
            for m in fired {
                let vals: Vec<String> = m
                    .events
                    .iter()
                    .map(|e| format!("{}.{}", e.0, e.1))
                    .collect();
                self.log
                    .push(format!("@{} [{}]", m.time.as_nanos(), vals.join(" ")));
            }
        }

        fn ev(&mut self, k: u32, v: u64, now: u64) {
            self.feed(Stimulus::Event(&Ev(k, v)), Time::from_nanos(now));
        }

        fn tick(&mut self, now: u64) {
            self.feed(Stimulus::Time(Time::from_nanos(now)), Time::from_nanos(now));
        }
    }

    // R7.3: followed-by matches the first a, then the first b after it.
    #[test]
    fn r7_3_followed_by_once() {
        let mut r = Run::new(p(1).then(p(2)), false);
        r.ev(2, 0, 1);
        r.ev(1, 1, 2);
        r.ev(1, 2, 3);
        r.ev(2, 3, 4);
        assert_eq!(r.log, ["@4 [1.1 2.3]"]);
        assert!(!r.alive, "an `on` listener ends after it fired");
    }

    // R7.3: when_all(a -> b) starts a new match at every a.
    #[test]
    fn r7_3_all_followed_by_starts_at_every_a() {
        let mut r = Run::new(p(1).then(p(2)), true);
        r.ev(1, 1, 1);
        r.ev(1, 2, 2);
        r.ev(2, 3, 3);
        r.ev(2, 4, 4);
        assert_eq!(r.log, ["@3 [1.1 2.3]", "@3 [1.2 2.3]"]);
        assert!(r.alive);
    }

    // R7.3: and, or.
    #[test]
    fn r7_3_and_or() {
        let mut r = Run::new(p(1).and(p(2)), false);
        r.ev(2, 1, 1);
        r.ev(2, 2, 2);
        r.ev(1, 3, 3);
        assert_eq!(r.log, ["@3 [1.3 2.1]"]);
        let mut r = Run::new(p(1).or(p(2)), true);
        r.ev(2, 1, 1);
        r.ev(3, 0, 2);
        r.ev(1, 2, 3);
        assert_eq!(r.log, ["@1 [2.1]", "@3 [1.2]"]);
    }

    // R7.3: `not` cancels a pending followed-by.
    #[test]
    fn r7_3_not_cancels_pending_followed_by() {
        let mut r = Run::new(p(1).then(p(2)).and(not(p(3))), false);
        r.ev(1, 1, 1);
        r.ev(3, 0, 2);
        r.ev(2, 2, 3);
        assert!(r.log.is_empty());
        assert!(!r.alive, "it can no longer fire and is removed");
        let mut r = Run::new(p(1).then(p(2)).and(not(p(3))), false);
        r.ev(1, 1, 1);
        r.ev(2, 2, 3);
        assert_eq!(r.log, ["@3 [1.1 2.2]"]);
    }

    // R7.3 / R7.2: within expires exactly at the bound, evaluated on the logical clock.
    #[test]
    fn r7_3_within_expires_at_the_bound() {
        let five = Duration::from_nanos(5);
        // b must come within 5 of a (a at 10: bound 15).
        let mut r = Run::new(p(1).then(p(2).within(five)), false);
        r.ev(1, 1, 10);
        assert_eq!(r.timers, [Time::from_nanos(15)]);
        r.tick(14);
        r.ev(2, 2, 14);
        assert_eq!(r.log, ["@14 [1.1 2.2]"]);
        let mut r = Run::new(p(1).then(p(2).within(five)), false);
        r.ev(1, 1, 10);
        r.tick(15);
        assert!(!r.alive);
        r.ev(2, 2, 15);
        assert!(r.log.is_empty());
    }

    // R7.2: a repeating timer fires every due occurrence of a large jump, in order.
    #[test]
    fn r7_2_repeating_timer_catches_up() {
        let mut r = Run::new(wait(Duration::from_nanos(10)), true);
        assert_eq!(r.timers, [Time::from_nanos(10)]);
        // The context pops due timers in order and steps the listener at each trigger time.
        let mut fired_at = Vec::new();
        while let Some(pos) = r.timers.iter().position(|&t| t <= Time::from_nanos(35)) {
            let t = r.timers.remove(pos);
            r.tick(t.as_nanos());
            fired_at.push(t.as_nanos());
        }
        assert_eq!(fired_at, [10, 20, 30]);
        assert_eq!(r.log, ["@10 []", "@20 []", "@30 []"]);
        assert_eq!(r.timers, [Time::from_nanos(40)]);
    }

    // R7.3: "no heartbeat for 5": not(x).within(d) matches at the bound if x did not happen.
    #[test]
    fn r7_3_not_within_is_absence() {
        let five = Duration::from_nanos(5);
        let mut r = Run::new(not(p(3)).within(five), false);
        r.tick(4);
        assert!(r.log.is_empty());
        r.tick(5);
        assert_eq!(r.log, ["@5 []"]);
        let mut r = Run::new(not(p(3)).within(five), false);
        r.ev(3, 0, 2);
        r.tick(5);
        assert!(r.log.is_empty());
        assert!(!r.alive);
        // The same with a timer and `and`.
        let mut r = Run::new(wait(five).and(not(p(3))), false);
        r.tick(5);
        assert_eq!(r.log, ["@5 []"]);
    }

    // R7.3: the registration check finds exactly the expressions (and `or` sides) that can never
    // match under the documented semantics of `not`, and agrees with the matcher.
    #[test]
    fn r7_3_never_matches_finds_a_lone_not() {
        let five = Duration::from_nanos(5);
        let check = |e: Expr<Ev>| never_matches(&e.compile()).map(|m| m.starts_with("this"));
        // The whole expression can never match.
        assert_eq!(check(not(p(3))), Some(true));
        assert_eq!(check(not(p(3)).then(p(1))), Some(true));
        assert_eq!(check(not(p(3)).and(not(p(4)))), Some(true));
        assert_eq!(check(p(1).then(not(p(3)))), Some(true));
        // One side of an `or` can never match.
        assert_eq!(check(p(1).then(p(2)).or(not(p(3)))), Some(false));
        assert_eq!(check(not(p(3)).or(wait(five))), Some(false));
        // Fine: `and`, `within`, and their combinations.
        for e in [
            p(1).and(not(p(3))),
            not(p(3)).within(five),
            wait(five).and(not(p(3))),
            p(1).then(p(2).and(not(p(3)))),
            p(1).or(not(p(3)).within(five)),
            p(1).then(not(p(3)).within(five)),
            not(p(3)).and(not(p(4))).within(five),
        ] {
            assert_eq!(check(e), None);
        }
        // The matcher agrees: `p(1).then(not(p(3)))` only ever holds, never matches.
        let mut r = Run::new(p(1).then(not(p(3))), false);
        r.ev(1, 1, 1);
        r.tick(100);
        r.ev(2, 0, 101);
        assert!(r.log.is_empty() && r.alive);
    }

    // R7.3 ("`within_from_first`"): nothing expires before the first event; the clock starts at
    // it, the bound is exclusive, and under `when_all` each new match runs its own clock.
    #[test]
    fn r7_3_within_from_first_counts_from_the_first_event() {
        let ten = Duration::from_nanos(10);
        let mut r = Run::new(p(1).then(p(2)).within_from_first(ten), true);
        assert!(r.timers.is_empty(), "no clock before the first event");
        r.tick(1_000);
        assert!(r.alive, "a quiet spell ends nothing");
        r.ev(1, 1, 1_000);
        assert_eq!(r.timers, [Time::from_nanos(1_010)]);
        r.ev(1, 2, 1_005);
        assert_eq!(r.timers, [Time::from_nanos(1_010), Time::from_nanos(1_015)]);
        r.tick(1_010);
        r.ev(2, 3, 1_012);
        assert_eq!(r.log, ["@1012 [1.2 2.3]"], "1.1's clock ran out at 1010");
        r.ev(1, 4, 2_000);
        r.tick(2_010);
        r.ev(2, 5, 2_010);
        assert_eq!(r.log.len(), 1, "the bound is exclusive");
        assert!(r.alive);
        // Compare `within`: counted from registration, it ends the listener after the spell.
        let mut r = Run::new(p(1).then(p(2)).within(ten), true);
        r.tick(1_000);
        assert!(!r.alive);
    }

    // R7.3 ("`within_from_first`" with `and`, `or`, `not`): "first" is the first template to
    // match on either side of `and`/`or`; a `not` inside never starts the clock, and a holding
    // `not` matches at the bound.
    #[test]
    fn r7_3_within_from_first_with_and_or_not() {
        let ten = Duration::from_nanos(10);
        // `and`: the clock starts at whichever side comes first.
        let mut r = Run::new(p(1).and(p(2)).within_from_first(ten), false);
        r.ev(2, 1, 100);
        r.tick(110);
        r.ev(1, 2, 111);
        assert!(r.log.is_empty() && !r.alive);
        // `a, then no x within 10 of a`: matches at a's time + 10.
        let mut r = Run::new(p(1).then(not(p(3))).within_from_first(ten), false);
        r.ev(3, 0, 50);
        r.tick(100);
        assert!(r.alive && r.log.is_empty(), "an x before a starts nothing");
        r.ev(1, 1, 100);
        r.tick(110);
        assert_eq!(r.log, ["@110 [1.1]"]);
        // A `not` that sees its event does not start the clock above it.
        let mut r = Run::new(p(1).and(not(p(3)).or(p(4))).within_from_first(ten), true);
        r.ev(3, 0, 5);
        assert!(r.timers.is_empty());
        // A lone `not` has no first event: the registration check says it can never match.
        let lone = not::<Ev>(p(3)).within_from_first(ten).compile();
        assert!(never_matches(&lone).is_some());
        let fine = p(1).then(not(p(3))).within_from_first(ten).compile();
        assert_eq!(never_matches(&fine), None);
    }

    #[test]
    fn leaves_are_deduplicated() {
        let e = p(1).then(p(2)).or(p(1)).and(not(Pattern::kind(4).key(9)));
        let defs = e.compile();
        assert_eq!(leaves(&defs), [(1, None), (2, None), (4, Some(9))]);
    }
}
