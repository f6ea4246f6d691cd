//! Partitioned contexts: a pool of contexts that share work by key, with one monitor instance per
//! key (the correlator's partitioned queries, without hand-written routing).
//!
//! # The pieces
//! * [`Correlator::create_pool`] creates `N` contexts in one call, the pool's *members*
//!   (partitions), pinned per the correlator's [`PinningPlan`](crate::PinningPlan).
//! * [`PoolInput`] sends each event to the member that owns its key: member
//!   [`partition_of`]`(event.key(), N)`. It wraps one [`InputHandle`], so it is one sender for the
//!   FIFO rule (R2.3): since every event of a key goes to the same inbox, the events of one key
//!   from one `PoolInput` are processed in the order they were sent.
//! * [`Pool::load_per_key`] loads a *dispatcher* into every member. It listens to the event kinds
//!   the user names and keeps a map from key to that key's instance; the first event of a key
//!   calls the user's factory and creates the key's instance in the member (see the method for
//!   exactly what the instance sees first). An instance ends as any other does (R6.8: `die`, no
//!   listener left, a panic, shutdown); its key is then forgotten, and the next event of that key
//!   creates a fresh instance.
//! * [`Pool::status`] gives each member's [`ContextStatus`] and its live key count.
//!
//! Members are ordinary contexts: instances in them route, send, subscribe to channels and emit to
//! output receivers as anywhere else (SPEC §3, §4).
//!
//! # Cost
//! A `PoolInput` send is one call of [`Event::key`], one [`partition_of`] (a few multiplications)
//! and the `InputHandle` send: no lock and no allocation. A dispatcher handles an event of a known
//! key with one hash lookup and one atomic load; creating a key's instance allocates (the
//! instance, its end flag, perhaps a larger map), as every instance's creation does.

use std::hash::{BuildHasherDefault, Hasher};
use std::panic::{self, AssertUnwindSafe};
use std::time::{Duration, Instant};

use crate::config::ContextOptions;
use crate::correlator::{status_of, Correlator};
use crate::deliver::{Links, NoPlaces};
use crate::entry::{DieReason, Effects};
#[cfg(feature = "async")]
use crate::error::SendBatchError;
use crate::error::{Error, SendError, SendErrorKind};
use crate::event::Event;
use crate::handle::InputHandle;
use crate::id::ContextRef;
use crate::monitor::{load_instance, Monitor, Scope};
use crate::pattern::Pattern;
use crate::shared::Shared;
use crate::state::State;
use crate::status::ContextStatus;
// Plain std atomics: the pool is built on the public facade, not part of a loom-modelled protocol.
use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::sync::Mutex;

/// The partition (member index, `0..partitions`) that owns `key` in a pool of `partitions`
/// members: `fmix64(key) % partitions`, where `fmix64` is the 64-bit finaliser of MurmurHash3
/// (`k ^= k >> 33; k *= 0xff51afd7ed558ccd; k ^= k >> 33; k *= 0xc4ceb9fe1a85ec53; k ^= k >> 33`).
///
/// The mapping is part of the contract: it is fixed (no random seed, unlike `std`'s hasher), so
/// a key belongs to the same member in every run and every process for a given `partitions`.
/// The mixing spreads consecutive keys (sequence numbers, device ids) evenly. Changing the number
/// of partitions moves most keys.
///
/// `partitions` of 0 is taken as 1 (a pool always has at least one member).
///
/// ```
/// use correlator::partition_of;
/// assert_eq!(partition_of(42, 1), 0);
/// assert!(partition_of(42, 4) < 4);
/// assert_eq!(partition_of(42, 4), partition_of(42, 4)); // stable
/// ```
#[inline]
pub fn partition_of(key: u64, partitions: usize) -> usize {
    (fmix64(key) % partitions.max(1) as u64) as usize
}

/// The member of `members` (a pool's, in partition order; never empty) that owns `key`: the one
/// mapping [`Pool::member_of`], [`PoolInput::member_of`] and every `PoolInput` send use.
#[inline]
fn member_in(members: &[ContextRef], key: u64) -> ContextRef {
    members[partition_of(key, members.len())]
}

/// MurmurHash3's 64-bit finaliser: a bijection of `u64` whose every output bit depends on every
/// input bit.
#[inline]
fn fmix64(mut k: u64) -> u64 {
    k ^= k >> 33;
    k = k.wrapping_mul(0xff51_afd7_ed55_8ccd);
    k ^= k >> 33;
    k = k.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    k ^ (k >> 33)
}

