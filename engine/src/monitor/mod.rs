//! Monitors, their instances, and the `Scope` handlers act through (SPEC §6).
//!
//! A monitor is a plain Rust struct (its state) implementing [`Monitor`]. Loading it creates its
//! first *instance* in a context and runs [`Monitor::on_load`] there; the load hook registers
//! listeners. Each listener's handler gets `&mut` to the instance's state and a [`Scope`], through
//! which it routes, sends, registers more listeners, spawns and dies.
//!
//! An instance ends (R6.8) when a handler calls [`Scope::die`], when one of its handlers panics, or
//! when it has no listener left after a handler returns; at graceful shutdown every remaining
//! instance ends with [`DieReason::Shutdown`]. Its [`Monitor::on_die`] hook runs exactly once, with the
//! reason; a panic inside `on_die` is caught and reported through `tracing`. Its listeners and
//! subscriptions are removed; the context and every other instance carry on; events it already
//! routed or sent are still delivered.
//!
//! Owns the user's side of monitors ([`Monitor`], [`Scope`]), one job per file: this file the
//! trait and [`ListenerHandle`]; `scope` the `Scope` value and what a handler reads from it;
//! `handlers` the plumbing that turns typed handlers and hooks into the context's type-erased
//! ones; `Scope`'s other methods by what they do: `send` (routing, sending, emitting), `topology`
//! (channels, subscriptions, new contexts), `listen` (listeners, logical time, ending the
//! instance), `query` (stream queries) and `spawn` (new instances); `persist` the trait of
//! monitors that checkpoints save. May import the leaves,
//! `entry`, `deliver`, `expr`, `pattern`, `query`, `channel`, `output`, `error` and `context`
//! (for creating contexts).

mod handlers;

// `Scope` and its methods, one file per job. rustdoc lists a type's impl blocks in the order they
// are declared, so the files are declared one to a group (rustfmt sorts a group), in the order the
// docs read: what a handler reads, moves, connects, listens for and creates.
mod scope;

mod send;

mod topology;

mod listen;

mod query;

mod spawn;

#[cfg(feature = "checkpoint")]
mod persist;

use crate::entry::DieReason;
use crate::event::Event;
use crate::id::ContextRef;

pub(crate) use handlers::load_instance;
#[cfg(feature = "checkpoint")]
pub(crate) use persist::persist_type;
#[cfg(feature = "checkpoint")]
pub use persist::Persistent;
pub use scope::Scope;

/// A monitor: user state plus the listeners its load hook registers.
///
/// ```
/// use correlator::{DieReason, Event, Monitor, Pattern, Scope};
///
/// #[derive(Clone, Debug)]
/// struct Reading(u32);
/// impl Event for Reading {
///     type Kind = ();
///     fn kind(&self) {}
/// }
///
/// /// Counts readings and stops after three.
/// #[derive(Clone, Default)]
/// struct Counter { seen: u32 }
///
/// impl Monitor<Reading> for Counter {
///     fn on_load(&mut self, cx: &mut Scope<'_, Reading, Self>) {
///         cx.on_all(Pattern::kind(()), |m: &mut Counter, cx: &mut Scope<'_, Reading, Counter>, _r: &Reading| {
///             m.seen += 1;
///             if m.seen == 3 {
///                 cx.die();
///             }
///         });
///     }
///
///     fn on_die(&mut self, reason: &DieReason, _cx: &mut Scope<'_, Reading, Self>) {
///         assert!(matches!(reason, DieReason::Died | DieReason::Shutdown));
///     }
/// }
/// ```
pub trait Monitor<E: Event>: Send + Sized + 'static {
    /// Runs in the context where the instance is created (`main` for
    /// [`Correlator::load`](crate::Correlator::load)); registers the first listeners.
    fn on_load(&mut self, cx: &mut Scope<'_, E, Self>);

    /// Runs exactly once when the instance ends. What it routes and sends is delivered; listeners and
    /// subscriptions it registers are dropped, since the instance is gone.
    fn on_die(&mut self, reason: &DieReason, cx: &mut Scope<'_, E, Self>) {
        let _ = (reason, cx);
    }
}

/// A handle to a listener, returned when it is registered; pass it to [`Scope::quit`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ListenerHandle {
    context: ContextRef,
    id: u64,
}

impl ListenerHandle {
    /// The context the listener lives in.
    pub fn context(&self) -> ContextRef {
        self.context
    }
}
