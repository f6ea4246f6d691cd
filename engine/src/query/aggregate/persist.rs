//! Aggregates a checkpoint can save (SPEC R11.10, feature `checkpoint`): the
//! [`PersistentAggregate`] trait and its implementations for the built-in aggregates.
//!
//! An aggregate is its functions (closures: not data) and the state `add` and `remove` changed.
//! A checkpoint saves the state alone, exactly as it is: not the window's values added again,
//! since a sum that took values off carries the rounding of those subtractions, and a restored
//! query must hand the rows it would have handed without the crash. A restored query is
//! registered again with its functions (R11.11); each partition's aggregate is a clone of the
//! new query's, given the saved state.
//!
//! May import nothing of the engine (it is a part of `aggregate`).

use std::collections::VecDeque;

use serde::de::DeserializeOwned;
use serde::Serialize;

use super::{Aggregate, Count, First, Last, Max, Mean, Min, Monotonic, StdDev, Sum};

/// An aggregate whose state a checkpoint saves (feature `checkpoint`; SPEC R11.10): what
/// [`add`](Aggregate::add) and [`remove`](Aggregate::remove) changed, not the functions it was
/// made with. The aggregate of a [`Query::persistent`](super::super::Query::persistent) query
/// must be one. Every built-in aggregate is (with a value type that serde can save, for
/// [`Min`], [`Max`], [`First`] and [`Last`]), and so are tuples of them.
///
/// [`restore`](Self::restore) is called on a clone of the aggregate that the recovered program
/// registered, so what is not saved (a closure, a limit) comes from there.
///
/// ```
/// use correlator::query::{Aggregate, PersistentAggregate};
///
/// /// How many values were above a limit.
/// #[derive(Clone)]
/// struct Above { limit: f64, n: u64 }
///
/// impl Aggregate<f64> for Above {
///     type Output = u64;
///     fn add(&mut self, v: &f64) { self.n += u64::from(*v > self.limit); }
///     fn remove(&mut self, v: &f64) { self.n -= u64::from(*v > self.limit); }
///     fn value(&self) -> u64 { self.n }
/// }
///
/// impl PersistentAggregate<f64> for Above {
///     type Saved = u64;
///     fn save(&self) -> u64 { self.n }
///     fn restore(&mut self, n: u64) -> Result<(), String> { self.n = n; Ok(()) }
/// }
///
/// let mut a = Above { limit: 10.0, n: 0 };
/// a.add(&12.0);
/// let mut b = Above { limit: 10.0, n: 0 };
/// b.restore(a.save())?;
/// assert_eq!(b.value(), 1);
/// # Ok::<(), String>(())
/// ```
pub trait PersistentAggregate<P>: Aggregate<P> {
    /// The saved state.
    type Saved: Serialize + DeserializeOwned;
    /// Its state now.
    fn save(&self) -> Self::Saved;
    /// Takes the state `saved` (`self` is a fresh clone of the registered aggregate).
    ///
    /// # Errors
    /// `saved` does not fit this aggregate (one made with other settings): the message says
    /// why, and the recovery fails with
    /// [`CheckpointError::Mismatch`](crate::checkpoint::CheckpointError::Mismatch).
    fn restore(&mut self, saved: Self::Saved) -> Result<(), String>;
}

impl<P> PersistentAggregate<P> for Count {
    type Saved = u64;
    fn save(&self) -> u64 {
        self.0
    }
    fn restore(&mut self, saved: u64) -> Result<(), String> {
        self.0 = saved;
        Ok(())
    }
}

impl<P, F: Fn(&P) -> f64 + Clone + Send + 'static> PersistentAggregate<P> for Sum<F> {
    type Saved = f64;
    fn save(&self) -> f64 {
        self.sum
    }
    fn restore(&mut self, saved: f64) -> Result<(), String> {
        self.sum = saved;
        Ok(())
    }
}

