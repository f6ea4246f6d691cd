//! Delivery to outputs: a sender's copies of each channel's output list (refreshed when the
//! channel's generation changed, see `channel`), a push as each output's overflow policy says, and
//! the wait of a sender on a full `Block` output ([`push_waiting`]: spin, yield, then park, with a
//! warning once it lasts; R9.1 publishes it), holding no inbox place.
//!
//! Owns output delivery and its blocking. May import the leaves, `send`, `channel`, `output` and
//! `shared` (through the parent's [`Links`]).

use std::time::{Duration, Instant};

use super::{GiveBack, Links};
use crate::channel::Channel;
use crate::config::{Backoff, WaitStrategy};
use crate::event::Event;
use crate::output::{OutputQueue, Pushed};
use crate::send::pause;
use crate::sync::{Ordering, StdArc};

/// A sender's copy of one channel's output list, valid while the channel's generation is
/// `generation`.
pub(super) struct CachedOutputs<E> {
    channel: Channel,
    generation: u64,
    pub(super) queues: Vec<StdArc<OutputQueue<E>>>,
}

/// How one delivery to an output ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OutputDelivery {
    /// Queued (possibly displacing an older event, counted).
    Queued,
    /// Dropped by the policy (counted).
    Dropped,
    /// The receiver is gone or the output closed.
    Disconnected,
}
impl<E: Event, H: GiveBack> Links<E, H> {
    /// Delivers `event` to the output receivers of `channel`; returns how many queued it.
    pub(crate) fn emit(&mut self, channel: Channel, event: &E) -> usize {
        self.deliver_outputs(channel, event)
    }

    /// The index in `outputs` of `channel`'s list, brought up to date; `None` when the channel
    /// never had an output. Steady state: one atomic read and a short scan, no lock.
    #[inline]
    pub(super) fn cached_outputs(&mut self, channel: Channel) -> Option<usize> {
        let generation = self.shared.channels.output_generation(channel);
        if generation == 0 {
            return None;
        }
        match self.outputs.iter().position(|c| c.channel == channel) {
            Some(i) if self.outputs[i].generation == generation => Some(i),
            found => Some(self.refresh_outputs(channel, found)),
        }
    }

    /// Copies `channel`'s output list (it changed, or this sender never delivered to it).
    #[cold]
    #[inline(never)]
    fn refresh_outputs(&mut self, channel: Channel, found: Option<usize>) -> usize {
        let (generation, queues) = self.shared.channels.outputs_of(channel);
        let fresh = CachedOutputs {
            channel,
            generation,
            queues,
        };
        match found {
            Some(i) => {
                self.outputs[i] = fresh;
                i
            }
            None => {
                self.outputs.push(fresh);
                self.outputs.len() - 1
            }
        }
    }

    /// Delivers a copy of `event` to every output of `channel` (R4.2, R4.3), each as its policy
    /// says; returns how many queued it. Forgets outputs whose receivers are gone.
    pub(crate) fn deliver_outputs(&mut self, channel: Channel, event: &E) -> usize {
        let Some(i) = self.cached_outputs(channel) else {
            return 0;
        };
        // Moved out for the loop (no allocation), so that the pushes may use `self`.
        let queues = std::mem::take(&mut self.outputs[i].queues);
        let mut n = 0;
        let mut gone = false;
        for q in &queues {
            match self.push_output(q, event.clone()) {
                OutputDelivery::Queued => n += 1,
                OutputDelivery::Dropped => {}
                OutputDelivery::Disconnected => gone = true,
            }
        }
        self.outputs[i].queues = queues;
        if gone {
            self.shared.channels.prune_outputs(channel);
        }
        n
    }

    /// Whether a `Block` output of `channel` is full now (an all-or-nothing send must not wait
    /// for it); returns it.
    pub(super) fn full_block_output(&mut self, channel: Channel) -> Option<StdArc<OutputQueue<E>>> {
        let i = self.cached_outputs(channel)?;
        self.outputs[i]
            .queues
            .iter()
            .find(|q| q.would_block())
            .cloned()
    }

    /// Pushes `value` into `queue` as its policy says; a `Block` output that is full makes this
    /// sender wait (see [`push_output_waiting`](Self::push_output_waiting)). Counts drops.
    #[inline]
    pub(crate) fn push_output<A>(&mut self, queue: &OutputQueue<A>, value: A) -> OutputDelivery {
        match queue.push(value) {
            Pushed::Queued => OutputDelivery::Queued,
            Pushed::Displaced => {
                self.count_output_drop();
                OutputDelivery::Queued
            }
            Pushed::Dropped => {
                self.count_output_drop();
                OutputDelivery::Dropped
            }
            Pushed::Disconnected => OutputDelivery::Disconnected,
            Pushed::Full(value) => self.push_output_waiting(queue, value),
        }
    }

