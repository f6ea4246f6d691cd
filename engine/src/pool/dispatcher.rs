//! The dispatcher: the monitor [`Pool::load_per_key`](super::Pool::load_per_key) loads into
//! every member. It listens to the kinds the user names, keeps the set of keys with a live
//! instance, creates a key's instance (through the user's factory) at its first event, and
//! forgets the key when that instance ends (R6.8).
//!
//! A per-key instance is the factory's monitor as it is, with no wrapper: it names its
//! dispatcher and key ([`NewInstance::owner`]), and the context counts it in the member's live
//! keys while it exists and calls the dispatcher's `forget` when it ends, through the
//! [`DispatcherHook`] the dispatcher registers in `on_load`. (Each instance used to carry two
//! boxed closures that did this, each with its own clones of the shared counters, and ended
//! keys went through a locked queue the dispatcher emptied before its next lookup: about 750
//! instructions and 48 bytes per instance, callgrind of `workload/unconfirmed`.)
//!
//! Owns the key set. May import the leaves, `entry`, `monitor`, `pattern` and `context` (the
//! panic helpers).

use std::panic::{self, AssertUnwindSafe};

use crate::entry::{DispatcherHook, NewInstance};
use crate::event::Event;
use crate::monitor::{load_instance, Monitor, Scope};
use crate::pattern::Pattern;
use crate::state::State;
// Plain std atomics: the pool is built on the public facade, not part of a loom-modelled protocol.
use std::sync::atomic::AtomicU64;
use std::sync::Arc;

use super::keys::{partition_of, KeySet};

/// A per-key factory, shared by the dispatchers of every member.
pub(super) type Factory<E, M> = dyn Fn(u64, &E) -> M + Send + Sync;

/// One member's dispatcher: creates the per-key instances of one factory (see
/// [`Pool::load_per_key`](super::Pool::load_per_key)).
pub(super) struct Dispatcher<E: Event, M> {
    pub(super) kinds: Vec<E::Kind>,
    /// This member's partition index.
    pub(super) member: usize,
    pub(super) partitions: usize,
    pub(super) factory: Arc<Factory<E, M>>,
    /// The keys with a live instance. A key leaves when its instance ends (the context calls
    /// [`forget`] before the instance's `on_die`), so the set holds live keys only and an event
    /// costs one lookup in it.
    pub(super) keys: KeySet,
    pub(super) live: Arc<[AtomicU64]>,
    /// This dispatcher's index among its context's [`DispatcherHook`]s, which its instances
    /// name; set in `on_load`.
    pub(super) hook: u32,
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
        self.hook = fx.dispatchers.len() as u32;
        fx.dispatchers.push(DispatcherHook {
            instance: fx.current,
            hint: hint::<E, M>,
            forget: forget::<E, M>,
            live: self.live.clone(),
            member: self.member,
            // Checkpoints save this member's per-key instances (not the dispatcher: its factory
            // is a closure, loaded again by the recovering program) and hand restored ones to it.
            #[cfg(feature = "checkpoint")]
            monitor: std::any::TypeId::of::<M>(),
            #[cfg(feature = "checkpoint")]
            remember: remember::<E, M>,
        });
    }
}

/// Where the dispatcher `state` will read first for an event of `key`: the slot of its key set
/// that the probe starts at. Not checked against the member's partition (a division per event
/// for a hint): a member's inbox holds its own keys, and a hint for another's is only a wasted
/// prefetch.
fn hint<E: Event, M: Monitor<E>>(state: &State, key: u64) -> *const u8 {
    match state.downcast_ref::<Dispatcher<E, M>>() {
        Some(d) => d.keys.slot_hint(key),
        // The hook names the dispatcher's own instance, whose state is of this type.
        None => std::ptr::null(),
    }
}

/// Takes `key`, whose instance ended, out of the dispatcher `state`'s live keys: its next event
/// creates a fresh instance.
fn forget<E: Event, M: Monitor<E>>(state: &mut State, key: u64) {
    if let Some(d) = state.downcast_mut::<Dispatcher<E, M>>() {
        d.keys.remove(key);
    }
}

/// Puts `key`, whose instance was restored, in the dispatcher `state`'s live keys, as creating
/// the instance does; false if `state` is not this dispatcher type's (the hook names the
/// dispatcher's own instance, so it is).
#[cfg(feature = "checkpoint")]
fn remember<E: Event, M: Monitor<E>>(state: &mut State, key: u64) -> bool {
    match state.downcast_mut::<Dispatcher<E, M>>() {
        Some(d) => {
            d.keys.get_or_insert_default(key);
            true
        }
        None => false,
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
        if self.keys.contains_key(key) {
            return; // The key's instance is alive: its own listeners take the event.
        }
        self.create(cx, key, event);
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
        let new = self.own(key, new);
        cx.spawn_new(new);
    }

    /// Records `key` and makes `new` its instance: counted live while it exists, its key
    /// forgotten when it ends (and, under checkpoints, known to the context as `key`'s).
    fn own(&mut self, key: u64, mut new: NewInstance<E>) -> NewInstance<E> {
        self.keys.get_or_insert_default(key);
        new.owner = Some((self.hook, key));
        new
    }
}
