//! [`PoolInput`]: sends each event to the member that owns its key, one sender for the FIFO rule
//! (R2.3), blocking, trying, with a timeout, or (feature `async`) as futures, batches split into
//! runs of one member.
//!
//! Owns the sender. May import the leaves, `input` and `error`.

use std::time::{Duration, Instant};

#[cfg(feature = "async")]
use crate::error::SendBatchError;
use crate::error::{SendError, SendErrorKind};
use crate::event::Event;
use crate::id::ContextRef;
use crate::input::InputHandle;
use std::sync::Arc;

use super::keys::member_in;

/// Sends each event to the pool member that owns its key ([`partition_of`](super::partition_of)); made by
/// [`Pool::input`](super::Pool::input).
///
/// It is one sender for the FIFO rule (R2.3), like the [`InputHandle`] it wraps: the events of
/// one key sent through one `PoolInput` all go to the same inbox and are processed in the order
/// they were sent. Events of different `PoolInput`s, and of different keys, are not ordered with
/// respect to each other. `Send` but not `Sync`: clone it for each thread (a clone is a new
/// sender).
///
/// An event whose [`Event::key`] is `None` belongs to no partition: every send refuses it with
/// [`SendErrorKind::NoKey`] and hands it back (send it to a context of your choice with
/// [`InputHandle::send_to`] if that is what you want).
pub struct PoolInput<E: Event> {
    pub(super) input: InputHandle<E>,
    pub(super) members: Arc<[ContextRef]>,
    /// The run of a batch now being sent to one member ([`send_batch_async`]); empty between
    /// sends, kept for its capacity.
    ///
    /// [`send_batch_async`]: PoolInput::send_batch_async
    #[cfg_attr(not(feature = "async"), allow(dead_code))]
    pub(super) run: Vec<E>,
}

impl<E: Event> PoolInput<E> {
    /// The member owning `event`'s key, or the event back when it has none.
    #[inline]
    fn owner(&self, event: E) -> Result<(ContextRef, E), SendError<E>> {
        match event.key() {
            Some(key) => Ok((self.member_of(key), event)),
            None => Err(SendError::new(SendErrorKind::NoKey, None, event)),
        }
    }

    /// Appends `event` to the inbox of the member owning its key, waiting for room if it is full
    /// (as [`InputHandle::send_to`]).
    ///
    /// # Errors
    /// [`SendErrorKind::NoKey`] for an event without a key; otherwise as
    /// [`InputHandle::send_to`]. The event comes back in the error.
    #[inline]
    pub fn send(&self, event: E) -> Result<(), SendError<E>> {
        let (ctx, event) = self.owner(event)?;
        self.input.send_to(ctx, event)
    }

    /// Like [`send`](Self::send) if there is room now (as [`InputHandle::try_send_to`]).
    ///
    /// # Errors
    /// `Full` (with the event) when the member's inbox is at capacity; otherwise as
    /// [`send`](Self::send).
    #[inline]
    pub fn try_send(&self, event: E) -> Result<(), SendError<E>> {
        let (ctx, event) = self.owner(event)?;
        self.input.try_send_to(ctx, event)
    }

    /// Like [`send`](Self::send), waiting at most `timeout` for room (as
    /// [`InputHandle::send_to_timeout`]).
    ///
    /// # Errors
    /// `Timeout` (with the event) when no room appeared in time; otherwise as
    /// [`send`](Self::send).
    pub fn send_timeout(&self, event: E, timeout: Duration) -> Result<(), SendError<E>> {
        let deadline = Instant::now() + timeout;
        let (ctx, event) = self.owner(event)?;
        self.input.send_to_timeout(
            ctx,
            event,
            deadline.saturating_duration_since(Instant::now()),
        )
    }

    /// The member that owns `key`.
    #[inline]
    pub fn member_of(&self, key: u64) -> ContextRef {
        member_in(&self.members, key)
    }
}

