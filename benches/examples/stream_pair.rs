//! `stream/1to1/engine` without the harness around it: one input handle on core 1 floods `main`
//! (pinned to core 0, busy-spin, inbox capacity 4096) whose one listener counts. Prints events/s for
//! a few rounds, each in a fresh correlator. For quick A/B runs of the send and receive paths under
//! contention; the harness is where figures are claimed.
//!
//! `cargo run --release -p correlator-benches --example stream_pair -- 5000000 3` (events, rounds, capacity, release batch)

use correlator::{Correlator, Monitor, PinningPlan, Scope, WaitStrategy};
use correlator_benches::{arg, Ev, CHAIN_KIND};
use std::time::Instant;

/// Counts what it receives; the count is checked through the status at shutdown.
struct Sink;

impl Monitor<Ev> for Sink {
    fn on_load(&mut self, cx: &mut Scope<'_, Ev, Self>) {
        cx.on_all(
            correlator::Pattern::kind(CHAIN_KIND),
            |_m: &mut Sink, _cx: &mut Scope<'_, Ev, Sink>, e: &Ev| {
                std::hint::black_box(e.seq);
            },
        );
    }
}

fn round(n: u64, capacity: usize, batch: usize) -> f64 {
    let corr = Correlator::<Ev>::builder()
        .wait_strategy(WaitStrategy::BusySpin)
        .pinning(PinningPlan::cores(vec![0]))
        .inbox_capacity(capacity)
        .release_batch(batch)
        .external_time()
        .build()
        .expect("build");
    corr.load(Sink).expect("load");
    corr.start();
    let input = corr.input();
    let main = corr.main();
    let sender = std::thread::spawn(move || {
        core_affinity::set_for_current(core_affinity::CoreId { id: 1 });
        let t0 = Instant::now();
        for seq in 0..n {
            input
                .send_to(
                    main,
                    Ev {
                        kind: CHAIN_KIND,
                        seq,
                        payload: 0,
                    },
                )
                .expect("send");
        }
        t0.elapsed()
    });
    let elapsed = sender.join().expect("sender");
    let status = corr.shutdown().expect("shutdown");
    let received = status.context(main).map_or(0, |c| c.received);
    assert!(received >= n, "events received: {received}");
    n as f64 / elapsed.as_secs_f64() / 1e6
}

fn main() {
    let n: u64 = arg(1, 5_000_000, "events");
    let rounds: usize = arg(2, 3, "rounds");
    let capacity: usize = arg(3, 4096, "capacity");
    let batch: usize = arg(4, 128, "release batch");
    for _ in 0..rounds {
        println!("{:.2} M events/s", round(n, capacity, batch));
    }
}
