//! Runs a generated program on the engine: one interpreting monitor whose handlers perform the
//! program's actions and write the same trace as the model.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use correlator::{
    Channel, ContextOptions, ContextRef, Correlator, DieReason, Monitor, Pattern, Scope,
};

use super::program::*;

/// The message of injected panics (the test's panic hook keeps them quiet).
pub const INJECTED: &str = "injected fault";

struct Shared {
    prog: Program,
    ctxs: Vec<ContextRef>,
    channels: Vec<Channel>,
    trace: Mutex<Vec<Trace>>,
    /// Per-context sequence numbers of sends (each written only by its context's thread).
    sent: Vec<AtomicU64>,
    /// Per-context listener firings so far (each written only by its context's thread).
    fires: Vec<AtomicU64>,
    /// Labels of every instance created, in creation order per context.
    born: Mutex<Vec<String>>,
    /// `(target context, event id)` of every `SendTo` performed.
    sent_to: Mutex<Vec<(usize, u64)>>,
}

#[derive(Clone)]
struct Interp {
    shared: Arc<Shared>,
    mon: usize,
    label: String,
}

type Cx<'a> = Scope<'a, PEv, Interp>;

impl Interp {
    fn register(cx: &mut Cx<'_>, shared: &Arc<Shared>, mon: usize) {
        for (index, l) in shared.prog.monitors[mon].listeners.iter().enumerate() {
            let handler = move |m: &mut Interp, cx: &mut Cx<'_>, ev: &PEv| m.fire(cx, index, ev);
            if l.once {
                cx.on(Pattern::kind(l.kind), handler);
            } else {
                cx.on_all(Pattern::kind(l.kind), handler);
            }
        }
    }

    fn ctx_index(&self, c: ContextRef) -> usize {
        self.shared.ctxs.iter().position(|&x| x == c).unwrap()
    }

    fn fire(&mut self, cx: &mut Cx<'_>, index: usize, ev: &PEv) {
        let c = self.ctx_index(cx.context());
        self.shared.trace.lock().unwrap().push(Trace::Fire {
            ctx: c,
            inst: self.label.clone(),
            listener: index,
            event: ev.id,
            root: ev.root,
            sender: ev.sender,
            seq: ev.seq,
        });
        let fired = self.shared.fires[c].fetch_add(1, Ordering::Relaxed) + 1;
        if ev.ttl == 0 || fired >= self.shared.prog.fuel as u64 {
            return;
        }
        let shared = self.shared.clone();
        let actions = &shared.prog.monitors[self.mon].listeners[index].actions;
        for (ai, a) in actions.iter().enumerate() {
            let id = child_id(ev.id, index, ai, label_salt(&self.label));
            let child = |kind: u32, sender: u32, seq: u64, own_root: bool| PEv {
                kind,
                ttl: ev.ttl - 1,
                id,
                root: if own_root { id } else { ev.root },
                sender,
                seq,
            };
            match a {
                Action::Route(k) => cx.route(child(*k, ev.sender, ev.seq, false)),
                Action::SendTo(to, k) => {
                    let seq = shared.sent[c].fetch_add(1, Ordering::Relaxed);
                    cx.send_to(shared.ctxs[*to], child(*k, c as u32, seq, true))
                        .expect("contexts are running");
                    shared.sent_to.lock().unwrap().push((*to, id));
                }
                Action::Send(ch, k) => {
                    let seq = shared.sent[c].fetch_add(1, Ordering::Relaxed);
                    cx.send(
                        shared.channels[*ch as usize],
                        child(*k, c as u32, seq, true),
                    );
                }
                Action::Subscribe(ch) => cx.subscribe(shared.channels[*ch as usize]),
                Action::Unsubscribe(ch) => cx.unsubscribe(shared.channels[*ch as usize]),
                Action::Spawn => {
                    let mut copy = self.clone();
                    copy.label = format!("{}>{id:x}", self.label);
                    let s = shared.clone();
                    let mon = self.mon;
                    cx.spawn(&copy, move |m: &mut Interp, cx: &mut Cx<'_>| {
                        s.born.lock().unwrap().push(m.label.clone());
                        Interp::register(cx, &s, mon)
                    });
                }
                Action::Die => cx.die(),
                Action::Panic => std::panic::panic_any(INJECTED),
            }
        }
    }
}

impl Monitor<PEv> for Interp {
    fn on_load(&mut self, cx: &mut Cx<'_>) {
        let shared = self.shared.clone();
        shared.born.lock().unwrap().push(self.label.clone());
        for &ch in &shared.prog.monitors[self.mon].subs {
            cx.subscribe(shared.channels[ch as usize]);
        }
        Interp::register(cx, &shared, self.mon);
    }

