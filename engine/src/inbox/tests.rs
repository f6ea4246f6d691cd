//! Unit tests of the inbox (also run under miri by `scripts/miri.sh`, with fewer iterations).

use std::task::Poll;
use std::time::Instant;

use super::slot::{self, Slot};
use super::*;
use crate::sync;

// R2.3: one sender's entries come out in the order they went in.
#[test]
fn r2_3_single_sender_fifo() {
    let (inbox, mut consumer) = Inbox::with_capacity(4);
    for round in 0..10 {
        for i in 0..4 {
            let r = inbox.try_reserve(Sender::External).expect("room");
            r.commit(round * 4 + i);
        }
        assert_eq!(
            inbox.try_reserve(Sender::External).unwrap_err(),
            Refusal::Full
        );
        for i in 0..4 {
            assert_eq!(consumer.pop(), Some(round * 4 + i));
            consumer.release_taken();
        }
        assert_eq!(consumer.pop(), None);
    }
}

// R5.1 with batched releases: held places still count (a sender finds the inbox full) until the
// batch is given back, all at once; a batch reports full at its size and an empty one frees nothing.
#[test]
fn r5_1_held_places_count_until_given_back() {
    let (inbox, mut consumer) = Inbox::with_capacity(4);
    let mut places = consumer.held_places(3);
    for i in 0..4 {
        let r = inbox.try_reserve(Sender::External).expect("room");
        r.commit(i);
    }
    assert!(!places.give_back(), "nothing held yet");
    for i in 0..3 {
        assert_eq!(consumer.pop(), Some(i));
        assert_eq!(
            places.hold_one(),
            i == 2,
            "the batch is full at its third place"
        );
    }
    assert_eq!(places.held(), 3);
    assert_eq!(inbox.len(), 4, "held places still count");
    assert_eq!(
        inbox.try_reserve(Sender::External).unwrap_err(),
        Refusal::Full
    );
    assert!(places.give_back());
    assert_eq!(places.held(), 0);
    assert_eq!(inbox.len(), 1, "the three places were freed at once");
    let r = inbox
        .try_reserve(Sender::External)
        .expect("room after the batch");
    r.commit(4);
    assert_eq!(consumer.pop(), Some(3));
    assert_eq!(consumer.pop(), Some(4));
}

/// Iterations of the threaded tests: small under miri, which interprets every instruction.
const ROUNDS: usize = if cfg!(miri) { 40 } else { 20_000 };

/// Reserves a place for `sender`, retrying (with a yield) while the inbox is full.
fn reserve_spinning<T>(inbox: &Inbox<T>) -> Reservation<'_, T> {
    loop {
        match inbox.try_reserve(Sender::External) {
            Ok(r) => return r,
            Err(Refusal::Full) => std::thread::yield_now(),
            Err(Refusal::Closed) => panic!("nobody closes this inbox"),
        }
    }
}

// R2.3: two producer threads and the consumer, capacity 2 (the ring wraps on every other entry):
// each producer's entries arrive in its order, none lost, none duplicated.
#[test]
fn r2_3_two_producer_threads_fifo() {
    let (inbox, mut consumer) = Inbox::<(u8, usize)>::with_capacity(2);
    let producers: Vec<_> = (0..2u8)
        .map(|p| {
            let inbox = inbox.clone();
            std::thread::spawn(move || {
                for seq in 0..ROUNDS {
                    let r = reserve_spinning(&inbox);
                    r.commit((p, seq));
                }
            })
        })
        .collect();
    let mut next = [0usize; 2];
    let mut taken = 0;
    while taken < 2 * ROUNDS {
        match consumer.pop() {
            Some((p, seq)) => {
                assert_eq!(seq, next[p as usize], "producer {p}: lost or reordered");
                next[p as usize] += 1;
                taken += 1;
                consumer.release_taken();
            }
            None => std::thread::yield_now(),
        }
    }
    for p in producers {
        p.join().unwrap();
    }
    assert_eq!(consumer.pop(), None, "a duplicate after all were taken");
    assert!(inbox.is_empty());
}

