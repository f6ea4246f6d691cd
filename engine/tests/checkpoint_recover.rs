//! SPEC §11, checkpoints of a correlator's state and recovery from them (R11.9 - R11.13): a run
//! that is checkpointed, "crashes" (its later work is thrown away) and recovers from the
//! checkpoint emits exactly the alerts of a run that never stopped, with partial matches, timers
//! and listeners registered at run time carried across; a damaged newest checkpoint is passed
//! over for the one before; and every way a checkpoint or a recovery cannot be done is a typed
//! error. Needs the `checkpoint` feature.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::time::Duration;

use correlator::checkpoint::{CheckpointError, DirStore};
use correlator::record::EventCodec;
use correlator::{
    ContextOptions, Correlator, EmitId, Error, Event, Monitor, Pattern, Persistent, Scope, Time,
};
use serde::{Deserialize, Serialize};

mod common;

#[derive(Clone, Debug, PartialEq, Eq)]
enum Ev {
    Tx {
        card: u64,
        amount: u32,
        country: u8,
        present: bool,
        ms: u64,
    },
    Alert {
        rule: u8,
        card: u64,
        ms: u64,
        id: EmitId,
    },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Kind {
    Tx,
    Alert,
}

impl Event for Ev {
    type Kind = Kind;
    fn kind(&self) -> Kind {
        match self {
            Ev::Tx { .. } => Kind::Tx,
            Ev::Alert { .. } => Kind::Alert,
        }
    }
    fn key(&self) -> Option<u64> {
        match self {
            Ev::Tx { card, .. } | Ev::Alert { card, .. } => Some(*card),
        }
    }
    fn time(&self) -> Option<Time> {
        match self {
            Ev::Tx { ms, .. } => Some(Time::from_millis(*ms)),
            Ev::Alert { .. } => None,
        }
    }
    /// The transaction's time stands in for a position in a durable source (R11.9).
    fn position(&self) -> Option<u64> {
        match self {
            Ev::Tx { ms, .. } => Some(*ms),
            Ev::Alert { .. } => None,
        }
    }
}

/// The events partial matches hold, as bytes: only transactions are ever held.
struct Codec;

impl EventCodec<Ev> for Codec {
    fn encode(&self, e: &Ev, out: &mut Vec<u8>) {
        if let Ev::Tx {
            card,
            amount,
            country,
            present,
            ms,
        } = e
        {
            out.extend_from_slice(&card.to_le_bytes());
            out.extend_from_slice(&amount.to_le_bytes());
            out.push(*country);
            out.push(u8::from(*present));
            out.extend_from_slice(&ms.to_le_bytes());
        }
    }
    fn decode(&self, b: &[u8]) -> Result<Ev, String> {
        if b.len() != 22 {
            return Err(format!("a transaction is 22 bytes, not {}", b.len()));
        }
        let u64_at = |i: usize| u64::from_le_bytes(b[i..i + 8].try_into().expect("8 bytes"));
        Ok(Ev::Tx {
            card: u64_at(0),
            amount: u32::from_le_bytes(b[8..12].try_into().expect("4 bytes")),
            country: b[12],
            present: b[13] == 1,
            ms: u64_at(14),
        })
    }
}

const BIG: u32 = 1_000;
const LARGE: u32 = 5_000;

fn amount(e: &Ev) -> u32 {
    match e {
        Ev::Tx { amount, .. } => *amount,
        Ev::Alert { .. } => 0,
    }
}

/// The fraud rules of `workload/fraud`, with one instance per card spawned by a root instance.
/// Rule 1: three transactions over `BIG` within 60 s of the second. Rule 2: a transaction over
/// `LARGE`, then a card-present one in another country within 10 minutes: a `when` registered
/// at run time per large transaction, whose country and deadline the state keeps, so that
/// `on_restore` can register it again.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
struct Fraud {
    /// `None`: the root instance, which knows the cards; `Some`: a card's instance.
    card: Option<u64>,
    known: BTreeSet<u64>,
    /// Rule 2's open windows: `(id, country, deadline in ms)`, in registration order.
    pending: Vec<(u64, u8, u64)>,
    next_id: u64,
}

impl Fraud {
    fn listen(&mut self, cx: &mut Scope<'_, Ev, Self>) {
        let alerts = cx.channel("alerts").expect("below max_channels");
        let Some(card) = self.card else {
            cx.on_all(Pattern::kind(Kind::Tx), |m: &mut Fraud, cx, e| {
                let Some(card) = e.key() else { return };
                if m.known.insert(card) {
                    let mut instance = Fraud {
                        card: Some(card),
                        ..Fraud::default()
                    };
                    instance.known.clear();
                    cx.spawn(&instance, |m, cx| m.listen(cx));
                }
            });
            return;
        };
        let big = || {
            Pattern::kind(Kind::Tx)
                .key(card)
                .filter(|e| amount(e) > BIG)
        };
        let rule1 = big().then(big().then(big()).within(Duration::from_secs(60)));
        cx.when_all(rule1, move |_m, cx, hit| {
            if let Some(Ev::Tx { ms, .. }) = hit.events.last() {
                let id = cx.emit_id();
                cx.emit(
                    alerts,
                    Ev::Alert {
                        rule: 1,
                        card,
                        ms: *ms,
                        id,
                    },
                );
            }
        });
        cx.on_all(
            Pattern::kind(Kind::Tx)
                .key(card)
                .filter(|e| amount(e) > LARGE),
            move |m: &mut Fraud, cx, e| {
                if let Ev::Tx { country, ms, .. } = *e {
                    let id = m.next_id;
                    m.next_id += 1;
                    m.pending.push((id, country, ms + 600_000));
                    Fraud::watch(cx, card, id, country, Duration::from_secs(600));
                }
            },
        );
        // Rule 2's open windows, restored: in registration order, with what is left of each.
        let now = cx.now().as_nanos() / 1_000_000;
        for &(id, country, deadline) in &self.pending {
            if deadline > now {
                Fraud::watch(cx, card, id, country, Duration::from_millis(deadline - now));
            }
        }
    }

