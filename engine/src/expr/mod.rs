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
//!       | template.times(n)        exactly n events of the template (R7.6)
//!       | template.at_least(n)     n or more, greedily
//!       | template.between(n, m)   n to m, greedily
//!       | all(expr)                every match of expr, each going on as its own copy (R7.8)
//! template := Pattern::kind(k).key(..).filter(..).given(..).named(..)
//!                                  given: a condition on the events matched before (R7.5)
//! ```
//! and, for the whole expression of a repeating listener, `expr.after_match(policy)` (R7.6).
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
//! # Conditions across events
//! A later template can depend on what an earlier one matched (SPEC R7.5): [`Pattern::given`](crate::Pattern::given)
//! takes a condition that sees the match so far as a [`Prior`](crate::Prior), by the templates'
//! numbers (expression order, from 0) or their [names](crate::Pattern::named), without copies.
//! The handler finds a match's events the same way ([`Match::named`], [`Match::get`]), which stays
//! right where `events[i]` would not (an `or` or a repetition changes how many come before).
//!
//! ```
#![doc = include_str!("../../doc/expr_example_prelude.txt")]
//! // A 1, then a 2 whose second is at least 3 after the 1's.
//! let open = Pattern::kind(1).named("open");
//! let late = Pattern::kind(2).given(|p, e: &Ev| p.named("open").is_some_and(|o| e.1 >= o.1 + 3));
//! assert_eq!(first_match(open.then(late), &[(1, 10), (2, 11), (2, 13)]), Some((13, vec![1, 2])));
//! ```
//!
//! # Repetition
//! A template can be repeated (SPEC R7.6): [`times(n)`](crate::Pattern::times) matches at its
//! `n`-th event; [`at_least(n)`](crate::Pattern::at_least) and
//! [`between(n, m)`](crate::Pattern::between) are greedy: from `n` events on they are *satisfied*
//! and keep taking their template's events until what they are part of completes (the right side
//! of their `then`, the other side of an `and`, the bound of a `within` around them; `between`
//! also at `m`). Other events may come between the repeated ones. Bound a run with
//! `within_from_first(d)` to count from its first event:
//!
//! ```
#![doc = include_str!("../../doc/expr_example_prelude.txt")]
//! // Three failures (kind 4) within 60 s of the first, then a success (kind 5).
//! let attack = Pattern::kind(4).times(3).within_from_first(Duration::from_secs(60));
//! let expr = attack.then(Pattern::kind(5));
//! // The 5 at 12 s comes before the third failure: the success is not looked for yet.
//! let events = [(4, 10), (5, 12), (4, 20), (4, 50), (5, 75)];
//! assert_eq!(first_match(expr, &events), Some((75, vec![4, 4, 4, 5])));
//! ```
//!
//! A repeating listener's [`AfterMatch`] policy says which matches in progress survive a completed
//! one: by default all of them (matches may overlap); `SkipPastLastEvent` drops them, so no two
//! matches share an event.
//!
//! # `all` inside expressions
//! [`all(x)`](crate::all) (SPEC R7.8, Apama's `all` operator) makes every match of `x` count: the
//! match goes on, and a copy in which `x` starts again looks for the next one. `all(a).then(b)`
//! pairs every `a` with the first `b` after it; `a.then(all(b))` pairs the first `a` with every
//! later `b`; `all(a.then(b))` starts the sequence again after each match. See [`all`](crate::all)
//! for the Apama documentation's own examples, run.
//!
//! # Timeouts
//! [`Scope::when_with_timeout`](crate::Scope::when_with_timeout) and
//! [`when_all_with_timeout`](crate::Scope::when_all_with_timeout) take a second handler for a match
//! that timed out (SPEC R7.7): a `within` or `within_from_first` bound failed it after it had
//! matched at least one event. The handler gets those events, as Flink CEP hands timed-out partial
//! matches to a side output; so "a trade not confirmed within 5 s" reports the trade:
//! `when_with_timeout(trade.then(confirm).within_from_first(five), on_confirmed, on_unconfirmed)`.
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
//! An event offered to a listener first meets its templates, once each (kind, key, fields,
//! filter: one bit per template); an event none of them accepts changes no match and stops
//! there, which is the fate of most events a per-key listener is offered. Only then is each match
//! in progress stepped, asking the `given` conditions itself. A clock stimulus skips the matches
//! none of whose open timers or bounds is due yet. A copy that `all` made is stepped by the next
//! stimulus whatever it is (its parts above the restarted `all` settle there).
//!
//! Every registration on a context compiles its expression, and the context keeps one program
//! per shape (`programs`): the instances of a per-key monitor that register the same expression
//! run one program, and each listener keeps only its key and its matches. An expression whose
//! closures capture nothing is the same program for every instance but for its templates' key;
//! a closure's identity is knowable where it is given: `filter` and `given` see its type, and a
//! zero-sized closure's behaviour is its type (`TypeId::of::<F>()` when `size_of::<F>() == 0`).
//! One that captures something, or two filters combined, makes the expression unshareable and
//! it gets a program of its own (SPEC, Decisions: "One program per expression shape").
//!
//! Owns the expression language, its matchers and the expression builders of a
//! [`Pattern`](crate::Pattern). May import `event`, `hash`, `pattern` and `time`.

// One job per file: `combinators` (the `Expr` tree, `wait`, `at`, `not`, the combinators and
// `Pattern`'s builders, flattened into definitions), `matcher` (one match in progress, stepped by
// events and time), `listener` (the matchers of one `when`/`when_all` listener, and `Match`),
// `analysis` (what a flattened expression can come to: the registration warnings, the templates
// for the listener index) and `programs` (one compiled program per shape, per context).
mod analysis;
mod combinators;
mod listener;
mod matcher;
mod programs;
#[cfg(feature = "checkpoint")]
mod saved;

pub use combinators::{all, at, not, wait, AfterMatch, Expr};
pub use listener::Match;

pub(crate) use combinators::{Def, Prog};
pub(crate) use listener::{ExprListener, Fired};
pub(crate) use matcher::Held;
pub(crate) use matcher::{StepOut, Stimulus};
pub(crate) use programs::Programs;
#[cfg(feature = "checkpoint")]
pub(crate) use saved::ExprPart;

#[cfg(test)]
mod proptests;
#[cfg(test)]
mod reference;
#[cfg(test)]
mod tests;
