//! Generated programs: monitors whose handlers are lists of actions, the events they exchange, and
//! the trace both the engine and the reference model write.

use proptest::prelude::*;

/// One thing a handler does, in order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Action {
    /// Route an event of this kind.
    Route(u32),
    /// Send an event of this kind to a context.
    SendTo(usize, u32),
    /// Send an event of this kind to a channel.
    Send(u32, u32),
    /// Subscribe this instance to a channel.
    Subscribe(u32),
    /// Give back one subscription.
    Unsubscribe(u32),
    /// Spawn a copy of this instance (it registers the monitor's listeners anew).
    Spawn,
    /// End this instance once the handler returns.
    Die,
    /// Panic here (the rest of the actions do not happen).
    Panic,
}

#[derive(Clone, Debug)]
pub struct ListenerSpec {
    pub kind: u32,
    pub once: bool,
    pub actions: Vec<Action>,
}

#[derive(Clone, Debug)]
pub struct MonitorSpec {
    /// The context its first instance is loaded in.
    pub ctx: usize,
    /// Channels its load hook subscribes to.
    pub subs: Vec<u32>,
    pub listeners: Vec<ListenerSpec>,
}

#[derive(Clone, Debug)]
pub struct Input {
    /// Which external input handle sends it.
    pub sender: usize,
    pub ctx: usize,
    pub kind: u32,
}

#[derive(Clone, Debug)]
pub struct Program {
    pub contexts: usize,
    /// A context performs a listener's actions only while it has fired fewer listeners than this.
    /// Spawned copies multiply listeners, so without it a short program can produce millions of
    /// firings; with one context the cut-off falls at the same firing in the engine and the model
    /// (whose order must match exactly anyway). Programs without spawn are bounded by `TTL` alone
    /// and use `usize::MAX`, so that the cut-off never depends on how contexts interleave.
    pub fuel: usize,
    pub monitors: Vec<MonitorSpec>,
    pub input: Vec<Input>,
}

/// Events of generated programs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PEv {
    pub kind: u32,
    /// Hops left: a handler acts only on events with `ttl > 0`, which bounds every program.
    pub ttl: u8,
    /// Deterministic id: inputs are numbered, children derive theirs from parent, listener, action.
    pub id: u64,
    /// The id of the inbox entry this event descends from through routes.
    pub root: u64,
    /// Who put the root into the inbox (`1000 + handle` for input handles, else the context), and
    /// that sender's sequence number for it.
    pub sender: u32,
    pub seq: u64,
}

impl correlator::Event for PEv {
    type Kind = u32;
    fn kind(&self) -> u32 {
        self.kind
    }
}

pub const KINDS: u32 = 4;
pub const CHANNELS: u32 = 2;
pub const TTL: u8 = 2;
/// The fuel of programs that may spawn (see [`Program::fuel`]).
pub const FUEL: usize = 2_000;
pub const EXTERNAL: u32 = 1000;

/// A stable hash of an instance label, so that two instances handling one event derive different
/// child ids.
pub fn label_salt(label: &str) -> u64 {
    label.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
    })
}

pub fn child_id(parent: u64, listener: usize, action: usize, salt: u64) -> u64 {
    let mut z = parent
        .wrapping_mul(0x9E37_79B9_7F4A_7C15)
        .wrapping_add((listener as u64) << 32 | (action as u64) << 8)
        ^ salt;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// A line of the trace.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Trace {
    /// Listener `listener` of instance `inst` fired in `ctx` for event `event` (of inbox entry `root`).
    Fire {
        ctx: usize,
        inst: String,
        listener: usize,
        event: u64,
        root: u64,
        sender: u32,
        seq: u64,
    },
    /// Instance `inst` of `ctx` ended; `on_die` ran with this reason.
    Die {
        ctx: usize,
        inst: String,
        reason: String,
    },
}

fn action(contexts: usize, full: bool) -> BoxedStrategy<Action> {
    let kind = 0..KINDS;
    let ch = 0..CHANNELS;
    let ctx = 0..contexts;
    if full {
        prop_oneof![
            4 => kind.clone().prop_map(Action::Route),
            2 => (ctx.clone(), kind.clone()).prop_map(|(c, k)| Action::SendTo(c, k)),
            2 => (ch.clone(), kind.clone()).prop_map(|(c, k)| Action::Send(c, k)),
            1 => ch.clone().prop_map(Action::Subscribe),
            1 => ch.clone().prop_map(Action::Unsubscribe),
            1 => Just(Action::Spawn),
            1 => Just(Action::Die),
            1 => Just(Action::Panic),
        ]
        .boxed()
    } else {
        // Across contexts, only actions whose effects do not depend on how the contexts interleave:
        // then every context processes the same set of entries on every run, and each entry's own
        // processing is deterministic.
        prop_oneof![
            3 => kind.clone().prop_map(Action::Route),
            2 => (ctx, kind.clone()).prop_map(|(c, k)| Action::SendTo(c, k)),
            2 => (ch, kind).prop_map(|(c, k)| Action::Send(c, k)),
        ]
        .boxed()
    }
}

fn listener(contexts: usize, full: bool) -> impl Strategy<Value = ListenerSpec> {
    (
        0..KINDS,
        if full {
            any::<bool>().boxed()
        } else {
            Just(false).boxed()
        },
        prop::collection::vec(action(contexts, full), 0..4),
    )
        .prop_map(|(kind, once, actions)| ListenerSpec {
            kind,
            once,
            actions,
        })
}

/// A program over `contexts` contexts; `full` allows every action (use it with one context).
pub fn program(
    contexts: std::ops::RangeInclusive<usize>,
    full: bool,
) -> impl Strategy<Value = Program> {
    contexts.prop_flat_map(move |n| {
        let monitor = (
            0..n,
            prop::collection::vec(0..CHANNELS, 0..3),
            prop::collection::vec(listener(n, full), 1..4),
        )
            .prop_map(|(ctx, subs, listeners)| MonitorSpec {
                ctx,
                subs,
                listeners,
            });
        let input =
            (0..2usize, 0..n, 0..KINDS).prop_map(|(sender, ctx, kind)| Input { sender, ctx, kind });
        (
            prop::collection::vec(monitor, 1..4),
            prop::collection::vec(input, 1..10),
        )
            .prop_map(move |(monitors, input)| Program {
                contexts: n,
                monitors,
                input,
                fuel: if full { FUEL } else { usize::MAX },
            })
    })
}
