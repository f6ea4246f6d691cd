//! `burst/{B}/engine`: the disruptor crate's burst shape (see [`crate::scenario::burst`]) through
//! the engine: an input handle on slot 1 sends each burst with `send_to`, one context on slot 0
//! runs a listener that checks the sequence, counts and stores the sink.

use super::{spin_or_park, wait_name, Cx, EngineRun, Seen};
use crate::scenario::burst::{finish, spawn_producer, Check, Sink, BURSTS, BURST_CAPACITY};
use crate::scenario::{put, slot, take, timed_window, Ev, Family, RunCtx, Scenario, Slot};
use crate::scenario::{Outcome, STOP_CHECK_EVERY};
use correlator::{DieReason, Monitor, Pattern};
use std::sync::Arc;

/// Registers `burst/{B}/engine` for every burst size.
pub fn register_burst(v: &mut Vec<Scenario>) {
    for b in BURSTS {
        v.push(Scenario::new(
            format!("burst/{b}/engine"),
            format!("bursts of {b} sent to one context (inbox capacity {BURST_CAPACITY}), latency per event"),
            2,
            Family::Engine,
            move |ctx| burst(ctx, b),
        ));
    }
}

struct Consumer {
    c: Check,
    seen: Arc<Seen>,
    out: Slot<(u64, u64)>,
}

impl Monitor<Ev> for Consumer {
    fn on_load(&mut self, cx: &mut Cx<'_, Self>) {
        cx.on_all(
            Pattern::kind(0),
            |m: &mut Consumer, _cx: &mut Cx<'_, Consumer>, e: &Ev| {
                m.c.take(e);
                if m.c.next % STOP_CHECK_EVERY == 1 {
                    m.seen.mark();
                }
            },
        );
    }

    fn on_die(&mut self, _reason: &DieReason, _cx: &mut Cx<'_, Self>) {
        put(&self.out, (self.c.next, self.c.bad));
    }
}

fn burst(ctx: &RunCtx, b: usize) -> Outcome {
    let mut out = Outcome::default();
    let wait = spin_or_park(ctx, 2);
    out.param("wait_strategy", wait_name(wait));
    let sink: Sink = Arc::default();
    let seen = Arc::new(Seen::default());
    let res = slot();
    let consumer = Consumer {
        c: Check::new(sink.clone()),
        seen: seen.clone(),
        out: res.clone(),
    };
    let Some((run, ())) =
        EngineRun::new(ctx, BURST_CAPACITY, wait).start(&mut out, |c, _, _| Ok(c.load(consumer)?))
    else {
        return out;
    };
    let (c, shared) = (&run.c, &run.sh);
    let (input, main) = (c.input(), c.main());
    let producer = spawn_producer(ctx, shared, &sink, b, move |first| {
        (first..first + b as u64).all(|s| {
            input
                .send_to(
                    main,
                    Ev {
                        kind: 0,
                        seq: s,
                        t_ns: 0,
                        aux: 0,
                    },
                )
                .is_ok()
        })
    });
    let w = timed_window(ctx, shared);
    let d = producer.join().expect("producer panicked");
    run.finish(&mut out);
    let placement = seen.placement("context main (consumer)", ctx.map.core_for(0));
    let consumer = take(&res).map(|(next, bad)| (placement, next, bad));
    finish(&mut out, b, w, d, consumer);
    out
}
