//! SPEC §10: record and replay. A run of four contexts, three external senders and
//! cross-context sends is recorded; replays fed in another order reproduce its outputs exactly
//! (R10.1, R10.2), a changed monitor is caught at its first divergent output (R10.3), and a
//! replay fed more or less than was recorded diverges at its end (R10.4).

use std::time::Duration;

use correlator::record::{fingerprint, MemorySink, Record, Recording};
use correlator::{
    wait, ContextOptions, ContextRef, Correlator, Error, Event, InputHandle, Monitor, Output,
    OutputOptions, OutputReceiver, Pattern, Scope, Time,
};

#[derive(Clone, Debug)]
enum Ev {
    Num(u64),
    Hop { n: u64, ttl: u8 },
}

impl Event for Ev {
    type Kind = u8;
    fn kind(&self) -> u8 {
        match self {
            Ev::Num(_) => 0,
            Ev::Hop { .. } => 1,
        }
    }
}

/// What a context emits: its id, its order-sensitive running hash, and the value that made it
/// emit (`HOP` marks a hop, `TIMER` a timer).
type Out = (u32, u64, u64);
const HOP: u64 = 1 << 40;
const TIMER: u64 = u64::MAX;

/// Folds every event into a hash that depends on the order of arrival, sends every third
/// number on as a hop through two more contexts, emits every fourth number, every hop and
/// every 10 ms of logical time. `bug`: emit a wrong hash for that number (a changed monitor).
#[derive(Clone)]
struct Mixer {
    out: Output<Out>,
    peers: Vec<ContextRef>,
    h: u64,
    count: u64,
    bug: Option<u64>,
}

impl Monitor<Ev> for Mixer {
    fn on_load(&mut self, cx: &mut Scope<'_, Ev, Self>) {
        cx.on_all(Pattern::kind(0), |m: &mut Mixer, cx, e| {
            let Ev::Num(n) = *e else { return };
            m.h = m.h.wrapping_mul(31).wrapping_add(n);
            m.count += 1;
            if n % 3 == 0 {
                let to = m.peers[(n / 3) as usize % m.peers.len()];
                cx.send_to(to, Ev::Hop { n, ttl: 2 }).unwrap();
            }
            if m.count.is_multiple_of(4) {
                let h = if m.bug == Some(n) { m.h ^ 1 } else { m.h };
                let _ = cx.emit_to(&m.out, (cx.context().id(), h, n));
            }
        });
        cx.on_all(Pattern::kind(1), |m: &mut Mixer, cx, e| {
            let Ev::Hop { n, ttl } = *e else { return };
            m.h = m.h.rotate_left(5) ^ n;
            if ttl > 0 {
                let to = m.peers[n as usize % m.peers.len()];
                cx.send_to(
                    to,
                    Ev::Hop {
                        n: n + 1,
                        ttl: ttl - 1,
                    },
                )
                .unwrap();
            }
            let _ = cx.emit_to(&m.out, (cx.context().id(), m.h, n | HOP));
        });
        cx.when_all(wait(Duration::from_millis(10)), |m: &mut Mixer, cx, _| {
            let _ = cx.emit_to(&m.out, (cx.context().id(), m.h, TIMER));
        });
    }
}

const PER_SENDER: u64 = 3_000;

struct Run {
    c: Correlator<Ev>,
    rx: OutputReceiver<Out>,
    inputs: Vec<InputHandle<Ev>>,
    contexts: Vec<ContextRef>,
}

/// The same program for the recorded run and every replay: four contexts with a `Mixer` each,
/// then three input handles, created in this order.
fn set_up(
    builder: correlator::CorrelatorBuilder<Ev>,
    bug: Option<(u32, u64)>,
) -> Result<Run, Error> {
    let c = builder.external_time().inbox_capacity(64).build()?;
    let mut contexts = vec![c.main()];
    for name in ["w1", "w2", "w3"] {
        contexts.push(c.create_context(ContextOptions::new(name))?);
    }
    let (out, rx) = c.typed_output::<Out>(OutputOptions::bounded(1 << 16))?;
    let out = out.fingerprinted();
    for &ctx in &contexts {
        let peers = contexts.iter().copied().filter(|&p| p != ctx).collect();
        let bug = bug.filter(|b| b.0 == ctx.id()).map(|b| b.1);
        c.load_in(
            ctx,
            Mixer {
                out: out.clone(),
                peers,
                h: 0,
                count: 0,
                bug,
            },
        )?;
    }
    let inputs = (0..3).map(|_| c.input()).collect();
    c.start();
    Ok(Run {
        c,
        rx,
        inputs,
        contexts,
    })
}

