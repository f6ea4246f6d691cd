//! Differential testing of the engine against a reference model (SPEC §2–§4, §6): generated
//! programs run on both, and every result is checked.
//!
//! * One context, every action (route, send to contexts and channels, subscribe, unsubscribe,
//!   spawn, die, panic, once and all listeners): the whole processing trace must equal the model's
//!   (R2.2, R3.2, R4.1, R4.2, R4.4, R6.2–R6.5, R6.8), and every instance's `on_die` runs exactly
//!   once.
//! * Two to four contexts, the actions whose effects do not depend on interleaving: the same
//!   listener firings as the model (R4.2 delivery sets, no loss, no duplicate), each inbox entry's
//!   processing contiguous (R2.2) and in the model's order (R3.2), and per-sender FIFO (R2.3).
//! * Two to four contexts, every action: what a context sees then depends on how the contexts
//!   interleave, so the run is checked against what does not: every instance ends exactly once
//!   (R6.8), no event is taken twice by a context and every input and send to a context arrives
//!   (R4.1, R4.2, R8.1; a recorder monitor in each context sees everything), each entry's processing
//!   is contiguous (R2.2) and per-sender FIFO holds (R2.3).
mod differential {
    pub mod engine;
    pub mod model;
    pub mod program;
}

use std::collections::{BTreeMap, HashMap, HashSet};

use differential::program::{Program, Trace};
use differential::{engine, model::Model, program};
use proptest::prelude::*;

fn quiet_injected_panics() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let default = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if info.payload().downcast_ref::<&str>() != Some(&engine::INJECTED) {
                default(info);
            }
        }));
    });
}

/// Shutdown ends the remaining instances in an order the SPEC leaves open: compare those as a set.
fn normalise(trace: Vec<Trace>) -> (Vec<Trace>, Vec<Trace>) {
    let (mut shutdown, ordered): (Vec<Trace>, Vec<Trace>) = trace
        .into_iter()
        .partition(|t| matches!(t, Trace::Die { reason, .. } if reason == "shutdown"));
    shutdown.sort();
    (ordered, shutdown)
}

fn check_single_context(prog: &Program, capacity: usize) -> Result<(), TestCaseError> {
    let want = Model::new(prog).run();
    let got = engine::run(prog, capacity, engine::Feed::BeforeStart);
    let (want_ordered, want_shutdown) = normalise(want);
    let (got_ordered, got_shutdown) = normalise(got.clone());
    prop_assert_eq!(got_ordered, want_ordered);
    prop_assert_eq!(got_shutdown, want_shutdown);
    // R6.8: on_die exactly once per instance.
    let mut deaths: HashMap<String, usize> = HashMap::new();
    for t in &got {
        if let Trace::Die { inst, .. } = t {
            *deaths.entry(inst.clone()).or_default() += 1;
        }
    }
    prop_assert!(deaths.values().all(|&n| n == 1), "{:?}", deaths);
    Ok(())
}

type Fire = (usize, String, usize, u64, u64);
type Step = (String, usize, u64);
type Block = (u64, u32, u64, Vec<Step>);

fn fires(trace: &[Trace]) -> Vec<Fire> {
    let mut v: Vec<Fire> = trace
        .iter()
        .filter_map(|t| match t {
            Trace::Fire {
                ctx,
                inst,
                listener,
                event,
                root,
                ..
            } => Some((*ctx, inst.clone(), *listener, *event, *root)),
            Trace::Die { .. } => None,
        })
        .collect();
    v.sort();
    v
}

/// One context's firings grouped by inbox entry: `(root, sender, seq, steps)` in processing order.
fn blocks(trace: &[Trace]) -> BTreeMap<usize, Vec<Block>> {
    let mut per_ctx: BTreeMap<usize, Vec<Block>> = BTreeMap::new();
    for t in trace {
        let Trace::Fire {
            ctx,
            inst,
            listener,
            event,
            root,
            sender,
            seq,
        } = t
        else {
            continue;
        };
        let blocks = per_ctx.entry(*ctx).or_default();
        match blocks.last_mut() {
            Some(b) if b.0 == *root => b.3.push((inst.clone(), *listener, *event)),
            _ => blocks.push((
                *root,
                *sender,
                *seq,
                vec![(inst.clone(), *listener, *event)],
            )),
        }
    }
    per_ctx
}

