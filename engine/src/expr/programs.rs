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
//! A shape is looked up by a hash of the expression's tree, taken without compiling it
//! ([`Expr::shape`]), and confirmed by comparing the tree with the program found
//! ([`Expr::is_compiled_as`]; a different program under the same hash is not shared): a
//! registration that finds its program compiles nothing and allocates only its matches. Programs no listener holds
//! any more are swept from the map when it has doubled since the last sweep, so the map holds at
//! most about twice the shapes in use (expressions built with per-instance durations, say, do not
//! accumulate).
//!
//! Owns the per-context program map. May import `event`, `hash` and `pattern`.

use std::rc::Rc;

use crate::event::Event;
use crate::hash::KindMap;

use super::analysis::never_matches;
use super::combinators::AfterMatch;
use super::matcher::{fill_start, StartImage};
use super::{Expr, Prog};

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
    /// The program to run `expr` with, its after-match policy and the listener's key (see
    /// [`Prog::keyed`]): one of the same shape already here, found without compiling `expr`;
    /// else `expr` compiled, and kept for the next listener if it can be shared. `all`: the
    /// listener repeats (`when_all`).
    pub(crate) fn program(
        &mut self,
        expr: Expr<E>,
        all: bool,
    ) -> (Rc<Prog<E>>, AfterMatch, Option<u64>) {
        let Some((shape, key)) = expr.shape() else {
            let (prog, after, key) = expr.compile();
            return (finish(prog, all), after, key);
        };
        if let Some(known) = self.by_shape.get(&shape) {
            if expr.is_compiled_as(known) {
                return (Rc::clone(known), expr.policy(), key);
            }
            // Another shape under the same hash: this one runs a program of its own.
            let (prog, after, key) = expr.compile();
            return (finish(prog, all), after, key);
        }
        if self.by_shape.len() >= self.sweep_at {
            self.by_shape.retain(|_, p| Rc::strong_count(p) > 1);
            self.sweep_at = (self.by_shape.len() * 2).max(FIRST_SWEEP);
        }
        let (prog, after, key) = expr.compile();
        let prog = finish(prog, true);
        self.by_shape.insert(shape, Rc::clone(&prog));
        (prog, after, key)
    }

    /// How many programs the map holds (for the tests).
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.by_shape.len()
    }
}

/// A compiled program made ready to run: its start table filled, its warning found, and, if
/// `image`, its start image made if it has one. The image pays for itself over many starts: a
/// shared program's, or a repeating listener's (whose fresh match it keeps unmade); for the
/// one program of a `when` (a template with a capturing filter, registered from a handler:
/// `workload/fraud`'s rule 2) making it would cost a second start of a matcher.
fn finish<E: Event>(mut prog: Prog<E>, image: bool) -> Rc<Prog<E>> {
    fill_start(&prog.defs, &mut prog.labels);
    prog.never = never_matches(&prog.defs, &prog.labels);
    if image {
        prog.start = StartImage::of(&prog.defs, &prog.labels);
    }
    Rc::new(prog)
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

    // R7.3: a program of its own (a closure that captures something) gets a start image only
    // where its listener repeats (`when_all`, whose fresh match the image keeps unmade); a
    // `when` starts its one matcher directly. Both match as before.
    #[test]
    fn r7_3_a_one_off_program_makes_a_start_image_only_for_a_repeating_listener() {
        let mut programs = Programs::default();
        let expr = |k: u64| -> Expr<Kv> {
            Pattern::kind(1)
                .key(k)
                .filter(move |e: &Kv| e.1 == k)
                .then(Pattern::kind(2).key(k))
        };
        let mut out = StepOut::new(Vec::new());
        let mut once =
            ExprListener::new(expr(3), false, false, Time::ZERO, &mut out, &mut programs);
        let mut every =
            ExprListener::new(expr(3), true, false, Time::ZERO, &mut out, &mut programs);
        assert!(once.program().start.is_none(), "a `when`'s own program");
        assert!(
            every.program().start.is_some(),
            "a `when_all`'s own program"
        );
        let events = [Kv(1, 3), Kv(2, 3), Kv(1, 3), Kv(2, 3)];
        assert_eq!(feed(&mut once, &events), [vec![3, 3]]);
        assert_eq!(feed(&mut every, &events), [vec![3, 3], vec![3, 3]]);
        // (No `within`: a start that sets a timer has no image, shared or not.)
        let pair = Pattern::kind(1).key(4).then(Pattern::kind(2).key(4));
        let shared = listener(pair, &mut programs);
        assert!(
            shared.program().start.is_some(),
            "a shared program, even for a `when`"
        );
    }

    /// Expressions that differ from each other in one thing each (the tree, a duration, a count,
    /// a name, a field, a closure, which templates are keyed), all keyed by `k` where keyed.
    fn variants(k: u64) -> Vec<Expr<Kv>> {
        use crate::expr::{all, at, not, wait};
        let p = |kind: u32| Pattern::<Kv>::kind(kind).key(k);
        let s = Duration::from_secs;
        vec![
            p(1).then(p(2)),
            p(2).then(p(1)),
            p(1).and(p(2)),
            p(1).or(p(2)),
            p(1).then(p(2)).within(s(5)),
            p(1).then(p(2)).within(s(6)),
            p(1).then(p(2)).within_from_first(s(5)),
            p(1).then(p(2).within(s(5))),
            p(1).then(not(p(2)).within(s(5))),
            p(1).then(all(p(2))),
            all(p(1)).then(p(2)),
            p(1).times(2).then(p(2)),
            p(1).times(3).then(p(2)),
            p(1).at_least(2).then(p(2)),
            p(1).named("a").then(p(2)),
            p(1).then(p(2).named("a")),
            p(1).field(0, 4).then(p(2)),
            p(1).field(0, 5).then(p(2)),
            p(1).filter(|e: &Kv| e.0 == 1).then(p(2)),
            p(1).filter(|e: &Kv| e.0 != 3).then(p(2)),
            p(1).then(p(2).given(|pr, _: &Kv| pr.get(0).is_some())),
            p(1).then(Pattern::kind(2)),
            Pattern::kind(1).then(p(2)),
            p(1).then(wait(s(5))),
            p(1).then(at(Time::from_secs(9))),
            p(1).then(p(2)).then(p(3)),
            p(1).then(p(2).then(p(3))),
        ]
    }

    // R7.3: two registrations share a program exactly when their expressions are the same but
    // for the key: every pair of different variants gets two programs, every variant meets its
    // twin of another key in the map.
    #[test]
    fn r7_3_expressions_share_a_program_exactly_when_they_are_the_same() {
        let n = variants(1).len();
        for i in 0..n {
            let mut programs = Programs::default();
            let first = listener(variants(1).swap_remove(i), &mut programs);
            for j in 0..n {
                let other = listener(variants(2).swap_remove(j), &mut programs);
                let shared = Rc::ptr_eq(first.program(), other.program());
                assert_eq!(shared, i == j, "variants {i} and {j}");
                // The confirmation alone, as if their hashes had met.
                let (prog, _, _) = variants(2).swap_remove(j).compile();
                let same = variants(1).swap_remove(i).is_compiled_as(&prog);
                assert_eq!(same, i == j, "variants {i} and {j} compared");
            }
        }
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
