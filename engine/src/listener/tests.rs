//! Unit tests of the listener table: firing order (R6.4, R6.5), keyed lists, lazy removal and
//! the cost of compaction, the freeing of slots and buckets.
//!
//! May import `event`, `entry` and `pattern`.

use super::*;
use crate::pattern::Pattern;

#[derive(Clone, Debug)]
struct Ev(u32);

impl Event for Ev {
    type Kind = u32;
    fn kind(&self) -> u32 {
        self.0
    }
}

fn template(pattern: Pattern<Ev>) -> Body<Ev> {
    Body::Template {
        template: pattern.template,
        handler: Box::new(|_, _, _| {}),
    }
}

/// Registers a listener of `instance` on `pattern`; returns its slot.
fn add(t: &mut ListenerTable<Ev>, handle: u64, instance: u32, mode: Mode, p: Pattern<Ev>) -> u32 {
    let index = [(p.template.kind, p.template.index())];
    t.insert(handle, instance, mode, template(p), NO_GATE, &index)
}

/// The solo of kind `k` as dispatch sees it, checked against the bucket itself, and reached
/// through `solo_handler` when there is one (miri runs this for the unchecked access).
fn solo(t: &mut ListenerTable<Ev>, k: u32) -> Option<Solo> {
    let view = t.view_of(&k)?;
    assert_eq!(
        view.lead, t.buckets[view.bucket as usize].lead,
        "stale view"
    );
    let Lead::Solo(s) = view.lead else {
        return None;
    };
    let _: &mut Handler<Ev> = t.solo_handler(s);
    Some(s)
}

// R6.4, R6.9: the dispatch fast path fires a kind's solo listener alone, so `solo` must name
// the kind's only ordinary listener exactly while it is alive, unkeyed, `on_all` and without a
// filter, through registrations, quits, compaction and slot reuse.
#[test]
fn r6_4_solo_names_the_only_plain_listener_while_it_lives() {
    let mut t = ListenerTable::<Ev>::default();
    let a = add(&mut t, 1, 10, Mode::All, Pattern::kind(1));
    assert_eq!(
        solo(&mut t, 1),
        Some(Solo {
            slot: a,
            instance: 10
        })
    );
    // Listeners of other modes and kinds leave it alone.
    add(&mut t, 2, 10, Mode::Unmatched, Pattern::kind(1));
    add(&mut t, 3, 11, Mode::Completed, Pattern::kind(1));
    add(&mut t, 4, 11, Mode::All, Pattern::kind(2));
    assert_eq!(
        solo(&mut t, 1),
        Some(Solo {
            slot: a,
            instance: 10
        })
    );
    // A second ordinary listener: the lists decide again.
    let b = add(&mut t, 5, 12, Mode::All, Pattern::kind(1));
    assert_eq!(solo(&mut t, 1), None);
    t.kill(a);
    assert_eq!(solo(&mut t, 1), None);
    t.compact();
    assert_eq!(
        solo(&mut t, 1),
        Some(Solo {
            slot: b,
            instance: 12
        })
    );
    // The solo quits: gone at once, before compaction frees its slot.
    t.kill(b);
    assert_eq!(solo(&mut t, 1), None);
    t.compact();
    assert_eq!(solo(&mut t, 1), None);
    // A freed slot is reused, with the new listener's instance.
    let c = add(&mut t, 6, 13, Mode::All, Pattern::kind(1));
    assert!(c == a || c == b, "a freed slot is reused");
    assert_eq!(
        solo(&mut t, 1),
        Some(Solo {
            slot: c,
            instance: 13
        })
    );
    // Keyed, once and filtered listeners are not simple, or make the lists matter.
    add(&mut t, 7, 13, Mode::All, Pattern::kind(1).key(3));
    assert_eq!(solo(&mut t, 1), None);
    add(&mut t, 8, 14, Mode::Once, Pattern::kind(5));
    assert_eq!(solo(&mut t, 5), None);
    add(&mut t, 9, 14, Mode::All, Pattern::kind(6).filter(|_| true));
    assert_eq!(solo(&mut t, 6), None);
    assert_eq!(solo(&mut t, 2).map(|s| s.instance), Some(11));
}

/// The [`Lead`] of kind `k` as dispatch sees it, checked against the bucket itself.
fn lead(t: &mut ListenerTable<Ev>, k: u32) -> Lead {
    let Some(view) = t.view_of(&k) else {
        return Lead::Cursor;
    };
    assert_eq!(
        view.lead, t.buckets[view.bucket as usize].lead,
        "stale view"
    );
    view.lead
}

