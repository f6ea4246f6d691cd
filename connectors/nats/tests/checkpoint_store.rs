//! Checkpoints in a JetStream object store bucket against a real nats-server (the engine's SPEC
//! §11 rules, with a bucket in place of a directory: R11.8).

mod support;

use correlator::checkpoint::{frame, CheckpointError, CheckpointStore, SkipReason};
use correlator_nats::{Connector, ConnectorError, JetStreamCheckpoints};
use support::*;

fn seqs(store: &JetStreamCheckpoints) -> Vec<u64> {
    store.list().unwrap().iter().map(|c| c.seq).collect()
}

/// Puts `bytes` under checkpoint `seq`'s name directly, as damage or a stray writer would.
fn put_raw(nats: &Connector, bucket: &str, seq: u64, bytes: &[u8]) {
    let name = JetStreamCheckpoints::object_name(seq);
    nats.block_on(async {
        let store = nats.jetstream().get_object_store(bucket).await.unwrap();
        store.put(name.as_str(), &mut &bytes[..]).await.unwrap();
    });
}

// R11.8 with R11.1, R11.4: what one connection saved, another (another process) loads; an empty
// bucket has nothing to load.
#[test]
fn r11_8_a_checkpoint_saved_by_one_connection_is_loaded_by_another() {
    let server = server();
    let writer = connect(&server);
    let mut store = JetStreamCheckpoints::open(&writer, "ck-share").unwrap();
    assert_eq!(store.load_latest().unwrap(), None);
    store.save(1, b"one").unwrap();
    store.save(2, b"").unwrap();
    store.save(3, &[7u8; 300_000]).unwrap(); // several chunks
    let reader = connect(&server);
    let other = JetStreamCheckpoints::open(&reader, "ck-share").unwrap();
    let latest = other.load_latest().unwrap().expect("three saved");
    assert_eq!((latest.seq, latest.payload.len()), (3, 300_000));
    assert!(latest.payload.iter().all(|&b| b == 7));
    assert!(latest.skipped.is_empty());
    assert_eq!(seqs(&other), [1, 2, 3]);
}

// R11.8 with R11.3, R11.4: a damaged newest checkpoint (one changed bit) and a cut-short one are
// reported and passed over; the newest intact one is loaded.
#[test]
fn r11_8_damaged_newest_checkpoints_are_skipped_and_the_previous_one_loaded() {
    let server = server();
    let nats = connect(&server);
    let mut store = JetStreamCheckpoints::open_keeping(&nats, "ck-damage", 5).unwrap();
    store.save(1, b"first").unwrap();
    store.save(2, b"second").unwrap();
    let mut flipped = frame(3, b"third");
    let last = flipped.len() - 1;
    flipped[last] ^= 0x10;
    put_raw(&nats, "ck-damage", 3, &flipped);
    let cut = frame(4, b"fourth, cut short");
    put_raw(&nats, "ck-damage", 4, &cut[..cut.len() - 5]);

    let latest = store.load_latest().unwrap().expect("two intact");
    assert_eq!((latest.seq, &latest.payload[..]), (2, &b"second"[..]));
    let skipped: Vec<(u64, &SkipReason)> =
        latest.skipped.iter().map(|s| (s.seq, &s.reason)).collect();
    assert_eq!(skipped.len(), 2, "{skipped:?}");
    assert_eq!(skipped[0].0, 4);
    assert!(
        matches!(skipped[0].1, SkipReason::LengthMismatch { .. }),
        "{skipped:?}"
    );
    assert_eq!(skipped[1].0, 3);
    assert!(
        matches!(skipped[1].1, SkipReason::ChecksumMismatch { .. }),
        "{skipped:?}"
    );
    assert!(latest.skipped[0]
        .path
        .ends_with("checkpoint-00000000000000000004"));
}

