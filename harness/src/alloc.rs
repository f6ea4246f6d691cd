//! The counting global allocator: mimalloc underneath, one atomic counter on top.
//!
//! The `alloc/*` scenarios read [`allocations`] before and after a steady-state window and divide
//! by the events processed in it. The counter is process-wide (every thread's allocations count),
//! which is what "the engine allocates on this path" means: whichever thread allocates, the path
//! cost it. The binary installs [`CountingAlloc`] with `#[global_allocator]`; a library test build
//! does not, so [`counting_installed`] lets a scenario refuse to report a meaningless zero.
//!
//! Cost: one relaxed `fetch_add` per allocation (not per deallocation, which is only counted for
//! the report), on a cache-padded counter so that it does not share a line with anything else.

use crossbeam_utils::CachePadded;
use std::alloc::{GlobalAlloc, Layout};
use std::sync::atomic::{AtomicU64, Ordering};

/// Name recorded in `env.json` for the allocator in use.
pub const ALLOCATOR_NAME: &str =
    "mimalloc 0.1 (default features off) behind harness::alloc::CountingAlloc";

static ALLOCS: CachePadded<AtomicU64> = CachePadded::new(AtomicU64::new(0));
static DEALLOCS: CachePadded<AtomicU64> = CachePadded::new(AtomicU64::new(0));

/// mimalloc wrapped in an allocation counter. Install it with `#[global_allocator]`.
pub struct CountingAlloc;

// SAFETY: every method forwards to `MiMalloc`, a correct `GlobalAlloc`, with the caller's
// arguments unchanged; the counters are side effects that never touch the memory handed out.
unsafe impl GlobalAlloc for CountingAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: the caller upholds `GlobalAlloc::alloc`'s contract; we pass it on unchanged.
        unsafe { mimalloc::MiMalloc.alloc(layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        ALLOCS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: as for `alloc`.
        unsafe { mimalloc::MiMalloc.alloc_zeroed(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        DEALLOCS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: `ptr` came from this allocator (the caller's contract) and so from `MiMalloc`.
        unsafe { mimalloc::MiMalloc.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        ALLOCS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: `ptr`/`layout` came from this allocator (the caller's contract) and so from
        // `MiMalloc`; `new_size` is passed through unchanged.
        unsafe { mimalloc::MiMalloc.realloc(ptr, layout, new_size) }
    }
}

/// Allocations (including `realloc` and zeroed allocations) made so far by every thread.
pub fn allocations() -> u64 {
    ALLOCS.load(Ordering::Relaxed)
}

/// Deallocations made so far by every thread.
pub fn deallocations() -> u64 {
    DEALLOCS.load(Ordering::Relaxed)
}

/// Whether [`CountingAlloc`] is the global allocator of this process (the counter moves when a
/// box is allocated).
pub fn counting_installed() -> bool {
    let before = allocations();
    let b = std::hint::black_box(Box::new(0u64));
    drop(b);
    allocations() > before
}