// R5.2: entries taken beyond capacity go to the overflow; a later ordinary commit follows them there,
// so one sender's order holds across the ring, the overflow and back; the overflow shrinks back.
#[test]
fn r5_2_overrun_keeps_order_and_shrinks_back() {
    let (inbox, mut consumer) = Inbox::with_capacity(2);
    for v in 0..2 {
        let r = inbox.try_reserve(Sender::Context).expect("room");
        r.commit(v);
    }
    assert_eq!(
        inbox.try_reserve(Sender::Context).unwrap_err(),
        Refusal::Full
    );
    for v in 2..4 {
        let r = inbox.reserve_overrun(Sender::Context).expect("open");
        r.commit(v);
    }
    assert_eq!(inbox.overruns(), 2);
    assert_eq!(inbox.overflow_len(), 2);
    assert_eq!(inbox.len(), 4);
    // The ring is taken first, then the overflow; overflow entries hold places like any other.
    for want in 0..3 {
        assert_eq!(consumer.pop(), Some(want));
        consumer.release_taken();
    }
    // One place free while entry 3 still waits in the overflow: an ordinary commit must queue
    // behind it there, not overtake it through the ring.
    let r = inbox.try_reserve(Sender::Context).expect("room again");
    r.commit(4);
    assert_eq!(inbox.overflow_len(), 2);
    for want in 3..5 {
        assert_eq!(consumer.pop(), Some(want));
        consumer.release_taken();
    }
    assert_eq!(consumer.pop(), None);
    assert_eq!(inbox.overflow_len(), 0, "the overflow shrinks back");
    // Back on the ring.
    let r = inbox.try_reserve(Sender::Context).expect("room");
    r.commit(5);
    assert_eq!(inbox.overflow_len(), 0);
    assert_eq!(consumer.pop(), Some(5));
    consumer.release_taken();
    assert!(inbox.is_empty());
}

/// A value that counts its drops.
struct Counted(std::sync::Arc<std::sync::atomic::AtomicUsize>);

impl Drop for Counted {
    fn drop(&mut self) {
        self.0.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }
}

// Entries never taken are dropped exactly once with the inbox, in the ring and in the overflow;
// taken ones are dropped by whoever took them (miri checks for leaks and double drops).
#[test]
fn entries_left_behind_are_dropped_once() {
    let drops = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let (inbox, mut consumer) = Inbox::with_capacity(4);
    for _ in 0..3 {
        let r = inbox.try_reserve(Sender::External).expect("room");
        r.commit(Counted(drops.clone()));
    }
    let r = inbox.try_reserve(Sender::External).expect("room");
    r.cancel();
    drop(consumer.pop().expect("an entry"));
    consumer.release_taken();
    let r = inbox.try_reserve(Sender::Context).expect("room");
    r.commit(Counted(drops.clone()));
    for _ in 0..3 {
        let r = inbox.reserve_overrun(Sender::Context).expect("open");
        r.commit(Counted(drops.clone()));
    }
    assert_eq!(drops.load(std::sync::atomic::Ordering::Relaxed), 1);
    drop(consumer);
    drop(inbox);
    assert_eq!(drops.load(std::sync::atomic::Ordering::Relaxed), 7);
}

// R1.3: the consumer announces sleep and parks while a producer thread pushes one entry at a time;
// every entry wakes it (a lost wake-up hangs this test).
#[test]
fn r1_3_parked_consumer_is_woken_for_every_entry() {
    let rounds = if cfg!(miri) { 10 } else { 2_000 };
    let (inbox, mut consumer) = Inbox::<usize>::with_capacity(1);
    let producer = {
        let inbox = inbox.clone();
        std::thread::spawn(move || {
            for v in 0..rounds {
                let r = reserve_spinning(&inbox);
                r.commit(v);
            }
        })
    };
    for want in 0..rounds {
        let got = loop {
            if let Some(v) = consumer.pop() {
                break v;
            }
            if !inbox.is_empty() {
                std::thread::yield_now();
                continue;
            }
            if consumer.try_sleep() {
                consumer.park(|| false);
            }
        };
        assert_eq!(got, want);
        consumer.release_taken();
    }
    producer.join().unwrap();
    assert!(inbox.is_empty());
}

// R5.1: the capacity is exact whatever its size (tickets are lap-encoded, the ring holds exactly
// `capacity` slots), on the first lap and on every later one: `capacity` entries fit, one more is
// refused, and giving one place back lets exactly one more in.
#[test]
fn r5_1_capacity_is_exact_on_every_lap() {
    for capacity in [1, 2, 3, 5, 7, 8] {
        let (inbox, mut consumer) = Inbox::with_capacity(capacity);
        let mut next_in = 0;
        let mut next_out = 0;
        for _lap in 0..5 {
            while inbox.len() < capacity {
                let r = inbox
                    .try_reserve(Sender::External)
                    .expect("room below capacity");
                r.commit(next_in);
                next_in += 1;
            }
            assert_eq!(
                inbox.try_reserve(Sender::External).unwrap_err(),
                Refusal::Full,
                "capacity {capacity}: one more than the capacity was accepted"
            );
            assert_eq!(consumer.pop(), Some(next_out));
            next_out += 1;
            assert_eq!(
                inbox.try_reserve(Sender::External).unwrap_err(),
                Refusal::Full,
                "capacity {capacity}: a taken entry's place came back before it was given back"
            );
            assert!(consumer.release_taken());
            let r = inbox
                .try_reserve(Sender::External)
                .expect("the place given back");
            r.commit(next_in);
            next_in += 1;
            while let Some(v) = consumer.pop() {
                assert_eq!(v, next_out, "capacity {capacity}: order");
                next_out += 1;
                consumer.release_taken();
            }
        }
        assert!(inbox.is_empty());
    }
}

