//! Checkpoints in a JetStream object store bucket: the store several processes share (SPEC §11
//! of the engine, R11.1-R11.7, with a bucket in place of a directory).
//!
//! Each checkpoint is one object, `checkpoint-{seq:020}`, holding the bytes
//! [`correlator::checkpoint::frame`] makes (the engine's header with its CRC-32C, then the
//! payload), so that loading checks a bucket's checkpoints exactly as a directory's
//! ([`correlator::checkpoint::unframe`]): a damaged or truncated newest checkpoint is reported and
//! the one before it loaded. The object store adds its own SHA-256 digest, checked as an object
//! is read; a mismatch there is a skipped checkpoint too.
//!
//! Atomicity comes from the object store: a put publishes the chunks, then the object's
//! metadata, and an object without its metadata does not exist for `list` or `get`; a process
//! killed during a put leaves chunks nobody names (the server keeps them until the bucket's
//! limits or a purge remove them), never half a checkpoint. Durability is the bucket's stream's
//! (file storage here; replicas on a cluster).
//!
//! One writer per bucket, as for a directory; a bucket cannot be locked as a directory is, so
//! the store checks at each save that the newest checkpoint is still the one it saved last, and
//! refuses with [`CheckpointError::OtherWriter`] when another writer has been at work (detected at
//! the next save, not prevented: the check is a read, then a put, not a compare-and-set).

use std::path::PathBuf;

use async_nats::jetstream::object_store::{self, ObjectStore};
use async_nats::jetstream::stream::StorageType;
use correlator::checkpoint::{
    self, CheckpointError, CheckpointStore, Loaded, StoredCheckpoint, DEFAULT_KEEP, MIN_KEEP,
};
use futures_util::StreamExt;
use tokio::io::AsyncReadExt;

use crate::connector::Connector;
use crate::error::{js, ConnectorError};

/// A [`CheckpointStore`] in a JetStream object store bucket, created (file storage) if absent:
/// the store for several processes, each with a bucket of its own or one writer per bucket.
///
/// Its calls block the calling thread on a small runtime of the store's own (the connection
/// stays the connector's): the store outlives neither the connector nor its connection, but a
/// dropped connector makes its calls fail with [`CheckpointError::Remote`], never panic.
///
/// # Example
/// ```no_run
/// use correlator::checkpoint::CheckpointStore;
/// use correlator_nats::{Connector, ConnectorOptions, JetStreamCheckpoints};
///
/// let nats = Connector::connect("nats://127.0.0.1:4222", ConnectorOptions::default())?;
/// let mut store = JetStreamCheckpoints::open(&nats, "fraud-p0")?;
/// store.save(1, b"state after the first second")?;
/// let latest = store.load_latest()?.expect("saved");
/// assert_eq!(latest.seq, 1);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct JetStreamCheckpoints {
    runtime: tokio::runtime::Runtime,
    bucket: String,
    store: ObjectStore,
    keep: usize,
    /// The sequence this store saved last, for the other-writer check.
    last_saved: Option<u64>,
}

impl std::fmt::Debug for JetStreamCheckpoints {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JetStreamCheckpoints")
            .field("bucket", &self.bucket)
            .field("keep", &self.keep)
            .finish_non_exhaustive()
    }
}

impl JetStreamCheckpoints {
    /// The store in object store bucket `bucket`, created with file storage if it does not
    /// exist, keeping [`DEFAULT_KEEP`] checkpoints.
    ///
    /// # Errors
    /// [`ConnectorError::JetStream`] if the bucket can be neither found nor created;
    /// [`ConnectorError::Runtime`] if the store's runtime cannot start.
    ///
    /// # Panics
    /// When called from inside an async task (it blocks), as every call of the store.
    pub fn open(connector: &Connector, bucket: &str) -> Result<Self, ConnectorError> {
        Self::open_keeping(connector, bucket, DEFAULT_KEEP)
    }

