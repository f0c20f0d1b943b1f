//! Progressive JPEG as libjpeg-turbo writes it: jcparam.c's `jpeg_simple_progression` script
//! and jcphuff.c's scan coding (DC first and refinement, AC spectral selection with EOB runs,
//! AC refinement with buffered correction bits), each scan with tables made for it.
//!
//! A scan is coded once into tokens (a symbol with its value bits, or bare bits) while its
//! symbols are counted; the tables made from the counts then turn the tokens into bits. An AC
//! scan finds a block's coefficients in its band from bitmaps of those not zero (and, to
//! refine, of those newly 1) after the point transform, walked by trailing-zero counts, as
//! jcphuff.c's `encode_mcu_AC_*_prepare` does; the bitmaps are made by AVX2 where the CPU has
//! it.

use super::huffman::{nbits, BitWriter, Codes, Table};
use super::{scan_order, Component, Visit};

/// One scan: components (indices), spectral band Ss..=Se, successive approximation Ah, Al.
struct Scan {
    comps: Vec<usize>,
    ss: usize,
    se: usize,
    ah: u8,
    al: u8,
}

fn scan(comps: &[usize], ss: usize, se: usize, ah: u8, al: u8) -> Scan {
    Scan {
        comps: comps.to_vec(),
        ss,
        se,
        ah,
        al,
    }
}

/// jcparam.c's `jpeg_simple_progression`: its YCbCr script, or the all-purpose one for gray.
fn script(ncomps: usize) -> Vec<Scan> {
    if ncomps == 3 {
        vec![
            scan(&[0, 1, 2], 0, 0, 0, 1),
            scan(&[0], 1, 5, 0, 2),
            scan(&[2], 1, 63, 0, 1),
            scan(&[1], 1, 63, 0, 1),
            scan(&[0], 6, 63, 0, 2),
            scan(&[0], 1, 63, 2, 1),
            scan(&[0, 1, 2], 0, 0, 1, 0),
            scan(&[2], 1, 63, 1, 0),
            scan(&[1], 1, 63, 1, 0),
            scan(&[0], 1, 63, 1, 0),
        ]
    } else {
        vec![
            scan(&[0], 0, 0, 0, 1),
            scan(&[0], 1, 5, 0, 2),
            scan(&[0], 6, 63, 0, 2),
            scan(&[0], 1, 63, 2, 1),
            scan(&[0], 0, 0, 1, 0),
            scan(&[0], 1, 63, 1, 0),
        ]
    }
}

/// A scan's coded form before its tables exist, one u32 a token: bits 0-15 the value bits,
/// 16-20 their count (at most 16), and where bit 31 is set a symbol first: bits 21-28 the
/// symbol, bit 29 its table.
struct Tokens {
    list: Vec<u32>,
    counts: [[u64; 256]; 2],
}

const HAS_SYMBOL: u32 = 1 << 31;

impl Tokens {
    /// A symbol of table `t`, then the low `n` bits of `value` (n at most 16).
    #[inline(always)]
    fn symbol(&mut self, t: usize, sym: u32, value: u32, n: u32) {
        self.counts[t][sym as usize] += 1;
        let v = value & ((1 << n) - 1);
        self.list
            .push(HAS_SYMBOL | (t as u32) << 29 | sym << 21 | n << 16 | v);
    }

    /// The low `n` bits of `bits`, 16 at most.
    #[inline(always)]
    fn bits(&mut self, bits: u32, n: u32) {
        if n > 0 {
            self.list.push(n << 16 | (bits & ((1 << n) - 1)));
        }
    }

    /// The low `n` bits of `bits` (n at most 64), first bit highest.
    #[inline(always)]
    fn long_bits(&mut self, bits: u64, n: u32) {
        let mut left = n;
        while left > 16 {
            left -= 16;
            self.bits((bits >> left) as u32, 16);
        }
        self.bits(bits as u32, left);
    }

