//! Look-ahead: cache hints for the keyed events waiting in the inbox, so that the cold lines of
//! different events are fetched at the same time instead of one after the other.
//!
//! # Why
//! At a large key set (`workload/keys/100k`: 100,000 per-key instances) an event walks a chain
//! of lines that belong to its key and are cold: the key's entry in the listener index, then the
//! listener slot it names, then the instance that slot names and the handler's boxed closure, then
//! the instance's boxed state; and a pool's dispatcher probes its set of live keys for every
//! event. Each address is read from the line before it, so the misses of one event come one after
//! the other, and the core waits through each. The events after it are already in the inbox,
//! published, their keys known: their chains can be started early.
//!
//! # How
//! After the loop takes an entry and before it processes it ([`LoopBody::look_ahead`]), the
//! context works four stages, each for a different entry waiting behind the taken one, and each
//! reading only lines that the stage before it asked for [`GAP`] takes earlier (two: with one,
//! `perf annotate` of `workload/keys/100k` put 39 % of the look-ahead's own samples on reading
//! the lines the stage before had asked for, which had not arrived in one entry's processing,
//! about 200 ns; two ran 7 % faster there, three slower than one):
//! - **farthest**, the entry `3 * GAP` places after the next ([`Consumer::peek_with`]), if it is
//!   a published event with a key: a prefetch of the lines where the index's lookup of its key
//!   starts ([`KeyMap::slot_hint`]), and of the line where each dispatcher's probe of its key set
//!   will start ([`DispatcherHook`]); both are computed from the key, nothing is read;
//! - **far**, the entry `2 * GAP` places after the next: its key's ordinary listeners in the
//!   index (the one probe of the look-ahead, of the line *farthest* asked for), and a prefetch of
//!   each one's slot, up to [`KEYED_HINTS`] (an instance with a rule, an `on_all` and the watches
//!   it registered has a few, and its dispatch reads every one: with the first alone prefetched,
//!   `workload/fraud`'s three or four listeners per card ran 10-18 % slower, harness/BENCHMARKS.md);
//! - **mid**, the entry `GAP` places after the next: the slots that *far* found for it, now in
//!   cache: for the first, a prefetch of its instance's state (one line: the store keeps the
//!   states apart from the instances' records, a small state in place; `context::store`) and of
//!   its handler's closure (an expression listener's first matcher); for each expression
//!   listener whose program is its own (a watch whose filter captures a value, registered from
//!   a handler: no other listener shares it, so it is cold), a prefetch of the program's head,
//!   the bytes an event's test reads first ([`Prog::ADMIT_HEAD`]);
//! - **near**, the next entry: for the instance that *mid* found for it, a prefetch of its state's
//!   box, if the state is too large to be held in place (the store keeps a bit per instance for
//!   that: reading the state's line to learn it stalled here, on a line *mid* had asked for one
//!   take before, in a sixth of the look-ahead's samples at `workload/keys/1m`); and for each
//!   program of its own that *mid* found, a prefetch of the template its test reads first
//!   (named in the program's head, which has arrived). Before these two hints the test of a
//!   watch waited on the program's head and then on its definitions, one after the other: 60 %
//!   of `fire_expr`'s samples in `workload/fraud` (`perf annotate`), whose cards each hold a
//!   watch or two (rule 2); with them it ran 1.22-1.52x as fast (harness/BENCHMARKS.md).
//!
//! Before the index could be hinted (`std`'s map names neither the group nor the bucket a lookup
//! reads), *far* probed it cold: at `workload/keys/1m` three quarters of the look-ahead's own
//! samples; and the dispatcher's probe of its key set was most of that handler's.
//!
//! Besides, the listener of the next timer to fall due is prefetched (a timer fires for a key
//! that no waiting event names: `within` bounds expiring under event time), and at a later take,
//! once its slot has arrived, its matches (the step reads each match's due time first) and the
//! head of its program if the program is its own. At `workload/fraud` (a timer per match of rule
//! 1 and per watch of rule 2) the step's read of a match's due time had 30 % of `fire_expr`'s
//! samples.
//!
//! Each stage hands its finding to the next through [`Ahead`], by take number modulo [`GAP`]:
//! the entries move up one place per take. A take that moves further (stepping over cancelled
//! places, or taking from the overflow) only makes a hint miss: the findings are used as hints
//! and nothing else, every index is checked against the table it indexes, and a slot reused by
//! another listener since is as good a guess as any.
//!
//! # What it costs and when it runs
//! One peek, one `kind()`/`key()` call and one index probe per entry, and five prefetches, one
//! more per listener of the key after its first, two or three more per program of its own and
//! one more per dispatcher. In
//! cache (a small key set) that is pure cost, so the look-ahead runs only while the context has
//! at least [`LOOK_AHEAD_FROM`] live listeners. A kind with one unkeyed listener ([`Solo`])
//! needs no hints: its listener is in cache. The `kind()` and `key()` of an event ahead run under
//! `catch_unwind`, and a panic there is ignored (the event's own dispatch calls them again and
//! drops the event as for any such panic: SPEC, R6.8).
//!
//! Owns [`Ahead`] and [`Context::hint_ahead`]. May import `event`, `inbox`, `listener`, `entry` and
//! `hint`.
//!
//! [`Solo`]: crate::listener::Solo
//! [`KeyMap::slot_hint`]: crate::hash::KeyMap::slot_hint
//! [`DispatcherHook`]: crate::entry::DispatcherHook
//! [`LoopBody::look_ahead`]: super::skeleton::LoopBody::look_ahead
//! [`Consumer::peek_with`]: crate::inbox::Consumer::peek_with
//! [`Prog::ADMIT_HEAD`]: crate::expr::Prog::ADMIT_HEAD

