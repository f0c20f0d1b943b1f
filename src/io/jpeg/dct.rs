//! libjpeg-turbo's integer forward DCT (jfdctint.c, `islow`) and its quantisation by
//! reciprocals (jcdctmgr.c), 8 lanes of i32 at a time; AVX2 chosen at run time.

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
}

impl Divisors {
    /// `table` in natural (row-major) order; islow's outputs are scaled by 8.
    pub(crate) fn new(table: &[u16; 64]) -> Divisors {
        let mut d = Divisors {
            recip: [0; 64],
            corr: [0; 64],
            shift: [0; 64],
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

/// The AVX2 build: the same arithmetic in 256-bit registers, one register a row of 8 lanes,
/// transposed with unpacks and lane permutes.
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
    let recip: [__m256i; 8] = std::array::from_fn(|r| load(&div.recip[8 * r..]));
    let corr: [__m256i; 8] = std::array::from_fn(|r| load(&div.corr[8 * r..]));
    let shift: [__m256i; 8] = std::array::from_fn(|r| load(&div.shift[8 * r..]));
    let centre = _mm256_set1_epi32(128);
    for (b, o) in out.iter_mut().enumerate() {
        // v[r] = row r's samples less 128, a lane a column; transposed, lanes are rows.
        let v: [__m256i; 8] = std::array::from_fn(|r| {
            let p = plane.as_ptr().add(r * stride + b * 8);
            // SAFETY: 8 bytes at r * stride + 8b, within `plane` (asserted above).
            let bytes = _mm_loadl_epi64(p as *const __m128i);
            _mm256_sub_epi32(_mm256_cvtepu8_epi32(bytes), centre)
        });
        let p1 = dct_1d_avx2(&transpose_avx2(&v), true);
        let p2 = dct_1d_avx2(&transpose_avx2(&p1), false);
        // p2[k] is coefficients (k, 0..8): natural order, quantised in place.
        let mut q = [0i32; 64];
        for r in 0..8 {
            let a = _mm256_abs_epi32(p2[r]);
            let m = _mm256_mullo_epi32(_mm256_add_epi32(a, corr[r]), recip[r]);
            let m = _mm256_srlv_epi32(m, shift[r]);
            // Where x is 0, m is 0 too (corr * recip < 2^shift), so sign's zeroing agrees.
            let m = _mm256_sign_epi32(m, p2[r]);
            _mm256_storeu_si256(q.as_mut_ptr().add(8 * r) as *mut __m256i, m);
        }
        for (o, &z) in o.iter_mut().zip(super::huffman::ZIGZAG.iter()) {
            *o = q[z as usize] as i16;
        }
    }
}

#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn load(a: &[u32]) -> std::arch::x86_64::__m256i {
    use std::arch::x86_64::*;
    assert!(a.len() >= 8);
    // SAFETY: 8 u32 (asserted).
    _mm256_loadu_si256(a.as_ptr() as *const __m256i)
}

/// `transpose` of 8 registers of 8 lanes.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn transpose_avx2(r: &[std::arch::x86_64::__m256i; 8]) -> [std::arch::x86_64::__m256i; 8] {
    use std::arch::x86_64::*;
    let t0 = _mm256_unpacklo_epi32(r[0], r[1]);
    let t1 = _mm256_unpackhi_epi32(r[0], r[1]);
    let t2 = _mm256_unpacklo_epi32(r[2], r[3]);
    let t3 = _mm256_unpackhi_epi32(r[2], r[3]);
    let t4 = _mm256_unpacklo_epi32(r[4], r[5]);
    let t5 = _mm256_unpackhi_epi32(r[4], r[5]);
    let t6 = _mm256_unpacklo_epi32(r[6], r[7]);
    let t7 = _mm256_unpackhi_epi32(r[6], r[7]);
    let u0 = _mm256_unpacklo_epi64(t0, t2);
    let u1 = _mm256_unpackhi_epi64(t0, t2);
    let u2 = _mm256_unpacklo_epi64(t1, t3);
    let u3 = _mm256_unpackhi_epi64(t1, t3);
    let u4 = _mm256_unpacklo_epi64(t4, t6);
    let u5 = _mm256_unpackhi_epi64(t4, t6);
    let u6 = _mm256_unpacklo_epi64(t5, t7);
    let u7 = _mm256_unpackhi_epi64(t5, t7);
    [
        _mm256_permute2x128_si256(u0, u4, 0x20),
        _mm256_permute2x128_si256(u1, u5, 0x20),
        _mm256_permute2x128_si256(u2, u6, 0x20),
        _mm256_permute2x128_si256(u3, u7, 0x20),
        _mm256_permute2x128_si256(u0, u4, 0x31),
        _mm256_permute2x128_si256(u1, u5, 0x31),
        _mm256_permute2x128_si256(u2, u6, 0x31),
        _mm256_permute2x128_si256(u3, u7, 0x31),
    ]
}

