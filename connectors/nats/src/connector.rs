//! The connector: one NATS connection, its runtime, and the ingress and egress tasks on it.

use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_nats::jetstream;
use correlator::{ContextRef, Event, InputHandle, OutputReceiver};
use futures_util::StreamExt;
use tokio::sync::watch;

use crate::codec::Codec;
use crate::error::{js, ConnectorError};
use crate::feeder::{self, Work};
use crate::processed::Processed;
use crate::status::{ConnectorStatus, Counters};

/// Default subject undecodable payloads are published to.
pub const DEFAULT_DEAD_LETTER_SUBJECT: &str = "correlator.dead-letter";
/// Default first reconnect delay; it doubles per failed attempt up to the maximum.
pub const DEFAULT_RECONNECT_MIN: Duration = Duration::from_millis(10);
/// Default longest reconnect delay.
pub const DEFAULT_RECONNECT_MAX: Duration = Duration::from_secs(2);
/// Default worker threads of the connector's runtime.
pub const DEFAULT_WORKER_THREADS: usize = 2;

/// Headers a dead letter carries besides the original payload.
pub mod dead_letter_headers {
    /// Why the codec refused the payload.
    pub const ERROR: &str = "Correlator-Error";
    /// The subject the message arrived on.
    pub const SUBJECT: &str = "Correlator-Subject";
    /// Its stream sequence, for a JetStream message.
    pub const STREAM_SEQUENCE: &str = "Correlator-Stream-Sequence";
}

/// Settings of a [`Connector`]; `default()` gives the documented defaults.
#[derive(Debug, Clone)]
pub struct ConnectorOptions {
    /// Client name shown by the server. Default `correlator`.
    pub name: String,
    /// Where undecodable payloads go. Default [`DEFAULT_DEAD_LETTER_SUBJECT`].
    pub dead_letter_subject: String,
    /// First reconnect delay. Default [`DEFAULT_RECONNECT_MIN`].
    pub reconnect_min: Duration,
    /// Longest reconnect delay (the delay doubles per failed attempt). Default
    /// [`DEFAULT_RECONNECT_MAX`].
    pub reconnect_max: Duration,
    /// Worker threads of the connector's tokio runtime. Default [`DEFAULT_WORKER_THREADS`].
    pub worker_threads: usize,
}

impl Default for ConnectorOptions {
    fn default() -> Self {
        Self {
            name: "correlator".into(),
            dead_letter_subject: DEFAULT_DEAD_LETTER_SUBJECT.into(),
            reconnect_min: DEFAULT_RECONNECT_MIN,
            reconnect_max: DEFAULT_RECONNECT_MAX,
            worker_threads: DEFAULT_WORKER_THREADS,
        }
    }
}

/// A JetStream durable pull consumer to read from: see [`Connector::consume`].
#[derive(Debug, Clone)]
pub struct JetStreamSource {
    /// The stream.
    pub stream: String,
    /// The durable consumer's base name; the server-side consumer is `{consumer}-g{N}` (see
    /// [`Connector::consume`] on generations).
    pub consumer: String,
    /// Only messages on these subjects (one subject, wildcards allowed; empty: all). Default empty.
    pub filter_subject: String,
    /// Messages pulled per request. Default 256.
    pub batch: usize,
    /// How long one pull waits for its batch to fill. Default 100 ms.
    pub pull_wait: Duration,
    /// How long the server waits for an acknowledgement before it delivers a message again.
    /// Default 30 s; keep it well above the time the engine needs for a few batches.
    pub ack_wait: Duration,
    /// Drop messages whose stream sequence is not above the highest one delivered (opt-in).
    /// Default off.
    pub dedup: bool,
    /// Start right after this stream sequence, whatever the durable consumer had acknowledged
    /// ([`start_after`](Self::start_after)). Default none.
    pub start_after: Option<u64>,
}

impl JetStreamSource {
    /// Reads `stream` through the durable consumer `consumer`, with the defaults above.
    pub fn new(stream: impl Into<String>, consumer: impl Into<String>) -> Self {
        Self {
            stream: stream.into(),
            consumer: consumer.into(),
            filter_subject: String::new(),
            batch: 256,
            pull_wait: Duration::from_millis(100),
            ack_wait: Duration::from_secs(30),
            dedup: false,
            start_after: None,
        }
    }

    /// Starts reading right after stream sequence `sequence` (0: from the stream's start),
    /// whatever the durable consumer had acknowledged: a new consumer generation starts there
    /// and the older ones are deleted. This is how a program recovered from a checkpoint reads
    /// its partition again from the checkpoint's position (`correlator::Recovered::position`),
    /// so that what it had processed after the checkpoint, and lost with the crash, is processed
    /// again, in the stream's order. The stream must still hold those messages (limits
    /// retention, not work-queue or interest): [`Connector::consume`] checks both, and refuses
    /// with [`ConnectorError::NotRetained`] or [`ConnectorError::Gone`] rather than skip them.
    pub fn start_after(mut self, sequence: u64) -> Self {
        self.start_after = Some(sequence);
        self
    }

