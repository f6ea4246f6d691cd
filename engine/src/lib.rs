//! An embeddable, lock-free event correlator.
//!
//! Work is organised in **contexts**, each running on its own OS thread and processing its own input
//! queue one event at a time, to completion. **Monitors** are plain Rust structs whose instances
//! register **listeners** on event patterns; handlers **route** events to the front of their own
//! context's queue, **send** them to the back of any context's inbox, or to **channels** that
//! contexts subscribe to and that external receivers can read. The processing order is a contract:
//! [`spec`] (rules R1.1 ... R9.1, the file `engine/SPEC.md`), summarised in the README; every rule has
//! tests naming it.
//!
//! # Shape
//! * [`inbox`]: a lock-free MPSC queue per context, with back-pressure, deadlock avoidance beyond
//!   capacity, and a sleep/wake protocol that cannot lose a wake-up (model-checked with loom);
//! * [`route`]: the route stack, a thread-local LIFO that gives depth-first order with siblings in
//!   routing order;
//! * `context`: the loop that drains the route stack completely before taking the next inbox entry;
//! * `listener`: the listener index by event kind; `monitor`: instances, [`Scope`], [`Monitor`];
//! * `channel`: subscriptions and outputs; `deliver`: the single push path every send uses;
//! * `pool`: partitioned contexts ([`Pool`]), one monitor instance per key across them.
//!
//! # Example
//! ```
//! use correlator::{Correlator, Event, Monitor, Pattern, Scope};
//!
//! #[derive(Clone, Debug)]
//! struct Temp { sensor: u32, celsius: f64 }
//! impl Event for Temp {
//!     type Kind = ();
//!     fn kind(&self) {}
//! }
//!
//! /// Emits every reading above a limit on the channel "alerts".
//! struct Limit { limit: f64, alerts: correlator::Channel }
//! impl Monitor<Temp> for Limit {
//!     fn on_load(&mut self, cx: &mut Scope<'_, Temp, Self>) {
//!         cx.on_all(Pattern::kind(()), |m: &mut Limit, cx: &mut Scope<'_, Temp, Limit>, t: &Temp| {
//!             if t.celsius > m.limit {
//!                 cx.emit(m.alerts, t.clone());
//!             }
//!         });
//!     }
//! }
//!
//! let c = Correlator::<Temp>::builder().inbox_capacity(1024).build()?;
//! let alerts = c.channel("alerts")?;
//! let rx = c.output(alerts);
//! c.load(Limit { limit: 30.0, alerts })?;
//! let input = c.input();
//! c.start();
//! for (sensor, celsius) in [(1, 21.5), (2, 31.0), (1, 35.5)] {
//!     input.send_to(c.main(), Temp { sensor, celsius })?;
//! }
//! c.shutdown()?; // processes everything accepted, then stops
//! let hot: Vec<u32> = rx.iter().map(|t| t.sensor).collect();
//! assert_eq!(hot, [2, 1]);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
#![deny(unsafe_op_in_unsafe_fn)]
#![warn(missing_docs, clippy::undocumented_unsafe_blocks)]

mod channel;
mod config;
mod context;
mod correlator;
mod deliver;
mod error;
mod event;
pub mod expr;
mod handle;
pub mod inbox;
mod listener;
mod monitor;
mod pattern;
mod pool;
pub mod route;
mod state;
mod status;
mod sync;
mod time;

/// The processing-order contract (rules R1.1 ... R9.1), from `engine/SPEC.md`.
///
/// Tests and the rest of this documentation cite its rule numbers.
#[doc = include_str!("../SPEC.md")]
pub mod spec {}

/// Engine internals exposed for the loom models in `loom-tests/`; not a stable API.
#[doc(hidden)]
pub mod internals {
    pub use crate::deliver::{reserve_after_full, NoPlace, WaitGraph};
}

pub use channel::Channel;
pub use config::{ContextOptions, PinningPlan, WaitStrategy, SPIN_LIMIT, YIELD_LIMIT};
pub use context::ContextRef;
pub use correlator::{
    Correlator, CorrelatorBuilder, DEFAULT_INBOX_CAPACITY, DEFAULT_MAX_CHANNELS,
    DEFAULT_MAX_CONTEXTS, DEFAULT_RELEASE_BATCH, DEFAULT_TICK_RATE, MAX_CHANNELS, MAX_CONTEXTS,
};
pub use error::{Error, SendError, SendErrorKind};
pub use event::Event;
pub use expr::{at, not, wait, Expr, Match};
pub use handle::{InputHandle, OutputReceiver, RecvError, RecvTimeoutError, TryRecvError};
pub use monitor::{DieReason, ListenerHandle, Monitor, Scope};
pub use pattern::Pattern;
pub use pool::{partition_of, Pool, PoolInput, PoolMemberStatus, PoolStatus};
pub use status::{ContextStatus, Status, Totals};
pub use time::Time;

/// The README's embedding example, compiled and run as a doc test so that it stays true.
#[cfg(doctest)]
#[doc = include_str!("../../README.md")]
pub struct ReadmeDoctests;