    fn watch(cx: &mut Scope<'_, Ev, Self>, card: u64, id: u64, country: u8, left: Duration) {
        let alerts = cx.channel("alerts").expect("below max_channels");
        let abroad = Pattern::kind(Kind::Tx).key(card).filter(
            move |e| matches!(e, Ev::Tx { country: c, present: true, .. } if *c != country),
        );
        cx.when(abroad.within(left), move |m: &mut Fraud, cx, hit| {
            m.pending.retain(|p| p.0 != id);
            if let Some(Ev::Tx { ms, .. }) = hit.events.first() {
                let id = cx.emit_id();
                cx.emit(
                    alerts,
                    Ev::Alert {
                        rule: 2,
                        card,
                        ms: *ms,
                        id,
                    },
                );
            }
        });
    }
}

impl Monitor<Ev> for Fraud {
    fn on_load(&mut self, cx: &mut Scope<'_, Ev, Self>) {
        self.listen(cx);
    }
}

impl Persistent<Ev> for Fraud {
    const NAME: &'static str = "fraud/v1";
    fn on_restore(&mut self, cx: &mut Scope<'_, Ev, Self>) {
        // The windows whose deadline passed ended with their timers; drop them from the state
        // first, so that the listeners registered match the live ones.
        let now = cx.now().as_nanos() / 1_000_000;
        self.pending.retain(|p| p.2 > now);
        self.listen(cx);
    }
}

/// Seeded transactions: 40 cards, times increasing by 0 to 1 s.
fn transactions(n: usize, seed: u64) -> Vec<Ev> {
    let mut next = common::seeded(seed);
    let mut ms = 0;
    (0..n)
        .map(|_| {
            ms += next() % 1_000;
            let r = next() % 100;
            let amount = match r {
                0..=4 => 5_001 + (next() % 5_000) as u32,
                5..=29 => 1_001 + (next() % 3_000) as u32,
                _ => (next() % 900) as u32,
            };
            Ev::Tx {
                card: next() % 40,
                amount,
                country: (next() % 3) as u8,
                present: next().is_multiple_of(2),
                ms,
            }
        })
        .collect()
}

/// A builder on event time with checkpoints into a directory store at `dir`: what every test
/// here starts from (each adds the persistent types and settings it tests).
fn stored(dir: &Path) -> correlator::CorrelatorBuilder<Ev> {
    Correlator::builder()
        .event_time()
        .checkpoints(DirStore::open(dir).expect("open the store"), Codec)
}

fn builder(dir: &Path) -> correlator::CorrelatorBuilder<Ev> {
    stored(dir).persistent::<Fraud>()
}

fn fresh_dir(name: &str) -> PathBuf {
    common::fresh_dir(&format!("ckpt-{name}"))
}

/// Feeds `events` to `main` through the named input `tx`.
fn feed(c: &Correlator<Ev>, input: &correlator::InputHandle<Ev>, events: &[Ev]) {
    for e in events {
        input.send_to(c.main(), e.clone()).expect("send");
    }
}

/// The alerts of a run that never stops.
fn reference(events: &[Ev]) -> Vec<Ev> {
    let c = Correlator::<Ev>::builder()
        .event_time()
        .build()
        .expect("build");
    let alerts = c.output(c.channel("alerts").expect("channel"));
    c.start();
    c.load(Fraud::default()).expect("load");
    feed(&c, &c.input(), events);
    c.shutdown().expect("shutdown");
    alerts.try_iter().collect()
}

/// A run that recovers from `dir` (or starts fresh), feeds `events` from where the checkpoint
/// left off, takes a checkpoint at each position in `checkpoints`, then "crashes" after feeding
/// `lost` more: returns the alerts emitted up to its last checkpoint (those after it are thrown
/// away, as a crash would lose its state) and the recovery's report.
fn run_and_crash(
    dir: &Path,
    events: &[Ev],
    checkpoints: &[usize],
    lost: usize,
) -> (Vec<Ev>, Option<correlator::Recovered>) {
    let (kept, _, recovered) = run_and_crash_all(dir, events, checkpoints, lost);
    (kept, recovered)
}

/// [`run_and_crash`], and every alert the run emitted, those after its last checkpoint too (a
/// sink had published them before the crash).
fn run_and_crash_all(
    dir: &Path,
    events: &[Ev],
    checkpoints: &[usize],
    lost: usize,
) -> (Vec<Ev>, Vec<Ev>, Option<correlator::Recovered>) {
    let c = builder(dir).build().expect("build");
    let alerts = c.output(c.channel("alerts").expect("channel"));
    let recovered = c.recover().expect("recover");
    let from = match &recovered {
        Some(r) => r.taken("tx") as usize,
        None => {
            c.load(Fraud::default()).expect("load");
            0
        }
    };
    let input = c.named_input("tx").expect("named input");
    let mut kept = Vec::new();
    let mut at = from;
    for &k in checkpoints {
        feed(&c, &input, &events[at..k]);
        at = k;
        c.checkpoint().expect("checkpoint");
        // Everything fed before the checkpoint was processed when it returned.
        kept.extend(alerts.try_iter());
    }
    let end = (at + lost).min(events.len());
    feed(&c, &input, &events[at..end]);
    c.shutdown().expect("shutdown");
    drop(c);
    let mut all = kept.clone();
    all.extend(alerts.try_iter());
    (kept, all, recovered)
}

/// Recovers from `dir` and feeds the rest: the alerts emitted.
fn recover_and_finish(dir: &Path, events: &[Ev]) -> (Vec<Ev>, correlator::Recovered) {
    let c = builder(dir).build().expect("build");
    let alerts = c.output(c.channel("alerts").expect("channel"));
    let r = c
        .recover()
        .expect("recover")
        .expect("a checkpoint is stored");
    let input = c.named_input("tx").expect("named input");
    feed(&c, &input, &events[r.taken("tx") as usize..]);
    c.shutdown().expect("shutdown");
    (alerts.try_iter().collect(), r)
}

// R11.9, R11.11: checkpointed at 2,500 of 6,000 transactions, the run is lost from there (700
// more were fed and thrown away); the recovered run, fed again from the checkpoint's count,
// emits the rest, and the two together are exactly the uninterrupted run's alerts, in order.
// Fed the same rest without the checkpoint's state, a fresh start emits other alerts: the
// partial matches, timers and run-time listeners carried across are what makes them equal.
#[test]
fn r11_11_a_recovered_run_emits_what_an_uninterrupted_one_does() {
    let events = transactions(6_000, 7);
    let expected = reference(&events);
    assert!(
        expected.len() > 50,
        "{} alerts: too few to tell",
        expected.len()
    );
    let dir = fresh_dir("once");
    let (before, recovered) = run_and_crash(&dir, &events, &[2_500], 700);
    assert!(recovered.is_none(), "the store was empty");
    let (after, r) = recover_and_finish(&dir, &events);
    assert_eq!(r.taken("tx"), 2_500);
    assert_eq!(r.position("tx"), events[2_499].position());
    assert!(r.skipped.is_empty());
    let mut got = before.clone();
    got.extend(after.iter().cloned());
    assert_eq!(got, expected);

    // What a restart without the state would have emitted for the same rest.
    let naive = {
        let c = Correlator::<Ev>::builder()
            .event_time()
            .build()
            .expect("build");
        let alerts = c.output(c.channel("alerts").expect("channel"));
        c.start();
        c.load(Fraud::default()).expect("load");
        feed(&c, &c.input(), &events[2_500..]);
        c.shutdown().expect("shutdown");
        alerts.try_iter().collect::<Vec<_>>()
    };
    assert_ne!(naive, after, "the checkpoint's state made no difference");
    std::fs::remove_dir_all(&dir).expect("clean up");
}

// R11.14: a sink that publishes every alert it receives, once per id, gets exactly the
// uninterrupted run's alerts from a run that crashed after its checkpoint (having published
// alerts the checkpoint does not hold) and the run recovered from it (which emits them again):
// the repeats carry the ids they had, and no id names two different alerts.
#[test]
fn r11_14_emit_ids_make_outputs_effectively_once() {
    let events = transactions(6_000, 31);
    let expected = reference(&events);
    let dir = fresh_dir("once-ids");
    let (_, published_before_crash, _) = run_and_crash_all(&dir, &events, &[2_000], 1_500);
    let (after, _) = recover_and_finish(&dir, &events);
    let mut sink = std::collections::BTreeMap::new();
    let (mut published, mut repeats) = (Vec::new(), 0);
    for alert in published_before_crash.into_iter().chain(after) {
        let Ev::Alert { id, .. } = alert else {
            panic!("not an alert: {alert:?}")
        };
        match sink.entry(id) {
            std::collections::btree_map::Entry::Occupied(o) => {
                assert_eq!(o.get(), &alert, "one id, two alerts");
                repeats += 1;
            }
            std::collections::btree_map::Entry::Vacant(v) => {
                v.insert(alert.clone());
                published.push(alert);
            }
        }
    }
    assert!(
        repeats > 0,
        "the crash lost no published alert: nothing was de-duplicated"
    );
    assert_eq!(published, expected);
    std::fs::remove_dir_all(&dir).expect("clean up");
}

// R11.9, R11.11: three incarnations, each checkpointing, crashing and recovering from the last
// one's checkpoint; the input counts go on across recoveries (the second checkpoint counts from
// the input's first event ever), and the alerts are the uninterrupted run's.
#[test]
fn r11_9_input_counts_go_on_across_recoveries() {
    let events = transactions(6_000, 11);
    let expected = reference(&events);
    let dir = fresh_dir("chain");
    let (first, _) = run_and_crash(&dir, &events, &[1_000, 2_000], 300);
    let (second, r) = run_and_crash(&dir, &events, &[3_500], 900);
    let r = r.expect("recovered");
    assert_eq!(r.taken("tx"), 2_000);
    let (third, r) = recover_and_finish(&dir, &events);
    assert_eq!(r.taken("tx"), 3_500);
    assert_eq!(r.position("tx"), events[3_499].position());
    let got: Vec<Ev> = first.into_iter().chain(second).chain(third).collect();
    assert_eq!(got, expected);
    std::fs::remove_dir_all(&dir).expect("clean up");
}

// R11.12 with R11.4: the newest checkpoint damaged (one byte of its payload changed), recovery
// passes it over, reports it, and resumes from the one before: the alerts are still exactly
// the uninterrupted run's.
#[test]
fn r11_12_a_damaged_newest_checkpoint_falls_back_to_the_one_before() {
    let events = transactions(5_000, 23);
    let expected = reference(&events);
    let dir = fresh_dir("damaged");
    // Alerts up to the first checkpoint; those up to the second are lost with it.
    let (kept, _) = run_and_crash(&dir, &events, &[1_500], 0);
    let (_, _) = run_and_crash(&dir, &events, &[3_000], 0);
    let files = common::checkpoint_files(&dir);
    let newest = files.last().expect("two checkpoints");
    let mut bytes = std::fs::read(newest).expect("read");
    let last = bytes.len() - 1;
    bytes[last] ^= 0x5a;
    std::fs::write(newest, bytes).expect("write");
    let (after, r) = recover_and_finish(&dir, &events);
    assert_eq!(r.skipped.len(), 1, "{:?}", r.skipped);
    assert_eq!(&r.skipped[0].path, newest);
    assert_eq!(r.taken("tx"), 1_500);
    let got: Vec<Ev> = kept.into_iter().chain(after).collect();
    assert_eq!(got, expected);
    std::fs::remove_dir_all(&dir).expect("clean up");
}

/// A monitor with two listeners.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
struct Two {
    n: u64,
}

impl Two {
    fn listen(&mut self, cx: &mut Scope<'_, Ev, Self>, both: bool) {
        cx.on_all(Pattern::kind(Kind::Tx), |m: &mut Two, _cx, _e| m.n += 1);
        if both {
            cx.on_all(Pattern::kind(Kind::Alert), |_m: &mut Two, _cx, _e| {});
        }
    }
}

impl Monitor<Ev> for Two {
    fn on_load(&mut self, cx: &mut Scope<'_, Ev, Self>) {
        self.listen(cx, true);
    }
}

impl Persistent<Ev> for Two {
    const NAME: &'static str = "two/v1";
    fn on_restore(&mut self, cx: &mut Scope<'_, Ev, Self>) {
        self.listen(cx, true);
    }
}

/// How `Misfit` registers `Two`'s listeners again: 0 only the first; 1 the first as `on`
/// (saved as `on_all`); 2 the second as an expression (saved as a template).
static MISFIT: std::sync::atomic::AtomicU8 = std::sync::atomic::AtomicU8::new(0);

/// `Two` under its name and state, whose `on_restore` registers its listeners otherwise.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
struct Misfit {
    n: u64,
}

impl Monitor<Ev> for Misfit {
    fn on_load(&mut self, _cx: &mut Scope<'_, Ev, Self>) {}
}

impl Persistent<Ev> for Misfit {
    const NAME: &'static str = "two/v1";
    fn on_restore(&mut self, cx: &mut Scope<'_, Ev, Self>) {
        let (tx, alert) = (Pattern::kind(Kind::Tx), Pattern::kind(Kind::Alert));
        match MISFIT.load(std::sync::atomic::Ordering::Relaxed) {
            0 => {
                cx.on_all(tx, |m: &mut Misfit, _cx, _e| m.n += 1);
            }
            1 => {
                cx.on(tx, |m: &mut Misfit, _cx, _e| m.n += 1);
                cx.on_all(alert, |_m: &mut Misfit, _cx, _e| {});
            }
            _ => {
                cx.on_all(tx, |m: &mut Misfit, _cx, _e| m.n += 1);
                cx.when_all(alert, |_m: &mut Misfit, _cx, _hit| {});
            }
        }
    }
}

/// Not persistent.
struct Plain;

impl Monitor<Ev> for Plain {
    fn on_load(&mut self, cx: &mut Scope<'_, Ev, Self>) {
        cx.on_all(Pattern::kind(Kind::Tx), |_m, _cx, _e| {});
    }
}

fn tx(ms: u64) -> Ev {
    Ev::Tx {
        card: 1,
        amount: 10,
        country: 0,
        present: true,
        ms,
    }
}

/// A store in `dir` holding one checkpoint of one `Two` instance that counted 3 events.
fn one_two_checkpoint(dir: &Path) {
    let c = stored(dir).persistent::<Two>().build().expect("build");
    assert!(c.recover().expect("recover").is_none());
    c.load(Two::default()).expect("load");
    let input = c.named_input("tx").expect("named");
    feed(&c, &input, &[tx(1), tx(2), tx(3)]);
    c.checkpoint().expect("checkpoint");
    c.shutdown().expect("shutdown");
}

// R11.9, R11.10, R11.13: each way a checkpoint cannot be taken is a typed error, and saves
// nothing.
#[test]
fn r11_10_what_cannot_be_saved_is_refused_with_a_typed_error() {
    // Without `checkpoints`.
    let c = Correlator::<Ev>::builder().build().expect("build");
    assert!(matches!(
        c.checkpoint(),
        Err(CheckpointError::NotConfigured)
    ));
    assert!(matches!(c.recover(), Err(CheckpointError::NotConfigured)));
    drop(c);

    let dir = fresh_dir("refusals");
    let c = stored(&dir).persistent::<Two>().build().expect("build");
    // Before start.
    assert!(matches!(
        c.checkpoint(),
        Err(CheckpointError::NotNow { .. })
    ));
    c.start();
    assert!(matches!(c.recover(), Err(CheckpointError::NotNow { .. })));
    // An instance of a monitor that is not persistent.
    c.load(Plain).expect("load");
    match c.checkpoint() {
        Err(CheckpointError::NotPersistent { context, monitor }) => {
            assert_eq!(context, "main");
            assert!(monitor.ends_with("Plain"), "{monitor}");
        }
        other => panic!("expected NotPersistent, got {other:?}"),
    }
    // The same in a second context: the checkpoint fails as a whole.
    let second = c
        .create_context(ContextOptions::new("second"))
        .expect("context");
    c.load_in(second, Plain).expect("load");
    assert!(matches!(
        c.checkpoint(),
        Err(CheckpointError::NotPersistent { .. })
    ));
    c.shutdown().expect("shutdown");
    drop(c);
    let stored = common::checkpoint_files(&dir).len();
    assert_eq!(stored, 0, "a refused checkpoint saved something");

    // Two persistent monitors of one name.
    let twice = Correlator::<Ev>::builder()
        .checkpoints(DirStore::open(fresh_dir("names")).expect("open"), Codec)
        .persistent::<Two>()
        .persistent::<Misfit>()
        .build();
    assert!(matches!(
        twice,
        Err(Error::PersistentName { name: "two/v1" })
    ));
    std::fs::remove_dir_all(&dir).expect("clean up");
    let _ = std::fs::remove_dir_all(fresh_dir("names"));
}

// R11.11, R11.12: a checkpoint that does not fit the recovering program is a typed error: a
// monitor it does not know, other contexts, an `on_restore` that registers other listeners.
#[test]
fn r11_12_a_checkpoint_that_does_not_fit_the_program_is_a_typed_error() {
    let dir = fresh_dir("misfit");
    one_two_checkpoint(&dir);

    let unknown = stored(&dir).build().expect("build");
    match unknown.recover() {
        Err(CheckpointError::UnknownMonitor { name }) => assert_eq!(name, "two/v1"),
        other => panic!("expected UnknownMonitor, got {other:?}"),
    }
    let _ = unknown.shutdown();
    drop(unknown);

    let other_contexts = stored(&dir).persistent::<Two>().build().expect("build");
    other_contexts
        .create_context(ContextOptions::new("extra"))
        .expect("context");
    match other_contexts.recover() {
        Err(CheckpointError::ContextsDiffer { saved, now }) => {
            assert_eq!(saved, ["main"]);
            assert_eq!(now, ["main", "extra"]);
        }
        other => panic!("expected ContextsDiffer, got {other:?}"),
    }
    drop(other_contexts);

    // Fewer listeners registered again, one in another mode, one of another kind.
    for (misfit, expected) in [
        (0, "registered 1 listeners, but the instance had 2"),
        (
            1,
            "registered with `on` or `when`, but was saved as `on_all` or `when_all`",
        ),
        (2, "its listener 2 is not of the kind saved"),
    ] {
        MISFIT.store(misfit, std::sync::atomic::Ordering::Relaxed);
        let misfit = stored(&dir).persistent::<Misfit>().build().expect("build");
        match misfit.recover() {
            Err(CheckpointError::Mismatch { monitor, why, .. }) => {
                assert_eq!(monitor, "two/v1");
                assert!(why.contains(expected), "{why}");
            }
            other => panic!("expected Mismatch, got {other:?}"),
        }
    }

    // The program that saved it recovers it, with its state.
    let same = stored(&dir).persistent::<Two>().build().expect("build");
    let r = same.recover().expect("recover").expect("stored");
    assert_eq!(r.taken("tx"), 3);
    let status = same.status();
    assert_eq!(status.contexts[0].instances, 1);
    assert_eq!(status.contexts[0].listeners, 2);
    same.shutdown().expect("shutdown");
    std::fs::remove_dir_all(&dir).expect("clean up");
}

// R11.9: `checkpoint_every` takes checkpoints while the correlator runs, without a request,
// and the last one before shutdown holds what was processed.
#[test]
fn r11_9_checkpoints_are_taken_every_interval() {
    let dir = fresh_dir("every");
    let c = stored(&dir)
        .checkpoint_every(Duration::from_millis(20))
        .persistent::<Two>()
        .build()
        .expect("build");
    assert!(c.recover().expect("recover").is_none());
    c.load(Two::default()).expect("load");
    let input = c.named_input("tx").expect("named");
    feed(&c, &input, &[tx(1), tx(2), tx(3)]);
    let count = || common::checkpoint_files(&dir).len();
    // Two more checkpoints after the events were fed, the later one holding them.
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    let before = count();
    while count() < before + 2 {
        assert!(
            std::time::Instant::now() < deadline,
            "no periodic checkpoint"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    c.shutdown().expect("shutdown");
    drop(c);
    let again = stored(&dir).persistent::<Two>().build().expect("build");
    let r = again.recover().expect("recover").expect("stored");
    assert_eq!(r.taken("tx"), 3);
    again.shutdown().expect("shutdown");
    let zero = Correlator::<Ev>::builder()
        .checkpoints(DirStore::open(fresh_dir("zero")).expect("open"), Codec)
        .checkpoint_every(Duration::ZERO)
        .build();
    assert!(matches!(
        zero,
        Err(Error::InvalidLimit {
            setting: "checkpoint_every"
        })
    ));
    let _ = std::fs::remove_dir_all(fresh_dir("zero"));
    std::fs::remove_dir_all(&dir).expect("clean up");
}

/// The fraud rules on a pool of two members, one instance per card (`load_per_key_delivering`),
/// recovering from `dir` when it holds a checkpoint: the correlator, its pool, its alerts.
fn fraud_pool(
    dir: Option<&Path>,
) -> (
    Correlator<Ev>,
    correlator::Pool<Ev>,
    correlator::OutputReceiver<Ev>,
    Option<correlator::Recovered>,
) {
    let mut b = Correlator::<Ev>::builder().event_time();
    if let Some(dir) = dir {
        b = b
            .checkpoints(DirStore::open(dir).expect("open"), Codec)
            .persistent::<Fraud>();
    }
    let c = b.build().expect("build");
    let pool = c
        .create_pool(ContextOptions::new("cards"), 2)
        .expect("pool");
    let alerts = c.output(c.channel("alerts").expect("channel"));
    // The pool's dispatchers are configuration: loaded again before `recover`.
    pool.load_per_key_delivering([Kind::Tx], |card, _first: &Ev| Fraud {
        card: Some(card),
        ..Fraud::default()
    })
    .expect("load_per_key");
    let recovered = match dir {
        Some(_) => c.recover().expect("recover"),
        None => {
            c.start();
            None
        }
    };
    (c, pool, alerts, recovered)
}

/// Alerts by id, as a sink that publishes each id once would keep them.
fn by_id(alerts: impl IntoIterator<Item = Ev>) -> (Vec<Ev>, usize) {
    let mut sink = std::collections::BTreeMap::new();
    let mut repeats = 0;
    for alert in alerts {
        let Ev::Alert { id, .. } = alert else {
            panic!("not an alert: {alert:?}")
        };
        match sink.entry(id) {
            std::collections::btree_map::Entry::Occupied(o) => {
                assert_eq!(o.get(), &alert, "one id, two alerts");
                repeats += 1;
            }
            std::collections::btree_map::Entry::Vacant(v) => {
                v.insert(alert);
            }
        }
    }
    (sink.into_values().collect(), repeats)
}

// R11.10 - R11.12 on a pool: the per-key instances of both members are saved (the dispatchers,
// configuration, are loaded again before `recover`), restored into the members' dispatchers, and
// fed again through `Pool::resume`, which passes over what each member had taken; de-duplicated
// by id, everything published before the crash and after the recovery is exactly the alerts of
// a pool that never stopped.
#[test]
fn r11_12_a_pool_recovers_its_per_key_instances() {
    let events = transactions(6_000, 41);
    let expected = {
        let (c, pool, alerts, _) = fraud_pool(None);
        let input = pool.input();
        for e in &events {
            input.send(e.clone()).expect("send");
        }
        c.shutdown().expect("shutdown");
        by_id(alerts.try_iter()).0
    };
    assert!(
        expected.len() > 50,
        "{} alerts: too few to tell",
        expected.len()
    );
    let dir = fresh_dir("pool");
    let mut published = Vec::new();
    {
        let (c, pool, alerts, recovered) = fraud_pool(Some(&dir));
        assert!(recovered.is_none());
        let input = pool.named_input(&c, "tx").expect("named");
        for e in &events[..2_500] {
            input.send(e.clone()).expect("send");
        }
        c.checkpoint().expect("checkpoint");
        for e in &events[2_500..3_200] {
            input.send(e.clone()).expect("send");
        }
        c.shutdown().expect("shutdown");
        published.extend(alerts.try_iter());
    }
    let (c, pool, alerts, recovered) = fraud_pool(Some(&dir));
    let r = recovered.expect("a checkpoint is stored");
    assert_eq!(r.taken("tx"), 2_500);
    let status = pool.status();
    assert!(
        status.live_keys > 0 && status.members.iter().all(|m| m.live_keys > 0),
        "{status:?}"
    );
    let mut resume = pool.resume(&r, "tx");
    let input = pool.named_input(&c, "tx").expect("named");
    for e in &events {
        if !resume.taken(e) {
            input.send(e.clone()).expect("send");
        }
    }
    assert_eq!(resume.pending(), 0);
    c.shutdown().expect("shutdown");
    published.extend(alerts.try_iter());
    let (got, repeats) = by_id(published);
    assert!(
        repeats > 0,
        "nothing published before the crash was derived again"
    );
    assert_eq!(got, expected);
    std::fs::remove_dir_all(&dir).expect("clean up");
}

// R11.11, R11.12: a recovering program that loads another pool dispatcher before the one it
// checkpointed gives that dispatcher a handle a saved per-key listener had: the recovery fails
// with `Mismatch` naming it, rather than give two listeners one handle.
#[test]
fn r11_12_a_dispatcher_loaded_out_of_order_is_a_typed_error() {
    let events = transactions(600, 43);
    let dir = fresh_dir("pool-order");
    {
        let (c, pool, _alerts, recovered) = fraud_pool(Some(&dir));
        assert!(recovered.is_none());
        let input = pool.named_input(&c, "tx").expect("named");
        for e in &events {
            input.send(e.clone()).expect("send");
        }
        c.checkpoint().expect("checkpoint");
        c.shutdown().expect("shutdown");
    }
    let c = stored(&dir).persistent::<Fraud>().build().expect("build");
    let pool = c
        .create_pool(ContextOptions::new("cards"), 2)
        .expect("pool");
    let _alerts = c.output(c.channel("alerts").expect("channel"));
    // One more dispatcher first: it takes the handle the card dispatcher had, and the card
    // dispatcher the one its first per-key instance's listener had.
    pool.load_per_key([Kind::Alert], |_key, _first: &Ev| Two::default())
        .expect("load_per_key");
    pool.load_per_key_delivering([Kind::Tx], |card, _first: &Ev| Fraud {
        card: Some(card),
        ..Fraud::default()
    })
    .expect("load_per_key");
    match c.recover() {
        Err(CheckpointError::Mismatch { monitor, why, .. }) => {
            assert_eq!(monitor, "fraud/v1");
            assert!(
                why.contains("which a listener loaded before `recover` has"),
                "{why}"
            );
        }
        other => panic!("expected Mismatch, got {other:?}"),
    }
    let _ = c.shutdown();
    std::fs::remove_dir_all(&dir).expect("clean up");
}

/// Counts transactions and emits the count to the typed output named `counts`, whose handle
/// its state cannot hold: it finds it by name when loaded and when restored.
#[derive(Default, Serialize, Deserialize)]
struct Counted {
    n: u64,
    #[serde(skip)]
    out: Option<correlator::Output<u64>>,
}

impl Counted {
    fn listen(&mut self, cx: &mut Scope<'_, Ev, Self>) {
        self.out = cx.output("counts");
        cx.on_all(Pattern::kind(Kind::Tx), |m: &mut Counted, cx, _e| {
            m.n += 1;
            if let Some(out) = &m.out {
                let _ = cx.emit_to(out, m.n);
            }
        });
    }
}

impl Monitor<Ev> for Counted {
    fn on_load(&mut self, cx: &mut Scope<'_, Ev, Self>) {
        self.listen(cx);
    }
}

impl Persistent<Ev> for Counted {
    const NAME: &'static str = "counted/v1";
    fn on_restore(&mut self, cx: &mut Scope<'_, Ev, Self>) {
        self.listen(cx);
    }
}

// R11.11: a restored monitor finds its typed output again by name (`named_output`,
// `Scope::output`), and goes on counting where the checkpoint left it.
#[test]
fn r11_11_a_restored_monitor_finds_its_named_output() {
    let dir = fresh_dir("named-output");
    let build = || {
        let c = stored(&dir).persistent::<Counted>().build().expect("build");
        let (_, counts) = c
            .named_output::<u64>("counts", correlator::OutputOptions::default())
            .expect("named output");
        assert!(matches!(
            c.named_output::<u64>("counts", correlator::OutputOptions::default()),
            Err(Error::OutputNameTaken { .. })
        ));
        (c, counts)
    };
    let (c, counts) = build();
    assert!(c.recover().expect("recover").is_none());
    c.load(Counted::default()).expect("load");
    let input = c.named_input("tx").expect("named");
    feed(&c, &input, &[tx(1), tx(2), tx(3)]);
    c.checkpoint().expect("checkpoint");
    c.shutdown().expect("shutdown");
    assert_eq!(counts.try_iter().collect::<Vec<_>>(), [1, 2, 3]);
    drop(c);
    let (c, counts) = build();
    let r = c.recover().expect("recover").expect("stored");
    let input = c.named_input("tx").expect("named");
    feed(&c, &input, &[tx(4)]);
    c.shutdown().expect("shutdown");
    assert_eq!(r.taken("tx"), 3);
    assert_eq!(counts.try_iter().collect::<Vec<_>>(), [4]);
    std::fs::remove_dir_all(&dir).expect("clean up");
}

/// Not persistent, and ends at its first transaction.
struct Brief;

impl Monitor<Ev> for Brief {
    fn on_load(&mut self, cx: &mut Scope<'_, Ev, Self>) {
        cx.on(Pattern::kind(Kind::Tx), |_m, cx, _e| cx.die());
    }
}

// R11.9: a checkpoint that failed (an instance that cannot be saved, in the second of two
// contexts) leaves nothing behind: once that instance has ended, the next one is taken, across
// both contexts, and recovers. (A retry that reused the failed attempt's cut number would find
// the contexts that had saved for it ignoring it, and wait forever: bounded here.)
#[test]
fn r11_9_a_checkpoint_after_a_failed_one_is_taken() {
    let dir = fresh_dir("retry");
    let build = || {
        let c = stored(&dir).persistent::<Two>().build().expect("build");
        let second = c
            .create_context(ContextOptions::new("second"))
            .expect("context");
        (c, second)
    };
    let (c, second) = build();
    assert!(c.recover().expect("recover").is_none());
    c.load(Two::default()).expect("load");
    c.load_in(second, Brief).expect("load");
    let input = c.named_input("tx").expect("named");
    feed(&c, &input, &[tx(1), tx(2)]);
    assert!(matches!(
        c.checkpoint(),
        Err(CheckpointError::NotPersistent { .. })
    ));
    // `Brief` ends at its transaction.
    input.send_to(second, tx(3)).expect("send");
    let (done, result) = std::sync::mpsc::channel();
    let c = std::sync::Arc::new(c);
    let taker = c.clone();
    let thread = std::thread::spawn(move || {
        let _ = done.send(taker.checkpoint().map_err(|e| e.to_string()));
    });
    let seq = result
        .recv_timeout(Duration::from_secs(30))
        .expect("the checkpoint after a failed one did not finish")
        .expect("the checkpoint after a failed one");
    assert_eq!(seq, 1, "the failed attempt used up no sequence");
    // Its handle on the correlator (and so on the store's lock) goes with the thread.
    thread.join().expect("the checkpoint's thread");
    c.shutdown().expect("shutdown");
    drop(c);
    let (again, _) = build();
    let r = again.recover().expect("recover").expect("stored");
    assert_eq!((r.seq, r.taken("tx")), (1, 3));
    again.shutdown().expect("shutdown");
    std::fs::remove_dir_all(&dir).expect("clean up");
}

/// The correlator of `r11_13_a_checkpoint_asked_from_a_handler_is_refused`, for its handler.
static FROM_HANDLER: std::sync::OnceLock<std::sync::Arc<Correlator<Ev>>> =
    std::sync::OnceLock::new();

/// Asks for a checkpoint from its handler and reports what it got.
struct Asks(std::sync::mpsc::Sender<String>);

impl Monitor<Ev> for Asks {
    fn on_load(&mut self, cx: &mut Scope<'_, Ev, Self>) {
        cx.on(Pattern::kind(Kind::Tx), |m: &mut Asks, _cx, _e| {
            let got = match FROM_HANDLER.get().map(|c| c.checkpoint()) {
                Some(Err(CheckpointError::NotNow { why })) => format!("NotNow: {why}"),
                other => format!("{other:?}"),
            };
            let _ = m.0.send(got);
        });
    }
}

// R11.13: a checkpoint asked for from a handler would wait for its own context: `NotNow`, and
// the context carries on.
#[test]
fn r11_13_a_checkpoint_asked_from_a_handler_is_refused() {
    let dir = fresh_dir("from-handler");
    let c = std::sync::Arc::new(stored(&dir).build().expect("build"));
    assert!(FROM_HANDLER.set(c.clone()).is_ok());
    let (tx_got, got) = std::sync::mpsc::channel();
    c.load(Asks(tx_got)).expect("load");
    c.start();
    c.input().send_to(c.main(), tx(1)).expect("send");
    let got = got
        .recv_timeout(Duration::from_secs(30))
        .expect("the handler answered");
    assert!(
        got.starts_with("NotNow: `checkpoint` was called from a handler"),
        "{got}"
    );
    c.shutdown().expect("shutdown");
    let _ = std::fs::remove_dir_all(&dir);
}
