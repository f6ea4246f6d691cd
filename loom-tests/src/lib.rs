//! Scenarios of the engine's concurrency protocols, written once and run two ways.
//!
//! Each public function of [`scenarios`] sets up a few threads (two or three) around the engine's
//! real inbox ([`correlator::inbox`]), wait graph ([`correlator::internals::WaitGraph`]) and route
//! stack ([`correlator::route`]), drives them through one protocol, and asserts what a user would see:
//! order per sender, no loss, no duplicate, no phantom entry, termination.
//!
//! * Under `--cfg loom` the engine's `sync` shim and this crate's [`rt`] are loom's, and the tests in
//!   `tests/model_*.rs` run every scenario inside `loom::model`, which explores every interleaving
//!   (up to `LOOM_MAX_PREEMPTIONS` preemptions) and reports a deadlock when every thread is parked
//!   forever, which is how a lost wake-up shows.
//! * Without it, `tests/plain.rs` runs the same scenarios many times on real threads.
//!
//! The send helpers are thin calls into the engine's own send core (`correlator::internals`, the
//! `send` module that `deliver::Links`, the input handles and the send futures call): [`send_blocking`]
//! and [`send_from_context`] are `send::send` (try, give back, wait or overrun, commit),
//! [`send_batch_blocking`] and [`send_batch_whole_blocking`] are `send::send_batch` and
//! `send::send_batch_whole`, [`SendAsync`] polls `send::poll_send` (the loop of the engine's send
//! futures) and [`output_push`] is `deliver::push_blocking`. Under `cfg(loom)` the engine's back-off
//! parks at once (its spin and yield steps only delay the park step). The sender's side is the
//! engine's too: an input handle outside any context ([`Outside`]) or a context of a model's wait
//! graph ([`AsContext`], as a handler's send through a handle waits). [`context_loop_batched`] runs the engine's own context loop
//! (`correlator::internals::run_loop`, the skeleton that the context's thread runs with the whole
//! context as its body), with a body that records what it takes and a back-off that parks at once.

#![warn(missing_docs)]

use correlator::inbox::{Consumer, HeldPlaces, Inbox, Refusal, Sender};
use correlator::internals::{
    poll_send, push_blocking, run_loop, send, send_batch, send_batch_whole, try_send, Attempt,
    LoopBody, OutputDelivery, OutputQueue, Pause, Pushed, RoomRegistration, Wait, WaitGraph,
};
pub use correlator::internals::{AsContext, Flow, Outside, Placed};
use correlator::{OutputOptions, SendErrorKind};

/// The runtime the scenarios use: loom's under `cfg(loom)`, `std`'s otherwise (the same items the
/// engine's `sync` shim switches).
#[cfg(loom)]
pub mod rt {
    pub use loom::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    pub use loom::sync::Arc;
    pub use loom::thread::{current, park, spawn, yield_now, JoinHandle, Thread};
}

/// The runtime the scenarios use: loom's under `cfg(loom)`, `std`'s otherwise (the same items the
/// engine's `sync` shim switches).
#[cfg(not(loom))]
pub mod rt {
    pub use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    pub use std::sync::Arc;
    pub use std::thread::{current, park, spawn, yield_now, JoinHandle, Thread};
}

/// Polls `f` on this thread, parking between polls: the smallest executor, on the runtime's
/// threads (a wake-up that is lost leaves the thread parked forever: a loom deadlock).
pub fn block_on<F: std::future::Future>(f: F) -> F::Output {
    struct Unpark(rt::Thread);
    impl std::task::Wake for Unpark {
        fn wake(self: std::sync::Arc<Self>) {
            self.0.unpark();
        }
    }
    let waker = std::task::Waker::from(std::sync::Arc::new(Unpark(rt::current())));
    let mut cx = std::task::Context::from_waker(&waker);
    let mut f = std::pin::pin!(f);
    loop {
        if let std::task::Poll::Ready(v) = f.as_mut().poll(&mut cx) {
            return v;
        }
        rt::park();
    }
}

/// An async send from an input handle into `inbox`: the engine's own send-future loop
/// ([`poll_send`]: try; on a full inbox register the task's waker through the inbox's
/// `poll_room`, which announces and re-checks; `Pending` once registered; its registration leaves
/// the list when the future completes or is dropped). The value lives in the future until it is
/// committed.
pub struct SendAsync<T> {
    inbox: rt::Arc<Inbox<T>>,
    value: Option<T>,
    room: RoomRegistration<T>,
}

impl<T> SendAsync<T> {
    /// A send of `value` into `inbox` as an input handle.
    pub fn new(inbox: &rt::Arc<Inbox<T>>, value: T) -> Self {
        Self {
            inbox: inbox.clone(),
            value: Some(value),
            room: RoomRegistration::new(),
        }
    }
}

impl<T> Unpin for SendAsync<T> {}

impl<T> std::future::Future for SendAsync<T> {
    type Output = Result<(), (Refusal, T)>;

    fn poll(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Self::Output> {
        let this = &mut *self;
        let inbox = &this.inbox;
        let attempt = |v| match try_send(inbox, Sender::External, v) {
            Ok(()) => Attempt::Done(Ok(())),
            Err((Refusal::Full, v)) => Attempt::Full(inbox.clone(), v),
            Err((refusal, v)) => Attempt::Done(Err((refusal, v))),
        };
        let closed = |_: &Inbox<T>, v| Err((Refusal::Closed, v));
        poll_send(&mut this.room, &mut this.value, cx.waker(), attempt, closed)
    }
}

/// A waker that counts its wakes and unparks the thread that made it.
pub struct CountingWaker {
    thread: rt::Thread,
    wakes: std::sync::atomic::AtomicUsize,
}

impl CountingWaker {
    /// A waker for the calling thread, and its count.
    pub fn for_current() -> (std::sync::Arc<Self>, std::task::Waker) {
        let me = std::sync::Arc::new(Self {
            thread: rt::current(),
            wakes: std::sync::atomic::AtomicUsize::new(0),
        });
        let waker = std::task::Waker::from(me.clone());
        (me, waker)
    }

