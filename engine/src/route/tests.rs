//! Unit tests of the route stack: processing order (R3.2), in-place dispatch, shrinking and drops.
//!
//! A leaf like its parent: imports nothing from the engine but `route` itself.

use super::*;

/// Processes `root` with `children(e)` as the events each event routes, returning the order.
/// The children are routed while the parent is still in the current slot, as in a dispatch.
fn run(root: &'static str, children: impl Fn(&str) -> Vec<&'static str>) -> Vec<&'static str> {
    let mut stack = RouteStack::default();
    let mut order = Vec::new();
    stack.push_root(root);
    while let Some(entry) = stack.take() {
        let Taken::Event(slot) = entry else {
            unreachable!("no completed markers in this test")
        };
        // SAFETY: the current slot holds the event until `drop_current`.
        let e = *unsafe { slot.as_ref() };
        order.push(e);
        let mark = stack.mark();
        for c in children(e) {
            stack.push(c);
            // Pushes never write the slot being dispatched.
            // SAFETY: still the current slot, not yet dropped.
            let still = *unsafe { slot.as_ref() };
            assert_eq!(still, e);
        }
        // SAFETY: taken above, dropped once.
        unsafe { stack.drop_current() };
        stack.seal(mark);
    }
    order
}

// R3.2: siblings in routing order, depth first, all before what was pending.
#[test]
fn r3_2_depth_first_siblings_in_routing_order() {
    let order = run("E1", |e| match e {
        "E1" => vec!["R1", "R2"],
        "R1" => vec!["R3", "R4"],
        "R3" => vec!["R5"],
        _ => vec![],
    });
    assert_eq!(order, ["E1", "R1", "R3", "R5", "R4", "R2"]);
}

// R3.4 pitfall: a plain stack would give R2 before R1.
#[test]
fn r3_4_plain_stack_pitfall_is_avoided() {
    let order = run("E", |e| match e {
        "E" => vec!["A", "B", "C"],
        _ => vec![],
    });
    assert_eq!(order, ["E", "A", "B", "C"]);
}

// R3.2: a chain (each event routes one) runs in order through the two slots alone: the `Vec`
// is never used, and consecutive events are dispatched from alternating slots.
#[test]
fn r3_2_a_chain_alternates_between_the_slots() {
    let mut stack = RouteStack::default();
    stack.push_root(0u32);
    let mut order = Vec::new();
    let mut slots = Vec::new();
    while let Some(Taken::Event(slot)) = stack.take() {
        // SAFETY: the current slot holds the event until `drop_current`.
        let e = *unsafe { slot.as_ref() };
        order.push(e);
        slots.push(slot);
        let mark = stack.mark();
        if e < 3 {
            stack.push(e + 1);
        }
        // SAFETY: taken above, dropped once.
        unsafe { stack.drop_current() };
        stack.seal_taken(mark);
        assert_eq!(stack.mark(), 0, "a chain event went onto the stack");
    }
    assert_eq!(order, [0, 1, 2, 3]);
    assert_ne!(slots[0], slots[1]);
    assert_eq!(slots[0], slots[2]);
    assert_eq!(slots[1], slots[3]);
    assert_eq!(stack.max_depth(), 1);
}

/// proptest's defaults, or under miri a few cases and no failure file (miri's isolation has no
/// file system).
fn miri_friendly() -> proptest::prelude::ProptestConfig {
    let default = proptest::prelude::ProptestConfig::default();
    if cfg!(miri) {
        proptest::prelude::ProptestConfig {
            cases: 4,
            failure_persistence: None,
            ..default
        }
    } else {
        default
    }
}

