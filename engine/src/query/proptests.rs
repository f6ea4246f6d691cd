//! Property tests: the engine's stream-query windows (`Windows` with the built-in aggregates)
//! against the reference model (`reference`) on random scripts (SPEC R7.9 - R7.11).
//!
//! Each case generates a window (sliding, tumbling or count, of a small `d` or `n`), an optional
//! `every(p)`, and a script of moves at non-decreasing clock times (gaps of zero, small and large
//! gaps, gaps of exactly `d` after the last event, and gaps landing exactly on a multiple of `d`
//! or `p`): an event taken into partition 0..4 with an integer value, or a tick of the clock.
//! Before each move the clock is brought to the move's time as the context brings a query's
//! listener there: `advance(due)` at each `next_due()` up to it (what is due at or before an
//! event's time comes first, R7.2), or, for a move marked late, one `advance` to the move's time
//! (a timer fired late), which must hand the same rows. After the script the clock runs on until
//! nothing more is due (a count window with `every` is due forever: a few periods).
//!
//! Every step must hand the rows the model hands (key, time, len, and the aggregates count, sum,
//! mean, min, max, first and last, compared exactly: the values are small integers, so a sum is
//! exact in any order), in time order across times and in any order within one time (the docs
//! leave that open); after every step `held()` must equal the model's partitions and values, and
//! `next_due()` must be after the clock (a time already past would come late) and not later than
//! the model's next row or value leaving. Once everything has left a sliding or tumbling window,
//! the windows ask for the clock no more.
//!
//! A join's windows (R7.12) against a rescan of every event taken: the pairs each event gets and
//! what both sides hold.
//!
//! `PROPTEST_CASES` raises the number of cases (512 by default).
//!
//! May import the leaves.

use std::ops::RangeInclusive;
use std::time::Duration;

use proptest::prelude::*;

use super::aggregate::{Count, First, Last, Max, Mean, Min, Sum};
use super::reference::{RefAgg, RefQuery, RefRow, RefShape};
use super::windows::{RowAt, Shape, Windows, WindowsHeld};
use crate::time::Time;

type F = fn(&f64) -> f64;

fn id(v: &f64) -> f64 {
    *v
}

/// The engine's aggregates the model computes: count, sum, mean; min, max, first, last.
type Aggs = (
    (Count, Sum<F>, Mean<F>),
    (Min<F>, Max<F>, First<F>, Last<F>),
);

type Out = (
    (u64, f64, Option<f64>),
    (Option<f64>, Option<f64>, Option<f64>, Option<f64>),
);

fn aggs() -> Aggs {
    let f: F = id;
    (
        (Count::default(), Sum::of(f), Mean::of(f)),
        (Min::of(f), Max::of(f), First::of(f), Last::of(f)),
    )
}

/// An engine row in the model's terms.
fn row(r: RowAt<Out>) -> RefRow {
    let ((count, sum, mean), (min, max, first, last)) = r.value;
    RefRow {
        key: r.key.0,
        time: r.time.as_nanos(),
        len: r.len,
        agg: RefAgg {
            count,
            sum,
            mean,
            min,
            max,
            first,
            last,
        },
    }
}

/// When a move comes, relative to the clock (`c`) and the last event's time.
#[derive(Clone, Copy, Debug)]
enum Gap {
    /// At the clock's time.
    Zero,
    /// `c + g`.
    Plus(u64),
    /// The window's length after the last event (when its value leaves a sliding window), or
    /// the clock's time if that is past.
    DAfterLast,
    /// The first multiple after `c` of the window's length (`period: false`) or of `every`'s
    /// period (`period: true`), and `k` more of them.
    Multiple { period: bool, k: u64 },
}

/// What a move does.
#[derive(Clone, Copy, Debug)]
enum What {
    /// An event: partition, value.
    Take(u64, i32),
    /// The clock moves, no event.
    Tick,
}

#[derive(Clone, Copy, Debug)]
struct Move {
    gap: Gap,
    what: What,
    /// One `advance` to the move's time instead of one per due time.
    late: bool,
}

