//! External input handles (SPEC R2.1, R4.2, R5.3); output receivers are the `output` module's.
//!
//! Owns the user's side of input: the API only. Every send goes through `deliver`'s links (and so
//! through the send core); the shared input's waits are `deliver`'s too. May import the leaves,
//! `channel`, `error`, `entry`, `deliver`, `monitor` (the instance that `load_in` sends) and
//! (feature `async`) `send_future`, whose futures it returns.

use std::cell::RefCell;
#[cfg(feature = "async")]
use std::future::Future;
use std::time::{Duration, Instant};

use crate::channel::Channel;
use crate::deliver::{kind_to_error, shared_send_channel, shared_send_to, Links, NoPlaces, Wait};
use crate::entry::Entry;
use crate::error::{Error, SendBatchError, SendError, SendErrorKind};
use crate::event::Event;
use crate::id::ContextRef;
use crate::monitor::{load_instance, Monitor};
#[cfg(feature = "async")]
use crate::send_future::{LinksAccess, SendBatchTo, SendChannel, SendTo};
use crate::sync::{self, Ordering, StdArc, StdMutex};
use crate::time::Time;

#[cfg(feature = "async")]
impl<E: Event> LinksAccess<E> for &mut InputHandle<E> {
    fn with_links<R>(&mut self, f: impl FnOnce(&mut Links<E>) -> R) -> R {
        f(self.links.get_mut())
    }
}

#[cfg(feature = "async")]
impl<E: Event> LinksAccess<E> for &SharedInput<E> {
    fn with_links<R>(&mut self, f: impl FnOnce(&mut Links<E>) -> R) -> R {
        f(&mut sync::lock_std(&self.links))
    }
}

/// Feeds events into the correlator from the service's own threads.
///
/// Each handle is one *sender* for the per-sender FIFO rule (R2.3): two events one handle puts into
/// the same inbox are processed in that order. A handle is `Send` but not `Sync`: clone it for each
/// thread (a clone is a new sender). Entries sent before
/// [`Correlator::start`](crate::Correlator::start) wait in the inboxes, which is how a recorded
/// stream is replayed deterministically.
///
/// Three ways to send (R5.3): blocking (`send_to`, `send`) waits for room; `try_*` returns
/// [`SendErrorKind::Full`] with the event at once; `*_timeout` waits up to
/// a bound and then returns [`SendErrorKind::Timeout`] with the event.
/// A refused send keeps nothing of the event: it all comes back in the error. With the `async`
/// feature, `send_to_async`, `send_batch_to_async` and `send_async` wait for room as futures,
/// without blocking the executor's thread. For one handle shared by many threads or tasks, see
/// [`SharedInput`].
///
/// A handle used inside a handler (on a context's own thread) waits for room as that context
/// does: where waiting would close a cycle of contexts waiting on full inboxes (its own inbox is
/// the shortest), the entry is taken beyond capacity instead (R5.2), so a blocking send into the
/// handler's own full inbox does not hang. [`Scope::send_to`](crate::Scope::send_to) is still the
/// better way there: it is the context's own sender (R2.3) and keeps working during shutdown.
pub struct InputHandle<E: Event> {
    pub(crate) links: RefCell<Links<E>>,
}

impl<E: Event> InputHandle<E> {
    pub(crate) fn new(mut links: Links<E>) -> Self {
        // Fill the cache of the contexts that exist now: a first send to one of them (or a
        // `send_time`, which reaches all) then allocates nothing. Contexts created later are
        // added when first sent to.
        links.refresh();
        links.name_input();
        Self {
            links: RefCell::new(links),
        }
    }

    /// Appends `event` to `ctx`'s inbox, waiting for room if it is full.
    ///
    /// # Errors
    /// `Closed` once shutdown began, `ContextStopped`, `UnknownContext`, or `FullBeforeStart` when
    /// the inbox is full and the correlator was never started. The event comes back in the error.
    //
    // Always inlined (with `Links::send_to`): called out of line, the event reached the slot
    // through memory and the compiler copied it with vector stores, which cost a send a second
    // cross-core transfer. The inbox now writes entries word by word itself, and out of line
    // still halves the harness's stream. Figures: harness/BENCHMARKS.md, "The first store into a
    // slot" and "Why `InputHandle::send_to` stays inlined after the word-by-word write".
    #[inline(always)]
    pub fn send_to(&self, ctx: ContextRef, event: E) -> Result<(), SendError<E>> {
        self.links.borrow_mut().send_to(ctx, event, Wait::Block)
    }

