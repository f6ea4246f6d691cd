//! The vocabulary the context loop, monitors and senders share: inbox [`Entry`]s, the
//! [`Effects`] a handler acts on, the deferred [`Op`]erations it requests, the type-erased handler
//! aliases, listener [`Mode`]s and [`DieReason`].
//!
//! Owns no behaviour beyond these definitions.
//!
//! # The type recursion, and why it is no import circle
//! An [`Entry`] can be a spawn, whose initialiser takes `&mut` [`Effects`]; `Effects` holds the
//! links a handler sends through (`deliver::Links`), which hold the registry, whose contexts hold
//! inboxes of `Entry`. `deliver` names `Entry` (it builds the entries it sends), so if this module
//! named `deliver::Links` the two would import each other. Instead [`Effects::links`] has the
//! type `<E as HandlerLinks>::Links`, the associated type of a trait ([`HandlerLinks`]) declared
//! here and implemented once, beside `Links` in `deliver`; the registry is generic over its inbox item, and `shared` names its instantiation
//! with `Entry`. Every other module sees the concrete types.
//!
//! May import the leaves, `channel`, `checkpoint`, `status`, `pattern`, `expr`, `query`, `record`
//! and `route`.

use crate::channel::Channel;
use crate::event::Event;
use crate::expr::{Expr, Match};
use crate::hash::KeyMap;
use crate::id::ContextRef;
use crate::pattern::Pattern;
use crate::query::windows::{QueryStep, WindowsHeld};
use crate::record::{Journal, Origin};
use crate::route::RouteStack;
use crate::state::State;
use crate::status::Counters;
use crate::time::Time;

/// Why a monitor instance ended.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum DieReason {
    /// A handler called [`Scope::die`](crate::Scope::die).
    Died,
    /// It had no listener left after a handler returned.
    NoListeners,
    /// One of its handlers panicked; the message of the panic.
    Panicked(String),
    /// The correlator shut down.
    Shutdown,
}

/// How a listener fires.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Mode {
    /// `on` / `when`: fires once, then ends.
    Once,
    /// `on_all` / `when_all`: fires on every match until quit.
    All,
    /// `unmatched`: fires for events that no ordinary listener of the context matched.
    Unmatched,
    /// `completed`: fires once the event and everything it routed have been processed.
    Completed,
}

/// A handler with its monitor type erased: downcasts the instance state and builds the `Scope`.
pub(crate) type Handler<E> = Box<dyn FnMut(&mut State, &mut Effects<E>, &E) + Send>;
/// An instance initialiser (load hook or spawn initialiser) with its monitor type erased.
pub(crate) type Init<E> = Box<dyn FnOnce(&mut State, &mut Effects<E>) + Send>;
/// A `when`/`when_all` handler with its monitor type erased.
pub(crate) type MatchHandler<E> = Box<dyn FnMut(&mut State, &mut Effects<E>, &Match<E>) + Send>;
/// An `on_die` hook with its monitor type erased.
pub(crate) type OnDie<E> = Box<dyn FnMut(&mut State, &DieReason, &mut Effects<E>) + Send>;

/// A monitor instance to create in a context.
pub(crate) struct NewInstance<E: Event> {
    pub(crate) state: State,
    pub(crate) on_die: OnDie<E>,
    pub(crate) init: Init<E>,
    /// An event to offer to the new instance's own listeners once its initialiser's operations
    /// have taken effect (a pool's `load_per_key_delivering`: the key's first event), or `None`.
    pub(crate) deliver: Option<E>,
    /// For a pool's per-key instance: its dispatcher (an index in [`Effects::dispatchers`]) and
    /// its key, which the context counts live while the instance exists and has the dispatcher
    /// forget when it ends.
    pub(crate) owner: Option<(u32, u64)>,
}

/// An inbox entry.
///
/// Events and spawns carry their sender's [`Origin`] (R2.3's sender, which a recording names and
/// a replay orders by: see `record`). It sits after the enum's tag, in what would otherwise be
/// padding before an 8-byte-aligned event, so it costs no slot size there (`tests`).
pub(crate) enum Entry<E: Event> {
    Event(Origin, E),
    /// Boxed, so that an entry (an inbox slot) is as small as the event allows: most entries are
    /// events, and every slot of every inbox is the size of the largest variant.
    Spawn(Origin, Box<NewInstance<E>>),
    /// A clock tick: the context's logical time advances to it (R7.1).
    Tick(Time),
    /// Save the context's state for a checkpoint, or restore it from one (SPEC §11). Boxed, as
    /// a spawn is: checkpoints are rare.
    #[cfg(feature = "checkpoint")]
    Control(Box<Control<E>>),
}

