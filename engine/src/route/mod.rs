//! The route stack: the front of a context's queue (SPEC §3).
//!
//! Owned by the context's thread: a plain `Vec` and two one-event slots, no atomics, no locks, and no
//! allocation once it has grown to the deepest route storm seen (R3.4). Routed events never count against the inbox's
//! capacity and are never refused (R3.5). After a storm deeper than the context keeps room for, the
//! context gives the memory back once the stack is empty ([`RouteStack::shrink_when_empty`]), so
//! the stack's memory does not stay at its peak.
//!
//! # Order (R3.2)
//! A plain push/pop stack would process the last-routed sibling first. Instead, before an event is
//! dispatched the loop records the stack height (`mark`); the event's listeners push what they route
//! above it, in routing order; once they have all run, [`RouteStack::seal`] reverses the segment above
//! the mark, so that the first-routed event is on top. Popping then visits the tree of routes depth
//! first with siblings in routing order, and everything routed from an event before anything that was
//! pending when it started. (The very first event of each batch skips the stack: it waits in the
//! *front* slot, which is taken before the stack's top; see [`RouteStack`] for why.)
//!
//! A `completed` marker (R6.7) is pushed *before* sealing, so that it ends up at the bottom of the
//! event's segment and is popped only after every event routed from it, transitively.
//!
//! Owns the route stack. A leaf: imports nothing from the engine. Private unless the `internals`
//! feature exposes it.

use std::mem::MaybeUninit;
use std::ptr::NonNull;

/// An entry of the route stack.
#[derive(Debug)]
pub enum Routed<E> {
    /// An event to dispatch.
    Event(E),
    /// Run the `completed` listeners of this event (everything it routed has been processed).
    /// Markers pop in the reverse order of their pushes (a child's marker lies above its parent's,
    /// and a sibling's segment is drained before the next sibling runs), so a caller can keep data
    /// for each marker on a stack of its own.
    Completed(E),
}

/// What [`RouteStack::take`] hands out next.
#[derive(Debug)]
pub enum Taken<E> {
    /// An event to dispatch, in the stack's *current* slot. The pointer is valid for reads until
    /// the next [`RouteStack::take`], [`RouteStack::drop_current`] or
    /// [`RouteStack::complete_current`]; pushes never write that slot.
    Event(NonNull<E>),
    /// A `completed` marker.
    Completed(E),
}

/// The LIFO of routed events of one context.
///
/// # Dispatching in place
/// Besides the stack proper (a `Vec` of [`Routed`] entries) it has two one-event slots in a heap
/// block of their own: the *current* slot holds the event being dispatched, the *front* slot the
/// first event its listeners route. The front is the next entry in processing order (R3.2), so
/// [`take`](Self::take) moves the front into the current role by swapping the two pointers, and
/// the listeners of the next event read the fields their predecessor wrote right where it wrote
/// them. The common chain (each event routes one) therefore never copies an event. Copying does
/// more than move bytes: an event written field by field and read back at once as one wider block
/// defeats the processor's store-to-load forwarding, a stall of a dozen cycles or more per event,
/// which `scripts/callgrind.sh` cannot see but `route/dispatch`'s timings can (the figures are in
/// `harness/BENCHMARKS.md`, "Route stack: dispatching in place"). Events routed after the first of
/// a batch go on the stack as before, and are copied into the current slot when popped.
///
/// The slots live outside the `RouteStack` value, so the `&E` a listener receives (from the current
/// slot) is not derived from the `&mut` that the listener's `Scope` holds on the stack; a push
/// writes only the front slot or the `Vec`, never the current slot.
pub struct RouteStack<E> {
    entries: Vec<Routed<E>>,
    /// The slot of the event being dispatched.
    current: NonNull<E>,
    /// The slot of the next event, the first one routed since the current one was taken.
    front: NonNull<E>,
    /// Whether `front` holds an event.
    front_full: bool,
    /// The largest number of entries held at once, not counting the event being dispatched (R9.1).
    max_depth: usize,
    /// Events whose `Drop` panicked in `drop_current`, not yet taken by `take_drop_panics`.
    drop_panics: u64,
}