    /// Wakes so far.
    pub fn wakes(&self) -> usize {
        self.wakes.load(std::sync::atomic::Ordering::SeqCst)
    }
}

impl std::task::Wake for CountingWaker {
    fn wake(self: std::sync::Arc<Self>) {
        self.wakes.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        self.thread.unpark();
    }
}

/// Polls `f` until it is ready as an executor does: once now, and after that only once `waker`
/// was woken (parking until then), so a lost wake-up leaves the thread parked forever.
pub fn poll_until_ready<F: std::future::Future + Unpin>(
    f: &mut F,
    count: &CountingWaker,
    waker: &std::task::Waker,
) -> F::Output {
    let mut cx = std::task::Context::from_waker(waker);
    loop {
        let seen = count.wakes();
        if let std::task::Poll::Ready(v) = std::pin::Pin::new(&mut *f).poll(&mut cx) {
            return v;
        }
        while count.wakes() == seen {
            rt::park();
        }
    }
}

/// How a [`send_from_context`] went: the engine's [`Placed`].
pub type Delivery = Placed;

/// Parks at once: the back-off of the models' context loop (the spin and yield steps of the
/// engine's back-off only delay the park step, and under loom every one of them would be a yield,
/// which multiplies the schedules without adding any).
fn park_at_once() -> bool {
    true
}

/// A blocking send from an input handle outside any context: the engine's [`send`] with
/// `Wait::Block` (a `try_reserve`, then on a full inbox its wait for room, then commit).
///
/// # Errors
/// `(kind, value)` when the inbox refuses `sender` (`Closed` once external input closed).
pub fn send_blocking<T>(
    inbox: &Inbox<T>,
    sender: Sender,
    value: T,
) -> Result<(), (SendErrorKind, T)> {
    send(inbox, 0, sender, value, Wait::Block, Outside).map(drop)
}

/// A blocking send from context `me` of `graph` to the inbox of context `target_id`: the engine's
/// [`send`] with `Wait::Block` as that context (record the wait edge; if it closes a cycle,
/// reserve beyond capacity (R5.2); otherwise wait for room (R5.1) and remove the edge when the
/// wait ends), then commit.
///
/// # Errors
/// `(ContextStopped, value)` when the target inbox has closed.
pub fn send_from_context<T>(
    graph: &WaitGraph,
    me: u32,
    target: &Inbox<T>,
    target_id: u32,
    value: T,
) -> Result<Delivery, (SendErrorKind, T)> {
    let side = AsContext { graph, me };
    send(target, target_id, Sender::Context, value, Wait::Block, side)
}

/// A blocking batch send from an input handle: the engine's [`send_batch`] with `Wait::Block` (as
/// many places per reservation as there is room for; with no room at all, one value through the
/// single send's wait). Returns the values not sent, in order, with the refusal.
///
/// # Errors
/// `(kind, rest)` when the inbox refuses `sender`.
pub fn send_batch_blocking<T>(
    inbox: &Inbox<T>,
    sender: Sender,
    mut values: Vec<T>,
) -> Result<(), (SendErrorKind, Vec<T>)> {
    match send_batch(inbox, 0, sender, &mut values, |v| v, Wait::Block, Outside) {
        Ok(()) => Ok(()),
        Err(kind) => Err((kind, values)),
    }
}

/// An all-or-nothing batch send that waits: the engine's [`send_batch_whole`] with `Wait::Block`
/// (one reservation for every value or none; while the inbox has too little room, wait through the
/// room-waiter protocol for room for the whole batch, holding no place).
///
/// # Errors
/// `(kind, values)` when the inbox refuses `sender` (nothing was sent).
pub fn send_batch_whole_blocking<T>(
    inbox: &Inbox<T>,
    sender: Sender,
    mut values: Vec<T>,
) -> Result<(), (SendErrorKind, Vec<T>)> {
    match send_batch_whole(inbox, sender, &mut values, |v| v, Wait::Block, Outside) {
        Ok(()) => Ok(()),
        Err(kind) => Err((kind, values)),
    }
}

/// Runs [`context_loop`] until it has taken `n` entries; returns them in the order taken.
pub fn take<T>(consumer: &mut Consumer<T>, n: usize) -> Vec<T> {
    let mut places = consumer.held_places(1);
    take_batched(consumer, &mut places, n)
}

/// [`take`] with [`context_loop_batched`]: the places are held in `places` and freed in batches.
pub fn take_batched<T>(consumer: &mut Consumer<T>, places: &mut HeldPlaces<T>, n: usize) -> Vec<T> {
    let mut got = Vec::with_capacity(n);
    context_loop_batched(consumer, places, &|| false, |v| {
        got.push(v);
        if got.len() == n {
            Flow::Stop
        } else {
            Flow::Continue
        }
    });
    got
}

/// The engine's context loop ([`run_loop`]) with a release batch of 1: every place is freed as soon
/// as its entry is processed. See [`context_loop_batched`].
pub fn context_loop<T>(
    consumer: &mut Consumer<T>,
    exit: &dyn Fn() -> bool,
    process: impl FnMut(T) -> Flow,
) {
    let mut places = consumer.held_places(1);
    context_loop_batched(consumer, &mut places, exit, process);
}

/// The engine's context loop itself ([`run_loop`], which the context's thread runs too): take an
/// entry and process it to completion; hold its place in `places` and free the held places together
/// once the batch is full; when none is ready, free every held place first, leave if `exit()` says
/// so and nothing is accepted, and otherwise announce sleep and park (`try_sleep` + `park(exit)`),
/// or spin while a reservation is pending (`try_sleep` refuses then). `process` may also end the
/// loop (after the held places are freed), which the scenarios use once they received everything
/// they expect. Only the back-off is the models' own: it parks at once ([`ParkAtOnce`]).
pub fn context_loop_batched<T>(
    consumer: &mut Consumer<T>,
    places: &mut HeldPlaces<T>,
    exit: &dyn Fn() -> bool,
    process: impl FnMut(T) -> Flow,
) {
    let mut body = ModelBody {
        places,
        exit,
        process,
    };
    run_loop(consumer, &mut body, &mut ParkAtOnce);
}

/// The models' side of the context loop: `process`, then hold the entry's place in `places`.
struct ModelBody<'a, T, F> {
    places: &'a mut HeldPlaces<T>,
    exit: &'a dyn Fn() -> bool,
    process: F,
}

impl<T, F: FnMut(T) -> Flow> LoopBody<T> for ModelBody<'_, T, F> {
    fn process(&mut self, entry: T) -> Flow {
        let flow = (self.process)(entry);
        if self.places.hold_one() {
            self.places.give_back();
        }
        flow
    }

    fn idle(&mut self) {
        self.places.give_back();
    }

    fn exit(&self) -> bool {
        (self.exit)()
    }
}

/// The back-off of the models: park at once (the spin and yield steps only delay the park).
pub struct ParkAtOnce;

impl Pause for ParkAtOnce {
    fn pause(&mut self) -> bool {
        park_at_once()
    }

    fn reset(&mut self) {}
}

/// A commit from the thread that builds a scenario, before its other threads start (pre-filling an
/// inbox).
///
/// # Panics
/// If the inbox has no room.
pub fn prefill<T>(inbox: &Inbox<T>, value: T) {
    let r = inbox
        .try_reserve(Sender::External)
        .expect("prefill needs room");
    r.commit(value);
}

fn never() -> bool {
    false
}

/// The scenarios; each runs once and panics if the protocol misbehaved.
pub mod scenarios {
    use super::*;
    use correlator::route::{RouteStack, Routed};
    use rt::{spawn, Arc, AtomicBool, Ordering};

