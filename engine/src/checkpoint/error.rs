//! Why a checkpoint store refused an operation ([`CheckpointError`]) and why a stored checkpoint
//! was passed over on loading ([`SkipReason`]). Every message says what to change (SPEC R8.2,
//! R11.7); every I/O error carries the path it concerns.
//!
//! Owns the checkpoint errors. May import nothing.

use std::fmt;
use std::io;
use std::path::PathBuf;

use super::{Skipped, MIN_KEEP};

/// An operation of a [`CheckpointStore`](super::CheckpointStore) that could not be done.
#[derive(Debug)]
#[non_exhaustive]
pub enum CheckpointError {
    /// A store was configured to keep fewer than [`MIN_KEEP`] checkpoints: with one, a corrupted
    /// newest checkpoint would leave nothing to fall back to (R11.6).
    InvalidKeep {
        /// The number asked for.
        keep: usize,
    },
    /// A save's sequence number is not above the newest one stored (R11.1); nothing was written.
    NotIncreasing {
        /// The sequence the save asked for.
        seq: u64,
        /// The newest sequence stored (a checkpoint that fails its checks counts: its number
        /// stays taken).
        newest: u64,
    },
    /// Checkpoints are stored but every one failed its checks (R11.4): there is nothing to load,
    /// and starting afresh silently would lose the state they held.
    AllCorrupt {
        /// Each one, newest first, with what is wrong with it.
        skipped: Vec<Skipped>,
    },
    /// Another store holds the directory's lock (R11.1): a store in this process or another
    /// process saves into it, and two writers would interleave their checkpoints.
    InUse {
        /// The lock file.
        path: PathBuf,
    },
    /// A store that cannot be locked (an object store bucket) found, at a save, that the newest
    /// checkpoint stored is not the one it saved last: another writer saves into it (R11.1).
    /// Nothing was written.
    OtherWriter {
        /// The store: the bucket.
        location: String,
        /// The newest sequence stored (`None`: the store's checkpoints were all removed).
        newest: Option<u64>,
        /// The sequence this store saved last.
        last_saved: u64,
    },
    /// A request to a store that is not a local directory (an object store bucket, say) failed.
    Remote {
        /// What the store was doing, as a verb phrase ("put the checkpoint").
        op: &'static str,
        /// What it concerned: the bucket, or `bucket/object`.
        location: String,
        /// What the store's client said.
        reason: String,
    },
    /// `checkpoint` or `recover` was called on a correlator built without
    /// `CorrelatorBuilder::checkpoints` (R11.9).
    NotConfigured,
    /// `checkpoint` or `recover` was called when it cannot run (R11.9, R11.13): before `start`,
    /// after it (for `recover`), after shutdown, or from a handler.
    NotNow {
        /// Why, and what to change.
        why: &'static str,
    },
    /// A live instance's monitor type is not registered with `CorrelatorBuilder::persistent`
    /// (R11.10): saving the other instances and dropping it would lose its state without a
    /// word. Nothing was saved.
    NotPersistent {
        /// The context the instance lives in.
        context: String,
        /// The monitor's type name.
        monitor: &'static str,
    },
    /// The correlator holds something a checkpoint cannot save (R11.10). Nothing was saved.
    Unsupported {
        /// Where: a context's name, or `correlator`.
        context: String,
        /// What cannot be saved.
        what: &'static str,
    },
    /// A monitor's state or an event could not be encoded (its `Serialize`, or the
    /// `EventCodec`, failed). Nothing was saved.
    Encode {
        /// What was being encoded.
        what: String,
        /// What the encoder said.
        reason: String,
    },
    /// A loaded checkpoint's bytes passed the store's checks but do not decode as this build's
    /// checkpoint (another program's, or its monitor or event types changed) (R11.12).
    Decode {
        /// What was being decoded.
        what: String,
        /// What the decoder said.
        reason: String,
    },
    /// The checkpoint holds instances of a monitor type that this correlator did not register
    /// with `CorrelatorBuilder::persistent` (R11.12).
    UnknownMonitor {
        /// The monitor's persistent name (`Persistent::NAME`).
        name: String,
    },
    /// The recovering correlator's contexts are not those of the checkpoint (R11.12): the same
    /// contexts must be created, with the same names, in the same order, before `recover`.
    ContextsDiffer {
        /// The checkpoint's contexts, by name, in id order.
        saved: Vec<String>,
        /// This correlator's.
        now: Vec<String>,
    },
    /// An instance's `Persistent::on_restore` did not register the
    /// listeners the instance had when the checkpoint was taken (R11.11).
    Mismatch {
        /// The context.
        context: String,
        /// The monitor's persistent name.
        monitor: String,
        /// What differs.
        why: String,
    },
    /// A file system operation failed.
    Io {
        /// What the store was doing, as a verb phrase ("write the temporary file").
        op: &'static str,
        /// The file or directory it concerned.
        path: PathBuf,
        /// The operating system's error.
        source: io::Error,
    },
}

