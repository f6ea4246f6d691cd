//! Monitors, their instances, and the `Scope` handlers act through (SPEC §6).
//!
//! A monitor is a plain Rust struct (its state) implementing [`Monitor`]. Loading it creates its
//! first *instance* in a context and runs [`Monitor::on_load`] there; the load hook registers
//! listeners. Each listener's handler gets `&mut` to the instance's state and a [`Scope`], through
//! which it routes, sends, registers more listeners, spawns and dies.
//!
//! An instance ends (R6.8) when a handler calls [`Scope::die`], when one of its handlers panics, or
//! when it has no listener left after a handler returns; at graceful shutdown every remaining
//! instance ends with [`DieReason::Shutdown`]. Its [`Monitor::on_die`] hook runs exactly once, with the
//! reason; a panic inside `on_die` is caught and reported through `tracing`. Its listeners and
//! subscriptions are removed; the context and every other instance carry on; events it already
//! routed or sent are still delivered.
//!
//! Owns the user's side of monitors ([`Monitor`], [`Scope`]). May import the leaves, `entry`,
//! `deliver`, `expr`, `pattern`, `channel`, `output`, `error` and `context` (for creating
//! contexts).

use std::marker::PhantomData;

use crate::channel::Channel;
use crate::config::ContextOptions;
use crate::deliver::Wait;
use crate::entry::{DieReason, Effects, Entry, Handler, MatchHandler, Mode, NewInstance, Op, Spec};
use crate::error::{Error, SendBatchError, SendError};
use crate::event::Event;
use crate::expr::{Expr, Match};
use crate::id::ContextRef;
use crate::output::Output;
use crate::pattern::Pattern;
use crate::state::State;
use crate::time::Time;

/// A monitor: user state plus the listeners its load hook registers.
///
/// ```
/// use correlator::{DieReason, Event, Monitor, Pattern, Scope};
///
/// #[derive(Clone, Debug)]
/// struct Reading(u32);
/// impl Event for Reading {
///     type Kind = ();
///     fn kind(&self) {}
/// }
///
/// /// Counts readings and stops after three.
/// #[derive(Clone, Default)]
/// struct Counter { seen: u32 }
///
/// impl Monitor<Reading> for Counter {
///     fn on_load(&mut self, cx: &mut Scope<'_, Reading, Self>) {
///         cx.on_all(Pattern::kind(()), |m: &mut Counter, cx: &mut Scope<'_, Reading, Counter>, _r: &Reading| {
///             m.seen += 1;
///             if m.seen == 3 {
///                 cx.die();
///             }
///         });
///     }
///
///     fn on_die(&mut self, reason: &DieReason, _cx: &mut Scope<'_, Reading, Self>) {
///         assert!(matches!(reason, DieReason::Died | DieReason::Shutdown));
///     }
/// }
/// ```
pub trait Monitor<E: Event>: Send + Sized + 'static {
    /// Runs in the context where the instance is created (`main` for
    /// [`Correlator::load`](crate::Correlator::load)); registers the first listeners.
    fn on_load(&mut self, cx: &mut Scope<'_, E, Self>);

    /// Runs exactly once when the instance ends. What it routes and sends is delivered; listeners and
    /// subscriptions it registers are dropped, since the instance is gone.
    fn on_die(&mut self, reason: &DieReason, cx: &mut Scope<'_, E, Self>) {
        let _ = (reason, cx);
    }
}

/// A handle to a listener, returned when it is registered; pass it to [`Scope::quit`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ListenerHandle {
    context: ContextRef,
    id: u64,
}

impl ListenerHandle {
    /// The context the listener lives in.
    pub fn context(&self) -> ContextRef {
        self.context
    }
}

/// What a handler acts through: the context it runs in and the instance it belongs to.
///
/// Routes and sends take effect at once. Registering or quitting listeners, subscribing and
/// unsubscribing, and local spawns take effect when the handler returns, before the next listener of
/// the same event fires; a listener registered while an event is processed never matches that event
/// (R6.5).
///
/// The methods' examples share a prelude that the docs hide (`engine/doc/scope_example_prelude.txt`):
/// the event `Ev` is `Tx { card, amount, at }` (kind `Kind::Tx`, keyed by card, stamped `at`
/// seconds into the stream) or `Alert(card)` (kind `Kind::Alert`, no time); `tx(card, amount, at)`
/// makes a transaction; `run(load, events)` builds a correlator on event time, lets `load` load
/// the monitors, sends `events` to `main`, shuts down and returns what reached the channel
/// `"alerts"`, in order.
pub struct Scope<'a, E: Event, M> {
    fx: &'a mut Effects<E>,
    _monitor: PhantomData<fn() -> M>,
}

