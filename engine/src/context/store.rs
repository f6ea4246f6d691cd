//! The instance store: a context's monitor instances by id, their states apart from the rest.
//!
//! # Why two vectors
//! An event's handler needs one thing of its instance: the state. The rest of the record (the
//! `on_die` hook, the listeners it registered, its pool key, its subscriptions) is read when the
//! instance starts, registers, subscribes or ends. One vector of whole records put the state's
//! pointer in a record of over 100 bytes (most straddling two lines) and the state itself in a
//! box elsewhere: at a large key set, three cold lines per event where one would do. The store
//! keeps the states in a vector of their own, each a 64-byte line holding a small state in place
//! ([`State`]), and the records in another; an id indexes both.
//!
//! # The invariant
//! For every id, the state and the record are both present (a live instance) or both absent
//! (an ended one, its id free for reuse once [`release`](Instances::release)d). Only this module
//! writes either vector, and each of its writes keeps that.
//!
//! Owns [`Instances`]. May import `state`, `event`, `hint` and the context's `instances` (the
//! record).

use super::instances::Instance;
use crate::event::Event;
use crate::state::State;

/// Entries per chunk of a [`Chunked`] vector, as a power of two.
const CHUNK_BITS: u32 = 12;
const CHUNK: usize = 1 << CHUNK_BITS;

/// A vector in chunks of [`CHUNK`] entries that never move: the first grows as a `Vec` does
/// (a context with a few instances holds a few entries), each later one is allocated whole.
/// Growing copies nothing, and leaves no old buffer behind: a vector of a million entries that
/// doubled had copied about as many and freed buffers as large as itself, which the process
/// holds until its allocator returns them.
struct Chunked<T> {
    chunks: Vec<Vec<Option<T>>>,
}

impl<T> Chunked<T> {
    const fn new() -> Self {
        Self { chunks: Vec::new() }
    }

    /// Entries pushed.
    fn len(&self) -> usize {
        self.chunks
            .last()
            .map_or(0, |c| (self.chunks.len() - 1) * CHUNK + c.len())
    }

    #[inline(always)]
    fn get(&self, i: usize) -> Option<&Option<T>> {
        self.chunks.get(i >> CHUNK_BITS)?.get(i & (CHUNK - 1))
    }

    #[inline(always)]
    fn get_mut(&mut self, i: usize) -> Option<&mut Option<T>> {
        self.chunks
            .get_mut(i >> CHUNK_BITS)?
            .get_mut(i & (CHUNK - 1))
    }

    fn push(&mut self, v: T) {
        match self.chunks.last_mut() {
            Some(c) if c.len() < CHUNK => c.push(Some(v)),
            Some(_) => {
                let mut c = Vec::with_capacity(CHUNK);
                c.push(Some(v));
                self.chunks.push(c);
            }
            None => self.chunks.push(vec![Some(v)]),
        }
    }

    /// The first index from `from` on whose entry is `Some`, looking at no entry before `from`.
    fn next_some(&self, from: usize) -> Option<usize> {
        let (first, mut at) = (from >> CHUNK_BITS, from & (CHUNK - 1));
        for (k, c) in self.chunks.iter().enumerate().skip(first) {
            if let Some(i) = c.get(at..)?.iter().position(Option::is_some) {
                return Some((k << CHUNK_BITS) + at + i);
            }
            at = 0;
        }
        None
    }

    #[cfg(feature = "checkpoint")]
    fn iter_mut(&mut self) -> impl Iterator<Item = &mut Option<T>> {
        self.chunks.iter_mut().flatten()
    }
}

/// A state in the store: one cache line, aligned to it.
#[repr(C, align(64))]
struct Line(State);

/// A context's instances by id: records and states (see the module docs).
pub(super) struct Instances<E: Event> {
    records: Chunked<Instance<E>>,
    states: Chunked<Line>,
    /// Ids of ended instances, free for reuse.
    free: Vec<u32>,
    live: usize,
    /// One bit per id: whether the state is boxed (too large to be held in place). The
    /// look-ahead asks it before it reads a state's line for the box's address: an eighth of a
    /// byte per instance, in cache where the states are not.
    boxed: Vec<u64>,
}

impl<E: Event> Default for Instances<E> {
    fn default() -> Self {
        Self {
            records: Chunked::new(),
            states: Chunked::new(),
            free: Vec::new(),
            live: 0,
            boxed: Vec::new(),
        }
    }
}