impl<P, F: Fn(&P) -> f64 + Clone + Send + 'static> PersistentAggregate<P> for Mean<F> {
    type Saved = (f64, u64);
    fn save(&self) -> (f64, u64) {
        (self.sum, self.n)
    }
    fn restore(&mut self, (sum, n): (f64, u64)) -> Result<(), String> {
        (self.sum, self.n) = (sum, n);
        Ok(())
    }
}

impl<P, F: Fn(&P) -> f64 + Clone + Send + 'static> PersistentAggregate<P> for StdDev<F> {
    type Saved = (u64, f64, f64);
    fn save(&self) -> (u64, f64, f64) {
        (self.n, self.mean, self.m2)
    }
    fn restore(&mut self, (n, mean, m2): (u64, f64, f64)) -> Result<(), String> {
        (self.n, self.mean, self.m2) = (n, mean, m2);
        Ok(())
    }
}

/// A monotonic deque's state: its values with their positions, and the two counters.
type MonotonicSaved<T> = (Vec<(u64, T)>, u64, u64);

impl<T: Clone> Monotonic<T> {
    fn saved(&self) -> MonotonicSaved<T> {
        (
            self.values.iter().cloned().collect(),
            self.added,
            self.removed,
        )
    }

    fn restored(&mut self, (values, added, removed): MonotonicSaved<T>) {
        self.values = VecDeque::from(values);
        self.added = added;
        self.removed = removed;
    }
}

/// `Min` and `Max` save their monotonic deque.
macro_rules! extreme {
    ($name:ident) => {
        impl<P, T, F> PersistentAggregate<P> for $name<F, T>
        where
            T: PartialOrd + Clone + Send + Serialize + DeserializeOwned + 'static,
            F: Fn(&P) -> T + Clone + Send + 'static,
        {
            type Saved = MonotonicSaved<T>;
            fn save(&self) -> Self::Saved {
                self.deque.saved()
            }
            fn restore(&mut self, saved: Self::Saved) -> Result<(), String> {
                self.deque.restored(saved);
                Ok(())
            }
        }
    };
}

extreme!(Min);
extreme!(Max);

impl<P, T, F> PersistentAggregate<P> for First<F, T>
where
    T: Clone + Send + Serialize + DeserializeOwned + 'static,
    F: Fn(&P) -> T + Clone + Send + 'static,
{
    type Saved = Vec<T>;
    fn save(&self) -> Vec<T> {
        self.values.iter().cloned().collect()
    }
    fn restore(&mut self, saved: Vec<T>) -> Result<(), String> {
        self.values = VecDeque::from(saved);
        Ok(())
    }
}

impl<P, T, F> PersistentAggregate<P> for Last<F, T>
where
    T: Clone + Send + Serialize + DeserializeOwned + 'static,
    F: Fn(&P) -> T + Clone + Send + 'static,
{
    type Saved = (Option<T>, u64);
    fn save(&self) -> (Option<T>, u64) {
        (self.last.clone(), self.n)
    }
    fn restore(&mut self, (last, n): (Option<T>, u64)) -> Result<(), String> {
        (self.last, self.n) = (last, n);
        Ok(())
    }
}

/// A quantile saves its value count and its histogram's non-zero buckets, `(index, count)`.
#[cfg(feature = "quantiles")]
impl<P, F: Fn(&P) -> u64 + Clone + Send + 'static> PersistentAggregate<P> for super::Quantile<F> {
    type Saved = (u64, Vec<(u32, u64)>);
    fn save(&self) -> Self::Saved {
        let buckets = self.histogram.as_slice().iter().enumerate();
        let nonzero = buckets.filter(|(_, &n)| n != 0);
        (self.n, nonzero.map(|(i, &n)| (i as u32, n)).collect())
    }
    fn restore(&mut self, (n, buckets): Self::Saved) -> Result<(), String> {
        let counts = self.histogram.as_mut_slice();
        let len = counts.len();
        if buckets.iter().any(|&(i, _)| i as usize >= len) {
            return Err(format!(
                "a quantile's histogram was saved with more than its {len} buckets (another \
                 grouping power)"
            ));
        }
        counts.fill(0);
        for (i, count) in buckets {
            counts[i as usize] = count;
        }
        self.n = n;
        Ok(())
    }
}

