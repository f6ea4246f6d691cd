//! The listener index of one context (SPEC §6, R6.9).
//!
//! Listeners live in a slab; the index maps an event kind to a *bucket* holding the slab positions of
//! that kind's ordinary, `unmatched` and `completed` listeners, each list in registration order
//! (R6.4: that is the documented firing order). Delivering an event costs one hash lookup plus the
//! listeners of its own kind, whatever the number of listeners on other kinds.
//!
//! Removal is lazy: a listener that ends is marked dead at once (so it cannot fire again, even later
//! in the same dispatch) and its bucket is compacted after the current event's dispatch, when no
//! iteration is in progress. Listeners registered during a dispatch are appended at the end of their
//! list; the dispatch loop iterates only up to the length the list had when the event started, which
//! is what keeps a new listener from matching the event being processed (R6.5).

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

use crate::context::Handler;
use crate::event::Event;
use crate::pattern::{Expr, Pattern, Template};

/// How a listener fires.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Mode {
    /// `on`: fires once, then ends.
    Once,
    /// `on_all`: fires on every match until quit.
    All,
    /// `unmatched`: fires for events that no ordinary listener of the context matched.
    Unmatched,
    /// `completed`: fires once the event and everything it routed have been processed.
    Completed,
}

pub(crate) struct ListenerSlot<E: Event> {
    pub(crate) handle: u64,
    pub(crate) instance: u32,
    pub(crate) bucket: u32,
    pub(crate) mode: Mode,
    pub(crate) template: Template<E>,
    pub(crate) handler: Handler<E>,
    pub(crate) alive: bool,
}

#[derive(Default)]
pub(crate) struct Bucket {
    pub(crate) ordinary: Vec<u32>,
    pub(crate) unmatched: Vec<u32>,
    pub(crate) completed: Vec<u32>,
    dirty: bool,
}

/// A small, fast hasher for event kinds (the multiply-rotate of rustc's `FxHasher`): kinds are
/// trusted values, so no defence against hash flooding is needed here.
#[derive(Default, Clone, Copy)]
pub(crate) struct KindHasher(u64);

impl Hasher for KindHasher {
    #[inline]
    fn finish(&self) -> u64 {
        self.0
    }

    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(u64::from(b));
        }
    }

    #[inline]
    fn write_u8(&mut self, i: u8) {
        self.write_u64(u64::from(i));
    }

    #[inline]
    fn write_u32(&mut self, i: u32) {
        self.write_u64(u64::from(i));
    }

    #[inline]
    fn write_usize(&mut self, i: usize) {
        self.write_u64(i as u64);
    }

    #[inline]
    fn write_u64(&mut self, i: u64) {
        self.0 = (self.0.rotate_left(5) ^ i).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }
}

pub(crate) type KindMap<K, V> = HashMap<K, V, BuildHasherDefault<KindHasher>>;

pub(crate) struct ListenerTable<E: Event> {
    pub(crate) slots: Vec<Option<ListenerSlot<E>>>,
    free: Vec<u32>,
    by_handle: HashMap<u64, u32>,
    kinds: KindMap<E::Kind, u32>,
    pub(crate) buckets: Vec<Bucket>,
    dirty: Vec<u32>,
    /// Live listeners in the table.
    pub(crate) live: usize,
}

impl<E: Event> Default for ListenerTable<E> {
    fn default() -> Self {
        Self {
            slots: Vec::new(),
            free: Vec::new(),
            by_handle: HashMap::new(),
            kinds: KindMap::default(),
            buckets: Vec::new(),
            dirty: Vec::new(),
            live: 0,
        }
    }
}

impl<E: Event> ListenerTable<E> {
    /// The bucket of `kind`, if any listener was ever registered for it.
    #[inline]
    pub(crate) fn bucket_of(&self, kind: &E::Kind) -> Option<usize> {
        self.kinds.get(kind).map(|&b| b as usize)
    }

    /// Adds a listener; returns its slot.
    pub(crate) fn insert(
        &mut self,
        handle: u64,
        instance: u32,
        mode: Mode,
        pattern: Pattern<E>,
        handler: Handler<E>,
    ) -> u32 {
        let Expr::Template(template) = pattern.expr;
        let next_bucket = self.buckets.len() as u32;
        let bucket = *self.kinds.entry(template.kind).or_insert(next_bucket);
        if bucket == next_bucket {
            self.buckets.push(Bucket::default());
        }
        let slot = ListenerSlot {
            handle,
            instance,
            bucket,
            mode,
            template,
            handler,
            alive: true,
        };
        let index = match self.free.pop() {
            Some(i) => {
                self.slots[i as usize] = Some(slot);
                i
            }
            None => {
                self.slots.push(Some(slot));
                (self.slots.len() - 1) as u32
            }
        };
        let b = &mut self.buckets[bucket as usize];
        match mode {
            Mode::Once | Mode::All => b.ordinary.push(index),
            Mode::Unmatched => b.unmatched.push(index),
            Mode::Completed => b.completed.push(index),
        }
        self.by_handle.insert(handle, index);
        self.live += 1;
        index
    }

    /// The slot of a live listener's handle.
    pub(crate) fn slot_of(&self, handle: u64) -> Option<u32> {
        self.by_handle.get(&handle).copied()
    }

    /// Marks a listener dead; returns its instance if it was alive.
    pub(crate) fn kill(&mut self, slot: u32) -> Option<u32> {
        let l = self.slots.get_mut(slot as usize)?.as_mut()?;
        if !l.alive {
            return None;
        }
        l.alive = false;
        self.live -= 1;
        self.by_handle.remove(&l.handle);
        let b = &mut self.buckets[l.bucket as usize];
        if !b.dirty {
            b.dirty = true;
            self.dirty.push(l.bucket);
        }
        Some(l.instance)
    }

    /// Removes dead listeners from their buckets and frees their slots. Call only between dispatches.
    pub(crate) fn compact(&mut self) {
        while let Some(b) = self.dirty.pop() {
            let slots = &mut self.slots;
            let free = &mut self.free;
            let bucket = &mut self.buckets[b as usize];
            bucket.dirty = false;
            for list in [
                &mut bucket.ordinary,
                &mut bucket.unmatched,
                &mut bucket.completed,
            ] {
                list.retain(|&s| {
                    let alive = slots[s as usize].as_ref().is_some_and(|l| l.alive);
                    if !alive && slots[s as usize].take().is_some() {
                        free.push(s);
                    }
                    alive
                });
            }
        }
    }

    /// Whether compaction is pending.
    #[inline]
    pub(crate) fn needs_compaction(&self) -> bool {
        !self.dirty.is_empty()
    }
}