    /// Puts `value` into a typed output (`Scope::emit_to`): as [`push_output`](Self::push_output),
    /// and a value discarded because the receiver is gone or the output closed counts as a drop
    /// too (the output counted it already). A channel's output is different: its receiver's drop
    /// takes it off the channel, like an unsubscribe, so a copy that meets it gone is not counted.
    pub(crate) fn push_typed_output<A>(&mut self, queue: &OutputQueue<A>, value: A) -> bool {
        match self.push_output(queue, value) {
            OutputDelivery::Queued => true,
            OutputDelivery::Dropped => false,
            OutputDelivery::Disconnected => {
                self.count_output_drop();
                false
            }
        }
    }

    fn count_output_drop(&mut self) {
        if self.me.is_some() {
            self.output_drops += 1;
        } else {
            self.shared
                .outputs
                .external_drops
                .fetch_add(1, Ordering::Relaxed);
        }
    }

    /// A `Block` output is full: wait for room (spin, yield, then park; module docs of `output`),
    /// holding no inbox place (a context gives its held places back first, as before any wait).
    ///
    /// A context publishes the wait while it lasts (R9.1): "blocked on this output since now" in
    /// its `OutputWaitBoard` as it begins, the time it took as it ends; the status snapshot reads
    /// that (`blocked_on_output`, and `output_blocked_ns` counting up while the wait goes on).
    /// Once the wait has lasted the builder's `output_block_warning` it logs a warning naming the
    /// output, then again after 2, 4, 8, … times that (it parks with a deadline for each).
    #[cold]
    #[inline(never)]
    fn push_output_waiting<A>(&mut self, queue: &OutputQueue<A>, value: A) -> OutputDelivery {
        self.held.give_back();
        let board = self.own.as_ref().map(|own| {
            let since = own.stats.output_wait.begin(queue.id());
            (own.clone(), since)
        });
        let warn_after = self.output_block_warning.filter(|_| board.is_some());
        let delivery = push_waiting(queue, value, self.strategy, warn_after, |waited| {
            self.warn_blocked(queue, waited);
        });
        if let Some((own, since)) = board {
            own.stats.output_wait.end(since);
        }
        delivery
    }

    /// The warning of a long wait on a full `Block` output (no inbox place is held: `tracing`
    /// runs the user's subscriber).
    #[cold]
    fn warn_blocked<A>(&self, queue: &OutputQueue<A>, waited: std::time::Duration) {
        let context = self.me.map_or(u32::MAX, |c| c.id());
        tracing::warn!(
            context,
            output = queue.id(),
            waited_ms = waited.as_millis() as u64,
            "context {context} has waited {} ms for room in output {} ({}), a full `Block` \
             output: read its receiver, or give it a dropping overflow policy",
            waited.as_millis(),
            queue.id(),
            queue.name(),
        );
    }
}

/// Pushes `value` into `queue` as its policy says, waiting for room in a full `Block` output
/// ([`push_waiting`], without warnings); drops are counted by the output only. What a blocking
/// push does outside a sender's links (the loom models).
#[cfg_attr(not(feature = "internals"), allow(dead_code))]
pub fn push_blocking<A>(queue: &OutputQueue<A>, value: A) -> OutputDelivery {
    match queue.push(value) {
        Pushed::Queued | Pushed::Displaced => OutputDelivery::Queued,
        Pushed::Dropped => OutputDelivery::Dropped,
        Pushed::Disconnected => OutputDelivery::Disconnected,
        Pushed::Full(value) => push_waiting(queue, value, WaitStrategy::default(), None, |_| {}),
    }
}

/// The wait of a push that found the `Block` output `queue` full: spin, yield, then park until
/// the receiver makes room (at once under loom, as the send core's `pause`), and push again,
/// until it is queued or the output goes away. With `warn_after`, `warn` is called with the time
/// waited once the wait has lasted that long, then again after 2, 4, 8, … times that (it parks
/// with a deadline for each).
pub fn push_waiting<A>(
    queue: &OutputQueue<A>,
    value: A,
    strategy: WaitStrategy,
    mut warn_after: Option<Duration>,
    mut warn: impl FnMut(Duration),
) -> OutputDelivery {
    let began = Instant::now();
    let mut backoff = Backoff::new(strategy);
    let mut value = value;
    loop {
        if pause(&mut backoff) {
            match warn_after {
                None => queue.wait_for_room(None),
                Some(after) => {
                    queue.wait_for_room(Some(began + after));
                    let waited = began.elapsed();
                    if waited >= after {
                        warn(waited);
                        warn_after = Some(after.saturating_mul(2));
                    }
                }
            }
        }
        match queue.push(value) {
            Pushed::Full(back) => value = back,
            Pushed::Queued | Pushed::Displaced => return OutputDelivery::Queued,
            Pushed::Dropped => return OutputDelivery::Dropped,
            Pushed::Disconnected => return OutputDelivery::Disconnected,
        }
    }
}
