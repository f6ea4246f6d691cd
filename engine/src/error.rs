//! Typed errors. Every error a user can cause comes back as one of these, with a message that says
//! what to change (SPEC R8.2); a send error always hands the event back, so nothing is lost.
//!
//! Owns the error types. May import `id` only.

use std::fmt;

use crate::id::ContextRef;

/// Errors of configuration and of correlator operations other than sending.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Error {
    /// A pinning plan or context option names a core this machine does not have.
    NoSuchCore {
        /// The core asked for.
        core: usize,
        /// The cores this process may run on.
        available: Vec<usize>,
    },
    /// `inbox_capacity` outside `1..=MAX`.
    InvalidCapacity {
        /// The capacity asked for.
        requested: usize,
        /// The largest capacity accepted.
        max: usize,
    },
    /// An output's bound ([`OutputOptions::bounded`](crate::OutputOptions::bounded)) outside
    /// `1..=MAX`.
    InvalidOutputCapacity {
        /// The bound asked for.
        requested: usize,
        /// The largest bound accepted.
        max: usize,
    },
    /// A size limit of the builder was set to zero.
    InvalidLimit {
        /// Which setting.
        setting: &'static str,
    },
    /// A size limit of the builder is above the largest value the engine accepts.
    LimitTooLarge {
        /// Which setting.
        setting: &'static str,
        /// The value asked for.
        requested: usize,
        /// The largest value accepted.
        max: usize,
    },
    /// The memory a setting asks for could not be allocated (an inbox of `inbox_capacity`
    /// entries, say, when the machine has less memory than that needs).
    AllocationFailed {
        /// Which setting sized the allocation.
        setting: &'static str,
        /// Its value.
        requested: usize,
    },
    /// Creating one more context would exceed `max_contexts`.
    TooManyContexts {
        /// The configured maximum.
        max: usize,
    },
    /// Naming one more channel would exceed `max_channels`.
    TooManyChannels {
        /// The configured maximum.
        max: usize,
    },
    /// The context reference does not belong to this correlator.
    UnknownContext(ContextRef),
    /// The operation needs a running correlator, but it has been shut down.
    ShutDown,
    /// The target context has stopped.
    ContextStopped(ContextRef),
    /// The operating system refused to start a context thread.
    ThreadSpawn(String),
    /// The target inbox was full before the correlator was started: waiting could never end.
    FullBeforeStart(ContextRef),
    /// [`Correlator::shutdown`](crate::Correlator::shutdown) was called from a handler (or a hook)
    /// running in this context: shutdown waits for every context to finish, this one included, so
    /// it could never return.
    ShutdownFromContext(ContextRef),
    /// [`Correlator::create_pool`](crate::Correlator::create_pool) was asked for no partition, or
    /// for more than `max_contexts` still allows.
    InvalidPoolSize {
        /// The partitions asked for.
        requested: usize,
        /// How many more contexts the correlator allows now.
        max: usize,
    },
    /// [`Pool::load_per_key`](crate::Pool::load_per_key) was given no event kind: its dispatchers
    /// would listen to nothing and no key would ever get an instance.
    NoKinds,
    /// A stream query's settings cannot work ([`Scope::query`](crate::Scope::query)): a window or
    /// period of zero length, a count window of zero values, `every` on a tumbling window.
    InvalidQuery {
        /// What is wrong, and what to change.
        why: &'static str,
    },
    /// The recording's sink failed (`record_to`): the recording stopped at that point; the
    /// run itself went on. The sink's error message.
    Recording(String),
    /// A replay (`replay`) differed from its recording: where first (SPEC §10).
    Diverged(Box<Divergence>),
    /// `Correlator::named_output` was given a name another output has.
    OutputNameTaken {
        /// The name.
        name: String,
    },
    /// Two monitor types registered with `CorrelatorBuilder::persistent` have the same
    /// `Persistent::NAME` (R11.10): a checkpoint could not say which one an instance is.
    #[cfg(feature = "checkpoint")]
    PersistentName {
        /// The name.
        name: &'static str,
    },
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Recording(e) => write!(f, "the recording's sink failed: {e}"),
            Error::InvalidQuery { why } => write!(f, "invalid stream query: {why}"),
            Error::Diverged(d) => d.fmt(f),
            Error::OutputNameTaken { name } => write!(
                f,
                "an output named `{name}` exists already; give each named output its own name"
            ),
            #[cfg(feature = "checkpoint")]
            Error::PersistentName { name } => write!(
                f,
                "two persistent monitor types are named `{name}`; give each its own \
                 `Persistent::NAME`"
            ),
            Error::NoSuchCore { core, available } => write!(
                f,
                "core {core} does not exist for this process (available cores: {available:?}); \
                 fix the pinning plan or leave pinning off"
            ),
            Error::InvalidCapacity { requested, max } => write!(
                f,
                "inbox capacity {requested} is invalid; choose a capacity between 1 and {max}"
            ),
            Error::InvalidOutputCapacity { requested, max } => write!(
                f,
                "output bound {requested} is invalid; choose a bound between 1 and {max} \
                 (`OutputOptions::bounded`)"
            ),
            Error::InvalidLimit { setting } => {
                write!(f, "builder setting `{setting}` must be at least 1")
            }
            Error::LimitTooLarge {
                setting,
                requested,
                max,
            } => write!(
                f,
                "builder setting `{setting}` = {requested} is too large; choose at most {max}"
            ),
            Error::AllocationFailed { setting, requested } => write!(
                f,
                "the memory for `{setting}` = {requested} could not be allocated; lower \
                 `{setting}`"
            ),
            Error::TooManyContexts { max } => write!(
                f,
                "cannot create another context: the correlator allows {max}; raise \
                 `max_contexts` on the builder"
            ),
            Error::TooManyChannels { max } => write!(
                f,
                "cannot name another channel: the correlator allows {max}; raise \
                 `max_channels` on the builder"
            ),
            Error::UnknownContext(c) => write!(
                f,
                "{c} does not belong to this correlator; use a reference returned by it"
            ),
            Error::ShutDown => write!(
                f,
                "the correlator has been shut down; build a new one to process more events"
            ),
            Error::ContextStopped(c) => write!(f, "{c} has stopped and takes no more entries"),
            Error::ThreadSpawn(e) => write!(f, "could not start a context thread: {e}"),
            Error::FullBeforeStart(c) => write!(
                f,
                "the inbox of {c} is full and the correlator is not started, so waiting could \
                 never end; call `start()` first or raise `inbox_capacity`"
            ),
            Error::ShutdownFromContext(c) => write!(
                f,
                "shutdown() was called from a handler running in {c}; shutdown waits for every \
                 context to finish, so call it from a thread of your own (a handler can signal \
                 that thread, for example through an output channel)"
            ),
            Error::InvalidPoolSize { requested, max } => write!(
                f,
                "a pool of {requested} partitions is invalid; choose between 1 and {max} (the \
                 contexts `max_contexts` still allows), or raise `max_contexts` on the builder"
            ),
            Error::NoKinds => write!(
                f,
                "load_per_key needs at least one event kind to dispatch; name the kinds whose \
                 events create and feed the per-key instances"
            ),
        }
    }
}

