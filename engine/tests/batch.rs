//! Batch sends (`InputHandle::send_batch_to` and its `try_`/timed variants, `Scope::send_batch_to`):
//! per-sender FIFO (SPEC R2.3) within and across batches, capacity and back-pressure (R5.1, R5.3),
//! deadlock avoidance (R5.2), refusals that hand the unsent events back in order (R8.2). The
//! reservation itself is model-checked in loom-tests/ and unit-tested (under miri too) in the inbox.
mod common;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::*;
use correlator::{Channel, ContextOptions, ContextRef, Correlator, Pattern, SendErrorKind};
use proptest::prelude::*;

/// The event kind every test sends.
const KIND: u32 = 1;

/// An event of sender `s`, its `seq`-th.
fn of(s: u64, seq: u64) -> Ev {
    ev(KIND, s << 32 | seq)
}

/// Records the values of every `KIND` event `ctx` processes, in order.
fn recorder(c: &Correlator<Ev>, ctx: ContextRef) -> Arc<Mutex<Vec<u64>>> {
    let got = Arc::new(Mutex::new(Vec::new()));
    let g = got.clone();
    c.load_in(
        ctx,
        Script::new("recorder", &Log::default(), move |_, cx| {
            cx.on_all(Pattern::kind(KIND), move |_, _, e: &Ev| {
                g.lock().unwrap().push(e.val);
            });
        }),
    )
    .unwrap();
    got
}

/// Asserts that `got` holds, for each sender `s`, exactly its events `0..counts[s]` in order.
fn assert_per_sender_fifo(got: &[u64], counts: &[u64]) {
    let mut next = vec![0u64; counts.len()];
    for &v in got {
        let (s, seq) = ((v >> 32) as usize, v & 0xffff_ffff);
        assert_eq!(
            seq, next[s],
            "R2.3: sender {s}: event {seq} came when {} was due (lost, duplicated or reordered)",
            next[s]
        );
        next[s] += 1;
    }
    assert_eq!(next, counts, "R5.1: every event arrives, none lost");
}

// R2.3, R5.1: a blocking batch larger than the capacity is taken in parts as room frees up; the
// handle's single sends before and after it keep their places around it.
#[test]
fn r2_3_blocking_batch_larger_than_capacity_keeps_order() {
    let c = correlator(4);
    let got = recorder(&c, c.main());
    c.start();
    let input = c.input();
    input.send_to(c.main(), of(0, 0)).unwrap();
    let mut batch: Vec<Ev> = (1..=50).map(|i| of(0, i)).collect();
    let keep = batch.capacity();
    input.send_batch_to(c.main(), &mut batch).unwrap();
    assert!(batch.is_empty());
    assert_eq!(batch.capacity(), keep, "the vector keeps its memory");
    input.send_to(c.main(), of(0, 51)).unwrap();
    c.shutdown().unwrap();
    assert_per_sender_fifo(&got.lock().unwrap(), &[52]);
}

// R5.3: `try_send_batch_to` is all-or-nothing: a batch that does not fit whole is refused as
// `Full` with every event still in the vector and no place held; one that fits goes whole. A batch
// above the capacity could never fit: `BatchTooLarge`, nothing sent.
#[test]
fn r5_3_try_send_batch_is_all_or_nothing() {
    let c = correlator(4);
    // Not started: nothing is taken. The load entry holds one place, three are free.
    let got = recorder(&c, c.main());
    let input = c.input();
    let mut batch: Vec<Ev> = (0..4).map(|i| of(0, i)).collect();
    let err = input.try_send_batch_to(c.main(), &mut batch).unwrap_err();
    assert_eq!(err.kind(), SendErrorKind::Full);
    assert_eq!(err.sent(), 0);
    assert_eq!(err.target(), Some(c.main()));
    assert_eq!(batch, (0..4).map(|i| of(0, i)).collect::<Vec<_>>());
    assert_eq!(
        c.status().context(c.main()).unwrap().inbox_len,
        1,
        "a refused batch holds no place"
    );
    let mut too_large: Vec<Ev> = (0..5).map(|i| of(1, i)).collect();
    let err = input
        .try_send_batch_to(c.main(), &mut too_large)
        .unwrap_err();
    assert_eq!(err.kind(), SendErrorKind::BatchTooLarge);
    assert_eq!(too_large.len(), 5);
    assert!(err.to_string().contains("inbox_capacity"), "{err}");
    batch.truncate(3);
    input.try_send_batch_to(c.main(), &mut batch).unwrap();
    assert!(batch.is_empty());
    c.start();
    c.shutdown().unwrap();
    assert_per_sender_fifo(&got.lock().unwrap(), &[3]);
}

