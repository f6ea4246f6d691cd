//! SPEC §10 with the rules users run: per-key instances in a pool (`load_per_key`), a
//! followed-by under `within`, event time, two feeders racing. Replays fed in another order
//! reproduce every key's alerts (R10.2).

use std::collections::BTreeMap;
use std::time::Duration;

use correlator::record::{MemorySink, Recording};
use correlator::{
    ContextOptions, Correlator, CorrelatorBuilder, Error, Event, Monitor, Output, OutputOptions,
    OutputReceiver, Pattern, PoolInput, Scope, Time,
};

#[derive(Clone, Debug)]
struct Tx {
    key: u64,
    n: u64,
    t_ms: u64,
}

impl Event for Tx {
    type Kind = ();
    fn kind(&self) {}
    fn key(&self) -> Option<u64> {
        Some(self.key)
    }
    fn time(&self) -> Option<Time> {
        Some(Time::from_millis(self.t_ms))
    }
}

/// `(key, first, second)`: two transactions of a key within 300 ms; `(key, count, 0)` every
/// tenth transaction of a key.
type Alert = (u64, u64, u64);

struct PerKey {
    out: Output<Alert>,
    key: u64,
    count: u64,
}

impl Monitor<Tx> for PerKey {
    fn on_load(&mut self, cx: &mut Scope<'_, Tx, Self>) {
        let key = self.key;
        let a = || Pattern::kind(()).key(key);
        cx.when_all(
            a().then(a()).within(Duration::from_millis(300)),
            |m: &mut PerKey, cx, hit| {
                let first = &hit.events[0];
                let second = &hit.events[1];
                let _ = cx.emit_to(&m.out, (first.key, first.n, second.n));
            },
        );
        cx.on_all(Pattern::kind(()).key(key), |m: &mut PerKey, cx, e| {
            m.count += 1;
            if m.count.is_multiple_of(10) {
                let _ = cx.emit_to(&m.out, (e.key, m.count, 0));
            }
        });
    }
}

struct Run {
    c: Correlator<Tx>,
    rx: OutputReceiver<Alert>,
    inputs: Vec<PoolInput<Tx>>,
}

fn set_up(builder: CorrelatorBuilder<Tx>) -> Result<Run, Error> {
    let c = builder.event_time().inbox_capacity(256).build()?;
    let pool = c.create_pool(ContextOptions::new("member"), 3)?;
    let (out, rx) = c.typed_output::<Alert>(OutputOptions::bounded(1 << 16))?;
    let out = out.fingerprinted();
    pool.load_per_key([()], move |key, _first: &Tx| PerKey {
        out: out.clone(),
        key,
        count: 0,
    })?;
    let inputs = vec![pool.input(), pool.input()];
    c.start();
    Ok(Run { c, rx, inputs })
}

/// Feeder `i`: 4,000 transactions over 200 keys, time moving 0-3 ms per event.
fn feed(input: &PoolInput<Tx>, i: u64) {
    let mut s = 0x9e37_79b9_7f4a_7c15u64 ^ i;
    let mut t = 0;
    for k in 0..4_000 {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        t += s % 4;
        let tx = Tx {
            key: s % 200,
            n: i << 32 | k,
            t_ms: t,
        };
        input.send(tx).unwrap();
    }
}

/// Each key's alerts in order (a key lives in one member, whose order is deterministic).
fn by_key(rx: &OutputReceiver<Alert>) -> BTreeMap<u64, Vec<Alert>> {
    let mut m: BTreeMap<u64, Vec<Alert>> = BTreeMap::new();
    for a in rx.try_iter() {
        m.entry(a.0).or_default().push(a);
    }
    m
}

// R10.2 (and R7.1, R6.2): a pool's per-key instances with a followed-by under `within` in event
// time, fed by two racing threads, replay to the same alerts for every key, fed one feeder
// after the other.
#[test]
fn r10_2_per_key_rules_in_a_pool_under_event_time_replay_exactly() {
    let sink = MemorySink::new();
    let run = set_up(Correlator::builder().record_to(sink.clone())).unwrap();
    std::thread::scope(|s| {
        for (i, input) in run.inputs.into_iter().enumerate() {
            s.spawn(move || feed(&input, i as u64));
        }
    });
    run.c.shutdown().unwrap();
    let recorded = by_key(&run.rx);
    let alerts: usize = recorded.values().map(Vec::len).sum();
    let pairs = recorded.values().flatten().filter(|a| a.2 != 0).count();
    // How many pairs depends on how the feeders interleaved: 131 when one runs entirely before
    // the other (823 alerts), 150-200 when they race. The bound only says the run was not trivial;
    // the check is the replays' equality below.
    assert!(
        alerts > 800 && pairs > 100,
        "{alerts} alerts, {pairs} pairs"
    );
    let recording: Recording = sink.recording().unwrap();
    for round in 0..5 {
        let r = set_up(Correlator::builder().replay(recording.clone())).unwrap();
        for (i, input) in r.inputs.iter().enumerate().rev() {
            feed(input, i as u64);
        }
        assert_eq!(r.c.shutdown().map(|_| ()), Ok(()), "round {round}");
        assert!(by_key(&r.rx) == recorded, "round {round}: other alerts");
    }
}