    /// Asserts that `got` holds `expected` (one sender's entries, in order) as a subsequence and no
    /// other entry of that sender.
    fn assert_sender_fifo(got: &[(u8, u8)], sender: u8, expected: &[u8], rule: &str) {
        let seqs: Vec<u8> = got
            .iter()
            .filter(|(s, _)| *s == sender)
            .map(|&(_, q)| q)
            .collect();
        assert_eq!(
            seqs, expected,
            "{rule}: entries of sender {sender} lost, duplicated or reordered; all: {got:?}"
        );
    }

    /// R2.3: two producers (one sending two entries, one sending one) and the consumer, capacity 2,
    /// so the ring wraps and a producer can meet a full inbox. Per-producer FIFO, no loss, no
    /// duplicate.
    ///
    /// Every wait is the engine's own: producers that find the inbox full wait for room through the
    /// room-waiter protocol (`send_blocking`), and the consumer runs the context loop (it yields only
    /// while a reservation is pending, and parks when idle). A model in which two threads spin on
    /// `yield_now` at once (an earlier version of this one: producers retrying `Full` by yielding
    /// while the consumer yielded on `None`) does not terminate under loom: a yield lets the checker
    /// switch between the two spinners for free, so it explores schedules in which the third thread,
    /// the one holding the pending reservation, never runs again, and the model exceeds the branch
    /// limit.
    pub fn two_producers_fifo() {
        let (inbox, mut consumer) = Inbox::<(u8, u8)>::with_capacity(2);
        let push_all = |inbox: Arc<Inbox<(u8, u8)>>, sender: u8, n: u8| {
            move || {
                for seq in 0..n {
                    send_blocking(&inbox, Sender::External, (sender, seq)).expect("open inbox");
                }
            }
        };
        let a = spawn(push_all(inbox.clone(), 1, 2));
        let b = spawn(push_all(inbox.clone(), 2, 1));
        let got = take(&mut consumer, 3);
        a.join().unwrap();
        b.join().unwrap();
        assert_eq!(
            consumer.pop(),
            None,
            "R2.3: a duplicate entry after all were taken"
        );
        assert!(inbox.is_empty());
        assert_sender_fifo(&got, 1, &[0, 1], "R2.3");
        assert_sender_fifo(&got, 2, &[0], "R2.3");
    }

    /// R1.3 / sleep protocol: the consumer runs the context loop (parks when idle) while one producer
    /// pushes two entries, each through its own reservation, so the consumer may go to sleep before,
    /// between and after them. A lost wake-up leaves the consumer parked forever: loom reports it as a
    /// deadlock; on real threads the test hangs.
    pub fn consumer_parks_no_lost_wakeup() {
        let (inbox, mut consumer) = Inbox::<u8>::with_capacity(2);
        let producer = {
            let inbox = inbox.clone();
            spawn(move || {
                for v in 0..2 {
                    send_blocking(&inbox, Sender::External, v).expect("open inbox");
                }
            })
        };
        let got = take(&mut consumer, 2);
        producer.join().unwrap();
        assert_eq!(got, [0, 1], "R2.3: lost or reordered across a sleep");
        assert!(inbox.is_empty());
    }

    /// Two producers wake one sleeping consumer: whichever reservation clears `SLEEPING` must wake
    /// it, and the other's commit must not be stranded.
    pub fn two_producers_wake_sleeping_consumer() {
        let (inbox, mut consumer) = Inbox::<(u8, u8)>::with_capacity(2);
        let producers: Vec<_> = (1..=2)
            .map(|s| {
                let inbox = inbox.clone();
                spawn(move || send_blocking(&inbox, Sender::External, (s, 0)).expect("open"))
            })
            .collect();
        let got = take(&mut consumer, 2);
        for p in producers {
            p.join().unwrap();
        }
        assert_sender_fifo(&got, 1, &[0], "R2.3");
        assert_sender_fifo(&got, 2, &[0], "R2.3");
    }

    /// R5.1: capacity 1, already full; a producer finds it full (`Refusal::Full`), waits for room
    /// (`wait_for_room`, parking), and resumes once the consumer took and released the entry. Its
    /// entry is not lost and comes after the one that was there. The consumer parks when idle too, so
    /// both wake-up directions are in play.
    pub fn blocked_producer_resumes() {
        let (inbox, mut consumer) = Inbox::<u8>::with_capacity(1);
        prefill(&inbox, 0);
        let met_full = Arc::new(AtomicBool::new(false));
        let producer = {
            let inbox = inbox.clone();
            let met_full = met_full.clone();
            spawn(move || {
                // The consumer holds entry 0 until this flag is set, so the inbox is full here in
                // every interleaving and this send must wait (`send_blocking` tries again first,
                // then waits for room while the consumer releases).
                match inbox.try_reserve(Sender::External) {
                    Err(Refusal::Full) => met_full.store(true, Ordering::Release),
                    Ok(r) => {
                        r.cancel();
                        panic!("R5.1: a full inbox accepted beyond capacity");
                    }
                    Err(Refusal::Closed) => unreachable!("nobody closes"),
                }
                send_blocking(&inbox, Sender::External, 1).expect("open inbox");
            })
        };
        let mut got = Vec::new();
        context_loop(&mut consumer, &never, |v| {
            while v == 0 && !met_full.load(Ordering::Acquire) {
                rt::yield_now();
            }
            got.push(v);
            if got.len() == 2 {
                Flow::Stop
            } else {
                Flow::Continue
            }
        });
        producer.join().unwrap();
        assert_eq!(
            got,
            [0, 1],
            "R5.1: the waiting producer's entry was lost or reordered"
        );
        assert_eq!(inbox.overruns(), 0, "R5.2: an overrun without a cycle");
    }

    /// R5.1 with places freed in batches: capacity 2, already full, release batch 3. A producer sends
    /// three more entries with back-pressure (it must wait, parking). The consumer holds the places
    /// of processed entries and frees them when the batch is full or when nothing is ready. The
    /// batch is larger than the capacity here (the engine caps it at half the capacity), so a full
    /// batch never frees anything before the inbox has run dry: only the free-before-waiting step
    /// can give the parked producer room, and without it neither thread ever finishes. Everything
    /// arrives in order, without an overrun, and the count ends at zero.
    pub fn batched_release_producer_resumes() {
        let (inbox, mut consumer) = Inbox::<u8>::with_capacity(2);
        prefill(&inbox, 0);
        prefill(&inbox, 1);
        let producer = {
            let inbox = inbox.clone();
            spawn(move || {
                for v in 2..5 {
                    send_blocking(&inbox, Sender::External, v).expect("open inbox");
                }
            })
        };
        let mut places = consumer.held_places(3);
        let got = take_batched(&mut consumer, &mut places, 5);
        producer.join().unwrap();
        assert_eq!(
            got,
            [0, 1, 2, 3, 4],
            "R5.1: an entry was lost or reordered with batched releases"
        );
        assert_eq!(inbox.overruns(), 0, "R5.2: an overrun without a cycle");
        assert_eq!(places.held(), 0, "held places not freed at the end");
        assert!(inbox.is_empty(), "the count did not return to zero");
    }

