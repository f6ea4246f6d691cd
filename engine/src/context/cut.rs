//! The consistent cut across contexts (SPEC R11.9): Chandy and Lamport's snapshot over the
//! inboxes, which are first in, first out per sender (R2.3, across the overflow too, R5.2).
//!
//! # The protocol
//! The coordinator (`Correlator::checkpoint`) numbers the checkpoint and puts a
//! `Control::Save` in the inbox of every context that takes part (ids below
//! `CutRequest::contexts`). A context saves its state at the first `Save` or `Marker` of that
//! checkpoint it takes, between two entries (`snapshot`), and at once puts a `Marker` in the
//! inbox of every context that takes part, its own included, behind everything it sent before.
//! From then until the marker of context `c` arrives, every entry it takes from `c` was sent
//! before `c` saved its state and is taken after this context saved its own: it is in neither
//! state, so the context records it (its *channel state*) while it processes it as usual. When
//! every marker has arrived the context sends its part, state and channel states, to the
//! coordinator.
//!
//! # Recovering
//! Each context restores its state (`snapshot`) in its first entry, `Restore`, answers, and
//! waits in that entry at its gate (a channel from the coordinator: the thread parks). The
//! coordinator opens every gate once every context has restored, so that every subscription is
//! back before any channel state is taken (a channel send from a handler reaches the contexts
//! subscribed at that moment, R4.2); then each context takes its channel states, still in the
//! `Restore` entry: so before anything another context sends it after the recovery, as FIFO
//! order per sender wants (the channel state from `c` is what `c` sent before its own state
//! was saved). If a context's restore failed, the coordinator closes the gates and the channel
//! states are dropped.
//!
//! Input handles take no part: a context counts the events it took from each input handle
//! when it saves its state, and a recovered source is read again from that count. So an idle
//! input handle holds nothing up, and nothing is asked of a handle's send. The marker to
//! itself covers what a context sent itself (`send_to` its own context): those entries wait in
//! its inbox like anyone else's.
//!
//! A context's own state is written while it takes nothing else; the markers go out through
//! the send core, so a marker to a full inbox waits for room or goes beyond capacity where
//! waiting would close a cycle (R5.1, R5.2), as a handler's send would. No context waits for
//! another's marker: it goes on taking entries, recording only those of the channels still
//! open.
//!
//! # What cannot be saved
//! A spawn sent between contexts (`spawn_to`) carries a closure: if one is in a channel state
//! the checkpoint fails with `Unsupported`. A context that stopped, or one created during the
//! checkpoint, fails it too (the coordinator checks); the coordinator then sends `Abort` and
//! the contexts forget it. A context whose own state cannot be saved answers at once with the
//! error, and still sends its markers, so that the others finish.
//!
//! Owns the cut's per-context state and its entries. May import the leaves, `checkpoint`,
//! `deliver`, `entry` and `record`.

use std::sync::Arc;

use super::{panic_message, Context};
use crate::checkpoint::CheckpointError;
use crate::deliver::Wait;
use crate::entry::{Control, CutRequest, Entry, InputsTaken, SavedPart};
use crate::event::Event;
use crate::id::ContextRef;
use crate::record::Origin;

/// A checkpoint this context has saved its state for and whose markers have not all arrived.
pub(super) struct Cut<E: Event> {
    req: Arc<CutRequest<E>>,
    /// Its state and input counts, saved when the cut began; or why they could not be (or a
    /// channel state cannot be), sent when the markers are in.
    saved: Result<(Vec<u8>, InputsTaken), CheckpointError>,
    /// Whether context `c`'s marker is still to come.
    open: Vec<bool>,
    /// How many markers are still to come.
    left: u32,
    channel: Vec<(u32, Vec<u8>)>,
}

impl<E: Event> Context<E> {
    /// Runs a checkpoint's entry and answers it.
    #[cold]
    #[inline(never)]
    pub(super) fn run_control(&mut self, control: Control<E>) {
        match control {
            Control::Save(req) => {
                if req.seq > self.last_cut {
                    self.begin_cut(req);
                }
            }
            Control::Marker { cut, from } => {
                if cut.seq > self.last_cut {
                    self.begin_cut(cut.clone());
                }
                self.marker_from(cut.seq, from);
            }
            Control::Abort(seq) => {
                if self.cut.as_ref().is_some_and(|c| c.req.seq == seq) {
                    self.cut = None;
                }
            }
            Control::Restore {
                persist,
                part,
                channel,
                reply,
                gate,
            } => {
                let id = self.fx.me.id();
                let restored = self.restore_part(&persist, &part, channel);
                // The status shows the restored instances as soon as `recover` returns.
                self.publish();
                let (states, answer) = match restored {
                    Ok(states) => (states, Ok(())),
                    Err(e) => (Vec::new(), Err(e)),
                };
                let _ = reply.send((id, answer));
                if gate.recv() == Ok(true) {
                    for (origin, e) in states {
                        self.run_entry(Entry::Event(origin, e));
                    }
                }
            }
        }
    }