// SAFETY: the slots are owned by the stack (allocated in `with_capacity`, freed in `drop`) and
// reached only through it, like the `Vec`'s buffer; sending the stack sends the events it holds.
unsafe impl<E: Send> Send for RouteStack<E> {}

impl<E> std::fmt::Debug for RouteStack<E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RouteStack")
            .field("len", &self.len())
            .field("max_depth", &self.max_depth)
            .finish_non_exhaustive()
    }
}

impl<E> Default for RouteStack<E> {
    fn default() -> Self {
        Self::with_capacity(0)
    }
}

impl<E> RouteStack<E> {
    /// An empty stack with room for `capacity` entries (at least one) before it first grows.
    pub fn with_capacity(capacity: usize) -> Self {
        let slots: Box<[MaybeUninit<E>; 2]> =
            Box::new([MaybeUninit::uninit(), MaybeUninit::uninit()]);
        let base = Box::into_raw(slots).cast::<E>();
        // SAFETY: `Box::into_raw` is never null, and `base + 1` is the second element of the
        // two-element array it points to.
        let (current, front) = unsafe {
            (
                NonNull::new_unchecked(base),
                NonNull::new_unchecked(base.add(1)),
            )
        };
        Self {
            entries: Vec::with_capacity(capacity.max(1)),
            current,
            front,
            front_full: false,
            max_depth: 0,
            drop_panics: 0,
        }
    }

    /// The current height, to pass to [`seal`](Self::seal) after the event's listeners ran.
    #[inline]
    pub fn mark(&self) -> usize {
        self.entries.len()
    }

    /// Routes an event: into the front slot if it is the first of its batch, else on the stack
    /// above the current mark.
    ///
    /// Both branches store the event's fields straight from the registers the handler built them
    /// in, and nothing is called before the store (see `append`). Passing the event
    /// to an out-of-line push instead makes the compiler build it in a stack temporary and copy it
    /// with wider loads than the stores that wrote it: a failed store-to-load forwarding on every
    /// routed event, which was the largest single cost of `route/dispatch` while it happened.
    #[inline]
    pub fn push(&mut self, event: E) {
        if !self.front_full {
            // SAFETY: the front slot is empty and never the current slot; nothing borrows it.
            unsafe { self.front.as_ptr().write(event) };
            self.front_full = true;
        } else {
            self.append(Routed::Event(event));
        }
    }

    /// Appends an entry to the `Vec`. The `Vec` always has room for one more entry (it starts with
    /// at least one place, and grows right after a push that fills it), so the entry is written
    /// before anything is called, and the rare growth is a cold call with nothing to keep alive
    /// across it.
    #[inline(always)]
    fn append(&mut self, entry: Routed<E>) {
        let len = self.entries.len();
        self.entries.spare_capacity_mut()[0].write(entry);
        // SAFETY: the entry at `len` was just initialised, within the capacity.
        unsafe { self.entries.set_len(len + 1) };
        if self.entries.len() == self.entries.capacity() {
            self.grow();
        }
    }

    /// Keeps one free place on the `Vec` (cold: the stack grows only up to its deepest storm,
    /// R3.4).
    #[inline(never)]
    #[cold]
    fn grow(&mut self) {
        self.entries.reserve(1);
    }

    /// Routes the first event of a run to completion (an inbox entry's event) onto an empty stack:
    /// a batch of one, which needs no mark and no seal.
    #[inline]
    pub fn push_root(&mut self, event: E) {
        debug_assert!(
            self.is_empty(),
            "a root pushed while routed events are pending"
        );
        self.push(event);
        self.max_depth = self.max_depth.max(1);
    }

    /// Counts a root dispatched without entering the stack (see `Context::run_root`) in the max
    /// depth, as [`push_root`](Self::push_root) would have: the event was the one entry pending.
    #[inline]
    pub fn note_root(&mut self) {
        debug_assert!(
            self.is_empty(),
            "a root noted while routed events are pending"
        );
        self.max_depth = self.max_depth.max(1);
    }

