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
//!
//! Owns the pool, one job per file: this file the [`Pool`] API (creation, loading, status);
//! `keys` which member owns a key ([`partition_of`]) and the hasher of a member's key set;
//! `input` the sender, [`PoolInput`]; `dispatcher` the monitor in each member that creates and
//! forgets the per-key instances. Built on the public facade: imported by nothing but `lib.rs`.
//! May import the leaves, `checkpoint`, `correlator`, `deliver`, `input`, `monitor`, `shared`
//! and `status` (every module below it).

mod dispatcher;
mod input;
mod keys;

use crate::config::ContextOptions;
use crate::correlator::{status_of, Correlator};
use crate::deliver::{Links, NoPlaces};
use crate::error::Error;
use crate::event::Event;
use crate::id::ContextRef;
use crate::input::InputHandle;
use crate::monitor::Monitor;
use crate::shared::Shared;
use crate::status::ContextStatus;
// Plain std atomics: the pool is built on the public facade, not part of a loom-modelled protocol.
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use dispatcher::{Dispatcher, Factory};
pub use input::PoolInput;
#[cfg(feature = "checkpoint")]
pub use input::Resume;
use keys::member_in;
pub use keys::partition_of;

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

    /// A [`PoolInput`] whose events checkpoints count under `name`, per member (feature
    /// `checkpoint`; see [`Correlator::named_input`]): after a recovery,
    /// [`resume`](Self::resume) tells which events each member had taken.
    ///
    /// # Errors
    /// As [`Correlator::named_input`].
    #[cfg(feature = "checkpoint")]
    pub fn named_input(
        &self,
        correlator: &Correlator<E>,
        name: &str,
    ) -> Result<PoolInput<E>, crate::checkpoint::CheckpointError> {
        Ok(PoolInput {
            input: correlator.named_input(name)?,
            members: self.members.clone(),
            run: Vec::new(),
        })
    }

    /// Where to resume feeding the pool's named input `name` after `recovered` (feature
    /// `checkpoint`, SPEC R11.12): each member had taken its first so many events of it, a
    /// different number per member, since each took its own keys' events at its own pace. Read
    /// the source again from its start (or from a point every member had passed) and send only
    /// what [`Resume::taken`] says was not taken.
    #[cfg(feature = "checkpoint")]
    pub fn resume(&self, recovered: &crate::correlator::Recovered, name: &str) -> Resume {
        let left = self
            .members
            .iter()
            .map(|&m| {
                recovered
                    .inputs
                    .iter()
                    .filter(|i| i.input == name && i.context == m)
                    .map(|i| i.taken)
                    .sum()
            })
            .collect();
        Resume {
            left,
            members: self.members.clone(),
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
    /// key's events with [`Pattern::key`](crate::Pattern::key) (indexed: R6.9), or the instance sees every key of its
    /// member.
    ///
    /// # How an instance ends
    /// As any instance (R6.8): [`Scope::die`](crate::Scope::die), no listener left, a panic, shutdown. Its key is
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
                live: self.live.clone(),
                hook: 0,
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

#[cfg(test)]
mod tests;
