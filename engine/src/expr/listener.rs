//! The matchers of one expression listener ([`ExprListener`]): `when` keeps one, `when_all` one
//! per match in progress plus a fresh one that has seen nothing yet (see "Listening" in the
//! [module docs](crate::expr)), with the after-match policy (R7.6) and the timeouts it reports
//! (R7.7); and what a completed match hands the handler ([`Match`]).
//!
//! # The fresh match, unmade
//! Where every match of a program starts in the same states whatever the time (the first part of
//! the expression is a template: `a.then(b.within(d))`, `hb.then(not(hb).within(d))`; see
//! [`StartImage`](super::matcher::StartImage)), a `when_all` listener keeps no matcher for its
//! fresh match ([`UNMADE_FRESH`]). It makes one, copying the image into its spare, only for an
//! event that a template of the image admits, steps it after the matches in progress (where the
//! fresh one always is), and keeps it if the event changed it. Nothing else could change a fresh
//! match: the image sets no timer, so no clock stimulus reaches it. The order and outcomes are
//! those of a fresh matcher kept throughout (the differential tests check the two against the
//! reference model, which keeps one); what changes is the memory an event touches and the
//! work of a start. At 100,000 devices `workload/absence` meets each listener cold once per
//! heartbeat: with the fresh match unmade its context thread reads 5.1 instead of 8.1 lines from
//! memory per event, and runs 9 % fewer instructions (callgrind, harness/BENCHMARKS.md).
//!
//! Owns the listener's matchers and their reuse. May import `event`, `pattern` and `time`.

use std::rc::Rc;
use std::sync::Arc;

use smallvec::SmallVec;

use crate::event::Event;
use crate::pattern::{template_named, Labels};
use crate::time::Time;

use super::analysis::leaves;
use super::combinators::AfterMatch;
use super::matcher::{admitted, Held, Matcher, Outcome, StepOut, Stimulus, ADMIT_BITS, NO_DUE};
use super::programs::Programs;
use super::{Def, Expr, Prog};

/// A completed match, handed to `when`/`when_all` handlers; or, for a listener registered with a
/// timeout handler (`when_with_timeout`, `when_all_with_timeout`), a match that timed out, with
/// the events it had matched (SPEC R7.7).
#[derive(Clone, Debug, PartialEq)]
pub struct Match<E> {
    /// The events that matched the expression's templates, in expression order (left to right;
    /// a repetition's events in the order they came).
    pub events: Vec<E>,
    /// The logical time at which the match completed (for a timeout: the bound that expired).
    pub time: Time,
    /// The number of the template each event matched (expression order, from 0).
    templates: SmallVec<[u32; 6]>,
    /// The templates' names, if any template is named.
    names: Option<Arc<[Option<&'static str>]>>,
}

impl<E> Match<E> {
    fn template(&self, name: &str) -> Option<u32> {
        template_named(self.names.as_deref()?, name)
    }

    /// The first event template number `template` matched (expression order, from 0: in
    /// `a.then(b.or(c))`, `a` is 0, `b` 1, `c` 2), if it matched: unlike `events[i]`, this stays
    /// right when an `or` or a repetition changes how many events come before.
    pub fn get(&self, template: usize) -> Option<&E> {
        let t = u32::try_from(template).ok()?;
        let i = self.templates.iter().position(|&x| x == t)?;
        self.events.get(i)
    }

    /// The first event the template named `name` ([`Pattern::named`](crate::Pattern::named))
    /// matched, if it matched.
    ///
    /// ```
    #[doc = include_str!("../../doc/expr_example_prelude.txt")]
    /// # let _ = first_match;
    /// let expr: Expr<Ev> = Pattern::kind(1).named("open").then(Pattern::kind(2).named("close"));
    /// # let _ = expr;
    /// // In the handler: `hit.named("open")`, `hit.named("close")`.
    /// ```
    pub fn named(&self, name: &str) -> Option<&E> {
        self.all_named(name).next()
    }

