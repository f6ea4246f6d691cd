//! The tokio adapter: how every scenario that runs tokio builds and drives it. From plain threads,
//! `mpsc::channel(capacity)` with `blocking_send` and the batch receive `blocking_recv_many`
//! ([`TokioMpsc`], a [`BlockingChannel`]: the stream peers); in a service, a `current_thread`
//! runtime on a pinned thread of its own ([`runtime_thread`]), bounded channels ([`channel`])
//! and the relay task of `async/tokio/tokio-mpsc` ([`relay`]).
//!
//! May import `kit` and `peers::shape`.

use super::shape::BlockingChannel;
use crate::pin::{Placement, Probe};
use crate::scenario::{Ev, FifoCheck};
use std::future::Future;

/// Events a tokio receiver takes per `blocking_recv_many` call at most.
pub const TOKIO_BATCH: usize = 256;

/// `tokio::sync::mpsc::channel`, used from plain threads: `blocking_send`, and the batch receive
/// `blocking_recv_many`.
pub struct TokioMpsc;
impl BlockingChannel for TokioMpsc {
    type Tx = tokio::sync::mpsc::Sender<Ev>;
    type Rx = tokio::sync::mpsc::Receiver<Ev>;
    fn make(capacity: usize) -> (Self::Tx, Self::Rx) {
        tokio::sync::mpsc::channel(capacity)
    }
    fn clone_tx(tx: &Self::Tx) -> Self::Tx {
        tx.clone()
    }
    fn send(tx: &Self::Tx, e: Ev) -> bool {
        tx.blocking_send(e).is_ok()
    }
    fn drain(mut rx: Self::Rx, mut f: impl FnMut(Ev)) {
        let mut buf = Vec::with_capacity(TOKIO_BATCH);
        while rx.blocking_recv_many(&mut buf, TOKIO_BATCH) > 0 {
            for e in buf.drain(..) {
                f(e);
            }
        }
    }
    fn recv(rx: &mut Self::Rx) -> Option<Ev> {
        rx.blocking_recv()
    }
}

/// A bounded tokio mpsc channel of `capacity` events, for tasks (`send(ev).await`,
/// `recv().await`).
pub fn channel(
    capacity: usize,
) -> (
    tokio::sync::mpsc::Sender<Ev>,
    tokio::sync::mpsc::Receiver<Ev>,
) {
    tokio::sync::mpsc::channel::<Ev>(capacity)
}

/// A thread pinned to `core` (when the plan pins) that runs the future `main` makes on a tokio
/// `current_thread` runtime of its own, and hands back its output and the thread's placement.
pub fn runtime_thread<T, F>(
    role: &'static str,
    core: Option<usize>,
    main: impl FnOnce() -> F + Send + 'static,
) -> std::thread::JoinHandle<(T, Placement)>
where
    T: Send + 'static,
    F: Future<Output = T>,
{
    std::thread::spawn(move || {
        let probe = Probe::start(role, core);
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("a current_thread runtime");
        let out = rt.block_on(main());
        (out, probe.finish())
    })
}

/// The relay task of `async/tokio/tokio-mpsc`: `recv().await` from `rx`, the sequence check,
/// `send(ev).await` into `tx`, until `rx` closes or `tx`'s receiver is gone; hands back its check.
pub async fn relay(
    mut rx: tokio::sync::mpsc::Receiver<Ev>,
    tx: tokio::sync::mpsc::Sender<Ev>,
) -> FifoCheck {
    let mut fifo = FifoCheck::new(1);
    while let Some(e) = rx.recv().await {
        fifo.take(e.seq);
        if tx.send(e).await.is_err() {
            break;
        }
    }
    fifo
}
