//! The box blur of 8-bit images without alpha on AVX2, every lane 16 bits wide: the row pass
//! reads the samples as they are, its running sums, window sums and rounding in u16 lanes; the
//! column pass slides two u16 sums per sample and divides with 16-bit multiplies. The same
//! bits as `reference` (docs/blur.md, "The native CPU engine"), where `Box8::new` finds
//! constants that make every step exact (radii up to 85); elsewhere the engine's other paths
//! run.
//!
//! With n = 2r + 1 and F = 8 (docs/blur.md, "Box"), a row window sum S <= 255 n becomes
//! h = floor((256 S + floor(n / 2)) / n) <= 65280, and a column window sum T of h values
//! becomes out = floor((T + 128 n) / (256 n)). Both are computed without 32-bit lanes:
//!
//! - Row: with k = floor(256 / n) and m = 256 - k n, 256 S + floor(n / 2) =
//!   n k S + (m S + floor(n / 2)), so h = k S + floor((m S + floor(n / 2)) / n), and the
//!   second term's dividend is at most 255 m n + floor(n / 2): where that fits 16 bits (every
//!   n up to 25, and 31, 51, 63, 85, 127 among the others) one `Magic16` divides it. Elsewhere
//!   S = q n + rho with q = floor(S / n) (a `Magic16`, S < 2^16), and
//!   256 S + floor(n / 2) = 256 n q + (256 rho + floor(n / 2)), so
//!   h = 256 q + floor((256 rho + floor(n / 2)) / n), whose dividend is below 256 n (a third
//!   `Magic16`, for n up to 255).
//! - Column: every h splits into its bytes, h = 256 a + b (a, b <= 255), so T = 256 A + B with
//!   A and B the window sums of the a and b, each at most 255 n, kept in u16 lanes. Then
//!   floor((T + 128 n) / 256) = A + floor((B + 128 n) / 256) (256 A is a multiple of 256; B +
//!   128 n fits 16 bits for n up to 171), and out = floor(z / n) for that z, since
//!   floor(floor(x / 256) / n) = floor(x / (256 n)): one more `Magic16`.

use std::arch::x86_64::*;

use super::{Geometry, OutPtr, Plan};
use crate::simd::mulhi_epu16 as mulhi;

/// floor(y / d) = ((y + add) * mul) >> (16 + shift) for every y up to the bound it was made
/// for, in 16-bit lanes: `_mm256_mulhi_epu16` and a shift.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) struct Magic16 {
    add: u16,
    mul: u16,
    shift: u32,
}

impl Magic16 {
    /// The constants for divisor `d` and dividends up to `y_max`, if any fit 16 bits. With
    /// p = 2^(16 + shift) and y = q d + rho (rho < d):
    ///
    /// - rounded up, mul = ceil(p / d), e = mul d - p: y mul / p = y / d + y e / (d p), which
    ///   lies in [q, q + 1) when y e < p (then y e / (d p) < 1 / d <= (d - rho) / d);
    /// - rounded down, mul <= floor(p / d), e = p - mul d > 0, add = 1:
    ///   (y + 1) mul / p = q + (rho + 1) / d - (y + 1) e / (d p), which is below q + 1 (e > 0,
    ///   rho + 1 <= d) and at least q when (y + 1) e <= p.
    pub fn new(d: u32, y_max: u32) -> Option<Magic16> {
        if d == 0 || y_max > 0xffff {
            return None;
        }
        let (d, y) = (d as u64, y_max as u64);
        (0..16u32).find_map(|shift| {
            let p = 1u64 << (16 + shift);
            let up = p.div_ceil(d);
            if up <= 0xffff && y * (up * d - p) < p {
                return Some(Magic16 {
                    add: 0,
                    mul: up as u16,
                    shift,
                });
            }
            let down = (p / d).min(0xffff);
            let e = p - down * d;
            (down > 0 && e > 0 && y < 0xffff && (y + 1) * e <= p).then_some(Magic16 {
                add: 1,
                mul: down as u16,
                shift,
            })
        })
    }

