//! Where a one-event ping-pong's time goes, layer by layer: two threads pinned to cores 0 and 1
//! bounce one event, and each line prints the mean one-way time (round trips timed as a whole, no
//! timer read inside) of
//!
//! - `line`: one cache line bounced (`calibration/cacheline-pingpong`'s method, untimed);
//! - `ring 8` and `ring 4096`: a ring of that many lines per direction, one event per line
//!   (four payload words and a stamp, plain stores: a single-producer ring's hand-off);
//! - `ring 8 locked` and `ring 4096 locked`: the same with a locked claim (`lock cmpxchg` on a
//!   word of the sender's own, on a line of its own) before each event, what a multi-producer send
//!   pays;
//! - `inbox` and `inbox, capacity 8`: two bare engine inboxes of capacity 4096 or 8 (reserve and
//!   commit, take and give back in batches, as a context does): the inbox protocol without
//!   dispatch;
//! - `engine`: two contexts of a correlator (busy-spin, inbox capacity 4096) whose handlers answer
//!   with `send_to` (`pingpong/engine` without the harness's timer reads);
//! - `engine, capacity 8`: the same with inboxes of capacity 8.
//!
//! The rounds interleave the ways, since the shared VM's cross-core cost changes from minute to
//! minute. harness/BENCHMARKS.md ("How far is a ping-pong from the cache-line floor?") has figures
//! and what they say about `pingpong/engine`'s target.
//!
//! `cargo run --release -p correlator-benches --example pingpong_floor -- 1000000 3`
//! (round trips, rounds, and optionally the ways whose names start with a third argument: `ring`,
//! `engine`, ...; for a profile of one of them)

use correlator::inbox::{Inbox, Sender};
use correlator::{ContextOptions, ContextRef, Correlator, Monitor, Pattern, PinningPlan, Scope};
use correlator::{Event, WaitStrategy};
use correlator_benches::arg;
use std::cell::UnsafeCell;
use std::hint::spin_loop;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{mpsc, Arc};
use std::time::Instant;

fn pin(core: usize) {
    core_affinity::set_for_current(core_affinity::CoreId { id: core });
}

/// Runs `n` round trips: the answerer that `make_b` makes on a thread pinned to core 1 answers
/// what the asker that `make_a` makes sends from a thread pinned to core 0 (each is made on its
/// thread, so it may hold what must not leave it; the main thread stays unpinned, so that a
/// correlator built later sees both cores); returns the mean one-way time in nanoseconds, timed
/// on the asking thread.
fn bounce<A: FnMut(u64), B: FnMut(u64)>(
    n: u64,
    make_a: impl FnOnce() -> A + Send + 'static,
    make_b: impl FnOnce() -> B + Send + 'static,
) -> f64 {
    let answering = std::thread::spawn(move || {
        pin(1);
        let mut b = make_b();
        for i in 0..n {
            b(i);
        }
    });
    let asking = std::thread::spawn(move || {
        pin(0);
        let mut a = make_a();
        let t0 = Instant::now();
        for i in 0..n {
            a(i);
        }
        t0.elapsed().as_nanos() as f64 / (2 * n) as f64
    });
    let ns = asking.join().expect("asking thread");
    answering.join().expect("answering thread");
    ns
}

/// One atomic alone on its cache line.
#[repr(align(64))]
struct Line(AtomicU64);

fn line(n: u64) -> f64 {
    let l = Arc::new(Line(AtomicU64::new(0)));
    let lb = l.clone();
    let wait = |l: &Line, v: u64| {
        while l.0.load(Ordering::Acquire) != v {
            spin_loop();
        }
    };
    bounce(
        n,
        move || {
            move |i| {
                l.0.store(2 * i + 1, Ordering::Release);
                wait(&l, 2 * i + 2);
            }
        },
        move || {
            move |i| {
                wait(&lb, 2 * i + 1);
                lb.0.store(2 * i + 2, Ordering::Release);
            }
        },
    )
}