use std::panic::{self, AssertUnwindSafe};

use super::Context;
use crate::entry::{Entry, NO_INSTANCE};
use crate::event::Event;
use crate::hint::prefetch;
use crate::inbox::Consumer;

/// Live listeners from which the look-ahead runs: below, a context's listeners and instances
/// are in cache (a few hundred bytes per key), and the hints would only add instructions.
pub(super) const LOOK_AHEAD_FROM: usize = 16_384;

/// No finding.
const NONE: u32 = u32::MAX;

/// The most listener slots of one key that the stages hint.
const KEYED_HINTS: usize = 4;

/// A key's listener slots found by one stage for the next: [`NONE`] after the last.
type Slots = [u32; KEYED_HINTS];

/// The slots of `found` (up to the first [`NONE`]).
fn listed(found: &Slots) -> impl Iterator<Item = u32> + '_ {
    found.iter().copied().take_while(|&s| s != NONE)
}

/// Takes between one stage and the next: a prefetch asked for at one take has this many entries'
/// processing to arrive before the next stage reads its line (see the module docs).
const GAP: usize = 2;

/// What the stages found for the entries after the one being processed: the findings of the
/// last [`GAP`] takes, by take number modulo [`GAP`].
pub(super) struct Ahead {
    /// The bucket and key *farthest* found, each for the entry now `2 * GAP` places after the
    /// next when it is read back (bucket [`NONE`]: none).
    keys: [(u32, u64); GAP],
    /// The listener slots *far* found (up to [`KEYED_HINTS`], the first one first, [`NONE`]
    /// after the last), each for the entry now `GAP` places further than the next one when it
    /// is read back.
    slots: [Slots; GAP],
    /// The instances *mid* found, each for the entry that is the next one when it is read back.
    instances: [u32; GAP],
    /// The slots of expression listeners with programs of their own that *mid* found, passed
    /// on to *near* (for the templates their programs name).
    near: [Slots; GAP],
    /// Takes so far, modulo [`GAP`].
    take: usize,
    /// The slot of the next timer's listener at the last take, and whether its matches were
    /// asked for since.
    timer: (u32, bool),
}

impl Default for Ahead {
    fn default() -> Self {
        Self {
            keys: [(NONE, 0); GAP],
            slots: [[NONE; KEYED_HINTS]; GAP],
            instances: [NONE; GAP],
            near: [[NONE; KEYED_HINTS]; GAP],
            timer: (NONE, false),
            take: 0,
        }
    }
}

impl<E: Event> Context<E> {
    /// The four stages (see the module docs), after an entry was taken and before it is
    /// processed.
    #[inline(always)]
    pub(super) fn hint_ahead(&mut self, consumer: &Consumer<Entry<E>>) {
        if self.table.live() < LOOK_AHEAD_FROM {
            return;
        }
        self.hint_stages(consumer);
    }

