//! A reference model of the event-expression language (SPEC R7.2-R7.7), written from the SPEC and
//! the module docs alone, to be read rather than to be fast: the property tests (`proptests`)
//! check the engine's matcher and listener against it.
//!
//! An expression is a tree of [`Node`]s, each holding its own state; a match in progress
//! ([`RefMatch`]) is one such tree plus the events its templates took, and a listener
//! ([`RefListener`]) is `when` (one match) or `when_all` (matches in progress plus a fresh one).
//! Nothing is flattened, shared or reused. Times are plain nanoseconds.
//!
//! The semantics, rule by rule (each node's outcome is one of [`Out`]):
//! - a template (a repetition `min..=max`; a plain template is `1..=1`) takes every event of its
//!   kind that passes its filter and its `given` condition (which sees the events the match took
//!   before, oldest first) while it has room; it is `Satisfied` from `min` events, `Matched` at
//!   `max`. One whose bounds admit no count (`max == 0`, `min > max`) never matches: it takes
//!   events while it has room (`count < max`) and stays pending (R7.6);
//! - `wait(d)` matches when a clock stimulus at or after `start + d` comes, `at(t)` at or after
//!   `t` (R7.2); a node started while a stimulus is handled does not see that stimulus, so a timer
//!   already due fires at the next tick;
//! - `a.then(b)` starts `b` once `a` is satisfied or matched; while `a` is a satisfied
//!   repetition it sees each event first, and `b` sees only the events `a` did not take (R7.6);
//!   once `a` fails, `b` is not stepped (a match its left side's `not` fails is no timeout, even
//!   if a bound on its right side is reached on the same stimulus);
//! - `a.and(b)`: both sides see every stimulus; matched when one side matched and the other
//!   matched, holds or is satisfied;
//! - `a.or(b)`: matched when a side matched, satisfied when a side is; a holding side is
//!   merely pending; the match holds every event its templates took;
//! - `not(x)` holds until `x` is matched or satisfied, then fails; it counts as matched only
//!   inside `and` and at a bound (R7.3);
//! - `x.within(d)` and `x.within_from_first(d)` are matched when `x` is; before the bound a
//!   holding or satisfied `x` is passed on as such or read as pending ([`Reading`]); at the bound (the first
//!   clock stimulus at or after it, once `x`'s own timers due then fired) a holding or
//!   satisfied `x` matches, a pending one fails (the bound *expired*, R7.7); events at or after
//!   the bound are not offered to `x` (but see [`Reading`]). The bound of
//!   `within_from_first` starts at the first event a template of `x` outside a `not` takes (R7.4).
//!
//! - `all(x)` is `x`; when `x` matches (outside a `not`) the listener makes a copy of the match
//!   after the stimulus in which `x` starts again (its events dropped), the right side of a
//!   `then` whose left side holds it is not started, and the nodes above are open again (R7.8).
//!
//! A listener (R7.3, R7.6, R7.7, R7.8): `when` steps one match (and the copies `all` makes) and
//! ends when none is left: a match ends when it completes (it fires) or fails (a failure in a
//! step where a bound expired, with events, is a timeout when timeouts are asked for). `when_all` steps its matches oldest first, the fresh one last; a fresh match
//! that made progress (took an event, a timer or a bound fired) or completed is followed by a new
//! fresh one, started after the stimulus; a fresh one that failed is never replaced. Under
//! `SkipPastLastEvent` only the first match completing on a stimulus fires, and every other match
//! in progress is dropped for a new fresh one.

/// An event: (kind, value).
pub(super) type REv = (u32, u64);

/// A value filter of a template.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Filter {
    Odd,
    AtLeast(u64),
}

impl Filter {
    pub(super) fn holds(self, value: u64) -> bool {
        match self {
            Filter::Odd => value % 2 == 1,
            Filter::AtLeast(v) => value >= v,
        }
    }
}

/// A `given` condition (R7.5), from a small closed set; `Prior` means the events the match took
/// before, oldest first.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Cond {
    /// The template named so matched, and the value is greater than its value.
    GtNamed(&'static str),
    /// The template named so did not match, or the value is at least its value.
    GeNamedOrNone(&'static str),
    /// Nothing was matched, or the value equals the last event's.
    EqLast,
    /// Nothing was matched, or the value is greater than the last event's.
    GtLast,
    /// Template number `i` matched, and the value is at least its value.
    GePos(usize),
    /// At most `n` events were matched before.
    LenAtMost(usize),
}

/// The repetition of a template.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Rep {
    Once,
    Times(u32),
    AtLeast(u32),
    Between(u32, u32),
}