// R6.4, R6.5: dispatch takes a kind's ordinary lists without a cursor when there is nothing to
// merge, so `lead` must say so exactly then: one unkeyed listener with no keyed one (`Solo` if
// it is alive and simple, else `Alone`: filtered, once, or dead until compaction); keyed listeners with no unkeyed one, or one
// registered before every keyed one (`Keyed`). Dead, a listener stays listed until compaction
// (dispatch skips it, as a walk does); an unkeyed listener registered after a keyed one, a
// second unkeyed one, or a field list make the lists need the cursor.
#[test]
fn r6_4_lead_names_the_lists_a_dispatch_takes_without_a_cursor() {
    let mut t = ListenerTable::<Ev>::default();
    let a = add(&mut t, 1, 10, Mode::All, Pattern::kind(1).filter(|_| true));
    assert_eq!(lead(&mut t, 1), Lead::Alone(a));
    assert_eq!(solo(&mut t, 1), None, "a filtered listener is no solo");
    let once = add(&mut t, 2, 10, Mode::Once, Pattern::kind(2));
    assert_eq!(lead(&mut t, 2), Lead::Alone(once));
    let simple = add(&mut t, 3, 10, Mode::All, Pattern::kind(3));
    assert_eq!(
        lead(&mut t, 3),
        Lead::Solo(Solo {
            slot: simple,
            instance: 10
        })
    );
    // Ended, it is no solo (its handler must not run) but still listed: alone until compaction.
    t.kill(simple);
    assert_eq!(lead(&mut t, 3), Lead::Alone(simple));
    t.compact();
    assert_eq!(lead(&mut t, 3), Lead::Cursor);
    // Listeners of other modes leave it alone.
    add(&mut t, 4, 11, Mode::Unmatched, Pattern::kind(1));
    add(&mut t, 5, 11, Mode::Completed, Pattern::kind(1));
    assert_eq!(lead(&mut t, 1), Lead::Alone(a));
    // A keyed listener after the unkeyed one: the unkeyed one leads, then the key's list.
    let keyed = add(&mut t, 6, 11, Mode::All, Pattern::kind(1).key(3));
    assert_eq!(lead(&mut t, 1), Lead::Keyed(Some(a)));
    t.kill(keyed);
    t.compact();
    assert_eq!(lead(&mut t, 1), Lead::Alone(a));
    // A second unkeyed one: the walk merges.
    let b = add(&mut t, 7, 12, Mode::All, Pattern::kind(1).filter(|_| true));
    assert_eq!(lead(&mut t, 1), Lead::Cursor);
    // The first ends: listed, dead, until compaction; then the second is alone.
    t.kill(a);
    assert_eq!(lead(&mut t, 1), Lead::Cursor);
    t.compact();
    assert_eq!(lead(&mut t, 1), Lead::Alone(b));
    t.kill(b);
    assert_eq!(lead(&mut t, 1), Lead::Alone(b), "dead, still listed");
    t.compact();
    assert_eq!(lead(&mut t, 1), Lead::Cursor, "no ordinary listener left");
    // Keyed listeners alone; then an unkeyed one registered after them: the walk merges by
    // handle, for good (the bounds only move outwards).
    add(&mut t, 8, 13, Mode::All, Pattern::kind(9).key(1));
    add(&mut t, 9, 14, Mode::All, Pattern::kind(9).key(2));
    assert_eq!(lead(&mut t, 9), Lead::Keyed(None));
    let late = add(&mut t, 10, 15, Mode::All, Pattern::kind(9));
    assert_eq!(lead(&mut t, 9), Lead::Cursor);
    t.kill(late);
    t.compact();
    assert_eq!(lead(&mut t, 9), Lead::Keyed(None));
    // A field list: the cursor merges it.
    add(&mut t, 11, 16, Mode::All, Pattern::kind(8).key(1));
    add(&mut t, 12, 16, Mode::All, Pattern::kind(8).field(0, 5));
    assert_eq!(lead(&mut t, 8), Lead::Cursor);
}

