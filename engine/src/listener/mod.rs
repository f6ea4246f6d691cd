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
//! least half of it (or it is short, [`SHORT_LIST`](lists::SHORT_LIST)), so ending `n` listeners of one list costs
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
//! Owns the listener index, one job per file: this file the table (the slab, registration,
//! removal and compaction); `lists` the keyed lists it is made of (a kind's bucket, its lists by
//! mode and key); `cursor` how dispatch reads it (a kind's view, and the
//! [`Cursor`] that walks a bucket's lists, whose fields are its own). May import `event`,
//! `pattern`, `expr`, `query` and `entry`.

mod cursor;
mod lists;

use smallvec::SmallVec;

use crate::entry::{Handler, MatchHandler, Mode, QueryRun, NO_GATE};
use crate::event::Event;
use crate::expr::ExprListener;
use crate::pattern::IndexKey;
use crate::pattern::{Prior, Template};
use crate::query::windows::WindowsHeld;

pub(crate) use crate::expr::Held;
pub(crate) use cursor::{Cursor, KindView};
pub(crate) use lists::{Bucket, KindMap, Lead, List, Lists, Solo};

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
        /// Boxed: they run only when a match completes or times out, not at every step, and
        /// inline they would make every slot a cache line longer.
        handlers: Box<ExprHandlers<E>>,
    },
    /// A stream query (R7.9), boxed: one word in the slot, so that the slot stays within its two
    /// cache lines (the template and expression listeners are what most dispatches read).
    Query(Box<QueryBody<E>>),
}

/// A stream query listener: the template whose events enter its windows (a join's left and
/// right templates), and the windows with the handler of their rows.
pub(crate) struct QueryBody<E: Event> {
    pub(crate) template: Template<E>,
    pub(crate) right: Option<Template<E>>,
    pub(crate) run: Box<dyn QueryRun<E>>,
}

impl<E: Event> QueryBody<E> {
    /// Which of its templates `e` (offered by the index) matches: bit 0 the first, bit 1 a join's
    /// right. A join's two templates may differ in kind or key, so each is checked whole.
    pub(crate) fn sides(&self, e: &E) -> u8 {
        match &self.right {
            None => u8::from(self.template.matches_listed(e)),
            Some(right) => {
                let none = Prior::none();
                u8::from(self.template.matches_after(&none, e))
                    | u8::from(right.matches_after(&none, e)) << 1
            }
        }
    }
}

/// An expression listener's handlers.
pub(crate) struct ExprHandlers<E: Event> {
    pub(crate) on_match: MatchHandler<E>,
    /// The handler of matches that timed out (R7.7), if the listener asked for one.
    pub(crate) on_timeout: Option<MatchHandler<E>>,
}

pub(crate) struct ListenerSlot<E: Event> {
    pub(crate) handle: u64,
    pub(crate) instance: u32,
    pub(crate) mode: Mode,
    pub(crate) body: Body<E>,
    /// Where the slot is listed: `(bucket, key)`; a template is listed once, inline.
    pub(super) regs: SmallVec<[Reg; 1]>,
    /// How many lists still hold the slot: it is freed when a dead listener's count reaches 0.
    pub(super) listed: u32,
    pub(crate) alive: bool,
    /// Alive, `on_all`, and a template without filters that is no gate: every event offered to
    /// it fires its handler, so the dispatch loop tests this one flag instead of five facts.
    pub(crate) simple: bool,
    /// [`NO_GATE`], or for a pool dispatcher's listener the index of its hook
    /// ([`DispatcherHook`](crate::entry::DispatcherHook)): an event whose key is in that hook's
    /// key set passes the gate (the key's instance takes it) and runs no handler.
    pub(crate) gate: u32,
}

impl<E: Event> ListenerSlot<E> {
    /// Whether the listener is listed under bucket `bucket` where a dispatch of `event` (of that
    /// bucket's kind) would offer it the event: unkeyed, under its key, or under the value of one
    /// of its fields.
    pub(crate) fn listed_under(&self, bucket: u32, event: &E) -> bool {
        self.regs.iter().any(|r| {
            let (b, k) = (r.bucket, r.key());
            b == bucket
                && match k {
                    IndexKey::Plain => true,
                    IndexKey::Key(key) => event.key() == Some(key),
                    IndexKey::Field(f, v) => event.field(f as usize) == Some(v),
                }
        })
    }
}

