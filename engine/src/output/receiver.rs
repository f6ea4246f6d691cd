//! The typed [`Output`] handle that monitors emit to and the [`OutputReceiver`] that reads an
//! output: blocking, non-blocking and (feature `async`) async takes, and its iterators.
//!
//! Owns the output's public handles. May import `sync` and `record` (the fingerprint).

use std::fmt;
use std::marker::PhantomData;
use std::time::{Duration, Instant};

use super::{OutputQueue, RecvError, RecvTimeoutError, TryRecvError};
use crate::sync::StdArc;

/// A typed output: where [`Scope::emit_to`](crate::Scope::emit_to) puts values of any type `A`,
/// for the one [`OutputReceiver<A>`] made with it by
/// [`Correlator::typed_output`](crate::Correlator::typed_output). The type is checked by the
/// compiler: an `Output<A>` only takes `A`s. Cheap to clone (keep one in a monitor's state); a
/// clone is the same output.
pub struct Output<A> {
    pub(crate) queue: StdArc<OutputQueue<A>>,
    /// What a recording writes for each value emitted to it ([`fingerprinted`](Self::fingerprinted)).
    pub(crate) fingerprint: Option<fn(&A) -> u64>,
}

impl<A> Clone for Output<A> {
    fn clone(&self) -> Self {
        Self {
            queue: self.queue.clone(),
            fingerprint: self.fingerprint,
        }
    }
}

impl<A> fmt::Debug for Output<A> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("Output").field(&self.queue).finish()
    }
}

impl<A> Output<A> {
    /// The same output, with every value emitted through it (or its clones made after this)
    /// fingerprinted in a recording (`record_to`): a replay then checks each value, not only
    /// that an emit happened there (SPEC §10). The fingerprint is FNV-1a over what the value's
    /// `Hash` writes ([`record::fingerprint`](crate::record::fingerprint)), so it is the same in
    /// every run of a build; it costs one hash per emit while recording or replaying, nothing
    /// otherwise.
    pub fn fingerprinted(mut self) -> Self
    where
        A: std::hash::Hash,
    {
        self.fingerprint = Some(|a: &A| crate::record::fingerprint(a));
        self
    }

    /// Events this output lost so far: dropped by its overflow policy, or discarded because
    /// they were emitted after its receiver was dropped or the correlator shut down (nothing is
    /// discarded without a count).
    pub fn dropped(&self) -> u64 {
        self.queue.dropped()
    }

    /// Its id: unique among the correlator's outputs (from 1), the one
    /// [`BlockedOnOutput::output`](crate::BlockedOnOutput::output) shows while a context waits
    /// for room in it; the same as its receiver's [`OutputReceiver::id`].
    pub fn id(&self) -> u64 {
        self.queue.id()
    }

    /// What it is, as the status and the log name it: `typed output of <the value type>`.
    pub fn name(&self) -> &str {
        self.queue.name()
    }

    /// Whether its receiver was dropped or the correlator has shut down: what is emitted to it
    /// now is discarded.
    pub fn is_disconnected(&self) -> bool {
        self.queue.is_disconnected()
    }
}

/// Receives what is sent or emitted to one output, in the order each producer (context or input
/// handle) produced it (R4.2, R4.3). The stream ends (`Disconnected`, `None`) once the correlator
/// has shut down and everything was received, including what `on_die` hooks emitted during
/// shutdown; a receiver made after shutdown has ended at once.
///
/// One consumer: `Send` (move it to the thread or task that reads) but not `Sync`. Dropping it
/// releases producers waiting for room; what they emit to it after that is discarded.
pub struct OutputReceiver<A> {
    queue: StdArc<OutputQueue<A>>,
    /// Not `Sync`: one receiver slot (`sleepers.receiver`), one consumer.
    _one_consumer: PhantomData<std::cell::Cell<()>>,
}

impl<A> fmt::Debug for OutputReceiver<A> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("OutputReceiver").field(&self.queue).finish()
    }
}

impl<A> OutputReceiver<A> {
    pub(crate) fn new(queue: StdArc<OutputQueue<A>>) -> Self {
        Self {
            queue,
            _one_consumer: PhantomData,
        }
    }

    /// Waits for the next event.
    ///
    /// # Errors
    /// [`RecvError`] once the correlator has shut down and nothing is left.
    pub fn recv(&self) -> Result<A, RecvError> {
        self.queue.take_until(None).map_err(|_| RecvError)
    }

    /// The next event if one is waiting.
    ///
    /// # Errors
    /// [`TryRecvError::Empty`] if none is waiting, [`TryRecvError::Disconnected`] after shutdown
    /// once nothing is left.
    pub fn try_recv(&self) -> Result<A, TryRecvError> {
        let closed = self.queue.is_closed();
        match self.queue.take() {
            Some(a) => Ok(a),
            None if closed => Err(TryRecvError::Disconnected),
            None => Err(TryRecvError::Empty),
        }
    }

    /// Waits at most `timeout` for the next event.
    ///
    /// # Errors
    /// [`RecvTimeoutError::Timeout`], or [`RecvTimeoutError::Disconnected`] after shutdown once
    /// nothing is left.
    pub fn recv_timeout(&self, timeout: Duration) -> Result<A, RecvTimeoutError> {
        self.queue.take_until(Some(Instant::now() + timeout))
    }

