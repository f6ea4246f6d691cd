//! One checkpointing correlator process of a partitioned fraud deployment, or the publisher
//! that feeds it (issue 36: a crash loses no partial match and repeats no alert).
//!
//! ```text
//! correlator-nats-fraud run --url URL --process I --processes N --checkpoints DIR --run TAG
//!                           [--partitions P] [--every-ms E] [--delay-us D] [--idle-exit SECS]
//! correlator-nats-fraud publish --url URL --cards C --count N [--partitions P]
//! ```
//!
//! `run` owns the partitions `p % N == I` of the stream `EVENTS` (subjects `evp.>`, cards mapped
//! by the server from `ev.cCARD`): one context per partition, fed through the named input
//! `part-P`. The two fraud rules of `workload/fraud` run there as a persistent monitor (a root
//! instance per partition that creates one instance per card). The correlator takes a checkpoint
//! every `E` ms (default 200) into `DIR/process-I`. At start it recovers from the newest intact
//! checkpoint, if there is one, and reads each partition again right after the checkpoint's
//! position (the stream sequence of the last transaction the partition's context had taken); a
//! fresh start reads each partition from the beginning. Alerts go to the JetStream stream `ALERTS`
//! (subject `alerts.TAG`) with the message id `TAG/pP/SEQ`, `SEQ` the alert's `emit_id` in its
//! context: a recovered run gives an alert it derives again the id it had, and the stream keeps
//! it once. With `--idle-exit`, it stops after that many seconds without new transactions and
//! prints its status. `--delay-us` makes each transaction take that long, so that a test can kill
//! the process mid-stream.
//!
//! `publish` sends `N` generated transactions over `C` cards (seeded: the same every time) to
//! `ev.cCARD` through JetStream, each publish acknowledged by the stream.

mod support;

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use correlator::checkpoint::DirStore;
use correlator::record::EventCodec;
use correlator::{
    ContextOptions, Correlator, EmitId, Event, Monitor, Output, OutputOptions, Pattern, Persistent,
    Scope, Time,
};
use correlator_nats::{Codec, CodecError, Connector, ConnectorOptions, JetStreamSource, JsonCodec};
use serde::{Deserialize, Serialize};
use support::{main_of, publish_acked, run_until_idle, Args, STREAM};

/// A card transaction; `seq` is its stream sequence, stamped when it is read.
#[derive(Clone, Debug, Serialize, Deserialize)]
struct Tx {
    id: u64,
    card: u64,
    amount: u32,
    country: u16,
    present: bool,
    ms: u64,
    #[serde(default)]
    seq: u64,
}

impl Event for Tx {
    type Kind = ();
    fn kind(&self) {}
    fn key(&self) -> Option<u64> {
        Some(self.card)
    }
    fn time(&self) -> Option<Time> {
        Some(Time::from_millis(self.ms))
    }
    fn position(&self) -> Option<u64> {
        Some(self.seq)
    }
}

/// JSON, the stream sequence stamped into the transaction.
struct TxCodec;

impl Codec<Tx> for TxCodec {
    fn encode(&self, event: &Tx) -> Result<Vec<u8>, CodecError> {
        serde_json::to_vec(event).map_err(|e| CodecError(e.to_string()))
    }
    fn decode(&self, payload: &[u8]) -> Result<Tx, CodecError> {
        serde_json::from_slice(payload).map_err(|e| CodecError(e.to_string()))
    }
    fn decode_at(&self, payload: &[u8], stream_sequence: u64) -> Result<Tx, CodecError> {
        let mut tx = self.decode(payload)?;
        tx.seq = stream_sequence;
        Ok(tx)
    }
}

/// The transactions partial matches hold, in checkpoints.
struct HeldCodec;

impl EventCodec<Tx> for HeldCodec {
    fn encode(&self, event: &Tx, out: &mut Vec<u8>) {
        if let Ok(bytes) = serde_json::to_vec(event) {
            out.extend_from_slice(&bytes);
        }
    }
    fn decode(&self, bytes: &[u8]) -> Result<Tx, String> {
        serde_json::from_slice(bytes).map_err(|e| e.to_string())
    }
}

/// An alert, as published.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Alert {
    pub partition: u32,
    pub rule: u8,
    pub card: u64,
    /// The ids of the first and last transactions of the match.
    pub first: u64,
    pub last: u64,
    pub emit: EmitId,
}

const RULE1_AMOUNT: u32 = 1_000;
const RULE1_WINDOW_MS: u64 = 60_000;
const RULE2_AMOUNT: u32 = 5_000;
const RULE2_WINDOW_MS: u64 = 600_000;
const ALERTS: &str = "ALERTS";

