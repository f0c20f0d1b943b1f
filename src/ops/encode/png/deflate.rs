//! The CPU twin of the PNG kernels: the rows Paeth-filtered as the png crate filters them, and
//! fdeflate 0.3.7's fast compressor (what the CPU engine writes at compression level 1) cut
//! into pieces that code independently once each knows the run of zeros before it: a row's
//! 8-byte chunks, then its tail (the run left open, then the bytes past the last whole
//! chunk). wgsl/encode_png_filter.wgsl and wgsl/encode_png_deflate.wgsl run the same loops.

/// fdeflate's zlib header and dynamic Huffman block header: 53 bytes and 5 bits
/// (fdeflate-0.3.7/src/compress.rs, `write_headers`).
pub(super) const HEADER: [u8; 54] = [
    120, 1, 237, 192, 3, 160, 36, 89, 150, 198, 241, 255, 119, 238, 141, 200, 204, 167, 114, 75,
    99, 174, 109, 219, 182, 109, 219, 182, 109, 219, 182, 109, 105, 140, 158, 150, 74, 175, 158,
    50, 51, 34, 238, 249, 118, 183, 106, 122, 166, 135, 59, 107, 213, 15,
];
/// Bits of [`HEADER`]: its last byte holds 5.
pub(super) const HEADER_BITS: u32 = 53 * 8 + 5;

/// fdeflate's one literal/length code, the same for every input (its tables.rs,
/// `HUFFMAN_LENGTHS`; the distance code is a single 1-bit code, 0).
#[rustfmt::skip]
const LENGTHS: [u8; 286] = [
    2, 3, 4, 5, 5, 6, 6, 7, 7, 7, 8, 8, 8, 8, 8, 9, 9, 9, 9, 9, 9, 9, 10, 10, 10, 10, 10, 10, 10,
    10, 10, 11, 11, 11, 11, 11, 11, 11, 11, 11, 11, 11, 11, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12,
    12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12,
    12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12,
    12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12,
    12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12,
    12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12,
    12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12,
    12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 11, 11, 11, 11, 11, 11, 11,
    11, 11, 11, 10, 11, 10, 10, 10, 10, 10, 10, 10, 10, 10, 9, 9, 9, 9, 9, 8, 9, 8, 8, 8, 8, 8, 7,
    7, 7, 6, 6, 6, 5, 4, 3, 12, 12, 12, 9, 9, 11, 10, 11, 11, 10, 11, 11, 11, 11, 11, 11, 12, 11,
    12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 9,
];

/// Deflate's length symbols 257..285: the shortest length each codes, and its extra bits.
const LENGTH_BASE: [u32; 29] = [
    3, 4, 5, 6, 7, 8, 9, 10, 11, 13, 15, 17, 19, 23, 27, 31, 35, 43, 51, 59, 67, 83, 99, 115, 131,
    163, 195, 227, 258,
];
const LENGTH_EXTRA: [u32; 29] = [
    0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3, 4, 4, 4, 4, 5, 5, 5, 5, 0,
];

/// End of block.
const EOB: usize = 256;

/// Bits of the end-of-block code.
pub(super) fn eob_len() -> u64 {
    u64::from(LENGTHS[EOB])
}

/// The canonical codes of [`LENGTHS`], bit-reversed for deflate's LSB-first order
/// (fdeflate's `compute_codes`).
fn codes() -> [u32; 286] {
    let mut codes = [0u32; 286];
    let mut code = 0u32;
    for len in 1..=16u8 {
        for (i, &l) in LENGTHS.iter().enumerate() {
            if l == len {
                codes[i] = (code as u16).reverse_bits() as u32 >> (16 - len);
                code += 1;
            }
        }
        code <<= 1;
    }
    codes
}

