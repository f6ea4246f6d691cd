//! What every checkpoint store shares, so that a store of another kind (an object store bucket)
//! keeps checkpoints as [`DirStore`](super::DirStore) does: the name of checkpoint `seq`
//! ([`name_of`], [`seq_in_name`]), its bytes ([`frame`], [`unframe`]) and the walk that loads
//! the newest intact checkpoint and reports every newer one it passed over ([`load_newest`],
//! R11.4).
//!
//! Owns the names and the load walk. May import nothing.

use std::path::PathBuf;

use super::error::{CheckpointError, SkipReason};
use super::format::{self, HEADER_LEN};
use super::{Loaded, Skipped};

/// What every checkpoint's name begins with.
const PREFIX: &str = "checkpoint-";
/// The sequence in a name: zero-padded to the width of `u64::MAX`, so names sort as numbers.
const SEQ_DIGITS: usize = 20;

/// The name of checkpoint `seq`, `checkpoint-{seq:020}`: a file's name before its extension, an
/// object's name in a bucket.
pub fn name_of(seq: u64) -> String {
    format!("{PREFIX}{seq:0SEQ_DIGITS$}")
}

/// The sequence of a name [`name_of`] made; `None` for any other name (a store leaves those
/// alone, R11.5).
pub fn seq_in_name(name: &str) -> Option<u64> {
    let digits = name.strip_prefix(PREFIX)?;
    if digits.len() != SEQ_DIGITS || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    // Twenty digits can exceed `u64::MAX`: such a name is not a store's.
    digits.parse().ok()
}

/// Checkpoint `seq` as a store keeps it: the header of the [module doc](super) (magic, version,
/// sequence, length, CRC-32C), then `payload`. A store that is not a directory keeps these bytes
/// so that [`unframe`] gives every store the same checks (R11.3).
pub fn frame(seq: u64, payload: &[u8]) -> Vec<u8> {
    let mut bytes = Vec::with_capacity(HEADER_LEN + payload.len());
    bytes.extend_from_slice(&format::header(seq, payload));
    bytes.extend_from_slice(payload);
    bytes
}

/// The payload of `bytes`, a checkpoint kept under sequence `seq` as [`frame`] made it, if it
/// passes every check of R11.3.
///
/// # Errors
/// The first check `bytes` fails, as a [`SkipReason`].
///
/// # Example
/// ```
/// use correlator::checkpoint::{frame, unframe, SkipReason};
///
/// let mut bytes = frame(7, b"state");
/// assert_eq!(unframe(&bytes, 7), Ok(&b"state"[..]));
/// let last = bytes.len() - 1;
/// bytes[last] ^= 1; // one changed bit
/// assert!(matches!(unframe(&bytes, 7), Err(SkipReason::ChecksumMismatch { .. })));
/// ```
pub fn unframe(bytes: &[u8], seq: u64) -> Result<&[u8], SkipReason> {
    format::check(bytes, seq)?;
    Ok(&bytes[HEADER_LEN..])
}

/// Loading for any store (R11.4): takes the sequences stored, `newest_first`, reads each with
/// `read` and returns the first that passes every check of R11.3. Each newer one that fails, or
/// cannot be read (`read`'s message), is reported in [`Loaded::skipped`] under the path
/// `locate` gives it, and as a `tracing` warning. No sequence gives `None`.
///
/// # Errors
/// [`CheckpointError::AllCorrupt`] if sequences are given and none passes.
pub fn load_newest(
    newest_first: impl IntoIterator<Item = u64>,
    mut read: impl FnMut(u64) -> Result<Vec<u8>, String>,
    mut locate: impl FnMut(u64) -> PathBuf,
) -> Result<Option<Loaded>, CheckpointError> {
    let mut skipped = Vec::new();
    let mut any = false;
    for seq in newest_first {
        any = true;
        let checked = read(seq)
            .map_err(|error| SkipReason::Unreadable { error })
            .and_then(|bytes| format::check(&bytes, seq).map(|()| bytes));
        match checked {
            Ok(mut payload) => {
                payload.drain(..HEADER_LEN);
                return Ok(Some(Loaded {
                    seq,
                    payload,
                    skipped,
                }));
            }
            Err(reason) => {
                let path = locate(seq);
                tracing::warn!(
                    path = %path.display(),
                    seq,
                    %reason,
                    "checkpoint failed its checks and is skipped; loading the previous one, if any"
                );
                skipped.push(Skipped { seq, path, reason });
            }
        }
    }
    if any {
        Err(CheckpointError::AllCorrupt { skipped })
    } else {
        Ok(None)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // R11.2: names sort as their sequences and parse back; other names are not a store's.
    #[test]
    fn r11_2_names_round_trip_and_sort_as_numbers() {
        for seq in [0, 1, 7, 10, 999, u64::MAX] {
            assert_eq!(seq_in_name(&name_of(seq)), Some(seq));
        }
        assert!(name_of(9) < name_of(10));
        for foreign in [
            "checkpoint-1",
            "checkpoint-0000000000000000000x",
            "checkpoint-99999999999999999999",
            "checkpoint-00000000000000000001.ckpt",
            "notes",
        ] {
            assert_eq!(seq_in_name(foreign), None, "{foreign}");
        }
    }
}
