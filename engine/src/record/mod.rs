//! Record and replay (SPEC §10): what a run's contexts took from their inboxes, in which order,
//! so that the same monitors reproduce the run exactly.
//!
//! # What makes a run unrepeatable, and what is recorded
//! One context is deterministic given the order of its inbox entries: routing, dispatch, timers
//! and (under event time) its clock follow from that order alone (R2.2, R3.1, R7.1). What a
//! multi-context run leaves to chance is the *interleaving* of senders in each inbox: each
//! sender's own entries keep their order (R2.3), but which sender's entry comes next depends on
//! the race between threads. Wall-clock ticks are the other chance input. So a recording holds,
//! per context, a *stream* of records:
//! - `Run { origin, count }`: the next `count` entries (events or spawns) came from `origin`, a
//!   context or an input handle (an origin, see [`describe_origin`]). Runs are what makes recording cheap: a context fed
//!   by one sender writes one record when the sender changes, not one per entry.
//! - `Tick { time }`: a clock tick taken (wall-clock ticks are not reproducible otherwise).
//! - `Emit { output, fingerprint }`: a handler put a value into an output, with the value's
//!   fingerprint where the output has one ([`Output::fingerprinted`](crate::Output::fingerprinted)).
//!   They are what a replay is checked against.
//! - `Created { context }`: a handler created a context (its id must come out the same).
//! - `Begin` and `End`: the context's id, name, wall-clock span and number of entries.
//!
//! The *inputs* are not recorded by default (with
//! [`record_inputs`](crate::CorrelatorBuilder::record_inputs) they are, whole, as `Input`
//! records, and a replay feeds itself from them): the external senders' events are re-fed by the replaying
//! program, from the durable source they came from (a JetStream stream from the recorded
//! consumer's position, a log file, a seeded generator). Each input handle is a sender of its
//! own (R2.3) and is named in the recording by its creation number, so the replaying program
//! must create its input handles in the same order and feed each the same events in the same
//! order; which thread feeds which handle, and how fast, does not matter.
//!
//! # How a replay enforces the order
//! With [`CorrelatorBuilder::replay`](crate::CorrelatorBuilder::replay) each context takes
//! what arrives in its inbox into a buffer per origin and processes entries in the order its
//! stream says: the next `Run`'s origin must deliver before anything else is processed, however
//! the threads race. Ticks come from the recording (the clock thread does not run; ticks sent by
//! input handles are dropped: their recorded positions stand in). Every emit and context
//! creation is compared with the stream's next record. The first difference stops the replay:
//! the context stops processing, every other context stops at its next step, and
//! [`Correlator::divergence`](crate::Correlator::divergence) and the shutdown's error
//! ([`Error::Diverged`](crate::Error::Diverged)) name the context, the entry and the position in
//! the stream ([`Divergence`]). At shutdown each context also checks that its stream is used up
//! and that nothing it took is left over: a recording that expects more than was re-fed, or a
//! replay fed more than was recorded, diverges there.
//!
//! # Costs
//! Off (the default), a context tests one enum discriminant per inbox entry and per emit, and
//! every entry carries its sender's 4-byte origin (in the enum's padding for events of 8-byte
//! alignment, so no slot grows). On, a context compares the origin with its current run's per
//! entry and appends a few bytes to a buffer it owns when the run ends; full buffers (64 KiB)
//! go to the [`RecordSink`] from the context's thread. Replaying costs a buffer per origin.
//!
//! Owns the recording (the sinks, the file, the records a context writes and the replay's order
//! and checks); `format` owns the bytes, `replay` a replaying context's side, `cli` the recording
//! tool. May import the leaves.

pub mod cli;
mod format;
mod replay;

use std::collections::BTreeMap;
use std::fmt;
use std::fs::File;
use std::hash::Hasher;
use std::io::{self, BufWriter, Write};
use std::path::Path;
use std::time::{SystemTime, UNIX_EPOCH};

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

// Std's types, not the `sync` shim's: nothing here is a lock-free protocol for loom to check
// (a context's journal is its own; what contexts share is behind a mutex, off the hot path), and
// a sink is a trait object, which loom's `Arc` cannot hold.
use crate::sync::{lock_std, StdArc as Arc, StdMutex as Mutex};

pub use crate::error::Divergence;
pub use format::{FormatError, Record, FRAME_LEN, HEADER_LEN, MAGIC, VERSION};
pub(crate) use replay::{Replayer, Step};