/// The code tables as the deflate kernel reads them: 286 literal/length symbols as
/// code | length << 16, then for each match length 3..=258 two words: its symbol's code with
/// the extra bits and the distance code's 0 bit above it, and their bit count.
pub(super) fn table_words() -> Vec<u32> {
    let codes = codes();
    let mut words: Vec<u32> = (0..286)
        .map(|s| codes[s] | u32::from(LENGTHS[s]) << 16)
        .collect();
    for len in 3..=258u32 {
        let k = LENGTH_BASE
            .iter()
            .rposition(|&b| b <= len)
            .expect("len >= 3");
        let sym = 257 + k;
        let extra = LENGTH_EXTRA[k];
        let value = (len - 3) & ((1 << extra) - 1);
        let n = u32::from(LENGTHS[sym]);
        words.push(codes[sym] | value << n);
        words.push(n + extra + 1);
    }
    words
}

/// An LSB-first bit writer, as fdeflate's.
#[derive(Default)]
pub(super) struct Bits {
    pub(super) bytes: Vec<u8>,
    acc: u64,
    n: u32,
}

impl Bits {
    pub(super) fn put(&mut self, bits: u32, n: u32) {
        self.acc |= u64::from(bits) << self.n;
        self.n += n;
        while self.n >= 8 {
            self.bytes.push(self.acc as u8);
            self.acc >>= 8;
            self.n -= 8;
        }
    }

    /// Pads the last byte with zeros.
    pub(super) fn flush(&mut self) {
        if self.n > 0 {
            self.bytes.push(self.acc as u8);
            self.acc = 0;
            self.n = 0;
        }
    }
}

/// The end of the stream after `bits` of coded data: the end-of-block code, the last byte
/// padded, and the Adler-32 of the filtered rows, big-endian. `stream` holds the coded bytes.
pub(super) fn finish(stream: &mut Vec<u8>, bits: u64, adler: u32) {
    let whole = (bits / 8) as usize;
    stream.truncate(whole + usize::from(!bits.is_multiple_of(8)));
    let mut w = Bits::default();
    if !bits.is_multiple_of(8) {
        // The partial byte goes back into the writer.
        let last = stream.pop().expect("a partial byte");
        w.put(u32::from(last), (bits % 8) as u32);
    }
    let table = table_words();
    w.put(table[EOB] & 0xFFFF, table[EOB] >> 16);
    w.flush();
    stream.extend_from_slice(&w.bytes);
    stream.extend_from_slice(&adler.to_be_bytes());
}

/// The size of the stored-only zlib stream of `raw` bytes (fdeflate's
/// `StoredOnlyCompressor::compressed_size`): the png crate writes that instead where the
/// coded stream is larger.
pub(super) fn stored_size(raw: usize) -> usize {
    let block = usize::from(u16::MAX);
    (raw.saturating_sub(1) / block) * (block + 5) + (raw % block + 5) + 6
}

/// The kernels' loops on the CPU, for the tests to hold against the png crate's files.
#[cfg(test)]
pub(super) mod twin {
    use super::{finish, table_words, Bits, HEADER};

    /// The Paeth predictor (PNG's, filter type 4).
    fn paeth(a: u8, b: u8, c: u8) -> u8 {
        let p = i16::from(a) + i16::from(b) - i16::from(c);
        let (pa, pb, pc) = (
            (p - i16::from(a)).abs(),
            (p - i16::from(b)).abs(),
            (p - i16::from(c)).abs(),
        );
        if pa <= pb && pa <= pc {
            a
        } else if pb <= pc {
            b
        } else {
            c
        }
    }

    /// The rows as the CPU engine hands them to deflate: each its filter type (4, Paeth), then
    /// its bytes Paeth-filtered against the row above (zeros above the first). `data` holds the
    /// samples as PNG stores them (16-bit big-endian); `bpp` is bytes a pixel.
    pub(in super::super) fn filter_rows(data: &[u8], row_len: usize, bpp: usize) -> Vec<u8> {
        let mut out = Vec::with_capacity(data.len() + data.len() / row_len.max(1));
        let zeros = vec![0u8; row_len];
        for (y, row) in data.chunks(row_len).enumerate() {
            let up = if y == 0 {
                &zeros[..]
            } else {
                &data[(y - 1) * row_len..y * row_len]
            };
            out.push(4);
            for i in 0..row_len {
                let (a, c) = if i >= bpp {
                    (row[i - bpp], up[i - bpp])
                } else {
                    (0, 0)
                };
                out.push(row[i].wrapping_sub(paeth(a, up[i], c)));
            }
        }
        out
    }