    /// Every event the template named `name` matched (more than one for a repetition), in the
    /// order they came.
    pub fn all_named<'a>(&'a self, name: &str) -> impl Iterator<Item = &'a E> + 'a {
        let t = self.template(name);
        self.templates
            .iter()
            .zip(&self.events)
            .filter(move |(x, _)| Some(**x) == t)
            .map(|(_, e)| e)
    }
}

/// What stepping a listener produced: a match, or a match that timed out (R7.7).
pub(crate) struct Fired<E> {
    pub(crate) hit: Match<E>,
    pub(crate) timed_out: bool,
}

/// The matchers of one expression listener (see the module docs for `when` vs `when_all`).
pub(crate) struct ExprListener<E: Event> {
    /// Its program, shared with every listener registered with the same expression on this
    /// context where that can be known ([`Programs`]).
    prog: Rc<Prog<E>>,
    /// The key of the program's templates keyed by the listener's key ([`Prog::keyed`]).
    key: u64,
    /// The number of the last clock stimulus the listener took (`first_at`).
    stepped: u64,
    /// No match in progress reacts to the clock before this time: the least of their
    /// [`Matcher::due_after`] bounds after the last step. Kept here, beside the listener's other
    /// fields, a clock stimulus before it (most are, at a timer of a match that has ended since)
    /// is skipped without reading the matches ([`quiet_at`](Self::quiet_at)).
    due: Time,
    /// The active matchers, `matchers[..live]` (for `when_all` the last active one is the fresh
    /// one, if `fresh`, unless the fresh one is [unmade](UNMADE_FRESH)), then at most one finished
    /// matcher whose vectors the next one reuses.
    /// The spare sits in the same vector rather than in a field of its own: that keeps the
    /// listener (and so every listener slot, template ones too) 48 bytes smaller.
    matchers: Vec<Matcher<E>>,
    /// How many of `matchers` are active.
    live: u32,
    all: bool,
    /// Whether the last matcher has seen nothing yet (`when_all` only); with
    /// [`UNMADE_FRESH`], whether the expression can still start a match.
    fresh: bool,
    /// Whether some matcher is a copy made by `all` (R7.8) that no step has seen yet: the
    /// parts above its restarted `all` recompute their outcomes at its next step, whatever the
    /// stimulus, so until then no stimulus may be skipped.
    unsettled: bool,
    /// [`SKIP_PAST_LAST`], [`TIMEOUTS`], [`SKIPPABLE`], [`UNMADE_FRESH`]: set once, one byte with
    /// the flags above (the listener is part of every listener slot, which must stay two cache
    /// lines).
    traits: u8,
}

/// A completed match drops the others in progress (R7.6).
const SKIP_PAST_LAST: u8 = 1;
/// Matches that time out are reported (R7.7).
const TIMEOUTS: u8 = 2;
/// A stimulus that changes no matcher can be skipped: every template is tested by
/// [`ExprListener::admitted`], and no part's outcome at start is final (which the next stimulus,
/// of whatever kind, would report).
const SKIPPABLE: u8 = 4;
/// A `when_all` listener whose program starts every match in the same states
/// ([`StartImage`](super::matcher::StartImage)) keeps no fresh matcher: a fresh match that has
/// seen nothing is the image, so one is made (copied into the spare) only for an event some
/// template of the image admits, and kept only if that event changed it. An idle listener holds
/// no matcher, and a match that starts costs a copy, not a walk of the definitions.
const UNMADE_FRESH: u8 = 8;
/// The listener's program is its own (not shared: a capturing filter), so it is cold when an
/// event of its key comes, and the look-ahead hints it ([`program_hint`](ExprListener::program_hint)).
const OWN_PROGRAM: u8 = 16;

impl<E: Event> ExprListener<E> {
    /// Where its first matcher lives (for cache hints; without one, a dangling address, which a
    /// prefetch ignores).
    #[inline]
    pub(crate) fn hint(&self) -> *const u8 {
        self.matchers.as_ptr().cast::<u8>()
    }

    /// Where its matches in progress are, and how long the first two of them are, for a hint.
    #[inline]
    pub(crate) fn matches_hint(&self) -> (*const u8, usize) {
        let n = (self.live as usize).min(2);
        (
            self.matchers.as_ptr().cast::<u8>(),
            n * std::mem::size_of::<Matcher<E>>(),
        )
    }