/// Microseconds each transaction takes (`--delay-us`).
static DELAY_US: AtomicU64 = AtomicU64::new(0);

/// The rules: the root instance of a partition (`card: None`) creates one instance per card.
#[derive(Clone, Default, Serialize, Deserialize)]
struct Fraud {
    partition: u32,
    card: Option<u64>,
    known: BTreeSet<u64>,
    /// Rule 2's open windows: `(large transaction's id, its country, deadline in ms)`.
    pending: Vec<(u64, u16, u64)>,
    #[serde(skip)]
    alerts: Option<Output<Alert>>,
}

type Cx<'a> = Scope<'a, Tx, Fraud>;

impl Fraud {
    fn alert(&self, cx: &mut Cx<'_>, rule: u8, first: u64, last: u64) {
        let (Some(out), Some(card)) = (&self.alerts, self.card) else {
            return;
        };
        let alert = Alert {
            partition: self.partition,
            rule,
            card,
            first,
            last,
            emit: cx.emit_id(),
        };
        let _ = cx.emit_to(out, alert);
    }

    fn listen(&mut self, cx: &mut Cx<'_>) {
        self.alerts = cx.output("alerts");
        let Some(card) = self.card else {
            cx.on_all(Pattern::kind(()), |m: &mut Fraud, cx, t: &Tx| {
                let delay = DELAY_US.load(Ordering::Relaxed);
                if delay > 0 {
                    std::thread::sleep(Duration::from_micros(delay));
                }
                if m.known.insert(t.card) {
                    let instance = Fraud {
                        partition: m.partition,
                        card: Some(t.card),
                        ..Fraud::default()
                    };
                    cx.spawn(&instance, |m, cx| m.listen(cx));
                }
            });
            return;
        };
        let over = || {
            Pattern::kind(())
                .key(card)
                .filter(|t: &Tx| t.amount > RULE1_AMOUNT)
        };
        let within = Duration::from_millis(RULE1_WINDOW_MS);
        cx.when_all(
            over().then(over().then(over()).within(within)),
            |m: &mut Fraud, cx, hit| m.alert(cx, 1, hit.events[0].id, hit.events[2].id),
        );
        let large = Pattern::kind(())
            .key(card)
            .filter(|t: &Tx| t.amount > RULE2_AMOUNT);
        cx.on_all(large, move |m: &mut Fraud, cx, t: &Tx| {
            m.pending.retain(|p| p.2 > t.ms);
            m.pending.push((t.id, t.country, t.ms + RULE2_WINDOW_MS));
            Fraud::watch(cx, card, t.id, t.country, RULE2_WINDOW_MS);
        });
        let now = cx.now().as_nanos() / 1_000_000;
        for &(from, country, deadline) in &self.pending {
            Fraud::watch(cx, card, from, country, deadline - now);
        }
    }

    fn watch(cx: &mut Cx<'_>, card: u64, from: u64, country: u16, left_ms: u64) {
        let abroad = Pattern::kind(())
            .key(card)
            .filter(move |t: &Tx| t.present && t.country != country);
        cx.when(
            abroad.within(Duration::from_millis(left_ms)),
            move |m: &mut Fraud, cx, hit| {
                m.pending.retain(|p| p.0 != from);
                m.alert(cx, 2, from, hit.events[0].id);
            },
        );
    }
}

impl Monitor<Tx> for Fraud {
    fn on_load(&mut self, cx: &mut Cx<'_>) {
        self.listen(cx);
    }
}

impl Persistent<Tx> for Fraud {
    const NAME: &'static str = "nats-fraud/v1";
    fn on_restore(&mut self, cx: &mut Cx<'_>) {
        let now = cx.now().as_nanos() / 1_000_000;
        self.pending.retain(|p| p.2 > now);
        self.listen(cx);
    }
}

/// The `ALERTS` stream: a duplicate window of ten minutes, longer than any test's crash and
/// recovery.
fn ensure_alerts(nats: &Connector) -> Result<(), Box<dyn std::error::Error>> {
    let config = async_nats::jetstream::stream::Config {
        name: ALERTS.into(),
        subjects: vec!["alerts.>".into()],
        duplicate_window: Duration::from_secs(600),
        ..Default::default()
    };
    let js = nats.jetstream().clone();
    nats.block_on(async move {
        if js.get_or_create_stream(config).await.is_err() {
            // Another process created it meanwhile.
            js.get_stream(ALERTS).await?;
        }
        Ok::<(), Box<dyn std::error::Error>>(())
    })
}

