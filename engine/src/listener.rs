//! The listener index of one context (SPEC §6, R6.9).
//!
//! Listeners live in a slab; the index maps an event kind to a *bucket* holding the slab positions of
//! that kind's ordinary, `unmatched` and `completed` listeners, each list in registration order
//! (R6.4: that is the documented firing order). Delivering an event costs one hash lookup plus the
//! listeners of its own kind, whatever the number of listeners on other kinds.
//!
//! Removal is lazy: a listener that ends is marked dead at once (so it cannot fire again, even later
//! in the same dispatch) and the lists that hold it are compacted after the current event's
//! dispatch, when no iteration is in progress. A list is compacted once its dead entries are at
//! least half of it (or it is short, [`SHORT_LIST`]), so ending `n` listeners of one list costs
//! O(n) in all, not O(n) each: with one listener per monitor instance on a shared list, ending
//! every instance one by one would otherwise be quadratic. A slot is freed once no list holds it
//! any more (an expression's listener is listed once per template), so a list never names a
//! freed or reused slot. Listeners registered during a dispatch are appended at the end of their
//! list; the dispatch loop iterates only up to the length the list had when the event started, which
//! is what keeps a new listener from matching the event being processed (R6.5).
//!
//! Compaction frees the slots of dead listeners (also those of expressions that wait for timers
//! only, which no list holds) and the bucket of a kind left without listeners, so the table's memory
//! follows the listeners alive, not every listener or kind ever used.
//!
//! Owns the listener index and the [`Cursor`] that dispatch walks it with (its fields are its own).
//! May import `event`, `pattern`, `expr` and `entry`.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

use smallvec::SmallVec;

use crate::entry::{Handler, MatchHandler, Mode};
use crate::event::Event;
use crate::expr::ExprListener;
use crate::pattern::Template;

/// What a listener waits for, with the handler of the matching shape.
pub(crate) enum Body<E: Event> {
    /// One template; the handler gets the event.
    Template {
        template: Template<E>,
        handler: Handler<E>,
    },
    /// An event expression; the handler gets the match. Inline, not boxed: a box would add a
    /// dependent load to every step of its matchers (tried and measured slower: the benchmark
    /// document's "Where a workload event's time goes").
    Expr {
        expr: ExprListener<E>,
        handler: MatchHandler<E>,
    },
}

pub(crate) struct ListenerSlot<E: Event> {
    pub(crate) handle: u64,
    pub(crate) instance: u32,
    pub(crate) mode: Mode,
    pub(crate) body: Body<E>,
    /// Where the slot is listed: `(bucket, key)`; a template is listed once, inline.
    regs: SmallVec<[(u32, Option<u64>); 1]>,
    /// How many lists still hold the slot: it is freed when a dead listener's count reaches 0.
    listed: u32,
    pub(crate) alive: bool,
    /// Alive, `on_all`, and a template without filters: every event offered to it fires its
    /// handler, so the dispatch loop tests this one flag instead of four facts.
    pub(crate) simple: bool,
}

impl<E: Event> ListenerSlot<E> {
    /// Whether the listener is listed under bucket `bucket` unkeyed, or keyed on `key`: whether a
    /// dispatch of an event of that bucket's kind with that key would offer it the event.
    pub(crate) fn listed_under(&self, bucket: u32, key: Option<u64>) -> bool {
        self.regs
            .iter()
            .any(|&(b, k)| b == bucket && (k.is_none() || k == key))
    }
}

/// A list at most this long is compacted as soon as one of its listeners ends: cheap, and it
/// keeps a kind's lone listener recognisable as its [`Bucket::solo`] right after the others end.
const SHORT_LIST: usize = 8;

/// The slots of the listeners listed under one `(kind, mode, key)`, in registration order, live
/// and dead ones: dead ones stay until [`ListenerTable::compact`] takes them out.
#[derive(Default)]
pub(crate) struct List {
    /// Inline up to four: a key's list usually names one listener, and dispatch then reads it
    /// from the list itself, with no heap block to load.
    pub(crate) slots: SmallVec<[u32; 4]>,
    /// Dead listeners still in `slots`.
    dead: u32,
    /// Whether the list waits in the table's `dirty` queue.
    queued: bool,
}

