//! SPEC §11 for stream queries and joins (R11.10, R11.11): a checkpoint saves a persistent
//! query's windows (values, times, aggregate states, the expiry queue, the next periodic row,
//! the pending timer) and a join's held events, and a recovered run hands exactly the rows and
//! pairs of a run that never stopped, in the same order. A query that is not persistent is
//! refused with a typed error, and so is a recovered program that registers another window.
//! Needs the `checkpoint` feature.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU8, Ordering};
use std::time::Duration;

use correlator::checkpoint::{CheckpointError, DirStore};
use correlator::query::{
    Count, First, Join, Last, Max, Mean, Min, Query, Row, StdDev, Sum, Window,
};
use correlator::record::EventCodec;
use correlator::{Correlator, Error, Event, Monitor, Pattern, Persistent, Scope, Time};
use serde::{Deserialize, Serialize};

mod common;

#[derive(Clone, Debug, PartialEq)]
enum Ev {
    /// A trade of `symbol` on `venue` at `price`.
    Trade {
        symbol: u64,
        venue: u64,
        price: f64,
        ms: u64,
    },
    /// A confirmation of a symbol's trade (the join's right side).
    Confirm { symbol: u64, ms: u64 },
    /// What a listener handed: the query (or 9 for the join), the key, the group, the time
    /// and the window's length, and the values as bits (exact comparison).
    Out {
        query: u8,
        key: u64,
        group: Option<u64>,
        at: Time,
        len: usize,
        values: Vec<u64>,
    },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Kind {
    Trade,
    Confirm,
    Out,
}

impl Event for Ev {
    type Kind = Kind;
    fn kind(&self) -> Kind {
        match self {
            Ev::Trade { .. } => Kind::Trade,
            Ev::Confirm { .. } => Kind::Confirm,
            Ev::Out { .. } => Kind::Out,
        }
    }
    fn key(&self) -> Option<u64> {
        match self {
            Ev::Trade { symbol, .. } | Ev::Confirm { symbol, .. } => Some(*symbol),
            Ev::Out { .. } => None,
        }
    }
    fn time(&self) -> Option<Time> {
        match self {
            Ev::Trade { ms, .. } | Ev::Confirm { ms, .. } => Some(Time::from_millis(*ms)),
            Ev::Out { .. } => None,
        }
    }
}

/// Trades and confirmations as bytes (a join holds both).
struct Codec;

impl EventCodec<Ev> for Codec {
    fn encode(&self, e: &Ev, out: &mut Vec<u8>) {
        match e {
            Ev::Trade {
                symbol,
                venue,
                price,
                ms,
            } => {
                out.push(0);
                for x in [*symbol, *venue, price.to_bits(), *ms] {
                    out.extend_from_slice(&x.to_le_bytes());
                }
            }
            Ev::Confirm { symbol, ms } => {
                out.push(1);
                for x in [*symbol, *ms] {
                    out.extend_from_slice(&x.to_le_bytes());
                }
            }
            Ev::Out { .. } => out.push(2),
        }
    }
    fn decode(&self, b: &[u8]) -> Result<Ev, String> {
        let word = |i: usize| {
            b.get(1 + 8 * i..9 + 8 * i)
                .map(|w| u64::from_le_bytes(w.try_into().expect("8 bytes")))
                .ok_or_else(|| format!("{} bytes is too short", b.len()))
        };
        match b.first() {
            Some(0) => Ok(Ev::Trade {
                symbol: word(0)?,
                venue: word(1)?,
                price: f64::from_bits(word(2)?),
                ms: word(3)?,
            }),
            Some(1) => Ok(Ev::Confirm {
                symbol: word(0)?,
                ms: word(1)?,
            }),
            other => Err(format!("no event starts with {other:?}")),
        }
    }
}

fn price(e: &Ev) -> f64 {
    match e {
        Ev::Trade { price, .. } => *price,
        _ => 0.0,
    }
}

fn venue(e: &Ev) -> u64 {
    match e {
        Ev::Trade { venue, .. } => *venue,
        _ => 0,
    }
}

fn out<O>(query: u8, row: &Row<O>, values: Vec<u64>) -> Ev {
    Ev::Out {
        query,
        key: row.key,
        group: row.group,
        at: row.time,
        len: row.len,
        values,
    }
}

fn bits(x: Option<f64>) -> u64 {
    x.map_or(u64::MAX, f64::to_bits)
}

/// The queries of `Stats` (and of `Misfit`, which recovers its instances with a `variant` of
/// its own): one instance with every kind of window.
/// 1. a sliding 10 s window per symbol, rows every 2 s: mean, min, max, sum, std dev (a sum
///    that values leave carries the rounding of those subtractions: only a saved state gives
///    the uninterrupted run's bits);
/// 2. a sliding 5 s window per symbol and venue (`group_by`), a row per trade: count, sum;
/// 3. a tumbling 7 s window per symbol: count, sum, first, last;
/// 4. the last 4 trades per symbol, rows every 3 s: mean, max;
/// 5. trades joined with confirmations of their symbol within 4 s.
///
/// `variant` 0 registers them as saved; 1 gives query 3 another length; 2 leaves query 1 not
/// persistent; 3 registers a query in place of the join (the recovery's refusals).
fn listen<M: 'static>(variant: u8, cx: &mut Scope<'_, Ev, M>) {
    let rows = cx.channel("rows").expect("below max_channels");
    let trades = || Query::over(Pattern::kind(Kind::Trade)).value(price);
    let q1 = trades()
        .window(Window::sliding(Duration::from_secs(10)))
        .every(Duration::from_secs(2))
        .aggregate((
            Mean::of(|p: &f64| *p),
            Min::of(|p: &f64| *p),
            Max::of(|p: &f64| *p),
            Sum::of(|p: &f64| *p),
            StdDev::of(|p: &f64| *p),
        ));
    let q1 = if variant == 2 { q1 } else { q1.persistent() };
    cx.query(q1, move |_m, cx, r| {
        let (mean, min, max, sum, sd) = r.value;
        let values = vec![bits(mean), bits(min), bits(max), sum.to_bits(), bits(sd)];
        cx.emit(rows, out(1, r, values));
    })
    .expect("query 1");
    let q2 = trades()
        .group_by(venue)
        .window(Window::sliding(Duration::from_secs(5)))
        .aggregate((Count::default(), Sum::of(|p: &f64| *p)))
        .persistent();
    cx.query(q2, move |_m, cx, r| {
        cx.emit(rows, out(2, r, vec![r.value.0, r.value.1.to_bits()]));
    })
    .expect("query 2");
    let length = if variant == 1 { 8 } else { 7 };
    let q3 = trades()
        .window(Window::tumbling(Duration::from_secs(length)))
        .aggregate((
            Count::default(),
            Sum::of(|p: &f64| *p),
            First::of(|p: &f64| *p),
            Last::of(|p: &f64| *p),
        ))
        .persistent();
    cx.query(q3, move |_m, cx, r| {
        let (n, sum, first, last) = r.value;
        let values = vec![n, sum.to_bits(), bits(first), bits(last)];
        cx.emit(rows, out(3, r, values));
    })
    .expect("query 3");
    let q4 = trades()
        .window(Window::count(4))
        .every(Duration::from_secs(3))
        .aggregate((Mean::of(|p: &f64| *p), Max::of(|p: &f64| *p)))
        .persistent();
    cx.query(q4, move |_m, cx, r| {
        cx.emit(rows, out(4, r, vec![bits(r.value.0), bits(r.value.1)]));
    })
    .expect("query 4");
    if variant == 3 {
        let count = trades().window(Window::count(2)).persistent();
        cx.query(count, |_m, _cx, _r| {}).expect("query 5");
        return;
    }
    let join = Join::of(Pattern::kind(Kind::Trade), Pattern::kind(Kind::Confirm))
        .within(Duration::from_secs(4));
    cx.join(join, move |_m, cx, trade, confirm| {
        let row = Row {
            key: trade.key().unwrap_or(0),
            group: None,
            time: confirm.time().unwrap_or(Time::ZERO),
            len: 0,
            value: (),
        };
        let at = trade.time().map_or(0, |t| t.as_nanos());
        cx.emit(rows, out(9, &row, vec![price(trade).to_bits(), at]));
    })
    .expect("join");
}

