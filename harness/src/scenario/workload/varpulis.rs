//! `workload/fraud/varpulis`: `workload/fraud`'s two rules on Varpulis (`varpulis-runtime` 0.11,
//! crates.io), a Rust CEP engine modelled on Apama, behind the harness feature `varpulis` (about
//! 219 crates: it would double the lab's build time). Without the feature the scenario measures
//! nothing and says in a note that it was left out; the run does not fail for it.
//!
//! # Driven as its documentation shows
//! The rules are a VPL program (`PROGRAM`) parsed by `varpulis_parser::parse` and loaded into a
//! synchronous engine (`Engine::new_sync()`, its documented fast path: no tokio, outputs
//! collected in place), fed in batches of `BATCH` through `process_batch_sync_collect`.
//! Varpulis events are dynamic maps (field name to value): each typed `Tx` is converted
//! (`Event::with_capacity_at` and six fields), and that conversion is timed, as a user pays it.
//!
//! # The time bounds
//! In 0.11 a sequence's `.within(...)` counts on the wall clock, not on event time, so the
//! generated stream (a million transactions in about a second of wall time, a thousand seconds
//! of event time) would break it. The bounds are `.where` clauses on the matched events' event
//! times (the `t` field, ms) instead: a sequence that completes too late is dropped, which is
//! what the engine's exclusive `within` and the twin do.
//!
//! # Threads
//! One thread (slot 1) converts and processes; Varpulis's synchronous engine has no producer
//! side. Timed from its start to the last batch's outputs taken.

#[cfg(feature = "varpulis")]
use super::{common::Timed, fraud, fraud::Tx};
#[cfg(not(feature = "varpulis"))]
use crate::scenario::Outcome;
#[cfg(feature = "varpulis")]
use crate::scenario::RunCtx;
use crate::scenario::{Family, Scenario};

/// Registers `workload/fraud/varpulis`, or, without the `varpulis` feature, a stand-in that
/// notes it was left out.
pub fn register(v: &mut Vec<Scenario>) {
    #[cfg(feature = "varpulis")]
    v.push(Scenario::new(
        "workload/fraud/varpulis",
        "workload/fraud's two rules on Varpulis 0.11 (VPL sequences partitioned by card, time bounds as .where on event times; Engine::new_sync, process_batch_sync_collect), typed Tx converted to Varpulis events inside the timed part",
        1,
        Family::Baseline,
        |ctx| fraud::run(ctx, Some(&|c, d| imp::run(c, d))),
    ));
    #[cfg(not(feature = "varpulis"))]
    v.push(Scenario::new(
        "workload/fraud/varpulis",
        "workload/fraud on Varpulis: left out of this build (harness feature `varpulis`)",
        1,
        Family::Baseline,
        |_| {
            let mut out = Outcome::default();
            out.note("left out (build the harness with `--features varpulis`)");
            out
        },
    ));
}

/// Events per `process_batch_sync_collect` call (1,000 to 100,000 make little difference).
#[cfg(feature = "varpulis")]
const BATCH: usize = 10_000;

/// The two rules in VPL, from `fraud`'s constants. Rule 1: three over-amount transactions of a
/// card in a row (`b`, `c` the next two after `a`), `c` before `a` + 60 s. Rule 2: a large one,
/// then the card's next card-present transaction in another country, before `a` + 10 min.
#[cfg(feature = "varpulis")]
fn program() -> String {
    use fraud::{RULE1_AMOUNT, RULE1_WINDOW_MS, RULE2_AMOUNT, RULE2_WINDOW_MS};
    format!(
        "stream Rule1 = Tx where amount > {RULE1_AMOUNT} as a \
             -> Tx where amount > {RULE1_AMOUNT} as b \
             -> Tx where amount > {RULE1_AMOUNT} as c \
             .partition_by(card) \
             .where(c.t < a.t + {RULE1_WINDOW_MS}) \
             .emit(rule: 1, card: a.card, first: a.id, last: c.id)\n\
         stream Rule2 = Tx where amount > {RULE2_AMOUNT} as a \
             -> Tx where present == true and country != a.country as x \
             .partition_by(card) \
             .where(x.t < a.t + {RULE2_WINDOW_MS}) \
             .emit(rule: 2, card: a.card, first: a.id, last: x.id)\n"
    )
}

#[cfg(feature = "varpulis")]
mod imp {
    use super::super::common::{Alert, Data};
    use super::*;
    use crate::pin::Probe;
    use std::time::Instant;
    use varpulis_runtime::{Engine, Event};

    /// A typed transaction as a Varpulis event: a map of its fields, stamped with its event time.
    /// The card (a full 64-bit key) travels as its bits in an `i64`.
    #[inline]
    fn convert(tx: &Tx) -> Event {
        let at = chrono::DateTime::from_timestamp_millis(tx.t_ms as i64).unwrap_or_default();
        Event::with_capacity_at("Tx", 6, at)
            .with_field("id", tx.id as i64)
            .with_field("card", tx.card as i64)
            .with_field("t", tx.t_ms as i64)
            .with_field("amount", i64::from(tx.amount))
            .with_field("country", i64::from(tx.country))
            .with_field("present", tx.present)
    }

    /// An emitted Varpulis event back as an [`Alert`].
    fn alert(e: &Event) -> Result<Alert, String> {
        let int = |k: &str| {
            e.get_int(k)
                .ok_or_else(|| format!("varpulis output without an integer `{k}`: {e:?}"))
        };
        Ok(Alert {
            rule: int("rule")? as u8,
            key: int("card")? as u64,
            first: int("first")? as u64,
            last: int("last")? as u64,
        })
    }

    /// The data set through Varpulis in one thread on slot 1 (converted and processed per batch).
    pub(super) fn run(ctx: &RunCtx, data: &Data<Tx>) -> Result<Timed, String> {
        let program = varpulis_parser::parse(&program())
            .map_err(|e| format!("varpulis: the VPL program does not parse: {e:?}"))?;
        let (events, core) = (data.events.clone(), ctx.map.core_for(1));
        let worker = std::thread::spawn(move || -> Result<_, String> {
            let probe = Probe::start("varpulis", core);
            let mut engine = Engine::new_sync();
            engine
                .load(&program)
                .map_err(|e| format!("varpulis load: {e}"))?;
            let t0 = Instant::now();
            let mut alerts = Vec::new();
            for batch in events.chunks(BATCH) {
                let batch: Vec<Event> = batch.iter().map(convert).collect();
                let out = engine
                    .process_batch_sync_collect(batch)
                    .map_err(|e| format!("varpulis process_batch_sync_collect: {e}"))?;
                for e in &out {
                    alerts.push(alert(e)?);
                }
            }
            let secs = t0.elapsed().as_secs_f64();
            Ok((secs, alerts, probe.finish()))
        });
        let (secs, alerts, placed) = worker
            .join()
            .map_err(|_| "the varpulis thread panicked")??;
        Ok(Timed {
            secs,
            alerts,
            placed: vec![placed],
        })
    }
}
