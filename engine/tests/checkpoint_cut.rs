//! SPEC R11.9, the consistent cut across contexts: tokens circulate between contexts through
//! channel sends while checkpoints are taken (around a ring of three, and scattered among four,
//! each context then sending to every one, itself included); a run recovered from any of them, fed the
//! rest of its input, ends holding every token exactly once. A token in flight between two
//! contexts at the cut is in the channel state of its receiver (or the checkpoint would lose
//! it); a token taken before its receiver saved is in that receiver's state only (or the
//! checkpoint would count it twice). Needs the `checkpoint` feature.

use std::path::{Path, PathBuf};

use correlator::checkpoint::DirStore;
use correlator::record::EventCodec;
use correlator::{ContextOptions, Correlator, Event, Monitor, Pattern, Persistent, Scope};
use serde::{Deserialize, Serialize};

mod common;

#[derive(Clone, Debug, PartialEq, Eq)]
enum Ev {
    /// Token `id`, which goes on to another context `hops` more times, then stays where it is.
    Token { hops: u32, id: u32 },
    /// What a context holds when it shuts down.
    Held { ring: u32, tokens: u64 },
}

impl Event for Ev {
    type Kind = u8;
    fn kind(&self) -> u8 {
        match self {
            Ev::Token { .. } => 0,
            Ev::Held { .. } => 1,
        }
    }
}

struct Codec;

impl EventCodec<Ev> for Codec {
    fn encode(&self, e: &Ev, out: &mut Vec<u8>) {
        if let Ev::Token { hops, id } = e {
            out.extend_from_slice(&hops.to_le_bytes());
            out.extend_from_slice(&id.to_le_bytes());
        }
    }
    fn decode(&self, b: &[u8]) -> Result<Ev, String> {
        let word = |i: usize| -> Result<u32, String> {
            let w = b.get(i..i + 4).ok_or("not 8 bytes")?;
            Ok(u32::from_le_bytes(w.try_into().map_err(|_| "not 4 bytes")?))
        };
        Ok(Ev::Token {
            hops: word(0)?,
            id: word(4)?,
        })
    }
}

/// Contexts at most.
const MAX: usize = 4;
const TOKENS: u64 = 3_000;
const HOPS: u32 = 40;

/// One member of `members`: takes tokens sent to its channel, passes each on until its hops
/// are used, and keeps it then. Around the ring, a token goes on to the next member; scattered,
/// to a member its id and hops choose (any, this one included).
#[derive(Serialize, Deserialize)]
struct Relay {
    ring: u32,
    members: u32,
    scatter: bool,
    held: u64,
}

impl Relay {
    fn listen(&mut self, cx: &mut Scope<'_, Ev, Self>) {
        let (members, scatter) = (self.members, self.scatter);
        let channels: Vec<_> = (0..members)
            .map(|i| cx.channel(&format!("ring-{i}")).expect("channel"))
            .collect();
        let held = cx.channel("held").expect("channel");
        cx.on_all(Pattern::kind(0), move |m: &mut Relay, cx, e| {
            if let Ev::Token { hops, id } = *e {
                let step = if scatter { 1 + hops * 7 + id } else { 1 };
                let next = channels[((m.ring + step) % members) as usize];
                if hops == 0 {
                    m.held += 1;
                    cx.emit(
                        held,
                        Ev::Held {
                            ring: m.ring,
                            tokens: m.held,
                        },
                    );
                } else {
                    cx.send(next, Ev::Token { hops: hops - 1, id });
                }
            }
        });
    }
}

impl Monitor<Ev> for Relay {
    fn on_load(&mut self, cx: &mut Scope<'_, Ev, Self>) {
        let mine = cx.channel(&format!("ring-{}", self.ring)).expect("channel");
        cx.subscribe(mine);
        self.listen(cx);
    }
}

impl Persistent<Ev> for Relay {
    const NAME: &'static str = "relay/v1";
    fn on_restore(&mut self, cx: &mut Scope<'_, Ev, Self>) {
        self.listen(cx);
    }
}

fn fresh_dir(name: &str) -> PathBuf {
    common::fresh_dir(&format!("cut-{name}"))
}

/// A correlator with `members` contexts (`main` is member 0), recovered from `dir` or loaded
/// fresh; the tokens fed so far. (Its output is bounded well above what a run emits.)
fn ring(
    dir: &Path,
    members: u32,
    scatter: bool,
) -> (Correlator<Ev>, correlator::OutputReceiver<Ev>, u64) {
    let c = Correlator::<Ev>::builder()
        .external_time()
        .checkpoints(DirStore::open(dir).expect("open"), Codec)
        .persistent::<Relay>()
        .build()
        .expect("build");
    let mut contexts = vec![c.main()];
    for i in 1..members {
        contexts.push(
            c.create_context(ContextOptions::new(format!("ring-{i}")))
                .expect("context"),
        );
    }
    let held = c.output(c.channel("held").expect("channel"));
    let fed = match c.recover().expect("recover") {
        Some(r) => r.taken("tokens"),
        None => {
            for (i, m) in contexts.iter().enumerate() {
                c.load_in(
                    *m,
                    Relay {
                        ring: i as u32,
                        members,
                        scatter,
                        held: 0,
                    },
                )
                .expect("load");
            }
            // Tokens sent to a channel nobody has subscribed to yet would be dropped (R4.5):
            // wait until every member is loaded.
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
            while c.status().totals.instances < u64::from(members) {
                assert!(
                    std::time::Instant::now() < deadline,
                    "the members did not load"
                );
                std::thread::sleep(std::time::Duration::from_millis(1));
            }
            0
        }
    };
    (c, held, fed)
}