    /// R5.1 with two producers parked on the same full inbox (capacity 1): the second finds the
    /// `ROOM_WAITERS` flag already set by the first and parks without setting it; both must resume.
    pub fn two_blocked_producers_resume() {
        let (inbox, mut consumer) = Inbox::<(u8, u8)>::with_capacity(1);
        prefill(&inbox, (0, 0));
        let producers: Vec<_> = (1..=2)
            .map(|s| {
                let inbox = inbox.clone();
                spawn(move || send_blocking(&inbox, Sender::External, (s, 0)).expect("open"))
            })
            .collect();
        let mut got = Vec::new();
        // The consumer runs the context loop: if a producer's wake-up were lost, it would end up
        // parked too, and loom reports the deadlock (a consumer spinning on `yield_now` instead would
        // turn the same bug into an endless model that exceeds the branch limit).
        context_loop(&mut consumer, &never, |e| {
            got.push(e);
            if got.len() == 3 {
                Flow::Stop
            } else {
                Flow::Continue
            }
        });
        for p in producers {
            p.join().unwrap();
        }
        assert_eq!(got[0], (0, 0));
        assert_sender_fifo(&got, 1, &[0], "R5.1");
        assert_sender_fifo(&got, 2, &[0], "R5.1");
    }

    /// An entry of the cycle models.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    enum Msg {
        /// The entry that makes a context send.
        Start,
        /// Entry number `seq` sent by context (or producer) `from`.
        From(u8, u8),
    }

    /// R5.2: two contexts, each a thread owning its inbox's consumer, each inbox of capacity 1 and
    /// full. Processing its `Start`, context 0 sends two entries to context 1 and context 1 sends one
    /// to context 0, through the engine's send core (`send::send`, waiting as a context of the
    /// wait graph). Without the cycle check both would wait forever (loom: deadlock). Checks: both finish; everything arrives, in
    /// order per sender, including entries that went through the overflow and the transition back to
    /// the ring; at least one overrun was counted, at most one per send that found a full inbox.
    pub fn two_contexts_full_inboxes_finish() {
        let graph = Arc::new(WaitGraph::new(2));
        let (in0, c0) = Inbox::<Msg>::with_capacity(1);
        let (in1, c1) = Inbox::<Msg>::with_capacity(1);
        prefill(&in0, Msg::Start);
        prefill(&in1, Msg::Start);
        let context = |me: u8,
                       mut consumer: Consumer<Msg>,
                       target: Arc<Inbox<Msg>>,
                       sends: u8,
                       expect: u8,
                       graph: Arc<WaitGraph>| {
            move || {
                let mut got = Vec::new();
                let mut overruns = 0;
                let mut started = false;
                context_loop(&mut consumer, &never, |m| {
                    match m {
                        Msg::Start => {
                            started = true;
                            for seq in 0..sends {
                                let d = send_from_context(
                                    &graph,
                                    u32::from(me),
                                    &target,
                                    u32::from(1 - me),
                                    Msg::From(me, seq),
                                )
                                .expect("R4.6: nobody closes");
                                overruns += usize::from(d == Delivery::Overrun);
                            }
                        }
                        Msg::From(s, q) => got.push((s, q)),
                    }
                    if started && got.len() == usize::from(expect) {
                        Flow::Stop
                    } else {
                        Flow::Continue
                    }
                });
                (got, overruns)
            }
        };
        let t0 = spawn(context(0, c0, in1.clone(), 2, 1, graph.clone()));
        let t1 = spawn(context(1, c1, in0.clone(), 1, 2, graph.clone()));
        let (got0, over0) = t0.join().unwrap();
        let (got1, over1) = t1.join().unwrap();
        assert_eq!(got0, [(1, 0)], "R5.2: context 0 lost or reordered");
        assert_eq!(got1, [(0, 0), (0, 1)], "R5.2: context 1 lost or reordered");
        let counted = in0.overruns() + in1.overruns();
        assert_eq!(counted, (over0 + over1) as u64, "R9.1: overruns miscounted");
        assert!(
            counted >= 1,
            "R5.2: both full and nobody overran, yet both finished?"
        );
        assert!(
            counted <= 2,
            "R5.2: more overruns than sends that could close a cycle"
        );
        assert_eq!(
            in0.overflow_len() + in1.overflow_len(),
            0,
            "R5.2: overflow not drained"
        );
    }

    /// R5.2, the shortest cycle: a context sends two entries to its own full inbox (capacity 1) while
    /// it processes the entry that fills it, and an external producer sends an entry with
    /// back-pressure at the same time. The self-sends must be taken beyond capacity (exactly two
    /// overruns), the context must finish, and every entry arrives, the self-sends in order, across
    /// the overflow and back to the ring. One external entry, not two: a second one made the model
    /// seven times longer (about ten minutes of the test command) and adds what other models check
    /// (a blocked producer's wake-up: `two_blocked_producers_resume`; a producer's order: `model_fifo`).
    pub fn self_send_into_full_inbox_finishes() {
        let graph = WaitGraph::new(1);
        let (inbox, mut consumer) = Inbox::<Msg>::with_capacity(1);
        prefill(&inbox, Msg::Start);
        let producer = {
            let inbox = inbox.clone();
            spawn(move || {
                send_blocking(&inbox, Sender::External, Msg::From(9, 0)).expect("open");
            })
        };
        let me = inbox.clone();
        let mut got = Vec::new();
        let mut deliveries = Vec::new();
        context_loop(&mut consumer, &never, |m| {
            match m {
                Msg::Start => {
                    for seq in 0..2 {
                        let d = send_from_context(&graph, 0, &me, 0, Msg::From(0, seq))
                            .expect("R4.6: nobody closes");
                        deliveries.push(d);
                    }
                }
                Msg::From(s, q) => got.push((s, q)),
            }
            if got.len() == 3 {
                Flow::Stop
            } else {
                Flow::Continue
            }
        });
        producer.join().unwrap();
        assert_eq!(
            deliveries,
            [Delivery::Overrun, Delivery::Overrun],
            "R5.2: a self-send into a full inbox must be taken beyond capacity"
        );
        assert_eq!(inbox.overruns(), 2, "R9.1: overruns miscounted");
        assert_sender_fifo(&got, 0, &[0, 1], "R5.2");
        assert_sender_fifo(&got, 9, &[0], "R5.2");
        assert_eq!(
            inbox.overflow_len(),
            0,
            "R5.2: the overflow did not shrink back"
        );
        assert!(inbox.is_empty());
    }

    /// R5.2 with R1.3: a sender reserves beyond capacity while the consumer drains its one entry
    /// and goes to sleep. Depending on the interleaving the place is in the ring (the consumer gave
    /// the first one back in time) or in the overflow (an open overflow reservation counts in the
    /// tail word, and its commit pushes the entry before it closes that count): either way the
    /// consumer must neither sleep through the entry nor take it twice.
    pub fn overflow_reservation_wakes_sleeping_consumer() {
        let (inbox, mut consumer) = Inbox::<u8>::with_capacity(1);
        prefill(&inbox, 0);
        let producer = {
            let inbox = inbox.clone();
            spawn(move || {
                let r = inbox.reserve_overrun(Sender::Context).expect("open");
                r.commit(1);
            })
        };
        let got = take(&mut consumer, 2);
        producer.join().unwrap();
        assert_eq!(got, [0, 1], "R5.2: lost or reordered");
        assert!(
            inbox.overruns() <= 1,
            "R9.1: one reservation, one overrun at most"
        );
        assert_eq!(inbox.overflow_len(), 0, "R5.2: the overflow did not drain");
        assert_eq!(consumer.pop(), None, "a phantom entry after the real ones");
        assert!(inbox.is_empty());
    }

    /// R2.2 / R3.2: the context takes `E1`, which routes `R1` and `R2`; `R1` routes `R3`. While it
    /// drains the route stack (in `R1`'s handler, which waits until the entry is accepted), a producer
    /// pushes `E2`. The loop is the one of context.rs: push the entry on the route stack, drain it
    /// completely (mark, dispatch, seal), release the place, only then take the next entry. `E2` must
    /// come after every routed event, and the route stack must be empty whenever an entry is taken.
    pub fn entry_waits_for_route_stack() {
        let (inbox, mut consumer) = Inbox::<&'static str>::with_capacity(2);
        prefill(&inbox, "E1");
        let producer = {
            let inbox = inbox.clone();
            spawn(move || send_blocking(&inbox, Sender::External, "E2").expect("open"))
        };
        let children = |e: &str| -> &'static [&'static str] {
            match e {
                "E1" => &["R1", "R2"],
                "R1" => &["R3"],
                _ => &[],
            }
        };
        let mut routes = RouteStack::with_capacity(4);
        let mut order = Vec::new();
        let shared = inbox.clone();
        context_loop(&mut consumer, &never, |entry| {
            assert!(
                routes.is_empty(),
                "R2.2: inbox entry {entry} taken while routed events were pending"
            );
            routes.push(entry);
            while let Some(routed) = routes.pop() {
                let mark = routes.mark();
                let Routed::Event(e) = routed else {
                    unreachable!("no completed markers here")
                };
                order.push(e);
                if e == "R1" {
                    // Make sure E2 is accepted while the stack still holds R2: E1 (not yet
                    // released) and E2.
                    while shared.len() < 2 {
                        rt::yield_now();
                    }
                }
                for c in children(e) {
                    routes.push(*c);
                }
                routes.seal(mark);
            }
            if order.last() == Some(&"E2") {
                Flow::Stop
            } else {
                Flow::Continue
            }
        });
        producer.join().unwrap();
        assert_eq!(
            order,
            ["E1", "R1", "R3", "R2", "E2"],
            "R3.2: routed events must all run before the next inbox entry"
        );
    }

    /// R8.1: shutdown races a producer. The context loop runs with an exit flag; processing an
    /// external entry it sends a follow-up to itself (a context send, still allowed after external
    /// input closed; the inbox has capacity 1, so it goes beyond capacity). The producer sends two
    /// entries with back-pressure; the shutdown thread closes external input, waits until the inbox
    /// count is zero (nothing accepted is unprocessed), then closes the inbox and tells the context
    /// to exit, as `Correlator::shutdown` does. Every accepted entry and its follow-up is processed;
    /// a refused send got `Refusal::Closed` and is not processed; after shutdown every send is refused.
    pub fn shutdown_races_send() {
        let graph = WaitGraph::new(1);
        let (inbox, mut consumer) = Inbox::<Msg>::with_capacity(1);
        let exit = Arc::new(AtomicBool::new(false));
        let producer = {
            let inbox = inbox.clone();
            spawn(move || {
                let mut accepted = Vec::new();
                for seq in 0..2 {
                    match send_blocking(&inbox, Sender::External, Msg::From(9, seq)) {
                        Ok(()) => accepted.push(seq),
                        Err((refusal, _)) => {
                            assert_eq!(refusal, SendErrorKind::Closed, "R8.2: wrong refusal");
                            // External input stays closed: a later send is refused too.
                            break;
                        }
                    }
                }
                accepted
            })
        };
        let context = {
            let inbox = inbox.clone();
            let exit = exit.clone();
            spawn(move || {
                let mut got = Vec::new();
                let stop = || exit.load(Ordering::Acquire);
                context_loop(&mut consumer, &stop, |m| {
                    if let Msg::From(9, seq) = m {
                        send_from_context(&graph, 0, &inbox, 0, Msg::From(0, seq))
                            .expect("R8.1: a context send refused before the context stopped");
                    }
                    got.push(m);
                    Flow::Continue
                });
                got
            })
        };
        // The shutdown thread (Correlator::shutdown with one context).
        inbox.close_input();
        while !inbox.is_empty() {
            rt::yield_now();
        }
        inbox.close();
        exit.store(true, Ordering::Release);
        context.thread().unpark();
        let got = context.join().unwrap();
        let accepted = producer.join().unwrap();
        let mut expected = Vec::new();
        for &seq in &accepted {
            expected.push(Msg::From(9, seq));
            expected.push(Msg::From(0, seq));
        }
        assert_eq!(
            got, expected,
            "R8.1: an accepted entry was lost or an extra one processed"
        );
        assert_eq!(
            inbox.try_reserve(Sender::Context).map(|_| ()).unwrap_err(),
            Refusal::Closed,
            "R4.6: a stopped context accepted a send"
        );
    }

    /// R2.3 with the look-ahead: the context's cache hints (`Consumer::peek_with`) racing a
    /// producer. Capacity 2 and three entries, so the ring wraps and the producer may wait for
    /// room; the consumer runs the context loop, whose body peeks at the two places behind each
    /// entry it takes. A peek sees only a published entry, the one taken at that position later:
    /// never a place being written (loom checks every access to the slot's cell) nor an entry of
    /// another lap; and peeking loses, duplicates or reorders nothing.
    pub fn look_ahead_sees_what_it_takes() {
        let (inbox, mut consumer) = Inbox::<u8>::with_capacity(2);
        let producer = {
            let inbox = inbox.clone();
            spawn(move || {
                for v in 1..=3 {
                    send_blocking(&inbox, Sender::External, v).expect("open");
                }
            })
        };
        let mut places = consumer.held_places(1);
        let mut body = Peeking {
            places: &mut places,
            taken: Vec::new(),
            peeked: Vec::new(),
        };
        run_loop(&mut consumer, &mut body, &mut ParkAtOnce);
        producer.join().unwrap();
        assert_eq!(body.taken, [1, 2, 3], "R2.3: lost, duplicated or reordered");
        for &(at, v) in &body.peeked {
            assert_eq!(
                body.taken.get(at),
                Some(&v),
                "a peek {at} places on saw {v}; taken: {:?}",
                body.taken
            );
        }
    }

    /// The body of [`look_ahead_sees_what_it_takes`]: takes three entries, peeking behind each.
    struct Peeking<'a> {
        places: &'a mut HeldPlaces<u8>,
        taken: Vec<u8>,
        /// `(position in the order taken, value)` of every peek that saw an entry.
        peeked: Vec<(usize, u8)>,
    }

    impl LoopBody<u8> for Peeking<'_> {
        fn process(&mut self, v: u8) -> Flow {
            self.taken.push(v);
            if self.places.hold_one() {
                self.places.give_back();
            }
            if self.taken.len() == 3 {
                Flow::Stop
            } else {
                Flow::Continue
            }
        }

        fn idle(&mut self) {
            self.places.give_back();
        }

        fn exit(&self) -> bool {
            false
        }

        fn look_ahead(&mut self, consumer: &Consumer<u8>) {
            // The entry just taken is not processed yet: it will be at `taken.len()`.
            for ahead in 0..2 {
                if let Some(v) = consumer.peek_with(ahead, |v| *v) {
                    self.peeked.push((self.taken.len() + 1 + ahead, v));
                }
            }
        }
    }

    /// All-or-nothing send (`InputHandle::try_send`): the producer reserves a place in inbox A (which
    /// may clear the sleeping consumer's flag), finds inbox B full, and cancels A's place; then sends
    /// one real entry to A. A's consumer (the context loop, parking when idle) must never take a
    /// phantom entry and must not hang (the cancelled reservation woke it; the real one may then find
    /// it awake and not wake it).
    pub fn cancel_races_consumer() {
        let (a, mut consumer) = Inbox::<u8>::with_capacity(1);
        let (b, _b_consumer) = Inbox::<u8>::with_capacity(1);
        prefill(&b, 0);
        let producer = {
            let a = a.clone();
            spawn(move || {
                let ra = a.try_reserve(Sender::External).expect("A has room");
                match b.try_reserve(Sender::External) {
                    Ok(_) => unreachable!("B is full"),
                    Err(refusal) => assert_eq!(refusal, Refusal::Full),
                }
                ra.cancel();
                send_blocking(&a, Sender::External, 7).expect("open");
            })
        };
        let mut got = Vec::new();
        context_loop(&mut consumer, &never, |v| {
            got.push(v);
            Flow::Stop
        });
        producer.join().unwrap();
        assert_eq!(got, [7], "a cancelled reservation produced an entry");
        assert!(a.is_empty(), "a cancelled place was not given back");
        assert_eq!(consumer.pop(), None, "a phantom entry after the real one");
    }

    /// R2.3 with a batch that wraps around the ring: capacity 3 (slot indices 0..4), two entries
    /// already taken, so a producer's blocking batch of three takes tickets at the ring's end and
    /// at the start of the next lap, with one reservation if the consumer freed them in time, or
    /// in parts (waiting for room) if not; a second producer sends one entry meanwhile. The
    /// consumer runs the context loop (it may sleep before, between and after). Per-producer FIFO,
    /// no loss, no duplicate, no lost wake-up.
    pub fn batch_wraps_around_ring_fifo() {
        let (inbox, mut consumer) = Inbox::<(u8, u8)>::with_capacity(3);
        prefill(&inbox, (0, 0));
        prefill(&inbox, (0, 1));
        assert_eq!(take(&mut consumer, 2), [(0, 0), (0, 1)]);
        let batch = {
            let inbox = inbox.clone();
            spawn(move || {
                send_batch_blocking(&inbox, Sender::External, vec![(1, 0), (1, 1), (1, 2)])
                    .expect("open inbox");
            })
        };
        let single = {
            let inbox = inbox.clone();
            spawn(move || send_blocking(&inbox, Sender::External, (2, 0)).expect("open inbox"))
        };
        let got = take(&mut consumer, 4);
        batch.join().unwrap();
        single.join().unwrap();
        assert_eq!(
            consumer.pop(),
            None,
            "R2.3: a duplicate after all were taken"
        );
        assert!(inbox.is_empty());
        assert_sender_fifo(&got, 1, &[0, 1, 2], "R2.3");
        assert_sender_fifo(&got, 2, &[0], "R2.3");
    }

    /// R5.1 with an all-or-nothing batch that meets a full inbox: capacity 2, one entry waiting, a
    /// producer needs both places at once. It must not take the one free place; it waits (parked,
    /// holding nothing) for room for two, and the consumer, which frees places in batches of 2
    /// and sleeps when idle, must wake it: both of its entries arrive, in order, after the first.
    pub fn batch_meets_full_inbox_waits_whole() {
        let (inbox, mut consumer) = Inbox::<u8>::with_capacity(2);
        prefill(&inbox, 0);
        let producer = {
            let inbox = inbox.clone();
            spawn(move || {
                send_batch_whole_blocking(&inbox, Sender::External, vec![1, 2])
                    .expect("open inbox");
            })
        };
        let mut places = consumer.held_places(2);
        let got = take_batched(&mut consumer, &mut places, 3);
        producer.join().unwrap();
        assert_eq!(
            got,
            [0, 1, 2],
            "R5.1: the batch was lost, split or reordered"
        );
        assert_eq!(inbox.overruns(), 0, "R5.2: an overrun without a cycle");
        assert!(inbox.is_empty(), "the count did not return to zero");
    }

    /// R8.1 with a batch: a producer's all-or-nothing batch of two races shutdown (close external
    /// input, wait until nothing accepted is left, close, exit), with the consumer running the
    /// context loop. The batch is accepted whole or refused whole with `Closed`; whatever was
    /// accepted is processed, in order, and nothing else.
    pub fn batch_races_close() {
        let (inbox, mut consumer) = Inbox::<u8>::with_capacity(2);
        let exit = Arc::new(AtomicBool::new(false));
        let producer = {
            let inbox = inbox.clone();
            spawn(move || {
                // `InputHandle::try_send_batch_to`: the engine's all-or-nothing batch, no wait.
                let mut batch = vec![1, 2];
                match send_batch_whole(
                    &inbox,
                    Sender::External,
                    &mut batch,
                    |v| v,
                    Wait::Never,
                    Outside,
                ) {
                    Ok(()) => vec![1, 2],
                    Err(kind) => {
                        assert_eq!(kind, SendErrorKind::Closed, "R8.2: wrong refusal");
                        assert_eq!(batch, [1, 2], "R8.1: a refused batch lost events");
                        Vec::new()
                    }
                }
            })
        };
        let context = {
            let exit = exit.clone();
            spawn(move || {
                let mut got = Vec::new();
                let stop = || exit.load(Ordering::Acquire);
                context_loop(&mut consumer, &stop, |v| {
                    got.push(v);
                    Flow::Continue
                });
                got
            })
        };
        inbox.close_input();
        while !inbox.is_empty() {
            rt::yield_now();
        }
        inbox.close();
        exit.store(true, Ordering::Release);
        context.thread().unpark();
        let got = context.join().unwrap();
        let accepted = producer.join().unwrap();
        assert_eq!(
            got, accepted,
            "R8.1: a batch accepted in part, lost, or reordered"
        );
        assert_eq!(
            inbox
                .try_reserve_batch(Sender::Context, 1, 1)
                .map(|_| ())
                .unwrap_err(),
            Refusal::Closed,
            "R4.6: a stopped context accepted a batch"
        );
    }
}

