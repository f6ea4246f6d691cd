//! Sends that wait without blocking a thread: the futures of `send_to_async`, `send_async` and
//! `send_batch_to_async` ([`InputHandle`](crate::InputHandle) and [`SharedInput`](crate::SharedInput)),
//! behind the `async` feature.
//!
//! # Design
//! A future tries the ordinary reservation; when the target's inbox is full it joins the inbox's
//! room-waiter protocol as a *task* ([`Inbox::poll_room`](crate::inbox::Inbox::poll_room): register
//! the waker, announce, re-check) and returns `Pending`; the consumer that frees places wakes it
//! and it tries again. It never holds a reservation while pending (the consumer would wait for
//! it), so a dropped future holds no place; it keeps its registration
//! ([`RoomRegistration`]) between polls and takes it out of the list when dropped, so cancelled
//! sends leave nothing behind. The event lives in the future until it is committed: a cancelled
//! send drops it.
//!
//! The futures borrow their sender's links only for one try ([`LinksAccess`]): an input handle's
//! through `&mut` (so the future is `Send`: the handle is `Send`, not `Sync`), a shared input's
//! under its lock, released before the future registers or returns.
//!
//! On a context's own thread (a handler that runs a future to completion) the future does what a
//! blocking send does there: it waits as that context, beyond capacity where waiting would close
//! a cycle (R5.2), and completes at its first poll.
//!
//! Owns the send futures. May import `deliver`, `send`, `inbox`, `shared`, `entry`, `channel`,
//! `error`, `event`, `id`, `record` and `sync`; `input` imports it (the handles implement [`LinksAccess`] there).

use std::future::Future;
use std::pin::Pin;
use std::task::{Context as TaskContext, Poll};

use crate::channel::Channel;
use crate::deliver::{send_as_context, ChannelTry, Links, TrySend, TrySendBatch, Wait};
use crate::entry::Entry;
use crate::error::{SendBatchError, SendError};
use crate::event::Event;
use crate::id::ContextRef;
use crate::inbox::{RoomWait, Sender};
use crate::record::Origin;
use crate::send::{poll_send, refusal_kind, Attempt, RoomRegistration};
use crate::shared::Shared;
use crate::sync;

/// Borrowing a sender's links for one try: an input handle's (through `&mut`, no lock) or a
/// shared input's (under its lock, held for that try only). The handles implement it (in `input`,
/// which imports this module, not the other way round).
pub(crate) trait LinksAccess<E: Event> {
    fn with_links<R>(&mut self, f: impl FnOnce(&mut Links<E>) -> R) -> R;
}

/// On a context's own thread (inside a handler), the context, and the correlator's shared state
/// to wait as it (see [`send_as_context`]). Read only when a send found its target full.
pub(crate) fn context_thread<E: Event>(
    links: &mut impl LinksAccess<E>,
) -> Option<(ContextRef, sync::Arc<Shared<E>>, Origin)> {
    links.with_links(|l| {
        let shared = l.shared();
        shared
            .context_of_current_thread()
            .map(|me| (me, shared.clone(), l.origin))
    })
}

/// The future of a send to one context (`send_to_async`): tries to reserve, and when the inbox
/// is full registers the task's waker in the inbox's room-waiter list and returns `Pending`. It
/// holds no place while pending; dropped, it takes its entry out of the list and drops the event.
pub(crate) struct SendTo<L, E: Event> {
    links: L,
    to: ContextRef,
    event: Option<E>,
    room: RoomRegistration<Entry<E>>,
}

impl<L, E: Event> SendTo<L, E> {
    pub(crate) fn new(links: L, to: ContextRef, event: E) -> Self {
        Self {
            links,
            to,
            event: Some(event),
            room: RoomRegistration::new(),
        }
    }
}

// The event is moved in and out, never pinned: the future may move between polls.
impl<L, E: Event> Unpin for SendTo<L, E> {}

