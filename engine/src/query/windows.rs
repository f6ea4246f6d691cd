//! The partitioned windows of one stream query (SPEC R7.9, R7.10): what each partition's window
//! holds, when values leave, and when rows are due.
//!
//! # Layout
//! Partitions live in a map from partition key (the partition, and the group when the query
//! groups: a group of a partition is a window of its own, see SPEC's decision "Stream queries"),
//! inline in its buckets; each keeps its values with the time each was taken, oldest first. A
//! sliding window's values are released by the partition itself (R7.11): before it takes an
//! event when it hands a row per event, and at every periodic row, which visits every partition
//! anyway. A query without
//! `every` (or with a period longer than the window) also queues `(leaves at, key)` for each
//! value: all values stay the same length `d` and the clock never goes back, so they leave in
//! the order they entered across all partitions, and one FIFO (`expiry`) with one timer at
//! [`next_due`](Windows::next_due) (at most `d / RELEASE_BATCH` late) replaces a timer per
//! value; an entry whose values are gone already releases nothing. A partition whose sliding
//! window empties is dropped (its deque kept for reuse, so warm windows allocate nothing); a
//! tumbling window's partitions are dropped when the window closes; a count window's partitions
//! stay (they always hold their last `n` values).
//!
//! May import the leaves.

use std::collections::VecDeque;
use std::time::Duration;

use super::aggregate::Aggregate;
use crate::hash::KindMap;
use crate::time::Time;

/// The shape of a query's window (see [`Window`](super::Window)).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Shape {
    Sliding(Duration),
    Tumbling(Duration),
    Count(usize),
}

/// Most spare deques kept for reuse.
const SPARES: usize = 1024;

/// A sliding window releases the values whose time is up in batches, rather than with a timer
/// per value: a partition at its next event (when the query hands a row per event) and at every
/// periodic row, and the query's one timer at most `d / RELEASE_BATCH` after their time (for a
/// query without `every`, or with a period longer than the window). Rows see exactly the values
/// inside the window either way (each releases what is due first); what is held past its time
/// is bounded by `d / RELEASE_BATCH` of values, or by the period.
pub(crate) const RELEASE_BATCH: u32 = 64;

/// A window's key: the partition, and the group if the query has `group_by`.
pub(crate) type PartKey = (u64, Option<u64>);

/// One partition's window, inline in the map's bucket with its key: what an event touches
/// (the key, the deque's header, the aggregate, the newest value's time) is the bucket alone.
pub(super) struct Part<P, A> {
    /// The values in the window with the clock time each was taken, oldest first.
    pub(super) values: VecDeque<(Time, P)>,
    pub(super) agg: A,
    /// Values taken in the current tumbling window (tumbling windows keep no values).
    pub(super) taken: u64,
    /// When the newest value was taken (sliding): the window has emptied once `newest + d` is
    /// past, which an event checks without reading the deque's cold back slot.
    pub(super) newest: Time,
}

/// What a query's windows hold: partitions, and values (SPEC R7.11, `Status`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct WindowsHeld {
    pub(crate) partitions: u64,
    pub(crate) values: u64,
}

impl WindowsHeld {
    pub(crate) fn add(&mut self, o: WindowsHeld) {
        self.partitions += o.partitions;
        self.values += o.values;
    }

    pub(crate) fn sub(&mut self, o: WindowsHeld) {
        self.partitions = self.partitions.saturating_sub(o.partitions);
        self.values = self.values.saturating_sub(o.values);
    }
}

/// What a query's listener tells the context after it ran (one call, not one per fact): how what
/// its windows hold changed, for the status, and the timer to set, if any.
pub(crate) struct QueryStep {
    /// What the status knew the windows held, and what they hold now.
    pub(crate) held: (WindowsHeld, WindowsHeld),
    /// A timer to set: the windows' next due time, earlier than the one pending.
    pub(crate) arm: Option<Time>,
}

/// A query listener's account with its context: the one timer it has pending, and what the
/// status knows its windows hold.
#[derive(Default)]
pub(crate) struct Account {
    armed: Option<Time>,
    noted: WindowsHeld,
}

