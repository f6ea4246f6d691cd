//! One input handle sends a burst of events into a context's inbox before the correlator starts
//! (nobody takes them meanwhile), then the context takes and dispatches them all to one listener
//! and exits. Made for instruction counting: under callgrind the main thread's count is the send
//! path (reserve and commit, `stream/*/engine`'s sender side, without contention) and the context
//! thread's is the receive path (take, dispatch, give places back). `scripts/callgrind.sh send`
//! runs it at two burst sizes and reports the difference per event for each side.
//!
//! `cargo run --release -p correlator-benches --example send_burst -- 1000000`

use correlator_benches::{Ev, CHAIN_KIND};

fn main() {
    let n: u64 = correlator_benches::arg(1, 1_000_000, "burst size: a positive integer").max(1);
    let (sent, drained) = correlator_benches::burst(n, |input, main| {
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
    });
    // Timings are printed for a quick look, never asserted (callgrind.sh counts instructions).
    let per = |d: std::time::Duration| d.as_nanos() as f64 / n as f64;
    println!(
        "{n} events sent ({:.1} ns each, into an inbox nobody takes from) and received ({:.1} ns each, start to shutdown)",
        per(sent),
        per(drained)
    );
}
