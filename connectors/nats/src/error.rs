//! The connector's errors.

use std::fmt;

/// Why a connector operation failed; the message says what to change.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ConnectorError {
    /// No connection to the server at `url`.
    Connect {
        /// The server URL.
        url: String,
        /// What the client said.
        reason: String,
    },
    /// A JetStream request (stream or consumer set-up) failed.
    JetStream(String),
    /// A core NATS request (subscribe, publish) failed.
    Nats(String),
    /// The engine refused an operation (see [`correlator::Error`]).
    Engine(correlator::Error),
    /// The tokio runtime or a thread of the connector could not be started.
    Runtime(String),
    /// A local server could not be started or stopped (tests, examples, the bench).
    Server(String),
    /// A source cannot be read again from a checkpoint's position
    /// ([`JetStreamSource::start_after`](crate::JetStreamSource::start_after)): its stream
    /// deletes what is acknowledged (work-queue or interest retention), so what was processed
    /// after the checkpoint may be gone. Nothing was read; make the stream keep its messages
    /// (limits retention).
    NotRetained {
        /// The stream.
        stream: String,
        /// Its retention policy.
        retention: &'static str,
    },
    /// A source cannot be read again from a checkpoint's position: its stream no longer holds
    /// the messages right after it (removed by its limits: age, count, size). Reading on would
    /// silently skip them; nothing was read. Keep the stream's messages longer than a checkpoint
    /// interval plus a restart, or recover from a newer checkpoint.
    Gone {
        /// The stream.
        stream: String,
        /// The checkpoint's position: the stream sequence read last.
        after: u64,
        /// The stream's first sequence now.
        first: u64,
    },
    /// A setting is out of range.
    Invalid {
        /// Which setting.
        setting: &'static str,
        /// What is accepted.
        expected: &'static str,
    },
}

impl fmt::Display for ConnectorError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Connect { url, reason } => write!(
                f,
                "cannot connect to the NATS server at {url}: {reason}; check that the server runs \
                 and the URL is right"
            ),
            Self::JetStream(e) => write!(
                f,
                "JetStream request failed: {e}; check that the server runs with JetStream on and \
                 that the stream exists"
            ),
            Self::Nats(e) => write!(f, "NATS request failed: {e}"),
            Self::Engine(e) => write!(f, "the correlator refused: {e}"),
            Self::Runtime(e) => write!(f, "cannot start the connector's runtime: {e}"),
            Self::Server(e) => write!(f, "local nats-server: {e}"),
            Self::NotRetained { stream, retention } => write!(
                f,
                "stream `{stream}` has {retention} retention: it deletes what was acknowledged, so \
                 it cannot be read again from a checkpoint's position; nothing was read (give it \
                 limits retention)"
            ),
            Self::Gone {
                stream,
                after,
                first,
            } => write!(
                f,
                "stream `{stream}` no longer holds the messages after the checkpoint's position \
                 {after} (its first sequence is {first}): reading on would skip {} of them; \
                 nothing was read (keep the stream's messages longer, or recover from a newer \
                 checkpoint)",
                first - after - 1
            ),
            Self::Invalid { setting, expected } => {
                write!(f, "connector setting `{setting}` must be {expected}")
            }
        }
    }
}

impl std::error::Error for ConnectorError {}

impl From<correlator::Error> for ConnectorError {
    fn from(e: correlator::Error) -> Self {
        Self::Engine(e)
    }
}

/// Maps any JetStream error into [`ConnectorError::JetStream`].
pub(crate) fn js(e: impl fmt::Display) -> ConnectorError {
    ConnectorError::JetStream(e.to_string())
}