    /// Only messages on `subject`.
    pub fn filter(mut self, subject: impl Into<String>) -> Self {
        self.filter_subject = subject.into();
        self
    }

    /// Messages per pull (at least 1).
    pub fn batch(mut self, batch: usize) -> Self {
        self.batch = batch;
        self
    }

    /// The server's acknowledgement wait.
    pub fn ack_wait(mut self, ack_wait: Duration) -> Self {
        self.ack_wait = ack_wait;
        self
    }

    /// How long a pull waits to fill.
    pub fn pull_wait(mut self, pull_wait: Duration) -> Self {
        self.pull_wait = pull_wait;
        self
    }

    /// Turns de-duplication by stream sequence on or off.
    pub fn dedup(mut self, on: bool) -> Self {
        self.dedup = on;
        self
    }

    fn name(&self, generation: u64) -> String {
        format!("{}-g{generation}", self.consumer)
    }

    fn config(
        &self,
        generation: u64,
        deliver: jetstream::consumer::DeliverPolicy,
    ) -> jetstream::consumer::pull::Config {
        jetstream::consumer::pull::Config {
            durable_name: Some(self.name(generation)),
            filter_subject: self.filter_subject.clone(),
            deliver_policy: deliver,
            ack_policy: jetstream::consumer::AckPolicy::Explicit,
            ack_wait: self.ack_wait,
            // One batch in the engine, one being pulled: the server never delivers more.
            max_ack_pending: (self.batch * 2) as i64,
            ..Default::default()
        }
    }
}

/// One NATS connection with its own runtime, feeding correlators and publishing their output.
///
/// The engine's API blocks; the connector's tasks never block a runtime thread: each ingress
/// hands its events to a thread of its own that sends them into the engine (and stops while the
/// inbox is full), and each egress reads its output receiver on a thread of its own.
///
/// The client reconnects by itself after a lost connection, waiting
/// [`reconnect_min`](ConnectorOptions::reconnect_min), doubling up to
/// [`reconnect_max`](ConnectorOptions::reconnect_max), without limit; [`status`](Self::status)
/// shows whether it is connected and how often it reconnected.
pub struct Connector {
    runtime: Option<tokio::runtime::Runtime>,
    client: async_nats::Client,
    jetstream: jetstream::Context,
    counters: Arc<Counters>,
    options: ConnectorOptions,
}

impl Connector {
    /// Connects to the server at `url` (e.g. `nats://127.0.0.1:4222`).
    ///
    /// # Errors
    /// [`ConnectorError::Connect`] when no server answers; [`ConnectorError::Runtime`] when the
    /// runtime cannot start; [`ConnectorError::Invalid`] for zero worker threads.
    pub fn connect(url: &str, options: ConnectorOptions) -> Result<Self, ConnectorError> {
        if options.worker_threads == 0 {
            return Err(ConnectorError::Invalid {
                setting: "worker_threads",
                expected: "at least 1",
            });
        }
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(options.worker_threads)
            .thread_name("nats-connector")
            .enable_all()
            .build()
            .map_err(|e| ConnectorError::Runtime(e.to_string()))?;
        let counters = Counters::new();
        let events = counters.clone();
        let (min, max) = (options.reconnect_min, options.reconnect_max);
        let connect = async_nats::ConnectOptions::new()
            .name(&options.name)
            .max_reconnects(None)
            .connection_timeout(Duration::from_secs(5))
            .reconnect_delay_callback(move |attempts| backoff(min, max, attempts))
            .event_callback(move |event| {
                let events = events.clone();
                async move { events.connection_event(&event) }
            })
            .connect(url);
        let client = runtime
            .block_on(connect)
            .map_err(|e| ConnectorError::Connect {
                url: url.into(),
                reason: e.to_string(),
            })?;
        counters
            .connected
            .store(true, std::sync::atomic::Ordering::Release);
        let jetstream = {
            let _in_runtime = runtime.enter();
            jetstream::new(client.clone())
        };
        Ok(Self {
            runtime: Some(runtime),
            client,
            jetstream,
            counters,
            options,
        })
    }

    /// Connection state and counts.
    pub fn status(&self) -> ConnectorStatus {
        self.counters.snapshot()
    }

    /// The client, for anything the connector does not wrap.
    pub fn client(&self) -> &async_nats::Client {
        &self.client
    }

    /// The JetStream context of the client.
    pub fn jetstream(&self) -> &jetstream::Context {
        &self.jetstream
    }

    /// Returns once the server has processed everything this connection sent before the call,
    /// subscriptions included: messages published after it returns, from any connection, reach
    /// every subscription made before it. (`Client::flush` is weaker: it returns once the bytes
    /// left the client, and another connection's publish can still reach the server before the
    /// subscription does, and be lost to it.)
    ///
    /// It asks the server a request on a subject nobody serves; the server answers "no
    /// responders" only after the commands ahead of it on this connection.
    ///
    /// # Errors
    /// [`ConnectorError::Nats`] when the server does not answer that way.
    pub fn round_trip(&self) -> Result<(), ConnectorError> {
        self.block_on(round_trip(&self.client))
    }

