//! The dispatcher: the monitor [`Pool::load_per_key`](super::Pool::load_per_key) loads into
//! every member. It listens to the kinds the user names, keeps the set of keys with a live
//! instance, creates a key's instance (through the user's factory) at its first event, and
//! forgets the key when that instance ends (R6.8).
//!
//! A per-key instance is the factory's monitor as it is, with no wrapper: it names its
//! dispatcher and key ([`NewInstance::owner`]), and the context counts it in the member's live
//! keys while it exists and takes its key out of the key set when it ends, through the
//! [`DispatcherHook`] the dispatcher registers in `on_load`. (Each instance used to carry two
//! boxed closures that did this, each with its own clones of the shared counters, and ended
//! keys went through a locked queue the dispatcher emptied before its next lookup: about 750
//! instructions and 48 bytes per instance, callgrind of `workload/unconfirmed`.)
//!
//! # The gate
//! The key set is the hook's, so the context's, and the dispatcher's listeners are *gates*
//! (`on_all_gate`): the dispatch of an event whose key has a live instance looks the key up in
//! the hook and runs no handler (`context::dispatch`); only a key without one (a first event,
//! or one for another member) comes to [`Dispatcher::dispatch`]. Before, every event ran this
//! handler to learn that its key was live; the gate's one lookup in its place took 48 of
//! `workload/spike`'s 669 instructions per event (callgrind, context thread).
//!
//! Owns the factory's use. May import the leaves, `entry`, `monitor`, `pattern` and `context` (the
//! panic helpers).

use std::panic::{self, AssertUnwindSafe};

use crate::entry::{DispatcherHook, NewInstance};
use crate::event::Event;
use crate::monitor::{load_instance, Monitor, Scope};
use crate::pattern::Pattern;
// Plain std atomics: the pool is built on the public facade, not part of a loom-modelled protocol.
use std::sync::atomic::AtomicU64;
use std::sync::Arc;

use super::keys::partition_of;
use crate::hash::KeyMap;

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
        // The hook's index, which its listeners' gates name: the one it is pushed at below.
        self.hook = cx.effects().dispatchers.len() as u32;
        for &kind in &self.kinds {
            cx.on_all_gate(Pattern::kind(kind), self.hook, Self::dispatch);
        }
        let fx = cx.effects();
        fx.dispatchers.push(DispatcherHook {
            instance: fx.current,
            keys: KeyMap::default(),
            live: self.live.clone(),
            member: self.member,
            // Checkpoints save this member's per-key instances (not the dispatcher: its factory
            // is a closure, loaded again by the recovering program) and hand restored ones to it.
            #[cfg(feature = "checkpoint")]
            monitor: std::any::TypeId::of::<M>(),
        });
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
        // A key with a live instance never gets here: its event passed the gate, which looked
        // the key up already (a second lookup per new key was `workload/unconfirmed`'s cost).
        debug_assert!(
            !self.keys(cx).contains_key(key),
            "an event of a live key passed the gate to the dispatcher's handler"
        );
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
        let new = self.own(cx, key, new);
        cx.spawn_new(new);
    }

    /// The keys with a live instance: the context's hook holds them (see [`DispatcherHook`]).
    fn keys<'s>(&self, cx: &'s mut Scope<'_, E, Self>) -> &'s mut KeyMap<()> {
        &mut cx.effects().dispatchers[self.hook as usize].keys
    }

    /// Records `key` and makes `new` its instance: counted live while it exists, its key
    /// forgotten when it ends (and, under checkpoints, known to the context as `key`'s).
    fn own(
        &mut self,
        cx: &mut Scope<'_, E, Self>,
        key: u64,
        mut new: NewInstance<E>,
    ) -> NewInstance<E> {
        self.keys(cx).get_or_insert_default(key);
        new.owner = Some((self.hook, key));
        new
    }
}
