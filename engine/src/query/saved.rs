//! The saved form of a stream query's windows and of a join's (SPEC R11.10, R11.11; feature
//! `checkpoint`).
//!
//! A query's windows hold values of the query's own type `P` and aggregates with closures in
//! them, so a query is saved only when it was built [`persistent`](super::Query::persistent),
//! where `P: Serialize` and the aggregate is a [`PersistentAggregate`]: that step captures the
//! two functions below for its types (`WindowsCodec`), and the type-erased listener calls them.
//! A join's windows hold events, which the correlator's `EventCodec` saves: every join is
//! saved.
//!
//! What is saved is what decides the rows and pairs still to come, exactly: every partition's
//! values with their times, its aggregate's state (not rebuilt from the values, which would
//! lose the rounding of the values taken off), the tumbling count, the queue of expiries with
//! its stale entries (they decide when the query's timer fires), the next periodic row, and the
//! timer the listener has pending. Not saved: the map's order, which is why a persistent query
//! hands the rows of one time in key order (`Windows::in_key_order`). A restore checks the
//! window's shape and period against the saved ones and builds everything before it replaces
//! anything, so an error leaves the listener as registered.
//!
//! May import the leaves and the other parts of `query`.

use std::collections::VecDeque;

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use super::aggregate::PersistentAggregate;
use super::join::JoinWindows;
use super::windows::{Part, PartKey, Shape, Windows, WindowsHeld};
use crate::hash::KindMap;
use crate::time::Time;

/// Why a query listener's windows were not saved.
pub(crate) enum Unsaved {
    /// The query was not built `persistent`.
    NotPersistent,
    /// Its values' `Serialize` failed: the reason.
    Encode(String),
}

/// Its windows' bytes, with the time of the listener's pending timer.
type SaveFn<P, A> = fn(&Windows<P, A>, Option<Time>) -> Result<Vec<u8>, String>;

/// Puts back the windows `bytes` saved; returns the pending timer's time.
type RestoreFn<P, A> = fn(&mut Windows<P, A>, &[u8]) -> Result<Option<Time>, String>;

/// A persistent query's save and restore, for its value and aggregate types.
pub(crate) struct WindowsCodec<P, A> {
    pub(crate) save: SaveFn<P, A>,
    pub(crate) restore: RestoreFn<P, A>,
}

impl<P, A> Clone for WindowsCodec<P, A> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<P, A> Copy for WindowsCodec<P, A> {}

impl<P, A> WindowsCodec<P, A>
where
    P: Serialize + DeserializeOwned,
    A: PersistentAggregate<P>,
{
    pub(crate) fn new() -> Self {
        Self {
            save: save_windows::<P, A>,
            restore: restore_windows::<P, A>,
        }
    }
}

/// A query's windows, saved. `V` is `&P` when saving and `P` when restoring.
#[derive(Serialize, Deserialize)]
struct WindowsSaved<V, S> {
    /// `(0 sliding | 1 tumbling | 2 count, length in ns or values)`.
    shape: (u8, u64),
    every: Option<u64>,
    /// In key order.
    parts: Vec<PartSaved<V, S>>,
    /// `(leaves at, key)`, oldest first, stale entries included.
    expiry: Vec<(u64, PartKey)>,
    next_emit: Option<u64>,
    held: (u64, u64),
    armed: Option<u64>,
}

#[derive(Serialize, Deserialize)]
struct PartSaved<V, S> {
    key: PartKey,
    /// `(taken at, value)`, oldest first.
    values: Vec<(u64, V)>,
    agg: S,
    taken: u64,
    newest: u64,
}

fn shape_code(shape: Shape) -> (u8, u64) {
    match shape {
        Shape::Sliding(d) => (0, Time::from(d).as_nanos()),
        Shape::Tumbling(d) => (1, Time::from(d).as_nanos()),
        Shape::Count(n) => (2, n as u64),
    }
}

fn save_windows<P, A>(w: &Windows<P, A>, armed: Option<Time>) -> Result<Vec<u8>, String>
where
    P: Serialize,
    A: PersistentAggregate<P>,
{
    let mut parts: Vec<PartSaved<&P, A::Saved>> = w
        .parts
        .iter()
        .map(|(&key, part)| PartSaved {
            key,
            values: part.values.iter().map(|(t, v)| (t.as_nanos(), v)).collect(),
            agg: part.agg.save(),
            taken: part.taken,
            newest: part.newest.as_nanos(),
        })
        .collect();
    parts.sort_unstable_by_key(|p| p.key);
    let saved = WindowsSaved {
        shape: shape_code(w.shape),
        every: w.every.map(|p| Time::from(p).as_nanos()),
        parts,
        expiry: w.expiry.iter().map(|&(t, k)| (t.as_nanos(), k)).collect(),
        next_emit: w.next_emit.map(Time::as_nanos),
        held: (w.held.partitions, w.held.values),
        armed: armed.map(Time::as_nanos),
    };
    postcard::to_allocvec(&saved).map_err(|e| e.to_string())
}

