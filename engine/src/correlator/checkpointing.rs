//! Taking checkpoints and recovering from them (SPEC R11.9 - R11.13): the builder's setting,
//! the correlator's coordinator, named inputs, and what a recovery reports.
//!
//! # Taking one
//! [`Correlator::checkpoint`](crate::Correlator::checkpoint) runs on the caller's thread. Under the store's lock (one
//! checkpoint at a time) it puts a `Control::Save` entry in every context's inbox, behind what
//! is already there, and waits for each context's part: a context takes the entry between two
//! others, so its part is its state after everything it took before. The parts, with the events
//! each context took from each named input (added to what the checkpoint recovered from had
//! counted), make one payload, which the store saves under the next sequence number.
//!
//! A consistent cut across several contexts needs more than this: an entry one context sent
//! another before its own part was taken and that the other took after its part would be in
//! neither. The marker protocol that closes that gap (the module docs of `checkpoint`, "Design
//! of what comes next") is not built yet, so a correlator of more than one context is refused
//! ([`CheckpointError::Unsupported`]) rather than saved inconsistently.
//!
//! # Recovering
//! [`Correlator::recover`](crate::Correlator::recover) loads the newest intact checkpoint (passing over damaged ones, R11.4),
//! checks that this correlator has the checkpoint's contexts, puts a `Control::Restore` entry
//! first in every inbox, starts the correlator and waits for every context to restore its part.
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
use crate::entry::{Control, Entry, Persist, PersistType};
use crate::event::Event;
use crate::id::ContextRef;
use crate::input::InputHandle;
use crate::monitor::{persist_type, Persistent};
use crate::record::EventCodec;
use crate::shared::Shared;
use crate::sync::{self, Arc, Ordering, StdArc, StdMutex};

/// The payload's own format number, inside the store's framing (which has its own version).
const PAYLOAD_FORMAT: u32 = 1;

/// The builder's `checkpoints` and `persistent` settings.
pub(crate) struct CheckpointSetting<E: Event> {
    pub(crate) store: Option<StdArc<StdMutex<Box<dyn CheckpointStore>>>>,
    pub(crate) codec: Option<StdArc<dyn EventCodec<E>>>,
    pub(crate) types: Vec<(TypeId, PersistType<E>)>,
}

impl<E: Event> Default for CheckpointSetting<E> {
    fn default() -> Self {
        Self {
            store: None,
            codec: None,
            types: Vec::new(),
        }
    }
}

impl<E: Event> Clone for CheckpointSetting<E> {
    fn clone(&self) -> Self {
        Self {
            store: self.store.clone(),
            codec: self.codec.clone(),
            types: self
                .types
                .iter()
                .map(|(t, p)| {
                    (
                        *t,
                        PersistType {
                            name: p.name,
                            save: p.save,
                            restore: p.restore,
                        },
                    )
                })
                .collect(),
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
        }))
    }
}

/// A correlator's checkpoint coordinator.
pub(crate) struct Checkpoints<E: Event> {
    persist: StdArc<Persist<E>>,
    /// Held while a checkpoint or a recovery runs: one at a time.
    store: StdArc<StdMutex<Box<dyn CheckpointStore>>>,
    inputs: StdMutex<Inputs>,
}

/// The named inputs, and what the checkpoint recovered from had counted of them.
#[derive(Default)]
struct Inputs {
    /// Names by input handle creation number.
    names: HashMap<u32, String>,
    /// Events taken, by `(input name, context id)`, at the checkpoint recovered from.
    base: HashMap<(String, u32), u64>,
    /// The sequence of the next checkpoint, once known.
    next_seq: Option<u64>,
}

/// The payload of a checkpoint.
#[derive(Serialize, Deserialize)]
struct Payload {
    format: u32,
    /// Each context's name and part, in id order.
    contexts: Vec<(String, Vec<u8>)>,
    /// `(input name, context id, events taken)`.
    inputs: Vec<(String, u32, u64)>,
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
}