/// Sums what the members held at shutdown: the last count each one emitted (each emits its
/// count whenever a token stays with it).
fn held_at_shutdown(c: Correlator<Ev>, held: &correlator::OutputReceiver<Ev>) -> u64 {
    c.shutdown().expect("shutdown");
    let mut last = [0; MAX];
    for e in held.try_iter() {
        if let Ev::Held { ring, tokens } = e {
            last[ring as usize] = tokens;
        }
    }
    last.iter().sum()
}

/// Feeds the tokens in runs of 1,100, each run checkpointed and then "crashing" after 300 more
/// (thrown away, fed again to the next run); the last run ends without a crash. Returns the
/// tokens held at the end and the crashes.
fn crash_and_recover(dir: &Path, members: u32, scatter: bool) -> (u64, u32) {
    let mut crashes = 0;
    loop {
        let (c, held, fed) = ring(dir, members, scatter);
        let input = c.named_input("tokens").expect("named input");
        let token = |id: u64| Ev::Token {
            hops: HOPS,
            id: id as u32,
        };
        let upto = (fed + 1_100).min(TOKENS);
        for id in fed..upto {
            input.send_to(c.main(), token(id)).expect("send");
        }
        if upto == TOKENS {
            // The last run: no crash; every token is held once it has settled.
            return (held_at_shutdown(c, &held), crashes);
        }
        c.checkpoint().expect("checkpoint");
        // More tokens, lost with the crash: the next run is fed them again.
        for id in upto..upto + 300 {
            input.send_to(c.main(), token(id)).expect("send");
        }
        c.shutdown().expect("shutdown");
        drop(c);
        crashes += 1;
    }
}

// R11.9: checkpoints taken while thousands of tokens circulate around a ring of three, each run
// "crashing" after feeding more; every recovery ends with each token held exactly once. The
// checkpoints hold tokens in flight (channel states): without them the last run ends with 800
// of the 3,000.
#[test]
fn r11_9_a_cut_across_contexts_loses_and_doubles_no_token() {
    let dir = fresh_dir("ring");
    assert_eq!(crash_and_recover(&dir, 3, false), (TOKENS, 2));
    std::fs::remove_dir_all(&dir).expect("clean up");
}

// R11.9: the same with four contexts that each send to every one, themselves included: a context
// takes several senders' channels at once, and its own (`send` to a channel it subscribes to),
// whose marker is the one it sent itself.
#[test]
fn r11_9_a_cut_of_contexts_that_all_send_to_all_loses_and_doubles_no_token() {
    let dir = fresh_dir("scatter");
    assert_eq!(crash_and_recover(&dir, 4, true), (TOKENS, 2));
    std::fs::remove_dir_all(&dir).expect("clean up");
}

/// `Relay` under its name and state, whose `on_restore` in ring member 2 registers nothing (the
/// recovery fails there) and elsewhere one listener that takes tokens and does nothing.
#[derive(Serialize, Deserialize)]
struct Picky(Relay);

impl Monitor<Ev> for Picky {
    fn on_load(&mut self, _cx: &mut Scope<'_, Ev, Self>) {}
}

impl Persistent<Ev> for Picky {
    const NAME: &'static str = "relay/v1";
    fn on_restore(&mut self, cx: &mut Scope<'_, Ev, Self>) {
        if self.0.ring != 2 {
            cx.on_all(Pattern::kind(0), |_m: &mut Picky, _cx, _e| {});
        }
    }
}

/// The events the contexts of a correlator recovered from `dir` take before anything is fed:
/// its channel states, unless the recovery failed. `picky`: recovered by [`Picky`], which fails.
fn taken_after_recovery(dir: &Path, picky: bool) -> u64 {
    let mut b = Correlator::<Ev>::builder()
        .external_time()
        .checkpoints(DirStore::open(dir).expect("open"), Codec);
    b = if picky {
        b.persistent::<Picky>()
    } else {
        b.persistent::<Relay>()
    };
    let c = b.build().expect("build");
    for i in 1..3 {
        c.create_context(ContextOptions::new(format!("ring-{i}")))
            .expect("context");
    }
    let _held = c.output(c.channel("held").expect("channel"));
    let recovered = c.recover();
    assert_eq!(
        recovered.is_err(),
        picky,
        "{:?}",
        recovered.map(|r| r.map(|r| r.seq))
    );
    c.shutdown().expect("shutdown").totals.processed
}

// R11.12: a recovery that fails in one context (here ring member 2's `on_restore` registers
// nothing) opens no context's gate: the others, restored, drop their channel states instead of
// taking them on a partial state. The same checkpoint recovered by the program that took it
// has channel states, which its contexts take with nothing fed.
#[test]
fn r11_12_a_failed_recovery_takes_no_channel_state() {
    let dir = fresh_dir("failed");
    let (c, _held, _) = ring(&dir, 3, false);
    let input = c.named_input("tokens").expect("named input");
    for id in 0..1_100 {
        let token = Ev::Token { hops: HOPS, id };
        input.send_to(c.main(), token).expect("send");
    }
    c.checkpoint().expect("checkpoint");
    c.shutdown().expect("shutdown");
    drop(c);
    assert!(
        taken_after_recovery(&dir, false) > 0,
        "the checkpoint holds no channel state: the test cannot tell"
    );
    assert_eq!(taken_after_recovery(&dir, true), 0);
    std::fs::remove_dir_all(&dir).expect("clean up");
}
