//! Taking checkpoints and recovering from them (SPEC R11.9 - R11.13): the builder's setting,
//! the correlator's coordinator, named inputs, and what a recovery reports.
//!
//! # Taking one
//! [`Correlator::checkpoint`](crate::Correlator::checkpoint) runs on the caller's thread. Under
//! the store's lock (one checkpoint at a time) it numbers the checkpoint, puts a
//! `Control::Save` entry in every context's inbox and waits for each context's part: the cut
//! across the contexts is Chandy and Lamport's, markers through the inboxes (`context::cut`).
//! Each part is a context's state, its channel states and the events it took from each input
//! handle; those of named inputs are added to what the checkpoint recovered from had counted.
//! The parts make one payload, which the store saves under the checkpoint's number.
//!
//! It fails, and every context forgets it (`Control::Abort`), if a context cannot save its
//! state, if one stops, or if one is created meanwhile (its state would be in no part).
//!
//! # Recovering
//! [`Correlator::recover`](crate::Correlator::recover) loads the newest intact checkpoint
//! (passing over damaged ones, R11.4), checks that this correlator has the checkpoint's
//! contexts, puts a `Control::Restore` entry first in every inbox, starts the correlator and
//! waits for every context to restore its state, each then waiting at its gate; it opens every
//! gate, and each context takes its channel states before it leaves the `Restore` entry (or
//! closes them if a restore failed: `context::cut`, "Recovering", says why in two steps).
//!
//! Owns the coordinator. May import the leaves, `checkpoint`, `deliver`, `entry`, `input`,
//! `monitor`, `record` and `shared`.

use std::any::TypeId;
use std::collections::HashMap;
use std::fmt;
use std::sync::mpsc;

use serde::{Deserialize, Serialize};

use crate::checkpoint::{CheckpointError, CheckpointStore, Skipped};
use crate::deliver::Wait;
use crate::entry::{Control, CutRequest, Entry, Persist, PersistType, SavedPart};
use crate::event::Event;
use crate::id::ContextRef;
use crate::input::InputHandle;
use crate::monitor::{persist_type, Persistent};
use crate::record::EventCodec;
use crate::shared::{ContextShared, Shared};
use crate::sync::{self, Arc, Ordering, StdArc, StdMutex};

/// The payload's own format number, inside the store's framing (which has its own version).
const PAYLOAD_FORMAT: u32 = 1;

/// The builder's `checkpoints` and `persistent` settings.
#[derive(Clone)]
pub(crate) struct CheckpointSetting<E: Event> {
    pub(crate) store: Option<StdArc<StdMutex<Box<dyn CheckpointStore>>>>,
    pub(crate) codec: Option<StdArc<dyn EventCodec<E>>>,
    pub(crate) types: Vec<(TypeId, PersistType<E>)>,
    /// `checkpoint_every`.
    pub(crate) interval: Option<std::time::Duration>,
}

impl<E: Event> Default for CheckpointSetting<E> {
    fn default() -> Self {
        Self {
            store: None,
            codec: None,
            types: Vec::new(),
            interval: None,
        }
    }
}

impl<E: Event> fmt::Debug for CheckpointSetting<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CheckpointSetting")
            .field("store", &self.store.as_ref().map(|_| "CheckpointStore(..)"))
            .field(
                "persistent",
                &self.types.iter().map(|t| t.1.name).collect::<Vec<_>>(),
            )
            .finish()
    }
}

impl<E: Event> CheckpointSetting<E> {
    /// Registers persistent monitor `M`.
    pub(crate) fn add<M: Persistent<E>>(&mut self) {
        let id = TypeId::of::<M>();
        self.types.retain(|(t, _)| *t != id);
        self.types.push((id, persist_type::<E, M>()));
    }

    /// The coordinator, if checkpoints are configured; two monitor types under one name are
    /// refused.
    pub(crate) fn build(self) -> Result<Option<Checkpoints<E>>, crate::error::Error> {
        let (Some(store), Some(codec)) = (self.store, self.codec) else {
            return Ok(None);
        };
        let mut names = HashMap::new();
        let mut types = HashMap::new();
        for (id, ty) in self.types {
            if names.insert(ty.name, id).is_some() {
                return Err(crate::error::Error::PersistentName { name: ty.name });
            }
            types.insert(id, ty);
        }
        Ok(Some(Checkpoints {
            persist: StdArc::new(Persist {
                types,
                names,
                codec,
            }),
            store,
            inputs: StdMutex::new(Inputs::default()),
            interval: self.interval,
        }))
    }
}