fn restore_windows<P, A>(w: &mut Windows<P, A>, bytes: &[u8]) -> Result<Option<Time>, String>
where
    P: DeserializeOwned,
    A: PersistentAggregate<P>,
{
    let saved: WindowsSaved<P, A::Saved> =
        postcard::from_bytes(bytes).map_err(|e| e.to_string())?;
    if saved.shape != shape_code(w.shape)
        || saved.every != w.every.map(|p| Time::from(p).as_nanos())
    {
        return Err("its stream query has another window or period than the saved one".to_owned());
    }
    let mut parts = KindMap::default();
    for p in saved.parts {
        let mut agg = w.proto.clone();
        agg.restore(p.agg)?;
        let values: VecDeque<(Time, P)> = p
            .values
            .into_iter()
            .map(|(t, v)| (Time::from_nanos(t), v))
            .collect();
        let part = Part {
            values,
            agg,
            taken: p.taken,
            newest: Time::from_nanos(p.newest),
        };
        parts.insert(p.key, part);
    }
    w.parts = parts;
    w.expiry = saved
        .expiry
        .into_iter()
        .map(|(t, k)| (Time::from_nanos(t), k))
        .collect();
    w.next_emit = saved.next_emit.map(Time::from_nanos);
    w.held = WindowsHeld {
        partitions: saved.held.0,
        values: saved.held.1,
    };
    Ok(saved.armed.map(Time::from_nanos))
}

/// A join's windows, saved: per side, `(key, encoded events oldest first)` in key order.
#[derive(Serialize, Deserialize)]
struct JoinSaved {
    within: u64,
    sides: [Vec<(u64, Vec<Vec<u8>>)>; 2],
    /// `(leaves at, side, key)`, oldest first.
    expiry: Vec<(u64, u8, u64)>,
    held: (u64, u64),
    armed: Option<u64>,
}

impl<E: Clone> JoinWindows<E> {
    /// Its windows' bytes, the events through `encode`, with the time of the listener's
    /// pending timer.
    pub(crate) fn save(
        &self,
        armed: Option<Time>,
        encode: &mut dyn FnMut(&E, &mut Vec<u8>),
    ) -> Result<Vec<u8>, String> {
        let sides = [0, 1].map(|side| {
            let mut keys: Vec<(u64, Vec<Vec<u8>>)> = self.sides[side]
                .iter()
                .map(|(&key, events)| {
                    let bytes = events.iter().map(|e| {
                        let mut out = Vec::new();
                        encode(e, &mut out);
                        out
                    });
                    (key, bytes.collect())
                })
                .collect();
            keys.sort_unstable_by_key(|k| k.0);
            keys
        });
        let saved = JoinSaved {
            within: Time::from(self.within).as_nanos(),
            sides,
            expiry: self
                .expiry
                .iter()
                .map(|&(t, side, key)| (t.as_nanos(), side, key))
                .collect(),
            held: (self.held.partitions, self.held.values),
            armed: armed.map(Time::as_nanos),
        };
        postcard::to_allocvec(&saved).map_err(|e| e.to_string())
    }

    /// Puts back the windows `bytes` saved, the events through `decode`; returns the pending
    /// timer's time.
    pub(crate) fn restore(
        &mut self,
        bytes: &[u8],
        decode: &dyn Fn(&[u8]) -> Result<E, String>,
    ) -> Result<Option<Time>, String> {
        let saved: JoinSaved = postcard::from_bytes(bytes).map_err(|e| e.to_string())?;
        if saved.within != Time::from(self.within).as_nanos() {
            return Err("its join has another length than the saved one".to_owned());
        }
        let mut sides = [KindMap::default(), KindMap::default()];
        for (side, keys) in saved.sides.into_iter().enumerate() {
            for (key, events) in keys {
                let events = events
                    .iter()
                    .map(|b| decode(b))
                    .collect::<Result<VecDeque<E>, String>>()?;
                sides[side].insert(key, events);
            }
        }
        self.sides = sides;
        self.expiry = saved
            .expiry
            .into_iter()
            .map(|(t, side, key)| (Time::from_nanos(t), side, key))
            .collect();
        self.held = WindowsHeld {
            partitions: saved.held.0,
            values: saved.held.1,
        };
        Ok(saved.armed.map(Time::from_nanos))
    }
}
