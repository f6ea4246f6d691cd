//! [`DirStore`]: checkpoints as files in one local directory, written by the protocol of the
//! [module doc](super) (temporary file, `sync_all`, rename, directory sync), read newest first
//! through `kit`'s load walk, pruned to the newest `keep` after each save.
//!
//! Owns the directory's layout (file names, the lock) and the write and prune protocols. May
//! import nothing.

use std::fs::{self, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

use super::error::CheckpointError;
use super::format;
use super::kit::{load_newest, name_of, seq_in_name};
use super::{CheckpointStore, Loaded, StoredCheckpoint};

/// How many checkpoints a [`DirStore`] keeps unless told otherwise
/// ([`DirStoreBuilder::keep`]).
pub const DEFAULT_KEEP: usize = 3;
/// The fewest checkpoints a [`DirStore`] may keep: the newest and one to fall back to (R11.6).
pub const MIN_KEEP: usize = 2;

/// What a checkpoint's file name ends with.
const SUFFIX: &str = ".ckpt";
/// The file a store holds an exclusive lock on while it is open: one writer per directory.
pub const LOCK_FILE: &str = "checkpoint.lock";
/// What a temporary file's name ends with (after the name of the checkpoint it will become).
const TEMP_SUFFIX: &str = ".ckpt.tmp";

/// A checkpoint store in a local directory: one file per checkpoint, named
/// `checkpoint-{seq:020}.ckpt`, written atomically and durably, checked on loading, the newest
/// [`keep`](DirStoreBuilder::keep) kept (SPEC §11).
///
/// One `DirStore` is the one writer of its directory: saving takes `&mut self`, and opening
/// takes an exclusive lock on the directory's [`LOCK_FILE`], so that a second store on the same
/// directory, in this process or another, is refused ([`CheckpointError::InUse`]) rather than
/// interleaving its checkpoints with the first's. The lock goes with the store when it is
/// dropped, or with its process: a crash leaves no stale lock. Files whose names are not the
/// store's are left alone.
///
/// # Example
/// ```
/// use correlator::checkpoint::{CheckpointStore, DirStore};
///
/// let dir = std::env::temp_dir().join(format!("correlator-doc-dirstore-{}", std::process::id()));
/// # let _ = std::fs::remove_dir_all(&dir);
/// let mut store = DirStore::builder(&dir).keep(2).open()?;
/// assert!(store.load_latest()?.is_none()); // nothing saved yet
///
/// store.save(1, b"state after event 1000")?;
/// store.save(2, b"state after event 2000")?;
/// store.save(3, b"state after event 3000")?;
///
/// let latest = store.load_latest()?.expect("three were saved");
/// assert_eq!((latest.seq, &latest.payload[..]), (3, &b"state after event 3000"[..]));
/// assert!(latest.skipped.is_empty()); // no file failed its checks
///
/// // Only the newest two are kept; sequences must go on increasing.
/// let seqs: Vec<u64> = store.list()?.iter().map(|c| c.seq).collect();
/// assert_eq!(seqs, [2, 3]);
/// assert!(store.save(3, b"again").is_err());
/// # std::fs::remove_dir_all(&dir)?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug)]
pub struct DirStore {
    dir: PathBuf,
    keep: usize,
    /// The lock file, locked exclusively while the store lives (R11.1).
    _lock: fs::File,
}

/// Settings of a [`DirStore`]; [`open`](Self::open) makes the store.
#[derive(Clone, Debug)]
pub struct DirStoreBuilder {
    dir: PathBuf,
    keep: usize,
}

impl DirStoreBuilder {
    /// How many checkpoints to keep: after each save, all but the newest `keep` are removed.
    /// Default [`DEFAULT_KEEP`] (3); at least [`MIN_KEEP`] (2), checked by
    /// [`open`](Self::open).
    pub fn keep(mut self, keep: usize) -> Self {
        self.keep = keep;
        self
    }

    /// Opens the store, creating its directory (and missing parents) if it does not exist. Opening
    /// reads nothing: a directory's checkpoints are checked when they are loaded.
    ///
    /// # Errors
    /// [`CheckpointError::InvalidKeep`] if `keep` is below [`MIN_KEEP`];
    /// [`CheckpointError::InUse`] if another store holds the directory's lock;
    /// [`CheckpointError::Io`] if the directory cannot be created (or a file of that name is in
    /// the way), when it was created its parent cannot be synced, or the lock file cannot be
    /// opened or locked.
    pub fn open(self) -> Result<DirStore, CheckpointError> {
        if self.keep < MIN_KEEP {
            return Err(CheckpointError::InvalidKeep { keep: self.keep });
        }
        let existed = self.dir.is_dir();
        fs::create_dir_all(&self.dir)
            .map_err(|e| CheckpointError::io("create the checkpoint directory", &self.dir, e))?;
        if !existed {
            // The new directory's entry must outlive a crash as the files in it will.
            if let Some(parent) = self.dir.parent() {
                let parent = if parent.as_os_str().is_empty() {
                    Path::new(".")
                } else {
                    parent
                };
                sync_dir(parent)?;
            }
        }
        let lock_path = self.dir.join(LOCK_FILE);
        let lock = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&lock_path)
            .map_err(|e| CheckpointError::io("open the lock file", &lock_path, e))?;
        match lock.try_lock() {
            Ok(()) => {}
            Err(fs::TryLockError::WouldBlock) => {
                return Err(CheckpointError::InUse { path: lock_path })
            }
            Err(fs::TryLockError::Error(e)) => {
                return Err(CheckpointError::io("lock", &lock_path, e))
            }
        }
        Ok(DirStore {
            dir: self.dir,
            keep: self.keep,
            _lock: lock,
        })
    }
}

