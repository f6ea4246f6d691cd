//! Single tries of sends that wait outside their [`Links`] (an async send's future, a
//! [`SharedInput`](crate::SharedInput)'s send): the links are borrowed only for the try, and a full
//! target comes back with the event, to wait for room there (registered, holding no place). On a
//! context's own thread such a send waits as that context instead ([`send_as_context`]). The
//! shared input's blocking sends ([`shared_send_to`], [`shared_send_channel`]) are here too: a try
//! under its lock, the wait without it.
//!
//! Owns the tries and their outcomes. May import the leaves, `send`, `inbox`, `channel`, `error`,
//! `entry`, `output`, `record` and `shared`.

use super::{GiveBack, Links, Wait};
use crate::channel::Channel;
use crate::entry::Entry;
use crate::error::{SendError, SendErrorKind};
use crate::event::Event;
use crate::id::ContextRef;
use crate::inbox::{Refusal, RoomWait, Sender};
use crate::output::OutputQueue;
use crate::record::Origin;
use crate::send::{self, refusal_kind, AsContext};
use crate::shared::{ContextShared, Shared};
use crate::sync::{self, Arc, Ordering, StdArc, StdMutex};

/// How a send that waits outside its [`Links`] (an async send, a [`SharedInput`](crate::SharedInput)
/// send) went at one try: the links are borrowed only for the try, never while it waits.
pub(crate) enum TrySend<E: Event> {
    /// Committed.
    Sent,
    /// Refused for good (the error carries the event).
    Refused(SendError<E>),
    /// The target's inbox is full: wait for room in it, then try again.
    Full(Arc<ContextShared<E>>, E),
}

/// How a channel try went (see [`TrySend`]): each try is all-or-nothing
/// ([`Links::try_send_channel`]).
pub(crate) enum ChannelTry<E: Event> {
    /// Delivered to this many receivers (0: dropped and counted, R4.5).
    Sent(usize),
    /// Refused for good.
    Refused(SendError<E>),
    /// A subscriber's inbox is full: wait for room there, then try again.
    FullInbox(Arc<ContextShared<E>>, E),
    /// A `Block` output of the channel is full: wait for room there, then try again.
    FullOutput(StdArc<OutputQueue<E>>, E),
    /// The full output found room before it could be named: try again at once.
    Retry(E),
}

/// How a batch try went (see [`TrySend`]); the events not sent are still in the vector.
#[cfg_attr(not(feature = "async"), allow(dead_code))]
pub(crate) enum TrySendBatch<E: Event> {
    /// Every event was sent.
    Sent,
    /// Refused for good.
    Refused(SendErrorKind),
    /// The target's inbox has no room at all.
    Full(Arc<ContextShared<E>>),
}

impl<E: Event, H: GiveBack> Links<E, H> {
    /// One try of a send to `to` that waits elsewhere: commits if there is room now, otherwise
    /// hands the full target back with the event (no place held). Before `start()` a full inbox
    /// is refused with `FullBeforeStart`, as a blocking send is.
    pub(crate) fn try_send_or_full(&mut self, to: ContextRef, event: E) -> TrySend<E> {
        let Some(id) = self.index_of(to) else {
            return TrySend::Refused(SendError::new(
                SendErrorKind::UnknownContext,
                Some(to),
                event,
            ));
        };
        let sender = self.sender();
        let target = &self.contexts[id as usize];
        match target.inbox.try_reserve(sender) {
            Ok(r) => {
                r.commit(Entry::Event(self.origin, event));
                TrySend::Sent
            }
            Err(Refusal::Closed) => TrySend::Refused(SendError::new(
                refusal_kind(&target.inbox, sender),
                Some(to),
                event,
            )),
            Err(Refusal::Full) if !self.shared.started.load(Ordering::Acquire) => TrySend::Refused(
                SendError::new(SendErrorKind::FullBeforeStart, Some(to), event),
            ),
            Err(Refusal::Full) => TrySend::Full(target.clone(), event),
        }
    }

    /// One try of a batch send to `to` that waits elsewhere: sends as many events from the front
    /// of `events` as there is room for, in as few reservations as the room allows, until they are
    /// all sent or the inbox has no room at all.
    #[cfg_attr(not(feature = "async"), allow(dead_code))]
    pub(crate) fn try_send_batch_or_full(
        &mut self,
        to: ContextRef,
        events: &mut Vec<E>,
    ) -> TrySendBatch<E> {
        let Some(id) = self.index_of(to) else {
            return TrySendBatch::Refused(SendErrorKind::UnknownContext);
        };
        let sender = self.sender();
        let origin = self.origin;
        let target = &self.contexts[id as usize];
        while !events.is_empty() {
            match target.inbox.try_reserve_batch(sender, 1, events.len()) {
                Ok(mut places) => {
                    // Moves only: no user code runs while the places are held.
                    for e in events.drain(..places.len()) {
                        places.push(Entry::Event(origin, e));
                    }
                }
                Err(Refusal::Closed) => {
                    return TrySendBatch::Refused(refusal_kind(&target.inbox, sender))
                }
                Err(Refusal::Full) if !self.shared.started.load(Ordering::Acquire) => {
                    return TrySendBatch::Refused(SendErrorKind::FullBeforeStart)
                }
                Err(Refusal::Full) => return TrySendBatch::Full(target.clone()),
            }
        }
        TrySendBatch::Sent
    }

