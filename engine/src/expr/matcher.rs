//! One match in progress ([`Matcher`]): the state of every definition of a flattened expression,
//! stepped by events and clock ticks ([`Stimulus`]), and how the parts' outcomes combine ([`Outcome`]:
//! `then`, `and`, `or`, `not`, the bounds of `within` and `within_from_first`, R7.3; repetitions,
//! R7.6; the conditions of `given`, R7.5, which see the match so far as a [`Prior`]).
//!
//! Owns the matcher's states. May import `event`, `pattern` and `time`.

use crate::event::Event;
use crate::pattern::{Ident, Prior, Template};
use crate::time::Time;

use super::Def;
use crate::pattern::Labels;

use smallvec::SmallVec;

/// What happened to an expression (or part of it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Outcome {
    Pending,
    Matched,
    Failed,
    /// A `not` that has not failed: counts as matched inside `and`, pending elsewhere.
    Holding,
    /// A greedy repetition with enough events that can take more (R7.6): it completes with what
    /// it is part of (the right side of its `then`, the other side of an `and`, the bound of a
    /// `within`), and is pending on its own.
    Satisfied,
}

impl Outcome {
    /// The outcome as a number, for the table of outcomes at start ([`fill_start`]).
    fn code(self) -> u32 {
        match self {
            Outcome::Pending => 0,
            Outcome::Matched => 1,
            Outcome::Failed => 2,
            Outcome::Holding => 3,
            Outcome::Satisfied => 4,
        }
    }

    fn from_code(c: u32) -> Self {
        match c {
            1 => Outcome::Matched,
            2 => Outcome::Failed,
            3 => Outcome::Holding,
            4 => Outcome::Satisfied,
            _ => Outcome::Pending,
        }
    }
}

/// Fills in `labels` the outcome of every definition when just started (before any stimulus),
/// which depends on the expression only: what [`Matcher::peek`] says of a part the moment it
/// starts (a `then` whose left side is satisfied from the start starts its right side with it).
/// Children come before their parents, so one pass suffices.
pub(crate) fn fill_start<E: Event>(defs: &[Def<E>], labels: &mut Labels) {
    for (d, def) in defs.iter().enumerate().take(labels.meta.len()) {
        let st = |n: usize| Outcome::from_code(labels.meta[n].2);
        let s = match *def {
            Def::Leaf(_) | Def::Wait(_) | Def::At(_) => Outcome::Pending,
            Def::Repeat(_, min, max) => repeat_status(0, min, max),
            Def::Then(a, b) => match st(a) {
                Outcome::Failed => Outcome::Failed,
                Outcome::Satisfied => st(b),
                _ => Outcome::Pending,
            },
            Def::And(a, b) => combine_and(st(a), st(b)),
            Def::Or(a, b) => combine_or(st(a), st(b)),
            Def::Not(a) => match st(a) {
                Outcome::Matched | Outcome::Satisfied => Outcome::Failed,
                _ => Outcome::Holding,
            },
            Def::Within(a, _) | Def::WithinFirst(a, _) => match st(a) {
                Outcome::Holding => Outcome::Pending,
                s => s,
            },
            Def::All(a) => st(a),
        };
        labels.meta[d].2 = s.code();
        labels.odd_start |= matches!(s, Outcome::Failed | Outcome::Satisfied);
    }
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

/// What an expression listener holds: its matches in progress that have matched at least one
/// event, and those events (SPEC R7.6; the status's `partial_matches` and `partial_events`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Held {
    pub(crate) matches: u64,
    pub(crate) events: u64,
}

impl Held {
    pub(crate) fn add(&mut self, o: Held) {
        self.matches += o.matches;
        self.events += o.events;
    }

    /// Adds a match holding `n` events (none: nothing).
    pub(crate) fn count(&mut self, n: usize) {
        self.matches += u64::from(n > 0);
        self.events += n as u64;
    }

    pub(crate) fn sub(&mut self, o: Held) {
        self.matches = self.matches.saturating_sub(o.matches);
        self.events = self.events.saturating_sub(o.events);
    }
}

