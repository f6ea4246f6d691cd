//! One program per expression shape, shared by the listeners of a context ([`Programs`]).
//!
//! A per-key monitor registers the same expression in every instance: at 100,000 devices,
//! `when_all(hb.then(not(hb).within(d)))` 100,000 times, each differing from the others only in
//! the key of its templates. Each listener used to keep its own compiled definitions, and an event
//! for a device met them cold in memory (the definitions and the labels are read by every
//! offer). Now a listener holds a shared program ([`Prog`], immutable once compiled) and its own
//! key ([`Prog::keyed`]): the context keeps one program per shape, and the definitions that every
//! offer reads stay in cache whatever the number of instances.
//!
//! # When two expressions are one program
//! Their flattened definitions are equal as data (kinds, the keys that stay in the templates,
//! field constraints, durations, times, counts, the tree), their templates' names are equal, and
//! every closure is named by its type ([`Ident`](crate::pattern::Ident): a closure that captures
//! nothing behaves as its type says). An expression with a capturing closure (`filter(move |t|
//! t.country != country)`), two filters on one template, templates keyed by different keys, or
//! more definitions than the per-event test's bits gets a program of its own, as before.
//!
//! # Bounds
//! A shape is looked up by a hash of the compiled program and confirmed by comparing it with the
//! one found (a different program under the same hash is not shared). Programs no listener holds
//! any more are swept from the map when it has doubled since the last sweep, so the map holds at
//! most about twice the shapes in use (expressions built with per-instance durations, say, do not
//! accumulate).
//!
//! Owns the per-context program map. May import `event`, `hash` and `pattern`.

use std::hash::{Hash, Hasher};
use std::rc::Rc;

use crate::event::Event;
use crate::hash::{KindHasher, KindMap};

use super::matcher::fill_start;
use super::{Def, Prog};

/// The map is swept no earlier than at this many programs.
const FIRST_SWEEP: usize = 64;

/// The programs of one context's expression listeners, by shape.
pub(crate) struct Programs<E: Event> {
    by_shape: KindMap<u64, Rc<Prog<E>>>,
    /// The map's size at which programs no listener holds are swept out.
    sweep_at: usize,
}

impl<E: Event> Default for Programs<E> {
    fn default() -> Self {
        Self {
            by_shape: KindMap::default(),
            sweep_at: FIRST_SWEEP,
        }
    }
}

impl<E: Event> Programs<E> {
    /// The program to run `prog` with: one of the same shape already here, or `prog` itself,
    /// finished (its start table filled) and kept for the next listener if it can be shared.
    pub(crate) fn share(&mut self, mut prog: Prog<E>) -> Rc<Prog<E>> {
        if !prog.shareable() {
            fill_start(&prog.defs, &mut prog.labels);
            return Rc::new(prog);
        }
        let shape = shape_hash(&prog);
        if let Some(known) = self.by_shape.get(&shape) {
            if same_shape(known, &prog) {
                return Rc::clone(known);
            }
            fill_start(&prog.defs, &mut prog.labels);
            return Rc::new(prog);
        }
        if self.by_shape.len() >= self.sweep_at {
            self.by_shape.retain(|_, p| Rc::strong_count(p) > 1);
            self.sweep_at = (self.by_shape.len() * 2).max(FIRST_SWEEP);
        }
        fill_start(&prog.defs, &mut prog.labels);
        let prog = Rc::new(prog);
        self.by_shape.insert(shape, Rc::clone(&prog));
        prog
    }

    /// How many programs the map holds (for the tests).
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.by_shape.len()
    }
}

/// A hash of what [`same_shape`] compares.
fn shape_hash<E: Event>(p: &Prog<E>) -> u64 {
    let mut h = KindHasher::default();
    p.defs.len().hash(&mut h);
    for d in &p.defs {
        std::mem::discriminant(d).hash(&mut h);
        match d {
            Def::Leaf(t) => t.hash_data(&mut h),
            Def::Repeat(t, min, max) => {
                t.hash_data(&mut h);
                (min, max).hash(&mut h);
            }
            Def::Wait(d) => d.hash(&mut h),
            Def::At(t) => t.as_nanos().hash(&mut h),
            Def::Then(a, b) | Def::And(a, b) | Def::Or(a, b) => (a, b).hash(&mut h),
            Def::Not(a) | Def::All(a) => a.hash(&mut h),
            Def::Within(a, d) | Def::WithinFirst(a, d) => (a, d).hash(&mut h),
        }
    }
    p.keyed.hash(&mut h);
    p.idents.hash(&mut h);
    p.labels.names.hash(&mut h);
    h.finish()
}

/// Whether `a` and `b` are one program: equal definitions (the templates as data, their closures
/// by [`Ident`](crate::pattern::Ident)), the same templates keyed by the listener's key, the same
/// names.
fn same_shape<E: Event>(a: &Prog<E>, b: &Prog<E>) -> bool {
    let same_def = |x: &Def<E>, y: &Def<E>| match (x, y) {
        (Def::Leaf(s), Def::Leaf(t)) => s.same_data(t),
        (Def::Repeat(s, a0, a1), Def::Repeat(t, b0, b1)) => s.same_data(t) && (a0, a1) == (b0, b1),
        (Def::Wait(s), Def::Wait(t)) => s == t,
        (Def::At(s), Def::At(t)) => s == t,
        (Def::Then(a0, a1), Def::Then(b0, b1))
        | (Def::And(a0, a1), Def::And(b0, b1))
        | (Def::Or(a0, a1), Def::Or(b0, b1)) => (a0, a1) == (b0, b1),
        (Def::Not(s), Def::Not(t)) | (Def::All(s), Def::All(t)) => s == t,
        (Def::Within(a0, a1), Def::Within(b0, b1))
        | (Def::WithinFirst(a0, a1), Def::WithinFirst(b0, b1)) => (a0, a1) == (b0, b1),
        _ => false,
    };
    a.defs.len() == b.defs.len()
        && a.defs.iter().zip(&b.defs).all(|(x, y)| same_def(x, y))
        && a.keyed == b.keyed
        && a.idents == b.idents
        && a.labels.names == b.labels.names
}

