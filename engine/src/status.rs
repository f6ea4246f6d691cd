//! The status snapshot (SPEC R9.1).
//!
//! Each context publishes its counters with relaxed stores after every inbox entry; a snapshot reads
//! them (and each inbox's count) without stopping anything, so it is cheap enough to take every
//! second from any thread. The figures of different contexts are not taken at one instant.
//!
//! Owns the one list of status counters (the public snapshot types, the counters a context keeps
//! and publishes, and the named list the `metrics` exporter walks are all made from it), and the
//! snapshot's assembly from what the facade reads of each context ([`ContextReading`]). With the
//! `serde` feature the snapshot types are `Serialize` and `Deserialize`, under their field names;
//! a snapshot missing a field (one written by an older version) reads it as its default. May
//! import `id` and `sync`.

use std::fmt;
use std::sync::OnceLock;
use std::time::{Instant, SystemTime};

use crate::id::ContextRef;
use crate::sync::{AtomicU64, Ordering};

/// Defines, from the one list of counters below, the public [`ContextStatus`] and [`Totals`], the
/// tallies a context's thread keeps ([`Counters`]) and the atomics it publishes them through
/// ([`PublishedCounters`]).
macro_rules! status_counters {
    (
        published and summed { $( $(#[doc = $sdoc:literal])* $sum:ident, )* }
        published, per context { $( $(#[doc = $pdoc:literal])* $per:ident, )* }
        read by the snapshot, summed { $( $(#[doc = $idoc:literal])* $inb:ident, )* }
    ) => {
        /// The counters of one context.
        #[derive(Clone, Debug, Default, PartialEq, Eq)]
        #[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
        #[cfg_attr(feature = "serde", serde(default))]
        #[non_exhaustive]
        pub struct ContextStatus {
            /// Which context.
            pub context: Option<ContextRef>,
            /// Its name.
            pub name: String,
            /// Whether it receives the default channel.
            pub public: bool,
            /// The core it was asked to run on, if pinned.
            pub core: Option<usize>,
            /// Whether pinning to `core` took effect.
            pub pinned: bool,
            $( $(#[doc = $sdoc])* pub $sum: u64, )*
            $( $(#[doc = $pdoc])* pub $per: u64, )*
            $( $(#[doc = $idoc])* pub $inb: u64, )*
            /// Whether its thread has exited.
            pub stopped: bool,
            /// The full [`Block`](crate::Overflow::Block) output it waits for room in now, if
            /// any: a handler's emit or channel send is stuck until the output's receiver reads.
            pub blocked_on_output: Option<BlockedOnOutput>,
        }

        /// Correlator-wide totals.
        #[derive(Clone, Debug, Default, PartialEq, Eq)]
        #[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
        #[cfg_attr(feature = "serde", serde(default))]
        #[non_exhaustive]
        pub struct Totals {
            $( #[doc = concat!("Sum of [`ContextStatus::", stringify!($sum), "`].")] pub $sum: u64, )*
            $( #[doc = concat!("Sum of [`ContextStatus::", stringify!($inb), "`].")] pub $inb: u64, )*
            /// Channel sends that nobody received (R4.5).
            pub dropped: u64,
        }

        /// What a context's thread counts between publications: the published counters of
        /// [`ContextStatus`].
        #[derive(Clone, Copy, Debug, Default)]
        pub(crate) struct Counters {
            $( pub(crate) $sum: u64, )*
            $( pub(crate) $per: u64, )*
        }

        /// [`Counters`] as a context publishes them for the status snapshot (R9.1): written only
        /// by the context's thread, with relaxed stores; read by anyone.
        #[derive(Default)]
        pub(crate) struct PublishedCounters {
            $( $sum: AtomicU64, )*
            $( $per: AtomicU64, )*
        }

        impl PublishedCounters {
            /// Publishes `c` (the context's thread only).
            pub(crate) fn store(&self, c: &Counters) {
                $( self.$sum.store(c.$sum, Ordering::Relaxed); )*
                $( self.$per.store(c.$per, Ordering::Relaxed); )*
            }

            /// The counters last published.
            pub(crate) fn load(&self) -> Counters {
                Counters {
                    $( $sum: self.$sum.load(Ordering::Relaxed), )*
                    $( $per: self.$per.load(Ordering::Relaxed), )*
                }
            }
        }

        impl ContextStatus {
            /// Sets the counters a context published.
            pub(crate) fn set_published(&mut self, c: Counters) {
                $( self.$sum = c.$sum; )*
                $( self.$per = c.$per; )*
            }

            /// Every counter with its field name, in the list's order (for the exporter).
            #[cfg(feature = "metrics")]
            pub(crate) fn named_counters(&self) -> impl Iterator<Item = (&'static str, u64)> {
                [
                    $( (stringify!($sum), self.$sum), )*
                    $( (stringify!($per), self.$per), )*
                    $( (stringify!($inb), self.$inb), )*
                ]
                .into_iter()
            }
        }

        impl Status {
            /// The totals of `contexts`, with the correlator-wide counts: channel sends nobody
            /// received, and output drops caused by input handles.
            pub(crate) fn sum(
                contexts: &[ContextStatus],
                dropped: u64,
                external_output_drops: u64,
            ) -> Totals {
                let mut t = Totals {
                    dropped,
                    ..Totals::default()
                };
                for c in contexts {
                    $( t.$sum += c.$sum; )*
                    $( t.$inb += c.$inb; )*
                }
                t.output_drops += external_output_drops;
                t
            }
        }
    };
}

// The one list of status counters (R9.1).
status_counters! {
    published and summed {
        /// Events dispatched (inbox events and routed events). Published when an inbox entry has
        /// been processed (with everything it routed): while a handler waits (for room in a full
        /// inbox or output, see [`ContextStatus::blocked_on_output`]) it shows the count as of
        /// the last entry finished.
        processed,
        /// Events routed by its handlers.
        routed,
        /// Entries its handlers put into inboxes (its own included).
        sent,
        /// Inbox entries taken.
        received,
        /// Events stamped before the context's clock under
        /// [`event_time`](crate::CorrelatorBuilder::event_time), processed at the clock's time.
        late_events,
        /// Live listeners.
        listeners,
        /// Live monitor instances.
        instances,
        /// Matches in progress of its expression listeners that have matched at least one event
        /// (a `when_all`'s fresh match, which has seen nothing, does not count). Bounded by the
        /// expressions (R7.6): a match under `within` ends at its bound.
        partial_matches,
        /// Events those matches hold (a copy of each event a template matched, outside `not`).
        partial_events,
        /// Partitions its stream queries' windows hold (R7.11): a sliding window's partition
        /// while it holds a value, a tumbling window's while the open window took one, a count
        /// window's from its first value.
        window_partitions,
        /// Values those windows hold (a tumbling window holds none: only its aggregates).
        window_values,
        /// Time its handlers spent waiting for room in full inboxes, in nanoseconds.
        blocked_ns,
        /// Events its handlers' emits and channel sends lost to full outputs' overflow policies
        /// ([`DropOldest`](crate::Overflow::DropOldest): an older event made room;
        /// [`DropNewest`](crate::Overflow::DropNewest): the new one was dropped). In
        /// [`Totals`], plus those lost by input handles' channel sends.
        output_drops,
        /// Panics of monitor code, each of which ended an instance or a listener: a handler, an
        /// `on_die` hook, a load hook or spawn initialiser, a listener's filter (a
        /// [`Pattern::filter`](crate::Pattern::filter) closure or an expression's templates), or
        /// the `Drop` of a monitor state or of what a handler closure captured. Contained: the
        /// context carries on (R6.8).
        handler_panics,
        /// Events lost or cut short by a panic of the event type's own code: an event's `kind()`
        /// or `key()` (or its kind's `Hash`/`Eq`) panicked while it was dispatched, so it was
        /// dropped (what its listeners had routed is still processed), or its `Drop` panicked
        /// (after it was processed), or, under event time, its `time()` panicked (it was
        /// processed at the context's clock). Contained: the context carries on (R6.8).
        events_dropped_by_panic,
    }
    published, per context {
        /// The deepest its route stack has been.
        max_route_depth,
    }
    read by the snapshot, summed {
        /// Entries accepted into its inbox and not yet fully processed.
        inbox_len,
        /// Entries taken into its inbox beyond capacity to avoid a deadlock (R5.2).
        overruns,
        /// Time its handlers spent waiting for room in full outputs with the
        /// [`Block`](crate::Overflow::Block) policy (an emit, or a channel send reaching an
        /// output), in nanoseconds; a wait still going on counts up to the snapshot (see
        /// [`ContextStatus::blocked_on_output`]).
        output_blocked_ns,
    }
}

/// The full [`Block`](crate::Overflow::Block) output a context waits for room in
/// ([`ContextStatus::blocked_on_output`], R9.1): which output, and since when. A context stuck
/// here is not processing its inbox; the wait ends when the output's receiver reads, is dropped,
/// or shutdown begins. A warning names the output once the wait lasts
/// [`output_block_warning`](crate::CorrelatorBuilder::output_block_warning).
///
/// ```
/// # use correlator::Status;
/// fn stuck(status: &Status) -> Vec<String> {
///     status
///         .contexts
///         .iter()
///         .filter_map(|c| {
///             let b = c.blocked_on_output.as_ref()?;
///             Some(format!("{} waits on {} for {} ms", c.name, b.name, b.waited_ns / 1_000_000))
///         })
///         .collect()
/// }
/// assert!(stuck(&Status::default()).is_empty());
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[non_exhaustive]
pub struct BlockedOnOutput {
    /// The output's id ([`OutputReceiver::id`](crate::OutputReceiver::id),
    /// [`Output::id`](crate::Output::id)).
    pub output: u64,
    /// The output's name ([`OutputReceiver::name`](crate::OutputReceiver::name)): `channel
    /// "<name>"` or `typed output of <type>`; empty if the output went away as the snapshot was
    /// taken.
    pub name: String,
    /// When the wait began (the wall clock's reading).
    pub since: SystemTime,
    /// How long it has lasted, at the snapshot, in nanoseconds (monotonic).
    pub waited_ns: u64,
}

/// Nanoseconds on a monotonic clock common to the process (from its first reading).
fn monotonic_ns() -> u64 {
    static ORIGIN: OnceLock<Instant> = OnceLock::new();
    ORIGIN.get_or_init(Instant::now).elapsed().as_nanos() as u64
}

/// What a context publishes about its waits for room in full `Block` outputs (R9.1): the output
/// it waits on now and since when, and the time its finished waits took.
///
/// A sequence lock (after Linux's seqlock): the context's thread is the only writer, and writes
/// only when a wait begins and ends (the slow path, never per event); `seq` is odd while it
/// writes. A reader retries until it reads the same even `seq` before and after the fields, so
/// it never pairs a finished wait's total with that same wait still running (the reported
/// `output_blocked_ns` never goes backwards). Every field: written by the context's thread,
/// read by anyone.
#[derive(Default)]
pub(crate) struct OutputWaitBoard {
    /// Even when stable, odd during an update.
    seq: AtomicU64,
    /// The output waited on now (its id, from 1); 0: none.
    output: AtomicU64,
    /// When the wait began ([`monotonic_ns`]).
    since_ns: AtomicU64,
    /// The time every finished wait took, in nanoseconds.
    done_ns: AtomicU64,
}

/// What a reader of an [`OutputWaitBoard`] sees.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct OutputWaitReading {
    /// The output waited on now and how long so far (ns).
    pub(crate) now: Option<(u64, u64)>,
    /// Every finished wait, plus the running one so far (ns).
    pub(crate) total_ns: u64,
}

impl OutputWaitBoard {
    /// The context begins to wait on `output`; returns the start ([`monotonic_ns`]).
    pub(crate) fn begin(&self, output: u64) -> u64 {
        let since = monotonic_ns();
        // AcqRel: the field stores below cannot move before the odd `seq`.
        self.seq.fetch_add(1, Ordering::AcqRel);
        self.since_ns.store(since, Ordering::Release);
        self.output.store(output.max(1), Ordering::Release);
        self.seq.fetch_add(1, Ordering::Release);
        since
    }

    /// The wait that began at `since` ended; returns how long it took (ns).
    pub(crate) fn end(&self, since: u64) -> u64 {
        let waited = monotonic_ns().saturating_sub(since);
        self.seq.fetch_add(1, Ordering::AcqRel);
        let done = self.done_ns.load(Ordering::Relaxed);
        self.done_ns
            .store(done.saturating_add(waited), Ordering::Release);
        self.output.store(0, Ordering::Release);
        self.seq.fetch_add(1, Ordering::Release);
        waited
    }

    /// What is published now (any thread).
    pub(crate) fn read(&self) -> OutputWaitReading {
        let mut tries = 0u32;
        loop {
            let before = self.seq.load(Ordering::Acquire);
            if before % 2 == 1 {
                // The writer is between two stores: spin briefly, then give it the core (it may
                // share ours).
                tries += 1;
                if tries < 64 {
                    crate::sync::spin_hint();
                } else {
                    crate::sync::yield_now();
                }
                continue;
            }
            // Acquire: a field written after `before` (by an update under way) makes the
            // re-read of `seq` below see that update's odd or later value.
            let output = self.output.load(Ordering::Acquire);
            let since = self.since_ns.load(Ordering::Acquire);
            let done = self.done_ns.load(Ordering::Acquire);
            if self.seq.load(Ordering::Relaxed) != before {
                continue;
            }
            if output == 0 {
                return OutputWaitReading {
                    now: None,
                    total_ns: done,
                };
            }
            let so_far = monotonic_ns().saturating_sub(since);
            return OutputWaitReading {
                now: Some((output, so_far)),
                total_ns: done.saturating_add(so_far),
            };
        }
    }
}

/// A snapshot of every context and the totals.
///
/// Take one at any time with [`Correlator::status`](crate::Correlator::status) (cheap enough for
/// every second, from any thread); [`Correlator::shutdown`](crate::Correlator::shutdown) returns
/// the final one. Counters are published by each context as it finishes an inbox entry (R9.1).
///
/// ```
/// use correlator::{ContextOptions, Correlator, Event, Monitor, Pattern, Scope};
/// #[derive(Clone, Debug)]
/// struct Reading(u32);
/// impl Event for Reading {
///     type Kind = ();
///     fn kind(&self) {}
/// }
/// struct Forward(correlator::ContextRef);
/// impl Monitor<Reading> for Forward {
///     fn on_load(&mut self, cx: &mut Scope<'_, Reading, Self>) {
///         cx.on_all(Pattern::any(), |m: &mut Forward, cx, r| {
///             let _ = cx.send_to(m.0, r.clone());
///         });
///     }
/// }
/// let c = Correlator::<Reading>::builder().build()?;
/// let store = c.create_context(ContextOptions::new("store"))?;
/// c.load(Forward(store))?;
/// let input = c.input();
/// c.start();
/// for i in 0..3 {
///     input.send_to(c.main(), Reading(i))?;
/// }
/// let status = c.shutdown()?;
/// let main = status.context(c.main()).expect("main is listed");
/// assert_eq!((main.processed, main.sent), (3, 3));
/// let stored = status.context(store).expect("store is listed");
/// assert_eq!((stored.name.as_str(), stored.received, stored.processed), ("store", 3, 3));
/// assert_eq!(status.totals.processed, 6);
/// assert!(status.shut_down);
/// println!("{status}"); // the one-line form the periodic status line logs
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(default))]
#[non_exhaustive]
pub struct Status {
    /// One entry per context, in id order.
    pub contexts: Vec<ContextStatus>,
    /// Sums over the contexts, plus correlator-wide counters.
    pub totals: Totals,
    /// Whether `start()` was called.
    pub started: bool,
    /// Whether the correlator has shut down.
    pub shut_down: bool,
}

impl Status {
    /// The status of one context.
    pub fn context(&self, ctx: ContextRef) -> Option<&ContextStatus> {
        self.contexts.iter().find(|c| c.context == Some(ctx))
    }

    /// A snapshot of `contexts` (in id order), with the correlator-wide counts and flags (see
    /// [`Status::sum`]).
    pub(crate) fn assemble(
        contexts: Vec<ContextStatus>,
        dropped: u64,
        external_output_drops: u64,
        started: bool,
        shut_down: bool,
    ) -> Self {
        let totals = Self::sum(&contexts, dropped, external_output_drops);
        Self {
            contexts,
            totals,
            started,
            shut_down,
        }
    }
}

/// What a snapshot reads of one context: the registry's facts about it, its inbox's figures,
/// and what its thread publishes. The facade reads them (it knows the registry); this module
/// makes a [`ContextStatus`] of them.
pub(crate) struct ContextReading<'a> {
    pub(crate) context: ContextRef,
    pub(crate) name: String,
    pub(crate) public: bool,
    pub(crate) core: Option<usize>,
    pub(crate) pinned: bool,
    pub(crate) inbox_len: u64,
    pub(crate) overruns: u64,
    pub(crate) stopped: bool,
    pub(crate) counters: &'a PublishedCounters,
    pub(crate) output_wait: &'a OutputWaitBoard,
}

impl ContextStatus {
    /// The status of one context from what was read of it; `output_name` names an output by
    /// its id (for the output it waits on, if any).
    pub(crate) fn assemble(
        reading: ContextReading<'_>,
        output_name: impl FnOnce(u64) -> Option<String>,
    ) -> Self {
        let mut status = ContextStatus {
            context: Some(reading.context),
            name: reading.name,
            public: reading.public,
            core: reading.core,
            pinned: reading.pinned,
            inbox_len: reading.inbox_len,
            overruns: reading.overruns,
            stopped: reading.stopped,
            ..ContextStatus::default()
        };
        status.set_published(reading.counters.load());
        // Published by the wait itself, so a wait going on counts up to now.
        let wait = reading.output_wait.read();
        status.output_blocked_ns = wait.total_ns;
        status.blocked_on_output = wait.now.map(|(output, waited_ns)| {
            let waited = std::time::Duration::from_nanos(waited_ns);
            BlockedOnOutput {
                output,
                name: output_name(output).unwrap_or_default(),
                since: SystemTime::now()
                    .checked_sub(waited)
                    .unwrap_or(std::time::UNIX_EPOCH),
                waited_ns,
            }
        });
        status
    }
}

impl fmt::Display for Status {
    /// One line in the spirit of a correlator's periodic log line.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let t = &self.totals;
        write!(
            f,
            "Correlator Status: contexts={} instances={} listeners={} processed={} routed={} \
             sent={} received={} queued={} overruns={} dropped={} blocked_ms={} \
             output_drops={} output_blocked_ms={}",
            self.contexts.len(),
            t.instances,
            t.listeners,
            t.processed,
            t.routed,
            t.sent,
            t.received,
            t.inbox_len,
            t.overruns,
            t.dropped,
            t.blocked_ns / 1_000_000,
            t.output_drops,
            t.output_blocked_ns / 1_000_000
        )
    }
}