/// Side effects of stepping a matcher.
pub(crate) struct StepOut {
    /// Timers the new states need, as trigger times.
    pub(crate) timers: Vec<Time>,
    /// Whether any state changed (an event was consumed or a timer fired).
    pub(crate) progressed: bool,
    /// Whether a bound (`within`, `within_from_first`) expired and failed its part in this step:
    /// a match that fails in such a step timed out (R7.7).
    pub(crate) expired: bool,
    /// The `all` definitions whose part matched in this step: the matcher is copied with each
    /// restarted (R7.8).
    pub(crate) alls: Vec<u32>,
    /// What the listener's matches in progress held before and after the step (set by
    /// [`ExprListener::step_admitted`](super::ExprListener::step_admitted)).
    pub(crate) held: (Held, Held),
}

impl StepOut {
    /// No timers, nothing happened; `timers` is a buffer to reuse.
    pub(crate) fn new(timers: Vec<Time>) -> Self {
        StepOut {
            timers,
            progressed: false,
            expired: false,
            alls: Vec::new(),
            held: (Held::default(), Held::default()),
        }
    }
}

/// The state of one definition inside a [`Matcher`]: whether it has started, how it ended, and
/// the due time of a timer or the deadline of a `within` (`None`: beyond the end of logical time,
/// never).
///
/// 16 bytes (the time's `Option` unfolded into a flag beside the others, a repetition's count in
/// what would be padding): a matcher keeps its first [`INLINE_NODES`] states in place.
#[derive(Clone, Copy, Debug, Default)]
struct NodeState {
    started: bool,
    /// `Matched` or `Failed` once final.
    fin: Option<Outcome>,
    /// Whether `due` holds the time (else: never).
    timed: bool,
    /// The events a repetition has taken.
    count: u32,
    due: Time,
}

impl NodeState {
    fn time(&self) -> Option<Time> {
        self.timed.then_some(self.due)
    }

    fn set_time(&mut self, time: Option<Time>) {
        self.timed = time.is_some();
        self.due = time.unwrap_or_default();
    }
}

/// The definitions whose states a matcher holds in place, without a buffer of their own: the
/// everyday expressions (`a.then(b.then(c).within(d))` is six, `hb.then(not(hb).within(d))`
/// five). Stepping a matcher then reads its states from the lines of the matcher itself, one
/// dependent load fewer than a vector (`Matcher::step_node`'s first load was its hottest
/// instruction in `workload/fraud`).
const INLINE_NODES: usize = 6;

// The size the inline states are chosen for.
const _: () = assert!(std::mem::size_of::<NodeState>() == 16);

/// One match in progress: the state of every definition of the expression, indexed like the
/// definitions (a definition is started at most once per matcher: the right side of `then` only
/// once its left side matched, with its own start time), and the events its templates matched.
///
/// One flat vector instead of a tree of boxes: stepping a matcher reads a few consecutive lines
/// rather than one cold line per node, and a finished matcher's vectors are reused for the next
/// one ([`ExprListener`](super::ExprListener) keeps them), so starting a match allocates nothing in the steady state.
pub(crate) struct Matcher<E> {
    nodes: SmallVec<[NodeState; INLINE_NODES]>,
    /// `(definition, event)` of every template that matched, outside a `not`.
    got: Vec<(u32, E)>,
    /// Templates that matched, counting up (wrapping) through every part but a `not` (which puts
    /// it back after its inner part): a `within_from_first` whose inner part changed it has seen
    /// its first event.
    hits: u32,
    /// How many `not`s the step is inside: what a template matches there is not part of the
    /// match.
    negated: u32,
    /// For the event of the step in progress: bit `d` set if definition `d` (below
    /// [`ADMIT_BITS`]) is a template whose kind, key, fields and filters accept it (see
    /// [`admitted`]); its `given` conditions are asked by the matcher, which holds the match.
    admitted: u64,
    /// No part of the match reacts to the clock before this time: the earliest due time or
    /// bound of its timed parts still open, or earlier (it is lowered when a part sets a time and
    /// recomputed after a clock stimulus; [`Time`] at `u64::MAX` ns: none known). A clock
    /// stimulus before it leaves the match as it is ([`due_after`](Self::due_after)).
    next_due: Time,
}

/// [`Matcher::next_due`] when no part has a time.
pub(crate) const NO_DUE: Time = Time::from_nanos(u64::MAX);

