//! A pool dispatcher skipped for the keys it holds (`Context::fire_cursor`) changes nothing a
//! user sees: each key's events reach its live instance once, in order; an event of a key
//! whose instance ended makes a fresh one (R6.8: the ended key's mark goes with it, also where
//! another monitor's listener keeps the key's list, as a watcher of some keys does here); and the
//! skipped dispatcher still counts as a listener that matched, so no `unmatched` listener of
//! the kind fires (R6.6). `skipped` counts the skips, which shows the test ran the fast path.

use crate::{ContextOptions, Correlator, DieReason, Event, Monitor, Pattern, Scope};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// Key `.0`, value `.1`.
#[derive(Clone, Debug)]
struct Kv(u64, u64);

impl Event for Kv {
    type Kind = u8;
    fn kind(&self) -> u8 {
        0
    }
    fn key(&self) -> Option<u64> {
        Some(self.0)
    }
}

/// Whether the instance that takes `Kv(key, value)` dies after taking it.
fn dies(key: u64, value: u64) -> bool {
    key.is_multiple_of(3) && value % 10 == 4
}

/// Each ended instance's key and values, its first (from the factory) first.
type Ended = Arc<Mutex<Vec<(u64, Vec<u64>)>>>;

/// A key's instance: takes its key's even values, dies at a value [`dies`] names.
struct PerKey {
    me: u64,
    values: Vec<u64>,
    out: Ended,
}

impl Monitor<Kv> for PerKey {
    fn on_load(&mut self, cx: &mut Scope<'_, Kv, Self>) {
        cx.on_all(
            Pattern::kind(0)
                .key(self.me)
                .filter(|e: &Kv| e.1.is_multiple_of(2)),
            |m: &mut PerKey, cx: &mut Scope<'_, Kv, PerKey>, e: &Kv| {
                assert_eq!(e.0, m.me, "an event of another key");
                m.values.push(e.1);
                if dies(e.0, e.1) {
                    cx.die();
                }
            },
        );
    }

    fn on_die(&mut self, _: &DieReason, _: &mut Scope<'_, Kv, Self>) {
        let values = std::mem::take(&mut self.values);
        self.out.lock().unwrap().push((self.me, values));
    }
}

/// Counts the events of the keys it watches, one listener per key.
struct Watcher {
    keys: Vec<u64>,
    seen: Arc<Mutex<HashMap<u64, u64>>>,
}

impl Monitor<Kv> for Watcher {
    fn on_load(&mut self, cx: &mut Scope<'_, Kv, Self>) {
        for &k in &self.keys {
            cx.on_all(
                Pattern::kind(0).key(k),
                |m: &mut Watcher, _: &mut Scope<'_, Kv, Watcher>, e: &Kv| {
                    *m.seen.lock().unwrap().entry(e.0).or_insert(0) += 1;
                },
            );
        }
    }
}

/// Counts the events no ordinary listener matched.
struct Unmatched(Arc<Mutex<u64>>);

impl Monitor<Kv> for Unmatched {
    fn on_load(&mut self, cx: &mut Scope<'_, Kv, Self>) {
        cx.unmatched(
            Pattern::kind(0),
            |m: &mut Unmatched, _: &mut Scope<'_, Kv, Unmatched>, _: &Kv| {
                *m.0.lock().unwrap() += 1;
            },
        );
    }
}

#[test]
fn r6_8_r6_6_a_dispatcher_skipped_for_its_held_keys_changes_no_instance_and_no_match() {
    let keys = 50u64;
    let c = Correlator::<Kv>::builder().external_time().build().unwrap();
    let pool = c.create_pool(ContextOptions::new("keys"), 1).unwrap();
    let out: Ended = Arc::new(Mutex::new(Vec::new()));
    let sink = out.clone();
    pool.load_per_key([0], move |me, first: &Kv| PerKey {
        me,
        values: vec![first.1],
        out: sink.clone(),
    })
    .unwrap();
    // The watched keys' lists outlive their instances.
    let watched: Vec<u64> = (0..keys).filter(|k| k.is_multiple_of(2)).collect();
    let seen = Arc::new(Mutex::new(HashMap::new()));
    c.load_in(
        pool.members()[0],
        Watcher {
            keys: watched.clone(),
            seen: seen.clone(),
        },
    )
    .unwrap();
    let unmatched = Arc::new(Mutex::new(0));
    c.load_in(pool.members()[0], Unmatched(unmatched.clone()))
        .unwrap();
    c.start();
    // The model: a key's live instance's values; an event of a key without one makes one (the
    // factory takes the event; it is not delivered).
    let mut live: HashMap<u64, Vec<u64>> = HashMap::new();
    let mut want = Vec::new();
    let mut want_seen = HashMap::new();
    let input = pool.input();
    for value in 0..60 * keys {
        // Scrambled: every key gets odd and even values.
        let key = (value.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 32) % keys;
        input.send(Kv(key, value)).unwrap();
        if key.is_multiple_of(2) {
            *want_seen.entry(key).or_insert(0) += 1;
        }
        match live.get_mut(&key) {
            None => {
                live.insert(key, vec![value]);
            }
            Some(values) if value.is_multiple_of(2) => {
                values.push(value);
                if dies(key, value) {
                    want.push((key, live.remove(&key).unwrap()));
                }
            }
            Some(_) => {}
        }
    }
    c.shutdown().unwrap();
    want.extend(live);
    let mut got = std::mem::take(&mut *out.lock().unwrap());
    got.sort();
    want.sort();
    assert!(
        want.len() > keys as usize + 50,
        "the data ends instances: {}",
        want.len()
    );
    assert_eq!(
        got, want,
        "R6.8: each instance's events once, in order, and a fresh one after"
    );
    assert_eq!(*seen.lock().unwrap(), want_seen, "the watcher's events");
    assert_eq!(
        *unmatched.lock().unwrap(),
        0,
        "R6.6: the dispatcher matched every event, skipped or not"
    );
    assert!(
        c.skipped() > 1_000,
        "the dispatcher was skipped {} times",
        c.skipped()
    );
}
