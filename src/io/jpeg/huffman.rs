//! Huffman coding as libjpeg-turbo's jchuff.c does it: the standard tables (ITU T.81 Annex
//! K.3), optimal tables from symbol counts (K.2, `jpeg_gen_optimal_table`), and a writer
//! with a 64-bit bit buffer and 0xFF byte stuffing.

/// A table as a DHT segment holds it: `bits[k]` codes of length k (1 to 16), then the symbols.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Table {
    pub bits: [u8; 17],
    pub vals: Vec<u8>,
}

/// Codes and their lengths by symbol (jchuff.c's `ehufco`/`ehufsi`).
pub(crate) struct Codes {
    pub code: [u32; 256],
    pub size: [u8; 256],
}

impl Table {
    fn from(bits: &[u8; 17], vals: &[u8]) -> Table {
        Table {
            bits: *bits,
            vals: vals.to_vec(),
        }
    }

    pub fn std_dc_luma() -> Table {
        Table::from(
            &[0, 0, 1, 5, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0],
            &[0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11],
        )
    }

    pub fn std_dc_chroma() -> Table {
        Table::from(
            &[0, 0, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0],
            &[0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11],
        )
    }

    pub fn std_ac_luma() -> Table {
        Table::from(
            &[0, 0, 2, 1, 3, 3, 2, 4, 3, 5, 5, 4, 4, 0, 0, 1, 0x7d],
            &[
                0x01, 0x02, 0x03, 0x00, 0x04, 0x11, 0x05, 0x12, 0x21, 0x31, 0x41, 0x06, 0x13, 0x51,
                0x61, 0x07, 0x22, 0x71, 0x14, 0x32, 0x81, 0x91, 0xa1, 0x08, 0x23, 0x42, 0xb1, 0xc1,
                0x15, 0x52, 0xd1, 0xf0, 0x24, 0x33, 0x62, 0x72, 0x82, 0x09, 0x0a, 0x16, 0x17, 0x18,
                0x19, 0x1a, 0x25, 0x26, 0x27, 0x28, 0x29, 0x2a, 0x34, 0x35, 0x36, 0x37, 0x38, 0x39,
                0x3a, 0x43, 0x44, 0x45, 0x46, 0x47, 0x48, 0x49, 0x4a, 0x53, 0x54, 0x55, 0x56, 0x57,
                0x58, 0x59, 0x5a, 0x63, 0x64, 0x65, 0x66, 0x67, 0x68, 0x69, 0x6a, 0x73, 0x74, 0x75,
                0x76, 0x77, 0x78, 0x79, 0x7a, 0x83, 0x84, 0x85, 0x86, 0x87, 0x88, 0x89, 0x8a, 0x92,
                0x93, 0x94, 0x95, 0x96, 0x97, 0x98, 0x99, 0x9a, 0xa2, 0xa3, 0xa4, 0xa5, 0xa6, 0xa7,
                0xa8, 0xa9, 0xaa, 0xb2, 0xb3, 0xb4, 0xb5, 0xb6, 0xb7, 0xb8, 0xb9, 0xba, 0xc2, 0xc3,
                0xc4, 0xc5, 0xc6, 0xc7, 0xc8, 0xc9, 0xca, 0xd2, 0xd3, 0xd4, 0xd5, 0xd6, 0xd7, 0xd8,
                0xd9, 0xda, 0xe1, 0xe2, 0xe3, 0xe4, 0xe5, 0xe6, 0xe7, 0xe8, 0xe9, 0xea, 0xf1, 0xf2,
                0xf3, 0xf4, 0xf5, 0xf6, 0xf7, 0xf8, 0xf9, 0xfa,
            ],
        )
    }