/// Sender `i`'s events: numbers to each context in turn, and a clock tick every 250.
fn feed(input: &InputHandle<Ev>, i: u64, contexts: &[ContextRef]) {
    feed_paced(input, i, contexts, false)
}

/// `feed`, pausing a millisecond every 500 events when `paced`.
fn feed_paced(input: &InputHandle<Ev>, i: u64, contexts: &[ContextRef], paced: bool) {
    for k in 0..PER_SENDER {
        if paced && k % 500 == 0 {
            std::thread::sleep(Duration::from_millis(1));
        }
        let n = (i + 1) * 1_000_000 + k;
        input
            .send_to(contexts[k as usize % contexts.len()], Ev::Num(n))
            .unwrap();
        if k % 250 == 249 {
            input.send_time(Time::from_millis(k / 25)).unwrap();
        }
    }
}

/// Each context's outputs, in its order (the one output interleaves contexts as threads race).
fn by_context(rx: &OutputReceiver<Out>) -> Vec<Vec<Out>> {
    let mut per = vec![Vec::new(); 4];
    for o in rx.try_iter() {
        per[o.0 as usize].push(o);
    }
    per
}

/// The recorded run: three threads feed concurrently.
fn record() -> (Recording, Vec<Vec<Out>>) {
    record_with(|b| b)
}

/// [`record`] with `more` applied to the recording builder.
fn record_with(
    more: impl FnOnce(correlator::CorrelatorBuilder<Ev>) -> correlator::CorrelatorBuilder<Ev>,
) -> (Recording, Vec<Vec<Out>>) {
    let sink = MemorySink::new();
    let run = set_up(more(Correlator::builder().record_to(sink.clone())), None).unwrap();
    std::thread::scope(|s| {
        for (i, input) in run.inputs.into_iter().enumerate() {
            let contexts = run.contexts.clone();
            s.spawn(move || feed(&input, i as u64, &contexts));
        }
    });
    run.c.shutdown().unwrap();
    (sink.recording().unwrap(), by_context(&run.rx))
}

/// Feeds every input of `run` from this thread, in creation order.
fn feed_all(run: &Run) {
    for (i, input) in run.inputs.iter().enumerate() {
        feed(input, i as u64, &run.contexts);
    }
}

/// A replay (or, with `recording` `None`, a plain run) fed by one thread, senders in reverse
/// order: an interleaving the recorded run did not have.
fn replay(
    recording: Option<&Recording>,
    bug: Option<(u32, u64)>,
) -> (Result<(), Error>, Vec<Vec<Out>>) {
    replay_paced(recording, bug, false)
}

/// `replay`, its feeder paced (see `feed_paced`) when `paced`.
fn replay_paced(
    recording: Option<&Recording>,
    bug: Option<(u32, u64)>,
    paced: bool,
) -> (Result<(), Error>, Vec<Vec<Out>>) {
    let builder = match recording {
        Some(r) => Correlator::builder().replay(r.clone()),
        None => Correlator::builder(),
    };
    let run = set_up(builder, bug).unwrap();
    for (i, input) in run.inputs.iter().enumerate().rev() {
        feed_paced(input, i as u64, &run.contexts, paced);
    }
    let result = run.c.shutdown().map(|_| ());
    (result, by_context(&run.rx))
}

// R10.1, R10.2: a recorded run of 4 contexts, 3 external senders and cross-context sends replays
// to identical outputs, in every context's order, 20 times out of 20, although each replay is
// fed in an order the recorded run did not have (the control run, fed the same way without the
// recording, gives other outputs: the feed order matters to these monitors). Every fifth replay
// is paced (its feeder pauses): the speed does not matter either.
#[test]
fn r10_2_a_recorded_run_replays_to_identical_outputs_20_of_20() {
    let (recording, recorded) = record();
    let summary = recording.summary();
    assert_eq!(summary.contexts.len(), 4);
    let from_inputs: u64 = summary
        .contexts
        .iter()
        .flat_map(|c| c.entries_by_origin.iter())
        .filter(|(o, _)| **o & (1 << 31) != 0)
        .map(|(_, n)| n)
        .sum();
    // The three senders' events, and the four loads (each `load_in` is a sender of its own,
    // created before the three handles: inputs 0 to 3).
    assert_eq!(from_inputs, 3 * PER_SENDER + 4, "{summary}");
    assert!(recorded.iter().all(|o| o.len() > 100), "{recorded:?}");

    let (control, unordered) = replay(None, None);
    control.unwrap();
    assert_ne!(unordered, recorded, "the control run must differ");

    for i in 0..20 {
        let (result, outputs) = replay_paced(Some(&recording), None, i % 5 == 4);
        assert_eq!(result, Ok(()), "replay {i}");
        assert!(outputs == recorded, "replay {i} gave other outputs");
    }
}