    /// floor(y / d) for one y.
    #[inline(always)]
    pub fn one(&self, y: u32) -> u32 {
        ((y + self.add as u32) * self.mul as u32) >> (16 + self.shift)
    }
}

/// The constants of the box on 8-bit samples without alpha (the module's header).
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) struct Box8 {
    /// floor(256 / n) and 256 - n floor(256 / n).
    k: u16,
    m: u16,
    /// floor(n / 2), added to m S (or 256 rho) before `row` divides by n.
    half_n: u16,
    row: Magic16,
    /// Where m S + floor(n / 2) may pass 16 bits: floor(S / n), for the other split.
    quot: Option<Magic16>,
    n: u16,
    /// 128 n, added to B.
    half_d: u16,
    col: Magic16,
}

impl Box8 {
    /// For a box of window `n` whose passes round as `first` (the row pass: (S * mul + add) /
    /// div) and `second` (the column pass), if they are the 8-bit box's and constants exist.
    pub fn new(n: u32, first: (u32, u32, u32), second: (u32, u32, u32)) -> Option<Box8> {
        if first != (256, n / 2, n) || second != (1, 128 * n, 256 * n) || n > 171 {
            return None;
        }
        let (k, m) = (256 / n, 256 % n);
        // The first split where its dividend fits, else the second (the module's header).
        let (row, quot) = match Magic16::new(n, 255 * m * n + n / 2) {
            Some(row) => (row, None),
            None => (
                Magic16::new(n, 256 * (n - 1) + n / 2)?,
                Some(Magic16::new(n, 255 * n)?),
            ),
        };
        let col = Magic16::new(n, 255 * n + (255 * n + 128 * n) / 256)?;
        Some(Box8 {
            k: k as u16,
            m: m as u16,
            half_n: (n / 2) as u16,
            row,
            quot,
            n: n as u16,
            half_d: (128 * n) as u16,
            col,
        })
    }

    /// The row pass's output for one window sum S.
    #[inline(always)]
    fn row_one(&self, s: u32) -> u16 {
        let half = self.half_n as u32;
        (match self.quot {
            None => self.k as u32 * s + self.row.one(self.m as u32 * s + half),
            Some(quot) => {
                let q = quot.one(s);
                256 * q + self.row.one(256 * (s - q * self.n as u32) + half)
            }
        }) as u16
    }

    /// The column pass's output for the window sums A and B of the high and low bytes.
    #[cfg(test)]
    fn col_one(&self, a: u16, b: u16) -> u8 {
        self.col_biased(a + self.col.add, b + self.half_d)
    }

    /// `col_one` from the sums as the column pass keeps them, biased:
    /// A' = A + `col.add` and B' = B + 128 n (at most 255 n + 1 and 383 n, so u16 still).
    #[inline(always)]
    fn col_biased(&self, a: u16, b: u16) -> u8 {
        let z = a as u32 + (b as u32 >> 8);
        ((z * self.col.mul as u32) >> (16 + self.col.shift)) as u8
    }
}

/// A tile's buffers.
#[derive(Default)]
pub(super) struct Scratch {
    /// The running sums of one row segment and its clamped halo.
    prefix: Vec<u16>,
    /// Intermediate rows, row y in slot y % ring_rows.
    ring: Vec<u16>,
    /// The column pass's window sums of the high (A) and low (B) bytes of the intermediate.
    a: Vec<u16>,
    b: Vec<u16>,
}

/// Output rows the column pass computes in one sweep along a row segment, with its window sums
/// in registers between them: the ring holds this many rows beyond the window
/// (`Box8::ring_rows`).
const ROWS: usize = 4;

impl Box8 {
    /// Intermediate rows a tile keeps for an image `h` rows high.
    pub fn ring_rows(radius: usize, h: usize) -> usize {
        (2 * radius + 1 + ROWS).min(h)
    }
}