    /// Appends `event` to `ctx`'s inbox if there is room now.
    ///
    /// # Errors
    /// `Full` (with the event) when the inbox is at capacity; otherwise as [`send_to`](Self::send_to).
    pub fn try_send_to(&self, ctx: ContextRef, event: E) -> Result<(), SendError<E>> {
        self.links.borrow_mut().send_to(ctx, event, Wait::Never)
    }

    /// Appends `event` to `ctx`'s inbox, waiting at most `timeout` for room.
    ///
    /// # Errors
    /// `Timeout` (with the event) when no room appeared in time; otherwise as
    /// [`send_to`](Self::send_to).
    pub fn send_to_timeout(
        &self,
        ctx: ContextRef,
        event: E,
        timeout: Duration,
    ) -> Result<(), SendError<E>> {
        let deadline = Instant::now() + timeout;
        self.links
            .borrow_mut()
            .send_to(ctx, event, Wait::Until(deadline))
    }

    /// Appends the events of `events` to `ctx`'s inbox, in order, taking as many places at once as
    /// there is room for (one atomic reservation per run of places, instead of one per event) and
    /// waiting for room when there is none, as [`send_to`](Self::send_to) does. A batch of any size
    /// is accepted: one larger than the inbox's capacity goes in parts as room frees up. Per-sender
    /// FIFO (R2.3) holds across and within batches: this handle's earlier sends come before the
    /// batch, its later ones after it.
    ///
    /// The events are taken from the vector, which keeps its memory, so a sender that refills the
    /// same vector sends without allocating. On success the vector is empty.
    ///
    /// # Errors
    /// As [`send_to`](Self::send_to) (`Closed`, `ContextStopped`, `UnknownContext`,
    /// `FullBeforeStart`). The error says how many events were sent; the others are still in
    /// `events`, in order.
    ///
    /// # Example
    /// ```
    /// use correlator::{Correlator, Event};
    ///
    /// #[derive(Clone, Debug)]
    /// struct Tick(u32);
    /// impl Event for Tick {
    ///     type Kind = ();
    ///     fn kind(&self) {}
    /// }
    ///
    /// let c = Correlator::<Tick>::builder().build()?;
    /// let input = c.input();
    /// c.start();
    /// let mut batch = Vec::with_capacity(64);
    /// for round in 0..3 {
    ///     batch.extend((0..64).map(|i| Tick(round * 64 + i)));
    ///     input.send_batch_to(c.main(), &mut batch)?;
    ///     assert!(batch.is_empty());
    /// }
    /// c.shutdown()?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn send_batch_to(
        &self,
        ctx: ContextRef,
        events: &mut Vec<E>,
    ) -> Result<(), SendBatchError> {
        self.links
            .borrow_mut()
            .send_batch_to(ctx, events, Wait::Block)
            .map(drop)
    }

    /// Appends every event of `events` to `ctx`'s inbox if there is room for all of them now, with
    /// one atomic reservation; otherwise sends none (all-or-nothing, like
    /// [`try_send_to`](Self::try_send_to) for one event). On success the vector is empty; on an
    /// error it is untouched.
    ///
    /// # Errors
    /// `Full` when fewer places are free than `events.len()`; `BatchTooLarge` when the batch is
    /// larger than the inbox's capacity (it could never fit at once); otherwise as
    /// [`send_to`](Self::send_to).
    pub fn try_send_batch_to(
        &self,
        ctx: ContextRef,
        events: &mut Vec<E>,
    ) -> Result<(), SendBatchError> {
        self.links
            .borrow_mut()
            .send_batch_to(ctx, events, Wait::Never)
            .map(drop)
    }

    /// Like [`try_send_batch_to`](Self::try_send_batch_to) (all-or-nothing), waiting at most
    /// `timeout` for room for the whole batch at once (holding no place while it waits).
    ///
    /// # Errors
    /// `Timeout` when room for the whole batch did not appear in time (nothing was sent);
    /// `BatchTooLarge`, or as [`send_to`](Self::send_to).
    pub fn send_batch_to_timeout(
        &self,
        ctx: ContextRef,
        events: &mut Vec<E>,
        timeout: Duration,
    ) -> Result<(), SendBatchError> {
        let deadline = Instant::now() + timeout;
        self.links
            .borrow_mut()
            .send_batch_to(ctx, events, Wait::Until(deadline))
            .map(drop)
    }

    /// Sends `event` to `channel`: one copy to every subscribed context (waiting for room in each, one
    /// after the other) and to every output receiver, each as its
    /// [`Overflow`](crate::Overflow) policy says (a full `Block` output makes this send wait for
    /// its reader, started or not). Returns how many received it; 0 means it was dropped and
    /// counted (R4.5).
    ///
    /// Before [`Correlator::start`](crate::Correlator::start) nobody makes room, so a send that
    /// finds a subscriber's inbox full could never end: it is then all-or-nothing, like
    /// [`try_send`](Self::try_send), and refused with `FullBeforeStart`.
    ///
    /// # Errors
    /// `Closed` once shutdown began; `FullBeforeStart` (with the event, and the context that was
    /// full; no subscriber got a copy) when a subscriber's inbox is full and the correlator was
    /// never started.
    pub fn send(&self, channel: Channel, event: E) -> Result<usize, SendError<E>> {
        let mut links = self.links.borrow_mut();
        let shared = links.shared();
        if shared.input_closed() {
            return Err(SendError::new(
                crate::error::SendErrorKind::Closed,
                None,
                event,
            ));
        }
        let mut event = event;
        if !shared.started.load(Ordering::Acquire) {
            match links.try_send_channel(channel, event, None) {
                Ok(d) => return Ok(d.total()),
                // A full inbox (the error names it) before `start()` could never make room; a
                // full output (no target) is read by the service's own thread, started or not:
                // the blocking send below waits for it.
                Err(e) if e.kind() == SendErrorKind::Full => {
                    // `started` is read after the refusal: if it is still unset, nobody could
                    // have made room. Otherwise the blocking send below waits for it.
                    if e.target().is_some() && !links.shared().started.load(Ordering::Acquire) {
                        let target = e.target();
                        let event = e.into_inner();
                        return Err(SendError::new(
                            SendErrorKind::FullBeforeStart,
                            target,
                            event,
                        ));
                    }
                    event = e.into_inner();
                }
                Err(e) if e.kind() == SendErrorKind::Closed => return Err(e),
                // A stopped subscriber (its thread could not start) is skipped below, as ever.
                Err(e) => event = e.into_inner(),
            }
        }
        Ok(links
            .send_channel(channel, event, Wait::Block, true)
            .total())
    }

    /// Sends every event of `events` to `channel`, in order: each subscribed context gets the whole
    /// batch (its inbox places reserved as many at once as are free, waiting for room as
    /// [`send_batch_to`](Self::send_batch_to) does), one subscriber after the other, and every
    /// output receiver gets each event. Returns how many deliveries were made (events times
    /// receivers); 0 means the batch was dropped and counted (R4.5). The vector is emptied and
    /// keeps its memory.
    ///
    /// Before [`Correlator::start`](crate::Correlator::start) each event goes through
    /// [`send`](Self::send) instead, which is all-or-nothing then.
    ///
    /// # Errors
    /// `Closed` once shutdown began; before `start()`, as [`send`](Self::send) (`FullBeforeStart`
    /// when a subscriber is full). The error says how many events were sent; the others are still
    /// in `events`, in order.
    pub fn send_batch(
        &self,
        channel: Channel,
        events: &mut Vec<E>,
    ) -> Result<usize, SendBatchError> {
        let mut links = self.links.borrow_mut();
        if links.shared().input_closed() {
            return Err(SendBatchError::new(SendErrorKind::Closed, None, 0));
        }
        if links.shared().started.load(Ordering::Acquire) {
            return Ok(links.send_channel_batch(channel, events, true).total());
        }
        drop(links);
        // Nobody takes entries yet: event by event, each all-or-nothing (see `send`).
        let mut deliveries = 0;
        let mut sent = 0;
        while !events.is_empty() {
            let e = events.remove(0);
            match self.send(channel, e) {
                Ok(k) => {
                    deliveries += k;
                    sent += 1;
                }
                Err(err) => {
                    let (kind, target) = (err.kind(), err.target());
                    events.insert(0, err.into_inner());
                    return Err(SendBatchError::new(kind, target, sent));
                }
            }
        }
        Ok(deliveries)
    }

    /// Sends `event` to `channel` only if every subscribed context has room now: all of them get a
    /// copy, or none does and the event comes back. An output of the channel with the
    /// [`Block`](crate::Overflow::Block) policy that is full refuses the send too: it never waits.
    ///
    /// # Errors
    /// `Full` (with the event and the context that was full; no context when an output was
    /// full), `Closed`.
    pub fn try_send(&self, channel: Channel, event: E) -> Result<usize, SendError<E>> {
        let mut links = self.links.borrow_mut();
        if links.shared().input_closed() {
            return Err(SendError::new(
                crate::error::SendErrorKind::Closed,
                None,
                event,
            ));
        }
        links
            .try_send_channel(channel, event, None)
            .map(|d| d.total())
    }

    /// Like [`try_send`](Self::try_send), retrying for at most `timeout` (holding no place while it
    /// waits).
    ///
    /// # Errors
    /// `Timeout` (with the event), `Closed`.
    pub fn send_timeout(
        &self,
        channel: Channel,
        event: E,
        timeout: Duration,
    ) -> Result<usize, SendError<E>> {
        let mut links = self.links.borrow_mut();
        if links.shared().input_closed() {
            return Err(SendError::new(
                crate::error::SendErrorKind::Closed,
                None,
                event,
            ));
        }
        let deadline = Instant::now() + timeout;
        links
            .try_send_channel(channel, event, Some(deadline))
            .map(|d| d.total())
    }
}

