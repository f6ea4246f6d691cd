//! The inbox alone, streamed between two pinned threads: one sender reserves and commits, the
//! consumer takes and gives places back in batches, the way a context does (without dispatch).
//! Beside it, crossbeam-queue's `ArrayQueue` in the same threads: the protocol's floor on this
//! machine, without the engine around it. Prints ns per event for each, interleaved rounds.
//!
//! `cargo run --release -p correlator-benches --example inbox_stream -- 5000000 4096 3`
//! (events, capacity, rounds)

use correlator::inbox::{Inbox, Refusal, Sender};
use correlator_benches::arg;
use crossbeam_queue::ArrayQueue;
use std::hint::spin_loop;
use std::sync::Arc;
use std::time::Instant;

type Item = [u64; 4];

fn pin(core: usize) {
    core_affinity::set_for_current(core_affinity::CoreId { id: core });
}

/// Streams `n` items: `push` runs on a thread pinned to core 1 (it must not return before the item
/// is in), `pop` on this thread, pinned to core 0, until every item came out in order. Returns ns
/// per item, timed on the consumer.
fn stream(
    n: u64,
    mut push: impl FnMut(Item) + Send + 'static,
    mut pop: impl FnMut() -> Option<Item>,
) -> f64 {
    let sender = std::thread::spawn(move || {
        pin(1);
        for i in 0..n {
            push([i, 0, 0, 0]);
        }
    });
    pin(0);
    let t0 = Instant::now();
    let mut next = 0;
    while next < n {
        match pop() {
            Some(v) => {
                assert_eq!(v[0], next, "lost or reordered");
                next += 1;
            }
            None => spin_loop(),
        }
    }
    let ns = t0.elapsed().as_nanos() as f64 / n as f64;
    sender.join().expect("sender");
    ns
}

fn engine_inbox(n: u64, capacity: usize, batch: usize) -> f64 {
    let (inbox, mut consumer) = Inbox::<Item>::with_capacity(capacity);
    let sending = inbox.clone();
    let mut places = consumer.held_places(batch);
    let push = move |v| {
        let r = loop {
            match sending.try_reserve(Sender::External) {
                Ok(r) => break r,
                Err(Refusal::Full) => spin_loop(),
                Err(Refusal::Closed) => unreachable!("nobody closes it"),
            }
        };
        r.commit(v);
    };
    let pop = move || match consumer.pop() {
        Some(v) => {
            if places.hold_one() {
                places.give_back();
            }
            Some(v)
        }
        None => {
            places.give_back();
            None
        }
    };
    stream(n, push, pop)
}

fn array_queue(n: u64, capacity: usize) -> f64 {
    let q = Arc::new(ArrayQueue::<Item>::new(capacity));
    let sending = q.clone();
    let push = move |mut v| {
        while let Err(back) = sending.push(v) {
            v = back;
            spin_loop();
        }
    };
    stream(n, push, move || q.pop())
}

fn main() {
    let n: u64 = arg(1, 5_000_000, "events");
    let capacity: usize = arg(2, 4096, "capacity");
    let rounds: usize = arg(3, 3, "rounds");
    let batch = 128.min(capacity / 8).max(1);
    for round in 0..rounds {
        let e = engine_inbox(n, capacity, batch);
        let a = array_queue(n, capacity);
        println!("round {round}: inbox {e:.1} ns/event, ArrayQueue {a:.1} ns/event");
    }
}