impl<E: Event> Instances<E> {
    /// Adds a live instance under a free id (the last one released) or a new one; its id.
    pub(super) fn insert(&mut self, record: Instance<E>, state: State) -> u32 {
        self.live += 1;
        let boxed = state.boxed_ptr().is_some();
        let id = match self.free.pop() {
            Some(id) => {
                let (r, s) = (
                    self.records.get_mut(id as usize),
                    self.states.get_mut(id as usize),
                );
                if let (Some(r), Some(s)) = (r, s) {
                    (*r, *s) = (Some(record), Some(Line(state)));
                }
                id
            }
            None => {
                self.records.push(record);
                self.states.push(Line(state));
                (self.records.len() - 1) as u32
            }
        };
        let (word, bit) = (id as usize / 64, 1u64 << (id % 64));
        if word >= self.boxed.len() {
            self.boxed.resize(word + 1, 0);
        }
        if boxed {
            self.boxed[word] |= bit;
        } else {
            self.boxed[word] &= !bit;
        }
        id
    }

    /// Where the boxed state of instance `id` lives, if `id` is live and its state is boxed;
    /// reads the state's line only then.
    #[inline]
    pub(super) fn boxed_state(&self, id: u32) -> Option<*const u8> {
        let word = self.boxed.get(id as usize / 64)?;
        if word & 1 << (id % 64) == 0 {
            return None;
        }
        self.state(id)?.boxed_ptr()
    }

    /// Takes instance `id` out (it ends); its id stays taken until [`release`](Self::release).
    pub(super) fn take(&mut self, id: u32) -> Option<(Instance<E>, State)> {
        let record = self.records.get_mut(id as usize)?.take()?;
        let state = self.states.get_mut(id as usize)?.take();
        debug_assert!(state.is_some(), "a live record without its state");
        self.live -= 1;
        Some((record, state?.0))
    }

    /// Makes the id of an ended instance free for reuse.
    pub(super) fn release(&mut self, id: u32) {
        debug_assert!(!self.is_live(id), "releasing a live id");
        self.free.push(id);
    }

    /// Live instances.
    pub(super) fn live(&self) -> usize {
        self.live
    }

    /// Ids ever used (live or not): the bound of [`next_live`](Self::next_live).
    #[cfg(test)]
    pub(super) fn ids(&self) -> usize {
        self.states.len()
    }

    /// Whether instance `id` is live.
    #[inline]
    pub(super) fn is_live(&self, id: u32) -> bool {
        matches!(self.states.get(id as usize), Some(Some(_)))
    }

    /// The first live id from `from` on, if any.
    pub(super) fn next_live(&self, from: usize) -> Option<usize> {
        self.states.next_some(from)
    }

    /// Whether live instance `id` counts a live listener: what a handler about to run on its
    /// state may assume (its listener is alive; the handler's operations, applied after it
    /// returns, are what may change that). Reads the record: for debug assertions.
    pub(super) fn listening(&self, id: u32) -> bool {
        self.record(id).is_some_and(|r| r.live_listeners > 0)
    }

    /// The state of live instance `id`: what a handler needs (one line).
    #[inline(always)]
    pub(super) fn state_mut(&mut self, id: u32) -> Option<&mut State> {
        Some(&mut self.states.get_mut(id as usize)?.as_mut()?.0)
    }

    /// Prefetches the line of instance `id`'s state (any id: nothing is read).
    #[inline]
    pub(super) fn prefetch_state(&self, id: u32) {
        if let Some(s) = self.states.get(id as usize) {
            crate::hint::prefetch(s);
        }
    }

    /// The state of live instance `id`, to read.
    #[inline]
    pub(super) fn state(&self, id: u32) -> Option<&State> {
        Some(&self.states.get(id as usize)?.as_ref()?.0)
    }

    /// The record of live instance `id`.
    #[inline]
    pub(super) fn record(&self, id: u32) -> Option<&Instance<E>> {
        self.records.get(id as usize)?.as_ref()
    }

    /// The record of live instance `id`, to change.
    #[inline]
    pub(super) fn record_mut(&mut self, id: u32) -> Option<&mut Instance<E>> {
        self.records.get_mut(id as usize)?.as_mut()
    }

