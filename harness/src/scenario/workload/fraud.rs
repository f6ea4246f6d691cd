//! `workload/fraud`, `workload/fraud/pool`, `workload/fraud/twin`, `alloc/workload`: card-fraud
//! rules over event time, one monitor instance per card (issue 31); `record/workload/fraud`:
//! `workload/fraud` recording its run (issue 35).
//!
//! # The rules (the same on both sides)
//! * **Rule 1**, three transactions over [`RULE1_AMOUNT`] on one card, the third within
//!   [`RULE1_WINDOW_MS`] of the first. The engine's idiom:
//!   `when_all(a.then(b.then(c).within(60 s)))`, `a`, `b`, `c` the card's transactions over the
//!   amount. `when_all` starts a fresh match at every such transaction, `b` and `c` are the next
//!   two, and `within` is counted from `a` and exclusive. So for every over-amount transaction
//!   `i` of a card: an alert `(card, i, i+2)` iff the card's second over-amount transaction after
//!   it is stamped before `t(i) + 60 s`.
//! * **Rule 2**, a transaction over [`RULE2_AMOUNT`] followed, within [`RULE2_WINDOW_MS`], by a
//!   card-present transaction of the card in another country. The engine: an `on_all` on the
//!   large transactions whose handler registers `when(present.filter(country != large's)
//!   .within(10 min))`, capturing the large one. A listener registered while an event is
//!   processed never matches it (R6.5), so the large transaction never completes its own watch.
//!   So for every large transaction `a`: an alert `(card, a, x)` for the first later card-present
//!   transaction `x` of the card in a country other than `a`'s, if `t(x) < t(a) + 10 min`.
//!
//! # The first event of a card
//! `load_per_key` hands a key's first event to the factory, not to the instance's listeners
//! (SPEC, Decisions: partitioned contexts). The monitor keeps it and routes it from `on_load`
//! (R3.1: it runs next, at the same event time, before anything else of the inbox), so that the
//! card's first transaction counts for both rules like any other; the twin simply processes it.
//!
//! # The data
//! Seeded: `cards` sparse card numbers, each with a home country; transactions pick a card
//! uniformly, time moves 0-2 ms per transaction (never back); 85 % of amounts are up to 1,000,
//! 12 % up to 5,000, 3 % up to 20,000; 2 % are abroad, half are card-present.

use super::common::{measure, Data, EngineFn, Expect, FastMap, Rng, Twin, Watches};
#[cfg(feature = "engine")]
use crate::scenario::engine::Journal;
#[cfg(feature = "engine")]
use crate::scenario::{Family, Mode};
use crate::scenario::{Outcome, RunCtx, Scenario};

/// Rule 1's amount: strictly over it.
pub const RULE1_AMOUNT: u32 = 1_000;
/// Rule 1's window, from the first transaction (exclusive).
pub const RULE1_WINDOW_MS: u64 = 60_000;
/// Rule 2's "large": strictly over it.
pub const RULE2_AMOUNT: u32 = 5_000;
/// Rule 2's window, from the large transaction (exclusive).
pub const RULE2_WINDOW_MS: u64 = 600_000;
/// The generator's seed.
const SEED: u64 = 0x0f4a_0d00_2031;

/// Cards and transactions per mode: `(cards, transactions)`.
pub(super) fn sizes(mode: crate::scenario::Mode) -> (usize, usize) {
    mode.pick((1_000, 20_000), (20_000, 1_000_000), (20_000, 1_000_000))
}

/// A card transaction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Tx {
    /// Its number in the stream (what alerts name).
    pub id: u64,
    /// The card (the key).
    pub card: u64,
    /// Event time, ms.
    pub t_ms: u64,
    /// Amount, whole units.
    pub amount: u32,
    /// Country code.
    pub country: u16,
    /// Card present (a terminal) or not (online).
    pub present: bool,
    /// `true` only for `alloc/workload`'s window markers.
    pub mark: bool,
}

