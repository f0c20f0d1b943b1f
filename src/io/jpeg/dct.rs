//! libjpeg-turbo's integer forward DCT (jfdctint.c, `islow`) and its quantisation by
//! reciprocals (jcdctmgr.c): portable in 32-bit lanes, and where the CPU has AVX2 in 16-bit
//! lanes with `pmaddwd` as libjpeg-turbo's jfdctint-avx2.asm and jquanti-avx2.asm do (the
//! same integers: every product and sum there fits its lane).

#[cfg(target_arch = "x86_64")]
use crate::simd::mulhi_epu16;

/// jfdctint.c's constants, FIX(x) = round(x * 2^13).
const CONST_BITS: i32 = 13;
const PASS1_BITS: i32 = 2;
const FIX_0_298631336: i32 = 2446;
const FIX_0_390180644: i32 = 3196;
const FIX_0_541196100: i32 = 4433;
const FIX_0_765366865: i32 = 6270;
const FIX_0_899976223: i32 = 7373;
const FIX_1_175875602: i32 = 9633;
const FIX_1_501321110: i32 = 12299;
const FIX_1_847759065: i32 = 15137;
const FIX_1_961570560: i32 = 16069;
const FIX_2_053119869: i32 = 16819;
const FIX_2_562915447: i32 = 20995;
const FIX_3_072711026: i32 = 25172;

type Lanes = [i32; 8];

/// One 1-D DCT over 8 lanes at once: `v[k][lane]` is input k of the lane's transform; the
/// result `out[k][lane]` is output k, shifted left by `up` (DC and 4) or descaled by `down`.
#[inline(always)]
fn dct_1d(v: &[Lanes; 8], out: &mut [Lanes; 8], pass1: bool) {
    let down = if pass1 {
        CONST_BITS - PASS1_BITS
    } else {
        CONST_BITS + PASS1_BITS
    };
    let round = 1 << (down - 1);
    for l in 0..8 {
        let tmp0 = v[0][l] + v[7][l];
        let tmp7 = v[0][l] - v[7][l];
        let tmp1 = v[1][l] + v[6][l];
        let tmp6 = v[1][l] - v[6][l];
        let tmp2 = v[2][l] + v[5][l];
        let tmp5 = v[2][l] - v[5][l];
        let tmp3 = v[3][l] + v[4][l];
        let tmp4 = v[3][l] - v[4][l];

        let tmp10 = tmp0 + tmp3;
        let tmp13 = tmp0 - tmp3;
        let tmp11 = tmp1 + tmp2;
        let tmp12 = tmp1 - tmp2;
        if pass1 {
            out[0][l] = (tmp10 + tmp11) << PASS1_BITS;
            out[4][l] = (tmp10 - tmp11) << PASS1_BITS;
        } else {
            let r = 1 << (PASS1_BITS - 1);
            out[0][l] = (tmp10 + tmp11 + r) >> PASS1_BITS;
            out[4][l] = (tmp10 - tmp11 + r) >> PASS1_BITS;
        }
        let z1 = (tmp12 + tmp13) * FIX_0_541196100;
        out[2][l] = (z1 + tmp13 * FIX_0_765366865 + round) >> down;
        out[6][l] = (z1 - tmp12 * FIX_1_847759065 + round) >> down;

        let z1 = tmp4 + tmp7;
        let z2 = tmp5 + tmp6;
        let z3 = tmp4 + tmp6;
        let z4 = tmp5 + tmp7;
        let z5 = (z3 + z4) * FIX_1_175875602;
        let tmp4 = tmp4 * FIX_0_298631336;
        let tmp5 = tmp5 * FIX_2_053119869;
        let tmp6 = tmp6 * FIX_3_072711026;
        let tmp7 = tmp7 * FIX_1_501321110;
        let z1 = z1 * -FIX_0_899976223;
        let z2 = z2 * -FIX_2_562915447;
        let z3 = z3 * -FIX_1_961570560 + z5;
        let z4 = z4 * -FIX_0_390180644 + z5;
        out[7][l] = (tmp4 + z1 + z3 + round) >> down;
        out[5][l] = (tmp5 + z2 + z4 + round) >> down;
        out[3][l] = (tmp6 + z2 + z3 + round) >> down;
        out[1][l] = (tmp7 + z1 + z4 + round) >> down;
    }
}

