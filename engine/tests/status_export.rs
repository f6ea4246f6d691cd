//! SPEC R9.1: the status snapshot outside the process: `serde` (feature `serde`) and the
//! `metrics` exporter (feature `metrics`). Run by `scripts/test-all.sh` with
//! `--features serde,metrics`.
#![cfg(any(feature = "serde", feature = "metrics"))]
mod common;

use common::*;
use correlator::{ContextOptions, Correlator, Pattern, Status};

/// A correlator that has done some of everything the counters count: inbox events, routes,
/// cross-context sends, a channel send nobody receives; two contexts of the same name.
fn busy() -> (Correlator<Ev>, Status) {
    let c = correlator(16);
    let b = c.create_context(ContextOptions::new("worker")).unwrap();
    let b2 = c.create_context(ContextOptions::new("worker")).unwrap();
    let nobody = c.channel("nobody").unwrap();
    let log = Log::default();
    c.load(Script::new("m", &log, move |_, cx| {
        cx.on_all(Pattern::kind(1), move |_, cx: &mut Cx<'_>, e: &Ev| {
            cx.route(ev(2, e.val));
            cx.send_to(b, ev(3, e.val)).unwrap();
            cx.send(nobody, ev(4, e.val));
        });
        cx.on_all(Pattern::kind(2), |_, _, _| {});
    }))
    .unwrap();
    for ctx in [b, b2] {
        c.load_in(
            ctx,
            Script::new("b", &log, |_, cx| {
                cx.on_all(Pattern::kind(3), |_, _, _| {});
            }),
        )
        .unwrap();
    }
    let input = c.input();
    for i in 0..10 {
        input.send_to(c.main(), ev(1, i)).unwrap();
    }
    c.start();
    // Settled: every event processed, both load entries taken.
    assert!(eventually(|| {
        let t = c.status().totals;
        t.processed == 30 && t.instances == 3 && t.inbox_len == 0
    }));
    let status = c.status();
    (c, status)
}

#[cfg(feature = "serde")]
mod serde_status {
    use super::*;
    use correlator::ContextRef;

    // R9.1: a snapshot survives a JSON round trip unchanged.
    #[test]
    fn r9_1_status_json_round_trip() {
        let (c, status) = busy();
        let json = serde_json::to_string(&status).unwrap();
        let back: Status = serde_json::from_str(&json).unwrap();
        assert_eq!(back, status);
        assert_eq!(back.totals.processed, 30, "{json}");
        let fin = c.shutdown().unwrap();
        let back: Status = serde_json::from_str(&serde_json::to_string(&fin).unwrap()).unwrap();
        assert_eq!(back, fin);
        assert!(back.shut_down);
    }

    // R9.1, R1.2: the field names a dashboard or a log pipeline relies on, and a context
    // reference as its two parts.
    #[test]
    fn r9_1_status_json_field_names() {
        let (c, status) = busy();
        let v = serde_json::to_value(&status).unwrap();
        assert_eq!(v["started"], true);
        assert_eq!(v["shut_down"], false);
        assert_eq!(v["totals"]["processed"], 30);
        assert_eq!(
            v["totals"]["dropped"], 10,
            "the channel sends nobody received"
        );
        let main = &v["contexts"][0];
        assert_eq!(main["name"], "main");
        assert_eq!(
            main["context"],
            serde_json::json!({"id": 0, "correlator": main["context"]["correlator"]})
        );
        assert!(main["context"]["correlator"].is_u64());
        for field in [
            "processed",
            "routed",
            "sent",
            "received",
            "late_events",
            "listeners",
            "instances",
            "blocked_ns",
            "output_blocked_ns",
            "output_drops",
            "handler_panics",
            "events_dropped_by_panic",
            "max_route_depth",
            "inbox_len",
            "overruns",
        ] {
            assert!(main[field].is_u64(), "contexts[0].{field} missing: {main}");
            if field != "max_route_depth" {
                assert!(v["totals"][field].is_u64(), "totals.{field} missing");
            }
        }
        assert_eq!(main["processed"], 20);
        assert_eq!(main["routed"], 10);
        assert_eq!(main["sent"], 10);
        assert_eq!(v["contexts"][1]["name"], "worker");
        assert_eq!(v["contexts"][1]["context"]["id"], 1);
        assert_eq!(v["contexts"][1]["stopped"], false);

        // A reference read back names the same context.
        let main_ref: ContextRef = serde_json::from_value(main["context"].clone()).unwrap();
        assert_eq!(main_ref, c.main());
        assert_eq!(c.context_name(main_ref).as_deref(), Some("main"));
        // A snapshot missing a field (an older writer) reads it as its default.
        let old: Status =
            serde_json::from_str(r#"{"contexts":[{"name":"x"}],"started":true}"#).unwrap();
        assert_eq!(old.contexts[0].name, "x");
        assert_eq!(old.contexts[0].processed, 0);
        assert!(old.started);
    }
}

#[cfg(feature = "metrics")]
mod metrics_export {
    use std::collections::BTreeMap;
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::{Arc, Mutex};
    use std::time::Duration;

