//! SPEC R5.1, R5.2, R5.3, R2.3, R8.1 for the async sends (`send_to_async`, `send_async`,
//! `send_batch_to_async`), the shared input handle (`SharedInput`) and `shutdown_async`.
#![cfg(feature = "async")]
mod common;

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::task::{Context, Poll, Wake, Waker};

use common::*;
use correlator::{
    Correlator, InputHandle, Monitor, OutputOptions, Overflow, Pattern, Scope, SendErrorKind,
    SharedInput,
};

/// A waker that counts its wakes and unparks the thread that made it.
struct Counting {
    thread: std::thread::Thread,
    wakes: AtomicUsize,
}

impl Wake for Counting {
    fn wake(self: Arc<Self>) {
        self.wakes.fetch_add(1, Ordering::SeqCst);
        self.thread.unpark();
    }
}

fn counting() -> (Arc<Counting>, Waker) {
    let c = Arc::new(Counting {
        thread: std::thread::current(),
        wakes: AtomicUsize::new(0),
    });
    (c.clone(), Waker::from(c))
}

/// One poll of `f`.
fn poll_once<F: Future + Unpin>(f: &mut F, waker: &Waker) -> Poll<F::Output> {
    Pin::new(f).poll(&mut Context::from_waker(waker))
}

/// Polls `f` as an executor does: now, then only after each wake-up (parking until then).
fn run<F: Future + Unpin>(f: &mut F, count: &Counting, waker: &Waker) -> F::Output {
    loop {
        let seen = count.wakes.load(Ordering::SeqCst);
        if let Poll::Ready(v) = poll_once(f, waker) {
            return v;
        }
        while count.wakes.load(Ordering::SeqCst) == seen {
            std::thread::park();
        }
    }
}

fn block_on<F: Future>(f: F) -> F::Output {
    let (count, waker) = counting();
    run(&mut Box::pin(f), &count, &waker)
}

/// A gate the context waits at while it processes its first event (so its inbox stays full).
#[derive(Clone, Default)]
struct Gate(Arc<(Mutex<bool>, Condvar)>, Arc<AtomicUsize>);

impl Gate {
    fn wait(&self) {
        self.1.store(1, Ordering::SeqCst);
        let (open, cv) = &*self.0;
        let mut g = open.lock().unwrap();
        while !*g {
            g = cv.wait(g).unwrap();
        }
    }
    /// Whether the context reached the gate.
    fn reached(&self) -> bool {
        self.1.load(Ordering::SeqCst) == 1
    }
    fn open(&self) {
        let (open, cv) = &*self.0;
        *open.lock().unwrap() = true;
        cv.notify_all();
    }
}

/// Records the values of the kind-1 events it gets; waits at the gate on the first.
struct Recorder {
    seen: Arc<Mutex<Vec<u64>>>,
    gate: Gate,
}

/// Loads a [`Recorder`] whose gate is open into `main`; returns what it sees.
fn load_open_recorder(c: &Correlator<Ev>) -> Arc<Mutex<Vec<u64>>> {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let gate = Gate::default();
    gate.open();
    c.load(Recorder {
        seen: seen.clone(),
        gate,
    })
    .unwrap();
    seen
}

impl Monitor<Ev> for Recorder {
    fn on_load(&mut self, cx: &mut Scope<'_, Ev, Self>) {
        cx.on_all(
            Pattern::kind(1),
            |m: &mut Recorder, _: &mut Scope<'_, Ev, Recorder>, e: &Ev| {
                let first = m.seen.lock().unwrap().is_empty();
                if first {
                    m.gate.wait();
                }
                m.seen.lock().unwrap().push(e.val);
            },
        );
    }
}

/// What [`held_full`] sets up: the correlator, an input handle, the gate, what `main` recorded,
/// and the values sent so far.
type Held = (
    Correlator<Ev>,
    InputHandle<Ev>,
    Gate,
    Arc<Mutex<Vec<u64>>>,
    Vec<u64>,
);

/// A started correlator of inbox capacity `capacity` whose `main` records and is held at the
/// gate by its first event (value 0), with its inbox then filled; returns the values sent.
fn held_full(capacity: usize) -> Held {
    let c = correlator(capacity);
    let gate = Gate::default();
    let seen = Arc::new(Mutex::new(Vec::new()));
    c.load(Recorder {
        seen: seen.clone(),
        gate: gate.clone(),
    })
    .unwrap();
    let input = c.input();
    c.start();
    input.send_to(c.main(), ev(1, 0)).unwrap();
    // The context takes value 0 (its place stays held while it waits at the gate).
    assert!(eventually(|| gate.reached()));
    let mut sent = vec![0];
    let mut v = 1;
    while input.try_send_to(c.main(), ev(1, v)).is_ok() {
        sent.push(v);
        v += 1;
    }
    (c, input, gate, seen, sent)
}