    pub fn std_ac_chroma() -> Table {
        Table::from(
            &[0, 0, 2, 1, 2, 4, 4, 3, 4, 7, 5, 4, 4, 0, 1, 2, 0x77],
            &[
                0x00, 0x01, 0x02, 0x03, 0x11, 0x04, 0x05, 0x21, 0x31, 0x06, 0x12, 0x41, 0x51, 0x07,
                0x61, 0x71, 0x13, 0x22, 0x32, 0x81, 0x08, 0x14, 0x42, 0x91, 0xa1, 0xb1, 0xc1, 0x09,
                0x23, 0x33, 0x52, 0xf0, 0x15, 0x62, 0x72, 0xd1, 0x0a, 0x16, 0x24, 0x34, 0xe1, 0x25,
                0xf1, 0x17, 0x18, 0x19, 0x1a, 0x26, 0x27, 0x28, 0x29, 0x2a, 0x35, 0x36, 0x37, 0x38,
                0x39, 0x3a, 0x43, 0x44, 0x45, 0x46, 0x47, 0x48, 0x49, 0x4a, 0x53, 0x54, 0x55, 0x56,
                0x57, 0x58, 0x59, 0x5a, 0x63, 0x64, 0x65, 0x66, 0x67, 0x68, 0x69, 0x6a, 0x73, 0x74,
                0x75, 0x76, 0x77, 0x78, 0x79, 0x7a, 0x82, 0x83, 0x84, 0x85, 0x86, 0x87, 0x88, 0x89,
                0x8a, 0x92, 0x93, 0x94, 0x95, 0x96, 0x97, 0x98, 0x99, 0x9a, 0xa2, 0xa3, 0xa4, 0xa5,
                0xa6, 0xa7, 0xa8, 0xa9, 0xaa, 0xb2, 0xb3, 0xb4, 0xb5, 0xb6, 0xb7, 0xb8, 0xb9, 0xba,
                0xc2, 0xc3, 0xc4, 0xc5, 0xc6, 0xc7, 0xc8, 0xc9, 0xca, 0xd2, 0xd3, 0xd4, 0xd5, 0xd6,
                0xd7, 0xd8, 0xd9, 0xda, 0xe2, 0xe3, 0xe4, 0xe5, 0xe6, 0xe7, 0xe8, 0xe9, 0xea, 0xf2,
                0xf3, 0xf4, 0xf5, 0xf6, 0xf7, 0xf8, 0xf9, 0xfa,
            ],
        )
    }

    /// The canonical codes (T.81 Annex C; jchuff.c's `jpeg_make_c_derived_tbl`).
    pub fn codes(&self) -> Codes {
        let mut c = Codes {
            code: [0; 256],
            size: [0; 256],
        };
        let mut code = 0u32;
        let mut k = 0;
        for len in 1..=16u8 {
            for _ in 0..self.bits[len as usize] {
                let sym = self.vals[k] as usize;
                c.code[sym] = code;
                c.size[sym] = len;
                code += 1;
                k += 1;
            }
            code <<= 1;
        }
        c
    }

    /// The codes with each symbol's value bits folded in, for the baseline coder: symbol s
    /// is followed by s & 15 value bits (the DC category; the AC run and size's size), so
    /// entry s is its code shifted left by them, the total length in bits 32 and up. A
    /// coefficient then costs one look-up, its value bits or'ed in, and one write.
    pub fn folded(&self) -> [u64; 256] {
        let c = self.codes();
        std::array::from_fn(|s| {
            let n = (s & 15) as u32;
            u64::from(c.code[s] << n) | u64::from(u32::from(c.size[s]) + n) << 32
        })
    }

    /// The DHT segment's payload after its class/index byte.
    pub fn write_dht(&self, class_index: u8, out: &mut Vec<u8>) {
        let len = 2 + 1 + 16 + self.vals.len();
        out.extend_from_slice(&[0xFF, 0xC4, (len >> 8) as u8, len as u8, class_index]);
        out.extend_from_slice(&self.bits[1..]);
        out.extend_from_slice(&self.vals);
    }

    /// The optimal table for these symbol counts: jchuff.c's `jpeg_gen_optimal_table`,
    /// step for step (ties go to the larger symbol; lengths over 16 folded as K.2 says;
    /// pseudo-symbol 256 keeps the all-ones code unused).
    pub fn optimal(counts: &[u64; 256]) -> Table {
        const MAX_CLEN: usize = 32;
        let mut freq = [0u64; 257];
        freq[..256].copy_from_slice(counts);
        freq[256] = 1;
        let mut bits = [0u8; MAX_CLEN + 2];
        let mut codesize = [0usize; 257];
        let mut others = [-1i32; 257];
        let mut nz_index = [0usize; 257];
        let mut nz = 0;
        for i in 0..257 {
            if freq[i] != 0 {
                nz_index[nz] = i;
                freq[nz] = freq[i];
                nz += 1;
            }
        }
        loop {
            let (mut c1, mut c2) = (-1i32, -1i32);
            let (mut v, mut v2) = (u64::MAX - 1, u64::MAX - 1);
            for (i, &f) in freq.iter().enumerate().take(nz) {
                if f <= v2 {
                    if f <= v {
                        c2 = c1;
                        v2 = v;
                        v = f;
                        c1 = i as i32;
                    } else {
                        v2 = f;
                        c2 = i as i32;
                    }
                }
            }
            if c2 < 0 {
                break;
            }
            let (mut a, mut b) = (c1 as usize, c2 as usize);
            freq[a] += freq[b];
            freq[b] = u64::MAX;
            codesize[a] += 1;
            while others[a] >= 0 {
                a = others[a] as usize;
                codesize[a] += 1;
            }
            others[a] = b as i32;
            codesize[b] += 1;
            while others[b] >= 0 {
                b = others[b] as usize;
                codesize[b] += 1;
            }
        }
        for &cs in codesize.iter().take(nz) {
            bits[cs] += 1;
        }
        let mut bit_pos = [0usize; MAX_CLEN + 1];
        let mut p = 0;
        for i in 1..=MAX_CLEN {
            bit_pos[i] = p;
            p += bits[i] as usize;
        }
        let mut i = MAX_CLEN;
        while i > 16 {
            while bits[i] > 0 {
                let mut j = i - 2;
                while bits[j] == 0 {
                    j -= 1;
                }
                bits[i] -= 2;
                bits[i - 1] += 1;
                bits[j + 1] += 2;
                bits[j] -= 1;
            }
            i -= 1;
        }
        while bits[i] == 0 {
            i -= 1;
        }
        bits[i] -= 1;
        let mut vals = vec![0u8; nz - 1];
        for k in 0..nz - 1 {
            vals[bit_pos[codesize[k]]] = nz_index[k] as u8;
            bit_pos[codesize[k]] += 1;
        }
        let mut out = [0u8; 17];
        out.copy_from_slice(&bits[..17]);
        Table { bits: out, vals }
    }
}

