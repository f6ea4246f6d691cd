//! `Scope`'s methods that move events: routing to the front of this context's queue (R3.1),
//! sending to the back of an inbox or to a channel's subscribers (R4.1, R4.4), emitting to
//! outputs (R4.3).
//!
//! Owns no state. May import the leaves, `deliver`, `channel`, `output`, `record` and `error`.

use crate::channel::Channel;
use crate::deliver::Wait;
use crate::error::{SendBatchError, SendError};
use crate::event::Event;
use crate::id::ContextRef;
use crate::output::Output;
use crate::record;

use super::Scope;

impl<'a, E: Event, M: 'static> Scope<'a, E, M> {
    /// Puts `event` at the front of this context's queue (R3.1): it is processed after the events
    /// this handler's event routes before it, and before anything that was pending (R3.2). Never
    /// refused, never counted against the inbox capacity (R3.5).
    ///
    /// ```
    #[doc = include_str!("../../doc/scope_example_prelude.txt")]
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
    #[doc = include_str!("../../doc/scope_example_prelude.txt")]
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
    #[doc = include_str!("../../doc/scope_example_prelude.txt")]
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
    #[doc = include_str!("../../doc/scope_example_prelude.txt")]
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
    #[doc = include_str!("../../doc/scope_example_prelude.txt")]
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
    #[doc = include_str!("../../doc/scope_example_prelude.txt")]
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
        self.fx
            .journal
            .emit(record::CHANNEL_EMIT | u64::from(channel.0), || 0);
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
    #[doc = include_str!("../../doc/scope_example_prelude.txt")]
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
        let fingerprint = || output.fingerprint.map_or(0, |f| f(&value));
        self.fx.journal.emit(output.queue.id(), fingerprint);
        let queued = self.fx.links.push_typed_output(&output.queue, value);
        self.count_outputs();
        queued
    }

    /// The handle of the typed output named `name` ([`Correlator::named_output`]), if there is
    /// one of values `A`: how a persistent monitor restored from a checkpoint finds its outputs
    /// again in `Persistent::on_restore` (feature `checkpoint`; its state holds data, not
    /// handles). Takes a lock: look it up once, in a load or restore hook, not per event.
    ///
    /// [`Correlator::named_output`]: crate::Correlator::named_output
    pub fn output<A: Send + 'static>(&self, name: &str) -> Option<Output<A>> {
        self.fx.links.shared().outputs.named(name)
    }

    /// Moves what the last delivery to outputs cost into the context's status counters.
    #[inline]
    fn count_outputs(&mut self) {
        // The time waiting for room is published while it passes (`OutputWaitBoard`).
        self.fx.stats.output_drops += self.fx.links.take_output_drops();
    }
}