/// Blurs the tile of columns `xs` and rows `ys` of `src` into `out` (the engine's `tile` for
/// the box with `bx`; `plan.ring_rows` is `Box8::ring_rows`).
pub(super) fn tile(
    src: &[u8],
    plan: &Plan,
    bx: &Box8,
    (x0, x1): (usize, usize),
    (y0, y1): (usize, usize),
    out: OutPtr<u8>,
    sc: &mut Scratch,
) {
    let Geometry {
        w, h, c, radius: r, ..
    } = plan.geo;
    let seg = (x1 - x0) * c;
    let ring_rows = plan.ring_rows;
    sc.ring.resize(ring_rows * seg, 0);
    sc.prefix.resize(2 * (seg + (2 * r + 1) * c), 0);
    let clamp = |y: i64| y.clamp(0, h as i64 - 1) as usize;
    // The rows computed so far: all of first..=last are in the ring (`last` wraps below 0
    // before the first).
    let mut last = clamp(y0 as i64 - r as i64).wrapping_sub(1);
    // The running sums start at pixel x0 - r - 1, as in `row_box`.
    let first = x0 as i64 - r as i64 - 1;
    let len = seg + (2 * r + 1) * c;
    let mut fill = |sc: &mut Scratch, upto: usize| {
        let mut y = last.wrapping_add(1);
        if y > upto {
            return;
        }
        // Two rows at a time, then one.
        while y <= upto {
            let k = if y < upto { 2 } else { 1 };
            let row = |y: usize| &src[y * w * c..(y + 1) * w * c];
            let ring = sc.ring.as_mut_ptr();
            // SAFETY: the ring holds `ring_rows` slots of `seg` samples.
            let dst = |y: usize| unsafe { ring.add((y % ring_rows) * seg) };
            let (r0, d0) = (row(y), dst(y));
            let prefix = &mut sc.prefix[..k * len];
            // SAFETY: a `Box8` is made only where the CPU has AVX2 (`Plan::box8`); the ring's
            // slots are `seg` samples each, and two rows take two different slots.
            unsafe {
                match (c, k) {
                    (1, 1) => row_pass::<1, 1>(bx, [r0], first, prefix, [d0], seg),
                    (3, 1) => row_pass::<3, 1>(bx, [r0], first, prefix, [d0], seg),
                    (1, _) => {
                        let (r1, d1) = (row(y + 1), dst(y + 1));
                        row_pass::<1, 2>(bx, [r0, r1], first, prefix, [d0, d1], seg)
                    }
                    (3, _) => {
                        let (r1, d1) = (row(y + 1), dst(y + 1));
                        row_pass::<3, 2>(bx, [r0, r1], first, prefix, [d0, d1], seg)
                    }
                    _ => unreachable!("8-bit images without alpha are gray or RGB, not {c}"),
                }
            }
            y += k;
        }
        last = upto;
    };
    let out_row = |y: usize| -> *mut u8 {
        // SAFETY: row y, columns x0..x1 of the output belong to this tile alone.
        unsafe { out.0.add((y * w + x0) * c) }
    };
    let ring_row = |ring: &[u16], y: usize| -> *const u16 {
        let slot = y % ring_rows;
        ring[slot * seg..(slot + 1) * seg].as_ptr()
    };
    // The window sums at y0: rows y0 - r ..= y0 + r, clamped, as counts of distinct rows.
    let (lo, hi) = (y0 as i64 - r as i64, y0 as i64 + r as i64);
    fill(sc, clamp(hi));
    // The sums start at their biases (`Box8::col_biased`).
    sc.a.clear();
    sc.a.resize(seg, bx.col.add);
    sc.b.clear();
    sc.b.resize(seg, bx.half_d);
    for y in clamp(lo)..=clamp(hi) {
        let times = ((y as i64 == 0) as i64 * (-lo).max(0)
            + (y == h - 1) as i64 * (hi - (h as i64 - 1)).max(0)
            + 1) as u16;
        let slot = y % ring_rows;
        let row = &sc.ring[slot * seg..(slot + 1) * seg];
        for ((a, b), &v) in sc.a.iter_mut().zip(sc.b.iter_mut()).zip(row) {
            // The true sums are at most 255 n < 2^16.
            *a = a.wrapping_add((v >> 8).wrapping_mul(times));
            *b = b.wrapping_add((v & 0xff).wrapping_mul(times));
        }
    }
    // Row y0 adds and takes away the same row: its sums as they are.
    let same = ring_row(&sc.ring, y0);
    // SAFETY: as above; the ring rows are `seg` long, and so are the output rows.
    unsafe { column_rows(bx, &[(same, same, out_row(y0))], &mut sc.a, &mut sc.b) };
    let mut y = y0 + 1;
    while y < y1 {
        let k = ROWS.min(y1 - y);
        fill(sc, clamp((y + k - 1 + r) as i64));
        let rows: Vec<_> = (y..y + k)
            .map(|y| {
                let add = ring_row(&sc.ring, clamp((y + r) as i64));
                let sub = ring_row(&sc.ring, clamp(y as i64 - r as i64 - 1));
                (add, sub, out_row(y))
            })
            .collect();
        // SAFETY: as above; the ring holds the window and `ROWS` rows more, so every row
        // named is still in it.
        unsafe { column_rows(bx, &rows, &mut sc.a, &mut sc.b) };
        y += k;
    }
}

