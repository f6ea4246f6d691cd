//! `partitioned/{N}`: a pool of `N` contexts (`Correlator::create_pool`) sharing keyed work, one
//! monitor instance per key (`Pool::load_per_key`), fed by one sender thread per partition
//! through a `PoolInput` (issue 21). `N` runs from 1 to the plan's cores, so that the ids form
//! the scaling curve: throughput of `partitioned/{N}` over that of `partitioned/1`.
//!
//! # What runs
//! Sender `p` sends to the [`KEYS_PER_PARTITION`] keys that partition `p` owns
//! (`partition_of(key, N) == p`), round robin, each key's events numbered from 0. Each key's
//! instance checks that its events arrive gap-free and in order (per-key FIFO from one sender,
//! SPEC R2.3), counts them, and hands its figures over in `on_die` at the graceful shutdown. A
//! lost, duplicated or reordered event, a key with two instances, or a live key count other
//! than the keys fails the run.
//!
//! # Placement
//! The engine's plan pins context `i` (creation order: `main` = 0, then the members) to slot
//! `i`; sender `p` takes slot `N + 1 + p`, the slots after the contexts'. `main` stays idle.
//! Every `N` uses the engine's default wait (spin, yield, park: SPEC R1.3): the `2N` busy
//! threads (a sender and a context per partition) oversubscribe the cores for most `N`, and one
//! strategy along the curve keeps its points comparable. On 2 cores, `N = 1` runs sender and
//! member on a core each, and `N = 2` a member and a sender on each core. The events/s figure
//! counts events processed by all members inside the timed window.

use super::Scenario;
#[cfg(feature = "engine")]
use super::{Family, RunCtx};

/// Keys each partition owns and its sender cycles through.
pub const KEYS_PER_PARTITION: u64 = 64;

/// The partition counts of `partitioned/{N}`: 1 to the plan's cores.
pub fn partition_counts(cores: usize) -> Vec<usize> {
    (1..=cores.max(1)).collect()
}

/// Registers `partitioned/{N}` for every `N` of [`partition_counts`].
pub fn register(v: &mut Vec<Scenario>, cores: usize) {
    for n in partition_counts(cores) {
        let id = format!("partitioned/{n}");
        #[cfg(not(feature = "engine"))]
        v.push(super::engine::absent(id, 2 * n));
        #[cfg(feature = "engine")]
        v.push(Scenario::new(
            id,
            format!(
                "a pool of {n} context(s), one instance per key ({KEYS_PER_PARTITION} keys each), \
                 one sender per partition: events/s with per-key order checked"
            ),
            2 * n,
            Family::Engine,
            move |ctx| run(ctx, n),
        ));
    }
}

#[cfg(feature = "engine")]
fn run(ctx: &RunCtx, n: usize) -> super::Outcome {
    imp::run(ctx, n)
}

#[cfg(feature = "engine")]
mod imp {
    use super::{RunCtx, KEYS_PER_PARTITION};
    use crate::pin::Probe;
    use crate::scenario::engine::{wait_name, Clock, Cx, EngineRun, Seen, KEYED_KIND};
    use crate::scenario::{
        sample, sender_counters, stream_figures, timed_window_with, Ev, Outcome, Shared, Window,
        PUBLISH_EVERY, STOP_CHECK_EVERY, STREAM_CAPACITY,
    };
    use correlator::{partition_of, ContextOptions, DieReason, Monitor, Pattern, WaitStrategy};
    use crossbeam_utils::CachePadded;
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::{Arc, Mutex};

    /// What each key's instance hands over at shutdown: key, events taken, order breaks.
    type KeyReport = (u64, u64, u64);

    /// Per-member figures, written only by the member's thread.
    struct Member {
        /// Events processed by the member's instances (published every event: one writer).
        done: CachePadded<AtomicU64>,
        seen: Seen,
    }

    /// One key's instance: the per-key order check and count.
    struct KeyCount {
        key: u64,
        next: u64,
        taken: u64,
        breaks: u64,
        member: Arc<Member>,
        /// Member 0's instances also publish to the window's stall check.
        stall: Option<Arc<Shared>>,
        reports: Arc<Mutex<Vec<KeyReport>>>,
    }

