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