impl Rep {
    fn bounds(self) -> (u32, u32) {
        match self {
            Rep::Once => (1, 1),
            Rep::Times(n) => (n, n),
            Rep::AtLeast(n) => (n, u32::MAX),
            Rep::Between(a, b) => (a, b),
        }
    }
}

/// A template: kind, value filter, `given` condition, name, repetition.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Tpl {
    pub(super) kind: u32,
    pub(super) filter: Option<Filter>,
    pub(super) given: Option<Cond>,
    pub(super) name: Option<&'static str>,
    pub(super) rep: Rep,
}

/// An expression, as the property tests generate it; both the engine's `Expr` and the model's
/// tree are built from it. Durations and times are nanoseconds. Its `Debug` is the builder code
/// (`p(k)` for `Pattern::kind(k)`).
#[derive(Clone, PartialEq, Eq)]
pub(super) enum Desc {
    Tpl(Tpl),
    Wait(u64),
    At(u64),
    Then(Box<Desc>, Box<Desc>),
    And(Box<Desc>, Box<Desc>),
    Or(Box<Desc>, Box<Desc>),
    Not(Box<Desc>),
    Within(Box<Desc>, u64),
    WithinFirst(Box<Desc>, u64),
    All(Box<Desc>),
}

impl std::fmt::Debug for Desc {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Desc::Tpl(t) => {
                write!(f, "p({})", t.kind)?;
                match t.filter {
                    Some(Filter::Odd) => write!(f, ".filter(odd)")?,
                    Some(Filter::AtLeast(v)) => write!(f, ".filter(>={v})")?,
                    None => {}
                }
                if let Some(c) = t.given {
                    write!(f, ".given({c:?})")?;
                }
                if let Some(n) = t.name {
                    write!(f, ".named({n:?})")?;
                }
                match t.rep {
                    Rep::Once => Ok(()),
                    Rep::Times(n) => write!(f, ".times({n})"),
                    Rep::AtLeast(n) => write!(f, ".at_least({n})"),
                    Rep::Between(a, b) => write!(f, ".between({a}, {b})"),
                }
            }
            Desc::Wait(d) => write!(f, "wait({d})"),
            Desc::At(t) => write!(f, "at({t})"),
            Desc::Then(a, b) => write!(f, "{a:?}.then({b:?})"),
            Desc::And(a, b) => write!(f, "{a:?}.and({b:?})"),
            Desc::Or(a, b) => write!(f, "{a:?}.or({b:?})"),
            Desc::Not(a) => write!(f, "not({a:?})"),
            Desc::Within(a, d) => write!(f, "{a:?}.within({d})"),
            Desc::WithinFirst(a, d) => write!(f, "{a:?}.within_from_first({d})"),
            Desc::All(a) => write!(f, "all({a:?})"),
        }
    }
}

impl Desc {
    /// The templates, left to right (their numbers are their positions).
    pub(super) fn templates(&self) -> Vec<&Tpl> {
        let mut out = Vec::new();
        fn go<'a>(d: &'a Desc, out: &mut Vec<&'a Tpl>) {
            match d {
                Desc::Tpl(t) => out.push(t),
                Desc::Wait(_) | Desc::At(_) => {}
                Desc::Then(a, b) | Desc::And(a, b) | Desc::Or(a, b) => {
                    go(a, out);
                    go(b, out);
                }
                Desc::Not(a) | Desc::Within(a, _) | Desc::WithinFirst(a, _) | Desc::All(a) => {
                    go(a, out)
                }
            }
        }
        go(self, &mut out);
        out
    }
}

/// What a stimulus is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Stim {
    Event(REv),
    /// A timer due at this time fires.
    Time(u64),
}

/// The outcome of a node.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Out {
    Pending,
    Matched,
    Failed,
    /// A `not` that has not failed.
    Holding,
    /// A repetition with enough events that can take more.
    Satisfied,
}

impl Out {
    fn done(self) -> bool {
        matches!(self, Out::Matched | Out::Failed)
    }

