//! `send_burst` with the burst sent in batches: one input handle fills a reused vector with
//! `batch` events and hands it to `InputHandle::send_batch_to` (one reservation per batch) before
//! the correlator starts, then the context takes and dispatches them all. Under callgrind the main
//! thread's count is the batch send path; `scripts/callgrind.sh send-batch` runs it at two burst
//! sizes with batches of 64 and reports the difference per event. A separate example, so that
//! `send_burst`'s per-event loop (and its instruction count) stays as it was.
//!
//! `cargo run --release -p correlator-benches --example send_batch_burst -- 1000000 64`

use correlator_benches::{Ev, CHAIN_KIND};

fn main() {
    let n: u64 = correlator_benches::arg(1, 1_000_000, "burst size: a positive integer").max(1);
    let batch: u64 = correlator_benches::arg(2, 64, "batch size: a positive integer").max(1);
    let (sent, drained) = correlator_benches::burst(n, |input, main| {
        let mut events = Vec::with_capacity(batch as usize);
        let mut seq = 0;
        while seq < n {
            let end = (seq + batch).min(n);
            events.extend((seq..end).map(|seq| Ev {
                kind: CHAIN_KIND,
                seq,
                payload: 0,
            }));
            input.send_batch_to(main, &mut events).expect("send batch");
            seq = end;
        }
    });
    // Timings are printed for a quick look, never asserted (callgrind.sh counts instructions).
    let per = |d: std::time::Duration| d.as_nanos() as f64 / n as f64;
    println!(
        "{n} events sent in batches of {batch} ({:.1} ns each, into an inbox nobody takes from) and received ({:.1} ns each, start to shutdown)",
        per(sent),
        per(drained)
    );
}
