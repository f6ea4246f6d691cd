//! `Scope::query`: registering a stream query (R7.9 - R7.11), and the listener that runs it with
//! its monitor type erased.
//!
//! Owns the erased query listener. May import the leaves, `entry`, `pattern`, `query` and
//! `error`.

use std::marker::PhantomData;

use crate::entry::{Effects, Mode, QueryRun, Spec};
use crate::error::Error;
use crate::event::Event;
use crate::query::windows::{RowAt, Windows, WindowsHeld};
use crate::query::{Aggregate, Query, Row};
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
            value,
            window,
            every,
            aggregate,
        } = query;
        let run = QueryListener::<E, M, P, A, _> {
            partition,
            value,
            windows: Windows::new(window.0, every, aggregate),
            handler,
            armed: None,
            _monitor: PhantomData,
        };
        Ok(self.register(Mode::All, Spec::Query(template, Box::new(run))))
    }
}

/// A query's listener: its windows, what it computes of each event, its handler.
struct QueryListener<E: Event, M, P, A, H> {
    partition: Box<dyn Fn(&E) -> u64 + Send>,
    value: Box<dyn Fn(&E) -> P + Send>,
    windows: Windows<P, A>,
    handler: H,
    armed: Option<Time>,
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
            key: row.key,
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
    fn event(&mut self, state: &mut State, fx: &mut Effects<E>, e: &E) {
        let key = (self.partition)(e);
        let value = (self.value)(e);
        if let Some(row) = self.windows.take(fx.now, key, value) {
            hand(&mut self.handler, state, fx, row);
        }
    }

    fn time(&mut self, state: &mut State, fx: &mut Effects<E>, due: Time) {
        let handler = &mut self.handler;
        self.windows
            .advance(due, |row| hand(&mut *handler, state, fx, row));
    }

    fn next_due(&self) -> Option<Time> {
        self.windows.next_due()
    }

    fn armed(&mut self) -> &mut Option<Time> {
        &mut self.armed
    }

    fn held(&self) -> WindowsHeld {
        self.windows.held()
    }
}
