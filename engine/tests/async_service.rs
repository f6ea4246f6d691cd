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
    // R8.1 (Decisions, "Shutdown"): the status task, sharing the correlator through an `Arc`,
    // sees the shutdown that another reference performed, with every trade processed.
    assert!(
        summary.watched.shut_down,
        "R8.1: the status task saw the shutdown"
    );
    assert_eq!(summary.watched.totals.processed, TRADES);
    assert!(summary.snapshots >= 1);
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

/// Shutdown through a shared reference: `shutdown_async(&self)` on an `Arc<Correlator>` that a
/// status task holds too (SPEC R8.1, Decisions, "Shutdown").
mod shared_shutdown {
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
    use std::sync::{mpsc, Arc};
    use std::time::Duration;

    use correlator::{Correlator, DieReason, Event, Monitor, Pattern, Scope, Status};

    #[derive(Clone, Debug)]
    struct Ping;

    impl Event for Ping {
        type Kind = ();
        fn kind(&self) {}
    }

    /// Enough that the sender meets the full inbox (capacity 16) often.
    const PINGS: u64 = 2_000;
    /// Instances whose `on_die` runs during the shutdown (their loads fit the inbox before
    /// `start`).
    const INSTANCES: u64 = 10;
    /// How long a gated `on_die` waits for its gate: far beyond what the test needs, well within
    /// the watchdog's [`super::DEADLINE`].
    const GATE_TIMEOUT: Duration = Duration::from_secs(20);

    /// Counts its `on_die` calls for the shutdown (each slowed a little, so that a caller that
    /// returned before the instances ended would see fewer than were created).
    struct Counted(Arc<AtomicU64>);

    impl Monitor<Ping> for Counted {
        fn on_load(&mut self, cx: &mut Scope<'_, Ping, Self>) {
            // A listener keeps the instance alive until the shutdown ends it.
            cx.on_all(
                Pattern::kind(()),
                |_: &mut Self, _: &mut Scope<'_, Ping, Self>, _: &Ping| {},
            );
        }
        fn on_die(&mut self, reason: &DieReason, _cx: &mut Scope<'_, Ping, Self>) {
            std::thread::sleep(Duration::from_millis(1));
            if matches!(reason, DieReason::Shutdown) {
                self.0.fetch_add(1, Ordering::SeqCst);
            }
        }
    }

    /// What the test task saw: each caller's result, the `on_die` count when each call returned,
    /// and the status task's last snapshot.
    struct Seen {
        from_async: Result<Status, correlator::Error>,
        died_at_async: u64,
        from_blocking: Result<Status, correlator::Error>,
        died_at_blocking: u64,
        status_task: Status,
        status_polls: u64,
    }