    /// The tokens as bits, with the codes of each table the scan uses.
    fn write(&self, codes: &[Option<Codes>; 2], w: &mut BitWriter) {
        let none = Codes {
            code: [0; 256],
            size: [0; 256],
        };
        let c = [
            codes[0].as_ref().unwrap_or(&none),
            codes[1].as_ref().unwrap_or(&none),
        ];
        for &t in &self.list {
            let n = t >> 16 & 31;
            let v = t & 0xFFFF;
            if t & HAS_SYMBOL != 0 {
                let c = c[(t >> 29 & 1) as usize];
                let sym = (t >> 21 & 0xFF) as usize;
                w.put(c.code[sym] << n | v, u32::from(c.size[sym]) + n);
            } else {
                w.put(v, n);
            }
        }
    }
}

/// Correction bits waiting to be written: up to 64 a chunk, first bit highest.
#[derive(Default)]
struct Bits {
    chunks: Vec<(u64, u32)>,
    total: usize,
}

/// An AC scan's pending end-of-band run and the correction bits waiting behind it.
#[derive(Default)]
struct EobRun {
    run: u32,
    be: Bits,
}

impl EobRun {
    /// jcphuff.c's `emit_eobrun`.
    #[inline(always)]
    fn emit(&mut self, s: &mut Tokens, table: usize) {
        if self.run > 0 {
            let n = 31 - self.run.leading_zeros();
            s.symbol(table, n << 4, self.run, n);
            self.run = 0;
            for &(bits, n) in &self.be.chunks {
                s.long_bits(bits, n);
            }
            self.be.chunks.clear();
            self.be.total = 0;
        }
    }
}

const MAX_CORR_BITS: usize = 1000;

/// Bit k set where coefficient k of `block` (zigzag order) is not zero after the point
/// transform (|x| >> al), and where it is exactly 1; the whole block, the caller masks the
/// band.
#[inline(always)]
pub(super) fn band_masks(block: &[i16; 64], al: u8) -> (u64, u64) {
    let (mut nonzero, mut ones) = (0u64, 0u64);
    for (k, &x) in block.iter().enumerate() {
        let v = i32::from(x).abs() >> al;
        nonzero |= u64::from(v != 0) << k;
        ones |= u64::from(v == 1) << k;
    }
    (nonzero, ones)
}

/// `band_masks` in AVX2: |x| >> al 16 lanes at a time, compared with 0 and 1, packed to
/// bytes and their signs gathered.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
#[inline]
pub(super) unsafe fn band_masks_avx2(block: &[i16; 64], al: u8) -> (u64, u64) {
    use std::arch::x86_64::*;
    let p = block.as_ptr() as *const __m256i;
    let count = _mm_cvtsi32_si128(i32::from(al));
    // SAFETY: four 32-byte loads within the block's 128 bytes. abs of -32768 is 0x8000,
    // which the logical shift reads as 32768, as the scalar twin's i32 does.
    let v: [__m256i; 4] = std::array::from_fn(|i| {
        _mm256_srl_epi16(_mm256_abs_epi16(_mm256_loadu_si256(p.add(i))), count)
    });
    let gather = |e: [__m256i; 4]| {
        // packs interleaves its inputs by 128-bit lane; the permute puts them back in order.
        let lo = _mm256_permute4x64_epi64(_mm256_packs_epi16(e[0], e[1]), 0xD8);
        let hi = _mm256_permute4x64_epi64(_mm256_packs_epi16(e[2], e[3]), 0xD8);
        u64::from(_mm256_movemask_epi8(lo) as u32)
            | u64::from(_mm256_movemask_epi8(hi) as u32) << 32
    };
    let zero = _mm256_setzero_si256();
    let one = _mm256_set1_epi16(1);
    let zeros = gather(v.map(|x| _mm256_cmpeq_epi16(x, zero)));
    let ones = gather(v.map(|x| _mm256_cmpeq_epi16(x, one)));
    (!zeros, ones)
}

/// The bits of coefficients ss..=se.
#[inline(always)]
fn band(ss: usize, se: usize) -> u64 {
    (u64::MAX >> (63 - se)) & (u64::MAX << ss)
}

