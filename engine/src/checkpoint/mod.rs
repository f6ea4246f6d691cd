//! Checkpoint storage (SPEC §11): a checkpoint's bytes saved under a sequence number, durably
//! and atomically, and the newest intact one loaded back, passing over any that a crash, a full
//! disk or a damaged file system spoiled.
//!
//! This module is the storage of checkpoints: the code that takes a checkpoint hands the store
//! its bytes and a sequence number, the code that recovers asks for the newest valid
//! checkpoint's bytes (see "What a payload holds" below). The store never looks inside a
//! payload.
//!
//! # A checkpoint file
//! [`DirStore`] keeps each checkpoint in a file of its own, `checkpoint-{seq:020}.ckpt` (the
//! sequence zero-padded to twenty digits, so names sort as numbers), in one directory. The file
//! is a 32-byte header, then the payload, integers little-endian:
//!
//! | bytes | field |
//! |---|---|
//! | 0..8 | [`MAGIC`], `CORRCKPT` |
//! | 8..12 | the format [`VERSION`] (u32) |
//! | 12..20 | the sequence number (u64), the same as in the file's name |
//! | 20..28 | the payload's length in bytes (u64) |
//! | 28..32 | CRC-32C (Castagnoli) of bytes 0..28 followed by the payload (u32) |
//! | 32.. | the payload |
//!
//! # Writing: temporary file, sync, rename, sync the directory
//! A save of checkpoint `seq` (R11.1, R11.2):
//! 1. lists the directory and refuses a `seq` not above every stored sequence
//!    ([`CheckpointError::NotIncreasing`]; nothing is written);
//! 2. removes temporary files left by a save that did not finish (R11.5);
//! 3. writes header and payload to `checkpoint-{seq:020}.ckpt.tmp` in the same directory (so the
//!    rename stays within one file system) and `sync_all`s it: its bytes are on the disk;
//! 4. renames it to its final name, which replaces nothing (the name is new, by step 1);
//! 5. syncs the directory (on unix), so that the rename itself survives a crash: only then does
//!    the save return `Ok`;
//! 6. removes all but the newest `keep` checkpoints (R11.6).
//!
//! A crash (of the process or the machine) in steps 1 to 4 leaves at most a temporary file, which
//! no load reads and the next save removes: the store is as it was before the save. A crash
//! between steps 4 and 5 leaves the new name or not, and the file under it complete either way,
//! since its bytes were synced before the rename. A crash in step 6 leaves more than `keep`
//! checkpoints, which the next save prunes. What no protocol prevents (a disk that loses or
//! changes synced bytes, a file cut or edited by hand) the checks on reading catch.
//!
//! # Reading: every check, newest first
//! Loading (R11.3, R11.4) takes the checkpoint files from the highest sequence down and returns
//! the first one that passes every check, in this order: the file is at least a header long; it
//! begins with the magic bytes; its version is one this build reads; the payload is as long as
//! the header says (a file cut short fails here); the CRC-32C over the header's fields and the
//! payload matches (any changed byte fails here, a damaged sequence field too); the sequence in
//! the header is the one in the file's name (a file copied or renamed by hand fails here). Each
//! newer file that fails is reported with its [`SkipReason`], in the returned [`Loaded`] and as a
//! `tracing` warning, so that falling back is never silent. No checkpoint stored gives `None`;
//! checkpoints stored and none intact give [`CheckpointError::AllCorrupt`], listing each, rather
//! than a silent fresh start. Whatever the bytes, loading does not panic (R11.7).
//!
//! # One writer
//! A store is owned by one writer: [`CheckpointStore::save`] takes `&mut self`, and a
//! [`DirStore`] holds an exclusive lock (`flock` on unix) on its directory's [`LOCK_FILE`] from
//! opening until it is dropped, so a second store on the same directory, in this process or
//! another, is refused with [`CheckpointError::InUse`]. The operating system releases the lock
//! with the process, so a crash leaves none behind.
//!
//! # What a payload holds, and who writes it
//! The store is the bottom of checkpointing (feature `checkpoint` for the rest, SPEC R11.9 -
//! R11.14): `context::cut` runs the consistent cut across the contexts (markers through the
//! inboxes), `context::snapshot` writes and restores a context's own state, `monitor::persist` is
//! the trait through which monitors hand over their state, and `correlator::checkpointing`
//! coordinates a checkpoint, frames the contexts' parts into one payload, and recovers from the
//! newest intact one. Not saved yet, and refused with a typed error rather than dropped: a stream
//! query's windows, and a `spawn_to` in flight between contexts at the cut.
//!
//! Owns checkpoint storage: the store trait and what it returns; `kit` what every store shares
//! (names, framing, the load walk), `dir` the local-directory store, `format` a file's bytes and
//! checks, `crc32c` the checksum, `error` the errors. May import
//! nothing.

