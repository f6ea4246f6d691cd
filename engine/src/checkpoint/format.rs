//! A checkpoint file's bytes (format version 1): a fixed header, then the payload. A change here
//! changes the version, and the layout described in the [module doc](super).
//!
//! | bytes | field |
//! |---|---|
//! | 0..8 | [`MAGIC`] |
//! | 8..12 | [`VERSION`], u32 little-endian |
//! | 12..20 | the sequence number, u64 LE |
//! | 20..28 | the payload's length in bytes, u64 LE |
//! | 28..32 | CRC-32C of bytes 0..28 followed by the payload, u32 LE |
//! | 32.. | the payload |
//!
//! Owns the byte layout and its checks. May import nothing.

use super::crc32c::Crc32c;
use super::error::SkipReason;

/// The first eight bytes of a checkpoint file.
pub const MAGIC: &[u8; 8] = b"CORRCKPT";
/// The format version this build writes and reads.
pub const VERSION: u32 = 1;
/// The header's length in bytes: the payload begins there.
pub const HEADER_LEN: usize = 32;

const VERSION_AT: usize = 8;
const SEQ_AT: usize = 12;
const LEN_AT: usize = 20;
/// Where the checksum is; the fields before it are what it covers of the header.
const CRC_AT: usize = 28;

/// The header of the checkpoint `seq` whose payload is `payload`.
pub(crate) fn header(seq: u64, payload: &[u8]) -> [u8; HEADER_LEN] {
    let mut h = [0u8; HEADER_LEN];
    h[..VERSION_AT].copy_from_slice(MAGIC);
    h[VERSION_AT..SEQ_AT].copy_from_slice(&VERSION.to_le_bytes());
    h[SEQ_AT..LEN_AT].copy_from_slice(&seq.to_le_bytes());
    h[LEN_AT..CRC_AT].copy_from_slice(&(payload.len() as u64).to_le_bytes());
    let crc = checksum(&h, payload);
    h[CRC_AT..].copy_from_slice(&crc.to_le_bytes());
    h
}

/// Checks a whole checkpoint file, `file`, stored under the name of sequence `seq_in_name`:
/// `Ok` if it is intact (its payload is `file[HEADER_LEN..]`), else the first check it fails, in
/// the order length, magic, version, payload length, checksum, sequence. The checksum comes
/// before the sequence so that a damaged sequence field reads as damage, and a mismatch of an
/// intact header with its name as a file copied or renamed by hand. Never panics.
pub(crate) fn check(file: &[u8], seq_in_name: u64) -> Result<(), SkipReason> {
    let Some((h, payload)) = file.split_first_chunk::<HEADER_LEN>() else {
        return Err(SkipReason::TooShort {
            len: file.len() as u64,
        });
    };
    if h[..VERSION_AT] != MAGIC[..] {
        return Err(SkipReason::BadMagic);
    }
    let version = u32::from_le_bytes(field(h, VERSION_AT));
    if version != VERSION {
        return Err(SkipReason::UnsupportedVersion { version });
    }
    let declared = u64::from_le_bytes(field(h, LEN_AT));
    let actual = payload.len() as u64;
    if declared != actual {
        return Err(SkipReason::LengthMismatch { declared, actual });
    }
    let stored = u32::from_le_bytes(field(h, CRC_AT));
    let computed = checksum(h, payload);
    if stored != computed {
        return Err(SkipReason::ChecksumMismatch { stored, computed });
    }
    let in_header = u64::from_le_bytes(field(h, SEQ_AT));
    if in_header != seq_in_name {
        return Err(SkipReason::SequenceMismatch {
            in_header,
            in_name: seq_in_name,
        });
    }
    Ok(())
}

/// The `N` bytes of the header at `at` (a field's offset: in bounds by construction).
fn field<const N: usize>(h: &[u8; HEADER_LEN], at: usize) -> [u8; N] {
    let mut b = [0u8; N];
    b.copy_from_slice(&h[at..at + N]);
    b
}

