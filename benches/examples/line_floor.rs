//! The floor under `stream/1to1/engine`: what handing cache lines from one core to another costs
//! with nothing of the engine around it. A producer on core 1 fills a ring of 4096 lines, one
//! "event" per line (two words and a stamp, as an inbox slot of the harness's event), and a
//! consumer on core 0 follows it, spinning on each line's stamp and giving room back every 64
//! lines. Prints nanoseconds per line for each way of filling a line, the ways interleaved round by
//! round:
//!
//! - `plain`: stores only, as a single-producer ring (rtrb) sends;
//! - `locked`: a `lock cmpxchg` on a word of the producer's own before each line, as a
//!   multi-producer send claims its place (the inbox's reservation CAS), first store an integer;
//! - `locked, vector first`: the same, but the first store into the line is a 16-byte vector store
//!   (what the compiler emits when it merges neighbouring fields of an entry);
//! - `locked, vector data early`: integer stores first, then a 16-byte vector store whose data was
//!   in its register before them (what the compiler emits when it copies an event that is already
//!   in registers, or loads it before the stores);
//! - `locked, prefetchw +N`: `locked` with a `prefetchw` of the line `N` lines ahead after each
//!   line, as the inbox's sender does (`N` = 2 there).
//!
//! harness/BENCHMARKS.md ("The first store into a slot", "Is a single send at its floor?") has
//! figures and what they say about the engine. Quick to run, for other hardware:
//!
//! `cargo run --release -p correlator-benches --example line_floor -- 4000000 3` (lines, rounds)

use correlator_benches::arg;
use std::cell::UnsafeCell;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

/// Lines in the ring.
const RING: usize = 4096;
/// The consumer gives room back every this many lines.
const RELEASE_EVERY: u64 = 64;

/// One cache line: a stamp (`i + 1` once line `i` of the stream is in it) and payload words.
#[repr(C, align(64))]
struct Line {
    stamp: AtomicU64,
    words: [UnsafeCell<u64>; 7],
}

/// The ring, shared by the two threads.
struct Ring {
    lines: Box<[Line]>,
    /// Lines below this one were read: the producer may reuse their places.
    freed: AtomicU64,
}

// SAFETY: a line's words are written by the producer only while the consumer does not read them
// (before the stamp publishes the line, after `freed` gave its place back) and read by the
// consumer only between those two points; the stamp and `freed` order the accesses
// (Release/Acquire).
unsafe impl Sync for Ring {}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Fill {
    Plain,
    Locked,
    LockedVectorFirst,
    LockedVectorDataEarly,
    LockedPrefetch(usize),
}

impl Fill {
    fn name(self) -> String {
        match self {
            Fill::Plain => "plain".into(),
            Fill::Locked => "locked".into(),
            Fill::LockedVectorFirst => "locked, vector first".into(),
            Fill::LockedVectorDataEarly => "locked, vector data early".into(),
            Fill::LockedPrefetch(n) => format!("locked, prefetchw +{n}"),
        }
    }
}

