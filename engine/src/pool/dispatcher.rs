//! The dispatcher: the monitor [`Pool::load_per_key`](super::Pool::load_per_key) loads into
//! every member. It listens to the kinds the user names, keeps the set of keys with a live
//! instance, creates a key's instance (through the user's factory) at its first event, and
//! forgets the key when that instance ends (R6.8).
//!
//! Owns the key set and the ended-key report. May import the leaves, `entry`, `monitor`,
//! `pattern` and `context` (the panic helpers).

use std::panic::{self, AssertUnwindSafe};

use crate::entry::{AheadHook, DieReason, Effects, NewInstance};
use crate::event::Event;
use crate::monitor::{load_instance, Monitor, Scope};
use crate::pattern::Pattern;
use crate::state::State;
// Plain std atomics: the pool is built on the public facade, not part of a loom-modelled protocol.
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::sync::Mutex;

use super::keys::{partition_of, KeySet};

/// A per-key factory, shared by the dispatchers of every member.
pub(super) type Factory<E, M> = dyn Fn(u64, &E) -> M + Send + Sync;

/// The keys whose instances ended since the dispatcher last looked: pushed by the instances'
/// `on_die` wrappers, taken by the dispatcher before its next lookup. Both run on the member's own
/// thread (an instance is a local spawn of the dispatcher and never leaves its context, R6.8), so
/// the lock is never contended; it is taken once per ended instance, never per event.
#[derive(Default)]
pub(super) struct EndedKeys {
    /// Whether `keys` may hold something: the one test an event pays. Relaxed: one thread.
    any: AtomicBool,
    keys: Mutex<Vec<u64>>,
}

/// One member's dispatcher: creates the per-key instances of one factory (see
/// [`Pool::load_per_key`](super::Pool::load_per_key)).
pub(super) struct Dispatcher<E: Event, M> {
    pub(super) kinds: Vec<E::Kind>,
    /// This member's partition index.
    pub(super) member: usize,
    pub(super) partitions: usize,
    pub(super) factory: Arc<Factory<E, M>>,
    /// The keys with a live instance. A key leaves when its instance's `on_die` wrapper reports
    /// it through `ended` (taken before the next lookup), so the set holds live keys only and an
    /// event costs one lookup in it: no per-key flag to load from another allocation.
    pub(super) keys: KeySet,
    /// Keys whose instance ended, not yet taken out of `keys`.
    pub(super) ended: Arc<EndedKeys>,
    pub(super) live: Arc<[AtomicU64]>,
    /// Whether a key's first event also goes to its new instance's listeners
    /// ([`Pool::load_per_key_delivering`](super::Pool::load_per_key_delivering)).
    pub(super) deliver: bool,
}

impl<E: Event, M: Monitor<E>> Monitor<E> for Dispatcher<E, M> {
    fn on_load(&mut self, cx: &mut Scope<'_, E, Self>) {
        for &kind in &self.kinds {
            cx.on_all(Pattern::kind(kind), Self::dispatch);
        }
        let fx = cx.effects();
        let instance = fx.current;
        fx.ahead_hooks.push(AheadHook {
            instance,
            hint: hint::<E, M>,
        });
        // Checkpoints save this member's per-key instances (not the dispatcher: its factory is
        // a closure, loaded again by the recovering program) and hand restored ones to it.
        #[cfg(feature = "checkpoint")]
        {
            let fx = cx.effects();
            let dispatcher = fx.current;
            fx.keyed_hooks.push(crate::entry::KeyedHook {
                monitor: std::any::TypeId::of::<M>(),
                dispatcher,
                adopt: adopt::<E, M>,
            });
        }
    }
}

/// Where the dispatcher `state` will read first for an event of `key`: the slot of its key set
/// that the probe starts at (null for a key of another member, which it does not probe).
fn hint<E: Event, M: Monitor<E>>(state: &State, key: u64) -> *const u8 {
    match state.downcast_ref::<Dispatcher<E, M>>() {
        Some(d) if partition_of(key, d.partitions) == d.member => d.keys.slot_hint(key),
        // The hook names the dispatcher's own instance, whose state is of this type.
        _ => std::ptr::null(),
    }
}