impl std::error::Error for Error {}

/// Why a send was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum SendErrorKind {
    /// The inbox is at capacity (non-blocking send).
    Full,
    /// The bound of a timed send passed before there was room.
    Timeout,
    /// External input is closed: the correlator is shutting down or has shut down.
    Closed,
    /// The target context has stopped.
    ContextStopped,
    /// The context reference does not belong to this correlator.
    UnknownContext,
    /// The inbox is full and the correlator was never started: a blocking send could not end.
    FullBeforeStart,
    /// A [`PoolInput`](crate::PoolInput) was given an event whose [`Event::key`](crate::Event::key)
    /// is `None`: no partition owns it.
    NoKey,
    /// An all-or-nothing batch send ([`InputHandle::try_send_batch_to`](crate::InputHandle::try_send_batch_to),
    /// [`send_batch_to_timeout`](crate::InputHandle::send_batch_to_timeout)) was given more events
    /// than the inbox holds: they could never fit at once.
    BatchTooLarge,
}

/// A refused send. It owns the event, so nothing is lost: take it back with
/// [`into_inner`](Self::into_inner).
#[derive(Clone, PartialEq, Eq)]
pub struct SendError<E> {
    kind: SendErrorKind,
    target: Option<ContextRef>,
    event: E,
}

impl<E> SendError<E> {
    pub(crate) fn new(kind: SendErrorKind, target: Option<ContextRef>, event: E) -> Self {
        Self {
            kind,
            target,
            event,
        }
    }

    /// Why the send was refused.
    pub fn kind(&self) -> SendErrorKind {
        self.kind
    }

