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
//!   ([`Event::time`]) before dispatching it.
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
//!   the clock where it is. What happens to a late event is the builder's [`LateEvents`] policy
//!   (processed at the clock, dropped, or handed to an output); each context reports its late
//!   events in a warning at most once per `late_event_warning_interval`, with the likely cause.
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
//! # Ticks and stamped events
//! In tick mode a context asks its first [`TIME_PROBE_EVENTS`] inbox events for a time; if one
//! has one, the correlator logs once that the events carry times the tick clock ignores (the
//! mistake of implementing `Event::time` and forgetting `event_time()`).
//!
//! # Cost
//! With event time off, the only per-entry cost is the test of one `bool` the context owns, on
//! inbox events only (routed events pay nothing); in tick mode the first few inbox events also
//! pay one call of `Event::time`. With it on, an inbox event costs one call of
//! `Event::time` (under `catch_unwind`: a panic there is user code like a handler's, counted in
//! `events_dropped_by_panic`, and the event is dispatched at the current clock) and a comparison; no
//! allocation, no lock.
//!
//! May import the leaves, `expr` (the bounds it checks), `output` (the late events' output) and
//! `status` (the late-event counters).

use std::any::TypeId;
use std::time::{Duration, Instant};

use crate::event::Event;
use crate::expr::Def;
use crate::id::ContextRef;
use crate::output::OutputOptions;
use crate::state::State;
use crate::status::Counters;
use crate::sync::{AtomicBool, Ordering};
use crate::time::Time;

/// What a context does with a *late* event under event time: one stamped before its context's
/// clock (SPEC R7.1, "Event time"). Set with
/// [`CorrelatorBuilder::late_events`](crate::CorrelatorBuilder::late_events); every late event
/// counts in [`ContextStatus::late_events`](crate::ContextStatus::late_events) whatever the policy,
/// and late events are reported in rate-limited warnings
/// ([`late_event_warning_interval`](crate::CorrelatorBuilder::late_event_warning_interval)).
///
/// Under ticks or external time no event is late and the policy does nothing.
///
/// ```
/// use correlator::{Correlator, Event, LateEvents, OutputOptions, Overflow, Time};
/// # #[derive(Clone, Debug)] struct Stamped(u64);
/// # impl Event for Stamped {
/// #     type Kind = ();
/// #     fn kind(&self) {}
/// #     fn time(&self) -> Option<Time> { Some(Time::from_millis(self.0)) }
/// # }
/// let c = Correlator::<Stamped>::builder()
///     .event_time()
///     .late_events(LateEvents::ToOutput(
///         OutputOptions::bounded(1024).policy(Overflow::DropOldest),
///     ))
///     .build()?;
/// let late = c.take_late_events().expect("the policy is ToOutput");
/// let input = c.input();
/// c.start();
/// input.send_to(c.main(), Stamped(50))?;
/// input.send_to(c.main(), Stamped(20))?; // before the clock (50 ms): late
/// let status = c.shutdown()?;
/// assert_eq!(status.totals.late_events, 1);
/// assert_eq!(late.iter().map(|e| e.0).collect::<Vec<_>>(), [20]);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum LateEvents {
    /// Dispatched at the context's clock, as if stamped with it (the default): a listener sees
    /// it, but a `within` bound that expired before it arrived has already ended.
    #[default]
    Process,
    /// Not dispatched: no listener sees it. Counted in `late_events` (and not in `processed`).
    Drop,
    /// Not dispatched: handed to an output of these options, read through the receiver that
    /// [`Correlator::take_late_events`](crate::Correlator::take_late_events) returns (taken
    /// once). The output's [`Overflow`](crate::Overflow) policy says what a full one does, as for
    /// any output: `Block` (the default of [`OutputOptions`]) makes the context wait for the
    /// reader (counted in `output_blocked_ns`; so read it, or choose a dropping policy),
    /// `DropOldest` and `DropNewest` drop (counted in `output_drops` and the receiver's
    /// `dropped()`). Once the receiver is dropped, late events are discarded. The capacity is
    /// checked by [`build`](crate::CorrelatorBuilder::build)
    /// ([`Error::InvalidOutputCapacity`](crate::Error::InvalidOutputCapacity)).
    ToOutput(OutputOptions),
}