// R8.1 (the shutdown scan needs a zero count): a cancelled reservation that the consumer steps over
// with nothing else held gives its place back at once, since no later give-back would.
#[test]
fn r8_1_a_cancelled_place_alone_is_given_back() {
    let (inbox, mut consumer) = Inbox::<u8>::with_capacity(2);
    let r = inbox.try_reserve(Sender::External).expect("room");
    assert_eq!(inbox.len(), 1, "a reservation counts");
    r.cancel();
    assert_eq!(consumer.pop(), None);
    assert!(inbox.is_empty(), "the cancelled place was not given back");
    // And the ring goes on from there.
    for v in 0..4 {
        let r = inbox.try_reserve(Sender::External).expect("room");
        r.commit(v);
        assert_eq!(consumer.pop(), Some(v));
        consumer.release_taken();
    }
    assert!(inbox.is_empty());
}

// R2.3: a cancelled reservation between two committed entries is stepped over, the entries come
// out in ticket order, and its place goes back with theirs.
#[test]
fn r2_3_a_cancelled_reservation_is_stepped_over() {
    let (inbox, mut consumer) = Inbox::with_capacity(8);
    let r1 = inbox.try_reserve(Sender::External).expect("room");
    let r2 = inbox.try_reserve(Sender::External).expect("room");
    let r3 = inbox.try_reserve(Sender::External).expect("room");
    r1.commit(1);
    r3.commit(3);
    // Ticket 2 is reserved and not committed: the consumer must not pass it.
    assert_eq!(consumer.pop(), Some(1));
    assert_eq!(consumer.pop(), None, "an entry overtook a reserved ticket");
    r2.cancel();
    assert_eq!(consumer.pop(), Some(3));
    assert_eq!(consumer.pop(), None);
    assert_eq!(
        inbox.len(),
        3,
        "taken entries hold their places until given back"
    );
    assert!(consumer.release_taken());
    assert!(inbox.is_empty());
}

// R9.1 (the status's inbox length) and R8.1 (shutdown reads it as "nothing accepted is left"): an
// entry counts from its reservation until its place is given back, wherever it is on the way —
// reserved in the ring, an open overflow reservation, waiting in the overflow, taken from either
// and held.
#[test]
fn r9_1_len_counts_an_entry_from_reservation_to_give_back() {
    let (inbox, mut consumer) = Inbox::with_capacity(1);
    let ring = inbox.try_reserve(Sender::Context).expect("room");
    assert_eq!(inbox.len(), 1, "a reserved ring place");
    let pending = inbox.reserve_overrun(Sender::Context).expect("open");
    assert_eq!(inbox.len(), 2, "an open overflow reservation");
    ring.commit(0);
    pending.commit(1);
    assert_eq!(inbox.len(), 2, "one in the ring, one in the overflow");
    assert_eq!(consumer.pop(), Some(0));
    assert_eq!(
        inbox.len(),
        2,
        "a taken ring entry is held until given back"
    );
    assert!(consumer.release_taken());
    assert_eq!(inbox.len(), 1, "the overflow entry waits");
    assert_eq!(consumer.pop(), Some(1));
    assert_eq!(
        inbox.len(),
        1,
        "a taken overflow entry is held until given back"
    );
    assert!(consumer.release_taken());
    assert!(inbox.is_empty());
}

// R2.3, R5.1: a reservation dropped without a commit (a sender that panicked or returned early
// between reserve and commit) cancels its place: the consumer steps over it instead of waiting
// for it forever, and its room comes back.
#[test]
fn r2_3_a_dropped_reservation_cancels_its_place() {
    let (inbox, mut consumer) = Inbox::with_capacity(2);
    let r1 = inbox.try_reserve(Sender::External).expect("room");
    let r2 = inbox.try_reserve(Sender::External).expect("room");
    drop(r1);
    r2.commit(2);
    assert_eq!(consumer.pop(), Some(2), "the consumer waits for a dropped reservation");
    consumer.release_taken();
    assert_eq!(inbox.len(), 0, "a dropped reservation kept its place");
}

