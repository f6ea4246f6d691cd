//! Checkpoint storage (SPEC §11): a checkpoint's bytes saved under a sequence number, durably
//! and atomically, and the newest intact one loaded back, passing over any that a crash, a full
//! disk or a damaged file system spoiled.
//!
//! This is the storage slice of checkpointing only. What a payload holds (the consistent cut of
//! the contexts' state), how monitors put their state into one and how a correlator recovers
//! from it are to come, on top of [`CheckpointStore`]: the code that takes a checkpoint hands the
//! store its bytes and a sequence number, the code that recovers asks for the newest valid
//! checkpoint's bytes. The store never looks inside a payload.
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
//! # Design of what comes next (not built yet)
//! Written down before it is built, so that the storage above is shaped for it; SPEC §11 gains
//! these rules only when they are built and tested.
//!
//! **The cut** is Chandy and Lamport's snapshot over the engine's channels, which are FIFO per
//! sender (R2.3, across the overflow too, R5.2): every context and every input handle is a
//! sender of its own into each inbox.
//! 1. A checkpoint `k` starts (on request, or every period) when the coordinator (the
//!    correlator's background thread) raises the requested epoch to `k`, fixes the set of live
//!    input handles, and puts a `Start(k)` entry in every inbox.
//! 2. An input handle marks itself: its next send sees the requested epoch above its own (one
//!    relaxed load per send) and first sends `Marker(k, position)` to every context, `position`
//!    being what its source says it has fed (a JetStream stream sequence). An idle handle cannot
//!    be waited for, and this is the open question of the design. Either the coordinator claims
//!    it (a CAS from idle to claimed, which a send that begins meanwhile waits out, spinning
//!    briefly, then yielding) and sends its markers on its behalf: that makes every send a CAS
//!    on the handle's own line, to be measured against `stream/1to1` before it is chosen. Or
//!    only handles that can be woken take part (the NATS connector's feeders, and handles whose
//!    owner calls a `poll_checkpoint` when idle), and checkpointing a correlator with any other
//!    input handle is a typed error. (Marking by colour instead, Lai and Yang's way, each entry
//!    carrying its sender's epoch so that a red entry makes its receiver snapshot first, saves
//!    the marker entries but not this question: a receiver still cannot tell that an idle
//!    sender's last white entry has arrived.) A handle created during checkpoint `k` begins with
//!    its marker; a handle dropped during it sends its markers first. Whichever is chosen gets
//!    a loom model before it is trusted.
//! 3. A context, at the first `Start(k)` or `Marker(k)` it takes, is between entries with an
//!    empty route stack (R2.2): it writes its own state (below), then sends `Marker(k)` to every
//!    other context through the send core (a marker is never refused and never waits: taken
//!    beyond capacity like a cycle's send, R5.2, at most one per context pair per checkpoint).
//!    From then on, every entry it takes from a sender whose `Marker(k)` has not yet arrived is
//!    processed as usual and also recorded as that channel's state. When every expected sender's
//!    marker has arrived it hands its part to the coordinator. A context stops the world for
//!    nobody: it pauses only while it writes its own state.
//! 4. The coordinator frames the parts (each context's state and channel states, each input's
//!    position) into one payload and saves it through a [`CheckpointStore`] from its own thread.
//!
//! **What a context writes**: its logical clock and timers (R7), its instances (each monitor's
//! state through an opt-in serde trait, below), each listener's partial matches with the events
//! they hold, its query windows, its id counters and each output's emit sequence. A spawn in
//! flight between contexts carries a closure, which cannot be saved: a checkpointing correlator
//! spawns across contexts only monitors of the trait, as data (type name and state).
//!
//! **Monitors opt in** through a trait over `Monitor` with a stable type name, serde for the
//! state and an `on_restore` hook that registers the instance's listeners again, in the order it
//! first did. A closure cannot be saved, so the engine cannot restore listeners opaquely as
//! Apama restores a persistent monitor's: it pairs each re-registered listener with its saved
//! partial matches by registration order and checks the expression's shape (a mismatch is a typed
//! error naming the instance and the listener, never a silent fresh start).
//!
//! **Recovery** loads the newest intact checkpoint ([`CheckpointStore::load_latest`]), rebuilds
//! each context's instances and state, puts each recorded channel state at the front of its
//! inbox in its sender's order, and tells the caller each input's position (inputs named, not
//! numbered, so that a restarted process can match them); the caller re-reads each source from
//! there. JetStream acknowledgement then follows the checkpoint, not the processing.
//!
//! **Effectively-once outputs**: each emit carries `(output, context, sequence)`, restored with
//! the checkpoint, which a sink uses as its de-duplication id (a JetStream message id). A
//! re-derived output gets the id it had before the crash when the context takes its entries in
//! the same order again: exact for a context fed by one sender (a partition per context, as the
//! NATS scale-out runs), and for several senders when the recording of the interleaving since
//! the checkpoint (`record`) is replayed before going live.
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
