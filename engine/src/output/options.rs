//! An output's bound and overflow policy ([`OutputOptions`], [`Overflow`]) and their defaults.
//!
//! Owns the output options and their limits. May import `error` only.

use std::time::Duration;

use crate::error::Error;

/// The bound of an output made with [`Correlator::output`](crate::Correlator::output) or
/// [`OutputOptions::default`]: 20,000 events, like an inbox (R5.1).
pub const DEFAULT_OUTPUT_CAPACITY: usize = 20_000;

/// How long a context waits for room in a full [`Overflow::Block`] output before a warning
/// names the output (1 s): see
/// [`CorrelatorBuilder::output_block_warning`](crate::CorrelatorBuilder::output_block_warning).
pub const DEFAULT_OUTPUT_BLOCK_WARNING: Duration = Duration::from_secs(1);

/// The largest output bound [`OutputOptions::bounded`] accepts (2^24 events): the ring is
/// allocated whole when the output is made.
pub const MAX_OUTPUT_CAPACITY: usize = 1 << 24;

/// What an output does with an event when it holds its bound already.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Overflow {
    /// The producer waits for room (the default): back-pressure into the emitting context, as a
    /// full inbox does (R5.1), counted in
    /// [`ContextStatus::output_blocked_ns`](crate::ContextStatus::output_blocked_ns). Nothing is
    /// lost. The wait ends when the receiver takes an event, when it is dropped (the event is
    /// discarded), or when shutdown begins (the output then takes events beyond its bound, see
    /// [`Correlator::shutdown`](crate::Correlator::shutdown)). A thread that reads a `Block`
    /// output must not itself wait on the correlator (a blocking send into a full inbox, say):
    /// the context it waits for may be waiting for it.
    #[default]
    Block,
    /// The oldest queued event is dropped to make room for the new one; counted.
    DropOldest,
    /// The new event is dropped; counted.
    DropNewest,
}

/// The bound and overflow policy of an output. The default is
/// [`bounded`](Self::bounded)`(`[`DEFAULT_OUTPUT_CAPACITY`]`)` with [`Overflow::Block`].
///
/// Why bounded and blocking by default: an unbounded output grows without limit when its reader
/// falls behind (3 million unread alerts doubled a service's memory), and the engine's contract
/// is back-pressure, never silent loss (R5.1). A reader that would rather lose old alerts than
/// slow the correlator down says so with [`Overflow::DropOldest`].
///
/// ```
/// use correlator::{OutputOptions, Overflow};
/// let latest = OutputOptions::bounded(1024).policy(Overflow::DropOldest);
/// assert_eq!(latest.capacity(), 1024);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct OutputOptions {
    capacity: usize,
    policy: Overflow,
}

impl Default for OutputOptions {
    fn default() -> Self {
        Self::bounded(DEFAULT_OUTPUT_CAPACITY)
    }
}

impl OutputOptions {
    /// An output that holds at most `capacity` events (`1..=`[`MAX_OUTPUT_CAPACITY`], checked
    /// when the output is made), with [`Overflow::Block`].
    pub fn bounded(capacity: usize) -> Self {
        Self {
            capacity,
            policy: Overflow::Block,
        }
    }

    /// What to do when the output is full (default [`Overflow::Block`]).
    pub fn policy(mut self, policy: Overflow) -> Self {
        self.policy = policy;
        self
    }

    /// The bound.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// The overflow policy.
    pub fn overflow(&self) -> Overflow {
        self.policy
    }

    /// The options if the bound is valid.
    pub(crate) fn checked(self) -> Result<Self, Error> {
        if self.capacity == 0 || self.capacity > MAX_OUTPUT_CAPACITY {
            return Err(Error::InvalidOutputCapacity {
                requested: self.capacity,
                max: MAX_OUTPUT_CAPACITY,
            });
        }
        Ok(self)
    }
}
