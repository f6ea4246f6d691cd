//! Shutdown: the sequence every `shutdown`, `shutdown_async` and drop goes through, once.
//!
//! # Shutdown (R8.1)
//! 1. External input closes: every inbox refuses input handles from now on (one atomic flag in each
//!    inbox's tail word, so a handle's reservation is either before it, and counted, or refused).
//! 2. No output makes anyone wait any more: a full output with the `Block` policy takes what is
//!    still emitted beyond its bound (see the `output` module), so that a receiver read only after
//!    `shutdown` returns cannot hang it. If the correlator was never started, it starts, so that
//!    everything accepted is processed.
//! 3. Quiescence is detected by scanning every context twice: if both scans find every inbox count at
//!    zero and every context's "entries done" counter unchanged, no context processed anything in
//!    between, and since a context releases an entry's inbox place only after it (and all it routed)
//!    is processed, nothing was in flight either: no new work can appear. Otherwise scan again.
//! 4. *Stopping*: context creation closes (under the lock that creates contexts, so the list of
//!    threads to join is complete), every inbox closes, and only then is every thread told to exit;
//!    each ends its remaining instances with [`DieReason::Shutdown`](crate::DieReason::Shutdown) and
//!    exits; the threads are joined. From this point an `on_die` hook can still route, emit and
//!    send to output receivers, but creating a context is refused ([`Error::ShutDown`]), every send
//!    or `spawn_to` into a context is refused ([`Error::ContextStopped`]: all inboxes are closed
//!    before any instance ends), and a local `spawn` is dropped: a refused spawn runs no
//!    initialiser and creates no instance, so no `on_die` is owed for it, and an `on_die` that
//!    spawns again cannot keep shutdown going.
//!
//! Concurrent calls are serialised: the first performs the shutdown, the others wait for it and
//! return its result. `shutdown_async` goes through the same lock from a thread of its own, which
//! holds the shared state and the [`Lifecycle`] (helper threads and the result), not the
//! correlator: the future borrows nothing. A call from a context's own thread (a handler or hook) is refused with
//! [`Error::ShutdownFromContext`]: it would wait for itself.
//!
//! Owns the sequence ([`Lifecycle::shutdown`]) and the future of `shutdown_async`. May import the
//! leaves, `metrics` (the final figures), `shared` and `status`.

use std::time::Duration;

use crate::error::Error;
use crate::event::Event;
use crate::id::ContextRef;
use crate::shared::Shared;
use crate::status::Status;
use crate::sync::{self, Arc, Ordering};

use super::{status_of, Lifecycle};

impl Lifecycle {
    /// [`Correlator::shutdown`](super::Correlator::shutdown) over the shared state: every caller, blocking or async, goes
    /// through the one result mutex, so one shutdown runs and all get its result.
    pub(super) fn shutdown<E: Event>(&self, shared: &Arc<Shared<E>>) -> Result<Status, Error> {
        if let Some(ctx) = shared.context_of_current_thread() {
            return Err(Error::ShutdownFromContext(ctx));
        }
        let mut result = sync::lock(&self.shutdown);
        if let Some(r) = &*result {
            return r.clone();
        }
        let r = self.shut_down_now(shared);
        *result = Some(r.clone());
        r
    }

    /// The shutdown itself (see the module docs); called once.
    fn shut_down_now<E: Event>(&self, shared: &Arc<Shared<E>>) -> Result<Status, Error> {
        // A checkpoint in progress finishes first (the contexts still run); no other starts.
        #[cfg(feature = "checkpoint")]
        if let Some(job) = sync::lock(&self.checkpointer).take() {
            job.stop();
        }
        if let Some(clock) = sync::lock(&self.clock).take() {
            clock.stop();
        }
        shared.input_closed.store(true, Ordering::Release);
        for ctx in shared.snapshot() {
            ctx.inbox.close_input();
        }
        // No output makes anyone wait from now on: a full `Block` output takes what the contexts
        // still emit beyond its bound, so an output nobody reads until shutdown returns cannot
        // hang it, and nothing accepted is lost (see the `output` module).
        shared.outputs.drain_all();
        self.start(shared);
        wait_quiescent(shared);
        let contexts = {
            let _creating = sync::lock(&shared.creating);
            shared.stopping.store(true, Ordering::Release);
            shared.snapshot()
        };
        // Every inbox closes before any context is told to exit, so that no `on_die` hook can put
        // an entry into an inbox that was not closed yet (and whose context might take it).
        for ctx in &contexts {
            ctx.inbox.close();
        }
        for ctx in &contexts {
            ctx.exit.store(true, Ordering::Release);
            ctx.unpark();
        }
        let threads = std::mem::take(&mut *sync::lock(&shared.threads));
        let mut failed = None;
        for (i, t) in threads.into_iter().enumerate() {
            if t.join().is_err() {
                failed.get_or_insert(ContextRef::new(shared.tag, i as u32));
            }
        }
        shared.outputs.close_all();
        if let Some(logger) = sync::lock(&self.status_logger).take() {
            logger.stop();
        }
        shared.shut_down.store(true, Ordering::Release);
        #[cfg(feature = "metrics")]
        if let Some(exporter) = sync::lock(&self.metrics_exporter).take() {
            exporter.stop();
            // The final figures, so that a scrape after shutdown sees everything processed.
            crate::metrics::export(&status_of(shared));
        }
        let journal = shared.journal.as_deref();
        let sink_error = journal.and_then(|j| j.finish());
        let divergence = journal.and_then(|j| j.divergence());
        match (failed, divergence, sink_error) {
            (Some(ctx), _, _) => Err(Error::ContextStopped(ctx)),
            (None, Some(d), _) => Err(Error::Diverged(Box::new(d))),
            (None, None, Some(e)) => Err(Error::Recording(e)),
            (None, None, None) => Ok(status_of(shared)),
        }
    }
}

