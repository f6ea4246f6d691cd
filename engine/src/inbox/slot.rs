//! One slot of the inbox's ring: what it holds, how the ring lays slots out, and how a sender
//! writes one.
//!
//! A slot is an entry and its stamp (see `ring`). Whether each slot gets a cache line of its own
//! or slots are packed edge to edge is one table, [`SLOT_LAYOUT`], indexed by the slot's size: each
//! row names its choice and the reason. The inbox reads it per entry type at compile time
//! (`Inbox::LINE_SLOTS`), so the choice costs no branch on the hot path. Beside it: how far ahead a
//! committing sender prefetches ([`PREFETCH_AHEAD_BYTES`]) and how it writes an entry
//! ([`write_entry`]), the two other choices about the slot's cache line. The measurements behind
//! all three are in `harness/BENCHMARKS.md` ("Slot layout", "The two-thread paths", "The first
//! store into a slot", "The inbox's prefetch distance").
//!
//! Owns the slot type, the layout table, the prefetch distance and the slot write. May import
//! `sync` only.

use std::mem::MaybeUninit;

use crate::sync::{AtomicU64, UnsafeCell};

/// One place of the ring.
pub(super) struct Slot<T> {
    /// `ticket + 1` once it holds that ticket's entry, `(ticket + 1) | TOMB` once that ticket's
    /// reservation was cancelled (its index before the first use; see `ring`). Written by senders
    /// only.
    pub(super) stamp: AtomicU64,
    pub(super) value: UnsafeCell<MaybeUninit<T>>,
}

/// A slot alone on its cache line: the ring's stride is 64 bytes and the ring starts on a line
/// boundary (see [`SLOT_LAYOUT`]).
#[repr(align(64))]
pub(super) struct LineSlot<T>(pub(super) Slot<T>);

/// One row of [`SLOT_LAYOUT`]: slots of at most `up_to` bytes (and more than the row before's) get
/// a cache line each (`own_line`) or are packed edge to edge, for the reason `why`.
pub(super) struct SlotLayout {
    pub(super) up_to: usize,
    pub(super) own_line: bool,
    #[allow(dead_code)] // read by people: the table's reason for the row.
    pub(super) why: &'static str,
}

/// The slot-layout choice, by the slot's size (the entry and its 8-byte stamp, so a multiple of 8
/// bytes). Measured with `benches/examples/stream_pair`, one sender flooding a context, on the
/// 2-core VM, both layouts interleaved (harness/BENCHMARKS.md, "Slot layout", has the figures).
/// On other hardware rerun that sweep before trusting the table.
pub(super) const SLOT_LAYOUT: [SlotLayout; 6] = [
    SlotLayout {
        up_to: 16,
        own_line: true,
        why: "not measured (no event is this small): as the 32- to 64-byte rows",
    },
    SlotLayout {
        up_to: 24,
        own_line: false,
        why: "packed: a line per slot lost a quarter",
    },
    SlotLayout {
        up_to: 32,
        own_line: true,
        why: "a line per slot won a quarter to two thirds (a packed slot shares lines that the \
              sender writes while the consumer reads)",
    },
    SlotLayout {
        up_to: 40,
        own_line: false,
        why: "packed: a line per slot lost a quarter (no model predicts this exception)",
    },
    SlotLayout {
        up_to: 64,
        own_line: true,
        why: "a line per slot won a quarter to two thirds (packed, most such slots straddle two \
              lines; a 64-byte one on a ring that starts anywhere, every time)",
    },
    SlotLayout {
        up_to: usize::MAX,
        own_line: false,
        why: "packed: a line per slot changed nothing and doubled the memory",
    },
];

/// Whether a slot of `bytes` bytes gets a cache line of its own, as [`SLOT_LAYOUT`] says.
pub(super) const fn line_per_slot(bytes: usize) -> bool {
    let mut i = 0;
    while i < SLOT_LAYOUT.len() {
        if bytes <= SLOT_LAYOUT[i].up_to {
            return SLOT_LAYOUT[i].own_line;
        }
        i += 1;
    }
    false
}

/// How far ahead of the slot it just wrote a sender prefetches: two cache lines. Measured with
/// `benches/examples/stream_pair` (one input handle flooding a context, 40-byte slots) on the
/// 2-core VM against none and one to four lines: two gave the best rounds (harness/BENCHMARKS.md,
/// "The inbox's prefetch distance").
pub(super) const PREFETCH_AHEAD_BYTES: usize = 128;

/// Writes `value` into a slot. An entry of at most a cache line whose size is a multiple of 8 bytes
/// and whose alignment is at least 8 (every entry of an event with a `u64` in it) is written as
/// 8-byte words, each an integer store, in order, whatever instructions the compiler would pick for
/// a copy of `T`: a 16-byte vector store among them, with its data ready before the integer stores
/// (an event copied from memory, `send_to(ctx, *e)`, or fields the compiler merged), made a send
/// cost a second cross-core transfer on the EPYC VM (harness/BENCHMARKS.md, "The first store into
/// a slot"). The words are copied as `MaybeUninit<u64>`, so padding bytes are copied as what they
/// are, never read as integers. Larger entries keep the compiler's copy (not measured).
///
/// # Safety
/// `dst` is valid for a write of `T` and aligned for it.
#[inline(always)]
pub(super) unsafe fn write_entry<T>(dst: *mut MaybeUninit<T>, value: T) {
    const WORD: usize = std::mem::size_of::<u64>();
    let size = std::mem::size_of::<T>();
    if size.is_multiple_of(WORD) && size <= 64 && std::mem::align_of::<T>() >= WORD {
        let value = std::mem::ManuallyDrop::new(value);
        let src = (&*value as *const T).cast::<MaybeUninit<u64>>();
        let dst = dst.cast::<MaybeUninit<u64>>();
        for i in 0..size / WORD {
            // SAFETY: `T` is a whole number of words and both ends are aligned for `T`, so for a
            // word; `i` stays within `T`. A `MaybeUninit<u64>` may hold uninitialised bytes
            // (padding), and `value` is moved into `dst` (not dropped here, `ManuallyDrop`).
            unsafe { std::ptr::write_volatile(dst.add(i), src.add(i).read()) };
        }
    } else {
        // SAFETY: the caller's.
        unsafe { (*dst).write(value) };
    }
}