/// A correlator's checkpoint coordinator.
pub(crate) struct Checkpoints<E: Event> {
    persist: StdArc<Persist<E>>,
    /// Held while a checkpoint or a recovery runs: one at a time.
    store: StdArc<StdMutex<Box<dyn CheckpointStore>>>,
    inputs: StdMutex<Inputs>,
    /// `checkpoint_every`.
    interval: Option<std::time::Duration>,
}

/// The named inputs, and what the checkpoint recovered from had counted of them.
#[derive(Default)]
struct Inputs {
    /// Names by input handle creation number.
    names: HashMap<u32, String>,
    /// Events taken and the last one's source position, by `(input name, context id)`, at the
    /// checkpoint recovered from.
    base: HashMap<(String, u32), (u64, Option<u64>)>,
    /// The sequence of the next checkpoint, once known.
    next_seq: Option<u64>,
    /// Checkpoints attempted: the number of the next attempt's cut. Not the store's sequence,
    /// which a failed attempt does not use up: a context ignores a cut whose number it has
    /// saved for already, so a retry needs a number of its own.
    attempts: u64,
}

/// A context in a checkpoint: its name, its state, and its channel states (`(sender, encoded
/// event)`, in the order it took them).
type ContextInPayload = (String, Vec<u8>, Vec<(u32, Vec<u8>)>);

/// The payload of a checkpoint.
#[derive(Serialize, Deserialize)]
struct Payload {
    format: u32,
    /// Each context, in id order.
    contexts: Vec<ContextInPayload>,
    /// `(input name, context id, events taken, the last one's source position)`.
    inputs: Vec<(String, u32, u64, Option<u64>)>,
}

/// What [`Correlator::recover`](crate::Correlator::recover) restored.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Recovered {
    /// The checkpoint's sequence number.
    pub seq: u64,
    /// Newer checkpoints that failed their checks and were passed over (R11.4).
    pub skipped: Vec<Skipped>,
    /// For each named input and each context that took events from it: how many it had taken
    /// when the checkpoint was taken (counted from the input's first event ever, across earlier
    /// recoveries). The source is to be read again from there.
    pub inputs: Vec<InputTaken>,
}

impl Recovered {
    /// Where the input named `name` had been read up to: the least of the positions its
    /// contexts had reached ([`Event::position`]), `None` if none had one. For an input that
    /// feeds one context (a partition of a stream), read the source again after it.
    ///
    /// [`Event::position`]: crate::Event::position
    pub fn position(&self, name: &str) -> Option<u64> {
        self.inputs
            .iter()
            .filter(|i| i.input == name)
            .filter_map(|i| i.position)
            .min()
    }

    /// The events the checkpoint's contexts had taken from the input named `name`, all
    /// contexts together: for an input that feeds one context, where to resume reading it.
    pub fn taken(&self, name: &str) -> u64 {
        self.inputs
            .iter()
            .filter(|i| i.input == name)
            .map(|i| i.taken)
            .sum()
    }
}

/// Events a context had taken from a named input when a checkpoint was taken.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct InputTaken {
    /// The input's name ([`Correlator::named_input`](crate::Correlator::named_input)).
    pub input: String,
    /// The context.
    pub context: ContextRef,
    /// How many events it had taken from the input.
    pub taken: u64,
    /// The source position of the last of them that had one ([`Event::position`]).
    ///
    /// [`Event::position`]: crate::Event::position
    pub position: Option<u64>,
}

impl<E: Event> Checkpoints<E> {
    /// The `checkpoint_every` interval, if one is set.
    pub(crate) fn interval(&self) -> Option<std::time::Duration> {
        self.interval
    }

    /// Names input handle number `n`.
    pub(crate) fn name_input(&self, n: u32, name: &str) -> Result<(), CheckpointError> {
        let mut inputs = sync::lock_std(&self.inputs);
        if inputs.names.values().any(|v| v == name) {
            return Err(CheckpointError::NotNow {
                why: "an input of that name exists already: each named input is one sender \
                      whose events checkpoints count; use `SharedInput` to feed it from \
                      several threads",
            });
        }
        inputs.names.insert(n, name.to_owned());
        Ok(())
    }