/// The generated stream: `n` transactions over `cards` cards (also `workload/travel`'s).
pub(super) fn generate(cards: usize, n: usize) -> Data<Tx> {
    let mut rng = Rng::new(SEED);
    let keys: Vec<(u64, u16)> = (0..cards as u64)
        .map(|i| (super::common::mix(i ^ SEED), rng.below(40) as u16))
        .collect();
    let mut t = 0;
    let events: Vec<Tx> = (0..n as u64)
        .map(|id| {
            let (card, home) = keys[rng.below(cards as u64) as usize];
            t += rng.below(3);
            let amount = match rng.below(100) {
                0..=84 => rng.range(1, 1_000),
                85..=96 => rng.range(1_001, 5_000),
                _ => rng.range(5_001, 20_000),
            } as u32;
            let country = if rng.chance(20) {
                (home + 1 + rng.below(39) as u16) % 40
            } else {
                home
            };
            Tx {
                id,
                card,
                t_ms: t,
                amount,
                country,
                present: rng.chance(500),
                mark: false,
            }
        })
        .collect();
    Data {
        events: events.into(),
        end_ms: t,
    }
}

/// Rule 2 by hand, for one card: the pending watches of its large transactions, `(large tx id,
/// its country)`. Shared with `workload/travel`, the same rule as one expression.
#[derive(Default)]
pub(super) struct Rule2(Watches<(u64, u16)>);

impl Rule2 {
    /// Takes one of the card's transactions: the watches registered before it first (it may
    /// complete them: `alert(large id, tx id)`), then its own watch if it is large.
    #[inline]
    pub(super) fn step(&mut self, tx: &Tx, mut alert: impl FnMut(u64, u64)) {
        if tx.present {
            self.0.fire(
                tx.t_ms,
                |&(_, c)| c != tx.country,
                |&(a, _)| alert(a, tx.id),
            );
        } else {
            self.0.fire(tx.t_ms, |_| false, |_| {});
        }
        if tx.amount > RULE2_AMOUNT {
            self.0.push(tx.t_ms + RULE2_WINDOW_MS, (tx.id, tx.country));
        }
    }
}

/// One card's state in the twin.
#[derive(Default)]
struct Card {
    /// The last two transactions over [`RULE1_AMOUNT`], `(time, id)`, oldest first.
    over: [(u64, u64); 2],
    /// How many of `over` are set (0 to 2).
    seen: u8,
    /// Rule 2's pending watches.
    large: Rule2,
}

/// The two rules by hand: a map from card to [`Card`].
#[derive(Default)]
pub(super) struct FraudTwin {
    cards: FastMap<u64, Card>,
}

impl Twin<Tx> for FraudTwin {
    #[inline]
    fn step(&mut self, tx: &Tx, alerts: &mut Vec<super::common::Alert>) {
        let card = self.cards.entry(tx.card).or_default();
        let alert = |rule, first, last| super::common::Alert {
            rule,
            key: tx.card,
            first,
            last,
        };
        // Rule 2 (its watches see this transaction before it registers its own).
        card.large.step(tx, |a, x| alerts.push(alert(2, a, x)));
        if tx.amount > RULE1_AMOUNT {
            if card.seen == 2 && tx.t_ms < card.over[0].0 + RULE1_WINDOW_MS {
                alerts.push(alert(1, card.over[0].1, tx.id));
            }
            card.over = [card.over[1], (tx.t_ms, tx.id)];
            card.seen = (card.seen + 1).min(2);
        }
    }

    fn end(&mut self, _end_ms: u64, _alerts: &mut Vec<super::common::Alert>) {}
}

/// Registers `workload/fraud`, `workload/fraud/pool` (a pool of `cores` members), the twin,
/// and `alloc/workload`.
pub fn register(v: &mut Vec<Scenario>, cores: usize) {
    let members = cores.max(1);
    #[cfg(not(feature = "engine"))]
    {
        v.push(crate::scenario::engine::absent("workload/fraud".into(), 2));
        v.push(crate::scenario::engine::absent(
            "record/workload/fraud".into(),
            2,
        ));
        v.push(crate::scenario::engine::absent(
            "workload/fraud/pool".into(),
            members + 1,
        ));
    }
    #[cfg(feature = "engine")]
    {
        v.push(Scenario::new(
            "workload/fraud",
            "card fraud, 2 rules (when_all a->(b->c within 60 s); on_all large + nested when within 10 min), one instance per card (load_per_key), event time, one context, typed Block output: events/s to completion, alerts equal to the twin's",
            2,
            Family::Engine,
            |ctx| run(ctx, Some(&|c, d| imp::run(c, d, 1, &Journal::Off))),
        ));
        v.push(Scenario::new(
            "record/workload/fraud",
            "workload/fraud recording to a file (record_to(FileSink)) in the temporary directory, timed to completion (the file flushed and synced at shutdown)",
            2,
            Family::Engine,
            |ctx| {
                let journal = Journal::record("workload-fraud");
                let mut out = run(ctx, Some(&|c, d| imp::run(c, d, 1, &journal)));
                journal.verify(&mut out, sizes(ctx.mode).1 as u64);
                out
            },
        ));
        v.push(Scenario::new(
            "workload/fraud/pool",
            format!("workload/fraud on a pool of {members} contexts (PoolInput, one producer)"),
            members + 1,
            Family::Engine,
            move |ctx| {
                let mut out = run(ctx, Some(&|c, d| imp::run(c, d, members, &Journal::Off)));
                out.param("members", members as u64);
                out
            },
        ));
    }
    v.push(Scenario::new(
        "workload/fraud/twin",
        "workload/fraud's two rules by hand: a FastMap<card, state> in one consumer thread, fed through an rtrb ring by one producer",
        2,
        crate::scenario::Family::Baseline,
        |ctx| run(ctx, None),
    ));
    #[cfg(not(feature = "engine"))]
    v.push(crate::scenario::engine::absent("alloc/workload".into(), 2));
    #[cfg(feature = "engine")]
    v.push(Scenario::new(
        "alloc/workload",
        "allocations per non-matching transaction on workload/fraud in its steady state (every card's instance live)",
        2,
        Family::Engine,
        imp::alloc,
    ));
}