// R10.3: a changed monitor is caught at its first divergent output: the context, and the
// position of that emit in the context's recorded stream.
#[test]
fn r10_3_a_changed_monitor_is_caught_at_its_first_divergent_output() {
    let (recording, recorded) = record();
    let w2 = 2u32;
    // The tenth number w2 emitted for: the changed monitor emits a wrong hash there.
    let &(_, h, n) = recorded[w2 as usize]
        .iter()
        .filter(|o| o.2 < HOP)
        .nth(9)
        .unwrap();
    let stream = &recording.context(w2).unwrap().records;
    let at = stream
        .iter()
        .position(|r| {
            *r == Record::Emit {
                output: 1,
                fingerprint: fingerprint(&(w2, h, n)),
            }
        })
        .expect("the emit is in w2's stream") as u64;
    let (result, _) = replay(Some(&recording), Some((w2, n)));
    let Err(Error::Diverged(d)) = result else {
        panic!("the replay did not diverge: {result:?}")
    };
    assert_eq!(d.context, w2, "{d}");
    assert_eq!(d.position, at, "{d}");
    assert!(
        d.found.contains(&fingerprint(&(w2, h ^ 1, n)).to_string()),
        "{d}"
    );
}

// R10.4: a replay fed less than was recorded stops at the end with the entries it still
// expects; one fed more names the entries the recording does not have.
#[test]
fn r10_4_a_replay_fed_more_or_less_than_recorded_diverges_at_its_end() {
    let (recording, _) = record();
    let run = set_up(Correlator::builder().replay(recording.clone()), None).unwrap();
    feed(&run.inputs[0], 0, &run.contexts);
    feed(&run.inputs[1], 1, &run.contexts);
    let Err(Error::Diverged(d)) = run.c.shutdown() else {
        panic!("a replay missing sender 2 did not diverge")
    };
    // The first context to reach its end waits for sender 2 (the third handle, after the four
    // loads: input 6) or for a context that waits for it.
    assert!(d.expected.contains("more entries from"), "{d}");
    assert!(d.found.contains("nothing more arrived"), "{d}");

    let run = set_up(Correlator::builder().replay(recording), None).unwrap();
    feed_all(&run);
    run.inputs[0].send_to(run.contexts[1], Ev::Num(7)).unwrap();
    let Err(Error::Diverged(d)) = run.c.shutdown() else {
        panic!("a replay fed one more event did not diverge")
    };
    assert!(d.found.contains("does not have"), "{d}");
}

/// A sink that fails on its third chunk.
struct Failing(std::sync::atomic::AtomicU32);

impl correlator::record::RecordSink for Failing {
    fn write_chunk(&self, _context: u32, _bytes: &[u8]) -> std::io::Result<()> {
        if self.0.fetch_add(1, std::sync::atomic::Ordering::Relaxed) >= 2 {
            return Err(std::io::Error::other("disk full"));
        }
        Ok(())
    }
}

// R10.1: a sink's error stops the recording, not the run, and the shutdown reports it (every
// event is still processed).
#[test]
fn r10_1_a_failing_sink_is_reported_by_the_shutdown() {
    let run = set_up(
        Correlator::builder().record_to(Failing(Default::default())),
        None,
    )
    .unwrap();
    feed_all(&run);
    let r = run.c.shutdown();
    assert_eq!(r.unwrap_err(), Error::Recording("disk full".into()));
    // Every number was processed: each context got 2,250 and emitted at every fourth.
    let numbers = by_context(&run.rx)
        .iter()
        .map(|o| o.iter().filter(|o| o.2 < HOP).count())
        .collect::<Vec<_>>();
    assert_eq!(numbers, [562; 4]);
}