impl CheckpointError {
    pub(crate) fn io(op: &'static str, path: impl Into<PathBuf>, source: io::Error) -> Self {
        Self::Io {
            op,
            path: path.into(),
            source,
        }
    }
}

impl fmt::Display for CheckpointError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::InvalidKeep { keep } => write!(
                f,
                "a checkpoint store must keep at least {MIN_KEEP} checkpoints, so that a \
                 corrupted newest one has an older one to fall back to, but `keep` is {keep}; \
                 set `keep` to {MIN_KEEP} or more"
            ),
            Self::NotIncreasing { seq, newest } => {
                write!(
                    f,
                    "checkpoint sequence {seq} is not above the newest one stored, {newest}: \
                     sequences must strictly increase, and the number of a checkpoint that \
                     failed its checks stays taken; "
                )?;
                match newest.checked_add(1) {
                    Some(next) => write!(f, "save under {next} or above"),
                    None => write!(
                        f,
                        "no sequence is left above it, so move the stored checkpoints away to \
                         start a new series"
                    ),
                }
            }
            Self::AllCorrupt { skipped } => {
                write!(
                    f,
                    "none of the {} stored checkpoints passed its checks, so none was loaded: ",
                    skipped.len()
                )?;
                for (i, s) in skipped.iter().enumerate() {
                    if i > 0 {
                        f.write_str("; ")?;
                    }
                    s.fmt(f)?;
                }
                f.write_str(
                    "; restore an intact checkpoint file into the directory, or move these \
                     files away to start without a checkpoint",
                )
            }
            Self::InUse { path } => write!(
                f,
                "the checkpoint directory is in use: another store, in this process or another, \
                 holds `{}`; give each correlator a checkpoint directory of its own, or drop \
                 (or stop) the other store first",
                path.display()
            ),
            Self::OtherWriter {
                location,
                newest,
                last_saved,
            } => {
                write!(f, "another writer saves checkpoints into `{location}`: ")?;
                match newest {
                    Some(n) => write!(f, "its newest checkpoint is {n}")?,
                    None => f.write_str("its checkpoints were removed")?,
                }
                write!(
                    f,
                    ", but this store saved {last_saved} last; give each correlator a store of \
                     its own"
                )
            }
            Self::Remote {
                op,
                location,
                reason,
            } => write!(
                f,
                "cannot {op} `{location}`: {reason}; check that the store's server runs and \
                 can be reached"
            ),
            Self::NotConfigured => f.write_str(
                "this correlator was built without checkpoints; build it with \
                 `CorrelatorBuilder::checkpoints(store, codec)`",
            ),
            Self::NotNow { why } => f.write_str(why),
            Self::NotPersistent { context, monitor } => write!(
                f,
                "context `{context}` holds an instance of monitor `{monitor}`, which is not \
                 registered as persistent, so the checkpoint would lose it; implement \
                 `Persistent` for it and register it with `CorrelatorBuilder::persistent`"
            ),
            Self::Unsupported { context, what } => write!(
                f,
                "`{context}` holds {what}: checkpoints cannot save it; nothing was saved"
            ),
            Self::Encode { what, reason } => write!(
                f,
                "cannot encode {what}: {reason}; nothing was saved (check its `Serialize` \
                 implementation or the event codec)"
            ),
            Self::Decode { what, reason } => write!(
                f,
                "cannot decode {what} from the checkpoint: {reason}; recover with the program \
                 (monitor types, event codec) that saved it"
            ),
            Self::UnknownMonitor { name } => write!(
                f,
                "the checkpoint holds instances of monitor `{name}`, which this correlator does \
                 not know; register it with `CorrelatorBuilder::persistent` before recovering"
            ),
            Self::ContextsDiffer { saved, now } => write!(
                f,
                "the checkpoint was taken with contexts {saved:?}, but this correlator has \
                 {now:?}; create the same contexts, in the same order, before `recover`"
            ),
            Self::Mismatch {
                context,
                monitor,
                why,
            } => write!(
                f,
                "an instance of `{monitor}` in context `{context}` cannot be restored: {why}; \
                 `on_restore` must register the listeners the instance had, in the order it \
                 registered them"
            ),
            Self::Io { op, path, source } => {
                write!(f, "cannot {op} `{}`: {source}", path.display())?;
                match source.kind() {
                    io::ErrorKind::PermissionDenied => f.write_str(
                        "; give this process read and write access to the checkpoint directory",
                    ),
                    io::ErrorKind::NotFound => f.write_str(
                        "; the checkpoint directory may have been removed or moved: open the \
                         store again",
                    ),
                    io::ErrorKind::StorageFull => f.write_str(
                        "; free space on the checkpoint directory's file system, or keep fewer \
                         checkpoints",
                    ),
                    _ => Ok(()),
                }
            }
        }
    }
}