    #[inline(never)]
    fn hint_stages(&mut self, consumer: &Consumer<Entry<E>>) {
        let at = self.ahead.take;
        self.ahead.take = (at + 1) % GAP;
        // near: the instance mid found GAP takes ago belongs to the next entry; a boxed state is
        // the one line of it that mid could not name.
        let instance = std::mem::replace(&mut self.ahead.instances[at], NONE);
        if let Some(p) = self.instances.boxed_state(instance) {
            prefetch(p);
        }
        // ... and for each program of its own mid found, the template its test reads first (the
        // program's head, which mid asked for, has arrived).
        if self.ahead.near[at][0] != NONE {
            let own = self.ahead.near[at];
            self.ahead.near[at][0] = NONE;
            for s in listed(&own) {
                self.table.prefetch_template(s);
                #[cfg(test)]
                {
                    self.looked += 1;
                }
            }
        }
        // mid: the slots far found GAP takes ago belong to the entry GAP after the next.
        // The head of each program of its own (a watch with a capturing filter) is cold, and
        // the test of the event reads it, then a template it names (near's hint).
        // (A list ends at its first NONE: clearing the first entry clears it.)
        let mut slots = [NONE; KEYED_HINTS];
        slots[0] = std::mem::replace(&mut self.ahead.slots[at][0], NONE);
        if slots[0] != NONE {
            slots[1] = std::mem::replace(&mut self.ahead.slots[at][1], NONE);
            if slots[1] != NONE {
                slots[2..].copy_from_slice(&self.ahead.slots[at][2..]);
            }
        }
        if let Some((instance, handler, own)) = self.table.slot_hint(slots[0]) {
            prefetch(handler);
            // The state's line: all a handler reads of its instance.
            self.instances.prefetch_state(instance);
            self.ahead.instances[at] = instance;
            if own || slots[1] != NONE {
                self.hint_programs(at, &slots, own);
            }
        }
        // The listener of the next timer to fall due: its slot, and at a later take (the slot
        // has arrived) its matches and, if its program is its own, the program's head.
        if let Some(&(.., slot)) = self.timers.peek() {
            match self.ahead.timer {
                (s, false) if s == slot => {
                    self.table.prefetch_matches(slot);
                    self.ahead.timer.1 = true;
                }
                (s, _) if s == slot => {}
                _ => {
                    self.table.prefetch_slot(slot);
                    self.ahead.timer = (slot, false);
                }
            }
        }
        // far: the key farthest found GAP takes ago belongs to the entry 2 * GAP after the next;
        // the line its lookup reads was asked for then.
        let (bucket, key) = std::mem::replace(&mut self.ahead.keys[at], (NONE, 0));
        let slots = self.table.keyed_slots(bucket, key);
        if let Some(&first) = slots.first() {
            // Every slot the key's dispatch will read (an instance's few listeners: a rule's
            // `when_all`, an `on_all`, the watches it registered), the first one's handler next.
            self.table.prefetch_slot(first);
            self.ahead.slots[at][0] = first;
            if slots.len() > 1 {
                let found = &mut self.ahead.slots[at];
                for (f, &s) in found.iter_mut().zip(slots).skip(1) {
                    self.table.prefetch_slot(s);
                    *f = s;
                }
                if let Some(end) = found.get_mut(slots.len()) {
                    *end = NONE;
                }
            }
            #[cfg(test)]
            {
                self.looked += 1;
            }
        }
        // farthest: the entry 3 * GAP after the next.
        let table = &mut self.table;
        let found = consumer.peek_with(3 * GAP, |entry| match entry {
            Entry::Event(_, e) => panic::catch_unwind(AssertUnwindSafe(|| {
                let key = e.key()?;
                Some((table.keyed_bucket(&e.kind()), key))
            }))
            .ok()
            .flatten(),
            _ => None,
        });
        let Some((bucket, key)) = found.flatten() else {
            return;
        };
        if let Some(b) = bucket {
            self.table.prefetch_keyed(b, key);
            self.ahead.keys[at] = (b, key);
        }
        for h in &self.fx.dispatchers {
            if h.instance != NO_INSTANCE {
                prefetch(h.keys.slot_hint(key));
                #[cfg(test)]
                {
                    self.looked += 1;
                }
            }
        }
    }

