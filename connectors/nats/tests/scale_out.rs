//! Scale-out against a real nats-server: two correlator processes each own half of the partitions
//! of one stream; one is SIGKILLed mid-stream and restarted; every key's events must have been
//! processed in order with none lost (repeats allowed only where at-least-once allows them: the
//! killed process's unacknowledged tail, replayed once, in order, by its successor).

mod support;

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use correlator_nats::Partitioning;
use support::{server_mapping, tempdir, Worker};

const WORKER: &str = env!("CARGO_BIN_EXE_correlator-nats-worker");
const KEYS: u64 = 16;
const FIRST_HALF: u64 = 150;
const TOTAL: u64 = 200;

fn start_worker(url: &str, index: u32, log: &Path) -> Worker {
    let child = Command::new(WORKER)
        .args(["run", "--url", url, "--processes", "2", "--partitions", "4"])
        .args([
            "--process",
            &index.to_string(),
            "--delay-us",
            "500",
            "--batch",
            "32",
        ])
        .arg("--log")
        .arg(log)
        .stdout(Stdio::null())
        .spawn()
        .expect("start the worker");
    Worker(child)
}

fn publish(url: &str, first: u64, per_key: u64) {
    let status = Command::new(WORKER)
        .args(["publish", "--url", url, "--partitions", "4"])
        .args([
            "--keys",
            &KEYS.to_string(),
            "--per-key",
            &per_key.to_string(),
        ])
        .args(["--first", &first.to_string()])
        .stdout(Stdio::null())
        .status()
        .expect("run the publisher");
    assert!(status.success(), "the publisher failed");
}

/// `(key, seq)` per line, in the order the process wrote them (a line still being written, with
/// no newline yet, is left for the next read).
fn read_log(path: &Path) -> Vec<(String, u64)> {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    text.split_inclusive('\n')
        .filter_map(|l| l.strip_suffix('\n'))
        .map(|l| {
            let (k, s) = l.split_once(' ').expect("a whole `KEY SEQ` line");
            (k.to_string(), s.parse().expect("a sequence number"))
        })
        .collect()
}

/// Waits (bounded) until `done` holds for the logs; fails the test on the deadline.
fn wait_for(logs: &[PathBuf], what: &str, done: impl Fn(&[Vec<(String, u64)>]) -> bool) {
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        let now: Vec<_> = logs.iter().map(|p| read_log(p)).collect();
        if done(&now) {
            return;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn sigkilled_worker_restarts_and_every_key_stays_in_order_with_none_lost() {
    let parts = Partitioning::new("ev", "evp", 4);
    let server = server_mapping(&[parts.mapping()]);
    let url = server.url().to_string();
    let dir = tempdir("scale");
    let logs = [dir.join("w0.log"), dir.join("w1.log")];

    publish(&url, 1, FIRST_HALF);
    let _w1 = start_worker(&url, 1, &logs[1]);
    let mut w0 = start_worker(&url, 0, &logs[0]);
    // Mid-stream: worker 0 has processed some of its share, far from all of it.
    wait_for(&logs, "worker 0 to get going", |l| l[0].len() >= 200);
    w0.0.kill().expect("SIGKILL worker 0");
    w0.0.wait().expect("reap worker 0");
    let killed_at = read_log(&logs[0]).len();
    assert!(
        killed_at < (KEYS * FIRST_HALF / 2) as usize,
        "worker 0 finished before the kill ({killed_at} lines)"
    );
    drop(w0);
    let _w0 = start_worker(&url, 0, &logs[0]);
    publish(&url, FIRST_HALF + 1, TOTAL - FIRST_HALF);

    // Every key reaches its last event.
    wait_for(&logs, "every key's last event", |l| {
        let mut max: HashMap<&str, u64> = HashMap::new();
        for (k, s) in l.iter().flatten() {
            let m = max.entry(k.as_str()).or_default();
            *m = (*m).max(*s);
        }
        max.len() == KEYS as usize && max.values().all(|&m| m == TOTAL)
    });

    let per_log: Vec<_> = logs.iter().map(|p| read_log(p)).collect();
    let owner_of = |key: &str| {
        let owners: Vec<usize> = (0..2)
            .filter(|&i| per_log[i].iter().any(|(k, _)| k == key))
            .collect();
        assert_eq!(owners.len(), 1, "key {key} was processed by {owners:?}");
        owners[0]
    };
    let mut repeats = BTreeMap::new();
    for k in 0..KEYS {
        let key = format!("k{k}");
        let owner = owner_of(&key);
        let seqs: Vec<u64> = per_log[owner]
            .iter()
            .filter(|(kk, _)| *kk == key)
            .map(|(_, s)| *s)
            .collect();
        // In order: each event is the one after the previous, except at most once (the
        // restart) a step back to a point already processed, from where it goes on one by one
        // again. Never a step forward past the highest processed: nothing skipped.
        let (mut prev, mut max, mut steps_back) = (0, 0, 0);
        for &s in &seqs {
            assert!(
                s <= max + 1,
                "key {key}: event {s} after {prev}: events lost"
            );
            if s != prev + 1 {
                assert!(s <= prev, "key {key}: event {s} after {prev}: out of order");
                steps_back += 1;
            }
            prev = s;
            max = max.max(s);
        }
        // None lost: every event from 1 to TOTAL was processed.
        assert_eq!(max, TOTAL, "key {key}");
        assert!(
            steps_back <= 1,
            "key {key}: {steps_back} restarts, expected at most 1"
        );
        assert!(
            steps_back == 0 || owner == 0,
            "key {key}: the worker that was not killed repeated events"
        );
        repeats.insert(key, seqs.len() as u64 - TOTAL);
    }
    eprintln!("killed after {killed_at} lines; repeats per key: {repeats:?}");
    let _ = std::fs::remove_dir_all(&dir);
}
