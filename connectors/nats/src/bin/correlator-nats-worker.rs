//! One correlator process of a partitioned deployment, or the publisher that feeds it.
//!
//! ```text
//! correlator-nats-worker run --url URL --process I --processes N [--partitions P] [--log FILE]
//!                            [--delay-us D] [--idle-exit SECS] [--batch B]
//! correlator-nats-worker publish --url URL --keys K --per-key M [--first S] [--partitions P]
//! ```
//!
//! `run` owns the partitions `p % N == I` of the stream `EVENTS` (subjects `evp.>`, keys mapped by
//! the server from `ev.KEY`, see [`correlator_nats::Partitioning`]): one durable consumer
//! `part-P` per partition, each feeding a context of its own. Its monitor appends `KEY SEQ` to
//! the log file for every event it processes (one write each, so a killed process leaves whole
//! lines), after `D` microseconds of simulated work. With `--idle-exit`, it stops after that many
//! seconds without events and prints its status.
//!
//! `publish` sends events `S..S+M` (default `S` = 1) of each key `k0..k{K-1}` to `ev.KEY`, through
//! JetStream (each publish acknowledged by the stream), keys interleaved.

mod support;

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::sync::Arc;
use std::time::Duration;

use correlator::{ContextOptions, Correlator, Event, Monitor, Pattern, Scope};
use correlator_nats::{Connector, ConnectorOptions, JetStreamSource, JsonCodec};
use serde::{Deserialize, Serialize};
use support::{main_of, publish_acked, run_until_idle, Args, STREAM};

/// One event of one key.
#[derive(Clone, Debug, Serialize, Deserialize)]
struct Keyed {
    key: String,
    seq: u64,
}

impl Event for Keyed {
    type Kind = ();
    fn kind(&self) {}
}

/// Appends every event it processes to the log.
struct Recorder {
    log: Arc<File>,
    delay: Duration,
}

impl Monitor<Keyed> for Recorder {
    fn on_load(&mut self, cx: &mut Scope<'_, Keyed, Self>) {
        cx.on_all(
            Pattern::kind(()),
            |m: &mut Recorder, _cx: &mut Scope<'_, Keyed, Recorder>, e: &Keyed| {
                if !m.delay.is_zero() {
                    std::thread::sleep(m.delay);
                }
                let line = format!("{} {}\n", e.key, e.seq);
                if let Err(err) = (&*m.log).write_all(line.as_bytes()) {
                    eprintln!("worker: cannot write the log: {err}");
                }
            },
        );
    }
}

fn run(args: &Args) -> Result<(), Box<dyn std::error::Error>> {
    let url = args.required("url")?;
    let parts = args.partitioning()?;
    let (index, processes) = args.process()?;
    let delay = Duration::from_micros(args.num("delay-us", 0)?);
    let batch = args.num("batch", 64)? as usize;
    let log_path = args
        .get("log")
        .map_or_else(|| format!("worker-{index}.log"), str::to_owned);
    let log = Arc::new(
        OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log_path)?,
    );

    let nats = Connector::connect(url, ConnectorOptions::default())?;
    nats.ensure_stream(STREAM, &[&parts.stream_subject()])?;
    let c = Correlator::<Keyed>::builder()
        .inbox_capacity(1024)
        .build()?;
    let codec = Arc::new(JsonCodec::<Keyed>::new());
    let mut ingresses = Vec::new();
    let owned = parts.owned(index, processes);
    for &p in &owned {
        let ctx = c.create_context(ContextOptions::new(format!("partition-{p}")))?;
        c.load_in(
            ctx,
            Recorder {
                log: log.clone(),
                delay,
            },
        )?;
        let source = JetStreamSource::new(STREAM, format!("part-{p}"))
            .filter(parts.filter(p))
            .batch(batch);
        ingresses.push(nats.consume(source, codec.clone(), c.input(), ctx)?);
    }
    c.start();
    println!("worker {index}/{processes}: partitions {owned:?}, log {log_path}");
    run_until_idle(&nats, args.idle_exit()?);
    for ingress in ingresses {
        ingress.stop();
    }
    let status = c.shutdown()?;
    println!(
        "worker {index}: processed {} events; {}",
        status.totals.processed,
        nats.status()
    );
    Ok(())
}

fn publish(args: &Args) -> Result<(), Box<dyn std::error::Error>> {
    let url = args.required("url")?;
    let parts = args.partitioning()?;
    let keys = args.num("keys", 8)?;
    let per_key = args.num("per-key", 100)?;
    let first = args.num("first", 1)?;
    let nats = Connector::connect(url, ConnectorOptions::default())?;
    nats.ensure_stream(STREAM, &[&parts.stream_subject()])?;
    let codec = JsonCodec::<Keyed>::new();
    let mut messages = Vec::new();
    for seq in first..first + per_key {
        for k in 0..keys {
            let key = format!("k{k}");
            let payload = correlator_nats::Codec::encode(
                &codec,
                &Keyed {
                    key: key.clone(),
                    seq,
                },
            )?;
            messages.push((parts.publish_subject(&key), payload));
        }
    }
    publish_acked(&nats, messages)?;
    println!(
        "published {} events ({keys} keys x {per_key})",
        keys * per_key
    );
    Ok(())
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    main_of("correlator-nats-worker", run, publish)
}
