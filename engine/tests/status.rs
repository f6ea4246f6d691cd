//! SPEC §9: observability.
mod common;

use std::time::Duration;

use common::*;
use correlator::{ContextOptions, Correlator, Pattern};

// R9.1: the snapshot gives per-context counters and correlator-wide totals.
#[test]
fn r9_1_status_counters() {
    let c = correlator(16);
    let b = c.create_context(ContextOptions::new("b")).unwrap();
    let log = Log::default();
    c.load(Script::new("m", &log, move |_, cx| {
        cx.on_all(Pattern::kind(1), move |_, cx: &mut Cx<'_>, e: &Ev| {
            cx.route(ev(2, e.val));
            cx.route(ev(2, e.val));
            cx.send_to(b, ev(3, e.val)).unwrap();
        });
        cx.on_all(Pattern::kind(2), |_, _, _| {});
    }))
    .unwrap();
    c.load_in(
        b,
        Script::new("b", &log, |_, cx| {
            cx.on_all(Pattern::kind(3), |_, _, _| {});
            cx.on_all(Pattern::kind(4), |_, _, _| {});
        }),
    )
    .unwrap();
    let input = c.input();
    for i in 0..10 {
        input.send_to(c.main(), ev(1, i)).unwrap();
    }
    c.start();
    assert!(eventually(|| c
        .status()
        .context(b)
        .is_some_and(|s| s.processed == 10)));
    let s = c.status();
    let main = s.context(c.main()).unwrap();
    assert_eq!(main.name, "main");
    assert_eq!(main.received, 11, "10 events and the load entry");
    assert_eq!(main.processed, 30, "10 inbox events + 20 routed");
    assert_eq!(main.routed, 20);
    assert_eq!(main.sent, 10);
    assert_eq!(main.max_route_depth, 2);
    assert_eq!(main.listeners, 2);
    assert_eq!(main.instances, 1);
    assert_eq!(main.inbox_len, 0);
    assert_eq!(main.overruns, 0);
    let bs = s.context(b).unwrap();
    assert_eq!(bs.received, 11);
    assert_eq!(bs.listeners, 2);
    assert_eq!(s.totals.processed, 40);
    assert_eq!(s.totals.instances, 2);
    assert_eq!(s.totals.listeners, 4);
    assert!(s.started && !s.shut_down);
    let line = s.to_string();
    assert!(line.starts_with("Correlator Status:"), "{line}");
    assert!(line.contains("processed=40"), "{line}");
    let fin = c.shutdown().unwrap();
    assert!(fin.shut_down);
    assert_eq!(fin.totals.instances, 0);
}

// R9.1: the inbox length is visible while entries wait (before start).
#[test]
fn r9_1_inbox_len_while_queued() {
    let c = correlator(16);
    let input = c.input();
    for i in 0..5 {
        input.send_to(c.main(), ev(1, i)).unwrap();
    }
    assert_eq!(c.status().context(c.main()).unwrap().inbox_len, 5);
    assert_eq!(c.status().totals.inbox_len, 5);
}

// R9.1: a periodic status line is available through `tracing`.
#[test]
fn r9_1_periodic_status_line_through_tracing() {
    let out = Captured::install_global();
    let c = Correlator::<Ev>::builder()
        .status_interval(Duration::from_millis(20))
        .build()
        .unwrap();
    c.start();
    let seen = eventually(|| out.text().contains("Correlator Status: contexts=1"));
    c.shutdown().unwrap();
    assert!(seen, "no status line was logged");
    let text = out.text();
    assert!(text.contains("correlator::status"), "{text}");
}
