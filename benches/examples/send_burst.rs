//! One input handle sends a burst of events into a context's inbox before the correlator starts
//! (nobody takes them meanwhile), then the context takes and dispatches them all to one listener
//! and exits. Made for instruction counting: under callgrind the main thread's count is the send
//! path (reserve and commit, `stream/*/engine`'s sender side, without contention) and the context
//! thread's is the receive path (take, dispatch, give places back). `scripts/callgrind.sh send`
//! runs it at two burst sizes and reports the difference per event for each side.
//!
//! `cargo run --release -p correlator-benches --example send_burst -- 1000000`

use correlator::{Channel, Correlator, WaitStrategy};
use correlator_benches::{Counter, Ev, CHAIN_KIND};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

fn main() {
    let n: u64 = correlator_benches::arg(1, 1_000_000, "burst size: a positive integer").max(1);
    let seen = Arc::new(AtomicU64::new(0));
    let corr = Correlator::<Ev>::builder()
        .wait_strategy(WaitStrategy::SpinYieldPark)
        // One more place for the monitor's load entry, queued before the burst.
        .inbox_capacity(n as usize + 1)
        .external_time()
        .build()
        .expect("build");
    corr.load(Counter {
        channel: Channel::DEFAULT,
        seen: seen.clone(),
    })
    .expect("load");
    let input = corr.input();
    let t0 = Instant::now();
    for seq in 0..n {
        input
            .send_to(
                corr.main(),
                Ev {
                    kind: CHAIN_KIND,
                    seq,
                    payload: 0,
                },
            )
            .expect("send");
    }
    let sent = t0.elapsed();
    let t1 = Instant::now();
    corr.start();
    let status = corr.shutdown().expect("shutdown");
    let drained = t1.elapsed();
    assert_eq!(seen.load(Ordering::Acquire), n, "events dispatched");
    let received = status.context(corr.main()).map_or(0, |c| c.received);
    assert!(received >= n, "events received: {received}");
    // Timings are printed for a quick look, never asserted (callgrind.sh counts instructions).
    let per = |d: std::time::Duration| d.as_nanos() as f64 / n as f64;
    println!(
        "{n} events sent ({:.1} ns each, into an inbox nobody takes from) and received ({:.1} ns each, start to shutdown)",
        per(sent),
        per(drained)
    );
}
