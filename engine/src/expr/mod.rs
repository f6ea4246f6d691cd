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
//! [`Pattern`](crate::Pattern). May import `event`, `pattern` and `time`.

// One job per file: `combinators` (the `Expr` tree, `wait`, `at`, `not`, the combinators and
// `Pattern`'s builders, flattened into definitions), `matcher` (one match in progress, stepped by
// events and time), `listener` (the matchers of one `when`/`when_all` listener, and `Match`) and
// `analysis` (what a flattened expression can come to: the registration warnings, the templates
// for the listener index).
mod analysis;
mod combinators;
mod listener;
mod matcher;

pub use combinators::{at, not, wait, Expr};
pub use listener::Match;

pub(crate) use combinators::Def;
pub(crate) use listener::ExprListener;
pub(crate) use matcher::{StepOut, Stimulus};

#[cfg(test)]
mod tests;
