//! Dispatch: the route loop ([`Context::drain_routes`]) and the firing of listeners, with the
//! chain fast path (SPEC §2, §3, §6).
//!
//! Owns the per-event path: taking routed events, looking up their listeners through the listener
//! table's cursor, running handlers under `catch_unwind`. May import the leaves and `entry`,
//! `listener`, `route`, `expr`; instance bookkeeping after a handler is `instances`'s.

use super::Panicked;
use super::{event_code, Context};
use crate::entry::{Effects, Handler, Mode, NO_GATE};
use crate::event::Event;
use crate::expr::{Fired, StepOut, Stimulus};
use crate::listener::{Body, Cursor, Lead, Solo};
use crate::route::{RouteStack, Taken};
use crate::state::State;
use crate::time::Time;
use std::panic::{self, AssertUnwindSafe};

/// What the route loop does with an event after [`Context::dispatch`].
pub(super) enum Dispatched<K> {
    /// Drop it.
    Done,
    /// Keep it as a `completed` marker: listeners wait for its completion (R6.7).
    Completed,
    /// Its kind's solo listener ran it and left nothing to do: follow the chain it may have
    /// routed ([`Context::run_chain`]), then drop the last event.
    Chain(Solo, K),
}

impl<E: Event> Context<E> {
    /// Drains the route stack completely (R3.2). Records what it dispatches in `in_flight`, for
    /// [`recover`](Self::recover).
    pub(super) fn drain_routes(&mut self) {
        while let Some(entry) = self.fx.routes.take() {
            let mark = self.fx.routes.mark();
            match entry {
                Taken::Event(slot) => {
                    self.in_flight = mark << 1 | 1;
                    // SAFETY: the current slot holds the event until `complete_current`,
                    // `drop_current` or `run_chain` below (`e` is not used after those), and
                    // nothing writes it meanwhile (see `RouteStack`).
                    let e = unsafe { slot.as_ref() };
                    self.fx.stats.processed += 1;
                    // Listeners registered from here on get handles from `first_new` up.
                    let first_new = self.fx.next_handle;
                    match self.dispatch(e) {
                        Dispatched::Completed => {
                            self.completed_since.push(first_new);
                            self.in_flight = mark << 1;
                            // SAFETY: the event taken above, not yet dropped or completed.
                            unsafe { self.fx.routes.complete_current() };
                        }
                        Dispatched::Done => {
                            // SAFETY: as above.
                            unsafe { self.fx.routes.drop_current() };
                        }
                        Dispatched::Chain(solo, kind) => {
                            // `e` is not used again: the chain drops its event and takes the next.
                            self.run_chain(solo, kind, mark);
                            // SAFETY: the current slot holds the chain's last event (`e` itself
                            // if the chain stopped at once), not yet dropped or completed.
                            unsafe { self.fx.routes.drop_current() };
                        }
                    }
                }
                Taken::Completed(e) => {
                    self.in_flight = mark << 1;
                    let first_new = self.completed_since.pop();
                    debug_assert!(first_new.is_some(), "a completed marker without its stamp");
                    self.dispatch_completed(&e, first_new.unwrap_or(0));
                    if std::mem::needs_drop::<E>() {
                        self.contain(move || drop(e), Panicked::Event, "dropping an event");
                    }
                }
            }
            // From the drop above to the next `take`, nothing can panic that is not contained
            // where it runs (the drop, compaction), so `in_flight` need not say "no event" yet.
            self.fx.routes.seal_taken(mark);
            self.compact_listeners();
        }
        // The last event is gone: no event is in flight outside the route loop.
        self.in_flight = 0;
    }

