//! The `nats/loopback` measurement: events through a local server with the engine in the loop,
//! against raw publish/subscribe through the same server, in the same run.
//!
//! Both paths publish the same events from one client, `window` at most in flight (a closed loop,
//! so that neither path overruns the server's or client's buffers and loses events), and time
//! each event from just before its publish to its arrival:
//! * `raw`: a second client's subscription receives it;
//! * `engine`: the connector's ingress feeds it to a correlator, whose monitor emits it to an
//!   output channel; the receiver of that channel receives it.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use correlator::{Correlator, Event, Monitor, Pattern, Scope};
use futures_util::StreamExt;
use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

use crate::{Connector, ConnectorError, ConnectorOptions, JsonCodec, LocalServer};

/// The events of the bench: a sequence number and the publish time.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Probe {
    /// 0, 1, 2, ...
    pub seq: u64,
    /// Nanoseconds since the run's origin, taken just before the publish.
    pub sent_ns: u64,
}

impl Event for Probe {
    type Kind = ();
    fn kind(&self) {}
}

/// Figures of one path.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PathFigures {
    /// Events received.
    pub events: u64,
    /// Events per second, first publish to last receipt.
    pub events_per_sec: f64,
    /// Median latency, microseconds.
    pub p50_us: f64,
    /// 99th percentile latency, microseconds.
    pub p99_us: f64,
}

/// Figures of both paths of one run.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LoopbackFigures {
    /// Through the connector and the engine.
    pub engine: PathFigures,
    /// Raw async-nats publish/subscribe.
    pub raw: PathFigures,
}

/// What [`loopback_local`] measured, or why it could not.
#[derive(Debug, Clone, PartialEq)]
pub enum LoopbackOutcome {
    /// Both paths ran.
    Measured(LoopbackFigures),
    /// No server could be started: the note says why.
    Skipped(String),
}

/// Emits every probe to the output channel.
struct Echo(correlator::Channel);

impl Monitor<Probe> for Echo {
    fn on_load(&mut self, cx: &mut Scope<'_, Probe, Self>) {
        cx.on_all(
            Pattern::kind(()),
            |m: &mut Echo, cx: &mut Scope<'_, Probe, Echo>, p: &Probe| {
                cx.emit(m.0, p.clone());
            },
        );
    }
}

/// Starts a local server through `scripts/nats-server.sh`, runs [`loopback`] against it and
/// stops it; [`LoopbackOutcome::Skipped`] when no server can be started.
pub fn loopback_local(events: u64, window: u64) -> Result<LoopbackOutcome, ConnectorError> {
    let server = match LocalServer::start(&[]) {
        Ok(s) => s,
        Err(e) => {
            return Ok(LoopbackOutcome::Skipped(format!(
                "nats/loopback skipped: no NATS server could be started ({e})"
            )))
        }
    };
    loopback(server.url(), events, window).map(LoopbackOutcome::Measured)
}

/// Measures both paths through the server at `url`: `events` events each, at most `window` in
/// flight.
///
/// # Errors
/// [`ConnectorError`] when the server cannot be reached or the engine refuses.
pub fn loopback(url: &str, events: u64, window: u64) -> Result<LoopbackFigures, ConnectorError> {
    let window = window.max(1);
    let publisher = Connector::connect(url, ConnectorOptions::default())?;
    let raw = raw_path(&publisher, url, events, window)?;
    let engine = engine_path(&publisher, url, events, window)?;
    Ok(LoopbackFigures { engine, raw })
}

/// How long a path may go without an arrival before the run fails (a lost event would otherwise
/// stall the closed loop for good).
const STALL: Duration = Duration::from_secs(10);

/// Counts arrivals so the publisher can keep `window` in flight.
#[derive(Default)]
struct Arrivals {
    count: AtomicU64,
    wake: tokio::sync::Notify,
}

/// Publishes `events` probes on `subject` from `publisher`, at most `window` ahead of the
/// arrivals `tally` counts; returns once all are flushed.
fn publish_windowed(
    publisher: &Connector,
    subject: String,
    events: u64,
    window: u64,
    tally: &Tally,
) -> Result<(), ConnectorError> {
    let client = publisher.client().clone();
    let (origin, arrivals) = (tally.origin, tally.arrivals.clone());
    let nats = |e: &dyn std::fmt::Display| ConnectorError::Nats(e.to_string());
    publisher.block_on(async move {
        let codec = JsonCodec::<Probe>::new();
        for seq in 0..events {
            let (mut seen, mut since) = (arrivals.count.load(Ordering::Acquire), Instant::now());
            while seq >= arrivals.count.load(Ordering::Acquire) + window {
                let notified = arrivals.wake.notified();
                let now_seen = arrivals.count.load(Ordering::Acquire);
                if seq < now_seen + window {
                    break;
                }
                if now_seen != seen {
                    (seen, since) = (now_seen, Instant::now());
                } else if since.elapsed() > STALL {
                    // Core NATS delivers at most once: a lost event would close the window for
                    // good. Fail the run with what arrived instead of hanging it.
                    return Err(ConnectorError::Runtime(format!(
                        "loopback stalled: {now_seen} of {seq} published events arrived, none for {STALL:?}"
                    )));
                }
                // Bounded, so that a lost notification cannot stall the run.
                let _ = tokio::time::timeout(Duration::from_millis(5), notified).await;
            }
            let probe = Probe {
                seq,
                sent_ns: origin.elapsed().as_nanos() as u64,
            };
            let payload = crate::Codec::encode(&codec, &probe).map_err(|e| nats(&e))?;
            client
                .publish(subject.clone(), payload.into())
                .await
                .map_err(|e| nats(&e))?;
        }
        client.flush().await.map_err(|e| nats(&e))
    })
}

