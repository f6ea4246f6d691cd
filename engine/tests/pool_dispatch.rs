//! A pool's dispatcher (`Pool::load_per_key`): what it does with an event whose own code panics
//! (SPEC Decisions, "No user code ends a context", R6.8) and where the key's first event goes
//! (Decisions, "Partitioned contexts", R6.5).

mod common;

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use correlator::{ContextOptions, Correlator, Event, Monitor, Pattern, Pool, Scope};

const TIMEOUT: Duration = Duration::from_secs(60);

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Kind {
    Card,
    Routed,
}

/// A card event. With `flaky` set, `key()` panics on its `flaky_at`-th call (counted per event
/// and its clones), and works on every other.
#[derive(Clone, Debug)]
struct Card {
    kind: Kind,
    card: u64,
    val: u64,
    flaky: Option<(Arc<AtomicU32>, u32)>,
}

impl Event for Card {
    type Kind = Kind;
    fn kind(&self) -> Kind {
        self.kind
    }
    fn key(&self) -> Option<u64> {
        if let Some((calls, at)) = &self.flaky {
            if calls.fetch_add(1, Ordering::Relaxed) + 1 == *at {
                panic!("injected key() panic for card {}", self.card);
            }
        }
        Some(self.card)
    }
}

fn card(card: u64, val: u64) -> Card {
    Card {
        kind: Kind::Card,
        card,
        val,
        flaky: None,
    }
}

type Log = Arc<Mutex<Vec<String>>>;

fn push(log: &Log, line: String) {
    log.lock().unwrap().push(line);
}

/// Polls `cond` until it holds, failing after [`TIMEOUT`].
fn wait_until(what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + TIMEOUT;
    while !cond() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// A per-key instance that logs every card event of its key its listener sees; with `watch`,
/// first also those of another key (`card {card} watches {watch} = {val}`).
struct PerCard {
    card: u64,
    watch: Option<u64>,
    log: Log,
}

impl Monitor<Card> for PerCard {
    fn on_load(&mut self, cx: &mut Scope<'_, Card, Self>) {
        if let Some(watch) = self.watch {
            let watched = Pattern::kind(Kind::Card).key(watch);
            cx.on_all(
                watched,
                move |m: &mut PerCard, _cx: &mut Scope<'_, Card, PerCard>, e: &Card| {
                    push(
                        &m.log,
                        format!("card {} watches {watch} = {}", m.card, e.val),
                    );
                },
            );
        }
        let mine = Pattern::kind(Kind::Card).key(self.card);
        cx.on_all(
            mine,
            |m: &mut PerCard, _cx: &mut Scope<'_, Card, PerCard>, e: &Card| {
                push(&m.log, format!("card {} sees {}", m.card, e.val));
            },
        );
    }
}

/// A correlator (external time) with a one-member pool, not started, whose dispatcher logs each
/// instance it creates (`create {card} from {val}`): a [`PerCard`] watching `watch(card)`.
fn logging_pool(watch: fn(u64) -> Option<u64>) -> (Correlator<Card>, Pool<Card>, Log) {
    let c = Correlator::<Card>::builder()
        .external_time()
        .build()
        .unwrap();
    let pool = c.create_pool(ContextOptions::new("cards"), 1).unwrap();
    let log: Log = Arc::default();
    let l = log.clone();
    pool.load_per_key([Kind::Card], move |card, first: &Card| {
        push(&l, format!("create {card} from {}", first.val));
        PerCard {
            card,
            watch: watch(card),
            log: l.clone(),
        }
    })
    .unwrap();
    (c, pool, log)
}