/// A restored instance of `key` wrapped by the dispatcher `state` as if it had created it.
#[cfg(feature = "checkpoint")]
fn adopt<E: Event, M: Monitor<E>>(
    state: &mut State,
    key: u64,
    new: NewInstance<E>,
) -> NewInstance<E> {
    match state.downcast_mut::<Dispatcher<E, M>>() {
        Some(d) => d.wrap(key, new),
        // The hook names the dispatcher's own instance: its state is of this type.
        None => new,
    }
}

impl<E: Event, M: Monitor<E>> Dispatcher<E, M> {
    /// The handler of every kind the dispatcher listens to.
    fn dispatch(&mut self, cx: &mut Scope<'_, E, Self>, event: &E) {
        // A `key()` that panics here drops the event (counted in `events_dropped_by_panic`) as
        // the engine's own call would; the dispatcher carries on.
        let Some(key) = crate::context::event_code(|| event.key()) else {
            return;
        };
        if partition_of(key, self.partitions) != self.member {
            return;
        }
        if self.ended.any.load(Ordering::Relaxed) {
            self.forget_ended();
        }
        if self.keys.contains_key(key) {
            return; // The key's instance is alive: its own listeners take the event.
        }
        self.create(cx, key, event);
    }

    /// Takes the keys whose instances ended out of `keys`: their next event creates a fresh one.
    #[cold]
    fn forget_ended(&mut self) {
        self.ended.any.store(false, Ordering::Relaxed);
        let mut ended = self.ended.keys.lock().unwrap_or_else(|e| e.into_inner());
        for key in ended.drain(..) {
            self.keys.remove(key);
        }
    }

    /// Creates the instance of `key`, its state made by the factory from `first`.
    #[cold]
    fn create(&mut self, cx: &mut Scope<'_, E, Self>, key: u64, first: &E) {
        // Copied before anything is recorded for the key: the event's `Clone` is its own code,
        // and a panic there drops the event as a `key()` panic does, leaving no trace of the key.
        let deliver = self
            .deliver
            .then(|| crate::context::event_code(|| first.clone()));
        let factory = &self.factory;
        let monitor = match panic::catch_unwind(AssertUnwindSafe(|| factory(key, first))) {
            Ok(m) => m,
            Err(payload) => {
                tracing::error!(
                    context = cx.context().id(),
                    key,
                    message = %crate::context::panic_message(&*payload),
                    "a per-key factory panicked; no instance was created for the key"
                );
                return;
            }
        };
        let mut new = load_instance(monitor);
        new.deliver = deliver;
        let new = self.wrap(key, new);
        cx.spawn_new(new);
    }

    /// Records `key` and wraps `new`, its instance: counted live when it exists, its key
    /// reported when it ends (and, under checkpoints, known to the context as `key`'s).
    fn wrap(&mut self, key: u64, mut new: NewInstance<E>) -> NewInstance<E> {
        self.keys.get_or_insert_default(key);
        let ended = self.ended.clone();
        let (live, member) = (self.live.clone(), self.member);
        let init = new.init;
        let started = live.clone();
        // Counted when the instance exists: a spawn dropped at shutdown creates none.
        new.init = Box::new(move |state: &mut State, fx: &mut Effects<E>| {
            started[member].fetch_add(1, Ordering::Relaxed);
            #[cfg(feature = "checkpoint")]
            if let Some(keyed) = fx.keyed.as_mut() {
                keyed.insert(fx.current, key);
            }
            init(state, fx);
        });
        let mut on_die = new.on_die;
        new.on_die = Box::new(
            move |state: &mut State, reason: &DieReason, fx: &mut Effects<E>| {
                // The key is reported before the user's hook runs, so however the hook ends
                // (its panic is the engine's to contain and report, R6.8) no stale key is left;
                // `on_die` runs exactly once (R6.8), so the key is reported once.
                ended
                    .keys
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .push(key);
                ended.any.store(true, Ordering::Relaxed);
                live[member].fetch_sub(1, Ordering::Relaxed);
                #[cfg(feature = "checkpoint")]
                if let Some(keyed) = fx.keyed.as_mut() {
                    keyed.remove(&fx.current);
                }
                on_die(state, reason, fx);
            },
        );
        new
    }
}