impl<E: Event> InputHandle<E> {
    /// Loads a monitor with its first instance in `ctx`, through this handle: the load is an inbox
    /// entry of this sender (R2.3, R2.4), so it is processed after every event this handle put into
    /// `ctx`'s inbox before it and before every event it puts there after it. Since `ctx` processes
    /// each entry to completion, routes included, before it takes the next (R2.2), the monitor's
    /// [`on_load`](Monitor::on_load) runs once everything this handle sent to `ctx` earlier has been
    /// processed: a connector loads a small monitor that signals "done" from `on_load` and dies to
    /// learn that a batch it sent is processed. Waits for room like [`send_to`](Self::send_to).
    ///
    /// # Errors
    /// As [`Correlator::load_in`](crate::Correlator::load_in): [`Error::ShutDown`] once shutdown
    /// began, [`Error::UnknownContext`], [`Error::ContextStopped`], [`Error::FullBeforeStart`]. The
    /// monitor is dropped (its `on_load` never runs).
    ///
    /// # Example
    /// ```
    /// use std::sync::mpsc;
    /// use correlator::{Correlator, Event, Monitor, Scope};
    ///
    /// #[derive(Clone, Debug)]
    /// struct Ev;
    /// impl Event for Ev {
    ///     type Kind = ();
    ///     fn kind(&self) {}
    /// }
    ///
    /// /// Says "everything sent before me is processed", then ends.
    /// struct Receipt(mpsc::Sender<()>);
    /// impl Monitor<Ev> for Receipt {
    ///     fn on_load(&mut self, cx: &mut Scope<'_, Ev, Self>) {
    ///         let _ = self.0.send(());
    ///         cx.die();
    ///     }
    /// }
    ///
    /// let c = Correlator::<Ev>::builder().build()?;
    /// let input = c.input();
    /// c.start();
    /// input.send_to(c.main(), Ev)?;
    /// let (tx, rx) = mpsc::channel();
    /// input.load_in(c.main(), Receipt(tx))?;
    /// rx.recv()?; // the event sent above has been processed
    /// c.shutdown()?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn load_in<M: Monitor<E>>(&self, ctx: ContextRef, monitor: M) -> Result<(), Error> {
        let mut links = self.links.borrow_mut();
        let origin = links.origin;
        links
            .push_entry(
                ctx,
                Entry::Spawn(origin, Box::new(load_instance(monitor))),
                Wait::Block,
            )
            .map_err(|kind| kind_to_error(kind, ctx))
    }
}

