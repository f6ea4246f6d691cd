//! The status snapshot (SPEC R9.1).
//!
//! Each context publishes its counters with relaxed stores after every inbox entry; a snapshot reads
//! them (and each inbox's count) without stopping anything, so it is cheap enough to take every
//! second from any thread. The figures of different contexts are not taken at one instant.

use std::fmt;

use crate::context::ContextRef;

/// The counters of one context.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ContextStatus {
    /// Which context.
    pub context: Option<ContextRef>,
    /// Its name.
    pub name: String,
    /// Whether it receives the default channel.
    pub public: bool,
    /// The core it was asked to run on, if pinned.
    pub core: Option<usize>,
    /// Whether pinning to `core` took effect.
    pub pinned: bool,
    /// Events dispatched (inbox events and routed events).
    pub processed: u64,
    /// Events routed by its handlers.
    pub routed: u64,
    /// Entries its handlers put into inboxes (its own included).
    pub sent: u64,
    /// Inbox entries taken.
    pub received: u64,
    /// Entries accepted into its inbox and not yet fully processed.
    pub inbox_len: u64,
    /// The deepest its route stack has been.
    pub max_route_depth: u64,
    /// Live listeners.
    pub listeners: u64,
    /// Live monitor instances.
    pub instances: u64,
    /// Time its handlers spent waiting for room in full inboxes, in nanoseconds.
    pub blocked_ns: u64,
    /// Entries taken into its inbox beyond capacity to avoid a deadlock (R5.2).
    pub overruns: u64,
    /// Handler and `on_die` panics caught.
    pub handler_panics: u64,
    /// Events stamped before the context's clock under
    /// [`event_time`](crate::CorrelatorBuilder::event_time), processed at the clock's time.
    pub late_events: u64,
    /// Whether its thread has exited.
    pub stopped: bool,
}

/// Correlator-wide totals.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Totals {
    /// Sum of [`ContextStatus::processed`].
    pub processed: u64,
    /// Sum of [`ContextStatus::routed`].
    pub routed: u64,
    /// Sum of [`ContextStatus::sent`].
    pub sent: u64,
    /// Sum of [`ContextStatus::received`].
    pub received: u64,
    /// Sum of [`ContextStatus::inbox_len`].
    pub inbox_len: u64,
    /// Sum of [`ContextStatus::listeners`].
    pub listeners: u64,
    /// Sum of [`ContextStatus::instances`].
    pub instances: u64,
    /// Sum of [`ContextStatus::blocked_ns`].
    pub blocked_ns: u64,
    /// Sum of [`ContextStatus::overruns`].
    pub overruns: u64,
    /// Sum of [`ContextStatus::handler_panics`].
    pub handler_panics: u64,
    /// Sum of [`ContextStatus::late_events`].
    pub late_events: u64,
    /// Channel sends that nobody received (R4.5).
    pub dropped: u64,
}

/// A snapshot of every context and the totals.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Status {
    /// One entry per context, in id order.
    pub contexts: Vec<ContextStatus>,
    /// Sums over the contexts, plus correlator-wide counters.
    pub totals: Totals,
    /// Whether `start()` was called.
    pub started: bool,
    /// Whether the correlator has shut down.
    pub shut_down: bool,
}

impl Status {
    pub(crate) fn sum(contexts: Vec<ContextStatus>, dropped: u64) -> Totals {
        let mut t = Totals {
            dropped,
            ..Totals::default()
        };
        for c in &contexts {
            t.processed += c.processed;
            t.routed += c.routed;
            t.sent += c.sent;
            t.received += c.received;
            t.inbox_len += c.inbox_len;
            t.listeners += c.listeners;
            t.instances += c.instances;
            t.blocked_ns += c.blocked_ns;
            t.overruns += c.overruns;
            t.handler_panics += c.handler_panics;
            t.late_events += c.late_events;
        }
        t
    }

    /// The status of one context.
    pub fn context(&self, ctx: ContextRef) -> Option<&ContextStatus> {
        self.contexts.iter().find(|c| c.context == Some(ctx))
    }
}

impl fmt::Display for Status {
    /// One line in the spirit of a correlator's periodic log line.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let t = &self.totals;
        write!(
            f,
            "Correlator Status: contexts={} instances={} listeners={} processed={} routed={} \
             sent={} received={} queued={} overruns={} dropped={} blocked_ms={}",
            self.contexts.len(),
            t.instances,
            t.listeners,
            t.processed,
            t.routed,
            t.sent,
            t.received,
            t.inbox_len,
            t.overruns,
            t.dropped,
            t.blocked_ns / 1_000_000
        )
    }
}