    /// Runs `future` on the connector's runtime and waits for it; for set-up from plain threads.
    ///
    /// # Panics
    /// When called from inside an async task (tokio forbids blocking there).
    pub fn block_on<F: Future>(&self, future: F) -> F::Output {
        self.handle().block_on(future)
    }

    /// Spawns `future` on the connector's runtime.
    pub(crate) fn handle_spawn<F>(&self, future: F) -> tokio::task::JoinHandle<F::Output>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        self.handle().spawn(future)
    }

    fn handle(&self) -> &tokio::runtime::Handle {
        match &self.runtime {
            Some(r) => r.handle(),
            None => unreachable!("the runtime lives until drop"),
        }
    }

    /// Creates the stream `name` on `subjects` (file storage) unless it exists.
    ///
    /// # Errors
    /// [`ConnectorError::JetStream`].
    pub fn ensure_stream(&self, name: &str, subjects: &[&str]) -> Result<(), ConnectorError> {
        let config = jetstream::stream::Config {
            name: name.into(),
            subjects: subjects.iter().map(|s| s.to_string()).collect(),
            ..Default::default()
        };
        match self.block_on(self.jetstream.get_or_create_stream(config)) {
            Ok(_) => Ok(()),
            // Several processes ensuring the same stream at once: each finds none, each creates
            // it, and the server refuses the later creates (e.g. "subjects overlap with an
            // existing stream"). The stream exists then: that is what was asked for.
            Err(first) => self
                .block_on(self.jetstream.get_stream(name))
                .map(drop)
                .map_err(|_| js(first)),
        }
    }

    /// Feeds every message of the core NATS `subject` (wildcards allowed) into `ctx` through
    /// `input`, decoded by `codec`, in the order the server delivers them.
    ///
    /// Core NATS keeps nothing: what arrives while the connector is disconnected, or after the
    /// client's subscription buffer overflowed because the engine is slower than the publishers,
    /// is lost (the client reports a slow consumer in [`status`](Self::status)). While the inbox
    /// is full the connector stops taking messages from the subscription. Use
    /// [`consume`](Self::consume) for at-least-once.
    ///
    /// It returns once the server has registered the subscription ([`round_trip`](Self::round_trip)):
    /// every message published after that reaches it.
    ///
    /// # Errors
    /// [`ConnectorError::Nats`] when the subscription fails; [`ConnectorError::Runtime`].
    pub fn subscribe<E: Event, C: Codec<E>>(
        &self,
        subject: &str,
        codec: Arc<C>,
        input: InputHandle<E>,
        ctx: ContextRef,
    ) -> Result<Ingress, ConnectorError> {
        let mut sub = self
            .block_on(self.client.subscribe(subject.to_string()))
            .map_err(|e| ConnectorError::Nats(e.to_string()))?;
        // Events published once this returns must reach the subscription (see `round_trip`).
        self.round_trip()?;
        let tx = feeder::spawn(input, ctx, FEEDER_CAPACITY, self.counters.clone())?;
        let dead = self.dead_letters();
        let counters = self.counters.clone();
        let (stop, mut stopped) = watch::channel(false);
        let task = self.handle().spawn(async move {
            loop {
                let msg = tokio::select! {
                    _ = stopped.changed() => break,
                    msg = sub.next() => match msg { Some(m) => m, None => break },
                };
                Counters::add(&counters.received, 1);
                match codec.decode(&msg.payload) {
                    Ok(event) => {
                        if tx.send(Work::Event(event)).await.is_err() {
                            break;
                        }
                    }
                    Err(e) => dead.publish(&msg.subject, None, msg.payload, &e).await,
                }
            }
            // Everything handed over is in the engine before `stop` returns.
            feeder::mark(&tx).await;
        });
        Ok(Ingress {
            stop,
            task: Some(task),
            handle: self.handle().clone(),
        })
    }

    /// Feeds a JetStream durable pull consumer into `ctx` through `input`, at least once.
    ///
    /// **Acknowledgement.** The connector pulls a batch, hands its events to the engine, then
    /// queues a receipt behind them through the same input handle
    /// ([`InputHandle::load_in`]); the batch's messages are acknowledged, each one on its own
    /// (`AckPolicy::Explicit`), only when the receipt reports that the engine has processed every
    /// event of the batch and everything they routed. The next batch is pulled once the previous
    /// one is in the inbox, so while the inbox is full nothing more is pulled; the server
    /// delivers at most two batches unacknowledged (`max_ack_pending`).
    ///
    /// Each message is acknowledged on its own because an all-up-to acknowledgement (`AckAll`)
    /// cannot clear everything: a server that crashed can come back with messages pending at or
    /// below its acknowledgement floor, which it then ignores an `AckAll` for and delivers again
    /// every `ack_wait`, for ever. A consumer of an older version of the connector
    /// (`AckPolicy::All`) is replaced on start by the next generation (below).
    ///
    /// **What "at least once" means here.** Every message of the stream (that passes the filter)
    /// reaches the engine at least once, and is acknowledged only after the engine processed it.
    /// The ingress remembers the stream sequences the engine processed (as ranges), and a
    /// message the server delivers again after that (an acknowledgement lost with the connection, or a server that crashed before it
    /// stored the acknowledgement) is acknowledged again but not handed to the engine, counted in
    /// `already_processed`. So within one process's life an event is processed twice only when
    /// the server delivers it again *before* the engine finished it (it waited longer than
    /// `ack_wait` in the inbox); [`dedup`](JetStreamSource::dedup) removes that repeat too. For a
    /// filtered consumer whose sequences are not contiguous the ingress remembers the 4,096 most
    /// recent ranges; a message delivered again from further back is processed again. Once every
    /// message is acknowledged, nothing more reaches the engine: no message is delivered again
    /// for ever.
    ///
    /// **What a crash repeats.** A process that dies loses nothing acknowledged, and nothing it
    /// did not acknowledge is lost: the server keeps it. Events of the batches in flight (at most
    /// two batches per consumer) may have been processed without their acknowledgement: they are
    /// delivered again, to the restarted process (which does not know they were processed).
    /// With [`dedup`](JetStreamSource::dedup) on, a message whose stream sequence is not above
    /// the highest this process delivered is dropped (counted in `duplicates`). The repeats after
    /// a process restart remain, so a monitor whose effects must not repeat keeps its own
    /// high-water mark.
    ///
    /// **A panicking handler.** A panic in monitor code ends that instance (R6.8) but the event
    /// counts as processed: the receipt behind it still fires, so the message is acknowledged
    /// and never delivered again. For the work that handler did not finish, the connector gives
    /// at most once; a monitor that must retry it keeps that state itself.
    ///
    /// **A deleted consumer.** A consumer deleted on the server answers no pull and says
    /// nothing. When a pull brings nothing (at most once a second) or is refused, the ingress
    /// asks the server about its consumer; if it no longer exists the ingress creates it again
    /// with the same name and settings, starting right after the last acknowledgement floor it
    /// saw, logs a warning, sets `last_error` and counts it in `consumer_recreated` of
    /// [`status`](Self::status). Messages it already processed that the new consumer delivers
    /// again are acknowledged without being processed again.
    ///
    /// **Order and restarts (generations).** The consumer is `{consumer}-g{N}`. On start the
    /// connector takes the highest generation; if it still has unacknowledged messages (its
    /// previous owner died), it creates generation N+1 starting right after N's acknowledgement
    /// floor and deletes N. That way a restarted process resumes exactly where its predecessor's
    /// acknowledgements end and gets the repeated messages first and in stream order, without
    /// waiting for `ack_wait`: per-subject order holds across the restart. One process owns a
    /// consumer at a time.
    ///
    /// Bad payloads go to the dead-letter subject (flushed before the batch is acknowledged).
    ///
    /// Start the correlator before (or right after) this call: before `start()` nothing drains
    /// the inbox, and once it is full the engine refuses the ingress's blocking send
    /// (`FullBeforeStart`); the ingress then stops, counts the error in
    /// [`status`](Self::status), and acknowledges nothing more.
    ///
    /// # Errors
    /// [`ConnectorError::JetStream`] when the stream is missing or the consumer cannot be
    /// created; [`ConnectorError::Invalid`] for a zero batch; with
    /// [`start_after`](JetStreamSource::start_after), [`ConnectorError::NotRetained`] for a
    /// stream that deletes what is acknowledged and [`ConnectorError::Gone`] for one that no
    /// longer holds the messages after the position.
    pub fn consume<E: Event, C: Codec<E>>(
        &self,
        source: JetStreamSource,
        codec: Arc<C>,
        input: InputHandle<E>,
        ctx: ContextRef,
    ) -> Result<Ingress, ConnectorError> {
        if source.batch == 0 {
            return Err(ConnectorError::Invalid {
                setting: "batch",
                expected: "at least 1",
            });
        }
        let resumed = self.block_on(resume_consumer(&self.jetstream, &source))?;
        let tx = feeder::spawn(input, ctx, source.batch, self.counters.clone())?;
        let dead = self.dead_letters();
        let counters = self.counters.clone();
        let (stop, stopped) = watch::channel(false);
        let task = self.handle().spawn(pull_loop(
            resumed, source, codec, tx, dead, counters, stopped,
        ));
        Ok(Ingress {
            stop,
            task: Some(task),
            handle: self.handle().clone(),
        })
    }

    /// Publishes every event of `output` to the subject `subject(&event)` returns, encoded by
    /// `codec`, in the order the receiver yields them (core NATS publish). Runs until the
    /// correlator shuts down and the output stream ends; [`Egress::join`] waits for that and for
    /// the client to flush. An event the codec cannot encode is counted and skipped.
    ///
    /// Core publishing keeps nothing: what the process emitted but had not flushed when it died
    /// is lost. Capture the subject in a stream when the output must be kept.
    ///
    /// # Errors
    /// [`ConnectorError::Runtime`] when the thread cannot start.
    pub fn publish_output<E, C, S>(
        &self,
        output: OutputReceiver<E>,
        codec: Arc<C>,
        subject: S,
    ) -> Result<Egress, ConnectorError>
    where
        E: Send + 'static,
        C: Codec<E>,
        S: Fn(&E) -> String + Send + 'static,
    {
        let client = self.client.clone();
        let handle = self.handle().clone();
        let counters = self.counters.clone();
        let thread = std::thread::Builder::new()
            .name("nats-egress".into())
            .spawn(move || {
                for event in output.iter() {
                    let Some(payload) = encode_counted(&*codec, &event, &counters) else {
                        continue;
                    };
                    match handle.block_on(client.publish(subject(&event), payload.into())) {
                        Ok(()) => Counters::add(&counters.published, 1),
                        Err(e) => {
                            Counters::add(&counters.publish_errors, 1);
                            counters.error(format_args!("egress: {e}"));
                        }
                    }
                }
                if let Err(e) = handle.block_on(client.flush()) {
                    counters.error(format_args!("egress flush: {e}"));
                }
            })
            .map_err(|e| ConnectorError::Runtime(e.to_string()))?;
        Ok(Egress {
            thread: Some(thread),
        })
    }

    /// Publishes every value of `output` through JetStream to the subject `subject(&value)`
    /// returns, as the message id `id(&value)` returns (the `Nats-Msg-Id` header), encoded by
    /// `codec`, in the order the receiver yields them; each publish is acknowledged by the
    /// stream (up to 256 in flight, awaited in order). Runs until the output stream ends;
    /// [`Egress::join`] waits for that and for the last acknowledgement.
    ///
    /// A stream drops a message whose id it already holds (within its duplicate window, two
    /// minutes unless the stream says otherwise), and says so in the acknowledgement (counted in
    /// [`ConnectorStatus::published_again`](crate::ConnectorStatus::published_again)). With ids
    /// that a program recovered from a checkpoint gives again to what it derives again
    /// (`correlator::Scope::emit_id`), what a crashed process had published and its successor
    /// publishes again is kept once: outputs effectively once (SPEC R11.14). A value published
    /// but not acknowledged when the process dies is published again by the successor, so
    /// nothing is lost either.
    ///
    /// # Errors
    /// [`ConnectorError::Runtime`] when the thread cannot start.
    pub fn publish_output_jetstream<A, C, S, I>(
        &self,
        output: OutputReceiver<A>,
        codec: Arc<C>,
        subject: S,
        id: I,
    ) -> Result<Egress, ConnectorError>
    where
        A: Send + 'static,
        C: Codec<A>,
        S: Fn(&A) -> String + Send + 'static,
        I: Fn(&A) -> String + Send + 'static,
    {
        let js = self.jetstream.clone();
        let handle = self.handle().clone();
        let counters = self.counters.clone();
        let thread = std::thread::Builder::new()
            .name("nats-egress-js".into())
            .spawn(move || {
                let mut pending = std::collections::VecDeque::new();
                let settle = |ack: jetstream::context::PublishAckFuture| match handle
                    .block_on(std::future::IntoFuture::into_future(ack))
                {
                    Ok(a) => {
                        Counters::add(&counters.published, 1);
                        if a.duplicate {
                            Counters::add(&counters.published_again, 1);
                        }
                    }
                    Err(e) => {
                        Counters::add(&counters.publish_errors, 1);
                        counters.error(format_args!("egress: {e}"));
                    }
                };
                for value in output.iter() {
                    let Some(payload) = encode_counted(&*codec, &value, &counters) else {
                        continue;
                    };
                    let message = jetstream::message::PublishMessage::build()
                        .payload(payload.into())
                        .message_id(id(&value));
                    match handle.block_on(js.send_publish(subject(&value), message)) {
                        Ok(ack) => pending.push_back(ack),
                        Err(e) => {
                            Counters::add(&counters.publish_errors, 1);
                            counters.error(format_args!("egress: {e}"));
                        }
                    }
                    if pending.len() >= 256 {
                        if let Some(ack) = pending.pop_front() {
                            settle(ack);
                        }
                    }
                }
                for ack in pending {
                    settle(ack);
                }
            })
            .map_err(|e| ConnectorError::Runtime(e.to_string()))?;
        Ok(Egress {
            thread: Some(thread),
        })
    }

    fn dead_letters(&self) -> DeadLetters {
        DeadLetters {
            client: self.client.clone(),
            subject: self.options.dead_letter_subject.clone(),
            counters: self.counters.clone(),
        }
    }
}