/// Where a listener is listed: a bucket and an [`IndexKey`], in 16 bytes (an `IndexKey` beside a
/// `u32` would take 24): `field` is a field's number, or [`Reg::PLAIN`] or [`Reg::KEY`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Reg {
    pub(super) bucket: u32,
    field: u32,
    value: u64,
}

impl Reg {
    const PLAIN: u32 = u32::MAX;
    const KEY: u32 = u32::MAX - 1;

    fn new(bucket: u32, key: IndexKey) -> Self {
        let (field, value) = match key {
            IndexKey::Plain => (Self::PLAIN, 0),
            IndexKey::Key(k) => (Self::KEY, k),
            IndexKey::Field(f, v) => (f, v),
        };
        Reg {
            bucket,
            field,
            value,
        }
    }

    pub(crate) fn key(self) -> IndexKey {
        match self.field {
            Self::PLAIN => IndexKey::Plain,
            Self::KEY => IndexKey::Key(self.value),
            f => IndexKey::Field(f, self.value),
        }
    }
}

/// The kind map's capacity below which it is never shrunk.
const KIND_MAP_MIN: usize = 64;

pub(crate) struct ListenerTable<E: Event> {
    pub(super) slots: Vec<Option<ListenerSlot<E>>>,
    free: Vec<u32>,
    /// Live listeners by handle. Handles are the context's own counter, not outside input, so
    /// the map uses the fast [`KindHasher`](crate::hash::KindHasher) rather than SipHash.
    by_handle: KindMap<u64, u32>,
    kinds: KindMap<E::Kind, u32>,
    pub(super) buckets: Vec<Bucket>,
    /// The kind of each bucket in use, by bucket (for unmapping it once it is empty).
    bucket_kinds: Vec<Option<E::Kind>>,
    /// Buckets freed by `compact` (their kind had no listener left), reused before new ones.
    free_buckets: Vec<u32>,
    /// Lists holding dead listeners: `(bucket, mode, key)`, compacted between dispatches.
    dirty: Vec<(u32, Mode, IndexKey)>,
    /// Dead listeners listed nowhere (expressions of timers only), freed by `compact`.
    unlisted: Vec<u32>,
    /// Buckets `compact` found empty (a reused buffer).
    emptied: Vec<u32>,
    /// List entries `compact` visited, for the tests that count bookkeeping work.
    #[cfg(test)]
    visited: u64,
    /// Live listeners in the table.
    live: usize,
    /// What the live expression listeners hold: matches in progress with at least one event,
    /// and their events (R7.6: bounded by the expressions; published in the status).
    held: Held,
    /// What the live query listeners' windows hold (R7.11, published in the status).
    windows: WindowsHeld,
    /// Set by [`ending`](Self::ending): dead listeners' handles stay in `by_handle`, and keyed
    /// lists learn of their dead listeners from the dispatches that meet them.
    ending: bool,
    /// Listener slots the cursors handed out, for the tests that count dispatch work.
    #[cfg(test)]
    walked: std::cell::Cell<u64>,
    /// The kind looked up last and what dispatch needs of its bucket: a run of events of one kind
    /// skips the hash lookup and the bucket. A kind's bucket changes only when `compact` frees it
    /// (no listener of the kind left), and its `lead`, `has_completed` and `has_unmatched` change in `insert`,
    /// `kill` and `compact`: each of them clears this.
    last: Option<(E::Kind, KindView)>,
}

impl<E: Event> Default for ListenerTable<E> {
    fn default() -> Self {
        Self {
            slots: Vec::new(),
            free: Vec::new(),
            by_handle: KindMap::default(),
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
            held: Held::default(),
            windows: WindowsHeld::default(),
            ending: false,
            #[cfg(test)]
            walked: std::cell::Cell::new(0),
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
            lead: bucket.lead,
            has_completed: bucket.has_completed,
            has_unmatched: bucket.has_unmatched,
        };
        self.last = Some((*kind, view));
        Some(view)
    }