/// The bit of a [`Record::Emit`]'s output that marks an emit to a channel's outputs
/// ([`Scope::emit`](crate::Scope::emit)); the channel's number is below it.
pub const CHANNEL_EMIT: u64 = 1 << 63;

/// How many bytes a context buffers before it hands them to the sink.
const CHUNK: usize = 64 * 1024;

/// Who put an inbox entry there: a context (its id) or an input handle (its creation number
/// with [`Origin::INPUT`] set). Every entry carries one.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct Origin(pub(crate) u32);

impl Origin {
    /// The bit that marks an input handle's origin.
    pub(crate) const INPUT: u32 = 1 << 31;

    /// Whether it is an input handle's.
    #[inline(always)]
    pub(crate) fn is_input(self) -> bool {
        self.0 & Self::INPUT != 0
    }

    /// The origin of the context `id`.
    pub(crate) fn context(id: u32) -> Self {
        Self(id)
    }

    /// The origin of the input handle created `n`-th (from 0).
    pub(crate) fn input(n: u32) -> Self {
        Self(n | Self::INPUT)
    }
}

/// Describes an origin for people: `context 3`, `input 2`.
pub fn describe_origin(origin: u32) -> String {
    if origin & Origin::INPUT != 0 {
        format!("input {}", origin & !Origin::INPUT)
    } else {
        format!("context {origin}")
    }
}

/// Where a recording goes: the chunks of each context's stream, written by that context's
/// thread (so one context's chunks arrive in order; chunks of different contexts interleave).
/// Implement it to send a recording elsewhere than a file; [`FileSink`] and [`MemorySink`] are
/// the two the crate has.
pub trait RecordSink: Send + Sync + 'static {
    /// Stores a chunk of context `context`'s stream.
    ///
    /// # Errors
    /// An I/O error ends the recording: the correlator's shutdown reports it
    /// ([`Error::Recording`](crate::Error::Recording)) and nothing more is written.
    fn write_chunk(&self, context: u32, bytes: &[u8]) -> io::Result<()>;

    /// Called once by the shutdown, after every context wrote its last chunk.
    ///
    /// # Errors
    /// As [`write_chunk`](Self::write_chunk).
    fn finish(&self) -> io::Result<()> {
        Ok(())
    }
}

/// How a recording writes the input handles' events, and a replay reads them back
/// ([`CorrelatorBuilder::record_inputs`](crate::CorrelatorBuilder::record_inputs)): for
/// inputs that cannot be read again from where they came (a socket, a generator without a seed).
/// A serde user can implement it with any binary format crate.
pub trait EventCodec<E>: Send + Sync + 'static {
    /// Appends `event`'s bytes to `out`.
    fn encode(&self, event: &E, out: &mut Vec<u8>);

    /// The event `bytes` encode.
    ///
    /// # Errors
    /// The bytes are not an event (a recording of another build, say): the message says why, and
    /// the replay diverges there.
    fn decode(&self, bytes: &[u8]) -> Result<E, String>;
}

/// Writes a recording to a file (the format of `engine/RECORDING.md`).
pub struct FileSink {
    out: Mutex<BufWriter<File>>,
}

impl FileSink {
    /// Creates (or truncates) the file at `path` and writes the header.
    ///
    /// # Errors
    /// The file could not be created or written.
    pub fn create(path: impl AsRef<Path>) -> io::Result<Self> {
        let mut out = BufWriter::with_capacity(CHUNK, File::create(path)?);
        out.write_all(&format::header())?;
        Ok(Self {
            out: Mutex::new(out),
        })
    }
}

impl fmt::Debug for FileSink {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FileSink").finish_non_exhaustive()
    }
}

impl RecordSink for FileSink {
    fn write_chunk(&self, context: u32, bytes: &[u8]) -> io::Result<()> {
        let mut out = lock_std(&self.out);
        out.write_all(&frame(context, bytes))?;
        out.write_all(bytes)
    }

    fn finish(&self) -> io::Result<()> {
        let mut out = lock_std(&self.out);
        out.flush()?;
        out.get_ref().sync_data()
    }
}

/// Keeps a recording in memory (for tests, and for replaying within the same process); a clone
/// is the same sink.
#[derive(Clone)]
pub struct MemorySink {
    bytes: Arc<Mutex<Vec<u8>>>,
}

impl Default for MemorySink {
    fn default() -> Self {
        Self::new()
    }
}

