//! The context's pending timers: entries `(due, seq, handle)` taken earliest first, ties in
//! creation order (R7.2), exactly as a binary heap of them would give them.
//!
//! # Why not only a heap
//! `within` and `wait` set timers relative to the clock, and the clock never goes back, so the
//! timers of one bound are set in the order they fall due. A heap ignores that: at a few hundred
//! thousand pending timers (`workload/absence`: one per device, 100,000 devices, each timer
//! outlived by the next heartbeat's) taking one walks the heap's depth, and its lower levels are
//! cache misses: `BinaryHeap::pop` was a tenth of that scenario's samples.
//!
//! So the queue keeps up to [`LANES`] first-in-first-out lanes beside a heap. Each lane holds
//! entries in increasing `(due, seq)` order. A new entry joins the lane whose last entry is the
//! latest one before it (best fit: the timers of one bound keep to one lane, those of another
//! bound to another), or an empty lane, or else the heap (a timer set earlier than the lanes'
//! tails: an `at` in the past of others, a shorter bound than every lane's). The next entry is the
//! least of the lanes' heads and the heap's top. Setting a timer in a lane and taking one touch
//! the two ends of a `VecDeque`, whatever the number pending.
//!
//! Owns the queue. May import `time`.

use crate::time::Time;
use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};

/// A pending timer: when it falls due, its creation sequence, and the listener it is for (its
/// handle and slot). `(due, seq)` is unique, so it alone decides the order.
pub(super) type TimerEntry = (Time, u64, u64, u32);

/// Lanes at most: a context's listeners use a few distinct bounds, and the next entry is the
/// least of this many heads.
pub(super) const LANES: usize = 4;

#[derive(Default)]
pub(super) struct TimerQueue {
    lanes: [VecDeque<TimerEntry>; LANES],
    heap: BinaryHeap<Reverse<TimerEntry>>,
    len: usize,
    /// The least entry and where it is (`None` when empty): under event time the clock moves at
    /// every inbox event, and most moves fire nothing, so [`due_by`](Self::due_by) answers those
    /// from here, and [`pop_if`](Self::pop_if) takes the entry without looking at the heads of
    /// the lanes and the heap again (it looks once, for the next one).
    next: Option<(At, TimerEntry)>,
}

/// Where the next entry is.
#[derive(Clone, Copy)]
enum At {
    Lane(usize),
    Heap,
}

impl TimerQueue {
    /// Entries pending (ended listeners' included).
    pub(super) fn len(&self) -> usize {
        self.len
    }

    /// Room held, in entries.
    pub(super) fn capacity(&self) -> usize {
        self.heap.capacity() + self.lanes.iter().map(VecDeque::capacity).sum::<usize>()
    }

    pub(super) fn push(&mut self, entry: TimerEntry) {
        self.len += 1;
        // The lane with the latest tail before `entry`, else the first empty one.
        let mut best: Option<(usize, TimerEntry)> = None;
        let mut empty: Option<usize> = None;
        for (i, lane) in self.lanes.iter().enumerate() {
            match lane.back() {
                Some(&last) if last < entry && best.is_none_or(|(_, b)| b < last) => {
                    best = Some((i, last));
                }
                Some(_) => {}
                None => {
                    empty.get_or_insert(i);
                }
            }
        }
        let at = match best.map(|(i, _)| i).or(empty) {
            Some(i) => {
                self.lanes[i].push_back(entry);
                At::Lane(i)
            }
            None => {
                self.heap.push(Reverse(entry));
                At::Heap
            }
        };
        // An entry before the least one heads its lane (a lane's entries are in order, and its
        // head is not before the least) or tops the heap.
        if self.next.is_none_or(|(_, least)| entry < least) {
            self.next = Some((at, entry));
        }
    }

    /// Where the least entry is, and the entry.
    #[inline]
    fn least(&self) -> Option<(At, TimerEntry)> {
        let mut least = self.heap.peek().map(|&Reverse(e)| (At::Heap, e));
        for (i, lane) in self.lanes.iter().enumerate() {
            if let Some(&head) = lane.front() {
                if least.is_none_or(|(_, l)| head < l) {
                    least = Some((At::Lane(i), head));
                }
            }
        }
        least
    }

    /// Takes the next entry (the earliest due, ties in creation order) if `due` says so, then
    /// looks at the heads once to find the one after it.
    pub(super) fn pop_if(&mut self, due: impl FnOnce(&TimerEntry) -> bool) -> Option<TimerEntry> {
        let (at, e) = self.next.filter(|(_, e)| due(e))?;
        match at {
            At::Lane(i) => {
                self.lanes[i].pop_front();
            }
            At::Heap => {
                self.heap.pop();
            }
        }
        self.len -= 1;
        self.next = self.least();
        Some(e)
    }

    /// The least entry, if any (for cache hints: its listener is the next a timer reaches).
    #[inline]
    pub(super) fn peek(&self) -> Option<&TimerEntry> {
        self.next.as_ref().map(|(_, e)| e)
    }

    /// Whether an entry is due at or before `t` (one comparison).
    #[inline]
    pub(super) fn due_by(&self, t: Time) -> bool {
        self.next.is_some_and(|(_, e)| e.0 <= t)
    }

