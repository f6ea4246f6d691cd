//! `stream/1to1/engine` without the harness around it: one input handle on core 1 floods `main`
//! (pinned to core 0, busy-spin, inbox capacity 4096) whose one listener counts. Prints events/s for
//! a few rounds, each in a fresh correlator. For quick A/B runs of the send and receive paths under
//! contention; the harness is where figures are claimed.
//!
//! The fifth argument picks the event: `24` (the benches' [`Ev`], 24 bytes) or `32` (a 32-byte
//! event shaped like the harness's, kind + sequence + two words). The two settle in different
//! regimes of the sender/consumer interplay (harness/BENCHMARKS.md, "Is a single send at its
//! floor?"), which is why both are here. `8`, `16`, `40`, `48` and `56` pick events of those sizes
//! (an inbox slot is the event plus 16 bytes): the sweep behind the inbox's slot layout
//! (harness/BENCHMARKS.md, "Slot layout").
//!
//! `cargo run --release -p correlator-benches --example stream_pair -- 5000000 3` (events, rounds, capacity, release batch, event bytes)

use correlator::{Correlator, Event, Monitor, PinningPlan, Scope, WaitStrategy};
use correlator_benches::{arg, Ev, CHAIN_KIND};
use std::time::Instant;

/// An event of `16 + 8 * W` bytes: sequence number, `W` words and kind (`Wide<2>` is the
/// harness's 32-byte shape: kind, sequence number, timestamp and payload).
///
/// `repr(C)` keeps the sequence number first, as the compiler lays out the harness's event: left
/// to reorder, it put the (constant zero) words first, and until the inbox wrote entries word by
/// word the compiler merged them with the entry's zero tag into one 16-byte vector store, the first
/// into a slot line the consumer still held, which made a send wait a cross-core transfer longer on
/// the EPYC VM (25 instead of 44 M events/s; harness/BENCHMARKS.md, "The first store into a
/// slot").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(C)]
struct Wide<const W: usize> {
    seq: u64,
    words: [u64; W],
    kind: u32,
}

impl<const W: usize> Event for Wide<W> {
    type Kind = u32;
    fn kind(&self) -> u32 {
        self.kind
    }
}

/// An 8-byte event: kind and a 32-bit sequence number.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Narrow {
    kind: u32,
    seq: u32,
}

impl Event for Narrow {
    type Kind = u32;
    fn kind(&self) -> u32 {
        self.kind
    }
}

/// What the sender sends and the sink reads.
trait Streamed: Event<Kind = u32> + Copy {
    fn nth(seq: u64) -> Self;
    fn seq(&self) -> u64;
}

impl Streamed for Ev {
    fn nth(seq: u64) -> Self {
        Ev {
            kind: CHAIN_KIND,
            seq,
            payload: 0,
        }
    }
    fn seq(&self) -> u64 {
        self.seq
    }
}

impl<const W: usize> Streamed for Wide<W> {
    fn nth(seq: u64) -> Self {
        Wide {
            kind: CHAIN_KIND,
            seq,
            words: [0; W],
        }
    }
    fn seq(&self) -> u64 {
        self.seq
    }
}

impl Streamed for Narrow {
    fn nth(seq: u64) -> Self {
        Narrow {
            kind: CHAIN_KIND,
            seq: seq as u32,
        }
    }
    fn seq(&self) -> u64 {
        u64::from(self.seq)
    }
}

/// Reads what it receives; the count is checked through the status at shutdown.
struct Sink;

impl<E: Streamed> Monitor<E> for Sink {
    fn on_load(&mut self, cx: &mut Scope<'_, E, Self>) {
        cx.on_all(
            correlator::Pattern::kind(CHAIN_KIND),
            |_m: &mut Sink, _cx: &mut Scope<'_, E, Sink>, e: &E| {
                std::hint::black_box(e.seq());
            },
        );
    }
}

fn round<E: Streamed>(n: u64, capacity: usize, batch: usize) -> f64 {
    let corr = Correlator::<E>::builder()
        .wait_strategy(WaitStrategy::BusySpin)
        .pinning(PinningPlan::cores(vec![0]))
        .inbox_capacity(capacity)
        .release_batch(batch)
        .external_time()
        .build()
        .expect("build");
    corr.load(Sink).expect("load");
    corr.start();
    let input = corr.input();
    let main = corr.main();
    let sender = std::thread::spawn(move || {
        core_affinity::set_for_current(core_affinity::CoreId { id: 1 });
        let t0 = Instant::now();
        for seq in 0..n {
            input.send_to(main, E::nth(seq)).expect("send");
        }
        t0.elapsed()
    });
    let elapsed = sender.join().expect("sender");
    let status = corr.shutdown().expect("shutdown");
    let received = status.context(main).map_or(0, |c| c.received);
    assert!(received >= n, "events received: {received}");
    n as f64 / elapsed.as_secs_f64() / 1e6
}

fn main() {
    let n: u64 = arg(1, 5_000_000, "events");
    let rounds: usize = arg(2, 3, "rounds");
    let capacity: usize = arg(3, 4096, "capacity");
    let batch: usize = arg(4, 128, "release batch");
    let bytes: usize = arg(5, 24, "event bytes: 8, 16, 24, 32, 40, 48 or 56");
    for _ in 0..rounds {
        let rate = match bytes {
            24 => round::<Ev>(n, capacity, batch),
            32 => round::<Wide<2>>(n, capacity, batch),
            8 => round::<Narrow>(n, capacity, batch),
            16 => round::<Wide<0>>(n, capacity, batch),
            40 => round::<Wide<3>>(n, capacity, batch),
            48 => round::<Wide<4>>(n, capacity, batch),
            56 => round::<Wide<5>>(n, capacity, batch),
            other => panic!("argument 5 (event bytes): 8, 16, 24, 32, 40, 48 or 56, not {other}"),
        };
        println!("{rate:.2} M events/s");
    }
}
