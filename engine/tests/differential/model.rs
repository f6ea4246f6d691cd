//! The reference model: a single-threaded interpreter of SPEC §2–§4 and §6, written to be obviously
//! correct by reading it. A queue per context, a route stack of batches, listeners in one list per
//! context in registration order. No index, no concurrency, no cleverness.

use std::collections::{HashMap, VecDeque};

use super::program::*;

struct Instance {
    label: String,
    mon: usize,
    alive: bool,
    subs: HashMap<u32, u32>,
}

struct Listener {
    inst: usize,
    index: usize,
    kind: u32,
    once: bool,
    alive: bool,
}

enum Entry {
    Load(usize),
    Event(PEv),
}

#[derive(Default)]
struct Context {
    queue: VecDeque<Entry>,
    instances: Vec<Instance>,
    listeners: Vec<Listener>,
    subs: HashMap<u32, u32>,
    /// Sequence numbers of this context as a sender.
    sent: u64,
    /// Listener firings so far (see `Program::fuel`).
    fires: usize,
}

pub struct Model<'p> {
    prog: &'p Program,
    ctxs: Vec<Context>,
    pub trace: Vec<Trace>,
}

enum Op {
    Subscribe(u32),
    Unsubscribe(u32),
    Spawn(String),
}

impl<'p> Model<'p> {
    /// Loads the monitors and queues the input, as the engine run does before `start()`.
    pub fn new(prog: &'p Program) -> Self {
        let mut ctxs: Vec<Context> = (0..prog.contexts).map(|_| Context::default()).collect();
        for (m, spec) in prog.monitors.iter().enumerate() {
            ctxs[spec.ctx].queue.push_back(Entry::Load(m));
        }
        let mut handle_seq = [0u64; 2];
        for (i, inp) in prog.input.iter().enumerate() {
            let seq = handle_seq[inp.sender];
            handle_seq[inp.sender] += 1;
            ctxs[inp.ctx].queue.push_back(Entry::Event(PEv {
                kind: inp.kind,
                ttl: TTL,
                id: i as u64 + 1,
                root: i as u64 + 1,
                sender: EXTERNAL + inp.sender as u32,
                seq,
            }));
        }
        Model {
            prog,
            ctxs,
            trace: Vec::new(),
        }
    }

    /// Processes everything, taking one entry per context in turn; then ends every instance.
    pub fn run(mut self) -> Vec<Trace> {
        // Every load hook runs before any input is taken: with one context the loads are simply first
        // in its queue; with several, the engine run waits for them (`Feed::AfterLoads`).
        for c in 0..self.ctxs.len() {
            while matches!(self.ctxs[c].queue.front(), Some(Entry::Load(_))) {
                let entry = self.ctxs[c].queue.pop_front().expect("front checked");
                self.process(c, entry);
            }
        }
        loop {
            let mut any = false;
            for c in 0..self.ctxs.len() {
                if let Some(entry) = self.ctxs[c].queue.pop_front() {
                    any = true;
                    self.process(c, entry);
                }
            }
            if !any {
                break;
            }
        }
        for c in 0..self.ctxs.len() {
            for i in 0..self.ctxs[c].instances.len() {
                if self.ctxs[c].instances[i].alive {
                    self.end(c, i, "shutdown");
                }
            }
        }
        self.trace
    }

    fn process(&mut self, c: usize, entry: Entry) {
        match entry {
            Entry::Load(m) => {
                let label = format!("m{m}");
                let i = self.new_instance(c, m, label);
                for ch in self.prog.monitors[m].subs.clone() {
                    self.subscribe(c, i, ch);
                }
                self.after_handler(c, i, false, false);
            }
            Entry::Event(e) => {
                // The route stack: a stack of batches; each batch keeps routing order.
                let mut stack: Vec<VecDeque<PEv>> = vec![VecDeque::from([e])];
                while let Some(batch) = stack.last_mut() {
                    let Some(ev) = batch.pop_front() else {
                        stack.pop();
                        continue;
                    };
                    let routed = self.dispatch(c, &ev);
                    if !routed.is_empty() {
                        stack.push(routed.into());
                    }
                }
            }
        }
    }

    fn new_instance(&mut self, c: usize, m: usize, label: String) -> usize {
        let ctx = &mut self.ctxs[c];
        ctx.instances.push(Instance {
            label,
            mon: m,
            alive: true,
            subs: HashMap::new(),
        });
        let i = ctx.instances.len() - 1;
        for (index, l) in self.prog.monitors[m].listeners.iter().enumerate() {
            ctx.listeners.push(Listener {
                inst: i,
                index,
                kind: l.kind,
                once: l.once,
                alive: true,
            });
        }
        i
    }