// R6.9: the bucket of a kind left without listeners is freed by compaction and reused for the
// next new kind; a kind whose bucket was freed gets a fresh one, and dispatch finds each
// kind's own listeners.
#[test]
fn r6_9_a_kind_without_listeners_gives_its_bucket_back() {
    let mut t = ListenerTable::<Ev>::default();
    let keep = add(&mut t, 1, 10, Mode::All, Pattern::kind(1));
    let a = add(&mut t, 2, 10, Mode::Once, Pattern::kind(2));
    let b2 = t.bucket_of(&2).unwrap();
    assert_eq!(t.buckets.len(), 2);
    t.kill(a);
    t.compact();
    assert_eq!(t.bucket_of(&2), None, "kind 2 has no listener left");
    // A new kind takes the freed bucket; kind 1 keeps its own.
    let c = add(&mut t, 3, 11, Mode::Unmatched, Pattern::kind(3));
    assert_eq!(t.bucket_of(&3), Some(b2));
    assert_eq!(t.buckets.len(), 2, "no bucket added");
    assert_eq!(t.buckets[b2].unmatched.plain.slots[..], [c]);
    assert!(
        t.buckets[b2].ordinary.is_empty(),
        "the freed bucket starts empty"
    );
    assert_eq!(
        solo(&mut t, 1),
        Some(Solo {
            slot: keep,
            instance: 10
        })
    );
    // Kind 2 again: a bucket of its own.
    add(&mut t, 4, 12, Mode::All, Pattern::kind(2).key(7));
    let b = t.bucket_of(&2).unwrap();
    assert_ne!(b, b2);
    assert_eq!(t.buckets[b].ordinary.keyed.len(), 1);
    // A bucket freed while other lists of the same compaction name it is freed once.
    let d = add(&mut t, 5, 12, Mode::Completed, Pattern::kind(3));
    t.kill(c);
    t.kill(d);
    t.compact();
    assert_eq!(t.bucket_of(&3), None);
    assert_eq!(t.free_buckets, [b2 as u32]);
}

/// An event with a key and three fields (`f[i]` is field `i`).
#[derive(Clone, Debug)]
struct Fx {
    key: u64,
    f: [u64; 4],
}

impl Event for Fx {
    type Kind = ();
    fn kind(&self) {}
    fn key(&self) -> Option<u64> {
        Some(self.key)
    }
    fn field(&self, field: usize) -> Option<u64> {
        self.f.get(field).copied()
    }
}

fn add_fx(t: &mut ListenerTable<Fx>, handle: u64, p: Pattern<Fx>) -> u32 {
    let index = [(p.template.kind, p.template.index())];
    let body = Body::Template {
        template: p.template,
        handler: Box::new(|_, _, _| {}),
    };
    t.insert(handle, 0, Mode::All, body, NO_GATE, &index)
}

/// The slots a dispatch of `e` walks, in order, and the table's walk count after it.
fn walk(t: &mut ListenerTable<Fx>, e: &Fx) -> Vec<u32> {
    let b = t.bucket_of(&()).unwrap();
    let mut c = t.cursor(b, Mode::All, e, u64::MAX);
    let mut v = Vec::new();
    while let Some(s) = c.next(t) {
        v.push(s);
    }
    t.walked(&c);
    v
}

// R6.10, R6.9, R6.4: a template with a field equality (and no key) is listed under the field's
// value: a dispatch walks the unkeyed listeners, those keyed on the event's key and those under
// its fields' values only, merged in registration order; templates beyond the lists' indexed
// fields are listed unkeyed; emptied field lists go at compaction.
#[test]
fn r6_10_field_equalities_are_indexed_and_merged_in_registration_order() {
    let mut t = ListenerTable::<Fx>::default();
    let p = Pattern::<Fx>::any;
    let a = add_fx(&mut t, 1, p().field(0, 5));
    let b = add_fx(&mut t, 2, p());
    let c = add_fx(&mut t, 3, p().key(9));
    let d = add_fx(&mut t, 4, p().field(1, 7).field(0, 6)); // indexed on field 1 (its first)
    let e = add_fx(&mut t, 5, p().field(0, 5).key(1)); // keyed: the key wins
    let f = add_fx(&mut t, 6, p().field_in(2, 3..=4)); // a range: unkeyed
                                                       // Thousands of listeners on other values cost this dispatch nothing.
    for h in 100..2_100 {
        add_fx(&mut t, h, p().field(0, h));
    }
    let ev = |key, f0, f1| Fx {
        key,
        f: [f0, f1, 3, 0],
    };
    assert_eq!(walk(&mut t, &ev(9, 5, 7)), [a, b, c, d, f]);
    assert_eq!(walk(&mut t, &ev(1, 5, 0)), [a, b, e, f]);
    assert_eq!(walk(&mut t, &ev(0, 6, 8)), [b, f]);
    let before = t.work();
    walk(&mut t, &ev(0, 0, 0));
    assert_eq!(
        t.work() - before,
        3,
        "two unkeyed listeners and the end: no field list walked"
    );
    // Fields 0, 1 and 3 indexed: a fourth field's template is listed unkeyed, and still checked.
    let g = add_fx(&mut t, 7, p().field(3, 1));
    let h = add_fx(&mut t, 8, p().field(2, 3));
    let i = add_fx(&mut t, 9, p().field(3, 2));
    assert_eq!(
        t.slot(g).map(|l| l.regs[0].key()),
        Some(IndexKey::Field(3, 1))
    );
    assert_eq!(t.slot(h).map(|l| l.regs[0].key()), Some(IndexKey::Plain));
    assert_eq!(
        t.slot(i).map(|l| l.regs[0].key()),
        Some(IndexKey::Field(3, 2))
    );
    let mut x = ev(0, 0, 0);
    x.f[3] = 2;
    assert_eq!(walk(&mut t, &x), [b, f, h, i]);
    // A field list whose listeners end goes, and its field with its last list.
    t.kill(d);
    t.compact();
    assert!(!t.buckets[0].ordinary.fields.contains_key(&(1, 7)));
    assert!(t.buckets[0]
        .ordinary
        .field_ids
        .iter()
        .all(|&(id, _)| id != 1));
    assert_eq!(walk(&mut t, &ev(9, 5, 7)), [a, b, c, f, h]);
}