impl<E: Event> InputHandle<E> {
    /// Advances the logical clock of every context to `t` (R7.1), for correlators built with
    /// [`external_time`](crate::CorrelatorBuilder::external_time) (or, under
    /// [`event_time`](crate::CorrelatorBuilder::event_time), to fire what is pending at the end
    /// of a stream). The tick travels through each
    /// inbox like an event, so it keeps its order with this handle's other sends; it waits for room.
    /// Returns how many contexts took it.
    ///
    /// # Errors
    /// `Closed` once shutdown began (the error carries `t`).
    pub fn send_time(&self, t: Time) -> Result<usize, SendError<Time>> {
        let mut links = self.links.borrow_mut();
        if links.shared().input_closed() {
            return Err(SendError::new(crate::error::SendErrorKind::Closed, None, t));
        }
        Ok(links.send_time_all(t, Wait::Block))
    }

    /// Advances the logical clock of one context to `t`: contexts' clocks are independent.
    ///
    /// # Errors
    /// As [`send_to`](Self::send_to), carrying `t`.
    pub fn send_time_to(&self, ctx: ContextRef, t: Time) -> Result<(), SendError<Time>> {
        self.links
            .borrow_mut()
            .push_entry(ctx, crate::entry::Entry::Tick(t), Wait::Block)
            .map_err(|kind| SendError::new(kind, Some(ctx), t))
    }
}

