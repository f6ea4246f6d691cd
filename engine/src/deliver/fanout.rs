//! A channel's fan-out to its subscribed contexts (SPEC §4): one after the other, each through the
//! send core (waiting as `wait` allows), or all-or-nothing for an input handle's try (every
//! subscriber's place reserved first, cancelled on the first refusal). Outputs get their copies
//! through `output`.
//!
//! Owns the fan-out of a channel send. May import the leaves, `send`, `inbox`, `channel`,
//! `error`, `entry` and `shared` (through the parent's [`Links`]).

use std::time::Instant;

use super::{Deliveries, GiveBack, Links, Wait};
use crate::channel::Channel;
use crate::entry::Entry;
use crate::error::{SendError, SendErrorKind};
use crate::event::Event;
use crate::inbox::{Reservation, RoomWait, Sender};
use crate::send::refusal_kind;
use crate::sync::Ordering;

impl<E: Event, H: GiveBack> Links<E, H> {
    fn collect_targets(&mut self, channel: Channel) {
        let mut targets = std::mem::take(&mut self.targets);
        targets.clear();
        self.shared
            .channels
            .for_each_subscriber(channel, |c| targets.push(c));
        if let Some(&max) = targets.last() {
            self.know(max);
        }
        self.targets = targets;
    }

    /// Sends to every subscriber of `channel` one after the other, waiting as `wait` allows for each;
    /// a subscriber that stopped is skipped. Counts a drop when nobody received it (R4.5).
    pub(crate) fn send_channel(
        &mut self,
        channel: Channel,
        event: E,
        wait: Wait,
        outputs: bool,
    ) -> Deliveries {
        self.collect_targets(channel);
        let mut d = Deliveries::default();
        if outputs {
            d.outputs = self.deliver_outputs(channel, &event);
        }
        let mut event = Some(event);
        for i in 0..self.targets.len() {
            let id = self.targets[i];
            if id as usize >= self.contexts.len() {
                continue;
            }
            // Copy before reserving: user code (`clone`) never runs while a place is reserved, since
            // the consumer waits for a reserved place (see the inbox's module docs).
            let last = i + 1 == self.targets.len();
            let Some(e) = (if last { event.take() } else { event.clone() }) else {
                continue;
            };
            let origin = self.origin;
            if let Ok(r) = self.reserve(id, wait) {
                r.commit(Entry::Event(origin, e));
                d.contexts += 1;
            }
        }
        if d.total() == 0 {
            self.shared.dropped.fetch_add(1, Ordering::Relaxed);
        }
        d
    }

    /// Sends every event of `events` to every subscriber of `channel`, each subscriber getting the
    /// whole batch in order through [`send_batch_to`](Self::send_batch_to)'s blocking path (as many
    /// places per reservation as are free), one subscriber after the other; a subscriber that
    /// stopped is skipped. Output receivers get each event first (`outputs`). Every copy is made
    /// before the places of its subscriber are reserved, into a reused buffer; the last subscriber
    /// gets the originals. Empties `events`; counts a drop per event when nobody received the batch
    /// (R4.5).
    pub(crate) fn send_channel_batch(
        &mut self,
        channel: Channel,
        events: &mut Vec<E>,
        outputs: bool,
    ) -> Deliveries {
        let mut d = Deliveries::default();
        if events.is_empty() {
            return d;
        }
        self.collect_targets(channel);
        if outputs {
            for e in events.iter() {
                d.outputs += self.deliver_outputs(channel, e);
            }
        }
        let n = self.targets.len();
        let count = events.len();
        for i in 0..n {
            let id = self.targets[i];
            if id as usize >= self.contexts.len() {
                continue;
            }
            if i + 1 == n {
                let before = events.len();
                // A refusal (the subscriber stopped) skips it, as `send_channel` does.
                let _ = self.send_batch(id, events, Wait::Block);
                d.contexts += before - events.len();
            } else {
                let mut copies = std::mem::take(&mut self.copies);
                copies.clear();
                copies.extend(events.iter().cloned());
                let _ = self.send_batch(id, &mut copies, Wait::Block);
                d.contexts += count - copies.len();
                copies.clear();
                self.copies = copies;
            }
        }
        events.clear();
        if d.total() == 0 {
            self.shared
                .dropped
                .fetch_add(count as u64, Ordering::Relaxed);
        }
        d
    }

