//! What a flattened expression can come to, read from its definitions without running it: whether
//! it (or a side of an `or`) can never match, for the warning registration logs (see "`not`" in
//! the [module docs](crate::expr)), and its templates, for the listener index.
//!
//! Owns these checks. May import `event` only.

use crate::event::Event;

use super::Def;

/// What an expression's part can come to: `(can match, can hold)`, following [`Matcher::step`](super::matcher::Matcher::step): a
/// primary can match; a `not` can only hold; `then` matches if both sides can and holds where its
/// right side holds; `and` holds if both sides hold and matches if one side matches and the other
/// matches or holds; `or` matches if a side does (a holding side is only pending there); `within`
/// matches if its inner part matches or holds (at the bound), and holds where it does.
fn reach<E: Event>(defs: &[Def<E>], d: usize) -> (bool, bool) {
    match &defs[d] {
        Def::Leaf(_) | Def::Wait(_) | Def::At(_) => (true, false),
        Def::Not(_) => (false, true),
        Def::Then(a, b) => {
            let ((ma, _), (mb, hb)) = (reach(defs, *a), reach(defs, *b));
            (ma && mb, ma && hb)
        }
        Def::And(a, b) => {
            let ((ma, ha), (mb, hb)) = (reach(defs, *a), reach(defs, *b));
            ((ma || ha) && (mb || hb) && (ma || mb), ha && hb)
        }
        Def::Or(a, b) => (reach(defs, *a).0 || reach(defs, *b).0, false),
        Def::Within(a, _) => {
            let (m, h) = reach(defs, *a);
            (m || h, h)
        }
        // Its bound, where a holding inner part matches, comes only after a first event: an
        // inner part with no template outside a `not` (`not(x)`) never starts the clock.
        Def::WithinFirst(a, _) => {
            let (m, h) = reach(defs, *a);
            (m || (h && has_template_outside_not(defs, *a)), h)
        }
    }
}

/// Whether part `d` has a template outside any `not`: one whose match can start a
/// `within_from_first` clock.
fn has_template_outside_not<E: Event>(defs: &[Def<E>], d: usize) -> bool {
    match &defs[d] {
        Def::Leaf(_) => true,
        Def::Wait(_) | Def::At(_) | Def::Not(_) => false,
        Def::Then(a, b) | Def::And(a, b) | Def::Or(a, b) => {
            has_template_outside_not(defs, *a) || has_template_outside_not(defs, *b)
        }
        Def::Within(a, _) | Def::WithinFirst(a, _) => has_template_outside_not(defs, *a),
    }
}

/// Why part of an expression can never produce a match, if some part cannot: the expression as a
/// whole, or one side of an `or` (in both cases because of a `not` used on its own, see the module
/// docs). Registration logs it as a warning: the listener is kept, with the documented semantics.
pub(crate) fn never_matches<E: Event>(defs: &[Def<E>]) -> Option<&'static str> {
    let root = defs.len() - 1;
    if !reach(defs, root).0 {
        return Some(
            "this event expression can never match: a `not` never completes a match by itself \
             (combine it with `and`, or bound it with `within`; `within_from_first` counts from \
             the first event, and a `not` alone has none)",
        );
    }
    let dead_or_side = defs.iter().any(|d| match d {
        Def::Or(a, b) => !reach(defs, *a).0 || !reach(defs, *b).0,
        _ => false,
    });
    dead_or_side.then_some(
        "a side of an `or` in this event expression can never match: a `not` never completes a \
         match by itself (combine it with `and`, or bound it with `within`)",
    )
}

/// The templates of an expression: `(kind, key)` of every leaf, for the listener index.
pub(crate) fn leaves<E: Event>(defs: &[Def<E>]) -> Vec<(E::Kind, Option<u64>)> {
    let mut v: Vec<(E::Kind, Option<u64>)> = Vec::new();
    for d in defs {
        if let Def::Leaf(t) = d {
            if !v.iter().any(|(k, key)| *k == t.kind && *key == t.key) {
                v.push((t.kind, t.key));
            }
        }
    }
    v
}