    /// *mid*'s hints for a key's listeners after its first (see [`Context::hint_ahead`]): the
    /// head of each program of its own, each such slot noted for *near*, after the first if
    /// `first_own` (its head was asked for with its other hints).
    #[inline(never)]
    fn hint_programs(&mut self, at: usize, slots: &Slots, first_own: bool) {
        let mut own = [NONE; KEYED_HINTS];
        let mut n = 0;
        if first_own {
            own[0] = slots[0];
            n = 1;
        }
        for s in listed(slots).skip(1) {
            if self.table.prefetch_program(s) {
                own[n] = s;
                n += 1;
            }
        }
        self.ahead.near[at] = own;
    }
}

#[cfg(test)]
mod tests {
    //! The look-ahead changes nothing a user sees: with more live listeners than
    //! [`LOOK_AHEAD_FROM`] and the events already waiting in the inbox (sent before `start`),
    //! each event still reaches its key's instance once, in the order sent (R2.2), and an event
    //! whose `key()` panics, which the look-ahead meets before its dispatch does, is dropped and
    //! counted once, losing no other event (R6.8). The same holds for a pool's per-key
    //! instances, whose dispatcher the look-ahead hints too.
    //!
    //! `looked` counts the hints given: listeners found in the index, and dispatcher key-set
    //! slots named.

    use super::LOOK_AHEAD_FROM;
    use crate::{ContextOptions, Correlator, Event, Monitor, Pattern, Scope, Time};
    use std::sync::{Arc, Mutex};
    use std::time::Duration;

    /// An event of key `.0` with value `.1`, sent to the instance of its key; [`POISON`]'s
    /// `key()` panics.
    #[derive(Clone, Debug)]
    struct Key(u64, u64);

    const POISON: u64 = u64::MAX;

    impl Event for Key {
        type Kind = u8;
        fn kind(&self) -> u8 {
            0
        }
        fn key(&self) -> Option<u64> {
            assert!(self.0 != POISON, "a key() that panics");
            Some(self.0)
        }
    }

    /// Spawns an instance per key in `0..n`, each recording the keys of the events it takes.
    #[derive(Clone)]
    struct Keys {
        n: u64,
        me: u64,
        seen: Arc<Mutex<Vec<u64>>>,
    }

