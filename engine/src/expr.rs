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
//! ```
//! Each primary matches once: a template matches the first matching event after it starts, a timer
//! fires once. `within(d)` expires when the clock reaches the bound: an event taken at a logical time
//! before `start + d` counts, a tick to exactly `start + d` ends it. `not(x).within(d)` matches at
//! the bound if `x` did not happen ("no heartbeat for 5 s").
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
//! matcher failed too) is removed.
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
}

/// An event expression; build one from [`Pattern`]s with the combinators, [`wait`], [`at`] and
/// [`not`] (see the [module docs](crate::expr) for the grammar).
///
/// An expression matches when an event or a clock tick completes it: never at the moment it is set
/// up. A [`not`] is a guard that counts as matched only inside `and` and at the bound of `within`
/// (unlike Apama EPL, where `on not x` fires at once); a timer already due when it starts fires at
/// the next clock tick.
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
pub fn wait<E: Event>(d: Duration) -> Expr<E> {
    Expr {
        root: Node::Wait(d),
    }
}

/// A timer primary: fires when the context's logical clock reaches `t`.
///
/// If the clock has already passed `t` when it starts, it fires at the next clock tick (so
/// `when_all(at(t))` then fires once per tick).
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
pub fn not<E: Event>(x: impl Into<Expr<E>>) -> Expr<E> {
    Expr {
        root: Node::Not(Box::new(x.into().root)),
    }
}

impl<E: Event> Expr<E> {
    /// Followed-by (`self -> next`): `next` is looked for only after `self` matched.
    pub fn then(self, next: impl Into<Expr<E>>) -> Expr<E> {
        Expr {
            root: Node::Then(Box::new(self.root), Box::new(next.into().root)),
        }
    }

    /// Both, in any order.
    pub fn and(self, other: impl Into<Expr<E>>) -> Expr<E> {
        Expr {
            root: Node::And(Box::new(self.root), Box::new(other.into().root)),
        }
    }

    /// Either.
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
    pub fn within(self, d: Duration) -> Expr<E> {
        Expr {
            root: Node::Within(Box::new(self.root), d),
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
        });
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
            Def::Then(a, _) | Def::Not(a) => self.start_node(defs, *a, now, out),
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
            &Def::Not(a) => match self.step_node(defs, a, stim, now, out, false) {
                Outcome::Matched => {
                    out.progressed = true;
                    Outcome::Failed
                }
                _ => Outcome::Holding,
            },
            &Def::Within(a, _) => {
                let s = self.step_node(defs, a, stim, now, out, keep);
                let expired = matches!((stim, node.time), (Stimulus::Time(t), Some(d)) if t >= d);
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
             (combine it with `and`, or bound it with `within`)",
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
    /// Active matchers; for `when_all` the last one is the fresh one (if `fresh`).
    matchers: Vec<Matcher<E>>,
    all: bool,
    /// Whether the last matcher has seen nothing yet (`when_all` only).
    fresh: bool,
    /// A finished matcher whose vectors the next one reuses.
    spare: Option<Matcher<E>>,
}

impl<E: Event> ExprListener<E> {
    pub(crate) fn new(expr: Expr<E>, all: bool, now: Time, out: &mut StepOut) -> Self {
        let defs = expr.compile();
        let first = Matcher::start(&defs, now, out, None);
        Self {
            defs,
            matchers: vec![first],
            all,
            fresh: all,
            spare: None,
        }
    }

    pub(crate) fn leaves(&self) -> Vec<(E::Kind, Option<u64>)> {
        leaves(&self.defs)
    }

    /// The flattened expression.
    pub(crate) fn defs(&self) -> &[Def<E>] {
        &self.defs
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
        while i < self.matchers.len() {
            let is_fresh = self.fresh && i + 1 == self.matchers.len();
            out.progressed = false;
            let status = self.matchers[i].step(&self.defs, stim, now, out);
            progressed_any |= out.progressed;
            match status {
                Outcome::Matched => {
                    let mut m = self.matchers.remove(i);
                    let mut events = Vec::new();
                    m.collect(&mut events);
                    fired.push(Match { events, time: now });
                    self.spare = Some(m);
                    if is_fresh {
                        restart = true;
                    }
                }
                Outcome::Failed => {
                    self.spare = Some(self.matchers.remove(i));
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
                return (true, false);
            }
        }
        if restart && self.all {
            out.progressed = false;
            let fresh = Matcher::start(&self.defs, now, out, self.spare.take());
            self.matchers.push(fresh);
            self.fresh = true;
        }
        (progressed_any, !self.matchers.is_empty())
    }
}

/// The expression builders of a single template: `Pattern` is the leaf of [`Expr`], so they live
/// here and `pattern` imports nothing from `expr`.
impl<E: Event> Pattern<E> {
    /// `self -> next`: this template, then `next` (see [`Expr::then`]).
    pub fn then(self, next: impl Into<Expr<E>>) -> Expr<E> {
        Expr::from(self).then(next)
    }

    /// Both this template and `other`, in any order (see [`Expr::and`]).
    pub fn and(self, other: impl Into<Expr<E>>) -> Expr<E> {
        Expr::from(self).and(other)
    }

    /// This template or `other` (see [`Expr::or`]).
    pub fn or(self, other: impl Into<Expr<E>>) -> Expr<E> {
        Expr::from(self).or(other)
    }

    /// This template, within `d` of the moment it starts being looked for: an event taken while
    /// the context's logical clock is before `start + d` (exclusive), on the clock the correlator
    /// runs ([which one](crate::Time#which-clock): whole ticks by default, so a `d` shorter than
    /// the tick period means "before the next tick"; the events' own stamps under
    /// [`event_time`](crate::CorrelatorBuilder::event_time)). See [`Expr::within`].
    pub fn within(self, d: Duration) -> Expr<E> {
        Expr::from(self).within(d)
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

    #[test]
    fn leaves_are_deduplicated() {
        let e = p(1).then(p(2)).or(p(1)).and(not(Pattern::kind(4).key(9)));
        let defs = e.compile();
        assert_eq!(leaves(&defs), [(1, None), (2, None), (4, Some(9))]);
    }
}
