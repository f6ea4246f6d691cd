//! How dispatch reads the listener table: the [`KindView`] of an event's kind, and the
//! [`Cursor`] that walks a bucket's lists for one event, merging the unkeyed list with the one
//! keyed on the event's key and those of its indexed fields in registration order (R6.4, R6.10)
//! and stopping at the listeners present when the dispatch started (R6.5).
//!
//! Owns the cursor (its fields are its own) and the look-ahead's reads of the table (an expression
//! listener's hints among them). May import `event`, `entry`, `expr`, `pattern` and `hint`.

use crate::entry::Mode;
use crate::event::Event;
use crate::expr::ExprListener;
use crate::pattern::IndexKey;

use super::{Body, Lead, List, ListenerSlot, ListenerTable, Lists};

/// The most field lists a walk merges (R6.10): a kind's lists index at most this many fields;
/// a template constraining another field by equality is listed unkeyed and checked as data.
pub(crate) const FIELD_LISTS: usize = 3;

/// Prefetches the head of `expr`'s program if the program is its own (see
/// [`ExprListener::program_hint`]); whether it did.
#[inline]
fn hint_own_program<E: Event>(expr: &ExprListener<E>) -> bool {
    let Some((p, len)) = expr.program_hint() else {
        return false;
    };
    crate::hint::prefetch_range(p, len);
    true
}

/// The first `len` (at most [`KEYED_COPY`]) slots of `list`, each of the four places on its own,
/// not a loop over `len`: LLVM turns a copy of a length known only here (a loop, or
/// `copy_from_slice`) into a call to `memcpy`, which callgrind of `workload/spike` counted at 14
/// instructions per event.
#[inline(always)]
fn copy_keyed(list: &List, len: usize) -> [u32; KEYED_COPY] {
    let from = &list.slots[..len];
    std::array::from_fn(|n| from.get(n).copied().unwrap_or(0))
}

/// The longest keyed list a cursor copies when it starts (see [`Cursor::keyed`]): a key's list
/// usually names a few listeners (one instance's per-key listeners).
pub(crate) const KEYED_COPY: usize = 4;

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
    /// The keyed list's first `keyed_len` slots, copied when the walk starts if there are at
    /// most [`KEYED_COPY`]: then no step looks the key up again. The copy stays exact while the
    /// walk lasts: a list only grows at its end during a dispatch (past `keyed_len`), and a
    /// listener that ends stays in it, marked dead, until compaction after the dispatch.
    keyed: [u32; KEYED_COPY],
    /// Whether `keyed` holds the copy.
    copied: bool,
    /// Whether every unkeyed listener of the walk was registered before the first keyed one (a
    /// pool dispatcher's gate, then the key's instance's listeners: the usual case for a keyed
    /// kind in a pool member; [`Lists::plain_first`]): then the walk is the unkeyed list, then
    /// the keyed one, with no comparison of handles per step.
    plain_first: bool,
    /// How many of `fields` the walk merges (0 for a kind without field lists: the usual case).
    nf: u8,
    /// The lists of the event's indexed fields: `(field, value, next position, length taken)`.
    fields: [(u32, u64, u32, u32); FIELD_LISTS],
    /// Which of the keyed list (bit 0) and the field lists (bit 1 + n) the walk met a dead
    /// listener in while the table is [`ending`](ListenerTable::ending), which does not count
    /// them there.
    met_dead: u8,
}

impl Cursor {
    /// The next listener slot, in registration order, or `None` at the end.
    #[inline(always)]
    pub(crate) fn next<E: Event>(&mut self, table: &ListenerTable<E>) -> Option<u32> {
        #[cfg(test)]
        table.walked.set(table.walked.get() + 1);
        if self.nf == 0 {
            if self.j >= self.keyed_len || (self.plain_first && self.i < self.plain_len) {
                // The usual case for an unkeyed kind: no keyed or field listener to merge with;
                // or every unkeyed listener comes before the keyed ones.
                if self.i >= self.plain_len {
                    return None;
                }
                let lists = table.buckets[self.bucket as usize].lists(self.mode);
                self.i += 1;
                return Some(lists.plain.slots[self.i - 1]);
            }
            if self.i >= self.plain_len && self.copied {
                // The usual case for a keyed kind: the key's listeners alone, from the copy.
                let q = self.keyed[self.j];
                self.j += 1;
                self.note_dead(table, q);
                return Some(q);
            }
        }
        let lists = table.buckets[self.bucket as usize].lists(self.mode);
        self.next_merged(table, lists)
    }

