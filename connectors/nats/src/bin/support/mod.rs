//! What the connector's two example binaries (`correlator-nats-worker`, `correlator-nats-fraud`)
//! share: their `MODE --name value ...` arguments, the partitioning of their stream, publishing
//! through JetStream with every publish acknowledged, and running until the input goes idle.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use correlator_nats::{Connector, Partitioning};

/// The stream both binaries read: `EVENTS`, subjects `evp.>` mapped from `ev.KEY`.
pub const STREAM: &str = "EVENTS";

/// A binary's command line: the mode, then `--name value` pairs.
pub struct Args {
    pub mode: String,
    values: HashMap<String, String>,
}

impl Args {
    /// The process's own arguments.
    pub fn from_env() -> Result<Self, String> {
        let mut argv = std::env::args().skip(1);
        let mode = argv.next().unwrap_or_default();
        let mut values = HashMap::new();
        while let Some(flag) = argv.next() {
            let name = flag
                .strip_prefix("--")
                .ok_or(format!("unexpected argument {flag}"))?;
            let value = argv.next().ok_or(format!("--{name} needs a value"))?;
            values.insert(name.to_string(), value);
        }
        Ok(Self { mode, values })
    }

    /// `--name`'s value, if given.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.values.get(name).map(String::as_str)
    }

    /// `--name`'s value, which must be given.
    pub fn required(&self, name: &str) -> Result<&str, String> {
        self.get(name).ok_or(format!("--{name} is required"))
    }

    /// `--name`'s value as a number, `default` if not given.
    pub fn num(&self, name: &str, default: u64) -> Result<u64, String> {
        self.get(name)
            .map(|v| v.parse().map_err(|e| format!("--{name} {v}: {e}")))
            .transpose()
            .map(|v| v.unwrap_or(default))
    }

    /// The stream's partitioning: `--partitions` (default 4) of `ev.KEY` into `evp.P.KEY`.
    pub fn partitioning(&self) -> Result<Partitioning, String> {
        Ok(Partitioning::new(
            "ev",
            "evp",
            self.num("partitions", 4)? as u32,
        ))
    }

    /// This process's place among the workers: `(--process, --processes)`, defaults 0 and 1.
    pub fn process(&self) -> Result<(u32, u32), String> {
        Ok((
            self.num("process", 0)? as u32,
            self.num("processes", 1)? as u32,
        ))
    }

    /// `--idle-exit SECS`: how long without new events before `run_until_idle` returns.
    pub fn idle_exit(&self) -> Result<Option<Duration>, String> {
        self.get("idle-exit")
            .map(|s| {
                s.parse::<f64>()
                    .map_err(|e| format!("--idle-exit {s}: {e}"))
            })
            .transpose()
            .map(|s| s.map(Duration::from_secs_f64))
    }
}

/// What a mode of a binary runs.
pub type Mode = fn(&Args) -> Result<(), Box<dyn std::error::Error>>;

/// A binary's `main`: its arguments, then `run` or `publish` as the mode says; otherwise the
/// usage of `binary`.
pub fn main_of(binary: &str, run: Mode, publish: Mode) -> Result<(), Box<dyn std::error::Error>> {
    let args = Args::from_env()?;
    match args.mode.as_str() {
        "run" => run(&args),
        "publish" => publish(&args),
        _ => {
            Err(format!("usage: {binary} run|publish --url URL ... (see the source's docs)").into())
        }
    }
}

/// Returns once the connector has delivered no new message for `idle`; never without one.
pub fn run_until_idle(nats: &Connector, idle: Option<Duration>) {
    let mut last = (0, Instant::now());
    loop {
        std::thread::sleep(Duration::from_millis(100));
        let delivered = nats.status().delivered;
        if delivered != last.0 {
            last = (delivered, Instant::now());
        }
        if idle.is_some_and(|idle| last.1.elapsed() >= idle) {
            return;
        }
    }
}

/// Publishes `(subject, payload)` messages through JetStream in order, up to 256 unacknowledged
/// at a time, and waits until the stream acknowledged every one.
pub fn publish_acked(
    nats: &Connector,
    messages: impl IntoIterator<Item = (String, Vec<u8>)>,
) -> Result<(), Box<dyn std::error::Error>> {
    let js = nats.jetstream().clone();
    nats.block_on(async move {
        let mut acks = Vec::new();
        for (subject, payload) in messages {
            acks.push(js.publish(subject, payload.into()).await?);
            if acks.len() >= 256 {
                for ack in acks.drain(..) {
                    ack.await?;
                }
            }
        }
        for ack in acks {
            ack.await?;
        }
        Ok(())
    })
}