    /// Runs an inbox entry's event to completion (R2.2): dispatches it, then drains what it routed.
    ///
    /// The stack is empty between entries, so the event is a batch of one and would be the next
    /// entry [`drain_routes`](Self::drain_routes) takes. For an event type without drop glue (plain
    /// data, the common case) it is dispatched right here, from where the inbox left it, and the
    /// route loop runs only if it routed something: the loop's take, its bookkeeping for recovery
    /// and its second look at an empty stack are not paid per inbox event, and the pop-to-handler
    /// path of a cross-context hop (`pingpong/engine`'s critical path) is shorter by as much.
    ///
    /// Recovery needs nothing recorded for it: `in_flight` is 0 between entries ("no event in the
    /// current slot, batch from height 0"), which is the truth here. If the event's `kind()` or
    /// `key()` panics, unwinding discards `e` (no drop glue: nothing runs), and
    /// [`recover`](Self::recover) counts the event dropped and seals what was routed, as it does
    /// for an event taken by the route loop. An event type with drop glue takes the route loop's
    /// path, where its drop is contained.
    #[inline(always)]
    pub(super) fn run_root(&mut self, e: E) {
        if std::mem::needs_drop::<E>() {
            self.fx.routes.push_root(e);
            self.drain_routes();
            return;
        }
        debug_assert!(
            self.fx.routes.is_empty(),
            "an inbox entry while routes are pending"
        );
        debug_assert_eq!(
            self.in_flight, 0,
            "an inbox entry while an event is in flight"
        );
        self.fx.routes.note_root();
        self.fx.stats.processed += 1;
        let first_new = self.fx.next_handle;
        match self.dispatch(&e) {
            // A chain it started is in the front slot: the route loop follows it.
            Dispatched::Done | Dispatched::Chain(..) => {}
            Dispatched::Completed => {
                self.completed_since.push(first_new);
                self.fx.routes.push_completed(e);
            }
        }
        // What it routed, sealed from height 0 as after the route loop's first take.
        self.fx.routes.seal_taken(0);
        self.compact_listeners();
        if !self.fx.routes.is_empty() {
            self.drain_routes();
        }
    }

    /// Fires every ordinary listener matching `e`, or the `unmatched` ones if none matched, and
    /// says what the route loop does next with `e` (see [`Dispatched`]).
    #[inline(always)]
    pub(super) fn dispatch(&mut self, e: &E) -> Dispatched<E::Kind> {
        let Some(view) = self.table.view_of(&e.kind()) else {
            return Dispatched::Done;
        };
        // Read before the listeners run: a `completed` listener they register does not fire for
        // this event anyway (R6.5), and one they end is skipped by the completed dispatch.
        let done = if view.has_completed {
            Dispatched::Completed
        } else {
            Dispatched::Done
        };
        let b = view.bucket as usize;
        // Lists with nothing to merge need no cursor (see `Lead`).
        let matched = match view.lead {
            Lead::Solo(solo) => {
                // One unkeyed listener that fires on every event of the kind (the usual case).
                let clean = self.fire_solo(solo, e);
                if clean && !view.has_completed {
                    return Dispatched::Chain(solo, e.kind());
                }
                return done;
            }
            Lead::Alone(slot) => self.try_fire(slot, e),
            Lead::Keyed(first) => match self.fire_keyed(b, first, e) {
                Some(matched) => matched,
                None => self.fire_all(b, e),
            },
            Lead::Cursor => self.fire_all(b, e),
        };
        if !matched && view.has_unmatched {
            self.dispatch_unmatched(b, e);
        }
        done
    }

    /// Offers `e` to the ordinary listeners of bucket `b` through a cursor; whether any matched.
    /// Out of line: the lists that need a cursor are the less usual ones.
    #[inline(never)]
    fn fire_all(&mut self, b: usize, e: &E) -> bool {
        // The key matters only where some listener of the kind is keyed.
        let all = self.table.cursor(b, Mode::All, e, u64::MAX);
        self.fire_cursor(all, e)
    }