impl<E: Event> Clone for InputHandle<E> {
    /// A new, independent sender.
    fn clone(&self) -> Self {
        let shared = self.links.borrow().shared().clone();
        Self::new(Links::new(shared, None, NoPlaces))
    }
}

#[cfg(feature = "async")]
impl<E: Event> InputHandle<E> {
    /// Appends `event` to `ctx`'s inbox, waiting for room without blocking the thread: a future
    /// for any executor (no runtime dependency). When the inbox is full the task's waker joins the
    /// inbox's room-waiter list, as a parked thread would, and the task is woken when the context
    /// frees places (R5.1). Same results as [`send_to`](Self::send_to); per-sender FIFO (R2.3)
    /// holds with this handle's other sends (the future borrows the handle mutably, so the next
    /// send starts after this one ends).
    ///
    /// The future is `Send` and holds no place in the inbox while it waits. Dropping it before it
    /// completes (a timeout, a `select!` that took another branch) cancels the send: the event
    /// is dropped with it, nothing was sent, and its waker leaves the waiter list.
    ///
    /// Inside a handler (on a context's own thread) there is no executor to yield to: the future
    /// then waits as [`send_to`](Self::send_to) does there (beyond capacity where waiting would
    /// close a cycle of contexts, R5.2) and completes at its first poll.
    ///
    /// # Errors
    /// As [`send_to`](Self::send_to): `Closed` once shutdown began (also while waiting: R8.1),
    /// `ContextStopped`, `UnknownContext`, `FullBeforeStart`. The event comes back in the error.
    ///
    /// # Example
    /// ```
    /// use correlator::{Correlator, Event};
    ///
    /// #[derive(Clone, Debug)]
    /// struct Tick(u32);
    /// impl Event for Tick {
    ///     type Kind = ();
    ///     fn kind(&self) {}
    /// }
    ///
    /// # fn block_on<F: std::future::Future>(f: F) -> F::Output {
    /// #     struct Unpark(std::thread::Thread);
    /// #     impl std::task::Wake for Unpark {
    /// #         fn wake(self: std::sync::Arc<Self>) { self.0.unpark() }
    /// #     }
    /// #     let waker = std::task::Waker::from(std::sync::Arc::new(Unpark(std::thread::current())));
    /// #     let mut cx = std::task::Context::from_waker(&waker);
    /// #     let mut f = std::pin::pin!(f);
    /// #     loop {
    /// #         if let std::task::Poll::Ready(v) = f.as_mut().poll(&mut cx) { return v; }
    /// #         std::thread::park();
    /// #     }
    /// # }
    /// let c = Correlator::<Tick>::builder().inbox_capacity(4).build()?;
    /// let mut input = c.input();
    /// c.start();
    /// block_on(async {
    ///     for i in 0..100 {
    ///         input.send_to_async(c.main(), Tick(i)).await?;
    ///     }
    ///     Ok::<(), correlator::SendError<Tick>>(())
    /// })?;
    /// c.shutdown()?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn send_to_async(
        &mut self,
        ctx: ContextRef,
        event: E,
    ) -> impl Future<Output = Result<(), SendError<E>>> + Send + '_ {
        SendTo::new(self, ctx, event)
    }

    /// [`send_batch_to`](Self::send_batch_to) as a future: sends as many events of `events` as
    /// there is room for at once, and waits for room as [`send_to_async`](Self::send_to_async)
    /// does when there is none. Dropped before it completes, it has sent the events no longer in
    /// `events` (in order) and none of the others.
    ///
    /// # Errors
    /// As [`send_batch_to`](Self::send_batch_to): the error says how many were sent; the others
    /// are still in `events`.
    pub fn send_batch_to_async<'a>(
        &'a mut self,
        ctx: ContextRef,
        events: &'a mut Vec<E>,
    ) -> impl Future<Output = Result<(), SendBatchError>> + Send + 'a {
        SendBatchTo::new(self, ctx, events)
    }

    /// Sends `event` to `channel` as a future: the same deliveries and result as
    /// [`send`](Self::send), waiting for room without blocking the thread. Each try is
    /// all-or-nothing like [`try_send`](Self::try_send): when a subscriber's inbox or a
    /// [`Block`](crate::Overflow::Block) output is full, nothing is delivered, the task waits for
    /// room there (registered, holding no place) and tries the whole send again. Dropped before it
    /// completes, nothing was delivered.
    ///
    /// # Errors
    /// `Closed` once shutdown began; `FullBeforeStart` when a subscriber's inbox is full and the
    /// correlator was never started; `ContextStopped` when a subscriber stopped (as
    /// [`try_send`](Self::try_send)).
    pub fn send_async(
        &mut self,
        channel: Channel,
        event: E,
    ) -> impl Future<Output = Result<usize, SendError<E>>> + Send + '_ {
        SendChannel::new(self, channel, event)
    }
}

