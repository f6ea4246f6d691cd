//! SPEC §9: observability.
mod common;

use std::sync::OnceLock;
use std::time::Duration;

use common::*;
use correlator::{ContextOptions, Correlator, OutputOptions, Pattern};

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

/// The process-wide log of this test binary (one subscriber per binary, shared by its tests:
/// each looks for lines only it can cause).
fn captured() -> &'static Captured {
    static OUT: OnceLock<Captured> = OnceLock::new();
    OUT.get_or_init(Captured::install_global)
}

// R9.1: a periodic status line is available through `tracing`.
#[test]
fn r9_1_periodic_status_line_through_tracing() {
    let out = captured();
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

/// A correlator whose `main` emits every kind-1 event to `channel`'s outputs, with the given
/// `output_block_warning`.
fn emitting(channel: &str, warning: Option<Duration>) -> (Correlator<Ev>, correlator::Channel) {
    let c = Correlator::<Ev>::builder()
        .inbox_capacity(64)
        .external_time()
        .output_block_warning(warning)
        .build()
        .unwrap();
    let out = c.channel(channel).unwrap();
    let log = Log::default();
    c.load(Script::new("emit", &log, move |_, cx| {
        cx.on_all(
            Pattern::kind(1),
            move |_: &mut Script, cx: &mut Cx<'_>, e: &Ev| {
                cx.emit(out, e.clone());
            },
        );
    }))
    .unwrap();
    (c, out)
}

// R9.1: a context stuck on a full `Block` output nobody reads is visible while it waits: the
// status names the output it is blocked on, and `output_blocked_ns` (its own and the totals')
// grows during the wait, not only once it ends. Once the receiver reads, it is no longer blocked,
// has processed everything, and the blocked time never went backwards.
#[test]
fn r9_1_status_shows_a_context_blocked_on_an_output() {
    bounded(|| {
        let (c, out) = emitting("unread", None);
        let rx = c.output_with(out, OutputOptions::bounded(2)).unwrap();
        let input = c.input();
        c.start();
        for i in 0..5 {
            input.send_to(c.main(), ev(1, i)).unwrap();
        }
        let blocked =
            |s: &correlator::Status| s.context(c.main()).unwrap().blocked_on_output.clone();
        assert!(
            eventually(|| blocked(&c.status()).is_some()),
            "the status shows the context blocked"
        );
        let first = c.status();
        let on = blocked(&first).unwrap();
        assert_eq!(on.output, rx.id());
        assert_eq!(on.name, "channel \"unread\"");
        assert_eq!(on.name, rx.name());
        assert!(on.since <= std::time::SystemTime::now());
        let before = first.context(c.main()).unwrap().output_blocked_ns;
        assert!(before >= on.waited_ns, "the wait so far counts");
        assert!(
            eventually(|| {
                let now = c.status();
                now.context(c.main()).unwrap().output_blocked_ns > before
                    && now.totals.output_blocked_ns > before
                    && blocked(&now)
                        .is_some_and(|b| b.output == rx.id() && b.waited_ns > on.waited_ns)
            }),
            "output_blocked_ns grows while the wait lasts"
        );
        let stuck = c.status().context(c.main()).unwrap().output_blocked_ns;
        let got: Vec<u64> = (0..5)
            .map(|_| rx.recv_timeout(Duration::from_secs(10)).unwrap().val)
            .collect();
        assert_eq!(got, [0, 1, 2, 3, 4]);
        assert!(
            eventually(|| {
                let s = c.status();
                blocked(&s).is_none() && s.totals.processed == 5
            }),
            "released once the receiver read"
        );
        let after = c.shutdown().unwrap();
        assert!(after.context(c.main()).unwrap().blocked_on_output.is_none());
        assert!(
            after.totals.output_blocked_ns >= stuck,
            "never goes backwards"
        );
    });
}

// R9.1: a context that waits longer than `output_block_warning` on a full `Block` output logs
// a warning through `tracing` that names the output; with the warning turned off (`None`), the
// same wait logs nothing.
#[test]
fn r9_1_a_long_wait_on_an_output_is_logged_naming_it() {
    let out = captured();
    bounded(move || {
        let named = |channel: &str| -> usize {
            out.text()
                .lines()
                .filter(|l| l.contains("WARN") && l.contains(&format!("(channel \"{channel}\")")))
                .count()
        };
        // Turned off: blocked well past what the other correlator needs to warn, no line.
        let (quiet, q) = emitting("quiet-output", None);
        let quiet_rx = quiet.output_with(q, OutputOptions::bounded(1)).unwrap();
        let (loud, l) = emitting("stuck-output", Some(Duration::from_millis(50)));
        let loud_rx = loud.output_with(l, OutputOptions::bounded(1)).unwrap();
        for c in [&quiet, &loud] {
            let input = c.input();
            c.start();
            for i in 0..3 {
                input.send_to(c.main(), ev(1, i)).unwrap();
            }
        }
        assert!(
            eventually(|| named("stuck-output") >= 1),
            "a warning names the output: {}",
            out.text()
        );
        let line = out
            .text()
            .lines()
            .find(|l| l.contains("stuck-output"))
            .unwrap()
            .to_owned();
        assert!(line.contains(&format!("output {}", loud_rx.id())), "{line}");
        assert!(line.contains("correlator::deliver"), "{line}");
        let quiet_blocked = |c: &Correlator<Ev>| {
            c.status()
                .context(c.main())
                .unwrap()
                .blocked_on_output
                .is_some()
        };
        assert!(eventually(|| quiet_blocked(&quiet)));
        // Blocked for six times the loud correlator's threshold at least: a warning would be out.
        std::thread::sleep(Duration::from_millis(300));
        assert!(quiet_blocked(&quiet));
        assert_eq!(named("quiet-output"), 0, "{}", out.text());
        drop(quiet_rx);
        drop(loud_rx);
        quiet.shutdown().unwrap();
        loud.shutdown().unwrap();
    });
}
