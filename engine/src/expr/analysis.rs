//! What a flattened expression can come to, read from its definitions without running it: whether
//! it (or a side of an `or`) can never match, for the warning registration logs (see "`not`" and
//! "Repetition" in the [module docs](crate::expr)), and its templates, for the listener index.
//!
//! Owns these checks. May import `event` and `pattern`.

use smallvec::SmallVec;

use crate::event::Event;
use crate::pattern::{IndexKey, Labels};

use super::Def;

/// What an expression's part can come to, following [`Matcher::step`](super::matcher::Matcher::step).
#[derive(Clone, Copy)]
struct Reach {
    /// It can match.
    matches: bool,
    /// It can hold (a `not` that has not failed).
    holds: bool,
    /// It can be satisfied (a greedy repetition with enough events, R7.6).
    satisfied: bool,
}

/// A primary can match; a `not` can only hold; a repetition can match if its bounds admit a
/// count, and be satisfied if it has room above its minimum; `then` starts its right side once
/// its left side matched or is satisfied, and comes to what the right side comes to; `and`
/// matches if one side matches and the other can match, hold or be satisfied, holds if both hold,
/// is satisfied if both can be satisfied or hold and one can be satisfied; `or` matches or is
/// satisfied if a side does (a holding side is only pending there); `within` matches if its inner
/// part can match, hold or be satisfied (at the bound).
fn reach<E: Event>(defs: &[Def<E>], d: usize) -> Reach {
    let r = |matches, holds, satisfied| Reach {
        matches,
        holds,
        satisfied,
    };
    match &defs[d] {
        Def::Leaf(_) | Def::Wait(_) | Def::At(_) => r(true, false, false),
        &Def::Repeat(_, min, max) => {
            let possible = max > 0 && min <= max;
            r(possible && max != u32::MAX, false, possible && min < max)
        }
        Def::Not(_) => r(false, true, false),
        Def::All(a) => reach(defs, *a),
        Def::Then(a, b) => {
            let (a, b) = (reach(defs, *a), reach(defs, *b));
            let starts = a.matches || a.satisfied;
            r(
                starts && b.matches,
                starts && b.holds,
                starts && b.satisfied,
            )
        }
        Def::And(a, b) => {
            let (a, b) = (reach(defs, *a), reach(defs, *b));
            let any = |x: Reach| x.matches || x.holds || x.satisfied;
            r(
                any(a) && any(b) && (a.matches || b.matches),
                a.holds && b.holds,
                (a.satisfied || a.holds)
                    && (b.satisfied || b.holds)
                    && (a.satisfied || b.satisfied),
            )
        }
        Def::Or(a, b) => {
            let (a, b) = (reach(defs, *a), reach(defs, *b));
            r(a.matches || b.matches, false, a.satisfied || b.satisfied)
        }
        Def::Within(a, _) => {
            let a = reach(defs, *a);
            r(a.matches || a.holds || a.satisfied, a.holds, a.satisfied)
        }
        // Its bound, where a holding inner part matches, comes only after a first event: an
        // inner part with no template outside a `not` (`not(x)`) never starts the clock.
        Def::WithinFirst(a, _) => {
            let first = has_template_outside_not(defs, *a);
            let a = reach(defs, *a);
            r(
                a.matches || ((a.holds || a.satisfied) && first),
                a.holds,
                a.satisfied,
            )
        }
    }
}

/// Whether part `d` has a template outside any `not`: one whose match can start a
/// `within_from_first` clock.
fn has_template_outside_not<E: Event>(defs: &[Def<E>], d: usize) -> bool {
    match &defs[d] {
        Def::Leaf(_) | Def::Repeat(..) => true,
        Def::Wait(_) | Def::At(_) | Def::Not(_) => false,
        Def::Then(a, b) | Def::And(a, b) | Def::Or(a, b) => {
            has_template_outside_not(defs, *a) || has_template_outside_not(defs, *b)
        }
        Def::Within(a, _) | Def::WithinFirst(a, _) | Def::All(a) => {
            has_template_outside_not(defs, *a)
        }
    }
}

