//! Shared by the connector's integration tests: a real server, a recording monitor with a gate,
//! bounded waits.
#![allow(dead_code)]

use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use correlator::{Correlator, Event, Monitor, Pattern, Scope};
use correlator_nats::{Connector, ConnectorOptions, LocalServer};
use serde::{Deserialize, Serialize};

/// The tests' event: a sequence number.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Ev {
    pub seq: u64,
}

impl Event for Ev {
    type Kind = ();
    fn kind(&self) {}
}

/// A real server; the tests fail (never skip) when none can be started.
pub fn server() -> LocalServer {
    server_mapping(&[])
}

/// A real server with the subject mappings `maps` (a `Partitioning::mapping`); the tests fail
/// (never skip) when none can be started.
pub fn server_mapping(maps: &[(String, String)]) -> LocalServer {
    LocalServer::start(maps).unwrap_or_else(|e| {
        panic!(
            "these tests need a real nats-server: {e}. scripts/nats-server.sh installs it \
             (apt-get install nats-server)"
        )
    })
}

pub fn connect(server: &LocalServer) -> Connector {
    Connector::connect(server.url(), ConnectorOptions::default()).expect("connect")
}

/// Waits until `cond` holds; fails the test after 30 s.
pub fn wait_until(what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !cond() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Holds every handler until opened.
#[derive(Clone, Default)]
pub struct Gate(Arc<(Mutex<bool>, Condvar)>);

impl Gate {
    pub fn open(&self) {
        *self.0 .0.lock().unwrap() = true;
        self.0 .1.notify_all();
    }

    /// Waits for the gate, at most 60 s in all (so a failing test cannot hang a context).
    fn pass(&self) {
        let (lock, cv) = &*self.0;
        let guard = lock.lock().unwrap();
        let (mut open, _) = cv
            .wait_timeout_while(guard, Duration::from_secs(60), |open| !*open)
            .unwrap();
        // A failing test never opens it: open it for good, so the others pass at once.
        *open = true;
    }
}

/// Records the sequence of every event processed, after passing the gate; emits it on `out`.
pub struct Recorder {
    pub seen: Arc<Mutex<Vec<u64>>>,
    pub gate: Option<Gate>,
    pub out: Option<correlator::Channel>,
}

impl Monitor<Ev> for Recorder {
    fn on_load(&mut self, cx: &mut Scope<'_, Ev, Self>) {
        cx.on_all(
            Pattern::kind(()),
            |m: &mut Recorder, cx: &mut Scope<'_, Ev, Recorder>, e: &Ev| {
                if let Some(g) = &m.gate {
                    g.pass();
                }
                m.seen.lock().unwrap().push(e.seq);
                if let Some(out) = m.out {
                    cx.emit(out, e.clone());
                }
            },
        );
    }
}

/// A started correlator with a recorder in `main`.
pub fn engine(gate: Option<Gate>) -> (Correlator<Ev>, Arc<Mutex<Vec<u64>>>) {
    let c = Correlator::<Ev>::builder()
        .inbox_capacity(64)
        .build()
        .unwrap();
    let seen = Arc::new(Mutex::new(Vec::new()));
    c.load(Recorder {
        seen: seen.clone(),
        gate,
        out: None,
    })
    .unwrap();
    c.start();
    (c, seen)
}

/// Publishes events `seqs` to `subject` through JetStream, each acknowledged by the stream.
pub fn publish_js(nats: &Connector, subject: &str, seqs: impl IntoIterator<Item = u64>) {
    for seq in seqs {
        publish_raw(nats, subject, serde_json::to_vec(&Ev { seq }).unwrap());
    }
}

/// Publishes a raw payload through JetStream, acknowledged by the stream.
pub fn publish_raw(nats: &Connector, subject: &str, payload: Vec<u8>) {
    let js = nats.jetstream().clone();
    nats.block_on(async {
        js.publish(subject.to_string(), payload.into())
            .await
            .unwrap()
            .await
            .unwrap()
    });
}

/// `(ack floor stream sequence, unacknowledged count)` of a consumer.
pub fn ack_state(nats: &Connector, stream: &str, consumer: &str) -> (u64, usize) {
    let js = nats.jetstream().clone();
    nats.block_on(async {
        let stream = js.get_stream(stream).await.unwrap();
        let info = stream.consumer_info(consumer).await.unwrap();
        (info.ack_floor.stream_sequence, info.num_ack_pending)
    })
}

pub fn snapshot(s: &Arc<Mutex<Vec<u64>>>) -> Vec<u64> {
    s.lock().unwrap().clone()
}

/// A process the test started (a worker binary), killed on drop so that a failing test leaves
/// nothing running.
pub struct Worker(pub std::process::Child);

impl Drop for Worker {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A new directory of its own in the temporary directory, for test `name`.
pub fn tempdir(name: &str) -> std::path::PathBuf {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let dir = std::env::temp_dir().join(format!(
        "correlator-nats-{name}-{}-{nanos}",
        std::process::id()
    ));
    std::fs::create_dir_all(&dir).expect("create a temp dir");
    dir
}