/// The hasher of a dispatcher's key map. Not `fmix64` itself: every key of a member has the same
/// `fmix64(key) % partitions`, so with a power-of-two pool its low bits would be constant and
/// fill only part of the table. Adding the golden-ratio constant first decorrelates the two.
#[derive(Default)]
struct KeyHasher(u64);

impl Hasher for KeyHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        // Only `u64` keys are hashed; this is the generic fallback.
        for &b in bytes {
            self.0 = fmix64(self.0 ^ u64::from(b));
        }
    }

    fn write_u64(&mut self, key: u64) {
        self.0 = fmix64(key.wrapping_add(0x9e37_79b9_7f4a_7c15));
    }
}

type KeySet = HashSet<u64, BuildHasherDefault<KeyHasher>>;

/// A pool of contexts (its *members*, or partitions) that share work by key, with one monitor
/// instance per key: the correlator's partitioned queries without hand-written routing.
///
/// * [`Correlator::create_pool`] creates the members in one call, pinned per the plan;
/// * [`Pool::input`] gives a [`PoolInput`], which sends each event to the member owning its key
///   ([`partition_of`]; per-key FIFO from each sender, R2.3);
/// * [`Pool::load_per_key`] creates, in the owning member, one instance per key from the first
///   event of the key; instances end as any other (R6.8), and the key is then forgotten;
/// * [`Pool::status`] gives each member's status and live key count (R9.1).
///
/// Members are ordinary contexts: instances in them route, send, subscribe to channels and emit
/// to output receivers as anywhere else. Cheap to clone (the clones describe the same pool); a
/// pool keeps a reference to its correlator's shared state, so none of its methods takes the
/// correlator.
pub struct Pool<E: Event> {
    /// The `sync` shim's `Arc` (loom's under `cfg(loom)`), as the registry hands it out.
    shared: crate::sync::Arc<Shared<E>>,
    members: Arc<[ContextRef]>,
    /// Live per-key instances in each member, over every factory loaded into the pool; written
    /// only by the member's own thread (when an instance starts and ends), read by `status`.
    live: Arc<[AtomicU64]>,
}

impl<E: Event> Clone for Pool<E> {
    fn clone(&self) -> Self {
        Self {
            shared: self.shared.clone(),
            members: self.members.clone(),
            live: self.live.clone(),
        }
    }
}

impl<E: Event> std::fmt::Debug for Pool<E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pool")
            .field("members", &self.members)
            .field("live", &self.live)
            .finish()
    }
}

impl<E: Event> Correlator<E> {
    /// Creates a pool of `partitions` contexts (its members) in one call, for work shared by key
    /// (see [`Pool`]). Member `i` is a context named `"{name}-{i}"` with the
    /// other settings of `options` (public flag, wait strategy); it is pinned per the
    /// correlator's [`PinningPlan`](crate::PinningPlan) (the plan's core for its context id, in
    /// creation order), or to `options`' core if it names one. A pool can be created before or
    /// after [`start`](Self::start).
    ///
    /// # Errors
    /// [`Error::InvalidPoolSize`] for 0 partitions or more than `max_contexts` still allows;
    /// as [`create_context`](Self::create_context) otherwise ([`Error::NoSuchCore`],
    /// [`Error::ThreadSpawn`], [`Error::ShutDown`], [`Error::TooManyContexts`] if another thread
    /// created contexts meanwhile). If a member cannot be created, the members already created
    /// stay as idle contexts until shutdown and the error is returned.
    ///
    /// ```
    /// use correlator::{ContextOptions, Correlator, Event};
    /// # #[derive(Clone, Debug)] struct Tick;
    /// # impl Event for Tick { type Kind = (); fn kind(&self) {} }
    /// let c = Correlator::<Tick>::builder().build()?;
    /// let pool = c.create_pool(ContextOptions::new("shard"), 4)?;
    /// assert_eq!(pool.partitions(), 4);
    /// assert_eq!(c.context_name(pool.members()[3]).as_deref(), Some("shard-3"));
    /// assert!(c.create_pool(ContextOptions::new("none"), 0).is_err());
    /// # Ok::<(), correlator::Error>(())
    /// ```
    pub fn create_pool(
        &self,
        options: ContextOptions,
        partitions: usize,
    ) -> Result<Pool<E>, Error> {
        let max = self.context_room();
        if partitions == 0 || partitions > max {
            return Err(Error::InvalidPoolSize {
                requested: partitions,
                max,
            });
        }
        let mut members = Vec::with_capacity(partitions);
        for i in 0..partitions {
            let mut member = options.clone();
            member.name = format!("{}-{i}", options.name);
            members.push(self.create_context(member)?);
        }
        Ok(Pool {
            shared: self.shared().clone(),
            members: members.into(),
            live: (0..partitions).map(|_| AtomicU64::new(0)).collect(),
        })
    }
}

