//! Unit tests of event expressions: the combinators' outcomes step by step, `when` against
//! `when_all`, the bounds of `within` and `within_from_first`, the registration warnings.
//!
//! May import `event`, `pattern` and `time`.

use std::time::Duration;

use super::analysis::{leaves, never_matches};
use super::*;
use crate::event::Event;
use crate::pattern::Pattern;
use crate::time::Time;

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
