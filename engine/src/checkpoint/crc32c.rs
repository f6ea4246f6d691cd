//! CRC-32C (Castagnoli), the checksum of a checkpoint file: the reflected polynomial
//! `0x82F6_3B78`, initial value and final XOR `0xFFFF_FFFF`, one 256-entry table built at compile
//! time and one table lookup per byte. It is the checksum of iSCSI, ext4 and LevelDB, and detects
//! every burst error of up to 32 bits; its standard check value (the checksum of `"123456789"`)
//! is `0xE306_9283`. Speed does not matter here: a checkpoint is written seldom and read once.
//!
//! Owns the checksum. May import nothing.

/// The reversed (reflected) form of the Castagnoli polynomial `0x1EDC_6F41`.
const POLYNOMIAL: u32 = 0x82F6_3B78;

/// `TABLE[b]`: the remainder of the byte `b` shifted through the polynomial eight times.
static TABLE: [u32; 256] = table();

const fn table() -> [u32; 256] {
    let mut table = [0u32; 256];
    let mut b = 0;
    while b < 256 {
        let mut crc = b as u32;
        let mut bit = 0;
        while bit < 8 {
            crc = if crc & 1 == 1 {
                (crc >> 1) ^ POLYNOMIAL
            } else {
                crc >> 1
            };
            bit += 1;
        }
        table[b] = crc;
        b += 1;
    }
    table
}

/// A running CRC-32C over bytes given in pieces: `update` with each piece in order, then
/// `finish`. The same bytes give the same checksum however they are cut.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Crc32c(u32);

impl Crc32c {
    pub(crate) fn new() -> Self {
        Self(!0)
    }

    pub(crate) fn update(&mut self, bytes: &[u8]) {
        let mut crc = self.0;
        for &b in bytes {
            crc = TABLE[usize::from(crc as u8 ^ b)] ^ (crc >> 8);
        }
        self.0 = crc;
    }

    pub(crate) fn finish(self) -> u32 {
        !self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The checksum of the nine ASCII bytes `"123456789"`: the check value every CRC-32C
    /// implementation must give.
    const CHECK: u32 = 0xE306_9283;

    fn crc32c(bytes: &[u8]) -> u32 {
        let mut c = Crc32c::new();
        c.update(bytes);
        c.finish()
    }

    // R11.3: the checksum is CRC-32C as everyone computes it.
    #[test]
    fn r11_3_crc32c_gives_the_standard_check_value() {
        assert_eq!(crc32c(b"123456789"), CHECK);
    }

    // R11.3: further published vectors (RFC 3720, appendix B.4: 32 bytes of zeros, of ones, and
    // counting up), and the empty input.
    #[test]
    fn r11_3_crc32c_matches_published_vectors() {
        assert_eq!(crc32c(b""), 0);
        assert_eq!(crc32c(&[0u8; 32]), 0x8A91_36AA);
        assert_eq!(crc32c(&[0xFFu8; 32]), 0x62A8_AB43);
        let ascending: Vec<u8> = (0u8..32).collect();
        assert_eq!(crc32c(&ascending), 0x46DD_794E);
        let descending: Vec<u8> = (0u8..32).rev().collect();
        assert_eq!(crc32c(&descending), 0x113F_DB5C);
    }

    // R11.3: a header and a payload are checksummed in two pieces; the cut must not matter.
    #[test]
    fn r11_3_crc32c_in_pieces_equals_crc32c_at_once() {
        let bytes: Vec<u8> = (0..1000u32).map(|i| (i * 7 + 3) as u8).collect();
        for cut in [0, 1, 31, 32, 500, 999, 1000] {
            let mut c = Crc32c::new();
            c.update(&bytes[..cut]);
            c.update(&bytes[cut..]);
            assert_eq!(c.finish(), crc32c(&bytes), "cut at {cut}");
        }
    }

    // R11.3: one flipped bit anywhere changes the checksum.
    #[test]
    fn r11_3_crc32c_detects_every_single_bit_flip() {
        let bytes = b"a checkpoint payload".to_vec();
        let good = crc32c(&bytes);
        for i in 0..bytes.len() * 8 {
            let mut bad = bytes.clone();
            bad[i / 8] ^= 1 << (i % 8);
            assert_ne!(crc32c(&bad), good, "bit {i}");
        }
    }
}
