//! A reference model of a stream query's windows and rows (SPEC R7.9 - R7.11), written from the
//! SPEC text and the module docs alone, to be read rather than to be fast: the property tests
//! (`proptests`) check the engine's `Windows` and aggregates against it.
//!
//! The model keeps every value the query ever took, with its clock time and partition, and
//! computes every window, row and count by **rescanning** them: nothing is updated as values
//! enter or leave, nothing is dropped, no partition is made or reused. Times are plain
//! nanoseconds; values are `f64`s that the tests keep integer-valued and small, so that a sum is
//! exact in any order. The rules, as the model reads them:
//! - R7.9, what a window holds at clock time `T`, of the values taken so far: a sliding window
//!   of `d`, the partition's values taken at `t` with `t <= T < t + d` (a value leaves when the
//!   clock reaches `t + d`, before an event stamped `t + d`); a tumbling window of `d`, the
//!   values taken in `[k*d, (k+1)*d)`; a count window of `n`, the partition's last `n` values,
//!   whatever their times.
//! - R7.9 with R7.2: a value enters at the clock's time, and what falls due on the clock at a
//!   time (values leaving, periodic rows, a tumbling window closing) comes before the events of
//!   that time: a row of time `m` does not see a value taken at `m`.
//! - R7.10, rows: without `every`, a sliding or count window hands one row for the event's
//!   partition each time it takes a value, after the value entered (so the row sees it and every
//!   value taken before it, also at the same time). With `every(p)`, at each multiple `m` of
//!   `p` on the clock, one row per partition whose window at `m` is not empty, values leaving
//!   first (a value taken at `m - d` is out). A tumbling window hands at each `(k+1)*d` one row
//!   per partition that took a value in `[k*d, (k+1)*d)`; its `len` is the number of values
//!   taken. Rows of one time come in no particular order (the docs leave it open): the model
//!   hands them by key.
//! - The decision "Stream queries": a partition whose sliding window empties starts again from
//!   scratch. To a rescan that is nothing: a window is the values it holds.
//! - R7.11, aggregates: the count, sum, mean, minimum, maximum, first (oldest) and last (newest)
//!   of the window's values, each by a rescan; what windows hold: for a sliding window the
//!   partitions with a non-empty window and the values in them, for a tumbling window the
//!   partitions that took a value in the open window (and no values), for a count window every
//!   partition that took a value and its last `n` values.
//!
//! May import nothing of the engine.

use std::collections::BTreeSet;

/// The shape of a window; lengths in nanoseconds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum RefShape {
    Sliding(u64),
    Tumbling(u64),
    Count(usize),
}

/// The aggregates of a window's values, by rescan (R7.11).
#[derive(Clone, Debug, PartialEq)]
pub(super) struct RefAgg {
    pub(super) count: u64,
    pub(super) sum: f64,
    pub(super) mean: Option<f64>,
    pub(super) min: Option<f64>,
    pub(super) max: Option<f64>,
    pub(super) first: Option<f64>,
    pub(super) last: Option<f64>,
}

impl RefAgg {
    /// The aggregates of `values`, oldest first.
    pub(super) fn of(values: &[f64]) -> Self {
        let sum: f64 = values.iter().sum();
        let n = values.len();
        RefAgg {
            count: n as u64,
            sum,
            mean: (n > 0).then(|| sum / n as f64),
            min: values.iter().copied().reduce(f64::min),
            max: values.iter().copied().reduce(f64::max),
            first: values.first().copied(),
            last: values.last().copied(),
        }
    }
}

/// A row: a partition's aggregate at a time (R7.10).
#[derive(Clone, Debug, PartialEq)]
pub(super) struct RefRow {
    pub(super) key: u64,
    pub(super) time: u64,
    pub(super) len: usize,
    pub(super) agg: RefAgg,
}

impl RefRow {
    fn of(key: u64, time: u64, values: &[f64]) -> Self {
        RefRow {
            key,
            time,
            len: values.len(),
            agg: RefAgg::of(values),
        }
    }
}

/// One query's windows, as a list of everything it took.
pub(super) struct RefQuery {
    shape: RefShape,
    every: Option<u64>,
    /// Every value taken: `(time, partition, value)`, in the order taken.
    taken: Vec<(u64, u64, f64)>,
    /// The clock: every row due at or before it has been handed.
    clock: u64,
}

impl RefQuery {
    pub(super) fn new(shape: RefShape, every: Option<u64>) -> Self {
        RefQuery {
            shape,
            every,
            taken: Vec::new(),
            clock: 0,
        }
    }

    /// Every partition that ever took a value.
    fn keys(&self) -> BTreeSet<u64> {
        self.taken.iter().map(|&(_, k, _)| k).collect()
    }