impl<E: Event> Pool<E> {
    /// The number of members (partitions).
    pub fn partitions(&self) -> usize {
        self.members.len()
    }

    /// The members in partition order: member `i` owns the keys `k` with
    /// [`partition_of`]`(k, partitions) == i`.
    pub fn members(&self) -> &[ContextRef] {
        &self.members
    }

    /// The member that owns `key`.
    pub fn member_of(&self, key: u64) -> ContextRef {
        member_in(&self.members, key)
    }

    /// A sender that puts each event into the inbox of the member owning its key (see
    /// [`PoolInput`]): a new sender for the FIFO rule (R2.3).
    pub fn input(&self) -> PoolInput<E> {
        PoolInput {
            input: InputHandle::new(Links::new(self.shared.clone(), None, NoPlaces)),
            members: self.members.clone(),
            run: Vec::new(),
        }
    }

    /// Loads a per-key monitor factory into every member: each member gets a *dispatcher*
    /// instance listening (`on_all`) to the event kinds in `kinds`. For an event of those kinds
    /// with a key the member owns and no live instance, the dispatcher calls
    /// `factory(key, &event)` and creates the returned monitor as a new instance in the member,
    /// whose [`Monitor::on_load`] runs there. So at most one instance per key and factory lives in
    /// the whole pool at any time.
    ///
    /// # What the instance sees first
    /// The event that creates an instance is handed to the **factory**, not to the instance's
    /// listeners: `on_load` runs while that event is processed, and a listener registered then
    /// never matches that same event (R6.5). The factory decides what the instance makes of it
    /// (count it in the state, keep a copy for `on_load` to route or emit, ...). Every later event
    /// of the key reaches the listeners `on_load` registered, in arrival order. To have the
    /// instance's listeners see the first event too, use
    /// [`load_per_key_delivering`](Self::load_per_key_delivering). Listen for the
    /// key's events with [`Pattern::key`] (indexed: R6.9), or the instance sees every key of its
    /// member.
    ///
    /// # How an instance ends
    /// As any instance (R6.8): [`Scope::die`], no listener left, a panic, shutdown. Its key is
    /// then forgotten: the next event of the key calls the factory again and creates a fresh
    /// instance. The dispatcher registers its listeners before any instance of the key does,
    /// so for each event it decides first (R6.4): the event on which an instance dies is never
    /// also the first event of its successor.
    ///
    /// # Which events the dispatcher looks at
    /// Events of `kinds` that reach a member through any path (a [`PoolInput`], a `send_to`, a
    /// channel, a route). Events without a key and events of keys the member does not own are
    /// ignored by the dispatcher (other listeners of the member still see them). A factory that
    /// panics creates no instance (the panic is logged through `tracing`; the next event of the
    /// key tries again), and the dispatcher and the other keys carry on.
    ///
    /// # Errors
    /// [`Error::NoKinds`] for an empty `kinds`; as [`Correlator::load_in`] otherwise. If loading into a member fails, the
    /// members before it keep their dispatcher.
    ///
    /// ```
    /// use correlator::{ContextOptions, Correlator, Event, Monitor, Pattern, Scope};
    ///
    /// #[derive(Clone, Debug)]
    /// struct Reading { sensor: u64, value: u32 }
    /// impl Event for Reading {
    ///     type Kind = ();
    ///     fn kind(&self) {}
    ///     fn key(&self) -> Option<u64> { Some(self.sensor) }
    /// }
    ///
    /// /// Emits each sensor's running count of readings.
    /// struct Count { sensor: u64, n: u32, out: correlator::Channel }
    /// impl Monitor<Reading> for Count {
    ///     fn on_load(&mut self, cx: &mut Scope<'_, Reading, Self>) {
    ///         // The first reading went to the factory (n = 1).
    ///         cx.emit(self.out, Reading { sensor: self.sensor, value: self.n });
    ///         let mine = Pattern::kind(()).key(self.sensor);
    ///         cx.on_all(mine, |m: &mut Count, cx: &mut Scope<'_, Reading, Count>, _r: &Reading| {
    ///             m.n += 1;
    ///             cx.emit(m.out, Reading { sensor: m.sensor, value: m.n });
    ///         });
    ///     }
    /// }
    ///
    /// let c = Correlator::<Reading>::builder().build()?;
    /// let out = c.channel("counts")?;
    /// let rx = c.output(out);
    /// let pool = c.create_pool(ContextOptions::new("sensors"), 2)?;
    /// pool.load_per_key([()], move |sensor, _first: &Reading| Count { sensor, n: 1, out })?;
    /// let input = pool.input();
    /// c.start();
    /// for sensor in [7, 8, 7, 7] {
    ///     input.send(Reading { sensor, value: 0 })?;
    /// }
    /// c.shutdown()?;
    /// let sevens: Vec<u32> = rx.iter().filter(|r| r.sensor == 7).map(|r| r.value).collect();
    /// assert_eq!(sevens, [1, 2, 3]);
    /// assert_eq!(pool.status().live_keys, 0); // shutdown ended them
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn load_per_key<M, F>(
        &self,
        kinds: impl IntoIterator<Item = E::Kind>,
        factory: F,
    ) -> Result<(), Error>
    where
        M: Monitor<E>,
        F: Fn(u64, &E) -> M + Send + Sync + 'static,
    {
        self.load_dispatchers(kinds, factory, false)
    }

