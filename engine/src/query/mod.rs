//! Stream queries: windows and aggregates over the events a template matches, by partition, on
//! the context's clock (SPEC R7.9 - R7.11), and joins of two streams (R7.12).
//!
//! A correlator user's other everyday question is not "did this pattern happen" but "what is the
//! mean price per symbol over the last minute", "more than five failed logins per user in five
//! minutes", "VWAP every second". A [`Query`] answers it inside a monitor, as Apama's stream
//! queries do (`from t in all Tick() within 60.0 partition by t.symbol select mean(t.price)`):
//! registered with [`Scope::query`](crate::Scope::query), it takes every event its template
//! matches into the window of the event's partition and hands *rows* (a partition's aggregate at
//! a time) to its handler, which can route them as events (so another listener of the same
//! monitor matches on them: "mean above a threshold, followed by a drop" is one monitor), emit
//! them on a channel or an output, or keep them.
//!
//! ```
//! use std::time::Duration;
//! use correlator::query::{Mean, Query, Row, Window};
//! use correlator::{Correlator, Event, Monitor, Pattern, Scope, Time};
//!
//! #[derive(Clone, Debug, PartialEq)]
//! enum Ev {
//!     Tick { symbol: u64, price: f64, at_s: u64 },
//!     Mean { symbol: u64, mean: f64 },
//! }
//! #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
//! enum Kind { Tick, Mean }
//! impl Event for Ev {
//!     type Kind = Kind;
//!     fn kind(&self) -> Kind {
//!         match self { Ev::Tick { .. } => Kind::Tick, Ev::Mean { .. } => Kind::Mean }
//!     }
//!     fn time(&self) -> Option<Time> {
//!         match self { Ev::Tick { at_s, .. } => Some(Time::from_secs(*at_s)), _ => None }
//!     }
//! }
//!
//! /// The mean price per symbol over the last 60 s, every 10 s, on the channel "means".
//! struct Means;
//! impl Monitor<Ev> for Means {
//!     fn on_load(&mut self, cx: &mut Scope<'_, Ev, Self>) {
//!         let means = cx.channel("means").expect("below max_channels");
//!         let query = Query::over(Pattern::kind(Kind::Tick))
//!             .partition_by(|e: &Ev| match e { Ev::Tick { symbol, .. } => *symbol, _ => 0 })
//!             .value(|e: &Ev| match e { Ev::Tick { price, .. } => *price, _ => 0.0 })
//!             .window(Window::sliding(Duration::from_secs(60)))
//!             .every(Duration::from_secs(10))
//!             .aggregate(Mean::of(|p: &f64| *p));
//!         cx.query(query, move |_m, cx, row: &Row<Option<f64>>| {
//!             if let Some(mean) = row.value {
//!                 cx.emit(means, Ev::Mean { symbol: row.key, mean });
//!             }
//!         })
//!         .expect("a valid query");
//!     }
//! }
//!
//! let c = Correlator::<Ev>::builder().event_time().build()?;
//! let means = c.channel("means")?;
//! let rx = c.output(means);
//! c.load(Means)?;
//! let input = c.input();
//! c.start();
//! for (symbol, price, at_s) in [(1, 10.0, 1), (1, 20.0, 5), (2, 7.0, 6), (1, 30.0, 12)] {
//!     input.send_to(c.main(), Ev::Tick { symbol, price, at_s })?;
//! }
//! c.shutdown()?;
//! // At 10 s: symbol 1's window holds 10 and 20, symbol 2's 7. The tick at 12 s comes after.
//! // (The rows of one time come in no specified order: sorted here.)
//! let mut rows: Vec<Ev> = rx.iter().collect();
//! rows.sort_by_key(|e| match e { Ev::Mean { symbol, .. } => *symbol, _ => 0 });
//! assert_eq!(
//!     rows,
//!     [Ev::Mean { symbol: 1, mean: 15.0 }, Ev::Mean { symbol: 2, mean: 7.0 }]
//! );
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # Windows (R7.9)
//! Each partition (the key [`Query::partition_by`] computes; by default the event's
//! [`Event::key`]) has its own window of *values* ([`Query::value`] computes
//! what the window keeps per event: a price, a `(price, qty)` pair, `()` to count):
//! - [`Window::sliding(d)`](Window::sliding): a value taken at clock time `t` is in the window
//!   from `t` until `t + d`, exclusive: it leaves when the clock reaches `t + d`, before an event
//!   stamped `t + d` is dispatched (timers due at or before an event's stamp fire first, R7.2).
//! - [`Window::tumbling(d)`](Window::tumbling): windows `[k*d, (k+1)*d)` on the clock; each
//!   partition's aggregate is handed when its window closes and starts afresh. Keeps no values.
//! - [`Window::count(n)`](Window::count): the partition's last `n` values (Apama's `retain n`).
//!
//! Windows run on the context's logical clock, so they work alike on ticks, external time and
//! event time; an event dispatched late under event time (the builder's
//! [`LateEvents`](crate::LateEvents) policy `Process`) enters at the clock's time, and a dropped
//! one never enters.
//!
//! # Rows (R7.10)
//! Without [`Query::every`], a sliding or count window hands a row for the event's partition each
//! time it takes an event, right after the value entered (values leaving alone hand nothing:
//! Apama also outputs when items expire; here the row of an arrival is what rules act on, and a
//! periodic view is what `every` is for). With `every(p)`, at every multiple of `p` on the clock
//! each partition with a non-empty window hands a row. A tumbling window hands its rows when it
//! closes. At one time, values leave before periodic rows are handed. The handler runs as the
//! query's listener fires: at its place in registration order among the listeners of the event
//! (R6.4), or, for rows due at a time, as a timer in due-time then creation order (R7.2). The rows
//! of one time are handed one after the other in one firing: a `quit` or `die` in the handler
//! takes effect after the last of them. Rows of different partitions at one time come in an order
//! that is the same for the same input (a replay), not otherwise specified (a persistent
//! query's, below, in key order).
//!
//! # Aggregates (R7.11)
//! [`Count`], [`Sum`], [`Mean`], [`Min`], [`Max`], [`First`], [`Last`], [`StdDev`], `Quantile`
//! (feature `quantiles`, through the `histogram` crate), tuples of them, and any
//! [`Aggregate`] of your own (`add`, `remove`, `value`): each is updated as values enter and
//! leave, never by rescanning the window; min and max keep a monotonic deque.
//!
//! # Joins (R7.12)
//! A [`Join`] (registered with [`Scope::join`](crate::Scope::join)) pairs the events of two
//! templates whose keys are equal and that were taken within its length of each other, in
//! either order; a query's rows join another stream when the handler routes them as events the
//! join's template matches.
//!
//! # Memory
//! A sliding window of `d` keeps the values inside it and those whose time ended less than
//! `d / 64` ago, or less than `p` ago with `every(p)`, `p <= d` (released in batches: at the
//! partition's next event, at the next periodic row, or by the query's one timer; no row ever
//! counts them); a partition whose sliding window empties is dropped (its storage reused by the next new partition, so a warm query allocates nothing per
//! event); a tumbling window keeps one aggregate per partition that took an event in the open
//! window; a count window its last `n` values per partition. What queries hold is in
//! [`ContextStatus::window_partitions`](crate::ContextStatus::window_partitions) and
//! [`window_values`](crate::ContextStatus::window_values).
//!
//! # Checkpoints
//! With the `checkpoint` feature, a query built `Query::persistent()` (values that serde can
//! save, an aggregate that is a `PersistentAggregate`: every built-in one) has its windows saved
//! in checkpoints and restored exactly, aggregates' states included (SPEC R11.10, R11.11); its
//! rows of one time then come in key order. A join's windows are always saved (their events go
//! through the correlator's codec). A checkpoint of a query that is not persistent is refused.
//!
//! # Design
//! `windows` owns the partitioned windows (a slab of partitions, one FIFO of expiries for a
//! sliding window, since its values leave in the order they entered across partitions); the
//! query is a listener of the context's table (its template indexed as any other), which keeps
//! one timer at the windows' next due time. `aggregate` owns the aggregates; `join` the public
//! [`Join`] and its two sides' windows (one FIFO of expiries again); `saved` the saved form of
//! both (feature `checkpoint`).
//!
//! Owns the public query types. May import the leaves, `pattern` and `error`.