impl MemorySink {
    /// An empty recording.
    pub fn new() -> Self {
        Self {
            bytes: Arc::new(Mutex::new(format::header().to_vec())),
        }
    }

    /// The recording as a file's bytes.
    pub fn bytes(&self) -> Vec<u8> {
        lock_std(&self.bytes).clone()
    }

    /// The recording, read back.
    ///
    /// # Errors
    /// Never for a recording a correlator wrote completely; see [`Recording::from_bytes`].
    pub fn recording(&self) -> Result<Recording, FormatError> {
        Recording::from_bytes(&self.bytes())
    }
}

impl fmt::Debug for MemorySink {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MemorySink")
            .field("bytes", &lock_std(&self.bytes).len())
            .finish()
    }
}

impl RecordSink for MemorySink {
    fn write_chunk(&self, context: u32, bytes: &[u8]) -> io::Result<()> {
        let mut b = lock_std(&self.bytes);
        b.extend_from_slice(&frame(context, bytes));
        b.extend_from_slice(bytes);
        Ok(())
    }
}

fn frame(context: u32, bytes: &[u8]) -> [u8; FRAME_LEN] {
    let mut f = [0u8; FRAME_LEN];
    f[..4].copy_from_slice(&context.to_le_bytes());
    f[4..].copy_from_slice(&(bytes.len() as u32).to_le_bytes());
    f
}

/// One context's stream, decoded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ContextStream {
    /// The context's id.
    pub context: u32,
    /// Its records, in order.
    pub records: Vec<Record>,
}

/// A recording read back: each context's stream of records.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Recording {
    contexts: Vec<ContextStream>,
}

impl Recording {
    /// Reads the recording in the file at `path`.
    ///
    /// # Errors
    /// [`RecordingError::Io`] if the file cannot be read, [`RecordingError::Format`] if it is not
    /// a recording of this format version or is damaged.
    pub fn open(path: impl AsRef<Path>) -> Result<Self, RecordingError> {
        let bytes = std::fs::read(path).map_err(|e| RecordingError::Io(e.to_string()))?;
        Self::from_bytes(&bytes).map_err(RecordingError::Format)
    }

    /// Reads a recording from a file's bytes.
    ///
    /// # Errors
    /// The bytes are not a recording of this format version, or are damaged.
    pub fn from_bytes(bytes: &[u8]) -> Result<Self, FormatError> {
        let mut contexts = Vec::new();
        for (context, stream) in format::split(bytes)? {
            let mut records = Vec::new();
            let mut at = 0;
            while let Some(r) = format::get_record(&stream, &mut at, context)? {
                records.push(r);
            }
            contexts.push(ContextStream { context, records });
        }
        Ok(Self { contexts })
    }

    /// Every context's stream, by id.
    pub fn contexts(&self) -> &[ContextStream] {
        &self.contexts
    }

    /// The stream of context `id`, if it was recorded.
    pub fn context(&self, id: u32) -> Option<&ContextStream> {
        self.contexts.iter().find(|c| c.context == id)
    }

    /// What the recording holds, for people (the `correlator-recording print` tool shows it).
    pub fn summary(&self) -> Summary {
        let contexts = self
            .contexts
            .iter()
            .map(|c| {
                let mut s = ContextSummary {
                    context: c.context,
                    ..Default::default()
                };
                for r in &c.records {
                    match r {
                        Record::Begin { name, wall_ns, .. } => {
                            s.name = name.clone();
                            s.began_ns = Some(*wall_ns);
                        }
                        Record::Run { origin, count } => {
                            *s.entries_by_origin.entry(*origin).or_default() += count;
                        }
                        Record::Input { origin, bytes } => {
                            *s.entries_by_origin.entry(*origin).or_default() += 1;
                            s.input_bytes += bytes.len() as u64;
                        }
                        Record::Tick { .. } => s.ticks += 1,
                        Record::Emit { .. } => s.emits += 1,
                        Record::Created { .. } => s.created += 1,
                        Record::End { wall_ns, .. } => {
                            s.ended_ns = Some(*wall_ns);
                        }
                    }
                }
                s
            })
            .collect();
        Summary { contexts }
    }
}

/// Why a recording file could not be read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RecordingError {
    /// The file could not be read.
    Io(String),
    /// Its bytes are not a readable recording.
    Format(FormatError),
}

impl fmt::Display for RecordingError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Io(e) => write!(f, "cannot read the recording: {e}"),
            Self::Format(e) => e.fmt(f),
        }
    }
}

impl std::error::Error for RecordingError {}

