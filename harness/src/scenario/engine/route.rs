//! `route/dispatch`, `route/tree`, `listeners/indexed`: one context, self-perpetuating chains of
//! routed events (no producer thread, no inbox traffic once started).
//!
//! Each chain event carries the sequence number the monitor expects next; a handler that sees
//! another number (a lost, duplicated or reordered route) fails the run. `route/tree` checks the
//! full SPEC R3.2 order: every node carries its pre-order position, and depth-first processing
//! with siblings in routing order is exactly pre-order.

use super::{kick_off, Cx, EngineRun, Seen, KEYED_KIND};
use crate::record::Better;
use crate::scenario::{
    stream_figures, timed_window, wait_for, Ev, Family, Outcome, RunCtx, Scenario, Shared,
    PUBLISH_EVERY, STALL_TIMEOUT, STOP_CHECK_EVERY,
};
use correlator::{Monitor, Pattern, WaitStrategy, DEFAULT_INBOX_CAPACITY};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

/// Registers `route/dispatch` and `route/tree`.
pub fn register_route(v: &mut Vec<Scenario>) {
    v.push(Scenario::new(
        "route/dispatch",
        "one context: each event routes the next (depth 1, long chain), one listener",
        1,
        Family::Engine,
        dispatch,
    ));
    v.push(Scenario::new(
        "route/tree",
        format!("one context: route storms of depth {TREE_DEPTH}, fan-out {TREE_FANOUT}, order checked against pre-order"),
        1,
        Family::Engine,
        tree,
    ));
}

/// Registers `listeners/indexed`.
pub fn register_listeners(v: &mut Vec<Scenario>) {
    v.push(Scenario::new(
        "listeners/indexed",
        format!("one context, {MANY} listeners keyed on distinct values, each event hits one (@{MANY}: the same one; -rotating: each in turn; -other-kinds: {MANY} listeners on other kinds): ns/event vs 1 listener"),
        1,
        Family::Engine,
        indexed,
    ));
}

/// Depth of a `route/tree` storm (the root is depth 0).
pub const TREE_DEPTH: u32 = 5;
/// Fan-out of a `route/tree` storm.
pub const TREE_FANOUT: u32 = 4;
/// Listeners in the large case of `listeners/indexed`.
pub const MANY: u32 = 10_000;

/// Which listener a chain's next event hits.
#[derive(Clone, Copy, Debug)]
enum Next {
    /// Always this one.
    Fixed(u32),
    /// The one after the current one, modulo the number of listeners.
    Rotate,
}

/// How a chain's listeners are laid out.
#[derive(Clone, Copy, Debug)]
enum Layout {
    /// `n` listeners on [`KEYED_KIND`] with keys `0..n` (the keyed index, R6.9).
    Keys(u32, Next),
    /// One listener on kind 0 and `n` listeners on kinds `1..=n` that never fire.
    OtherKinds(u32),
}

/// A chain: each event hits one listener, which routes the next event.
struct Chain {
    sh: Arc<Shared>,
    seen: Arc<Seen>,
    n: u64,
    layout: Layout,
}

impl Chain {
    #[inline]
    fn step(&mut self, cx: &mut Cx<'_, Chain>, id: u32, e: &Ev) {
        let got = match self.layout {
            Layout::Keys(..) => e.aux,
            Layout::OtherKinds(_) => u64::from(e.kind),
        };
        if e.seq != self.n || got != u64::from(id) {
            self.sh.fail(format!(
                "chain broken: listener {id} got event kind {} key {} seq {}, expected seq {}",
                e.kind, e.aux, e.seq, self.n
            ));
            return;
        }
        self.n += 1;
        if self.n % PUBLISH_EVERY == 0 && periodic(&self.sh, &self.seen, self.n) {
            return;
        }
        let pick = |count: u32, next: Next| match next {
            Next::Fixed(t) => t,
            Next::Rotate => (id + 1) % count,
        };
        let (kind, aux) = match self.layout {
            Layout::Keys(count, next) => (KEYED_KIND, u64::from(pick(count, next))),
            Layout::OtherKinds(_) => (0, 0),
        };
        cx.route(Ev {
            kind,
            seq: self.n,
            t_ns: 0,
            aux,
        });
    }
}