/// One event per cache line: a stamp (`i + 1` once event `i` is in) and four payload words.
#[repr(C, align(64))]
struct Slot {
    stamp: AtomicU64,
    words: UnsafeCell<[u64; 4]>,
}

/// A ring of slots with the sender's claim word. One event is in flight at a time, so a slot's
/// words are written before its stamp publishes them and read after, and no room check is needed.
struct Ring {
    slots: Box<[Slot]>,
    /// On a line of its own, as the inbox's tail word: the answering thread reads `slots` (the
    /// pointer and length) on every event, and a claim word beside them would pull that line to
    /// the sender's core and back each time.
    claim: Line,
}

// SAFETY: see `Ring`: the stamp (Release/Acquire) orders each slot's write before its read, and
// the next write of a slot comes a whole lap, so many round trips, after its read.
unsafe impl Sync for Ring {}

impl Ring {
    fn new(len: usize) -> Arc<Self> {
        Arc::new(Ring {
            slots: (0..len)
                .map(|_| Slot {
                    stamp: AtomicU64::new(0),
                    words: UnsafeCell::new([0; 4]),
                })
                .collect(),
            claim: Line(AtomicU64::new(0)),
        })
    }

    fn put(&self, i: u64, v: u64, locked: bool) {
        if locked {
            let _ = self
                .claim
                .0
                .compare_exchange(i, i + 1, Ordering::AcqRel, Ordering::Relaxed);
        }
        let slot = &self.slots[i as usize % self.slots.len()];
        let w = slot.words.get().cast::<u64>();
        // SAFETY: see `Ring`; volatile keeps each an 8-byte integer store.
        unsafe {
            std::ptr::write_volatile(w, v);
            for k in 1..4 {
                std::ptr::write_volatile(w.add(k), 0);
            }
        }
        slot.stamp.store(i + 1, Ordering::Release);
    }

    fn get(&self, i: u64) -> u64 {
        let slot = &self.slots[i as usize % self.slots.len()];
        while slot.stamp.load(Ordering::Acquire) != i + 1 {
            spin_loop();
        }
        // SAFETY: see `Ring`.
        unsafe { (*slot.words.get())[0] }
    }
}

fn rings(n: u64, len: usize, locked: bool) -> f64 {
    let (ab, ba) = (Ring::new(len), Ring::new(len));
    let (ab2, ba2) = (ab.clone(), ba.clone());
    bounce(
        n,
        move || {
            move |i| {
                ab.put(i, i, locked);
                assert_eq!(ba.get(i), i, "lost or reordered");
            }
        },
        move || {
            move |i| {
                let v = ab2.get(i);
                ba2.put(i, v, locked);
            }
        },
    )
}

/// Five words: the size of the engine's inbox entry for a 32-byte event, so that a slot (entry and
/// stamp, 48 bytes) has a cache line of its own as in `engine` (a 40-byte slot would be packed,
/// and three slots in eight would straddle two lines).
type Item = [u64; 5];

fn inboxes(n: u64, capacity: usize) -> f64 {
    let (to_a, mut a) = Inbox::<Item>::with_capacity(capacity);
    let (to_b, mut b) = Inbox::<Item>::with_capacity(capacity);
    bounce(
        n,
        move || {
            // Consumer-only (not `Send`): made on its thread.
            let mut held_a = a.held_places(128);
            move |i| {
                let r = to_b.try_reserve(Sender::Context).expect("room");
                r.commit([i, 0, 0, 0, 0]);
                let v = loop {
                    if let Some(v) = a.pop() {
                        break v;
                    }
                    held_a.give_back();
                    spin_loop();
                };
                assert_eq!(v[0], i, "lost or reordered");
                held_a.hold_one();
            }
        },
        move || {
            // As `held_a`.
            let mut held_b = b.held_places(128);
            move |_| {
                let v = loop {
                    if let Some(v) = b.pop() {
                        break v;
                    }
                    held_b.give_back();
                    spin_loop();
                };
                let r = to_a.try_reserve(Sender::Context).expect("room");
                r.commit(v);
                held_b.hold_one();
            }
        },
    )
}