    /// Counts as matched inside `and` once the other side matched, and at a bound.
    fn ok(self) -> bool {
        matches!(self, Out::Matched | Out::Holding | Out::Satisfied)
    }
}

/// How the model reads a point where the SPEC and the docs can be read two ways (the report of
/// the differential tests lists them; `proptests` uses the engine's reading, its `disputed` test
/// the other).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Reading {
    /// Whether a `within`/`within_from_first` whose part holds (a `not`) before its bound says
    /// so to its parent (so `not(x).within(d).and(b)` would match at `b`), rather than being
    /// pending until the bound, where it matches.
    pub(super) within_passes_holding: bool,
    /// Whether a `within`/`within_from_first` whose part is satisfied (a repetition) before its
    /// bound says so to its parent (so `a.at_least(1).within(d).then(b)` looks for `b` from the
    /// first `a`), rather than being pending until the bound.
    pub(super) within_passes_satisfied: bool,
    /// Whether an event taken at or after a bound that no clock stimulus has reached yet (only
    /// a bound already due when it was set can be: `within(0)`, `within_from_first(0)`, which
    /// fire at the next tick) is still offered to the part, rather than being too late for it
    /// (the bound is exclusive).
    pub(super) event_before_due_bound: bool,
    /// Whether a `within_from_first` whose part matches on its first event starts its clock
    /// all the same, rather than none; it shows in the copies an `all` inside it makes (R7.8),
    /// which keep the clocks of the bounds around the `all`.
    pub(super) clock_when_matched_at_once: bool,
}

/// What one stimulus did to a match, collected while its tree is stepped.
struct Cx<'a> {
    reading: Reading,
    now: u64,
    /// The events the match took so far (outside `not`), oldest first, with their template's
    /// number.
    got: &'a mut Vec<(usize, REv)>,
    names: &'a [Option<&'static str>],
    /// Events taken during this stimulus by templates under exactly `i` `not`s, at `[i]`.
    took_at_depth: Vec<usize>,
    /// Whether anything changed: an event taken, a timer fired, a bound reached.
    progressed: bool,
    /// Whether a bound expired and failed its part.
    expired: bool,
    /// Whether an `all` saw its part match: the listener makes a copy.
    all_matched: bool,
    /// Timers the started nodes ask for (due times).
    timers: Vec<u64>,
}

/// The model's node: what it is, and its state.
#[derive(Clone)]
struct Node {
    out: Out,
    started: bool,
    what: What,
}

#[derive(Clone)]
enum What {
    Tpl {
        number: usize,
        tpl: Tpl,
        under_not: bool,
        /// How many `not`s are above it.
        depth: usize,
        count: u32,
    },
    Wait {
        d: u64,
        due: Option<u64>,
    },
    At(u64),
    /// With how many `not`s are above it.
    Then(Box<Node>, Box<Node>, usize),
    And(Box<Node>, Box<Node>),
    Or(Box<Node>, Box<Node>),
    Not(Box<Node>),
    Within {
        inner: Box<Node>,
        d: u64,
        from_first: bool,
        /// `None`: not started yet (or beyond the end of time).
        bound: Option<u64>,
        /// Whether the bound has been set (for `within_from_first`, at the first event).
        clock_started: bool,
        /// How many `not`s are above it: a template with as many is "outside a `not`" of it.
        depth: usize,
    },
    /// `all(x)` (R7.8): `x`, and when `x` matches (outside a `not`), the listener makes a copy of
    /// the match in which `x` starts again.
    All {
        inner: Box<Node>,
        depth: usize,
        /// Whether `x` matched in this stimulus: the copy restarts it.
        copy: bool,
    },
}