/// The definitions an expression listener tests once per event for all its matches
/// ([`admitted`]): a template numbered from here on is tested whole by each matcher.
pub(crate) const ADMIT_BITS: usize = 64;

/// Which of the templates of `defs` (the first [`ADMIT_BITS`] definitions) accept `e` by kind,
/// key, fields and filters: bit `d` for definition `d`. `plan` is the program's
/// [`admits`](super::Prog::admits): each distinct template is tested once, here, not once per
/// match in progress; an event none accepts changes no matcher (only a template taking an event
/// does, for an event stimulus). A template of `keyed` (one bit per definition) is keyed by
/// `key`, its listener's, and has no key of its own.
#[inline]
pub(crate) fn admitted<E: Event>(
    defs: &[Def<E>],
    plan: &[(u32, u64)],
    keyed: u64,
    key: u64,
    e: &E,
) -> u64 {
    // The listener's key is asked once, for all the templates it keys (which have none of
    // their own, so each tests only its kind, fields and filter).
    if keyed != 0 && e.key() != Some(key) {
        return admitted_unkeyed(defs, plan, e) & !keyed;
    }
    admitted_unkeyed(defs, plan, e)
}

/// [`admitted`] by each template's own kind, key, fields and filters.
#[inline(always)]
fn admitted_unkeyed<E: Event>(defs: &[Def<E>], plan: &[(u32, u64)], e: &E) -> u64 {
    let mut bits = 0;
    for &(d, same) in plan {
        if let Some(Def::Leaf(t) | Def::Repeat(t, ..)) = defs.get(d as usize) {
            if t.admits(e) {
                bits |= same;
            }
        }
    }
    bits
}

/// The per-event test's plan for `defs` (see [`Prog::admits`](super::Prog::admits)): each
/// template among the first [`ADMIT_BITS`] definitions once, `(its definition, the bits of every
/// definition with the same test)`. Two templates have the same test when they are equal as data
/// (kind, key, fields) and their closures are the same closures that capture nothing, named by
/// their types (`idents`, by template number): `over()` three times in `a.then(b.then(c))`.
pub(crate) fn admit_plan<E: Event>(
    defs: &[Def<E>],
    labels: &Labels,
    idents: &[Ident],
) -> SmallVec<[(u32, u64); 4]> {
    let ident = |d: usize| {
        labels
            .ordinal(d)
            .and_then(|o| idents.get(o as usize))
            .filter(|i| !i.opaque())
    };
    let template = |d: usize| match defs.get(d) {
        Some(Def::Leaf(t) | Def::Repeat(t, ..)) => Some(t),
        _ => None,
    };
    let mut plan: SmallVec<[(u32, u64); 4]> = SmallVec::new();
    for d in 0..defs.len().min(ADMIT_BITS) {
        let Some(t) = template(d) else {
            continue;
        };
        // A template whose closures cannot be named is a test of its own.
        let shared = ident(d).and_then(|id| {
            plan.iter().position(|&(r, _)| {
                let r = r as usize;
                ident(r) == Some(id)
                    && template(r).is_some_and(|u| u.same_data(t) && u.key == t.key)
            })
        });
        match shared {
            Some(at) => plan[at].1 |= 1 << d,
            None => plan.push((d as u32, 1 << d)),
        }
    }
    plan
}

/// The states of a matcher just started, for an expression whose start sets no time: no timer,
/// no bound (`a.then(b.within(d))`, `hb.then(not(hb).within(d))`: the first part of everyday
/// rules is a template). Such a start is the same at every time, so it is worked out once per
/// program ([`Prog::start`](super::Prog::start)) and a match starts by copying it
/// ([`Matcher::restart_from`]) instead of walking the definitions. `armed` has bit `d` for each
/// template started with it: an event none of them admits leaves a match just started as it is.
pub(crate) struct StartImage {
    nodes: SmallVec<[NodeState; INLINE_NODES]>,
    pub(crate) armed: u64,
}