// R10.1, R10.2: the tool prints a recording written to a file (contexts, entries per sender)
// and replays it against a program's monitors: exit 0 when it agrees, 1 at a divergence, 2 for
// a damaged file or a replay without monitors.
#[test]
fn r10_2_the_recording_tool_prints_and_replays_a_file() {
    use correlator::record::cli::{run, EXIT_DIVERGED, EXIT_OK, EXIT_USAGE};
    use correlator::record::FileSink;
    let dir = std::env::temp_dir().join(format!("record-tool-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("run.rec");
    let r = set_up(
        Correlator::builder().record_to(FileSink::create(&path).unwrap()),
        None,
    )
    .unwrap();
    feed_all(&r);
    r.c.shutdown().unwrap();
    let recorded = by_context(&r.rx);
    let args = |c: &str| vec![c.to_string(), path.display().to_string()];

    let (mut out, mut err) = (Vec::new(), Vec::new());
    assert_eq!(run(&args("print"), &mut out, &mut err, None), EXIT_OK);
    let printed = String::from_utf8(out).unwrap();
    assert!(printed.starts_with("4 contexts"), "{printed}");
    for input in 4..7 {
        // Each sender's 3,000 events went to the four contexts in turn: 750 each.
        assert!(
            printed.contains(&format!("from input {input}: 750")),
            "{printed}"
        );
    }

    let mut agree = |rec: Recording| {
        let (result, outputs) = replay(Some(&rec), None);
        assert_eq!(outputs, recorded);
        result
    };
    let mut out = Vec::new();
    assert_eq!(
        run(&args("replay"), &mut out, &mut err, Some(&mut agree)),
        EXIT_OK
    );
    assert!(String::from_utf8(out).unwrap().contains("agrees"));

    let w1_number = recorded[1].iter().find(|o| o.2 < HOP).unwrap().2;
    let mut changed = |rec: Recording| replay(Some(&rec), Some((1, w1_number))).0;
    let mut out = Vec::new();
    assert_eq!(
        run(&args("replay"), &mut out, &mut err, Some(&mut changed)),
        EXIT_DIVERGED
    );
    assert!(String::from_utf8(out).unwrap().contains("context 1"));

    assert_eq!(
        run(&args("replay"), &mut Vec::new(), &mut err, None),
        EXIT_USAGE
    );
    std::fs::write(&path, b"not a recording").unwrap();
    let mut err = Vec::new();
    assert_eq!(
        run(&args("print"), &mut Vec::new(), &mut err, None),
        EXIT_USAGE
    );
    assert!(String::from_utf8(err).unwrap().contains("not a recording"));
    std::fs::remove_dir_all(&dir).unwrap();
}

/// The test's events as bytes: a tag, the number, the hop's ttl.
struct Bytes;

impl correlator::record::EventCodec<Ev> for Bytes {
    fn encode(&self, e: &Ev, out: &mut Vec<u8>) {
        match *e {
            Ev::Num(n) => {
                out.push(0);
                out.extend_from_slice(&n.to_le_bytes());
            }
            Ev::Hop { n, ttl } => {
                out.push(1);
                out.extend_from_slice(&n.to_le_bytes());
                out.push(ttl);
            }
        }
    }

    fn decode(&self, b: &[u8]) -> Result<Ev, String> {
        let n = b
            .get(1..9)
            .map(|n| u64::from_le_bytes(n.try_into().unwrap()))
            .ok_or("too short")?;
        match (b[0], b.get(9)) {
            (0, None) => Ok(Ev::Num(n)),
            (1, Some(&ttl)) => Ok(Ev::Hop { n, ttl }),
            _ => Err(format!("not an event: {b:?}")),
        }
    }
}

// R10.1, R10.2: with `record_inputs`, the input events are recorded whole and a replay feeds
// itself: the same setup, no sends, the same outputs; without the codec the replay stops at the
// first recorded input instead of guessing.
#[test]
fn r10_2_recorded_inputs_replay_without_a_feeder() {
    let (recording, recorded) = record_with(|b| b.record_inputs(Bytes));
    let inputs = recording
        .contexts()
        .iter()
        .flat_map(|c| &c.records)
        .filter(|r| matches!(r, Record::Input { .. }))
        .count();
    assert_eq!(inputs as u64, 3 * PER_SENDER);

    for _ in 0..3 {
        let r = set_up(
            Correlator::builder()
                .replay(recording.clone())
                .record_inputs(Bytes),
            None,
        )
        .unwrap();
        assert_eq!(r.c.shutdown().map(|_| ()), Ok(()));
        assert!(by_context(&r.rx) == recorded, "a self-fed replay differs");
    }

    let r = set_up(Correlator::builder().replay(recording), None).unwrap();
    let Err(Error::Diverged(d)) = r.c.shutdown() else {
        panic!("a replay without the codec did not stop")
    };
    assert!(d.found.contains("record_inputs"), "{d}");
}