impl Node {
    fn build(d: &Desc, next_number: &mut usize, depth: usize) -> Node {
        let under_not = depth > 0;
        let what = match d {
            Desc::Tpl(t) => {
                let number = *next_number;
                *next_number += 1;
                What::Tpl {
                    number,
                    tpl: t.clone(),
                    under_not,
                    depth,
                    count: 0,
                }
            }
            Desc::Wait(d) => What::Wait { d: *d, due: None },
            Desc::At(t) => What::At(*t),
            Desc::Then(a, b) => What::Then(
                Box::new(Node::build(a, next_number, depth)),
                Box::new(Node::build(b, next_number, depth)),
                depth,
            ),
            Desc::And(a, b) => What::And(
                Box::new(Node::build(a, next_number, depth)),
                Box::new(Node::build(b, next_number, depth)),
            ),
            Desc::Or(a, b) => What::Or(
                Box::new(Node::build(a, next_number, depth)),
                Box::new(Node::build(b, next_number, depth)),
            ),
            Desc::Not(a) => What::Not(Box::new(Node::build(a, next_number, depth + 1))),
            Desc::All(a) => What::All {
                inner: Box::new(Node::build(a, next_number, depth)),
                depth,
                copy: false,
            },
            Desc::Within(a, d) => What::Within {
                inner: Box::new(Node::build(a, next_number, depth)),
                d: *d,
                from_first: false,
                bound: None,
                clock_started: false,
                depth,
            },
            Desc::WithinFirst(a, d) => What::Within {
                inner: Box::new(Node::build(a, next_number, depth)),
                d: *d,
                from_first: true,
                bound: None,
                clock_started: false,
                depth,
            },
        };
        Node {
            out: Out::Pending,
            started: false,
            what,
        }
    }
}

impl Cond {
    /// Whether the condition holds for `value` after `prior` (the events the match took before,
    /// oldest first, with their template numbers), the templates named by `names`.
    fn holds(self, prior: &[(usize, REv)], names: &[Option<&'static str>], value: u64) -> bool {
        let get = |i: usize| prior.iter().find(|(n, _)| *n == i).map(|(_, e)| *e);
        let named = |name: &str| names.iter().position(|n| *n == Some(name)).and_then(get);
        let last = prior.last().map(|(_, e)| *e);
        match self {
            Cond::GtNamed(n) => named(n).is_some_and(|e| value > e.1),
            Cond::GeNamedOrNone(n) => named(n).is_none_or(|e| value >= e.1),
            Cond::EqLast => last.is_none_or(|e| value == e.1),
            Cond::GtLast => last.is_none_or(|e| value > e.1),
            Cond::GePos(i) => get(i).is_some_and(|e| value >= e.1),
            Cond::LenAtMost(n) => prior.len() <= n,
        }
    }
}

/// The outcome of a repetition `min..=max` with `count` events.
fn repetition(count: u32, min: u32, max: u32) -> Out {
    if max == 0 || min > max {
        Out::Pending
    } else if count == max {
        Out::Matched
    } else if count >= min {
        Out::Satisfied
    } else {
        Out::Pending
    }
}

impl Node {
    /// Starts the node at `cx.now`.
    fn start(&mut self, cx: &mut Cx<'_>) {
        self.started = true;
        match &mut self.what {
            What::Tpl { tpl, count, .. } => {
                let (min, max) = tpl.rep.bounds();
                self.out = repetition(*count, min, max);
            }
            What::Wait { d, due } => {
                *due = cx.now.checked_add(*d);
                cx.timers.extend(*due);
            }
            What::At(t) => cx.timers.push(*t),
            What::Then(a, b, _) => {
                a.start(cx);
                if matches!(a.out, Out::Satisfied | Out::Matched) {
                    b.start(cx);
                }
            }
            What::And(a, b) | What::Or(a, b) => {
                a.start(cx);
                b.start(cx);
            }
            What::Not(x) | What::All { inner: x, .. } => x.start(cx),
            What::Within {
                inner,
                d,
                from_first,
                bound,
                clock_started,
                ..
            } => {
                inner.start(cx);
                if !*from_first {
                    *clock_started = true;
                    *bound = cx.now.checked_add(*d);
                    cx.timers.extend(*bound);
                }
            }
        }
        self.settle(cx.reading);
    }