/// A blocking push into an output: the engine's [`push_blocking`] (a push, then on a full `Block`
/// output the engine's own wait for room, `deliver::push_waiting`, which a context's push runs
/// too). Returns whether the value was queued (`false`: the receiver is gone or the output closed).
pub fn output_push<A>(queue: &OutputQueue<A>, value: A) -> bool {
    push_blocking(queue, value) == OutputDelivery::Queued
}

/// A blocking receive: the engine's own `OutputQueue::take_until`, which `OutputReceiver::recv`
/// runs (under loom it parks at once). `None` once the stream ended.
pub fn output_recv<A>(queue: &OutputQueue<A>) -> Option<A> {
    queue.take_until(None).ok()
}

/// An async receive, as `OutputReceiver::recv_async` does (the output's own `poll_take`).
pub async fn output_recv_async<A>(queue: &OutputQueue<A>) -> Option<A> {
    std::future::poll_fn(|cx| queue.poll_take(cx.waker())).await
}

/// The scenarios of the output queue's protocols (SPEC R4.3, R8.1): the receiver's sleep and
/// wake-up, `Block` producers waiting for room, and the ends (receiver dropped, shutdown).
///
/// The ring (crossbeam-queue's `ArrayQueue`) is not written against the `sync` shim: loom runs
/// each of its operations as one step, which models it as the linearizable queue with `SeqCst`
/// head and tail updates that it is. The flags and waiter lists around it are the shim's.
pub mod output_scenarios {
    use super::*;
    use rt::{spawn, Arc, AtomicBool, Ordering};