    /// Every live instance with its id, record and state, in id order.
    #[cfg(feature = "checkpoint")]
    pub(super) fn iter_mut(&mut self) -> impl Iterator<Item = (u32, &mut Instance<E>, &mut State)> {
        self.records
            .iter_mut()
            .zip(self.states.iter_mut())
            .enumerate()
            .filter_map(|(id, (r, s))| Some((id as u32, r.as_mut()?, &mut s.as_mut()?.0)))
    }
}

#[cfg(test)]
mod tests {
    use super::{Chunked, Instances, CHUNK};
    use crate::context::instances::Instance;
    use crate::entry::NO_INSTANCE;
    use crate::state::State;

    #[derive(Clone, Debug)]
    struct Ev;
    impl crate::Event for Ev {
        type Kind = ();
        fn kind(&self) {}
    }

    fn record() -> Instance<Ev> {
        Instance {
            on_die: Box::new(|_, _, _| {}),
            live_listeners: 0,
            listeners: smallvec::SmallVec::new(),
            owner: NO_INSTANCE,
            key: 0,
            subscriptions: None,
        }
    }

    // The look-ahead's hint (R2.2: it changes no order, only where it reads): a boxed state's
    // address for the ids whose state is boxed, none for one held in place or an ended id, also
    // after an id is reused by a state of the other kind.
    // A kept state is one line, aligned, and its `Option` costs nothing (the niche of the
    // state's table pointer): what the look-ahead's one prefetch per state relies on.
    #[test]
    fn a_kept_state_is_one_aligned_line() {
        use super::Line;
        assert_eq!(std::mem::size_of::<Option<Line>>(), 64);
        assert_eq!(std::mem::align_of::<Option<Line>>(), 64);
    }

    #[test]
    fn r2_2_the_store_names_boxed_states_only() {
        let mut s = Instances::<Ev>::default();
        let small = s.insert(record(), State::new(7_u64));
        let large = s.insert(record(), State::new([7_u64; 16]));
        assert!(s.boxed_state(small).is_none());
        let p = s.boxed_state(large).expect("a boxed state");
        assert_eq!(p, s.state(large).and_then(State::boxed_ptr).unwrap());
        assert!(s.take(large).is_some());
        assert!(s.boxed_state(large).is_none(), "an ended id");
        s.release(large);
        let again = s.insert(record(), State::new(1_u8));
        assert_eq!(again, large, "the id is reused");
        assert!(s.boxed_state(again).is_none(), "now held in place");
        assert!(s.take(small).is_some());
        s.release(small);
        let boxed_again = s.insert(record(), State::new([0_u64; 9]));
        assert_eq!(boxed_again, small);
        assert!(s.boxed_state(boxed_again).is_some());
        assert_eq!((s.live(), s.boxed_state(99)), (2, None));
    }

    // R8.1 (shutdown linear in live instances) rests on `next_some` looking at no entry before
    // `from`, and on ids staying where they were put as the vector grows across chunks.
    #[test]
    fn r8_1_a_chunked_vector_keeps_its_entries_and_finds_the_next_from_any_place() {
        let n = 2 * CHUNK + 5;
        let mut v = Chunked::new();
        for i in 0..n {
            v.push(i);
        }
        assert_eq!(v.len(), n);
        assert_eq!(v.chunks.len(), 3);
        assert!((0..n).all(|i| v.get(i) == Some(&Some(i))));
        assert!(v.get(n).is_none());
        for i in (0..n).filter(|i| i % 7 != 0 || (CHUNK - 3..CHUNK + 9).contains(i)) {
            if let Some(e) = v.get_mut(i) {
                *e = None;
            }
        }
        let expected =
            |from: usize| (from..n).find(|i| i % 7 == 0 && !(CHUNK - 3..CHUNK + 9).contains(i));
        for from in [
            0,
            1,
            7,
            CHUNK - 4,
            CHUNK - 1,
            CHUNK,
            CHUNK + 8,
            2 * CHUNK,
            n - 1,
            n,
            n + 3,
        ] {
            assert_eq!(v.next_some(from), expected(from), "from {from}");
        }
        assert_eq!(
            v.chunks.iter().flatten().flatten().count(),
            (0..n).filter(|&i| expected(i) == Some(i)).count()
        );
    }
}