    /// [`load_per_key`](Self::load_per_key), and the event that creates a key's instance also
    /// reaches that instance's listeners: the factory gets it as before, then, once the
    /// instance's [`Monitor::on_load`] has returned and what it asked for has taken effect (its
    /// listeners are registered), the event is offered to the instance's ordinary listeners
    /// (`on`, `on_all`, `when`, `when_all`; not `unmatched` or `completed` ones) that it
    /// matches, in registration order, exactly once.
    ///
    /// # Where it falls in the processing order
    /// The delivery is the dispatcher's turn in the event's dispatch (R6.4): after the member's
    /// listeners that fire before the dispatcher, before every listener that fires after it, and
    /// before anything routed while the event is processed (what the dispatcher's factory,
    /// `on_load` and the delivered listeners route then runs in routing order, R3.2). It is the
    /// one documented exception to R6.5: these listeners were registered while the event was
    /// processed and still see it; no other listener registered meanwhile does, and neither does
    /// a listener the delivered handlers register. The event is not routed again: it counts once
    /// in `processed`, and not in `routed`.
    ///
    /// # Errors
    /// As [`load_per_key`](Self::load_per_key).
    ///
    /// ```
    /// use correlator::{ContextOptions, Correlator, Event, Monitor, Pattern, Scope};
    ///
    /// #[derive(Clone, Debug)]
    /// struct Reading { sensor: u64, value: u32 }
    /// impl Event for Reading {
    ///     type Kind = ();
    ///     fn kind(&self) {}
    ///     fn key(&self) -> Option<u64> { Some(self.sensor) }
    /// }
    ///
    /// /// Emits each sensor's running count of readings: its listener sees the first one too.
    /// struct Count { sensor: u64, n: u32, out: correlator::Channel }
    /// impl Monitor<Reading> for Count {
    ///     fn on_load(&mut self, cx: &mut Scope<'_, Reading, Self>) {
    ///         let mine = Pattern::kind(()).key(self.sensor);
    ///         cx.on_all(mine, |m: &mut Count, cx: &mut Scope<'_, Reading, Count>, _r: &Reading| {
    ///             m.n += 1;
    ///             cx.emit(m.out, Reading { sensor: m.sensor, value: m.n });
    ///         });
    ///     }
    /// }
    ///
    /// let c = Correlator::<Reading>::builder().build()?;
    /// let out = c.channel("counts")?;
    /// let rx = c.output(out);
    /// let pool = c.create_pool(ContextOptions::new("sensors"), 2)?;
    /// pool.load_per_key_delivering([()], move |sensor, _first: &Reading| Count { sensor, n: 0, out })?;
    /// let input = pool.input();
    /// c.start();
    /// for sensor in [7, 8, 7, 7] {
    ///     input.send(Reading { sensor, value: 0 })?;
    /// }
    /// c.shutdown()?;
    /// let sevens: Vec<u32> = rx.iter().filter(|r| r.sensor == 7).map(|r| r.value).collect();
    /// assert_eq!(sevens, [1, 2, 3]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn load_per_key_delivering<M, F>(
        &self,
        kinds: impl IntoIterator<Item = E::Kind>,
        factory: F,
    ) -> Result<(), Error>
    where
        M: Monitor<E>,
        F: Fn(u64, &E) -> M + Send + Sync + 'static,
    {
        self.load_dispatchers(kinds, factory, true)
    }

    /// Loads a dispatcher into every member (see [`load_per_key`](Self::load_per_key)); `deliver`
    /// says whether a key's first event also goes to its new instance's listeners.
    fn load_dispatchers<M, F>(
        &self,
        kinds: impl IntoIterator<Item = E::Kind>,
        factory: F,
        deliver: bool,
    ) -> Result<(), Error>
    where
        M: Monitor<E>,
        F: Fn(u64, &E) -> M + Send + Sync + 'static,
    {
        // One sender for every member's dispatcher, as `Correlator::load_in` would use.
        let input = InputHandle::new(Links::new(self.shared.clone(), None, NoPlaces));
        let kinds: Vec<E::Kind> = kinds.into_iter().collect();
        if kinds.is_empty() {
            return Err(Error::NoKinds);
        }
        let factory: Arc<Factory<E, M>> = Arc::new(factory);
        for (member, &ctx) in self.members.iter().enumerate() {
            let dispatcher = Dispatcher {
                kinds: kinds.clone(),
                member,
                partitions: self.members.len(),
                factory: factory.clone(),
                keys: KeySet::default(),
                ended: Arc::default(),
                live: self.live.clone(),
                deliver,
            };
            input.load_in(ctx, dispatcher)?;
        }
        Ok(())
    }

    /// Each member's status and live key count (R9.1), from one [`Correlator::status`] snapshot.
    pub fn status(&self) -> PoolStatus {
        let all = status_of(&self.shared);
        let members: Vec<PoolMemberStatus> = self
            .members
            .iter()
            .zip(self.live.iter())
            .map(|(&ctx, live)| PoolMemberStatus {
                context: all.context(ctx).cloned().unwrap_or_default(),
                live_keys: live.load(Ordering::Relaxed),
            })
            .collect();
        PoolStatus {
            live_keys: members.iter().map(|m| m.live_keys).sum(),
            members,
        }
    }
}

