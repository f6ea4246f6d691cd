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
        Self::with_timeouts(e, all, false)
    }

    /// A listener that also reports timed-out matches (R7.7), logged as `T@time [...]`.
    fn with_timeouts(e: Expr<Ev>, all: bool, timeouts: bool) -> Self {
        let mut out = StepOut::new(Vec::new());
        let l = ExprListener::new(
            e,
            all,
            timeouts,
            Time::ZERO,
            &mut out,
            &mut Programs::default(),
        );
        Self {
            l,
            timers: out.timers,
            log: Vec::new(),
            alive: true,
        }
    }

    fn feed(&mut self, stim: Stimulus<'_, Ev>, now: Time) {
        let mut out = StepOut::new(Vec::new());
        let mut fired = Vec::new();
        let (_, alive) = self.l.step(stim, now, &mut out, &mut fired);
        self.alive = alive;
        self.timers.extend(out.timers);
        for f in fired {
            let vals: Vec<String> = f
                .hit
                .events
                .iter()
                .map(|e| format!("{}.{}", e.0, e.1))
                .collect();
            let t = if f.timed_out { "T" } else { "" };
            self.log.push(format!(
                "{t}@{} [{}]",
                f.hit.time.as_nanos(),
                vals.join(" ")
            ));
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
    let check = |e: Expr<Ev>| {
        let (prog, _, _) = e.compile();
        never_matches(&prog.defs, &prog.labels).map(|m| m.starts_with("this"))
    };
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
    let (lone, _, _) = not::<Ev>(p(3)).within_from_first(ten).compile();
    assert!(never_matches(&lone.defs, &lone.labels).is_some());
    let (fine, _, _) = p(1).then(not(p(3))).within_from_first(ten).compile();
    assert_eq!(never_matches(&fine.defs, &fine.labels), None);
}

#[test]
fn leaves_are_deduplicated() {
    let e = p(1).then(p(2)).or(p(1)).and(not(Pattern::kind(4).key(9)));
    let (prog, _, key) = e.compile();
    use crate::pattern::IndexKey::{Key, Plain};
    // The one key moved out of its template: the listener keeps it, and lists it under it.
    assert_eq!((prog.keyed, key), (1 << 5, Some(9)));
    assert_eq!(
        leaves(&prog.defs, prog.keyed, 9).as_slice(),
        [(1, Plain), (2, Plain), (4, Key(9))]
    );
}

/// The matches `l` fired for `events` (kind, value, time), as handed to the handler.
fn hits(e: Expr<Ev>, all: bool, events: &[(u32, u64, u64)]) -> Vec<Match<Ev>> {
    let mut out = StepOut::new(Vec::new());
    let mut l = ExprListener::new(
        e,
        all,
        false,
        Time::ZERO,
        &mut out,
        &mut Programs::default(),
    );
    let mut fired = Vec::new();
    for &(k, v, t) in events {
        let ev = Ev(k, v);
        l.step(
            Stimulus::Event(&ev),
            Time::from_nanos(t),
            &mut out,
            &mut fired,
        );
    }
    fired.into_iter().map(|f| f.hit).collect()
}

// R7.5: a `given` condition sees the events its match matched before it, by name and by
// position; each match in progress sees its own.
#[test]
fn r7_5_given_sees_the_events_of_its_own_match() {
    let later =
        || p(2).given(|pr, e: &Ev| pr.named("a").is_some_and(|a| e.1 > a.1) && pr.get(0).is_some());
    let mut r = Run::new(p(1).named("a").then(later()), false);
    r.ev(1, 5, 1);
    r.ev(2, 3, 2);
    r.ev(2, 7, 3);
    assert_eq!(r.log, ["@3 [1.5 2.7]"]);
    // Under when_all, the match started at 1.2 and the one started at 1.1 each see their own `a`.
    let same = p(2).given(|pr, e: &Ev| pr.named("a").is_some_and(|a| a.1 == e.1));
    let mut r = Run::new(p(1).named("a").then(same), true);
    r.ev(1, 1, 1);
    r.ev(1, 2, 2);
    r.ev(2, 2, 3);
    r.ev(2, 1, 4);
    assert_eq!(r.log, ["@3 [1.2 2.2]", "@4 [1.1 2.1]"]);
    // Nothing under a `not` is part of the match, so a later condition does not see it.
    let seen = p(2).given(|pr, _: &Ev| pr.len() == 1 && pr.last().is_some_and(|e| e.0 == 1));
    let mut r = Run::new(p(1).and(not(p(3).named("x"))).then(seen), false);
    r.ev(1, 1, 1);
    r.ev(2, 1, 2);
    assert_eq!(r.log, ["@2 [1.1 2.1]"]);
}

// R7.5: the handler finds events by template name and number, which stay right when an `or`
// leaves a template out.
#[test]
fn r7_5_a_match_names_its_events() {
    let e = p(1).named("a").or(p(2).named("b")).then(p(3).named("c"));
    let got = hits(e, false, &[(2, 7, 1), (3, 8, 2)]);
    assert_eq!(got.len(), 1);
    let m = &got[0];
    assert_eq!(m.named("a"), None);
    assert_eq!(m.named("b"), Some(&Ev(2, 7)));
    assert_eq!(m.named("c"), Some(&Ev(3, 8)));
    assert_eq!(
        m.get(2),
        Some(&Ev(3, 8)),
        "template 2 is `c`, though it is events[1]"
    );
    assert_eq!(m.get(0), None);
    assert_eq!(m.named("nope"), None);
    // Without names, only positions.
    let got = hits(p(1).then(p(2)), false, &[(1, 1, 1), (2, 2, 2)]);
    assert_eq!((got[0].get(1), got[0].named("a")), (Some(&Ev(2, 2)), None));
}

// R7.6: `times(n)` matches at the n-th event; events of other templates may come between.
#[test]
fn r7_6_times_matches_at_the_nth_event() {
    let mut r = Run::new(p(1).named("r").times(3).then(p(2)), false);
    r.ev(1, 1, 1);
    r.ev(3, 0, 2);
    r.ev(1, 2, 3);
    r.ev(2, 0, 4);
    r.ev(1, 3, 5);
    r.ev(1, 4, 6);
    r.ev(2, 5, 7);
    // The 2 at 4 came before the third 1: the right side had not started.
    assert_eq!(r.log, ["@7 [1.1 1.2 1.3 2.5]"]);
    let got = hits(p(1).named("r").times(2), false, &[(1, 1, 1), (1, 2, 2)]);
    let all: Vec<_> = got[0].all_named("r").collect();
    assert_eq!(all, [&Ev(1, 1), &Ev(1, 2)]);
}

// R7.6: `at_least` and `between` are greedy: satisfied from the minimum, they go on taking
// their events until the right side of their `then` matches (or, for `between`, the maximum).
#[test]
fn r7_6_greedy_repetitions_take_every_event_until_the_right_side() {
    let mut r = Run::new(p(1).at_least(2).then(p(2)), false);
    r.ev(1, 1, 1);
    r.ev(2, 0, 2);
    r.ev(1, 2, 3);
    r.ev(1, 3, 4);
    r.ev(2, 4, 5);
    assert_eq!(r.log, ["@5 [1.1 1.2 1.3 2.4]"]);
    let mut r = Run::new(p(1).between(2, 3).then(p(2)), false);
    for i in 1..=5 {
        r.ev(1, i, i);
    }
    r.ev(2, 6, 6);
    assert_eq!(r.log, ["@6 [1.1 1.2 1.3 2.6]"], "at most three 1s");
    // `between(0, n)`: optional, the right side is looked for at once.
    let mut r = Run::new(p(1).between(0, 2).then(p(2)), false);
    r.ev(2, 1, 1);
    assert_eq!(r.log, ["@1 [2.1]"]);
    // With `and`, the other side completes a satisfied repetition.
    let mut r = Run::new(p(1).at_least(2).and(p(2)), false);
    r.ev(1, 1, 1);
    r.ev(2, 2, 2);
    assert!(r.log.is_empty(), "one 1 is not enough");
    r.ev(1, 3, 3);
    assert_eq!(r.log, ["@3 [1.1 1.3 2.2]"]);
}

// R7.6: a satisfied repetition under `within` matches at the bound with all its events; one that
// is not satisfied fails there; a `not` of a repetition fails once it is satisfied.
#[test]
fn r7_6_a_repetition_at_the_bound_and_under_not() {
    let ten = Duration::from_nanos(10);
    let mut r = Run::new(p(1).at_least(2).within(ten), false);
    r.ev(1, 1, 1);
    r.ev(1, 2, 2);
    r.ev(1, 3, 3);
    r.tick(10);
    assert_eq!(r.log, ["@10 [1.1 1.2 1.3]"]);
    let mut r = Run::new(p(1).at_least(2).within(ten), false);
    r.ev(1, 1, 1);
    r.tick(10);
    assert!(r.log.is_empty() && !r.alive);
    // "A 5, unless two 1s came first."
    let mut r = Run::new(p(5).and(not(p(1).times(2))), false);
    r.ev(1, 1, 1);
    r.ev(1, 2, 2);
    r.ev(5, 3, 3);
    assert!(r.log.is_empty() && !r.alive);
    // A repeated template's condition sees the repetition's earlier events: rising values.
    let rising = p(1).given(|pr, e: &Ev| pr.last().is_none_or(|l| e.1 > l.1));
    let mut r = Run::new(rising.times(3), false);
    for (i, v) in [1, 3, 2, 4].into_iter().enumerate() {
        r.ev(1, v, i as u64);
    }
    assert_eq!(r.log, ["@3 [1.1 1.3 1.4]"]);
}

// R7.6: with `SkipPastLastEvent` a completed match drops the others in progress, and of matches
// completing on one event only the oldest fires; `NoSkip` lets them overlap.
#[test]
fn r7_6_after_match_policies() {
    let run = |after| {
        let mut r = Run::new(p(1).times(2).after_match(after), true);
        for i in 1..=5 {
            r.ev(1, i, i);
        }
        r.log
    };
    assert_eq!(
        run(AfterMatch::NoSkip),
        [
            "@2 [1.1 1.2]",
            "@3 [1.2 1.3]",
            "@4 [1.3 1.4]",
            "@5 [1.4 1.5]"
        ]
    );
    assert_eq!(
        run(AfterMatch::SkipPastLastEvent),
        ["@2 [1.1 1.2]", "@4 [1.3 1.4]"]
    );
    // Two matches completing on one event: both under NoSkip, the older under SkipPastLastEvent.
    let run = |after| {
        let mut r = Run::new(p(1).then(p(2)).after_match(after), true);
        r.ev(1, 1, 1);
        r.ev(1, 2, 2);
        r.ev(2, 3, 3);
        r.ev(1, 4, 4);
        r.ev(2, 5, 5);
        r.log
    };
    assert_eq!(
        run(AfterMatch::NoSkip),
        ["@3 [1.1 2.3]", "@3 [1.2 2.3]", "@5 [1.4 2.5]"]
    );
    assert_eq!(
        run(AfterMatch::SkipPastLastEvent),
        ["@3 [1.1 2.3]", "@5 [1.4 2.5]"]
    );
}

// R7.6: the registration check knows the repetitions that can never match.
#[test]
fn r7_6_never_matches_finds_impossible_and_unfinished_repetitions() {
    let ten = Duration::from_nanos(10);
    let check = |e: Expr<Ev>| {
        let (prog, _, _) = e.compile();
        never_matches(&prog.defs, &prog.labels).is_some()
    };
    assert!(check(p(1).times(0)));
    assert!(check(p(1).between(3, 2)));
    assert!(check(p(1).at_least(2)), "greedy on its own never completes");
    assert!(
        check(p(1).named("a").then(p(2).named("a"))),
        "one name twice"
    );
    assert!(!check(p(1).times(2)));
    assert!(!check(p(1).at_least(2).within(ten)));
    assert!(!check(p(1).at_least(2).then(p(2))));
    assert!(!check(p(1).at_least(2).and(p(2))));
}

// R7.7: a match that a bound fails after it matched an event times out, with those events, at
// the bound; the fresh match of `when_all` never does, a `not` failing is not a timeout, and the
// bound of `not(x).within(d)` is a match.
#[test]
fn r7_7_a_bound_that_fails_a_match_with_events_is_a_timeout() {
    let ten = Duration::from_nanos(10);
    let pair = || p(1).then(p(2)).within_from_first(ten);
    let mut r = Run::with_timeouts(pair(), true, true);
    r.ev(1, 1, 1);
    r.ev(1, 2, 5);
    r.ev(2, 3, 6);
    r.tick(11);
    r.tick(15);
    // 1.1 and 1.2 both matched 2.3; the fresh match started at 2.3's step saw nothing.
    assert_eq!(r.log, ["@6 [1.1 2.3]", "@6 [1.2 2.3]"]);
    let mut r = Run::with_timeouts(pair(), true, true);
    r.ev(1, 1, 1);
    r.ev(1, 2, 5);
    r.tick(11);
    r.tick(15);
    assert_eq!(r.log, ["T@11 [1.1]", "T@15 [1.2]"]);
    assert!(r.alive, "a repeating listener goes on");
    // Without a timeout handler nothing is reported.
    let mut r = Run::new(pair(), false);
    r.ev(1, 1, 1);
    r.tick(11);
    assert!(r.log.is_empty() && !r.alive);
    // `when`: the timeout is its end.
    let mut r = Run::with_timeouts(pair(), false, true);
    r.ev(1, 1, 1);
    r.tick(11);
    assert_eq!(r.log, ["T@11 [1.1]"]);
    assert!(!r.alive);
    // A `not` whose event came fails the match: no timeout.
    let guarded = p(1).then(p(2).and(not(p(3)))).within(ten);
    let mut r = Run::with_timeouts(guarded, false, true);
    r.ev(1, 1, 1);
    r.ev(3, 2, 2);
    r.tick(10);
    assert!(r.log.is_empty() && !r.alive);
    // Absence: the bound of `not(x).within(d)` is the match itself.
    let mut r = Run::with_timeouts(p(1).then(not(p(3)).within(ten)), false, true);
    r.ev(1, 1, 1);
    r.tick(11);
    assert_eq!(r.log, ["@11 [1.1]"]);
    // A repetition not yet satisfied at its bound times out with what it had.
    let mut r = Run::with_timeouts(p(1).times(3).within_from_first(ten), false, true);
    r.ev(1, 1, 1);
    r.ev(1, 2, 2);
    r.tick(11);
    assert_eq!(r.log, ["T@11 [1.1 1.2]"]);
}

/// Feeds the Apama documentation's events `C1 A1 F1 A2 C2 B1 D1 E1 B2 A3 G1 B3` (kinds A=1, B=2,
/// C=3, D=4, E=5, F=6, G=7; the value is the number) to a `when` listener on `e`.
fn apama(e: Expr<Ev>) -> Run {
    let mut r = Run::new(e, false);
    let seq = [
        (3, 1),
        (1, 1),
        (6, 1),
        (1, 2),
        (3, 2),
        (2, 1),
        (4, 1),
        (5, 1),
        (2, 2),
        (1, 3),
        (7, 1),
        (2, 3),
    ];
    for (t, (k, v)) in seq.into_iter().enumerate() {
        r.ev(k, v, t as u64);
    }
    r
}

// R7.8: the Apama documentation's own examples: `on all A() -> B()` matches {A1, B1}, {A2, B1}
// and {A3, B3}; `on A() -> all B()` matches {A1, B1}, {A1, B2} and {A1, B3} and never ends.
#[test]
fn r7_8_all_inside_expressions_follows_the_apama_examples() {
    let r = apama(all(p(1)).then(p(2)));
    assert_eq!(r.log, ["@5 [1.1 2.1]", "@5 [1.2 2.1]", "@11 [1.3 2.3]"]);
    assert!(r.alive, "a copy still looks for the next A");
    let r = apama(p(1).then(all(p(2))));
    assert_eq!(r.log, ["@5 [1.1 2.1]", "@8 [1.1 2.2]", "@11 [1.1 2.3]"]);
    assert!(r.alive, "the master listener never terminates");
    // `all` of a sequence starts the sequence again after each match: {A1, B1}, {A3, B3}.
    let r = apama(all(p(1).then(p(2))));
    assert_eq!(r.log, ["@5 [1.1 2.1]", "@11 [1.3 2.3]"]);
    // Without `all`, `when` fires once: {A1, B1}.
    let r = apama(p(1).then(p(2)));
    assert_eq!(r.log, ["@5 [1.1 2.1]"]);
    assert!(!r.alive);
}

// R7.8: with `and`, the other side stays matched in the copies; with `within`, the copies keep
// the bound's clock, and the listener ends at the bound; under `not`, `all` is its part.
#[test]
fn r7_8_all_with_and_within_and_not() {
    // A and all B: each B after the A (and the B before it) pairs with the A.
    let mut r = Run::new(p(1).and(all(p(2))), false);
    r.ev(2, 1, 1);
    r.ev(1, 1, 2);
    r.ev(2, 2, 3);
    r.ev(2, 3, 4);
    assert_eq!(r.log, ["@2 [1.1 2.1]", "@3 [1.1 2.2]", "@4 [1.1 2.3]"]);
    // A then every B, within 10 of the start.
    let ten = Duration::from_nanos(10);
    let mut r = Run::new(p(1).then(all(p(2))).within(ten), false);
    r.ev(1, 1, 1);
    r.ev(2, 1, 3);
    r.ev(2, 2, 6);
    r.tick(10);
    r.ev(2, 3, 12);
    assert_eq!(r.log, ["@3 [1.1 2.1]", "@6 [1.1 2.2]"]);
    assert!(!r.alive, "the bound ended the last copy");
    // A, unless B came first (twice or once: `all` under `not` is its part).
    let mut r = Run::new(p(1).and(not(all(p(2)))), false);
    r.ev(2, 1, 1);
    r.ev(1, 1, 2);
    assert!(r.log.is_empty() && !r.alive);
    // `all` of a `within` restarts its bound: every B within 5 of the previous one (or start).
    let five = Duration::from_nanos(5);
    let mut r = Run::new(all(p(2).within(five)), false);
    r.ev(2, 1, 3);
    r.ev(2, 2, 7);
    r.tick(12);
    r.ev(2, 3, 13);
    assert_eq!(r.log, ["@3 [2.1]", "@7 [2.2]"]);
    assert!(!r.alive, "no B within 5 of 7");
}

// R7.6: the after-match policy is the whole expression's, wherever a part set it.
#[test]
fn r7_6_a_part_sets_the_policy_of_the_whole() {
    let skip = AfterMatch::SkipPastLastEvent;
    let policy = |e: Expr<Ev>| e.compile().1;
    assert_eq!(policy(p(1).then(p(2).times(2).after_match(skip))), skip);
    assert_eq!(
        policy(
            p(1).times(2)
                .after_match(skip)
                .within(Duration::from_nanos(5))
        ),
        skip
    );
    assert_eq!(
        policy(not(Expr::from(p(1)).after_match(skip)).and(p(2))),
        skip
    );
    assert_eq!(policy(all(Expr::from(p(1)).after_match(skip))), skip);
    assert_eq!(policy(p(1).then(p(2))), AfterMatch::NoSkip);
}

/// R7.3 (the decision "Filters and the clock in a repeating listener"): a template's filter runs
/// once per event offered to the listener, however many matches are in progress, and an event
/// no template accepts steps no matcher; a clock stimulus before any bound leaves the matches as
/// they are. What fires is what the matches say, as before.
#[test]
fn r7_3_filters_run_once_per_event_whatever_the_matches_in_progress() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;
    let calls = Arc::new(AtomicUsize::new(0));
    let counted = |k: u32| {
        let calls = Arc::clone(&calls);
        p(k).filter(move |e: &Ev| {
            calls.fetch_add(1, Ordering::Relaxed);
            e.1 > 0
        })
    };
    // Every 1 starts a match; each waits for a 2 within 10.
    let mut r = Run::new(
        counted(1).then(counted(2).within(Duration::from_nanos(10))),
        true,
    );
    for t in 1..=4 {
        r.ev(1, 5, t);
    }
    assert_eq!(r.l.held().matches, 4, "four matches in progress");
    let before = calls.load(Ordering::Relaxed);
    // Declined (value 0): one call, of the kind-2 template's filter (the other is of kind 1),
    // not one per match waiting for it.
    r.ev(2, 0, 5);
    assert_eq!(calls.load(Ordering::Relaxed) - before, 1);
    assert!(r.log.is_empty());
    // A clock before every bound (the first is 1 + 10): nothing changes.
    r.tick(6);
    assert_eq!(r.l.held().matches, 4);
    // Accepted: still one call, and all four matches complete.
    let before = calls.load(Ordering::Relaxed);
    r.ev(2, 7, 7);
    assert_eq!(calls.load(Ordering::Relaxed) - before, 1);
    assert_eq!(
        r.log,
        [
            "@7 [1.5 2.7]",
            "@7 [1.5 2.7]",
            "@7 [1.5 2.7]",
            "@7 [1.5 2.7]"
        ]
    );
}