// R5.3: the timed batch send waits for room for the whole batch and gives up after its bound with
// every event handed back; once there is room it sends the batch whole.
#[test]
fn r5_3_timed_batch_send_times_out_whole() {
    let c = correlator(2);
    let got = recorder(&c, c.main());
    let input = c.input();
    let mut batch = vec![of(0, 0), of(0, 1)];
    let t0 = Instant::now();
    let err = input
        .send_batch_to_timeout(c.main(), &mut batch, Duration::from_millis(30))
        .unwrap_err();
    assert!(t0.elapsed() >= Duration::from_millis(30));
    assert_eq!(err.kind(), SendErrorKind::Timeout);
    assert_eq!((err.sent(), batch.len()), (0, 2));
    c.start();
    input
        .send_batch_to_timeout(c.main(), &mut batch, Duration::from_secs(10))
        .unwrap();
    c.shutdown().unwrap();
    assert_per_sender_fifo(&got.lock().unwrap(), &[2]);
}

// R8.2 (Decisions, Replay): before `start()` a blocking batch fills what room there is and is then
// refused with `FullBeforeStart`; the error counts what went, and the rest stays in the vector, in
// order, so resending it after `start()` loses and reorders nothing.
#[test]
fn r8_2_blocking_batch_before_start_hands_back_the_rest() {
    let c = correlator(4);
    let got = recorder(&c, c.main());
    let input = c.input();
    let mut batch: Vec<Ev> = (0..10).map(|i| of(0, i)).collect();
    let err = input.send_batch_to(c.main(), &mut batch).unwrap_err();
    assert_eq!(err.kind(), SendErrorKind::FullBeforeStart);
    assert_eq!(err.sent(), 3, "the load entry holds one of the four places");
    assert_eq!(batch, (3..10).map(|i| of(0, i)).collect::<Vec<_>>());
    c.start();
    input.send_batch_to(c.main(), &mut batch).unwrap();
    c.shutdown().unwrap();
    assert_per_sender_fifo(&got.lock().unwrap(), &[10]);
}

// R8.1, R4.6: after shutdown every batch send is refused with `Closed`, nothing sent; an unknown
// context is refused too; an empty batch sends nothing and succeeds.
#[test]
fn r8_1_batch_after_shutdown_and_to_unknown_context_are_refused() {
    let c = correlator(4);
    let other = correlator(4);
    let input = c.input();
    c.start();
    let mut empty = Vec::new();
    input.send_batch_to(c.main(), &mut empty).unwrap();
    let mut batch = vec![of(0, 0)];
    let err = input.send_batch_to(other.main(), &mut batch).unwrap_err();
    assert_eq!(err.kind(), SendErrorKind::UnknownContext);
    c.shutdown().unwrap();
    for kind in [0, 1, 2] {
        let err = match kind {
            0 => input.send_batch_to(c.main(), &mut batch),
            1 => input.try_send_batch_to(c.main(), &mut batch),
            _ => input.send_batch_to_timeout(c.main(), &mut batch, Duration::from_millis(5)),
        }
        .unwrap_err();
        assert_eq!(err.kind(), SendErrorKind::Closed);
        assert_eq!((err.sent(), batch.len()), (0, 1));
    }
}

// R5.2, R2.3: a handler sends a batch ten times its inbox's capacity to its own context: waiting
// would never end, so the entries are taken beyond capacity (counted), and all of them arrive in
// order, after the entries that were already waiting.
#[test]
fn r5_2_scope_batch_into_own_full_inbox_finishes_in_order() {
    let c = correlator(2);
    let got = Arc::new(Mutex::new(Vec::new()));
    let g = got.clone();
    c.load(Script::new("self", &Log::default(), move |_, cx| {
        let mut batch = Vec::new();
        cx.on_all(Pattern::kind(KIND), move |_, cx, e: &Ev| {
            g.lock().unwrap().push(e.val);
            if e.val == of(9, 0).val {
                batch.extend((0..20).map(|i| of(0, i)));
                let me = cx.context();
                cx.send_batch_to(me, &mut batch).unwrap();
                assert!(batch.is_empty());
            }
        });
    }))
    .unwrap();
    c.start();
    let input = c.input();
    input.send_to(c.main(), of(9, 0)).unwrap();
    input.send_to(c.main(), of(9, 1)).unwrap();
    bounded(move || {
        assert!(eventually(|| got.lock().unwrap().len() == 22));
        let status = c.status();
        let main = status.context(c.main()).unwrap();
        assert!(main.overruns > 0, "R5.2: the self-sends overran");
        assert_eq!(
            main.sent, 20,
            "R9.1: every event of the batch counts as sent"
        );
        c.shutdown().unwrap();
        let got = got.lock().unwrap();
        let own: Vec<u64> = got.iter().copied().filter(|v| v >> 32 == 0).collect();
        assert_eq!(own, (0..20).map(|i| of(0, i).val).collect::<Vec<_>>());
        assert_eq!(got[0], of(9, 0).val);
        assert!(got.contains(&of(9, 1).val));
    });
}