impl Monitor<Ev> for Chain {
    fn on_load(&mut self, cx: &mut Cx<'_, Self>) {
        let step = |id: u32| move |m: &mut Chain, cx: &mut Cx<'_, Chain>, e: &Ev| m.step(cx, id, e);
        match self.layout {
            Layout::Keys(count, _) => {
                for k in 0..count {
                    cx.on_all(Pattern::kind(KEYED_KIND).key(u64::from(k)), step(k));
                }
            }
            Layout::OtherKinds(idle) => {
                cx.on_all(Pattern::kind(0), step(0));
                for k in 1..=idle {
                    cx.on_all(
                        Pattern::kind(k),
                        |m: &mut Chain, _cx: &mut Cx<'_, Chain>, e: &Ev| {
                            m.sh.fail(format!("idle listener fired for kind {}", e.kind));
                        },
                    );
                }
            }
        }
    }
}

/// `route/dispatch`'s monitor: one listener on kind 0, each event routes the next. Per event it
/// does what its twin `route/crossbeam-channel` does per event (check the sequence number, count,
/// test the count for the periodic work) and nothing else, so that the two are compared on the
/// cost of moving the event; the periodic work (publishing the count, sampling the core, the stop
/// check) is out of line. [`Chain`] serves the layouts of `listeners/indexed`.
struct Relay {
    sh: Arc<Shared>,
    seen: Arc<Seen>,
    n: u64,
}

impl Relay {
    #[inline]
    fn step(&mut self, cx: &mut Cx<'_, Relay>, e: &Ev) {
        if e.seq != self.n || e.kind != 0 {
            self.broken(e);
            return;
        }
        self.n += 1;
        if self.n % PUBLISH_EVERY == 0 && periodic(&self.sh, &self.seen, self.n) {
            return;
        }
        cx.route(Ev {
            kind: 0,
            seq: self.n,
            t_ns: 0,
            aux: 0,
        });
    }

    #[cold]
    #[inline(never)]
    fn broken(&self, e: &Ev) {
        self.sh.fail(format!(
            "chain broken: got event kind {} seq {}, expected kind 0 seq {}",
            e.kind, e.seq, self.n
        ));
    }
}

// `periodic` checks the stop flag only on counts it sees: multiples of PUBLISH_EVERY.
const _: () = assert!(STOP_CHECK_EVERY % PUBLISH_EVERY == 0);

/// A chain's work every [`PUBLISH_EVERY`] events (call when `n`, the events counted so far, is a
/// multiple of it): publishes the count; every [`STOP_CHECK_EVERY`] events also samples the core
/// and checks the stop flag. Returns whether the chain ends here. Out of line: the per-event path
/// of both chain monitors is the count test alone.
#[cold]
#[inline(never)]
fn periodic(sh: &Shared, seen: &Seen, n: u64) -> bool {
    sh.publish(n, false);
    if n % STOP_CHECK_EVERY != 0 {
        return false;
    }
    seen.mark();
    if sh.stopped() {
        sh.publish(n, true);
        sh.done.store(true, Ordering::Release);
        return true;
    }
    false
}

impl Monitor<Ev> for Relay {
    fn on_load(&mut self, cx: &mut Cx<'_, Self>) {
        cx.on_all(
            Pattern::kind(0),
            |m: &mut Relay, cx: &mut Cx<'_, Relay>, e: &Ev| m.step(cx, e),
        );
    }
}

/// The first event of a chain with this layout.
fn first_event(layout: Layout) -> Ev {
    let first = |next: Next| match next {
        Next::Fixed(t) => t,
        Next::Rotate => 0,
    };
    match layout {
        Layout::Keys(_, next) => Ev {
            kind: KEYED_KIND,
            aux: u64::from(first(next)),
            ..Ev::default()
        },
        Layout::OtherKinds(_) => Ev::default(),
    }
}