    /// Steps a started node that is not done with `stim`.
    fn step(&mut self, stim: Stim, cx: &mut Cx<'_>) {
        debug_assert!(self.started && !self.out.done());
        match &mut self.what {
            What::Tpl {
                number,
                tpl,
                under_not,
                depth,
                count,
            } => {
                let Stim::Event(e) = stim else { return };
                let (_, max) = tpl.rep.bounds();
                if *count >= max || e.0 != tpl.kind {
                    return;
                }
                if !tpl.filter.is_none_or(|f| f.holds(e.1))
                    || !tpl.given.is_none_or(|g| g.holds(cx.got, cx.names, e.1))
                {
                    return;
                }
                *count += 1;
                if cx.took_at_depth.len() <= *depth {
                    cx.took_at_depth.resize(*depth + 1, 0);
                }
                cx.took_at_depth[*depth] += 1;
                cx.progressed = true;
                if !*under_not {
                    cx.got.push((*number, e));
                }
            }
            What::Wait { due, .. } => {
                if let (Stim::Time(t), Some(due)) = (stim, *due) {
                    if due <= t {
                        cx.progressed = true;
                        self.out = Out::Matched;
                    }
                }
                return;
            }
            What::At(at) => {
                if let Stim::Time(t) = stim {
                    if *at <= t {
                        cx.progressed = true;
                        self.out = Out::Matched;
                    }
                }
                return;
            }
            What::Then(a, b, depth) => {
                let took = |cx: &Cx<'_>| cx.took_at_depth.get(*depth).copied().unwrap_or(0);
                let took_before = took(cx);
                if !a.out.done() {
                    a.step(stim, cx);
                }
                // Taken by a template of `a` outside a `not` (what a `not` in `a` sees is not
                // part of the match).
                let a_took = took(cx) > took_before;
                if a.out == Out::Failed {
                    // Failed by its left side: the right side has nothing more to do.
                } else if b.started {
                    // A satisfied left side sees each event first; the right side sees only what
                    // it did not take (R7.6).
                    if !b.out.done() && !a_took {
                        b.step(stim, cx);
                    } else if !b.out.done() {
                        // Not stepped, but open parts of it settle at this stimulus like every
                        // other (R7.8: a copy's reopened parts are worked out anew at its next
                        // stimulus, also when the left side takes it).
                        b.settle_open(cx.reading);
                    }
                } else if matches!(a.out, Out::Satisfied | Out::Matched) {
                    b.start(cx);
                }
            }
            What::And(a, b) | What::Or(a, b) => {
                if !a.out.done() {
                    a.step(stim, cx);
                }
                if !b.out.done() {
                    b.step(stim, cx);
                }
            }
            What::Not(x) => {
                if !x.out.done() {
                    x.step(stim, cx);
                }
            }
            What::All {
                inner, depth, copy, ..
            } => {
                inner.step(stim, cx);
                // Under a `not`, `all(x)` is `x`.
                if inner.out == Out::Matched && *depth == 0 {
                    *copy = true;
                    cx.all_matched = true;
                }
            }
            What::Within {
                inner,
                d,
                from_first,
                bound,
                clock_started,
                depth,
            } => {
                match (stim, *bound) {
                    (Stim::Time(t), Some(b)) if t >= b => {
                        // The bound: the part's own timers due then fire first; then a holding
                        // or satisfied part matches, a pending one expires.
                        inner.step(stim, cx);
                        cx.progressed = true;
                        if inner.out == Out::Failed {
                            // Failed by its part (a `not`), not by the bound: no timeout.
                            self.out = Out::Failed;
                        } else if inner.out.ok() {
                            self.out = Out::Matched;
                        } else {
                            self.out = Out::Failed;
                            cx.expired = true;
                        }
                        return;
                    }
                    // Exclusive: an event at or after the bound is too late for the part.
                    (Stim::Event(_), Some(b))
                        if cx.now >= b && !cx.reading.event_before_due_bound =>
                    {
                        return
                    }
                    _ => {}
                }
                let before = cx.took_at_depth.get(*depth).copied().unwrap_or(0);
                inner.step(stim, cx);
                let after = cx.took_at_depth.get(*depth).copied().unwrap_or(0);
                let at_once = inner.out == Out::Matched && !cx.reading.clock_when_matched_at_once;
                if *from_first && !*clock_started && after > before && !at_once {
                    *clock_started = true;
                    *bound = cx.now.checked_add(*d);
                    cx.timers.extend(*bound);
                }
            }
        }
        self.settle(cx.reading);
    }

    /// The numbers of the templates under this node.
    fn numbers(&self, out: &mut Vec<usize>) {
        match &self.what {
            What::Tpl { number, .. } => out.push(*number),
            What::Wait { .. } | What::At(_) => {}
            What::Then(a, b, _) | What::And(a, b) | What::Or(a, b) => {
                a.numbers(out);
                b.numbers(out);
            }
            What::Not(x) | What::Within { inner: x, .. } | What::All { inner: x, .. } => {
                x.numbers(out)
            }
        }
    }