/// The monitor with every kind of window (see [`listen`]).
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
struct Stats {
    variant: u8,
}

impl Stats {
    fn listen(&mut self, cx: &mut Scope<'_, Ev, Self>) {
        listen(self.variant, cx);
    }
}

impl Monitor<Ev> for Stats {
    fn on_load(&mut self, cx: &mut Scope<'_, Ev, Self>) {
        self.listen(cx);
    }
}

impl Persistent<Ev> for Stats {
    const NAME: &'static str = "stats/v1";
    fn on_restore(&mut self, cx: &mut Scope<'_, Ev, Self>) {
        self.listen(cx);
    }
}

/// Seeded trades and confirmations of 6 symbols on 3 venues, 0 to 700 ms apart, with prices
/// whose sums round.
fn events(n: usize, seed: u64) -> Vec<Ev> {
    let mut next = common::seeded(seed);
    let mut ms = 0;
    (0..n)
        .map(|_| {
            ms += next() % 700;
            let symbol = next() % 6;
            if next().is_multiple_of(5) {
                Ev::Confirm { symbol, ms }
            } else {
                Ev::Trade {
                    symbol,
                    venue: next() % 3,
                    price: 100.0 + (next() % 10_000) as f64 / 3.0,
                    ms,
                }
            }
        })
        .collect()
}