impl StartImage {
    /// The image of `defs` (their start table filled, [`fill_start`]), if their start sets no
    /// time, fails or satisfies nothing, and every template has a bit of the per-event test.
    pub(crate) fn of<E: Event>(defs: &[Def<E>], labels: &Labels) -> Option<Self> {
        if labels.odd_start || defs.is_empty() || defs.len() > ADMIT_BITS {
            return None;
        }
        let m = Matcher::start(defs, labels, Time::ZERO, &mut StepOut::new(Vec::new()));
        // Every timer or bound a start sets is the time of a state (and `next_due` is the least).
        if m.nodes.iter().any(|n| n.timed) {
            return None;
        }
        let armed = defs
            .iter()
            .enumerate()
            .filter(|&(d, def)| matches!(def, Def::Leaf(_) | Def::Repeat(..)) && m.nodes[d].started)
            .fold(0, |bits, (d, _)| bits | 1 << d);
        Some(Self {
            nodes: m.nodes,
            armed,
        })
    }
}

impl<E: Event> Matcher<E> {
    /// A matcher of `defs` with its root started at `now`.
    pub(crate) fn start(defs: &[Def<E>], labels: &Labels, now: Time, out: &mut StepOut) -> Self {
        let mut m = Matcher {
            nodes: SmallVec::new(),
            got: Vec::new(),
            hits: 0,
            negated: 0,
            admitted: 0,
            next_due: NO_DUE,
        };
        m.restart(defs, labels, now, out);
        m
    }

    /// Makes this matcher (a finished one, whose vectors are reused: nothing is allocated in
    /// the steady state) a new match of `defs` with its root started at `now`, in place.
    pub(crate) fn restart(
        &mut self,
        defs: &[Def<E>],
        labels: &Labels,
        now: Time,
        out: &mut StepOut,
    ) {
        self.hits = 0;
        self.next_due = NO_DUE;
        // A reused matcher has the expression's length already: its states are reset in place
        // (`SmallVec::resize` costs a call and a branch per state).
        if self.nodes.len() == defs.len() {
            self.nodes.fill(NodeState::default());
        } else {
            self.nodes.clear();
            self.nodes.resize(defs.len(), NodeState::default());
        }
        self.got.clear();
        self.start_node(defs, labels, defs.len() - 1, now, out);
    }

    /// A matcher of the program whose start is `image`, started (at any time: see
    /// [`StartImage`]).
    pub(crate) fn from_image(image: &StartImage) -> Self {
        Matcher {
            nodes: image.nodes.clone(),
            got: Vec::new(),
            hits: 0,
            negated: 0,
            admitted: 0,
            next_due: NO_DUE,
        }
    }

    /// Its state for a checkpoint, its events through `encode` (SPEC R11.10). Between steps
    /// only: no `not` is open and no event is being tested.
    #[cfg(feature = "checkpoint")]
    pub(crate) fn save(
        &self,
        encode: &mut dyn FnMut(&E, &mut Vec<u8>),
    ) -> super::saved::MatcherPart {
        debug_assert_eq!(self.negated, 0, "a matcher saved inside a step");
        super::saved::MatcherPart {
            nodes: self
                .nodes
                .iter()
                .map(|n| {
                    let fin = n.fin.map_or(0, |o| o.code() as u8 + 1);
                    (n.started, fin, n.timed, n.count, n.due.as_nanos())
                })
                .collect(),
            got: self
                .got
                .iter()
                .map(|(d, e)| {
                    let mut bytes = Vec::new();
                    encode(e, &mut bytes);
                    (*d, bytes)
                })
                .collect(),
            hits: self.hits,
            next_due: self.next_due.as_nanos(),
        }
    }

    /// The match `part` saved, for a program of `defs` (of the shape it was saved with); its
    /// events through `decode`. A part that does not fit `defs` is an error, never a panic.
    #[cfg(feature = "checkpoint")]
    pub(crate) fn restore(
        part: super::saved::MatcherPart,
        defs: usize,
        decode: &dyn Fn(&[u8]) -> Result<E, String>,
    ) -> Result<Self, String> {
        if part.nodes.len() != defs {
            return Err(format!(
                "a saved match has {} definitions, the expression {defs}",
                part.nodes.len()
            ));
        }
        let mut nodes = SmallVec::with_capacity(defs);
        for (started, fin, timed, count, due) in part.nodes {
            let fin = match fin {
                0 => None,
                c @ 1..=5 => Some(Outcome::from_code(u32::from(c) - 1)),
                c => return Err(format!("a saved match has an unknown outcome {c}")),
            };
            nodes.push(NodeState {
                started,
                fin,
                timed,
                count,
                due: Time::from_nanos(due),
            });
        }
        let mut got = Vec::with_capacity(part.got.len());
        for (d, bytes) in part.got {
            if d as usize >= defs {
                return Err(format!(
                    "a saved match's event is for definition {d} of {defs}"
                ));
            }
            got.push((d, decode(&bytes)?));
        }
        Ok(Matcher {
            nodes,
            got,
            hits: part.hits,
            negated: 0,
            admitted: 0,
            next_due: Time::from_nanos(part.next_due),
        })
    }

