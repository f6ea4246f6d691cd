//! `workload/spike`, `workload/spike/twin`: a price spike followed by a drop below it (issue 31).
//!
//! # The rule (the same on both sides)
//! A *spike* is a tick that moved the symbol's price up by at least [`SPIKE_BP`] basis points
//! (the feed carries each tick's move); a *drop* of that spike is a later tick of the symbol
//! that moved down by at least [`DROP_BP`] and whose price is below the spike's (a condition
//! across the two events). Alert `(symbol, spike, drop)` for the first drop of each spike
//! stamped before `t(spike) + `[`WINDOW_MS`] (exclusive). The engine, one instance per symbol
//! (`load_per_key`): `on_all(spike)` whose handler registers
//! `when(drop.filter(price < spike's).within(30 s))`, capturing the spike's price; a listener
//! registered during the spike never matches the spike itself (R6.5).
//!
//! # The data
//! Seeded: symbols (sparse ids) picked uniformly, time moves 0-1 ms per tick; 1 % of ticks are
//! spikes (+200..+500 bp), 2 % drops (-100..-400 bp), the rest move -50..+50 bp.

use super::common::{measure, mix, Alert, Data, EngineFn, Expect, FastMap, Rng, Twin, Watches};
use crate::scenario::{Outcome, RunCtx, Scenario};

/// A spike's move, at least, basis points.
pub const SPIKE_BP: i32 = 200;
/// A drop's move, at least (downwards), basis points.
pub const DROP_BP: i32 = 100;
/// The window from the spike (exclusive), ms.
pub const WINDOW_MS: u64 = 30_000;
/// The generator's seed.
const SEED: u64 = 0x5b1c_e000;

/// `(symbols, ticks)` per mode.
fn sizes(mode: crate::scenario::Mode) -> (u64, u64) {
    // About as long as workload/fraud on the engine: a spike costs the engine less per event.
    mode.pick((200, 20_000), (10_000, 2_000_000), (10_000, 2_000_000))
}

/// A tick.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Tick {
    /// Its number in the stream.
    pub id: u64,
    /// The symbol (the key).
    pub symbol: u64,
    /// Event time, ms.
    pub t_ms: u64,
    /// Price after the tick, in cents.
    pub price: u64,
    /// The move this tick made, basis points.
    pub move_bp: i32,
}

fn generate(symbols: u64, n: u64) -> Data<Tick> {
    let mut rng = Rng::new(SEED);
    let keys: Vec<u64> = (0..symbols).map(|i| mix(i ^ SEED)).collect();
    let mut prices: Vec<u64> = (0..symbols).map(|_| rng.range(10_000, 100_000)).collect();
    let mut t = 0;
    let events: Vec<Tick> = (0..n)
        .map(|id| {
            let s = rng.below(symbols) as usize;
            t += rng.below(2);
            let move_bp = match rng.below(1000) {
                0..=9 => rng.range(200, 500) as i32,
                10..=29 => -(rng.range(100, 400) as i32),
                _ => rng.range(0, 100) as i32 - 50,
            };
            let p = (prices[s] as i64 * (10_000 + i64::from(move_bp)) / 10_000).max(1) as u64;
            prices[s] = p;
            Tick {
                id,
                symbol: keys[s],
                t_ms: t,
                price: p,
                move_bp,
            }
        })
        .collect();
    Data {
        events: events.into(),
        end_ms: t,
    }
}

/// The rule by hand: per symbol, the spikes still inside their window, `(spike id, price)`.
#[derive(Default)]
struct SpikeTwin {
    symbols: FastMap<u64, Watches<(u64, u64)>>,
}

impl Twin<Tick> for SpikeTwin {
    #[inline]
    fn step(&mut self, tk: &Tick, alerts: &mut Vec<Alert>) {
        let spikes = self.symbols.entry(tk.symbol).or_default();
        let drop = tk.move_bp <= -DROP_BP;
        spikes.fire(
            tk.t_ms,
            |&(_, p)| drop && tk.price < p,
            |&(s, _)| {
                alerts.push(Alert {
                    rule: 0,
                    key: tk.symbol,
                    first: s,
                    last: tk.id,
                })
            },
        );
        if tk.move_bp >= SPIKE_BP {
            spikes.push(tk.t_ms + WINDOW_MS, (tk.id, tk.price));
        }
    }

    fn end(&mut self, _end_ms: u64, _alerts: &mut Vec<Alert>) {}
}

