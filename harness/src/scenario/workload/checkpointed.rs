//! `checkpoint/*` (issue 36): what checkpoints cost, and how long a recovery takes, on the fraud
//! rules of [`workload/fraud`](super::fraud).
//!
//! The rules are written as a persistent monitor (`correlator::Persistent`), the way a user who
//! wants them to survive a crash writes them: one instance per card (`load_per_key`), its state
//! the card and rule 2's open windows (so that `on_restore` can register each window's `when`
//! again), its alerts through a named typed output it finds again after a recovery. Keeping the
//! open windows in the state is work `workload/fraud`'s monitor does not do, so the cost of
//! checkpoints is measured against the same persistent monitor without them:
//!
//! - `checkpoint/workload/fraud/off`: the persistent monitor, no checkpoints;
//! - `checkpoint/workload/fraud`: the same, with `checkpoint_every(1 s)` into a directory store
//!   in the temporary directory (synced to disk at each checkpoint), run right after it in every
//!   round; the target is at least 0.95x (`targets::CHECKPOINT_RATIO`). The stream is four times
//!   `workload/fraud`'s (4,000,000 transactions in quick mode, a few seconds), so that a run
//!   holds several checkpoints; each run reports how many it took;
//! - `checkpoint/recover`: 100,000 live card instances (quick mode) checkpointed, then a new
//!   correlator built, its pool loaded and `recover()`ed: the recovery's time, the checkpoint's
//!   time and size, reported (no target).
//!
//! Both fraud scenarios check their alerts against the twin's, as `workload/fraud` does.

use super::common::{measure, Expect};
use super::fraud::{generate, FraudTwin};
use crate::scenario::{Outcome, RunCtx, Scenario};

/// `(cards, transactions)` of the fraud scenarios.
fn sizes(mode: crate::scenario::Mode) -> (usize, usize) {
    mode.pick((1_000, 20_000), (20_000, 4_000_000), (20_000, 4_000_000))
}

/// Registers the three scenarios, the checkpointed fraud run right after the one without.
pub fn register(v: &mut Vec<Scenario>) {
    #[cfg(not(feature = "engine"))]
    {
        for id in [
            "checkpoint/workload/fraud/off",
            "checkpoint/workload/fraud",
            "checkpoint/recover",
        ] {
            v.push(crate::scenario::engine::absent(id.into(), 2));
        }
    }
    #[cfg(feature = "engine")]
    {
        use crate::scenario::Family;
        v.push(Scenario::new(
            "checkpoint/workload/fraud/off",
            "workload/fraud's rules as a persistent monitor (open windows kept in the state, alerts through a named output), one instance per card (load_per_key), no checkpoints: events/s to completion, alerts equal to the twin's",
            2,
            Family::Engine,
            |ctx| run(ctx, false),
        ));
        v.push(Scenario::new(
            "checkpoint/workload/fraud",
            "checkpoint/workload/fraud/off with checkpoint_every(1 s) into a directory store in the temporary directory (each checkpoint synced): events/s to completion, checkpoints taken",
            2,
            Family::Engine,
            |ctx| run(ctx, true),
        ));
        v.push(Scenario::new(
            "checkpoint/recover",
            "100,000 live card instances of the persistent fraud monitor checkpointed, then a new correlator built, its pool loaded and recover()ed: recovery time, checkpoint time and size",
            2,
            Family::Engine,
            imp::recover,
        ));
    }
}

/// One run of a fraud scenario, with checkpoints or without.
fn run(ctx: &RunCtx, checkpoints: bool) -> Outcome {
    let mut out = Outcome::default();
    let (cards, n) = sizes(ctx.mode);
    out.param("cards", cards as u64);
    let data = generate(cards, n);
    #[cfg(feature = "engine")]
    {
        let taken = std::sync::atomic::AtomicU64::new(0);
        measure(
            &mut out,
            ctx,
            &data,
            FraudTwin::default,
            Some(&|c, d| imp::run(c, d, checkpoints, &taken)),
            Expect::Some,
        );
        if checkpoints {
            let taken = taken.load(std::sync::atomic::Ordering::Relaxed);
            out.param("checkpoints", taken);
            out.check(taken > 0, || {
                "no checkpoint was taken during the run".into()
            });
        }
    }
    #[cfg(not(feature = "engine"))]
    {
        let _ = (checkpoints, data);
        out.fail("built without the engine");
    }
    out
}

