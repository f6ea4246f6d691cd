//! The status counters as metrics (feature `metrics`): [`export`] publishes a [`Status`] to the
//! [`metrics`](https://docs.rs/metrics) facade, so that whichever recorder the service installed
//! (Prometheus, StatsD, OpenTelemetry, ...) carries them; [`describe`] gives each its unit and help
//! text. Call `export` whenever you take a snapshot, or let the correlator do it on a helper
//! thread with [`CorrelatorBuilder::export_metrics`](crate::CorrelatorBuilder::export_metrics).
//!
//! Per-context series carry two labels: `context` (the context's name, which need not be unique)
//! and `context_id` (its [`ContextRef::id`](crate::ContextRef::id), which is), so that pools and
//! same-named contexts do not overwrite each other. The status's counters only grow, so they are
//! published with `Counter::absolute`; `sum by (...)` over the labels gives the totals. Values are
//! those of the snapshot: the figures of different contexts are not taken at one instant (R9.1).
//!
//! | metric | kind | labels | unit | [`Status`] field |
//! |---|---|---|---|---|
//! | `correlator_processed_total` | counter | context | events | [`ContextStatus::processed`] |
//! | `correlator_routed_total` | counter | context | events | [`ContextStatus::routed`] |
//! | `correlator_sent_total` | counter | context | entries | [`ContextStatus::sent`] |
//! | `correlator_received_total` | counter | context | entries | [`ContextStatus::received`] |
//! | `correlator_late_events_total` | counter | context | events | [`ContextStatus::late_events`] |
//! | `correlator_listeners` | gauge | context | listeners | [`ContextStatus::listeners`] |
//! | `correlator_instances` | gauge | context | instances | [`ContextStatus::instances`] |
//! | `correlator_partial_matches` | gauge | context | matches | [`ContextStatus::partial_matches`] |
//! | `correlator_partial_events` | gauge | context | events | [`ContextStatus::partial_events`] |
//! | `correlator_window_partitions` | gauge | context | partitions | [`ContextStatus::window_partitions`] |
//! | `correlator_window_values` | gauge | context | values | [`ContextStatus::window_values`] |
//! | `correlator_blocked_ns_total` | counter | context | nanoseconds | [`ContextStatus::blocked_ns`] |
//! | `correlator_output_blocked_ns_total` | counter | context | nanoseconds | [`ContextStatus::output_blocked_ns`] |
//! | `correlator_output_drops_total` | counter | context | events | [`ContextStatus::output_drops`] |
//! | `correlator_handler_panics_total` | counter | context | panics | [`ContextStatus::handler_panics`] |
//! | `correlator_events_dropped_by_panic_total` | counter | context | events | [`ContextStatus::events_dropped_by_panic`] |
//! | `correlator_max_route_depth` | gauge | context | events | [`ContextStatus::max_route_depth`] |
//! | `correlator_inbox_len` | gauge | context | entries | [`ContextStatus::inbox_len`] |
//! | `correlator_overruns_total` | counter | context | entries | [`ContextStatus::overruns`] |
//! | `correlator_context_stopped` | gauge | context | 0 or 1 | [`ContextStatus::stopped`] |
//! | `correlator_channel_dropped_total` | counter | none | events | [`Totals::dropped`] |
//! | `correlator_input_output_drops_total` | counter | none | events | [`Totals::output_drops`] less the contexts' (drops caused by input handles' channel sends) |
//! | `correlator_contexts` | gauge | none | contexts | `contexts.len()` |
//! | `correlator_shut_down` | gauge | none | 0 or 1 | [`Status::shut_down`] |
//!
//! (`context` stands for both labels, `context` and `context_id`.) One correlator per recorder:
//! two correlators of one process publish into the same series; label them apart with a
//! recorder layer (metrics-util's `Layer`s) if you run several.
//!
//! Not on any hot path: an export allocates its label values, once per context and interval.
//! May import `id` and `status`.

use ::metrics::{counter, describe_counter, describe_gauge, gauge, Unit};

use crate::status::Status;
#[cfg(doc)]
use crate::status::{ContextStatus, Totals};