    /// Takes a checkpoint (see the module docs); returns its sequence number.
    pub(crate) fn checkpoint(&self, shared: &Arc<Shared<E>>) -> Result<u64, CheckpointError> {
        if shared.context_of_current_thread().is_some() {
            return Err(CheckpointError::NotNow {
                why: "`checkpoint` was called from a handler; it waits for every context, so \
                      call it from a thread of your own",
            });
        }
        if !shared.started.load(Ordering::Acquire) {
            return Err(CheckpointError::NotNow {
                why: "the correlator is not started; call `start` (or `recover`) first",
            });
        }
        let mut store = sync::lock_std(&self.store);
        let (seq, cut) = {
            let mut inputs = sync::lock_std(&self.inputs);
            let seq = match inputs.next_seq {
                Some(seq) => seq,
                None => store.list()?.iter().map(|s| s.seq + 1).max().unwrap_or(1),
            };
            inputs.attempts += 1;
            (seq, inputs.attempts)
        };
        let contexts = shared.snapshot();
        let parts = self.cut(shared, &contexts, cut);
        if parts.is_err() || shared.snapshot().len() != contexts.len() {
            // Every context forgets it (a context that answered holds nothing of it any more).
            let input = self.sender(shared);
            for c in &contexts {
                let abort = Entry::Control(Box::new(Control::Abort(cut)));
                let _ = input
                    .links
                    .borrow_mut()
                    .push_entry(c.reference(), abort, Wait::Never);
            }
            parts?;
            return Err(CheckpointError::NotNow {
                why: "a context was created during the checkpoint, which it does not hold; \
                      take the checkpoint again",
            });
        }
        let parts = parts?;
        let mut inputs = sync::lock_std(&self.inputs);
        let mut taken: HashMap<(String, u32), (u64, Option<u64>)> = inputs.base.clone();
        let mut payload = Payload {
            format: PAYLOAD_FORMAT,
            contexts: Vec::with_capacity(contexts.len()),
            inputs: Vec::new(),
        };
        for (c, part) in contexts.iter().zip(parts) {
            for &(n, count, position) in &part.taken {
                if let Some(name) = inputs.names.get(&n) {
                    let t = taken.entry((name.clone(), c.id)).or_insert((0, None));
                    t.0 += count;
                    t.1 = position.or(t.1);
                }
            }
            payload
                .contexts
                .push((c.name.clone(), part.part, part.channel));
        }
        let mut listed: Vec<_> = taken.into_iter().collect();
        listed.sort();
        payload.inputs = listed
            .into_iter()
            .map(|((n, c), (t, p))| (n, c, t, p))
            .collect();
        let bytes = postcard::to_allocvec(&payload).map_err(|e| CheckpointError::Encode {
            what: "the checkpoint".to_owned(),
            reason: e.to_string(),
        })?;
        store.save(seq, &bytes)?;
        inputs.next_seq = Some(seq + 1);
        Ok(seq)
    }

    /// A sender of the coordinator's entries (an input handle, whose events none are).
    fn sender(&self, shared: &Arc<Shared<E>>) -> InputHandle<E> {
        InputHandle::new(crate::deliver::Links::new(
            shared.clone(),
            None,
            crate::deliver::NoPlaces,
        ))
    }

    /// Runs cut number `seq` across `contexts` (`context::cut`): every context's part, by id.
    fn cut(
        &self,
        shared: &Arc<Shared<E>>,
        contexts: &[Arc<ContextShared<E>>],
        seq: u64,
    ) -> Result<Vec<SavedPart>, CheckpointError> {
        let stopped = CheckpointError::NotNow {
            why: "a context stopped (or the correlator shut down) during the checkpoint",
        };
        let (reply, answers) = mpsc::channel();
        let req = StdArc::new(CutRequest {
            seq,
            contexts: contexts.len() as u32,
            persist: self.persist.clone(),
            reply,
        });
        let input = self.sender(shared);
        for c in contexts {
            let save = Entry::Control(Box::new(Control::Save(req.clone())));
            if input
                .links
                .borrow_mut()
                .push_entry(c.reference(), save, Wait::Block)
                .is_err()
            {
                return Err(stopped);
            }
        }
        // Only the contexts hold the request now: once every one has dropped it (answered,
        // or stopped), `recv` sees the channel closed.
        drop(req);
        let mut parts: Vec<Option<SavedPart>> = contexts.iter().map(|_| None).collect();
        let mut left = contexts.len();
        while left > 0 {
            match answers.recv_timeout(std::time::Duration::from_millis(100)) {
                Ok((id, saved)) => {
                    let slot = parts.get_mut(id as usize).ok_or(CheckpointError::NotNow {
                        why: "a context that was not asked answered the checkpoint",
                    })?;
                    if slot.replace(saved?).is_none() {
                        left -= 1;
                    }
                }
                Err(mpsc::RecvTimeoutError::Timeout) => {
                    let gone = contexts.iter().any(|c| c.stopped.load(Ordering::Acquire));
                    if gone || shared.shut_down.load(Ordering::Acquire) {
                        return Err(stopped);
                    }
                }
                Err(mpsc::RecvTimeoutError::Disconnected) => return Err(stopped),
            }
        }
        Ok(parts.into_iter().flatten().collect())
    }