proptest::proptest! {
    // Fewer cases under miri, which runs this for the `unsafe` of `take`, `append` and the slots.
    #![proptest_config(miri_friendly())]
    // R9.1: `seal_taken`, which skips the depth update when nothing went onto the `Vec`,
    // still reports the exact deepest height, measured here after every push. Each event
    // routes `fanout[e % len]` children (a mix of chains, fans and leaves), sometimes with a
    // `completed` marker, for a bounded number of events.
    #[test]
    fn r9_1_seal_taken_keeps_the_exact_max_depth(
        fanout in proptest::collection::vec(0usize..4, 1..12),
        completed in proptest::collection::vec(proptest::bool::ANY, 1..8),
        roots in 1usize..4,
    ) {
        let mut stack = RouteStack::default();
        let mut next = 0usize;
        let mut deepest = 0usize;
        let batch = |stack: &mut RouteStack<usize>, next: &mut usize, deepest: &mut usize, n: usize| {
            for _ in 0..n {
                if *next < 400 {
                    stack.push(*next);
                    *next += 1;
                    *deepest = (*deepest).max(stack.len());
                }
            }
        };
        // The roots: one batch routed outside any dispatch (as a load hook does).
        let mark = stack.mark();
        batch(&mut stack, &mut next, &mut deepest, roots);
        stack.seal(mark);
        while let Some(entry) = stack.take() {
            let mark = stack.mark();
            match entry {
                Taken::Event(slot) => {
                    // SAFETY: the current slot holds the event until dropped or completed below.
                    let e = *unsafe { slot.as_ref() };
                    batch(&mut stack, &mut next, &mut deepest, fanout[e % fanout.len()]);
                    if completed[e % completed.len()] {
                        // SAFETY: taken above, moved out once.
                        unsafe { stack.complete_current() };
                        deepest = deepest.max(stack.len());
                    } else {
                        // SAFETY: taken above, dropped once.
                        unsafe { stack.drop_current() };
                    }
                }
                Taken::Completed(_) => {}
            }
            stack.seal_taken(mark);
        }
        proptest::prop_assert_eq!(stack.max_depth(), deepest);
    }
}

// R3.2: `chained` finds the next entry exactly when the batch is one front event, and
// `advance` moves to it as `drop_current` + `take` would, dropping each event once (miri).
#[test]
fn r3_2_advance_follows_a_chain_as_take_would() {
    let mut stack = RouteStack::default();
    stack.push("root".to_string());
    stack.push("sibling".to_string());
    stack.seal(0);
    let Some(Taken::Event(slot)) = stack.take() else {
        panic!("the root first")
    };
    // SAFETY: the current slot holds the root until `advance` drops it.
    assert_eq!(unsafe { slot.as_ref() }, "root");
    let mark = stack.mark();
    assert!(stack.chained(mark).is_none(), "nothing routed yet");
    stack.push("a".to_string());
    assert_eq!(stack.chained(mark).map(String::as_str), Some("a"));
    // SAFETY: the current slot holds an event, and `chained` found the front one.
    let slot = unsafe { stack.advance() };
    // SAFETY: `advance` made it current.
    assert_eq!(unsafe { slot.as_ref() }, "a");
    assert_eq!(stack.mark(), mark, "the height did not change");
    // Two routes: the second goes onto the `Vec`, so the batch is no chain link.
    stack.push("b".to_string());
    stack.push("c".to_string());
    assert!(stack.chained(mark).is_none());
    // SAFETY: the current event, dropped once.
    unsafe { stack.drop_current() };
    stack.seal_taken(mark);
    let mut rest = Vec::new();
    while let Some(Routed::Event(e)) = stack.pop() {
        rest.push(e);
    }
    assert_eq!(rest, ["b", "c", "sibling"]);
}

// R3.2: events pending below the mark come after the whole new batch.
#[test]
fn r3_2_pending_events_wait_for_the_new_batch() {
    let mut stack = RouteStack::default();
    stack.push("old0");
    stack.push("old1");
    stack.seal(0);
    assert_eq!(
        stack.pop().map(|r| matches!(r, Routed::Event("old0"))),
        Some(true)
    );
    let mark = stack.mark();
    stack.push("n1");
    stack.push("n2");
    stack.push("n3");
    stack.seal(mark);
    let mut got = Vec::new();
    while let Some(Routed::Event(e)) = stack.pop() {
        got.push(e);
    }
    assert_eq!(got, ["n1", "n2", "n3", "old1"]);
    // R9.1: old1 and n1..n3 were held at once.
    assert_eq!(stack.max_depth(), 4);
    assert!(stack.is_empty());
}

// R6.7: a completed marker pushed before sealing pops after every routed child.
#[test]
fn r6_7_completed_marker_pops_after_children() {
    let mut stack = RouteStack::default();
    stack.push("parent".to_string());
    stack.seal(0);
    let Some(Taken::Event(_)) = stack.take() else {
        panic!("the parent first")
    };
    let mark = stack.mark();
    stack.push("c1".to_string());
    stack.push("c2".to_string());
    // SAFETY: the parent is in the current slot, not yet dropped.
    unsafe { stack.complete_current() };
    stack.seal(mark);
    let mut got = Vec::new();
    while let Some(entry) = stack.pop() {
        got.push(match entry {
            Routed::Event(e) => e,
            Routed::Completed(e) => format!("completed:{e}"),
        });
    }
    assert_eq!(got, ["c1", "c2", "completed:parent"]);
}