impl List {
    /// Notes one more dead listener; returns whether the list is due for compaction and not yet
    /// queued for it (the caller queues it).
    fn note_dead(&mut self) -> bool {
        self.dead += 1;
        let due = self.slots.len() <= SHORT_LIST || 2 * self.dead as usize >= self.slots.len();
        let queue = due && !self.queued;
        self.queued |= queue;
        queue
    }
}

/// The listeners of one event kind in one mode: unkeyed ones, and keyed ones by key; each list in
/// registration order.
#[derive(Default)]
pub(crate) struct Lists {
    pub(crate) plain: List,
    pub(crate) keyed: KindMap<u64, List>,
}

impl Lists {
    fn list_mut(&mut self, key: Option<u64>) -> &mut List {
        match key {
            None => &mut self.plain,
            Some(k) => self.keyed.entry(k).or_default(),
        }
    }

    fn get_mut(&mut self, key: Option<u64>) -> Option<&mut List> {
        match key {
            None => Some(&mut self.plain),
            Some(k) => self.keyed.get_mut(&k),
        }
    }

    /// Whether no listener is registered.
    pub(crate) fn is_empty(&self) -> bool {
        self.plain.slots.is_empty() && self.keyed.is_empty()
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
    /// The one ordinary listener of the kind, when there is exactly one, unkeyed and
    /// [`simple`](ListenerSlot::simple): then dispatching an event fires it and nothing else, and
    /// the dispatch loop skips the lists. Kept up to date by `insert`, `kill` and `compact`.
    pub(crate) solo: Option<Solo>,
}

impl Bucket {
    /// Whether no listener of any mode is listed.
    fn is_empty(&self) -> bool {
        self.ordinary.is_empty() && self.unmatched.is_empty() && self.completed.is_empty()
    }

    pub(crate) fn lists(&self, mode: Mode) -> &Lists {
        match mode {
            Mode::Once | Mode::All => &self.ordinary,
            Mode::Unmatched => &self.unmatched,
            Mode::Completed => &self.completed,
        }
    }

    fn lists_mut(&mut self, mode: Mode) -> &mut Lists {
        match mode {
            Mode::Once | Mode::All => &mut self.ordinary,
            Mode::Unmatched => &mut self.unmatched,
            Mode::Completed => &mut self.completed,
        }
    }
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

/// The kind map's capacity below which it is never shrunk.
const KIND_MAP_MIN: usize = 64;

pub(crate) type KindMap<K, V> = HashMap<K, V, BuildHasherDefault<KindHasher>>;

pub(crate) struct ListenerTable<E: Event> {
    slots: Vec<Option<ListenerSlot<E>>>,
    free: Vec<u32>,
    by_handle: HashMap<u64, u32>,
    kinds: KindMap<E::Kind, u32>,
    buckets: Vec<Bucket>,
    /// The kind of each bucket in use, by bucket (for unmapping it once it is empty).
    bucket_kinds: Vec<Option<E::Kind>>,
    /// Buckets freed by `compact` (their kind had no listener left), reused before new ones.
    free_buckets: Vec<u32>,
    /// Lists holding dead listeners: `(bucket, mode, key)`, compacted between dispatches.
    dirty: Vec<(u32, Mode, Option<u64>)>,
    /// Dead listeners listed nowhere (expressions of timers only), freed by `compact`.
    unlisted: Vec<u32>,
    /// Buckets `compact` found empty (a reused buffer).
    emptied: Vec<u32>,
    /// List entries `compact` visited, for the tests that count bookkeeping work.
    #[cfg(test)]
    visited: u64,
    /// Live listeners in the table.
    live: usize,
    /// The kind looked up last and what dispatch needs of its bucket: a run of events of one kind
    /// skips the hash lookup and the bucket. A kind's bucket changes only when `compact` frees it
    /// (no listener of the kind left), and its `solo` and `has_completed` change in `insert`,
    /// `kill` and `compact`: each of them clears this.
    last: Option<(E::Kind, KindView)>,
}

/// A walk over the listeners of one bucket's lists for one event (see
/// [`ListenerTable::cursor`]): positions, not borrows, since the handlers it leads to change the
/// table between steps (they may register listeners, which are appended, and end them, which
/// only marks them dead: compaction waits until the dispatch is over).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Cursor {
    bucket: u32,
    mode: Mode,
    key: u64,
    /// Next position in, and length taken of, the unkeyed list.
    i: usize,
    plain_len: usize,
    /// Next position in, and length taken of, the list keyed on `key`.
    j: usize,
    keyed_len: usize,
}

impl Cursor {
    /// The next listener slot, in registration order, or `None` at the end.
    #[inline(always)]
    pub(crate) fn next<E: Event>(&mut self, table: &ListenerTable<E>) -> Option<u32> {
        let lists = table.buckets[self.bucket as usize].lists(self.mode);
        if self.j >= self.keyed_len {
            // The usual case: no keyed listener to merge with.
            if self.i >= self.plain_len {
                return None;
            }
            self.i += 1;
            return Some(lists.plain.slots[self.i - 1]);
        }
        self.next_merged(table, lists)
    }

