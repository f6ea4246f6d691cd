//! `Scope`'s methods that change what is connected: channels by name, this instance's
//! subscriptions (R4.4), new contexts (R1.2).
//!
//! Owns no state. May import the leaves, `entry`, `channel`, `error` and `context`.

use crate::channel::Channel;
use crate::config::ContextOptions;
use crate::entry::Op;
use crate::error::Error;
use crate::event::Event;
use crate::id::ContextRef;

use super::Scope;

impl<'a, E: Event, M: 'static> Scope<'a, E, M> {
    /// The channel called `name` (created on first use).
    ///
    /// # Errors
    /// [`Error::TooManyChannels`] past the builder's `max_channels`.
    ///
    /// ```
    #[doc = include_str!("../../doc/scope_example_prelude.txt")]
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
    #[doc = include_str!("../../doc/scope_example_prelude.txt")]
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
    #[doc = include_str!("../../doc/scope_example_prelude.txt")]
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
    #[doc = include_str!("../../doc/scope_example_prelude.txt")]
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
        let created = crate::context::create_context(&shared, options, true)?;
        self.fx.journal.created(created.id());
        Ok(created)
    }
}