/// One run of `workload/fraud` (through `engine`, or a peer's run) or of its twin.
pub(super) fn run(ctx: &RunCtx, engine: Option<EngineFn<'_, Tx>>) -> Outcome {
    let mut out = Outcome::default();
    let (cards, n) = sizes(ctx.mode);
    out.param("cards", cards as u64);
    let data = generate(cards, n);
    measure(
        &mut out,
        ctx,
        &data,
        FraudTwin::default,
        engine,
        Expect::Some,
    );
    out
}

#[cfg(feature = "engine")]
pub(super) mod imp {
    use super::super::common::{engine, Alert, Timed};
    use super::*;
    use crate::alloc::{allocations, counting_installed};
    use correlator::{Event, Expr, Match, Monitor, Output, Pattern, Scope, Time};
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::Arc;
    use std::time::Duration;

    impl Event for Tx {
        type Kind = bool;
        #[inline]
        fn kind(&self) -> bool {
            self.mark
        }
        #[inline]
        fn key(&self) -> Option<u64> {
            Some(self.card)
        }
        #[inline]
        fn time(&self) -> Option<Time> {
            Some(Time::from_millis(self.t_ms))
        }
    }

    /// The kind of every transaction.
    pub(in crate::scenario::workload) const TX: bool = false;
    /// The kind of `alloc/workload`'s markers.
    const MARK: bool = true;

    type Cx<'a, M> = Scope<'a, Tx, M>;

    /// Rule 1 of `card`'s instance: three transactions over [`RULE1_AMOUNT`], the last two
    /// within [`RULE1_WINDOW_MS`] of the first (`when_all` starts one at every such transaction).
    pub(in crate::scenario::workload) fn rule1(card: u64) -> Expr<Tx> {
        let over = || {
            Pattern::kind(TX)
                .key(card)
                .filter(|t: &Tx| t.amount > RULE1_AMOUNT)
        };
        let within = Duration::from_millis(RULE1_WINDOW_MS);
        over().then(over().then(over()).within(within))
    }

    /// Rule 2's second transaction for `card` after a large one in `country`: card-present, in
    /// another country.
    pub(in crate::scenario::workload) fn abroad(card: u64, country: u16) -> Pattern<Tx> {
        Pattern::kind(TX)
            .key(card)
            .filter(move |t: &Tx| t.present && t.country != country)
    }

    /// One card's monitor instance: the two rules, as a user writes them.
    struct CardMonitor {
        card: u64,
        /// The card's first transaction, handed to the factory (routed from `on_load`).
        first: Option<Tx>,
        alerts: Output<Alert>,
    }

    impl CardMonitor {
        fn alert(&self, cx: &mut Cx<'_, Self>, rule: u8, first: u64, last: u64) {
            let a = Alert {
                rule,
                key: self.card,
                first,
                last,
            };
            // A value not queued is counted (`output_drops` in the status).
            let _queued = cx.emit_to(&self.alerts, a);
        }
    }

