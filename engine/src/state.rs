//! A monitor instance's state, type-erased, with its type recorded beside it, held in place
//! when it is small.
//!
//! Every handler call recovers `&mut M` from the erased state. `dyn Any::downcast_mut` asks the
//! value for its type through a virtual call on every event; [`State`] instead names a static
//! table of its type ([`Vt`]: the `TypeId`, the drop, the name), so the check on the hot path is
//! a comparison of two pointers (with the `TypeId`s compared only where the compiler made two
//! copies of one table). It stays a check: a mismatch (which no code path produces) gives
//! `None`, as `downcast_mut` would.
//!
//! # In place, in one cache line
//! A state of at most [`INLINE`] bytes and at most 8-byte alignment (a key, a count, an
//! `Option` of the first event, an output handle: what most per-key monitors hold) lives in the
//! `State` itself; a larger or more strictly aligned one is boxed, and the `State` holds the
//! box's pointer. A `State` is 64 bytes, one line where a context keeps its instances' states:
//! in a vector of their own, aligned (`context::store`), so that an event's handler reads its
//! state, its type's table aside, from one line, where the boxed state had been one more cold
//! line after the instance record (and one more allocation for every instance created). Which
//! case applies is known from the type alone ([`fits`]), so `downcast_mut` compiles to one of
//! the two without a branch.
//!
//! Moving a `State` moves an in-place value bytewise, which is what moving any Rust value does;
//! nothing keeps a pointer into a state across a move (a handler's `&mut M` lasts for its call).
//!
//! Owns the type-erased state. A leaf: imports nothing from the engine.

use std::any::TypeId;
use std::mem::{align_of, size_of, MaybeUninit};

/// The largest state held in place, bytes: a 64-byte `State` less its table pointer.
pub(crate) const INLINE: usize = 56;

/// Whether a state of type `M` is held in place (else boxed).
const fn fits<M>() -> bool {
    size_of::<M>() <= INLINE && align_of::<M>() <= align_of::<u64>()
}

/// What a [`State`] knows of its value's type: one static table per type.
struct Vt {
    /// A function rather than the value: `TypeId::of` is `const` only from Rust 1.91, above the
    /// crate's MSRV.
    type_id: fn() -> TypeId,
    name: fn() -> &'static str,
    /// Drops the value that the storage holds (in place, or through its box).
    drop: unsafe fn(*mut Storage),
    boxed: bool,
}

/// The table of `M`.
fn vt<M: 'static>() -> &'static Vt {
    const {
        &Vt {
            type_id: TypeId::of::<M>,
            name: std::any::type_name::<M>,
            drop: drop_value::<M>,
            boxed: !fits::<M>(),
        }
    }
}

/// The value, or the pointer to its box, in the first bytes.
type Storage = MaybeUninit<[u64; INLINE / 8]>;

/// Drops the `M` that `storage` holds.
///
/// # Safety
/// `storage` holds a live `M` as [`State::new`] put it there (in place if [`fits`], else a
/// pointer from `Box::into_raw`), not dropped yet and not used again.
unsafe fn drop_value<M>(storage: *mut Storage) {
    if fits::<M>() {
        // SAFETY: per the contract, an `M` in place, aligned (the storage is 8-aligned and
        // `M`'s alignment at most 8).
        unsafe { std::ptr::drop_in_place(storage.cast::<M>()) }
    } else {
        // SAFETY: per the contract, the pointer `Box::into_raw` gave, owned by the state.
        drop(unsafe { Box::from_raw(storage.cast::<*mut M>().read()) })
    }
}

/// A monitor state and the table of the type it was created with: 64 bytes, aligned to 8 (a
/// state on its way, in a `NewInstance` or an operation, is moved and copied without the padding
/// a line's alignment would add; the instance store aligns the states it keeps).
#[repr(C)]
pub(crate) struct State {
    /// Never replaced after [`State::new`]: it describes `storage` for the state's whole life.
    vt: &'static Vt,
    storage: Storage,
}

// SAFETY: `State::new` takes only `Send` values, and a `State` owns its value (in place or
// boxed) exclusively: sending the state sends the value.
unsafe impl Send for State {}

impl State {
    /// Holds `value` (in place or boxed, see the module docs), recording its type. The only
    /// constructor.
    pub(crate) fn new<M: Send + 'static>(value: M) -> Self {
        let mut storage = Storage::uninit();
        if fits::<M>() {
            // SAFETY: the storage is 8-aligned and at least `INLINE` bytes; `M` fits both.
            unsafe { storage.as_mut_ptr().cast::<M>().write(value) }
        } else {
            let p = Box::into_raw(Box::new(value));
            // SAFETY: the storage has room for a pointer, 8-aligned.
            unsafe { storage.as_mut_ptr().cast::<*mut M>().write(p) }
        }
        Self {
            vt: vt::<M>(),
            storage,
        }
    }

    /// Whether the state is of type `M`: its table is `M`'s, or (where the compiler made two
    /// copies of a table) names `M`'s type.
    #[inline(always)]
    fn is<M: 'static>(&self) -> bool {
        std::ptr::eq(self.vt, vt::<M>()) || (self.vt.type_id)() == TypeId::of::<M>()
    }

    /// The state as `M`, or `None` if it is of another type.
    #[inline(always)]
    pub(crate) fn downcast_mut<M: 'static>(&mut self) -> Option<&mut M> {
        if !self.is::<M>() {
            return None;
        }
        let at = self.storage.as_mut_ptr();
        // SAFETY: the state is an `M` (its table is `M`'s, recorded by `new` and never
        // replaced), held as `fits::<M>()` says: in place, aligned; or boxed, the box owned by
        // the state. The borrow of `self` is unique for the returned lifetime.
        Some(unsafe {
            if fits::<M>() {
                &mut *at.cast::<M>()
            } else {
                &mut *at.cast::<*mut M>().read()
            }
        })
    }

    /// The state as `M`, to read, or `None` if it is of another type. (Only the tests read a
    /// state without writing it since the pool's key sets left the dispatcher's state.)
    #[cfg(test)]
    pub(crate) fn downcast_ref<M: 'static>(&self) -> Option<&M> {
        if !self.is::<M>() {
            return None;
        }
        let at = self.storage.as_ptr();
        // SAFETY: as in `downcast_mut`, for a shared borrow.
        Some(unsafe {
            if fits::<M>() {
                &*at.cast::<M>()
            } else {
                &*at.cast::<*const M>().read()
            }
        })
    }

    /// Where a boxed value lives, for a cache hint; `None` for a state held in place (it is in
    /// the state's own line).
    #[inline]
    pub(crate) fn boxed_ptr(&self) -> Option<*const u8> {
        // SAFETY: a boxed state's storage starts with the box's pointer (`new`).
        self.vt
            .boxed
            .then(|| unsafe { self.storage.as_ptr().cast::<*const u8>().read() })
    }

    /// The type of the monitor the state belongs to: what tells two monitors apart (their type
    /// names may be equal).
    pub(crate) fn type_id(&self) -> TypeId {
        (self.vt.type_id)()
    }

    /// The type name of the monitor the state belongs to (for log messages).
    pub(crate) fn monitor_name(&self) -> &'static str {
        (self.vt.name)()
    }
}

