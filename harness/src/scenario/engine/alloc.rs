//! `alloc/route`, `alloc/send`, `alloc/send-batch`, `alloc/channel`, `alloc/output`: allocations
//! per event on the hot paths, counted by the global [`crate::alloc::CountingAlloc`] around a
//! steady-state window.
//!
//! Each scenario is a self-perpetuating loop (a routed chain; a `send_to` ping-pong between two
//! contexts; a ping-pong of batches of `STREAM_BATCH` events, each context collecting what it
//! receives into a reused vector and sending it on with `send_batch_to` once it holds a batch; the
//! `send_to` ping-pong over two channels, one subscriber each; a routed chain that also emits every
//! event to a channel's output, read by a thread of the harness: the output's push, the
//! receiver's take and both sides' sleeps and wake-ups). After `WARM` events the
//! measuring handler reads the process-wide allocation counter, after `WARM + M` more it reads it
//! again and stops the loop. Every thread's allocations count, so an allocation the path causes
//! anywhere (a sender, a receiver, a wake-up) is charged to it; the harness's own main thread
//! only sleeps meanwhile. The figure is reported as it is; the target (0) is judged in
//! `report.md`, while the run's `checks` field is about loss and order.
//!
//! The correlator is built with `external_time()` (no clock thread): the scenarios count the
//! event paths, and the clock thread is not one of them. With the default clock, its first tick
//! (about 100 ms after `start`) grows the clock's lazily filled context cache once
//! (`deliver::Links::refresh`), and that one allocation lands in the window whenever the window
//! spans that tick.

use super::{kick_off, spin_or_park, wait_name, Clock, Cx, EngineRun, Seen};
use crate::alloc::{allocations, counting_installed, deallocations};
use crate::record::Better;
use crate::scenario::{
    put, slot, take, wait_for, Ev, Family, Outcome, RunCtx, Scenario, Shared, Slot, STREAM_BATCH,
    STREAM_CAPACITY,
};
use correlator::{Channel, ContextRef, Monitor, Pattern, WaitStrategy};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

