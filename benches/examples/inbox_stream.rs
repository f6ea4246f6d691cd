//! The inbox alone, streamed between two pinned threads: one sender reserves and commits, the
//! consumer takes and gives places back in batches, the way a context does (without dispatch).
//! Beside it, crossbeam-queue's `ArrayQueue` in the same threads: the protocol's floor on this
//! machine, without the engine around it. Prints ns per event for each, interleaved rounds.
//!
//! `cargo run --release -p correlator-benches --example inbox_stream -- 5000000 4096 3`
//! (events, capacity, rounds)

use correlator::inbox::{Inbox, Refusal, Sender};
use crossbeam_queue::ArrayQueue;
use std::hint::spin_loop;
use std::sync::Arc;
use std::time::Instant;

fn pin(core: usize) {
    core_affinity::set_for_current(core_affinity::CoreId { id: core });
}

fn engine_inbox(n: u64, capacity: usize, batch: usize) -> f64 {
    let (inbox, mut consumer) = Inbox::<[u64; 4]>::with_capacity(capacity);
    let sender = {
        let inbox = inbox.clone();
        std::thread::spawn(move || {
            pin(1);
            for i in 0..n {
                let r = loop {
                    match inbox.try_reserve(Sender::External) {
                        Ok(r) => break r,
                        Err(Refusal::Full) => spin_loop(),
                        Err(Refusal::Closed) => unreachable!("nobody closes it"),
                    }
                };
                inbox.commit(r, [i, 0, 0, 0]);
            }
        })
    };
    pin(0);
    let mut places = consumer.held_places(batch);
    let t0 = Instant::now();
    let mut next = 0;
    while next < n {
        match consumer.pop() {
            Some(v) => {
                assert_eq!(v[0], next, "lost or reordered");
                next += 1;
                if places.hold_one() {
                    places.give_back();
                }
            }
            None => {
                places.give_back();
                spin_loop();
            }
        }
    }
    let ns = t0.elapsed().as_nanos() as f64 / n as f64;
    sender.join().expect("sender");
    ns
}

fn array_queue(n: u64, capacity: usize) -> f64 {
    let q = Arc::new(ArrayQueue::<[u64; 4]>::new(capacity));
    let sender = {
        let q = q.clone();
        std::thread::spawn(move || {
            pin(1);
            for i in 0..n {
                let mut v = [i, 0, 0, 0];
                while let Err(back) = q.push(v) {
                    v = back;
                    spin_loop();
                }
            }
        })
    };
    pin(0);
    let t0 = Instant::now();
    let mut next = 0;
    while next < n {
        match q.pop() {
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

fn main() {
    let mut args = std::env::args().skip(1);
    let n: u64 = args
        .next()
        .map_or(5_000_000, |a| a.parse().expect("events"));
    let capacity: usize = args.next().map_or(4096, |a| a.parse().expect("capacity"));
    let rounds: usize = args.next().map_or(3, |a| a.parse().expect("rounds"));
    let batch = 128.min(capacity / 8).max(1);
    for round in 0..rounds {
        let e = engine_inbox(n, capacity, batch);
        let a = array_queue(n, capacity);
        println!("round {round}: inbox {e:.1} ns/event, ArrayQueue {a:.1} ns/event");
    }
}