#[inline(always)]
fn transpose(a: &[Lanes; 8]) -> [Lanes; 8] {
    let mut t = [[0; 8]; 8];
    for (r, row) in a.iter().enumerate() {
        for (c, &x) in row.iter().enumerate() {
            t[c][r] = x;
        }
    }
    t
}

/// The divisors of one quantisation table as jcdctmgr.c's `compute_reciprocal` makes them
/// for libjpeg-turbo's SIMD builds (16-bit DCTELEM): q = ((|x| + corr) * recip) >> shift.
#[derive(Clone, Copy)]
pub(crate) struct Divisors {
    recip: [u32; 64],
    corr: [u32; 64],
    shift: [u32; 64],
    /// The same in 16-bit lanes, as jsimd_quantize_avx2 reads them: q = mulhi(mulhi(|x| +
    /// corr, recip), scale) with scale = 2^(32 - shift), that is ((|x| + corr) * recip) >>
    /// shift (shift is 18 to 26).
    #[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
    recip16: [u16; 64],
    #[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
    corr16: [u16; 64],
    #[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
    scale16: [u16; 64],
}

impl Divisors {
    /// `table` in natural (row-major) order; islow's outputs are scaled by 8.
    pub(crate) fn new(table: &[u16; 64]) -> Divisors {
        let mut d = Divisors {
            recip: [0; 64],
            corr: [0; 64],
            shift: [0; 64],
            recip16: [0; 64],
            corr16: [0; 64],
            scale16: [0; 64],
        };
        for (i, &q) in table.iter().enumerate() {
            let divisor = u32::from(q) << 3;
            let b = 31 - divisor.leading_zeros();
            let mut r = 16 + b;
            let mut fq = (1u64 << r) / u64::from(divisor);
            let fr = (1u64 << r) % u64::from(divisor);
            let mut c = divisor / 2;
            if fr == 0 {
                fq >>= 1;
                r -= 1;
            } else if fr <= u64::from(divisor / 2) {
                c += 1;
            } else {
                fq += 1;
            }
            d.recip[i] = fq as u32;
            d.corr[i] = c;
            d.shift[i] = r;
            // Divisors 8 to 2040: fq below 2^16, c below 2^10, r 18 to 26.
            d.recip16[i] = fq as u16;
            d.corr16[i] = c as u16;
            d.scale16[i] = 1 << (32 - r);
        }
        d
    }

    /// Each coefficient's (reciprocal, correction, shift, 0), natural order: the GPU
    /// encoder's copy (wgsl/encode_dct.wgsl).
    pub(crate) fn words(&self) -> [[u32; 4]; 64] {
        std::array::from_fn(|i| [self.recip[i], self.corr[i], self.shift[i], 0])
    }
}

/// Forward DCT and quantisation of one 8x8 block of samples (`rows[r][c]`, 0 to 255), the
/// quantised coefficients in zigzag order (as the entropy coder reads them).
#[inline(always)]
fn block_body(rows: &[[u8; 8]; 8], div: &Divisors, out: &mut [i16; 64]) {
    // Pass 1 (rows) wants lanes = rows: load rows as lanes of columns, then transpose.
    let mut v = [[0i32; 8]; 8];
    for (r, row) in rows.iter().enumerate() {
        for c in 0..8 {
            v[r][c] = i32::from(row[c]) - 128;
        }
    }
    let v = transpose(&v);
    let mut p1 = [[0i32; 8]; 8];
    dct_1d(&v, &mut p1, true);
    // p1[k][row] is row `row`'s output k; pass 2 (columns) wants lanes = columns.
    let cols = transpose(&p1);
    let mut p2 = [[0i32; 8]; 8];
    dct_1d(&cols, &mut p2, false);
    // p2[k][col] is coefficient (k, col): natural order.
    let mut q = [0i16; 64];
    for (i, (&x, q)) in p2.as_flattened().iter().zip(q.iter_mut()).enumerate() {
        let a = x.unsigned_abs();
        let m = (((a + div.corr[i]) * div.recip[i]) >> div.shift[i]) as i32;
        *q = if x < 0 { -m } else { m } as i16;
    }
    for (o, &z) in out.iter_mut().zip(super::huffman::ZIGZAG.iter()) {
        *o = q[z as usize];
    }
}