/// How a per-context counter of [`ContextStatus`] is published.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Kind {
    /// Only grows: `Counter::absolute`.
    Counter,
    /// Goes up and down: `Gauge::set`.
    Gauge,
}

/// Every per-context counter of [`ContextStatus`] (by field name, as `named_counters` lists
/// them): its metric name, kind, unit and help text. A test checks that every counter of the
/// status has a line here and in the module doc's table.
const PER_CONTEXT: &[(&str, &str, Kind, Unit, &str)] = &[
    (
        "processed",
        "correlator_processed_total",
        Kind::Counter,
        Unit::Count,
        "Events dispatched (inbox events and routed events).",
    ),
    (
        "routed",
        "correlator_routed_total",
        Kind::Counter,
        Unit::Count,
        "Events routed by the context's handlers.",
    ),
    (
        "sent",
        "correlator_sent_total",
        Kind::Counter,
        Unit::Count,
        "Entries the context's handlers put into inboxes.",
    ),
    (
        "received",
        "correlator_received_total",
        Kind::Counter,
        Unit::Count,
        "Inbox entries taken.",
    ),
    (
        "late_events",
        "correlator_late_events_total",
        Kind::Counter,
        Unit::Count,
        "Events stamped before the context's clock (event time), processed at the clock's time.",
    ),
    (
        "listeners",
        "correlator_listeners",
        Kind::Gauge,
        Unit::Count,
        "Live listeners.",
    ),
    (
        "instances",
        "correlator_instances",
        Kind::Gauge,
        Unit::Count,
        "Live monitor instances.",
    ),
    (
        "partial_matches",
        "correlator_partial_matches",
        Kind::Gauge,
        Unit::Count,
        "Matches in progress of expression listeners that hold at least one event.",
    ),
    (
        "partial_events",
        "correlator_partial_events",
        Kind::Gauge,
        Unit::Count,
        "Events held by matches in progress.",
    ),
    (
        "window_partitions",
        "correlator_window_partitions",
        Kind::Gauge,
        Unit::Count,
        "Partitions held by stream queries' windows.",
    ),
    (
        "window_values",
        "correlator_window_values",
        Kind::Gauge,
        Unit::Count,
        "Values held by stream queries' windows.",
    ),
    (
        "blocked_ns",
        "correlator_blocked_ns_total",
        Kind::Counter,
        Unit::Nanoseconds,
        "Time the context's handlers waited for room in full inboxes.",
    ),
    (
        "output_blocked_ns",
        "correlator_output_blocked_ns_total",
        Kind::Counter,
        Unit::Nanoseconds,
        "Time the context's handlers waited for room in full Block outputs.",
    ),
    (
        "output_drops",
        "correlator_output_drops_total",
        Kind::Counter,
        Unit::Count,
        "Events the context's emits and channel sends lost to full outputs' overflow policies.",
    ),
    (
        "handler_panics",
        "correlator_handler_panics_total",
        Kind::Counter,
        Unit::Count,
        "Panics of monitor code (contained; each ended an instance or a listener).",
    ),
    (
        "events_dropped_by_panic",
        "correlator_events_dropped_by_panic_total",
        Kind::Counter,
        Unit::Count,
        "Events lost or cut short by a panic of the event type's own code.",
    ),
    (
        "max_route_depth",
        "correlator_max_route_depth",
        Kind::Gauge,
        Unit::Count,
        "The deepest the context's route stack has been.",
    ),
    (
        "inbox_len",
        "correlator_inbox_len",
        Kind::Gauge,
        Unit::Count,
        "Entries accepted into the context's inbox and not yet fully processed.",
    ),
    (
        "overruns",
        "correlator_overruns_total",
        Kind::Counter,
        Unit::Count,
        "Entries taken into the inbox beyond capacity to avoid a deadlock.",
    ),
];

const CONTEXT_STOPPED: &str = "correlator_context_stopped";
const CHANNEL_DROPPED: &str = "correlator_channel_dropped_total";
const INPUT_OUTPUT_DROPS: &str = "correlator_input_output_drops_total";
const CONTEXTS: &str = "correlator_contexts";
const SHUT_DOWN: &str = "correlator_shut_down";

