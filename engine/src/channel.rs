//! Channels: named fan-out points (SPEC §4).
//!
//! A [`Channel`] is a small `Copy` id interned from its name. For each channel the registry keeps a
//! bit set of subscribed contexts (one bit per context id, in `AtomicU64` words): a send reads the
//! words without a lock and pushes one copy into each subscribed context's inbox (once per context,
//! however many subscriptions it holds, R4.2). The per-context reference counts live in the context
//! itself (only its thread changes them); a context's bit is set when its count goes from 0 to 1 and
//! cleared when it returns to 0. Public contexts hold a permanent bit for the default channel `""`.
//!
//! External outputs of a channel ([`OutputQueue`]s, see the `output` module) are kept per channel
//! in a list behind a mutex, with a *generation* counter bumped at every change of the list.
//! Senders keep a copy of the list and compare the generation (one atomic read) before each
//! delivery: the lock is taken only when a receiver was added or dropped since, never on the
//! steady-state path. A generation of 0 means the channel never had an output.
//!
//! Owns channel names, subscription bits and the output lists. May import `sync`, `error` and `output`.

use std::collections::HashMap;

use crate::output::OutputQueue;
use crate::sync::{
    self, read_lock as read, write_lock as write, AtomicU64, Mutex, Ordering, RwLock, StdArc,
};

/// A channel id. Get one from [`Correlator::channel`](crate::Correlator::channel) or
/// [`Scope::channel`](crate::Scope::channel); [`Channel::DEFAULT`] is the default channel `""`, which
/// reaches every public context.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Channel(pub(crate) u32);

impl Channel {
    /// The default channel `""`.
    pub const DEFAULT: Channel = Channel(0);

    /// The channel's index (0 for the default channel).
    pub fn index(self) -> u32 {
        self.0
    }
}

struct Outputs<E> {
    /// Bumped (under `list`'s lock) at every change of `list`; 0 until the first output.
    generation: AtomicU64,
    list: Mutex<Vec<StdArc<OutputQueue<E>>>>,
}

/// The registry of channel names, subscriptions and output receivers.
pub(crate) struct Channels<E> {
    names: RwLock<HashMap<String, u32>>,
    labels: RwLock<Vec<String>>,
    /// `max_channels * words` bits: bit `c` of channel `ch` lives in word `ch * words + c / 64`.
    subscribers: Box<[AtomicU64]>,
    words: usize,
    outputs: Box<[Outputs<E>]>,
    max_channels: usize,
}

impl<E: Clone> Channels<E> {
    pub(crate) fn new(max_channels: usize, max_contexts: usize) -> Self {
        let words = max_contexts.div_ceil(64);
        let mut names = HashMap::new();
        names.insert(String::new(), 0);
        Self {
            names: RwLock::new(names),
            labels: RwLock::new(vec![String::new()]),
            subscribers: (0..max_channels * words)
                .map(|_| AtomicU64::new(0))
                .collect(),
            words,
            outputs: (0..max_channels)
                .map(|_| Outputs {
                    generation: AtomicU64::new(0),
                    list: Mutex::new(Vec::new()),
                })
                .collect(),
            max_channels,
        }
    }

    /// The channel called `name`, created on first use.
    pub(crate) fn intern(&self, name: &str) -> Result<Channel, crate::error::Error> {
        if let Some(&id) = read(&self.names).get(name) {
            return Ok(Channel(id));
        }
        let mut names = write(&self.names);
        if let Some(&id) = names.get(name) {
            return Ok(Channel(id));
        }
        let id = names.len();
        if id >= self.max_channels {
            return Err(crate::error::Error::TooManyChannels {
                max: self.max_channels,
            });
        }
        names.insert(name.to_owned(), id as u32);
        write(&self.labels).push(name.to_owned());
        Ok(Channel(id as u32))
    }

    /// The name of a channel.
    pub(crate) fn name(&self, ch: Channel) -> String {
        read(&self.labels)
            .get(ch.0 as usize)
            .cloned()
            .unwrap_or_default()
    }

    fn word(&self, ch: Channel, ctx: u32) -> Option<(&AtomicU64, u64)> {
        let base = (ch.0 as usize).checked_mul(self.words)?;
        let w = self.subscribers.get(base + ctx as usize / 64)?;
        Some((w, 1u64 << (ctx % 64)))
    }

    pub(crate) fn set_subscribed(&self, ch: Channel, ctx: u32, on: bool) {
        if let Some((w, bit)) = self.word(ch, ctx) {
            if on {
                w.fetch_or(bit, Ordering::AcqRel);
            } else {
                w.fetch_and(!bit, Ordering::AcqRel);
            }
        }
    }

    /// Calls `f` with every context id subscribed to `ch`, in id order.
    #[inline]
    pub(crate) fn for_each_subscriber(&self, ch: Channel, mut f: impl FnMut(u32)) {
        let base = ch.0 as usize * self.words;
        let Some(words) = self.subscribers.get(base..base + self.words) else {
            return;
        };
        for (i, w) in words.iter().enumerate() {
            let mut bits = w.load(Ordering::Acquire);
            while bits != 0 {
                let b = bits.trailing_zeros();
                bits &= bits - 1;
                f((i * 64) as u32 + b);
            }
        }
    }

    /// Adds `queue` to the outputs of `ch` (nothing for a channel that does not exist, or for a
    /// queue already closed: its receiver has ended).
    pub(crate) fn add_output(&self, ch: Channel, queue: StdArc<OutputQueue<E>>) {
        let Some(o) = self.outputs.get(ch.0 as usize) else {
            return;
        };
        let mut list = sync::lock(&o.list);
        if queue.is_disconnected() {
            return;
        }
        list.push(queue);
        o.generation.fetch_add(1, Ordering::AcqRel);
    }

    /// The generation of `ch`'s output list (0: it never had an output).
    #[inline(always)]
    pub(crate) fn output_generation(&self, ch: Channel) -> u64 {
        self.outputs
            .get(ch.0 as usize)
            .map_or(0, |o| o.generation.load(Ordering::Acquire))
    }

    /// A copy of `ch`'s outputs and the generation it is of.
    pub(crate) fn outputs_of(&self, ch: Channel) -> (u64, Vec<StdArc<OutputQueue<E>>>) {
        let Some(o) = self.outputs.get(ch.0 as usize) else {
            return (0, Vec::new());
        };
        let list = sync::lock(&o.list);
        (o.generation.load(Ordering::Acquire), list.clone())
    }

    /// Forgets the outputs of `ch` whose receivers are gone or closed.
    pub(crate) fn prune_outputs(&self, ch: Channel) {
        let Some(o) = self.outputs.get(ch.0 as usize) else {
            return;
        };
        let mut list = sync::lock(&o.list);
        let before = list.len();
        list.retain(|q| !q.is_disconnected());
        if list.len() != before {
            o.generation.fetch_add(1, Ordering::AcqRel);
        }
    }
}
