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

use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::sync::Arc;
use std::time::{Duration, Instant};

use correlator::{ContextOptions, Correlator, Event, Monitor, Pattern, Scope};
use correlator_nats::{Connector, ConnectorOptions, JetStreamSource, JsonCodec, Partitioning};
use serde::{Deserialize, Serialize};

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

const STREAM: &str = "EVENTS";

fn partitioning(args: &HashMap<String, String>) -> Result<Partitioning, String> {
    Ok(Partitioning::new(
        "ev",
        "evp",
        num(args, "partitions", 4)? as u32,
    ))
}

fn num(args: &HashMap<String, String>, name: &str, default: u64) -> Result<u64, String> {
    args.get(name)
        .map(|v| v.parse().map_err(|e| format!("--{name} {v}: {e}")))
        .transpose()
        .map(|v| v.unwrap_or(default))
}

fn run(args: &HashMap<String, String>) -> Result<(), Box<dyn std::error::Error>> {
    let url = args.get("url").ok_or("--url is required")?;
    let parts = partitioning(args)?;
    let index = num(args, "process", 0)? as u32;
    let processes = num(args, "processes", 1)? as u32;
    let delay = Duration::from_micros(num(args, "delay-us", 0)?);
    let batch = num(args, "batch", 64)? as usize;
    let log_path = args
        .get("log")
        .cloned()
        .unwrap_or_else(|| format!("worker-{index}.log"));
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
    let idle_exit = args
        .get("idle-exit")
        .map(|s| s.parse::<f64>())
        .transpose()?
        .map(Duration::from_secs_f64);
    let mut last = (0, Instant::now());
    loop {
        std::thread::sleep(Duration::from_millis(100));
        let delivered = nats.status().delivered;
        if delivered != last.0 {
            last = (delivered, Instant::now());
        }
        if idle_exit.is_some_and(|idle| last.1.elapsed() >= idle) {
            break;
        }
    }
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

fn publish(args: &HashMap<String, String>) -> Result<(), Box<dyn std::error::Error>> {
    let url = args.get("url").ok_or("--url is required")?;
    let parts = partitioning(args)?;
    let keys = num(args, "keys", 8)?;
    let per_key = num(args, "per-key", 100)?;
    let first = num(args, "first", 1)?;
    let nats = Connector::connect(url, ConnectorOptions::default())?;
    nats.ensure_stream(STREAM, &[&parts.stream_subject()])?;
    let js = nats.jetstream().clone();
    let codec = JsonCodec::<Keyed>::new();
    nats.block_on(async move {
        let mut acks = Vec::new();
        for seq in first..first + per_key {
            for k in 0..keys {
                let event = Keyed {
                    key: format!("k{k}"),
                    seq,
                };
                let payload = correlator_nats::Codec::encode(&codec, &event)?;
                acks.push(
                    js.publish(parts.publish_subject(&event.key), payload.into())
                        .await?,
                );
                if acks.len() >= 256 {
                    for ack in acks.drain(..) {
                        ack.await?;
                    }
                }
            }
        }
        for ack in acks {
            ack.await?;
        }
        Ok::<(), Box<dyn std::error::Error>>(())
    })?;
    println!(
        "published {} events ({keys} keys x {per_key})",
        keys * per_key
    );
    Ok(())
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut argv = std::env::args().skip(1);
    let mode = argv.next().unwrap_or_default();
    let mut args = HashMap::new();
    while let Some(flag) = argv.next() {
        let name = flag
            .strip_prefix("--")
            .ok_or(format!("unexpected argument {flag}"))?;
        let value = argv.next().ok_or(format!("--{name} needs a value"))?;
        args.insert(name.to_string(), value);
    }
    match mode.as_str() {
        "run" => run(&args),
        "publish" => publish(&args),
        _ => Err(
            "usage: correlator-nats-worker run|publish --url URL ... (see the source's docs)"
                .into(),
        ),
    }
}