/// Runs one chain of `monitor` (made from the run's shared state and core samples), started by
/// `first`; returns the window and the events processed in all.
fn run_chain<M: Monitor<Ev>>(
    ctx: &RunCtx,
    out: &mut Outcome,
    role: &str,
    monitor: impl FnOnce(Arc<Shared>, Arc<Seen>) -> M,
    first: Ev,
) -> Option<(crate::scenario::Window, u64)> {
    let seen = Arc::new(Seen::default());
    let (run, ()) = EngineRun::new(ctx, DEFAULT_INBOX_CAPACITY, WaitStrategy::BusySpin).start(
        out,
        |c, _, sh| {
            c.load(monitor(sh.clone(), seen.clone()))?;
            // Queued before start, after the monitor's instance: the first event of the chain.
            Ok(kick_off(c, c.main(), first)?)
        },
    )?;
    let (c, sh) = (&run.c, &run.sh);
    // Loading thousands of listeners takes a while: the warm-up starts once the chain runs.
    wait_for(STALL_TIMEOUT, Duration::from_millis(1), || {
        sh.count.load(Ordering::Acquire) > 0 || sh.failure().is_some()
    });
    let w = timed_window(ctx, sh);
    let ended = wait_for(STALL_TIMEOUT, Duration::from_millis(1), || {
        sh.done.load(Ordering::Acquire) || sh.failure().is_some()
    });
    let status = run.finish(out);
    out.placed(seen.placement(role, ctx.map.core_for(0)));
    if !ended {
        out.fail("the chain did not stop within the stall timeout after the stop flag");
    }
    let n = sh.count.load(Ordering::Acquire);
    if let Some(s) = status {
        let processed = s.context(c.main()).map_or(0, |m| m.processed);
        out.check(processed == n, || {
            format!("{role}: the engine processed {processed} events, the chain counted {n}")
        });
    }
    match w {
        Ok(w) => Some((w, n)),
        Err(e) => {
            out.fail(e);
            None
        }
    }
}

fn dispatch(ctx: &RunCtx) -> Outcome {
    let mut out = Outcome::default();
    out.param("wait_strategy", "busy-spin");
    let relay = |sh, seen| Relay { sh, seen, n: 0 };
    if let Some((w, n)) = run_chain(ctx, &mut out, "context main", relay, Ev::default()) {
        out.param("events_total", n);
        stream_figures(&mut out, w, None);
    }
    out
}

/// Pre-order sizes: `sizes[d]` is the number of nodes of a subtree rooted at depth `d`.
fn subtree_sizes(depth: u32, fanout: u32) -> Vec<u64> {
    let mut sizes = vec![1u64; depth as usize + 1];
    for d in (0..depth as usize).rev() {
        sizes[d] = 1 + u64::from(fanout) * sizes[d + 1];
    }
    sizes
}

struct Tree {
    sh: Arc<Shared>,
    seen: Arc<Seen>,
    sizes: Vec<u64>,
    fanout: u32,
    pos: u64,
    total: u64,
    trees: u64,
}

impl Monitor<Ev> for Tree {
    fn on_load(&mut self, cx: &mut Cx<'_, Self>) {
        cx.on_all(Pattern::kind(0), |m: &mut Tree, cx: &mut Cx<'_, Tree>, e: &Ev| {
            // seq = pre-order position in the current tree, aux = depth, t_ns = tree number.
            if e.seq != m.pos || e.t_ns != m.trees {
                m.sh.fail(format!(
                    "route order broken (R3.2): tree {} expected pre-order position {}, got tree {} position {}",
                    m.trees, m.pos, e.t_ns, e.seq
                ));
                return;
            }
            m.pos += 1;
            m.total += 1;
            m.sh.publish(m.total, false);
            let depth = e.aux as usize;
            if depth + 1 < m.sizes.len() {
                let child = m.sizes[depth + 1];
                for j in 0..u64::from(m.fanout) {
                    cx.route(Ev {
                        kind: 0,
                        seq: e.seq + 1 + j * child,
                        t_ns: e.t_ns,
                        aux: depth as u64 + 1,
                    });
                }
            }
            if m.pos == m.sizes[0] {
                // The last node in pre-order is a leaf: the tree is complete.
                m.trees += 1;
                m.pos = 0;
                m.seen.mark();
                if m.sh.stopped() {
                    m.sh.publish(m.total, true);
                    m.sh.done.store(true, Ordering::Release);
                } else {
                    cx.route(Ev {
                        kind: 0,
                        seq: 0,
                        t_ns: m.trees,
                        aux: 0,
                    });
                }
            }
        });
    }
}

