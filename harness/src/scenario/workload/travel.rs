//! `workload/travel`, `workload/travel/twin`: a large card transaction followed by a card-present
//! one in another country, as one expression with a condition across its events (issue 33,
//! item 1).
//!
//! # The rule (the same on both sides)
//! `workload/fraud`'s rule 2 on fraud's data: a transaction over [`RULE2_AMOUNT`] followed, within
//! [`RULE2_WINDOW_MS`](super::fraud::RULE2_WINDOW_MS), by a card-present transaction of the card
//! in another country. The engine, one instance per card (`load_per_key`), one expression:
//! `when_all(large.named("large").then(present.given(|p, t| t.country !=
//! p.named("large").country).within(10 min)))`, `large` the card's transactions over the amount,
//! `present` its card-present ones. `when_all` starts a fresh match at every large transaction;
//! the right side starts once the large one matched, so it never sees the large transaction
//! itself; its `given` compares the candidate with the event the template named `large` matched
//! in the same match; `within` is counted from the large transaction and exclusive (under event
//! time a timer due at or before an event's stamp fires before that event). So for every large
//! transaction `a`: an alert `(2, card, a, x)` for the first later card-present transaction `x`
//! of the card in a country other than `a`'s, if `t(x) < t(a) + 10 min`: exactly fraud's rule 2,
//! which fraud writes as `on_all(large)` registering a nested `when` that captures the large
//! transaction's country. The twin is fraud's rule-2 twin (`fraud::Rule2`) alone.
//!
//! # The first event of a card
//! As in fraud: handed to the factory, kept, and routed from `on_load`.
//!
//! # The data
//! `workload/fraud`'s generator and sizes ([`super::fraud`]).

use super::common::{measure, Alert, Data, EngineFn, Expect, FastMap, Twin};
use super::fraud::{generate, sizes, Rule2, Tx, RULE2_AMOUNT};
use crate::scenario::{Outcome, RunCtx, Scenario};

/// Rule 2 by hand: a map from card to its pending watches (`fraud::Rule2`).
#[derive(Default)]
struct TravelTwin {
    cards: FastMap<u64, Rule2>,
}

impl Twin<Tx> for TravelTwin {
    #[inline]
    fn step(&mut self, tx: &Tx, alerts: &mut Vec<Alert>) {
        // A transaction neither large nor card-present can neither start nor complete a watch:
        // no lookup (the card's due watches are dropped at its next lookup instead).
        if !tx.present && tx.amount <= RULE2_AMOUNT {
            return;
        }
        let card = tx.card;
        self.cards.entry(card).or_default().step(tx, |first, last| {
            alerts.push(Alert {
                rule: 2,
                key: card,
                first,
                last,
            })
        });
    }

    fn end(&mut self, _end_ms: u64, _alerts: &mut Vec<Alert>) {}
}

/// Registers `workload/travel` and its twin.
pub fn register(v: &mut Vec<Scenario>, _cores: usize) {
    #[cfg(not(feature = "engine"))]
    v.push(crate::scenario::engine::absent("workload/travel".into(), 2));
    #[cfg(feature = "engine")]
    v.push(Scenario::new(
        "workload/travel",
        "fraud's rule 2 as one expression, when_all(large.named(\"large\") -> present.given(country != large's) within 10 min), one instance per card (load_per_key), event time, one context: events/s to completion, alerts equal to the twin's",
        2,
        crate::scenario::Family::Engine,
        |ctx| run(ctx, Some(&imp::run)),
    ));
    v.push(Scenario::new(
        "workload/travel/twin",
        "workload/travel by hand (fraud's rule-2 twin): a FastMap<card, pending large transactions> in one consumer thread, fed through an rtrb ring",
        2,
        crate::scenario::Family::Baseline,
        |ctx| run(ctx, None),
    ));
}

fn run(ctx: &RunCtx, engine: Option<EngineFn<'_, Tx>>) -> Outcome {
    let mut out = Outcome::default();
    let (cards, n) = sizes(ctx.mode);
    out.param("cards", cards as u64);
    let data: Data<Tx> = generate(cards, n);
    measure(
        &mut out,
        ctx,
        &data,
        TravelTwin::default,
        engine,
        Expect::Some,
    );
    out
}