    /// The keyed list's slot at position `j`, if within the walk.
    #[inline(always)]
    fn keyed_at(&self, lists: &Lists, j: usize) -> Option<u32> {
        if j >= self.keyed_len {
            None
        } else if self.copied {
            Some(self.keyed[j])
        } else {
            lists
                .keyed
                .get(self.key)
                .and_then(|v| v.slots.get(j).copied())
        }
    }

    /// Notes a dead listener met in the keyed list while the table is ending.
    #[inline(always)]
    fn note_dead<E: Event>(&mut self, table: &ListenerTable<E>, q: u32) {
        if table.ending && !table.slot(q).is_some_and(|l| l.alive) {
            self.met_dead |= 1;
        }
    }

    /// [`next`](Self::next) while keyed listeners remain: the earlier registered of the two heads.
    #[inline(never)]
    fn next_merged<E: Event>(&mut self, table: &ListenerTable<E>, lists: &Lists) -> Option<u32> {
        if self.nf > 0 {
            return self.next_of_many(table, lists);
        }
        let keyed = self.keyed_at(lists, self.j);
        let plain = (self.i < self.plain_len).then(|| lists.plain.slots[self.i]);
        match (plain, keyed) {
            // A listener listed in both (an expression with an unkeyed and a keyed template of
            // this kind) is offered the event once.
            (Some(p), Some(q)) if p == q => {
                self.i += 1;
                self.j += 1;
                self.note_dead(table, q);
                Some(q)
            }
            (Some(p), Some(q)) if table.handle_at(p) < table.handle_at(q) => {
                self.i += 1;
                Some(p)
            }
            (_, Some(q)) => {
                self.j += 1;
                self.note_dead(table, q);
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

    /// [`next`](Self::next) with field lists to merge too (R6.10): the earliest registered of the
    /// lists' heads (registration order is handle order).
    #[cold]
    fn next_of_many<E: Event>(&mut self, table: &ListenerTable<E>, lists: &Lists) -> Option<u32> {
        let mut best: Option<(u64, u32)> = None;
        let mut offer = |slot: u32| {
            let h = table.handle_at(slot);
            if best.is_none_or(|(b, _)| h < b) {
                best = Some((h, slot));
            }
        };
        if self.i < self.plain_len {
            offer(lists.plain.slots[self.i]);
        }
        if self.j < self.keyed_len {
            match self.keyed_at(lists, self.j) {
                Some(q) => offer(q),
                None => self.j = self.keyed_len,
            }
        }
        for n in 0..self.nf as usize {
            let (f, v, pos, len) = &mut self.fields[n];
            if *pos < *len {
                match lists
                    .fields
                    .get(&(*f, *v))
                    .and_then(|l| l.slots.get(*pos as usize))
                {
                    Some(&q) => offer(q),
                    None => *pos = *len,
                }
            }
        }
        let (_, slot) = best?;
        // Every list whose head is that listener moves on: one listed in several of them (an
        // expression with templates of this kind on different keys or fields) is offered the
        // event once.
        let mut dead_bit = 0;
        if self.i < self.plain_len && lists.plain.slots[self.i] == slot {
            self.i += 1;
        }
        if self.j < self.keyed_len && self.keyed_at(lists, self.j) == Some(slot) {
            self.j += 1;
            dead_bit |= 1;
        }
        for n in 0..self.nf as usize {
            let (f, v, pos, len) = &mut self.fields[n];
            if *pos < *len
                && lists
                    .fields
                    .get(&(*f, *v))
                    .and_then(|l| l.slots.get(*pos as usize))
                    == Some(&slot)
            {
                *pos += 1;
                dead_bit |= 2 << n;
            }
        }
        if table.ending && !table.slot(slot).is_some_and(|l| l.alive) {
            self.met_dead |= dead_bit;
        }
        Some(slot)
    }
}

/// What dispatching an event of a kind needs to know first, copied out of the kind's [`Bucket`](super::lists::Bucket).
#[derive(Clone, Copy, Debug)]
pub(crate) struct KindView {
    pub(crate) bucket: u32,
    pub(crate) lead: Lead,
    pub(crate) has_completed: bool,
    pub(crate) has_unmatched: bool,
}

impl<E: Event> ListenerTable<E> {
    /// The bucket of `kind` if it has keyed ordinary listeners and no solo listener: the one whose
    /// keyed lists a look-ahead hints (see `context::ahead`).
    #[inline]
    pub(crate) fn keyed_bucket(&mut self, kind: &E::Kind) -> Option<u32> {
        let view = self.view_of(kind)?;
        let keyed = !self.buckets[view.bucket as usize].ordinary.keyed.is_empty();
        // (A bucket with keyed listeners has no solo.)
        keyed.then_some(view.bucket)
    }

    /// Prefetches the line that a lookup of `key` among bucket `b`'s keyed ordinary lists reads
    /// first, and the next one.
    #[inline]
    pub(crate) fn prefetch_keyed(&self, b: u32, key: u64) {
        if let Some(bucket) = self.buckets.get(b as usize) {
            let p = bucket.ordinary.keyed.slot_hint(key);
            crate::hint::prefetch(p);
            crate::hint::prefetch(p.wrapping_add(64));
        }
    }

    /// The ordinary listeners listed under `key` in bucket `b` (empty if none).
    #[inline]
    pub(crate) fn keyed_slots(&self, b: u32, key: u64) -> &[u32] {
        match self.buckets.get(b as usize) {
            Some(bucket) => bucket.ordinary.keyed.get(key).map_or(&[], |l| &l.slots[..]),
            None => &[],
        }
    }

    /// The ordinary listeners of bucket `b` listed under `key`, copied (`[..n]` of the array),
    /// for a dispatch whose bucket's [`Lead`] is `Keyed`; `None` if there are more than a cursor
    /// copies (the cursor walks them), or while the table is [`ending`](Self::ending) (a walk
    /// counts the dead it meets then). A listener registered after the copy is not in it (R6.5).
    #[inline(always)]
    pub(crate) fn keyed_walk(
        &self,
        b: usize,
        key: Option<u64>,
    ) -> Option<([u32; KEYED_COPY], usize)> {
        if self.ending {
            return None;
        }
        let list = key.and_then(|k| self.buckets[b].ordinary.keyed.get(k));
        match list {
            Some(list) if list.slots.len() <= KEYED_COPY => {
                let n = list.slots.len();
                Some((copy_keyed(list, n), n))
            }
            Some(_) => None,
            None => Some(([0; KEYED_COPY], 0)),
        }
    }

    /// Prefetches the lines of the listener in `slot`.
    #[inline]
    pub(crate) fn prefetch_slot(&self, slot: u32) {
        if let Some(l) = self.slots.get(slot as usize) {
            crate::hint::prefetch_both(l);
        }
    }

    /// The expression listener in `slot`, if it holds one.
    #[inline]
    fn expr_at(&self, slot: u32) -> Option<&ExprListener<E>> {
        match self.slots.get(slot as usize)? {
            Some(ListenerSlot {
                body: Body::Expr { expr, .. },
                ..
            }) => Some(expr),
            _ => None,
        }
    }

    /// Prefetches the head of the program of the expression listener in `slot` if the program
    /// is its own (what testing an event reads first: cold, unlike a shared one). Whether it did.
    #[inline]
    pub(crate) fn prefetch_program(&self, slot: u32) -> bool {
        self.expr_at(slot).is_some_and(hint_own_program)
    }

    /// Prefetches the matches in progress of the expression listener in `slot` (its first two),
    /// and the head of its program if the program is its own (what a clock stimulus reads).
    #[inline]
    pub(crate) fn prefetch_matches(&self, slot: u32) {
        if let Some(expr) = self.expr_at(slot) {
            let (p, len) = expr.matches_hint();
            crate::hint::prefetch_range(p, len);
            hint_own_program(expr);
        }
    }

    /// Prefetches the template that testing an event reads first, of the expression listener
    /// in `slot` (reads its program's head: call where [`prefetch_program`](Self::prefetch_program)
    /// asked for it).
    #[inline]
    pub(crate) fn prefetch_template(&self, slot: u32) {
        if let Some((p, len)) = self.expr_at(slot).and_then(ExprListener::template_hint) {
            crate::hint::prefetch_range(p, len);
        }
    }

    /// The instance of the listener in `slot`, where its handler's state is, and whether it
    /// prefetched the head of the listener's program ([`prefetch_program`](Self::prefetch_program)),
    /// for hints.
    #[inline]
    pub(crate) fn slot_hint(&self, slot: u32) -> Option<(u32, *const u8, bool)> {
        let l = self.slots.get(slot as usize)?.as_ref()?;
        let (at, own) = match &l.body {
            Body::Template { handler, .. } => (&**handler as *const _ as *const u8, false),
            Body::Expr { expr, .. } => (expr.hint(), hint_own_program(expr)),
            Body::Query(_) => (std::ptr::null(), false),
        };
        Some((l.instance, at, own))
    }

    /// A cursor over the listeners of bucket `b` in `mode`'s lists that `event` is offered to:
    /// the unkeyed ones, those keyed on its key and those listed under the values of its indexed
    /// fields, merged in registration order (R6.4, R6.10), and only those whose handle is below
    /// `first_new` (`u64::MAX`: all of them), that is those present when its dispatch started
    /// (R6.5). The event's `key()` and `field()` run only if some listener of the lists is keyed,
    /// or indexed on that field.
    #[inline(always)]
    pub(crate) fn cursor(&self, b: usize, mode: Mode, event: &E, first_new: u64) -> Cursor {
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
        let mut keyed = [0; KEYED_COPY];
        let mut copied = false;
        let (key, keyed_len) = match lists.keyed.is_empty() {
            true => (0, 0),
            false => match event.key() {
                Some(k) => match lists.keyed.get(k) {
                    Some(list) => {
                        let len = cut(list);
                        if len <= KEYED_COPY {
                            keyed = copy_keyed(list, len);
                            copied = true;
                        }
                        (k, len)
                    }
                    None => (k, 0),
                },
                None => (0, 0),
            },
        };
        let plain_len = cut(&lists.plain);
        // Known from the lists, not from the slots: reading the key's first slot here to compare
        // handles waited on its line (the cold one of a large key set) before any listener ran.
        let plain_first = plain_len > 0 && keyed_len > 0 && lists.plain_first();
        if plain_first && copied {
            // The unkeyed listeners (a pool's gate) run first: the key's first slot, cold at a
            // large key set, arrives meanwhile.
            self.prefetch_slot(keyed[0]);
        }
        let mut c = Cursor {
            bucket: b as u32,
            mode,
            key,
            i: 0,
            plain_len,
            j: 0,
            keyed_len,
            keyed,
            copied,
            plain_first,
            nf: 0,
            fields: [(0, 0, 0, 0); FIELD_LISTS],
            met_dead: 0,
        };
        if !lists.field_ids.is_empty() {
            c.add_fields(lists, event, &cut);
        }
        c
    }

    /// After a walk: queues the lists `cursor` walked for compaction where the walk met dead
    /// listeners (see [`ending`](Self::ending)).
    #[inline(always)]
    pub(crate) fn walked(&mut self, cursor: &Cursor) {
        if cursor.met_dead != 0 {
            self.walked_dead(cursor);
        }
    }

    #[cold]
    #[inline(never)]
    fn walked_dead(&mut self, cursor: &Cursor) {
        if cursor.met_dead & 1 != 0 {
            self.queue(cursor.bucket, cursor.mode, IndexKey::Key(cursor.key));
        }
        for n in 0..cursor.nf as usize {
            if cursor.met_dead & (2 << n) != 0 {
                let (f, v, _, _) = cursor.fields[n];
                self.queue(cursor.bucket, cursor.mode, IndexKey::Field(f, v));
            }
        }
    }
}

impl Cursor {
    /// Adds the lists of `event`'s indexed fields (R6.10).
    #[inline(never)]
    fn add_fields<E: Event>(&mut self, lists: &Lists, event: &E, cut: &dyn Fn(&List) -> usize) {
        for &(f, _) in lists.field_ids.iter().take(FIELD_LISTS) {
            let Some(v) = event.field(f as usize) else {
                continue;
            };
            let len = lists.fields.get(&(f, v)).map_or(0, cut);
            if len > 0 {
                self.fields[self.nf as usize] = (f, v, 0, len as u32);
                self.nf += 1;
            }
        }
    }
}