impl Drop for Connector {
    fn drop(&mut self) {
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_timeout(Duration::from_secs(1));
        }
    }
}

/// Items the feeder channel of a core subscription holds.
const FEEDER_CAPACITY: usize = 256;

/// The delay before reconnect attempt `attempts` (1-based): doubling from `min` up to `max`.
fn backoff(min: Duration, max: Duration, attempts: usize) -> Duration {
    let shift = attempts.saturating_sub(1).min(20) as u32;
    min.saturating_mul(1 << shift).min(max)
}

/// Takes over the highest generation of the consumer, or starts the next one at its
/// acknowledgement floor when it has unacknowledged messages or acknowledges all-up-to rather
/// than each message (see [`Connector::consume`]).
async fn resume_consumer(
    js_ctx: &jetstream::Context,
    source: &JetStreamSource,
) -> Result<Resumed, ConnectorError> {
    use jetstream::consumer::{AckPolicy, DeliverPolicy};
    let stream = js_ctx.get_stream(&source.stream).await.map_err(js)?;
    let prefix = format!("{}-g", source.consumer);
    let mut generations = Vec::new();
    let mut names = stream.consumer_names();
    while let Some(name) = names.next().await {
        let name = name.map_err(js)?;
        if let Some(n) = name
            .strip_prefix(&prefix)
            .and_then(|g| g.parse::<u64>().ok())
        {
            generations.push(n);
        }
    }
    generations.sort_unstable();
    let (consumer, floor) = match (generations.last().copied(), source.start_after) {
        (last, Some(after)) => {
            replayable(&source.stream, stream.cached_info(), after)?;
            let g = last.map_or(1, |g| g + 1);
            let next = stream
                .create_consumer(source.config(
                    g,
                    DeliverPolicy::ByStartSequence {
                        start_sequence: after + 1,
                    },
                ))
                .await
                .map_err(js)?;
            generations.push(g);
            (next, after)
        }
        (None, None) => {
            let consumer = stream
                .create_consumer(source.config(1, DeliverPolicy::All))
                .await
                .map_err(js)?;
            (consumer, 0)
        }
        (Some(g), None) => {
            let info = stream.consumer_info(source.name(g)).await.map_err(js)?;
            let floor = info.ack_floor.stream_sequence;
            if info.num_ack_pending == 0 && info.config.ack_policy == AckPolicy::Explicit {
                let consumer = stream.get_consumer(&source.name(g)).await.map_err(js)?;
                (consumer, floor)
            } else {
                let start_sequence = floor + 1;
                let next = stream
                    .create_consumer(
                        source.config(g + 1, DeliverPolicy::ByStartSequence { start_sequence }),
                    )
                    .await
                    .map_err(js)?;
                generations.push(g + 1);
                (next, floor)
            }
        }
    };
    let generation = generations.last().copied().unwrap_or(1);
    for g in generations.into_iter().filter(|&g| g < generation) {
        stream.delete_consumer(&source.name(g)).await.map_err(js)?;
    }
    Ok(Resumed {
        stream,
        consumer,
        generation,
        floor,
    })
}

