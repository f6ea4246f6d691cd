//! [`Scope`] itself: the value a handler acts through, and what a handler reads from it (its
//! context, a template typed by it). Its other methods sit in the sibling files by job.
//!
//! Owns no state beyond the borrowed effects. May import the leaves, `entry` and `pattern`.

use std::marker::PhantomData;

use crate::entry::Effects;
use crate::event::Event;
use crate::id::{ContextRef, EmitId};
use crate::pattern::Pattern;

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
    pub(super) fx: &'a mut Effects<E>,
    pub(super) _monitor: PhantomData<fn() -> M>,
}

impl<'a, E: Event, M: 'static> Scope<'a, E, M> {
    pub(crate) fn new(fx: &'a mut Effects<E>) -> Self {
        Self {
            fx,
            _monitor: PhantomData,
        }
    }

    /// The context's next [`EmitId`]: `{context, seq}`, `seq` counting up from 0 in this
    /// context (SPEC R11.14). Stamp what goes out with it, and a sink can tell a value it has
    /// published from a new one: a checkpoint saves the count and a recovery restores it, so a
    /// value that the recovered run derives again from the same entries, in the same order,
    /// gets the id it had before the crash. That holds for a context fed by one sender (one
    /// input, or one partition of a stream, per context) and for what follows from it; where
    /// several senders feed one context, the order in which it takes their entries after the
    /// checkpoint may differ from the first time.
    ///
    /// ```
    #[doc = include_str!("../../doc/scope_example_prelude.txt")]
    /// // Large transactions go out with an id a sink can de-duplicate by.
    /// struct Large { out: Output<(EmitId, u64)> }
    /// impl Monitor<Ev> for Large {
    ///     fn on_load(&mut self, cx: &mut Scope<'_, Ev, Self>) {
    ///         cx.on_all(Pattern::kind(Kind::Tx), |m: &mut Large, cx, e| {
    ///             if let Ev::Tx { card, amount, .. } = *e {
    ///                 if amount > 1_000 {
    ///                     let id = cx.emit_id();
    ///                     let _ = cx.emit_to(&m.out, (id, card));
    ///                 }
    ///             }
    ///         });
    ///     }
    /// }
    /// let c = Correlator::<Ev>::builder().event_time().build()?;
    /// let (out, large) = c.typed_output(OutputOptions::default())?;
    /// c.load(Large { out })?;
    /// let input = c.input();
    /// c.start();
    /// for e in [tx(1, 5_000, 0), tx(2, 10, 1), tx(3, 2_000, 2)] {
    ///     input.send_to(c.main(), e)?;
    /// }
    /// c.shutdown()?;
    /// let ids: Vec<String> = large.iter().map(|(id, card)| format!("{id}:{card}")).collect();
    /// assert_eq!(ids, ["0.0:1", "0.1:3"]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn emit_id(&mut self) -> EmitId {
        let seq = self.fx.emit_ids;
        self.fx.emit_ids += 1;
        EmitId {
            context: self.fx.me.id(),
            seq,
        }
    }

    /// The context this handler runs in.
    ///
    /// ```
    #[doc = include_str!("../../doc/scope_example_prelude.txt")]
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
}