/// A pool's status: see [`Pool::status`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct PoolStatus {
    /// One entry per member, in partition order.
    pub members: Vec<PoolMemberStatus>,
    /// Live per-key instances in the whole pool (the sum over the members).
    pub live_keys: u64,
}

/// One pool member's status.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct PoolMemberStatus {
    /// The member's context counters.
    pub context: ContextStatus,
    /// Per-key instances alive in the member (created by any factory loaded into the pool, not
    /// yet ended).
    pub live_keys: u64,
}

/// Sends each event to the pool member that owns its key ([`partition_of`]); made by
/// [`Pool::input`].
///
/// It is one sender for the FIFO rule (R2.3), like the [`InputHandle`] it wraps: the events of
/// one key sent through one `PoolInput` all go to the same inbox and are processed in the order
/// they were sent. Events of different `PoolInput`s, and of different keys, are not ordered with
/// respect to each other. `Send` but not `Sync`: clone it for each thread (a clone is a new
/// sender).
///
/// An event whose [`Event::key`] is `None` belongs to no partition: every send refuses it with
/// [`SendErrorKind::NoKey`] and hands it back (send it to a context of your choice with
/// [`InputHandle::send_to`] if that is what you want).
pub struct PoolInput<E: Event> {
    input: InputHandle<E>,
    members: Arc<[ContextRef]>,
    /// The run of a batch now being sent to one member ([`send_batch_async`]); empty between
    /// sends, kept for its capacity.
    ///
    /// [`send_batch_async`]: PoolInput::send_batch_async
    #[cfg_attr(not(feature = "async"), allow(dead_code))]
    run: Vec<E>,
}