    /// [`restart`](Self::restart) for a program whose start is `image`: the same states, copied.
    pub(crate) fn restart_from(&mut self, image: &StartImage) {
        self.hits = 0;
        self.next_due = NO_DUE;
        if self.nodes.len() == image.nodes.len() {
            self.nodes.copy_from_slice(&image.nodes);
        } else {
            self.nodes.clear();
            self.nodes.extend_from_slice(&image.nodes);
        }
        self.got.clear();
    }

    /// Starts definition `d` (and what of its subtree starts with it) at `now`.
    fn start_node(
        &mut self,
        defs: &[Def<E>],
        labels: &Labels,
        d: usize,
        now: Time,
        out: &mut StepOut,
    ) {
        let mut time = None;
        match &defs[d] {
            Def::Leaf(_) | Def::Repeat(..) => {}
            Def::Wait(dur) => {
                time = now.checked_add(*dur);
                out.timers.extend(time);
            }
            Def::At(t) => {
                time = Some(*t);
                out.timers.push(*t);
            }
            // `within_from_first` sets no timer yet: its clock starts at its first event.
            Def::Not(a) | Def::WithinFirst(a, _) | Def::All(a) => {
                self.start_node(defs, labels, *a, now, out)
            }
            Def::Then(a, b) => {
                self.start_node(defs, labels, *a, now, out);
                // A left side satisfied from the start (`between(0, n)`) lets the right start.
                if labels.odd_start && self.status_now(labels, *a) == Outcome::Satisfied {
                    self.start_node(defs, labels, *b, now, out);
                }
            }
            Def::And(a, b) | Def::Or(a, b) => {
                self.start_node(defs, labels, *a, now, out);
                self.start_node(defs, labels, *b, now, out);
            }
            Def::Within(a, dur) => {
                time = now.checked_add(*dur);
                out.timers.extend(time);
                self.start_node(defs, labels, *a, now, out);
            }
        }
        let mut state = NodeState {
            started: true,
            ..NodeState::default()
        };
        state.set_time(time);
        self.lower_due(time);
        // A part that fails from its start (a `not` of a repetition satisfied at once) fails what
        // holds it from the start too, before any stimulus, so no sibling takes an event for it.
        let fails = labels.odd_start && self.status_now(labels, d) == Outcome::Failed;
        if fails {
            state.fin = Some(Outcome::Failed);
        }
        self.nodes[d] = state;
    }

    /// Steps the whole matcher with `stim` at logical time `now`; for an event, `admitted` says
    /// which templates accept it but for their `given` conditions ([`admitted`]).
    #[inline]
    pub(crate) fn step(
        &mut self,
        defs: &[Def<E>],
        labels: &Labels,
        stim: Stimulus<'_, E>,
        admitted: u64,
        now: Time,
        out: &mut StepOut,
    ) -> Outcome {
        self.negated = 0;
        self.admitted = admitted;
        let status = self.step_node(defs, labels, defs.len() - 1, stim, now, out);
        if let Stimulus::Time(_) = stim {
            self.recompute_due();
        }
        status
    }

    /// Notes that a part just set a timer or bound at `time` (`None`: never).
    #[inline(always)]
    fn lower_due(&mut self, time: Option<Time>) {
        if let Some(t) = time {
            self.next_due = self.next_due.min(t);
        }
    }

    /// Sets [`next_due`](Self::next_due) to the earliest time of the open timed parts.
    fn recompute_due(&mut self) {
        self.next_due = self
            .nodes
            .iter()
            .filter(|n| n.started && n.fin.is_none() && n.timed)
            .map(|n| n.due)
            .min()
            .unwrap_or(NO_DUE);
    }