// Decisions, "No user code ends a context" (R6.8): an event whose `key()` works when `PoolInput`
// calls it and panics when the member's dispatcher calls it is dropped and counted in
// `events_dropped_by_panic`, not in `handler_panics`; the dispatcher carries on, so later keys of
// the member still get their instances.
#[test]
fn r6_8_a_key_panic_in_the_dispatcher_drops_the_event_and_the_dispatcher_carries_on() {
    let (log, status, live) = common::bounded(|| {
        // One member: every key goes to the member whose dispatcher meets the panic.
        let (c, pool, log) = logging_pool(|_| None);
        let input = pool.input();
        c.start();
        // Call 1 is `PoolInput`'s; call 2 is the dispatcher's gate's (the dispatcher is the
        // kind's only listener, so no keyed list asks for the key first).
        let mut poisoned = card(1, 10);
        poisoned.flaky = Some((Arc::new(AtomicU32::new(0)), 2));
        input.send(poisoned).unwrap();
        for (k, v) in [(2, 20), (3, 30), (2, 21)] {
            input.send(card(k, v)).unwrap();
        }
        wait_until("four events processed", || {
            let s = pool.status();
            s.members[0].context.received >= 4 && s.members[0].context.inbox_len == 0
        });
        let live = pool.status().live_keys;
        let status = c.status();
        c.shutdown().unwrap();
        let log = log.lock().unwrap().clone();
        (log, status, live)
    });
    assert_eq!(
        status.totals.handler_panics, 0,
        "the key() panic was counted as the dispatcher's"
    );
    assert_eq!(status.totals.events_dropped_by_panic, 1);
    assert_eq!(live, 2, "later keys got no instance");
    assert_eq!(
        log,
        ["create 2 from 20", "create 3 from 30", "card 2 sees 21"],
        "the dispatcher stopped creating instances after the key() panic"
    );
}

/// A monitor that logs, under `name`, every card event and every routed event of its context.
struct Watch {
    name: &'static str,
    log: Log,
}

impl Monitor<Card> for Watch {
    fn on_load(&mut self, cx: &mut Scope<'_, Card, Self>) {
        for kind in [Kind::Card, Kind::Routed] {
            cx.on_all(
                Pattern::kind(kind),
                |w: &mut Watch, _cx: &mut Scope<'_, Card, Watch>, e: &Card| {
                    push(&w.log, format!("{} {:?} {}", w.name, e.kind, e.val));
                },
            );
        }
    }
}

/// A per-key instance that routes from `on_load` and from its listener, and logs both.
struct Routing {
    card: u64,
    log: Log,
}

impl Monitor<Card> for Routing {
    fn on_load(&mut self, cx: &mut Scope<'_, Card, Self>) {
        push(&self.log, format!("load {}", self.card));
        cx.route(Card {
            kind: Kind::Routed,
            card: self.card,
            val: 100 + self.card,
            flaky: None,
        });
        let mine = Pattern::kind(Kind::Card).key(self.card);
        cx.on_all(
            mine,
            |m: &mut Routing, cx: &mut Scope<'_, Card, Routing>, e: &Card| {
                push(&m.log, format!("card {} sees {}", m.card, e.val));
                cx.route(Card {
                    kind: Kind::Routed,
                    card: m.card,
                    val: 1000 + e.val,
                    flaky: None,
                });
            },
        );
    }
}