impl<E: Event> PoolInput<E> {
    /// The member owning `event`'s key, or the event back when it has none.
    #[inline]
    fn owner(&self, event: E) -> Result<(ContextRef, E), SendError<E>> {
        match event.key() {
            Some(key) => Ok((self.member_of(key), event)),
            None => Err(SendError::new(SendErrorKind::NoKey, None, event)),
        }
    }

    /// Appends `event` to the inbox of the member owning its key, waiting for room if it is full
    /// (as [`InputHandle::send_to`]).
    ///
    /// # Errors
    /// [`SendErrorKind::NoKey`] for an event without a key; otherwise as
    /// [`InputHandle::send_to`]. The event comes back in the error.
    #[inline]
    pub fn send(&self, event: E) -> Result<(), SendError<E>> {
        let (ctx, event) = self.owner(event)?;
        self.input.send_to(ctx, event)
    }

    /// Like [`send`](Self::send) if there is room now (as [`InputHandle::try_send_to`]).
    ///
    /// # Errors
    /// `Full` (with the event) when the member's inbox is at capacity; otherwise as
    /// [`send`](Self::send).
    #[inline]
    pub fn try_send(&self, event: E) -> Result<(), SendError<E>> {
        let (ctx, event) = self.owner(event)?;
        self.input.try_send_to(ctx, event)
    }

    /// Like [`send`](Self::send), waiting at most `timeout` for room (as
    /// [`InputHandle::send_to_timeout`]).
    ///
    /// # Errors
    /// `Timeout` (with the event) when no room appeared in time; otherwise as
    /// [`send`](Self::send).
    pub fn send_timeout(&self, event: E, timeout: Duration) -> Result<(), SendError<E>> {
        let deadline = Instant::now() + timeout;
        let (ctx, event) = self.owner(event)?;
        self.input.send_to_timeout(
            ctx,
            event,
            deadline.saturating_duration_since(Instant::now()),
        )
    }

    /// The member that owns `key`.
    #[inline]
    pub fn member_of(&self, key: u64) -> ContextRef {
        member_in(&self.members, key)
    }
}

#[cfg(feature = "async")]
impl<E: Event> PoolInput<E> {
    /// [`send`](Self::send) as a future: appends `event` to the inbox of the member owning its
    /// key, waiting for room as a task, as [`InputHandle::send_to_async`] does (which it calls):
    /// no executor thread is blocked, the send holds no place while it waits, and dropping the
    /// future before it completes sends nothing. Per-key FIFO (R2.3) holds with this sender's
    /// other sends (the future borrows it mutably).
    ///
    /// # Errors
    /// [`SendErrorKind::NoKey`] for an event without a key (at once); otherwise as
    /// [`InputHandle::send_to_async`]. The event comes back in the error.
    ///
    /// # Example
    /// ```
    /// use correlator::{ContextOptions, Correlator, Event};
    ///
    /// #[derive(Clone, Debug)]
    /// struct Swipe { card: u64 }
    /// impl Event for Swipe {
    ///     type Kind = ();
    ///     fn kind(&self) {}
    ///     fn key(&self) -> Option<u64> { Some(self.card) }
    /// }
    ///
    /// # fn block_on<F: std::future::Future>(f: F) -> F::Output {
    /// #     struct Unpark(std::thread::Thread);
    /// #     impl std::task::Wake for Unpark {
    /// #         fn wake(self: std::sync::Arc<Self>) { self.0.unpark() }
    /// #     }
    /// #     let waker = std::task::Waker::from(std::sync::Arc::new(Unpark(std::thread::current())));
    /// #     let mut cx = std::task::Context::from_waker(&waker);
    /// #     let mut f = std::pin::pin!(f);
    /// #     loop {
    /// #         if let std::task::Poll::Ready(v) = f.as_mut().poll(&mut cx) { return v; }
    /// #         std::thread::park();
    /// #     }
    /// # }
    /// let c = Correlator::<Swipe>::builder().inbox_capacity(4).build()?;
    /// let pool = c.create_pool(ContextOptions::new("cards"), 2)?;
    /// let mut input = pool.input();
    /// c.start();
    /// let mut batch: Vec<Swipe> = (0..50).map(|card| Swipe { card }).collect();
    /// block_on(async {
    ///     input.send_async(Swipe { card: 7 }).await?;
    ///     input.send_batch_async(&mut batch).await?;
    ///     Ok::<(), Box<dyn std::error::Error>>(())
    /// })?;
    /// assert!(batch.is_empty());
    /// assert_eq!(c.shutdown()?.totals.processed, 51);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn send_async(
        &mut self,
        event: E,
    ) -> impl std::future::Future<Output = Result<(), SendError<E>>> + Send + '_ {
        let owner = self.owner(event);
        async move {
            let (ctx, event) = owner?;
            self.input.send_to_async(ctx, event).await
        }
    }

    /// Sends every event of `events`, in order, each to the member owning its key, as a future:
    /// each run of consecutive events for the same member goes as one
    /// [`InputHandle::send_batch_to_async`] (as many places as are free reserved at once,
    /// waiting for room as a task when none is). Per-key FIFO (R2.3) holds: a key's events all
    /// go to one inbox, in their order. On success the vector is empty. Dropped before it
    /// completes, it has sent the events no longer in `events` and none of the others, which
    /// stay in the vector in their order.
    ///
    /// # Errors
    /// [`SendErrorKind::NoKey`] at the first event without a key (the events before it were
    /// sent); otherwise as [`InputHandle::send_batch_to_async`]. The error says how many events
    /// went; the others are still in `events`, in order.
    // The explicit form states that the future is `Send`, which an `async fn` would leave implied.
    #[allow(clippy::manual_async_fn)]
    pub fn send_batch_async<'a>(
        &'a mut self,
        events: &'a mut Vec<E>,
    ) -> impl std::future::Future<Output = Result<(), SendBatchError>> + Send + 'a {
        async move {
            let mut guard = RunGuard {
                run: std::mem::take(&mut self.run),
                events,
            };
            let mut sent = 0;
            while let Some(first) = guard.events.first() {
                let Some(key) = first.key() else {
                    return Err(SendBatchError::new(SendErrorKind::NoKey, None, sent));
                };
                let ctx = member_in(&self.members, key);
                let len = 1 + guard.events[1..]
                    .iter()
                    .take_while(|e| e.key().is_some_and(|k| member_in(&self.members, k) == ctx))
                    .count();
                guard.run.extend(guard.events.drain(..len));
                if let Err(e) = self.input.send_batch_to_async(ctx, &mut guard.run).await {
                    return Err(SendBatchError::new(e.kind(), e.target(), sent + e.sent()));
                }
                sent += len;
            }
            self.run = std::mem::take(&mut guard.run);
            Ok(())
        }
    }
}