// R2.2, R5.1: a detached reservation (an all-or-nothing channel send's, `deliver/fanout.rs`) that is
// resumed gives its place back as any reservation does; one dropped without being resumed would
// hold its place for good (the consumer waits for it) and is reported by a debug assertion.
#[test]
fn r5_1_a_resumed_detached_reservation_commits_or_cancels() {
    let (inbox, mut consumer) = Inbox::with_capacity(2);
    let a = inbox.try_reserve(Sender::External).expect("room").detach();
    let b = inbox.try_reserve(Sender::External).expect("room").detach();
    // SAFETY: both were detached from reservations of `inbox`.
    unsafe { inbox.resume(a) }.cancel();
    // SAFETY: as above.
    unsafe { inbox.resume(b) }.commit(7);
    assert_eq!(consumer.pop(), Some(7));
    consumer.release_taken();
    assert_eq!(inbox.len(), 0);
}

#[cfg(debug_assertions)]
#[test]
#[should_panic(expected = "dropped without being resumed")]
fn r5_1_a_detached_reservation_dropped_unresumed_is_reported() {
    let (inbox, _consumer) = Inbox::<u32>::with_capacity(2);
    let detached = inbox.try_reserve(Sender::External).expect("room").detach();
    drop(detached);
}

/// Compiles only while `T` is not `Send`: with `T: Send` both impls apply and the call is
/// ambiguous (the `static_assertions` crate's `assert_not_impl_any` trick).
trait NotSend<A> {
    fn check() {}
}
impl<T: ?Sized> NotSend<()> for T {}
struct IsSend;
impl<T: ?Sized + Send> NotSend<IsSend> for T {}

/// Compiles only while `T` is not `Sync` (as [`NotSend`]).
trait NotSync<A> {
    fn check() {}
}
impl<T: ?Sized> NotSync<()> for T {}
struct IsSync;
impl<T: ?Sized + Sync> NotSync<IsSync> for T {}

// R5.1: the places a consumer holds for processed entries are consumer-only: they can be
// neither sent to nor shared with another thread (checked when this compiles), and the consumer
// itself is not `Sync`.
#[test]
fn r5_1_consumer_only_types_stay_on_the_consumer_thread() {
    <HeldPlaces<u32> as NotSend<_>>::check();
    <HeldPlaces<u32> as NotSync<_>>::check();
    <Consumer<u32> as NotSync<_>>::check();
}

/// Takes every ready entry, releasing each place at once.
fn drain<T>(consumer: &mut Consumer<T>) -> Vec<T> {
    let mut got = Vec::new();
    while let Some(v) = consumer.pop() {
        got.push(v);
        consumer.release_taken();
    }
    got
}

/// Reserves `min..=max` places for a batch and fills them from `values` (as many as it got);
/// returns how many it sent.
fn send_batch(
    inbox: &Inbox<usize>,
    min: usize,
    values: &mut Vec<usize>,
) -> Result<usize, Refusal> {
    let mut places = inbox.try_reserve_batch(Sender::External, min, values.len())?;
    let n = places.len();
    for v in values.drain(..n) {
        places.push(v);
    }
    Ok(n)
}

// R2.3 and R5.1: a batch takes consecutive tickets with one reservation, wrapping around the ring
// (capacity 5 in 8 slot indices: every lap ends at a different place), and comes out in order;
// it never takes more places than are free, and a batch that needs more than are free is refused
// whole.
#[test]
fn r2_3_batch_wraps_around_the_ring_in_order() {
    let (inbox, mut consumer) = Inbox::with_capacity(5);
    let mut next = 0;
    let mut expected = 0;
    for round in 0..if cfg!(miri) { 6 } else { 50 } {
        // A lead-in of single sends moves where the batch starts on the ring.
        for _ in 0..round % 3 {
            inbox
                .try_reserve(Sender::External)
                .expect("room")
                .commit(next);
            next += 1;
        }
        let free = 5 - round % 3;
        // All-or-nothing: one more than is free is refused, and nothing is taken.
        let mut too_many: Vec<usize> = (next..next + free + 1).collect();
        assert_eq!(send_batch(&inbox, free + 1, &mut too_many), Err(Refusal::Full));
        assert_eq!(too_many.len(), free + 1, "a refused batch keeps its events");
        assert_eq!(inbox.len(), round % 3, "a refused batch holds no place");
        // Up to what is free: exactly the free places are taken, the rest stay.
        let mut values: Vec<usize> = (next..next + free + 2).collect();
        assert_eq!(send_batch(&inbox, 1, &mut values), Ok(free));
        assert_eq!(values.len(), 2);
        next += free;
        assert_eq!(inbox.len(), 5);
        assert_eq!(
            inbox.try_reserve_batch(Sender::External, 1, 1).unwrap_err(),
            Refusal::Full,
            "R5.1: no place beyond capacity"
        );
        let got = drain(&mut consumer);
        assert_eq!(got, (expected..next).collect::<Vec<_>>(), "R2.3: batch order");
        expected = next;
        assert!(inbox.is_empty());
    }
}