impl<E: Event> InputHandle<E> {
    /// Turns this handle into a [`SharedInput`]: the same sender (R2.3), now `Sync` and `Clone`
    /// for use behind `&` from many tasks or threads.
    pub fn into_shared(self) -> SharedInput<E> {
        SharedInput {
            links: StdArc::new(StdMutex::new(self.links.into_inner())),
        }
    }
}

/// An input handle that is `Send + Sync + Clone`: for services that keep one handle in shared
/// state (an `Arc` in a server's state, a `static`) and send from many tasks or threads. Made by
/// [`InputHandle::into_shared`] or [`Correlator::shared_input`](crate::Correlator::shared_input).
///
/// It is **one sender** for the per-sender FIFO rule (R2.3), clones included: every send through
/// it or through any of its clones takes its lock for the reservation and commit, and sends are
/// ordered as they took the lock. So two sends from one task or thread keep their order, and a send
/// that completed before another began comes before it. For independent senders (no order between
/// them, no lock shared), use one [`InputHandle`] per thread or task instead.
///
/// The lock is held only while a place is reserved and the entry committed, never while a send
/// waits for room (a blocking send parks and an async send is pending without it), so a full inbox
/// does not stop the other users of the handle from sending elsewhere. The exception is a blocking
/// channel send inside a handler (a context's own thread), which waits as that context does while
/// it holds the lock; in handlers, prefer [`Scope`](crate::Scope)'s sends.
///
/// # Example
/// ```
/// use correlator::{Correlator, Event};
///
/// #[derive(Clone, Debug)]
/// struct Tick(u32);
/// impl Event for Tick {
///     type Kind = ();
///     fn kind(&self) {}
/// }
///
/// let c = Correlator::<Tick>::builder().build()?;
/// let input = c.shared_input();
/// c.start();
/// std::thread::scope(|s| {
///     for t in 0..4 {
///         let input = &input;
///         let main = c.main();
///         s.spawn(move || input.send_to(main, Tick(t)).unwrap());
///     }
/// });
/// c.shutdown()?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct SharedInput<E: Event> {
    pub(crate) links: StdArc<StdMutex<Links<E>>>,
}

