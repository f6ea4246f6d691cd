//! Issue 36 against a real nats-server (SPEC R11.9 - R11.14): two checkpointing correlator
//! processes (`correlator-nats-fraud`) consume a partitioned stream of card transactions with the
//! fraud rules and publish their alerts to a JetStream stream with message ids. One is SIGKILLed
//! mid-stream three times and restarted each time: it recovers from its newest checkpoint and
//! reads its partitions again from the checkpoint's stream positions. The alerts the stream holds
//! are exactly, one for one and without a repeat, those of a run without crashes.

mod support;

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use async_nats::jetstream::consumer::{pull, AckPolicy, DeliverPolicy};
use correlator_nats::{Connector, ConnectorOptions, Partitioning};
use futures_util::StreamExt;
use support::{server_mapping, tempdir, Worker};

const FRAUD: &str = env!("CARGO_BIN_EXE_correlator-nats-fraud");
const CARDS: u64 = 40;
const COUNT: u64 = 3_000;

fn start(url: &str, index: u32, dir: &Path, tag: &str, delay_us: u64, out: &Path) -> Worker {
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(out)
        .expect("open the worker's output file");
    let child = Command::new(FRAUD)
        .args(["run", "--url", url, "--processes", "2", "--partitions", "4"])
        .args(["--process", &index.to_string(), "--run", tag])
        .arg("--checkpoints")
        .arg(dir)
        .args(["--every-ms", "100", "--idle-exit", "2"])
        .args(["--delay-us", &delay_us.to_string()])
        .stdout(Stdio::from(log))
        .spawn()
        .expect("start the worker");
    Worker(child)
}