impl Drop for State {
    fn drop(&mut self) {
        // SAFETY: the storage holds the value `new` put there, dropped only here.
        unsafe { (self.vt.drop)(&mut self.storage) }
    }
}

#[cfg(test)]
mod tests {
    //! The erased state hands back the value it was given, whether held in place or boxed, and
    //! drops it exactly once (these run under miri: `scripts/miri.sh`).

    use super::*;
    use std::sync::Arc;

    // The typed view reaches the value itself; another type gets `None`.
    #[test]
    fn downcast_to_the_recorded_type_only() {
        let mut s = State::new(41_u64);
        *s.downcast_mut::<u64>().expect("same type") += 1;
        assert_eq!(s.downcast_mut::<u64>().copied(), Some(42));
        assert!(s.downcast_mut::<u32>().is_none());
        assert!(s.downcast_mut::<String>().is_none());
        assert_eq!(s.downcast_ref::<u64>(), Some(&42));
        assert!(s.downcast_ref::<u32>().is_none());
        let mut t = State::new(String::from("monitor"));
        t.downcast_mut::<String>().expect("same type").push('!');
        assert_eq!(
            t.downcast_mut::<String>().map(|s| s.as_str()),
            Some("monitor!")
        );
        assert!(t.downcast_mut::<u64>().is_none());
        assert_eq!(t.downcast_ref::<String>().map(String::len), Some(8));
        assert_eq!(s.type_id(), TypeId::of::<u64>());
        assert_eq!(t.type_id(), TypeId::of::<String>());
        assert_eq!(
            (s.monitor_name(), t.monitor_name()),
            ("u64", "alloc::string::String")
        );
    }

    /// A state that counts its drops through the `Arc` it holds, padded to `N` words.
    struct Counted<const N: usize> {
        _live: Arc<()>,
        words: [u64; N],
    }

    #[repr(align(16))]
    struct Aligned16(#[allow(dead_code)] Arc<()>, u64);

    // In place up to `INLINE` bytes at 8-byte alignment, boxed beyond either; each kind keeps
    // its value through moves (a vector of states growing) and is dropped exactly once.
    #[test]
    fn small_states_in_place_large_or_aligned_ones_boxed_each_dropped_once() {
        assert!(fits::<Counted<6>>() && !fits::<Counted<7>>());
        assert!(fits::<()>() && !fits::<Aligned16>());
        assert_eq!((size_of::<State>(), align_of::<State>()), (64, 8));
        assert_eq!(size_of::<Option<State>>(), 64);
        let live = Arc::new(());
        let mut v = Vec::new();
        for i in 0..40_u64 {
            v.push(match i % 4 {
                0 => State::new(Counted::<6> {
                    _live: live.clone(),
                    words: [i; 6],
                }),
                1 => State::new(Counted::<7> {
                    _live: live.clone(),
                    words: [i; 7],
                }),
                2 => State::new(Aligned16(live.clone(), i)),
                _ => State::new(()),
            });
        }
        assert_eq!(Arc::strong_count(&live), 31);
        for (i, s) in v.iter_mut().enumerate() {
            let i = i as u64;
            let boxed = s.boxed_ptr().is_some();
            match i % 4 {
                0 => {
                    let c = s.downcast_mut::<Counted<6>>().expect("in place");
                    assert_eq!(c.words, [i; 6]);
                    c.words[5] += 1;
                    assert!(!boxed);
                }
                1 => {
                    let c = s.downcast_mut::<Counted<7>>().expect("boxed");
                    assert_eq!(c.words, [i; 7]);
                    assert!(boxed);
                }
                2 => {
                    let a = s.downcast_ref::<Aligned16>().expect("boxed");
                    assert_eq!(a.1, i);
                    assert_eq!(std::ptr::from_ref(a) as usize % 16, 0);
                    assert!(boxed);
                }
                _ => assert!(s.downcast_ref::<()>().is_some() && !boxed),
            }
        }
        assert_eq!(
            v[4].downcast_ref::<Counted<6>>().map(|c| c.words[5]),
            Some(5)
        );
        v.truncate(10);
        assert_eq!(Arc::strong_count(&live), 1 + 8);
        drop(v);
        assert_eq!(Arc::strong_count(&live), 1);
    }
}