    /// Whether a clock stimulus at `t` would leave the match as it is: no open part of it has
    /// a timer due or a bound that expires by `t` (only those react to the clock; every other
    /// part's outcome was settled by the step that last changed it).
    #[inline]
    pub(crate) fn due_after(&self, t: Time) -> bool {
        t < self.next_due
    }

    /// The time before which no part of the match reacts to the clock (see
    /// [`due_after`](Self::due_after)).
    #[inline]
    pub(crate) fn next_due(&self) -> Time {
        self.next_due
    }

    /// Whether template `t`, definition `d`, takes `e` in this match.
    #[inline(always)]
    fn takes(&self, t: &Template<E>, labels: &Labels, d: usize, e: &E) -> bool {
        if d < ADMIT_BITS {
            self.admitted >> d & 1 == 1 && t.given_holds(&Prior::new(&self.got, labels), e)
        } else {
            t.matches_after(&Prior::new(&self.got, labels), e)
        }
    }

    /// The outcome of definition `d` just started: [`peek`](Self::peek) without the walk, read
    /// from the table [`fill_start`] made when the expression was compiled.
    #[inline(always)]
    fn status_now(&self, labels: &Labels, d: usize) -> Outcome {
        Outcome::from_code(labels.start(d))
    }

    /// The outcome of started definition `d` as it stands, without a stimulus.
    fn peek(&self, defs: &[Def<E>], d: usize) -> Outcome {
        let node = &self.nodes[d];
        if let Some(s) = node.fin {
            return s;
        }
        match &defs[d] {
            Def::Leaf(_) | Def::Wait(_) | Def::At(_) => Outcome::Pending,
            &Def::Repeat(_, min, max) => repeat_status(node.count, min, max),
            &Def::Then(_, b) if self.nodes[b].started => self.peek(defs, b),
            Def::Then(..) => Outcome::Pending,
            &Def::And(a, b) => combine_and(self.peek(defs, a), self.peek(defs, b)),
            &Def::Or(a, b) => combine_or(self.peek(defs, a), self.peek(defs, b)),
            &Def::Not(a) => match self.peek(defs, a) {
                Outcome::Matched | Outcome::Satisfied => Outcome::Failed,
                _ => Outcome::Holding,
            },
            &Def::All(a) => self.peek(defs, a),
            // Before its bound, a holding part is pending (see `at_bound`).
            &Def::Within(a, _) | &Def::WithinFirst(a, _) => match self.peek(defs, a) {
                Outcome::Holding => Outcome::Pending,
                s => s,
            },
        }
    }

