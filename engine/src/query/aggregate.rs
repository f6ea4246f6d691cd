//! Incremental aggregates over a window's values (SPEC R7.11): the [`Aggregate`] trait and the
//! built-in ones.
//!
//! Each is kept up to date as values enter and leave a window, in O(1) amortised per value:
//! no aggregate rescans its window. [`Min`] and [`Max`] keep a monotonic deque (the values that
//! can still become the extreme, in window order), which works because a window's values leave
//! in the order they entered (oldest first: the contract of [`Aggregate::remove`]).
//!
//! Owns the aggregates. May import nothing of the engine.

use std::collections::VecDeque;

/// Invokes the macro `$m` for tuples of one to six aggregates, each type with its field index:
/// the tuple impls of `Aggregate` here and of `PersistentAggregate` in `persist`.
macro_rules! for_tuples {
    ($m:ident) => {
        $m!(A 0);
        $m!(A 0, B 1);
        $m!(A 0, B 1, C 2);
        $m!(A 0, B 1, C 2, D 3);
        $m!(A 0, B 1, C 2, D 3, G 4);
        $m!(A 0, B 1, C 2, D 3, G 4, H 5);
    };
}

#[cfg(feature = "checkpoint")]
mod persist;
#[cfg(feature = "checkpoint")]
pub use persist::PersistentAggregate;

/// An aggregate kept incrementally over the values of one window (SPEC R7.11).
///
/// The engine clones the query's aggregate for each new partition (so a value starts as the
/// initial one), calls [`add`](Self::add) for every value that enters the window and
/// [`remove`](Self::remove) for every value that leaves it, **oldest first**: `remove` is always
/// called with the oldest value added and not yet removed. A tumbling window never calls
/// `remove`: it starts each window from a fresh clone.
///
/// Tuples of up to six aggregates are aggregates (their output is the tuple of outputs). A
/// user-defined aggregate implements the trait:
///
/// ```
/// use correlator::query::Aggregate;
///
/// /// How many values were above a limit.
/// #[derive(Clone)]
/// struct Above { limit: f64, n: u64 }
///
/// impl Aggregate<f64> for Above {
///     type Output = u64;
///     fn add(&mut self, v: &f64) {
///         self.n += u64::from(*v > self.limit);
///     }
///     fn remove(&mut self, v: &f64) {
///         self.n -= u64::from(*v > self.limit);
///     }
///     fn value(&self) -> u64 {
///         self.n
///     }
/// }
///
/// let mut a = Above { limit: 10.0, n: 0 };
/// a.add(&12.0);
/// a.add(&3.0);
/// a.remove(&12.0);
/// assert_eq!(a.value(), 0);
/// ```
pub trait Aggregate<P>: Clone + Send + 'static {
    /// What the aggregate reports.
    type Output;
    /// A value entered the window.
    fn add(&mut self, value: &P);
    /// The oldest value in the window left it.
    fn remove(&mut self, value: &P);
    /// The aggregate of the values in the window now.
    fn value(&self) -> Self::Output;
}

/// The number of values in the window (a `u64`).
///
/// ```
/// use correlator::query::{Aggregate, Count};
///
/// let mut c = Count::default();
/// c.add(&'a');
/// c.add(&'b');
/// c.remove(&'a');
/// assert_eq!(Aggregate::<char>::value(&c), 1);
/// ```
#[derive(Clone, Copy, Debug, Default)]
pub struct Count(u64);

impl<P> Aggregate<P> for Count {
    type Output = u64;
    fn add(&mut self, _: &P) {
        self.0 += 1;
    }
    fn remove(&mut self, _: &P) {
        self.0 -= 1;
    }
    fn value(&self) -> u64 {
        self.0
    }
}

