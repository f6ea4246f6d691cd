//! The recording's bytes (format version 1): the file header, the chunk framing, the records of a
//! context's stream, and the varints they are written with. `engine/RECORDING.md` documents the
//! same layout for readers outside Rust; a change here changes that document and the version.
//!
//! Owns the byte layout. May import nothing.

/// The first eight bytes of a recording file.
pub const MAGIC: &[u8; 8] = b"CORRREC\0";
/// The format version this build writes and reads.
pub const VERSION: u16 = 1;
/// The header: [`MAGIC`], the version (u16, little-endian) and two reserved bytes (0).
pub const HEADER_LEN: usize = 12;

/// A chunk's frame: the context id (u32 LE), the payload's length (u32 LE), then the payload.
pub const FRAME_LEN: usize = 8;

/// The record tags of a context's stream.
pub(crate) mod tag {
    /// `Begin { context, name, wall_ns }`: the first record of every stream.
    pub const BEGIN: u8 = 1;
    /// `Run { origin, count }`: `count` consecutive inbox entries (events or spawns) from `origin`.
    pub const RUN: u8 = 2;
    /// `Tick { time }`: a clock tick taken (its time in nanoseconds).
    pub const TICK: u8 = 3;
    /// `Emit { output, fingerprint }`: a handler put a value into an output.
    pub const EMIT: u8 = 4;
    /// `Created { context }`: a handler of this context created a context.
    pub const CREATED: u8 = 5;
    /// `End { wall_ns, entries }`: the context's last record.
    pub const END: u8 = 6;
    /// `Input { origin, bytes }`: an input handle's event, recorded whole (`record_inputs`).
    pub const INPUT: u8 = 7;
}

/// One record of a context's stream, decoded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Record {
    /// The stream's first record: the context's id and name, and when it began (wall clock,
    /// nanoseconds since the Unix epoch).
    Begin {
        /// The context's id.
        context: u32,
        /// The context's name.
        name: String,
        /// When the context began, in nanoseconds since the Unix epoch.
        wall_ns: u64,
    },
    /// `count` consecutive inbox entries (events or spawns), all from `origin`.
    Run {
        /// Who sent them: a context id, or an input handle's number with bit 31 set (see [`describe_origin`](super::describe_origin)).
        origin: u32,
        /// How many.
        count: u64,
    },
    /// A clock tick the context took: its logical time moved to `time` (nanoseconds).
    Tick {
        /// The tick's time in nanoseconds.
        time: u64,
    },
    /// A handler put a value into an output (or emitted to a channel's outputs).
    Emit {
        /// The output's id; a channel emit has [`CHANNEL_EMIT`](super::CHANNEL_EMIT) set and the
        /// channel's number below it.
        output: u64,
        /// The value's fingerprint (0 for an output without one).
        fingerprint: u64,
    },
    /// A handler of this context created the context `context`.
    Created {
        /// The new context's id.
        context: u32,
    },
    /// An event from the input handle `origin`, taken as the next entry and recorded whole
    /// (with [`record_inputs`](crate::CorrelatorBuilder::record_inputs)): its bytes as the
    /// [`EventCodec`](super::EventCodec) wrote them.
    Input {
        /// The input handle.
        origin: u32,
        /// The event, encoded.
        bytes: Vec<u8>,
    },
    /// The stream's last record: when the context ended and how many inbox entries it took.
    End {
        /// When the context ended, in nanoseconds since the Unix epoch.
        wall_ns: u64,
        /// Inbox entries taken in all (runs and ticks).
        entries: u64,
    },
}

/// Why bytes are not a recording this build can read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FormatError {
    /// The file does not begin with [`MAGIC`].
    NotARecording,
    /// The file's format version is not [`VERSION`].
    Version(u16),
    /// A chunk or a record ends before its declared length.
    Truncated {
        /// The byte offset (in the file, or in the context's stream) where it was cut.
        at: u64,
    },
    /// A record with an unknown tag, or a malformed varint.
    Malformed {
        /// The context whose stream holds it.
        context: u32,
        /// Its byte offset in that stream.
        at: u64,
        /// What is wrong.
        what: &'static str,
    },
}

impl std::fmt::Display for FormatError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::NotARecording => write!(f, "not a recording (the magic bytes are missing)"),
            Self::Version(v) => write!(
                f,
                "recording format version {v}; this build reads version {VERSION}"
            ),
            Self::Truncated { at } => write!(f, "recording truncated at byte {at}"),
            Self::Malformed { context, at, what } => write!(
                f,
                "malformed record in context {context}'s stream at byte {at}: {what}"
            ),
        }
    }
}

impl std::error::Error for FormatError {}