// R5.1: a batch above the capacity can never fit at once and is refused as full (the engine turns
// that into `BatchTooLarge`); a closed inbox refuses a batch as it refuses one entry.
#[test]
fn r5_1_batch_above_capacity_and_closed_are_refused() {
    let (inbox, mut consumer) = Inbox::<usize>::with_capacity(4);
    assert_eq!(
        inbox.try_reserve_batch(Sender::External, 5, 5).unwrap_err(),
        Refusal::Full
    );
    let places = inbox
        .try_reserve_batch(Sender::External, 1, 100)
        .expect("room");
    assert_eq!(places.len(), 4, "clamped to the capacity");
    drop(places);
    assert!(drain(&mut consumer).is_empty());
    inbox.close_input();
    assert_eq!(
        inbox.try_reserve_batch(Sender::External, 1, 1).unwrap_err(),
        Refusal::Closed,
        "R8.1: external input closed"
    );
    let places = inbox
        .try_reserve_batch(Sender::Context, 1, 1)
        .expect("R8.1: contexts may still send");
    drop(places);
    inbox.close();
    assert_eq!(
        inbox.try_reserve_batch(Sender::Context, 1, 1).unwrap_err(),
        Refusal::Closed
    );
}

// R2.3: places of a batch left unfilled are cancelled (tombstones the consumer steps over, their
// places given back), also across the end of the ring.
#[test]
fn r2_3_unfilled_batch_places_are_stepped_over() {
    let (inbox, mut consumer) = Inbox::with_capacity(4);
    inbox.try_reserve(Sender::External).expect("room").commit(0);
    inbox.try_reserve(Sender::External).expect("room").commit(1);
    assert_eq!(drain(&mut consumer), [0, 1]);
    let mut places = inbox
        .try_reserve_batch(Sender::External, 4, 4)
        .expect("room for 4 from slot 2 on, wrapping");
    places.push(2);
    drop(places);
    assert_eq!(inbox.len(), 4, "cancelled places count until stepped over");
    assert_eq!(
        inbox.try_reserve(Sender::External).unwrap_err(),
        Refusal::Full
    );
    assert_eq!(drain(&mut consumer), [2]);
    assert!(inbox.is_empty(), "cancelled places were given back");
    let mut values = vec![3, 4, 5, 6];
    assert_eq!(send_batch(&inbox, 4, &mut values), Ok(4));
    assert_eq!(drain(&mut consumer), [3, 4, 5, 6]);
}

// R5.2: while the overflow holds entries, a batch queues behind them in the overflow (not in the
// free ring places, which would overtake them), counted against the capacity; its order holds.
#[test]
fn r5_2_batch_queues_behind_the_overflow() {
    let (inbox, mut consumer) = Inbox::with_capacity(3);
    for v in 0..3 {
        inbox.try_reserve(Sender::Context).expect("room").commit(v);
    }
    inbox.reserve_overrun(Sender::Context).expect("open").commit(3);
    assert_eq!(inbox.overflow_len(), 1);
    for want in 0..3 {
        assert_eq!(consumer.pop(), Some(want));
        consumer.release_taken();
    }
    // Three ring places are free, but the overflow holds 3: room for 2 (capacity 3, 1 accepted).
    let mut values = vec![4, 5, 6];
    assert_eq!(send_batch(&inbox, 3, &mut values), Err(Refusal::Full));
    assert_eq!(send_batch(&inbox, 1, &mut values), Ok(2));
    assert_eq!(inbox.overflow_len(), 3, "the batch went behind entry 3");
    assert_eq!(inbox.len(), 3);
    assert_eq!(drain(&mut consumer), [3, 4, 5]);
    assert_eq!(inbox.overflow_len(), 0);
    assert_eq!(send_batch(&inbox, 1, &mut values), Ok(1));
    assert_eq!(drain(&mut consumer), [6], "back on the ring");
    assert!(inbox.is_empty());
}

// Entries of a batch never taken are dropped once with the inbox; an unfilled place drops nothing.
#[test]
fn batch_entries_left_behind_are_dropped_once() {
    let drops = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let (inbox, mut consumer) = Inbox::with_capacity(4);
    let mut places = inbox
        .try_reserve_batch(Sender::External, 3, 3)
        .expect("room");
    places.push(Counted(drops.clone()));
    places.push(Counted(drops.clone()));
    drop(places);
    drop(consumer.pop().expect("an entry"));
    consumer.release_taken();
    assert_eq!(drops.load(std::sync::atomic::Ordering::Relaxed), 1);
    drop(consumer);
    drop(inbox);
    assert_eq!(drops.load(std::sync::atomic::Ordering::Relaxed), 2);
}