    /// Partition `key`'s sliding or count window at time `at` (not before the last value taken),
    /// oldest first.
    fn window(&self, key: u64, at: u64) -> Vec<f64> {
        let mine = self.taken.iter().filter(|&&(_, k, _)| k == key);
        match self.shape {
            RefShape::Sliding(d) => mine
                .filter(|&&(t, _, _)| t <= at && at < t + d)
                .map(|&(_, _, v)| v)
                .collect(),
            RefShape::Count(n) => {
                let all: Vec<f64> = mine.map(|&(_, _, v)| v).collect();
                all[all.len().saturating_sub(n)..].to_vec()
            }
            RefShape::Tumbling(d) => {
                let start = at / d * d;
                mine.filter(|&&(t, _, _)| start <= t && t < start + d)
                    .map(|&(_, _, v)| v)
                    .collect()
            }
        }
    }

    /// Partition `key`'s values taken in the tumbling window `[end - d, end)`.
    fn closed(&self, key: u64, end: u64, d: u64) -> Vec<f64> {
        self.taken
            .iter()
            .filter(|&&(t, k, _)| k == key && end - d <= t && t < end)
            .map(|&(_, _, v)| v)
            .collect()
    }

    /// The multiples of `x` in `(from, to]`.
    fn multiples(x: u64, from: u64, to: u64) -> impl Iterator<Item = u64> {
        (from / x + 1..=to / x).map(move |k| k * x)
    }

    /// Moves the clock to `to`: the rows due in `(clock, to]`, in time order, each time's by key.
    pub(super) fn advance(&mut self, to: u64) -> Vec<RefRow> {
        assert!(to >= self.clock, "the clock never goes back");
        let mut rows = Vec::new();
        match (self.shape, self.every) {
            (RefShape::Tumbling(d), _) => {
                for end in Self::multiples(d, self.clock, to) {
                    for key in self.keys() {
                        let values = self.closed(key, end, d);
                        if !values.is_empty() {
                            rows.push(RefRow::of(key, end, &values));
                        }
                    }
                }
            }
            (_, Some(p)) => {
                for m in Self::multiples(p, self.clock, to) {
                    for key in self.keys() {
                        let values = self.window(key, m);
                        if !values.is_empty() {
                            rows.push(RefRow::of(key, m, &values));
                        }
                    }
                }
            }
            (_, None) => {}
        }
        self.clock = to;
        rows
    }

    /// Takes `value` into partition `key`'s window at `now`, the clock's time (advanced to it
    /// first); the row handed for the event, if the query hands one per event.
    pub(super) fn take(&mut self, now: u64, key: u64, value: f64) -> Option<RefRow> {
        assert_eq!(now, self.clock, "a value enters at the clock's time");
        self.taken.push((now, key, value));
        match (self.shape, self.every) {
            (RefShape::Tumbling(_), _) | (_, Some(_)) => None,
            (_, None) => Some(RefRow::of(key, now, &self.window(key, now))),
        }
    }

    /// What the windows hold at the clock: (partitions, values).
    pub(super) fn held(&self) -> (u64, u64) {
        let mut parts = 0;
        let mut values = 0;
        for key in self.keys() {
            let w = self.window(key, self.clock);
            if !w.is_empty() {
                parts += 1;
                if !matches!(self.shape, RefShape::Tumbling(_)) {
                    values += w.len() as u64;
                }
            }
        }
        (parts, values)
    }

    /// [`held`](Self::held) were a sliding window `extra` longer: what an engine that releases
    /// values up to `extra` after their time may hold at most (R7.11).
    pub(super) fn held_within(&self, extra: u64) -> (u64, u64) {
        let RefShape::Sliding(d) = self.shape else {
            return self.held();
        };
        let wider = RefQuery {
            shape: RefShape::Sliding(d + extra),
            every: self.every,
            taken: self.taken.clone(),
            clock: self.clock,
        };
        wider.held()
    }

    /// The first time after the clock at which a row is due (periodic, or a tumbling window
    /// closing), if any.
    pub(super) fn next_row(&self) -> Option<u64> {
        let c = self.clock;
        match (self.shape, self.every) {
            (RefShape::Tumbling(d), _) => (self.held().0 > 0).then_some((c / d + 1) * d),
            (shape, Some(p)) => {
                let m = (c / p + 1) * p;
                let non_empty = match shape {
                    RefShape::Sliding(d) => self.taken.iter().any(|&(t, _, _)| m < t + d),
                    _ => !self.taken.is_empty(),
                };
                non_empty.then_some(m)
            }
            (_, None) => None,
        }
    }

    /// The latest time by which an engine releasing values up to `extra` after their time must
    /// next release one: `t + d + extra` of the earliest value still in its window (one it
    /// holds past its time is due earlier still).
    pub(super) fn next_leave_within(&self, extra: u64) -> Option<u64> {
        let RefShape::Sliding(d) = self.shape else {
            return None;
        };
        self.taken
            .iter()
            .filter(|&&(t, _, _)| t + d > self.clock)
            .map(|&(t, _, _)| t + d + extra)
            .min()
    }
}
