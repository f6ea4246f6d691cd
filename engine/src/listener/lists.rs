//! The lists the listener table is made of: a kind's [`Bucket`], its [`Lists`] of one mode
//! (unkeyed, by key, and by the value of an indexed field), each [`List`] of slots in
//! registration order with its count of dead entries, a bucket's lone listener ([`Solo`]), and
//! the kind map with its hasher.
//!
//! Owns these structures; the table fills and compacts them. May import `entry`, `pattern` and `hash`.

use smallvec::SmallVec;

use crate::entry::Mode;
use crate::pattern::IndexKey;

/// A list at most this long is compacted as soon as one of its listeners ends: cheap, and it
/// keeps a kind's lone listener recognisable as its solo ([`Lead::Solo`]) right after the others end.
pub(super) const SHORT_LIST: usize = 8;

/// The slots of the listeners listed under one `(kind, mode, key)`, in registration order, live
/// and dead ones: dead ones stay until [`ListenerTable::compact`](super::ListenerTable::compact) takes them out.
#[derive(Default)]
pub(crate) struct List {
    /// Inline up to four: a key's list usually names one listener, and dispatch then reads it
    /// from the list itself, with no heap block to load.
    pub(crate) slots: SmallVec<[u32; 4]>,
    /// Dead listeners still in `slots`.
    pub(super) dead: u32,
    /// Whether the list waits in the table's `dirty` queue.
    pub(super) queued: bool,
}

impl List {
    /// Notes one more dead listener; returns whether the list is due for compaction and not yet
    /// queued for it (the caller queues it).
    pub(super) fn note_dead(&mut self) -> bool {
        self.dead += 1;
        let due = self.slots.len() <= SHORT_LIST || 2 * self.dead as usize >= self.slots.len();
        let queue = due && !self.queued;
        self.queued |= queue;
        queue
    }
}

/// The listeners of one event kind in one mode: unkeyed ones, keyed ones by key, and those
/// indexed on a field by `(field, value)`; each list in registration order.
pub(crate) struct Lists {
    pub(crate) plain: List,
    /// By key: a [`KeyMap`], whose line a lookup reads first the look-ahead can prefetch.
    pub(crate) keyed: KeyMap<List>,
    pub(crate) fields: KindMap<(u32, u64), List>,
    /// The fields `fields` has lists for, each with its number of lists: what a dispatch looks
    /// up in an event (R6.10).
    pub(crate) field_ids: SmallVec<[(u32, u32); 2]>,
    /// The highest handle ever listed unkeyed here and the lowest ever listed under a key (see
    /// [`plain_first`](Self::plain_first)). Bounds, not the current extremes: a listener that
    /// leaves a list moves neither, so they hold for the lists as they are now, too.
    plain_max: u64,
    keyed_min: u64,
}

impl Default for Lists {
    fn default() -> Self {
        Self {
            plain: List::default(),
            keyed: KeyMap::default(),
            fields: KindMap::default(),
            field_ids: SmallVec::new(),
            plain_max: 0,
            keyed_min: u64::MAX,
        }
    }
}

impl Lists {
    /// Notes that the listener of `handle` is listed under `key` (see [`plain_first`](Self::plain_first)).
    pub(super) fn note_listed(&mut self, key: IndexKey, handle: u64) {
        match key {
            IndexKey::Plain => self.plain_max = self.plain_max.max(handle),
            IndexKey::Key(_) => self.keyed_min = self.keyed_min.min(handle),
            IndexKey::Field(..) => {}
        }
    }

    /// Whether every unkeyed listener here was registered before every keyed one (handles grow
    /// with registration): then a walk takes the unkeyed list, then the key's, without comparing
    /// handles, so without reading the key's listener slots to learn the order (a pool member:
    /// the dispatcher's gate, then its instances' listeners, registered later). False at worst
    /// too often, never wrongly: the bounds only move outwards.
    #[inline(always)]
    pub(crate) fn plain_first(&self) -> bool {
        self.plain_max < self.keyed_min
    }

    pub(super) fn list_mut(&mut self, key: IndexKey) -> &mut List {
        match key {
            IndexKey::Plain => &mut self.plain,
            IndexKey::Key(k) => self.keyed.get_or_insert_default(k),
            IndexKey::Field(f, v) => {
                let ids = &mut self.field_ids;
                self.fields.entry((f, v)).or_insert_with(|| {
                    match ids.iter_mut().find(|(id, _)| *id == f) {
                        Some((_, n)) => *n += 1,
                        None => ids.push((f, 1)),
                    }
                    List::default()
                })
            }
        }
    }