    /// The context that refused it, when one did.
    pub fn target(&self) -> Option<ContextRef> {
        self.target
    }

    /// The event that was not sent.
    pub fn event(&self) -> &E {
        &self.event
    }

    /// Takes the event back (as `std::sync::mpsc::SendError` and crossbeam's errors do).
    pub fn into_inner(self) -> E {
        self.event
    }
}

impl<E> fmt::Debug for SendError<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SendError")
            .field("kind", &self.kind)
            .field("target", &self.target)
            .finish_non_exhaustive()
    }
}

impl<E> fmt::Display for SendError<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let to = match self.target {
            Some(c) => format!(" to {c}"),
            None => String::new(),
        };
        match self.kind {
            SendErrorKind::Full => write!(
                f,
                "send{to} refused: the inbox is full; retry later, use a blocking or timed send, \
                 or raise `inbox_capacity`"
            ),
            SendErrorKind::Timeout => write!(
                f,
                "send{to} timed out waiting for room; the receiver is slower than the senders: \
                 retry, lengthen the timeout, or raise `inbox_capacity`"
            ),
            SendErrorKind::Closed => write!(
                f,
                "send{to} refused: the correlator is shutting down or shut down; it takes no more \
                 external input"
            ),
            SendErrorKind::ContextStopped => {
                write!(f, "send{to} refused: the context has stopped")
            }
            SendErrorKind::UnknownContext => write!(
                f,
                "send{to} refused: the context does not belong to this correlator"
            ),
            SendErrorKind::FullBeforeStart => write!(
                f,
                "send{to} refused: the inbox is full and the correlator is not started, so a \
                 blocking send could never end; call `start()` first or raise `inbox_capacity`"
            ),
            SendErrorKind::NoKey => write!(
                f,
                "send{to} refused: the event has no key (`Event::key()` returned `None`), so no \
                 pool partition owns it; give it a key, or send it to a context with `send_to`"
            ),
            SendErrorKind::BatchTooLarge => write!(
                f,
                "send{to} refused: the batch holds more events than the inbox's capacity, so it \
                 can never fit at once; send it in parts of at most `inbox_capacity` events, use \
                 the blocking `send_batch_to` (which takes any size), or raise `inbox_capacity`"
            ),
        }
    }
}

impl<E> std::error::Error for SendError<E> {}

/// A refused or partly sent batch (the `send_batch*` methods). The events that were not sent are
/// still in the caller's vector, in their order; [`sent`](Self::sent) says how many went before the
/// refusal (always 0 for the all-or-nothing `try_` and timed sends).
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct SendBatchError {
    kind: SendErrorKind,
    target: Option<ContextRef>,
    sent: usize,
}

impl SendBatchError {
    pub(crate) fn new(kind: SendErrorKind, target: Option<ContextRef>, sent: usize) -> Self {
        Self { kind, target, sent }
    }

    /// Why the rest of the batch was refused.
    pub fn kind(&self) -> SendErrorKind {
        self.kind
    }

    /// The context that refused it, when one did.
    pub fn target(&self) -> Option<ContextRef> {
        self.target
    }

    /// How many events of the batch were sent (and removed from the front of the vector) before the
    /// refusal.
    pub fn sent(&self) -> usize {
        self.sent
    }
}

impl fmt::Debug for SendBatchError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SendBatchError")
            .field("kind", &self.kind)
            .field("target", &self.target)
            .field("sent", &self.sent)
            .finish()
    }
}

impl fmt::Display for SendBatchError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The single send's message says what to change; the batch adds what went.
        let single = SendError::new(self.kind, self.target, ());
        write!(
            f,
            "batch {single} ({} events sent before the refusal; the rest are still in the vector)",
            self.sent
        )
    }
}

impl std::error::Error for SendBatchError {}

/// Where a replay first differed from its recording.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Divergence {
    /// The context where it differed.
    pub context: u32,
    /// Inbox entries the context had processed before (the one being processed when it differed
    /// is this number plus one).
    pub entry: u64,
    /// The index of the record in the context's stream that the replay did not match.
    pub position: u64,
    /// What the recording has there.
    pub expected: String,
    /// What the replay did instead.
    pub found: String,
}

impl fmt::Display for Divergence {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "the replay diverged in context {} after {} entries, at record {} of its stream: the \
             recording has {}, the replay {}",
            self.context, self.entry, self.position, self.expected, self.found
        )
    }
}

impl std::error::Error for Divergence {}
