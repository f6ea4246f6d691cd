//! How the user's events become message payloads and back.

use std::fmt;
use std::marker::PhantomData;

use serde::de::DeserializeOwned;
use serde::Serialize;

/// Turns events into payloads (egress) and payloads into events (ingress).
///
/// A payload that [`decode`](Self::decode) refuses is never a crash: the connector counts it in
/// [`ConnectorStatus::decode_errors`](crate::ConnectorStatus::decode_errors) and publishes it,
/// unchanged, to the dead-letter subject, with the error in a header.
pub trait Codec<E>: Send + Sync + 'static {
    /// The payload of `event`.
    ///
    /// # Errors
    /// A [`CodecError`] when the event cannot be written; the egress counts it and skips the
    /// event.
    fn encode(&self, event: &E) -> Result<Vec<u8>, CodecError>;

    /// The event in `payload`.
    ///
    /// # Errors
    /// A [`CodecError`] when the payload is not an event: it goes to the dead-letter subject.
    fn decode(&self, payload: &[u8]) -> Result<E, CodecError>;

    /// The event in `payload`, the message at `stream_sequence` of its JetStream stream: a codec
    /// whose events carry their position (for checkpoints, `Event::position`) stamps it here.
    /// Default: [`decode`](Self::decode), the sequence unused.
    ///
    /// # Errors
    /// As [`decode`](Self::decode).
    fn decode_at(&self, payload: &[u8], stream_sequence: u64) -> Result<E, CodecError> {
        let _ = stream_sequence;
        self.decode(payload)
    }
}

/// Why a codec refused an event or a payload; the message says what was wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CodecError(pub String);

impl fmt::Display for CodecError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for CodecError {}

/// JSON payloads through `serde_json`: any `Serialize + DeserializeOwned` event.
///
/// # Example
/// ```
/// use correlator_nats::{Codec, JsonCodec};
///
/// #[derive(serde::Serialize, serde::Deserialize, Debug, PartialEq)]
/// struct Reading { sensor: String, celsius: f64 }
///
/// let codec = JsonCodec::<Reading>::new();
/// let bytes = codec.encode(&Reading { sensor: "s1".into(), celsius: 21.5 })?;
/// assert_eq!(codec.decode(&bytes)?, Reading { sensor: "s1".into(), celsius: 21.5 });
/// assert!(codec.decode(b"not json").is_err());
/// # Ok::<(), correlator_nats::CodecError>(())
/// ```
pub struct JsonCodec<E>(PhantomData<fn() -> E>);

impl<E> JsonCodec<E> {
    /// A JSON codec for `E`.
    pub fn new() -> Self {
        Self(PhantomData)
    }
}

impl<E> Default for JsonCodec<E> {
    fn default() -> Self {
        Self::new()
    }
}

impl<E: Serialize + DeserializeOwned + 'static> Codec<E> for JsonCodec<E> {
    fn encode(&self, event: &E) -> Result<Vec<u8>, CodecError> {
        serde_json::to_vec(event).map_err(|e| CodecError(format!("cannot write JSON: {e}")))
    }

    fn decode(&self, payload: &[u8]) -> Result<E, CodecError> {
        serde_json::from_slice(payload).map_err(|e| {
            CodecError(format!(
                "payload is not a JSON {}: {e}",
                std::any::type_name::<E>()
            ))
        })
    }
}
