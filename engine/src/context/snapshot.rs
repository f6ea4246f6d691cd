//! A context's own state in a checkpoint, saved and restored on its thread (SPEC R11.10 -
//! R11.12).
//!
//! # Saving
//! A checkpoint's first entry (`cut`) is taken like any other, so the context is between
//! entries: its route stack is empty (R2.2), no handler runs, no `not` of a match is open. It
//! writes a [`ContextPart`]: its logical clock and the counters that order what comes next (the
//! clock stimulus number, the timer sequence, the next listener handle and emit id), every live instance
//! (its monitor's persistent name, its state through serde, its channel subscriptions, its live
//! listeners in registration order: each one's handle, mode, and for an expression its matches
//! in progress with their events, through the correlator's `EventCodec`) and every pending
//! timer of a live listener with its due time, sequence and handle; a persistent stream query's
//! windows and a join's (`query::saved`). A pool's dispatcher is not saved (its factory is a
//! closure; the recovering program loads it again before `recover`), a per-key instance is,
//! with its key (the instance's record names its dispatcher and key). Beside the part it hands
//! back how many events it took from each input handle, which the coordinator names. An
//! instance of a monitor that is not persistent, or a stream query not built `persistent`, fail
//! the save with a typed error: nothing is dropped quietly.
//!
//! # Restoring
//! Before the context takes anything else (`Correlator::recover` puts `Control::Restore` first
//! in every inbox and then starts), it sets its clock and counters back, then creates each saved
//! instance from its state (a per-key one taken back by its member's dispatcher, through its
//! `DispatcherHook`) and runs its `on_restore`, whose registrations are handed the saved
//! handles in order (`Effects::restore_handles`). What `on_restore` asked for is checked against
//! the saved instance, listener by listener (only registrations; the same count, mode and kind;
//! for an expression the same shape), and nothing is applied until every instance passed. The
//! registrations are then applied in handle order across all instances, so the listener lists
//! hold them in their old order (R6.4); each expression listener's saved matches replace the
//! fresh one its registration made, a query's or join's saved windows replace its empty ones,
//! and the saved timers replace those the registrations set.
//! Last, it decodes its channel states, which `cut` takes once every context has restored.
//!
//! Owns the part's form and the two walks. May import the leaves, `checkpoint`, `entry`, `expr`,
//! `listener`, `query` and `record`.

use serde::{Deserialize, Serialize};

use super::timer_queue::TimerQueue;
use super::{panic_message, Context};
use crate::checkpoint::CheckpointError;
use crate::entry::{InputsTaken, Mode, Op, Persist, Spec, NO_INSTANCE};
use crate::event::Event;
use crate::expr::{ExprPart, Held};
use crate::listener::Body;
use crate::query::saved::Unsaved;
use crate::query::windows::WindowsHeld;
use crate::record::Origin;
use crate::time::Time;

/// A context's part of a checkpoint.
#[derive(Serialize, Deserialize)]
struct ContextPart {
    now: u64,
    stimulus: u64,
    timer_seq: u64,
    next_handle: u64,
    /// The number of the context's next `EmitId` (R11.14).
    emit_ids: u64,
    instances: Vec<InstancePart>,
    /// `(due, sequence, listener handle)`, earliest first.
    timers: Vec<(u64, u64, u64)>,
}

#[derive(Serialize, Deserialize)]
struct InstancePart {
    /// The monitor's persistent name.
    monitor: String,
    /// Its key, for a pool's per-key instance (restored through the member's dispatcher).
    key: Option<u64>,
    state: Vec<u8>,
    /// `(channel name, count)`, by name.
    subscriptions: Vec<(String, u32)>,
    /// Live listeners in registration order.
    listeners: Vec<ListenerPart>,
}

#[derive(Serialize, Deserialize)]
struct ListenerPart {
    handle: u64,
    mode: u8,
    body: BodyPart,
}

#[derive(Serialize, Deserialize)]
enum BodyPart {
    Template,
    Expr(ExprPart),
    /// A persistent stream query's windows, or a join's (`query::saved`).
    Query {
        join: bool,
        bytes: Vec<u8>,
    },
}