/// Codes one scan's blocks into tokens.
struct Coder<'s, const AVX2: bool> {
    t: &'s mut Tokens,
    sc: &'s Scan,
    tables: [usize; 3],
    /// DC first scans: each component's last DC (point-transformed).
    last: [i32; 3],
    /// DC refinement: bits gathered 16 to a token.
    dc_bits: u32,
    dc_n: u32,
    eob: EobRun,
    band: u64,
}

impl<const AVX2: bool> Coder<'_, AVX2> {
    #[inline(always)]
    fn masks(&self, b: &[i16; 64]) -> (u64, u64) {
        #[cfg(target_arch = "x86_64")]
        if AVX2 {
            // SAFETY: AVX2 builds run only where the CPU has AVX2 (`encode`).
            return unsafe { band_masks_avx2(b, self.sc.al) };
        }
        band_masks(b, self.sc.al)
    }

    /// jcphuff.c's `encode_mcu_AC_first`.
    #[inline(always)]
    fn ac_first(&mut self, b: &[i16; 64]) {
        let (table, al) = (self.tables[0], self.sc.al);
        let mut nz = self.masks(b).0 & self.band;
        let mut prev = self.sc.ss as u32 - 1;
        while nz != 0 {
            let k = nz.trailing_zeros();
            nz &= nz - 1;
            let mut r = k - prev - 1;
            prev = k;
            self.eob.emit(self.t, table);
            while r > 15 {
                self.t.symbol(table, 0xF0, 0, 0);
                r -= 16;
            }
            let x = b[k as usize];
            let v = i32::from(x).abs() >> al;
            let n = nbits(v);
            let bits = if x < 0 { !v } else { v } as u32;
            self.t.symbol(table, (r << 4) + n, bits, n);
        }
        if prev != self.sc.se as u32 {
            self.eob.run += 1;
            if self.eob.run == 0x7FFF {
                self.eob.emit(self.t, table);
            }
        }
    }

    /// jcphuff.c's `encode_mcu_AC_refine`.
    #[inline(always)]
    fn ac_refine(&mut self, b: &[i16; 64]) {
        let table = self.tables[0];
        let (nz, ones) = self.masks(b);
        let (mut nz, ones) = (nz & self.band, ones & self.band);
        // The last coefficient newly 1 (jcphuff.c's EOB): ZRLs are coded only up to it.
        let last_new = if ones == 0 {
            0
        } else {
            63 - ones.leading_zeros()
        };
        let mut r = 0u32;
        let mut prev = self.sc.ss as u32 - 1;
        // Correction bits of this block, first bit highest.
        let (mut br, mut br_n) = (0u64, 0u32);
        while nz != 0 {
            let k = nz.trailing_zeros();
            nz &= nz - 1;
            r += k - prev - 1;
            prev = k;
            while r > 15 && k <= last_new {
                self.eob.emit(self.t, table);
                self.t.symbol(table, 0xF0, 0, 0);
                r -= 16;
                self.t.long_bits(br, br_n);
                (br, br_n) = (0, 0);
            }
            let x = b[k as usize];
            if ones >> k & 1 == 0 {
                let v = i32::from(x).abs() >> self.sc.al;
                br = br << 1 | (v & 1) as u64;
                br_n += 1;
                continue;
            }
            self.eob.emit(self.t, table);
            self.t.symbol(table, (r << 4) + 1, u32::from(x >= 0), 1);
            self.t.long_bits(br, br_n);
            (br, br_n) = (0, 0);
            r = 0;
        }
        r += self.sc.se as u32 - prev;
        if r > 0 || br_n > 0 {
            self.eob.run += 1;
            if br_n > 0 {
                self.eob.be.chunks.push((br, br_n));
                self.eob.be.total += br_n as usize;
            }
            if self.eob.run == 0x7FFF || self.eob.be.total > MAX_CORR_BITS - 64 + 1 {
                self.eob.emit(self.t, table);
            }
        }
    }
}