    /// Where its program's head is, and how long it is: what testing an event reads first
    /// ([`Prog::ADMIT_HEAD`]), for a hint; `None` for a shared program (whatever the number of
    /// listeners, it stays in cache).
    #[inline]
    pub(crate) fn program_hint(&self) -> Option<(*const u8, usize)> {
        (self.traits & OWN_PROGRAM != 0)
            .then(|| (Rc::as_ptr(&self.prog).cast::<u8>(), Prog::<E>::ADMIT_HEAD))
    }

    /// Where the template that testing an event reads first is, and how long its definition is,
    /// for a hint (reads the program's head: call once [`program_hint`](Self::program_hint)'s
    /// lines have had time to arrive).
    #[inline]
    pub(crate) fn template_hint(&self) -> Option<(*const u8, usize)> {
        let &(d, _) = self.prog.admits.first()?;
        let def = self.prog.defs.get(d as usize)?;
        Some((
            (def as *const Def<E>).cast::<u8>(),
            std::mem::size_of::<Def<E>>(),
        ))
    }

    /// A listener of `expr`, its program taken from `programs` if one of the same shape is there.
    pub(crate) fn new(
        expr: Expr<E>,
        all: bool,
        timeouts: bool,
        now: Time,
        out: &mut StepOut,
        programs: &mut Programs<E>,
    ) -> Self {
        let (prog, after, key) = programs.program(expr, all);
        let unmade = all && prog.start.is_some();
        let (matchers, due) = if unmade {
            (Vec::new(), NO_DUE)
        } else {
            let first = match &prog.start {
                Some(image) => Matcher::from_image(image),
                None => Matcher::start(&prog.defs, &prog.labels, now, out),
            };
            let due = first.next_due();
            (vec![first], due)
        };
        let skippable = prog.defs.len() <= ADMIT_BITS && !prog.labels.odd_start;
        let flag = |on: bool, bit: u8| if on { bit } else { 0 };
        // The map of shared programs holds one more reference to a shared one.
        let own = Rc::strong_count(&prog) == 1;
        let traits = flag(after == AfterMatch::SkipPastLastEvent, SKIP_PAST_LAST)
            | flag(timeouts, TIMEOUTS)
            | flag(skippable, SKIPPABLE)
            | flag(unmade, UNMADE_FRESH)
            | flag(own, OWN_PROGRAM);
        Self {
            prog,
            key: key.unwrap_or(0),
            stepped: 0,
            due,
            live: matchers.len() as u32,
            matchers,
            all,
            fresh: all,
            unsettled: false,
            traits,
        }
    }

    /// Whether the listener can still fire: a match is in progress, or (under
    /// [`UNMADE_FRESH`]) one can still start.
    #[inline(always)]
    fn alive(&self) -> bool {
        self.live > 0 || (self.traits & UNMADE_FRESH != 0 && self.fresh)
    }

    /// Under [`UNMADE_FRESH`]: a fresh match made from the image as active matcher `live` (in
    /// the spare, if there is one). False, and nothing made, for a program without an image.
    #[inline]
    fn make_fresh(&mut self) -> bool {
        let Some(image) = self.prog.start.as_ref() else {
            return false;
        };
        match self.matchers.get_mut(self.live as usize) {
            Some(spare) => spare.restart_from(image),
            None => self.matchers.push(Matcher::from_image(image)),
        }
        self.live += 1;
        true
    }

    /// Its state for a checkpoint: its matches in progress and what it keeps beside them, the
    /// events through `encode` (SPEC R11.10).
    #[cfg(feature = "checkpoint")]
    pub(crate) fn save(&self, encode: &mut dyn FnMut(&E, &mut Vec<u8>)) -> super::saved::ExprPart {
        super::saved::ExprPart {
            shape: self.prog.shape(),
            stepped: self.stepped,
            due: self.due.as_nanos(),
            fresh: self.fresh,
            unsettled: self.unsettled,
            matchers: self.matchers[..self.live as usize]
                .iter()
                .map(|m| m.save(encode))
                .collect(),
        }
    }