impl<L: LinksAccess<E>, E: Event> Future for SendTo<L, E> {
    type Output = Result<(), SendError<E>>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut TaskContext<'_>) -> Poll<Self::Output> {
        let this = &mut *self;
        let to = this.to;
        let links = &mut this.links;
        let attempt = |event| match links.with_links(|l| l.try_send_or_full(to, event)) {
            TrySend::Sent => Attempt::Done(Ok(())),
            TrySend::Refused(e) => Attempt::Done(Err(e)),
            TrySend::Full(target, event) => match context_thread(links) {
                // A handler's thread is its context's: wait as the context (R5.2), not as a task.
                Some((me, shared, origin)) => {
                    Attempt::Done(send_as_context(&shared, me, origin, &target, event))
                }
                None => Attempt::Full(target.inbox.clone(), event),
            },
        };
        let closed = |inbox: &_, event| {
            let kind = refusal_kind(inbox, Sender::External);
            Err(SendError::new(kind, Some(to), event))
        };
        poll_send(&mut this.room, &mut this.event, cx.waker(), attempt, closed)
    }
}

/// The future of a batch send to one context (`send_batch_to_async`): sends as many events as
/// there is room for at each try, and waits for room (registered, holding nothing) when there is
/// none.
pub(crate) struct SendBatchTo<'v, L, E: Event> {
    links: L,
    to: ContextRef,
    events: &'v mut Vec<E>,
    sent: usize,
    room: RoomRegistration<Entry<E>>,
}

impl<'v, L, E: Event> SendBatchTo<'v, L, E> {
    pub(crate) fn new(links: L, to: ContextRef, events: &'v mut Vec<E>) -> Self {
        Self {
            links,
            to,
            events,
            sent: 0,
            room: RoomRegistration::new(),
        }
    }
}

impl<L, E: Event> Unpin for SendBatchTo<'_, L, E> {}

impl<L: LinksAccess<E>, E: Event> Future for SendBatchTo<'_, L, E> {
    type Output = Result<(), SendBatchError>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut TaskContext<'_>) -> Poll<Self::Output> {
        let this = &mut *self;
        let to = this.to;
        loop {
            let before = this.events.len();
            let events = &mut *this.events;
            let step = this
                .links
                .with_links(|l| l.try_send_batch_or_full(to, events));
            this.sent += before - this.events.len();
            let target = match step {
                TrySendBatch::Sent => {
                    this.room.cancel();
                    return Poll::Ready(Ok(()));
                }
                TrySendBatch::Refused(kind) => {
                    this.room.cancel();
                    return Poll::Ready(Err(SendBatchError::new(kind, Some(to), this.sent)));
                }
                TrySendBatch::Full(target) => target,
            };
            if let Some((me, shared, origin)) = context_thread(&mut this.links) {
                // As a blocking batch does: the first event waits as the context (R5.2).
                let first = this.events.remove(0);
                match send_as_context(&shared, me, origin, &target, first) {
                    Ok(()) => {
                        this.sent += 1;
                        continue;
                    }
                    Err(e) => {
                        let kind = e.kind();
                        this.events.insert(0, e.into_inner());
                        return Poll::Ready(Err(SendBatchError::new(kind, Some(to), this.sent)));
                    }
                }
            }
            match this.room.poll(target.inbox.clone(), 1, cx.waker()) {
                Poll::Ready(RoomWait::Retry) => {}
                Poll::Ready(RoomWait::Closed) | Poll::Ready(RoomWait::TimedOut) => {
                    this.room.cancel();
                    let kind = refusal_kind(&target.inbox, Sender::External);
                    return Poll::Ready(Err(SendBatchError::new(kind, Some(to), this.sent)));
                }
                Poll::Pending => return Poll::Pending,
            }
        }
    }
}

/// The future of a channel send (`send_async`): each try is all-or-nothing, like
/// [`InputHandle::try_send`](crate::InputHandle::try_send); when a subscriber's inbox (or a `Block` output) is full it waits for
/// room there, registered, holding nothing, and tries the whole send again.
pub(crate) struct SendChannel<L, E: Event> {
    links: L,
    channel: Channel,
    event: Option<E>,
    room: RoomRegistration<Entry<E>>,
}

impl<L, E: Event> SendChannel<L, E> {
    pub(crate) fn new(links: L, channel: Channel, event: E) -> Self {
        Self {
            links,
            channel,
            event: Some(event),
            room: RoomRegistration::new(),
        }
    }
}