    /// Steps definition `d`.
    fn step_node(
        &mut self,
        defs: &[Def<E>],
        labels: &Labels,
        d: usize,
        stim: Stimulus<'_, E>,
        now: Time,
        out: &mut StepOut,
    ) -> Outcome {
        let node = self.nodes[d];
        if let Some(s) = node.fin {
            return s;
        }
        let status = match &defs[d] {
            Def::Leaf(t) => match stim {
                Stimulus::Event(e) if self.takes(t, labels, d, e) => {
                    if self.negated == 0 {
                        self.got.push((d as u32, e.clone()));
                    }
                    self.hits = self.hits.wrapping_add(1);
                    out.progressed = true;
                    Outcome::Matched
                }
                _ => Outcome::Pending,
            },
            &Def::Repeat(ref t, min, max) => {
                let mut count = node.count;
                if let Stimulus::Event(e) = stim {
                    if count < max && self.takes(t, labels, d, e) {
                        if self.negated == 0 {
                            self.got.push((d as u32, e.clone()));
                        }
                        self.hits = self.hits.wrapping_add(1);
                        out.progressed = true;
                        count += 1;
                        self.nodes[d].count = count;
                    }
                }
                repeat_status(count, min, max)
            }
            Def::Wait(_) | Def::At(_) => match stim {
                Stimulus::Time(t) if node.time().is_some_and(|due| t >= due) => {
                    out.progressed = true;
                    Outcome::Matched
                }
                _ => Outcome::Pending,
            },
            &Def::Then(a, b) => {
                if self.nodes[b].started {
                    // A satisfied left side (a greedy repetition) goes on taking the events it
                    // can, before the right side sees them; if it fails first, so does `then`.
                    if self.nodes[a].fin.is_some() {
                        self.step_node(defs, labels, b, stim, now, out)
                    } else {
                        let hits = self.hits;
                        if self.step_node(defs, labels, a, stim, now, out) == Outcome::Failed {
                            Outcome::Failed
                        } else if self.hits != hits {
                            self.peek(defs, b)
                        } else {
                            self.step_node(defs, labels, b, stim, now, out)
                        }
                    }
                } else {
                    match self.step_node(defs, labels, a, stim, now, out) {
                        Outcome::Matched | Outcome::Satisfied => {
                            // The right side starts now and does not see the stimulus that
                            // completed (or satisfied) the left side.
                            self.start_node(defs, labels, b, now, out);
                            self.status_now(labels, b)
                        }
                        Outcome::Failed => Outcome::Failed,
                        Outcome::Pending | Outcome::Holding => Outcome::Pending,
                    }
                }
            }
            &Def::And(a, b) => {
                let sa = self.step_node(defs, labels, a, stim, now, out);
                let sb = self.step_node(defs, labels, b, stim, now, out);
                combine_and(sa, sb)
            }
            &Def::Or(a, b) => {
                let sa = self.step_node(defs, labels, a, stim, now, out);
                let sb = self.step_node(defs, labels, b, stim, now, out);
                combine_or(sa, sb)
            }
            &Def::All(a) => {
                let s = self.step_node(defs, labels, a, stim, now, out);
                // Outside a `not`, a match of `x` asks for a copy that looks for the next one.
                if s == Outcome::Matched && self.negated == 0 {
                    out.alls.push(d as u32);
                }
                s
            }
            &Def::Not(a) => {
                // What matched inside a `not` starts no `within_from_first` clock above it.
                let hits = self.hits;
                self.negated += 1;
                let inner = self.step_node(defs, labels, a, stim, now, out);
                self.negated -= 1;
                self.hits = hits;
                match inner {
                    // Enough of a repetition is its happening.
                    Outcome::Matched | Outcome::Satisfied => {
                        out.progressed = true;
                        Outcome::Failed
                    }
                    _ => Outcome::Holding,
                }
            }
            &Def::Within(a, _) => {
                let s = self.step_node(defs, labels, a, stim, now, out);
                let expired = matches!((stim, node.time()), (Stimulus::Time(t), Some(d)) if t >= d);
                at_bound(s, expired, out)
            }
            &Def::WithinFirst(a, dur) => {
                let hits = self.hits;
                let s = self.step_node(defs, labels, a, stim, now, out);
                // Its first event starts the clock (once: a bound beyond the end of logical time
                // stays `None`, and so would every later try).
                // Also when that event completes the part: the copies `all` makes of the match
                // keep the clock (R7.8).
                if self.hits != hits && !node.timed && s != Outcome::Failed {
                    let bound = now.checked_add(dur);
                    self.nodes[d].set_time(bound);
                    out.timers.extend(bound);
                    self.lower_due(bound);
                }
                // Only a time stimulus expires it, and none starts its clock: `node.time` is the
                // bound as it was before this step.
                let expired = matches!((stim, node.time()), (Stimulus::Time(t), Some(b)) if t >= b);
                at_bound(s, expired, out)
            }
        };
        if matches!(status, Outcome::Matched | Outcome::Failed) {
            self.nodes[d].fin = Some(status);
        }
        status
    }

    /// Moves the events the templates matched into `out`, left to right (definitions are
    /// numbered children first, left before right, so their order is the expression's; a
    /// repetition's events in the order they came: the sort is stable), and the number of the
    /// template each matched into `templates`.
    pub(crate) fn collect(
        &mut self,
        labels: &Labels,
        out: &mut Vec<E>,
        templates: &mut impl Extend<u32>,
    ) {
        self.got.sort_by_key(|&(d, _)| d);
        templates.extend(
            self.got
                .iter()
                .map(|&(d, _)| labels.ordinal(d as usize).unwrap_or(u32::MAX)),
        );
        out.extend(self.got.drain(..).map(|(_, e)| e));
    }

