//! `workload/vwap`, `workload/vwap/twin`, `alloc/query`: per-symbol VWAP over a sliding 60 s window, emitted
//! every second (issue 34: stream queries).
//!
//! # The rule (the same on both sides, bit for bit)
//! Per symbol, the window holds the trades of the last [`WINDOW_US`]: a trade stamped `t` is in
//! it from `t` until `t + 60 s` exclusive. It keeps per trade the value `(price as f64, qty as
//! f64)` and the aggregate is the pair `(Σ price·qty, Σ qty)`, each a running `f64` sum: `sum +=
//! x` when a trade enters, `sum -= x` when it leaves, oldest first; `vwap = Σ price·qty / Σ qty`.
//! Every [`EVERY_US`] of event time (at `T` = 1 s, 2 s, ...), every symbol whose window is not
//! empty gives a row `(5, symbol, T in ms, vwap's f64 bits)`. The order of things at one stamp is
//! the engine's under event time (a timer due at or before an event's stamp fires first):
//! - a trade stamped `s` first removes its symbol's trades with `t + 60 s <= s`, then enters;
//! - at an emit time `T`, first every trade with `t + 60 s <= T` leaves (all symbols), then the
//!   non-empty windows are emitted; all this before a trade stamped exactly `T` enters;
//! - a window that becomes empty is dropped (the engine drops its partition): its sums start
//!   again from `0.0` at the symbol's next trade, so a rounding residue does not outlive it;
//! - the stream's clock stops at the last trade's stamp: emit times after it are not reached (one
//!   equal to it is, before that trade enters).
//!
//! The engine, one monitor instance on one context: `cx.query(Query::over(trade)
//! .partition_by(symbol).value((price, qty)).window(Window::sliding(60 s)).every(1 s)
//! .aggregate((Sum::of(p·q), Sum::of(q))), handler)`, the handler emitting each row. The twin:
//! a `FastMap<symbol, SymbolWindow>` (a `VecDeque` of `(t, p·q, q)` and the two sums) in one
//! consumer thread, fed through an `rtrb` ring; at each emit time it walks the map.
//!
//! # The data
//! Seeded: `symbols` sparse ids (`mix`) picked uniformly; prices (cents) walk by -50..+50 bp
//! per trade of the symbol from 100.00-1,000.00; quantities 1-1,000. Time moves 0 to
//! `2 · SPAN / n` µs per trade (uniform), so every mode's stream spans about [`SPAN_US`]
//! (100 s: 0-200 µs per trade for a million trades; smoke's 20,000 trades move 0-10 ms each, so
//! that smoke, too, sees windows slide and empty). Prices and quantities are integers, so every
//! product and every sum here is an integer below 2^53: the sums are exact, and the unit test
//! `the_twin_is_the_rule_by_definition_on_the_smoke_data` can check the twin against sums over
//! each window computed afresh.

use super::common::{measure, mix, Alert, Data, EngineFn, Expect, FastMap, Rng, Twin};
use crate::scenario::{Outcome, RunCtx, Scenario};
use std::collections::VecDeque;

/// The window (exclusive at its end), µs.
pub const WINDOW_US: u64 = 60_000_000;
/// The emit period, µs: rows at every multiple of it.
pub const EVERY_US: u64 = 1_000_000;
/// About how long every mode's stream lasts, µs.
pub const SPAN_US: u64 = 100_000_000;
/// The alerts' rule number for a VWAP row.
const RULE: u8 = 5;
/// The generator's seed.
const SEED: u64 = 0x7a4b_0060;

/// `(symbols, trades)` per mode.
fn sizes(mode: crate::scenario::Mode) -> (u64, u64) {
    mode.pick((200, 20_000), (5_000, 1_000_000), (5_000, 1_000_000))
}

/// A trade.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Trade {
    /// Its number in the stream.
    pub id: u64,
    /// The symbol (the partition key).
    pub symbol: u64,
    /// Event time, µs.
    pub t_us: u64,
    /// Price, cents.
    pub price: u64,
    /// Quantity.
    pub qty: u64,
    /// `true` only for `alloc/query`'s window markers (no query takes them).
    pub mark: bool,
}