    /// One try of a channel send that waits elsewhere (an input handle's): all-or-nothing, like
    /// [`try_send_channel`](Self::try_send_channel); a full subscriber's inbox or a full `Block`
    /// output comes back with the event, to wait for room there. Before `start()` a full inbox is
    /// refused with `FullBeforeStart`, as a blocking send is; a full output is waited for (its
    /// reader is the service's, started or not).
    pub(crate) fn try_send_channel_or_full(&mut self, channel: Channel, event: E) -> ChannelTry<E> {
        if self.shared.input_closed() {
            return ChannelTry::Refused(SendError::new(SendErrorKind::Closed, None, event));
        }
        let e = match self.try_send_channel(channel, event, None) {
            Ok(d) => return ChannelTry::Sent(d.total()),
            Err(e) if e.kind() == SendErrorKind::Full => e,
            Err(e) => return ChannelTry::Refused(e),
        };
        match e.target() {
            Some(_) if !self.shared.started.load(Ordering::Acquire) => {
                let target = e.target();
                ChannelTry::Refused(SendError::new(
                    SendErrorKind::FullBeforeStart,
                    target,
                    e.into_inner(),
                ))
            }
            Some(ctx) => match self.index_of(ctx) {
                Some(id) => {
                    ChannelTry::FullInbox(self.contexts[id as usize].clone(), e.into_inner())
                }
                None => ChannelTry::Refused(e),
            },
            None => match self.full_block_output(channel) {
                Some(q) => ChannelTry::FullOutput(q, e.into_inner()),
                // Room appeared since: the caller tries again at once.
                None => ChannelTry::Retry(e.into_inner()),
            },
        }
    }
}

/// A blocking send of `event` to the full `target`, waiting as context `me` waits (recording its
/// wait edge, and beyond capacity where waiting would close a cycle, R5.2): what a send that waits
/// outside its links does on a context's own thread, where a future or a lock must not hold the
/// thread's turn. Parks at each round (a rare path: a handler sending through a handle).
pub(crate) fn send_as_context<E: Event>(
    shared: &Shared<E>,
    me: ContextRef,
    origin: Origin,
    target: &ContextShared<E>,
    event: E,
) -> Result<(), SendError<E>> {
    let side = AsContext {
        graph: &shared.waits,
        me: me.id(),
    };
    let inbox = &target.inbox;
    match send::reserve_refused(
        inbox,
        target.id,
        Sender::External,
        Wait::Block,
        side,
        Refusal::Full,
    ) {
        Ok((r, _)) => {
            r.commit(Entry::Event(origin, event));
            Ok(())
        }
        Err(kind) => Err(SendError::new(kind, Some(target.reference()), event)),
    }
}

/// [`SharedInput::send_to`](crate::SharedInput::send_to): each try under the lock; a full target is
/// waited for without it (the inbox's room wait, parking at once), or, on a context's own thread,
/// as that context ([`send_as_context`], R5.2).
pub(crate) fn shared_send_to<E: Event>(
    links: &StdMutex<Links<E>>,
    ctx: ContextRef,
    event: E,
) -> Result<(), SendError<E>> {
    let mut event = event;
    loop {
        let step = sync::lock_std(links).try_send_or_full(ctx, event);
        let (target, e) = match step {
            TrySend::Sent => return Ok(()),
            TrySend::Refused(e) => return Err(e),
            TrySend::Full(target, e) => (target, e),
        };
        let context = {
            let links = sync::lock_std(links);
            let shared = links.shared();
            shared
                .context_of_current_thread()
                .map(|me| (me, shared.clone(), links.origin))
        };
        if let Some((me, shared, origin)) = context {
            return send_as_context(&shared, me, origin, &target, e);
        }
        // Closed: the next try says why.
        let _: RoomWait = target.inbox.wait_for_room(Sender::External, None);
        event = e;
    }
}

/// [`SharedInput::send`](crate::SharedInput::send): each try all-or-nothing under the lock; a full
/// subscriber's inbox or `Block` output is waited for without it, or, on a context's own thread, the
/// blocking fan-out waits as that context while it holds the lock (the type's docs say so).
pub(crate) fn shared_send_channel<E: Event>(
    links: &StdMutex<Links<E>>,
    channel: Channel,
    event: E,
) -> Result<usize, SendError<E>> {
    let mut event = event;
    loop {
        let step = sync::lock_std(links).try_send_channel_or_full(channel, event);
        match step {
            ChannelTry::Sent(n) => return Ok(n),
            ChannelTry::Refused(e) => return Err(e),
            ChannelTry::Retry(e) => event = e,
            ChannelTry::FullOutput(q, e) => {
                q.wait_for_room(None);
                event = e;
            }
            ChannelTry::FullInbox(target, e) => {
                let mut links = sync::lock_std(links);
                if links.shared().context_of_current_thread().is_some() {
                    // See the type's docs: waits as the context, holding the lock.
                    return Ok(links.send_channel(channel, e, Wait::Block, true).total());
                }
                drop(links);
                let _: RoomWait = target.inbox.wait_for_room(Sender::External, None);
                event = e;
            }
        }
    }
}