    /// Keeps the entries `keep` says yes to (each lane keeps its order).
    pub(super) fn retain(&mut self, mut keep: impl FnMut(&TimerEntry) -> bool) {
        self.heap.retain(|Reverse(e)| keep(e));
        for lane in &mut self.lanes {
            lane.retain(|e| keep(e));
        }
        self.len = self.heap.len() + self.lanes.iter().map(VecDeque::len).sum::<usize>();
        self.next = self.least();
    }

    /// Every entry pending, in no particular order (for a checkpoint).
    #[cfg(feature = "checkpoint")]
    pub(super) fn entries(&self) -> impl Iterator<Item = &TimerEntry> {
        self.lanes
            .iter()
            .flatten()
            .chain(self.heap.iter().map(|Reverse(e)| e))
    }

    /// Gives back room beyond twice what each part holds.
    pub(super) fn shrink(&mut self) {
        let heap = self.heap.len();
        self.heap.shrink_to(2 * heap);
        for lane in &mut self.lanes {
            let n = lane.len();
            lane.shrink_to(2 * n);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// One step of a context's timers: set timers `d` after the clock (for a few bounds), set one
    /// at a time of its own (`at`, possibly before the clock), set one due now whose entry is
    /// queued after a later one's (a timer deferred while a tick fires: `Context::schedule`),
    /// move the clock and take what is due, or purge.
    #[derive(Clone, Debug)]
    enum Op {
        After(u64),
        At(u64),
        Deferred,
        Advance(u64),
        Purge(u64),
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            4 => prop::sample::select(vec![0u64, 5, 60, 600, 601, 1_000]).prop_map(Op::After),
            1 => (0u64..2_000).prop_map(Op::At),
            1 => Just(Op::Deferred),
            3 => (0u64..300).prop_map(Op::Advance),
            1 => (2u64..5).prop_map(Op::Purge),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(300))]

        // R7.2: the queue gives timers in the order a binary heap of `(due, seq, handle)` gives
        // them (earliest due first, ties in creation order), whatever mix of bounds, absolute
        // times, clock moves and purges sets and takes them; and says whether one is due by a
        // time as the heap's top does.
        #[test]
        fn r7_2_the_queue_takes_timers_in_the_heaps_order(ops in prop::collection::vec(op(), 1..400)) {
            let mut q = TimerQueue::default();
            let mut heap: BinaryHeap<Reverse<TimerEntry>> = BinaryHeap::new();
            let (mut now, mut seq) = (0u64, 0u64);
            for op in ops {
                match op {
                    Op::After(d) | Op::At(d) => {
                        let due = match op {
                            Op::After(_) => now + d,
                            _ => d,
                        };
                        let e = (Time::from_nanos(due), seq, seq % 7, 0);
                        seq += 1;
                        q.push(e);
                        heap.push(Reverse(e));
                    }
                    Op::Deferred => {
                        let early = (Time::from_nanos(now), seq, 1, 0);
                        let late = (Time::from_nanos(now), seq + 1, 2, 0);
                        seq += 2;
                        for e in [late, early] {
                            q.push(e);
                            heap.push(Reverse(e));
                        }
                    }
                    Op::Advance(d) => {
                        now += d;
                        while heap.peek().is_some_and(|Reverse(e)| e.0 <= Time::from_nanos(now)) {
                            let Reverse(want) = heap.pop().unwrap();
                            prop_assert_eq!(q.pop_if(|e| e.0 <= Time::from_nanos(now)), Some(want));
                        }
                        prop_assert_eq!(q.pop_if(|e| e.0 <= Time::from_nanos(now)), None);
                    }
                    Op::Purge(m) => {
                        q.retain(|e| e.2 % m != 0);
                        heap.retain(|Reverse(e)| e.2 % m != 0);
                        q.shrink();
                    }
                }
                prop_assert_eq!(q.len(), heap.len());
                // The one-comparison answer agrees with the heap at every time around the clock.
                for t in [now.saturating_sub(1), now, now + 1, now + 5] {
                    let t = Time::from_nanos(t);
                    prop_assert_eq!(
                        q.due_by(t),
                        heap.peek().is_some_and(|Reverse(e)| e.0 <= t)
                    );
                }
            }
            while let Some(Reverse(want)) = heap.pop() {
                prop_assert_eq!(q.pop_if(|_| true), Some(want));
            }
            prop_assert_eq!(q.pop_if(|_| true), None);
            prop_assert_eq!(q.len(), 0);
        }
    }

    // R7.2: timers of two bounds set in turn keep to a lane each (none goes to the heap), and
    // come out in due order.
    #[test]
    fn r7_2_timers_of_two_bounds_keep_to_their_lanes() {
        let mut q = TimerQueue::default();
        for i in 0..1_000u64 {
            q.push((Time::from_nanos(i + 60), 2 * i, 0, 0));
            q.push((Time::from_nanos(i + 600), 2 * i + 1, 0, 0));
        }
        assert!(
            q.heap.is_empty(),
            "{} entries went to the heap",
            q.heap.len()
        );
        let mut last = None;
        while let Some(e) = q.pop_if(|_| true) {
            assert!(last.is_none_or(|l| l < e), "{last:?} before {e:?}");
            last = Some(e);
        }
    }
}