    /// A copy of this matcher (as it is after a step) in which each `all` definition of `alls`
    /// starts again at `now` (R7.8): its part's states and events go, so do those of the right
    /// side of every `then` whose left side holds it (started by this match), and the
    /// definitions above it, which its match may have finished, are open again (each recomputes
    /// its outcome from its parts at the next step).
    pub(crate) fn copy_restarting(
        &self,
        defs: &[Def<E>],
        labels: &Labels,
        alls: &[u32],
        now: Time,
        out: &mut StepOut,
    ) -> Self {
        let mut m = Matcher {
            nodes: self.nodes.clone(),
            got: self.got.clone(),
            hits: self.hits,
            negated: 0,
            admitted: 0,
            // Worked out from the copy's own states below.
            next_due: NO_DUE,
        };
        for &d in alls {
            let (d, lo) = (d as usize, labels.lo(d as usize));
            m.got.retain(|&(g, _)| !(lo..=d).contains(&(g as usize)));
            for n in &mut m.nodes[lo..=d] {
                *n = NodeState::default();
            }
            for (up, def) in defs.iter().enumerate().skip(d + 1) {
                if labels.lo(up) > lo {
                    continue;
                }
                m.nodes[up].fin = None;
                // A `then` whose left side holds the `all` started its right side because of
                // this match: in the copy it has not started.
                if let &Def::Then(a, b) = def {
                    if d <= a {
                        let blo = labels.lo(b);
                        m.got.retain(|&(g, _)| !(blo..=b).contains(&(g as usize)));
                        for n in &mut m.nodes[blo..=b] {
                            *n = NodeState::default();
                        }
                    }
                }
            }
            m.start_node(defs, labels, d, now, out);
        }
        // Parts reopened above a restarted `all` may hold a bound the original had finished:
        // the copy's clock is worked out from its own states.
        m.recompute_due();
        m
    }

    /// Whether the matcher has matched any event (outside a `not`).
    pub(crate) fn has_events(&self) -> bool {
        !self.got.is_empty()
    }

    /// How many events it has matched (outside a `not`).
    pub(crate) fn events_held(&self) -> usize {
        self.got.len()
    }
}

/// The outcome of a repetition of `min..=max` that has taken `count` events: one whose bounds
/// admit no count (`min > max`, `max == 0`) never matches.
fn repeat_status(count: u32, min: u32, max: u32) -> Outcome {
    if min > max || max == 0 {
        Outcome::Pending
    } else if count == max {
        Outcome::Matched
    } else if count >= min {
        Outcome::Satisfied
    } else {
        Outcome::Pending
    }
}

/// The outcome of a bounded part (`within`, `within_from_first`) whose inner part stepped to `s`:
/// at the bound (`expired`) a holding or satisfied part matches and any other fails (R7.3, R7.6);
/// a failure there is a timeout (R7.7).
fn at_bound(s: Outcome, expired: bool, out: &mut StepOut) -> Outcome {
    match s {
        Outcome::Matched => Outcome::Matched,
        Outcome::Failed => Outcome::Failed,
        Outcome::Holding | Outcome::Satisfied if expired => {
            out.progressed = true;
            Outcome::Matched
        }
        _ if expired => {
            out.progressed = true;
            out.expired = true;
            Outcome::Failed
        }
        // A holding part is an absence established only at the bound: pending until then.
        Outcome::Holding => Outcome::Pending,
        other => other,
    }
}

/// `and`: fails if a side fails; matches once one side matched and the other matched, holds or is
/// satisfied; holds while both hold; is satisfied while both are satisfied or holding and one is
/// satisfied.
fn combine_and(a: Outcome, b: Outcome) -> Outcome {
    use Outcome::*;
    match (a, b) {
        (Failed, _) | (_, Failed) => Failed,
        (Matched, Matched | Holding | Satisfied) | (Holding | Satisfied, Matched) => Matched,
        (Holding, Holding) => Holding,
        (Satisfied, Satisfied | Holding) | (Holding, Satisfied) => Satisfied,
        _ => Pending,
    }
}

/// `or`: matches if a side matched; fails if both failed; is satisfied while a side is; a holding
/// side is only pending here (R7.3).
fn combine_or(a: Outcome, b: Outcome) -> Outcome {
    use Outcome::*;
    match (a, b) {
        (Matched, _) | (_, Matched) => Matched,
        (Failed, Failed) => Failed,
        (Satisfied, _) | (_, Satisfied) => Satisfied,
        _ => Pending,
    }
}