/// The CRC-32C of the header's fields (everything before the checksum) and the payload.
fn checksum(h: &[u8; HEADER_LEN], payload: &[u8]) -> u32 {
    let mut c = Crc32c::new();
    c.update(&h[..CRC_AT]);
    c.update(payload);
    c.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(seq: u64, payload: &[u8]) -> Vec<u8> {
        let mut f = header(seq, payload).to_vec();
        f.extend_from_slice(payload);
        f
    }

    // R11.3: a file as written passes every check, whatever the payload (empty included).
    #[test]
    fn r11_3_written_files_pass_their_checks() {
        for payload in [&b""[..], b"x", &[0xA5; 1000]] {
            for seq in [0, 1, u64::MAX] {
                let f = file(seq, payload);
                assert_eq!(f.len(), HEADER_LEN + payload.len());
                assert_eq!(check(&f, seq), Ok(()));
                assert_eq!(&f[HEADER_LEN..], payload);
            }
        }
    }

    // R11.3: the layout is the documented one.
    #[test]
    fn r11_3_header_layout_is_as_documented() {
        let f = file(0x0102_0304_0506_0708, b"abc");
        assert_eq!(&f[..8], b"CORRCKPT");
        assert_eq!(f[8..12], [1, 0, 0, 0]);
        assert_eq!(f[12..20], [8, 7, 6, 5, 4, 3, 2, 1]);
        assert_eq!(f[20..28], [3, 0, 0, 0, 0, 0, 0, 0]);
        let mut c = Crc32c::new();
        c.update(&f[..28]);
        c.update(b"abc");
        assert_eq!(f[28..32], c.finish().to_le_bytes());
    }

    // R11.3: each check names what is wrong.
    #[test]
    fn r11_3_each_defect_is_named() {
        let good = file(5, b"payload");

        assert_eq!(check(&good[..10], 5), Err(SkipReason::TooShort { len: 10 }));

        let mut magic = good.clone();
        magic[0] ^= 0xFF;
        assert_eq!(check(&magic, 5), Err(SkipReason::BadMagic));

        let mut version = good.clone();
        version[VERSION_AT] = 2;
        assert_eq!(
            check(&version, 5),
            Err(SkipReason::UnsupportedVersion { version: 2 })
        );

        assert_eq!(
            check(&good[..good.len() - 2], 5),
            Err(SkipReason::LengthMismatch {
                declared: 7,
                actual: 5
            })
        );
        let mut longer = good.clone();
        longer.push(0);
        assert_eq!(
            check(&longer, 5),
            Err(SkipReason::LengthMismatch {
                declared: 7,
                actual: 8
            })
        );

        let mut flipped = good.clone();
        flipped[HEADER_LEN + 3] ^= 0x01;
        assert!(matches!(
            check(&flipped, 5),
            Err(SkipReason::ChecksumMismatch { .. })
        ));
        // A damaged sequence field is damage, not a renamed file.
        let mut seq = good.clone();
        seq[SEQ_AT] ^= 0x01;
        assert!(matches!(
            check(&seq, 5),
            Err(SkipReason::ChecksumMismatch { .. })
        ));

        assert_eq!(
            check(&good, 6),
            Err(SkipReason::SequenceMismatch {
                in_header: 5,
                in_name: 6
            })
        );
    }

    // R11.7: no input makes the checks panic, and only the intact file passes: every prefix,
    // every single-byte change, and headers that declare absurd lengths.
    #[test]
    fn r11_7_checks_never_panic_and_pass_only_intact_files() {
        let good = file(42, b"some state of the monitors");
        for len in 0..good.len() {
            assert!(check(&good[..len], 42).is_err(), "prefix of {len} bytes");
        }
        for i in 0..good.len() {
            for x in [0x01, 0x80, 0xFF] {
                let mut bad = good.clone();
                bad[i] ^= x;
                assert!(check(&bad, 42).is_err(), "byte {i} xor {x:#x}");
            }
        }
        let mut huge = good.clone();
        huge[LEN_AT..CRC_AT].copy_from_slice(&u64::MAX.to_le_bytes());
        assert!(matches!(
            check(&huge, 42),
            Err(SkipReason::LengthMismatch {
                declared: u64::MAX,
                ..
            })
        ));
        assert_eq!(check(&[], 42), Err(SkipReason::TooShort { len: 0 }));
    }
}
