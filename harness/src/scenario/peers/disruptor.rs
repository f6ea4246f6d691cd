//! The disruptor adapter (crate `disruptor` 4.x): how every scenario that runs it builds and drives
//! it. A ring of `capacity` with the `BusySpin` wait strategy and one managed processor that runs
//! a handler on a state of its own ([`single`], [`multi`]; the state is a [`Processor`], which
//! hands its figures and placement over when the disruptor drops it); producers [`publish`] one
//! event or [`publish_burst`] a whole burst; the ping-pong's way back is read with an
//! `EventPoller` ([`polled`], [`poll_one`]). The stream peers (`disruptor`, `disruptor-mp`), the
//! ping-pong and `burst/{B}/disruptor` all go through it.
//!
//! May import `kit`.

use crate::pin::{Placement, Probe};
use crate::scenario::{put, Ev, Slot, Spin};
use disruptor::{
    BusySpin, EventPoller, MultiProducer, Polling, Producer, SingleConsumerBarrier, SingleProducer,
    SingleProducerBarrier,
};

/// The single producer of a ring with one managed processor.
pub type Single = SingleProducer<Ev, SingleConsumerBarrier>;
/// A multi producer (cloned per sender) of a ring with one managed processor.
pub type Multi = MultiProducer<Ev, SingleConsumerBarrier>;

/// A disruptor producer as the stream uses it.
pub trait DProducer: Send + 'static {
    /// Publishes `e` (waiting, spinning, while the ring is full).
    fn send(&mut self, e: Ev);
}
impl DProducer for Single {
    #[inline]
    fn send(&mut self, e: Ev) {
        Producer::publish(self, |slot| *slot = e);
    }
}
impl DProducer for Multi {
    #[inline]
    fn send(&mut self, e: Ev) {
        Producer::publish(self, |slot| *slot = e);
    }
}

/// The handler of a managed processor: `(state, event, sequence, end of batch)`.
pub trait Handler<S>: 'static + Send + FnMut(&mut S, &Ev, i64, bool) {}
impl<S, H: 'static + Send + FnMut(&mut S, &Ev, i64, bool)> Handler<S> for H {}

/// What makes a managed processor's state, on the processor's thread.
pub trait Init<S>: 'static + Send + FnOnce() -> S {}
impl<S, I: 'static + Send + FnOnce() -> S> Init<S> for I {}

/// A ring of `capacity` (`BusySpin`) whose managed processor runs `handler` on the state `init`
/// makes (on the processor's thread); its single producer.
pub fn single<S>(capacity: usize, handler: impl Handler<S>, init: impl Init<S>) -> Single {
    let builder = disruptor::build_single_producer(capacity, Ev::default, BusySpin);
    builder.handle_events_and_state_with(handler, init).build()
}

/// [`single`] with a multi producer.
pub fn multi<S>(capacity: usize, handler: impl Handler<S>, init: impl Init<S>) -> Multi {
    let builder = disruptor::build_multi_producer(capacity, Ev::default, BusySpin);
    builder.handle_events_and_state_with(handler, init).build()
}

/// Publishes one event.
#[inline]
pub fn publish(p: &mut impl Producer<Ev>, e: Ev) {
    p.publish(|slot| *slot = e);
}

/// Publishes the burst of `b` events numbered from `first` (`ev(seq)` makes each) with one
/// `batch_publish`.
#[inline]
pub fn publish_burst(
    p: &mut impl Producer<Ev>,
    first: u64,
    b: usize,
    mut ev: impl FnMut(u64) -> Ev,
) {
    p.batch_publish(b, |iter| {
        for (i, e) in iter.enumerate() {
            *e = ev(first + i as u64);
        }
    });
}

/// A ring of `capacity` (`BusySpin`) read by an `EventPoller` instead of a processor: the poller,
/// and the ring's single producer.
pub fn polled(capacity: usize) -> (EventPoller<Ev, SingleProducerBarrier>, Single) {
    let (poller, builder) =
        disruptor::build_single_producer(capacity, Ev::default, BusySpin).new_event_poller();
    (poller, builder.build())
}

/// Polls until one event is there and returns it, spinning with `spin` while there is none
/// (`None` once the ring's producer is gone).
#[inline]
pub fn poll_one(
    poller: &mut EventPoller<Ev, SingleProducerBarrier>,
    spin: &mut Spin,
) -> Option<Ev> {
    loop {
        match poller.poll() {
            Ok(mut events) => return (&mut events).next().copied(),
            Err(Polling::NoEvents) => spin.step(),
            Err(Polling::Shutdown) => return None,
        }
    }
}

/// A managed processor's state: the scenario's own `state`, and the probe of the processor's
/// thread. The disruptor drops the state on that thread when it shuts down (its last producer
/// dropped, everything published handled); then `(placement, report(state))` goes into `out`
/// (nothing when `report` gives `None`).
pub struct Processor<S, R> {
    /// What the handler works on.
    pub state: S,
    probe: Option<Probe>,
    report: fn(&mut S) -> Option<R>,
    out: Slot<(Placement, R)>,
}

impl<S, R> Processor<S, R> {
    /// Starts the probe of the calling thread (the processor's: call it in the `init` of
    /// [`single`] or [`multi`]) as `role` on `core`.
    pub fn start(
        role: &'static str,
        core: Option<usize>,
        state: S,
        report: fn(&mut S) -> Option<R>,
        out: Slot<(Placement, R)>,
    ) -> Self {
        Processor {
            state,
            probe: Some(Probe::start(role, core)),
            report,
            out,
        }
    }
}

impl<S, R> Drop for Processor<S, R> {
    fn drop(&mut self) {
        if let Some(p) = self.probe.take() {
            if let Some(r) = (self.report)(&mut self.state) {
                put(&self.out, (p.finish(), r));
            }
        }
    }
}