// R2.3 with threads: two producers send batches of 1..=3 (all-or-nothing, retrying while full)
// into an inbox of capacity 4 while the consumer takes; per-producer order, no loss, no duplicate.
#[test]
fn r2_3_two_batch_producer_threads_fifo() {
    let rounds = if cfg!(miri) { 20 } else { 5_000 };
    let (inbox, mut consumer) = Inbox::<(u8, usize)>::with_capacity(4);
    let producers: Vec<_> = (0..2u8)
        .map(|p| {
            let inbox = inbox.clone();
            std::thread::spawn(move || {
                let mut seq = 0;
                for round in 0..rounds {
                    let k = 1 + (round + p as usize) % 3;
                    let mut places = loop {
                        match inbox.try_reserve_batch(Sender::External, k, k) {
                            Ok(places) => break places,
                            Err(Refusal::Full) => std::thread::yield_now(),
                            Err(Refusal::Closed) => panic!("nobody closes this inbox"),
                        }
                    };
                    for _ in 0..k {
                        places.push((p, seq));
                        seq += 1;
                    }
                }
                seq
            })
        })
        .collect();
    let mut next = [0usize; 2];
    let total: usize = (0..2)
        .map(|p| (0..rounds).map(|r| 1 + (r + p) % 3).sum::<usize>())
        .sum();
    let mut taken = 0;
    while taken < total {
        match consumer.pop() {
            Some((p, seq)) => {
                assert_eq!(seq, next[p as usize], "producer {p}: lost or reordered");
                next[p as usize] += 1;
                taken += 1;
                consumer.release_taken();
            }
            None => std::thread::yield_now(),
        }
    }
    for (p, t) in producers.into_iter().enumerate() {
        assert_eq!(t.join().unwrap(), next[p]);
    }
    assert_eq!(consumer.pop(), None, "a duplicate after all were taken");
    assert!(inbox.is_empty());
}

/// A waker that counts its wakes.
struct CountWakes(std::sync::atomic::AtomicUsize);

impl std::task::Wake for CountWakes {
    fn wake(self: std::sync::Arc<Self>) {
        self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    }
}

// R5.1: async senders registered on a full inbox are woken when the consumer gives places back;
// a task polled again keeps one entry; a cancelled one leaves none; and waking keeps the list's
// memory (the list and its spare swap: no allocation per wake once both have grown).
#[test]
fn r5_1_room_tasks_register_once_wake_and_cancel() {
    use std::sync::atomic::Ordering as O;
    let (inbox, mut consumer) = Inbox::<u8>::with_capacity(1);
    inbox.try_reserve(Sender::External).unwrap().commit(0);
    let counts: Vec<_> = (0..3)
        .map(|_| std::sync::Arc::new(CountWakes(std::sync::atomic::AtomicUsize::new(0))))
        .collect();
    let wakers: Vec<_> = counts
        .iter()
        .map(|c| std::task::Waker::from(c.clone()))
        .collect();
    let mut tickets: Vec<Option<RoomTicket>> = (0..3).map(|_| None).collect();
    for round in 0..3 {
        for (w, t) in wakers.iter().zip(tickets.iter_mut()) {
            assert_eq!(
                inbox.poll_room(Sender::External, 1, t, w),
                Poll::Pending,
                "round {round}: no room"
            );
        }
    }
    assert_eq!(inbox.room_waiters(), 3, "one entry per task, however often it polls");
    inbox.cancel_room_wait(tickets[2].take().unwrap());
    assert_eq!(inbox.room_waiters(), 2, "a cancelled task leaves the list");
    assert_eq!(consumer.pop(), Some(0));
    assert!(consumer.release_taken());
    let woken: Vec<usize> = counts.iter().map(|c| c.0.load(O::SeqCst)).collect();
    assert_eq!(woken, [1, 1, 0], "the listed tasks are woken, the cancelled one is not");
    assert_eq!(inbox.room_waiters(), 0);
    let spare = sync::lock(&inbox.room_waiters).spare_capacity();
    assert!(spare >= 2, "the woken list's buffer is kept as the spare");
    // Their entries were taken by the wake-up: cancelling finds nothing and changes nothing.
    for t in tickets.iter_mut() {
        if let Some(t) = t.take() {
            inbox.cancel_room_wait(t);
        }
    }
    inbox.close_input();
    let mut t = None;
    assert_eq!(
        inbox.poll_room(Sender::External, 1, &mut t, &wakers[0]),
        Poll::Ready(RoomWait::Closed),
        "R8.1: a closed inbox refuses an external task"
    );
}