    fn queue(capacity: usize) -> Arc<OutputQueue<u8>> {
        Arc::new(OutputQueue::new(OutputOptions::bounded(capacity)))
    }

    /// R4.3: a producer pushes two events while the receiver takes them, sleeping whenever it
    /// finds nothing: a lost wake-up leaves it parked forever (a loom deadlock, a hang on real
    /// threads). Capacity 1: the producer waits for room too, so both directions are in play.
    pub fn receiver_sleeps_producer_waits_for_room() {
        let q = queue(1);
        let producer = {
            let q = q.clone();
            spawn(move || {
                assert!(output_push(&q, 1));
                assert!(output_push(&q, 2));
            })
        };
        let got = [output_recv(&q), output_recv(&q)];
        producer.join().unwrap();
        assert_eq!(got, [Some(1), Some(2)], "R4.3: lost or reordered");
        assert!(q.take().is_none(), "R4.3: a duplicate");
    }

    /// An async push into a `Block` output, as the `async` feature's channel send drives it
    /// (`send_future`): push; on `Full`, register the task's waker with `poll_room` and return
    /// `Pending`, or push again at once if the re-check found room. `false`: the output went away.
    struct OutputPushAsync<'a> {
        q: &'a OutputQueue<u8>,
        value: Option<u8>,
        /// Set when a push met the full ring (before the task registers).
        full_seen: &'a AtomicBool,
    }

    impl std::future::Future for OutputPushAsync<'_> {
        type Output = bool;
        fn poll(
            mut self: std::pin::Pin<&mut Self>,
            cx: &mut std::task::Context<'_>,
        ) -> std::task::Poll<bool> {
            loop {
                let v = self.value.take().expect("polled after it completed");
                match self.q.push(v) {
                    Pushed::Queued => return std::task::Poll::Ready(true),
                    Pushed::Full(v) => {
                        self.full_seen.store(true, Ordering::Release);
                        self.value = Some(v);
                        if self.q.poll_room(cx.waker()).is_pending() {
                            return std::task::Poll::Pending;
                        }
                    }
                    _ => return std::task::Poll::Ready(false),
                }
            }
        }
    }

    /// R4.3: an async producer meets a full `Block` output (capacity 1, its one place taken) and
    /// registers its waker while the receiver takes, sleeping whenever it finds nothing: the take
    /// races the registration in every order, and must wake the task, which is polled again only
    /// after a wake-up (as an executor does): a lost one leaves the producer parked forever (a
    /// loom deadlock). Where the take checked for waiters before the task announced itself, only
    /// the task's re-check after announcing finds the room. Its event arrives after the first.
    ///
    /// The receiver starts once the producer met the full ring: the ring is crossbeam's
    /// `ArrayQueue`, whose atomics loom does not see, so loom would not order the push before the
    /// take by itself.
    pub fn async_producer_is_woken() {
        let q = queue(1);
        assert!(matches!(q.push(1), Pushed::Queued));
        let full_seen = Arc::new(AtomicBool::new(false));
        let producer = {
            let q = q.clone();
            let full_seen = full_seen.clone();
            spawn(move || {
                let (count, waker) = CountingWaker::for_current();
                let mut push = OutputPushAsync {
                    q: &q,
                    value: Some(2),
                    full_seen: &full_seen,
                };
                assert!(
                    poll_until_ready(&mut push, &count, &waker),
                    "R4.3: the output refused an open producer"
                );
            })
        };
        while !full_seen.load(Ordering::Acquire) {
            rt::yield_now();
        }
        let got = [output_recv(&q), output_recv(&q)];
        producer.join().unwrap();
        assert_eq!(got, [Some(1), Some(2)], "R4.3: lost or reordered");
        assert!(q.take().is_none(), "R4.3: a duplicate");
    }

    /// R4.3: the same with an async receiver: the waker registered by `poll_take` is woken.
    pub fn async_receiver_is_woken() {
        let q = queue(1);
        let producer = {
            let q = q.clone();
            spawn(move || {
                assert!(output_push(&q, 1));
                assert!(output_push(&q, 2));
            })
        };
        let got = block_on(async { [output_recv_async(&q).await, output_recv_async(&q).await] });
        producer.join().unwrap();
        assert_eq!(got, [Some(1), Some(2)], "R4.3: lost or reordered");
    }

    /// R8.1: a receiver asleep on an empty output ends when shutdown closes it, after taking what
    /// was pushed before the close.
    pub fn close_ends_a_sleeping_receiver() {
        let q = queue(2);
        let closer = {
            let q = q.clone();
            spawn(move || {
                assert!(output_push(&q, 7));
                q.close();
            })
        };
        let got = [output_recv(&q), output_recv(&q)];
        closer.join().unwrap();
        assert_eq!(
            got,
            [Some(7), None],
            "R8.1: the stream must end after what was queued"
        );
    }

    /// R8.1: a producer waiting for room in a full `Block` output is released when the receiver
    /// is dropped (its event is discarded), or when shutdown begins (its event is taken beyond
    /// the bound and received after what was queued).
    pub fn waiting_producer_is_released(drain: bool) {
        let q = queue(1);
        assert!(output_push(&q, 0));
        let producer = {
            let q = q.clone();
            spawn(move || output_push(&q, 1))
        };
        if drain {
            q.drain();
        } else {
            q.disconnect();
        }
        let queued = producer.join().unwrap();
        assert_eq!(
            queued, drain,
            "R8.1: dropped receiver discards, drain takes"
        );
        if drain {
            q.close();
            let got = [output_recv(&q), output_recv(&q), output_recv(&q)];
            assert_eq!(
                got,
                [Some(0), Some(1), None],
                "R8.1: nothing accepted is lost"
            );
        }
    }
}