    /// Offers `e` to the ordinary listeners of a bucket whose [`Lead`] is `Keyed`: `first` (the
    /// unkeyed one registered before every keyed one, if any), then those listed under the
    /// event's key, copied before `first` runs, so that a listener its handler registers (a
    /// pool's gate creating the key's instance) does not see `e` (R6.5): the cursor's order and
    /// cut, without the cursor. Whether any matched; `None` for a list the cursor must walk.
    #[inline(always)]
    fn fire_keyed(&mut self, b: usize, first: Option<u32>, e: &E) -> Option<bool> {
        let (keyed, n) = self.table.keyed_walk(b, e.key())?;
        let mut matched = false;
        if let Some(first) = first {
            if n > 0 {
                // The key's first slot, cold at a large key set, arrives while the gate runs.
                self.table.prefetch_slot(keyed[0]);
            }
            matched |= self.try_fire(first, e);
        }
        for &slot in keyed.iter().take(n) {
            matched |= self.try_fire(slot, e);
        }
        Some(matched)
    }

    /// The `unmatched` listeners of bucket `b` (off the hot path: most events match).
    #[inline(never)]
    pub(super) fn dispatch_unmatched(&mut self, b: usize, e: &E) {
        let unmatched = self.table.cursor(b, Mode::Unmatched, e, u64::MAX);
        self.fire_cursor(unmatched, e);
    }

    /// The `completed` listeners of `e` registered before it started: those with a handle below
    /// `first_new` (R6.5, R6.7).
    #[inline(never)]
    pub(super) fn dispatch_completed(&mut self, e: &E, first_new: u64) {
        if let Some(b) = self.table.bucket_of(&e.kind()) {
            let completed = self.table.cursor(b, Mode::Completed, e, first_new);
            self.fire_cursor(completed, e);
        }
    }

    /// Offers `e` to the ordinary listeners (`on`, `on_all`, expressions) of `instance` alone, in
    /// registration order, then drops it: how a pool's `load_per_key_delivering` hands a key's
    /// first event to the instance it creates, once the instance's initialiser's operations
    /// have taken effect. The listeners are those registered when it is called: a listener one
    /// of them registers does not see `e` (R6.5). Only listeners listed under `e`'s kind and key
    /// (or under its kind, unkeyed) are offered it, with their filters, as a dispatch would.
    /// Nothing is counted: `e` is an event already being processed, not a new one.
    #[cold]
    #[inline(never)]
    pub(super) fn deliver_to_instance(&mut self, instance: u32, e: E) {
        // The event's own code (`kind()`, `key()`) may panic: that unwinds to `recover`, which
        // drops the event being processed, as in any dispatch.
        if let Some(b) = self.table.bucket_of(&e.kind()) {
            // A copy: the handlers' operations may prune the instance's list as they go.
            let handles = self
                .instances
                .record(instance)
                .map(|inst| inst.listeners.clone())
                .unwrap_or_default();
            for (handle, slot) in handles {
                let Some(slot) = self.table.live_slot(handle, slot) else {
                    continue;
                };
                let offered = self.table.slot(slot).is_some_and(|l| {
                    l.alive
                        && matches!(l.mode, Mode::All | Mode::Once)
                        && l.listed_under(b as u32, &e)
                });
                if offered {
                    self.try_fire_other(slot, &e);
                }
            }
        }
        if std::mem::needs_drop::<E>() {
            self.contain(move || drop(e), Panicked::Event, "dropping an event");
        }
    }

    /// Offers `e` to the listeners `cursor` walks (the listener table's order: R6.4, R6.5);
    /// returns whether any matched.
    #[inline(always)]
    pub(super) fn fire_cursor(&mut self, mut cursor: Cursor, e: &E) -> bool {
        let mut matched = false;
        while let Some(slot) = cursor.next(&self.table) {
            matched |= self.try_fire(slot, e);
        }
        self.table.walked(&cursor);
        matched
    }

    /// Fires the listener in `slot` if it is alive and matches; returns whether it matched.
    ///
    /// Inlined for a [`simple`](crate::listener::ListenerSlot::simple) listener (alive, `on_all`,
    /// no filter: it fires) and for a pool dispatcher's gate whose key has a live instance (the
    /// dispatcher would have nothing to do: its handler does not run, and the listener matched
    /// as it would have); everything else is [`try_fire_other`](Self::try_fire_other).
    #[inline(always)]
    pub(super) fn try_fire(&mut self, slot: u32, e: &E) -> bool {
        match self.table.slot(slot) {
            Some(l) if l.simple => self.fire_template(slot, e),
            // A pool dispatcher's gate, and the key's instance is alive (see `passes_gate`).
            Some(l) if l.gate != NO_GATE && l.alive && self.passes_gate(l.gate, e) => true,
            _ => self.try_fire_other(slot, e),
        }
    }

