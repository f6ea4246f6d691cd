//! Event time, and honesty about the tick clock (SPEC §7).
//!
//! # Three clocks
//! Every context keeps its own logical clock (R7.1); what moves it is chosen on the builder:
//! * **ticks** (the default, [`tick_rate`](crate::CorrelatorBuilder::tick_rate)): a clock thread
//!   sends every context a tick `rate` times a second. An event is evaluated at the time of the
//!   last tick its context took, so `wait(d)` and `within(d)` are measured in whole tick periods:
//!   a bound shorter than one period means "before the next tick" (which one depends on when the
//!   event arrived on the wall clock). Registering such a bound logs one warning per monitor and
//!   context (see [`EventClock::check_bounds`]).
//! * **external time** ([`external_time`](crate::CorrelatorBuilder::external_time)): no clock
//!   thread; the clock moves only with [`InputHandle::send_time`](crate::InputHandle::send_time).
//! * **event time** ([`event_time`](crate::CorrelatorBuilder::event_time)): no clock thread; a
//!   context advances its clock to the timestamp of every event it takes from its inbox
//!   ([`Event::time`](crate::Event::time)) before dispatching it.
//!
//! # Event time, decided
//! * Before an inbox event stamped `t` is dispatched, a context whose clock is before `t` fires
//!   every timer due at or before `t` (`wait`, `at`, the bounds of `within`), in due-time order
//!   then creation order, each run to completion with the clock at its own due time, exactly as a
//!   tick to `t` would; then the clock is `t` and the event is dispatched. A `within(d)` bound is
//!   therefore exclusive: an event stamped exactly `start + d` comes after the bound has expired.
//! * The clock never goes back, per context: an event stamped before its context's clock is
//!   *late*; it is dispatched at the current clock and counted in
//!   [`ContextStatus::late_events`](crate::ContextStatus::late_events). An event stamped at the
//!   clock's time, and an event without a time (`Event::time` returns `None`, the default), keep
//!   the clock where it is.
//! * Only entries taken from the inbox move the clock: routed events belong to the entry being
//!   processed (R2.2) and are dispatched at its time, whatever their stamp. An event sent to
//!   another context moves that context's clock when that context takes it; contexts' clocks are
//!   independent, so an event is late only with respect to its own context.
//! * Event time replaces the clock thread. [`InputHandle::send_time`](crate::InputHandle::send_time)
//!   still works and moves clocks forward under the same rules (to fire the timers still pending
//!   at the end of a recorded stream, or across a quiet spell).
//! * A timer already due when it is set (`wait(Duration::ZERO)`, say) fires the next time the clock
//!   moves forward (R7.2, "Timers already due").
//! * Nothing here reads the wall clock, so the same input gives the same output at any replay
//!   speed.
//!
//! # Cost
//! With event time off, the only per-entry cost is the test of one `bool` the context owns, on
//! inbox events only (routed events pay nothing). With it on, an inbox event costs one call of
//! `Event::time` (under `catch_unwind`: a panic there is user code like a handler's, counted in
//! `events_dropped_by_panic`, and the event is dispatched at the current clock) and a comparison; no
//! allocation, no lock.

use std::any::TypeId;
use std::time::Duration;

use crate::event::Event;
use crate::expr::Def;
use crate::id::ContextRef;
use crate::registry::Config;
use crate::state::State;
use crate::status::Counters;
use crate::time::Time;

/// What a context knows about the clock mode: owned by the context's thread.
pub(crate) struct EventClock {
    /// Whether inbox events move the clock (`CorrelatorBuilder::event_time`).
    on: bool,
    /// The clock thread's tick period, when one runs (tick mode): bounds shorter than it are
    /// reported.
    tick_period: Option<Duration>,
    /// The monitor types already warned about in this context (at most one warning each), by
    /// `TypeId`: type names are for messages only, two types can share one.
    warned: Vec<TypeId>,
}

impl EventClock {
    pub(crate) fn new(config: &Config) -> Self {
        let tick_period = match config.tick_rate {
            Some(rate) if rate > 0 && !config.event_time => Some(Duration::from_secs(1) / rate),
            _ => None,
        };
        Self {
            on: config.event_time,
            tick_period,
            warned: Vec::new(),
        }
    }

    /// Whether the correlator runs on event time: the only test the default mode pays.
    #[inline(always)]
    pub(crate) fn on(&self) -> bool {
        self.on
    }

    /// Under event time: the time to advance the clock to before `e` is dispatched, if it moves
    /// (see the module docs). Counts a late event, and a panic of `Event::time` in `stats`.
    #[inline(never)]
    pub(crate) fn advance_for<E: Event>(
        &mut self,
        e: &E,
        now: Time,
        stats: &mut Counters,
        ctx: ContextRef,
    ) -> Option<Time> {
        let stamp = match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| e.time())) {
            Ok(stamp) => stamp?,
            Err(_) => {
                stats.events_dropped_by_panic += 1;
                tracing::warn!(
                    context = ctx.id(),
                    "an event's time() panicked; the event is processed at the context's clock"
                );
                return None;
            }
        };
        if stamp > now {
            Some(stamp)
        } else {
            if stamp < now {
                stats.late_events += 1;
            }
            None
        }
    }

    /// In tick mode: warns, once per monitor type in this context, when the expression `defs`
    /// that an instance with state `monitor` registers holds a `wait` or `within` shorter than
    /// the tick period (a zero one means "at the next tick" and is left alone). The bounds are
    /// checked first: an expression without a short bound costs no look at the monitor.
    pub(crate) fn check_bounds<E: Event>(
        &mut self,
        defs: &[Def<E>],
        monitor: Option<&State>,
        ctx: ContextRef,
    ) {
        let Some(period) = self.tick_period else {
            return;
        };
        let shortest = defs
            .iter()
            .filter_map(|d| match d {
                Def::Wait(d) | Def::Within(_, d) => Some(*d),
                _ => None,
            })
            .filter(|d| !d.is_zero())
            .min();
        let Some(bound) = shortest.filter(|&d| d < period) else {
            return;
        };
        let Some(state) = monitor else {
            return;
        };
        if self.warned.contains(&state.type_id()) {
            return;
        }
        self.warned.push(state.type_id());
        let monitor = state.monitor_name();
        tracing::warn!(
            context = ctx.id(),
            monitor,
            ?bound,
            tick_period = ?period,
            "monitor {monitor} registered a wait/within of {bound:?}, shorter than the tick period \
             {period:?}: in tick mode an event is evaluated at the time of the last tick, so the \
             bound means \"before the next tick\" and events up to one tick period apart can \
             match. Use CorrelatorBuilder::event_time() with Event::time() to measure it on the \
             events' own timestamps, or a tick_rate of at least one tick per bound (this warning \
             is logged once per monitor type and context)"
        );
    }
}
