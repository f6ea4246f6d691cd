//! Cache hints: [`prefetch`] asks for a line that a later step will read, [`prefetch_both`] for
//! the two lines an object may straddle, [`prefetch_range`] for the lines of a few bytes,
//! [`prefetch_write`] for a line a later step will write.
//!
//! Owns the hints only. Imports nothing of the crate.

/// One prefetch instruction for the line at `$p` (a `*const u8`): `$x86` on x86-64, `$arm` on
/// aarch64, nothing elsewhere and under loom and miri.
macro_rules! prefetch_asm {
    ($p:expr, $x86:literal, $arm:literal) => {{
        let p: *const u8 = $p;
        #[cfg(all(target_arch = "x86_64", not(loom), not(miri)))]
        // SAFETY: a prefetch only hints the cache: it reads nothing architecturally and cannot
        // fault, whatever the address. Processors without `prefetchw` execute it as a no-op (the
        // 0F 0D opcode space).
        unsafe {
            std::arch::asm!(
                concat!($x86, " [{0}]"),
                in(reg) p,
                options(nostack, preserves_flags, readonly)
            );
        }
        #[cfg(all(target_arch = "aarch64", not(loom), not(miri)))]
        // SAFETY: `prfm` only hints the cache and cannot fault.
        unsafe {
            std::arch::asm!(
                concat!("prfm ", $arm, ", [{0}]"),
                in(reg) p,
                options(nostack, preserves_flags, readonly)
            );
        }
        #[cfg(any(not(any(target_arch = "x86_64", target_arch = "aarch64")), loom, miri))]
        let _ = p;
    }};
}

/// Asks for the cache line at `p` for reading. A hint: no effect on what the program computes,
/// whatever `p` is.
#[inline(always)]
pub(crate) fn prefetch<T: ?Sized>(p: *const T) {
    prefetch_asm!(p.cast::<u8>(), "prefetcht0", "pldl1keep");
}

/// Asks for the lines of the `T` at `p`, its first and its last (`T` no larger than a line plus
/// one: a listener slot), for reading. A hint, as [`prefetch`] is.
#[inline(always)]
pub(crate) fn prefetch_both<T>(p: *const T) {
    let p = p.cast::<u8>();
    prefetch(p);
    prefetch(p.wrapping_add(std::mem::size_of::<T>().saturating_sub(1)));
}

/// Asks for every line of the `len` bytes at `p` (a few lines at most), for reading. A hint, as
/// [`prefetch`] is.
#[inline(always)]
pub(crate) fn prefetch_range(p: *const u8, len: usize) {
    let line = p.wrapping_sub(p as usize % LINE);
    for offset in line_offsets(p as usize, len) {
        prefetch(line.wrapping_add(offset));
    }
}

/// The cache line size the hints assume.
const LINE: usize = 64;

/// The offsets, from the start of `addr`'s line, of every line the `len` bytes at `addr` touch
/// (one at least).
#[inline(always)]
fn line_offsets(addr: usize, len: usize) -> std::iter::StepBy<std::ops::Range<usize>> {
    (0..addr % LINE + len.max(1)).step_by(LINE)
}

/// Asks for the cache line at `p` in a writable state (a sender's next inbox slot). A hint, as
/// [`prefetch`] is. On x86-64 this needs `prefetchw`: `_mm_prefetch` with a write hint compiles
/// to nothing without the `prfchw` target feature (harness/BENCHMARKS.md, "The two-thread
/// paths").
#[inline(always)]
pub(crate) fn prefetch_write<T: ?Sized>(p: *const T) {
    prefetch_asm!(p.cast::<u8>(), "prefetchw", "pstl1keep");
}

#[cfg(test)]
mod tests {
    use super::line_offsets;

    /// `prefetch_range` asks for each line its bytes touch, once: at a line's start, across a
    /// boundary, at a line's last byte, and for no bytes (the line of `addr`).
    #[test]
    fn a_range_names_each_line_it_touches_once() {
        let lines = |addr, len| line_offsets(addr, len).collect::<Vec<_>>();
        assert_eq!(lines(0, 64), [0]);
        assert_eq!(lines(0, 65), [0, 64]);
        assert_eq!(lines(48, 24), [0, 64]);
        assert_eq!(lines(63, 1), [0]);
        assert_eq!(lines(127, 0), [0]);
        assert_eq!(lines(8, 104), [0, 64]);
        assert_eq!(lines(40, 104), [0, 64, 128]);
    }
}