// R5.1: a thread that waits for room with a deadline on an inbox that never drains, again and
// again (a `send_to_timeout` loop against a stuck context), leaves nothing listed once it gives
// up, and a thread that waits without one keeps a single entry however often it returns without
// a wake-up; a thread that is listed is still woken when places are given back.
#[test]
fn r5_1_thread_waits_list_each_thread_once_and_timeouts_leave_nothing() {
    let (inbox, mut consumer) = Inbox::<u8>::with_capacity(1);
    inbox.try_reserve(Sender::External).unwrap().commit(0);
    for _ in 0..50 {
        let deadline = Instant::now() + std::time::Duration::from_micros(200);
        assert_eq!(
            inbox.wait_for_room(Sender::External, Some(deadline)),
            RoomWait::TimedOut
        );
        assert_eq!(inbox.room_waiters(), 0, "a timed-out wait leaves no entry");
    }
    // Room seen at the re-check: `Retry` with the entry left for a spurious unpark; the next wait
    // of the same thread reuses it.
    let (roomy, _c) = Inbox::<u8>::with_capacity(4);
    for _ in 0..50 {
        assert_eq!(roomy.wait_for_room(Sender::External, None), RoomWait::Retry);
    }
    assert_eq!(roomy.room_waiters(), 1, "one entry per thread, however often it waits");
    // A waiter parked with a far deadline is woken by the give-back and retries.
    let waiter = {
        let inbox = inbox.clone();
        std::thread::spawn(move || {
            let deadline = Instant::now() + std::time::Duration::from_secs(30);
            let began = Instant::now();
            let r = inbox.wait_for_room(Sender::External, Some(deadline));
            (r, began.elapsed())
        })
    };
    while inbox.room_waiters() == 0 {
        std::thread::yield_now();
    }
    assert_eq!(consumer.pop(), Some(0));
    assert!(consumer.release_taken());
    let (r, waited) = waiter.join().unwrap();
    assert_eq!(r, RoomWait::Retry);
    assert!(
        waited < std::time::Duration::from_secs(30),
        "woken by the give-back, not by its deadline"
    );
}

// R5.1: a ring of capacity N holds N places whatever its layout, and the layout is the one
// `slot::SLOT_LAYOUT` says: 24- and 40-byte slots packed edge to edge, 32- to 64-byte slots
// one per cache line on a line-aligned ring, slots above a line packed.
#[test]
fn r5_1_slot_layout_follows_the_measured_table() {
    /// (bytes from slot 0 to slot 1, whether slot 0 starts a line, number of slots).
    fn layout<T>() -> (usize, bool, usize) {
        let (inbox, _consumer) = Inbox::<T>::with_capacity(3);
        let first = inbox.slot_at(0) as *const Slot<T> as usize;
        let second = inbox.slot_at(1) as *const Slot<T> as usize;
        let places = inbox.slots.len() + inbox.line_slots.len();
        (second - first, first.is_multiple_of(64), places)
    }
    assert_eq!(std::mem::size_of::<Slot<[u64; 2]>>(), 24);
    assert_eq!(layout::<[u64; 2]>().0, 24);
    assert_eq!(layout::<[u64; 3]>(), (64, true, 3));
    assert_eq!(layout::<[u64; 4]>().0, 40);
    assert_eq!(layout::<[u64; 5]>(), (64, true, 3));
    assert_eq!(layout::<[u64; 6]>(), (64, true, 3));
    assert_eq!(layout::<[u64; 7]>(), (64, true, 3));
    assert_eq!(layout::<[u64; 8]>().0, 72);
    for (_, _, places) in [layout::<[u64; 2]>(), layout::<[u64; 8]>()] {
        assert_eq!(places, 3);
    }
}

// R5.1: the slot-layout table is one choice per size: rows in ascending order of size, each with
// its reason, the last covering every larger slot; and it gives the rule the measurements chose
// (harness/BENCHMARKS.md, "Slot layout"): a line each for slots of 32 to 64 bytes and the small
// ones, packed for 24 and 40 bytes and above a line.
#[test]
fn r5_1_slot_layout_table_is_ordered_and_gives_every_size_a_reasoned_choice() {
    for pair in slot::SLOT_LAYOUT.windows(2) {
        assert!(pair[0].up_to < pair[1].up_to, "rows in ascending order");
        assert_ne!(pair[0].own_line, pair[1].own_line, "no two rows say the same");
    }
    assert!(slot::SLOT_LAYOUT.iter().all(|row| !row.why.is_empty()));
    assert_eq!(slot::SLOT_LAYOUT.last().map(|row| row.up_to), Some(usize::MAX));
    for bytes in (8..=256).step_by(8) {
        let measured = bytes <= 64 && bytes != 24 && bytes != 40;
        assert_eq!(slot::line_per_slot(bytes), measured, "{bytes}-byte slots");
    }
}

