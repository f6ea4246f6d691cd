//! NATS and JetStream for the correlator: ingress into an input handle, egress from an output
//! channel, at least once, partitioned over several processes.
//!
//! * [`Connector::subscribe`]: a core NATS subject into a context (no persistence).
//! * [`Connector::consume`]: a JetStream durable pull consumer into a context, at least once: a
//!   batch is acknowledged only after the engine processed its events (a receipt monitor loaded
//!   through the same input handle, [`correlator::InputHandle::load_in`]), each message on its
//!   own; what a crash or a server outage repeats, a deleted consumer, a panicking handler and
//!   the opt-in de-duplication by stream sequence are documented there.
//! * [`Connector::publish_output`]: an output channel to a subject.
//! * [`Codec`] with [`JsonCodec`]; undecodable payloads are counted and go to a dead-letter subject.
//! * [`Partitioning`]: the server-side mapping of keys to partitions and of partitions to
//!   processes, for scale-out.
//! * [`JetStreamCheckpoints`]: a `correlator::checkpoint::CheckpointStore` in an object store
//!   bucket, the checkpoint store several processes share.
//! * [`ConnectorStatus`]: connection state (the client reconnects with backoff) and counts.
//! * [`LocalServer`]: a local `nats-server` through `scripts/nats-server.sh`, for tests, examples
//!   and the [`bench`](mod@bench).
//!
//! Back-pressure: each ingress hands events to a thread of its own that blocks on the engine's
//! full inbox; the async side then stops taking messages (core) or pulling batches (JetStream).
//! No buffer between the server and the engine grows without bound.
//!
//! # Example
//! ```no_run
//! use std::sync::Arc;
//! use correlator::{Correlator, Event};
//! use correlator_nats::{Connector, ConnectorOptions, JetStreamSource, JsonCodec};
//!
//! #[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
//! struct Reading { sensor: String, celsius: f64 }
//! impl Event for Reading { type Kind = (); fn kind(&self) {} }
//!
//! let c = Correlator::<Reading>::builder().build()?;
//! // ... load monitors that emit alerts on the channel "alerts" ...
//! let alerts = c.channel("alerts")?;
//! let out = c.output(alerts);
//! c.start();
//! let nats = Connector::connect("nats://127.0.0.1:4222", ConnectorOptions::default())?;
//! nats.ensure_stream("READINGS", &["readings.>"])?;
//! let codec = Arc::new(JsonCodec::<Reading>::new());
//! let ingress = nats.consume(
//!     JetStreamSource::new("READINGS", "correlator").dedup(true),
//!     codec.clone(),
//!     c.input(),
//!     c.main(),
//! )?;
//! let egress = nats.publish_output(out, codec, |r: &Reading| format!("alerts.{}", r.sensor))?;
//! // ... later:
//! ingress.stop(); // what was pulled is processed and acknowledged
//! c.shutdown()?;
//! egress.join(); // what was emitted is published
//! println!("{}", nats.status());
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
#![deny(unsafe_code)]
#![warn(missing_docs)]

pub mod bench;
mod checkpoint;
mod codec;
mod connector;
mod error;
mod feeder;
mod partition;
mod processed;
mod server;
mod status;

pub use checkpoint::JetStreamCheckpoints;
pub use codec::{Codec, CodecError, JsonCodec};
pub use connector::{
    dead_letter_headers, Connector, ConnectorOptions, Egress, Ingress, JetStreamSource,
    DEFAULT_DEAD_LETTER_SUBJECT, DEFAULT_RECONNECT_MAX, DEFAULT_RECONNECT_MIN,
    DEFAULT_WORKER_THREADS,
};
pub use error::ConnectorError;
pub use partition::Partitioning;
pub use server::LocalServer;
pub use status::ConnectorStatus;