impl DirStore {
    /// A store in `dir` with the default settings: [`builder(dir).open()`](Self::builder).
    ///
    /// # Errors
    /// As [`DirStoreBuilder::open`].
    pub fn open(dir: impl Into<PathBuf>) -> Result<Self, CheckpointError> {
        Self::builder(dir).open()
    }

    /// The settings of a store in `dir`, to change before [`open`](DirStoreBuilder::open).
    pub fn builder(dir: impl Into<PathBuf>) -> DirStoreBuilder {
        DirStoreBuilder {
            dir: dir.into(),
            keep: DEFAULT_KEEP,
        }
    }

    /// The store's directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// How many checkpoints the store keeps.
    pub fn keep(&self) -> usize {
        self.keep
    }

    /// The path under which checkpoint `seq` is (or would be) stored.
    pub fn path_of(&self, seq: u64) -> PathBuf {
        self.dir.join(file_name(seq))
    }

    /// The store's files: checkpoints by sequence, oldest first, and leftover temporary files.
    fn scan(&self) -> Result<Scan, CheckpointError> {
        let read = |e| CheckpointError::io("read the checkpoint directory", &self.dir, e);
        let mut scan = Scan::default();
        for entry in fs::read_dir(&self.dir).map_err(read)? {
            let entry = entry.map_err(read)?;
            let name = entry.file_name();
            match name.to_str().and_then(parse_name) {
                Some(Name::Checkpoint(seq)) => scan.checkpoints.push((seq, entry.path())),
                Some(Name::Temp) => scan.temps.push(entry.path()),
                None => {}
            }
        }
        scan.checkpoints.sort_unstable_by_key(|&(seq, _)| seq);
        Ok(scan)
    }

    /// Writes `payload` as checkpoint `seq` under its temporary name, synced, then renames it to
    /// its final name and syncs the directory (R11.2).
    fn write(&self, seq: u64, payload: &[u8]) -> Result<PathBuf, CheckpointError> {
        let temp = self.dir.join(temp_name(seq));
        let path = self.path_of(seq);
        if let Err(e) = write_and_rename(&temp, &path, seq, payload) {
            // Nothing was stored; what was written goes now, or with the next save.
            let _ = fs::remove_file(&temp);
            return Err(e);
        }
        sync_dir(&self.dir)?;
        Ok(path)
    }

    /// Removes all but the newest `keep` of `checkpoints` (by sequence, oldest first) (R11.6).
    fn prune(&self, checkpoints: &[(u64, PathBuf)]) {
        let excess = checkpoints.len().saturating_sub(self.keep);
        for (_, path) in &checkpoints[..excess] {
            remove_unneeded(path);
        }
    }
}

