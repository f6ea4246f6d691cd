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
use crate::deliver::{OutputDelivery, Wait};
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
    pub fn context(&self) -> ContextRef {
        self.fx.me
    }

    /// Puts `event` at the front of this context's queue (R3.1): it is processed after the events
    /// this handler's event routes before it, and before anything that was pending (R3.2). Never
    /// refused, never counted against the inbox capacity (R3.5).
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
    /// value is discarded and `false` returned.
    pub fn emit_to<A: Send + 'static>(&mut self, output: &Output<A>, value: A) -> bool {
        let queued = self.fx.links.push_output(&output.queue, value) == OutputDelivery::Queued;
        self.count_outputs();
        queued
    }

    /// Moves what the last delivery to outputs cost into the context's status counters.
    #[inline]
    fn count_outputs(&mut self) {
        let (drops, blocked_ns) = self.fx.links.take_output_tallies();
        self.fx.stats.output_drops += drops;
        self.fx.stats.output_blocked_ns += blocked_ns;
    }

    /// The channel called `name` (created on first use).
    ///
    /// # Errors
    /// [`Error::TooManyChannels`] past the builder's `max_channels`.
    pub fn channel(&mut self, name: &str) -> Result<Channel, Error> {
        self.fx.links.shared().channels.intern(name)
    }

    /// Subscribes this instance to `channel` (R4.4). Subscriptions are counted per context: the
    /// context receives one copy per send however many subscriptions it holds; they end with
    /// [`unsubscribe`](Self::unsubscribe) or with the instance.
    pub fn subscribe(&mut self, channel: Channel) {
        let op = Op::Subscribe(self.fx.current, channel);
        self.fx.ops.push(op);
    }

    /// Gives back one of this instance's subscriptions to `channel`; does nothing if it holds none.
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
    pub fn now(&self) -> Time {
        self.fx.now
    }

    /// Registers a listener for an event expression (R7.3) that fires once, for the first match,
    /// then ends. It also ends, without firing, once the expression can no longer match.
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
    pub fn on(
        &mut self,
        pattern: Pattern<E>,
        handler: impl FnMut(&mut M, &mut Scope<'_, E, M>, &E) + Send + 'static,
    ) -> ListenerHandle {
        self.listen(Mode::Once, pattern, handler)
    }

    /// Registers a listener that fires on every event matching `pattern` until quit (R6.3).
    /// Listeners matching one event fire in registration order (R6.4).
    pub fn on_all(
        &mut self,
        pattern: Pattern<E>,
        handler: impl FnMut(&mut M, &mut Scope<'_, E, M>, &E) + Send + 'static,
    ) -> ListenerHandle {
        self.listen(Mode::All, pattern, handler)
    }

    /// Registers a listener that fires for events matching `pattern` that no ordinary (`on`,
    /// `on_all`) listener of this context matched (R6.6).
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
    pub fn completed(
        &mut self,
        pattern: Pattern<E>,
        handler: impl FnMut(&mut M, &mut Scope<'_, E, M>, &E) + Send + 'static,
    ) -> ListenerHandle {
        self.listen(Mode::Completed, pattern, handler)
    }

    /// Ends a listener of this context (R6.3): it fires no more, even later in the current dispatch.
    /// A handle of another context, or of a listener that has ended, is ignored.
    pub fn quit(&mut self, handle: ListenerHandle) {
        if handle.context == self.fx.me {
            self.fx.ops.push(Op::Quit(handle.id));
        }
    }

    /// Ends this instance once the handler returns (R6.8).
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