    /// [`try_fire`](Self::try_fire) for a listener that is dead, fires once, has filters, is an
    /// expression, or is a gate whose key has no live instance.
    #[inline(never)]
    pub(super) fn try_fire_other(&mut self, slot: u32, e: &E) -> bool {
        let Some(l) = self.table.slot(slot) else {
            return false;
        };
        if !l.alive {
            return false;
        }
        match &l.body {
            Body::Template { template, .. } => {
                // User code (a filter): a panic ends the listener's instance, as in a handler.
                match panic::catch_unwind(AssertUnwindSafe(|| template.matches_listed(e))) {
                    Ok(true) => {}
                    Ok(false) => return false,
                    Err(payload) => {
                        let instance = l.instance;
                        self.after_handler(instance, Err(payload));
                        return false;
                    }
                }
            }
            Body::Expr { .. } => return self.fire_expr(slot, Stimulus::Event(e)),
            Body::Query(_) => return self.fire_query(slot, Some(e), self.fx.now),
        }
        if l.mode == Mode::Once {
            let instance = l.instance;
            return self.fire_once(slot, instance, e);
        }
        self.fire_template(slot, e)
    }

    /// Whether `e`'s key is in the key set of dispatcher hook `gate` (see
    /// [`DispatcherHook`](crate::entry::DispatcherHook)): then the dispatcher's handler would
    /// find the key's instance alive and return. A `key()` that panics here unwinds as it
    /// would have from the handler's own call ([`event_code`]): the event is dropped (R6.8).
    #[inline(always)]
    fn passes_gate(&self, gate: u32, e: &E) -> bool {
        let Some(hook) = self.fx.dispatchers.get(gate as usize) else {
            return false;
        };
        event_code(|| e.key()).is_some_and(|key| hook.keys.contains_key(key))
    }

    /// Runs the handler of the template listener in `slot`, an `on_all` listener that matched.
    /// Returns true (it matched).
    #[inline(always)]
    pub(super) fn fire_template(&mut self, slot: u32, e: &E) -> bool {
        let Some(l) = self.table.slot_mut(slot) else {
            return true;
        };
        let Body::Template { handler, .. } = &mut l.body else {
            return true;
        };
        let instance = l.instance;
        debug_assert!(
            self.instances.listening(instance),
            "a live listener's instance counts none"
        );
        if let Some(state) = self.instances.state_mut(instance) {
            let result = Self::run_handler(&mut self.fx, handler, state, instance, e);
            self.after_handler_with(instance, result, true);
        }
        true
    }

    /// Runs the handler of a bucket's [`Solo`] listener: the listener through the table's
    /// unchecked [`solo_handler`](crate::listener::ListenerTable::solo_handler), its instance (named by the `Solo`,
    /// so loaded beside the listener rather than after it) with the usual check. Returns whether
    /// the handler ran and left nothing to do afterwards (see [`run_chain`](Self::run_chain)).
    #[inline(always)]
    pub(super) fn fire_solo(&mut self, solo: Solo, e: &E) -> bool {
        let handler = self.table.solo_handler(solo);
        debug_assert!(
            self.instances.listening(solo.instance),
            "a live listener's instance counts none"
        );
        let Some(state) = self.instances.state_mut(solo.instance) else {
            return false;
        };
        let result = Self::run_handler(&mut self.fx, handler, state, solo.instance, e);
        self.after_handler_with(solo.instance, result, true)
    }