#[derive(Clone, Debug)]
struct Case {
    shape: RefShape,
    every: Option<u64>,
    moves: Vec<Move>,
    /// Whether the clock runs on after the script in one late `advance`.
    late_end: bool,
    /// How late a sliding window may release a value whose time is up (its batches, R7.11):
    /// 0 ..= d here, `d / 64` in the engine.
    slack: u64,
}

impl Case {
    /// The window's length in time (a count window has none: 2 stands in for gaps).
    fn d(&self) -> u64 {
        match self.shape {
            RefShape::Sliding(d) | RefShape::Tumbling(d) => d,
            RefShape::Count(_) => 2,
        }
    }
}

/// The engine's windows and the model, fed the same script.
struct Driver {
    engine: Windows<f64, Aggs>,
    model: RefQuery,
    shape: RefShape,
    clock: u64,
    log: Vec<String>,
}

/// Checks the rows of one step: the same as the model's, in time order, any order within a time.
fn same_rows(got: Vec<RefRow>, want: Vec<RefRow>, what: &str) -> Result<(), String> {
    if got.windows(2).any(|w| w[0].time > w[1].time) {
        return Err(format!("{what}: rows out of time order: {got:?}"));
    }
    let mut sorted = got.clone();
    // Stable: a time's rows by key, the times kept in order.
    sorted.sort_by_key(|r| (r.time, r.key));
    if sorted != want {
        return Err(format!(
            "{what}:\n engine handed {got:?}\n  model handed {want:?}"
        ));
    }
    Ok(())
}

impl Driver {
    fn new(c: &Case) -> Self {
        let ns = Duration::from_nanos;
        let shape = match c.shape {
            RefShape::Sliding(d) => Shape::Sliding(ns(d)),
            RefShape::Tumbling(d) => Shape::Tumbling(ns(d)),
            RefShape::Count(n) => Shape::Count(n),
        };
        Driver {
            engine: Windows::new(shape, c.every.map(ns), aggs()).with_slack(ns(c.slack)),
            model: RefQuery::new(c.shape, c.every),
            shape: c.shape,
            clock: 0,
            log: Vec::new(),
        }
    }

    fn fail(&self, why: String) -> String {
        format!("after {:?}:\n{why}", self.log)
    }

    /// `held()` and `next_due()` against the model at the clock: the engine holds at least what
    /// the model's windows hold and at most what they would hold `slack` longer (values whose
    /// time is up are released in batches), and its next due time is no later than the model's
    /// next row, nor than the next value leaving plus the slack.
    fn check_state(&self) -> Result<(), String> {
        // How late the engine may release a value: its timer's slack, or the period when its
        // periodic rows release the values (no queue entries).
        let slack = u64::try_from(self.engine.release_bound().as_nanos()).unwrap_or(u64::MAX);
        let (partitions, values) = self.model.held();
        let (most_partitions, most_values) = self.model.held_within(slack);
        let held = self.engine.held();
        if held.partitions < partitions
            || held.values < values
            || held.partitions > most_partitions
            || held.values > most_values
        {
            return Err(self.fail(format!(
                "at {}: engine holds {held:?}, model {partitions} partitions and {values} values \
                 ({most_partitions} and {most_values} with the slack {slack})",
                self.clock
            )));
        }
        let due = self.engine.next_due().map(Time::as_nanos);
        if due.is_some_and(|d| d <= self.clock) {
            return Err(self.fail(format!(
                "at {}: engine's next due {due:?} is not after the clock",
                self.clock
            )));
        }
        let bound = [self.model.next_row(), self.model.next_leave_within(slack)]
            .into_iter()
            .flatten()
            .min();
        if let Some(m) = bound {
            if due.is_none_or(|d| d > m) {
                return Err(self.fail(format!(
                    "at {}: engine's next due {due:?} is later than the model's next row or \
                     value leaving plus the slack ({m})",
                    self.clock
                )));
            }
        }
        Ok(())
    }