/// Blocks until no context has anything accepted and not yet processed (see the module docs). A
/// context whose thread has ended is not waited for: nothing will take its entries.
fn wait_quiescent<E: Event>(shared: &Shared<E>) {
    let scan = || -> Option<Vec<u64>> {
        // A replaying context may work through recorded inputs before its first inbox entry.
        if shared
            .journal
            .as_ref()
            .is_some_and(|j| j.contexts_starting())
        {
            return None;
        }
        let contexts = shared.snapshot();
        let mut done = Vec::with_capacity(contexts.len());
        for c in &contexts {
            if !c.inbox.is_empty() && !c.stopped.load(Ordering::Acquire) {
                return None;
            }
            done.push(c.stats.done.load(Ordering::Acquire));
        }
        Some(done)
    };
    let mut pause = Duration::from_micros(50);
    loop {
        if let Some(first) = scan() {
            if scan().is_some_and(|second| second == first) {
                return;
            }
        }
        std::thread::sleep(pause);
        pause = (pause * 2).min(Duration::from_millis(5));
    }
}

/// The one-shot the shutdown thread of [`Correlator::shutdown_async`](super::Correlator::shutdown_async) completes: its result, and
/// the waker of the task that waits for it.
#[cfg(feature = "async")]
#[derive(Default)]
pub(super) struct ShutdownSlot {
    result: Option<Result<Status, Error>>,
    waker: Option<std::task::Waker>,
}

/// The future of [`Correlator::shutdown_async`](super::Correlator::shutdown_async). It holds the correlator's shared state, not
/// the correlator, so it borrows nothing and outlives a dropped correlator.
#[cfg(feature = "async")]
pub(super) enum ShutdownFuture<E: Event> {
    /// The shutdown runs on its thread, which fills the slot and wakes the task.
    Running(crate::sync::StdArc<crate::sync::StdMutex<ShutdownSlot>>),
    /// It could not run elsewhere: it runs at the first poll.
    Here(Option<(Arc<Shared<E>>, Arc<Lifecycle>)>),
    /// Known at the call (refused on a context's own thread); taken by the first poll.
    Done(Option<Result<Status, Error>>),
}

#[cfg(feature = "async")]
impl<E: Event> ShutdownFuture<E> {
    pub(super) fn start(shared: &Arc<Shared<E>>, life: &Arc<Lifecycle>) -> Self {
        if let Some(ctx) = shared.context_of_current_thread() {
            return Self::Done(Some(Err(Error::ShutdownFromContext(ctx))));
        }
        let slot = crate::sync::StdArc::new(crate::sync::StdMutex::new(ShutdownSlot::default()));
        let done = slot.clone();
        let (thread_shared, thread_life) = (shared.clone(), life.clone());
        // Set before the thread exists, so that a drop of the correlator right after this call
        // returns leaves the shutdown to the thread; cleared below if there is no thread (and no
        // earlier call's thread). The caller's `&self` keeps the correlator alive until then.
        let earlier = life.handed_off.swap(true, Ordering::AcqRel);
        let spawned = std::thread::Builder::new()
            .name("correlator-shutdown".into())
            .spawn(move || {
                // Through the one result mutex: a concurrent `shutdown` runs it or this does.
                let r = thread_life.shutdown(&thread_shared);
                drop((thread_shared, thread_life));
                let waker = {
                    let mut s = sync::lock_std(&done);
                    s.result = Some(r);
                    s.waker.take()
                };
                if let Some(w) = waker {
                    w.wake();
                }
            });
        match spawned {
            Ok(_) => Self::Running(slot),
            Err(_) => {
                if !earlier {
                    life.handed_off.store(false, Ordering::Release);
                }
                Self::Here(Some((shared.clone(), life.clone())))
            }
        }
    }
}

#[cfg(feature = "async")]
impl<E: Event> std::future::Future for ShutdownFuture<E> {
    type Output = Result<Status, Error>;

    fn poll(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Self::Output> {
        match self.get_mut() {
            Self::Running(slot) => {
                let mut s = sync::lock_std(slot);
                match s.result.take() {
                    Some(r) => std::task::Poll::Ready(r),
                    None => {
                        match &mut s.waker {
                            Some(w) if w.will_wake(cx.waker()) => {}
                            w => *w = Some(cx.waker().clone()),
                        }
                        std::task::Poll::Pending
                    }
                }
            }
            Self::Here(state) => {
                let Some((shared, life)) = state.take() else {
                    panic!("the shutdown future polled after it completed");
                };
                std::task::Poll::Ready(life.shutdown(&shared))
            }
            Self::Done(result) => match result.take() {
                Some(r) => std::task::Poll::Ready(r),
                None => panic!("the shutdown future polled after it completed"),
            },
        }
    }
}
