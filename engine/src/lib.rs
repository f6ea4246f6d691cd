//! An embeddable, lock-free event correlator.
//!
//! Work is organised in **contexts**, each running on its own OS thread and processing its own input
//! queue one event at a time, to completion. **Monitors** are plain Rust structs whose instances
//! register **listeners** on event patterns; handlers **route** events to the front of their own
//! context's queue, **send** them to the back of any context's inbox, or to **channels** that
//! contexts subscribe to and that external receivers can read. The processing order is a contract:
//! [`spec`] (rules R1.1 ... R11.8, the file `engine/SPEC.md`), summarised in the README; every rule has
//! tests naming it.
//!
//! # Quick start
//! A card-fraud service on tokio (`engine/examples/quick_start.rs`, features `async`): one
//! monitor instance per card across a pool of two contexts, event time, alerts read from a bounded
//! typed output, a graceful shutdown. Add the crate (not on crates.io yet: a path or git
//! dependency on the repository's `engine/` folder) with the `async` feature, and `tokio` for the
//! runtime: `correlator = { path = "../correlator/engine", features = ["async"] }`.
#![cfg_attr(
    feature = "async",
    doc = concat!("```\n", include_str!("../examples/quick_start.rs"), "```")
)]
#![cfg_attr(
    not(feature = "async"),
    doc = concat!("```text\n", include_str!("../examples/quick_start.rs"), "```")
)]
//!
//! The same without a runtime, a plain monitor on one context, is the example further down.
//!
//! # Features
//!
//! | feature | default | what it adds |
//! |---|---|---|
//! | `async` | no | `send_to_async`, `send_batch_to_async`, `send_async` on input handles and `PoolInput`; [`SharedInput`]; `OutputReceiver::recv_async` and a `futures_core::Stream` of receivers; `Correlator::shutdown_async`. No runtime dependency: any executor drives them. |
//! | `serde` | no | `Serialize`/`Deserialize` for [`Status`], [`ContextStatus`], [`Totals`] and [`ContextRef`]. |
//! | `quantiles` | no | [`query::Quantile`](crate::query): quantiles over stream query windows through the `histogram` crate. |
//! | `metrics` | no | `correlator::metrics`: the status counters published to the `metrics` facade (Prometheus, StatsD, ...), once or periodically. |
//! | `internals` | no | the inbox, the route stack and the wait graph for the loom models and micro-benchmarks; hidden from these docs, not a stable API. |
//!
//! # Where to start reading
//! - [`Correlator`] and its builder: contexts, inputs, outputs, shutdown, [`Status`].
//! - [`Monitor`] and [`Scope`]: what a handler can do (every method has an example).
//! - [`Pattern`] and [`Expr`]: templates and event expressions (`then`, `and`, `or`, [`not`],
//!   `within`, `within_from_first`, [`wait`], [`at`]).
//! - [`Pool`]: one monitor instance per key across partitioned contexts.
//! - [`checkpoint`]: where checkpoints are stored ([`checkpoint::DirStore`]: atomic, checksummed,
//!   the previous one used when the newest is damaged); the consistent cut and recovery are to come.
//! - [`spec`]: the processing-order contract, with the rule numbers that tests and docs cite.
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
//!
//! # Shape: modules along the data flow
//! An event goes from a sender (an [`InputHandle`], or a handler's [`Scope`]) through `deliver`
//! into a context's inbox (`inbox`), is taken by that context's loop (`context`), pushed on its
//! route stack (`route`), dispatched to the listeners its `listener` index finds, whose handlers
//! (built by `monitor`) act on the context's `entry::Effects`: routing (back onto the route stack),
//! sending (back into `deliver`), emitting on channels (`channel`) and outputs (`output`). The modules, bottom up; each
//! imports only modules listed before it and only those its module doc names (both checked by
//! `scripts/module-cycles.py`). The one circle of types (an entry can carry a handler's initialiser, whose effects
//! send through links that hold the registry of inboxes of entries) is no import circle: `entry`'s
//! module doc says how.
//!
//! | module | owns |
//! |---|---|
//! | `sync`, `config`, `time`, `event`, `state`, `id`, `hash` | leaves: the std/loom shim, settings, logical time, the [`Event`] trait, type-erased monitor state, [`ContextRef`], the fast hasher of trusted keys |
//! | `error`, `status` | the typed errors; the status snapshot and its one list of counters |
//! | `metrics` | (feature `metrics`) the status counters published to the `metrics` facade |
//! | `inbox` | the lock-free MPSC queue per context: the ring, reservations, overflow policy, the parker, the wait list that `output` shares (model-checked with loom) |
//! | `route` | the route stack: a LIFO that gives depth-first order with siblings in routing order |
//! | `pattern`, `expr` | templates, and event expressions with their matchers and timers |
//! | `query` | stream queries: partitioned windows and incremental aggregates ([`query`]) |
//! | `output` | bounded outputs: the queue, its overflow policy and sleep/wake protocol, typed [`Output`]s, [`OutputReceiver`]s |
//! | `channel` | channel names, subscriptions and the output lists of channels |
//! | `entry` | the shared vocabulary: inbox entries, a handler's effects, deferred operations, handler aliases |
//! | `send` | the one send core: try, give back, wait by the sender's strategy or overrun (R5.1, R5.2), and the wait graph |
//! | `registry` | what every thread knows: the correlator's contexts, channels, wait graph, published counters (generic over the inbox item) |
//! | `shared` | the registry as the engine instantiates it: contexts whose inboxes hold entries |
//! | `deliver` | a sender's links: single and batch sends, channel fan-out, output delivery, a context's held places; each calls `send` |
//! | `send_future` | (feature `async`) the futures of the async sends: a waiting task joins the inbox's room-waiter list |
//! | `listener` | the listener index by event kind, read through a cursor |
//! | `context` | the context thread: its loop (`context`), `dispatch`, `instances`, `timers` (with `timer_queue`) |
//! | `monitor`, `input` | the user's side: [`Monitor`], [`Scope`]; [`InputHandle`], [`SharedInput`] |
//! | `correlator` | the facade: [`Correlator`], its builder (`builder`), helper threads (`background`), shutdown (`shutdown`); imported by nothing but this file and `pool` |
//! | `pool` | partitioned contexts ([`Pool`]): one monitor instance per key across a pool of contexts, on top of the facade |
//!
//! `inbox` and `route` are private; the `internals` feature exposes them (and the wait-graph helpers)
//! to the loom models and the micro-benchmarks.
//!
#![cfg_attr(docsrs, feature(doc_cfg))]
#![deny(unsafe_op_in_unsafe_fn)]
#![warn(missing_docs, clippy::undocumented_unsafe_blocks)]