/// Forward DCT and quantisation of one row of blocks: `plane` starts at the row's top-left
/// sample, `stride` apart, `out.len()` blocks across. The AVX2 build of the same code runs
/// where the CPU has it.
pub(super) fn block_row(plane: &[u8], stride: usize, div: &Divisors, out: &mut [[i16; 64]]) {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: AVX2 is present (checked just above).
        unsafe { block_row_avx2(plane, stride, div, out) };
        return;
    }
    block_row_scalar(plane, stride, div, out);
}

#[inline(always)]
fn block_row_body(plane: &[u8], stride: usize, div: &Divisors, out: &mut [[i16; 64]]) {
    let mut rows = [[0u8; 8]; 8];
    for (b, o) in out.iter_mut().enumerate() {
        for (r, row) in rows.iter_mut().enumerate() {
            let at = r * stride + b * 8;
            row.copy_from_slice(&plane[at..at + 8]);
        }
        block_body(&rows, div, o);
    }
}

/// The portable build (and the twin the AVX2 build is tested against).
pub(super) fn block_row_scalar(plane: &[u8], stride: usize, div: &Divisors, out: &mut [[i16; 64]]) {
    block_row_body(plane, stride, div, out);
}

/// The AVX2 build, jfdctint-avx2.asm's and jquanti-avx2.asm's steps: a block in four
/// registers of 16 lanes of i16, two rows each; each pass transposes, then pairs the
/// butterflies' terms for `pmaddwd` (the constants distributed over them, exact in
/// integers). The quantised rows are put into zigzag order with in-lane byte shuffles.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
pub(super) unsafe fn block_row_avx2(
    plane: &[u8],
    stride: usize,
    div: &Divisors,
    out: &mut [[i16; 64]],
) {
    use std::arch::x86_64::*;
    assert!(out.is_empty() || plane.len() >= 7 * stride + 8 * out.len());
    let load16 = |a: &[u16; 64], r: usize| {
        // SAFETY: 16 u16 from 16r, r < 4: within the 64.
        unsafe { _mm256_loadu_si256(a.as_ptr().add(16 * r) as *const __m256i) }
    };
    let recip: [__m256i; 4] = std::array::from_fn(|r| load16(&div.recip16, r));
    let corr: [__m256i; 4] = std::array::from_fn(|r| load16(&div.corr16, r));
    let scale: [__m256i; 4] = std::array::from_fn(|r| load16(&div.scale16, r));
    let centre = _mm256_set1_epi16(-128);
    for (b, o) in out.iter_mut().enumerate() {
        let p = plane.as_ptr().add(8 * b);
        // Rows r and r + 4 of the block, less 128: (r0 | r4), (r1 | r5), (r2 | r6), (r3 | r7).
        let pair = |r: usize| {
            // SAFETY: 8 bytes at r * stride + 8b and at (r + 4) * stride + 8b, r < 4: within
            // `plane` (asserted above).
            unsafe {
                let a = _mm_loadl_epi64(p.add(r * stride) as *const __m128i);
                let c = _mm_loadl_epi64(p.add((r + 4) * stride) as *const __m128i);
                _mm256_add_epi16(_mm256_cvtepu8_epi16(_mm_unpacklo_epi64(a, c)), centre)
            }
        };
        // Pass 1, the rows: lanes are rows, data1_0 = (input 1 | input 0) and so on.
        let [d10, d32, d45, d67] = transpose16([pair(0), pair(1), pair(2), pair(3)]);
        let [d04, d31, d26, d75] = dct_1d_avx2::<true>(d10, d32, d45, d67);
        // Pass 2, the columns: pass 1's outputs k as rows, transposed again.
        let d37 = _mm256_permute2x128_si256::<0x20>(d31, d75);
        let d15 = _mm256_permute2x128_si256::<0x31>(d31, d75);
        let [d10, d32, d45, d67] = transpose16([d04, d15, d26, d37]);
        let [d04, d31, d26, d75] = dct_1d_avx2::<false>(d10, d32, d45, d67);
        // Coefficient rows (0 | 1), (2 | 3), (4 | 5), (6 | 7): natural order, quantised.
        let rows = [
            _mm256_permute2x128_si256::<0x30>(d04, d31),
            _mm256_permute2x128_si256::<0x20>(d26, d31),
            _mm256_permute2x128_si256::<0x31>(d04, d75),
            _mm256_permute2x128_si256::<0x21>(d26, d75),
        ];
        let q: [__m256i; 4] = std::array::from_fn(|i| {
            let a = _mm256_add_epi16(_mm256_abs_epi16(rows[i]), corr[i]);
            let a = mulhi_epu16(mulhi_epu16(a, recip[i]), scale[i]);
            // Where x is 0, a is 0 too (corr * recip < 2^shift), so sign's zeroing agrees.
            _mm256_sign_epi16(a, rows[i])
        });
        let swapped: [__m256i; 4] = std::array::from_fn(|i| _mm256_permute4x64_epi64::<0x4E>(q[i]));
        let dst = o.as_mut_ptr() as *mut __m256i;
        for (k, masks) in ZIGZAG_MASKS.iter().enumerate() {
            let mut acc = _mm256_setzero_si256();
            for i in 0..4 {
                for (s, src) in [q[i], swapped[i]].into_iter().enumerate() {
                    if ZIGZAG_USED[k][i][s] {
                        let m = _mm256_loadu_si256(masks[i][s].as_ptr() as *const __m256i);
                        acc = _mm256_or_si256(acc, _mm256_shuffle_epi8(src, m));
                    }
                }
            }
            // SAFETY: 16 i16 from 16k, k < 4: within the block.
            _mm256_storeu_si256(dst.add(k), acc);
        }
    }
}