/// Declares an aggregate over one `f64` read from each value by a function.
macro_rules! of_fn {
    ($(#[$doc:meta])* $name:ident { $($field:ident: $ty:ty = $init:expr),* $(,)? }) => {
        $(#[$doc])*
        #[derive(Clone)]
        pub struct $name<F> {
            f: F,
            $($field: $ty,)*
        }

        impl<F> $name<F> {
            /// The aggregate of `f(value)` over the window's values.
            pub fn of<P>(f: F) -> Self
            where
                F: Fn(&P) -> f64,
            {
                Self { f, $($field: $init,)* }
            }
        }
    };
}

of_fn!(
    /// The sum of `f(value)` (an `f64`; 0 for an empty window): `+=` when a value enters, `-=`
    /// when it leaves, so it carries the rounding of that sequence of operations.
    ///
    /// ```
    /// use correlator::query::{Aggregate, Sum};
    ///
    /// let mut s = Sum::of(|v: &(f64, f64)| v.0 * v.1);
    /// s.add(&(10.0, 2.0));
    /// s.add(&(11.0, 1.0));
    /// s.remove(&(10.0, 2.0));
    /// assert_eq!(s.value(), 11.0);
    /// ```
    Sum { sum: f64 = 0.0 }
);

impl<P, F: Fn(&P) -> f64 + Clone + Send + 'static> Aggregate<P> for Sum<F> {
    type Output = f64;
    fn add(&mut self, v: &P) {
        self.sum += (self.f)(v);
    }
    fn remove(&mut self, v: &P) {
        self.sum -= (self.f)(v);
    }
    fn value(&self) -> f64 {
        self.sum
    }
}

of_fn!(
    /// The mean of `f(value)`, `None` for an empty window.
    ///
    /// ```
    /// use correlator::query::{Aggregate, Mean};
    ///
    /// let mut m = Mean::of(|v: &f64| *v);
    /// assert_eq!(m.value(), None);
    /// m.add(&1.0);
    /// m.add(&3.0);
    /// assert_eq!(m.value(), Some(2.0));
    /// ```
    Mean { sum: f64 = 0.0, n: u64 = 0 }
);

impl<P, F: Fn(&P) -> f64 + Clone + Send + 'static> Aggregate<P> for Mean<F> {
    type Output = Option<f64>;
    fn add(&mut self, v: &P) {
        self.sum += (self.f)(v);
        self.n += 1;
    }
    fn remove(&mut self, v: &P) {
        self.sum -= (self.f)(v);
        self.n -= 1;
        if self.n == 0 {
            // No rounding left over from values that are gone.
            self.sum = 0.0;
        }
    }
    fn value(&self) -> Option<f64> {
        (self.n > 0).then(|| self.sum / self.n as f64)
    }
}

of_fn!(
    /// The population standard deviation of `f(value)` (Welford's running mean and sum of
    /// squared deviations, updated on removal too), `None` for an empty window.
    ///
    /// ```
    /// use correlator::query::{Aggregate, StdDev};
    ///
    /// let mut s = StdDev::of(|v: &f64| *v);
    /// for v in [2.0, 4.0, 4.0, 4.0, 5.0, 5.0, 7.0, 9.0] {
    ///     s.add(&v);
    /// }
    /// assert!((s.value().unwrap() - 2.0).abs() < 1e-12);
    /// ```
    StdDev { n: u64 = 0, mean: f64 = 0.0, m2: f64 = 0.0 }
);

impl<P, F: Fn(&P) -> f64 + Clone + Send + 'static> Aggregate<P> for StdDev<F> {
    type Output = Option<f64>;
    fn add(&mut self, v: &P) {
        let x = (self.f)(v);
        self.n += 1;
        let d = x - self.mean;
        self.mean += d / self.n as f64;
        self.m2 += d * (x - self.mean);
    }
    fn remove(&mut self, v: &P) {
        let x = (self.f)(v);
        self.n -= 1;
        if self.n == 0 {
            self.mean = 0.0;
            self.m2 = 0.0;
            return;
        }
        let d = x - self.mean;
        self.mean -= d / self.n as f64;
        // One value left: its deviation is exactly zero (no residue of the values gone).
        self.m2 = if self.n == 1 {
            0.0
        } else {
            (self.m2 - d * (x - self.mean)).max(0.0)
        };
    }
    fn value(&self) -> Option<f64> {
        (self.n > 0).then(|| (self.m2 / self.n as f64).sqrt())
    }
}

/// A monotonic deque: the values that can still become the window's extreme, with their
/// positions, in window order. `keep(a, b)` says whether an older `a` stays in front of a newer
/// `b` (for a minimum: `a < b`).
#[derive(Clone, Debug)]
struct Monotonic<T> {
    values: VecDeque<(u64, T)>,
    /// Positions of the next value to enter and the next to leave.
    added: u64,
    removed: u64,
}

impl<T: PartialOrd + Clone> Monotonic<T> {
    fn new() -> Self {
        Self {
            values: VecDeque::new(),
            added: 0,
            removed: 0,
        }
    }

    fn add(&mut self, x: T, keep: fn(&T, &T) -> bool) {
        while self.values.back().is_some_and(|(_, b)| !keep(b, &x)) {
            self.values.pop_back();
        }
        self.values.push_back((self.added, x));
        self.added += 1;
    }