    impl KeyCount {
        #[inline]
        fn take(&mut self, seq: u64) {
            if seq != self.next {
                self.breaks += 1;
            }
            self.next = seq + 1;
            self.taken += 1;
            let done = self.member.done.load(Ordering::Relaxed) + 1;
            self.member.done.store(done, Ordering::Relaxed);
            if done % STOP_CHECK_EVERY == 1 {
                self.member.seen.mark();
            }
            if let Some(sh) = &self.stall {
                sh.publish(done, false);
            }
        }
    }

    impl Monitor<Ev> for KeyCount {
        fn on_load(&mut self, cx: &mut Cx<'_, Self>) {
            cx.on_all(
                Pattern::kind(KEYED_KIND).key(self.key),
                |m: &mut KeyCount, _cx: &mut Cx<'_, KeyCount>, e: &Ev| m.take(e.seq),
            );
        }

        fn on_die(&mut self, _reason: &DieReason, _cx: &mut Cx<'_, Self>) {
            let report = (self.key, self.taken, self.breaks);
            self.reports
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push(report);
        }
    }

    /// The first [`KEYS_PER_PARTITION`] keys of each partition of `n`.
    fn keys_of(n: usize) -> Vec<Vec<u64>> {
        let mut keys = vec![Vec::new(); n];
        let mut k = 0u64;
        while keys.iter().any(|v| (v.len() as u64) < KEYS_PER_PARTITION) {
            let p = &mut keys[partition_of(k, n)];
            if (p.len() as u64) < KEYS_PER_PARTITION {
                p.push(k);
            }
            k += 1;
        }
        keys
    }

    pub(super) fn run(ctx: &RunCtx, n: usize) -> Outcome {
        let mut out = Outcome::default();
        // One strategy along the whole curve: with `2N` busy threads most `N` oversubscribe the
        // cores, where only the default can make progress (R1.3), and a curve that switched
        // strategy at `2N > cores` would measure the switch, not the partitioning.
        let wait = WaitStrategy::SpinYieldPark;
        out.param("partitions", n as u64);
        out.param("keys_per_partition", KEYS_PER_PARTITION);
        out.param("capacity", STREAM_CAPACITY as u64);
        out.param("wait_strategy", wait_name(wait));
        let members: Vec<Arc<Member>> = (0..n)
            .map(|_| {
                Arc::new(Member {
                    done: CachePadded::new(AtomicU64::new(0)),
                    seen: Seen::default(),
                })
            })
            .collect();
        let reports: Arc<Mutex<Vec<KeyReport>>> = Arc::default();
        let started = EngineRun::new(ctx, STREAM_CAPACITY, wait)
            .clock(Clock::External)
            .start(&mut out, |c, _, sh| {
                let pool = c
                    .create_pool(ContextOptions::new("part"), n)
                    .map_err(|e| format!("create_pool: {e}"))?;
                let factory = {
                    let (members, sh, reports) = (members.clone(), sh.clone(), reports.clone());
                    move |key: u64, first: &Ev| {
                        let p = partition_of(key, members.len());
                        let mut m = KeyCount {
                            key,
                            next: 0,
                            taken: 0,
                            breaks: 0,
                            member: members[p].clone(),
                            stall: (p == 0).then(|| sh.clone()),
                            reports: reports.clone(),
                        };
                        m.take(first.seq);
                        m
                    }
                };
                pool.load_per_key([KEYED_KIND], factory)
                    .map_err(|e| format!("load_per_key: {e}"))?;
                let input = pool.input();
                Ok((pool, input))
            });
        let Some((run, (pool, input))) = started else {
            return out;
        };
        let sh = run.sh.clone();
        let keys = keys_of(n);
        let counters = sender_counters(n);
        let mut handles = Vec::new();
        for (p, keys) in keys.into_iter().enumerate() {
            let (input, sh, counters) = (input.clone(), sh.clone(), counters.clone());
            // The slots after the contexts' (`main` is context 0, member `p` context `p + 1`).
            let core = ctx.map.core_for(n + 1 + p);
            handles.push(std::thread::spawn(move || {
                let probe = Probe::start(format!("sender{p}"), core);
                let per = keys.len() as u64;
                let mut i = 0u64;
                loop {
                    if i % STOP_CHECK_EVERY == 0 && sh.stopped() {
                        break;
                    }
                    let e = Ev {
                        kind: KEYED_KIND,
                        seq: i / per,
                        t_ns: 0,
                        aux: keys[(i % per) as usize],
                    };
                    if let Err(err) = input.send(e) {
                        sh.fail(format!("sender {p}: send failed: {err}"));
                        break;
                    }
                    i += 1;
                    if i % PUBLISH_EVERY == 0 {
                        counters[p].store(i, Ordering::Release);
                    }
                }
                (probe.finish(), keys, i)
            }));
        }
        let processed = || -> Vec<u64> {
            members
                .iter()
                .map(|m| m.done.load(Ordering::Relaxed))
                .collect()
        };
        let w = timed_window_with(ctx, &sh, || (processed(), sample(&counters)));
        let sent: Vec<(crate::pin::Placement, Vec<u64>, u64)> = handles
            .into_iter()
            .map(|h| h.join().expect("sender panicked"))
            .collect();
        let live = pool.status().live_keys;
        let status = run.finish(&mut out);
        for (placement, _, _) in &sent {
            out.placed(placement.clone());
        }
        for (p, m) in members.iter().enumerate() {
            out.placed(
                m.seen
                    .placement(&format!("member {p}"), ctx.map.core_for(p + 1)),
            );
        }
        verify(&mut out, &sent, &reports, live);
        if let Some(s) = status {
            out.param("overruns", s.totals.overruns);
        }
        out.param("events_total", sent.iter().map(|(_, _, i)| *i).sum::<u64>());
        match w {
            Ok((w, (d0, s0), (d1, s1))) => {
                let events = d1.iter().sum::<u64>() - d0.iter().sum::<u64>();
                let shares: Vec<u64> = s1.iter().zip(&s0).map(|(a, b)| a - b).collect();
                out.param(
                    "member_events_in_window",
                    serde_json::json!(d1.iter().zip(&d0).map(|(a, b)| a - b).collect::<Vec<_>>()),
                );
                stream_figures(
                    &mut out,
                    Window {
                        events,
                        secs: w.secs,
                    },
                    Some(&shares),
                );
            }
            Err(e) => out.fail(e),
        }
        out
    }