// R11.8 with R11.4: checkpoints stored and none intact is an error that lists each, not a fresh
// start.
#[test]
fn r11_8_a_bucket_of_damaged_checkpoints_is_an_error_listing_each() {
    let server = server();
    let nats = connect(&server);
    let store = JetStreamCheckpoints::open(&nats, "ck-allbad").unwrap();
    put_raw(
        &nats,
        "ck-allbad",
        1,
        b"not a checkpoint at all, but long enough for a header",
    );
    put_raw(&nats, "ck-allbad", 2, &frame(5, b"under the wrong name"));
    match store.load_latest() {
        Err(CheckpointError::AllCorrupt { skipped }) => {
            let reasons: Vec<_> = skipped.iter().map(|s| (s.seq, s.reason.clone())).collect();
            assert_eq!(
                reasons,
                [
                    (
                        2,
                        SkipReason::SequenceMismatch {
                            in_header: 5,
                            in_name: 2
                        }
                    ),
                    (1, SkipReason::BadMagic)
                ]
            );
        }
        other => panic!("expected AllCorrupt, got {other:?}"),
    }
}

// R11.8 with R11.1, R11.6: sequences must increase (a damaged checkpoint's number stays taken);
// only the newest `keep` remain; objects of other names are left alone; `keep` below 2 is refused.
#[test]
fn r11_8_retention_keeps_the_newest_and_sequences_must_increase() {
    let server = server();
    let nats = connect(&server);
    let mut store = JetStreamCheckpoints::open_keeping(&nats, "ck-keep", 2).unwrap();
    nats.block_on(async {
        let raw = nats.jetstream().get_object_store("ck-keep").await.unwrap();
        raw.put("notes", &mut &b"someone else's"[..]).await.unwrap();
    });
    for seq in 1..=5 {
        store.save(seq, format!("state {seq}").as_bytes()).unwrap();
    }
    assert_eq!(seqs(&store), [4, 5]);
    match store.save(5, b"again") {
        Err(CheckpointError::NotIncreasing { seq: 5, newest: 5 }) => {}
        other => panic!("expected NotIncreasing, got {other:?}"),
    }
    // A damaged newest checkpoint keeps its number taken, for a store opened afresh too.
    put_raw(&nats, "ck-keep", 6, b"damaged");
    drop(store);
    let mut store = JetStreamCheckpoints::open_keeping(&nats, "ck-keep", 2).unwrap();
    assert!(matches!(
        store.save(6, b"six"),
        Err(CheckpointError::NotIncreasing { seq: 6, newest: 6 })
    ));
    store.save(7, b"seven").unwrap();
    assert_eq!(seqs(&store), [6, 7]);
    let notes = nats.block_on(async {
        let raw = nats.jetstream().get_object_store("ck-keep").await.unwrap();
        raw.info("notes").await.is_ok()
    });
    assert!(notes, "R11.5: an object of another name was removed");
    assert!(matches!(
        JetStreamCheckpoints::open_keeping(&nats, "ck-keep", 1),
        Err(ConnectorError::Invalid {
            setting: "keep",
            ..
        })
    ));
}

// R11.8 with R11.1: a bucket cannot be locked; a store that finds at a save that another writer
// saved since its own last save refuses (and writes nothing), naming both sequences.
#[test]
fn r11_8_a_store_refuses_to_save_after_another_writer_saved_into_its_bucket() {
    let server = server();
    let nats = connect(&server);
    let mut first = JetStreamCheckpoints::open(&nats, "ck-two").unwrap();
    let mut second = JetStreamCheckpoints::open(&nats, "ck-two").unwrap();
    first.save(1, b"first's").unwrap();
    second.save(2, b"second's").unwrap();
    match first.save(3, b"first's again") {
        Err(e @ CheckpointError::OtherWriter { .. }) => {
            assert!(matches!(
                e,
                CheckpointError::OtherWriter {
                    newest: Some(2),
                    last_saved: 1,
                    ..
                }
            ));
            assert!(e.to_string().contains("a store of its own"), "{e}");
        }
        other => panic!("expected OtherWriter, got {other:?}"),
    }
    assert_eq!(seqs(&first), [1, 2]);
    second.save(3, b"second's again").unwrap();
}

// R11.8 with R11.7: a store whose connection is gone answers with a typed error, it does not panic.
#[test]
fn r11_8_a_store_without_its_server_fails_with_a_typed_error() {
    let mut server = server();
    let nats = connect(&server);
    let mut store = JetStreamCheckpoints::open(&nats, "ck-gone").unwrap();
    store.save(1, b"one").unwrap();
    server.kill().unwrap();
    match store.save(2, b"two") {
        Err(CheckpointError::Remote { location, .. }) => assert!(location.starts_with("ck-gone")),
        other => panic!("expected Remote, got {other:?}"),
    }
}