    /// Runs the rest of a chain: while the event just dispatched by `solo`'s listener (the current
    /// one) routed exactly one event (the front slot; nothing above `mark`, the height after the
    /// take) and it is of the same `kind`, drops the current event, takes that one and runs the
    /// listener on it. Returns when the chain ends or leaves the fast case, with the current slot
    /// holding the last event dispatched and that event's after-handler work done.
    ///
    /// This is exactly what the route loop would do for each link (R3.2: the front event is the
    /// next entry; the height and so the max depth do not change), minus what cannot have changed:
    /// the loop enters only after a dispatch that left nothing to do (no operation, no panic, no
    /// instance to check, no `completed` listener of the kind), and a handler changes listeners
    /// and instances only through operations, so while each link also leaves nothing to do the
    /// kind's view, the listener, its instance and the compaction state stay as they were. A link
    /// that leaves work (an operation or a panic) gets the usual after-handler treatment and ends
    /// the chain; the loop then seals and compacts as after any event.
    #[inline(always)]
    pub(super) fn run_chain(&mut self, solo: Solo, kind: E::Kind, mark: usize) {
        // Most dispatches are no chain link (an inbox event routing nothing, a leaf): decide that
        // before looking anything up.
        if !Self::links(&self.fx.routes, mark, kind) {
            return;
        }
        let Self {
            table,
            instances,
            fx,
            ..
        } = self;
        let handler = table.solo_handler(solo);
        debug_assert!(
            instances.listening(solo.instance),
            "a live listener's instance counts none"
        );
        let Some(state) = instances.state_mut(solo.instance) else {
            return;
        };
        // Once per chain: every link runs the same listener of the same instance, and nothing a
        // link does without leaving work (which ends the chain) changes `current`.
        fx.current = solo.instance;
        let result = loop {
            // SAFETY: the current slot holds the event dispatched last, which nothing uses any
            // more, and `chained` found the front event.
            let slot = unsafe { fx.routes.advance() };
            // SAFETY: `advance` made the front event current; it stays in place until the next
            // `advance` or the caller's `drop_current`.
            let e = unsafe { slot.as_ref() };
            fx.stats.processed += 1;
            let result = Self::call_handler(fx, handler, state, e);
            if result.is_err() || !fx.ops.is_empty() {
                break result;
            }
            if !Self::links(&fx.routes, mark, kind) {
                return;
            }
        };
        self.after_handler_with(solo.instance, result, true);
    }

    /// Whether the current event routed exactly one event since `mark`, of `kind`: the next link
    /// of a chain.
    #[inline(always)]
    pub(super) fn links(routes: &RouteStack<E>, mark: usize, kind: E::Kind) -> bool {
        routes.chained(mark).is_some_and(|next| next.kind() == kind)
    }

    /// Calls `handler` (a template listener's, alive) on `e` with `state`, its instance
    /// `instance`'s, catching a panic.
    #[inline(always)]
    pub(super) fn run_handler(
        fx: &mut Effects<E>,
        handler: &mut Handler<E>,
        state: &mut State,
        instance: u32,
        e: &E,
    ) -> std::thread::Result<()> {
        fx.current = instance;
        Self::call_handler(fx, handler, state, e)
    }

    /// [`run_handler`](Self::run_handler) for a caller that has already set `fx.current` to
    /// the instance's id: [`run_chain`](Self::run_chain), which sets it once for all its links.
    /// (The listener is alive, so its instance is live and counts it: the handler's operations,
    /// applied after it returns, are what may change that.)
    #[inline(always)]
    pub(super) fn call_handler(
        fx: &mut Effects<E>,
        handler: &mut Handler<E>,
        state: &mut State,
        e: &E,
    ) -> std::thread::Result<()> {
        panic::catch_unwind(AssertUnwindSafe(|| handler(state, fx, e)))
    }