    use metrics::{
        Counter, CounterFn, Gauge, GaugeFn, Histogram, Key, KeyName, Metadata, Recorder,
        SharedString, Unit,
    };

    use super::*;

    /// One captured series: name and sorted labels.
    type Series = (String, Vec<(String, String)>);

    /// A recorder that keeps the last value of every series (gauges as `f64` bits).
    #[derive(Clone, Default)]
    struct Capture {
        values: Arc<Mutex<BTreeMap<Series, Arc<AtomicU64>>>>,
        described: Arc<Mutex<Vec<String>>>,
    }

    struct Cell(Arc<AtomicU64>);
    impl CounterFn for Cell {
        fn increment(&self, v: u64) {
            self.0.fetch_add(v, Ordering::Relaxed);
        }
        fn absolute(&self, v: u64) {
            self.0.store(v, Ordering::Relaxed);
        }
    }
    impl GaugeFn for Cell {
        fn increment(&self, _: f64) {
            unreachable!("the exporter sets gauges")
        }
        fn decrement(&self, _: f64) {
            unreachable!("the exporter sets gauges")
        }
        fn set(&self, v: f64) {
            self.0.store(v.to_bits(), Ordering::Relaxed);
        }
    }

    impl Capture {
        fn cell(&self, key: &Key) -> Arc<AtomicU64> {
            let mut labels: Vec<_> = key
                .labels()
                .map(|l| (l.key().to_owned(), l.value().to_owned()))
                .collect();
            labels.sort();
            let series = (key.name().to_owned(), labels);
            self.values
                .lock()
                .unwrap()
                .entry(series)
                .or_default()
                .clone()
        }

        fn get(&self, name: &str, labels: &[(&str, &str)]) -> Option<u64> {
            let mut labels: Vec<_> = labels
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect();
            labels.sort();
            let values = self.values.lock().unwrap();
            values
                .get(&(name.to_owned(), labels))
                .map(|c| c.load(Ordering::Relaxed))
        }

        fn counter(&self, name: &str, labels: &[(&str, &str)]) -> u64 {
            self.get(name, labels)
                .unwrap_or_else(|| panic!("no counter {name} {labels:?}"))
        }

        fn gauge(&self, name: &str, labels: &[(&str, &str)]) -> f64 {
            f64::from_bits(
                self.get(name, labels)
                    .unwrap_or_else(|| panic!("no gauge {name} {labels:?}")),
            )
        }
    }

    impl Recorder for Capture {
        fn describe_counter(&self, key: KeyName, _: Option<Unit>, _: SharedString) {
            self.described.lock().unwrap().push(key.as_str().to_owned());
        }
        fn describe_gauge(&self, key: KeyName, _: Option<Unit>, _: SharedString) {
            self.described.lock().unwrap().push(key.as_str().to_owned());
        }
        fn describe_histogram(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
        fn register_counter(&self, key: &Key, _: &Metadata<'_>) -> Counter {
            Counter::from_arc(Arc::new(Cell(self.cell(key))))
        }
        fn register_gauge(&self, key: &Key, _: &Metadata<'_>) -> Gauge {
            Gauge::from_arc(Arc::new(Cell(self.cell(key))))
        }
        fn register_histogram(&self, _: &Key, _: &Metadata<'_>) -> Histogram {
            Histogram::noop()
        }
    }