    /// Fires the listeners matching `ev` (those registered before it started, in registration
    /// order); returns what they routed, in routing order.
    fn dispatch(&mut self, c: usize, ev: &PEv) -> Vec<PEv> {
        let mut routed = Vec::new();
        let n = self.ctxs[c].listeners.len();
        for li in 0..n {
            let l = &self.ctxs[c].listeners[li];
            if !l.alive || l.kind != ev.kind || !self.ctxs[c].instances[l.inst].alive {
                continue;
            }
            let (inst, index) = (l.inst, l.index);
            if l.once {
                self.ctxs[c].listeners[li].alive = false;
            }
            let mon = self.ctxs[c].instances[inst].mon;
            let label = self.ctxs[c].instances[inst].label.clone();
            self.trace.push(Trace::Fire {
                ctx: c,
                inst: self.ctxs[c].instances[inst].label.clone(),
                listener: index,
                event: ev.id,
                root: ev.root,
                sender: ev.sender,
                seq: ev.seq,
            });
            let mut ops = Vec::new();
            let (mut die, mut panicked) = (false, false);
            self.ctxs[c].fires += 1;
            if ev.ttl > 0 && self.ctxs[c].fires < self.prog.fuel {
                let actions = &self.prog.monitors[mon].listeners[index].actions;
                for (ai, a) in actions.iter().enumerate() {
                    let child = |kind: u32, sender: u32, seq: u64, own_root: bool| {
                        let id = child_id(ev.id, index, ai, label_salt(&label));
                        PEv {
                            kind,
                            ttl: ev.ttl - 1,
                            id,
                            root: if own_root { id } else { ev.root },
                            sender,
                            seq,
                        }
                    };
                    match a {
                        Action::Route(k) => routed.push(child(*k, ev.sender, ev.seq, false)),
                        Action::SendTo(to, k) => {
                            let seq = self.next_seq(c);
                            let e = child(*k, c as u32, seq, true);
                            self.ctxs[*to].queue.push_back(Entry::Event(e));
                        }
                        Action::Send(ch, k) => {
                            let seq = self.next_seq(c);
                            let e = child(*k, c as u32, seq, true);
                            for to in 0..self.ctxs.len() {
                                if self.ctxs[to].subs.get(ch).copied().unwrap_or(0) > 0 {
                                    self.ctxs[to].queue.push_back(Entry::Event(e.clone()));
                                }
                            }
                        }
                        Action::Subscribe(ch) => ops.push(Op::Subscribe(*ch)),
                        Action::Unsubscribe(ch) => ops.push(Op::Unsubscribe(*ch)),
                        Action::Spawn => {
                            let id = child_id(ev.id, index, ai, label_salt(&label));
                            ops.push(Op::Spawn(format!("{label}>{id:x}")));
                        }
                        Action::Die => die = true,
                        Action::Panic => {
                            panicked = true;
                            break;
                        }
                    }
                }
            }
            // What the handler asked for takes effect when it returns.
            for op in ops {
                match op {
                    Op::Subscribe(ch) => self.subscribe(c, inst, ch),
                    Op::Unsubscribe(ch) => self.unsubscribe(c, inst, ch),
                    Op::Spawn(label) => {
                        let i = self.new_instance(c, mon, label);
                        self.after_handler(c, i, false, false);
                    }
                }
            }
            self.after_handler(c, inst, die, panicked);
        }
        routed
    }

    fn next_seq(&mut self, c: usize) -> u64 {
        let s = self.ctxs[c].sent;
        self.ctxs[c].sent += 1;
        s
    }

    fn after_handler(&mut self, c: usize, i: usize, die: bool, panicked: bool) {
        if !self.ctxs[c].instances[i].alive {
            return;
        }
        if panicked {
            self.end(c, i, "panicked");
        } else if die {
            self.end(c, i, "died");
        } else if !self.ctxs[c]
            .listeners
            .iter()
            .any(|l| l.inst == i && l.alive)
        {
            self.end(c, i, "no-listeners");
        }
    }

    fn subscribe(&mut self, c: usize, i: usize, ch: u32) {
        let ctx = &mut self.ctxs[c];
        if !ctx.instances[i].alive {
            return;
        }
        *ctx.instances[i].subs.entry(ch).or_insert(0) += 1;
        *ctx.subs.entry(ch).or_insert(0) += 1;
    }

    fn unsubscribe(&mut self, c: usize, i: usize, ch: u32) {
        let ctx = &mut self.ctxs[c];
        let held = ctx.instances[i].subs.entry(ch).or_insert(0);
        if *held > 0 {
            *held -= 1;
            *ctx.subs.entry(ch).or_insert(0) -= 1;
        }
    }

    fn end(&mut self, c: usize, i: usize, reason: &str) {
        let ctx = &mut self.ctxs[c];
        ctx.instances[i].alive = false;
        for l in ctx.listeners.iter_mut().filter(|l| l.inst == i) {
            l.alive = false;
        }
        for (ch, n) in std::mem::take(&mut ctx.instances[i].subs) {
            *ctx.subs.entry(ch).or_insert(0) -= n;
        }
        self.trace.push(Trace::Die {
            ctx: c,
            inst: ctx.instances[i].label.clone(),
            reason: reason.to_string(),
        });
    }
}