#[cfg(test)]
mod tests {
    use std::rc::Rc;
    use std::time::Duration;

    use super::Programs;
    use crate::event::Event;
    use crate::expr::{Expr, ExprListener, Fired, StepOut, Stimulus};
    use crate::pattern::{IndexKey, Pattern};
    use crate::time::Time;

    /// Kind and key.
    #[derive(Clone, Debug, PartialEq)]
    struct Kv(u32, u64);
    impl Event for Kv {
        type Kind = u32;
        fn kind(&self) -> u32 {
            self.0
        }
        fn key(&self) -> Option<u64> {
            Some(self.1)
        }
    }

    /// A per-key rule as an instance registers it: both templates keyed by the instance's key,
    /// a filter that captures nothing.
    fn rule(key: u64, secs: u64) -> Expr<Kv> {
        let open = Pattern::kind(1).key(key).filter(|e: &Kv| e.0 == 1);
        open.then(Pattern::kind(2).key(key))
            .within(Duration::from_secs(secs))
    }

    fn listener(e: Expr<Kv>, programs: &mut Programs<Kv>) -> ExprListener<Kv> {
        let mut out = StepOut::new(Vec::new());
        ExprListener::new(e, false, false, Time::ZERO, &mut out, programs)
    }

    /// The keys of the matches `l` fired for `events`.
    fn feed(l: &mut ExprListener<Kv>, events: &[Kv]) -> Vec<Vec<u64>> {
        let mut out = StepOut::new(Vec::new());
        let mut fired: Vec<Fired<Kv>> = Vec::new();
        for (i, e) in events.iter().enumerate() {
            let now = Time::from_secs(i as u64);
            l.step(Stimulus::Event(e), now, &mut out, &mut fired);
        }
        fired
            .iter()
            .map(|f| f.hit.events.iter().map(|e| e.1).collect())
            .collect()
    }

    // R7.3: the instances of a per-key monitor register one expression with their own keys: one
    // program serves them all, and each listener matches its own key's events only, and is
    // listed under it.
    #[test]
    fn r7_3_one_program_serves_every_key_and_each_listener_keeps_its_own() {
        let mut programs = Programs::default();
        let mut a = listener(rule(7, 5), &mut programs);
        let mut b = listener(rule(8, 5), &mut programs);
        assert!(Rc::ptr_eq(a.program(), b.program()));
        assert_eq!(programs.len(), 1);
        assert_eq!(
            a.leaves().as_slice(),
            [(1, IndexKey::Key(7)), (2, IndexKey::Key(7))]
        );
        assert_eq!(
            b.leaves().as_slice(),
            [(1, IndexKey::Key(8)), (2, IndexKey::Key(8))]
        );
        let events = [Kv(1, 8), Kv(1, 7), Kv(2, 8), Kv(2, 7)];
        assert_eq!(feed(&mut a, &events), [vec![7, 7]]);
        let mut b2 = listener(rule(8, 5), &mut programs);
        assert_eq!(feed(&mut b, &events), [vec![8, 8]]);
        assert_eq!(feed(&mut b2, &events[1..]), Vec::<Vec<u64>>::new());
    }

    // R7.3: what cannot be known to be the same program is not shared: a closure that captures
    // something, two keys in one expression, another bound.
    #[test]
    fn r7_3_a_program_is_shared_only_where_it_is_known_to_be_the_same() {
        let mut programs = Programs::default();
        let captures = |k: u64| {
            Pattern::kind(1)
                .key(k)
                .filter(move |e: &Kv| e.1 == k)
                .into()
        };
        let (c1, c2) = (
            listener(captures(1), &mut programs),
            listener(captures(1), &mut programs),
        );
        assert!(!Rc::ptr_eq(c1.program(), c2.program()));
        let two_keys = || Pattern::kind(1).key(1).then(Pattern::kind(2).key(2));
        let (k1, k2) = (
            listener(two_keys(), &mut programs),
            listener(two_keys(), &mut programs),
        );
        assert!(!Rc::ptr_eq(k1.program(), k2.program()));
        assert_eq!(programs.len(), 0);
        let mut k3 = listener(two_keys(), &mut programs);
        let events = [Kv(1, 2), Kv(1, 1), Kv(2, 1), Kv(2, 2)];
        assert_eq!(feed(&mut k3, &events), [vec![1, 2]]);
        let (five, six) = (
            listener(rule(1, 5), &mut programs),
            listener(rule(1, 6), &mut programs),
        );
        assert!(!Rc::ptr_eq(five.program(), six.program()));
        assert_eq!(programs.len(), 2);
    }

    // The map holds the programs in use, and at most about twice as many: shapes no listener
    // runs any more are swept.
    #[test]
    fn programs_no_listener_holds_are_swept() {
        let mut programs = Programs::default();
        let kept = listener(rule(1, 1), &mut programs);
        for secs in 2..1_000 {
            drop(listener(rule(1, secs), &mut programs));
            assert!(
                programs.len() <= 2 * super::FIRST_SWEEP,
                "{}",
                programs.len()
            );
        }
        let again = listener(rule(2, 1), &mut programs);
        assert!(Rc::ptr_eq(kept.program(), again.program()));
    }
}