    /// Puts back the state `part` saved, in place of this new listener's (registered again
    /// with an expression of the same shape, R11.11); the events through `decode`. An error
    /// leaves the listener as it was.
    #[cfg(feature = "checkpoint")]
    pub(crate) fn restore(
        &mut self,
        part: super::saved::ExprPart,
        decode: &dyn Fn(&[u8]) -> Result<E, String>,
    ) -> Result<(), String> {
        let shape = self.prog.shape();
        if part.shape != shape {
            return Err("its expression has another shape than the saved one".to_owned());
        }
        let defs = self.prog.defs.len();
        let matchers = part
            .matchers
            .into_iter()
            .map(|m| Matcher::restore(m, defs, decode))
            .collect::<Result<Vec<_>, _>>()?;
        self.live = matchers.len() as u32;
        self.matchers = matchers;
        self.stepped = part.stepped;
        self.due = Time::from_nanos(part.due);
        self.fresh = part.fresh;
        self.unsettled = part.unsettled;
        Ok(())
    }

    /// How many matchers the listener keeps, active and spare (for the tests).
    #[cfg(test)]
    pub(crate) fn matchers_kept(&self) -> usize {
        self.matchers.len()
    }

    /// Whether stimuli that change no matcher can be skipped now.
    #[inline(always)]
    fn skippable(&self) -> bool {
        self.traits & SKIPPABLE != 0 && !self.unsettled
    }

    /// Which templates accept `e` but for their `given` conditions, one bit per definition (see
    /// [`admitted`]); user code, the templates' filters, runs here. For an event stimulus a
    /// caller passes this to [`step_admitted`](Self::step_admitted).
    #[inline]
    pub(crate) fn admitted(&self, e: &E) -> u64 {
        admitted(
            &self.prog.defs,
            &self.prog.admits,
            self.prog.keyed,
            self.key,
            e,
        )
    }

    /// Whether an event of which [`admitted`](Self::admitted) said `bits` leaves every matcher
    /// as it is: no template takes it, so no step is needed (SPEC R7.3: a listener whose
    /// templates all decline an event does nothing for it).
    #[inline]
    pub(crate) fn declines(&self, bits: u64) -> bool {
        bits == 0 && self.skippable()
    }

    /// Whether a clock stimulus at `t` leaves every match as it is: none reacts to the clock
    /// before a time after `t`, and stimuli that change nothing may be skipped now (R7.2: the
    /// timers and bounds still open fire when the clock reaches them).
    #[inline]
    pub(crate) fn quiet_at(&self, t: Time) -> bool {
        t < self.due && self.skippable()
    }

    /// What its matches in progress hold.
    pub(crate) fn held(&self) -> Held {
        let mut held = Held::default();
        for m in &self.matchers[..self.live as usize] {
            held.count(m.events_held());
        }
        held
    }

    /// Whether the context's clock stimulus number `stimulus` (one per time in a tick) is the
    /// first of that number this listener gets (and notes it). Its timers' entries can name one
    /// time more than once (two timers of one match, or of two matches, due at once); every
    /// timer of its matches due by that time fires at the first, and a match started since then
    /// in the same tick has its due timers deferred to the next one (R7.2): so a second stimulus
    /// at that time in the same tick is skipped, or it would fire that match early.
    pub(crate) fn first_at(&mut self, stimulus: u64) -> bool {
        let first = self.stepped != stimulus;
        self.stepped = stimulus;
        first
    }

    pub(crate) fn leaves(&self) -> SmallVec<[(E::Kind, crate::pattern::IndexKey); 4]> {
        leaves(&self.prog.defs, self.prog.keyed, self.key)
    }

    /// Its program (for the tests).
    #[cfg(test)]
    pub(crate) fn program(&self) -> &Rc<Prog<E>> {
        &self.prog
    }

    /// The flattened expression.
    pub(crate) fn defs(&self) -> &[Def<E>] {
        &self.prog.defs
    }