impl<const AVX2: bool> Visit<'_> for Coder<'_, AVX2> {
    #[inline(always)]
    fn block(&mut self, i: usize, b: &[i16; 64]) {
        let sc = self.sc;
        if sc.ss == 0 {
            if sc.ah == 0 {
                let v = i32::from(b[0]) >> sc.al;
                let diff = v - self.last[i];
                self.last[i] = v;
                let n = nbits(diff);
                let bits = if diff < 0 { diff - 1 } else { diff };
                self.t.symbol(self.tables[i], n, bits as u32, n);
            } else {
                self.dc_bits = self.dc_bits << 1 | (i32::from(b[0]) >> sc.al) as u32 & 1;
                self.dc_n += 1;
                if self.dc_n == 16 {
                    self.t.bits(self.dc_bits, 16);
                    (self.dc_bits, self.dc_n) = (0, 0);
                }
            }
        } else if sc.ah == 0 {
            self.ac_first(b);
        } else {
            self.ac_refine(b);
        }
    }
}

/// Codes scan `sc` into `t` (cleared first), its symbols counted.
#[inline(always)]
fn tokens<const AVX2: bool>(comps: &[Component], sc: &Scan, t: &mut Tokens) {
    t.list.clear();
    t.counts = [[0; 256]; 2];
    let members: Vec<&Component> = sc.comps.iter().map(|&i| &comps[i]).collect();
    let mut tables = [0; 3];
    for (t, c) in tables.iter_mut().zip(&members) {
        *t = c.table;
    }
    let mut coder = Coder::<AVX2> {
        t,
        sc,
        tables,
        last: [0; 3],
        dc_bits: 0,
        dc_n: 0,
        eob: EobRun::default(),
        band: band(sc.ss.max(1), sc.se.max(1)),
    };
    scan_order(&members, &mut coder);
    let (bits, n) = (coder.dc_bits, coder.dc_n);
    coder.t.bits(bits, n);
    coder.eob.emit(coder.t, tables[0]);
}

/// Every scan of the script: its optimal tables (DHT), SOS, and its entropy-coded data.
pub(super) fn encode(comps: &[Component], out: &mut Vec<u8>) {
    #[cfg(target_arch = "x86_64")]
    if super::coder_features() {
        // SAFETY: the features are present (checked just above).
        unsafe { encode_avx2(comps, out) };
        return;
    }
    encode_scalar(comps, out);
}

/// The portable build of `encode` (and the twin the vector build is tested against).
pub(super) fn encode_scalar(comps: &[Component], out: &mut Vec<u8>) {
    encode_body::<false>(comps, out);
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,bmi1,lzcnt")]
pub(super) unsafe fn encode_avx2(comps: &[Component], out: &mut Vec<u8>) {
    encode_body::<true>(comps, out);
}

#[inline(always)]
fn encode_body<const AVX2: bool>(comps: &[Component], out: &mut Vec<u8>) {
    let mut t = Tokens {
        list: Vec::new(),
        counts: [[0; 256]; 2],
    };
    for sc in script(comps.len()) {
        let dc = sc.ss == 0;
        tokens::<AVX2>(comps, &sc, &mut t);
        let needs_table = !(dc && sc.ah != 0);
        let mut codes: [Option<Codes>; 2] = [None, None];
        for &i in &sc.comps {
            let k = comps[i].table;
            if needs_table && codes[k].is_none() {
                let table = Table::optimal(&t.counts[k]);
                table.write_dht(if dc { k as u8 } else { 0x10 | k as u8 }, out);
                codes[k] = Some(table.codes());
            }
        }
        let len = 6 + 2 * sc.comps.len();
        out.extend_from_slice(&[0xFF, 0xDA, 0, len as u8, sc.comps.len() as u8]);
        for &i in &sc.comps {
            let c = &comps[i];
            let td = if dc && sc.ah == 0 { c.table } else { 0 };
            let ta = if sc.se > 0 { c.table } else { 0 };
            out.extend_from_slice(&[c.id, (td << 4 | ta) as u8]);
        }
        out.extend_from_slice(&[sc.ss as u8, sc.se as u8, sc.ah << 4 | sc.al]);
        let mut w = BitWriter::new(out);
        t.write(&codes, &mut w);
        w.finish();
    }
}