/// R2.2: each inbox entry's processing is one contiguous block (channel copies of one send share a
/// root id, but reach a context once: R4.2). R2.3: per-sender FIFO. Calls `each` on every block.
fn check_blocks(
    trace: &[Trace],
    mut each: impl FnMut(usize, &Block) -> Result<(), TestCaseError>,
) -> Result<(), TestCaseError> {
    for (ctx, blocks) in blocks(trace) {
        let mut seen_roots = HashSet::new();
        let mut last_seq: HashMap<u32, u64> = HashMap::new();
        for block in &blocks {
            let (root, sender, seq, _) = block;
            prop_assert!(
                seen_roots.insert(*root),
                "root {root:x} interleaved in ctx {ctx}"
            );
            if let Some(prev) = last_seq.insert(*sender, *seq) {
                prop_assert!(prev < *seq, "sender {sender} out of order in ctx {ctx}");
            }
            each(ctx, block)?;
        }
    }
    Ok(())
}

fn check_many_contexts(prog: &Program) -> Result<(), TestCaseError> {
    let want = Model::new(prog).run();
    let got = engine::run(prog, 64, engine::Feed::AfterLoads);
    // Delivery sets, no loss, no duplicate.
    prop_assert_eq!(fires(&got), fires(&want));
    let mut model_blocks: HashMap<(usize, u64), Vec<Step>> = HashMap::new();
    for t in &want {
        if let Trace::Fire {
            ctx,
            inst,
            listener,
            event,
            root,
            ..
        } = t
        {
            model_blocks
                .entry((*ctx, *root))
                .or_default()
                .push((inst.clone(), *listener, *event));
        }
    }
    // R2.2, R2.3, and R3.2: each block in the model's order.
    check_blocks(&got, |ctx, (root, _, _, steps)| {
        prop_assert_eq!(Some(steps), model_blocks.get(&(ctx, *root)));
        Ok(())
    })
}

/// Every action across contexts (subscriptions, spawn, die and panic included): what each context
/// sees then depends on the interleaving, so the run is checked against the guarantees that do not.
fn check_many_contexts_every_action(prog: &Program) -> Result<(), TestCaseError> {
    let run = engine::run_with(prog, 16, engine::Feed::AfterLoads, true);
    // R6.8: every instance ever created ended exactly once.
    let mut deaths: HashMap<&str, usize> = HashMap::new();
    for t in &run.trace {
        if let Trace::Die { inst, .. } = t {
            *deaths.entry(inst.as_str()).or_default() += 1;
        }
    }
    prop_assert_eq!(deaths.len(), run.born.len(), "born {:?}", run.born);
    for label in &run.born {
        prop_assert_eq!(deaths.get(label.as_str()), Some(&1), "{}", label);
    }
    // R4.1, R4.2, R3.1, R8.1: a context takes each event at most once (routes, sends and one channel
    // copy per context); every input and every send to a context arrives.
    let mut seen: HashMap<(usize, u64), usize> = HashMap::new();
    for &k in &run.seen {
        *seen.entry(k).or_default() += 1;
    }
    prop_assert!(seen.values().all(|&n| n == 1), "an event was taken twice");
    for (i, inp) in prog.input.iter().enumerate() {
        prop_assert!(
            seen.contains_key(&(inp.ctx, i as u64 + 1)),
            "input {} lost",
            i
        );
    }
    for k in &run.sent_to {
        prop_assert!(seen.contains_key(k), "send {:?} lost", k);
    }
    // R2.2, R2.3.
    check_blocks(&run.trace, |_, _| Ok(()))
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, .. ProptestConfig::default() })]

    // R2.2, R3.2, R4.1, R4.2, R4.4, R6.2-R6.5, R6.8: one context, the whole trace.
    #[test]
    fn one_context_matches_the_model(prog in program::program(1..=1, true)) {
        quiet_injected_panics();
        check_single_context(&prog, 1024)?;
    }

    // The same with an inbox exactly full at start: every self-send then finds it full and is taken
    // beyond capacity (R5.2), which must not change anything a program can observe.
    #[test]
    fn one_context_with_full_inbox_matches_the_model(prog in program::program(1..=1, true)) {
        quiet_injected_panics();
        check_single_context(&prog, prog.monitors.len() + prog.input.len())?;
    }

    // R2.2, R2.3, R3.2, R4.2: two to four contexts.
    #[test]
    fn many_contexts_keep_the_guarantees(prog in program::program(2..=4, false)) {
        quiet_injected_panics();
        check_many_contexts(&prog)?;
    }

    // R2.2, R2.3, R3.1, R4.1, R4.2, R6.8, R8.1: two to four contexts, every action.
    #[test]
    fn many_contexts_every_action_keep_the_guarantees(prog in program::program(2..=4, true)) {
        quiet_injected_panics();
        check_many_contexts_every_action(&prog)?;
    }
}
