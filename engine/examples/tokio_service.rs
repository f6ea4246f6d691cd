//! An async service embedding the correlator on a `current_thread` tokio runtime: an async feeder
//! task sends trades with `send_to_async` (waiting for room without blocking the runtime's one
//! thread), a monitor emits alerts to a bounded typed output with the `Block` policy (so a slow
//! reader slows the context, which slows the feeder: back-pressure end to end), an async consumer
//! task reads the alerts as a `Stream`, a status task polls the correlator's status through
//! its own `Arc<Correlator>`, and the service shuts down with `shutdown_async` through another
//! reference to the same correlator (it takes `&self`: nobody needs to own it).
//!
//! Every call on the runtime's thread is non-blocking: a blocking `send_to` in the feeder would
//! stop the consumer task, whose output would fill, whose context would stop taking trades, and
//! the blocked send would never end (`tests/async_service.rs` runs this service under both runtime
//! flavours with a watchdog for that).
//!
//! Run: `cargo run -q --release -p correlator --features async --example tokio_service`

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use correlator::{
    Correlator, Event, Monitor, Output, OutputOptions, OutputReceiver, Overflow, Pattern, Scope,
    Status,
};

/// A trade: the input event.
#[derive(Clone, Debug)]
pub struct Trade {
    pub seq: u64,
    pub price: u32,
}

impl Event for Trade {
    type Kind = ();
    fn kind(&self) {}
}

/// An alert: not an event, just what the service reads (a typed output).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Alert {
    pub seq: u64,
    pub price: u32,
}

/// A trade at or above this price raises an alert.
pub const ALERT_PRICE: u32 = 900;
/// Small on purpose: the feeder meets a full inbox and waits for room often.
pub const INBOX_CAPACITY: usize = 16;
/// The alert output's bound (policy `Block`).
pub const ALERT_BOUND: usize = 8;
/// How often the status task takes a snapshot.
pub const STATUS_EVERY: Duration = Duration::from_millis(5);

/// The price of trade `seq`: a fixed pseudo-random walk, so every run has the same alerts.
pub fn price_of(seq: u64) -> u32 {
    (seq.wrapping_mul(7919) % 1000) as u32
}

/// The alerts the trades `0..trades` must raise, in order.
pub fn expected_alerts(trades: u64) -> Vec<Alert> {
    (0..trades)
        .map(|seq| Alert {
            seq,
            price: price_of(seq),
        })
        .filter(|a| a.price >= ALERT_PRICE)
        .collect()
}

/// Emits an alert for every trade at or above [`ALERT_PRICE`].
struct Watch {
    alerts: Output<Alert>,
}

impl Monitor<Trade> for Watch {
    fn on_load(&mut self, cx: &mut Scope<'_, Trade, Self>) {
        cx.on_all(
            Pattern::kind(()),
            |m: &mut Watch, cx: &mut Scope<'_, Trade, Watch>, t: &Trade| {
                if t.price >= ALERT_PRICE {
                    // `false`: dropped or discarded, and counted in the status (`output_drops`).
                    let _queued = cx.emit_to(
                        &m.alerts,
                        Alert {
                            seq: t.seq,
                            price: t.price,
                        },
                    );
                }
            },
        );
    }
}

/// What a run of the service did.
#[derive(Debug)]
pub struct Summary {
    /// Trades the feeder sent.
    pub sent: u64,
    /// Alerts the consumer read, in the order it read them.
    pub alerts: Vec<Alert>,
    /// The correlator's status at shutdown.
    pub status: Status,
    /// The status task's last snapshot: the first that showed the correlator shut down.
    pub watched: Status,
    /// How many snapshots the status task took.
    pub snapshots: u64,
}

/// The next item of a stream, as a future (what `StreamExt::next` does, without a dependency).
fn next<S: futures_core::Stream + Unpin>(s: &mut S) -> impl Future<Output = Option<S::Item>> + '_ {
    std::future::poll_fn(move |cx| Pin::new(&mut *s).poll_next(cx))
}

/// Reads alerts until the output ends (at shutdown).
async fn consume(mut alerts: OutputReceiver<Alert>) -> Vec<Alert> {
    let mut got = Vec::new();
    while let Some(a) = next(&mut alerts).await {
        got.push(a);
        // Let the feeder run between reads: the reader is slower than the context.
        tokio::task::yield_now().await;
    }
    got
}

/// Polls the status every [`STATUS_EVERY`] (as a service's health endpoint or metrics task
/// would) until the correlator has shut down; returns the last snapshot and how many it took.
async fn watch(c: Arc<Correlator<Trade>>) -> (Status, u64) {
    let mut snapshots = 0;
    loop {
        let status = c.status();
        snapshots += 1;
        if status.shut_down {
            return (status, snapshots);
        }
        tokio::time::sleep(STATUS_EVERY).await;
    }
}

/// The service: runs on whatever tokio runtime polls it (it spawns its tasks there).
///
/// # Panics
/// If the correlator cannot be built or refuses a send (it does not, while it runs).
pub async fn run_service(trades: u64) -> Summary {
    // Shared with the status task: each holds an `Arc`.
    let c = Arc::new(
        Correlator::<Trade>::builder()
            .inbox_capacity(INBOX_CAPACITY)
            .build()
            .expect("a valid configuration"),
    );
    let (out, alerts) = c
        .typed_output::<Alert>(OutputOptions::bounded(ALERT_BOUND).policy(Overflow::Block))
        .expect("a valid bound");
    c.load(Watch { alerts: out }).expect("the correlator runs");
    let main = c.main();
    let mut input = c.input();
    c.start();

    let consumer = tokio::spawn(consume(alerts));
    let status_task = tokio::spawn(watch(Arc::clone(&c)));
    let feeder = tokio::spawn(async move {
        for seq in 0..trades {
            let trade = Trade {
                seq,
                price: price_of(seq),
            };
            input
                .send_to_async(main, trade)
                .await
                .expect("the correlator runs");
        }
        trades
    });

    let sent = feeder.await.expect("the feeder task");
    // Waits for every trade to be processed and the contexts to stop, without blocking this
    // thread: the consumer keeps reading meanwhile, and its stream ends after the last alert.
    // Through a shared reference: the status task still holds its own.
    let status = c.shutdown_async().await.expect("a clean shutdown");
    let alerts = consumer.await.expect("the consumer task");
    let (watched, snapshots) = status_task.await.expect("the status task");
    Summary {
        sent,
        alerts,
        status,
        watched,
        snapshots,
    }
}

fn main() {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .expect("a tokio runtime");
    let trades = 100_000;
    let summary = runtime.block_on(run_service(trades));
    let totals = &summary.status.totals;
    println!(
        "sent {} trades, {} processed, {} alerts read (expected {}), first {:?}, last {:?}",
        summary.sent,
        totals.processed,
        summary.alerts.len(),
        expected_alerts(trades).len(),
        summary.alerts.first(),
        summary.alerts.last(),
    );
    println!(
        "the monitor waited {:.1} ms for the alert reader (Block output, bound {ALERT_BOUND})",
        totals.output_blocked_ns as f64 / 1e6
    );
    println!(
        "the status task took {} snapshots; its last: {}",
        summary.snapshots, summary.watched
    );
    assert!(
        summary.watched.shut_down,
        "the status task saw the shutdown"
    );
    assert_eq!(
        summary.alerts,
        expected_alerts(trades),
        "every alert, in order"
    );
}