/// The receiving side's record: latencies and arrivals (which pace the publisher).
struct Tally {
    hist: Histogram<u64>,
    received: u64,
    events: u64,
    origin: Instant,
    /// When the last arrival came, since `origin`.
    last: Duration,
    arrivals: Arc<Arrivals>,
}

impl Tally {
    fn new(events: u64) -> Self {
        let hist = match Histogram::new(3) {
            Ok(h) => h,
            Err(_) => unreachable!("3 significant figures are valid"),
        };
        Self {
            hist,
            received: 0,
            events,
            origin: Instant::now(),
            last: Duration::ZERO,
            arrivals: Arc::new(Arrivals::default()),
        }
    }

    /// A receiving tally on the same clock and window as this one.
    fn share(&self) -> Self {
        Self {
            hist: self.hist.clone(),
            received: 0,
            events: self.events,
            origin: self.origin,
            last: Duration::ZERO,
            arrivals: self.arrivals.clone(),
        }
    }

    fn complete(&self) -> bool {
        self.received >= self.events
    }

    /// One arrival (`None`: one that could not be read, counted but not timed).
    fn arrived(&mut self, probe: Option<&Probe>) {
        self.last = self.origin.elapsed();
        if let Some(p) = probe {
            let now = self.last.as_nanos() as u64;
            let _ = self.hist.record(now.saturating_sub(p.sent_ns).max(1));
        }
        self.received += 1;
        self.arrivals.count.fetch_add(1, Ordering::Release);
        self.arrivals.wake.notify_one();
    }

    fn figures(&self) -> PathFigures {
        PathFigures {
            events: self.received,
            events_per_sec: self.received as f64 / self.last.as_secs_f64().max(1e-9),
            p50_us: self.hist.value_at_quantile(0.5) as f64 / 1e3,
            p99_us: self.hist.value_at_quantile(0.99) as f64 / 1e3,
        }
    }
}

fn raw_path(
    publisher: &Connector,
    url: &str,
    events: u64,
    window: u64,
) -> Result<PathFigures, ConnectorError> {
    let subscriber = Connector::connect(url, ConnectorOptions::default())?;
    let subject = "bench.raw".to_string();
    let client = subscriber.client();
    let mut sub = subscriber
        .block_on(client.subscribe(subject.clone()))
        .map_err(|e| ConnectorError::Nats(e.to_string()))?;
    // The server must know the subscription before the publisher's first event arrives.
    subscriber.round_trip()?;
    let tally = Tally::new(events);
    let mut receiving = tally.share();
    let received = subscriber.handle_spawn(async move {
        let codec = JsonCodec::<Probe>::new();
        while !receiving.complete() {
            let Ok(Some(msg)) = tokio::time::timeout(STALL, sub.next()).await else {
                break;
            };
            receiving.arrived(crate::Codec::decode(&codec, &msg.payload).ok().as_ref());
        }
        receiving
    });
    publish_windowed(publisher, subject, events, window, &tally)?;
    let receiving = subscriber
        .block_on(received)
        .map_err(|e| ConnectorError::Runtime(e.to_string()))?;
    Ok(receiving.figures())
}

fn engine_path(
    publisher: &Connector,
    url: &str,
    events: u64,
    window: u64,
) -> Result<PathFigures, ConnectorError> {
    let connector = Connector::connect(url, ConnectorOptions::default())?;
    let correlator = Correlator::<Probe>::builder().build()?;
    let out = correlator.channel("out")?;
    let rx = correlator.output(out);
    correlator.load(Echo(out))?;
    correlator.start();
    let subject = "bench.engine".to_string();
    let ingress = connector.subscribe(
        &subject,
        Arc::new(JsonCodec::<Probe>::new()),
        correlator.input(),
        correlator.main(),
    )?;
    let tally = Tally::new(events);
    let mut receiving = tally.share();
    let receiver = std::thread::spawn(move || {
        while !receiving.complete() {
            match rx.recv_timeout(STALL) {
                Ok(p) => receiving.arrived(Some(&p)),
                Err(_) => break,
            }
        }
        receiving
    });
    publish_windowed(publisher, subject, events, window, &tally)?;
    let receiving = receiver
        .join()
        .map_err(|_| ConnectorError::Runtime("the receiver thread panicked".into()))?;
    ingress.stop();
    correlator.shutdown()?;
    Ok(receiving.figures())
}
