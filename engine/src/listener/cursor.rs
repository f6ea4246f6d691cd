//! How dispatch reads the listener table: the [`KindView`] of an event's kind, and the
//! [`Cursor`] that walks a bucket's lists for one event, merging the unkeyed list with the one
//! keyed on the event's key in registration order (R6.4) and stopping at the listeners present
//! when the dispatch started (R6.5).
//!
//! Owns the cursor (its fields are its own). May import `event` and `entry`.

use crate::entry::Mode;
use crate::event::Event;

use super::{List, ListenerTable, Lists, Solo};

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
    /// Whether the walk met a dead listener in the keyed list while the table is
    /// [`ending`](ListenerTable::ending), which does not count them there.
    met_dead: bool,
}

impl Cursor {
    /// The next listener slot, in registration order, or `None` at the end.
    #[inline(always)]
    pub(crate) fn next<E: Event>(&mut self, table: &ListenerTable<E>) -> Option<u32> {
        #[cfg(test)]
        table.walked.set(table.walked.get() + 1);
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
                if table.ending && !table.slot(q).is_some_and(|l| l.alive) {
                    self.met_dead = true;
                }
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

/// What dispatching an event of a kind needs to know first, copied out of the kind's [`Bucket`](super::lists::Bucket).
#[derive(Clone, Copy, Debug)]
pub(crate) struct KindView {
    pub(crate) bucket: u32,
    pub(crate) solo: Option<Solo>,
    pub(crate) has_completed: bool,
}

impl<E: Event> ListenerTable<E> {
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
            met_dead: false,
        }
    }

    /// After a walk: queues the keyed list `cursor` walked for compaction if the walk met dead
    /// listeners there (see [`ending`](Self::ending)).
    #[inline]
    pub(crate) fn walked(&mut self, cursor: &Cursor) {
        if cursor.met_dead {
            self.queue(cursor.bucket, cursor.mode, Some(cursor.key));
        }
    }
}