/// For zigzag positions 16k to 16k + 15 (register k of a block in zigzag order) and the
/// natural-order register i (coefficients 16i to 16i + 15): the `pshufb` masks that pick i's
/// coefficients bound for k, from i as it is ([k][i][0]) and from i with its 128-bit halves
/// swapped ([k][i][1], for those crossing halves); 0x80 (a zero) everywhere else.
#[cfg(target_arch = "x86_64")]
static ZIGZAG_MASKS: [[[[u8; 32]; 2]; 4]; 4] = zigzag_masks();

/// Which of `ZIGZAG_MASKS` pick anything (24 of the 32).
#[cfg(target_arch = "x86_64")]
const ZIGZAG_USED: [[[bool; 2]; 4]; 4] = zigzag_used();

#[cfg(target_arch = "x86_64")]
const fn zigzag_masks() -> [[[[u8; 32]; 2]; 4]; 4] {
    let mut m = [[[[0x80u8; 32]; 2]; 4]; 4];
    let mut z = 0;
    while z < 64 {
        let n = super::huffman::ZIGZAG[z] as usize;
        let (k, j) = (z / 16, z % 16);
        let (i, p) = (n / 16, n % 16);
        // Lane j / 8 of the output reads lane j / 8 of its source: i itself where n sits in
        // that half, i swapped where it sits in the other.
        let s = if j / 8 == p / 8 { 0 } else { 1 };
        m[k][i][s][2 * j] = 2 * (p % 8) as u8;
        m[k][i][s][2 * j + 1] = 2 * (p % 8) as u8 + 1;
        z += 1;
    }
    m
}