/// Appends `v` as an unsigned LEB128 varint.
#[inline]
pub(crate) fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push(v as u8 | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// Reads a varint at `*at`, advancing it; `None` if the bytes end first or it is longer than
/// ten bytes.
pub(crate) fn get_varint(bytes: &[u8], at: &mut usize) -> Option<u64> {
    let mut v = 0u64;
    for shift in (0..64).step_by(7) {
        let b = *bytes.get(*at)?;
        *at += 1;
        v |= u64::from(b & 0x7f) << shift;
        if b < 0x80 {
            return Some(v);
        }
    }
    None
}

/// Appends one record.
pub(crate) fn put_record(out: &mut Vec<u8>, r: &Record) {
    match r {
        Record::Begin {
            context,
            name,
            wall_ns,
        } => {
            out.push(tag::BEGIN);
            put_varint(out, u64::from(*context));
            put_varint(out, name.len() as u64);
            out.extend_from_slice(name.as_bytes());
            put_varint(out, *wall_ns);
        }
        Record::Run { origin, count } => {
            out.push(tag::RUN);
            put_varint(out, u64::from(*origin));
            put_varint(out, *count);
        }
        Record::Tick { time } => {
            out.push(tag::TICK);
            put_varint(out, *time);
        }
        Record::Emit {
            output,
            fingerprint,
        } => {
            out.push(tag::EMIT);
            put_varint(out, *output);
            out.extend_from_slice(&fingerprint.to_le_bytes());
        }
        Record::Created { context } => {
            out.push(tag::CREATED);
            put_varint(out, u64::from(*context));
        }
        Record::Input { origin, bytes } => {
            out.push(tag::INPUT);
            put_varint(out, u64::from(*origin));
            put_varint(out, bytes.len() as u64);
            out.extend_from_slice(bytes);
        }
        Record::End { wall_ns, entries } => {
            out.push(tag::END);
            put_varint(out, *wall_ns);
            put_varint(out, *entries);
        }
    }
}

/// Reads the record at `*at` of context `context`'s stream, advancing `*at`; `Ok(None)` at the
/// stream's end.
pub(crate) fn get_record(
    bytes: &[u8],
    at: &mut usize,
    context: u32,
) -> Result<Option<Record>, FormatError> {
    let start = *at;
    let Some(&t) = bytes.get(*at) else {
        return Ok(None);
    };
    *at += 1;
    let bad = |what| FormatError::Malformed {
        context,
        at: start as u64,
        what,
    };
    let v = |at: &mut usize| get_varint(bytes, at).ok_or(bad("a varint is cut or too long"));
    let u32_of = |x: u64| u32::try_from(x).map_err(|_| bad("a context id above u32"));
    let r = match t {
        tag::BEGIN => {
            let context = u32_of(v(at)?)?;
            let len = v(at)? as usize;
            let end = at
                .checked_add(len)
                .filter(|&e| e <= bytes.len())
                .ok_or(bad("a name runs past the stream"))?;
            let name = String::from_utf8(bytes[*at..end].to_vec())
                .map_err(|_| bad("a name is not UTF-8"))?;
            *at = end;
            Record::Begin {
                context,
                name,
                wall_ns: v(at)?,
            }
        }
        tag::RUN => Record::Run {
            origin: u32_of(v(at)?)?,
            count: v(at)?,
        },
        tag::TICK => Record::Tick { time: v(at)? },
        tag::EMIT => {
            let output = v(at)?;
            let fp = bytes
                .get(*at..*at + 8)
                .ok_or(bad("a fingerprint runs past the stream"))?;
            *at += 8;
            Record::Emit {
                output,
                fingerprint: u64::from_le_bytes(fp.try_into().expect("eight bytes")),
            }
        }
        tag::CREATED => Record::Created {
            context: u32_of(v(at)?)?,
        },
        tag::INPUT => {
            let origin = u32_of(v(at)?)?;
            let len = v(at)? as usize;
            let end = at
                .checked_add(len)
                .filter(|&e| e <= bytes.len())
                .ok_or(bad("an input runs past the stream"))?;
            let input = bytes[*at..end].to_vec();
            *at = end;
            Record::Input {
                origin,
                bytes: input,
            }
        }
        tag::END => Record::End {
            wall_ns: v(at)?,
            entries: v(at)?,
        },
        _ => return Err(bad("an unknown record tag")),
    };
    Ok(Some(r))
}

/// The file header.
pub(crate) fn header() -> [u8; HEADER_LEN] {
    let mut h = [0u8; HEADER_LEN];
    h[..8].copy_from_slice(MAGIC);
    h[8..10].copy_from_slice(&VERSION.to_le_bytes());
    h
}

/// Splits a recording file into its contexts' streams (each the concatenation of its chunks, in
/// file order), in order of the contexts' ids.
pub(crate) fn split(file: &[u8]) -> Result<Vec<(u32, Vec<u8>)>, FormatError> {
    if file.len() < HEADER_LEN || &file[..8] != MAGIC {
        return Err(FormatError::NotARecording);
    }
    let version = u16::from_le_bytes([file[8], file[9]]);
    if version != VERSION {
        return Err(FormatError::Version(version));
    }
    let mut streams: std::collections::BTreeMap<u32, Vec<u8>> = Default::default();
    let mut at = HEADER_LEN;
    while at < file.len() {
        let frame = file
            .get(at..at + FRAME_LEN)
            .ok_or(FormatError::Truncated { at: at as u64 })?;
        let context = u32::from_le_bytes(frame[..4].try_into().expect("four bytes"));
        let len = u32::from_le_bytes(frame[4..].try_into().expect("four bytes")) as usize;
        let body = file
            .get(at + FRAME_LEN..at + FRAME_LEN + len)
            .ok_or(FormatError::Truncated { at: at as u64 })?;
        streams.entry(context).or_default().extend_from_slice(body);
        at += FRAME_LEN + len;
    }
    Ok(streams.into_iter().collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varints_round_trip_at_every_width() {
        for v in [0, 1, 127, 128, 300, u32::MAX as u64, u64::MAX - 1, u64::MAX] {
            let mut b = Vec::new();
            put_varint(&mut b, v);
            let mut at = 0;
            assert_eq!(get_varint(&b, &mut at), Some(v));
            assert_eq!(at, b.len());
        }
        // Cut: the continuation bit set on the last byte.
        assert_eq!(get_varint(&[0x80], &mut 0), None);
        // Longer than ten bytes.
        assert_eq!(get_varint(&[0xff; 11], &mut 0), None);
    }

    #[test]
    fn every_record_round_trips() {
        let records = [
            Record::Begin {
                context: 3,
                name: "ctx-é".into(),
                wall_ns: 1_700_000_000_000_000_000,
            },
            Record::Run {
                origin: 1 << 31 | 2,
                count: 1_000_000,
            },
            Record::Tick { time: 42 },
            Record::Emit {
                output: 7,
                fingerprint: u64::MAX,
            },
            Record::Created { context: 9 },
            Record::Input {
                origin: 1 << 31,
                bytes: vec![0, 255, 7],
            },
            Record::End {
                wall_ns: 5,
                entries: 1_000_001,
            },
        ];
        let mut b = Vec::new();
        for r in &records {
            put_record(&mut b, r);
        }
        let mut at = 0;
        for r in &records {
            assert_eq!(get_record(&b, &mut at, 3).unwrap().as_ref(), Some(r));
        }
        assert_eq!(get_record(&b, &mut at, 3), Ok(None));
    }

    #[test]
    fn bad_bytes_are_typed_errors_never_panics() {
        assert_eq!(split(b"nonsense"), Err(FormatError::NotARecording));
        let mut h = header().to_vec();
        h[8] = 9;
        assert_eq!(split(&h), Err(FormatError::Version(9)));
        let mut f = header().to_vec();
        f.extend_from_slice(&1u32.to_le_bytes());
        f.extend_from_slice(&10u32.to_le_bytes());
        f.extend_from_slice(&[tag::TICK, 1]);
        assert_eq!(
            split(&f),
            Err(FormatError::Truncated {
                at: HEADER_LEN as u64
            })
        );
        assert!(matches!(
            get_record(&[0xee], &mut 0, 1),
            Err(FormatError::Malformed {
                context: 1,
                at: 0,
                ..
            })
        ));
        assert!(matches!(
            get_record(&[tag::EMIT, 1, 2, 3], &mut 0, 1),
            Err(FormatError::Malformed { .. })
        ));
        assert!(matches!(
            get_record(&[tag::BEGIN, 1, 200, 1], &mut 0, 1),
            Err(FormatError::Malformed { .. })
        ));
    }

    #[test]
    fn chunks_of_one_context_are_joined_in_file_order() {
        let mut f = header().to_vec();
        for (ctx, body) in [(2u32, &[1u8, 2][..]), (0, &[9]), (2, &[3])] {
            f.extend_from_slice(&ctx.to_le_bytes());
            f.extend_from_slice(&(body.len() as u32).to_le_bytes());
            f.extend_from_slice(body);
        }
        assert_eq!(split(&f).unwrap(), vec![(0, vec![9]), (2, vec![1, 2, 3])]);
    }
}