impl std::error::Error for CheckpointError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::Io { source, .. } => Some(source),
            _ => None,
        }
    }
}

/// Why a stored checkpoint failed its checks on loading (R11.3) and was passed over for an older
/// one (R11.4).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum SkipReason {
    /// The file is shorter than a header ([`HEADER_LEN`](super::HEADER_LEN) bytes): cut short
    /// while written, or by a damaged file system.
    TooShort {
        /// The file's length in bytes.
        len: u64,
    },
    /// The file does not begin with [`MAGIC`](super::MAGIC): it is not a checkpoint file, or its
    /// first bytes are damaged.
    BadMagic,
    /// The file's format version is not the one this build reads ([`VERSION`](super::VERSION)).
    UnsupportedVersion {
        /// The version in the file.
        version: u32,
    },
    /// The payload's length differs from the header's: the file was cut short (`actual` below
    /// `declared`) or has bytes beyond its end.
    LengthMismatch {
        /// The length the header declares.
        declared: u64,
        /// The payload bytes the file holds.
        actual: u64,
    },
    /// The checksum over the header's fields and the payload differs from the stored one: a byte
    /// of the file has changed since it was written.
    ChecksumMismatch {
        /// The checksum in the header.
        stored: u32,
        /// The checksum of the bytes read.
        computed: u32,
    },
    /// The sequence number in the (intact) header differs from the one in the file's name: the
    /// file was copied or renamed by hand.
    SequenceMismatch {
        /// The sequence in the header.
        in_header: u64,
        /// The sequence in the file name.
        in_name: u64,
    },
    /// The file could not be read (the operating system's error message).
    Unreadable {
        /// What the operating system said.
        error: String,
    },
}

impl fmt::Display for SkipReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::TooShort { len } => write!(
                f,
                "the file is {len} bytes long, shorter than a checkpoint header ({} bytes)",
                super::HEADER_LEN
            ),
            Self::BadMagic => {
                f.write_str("the file does not begin with a checkpoint's magic bytes")
            }
            Self::UnsupportedVersion { version } => write!(
                f,
                "checkpoint format version {version}; this build reads version {}",
                super::VERSION
            ),
            Self::LengthMismatch { declared, actual } if actual < declared => write!(
                f,
                "the payload is cut short: the header declares {declared} bytes, the file holds \
                 {actual}"
            ),
            Self::LengthMismatch { declared, actual } => write!(
                f,
                "the file holds {} bytes beyond the {declared} its header declares",
                actual - declared
            ),
            Self::ChecksumMismatch { stored, computed } => write!(
                f,
                "checksum mismatch: stored {stored:#010x}, computed {computed:#010x}"
            ),
            Self::SequenceMismatch { in_header, in_name } => write!(
                f,
                "the header holds sequence {in_header} but the file is named for {in_name}"
            ),
            Self::Unreadable { error } => write!(f, "the file cannot be read: {error}"),
        }
    }
}

impl std::error::Error for SkipReason {}

#[cfg(test)]
mod tests {
    use super::*;

    // R11.7: each message names what to change.
    #[test]
    fn r11_7_messages_say_what_to_change() {
        let keep = CheckpointError::InvalidKeep { keep: 1 }.to_string();
        assert!(keep.contains("`keep` is 1") && keep.contains("set `keep` to 2 or more"));

        let seq = CheckpointError::NotIncreasing { seq: 4, newest: 7 }.to_string();
        assert!(
            seq.contains("sequence 4") && seq.contains("save under 8 or above"),
            "{seq}"
        );
        let last = CheckpointError::NotIncreasing {
            seq: 3,
            newest: u64::MAX,
        }
        .to_string();
        assert!(last.contains("no sequence is left"), "{last}");

        let io = CheckpointError::io(
            "read the checkpoint directory",
            "/nowhere/ckpt",
            io::Error::from(io::ErrorKind::PermissionDenied),
        );
        let text = io.to_string();
        assert!(text.contains("`/nowhere/ckpt`") && text.contains("read and write access"));
        assert!(std::error::Error::source(&io).is_some());

        let all = CheckpointError::AllCorrupt {
            skipped: vec![Skipped {
                seq: 9,
                path: PathBuf::from("d/checkpoint-9.ckpt"),
                reason: SkipReason::BadMagic,
            }],
        };
        let text = all.to_string();
        assert!(text.contains("checkpoint-9.ckpt") && text.contains("restore an intact"));
        assert!(std::error::Error::source(&all).is_none());
    }

    // R11.4: a length mismatch says which way it goes.
    #[test]
    fn r11_4_length_mismatch_says_cut_short_or_too_long() {
        let short = SkipReason::LengthMismatch {
            declared: 10,
            actual: 4,
        };
        assert!(short.to_string().contains("cut short"));
        let long = SkipReason::LengthMismatch {
            declared: 4,
            actual: 10,
        };
        assert!(long.to_string().contains("6 bytes beyond"));
    }
}
