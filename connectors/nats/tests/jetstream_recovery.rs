//! JetStream ingress when the server fails under it, against a real nats-server: a crash
//! (`SIGKILL`) and restart on the same port and store, and the durable consumer deleted while
//! the ingress runs. What they check is the at-least-once contract of `Connector::consume`:
//! nothing lost, repeats bounded, and the consumer settles (nothing left pending, nothing
//! delivered again forever).

mod support;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use correlator::{Correlator, Monitor, Pattern, Scope};
use correlator_nats::{Connector, Ingress, JetStreamSource, JsonCodec, LocalServer};
use support::*;

const STREAM: &str = "T";
/// The server's acknowledgement wait in these tests: short, so that a redelivery shows quickly.
const ACK_WAIT: Duration = Duration::from_secs(1);

/// Records every event it processes, after `delay` of simulated work (so that a stream takes a
/// few seconds and a crash lands in the middle of it).
struct Slow {
    seen: Arc<Mutex<Vec<u64>>>,
    delay: Duration,
}

impl Monitor<Ev> for Slow {
    fn on_load(&mut self, cx: &mut Scope<'_, Ev, Self>) {
        cx.on_all(
            Pattern::kind(()),
            |m: &mut Slow, _cx: &mut Scope<'_, Ev, Slow>, e: &Ev| {
                std::thread::sleep(m.delay);
                m.seen.lock().unwrap().push(e.seq);
            },
        );
    }
}

fn slow_engine(delay: Duration) -> (Correlator<Ev>, Arc<Mutex<Vec<u64>>>) {
    let c = Correlator::<Ev>::builder()
        .inbox_capacity(64)
        .build()
        .unwrap();
    let seen = Arc::new(Mutex::new(Vec::new()));
    c.load(Slow {
        seen: seen.clone(),
        delay,
    })
    .unwrap();
    c.start();
    (c, seen)
}

fn consume(nats: &Connector, source: JetStreamSource, c: &Correlator<Ev>) -> Ingress {
    nats.consume(source, Arc::new(JsonCodec::new()), c.input(), c.main())
        .unwrap()
}

/// How often each sequence was processed.
fn counts(seen: &[u64]) -> BTreeMap<u64, usize> {
    let mut counts = BTreeMap::new();
    for &s in seen {
        *counts.entry(s).or_insert(0) += 1;
    }
    counts
}