mod crc32c;
mod dir;
mod error;
mod format;
mod kit;

use std::fmt;
use std::path::PathBuf;

pub use dir::{DirStore, DirStoreBuilder, DEFAULT_KEEP, LOCK_FILE, MIN_KEEP};
pub use error::{CheckpointError, SkipReason};
pub use format::{HEADER_LEN, MAGIC, VERSION};
pub use kit::{frame, load_newest, name_of, seq_in_name, unframe};

/// Where checkpoints are kept: each one a byte payload under a sequence number that increases
/// with every save. [`DirStore`] is the local-directory store; another (an object store, say)
/// implements this trait. It is object-safe, so a correlator can hold a
/// `Box<dyn CheckpointStore>`.
///
/// A store has one writer (`save` takes `&mut self`); it is `Send` so that the writer can be a
/// thread of its own.
///
/// # Example
/// ```
/// use correlator::checkpoint::{CheckpointStore, DirStore};
///
/// /// Saves the state that `seq` stands for; the caller chooses the numbering.
/// fn take(store: &mut dyn CheckpointStore, seq: u64, state: &[u8]) -> Result<(), Box<dyn std::error::Error>> {
///     store.save(seq, state)?;
///     Ok(())
/// }
///
/// let dir = std::env::temp_dir().join(format!("correlator-doc-store-{}", std::process::id()));
/// # let _ = std::fs::remove_dir_all(&dir);
/// let mut store: Box<dyn CheckpointStore> = Box::new(DirStore::open(&dir)?);
/// take(&mut *store, 10, b"ten")?;
/// take(&mut *store, 20, b"twenty")?;
/// let latest = store.load_latest()?.expect("saved");
/// assert_eq!((latest.seq, latest.payload), (20, b"twenty".to_vec()));
/// # std::fs::remove_dir_all(&dir)?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub trait CheckpointStore: Send {
    /// Stores `payload` as the checkpoint `seq`, durably: when it returns `Ok`, the checkpoint
    /// survives a crash, and a crash before that leaves the store as it was (R11.2). An empty
    /// payload is a checkpoint like any other.
    ///
    /// # Errors
    /// [`CheckpointError::NotIncreasing`] if `seq` is not above every sequence stored, an intact
    /// checkpoint's or not (R11.1); [`CheckpointError::Io`] or [`CheckpointError::Remote`]
    /// if the storage failed.
    fn save(&mut self, seq: u64, payload: &[u8]) -> Result<(), CheckpointError>;

    /// The newest checkpoint that passes its checks, with every newer one that failed them
    /// ([`Loaded::skipped`]); `None` if no checkpoint is stored (R11.4).
    ///
    /// # Errors
    /// [`CheckpointError::AllCorrupt`] if checkpoints are stored but none passes its checks;
    /// [`CheckpointError::Io`] or [`CheckpointError::Remote`] if the storage cannot be read at all.
    fn load_latest(&self) -> Result<Option<Loaded>, CheckpointError>;

    /// The checkpoints stored, oldest first, unchecked.
    ///
    /// # Errors
    /// [`CheckpointError::Io`] or [`CheckpointError::Remote`] if the storage cannot be read.
    fn list(&self) -> Result<Vec<StoredCheckpoint>, CheckpointError>;
}

/// A checkpoint loaded by [`CheckpointStore::load_latest`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Loaded {
    /// Its sequence number.
    pub seq: u64,
    /// Its bytes, as saved.
    pub payload: Vec<u8>,
    /// The newer checkpoints that failed their checks and were passed over, newest first (empty
    /// when the newest stored checkpoint is the one loaded).
    pub skipped: Vec<Skipped>,
}

/// A stored checkpoint that failed its checks and was passed over (R11.4).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Skipped {
    /// The sequence its name gives.
    pub seq: u64,
    /// Its file (for a store that is not a directory, `bucket/object`).
    pub path: PathBuf,
    /// What is wrong with it.
    pub reason: SkipReason,
}

impl fmt::Display for Skipped {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "`{}` (sequence {}): {}",
            self.path.display(),
            self.seq,
            self.reason
        )
    }
}

/// A checkpoint as [`CheckpointStore::list`] finds it: not read, so not known to be intact.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoredCheckpoint {
    /// The sequence its name gives.
    pub seq: u64,
    /// Its file.
    pub path: PathBuf,
    /// The file's length in bytes (header included).
    pub len: u64,
}