/// R7.3: an expression of more definitions than the listener tests at once (64) still matches
/// exactly: the templates past the first 64 definitions are tested by each match itself.
#[test]
fn r7_3_a_long_expression_tests_its_late_templates_in_each_match() {
    // 40 templates in a chain: 79 definitions.
    let mut e: Expr<Ev> = p(1).filter(|e: &Ev| e.1 > 0).into();
    for _ in 1..40 {
        e = e.then(p(1).filter(|e: &Ev| e.1 > 0));
    }
    let mut r = Run::new(e, false);
    assert!(r.l.defs().len() > 64);
    for t in 1..40 {
        r.ev(1, 1, t);
        r.ev(1, 0, t);
        r.ev(2, 1, t);
    }
    assert!(r.log.is_empty(), "39 of 40: no match yet");
    r.ev(1, 5, 40);
    assert_eq!(r.log.len(), 1);
    assert!(r.log[0].starts_with("@40 [1.1 1.1"), "{:?}", r.log);
    assert!(!r.alive, "a `when` ends at its match");
}

// R7.3 and the decision "Filters and the clock in an expression listener": an event offered to
// an expression listener is tested once against each distinct template of the expression.
// Templates equal as data (kind, key, fields) whose closures are one closure that captures
// nothing (named by its type) share the test; each definition still gets its own bit. A
// capturing closure cannot be told apart from another, so its template is tested on its own.
#[test]
fn r7_3_a_template_repeated_in_an_expression_is_tested_once_per_event() {
    use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
    static CALLS: AtomicUsize = AtomicUsize::new(0);
    fn big(e: &Ev) -> bool {
        CALLS.fetch_add(1, Relaxed);
        e.1 > 10
    }
    fn small(e: &Ev) -> bool {
        e.1 < 5
    }
    let over = || p(1).filter(big);
    let plan = |e: Expr<Ev>| e.compile().0.admits.to_vec();
    // Definitions are numbered children first: `a.then(b.then(c))` is a 0, b 1, c 2.
    assert_eq!(plan(over().then(over().then(over()))), [(0, 0b111)]);
    assert_eq!(plan(p(1).then(p(1))), [(0, 0b11)]);
    // p(1) is 0 and 3, p(2) is 1.
    assert_eq!(plan(p(1).then(p(2)).then(p(1))), [(0, 0b1001), (1, 0b10)]);
    // Different filters, a filter and none, capturing closures: one test each.
    assert_eq!(
        plan(p(1).filter(big).then(p(1).filter(small))),
        [(0, 1), (1, 2)]
    );
    assert_eq!(plan(p(1).filter(big).then(p(1))), [(0, 1), (1, 2)]);
    let x = 10;
    let capturing = || p(1).filter(move |e: &Ev| e.1 > x);
    assert_eq!(plan(capturing().then(capturing())), [(0, 1), (1, 2)]);

    // Offered an event, the listener runs the shared filter once and admits every definition.
    let r = Run::new(over().then(over().then(over())), true);
    CALLS.store(0, Relaxed);
    assert_eq!(r.l.admitted(&Ev(1, 20)), 0b111);
    assert_eq!(CALLS.load(Relaxed), 1);
    assert_eq!(r.l.admitted(&Ev(1, 3)), 0);
    assert_eq!(r.l.admitted(&Ev(2, 20)), 0);
}

