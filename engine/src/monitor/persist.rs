//! Persistent monitors (SPEC R11.10, R11.11): the trait through which a monitor's instances are
//! saved in a checkpoint and restored from one, and the type-erased functions the context calls.
//!
//! A monitor's state is saved through serde (postcard bytes); its listeners cannot be, since
//! their handlers and filters are closures. So the monitor registers them again, from its
//! restored state, in [`Persistent::on_restore`], and the engine pairs each listener registered
//! there with the one saved at the same place in the instance's registration order, giving it
//! back its handle, its partial matches and its timers (see `context::snapshot`).
//!
//! Owns the trait and the erasure of its type. May import the leaves and `entry`.

use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::entry::{NewInstance, PersistType};
use crate::event::Event;
use crate::state::State;

use super::handlers::spawned_instance;
use super::{Monitor, Scope};

/// A monitor whose instances checkpoints save and recovery restores (feature `checkpoint`; SPEC
/// §11).
///
/// The state is saved through serde. What the engine cannot save is the instance's listeners,
/// whose handlers and filters are closures: after recovery, each restored instance runs
/// [`on_restore`](Self::on_restore), which registers them again from the restored state. The
/// engine pairs them with the saved ones by registration order and gives each back its
/// [`ListenerHandle`](crate::ListenerHandle) (the same number as before), its partial matches
/// with the events they hold, and its timers. That is where it differs from Apama's persistent
/// monitors, which restore listeners without the monitor's help: EPL's listeners are data, a
/// Rust closure is not.
///
/// Register each type on the builder with
/// [`persistent`](crate::CorrelatorBuilder::persistent); a checkpoint refuses to save a
/// correlator holding an instance of a monitor that is not registered, rather than drop it.
///
/// ```
/// use correlator::{Event, Monitor, Persistent, Pattern, Scope};
/// use serde::{Deserialize, Serialize};
///
/// #[derive(Clone, Debug)]
/// struct Reading { sensor: u64, value: i64 }
/// impl Event for Reading {
///     type Kind = ();
///     fn kind(&self) {}
///     fn key(&self) -> Option<u64> { Some(self.sensor) }
/// }
///
/// /// Counts one sensor's readings above a threshold.
/// #[derive(Serialize, Deserialize)]
/// struct Counter { sensor: u64, above: u64 }
///
/// impl Counter {
///     /// The one listener, from `on_load` and again from `on_restore`.
///     fn listen(&mut self, cx: &mut Scope<'_, Reading, Self>) {
///         cx.on_all(Pattern::any().key(self.sensor), |m, _cx, r: &Reading| {
///             if r.value > 100 {
///                 m.above += 1;
///             }
///         });
///     }
/// }
///
/// impl Monitor<Reading> for Counter {
///     fn on_load(&mut self, cx: &mut Scope<'_, Reading, Self>) {
///         self.listen(cx);
///     }
/// }
///
/// impl Persistent<Reading> for Counter {
///     const NAME: &'static str = "counter/v1";
///     fn on_restore(&mut self, cx: &mut Scope<'_, Reading, Self>) {
///         self.listen(cx);
///     }
/// }
/// ```
pub trait Persistent<E: Event>: Monitor<E> + Serialize + DeserializeOwned {
    /// The monitor's name in checkpoints: stable across builds and unique among the
    /// correlator's persistent monitors (a type's Rust name may change when code moves). Put a
    /// version in it, and change it when the state's serde form changes incompatibly.
    const NAME: &'static str;

    /// Runs in a restored instance, in place of [`Monitor::on_load`], during
    /// [`Correlator::recover`](crate::Correlator::recover): registers the listeners the
    /// instance had when the checkpoint was taken, in the order it registered them (the first
    /// still live first), with the same mode (`on`, `on_all`, `when`, `when_all`) and, for an
    /// expression, an expression of the same shape. Usually the same code that registered them
    /// in the first place, fed from the restored state.
    ///
    /// It must only register listeners: routing, sending, emitting, spawning, subscribing,
    /// quitting or dying here fails the recovery with
    /// [`CheckpointError::Mismatch`](crate::checkpoint::CheckpointError::Mismatch), and so does
    /// a listener that differs from the saved one at its place. The instance's channel
    /// subscriptions are restored by the engine.
    fn on_restore(&mut self, cx: &mut Scope<'_, E, Self>);
}

/// The type-erased functions of persistent monitor `M`.
pub(crate) fn persist_type<E: Event, M: Persistent<E>>() -> PersistType<E> {
    PersistType {
        name: M::NAME,
        save: save_state::<E, M>,
        restore: restore_state::<E, M>,
    }
}

fn save_state<E: Event, M: Persistent<E>>(state: &mut State) -> Result<Vec<u8>, String> {
    let m = state
        .downcast_mut::<M>()
        .ok_or_else(|| format!("the state is not a `{}`", std::any::type_name::<M>()))?;
    postcard::to_allocvec(&*m).map_err(|e| e.to_string())
}

fn restore_state<E: Event, M: Persistent<E>>(bytes: &[u8]) -> Result<NewInstance<E>, String> {
    let m: M = postcard::from_bytes(bytes).map_err(|e| e.to_string())?;
    // A restored instance is created as a spawned one is, `on_restore` its initialiser.
    Ok(spawned_instance(
        m,
        |m: &mut M, cx: &mut Scope<'_, E, M>| m.on_restore(cx),
    ))
}
