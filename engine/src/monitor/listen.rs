//! `Scope`'s methods for listeners (R6.3, R6.5, R7.3): registering template and expression
//! listeners, quitting them, the context's logical time they run on (R7.1), and ending the
//! instance (R6.8).
//!
//! Owns no state. May import the leaves, `entry`, `expr` and `pattern`.

use crate::entry::{MatchHandler, Mode, Op, Spec, NO_GATE};
use crate::event::Event;
use crate::expr::{Expr, Match};
use crate::pattern::Pattern;
use crate::time::Time;

use super::handlers::{erase_handler, erase_match_handler};
use super::{ListenerHandle, Scope};

impl<'a, E: Event, M: 'static> Scope<'a, E, M> {
    pub(super) fn register(&mut self, mode: Mode, spec: Spec<E>) -> ListenerHandle {
        #[cfg(feature = "checkpoint")]
        let restored = self.fx.restore_handles.pop();
        #[cfg(feature = "checkpoint")]
        let id = restored.unwrap_or_else(|| self.fx.take_handle());
        #[cfg(not(feature = "checkpoint"))]
        let id = self.fx.take_handle();
        let op = Op::Listen {
            handle: id,
            instance: self.fx.current,
            mode,
            spec,
        };
        self.fx.ops.push(op);
        ListenerHandle {
            context: self.fx.me,
            id,
        }
    }

    /// The four expression registrations (`when`, `when_all`, with or without a timeout handler).
    fn listen_expr(
        &mut self,
        mode: Mode,
        expr: Expr<E>,
        on_match: MatchHandler<E>,
        on_timeout: Option<MatchHandler<E>>,
    ) -> ListenerHandle {
        self.register(mode, Spec::Expr(expr, on_match, on_timeout))
    }

    fn listen(
        &mut self,
        mode: Mode,
        pattern: Pattern<E>,
        handler: impl FnMut(&mut M, &mut Scope<'_, E, M>, &E) + Send + 'static,
    ) -> ListenerHandle {
        self.register(
            mode,
            Spec::Template(pattern, erase_handler(handler), NO_GATE),
        )
    }

    /// `on_all` for a pool dispatcher (`pool::dispatcher`): the listener is the gate of the
    /// context's [`DispatcherHook`](crate::entry::DispatcherHook) number `hook`, and its handler
    /// runs only for an event whose key has no live instance in that hook's key set.
    pub(crate) fn on_all_gate(
        &mut self,
        pattern: Pattern<E>,
        hook: u32,
        handler: impl FnMut(&mut M, &mut Scope<'_, E, M>, &E) + Send + 'static,
    ) -> ListenerHandle {
        self.register(
            Mode::All,
            Spec::Template(pattern, erase_handler(handler), hook),
        )
    }

    /// The context's logical time: the time of the last clock tick it took (R7.1), or under
    /// [`event_time`](crate::CorrelatorBuilder::event_time) the latest stamp it reached. It does not
    /// change while one inbox entry is processed, so it is also the time at which the current event
    /// was taken; during a timer's handler it is the timer's trigger time.
    ///
    /// ```
    #[doc = include_str!("../../doc/scope_example_prelude.txt")]
    /// // Under event time the clock is the latest transaction's time.
    /// struct Clock;
    /// impl Monitor<Ev> for Clock {
    ///     fn on_load(&mut self, cx: &mut Scope<'_, Ev, Self>) {
    ///         let alerts = cx.channel("alerts").expect("below max_channels");
    ///         cx.on_all(Pattern::kind(Kind::Tx), move |_m, cx, _e| {
    ///             let secs = cx.now().since_origin().as_secs();
    ///             cx.emit(alerts, Ev::Alert(secs));
    ///         });
    ///     }
    /// }
    /// let seen = run(|c| c.load(Clock), [tx(1, 10, 5), tx(1, 10, 65)]);
    /// assert_eq!(seen, [Ev::Alert(5), Ev::Alert(65)]);
    /// ```
    pub fn now(&self) -> Time {
        self.fx.now
    }

    /// Registers a listener for an event expression (R7.3) that fires once, for the first match,
    /// then ends. It also ends, without firing, once the expression can no longer match.
    ///
    /// ```
    #[doc = include_str!("../../doc/scope_example_prelude.txt")]
    /// // One alert, for the first card that makes a large transaction followed by another one
    /// // within 60 s; then the listener ends.
    /// struct Twice;
    /// impl Monitor<Ev> for Twice {
    ///     fn on_load(&mut self, cx: &mut Scope<'_, Ev, Self>) {
    ///         let alerts = cx.channel("alerts").expect("below max_channels");
    ///         fn large(e: &Ev) -> bool {
    ///             matches!(e, Ev::Tx { amount, .. } if *amount > 1_000)
    ///         }
    ///         let first = cx.pattern(Kind::Tx).filter(large);
    ///         let second = cx.pattern(Kind::Tx).filter(large);
    ///         cx.when(first.then(second).within(Duration::from_secs(60)), move |_m, cx, m| {
    ///             if let Ev::Tx { card, .. } = m.events[1] {
    ///                 cx.emit(alerts, Ev::Alert(card));
    ///             }
    ///         });
    ///     }
    /// }
    /// let seen = run(
    ///     |c| c.load(Twice),
    ///     [tx(1, 5_000, 0), tx(2, 3_000, 30), tx(3, 4_000, 200), tx(4, 4_000, 210)],
    /// );
    /// assert_eq!(seen, [Ev::Alert(2)]);
    /// ```
    pub fn when(
        &mut self,
        expr: impl Into<Expr<E>>,
        handler: impl FnMut(&mut M, &mut Scope<'_, E, M>, &Match<E>) + Send + 'static,
    ) -> ListenerHandle {
        self.listen_expr(Mode::Once, expr.into(), erase_match_handler(handler), None)
    }

    /// Registers a listener for an event expression (R7.3) that fires for every match until quit:
    /// a new match starts as soon as the previous one made progress, so `when_all(a.then(b))`
    /// starts a match at every `a`, and `when_all(wait(d))` fires every `d`.
    ///
    /// It ends once its expression can no longer match, which is logged (`tracing`, INFO). Mind
    /// `within` after a quiet spell: `when_all(a.then(b).within(d))` counts `d` from registration,
    /// so with no `a` for `d` it ends before its first pair; `when_all(a.then(b)
    /// .within_from_first(d))` counts from each `a` and fires for every pair, whatever the quiet
    /// spell (see [`Expr::within`](crate::Expr::within) for both, run).
    pub fn when_all(
        &mut self,
        expr: impl Into<Expr<E>>,
        handler: impl FnMut(&mut M, &mut Scope<'_, E, M>, &Match<E>) + Send + 'static,
    ) -> ListenerHandle {
        self.listen_expr(Mode::All, expr.into(), erase_match_handler(handler), None)
    }

    /// [`when`](Self::when), and `on_timeout` for a match that timed out (SPEC R7.7): when a
    /// `within` or `within_from_first` bound expires and fails the match after it had matched at
    /// least one event (outside a `not`), `on_timeout` gets those events as a [`Match`] (in
    /// expression order, [`Match::named`] works) whose `time` is the bound. Flink CEP hands such
    /// partial matches to a side output; this is how "a large trade with no confirmation within
    /// 5 s" reports the trade. A match that fails for another reason (a `not` whose event came)
    /// is not a timeout; nor is the bound of a `not(..).within(d)`, where expiring is the match.
    /// Either handler runs at most once, and the listener ends after it.
    ///
    /// ```
    #[doc = include_str!("../../doc/scope_example_prelude.txt")]
    /// // A large transaction not followed by another one of the same card within 60 s.
    /// struct Lonely;
    /// impl Monitor<Ev> for Lonely {
    ///     fn on_load(&mut self, cx: &mut Scope<'_, Ev, Self>) {
    ///         let alerts = cx.channel("alerts").expect("below max_channels");
    ///         let large = |cx: &Scope<'_, Ev, Self>| {
    ///             cx.pattern(Kind::Tx).filter(|e| matches!(e, Ev::Tx { amount, .. } if *amount > 1_000))
    ///         };
    ///         let pair = large(cx).then(large(cx)).within_from_first(Duration::from_secs(60));
    ///         cx.when_with_timeout(pair, |_m, _cx, _hit| {}, move |_m, cx, hit| {
    ///             if let Some(Ev::Tx { card, .. }) = hit.events.first() {
    ///                 cx.emit(alerts, Ev::Alert(*card));
    ///             }
    ///         });
    ///     }
    /// }
    /// let seen = run(|c| c.load(Lonely), [tx(7, 5_000, 0), tx(8, 4_000, 90)]);
    /// assert_eq!(seen, [Ev::Alert(7)]);
    /// ```
    pub fn when_with_timeout(
        &mut self,
        expr: impl Into<Expr<E>>,
        on_match: impl FnMut(&mut M, &mut Scope<'_, E, M>, &Match<E>) + Send + 'static,
        on_timeout: impl FnMut(&mut M, &mut Scope<'_, E, M>, &Match<E>) + Send + 'static,
    ) -> ListenerHandle {
        let on_timeout = Some(erase_match_handler(on_timeout));
        self.listen_expr(
            Mode::Once,
            expr.into(),
            erase_match_handler(on_match),
            on_timeout,
        )
    }

    /// [`when_all`](Self::when_all), and `on_timeout` for every match in progress that times out
    /// (SPEC R7.7; see [`when_with_timeout`](Self::when_with_timeout)). The fresh match that has
    /// seen nothing yet never times out: a timeout always has at least one event.
    pub fn when_all_with_timeout(
        &mut self,
        expr: impl Into<Expr<E>>,
        on_match: impl FnMut(&mut M, &mut Scope<'_, E, M>, &Match<E>) + Send + 'static,
        on_timeout: impl FnMut(&mut M, &mut Scope<'_, E, M>, &Match<E>) + Send + 'static,
    ) -> ListenerHandle {
        let on_timeout = Some(erase_match_handler(on_timeout));
        self.listen_expr(
            Mode::All,
            expr.into(),
            erase_match_handler(on_match),
            on_timeout,
        )
    }

    /// Registers a listener that fires once on the next event matching `pattern`, then ends (R6.3).
    ///
    /// ```
    #[doc = include_str!("../../doc/scope_example_prelude.txt")]
    /// // Reports the first large transaction only.
    /// struct FirstLarge;
    /// impl Monitor<Ev> for FirstLarge {
    ///     fn on_load(&mut self, cx: &mut Scope<'_, Ev, Self>) {
    ///         let alerts = cx.channel("alerts").expect("below max_channels");
    ///         let large = cx.pattern(Kind::Tx).filter(|e| matches!(e, Ev::Tx { amount, .. } if *amount > 1_000));
    ///         cx.on(large, move |_m, cx, e| {
    ///             cx.emit(alerts, e.clone());
    ///         });
    ///     }
    /// }
    /// let seen = run(|c| c.load(FirstLarge), [tx(1, 10, 0), tx(2, 5_000, 1), tx(3, 6_000, 2)]);
    /// assert_eq!(seen, [tx(2, 5_000, 1)]);
    /// ```
    pub fn on(
        &mut self,
        pattern: Pattern<E>,
        handler: impl FnMut(&mut M, &mut Scope<'_, E, M>, &E) + Send + 'static,
    ) -> ListenerHandle {
        self.listen(Mode::Once, pattern, handler)
    }

    /// Registers a listener that fires on every event matching `pattern` until quit (R6.3).
    /// Listeners matching one event fire in registration order (R6.4).
    ///
    /// ```
    #[doc = include_str!("../../doc/scope_example_prelude.txt")]
    /// // Counts card 7's transactions, reporting the running count.
    /// struct Count { seen: u64 }
    /// impl Monitor<Ev> for Count {
    ///     fn on_load(&mut self, cx: &mut Scope<'_, Ev, Self>) {
    ///         let alerts = cx.channel("alerts").expect("below max_channels");
    ///         cx.on_all(Pattern::kind(Kind::Tx).key(7), move |m: &mut Count, cx, _e| {
    ///             m.seen += 1;
    ///             cx.emit(alerts, Ev::Alert(m.seen));
    ///         });
    ///     }
    /// }
    /// let seen = run(|c| c.load(Count { seen: 0 }), [tx(7, 1, 0), tx(8, 1, 1), tx(7, 1, 2)]);
    /// assert_eq!(seen, [Ev::Alert(1), Ev::Alert(2)]);
    /// ```
    pub fn on_all(
        &mut self,
        pattern: Pattern<E>,
        handler: impl FnMut(&mut M, &mut Scope<'_, E, M>, &E) + Send + 'static,
    ) -> ListenerHandle {
        self.listen(Mode::All, pattern, handler)
    }

    /// Registers a listener that fires for events matching `pattern` that no ordinary (`on`,
    /// `on_all`) listener of this context matched (R6.6).
    ///
    /// ```
    #[doc = include_str!("../../doc/scope_example_prelude.txt")]
    /// // Cards 1 and 2 have their own listeners; every other card's transaction is reported.
    /// struct Known;
    /// impl Monitor<Ev> for Known {
    ///     fn on_load(&mut self, cx: &mut Scope<'_, Ev, Self>) {
    ///         let alerts = cx.channel("alerts").expect("below max_channels");
    ///         for card in [1, 2] {
    ///             cx.on_all(Pattern::kind(Kind::Tx).key(card), |_m, _cx, _e| {});
    ///         }
    ///         cx.unmatched(Pattern::kind(Kind::Tx), move |_m, cx, e| {
    ///             cx.emit(alerts, e.clone());
    ///         });
    ///     }
    /// }
    /// let seen = run(|c| c.load(Known), [tx(1, 10, 0), tx(9, 10, 1), tx(2, 10, 2)]);
    /// assert_eq!(seen, [tx(9, 10, 1)]);
    /// ```
    pub fn unmatched(
        &mut self,
        pattern: Pattern<E>,
        handler: impl FnMut(&mut M, &mut Scope<'_, E, M>, &E) + Send + 'static,
    ) -> ListenerHandle {
        self.listen(Mode::Unmatched, pattern, handler)
    }

    /// Registers a listener that fires for an event matching `pattern` once its ordinary and
    /// unmatched listeners have run and every event routed from it, transitively, has been processed
    /// (R6.7). It fires for events that arrive after it is registered.
    ///
    /// ```
    #[doc = include_str!("../../doc/scope_example_prelude.txt")]
    /// // A transaction routes an alert; the `completed` listener fires after the alert's handler has run.
    /// struct Audit;
    /// impl Monitor<Ev> for Audit {
    ///     fn on_load(&mut self, cx: &mut Scope<'_, Ev, Self>) {
    ///         let alerts = cx.channel("alerts").expect("below max_channels");
    ///         cx.on_all(Pattern::kind(Kind::Tx), |_m, cx, e| {
    ///             if let Ev::Tx { card, .. } = *e {
    ///                 cx.route(Ev::Alert(card));
    ///             }
    ///         });
    ///         cx.on_all(Pattern::kind(Kind::Alert), move |_m, cx, e| {
    ///             cx.emit(alerts, e.clone());
    ///         });
    ///         cx.completed(Pattern::kind(Kind::Tx), move |_m, cx, e| {
    ///             cx.emit(alerts, e.clone());
    ///         });
    ///     }
    /// }
    /// let seen = run(|c| c.load(Audit), [tx(4, 10, 0)]);
    /// assert_eq!(seen, [Ev::Alert(4), tx(4, 10, 0)]);
    /// ```
    pub fn completed(
        &mut self,
        pattern: Pattern<E>,
        handler: impl FnMut(&mut M, &mut Scope<'_, E, M>, &E) + Send + 'static,
    ) -> ListenerHandle {
        self.listen(Mode::Completed, pattern, handler)
    }

    /// Ends a listener of this context (R6.3): it fires no more, even later in the current dispatch.
    /// A handle of another context, or of a listener that has ended, is ignored.
    ///
    /// ```
    #[doc = include_str!("../../doc/scope_example_prelude.txt")]
    /// // Listens to card 7 until a transaction above 1,000, then stops listening (and, with no
    /// // listener left, the instance ends).
    /// struct UntilLarge { listening: Option<ListenerHandle> }
    /// impl Monitor<Ev> for UntilLarge {
    ///     fn on_load(&mut self, cx: &mut Scope<'_, Ev, Self>) {
    ///         let alerts = cx.channel("alerts").expect("below max_channels");
    ///         let h = cx.on_all(Pattern::kind(Kind::Tx).key(7), move |m: &mut UntilLarge, cx, e| {
    ///             cx.emit(alerts, e.clone());
    ///             if matches!(e, Ev::Tx { amount, .. } if *amount > 1_000) {
    ///                 if let Some(h) = m.listening.take() {
    ///                     cx.quit(h);
    ///                 }
    ///             }
    ///         });
    ///         self.listening = Some(h);
    ///     }
    /// }
    /// let seen = run(
    ///     |c| c.load(UntilLarge { listening: None }),
    ///     [tx(7, 10, 0), tx(7, 5_000, 1), tx(7, 20, 2)],
    /// );
    /// assert_eq!(seen, [tx(7, 10, 0), tx(7, 5_000, 1)]);
    /// ```
    pub fn quit(&mut self, handle: ListenerHandle) {
        if handle.context == self.fx.me {
            self.fx.ops.push(Op::Quit(handle.id));
        }
    }

    /// Ends this instance once the handler returns (R6.8).
    ///
    /// ```
    #[doc = include_str!("../../doc/scope_example_prelude.txt")]
    /// // A card's watcher ends after its third transaction; `on_die` reports why.
    /// struct Three { seen: u32 }
    /// impl Monitor<Ev> for Three {
    ///     fn on_load(&mut self, cx: &mut Scope<'_, Ev, Self>) {
    ///         cx.on_all(Pattern::kind(Kind::Tx), |m: &mut Three, cx, _e| {
    ///             m.seen += 1;
    ///             if m.seen == 3 {
    ///                 cx.die();
    ///             }
    ///         });
    ///     }
    ///     fn on_die(&mut self, reason: &DieReason, cx: &mut Scope<'_, Ev, Self>) {
    ///         let alerts = cx.channel("alerts").expect("below max_channels");
    ///         let code = if matches!(reason, DieReason::Died) { 1 } else { 0 };
    ///         cx.emit(alerts, Ev::Alert(code));
    ///     }
    /// }
    /// let seen = run(|c| c.load(Three { seen: 0 }), (0..5).map(|s| tx(1, 10, s)));
    /// assert_eq!(seen, [Ev::Alert(1)]); // died by itself, not at shutdown
    /// ```
    pub fn die(&mut self) {
        self.fx.ops.push(Op::Die);
    }
}