/// Scenarios of async senders in the inbox's room-waiter protocol (SPEC R5.1, R8.1).
pub mod async_scenarios {
    use super::*;
    use rt::{spawn, Arc, AtomicBool, Ordering};
    use std::future::Future;
    use std::task::Context;

    /// R5.1: an async sender meets a full inbox (capacity 1, its one place held by the consumer
    /// until the sender's first poll returned `Pending`), its waker is registered; the consumer
    /// frees the place, wakes the task, and the event arrives after the first. A lost wake-up
    /// leaves the sender parked forever (a loom deadlock). Afterwards the waiter list is empty.
    pub fn async_sender_is_woken() {
        let (inbox, mut consumer) = Inbox::<u8>::with_capacity(1);
        prefill(&inbox, 0);
        let pending = Arc::new(AtomicBool::new(false));
        let producer = {
            let inbox = inbox.clone();
            let pending = pending.clone();
            spawn(move || {
                let (count, waker) = CountingWaker::for_current();
                let mut send = SendAsync::new(&inbox, 1);
                let first = std::pin::Pin::new(&mut send).poll(&mut Context::from_waker(&waker));
                assert!(
                    first.is_pending(),
                    "R5.1: a full inbox accepted beyond capacity"
                );
                pending.store(true, Ordering::Release);
                // As an executor: no poll before the wake-up (a lost one parks this forever).
                while count.wakes() == 0 {
                    rt::park();
                }
                poll_until_ready(&mut send, &count, &waker).expect("open inbox");
                drop(send);
                assert!(count.wakes() >= 1, "R5.1: the task was never woken");
                assert_eq!(
                    inbox.room_waiters(),
                    0,
                    "R5.1: the task's entry stayed listed"
                );
            })
        };
        let mut got = Vec::new();
        context_loop(&mut consumer, &never, |v| {
            while v == 0 && !pending.load(Ordering::Acquire) {
                rt::yield_now();
            }
            got.push(v);
            if got.len() == 2 {
                Flow::Stop
            } else {
                Flow::Continue
            }
        });
        producer.join().unwrap();
        assert_eq!(
            got,
            [0, 1],
            "R5.1: the async sender's entry was lost or reordered"
        );
        assert_eq!(inbox.overruns(), 0, "R5.2: an overrun without a cycle");
    }

