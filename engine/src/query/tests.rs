//! The windows and aggregates of stream queries, without a context (SPEC R7.9 - R7.11).

use std::time::Duration;

use super::aggregate::{Aggregate, Count, First, Last, Max, Mean, Min, StdDev, Sum};
use super::windows::{RowAt, Shape, Windows, WindowsHeld};
use crate::time::Time;

fn s(secs: u64) -> Time {
    Time::from_secs(secs)
}

fn rows<O: Clone>(
    w: &mut Windows<f64, impl Aggregate<f64, Output = O>>,
    due: Time,
) -> Vec<(u64, u64, usize, O)> {
    let mut out = Vec::new();
    w.advance(due, |r: RowAt<O>| {
        out.push((r.key.0, r.time.as_nanos() / 1_000_000_000, r.len, r.value))
    });
    out
}

#[test]
fn r7_9_a_sliding_value_leaves_at_its_time_plus_d_exclusive() {
    let mut w = Windows::new(
        Shape::Sliding(Duration::from_secs(10)),
        None,
        Sum::of(|v: &f64| *v),
    );
    assert_eq!(w.take(s(0), (1, None), 1.0).map(|r| r.value), Some(1.0));
    assert_eq!(w.take(s(5), (1, None), 2.0).map(|r| r.value), Some(3.0));
    // The release of the first value is due by 10 s plus the batch's slack (10 s / 64).
    assert_eq!(
        w.next_due(),
        Some(s(10) + Duration::from_secs(10) / super::windows::RELEASE_BATCH)
    );
    // Just before 10 s both are in; at 10 s the first has left.
    assert!(rows(&mut w, Time::from_nanos(s(10).as_nanos() - 1)).is_empty());
    assert_eq!(
        w.held(),
        WindowsHeld {
            partitions: 1,
            values: 2
        }
    );
    assert!(
        rows(&mut w, s(10)).is_empty(),
        "values leaving hand no row without `every`"
    );
    assert_eq!(
        w.take(s(10), (1, None), 4.0).map(|r| (r.len, r.value)),
        Some((2, 6.0))
    );
}

#[test]
fn r7_9_a_partition_whose_sliding_window_empties_is_dropped_and_starts_afresh() {
    let mut w = Windows::new(
        Shape::Sliding(Duration::from_secs(10)),
        None,
        Sum::of(|v: &f64| *v),
    );
    w.take(s(0), (7, None), 0.1);
    w.take(s(1), (7, None), 0.2);
    w.take(s(1), (8, None), 5.0);
    rows(&mut w, s(11));
    assert_eq!(
        w.held(),
        WindowsHeld::default(),
        "both partitions empty: dropped"
    );
    // 0.1 + 0.2 - 0.1 - 0.2 is not 0.0 in floating point; a dropped partition starts at 0.0.
    assert_eq!(w.take(s(12), (7, None), 1.0).map(|r| r.value), Some(1.0));
}

/// A window that empties between two visits of its partition (no timer or periodic row has
/// released its values yet) also starts afresh at its next event, in both release modes: with
/// `every` (released only at the rows) and without (released at the partition's event, or by
/// the timer up to its slack later).
#[test]
fn r7_9_a_sliding_window_that_emptied_since_its_last_visit_starts_afresh_at_its_next_event() {
    let d = Duration::from_secs(10);
    for every in [None, Some(Duration::from_secs(5))] {
        let mut w = Windows::new(Shape::Sliding(d), every, Sum::of(|v: &f64| *v));
        w.take(s(6), (7, None), 1e17);
        w.take(s(7), (7, None), 1.0);
        if every.is_some() {
            // The rows at 10 s and 15 s release nothing (the values are in until 16 s, 17 s).
            assert_eq!(rows(&mut w, s(15)).len(), 2);
        }
        // At 17 s both values have left, but no row or timer has visited the partition since:
        // its event finds the window empty. The running sum would be 1e17 + 1.0 - 1e17 - 1.0
        // = -1.0 (the 1.0 is lost to rounding when it enters, not when it leaves).
        let row = w.take(s(17), (7, None), 5.0).map(|r| r.value);
        assert_eq!(row, every.map_or(Some(5.0), |_| None), "every = {every:?}");
        assert_eq!(
            w.held(),
            WindowsHeld {
                partitions: 1,
                values: 1
            },
            "every = {every:?}"
        );
        if every.is_some() {
            // The row at 20 s sees the new value alone, in a sum from 0.0.
            assert_eq!(rows(&mut w, s(20)), [(7, 20, 1, 5.0)]);
        }
    }
}