impl Trade {
    /// What the window keeps of the trade: `(price, qty)` as `f64` (the engine's `value`).
    #[inline]
    pub fn value(&self) -> (f64, f64) {
        (self.price as f64, self.qty as f64)
    }
}

/// One VWAP row as both sides report it: `(5, symbol, emit time in ms, vwap's bits)`.
fn row(symbol: u64, at_us: u64, vwap: f64) -> Alert {
    Alert {
        rule: RULE,
        key: symbol,
        first: at_us / 1_000,
        last: vwap.to_bits(),
    }
}

/// The stream of `n` trades over `symbols` symbols.
fn generate(symbols: u64, n: u64) -> Data<Trade> {
    let mut rng = Rng::new(SEED);
    let keys: Vec<u64> = (0..symbols).map(|i| mix(i ^ SEED)).collect();
    let mut prices: Vec<u64> = (0..symbols).map(|_| rng.range(10_000, 100_000)).collect();
    let step = 2 * SPAN_US / n.max(1);
    let mut t = 0;
    let events: Vec<Trade> = (0..n)
        .map(|id| {
            let s = rng.below(symbols) as usize;
            t += rng.below(step + 1);
            let move_bp = rng.range(0, 100) as i64 - 50;
            let p = (prices[s] as i64 * (10_000 + move_bp) / 10_000).max(1) as u64;
            prices[s] = p;
            Trade {
                id,
                symbol: keys[s],
                t_us: t,
                price: p,
                qty: rng.range(1, 1_000),
                mark: false,
            }
        })
        .collect();
    Data {
        events: events.into(),
        // Not used: the clock stops at the last trade (no emit after it).
        end_ms: t / 1_000,
    }
}

/// How many emit times the stream reaches: the multiples of [`EVERY_US`] in `1..=last stamp`.
fn emit_times(data: &Data<Trade>) -> u64 {
    data.events.last().map_or(0, |tr| tr.t_us / EVERY_US)
}

/// One symbol's window in the twin: its trades `(t, p·q, q)`, oldest first, and the running sums.
#[derive(Default)]
struct SymbolWindow {
    trades: VecDeque<(u64, f64, f64)>,
    sum_pq: f64,
    sum_q: f64,
}

impl SymbolWindow {
    /// The trades whose window has ended by `now` leave, oldest first; an emptied window starts
    /// again from `0.0` (the engine drops the partition).
    #[inline]
    fn expire(&mut self, now: u64) {
        while let Some(&(t, pq, q)) = self.trades.front() {
            if t + WINDOW_US > now {
                return;
            }
            self.trades.pop_front();
            self.sum_pq -= pq;
            self.sum_q -= q;
        }
        self.sum_pq = 0.0;
        self.sum_q = 0.0;
    }

    /// `tr` enters.
    #[inline]
    fn push(&mut self, tr: &Trade) {
        let (p, q) = tr.value();
        let pq = p * q;
        self.trades.push_back((tr.t_us, pq, q));
        self.sum_pq += pq;
        self.sum_q += q;
    }
}

/// The rule by hand: a map from symbol to its window, and the next emit time.
struct VwapTwin {
    symbols: FastMap<u64, SymbolWindow>,
    /// The next multiple of [`EVERY_US`] to emit at.
    next_emit: u64,
}

impl Default for VwapTwin {
    fn default() -> Self {
        VwapTwin {
            symbols: FastMap::default(),
            next_emit: EVERY_US,
        }
    }
}

impl VwapTwin {
    /// The emit time `at`: the ended trades leave every window, then each non-empty one gives
    /// its row.
    fn emit(&mut self, at: u64, alerts: &mut Vec<Alert>) {
        for (&symbol, w) in self.symbols.iter_mut() {
            w.expire(at);
            if !w.trades.is_empty() {
                alerts.push(row(symbol, at, w.sum_pq / w.sum_q));
            }
        }
    }
}

impl Twin<Trade> for VwapTwin {
    #[inline]
    fn step(&mut self, tr: &Trade, alerts: &mut Vec<Alert>) {
        // The emit times up to this stamp come first (one at the stamp itself included).
        while self.next_emit <= tr.t_us {
            let at = self.next_emit;
            self.emit(at, alerts);
            self.next_emit += EVERY_US;
        }
        let w = self.symbols.entry(tr.symbol).or_default();
        w.expire(tr.t_us);
        w.push(tr);
    }

