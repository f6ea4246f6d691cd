//! What the connector reports: connection state and counts.

use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// Live counters, shared by every task of one [`Connector`](crate::Connector).
#[derive(Default)]
pub(crate) struct Counters {
    pub(crate) connected: AtomicBool,
    pub(crate) disconnects: AtomicU64,
    pub(crate) reconnects: AtomicU64,
    pub(crate) received: AtomicU64,
    pub(crate) delivered: AtomicU64,
    pub(crate) acknowledged: AtomicU64,
    pub(crate) duplicates: AtomicU64,
    pub(crate) already_processed: AtomicU64,
    pub(crate) consumer_recreated: AtomicU64,
    pub(crate) decode_errors: AtomicU64,
    pub(crate) dead_lettered: AtomicU64,
    pub(crate) published: AtomicU64,
    pub(crate) published_again: AtomicU64,
    pub(crate) publish_errors: AtomicU64,
    pub(crate) encode_errors: AtomicU64,
    pub(crate) last_error: Mutex<Option<String>>,
}

impl Counters {
    pub(crate) fn new() -> Arc<Self> {
        Arc::new(Self::default())
    }

    pub(crate) fn add(counter: &AtomicU64, n: u64) {
        counter.fetch_add(n, Ordering::Relaxed);
    }

    pub(crate) fn error(&self, what: impl fmt::Display) {
        let text = what.to_string();
        tracing::warn!(target: "correlator_nats", "{text}");
        if let Ok(mut last) = self.last_error.lock() {
            *last = Some(text);
        }
    }

    /// Called for each connection event of the client.
    pub(crate) fn connection_event(&self, event: &async_nats::Event) {
        match event {
            async_nats::Event::Connected => {
                if !self.connected.swap(true, Ordering::AcqRel)
                    && self.disconnects.load(Ordering::Acquire) > 0
                {
                    Self::add(&self.reconnects, 1);
                }
            }
            async_nats::Event::Disconnected => {
                if self.connected.swap(false, Ordering::AcqRel) {
                    Self::add(&self.disconnects, 1);
                }
            }
            other => self.error(format_args!("NATS connection: {other}")),
        }
    }

    pub(crate) fn snapshot(&self) -> ConnectorStatus {
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        ConnectorStatus {
            connected: self.connected.load(Ordering::Acquire),
            disconnects: get(&self.disconnects),
            reconnects: get(&self.reconnects),
            received: get(&self.received),
            delivered: get(&self.delivered),
            acknowledged: get(&self.acknowledged),
            duplicates: get(&self.duplicates),
            already_processed: get(&self.already_processed),
            consumer_recreated: get(&self.consumer_recreated),
            decode_errors: get(&self.decode_errors),
            dead_lettered: get(&self.dead_lettered),
            published: get(&self.published),
            published_again: get(&self.published_again),
            publish_errors: get(&self.publish_errors),
            encode_errors: get(&self.encode_errors),
            last_error: self.last_error.lock().ok().and_then(|l| l.clone()),
        }
    }
}

/// A snapshot of one connector: connection state and counts since it was connected.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ConnectorStatus {
    /// Whether the client is connected to a server now. While it is not, it reconnects with
    /// backoff (see [`ConnectorOptions`](crate::ConnectorOptions)).
    pub connected: bool,
    /// Connections lost.
    pub disconnects: u64,
    /// Connections re-established after a loss.
    pub reconnects: u64,
    /// Messages received from subjects and consumers (duplicates and bad ones included).
    pub received: u64,
    /// Events handed to the engine.
    pub delivered: u64,
    /// JetStream messages acknowledged, each after the engine processed its event.
    pub acknowledged: u64,
    /// Redelivered JetStream messages dropped by de-duplication.
    pub duplicates: u64,
    /// JetStream messages the server delivered again after the engine had processed them (a
    /// lost acknowledgement, or a server that crashed before storing it): acknowledged again,
    /// not handed to the engine.
    pub already_processed: u64,
    /// Durable consumers re-created because they had been deleted on the server while their
    /// ingress ran (each also logged and shown in `last_error`).
    pub consumer_recreated: u64,
    /// Payloads the codec refused.
    pub decode_errors: u64,
    /// Payloads published to the dead-letter subject.
    pub dead_lettered: u64,
    /// Events published by egress.
    pub published: u64,
    /// Of those, messages a JetStream stream already had under their message id
    /// ([`Connector::publish_output_jetstream`](crate::Connector::publish_output_jetstream)):
    /// published again after a recovery, kept once.
    pub published_again: u64,
    /// Events egress could not publish.
    pub publish_errors: u64,
    /// Events the codec could not encode (skipped by egress).
    pub encode_errors: u64,
    /// The last error seen, if any.
    pub last_error: Option<String>,
}

impl fmt::Display for ConnectorStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "nats {} (lost {}, reconnected {}): received {}, delivered {}, acked {}, duplicates {}, \
             already processed {}, consumers re-created {}, decode errors {}, dead letters {}, \
             published {} ({} again), publish errors {}",
            if self.connected { "connected" } else { "DISCONNECTED" },
            self.disconnects,
            self.reconnects,
            self.received,
            self.delivered,
            self.acknowledged,
            self.duplicates,
            self.already_processed,
            self.consumer_recreated,
            self.decode_errors,
            self.dead_lettered,
            self.published,
            self.published_again,
            self.publish_errors,
        )
    }
}