#[test]
fn r7_9_a_count_window_keeps_the_last_n_values() {
    let mut w = Windows::new(Shape::Count(2), None, Sum::of(|v: &f64| *v));
    let sums: Vec<f64> = [1.0, 2.0, 4.0, 8.0]
        .iter()
        .map(|&v| w.take(s(0), (1, None), v).expect("a row per event").value)
        .collect();
    assert_eq!(sums, [1.0, 3.0, 6.0, 12.0]);
    assert_eq!(
        w.held(),
        WindowsHeld {
            partitions: 1,
            values: 2
        }
    );
    assert_eq!(w.next_due(), None, "a count window needs no clock");
}

#[test]
fn r7_10_every_hands_a_row_per_non_empty_partition_at_multiples_of_the_period() {
    let mut w = Windows::new(
        Shape::Sliding(Duration::from_secs(3)),
        Some(Duration::from_secs(2)),
        Count::default(),
    );
    assert!(
        w.take(s(1), (1, None), 0.0).is_none(),
        "with `every` no row per event"
    );
    assert!(w.take(s(1), (2, None), 0.0).is_none());
    assert_eq!(w.next_due(), Some(s(2)));
    let mut got = rows(&mut w, s(2));
    got.sort();
    assert_eq!(got, [(1, 2, 1, 1), (2, 2, 1, 1)]);
    w.take(s(3), (1, None), 0.0);
    // At 4 s the values of 1 s have left (1 + 3 = 4: values first at one time): only key 1's
    // value of 3 s is left.
    assert_eq!(rows(&mut w, s(4)), [(1, 4, 1, 1)]);
    // At 6 s everything has left: no row, and the query stops asking for the clock.
    assert!(rows(&mut w, s(6)).is_empty());
    assert_eq!(w.next_due(), None);
    // The next event arms the next multiple after it.
    w.take(s(9), (3, None), 0.0);
    assert_eq!(w.next_due(), Some(s(10)));
}

#[test]
fn r7_10_a_tumbling_window_hands_its_rows_when_it_closes_and_keeps_no_values() {
    let mut w = Windows::new(
        Shape::Tumbling(Duration::from_secs(10)),
        None,
        Sum::of(|v: &f64| *v),
    );
    assert!(w.take(s(1), (1, None), 1.0).is_none());
    assert!(w.take(s(9), (1, None), 2.0).is_none());
    assert!(w.take(s(9), (2, None), 5.0).is_none());
    assert_eq!(
        w.held(),
        WindowsHeld {
            partitions: 2,
            values: 0
        }
    );
    assert_eq!(w.next_due(), Some(s(10)));
    let mut got = rows(&mut w, s(10));
    got.sort_by_key(|r| r.0);
    assert_eq!(got, [(1, 10, 2, 3.0), (2, 10, 1, 5.0)]);
    assert_eq!(w.held(), WindowsHeld::default());
    // An event at exactly 10 s belongs to [10, 20).
    w.take(s(10), (1, None), 4.0);
    assert_eq!(rows(&mut w, s(25)), [(1, 20, 1, 4.0)]);
}