// R7.3 ("Listening" in the expr docs: `when_all` starts a new match at every `a`), as kept in
// memory: where every match starts alike (the expression begins with a template), a `when_all`
// listener keeps no matcher for the fresh match while nothing has started one. It makes one for
// an event its first template admits, keeps it if the event changed it, and keeps the matcher
// as its spare (not as a match) when a `given` declined the event.
#[test]
fn r7_3_when_all_keeps_no_matcher_for_a_match_not_started() {
    let mut r = Run::new(p(1).then(p(2)), true);
    assert_eq!(r.l.matchers_kept(), 0, "registered: nothing started");
    r.ev(3, 1, 1);
    assert_eq!(
        r.l.matchers_kept(),
        0,
        "an event no template of the start admits"
    );
    r.ev(1, 1, 2);
    assert_eq!(r.l.matchers_kept(), 1, "a match started by 1.1");
    r.ev(2, 1, 3);
    assert_eq!(r.log, ["@3 [1.1 2.1]"]);
    assert_eq!(
        r.l.matchers_kept(),
        1,
        "the completed match kept as the spare"
    );

    let declined = p(1).given(|_: &crate::pattern::Prior<'_, Ev>, e: &Ev| e.1 > 5);
    let mut r = Run::new(declined.then(p(2)), true);
    r.ev(1, 1, 1);
    assert_eq!(
        r.l.matchers_kept(),
        1,
        "made for 1.1, declined, kept as the spare"
    );
    r.ev(2, 1, 2);
    assert!(r.log.is_empty(), "the declined 1.1 started no match");
    r.ev(1, 9, 3);
    r.ev(2, 2, 4);
    assert_eq!(r.log, ["@4 [1.9 2.2]"]);
}