/// The events of a batch's run not yet sent go back to the front of the caller's vector, in
/// order, however the send ends (an error, or its future dropped).
#[cfg(feature = "async")]
struct RunGuard<'a, E> {
    run: Vec<E>,
    events: &'a mut Vec<E>,
}

#[cfg(feature = "async")]
impl<E> Drop for RunGuard<'_, E> {
    fn drop(&mut self) {
        if !self.run.is_empty() {
            self.events.splice(0..0, self.run.drain(..));
        }
    }
}

impl<E: Event> Clone for PoolInput<E> {
    /// A new, independent sender to the same pool.
    fn clone(&self) -> Self {
        Self {
            input: self.input.clone(),
            members: self.members.clone(),
            run: Vec::new(),
        }
    }
}

/// A per-key factory, shared by the dispatchers of every member.
type Factory<E, M> = dyn Fn(u64, &E) -> M + Send + Sync;

/// The keys whose instances ended since the dispatcher last looked: pushed by the instances'
/// `on_die` wrappers, taken by the dispatcher before its next lookup. Both run on the member's own
/// thread (an instance is a local spawn of the dispatcher and never leaves its context, R6.8), so
/// the lock is never contended; it is taken once per ended instance, never per event.
#[derive(Default)]
struct EndedKeys {
    /// Whether `keys` may hold something: the one test an event pays. Relaxed: one thread.
    any: AtomicBool,
    keys: Mutex<Vec<u64>>,
}

/// One member's dispatcher: creates the per-key instances of one factory (see
/// [`Pool::load_per_key`]).
struct Dispatcher<E: Event, M> {
    kinds: Vec<E::Kind>,
    /// This member's partition index.
    member: usize,
    partitions: usize,
    factory: Arc<Factory<E, M>>,
    /// The keys with a live instance. A key leaves when its instance's `on_die` wrapper reports
    /// it through `ended` (taken before the next lookup), so the set holds live keys only and an
    /// event costs one lookup in it: no per-key flag to load from another allocation.
    keys: KeySet,
    /// Keys whose instance ended, not yet taken out of `keys`.
    ended: Arc<EndedKeys>,
    live: Arc<[AtomicU64]>,
    /// Whether a key's first event also goes to its new instance's listeners
    /// ([`Pool::load_per_key_delivering`]).
    deliver: bool,
}