    /// [`next`](Self::next) while keyed listeners remain: the earlier registered of the two heads.
    #[inline(never)]
    fn next_merged<E: Event>(&mut self, table: &ListenerTable<E>, lists: &Lists) -> Option<u32> {
        let keyed = lists
            .keyed
            .get(&self.key)
            .and_then(|v| v.slots.get(self.j).copied());
        let plain = (self.i < self.plain_len).then(|| lists.plain.slots[self.i]);
        match (plain, keyed) {
            (Some(p), Some(q)) if table.handle_at(p) < table.handle_at(q) => {
                self.i += 1;
                Some(p)
            }
            (_, Some(q)) => {
                self.j += 1;
                Some(q)
            }
            (Some(p), None) => {
                self.i += 1;
                self.j = self.keyed_len;
                Some(p)
            }
            (None, None) => None,
        }
    }
}

/// What dispatching an event of a kind needs to know first, copied out of the kind's [`Bucket`].
#[derive(Clone, Copy, Debug)]
pub(crate) struct KindView {
    pub(crate) bucket: u32,
    pub(crate) solo: Option<Solo>,
    pub(crate) has_completed: bool,
}

impl<E: Event> Default for ListenerTable<E> {
    fn default() -> Self {
        Self {
            slots: Vec::new(),
            free: Vec::new(),
            by_handle: HashMap::new(),
            kinds: KindMap::default(),
            buckets: Vec::new(),
            bucket_kinds: Vec::new(),
            free_buckets: Vec::new(),
            dirty: Vec::new(),
            unlisted: Vec::new(),
            emptied: Vec::new(),
            #[cfg(test)]
            visited: 0,
            live: 0,
            last: None,
        }
    }
}

impl<E: Event> ListenerTable<E> {
    /// The bucket of `kind` as dispatch sees it, if any listener was ever registered for the kind.
    /// A one-entry cache of the last kind found spares the hash lookup and the bucket's line on a
    /// run of events of one kind (the hot path).
    #[inline]
    pub(crate) fn view_of(&mut self, kind: &E::Kind) -> Option<KindView> {
        if let Some((k, view)) = self.last {
            if k == *kind {
                return Some(view);
            }
        }
        let b = *self.kinds.get(kind)?;
        let bucket = &self.buckets[b as usize];
        let view = KindView {
            bucket: b,
            solo: bucket.solo,
            has_completed: bucket.has_completed,
        };
        self.last = Some((*kind, view));
        Some(view)
    }

