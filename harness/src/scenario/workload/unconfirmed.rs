//! `workload/unconfirmed`, `workload/unconfirmed/twin`: trades not confirmed in time, reported by
//! the handler of a timed-out partial match (issue 33, item 4).
//!
//! # The rule (the same on both sides)
//! A trade opens an order; a confirmation of the same order should follow within [`CONFIRM_MS`]
//! of the trade (exclusive). Alert `(4, order, trade's id, due time in ms)` for every order whose
//! confirmation has not come by `t(trade) + 5 s`. The engine, one instance per order
//! (`load_per_key` on the order id): `when_with_timeout(trade.then(confirm)
//! .within_from_first(5 s), on_match, on_timeout)`; the match that got its trade fails when the
//! clock reaches the bound (under event time a timer due at or before an event's stamp fires
//! before that event: a confirmation stamped exactly at the bound is late), and its `on_timeout`
//! gets the events matched so far (the trade) and the bound as its time; `on_match` does nothing.
//! The `when` listener ends either way and with it the instance (its only listener). A late
//! confirmation arrives after its order's instance ended: the pool makes a new instance from it,
//! which registers nothing (no trade to wait for) and ends after `on_load`. By hand: a
//! `FastMap<order, trade id>` of the open orders and a FIFO of due times (the window is the same
//! for every order and time never goes back, so due times arrive in order, as in
//! `workload/absence`'s twin); a due entry whose order is still open fires.
//!
//! # The first event of an order
//! Its trade, handed to the factory: the instance keeps it and routes it from `on_load` (as in
//! `workload/absence`).
//!
//! # End of stream
//! Once every event is sent the producer moves the clock to `end_ms` (`send_time`), 5 s after the
//! last trade: every planted timeout is due by then and fires, on both sides.
//!
//! # The data
//! Seeded: `orders` sparse order ids, one trade each, time moves 0-2 ms per trade; 96.5 % are
//! confirmed 5 ms to 4 s after their trade, 2 % never, 1.5 % late (5 to 8 s, 5 s itself
//! included). Sorted by time (stable), then numbered. The run must raise exactly one alert per
//! order not confirmed in time.

use super::common::{measure, mix, Alert, Data, EngineFn, Expect, FastMap, Rng, Twin};
use crate::scenario::{Outcome, RunCtx, Scenario};
use std::collections::VecDeque;

/// The confirmation's window from the trade (exclusive), ms.
pub const CONFIRM_MS: u64 = 5_000;
/// The generator's seed.
const SEED: u64 = 0xc0f1_4a7e;

/// Orders per mode (about twice as many events).
fn orders(mode: crate::scenario::Mode) -> u64 {
    mode.pick(5_000, 500_000, 500_000)
}

/// A trade or the confirmation of one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Leg {
    /// Its number in the stream.
    pub id: u64,
    /// The order (the key).
    pub order: u64,
    /// Event time, ms.
    pub t_ms: u64,
    /// A confirmation (else a trade).
    pub confirm: bool,
}

/// The stream and the number of orders not confirmed in time.
fn generate(n: u64) -> (Data<Leg>, usize) {
    let mut rng = Rng::new(SEED);
    let mut events = Vec::with_capacity(2 * n as usize);
    let (mut t, mut planted) = (0, 0);
    for k in 0..n {
        t += rng.below(3);
        let order = mix(k ^ SEED);
        let leg = |t_ms, confirm| Leg {
            id: 0,
            order,
            t_ms,
            confirm,
        };
        events.push(leg(t, false));
        let delay = match rng.below(1000) {
            0..=964 => Some(rng.range(5, 4_000)),
            965..=984 => None,
            _ => Some(rng.range(CONFIRM_MS, 8_000)),
        };
        match delay {
            Some(d) if d < CONFIRM_MS => events.push(leg(t + d, true)),
            Some(d) => {
                events.push(leg(t + d, true));
                planted += 1;
            }
            None => planted += 1,
        }
    }
    events.sort_by_key(|l| l.t_ms);
    for (id, l) in events.iter_mut().enumerate() {
        l.id = id as u64;
    }
    let data = Data {
        events: events.into(),
        end_ms: t + CONFIRM_MS,
    };
    (data, planted)
}

/// The rule by hand: the open orders' trades, and their due times in order (a FIFO is the
/// timer queue, as in `workload/absence`'s twin).
#[derive(Default)]
struct UnconfirmedTwin {
    open: FastMap<u64, u64>,
    due: VecDeque<(u64, u64)>,
}

impl UnconfirmedTwin {
    /// Fires every order due at or before `now` that is still open.
    #[inline]
    fn expire(&mut self, now: u64, alerts: &mut Vec<Alert>) {
        while let Some(&(due, order)) = self.due.front() {
            if due > now {
                break;
            }
            self.due.pop_front();
            if let Some(trade) = self.open.remove(&order) {
                alerts.push(Alert {
                    rule: 4,
                    key: order,
                    first: trade,
                    last: due,
                });
            }
        }
    }
}

impl Twin<Leg> for UnconfirmedTwin {
    #[inline]
    fn step(&mut self, l: &Leg, alerts: &mut Vec<Alert>) {
        self.expire(l.t_ms, alerts);
        if l.confirm {
            self.open.remove(&l.order);
        } else {
            self.open.insert(l.order, l.id);
            self.due.push_back((l.t_ms + CONFIRM_MS, l.order));
        }
    }

    fn end(&mut self, end_ms: u64, alerts: &mut Vec<Alert>) {
        self.expire(end_ms, alerts);
    }
}