    /// As [`open`](Self::open), keeping the newest `keep` checkpoints (at least [`MIN_KEEP`],
    /// so that a damaged newest one has one to fall back to).
    ///
    /// # Errors
    /// [`ConnectorError::Invalid`] if `keep` is below [`MIN_KEEP`]; as [`open`](Self::open).
    ///
    /// # Panics
    /// When called from inside an async task.
    pub fn open_keeping(
        connector: &Connector,
        bucket: &str,
        keep: usize,
    ) -> Result<Self, ConnectorError> {
        if keep < MIN_KEEP {
            return Err(ConnectorError::Invalid {
                setting: "keep",
                expected: "at least 2 (the newest checkpoint and one to fall back to)",
            });
        }
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| ConnectorError::Runtime(e.to_string()))?;
        let jetstream = connector.jetstream();
        let store = runtime.block_on(async {
            match jetstream.get_object_store(bucket).await {
                Ok(store) => Ok(store),
                Err(_) => {
                    let config = object_store::Config {
                        bucket: bucket.to_string(),
                        description: Some("correlator checkpoints".into()),
                        storage: StorageType::File,
                        ..Default::default()
                    };
                    match jetstream.create_object_store(config).await {
                        Ok(store) => Ok(store),
                        // Another process created it meanwhile.
                        Err(first) => jetstream.get_object_store(bucket).await.map_err(|_| first),
                    }
                }
            }
        });
        Ok(Self {
            runtime,
            bucket: bucket.to_string(),
            store: store.map_err(js)?,
            keep,
            last_saved: None,
        })
    }

    /// The bucket's name.
    pub fn bucket(&self) -> &str {
        &self.bucket
    }

    /// How many checkpoints the store keeps.
    pub fn keep(&self) -> usize {
        self.keep
    }

    /// The name of checkpoint `seq`'s object ([`checkpoint::name_of`]).
    pub fn object_name(seq: u64) -> String {
        checkpoint::name_of(seq)
    }

    /// `bucket/object` (the bucket alone for an empty `object`), what errors and skips name.
    fn location(&self, object: &str) -> String {
        if object.is_empty() {
            self.bucket.clone()
        } else {
            format!("{}/{object}", self.bucket)
        }
    }

    fn remote(&self, op: &'static str, object: &str, e: impl std::fmt::Display) -> CheckpointError {
        CheckpointError::Remote {
            op,
            location: self.location(object),
            reason: e.to_string(),
        }
    }

    /// The checkpoints in the bucket by sequence, oldest first, with their sizes; objects whose
    /// names are not the store's are left alone.
    fn scan(&self) -> Result<Vec<(u64, u64)>, CheckpointError> {
        let listed = self.runtime.block_on(async {
            let mut list = self.store.list().await.map_err(|e| e.to_string())?;
            let mut found = Vec::new();
            while let Some(info) = list.next().await {
                let info = info.map_err(|e| e.to_string())?;
                if let Some(seq) = checkpoint::seq_in_name(&info.name) {
                    found.push((seq, info.size as u64));
                }
            }
            Ok::<_, String>(found)
        });
        let mut found = listed.map_err(|e| self.remote("list the checkpoints of", "", e))?;
        found.sort_unstable_by_key(|&(seq, _)| seq);
        Ok(found)
    }

    /// The bytes of object `name`; an error (the digest check included) as its message.
    fn read(&self, name: &str) -> Result<Vec<u8>, String> {
        self.runtime.block_on(async {
            let mut object = self.store.get(name).await.map_err(|e| e.to_string())?;
            let mut bytes = Vec::new();
            object
                .read_to_end(&mut bytes)
                .await
                .map_err(|e| e.to_string())?;
            Ok(bytes)
        })
    }
}

impl CheckpointStore for JetStreamCheckpoints {
    /// Puts checkpoint `seq` as one object (chunks, then its metadata: all of it or nothing),
    /// then deletes all but the newest [`keep`](Self::keep).
    ///
    /// # Errors
    /// [`CheckpointError::NotIncreasing`] if `seq` is not above every stored sequence;
    /// [`CheckpointError::OtherWriter`] if the newest stored is not the one this store saved
    /// last; [`CheckpointError::Remote`] if the bucket cannot be listed or the put fails. A checkpoint
    /// that cannot be deleted afterwards is logged, not an error: a later save deletes it.
    fn save(&mut self, seq: u64, payload: &[u8]) -> Result<(), CheckpointError> {
        let mut stored = self.scan()?;
        let newest = stored.last().map(|&(seq, _)| seq);
        if let Some(last_saved) = self.last_saved {
            if newest != Some(last_saved) {
                return Err(CheckpointError::OtherWriter {
                    location: self.bucket.clone(),
                    newest,
                    last_saved,
                });
            }
        }
        if let Some(newest) = newest {
            if seq <= newest {
                return Err(CheckpointError::NotIncreasing { seq, newest });
            }
        }
        let name = Self::object_name(seq);
        let bytes = checkpoint::frame(seq, payload);
        if let Err(e) = self
            .runtime
            .block_on(self.store.put(name.as_str(), &mut bytes.as_slice()))
        {
            // The put may have landed before the error: the next save cannot tell its own
            // checkpoint from another writer's, so it skips the check once.
            self.last_saved = None;
            return Err(self.remote("put the checkpoint", &name, e));
        }
        self.last_saved = Some(seq);
        tracing::debug!(seq, bucket = %self.bucket, bytes = payload.len(), "checkpoint saved");
        stored.push((seq, bytes.len() as u64));
        let excess = stored.len().saturating_sub(self.keep);
        for &(old, _) in &stored[..excess] {
            let old = Self::object_name(old);
            if let Err(e) = self.runtime.block_on(self.store.delete(old.as_str())) {
                tracing::warn!(object = %self.location(&old), error = %e,
                    "cannot delete an old checkpoint; a later save tries again");
            }
        }
        Ok(())
    }

    /// The newest checkpoint that passes every check (the object store's digest, then the
    /// engine's header and CRC-32C); each newer one that fails is in [`Loaded::skipped`] and
    /// logged as a warning.
    ///
    /// # Errors
    /// [`CheckpointError::AllCorrupt`] if checkpoints are stored and none passes;
    /// [`CheckpointError::Remote`] if the bucket cannot be listed.
    fn load_latest(&self) -> Result<Option<Loaded>, CheckpointError> {
        let stored = self.scan()?;
        checkpoint::load_newest(
            stored.iter().rev().map(|&(seq, _)| seq),
            |seq| self.read(&Self::object_name(seq)),
            |seq| PathBuf::from(self.location(&Self::object_name(seq))),
        )
    }

    /// The checkpoints in the bucket, oldest first, unchecked; `len` is the object's size.
    ///
    /// # Errors
    /// [`CheckpointError::Remote`] if the bucket cannot be listed.
    fn list(&self) -> Result<Vec<StoredCheckpoint>, CheckpointError> {
        Ok(self
            .scan()?
            .into_iter()
            .map(|(seq, len)| StoredCheckpoint {
                seq,
                path: PathBuf::from(self.location(&Self::object_name(seq))),
                len,
            })
            .collect())
    }
}