/// A monitor type that checkpoints save and restore (`CorrelatorBuilder::persistent`), with its
/// type erased: its stable name, and its state to bytes and back (through `monitor::persist`).
#[cfg(feature = "checkpoint")]
#[derive(Clone)]
pub(crate) struct PersistType<E: Event> {
    pub(crate) name: &'static str,
    /// The instance state's bytes (the state is of this type: the caller looked it up by its
    /// `TypeId`).
    pub(crate) save: fn(&mut State) -> Result<Vec<u8>, String>,
    /// An instance of the state the bytes hold, whose initialiser is the monitor's
    /// `on_restore`.
    pub(crate) restore: fn(&[u8]) -> Result<NewInstance<E>, String>,
}

/// What a context needs to save or restore its state: the persistent monitor types and the
/// codec of the events partial matches hold.
#[cfg(feature = "checkpoint")]
pub(crate) struct Persist<E: Event> {
    pub(crate) types: std::collections::HashMap<std::any::TypeId, PersistType<E>>,
    /// The types by persistent name.
    pub(crate) names: std::collections::HashMap<&'static str, std::any::TypeId>,
    pub(crate) codec: std::sync::Arc<dyn crate::record::EventCodec<E>>,
}

/// What a context keeps of each pool dispatcher loaded in it (`pool::dispatcher`), so that the
/// per-key instances it creates need no wrapper of their own: its set of keys with a live
/// instance, its member's live key count and, under checkpoints (SPEC R11.10), which monitor type
/// its per-key instances are of. Registered from the dispatcher's `on_load`, at the index its
/// instances name ([`NewInstance::owner`]) and its listeners' gates name (`listener`), and never
/// removed: at shutdown a per-key instance may end after its dispatcher, and still counts down.
///
/// The key set is the context's, not the dispatcher's state: the dispatch of an event whose key
/// has a live instance reads it here and runs no handler (the dispatcher's listeners are
/// gates: `ListenerSlot::gate`), the look-ahead hints its lines, and an ending instance's key
/// leaves it, each without a downcast of the dispatcher's state.
pub(crate) struct DispatcherHook {
    /// The dispatcher's instance, or [`NO_INSTANCE`] once it ended.
    pub(crate) instance: u32,
    /// The keys with a live instance of this dispatcher: a key enters when its instance is
    /// created (or restored), and leaves when it ends, before its `on_die` (R6.8). Emptied when
    /// the dispatcher ends.
    pub(crate) keys: KeyMap<()>,
    /// The pool's live key counts, one per member (`Pool::status`), and this member's index.
    pub(crate) live: std::sync::Arc<[std::sync::atomic::AtomicU64]>,
    pub(crate) member: usize,
    /// The monitor type of its per-key instances.
    #[cfg(feature = "checkpoint")]
    pub(crate) monitor: std::any::TypeId,
}

/// No instance: a [`DispatcherHook`]'s after its dispatcher ended, an instance's `owner` when no
/// dispatcher made it.
pub(crate) const NO_INSTANCE: u32 = u32::MAX;

/// A template listener that is no pool dispatcher's gate (see [`Spec::Template`]).
pub(crate) const NO_GATE: u32 = u32::MAX;

/// A checkpoint in progress, as every context taking part sees it (SPEC R11.9): its number,
/// the contexts that take part (ids below `contexts`), what saving needs, and where each
/// context sends its part.
#[cfg(feature = "checkpoint")]
pub(crate) struct CutRequest<E: Event> {
    /// The cut's number: it increases with every checkpoint attempted (a failed one's number is
    /// not used again), so a context tells a new cut from one it has saved for.
    pub(crate) seq: u64,
    pub(crate) contexts: u32,
    pub(crate) persist: std::sync::Arc<Persist<E>>,
    pub(crate) reply: std::sync::mpsc::Sender<(u32, Saved)>,
}

/// Per input handle a context took events from: its creation number, the events taken, and the
/// source position of the last one that had one (`Event::position`).
#[cfg(feature = "checkpoint")]
pub(crate) type InputsTaken = Vec<(u32, u64, Option<u64>)>;