mod aggregate;
pub(crate) mod join;
#[cfg(test)]
mod proptests;
#[cfg(test)]
mod reference;
#[cfg(feature = "checkpoint")]
pub(crate) mod saved;
#[cfg(test)]
mod tests;
pub(crate) mod windows;

use std::fmt;
use std::time::Duration;

#[cfg(feature = "checkpoint")]
pub use aggregate::PersistentAggregate;
#[cfg(feature = "quantiles")]
pub use aggregate::Quantile;
pub use aggregate::{Aggregate, Count, First, Last, Max, Mean, Min, StdDev, Sum};
pub use join::Join;

use crate::error::Error;
use crate::event::Event;
use crate::pattern::Pattern;
use crate::time::Time;
use windows::Shape;

/// A function computing a key of an event (a partition, a group, a join's key).
pub(crate) type KeyFn<E> = Box<dyn Fn(&E) -> u64 + Send>;

/// The window of a [`Query`] (SPEC R7.9): sliding or tumbling over time, or the last `n` values.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Window(pub(crate) Shape);

impl Window {
    /// A value stays for `d` from the time it was taken (exclusive).
    pub fn sliding(d: Duration) -> Self {
        Self(Shape::Sliding(d))
    }

    /// Windows `[k*d, (k+1)*d)` on the clock, each handed when it closes.
    pub fn tumbling(d: Duration) -> Self {
        Self(Shape::Tumbling(d))
    }