impl CheckpointStore for DirStore {
    /// Saves `payload` as checkpoint `seq`: leftover temporary files are removed, the checkpoint
    /// is written to a temporary file in the directory and synced, renamed to
    /// [`path_of(seq)`](DirStore::path_of), and the directory synced (on unix); then all but the
    /// newest [`keep`](DirStore::keep) checkpoints are removed. A crash at any point leaves
    /// either the whole new checkpoint or none of it (R11.2).
    ///
    /// # Errors
    /// [`CheckpointError::NotIncreasing`] if `seq` is not above every stored sequence (nothing
    /// is written); [`CheckpointError::Io`] if the directory cannot be read, or the file cannot
    /// be written, synced or renamed (the temporary file is removed, nothing is stored), or the
    /// directory cannot be synced after the rename (the checkpoint is in place but may not
    /// survive a crash; its sequence is taken). A file that cannot be removed afterwards is
    /// not an error: it is logged and removed by a later save.
    fn save(&mut self, seq: u64, payload: &[u8]) -> Result<(), CheckpointError> {
        let Scan {
            mut checkpoints,
            temps,
        } = self.scan()?;
        if let Some(&(newest, _)) = checkpoints.last() {
            if seq <= newest {
                return Err(CheckpointError::NotIncreasing { seq, newest });
            }
        }
        // Before writing, so that a directory short of space gets the room they took (R11.5).
        for temp in &temps {
            remove_unneeded(temp);
        }
        let path = self.write(seq, payload)?;
        tracing::debug!(seq, path = %path.display(), bytes = payload.len(), "checkpoint saved");
        checkpoints.push((seq, path));
        self.prune(&checkpoints);
        Ok(())
    }

    /// Loads the newest checkpoint that passes its checks, from newest to oldest; each newer one
    /// that fails is in [`Loaded::skipped`] and logged as a `tracing` warning (R11.4).
    /// Temporary files are never read (R11.5).
    ///
    /// # Errors
    /// [`CheckpointError::AllCorrupt`] if checkpoints are stored but none passes;
    /// [`CheckpointError::Io`] if the directory cannot be read. A checkpoint file that cannot be
    /// read is skipped ([`SkipReason::Unreadable`](super::SkipReason::Unreadable)), not an error.
    fn load_latest(&self) -> Result<Option<Loaded>, CheckpointError> {
        let scan = self.scan()?;
        load_newest(
            scan.checkpoints.iter().rev().map(|&(seq, _)| seq),
            |seq| fs::read(self.path_of(seq)).map_err(|e| e.to_string()),
            |seq| self.path_of(seq),
        )
    }

    /// The stored checkpoints, oldest first, as their names say: not read or checked
    /// (a failing one is listed too). Temporary files are not listed.
    ///
    /// # Errors
    /// [`CheckpointError::Io`] if the directory or a file's metadata cannot be read.
    fn list(&self) -> Result<Vec<StoredCheckpoint>, CheckpointError> {
        self.scan()?
            .checkpoints
            .into_iter()
            .map(|(seq, path)| {
                let len = fs::metadata(&path)
                    .map_err(|e| CheckpointError::io("read the metadata of", &path, e))?
                    .len();
                Ok(StoredCheckpoint { seq, path, len })
            })
            .collect()
    }
}

/// The store's files found in its directory.
#[derive(Default)]
struct Scan {
    /// Checkpoint files by sequence, oldest first.
    checkpoints: Vec<(u64, PathBuf)>,
    /// Temporary files of saves that did not finish.
    temps: Vec<PathBuf>,
}

/// What a file name is to the store.
#[derive(Debug, PartialEq, Eq)]
enum Name {
    /// A checkpoint's file, of this sequence.
    Checkpoint(u64),
    /// A temporary file.
    Temp,
}

/// Checkpoint `seq`'s file name.
fn file_name(seq: u64) -> String {
    name_of(seq) + SUFFIX
}

/// The name checkpoint `seq` is written under before its rename.
fn temp_name(seq: u64) -> String {
    name_of(seq) + TEMP_SUFFIX
}

/// What the store makes of a file name; `None` for names that are not its own (left alone).
fn parse_name(name: &str) -> Option<Name> {
    if let Some(stem) = name.strip_suffix(TEMP_SUFFIX) {
        return seq_in_name(stem).map(|_| Name::Temp);
    }
    seq_in_name(name.strip_suffix(SUFFIX)?).map(Name::Checkpoint)
}

