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

mod pool_async {
    use std::sync::{Arc, Mutex};

    use correlator::{ContextOptions, Correlator, Event, Monitor, Pattern, Scope};

    #[derive(Clone, Debug)]
    struct Swipe {
        card: u64,
        seq: u64,
    }

    impl Event for Swipe {
        type Kind = ();
        fn kind(&self) {}
        fn key(&self) -> Option<u64> {
            Some(self.card)
        }
    }

    type Seen = Arc<Mutex<Vec<(u64, u64)>>>;

    struct PerCard {
        card: u64,
        seen: Seen,
    }

    impl Monitor<Swipe> for PerCard {
        fn on_load(&mut self, cx: &mut Scope<'_, Swipe, Self>) {
            let mine = Pattern::kind(()).key(self.card);
            cx.on_all(
                mine,
                |m: &mut PerCard, _: &mut Scope<'_, Swipe, PerCard>, e: &Swipe| {
                    m.seen.lock().unwrap().push((m.card, e.seq));
                },
            );
        }
    }

    // R2.3, R5.1 (Decisions, "Async sends"): `PoolInput::send_async` and `send_batch_async`, on
    // a current_thread runtime with inboxes of 4 (so the sends wait as a task many times), deliver
    // every event, each key's in the order sent; with `load_per_key_delivering` each card's
    // instance sees all of its events.
    #[test]
    fn r2_3_pool_async_sends_keep_per_key_order() {
        const CARDS: u64 = 8;
        const ROUNDS: u64 = 100;
        let seen: Seen = Arc::default();
        let s = seen.clone();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .build()
                .unwrap();
            let status = rt.block_on(async move {
                let c = Correlator::<Swipe>::builder()
                    .inbox_capacity(4)
                    .build()
                    .unwrap();
                let pool = c.create_pool(ContextOptions::new("cards"), 3).unwrap();
                pool.load_per_key_delivering([()], move |card, _: &Swipe| PerCard {
                    card,
                    seen: s.clone(),
                })
                .unwrap();
                let mut input = pool.input();
                c.start();
                let mut batch = Vec::new();
                for round in 0..ROUNDS {
                    if round % 2 == 0 {
                        for card in 0..CARDS {
                            input.send_async(Swipe { card, seq: round }).await.unwrap();
                        }
                    } else {
                        batch.extend((0..CARDS).map(|card| Swipe { card, seq: round }));
                        input.send_batch_async(&mut batch).await.unwrap();
                        assert!(batch.is_empty());
                    }
                }
                c.shutdown_async().await.unwrap()
            });
            let _ = tx.send(status);
        });
        let status = rx
            .recv_timeout(super::DEADLINE)
            .expect("the pool's async sends did not finish: a lost wake-up or a blocked thread");
        assert_eq!(status.totals.processed, CARDS * ROUNDS);
        let seen = seen.lock().unwrap().clone();
        for card in 0..CARDS {
            let seqs: Vec<u64> = seen
                .iter()
                .filter(|(c, _)| *c == card)
                .map(|&(_, s)| s)
                .collect();
            assert_eq!(seqs, (0..ROUNDS).collect::<Vec<_>>(), "card {card}");
        }
    }
}