    /// R5.1: the same without the gate: the consumer frees the place while the sender tries,
    /// registers and re-checks, in every order. Where the consumer freed the place after the
    /// sender's refused reservation but before its announcement (so the consumer saw no waiter),
    /// only the re-check after announcing finds the room: without it the task would never be
    /// woken (a loom deadlock).
    pub fn async_send_races_free() {
        let (inbox, mut consumer) = Inbox::<u8>::with_capacity(1);
        prefill(&inbox, 0);
        let producer = {
            let inbox = inbox.clone();
            spawn(move || {
                let (count, waker) = CountingWaker::for_current();
                let mut send = SendAsync::new(&inbox, 1);
                poll_until_ready(&mut send, &count, &waker).expect("open inbox");
            })
        };
        let got = take(&mut consumer, 2);
        producer.join().unwrap();
        assert_eq!(
            got,
            [0, 1],
            "R5.1: the async sender's entry was lost or reordered"
        );
    }

    /// R5.1 (cancellation): an async sender registered on a full inbox is dropped while the
    /// consumer frees the place. Nothing hangs, the cancelled event never arrives, nothing is
    /// duplicated, the waiter list is empty after the drop, and the cancelled send held no place:
    /// the next send from the same thread gets in.
    pub fn cancelled_async_send_leaves_nothing() {
        let (inbox, mut consumer) = Inbox::<u8>::with_capacity(1);
        prefill(&inbox, 0);
        let pending = Arc::new(AtomicBool::new(false));
        let producer = {
            let inbox = inbox.clone();
            let pending = pending.clone();
            spawn(move || {
                let (_count, waker) = CountingWaker::for_current();
                let mut send = SendAsync::new(&inbox, 1);
                let first = std::pin::Pin::new(&mut send).poll(&mut Context::from_waker(&waker));
                assert!(
                    first.is_pending(),
                    "R5.1: a full inbox accepted beyond capacity"
                );
                pending.store(true, Ordering::Release);
                // Cancelled while the consumer may be freeing the place and waking the list.
                drop(send);
                assert_eq!(
                    inbox.room_waiters(),
                    0,
                    "a cancelled send left its entry in the waiter list"
                );
                send_blocking(&inbox, Sender::External, 2).expect("open inbox");
            })
        };
        let mut got = Vec::new();
        context_loop(&mut consumer, &never, |v| {
            while v == 0 && !pending.load(Ordering::Acquire) {
                rt::yield_now();
            }
            got.push(v);
            if got.len() == 2 {
                Flow::Stop
            } else {
                Flow::Continue
            }
        });
        producer.join().unwrap();
        assert_eq!(
            got,
            [0, 2],
            "R5.1: a cancelled send arrived, or the next one was lost or duplicated"
        );
    }

    /// R8.1: external input closes while an async sender waits on a full inbox (nobody frees):
    /// the task is woken and its send ends with `Closed`, the event coming back; the waiter list
    /// is empty afterwards. A lost wake-up leaves the sender parked forever.
    pub fn close_ends_a_waiting_async_send() {
        let (inbox, _consumer) = Inbox::<u8>::with_capacity(1);
        prefill(&inbox, 0);
        let producer = {
            let inbox = inbox.clone();
            spawn(move || {
                let (count, waker) = CountingWaker::for_current();
                let mut send = SendAsync::new(&inbox, 1);
                let r = poll_until_ready(&mut send, &count, &waker);
                drop(send);
                assert!(
                    matches!(r, Err((Refusal::Closed, 1))),
                    "R8.1: a send after close_input was not refused with its event: {r:?}"
                );
                assert_eq!(inbox.room_waiters(), 0, "the ended send stayed listed");
                count.wakes()
            })
        };
        inbox.close_input();
        let _wakes = producer.join().unwrap();
        assert_eq!(inbox.len(), 1, "R8.1: the refused event took a place");
    }
}