// R2.1: an entry comes out of the inbox exactly as it went in, whatever its layout: the slot write
// copies small word-aligned entries as 8-byte words (padding included, as uninitialised bytes: miri
// checks that nothing reads them as integers) and everything else with the compiler's copy. Single
// commits and batches, entries with padding, with a heap pointer (moved, dropped once by the
// taker), narrower than a word, and larger than a cache line.
#[test]
fn r2_1_entries_come_out_as_they_went_in_whatever_their_layout() {
    #[derive(Clone, Debug, PartialEq)]
    struct Padded {
        a: u64,
        b: u8,
        c: u32,
    }
    #[derive(Clone, Debug, PartialEq)]
    struct Owning {
        name: String,
        n: u16,
    }
    fn round_trip<T: Clone + PartialEq + std::fmt::Debug>(values: &[T]) {
        let (inbox, mut consumer) = Inbox::with_capacity(values.len() + 1);
        for v in values {
            inbox
                .try_reserve(Sender::External)
                .expect("room")
                .commit(v.clone());
        }
        assert_eq!(drain(&mut consumer), values);
        let mut batch = inbox
            .try_reserve_batch(Sender::External, values.len(), values.len())
            .expect("room for the batch");
        assert_eq!(batch.len(), values.len());
        for v in values {
            batch.push(v.clone());
        }
        drop(batch);
        assert_eq!(drain(&mut consumer), values);
    }
    assert!(std::mem::size_of::<Padded>() == 16 && std::mem::align_of::<Padded>() == 8);
    round_trip(&[
        Padded { a: 1, b: 2, c: 3 },
        Padded {
            a: u64::MAX,
            b: 255,
            c: u32::MAX,
        },
    ]);
    round_trip(&[
        Owning {
            name: "first".into(),
            n: 1,
        },
        Owning {
            name: String::new(),
            n: 2,
        },
    ]);
    round_trip(&[(1u32, 2u16), (3, 4)]);
    round_trip(&[[7u64; 9], [8; 9]]);
    round_trip(&[[1u8; 3], [2; 3]]);
}

// R2.3 with the look-ahead's view (`Consumer::peek_with`, cache hints only): it sees exactly the
// entries published behind the next one, on every lap of the ring, takes nothing (each entry
// still comes out once, in order), and sees no reserved, cancelled or not yet sent place. Values
// own heap memory, so that miri checks the reads.
#[test]
fn r2_3_peek_with_sees_published_entries_and_takes_nothing() {
    for capacity in [1, 2, 3, 5, 8] {
        let (inbox, mut consumer) = Inbox::<String>::with_capacity(capacity);
        let (mut next_in, mut next_out) = (0u32, 0u32);
        for _lap in 0..4 {
            while inbox.len() < capacity {
                let r = inbox.try_reserve(Sender::External).expect("room");
                r.commit(next_in.to_string());
                next_in += 1;
            }
            while next_out < next_in {
                for ahead in 0..=capacity {
                    let want = next_out + ahead as u32;
                    let seen = consumer.peek_with(ahead, String::clone);
                    let expected = (want < next_in).then(|| want.to_string());
                    assert_eq!(seen, expected, "capacity {capacity}, {ahead} ahead of {next_out}");
                }
                assert_eq!(consumer.pop(), Some(next_out.to_string()), "peeking took it");
                next_out += 1;
                consumer.release_taken();
            }
            assert_eq!(consumer.peek_with(0, String::clone), None);
        }
    }
    // A reserved place and a cancelled one are not entries.
    let (inbox, consumer) = Inbox::<String>::with_capacity(4);
    let reserved = inbox.try_reserve(Sender::External).expect("room");
    let cancelled = inbox.try_reserve(Sender::External).expect("room");
    inbox
        .try_reserve(Sender::External)
        .expect("room")
        .commit("c".into());
    cancelled.cancel();
    assert_eq!(consumer.peek_with(0, String::clone), None, "reserved");
    assert_eq!(consumer.peek_with(1, String::clone), None, "cancelled");
    assert_eq!(consumer.peek_with(2, String::clone), Some("c".into()));
    reserved.commit("a".into());
    assert_eq!(consumer.peek_with(0, String::clone), Some("a".into()));
}