/// What a recording holds, per context.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Summary {
    /// Per context, by id.
    pub contexts: Vec<ContextSummary>,
}

/// What one context's stream holds.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ContextSummary {
    /// The context's id.
    pub context: u32,
    /// Its name.
    pub name: String,
    /// Inbox entries (events and spawns) taken, per origin (see [`describe_origin`]).
    pub entries_by_origin: BTreeMap<u32, u64>,
    /// Clock ticks taken.
    pub ticks: u64,
    /// Values emitted to outputs.
    pub emits: u64,
    /// Contexts its handlers created.
    pub created: u64,
    /// Bytes of input events recorded whole (`record_inputs`; 0 without).
    pub input_bytes: u64,
    /// When it began and ended, in nanoseconds since the Unix epoch (`None`: not recorded, a
    /// stream cut short).
    pub began_ns: Option<u64>,
    /// See `began_ns`.
    pub ended_ns: Option<u64>,
}

impl fmt::Display for Summary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let began = self.contexts.iter().filter_map(|c| c.began_ns).min();
        let ended = self.contexts.iter().filter_map(|c| c.ended_ns).max();
        write!(f, "{} contexts", self.contexts.len())?;
        match (began, ended) {
            (Some(b), Some(e)) => writeln!(
                f,
                ", {:.3} s from the first context's start to the last one's end",
                e.saturating_sub(b) as f64 / 1e9
            )?,
            _ => writeln!(f, " (a stream has no end: the recording was cut short)")?,
        }
        for c in &self.contexts {
            let total: u64 = c.entries_by_origin.values().sum();
            writeln!(
                f,
                "context {} ({:?}): {} entries, {} ticks, {} emits, {} contexts created{}",
                c.context,
                c.name,
                total,
                c.ticks,
                c.emits,
                c.created,
                match (c.began_ns, c.ended_ns) {
                    (Some(b), Some(e)) => format!(", {:.3} s", e.saturating_sub(b) as f64 / 1e9),
                    _ => ", no end record".into(),
                }
            )?;
            for (origin, n) in &c.entries_by_origin {
                writeln!(f, "  from {}: {n}", describe_origin(*origin))?;
            }
            if c.input_bytes > 0 {
                writeln!(f, "  input events recorded whole: {} bytes", c.input_bytes)?;
            }
        }
        Ok(())
    }
}

/// Fingerprints a value with FNV-1a over what its `Hash` writes: the same value gives the same
/// fingerprint in every run and every process of a build (unlike `RandomState`).
pub fn fingerprint<A: std::hash::Hash + ?Sized>(value: &A) -> u64 {
    let mut h = Fnv(0xcbf2_9ce4_8422_2325);
    value.hash(&mut h);
    h.0
}

struct Fnv(u64);

impl Hasher for Fnv {
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
        }
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

/// The builder's journal setting: record to a sink, or replay a recording.
#[derive(Clone)]
pub(crate) enum JournalSetting {
    Record(Arc<dyn RecordSink>),
    Replay(Arc<Recording>),
}

impl fmt::Debug for JournalSetting {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Record(_) => f.write_str("Record(..)"),
            Self::Replay(r) => write!(f, "Replay({} contexts)", r.contexts.len()),
        }
    }
}

impl JournalSetting {
    /// What the contexts of a correlator built with it share.
    pub(crate) fn shared(&self) -> JournalShared {
        match self {
            Self::Record(sink) => JournalShared::record(sink.clone()),
            Self::Replay(r) => JournalShared::replay(r.clone()),
        }
    }
}

/// The builder's `record_inputs` codec.
pub(crate) struct CodecSetting<E>(pub(crate) Arc<dyn EventCodec<E>>);

impl<E> Clone for CodecSetting<E> {
    fn clone(&self) -> Self {
        Self(self.0.clone())
    }
}

impl<E> fmt::Debug for CodecSetting<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("EventCodec(..)")
    }
}

/// What every context of a recording or replaying correlator shares.
pub(crate) enum JournalShared {
    Record {
        sink: Arc<dyn RecordSink>,
        /// The first sink error; once set, nothing more is written.
        error: Mutex<Option<String>>,
        failed: AtomicBool,
    },
    Replay {
        recording: Arc<Recording>,
        /// The first divergence.
        divergence: Mutex<Option<Divergence>>,
        diverged: AtomicBool,
        /// Contexts created and not yet through their first steps (a stream may begin with
        /// ticks and recorded inputs, work no inbox entry stands for): the shutdown's scan
        /// waits for them.
        starting: AtomicUsize,
    },
}

