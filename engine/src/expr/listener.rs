//! The matchers of one expression listener ([`ExprListener`]): `when` keeps one, `when_all` one
//! per match in progress plus a fresh one that has seen nothing yet (see "Listening" in the
//! [module docs](crate::expr)); and what a completed match hands the handler ([`Match`]).
//!
//! Owns the listener's matchers and their reuse. May import `event` and `time`.

use crate::event::Event;
use crate::time::Time;

use super::analysis::{leaves, never_matches};
use super::matcher::{Matcher, Outcome, StepOut, Stimulus};
use super::{Def, Expr};

/// A completed match, handed to `when`/`when_all` handlers.
#[derive(Clone, Debug, PartialEq)]
pub struct Match<E> {
    /// The events that matched the expression's templates, in expression order (left to right).
    pub events: Vec<E>,
    /// The logical time at which the match completed.
    pub time: Time,
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
