//! Joins of two streams on a key within a window (SPEC R7.12): the public [`Join`] and the two
//! sides' windows.
//!
//! # Layout
//! Each side keeps, per key, the events its template matched, oldest first, for the join's
//! length `d`. All of both sides' events stay the same `d`, so they leave in the order they
//! entered: one FIFO of `(leaves at, side, key)` replaces a timer per event, as in `windows`,
//! and events whose time is up are released in batches, before the next event is paired or by
//! a timer at most `d / RELEASE_BATCH` late.
//!
//! May import the leaves and `pattern`.

use std::collections::VecDeque;
use std::fmt;
use std::time::Duration;

use super::windows::{WindowsHeld, RELEASE_BATCH};
use super::KeyFn;
use crate::event::Event;
use crate::hash::KindMap;
use crate::pattern::Pattern;
use crate::time::Time;

/// A join of two streams on a key within a window (SPEC R7.12): each side keeps the events its
/// template matches for `within`, by key; when an event enters one side, the handler of
/// [`Scope::join`](crate::Scope::join) gets a pair `(left, right)` for each event of the other
/// side with the same key still held, oldest first. Esper's and Siddhi's windowed joins, Apama's
/// stream query joins (`from a in A within 10.0 join b in B within 10.0 on a.k equals b.k`).
///
/// ```
/// use std::time::Duration;
/// use correlator::query::Join;
/// use correlator::{Correlator, Event, Monitor, Pattern, Scope, Time};
///
/// #[derive(Clone, Debug, PartialEq)]
/// enum Ev {
///     Order { id: u64, at_s: u64 },
///     Fill { order: u64, at_s: u64 },
///     Matched(u64),
/// }
/// #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
/// enum Kind { Order, Fill, Matched }
/// impl Event for Ev {
///     type Kind = Kind;
///     fn kind(&self) -> Kind {
///         match self { Ev::Order { .. } => Kind::Order, Ev::Fill { .. } => Kind::Fill, Ev::Matched(_) => Kind::Matched }
///     }
///     fn key(&self) -> Option<u64> {
///         match self { Ev::Order { id, .. } | Ev::Fill { order: id, .. } | Ev::Matched(id) => Some(*id) }
///     }
///     fn time(&self) -> Option<Time> {
///         match self { Ev::Order { at_s, .. } | Ev::Fill { at_s, .. } => Some(Time::from_secs(*at_s)), _ => None }
///     }
/// }
///
/// /// An order and a fill of it within 5 s of each other, in either order.
/// struct Fills;
/// impl Monitor<Ev> for Fills {
///     fn on_load(&mut self, cx: &mut Scope<'_, Ev, Self>) {
///         let out = cx.channel("matched").expect("below max_channels");
///         let join = Join::of(Pattern::kind(Kind::Order), Pattern::kind(Kind::Fill))
///             .within(Duration::from_secs(5));
///         cx.join(join, move |_m, cx, order: &Ev, _fill: &Ev| {
///             cx.emit(out, Ev::Matched(order.key().unwrap_or(0)));
///         })
///         .expect("a valid join");
///     }
/// }
///
/// let c = Correlator::<Ev>::builder().event_time().build()?;
/// let rx = c.output(c.channel("matched")?);
/// c.load(Fills)?;
/// let input = c.input();
/// c.start();
/// for e in [
///     Ev::Order { id: 1, at_s: 0 },
///     Ev::Fill { order: 1, at_s: 3 },  // joins order 1
///     Ev::Fill { order: 2, at_s: 4 },  // before its order, held
///     Ev::Order { id: 2, at_s: 6 },    // joins the fill of 4 s
///     Ev::Fill { order: 1, at_s: 9 },  // order 1 left at 5 s
/// ] {
///     input.send_to(c.main(), e)?;
/// }
/// c.shutdown()?;
/// assert_eq!(rx.iter().collect::<Vec<_>>(), [Ev::Matched(1), Ev::Matched(2)]);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct Join<E: Event> {
    pub(crate) left: Pattern<E>,
    pub(crate) right: Pattern<E>,
    pub(crate) left_key: KeyFn<E>,
    pub(crate) right_key: KeyFn<E>,
    pub(crate) within: Duration,
}