/// Waits until every sequence of `1..=total` was processed at least once, up to `limit`.
fn wait_for_all(seen: &Arc<Mutex<Vec<u64>>>, total: u64, limit: Duration, nats: &Connector) {
    let deadline = Instant::now() + limit;
    loop {
        let c = counts(&snapshot(seen));
        if (1..=total).all(|s| c.contains_key(&s)) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "not every message reached the engine: {} of {total} distinct; missing e.g. {:?}; {}",
            c.len(),
            (1..=total)
                .filter(|s| !c.contains_key(s))
                .take(10)
                .collect::<Vec<_>>(),
            nats.status()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Kills the server right after a new batch has reached the ingress, once the engine has
/// processed `part` events (or, should the stream end first, once its last one is processed);
/// returns the highest sequence the engine had processed then.
///
/// This is the sharp moment for the acknowledgement cycle. The server has just delivered the
/// batch (on the acknowledgement of the batch before the one in the engine), and a busy server
/// writes its consumer state only about every 100 ms: a `SIGKILL` a few milliseconds later
/// often restores a consumer that has not delivered that batch, while the ingress holds it and
/// acknowledges it, and the one in the engine, once the server is back. An all-up-to
/// acknowledgement (`AckAll`) of it then lifts the server's ack floor above its delivered
/// sequence; the server delivers the batch again below its floor, ignores every `AckAll` for
/// it, and delivers it again every `ack_wait` for ever (issue #37 item 11), and with two
/// batches' worth stuck there it delivers nothing new. An explicit acknowledgement of each
/// message clears it.
fn kill_right_after_a_batch_arrives(
    server: &mut LocalServer,
    nats: &Connector,
    seen: &Arc<Mutex<Vec<u64>>>,
    part: u64,
    total: u64,
    batch: u64,
) -> u64 {
    wait_until("the stream to reach the crash point", || {
        snapshot(seen).len() as u64 >= part
    });
    // The next batch boundary of what the ingress received: reached when the server has just
    // delivered a whole batch. Polled every 200 µs (the window is ~100 ms), not spun.
    let target = (nats.status().received / batch + 1) * batch;
    let deadline = Instant::now() + Duration::from_secs(30);
    while nats.status().received < target && !seen.lock().unwrap().contains(&total) {
        assert!(
            Instant::now() < deadline,
            "no new batch reached the ingress (received {} of {target}); {}",
            nats.status().received,
            nats.status()
        );
        std::thread::sleep(Duration::from_micros(200));
    }
    let processed = snapshot(seen).iter().copied().max().unwrap_or(0);
    let received = nats.status().received;
    server.kill().unwrap();
    eprintln!("crash: engine at {processed}, ingress received {received}");
    processed
}

/// After a crash and restart: the consumer goes on past the point of the crash, i.e. within
/// `limit` the server's ack floor passes the batches that were in flight then (`to`). A consumer
/// stuck with messages pending below its ack floor fails here: they fill its `max_ack_pending`,
/// so it delivers nothing new and its floor stays where it is.
fn wait_for_the_consumer_to_pass(nats: &Connector, to: u64, limit: Duration) {
    let deadline = Instant::now() + limit;
    loop {
        let (floor, pending) = ack_state(nats, STREAM, "c-g1");
        if floor >= to {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "the consumer did not get past the crash within {limit:?}: ack floor {floor} (want \
             at least {to}), {pending} pending (messages pending below the floor are delivered \
             again every ack_wait for ever); {}",
            nats.status()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A stream of `TOTAL` messages runs through the connector (batches of 64, one event per ms of
/// work); the server is SIGKILLed twice, a third and two thirds into the stream, each time right
/// after a batch reached the ingress (see [`kill_right_after_a_batch_arrives`]), and restarted on
/// the same port and store after `outage`. Checks, after each restart, that the consumer gets
/// past the crash (its ack floor passes the batches in flight then); and at the end (a) every
/// message reached the engine, (b) once settled, nothing more reaches it over several
/// `ack_wait`s (no endless redelivery) and no message was processed more than a bounded number
/// of times, (c) the consumer has nothing pending on the server.
fn crash_and_restart(outage: Duration) {
    const TOTAL: u64 = 1200;
    const BATCH: u64 = 64;
    let mut server = server();
    let nats = connect(&server);
    nats.ensure_stream(STREAM, &["t.>"]).unwrap();
    publish_js(&nats, "t.a", 1..=TOTAL);
    let (c, seen) = slow_engine(Duration::from_millis(1));
    let source = JetStreamSource::new(STREAM, "c")
        .batch(BATCH as usize)
        .ack_wait(ACK_WAIT);
    let ingress = consume(&nats, source, &c);
    // Two crashes, a third and two thirds into the stream, each checked at once (a later crash
    // can undo the damage of an earlier one): a kill that missed the bad case is made up for by
    // the other.
    for part in [TOTAL / 3, 2 * TOTAL / 3] {
        let processed =
            kill_right_after_a_batch_arrives(&mut server, &nats, &seen, part, TOTAL, BATCH);
        std::thread::sleep(outage);
        server.restart().unwrap();
        // The engine held at most the rest of one batch and one more; one more after those.
        let past = (processed / BATCH + 3) * BATCH;
        wait_for_the_consumer_to_pass(&nats, past.min(TOTAL), ACK_WAIT * 15);
    }
    // (a) nothing lost.
    wait_for_all(&seen, TOTAL, Duration::from_secs(40), &nats);
    // (c) the consumer settles: nothing unacknowledged on the server.
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let (floor, pending) = ack_state(&nats, STREAM, "c-g1");
        if (floor, pending) == (TOTAL, 0) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the consumer did not settle: ack floor {floor} (want {TOTAL}), {pending} pending; {}",
            nats.status()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    // (b) settled means settled: nothing reaches the engine again over four ack waits.
    let before = snapshot(&seen).len();
    std::thread::sleep(ACK_WAIT * 4);
    let after = snapshot(&seen);
    assert_eq!(
        after.len(),
        before,
        "the engine got {} more events after the stream was done and acknowledged (endless \
         redelivery); {}",
        after.len() - before,
        nats.status()
    );
    assert_eq!(ack_state(&nats, STREAM, "c-g1"), (TOTAL, 0));
    // Repeats are bounded: the batches in flight around each crash, each at most a few times.
    let repeats: usize = counts(&after).values().map(|n| n - 1).sum();
    let worst = counts(&after).values().copied().max().unwrap_or(0);
    eprintln!(
        "outage {outage:?}: {repeats} repeats, worst {worst}; {}",
        nats.status()
    );
    assert!(
        worst <= 3 && repeats <= 8 * 64,
        "too many repeats: {repeats} in all, one message {worst} times; {}",
        nats.status()
    );
    ingress.stop();
    c.shutdown().unwrap();
}

#[test]
fn at_least_once_across_a_1s_server_crash_settles_without_endless_redelivery() {
    crash_and_restart(Duration::from_secs(1));
}

#[test]
fn at_least_once_across_a_3s_server_crash_settles_without_endless_redelivery() {
    crash_and_restart(Duration::from_secs(3));
}

/// The durable consumer is deleted on the server while the ingress runs: the ingress notices
/// (a deleted consumer answers no pull and says nothing), re-creates it at its last
/// acknowledgement floor, reports it in `status()` and the log, and what is published afterwards
/// arrives; what it had processed before is not processed again.
#[test]
fn deleted_consumer_is_recreated_reported_and_nothing_published_after_is_lost() {
    let server = server();
    let nats = connect(&server);
    nats.ensure_stream(STREAM, &["t.>"]).unwrap();
    publish_js(&nats, "t.a", 1..=5);
    let (c, seen) = engine(None);
    let source = JetStreamSource::new(STREAM, "c")
        .batch(32)
        .ack_wait(ACK_WAIT);
    let ingress = consume(&nats, source, &c);
    wait_until("the first five", || snapshot(&seen).len() == 5);
    wait_until("their acknowledgement", || {
        ack_state(&nats, STREAM, "c-g1") == (5, 0)
    });
    let js = nats.jetstream().clone();
    nats.block_on(async {
        let stream = js.get_stream(STREAM).await.unwrap();
        stream.delete_consumer("c-g1").await.unwrap();
    });
    publish_js(&nats, "t.a", 6..=10);
    wait_for_all(&seen, 10, Duration::from_secs(40), &nats);
    wait_until("the acknowledgement", || {
        ack_state(&nats, STREAM, "c-g1") == (10, 0)
    });
    assert_eq!(snapshot(&seen), (1..=10).collect::<Vec<_>>());
    let status = nats.status();
    assert_eq!(status.consumer_recreated, 1, "{status}");
    let error = status.last_error.unwrap_or_default();
    assert!(error.contains("deleted"), "last error: {error}");
    ingress.stop();
    c.shutdown().unwrap();
}