impl JournalShared {
    pub(crate) fn record(sink: Arc<dyn RecordSink>) -> Self {
        Self::Record {
            sink,
            error: Mutex::new(None),
            failed: AtomicBool::new(false),
        }
    }

    pub(crate) fn replay(recording: Arc<Recording>) -> Self {
        Self::Replay {
            recording,
            divergence: Mutex::new(None),
            diverged: AtomicBool::new(false),
            starting: AtomicUsize::new(0),
        }
    }

    /// A replaying context was created (on the creating thread, before its own starts).
    pub(crate) fn context_created(&self) {
        if let Self::Replay { starting, .. } = self {
            starting.fetch_add(1, Ordering::AcqRel);
        }
    }

    /// A replaying context did what its stream allowed before its first inbox entry.
    pub(crate) fn context_started(&self) {
        if let Self::Replay { starting, .. } = self {
            starting.fetch_sub(1, Ordering::AcqRel);
        }
    }

    /// Whether a replaying context may still be working without an inbox entry to show for it.
    pub(crate) fn contexts_starting(&self) -> bool {
        match self {
            Self::Replay { starting, .. } => starting.load(Ordering::Acquire) > 0,
            Self::Record { .. } => false,
        }
    }

    pub(crate) fn is_replay(&self) -> bool {
        matches!(self, Self::Replay { .. })
    }

    /// The first divergence of a replay.
    pub(crate) fn divergence(&self) -> Option<Divergence> {
        match self {
            Self::Replay { divergence, .. } => lock_std(divergence).clone(),
            Self::Record { .. } => None,
        }
    }

    /// At shutdown, once every context has ended: the sink's `finish`; the first sink error.
    pub(crate) fn finish(&self) -> Option<String> {
        match self {
            Self::Record {
                sink,
                error,
                failed,
            } => {
                if !failed.load(Ordering::Acquire) {
                    if let Err(e) = sink.finish() {
                        lock_std(error).get_or_insert(e.to_string());
                    }
                }
                lock_std(error).clone()
            }
            Self::Replay { .. } => None,
        }
    }

    fn diverge(&self, d: Divergence) {
        if let Self::Replay {
            divergence,
            diverged,
            ..
        } = self
        {
            let mut first = lock_std(divergence);
            if first.is_none() {
                tracing::error!(%d, "replay diverged");
                *first = Some(d);
            }
            diverged.store(true, Ordering::Release);
        }
    }

    fn has_diverged(&self) -> bool {
        match self {
            Self::Replay { diverged, .. } => diverged.load(Ordering::Acquire),
            Self::Record { .. } => false,
        }
    }
}

/// A context's side of the journal: nothing, its recorder, or its replayer (of inbox items `I`).
pub(crate) enum Journal<I> {
    Off,
    /// Neither recording nor replaying, but the correlator takes checkpoints: the context looks
    /// at every entry it takes for them (`context::cut`). A variant of its own, so that the one
    /// test per entry that recording costs when off (R10.1) is all that checkpoints cost when
    /// not configured.
    #[cfg(feature = "checkpoint")]
    Count,
    Record(Box<Recorder>),
    Replay(Box<Replayer<I>>),
}

impl<I> Journal<I> {
    /// The journal of context `context` (named `name`) of a correlator with `shared`, which
    /// takes checkpoints if `checkpoints`.
    pub(crate) fn new(
        shared: Option<&Arc<JournalShared>>,
        context: u32,
        name: &str,
        checkpoints: bool,
    ) -> Self {
        match shared {
            #[cfg(feature = "checkpoint")]
            None if checkpoints => Self::Count,
            None => {
                let _ = checkpoints;
                Self::Off
            }
            Some(s) => match &**s {
                JournalShared::Record { .. } => {
                    Self::Record(Box::new(Recorder::new(s.clone(), context, name)))
                }
                JournalShared::Replay { .. } => {
                    Self::Replay(Box::new(Replayer::new(s.clone(), context)))
                }
            },
        }
    }

    /// A handler emitted to `output` a value whose fingerprint `fingerprint` gives (asked only
    /// when recording or replaying: off, an emit costs this one test).
    #[inline]
    pub(crate) fn emit(&mut self, output: u64, fingerprint: impl FnOnce() -> u64) {
        if let Self::Record(_) | Self::Replay(_) = self {
            self.note(Record::Emit {
                output,
                fingerprint: fingerprint(),
            });
        }
    }

