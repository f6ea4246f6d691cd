//! SPEC §2: the input queue and run-to-completion.
mod common;

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use common::*;
use correlator::{ContextOptions, Pattern};

// R2.1: the inbox is fed by sends from other contexts, from itself, by channels it subscribes to,
// and by external input.
#[test]
fn r2_1_every_source_feeds_the_inbox() {
    let c = correlator(64);
    let b = c.create_context(ContextOptions::new("b")).unwrap();
    let feed = c.channel("feed").unwrap();
    let log = Log::default();
    c.load_in(
        b,
        Script::new("b", &log, move |_, cx| {
            cx.subscribe(feed);
            cx.on_all(
                Pattern::kind(1),
                |m: &mut Script, cx: &mut Cx<'_>, e: &Ev| {
                    m.log.push(e.tag);
                    if e.tag == "external" {
                        let me = cx.context();
                        cx.send_to(me, tagged(1, "self")).unwrap();
                    }
                },
            );
        }),
    )
    .unwrap();
    c.load(Script::new("main", &log, move |_, cx| {
        cx.on(Pattern::kind(2), move |_, cx: &mut Cx<'_>, _| {
            cx.send_to(b, tagged(1, "other-context")).unwrap();
            cx.send(feed, tagged(1, "channel"));
        });
    }))
    .unwrap();
    let input = c.input();
    input.send_to(b, tagged(1, "external")).unwrap();
    c.start();
    // Wait for the external entry first so the order below is fixed.
    assert!(eventually(|| log.count("self") == 1));
    input.send_to(c.main(), tagged(2, "")).unwrap();
    c.shutdown().unwrap();
    let got: Vec<String> = log.take_work();
    assert_eq!(got, ["external", "self", "other-context", "channel"]);
}

// R2.2: an entry runs to completion (every listener, everything routed) before the next entry, even
// when the next entry arrives from another context while the first is being processed.
#[test]
fn r2_2_run_to_completion() {
    let c = correlator(64);
    let b = c.create_context(ContextOptions::new("b")).unwrap();
    let log = Log::default();
    let go = Arc::new(AtomicBool::new(false));
    let go2 = go.clone();
    // In main: E routes a chain of 3; while processing it, wait until b has sent us X.
    c.load(Script::new("main", &log, move |_, cx| {
        cx.on_all(
            Pattern::kind(1),
            move |m: &mut Script, cx: &mut Cx<'_>, e: &Ev| {
                m.log.push(format!("{}{}", e.tag, e.val));
                if e.tag == "E" {
                    go2.store(true, Ordering::SeqCst);
                    // Hold the context until b's send has certainly arrived in our inbox.
                    while cx.context().id() == 0
                        && !m.log.snapshot().contains(&"b-sent".to_string())
                    {
                        std::thread::yield_now();
                    }
                }
                if e.val < 3 && e.tag != "X" {
                    cx.route(Ev {
                        kind: 1,
                        val: e.val + 1,
                        tag: "R",
                    });
                }
            },
        );
    }))
    .unwrap();
    let main = c.main();
    let go3 = go.clone();
    c.load_in(
        b,
        Script::new("b", &log, move |_, cx| {
            cx.on(
                Pattern::kind(9),
                move |m: &mut Script, cx: &mut Cx<'_>, _| {
                    while !go3.load(Ordering::SeqCst) {
                        std::thread::yield_now();
                    }
                    cx.send_to(main, tagged(1, "X")).unwrap();
                    m.log.push("b-sent");
                },
            );
        }),
    )
    .unwrap();
    let input = c.input();
    input.send_to(main, tagged(1, "E")).unwrap();
    input.send_to(b, tagged(9, "")).unwrap();
    c.start();
    c.shutdown().unwrap();
    let got: Vec<String> = log.take_work();
    assert_eq!(got, ["E0", "b-sent", "R1", "R2", "R3", "X0"]);
}

// R2.3: per-sender FIFO across concurrent senders (two input handles and a context).
#[test]
fn r2_3_per_sender_fifo() {
    const N: u64 = 5_000;
    let c = correlator(32);
    let sink = c.create_context(ContextOptions::new("sink")).unwrap();
    let log = Log::default();
    let seen: Arc<std::sync::Mutex<HashMap<&'static str, Vec<u64>>>> = Default::default();
    let seen2 = seen.clone();
    c.load_in(
        sink,
        Script::new("sink", &log, move |_, cx| {
            cx.on_all(Pattern::kind(1), move |_, _, e: &Ev| {
                seen2.lock().unwrap().entry(e.tag).or_default().push(e.val);
            });
        }),
    )
    .unwrap();
    c.load(Script::new("relay", &log, move |_, cx| {
        cx.on_all(Pattern::kind(2), move |_, cx: &mut Cx<'_>, e: &Ev| {
            cx.send_to(
                sink,
                Ev {
                    kind: 1,
                    val: e.val,
                    tag: "ctx",
                },
            )
            .unwrap();
        });
    }))
    .unwrap();
    c.start();
    let main = c.main();
    let handles: Vec<_> = ["h1", "h2"]
        .into_iter()
        .map(|tag| {
            let input = c.input();
            std::thread::spawn(move || {
                for i in 0..N {
                    input
                        .send_to(
                            sink,
                            Ev {
                                kind: 1,
                                val: i,
                                tag,
                            },
                        )
                        .unwrap();
                    if tag == "h1" {
                        input.send_to(main, ev(2, i)).unwrap();
                    }
                }
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    c.shutdown().unwrap();
    let seen = seen.lock().unwrap();
    for tag in ["h1", "h2", "ctx"] {
        let got = &seen[tag];
        assert_eq!(got.len() as u64, N, "{tag}: no loss, no duplicate");
        assert!(got.windows(2).all(|w| w[0] + 1 == w[1]), "{tag}: in order");
    }
}

// R2.4: a spawn_to followed by a send_to from the same sender is processed in that order: the new
// instance's listener exists when the event arrives.
#[test]
fn r2_4_spawn_to_then_send_to_keeps_order() {
    let c = correlator(64);
    let b = c.create_context(ContextOptions::new("b")).unwrap();
    let log = Log::default();
    c.load(Script::new("parent", &log, move |_, cx| {
        cx.on(
            Pattern::kind(1),
            move |m: &mut Script, cx: &mut Cx<'_>, _| {
                for i in 0..10 {
                    cx.spawn_to(b, &m.clone(), move |_, cx: &mut Cx<'_>| {
                        cx.on(
                            Pattern::kind(2).filter(move |e: &Ev| e.val == i),
                            |m: &mut Script, _, e: &Ev| {
                                m.log.push(format!("child got {}", e.val));
                            },
                        );
                    })
                    .unwrap();
                    cx.send_to(b, ev(2, i)).unwrap();
                }
            },
        );
    }))
    .unwrap();
    c.input().send_to(c.main(), ev(1, 0)).unwrap();
    c.start();
    c.shutdown().unwrap();
    let got: Vec<String> = log
        .take()
        .into_iter()
        .filter(|l| l.starts_with("child"))
        .collect();
    let want: Vec<String> = (0..10).map(|i| format!("child got {i}")).collect();
    assert_eq!(got, want);
}