/// Writes line `i`'s payload (`words[2] = i`, the others zero) the `fill` way.
#[inline(always)]
fn write_payload(line: &Line, i: u64, fill: Fill) {
    let w = |k: usize| line.words[k].get();
    #[cfg(target_arch = "x86_64")]
    match fill {
        Fill::LockedVectorFirst => {
            // SAFETY: the producer owns the line's words (see `Ring`); `words[0..2]` are 16 bytes
            // in bounds; SSE2 is part of x86_64.
            unsafe {
                use std::arch::x86_64::{_mm_setzero_si128, _mm_storeu_si128};
                _mm_storeu_si128(w(0).cast(), _mm_setzero_si128());
                std::ptr::write_volatile(w(2), i);
            }
            return;
        }
        Fill::LockedVectorDataEarly => {
            // Spelled out in assembly so that the order (register first, then the integer stores,
            // then the vector store) is the one measured, whatever the compiler would schedule.
            // SAFETY: as above; `words[3..5]` are 16 bytes in bounds.
            unsafe {
                std::arch::asm!(
                    "movq {x}, {v}",
                    "mov qword ptr [{w0}], 0",
                    "mov qword ptr [{w2}], {v}",
                    "movups xmmword ptr [{w3}], {x}",
                    x = out(xmm_reg) _,
                    v = in(reg) i,
                    w0 = in(reg) w(0),
                    w2 = in(reg) w(2),
                    w3 = in(reg) w(3),
                    options(nostack, preserves_flags),
                );
            }
            return;
        }
        _ => {}
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = fill;
    // SAFETY: the producer owns the line's words (see `Ring`); volatile keeps each an 8-byte
    // integer store, in this order.
    unsafe {
        std::ptr::write_volatile(w(0), 0);
        std::ptr::write_volatile(w(1), 0);
        std::ptr::write_volatile(w(2), i);
    }
}

/// Asks for `line` in a writable state (a no-op elsewhere than x86_64).
#[inline(always)]
fn prefetch_for_write(line: &Line) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: `prefetchw` only hints the cache and cannot fault.
    unsafe {
        std::arch::asm!("prefetchw [{0}]", in(reg) line as *const Line, options(nostack, preserves_flags, readonly));
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = line;
}

/// One round: `n` lines through the ring filled the `fill` way; nanoseconds per line.
fn round(n: u64, fill: Fill) -> f64 {
    let ring = Arc::new(Ring {
        lines: (0..RING)
            .map(|_| Line {
                stamp: AtomicU64::new(0),
                words: Default::default(),
            })
            .collect(),
        freed: AtomicU64::new(0),
    });
    let r = ring.clone();
    let consumer = std::thread::spawn(move || {
        core_affinity::set_for_current(core_affinity::CoreId { id: 0 });
        let mut sum = 0u64;
        for i in 0..n {
            let line = &r.lines[i as usize % RING];
            while line.stamp.load(Ordering::Acquire) != i + 1 {
                std::hint::spin_loop();
            }
            // SAFETY: the stamp published the line and the producer leaves it alone until `freed`
            // passes it.
            sum = sum.wrapping_add(unsafe { *line.words[2].get() });
            if (i + 1) % RELEASE_EVERY == 0 {
                r.freed.store(i + 1, Ordering::Release);
            }
        }
        sum
    });
    core_affinity::set_for_current(core_affinity::CoreId { id: 1 });
    let claim = AtomicU64::new(0);
    let t0 = Instant::now();
    for i in 0..n {
        while i >= ring.freed.load(Ordering::Acquire) + RING as u64 {
            std::hint::spin_loop();
        }
        if fill != Fill::Plain {
            // The claim of a multi-producer send: a locked read-modify-write of a word nobody else
            // touches, so that only its draining of earlier stores is measured.
            let _ = claim.compare_exchange(i, i + 1, Ordering::AcqRel, Ordering::Relaxed);
        }
        let line = &ring.lines[i as usize % RING];
        write_payload(line, i, fill);
        line.stamp.store(i + 1, Ordering::Release);
        if let Fill::LockedPrefetch(ahead) = fill {
            prefetch_for_write(&ring.lines[(i as usize + ahead) % RING]);
        }
    }
    let elapsed = t0.elapsed();
    let sum = consumer.join().expect("consumer");
    assert_eq!(
        sum,
        n * n.saturating_sub(1) / 2,
        "the consumer read every line"
    );
    elapsed.as_nanos() as f64 / n as f64
}

fn main() {
    let n: u64 = arg(1, 4_000_000, "lines per round");
    let rounds: usize = arg(2, 3, "rounds");
    let fills = [
        Fill::Plain,
        Fill::Locked,
        Fill::LockedVectorFirst,
        Fill::LockedVectorDataEarly,
        Fill::LockedPrefetch(2),
        Fill::LockedPrefetch(16),
    ];
    for _ in 0..rounds {
        let line: Vec<String> = fills
            .iter()
            .map(|&f| format!("{}: {:.1} ns", f.name(), round(n, f)))
            .collect();
        println!("{}", line.join(" | "));
    }
}