impl<E: Event> fmt::Debug for Join<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Join")
            .field("within", &self.within)
            .finish_non_exhaustive()
    }
}

impl<E: Event> Join<E> {
    /// A join of the events `left` matches with those `right` matches, on
    /// [`Event::key`] (0 for events without one) within one minute.
    pub fn of(left: Pattern<E>, right: Pattern<E>) -> Self {
        Self {
            left,
            right,
            left_key: Box::new(|e: &E| e.key().unwrap_or(0)),
            right_key: Box::new(|e: &E| e.key().unwrap_or(0)),
            within: Duration::from_secs(60),
        }
    }

    /// Joins on `left_key` of a left event equal to `right_key` of a right one.
    pub fn on(
        mut self,
        left_key: impl Fn(&E) -> u64 + Send + 'static,
        right_key: impl Fn(&E) -> u64 + Send + 'static,
    ) -> Self {
        self.left_key = Box::new(left_key);
        self.right_key = Box::new(right_key);
        self
    }

    /// How long each side keeps an event: from the time it was taken, exclusive.
    pub fn within(mut self, d: Duration) -> Self {
        self.within = d;
        self
    }
}

/// Most spare deques kept for reuse.
const SPARES: usize = 1024;

/// Both sides' windows of a join.
pub(crate) struct JoinWindows<E> {
    pub(super) within: Duration,
    /// How late an event whose time is up may be released (as a sliding window's values:
    /// [`RELEASE_BATCH`]); the join releases what is due before it pairs an event.
    slack: Duration,
    /// Per side, per key, the events held, oldest first.
    pub(super) sides: [KindMap<u64, VecDeque<E>>; 2],
    /// `(leaves at, side, key)` of every event held, oldest first.
    pub(super) expiry: VecDeque<(Time, u8, u64)>,
    pub(super) held: WindowsHeld,
    spare: Vec<VecDeque<E>>,
}

impl<E: Clone> JoinWindows<E> {
    pub(crate) fn new(within: Duration) -> Self {
        Self {
            within,
            slack: within / RELEASE_BATCH,
            sides: [KindMap::default(), KindMap::default()],
            expiry: VecDeque::new(),
            held: WindowsHeld::default(),
            spare: Vec::new(),
        }
    }

    pub(crate) fn held(&self) -> WindowsHeld {
        self.held
    }

    pub(crate) fn next_due(&self) -> Option<Time> {
        self.expiry.front().map(|&(t, ..)| t + self.slack)
    }

    /// The same windows releasing events at most `slack` after their time (tests).
    #[cfg(test)]
    pub(crate) fn with_slack(mut self, slack: Duration) -> Self {
        self.slack = slack;
        self
    }

    /// The events of `side` held under `key`, oldest first.
    pub(crate) fn held_on(&self, side: usize, key: u64) -> impl Iterator<Item = &E> {
        self.sides[side].get(&key).into_iter().flatten()
    }

    /// Keeps `e` on `side` under `key` from `now`.
    pub(crate) fn keep(&mut self, now: Time, side: usize, key: u64, e: E) {
        let spare = &mut self.spare;
        let held = &mut self.held;
        let events = self.sides[side].entry(key).or_insert_with(|| {
            held.partitions += 1;
            spare.pop().unwrap_or_default()
        });
        events.push_back(e);
        self.held.values += 1;
        self.expiry.push_back((now + self.within, side as u8, key));
    }

    /// Lets the events whose time is up at `due` leave.
    pub(crate) fn advance(&mut self, due: Time) {
        while let Some(&(t, side, key)) = self.expiry.front() {
            if t > due {
                break;
            }
            self.expiry.pop_front();
            let map = &mut self.sides[side as usize];
            let Some(events) = map.get_mut(&key) else {
                continue;
            };
            events.pop_front();
            self.held.values -= 1;
            if events.is_empty() {
                if let Some(events) = map.remove(&key) {
                    self.held.partitions -= 1;
                    if self.spare.len() < SPARES && events.capacity() > 0 {
                        self.spare.push(events);
                    }
                }
            }
        }
    }
}