/// Registers `workload/unconfirmed` and its twin.
pub fn register(v: &mut Vec<Scenario>, _cores: usize) {
    #[cfg(not(feature = "engine"))]
    v.push(crate::scenario::engine::absent(
        "workload/unconfirmed".into(),
        2,
    ));
    #[cfg(feature = "engine")]
    v.push(Scenario::new(
        "workload/unconfirmed",
        "trades not confirmed within 5 s, when_with_timeout(trade -> confirm within_from_first 5 s) per order (load_per_key), the alert from the timeout handler, 3.5 % of orders unconfirmed or late, event time, one context: events/s to completion, alerts equal to the twin's",
        2,
        crate::scenario::Family::Engine,
        |ctx| run(ctx, Some(&imp::run)),
    ));
    v.push(Scenario::new(
        "workload/unconfirmed/twin",
        "workload/unconfirmed by hand: a FastMap<order, trade> and a FIFO of due times in one consumer thread, fed through an rtrb ring",
        2,
        crate::scenario::Family::Baseline,
        |ctx| run(ctx, None),
    ));
}

fn run(ctx: &RunCtx, engine: Option<EngineFn<'_, Leg>>) -> Outcome {
    let mut out = Outcome::default();
    let n = orders(ctx.mode);
    out.param("orders", n);
    let (data, planted) = generate(n);
    out.param("unconfirmed_orders", planted as u64);
    let expect = Expect::Exactly(planted);
    measure(
        &mut out,
        ctx,
        &data,
        UnconfirmedTwin::default,
        engine,
        expect,
    );
    out
}

#[cfg(feature = "engine")]
mod imp {
    use super::super::common::{engine, Timed};
    use super::*;
    use correlator::{Event, Match, Monitor, Output, Pattern, Scope, Time};
    use std::time::Duration;

    /// The kind of a trade.
    const TRADE: bool = false;
    /// The kind of a confirmation.
    const CONFIRM: bool = true;

    impl Event for Leg {
        type Kind = bool;
        #[inline]
        fn kind(&self) -> bool {
            self.confirm
        }
        #[inline]
        fn key(&self) -> Option<u64> {
            Some(self.order)
        }
        #[inline]
        fn time(&self) -> Option<Time> {
            Some(Time::from_millis(self.t_ms))
        }
    }

    type Cx<'a, M> = Scope<'a, Leg, M>;

    /// One order's instance.
    struct Order {
        order: u64,
        /// The order's first event (its trade), handed to the factory (routed from `on_load`).
        first: Option<Leg>,
        alerts: Output<Alert>,
    }

    impl Monitor<Leg> for Order {
        fn on_load(&mut self, cx: &mut Cx<'_, Self>) {
            // A late confirmation, after its order's instance ended: nothing to wait for, so no
            // listener, and the instance ends after `on_load`.
            let Some(first) = self.first.take().filter(|l| !l.confirm) else {
                return;
            };
            let leg = |kind| Pattern::kind(kind).key(self.order);
            let window = Duration::from_millis(CONFIRM_MS);
            cx.when_with_timeout(
                leg(TRADE).then(leg(CONFIRM)).within_from_first(window),
                |_: &mut Self, _: &mut Cx<'_, Self>, _: &Match<Leg>| {},
                |m: &mut Self, cx: &mut Cx<'_, Self>, late: &Match<Leg>| {
                    let a = Alert {
                        rule: 4,
                        key: m.order,
                        first: late.events[0].id,
                        last: late.time.as_nanos() / 1_000_000,
                    };
                    // A value not queued is counted (`output_drops` in the status).
                    let _queued = cx.emit_to(&m.alerts, a);
                },
            );
            cx.route(first);
        }
    }

    /// The instance of `order`, made from its first event (routed from `on_load`).
    fn factory(order: u64, first: &Leg, alerts: Output<Alert>) -> Order {
        Order {
            order,
            first: Some(*first),
            alerts,
        }
    }

    pub(super) fn run(ctx: &RunCtx, data: &Data<Leg>) -> Result<Timed, String> {
        let built = engine::build(ctx, 1)?;
        engine::run_keyed(ctx, data, built, [TRADE, CONFIRM], factory)
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        #[test]
        fn r7_7_a_trade_not_confirmed_before_its_bound_times_out_with_the_trade() {
            let d = CONFIRM_MS;
            let legs = [
                (1, 0, false),
                (2, 1, false),
                (3, 2, false),
                (4, 10, false),
                (4, 20, true),
                // Order 1: confirmed 1 ms inside the window.
                (1, d - 1, true),
                // Order 2: confirmed exactly at the bound: late (the timeout fires first); the
                // late confirmation makes an instance that does nothing.
                (2, 1 + d, true),
                // Order 5: due after the end of the stream: no alert.
                (5, 5_900, false),
            ];
            let events: Vec<Leg> = legs
                .iter()
                .enumerate()
                .map(|(id, &(order, t_ms, confirm))| Leg {
                    id: id as u64,
                    order,
                    t_ms,
                    confirm,
                })
                .collect();
            // Order 3 is never confirmed: due at 2 + d, before the end.
            let end = 6_000;
            let (got, want) = engine::engine_and_twin(
                events,
                end,
                [TRADE, CONFIRM],
                factory,
                UnconfirmedTwin::default(),
            );
            assert_eq!(got, want, "engine vs twin");
            let alert = |key, first, last| Alert {
                rule: 4,
                key,
                first,
                last,
            };
            assert_eq!(got, [alert(2, 1, 1 + d), alert(3, 2, 2 + d)]);
        }
    }
}