    /// Back to not started, with nothing seen; the events its templates took leave `got`.
    fn reset(&mut self, got: &mut Vec<(usize, REv)>) {
        let mut numbers = Vec::new();
        self.numbers(&mut numbers);
        got.retain(|(n, _)| !numbers.contains(n));
        self.reset_state();
    }

    fn reset_state(&mut self) {
        self.out = Out::Pending;
        self.started = false;
        match &mut self.what {
            What::Tpl { count, .. } => *count = 0,
            What::Wait { due, .. } => *due = None,
            What::At(_) => {}
            What::Then(a, b, _) | What::And(a, b) | What::Or(a, b) => {
                a.reset_state();
                b.reset_state();
            }
            What::Not(x) => x.reset_state(),
            What::Within {
                inner,
                bound,
                clock_started,
                ..
            } => {
                *bound = None;
                *clock_started = false;
                inner.reset_state();
            }
            What::All { inner, copy, .. } => {
                *copy = false;
                inner.reset_state();
            }
        }
    }

    /// In the copy of a match that an `all` asked for (R7.8): starts the part of every `all` whose
    /// part matched in this stimulus again (its events leave the copy), resets the right side of a
    /// `then` whose left side holds such an `all` to not started, and reopens the nodes above
    /// (pending until the next stimulus settles them).
    /// Returns whether it restarted anything under this node.
    fn restart_alls(&mut self, cx: &mut Cx<'_>) -> bool {
        let restarted = match &mut self.what {
            What::Tpl { .. } | What::Wait { .. } | What::At(_) | What::Not(_) => false,
            What::All { inner, copy, .. } => {
                if std::mem::take(copy) {
                    inner.reset(cx.got);
                    inner.start(cx);
                    true
                } else {
                    inner.restart_alls(cx)
                }
            }
            What::Then(a, b, _) => {
                if a.restart_alls(cx) {
                    b.reset(cx.got);
                    true
                } else {
                    b.restart_alls(cx)
                }
            }
            What::And(a, b) | What::Or(a, b) => {
                let ra = a.restart_alls(cx);
                let rb = b.restart_alls(cx);
                ra || rb
            }
            What::Within { inner, .. } => inner.restart_alls(cx),
        };
        if restarted {
            // Open again: its outcome is worked out anew at the next stimulus (so an `or` whose
            // other side had matched completes again only then).
            self.out = Out::Pending;
        }
        restarted
    }

    /// Forgets which `all`s matched in this stimulus (the match itself goes on as it is).
    fn clear_copies(&mut self) {
        match &mut self.what {
            What::Tpl { .. } | What::Wait { .. } | What::At(_) => {}
            What::Then(a, b, _) | What::And(a, b) | What::Or(a, b) => {
                a.clear_copies();
                b.clear_copies();
            }
            What::Not(x) | What::Within { inner: x, .. } => x.clear_copies(),
            What::All { inner, copy, .. } => {
                *copy = false;
                inner.clear_copies();
            }
        }
    }

    /// Settles every open node of the subtree from its children's outcomes, without a stimulus
    /// (children first).
    fn settle_open(&mut self, reading: Reading) {
        if self.out.done() {
            return;
        }
        match &mut self.what {
            What::Tpl { .. } | What::Wait { .. } | What::At(_) => {}
            What::Then(a, b, _) => {
                a.settle_open(reading);
                if b.started {
                    b.settle_open(reading);
                }
            }
            What::And(a, b) | What::Or(a, b) => {
                a.settle_open(reading);
                b.settle_open(reading);
            }
            What::Not(x) | What::Within { inner: x, .. } | What::All { inner: x, .. } => {
                x.settle_open(reading)
            }
        }
        self.settle(reading);
    }