// The listener slot's size: what every listener costs in the table, and what a dispatch loads.
#[test]
fn a_listener_slot_stays_within_its_lines() {
    #[derive(Clone, Debug)]
    struct Ev32([u64; 4]);
    impl Event for Ev32 {
        type Kind = u8;
        fn kind(&self) -> u8 {
            self.0[0] as u8
        }
    }
    let size = std::mem::size_of::<ListenerSlot<Ev32>>();
    eprintln!(
        "listener slot: {size} bytes (body {}, expression {}, template {}, regs {})",
        std::mem::size_of::<Body<Ev32>>(),
        std::mem::size_of::<crate::expr::ExprListener<Ev32>>(),
        std::mem::size_of::<crate::pattern::Template<Ev32>>(),
        std::mem::size_of::<SmallVec<[Reg; 1]>>()
    );
    assert!(size <= 128, "{size}: two cache lines at most");
}

// R6.4: a walk offers an event to its unkeyed and keyed listeners in registration order. Where
// every unkeyed listener came first (a pool dispatcher's gate, then its instances' listeners),
// the walk takes the unkeyed list, then the keyed one, without comparing handles at each step;
// an unkeyed listener registered after a keyed one is merged in its place.
#[test]
fn r6_4_unkeyed_listeners_registered_first_are_walked_first_and_later_ones_merged() {
    let mut t = ListenerTable::<Fx>::default();
    let p = Pattern::<Fx>::any;
    let ev = |key| Fx { key, f: [0; 4] };
    let gate = add_fx(&mut t, 1, p());
    let k1 = add_fx(&mut t, 2, p().key(7));
    let k2 = add_fx(&mut t, 3, p().key(7));
    assert_eq!(walk(&mut t, &ev(7)), [gate, k1, k2]);
    let late = add_fx(&mut t, 4, p());
    assert_eq!(walk(&mut t, &ev(7)), [gate, k1, k2, late]);
    let k3 = add_fx(&mut t, 5, p().key(8));
    assert_eq!(walk(&mut t, &ev(8)), [gate, late, k3]);
    // More keyed listeners than a cursor copies: the merge reads the list itself.
    let many: Vec<u32> = (6..12).map(|h| add_fx(&mut t, h, p().key(9))).collect();
    let mut want = vec![gate, late];
    want.extend(&many);
    assert_eq!(walk(&mut t, &ev(9)), want);
    // Once the late listener is gone the walk still merges (the lists' bounds only move
    // outwards), in the same order.
    t.kill(late);
    t.compact();
    assert_eq!(walk(&mut t, &ev(7)), [gate, k1, k2]);
    assert_eq!(walk(&mut t, &ev(1)), [gate]);
    // In two parts, with more keyed listeners than a cursor copies.
    let mut t = ListenerTable::<Fx>::default();
    let gate = add_fx(&mut t, 1, p());
    let many: Vec<u32> = (2..8).map(|h| add_fx(&mut t, h, p().key(9))).collect();
    let mut want = vec![gate];
    want.extend(&many);
    assert_eq!(walk(&mut t, &ev(9)), want);
}