    /// The handler of a [`KindView`]'s `solo` listener, without the checks of the general path:
    /// dispatch calls it for every event of a run of one kind.
    #[inline(always)]
    pub(crate) fn solo_handler(&mut self, solo: Solo) -> &mut Handler<E> {
        debug_assert!(
            matches!(self.slots.get(solo.slot as usize), Some(Some(l))
                if l.simple && l.instance == solo.instance),
            "a solo names a slot without its live simple listener"
        );
        // SAFETY: a `Solo` comes from `refresh_solo` (through a bucket or a `KindView` copied from
        // one), which names only a slot holding a `simple` listener: alive, `on_all`, a template.
        // That stays true while the `Solo` is held: the listener stops being `simple` only in
        // `kill`, which recomputes the `solo` of every bucket listing it (a slot is listed only
        // in the buckets of its `regs`, and `kill` walks them) and clears the `KindView` cache;
        // its slot is emptied only in `compact`, for dead listeners, and `compact` clears the
        // cache too. So the slot is occupied by that listener, whose body is a template, and in
        // bounds, since `slots` never shrinks.
        let l = unsafe {
            self.slots
                .get_unchecked_mut(solo.slot as usize)
                .as_mut()
                .unwrap_unchecked()
        };
        match &mut l.body {
            Body::Template { handler, .. } => handler,
            // SAFETY: as above, a `simple` listener's body is a template.
            Body::Expr { .. } => unsafe { std::hint::unreachable_unchecked() },
        }
    }

    /// The bucket of `kind`, if any listener was ever registered for it.
    #[inline]
    pub(crate) fn bucket_of(&mut self, kind: &E::Kind) -> Option<usize> {
        self.view_of(kind).map(|v| v.bucket as usize)
    }

    fn bucket_for(&mut self, kind: E::Kind) -> u32 {
        if let Some(&b) = self.kinds.get(&kind) {
            return b;
        }
        let b = match self.free_buckets.pop() {
            Some(b) => {
                self.bucket_kinds[b as usize] = Some(kind);
                b
            }
            None => {
                self.buckets.push(Bucket::default());
                self.bucket_kinds.push(Some(kind));
                (self.buckets.len() - 1) as u32
            }
        };
        self.kinds.insert(kind, b);
        b
    }