/// Why part of an expression can never produce a match, or can mislead, if so: the expression as
/// a whole, one side of an `or` (both because of a `not` used on its own, or a repetition that
/// cannot complete, see the module docs), or two templates with one name. Registration logs it
/// as a warning: the listener is kept, with the documented semantics.
pub(crate) fn never_matches<E: Event>(defs: &[Def<E>], labels: &Labels) -> Option<&'static str> {
    // Only a `not` or a repetition can keep a part from matching (see `reach`), and only names
    // can be given twice: an expression without them (the everyday one, registered per
    // instance) needs no walk.
    let odd = defs
        .iter()
        .any(|d| matches!(d, Def::Not(_) | Def::Repeat(..)));
    if let Some(why) = odd.then(|| cannot_match(defs)).flatten() {
        return Some(why);
    }
    let named: Vec<&str> = labels.names.iter().flatten().copied().collect();
    let twice = named
        .iter()
        .enumerate()
        .any(|(i, n)| named[..i].contains(n));
    twice.then_some(
        "two templates of this event expression have the same name: `Prior::named` and \
         `Match::named` find the first of them",
    )
}

/// Why an expression holding a `not` or a repetition can never match, or has a side of an `or`
/// that cannot (the walk `never_matches` needs only for those).
fn cannot_match<E: Event>(defs: &[Def<E>]) -> Option<&'static str> {
    let impossible_repeat = defs
        .iter()
        .any(|d| matches!(d, &Def::Repeat(_, min, max) if max == 0 || min > max));
    if impossible_repeat {
        return Some(
            "this event expression holds a repetition that can never match: `times(0)`, \
             `between(min, max)` with `max == 0` or `min > max`",
        );
    }
    let root = defs.len() - 1;
    let whole = reach(defs, root);
    if !whole.matches {
        return Some(if whole.satisfied {
            "this event expression can never match: a greedy repetition (`at_least`, `between`) \
             completes only with what it is part of (the right side of its `then`, the other side \
             of an `and`, the bound of a `within`), never on its own; use `times(n)` to match at \
             the n-th event"
        } else {
            "this event expression can never match: a `not` never completes a match by itself \
             (combine it with `and`, or bound it with `within`; `within_from_first` counts from \
             the first event, and a `not` alone has none)"
        });
    }
    let dead_or_side = defs.iter().any(|d| match d {
        Def::Or(a, b) => [*a, *b].into_iter().any(|side| {
            let side = reach(defs, side);
            !side.matches && !side.satisfied
        }),
        _ => false,
    });
    dead_or_side.then_some(
        "a side of an `or` in this event expression can never match: a `not` never completes a \
         match by itself (combine it with `and`, or bound it with `within`)",
    )
}

/// The templates of an expression: `(kind, where it is listed)` of every template, for the
/// listener index.
pub(crate) fn leaves<E: Event>(
    defs: &[Def<E>],
    keyed: u64,
    key: u64,
) -> SmallVec<[(E::Kind, IndexKey); 4]> {
    // In place for the usual expression: up to four distinct (kind, key) places (a trade and
    // its confirmation are two).
    let mut v: SmallVec<[(E::Kind, IndexKey); 4]> = SmallVec::new();
    for (i, d) in defs.iter().enumerate() {
        if let Def::Leaf(t) | Def::Repeat(t, ..) = d {
            // A template keyed by its listener's key (`Prog::keyed`) is listed under it.
            let index = if i < 64 && keyed >> i & 1 != 0 {
                IndexKey::Key(key)
            } else {
                t.index()
            };
            let at = (t.kind, index);
            if !v.contains(&at) {
                v.push(at);
            }
        }
    }
    v
}