/// A context's part of a checkpoint: its state, the events it had taken from each input
/// handle (by creation number) when it saved it, with the last one's position in its source,
/// and its channel states: the entries it took after saving from each context whose marker had
/// not arrived yet, `(sender, encoded event)` in the order it took them.
#[cfg(feature = "checkpoint")]
pub(crate) struct SavedPart {
    pub(crate) part: Vec<u8>,
    pub(crate) taken: InputsTaken,
    pub(crate) channel: Vec<(u32, Vec<u8>)>,
}

/// What a context answers a checkpoint.
#[cfg(feature = "checkpoint")]
pub(crate) type Saved = Result<SavedPart, crate::checkpoint::CheckpointError>;

/// A checkpoint's entry, taken between entries (the route stack is empty, R2.2).
#[cfg(feature = "checkpoint")]
pub(crate) enum Control<E: Event> {
    /// The coordinator asks for checkpoint `seq`: the context saves its state now, unless a
    /// marker of the same checkpoint made it save already.
    Save(std::sync::Arc<CutRequest<E>>),
    /// Context `from` saved its state for the checkpoint and sent this behind everything it
    /// had sent before: the channel from `from` holds nothing more of the checkpoint's.
    Marker {
        cut: std::sync::Arc<CutRequest<E>>,
        from: u32,
    },
    /// The cut numbered so failed: forget it.
    Abort(u64),
    /// Restore the context's state from its part of a checkpoint and send the outcome to
    /// `reply`; then wait at `gate` until the coordinator says whether every context restored
    /// (`true`: take the channel states `channel` now) or not (`false`, or the sender gone:
    /// drop them).
    Restore {
        persist: std::sync::Arc<Persist<E>>,
        part: Vec<u8>,
        channel: Vec<(u32, Vec<u8>)>,
        reply: std::sync::mpsc::Sender<(u32, Result<(), crate::checkpoint::CheckpointError>)>,
        gate: std::sync::mpsc::Receiver<bool>,
    },
}

/// What a new listener waits for.
pub(crate) enum Spec<E: Event> {
    /// A template and its handler; the third field is [`NO_GATE`], or for a pool dispatcher's
    /// listener the index of its [`DispatcherHook`] (the listener is that dispatcher's gate).
    Template(Pattern<E>, Handler<E>, u32),
    /// An expression, its handler, and the handler of its timed-out matches (R7.7), if any.
    Expr(Expr<E>, MatchHandler<E>, Option<MatchHandler<E>>),
    /// A stream query (R7.9), or a join (R7.12) with its right side's template: its template(s),
    /// and its windows with the handler of its rows or pairs. Boxed: two patterns would make
    /// every operation a handler queues larger, and queries are registered rarely.
    Query(Box<QuerySpec<E>>),
}

/// A stream query's or a join's registration (see [`Spec::Query`]).
pub(crate) type QuerySpec<E> = (Pattern<E>, Option<Pattern<E>>, Box<dyn QueryRun<E>>);

/// A stream query's listener with its monitor type erased (R7.9 - R7.11): its windows, what it
/// computes of each event, and the handler of its rows (built by `monitor`, run by `context`).
pub(crate) trait QueryRun<E: Event>: Send {
    /// Takes `e` at the clock's time `fx.now`; hands the rows (or pairs) due. `sides` says which
    /// of its templates matched `e`: bit 0 the first (a query's, a join's left), bit 1 a join's
    /// right. Returns what the context must do about it.
    fn event(&mut self, state: &mut State, fx: &mut Effects<E>, e: &E, sides: u8) -> QueryStep;
    /// Brings the windows to `due` (its timer fired): values leave, periodic rows are handed.
    fn time(&mut self, state: &mut State, fx: &mut Effects<E>, due: Time) -> QueryStep;
    /// What `event` or `time` would have returned, after a panic cut it short.
    fn settle(&mut self) -> QueryStep;
    /// What its windows hold.
    fn held(&self) -> WindowsHeld;
    /// Its windows' bytes for a checkpoint (R11.10), the events they hold through `encode`.
    #[cfg(feature = "checkpoint")]
    fn save(
        &self,
        encode: &mut dyn FnMut(&E, &mut Vec<u8>),
    ) -> Result<Vec<u8>, crate::query::saved::Unsaved>;
    /// Puts back the windows `bytes` saved, in place of this new listener's (R11.11), the
    /// events through `decode`. An error leaves the listener as it was.
    #[cfg(feature = "checkpoint")]
    fn restore(
        &mut self,
        bytes: &[u8],
        decode: &dyn Fn(&[u8]) -> Result<E, String>,
    ) -> Result<(), String>;
}