    /// Adds a listener listed under every `(kind, key)` of `index`; returns its slot.
    pub(crate) fn insert(
        &mut self,
        handle: u64,
        instance: u32,
        mode: Mode,
        body: Body<E>,
        index: &[(E::Kind, Option<u64>)],
    ) -> u32 {
        let regs: SmallVec<[(u32, Option<u64>); 1]> = index
            .iter()
            .map(|&(kind, key)| (self.bucket_for(kind), key))
            .collect();
        let simple = mode == Mode::All
            && matches!(&body, Body::Template { template, .. } if !template.has_filter());
        let slot = ListenerSlot {
            handle,
            instance,
            mode,
            body,
            listed: regs.len() as u32,
            regs,
            alive: true,
            simple,
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
        if let Some(slot) = &self.slots[index as usize] {
            for &(b, key) in &slot.regs {
                let bucket = &mut self.buckets[b as usize];
                bucket.lists_mut(mode).list_mut(key).slots.push(index);
                bucket.has_completed |= mode == Mode::Completed;
                Self::refresh_solo(&self.slots, bucket);
            }
        }
        self.last = None;
        self.by_handle.insert(handle, index);
        self.live += 1;
        index
    }

    /// The slot of a live listener's handle.
    /// A cursor over the listeners of bucket `b` in `mode`'s lists that an event with the key
    /// `key()` is offered to: the unkeyed ones and those keyed on its key, merged in registration
    /// order (R6.4), and only those whose handle is below `first_new` (`u64::MAX`: all of them),
    /// that is those present when its dispatch started (R6.5). `key` runs only if some listener
    /// of the lists is keyed.
    #[inline(always)]
    pub(crate) fn cursor(
        &self,
        b: usize,
        mode: Mode,
        key: impl FnOnce() -> Option<u64>,
        first_new: u64,
    ) -> Cursor {
        let lists = self.buckets[b].lists(mode);
        // Each list is in registration order, so in handle order: cut it at the first new handle.
        // (Between dispatches every listed slot is occupied: compaction unlists before it frees.)
        let cut = |list: &List| {
            if first_new == u64::MAX {
                list.slots.len()
            } else {
                list.slots
                    .partition_point(|&s| self.handle_at(s) < first_new)
            }
        };
        let (key, keyed_len) = match lists.keyed.is_empty() {
            true => (0, 0),
            false => match key() {
                Some(k) => (k, lists.keyed.get(&k).map_or(0, &cut)),
                None => (0, 0),
            },
        };
        Cursor {
            bucket: b as u32,
            mode,
            key,
            i: 0,
            plain_len: cut(&lists.plain),
            j: 0,
            keyed_len,
        }
    }

    /// The listener in `slot`, if the slot is occupied.
    #[inline(always)]
    pub(crate) fn slot(&self, slot: u32) -> Option<&ListenerSlot<E>> {
        self.slots[slot as usize].as_ref()
    }

    /// The listener in `slot`, if the slot is occupied, to fire it.
    #[inline(always)]
    pub(crate) fn slot_mut(&mut self, slot: u32) -> Option<&mut ListenerSlot<E>> {
        self.slots[slot as usize].as_mut()
    }

    /// Live listeners in the table.
    pub(crate) fn live(&self) -> usize {
        self.live
    }

    pub(crate) fn slot_of(&self, handle: u64) -> Option<u32> {
        self.by_handle.get(&handle).copied()
    }

    /// The handle of the listener in `slot` (for merging keyed and unkeyed lists in order).
    #[inline]
    pub(crate) fn handle_at(&self, slot: u32) -> u64 {
        self.slots[slot as usize]
            .as_ref()
            .map_or(u64::MAX, |l| l.handle)
    }

    /// Marks a listener dead; returns its instance if it was alive.
    pub(crate) fn kill(&mut self, slot: u32) -> Option<u32> {
        let l = self.slots.get_mut(slot as usize)?.as_mut()?;
        if !l.alive {
            return None;
        }
        l.alive = false;
        l.simple = false;
        self.live -= 1;
        self.by_handle.remove(&l.handle);
        let (mode, instance) = (l.mode, l.instance);
        // Still listed until compaction, but no longer `simple`: no bucket keeps it as its solo.
        if let Some(l) = &self.slots[slot as usize] {
            if l.regs.is_empty() {
                // No list will find it dead: compaction frees it from here.
                self.unlisted.push(slot);
            }
            for &(b, key) in &l.regs {
                let bucket = &mut self.buckets[b as usize];
                if let Some(list) = bucket.lists_mut(mode).get_mut(key) {
                    if list.note_dead() {
                        self.dirty.push((b, mode, key));
                    }
                }
                Self::refresh_solo(&self.slots, bucket);
            }
        }
        self.last = None;
        Some(instance)
    }

    /// Sets `bucket.solo` from its ordinary lists and the slots they name: the one place that
    /// decides it (`insert`, `kill` and `compact` call it for every bucket they change).
    fn refresh_solo(slots: &[Option<ListenerSlot<E>>], bucket: &mut Bucket) {
        let lists = &bucket.ordinary;
        bucket.solo = match lists.plain.slots[..] {
            [only] if lists.keyed.is_empty() => slots[only as usize]
                .as_ref()
                .filter(|l| l.simple)
                .map(|l| Solo {
                    slot: only,
                    instance: l.instance,
                }),
            _ => None,
        };
    }

    /// Removes dead listeners from the lists that hold them and frees their slots, and frees the
    /// buckets of kinds left without any listener (their kind is unmapped; a later listener of
    /// that kind gets a fresh bucket). Call only between dispatches.
    pub(crate) fn compact(&mut self) {
        for slot in self.unlisted.drain(..) {
            if let Some(l) = &self.slots[slot as usize] {
                debug_assert!(!l.alive && l.regs.is_empty(), "an unlisted slot is listed");
                self.slots[slot as usize] = None;
                self.free.push(slot);
            }
        }
        while let Some((b, mode, key)) = self.dirty.pop() {
            let slots = &mut self.slots;
            let free = &mut self.free;
            let bucket = &mut self.buckets[b as usize];
            let lists = bucket.lists_mut(mode);
            let Some(list) = lists.get_mut(key) else {
                continue;
            };
            #[cfg(test)]
            {
                self.visited += list.slots.len() as u64;
            }
            list.slots.retain(|s| {
                let s = *s;
                let Some(l) = slots[s as usize].as_mut() else {
                    debug_assert!(false, "a list names a freed slot");
                    return false;
                };
                if l.alive {
                    return true;
                }
                l.listed -= 1;
                if l.listed == 0 {
                    // No list holds it any more: the slot (and the listener's state) goes.
                    slots[s as usize] = None;
                    free.push(s);
                }
                false
            });
            list.dead = 0;
            list.queued = false;
            if let (Some(k), true) = (key, list.slots.is_empty()) {
                lists.keyed.remove(&k);
            }
            bucket.has_completed = !bucket.completed.is_empty();
            Self::refresh_solo(slots, bucket);
            if bucket.is_empty() {
                self.emptied.push(b);
            }
        }
        if !self.emptied.is_empty() {
            self.free_empty_buckets();
        }
        self.last = None;
    }

    /// Frees the buckets of `emptied`, and gives back the kind map's room once it is mostly empty.
    #[cold]
    fn free_empty_buckets(&mut self) {
        for b in self.emptied.drain(..) {
            let bucket = &mut self.buckets[b as usize];
            if !bucket.is_empty() {
                continue;
            }
            // `None`: freed already (it was listed twice in `emptied`).
            let Some(kind) = self.bucket_kinds[b as usize].take() else {
                continue;
            };
            self.kinds.remove(&kind);
            // Drops the lists' buffers too.
            *bucket = Bucket::default();
            self.free_buckets.push(b);
        }
        if self.kinds.capacity() > KIND_MAP_MIN && self.kinds.len() * 4 < self.kinds.capacity() {
            self.kinds.shrink_to(2 * self.kinds.len());
        }
    }

    /// List entries compaction has visited so far (tests count bookkeeping work with it).
    #[cfg(test)]
    pub(crate) fn work(&self) -> u64 {
        self.visited
    }

    /// Whether compaction is pending.
    #[inline]
    pub(crate) fn needs_compaction(&self) -> bool {
        !self.dirty.is_empty() || !self.unlisted.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pattern::Pattern;

    #[derive(Clone, Debug)]
    struct Ev(u32);

    impl Event for Ev {
        type Kind = u32;
        fn kind(&self) -> u32 {
            self.0
        }
    }

    fn template(pattern: Pattern<Ev>) -> Body<Ev> {
        Body::Template {
            template: pattern.template,
            handler: Box::new(|_, _, _| {}),
        }
    }

    /// Registers a listener of `instance` on `pattern`; returns its slot.
    fn add(
        t: &mut ListenerTable<Ev>,
        handle: u64,
        instance: u32,
        mode: Mode,
        p: Pattern<Ev>,
    ) -> u32 {
        let index = [(p.template.kind, p.template.key)];
        t.insert(handle, instance, mode, template(p), &index)
    }

    /// The solo of kind `k` as dispatch sees it, checked against the bucket itself, and reached
    /// through `solo_handler` when there is one (miri runs this for the unchecked access).
    fn solo(t: &mut ListenerTable<Ev>, k: u32) -> Option<Solo> {
        let view = t.view_of(&k)?;
        assert_eq!(
            view.solo, t.buckets[view.bucket as usize].solo,
            "stale view"
        );
        if let Some(s) = view.solo {
            let _: &mut Handler<Ev> = t.solo_handler(s);
        }
        view.solo
    }

    // R6.4, R6.9: the dispatch fast path fires a kind's solo listener alone, so `solo` must name
    // the kind's only ordinary listener exactly while it is alive, unkeyed, `on_all` and without a
    // filter, through registrations, quits, compaction and slot reuse.
    #[test]
    fn r6_4_solo_names_the_only_plain_listener_while_it_lives() {
        let mut t = ListenerTable::<Ev>::default();
        let a = add(&mut t, 1, 10, Mode::All, Pattern::kind(1));
        assert_eq!(
            solo(&mut t, 1),
            Some(Solo {
                slot: a,
                instance: 10
            })
        );
        // Listeners of other modes and kinds leave it alone.
        add(&mut t, 2, 10, Mode::Unmatched, Pattern::kind(1));
        add(&mut t, 3, 11, Mode::Completed, Pattern::kind(1));
        add(&mut t, 4, 11, Mode::All, Pattern::kind(2));
        assert_eq!(
            solo(&mut t, 1),
            Some(Solo {
                slot: a,
                instance: 10
            })
        );
        // A second ordinary listener: the lists decide again.
        let b = add(&mut t, 5, 12, Mode::All, Pattern::kind(1));
        assert_eq!(solo(&mut t, 1), None);
        t.kill(a);
        assert_eq!(solo(&mut t, 1), None);
        t.compact();
        assert_eq!(
            solo(&mut t, 1),
            Some(Solo {
                slot: b,
                instance: 12
            })
        );
        // The solo quits: gone at once, before compaction frees its slot.
        t.kill(b);
        assert_eq!(solo(&mut t, 1), None);
        t.compact();
        assert_eq!(solo(&mut t, 1), None);
        // A freed slot is reused, with the new listener's instance.
        let c = add(&mut t, 6, 13, Mode::All, Pattern::kind(1));
        assert!(c == a || c == b, "a freed slot is reused");
        assert_eq!(
            solo(&mut t, 1),
            Some(Solo {
                slot: c,
                instance: 13
            })
        );
        // Keyed, once and filtered listeners are not simple, or make the lists matter.
        add(&mut t, 7, 13, Mode::All, Pattern::kind(1).key(3));
        assert_eq!(solo(&mut t, 1), None);
        add(&mut t, 8, 14, Mode::Once, Pattern::kind(5));
        assert_eq!(solo(&mut t, 5), None);
        add(&mut t, 9, 14, Mode::All, Pattern::kind(6).filter(|_| true));
        assert_eq!(solo(&mut t, 6), None);
        assert_eq!(solo(&mut t, 2).map(|s| s.instance), Some(11));
    }

    // R6.9: the bucket of a kind left without listeners is freed by compaction and reused for the
    // next new kind; a kind whose bucket was freed gets a fresh one, and dispatch finds each
    // kind's own listeners.
    #[test]
    fn r6_9_a_kind_without_listeners_gives_its_bucket_back() {
        let mut t = ListenerTable::<Ev>::default();
        let keep = add(&mut t, 1, 10, Mode::All, Pattern::kind(1));
        let a = add(&mut t, 2, 10, Mode::Once, Pattern::kind(2));
        let b2 = t.bucket_of(&2).unwrap();
        assert_eq!(t.buckets.len(), 2);
        t.kill(a);
        t.compact();
        assert_eq!(t.bucket_of(&2), None, "kind 2 has no listener left");
        // A new kind takes the freed bucket; kind 1 keeps its own.
        let c = add(&mut t, 3, 11, Mode::Unmatched, Pattern::kind(3));
        assert_eq!(t.bucket_of(&3), Some(b2));
        assert_eq!(t.buckets.len(), 2, "no bucket added");
        assert_eq!(t.buckets[b2].unmatched.plain.slots[..], [c]);
        assert!(
            t.buckets[b2].ordinary.is_empty(),
            "the freed bucket starts empty"
        );
        assert_eq!(
            solo(&mut t, 1),
            Some(Solo {
                slot: keep,
                instance: 10
            })
        );
        // Kind 2 again: a bucket of its own.
        add(&mut t, 4, 12, Mode::All, Pattern::kind(2).key(7));
        let b = t.bucket_of(&2).unwrap();
        assert_ne!(b, b2);
        assert_eq!(t.buckets[b].ordinary.keyed.len(), 1);
        // A bucket freed while other lists of the same compaction name it is freed once.
        let d = add(&mut t, 5, 12, Mode::Completed, Pattern::kind(3));
        t.kill(c);
        t.kill(d);
        t.compact();
        assert_eq!(t.bucket_of(&3), None);
        assert_eq!(t.free_buckets, [b2 as u32]);
    }
}