/// The row pass of K rows' segments into `dst` (their intermediate h, C samples a pixel, `seg`
/// samples each), the segments' pixels and their halo starting at pixel `first` of each row
/// (x0 - r - 1), clamped to the row; `prefix` is scratch of K times `seg` + (2r + 1) C
/// samples. With P the running sums of a row's clamped pixels per channel (wrapping u16: only
/// their differences are used, and every window sum is below 2^16), the window sum at sample
/// t is S = P[t + (2r + 1) C] - P[t]. One loop computes P over the pixels inside the rows, 16
/// lanes a vector read from each row itself (within a vector in log steps, then the carry of
/// the row's vector before: the K rows' carries are independent chains, which the CPU
/// overlaps), and as soon as a vector of P is known the window sums that end in it; the
/// clamped ends' P are sums of one pixel, one at a time, and the window sums the loop missed
/// (at most 15 at the start, those past its end) are done afterwards, 16 at a time (or one by
/// one, for a segment under 16 samples).
#[target_feature(enable = "avx2")]
unsafe fn row_pass<const C: usize, const K: usize>(
    bx: &Box8,
    rows: [&[u8]; K],
    first: i64,
    prefix: &mut [u16],
    dst: [*mut u16; K],
    seg: usize,
) {
    let len = prefix.len() / K;
    let off = len - seg;
    let width = rows[0].len();
    let px = (width / C) as i64;
    assert!(off >= C && off.is_multiple_of(C) && len.is_multiple_of(C) && px > 0);
    assert!(prefix.len() == K * len && rows.iter().all(|r| r.len() == width));
    // Samples jl..jr of the running sums are of pixels inside the row, sample j of the row's
    // sample base + j; those before are of pixel 0, those after of the last pixel.
    let jl = ((-first).max(0) as usize * C).min(len);
    let jr = ((px - first).max(0) as usize * C).min(len).max(jl);
    let base = first * C as i64;
    let sample = |row: &[u8], j: usize| -> u16 {
        let at = if j < jl {
            j % C
        } else if j < jr {
            (base + j as i64) as usize
        } else {
            width - C + j % C
        };
        row[at] as u16
    };
    for (k, p) in prefix.chunks_exact_mut(len).enumerate() {
        for j in 0..jl {
            let before = if j >= C { p[j - C] } else { 0 };
            p[j] = before.wrapping_add(sample(rows[k], j));
        }
    }
    // Lane i of a carry takes lane 16 - C + i % C of the vector before (lane 8 - C + i % C
    // of its upper half, broadcast to both halves first).
    let mut mask = [0u8; 32];
    for i in 0..16 {
        let lane = (8 - C + i % C) as u8;
        mask[2 * i] = 2 * lane;
        mask[2 * i + 1] = 2 * lane + 1;
    }
    let mask = _mm256_loadu_si256(mask.as_ptr().cast());
    // Lane 8 + i of a vector adds lane 8 - C + i % C of its low half (`prefix_lanes`).
    let mut cross = [0u8; 32];
    for i in 0..16 {
        let lane = (8 - C + (i % 8) % C) as u8;
        cross[2 * i] = 2 * lane;
        cross[2 * i + 1] = 2 * lane + 1;
    }
    let cross = _mm256_loadu_si256(cross.as_ptr().cast());
    let round = RowRound::new(bx);
    let pp: [*mut u16; K] = std::array::from_fn(|k| prefix.as_mut_ptr().add(k * len));
    // Lane i starts from the sums of sample jl + i's channel so far.
    let mut carry: [__m256i; K] = std::array::from_fn(|k| {
        let mut start = [0u16; 16];
        if jl >= C {
            for (i, s) in start.iter_mut().enumerate() {
                *s = *pp[k].add(jl - C + i % C);
            }
        }
        _mm256_loadu_si256(start.as_ptr().cast())
    });
    let mut j = jl;
    while j + 16 <= jr {
        for k in 0..K {
            let at = rows[k].as_ptr().offset((base + j as i64) as isize);
            let x = _mm256_cvtepu8_epi16(_mm_loadu_si128(at.cast()));
            let x = _mm256_add_epi16(prefix_lanes::<C>(x, cross), carry[k]);
            _mm256_storeu_si256(pp[k].add(j).cast(), x);
            carry[k] = _mm256_shuffle_epi8(_mm256_permute2x128_si256(x, x, 0x11), mask);
            if j >= off {
                let t = j - off;
                let lo = _mm256_loadu_si256(pp[k].add(t).cast());
                let h = round.apply(_mm256_sub_epi16(x, lo));
                _mm256_storeu_si256(dst[k].add(t).cast(), h);
            }
        }
        j += 16;
    }
    let done = j.saturating_sub(off);
    for k in 0..K {
        let p = std::slice::from_raw_parts_mut(pp[k], len);
        for j in j..len {
            let before = if j >= C { p[j - C] } else { 0 };
            p[j] = before.wrapping_add(sample(rows[k], j));
        }
        if seg < 16 {
            for t in 0..seg {
                *dst[k].add(t) = bx.row_one(p[t + off].wrapping_sub(p[t]) as u32);
            }
            continue;
        }
        // The first 16 (the loop starts at the first vector ending at or after off), then
        // those from where the loop stopped.
        let window = |t: usize| {
            let hi = _mm256_loadu_si256(pp[k].add(t + off).cast());
            let lo = _mm256_loadu_si256(pp[k].add(t).cast());
            _mm256_storeu_si256(dst[k].add(t).cast(), round.apply(_mm256_sub_epi16(hi, lo)));
        };
        window(0);
        let mut t = done;
        while t < seg {
            window(t.min(seg - 16));
            t += 16;
        }
    }
}