    /// Sets the node's outcome from its state and its children's.
    fn settle(&mut self, reading: Reading) {
        if self.out.done() {
            return;
        }
        self.out = match &self.what {
            What::Tpl { tpl, count, .. } => {
                let (min, max) = tpl.rep.bounds();
                repetition(*count, min, max)
            }
            What::Wait { .. } | What::At(_) => self.out,
            What::Then(a, b, _) => {
                if a.out == Out::Failed {
                    Out::Failed
                } else if !b.started {
                    Out::Pending
                } else {
                    b.out
                }
            }
            What::And(a, b) => {
                let (a, b) = (a.out, b.out);
                if a == Out::Failed || b == Out::Failed {
                    Out::Failed
                } else if (a == Out::Matched && b.ok()) || (b == Out::Matched && a.ok()) {
                    Out::Matched
                } else if a.ok() && b.ok() {
                    if a == Out::Satisfied || b == Out::Satisfied {
                        Out::Satisfied
                    } else {
                        Out::Holding
                    }
                } else {
                    Out::Pending
                }
            }
            What::Or(a, b) => {
                let (a, b) = (a.out, b.out);
                if a == Out::Matched || b == Out::Matched {
                    Out::Matched
                } else if a == Out::Failed && b == Out::Failed {
                    Out::Failed
                } else if a == Out::Satisfied || b == Out::Satisfied {
                    Out::Satisfied
                } else {
                    // A holding `not` is merely pending here (R7.3, "`not` is a guard").
                    Out::Pending
                }
            }
            What::Not(x) => match x.out {
                Out::Matched | Out::Satisfied => Out::Failed,
                _ => Out::Holding,
            },
            What::All { inner, .. } => inner.out,
            What::Within { inner, .. } => match inner.out {
                Out::Matched => Out::Matched,
                Out::Failed => Out::Failed,
                Out::Holding if reading.within_passes_holding => inner.out,
                Out::Satisfied if reading.within_passes_satisfied => inner.out,
                _ => Out::Pending,
            },
        };
    }
}

/// What a listener fired: a match or a timeout, at `time`, with its events in expression order,
/// and what `Match::get(i)` (for every template number and one past them) and `Match::named`
/// (for the names "a", "b", "c") return.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Fire {
    pub(super) timed_out: bool,
    pub(super) time: u64,
    pub(super) events: Vec<REv>,
    pub(super) gets: Vec<Option<REv>>,
    pub(super) named: Vec<Option<REv>>,
}

/// The names `Fire::named` asks for.
pub(super) const NAMES: [&str; 3] = ["a", "b", "c"];

/// One match in progress: the tree and the events its templates took.
#[derive(Clone)]
struct RefMatch {
    root: Node,
    got: Vec<(usize, REv)>,
}

/// What stepping a match did.
struct Stepped {
    out: Out,
    progressed: bool,
    expired: bool,
    all_matched: bool,
}