#[cfg(feature = "async")]
impl<E: Event> PoolInput<E> {
    /// [`send`](Self::send) as a future: appends `event` to the inbox of the member owning its
    /// key, waiting for room as a task, as [`InputHandle::send_to_async`] does (which it calls):
    /// no executor thread is blocked, the send holds no place while it waits, and dropping the
    /// future before it completes sends nothing. Per-key FIFO (R2.3) holds with this sender's
    /// other sends (the future borrows it mutably).
    ///
    /// # Errors
    /// [`SendErrorKind::NoKey`] for an event without a key (at once); otherwise as
    /// [`InputHandle::send_to_async`]. The event comes back in the error.
    ///
    /// # Example
    /// ```
    /// use correlator::{ContextOptions, Correlator, Event};
    ///
    /// #[derive(Clone, Debug)]
    /// struct Swipe { card: u64 }
    /// impl Event for Swipe {
    ///     type Kind = ();
    ///     fn kind(&self) {}
    ///     fn key(&self) -> Option<u64> { Some(self.card) }
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
    /// let c = Correlator::<Swipe>::builder().inbox_capacity(4).build()?;
    /// let pool = c.create_pool(ContextOptions::new("cards"), 2)?;
    /// let mut input = pool.input();
    /// c.start();
    /// let mut batch: Vec<Swipe> = (0..50).map(|card| Swipe { card }).collect();
    /// block_on(async {
    ///     input.send_async(Swipe { card: 7 }).await?;
    ///     input.send_batch_async(&mut batch).await?;
    ///     Ok::<(), Box<dyn std::error::Error>>(())
    /// })?;
    /// assert!(batch.is_empty());
    /// assert_eq!(c.shutdown()?.totals.processed, 51);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn send_async(
        &mut self,
        event: E,
    ) -> impl std::future::Future<Output = Result<(), SendError<E>>> + Send + '_ {
        let owner = self.owner(event);
        async move {
            let (ctx, event) = owner?;
            self.input.send_to_async(ctx, event).await
        }
    }

    /// Sends every event of `events`, in order, each to the member owning its key, as a future:
    /// each run of consecutive events for the same member goes as one
    /// [`InputHandle::send_batch_to_async`] (as many places as are free reserved at once,
    /// waiting for room as a task when none is). Per-key FIFO (R2.3) holds: a key's events all
    /// go to one inbox, in their order. On success the vector is empty. Dropped before it
    /// completes, it has sent the events no longer in `events` and none of the others, which
    /// stay in the vector in their order.
    ///
    /// # Errors
    /// [`SendErrorKind::NoKey`] at the first event without a key (the events before it were
    /// sent); otherwise as [`InputHandle::send_batch_to_async`]. The error says how many events
    /// went; the others are still in `events`, in order.
    // The explicit form states that the future is `Send`, which an `async fn` would leave implied.
    #[allow(clippy::manual_async_fn)]
    pub fn send_batch_async<'a>(
        &'a mut self,
        events: &'a mut Vec<E>,
    ) -> impl std::future::Future<Output = Result<(), SendBatchError>> + Send + 'a {
        async move {
            let mut guard = RunGuard {
                run: std::mem::take(&mut self.run),
                events,
            };
            let mut sent = 0;
            while let Some(first) = guard.events.first() {
                let Some(key) = first.key() else {
                    return Err(SendBatchError::new(SendErrorKind::NoKey, None, sent));
                };
                let ctx = member_in(&self.members, key);
                let len = 1 + guard.events[1..]
                    .iter()
                    .take_while(|e| e.key().is_some_and(|k| member_in(&self.members, k) == ctx))
                    .count();
                guard.run.extend(guard.events.drain(..len));
                if let Err(e) = self.input.send_batch_to_async(ctx, &mut guard.run).await {
                    return Err(SendBatchError::new(e.kind(), e.target(), sent + e.sent()));
                }
                sent += len;
            }
            self.run = std::mem::take(&mut guard.run);
            Ok(())
        }
    }
}

/// The events of a batch's run not yet sent go back to the front of the caller's vector, in
/// order, however the send ends (an error, or its future dropped).
#[cfg(feature = "async")]
struct RunGuard<'a, E> {
    run: Vec<E>,
    events: &'a mut Vec<E>,
}

#[cfg(feature = "async")]
impl<E> Drop for RunGuard<'_, E> {
    fn drop(&mut self) {
        if !self.run.is_empty() {
            self.events.splice(0..0, self.run.drain(..));
        }
    }
}

impl<E: Event> Clone for PoolInput<E> {
    /// A new, independent sender to the same pool.
    fn clone(&self) -> Self {
        Self {
            input: self.input.clone(),
            members: self.members.clone(),
            run: Vec::new(),
        }
    }
}

/// Which events of a pool's named input the checkpoint recovered from had seen taken, member by
/// member ([`Pool::resume`](super::Pool::resume)): fed the input's events again in their first
/// order, [`taken`](Self::taken) answers `true` for each one its member had taken, so that
/// only the others are sent.
#[cfg(feature = "checkpoint")]
#[derive(Clone, Debug)]
pub struct Resume {
    /// Per member, the events of the input it had taken and that have not been passed over yet.
    pub(super) left: Vec<u64>,
    pub(super) members: Arc<[ContextRef]>,
}

#[cfg(feature = "checkpoint")]
impl Resume {
    /// Whether `event`, the next event of the input in its first order, had been taken by its
    /// member before the checkpoint (skip it), or not (send it). An event without a key was
    /// never sent (`SendErrorKind::NoKey`): `false`.
    pub fn taken<E: Event>(&mut self, event: &E) -> bool {
        let Some(key) = event.key() else {
            return false;
        };
        let m = super::keys::partition_of(key, self.members.len());
        match self.left.get_mut(m) {
            Some(n) if *n > 0 => {
                *n -= 1;
                true
            }
            _ => false,
        }
    }

    /// How many events are still to be passed over, all members together.
    pub fn pending(&self) -> u64 {
        self.left.iter().sum()
    }
}
