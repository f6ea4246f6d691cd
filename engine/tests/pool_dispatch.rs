//! A pool's dispatcher (`Pool::load_per_key`): what it does with an event whose own code panics
//! (SPEC Decisions, "No user code ends a context", R6.8) and where the key's first event goes
//! (Decisions, "Partitioned contexts", R6.5).

mod common;

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use correlator::{ContextOptions, Correlator, Event, Monitor, Pattern, Scope};

const TIMEOUT: Duration = Duration::from_secs(60);

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Kind {
    Card,
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

/// A per-key instance that logs every card event of its key its listener sees.
struct PerCard {
    card: u64,
    log: Log,
}

impl Monitor<Card> for PerCard {
    fn on_load(&mut self, cx: &mut Scope<'_, Card, Self>) {
        let mine = Pattern::kind(Kind::Card).key(self.card);
        cx.on_all(mine, |m: &mut PerCard, _cx: &mut Scope<'_, Card, PerCard>, e: &Card| {
            push(&m.log, format!("card {} sees {}", m.card, e.val));
        });
    }
}

// Decisions, "No user code ends a context" (R6.8): an event whose `key()` works when `PoolInput`
// calls it and panics when the member's dispatcher calls it is dropped and counted in
// `events_dropped_by_panic`, not in `handler_panics`; the dispatcher carries on, so later keys of
// the member still get their instances.
#[test]
fn r6_8_a_key_panic_in_the_dispatcher_drops_the_event_and_the_dispatcher_carries_on() {
    let (log, status, live) = common::bounded(|| {
        let c = Correlator::<Card>::builder().external_time().build().unwrap();
        // One member: every key goes to the member whose dispatcher meets the panic.
        let pool = c.create_pool(ContextOptions::new("cards"), 1).unwrap();
        let log: Log = Arc::default();
        let l = log.clone();
        pool.load_per_key(&c, [Kind::Card], move |card, first: &Card| {
            push(&l, format!("create {card} from {}", first.val));
            PerCard {
                card,
                log: l.clone(),
            }
        })
        .unwrap();
        let input = pool.input(&c).unwrap();
        c.start();
        // Call 1 is `PoolInput`'s; call 2 is the dispatcher's (the dispatcher is the kind's only
        // listener, so the engine itself does not ask for the key).
        let mut poisoned = card(1, 10);
        poisoned.flaky = Some((Arc::new(AtomicU32::new(0)), 2));
        input.send(poisoned).unwrap();
        for (k, v) in [(2, 20), (3, 30), (2, 21)] {
            input.send(card(k, v)).unwrap();
        }
        wait_until("four events processed", || {
            let s = pool.status(&c);
            s.members[0].context.received >= 4 && s.members[0].context.inbox_len == 0
        });
        let live = pool.status(&c).live_keys;
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