/// Removes a file the store no longer needs (a leftover temporary file, a checkpoint beyond
/// `keep`). One that cannot be removed is logged and tried again at the next save: it takes
/// space, but no load depends on its being gone.
fn remove_unneeded(path: &Path) {
    if let Err(e) = fs::remove_file(path) {
        tracing::warn!(
            path = %path.display(),
            error = %e,
            "cannot remove an unneeded checkpoint file; the next save tries again"
        );
    }
}

/// Writes checkpoint `seq` to the file `temp`, syncs it, and renames it to `path`.
fn write_and_rename(
    temp: &Path,
    path: &Path,
    seq: u64,
    payload: &[u8],
) -> Result<(), CheckpointError> {
    let mut f = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .open(temp)
        .map_err(|e| CheckpointError::io("create the temporary file", temp, e))?;
    f.write_all(&format::header(seq, payload))
        .and_then(|()| f.write_all(payload))
        .map_err(|e| CheckpointError::io("write the temporary file", temp, e))?;
    f.sync_all()
        .map_err(|e| CheckpointError::io("sync the temporary file", temp, e))?;
    drop(f);
    fs::rename(temp, path)
        .map_err(|e| CheckpointError::io("rename the temporary file into place as", path, e))
}

/// Syncs the directory `dir`, so that the renames and creations in it survive a crash. Unix
/// only: elsewhere a directory cannot be opened as a file, and the rename is as durable as the
/// platform makes it.
fn sync_dir(dir: &Path) -> Result<(), CheckpointError> {
    #[cfg(unix)]
    {
        fs::File::open(dir)
            .and_then(|d| d.sync_all())
            .map_err(|e| CheckpointError::io("sync the directory", dir, e))?;
    }
    #[cfg(not(unix))]
    let _ = dir;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    // R11.2: names sort as their sequences, and parse back.
    #[test]
    fn r11_2_file_names_round_trip_and_sort_as_numbers() {
        assert_eq!(file_name(7), "checkpoint-00000000000000000007.ckpt");
        assert_eq!(temp_name(7), "checkpoint-00000000000000000007.ckpt.tmp");
        for seq in [0, 7, 10, 999, u64::MAX] {
            assert_eq!(parse_name(&file_name(seq)), Some(Name::Checkpoint(seq)));
            assert_eq!(parse_name(&temp_name(seq)), Some(Name::Temp));
        }
        let mut names: Vec<String> = [10, 9, u64::MAX, 0, 100].map(file_name).into();
        names.sort();
        let seqs: Vec<u64> = names
            .iter()
            .map(|n| match parse_name(n) {
                Some(Name::Checkpoint(s)) => s,
                other => panic!("{n}: {other:?}"),
            })
            .collect();
        assert_eq!(seqs, [0, 9, 10, 100, u64::MAX]);
    }

    // R11.5: names that are not the store's are left alone, never read or removed.
    #[test]
    fn r11_5_foreign_names_are_not_the_stores() {
        for name in [
            "checkpoint-7.ckpt",
            "checkpoint-0000000000000000000a.ckpt",
            "checkpoint-+0000000000000000007.ckpt",
            "checkpoint-99999999999999999999.ckpt",
            "checkpoint-00000000000000000007.ckpt.bak",
            "checkpoint-00000000000000000007",
            "checkpoint-.ckpt",
            "xcheckpoint-00000000000000000007.ckpt",
            "notes.txt",
            "",
        ] {
            assert_eq!(parse_name(name), None, "{name:?}");
        }
    }

    // R11.6: keep below two is refused before anything is touched.
    #[test]
    fn r11_6_keep_below_two_is_a_typed_error() {
        let dir =
            std::env::temp_dir().join(format!("correlator-ckpt-unit-keep-{}", std::process::id()));
        for keep in [0, 1] {
            let e = DirStore::builder(&dir).keep(keep).open().unwrap_err();
            assert!(matches!(e, CheckpointError::InvalidKeep { keep: k } if k == keep));
        }
        assert!(!dir.exists(), "a refused configuration creates nothing");
        assert_eq!(DirStore::builder(&dir).keep, DEFAULT_KEEP);
    }
}