impl Account {
    /// The time of the timer it has pending, if any (a checkpoint saves it, R11.10).
    #[cfg(feature = "checkpoint")]
    pub(crate) fn armed(&self) -> Option<Time> {
        self.armed
    }

    /// Restored: its timer pending at `armed` (the context put the saved timers back), its
    /// windows holding `held`.
    #[cfg(feature = "checkpoint")]
    pub(crate) fn restored(&mut self, armed: Option<Time>, held: WindowsHeld) {
        self.armed = armed;
        self.noted = held;
    }

    /// Its timer due at `due` fired (or a stale one: an earlier timer replaced it).
    pub(crate) fn fired(&mut self, due: Time) {
        if self.armed == Some(due) {
            self.armed = None;
        }
    }

    /// The step to report, the windows now holding `held` and next due at `next`.
    pub(crate) fn settle(&mut self, held: WindowsHeld, next: Option<Time>) -> QueryStep {
        let before = std::mem::replace(&mut self.noted, held);
        let arm = match next {
            Some(t) if self.armed.is_none_or(|a| t < a) => {
                self.armed = Some(t);
                Some(t)
            }
            _ => None,
        };
        QueryStep {
            held: (before, held),
            arm,
        }
    }
}

/// A row the windows hand out: a partition's aggregate at a time.
pub(crate) struct RowAt<O> {
    pub(crate) key: PartKey,
    pub(crate) len: usize,
    pub(crate) value: O,
    pub(crate) time: Time,
}

/// The windows of one query, one per partition.
///
/// Rows of one time come in the map's order: the same for the same input (the hasher is fixed),
/// not otherwise specified.
pub(crate) struct Windows<P, A> {
    pub(super) shape: Shape,
    pub(super) every: Option<Duration>,
    /// How late a value whose time is up may be released (see [`RELEASE_BATCH`]).
    slack: Duration,
    pub(super) proto: A,
    /// The partitions, in the map itself: a take finds the partition, its aggregate and its
    /// deque's header in the bucket it hashes to (one line fewer than a map to a slab).
    pub(super) parts: KindMap<PartKey, Part<P, A>>,
    /// Sliding: `(leaves at, key)` of every value held, oldest first.
    pub(super) expiry: VecDeque<(Time, PartKey)>,
    /// The next periodic row (`every`) or tumbling window's end, while anything is held.
    pub(super) next_emit: Option<Time>,
    pub(super) held: WindowsHeld,
    spare: Vec<VecDeque<(Time, P)>>,
    /// Whether a sliding window's values are released through `expiry` (and its timer): without
    /// `every`, or with a period longer than the window. With `every(p)`, `p <= d`, each
    /// periodic row time releases what is due in every partition (it visits them all anyway),
    /// so no value needs a queue entry.
    queued: bool,
    /// Whether the rows of one time come in key order (a persistent query's, R11.10: its
    /// restored map would hand them in another order than the map it was saved from), and
    /// the buffer their keys are sorted in.
    sorted: Option<Vec<PartKey>>,
}

impl<P, A> Part<P, A> {
    /// Releases the values whose time is up at `now` (taken at `t` with `t + d <= now`), oldest
    /// first; returns how many.
    #[inline]
    fn release(&mut self, now: Time, d: Duration) -> u64
    where
        A: Aggregate<P>,
    {
        let mut n = 0;
        while let Some((t, _)) = self.values.front() {
            if *t + d > now {
                break;
            }
            if let Some((_, v)) = self.values.pop_front() {
                self.agg.remove(&v);
                n += 1;
            }
        }
        n
    }
}

impl<P, A: Aggregate<P>> Windows<P, A> {
    pub(crate) fn new(shape: Shape, every: Option<Duration>, proto: A) -> Self {
        let slack = match shape {
            Shape::Sliding(d) => d / RELEASE_BATCH,
            _ => Duration::ZERO,
        };
        let queued = match (shape, every) {
            (Shape::Sliding(d), Some(p)) => p > d,
            (Shape::Sliding(_), None) => true,
            _ => false,
        };
        Self {
            queued,
            shape,
            every,
            slack,
            proto,
            parts: KindMap::default(),
            expiry: VecDeque::new(),
            next_emit: None,
            held: WindowsHeld::default(),
            spare: Vec::new(),
            sorted: None,
        }
    }