    /// All-or-nothing channel send for input handles: every subscribed context gets a copy, or none
    /// does and the event comes back. Waits (without holding places) until `deadline` if given.
    pub(crate) fn try_send_channel(
        &mut self,
        channel: Channel,
        event: E,
        deadline: Option<Instant>,
    ) -> Result<Deliveries, SendError<E>> {
        loop {
            self.collect_targets(channel);
            // Every copy is made before the first place is reserved: user code (`clone`) never runs
            // while a place is reserved, since the consumer waits for a reserved place. The original
            // goes to the last context unless output receivers need it after the commits.
            // A full `Block` output would make this send wait after its commits: refuse (or wait
            // for room, holding nothing) first, like a full inbox.
            if let Some(full) = self.full_block_output(channel) {
                if deadline.is_none_or(|d| Instant::now() >= d) {
                    let kind = if deadline.is_some() {
                        SendErrorKind::Timeout
                    } else {
                        SendErrorKind::Full
                    };
                    return Err(SendError::new(kind, None, event));
                }
                full.wait_for_room(deadline);
                continue;
            }
            let keep = self
                .cached_outputs(channel)
                .is_some_and(|i| !self.outputs[i].queues.is_empty());
            let n = self.targets.len();
            self.copies.clear();
            let copies = if keep { n } else { n.saturating_sub(1) };
            self.copies.extend((0..copies).map(|_| event.clone()));
            let mut refused = None;
            for i in 0..self.targets.len() {
                let id = self.targets[i];
                if id as usize >= self.contexts.len() {
                    continue;
                }
                let reserved = self.reserve(id, Wait::Never).map(Reservation::detach);
                match reserved {
                    Ok(r) => self.reserved.push((id, r)),
                    Err(kind) => {
                        refused = Some((id, kind));
                        break;
                    }
                }
            }
            let Some((id, kind)) = refused else {
                break;
            };
            for (rid, r) in self.reserved.drain(..) {
                let inbox = &self.contexts[rid as usize].inbox;
                // SAFETY: `r` was detached from a reservation of context `rid`'s inbox above.
                unsafe { inbox.resume(r) }.cancel();
            }
            // The copies of a refused round are not kept: the event comes back whole, and nothing
            // of it stays behind in the handle (a retry makes its copies again).
            self.copies.clear();
            let timed_out = deadline.is_none_or(|d| Instant::now() >= d);
            if kind != SendErrorKind::Full || timed_out {
                let kind = if kind == SendErrorKind::Full && deadline.is_some() {
                    SendErrorKind::Timeout
                } else {
                    kind
                };
                return Err(SendError::new(kind, Some(self.context_ref(id)), event));
            }
            // Wait for room in the inbox that refused, holding nothing, then try the round again.
            match self.contexts[id as usize]
                .inbox
                .wait_for_room(Sender::External, deadline)
            {
                RoomWait::Retry | RoomWait::TimedOut => {}
                RoomWait::Closed => {
                    let kind = refusal_kind(&self.contexts[id as usize].inbox, Sender::External);
                    return Err(SendError::new(kind, Some(self.context_ref(id)), event));
                }
            }
        }
        let mut d = Deliveries::default();
        let mut event = Some(event);
        for (id, r) in self.reserved.drain(..) {
            // The copies are all alike; the original comes last (when outputs do not keep it).
            // SAFETY: `r` was detached from a reservation of context `id`'s inbox above.
            let r = unsafe { self.contexts[id as usize].inbox.resume(r) };
            match self.copies.pop().or_else(|| event.take()) {
                Some(e) => {
                    r.commit(Entry::Event(self.origin, e));
                    d.contexts += 1;
                }
                None => r.cancel(),
            }
        }
        // Copies made for subscribers that were skipped (unknown contexts).
        self.copies.clear();
        if let Some(event) = event {
            d.outputs = self.deliver_outputs(channel, &event);
        }
        if d.total() == 0 {
            self.shared.dropped.fetch_add(1, Ordering::Relaxed);
        }
        Ok(d)
    }
}
