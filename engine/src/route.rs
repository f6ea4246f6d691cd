//! The route stack: the front of a context's queue (SPEC §3).
//!
//! Owned by the context's thread: a plain `Vec`, no atomics, no locks, and no allocation once it has
//! grown to the deepest route storm seen (R3.4). Routed events never count against the inbox's
//! capacity and are never refused (R3.5).
//!
//! # Order (R3.2)
//! A plain push/pop stack would process the last-routed sibling first. Instead, before an event is
//! dispatched the loop records the stack height (`mark`); the event's listeners push what they route
//! above it, in routing order; once they have all run, [`RouteStack::seal`] reverses the segment above
//! the mark, so that the first-routed event is on top. Popping then visits the tree of routes depth
//! first with siblings in routing order, and everything routed from an event before anything that was
//! pending when it started.
//!
//! A `completed` marker (R6.7) is pushed *before* sealing, so that it ends up at the bottom of the
//! event's segment and is popped only after every event routed from it, transitively.

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

/// The LIFO of routed events of one context.
#[derive(Debug)]
pub struct RouteStack<E> {
    entries: Vec<Routed<E>>,
    /// The largest number of entries held at once (R9.1).
    max_depth: usize,
}

impl<E> Default for RouteStack<E> {
    fn default() -> Self {
        Self::with_capacity(0)
    }
}

impl<E> RouteStack<E> {
    /// An empty stack with room for `capacity` entries before it first grows.
    pub fn with_capacity(capacity: usize) -> Self {
        Self {
            entries: Vec::with_capacity(capacity),
            max_depth: 0,
        }
    }

    /// The current height, to pass to [`seal`](Self::seal) after the event's listeners ran.
    #[inline]
    pub fn mark(&self) -> usize {
        self.entries.len()
    }

    /// Routes an event (pushes it above the current mark).
    #[inline]
    pub fn push(&mut self, event: E) {
        self.push_entry(Routed::Event(event));
    }

    /// Pushes a `completed` marker for `event` (call before [`seal`](Self::seal)).
    #[inline]
    pub fn push_completed(&mut self, event: E) {
        self.push_entry(Routed::Completed(event));
    }

    #[inline]
    fn push_entry(&mut self, entry: Routed<E>) {
        self.entries.push(entry);
        if self.entries.len() > self.max_depth {
            self.max_depth = self.entries.len();
        }
    }

    /// Puts everything pushed since `mark` into routing order for popping: first-pushed on top.
    #[inline]
    pub fn seal(&mut self, mark: usize) {
        debug_assert!(mark <= self.entries.len(), "seal mark above the stack");
        if self.entries.len() - mark > 1 {
            self.entries[mark..].reverse();
        }
    }

    /// Takes the next entry to process.
    #[inline]
    pub fn pop(&mut self) -> Option<Routed<E>> {
        self.entries.pop()
    }

    /// Entries held now.
    #[inline]
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether the stack is empty (the context may take its next inbox entry).
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The deepest the stack has been.
    pub fn max_depth(&self) -> usize {
        self.max_depth
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Processes `root` with `children(e)` as the events each event routes, returning the order.
    fn run(root: &'static str, children: impl Fn(&str) -> Vec<&'static str>) -> Vec<&'static str> {
        let mut stack = RouteStack::default();
        let mut order = Vec::new();
        stack.push(root);
        while let Some(entry) = stack.pop() {
            let Routed::Event(e) = entry else {
                unreachable!("no completed markers in this test")
            };
            order.push(e);
            let mark = stack.mark();
            for c in children(e) {
                stack.push(c);
            }
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

    // R3.2: events pending below the mark come after the whole new batch.
    #[test]
    fn r3_2_pending_events_wait_for_the_new_batch() {
        let mut stack = RouteStack::default();
        stack.push("old");
        let mark = stack.mark();
        stack.push("n1");
        stack.push("n2");
        stack.seal(mark);
        let mut got = Vec::new();
        while let Some(Routed::Event(e)) = stack.pop() {
            got.push(e);
        }
        assert_eq!(got, ["n1", "n2", "old"]);
        assert_eq!(stack.max_depth(), 3);
    }

    // R6.7: a completed marker pushed before sealing pops after every routed child.
    #[test]
    fn r6_7_completed_marker_pops_after_children() {
        let mut stack = RouteStack::default();
        let mark = stack.mark();
        stack.push("c1");
        stack.push("c2");
        stack.push_completed("parent");
        stack.seal(mark);
        let mut got = Vec::new();
        while let Some(entry) = stack.pop() {
            got.push(match entry {
                Routed::Event(e) => e.to_string(),
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
            for i in 0..8 {
                stack.push(i);
            }
            stack.seal(mark);
            while stack.pop().is_some() {}
        }
        assert_eq!(stack.entries.capacity(), 8);
    }
}