    /// Checks every published series of `status` against its fields.
    fn assert_exported(rec: &Capture, status: &Status) {
        for ctx in &status.contexts {
            let id = ctx.context.unwrap().id().to_string();
            let l = [("context", ctx.name.as_str()), ("context_id", id.as_str())];
            for (metric, want) in [
                ("correlator_processed_total", ctx.processed),
                ("correlator_routed_total", ctx.routed),
                ("correlator_sent_total", ctx.sent),
                ("correlator_received_total", ctx.received),
                ("correlator_late_events_total", ctx.late_events),
                ("correlator_blocked_ns_total", ctx.blocked_ns),
                ("correlator_output_blocked_ns_total", ctx.output_blocked_ns),
                ("correlator_output_drops_total", ctx.output_drops),
                ("correlator_handler_panics_total", ctx.handler_panics),
                (
                    "correlator_events_dropped_by_panic_total",
                    ctx.events_dropped_by_panic,
                ),
                ("correlator_overruns_total", ctx.overruns),
            ] {
                assert_eq!(rec.counter(metric, &l), want, "{metric} {l:?}");
            }
            for (metric, want) in [
                ("correlator_listeners", ctx.listeners),
                ("correlator_instances", ctx.instances),
                ("correlator_max_route_depth", ctx.max_route_depth),
                ("correlator_inbox_len", ctx.inbox_len),
            ] {
                assert_eq!(rec.gauge(metric, &l), want as f64, "{metric} {l:?}");
            }
            assert_eq!(
                rec.gauge("correlator_context_stopped", &l),
                f64::from(u8::from(ctx.stopped))
            );
        }
        assert_eq!(
            rec.counter("correlator_channel_dropped_total", &[]),
            status.totals.dropped
        );
        assert_eq!(rec.counter("correlator_input_output_drops_total", &[]), 0);
        assert_eq!(
            rec.gauge("correlator_contexts", &[]),
            status.contexts.len() as f64
        );
        assert_eq!(
            rec.gauge("correlator_shut_down", &[]),
            f64::from(u8::from(status.shut_down))
        );
    }

    // R9.1: `export` publishes every counter with the snapshot's value, one series per context
    // even when names repeat.
    #[test]
    fn r9_1_metrics_export_equals_status() {
        let (c, status) = busy();
        let rec = Capture::default();
        metrics::with_local_recorder(&rec, || correlator::metrics::export(&status));
        assert_exported(&rec, &status);
        let main = [("context", "main"), ("context_id", "0")];
        assert_eq!(rec.counter("correlator_processed_total", &main), 20);
        assert_eq!(rec.counter("correlator_channel_dropped_total", &[]), 10);
        let w1 = [("context", "worker"), ("context_id", "1")];
        let w2 = [("context", "worker"), ("context_id", "2")];
        assert_eq!(rec.counter("correlator_processed_total", &w1), 10);
        assert_eq!(
            rec.counter("correlator_received_total", &w2),
            1,
            "the load entry"
        );
        assert_eq!(rec.gauge("correlator_instances", &w2), 1.0);
        drop(c);
    }

    // R9.1: `export_metrics` publishes periodically while running, and the final snapshot after
    // shutdown. (The only test of this binary that installs a global recorder.)
    #[test]
    fn r9_1_export_metrics_periodic_and_final() {
        let rec = Capture::default();
        metrics::set_global_recorder(rec.clone()).unwrap();
        let c = Correlator::<Ev>::builder()
            .inbox_capacity(16)
            .external_time()
            .export_metrics(Duration::from_millis(5))
            .build()
            .unwrap();
        let log = Log::default();
        c.load(Script::new("m", &log, |_, cx| {
            cx.on_all(Pattern::kind(1), |_, _, _| {});
        }))
        .unwrap();
        let input = c.input();
        c.start();
        for i in 0..7 {
            input.send_to(c.main(), ev(1, i)).unwrap();
        }
        let main = [("context", "main"), ("context_id", "0")];
        assert!(
            eventually(|| rec.get("correlator_processed_total", &main) == Some(7)),
            "the exporter thread publishes while the correlator runs"
        );
        assert!(rec
            .described
            .lock()
            .unwrap()
            .iter()
            .any(|n| n == "correlator_processed_total"));
        let fin = c.shutdown().unwrap();
        assert_exported(&rec, &fin);
        assert_eq!(rec.gauge("correlator_shut_down", &[]), 1.0);
        assert_eq!(rec.gauge("correlator_instances", &main), 0.0);
    }
}