    /// The engine's `advance(to)`, against the model's.
    fn advance_both(&mut self, to: u64) -> Result<(), String> {
        let mut got = Vec::new();
        self.engine
            .advance(Time::from_nanos(to), |r| got.push(row(r)));
        let want = self.model.advance(to);
        self.clock = to;
        self.log.push(format!("advance({to})"));
        same_rows(got, want, "advance").map_err(|e| self.fail(e))?;
        self.check_state()
    }

    /// Brings the clock to `t`: one `advance(t)` if `late`, else `advance(due)` at every due
    /// time up to `t`, as the context fires the query's timer.
    fn to(&mut self, t: u64, late: bool) -> Result<(), String> {
        if late {
            return self.advance_both(t);
        }
        while let Some(due) = self.engine.next_due().map(Time::as_nanos) {
            if due > t {
                break;
            }
            self.advance_both(due)?;
        }
        // Nothing more is due up to `t` as the engine sees it: the model must agree.
        let want = self.model.advance(t);
        self.clock = t;
        same_rows(
            Vec::new(),
            want,
            &format!("no timer of the engine up to {t}"),
        )
        .map_err(|e| self.fail(e))?;
        self.check_state()
    }

    fn run(&mut self, c: &Case) -> Result<(), String> {
        let d = c.d();
        let mut last = 0;
        for m in &c.moves {
            let t = match m.gap {
                Gap::Zero => self.clock,
                Gap::Plus(g) => self.clock + g,
                Gap::DAfterLast => (last + d).max(self.clock),
                Gap::Multiple { period, k } => {
                    let x = if period { c.every.unwrap_or(d) } else { d };
                    (self.clock / x + 1 + k) * x
                }
            };
            self.to(t, m.late)?;
            if let What::Take(key, v) = m.what {
                let v = f64::from(v);
                self.log.push(format!("take({t}, {key}, {v})"));
                let got = self
                    .engine
                    .take(Time::from_nanos(t), (key, None), v)
                    .map(row);
                let want = self.model.take(t, key, v);
                if got != want {
                    return Err(self.fail(format!(
                        "the event's row:\n engine {got:?}\n  model {want:?}"
                    )));
                }
                self.check_state()?;
                last = t;
            }
        }
        // Run the clock on until everything has left (sliding) or closed (tumbling); a count
        // window with `every` for a few periods.
        let end = self.clock + d + c.slack + 3 * c.every.unwrap_or(1) + 1;
        self.to(end, c.late_end)?;
        if !matches!(self.shape, RefShape::Count(_)) {
            let (due, held) = (self.engine.next_due(), self.engine.held());
            if due.is_some() || held != WindowsHeld::default() {
                return Err(self.fail(format!(
                    "at {end}, with everything gone: engine holds {held:?}, next due {due:?}"
                )));
            }
        }
        Ok(())
    }
}

fn check(c: &Case) -> Result<(), TestCaseError> {
    Driver::new(c).run(c).map_err(TestCaseError::fail)
}

fn gap() -> impl Strategy<Value = Gap> {
    prop_oneof![
        3 => Just(Gap::Zero),
        4 => (1..=3u64).prop_map(Gap::Plus),
        2 => Just(Gap::DAfterLast),
        2 => (0..2u64).prop_map(|k| Gap::Multiple { period: false, k }),
        2 => (0..2u64).prop_map(|k| Gap::Multiple { period: true, k }),
        1 => (4..=20u64).prop_map(Gap::Plus),
    ]
}

/// A script of up to `len` moves, values in `values`, each move late with probability `late`.
fn case(
    window: impl Strategy<Value = (RefShape, Option<u64>)>,
    values: RangeInclusive<i32>,
    len: usize,
    late: f64,
) -> impl Strategy<Value = Case> {
    let what = prop_oneof![
        5 => (0..4u64, values).prop_map(|(k, v)| What::Take(k, v)),
        1 => Just(What::Tick),
    ];
    let step = (gap(), what, prop::bool::weighted(late)).prop_map(|(gap, what, late)| Move {
        gap,
        what,
        late,
    });
    (
        window,
        prop::collection::vec(step, 0..=len),
        prop::bool::weighted(late),
        0..=8u64,
    )
        .prop_map(|((shape, every), moves, late_end, slack)| Case {
            slack: match shape {
                RefShape::Sliding(d) => slack % (d + 1),
                _ => 0,
            },
            shape,
            every,
            moves,
            late_end,
        })
}