#[cfg(feature = "engine")]
mod imp {
    use super::super::common::{engine, Timed};
    use super::super::fraud::{imp::TX, RULE2_WINDOW_MS};
    use super::*;
    use correlator::{Match, Monitor, Output, Pattern, Prior, Scope};
    use std::time::Duration;

    type Cx<'a, M> = Scope<'a, Tx, M>;

    /// One card's instance: the rule as one expression.
    struct Card {
        card: u64,
        /// The card's first transaction, handed to the factory (routed from `on_load`).
        first: Option<Tx>,
        alerts: Output<Alert>,
    }

    impl Monitor<Tx> for Card {
        fn on_load(&mut self, cx: &mut Cx<'_, Self>) {
            let tx = || Pattern::kind(TX).key(self.card);
            let large = tx().filter(|t: &Tx| t.amount > RULE2_AMOUNT).named("large");
            let abroad = tx()
                .filter(|t: &Tx| t.present)
                .given(|p: &Prior<'_, Tx>, t: &Tx| {
                    p.named("large").is_some_and(|a| t.country != a.country)
                });
            let window = Duration::from_millis(RULE2_WINDOW_MS);
            cx.when_all(
                large.then(abroad.within(window)),
                |m: &mut Self, cx: &mut Cx<'_, Self>, hit: &Match<Tx>| {
                    let a = Alert {
                        rule: 2,
                        key: m.card,
                        first: hit.events[0].id,
                        last: hit.events[1].id,
                    };
                    // A value not queued is counted (`output_drops` in the status).
                    let _queued = cx.emit_to(&m.alerts, a);
                },
            );
            if let Some(first) = self.first.take() {
                cx.route(first);
            }
        }
    }

    /// The instance of `card`, made from its first transaction (routed from `on_load`).
    fn factory(card: u64, first: &Tx, alerts: Output<Alert>) -> Card {
        Card {
            card,
            first: Some(*first),
            alerts,
        }
    }

    pub(super) fn run(ctx: &RunCtx, data: &Data<Tx>) -> Result<Timed, String> {
        let built = engine::build(ctx, 1)?;
        engine::run_keyed(ctx, data, built, [TX], factory)
    }

    #[cfg(test)]
    mod tests {
        use super::*;
        use crate::scenario::workload::fraud::imp::tx;

        #[test]
        fn r7_5_given_compares_with_the_named_large_one_and_never_sees_it() {
            let large = RULE2_AMOUNT + 1;
            let w = RULE2_WINDOW_MS;
            let events = vec![
                // Card 1 (its first event, handed to the factory): large in country 1 (online),
                // card-present at home, then abroad just inside the window: one alert, for the
                // first one abroad.
                tx(0, 1, 0, large, 1, false),
                // Card 2: large, then large and card-present abroad: the second completes the
                // first's match, never its own (the right side starts after the left).
                tx(1, 2, 1, large, 1, false),
                tx(2, 2, 2, large, 2, true),
                tx(3, 1, 10, 5, 1, true),
                tx(4, 1, w - 1, 5, 2, true),
                tx(5, 1, w - 1, 5, 3, true),
                // Card 3: card-present abroad exactly at the bound: too late. A large one that
                // is not RULE2_AMOUNT + 1 or more starts nothing.
                tx(6, 3, w, large, 1, false),
                tx(7, 3, w + 1, RULE2_AMOUNT, 1, false),
                tx(8, 3, 2 * w, 5, 2, true),
            ];
            let end = 2 * w;
            let (got, want) =
                engine::engine_and_twin(events, end, [TX], factory, TravelTwin::default());
            assert_eq!(got, want, "engine vs twin");
            let alert = |key, first, last| Alert {
                rule: 2,
                key,
                first,
                last,
            };
            assert_eq!(got, [alert(1, 0, 4), alert(2, 1, 2)]);
        }
    }
}