    /// Runs `body` on a tokio runtime in a thread of its own; fails if it is not done by
    /// [`super::DEADLINE`] (a hang shows as a failure).
    fn within_deadline<T: Send + 'static>(
        runtime: tokio::runtime::Runtime,
        body: impl std::future::Future<Output = T> + Send + 'static,
    ) -> T {
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let _ = tx.send(runtime.block_on(body));
        });
        rx.recv_timeout(super::DEADLINE)
            .expect("R8.1: the shutdown did not complete (a hang or a lost wake-up)")
    }

    // R8.1 (Decisions, "Shutdown"): an `Arc<Correlator>` shared with a status-polling task shuts
    // down through a shared reference (`shutdown_async(&self)`), while a blocking `shutdown()` on
    // another thread races it: one shutdown, both return the same result, each only once every
    // instance has ended, and the status task, still holding its reference, sees `shut_down`.
    #[test]
    fn r8_1_shutdown_async_through_an_arc_shared_with_a_status_task() {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_time()
            .build()
            .unwrap();
        let seen = within_deadline(rt, async {
            let c = Arc::new(
                Correlator::<Ping>::builder()
                    .inbox_capacity(16)
                    .external_time()
                    .build()
                    .unwrap(),
            );
            let died = Arc::new(AtomicU64::new(0));
            for _ in 0..INSTANCES {
                c.load(Counted(died.clone())).unwrap();
            }
            let mut input = c.input();
            c.start();

            let watched = Arc::clone(&c);
            let status_task = tokio::spawn(async move {
                let mut polls = 0;
                loop {
                    let status = watched.status();
                    polls += 1;
                    if status.shut_down {
                        return (status, polls);
                    }
                    tokio::time::sleep(Duration::from_millis(1)).await;
                }
            });

            for _ in 0..PINGS {
                input.send_to_async(c.main(), Ping).await.unwrap();
            }
            let blocking = {
                let c = Arc::clone(&c);
                let died = died.clone();
                tokio::task::spawn_blocking(move || {
                    let r = c.shutdown();
                    (r, died.load(Ordering::SeqCst))
                })
            };
            let from_async = c.shutdown_async().await;
            let died_at_async = died.load(Ordering::SeqCst);
            let (from_blocking, died_at_blocking) = blocking.await.unwrap();
            let (status_task, status_polls) = status_task.await.unwrap();
            Seen {
                from_async,
                died_at_async,
                from_blocking,
                died_at_blocking,
                status_task,
                status_polls,
            }
        });
        let status = seen.from_async.expect("R8.1: a clean shutdown");
        assert_eq!(
            seen.from_blocking,
            Ok(status.clone()),
            "R8.1: concurrent shutdown calls return the one shutdown's result"
        );
        assert!(status.shut_down);
        assert_eq!(status.totals.processed, PINGS, "R8.1: every ping processed");
        assert_eq!(
            (seen.died_at_async, seen.died_at_blocking),
            (INSTANCES, INSTANCES),
            "R8.1: each call returns only after every instance ended"
        );
        assert!(
            seen.status_task.shut_down,
            "the status task sees the shutdown"
        );
        assert_eq!(seen.status_task.totals.processed, PINGS);
        assert!(seen.status_polls >= 1);
    }

    /// `on_die` waits for a gate that the test opens only after dropping the correlator.
    struct Gated {
        gate: mpsc::Receiver<()>,
        opened: Arc<AtomicBool>,
    }

    impl Monitor<Ping> for Gated {
        fn on_load(&mut self, cx: &mut Scope<'_, Ping, Self>) {
            cx.on_all(
                Pattern::kind(()),
                |_: &mut Self, _: &mut Scope<'_, Ping, Self>, _: &Ping| {},
            );
        }
        fn on_die(&mut self, reason: &DieReason, _cx: &mut Scope<'_, Ping, Self>) {
            assert!(
                matches!(reason, DieReason::Shutdown),
                "ended by the shutdown"
            );
            let opened = self.gate.recv_timeout(GATE_TIMEOUT).is_ok();
            self.opened.store(opened, Ordering::SeqCst);
        }
    }

    // R8.1 (Decisions, "Shutdown"): dropping the correlator while its `shutdown_async` is under
    // way does not wait for that shutdown (which here cannot end before the drop has returned:
    // an `on_die` waits for a gate opened after it), and the future still completes with the
    // shutdown's result.
    #[test]
    fn r8_1_dropping_the_correlator_during_shutdown_async_does_not_wait() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .unwrap();
        let (status, opened) = within_deadline(rt, async {
            let c = Correlator::<Ping>::builder()
                .external_time()
                .build()
                .unwrap();
            let (open, gate) = mpsc::channel();
            let opened = Arc::new(AtomicBool::new(false));
            c.load(Gated {
                gate,
                opened: opened.clone(),
            })
            .unwrap();
            let input = c.input();
            c.start();
            input.send_to(c.main(), Ping).unwrap();
            let shutdown = c.shutdown_async();
            drop(c);
            let _ = open.send(());
            (shutdown.await, opened.load(Ordering::SeqCst))
        });
        let status = status.expect("R8.1: the future completes after the correlator is dropped");
        assert!(status.shut_down);
        assert_eq!(status.totals.processed, 1);
        assert!(
            opened,
            "R8.1: dropping the correlator waited for the shutdown already under way"
        );
    }
}