/// Registers `alloc/route`, `alloc/send`, `alloc/send-batch`, `alloc/channel`, `alloc/output`.
pub fn register_alloc(v: &mut Vec<Scenario>) {
    // (id, what it counts, threads, the path)
    let paths = [
        (
            "alloc/route",
            "allocations per routed event in a steady-state chain (counting global allocator)".to_string(),
            1,
            Path::Route,
        ),
        (
            "alloc/send",
            "allocations per send_to in a steady-state ping-pong between two contexts".to_string(),
            2,
            Path::Send,
        ),
        (
            "alloc/send-batch",
            format!("allocations per event sent with send_batch_to (batches of {STREAM_BATCH}) in a steady-state ping-pong of batches between two contexts"),
            2,
            Path::SendBatch,
        ),
        (
            "alloc/channel",
            "allocations per channel send in a steady-state ping-pong over two channels".to_string(),
            2,
            Path::Channel,
        ),
        (
            "alloc/output",
            "allocations per emitted event in a steady-state routed chain emitting to an output read by another thread".to_string(),
            2,
            Path::Output,
        ),
    ];
    for (id, about, threads, path) in paths {
        v.push(Scenario::new(
            id,
            about,
            threads,
            Family::Engine,
            move |ctx| run(ctx, path),
        ));
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Path {
    Route,
    Send,
    SendBatch,
    Channel,
    Output,
}

/// Events before the window opens.
const WARM: u64 = 10_000;

/// The window's figures: allocations, deallocations, events.
#[derive(Clone, Copy, Debug)]
struct Counted {
    allocs: u64,
    deallocs: u64,
    events: u64,
}

/// Where a loop member sends the next event.
#[derive(Clone, Copy)]
enum Hop {
    /// Route it (one context).
    Route,
    /// `send_to` this context.
    To(ContextRef),
    /// Collect `STREAM_BATCH` events, then `send_batch_to` this context.
    Batch(ContextRef),
    /// Send it to this channel.
    Chan(Channel),
    /// Route it, and emit it to this channel's output.
    RouteEmit(Channel),
}

struct Looper {
    hop: Hop,
    listen: Option<Channel>,
    /// Only the measuring member counts and opens/closes the window.
    measure: Option<Measure>,
    sh: Arc<Shared>,
    seen: Arc<Seen>,
    events_per_step: u64,
    /// The batch being collected ([`Hop::Batch`]); made with room for `STREAM_BATCH` before
    /// the window, so that a steady state allocates nothing.
    batch: Vec<Ev>,
}

struct Measure {
    n: u64,
    window: u64,
    start: (u64, u64),
    out: Slot<Counted>,
}

impl Monitor<Ev> for Looper {
    fn on_load(&mut self, cx: &mut Cx<'_, Self>) {
        if let Some(ch) = self.listen {
            cx.subscribe(ch);
        }
        cx.on_all(
            Pattern::kind(0),
            |m: &mut Looper, cx: &mut Cx<'_, Looper>, e: &Ev| {
                let mut next = *e;
                if let Some(ms) = m.measure.as_mut() {
                    if e.seq != ms.n {
                        m.sh.fail(format!("loop broken: expected seq {}, got {}", ms.n, e.seq));
                        return;
                    }
                    ms.n += 1;
                    // One event in flight: the next one. A batch loop keeps `STREAM_BATCH` in
                    // flight, so the event that comes back here as number `n` is the one that
                    // left as number `n - STREAM_BATCH`.
                    next.seq = match m.hop {
                        Hop::Batch(_) => e.seq + STREAM_BATCH as u64,
                        _ => ms.n,
                    };
                    if ms.n == WARM {
                        m.seen.mark();
                        ms.start = (allocations(), deallocations());
                    } else if ms.n == WARM + ms.window {
                        let counted = Counted {
                            allocs: allocations() - ms.start.0,
                            deallocs: deallocations() - ms.start.1,
                            events: ms.window * m.events_per_step,
                        };
                        m.seen.mark();
                        put(&ms.out, counted);
                        m.sh.done.store(true, Ordering::Release);
                        return;
                    }
                } else if e.seq % 4096 == 0 {
                    m.seen.mark();
                }
                match m.hop {
                    Hop::Route => cx.route(next),
                    Hop::To(c) => {
                        if let Err(err) = cx.send_to(c, next) {
                            m.sh.fail(format!("send_to failed: {err}"));
                        }
                    }
                    Hop::Batch(c) => {
                        m.batch.push(next);
                        if m.batch.len() == STREAM_BATCH {
                            if let Err(err) = cx.send_batch_to(c, &mut m.batch) {
                                m.sh.fail(format!("send_batch_to failed: {err}"));
                            }
                        }
                    }
                    Hop::Chan(ch) => {
                        let k = cx.send(ch, next);
                        if k != 1 {
                            m.sh.fail(format!("channel send reached {k} receivers, expected 1"));
                        }
                    }
                    Hop::RouteEmit(ch) => {
                        cx.route(next);
                        let k = cx.emit(ch, next);
                        if k != 1 {
                            m.sh.fail(format!("emit reached {k} outputs, expected 1"));
                        }
                    }
                }
            },
        );
    }
}

fn run(ctx: &RunCtx, path: Path) -> Outcome {
    let mut out = Outcome::default();
    if !counting_installed() {
        out.fail("the counting global allocator is not installed in this process");
        return out;
    }
    let window = ctx.mode.pick(20_000u64, 500_000, 5_000_000);
    out.param("warmup_events", WARM);
    out.param("window_steps", window);
    let two = !matches!(path, Path::Route | Path::Output);
    let wait = if two {
        spin_or_park(ctx, 2)
    } else {
        WaitStrategy::BusySpin
    };
    out.param("wait_strategy", wait_name(wait));
    out.param("clock", "external_time (no clock thread)");
    let res = slot();
    let (seen_a, seen_b) = (Arc::new(Seen::default()), Arc::new(Seen::default()));
    let measure = Measure {
        n: 0,
        window,
        start: (0, 0),
        out: res.clone(),
    };
    let started = EngineRun::new(ctx, STREAM_CAPACITY, wait)
        .clock(Clock::External)
        .contexts(two.then_some("b"))
        .start(&mut out, |c, contexts, sh| {
            let a = contexts[0];
            if path == Path::Output {
                let ch = c
                    .channel("alloc-out")
                    .map_err(|e| format!("channel: {e}"))?;
                // The default output: bounded, `Block`; the reader drains it until shutdown.
                let rx = c.output(ch);
                let reader = std::thread::spawn(move || rx.iter().count() as u64);
                c.load(Looper {
                    hop: Hop::RouteEmit(ch),
                    listen: None,
                    measure: Some(measure),
                    sh: sh.clone(),
                    seen: seen_a.clone(),
                    events_per_step: 1,
                    batch: Vec::new(),
                })?;
                return Ok(Some(reader));
            }
            let Some(&b) = contexts.get(1) else {
                c.load(Looper {
                    hop: Hop::Route,
                    listen: None,
                    measure: Some(measure),
                    sh: sh.clone(),
                    seen: seen_a.clone(),
                    events_per_step: 1,
                    batch: Vec::new(),
                })?;
                return Ok(None);
            };
            let (to_b, to_a, listen_a, listen_b) = if path == Path::Send {
                (Hop::To(b), Hop::To(a), None, None)
            } else if path == Path::SendBatch {
                (Hop::Batch(b), Hop::Batch(a), None, None)
            } else {
                let ca = c.channel("alloc-a").map_err(|e| format!("channel: {e}"))?;
                let cb = c.channel("alloc-b").map_err(|e| format!("channel: {e}"))?;
                (Hop::Chan(cb), Hop::Chan(ca), Some(ca), Some(cb))
            };
            c.load(Looper {
                hop: to_b,
                listen: listen_a,
                measure: Some(measure),
                sh: sh.clone(),
                seen: seen_a.clone(),
                events_per_step: 2,
                batch: Vec::with_capacity(STREAM_BATCH),
            })?;
            c.load_in(
                b,
                Looper {
                    hop: to_a,
                    listen: listen_b,
                    measure: None,
                    sh: sh.clone(),
                    seen: seen_b.clone(),
                    events_per_step: 2,
                    batch: Vec::with_capacity(STREAM_BATCH),
                },
            )?;
            Ok(None)
        });
    let Some((run, reader)) = started else {
        return out;
    };
    let (c, sh) = (&run.c, &run.sh);
    // Subscriptions (channel path) take effect when on_load returns; give the loads a moment
    // by sending the first event to `main` only once both instances exist.
    let ready = wait_for(Duration::from_secs(3), Duration::from_millis(1), || {
        c.status().totals.instances >= if two { 2 } else { 1 }
    });
    out.check(ready, || "the monitors did not load".into());
    // A batch loop starts with a whole batch in flight (numbers 0..STREAM_BATCH), in order.
    let in_flight = if path == Path::SendBatch {
        STREAM_BATCH as u64
    } else {
        1
    };
    for seq in 0..in_flight {
        if let Err(e) = kick_off(
            c,
            c.main(),
            Ev {
                seq,
                ..Ev::default()
            },
        ) {
            out.fail(e);
            return out;
        }
    }
    let done = wait_for(ctx.mode.run_timeout() / 2, Duration::from_millis(1), || {
        sh.done.load(Ordering::Acquire) || sh.failure().is_some()
    });
    run.finish(&mut out);
    if let Some(reader) = reader {
        // The output's stream ended at shutdown: the reader has taken every emitted event.
        match reader.join() {
            Ok(n) => out.param("output_events_read", n),
            Err(_) => out.fail("the output reader panicked"),
        }
    }
    out.placed(seen_a.placement("context a (main)", ctx.map.core_for(0)));
    if two {
        out.placed(seen_b.placement("context b", ctx.map.core_for(1)));
    }
    out.check(done, || "the loop did not finish its window".into());
    match take(&res) {
        Some(k) => {
            out.param("allocations", k.allocs);
            out.param("deallocations", k.deallocs);
            out.param("events", k.events);
            out.value(
                "allocs_per_event",
                "allocs/event",
                k.allocs as f64 / k.events as f64,
                Better::Lower,
            );
            if k.allocs > 0 {
                out.note(format!(
                    "{} allocations in {} events: the 0-allocation target is not met on this path",
                    k.allocs, k.events
                ));
            }
        }
        None => out.fail("the measuring context did not hand over its counts"),
    }
    out
}