// R5.1, R2.3: a send into a full inbox is pending (the thread is not blocked), is woken when the
// context frees places, and its event arrives after the earlier ones, in order.
#[test]
fn r5_1_send_to_async_waits_for_room_and_keeps_order() {
    bounded(|| {
        let (c, mut input, gate, seen, mut sent) = held_full(2);
        let main = c.main();
        let (count, waker) = counting();
        {
            let send = input.send_to_async(main, ev(1, 100));
            let mut send = std::pin::pin!(send);
            assert!(
                send.as_mut()
                    .poll(&mut Context::from_waker(&waker))
                    .is_pending(),
                "R5.1: a full inbox accepted the send at once"
            );
            gate.open();
            while count.wakes.load(Ordering::SeqCst) == 0 {
                std::thread::park();
            }
            loop {
                if let Poll::Ready(r) = send.as_mut().poll(&mut Context::from_waker(&waker)) {
                    r.unwrap();
                    break;
                }
                std::thread::park();
            }
        }
        sent.push(100);
        block_on(async {
            for v in 101..300 {
                input.send_to_async(main, ev(1, v)).await.unwrap();
            }
        });
        sent.extend(101..300);
        c.shutdown().unwrap();
        assert_eq!(
            *seen.lock().unwrap(),
            sent,
            "R2.3: lost, duplicated or reordered"
        );
    });
}

// R5.1: a send dropped while it waits (a timeout around it, again and again) sends nothing, holds
// no place, and the next send gets in.
#[test]
fn r5_1_cancelled_send_to_async_sends_nothing() {
    bounded(|| {
        let (c, mut input, gate, seen, mut sent) = held_full(2);
        let main = c.main();
        let (_count, waker) = counting();
        for v in 1000..2000 {
            let mut send = Box::pin(input.send_to_async(main, ev(1, v)));
            assert!(poll_once(&mut send, &waker).is_pending());
        }
        gate.open();
        block_on(input.send_to_async(main, ev(1, 7))).unwrap();
        sent.push(7);
        c.shutdown().unwrap();
        assert_eq!(
            *seen.lock().unwrap(),
            sent,
            "R5.1: a cancelled send arrived, or a later one was lost"
        );
    });
}

// R8.1: a send waiting for room when shutdown closes input ends with `Closed`, its event back.
#[test]
fn r8_1_waiting_send_to_async_gets_closed() {
    bounded(|| {
        let (c, mut input, gate, seen, sent) = held_full(2);
        let main = c.main();
        let (count, waker) = counting();
        let mut send = Box::pin(input.send_to_async(main, ev(1, 55)));
        assert!(poll_once(&mut send, &waker).is_pending());
        std::thread::scope(|s| {
            let shutdown = s.spawn(|| c.shutdown());
            let r = run(&mut send, &count, &waker);
            let e = r.expect_err("R8.1: a send accepted after input closed");
            assert_eq!(e.kind(), SendErrorKind::Closed);
            assert_eq!(e.into_inner().val, 55, "the event comes back");
            gate.open();
            shutdown.join().unwrap().unwrap();
        });
        assert_eq!(*seen.lock().unwrap(), sent);
    });
}

// R5.3: before `start()` nobody makes room: a send into a full inbox is refused with
// `FullBeforeStart`, as the blocking send is, instead of waiting forever.
#[test]
fn r5_3_send_to_async_before_start_into_full_inbox() {
    let c = correlator(2);
    let mut input = c.input();
    while input.try_send_to(c.main(), ev(1, 0)).is_ok() {}
    let e = block_on(input.send_to_async(c.main(), ev(1, 9))).unwrap_err();
    assert_eq!(e.kind(), SendErrorKind::FullBeforeStart);
    assert_eq!(e.into_inner().val, 9);
}

/// Sends, inside its handler, `n` events into its own context's full inbox through an input
/// handle's async send, run to completion on the context's thread.
struct SelfFeeder {
    input: InputHandle<Ev>,
    n: u64,
    got: Arc<AtomicUsize>,
}

impl Monitor<Ev> for SelfFeeder {
    fn on_load(&mut self, cx: &mut Scope<'_, Ev, Self>) {
        cx.on_all(
            Pattern::kind(3),
            |m: &mut SelfFeeder, _: &mut Scope<'_, Ev, SelfFeeder>, _: &Ev| {
                m.got.fetch_add(1, Ordering::SeqCst);
            },
        );
        cx.on_all(
            Pattern::kind(2),
            |m: &mut SelfFeeder, cx: &mut Scope<'_, Ev, SelfFeeder>, _: &Ev| {
                let me = cx.context();
                for v in 0..m.n {
                    block_on(m.input.send_to_async(me, ev(3, v))).unwrap();
                }
            },
        );
    }
}

// R5.2: inside a handler an async send waits as the context does: into its own full inbox it
// goes beyond capacity instead of hanging.
#[test]
fn r5_2_send_to_async_in_handler_into_own_full_inbox() {
    bounded(|| {
        let c = correlator(2);
        let got = Arc::new(AtomicUsize::new(0));
        c.load(SelfFeeder {
            input: c.input(),
            n: 10,
            got: got.clone(),
        })
        .unwrap();
        c.start();
        c.input().send_to(c.main(), ev(2, 0)).unwrap();
        assert!(
            eventually(|| got.load(Ordering::SeqCst) == 10),
            "R5.2: the handler's sends into its own full inbox did not all arrive"
        );
        let status = c.shutdown().unwrap();
        assert!(status.totals.overruns > 0, "R5.2: taken beyond capacity");
    });
}