    /// [`try_fire`](Self::try_fire) for a matching `on` listener (fires once, then ends).
    #[inline(never)]
    pub(super) fn fire_once(&mut self, slot: u32, instance: u32, e: &E) -> bool {
        // It ends before it runs, so its instance's count is right when the handler returns.
        self.table.kill(slot);
        self.listener_ended(instance);
        let Some(l) = self.table.slot_mut(slot) else {
            return true;
        };
        let Body::Template { handler, .. } = &mut l.body else {
            return true;
        };
        let Some(state) = self.instances.state_mut(instance) else {
            return true;
        };
        self.fx.current = instance;
        let fx = &mut self.fx;
        let result = panic::catch_unwind(AssertUnwindSafe(|| handler(state, fx, e)));
        self.after_handler(instance, result);
        true
    }

    /// Logs that the repeating expression listener in `slot` ends because its expression can no
    /// longer match (see "Listening" in the `expr` module docs): nothing the user wrote asked for
    /// it, and its instance ends with it if it was the last listener.
    #[cold]
    #[inline(never)]
    fn log_repeating_end(&self, slot: u32, instance: u32, handle: u64) {
        let has_within = match self.table.slot(slot).map(|l| &l.body) {
            Some(Body::Expr { expr, .. }) => expr.has_within(),
            _ => false,
        };
        let monitor = self
            .instances
            .state(instance)
            .map_or("?", State::monitor_name);
        let hint = if has_within {
            "; its `within` bound counts from the moment the match started (registration, for the \
             first), so a quiet spell longer than the bound ends it: use `within_from_first(d)` for \
             a bound counted from the first event"
        } else {
            ""
        };
        tracing::info!(
            context = self.fx.me.id(),
            monitor,
            instance,
            listener = handle,
            "a repeating listener (when_all) of monitor {monitor} ended: its event expression can \
             no longer match{hint}. The instance ends too if this was its last listener"
        );
    }

    /// Runs the query listener in `slot` (R7.9 - R7.12): takes `e` if its templates match it, or,
    /// without one, brings its windows to `due` (its timer fired); its handler gets the rows (a
    /// join's, the pairs) due.
    /// Then keeps one timer pending at its windows' next due time, and the status's count of what
    /// the windows hold. Returns whether an event matched.
    pub(super) fn fire_query(&mut self, slot: u32, e: Option<&E>, due: Time) -> bool {
        let Some(l) = self.table.slot_mut(slot) else {
            return false;
        };
        let (handle, instance) = (l.handle, l.instance);
        let Body::Query(q) = &mut l.body else {
            return false;
        };
        // User code (its templates' filters): a panic ends the instance, as in a handler. Most
        // events a query is offered may fail its filter: decided before the instance is read.
        // A join's two templates may be of two kinds or keys: each is checked whole.
        let sides = match e {
            Some(e) => match panic::catch_unwind(AssertUnwindSafe(|| q.sides(e))) {
                Ok(0) => return false,
                Ok(sides) => sides,
                Err(payload) => {
                    self.after_handler(instance, Err(payload));
                    return false;
                }
            },
            None => 0,
        };
        let Some(state) = self.instances.state_mut(instance) else {
            return false;
        };
        self.fx.current = instance;
        let fx = &mut self.fx;
        // User code (what it computes of the event, its aggregate, its handler): as above.
        let result = panic::catch_unwind(AssertUnwindSafe(|| match e {
            Some(e) => q.run.event(state, fx, e, sides),
            None => q.run.time(state, fx, due),
        }));
        let (step, result) = match result {
            Ok(step) => (step, Ok(())),
            Err(payload) => (q.run.settle(), Err(payload)),
        };
        if step.held.0 != step.held.1 {
            self.table.note_windows(step.held.0, step.held.1);
        }
        if let Some(t) = step.arm {
            self.step_timers.push(t);
            self.schedule(handle, slot);
        }
        self.after_handler(instance, result);
        true
    }

    /// Fires the timer of the listener in `slot`, due at `due`: an expression's clock stimulus or
    /// a query's windows.
    pub(super) fn fire_timer(&mut self, slot: u32, due: Time) {
        match self.table.slot(slot).map(|l| &l.body) {
            Some(Body::Query(_)) => {
                self.fire_query(slot, None, due);
            }
            _ => {
                self.fire_expr(slot, Stimulus::Time(due));
            }
        }
    }