/// The line of `PER_CONTEXT` for a field.
fn per_context(
    field: &str,
) -> Option<&'static (&'static str, &'static str, Kind, Unit, &'static str)> {
    PER_CONTEXT.iter().find(|line| line.0 == field)
}

/// Gives every metric of the module's table its unit and help text in the installed recorder.
/// Call it once, after installing the recorder ([`export_metrics`] does).
///
/// [`export_metrics`]: crate::CorrelatorBuilder::export_metrics
pub fn describe() {
    for &(_, name, kind, unit, help) in PER_CONTEXT {
        match kind {
            Kind::Counter => describe_counter!(name, unit, help),
            Kind::Gauge => describe_gauge!(name, unit, help),
        }
    }
    describe_gauge!(
        CONTEXT_STOPPED,
        "Whether the context's thread has exited (1) or not (0)."
    );
    describe_counter!(
        CHANNEL_DROPPED,
        Unit::Count,
        "Channel sends that nobody received."
    );
    describe_counter!(
        INPUT_OUTPUT_DROPS,
        Unit::Count,
        "Events lost to full outputs' overflow policies by input handles' channel sends."
    );
    describe_gauge!(CONTEXTS, Unit::Count, "Contexts of the correlator.");
    describe_gauge!(
        SHUT_DOWN,
        "Whether the correlator has shut down (1) or not (0)."
    );
}

/// Publishes `status` to the installed `metrics` recorder (see the module's table). Without a
/// recorder it does nothing.
///
/// # Example
/// ```
/// use correlator::{Correlator, Event};
/// # #[derive(Clone, Debug)] struct Tick;
/// # impl Event for Tick { type Kind = (); fn kind(&self) {} }
/// let c = Correlator::<Tick>::builder().build()?;
/// c.start();
/// // Typically every few seconds, from a task or thread of the service:
/// correlator::metrics::export(&c.status());
/// # Ok::<(), correlator::Error>(())
/// ```
pub fn export(status: &Status) {
    let mut own_drops = 0u64;
    for ctx in &status.contexts {
        let id = ctx.context.map(|c| c.id().to_string()).unwrap_or_default();
        let labels = [("context", ctx.name.clone()), ("context_id", id)];
        for (field, value) in ctx.named_counters() {
            let Some(&(_, name, kind, _, _)) = per_context(field) else {
                continue;
            };
            match kind {
                Kind::Counter => counter!(name, &labels).absolute(value),
                Kind::Gauge => gauge!(name, &labels).set(value as f64),
            }
        }
        gauge!(CONTEXT_STOPPED, &labels).set(f64::from(u8::from(ctx.stopped)));
        own_drops += ctx.output_drops;
    }
    counter!(CHANNEL_DROPPED).absolute(status.totals.dropped);
    counter!(INPUT_OUTPUT_DROPS).absolute(status.totals.output_drops.saturating_sub(own_drops));
    gauge!(CONTEXTS).set(status.contexts.len() as f64);
    gauge!(SHUT_DOWN).set(f64::from(u8::from(status.shut_down)));
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::status::ContextStatus;

    /// Every counter of the status (R9.1) has a metric, and the module doc's table names it.
    #[test]
    fn r9_1_every_status_counter_has_a_documented_metric() {
        let source = include_str!("metrics.rs");
        let doc_table: String = source
            .lines()
            .take_while(|l| l.starts_with("//!"))
            .collect();
        for (field, _) in ContextStatus::default().named_counters() {
            let line = per_context(field)
                .unwrap_or_else(|| panic!("status counter `{field}` has no metric"));
            assert!(
                doc_table.contains(&format!("`{}` |", line.1)),
                "metric {} is missing from the module doc's table",
                line.1
            );
        }
        for name in [
            CONTEXT_STOPPED,
            CHANNEL_DROPPED,
            INPUT_OUTPUT_DROPS,
            CONTEXTS,
            SHUT_DOWN,
        ] {
            assert!(
                doc_table.contains(&format!("`{name}` |")),
                "{name} undocumented"
            );
        }
        assert_eq!(
            PER_CONTEXT.len(),
            ContextStatus::default().named_counters().count(),
            "a metric for a counter the status no longer has"
        );
    }
}
