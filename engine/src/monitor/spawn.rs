//! `Scope`'s methods that create instances (R6.2): in this context when the handler returns, or
//! in another context through its inbox.
//!
//! Owns no state. May import the leaves, `entry`, `deliver` and `error`.

use crate::deliver::Wait;
use crate::entry::{Effects, Entry, NewInstance, Op};
use crate::error::Error;
use crate::event::Event;
use crate::id::ContextRef;

use super::handlers::spawned_instance;
use super::{Monitor, Scope};

impl<'a, E: Event, M: 'static> Scope<'a, E, M> {
    /// Creates `new`, an instance of any monitor, in this context when this handler returns, as
    /// [`spawn`](Self::spawn) does (R6.2): the pool's per-key factory (`crate::pool`).
    pub(crate) fn spawn_new(&mut self, new: NewInstance<E>) {
        self.fx.ops.push(Op::Spawn(new));
    }

    /// The context's effects, for the engine's own monitors (a pool's dispatcher registering
    /// its look-ahead hint, and itself for checkpoints).
    pub(crate) fn effects(&mut self) -> &mut Effects<E> {
        self.fx
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
    #[doc = include_str!("../../doc/scope_example_prelude.txt")]
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
    #[doc = include_str!("../../doc/scope_example_prelude.txt")]
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
        let entry = Entry::Spawn(
            self.fx.links.origin,
            Box::new(spawned_instance(state.clone(), init)),
        );
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