fn fresh_dir(name: &str) -> PathBuf {
    common::fresh_dir(&format!("ckptq-{name}"))
}

fn builder(dir: &Path) -> correlator::CorrelatorBuilder<Ev> {
    Correlator::builder()
        .event_time()
        .checkpoints(DirStore::open(dir).expect("open the store"), Codec)
        .persistent::<Stats>()
}

/// What an uninterrupted run hands.
fn reference(events: &[Ev]) -> Vec<Ev> {
    let c = Correlator::<Ev>::builder()
        .event_time()
        .build()
        .expect("build");
    let rows = c.output(c.channel("rows").expect("channel"));
    c.start();
    c.load(Stats::default()).expect("load");
    let input = c.input();
    for e in events {
        input.send_to(c.main(), e.clone()).expect("send");
    }
    input.send_time(end(events)).expect("send the time");
    assert_eq!(
        held_at(&c, (6, 24)),
        (6, 24),
        "what the windows hold at the end"
    );
    c.shutdown().expect("shutdown");
    rows.try_iter().collect()
}

/// 20 s after the last event: past every sliding window's and the join's length, and the
/// end of the last tumbling window (the count windows keep their values, and their rows every
/// 3 s to this time).
fn end(events: &[Ev]) -> Time {
    let last = events.iter().filter_map(Event::time).max();
    last.unwrap_or(Time::ZERO) + Duration::from_secs(20)
}