    impl Monitor<Tx> for CardMonitor {
        fn on_load(&mut self, cx: &mut Cx<'_, Self>) {
            cx.when_all(
                rule1(self.card),
                |m: &mut Self, cx: &mut Cx<'_, Self>, hit: &Match<Tx>| {
                    m.alert(cx, 1, hit.events[0].id, hit.events[2].id);
                },
            );
            let large = Pattern::kind(TX)
                .key(self.card)
                .filter(|t: &Tx| t.amount > RULE2_AMOUNT);
            cx.on_all(large, |m: &mut Self, cx: &mut Cx<'_, Self>, a: &Tx| {
                let from = a.id;
                cx.when(
                    abroad(m.card, a.country).within(Duration::from_millis(RULE2_WINDOW_MS)),
                    move |m: &mut Self, cx: &mut Cx<'_, Self>, hit: &Match<Tx>| {
                        m.alert(cx, 2, from, hit.events[0].id);
                    },
                );
            });
            if let Some(first) = self.first.take() {
                cx.route(first);
            }
        }
    }

    fn factory(card: u64, first: &Tx, alerts: Output<Alert>) -> CardMonitor {
        CardMonitor {
            card,
            first: Some(*first),
            alerts,
        }
    }

    /// The data set through a pool of `members`, the correlator recording to `journal`.
    pub(super) fn run(
        ctx: &RunCtx,
        data: &Data<Tx>,
        members: usize,
        journal: &Journal,
    ) -> Result<Timed, String> {
        engine::build_with(ctx, members, journal)
            .and_then(|b| engine::run_keyed(ctx, data, b, [TX], factory))
    }

    /// Non-matching transactions per `alloc/workload` window.
    fn window(mode: Mode) -> usize {
        mode.pick(20_000, 200_000, 1_000_000)
    }

    /// Reads the allocation counter at each marker (a non-keyed-kind event in the member).
    struct Marker {
        at: Arc<[AtomicU64; 2]>,
        next: usize,
    }

    impl Monitor<Tx> for Marker {
        fn on_load(&mut self, cx: &mut Cx<'_, Self>) {
            cx.on_all(
                Pattern::kind(MARK),
                |m: &mut Self, _cx: &mut Cx<'_, Self>, _e: &Tx| {
                    if let Some(slot) = m.at.get(m.next) {
                        slot.store(allocations(), Ordering::Relaxed);
                    }
                    m.next += 1;
                },
            );
        }
    }

    /// `alloc/workload`: the fraud stream (every card's instance created), then twice the window
    /// of transactions that match no template's filter (amount 1..=1000, online), the first half
    /// to settle, a marker, the second half, a marker. Allocations between the markers, over the
    /// window's events, are the figure; every thread's allocations count.
    pub(super) fn alloc(ctx: &RunCtx) -> Outcome {
        let mut out = Outcome::default();
        if !counting_installed() {
            out.fail("the counting global allocator is not installed in this process");
            return out;
        }
        let (cards, n) = sizes(ctx.mode);
        let w = window(ctx.mode);
        let base = generate(cards, n);
        let mut rng = Rng::new(SEED ^ 1);
        let mut events: Vec<Tx> = base.events.to_vec();
        let mut t = base.end_ms;
        let card_keys: Vec<u64> = {
            let mut k: Vec<u64> = events.iter().map(|e| e.card).collect();
            k.sort_unstable();
            k.dedup();
            k
        };
        let mut quiet = |id: u64, t: u64, mark: bool| Tx {
            id,
            card: card_keys[rng.below(card_keys.len() as u64) as usize],
            t_ms: t,
            amount: rng.range(1, u64::from(RULE1_AMOUNT)) as u32,
            country: 0,
            present: false,
            mark,
        };
        // The first quiet event jumps past every pending window, so that the timers of the
        // fraud stream all fire before the first marker.
        t += RULE2_WINDOW_MS + 1;
        for _ in 0..2 {
            for _ in 0..w {
                t += 1;
                let e = quiet(events.len() as u64, t, false);
                events.push(e);
            }
            let e = quiet(events.len() as u64, t, true);
            events.push(e);
        }
        let data = Data {
            events: events.into(),
            end_ms: t,
        };
        let at: Arc<[AtomicU64; 2]> = Arc::new([AtomicU64::new(0), AtomicU64::new(0)]);
        let run = engine::build(ctx, 1).and_then(|mut b| {
            let end = at.clone();
            b.settled = Some(Box::new(move || end[1].load(Ordering::Relaxed) != 0));
            // The marker shares the member with the cards (a pool of one: member 0).
            b.c.load_in(
                b.pool.members()[0],
                Marker {
                    at: at.clone(),
                    next: 0,
                },
            )
            .map_err(|e| format!("load marker: {e}"))?;
            engine::run_keyed(ctx, &data, b, [TX], factory)
        });
        out.param("cards", cards as u64);
        out.param("window_events", w as u64);
        match run {
            Err(e) => out.fail(e),
            Ok(r) => {
                for p in r.placed {
                    out.placed(p);
                }
                let (a0, a1) = (at[0].load(Ordering::Relaxed), at[1].load(Ordering::Relaxed));
                out.check(a0 > 0 && a1 >= a0, || {
                    "the window markers were not both seen".into()
                });
                let allocs = a1.saturating_sub(a0);
                out.param("allocations", allocs);
                out.value(
                    "allocs_per_event",
                    "allocs/event",
                    allocs as f64 / w as f64,
                    crate::record::Better::Lower,
                );
                if allocs > 0 {
                    out.note(format!(
                        "{allocs} allocations in {w} non-matching events: the 0-allocation target is not met on this path"
                    ));
                }
            }
        }
        out
    }
    /// A transaction for the rules' tests (fraud's and travel's).
    #[cfg(test)]
    pub(in crate::scenario::workload) fn tx(
        id: u64,
        card: u64,
        t_ms: u64,
        amount: u32,
        country: u16,
        present: bool,
    ) -> Tx {
        Tx {
            id,
            card,
            t_ms,
            amount,
            country,
            present,
            mark: false,
        }
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        /// Sorts by time (stable), numbers the events in that order, runs both sides.
        fn both(mut v: Vec<Tx>) -> (Vec<Alert>, Vec<Alert>) {
            v.sort_by_key(|t| t.t_ms);
            let ids: Vec<u64> = v.iter().map(|t| t.id).collect();
            assert!(
                ids.iter().enumerate().all(|(i, &id)| i as u64 == id),
                "ids in time order"
            );
            let end = v.last().map_or(0, |t| t.t_ms);
            engine::engine_and_twin(v, end, [TX], factory, FraudTwin::default())
        }

        fn alert(rule: u8, key: u64, first: u64, last: u64) -> Alert {
            Alert {
                rule,
                key,
                first,
                last,
            }
        }

        #[test]
        fn r7_2_rule1_is_counted_from_the_first_and_exclusive_and_starts_at_every_one() {
            let big = RULE1_AMOUNT + 1;
            let w = RULE1_WINDOW_MS;
            let (got, want) = both(vec![
                // Card 1: the third is 1 ms inside the window (and the first is the card's
                // first event, handed to the factory).
                tx(0, 1, 0, big, 0, false),
                tx(2, 1, 30_000, big, 0, false),
                tx(4, 1, w - 1, big, 0, false),
                // Card 2: the third is stamped exactly at the bound: too late.
                tx(1, 2, 1, big, 0, false),
                tx(3, 2, 30_001, big, 0, false),
                tx(5, 2, w + 1, big, 0, false),
                // Card 3: four in a row; amounts of exactly 1,000 do not count.
                tx(6, 3, w + 10, big, 0, false),
                tx(7, 3, w + 11, RULE1_AMOUNT, 0, false),
                tx(8, 3, w + 12, big, 0, false),
                tx(9, 3, w + 13, big, 0, false),
                tx(10, 3, w + 14, big, 0, false),
            ]);
            assert_eq!(got, want, "engine vs twin");
            assert_eq!(
                got,
                [alert(1, 1, 0, 4), alert(1, 3, 6, 9), alert(1, 3, 8, 10)]
            );
        }

        #[test]
        fn r6_5_rule2_never_matches_its_own_large_transaction_and_is_exclusive() {
            let large = RULE2_AMOUNT + 1;
            let w = RULE2_WINDOW_MS;
            let (got, want) = both(vec![
                // Card 1: large in country 1 (online), a card-present one at home, then one
                // abroad just inside the window: one alert, for the first one abroad.
                tx(0, 1, 0, large, 1, false),
                tx(3, 1, 10, 5, 1, true),
                tx(4, 1, w - 1, 5, 2, true),
                tx(5, 1, w - 1, 5, 3, true),
                // Card 2: large and card-present abroad itself: its own watch does not see it
                // (R6.5); the earlier large one's does.
                tx(1, 2, 1, large, 1, false),
                tx(2, 2, 2, large, 2, true),
                // Card 3: card-present abroad exactly at the bound: too late.
                tx(6, 3, w, large, 1, false),
                tx(7, 3, 2 * w, 5, 2, true),
            ]);
            assert_eq!(got, want, "engine vs twin");
            assert_eq!(got, [alert(2, 1, 0, 4), alert(2, 2, 1, 2)]);
        }
    }
}
