//! The `tokio_service` example under both tokio runtime flavours (SPEC R2.3, R5.1, R4.3, R8.1):
//! every alert arrives, in order, and nothing blocks a runtime thread. A watchdog thread fails the
//! test if the service does not finish in time, so a blocking call on the `current_thread`
//! runtime's one thread (a deadlock there) shows as a failure, not a hang.
#![cfg(feature = "async")]

#[path = "../examples/tokio_service.rs"]
#[allow(dead_code)]
mod service;

use std::sync::mpsc;
use std::time::Duration;

/// Enough trades that the feeder meets the full inbox and the context the full output many times.
const TRADES: u64 = 20_000;
/// The service finishes in well under a second; past this it is stuck.
const DEADLINE: Duration = Duration::from_secs(60);

/// Runs the service on `runtime` in a thread of its own; fails if it is not done by [`DEADLINE`].
fn run_with_watchdog(flavour: &'static str, runtime: tokio::runtime::Runtime) -> service::Summary {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let summary = runtime.block_on(service::run_service(TRADES));
        let _ = tx.send(summary);
    });
    match rx.recv_timeout(DEADLINE) {
        Ok(summary) => summary,
        Err(_) => panic!(
            "the service on the {flavour} runtime did not finish in {DEADLINE:?}: a blocking call \
             on a runtime thread (or a lost wake-up)"
        ),
    }
}

fn check(summary: &service::Summary) {
    assert_eq!(summary.sent, TRADES);
    assert_eq!(
        summary.status.totals.processed, TRADES,
        "R8.1: every trade processed"
    );
    // R2.3 + R4.3: one sender, one context, one output: the alerts in trade order, none lost
    // (`Block` output) or duplicated.
    assert_eq!(summary.alerts, service::expected_alerts(TRADES));
}

// R5.1, R4.3, R8.1: the async feeder waits for room without blocking the one runtime thread that
// the consumer task needs too; shutdown_async completes there.
#[test]
fn r5_1_service_on_current_thread_runtime() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap();
    check(&run_with_watchdog("current_thread", rt));
}

// The same on a multi-threaded runtime (tasks may move between worker threads: the futures are
// `Send`).
#[test]
fn r5_1_service_on_multi_thread_runtime() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_time()
        .build()
        .unwrap();
    check(&run_with_watchdog("multi_thread", rt));
}