    pub(super) fn get_mut(&mut self, key: IndexKey) -> Option<&mut List> {
        match key {
            IndexKey::Plain => Some(&mut self.plain),
            IndexKey::Key(k) => self.keyed.get_mut(k),
            IndexKey::Field(f, v) => self.fields.get_mut(&(f, v)),
        }
    }

    /// Drops the list of `key` (a keyed or field list that compaction emptied).
    pub(super) fn remove(&mut self, key: IndexKey) {
        match key {
            IndexKey::Plain => {}
            IndexKey::Key(k) => {
                self.keyed.remove(k);
            }
            IndexKey::Field(f, v) => {
                if self.fields.remove(&(f, v)).is_some() {
                    if let Some(i) = self.field_ids.iter().position(|(id, _)| *id == f) {
                        self.field_ids[i].1 -= 1;
                        if self.field_ids[i].1 == 0 {
                            self.field_ids.remove(i);
                        }
                    }
                }
            }
        }
    }

    /// Whether no listener is registered.
    pub(crate) fn is_empty(&self) -> bool {
        self.plain.slots.is_empty() && self.keyed.is_empty() && self.fields.is_empty()
    }
}

/// A bucket's only listener: its slot, and its instance beside it, so that dispatch loads the
/// listener and the instance side by side instead of one after the other.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Solo {
    pub(crate) slot: u32,
    pub(crate) instance: u32,
}

#[derive(Default)]
pub(crate) struct Bucket {
    pub(crate) ordinary: Lists,
    pub(crate) unmatched: Lists,
    pub(crate) completed: Lists,
    /// `!completed.is_empty()`, kept up to date by `insert` and `compact`: read for every
    /// dispatched event, where the two-part emptiness test would cost more.
    pub(crate) has_completed: bool,
    /// `!unmatched.is_empty()`, kept the same way: an event that no ordinary listener matched
    /// (most, where a filter or a query's template declines them) skips the `unmatched` walk.
    pub(crate) has_unmatched: bool,
    /// How dispatch walks the ordinary lists (see [`Lead`]). Kept up to date by `insert`, `kill`
    /// and `compact`.
    pub(crate) lead: Lead,
}

/// How dispatch walks a bucket's ordinary lists: without a [`Cursor`](super::Cursor) when they
/// need no merging (no field lists, at most one unkeyed listener, and that one registered
/// before every keyed one), so that the cursor's set-up and steps (`workload/vwap`: 60 of its
/// 774 instructions per event; `workload/spike`: about 90 of 542) are not paid. A listener named
/// by `Alone` or `Keyed` may be dead until compaction, as any listed listener; dispatch skips it
/// as a walk would. One value decides the walk: the kind's view copies it for every event.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) enum Lead {
    /// Another shape: the cursor merges the lists.
    #[default]
    Cursor,
    /// One unkeyed listener, alive and [`simple`](super::ListenerSlot::simple), and no keyed one:
    /// dispatching an event fires it and nothing else (the dispatch loop's chain fast path).
    Solo(Solo),
    /// One unkeyed listener that is not simple (a query, a filter or an expression alone, or a
    /// dead one until compaction), and no keyed one: it alone is offered the event.
    Alone(u32),
    /// Keyed listeners, and before them at most one unkeyed listener, registered before every
    /// keyed one (a pool member's gate): that one first, then the event's key's list.
    Keyed(Option<u32>),
}

impl Bucket {
    /// Whether no listener of any mode is listed.
    pub(super) fn is_empty(&self) -> bool {
        self.ordinary.is_empty() && self.unmatched.is_empty() && self.completed.is_empty()
    }

    pub(crate) fn lists(&self, mode: Mode) -> &Lists {
        match mode {
            Mode::Once | Mode::All => &self.ordinary,
            Mode::Unmatched => &self.unmatched,
            Mode::Completed => &self.completed,
        }
    }

    pub(super) fn lists_mut(&mut self, mode: Mode) -> &mut Lists {
        match mode {
            Mode::Once | Mode::All => &mut self.ordinary,
            Mode::Unmatched => &mut self.unmatched,
            Mode::Completed => &mut self.completed,
        }
    }
}

pub(crate) use crate::hash::{KeyMap, KindMap};