/// Whether a stream described by `info` can be read again from right after sequence `after`:
/// it keeps what is acknowledged (limits retention) and still holds sequence `after + 1` (or
/// has never reached it).
fn replayable(
    name: &str,
    info: &jetstream::stream::Info,
    after: u64,
) -> Result<(), ConnectorError> {
    use jetstream::stream::RetentionPolicy;
    let retention = match info.config.retention {
        RetentionPolicy::Limits => None,
        RetentionPolicy::Interest => Some("interest"),
        RetentionPolicy::WorkQueue => Some("work-queue"),
    };
    if let Some(retention) = retention {
        return Err(ConnectorError::NotRetained {
            stream: name.to_owned(),
            retention,
        });
    }
    let first = info.state.first_sequence;
    if first > after.saturating_add(1) {
        return Err(ConnectorError::Gone {
            stream: name.to_owned(),
            after,
            first,
        });
    }
    Ok(())
}

/// The consumer an ingress pulls from, and what it needs to re-create it.
struct Resumed {
    stream: jetstream::stream::Stream,
    consumer: jetstream::consumer::PullConsumer,
    /// Its generation (the `N` of `{consumer}-gN`).
    generation: u64,
    /// The highest stream sequence known to be acknowledged with everything below it.
    floor: u64,
}