impl<L, E: Event> Unpin for SendChannel<L, E> {}

impl<L: LinksAccess<E>, E: Event> Future for SendChannel<L, E> {
    type Output = Result<usize, SendError<E>>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut TaskContext<'_>) -> Poll<Self::Output> {
        let this = &mut *self;
        let channel = this.channel;
        loop {
            let Some(event) = this.event.take() else {
                panic!("a send future polled after it completed");
            };
            let step = this
                .links
                .with_links(|l| l.try_send_channel_or_full(channel, event));
            match step {
                ChannelTry::Sent(n) => {
                    this.room.cancel();
                    return Poll::Ready(Ok(n));
                }
                ChannelTry::Refused(e) => {
                    this.room.cancel();
                    return Poll::Ready(Err(e));
                }
                ChannelTry::Retry(event) => this.event = Some(event),
                ChannelTry::FullOutput(queue, event) => {
                    this.event = Some(event);
                    if queue.poll_room(cx.waker()).is_pending() {
                        return Poll::Pending;
                    }
                }
                ChannelTry::FullInbox(target, event) => {
                    if context_thread(&mut this.links).is_some() {
                        // On a handler's thread: the blocking send, waiting as the context does
                        // (R5.2; see `SharedInput` for the lock it holds meanwhile).
                        let d = this
                            .links
                            .with_links(|l| l.send_channel(channel, event, Wait::Block, true));
                        return Poll::Ready(Ok(d.total()));
                    }
                    match this.room.poll(target.inbox.clone(), 1, cx.waker()) {
                        Poll::Ready(RoomWait::Retry) => this.event = Some(event),
                        Poll::Ready(RoomWait::Closed) | Poll::Ready(RoomWait::TimedOut) => {
                            // Refused for this sender now: the next try says why.
                            this.room.cancel();
                            this.event = Some(event);
                        }
                        Poll::Pending => {
                            this.event = Some(event);
                            return Poll::Pending;
                        }
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::future::Future;
    use std::sync::Arc;
    use std::task::{Context, Wake, Waker};

    use crate::{Correlator, Event};

    #[derive(Clone, Debug)]
    struct Ev;
    impl Event for Ev {
        type Kind = ();
        fn kind(&self) {}
    }

    struct Nothing;
    impl Wake for Nothing {
        fn wake(self: Arc<Self>) {}
    }

    // R5.1: sends cancelled again and again against a full inbox (a timeout around each) leave
    // no entry in the room-waiter list, and one that is polled again keeps a single entry.
    #[test]
    fn r5_1_cancelled_sends_leave_the_waiter_list_empty() {
        let c = Correlator::<Ev>::builder()
            .inbox_capacity(2)
            .build()
            .unwrap();
        let mut input = c.input();
        // Started so that a full inbox makes a send wait (before `start` it is refused); the
        // context stays asleep: nothing wakes it but a send's commit, and there is none.
        let inbox = input.links.get_mut().shared().snapshot()[0].inbox.clone();
        // Fill the inbox directly with places the context cannot take: reservations held.
        let r1 = inbox.try_reserve(crate::inbox::Sender::External).unwrap();
        let r2 = inbox.try_reserve(crate::inbox::Sender::External).unwrap();
        c.start();
        let waker = Waker::from(Arc::new(Nothing));
        let mut cx = Context::from_waker(&waker);
        for _ in 0..1000 {
            let mut send = Box::pin(input.send_to_async(c.main(), Ev));
            assert!(send.as_mut().poll(&mut cx).is_pending());
            assert!(send.as_mut().poll(&mut cx).is_pending());
            drop(send);
        }
        assert_eq!(inbox.room_waiters(), 0, "cancelled sends stayed listed");
        {
            let mut send = Box::pin(input.send_to_async(c.main(), Ev));
            for _ in 0..10 {
                assert!(send.as_mut().poll(&mut cx).is_pending());
            }
            assert_eq!(inbox.room_waiters(), 1, "one entry per pending send");
        }
        assert_eq!(inbox.room_waiters(), 0);
        r1.cancel();
        r2.cancel();
        c.shutdown().unwrap();
    }
}