    impl Monitor<Key> for Keys {
        fn on_load(&mut self, cx: &mut Scope<'_, Key, Self>) {
            for me in 0..self.n {
                let state = Keys {
                    n: 0,
                    me,
                    seen: self.seen.clone(),
                };
                cx.spawn(&state, |m: &mut Keys, cx: &mut Scope<'_, Key, Keys>| {
                    cx.on_all(
                        Pattern::kind(0).key(m.me),
                        |m: &mut Keys, _: &mut Scope<'_, Key, Keys>, e: &Key| {
                            assert_eq!(e.0, m.me, "an event of another key");
                            m.seen.lock().unwrap().push(e.0);
                        },
                    );
                });
            }
        }
    }

    #[test]
    fn r2_2_r6_8_look_ahead_changes_no_order_and_a_key_panic_counts_once() {
        let n = LOOK_AHEAD_FROM as u64 + 1_000;
        let c = Correlator::<Key>::builder()
            .external_time()
            .inbox_capacity(1 << 16)
            .build()
            .unwrap();
        let seen = Arc::new(Mutex::new(Vec::new()));
        c.load(Keys {
            n,
            me: 0,
            seen: seen.clone(),
        })
        .unwrap();
        // Waiting in the inbox when the context starts: the look-ahead sees each of them.
        let mut sent = Vec::new();
        let input = c.input();
        for i in 0..20_000u64 {
            let key = if i == 7_000 {
                POISON
            } else {
                i.wrapping_mul(0x9e37_79b9_7f4a_7c15) % n
            };
            input.send_to(c.main(), Key(key, 0)).unwrap();
            if key != POISON {
                sent.push(key);
            }
        }
        c.start();
        c.shutdown().unwrap();
        let seen = seen.lock().unwrap();
        let first_difference = seen.iter().zip(&sent).position(|(a, b)| a != b);
        assert_eq!(first_difference, None, "R2.2: each event once, in order");
        assert_eq!(seen.len(), sent.len(), "R2.2: each event once");
        let status = c.status();
        let main = status.context(c.main()).unwrap();
        assert_eq!(
            main.events_dropped_by_panic, 1,
            "R6.8: the poisoned event, once"
        );
        assert_eq!(main.handler_panics, 0);
        assert!(
            c.looked() > 15_000,
            "the look-ahead found {} listeners for 19,999 waiting events",
            c.looked()
        );
    }

    /// The loader (`n` > 0) spawns one per key in `0..n`; each has a watch, any event of its key
    /// then one carrying the value `key + 1` within 10 s, whose filter captures its key (a
    /// program of its own, which the look-ahead hints: its head, its template, and its matches
    /// while its timer is the next due), registered before or after an `on_all` of the key
    /// (even keys: before).
    #[derive(Clone)]
    struct Watched {
        n: u64,
        me: u64,
        seen: Arc<Mutex<Vec<u64>>>,
        fired: Arc<Mutex<Vec<u64>>>,
        timed_out: Arc<Mutex<Vec<u64>>>,
    }

    impl Watched {
        fn listen(&mut self, cx: &mut Scope<'_, Key, Self>) {
            let me = self.me;
            let watch = |cx: &mut Scope<'_, Key, Self>| {
                let value = Pattern::kind(0)
                    .key(me)
                    .filter(move |e: &Key| e.1 == me + 1);
                cx.when_with_timeout(
                    Pattern::kind(0)
                        .key(me)
                        .then(value)
                        .within(Duration::from_secs(10)),
                    |m: &mut Watched, _: &mut Scope<'_, Key, Watched>, hit: &crate::Match<Key>| {
                        assert_eq!(hit.events[1].0, m.me, "a watch fired by another key");
                        m.fired.lock().unwrap().push(m.me);
                    },
                    |m: &mut Watched, _: &mut Scope<'_, Key, Watched>, hit: &crate::Match<Key>| {
                        assert_eq!(hit.events.len(), 1, "R7.7: the partial match's event");
                        m.timed_out.lock().unwrap().push(m.me);
                    },
                );
            };
            if me.is_multiple_of(2) {
                watch(cx);
            }
            cx.on_all(
                Pattern::kind(0).key(me),
                |m: &mut Watched, _: &mut Scope<'_, Key, Watched>, e: &Key| {
                    assert_eq!(e.0, m.me, "an event of another key");
                    m.seen.lock().unwrap().push(e.0);
                },
            );
            if !me.is_multiple_of(2) {
                watch(cx);
            }
        }
    }

    impl Monitor<Key> for Watched {
        fn on_load(&mut self, cx: &mut Scope<'_, Key, Self>) {
            for me in 0..self.n {
                let state = Watched {
                    n: 0,
                    me,
                    ..self.clone()
                };
                cx.spawn(&state, Watched::listen);
            }
        }
    }

    #[test]
    fn r2_2_r7_7_look_ahead_over_watches_with_programs_of_their_own_changes_nothing() {
        let n = LOOK_AHEAD_FROM as u64 / 2 + 1_000;
        let c = Correlator::<Key>::builder()
            .external_time()
            .inbox_capacity(1 << 16)
            .build()
            .unwrap();
        let (seen, fired, timed_out) = (Arc::default(), Arc::default(), Arc::default());
        c.load(Watched {
            n,
            me: 0,
            seen: Arc::clone(&seen),
            fired: Arc::clone(&fired),
            timed_out: Arc::clone(&timed_out),
        })
        .unwrap();
        // Waiting in the inbox when the context starts: every key twice (event i and i + n), in
        // a scrambled order; only the last 1,000 events carry the value their key's watch
        // waits for, each its key's second. Then the clock passes the watches' bound.
        let (events, last) = (2 * n, 2 * n - 1_000);
        let input = c.input();
        let (mut sent, mut want) = (Vec::new(), Vec::new());
        for i in 0..events {
            let key = i * 7_919 % n;
            let value = if i >= last { key + 1 } else { 0 };
            input.send_to(c.main(), Key(key, value)).unwrap();
            sent.push(key);
            if i >= last {
                want.push(key);
            }
        }
        input.send_time_to(c.main(), Time::from_secs(20)).unwrap();
        c.start();
        c.shutdown().unwrap();
        assert_eq!(
            *seen.lock().unwrap(),
            sent,
            "R2.2: each event once, in order"
        );
        let mut fired = std::mem::take(&mut *fired.lock().unwrap());
        fired.sort_unstable();
        want.sort_unstable();
        assert_eq!(fired, want, "each watch whose value came fired once");
        let mut timed_out = std::mem::take(&mut *timed_out.lock().unwrap());
        timed_out.sort_unstable();
        let rest: Vec<u64> = (0..n).filter(|k| want.binary_search(k).is_err()).collect();
        assert_eq!(
            timed_out, rest,
            "R7.7: every other watch timed out once, at the bound"
        );
        // The index's hints give at most one per event; a watch alive at its key's event adds
        // one (the template its program names), and every watch is alive at both its events.
        assert!(
            c.looked() > events + events / 2,
            "the look-ahead gave {} hints for {} waiting events",
            c.looked(),
            events
        );
    }

    /// Each ended instance's key and the values it took.
    type Ended = Arc<Mutex<Vec<(u64, Vec<u64>)>>>;

    /// One key's instance: the values of the events it took, its first from the factory.
    struct Taken {
        me: u64,
        values: Vec<u64>,
        out: Ended,
    }

    impl Monitor<Key> for Taken {
        fn on_load(&mut self, cx: &mut Scope<'_, Key, Self>) {
            cx.on_all(
                Pattern::kind(0).key(self.me),
                |m: &mut Taken, _: &mut Scope<'_, Key, Taken>, e: &Key| {
                    assert_eq!(e.0, m.me, "an event of another key");
                    m.values.push(e.1);
                },
            );
        }

        fn on_die(&mut self, _: &crate::DieReason, _: &mut Scope<'_, Key, Self>) {
            let values = std::mem::take(&mut self.values);
            self.out.lock().unwrap().push((self.me, values));
        }
    }

    #[test]
    fn r2_2_r6_8_look_ahead_over_a_pool_keeps_each_keys_events_once_in_order() {
        let n = LOOK_AHEAD_FROM as u64 + 1_000;
        let c = Correlator::<Key>::builder()
            .external_time()
            .inbox_capacity(1 << 17)
            .build()
            .unwrap();
        let pool = c.create_pool(ContextOptions::new("keys"), 1).unwrap();
        let out = Arc::new(Mutex::new(Vec::new()));
        let sink = out.clone();
        pool.load_per_key([0], move |me, first: &Key| Taken {
            me,
            values: vec![first.1],
            out: sink.clone(),
        })
        .unwrap();
        // Three passes over the keys, waiting in the inbox when the pool starts: the first
        // creates the instances (the dispatcher's hint alone), the next two reach their
        // listeners (the index's hints too). Every key in a scrambled order, values counting up.
        let input = pool.input();
        let mut want = vec![Vec::new(); n as usize];
        let mut value = 0;
        for _ in 0..3 {
            for i in 0..n {
                // 7,919 is prime and does not divide n: a permutation of 0..n.
                let key = i * 7_919 % n;
                input.send(Key(key, value)).unwrap();
                want[key as usize].push(value);
                value += 1;
            }
        }
        c.start();
        c.shutdown().unwrap();
        let mut got = std::mem::take(&mut *out.lock().unwrap());
        got.sort_by_key(|(k, _)| *k);
        assert_eq!(
            got.len(),
            n as usize,
            "R6.8: one instance per key, each ended once"
        );
        for (key, values) in got {
            assert_eq!(
                values, want[key as usize],
                "R2.2: key {key}'s events once each, in the order sent"
            );
        }
        // The last two passes give a dispatcher hint and an index hint per event (the first,
        // few: the look-ahead starts once LOOK_AHEAD_FROM instances listen). Either kind alone
        // gives at most 2n + 1,000.
        assert!(
            c.looked() > 3 * n,
            "the look-ahead gave {} hints for {} waiting events",
            c.looked(),
            3 * n
        );
    }
}