fn erase_handler<E, M, F>(mut f: F) -> Handler<E>
where
    E: Event,
    M: 'static,
    F: FnMut(&mut M, &mut Scope<'_, E, M>, &E) + Send + 'static,
{
    Box::new(move |state: &mut State, fx: &mut Effects<E>, e: &E| {
        // Invariant: a listener is only ever attached to an instance of the monitor type that
        // registered it, so the downcast cannot fail.
        if let Some(m) = state.downcast_mut::<M>() {
            f(m, &mut Scope::new(fx), e);
        }
    })
}

fn erase_match_handler<E, M, F>(mut f: F) -> MatchHandler<E>
where
    E: Event,
    M: 'static,
    F: FnMut(&mut M, &mut Scope<'_, E, M>, &Match<E>) + Send + 'static,
{
    Box::new(
        move |state: &mut State, fx: &mut Effects<E>, m: &Match<E>| {
            // Invariant: as for `erase_handler`.
            if let Some(s) = state.downcast_mut::<M>() {
                f(s, &mut Scope::new(fx), m);
            }
        },
    )
}

fn on_die_hook<E: Event, M: Monitor<E>>(
    state: &mut State,
    reason: &DieReason,
    fx: &mut Effects<E>,
) {
    if let Some(m) = state.downcast_mut::<M>() {
        m.on_die(reason, &mut Scope::new(fx));
    }
}

/// The first instance of a monitor: its load hook is the initialiser.
pub(crate) fn load_instance<E: Event, M: Monitor<E>>(monitor: M) -> NewInstance<E> {
    NewInstance {
        state: State::new(monitor),
        on_die: Box::new(on_die_hook::<E, M>),
        init: Box::new(|state: &mut State, fx: &mut Effects<E>| {
            if let Some(m) = state.downcast_mut::<M>() {
                m.on_load(&mut Scope::new(fx));
            }
        }),
        deliver: None,
    }
}

fn spawned_instance<E, M, F>(state: M, init: F) -> NewInstance<E>
where
    E: Event,
    M: Monitor<E>,
    F: FnOnce(&mut M, &mut Scope<'_, E, M>) + Send + 'static,
{
    NewInstance {
        state: State::new(state),
        on_die: Box::new(on_die_hook::<E, M>),
        init: Box::new(move |state: &mut State, fx: &mut Effects<E>| {
            if let Some(m) = state.downcast_mut::<M>() {
                init(m, &mut Scope::new(fx));
            }
        }),
        deliver: None,
    }
}

impl<'a, E: Event, M: 'static> Scope<'a, E, M> {
    pub(crate) fn new(fx: &'a mut Effects<E>) -> Self {
        Self {
            fx,
            _monitor: PhantomData,
        }
    }

    /// The context this handler runs in.
    ///
    /// ```
    #[doc = include_str!("../doc/scope_example_prelude.txt")]
    /// // Each instance reports the context it runs in.
    /// struct Here(Output<ContextRef>);
    /// impl Monitor<Ev> for Here {
    ///     fn on_load(&mut self, cx: &mut Scope<'_, Ev, Self>) {
    ///         let queued = cx.emit_to(&self.0, cx.context());
    ///         assert!(queued);
    ///     }
    /// }
    /// let c = Correlator::<Ev>::builder().build()?;
    /// let (out, rx) = c.typed_output(OutputOptions::default())?;
    /// let worker = c.create_context(ContextOptions::new("worker"))?;
    /// c.load(Here(out.clone()))?;
    /// c.load_in(worker, Here(out))?;
    /// c.start();
    /// c.shutdown()?;
    /// let mut places: Vec<ContextRef> = rx.iter().collect();
    /// places.sort_by_key(|r| r.id());
    /// assert_eq!(places, [c.main(), worker]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn context(&self) -> ContextRef {
        self.fx.me
    }

    /// A template for every event of `kind`, typed by this scope: the same as
    /// [`Pattern::kind`], except that the event type is known, so a filter's closure needs no
    /// type on its argument.
    ///
    /// ```
    /// use correlator::{Correlator, Event, Monitor, Scope};
    /// #[derive(Clone, Debug)]
    /// struct Tx { amount: f64 }
    /// impl Event for Tx {
    ///     type Kind = ();
    ///     fn kind(&self) {}
    /// }
    /// struct Large { seen: usize }
    /// impl Monitor<Tx> for Large {
    ///     fn on_load(&mut self, cx: &mut Scope<'_, Tx, Self>) {
    ///         // `|t| t.amount ...` compiles: `cx.pattern` knows the event type.
    ///         cx.on_all(cx.pattern(()).filter(|t| t.amount > 1_000.0), |m: &mut Large, _cx, _t| {
    ///             m.seen += 1;
    ///         });
    ///     }
    /// }
    /// # let c = Correlator::<Tx>::builder().build()?;
    /// # c.load(Large { seen: 0 })?;
    /// # Ok::<(), correlator::Error>(())
    /// ```
    pub fn pattern(&self, kind: E::Kind) -> Pattern<E> {
        Pattern::kind(kind)
    }

    /// Puts `event` at the front of this context's queue (R3.1): it is processed after the events
    /// this handler's event routes before it, and before anything that was pending (R3.2). Never
    /// refused, never counted against the inbox capacity (R3.5).
    ///
    /// ```
    #[doc = include_str!("../doc/scope_example_prelude.txt")]
    /// // A large transaction routes an alert, which is processed before the next transaction is
    /// // taken from the inbox (R3.1).
    /// struct Large;
    /// impl Monitor<Ev> for Large {
    ///     fn on_load(&mut self, cx: &mut Scope<'_, Ev, Self>) {
    ///         let alerts = cx.channel("alerts").expect("below max_channels");
    ///         cx.on_all(Pattern::kind(Kind::Tx), move |_m, cx, e| {
    ///             cx.emit(alerts, e.clone());
    ///             if let Ev::Tx { card, amount, .. } = *e {
    ///                 if amount > 1_000 {
    ///                     cx.route(Ev::Alert(card));
    ///                 }
    ///             }
    ///         });
    ///         cx.on_all(Pattern::kind(Kind::Alert), move |_m, cx, e| {
    ///             cx.emit(alerts, e.clone());
    ///         });
    ///     }
    /// }
    /// let seen = run(|c| c.load(Large), [tx(1, 5_000, 0), tx(2, 10, 1)]);
    /// assert_eq!(seen, [tx(1, 5_000, 0), Ev::Alert(1), tx(2, 10, 1)]);
    /// ```
    #[inline]
    pub fn route(&mut self, event: E) {
        self.fx.stats.routed += 1;
        self.fx.routes.push(event);
    }

    /// Appends `event` to the back of `ctx`'s inbox (R4.1), this context included. Waits for room
    /// if the inbox is full (R5.1), unless waiting would close a cycle of waiting contexts, in which
    /// case the entry is taken beyond capacity (R5.2).
    ///
    /// # Errors
    /// [`SendErrorKind::ContextStopped`](crate::SendErrorKind::ContextStopped) if `ctx` has stopped
    /// (R4.6), [`SendErrorKind::UnknownContext`](crate::SendErrorKind::UnknownContext) if `ctx` is
    /// not of this correlator. The error hands the event back.
    ///
    /// ```
    #[doc = include_str!("../doc/scope_example_prelude.txt")]
    /// // Card 7's transactions go to a review context, which reports them.
    /// struct Forward { review: ContextRef }
    /// impl Monitor<Ev> for Forward {
    ///     fn on_load(&mut self, cx: &mut Scope<'_, Ev, Self>) {
    ///         cx.on_all(Pattern::kind(Kind::Tx).key(7), |m: &mut Forward, cx, e| {
    ///             if let Err(refused) = cx.send_to(m.review, e.clone()) {
    ///                 // Only once `review` has stopped; the event comes back.
    ///                 let _lost = refused.into_inner();
    ///             }
    ///         });
    ///     }
    /// }
    /// struct Review;
    /// impl Monitor<Ev> for Review {
    ///     fn on_load(&mut self, cx: &mut Scope<'_, Ev, Self>) {
    ///         let alerts = cx.channel("alerts").expect("below max_channels");
    ///         cx.on_all(Pattern::kind(Kind::Tx), move |_m, cx, e| {
    ///             cx.emit(alerts, e.clone());
    ///         });
    ///     }
    /// }
    /// let seen = run(
    ///     |c| {
    ///         let review = c.create_context(ContextOptions::new("review"))?;
    ///         c.load_in(review, Review)?;
    ///         c.load(Forward { review })
    ///     },
    ///     [tx(7, 10, 0), tx(8, 20, 1), tx(7, 30, 2)],
    /// );
    /// assert_eq!(seen, [tx(7, 10, 0), tx(7, 30, 2)]);
    /// ```
    pub fn send_to(&mut self, ctx: ContextRef, event: E) -> Result<(), SendError<E>> {
        let r = self.fx.links.send_to(ctx, event, Wait::Block);
        if r.is_ok() {
            self.fx.stats.sent += 1;
        }
        self.fx.stats.blocked_ns += self.fx.links.take_blocked_ns();
        r
    }

    /// Appends the events of `events` to the back of `ctx`'s inbox (R4.1), in order, taking as many
    /// places at once as there is room for (one atomic reservation per run of places). Waits for
    /// room when there is none, or takes an entry beyond capacity where waiting would close a cycle
    /// of waiting contexts (R5.2), exactly as [`send_to`](Self::send_to) does for each event; so a
    /// batch of any size is accepted. This context's sends keep their order (R2.3). The vector keeps
    /// its memory; on success it is empty.
    ///
    /// # Errors
    /// As [`send_to`](Self::send_to); the error says how many events were sent, and the others are
    /// still in `events`, in order.
    ///
    /// ```
    #[doc = include_str!("../doc/scope_example_prelude.txt")]
    /// // Transactions are passed on to a review context in pairs.
    /// struct Pairs { review: ContextRef, pending: Vec<Ev> }
    /// impl Monitor<Ev> for Pairs {
    ///     fn on_load(&mut self, cx: &mut Scope<'_, Ev, Self>) {
    ///         cx.on_all(Pattern::kind(Kind::Tx), |m: &mut Pairs, cx, e| {
    ///             m.pending.push(e.clone());
    ///             if m.pending.len() == 2 {
    ///                 // On success `pending` is empty and keeps its memory.
    ///                 cx.send_batch_to(m.review, &mut m.pending).expect("review runs until shutdown");
    ///             }
    ///         });
    ///     }
    /// }
    /// struct Review;
    /// impl Monitor<Ev> for Review {
    ///     fn on_load(&mut self, cx: &mut Scope<'_, Ev, Self>) {
    ///         let alerts = cx.channel("alerts").expect("below max_channels");
    ///         cx.on_all(Pattern::kind(Kind::Tx), move |_m, cx, e| {
    ///             cx.emit(alerts, e.clone());
    ///         });
    ///     }
    /// }
    /// let seen = run(
    ///     |c| {
    ///         let review = c.create_context(ContextOptions::new("review"))?;
    ///         c.load_in(review, Review)?;
    ///         c.load(Pairs { review, pending: Vec::with_capacity(2) })
    ///     },
    ///     [tx(1, 10, 0), tx(2, 20, 1), tx(3, 30, 2)],
    /// );
    /// // The third waits for a partner that never comes.
    /// assert_eq!(seen, [tx(1, 10, 0), tx(2, 20, 1)]);
    /// ```
    pub fn send_batch_to(
        &mut self,
        ctx: ContextRef,
        events: &mut Vec<E>,
    ) -> Result<(), SendBatchError> {
        let r = self.fx.links.send_batch_to(ctx, events, Wait::Block);
        self.fx.stats.sent += match &r {
            Ok(n) => *n as u64,
            Err(e) => e.sent() as u64,
        };
        self.fx.stats.blocked_ns += self.fx.links.take_blocked_ns();
        r.map(drop)
    }

    /// Delivers one copy of `event` to every context subscribed to `channel` (once per context) and
    /// to every output receiver of it (R4.2); returns how many got one. Nobody receiving is not an
    /// error: the event is dropped and counted (R4.5).
    ///
    /// ```
    #[doc = include_str!("../doc/scope_example_prelude.txt")]
    /// // Large transactions go as alerts on the channel "large": to every subscribed context (here
    /// // `main` itself, through `Escalate`) and to every output receiver.
    /// struct Source;
    /// impl Monitor<Ev> for Source {
    ///     fn on_load(&mut self, cx: &mut Scope<'_, Ev, Self>) {
    ///         let large = cx.channel("large").expect("below max_channels");
    ///         cx.on_all(Pattern::kind(Kind::Tx), move |_m, cx, e| {
    ///             if let Ev::Tx { card, amount, .. } = *e {
    ///                 if amount > 1_000 {
    ///                     let receivers = cx.send(large, Ev::Alert(card));
    ///                     assert_eq!(receivers, 1); // one context: main
    ///                 }
    ///             }
    ///         });
    ///     }
    /// }
    /// struct Escalate;
    /// impl Monitor<Ev> for Escalate {
    ///     fn on_load(&mut self, cx: &mut Scope<'_, Ev, Self>) {
    ///         let large = cx.channel("large").expect("below max_channels");
    ///         let alerts = cx.channel("alerts").expect("below max_channels");
    ///         cx.subscribe(large);
    ///         cx.on_all(Pattern::kind(Kind::Alert), move |_m, cx, e| {
    ///             cx.emit(alerts, e.clone());
    ///         });
    ///     }
    /// }
    /// let seen = run(|c| { c.load(Escalate)?; c.load(Source) }, [tx(1, 5_000, 0), tx(2, 10, 1)]);
    /// assert_eq!(seen, [Ev::Alert(1)]);
    /// ```
    pub fn send(&mut self, channel: Channel, event: E) -> usize {
        let n = self
            .fx
            .links
            .send_channel(channel, event, Wait::Block, true);
        self.fx.stats.sent += n.contexts as u64;
        self.fx.stats.blocked_ns += self.fx.links.take_blocked_ns();
        self.count_outputs();
        n.total()
    }

    /// Delivers every event of `events`, in order, to every context subscribed to `channel` (once
    /// per context) and to every output receiver of it (R4.2), like [`send`](Self::send) for each
    /// event, but each subscriber's inbox places are reserved as many at once as are free (waiting,
    /// or going beyond capacity, as [`send_batch_to`](Self::send_batch_to) does). Each subscriber
    /// gets the whole batch in order (R2.3); the subscribers are served one after the other. The
    /// vector is emptied and keeps its memory. Returns how many deliveries were made (events times
    /// receivers); 0 means the batch was dropped and counted (R4.5).
    ///
    /// ```
    #[doc = include_str!("../doc/scope_example_prelude.txt")]
    /// // Every third transaction, alerts for the last three go together on the channel "recent".
    /// struct Source { recent: Vec<Ev> }
    /// impl Monitor<Ev> for Source {
    ///     fn on_load(&mut self, cx: &mut Scope<'_, Ev, Self>) {
    ///         let recent = cx.channel("recent").expect("below max_channels");
    ///         cx.on_all(Pattern::kind(Kind::Tx), move |m: &mut Source, cx, e| {
    ///             if let Ev::Tx { card, .. } = *e {
    ///                 m.recent.push(Ev::Alert(card));
    ///             }
    ///             if m.recent.len() == 3 {
    ///                 let deliveries = cx.send_batch(recent, &mut m.recent);
    ///                 assert_eq!(deliveries, 3); // three events, one subscribed context
    ///             }
    ///         });
    ///     }
    /// }
    /// struct Sink;
    /// impl Monitor<Ev> for Sink {
    ///     fn on_load(&mut self, cx: &mut Scope<'_, Ev, Self>) {
    ///         let recent = cx.channel("recent").expect("below max_channels");
    ///         let alerts = cx.channel("alerts").expect("below max_channels");
    ///         cx.subscribe(recent);
    ///         cx.on_all(Pattern::kind(Kind::Alert), move |_m, cx, e| {
    ///             cx.emit(alerts, e.clone());
    ///         });
    ///     }
    /// }
    /// let seen = run(
    ///     |c| { c.load(Sink)?; c.load(Source { recent: Vec::new() }) },
    ///     [tx(1, 10, 0), tx(2, 20, 1), tx(3, 30, 2), tx(4, 40, 3)],
    /// );
    /// assert_eq!(seen, [Ev::Alert(1), Ev::Alert(2), Ev::Alert(3)]);
    /// ```
    pub fn send_batch(&mut self, channel: Channel, events: &mut Vec<E>) -> usize {
        let n = self.fx.links.send_channel_batch(channel, events, true);
        self.fx.stats.sent += n.contexts as u64;
        self.fx.stats.blocked_ns += self.fx.links.take_blocked_ns();
        n.total()
    }

    /// Delivers `event` to the output receivers of `channel` only, never to a context (R4.3);
    /// returns how many queued it. Each output acts on a full queue as its
    /// [`Overflow`](crate::Overflow) policy says: with `Block` (the default) this handler waits
    /// for room, counted in `output_blocked_ns`; a dropped event counts in `output_drops`.
    ///
    /// ```
    #[doc = include_str!("../doc/scope_example_prelude.txt")]
    /// // Large transactions reach the receivers of "alerts" (and no context).
    /// struct Large;
    /// impl Monitor<Ev> for Large {
    ///     fn on_load(&mut self, cx: &mut Scope<'_, Ev, Self>) {
    ///         let alerts = cx.channel("alerts").expect("below max_channels");
    ///         cx.on_all(Pattern::kind(Kind::Tx), move |_m, cx, e| {
    ///             if let Ev::Tx { card, amount, .. } = *e {
    ///                 if amount > 1_000 {
    ///                     cx.emit(alerts, Ev::Alert(card));
    ///                 }
    ///             }
    ///         });
    ///     }
    /// }
    /// assert_eq!(run(|c| c.load(Large), [tx(1, 5_000, 0), tx(2, 10, 1)]), [Ev::Alert(1)]);
    /// ```
    pub fn emit(&mut self, channel: Channel, event: E) -> usize {
        let n = self.fx.links.emit(channel, &event);
        self.count_outputs();
        n
    }

    /// Puts `value` into the typed output `output` (R4.3: it reaches that output's receiver,
    /// never a context); returns whether it was queued. Values of any type can be emitted this
    /// way, not only events; the [`Output`] handle comes from
    /// [`Correlator::typed_output`](crate::Correlator::typed_output), so the type always matches.
    /// A full output acts as its [`Overflow`](crate::Overflow) policy says (as
    /// [`emit`](Self::emit)); once its receiver is dropped or the correlator has shut down, the
    /// value is discarded and `false` returned. Every value not queued is counted: in
    /// [`Output::dropped`] and in this context's `output_drops` (and the status totals).
    ///
    /// ```
    #[doc = include_str!("../doc/scope_example_prelude.txt")]
    /// // Large transactions go out as plain `(card, amount)` pairs, not events.
    /// struct Large { out: Output<(u64, u32)>, undelivered: u64 }
    /// impl Monitor<Ev> for Large {
    ///     fn on_load(&mut self, cx: &mut Scope<'_, Ev, Self>) {
    ///         cx.on_all(Pattern::kind(Kind::Tx), |m: &mut Large, cx, e| {
    ///             if let Ev::Tx { card, amount, .. } = *e {
    ///                 // `false` once the receiver is dropped (or shutdown has ended).
    ///                 if amount > 1_000 && !cx.emit_to(&m.out, (card, amount)) {
    ///                     m.undelivered += 1;
    ///                 }
    ///             }
    ///         });
    ///     }
    /// }
    /// let c = Correlator::<Ev>::builder().event_time().build()?;
    /// let (out, large) = c.typed_output(OutputOptions::bounded(1_024))?;
    /// c.load(Large { out, undelivered: 0 })?;
    /// let input = c.input();
    /// c.start();
    /// for e in [tx(1, 5_000, 0), tx(2, 10, 1), tx(3, 2_000, 2)] {
    ///     input.send_to(c.main(), e)?;
    /// }
    /// c.shutdown()?;
    /// assert_eq!(large.iter().collect::<Vec<_>>(), [(1, 5_000), (3, 2_000)]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[must_use = "`false` means the value was dropped (full output) or discarded (receiver gone)"]
    pub fn emit_to<A: Send + 'static>(&mut self, output: &Output<A>, value: A) -> bool {
        let queued = self.fx.links.push_typed_output(&output.queue, value);
        self.count_outputs();
        queued
    }

    /// Moves what the last delivery to outputs cost into the context's status counters.
    #[inline]
    fn count_outputs(&mut self) {
        // The time waiting for room is published while it passes (`OutputWaitBoard`).
        self.fx.stats.output_drops += self.fx.links.take_output_drops();
    }

    /// The channel called `name` (created on first use).
    ///
    /// # Errors
    /// [`Error::TooManyChannels`] past the builder's `max_channels`.
    ///
    /// ```
    #[doc = include_str!("../doc/scope_example_prelude.txt")]
    /// // A handler's channel and the correlator's are the same channel: names are interned once.
    /// struct Named;
    /// impl Monitor<Ev> for Named {
    ///     fn on_load(&mut self, cx: &mut Scope<'_, Ev, Self>) {
    ///         let alerts = cx.channel("alerts").expect("below max_channels");
    ///         cx.emit(alerts, Ev::Alert(0));
    ///     }
    /// }
    /// assert_eq!(run(|c| c.load(Named), []), [Ev::Alert(0)]);
    /// ```
    pub fn channel(&mut self, name: &str) -> Result<Channel, Error> {
        self.fx.links.shared().channels.intern(name)
    }

    /// Subscribes this instance to `channel` (R4.4). Subscriptions are counted per context: the
    /// context receives one copy per send however many subscriptions it holds; they end with
    /// [`unsubscribe`](Self::unsubscribe) or with the instance.
    ///
    /// ```
    #[doc = include_str!("../doc/scope_example_prelude.txt")]
    /// // `Audit` receives what is sent on "large" once it has subscribed.
    /// struct Audit;
    /// impl Monitor<Ev> for Audit {
    ///     fn on_load(&mut self, cx: &mut Scope<'_, Ev, Self>) {
    ///         let large = cx.channel("large").expect("below max_channels");
    ///         let alerts = cx.channel("alerts").expect("below max_channels");
    ///         cx.subscribe(large); // takes effect when on_load returns
    ///         cx.on_all(Pattern::kind(Kind::Alert), move |_m, cx, e| {
    ///             cx.emit(alerts, e.clone());
    ///         });
    ///     }
    /// }
    /// struct Source;
    /// impl Monitor<Ev> for Source {
    ///     fn on_load(&mut self, cx: &mut Scope<'_, Ev, Self>) {
    ///         let large = cx.channel("large").expect("below max_channels");
    ///         cx.on_all(Pattern::kind(Kind::Tx), move |_m, cx, e| {
    ///             if let Ev::Tx { card, amount, .. } = *e {
    ///                 if amount > 1_000 {
    ///                     cx.send(large, Ev::Alert(card));
    ///                 }
    ///             }
    ///         });
    ///     }
    /// }
    /// // Both in `main`: Audit subscribes before the first transaction is taken.
    /// let seen = run(|c| { c.load(Audit)?; c.load(Source) }, [tx(1, 5_000, 0), tx(2, 10, 1)]);
    /// assert_eq!(seen, [Ev::Alert(1)]);
    /// ```
    pub fn subscribe(&mut self, channel: Channel) {
        let op = Op::Subscribe(self.fx.current, channel);
        self.fx.ops.push(op);
    }

    /// Gives back one of this instance's subscriptions to `channel`; does nothing if it holds none.
    ///
    /// ```
    #[doc = include_str!("../doc/scope_example_prelude.txt")]
    /// // A transaction of card 0 tells `Listen` to stop receiving "large"; later sends skip `main`.
    /// struct Listen;
    /// impl Monitor<Ev> for Listen {
    ///     fn on_load(&mut self, cx: &mut Scope<'_, Ev, Self>) {
    ///         let large = cx.channel("large").expect("below max_channels");
    ///         let alerts = cx.channel("alerts").expect("below max_channels");
    ///         cx.subscribe(large);
    ///         cx.on_all(Pattern::kind(Kind::Tx).key(0), move |_m, cx, _e| {
    ///             cx.unsubscribe(large); // in effect before the next listener of this event
    ///         });
    ///         cx.on_all(Pattern::kind(Kind::Alert), move |_m, cx, e| {
    ///             cx.emit(alerts, e.clone());
    ///         });
    ///     }
    /// }
    /// struct Source;
    /// impl Monitor<Ev> for Source {
    ///     fn on_load(&mut self, cx: &mut Scope<'_, Ev, Self>) {
    ///         let large = cx.channel("large").expect("below max_channels");
    ///         cx.on_all(Pattern::kind(Kind::Tx), move |_m, cx, e| {
    ///             if let Ev::Tx { card, .. } = *e {
    ///                 cx.send(large, Ev::Alert(card));
    ///             }
    ///         });
    ///     }
    /// }
    /// let seen = run(|c| { c.load(Listen)?; c.load(Source) }, [tx(1, 10, 0), tx(0, 10, 1), tx(2, 10, 2)]);
    /// assert_eq!(seen, [Ev::Alert(1)]);
    /// ```
    pub fn unsubscribe(&mut self, channel: Channel) {
        let op = Op::Unsubscribe(self.fx.current, channel);
        self.fx.ops.push(op);
    }

    /// Creates a context (R1.2) and starts its thread. While shutdown processes what was accepted
    /// this still works; once it ends the instances (in an `on_die(Shutdown)` hook) it is refused.
    ///
    /// # Errors
    /// [`Error::TooManyContexts`], [`Error::NoSuchCore`], [`Error::ThreadSpawn`],
    /// [`Error::ShutDown`] once shutdown ends the instances.
    ///
    /// ```
    #[doc = include_str!("../doc/scope_example_prelude.txt")]
    /// // A monitor that starts its own worker context and an instance there.
    /// #[derive(Clone)]
    /// struct Boss;
    /// impl Monitor<Ev> for Boss {
    ///     fn on_load(&mut self, cx: &mut Scope<'_, Ev, Self>) {
    ///         let worker = cx.create_context(ContextOptions::new("worker")).expect("a context");
    ///         cx.spawn_to(worker, self, |_m, cx| {
    ///             let alerts = cx.channel("alerts").expect("below max_channels");
    ///             cx.emit(alerts, Ev::Alert(u64::from(cx.context().id())));
    ///         })
    ///         .expect("worker runs");
    ///     }
    /// }
    /// let seen = run(|c| c.load(Boss), []);
    /// assert_eq!(seen.len(), 1);
    /// ```
    pub fn create_context(&mut self, options: ContextOptions) -> Result<ContextRef, Error> {
        let shared = self.fx.links.shared().clone();
        crate::context::create_context(&shared, options, true)
    }

    fn register(&mut self, mode: Mode, spec: Spec<E>) -> ListenerHandle {
        let id = self.fx.next_handle;
        self.fx.next_handle += 1;
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

    fn listen(
        &mut self,
        mode: Mode,
        pattern: Pattern<E>,
        handler: impl FnMut(&mut M, &mut Scope<'_, E, M>, &E) + Send + 'static,
    ) -> ListenerHandle {
        self.register(mode, Spec::Template(pattern, erase_handler(handler)))
    }

    /// The context's logical time: the time of the last clock tick it took (R7.1), or under
    /// [`event_time`](crate::CorrelatorBuilder::event_time) the latest stamp it reached. It does not
    /// change while one inbox entry is processed, so it is also the time at which the current event
    /// was taken; during a timer's handler it is the timer's trigger time.
    ///
    /// ```
    #[doc = include_str!("../doc/scope_example_prelude.txt")]
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
    #[doc = include_str!("../doc/scope_example_prelude.txt")]
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
        let spec = Spec::Expr(expr.into(), erase_match_handler(handler));
        self.register(Mode::Once, spec)
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
        let spec = Spec::Expr(expr.into(), erase_match_handler(handler));
        self.register(Mode::All, spec)
    }

    /// Registers a listener that fires once on the next event matching `pattern`, then ends (R6.3).
    ///
    /// ```
    #[doc = include_str!("../doc/scope_example_prelude.txt")]
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
    #[doc = include_str!("../doc/scope_example_prelude.txt")]
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
    #[doc = include_str!("../doc/scope_example_prelude.txt")]
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
    #[doc = include_str!("../doc/scope_example_prelude.txt")]
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
    #[doc = include_str!("../doc/scope_example_prelude.txt")]
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
    #[doc = include_str!("../doc/scope_example_prelude.txt")]
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

    /// Creates `new`, an instance of any monitor, in this context when this handler returns, as
    /// [`spawn`](Self::spawn) does (R6.2): the pool's per-key factory (`crate::pool`).
    pub(crate) fn spawn_new(&mut self, new: NewInstance<E>) {
        self.fx.ops.push(Op::Spawn(new));
    }
}

impl<'a, E: Event, M: Monitor<E>> Scope<'a, E, M> {
    /// Creates a new instance in this context with a copy of `state` (listeners are not copied) and
    /// runs `init` in it when this handler returns (R6.2).
    ///
    /// Once shutdown ends the instances (in an `on_die(Shutdown)` hook, or a handler of an event it
    /// routes), the spawn is dropped: `init` does not run and no instance is created, so no
    /// `on_die` is owed for it and shutdown always ends.
    ///
    /// ```
    #[doc = include_str!("../doc/scope_example_prelude.txt")]
    /// // One instance per card: the first transaction of a new card spawns a watcher for it (the
    /// // pattern that `Pool::load_per_key` packages).
    /// #[derive(Clone, Default)]
    /// struct Cards { seen: std::collections::HashSet<u64>, card: u64, count: u32 }
    /// impl Monitor<Ev> for Cards {
    ///     fn on_load(&mut self, cx: &mut Scope<'_, Ev, Self>) {
    ///         cx.on_all(Pattern::kind(Kind::Tx), |m: &mut Cards, cx, e| {
    ///             let Ev::Tx { card, .. } = *e else { return };
    ///             if m.seen.insert(card) {
    ///                 let watcher = Cards { card, ..Cards::default() };
    ///                 cx.spawn(&watcher, move |_w, cx| {
    ///                     let alerts = cx.channel("alerts").expect("below max_channels");
    ///                     // Registered from the spawn: it will not see this transaction (R6.5).
    ///                     cx.on_all(Pattern::kind(Kind::Tx).key(card), move |w: &mut Cards, cx, _e| {
    ///                         w.count += 1;
    ///                         if w.count == 2 {
    ///                             cx.emit(alerts, Ev::Alert(w.card));
    ///                         }
    ///                     });
    ///                 });
    ///             }
    ///         });
    ///     }
    /// }
    /// let seen = run(
    ///     |c| c.load(Cards::default()),
    ///     [tx(1, 10, 0), tx(2, 10, 1), tx(1, 10, 2), tx(1, 10, 3)],
    /// );
    /// assert_eq!(seen, [Ev::Alert(1)]); // card 1's second transaction after the first
    /// ```
    pub fn spawn(
        &mut self,
        state: &M,
        init: impl FnOnce(&mut M, &mut Scope<'_, E, M>) + Send + 'static,
    ) where
        M: Clone,
    {
        let op = Op::Spawn(spawned_instance(state.clone(), init));
        self.fx.ops.push(op);
    }

    /// Like [`spawn`](Self::spawn), in context `ctx`: the new instance travels through `ctx`'s inbox,
    /// so it keeps its order with this context's later sends to `ctx` (R2.4).
    ///
    /// # Errors
    /// [`Error::ContextStopped`] or [`Error::UnknownContext`]; the caller keeps its own state. Once
    /// shutdown ends the instances every inbox is closed, so a `spawn_to` from an
    /// `on_die(Shutdown)` hook is refused with [`Error::ContextStopped`]: `init` does not run and
    /// no instance is created.
    ///
    /// ```
    #[doc = include_str!("../doc/scope_example_prelude.txt")]
    /// // The loader puts a watcher for card 7 into a context of its own and forwards transactions
    /// // there; the watcher's spawn entry is ahead of them in that inbox (R2.4).
    /// #[derive(Clone)]
    /// struct Watch { card: u64, worker: Option<ContextRef> }
    /// impl Monitor<Ev> for Watch {
    ///     fn on_load(&mut self, cx: &mut Scope<'_, Ev, Self>) {
    ///         let worker = cx.create_context(ContextOptions::new("card-7")).expect("a context");
    ///         cx.spawn_to(worker, self, |w, cx| {
    ///             let alerts = cx.channel("alerts").expect("below max_channels");
    ///             cx.on_all(Pattern::kind(Kind::Tx).key(w.card), move |_w, cx, e| {
    ///                 cx.emit(alerts, e.clone());
    ///             });
    ///         })
    ///         .expect("the new context runs");
    ///         self.worker = Some(worker);
    ///         cx.on_all(Pattern::kind(Kind::Tx), |m: &mut Watch, cx, e| {
    ///             if let Some(worker) = m.worker {
    ///                 cx.send_to(worker, e.clone()).expect("the worker runs until shutdown");
    ///             }
    ///         });
    ///     }
    /// }
    /// let seen = run(|c| c.load(Watch { card: 7, worker: None }), [tx(7, 10, 0), tx(8, 10, 1)]);
    /// assert_eq!(seen, [tx(7, 10, 0)]);
    /// ```
    pub fn spawn_to(
        &mut self,
        ctx: ContextRef,
        state: &M,
        init: impl FnOnce(&mut M, &mut Scope<'_, E, M>) + Send + 'static,
    ) -> Result<(), Error>
    where
        M: Clone,
    {
        let entry = Entry::Spawn(Box::new(spawned_instance(state.clone(), init)));
        let r = self.fx.links.push_entry(ctx, entry, Wait::Block);
        self.fx.stats.blocked_ns += self.fx.links.take_blocked_ns();
        match r {
            Ok(()) => {
                self.fx.stats.sent += 1;
                Ok(())
            }
            Err(kind) => Err(crate::deliver::kind_to_error(kind, ctx)),
        }
    }
}