    fn on_die(&mut self, reason: &DieReason, cx: &mut Cx<'_>) {
        let reason = match reason {
            DieReason::Died => "died",
            DieReason::NoListeners => "no-listeners",
            DieReason::Panicked(_) => "panicked",
            DieReason::Shutdown => "shutdown",
            _ => "other",
        };
        let c = self.ctx_index(cx.context());
        self.shared.trace.lock().unwrap().push(Trace::Die {
            ctx: c,
            inst: self.label.clone(),
            reason: reason.to_string(),
        });
    }
}

/// How input reaches the engine.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Feed {
    /// Loads and input are queued before `start()` (deterministic with one context).
    BeforeStart,
    /// Start, wait until every load hook ran (so that the subscriptions they make are in place,
    /// as in the model), then send the input while the contexts run.
    AfterLoads,
}

/// Records every event a context takes, whatever the program's instances do (it never ends).
struct Recorder {
    ctx: usize,
    seen: Arc<Mutex<Vec<(usize, u64)>>>,
}

impl Monitor<PEv> for Recorder {
    fn on_load(&mut self, cx: &mut Scope<'_, PEv, Self>) {
        for kind in 0..KINDS {
            cx.on_all(Pattern::kind(kind), |r: &mut Recorder, _, e: &PEv| {
                r.seen.lock().unwrap().push((r.ctx, e.id));
            });
        }
    }
}

/// What a run left behind.
pub struct Run {
    /// The trace of the program's instances.
    pub trace: Vec<Trace>,
    /// Every instance created.
    pub born: Vec<String>,
    /// Every `SendTo` performed: `(target, event id)`.
    pub sent_to: Vec<(usize, u64)>,
    /// With a recorder: every `(context, event id)` taken (routed events included).
    pub seen: Vec<(usize, u64)>,
}

/// Runs `prog` with inbox capacity `capacity` and returns the trace.
pub fn run(prog: &Program, capacity: usize, feed: Feed) -> Vec<Trace> {
    run_with(prog, capacity, feed, false).trace
}

/// Runs `prog`; with `record`, a [`Recorder`] is loaded into every context before the program's
/// monitors.
pub fn run_with(prog: &Program, capacity: usize, feed: Feed, record: bool) -> Run {
    let c = Correlator::<PEv>::builder()
        .inbox_capacity(capacity)
        .external_time()
        .build()
        .unwrap();
    let mut ctxs = vec![c.main()];
    for i in 1..prog.contexts {
        ctxs.push(
            c.create_context(ContextOptions::new(format!("c{i}")))
                .unwrap(),
        );
    }
    let channels = (0..CHANNELS)
        .map(|i| c.channel(&format!("ch{i}")).unwrap())
        .collect();
    let shared = Arc::new(Shared {
        prog: prog.clone(),
        ctxs: ctxs.clone(),
        channels,
        trace: Mutex::new(Vec::new()),
        sent: (0..prog.contexts).map(|_| AtomicU64::new(0)).collect(),
        fires: (0..prog.contexts).map(|_| AtomicU64::new(0)).collect(),
        born: Mutex::new(Vec::new()),
        sent_to: Mutex::new(Vec::new()),
    });
    let seen = Arc::new(Mutex::new(Vec::new()));
    if record {
        for (i, &ctx) in ctxs.iter().enumerate() {
            c.load_in(
                ctx,
                Recorder {
                    ctx: i,
                    seen: seen.clone(),
                },
            )
            .unwrap();
        }
    }
    let loads = prog.monitors.len() + if record { prog.contexts } else { 0 };
    for (m, spec) in prog.monitors.iter().enumerate() {
        c.load_in(
            ctxs[spec.ctx],
            Interp {
                shared: shared.clone(),
                mon: m,
                label: format!("m{m}"),
            },
        )
        .unwrap();
    }
    let handles = [c.input(), c.input()];
    let mut seqs = [0u64; 2];
    if feed == Feed::AfterLoads {
        c.start();
        let loaded = |s: &correlator::Status| {
            s.contexts.iter().map(|c| c.received).sum::<u64>() == loads as u64
                && s.totals.inbox_len == 0
        };
        while !loaded(&c.status()) {
            std::thread::yield_now();
        }
    }
    for (i, inp) in prog.input.iter().enumerate() {
        let seq = seqs[inp.sender];
        seqs[inp.sender] += 1;
        handles[inp.sender]
            .send_to(
                ctxs[inp.ctx],
                PEv {
                    kind: inp.kind,
                    ttl: TTL,
                    id: i as u64 + 1,
                    root: i as u64 + 1,
                    sender: EXTERNAL + inp.sender as u32,
                    seq,
                },
            )
            .unwrap();
    }
    c.start();
    c.shutdown().unwrap();
    Run {
        trace: take(&shared.trace),
        born: take(&shared.born),
        sent_to: take(&shared.sent_to),
        seen: take(&seen),
    }
}

fn take<T>(m: &Mutex<Vec<T>>) -> Vec<T> {
    std::mem::take(&mut *m.lock().unwrap())
}
