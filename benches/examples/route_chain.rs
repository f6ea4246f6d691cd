//! One context runs one chain of routed events (`route/dispatch`'s path: each event routes the
//! next, one listener) and exits. Made for instruction counting: `scripts/callgrind.sh` runs it
//! under callgrind at two chain lengths and reports the difference per event, for the context
//! thread alone, so that start-up and shutdown cancel out.
//!
//! `cargo run --release -p correlator-benches --example route_chain -- 1000000`

use correlator::{Correlator, WaitStrategy};
use correlator_benches::{Chain, Ev, CHAIN_KIND};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

fn main() {
    let len: u64 = correlator_benches::arg(1, 1_000_000, "chain length: a positive integer");
    let done = Arc::new(AtomicU64::new(0));
    let corr = Correlator::<Ev>::builder()
        .wait_strategy(WaitStrategy::SpinYieldPark)
        .external_time()
        .build()
        .expect("build");
    corr.load(Chain {
        done: done.clone(),
        idle_listeners: 0,
    })
    .expect("load");
    corr.input()
        .send_to(
            corr.main(),
            Ev {
                kind: CHAIN_KIND,
                seq: len.max(1) - 1,
                payload: 0,
            },
        )
        .expect("send");
    corr.start();
    let status = corr.shutdown().expect("shutdown");
    assert_eq!(
        done.load(Ordering::Acquire),
        1,
        "the chain did not complete"
    );
    let processed = status.context(corr.main()).map_or(0, |c| c.processed);
    assert_eq!(processed, len.max(1), "events processed");
    println!("{processed} events routed");
}