impl RefMatch {
    fn start(
        reading: Reading,
        desc: &Desc,
        names: &[Option<&'static str>],
        now: u64,
        timers: &mut Vec<u64>,
    ) -> Self {
        let mut root = Node::build(desc, &mut 0, 0);
        let mut got = Vec::new();
        let mut cx = Cx::new(reading, now, &mut got, names);
        root.start(&mut cx);
        timers.extend(cx.timers);
        RefMatch { root, got }
    }

    fn step(
        &mut self,
        reading: Reading,
        stim: Stim,
        now: u64,
        names: &[Option<&'static str>],
        timers: &mut Vec<u64>,
    ) -> Stepped {
        let mut cx = Cx::new(reading, now, &mut self.got, names);
        if !self.root.out.done() {
            self.root.step(stim, &mut cx);
        }
        timers.extend(cx.timers);
        Stepped {
            out: self.root.out,
            progressed: cx.progressed,
            expired: cx.expired,
            all_matched: cx.all_matched,
        }
    }

    /// The copy an `all` asks for (R7.8), made after the stimulus: the match as it is, with the
    /// parts of the `all`s that matched started again at `now`.
    fn copy_restarting(
        &mut self,
        reading: Reading,
        now: u64,
        names: &[Option<&'static str>],
        timers: &mut Vec<u64>,
    ) -> RefMatch {
        let mut copy = self.clone();
        self.root.clear_copies();
        let mut cx = Cx::new(reading, now, &mut copy.got, names);
        copy.root.restart_alls(&mut cx);
        timers.extend(cx.timers);
        copy
    }

    /// The match (or timeout) it hands the handler.
    fn fire(&self, timed_out: bool, time: u64, names: &[Option<&'static str>]) -> Fire {
        let mut in_order = self.got.clone();
        in_order.sort_by_key(|(n, _)| *n);
        let get = |i: usize| self.got.iter().find(|(n, _)| *n == i).map(|(_, e)| *e);
        Fire {
            timed_out,
            time,
            events: in_order.iter().map(|(_, e)| *e).collect(),
            gets: (0..=names.len()).map(get).collect(),
            named: NAMES
                .iter()
                .map(|name| names.iter().position(|n| n == &Some(*name)).and_then(get))
                .collect(),
        }
    }
}

impl<'a> Cx<'a> {
    fn new(
        reading: Reading,
        now: u64,
        got: &'a mut Vec<(usize, REv)>,
        names: &'a [Option<&'static str>],
    ) -> Self {
        Cx {
            reading,
            now,
            got,
            names,
            took_at_depth: Vec::new(),
            progressed: false,
            expired: false,
            all_matched: false,
            timers: Vec::new(),
        }
    }
}

/// A `when` (`all == false`) or `when_all` listener on an expression.
pub(super) struct RefListener {
    reading: Reading,
    desc: Desc,
    names: Vec<Option<&'static str>>,
    all: bool,
    timeouts: bool,
    skip_past_last: bool,
    /// Matches in progress, oldest first; under `when_all`, the last is the fresh one if `fresh`.
    matches: Vec<RefMatch>,
    fresh: bool,
}

impl RefListener {
    /// A listener registered at `now`; also returns the timers its first match asks for.
    pub(super) fn new(
        reading: Reading,
        desc: &Desc,
        all: bool,
        timeouts: bool,
        skip_past_last: bool,
        now: u64,
    ) -> (Self, Vec<u64>) {
        let names: Vec<_> = desc.templates().iter().map(|t| t.name).collect();
        let mut timers = Vec::new();
        let first = RefMatch::start(reading, desc, &names, now, &mut timers);
        let l = RefListener {
            reading,
            desc: desc.clone(),
            names,
            all,
            timeouts,
            skip_past_last,
            matches: vec![first],
            fresh: all,
        };
        (l, timers)
    }

    /// Steps the listener; returns what it fired, whether it is still alive, and the timers
    /// asked for.
    pub(super) fn step(&mut self, stim: Stim, now: u64) -> (Vec<Fire>, bool, Vec<u64>) {
        let mut fired = Vec::new();
        let mut timers = Vec::new();
        let mut completed = false;
        let mut start_fresh = false;
        let count = self.matches.len();
        let mut kept = Vec::new();
        // Copies asked for by `all` (R7.8): they join the matches after this stimulus.
        let mut copies = Vec::new();
        let mut fresh_kept = false;
        for (i, mut m) in std::mem::take(&mut self.matches).into_iter().enumerate() {
            let is_fresh = self.fresh && i + 1 == count;
            let r = m.step(self.reading, stim, now, &self.names, &mut timers);
            if r.all_matched {
                copies.push(m.copy_restarting(self.reading, now, &self.names, &mut timers));
            }
            match r.out {
                Out::Matched => {
                    if !(completed && self.skip_past_last) {
                        fired.push(m.fire(false, now, &self.names));
                    }
                    completed = true;
                    start_fresh |= is_fresh;
                }
                Out::Failed => {
                    if self.timeouts && r.expired && !m.got.is_empty() {
                        fired.push(m.fire(true, now, &self.names));
                    }
                    if is_fresh {
                        // The expression can no longer start a match.
                        self.fresh = false;
                    }
                }
                _ => {
                    start_fresh |= is_fresh && r.progressed;
                    fresh_kept = is_fresh;
                    kept.push(m);
                }
            }
        }
        if completed && self.skip_past_last {
            // Every other match in progress, and every copy, is dropped; a fresh one starts
            // after this stimulus.
            kept.clear();
            copies.clear();
            start_fresh = self.fresh;
        }
        // The copies go before the fresh match if it is still the fresh one.
        let at = kept.len() - usize::from(fresh_kept && !start_fresh);
        kept.splice(at..at, copies);
        self.matches = kept;
        if self.all && self.fresh && start_fresh {
            let fresh = RefMatch::start(self.reading, &self.desc, &self.names, now, &mut timers);
            self.matches.push(fresh);
        }
        let alive = !self.matches.is_empty();
        if !alive {
            timers.clear();
        }
        (fired, alive, timers)
    }
}