#[cfg(feature = "engine")]
mod imp {
    use super::super::common::engine::{self, Built};
    use super::super::common::{Alert, Data, Timed};
    use super::super::fraud::imp::{abroad, rule1, TX};
    use super::super::fraud::{Tx, RULE2_AMOUNT, RULE2_WINDOW_MS};
    use crate::record::Better;
    use crate::scenario::engine::spin_or_park;
    use crate::scenario::{Mode, Outcome, RunCtx, STREAM_CAPACITY};
    use correlator::checkpoint::{seq_in_name, DirStore};
    use correlator::record::EventCodec;
    use correlator::{
        ContextOptions, Correlator, Match, Monitor, Output, OutputOptions, Pattern, Persistent,
        Pool, Scope, WaitStrategy,
    };
    use serde::{Deserialize, Serialize};
    use std::path::{Path, PathBuf};
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::time::{Duration, Instant};

    /// The alert output's name, by which a restored instance finds it.
    const ALERTS: &str = "fraud-alerts";

    type Cx<'a, M> = Scope<'a, Tx, M>;

    /// A transaction's bytes in a checkpoint (the events partial matches hold).
    struct TxCodec;

    impl EventCodec<Tx> for TxCodec {
        fn encode(&self, t: &Tx, out: &mut Vec<u8>) {
            out.extend_from_slice(&t.id.to_le_bytes());
            out.extend_from_slice(&t.card.to_le_bytes());
            out.extend_from_slice(&t.t_ms.to_le_bytes());
            out.extend_from_slice(&t.amount.to_le_bytes());
            out.extend_from_slice(&t.country.to_le_bytes());
            out.push(u8::from(t.present));
            out.push(u8::from(t.mark));
        }

        fn decode(&self, b: &[u8]) -> Result<Tx, String> {
            if b.len() != 32 {
                return Err(format!("a transaction is 32 bytes, not {}", b.len()));
            }
            let u64_at = |i: usize| {
                let mut w = [0; 8];
                w.copy_from_slice(&b[i..i + 8]);
                u64::from_le_bytes(w)
            };
            Ok(Tx {
                id: u64_at(0),
                card: u64_at(8),
                t_ms: u64_at(16),
                amount: u32::from_le_bytes([b[24], b[25], b[26], b[27]]),
                country: u16::from_le_bytes([b[28], b[29]]),
                present: b[30] == 1,
                mark: b[31] == 1,
            })
        }
    }

    /// One card's instance: `workload/fraud`'s two rules, persistent.
    #[derive(Serialize, Deserialize)]
    struct Card {
        card: u64,
        /// Rule 2's open windows: `(large transaction's id, its country, deadline in ms)`, in
        /// the order their listeners were registered.
        pending: Vec<(u64, u16, u64)>,
        /// The card's first transaction, handed to the factory (routed from `on_load`).
        #[serde(skip)]
        first: Option<Tx>,
        #[serde(skip)]
        alerts: Option<Output<Alert>>,
    }

    impl Card {
        fn alert(&self, cx: &mut Cx<'_, Self>, rule: u8, first: u64, last: u64) {
            if let Some(out) = &self.alerts {
                let a = Alert {
                    rule,
                    key: self.card,
                    first,
                    last,
                };
                // A value not queued is counted (`output_drops` in the status).
                let _queued = cx.emit_to(out, a);
            }
        }