    /// Zero bytes at the start (`lead`) and end (`trail`) of a chunk.
    fn zeros(chunk: &[u8]) -> (usize, usize) {
        let lead = chunk.iter().take_while(|&&b| b == 0).count();
        let trail = chunk.iter().rev().take_while(|&&b| b == 0).count();
        (lead, trail)
    }

    /// The run of zeros open before chunk `c` of a filtered row: the zero chunks before it and the
    /// zeros that end the last non-zero chunk before them.
    fn run_before(row: &[u8], c: usize) -> usize {
        let mut run = 0;
        for j in (0..c).rev() {
            let chunk = &row[8 * j..8 * j + 8];
            if chunk.iter().all(|&b| b == 0) {
                run += 8;
            } else {
                return run + zeros(chunk).1;
            }
        }
        run
    }

    /// A run of `run` zeros (fdeflate's `write_run`): one literal zero, then matches at distance 1
    /// (258 long while more remain, then one of the rest if it is over 4, else literal zeros).
    fn put_run(w: &mut Bits, table: &[u32], mut run: usize) {
        let lit = |s: usize| (table[s] & 0xFFFF, table[s] >> 16);
        let matched = |len: usize| (table[286 + 2 * (len - 3)], table[287 + 2 * (len - 3)]);
        let (b, n) = lit(0);
        w.put(b, n);
        run -= 1;
        while run >= 258 {
            let (b, n) = matched(258);
            w.put(b, n);
            run -= 258;
        }
        if run > 4 {
            let (b, n) = matched(run);
            w.put(b, n);
        } else {
            for _ in 0..run {
                w.put(b, n);
            }
        }
    }

    /// Piece `c` of a filtered row (its filter byte first): chunk `c`'s codes, or at `c` = the
    /// row's whole chunks, its tail. The kernels' `code_piece`.
    fn put_piece(w: &mut Bits, table: &[u32], row: &[u8], c: usize) {
        let chunks = row.len() / 8;
        let run = run_before(row, c);
        let (bytes, (lead, trail)) = if c < chunks {
            let chunk = &row[8 * c..8 * c + 8];
            if chunk.iter().all(|&b| b == 0) {
                return;
            }
            (chunk, zeros(chunk))
        } else {
            (&row[8 * chunks..], (0, 0))
        };
        let (from, to) = match (run, c < chunks) {
            (0, true) => (0, 8 - trail),
            (_, true) => (lead, 8 - trail),
            (_, false) => (0, bytes.len()),
        };
        if run > 0 {
            put_run(w, table, run + if c < chunks { lead } else { 0 });
        }
        for &b in &bytes[from..to] {
            w.put(table[usize::from(b)] & 0xFFFF, table[usize::from(b)] >> 16);
        }
    }

    /// Adler-32 of `data`.
    fn adler32(data: &[u8]) -> u32 {
        const M: u32 = 65521;
        let (mut a, mut b) = (1u32, 0u32);
        for chunk in data.chunks(4096) {
            for &x in chunk {
                a += u32::from(x);
                b += a;
            }
            a %= M;
            b %= M;
        }
        b << 16 | a
    }

    /// The zlib stream of filtered rows of `row_len` bytes each (filter bytes included), coded
    /// piece by piece: what fdeflate writes for them, row by row.
    pub(in super::super) fn zlib_stream(filtered: &[u8], row_len: usize) -> Vec<u8> {
        let table = table_words();
        let mut w = Bits::default();
        for &b in &HEADER[..53] {
            w.put(u32::from(b), 8);
        }
        w.put(u32::from(HEADER[53]), 5);
        for row in filtered.chunks(row_len) {
            for c in 0..=row.len() / 8 {
                put_piece(&mut w, &table, row, c);
            }
        }
        let bits = w.bytes.len() as u64 * 8 + u64::from(w.n);
        w.flush();
        let mut out = w.bytes;
        finish(&mut out, bits, adler32(filtered));
        out
    }
}