/// How often an idle ingress asks the server about its consumer, at most.
const CONSUMER_CHECK_INTERVAL: Duration = Duration::from_secs(1);

/// One pulled batch in the engine: acknowledged message by message once its receipt fires.
struct InFlight {
    processed: tokio::sync::oneshot::Receiver<()>,
    messages: Vec<jetstream::Message>,
}

/// Acknowledges each batch once the engine processed it, in order, and records its stream
/// sequences as processed.
async fn acknowledge(
    mut pending: tokio::sync::mpsc::Receiver<InFlight>,
    processed: Arc<Mutex<Processed>>,
    dead: DeadLetters,
    counters: Arc<Counters>,
) {
    while let Some(InFlight {
        processed: receipt,
        messages,
    }) = pending.recv().await
    {
        if receipt.await.is_err() {
            return; // the engine stopped before processing it: leave it unacknowledged
        }
        dead.flush().await;
        {
            let mut done = lock(&processed);
            for seq in messages.iter().filter_map(stream_sequence) {
                done.insert(seq);
            }
        }
        let Some((last, rest)) = messages.split_last() else {
            continue;
        };
        // One acknowledgement per message (`AckPolicy::Explicit`): the server clears each one,
        // wherever its floor is. The last one waits for the server's answer, which comes after
        // the others (same connection, in order).
        let mut lost = None;
        for msg in rest {
            if let Err(e) = msg.ack().await {
                lost = Some(e);
            }
        }
        match (last.double_ack().await, lost) {
            (Ok(()), None) => Counters::add(&counters.acknowledged, messages.len() as u64),
            (Err(e), _) | (_, Some(e)) => counters.error(format_args!(
                "acknowledgement lost ({e}); the server delivers those messages again after \
                 ack_wait, and the ingress acknowledges them without processing them again"
            )),
        }
    }
}