    /// Recovers from the newest intact checkpoint and starts the correlator (see the module
    /// docs); `None`, started, if the store holds no checkpoint.
    pub(crate) fn recover(
        &self,
        shared: &Arc<Shared<E>>,
        start: impl FnOnce(),
    ) -> Result<Option<Recovered>, CheckpointError> {
        if shared.started.load(Ordering::Acquire) {
            return Err(CheckpointError::NotNow {
                why: "`recover` must come before `start`: it restores the contexts before they \
                      take anything else, then starts the correlator",
            });
        }
        let store = sync::lock_std(&self.store);
        let Some(loaded) = store.load_latest()? else {
            drop(store);
            start();
            return Ok(None);
        };
        let payload: Payload =
            postcard::from_bytes(&loaded.payload).map_err(|e| CheckpointError::Decode {
                what: format!("checkpoint {}", loaded.seq),
                reason: e.to_string(),
            })?;
        if payload.format != PAYLOAD_FORMAT {
            return Err(CheckpointError::Decode {
                what: format!("checkpoint {}", loaded.seq),
                reason: format!(
                    "its payload format is {}, this build reads {PAYLOAD_FORMAT}",
                    payload.format
                ),
            });
        }
        let contexts = shared.snapshot();
        let now: Vec<String> = contexts.iter().map(|c| c.name.clone()).collect();
        let saved: Vec<String> = payload.contexts.iter().map(|(n, ..)| n.clone()).collect();
        if now != saved {
            return Err(CheckpointError::ContextsDiffer { saved, now });
        }
        let (reply, answers) = mpsc::channel();
        let input = self.sender(shared);
        // Dropped without a word if the recovery returns early: every gate then closes.
        let mut gates = Vec::with_capacity(contexts.len());
        for (c, (_, part, channel)) in contexts.iter().zip(payload.contexts) {
            let (gate_open, gate) = mpsc::channel();
            gates.push(gate_open);
            let control = Control::Restore {
                persist: self.persist.clone(),
                part,
                channel,
                reply: reply.clone(),
                gate,
            };
            input
                .links
                .borrow_mut()
                .push_entry(
                    c.reference(),
                    Entry::Control(Box::new(control)),
                    Wait::Block,
                )
                .map_err(|_| CheckpointError::NotNow {
                    why: "a context's inbox refused the restore (full before start, or shut \
                          down): call `recover` first, before loading monitors or feeding events",
                })?;
        }
        drop(reply);
        start();
        let mut first_error = None;
        for _ in 0..contexts.len() {
            match answers.recv() {
                Ok((_, Ok(()))) => {}
                Ok((_, Err(e))) => {
                    first_error.get_or_insert(e);
                }
                Err(_) => {
                    first_error.get_or_insert(CheckpointError::NotNow {
                        why: "a context stopped before it could restore its state",
                    });
                    break;
                }
            }
        }
        let open = first_error.is_none();
        for gate in gates {
            // A context that stopped is not waiting any more.
            let _ = gate.send(open);
        }
        if let Some(e) = first_error {
            return Err(e);
        }
        // Every subscription is back: the contexts take their channel states now.
        let mut inputs = sync::lock_std(&self.inputs);
        inputs.base = payload
            .inputs
            .iter()
            .map(|(n, c, t, p)| ((n.clone(), *c), (*t, *p)))
            .collect();
        inputs.next_seq = Some(loaded.seq + 1);
        let tag = shared.tag;
        Ok(Some(Recovered {
            seq: loaded.seq,
            skipped: loaded.skipped,
            inputs: payload
                .inputs
                .into_iter()
                .map(|(input, c, taken, position)| InputTaken {
                    input,
                    context: ContextRef::new(tag, c),
                    taken,
                    position,
                })
                .collect(),
        }))
    }
}