// R3.4: no allocation once grown: a stack made with room for 9 entries holds storms of 9
// without growing, and one that had to grow for a deeper storm grows once, not per storm.
#[test]
fn r3_4_no_growth_in_steady_state() {
    let storms = |stack: &mut RouteStack<u32>, depth: u32, times: usize| {
        for _ in 0..times {
            let mark = stack.mark();
            for i in 0..depth {
                stack.push(i);
            }
            stack.seal(mark);
            while stack.pop().is_some() {}
        }
    };
    // Enough repeats to show growth per storm; few under miri, which runs this for `append`.
    let times = if cfg!(miri) { 10 } else { 1000 };
    let mut stack = RouteStack::with_capacity(9);
    storms(&mut stack, 9, times);
    assert_eq!(stack.entries.capacity(), 9);
    assert_eq!(stack.max_depth(), 9);
    storms(&mut stack, 40, 1);
    let grown = stack.entries.capacity();
    assert!(grown > 9);
    storms(&mut stack, 40, times);
    assert_eq!(stack.entries.capacity(), grown);
    assert_eq!(stack.max_depth(), 40);
}

// Events that own memory are dropped exactly once, wherever they are when the stack goes
// (miri checks the leaks and double drops this would otherwise hide).
#[test]
fn owned_events_are_dropped_once() {
    let mut stack = RouteStack::default();
    stack.push(vec![1u8]);
    stack.push(vec![2u8]);
    stack.push(vec![3u8]);
    stack.seal(0);
    let Some(Routed::Event(first)) = stack.pop() else {
        panic!("an event first")
    };
    assert_eq!(first, [1]);
    let Some(Taken::Event(slot)) = stack.take() else {
        panic!("a second event")
    };
    // SAFETY: the current slot holds the second event.
    assert_eq!(unsafe { slot.as_ref() }, &[2]);
    stack.push(vec![4u8]);
    // SAFETY: as above, dropped once.
    unsafe { stack.drop_current() };
    // The front ([4]) and the stack ([3]) still hold events when the stack is dropped.
    assert_eq!(stack.len(), 2);
}

// R3.4: after a storm, an empty stack gives its memory back down to what it keeps; a
// non-empty one keeps everything it holds.
#[test]
fn r3_4_an_empty_stack_shrinks_to_what_it_keeps() {
    let mut stack = RouteStack::with_capacity(4);
    let mark = stack.mark();
    for i in 0..1000 {
        stack.push(i);
    }
    stack.seal(mark);
    stack.shrink_when_empty(16);
    assert!(stack.capacity() >= 999, "not empty: nothing given back");
    let mut seen = Vec::new();
    while let Some(Routed::Event(e)) = stack.pop() {
        seen.push(e);
    }
    assert_eq!(seen, (0..1000).collect::<Vec<_>>());
    stack.shrink_when_empty(16);
    assert!(stack.capacity() <= 16 && stack.capacity() >= 1);
    // Still usable: room for the next append, and it grows again.
    let mark = stack.mark();
    for i in 0..40 {
        stack.push(i);
    }
    stack.seal(mark);
    assert_eq!(stack.len(), 40);
}

/// An event whose `Drop` panics once armed.
struct Bomb(bool);

impl Drop for Bomb {
    fn drop(&mut self) {
        if self.0 && !std::thread::panicking() {
            panic!("bomb");
        }
    }
}

// R6.8: a panic in an event's `Drop` where the stack drops it is caught and counted; the slot
// counts as empty, and the stack goes on.
#[test]
fn r6_8_a_panicking_drop_of_the_current_event_is_returned() {
    let mut stack = RouteStack::with_capacity(2);
    stack.push_root(Bomb(true));
    let Some(Taken::Event(_)) = stack.take() else {
        panic!("the root first")
    };
    stack.push(Bomb(false));
    // SAFETY: the current slot holds the root, dropped once; `chained` would find the front.
    unsafe { stack.advance() };
    assert_eq!(stack.take_drop_panics(), 1, "the root's drop panicked");
    // SAFETY: the current slot holds the front event now.
    unsafe { stack.drop_current() };
    assert!(stack.is_empty());
    assert_eq!(stack.take_drop_panics(), 0);
}