        /// The rules' listeners, and the `when` of every open window.
        fn listen(&mut self, cx: &mut Cx<'_, Self>) {
            let card = self.card;
            cx.when_all(
                rule1(card),
                |m: &mut Self, cx: &mut Cx<'_, Self>, hit: &Match<Tx>| {
                    m.alert(cx, 1, hit.events[0].id, hit.events[2].id);
                },
            );
            let large = Pattern::kind(TX)
                .key(card)
                .filter(|t: &Tx| t.amount > RULE2_AMOUNT);
            cx.on_all(large, |m: &mut Self, cx: &mut Cx<'_, Self>, a: &Tx| {
                let deadline = a.t_ms + RULE2_WINDOW_MS;
                // Windows that closed unmatched ended with their timers.
                m.pending.retain(|p| p.2 > a.t_ms);
                m.pending.push((a.id, a.country, deadline));
                Card::watch(cx, m.card, a.id, a.country, RULE2_WINDOW_MS);
            });
            let now = cx.now().as_nanos() / 1_000_000;
            for &(from, country, deadline) in &self.pending {
                Card::watch(cx, card, from, country, deadline - now);
            }
        }

        /// Rule 2's window of the large transaction `from`: a card-present transaction in
        /// another country within `left_ms`.
        fn watch(cx: &mut Cx<'_, Self>, card: u64, from: u64, country: u16, left_ms: u64) {
            cx.when(
                abroad(card, country).within(Duration::from_millis(left_ms)),
                move |m: &mut Self, cx: &mut Cx<'_, Self>, hit: &Match<Tx>| {
                    m.pending.retain(|p| p.0 != from);
                    m.alert(cx, 2, from, hit.events[0].id);
                },
            );
        }
    }

    impl Monitor<Tx> for Card {
        fn on_load(&mut self, cx: &mut Cx<'_, Self>) {
            self.listen(cx);
            if let Some(first) = self.first.take() {
                cx.route(first);
            }
        }
    }

    impl Persistent<Tx> for Card {
        const NAME: &'static str = "harness/fraud-card/v1";

        fn on_restore(&mut self, cx: &mut Cx<'_, Self>) {
            self.alerts = cx.output(ALERTS);
            let now = cx.now().as_nanos() / 1_000_000;
            self.pending.retain(|p| p.2 > now);
            self.listen(cx);
        }
    }

    fn factory(card: u64, first: &Tx, alerts: Output<Alert>) -> Card {
        Card {
            card,
            pending: Vec::new(),
            first: Some(*first),
            alerts: Some(alerts),
        }
    }

    /// A directory of its own in the temporary directory, empty.
    fn store_dir(what: &str) -> PathBuf {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        let dir =
            std::env::temp_dir().join(format!("harness-{what}-{}-{nanos}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        dir
    }

    /// The newest checkpoint in `dir`: its sequence and its file's size.
    fn newest(dir: &Path) -> Option<(u64, u64)> {
        std::fs::read_dir(dir)
            .ok()?
            .filter_map(Result::ok)
            .filter_map(|e| {
                let name = e.file_name().into_string().ok()?;
                let seq = seq_in_name(name.strip_suffix(".ckpt")?)?;
                Some((seq, e.metadata().ok()?.len()))
            })
            .max()
    }

    /// As `workload::common::engine::build`, with one member, the alerts through the named
    /// output [`ALERTS`], checkpoints into `dir` (every `every`, if set) and [`Card`]
    /// persistent.
    fn build(ctx: &RunCtx, dir: &Path, every: Option<Duration>) -> Result<Built<Tx>, String> {
        let store = DirStore::open(dir).map_err(|e| format!("checkpoint store: {e}"))?;
        let mut b = Correlator::<Tx>::builder()
            .inbox_capacity(STREAM_CAPACITY)
            .wait_strategy(WaitStrategy::SpinYieldPark)
            .event_time()
            .checkpoints(store, TxCodec)
            .persistent::<Card>();
        if let Some(every) = every {
            b = b.checkpoint_every(every);
        }
        let c = b.build().map_err(|e| format!("build: {e}"))?;
        let wait = spin_or_park(ctx, 2);
        let pool = c
            .create_pool(ContextOptions::new("keys").wait_strategy(wait), 1)
            .map_err(|e| format!("create_pool: {e}"))?;
        let (out, rx) = c
            .named_output::<Alert>(ALERTS, OutputOptions::default())
            .map_err(|e| format!("named_output: {e}"))?;
        Ok(Built {
            c,
            pool,
            out,
            rx,
            settled: None,
        })
    }

    /// The checkpoint interval: a second, as the target says; a millisecond in smoke mode,
    /// whose run takes some tens of them.
    fn interval(mode: Mode) -> Duration {
        mode.pick(
            Duration::from_millis(1),
            Duration::from_secs(1),
            Duration::from_secs(1),
        )
    }

    /// The data set through the persistent monitor, checkpointed every [`interval`] if
    /// `checkpoints` (the checkpoints taken counted in `taken`).
    pub(super) fn run(
        ctx: &RunCtx,
        data: &Data<Tx>,
        checkpoints: bool,
        taken: &AtomicU64,
    ) -> Result<Timed, String> {
        let dir = store_dir("checkpoint-fraud");
        let every = checkpoints.then(|| interval(ctx.mode));
        let timed =
            build(ctx, &dir, every).and_then(|b| engine::run_keyed(ctx, data, b, [TX], factory));
        taken.store(newest(&dir).map_or(0, |(seq, _)| seq), Ordering::Relaxed);
        let _ = std::fs::remove_dir_all(&dir);
        timed
    }

    /// `(cards, transactions)` of `checkpoint/recover`: 100,000 cards, four transactions each
    /// on average (so about 98 % of the cards have an instance).
    fn recover_sizes(mode: Mode) -> (usize, usize) {
        mode.pick((1_000, 4_000), (100_000, 400_000), (100_000, 400_000))
    }

    /// Loads the per-card factory into `pool` (the recovering program loads it again before
    /// `recover`).
    fn load(pool: &Pool<Tx>, out: &Output<Alert>) -> Result<(), String> {
        let out = out.clone();
        pool.load_per_key([TX], move |card, first: &Tx| {
            factory(card, first, out.clone())
        })
        .map_err(|e| format!("load_per_key: {e}"))
    }

    /// `checkpoint/recover`: the stream fed, a checkpoint taken (timed), shutdown; then a new
    /// correlator built, its pool loaded and recovered (timed), checked to hold every instance.
    pub(super) fn recover(ctx: &RunCtx) -> Outcome {
        let mut out = Outcome::default();
        let (cards, n) = recover_sizes(ctx.mode);
        out.param("cards", cards as u64);
        out.param("events", n as u64);
        let data = super::generate(cards, n);
        let dir = store_dir("checkpoint-recover");
        let result = recover_in(ctx, &dir, &data, &mut out);
        let _ = std::fs::remove_dir_all(&dir);
        if let Err(e) = result {
            out.fail(e);
        }
        out
    }

    fn recover_in(
        ctx: &RunCtx,
        dir: &Path,
        data: &Data<Tx>,
        out: &mut Outcome,
    ) -> Result<(), String> {
        let Built {
            c,
            pool,
            out: alerts,
            rx,
            ..
        } = build(ctx, dir, None)?;
        load(&pool, &alerts)?;
        c.recover().map_err(|e| format!("recover (empty): {e}"))?;
        let reader = std::thread::spawn(move || rx.iter().count());
        let input = pool.named_input(&c, "tx").map_err(|e| e.to_string())?;
        for &e in data.events.iter() {
            input.send(e).map_err(|e| format!("send: {e}"))?;
        }
        let t0 = Instant::now();
        let seq = c.checkpoint().map_err(|e| format!("checkpoint: {e}"))?;
        let checkpoint_s = t0.elapsed().as_secs_f64();
        let live = pool.status().live_keys;
        c.shutdown().map_err(|e| format!("shutdown: {e}"))?;
        drop((input, pool, alerts, c));
        let _ = reader.join();
        let bytes = newest(dir).filter(|&(s, _)| s == seq).map_or(0, |(_, b)| b);

        let t0 = Instant::now();
        let Built {
            c,
            pool,
            out: alerts,
            rx,
            ..
        } = build(ctx, dir, None)?;
        load(&pool, &alerts)?;
        let recovered = c
            .recover()
            .map_err(|e| format!("recover: {e}"))?
            .ok_or("recover found no checkpoint")?;
        let recover_s = t0.elapsed().as_secs_f64();
        let restored = pool.status().live_keys;
        c.shutdown().map_err(|e| format!("shutdown: {e}"))?;
        drop(rx);
        out.param("instances", live);
        out.check(restored == live, || {
            format!("{live} instances checkpointed, {restored} restored")
        });
        out.check(recovered.taken("tx") == data.events.len() as u64, || {
            format!(
                "{} of {} transactions counted as taken",
                recovered.taken("tx"),
                data.events.len()
            )
        });
        out.value("recovery_ms", "ms", recover_s * 1e3, Better::Lower);
        out.value("checkpoint_ms", "ms", checkpoint_s * 1e3, Better::Lower);
        out.value("checkpoint_bytes", "bytes", bytes as f64, Better::Lower);
        if live > 0 {
            out.value(
                "recovery_us_per_instance",
                "us",
                recover_s * 1e6 / live as f64,
                Better::Lower,
            );
            out.value(
                "checkpoint_bytes_per_instance",
                "bytes",
                bytes as f64 / live as f64,
                Better::Lower,
            );
        }
        Ok(())
    }
}