/// The stream sequence of a JetStream message (0 when its reply subject does not say).
fn stream_sequence(msg: &jetstream::Message) -> Option<u64> {
    msg.info().ok().map(|i| i.stream_sequence)
}

fn lock(processed: &Mutex<Processed>) -> std::sync::MutexGuard<'_, Processed> {
    // Nothing panics while holding it; a poisoned lock still holds a consistent set.
    processed.lock().unwrap_or_else(|e| e.into_inner())
}

/// Pulls batches, hands them to the feeder, and has each acknowledged once the engine processed
/// it. A message this ingress already had processed is acknowledged again but not handed on.
/// When the server says the consumer is gone, re-creates it at the last known floor.
async fn pull_loop<E: Event, C: Codec<E>>(
    resumed: Resumed,
    source: JetStreamSource,
    codec: Arc<C>,
    tx: tokio::sync::mpsc::Sender<Work<E>>,
    dead: DeadLetters,
    counters: Arc<Counters>,
    mut stopped: watch::Receiver<bool>,
) {
    let Resumed {
        stream,
        mut consumer,
        generation,
        mut floor,
    } = resumed;
    let processed = Arc::new(Mutex::new(Processed::default()));
    // Batches in the engine, acknowledged in order by the task below as their receipts come.
    let (acks, pending) = tokio::sync::mpsc::channel::<InFlight>(1);
    let acker = tokio::spawn(acknowledge(
        pending,
        processed.clone(),
        dead.clone(),
        counters.clone(),
    ));
    let mut high_water = 0u64;
    let mut failures = 0usize;
    let mut checked = tokio::time::Instant::now();
    while !*stopped.borrow() {
        let request = consumer
            .batch()
            .max_messages(source.batch)
            .expires(source.pull_wait)
            .messages();
        let mut batch = match request.await {
            Ok(b) => b,
            Err(e) => {
                failures += 1;
                counters.error(format_args!("pull from {}: {e}", source.stream));
                let pause = backoff(DEFAULT_RECONNECT_MIN, DEFAULT_RECONNECT_MAX, failures);
                tokio::select! {
                    _ = stopped.changed() => {}
                    _ = tokio::time::sleep(pause) => {}
                }
                continue;
            }
        };
        let mut messages = Vec::new();
        let mut refused = false;
        while let Some(msg) = batch.next().await {
            let msg = match msg {
                Ok(m) => m,
                Err(e) => {
                    counters.error(format_args!("pull from {}: {e}", source.stream));
                    refused = true;
                    break;
                }
            };
            failures = 0;
            Counters::add(&counters.received, 1);
            let sequence = stream_sequence(&msg).unwrap_or(0);
            if sequence != 0 && lock(&processed).contains(sequence) {
                Counters::add(&counters.already_processed, 1);
            } else if source.dedup && sequence != 0 && sequence <= high_water {
                Counters::add(&counters.duplicates, 1);
            } else {
                high_water = high_water.max(sequence);
                match codec.decode_at(&msg.payload, sequence) {
                    Ok(event) => {
                        if tx.send(Work::Event(event)).await.is_err() {
                            return;
                        }
                    }
                    Err(e) => {
                        dead.publish(&msg.subject, Some(sequence), msg.payload.clone(), &e)
                            .await
                    }
                }
            }
            messages.push(msg);
        }
        if messages.is_empty() {
            // Idle, or the pull went unanswered: ask the server about the consumer, at most
            // once per interval (a deleted consumer answers no pull, and says nothing).
            if refused || checked.elapsed() >= CONSUMER_CHECK_INTERVAL {
                checked = tokio::time::Instant::now();
                if let Some(c) =
                    check_consumer(&stream, &source, generation, &mut floor, &counters).await
                {
                    consumer = c;
                }
            }
            continue;
        }
        // The next pull waits until this batch is in the inbox (back-pressure).
        let Some(receipt) = feeder::mark(&tx).await else {
            return;
        };
        let batch = InFlight {
            processed: receipt,
            messages,
        };
        if acks.send(batch).await.is_err() {
            return;
        }
    }
    drop(acks);
    let _ = acker.await;
}