#[cfg(target_arch = "x86_64")]
const fn zigzag_used() -> [[[bool; 2]; 4]; 4] {
    let masks = zigzag_masks();
    let mut used = [[[false; 2]; 4]; 4];
    let mut z = 0;
    while z < 4 * 4 * 2 * 32 {
        let (k, i, s, b) = (z / 256, z / 64 % 4, z / 32 % 2, z % 32);
        if masks[k][i][s][b] != 0x80 {
            used[k][i][s] = true;
        }
        z += 1;
    }
    used
}

/// jfdctint-avx2.asm's DOTRANSPOSE: (r0 | r4), (r1 | r5), (r2 | r6), (r3 | r7), rows of 8
/// i16, to (c1 | c0), (c3 | c2), (c4 | c5), (c6 | c7), their columns.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn transpose16(r: [std::arch::x86_64::__m256i; 4]) -> [std::arch::x86_64::__m256i; 4] {
    use std::arch::x86_64::*;
    let t0 = _mm256_unpacklo_epi16(r[0], r[1]);
    let t1 = _mm256_unpackhi_epi16(r[0], r[1]);
    let t2 = _mm256_unpacklo_epi16(r[2], r[3]);
    let t3 = _mm256_unpackhi_epi16(r[2], r[3]);
    [
        _mm256_permute4x64_epi64::<0x8D>(_mm256_unpacklo_epi32(t0, t2)),
        _mm256_permute4x64_epi64::<0x8D>(_mm256_unpackhi_epi32(t0, t2)),
        _mm256_permute4x64_epi64::<0xD8>(_mm256_unpacklo_epi32(t1, t3)),
        _mm256_permute4x64_epi64::<0xD8>(_mm256_unpackhi_epi32(t1, t3)),
    ]
}

/// Pairs of 16-bit constants, (a0, b0) repeated through the low 128-bit half and (a1, b1)
/// through the high one: `pmaddwd`'s weights for interleaved (x, y) terms.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn weights(a0: i32, b0: i32, a1: i32, b1: i32) -> std::arch::x86_64::__m256i {
    use std::arch::x86_64::*;
    let (a0, b0, a1, b1) = (a0 as i16, b0 as i16, a1 as i16, b1 as i16);
    _mm256_setr_epi16(
        a0, b0, a0, b0, a0, b0, a0, b0, a1, b1, a1, b1, a1, b1, a1, b1,
    )
}