impl<E: Event> Clone for SharedInput<E> {
    /// The same sender (see the type's docs), not a new one: use
    /// [`Correlator::input`](crate::Correlator::input) for that.
    fn clone(&self) -> Self {
        Self {
            links: self.links.clone(),
        }
    }
}

impl<E: Event> std::fmt::Debug for SharedInput<E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SharedInput").finish_non_exhaustive()
    }
}

impl<E: Event> SharedInput<E> {
    /// Appends `event` to `ctx`'s inbox, waiting for room if it is full (without the lock).
    ///
    /// # Errors
    /// As [`InputHandle::send_to`].
    pub fn send_to(&self, ctx: ContextRef, event: E) -> Result<(), SendError<E>> {
        shared_send_to(&self.links, ctx, event)
    }

    /// Appends `event` to `ctx`'s inbox if there is room now.
    ///
    /// # Errors
    /// As [`InputHandle::try_send_to`].
    pub fn try_send_to(&self, ctx: ContextRef, event: E) -> Result<(), SendError<E>> {
        sync::lock_std(&self.links).send_to(ctx, event, Wait::Never)
    }

    /// Sends `event` to `channel`, waiting for room (without the lock) where a subscriber's inbox
    /// or a [`Block`](crate::Overflow::Block) output is full. Each try is all-or-nothing like
    /// [`InputHandle::try_send`]; returns how many received it (0: dropped and counted, R4.5).
    ///
    /// # Errors
    /// `Closed` once shutdown began; `FullBeforeStart` when a subscriber's inbox is full and the
    /// correlator was never started; `ContextStopped` when a subscriber stopped.
    pub fn send(&self, channel: Channel, event: E) -> Result<usize, SendError<E>> {
        shared_send_channel(&self.links, channel, event)
    }
}

#[cfg(feature = "async")]
impl<E: Event> SharedInput<E> {
    /// [`InputHandle::send_to_async`] through the shared handle: takes `&self`, and the future is
    /// `Send`. The lock is held for each try only, never while the future is pending.
    ///
    /// # Errors
    /// As [`InputHandle::send_to_async`].
    pub fn send_to_async(
        &self,
        ctx: ContextRef,
        event: E,
    ) -> impl Future<Output = Result<(), SendError<E>>> + Send + '_ {
        SendTo::new(self, ctx, event)
    }

    /// [`InputHandle::send_batch_to_async`] through the shared handle. Other sends through the
    /// handle may come between the batch's parts when it waits for room (each part is one try
    /// under the lock); the batch's own events keep their order.
    ///
    /// # Errors
    /// As [`InputHandle::send_batch_to_async`].
    pub fn send_batch_to_async<'a>(
        &'a self,
        ctx: ContextRef,
        events: &'a mut Vec<E>,
    ) -> impl Future<Output = Result<(), SendBatchError>> + Send + 'a {
        SendBatchTo::new(self, ctx, events)
    }

    /// [`InputHandle::send_async`] through the shared handle.
    ///
    /// # Errors
    /// As [`InputHandle::send_async`].
    pub fn send_async(
        &self,
        channel: Channel,
        event: E,
    ) -> impl Future<Output = Result<usize, SendError<E>>> + Send + '_ {
        SendChannel::new(self, channel, event)
    }
}