/// `value`'s payload, or `None` with the error counted and logged (an egress skips the value).
fn encode_counted<A, C: Codec<A> + ?Sized>(
    codec: &C,
    value: &A,
    counters: &Counters,
) -> Option<Vec<u8>> {
    match codec.encode(value) {
        Ok(p) => Some(p),
        Err(e) => {
            Counters::add(&counters.encode_errors, 1);
            counters.error(format_args!("egress: {e}"));
            None
        }
    }
}

/// Asks the server about the consumer; records its acknowledgement floor, or, when the server
/// says it does not exist, creates it again (same name and settings) right after the last floor
/// seen, counts that in `consumer_recreated` and logs it. Returns the new consumer then.
async fn check_consumer(
    stream: &jetstream::stream::Stream,
    source: &JetStreamSource,
    generation: u64,
    floor: &mut u64,
    counters: &Counters,
) -> Option<jetstream::consumer::PullConsumer> {
    use jetstream::context::ConsumerInfoErrorKind;
    let name = source.name(generation);
    match stream.consumer_info(&name).await {
        Ok(info) => {
            *floor = (*floor).max(info.ack_floor.stream_sequence);
            None
        }
        Err(e) if e.kind() == ConsumerInfoErrorKind::NotFound => {
            let deliver = jetstream::consumer::DeliverPolicy::ByStartSequence {
                start_sequence: *floor + 1,
            };
            match stream
                .create_consumer(source.config(generation, deliver))
                .await
            {
                Ok(consumer) => {
                    Counters::add(&counters.consumer_recreated, 1);
                    counters.error(format_args!(
                        "consumer {name} of stream {} was deleted on the server; re-created it \
                         from stream sequence {} (messages this ingress already processed are \
                         acknowledged, not processed again)",
                        source.stream,
                        *floor + 1
                    ));
                    Some(consumer)
                }
                Err(e) => {
                    counters.error(format_args!(
                        "consumer {name} of stream {} was deleted on the server and cannot be \
                         re-created ({e}); retrying",
                        source.stream
                    ));
                    None
                }
            }
        }
        // A lost connection or a server starting up: the next check asks again.
        Err(_) => None,
    }
}

/// Publishes undecodable payloads, with the reason in a header.
#[derive(Clone)]
struct DeadLetters {
    client: async_nats::Client,
    subject: String,
    counters: Arc<Counters>,
}

impl DeadLetters {
    async fn publish(
        &self,
        subject: &str,
        sequence: Option<u64>,
        payload: bytes::Bytes,
        error: &crate::CodecError,
    ) {
        Counters::add(&self.counters.decode_errors, 1);
        let mut headers = async_nats::HeaderMap::new();
        headers.insert(dead_letter_headers::ERROR, error.0.as_str());
        headers.insert(dead_letter_headers::SUBJECT, subject);
        if let Some(seq) = sequence {
            headers.insert(
                dead_letter_headers::STREAM_SEQUENCE,
                seq.to_string().as_str(),
            );
        }
        match self
            .client
            .publish_with_headers(self.subject.clone(), headers, payload)
            .await
        {
            Ok(()) => Counters::add(&self.counters.dead_lettered, 1),
            Err(e) => self.counters.error(format_args!("dead letter: {e}")),
        }
    }

    async fn flush(&self) {
        if let Err(e) = self.client.flush().await {
            self.counters.error(format_args!("flush: {e}"));
        }
    }
}

/// A running ingress; [`stop`](Self::stop) it, or drop it to stop it without waiting.
pub struct Ingress {
    stop: watch::Sender<bool>,
    task: Option<tokio::task::JoinHandle<()>>,
    handle: tokio::runtime::Handle,
}

impl Ingress {
    /// Stops pulling and waits until what was pulled is in the engine (and, for JetStream,
    /// acknowledged once processed). Call it before shutting the correlator down.
    ///
    /// # Panics
    /// When called from inside an async task.
    pub fn stop(mut self) {
        let _ = self.stop.send(true);
        if let Some(task) = self.task.take() {
            let _ = self.handle.block_on(task);
        }
    }
}

impl Drop for Ingress {
    fn drop(&mut self) {
        let _ = self.stop.send(true);
    }
}

/// A running egress: it ends when the correlator's output stream ends.
pub struct Egress {
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Egress {
    /// Waits until the output stream ended (after the correlator's shutdown) and everything was
    /// published and flushed.
    pub fn join(mut self) {
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// See [`Connector::round_trip`].
pub(crate) async fn round_trip(client: &async_nats::Client) -> Result<(), ConnectorError> {
    use async_nats::client::RequestErrorKind;
    let subject = format!("_CORRELATOR.round_trip.{}", client.new_inbox());
    match client.request(subject, bytes::Bytes::new()).await {
        Err(e) if e.kind() == RequestErrorKind::NoResponders => Ok(()),
        Err(e) => Err(ConnectorError::Nats(format!(
            "round trip to the server: {e}"
        ))),
        Ok(_) => Err(ConnectorError::Nats(
            "round trip to the server: a reply came from a subject nobody should serve".into(),
        )),
    }
}