    /// Checks every key's figures against what its sender sent: one instance per key, every
    /// event taken once and in order.
    fn verify(
        out: &mut Outcome,
        sent: &[(crate::pin::Placement, Vec<u64>, u64)],
        reports: &Mutex<Vec<KeyReport>>,
        live: u64,
    ) {
        let reports = std::mem::take(&mut *reports.lock().unwrap_or_else(|e| e.into_inner()));
        let mut want = std::collections::HashMap::new();
        for (_, keys, i) in sent {
            let per = keys.len() as u64;
            for (j, &k) in keys.iter().enumerate() {
                let extra = u64::from((j as u64) < i % per);
                want.insert(k, i / per + extra);
            }
        }
        let expect_live = want.values().filter(|&&n| n > 0).count() as u64;
        out.check(live == expect_live, || {
            format!("live keys {live}, expected {expect_live} (one instance per key sent)")
        });
        out.check(reports.len() as u64 == expect_live, || {
            format!(
                "{} instances ended, expected {expect_live}: a key had two instances or none",
                reports.len()
            )
        });
        let breaks: u64 = reports.iter().map(|r| r.2).sum();
        out.check(breaks == 0, || {
            format!("{breaks} per-key order break(s): a key's events out of order")
        });
        for (key, taken, _) in reports {
            let w = want.get(&key).copied().unwrap_or(0);
            out.check(taken == w, || {
                format!("key {key}: sent {w}, its instance took {taken}")
            });
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn ids_run_from_one_partition_to_the_cores() {
        let mut v = Vec::new();
        super::register(&mut v, 4);
        let ids: Vec<String> = v.into_iter().map(|s| s.id).collect();
        assert_eq!(
            ids,
            [
                "partitioned/1",
                "partitioned/2",
                "partitioned/3",
                "partitioned/4"
            ]
        );
    }
}