    /// A handler created the context `context`.
    pub(crate) fn created(&mut self, context: u32) {
        self.note(Record::Created { context });
    }

    /// What a handler did that the stream holds in order: written, or checked against it.
    #[cold]
    fn note(&mut self, record: Record) {
        match self {
            Self::Off => {}
            #[cfg(feature = "checkpoint")]
            Self::Count => {}
            Self::Record(r) => r.put(record),
            Self::Replay(r) => r.expect(record),
        }
    }

    /// The context is ending (after its instances ended): the recorder writes its last chunk,
    /// the replayer checks that its stream is used up.
    pub(crate) fn end(&mut self) {
        match self {
            Self::Off => {}
            #[cfg(feature = "checkpoint")]
            Self::Count => {}
            Self::Record(r) => r.end(),
            Self::Replay(r) => r.end(),
        }
    }
}

/// What a recording context writes: its stream, buffered.
pub(crate) struct Recorder {
    shared: Arc<JournalShared>,
    context: u32,
    buf: Vec<u8>,
    /// The current run: its origin and length (0: none).
    run_origin: u32,
    run_len: u64,
    entries: u64,
    /// A reused buffer for an input's bytes.
    scratch: Vec<u8>,
}

impl Recorder {
    fn new(shared: Arc<JournalShared>, context: u32, name: &str) -> Self {
        let mut r = Self {
            shared,
            context,
            buf: Vec::with_capacity(CHUNK + 64),
            run_origin: 0,
            run_len: 0,
            entries: 0,
            scratch: Vec::new(),
        };
        r.put(Record::Begin {
            context,
            name: name.to_owned(),
            wall_ns: wall_ns(),
        });
        r
    }

    /// An entry from `origin` was taken.
    #[inline(always)]
    pub(crate) fn take(&mut self, origin: Origin) {
        self.entries += 1;
        // With `run_len` 0 (no run open) the first branch opens one as `new_run` would.
        if origin.0 == self.run_origin {
            self.run_len += 1;
        } else {
            self.new_run(origin.0);
        }
    }

    #[cold]
    #[inline(never)]
    fn new_run(&mut self, origin: u32) {
        self.close_run();
        self.run_origin = origin;
        self.run_len = 1;
    }

    /// An event from the input `origin` was taken; `encode` appends its bytes (`record_inputs`).
    #[cold]
    #[inline(never)]
    pub(crate) fn input(&mut self, origin: Origin, encode: impl FnOnce(&mut Vec<u8>)) {
        self.entries += 1;
        self.close_run();
        let mut bytes = std::mem::take(&mut self.scratch);
        bytes.clear();
        encode(&mut bytes);
        let record = Record::Input {
            origin: origin.0,
            bytes,
        };
        format::put_record(&mut self.buf, &record);
        if let Record::Input { bytes, .. } = record {
            self.scratch = bytes;
        }
        if self.buf.len() >= CHUNK {
            self.flush();
        }
    }

    /// A tick to `time` (nanoseconds) was taken.
    pub(crate) fn tick(&mut self, time: u64) {
        self.entries += 1;
        self.put(Record::Tick { time });
    }

    fn close_run(&mut self) {
        if self.run_len > 0 {
            format::put_record(
                &mut self.buf,
                &Record::Run {
                    origin: self.run_origin,
                    count: self.run_len,
                },
            );
            self.run_len = 0;
            if self.buf.len() >= CHUNK {
                self.flush();
            }
        }
    }

    fn put(&mut self, r: Record) {
        self.close_run();
        format::put_record(&mut self.buf, &r);
        if self.buf.len() >= CHUNK {
            self.flush();
        }
    }

    fn end(&mut self) {
        let entries = self.entries;
        self.put(Record::End {
            wall_ns: wall_ns(),
            entries,
        });
        self.flush();
    }

    fn flush(&mut self) {
        if let JournalShared::Record {
            sink,
            error,
            failed,
        } = &*self.shared
        {
            if !self.buf.is_empty() && !failed.load(Ordering::Acquire) {
                if let Err(e) = sink.write_chunk(self.context, &self.buf) {
                    tracing::error!(context = self.context, error = %e, "the recording's sink failed; recording stops");
                    lock_std(error).get_or_insert(e.to_string());
                    failed.store(true, Ordering::Release);
                }
            }
        }
        self.buf.clear();
    }
}

fn wall_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0)
}