impl<E: Event> Checkpoints<E> {
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
        if shared.input_closed() {
            return Err(CheckpointError::NotNow {
                why: "the correlator is shutting down",
            });
        }
        let contexts = shared.snapshot();
        if contexts.len() > 1 {
            return Err(CheckpointError::Unsupported {
                context: "correlator".to_owned(),
                what: "more than one context, whose consistent cut (markers through the \
                       inboxes)",
            });
        }
        let mut store = sync::lock_std(&self.store);
        let (reply, answers) = mpsc::channel();
        let input = InputHandle::<E>::new(crate::deliver::Links::new(
            shared.clone(),
            None,
            crate::deliver::NoPlaces,
        ));
        for c in &contexts {
            let control = Control::Save {
                persist: self.persist.clone(),
                reply: reply.clone(),
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
                    why: "a context stopped before it could save its state",
                })?;
        }
        drop(reply);
        let mut parts: Vec<Option<(Vec<u8>, Vec<u64>)>> = vec![None; contexts.len()];
        for _ in 0..contexts.len() {
            let (id, saved) = answers.recv().map_err(|_| CheckpointError::NotNow {
                why: "a context stopped before it could save its state",
            })?;
            parts[id as usize] = Some(saved?);
        }
        let mut inputs = sync::lock_std(&self.inputs);
        let mut taken: HashMap<(String, u32), u64> = inputs.base.clone();
        let mut payload = Payload {
            format: PAYLOAD_FORMAT,
            contexts: Vec::with_capacity(contexts.len()),
            inputs: Vec::new(),
        };
        for (c, part) in contexts.iter().zip(parts) {
            let Some((bytes, counts)) = part else {
                continue;
            };
            for (n, &count) in counts.iter().enumerate() {
                if let Some(name) = inputs.names.get(&(n as u32)) {
                    *taken.entry((name.clone(), c.id)).or_insert(0) += count;
                }
            }
            payload.contexts.push((c.name.clone(), bytes));
        }
        let mut listed: Vec<_> = taken.into_iter().collect();
        listed.sort();
        payload.inputs = listed.into_iter().map(|((n, c), t)| (n, c, t)).collect();
        let bytes = postcard::to_allocvec(&payload).map_err(|e| CheckpointError::Encode {
            what: "the checkpoint".to_owned(),
            reason: e.to_string(),
        })?;
        let seq = match inputs.next_seq {
            Some(seq) => seq,
            None => store.list()?.iter().map(|s| s.seq + 1).max().unwrap_or(1),
        };
        store.save(seq, &bytes)?;
        inputs.next_seq = Some(seq + 1);
        Ok(seq)
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
        let saved: Vec<String> = payload.contexts.iter().map(|(n, _)| n.clone()).collect();
        if now != saved {
            return Err(CheckpointError::ContextsDiffer { saved, now });
        }
        let (reply, answers) = mpsc::channel();
        let input = InputHandle::<E>::new(crate::deliver::Links::new(
            shared.clone(),
            None,
            crate::deliver::NoPlaces,
        ));
        for (c, (_, part)) in contexts.iter().zip(payload.contexts) {
            let control = Control::Restore {
                persist: self.persist.clone(),
                part,
                reply: reply.clone(),
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
        if let Some(e) = first_error {
            return Err(e);
        }
        let mut inputs = sync::lock_std(&self.inputs);
        inputs.base = payload
            .inputs
            .iter()
            .map(|(n, c, t)| ((n.clone(), *c), *t))
            .collect();
        inputs.next_seq = Some(loaded.seq + 1);
        let tag = shared.tag;
        Ok(Some(Recovered {
            seq: loaded.seq,
            skipped: loaded.skipped,
            inputs: payload
                .inputs
                .into_iter()
                .map(|(input, c, taken)| InputTaken {
                    input,
                    context: ContextRef::new(tag, c),
                    taken,
                })
                .collect(),
        }))
    }
}
