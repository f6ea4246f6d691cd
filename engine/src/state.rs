//! A monitor instance's state, type-erased, with its type recorded beside it.
//!
//! Every handler call recovers `&mut M` from the erased state. `dyn Any::downcast_mut` asks the
//! value for its type through a virtual call on every event; [`State`] instead stores the
//! [`TypeId`] once, when it boxes the value, so the check on the hot path is a comparison of two
//! plain values. It stays a check: a mismatch (which no code path produces) gives `None`, as
//! `downcast_mut` would.
//!
//! Owns the type-erased state. A leaf: imports nothing from the engine.

use std::any::{Any, TypeId};

/// A monitor state: any sendable value, which can also name its type (for messages, through
/// the vtable, so that a `State` stays two words and a `TypeId`).
trait MonitorState: Any + Send {
    fn type_name(&self) -> &'static str;
}

impl<T: Any + Send> MonitorState for T {
    fn type_name(&self) -> &'static str {
        std::any::type_name::<T>()
    }
}

/// A boxed monitor state and the type it was created with.
pub(crate) struct State {
    /// Never replaced after [`State::new`]: `type_id` describes it for the state's whole life.
    value: Box<dyn MonitorState>,
    type_id: TypeId,
}

impl State {
    /// Where the value lives (for cache hints).
    #[inline]
    pub(crate) fn as_ptr(&self) -> *const u8 {
        (&*self.value as *const dyn MonitorState).cast::<u8>()
    }

    /// Boxes `value`, recording its type. The only constructor.
    pub(crate) fn new<M: Any + Send>(value: M) -> Self {
        Self {
            value: Box::new(value),
            type_id: TypeId::of::<M>(),
        }
    }

    /// The state as `M`, or `None` if it is of another type.
    #[inline(always)]
    pub(crate) fn downcast_mut<M: Any>(&mut self) -> Option<&mut M> {
        if self.type_id == TypeId::of::<M>() {
            let p: *mut dyn MonitorState = &mut *self.value;
            // SAFETY: `type_id` was recorded by `new` from the type of the value it boxed, and
            // `value` is private and never replaced, so the box holds an `M`; the pointer comes
            // from a live `&mut`, so it is valid, aligned and unique for the returned borrow of
            // `self`. This is what `<dyn Any>::downcast_mut` does after its virtual type query.
            Some(unsafe { &mut *p.cast::<M>() })
        } else {
            None
        }
    }

    /// The state as `M`, to read, or `None` if it is of another type.
    #[inline(always)]
    pub(crate) fn downcast_ref<M: Any>(&self) -> Option<&M> {
        if self.type_id == TypeId::of::<M>() {
            let p: *const dyn MonitorState = &*self.value;
            // SAFETY: as in `downcast_mut`: the box holds an `M`, and the pointer comes from a
            // live shared borrow of it, valid and aligned for the returned borrow of `self`.
            Some(unsafe { &*p.cast::<M>() })
        } else {
            None
        }
    }

    /// The type of the monitor the state belongs to: what tells two monitors apart (their type
    /// names may be equal).
    pub(crate) fn type_id(&self) -> TypeId {
        self.type_id
    }

    /// The type name of the monitor the state belongs to (for log messages).
    pub(crate) fn monitor_name(&self) -> &'static str {
        // Through the box: `Box<dyn MonitorState>` is itself a `MonitorState`.
        (*self.value).type_name()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // The typed view reaches the boxed value itself; another type gets `None`.
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
}