    /// Steps an expression listener with an event or a timer; fires its handler for every match.
    /// Returns whether the stimulus advanced it.
    pub(super) fn fire_expr(&mut self, slot: u32, stim: Stimulus<'_, E>) -> bool {
        let now = self.fx.now;
        let Some(l) = self.table.slot_mut(slot) else {
            return false;
        };
        let (handle, instance, mode) = (l.handle, l.instance, l.mode);
        let Body::Expr { expr, .. } = &mut l.body else {
            return false;
        };
        let bits = match stim {
            // User code (the filters of its templates): a panic ends the listener's instance.
            // Most events offered to a listener are declined by all its templates (R7.3): then
            // no matcher is stepped.
            Stimulus::Event(e) => {
                match panic::catch_unwind(AssertUnwindSafe(|| expr.admitted(e))) {
                    Ok(bits) if expr.declines(bits) => return false,
                    Ok(bits) => bits,
                    Err(payload) => {
                        self.after_handler(instance, Err(payload));
                        return false;
                    }
                }
            }
            Stimulus::Time(_) if !expr.first_at(self.stimulus) => return false,
            // Nothing of it is due yet (the timer of a match that has ended since): the matches
            // stay unread.
            Stimulus::Time(t) if expr.quiet_at(t) => return false,
            Stimulus::Time(_) => 0,
        };
        let mut out = StepOut::new(std::mem::take(&mut self.step_timers));
        let fired = &mut self.fired;
        // User code (the `given` conditions of its templates): as above.
        let stepped = panic::catch_unwind(AssertUnwindSafe(|| {
            expr.step_admitted(stim, bits, now, &mut out, fired)
        }));
        if stepped.is_ok() && out.held.0 != out.held.1 {
            self.table.note_held(out.held.0, out.held.1);
        }
        self.step_timers = out.timers;
        let (progressed, alive) = match stepped {
            Ok(step) => step,
            Err(payload) => {
                self.step_timers.clear();
                self.fired.clear();
                self.after_handler(instance, Err(payload));
                return false;
            }
        };
        if alive {
            self.schedule(handle, slot);
        } else {
            self.step_timers.clear();
            if mode == Mode::All {
                self.log_repeating_end(slot, instance, handle);
            }
            // It can no longer fire: it ends before its last handler runs (R7.3).
            self.table.kill(slot);
            self.listener_ended(instance);
            if self.fired.is_empty() && self.nesting == 0 {
                // No handler follows whose `after_handler` would see that its instance may have
                // no listener left: end it now (R6.8), not at some later handler or at shutdown.
                self.end_listenerless();
            }
        }
        if !self.fired.is_empty() {
            let mut fired = std::mem::take(&mut self.fired);
            self.deliver_matches(slot, handle, instance, alive, &mut fired);
            fired.clear();
            self.fired = fired;
        }
        progressed
    }

    /// Runs the handlers of the matches (and timeouts) an expression listener's step produced,
    /// while the listener is alive.
    fn deliver_matches(
        &mut self,
        slot: u32,
        handle: u64,
        instance: u32,
        alive: bool,
        fired: &mut Vec<Fired<E>>,
    ) {
        for f in fired.drain(..) {
            let Some(l) = self.table.slot_mut(slot) else {
                break;
            };
            let Body::Expr { handlers, .. } = &mut l.body else {
                break;
            };
            let handlers = &mut **handlers;
            let handler = match &mut handlers.on_timeout {
                Some(on_timeout) if f.timed_out => on_timeout,
                _ => &mut handlers.on_match,
            };
            let Some(state) = self.instances.state_mut(instance) else {
                break;
            };
            self.fx.current = instance;
            let fx = &mut self.fx;
            let result = panic::catch_unwind(AssertUnwindSafe(|| handler(state, fx, &f.hit)));
            self.after_handler(instance, result);
            if self.table.live_slot(handle, slot).is_none() && alive {
                // Quit, or its instance ended, while matches were being delivered.
                break;
            }
        }
    }
}