/// The default of
/// [`CorrelatorBuilder::late_event_warning_interval`](crate::CorrelatorBuilder::late_event_warning_interval):
/// at most one late-event warning per context every 10 seconds.
pub const DEFAULT_LATE_WARNING_INTERVAL: Duration = Duration::from_secs(10);

/// In tick mode, how many of its first inbox events a context asks for a time
/// ([`Event::time`]) to warn that event time is not on (after that it asks no more: the tick
/// mode's hot path pays one `bool` test, as before).
pub(crate) const TIME_PROBE_EVENTS: u32 = 16;

/// What the clock does for one inbox event (see [`EventClock::advance_for`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Stamp {
    /// Move the clock to this time (firing due timers) before dispatching.
    Forward(Time),
    /// Keep the clock; dispatch.
    Keep,
    /// A late event whose policy is not [`LateEvents::Process`]: do not dispatch it.
    Divert,
}

/// What a context knows about the clock mode: owned by the context's thread.
pub(crate) struct EventClock {
    /// Whether inbox events move the clock (`CorrelatorBuilder::event_time`).
    on: bool,
    /// Whether inbox events are looked at: `on`, or in tick mode while the first
    /// [`TIME_PROBE_EVENTS`] events are probed for a time.
    looks: bool,
    /// Tick mode: inbox events probed so far.
    probed: u32,
    /// Whether late events are dispatched ([`LateEvents::Process`]).
    process_late: bool,
    /// Late events since the last warning, the largest and the latest lag among them.
    late_unreported: u64,
    late_max_lag: Duration,
    late_last_lag: Duration,
    /// When the last late-event warning was logged (wall clock: warnings are for people).
    late_warned_at: Option<Instant>,
    late_warning_interval: Duration,
    late_policy: LateEvents,
    /// The clock thread's tick period, when one runs (tick mode): bounds shorter than it are
    /// reported.
    tick_period: Option<Duration>,
    /// The monitor types already warned about in this context (at most one warning each), by
    /// `TypeId`: type names are for messages only, two types can share one.
    warned: Vec<TypeId>,
}

impl EventClock {
    /// A context's clock for the builder's settings: `event_time`, `tick_rate`, `late_events` and
    /// `late_event_warning_interval` (taken one by one, so that this module needs nothing from
    /// `registry`, which imports [`LateEvents`] from here).
    pub(crate) fn new(
        event_time: bool,
        tick_rate: Option<u32>,
        late_events: LateEvents,
        late_warning_interval: Duration,
    ) -> Self {
        let tick_period = match tick_rate {
            Some(rate) if rate > 0 && !event_time => Some(Duration::from_secs(1) / rate),
            _ => None,
        };
        Self {
            on: event_time,
            looks: event_time || tick_period.is_some(),
            probed: 0,
            process_late: late_events == LateEvents::Process,
            late_unreported: 0,
            late_max_lag: Duration::ZERO,
            late_last_lag: Duration::ZERO,
            late_warned_at: None,
            late_warning_interval,
            late_policy: late_events,
            tick_period,
            warned: Vec::new(),
        }
    }

    /// Whether [`advance_for`](Self::advance_for) must see the next inbox event: under event
    /// time, or in tick mode for the first few events. The only test the default mode pays.
    #[inline(always)]
    pub(crate) fn looks(&self) -> bool {
        self.looks
    }

