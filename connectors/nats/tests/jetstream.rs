//! JetStream ingress against a real nats-server: acknowledgement after processing, restarts,
//! de-duplication, dead letters, reconnection.

mod support;

use std::sync::Arc;
use std::time::Duration;

use correlator::Correlator;
use correlator_nats::{Connector, Ingress, JetStreamSource, JsonCodec, LocalServer};
use futures_util::StreamExt;
use support::*;

const STREAM: &str = "T";

fn source() -> JetStreamSource {
    JetStreamSource::new(STREAM, "c").batch(32)
}

/// A real server whose stream `T` holds the events `seqs` on `t.a`, and a connector to it.
fn stream_with(seqs: std::ops::RangeInclusive<u64>) -> (LocalServer, Connector) {
    let server = server();
    let nats = connect(&server);
    nats.ensure_stream(STREAM, &["t.>"]).unwrap();
    publish_js(&nats, "t.a", seqs);
    (server, nats)
}

/// `source` into `c`'s main context through a new input handle.
fn consume(nats: &Connector, source: JetStreamSource, c: &Correlator<Ev>) -> Ingress {
    nats.consume(source, Arc::new(JsonCodec::new()), c.input(), c.main())
        .unwrap()
}

#[test]
fn acks_only_after_the_engine_processed_the_batch() {
    let (_server, nats) = stream_with(1..=5);
    let gate = Gate::default();
    let (c, seen) = engine(Some(gate.clone()));
    let ingress = consume(&nats, source(), &c);
    // All five are delivered to the engine, which holds the first one: nothing is acknowledged.
    wait_until("delivery", || nats.status().delivered == 5);
    // Watched for half a second (an acknowledgement sent too early shows up in that time).
    for _ in 0..50 {
        assert_eq!(ack_state(&nats, STREAM, "c-g1"), (0, 5));
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(nats.status().acknowledged, 0);
    gate.open();
    wait_until("the acknowledgement", || {
        ack_state(&nats, STREAM, "c-g1") == (5, 0)
    });
    assert_eq!(snapshot(&seen), [1, 2, 3, 4, 5]);
    assert_eq!(nats.status().acknowledged, 5);
    ingress.stop();
    c.shutdown().unwrap();
}

// A process dies with a partial batch unacknowledged while more messages arrive: its successor
// gets the unacknowledged ones first and in order, at once (not after `ack_wait`, 30 s here).
#[test]
fn restart_resumes_at_the_ack_floor_in_order() {
    let (server, nats) = stream_with(1..=3);
    let gate = Gate::default();
    let (dead, _) = engine(Some(gate.clone()));
    {
        let crashing = connect(&server);
        let _ingress = crashing
            .consume(
                source(),
                Arc::new(JsonCodec::new()),
                dead.input(),
                dead.main(),
            )
            .unwrap();
        wait_until("delivery", || crashing.status().delivered == 3);
        // Dropping the connector ends its tasks and connection without acknowledging: as if
        // the process had died.
    }
    assert_eq!(ack_state(&nats, STREAM, "c-g1"), (0, 3));
    publish_js(&nats, "t.a", 4..=6);
    let (c, seen) = engine(None);
    let ingress = consume(&nats, source(), &c);
    wait_until("all six", || snapshot(&seen).len() >= 6);
    assert_eq!(snapshot(&seen), [1, 2, 3, 4, 5, 6]);
    wait_until("the acknowledgement", || {
        ack_state(&nats, STREAM, "c-g2") == (6, 0)
    });
    ingress.stop();
    c.shutdown().unwrap();
    gate.open();
    dead.shutdown().unwrap();
}

/// Runs the redelivery scenario: the engine holds the first event past `ack_wait`, so the
/// server delivers the batch again before it is acknowledged. Returns what the engine saw.
fn redelivery(dedup: bool) -> (Vec<u64>, u64) {
    let (_server, nats) = stream_with(1..=4);
    let gate = Gate::default();
    let (c, seen) = engine(Some(gate.clone()));
    let source = source().ack_wait(Duration::from_secs(1)).dedup(dedup);
    let ingress = consume(&nats, source, &c);
    wait_until("the redelivery", || nats.status().received >= 8);
    gate.open();
    wait_until("the acknowledgement", || {
        ack_state(&nats, STREAM, "c-g1").1 == 0
    });
    ingress.stop();
    c.shutdown().unwrap();
    (snapshot(&seen), nats.status().duplicates)
}

#[test]
fn dedup_by_stream_sequence_drops_redeliveries() {
    let (seen, duplicates) = redelivery(true);
    assert_eq!(seen, [1, 2, 3, 4]);
    assert_eq!(duplicates, 4);
}

#[test]
fn without_dedup_a_redelivery_repeats_events() {
    let (seen, duplicates) = redelivery(false);
    assert_eq!(seen, [1, 2, 3, 4, 1, 2, 3, 4]);
    assert_eq!(duplicates, 0);
}

#[test]
fn undecodable_message_is_counted_and_dead_lettered_never_a_crash() {
    let server = server();
    let nats = connect(&server);
    nats.ensure_stream(STREAM, &["t.>"]).unwrap();
    let mut dead = nats
        .block_on(
            nats.client()
                .subscribe(correlator_nats::DEFAULT_DEAD_LETTER_SUBJECT),
        )
        .unwrap();
    nats.round_trip().unwrap();
    publish_js(&nats, "t.a", [1]);
    publish_raw(&nats, "t.bad", b"{not json".to_vec());
    publish_js(&nats, "t.a", [2]);
    let (c, seen) = engine(None);
    let ingress = consume(&nats, source(), &c);
    let letter = nats
        .block_on(async { tokio_timeout(dead.next()).await })
        .expect("a dead letter within 30 s")
        .expect("the subscription is open");
    assert_eq!(&letter.payload[..], b"{not json");
    let headers = letter.headers.expect("headers");
    let h = |name| headers.get(name).map(|v| v.as_str().to_string());
    assert_eq!(
        h(correlator_nats::dead_letter_headers::SUBJECT).as_deref(),
        Some("t.bad")
    );
    assert_eq!(
        h(correlator_nats::dead_letter_headers::STREAM_SEQUENCE).as_deref(),
        Some("2")
    );
    assert!(h(correlator_nats::dead_letter_headers::ERROR).is_some());
    // A subscription unsubscribes on drop, which needs the runtime.
    nats.block_on(async move { drop(dead) });
    wait_until("the acknowledgement", || {
        ack_state(&nats, STREAM, "c-g1") == (3, 0)
    });
    assert_eq!(snapshot(&seen), [1, 2]);
    let status = nats.status();
    assert_eq!((status.decode_errors, status.dead_lettered), (1, 1));
    ingress.stop();
    c.shutdown().unwrap();
}

async fn tokio_timeout<F: std::future::Future>(f: F) -> Option<F::Output> {
    tokio::time::timeout(Duration::from_secs(30), f).await.ok()
}

#[test]
fn lost_connection_reconnects_shows_in_status_and_loses_nothing() {
    let (mut server, nats) = stream_with(1..=5);
    let (c, seen) = engine(None);
    let ingress = consume(&nats, source(), &c);
    wait_until("the first five", || snapshot(&seen).len() == 5);
    wait_until("their acknowledgement", || nats.status().acknowledged == 5);
    server.stop().unwrap();
    wait_until("the status to show the loss", || !nats.status().connected);
    server.restart().unwrap();
    wait_until("the reconnection", || {
        let s = nats.status();
        s.connected && s.reconnects >= 1
    });
    publish_js(&nats, "t.a", 6..=10);
    wait_until("all ten", || snapshot(&seen).len() >= 10);
    wait_until("the acknowledgement", || {
        ack_state(&nats, STREAM, "c-g1") == (10, 0)
    });
    assert_eq!(snapshot(&seen), (1..=10).collect::<Vec<_>>());
    assert_eq!(nats.status().disconnects, 1);
    ingress.stop();
    c.shutdown().unwrap();
}

/// A server with stream `name` on `subject`, made with `config`'s retention and limits, holding
/// events 1 to 20; and a connector to it.
fn stream_made(
    name: &str,
    subject: &str,
    config: async_nats::jetstream::stream::Config,
) -> (LocalServer, Connector) {
    let server = server();
    let nats = connect(&server);
    let js = nats.jetstream().clone();
    let config = async_nats::jetstream::stream::Config {
        name: name.to_owned(),
        subjects: vec![format!("{subject}.>")],
        ..config
    };
    nats.block_on(async { js.create_stream(config).await.map(|_| ()) })
        .expect("create the stream");
    publish_js(&nats, &format!("{subject}.a"), 1..=20);
    (server, nats)
}

/// Stream `stream` into `c`'s main context from right after sequence `after`.
fn consume_after(
    nats: &Connector,
    stream: &str,
    after: u64,
    c: &Correlator<Ev>,
) -> Result<Ingress, correlator_nats::ConnectorError> {
    let source = JetStreamSource::new(stream, "c").start_after(after);
    nats.consume(source, Arc::new(JsonCodec::new()), c.input(), c.main())
}

// A source read again from a checkpoint's position (`start_after`, SPEC R11.12) must find the
// messages after it: a stream that deletes what is acknowledged is refused (`NotRetained`), and
// so is one whose limits removed messages after the position (`Gone`); nothing is read. A
// position the stream still covers is read from the next message on.
#[test]
fn start_after_refuses_a_stream_that_cannot_be_read_again() {
    use async_nats::jetstream::stream::{Config, RetentionPolicy};
    let (_s1, nats) = stream_made(
        "W",
        "w",
        Config {
            retention: RetentionPolicy::WorkQueue,
            ..Default::default()
        },
    );
    let (c, seen) = engine(None);
    let refused = consume_after(&nats, "W", 3, &c);
    match refused {
        Err(correlator_nats::ConnectorError::NotRetained { stream, retention }) => {
            assert_eq!((stream.as_str(), retention), ("W", "work-queue"));
        }
        other => panic!("expected NotRetained, got {:?}", other.map(|_| ())),
    }

    // The newest 5 messages only: 16 to 20.
    let (_s2, nats) = stream_made(
        "L",
        "l",
        Config {
            max_messages: 5,
            ..Default::default()
        },
    );
    let refused = consume_after(&nats, "L", 3, &c);
    match refused {
        Err(correlator_nats::ConnectorError::Gone {
            stream,
            after,
            first,
        }) => assert_eq!((stream.as_str(), after, first), ("L", 3, 16)),
        other => panic!("expected Gone, got {:?}", other.map(|_| ())),
    }
    // From 15 on, nothing is missing: 16 to 20 are read.
    let ingress = consume_after(&nats, "L", 15, &c).expect("consume");
    wait_until("messages 16 to 20", || snapshot(&seen).len() == 5);
    assert_eq!(snapshot(&seen), [16, 17, 18, 19, 20]);
    ingress.stop();
    c.shutdown().unwrap();
}