fn sliding() -> impl Strategy<Value = RefShape> {
    (1..=8u64).prop_map(RefShape::Sliding)
}

fn tumbling() -> impl Strategy<Value = RefShape> {
    (1..=8u64).prop_map(RefShape::Tumbling)
}

fn count() -> impl Strategy<Value = RefShape> {
    (1..=5usize).prop_map(RefShape::Count)
}

fn period() -> impl Strategy<Value = Option<u64>> {
    (1..=6u64).prop_map(Some)
}

/// Any valid window: sliding or count with or without `every`, tumbling without.
fn any_window() -> impl Strategy<Value = (RefShape, Option<u64>)> {
    prop_oneof![
        (sliding(), prop::option::of(1..=6u64)),
        (count(), prop::option::of(1..=6u64)),
        (tumbling(), Just(None)),
    ]
}

fn config() -> ProptestConfig {
    // 512 by default; `PROPTEST_CASES` for a longer run.
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok());
    ProptestConfig {
        cases: cases.unwrap_or(512),
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

/// Values of the events: wide (few ties), or narrow for the extremes (many ties).
const WIDE: RangeInclusive<i32> = -50..=49;
const NARROW: RangeInclusive<i32> = -3..=3;

proptest! {
    #![proptest_config(config())]

    // R7.9: a sliding value is in the window from its time until `t + d`, exclusive, leaving
    // before an event at `t + d`; one row per event, after it entered; a partition whose window
    // empties starts again.
    #[test]
    fn r7_9_sliding_windows_match_the_model(
        c in case((sliding(), Just(None)), WIDE, 40, 0.2),
    ) {
        check(&c)?;
    }

    // R7.9: a count window holds its partition's last `n` values; one row per event.
    #[test]
    fn r7_9_count_windows_match_the_model(c in case((count(), Just(None)), WIDE, 40, 0.2)) {
        check(&c)?;
    }

    // R7.10: with `every(p)`, one row per partition with a non-empty window at each multiple of
    // `p`, values leaving first; none per event.
    #[test]
    fn r7_10_periodic_rows_match_the_model(
        c in case(prop_oneof![(sliding(), period()), (count(), period())], WIDE, 40, 0.2),
    ) {
        check(&c)?;
    }

    // R7.10: a tumbling window hands a row per partition that took a value when it closes.
    #[test]
    fn r7_10_tumbling_rows_match_the_model(c in case((tumbling(), Just(None)), WIDE, 40, 0.2)) {
        check(&c)?;
    }

    // R7.10: one late `advance` to an event's time hands the rows of every due time before it,
    // in time order, values leaving first at each time: the same as one `advance` per due time.
    #[test]
    fn r7_10_one_late_advance_hands_the_rows_of_each_due_time(
        c in case(any_window(), WIDE, 40, 1.0),
    ) {
        check(&c)?;
    }

    // R7.11: min, max (with many ties), first and last as values enter and leave, against a
    // rescan of the window; longer scripts, so that windows fill and empty.
    #[test]
    fn r7_11_min_max_first_last_match_a_rescan(c in case(any_window(), NARROW, 80, 0.2)) {
        check(&c)?;
    }
}

/// One event of a join script: the time gap before it, which sides its templates match (bit 0
/// left, bit 1 right), and its key.
#[derive(Clone, Debug)]
struct JoinStep {
    gap: u64,
    sides: u8,
    key: u64,
}

/// The pairs a join hands, as `(left id, right id)`, by the engine's join windows driven as the
/// join's listener drives them (its timer at each `next_due()` up to the event's time; what is
/// due released; pairs against what each side held before the event, left role first; then the
/// event kept), and by
/// rescanning every event taken (R7.12: on the other side, same key, taken at `t` with
/// `now < t + d`, before this event; oldest first). Also checks `held()` after each event.
fn join_pairs(d: u64, slack: u64, steps: &[JoinStep]) -> Result<(), TestCaseError> {
    use super::join::JoinWindows;
    let mut w: JoinWindows<u64> =
        JoinWindows::new(Duration::from_nanos(d)).with_slack(Duration::from_nanos(slack));
    // The model: every event taken, `(time, sides, key, id)`.
    let mut taken: Vec<(u64, u8, u64, u64)> = Vec::new();
    let mut now = 0u64;
    for (id, s) in steps.iter().enumerate() {
        let id = id as u64;
        now += s.gap;
        while let Some(due) = w.next_due().filter(|t| t.as_nanos() <= now) {
            prop_assert!(
                due.as_nanos() >= now.saturating_sub(s.gap),
                "a due time already past"
            );
            w.advance(due);
        }
        // The listener releases what is due before it pairs (its timer may be the slack late).
        w.advance(Time::from_nanos(now));
        let mut got = Vec::new();
        let mut want = Vec::new();
        let held_by = |side: u8| {
            taken
                .iter()
                .filter(move |&&(t, sides, key, _)| {
                    sides & side != 0 && key == s.key && now < t + d
                })
                .map(|&(.., i)| i)
        };
        if s.sides & 1 != 0 {
            got.extend(w.held_on(1, s.key).map(|&r| (id, r)));
            want.extend(held_by(2).map(|r| (id, r)));
        }
        if s.sides & 2 != 0 {
            got.extend(w.held_on(0, s.key).map(|&l| (l, id)));
            want.extend(held_by(1).map(|l| (l, id)));
        }
        prop_assert_eq!(&got, &want, "pairs of event {} at {}", id, now);
        for side in 0..2 {
            if s.sides >> side & 1 == 1 {
                w.keep(Time::from_nanos(now), side, s.key, id);
            }
        }
        taken.push((now, s.sides, s.key, id));
        // What the model's sides hold at `now`, if they kept events `extra` longer.
        let held_within = |extra: u64| {
            let live = taken.iter().filter(|&&(t, ..)| now < t + d + extra);
            let values: u64 = live
                .clone()
                .map(|&(_, sides, ..)| u64::from(sides.count_ones()))
                .sum();
            let mut keys: Vec<(u8, u64)> = live
                .flat_map(|&(_, sides, key, _)| {
                    (0..2u8)
                        .filter(move |b| sides >> b & 1 == 1)
                        .map(move |b| (b, key))
                })
                .collect();
            keys.sort_unstable();
            keys.dedup();
            (keys.len() as u64, values)
        };
        let (least, most) = (held_within(0), held_within(slack));
        let held = w.held();
        prop_assert!(
            (least.0..=most.0).contains(&held.partitions)
                && (least.1..=most.1).contains(&held.values),
            "held after event {}: {:?}, model {:?} ..= {:?}",
            id,
            held,
            least,
            most
        );
    }
    Ok(())
}

fn join_step(d: u64) -> impl Strategy<Value = JoinStep> {
    (
        prop_oneof![Just(0), 1..=3u64, Just(d), d + 1..=3 * d],
        1..=3u8,
        0..3u64,
    )
        .prop_map(|(gap, sides, key)| JoinStep { gap, sides, key })
}

proptest! {
    #![proptest_config(config())]

    // R7.12: a join's windows hand, for each event, the events of the other side with its key
    // taken less than `d` before it and before it, oldest first, never itself (an event both
    // templates match pairs as a left event first); what they hold follows the model.
    #[test]
    fn r7_12_join_windows_match_the_model(
        (d, slack, steps) in (1..=6u64).prop_flat_map(|d| {
            (Just(d), 0..=d, prop::collection::vec(join_step(d), 1..40))
        }),
    ) {
        join_pairs(d, slack, &steps)?;
    }
}
