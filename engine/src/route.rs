//! The route stack: the front of a context's queue (SPEC §3).
//!
//! Owned by the context's thread: a plain `Vec` and two one-event slots, no atomics, no locks, and no
//! allocation once it has grown to the deepest route storm seen (R3.4). Routed events never count against the inbox's
//! capacity and are never refused (R3.5).
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
    /// An empty stack with room for `capacity` entries before it first grows.
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
            entries: Vec::with_capacity(capacity),
            current,
            front,
            front_full: false,
            max_depth: 0,
        }
    }

    /// The current height, to pass to [`seal`](Self::seal) after the event's listeners ran.
    #[inline]
    pub fn mark(&self) -> usize {
        self.entries.len()
    }

    /// Routes an event: into the front slot if it is the first of its batch, else on the stack
    /// above the current mark.
    #[inline]
    pub fn push(&mut self, event: E) {
        if !self.front_full {
            // SAFETY: the front slot is empty and never the current slot; nothing borrows it.
            unsafe { self.front.as_ptr().write(event) };
            self.front_full = true;
        } else {
            self.entries.push(Routed::Event(event));
        }
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
        self.entries.push(Routed::Completed(event));
    }

    /// Drops the event of the current slot once its dispatch is over.
    ///
    /// # Safety
    /// As for [`complete_current`](Self::complete_current).
    #[inline]
    pub unsafe fn drop_current(&mut self) {
        // SAFETY: the caller guarantees the slot holds an event, dropped once.
        unsafe { self.current.as_ptr().drop_in_place() };
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

    /// Takes the next entry to process: the front slot's event if there is one, else the top of
    /// the stack. An event is handed out in the current slot (see [`Taken::Event`]); the previous
    /// current event must have been dropped or completed.
    #[inline]
    pub fn take(&mut self) -> Option<Taken<E>> {
        if self.front_full {
            self.front_full = false;
            std::mem::swap(&mut self.current, &mut self.front);
            return Some(Taken::Event(self.current));
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
            stack.seal(mark);
            assert_eq!(stack.mark(), 0, "a chain event went onto the stack");
        }
        assert_eq!(order, [0, 1, 2, 3]);
        assert_ne!(slots[0], slots[1]);
        assert_eq!(slots[0], slots[2]);
        assert_eq!(slots[1], slots[3]);
        assert_eq!(stack.max_depth(), 1);
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

    // R3.4: no allocation once grown: the capacity stays put across storms of the same depth.
    #[test]
    fn r3_4_no_growth_in_steady_state() {
        let mut stack = RouteStack::with_capacity(8);
        for _ in 0..1000 {
            let mark = stack.mark();
            for i in 0..9 {
                stack.push(i);
            }
            stack.seal(mark);
            while stack.pop().is_some() {}
        }
        assert_eq!(stack.entries.capacity(), 8);
        assert_eq!(stack.max_depth(), 9);
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
}
