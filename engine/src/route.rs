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
/// which `scripts/callgrind.sh` cannot see but `route/dispatch` can (about 14 ns against 11 ns per
/// event on the 2-core VM). Events routed after the first of a batch go on the stack as before,
/// and are copied into the current slot when popped.
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
mod tests {
    use super::*;

    /// Processes `root` with `children(e)` as the events each event routes, returning the order.
    /// The children are routed while the parent is still in the current slot, as in a dispatch.
    fn run(root: &'static str, children: impl Fn(&str) -> Vec<&'static str>) -> Vec<&'static str> {
        let mut stack = RouteStack::default();
        let mut order = Vec::new();
        stack.push_root(root);
        while let Some(entry) = stack.take() {
            let Taken::Event(slot) = entry else {
                unreachable!("no completed markers in this test")
            };
            // SAFETY: the current slot holds the event until `drop_current`.
            let e = *unsafe { slot.as_ref() };
            order.push(e);
            let mark = stack.mark();
            for c in children(e) {
                stack.push(c);
                // Pushes never write the slot being dispatched.
                // SAFETY: still the current slot, not yet dropped.
                let still = *unsafe { slot.as_ref() };
                assert_eq!(still, e);
            }
            // SAFETY: taken above, dropped once.
            unsafe { stack.drop_current() };
            stack.seal(mark);
        }
        order
    }

    // R3.2: siblings in routing order, depth first, all before what was pending.
    #[test]
    fn r3_2_depth_first_siblings_in_routing_order() {
        let order = run("E1", |e| match e {
            "E1" => vec!["R1", "R2"],
            "R1" => vec!["R3", "R4"],
            "R3" => vec!["R5"],
            _ => vec![],
        });
        assert_eq!(order, ["E1", "R1", "R3", "R5", "R4", "R2"]);
    }

    // R3.4 pitfall: a plain stack would give R2 before R1.
    #[test]
    fn r3_4_plain_stack_pitfall_is_avoided() {
        let order = run("E", |e| match e {
            "E" => vec!["A", "B", "C"],
            _ => vec![],
        });
        assert_eq!(order, ["E", "A", "B", "C"]);
    }

    // R3.2: a chain (each event routes one) runs in order through the two slots alone: the `Vec`
    // is never used, and consecutive events are dispatched from alternating slots.
    #[test]
    fn r3_2_a_chain_alternates_between_the_slots() {
        let mut stack = RouteStack::default();
        stack.push_root(0u32);
        let mut order = Vec::new();
        let mut slots = Vec::new();
        while let Some(Taken::Event(slot)) = stack.take() {
            // SAFETY: the current slot holds the event until `drop_current`.
            let e = *unsafe { slot.as_ref() };
            order.push(e);
            slots.push(slot);
            let mark = stack.mark();
            if e < 3 {
                stack.push(e + 1);
            }
            // SAFETY: taken above, dropped once.
            unsafe { stack.drop_current() };
            stack.seal_taken(mark);
            assert_eq!(stack.mark(), 0, "a chain event went onto the stack");
        }
        assert_eq!(order, [0, 1, 2, 3]);
        assert_ne!(slots[0], slots[1]);
        assert_eq!(slots[0], slots[2]);
        assert_eq!(slots[1], slots[3]);
        assert_eq!(stack.max_depth(), 1);
    }

    /// proptest's defaults, or under miri a few cases and no failure file (miri's isolation has no
    /// file system).
    fn miri_friendly() -> proptest::prelude::ProptestConfig {
        let default = proptest::prelude::ProptestConfig::default();
        if cfg!(miri) {
            proptest::prelude::ProptestConfig {
                cases: 4,
                failure_persistence: None,
                ..default
            }
        } else {
            default
        }
    }

    proptest::proptest! {
        // Fewer cases under miri, which runs this for the `unsafe` of `take`, `append` and the slots.
        #![proptest_config(miri_friendly())]
        // R9.1: `seal_taken`, which skips the depth update when nothing went onto the `Vec`,
        // still reports the exact deepest height, measured here after every push. Each event
        // routes `fanout[e % len]` children (a mix of chains, fans and leaves), sometimes with a
        // `completed` marker, for a bounded number of events.
        #[test]
        fn r9_1_seal_taken_keeps_the_exact_max_depth(
            fanout in proptest::collection::vec(0usize..4, 1..12),
            completed in proptest::collection::vec(proptest::bool::ANY, 1..8),
            roots in 1usize..4,
        ) {
            let mut stack = RouteStack::default();
            let mut next = 0usize;
            let mut deepest = 0usize;
            let batch = |stack: &mut RouteStack<usize>, next: &mut usize, deepest: &mut usize, n: usize| {
                for _ in 0..n {
                    if *next < 400 {
                        stack.push(*next);
                        *next += 1;
                        *deepest = (*deepest).max(stack.len());
                    }
                }
            };
            // The roots: one batch routed outside any dispatch (as a load hook does).
            let mark = stack.mark();
            batch(&mut stack, &mut next, &mut deepest, roots);
            stack.seal(mark);
            while let Some(entry) = stack.take() {
                let mark = stack.mark();
                match entry {
                    Taken::Event(slot) => {
                        // SAFETY: the current slot holds the event until dropped or completed below.
                        let e = *unsafe { slot.as_ref() };
                        batch(&mut stack, &mut next, &mut deepest, fanout[e % fanout.len()]);
                        if completed[e % completed.len()] {
                            // SAFETY: taken above, moved out once.
                            unsafe { stack.complete_current() };
                            deepest = deepest.max(stack.len());
                        } else {
                            // SAFETY: taken above, dropped once.
                            unsafe { stack.drop_current() };
                        }
                    }
                    Taken::Completed(_) => {}
                }
                stack.seal_taken(mark);
            }
            proptest::prop_assert_eq!(stack.max_depth(), deepest);
        }
    }

    // R3.2: `chained` finds the next entry exactly when the batch is one front event, and
    // `advance` moves to it as `drop_current` + `take` would, dropping each event once (miri).
    #[test]
    fn r3_2_advance_follows_a_chain_as_take_would() {
        let mut stack = RouteStack::default();
        stack.push("root".to_string());
        stack.push("sibling".to_string());
        stack.seal(0);
        let Some(Taken::Event(slot)) = stack.take() else {
            panic!("the root first")
        };
        // SAFETY: the current slot holds the root until `advance` drops it.
        assert_eq!(unsafe { slot.as_ref() }, "root");
        let mark = stack.mark();
        assert!(stack.chained(mark).is_none(), "nothing routed yet");
        stack.push("a".to_string());
        assert_eq!(stack.chained(mark).map(String::as_str), Some("a"));
        // SAFETY: the current slot holds an event, and `chained` found the front one.
        let slot = unsafe { stack.advance() };
        // SAFETY: `advance` made it current.
        assert_eq!(unsafe { slot.as_ref() }, "a");
        assert_eq!(stack.mark(), mark, "the height did not change");
        // Two routes: the second goes onto the `Vec`, so the batch is no chain link.
        stack.push("b".to_string());
        stack.push("c".to_string());
        assert!(stack.chained(mark).is_none());
        // SAFETY: the current event, dropped once.
        unsafe { stack.drop_current() };
        stack.seal_taken(mark);
        let mut rest = Vec::new();
        while let Some(Routed::Event(e)) = stack.pop() {
            rest.push(e);
        }
        assert_eq!(rest, ["b", "c", "sibling"]);
    }

    // R3.2: events pending below the mark come after the whole new batch.
    #[test]
    fn r3_2_pending_events_wait_for_the_new_batch() {
        let mut stack = RouteStack::default();
        stack.push("old0");
        stack.push("old1");
        stack.seal(0);
        assert_eq!(
            stack.pop().map(|r| matches!(r, Routed::Event("old0"))),
            Some(true)
        );
        let mark = stack.mark();
        stack.push("n1");
        stack.push("n2");
        stack.push("n3");
        stack.seal(mark);
        let mut got = Vec::new();
        while let Some(Routed::Event(e)) = stack.pop() {
            got.push(e);
        }
        assert_eq!(got, ["n1", "n2", "n3", "old1"]);
        // R9.1: old1 and n1..n3 were held at once.
        assert_eq!(stack.max_depth(), 4);
        assert!(stack.is_empty());
    }

    // R6.7: a completed marker pushed before sealing pops after every routed child.
    #[test]
    fn r6_7_completed_marker_pops_after_children() {
        let mut stack = RouteStack::default();
        stack.push("parent".to_string());
        stack.seal(0);
        let Some(Taken::Event(_)) = stack.take() else {
            panic!("the parent first")
        };
        let mark = stack.mark();
        stack.push("c1".to_string());
        stack.push("c2".to_string());
        // SAFETY: the parent is in the current slot, not yet dropped.
        unsafe { stack.complete_current() };
        stack.seal(mark);
        let mut got = Vec::new();
        while let Some(entry) = stack.pop() {
            got.push(match entry {
                Routed::Event(e) => e,
                Routed::Completed(e) => format!("completed:{e}"),
            });
        }
        assert_eq!(got, ["c1", "c2", "completed:parent"]);
    }

    // R3.4: no allocation once grown: a stack made with room for 9 entries holds storms of 9
    // without growing, and one that had to grow for a deeper storm grows once, not per storm.
    #[test]
    fn r3_4_no_growth_in_steady_state() {
        let storms = |stack: &mut RouteStack<u32>, depth: u32, times: usize| {
            for _ in 0..times {
                let mark = stack.mark();
                for i in 0..depth {
                    stack.push(i);
                }
                stack.seal(mark);
                while stack.pop().is_some() {}
            }
        };
        // Enough repeats to show growth per storm; few under miri, which runs this for `append`.
        let times = if cfg!(miri) { 10 } else { 1000 };
        let mut stack = RouteStack::with_capacity(9);
        storms(&mut stack, 9, times);
        assert_eq!(stack.entries.capacity(), 9);
        assert_eq!(stack.max_depth(), 9);
        storms(&mut stack, 40, 1);
        let grown = stack.entries.capacity();
        assert!(grown > 9);
        storms(&mut stack, 40, times);
        assert_eq!(stack.entries.capacity(), grown);
        assert_eq!(stack.max_depth(), 40);
    }

    // Events that own memory are dropped exactly once, wherever they are when the stack goes
    // (miri checks the leaks and double drops this would otherwise hide).
    #[test]
    fn owned_events_are_dropped_once() {
        let mut stack = RouteStack::default();
        stack.push(vec![1u8]);
        stack.push(vec![2u8]);
        stack.push(vec![3u8]);
        stack.seal(0);
        let Some(Routed::Event(first)) = stack.pop() else {
            panic!("an event first")
        };
        assert_eq!(first, [1]);
        let Some(Taken::Event(slot)) = stack.take() else {
            panic!("a second event")
        };
        // SAFETY: the current slot holds the second event.
        assert_eq!(unsafe { slot.as_ref() }, &[2]);
        stack.push(vec![4u8]);
        // SAFETY: as above, dropped once.
        unsafe { stack.drop_current() };
        // The front ([4]) and the stack ([3]) still hold events when the stack is dropped.
        assert_eq!(stack.len(), 2);
    }

    // R3.4: after a storm, an empty stack gives its memory back down to what it keeps; a
    // non-empty one keeps everything it holds.
    #[test]
    fn r3_4_an_empty_stack_shrinks_to_what_it_keeps() {
        let mut stack = RouteStack::with_capacity(4);
        let mark = stack.mark();
        for i in 0..1000 {
            stack.push(i);
        }
        stack.seal(mark);
        stack.shrink_when_empty(16);
        assert!(stack.capacity() >= 999, "not empty: nothing given back");
        let mut seen = Vec::new();
        while let Some(Routed::Event(e)) = stack.pop() {
            seen.push(e);
        }
        assert_eq!(seen, (0..1000).collect::<Vec<_>>());
        stack.shrink_when_empty(16);
        assert!(stack.capacity() <= 16 && stack.capacity() >= 1);
        // Still usable: room for the next append, and it grows again.
        let mark = stack.mark();
        for i in 0..40 {
            stack.push(i);
        }
        stack.seal(mark);
        assert_eq!(stack.len(), 40);
    }

    /// An event whose `Drop` panics once armed.
    struct Bomb(bool);

    impl Drop for Bomb {
        fn drop(&mut self) {
            if self.0 && !std::thread::panicking() {
                panic!("bomb");
            }
        }
    }

    // R6.8: a panic in an event's `Drop` where the stack drops it is caught and counted; the slot
    // counts as empty, and the stack goes on.
    #[test]
    fn r6_8_a_panicking_drop_of_the_current_event_is_returned() {
        let mut stack = RouteStack::with_capacity(2);
        stack.push_root(Bomb(true));
        let Some(Taken::Event(_)) = stack.take() else {
            panic!("the root first")
        };
        stack.push(Bomb(false));
        // SAFETY: the current slot holds the root, dropped once; `chained` would find the front.
        unsafe { stack.advance() };
        assert_eq!(stack.take_drop_panics(), 1, "the root's drop panicked");
        // SAFETY: the current slot holds the front event now.
        unsafe { stack.drop_current() };
        assert!(stack.is_empty());
        assert_eq!(stack.take_drop_panics(), 0);
    }
}