    /// The same windows handing the rows of one time in key order (partition, then group).
    #[cfg(feature = "checkpoint")]
    pub(crate) fn in_key_order(mut self) -> Self {
        self.sorted = Some(Vec::new());
        self
    }

    /// The same windows releasing values at most `slack` after their time (tests).
    #[cfg(test)]
    pub(crate) fn with_slack(mut self, slack: Duration) -> Self {
        self.slack = slack;
        self
    }

    pub(crate) fn held(&self) -> WindowsHeld {
        self.held
    }

    /// How late, at most, a value whose time is up is released (tests): the timer's slack, or
    /// the period when the periodic rows release values.
    #[cfg(test)]
    pub(crate) fn release_bound(&self) -> Duration {
        match (self.shape, self.queued) {
            (Shape::Sliding(_), true) => self.slack,
            (Shape::Sliding(_), false) => self.every.unwrap_or(Duration::ZERO),
            _ => Duration::ZERO,
        }
    }

    /// The next time the windows need the clock: values to release (at most the slack after the
    /// oldest one's time), a periodic row, a tumbling window's end.
    pub(crate) fn next_due(&self) -> Option<Time> {
        let leaves = self.expiry.front().map(|&(t, _)| t + self.slack);
        match (leaves, self.next_emit) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// The first multiple of `period` after `now` (periods count from the clock's origin).
    fn after(now: Time, period: Duration) -> Time {
        let p = u64::try_from(period.as_nanos()).unwrap_or(u64::MAX).max(1);
        Time::from_nanos((now.as_nanos() / p).saturating_add(1).saturating_mul(p))
    }

    /// Drops a partition whose window emptied, keeping its deque for reuse.
    fn drop_part(&mut self, key: &PartKey) {
        if let Some(part) = self.parts.remove(key) {
            self.held.partitions -= 1;
            keep_spare(&mut self.spare, part.values);
        }
    }

    /// Takes `value` into window `key`'s window at `now`; returns the row to hand now, if the
    /// query hands one per event (no `every`, not tumbling).
    pub(crate) fn take(&mut self, now: Time, key: PartKey, value: P) -> Option<RowAt<A::Output>> {
        let (proto, spare, held) = (&self.proto, &mut self.spare, &mut self.held);
        let part = self.parts.entry(key).or_insert_with(|| {
            held.partitions += 1;
            Part {
                values: spare.pop().unwrap_or_default(),
                agg: proto.clone(),
                taken: 0,
                newest: now,
            }
        });
        match self.shape {
            Shape::Sliding(d) => {
                if !part.values.is_empty() && part.newest + d <= now {
                    // Even the newest value has left: the window emptied before this event
                    // (between two visits), so the partition starts again from the initial
                    // aggregate, as one dropped and made afresh (SPEC "Stream queries": no
                    // residue of values that are gone).
                    self.held.values -= part.values.len() as u64;
                    part.values.clear();
                    part.agg = proto.clone();
                } else if self.every.is_none() {
                    // A row per event: what is due in this window leaves first (its queue
                    // entry's timer may come up to its slack later), so that the row sees
                    // exactly the window. With `every`, the next periodic row releases it
                    // (reading the window's oldest value here would cost a cold line per
                    // event).
                    self.held.values -= part.release(now, d);
                }
                part.agg.add(&value);
                part.values.push_back((now, value));
                part.newest = now;
                if self.queued {
                    self.expiry.push_back((now + d, key));
                }
                self.held.values += 1;
            }
            Shape::Count(n) => {
                if part.values.len() >= n {
                    if let Some((_, old)) = part.values.pop_front() {
                        part.agg.remove(&old);
                        self.held.values -= 1;
                    }
                }
                part.agg.add(&value);
                part.values.push_back((now, value));
                self.held.values += 1;
            }
            Shape::Tumbling(d) => {
                part.agg.add(&value);
                part.taken += 1;
                if self.next_emit.is_none() {
                    self.next_emit = Some(Self::after(now, d));
                }
                return None;
            }
        }
        match self.every {
            Some(p) => {
                if self.next_emit.is_none() {
                    self.next_emit = Some(Self::after(now, p));
                }
                None
            }
            None => Some(RowAt {
                key,
                len: part.values.len(),
                value: part.agg.value(),
                time: now,
            }),
        }
    }

    /// Brings the windows to `due`: values whose time is up leave and periodic rows fall due, in
    /// time order, values first at one time (R7.10). Each row goes to `row`.
    pub(crate) fn advance(&mut self, due: Time, mut row: impl FnMut(RowAt<A::Output>)) {
        loop {
            let leaves = self.expiry.front().map(|&(t, _)| t);
            match (leaves, self.next_emit) {
                (Some(t), m) if t <= due && m.is_none_or(|m| t <= m) => self.expire_one(),
                (_, Some(m)) if m <= due => self.emit_at(m, &mut row),
                _ => break,
            }
        }
    }

    /// The oldest queue entry: its partition releases what is due by the entry's time (nothing,
    /// if its event or a row released it already; a partition made since holds newer values).
    fn expire_one(&mut self) {
        let (Some((t, key)), Shape::Sliding(d)) = (self.expiry.pop_front(), self.shape) else {
            return;
        };
        let Some(part) = self.parts.get_mut(&key) else {
            return;
        };
        self.held.values -= part.release(t, d);
        if part.values.is_empty() {
            self.drop_part(&key);
        }
    }

    /// The rows of time `m`: every partition with a non-empty window (sliding, count) or with
    /// values taken in the window that ends at `m` (tumbling, which then starts afresh).
    fn emit_at(&mut self, m: Time, row: &mut impl FnMut(RowAt<A::Output>)) {
        match self.shape {
            Shape::Tumbling(_) => {
                // Every partition took a value in the window (it is dropped when it closes):
                // a row each, and the next window starts with none.
                self.hand_rows(m, row);
                self.parts.clear();
                self.held.partitions = 0;
                self.next_emit = None;
                return;
            }
            Shape::Sliding(d) => {
                // Each partition releases what is due by `m` (the values of a query without
                // queue entries leave here); one emptied is dropped. The rows come in a second
                // pass: the release reads every partition's oldest value, a cold line each,
                // and a tight loop lets the processor overlap those misses, where a handler
                // call between two of them would not.
                let (spare, held) = (&mut self.spare, &mut self.held);
                self.parts.retain(|_, part| {
                    held.values -= part.release(m, d);
                    if part.values.is_empty() {
                        held.partitions -= 1;
                        keep_spare(spare, std::mem::take(&mut part.values));
                        return false;
                    }
                    true
                });
            }
            // A count window always holds its last `n` values: nothing leaves with time.
            Shape::Count(_) => {}
        }
        self.hand_rows(m, row);
        self.next_emit = match self.every {
            Some(p) if self.held.partitions > 0 => Some(m + p),
            _ => None,
        };
    }

    /// A row of time `m` for each partition, in key order for a persistent query (the
    /// map's otherwise): of its window, or of what it took in the closing tumbling window.
    fn hand_rows(&mut self, m: Time, row: &mut impl FnMut(RowAt<A::Output>)) {
        let tumbling = matches!(self.shape, Shape::Tumbling(_));
        let at = |key, part: &Part<P, A>| RowAt {
            key,
            len: if tumbling {
                part.taken as usize
            } else {
                part.values.len()
            },
            value: part.agg.value(),
            time: m,
        };
        match &mut self.sorted {
            Some(keys) => {
                keys.extend(self.parts.keys());
                keys.sort_unstable();
                for key in keys.drain(..) {
                    if let Some(part) = self.parts.get(&key) {
                        row(at(key, part));
                    }
                }
            }
            None => {
                for (&key, part) in &self.parts {
                    row(at(key, part));
                }
            }
        }
    }
}

/// Keeps an emptied partition's deque for reuse (its memory, not its values), up to [`SPARES`].
fn keep_spare<P>(spare: &mut Vec<VecDeque<(Time, P)>>, mut values: VecDeque<(Time, P)>) {
    if spare.len() < SPARES && values.capacity() > 0 {
        values.clear();
        spare.push(values);
    }
}