    /// The clock stops at the last trade: nothing more is emitted.
    fn end(&mut self, _end_ms: u64, _alerts: &mut Vec<Alert>) {}
}

/// Registers `workload/vwap` and its twin.
pub fn register(v: &mut Vec<Scenario>, _cores: usize) {
    #[cfg(not(feature = "engine"))]
    v.push(crate::scenario::engine::absent("workload/vwap".into(), 2));
    #[cfg(feature = "engine")]
    v.push(Scenario::new(
        "workload/vwap",
        "per-symbol VWAP over a sliding 60 s window every second, one stream query (partition_by symbol, value (price, qty), Window::sliding(60 s), every(1 s), (Sum p*q, Sum q)) in one monitor on one context, event time: events/s to completion, rows equal to the twin's bit for bit",
        2,
        crate::scenario::Family::Engine,
        |ctx| run(ctx, Some(&imp::run)),
    ));
    #[cfg(not(feature = "engine"))]
    v.push(crate::scenario::engine::absent("alloc/query".into(), 2));
    #[cfg(feature = "engine")]
    v.push(Scenario::new(
        "alloc/query",
        "allocations per trade on workload/vwap's stream query with warm windows (every symbol's window sliding, periodic rows read)",
        2,
        crate::scenario::Family::Engine,
        imp::alloc,
    ));
    v.push(Scenario::new(
        "workload/vwap/twin",
        "workload/vwap by hand: a FastMap<symbol, window (VecDeque of trades, running sums)> walked at every emit time, in one consumer thread fed through an rtrb ring",
        2,
        crate::scenario::Family::Baseline,
        |ctx| run(ctx, None),
    ));
}

fn run(ctx: &RunCtx, engine: Option<EngineFn<'_, Trade>>) -> Outcome {
    let mut out = Outcome::default();
    let (symbols, n) = sizes(ctx.mode);
    out.param("symbols", symbols);
    let data = generate(symbols, n);
    let emits = emit_times(&data);
    out.param("emit_times", emits);
    // Every emit time has a row (trades are dense), none more than one per symbol.
    let expect = Expect::Between(emits as usize, (emits * symbols) as usize);
    measure(&mut out, ctx, &data, VwapTwin::default, engine, expect);
    out
}

#[cfg(feature = "engine")]
mod imp {
    use super::super::common::{engine, Timed};
    use super::*;
    use crate::alloc::{allocations, counting_installed};
    use correlator::query::{Query, Row, Sum, Window};
    use correlator::{Event, Monitor, Output, Pattern, Scope, Time};
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::Arc;
    use std::time::Duration;

    impl Event for Trade {
        /// Whether it is a marker of `alloc/query`.
        type Kind = bool;
        #[inline]
        fn kind(&self) -> bool {
            self.mark
        }
        #[inline]
        fn key(&self) -> Option<u64> {
            Some(self.symbol)
        }
        #[inline]
        fn time(&self) -> Option<Time> {
            Some(Time::from_nanos(self.t_us * 1_000))
        }
    }

    type Cx<'a, M> = Scope<'a, Trade, M>;

    /// The one monitor instance: its query hands a row per non-empty symbol every second.
    pub(super) struct Vwap {
        pub(super) rows: Output<Alert>,
    }

