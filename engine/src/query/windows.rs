//! The partitioned windows of one stream query (SPEC R7.9, R7.10): what each partition's window
//! holds, when values leave, and when rows are due.
//!
//! # Layout
//! Partitions live in a slab (`parts`, with a free list) found through a map from partition key
//! (the partition, and the group when the query groups: a group of a partition is a window of its
//! own, see SPEC's decision "Stream queries") to slot. A sliding time window's values all stay the same length `d`, and the clock never
//! goes back, so they leave in the order they entered *across all partitions*: one FIFO of
//! `(leaves at, slot)` entries (`expiry`) replaces a timer per value, and expiring is a
//! `pop_front` plus the partition's own `pop_front`. The owner (the query's listener) keeps one
//! timer at [`next_due`](Windows::next_due). A partition whose sliding window empties is dropped
//! (its deque kept for reuse, so warm windows allocate nothing); a tumbling window's partitions
//! are dropped when the window closes; a count window's partitions stay (they always hold their
//! last `n` values).
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

/// A window's key: the partition, and the group if the query has `group_by`.
pub(crate) type PartKey = (u64, Option<u64>);

struct Part<P, A> {
    key: PartKey,
    values: VecDeque<P>,
    agg: A,
    /// Values taken in the current tumbling window (tumbling windows keep no values).
    taken: u64,
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

/// A row the windows hand out: a partition's aggregate at a time.
pub(crate) struct RowAt<O> {
    pub(crate) key: PartKey,
    pub(crate) len: usize,
    pub(crate) value: O,
    pub(crate) time: Time,
}

/// The windows of one query, one per partition.
pub(crate) struct Windows<P, A> {
    shape: Shape,
    every: Option<Duration>,
    proto: A,
    slots: KindMap<PartKey, u32>,
    parts: Vec<Option<Part<P, A>>>,
    free: Vec<u32>,
    /// Sliding: `(leaves at, slot)` of every value held, oldest first.
    expiry: VecDeque<(Time, u32)>,
    /// The next periodic row (`every`) or tumbling window's end, while anything is held.
    next_emit: Option<Time>,
    held: WindowsHeld,
    spare: Vec<VecDeque<P>>,
}

impl<P, A: Aggregate<P>> Windows<P, A> {
    pub(crate) fn new(shape: Shape, every: Option<Duration>, proto: A) -> Self {
        Self {
            shape,
            every,
            proto,
            slots: KindMap::default(),
            parts: Vec::new(),
            free: Vec::new(),
            expiry: VecDeque::new(),
            next_emit: None,
            held: WindowsHeld::default(),
            spare: Vec::new(),
        }
    }

    pub(crate) fn held(&self) -> WindowsHeld {
        self.held
    }

    /// The next time the windows need the clock: a value leaving, a periodic row, a tumbling
    /// window's end.
    pub(crate) fn next_due(&self) -> Option<Time> {
        let leaves = self.expiry.front().map(|&(t, _)| t);
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

    fn slot_for(&mut self, key: PartKey) -> u32 {
        if let Some(&s) = self.slots.get(&key) {
            return s;
        }
        let part = Part {
            key,
            values: self.spare.pop().unwrap_or_default(),
            agg: self.proto.clone(),
            taken: 0,
        };
        self.held.partitions += 1;
        let s = match self.free.pop() {
            Some(s) => {
                self.parts[s as usize] = Some(part);
                s
            }
            None => {
                self.parts.push(Some(part));
                (self.parts.len() - 1) as u32
            }
        };
        self.slots.insert(key, s);
        s
    }

    fn drop_part(&mut self, s: u32) {
        if let Some(part) = self.parts[s as usize].take() {
            self.slots.remove(&part.key);
            self.free.push(s);
            self.held.partitions -= 1;
            if self.spare.len() < SPARES && part.values.capacity() > 0 {
                let mut values = part.values;
                values.clear();
                self.spare.push(values);
            }
        }
    }

    /// Takes `value` into window `key`'s window at `now`; returns the row to hand now, if the
    /// query hands one per event (no `every`, not tumbling).
    pub(crate) fn take(&mut self, now: Time, key: PartKey, value: P) -> Option<RowAt<A::Output>> {
        let s = self.slot_for(key);
        let part = self.parts[s as usize].as_mut()?;
        match self.shape {
            Shape::Sliding(d) => {
                part.agg.add(&value);
                part.values.push_back(value);
                self.expiry.push_back((now + d, s));
                self.held.values += 1;
            }
            Shape::Count(n) => {
                if part.values.len() >= n {
                    if let Some(old) = part.values.pop_front() {
                        part.agg.remove(&old);
                        self.held.values -= 1;
                    }
                }
                part.agg.add(&value);
                part.values.push_back(value);
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
                key: part.key,
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

    fn expire_one(&mut self) {
        let Some((_, s)) = self.expiry.pop_front() else {
            return;
        };
        let Some(part) = self.parts[s as usize].as_mut() else {
            return;
        };
        if let Some(v) = part.values.pop_front() {
            part.agg.remove(&v);
            self.held.values -= 1;
        }
        if part.values.is_empty() {
            self.drop_part(s);
        }
    }

    /// The rows of time `m`: every partition with a non-empty window (sliding, count) or with
    /// values taken in the window that ends at `m` (tumbling, which then starts afresh).
    fn emit_at(&mut self, m: Time, row: &mut impl FnMut(RowAt<A::Output>)) {
        match self.shape {
            Shape::Tumbling(_) => {
                for s in 0..self.parts.len() {
                    let Some(part) = self.parts[s].as_mut() else {
                        continue;
                    };
                    if part.taken > 0 {
                        row(RowAt {
                            key: part.key,
                            len: part.taken as usize,
                            value: part.agg.value(),
                            time: m,
                        });
                    }
                    self.drop_part(s as u32);
                }
                self.next_emit = None;
            }
            Shape::Sliding(_) | Shape::Count(_) => {
                for part in self.parts.iter().flatten() {
                    row(RowAt {
                        key: part.key,
                        len: part.values.len(),
                        value: part.agg.value(),
                        time: m,
                    });
                }
                self.next_emit = match self.every {
                    Some(p) if self.held.partitions > 0 => Some(m + p),
                    _ => None,
                };
            }
        }
    }
}