/// A deferred change requested by a handler, applied when it returns.
pub(crate) enum Op<E: Event> {
    Listen {
        handle: u64,
        instance: u32,
        mode: Mode,
        spec: Spec<E>,
    },
    Quit(u64),
    Subscribe(u32, Channel),
    Unsubscribe(u32, Channel),
    Spawn(NewInstance<E>),
    /// `Scope::die`: the instance ends once its handler's other operations are applied. An
    /// operation rather than a flag, so that the check after every handler is one emptiness test.
    Die,
}

/// The type of [`Effects::links`]: what a handler's sends go through, `deliver::Links<E,
/// OwnInbox<E>>`. Declared here and implemented once, for every event type, in `deliver` (which
/// imports this module), so that this module need not import `deliver`: the projection
/// `<E as HandlerLinks>::Links` is that one type wherever it is used.
pub(crate) trait HandlerLinks {
    /// `deliver::Links<Self, OwnInbox<Self>>`.
    type Links;
}

/// The part of a context that handlers act on through their `Scope`.
pub(crate) struct Effects<E: Event> {
    pub(crate) routes: RouteStack<E>,
    pub(crate) me: ContextRef,
    /// The instance whose handler is running.
    pub(crate) current: u32,
    pub(crate) ops: Vec<Op<E>>,
    pub(crate) links: <E as HandlerLinks>::Links,
    /// Counted by the context's thread; published after batches of entries.
    pub(crate) stats: Counters,
    pub(crate) next_handle: u64,
    /// While a restored instance's `on_restore` runs: the handles its listeners had when the
    /// checkpoint was taken, the next one last. A registration takes the next one, so that a
    /// restored listener keeps its handle (and its place in registration order, R6.4).
    #[cfg(feature = "checkpoint")]
    pub(crate) restore_handles: Vec<u64>,
    /// The pool dispatchers loaded in this context, in load order (R11.10 for checkpoints).
    pub(crate) dispatchers: Vec<DispatcherHook>,
    /// The context's logical time: the last tick taken (R7.1).
    pub(crate) now: Time,
    /// Recording or replaying this context, or neither (see `record`).
    pub(crate) journal: Journal<Entry<E>>,
    /// The number of the next [`EmitId`](crate::id::EmitId) (R11.14), saved by checkpoints.
    pub(crate) emit_ids: u64,
}

impl<E: Event> Effects<E> {
    /// A new listener handle: the next number, never reused.
    #[inline]
    pub(crate) fn take_handle(&mut self) -> u64 {
        let id = self.next_handle;
        self.next_handle += 1;
        id
    }
}

impl<E: Event> Entry<E> {
    /// Who sent it; `None` for a tick.
    #[inline(always)]
    pub(crate) fn origin(&self) -> Option<Origin> {
        match self {
            Entry::Event(o, _) | Entry::Spawn(o, _) => Some(*o),
            Entry::Tick(_) => None,
            #[cfg(feature = "checkpoint")]
            Entry::Control(_) => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A 32-byte event, the size of the harness's.
    #[derive(Clone)]
    struct Wide {
        _fields: [u64; 3],
        kind: u32,
    }

    impl Event for Wide {
        type Kind = u32;
        fn kind(&self) -> u32 {
            self.kind
        }
    }

    // R5.1: an inbox of capacity N holds N entries of fixed size, so the entry size is the memory
    // of every inbox place: a spawn must not make every event's place larger than the event needs.
    #[test]
    fn r5_1_an_inbox_place_is_no_larger_than_an_event_and_a_tag() {
        let event = std::mem::size_of::<Wide>();
        // What the boxing of `Entry::Spawn` saves: a spawn's payload is larger than such an event.
        assert!(std::mem::size_of::<NewInstance<Wide>>() > event + 8);
        assert!(
            std::mem::size_of::<Entry<Wide>>() <= event + 8,
            "Entry<E> is {} bytes for a {event}-byte event",
            std::mem::size_of::<Entry<Wide>>()
        );
    }
}