    /// The handler of a [`Lead::Solo`] listener, without the checks of the general path:
    /// dispatch calls it for every event of a run of one kind.
    #[inline(always)]
    pub(crate) fn solo_handler(&mut self, solo: Solo) -> &mut Handler<E> {
        debug_assert!(
            matches!(self.slots.get(solo.slot as usize), Some(Some(l))
                if l.simple && l.instance == solo.instance),
            "a solo names a slot without its live simple listener"
        );
        // SAFETY: a `Solo` comes from `refresh_lead` (through a bucket or a `KindView` copied from
        // one), which names only a slot holding a `simple` listener: alive, `on_all`, a template.
        // That stays true while the `Solo` is held: the listener stops being `simple` only in
        // `kill`, which recomputes the `lead` of every bucket listing it (a slot is listed only
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
            Body::Expr { .. } | Body::Query(_) => unsafe { std::hint::unreachable_unchecked() },
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

    /// Adds a listener listed under every `(kind, key)` of `index`, a pool dispatcher's gate if
    /// `gate` is not [`NO_GATE`]; returns its slot.
    pub(crate) fn insert(
        &mut self,
        handle: u64,
        instance: u32,
        mode: Mode,
        body: Body<E>,
        gate: u32,
        index: &[(E::Kind, IndexKey)],
    ) -> u32 {
        let regs: SmallVec<[Reg; 1]> = index
            .iter()
            .map(|&(kind, key)| {
                let b = self.bucket_for(kind);
                Reg::new(b, self.listable(b, mode, key))
            })
            .collect();
        let simple = mode == Mode::All
            && gate == NO_GATE
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
            gate,
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
            for (b, key) in slot.regs.iter().map(|r| (r.bucket, r.key())) {
                let bucket = &mut self.buckets[b as usize];
                let lists = bucket.lists_mut(mode);
                lists.note_listed(key, handle);
                lists.list_mut(key).slots.push(index);
                bucket.has_completed |= mode == Mode::Completed;
                bucket.has_unmatched |= mode == Mode::Unmatched;
                Self::refresh_lead(&self.slots, bucket);
            }
        }
        self.last = None;
        self.by_handle.insert(handle, index);
        self.live += 1;
        index
    }