/// Registers `workload/spike` and its twin.
pub fn register(v: &mut Vec<Scenario>, _cores: usize) {
    #[cfg(not(feature = "engine"))]
    v.push(crate::scenario::engine::absent("workload/spike".into(), 2));
    #[cfg(feature = "engine")]
    v.push(Scenario::new(
        "workload/spike",
        "a spike then, within 30 s, a drop below the spike's price (on_all spike + nested when capturing the price), one instance per symbol (load_per_key), event time, one context: events/s to completion, alerts equal to the twin's",
        2,
        crate::scenario::Family::Engine,
        |ctx| run(ctx, Some(&imp::run)),
    ));
    v.push(Scenario::new(
        "workload/spike/twin",
        "workload/spike by hand: a FastMap<symbol, pending spikes> in one consumer thread, fed through an rtrb ring",
        2,
        crate::scenario::Family::Baseline,
        |ctx| run(ctx, None),
    ));
}

fn run(ctx: &RunCtx, engine: Option<EngineFn<'_, Tick>>) -> Outcome {
    let mut out = Outcome::default();
    let (symbols, n) = sizes(ctx.mode);
    out.param("symbols", symbols);
    let data = generate(symbols, n);
    measure(
        &mut out,
        ctx,
        &data,
        SpikeTwin::default,
        engine,
        Expect::Some,
    );
    out
}

#[cfg(feature = "engine")]
mod imp {
    use super::super::common::{engine, Timed};
    use super::*;
    use correlator::{Event, Match, Monitor, Output, Pattern, Scope, Time};
    use std::time::Duration;

    impl Event for Tick {
        type Kind = ();
        #[inline]
        fn kind(&self) {}
        #[inline]
        fn key(&self) -> Option<u64> {
            Some(self.symbol)
        }
        #[inline]
        fn time(&self) -> Option<Time> {
            Some(Time::from_millis(self.t_ms))
        }
    }

    type Cx<'a, M> = Scope<'a, Tick, M>;

    /// One symbol's instance.
    struct Symbol {
        symbol: u64,
        /// The first tick, handed to the factory (routed from `on_load`).
        first: Option<Tick>,
        alerts: Output<Alert>,
    }

    impl Monitor<Tick> for Symbol {
        fn on_load(&mut self, cx: &mut Cx<'_, Self>) {
            let spike = Pattern::kind(())
                .key(self.symbol)
                .filter(|t: &Tick| t.move_bp >= SPIKE_BP);
            cx.on_all(spike, |m: &mut Self, cx: &mut Cx<'_, Self>, s: &Tick| {
                let (from, price) = (s.id, s.price);
                let drop = Pattern::kind(())
                    .key(m.symbol)
                    .filter(move |t: &Tick| t.move_bp <= -DROP_BP && t.price < price);
                cx.when(
                    drop.within(Duration::from_millis(WINDOW_MS)),
                    move |m: &mut Self, cx: &mut Cx<'_, Self>, hit: &Match<Tick>| {
                        let a = Alert {
                            rule: 0,
                            key: m.symbol,
                            first: from,
                            last: hit.events[0].id,
                        };
                        // A value not queued is counted (`output_drops` in the status).
                        let _queued = cx.emit_to(&m.alerts, a);
                    },
                );
            });
            if let Some(first) = self.first.take() {
                cx.route(first);
            }
        }
    }

    /// The instance of `symbol`, made from its first event (routed from `on_load`).
    fn factory(symbol: u64, first: &Tick, alerts: Output<Alert>) -> Symbol {
        Symbol {
            symbol,
            first: Some(*first),
            alerts,
        }
    }

    pub(super) fn run(ctx: &RunCtx, data: &Data<Tick>) -> Result<Timed, String> {
        let built = engine::build(ctx, 1)?;
        engine::run_keyed(ctx, data, built, [()], factory)
    }
    #[cfg(test)]
    mod tests {
        use super::*;

        #[test]
        fn r6_5_a_spike_watches_for_the_first_drop_below_its_price_within_the_window() {
            let ticks = [
                // (t, price, move): a spike, a drop not below it, a small move below it, then
                // a drop below it: alert on the last one.
                (0, 1_000, SPIKE_BP),
                (1, 1_001, -DROP_BP),
                (2, 990, -10),
                (3, 980, -DROP_BP),
                // A second spike; the drop below it comes exactly at the bound: too late.
                (10, 2_000, SPIKE_BP + 1),
                (10 + WINDOW_MS, 1_000, -DROP_BP),
            ];
            let events: Vec<Tick> = ticks
                .iter()
                .enumerate()
                .map(|(id, &(t_ms, price, move_bp))| Tick {
                    id: id as u64,
                    symbol: 7,
                    t_ms,
                    price,
                    move_bp,
                })
                .collect();
            let (got, want) =
                engine::engine_and_twin(events, 0, [()], factory, SpikeTwin::default());
            assert_eq!(got, want, "engine vs twin");
            let one = Alert {
                rule: 0,
                key: 7,
                first: 0,
                last: 3,
            };
            assert_eq!(got, [one]);
        }
    }
}