impl<E: Event, M: Monitor<E>> Monitor<E> for Dispatcher<E, M> {
    fn on_load(&mut self, cx: &mut Scope<'_, E, Self>) {
        for &kind in &self.kinds {
            cx.on_all(Pattern::kind(kind), Self::dispatch);
        }
    }
}

impl<E: Event, M: Monitor<E>> Dispatcher<E, M> {
    /// The handler of every kind the dispatcher listens to.
    fn dispatch(&mut self, cx: &mut Scope<'_, E, Self>, event: &E) {
        // A `key()` that panics here drops the event (counted in `events_dropped_by_panic`) as
        // the engine's own call would; the dispatcher carries on.
        let Some(key) = crate::context::event_code(|| event.key()) else {
            return;
        };
        if partition_of(key, self.partitions) != self.member {
            return;
        }
        if self.ended.any.load(Ordering::Relaxed) {
            self.forget_ended();
        }
        if self.keys.contains(&key) {
            return; // The key's instance is alive: its own listeners take the event.
        }
        self.create(cx, key, event);
    }

    /// Takes the keys whose instances ended out of `keys`: their next event creates a fresh one.
    #[cold]
    fn forget_ended(&mut self) {
        self.ended.any.store(false, Ordering::Relaxed);
        let mut ended = self.ended.keys.lock().unwrap_or_else(|e| e.into_inner());
        for key in ended.drain(..) {
            self.keys.remove(&key);
        }
    }

    /// Creates the instance of `key`, its state made by the factory from `first`.
    #[cold]
    fn create(&mut self, cx: &mut Scope<'_, E, Self>, key: u64, first: &E) {
        // Copied before anything is recorded for the key: the event's `Clone` is its own code,
        // and a panic there drops the event as a `key()` panic does, leaving no trace of the key.
        let deliver = self
            .deliver
            .then(|| crate::context::event_code(|| first.clone()));
        let factory = &self.factory;
        let monitor = match panic::catch_unwind(AssertUnwindSafe(|| factory(key, first))) {
            Ok(m) => m,
            Err(payload) => {
                tracing::error!(
                    context = cx.context().id(),
                    key,
                    message = %crate::context::panic_message(&*payload),
                    "a per-key factory panicked; no instance was created for the key"
                );
                return;
            }
        };
        self.keys.insert(key);
        let ended = self.ended.clone();
        let mut new = load_instance(monitor);
        new.deliver = deliver;
        let (live, member) = (self.live.clone(), self.member);
        let init = new.init;
        let started = live.clone();
        // Counted when the instance exists: a spawn dropped at shutdown creates none.
        new.init = Box::new(move |state: &mut State, fx: &mut Effects<E>| {
            started[member].fetch_add(1, Ordering::Relaxed);
            init(state, fx);
        });
        let mut on_die = new.on_die;
        new.on_die = Box::new(
            move |state: &mut State, reason: &DieReason, fx: &mut Effects<E>| {
                // The key is reported before the user's hook runs, so however the hook ends
                // (its panic is the engine's to contain and report, R6.8) no stale key is left;
                // `on_die` runs exactly once (R6.8), so the key is reported once.
                ended
                    .keys
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .push(key);
                ended.any.store(true, Ordering::Relaxed);
                live[member].fetch_sub(1, Ordering::Relaxed);
                on_die(state, reason, fx);
            },
        );
        cx.spawn_new(new);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // The mapping is a contract (documented on `partition_of`): these values must never change.
    #[test]
    fn partition_of_is_fixed_and_spread() {
        assert_eq!(fmix64(0), 0);
        assert_eq!(fmix64(1), 0xb456_bcfc_34c2_cb2c);
        assert_eq!(
            (0..8).map(|k| partition_of(k, 4)).collect::<Vec<_>>(),
            [0, 0, 3, 2, 1, 1, 3, 1]
        );
        assert_eq!(partition_of(7, 0), 0);
        let mut per = [0u32; 4];
        for k in 0..4000 {
            per[partition_of(k, 4)] += 1;
        }
        assert!(per.iter().all(|&n| (900..1100).contains(&n)), "{per:?}");
    }
}