// Decisions, "Partitioned contexts" (R6.4, R6.5 and its documented exception, R3.2): with
// `load_per_key_delivering` the key's first event reaches the new instance's listener exactly
// once, as the dispatcher's turn in that event's dispatch: after a listener registered before the
// dispatcher, before one registered after it, and before everything routed while the event is
// processed (on_load's route first, then the delivered listener's, in routing order). The event
// is not routed again: `routed` counts only the three explicit routes.
#[test]
fn r6_5_delivering_pool_gives_the_first_event_to_the_new_instance_once_in_order() {
    let (log, routed, processed) = common::bounded(|| {
        let c = Correlator::<Card>::builder()
            .external_time()
            .build()
            .unwrap();
        let pool = c.create_pool(ContextOptions::new("cards"), 1).unwrap();
        let member = pool.members()[0];
        let log: Log = Arc::default();
        let (early, late, l) = (log.clone(), log.clone(), log.clone());
        c.load_in(
            member,
            Watch {
                name: "early",
                log: early,
            },
        )
        .unwrap();
        pool.load_per_key_delivering([Kind::Card], move |card, first: &Card| {
            push(&l, format!("create {card} from {}", first.val));
            Routing {
                card,
                log: l.clone(),
            }
        })
        .unwrap();
        c.load_in(
            member,
            Watch {
                name: "late",
                log: late,
            },
        )
        .unwrap();
        let input = pool.input();
        c.start();
        for (k, v) in [(1, 1), (1, 2), (2, 3)] {
            input.send(card(k, v)).unwrap();
        }
        let status = c.shutdown().unwrap();
        let log = log.lock().unwrap().clone();
        (log, status.totals.routed, status.totals.processed)
    });
    let want = [
        "early Card 1",
        "create 1 from 1",
        "load 1",
        "card 1 sees 1",
        "late Card 1",
        "early Routed 101",
        "late Routed 101",
        "early Routed 1001",
        "late Routed 1001",
        // A later event: the instance's listener was registered after `late` (R6.4).
        "early Card 2",
        "late Card 2",
        "card 1 sees 2",
        "early Routed 1002",
        "late Routed 1002",
        "early Card 3",
        "create 2 from 3",
        "load 2",
        "card 2 sees 3",
        "late Card 3",
        "early Routed 102",
        "late Routed 102",
        "early Routed 1003",
        "late Routed 1003",
    ];
    assert_eq!(log, want);
    assert_eq!(routed, 5, "the first events were routed again");
    assert_eq!(
        processed, 8,
        "3 inbox events and 5 routed ones, each processed once"
    );
}

// Decisions, "Partitioned contexts": plain `load_per_key` keeps handing the first event to the
// factory only (R6.5 without exception): the instance's listener sees the key's later events.
#[test]
fn r6_5_plain_load_per_key_keeps_the_first_event_from_the_instance() {
    let log = common::bounded(|| {
        let c = Correlator::<Card>::builder()
            .external_time()
            .build()
            .unwrap();
        let pool = c.create_pool(ContextOptions::new("cards"), 2).unwrap();
        let log: Log = Arc::default();
        let l = log.clone();
        pool.load_per_key([Kind::Card], move |card, _first: &Card| PerCard {
            card,
            watch: None,
            log: l.clone(),
        })
        .unwrap();
        let input = pool.input();
        c.start();
        for (k, v) in [(1, 1), (1, 2), (1, 3)] {
            input.send(card(k, v)).unwrap();
        }
        c.shutdown().unwrap();
        let log = log.lock().unwrap().clone();
        log
    });
    assert_eq!(log, ["card 1 sees 2", "card 1 sees 3"]);
}

// Decisions, "Partitioned contexts" (R6.8): a key has an instance only once its own first event
// made one. A listener that another key's instance registered under this key (watching it) does
// not count: the key's first event still creates its instance, which takes the key's later
// events beside the watcher. (The dispatcher's gate looks the key up in its own key set, not in
// the key's listeners.)
#[test]
fn r6_8_another_instance_watching_a_key_does_not_make_the_key_live() {
    let log = common::bounded(|| {
        let (c, pool, log) = logging_pool(|card| Some(card + 1));
        let input = pool.input();
        c.start();
        for (k, v) in [(1, 10), (2, 20), (2, 21), (1, 11)] {
            input.send(card(k, v)).unwrap();
        }
        wait_until("four events processed", || {
            let s = pool.status();
            s.members[0].context.received >= 4 && s.members[0].context.inbox_len == 0
        });
        assert_eq!(pool.status().live_keys, 2);
        c.shutdown().unwrap();
        let log = log.lock().unwrap().clone();
        log
    });
    assert_eq!(
        log,
        [
            "create 1 from 10",
            // The dispatcher decides first (its listeners are registered before any instance's).
            "create 2 from 20",
            "card 1 watches 2 = 20",
            "card 1 watches 2 = 21",
            "card 2 sees 21",
            "card 1 sees 11",
        ]
    );
}