    impl Monitor<Trade> for Vwap {
        fn on_load(&mut self, cx: &mut Cx<'_, Self>) {
            let query = Query::over(Pattern::kind(false))
                .partition_by(|tr: &Trade| tr.symbol)
                .value(|tr: &Trade| tr.value())
                .window(Window::sliding(Duration::from_micros(WINDOW_US)))
                .every(Duration::from_micros(EVERY_US))
                .aggregate((
                    Sum::of(|v: &(f64, f64)| v.0 * v.1),
                    Sum::of(|v: &(f64, f64)| v.1),
                ));
            cx.query(
                query,
                |m: &mut Self, cx: &mut Cx<'_, Self>, r: &Row<(f64, f64)>| {
                    let (pq, q) = r.value;
                    let at_us = r.time.as_nanos() / 1_000;
                    // A value not queued is counted (`output_drops` in the status).
                    let _queued = cx.emit_to(&m.rows, row(r.key, at_us, pq / q));
                },
            )
            // Settings fixed above: an error here is a bug of this file (a panic in `on_load`
            // is counted and fails the run).
            .expect("a valid query");
        }
    }

    pub(super) fn run(ctx: &RunCtx, data: &Data<Trade>) -> Result<Timed, String> {
        let built = engine::build(ctx, 1)?;
        engine::run_single(ctx, data, built, |rows| Vwap { rows })
    }

    /// Reads the allocation counter at each marker (a trade of the marker kind, in the member
    /// after everything sent before it).
    struct Marker {
        at: Arc<[AtomicU64; 2]>,
        next: usize,
    }

    impl Monitor<Trade> for Marker {
        fn on_load(&mut self, cx: &mut Cx<'_, Self>) {
            cx.on_all(Pattern::kind(true), |m: &mut Self, _cx, _e: &Trade| {
                if let Some(slot) = m.at.get(m.next) {
                    slot.store(allocations(), Ordering::Relaxed);
                }
                m.next += 1;
            });
        }
    }

    /// `alloc/query`: the mode's VWAP stream twice, back to back (the second copy shifted by a
    /// whole number of periods past the first), with markers at 65 % and 95 % of the second
    /// copy: past its first 60 s, every window holds exactly what it held at that point of the
    /// first copy, released at the same periodic rows, so each deque has already grown to what
    /// it needs there (warm). Allocations between the markers (every
    /// thread's: the producer, the context, the row reader, which counts rows without keeping
    /// them) over the trades between them. The window covers about 30 s of stream: 30 rounds of
    /// periodic rows for every symbol, and every window sliding.
    pub(in crate::scenario::workload) fn alloc(ctx: &RunCtx) -> Outcome {
        let mut out = Outcome::default();
        if !counting_installed() {
            out.fail("the counting global allocator is not installed in this process");
            return out;
        }
        let (symbols, n) = sizes(ctx.mode);
        let data = generate(symbols, n);
        // A whole number of periods after the first copy's last trade: the second copy's
        // periodic rows (which release the values) fall at the same points of its stream.
        let last = data.events.last().map_or(0, |tr| tr.t_us);
        let shift = (last / EVERY_US + 1) * EVERY_US;
        let mut events: Vec<Trade> = data.events.to_vec();
        events.extend(data.events.iter().map(|tr| Trade {
            id: tr.id + n,
            t_us: tr.t_us + shift,
            ..*tr
        }));
        let marks = [n + n * 65 / 100, n + n * 95 / 100];
        for (i, &at) in marks.iter().enumerate() {
            let at = at as usize + i;
            let t_us = events[at - 1].t_us;
            events.insert(
                at,
                Trade {
                    id: u64::MAX,
                    symbol: 0,
                    t_us,
                    price: 1,
                    qty: 1,
                    mark: true,
                },
            );
        }
        let window = marks[1] - marks[0];
        out.param("symbols", symbols);
        out.param("window_trades", window);
        let at: Arc<[AtomicU64; 2]> = Arc::new([AtomicU64::new(0), AtomicU64::new(0)]);
        let run = || -> Result<u64, String> {
            let b = engine::build::<Trade>(ctx, 1)?;
            let member = *b.pool.members().first().ok_or("a pool without members")?;
            b.c.load_in(member, Vwap { rows: b.out })
                .map_err(|e| format!("load_in: {e}"))?;
            b.c.load_in(
                member,
                Marker {
                    at: at.clone(),
                    next: 0,
                },
            )
            .map_err(|e| format!("load marker: {e}"))?;
            let input = b.c.input();
            b.c.start();
            let rx = b.rx;
            let reader = std::thread::spawn(move || rx.iter().count());
            for e in events {
                input.send_to(member, e).map_err(|e| format!("send: {e}"))?;
            }
            // The shutdown allocates (its status snapshot): not before the window has closed.
            let deadline = std::time::Instant::now() + Duration::from_secs(60);
            while at[1].load(Ordering::Relaxed) == 0 && std::time::Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(1));
            }
            b.c.shutdown().map_err(|e| format!("shutdown: {e}"))?;
            let rows = reader.join().map_err(|_| "the row reader panicked")?;
            Ok(rows as u64)
        };
        match run() {
            Err(e) => out.fail(e),
            Ok(rows) => {
                out.param("rows", rows);
                let (a0, a1) = (at[0].load(Ordering::Relaxed), at[1].load(Ordering::Relaxed));
                out.check(a0 > 0 && a1 >= a0, || {
                    "the window markers were not both seen".into()
                });
                out.check(rows > 0, || "no row was handed".into());
                let allocs = a1.saturating_sub(a0);
                out.param("allocations", allocs);
                out.value(
                    "allocs_per_event",
                    "allocs/event",
                    allocs as f64 / window as f64,
                    crate::record::Better::Lower,
                );
                if allocs > 0 {
                    out.note(format!(
                        "{allocs} allocations in {window} trades of warm windows: the 0-allocation target is not met on this path"
                    ));
                }
            }
        }
        out
    }

    #[cfg(test)]
    mod tests {
        use super::super::tests::trade;
        use super::*;

        #[test]
        fn r7_9_r7_10_the_engines_vwap_rows_are_the_twins_at_the_windows_edges() {
            let (w, s) = (WINDOW_US, EVERY_US);
            let big = 1u64 << 40;
            // The twin's edge cases together: a trade in from its stamp until 60 s later
            // (exclusive), emits before a trade at their stamp, a rounding residue kept by the
            // running sums and dropped with its emptied partition, the clock stopping at the
            // last trade.
            let events = vec![
                trade(0, 1, 0, big, 1 << 20),
                trade(1, 1, 1, 1, 1),
                trade(2, 2, s, 100, 1),
                trade(3, 2, s + 1, 300, 3),
                trade(4, 1, w + 1, 5, 1),
                trade(5, 2, 61 * s, 7, 1),
                trade(6, 3, 62 * s + s / 2, 9, 9),
            ];
            let (got, want) =
                engine::single_and_twin(events, |rows| Vwap { rows }, VwapTwin::default());
            assert_eq!(got, want, "engine vs twin");
            // Symbol 1: rows at 1..=62 s; the residue at 60 s, trade 4 alone from 61 s.
            assert_eq!(got.iter().filter(|r| r.key == 1).count(), 62);
            assert!(got.contains(&row(1, 60 * s, 0.0)));
            assert!(got.contains(&row(1, 61 * s, 5.0)));
            // Symbol 2: both trades at 60 s; at 61 s trade 2 has left (before trade 5 enters),
            // trade 3 not yet; at 62 s trade 5 alone.
            assert!(got.contains(&row(2, 60 * s, 250.0)));
            assert!(got.contains(&row(2, 61 * s, 300.0)));
            assert!(got.contains(&row(2, 62 * s, 7.0)));
            assert_eq!(got.iter().map(|r| r.first).max(), Some(62_000));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A trade of the stream (not a marker); the engine's tests in `imp` use it too.
    pub(super) fn trade(id: u64, symbol: u64, t_us: u64, price: u64, qty: u64) -> Trade {
        Trade {
            id,
            symbol,
            t_us,
            price,
            qty,
            mark: false,
        }
    }

    fn rows_of(events: &[Trade]) -> Vec<Alert> {
        let data = Data {
            events: events.to_vec().into(),
            end_ms: 0,
        };
        let mut rows = data.reference(VwapTwin::default());
        rows.sort_unstable();
        rows
    }

    /// The rule over each emit time's window computed afresh (exact: integer sums below 2^53).
    fn by_definition(events: &[Trade]) -> Vec<Alert> {
        let last = events.last().map_or(0, |tr| tr.t_us);
        let mut rows = Vec::new();
        let mut at = EVERY_US;
        while at <= last {
            let mut sums: FastMap<u64, (f64, f64)> = FastMap::default();
            for tr in events
                .iter()
                .filter(|tr| tr.t_us < at && tr.t_us + WINDOW_US > at)
            {
                let s = sums.entry(tr.symbol).or_default();
                let (p, q) = tr.value();
                s.0 += p * q;
                s.1 += q;
            }
            rows.extend(sums.iter().map(|(&k, &(pq, q))| row(k, at, pq / q)));
            at += EVERY_US;
        }
        rows.sort_unstable();
        rows
    }

    #[test]
    fn the_twin_is_the_rule_by_definition_on_the_smoke_data() {
        let (symbols, n) = sizes(crate::scenario::Mode::Smoke);
        let data = generate(symbols, n);
        let got = rows_of(&data.events);
        assert_eq!(got, by_definition(&data.events));
        let emits = emit_times(&data);
        assert!(emits > 60, "the smoke stream slides its windows: {emits} s");
        assert!(got.len() as u64 > emits && (got.len() as u64) < emits * symbols);
        assert!(data.events.windows(2).all(|w| w[0].t_us <= w[1].t_us));
    }

    /// `(emit time ms, vwap)` of `symbol`'s rows.
    fn vwap_of(rows: &[Alert], symbol: u64) -> Vec<(u64, f64)> {
        rows.iter()
            .filter(|r| r.key == symbol)
            .map(|r| (r.first, f64::from_bits(r.last)))
            .collect()
    }

    #[test]
    fn sliding_window_a_trade_is_in_from_its_stamp_until_60_s_later_exclusive() {
        let s = EVERY_US;
        let rows = rows_of(&[
            // Stamped at 1 s: the 1 s row comes before it enters; it leaves at 61 s exactly.
            trade(0, 1, s, 100, 1),
            trade(1, 1, 61 * s, 300, 1),
            // Symbol 2 moves the clock to 62 s (its own trade enters after the 62 s row).
            trade(2, 2, 62 * s, 7, 1),
        ]);
        let mut want: Vec<(u64, f64)> = (2..=60).map(|k| (k * 1_000, 100.0)).collect();
        // At 61 s trade 0 has left and trade 1 has not entered yet: no row; at 62 s trade 1.
        want.push((62_000, 300.0));
        assert_eq!(vwap_of(&rows, 1), want);
        assert!(vwap_of(&rows, 2).is_empty());
    }

    #[test]
    fn emit_times_come_before_a_trade_at_the_same_stamp_and_stop_at_the_last_trade() {
        let rows = rows_of(&[
            trade(0, 1, 0, 100, 2),
            // At 1 s exactly: the 1 s row is emitted before it enters.
            trade(1, 1, EVERY_US, 400, 2),
            // The clock stops here, at 2.5 s: a row at 2 s, none at 3 s.
            trade(2, 1, 2 * EVERY_US + EVERY_US / 2, 1, 1),
        ]);
        let want = vec![row(1, EVERY_US, 100.0), row(1, 2 * EVERY_US, 250.0)];
        assert_eq!(rows, want);
    }

    #[test]
    fn running_sums_keep_their_residue_and_a_partition_starts_from_zero_when_its_window_empties() {
        let (w, s) = (WINDOW_US, EVERY_US);
        // 2^60 + 1.0 rounds to 2^60: when the large trade leaves (at 60 s, an emit time), the
        // running Σpq is 0.0 with the small trade still in, and the 60 s row's vwap is 0.0, as
        // the engine's running sums give it. The small trade leaves at 60 s + 1 µs, when trade 2
        // arrives: it leaves first, the window empties and the partition is dropped, so trade 2
        // starts from 0.0 (kept, Σpq would be -1.0 + 5.0 and the 61 s row 4.0).
        let big = 1u64 << 40;
        let rows = rows_of(&[
            trade(0, 1, 0, big, 1 << 20),
            trade(1, 1, 1, 1, 1),
            trade(2, 1, w + 1, 5, 1),
            // Symbol 2 moves the clock to 61 s.
            trade(3, 2, w + s, 9, 9),
        ]);
        let first = (big as f64 * (1u64 << 20) as f64 + 1.0) / ((1u64 << 20) as f64 + 1.0);
        let mut want: Vec<(u64, f64)> = (1..=59).map(|k| (k * 1_000, first)).collect();
        want.push((60_000, 0.0));
        want.push((61_000, 5.0));
        assert_eq!(vwap_of(&rows, 1), want);

        // The same on the twin's window alone.
        let mut win = SymbolWindow::default();
        win.push(&trade(0, 1, 0, big, 1 << 20));
        win.push(&trade(1, 1, 1, 1, 1));
        win.expire(w);
        assert_eq!((win.trades.len(), win.sum_pq, win.sum_q), (1, 0.0, 1.0));
        win.expire(w + 1);
        assert!(win.trades.is_empty());
        assert_eq!((win.sum_pq.to_bits(), win.sum_q.to_bits()), (0, 0));
    }
}