fn run(args: &Args) -> Result<(), Box<dyn std::error::Error>> {
    let url = args.required("url")?;
    let parts = args.partitioning()?;
    let (index, processes) = args.process()?;
    let every = Duration::from_millis(args.num("every-ms", 200)?);
    let tag = args.required("run")?.to_owned();
    let dir = std::path::Path::new(args.required("checkpoints")?).join(format!("process-{index}"));
    DELAY_US.store(args.num("delay-us", 0)?, Ordering::Relaxed);

    let nats = Connector::connect(url, ConnectorOptions::default())?;
    nats.ensure_stream(STREAM, &[&parts.stream_subject()])?;
    ensure_alerts(&nats)?;
    let c = Correlator::<Tx>::builder()
        .event_time()
        .inbox_capacity(1024)
        .checkpoints(DirStore::open(&dir)?, HeldCodec)
        .checkpoint_every(every)
        .persistent::<Fraud>()
        .build()?;
    let (_, alerts) = c.named_output::<Alert>("alerts", OutputOptions::default())?;
    let owned = parts.owned(index, processes);
    let mut contexts = Vec::new();
    for &p in &owned {
        contexts.push(c.create_context(ContextOptions::new(format!("partition-{p}")))?);
    }
    let recovered = c.recover()?;
    if recovered.is_none() {
        for (&p, &ctx) in owned.iter().zip(&contexts) {
            c.load_in(
                ctx,
                Fraud {
                    partition: p,
                    ..Fraud::default()
                },
            )?;
        }
    }
    let mut ingresses = Vec::new();
    for (&p, &ctx) in owned.iter().zip(&contexts) {
        let name = format!("part-{p}");
        let after = recovered
            .as_ref()
            .and_then(|r| r.position(&name))
            .unwrap_or(0);
        let source = JetStreamSource::new(STREAM, format!("fraud-{p}"))
            .filter(parts.filter(p))
            .batch(64)
            .start_after(after);
        ingresses.push(nats.consume(source, Arc::new(TxCodec), c.named_input(&name)?, ctx)?);
    }
    let subject = format!("alerts.{tag}");
    let egress = nats.publish_output_jetstream(
        alerts,
        Arc::new(JsonCodec::<Alert>::new()),
        move |_| subject.clone(),
        move |a: &Alert| format!("{tag}/p{}/{}", a.partition, a.emit.seq),
    )?;
    println!(
        "fraud worker {index}/{processes}: partitions {owned:?}, {}",
        match &recovered {
            Some(r) => format!("recovered checkpoint {}", r.seq),
            None => "fresh start".into(),
        }
    );
    run_until_idle(&nats, args.idle_exit()?);
    for ingress in ingresses {
        ingress.stop();
    }
    c.shutdown()?;
    egress.join();
    println!("fraud worker {index}: {}", nats.status());
    Ok(())
}

/// `n` transactions over `cards` cards, the same every time.
fn generate(cards: u64, n: u64) -> Vec<Tx> {
    let mut s: u64 = 0x5eed_f4a0_d0c0_ffee;
    let mut next = move || {
        s = s
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        s >> 33
    };
    let mut ms = 0;
    (0..n)
        .map(|id| {
            ms += next() % 1_500;
            let amount = match next() % 100 {
                0..=6 => 5_001 + (next() % 5_000) as u32,
                7..=34 => 1_001 + (next() % 3_000) as u32,
                _ => (next() % 900) as u32,
            };
            Tx {
                id,
                card: next() % cards,
                amount,
                country: (next() % 3) as u16,
                present: next() % 2 == 0,
                ms,
                seq: 0,
            }
        })
        .collect()
}

fn publish(args: &Args) -> Result<(), Box<dyn std::error::Error>> {
    let url = args.required("url")?;
    let parts = args.partitioning()?;
    let cards = args.num("cards", 40)?;
    let count = args.num("count", 2_000)?;
    let nats = Connector::connect(url, ConnectorOptions::default())?;
    nats.ensure_stream(STREAM, &[&parts.stream_subject()])?;
    let messages = generate(cards, count)
        .iter()
        .map(|tx| {
            Ok((
                parts.publish_subject(&format!("c{}", tx.card)),
                TxCodec.encode(tx)?,
            ))
        })
        .collect::<Result<Vec<_>, CodecError>>()?;
    publish_acked(&nats, messages)?;
    println!("published {count} transactions over {cards} cards");
    Ok(())
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    main_of("correlator-nats-fraud", run, publish)
}