fn assert_send<T: Send>(_: &T) {}
fn assert_shared<T: Send + Sync + Clone>() {}

// The futures are `Send` (they may move between a multi-threaded runtime's workers); a shared
// input is `Send + Sync + Clone`.
#[test]
fn futures_are_send_and_shared_input_is_sync() {
    let c = correlator(4);
    let mut input = c.input();
    let shared = c.shared_input();
    assert_shared::<SharedInput<Ev>>();
    let ch = c.channel("x").unwrap();
    assert_send(&input.send_to_async(c.main(), ev(1, 0)));
    assert_send(&input.send_async(ch, ev(1, 0)));
    let mut batch = vec![ev(1, 0)];
    assert_send(&input.send_batch_to_async(c.main(), &mut batch));
    assert_send(&shared.send_to_async(c.main(), ev(1, 0)));
    assert_send(&shared.send_async(ch, ev(1, 0)));
    assert_send(&c.shutdown_async());
}

// R2.3: a shared input is one sender: each thread's sends through it (or a clone) keep their
// order; nothing is lost; blocking and async sends mix.
#[test]
fn r2_3_shared_input_is_one_sender_across_clones() {
    bounded(|| {
        let c = correlator(4);
        let seen = load_open_recorder(&c);
        let shared = c.shared_input();
        c.start();
        let main = c.main();
        std::thread::scope(|s| {
            for t in 0..4u64 {
                let input = shared.clone();
                s.spawn(move || {
                    for i in 0..500u64 {
                        let e = ev(1, t * 10_000 + i);
                        if i % 2 == 0 {
                            input.send_to(main, e).unwrap();
                        } else {
                            block_on(input.send_to_async(main, e)).unwrap();
                        }
                    }
                });
            }
        });
        c.shutdown().unwrap();
        let seen = seen.lock().unwrap();
        assert_eq!(seen.len(), 2000, "lost or duplicated");
        for t in 0..4u64 {
            let mine: Vec<u64> = seen.iter().copied().filter(|v| v / 10_000 == t).collect();
            assert_eq!(
                mine,
                (0..500).map(|i| t * 10_000 + i).collect::<Vec<_>>(),
                "R2.3"
            );
        }
    });
}

// R4.3, R5.1: a channel send to a full `Block` output is pending until the reader takes one,
// then delivers; the order is kept.
#[test]
fn r4_3_send_async_waits_for_a_full_block_output() {
    bounded(|| {
        let c = correlator(4);
        let ch = c.channel("alerts").unwrap();
        let rx = c
            .output_with(ch, OutputOptions::bounded(2).policy(Overflow::Block))
            .unwrap();
        let mut input = c.input();
        c.start();
        assert_eq!(block_on(input.send_async(ch, ev(1, 1))).unwrap(), 1);
        assert_eq!(block_on(input.send_async(ch, ev(1, 2))).unwrap(), 1);
        let (count, waker) = counting();
        let mut third = Box::pin(input.send_async(ch, ev(1, 3)));
        assert!(
            poll_once(&mut third, &waker).is_pending(),
            "R4.3: beyond the bound"
        );
        assert_eq!(rx.recv().unwrap().val, 1);
        assert_eq!(run(&mut third, &count, &waker).unwrap(), 1);
        drop(third);
        assert_eq!(rx.recv().unwrap().val, 2);
        assert_eq!(rx.recv().unwrap().val, 3);
        c.shutdown().unwrap();
    });
}

// R5.1, R2.3: a batch larger than the inbox goes in parts as room frees up, in order.
#[test]
fn r5_1_send_batch_to_async_in_parts_in_order() {
    bounded(|| {
        let c = correlator(4);
        let seen = load_open_recorder(&c);
        let mut input = c.input();
        c.start();
        let mut batch: Vec<Ev> = (0..100).map(|v| ev(1, v)).collect();
        block_on(input.send_batch_to_async(c.main(), &mut batch)).unwrap();
        assert!(batch.is_empty());
        c.shutdown().unwrap();
        assert_eq!(*seen.lock().unwrap(), (0..100).collect::<Vec<_>>());
    });
}

// R8.1: `shutdown_async` completes on a `current_thread` runtime (its one thread is never
// blocked: the join runs elsewhere), after every accepted event was processed.
#[test]
fn r8_1_shutdown_async_on_current_thread_runtime() {
    bounded(|| {
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        rt.block_on(async {
            let c = correlator(4);
            let mut input = c.input();
            c.start();
            for v in 0..100 {
                input.send_to_async(c.main(), ev(1, v)).await.unwrap();
            }
            let status = c.shutdown_async().await.unwrap();
            assert_eq!(status.totals.received, 100);
        });
    });
}