fn tree(ctx: &RunCtx) -> Outcome {
    let mut out = Outcome::default();
    let sizes = subtree_sizes(TREE_DEPTH, TREE_FANOUT);
    out.param("depth", TREE_DEPTH);
    out.param("fanout", TREE_FANOUT);
    out.param("events_per_tree", sizes[0]);
    let seen = Arc::new(Seen::default());
    let started = EngineRun::new(ctx, DEFAULT_INBOX_CAPACITY, WaitStrategy::BusySpin).start(
        &mut out,
        |c, _, sh| {
            c.load(Tree {
                sh: sh.clone(),
                seen: seen.clone(),
                sizes,
                fanout: TREE_FANOUT,
                pos: 0,
                total: 0,
                trees: 0,
            })?;
            Ok(kick_off(c, c.main(), Ev::default())?)
        },
    );
    let Some((run, ())) = started else {
        return out;
    };
    let (c, sh) = (&run.c, &run.sh);
    let w = timed_window(ctx, sh);
    let ended = wait_for(STALL_TIMEOUT, Duration::from_millis(1), || {
        sh.done.load(Ordering::Acquire) || sh.failure().is_some()
    });
    let status = run.finish(&mut out);
    out.placed(seen.placement("context main", ctx.map.core_for(0)));
    out.check(ended, || {
        "the storm did not stop after the stop flag".into()
    });
    let n = sh.count.load(Ordering::Acquire);
    out.param("events_total", n);
    match w {
        Ok(w) => stream_figures(&mut out, w, None),
        Err(e) => out.fail(e),
    }
    if let Some(s) = status {
        if let Some(m) = s.context(c.main()) {
            out.check(m.processed == n, || {
                format!(
                    "the engine processed {} events, the trees hold {n}",
                    m.processed
                )
            });
            out.value(
                "max_route_depth",
                "entries",
                m.max_route_depth as f64,
                Better::Lower,
            );
        }
    }
    out
}

fn indexed(ctx: &RunCtx) -> Outcome {
    let mut out = Outcome::default();
    out.param("listeners", MANY);
    let cases: [(&str, Layout); 4] = [
        ("ns_per_event@1", Layout::Keys(1, Next::Fixed(0))),
        (
            "ns_per_event@10000",
            Layout::Keys(MANY, Next::Fixed(MANY / 2)),
        ),
        (
            "ns_per_event@10000-rotating",
            Layout::Keys(MANY, Next::Rotate),
        ),
        ("ns_per_event@10000-other-kinds", Layout::OtherKinds(MANY)),
    ];
    let mut ns = Vec::new();
    for (metric, layout) in cases {
        let role = format!("context main ({metric})");
        let chain = |sh, seen| Chain {
            sh,
            seen,
            n: 0,
            layout,
        };
        match run_chain(ctx, &mut out, &role, chain, first_event(layout)) {
            Some((w, _)) if w.events > 0 => {
                let v = w.secs * 1e9 / w.events as f64;
                out.value(metric, "ns", v, Better::Lower);
                ns.push(v);
            }
            _ => return out,
        }
    }
    out.value("cost_ratio@10000_vs_1", "x", ns[1] / ns[0], Better::Lower);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn subtree_sizes_are_preorder_sizes() {
        assert_eq!(subtree_sizes(2, 3), vec![13, 4, 1]);
        assert_eq!(subtree_sizes(0, 5), vec![1]);
    }
}