/// Tuples of persistent aggregates save the tuple of their states.
macro_rules! tuple {
    ($($a:ident $i:tt),+) => {
        impl<P, $($a: PersistentAggregate<P>),+> PersistentAggregate<P> for ($($a,)+) {
            type Saved = ($($a::Saved,)+);
            fn save(&self) -> Self::Saved {
                ($(self.$i.save(),)+)
            }
            fn restore(&mut self, saved: Self::Saved) -> Result<(), String> {
                $(self.$i.restore(saved.$i)?;)+
                Ok(())
            }
        }
    };
}

for_tuples!(tuple);

#[cfg(test)]
mod tests {
    use super::*;

    /// Feeds `a` a sequence of values entering and leaving (a sliding window of 3), saves it
    /// through postcard and restores a fresh clone: both report the same, and go on alike.
    fn round_trip<A>(fresh: A) -> A
    where
        A: PersistentAggregate<f64>,
        A::Output: PartialEq + std::fmt::Debug,
    {
        let values = [0.1, 0.7, 1e16, 0.3, 2.5, 0.2, 9.0];
        let mut a = fresh.clone();
        for (i, v) in values.iter().enumerate() {
            a.add(v);
            if i >= 3 {
                a.remove(&values[i - 3]);
            }
        }
        let bytes = postcard::to_allocvec(&a.save()).expect("encode");
        let mut b = fresh;
        b.restore(postcard::from_bytes(&bytes).expect("decode"))
            .expect("restore");
        assert_eq!(a.value(), b.value());
        a.add(&4.0);
        b.add(&4.0);
        a.remove(&values[4]);
        b.remove(&values[4]);
        assert_eq!(a.value(), b.value());
        b
    }

    // R11.10: every built-in aggregate (and a tuple) restores exactly the state it saved.
    #[test]
    fn r11_10_built_in_aggregates_restore_their_state() {
        round_trip(Count::default());
        round_trip(Mean::of(|v: &f64| *v));
        round_trip(StdDev::of(|v: &f64| *v));
        round_trip(Min::of(|v: &f64| *v));
        round_trip(Max::of(|v: &f64| *v));
        round_trip(First::of(|v: &f64| *v));
        round_trip(Last::of(|v: &f64| *v));
        round_trip((
            Count::default(),
            Sum::of(|v: &f64| *v),
            Max::of(|v: &f64| *v),
        ));
        #[cfg(feature = "quantiles")]
        {
            let q = super::super::Quantile::of(|v: &f64| (*v * 10.0) as u64, 0.5, 4);
            round_trip(q.expect("a valid quantile"));
        }
    }

    // R11.10: a sum saved after values left it keeps the rounding those subtractions left,
    // which adding the window's values again would not: why the state is saved, not rebuilt.
    #[test]
    fn r11_10_a_sum_keeps_its_rounding() {
        let restored = round_trip(Sum::of(|v: &f64| *v));
        // The window holds 0.2, 9.0 and 4.0 (see `round_trip`).
        let mut rebuilt = Sum::of(|v: &f64| *v);
        for v in [0.2, 9.0, 4.0] {
            rebuilt.add(&v);
        }
        assert_eq!(rebuilt.value(), 13.2);
        assert_ne!(restored.value(), rebuilt.value());
    }

    // R11.10: a quantile's histogram saved with another grouping power is refused.
    #[cfg(feature = "quantiles")]
    #[test]
    fn r11_10_a_quantile_of_other_buckets_is_refused() {
        let mut wide = super::super::Quantile::of(|v: &u64| *v, 0.5, 10).expect("valid");
        wide.add(&u64::MAX);
        let mut narrow = super::super::Quantile::of(|v: &u64| *v, 0.5, 2).expect("valid");
        assert!(narrow.restore(wide.save()).is_err());
    }
}