/// The number of bits of |v| (JPEG's magnitude category).
#[inline(always)]
pub(super) fn nbits(v: i32) -> u32 {
    32 - v.unsigned_abs().leading_zeros()
}

/// Entropy-coded bytes as jchuff.c's `put_bits` and `flush_bits` make them: bits gathered at
/// the low end of a 64-bit buffer, written eight bytes at a time (byte by byte, 0xFF
/// stuffed, only when one of them is 0xFF). The output is written ahead into zeroed room, so
/// a write is a store, not a push; `finish` cuts it to what was written.
pub(super) struct BitWriter<'a> {
    out: &'a mut Vec<u8>,
    /// Bytes of `out` written; room past them is zero-filled ahead of the writes.
    pos: usize,
    /// The bits not yet written, the newest at the low end (higher bits may be stale).
    buf: u64,
    /// Free bits in `buf`.
    free: i32,
}

impl<'a> BitWriter<'a> {
    pub fn new(out: &'a mut Vec<u8>) -> BitWriter<'a> {
        BitWriter {
            pos: out.len(),
            out,
            buf: 0,
            free: 64,
        }
    }

    /// Appends the low `n` bits of `bits` (n at most 32, higher bits zero).
    #[inline(always)]
    pub fn put(&mut self, bits: u32, n: u32) {
        self.free -= n as i32;
        if self.free < 0 {
            // The buffer's free bits take the top of `bits`, the rest starts the next word
            // (its flushed top is shifted out by later writes).
            let word = (self.buf << (n as i32 + self.free)) | (u64::from(bits) >> -self.free);
            self.flush_word(word);
            self.free += 64;
            self.buf = u64::from(bits);
        } else {
            self.buf = (self.buf << n) | u64::from(bits);
        }
    }

    /// At least 16 bytes of room past `pos`.
    #[inline(always)]
    fn room(&mut self) {
        if self.out.len() < self.pos + 16 {
            self.grow();
        }
    }

    #[cold]
    fn grow(&mut self) {
        let len = (self.out.len() * 2).max(self.pos + 4096);
        self.out.resize(len, 0);
    }

    #[inline(always)]
    fn flush_word(&mut self, word: u64) {
        self.room();
        // No byte of the word is 0xFF (the usual case): all eight at once.
        let ff = {
            let x = !word;
            x.wrapping_sub(0x0101_0101_0101_0101) & !x & 0x8080_8080_8080_8080
        };
        if ff == 0 {
            self.out[self.pos..self.pos + 8].copy_from_slice(&word.to_be_bytes());
            self.pos += 8;
        } else {
            self.stuffed(word, 8);
        }
    }

    /// The top `n` bytes of `word`, each 0xFF followed by a 0 (room for 2n bytes made).
    fn stuffed(&mut self, word: u64, n: usize) {
        for &b in &word.to_be_bytes()[..n] {
            self.out[self.pos] = b;
            self.out[self.pos + 1] = 0;
            self.pos += 1 + usize::from(b == 0xFF);
        }
    }

    /// Pads the last byte with 1 bits (jchuff.c's `flush_bits`), writes what is left and
    /// cuts the output to what was written.
    pub fn finish(mut self) {
        let used = 64 - self.free as u32;
        let pad = (8 - used % 8) % 8;
        if pad > 0 {
            self.put((1 << pad) - 1, pad);
        }
        let used = 64 - self.free as u32;
        if used > 0 {
            self.room();
            self.stuffed(self.buf << (64 - used), used as usize / 8);
        }
        self.out.truncate(self.pos);
    }
}

/// The zigzag order: `ZIGZAG[k]` is the natural index of the k-th coefficient.
pub(super) const ZIGZAG: [u8; 64] = [
    0, 1, 8, 16, 9, 2, 3, 10, 17, 24, 32, 25, 18, 11, 4, 5, 12, 19, 26, 33, 40, 48, 41, 34, 27, 20,
    13, 6, 7, 14, 21, 28, 35, 42, 49, 56, 57, 50, 43, 36, 29, 22, 15, 23, 30, 37, 44, 51, 58, 59,
    52, 45, 38, 31, 39, 46, 53, 60, 61, 54, 47, 55, 62, 63,
];

/// Bit k set where coefficient k (zigzag order) of the block is not zero, DC excluded.
#[inline(always)]
pub(super) fn ac_mask(block: &[i16; 64]) -> u64 {
    let mut mask = 0u64;
    for (k, &c) in block.iter().enumerate() {
        mask |= u64::from(c != 0) << k;
    }
    mask & !1
}

/// `ac_mask` in AVX2: the 64 coefficients compared with zero 16 at a time, packed to bytes
/// and their signs gathered.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
#[inline]
pub(super) unsafe fn ac_mask_avx2(block: &[i16; 64]) -> u64 {
    use std::arch::x86_64::*;
    let p = block.as_ptr() as *const __m256i;
    let z = _mm256_setzero_si256();
    // SAFETY: four 32-byte loads within the block's 128 bytes.
    let e: [__m256i; 4] =
        std::array::from_fn(|i| _mm256_cmpeq_epi16(_mm256_loadu_si256(p.add(i)), z));
    // packs interleaves the two inputs by 128-bit lane; the permute puts them back in order.
    let lo = _mm256_permute4x64_epi64(_mm256_packs_epi16(e[0], e[1]), 0xD8);
    let hi = _mm256_permute4x64_epi64(_mm256_packs_epi16(e[2], e[3]), 0xD8);
    let zeros = u64::from(_mm256_movemask_epi8(lo) as u32)
        | u64::from(_mm256_movemask_epi8(hi) as u32) << 32;
    !zeros & !1
}

/// Codes one block (jchuff.c's `encode_one_block`), coefficients in zigzag order: the DC
/// difference, then the AC run lengths and values, ZRL for 16 zeros, EOB after the last
/// nonzero. Each symbol's code and its value bits go out in one write. `mask` is the block's
/// `ac_mask`; `dc` and `ac` are `Table::folded`.
#[inline(always)]
pub(super) fn encode_block(
    w: &mut BitWriter,
    block: &[i16; 64],
    mask: u64,
    last_dc: &mut i32,
    dc: &[u64; 256],
    ac: &[u64; 256],
) {
    let diff = i32::from(block[0]) - *last_dc;
    *last_dc = i32::from(block[0]);
    let n = nbits(diff);
    let v = if diff < 0 { diff - 1 } else { diff } as u32 & ((1u32 << n) - 1);
    let e = dc[n as usize];
    w.put(e as u32 | v, (e >> 32) as u32);
    let mut mask = mask;
    let mut prev = 0u32;
    while mask != 0 {
        let k = mask.trailing_zeros();
        mask &= mask - 1;
        let mut run = k - prev - 1;
        prev = k;
        while run > 15 {
            let e = ac[0xF0];
            w.put(e as u32, (e >> 32) as u32);
            run -= 16;
        }
        let c = i32::from(block[k as usize]);
        let n = nbits(c);
        let v = if c < 0 { c - 1 } else { c } as u32 & ((1u32 << n) - 1);
        let e = ac[((run << 4) + n) as usize];
        w.put(e as u32 | v, (e >> 32) as u32);
    }
    if prev != 63 {
        let e = ac[0];
        w.put(e as u32, (e >> 32) as u32);
    }
}

/// Counts one block's symbols as `encode_block` would code them (jchuff.c's `htest_one_block`).
#[inline(always)]
pub(super) fn count_block(
    block: &[i16; 64],
    mask: u64,
    last_dc: &mut i32,
    dc: &mut [u64; 256],
    ac: &mut [u64; 256],
) {
    let diff = i32::from(block[0]) - *last_dc;
    *last_dc = i32::from(block[0]);
    dc[nbits(diff) as usize] += 1;
    let mut mask = mask;
    let mut prev = 0u32;
    while mask != 0 {
        let k = mask.trailing_zeros();
        mask &= mask - 1;
        let mut run = k - prev - 1;
        prev = k;
        while run > 15 {
            ac[0xF0] += 1;
            run -= 16;
        }
        ac[((run << 4) + nbits(i32::from(block[k as usize]))) as usize] += 1;
    }
    if prev != 63 {
        ac[0] += 1;
    }
}