mod channel;
pub mod checkpoint;
mod config;
mod context;
mod correlator;
mod deliver;
mod entry;
mod error;
mod event;
mod event_time;
pub mod expr;
mod hash;
mod hint;
mod id;
mod input;
mod listener;
#[cfg(feature = "metrics")]
pub mod metrics;
mod monitor;
mod output;
mod pattern;
mod pool;
pub mod query;
pub mod record;
mod registry;
mod send;
#[cfg(feature = "async")]
mod send_future;
mod shared;
mod state;
mod status;
mod sync;
mod time;

/// Declares modules that are private unless the `internals` feature exposes them (to the loom models
/// and the micro-benchmarks). Without it, what only those users call is unused here: each such
/// item carries `#[cfg_attr(not(feature = "internals"), allow(dead_code))]` itself, so that
/// anything else that falls out of use is still reported.
macro_rules! internal_modules {
    ($($(#[$doc:meta])* $name:ident;)*) => {$(
        $(#[$doc])*
        #[cfg(feature = "internals")]
        #[doc(hidden)]
        pub mod $name;
        #[cfg(not(feature = "internals"))]
        mod $name;
    )*};
}

internal_modules! {
    inbox;
    route;
}

/// The processing-order contract (rules R1.1 ... R11.8), from `engine/SPEC.md`.
///
/// Tests and the rest of this documentation cite its rule numbers.
#[doc = include_str!("../SPEC.md")]
pub mod spec {}

/// Engine internals exposed for the loom models in `loom-tests/`; not a stable API.
#[cfg(feature = "internals")]
#[doc(hidden)]
pub mod internals {
    pub use crate::context::skeleton::{run_loop, Flow, LoopBody, Pause};
    pub use crate::deliver::{push_blocking, push_waiting, OutputDelivery};
    pub use crate::output::{OutputQueue, Pushed};
    pub use crate::send::{
        poll_send, refusal_kind, reserve, reserve_after_full, reserve_refused, send, send_batch,
        send_batch_whole, try_send, AsContext, Attempt, NoPlace, Outside, Placed, RoomRegistration,
        SendSide, Wait, WaitGraph,
    };
}

pub use channel::Channel;
pub use config::{ContextOptions, PinningPlan, WaitStrategy, SPIN_LIMIT, YIELD_LIMIT};
pub use correlator::{
    Correlator, CorrelatorBuilder, DEFAULT_INBOX_CAPACITY, DEFAULT_MAX_CHANNELS,
    DEFAULT_MAX_CONTEXTS, DEFAULT_RELEASE_BATCH, DEFAULT_TICK_RATE, MAX_CHANNELS, MAX_CONTEXTS,
};
#[cfg(feature = "checkpoint")]
pub use correlator::{InputTaken, Recovered};
pub use entry::DieReason;
pub use error::{Error, SendBatchError, SendError, SendErrorKind};
pub use event::Event;
pub use event_time::{LateEvents, DEFAULT_LATE_WARNING_INTERVAL};
pub use expr::{all, at, not, wait, AfterMatch, Expr, Match};
pub use id::{ContextRef, EmitId};
/// The largest inbox capacity [`CorrelatorBuilder::inbox_capacity`] accepts.
pub use inbox::MAX_CAPACITY as MAX_INBOX_CAPACITY;
pub use input::{InputHandle, SharedInput};
#[cfg(feature = "checkpoint")]
pub use monitor::Persistent;
pub use monitor::{ListenerHandle, Monitor, Scope};
#[cfg(feature = "async")]
pub use output::RecvFuture;
pub use output::{
    IntoIter, Iter, Output, OutputOptions, OutputReceiver, Overflow, RecvError, RecvTimeoutError,
    TryIter, TryRecvError, DEFAULT_OUTPUT_BLOCK_WARNING, DEFAULT_OUTPUT_CAPACITY,
    MAX_OUTPUT_CAPACITY,
};
pub use pattern::{ordered_f64, ordered_i64, Pattern, Prior};
#[cfg(feature = "checkpoint")]
pub use pool::Resume;
pub use pool::{partition_of, Pool, PoolInput, PoolMemberStatus, PoolStatus};
pub use status::{BlockedOnOutput, ContextStatus, Status, Totals};
pub use time::Time;

/// The README's embedding example, compiled and run as a doc test so that it stays true.
#[cfg(doctest)]
#[doc = include_str!("../../README.md")]
pub struct ReadmeDoctests;