fn mode_code(mode: Mode) -> u8 {
    match mode {
        Mode::Once => 0,
        Mode::All => 1,
        Mode::Unmatched => 2,
        Mode::Completed => 3,
    }
}

fn mode_name(code: u8) -> &'static str {
    match code {
        0 => "`on` or `when`",
        1 => "`on_all` or `when_all`",
        2 => "`unmatched`",
        3 => "`completed`",
        _ => "unknown",
    }
}

impl<E: Event> Context<E> {
    /// Counts `e`, an event taken from input handle `n`, and notes its position in its source
    /// (for the checkpoint's input positions, R11.9).
    #[inline]
    pub(super) fn count_input(&mut self, n: u32, e: &E) {
        let (index, last) = &mut self.input_index;
        let at = if last.0 == n {
            last.1
        } else {
            let taken = &mut self.input_taken;
            let at = *index.entry(n).or_insert_with(|| {
                taken.push((n, 0, None));
                (taken.len() - 1) as u32
            });
            *last = (n, at);
            at
        };
        let taken = &mut self.input_taken[at as usize];
        taken.1 += 1;
        if let Some(p) = e.position() {
            taken.2 = Some(p);
        }
    }

    /// Its state and the events it took from each input handle, for a checkpoint.
    pub(super) fn save_part(
        &mut self,
        persist: &Persist<E>,
    ) -> Result<(Vec<u8>, InputsTaken), CheckpointError> {
        let context = self.shared.name.clone();
        // The codec and the monitors' `Serialize` are user code: a panic fails the save.
        let saved = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            self.encode_part(persist, &context)
        }));
        let part = match saved {
            Ok(part) => part?,
            Err(p) => {
                return Err(CheckpointError::Encode {
                    what: format!("context `{context}`"),
                    reason: format!("a panic: {}", panic_message(&*p)),
                })
            }
        };
        let bytes = postcard::to_allocvec(&part).map_err(|e| CheckpointError::Encode {
            what: format!("context `{context}`"),
            reason: e.to_string(),
        })?;
        Ok((bytes, self.input_taken.clone()))
    }

    fn encode_part(
        &mut self,
        persist: &Persist<E>,
        context: &str,
    ) -> Result<ContextPart, CheckpointError> {
        debug_assert!(self.fx.routes.is_empty() && self.deferred.is_empty());
        let mut encode = |e: &E, out: &mut Vec<u8>| persist.codec.encode(e, out);
        let channels = &self.fx.links.shared().channels;
        let table = &self.table;
        let mut instances = Vec::with_capacity(self.instances.live());
        let hooks = &self.fx.dispatchers;
        for (id, inst, inst_state) in self.instances.iter_mut() {
            // A pool's dispatcher is configuration: the recovering program loads it again.
            if hooks.iter().any(|h| h.instance == id) {
                continue;
            }
            let Some(ty) = persist.types.get(&inst_state.type_id()) else {
                return Err(CheckpointError::NotPersistent {
                    context: context.to_owned(),
                    monitor: inst_state.monitor_name(),
                });
            };
            let state = (ty.save)(inst_state).map_err(|reason| CheckpointError::Encode {
                what: format!("the state of an instance of `{}`", ty.name),
                reason,
            })?;
            let mut listeners = Vec::with_capacity(inst.live_listeners as usize);
            for &(handle, slot) in &inst.listeners {
                let Some(l) = table.live_slot(handle, slot).and_then(|s| table.slot(s)) else {
                    continue;
                };
                let body = match &l.body {
                    Body::Template { .. } => BodyPart::Template,
                    Body::Expr { expr, .. } => BodyPart::Expr(expr.save(&mut encode)),
                    Body::Query(q) => match q.run.save(&mut encode) {
                        Ok(bytes) => BodyPart::Query {
                            join: q.right.is_some(),
                            bytes,
                        },
                        Err(Unsaved::NotPersistent) => {
                            return Err(CheckpointError::Unsupported {
                                context: context.to_owned(),
                                what: "a stream query not built `persistent` (`Query::persistent` \
                                       saves its windows)",
                            })
                        }
                        Err(Unsaved::Encode(reason)) => {
                            return Err(CheckpointError::Encode {
                                what: format!(
                                    "the windows of a stream query of an instance of `{}`",
                                    ty.name
                                ),
                                reason,
                            })
                        }
                    },
                };
                listeners.push(ListenerPart {
                    handle,
                    mode: mode_code(l.mode),
                    body,
                });
            }
            let mut subscriptions: Vec<(String, u32)> = inst
                .subscriptions
                .iter()
                .flat_map(|m| m.iter())
                .map(|(&ch, &n)| (channels.name(ch), n))
                .collect();
            subscriptions.sort();
            instances.push(InstancePart {
                monitor: ty.name.to_owned(),
                key: (inst.owner != NO_INSTANCE).then_some(inst.key),
                state,
                subscriptions,
                listeners,
            });
        }
        let mut timers: Vec<(u64, u64, u64)> = self
            .timers
            .entries()
            .filter(|&&(_, _, h, s)| table.live_slot(h, s).is_some())
            .map(|&(due, seq, h, _)| (due.as_nanos(), seq, h))
            .collect();
        timers.sort_unstable();
        Ok(ContextPart {
            now: self.fx.now.as_nanos(),
            stimulus: self.stimulus,
            timer_seq: self.timer_seq,
            next_handle: self.fx.next_handle,
            emit_ids: self.fx.emit_ids,
            instances,
            timers,
        })
    }

    /// Restores its state from `bytes`; returns the channel states `channel` decoded (the
    /// entries other contexts had sent it and it had not taken at the cut, in the order it took
    /// them then), for `cut` to take once every context has restored. User code runs here (the
    /// monitors' `Deserialize` and `on_restore`, the codec): a panic fails the restore with an
    /// error.
    pub(super) fn restore_part(
        &mut self,
        persist: &Persist<E>,
        bytes: &[u8],
        channel: Vec<(u32, Vec<u8>)>,
    ) -> Result<Vec<(Origin, E)>, CheckpointError> {
        let restored = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            self.restore_in(persist, bytes, channel)
        }));
        restored.unwrap_or_else(|p| {
            Err(CheckpointError::Decode {
                what: format!("context `{}`", self.shared.name),
                reason: format!("a panic: {}", panic_message(&*p)),
            })
        })
    }

    fn restore_in(
        &mut self,
        persist: &Persist<E>,
        bytes: &[u8],
        channel: Vec<(u32, Vec<u8>)>,
    ) -> Result<Vec<(Origin, E)>, CheckpointError> {
        let context = self.shared.name.clone();
        // A pool's dispatchers are loaded again before `recover`; nothing else may be.
        let dispatchers = self.fx.dispatchers.iter();
        if self.instances.live() > dispatchers.filter(|h| h.instance != NO_INSTANCE).count() {
            return Err(CheckpointError::NotNow {
                why: "a context to restore already holds instances: call `recover` before \
                      loading monitors (other than a pool's `load_per_key`) or feeding events",
            });
        }
        let part: ContextPart =
            postcard::from_bytes(bytes).map_err(|e| CheckpointError::Decode {
                what: format!("context `{context}`"),
                reason: e.to_string(),
            })?;
        self.fx.now = Time::from_nanos(part.now);
        self.stimulus = part.stimulus;
        // Never below what the pools' dispatchers loaded before `recover` took.
        self.fx.next_handle = part.next_handle.max(self.fx.next_handle);
        self.fx.emit_ids = part.emit_ids;
        let mut plan = Restoring::default();
        for ip in part.instances {
            self.restore_instance(persist, ip, &mut plan)?;
        }
        self.put_back(persist, plan, part.timers, part.timer_seq)?;
        let mut resume = Vec::with_capacity(channel.len());
        for (from, bytes) in channel {
            let e = persist
                .codec
                .decode(&bytes)
                .map_err(|reason| CheckpointError::Decode {
                    what: format!("an event in flight to context `{context}`"),
                    reason,
                })?;
            resume.push((Origin::context(from), e));
        }
        Ok(resume)
    }

    /// Creates the instance `ip` saved and runs its `on_restore`; checks what it asked for
    /// against the saved listeners and adds it to `plan`, not applied yet.
    fn restore_instance(
        &mut self,
        persist: &Persist<E>,
        ip: InstancePart,
        plan: &mut Restoring<E>,
    ) -> Result<(), CheckpointError> {
        let context = self.shared.name.clone();
        let mismatch = |why: String| CheckpointError::Mismatch {
            context: context.clone(),
            monitor: ip.monitor.clone(),
            why,
        };
        let Some((&tid, ty)) = persist
            .names
            .get(ip.monitor.as_str())
            .and_then(|t| Some((t, persist.types.get(t)?)))
        else {
            return Err(CheckpointError::UnknownMonitor { name: ip.monitor });
        };
        let mut new = (ty.restore)(&ip.state).map_err(|reason| CheckpointError::Decode {
            what: format!("the state of an instance of `{}`", ip.monitor),
            reason,
        })?;
        if let Some(key) = ip.key {
            let Some(h) = self.fx.dispatchers.iter().position(|h| h.monitor == tid) else {
                return Err(mismatch(
                    "it is a pool's per-key instance, and no `load_per_key` of its monitor was \
                     loaded in this context before `recover`"
                        .to_owned(),
                ));
            };
            let hook = &mut self.fx.dispatchers[h];
            // The dispatcher's, as if it had created it: its key live there, the instance
            // counted and forgotten through the hook as the instances it creates are.
            if hook.instance != NO_INSTANCE {
                hook.keys.get_or_insert_default(key);
                new.owner = Some((h as u32, key));
            }
        }
        self.fx.restore_handles = ip.listeners.iter().rev().map(|l| l.handle).collect();
        let sent = self.fx.stats.sent;
        let (instance, result, _) = self.start_instance(new);
        self.fx.restore_handles.clear();
        let ops = std::mem::take(&mut self.fx.ops);
        if let Err(p) = result {
            return Err(mismatch(format!(
                "`on_restore` panicked: {}",
                panic_message(&*p)
            )));
        }
        if !self.fx.routes.is_empty() || self.fx.stats.sent != sent {
            return Err(mismatch(
                "`on_restore` routed or sent an event; it may only register listeners".to_owned(),
            ));
        }
        self.pair(ops, ip.listeners, &ip.monitor, plan)
            .map_err(mismatch)?;
        for (channel, n) in ip.subscriptions {
            plan.subscriptions.push((instance, channel, n));
        }
        Ok(())
    }

    /// Pairs `on_restore`'s operations `ops` with the saved listeners, in order (R11.11): the
    /// same count, each with the saved mode and kind, none with a handle that a listener loaded
    /// before `recover` has. What differs is returned as the reason.
    fn pair(
        &self,
        ops: Vec<Op<E>>,
        saved: Vec<ListenerPart>,
        monitor: &str,
        plan: &mut Restoring<E>,
    ) -> Result<(), String> {
        let count = saved.len();
        let mut saved = saved.into_iter();
        let mut registered = 0;
        for op in ops {
            let Op::Listen { mode, spec, .. } = &op else {
                return Err(
                    "`on_restore` spawned, subscribed, quit a listener or died; it may \
                            only register listeners"
                        .to_owned(),
                );
            };
            registered += 1;
            let Some(lp) = saved.next() else {
                continue;
            };
            if self.table.slot_of(lp.handle).is_some() {
                return Err(format!(
                    "its listener {registered} had handle {}, which a listener loaded before \
                     `recover` has: load the pools' monitors in the order the checkpointed \
                     program did",
                    lp.handle
                ));
            }
            if mode_code(*mode) != lp.mode {
                return Err(format!(
                    "its listener {registered} is registered with {}, but was saved as {}",
                    mode_name(mode_code(*mode)),
                    mode_name(lp.mode)
                ));
            }
            match (spec, &lp.body) {
                (Spec::Template(..), BodyPart::Template) => {}
                (Spec::Expr(..), BodyPart::Expr(_)) => {
                    plan.bodies.push((lp.handle, lp.body, monitor.to_owned()));
                }
                (Spec::Query(q), &BodyPart::Query { join, .. }) if q.1.is_some() == join => {
                    plan.bodies.push((lp.handle, lp.body, monitor.to_owned()));
                }
                _ => {
                    return Err(format!(
                        "its listener {registered} is not of the kind saved (a template, an \
                         expression, a stream query or join)"
                    ))
                }
            }
            plan.listens.push((lp.handle, op));
        }
        if registered != count {
            return Err(format!(
                "`on_restore` registered {registered} listeners, but the instance had {count}"
            ));
        }
        Ok(())
    }

    /// Applies what every instance's `on_restore` asked for, in handle order across the
    /// instances (so the lists hold the listeners as they did, R6.4), their subscriptions, each
    /// expression listener's saved matches, and the saved timers in place of those the
    /// registrations set.
    fn put_back(
        &mut self,
        persist: &Persist<E>,
        plan: Restoring<E>,
        timers: Vec<(u64, u64, u64)>,
        timer_seq: u64,
    ) -> Result<(), CheckpointError> {
        let Restoring {
            mut listens,
            bodies,
            subscriptions,
        } = plan;
        listens.sort_unstable_by_key(|&(h, _)| h);
        for (_, op) in listens {
            self.apply_op(op);
        }
        for (instance, name, n) in subscriptions {
            let ch = self.fx.links.shared().channels.intern(&name).map_err(|e| {
                CheckpointError::Decode {
                    what: format!("the subscription to channel `{name}`"),
                    reason: e.to_string(),
                }
            })?;
            for _ in 0..n {
                self.subscribe(instance, ch);
            }
        }
        let decode = |b: &[u8]| persist.codec.decode(b);
        for (handle, saved, monitor) in bodies {
            let Some(l) = self
                .table
                .slot_of(handle)
                .and_then(|s| self.table.slot_mut(s))
            else {
                continue;
            };
            // What the status counts of it (its partial matches or its windows' values), before
            // and after.
            let counted = match (&mut l.body, saved) {
                (Body::Expr { expr, .. }, BodyPart::Expr(part)) => {
                    let before = expr.held();
                    expr.restore(part, &decode)
                        .map(|()| Counted::Matches(before, expr.held()))
                }
                (Body::Query(q), BodyPart::Query { bytes, .. }) => {
                    let before = q.run.held();
                    let restored = q.run.restore(&bytes, &decode);
                    restored.map(|()| Counted::Windows(before, q.run.held()))
                }
                _ => continue,
            };
            match counted.map_err(|why| CheckpointError::Mismatch {
                context: self.shared.name.clone(),
                monitor,
                why,
            })? {
                Counted::Matches(before, after) => self.table.note_held(before, after),
                Counted::Windows(before, after) => self.table.note_windows(before, after),
            }
        }
        self.timers = TimerQueue::default();
        self.deferred.clear();
        for (due, seq, handle) in timers {
            if let Some(slot) = self.table.slot_of(handle) {
                self.timers.push((Time::from_nanos(due), seq, handle, slot));
            }
        }
        self.timer_seq = timer_seq;
        self.end_listenerless();
        Ok(())
    }
}

/// What a restored expression or query listener holds, before its restore and after: what the
/// listener table counts for the status.
enum Counted {
    Matches(Held, Held),
    Windows(WindowsHeld, WindowsHeld),
}

/// What the instances' `on_restore`s asked for, checked, before it is applied.
struct Restoring<E: Event> {
    /// Registrations, with the saved handle each got.
    listens: Vec<(u64, Op<E>)>,
    /// What the engine saved of each expression, query or join listener (its matches, its
    /// windows): handle, saved body, monitor name.
    bodies: Vec<(u64, BodyPart, String)>,
    /// `(instance, channel name, count)`.
    subscriptions: Vec<(u32, String, u32)>,
}

impl<E: Event> Default for Restoring<E> {
    fn default() -> Self {
        Self {
            listens: Vec::new(),
            bodies: Vec::new(),
            subscriptions: Vec::new(),
        }
    }
}