/// jfdctint-avx2.asm's DODCT: `dct_1d` over 8 lanes, inputs k paired in registers as
/// transpose16 leaves them; returns data0_4, data3_1, data2_6, data7_5 (outputs (0 | 4) and
/// so on), descaled for pass 1 (`PASS1`) or pass 2.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn dct_1d_avx2<const PASS1: bool>(
    d10: std::arch::x86_64::__m256i,
    d32: std::arch::x86_64::__m256i,
    d45: std::arch::x86_64::__m256i,
    d67: std::arch::x86_64::__m256i,
) -> [std::arch::x86_64::__m256i; 4] {
    use std::arch::x86_64::*;
    let swap = |x| _mm256_permute2x128_si256::<0x01>(x, x);
    let descale = |x| {
        if PASS1 {
            let r = _mm256_set1_epi32(1 << (CONST_BITS - PASS1_BITS - 1));
            _mm256_srai_epi32::<{ CONST_BITS - PASS1_BITS }>(_mm256_add_epi32(x, r))
        } else {
            let r = _mm256_set1_epi32(1 << (CONST_BITS + PASS1_BITS - 1));
            _mm256_srai_epi32::<{ CONST_BITS + PASS1_BITS }>(_mm256_add_epi32(x, r))
        }
    };
    let tmp67 = _mm256_sub_epi16(d10, d67);
    let tmp10 = _mm256_add_epi16(d10, d67);
    let tmp32 = _mm256_add_epi16(d32, d45);
    let tmp45 = _mm256_sub_epi16(d32, d45);

    // Even part: data0 = tmp10 + tmp11, data4 = tmp10 - tmp11; data2 = tmp13 * (0.541 +
    // 0.765) + tmp12 * 0.541, data6 = tmp13 * 0.541 + tmp12 * (0.541 - 1.848).
    let tmp01 = swap(tmp10);
    let tmp10_11 = _mm256_add_epi16(tmp01, tmp32);
    let tmp13_12 = _mm256_sub_epi16(tmp01, tmp32);
    let signs = _mm256_setr_epi16(1, 1, 1, 1, 1, 1, 1, 1, -1, -1, -1, -1, -1, -1, -1, -1);
    let sum = _mm256_add_epi16(swap(tmp10_11), _mm256_sign_epi16(tmp10_11, signs));
    let d04 = if PASS1 {
        _mm256_slli_epi16::<PASS1_BITS>(sum)
    } else {
        let r = _mm256_set1_epi16(1 << (PASS1_BITS - 1));
        _mm256_srai_epi16::<PASS1_BITS>(_mm256_add_epi16(sum, r))
    };
    let tmp12_13 = swap(tmp13_12);
    let w = weights(
        FIX_0_541196100 + FIX_0_765366865,
        FIX_0_541196100,
        FIX_0_541196100 - FIX_1_847759065,
        FIX_0_541196100,
    );
    let lo = _mm256_madd_epi16(_mm256_unpacklo_epi16(tmp13_12, tmp12_13), w);
    let hi = _mm256_madd_epi16(_mm256_unpackhi_epi16(tmp13_12, tmp12_13), w);
    let d26 = _mm256_packs_epi32(descale(lo), descale(hi));

    // Odd part: z3 = z3 * (1.176 - 1.962) + z4 * 1.176, z4 = z3 * 1.176 + z4 * (1.176 -
    // 0.390); tmp4 = tmp4 * (0.299 - 0.900) + tmp7 * -0.900 and so on (jfdctint-avx2.asm).
    let z34 = _mm256_add_epi16(tmp45, tmp67);
    let z43 = swap(z34);
    let w = weights(
        FIX_1_175875602 - FIX_1_961570560,
        FIX_1_175875602,
        FIX_1_175875602 - FIX_0_390180644,
        FIX_1_175875602,
    );
    let z34_lo = _mm256_madd_epi16(_mm256_unpacklo_epi16(z34, z43), w);
    let z34_hi = _mm256_madd_epi16(_mm256_unpackhi_epi16(z34, z43), w);

    let tmp76 = swap(tmp67);
    let w = weights(
        FIX_0_298631336 - FIX_0_899976223,
        -FIX_0_899976223,
        FIX_2_053119869 - FIX_2_562915447,
        -FIX_2_562915447,
    );
    let lo = _mm256_madd_epi16(_mm256_unpacklo_epi16(tmp45, tmp76), w);
    let hi = _mm256_madd_epi16(_mm256_unpackhi_epi16(tmp45, tmp76), w);
    let d75 = _mm256_packs_epi32(
        descale(_mm256_add_epi32(lo, z34_lo)),
        descale(_mm256_add_epi32(hi, z34_hi)),
    );

    let tmp54 = swap(tmp45);
    let w = weights(
        FIX_3_072711026 - FIX_2_562915447,
        -FIX_2_562915447,
        FIX_1_501321110 - FIX_0_899976223,
        -FIX_0_899976223,
    );
    let lo = _mm256_madd_epi16(_mm256_unpacklo_epi16(tmp67, tmp54), w);
    let hi = _mm256_madd_epi16(_mm256_unpackhi_epi16(tmp67, tmp54), w);
    let d31 = _mm256_packs_epi32(
        descale(_mm256_add_epi32(lo, z34_lo)),
        descale(_mm256_add_epi32(hi, z34_hi)),
    );
    [d04, d31, d26, d75]
}
