//! The synchronisation shim.
//!
//! Every atomic, cell, `Arc`, spin hint, park/unpark and thread handle that the inbox, the wake-up
//! protocol and the context loop use comes from this module. Under `cfg(loom)` the items are loom's,
//! so that `loom-tests/` can explore every interleaving of the real code; otherwise they are `std`'s.
//! The `std` side offers loom's API (`UnsafeCell::with`/`with_mut`), never the reverse, so that the same
//! code compiles against both. Nothing else in the engine imports `std::sync::atomic` directly.
//!
//! A leaf: imports nothing from the engine.

#[cfg(not(loom))]
mod imp {
    pub(crate) use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
    pub(crate) use std::sync::{Arc, Mutex, MutexGuard};
    pub(crate) use std::thread::{
        current, park, park_timeout, yield_now, JoinHandle, Thread, ThreadId,
    };

    std::thread_local! {
        static CONTEXT_MARK: std::cell::Cell<Option<(usize, u32)>> =
            const { std::cell::Cell::new(None) };
    }

    /// Marks the calling thread as a context's (see [`context_mark`]).
    pub(crate) fn set_context_mark(mark: (usize, u32)) {
        CONTEXT_MARK.with(|m| m.set(Some(mark)));
    }

    /// The calling thread's mark, if it is a context's.
    pub(crate) fn context_mark() -> Option<(usize, u32)> {
        CONTEXT_MARK.with(std::cell::Cell::get)
    }

    /// Starts a named thread.
    pub(crate) fn spawn_named<F>(name: String, f: F) -> std::io::Result<JoinHandle<()>>
    where
        F: FnOnce() + Send + 'static,
    {
        std::thread::Builder::new().name(name).spawn(f)
    }

    /// One step of a spin loop: a CPU pause hint. Under loom this yields so that the model checker
    /// can schedule the thread that the loop is waiting for.
    #[inline(always)]
    pub(crate) fn spin_hint() {
        std::hint::spin_loop();
    }

    /// Orders a `SeqCst` operation on one location before a `SeqCst` load of another, for loom
    /// (see the loom side): a no-op here, where the C++20 model already puts every `SeqCst`
    /// operation in one total order, so a `SeqCst` load after a `SeqCst` read-modify-write needs
    /// no fence (and on x86 the read-modify-write is a full barrier).
    #[inline(always)]
    pub(crate) fn seq_cst_order() {}

    /// `std::cell::UnsafeCell` behind loom's closure-based API.
    #[derive(Debug)]
    pub(crate) struct UnsafeCell<T>(std::cell::UnsafeCell<T>);

    impl<T> UnsafeCell<T> {
        pub(crate) const fn new(value: T) -> Self {
            Self(std::cell::UnsafeCell::new(value))
        }

        /// Runs `f` with a shared raw pointer to the value.
        #[inline(always)]
        pub(crate) fn with<R>(&self, f: impl FnOnce(*const T) -> R) -> R {
            f(self.0.get())
        }

        /// Runs `f` with a unique raw pointer to the value.
        #[inline(always)]
        pub(crate) fn with_mut<R>(&self, f: impl FnOnce(*mut T) -> R) -> R {
            f(self.0.get())
        }
    }
}

#[cfg(loom)]
mod imp {
    pub(crate) use loom::cell::UnsafeCell;
    pub(crate) use loom::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
    pub(crate) use loom::sync::{Arc, Mutex, MutexGuard};
    pub(crate) use loom::thread::{current, park, yield_now, JoinHandle, Thread, ThreadId};

    loom::thread_local! {
        static CONTEXT_MARK: std::cell::Cell<Option<(usize, u32)>> = std::cell::Cell::new(None);
    }

    /// Marks the calling (model) thread as a context's.
    pub(crate) fn set_context_mark(mark: (usize, u32)) {
        CONTEXT_MARK.with(|m| m.set(Some(mark)));
    }

    /// The calling (model) thread's mark, if it is a context's.
    pub(crate) fn context_mark() -> Option<(usize, u32)> {
        CONTEXT_MARK.with(std::cell::Cell::get)
    }