    /// The last `n` values of each partition (Apama's `retain n`).
    pub fn count(n: usize) -> Self {
        Self(Shape::Count(n))
    }
}

/// A row a query hands its handler: one partition's aggregate at a time (SPEC R7.10).
#[derive(Clone, Debug, PartialEq)]
pub struct Row<O> {
    /// The partition's key.
    pub key: u64,
    /// The group's key, for a query with [`Query::group_by`].
    pub group: Option<u64>,
    /// The clock time of the row: the event's time, the periodic row's time, or the end of the
    /// tumbling window.
    pub time: Time,
    /// The values in the window (tumbling: the values the closing window took).
    pub len: usize,
    /// The aggregate.
    pub value: O,
}

/// A stream query (SPEC R7.9 - R7.11): a template, a partition key, the value a window keeps per
/// event, a window, when rows are handed, and an aggregate. Built from
/// [`Query::over`], registered with [`Scope::query`](crate::Scope::query); see the
/// [module docs](self) for a run example.
///
/// Defaults: partitioned by [`Event::key`] (0 for events without one), the
/// value `()`, a sliding window of one minute, a row per event, and [`Count`].
pub struct Query<E: Event, P = (), A = Count> {
    pub(crate) template: Pattern<E>,
    pub(crate) partition: KeyFn<E>,
    pub(crate) group: Option<KeyFn<E>>,
    pub(crate) value: Box<dyn Fn(&E) -> P + Send>,
    pub(crate) window: Window,
    pub(crate) every: Option<Duration>,
    pub(crate) aggregate: A,
    /// Whether a checkpoint saves its windows ([`Query::persistent`]).
    #[cfg(feature = "checkpoint")]
    pub(crate) persist: Persisting<P, A>,
}

/// Whether a query's windows are saved in checkpoints.
#[cfg(feature = "checkpoint")]
pub(crate) enum Persisting<P, A> {
    No,
    /// [`Query::persistent`] was called, and then `value` or `aggregate`, which changed the
    /// types it had captured the save of: refused at registration.
    Lost,
    Yes(saved::WindowsCodec<P, A>),
}

#[cfg(feature = "checkpoint")]
impl<P, A> Persisting<P, A> {
    /// What a query whose value or aggregate type changed keeps of it.
    fn retyped<Q, B>(&self) -> Persisting<Q, B> {
        match self {
            Self::No => Persisting::No,
            Self::Lost | Self::Yes(_) => Persisting::Lost,
        }
    }
}

impl<E: Event, P, A> fmt::Debug for Query<E, P, A> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Query")
            .field("window", &self.window)
            .field("every", &self.every)
            .finish_non_exhaustive()
    }
}

impl<E: Event> Query<E> {
    /// A query over the events `template` matches (its kind, key, fields and filters, R6.10).
    pub fn over(template: Pattern<E>) -> Self {
        Self {
            template,
            partition: Box::new(|e: &E| e.key().unwrap_or(0)),
            group: None,
            value: Box::new(|_: &E| ()),
            window: Window::sliding(Duration::from_secs(60)),
            every: None,
            aggregate: Count::default(),
            #[cfg(feature = "checkpoint")]
            persist: Persisting::No,
        }
    }
}