    /// What the clock does before `e` is dispatched (see the module docs): under event time,
    /// moves forward to its stamp, keeps still, or (a late event under a policy other than
    /// [`LateEvents::Process`]) diverts it. Counts a late event, and a panic of `Event::time`, in
    /// `stats`. In tick mode it probes the first events for a stamp instead (and `warned`, the
    /// correlator's flag, makes the warning once per correlator).
    #[inline(always)]
    pub(crate) fn advance_for<E: Event>(
        &mut self,
        e: &E,
        now: Time,
        stats: &mut Counters,
        ctx: ContextRef,
        warned: &AtomicBool,
    ) -> Stamp {
        if !self.on {
            self.probe(e, ctx, warned);
            return Stamp::Keep;
        }
        // Inline: the clock moves forward or keeps still for almost every event, and a call per
        // event cost as much as the test itself (callgrind of `workload/spike`).
        match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| e.time())) {
            Ok(Some(stamp)) if stamp > now => Stamp::Forward(stamp),
            Ok(Some(stamp)) if stamp == now => Stamp::Keep,
            Ok(None) => Stamp::Keep,
            Ok(Some(stamp)) => self.late(now - stamp, stats, ctx),
            Err(_) => Self::time_panicked(stats, ctx),
        }
    }

    /// [`advance_for`](Self::advance_for) of an event stamped `lag` before the clock.
    #[cold]
    #[inline(never)]
    fn late(&mut self, lag: Duration, stats: &mut Counters, ctx: ContextRef) -> Stamp {
        stats.late_events += 1;
        self.note_late(lag, ctx);
        if self.process_late {
            Stamp::Keep
        } else {
            Stamp::Divert
        }
    }

    /// [`advance_for`](Self::advance_for) of an event whose `time()` panicked.
    #[cold]
    #[inline(never)]
    fn time_panicked(stats: &mut Counters, ctx: ContextRef) -> Stamp {
        stats.events_dropped_by_panic += 1;
        tracing::warn!(
            context = ctx.id(),
            "an event's time() panicked; the event is processed at the context's clock"
        );
        Stamp::Keep
    }

    /// Tick mode: asks one of the first [`TIME_PROBE_EVENTS`] inbox events for its time, and
    /// warns (once per correlator) if it has one: the events carry times the clock ignores.
    #[cold]
    fn probe<E: Event>(&mut self, e: &E, ctx: ContextRef, warned: &AtomicBool) {
        self.probed += 1;
        if self.probed >= TIME_PROBE_EVENTS {
            self.looks = false;
        }
        // User code: a panic here means "no time" (tick mode does not need one).
        let stamped = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| e.time()))
            .ok()
            .flatten();
        let Some(stamp) = stamped else {
            return;
        };
        self.looks = false;
        if warned.swap(true, Ordering::Relaxed) {
            return;
        }
        let period = self.tick_period.unwrap_or_default();
        tracing::warn!(
            context = ctx.id(),
            ?stamp,
            tick_period = ?period,
            "events carry their own times (Event::time() returned {stamp}) but the correlator \
             runs on clock ticks, which ignore them: `wait` and `within` are measured from the \
             ticks' arrival on the wall clock, in whole tick periods ({period:?}), so a replay \
             or a burst matches differently from the events' own timeline. Call \
             CorrelatorBuilder::event_time() to measure bounds on the events' stamps, or \
             external_time() to drive the clock yourself (this warning is logged once per \
             correlator)"
        );
    }

    /// Counts a late event `lag` behind the clock for the rate-limited warning, and logs it when
    /// the last one is at least the interval ago. Cold: only late events come here.
    #[cold]
    fn note_late(&mut self, lag: Duration, ctx: ContextRef) {
        self.late_unreported += 1;
        self.late_max_lag = self.late_max_lag.max(lag);
        self.late_last_lag = lag;
        let now = Instant::now();
        let due = self
            .late_warned_at
            .is_none_or(|at| now.duration_since(at) >= self.late_warning_interval);
        if !due {
            return;
        }
        let count = std::mem::take(&mut self.late_unreported);
        let max_lag = std::mem::take(&mut self.late_max_lag);
        let since = if self.late_warned_at.is_some() {
            "since the last warning"
        } else {
            "(the first)"
        };
        self.late_warned_at = Some(now);
        let policy = match self.late_policy {
            LateEvents::Process => "processed at the clock's time (LateEvents::Process)",
            LateEvents::Drop => "dropped (LateEvents::Drop)",
            LateEvents::ToOutput(_) => "handed to the late-events output (LateEvents::ToOutput)",
        };
        tracing::warn!(
            context = ctx.id(),
            late = count,
            ?max_lag,
            "{count} late event(s) {since} in context {}: stamped before the context's clock \
             (the latest {lag:?} behind it, the most {max_lag:?}); {policy}. Event time has no \
             reordering tolerance: a context's clock moves to the latest stamp it took, so each \
             context must get its events in stamp order. Likely cause: several feeders (input \
             handles, threads, partitions of a source) send events to one context, or one key's \
             events are split across feeders; send each context's (or key's) events through one \
             feeder in stamp order, or sort them before sending. Every late event counts in \
             ContextStatus::late_events (this warning is logged at most once per context every \
             {:?}, CorrelatorBuilder::late_event_warning_interval)",
            ctx.id(),
            self.late_warning_interval
        );
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
                Def::Wait(d) | Def::Within(_, d) | Def::WithinFirst(_, d) => Some(*d),
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