    /// Starts a (model) thread; loom threads have no names.
    pub(crate) fn spawn_named<F>(_name: String, f: F) -> std::io::Result<JoinHandle<()>>
    where
        F: FnOnce() + Send + 'static,
    {
        Ok(loom::thread::spawn(f))
    }

    /// loom has no timed park; a timed park may return spuriously, so yielding is a faithful model.
    pub(crate) fn park_timeout(_: std::time::Duration) {
        loom::thread::yield_now();
    }

    /// Loom regards `SeqCst` loads and stores as `AcqRel` (its README, "Unsupported features"):
    /// a `SeqCst` load may then miss a `SeqCst` read-modify-write of another thread that precedes
    /// it in the real total order, a false alarm for the Dekker-style handshakes of the outputs
    /// (push, then read the receiver's flag; set the flag, then re-check the ring). Loom does
    /// support `fence(SeqCst)`, which gives the model the order the real program has.
    pub(crate) fn seq_cst_order() {
        loom::sync::atomic::fence(Ordering::SeqCst);
    }

    /// Under loom a spin step must yield, or the model would never schedule the thread it waits for.
    #[inline(always)]
    pub(crate) fn spin_hint() {
        loom::thread::yield_now();
    }
}

pub(crate) use imp::*;

// A context thread's *mark* (`set_context_mark`, `context_mark`): the address of its correlator's
// shared state and the context's id, in a thread-local set when the thread starts (`None` on
// threads that are no context's). It lets the engine tell that a call comes from inside a handler
// (`Correlator::shutdown`, an input handle about to wait), with no lock.

/// A weak reference, a shared reference and a lock for registries that are part of no modelled
/// protocol (the list of a correlator's outputs, which shutdown walks): `std`'s under loom too,
/// since loom's `Arc` has no `Weak`.
pub(crate) use std::sync::{Arc as StdArc, Mutex as StdMutex, Weak as StdWeak};

/// Parks the calling thread until it is unparked or `deadline` passes (forever if `None`);
/// returns whether the deadline has passed, in which case the caller gives up its wait. A wait
/// for room (the inbox's, an output's) parks through this, after listing itself and re-checking.
pub(crate) fn park_until(deadline: Option<std::time::Instant>) -> bool {
    let Some(d) = deadline else {
        park();
        return false;
    };
    let now = std::time::Instant::now();
    if now < d {
        park_timeout(d - now);
    }
    std::time::Instant::now() >= d
}

/// Locks `m`, recovering the data if a panicking thread poisoned it: every structure guarded by a
/// mutex in the engine stays consistent at every await point, so poison carries no information.
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    match m.lock() {
        Ok(g) => g,
        Err(poisoned) => poisoned.into_inner(),
    }
}

/// [`lock`] for a `std` mutex (see [`StdMutex`]).
pub(crate) fn lock_std<T>(m: &StdMutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// A new correlator's tag, unique in this process (it starts at 1 and wraps only after 2^32
/// correlators): it marks the [`ContextRef`](crate::ContextRef)s of that correlator. A plain
/// counter under loom too: it is part of no modelled protocol.
pub(crate) fn next_correlator_tag() -> u32 {
    static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(1);
    NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
}

/// The registry lock. It guards the list of contexts, which changes only when a context is created;
/// senders keep a local copy and take the read side only when they meet a context they do not know.
/// It is `std`'s under loom too: the registry is not part of any modelled protocol.
pub(crate) use std::sync::RwLock;

/// Read-locks `l`, recovering from poison (see [`lock`]).
pub(crate) fn read_lock<T>(l: &RwLock<T>) -> std::sync::RwLockReadGuard<'_, T> {
    l.read().unwrap_or_else(|p| p.into_inner())
}

/// Write-locks `l`, recovering from poison (see [`lock`]).
pub(crate) fn write_lock<T>(l: &RwLock<T>) -> std::sync::RwLockWriteGuard<'_, T> {
    l.write().unwrap_or_else(|p| p.into_inner())
}