    /// Whether the expression holds a `within` (counted from the start, not the first event).
    pub(crate) fn has_within(&self) -> bool {
        self.prog.defs.iter().any(|d| matches!(d, Def::Within(..)))
    }

    /// See [`never_matches`](super::analysis::never_matches).
    pub(crate) fn never_matches(&self) -> Option<&'static str> {
        self.prog.never
    }

    /// The completed (or timed-out) match of matcher `m` at `now`, `labels` its program's.
    fn hit(labels: &Labels, m: &mut Matcher<E>, now: Time) -> Match<E> {
        // One allocation: the events the handler gets (the template numbers fit in place).
        let mut events = Vec::with_capacity(m.events_held());
        let mut templates = SmallVec::new();
        m.collect(labels, &mut events, &mut templates);
        Match {
            events,
            time: now,
            templates,
            names: labels.shared.clone(),
        }
    }

    /// [`step_admitted`](Self::step_admitted) of an event or a clock stimulus, for the tests.
    #[cfg(test)]
    pub(crate) fn step(
        &mut self,
        stim: Stimulus<'_, E>,
        now: Time,
        out: &mut StepOut,
        fired: &mut Vec<Fired<E>>,
    ) -> (bool, bool) {
        let bits = match stim {
            Stimulus::Event(e) => self.admitted(e),
            Stimulus::Time(_) => 0,
        };
        self.step_admitted(stim, bits, now, out, fired)
    }

    /// Steps every matcher with `stim`, given what [`admitted`](Self::admitted) said of an
    /// event stimulus (`bits`, ignored for a clock stimulus); pushes completed (and, if asked
    /// for, timed-out) matches to `fired`. Returns whether the stimulus advanced anything, and
    /// whether the listener can still fire. A test's `step` computes `bits` itself.
    pub(crate) fn step_admitted(
        &mut self,
        stim: Stimulus<'_, E>,
        bits: u64,
        now: Time,
        out: &mut StepOut,
        fired: &mut Vec<Fired<E>>,
    ) -> (bool, bool) {
        let unchanged = match stim {
            Stimulus::Event(_) => self.declines(bits),
            Stimulus::Time(t) => self.quiet_at(t),
        };
        if unchanged {
            out.held = (Held::default(), Held::default());
            return (false, self.alive());
        }
        let mut progressed_any = false;
        let skip_past_last = self.traits & SKIP_PAST_LAST != 0;
        let skippable = self.skippable();
        let mut i = 0;
        let mut restart = false;
        let mut completed = false;
        // Copies asked for by `all` (R7.8): they join the matches after this stimulus.
        let mut copies: Vec<Matcher<E>> = Vec::new();
        let mut before = Held::default();
        let mut held = Held::default();
        // The least next-due time of the matches that stay (see `due`), gathered as they go by.
        let mut due = NO_DUE;
        let unmade = self.traits & UNMADE_FRESH != 0;
        // Under `UNMADE_FRESH` the fresh match is made, after the others, only for an event a
        // template of its start admits: to any other stimulus it would stay as it is.
        let mut make = unmade
            && self.fresh
            && matches!(stim, Stimulus::Event(_))
            && self
                .prog
                .start
                .as_ref()
                .is_some_and(|image| bits & image.armed != 0);
        let mut made = false;
        loop {
            if i == self.live as usize {
                if !make || !self.make_fresh() {
                    break;
                }
                make = false;
                made = true;
            }
            let last = i + 1 == self.live as usize;
            let is_fresh = last && if unmade { made } else { self.fresh };
            if let Stimulus::Time(t) = stim {
                if skippable && self.matchers[i].due_after(t) {
                    // Nothing of this match reacts to the clock yet: it stays as it is.
                    let n = self.matchers[i].events_held();
                    before.count(n);
                    held.count(n);
                    due = due.min(self.matchers[i].next_due());
                    i += 1;
                    continue;
                }
            }
            before.count(self.matchers[i].events_held());
            out.progressed = false;
            out.expired = false;
            let status =
                self.matchers[i].step(&self.prog.defs, &self.prog.labels, stim, bits, now, out);
            progressed_any |= out.progressed;
            if !out.alls.is_empty() {
                let mut alls = std::mem::take(&mut out.alls);
                let (defs, labels) = (&self.prog.defs, &self.prog.labels);
                copies.push(self.matchers[i].copy_restarting(defs, labels, &alls, now, out));
                alls.clear();
                out.alls = alls;
            }
            match status {
                Outcome::Matched => {
                    let m = self.retire(i);
                    // Under `SkipPastLastEvent` only the oldest match completing here fires.
                    if !(completed && skip_past_last) {
                        let hit = Self::hit(&self.prog.labels, &mut self.matchers[m], now);
                        fired.push(Fired {
                            hit,
                            timed_out: false,
                        });
                    }
                    completed = true;
                    if is_fresh {
                        restart = true;
                    }
                }
                Outcome::Failed => {
                    let m = self.retire(i);
                    let timed_out = out.expired && self.matchers[m].has_events();
                    if self.traits & TIMEOUTS != 0 && timed_out {
                        let hit = Self::hit(&self.prog.labels, &mut self.matchers[m], now);
                        fired.push(Fired {
                            hit,
                            timed_out: true,
                        });
                    }
                    if is_fresh {
                        // The expression can no longer start a match: no new fresh matcher.
                        self.fresh = false;
                    }
                }
                Outcome::Pending | Outcome::Holding | Outcome::Satisfied
                    if unmade && is_fresh && !out.progressed =>
                {
                    // The event changed nothing of the fresh match (a `given` declined it): it
                    // goes back to being unmade, the matcher to being the spare.
                    self.live -= 1;
                }
                Outcome::Pending | Outcome::Holding | Outcome::Satisfied => {
                    if is_fresh && out.progressed {
                        restart = true;
                    }
                    held.count(self.matchers[i].events_held());
                    due = due.min(self.matchers[i].next_due());
                    i += 1;
                }
            }
        }
        if completed && skip_past_last {
            copies.clear();
            held = Held::default();
            due = NO_DUE;
        }
        for c in &copies {
            due = due.min(c.next_due());
            held.count(c.events_held());
        }
        if completed && skip_past_last && self.live > 0 {
            // Every other match in progress started at or before the completed one's last
            // event: dropped, and a new fresh one starts after it (R7.6).
            let keep = self.matchers.len() > self.live as usize;
            let spare = keep.then(|| self.matchers.pop()).flatten();
            self.matchers.truncate(0);
            self.matchers.extend(spare);
            self.live = 0;
            restart = self.all && self.fresh;
        }
        self.unsettled = !copies.is_empty();
        if !copies.is_empty() {
            // Before the fresh matcher, if it is still fresh: it stays the last one.
            let fresh_last = !unmade && self.fresh && !restart && self.live > 0;
            let at = self.live as usize - usize::from(fresh_last);
            let n = copies.len() as u32;
            self.matchers.splice(at..at, copies);
            self.live += n;
        }
        if restart && self.all && !unmade {
            out.progressed = false;
            let (defs, labels) = (&self.prog.defs, &self.prog.labels);
            // The spare, if any, is restarted where it lies: a matcher is moved as little as
            // can be (it is a few lines long).
            match self.matchers.get_mut(self.live as usize) {
                Some(spare) => spare.restart(defs, labels, now, out),
                None => self.matchers.push(Matcher::start(defs, labels, now, out)),
            }
            due = due.min(self.matchers[self.live as usize].next_due());
            self.live += 1;
            self.fresh = true;
        }
        self.due = due;
        out.held = (before, held);
        (progressed_any, self.alive())
    }

    /// Takes active matcher `i` out of the active ones: the others keep their order, it becomes
    /// the spare (the spare it replaces is dropped). Returns its index, for the caller to read
    /// its match before it is reused.
    fn retire(&mut self, i: usize) -> usize {
        let last = self.live as usize - 1;
        if i != last {
            self.matchers[i..=last].rotate_left(1);
        }
        self.live -= 1;
        self.matchers.truncate(last + 1);
        last
    }
}