#[test]
fn r7_10_a_late_timer_catches_up_in_time_order_values_first() {
    // One call brings the windows from 0 to 7 s: everything due up to 7 s, in time order, values
    // leaving before a periodic row of the same time.
    let mut w = Windows::new(
        Shape::Sliding(Duration::from_secs(3)),
        Some(Duration::from_secs(2)),
        Count::default(),
    );
    w.take(s(0), (1, None), 0.0);
    w.take(s(1), (1, None), 0.0);
    // At 2 s both are in; the value of 0 s leaves at 3 s, the one of 1 s at 4 s, before the row
    // of 4 s, which so has nothing to hand; then nothing is held and no row is due at 6 s.
    assert_eq!(rows(&mut w, s(7)), [(1, 2, 2, 2)]);
    assert_eq!(w.next_due(), None);
}

/// Feeds `values` through `add`, removing the oldest whenever more than `n` are in, and checks
/// each value against a rescan of the window.
fn against_rescan<A: Aggregate<f64>>(a: A, n: usize, rescan: impl Fn(&[f64]) -> A::Output)
where
    A::Output: PartialEq + std::fmt::Debug,
{
    let mut a = a;
    let mut window: std::collections::VecDeque<f64> = Default::default();
    let mut x: u64 = 0x9e37_79b9;
    for _ in 0..500 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let v = (x % 1000) as f64;
        a.add(&v);
        window.push_back(v);
        if window.len() > n {
            let old = window.pop_front().unwrap();
            a.remove(&old);
        }
        let w: Vec<f64> = window.iter().copied().collect();
        assert_eq!(a.value(), rescan(&w));
    }
}

#[test]
fn r7_11_min_max_first_last_count_follow_a_rescan_of_the_window() {
    for n in [1, 2, 7, 50] {
        against_rescan(Min::of(|v: &f64| *v), n, |w| {
            w.iter().copied().reduce(f64::min)
        });
        against_rescan(Max::of(|v: &f64| *v), n, |w| {
            w.iter().copied().reduce(f64::max)
        });
        against_rescan(First::of(|v: &f64| *v), n, |w| w.first().copied());
        against_rescan(Last::of(|v: &f64| *v), n, |w| w.last().copied());
        against_rescan(Count::default(), n, |w| w.len() as u64);
    }
}

#[test]
fn r7_11_sum_mean_and_stddev_stay_close_to_a_rescan() {
    for n in [1, 3, 40] {
        let mut sum = Sum::of(|v: &f64| *v);
        let mut mean = Mean::of(|v: &f64| *v);
        let mut sd = StdDev::of(|v: &f64| *v);
        let mut window: std::collections::VecDeque<f64> = Default::default();
        for i in 0..400u64 {
            let v = ((i * 7919) % 101) as f64 / 3.0;
            sum.add(&v);
            mean.add(&v);
            sd.add(&v);
            window.push_back(v);
            if window.len() > n {
                let old = window.pop_front().unwrap();
                sum.remove(&old);
                mean.remove(&old);
                sd.remove(&old);
            }
            let k = window.len() as f64;
            let exact_sum: f64 = window.iter().sum();
            let exact_mean = exact_sum / k;
            let exact_sd =
                (window.iter().map(|x| (x - exact_mean).powi(2)).sum::<f64>() / k).sqrt();
            assert!((sum.value() - exact_sum).abs() < 1e-9, "sum at {i}");
            assert!(
                (mean.value().unwrap() - exact_mean).abs() < 1e-9,
                "mean at {i}"
            );
            assert!(
                (sd.value().unwrap() - exact_sd).abs() < 1e-6,
                "stddev at {i}: {:?} vs {exact_sd}",
                sd.value()
            );
        }
    }
}

#[cfg(feature = "quantiles")]
#[test]
fn r7_11_a_quantile_takes_values_off_again_on_removal() {
    use super::aggregate::Quantile;
    let mut q = Quantile::of(|v: &u64| *v, 0.5, 7).unwrap();
    for v in [10, 20, 1000, 1000, 1000] {
        q.add(&v);
    }
    assert_eq!(q.value(), Some(1000));
    for v in [10, 20, 1000] {
        q.remove(&v);
    }
    // Left: 1000, 1000.
    assert_eq!(q.value(), Some(1000));
    q.remove(&1000);
    q.remove(&1000);
    assert_eq!(q.value(), None);
    q.add(&5);
    assert_eq!(q.value(), Some(5));
    assert!(Quantile::of(|v: &u64| *v, 1.5, 7).is_none());
}