impl<E: Event, P: Send + 'static, A: Aggregate<P>> Query<E, P, A> {
    /// Partitions the events by `f`: each partition has its own window and aggregate (Apama's
    /// `partition by`).
    pub fn partition_by(mut self, f: impl Fn(&E) -> u64 + Send + 'static) -> Self {
        self.partition = Box::new(f);
        self
    }

    /// Groups each partition's events by `f`: each group of a partition has its own window and
    /// aggregate, and its rows carry [`Row::group`] (Apama's `group by`; for a count window, the
    /// last `n` values of the group: see SPEC's decision "Stream queries").
    pub fn group_by(mut self, f: impl Fn(&E) -> u64 + Send + 'static) -> Self {
        self.group = Some(Box::new(f));
        self
    }

    /// What the window keeps of each event. Sets the aggregate back to [`Count`] (the
    /// aggregates are typed by the value): call [`aggregate`](Self::aggregate) after it.
    pub fn value<Q: Send + 'static>(self, f: impl Fn(&E) -> Q + Send + 'static) -> Query<E, Q> {
        Query {
            template: self.template,
            partition: self.partition,
            group: self.group,
            value: Box::new(f),
            window: self.window,
            every: self.every,
            aggregate: Count::default(),
            #[cfg(feature = "checkpoint")]
            persist: self.persist.retyped(),
        }
    }

    /// The window.
    pub fn window(mut self, window: Window) -> Self {
        self.window = window;
        self
    }

    /// Hands a row for every partition with a non-empty window at every multiple of `period` on
    /// the clock, instead of one per event (sliding and count windows).
    pub fn every(mut self, period: Duration) -> Self {
        self.every = Some(period);
        self
    }

    /// The aggregate: a built-in one, a tuple of them, or your own.
    pub fn aggregate<B: Aggregate<P>>(self, aggregate: B) -> Query<E, P, B> {
        Query {
            template: self.template,
            partition: self.partition,
            group: self.group,
            value: self.value,
            window: self.window,
            every: self.every,
            aggregate,
            #[cfg(feature = "checkpoint")]
            persist: self.persist.retyped(),
        }
    }

    /// The query's settings, checked: a window or period of zero length, a count window of zero
    /// values, and `every` on a tumbling window are [`Error::InvalidQuery`].
    pub(crate) fn check(&self) -> Result<(), Error> {
        let why = match (self.window.0, self.every) {
            (Shape::Sliding(d), _) if d.is_zero() => {
                "a sliding window of zero length holds nothing"
            }
            (Shape::Tumbling(d), _) if d.is_zero() => {
                "a tumbling window of zero length never closes"
            }
            (Shape::Count(0), _) => "a count window of zero values holds nothing",
            (_, Some(p)) if p.is_zero() => "`every` needs a period above zero",
            (Shape::Tumbling(_), Some(_)) => {
                "a tumbling window hands its rows when it closes: `every` applies to sliding and \
                 count windows"
            }
            #[cfg(feature = "checkpoint")]
            _ if matches!(self.persist, Persisting::Lost) => {
                "`persistent` must come after `value` and `aggregate`: they change the types it \
                 saves"
            }
            _ => return Ok(()),
        };
        Err(Error::InvalidQuery { why })
    }
}

#[cfg(feature = "checkpoint")]
impl<E, P, A> Query<E, P, A>
where
    E: Event,
    P: serde::Serialize + serde::de::DeserializeOwned + Send + 'static,
    A: PersistentAggregate<P>,
{
    /// Makes checkpoints save the query's windows (feature `checkpoint`; SPEC R11.10): every
    /// partition's values with their times and its aggregate's state
    /// ([`PersistentAggregate`]), so that a recovered process hands the rows the uncrashed one
    /// would have. Call it last: [`value`](Self::value) and [`aggregate`](Self::aggregate)
    /// change the types it saves, and a query where either came after it is refused at
    /// registration with [`Error::InvalidQuery`]. A checkpoint of a correlator holding a query
    /// that is not persistent fails with
    /// [`CheckpointError::Unsupported`](crate::checkpoint::CheckpointError::Unsupported).
    ///
    /// A persistent query hands the rows of one time in key order (partition, then group),
    /// where another query's order is unspecified (R7.10): the order must be the same after a
    /// recovery, for the emit ids of what its handler sends (R11.14).
    ///
    /// Its instance's monitor registers it again in
    /// [`Persistent::on_restore`](crate::Persistent::on_restore), with the same window and
    /// period (the recovery checks them).
    pub fn persistent(mut self) -> Self {
        self.persist = Persisting::Yes(saved::WindowsCodec::new());
        self
    }
}
