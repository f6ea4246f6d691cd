//! Stress of back-pressure and deadlock avoidance through the public API (SPEC R5.1, R5.2, R2.3,
//! R1.3): more contexts than this machine has cores, tiny inboxes, and every context sending to its
//! two neighbours in a ring, so that cycles of full inboxes form all the time. The protocols are
//! model-checked in loom-tests/; this test runs the real threads, the real back-off (spin, yield,
//! park) and the real wait graph many thousands of times per run.
mod common;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{mpsc, Arc};
use std::thread;
use std::time::Duration;

use common::*;
use correlator::{ContextOptions, ContextRef, Pattern};

/// Contexts in the ring (`main` and three more): twice the cores of the 2-core CI machine.
const CONTEXTS: usize = 4;
/// Inbox capacity: a handful, so that senders meet full inboxes constantly.
const CAPACITY: usize = 4;
/// Events each context starts in each direction of the ring.
const EVENTS: u64 = 5_000;
/// How many more hops each started event travels after its first (it is relayed this often).
const HOPS: u64 = 2;
/// A run takes well under a second; one that takes this long is a deadlock (R5.2) or a lost
/// wake-up (R1.3).
const HANG: Duration = Duration::from_secs(120);

/// The only event kind of the test.
const KIND: u32 = 2;
/// Sender field of the entry that tells a context to start sending.
const START: u64 = 0xff;

/// Direction of travel around the ring.
const FORWARD: u64 = 0;
const BACKWARD: u64 = 1;

/// An event sent by context `sender` on its link in direction `dir`, the `seq`-th on that link,
/// still to be relayed `hops` times.
fn data(sender: usize, dir: u64, hops: u64, seq: u64) -> Ev {
    debug_assert!(seq < 1 << 40 && hops < 1 << 8);
    ev(KIND, (sender as u64) << 56 | hops << 48 | dir << 40 | seq)
}

fn decode(e: &Ev) -> (u64, u64, u64, u64) {
    let v = e.val;
    (
        v >> 56,
        (v >> 48) & 0xff,
        (v >> 40) & 0xff,
        v & ((1 << 40) - 1),
    )
}

/// The monitor of context `me`: on `START` it sends `EVENTS` events to each neighbour; on every
/// event it checks that the sender's link sequence numbers arrive in order, without gap or
/// duplicate (R2.3), counts it, and relays it one hop further in its direction while it has hops
/// left. Every send is a blocking `send_to` from a handler, so a context that finds its neighbour's
/// inbox full waits for room (R5.1) unless that would close a cycle (R5.2).
fn ring_member(
    me: usize,
    ring: Arc<Vec<ContextRef>>,
    log: &Log,
    violations: Log,
    received: Arc<AtomicU64>,
) -> Script {
    Script::new("ring", log, move |_, cx| {
        let next = (me + 1) % CONTEXTS;
        let prev = (me + CONTEXTS - 1) % CONTEXTS;
        // Next sequence number on the link towards `next` (FORWARD) and `prev` (BACKWARD).
        let mut link_seq = [0u64; 2];
        // Next sequence number expected from each sender.
        let mut expected = [0u64; CONTEXTS];
        cx.on_all(Pattern::kind(KIND), move |_, cx: &mut Cx<'_>, e: &Ev| {
            let (sender, hops, dir, seq) = decode(e);
            let mut send = |cx: &mut Cx<'_>, dir: u64, hops: u64| {
                let to = if dir == FORWARD { next } else { prev };
                let s = link_seq[dir as usize];
                link_seq[dir as usize] += 1;
                if let Err(err) = cx.send_to(ring[to], data(me, dir, hops, s)) {
                    violations.push(format!("context {me}: send to {to} failed: {err}"));
                }
            };
            if sender == START {
                for _ in 0..EVENTS {
                    send(cx, FORWARD, HOPS);
                    send(cx, BACKWARD, HOPS);
                }
                return;
            }
            let from = sender as usize;
            let want_from = if dir == FORWARD { prev } else { next };
            if from != want_from {
                violations.push(format!("context {me}: {dir}-event from {from}"));
            }
            if seq != expected[from] {
                violations.push(format!(
                    "context {me}: from {from} got #{seq}, expected #{} (R2.3: lost, duplicated \
                     or reordered)",
                    expected[from]
                ));
            }
            expected[from] = seq + 1;
            received.fetch_add(1, Ordering::Relaxed);
            if hops > 0 {
                send(cx, dir, hops - 1);
            }
        });
    })
}

/// Runs `f` on this thread; aborts the process if it has not returned within `HANG`, so that a
/// deadlock fails the test run instead of hanging it.
fn with_watchdog(f: impl FnOnce()) {
    let (done, finished) = mpsc::channel::<()>();
    let watchdog = thread::spawn(move || {
        if let Err(mpsc::RecvTimeoutError::Timeout) = finished.recv_timeout(HANG) {
            eprintln!(
                "stress_cycle: no progress for {HANG:?} (deadlock or lost wake-up): aborting"
            );
            std::process::abort();
        }
    });
    f();
    drop(done);
    watchdog.join().unwrap();
}

// R5.1, R5.2, R2.3, R1.3: four contexts on a two-core machine, each sending thousands of events to
// both neighbours of a ring through inboxes of capacity 4, and relaying what it receives. Every
// event arrives exactly once, every sender's order is kept, the inboxes shrink back to empty, and
// the run ends: cycles of full inboxes are broken by taking entries beyond capacity (R5.2) instead of
// waiting forever, and more contexts than cores neither livelock nor starve (R1.3).
#[test]
fn r5_2_four_context_ring_with_full_inboxes_finishes() {
    with_watchdog(|| {
        let c = correlator(CAPACITY);
        let mut ring = vec![c.main()];
        for i in 1..CONTEXTS {
            ring.push(
                c.create_context(ContextOptions::new(format!("ring-{i}")))
                    .unwrap(),
            );
        }
        let ring = Arc::new(ring);
        let log = Log::default();
        let violations = Log::default();
        let received: Vec<Arc<AtomicU64>> =
            (0..CONTEXTS).map(|_| Arc::new(AtomicU64::new(0))).collect();
        for (me, &ctx) in ring.iter().enumerate() {
            let member = ring_member(
                me,
                ring.clone(),
                &log,
                violations.clone(),
                received[me].clone(),
            );
            c.load_in(ctx, member).unwrap();
        }
        let input = c.input();
        c.start();
        for &ctx in ring.iter() {
            input.send_to(ctx, ev(KIND, START << 56)).unwrap();
        }
        // R8.1: shutdown lets every context finish what was accepted, relays included.
        let status = c.shutdown().unwrap();

        assert_eq!(violations.take(), Vec::<String>::new());
        // From each neighbour: EVENTS started events and each of their HOPS relays.
        let per_context = 2 * EVENTS * (HOPS + 1);
        for (me, n) in received.iter().enumerate() {
            assert_eq!(
                n.load(Ordering::Relaxed),
                per_context,
                "R5.1: context {me} lost events"
            );
        }
        for s in &status.contexts {
            assert_eq!(s.inbox_len, 0, "R5.2: {} did not drain", s.name);
            assert_eq!(s.handler_panics, 0, "{}: a handler panicked", s.name);
        }
        assert_eq!(
            status.totals.sent,
            CONTEXTS as u64 * per_context,
            "R9.1: every context send is counted once"
        );
        eprintln!(
            "stress_cycle: {} events delivered, {} overruns (R5.2), {} ms blocked",
            CONTEXTS as u64 * per_context,
            status.totals.overruns,
            status.totals.blocked_ns / 1_000_000
        );
    });
}