/// The running sums of 16 u16 lanes of C-channel pixels, per channel (lane i the sum of lanes
/// i, i - C, i - 2C, ... down to 0): within each 128-bit half in log steps of in-lane shifts,
/// then the low half's last pixel's sums added to the high half (`cross` picks, for lane
/// 8 + i, lane 8 - C + i % C of the low half, the last of lane 8 + i's channel).
#[target_feature(enable = "avx2")]
#[inline]
unsafe fn prefix_lanes<const C: usize>(x: __m256i, cross: __m256i) -> __m256i {
    let x = match C {
        1 => {
            let x = _mm256_add_epi16(x, _mm256_slli_si256::<2>(x));
            let x = _mm256_add_epi16(x, _mm256_slli_si256::<4>(x));
            _mm256_add_epi16(x, _mm256_slli_si256::<8>(x))
        }
        3 => {
            let x = _mm256_add_epi16(x, _mm256_slli_si256::<6>(x));
            _mm256_add_epi16(x, _mm256_slli_si256::<12>(x))
        }
        _ => unreachable!("gray or RGB"),
    };
    // The low half moved to the high one, zeros below.
    let low = _mm256_permute2x128_si256::<0x08>(x, x);
    _mm256_add_epi16(x, _mm256_shuffle_epi8(low, cross))
}