    /// Where a listener meant for `key` is listed in bucket `b`'s `mode` lists: there, unless it
    /// is a field that would be the lists' `FIELD_LISTS + 1`-th indexed field; such a listener is
    /// listed unkeyed (its template checks the field as data, R6.10).
    fn listable(&self, b: u32, mode: Mode, key: IndexKey) -> IndexKey {
        let IndexKey::Field(f, _) = key else {
            return key;
        };
        let ids = &self.buckets[b as usize].lists(mode).field_ids;
        if ids.len() >= cursor::FIELD_LISTS && !ids.iter().any(|&(id, _)| id == f) {
            IndexKey::Plain
        } else {
            key
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

    /// What the live expression listeners hold (see [`Held`]).
    pub(crate) fn held(&self) -> Held {
        self.held
    }

    /// Notes that a step took an expression listener from holding `before` to `after`.
    pub(crate) fn note_held(&mut self, before: Held, after: Held) {
        self.held.sub(before);
        self.held.add(after);
    }

    /// What the live query listeners' windows hold.
    pub(crate) fn windows(&self) -> WindowsHeld {
        self.windows
    }

    /// Notes that a query listener's windows went from holding `before` to `after`.
    pub(crate) fn note_windows(&mut self, before: WindowsHeld, after: WindowsHeld) {
        self.windows.sub(before);
        self.windows.add(after);
    }

    /// The slot of a live listener's handle. Checked against the slot, since the map may keep the
    /// handles of dead listeners while shutdown ends the instances ([`ending`](Self::ending)).
    pub(crate) fn slot_of(&self, handle: u64) -> Option<u32> {
        let slot = *self.by_handle.get(&handle)?;
        self.live_slot(handle, slot)
    }

    /// Shutdown is ending every instance: from now on [`kill`](Self::kill) leaves a dead
    /// listener's handle in the handle map ([`slot_of`](Self::slot_of) checks the slot, so a
    /// stale handle finds nothing), and does not look up the keyed lists that hold it to count it
    /// dead there. A dispatch that meets dead listeners in a keyed list queues that list for
    /// compaction instead ([`Cursor`]), so an event walks each dead entry at most once before it
    /// goes, and what no dispatch meets goes with the table ([`take_slots`](Self::take_slots)).
    /// At a million live instances each of those hash lookups was a cache miss of its own.
    pub(crate) fn ending(&mut self) {
        self.ending = true;
    }

    /// Empties the table and returns its slots, for the caller to drop one by one, each drop
    /// contained (a handler's captures are user code): shutdown, once every instance has ended.
    pub(crate) fn take_slots(&mut self) -> Vec<Option<ListenerSlot<E>>> {
        #[cfg(test)]
        let (visited, walked) = (self.visited, self.walked.get());
        let slots = std::mem::take(&mut self.slots);
        *self = Self::default();
        #[cfg(test)]
        {
            self.visited = visited;
            self.walked.set(walked);
        }
        slots
    }

    /// Queues the list `(b, mode, key)` for compaction, if it exists and is not queued yet.
    fn queue(&mut self, b: u32, mode: Mode, key: IndexKey) {
        let Some(bucket) = self.buckets.get_mut(b as usize) else {
            return;
        };
        if let Some(list) = bucket.lists_mut(mode).get_mut(key) {
            if !list.queued {
                list.queued = true;
                self.dirty.push((b, mode, key));
            }
        }
    }

    /// `slot`, if it holds the live listener `handle`: [`slot_of`](Self::slot_of) for a caller
    /// that kept the slot [`insert`](Self::insert) returned, without the handle map. A handle is
    /// never reused, so a slot freed or reused by another listener since does not match.
    #[inline]
    pub(crate) fn live_slot(&self, handle: u64, slot: u32) -> Option<u32> {
        self.slots
            .get(slot as usize)?
            .as_ref()
            .filter(|l| l.alive && l.handle == handle)
            .map(|_| slot)
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
        match &l.body {
            Body::Expr { expr, .. } => self.held.sub(expr.held()),
            Body::Query(q) => self.windows.sub(q.run.held()),
            Body::Template { .. } => {}
        }
        if !self.ending {
            self.by_handle.remove(&l.handle);
        }
        let (mode, instance) = (l.mode, l.instance);
        // Still listed until compaction, but no longer `simple`: no bucket keeps it as its solo.
        if let Some(l) = &self.slots[slot as usize] {
            if l.regs.is_empty() {
                // No list will find it dead: compaction frees it from here.
                self.unlisted.push(slot);
            }
            for (b, key) in l.regs.iter().map(|r| (r.bucket, r.key())) {
                if key != IndexKey::Plain && self.ending {
                    // Not looked up (see `ending`); a keyed listener never leads a bucket's walk.
                    continue;
                }
                let bucket = &mut self.buckets[b as usize];
                if let Some(list) = bucket.lists_mut(mode).get_mut(key) {
                    if list.note_dead() {
                        self.dirty.push((b, mode, key));
                    }
                }
                Self::refresh_lead(&self.slots, bucket);
            }
        }
        self.last = None;
        Some(instance)
    }

    /// Sets `bucket.lead` from its ordinary lists and the slots they name: the one place that
    /// decides it (`insert`, `kill` and `compact` call it for every bucket they change).
    fn refresh_lead(slots: &[Option<ListenerSlot<E>>], bucket: &mut Bucket) {
        let lists = &bucket.ordinary;
        bucket.lead = match (&lists.plain.slots[..], lists.keyed.is_empty()) {
            _ if !lists.fields.is_empty() => Lead::Cursor,
            (&[only], true) => match slots[only as usize].as_ref() {
                Some(l) if l.simple => Lead::Solo(Solo {
                    slot: only,
                    instance: l.instance,
                }),
                _ => Lead::Alone(only),
            },
            (&[], false) => Lead::Keyed(None),
            (&[only], false) if lists.plain_first() => Lead::Keyed(Some(only)),
            _ => Lead::Cursor,
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
            if key != IndexKey::Plain && list.slots.is_empty() {
                lists.remove(key);
            }
            bucket.has_completed = !bucket.completed.is_empty();
            bucket.has_unmatched = !bucket.unmatched.is_empty();
            Self::refresh_lead(slots, bucket);
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

    /// List entries compaction has visited and listener slots cursors handed out so far (tests
    /// count bookkeeping work with it).
    #[cfg(test)]
    pub(crate) fn work(&self) -> u64 {
        self.visited + self.walked.get()
    }

    /// Whether compaction is pending.
    #[inline]
    pub(crate) fn needs_compaction(&self) -> bool {
        !self.dirty.is_empty() || !self.unlisted.is_empty()
    }
}

#[cfg(test)]
mod tests;