    /// Saves this context's state for checkpoint `req` and sends its markers.
    fn begin_cut(&mut self, req: Arc<CutRequest<E>>) {
        self.last_cut = req.seq;
        // A cut not finished (its coordinator gave up on it) is forgotten.
        self.cut = None;
        let saved = self.save_part(&req.persist);
        let me = self.fx.me.id();
        let tag = self.fx.me.correlator();
        let mut stopped = false;
        for id in 0..req.contexts {
            let marker = Control::Marker {
                cut: req.clone(),
                from: me,
            };
            let entry = Entry::Control(Box::new(marker));
            if self
                .fx
                .links
                .push_entry(ContextRef::new(tag, id), entry, Wait::Block)
                .is_err()
            {
                stopped = true;
            }
        }
        let saved = match saved {
            Ok(_) if stopped => Err(CheckpointError::NotNow {
                why: "a context stopped during the checkpoint",
            }),
            saved => saved,
        };
        if let Err(e) = saved {
            // The others finish with the markers sent; this one has nothing more to wait for.
            let _ = req.reply.send((me, Err(e)));
            return;
        }
        self.cut = Some(Box::new(Cut {
            open: vec![true; req.contexts as usize],
            left: req.contexts,
            req,
            saved,
            channel: Vec::new(),
        }));
    }

    /// Context `from`'s marker of checkpoint `seq` has arrived: its channel is closed; once
    /// every channel is, the part goes to the coordinator.
    fn marker_from(&mut self, seq: u64, from: u32) {
        let Some(cut) = self.cut.as_mut().filter(|c| c.req.seq == seq) else {
            return;
        };
        if let Some(open) = cut.open.get_mut(from as usize).filter(|o| **o) {
            *open = false;
            cut.left -= 1;
        }
        if cut.left > 0 {
            return;
        }
        let Some(cut) = self.cut.take() else { return };
        let Cut {
            req,
            saved,
            channel,
            ..
        } = *cut;
        let answer = saved.map(|(part, taken)| SavedPart {
            part,
            taken,
            channel,
        });
        let _ = req.reply.send((self.fx.me.id(), answer));
    }

    /// What a context that takes checkpoints does with each entry it takes, before it runs it:
    /// counts an input handle's event, and while a cut waits for markers records the entry in
    /// its sender's channel state if that channel is still open.
    #[inline(always)]
    pub(super) fn checkpoint_entry(&mut self, entry: &Entry<E>) {
        if let Entry::Event(o, e) = entry {
            if o.is_input() {
                self.count_input(o.0 & !Origin::INPUT, e);
            }
        }
        if self.cut.is_some() {
            self.record_channel(entry);
        }
    }

    /// Records `entry` in its sender's channel state if it is the entry of a context whose
    /// marker is still to come.
    #[cold]
    #[inline(never)]
    fn record_channel(&mut self, entry: &Entry<E>) {
        let Some(cut) = self.cut.as_mut() else { return };
        let (origin, event) = match entry {
            Entry::Event(o, e) => (*o, Some(e)),
            Entry::Spawn(o, _) => (*o, None),
            _ => return,
        };
        if origin.is_input() {
            return;
        }
        let from = origin.0;
        if !cut.open.get(from as usize).copied().unwrap_or(false) || cut.saved.is_err() {
            return;
        }
        let Some(e) = event else {
            cut.saved = Err(CheckpointError::Unsupported {
                context: self.shared.name.clone(),
                what: "a spawn sent from another context (`spawn_to`) in flight at the \
                       checkpoint, whose initialiser is a closure",
            });
            return;
        };
        let codec = &cut.req.persist.codec;
        let mut bytes = Vec::new();
        // The codec is user code: a panic fails the checkpoint, not the event.
        match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| codec.encode(e, &mut bytes)))
        {
            Ok(()) => cut.channel.push((from, bytes)),
            Err(p) => {
                cut.saved = Err(CheckpointError::Encode {
                    what: format!("an event in flight to context `{}`", self.shared.name),
                    reason: format!("a panic: {}", panic_message(&*p)),
                });
            }
        }
    }
}