/// `dct_1d` with a register for each input's 8 lanes.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn dct_1d_avx2(
    v: &[std::arch::x86_64::__m256i; 8],
    pass1: bool,
) -> [std::arch::x86_64::__m256i; 8] {
    use std::arch::x86_64::*;
    let add = |a, b| _mm256_add_epi32(a, b);
    let sub = |a, b| _mm256_sub_epi32(a, b);
    let mul = |a, k: i32| _mm256_mullo_epi32(a, _mm256_set1_epi32(k));
    let down = if pass1 {
        CONST_BITS - PASS1_BITS
    } else {
        CONST_BITS + PASS1_BITS
    };
    let round = _mm256_set1_epi32(1 << (down - 1));
    let descale = |x| _mm256_sra_epi32(add(x, round), _mm_cvtsi32_si128(down));
    let tmp0 = add(v[0], v[7]);
    let tmp7 = sub(v[0], v[7]);
    let tmp1 = add(v[1], v[6]);
    let tmp6 = sub(v[1], v[6]);
    let tmp2 = add(v[2], v[5]);
    let tmp5 = sub(v[2], v[5]);
    let tmp3 = add(v[3], v[4]);
    let tmp4 = sub(v[3], v[4]);

    let tmp10 = add(tmp0, tmp3);
    let tmp13 = sub(tmp0, tmp3);
    let tmp11 = add(tmp1, tmp2);
    let tmp12 = sub(tmp1, tmp2);
    let mut out = [_mm256_setzero_si256(); 8];
    if pass1 {
        out[0] = _mm256_slli_epi32(add(tmp10, tmp11), PASS1_BITS);
        out[4] = _mm256_slli_epi32(sub(tmp10, tmp11), PASS1_BITS);
    } else {
        let r = _mm256_set1_epi32(1 << (PASS1_BITS - 1));
        out[0] = _mm256_srai_epi32(add(add(tmp10, tmp11), r), PASS1_BITS);
        out[4] = _mm256_srai_epi32(add(sub(tmp10, tmp11), r), PASS1_BITS);
    }
    let z1 = mul(add(tmp12, tmp13), FIX_0_541196100);
    out[2] = descale(add(z1, mul(tmp13, FIX_0_765366865)));
    out[6] = descale(sub(z1, mul(tmp12, FIX_1_847759065)));

    let z1 = add(tmp4, tmp7);
    let z2 = add(tmp5, tmp6);
    let z3 = add(tmp4, tmp6);
    let z4 = add(tmp5, tmp7);
    let z5 = mul(add(z3, z4), FIX_1_175875602);
    let tmp4 = mul(tmp4, FIX_0_298631336);
    let tmp5 = mul(tmp5, FIX_2_053119869);
    let tmp6 = mul(tmp6, FIX_3_072711026);
    let tmp7 = mul(tmp7, FIX_1_501321110);
    let z1 = mul(z1, -FIX_0_899976223);
    let z2 = mul(z2, -FIX_2_562915447);
    let z3 = add(mul(z3, -FIX_1_961570560), z5);
    let z4 = add(mul(z4, -FIX_0_390180644), z5);
    out[7] = descale(add(add(tmp4, z1), z3));
    out[5] = descale(add(add(tmp5, z2), z4));
    out[3] = descale(add(add(tmp6, z2), z3));
    out[1] = descale(add(add(tmp7, z1), z4));
    out
}