/// `Box8::row_one` on 16 lanes, its constants in vectors.
#[derive(Clone, Copy)]
struct RowRound {
    /// The second split: floor(S / n) as (add, mul, shift), and n.
    quot: Option<(__m256i, __m256i, __m128i)>,
    n: __m256i,
    /// k and m as shifts where both are the same power of two (r = 15: both 8), else None.
    shift: Option<__m128i>,
    k: __m256i,
    m: __m256i,
    add: __m256i,
    mul: __m256i,
    post: __m128i,
}

impl RowRound {
    #[target_feature(enable = "avx2")]
    unsafe fn new(bx: &Box8) -> RowRound {
        let same_pow2 = bx.k == bx.m && bx.k.is_power_of_two();
        RowRound {
            quot: bx.quot.map(|q| {
                (
                    _mm256_set1_epi16(q.add as i16),
                    _mm256_set1_epi16(q.mul as i16),
                    _mm_cvtsi32_si128(q.shift as i32),
                )
            }),
            n: _mm256_set1_epi16(bx.n as i16),
            shift: same_pow2.then(|| _mm_cvtsi32_si128(bx.k.trailing_zeros() as i32)),
            k: _mm256_set1_epi16(bx.k as i16),
            m: _mm256_set1_epi16(bx.m as i16),
            add: _mm256_set1_epi16((bx.half_n + bx.row.add) as i16),
            mul: _mm256_set1_epi16(bx.row.mul as i16),
            post: _mm_cvtsi32_si128(bx.row.shift as i32),
        }
    }

    /// h = k S + floor((m S + floor(n / 2)) / n) for 16 window sums S.
    #[target_feature(enable = "avx2")]
    #[inline]
    unsafe fn apply(&self, s: __m256i) -> __m256i {
        if let Some((add, mul, post)) = self.quot {
            // h = 256 q + floor((256 rho + floor(n / 2)) / n), S = q n + rho.
            let q = _mm256_srl_epi16(mulhi(_mm256_add_epi16(s, add), mul), post);
            let rho = _mm256_sub_epi16(s, _mm256_mullo_epi16(q, self.n));
            let y = _mm256_add_epi16(_mm256_slli_epi16::<8>(rho), self.add);
            let q2 = _mm256_srl_epi16(mulhi(y, self.mul), self.post);
            return _mm256_add_epi16(_mm256_slli_epi16::<8>(q), q2);
        }
        let (ks, ms) = match self.shift {
            Some(sh) => {
                let v = _mm256_sll_epi16(s, sh);
                (v, v)
            }
            None => (_mm256_mullo_epi16(s, self.k), _mm256_mullo_epi16(s, self.m)),
        };
        let y = _mm256_add_epi16(ms, self.add);
        let q = _mm256_srl_epi16(mulhi(y, self.mul), self.post);
        _mm256_add_epi16(ks, q)
    }
}