    /// Everything received until the stream ends (blocking).
    pub fn iter(&self) -> Iter<'_, A> {
        Iter { rx: self }
    }

    /// Everything waiting now, without blocking.
    pub fn try_iter(&self) -> TryIter<'_, A> {
        TryIter { rx: self }
    }

    /// Events queued now.
    pub fn len(&self) -> usize {
        self.queue.len()
    }

    /// Whether nothing is queued now.
    pub fn is_empty(&self) -> bool {
        self.queue.is_empty()
    }

    /// The output's bound.
    pub fn capacity(&self) -> usize {
        self.queue.capacity()
    }

    /// Events this output lost so far: dropped by its overflow policy (discards after the
    /// receiver is dropped count in [`Output::dropped`]).
    pub fn dropped(&self) -> u64 {
        self.queue.dropped()
    }

    /// Its id: unique among the correlator's outputs (from 1), the one
    /// [`BlockedOnOutput::output`](crate::BlockedOnOutput::output) shows while a context waits
    /// for room in it.
    ///
    /// ```
    /// use correlator::{Correlator, Event};
    /// # #[derive(Clone, Debug)] struct Alert;
    /// # impl Event for Alert { type Kind = (); fn kind(&self) {} }
    /// let c = Correlator::<Alert>::builder().build()?;
    /// let rx = c.output(c.channel("alerts")?);
    /// assert!(rx.id() >= 1);
    /// assert_eq!(rx.name(), "channel \"alerts\"");
    /// # Ok::<(), correlator::Error>(())
    /// ```
    pub fn id(&self) -> u64 {
        self.queue.id()
    }

    /// What it is, as the status and the log name it: `channel "<name>"` for a channel's output,
    /// `typed output of <the value type>` for a typed one.
    pub fn name(&self) -> &str {
        self.queue.name()
    }
}

#[cfg(feature = "async")]
impl<A> OutputReceiver<A> {
    /// Waits for the next event without blocking the thread: a future for any executor. The
    /// waker is registered with the output (no wake-up is lost: see the `output` module docs);
    /// a dropped future loses nothing.
    ///
    /// It takes the receiver by `&mut`, so the future is `Send` whenever the receiver is (with
    /// `A: Send`): `rx.recv_async().await` works in a task that `tokio::spawn` moves between
    /// threads (a shared borrow of the receiver, which is not `Sync`, would not be `Send`).
    ///
    /// # Errors
    /// [`RecvError`] once the correlator has shut down and nothing is left.
    pub fn recv_async(&mut self) -> RecvFuture<'_, A> {
        RecvFuture { rx: self }
    }
}

/// The future of [`OutputReceiver::recv_async`].
#[cfg(feature = "async")]
#[must_use = "futures do nothing unless polled"]
#[derive(Debug)]
pub struct RecvFuture<'a, A> {
    rx: &'a mut OutputReceiver<A>,
}

#[cfg(feature = "async")]
impl<A> std::future::Future for RecvFuture<'_, A> {
    type Output = Result<A, RecvError>;

    fn poll(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Self::Output> {
        self.rx
            .queue
            .poll_take(cx.waker())
            .map(|a| a.ok_or(RecvError))
    }
}

/// The receiver as an async stream: `None` once the correlator has shut down and nothing is left.
#[cfg(feature = "async")]
impl<A> futures_core::Stream for OutputReceiver<A> {
    type Item = A;

    fn poll_next(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<A>> {
        self.queue.poll_take(cx.waker())
    }
}

impl<A> Drop for OutputReceiver<A> {
    fn drop(&mut self) {
        self.queue.disconnect();
    }
}

/// The blocking iterator of [`OutputReceiver::iter`].
#[derive(Debug)]
pub struct Iter<'a, A> {
    rx: &'a OutputReceiver<A>,
}

impl<A> Iterator for Iter<'_, A> {
    type Item = A;
    fn next(&mut self) -> Option<A> {
        self.rx.recv().ok()
    }
}

/// The non-blocking iterator of [`OutputReceiver::try_iter`].
#[derive(Debug)]
pub struct TryIter<'a, A> {
    rx: &'a OutputReceiver<A>,
}

impl<A> Iterator for TryIter<'_, A> {
    type Item = A;
    fn next(&mut self) -> Option<A> {
        self.rx.try_recv().ok()
    }
}

/// The blocking iterator of a receiver taken by value.
#[derive(Debug)]
pub struct IntoIter<A> {
    rx: OutputReceiver<A>,
}

impl<A> Iterator for IntoIter<A> {
    type Item = A;
    fn next(&mut self) -> Option<A> {
        self.rx.recv().ok()
    }
}

impl<A> IntoIterator for OutputReceiver<A> {
    type Item = A;
    type IntoIter = IntoIter<A>;
    fn into_iter(self) -> IntoIter<A> {
        IntoIter { rx: self }
    }
}

impl<'a, A> IntoIterator for &'a OutputReceiver<A> {
    type Item = A;
    type IntoIter = Iter<'a, A>;
    fn into_iter(self) -> Iter<'a, A> {
        self.iter()
    }
}