#[test]
fn r7_9_query_settings_that_cannot_work_are_typed_errors() {
    use super::{Query, Window};
    use crate::error::Error;
    use crate::pattern::Pattern;
    #[derive(Clone)]
    struct E;
    impl crate::event::Event for E {
        type Kind = ();
        fn kind(&self) {}
    }
    let q = || Query::<E>::over(Pattern::kind(()));
    for (query, what) in [
        (
            q().window(Window::sliding(Duration::ZERO)),
            "sliding window of zero",
        ),
        (
            q().window(Window::tumbling(Duration::ZERO)),
            "tumbling window of zero",
        ),
        (q().window(Window::count(0)), "count window of zero"),
        (q().every(Duration::ZERO), "`every` needs"),
        (
            q().window(Window::tumbling(Duration::from_secs(1)))
                .every(Duration::from_secs(1)),
            "tumbling window hands",
        ),
    ] {
        match query.check() {
            Err(Error::InvalidQuery { why }) => assert!(why.contains(what), "{why}"),
            other => panic!("{what}: {other:?}"),
        }
    }
    assert!(q().every(Duration::from_secs(1)).check().is_ok());
}

#[test]
fn r7_11_values_whose_time_is_up_are_released_in_batches_and_never_seen() {
    // A value past its time may stay held until the next event, row or the timer (at most the
    // slack late), but no row ever counts it.
    let mut w = Windows::new(
        Shape::Sliding(Duration::from_secs(64)),
        None,
        Count::default(),
    );
    for t in 0..10 {
        w.take(s(t), (1, None), 0.0);
    }
    assert_eq!(
        w.next_due(),
        Some(s(65)),
        "the first value's time, 64 s, plus 1 s"
    );
    // At 70 s, with no timer fired yet, the event's row counts only its own window.
    let r = w.take(s(70), (1, None), 0.0).expect("a row");
    assert_eq!((r.len, r.value), (4, 4), "values of 7, 8, 9 and 70 s");
    assert_eq!(
        w.held(),
        WindowsHeld {
            partitions: 1,
            values: 4
        }
    );
    // Alone, the timer releases what is due at its time: at 72 s the values of 7 and 8 s.
    rows(&mut w, s(72));
    assert_eq!(
        w.held(),
        WindowsHeld {
            partitions: 1,
            values: 2
        }
    );
    assert_eq!(w.next_due(), Some(s(74)), "the value of 9 s: 73 s plus 1 s");
}

// R7.10: a persistent query (R11.10) hands the rows of one time in key order, partition then
// group, whatever order its partitions were made in; sliding, count and tumbling alike.
#[cfg(feature = "checkpoint")]
#[test]
fn r7_10_a_persistent_query_hands_the_rows_of_one_time_in_key_order() {
    let keys: Vec<(u64, Option<u64>)> = (0..200u64)
        .map(|i| (i.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 40, Some(i % 3)))
        .collect();
    let mut sorted = keys.clone();
    sorted.sort_unstable();
    for (shape, every) in [
        (
            Shape::Sliding(Duration::from_secs(10)),
            Some(Duration::from_secs(2)),
        ),
        (Shape::Count(3), Some(Duration::from_secs(2))),
        (Shape::Tumbling(Duration::from_secs(2)), None),
    ] {
        let mut w = Windows::new(shape, every, Count::default()).in_key_order();
        for &key in &keys {
            w.take(s(1), key, 1.0);
        }
        let mut handed = Vec::new();
        w.advance(s(2), |r: RowAt<u64>| handed.push(r.key));
        assert_eq!(handed, sorted, "{shape:?}");
    }
}
