//! Cache hints: [`prefetch`] asks for a line that a later step will read.
//!
//! Owns the hint only. Imports nothing of the crate.

/// Asks for the cache line at `p` for reading. A hint: no effect on what the program computes
/// (it reads nothing architecturally and cannot fault, whatever `p` is), and a no-op where there
/// is no such instruction, under loom and under miri.
#[inline(always)]
pub(crate) fn prefetch<T: ?Sized>(p: *const T) {
    #[cfg(all(target_arch = "x86_64", not(loom), not(miri)))]
    // SAFETY: `prefetcht0` only hints the cache; it cannot fault, even on an invalid address.
    unsafe {
        std::arch::asm!(
            "prefetcht0 [{0}]",
            in(reg) p.cast::<u8>(),
            options(nostack, preserves_flags, readonly)
        );
    }
    #[cfg(all(target_arch = "aarch64", not(loom), not(miri)))]
    // SAFETY: `prfm` only hints the cache and cannot fault.
    unsafe {
        std::arch::asm!(
            "prfm pldl1keep, [{0}]",
            in(reg) p.cast::<u8>(),
            options(nostack, preserves_flags, readonly)
        );
    }
    #[cfg(any(not(any(target_arch = "x86_64", target_arch = "aarch64")), loom, miri))]
    let _ = p;
}