/// The engine's event here: the harness's 32-byte shape.
#[derive(Clone, Copy, Debug)]
#[repr(C)]
struct Ball {
    seq: u64,
    words: [u64; 2],
    kind: u32,
}

impl Event for Ball {
    type Kind = u32;
    fn kind(&self) -> u32 {
        self.kind
    }
}

/// Answers every ball with the next one, to `peer`, until `last`; then reports on `done`.
struct Player {
    peer: ContextRef,
    last: u64,
    done: Option<mpsc::Sender<Instant>>,
}

impl Monitor<Ball> for Player {
    fn on_load(&mut self, cx: &mut Scope<'_, Ball, Self>) {
        cx.on_all(
            Pattern::kind(0),
            |m: &mut Player, cx: &mut Scope<'_, Ball, Player>, e: &Ball| {
                if e.seq >= m.last {
                    if let Some(done) = m.done.take() {
                        let _ = done.send(Instant::now());
                    }
                    return;
                }
                let next = Ball {
                    seq: e.seq + 1,
                    ..*e
                };
                cx.send_to(m.peer, next).expect("send to the peer");
            },
        );
    }
}

fn engine(n: u64, capacity: usize) -> f64 {
    let corr = Correlator::<Ball>::builder()
        .wait_strategy(WaitStrategy::BusySpin)
        .pinning(PinningPlan::cores(vec![0, 1]))
        .inbox_capacity(capacity)
        .external_time()
        .build()
        .expect("build");
    let a = corr.main();
    let b = corr
        .create_context(ContextOptions::new("b"))
        .expect("context b");
    let (done, finished) = mpsc::channel();
    // Ball `k` is the `k`th hop after the first (input to `b`): odd ones arrive at `a`, and ball
    // `2n + 1` ends the rally there, `2n + 2` hops from the start.
    let last = 2 * n + 1;
    corr.load(Player {
        peer: b,
        last,
        done: Some(done),
    })
    .expect("load a");
    corr.load_in(
        b,
        Player {
            peer: a,
            last,
            done: None,
        },
    )
    .expect("load b");
    corr.start();
    let first = Ball {
        seq: 0,
        words: [0; 2],
        kind: 0,
    };
    let t0 = Instant::now();
    corr.input().send_to(b, first).expect("first ball");
    let end = finished.recv().expect("the rally ends");
    corr.shutdown().expect("shutdown");
    (end - t0).as_nanos() as f64 / (2 * n + 2) as f64
}

fn main() {
    let n: u64 = arg(1, 1_000_000, "round trips per way and round");
    let rounds: usize = arg(2, 3, "rounds");
    let only: String = arg(
        3,
        "all".to_string(),
        "the one way to run (line, ring, inbox, engine), or all",
    );
    let wanted = |name: &str| only == "all" || name.starts_with(only.as_str());
    let ways: [(&str, &dyn Fn() -> f64); 9] = [
        ("line", &|| line(n)),
        ("ring 8", &|| rings(n, 8, false)),
        ("ring 4096", &|| rings(n, 4096, false)),
        ("ring 8 locked", &|| rings(n, 8, true)),
        ("ring 4096 locked", &|| rings(n, 4096, true)),
        ("inbox", &|| inboxes(n, 4096)),
        ("inbox, capacity 8", &|| inboxes(n, 8)),
        ("engine", &|| engine(n, 4096)),
        ("engine, capacity 8", &|| engine(n, 8)),
    ];
    for _ in 0..rounds {
        let ways: Vec<(&str, f64)> = ways
            .iter()
            .filter(|(name, _)| wanted(name))
            .map(|(name, run)| (*name, run()))
            .collect();
        let line: Vec<String> = ways
            .iter()
            .map(|(name, ns)| format!("{name} {ns:.1}"))
            .collect();
        println!("ns one-way: {}", line.join(" | "));
    }
}
