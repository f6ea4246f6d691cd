//! `send_burst` with the burst sent in batches: one input handle fills a reused vector with
//! `batch` events and hands it to `InputHandle::send_batch_to` (one reservation per batch) before
//! the correlator starts, then the context takes and dispatches them all. Under callgrind the main
//! thread's count is the batch send path; `scripts/callgrind.sh send-batch` runs it at two burst
//! sizes with batches of 64 and reports the difference per event. A separate example, so that
//! `send_burst`'s per-event loop (and its instruction count) stays as it was.
//!
//! `cargo run --release -p correlator-benches --example send_batch_burst -- 1000000 64`

use correlator::{Channel, Correlator, WaitStrategy};
use correlator_benches::{Counter, Ev, CHAIN_KIND};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

fn main() {
    let n: u64 = correlator_benches::arg(1, 1_000_000, "burst size: a positive integer").max(1);
    let batch: u64 = correlator_benches::arg(2, 64, "batch size: a positive integer").max(1);
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
    let mut events = Vec::with_capacity(batch as usize);
    let t0 = Instant::now();
    let mut seq = 0;
    while seq < n {
        let end = (seq + batch).min(n);
        events.extend((seq..end).map(|seq| Ev {
            kind: CHAIN_KIND,
            seq,
            payload: 0,
        }));
        input
            .send_batch_to(corr.main(), &mut events)
            .expect("send batch");
        seq = end;
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
        "{n} events sent in batches of {batch} ({:.1} ns each, into an inbox nobody takes from) and received ({:.1} ns each, start to shutdown)",
        per(sent),
        per(drained)
    );
}
