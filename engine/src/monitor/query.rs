//! `Scope::query` and `Scope::join`: registering a stream query (R7.9 - R7.11) or a join (R7.12),
//! and the listeners that run them with their monitor type erased.
//!
//! Owns the erased query and join listeners. May import the leaves, `entry`, `pattern`, `query` and
//! `error`.

use std::marker::PhantomData;

use crate::entry::{Effects, Mode, QueryRun, Spec};
use crate::error::Error;
use crate::event::Event;
use crate::query::join::JoinWindows;
#[cfg(feature = "checkpoint")]
use crate::query::saved::{Unsaved, WindowsCodec};
use crate::query::windows::{Account, QueryStep, RowAt, Windows, WindowsHeld};
use crate::query::{Aggregate, Join, KeyFn, Query, Row};
use crate::state::State;
use crate::time::Time;

use super::{ListenerHandle, Scope};

impl<'a, E: Event, M: 'static> Scope<'a, E, M> {
    /// Registers a stream query (SPEC R7.9 - R7.11): every event its template matches enters the
    /// window of its partition, and `handler` gets the rows: one per event taken, or per
    /// partition at every period of [`Query::every`], or per partition when a tumbling window
    /// closes. The query stays until quit or until its instance ends; it counts as one of the
    /// instance's listeners. See the [`query`](crate::query) module for the semantics and a run
    /// example.
    ///
    /// # Errors
    /// [`Error::InvalidQuery`] for settings that cannot work (a window or period of zero length,
    /// a count window of zero values, `every` on a tumbling window); nothing is registered.
    ///
    /// ```
    #[doc = include_str!("../../doc/scope_example_prelude.txt")]
    /// use correlator::query::{Count, Query, Row, Window};
    /// // More than two transactions of one card within 10 s: an alert per such transaction.
    /// struct Busy;
    /// impl Monitor<Ev> for Busy {
    ///     fn on_load(&mut self, cx: &mut Scope<'_, Ev, Self>) {
    ///         let alerts = cx.channel("alerts").expect("below max_channels");
    ///         let query = Query::over(Pattern::kind(Kind::Tx))
    ///             .window(Window::sliding(Duration::from_secs(10)))
    ///             .aggregate(Count::default());
    ///         cx.query(query, move |_m, cx, row: &Row<u64>| {
    ///             if row.value > 2 {
    ///                 cx.emit(alerts, Ev::Alert(row.key));
    ///             }
    ///         })
    ///         .expect("a valid query");
    ///     }
    /// }
    /// let seen = run(
    ///     |c| c.load(Busy),
    ///     [tx(1, 5, 0), tx(1, 5, 3), tx(2, 5, 4), tx(1, 5, 9), tx(1, 5, 10), tx(1, 5, 30)],
    /// );
    /// // Card 1 at 9 s (three within 10 s) and at 10 s (3, 9, 10: the one at 0 left at 10).
    /// assert_eq!(seen, [Ev::Alert(1), Ev::Alert(1)]);
    /// ```
    pub fn query<P, A>(
        &mut self,
        query: Query<E, P, A>,
        handler: impl FnMut(&mut M, &mut Scope<'_, E, M>, &Row<A::Output>) + Send + 'static,
    ) -> Result<ListenerHandle, Error>
    where
        P: Send + 'static,
        A: Aggregate<P>,
    {
        query.check()?;
        let Query {
            template,
            partition,
            group,
            value,
            window,
            every,
            aggregate,
            #[cfg(feature = "checkpoint")]
            persist,
        } = query;
        let windows = Windows::new(window.0, every, aggregate);
        #[cfg(feature = "checkpoint")]
        let (windows, persist) = match persist {
            crate::query::Persisting::Yes(codec) => (windows.in_key_order(), Some(codec)),
            _ => (windows, None),
        };
        let run = QueryListener::<E, M, P, A, _> {
            partition,
            group,
            value,
            windows,
            handler,
            account: Account::default(),
            #[cfg(feature = "checkpoint")]
            persist,
            _monitor: PhantomData,
        };
        Ok(self.register(
            Mode::All,
            Spec::Query(Box::new((template, None, Box::new(run)))),
        ))
    }

    /// Registers a join of two streams on a key within a window (SPEC R7.12): each side keeps
    /// the events its template matches for the join's length, by key; when an event enters one
    /// side, `handler` gets `(left, right)` for each event of the other side with the same key
    /// still held, oldest first. An event both templates match joins the events held on each
    /// side before it (as a left event first), never itself. The join stays until quit or until
    /// its instance ends. See [`Join`] for a run example.
    ///
    /// # Errors
    /// [`Error::InvalidQuery`] for a join of zero length; nothing is registered.
    pub fn join(
        &mut self,
        join: Join<E>,
        handler: impl FnMut(&mut M, &mut Scope<'_, E, M>, &E, &E) + Send + 'static,
    ) -> Result<ListenerHandle, Error> {
        if join.within.is_zero() {
            return Err(Error::InvalidQuery {
                why: "a join of zero length holds nothing",
            });
        }
        let Join {
            left,
            right,
            left_key,
            right_key,
            within,
        } = join;
        let run = JoinListener::<E, M, _> {
            keys: [left_key, right_key],
            windows: JoinWindows::new(within),
            handler,
            account: Account::default(),
            _monitor: PhantomData,
        };
        Ok(self.register(
            Mode::All,
            Spec::Query(Box::new((left, Some(right), Box::new(run)))),
        ))
    }
}

/// A join's listener: its two sides' windows, their keys, its handler.
struct JoinListener<E: Event, M, H> {
    keys: [KeyFn<E>; 2],
    windows: JoinWindows<E>,
    handler: H,
    account: Account,
    _monitor: PhantomData<fn(&mut M)>,
}

impl<E, M, H> QueryRun<E> for JoinListener<E, M, H>
where
    E: Event,
    M: 'static,
    H: FnMut(&mut M, &mut Scope<'_, E, M>, &E, &E) + Send + 'static,
{
    fn event(&mut self, state: &mut State, fx: &mut Effects<E>, e: &E, sides: u8) -> QueryStep {
        // Invariant: as for `hand`.
        if let Some(m) = state.downcast_mut::<M>() {
            // What is due by now leaves first (a timer at most its slack late).
            self.windows.advance(fx.now);
            let keys = [0, 1].map(|side| (sides >> side & 1 == 1).then(|| self.keys[side](e)));
            // Pairs first, against what was held before `e` (so never `e` with itself), left
            // role first; then `e` is kept on its side(s).
            if let Some(key) = keys[0] {
                for right in self.windows.held_on(1, key) {
                    (self.handler)(m, &mut Scope::new(fx), e, right);
                }
            }
            if let Some(key) = keys[1] {
                for left in self.windows.held_on(0, key) {
                    (self.handler)(m, &mut Scope::new(fx), left, e);
                }
            }
            for (side, key) in keys.into_iter().enumerate() {
                if let Some(key) = key {
                    self.windows.keep(fx.now, side, key, e.clone());
                }
            }
        }
        self.settle()
    }

    fn time(&mut self, _state: &mut State, _fx: &mut Effects<E>, due: Time) -> QueryStep {
        self.account.fired(due);
        self.windows.advance(due);
        self.settle()
    }

    fn settle(&mut self) -> QueryStep {
        self.account
            .settle(self.windows.held(), self.windows.next_due())
    }

    fn held(&self) -> WindowsHeld {
        self.windows.held()
    }

    #[cfg(feature = "checkpoint")]
    fn save(&self, encode: &mut dyn FnMut(&E, &mut Vec<u8>)) -> Result<Vec<u8>, Unsaved> {
        self.windows
            .save(self.account.armed(), encode)
            .map_err(Unsaved::Encode)
    }

    #[cfg(feature = "checkpoint")]
    fn restore(
        &mut self,
        bytes: &[u8],
        decode: &dyn Fn(&[u8]) -> Result<E, String>,
    ) -> Result<(), String> {
        let armed = self.windows.restore(bytes, decode)?;
        self.account.restored(armed, self.windows.held());
        Ok(())
    }
}

/// A query's listener: its windows, what it computes of each event, its handler.
struct QueryListener<E: Event, M, P, A, H> {
    partition: KeyFn<E>,
    group: Option<KeyFn<E>>,
    value: Box<dyn Fn(&E) -> P + Send>,
    windows: Windows<P, A>,
    handler: H,
    account: Account,
    /// The save and restore of its windows, for a persistent query.
    #[cfg(feature = "checkpoint")]
    persist: Option<WindowsCodec<P, A>>,
    _monitor: PhantomData<fn(&mut M)>,
}

/// Hands `row` to `handler` with the instance's state as its monitor type.
fn hand<E: Event, M: 'static, O>(
    handler: &mut impl FnMut(&mut M, &mut Scope<'_, E, M>, &Row<O>),
    state: &mut State,
    fx: &mut Effects<E>,
    row: RowAt<O>,
) {
    // Invariant: a listener is only ever attached to an instance of the monitor type that
    // registered it, so the downcast cannot fail.
    if let Some(m) = state.downcast_mut::<M>() {
        let row = Row {
            key: row.key.0,
            group: row.key.1,
            time: row.time,
            len: row.len,
            value: row.value,
        };
        handler(m, &mut Scope::new(fx), &row);
    }
}

impl<E, M, P, A, H> QueryRun<E> for QueryListener<E, M, P, A, H>
where
    E: Event,
    M: 'static,
    P: Send + 'static,
    A: Aggregate<P>,
    H: FnMut(&mut M, &mut Scope<'_, E, M>, &Row<A::Output>) + Send + 'static,
{
    fn event(&mut self, state: &mut State, fx: &mut Effects<E>, e: &E, _sides: u8) -> QueryStep {
        let key = ((self.partition)(e), self.group.as_ref().map(|g| g(e)));
        let value = (self.value)(e);
        if let Some(row) = self.windows.take(fx.now, key, value) {
            hand(&mut self.handler, state, fx, row);
        }
        self.settle()
    }

    fn time(&mut self, state: &mut State, fx: &mut Effects<E>, due: Time) -> QueryStep {
        self.account.fired(due);
        let handler = &mut self.handler;
        self.windows
            .advance(due, |row| hand(&mut *handler, state, fx, row));
        self.settle()
    }

    fn settle(&mut self) -> QueryStep {
        self.account
            .settle(self.windows.held(), self.windows.next_due())
    }

    fn held(&self) -> WindowsHeld {
        self.windows.held()
    }

    #[cfg(feature = "checkpoint")]
    fn save(&self, _encode: &mut dyn FnMut(&E, &mut Vec<u8>)) -> Result<Vec<u8>, Unsaved> {
        let codec = self.persist.ok_or(Unsaved::NotPersistent)?;
        (codec.save)(&self.windows, self.account.armed()).map_err(Unsaved::Encode)
    }

    #[cfg(feature = "checkpoint")]
    fn restore(
        &mut self,
        bytes: &[u8],
        _decode: &dyn Fn(&[u8]) -> Result<E, String>,
    ) -> Result<(), String> {
        let Some(codec) = self.persist else {
            return Err(
                "its stream query was saved persistent, and is registered again without \
                 `persistent`"
                    .to_owned(),
            );
        };
        let armed = (codec.restore)(&mut self.windows, bytes)?;
        self.account.restored(armed, self.windows.held());
        Ok(())
    }
}