    fn remove(&mut self) {
        if self
            .values
            .front()
            .is_some_and(|&(at, _)| at == self.removed)
        {
            self.values.pop_front();
        }
        self.removed += 1;
    }

    fn value(&self) -> Option<T> {
        self.values.front().map(|(_, x)| x.clone())
    }
}

/// Declares `Min` or `Max` over a monotonic deque.
macro_rules! extreme {
    ($(#[$doc:meta])* $name:ident, $keep:expr) => {
        $(#[$doc])*
        #[derive(Clone)]
        pub struct $name<F, T = f64> {
            f: F,
            deque: Monotonic<T>,
        }

        impl<F, T: PartialOrd + Clone> $name<F, T> {
            /// The aggregate of `f(value)` over the window's values (any ordered value: an `f64`,
            /// an integer, a tuple).
            pub fn of<P>(f: F) -> Self
            where
                F: Fn(&P) -> T,
            {
                Self { f, deque: Monotonic::new() }
            }
        }

        impl<P, T, F> Aggregate<P> for $name<F, T>
        where
            T: PartialOrd + Clone + Send + 'static,
            F: Fn(&P) -> T + Clone + Send + 'static,
        {
            type Output = Option<T>;
            fn add(&mut self, v: &P) {
                self.deque.add((self.f)(v), $keep);
            }
            fn remove(&mut self, _: &P) {
                self.deque.remove();
            }
            fn value(&self) -> Option<T> {
                self.deque.value()
            }
        }
    };
}

extreme!(
    /// The minimum of `f(value)`, `None` for an empty window; O(1) amortised per value (a
    /// monotonic deque: no rescan when the minimum leaves).
    ///
    /// ```
    /// use correlator::query::{Aggregate, Min};
    ///
    /// let mut m = Min::of(|v: &f64| *v);
    /// for v in [3.0, 1.0, 2.0] {
    ///     m.add(&v);
    /// }
    /// m.remove(&3.0);
    /// assert_eq!(m.value(), Some(1.0));
    /// m.remove(&1.0);
    /// assert_eq!(m.value(), Some(2.0));
    /// ```
    Min,
    |older, newer| older < newer
);

extreme!(
    /// The maximum of `f(value)`, `None` for an empty window; O(1) amortised per value.
    ///
    /// ```
    /// use correlator::query::{Aggregate, Max};
    ///
    /// // Any ordered value: here the price in cents, an integer.
    /// let mut m = Max::of(|v: &(u64, u32)| v.0);
    /// for v in [(100, 1), (300, 2), (200, 1)] {
    ///     m.add(&v);
    /// }
    /// m.remove(&(100, 1));
    /// m.remove(&(300, 2));
    /// assert_eq!(m.value(), Some(200));
    /// ```
    Max,
    |older, newer| older > newer
);

/// `f` of the oldest value in the window (any cloneable value), `None` for an empty window. It
/// keeps the window's values of `f` (the oldest leaves first).
///
/// ```
/// use correlator::query::{Aggregate, First};
///
/// let mut f = First::of(|v: &f64| *v);
/// f.add(&1.0);
/// f.add(&2.0);
/// f.remove(&1.0);
/// assert_eq!(f.value(), Some(2.0));
/// ```
#[derive(Clone)]
pub struct First<F, T = f64> {
    f: F,
    values: VecDeque<T>,
}

impl<F, T> First<F, T> {
    /// The aggregate of `f(value)` over the window's values.
    pub fn of<P>(f: F) -> Self
    where
        F: Fn(&P) -> T,
    {
        Self {
            f,
            values: VecDeque::new(),
        }
    }
}

impl<P, T, F> Aggregate<P> for First<F, T>
where
    T: Clone + Send + 'static,
    F: Fn(&P) -> T + Clone + Send + 'static,
{
    type Output = Option<T>;
    fn add(&mut self, v: &P) {
        self.values.push_back((self.f)(v));
    }
    fn remove(&mut self, _: &P) {
        self.values.pop_front();
    }
    fn value(&self) -> Option<T> {
        self.values.front().cloned()
    }
}

/// `f` of the newest value in the window (any cloneable value), `None` for an empty window (the
/// newest leaves last, so this keeps one value and a count). A row handed for an event comes
/// right after the event entered, so `Last` of what identifies the event names the event that
/// handed the row.
///
/// ```
/// use correlator::query::{Aggregate, Last};
///
/// let mut l = Last::of(|v: &(u64, f64)| v.0);
/// l.add(&(7, 1.0));
/// l.add(&(8, 2.0));
/// l.remove(&(7, 1.0));
/// assert_eq!(l.value(), Some(8));
/// ```
#[derive(Clone)]
pub struct Last<F, T = f64> {
    f: F,
    last: Option<T>,
    n: u64,
}

impl<F, T> Last<F, T> {
    /// The aggregate of `f(value)` over the window's values.
    pub fn of<P>(f: F) -> Self
    where
        F: Fn(&P) -> T,
    {
        Self {
            f,
            last: None,
            n: 0,
        }
    }
}

impl<P, T, F> Aggregate<P> for Last<F, T>
where
    T: Clone + Send + 'static,
    F: Fn(&P) -> T + Clone + Send + 'static,
{
    type Output = Option<T>;
    fn add(&mut self, v: &P) {
        self.last = Some((self.f)(v));
        self.n += 1;
    }
    fn remove(&mut self, _: &P) {
        self.n -= 1;
        if self.n == 0 {
            self.last = None;
        }
    }
    fn value(&self) -> Option<T> {
        self.last.clone()
    }
}

/// Quantiles of `f(value)` (a `u64`: a latency in microseconds, a price in cents) through the
/// [`histogram`] crate's log-linear histogram (feature `quantiles`): relative error at most
/// `2^-grouping_power`, memory `(65 - grouping_power) * 2^grouping_power` counters per partition
/// whatever the window's length. A value that leaves is taken off its bucket again, so sliding
/// windows work. [`value`](Aggregate::value) is the quantile `q` (0.0 ..= 1.0), as the lower
/// bound of its bucket, `None` for an empty window.
///
/// ```
/// use correlator::query::{Aggregate, Quantile};
///
/// let mut p99 = Quantile::of(|v: &u64| *v, 0.99, 7).expect("q in 0..=1, grouping power < 64");
/// for v in 1..=1000 {
///     p99.add(&v);
/// }
/// let q = p99.value().unwrap();
/// assert!((980..=990).contains(&q), "{q}");
/// ```
#[cfg(feature = "quantiles")]
#[derive(Clone)]
pub struct Quantile<F> {
    f: F,
    q: f64,
    histogram: histogram::Histogram,
    n: u64,
}

#[cfg(feature = "quantiles")]
impl<F> Quantile<F> {
    /// The quantile `q` of `f(value)`, at a relative error of `2^-grouping_power`. `None` when
    /// `q` is outside `0.0 ..= 1.0` or the histogram cannot be made with that grouping power
    /// (it must be below 64).
    pub fn of<P>(f: F, q: f64, grouping_power: u8) -> Option<Self>
    where
        F: Fn(&P) -> u64,
    {
        if !(0.0..=1.0).contains(&q) {
            return None;
        }
        let histogram = histogram::Histogram::new(grouping_power, 64).ok()?;
        Some(Self {
            f,
            q,
            histogram,
            n: 0,
        })
    }
}

#[cfg(feature = "quantiles")]
impl<P, F: Fn(&P) -> u64 + Clone + Send + 'static> Aggregate<P> for Quantile<F> {
    type Output = Option<u64>;
    fn add(&mut self, v: &P) {
        // Every u64 is in range for a max value power of 64.
        let _ = self.histogram.increment((self.f)(v));
        self.n += 1;
    }
    fn remove(&mut self, v: &P) {
        // The crate's counters wrap: adding `u64::MAX` takes one off the value's bucket.
        let _ = self.histogram.add((self.f)(v), u64::MAX);
        self.n -= 1;
    }
    fn value(&self) -> Option<u64> {
        if self.n == 0 {
            return None;
        }
        let bucket = self.histogram.quantile_bucket(self.q).ok()??;
        Some(bucket.start())
    }
}

/// Tuples of aggregates are aggregates.
macro_rules! tuple {
    ($($a:ident $i:tt),+) => {
        impl<P, $($a: Aggregate<P>),+> Aggregate<P> for ($($a,)+) {
            type Output = ($($a::Output,)+);
            fn add(&mut self, v: &P) {
                $(self.$i.add(v);)+
            }
            fn remove(&mut self, v: &P) {
                $(self.$i.remove(v);)+
            }
            fn value(&self) -> Self::Output {
                ($(self.$i.value(),)+)
            }
        }
    };
}

for_tuples!(tuple);