/// Output rows of the column pass, each given as (add, sub, out): the window sums `a` (high
/// bytes) and `b` (low bytes) gain the intermediate row `add` and lose `sub` (wrapping u16:
/// the true sums fit; both biased as `Box8::col_biased` says), and `out` =
/// floor((A + floor((B + 128 n) / 256)) / n) (the module's header), one row after the other; along the row segment 16 samples at a time, the sums in
/// registers from row to row. Every row is `a.len()` samples long.
#[target_feature(enable = "avx2")]
unsafe fn column_rows(
    bx: &Box8,
    rows: &[(*const u16, *const u16, *mut u8)],
    a: &mut [u16],
    b: &mut [u16],
) {
    let n = a.len();
    assert!(b.len() == n);
    let low = _mm256_set1_epi16(0xff);
    let cmul = _mm256_set1_epi16(bx.col.mul as i16);
    let cpost = _mm_cvtsi32_si128(bx.col.shift as i32);
    let (qa, qb) = (a.as_mut_ptr(), b.as_mut_ptr());
    // Row (x, y)'s step of the sums (sa, sb) at i, and its 16 outputs as u16 lanes.
    let step = |sa: &mut __m256i, sb: &mut __m256i, add: *const u16, sub: *const u16, i| {
        let (x, y) = (
            _mm256_loadu_si256(add.add(i).cast()),
            _mm256_loadu_si256(sub.add(i).cast()),
        );
        *sa = _mm256_sub_epi16(
            _mm256_add_epi16(*sa, _mm256_srli_epi16(x, 8)),
            _mm256_srli_epi16(y, 8),
        );
        *sb = _mm256_sub_epi16(
            _mm256_add_epi16(*sb, _mm256_and_si256(x, low)),
            _mm256_and_si256(y, low),
        );
        let z = _mm256_add_epi16(*sa, _mm256_srli_epi16(*sb, 8));
        _mm256_srl_epi16(mulhi(z, cmul), cpost)
    };
    let mut i = 0;
    while i + 32 <= n {
        let load = |p: *mut u16| _mm256_loadu_si256(p.add(i).cast());
        let (mut a0, mut a1, mut b0, mut b1) =
            (load(qa), load(qa.add(16)), load(qb), load(qb.add(16)));
        for &(add, sub, out) in rows {
            let lo = step(&mut a0, &mut b0, add, sub, i);
            let hi = step(&mut a1, &mut b1, add, sub, i + 16);
            let bytes = _mm256_permute4x64_epi64(_mm256_packus_epi16(lo, hi), 0xd8);
            _mm256_storeu_si256(out.add(i).cast(), bytes);
        }
        let store = |p: *mut u16, v| _mm256_storeu_si256(p.add(i).cast(), v);
        store(qa, a0);
        store(qa.add(16), a1);
        store(qb, b0);
        store(qb.add(16), b1);
        i += 32;
    }
    for &(add, sub, out) in rows {
        for i in i..n {
            let (x, y) = (*add.add(i), *sub.add(i));
            a[i] = a[i].wrapping_add(x >> 8).wrapping_sub(y >> 8);
            b[i] = b[i].wrapping_add(x & 0xff).wrapping_sub(y & 0xff);
            *out.add(i) = bx.col_biased(a[i], b[i]);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every `Magic16` divides exactly, for every divisor a box makes and every dividend up to
    /// its bound (all of them, not a sample).
    #[test]
    fn magic16_divides_every_dividend_exactly() {
        let mut made = 0;
        for d in 1..=400u32 {
            for y_max in [255 * d, 383 * d, 65534, 65535] {
                let Some(mg) = Magic16::new(d, y_max) else {
                    continue;
                };
                made += 1;
                for y in 0..=y_max {
                    assert_eq!(mg.one(y), y / d, "{d} {y_max} {mg:?} at {y}");
                }
            }
        }
        assert!(made > 1000, "{made}");
    }

    /// Both passes' roundings equal the reference's formulas for every sum, at every radius
    /// for which a `Box8` is made; and it is made for the radii the batches use.
    #[test]
    fn box8_rounds_as_the_reference_for_every_sum() {
        let mut radii = Vec::new();
        for r in 0..=128u32 {
            let n = 2 * r + 1;
            let Some(bx) = Box8::new(n, (256, n / 2, n), (1, 128 * n, 256 * n)) else {
                continue;
            };
            radii.push(r);
            for s in 0..=255 * n {
                assert_eq!(bx.row_one(s) as u32, (256 * s + n / 2) / n, "r={r} S={s}");
            }
            // Column sums T = 256 A + B of n values h <= 65280 (so T <= 65280 n), with A and
            // B the sums of their bytes (each at most 255 n).
            for a in (0..=255 * n).step_by(1 + r as usize / 8) {
                for b in (0..=255 * n).step_by(7) {
                    let t = 256 * a + b;
                    if t > 65280 * n {
                        continue;
                    }
                    let want = (t + 128 * n) / (256 * n);
                    assert_eq!(bx.col_one(a as u16, b as u16) as u32, want, "r={r} {a} {b}");
                }
            }
        }
        assert_eq!(radii, (0..=85).collect::<Vec<_>>(), "radii with a Box8");
    }
}