    /// Puts a `completed` marker for `event`, an event dispatched outside the stack (a root, see
    /// [`note_root`](Self::note_root)), on the stack: [`complete_current`](Self::complete_current)
    /// for an event that was never in the current slot. Call before [`seal`](Self::seal).
    #[inline]
    pub fn push_completed(&mut self, event: E) {
        self.append(Routed::Completed(event));
    }

    /// Moves the event of the current slot into a `completed` marker on the stack (call before
    /// [`seal`](Self::seal), after its dispatch, instead of [`drop_current`](Self::drop_current)).
    ///
    /// # Safety
    /// The current slot holds an event: the last [`take`](Self::take) returned
    /// [`Taken::Event`], and neither this nor `drop_current` was called since.
    #[inline]
    pub unsafe fn complete_current(&mut self) {
        // SAFETY: the caller guarantees the slot holds an event; it is moved out and the slot is
        // treated as empty from here on.
        let event = unsafe { self.current.as_ptr().read() };
        self.append(Routed::Completed(event));
    }

    /// Drops the event of the current slot once its dispatch is over. A panic in the event's
    /// `Drop` is caught and counted ([`take_drop_panics`](Self::take_drop_panics)): the slot
    /// counts as empty either way (what the drop glue had not dropped yet when it panicked was
    /// dropped while unwinding, or is leaked). For an event type without drop glue this is
    /// nothing at all.
    ///
    /// # Safety
    /// As for [`complete_current`](Self::complete_current).
    #[inline]
    pub unsafe fn drop_current(&mut self) {
        if !std::mem::needs_drop::<E>() {
            return;
        }
        let current = self.current;
        // SAFETY: the caller guarantees the slot holds an event, dropped once: whether the drop
        // returns or unwinds, the slot is not dropped again.
        let dropped = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| unsafe {
            current.as_ptr().drop_in_place()
        }));
        if dropped.is_err() {
            self.drop_panicked();
        }
    }

    #[cold]
    #[inline(never)]
    fn drop_panicked(&mut self) {
        self.drop_panics += 1;
    }

    /// How many events' `Drop` panicked in [`drop_current`](Self::drop_current) since the last
    /// call.
    pub fn take_drop_panics(&mut self) -> u64 {
        std::mem::take(&mut self.drop_panics)
    }

    /// Puts everything pushed since `mark` into routing order for popping: first-pushed on top.
    /// (The first event of the batch, in the front slot, comes before all of them.)
    #[inline]
    pub fn seal(&mut self, mark: usize) {
        debug_assert!(mark <= self.entries.len(), "seal mark above the stack");
        let len = self.entries.len();
        if len - mark > 1 {
            self.entries[mark..].reverse();
        }
        // Pushes happen only between a mark and its seal, so the height peaks at a seal.
        self.max_depth = self.max_depth.max(len + usize::from(self.front_full));
    }

    /// [`seal`](Self::seal) for a batch routed while an entry [`take`](Self::take) handed out was
    /// being processed, with `mark` read after that `take`. Where nothing went onto the `Vec`
    /// (a chain: at most one event, in the front slot) there is nothing to reverse, and the height
    /// is at most what the previous seal counted: the `take` lowered it by one and left the front
    /// slot empty (it either took the front event or found the front empty), and one front event
    /// raises it by at most one. So the common case costs one comparison.
    #[inline]
    pub fn seal_taken(&mut self, mark: usize) {
        if self.entries.len() != mark {
            self.seal(mark);
        }
    }

    /// The event routed since `mark` while the current event was dispatched, if it is exactly one
    /// event (in the front slot, nothing on the `Vec`): a link of a chain, and the entry
    /// [`take`](Self::take) would hand out next.
    #[inline]
    pub fn chained(&self, mark: usize) -> Option<&E> {
        if self.front_full && self.entries.len() == mark {
            // SAFETY: a full front slot holds an event; nothing writes it while `self` is borrowed.
            Some(unsafe { self.front.as_ref() })
        } else {
            None
        }
    }

    /// Drops the current event and makes the front event current, returning its slot:
    /// [`drop_current`](Self::drop_current) then [`take`](Self::take), for a link found by
    /// [`chained`](Self::chained). The height is unchanged, so the mark read after the first
    /// `take` of the chain stays right, and so does the max depth.
    ///
    /// # Safety
    /// As for `drop_current` (the current slot holds an event not yet dropped or completed), and
    /// the front slot holds an event.
    #[inline]
    pub unsafe fn advance(&mut self) -> NonNull<E> {
        debug_assert!(self.front_full, "advance without a front event");
        // SAFETY: the caller guarantees the current slot holds an event, dropped once here.
        unsafe { self.drop_current() };
        self.take_front()
    }

    /// Makes the front event current (the front slot must be full) and returns its slot: the
    /// pointers swap roles, the event does not move.
    #[inline(always)]
    fn take_front(&mut self) -> NonNull<E> {
        self.front_full = false;
        std::mem::swap(&mut self.current, &mut self.front);
        self.current
    }

    /// Takes the next entry to process: the front slot's event if there is one, else the top of
    /// the stack. An event is handed out in the current slot (see [`Taken::Event`]); the previous
    /// current event must have been dropped or completed.
    #[inline]
    pub fn take(&mut self) -> Option<Taken<E>> {
        if self.front_full {
            return Some(Taken::Event(self.take_front()));
        }
        match self.entries.pop()? {
            Routed::Event(event) => {
                // SAFETY: the current slot is empty (the caller dropped or completed its event)
                // and not borrowed: the previous pointer to it is no longer used.
                unsafe { self.current.as_ptr().write(event) };
                Some(Taken::Event(self.current))
            }
            Routed::Completed(event) => Some(Taken::Completed(event)),
        }
    }

    /// Takes the next entry as an owned value: [`take`](Self::take) with the event moved out of the
    /// current slot at once. For callers that do not dispatch in place (tests, benchmarks, models).
    #[cfg_attr(not(feature = "internals"), allow(dead_code))]
    pub fn pop(&mut self) -> Option<Routed<E>> {
        Some(match self.take()? {
            // SAFETY: `take` just put the event in the current slot; it is moved out here, once,
            // and the slot is empty again for the next `take`.
            Taken::Event(slot) => Routed::Event(unsafe { slot.as_ptr().read() }),
            Taken::Completed(event) => Routed::Completed(event),
        })
    }

    /// Entries held now, not counting the event being dispatched.
    #[inline]
    pub fn len(&self) -> usize {
        self.entries.len() + usize::from(self.front_full)
    }

    /// Whether nothing is waiting (the context may take its next inbox entry).
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The deepest the stack has been.
    pub fn max_depth(&self) -> usize {
        self.max_depth
    }

    /// Room for entries on the `Vec` (the front slot not counted).
    #[cfg_attr(not(feature = "internals"), allow(dead_code))]
    pub fn capacity(&self) -> usize {
        self.entries.capacity()
    }

    /// If the stack is empty and has room for more than `retained` entries, gives the memory
    /// beyond that back (to room for `retained`, at least one). The context calls it between inbox
    /// entries, where the stack is empty, not per event: a storm's memory is returned once it
    /// drains, and a steady state that stays within `retained` never allocates.
    pub fn shrink_when_empty(&mut self, retained: usize) {
        let retained = retained.max(1);
        if self.entries.capacity() > retained && self.is_empty() {
            // Keeps `len < capacity` (room for the next `append`): the length is 0.
            self.entries.shrink_to(retained);
        }
    }
}

impl<E> Drop for RouteStack<E> {
    fn drop(&mut self) {
        if self.front_full {
            // SAFETY: a full front slot holds an event nobody else owns.
            unsafe { self.front.as_ptr().drop_in_place() };
        }
        // The current slot holds an event only while a dispatch is under way; a stack dropped then
        // (an engine panic unwinding) leaks that one event rather than risk dropping it twice.
        let base = self
            .current
            .min(self.front)
            .as_ptr()
            .cast::<[MaybeUninit<E>; 2]>();
        // SAFETY: the lower of the two slot pointers is the start of the block `with_capacity`
        // allocated with `Box`; the `MaybeUninit` array drops nothing.
        drop(unsafe { Box::from_raw(base) });
    }
}

#[cfg(test)]
mod tests;
