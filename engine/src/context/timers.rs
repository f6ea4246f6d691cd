//! Timers: the context's logical clock and its pending timers (SPEC §7; the queue that holds them
//! is `timer_queue`'s).
//!
//! Owns the queue's purge policy. May import the leaves.

use super::Context;
use crate::event::Event;
use crate::time::Time;

/// The smallest timer heap that [`Context::schedule`] purges of ended listeners' entries.
pub(super) const TIMER_PURGE_MIN: usize = 64;

impl<E: Event> Context<E> {
    /// Advances the logical clock to `t`, firing every due timer in trigger-time order, then
    /// creation order, each run to completion with the clock at its trigger time (R7.2). A tick
    /// earlier than the clock changes nothing: logical time never goes back.
    ///
    /// A timer set while this runs that is already due at the clock's time (a repeating `wait(0)`
    /// restarting, say) waits for the next tick: without that, it would fire again and again at one
    /// logical time and the tick would never end.
    ///
    /// Most moves of an event-time clock fire nothing (`workload/spike`: one in a hundred): that
    /// case is decided here, inline, by one comparison; the loop is out of line.
    #[inline(always)]
    pub(super) fn advance_time(&mut self, t: Time) {
        debug_assert!(
            !self.advancing && self.deferred.is_empty(),
            "advance_time re-entered"
        );
        if self.timers.due_by(t) {
            return self.fire_due(t);
        }
        if t > self.fx.now {
            self.fx.now = t;
        }
    }

    /// [`advance_time`](Self::advance_time) with a timer due by `t`.
    #[inline(never)]
    fn fire_due(&mut self, t: Time) {
        self.advancing = true;
        // An expression listener takes one clock stimulus per time in a tick: the entries come
        // in time order, so a new number starts at each new time, and at the tick's first.
        let mut last = None;
        while self.timers.due_by(t) {
            let Some((due, _, handle, slot)) = self.timers.pop_if(|e| e.0 <= t) else {
                break;
            };
            if last != Some(due) {
                self.stimulus += 1;
                last = Some(due);
            }
            if due > self.fx.now {
                self.fx.now = due;
            }
            if let Some(slot) = self.table.live_slot(handle, slot) {
                self.run_then_drain(|cx| cx.fire_timer(slot, due));
                self.compact_listeners();
            }
        }
        self.advancing = false;
        for entry in self.deferred.drain(..) {
            self.timers.push(entry);
        }
        if t > self.fx.now {
            self.fx.now = t;
        }
    }

    /// Queues the timers of `step_timers` for the listener `handle` in `slot` (kept beside the
    /// handle, so that a timer finds its listener without the handle map: at 100,000 devices
    /// `workload/absence` fires a timer per heartbeat, most of them for a match that has ended, and
    /// each lookup in the map was a cache miss or two). Timers already due while a tick
    /// fires timers are deferred to the next tick (see [`advance_time`](Self::advance_time)).
    ///
    /// The heap keeps the entries of listeners that ended (quit, fired through an event, or
    /// removed with their instance) until they are due, which may be never; so whenever it has
    /// doubled since the last purge, the entries of ended listeners are dropped. That bounds it by
    /// twice the live timers (plus [`TIMER_PURGE_MIN`]) at an amortised constant cost per timer.
    pub(super) fn schedule(&mut self, handle: u64, slot: u32) {
        if self.step_timers.is_empty() {
            return;
        }
        if self.timers.len() >= self.timer_purge_at {
            let table = &self.table;
            self.timers
                .retain(|&(_, _, h, s)| table.live_slot(h, s).is_some());
            self.timer_purge_at = TIMER_PURGE_MIN.max(2 * self.timers.len());
            if self.timers.capacity() > 2 * self.timer_purge_at {
                self.timers.shrink();
            }
        }
        for due in self.step_timers.drain(..) {
            let entry = (due, self.timer_seq, handle, slot);
            self.timer_seq += 1;
            if self.advancing && due <= self.fx.now {
                self.deferred.push(entry);
            } else {
                self.timers.push(entry);
            }
        }
    }
}