/// Runs `senders` input handles on their own threads, each sending its events `0..per_sender` in
/// batches of the sizes `sizes` cycles through (0 sends a single event with `send_to`), blocking,
/// into one context of capacity `capacity`; returns what the context processed.
fn run_batch_senders(
    capacity: usize,
    senders: usize,
    sizes: &[usize],
    per_sender: u64,
) -> Vec<u64> {
    let c = correlator(capacity);
    let a = c.create_context(ContextOptions::new("a")).unwrap();
    let got = recorder(&c, a);
    c.start();
    let threads: Vec<_> = (0..senders)
        .map(|s| {
            let input = c.input();
            let sizes = sizes.to_vec();
            std::thread::spawn(move || {
                let mut batch = Vec::new();
                let mut seq = 0;
                let mut i = s;
                while seq < per_sender {
                    let k = sizes[i % sizes.len()] as u64;
                    i += 1;
                    if k == 0 {
                        input.send_to(a, of(s as u64, seq)).unwrap();
                        seq += 1;
                        continue;
                    }
                    let end = (seq + k).min(per_sender);
                    batch.extend((seq..end).map(|q| of(s as u64, q)));
                    input.send_batch_to(a, &mut batch).unwrap();
                    assert!(batch.is_empty());
                    seq = end;
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    c.shutdown().unwrap();
    let got = got.lock().unwrap().clone();
    got
}

// R2.3, R5.1 stress: four batch senders (batches from 1 to 3x the capacity, mixed with single
// sends) into a small inbox, so reservations race, wrap around the ring and meet a full inbox all
// the time: per-sender order, no loss, no duplicate.
#[test]
fn r2_3_stress_several_batch_senders_fifo_no_loss() {
    let per_sender = 20_000;
    let got = bounded(move || run_batch_senders(16, 4, &[64, 1, 7, 0, 48, 16, 3], per_sender));
    assert_per_sender_fifo(&got, &[per_sender; 4]);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    // R2.3, R5.1: any capacity, any number of senders, any mix of batch sizes: each sender's events
    // arrive once each, in its order.
    #[test]
    fn r2_3_any_batch_mix_keeps_per_sender_order(
        capacity in 1usize..12,
        senders in 1usize..4,
        sizes in proptest::collection::vec(0usize..30, 1..6),
        per_sender in 1u64..400,
    ) {
        let got = bounded(move || run_batch_senders(capacity, senders, &sizes, per_sender));
        assert_per_sender_fifo(&got, &vec![per_sender; senders]);
    }
}

// R4.2, R2.3: a channel batch (from an input handle and from a handler) reaches every subscribed
// context once per event, in order, even where it is taken in parts (capacity 4, batches of 20),
// and every output receiver gets each event in order.
#[test]
fn r4_2_channel_batch_reaches_each_subscriber_once_per_event_in_order() {
    let c = correlator(4);
    let prices = c.channel("prices").unwrap();
    let out = c.output(prices);
    let a = c.create_context(ContextOptions::new("a")).unwrap();
    let b = c.create_context(ContextOptions::new("b")).unwrap();
    let mut got = Vec::new();
    for ctx in [a, b] {
        let g = Arc::new(Mutex::new(Vec::new()));
        let g2 = g.clone();
        c.load_in(
            ctx,
            Script::new("sub", &Log::default(), move |_, cx| {
                cx.subscribe(prices);
                cx.on_all(Pattern::kind(KIND), move |_, _, e: &Ev| {
                    g2.lock().unwrap().push(e.val);
                });
            }),
        )
        .unwrap();
        got.push(g);
    }
    // main relays a batch of its own to the channel when told to.
    c.load(Script::new("relay", &Log::default(), move |_, cx| {
        let mut batch = Vec::new();
        cx.on_all(Pattern::kind(2), move |_, cx, _: &Ev| {
            batch.extend((0..20).map(|i| of(1, i)));
            let n = cx.send_batch(prices, &mut batch);
            assert_eq!(n, 60, "20 events to 2 contexts and 1 output receiver");
            assert!(batch.is_empty());
        });
    }))
    .unwrap();
    c.start();
    assert!(eventually(|| c.status().totals.instances >= 3));
    let input = c.input();
    let mut batch: Vec<Ev> = (0..20).map(|i| of(0, i)).collect();
    assert_eq!(input.send_batch(prices, &mut batch).unwrap(), 60);
    assert!(batch.is_empty());
    input.send_to(c.main(), ev(2, 0)).unwrap();
    bounded(move || {
        assert!(eventually(|| got
            .iter()
            .all(|g| g.lock().unwrap().len() == 40)));
        c.shutdown().unwrap();
        for g in &got {
            assert_per_sender_fifo(&g.lock().unwrap(), &[20, 20]);
        }
        let outs: Vec<u64> = out.iter().map(|e| e.val).collect();
        assert_per_sender_fifo(&outs, &[20, 20]);
    });
}

// R8.2 (Decisions, Replay): before `start()` a channel batch goes event by event, each
// all-or-nothing; a full subscriber refuses the rest with `FullBeforeStart`, which stays in the
// vector, in order, and goes in order once resent after `start()`.
#[test]
fn r8_2_channel_batch_before_start_hands_back_the_rest() {
    // `main` is public: it receives the default channel from the start (R4.2).
    let c = correlator(4);
    // The load entry holds one of the four places.
    let got = recorder(&c, c.main());
    let input = c.input();
    let mut batch: Vec<Ev> = (0..6).map(|i| of(0, i)).collect();
    let err = input.send_batch(Channel::DEFAULT, &mut batch).unwrap_err();
    assert_eq!(err.kind(), SendErrorKind::FullBeforeStart);
    assert_eq!(err.target(), Some(c.main()));
    assert_eq!(err.sent(), 3);
    assert_eq!(batch, (3..6).map(|i| of(0, i)).collect::<Vec<_>>());
    c.start();
    assert_eq!(input.send_batch(Channel::DEFAULT, &mut batch).unwrap(), 3);
    c.shutdown().unwrap();
    assert_per_sender_fifo(&got.lock().unwrap(), &[6]);
}

// R5.2, R2.3: two contexts send each other batches (ten times their inboxes' capacity, in
// batches of 10) from their handlers at the same time, so each waits on the other's full inbox:
// waiting would close the cycle, so entries go beyond capacity instead; both finish, and each
// receives the other's events exactly once, in order.
#[test]
fn r5_2_two_contexts_batch_sending_to_each_other_finish() {
    const START: u32 = 7;
    const N: u64 = 400;
    let c = correlator(4);
    let a = c.create_context(ContextOptions::new("a")).unwrap();
    let b = c.create_context(ContextOptions::new("b")).unwrap();
    let mut got = Vec::new();
    for (me, other, s) in [(a, b, 0u64), (b, a, 1u64)] {
        let g = Arc::new(Mutex::new(Vec::new()));
        let g2 = g.clone();
        c.load_in(
            me,
            Script::new("peer", &Log::default(), move |_, cx| {
                let mut batch = Vec::new();
                cx.on_all(Pattern::kind(START), move |_, cx, _: &Ev| {
                    let mut seq = 0;
                    while seq < N {
                        batch.extend((seq..seq + 10).map(|q| of(s, q)));
                        cx.send_batch_to(other, &mut batch).unwrap();
                        seq += 10;
                    }
                });
                cx.on_all(Pattern::kind(KIND), move |_, _, e: &Ev| {
                    g2.lock().unwrap().push(e.val);
                });
            }),
        )
        .unwrap();
        got.push(g);
    }
    // Both START entries are queued before `start()`, right behind each monitor's load entry, so
    // each context takes its START before any of the other's events: both handlers are sending
    // at once, neither takes from its inbox meanwhile, and the cycle forms whatever the timing.
    // (Sent after `start()`, one context could win every freed place of the other's inbox with
    // its batches and finish before the other's START got in: then no cycle, on a loaded machine.)
    let input = c.input();
    input.send_to(a, ev(START, 0)).unwrap();
    input.send_to(b, ev(START, 0)).unwrap();
    c.start();
    bounded(move || {
        assert!(eventually(|| got
            .iter()
            .all(|g| g.lock().unwrap().len() == N as usize)));
        assert!(
            c.status().totals.overruns > 0,
            "R5.2: the cycle of full inboxes was broken by going beyond capacity"
        );
        c.shutdown().unwrap();
        let from_b: Vec<u64> = got[0].lock().unwrap().clone();
        let from_a: Vec<u64> = got[1].lock().unwrap().clone();
        assert_eq!(from_a, (0..N).map(|q| of(0, q).val).collect::<Vec<_>>());
        assert_eq!(from_b, (0..N).map(|q| of(1, q).val).collect::<Vec<_>>());
    });
}
