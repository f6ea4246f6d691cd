//! Core NATS ingress and egress against a real nats-server.

mod support;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use correlator::Correlator;
use correlator_nats::JsonCodec;
use futures_util::StreamExt;
use support::*;

fn publish_core(
    nats: &correlator_nats::Connector,
    subject: &str,
    seqs: std::ops::RangeInclusive<u64>,
) {
    let client = nats.client().clone();
    let subject = subject.to_string();
    nats.block_on(async move {
        for seq in seqs {
            let payload = serde_json::to_vec(&Ev { seq }).unwrap();
            client
                .publish(subject.clone(), payload.into())
                .await
                .unwrap();
        }
        client.flush().await.unwrap();
    });
}

#[test]
fn subject_into_the_engine_and_its_output_back_out_in_order() {
    let server = server();
    let nats = connect(&server);
    let c = Correlator::<Ev>::builder().build().unwrap();
    let out = c.channel("out").unwrap();
    let rx = c.output(out);
    let seen = Arc::new(Mutex::new(Vec::new()));
    c.load(Recorder {
        seen: seen.clone(),
        gate: None,
        out: Some(out),
    })
    .unwrap();
    c.start();
    let codec = Arc::new(JsonCodec::<Ev>::new());
    let mut results = nats.block_on(nats.client().subscribe("results.>")).unwrap();
    let egress = nats
        .publish_output(rx, codec.clone(), |e: &Ev| format!("results.{}", e.seq % 2))
        .unwrap();
    let ingress = nats.subscribe("in.>", codec, c.input(), c.main()).unwrap();
    nats.round_trip().unwrap();
    publish_core(&nats, "in.a", 1..=100);
    let got: Vec<u64> = nats.block_on(async {
        let mut got = Vec::new();
        while got.len() < 100 {
            let msg = tokio::time::timeout(Duration::from_secs(30), results.next())
                .await
                .expect("results within 30 s")
                .expect("subscription open");
            got.push(serde_json::from_slice::<Ev>(&msg.payload).unwrap().seq);
        }
        drop(results);
        got
    });
    assert_eq!(got, (1..=100).collect::<Vec<_>>());
    ingress.stop();
    c.shutdown().unwrap();
    egress.join();
    let status = nats.status();
    assert_eq!(
        (status.received, status.delivered, status.published),
        (100, 100, 100)
    );
}

// While the engine holds its inbox full, the ingress stops taking messages from the
// subscription: what it took is bounded by the inbox and one feeder channel, whatever was sent.
#[test]
fn full_inbox_stops_the_ingress_and_nothing_is_lost() {
    let server = server();
    let nats = connect(&server);
    let gate = Gate::default();
    let (c, seen) = engine(Some(gate.clone()));
    let ingress = nats
        .subscribe("in.>", Arc::new(JsonCodec::new()), c.input(), c.main())
        .unwrap();
    nats.round_trip().unwrap();
    publish_core(&nats, "in.a", 1..=2000);
    // Full: the default clock's ticks may hold a few of its 64 places, so count entries, not
    // events delivered.
    wait_until("the inbox to fill", || c.status().totals.inbox_len >= 64);
    // Inbox (64) + the event the handler holds + the feeder channel (256) + the one in hand.
    let bound = 64 + 1 + 256 + 1;
    for _ in 0..50 {
        let s = nats.status();
        assert!(
            s.received <= bound,
            "took {} of 2000 with the inbox full",
            s.received
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    gate.open();
    wait_until("all 2000", || snapshot(&seen).len() == 2000);
    assert_eq!(snapshot(&seen), (1..=2000).collect::<Vec<_>>());
    ingress.stop();
    c.shutdown().unwrap();
}

// Once `subscribe` returns, the server knows the subscription: an event another connection
// publishes right after reaches the engine. This checks the connector's contract (the docs of
// `Connector::subscribe`), not a SPEC rule. With only a flush, the other connection's publish
// could reach the server before the subscription and be lost to it (it failed within 50 rounds).
#[test]
fn an_event_published_right_after_subscribe_returns_reaches_the_engine() {
    let server = server();
    let (subscriber, publisher) = (connect(&server), connect(&server));
    let (c, seen) = engine(None);
    let mut ingresses = Vec::new();
    for round in 0..50u64 {
        let subject = format!("fresh.{round}");
        ingresses.push(
            subscriber
                .subscribe(&subject, Arc::new(JsonCodec::new()), c.input(), c.main())
                .unwrap(),
        );
        publish_core(&publisher, &subject, round..=round);
        wait_until("the event published right after subscribing", || {
            snapshot(&seen).len() as u64 == round + 1
        });
    }
    assert_eq!(snapshot(&seen), (0..50).collect::<Vec<_>>());
    for ingress in ingresses {
        ingress.stop();
    }
    c.shutdown().unwrap();
}