/// `(window partitions, window values)` in the status once it says `want`, or after 10 s.
fn held_at(c: &Correlator<Ev>, want: (u64, u64)) -> (u64, u64) {
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let t = c.status().totals;
        let held = (t.window_partitions, t.window_values);
        if held == want || std::time::Instant::now() > deadline {
            return held;
        }
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// A run checkpointed after `at` events that "crashes" after `lost` more: what it handed up to
/// the checkpoint, and what the status said its windows held then.
fn run_and_crash(dir: &Path, events: &[Ev], at: usize, lost: usize) -> (Vec<Ev>, (u64, u64)) {
    let c = builder(dir).build().expect("build");
    let rows = c.output(c.channel("rows").expect("channel"));
    assert!(c.recover().expect("recover").is_none());
    c.load(Stats::default()).expect("load");
    let input = c.named_input("feed").expect("named input");
    for e in &events[..at] {
        input.send_to(c.main(), e.clone()).expect("send");
    }
    c.checkpoint().expect("checkpoint");
    let kept: Vec<Ev> = rows.try_iter().collect();
    let held = held_now(&c);
    for e in &events[at..at + lost] {
        input.send_to(c.main(), e.clone()).expect("send");
    }
    c.shutdown().expect("shutdown");
    (kept, held)
}

/// `(window partitions, window values)` in the status, once it is published.
fn held_now(c: &Correlator<Ev>) -> (u64, u64) {
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let t = c.status().totals;
        if t.window_values > 0 || std::time::Instant::now() > deadline {
            return (t.window_partitions, t.window_values);
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

// R11.10, R11.11: checkpointed at 1,500 of about 4,000 events and lost from there (600 more fed and
// thrown away), the recovered run hands the rest; together they are exactly the uninterrupted
// run's rows and pairs, in order and to the bit. The status counts the restored windows as
// it counted the saved ones. A restart without the state hands other rows: the windows carried
// across are what makes them equal.
#[test]
fn r11_10_a_recovered_run_hands_the_rows_and_pairs_of_an_uninterrupted_one() {
    // Symbol 5 trades on venue 2 no more after the checkpoint: query 2's window of the two
    // empties only through the restored queue of expiries.
    let events: Vec<Ev> = events(4_000, 11)
        .into_iter()
        .enumerate()
        .filter(|(i, e)| {
            *i < 1_500
                || !matches!(
                    e,
                    Ev::Trade {
                        symbol: 5,
                        venue: 2,
                        ..
                    }
                )
        })
        .map(|(_, e)| e)
        .collect();
    let expected = reference(&events);
    for q in [1, 2, 3, 4, 9] {
        let n = expected
            .iter()
            .filter(|e| matches!(e, Ev::Out { query, .. } if *query == q))
            .count();
        assert!(n > 20, "query {q} handed {n}: too few to tell");
    }
    let dir = fresh_dir("rows");
    let (before, held) = run_and_crash(&dir, &events, 1_500, 600);

    let c = builder(&dir).build().expect("build");
    let rows = c.output(c.channel("rows").expect("channel"));
    let r = c.recover().expect("recover").expect("a checkpoint");
    assert_eq!(r.taken("feed"), 1_500);
    assert_eq!(
        held_now(&c),
        held,
        "the status's count of what windows hold"
    );
    let input = c.named_input("feed").expect("named input");
    for e in &events[1_500..] {
        input.send_to(c.main(), e.clone()).expect("send");
    }
    // Past every sliding value's and joined event's time, the last tumbling window closed:
    // only the count windows hold values, 4 for each of the 6 symbols.
    input.send_time(end(&events)).expect("send the time");
    assert_eq!(
        held_at(&c, (6, 24)),
        (6, 24),
        "what the windows hold at the end"
    );
    c.shutdown().expect("shutdown");
    let after: Vec<Ev> = rows.try_iter().collect();
    let mut got = before;
    got.extend(after.iter().cloned());
    assert_eq!(got.len(), expected.len());
    for (i, (g, x)) in got.iter().zip(&expected).enumerate() {
        assert_eq!(g, x, "output {i} differs");
    }

    let naive = reference(&events[1_500..]);
    assert_ne!(naive, after, "the saved windows made no difference");
    std::fs::remove_dir_all(&dir).expect("clean up");
}

/// Counts trades per symbol over 10 s, not persistent.
#[derive(Serialize, Deserialize)]
struct Plain;

impl Monitor<Ev> for Plain {
    fn on_load(&mut self, cx: &mut Scope<'_, Ev, Self>) {
        let query = Query::over(Pattern::kind(Kind::Trade))
            .window(Window::sliding(Duration::from_secs(10)))
            .aggregate(Count::default());
        cx.query(query, |_m, _cx, _r: &Row<u64>| {})
            .expect("a valid query");
    }
}

impl Persistent<Ev> for Plain {
    const NAME: &'static str = "plain/v1";
    fn on_restore(&mut self, cx: &mut Scope<'_, Ev, Self>) {
        self.on_load(cx);
    }
}

/// Calls `persistent` before `aggregate`; says on "done" that the registration was refused.
struct Early;

impl Monitor<Ev> for Early {
    fn on_load(&mut self, cx: &mut Scope<'_, Ev, Self>) {
        let query = Query::over(Pattern::kind(Kind::Trade))
            .value(price)
            .persistent()
            .aggregate(Sum::of(|p: &f64| *p));
        let refused = cx.query(query, |_m, _cx, _r: &Row<f64>| {});
        if matches!(refused, Err(Error::InvalidQuery { why }) if why.contains("`persistent`")) {
            let done = cx.channel("done").expect("below max_channels");
            cx.emit(done, Ev::Confirm { symbol: 0, ms: 0 });
        }
    }
}

// R11.10: a checkpoint of a correlator holding a query not built `persistent` fails with
// `Unsupported` and stores nothing; `persistent` called before `aggregate` is refused at
// registration with `InvalidQuery`.
#[test]
fn r11_10_a_query_that_is_not_persistent_is_refused() {
    let dir = fresh_dir("plain");
    let c = Correlator::<Ev>::builder()
        .event_time()
        .checkpoints(DirStore::open(&dir).expect("open"), Codec)
        .persistent::<Plain>()
        .build()
        .expect("build");
    let done = c.output(c.channel("done").expect("channel"));
    c.start();
    c.load(Plain).expect("load");
    c.input()
        .send_to(c.main(), events(1, 3).remove(0))
        .expect("send");
    match c.checkpoint() {
        Err(CheckpointError::Unsupported { context, what }) => {
            assert_eq!(context, "main");
            assert!(what.contains("`persistent`"), "{what}");
        }
        other => panic!("expected Unsupported, got {other:?}"),
    }
    c.load(Early).expect("load");
    c.shutdown().expect("shutdown");
    assert_eq!(
        done.try_iter().count(),
        1,
        "`Early`'s query was not refused"
    );
    let stored = common::checkpoint_files(&dir).len();
    assert_eq!(stored, 0, "a refused checkpoint saved something");
    let _ = std::fs::remove_dir_all(&dir);
}

// R11.11: a recovered program whose monitor registers a query with another window than the
// saved one, or without `persistent`, or a query where a join was saved, fails the recovery
// with `Mismatch`, naming why.
#[test]
fn r11_11_a_restored_query_must_have_the_saved_window() {
    let events = events(500, 5);
    let dir = fresh_dir("misfit");
    run_and_crash(&dir, &events, 400, 0);
    for (variant, why) in [
        (1, "another window"),
        (2, "without `persistent`"),
        (3, "its listener 5 is not of the kind saved"),
    ] {
        VARIANT.store(variant, Ordering::Relaxed);
        let c = Correlator::<Ev>::builder()
            .event_time()
            .checkpoints(DirStore::open(&dir).expect("open"), Codec)
            .persistent::<Misfit>()
            .build()
            .expect("build");
        match c.recover() {
            Err(CheckpointError::Mismatch {
                monitor, why: w, ..
            }) => {
                assert_eq!(monitor, "stats/v1");
                assert!(w.contains(why), "variant {variant}: {w}");
            }
            other => panic!("variant {variant}: expected Mismatch, got {other:?}"),
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// The variant `Misfit` registers its queries with.
static VARIANT: AtomicU8 = AtomicU8::new(0);

/// `Stats` under its persistent name (the same saved state), registering its queries as
/// `VARIANT` says.
#[derive(Serialize, Deserialize)]
struct Misfit(Stats);

impl Monitor<Ev> for Misfit {
    fn on_load(&mut self, cx: &mut Scope<'_, Ev, Self>) {
        listen(self.0.variant, cx);
    }
}

impl Persistent<Ev> for Misfit {
    const NAME: &'static str = "stats/v1";
    fn on_restore(&mut self, cx: &mut Scope<'_, Ev, Self>) {
        listen(VARIANT.load(Ordering::Relaxed), cx);
    }
}