/// Waits (bounded) for a worker to exit by itself, successfully.
fn finish(mut w: Worker) {
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        if let Some(status) = w.0.try_wait().expect("poll the worker") {
            assert!(status.success(), "the worker failed: {status}");
            return;
        }
        assert!(Instant::now() < deadline, "the worker did not finish");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The alerts of run `tag` the stream holds, in stream order: `(message id without the tag,
/// payload)`.
fn published(url: &str, tag: &str) -> Vec<(String, String)> {
    let nats = Connector::connect(url, ConnectorOptions::default()).expect("connect");
    let js = nats.jetstream().clone();
    let subject = format!("alerts.{tag}");
    let prefix = format!("{tag}/");
    nats.block_on(async move {
        let stream = js.get_stream("ALERTS").await.expect("the alerts stream");
        let consumer = stream
            .create_consumer(pull::Config {
                filter_subject: subject,
                deliver_policy: DeliverPolicy::All,
                ack_policy: AckPolicy::None,
                ..Default::default()
            })
            .await
            .expect("a consumer of the alerts");
        let mut got = Vec::new();
        loop {
            let mut batch = consumer
                .batch()
                .max_messages(1_000)
                .expires(Duration::from_millis(500))
                .messages()
                .await
                .expect("pull the alerts");
            let before = got.len();
            while let Some(msg) = batch.next().await {
                let msg = msg.expect("an alert");
                let id = msg
                    .headers
                    .as_ref()
                    .and_then(|h| h.get(async_nats::header::NATS_MESSAGE_ID))
                    .map(|v| v.as_str().to_string())
                    .expect("every alert has a message id");
                let id = id.strip_prefix(&prefix).expect("the run's tag").to_string();
                let payload = String::from_utf8(msg.payload.to_vec()).expect("JSON");
                got.push((id, payload));
            }
            if got.len() == before {
                return got;
            }
        }
    })
}

/// The sequence of process `index`'s newest checkpoint in `dir` (0: none).
fn newest(dir: &Path, index: u32) -> u64 {
    std::fs::read_dir(dir.join(format!("process-{index}")))
        .map(|d| {
            d.filter_map(Result::ok)
                .filter_map(|e| {
                    let name = e.file_name().into_string().ok()?;
                    correlator::checkpoint::seq_in_name(name.strip_suffix(".ckpt")?)
                })
                .max()
                .unwrap_or(0)
        })
        .unwrap_or(0)
}

#[test]
fn r11_14_sigkilled_checkpointing_workers_publish_every_alert_exactly_once() {
    let parts = Partitioning::new("ev", "evp", 4);
    let server = server_mapping(&[parts.mapping()]);
    let url = server.url().to_string();
    let dir = tempdir("ckpt");
    let status = Command::new(FRAUD)
        .args(["publish", "--url", &url, "--partitions", "4"])
        .args(["--cards", &CARDS.to_string(), "--count", &COUNT.to_string()])
        .stdout(Stdio::null())
        .status()
        .expect("run the publisher");
    assert!(status.success(), "the publisher failed");

    // The run without crashes.
    let reference = dir.join("reference");
    let out = dir.join("reference.out");
    let w0 = start(&url, 0, &reference, "ref", 0, &out);
    let w1 = start(&url, 1, &reference, "ref", 0, &out);
    finish(w0);
    finish(w1);
    let expected = published(&url, "ref");
    assert!(
        expected.len() > 50,
        "{} alerts: too few to tell",
        expected.len()
    );

    // The same stream, process 0 killed mid-stream three times. Each transaction takes 1 ms in
    // process 0 (about 1,500 of them): a kill lands between two of its checkpoints.
    let crash = dir.join("crash");
    let out0 = dir.join("crash-0.out");
    let w1 = start(&url, 1, &crash, "crash", 0, &dir.join("crash-1.out"));
    let mut w0 = start(&url, 0, &crash, "crash", 1_000, &out0);
    let mut seen = 0;
    for round in 0..3 {
        // This incarnation's own checkpoint first, so that each recovers a later one.
        let deadline = Instant::now() + Duration::from_secs(60);
        while newest(&crash, 0) <= seen {
            assert!(
                Instant::now() < deadline,
                "no checkpoint before kill {round}"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
        std::thread::sleep(Duration::from_millis(150));
        seen = newest(&crash, 0);
        assert!(
            w0.0.try_wait().expect("poll").is_none(),
            "process 0 finished before kill {round}: the kill would not be mid-stream"
        );
        w0.0.kill().expect("SIGKILL process 0");
        w0.0.wait().expect("reap process 0");
        drop(w0);
        w0 = start(&url, 0, &crash, "crash", 1_000, &out0);
    }
    finish(w0);
    finish(w1);
    let recovered: Vec<u64> = std::fs::read_to_string(&out0)
        .expect("process 0's output")
        .lines()
        .filter_map(|l| l.split("recovered checkpoint ").nth(1))
        .map(|n| n.trim().parse().expect("a checkpoint number"))
        .collect();
    assert_eq!(recovered.len(), 3, "every restart recovers a checkpoint");
    assert!(
        recovered.windows(2).all(|w| w[0] < w[1]),
        "each restart recovers a later checkpoint than the one before: {recovered:?}"
    );

    let got = published(&url, "crash");
    // One for one: the same ids with the same alerts, nothing more, nothing repeated.
    let by_id = |v: &[(String, String)]| v.iter().cloned().collect::<BTreeMap<_, _>>();
    let (got_ids, want) = (by_id(&got), by_id(&expected));
    assert_eq!(got.len(), got_ids.len(), "an id was published twice");
    let missing: Vec<&String> = want.keys().filter(|k| !got_ids.contains_key(*k)).collect();
    let extra: Vec<&String> = got_ids.keys().filter(|k| !want.contains_key(*k)).collect();
    let changed: Vec<&String> = want
        .iter()
        .filter(|(k, v)| got_ids.get(*k).is_some_and(|g| g != *v))
        .map(|(k, _)| k)
        .collect();
    assert!(
        missing.is_empty() && extra.is_empty() && changed.is_empty(),
        "{} alerts expected, {} published: {} missing (first {:?}), {} extra (first {:?}), {} \
         different (first {:?})",
        want.len(),
        got.len(),
        missing.len(),
        missing.first(),
        extra.len(),
        extra.first(),
        changed.len(),
        changed.first()
    );
    assert_eq!(got.len(), expected.len());
    let _ = std::fs::remove_dir_all(&dir);
}
