//! Channels: named fan-out points (SPEC §4).
//!
//! A [`Channel`] is a small `Copy` id interned from its name. For each channel the registry keeps a
//! bit set of subscribed contexts (one bit per context id, in `AtomicU64` words): a send reads the
//! words without a lock and pushes one copy into each subscribed context's inbox (once per context,
//! however many subscriptions it holds, R4.2). The per-context reference counts live in the context
//! itself (only its thread changes them); a context's bit is set when its count goes from 0 to 1 and
//! cleared when it returns to 0. Public contexts hold a permanent bit for the default channel `""`.
//!
//! External output receivers are `std::sync::mpsc` senders kept per channel behind a mutex that is
//! touched only when the channel has receivers (an atomic count says so without the lock). Once
//! shutdown closed the outputs, a receiver taken later gets no sender: its stream has ended.
//!
//! Owns channel names, subscription bits and output senders. May import `sync` only.

use std::collections::HashMap;
use std::sync::mpsc;

use crate::sync::{
    self, read_lock as read, write_lock as write, AtomicBool, AtomicU64, AtomicUsize, Mutex,
    Ordering, RwLock,
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
    count: AtomicUsize,
    senders: Mutex<Vec<mpsc::Sender<E>>>,
}

/// The registry of channel names, subscriptions and output receivers.
pub(crate) struct Channels<E> {
    names: RwLock<HashMap<String, u32>>,
    labels: RwLock<Vec<String>>,
    /// `max_channels * words` bits: bit `c` of channel `ch` lives in word `ch * words + c / 64`.
    subscribers: Box<[AtomicU64]>,
    words: usize,
    outputs: Box<[Outputs<E>]>,
    /// Set by [`close_outputs`](Channels::close_outputs) before it empties the sender lists; read
    /// under a list's lock by [`add_output`](Channels::add_output), so that a receiver registered
    /// after the close is never kept.
    outputs_closed: AtomicBool,
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
                    count: AtomicUsize::new(0),
                    senders: Mutex::new(Vec::new()),
                })
                .collect(),
            outputs_closed: AtomicBool::new(false),
            max_channels,
        }
    }

    /// The channel called `name`, created on first use.
    pub(crate) fn intern(&self, name: &str) -> Result<Channel, crate::Error> {
        if let Some(&id) = read(&self.names).get(name) {
            return Ok(Channel(id));
        }
        let mut names = write(&self.names);
        if let Some(&id) = names.get(name) {
            return Ok(Channel(id));
        }
        let id = names.len();
        if id >= self.max_channels {
            return Err(crate::Error::TooManyChannels {
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

    /// Registers an external output receiver for `ch`. After [`close_outputs`](Self::close_outputs)
    /// (or for a channel that does not exist) the sender is dropped at once, so the receiver's
    /// stream has ended.
    pub(crate) fn add_output(&self, ch: Channel) -> mpsc::Receiver<E> {
        let (tx, rx) = mpsc::channel();
        if let Some(o) = self.outputs.get(ch.0 as usize) {
            let mut senders = sync::lock(&o.senders);
            // Read under the lock: a close that set the flag before this lock was taken empties
            // this list after it (or already did), so a sender kept here would never be dropped.
            if self.outputs_closed.load(Ordering::Acquire) {
                return rx;
            }
            senders.push(tx);
            o.count.store(senders.len(), Ordering::Release);
        }
        rx
    }

    /// Whether `ch` has output receivers now.
    pub(crate) fn has_outputs(&self, ch: Channel) -> bool {
        self.outputs
            .get(ch.0 as usize)
            .is_some_and(|o| o.count.load(Ordering::Acquire) > 0)
    }

    /// Delivers a copy of `event` to every live output receiver of `ch`; returns how many got one.
    pub(crate) fn deliver_outputs(&self, ch: Channel, event: &E) -> usize {
        let Some(o) = self.outputs.get(ch.0 as usize) else {
            return 0;
        };
        if o.count.load(Ordering::Acquire) == 0 {
            return 0;
        }
        let mut senders = sync::lock(&o.senders);
        senders.retain(|tx| tx.send(event.clone()).is_ok());
        o.count.store(senders.len(), Ordering::Release);
        senders.len()
    }

    /// Drops every output sender, so that receivers see the end of the stream; receivers taken
    /// later get an ended stream.
    pub(crate) fn close_outputs(&self) {
        self.outputs_closed.store(true, Ordering::Release);
        for o in self.outputs.iter() {
            sync::lock(&o.senders).clear();
            o.count.store(0, Ordering::Release);
        }
    }
}
