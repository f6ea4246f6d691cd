//! The one thread per ingress that talks to the engine's blocking API.
//!
//! The async side never blocks a runtime thread: it hands events to this thread through a bounded
//! channel. The thread sends each with the blocking [`InputHandle::send_to`], so a full inbox stops
//! it, the channel fills, and the async side stops pulling. A [`Work::Mark`] loads a [`Receipt`]
//! monitor through the same handle ([`InputHandle::load_in`]): it is an inbox entry of the same
//! sender, so (R2.2, R2.3) its `on_load` runs only once every event sent before it, and everything
//! those events routed, has been processed.

use std::sync::Arc;

use correlator::{ContextRef, Event, InputHandle, Monitor, Scope};
use tokio::sync::{mpsc, oneshot};

use crate::error::ConnectorError;
use crate::status::Counters;

/// What the async side hands to the feeder thread.
pub(crate) enum Work<E> {
    /// An event for the engine.
    Event(E),
    /// A receipt: `taken` fires once it is in the inbox (behind everything sent before it),
    /// `processed` once the engine processed everything sent before it.
    Mark {
        taken: oneshot::Sender<()>,
        processed: oneshot::Sender<()>,
    },
}

/// Signals from `on_load` that everything its handle sent before it is processed, then ends.
struct Receipt(Option<oneshot::Sender<()>>);

impl<E: Event> Monitor<E> for Receipt {
    fn on_load(&mut self, cx: &mut Scope<'_, E, Self>) {
        if let Some(done) = self.0.take() {
            let _ = done.send(());
        }
        cx.die();
    }
}

/// Starts the feeder thread of `input` into `ctx`; the channel holds at most `capacity` items.
pub(crate) fn spawn<E: Event>(
    input: InputHandle<E>,
    ctx: ContextRef,
    capacity: usize,
    counters: Arc<Counters>,
) -> Result<mpsc::Sender<Work<E>>, ConnectorError> {
    let (tx, mut rx) = mpsc::channel::<Work<E>>(capacity.max(1));
    std::thread::Builder::new()
        .name("nats-feeder".into())
        .spawn(move || {
            while let Some(work) = rx.blocking_recv() {
                match work {
                    Work::Event(event) => {
                        if let Err(e) = input.send_to(ctx, event) {
                            counters.error(format_args!("ingress stopped: {e}"));
                            return;
                        }
                        Counters::add(&counters.delivered, 1);
                    }
                    Work::Mark { taken, processed } => {
                        if let Err(e) = input.load_in(ctx, Receipt(Some(processed))) {
                            counters.error(format_args!("ingress stopped: {e}"));
                            return;
                        }
                        let _ = taken.send(());
                    }
                }
            }
        })
        .map_err(|e| ConnectorError::Runtime(e.to_string()))?;
    Ok(tx)
}

/// Queues a receipt behind everything sent so far; returns when it is in the inbox, with the
/// receiver that fires once it is processed. `None` when the feeder stopped (engine shut down).
pub(crate) async fn mark<E>(tx: &mpsc::Sender<Work<E>>) -> Option<oneshot::Receiver<()>> {
    let (taken, taken_rx) = oneshot::channel();
    let (processed, processed_rx) = oneshot::channel();
    tx.send(Work::Mark { taken, processed }).await.ok()?;
    taken_rx.await.ok()?;
    Some(processed_rx)
}
