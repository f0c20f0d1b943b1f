//! The encoder's samples, one MCU row at a time: jccolor.c's fixed-point RGB to YCbCr,
//! jcsample.c's downsampling (alternating rounding bias) and libjpeg's edge expansion (the
//! last column and row repeated to whole blocks; a subsampled plane's last row repeated to
//! whole MCUs). A strip is small enough to stay in cache until the DCT reads it, and no
//! image-sized plane is ever made.

/// A component's samples in one MCU row, `stride` across (at least its blocks' width).
pub(super) struct Plane {
    pub data: Vec<u8>,
    pub stride: usize,
}

/// jccolor.c's `rgb_ycc_convert` for one row of `rgb`: FIX(x) = round(x * 2^16).
#[inline(always)]
pub(super) fn convert_row(rgb: &[u8], y: &mut [u8], cb: &mut [u8], cr: &mut [u8]) {
    const HALF: i32 = 1 << 15;
    const OFFSET: i32 = (128 << 16) + HALF - 1;
    for (((p, y), cb), cr) in rgb
        .chunks_exact(3)
        .zip(y.iter_mut())
        .zip(cb.iter_mut())
        .zip(cr.iter_mut())
    {
        let (r, g, b) = (i32::from(p[0]), i32::from(p[1]), i32::from(p[2]));
        *y = ((19595 * r + 38470 * g + 7471 * b + HALF) >> 16) as u8;
        *cb = ((-11059 * r - 21709 * g + 32768 * b + OFFSET) >> 16) as u8;
        *cr = ((32768 * r - 27439 * g - 5329 * b + OFFSET) >> 16) as u8;
    }
}

/// `convert_row`, by AVX2 where `AVX2` (only inside a build with it).
#[inline(always)]
fn convert<const AVX2: bool>(rgb: &[u8], y: &mut [u8], cb: &mut [u8], cr: &mut [u8]) {
    #[cfg(target_arch = "x86_64")]
    if AVX2 {
        // SAFETY: AVX2 builds run only where the CPU has AVX2 (`Strips::fill`).
        unsafe { convert_row_avx2(rgb, y, cb, cr) };
        return;
    }
    convert_row(rgb, y, cb, cr);
}

/// `convert_row` 32 pixels at a time in 16-bit lanes, as jccolext-avx2.asm does: the
/// pixels' R, G and B gathered with byte shuffles (pixels 0 to 15 in the low 128-bit half, 16
/// to 31 in the high), each output's three products summed by two `pmaddwd` of interleaved
/// pairs (G's 38470 split as 22086 + 16384 to fit 16 bits, the chroma's 32768 a shift). The
/// same integers as the scalar code; the last `w % 32` pixels go through it.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
pub(super) unsafe fn convert_row_avx2(rgb: &[u8], y: &mut [u8], cb: &mut [u8], cr: &mut [u8]) {
    use std::arch::x86_64::*;
    let n = (rgb.len() / 3).min(y.len()).min(cb.len()).min(cr.len());
    let whole = n / 32 * 32;
    let mask = |c: usize, s: usize| {
        // SAFETY: 16 bytes of a 16-byte array.
        let m = unsafe { _mm_loadu_si128(RGB_MASKS[c][s].as_ptr() as *const __m128i) };
        _mm256_broadcastsi128_si256(m)
    };
    let masks: [[__m256i; 3]; 3] = std::array::from_fn(|c| std::array::from_fn(|s| mask(c, s)));
    let zero = _mm256_setzero_si256();
    for k in (0..whole).step_by(32) {
        // Bytes 16s to 16s + 15 of pixels k to k + 15 (low half) and of k + 16 to k + 31.
        let src: [__m256i; 3] = std::array::from_fn(|s| {
            // SAFETY: bytes 3k + 16s to 3k + 48 + 16s + 15, within 3k + 96 <= 3n.
            unsafe {
                let p = rgb.as_ptr().add(3 * k + 16 * s);
                _mm256_loadu2_m128i(p.add(48) as *const __m128i, p as *const __m128i)
            }
        });
        let [r, g, b] = masks.map(|m| {
            _mm256_or_si256(
                _mm256_or_si256(
                    _mm256_shuffle_epi8(src[0], m[0]),
                    _mm256_shuffle_epi8(src[1], m[1]),
                ),
                _mm256_shuffle_epi8(src[2], m[2]),
            )
        });
        // Pixels 0 to 7 and 16 to 23 (lo), 8 to 15 and 24 to 31 (hi), in 16-bit lanes.
        let wide = |x| (_mm256_unpacklo_epi8(x, zero), _mm256_unpackhi_epi8(x, zero));
        let ((r0, r1), (g0, g1), (b0, b1)) = (wide(r), wide(g), wide(b));
        let (y0, cb0, cr0) = ycc16(r0, g0, b0);
        let (y1, cb1, cr1) = ycc16(r1, g1, b1);
        // SAFETY: 32 bytes from k in each output (k + 32 <= n).
        for (plane, (lo, hi)) in [
            (&mut *y, (y0, y1)),
            (&mut *cb, (cb0, cb1)),
            (&mut *cr, (cr0, cr1)),
        ] {
            let bytes = _mm256_packus_epi16(lo, hi);
            _mm256_storeu_si256(plane.as_mut_ptr().add(k) as *mut __m256i, bytes);
        }
    }
    convert_row(
        &rgb[3 * whole..3 * n],
        &mut y[whole..n],
        &mut cb[whole..n],
        &mut cr[whole..n],
    );
}

/// jccolor.c's three sums for 16 pixels in 16-bit lanes (0 to 255): Y, Cb, Cr, 0 to 255 in
/// 16-bit lanes, in the same order.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn ycc16(
    r: std::arch::x86_64::__m256i,
    g: std::arch::x86_64::__m256i,
    b: std::arch::x86_64::__m256i,
) -> (
    std::arch::x86_64::__m256i,
    std::arch::x86_64::__m256i,
    std::arch::x86_64::__m256i,
) {
    use std::arch::x86_64::*;
    let pairs = |a: i16, b: i16| _mm256_set1_epi32(i32::from(a) & 0xFFFF | i32::from(b) << 16);
    let half = _mm256_set1_epi32(1 << 15);
    let offset = _mm256_set1_epi32((128 << 16) + (1 << 15) - 1);
    let zero = _mm256_setzero_si256();
    let (rg_lo, rg_hi) = (_mm256_unpacklo_epi16(r, g), _mm256_unpackhi_epi16(r, g));
    let (bg_lo, bg_hi) = (_mm256_unpacklo_epi16(b, g), _mm256_unpackhi_epi16(b, g));
    let (gb_lo, gb_hi) = (_mm256_unpacklo_epi16(g, b), _mm256_unpackhi_epi16(g, b));
    let y_of = |rg, bg| {
        let s = _mm256_add_epi32(
            _mm256_madd_epi16(rg, pairs(19595, 22086)),
            _mm256_madd_epi16(bg, pairs(7471, 16384)),
        );
        _mm256_srli_epi32::<16>(_mm256_add_epi32(s, half))
    };
    // The chroma: the two small products by pmaddwd, the 32768 one a shift by 15.
    let c_of = |pair, w, x| {
        let s = _mm256_add_epi32(_mm256_madd_epi16(pair, w), _mm256_slli_epi32::<15>(x));
        _mm256_srli_epi32::<16>(_mm256_add_epi32(s, offset))
    };
    let (w_cb, w_cr) = (pairs(-11059, -21709), pairs(-27439, -5329));
    let (b_lo, b_hi) = (
        _mm256_unpacklo_epi16(b, zero),
        _mm256_unpackhi_epi16(b, zero),
    );
    let (r_lo, r_hi) = (
        _mm256_unpacklo_epi16(r, zero),
        _mm256_unpackhi_epi16(r, zero),
    );
    (
        _mm256_packs_epi32(y_of(rg_lo, bg_lo), y_of(rg_hi, bg_hi)),
        _mm256_packs_epi32(c_of(rg_lo, w_cb, b_lo), c_of(rg_hi, w_cb, b_hi)),
        _mm256_packs_epi32(c_of(gb_lo, w_cr, r_lo), c_of(gb_hi, w_cr, r_hi)),
    )
}

/// `pshufb` masks gathering channel c (R, G, B) of 16 RGB pixels from their s-th 16 bytes
/// (s = 0, 1, 2) into byte i = pixel i; 0x80 (a zero) where the pixel's byte is elsewhere.
/// Applied to both 128-bit halves (two groups of 16 pixels) at once.
#[cfg(target_arch = "x86_64")]
static RGB_MASKS: [[[u8; 16]; 3]; 3] = rgb_masks();

#[cfg(target_arch = "x86_64")]
const fn rgb_masks() -> [[[u8; 16]; 3]; 3] {
    let mut m = [[[0x80u8; 16]; 3]; 3];
    let mut c = 0;
    while c < 3 {
        let mut i = 0;
        while i < 16 {
            let at = 3 * i + c;
            m[c][at / 16][i] = (at % 16) as u8;
            i += 1;
        }
        c += 1;
    }
    m
}

/// `downsample_row`, by AVX2 where `AVX2` (only inside a build with it).
#[inline(always)]
fn downsample<const AVX2: bool>(a: &[u8], b: Option<&[u8]>, out: &mut [u8]) {
    #[cfg(target_arch = "x86_64")]
    if AVX2 {
        // SAFETY: AVX2 builds run only where the CPU has AVX2 (`Strips::fill`).
        unsafe { downsample_row_avx2(a, b, out) };
        return;
    }
    downsample_row(a, b, out);
}

/// `downsample_row` 16 outputs at a time, as jcsample-avx2.asm does: each pair's sum by
/// `pmaddubsw` with ones, the rows' sums added, the bias added, shifted. The last
/// `out.len() % 16` outputs go through the scalar code.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
pub(super) unsafe fn downsample_row_avx2(a: &[u8], b: Option<&[u8]>, out: &mut [u8]) {
    use std::arch::x86_64::*;
    let n = out.len();
    let a = &a[..2 * n];
    let b = b.map(|b| &b[..2 * n]);
    let whole = n / 16 * 16;
    let ones = _mm256_set1_epi8(1);
    let load = |row: &[u8], j: usize| {
        // SAFETY: 32 bytes from 2j, j + 16 <= n: within the row's 2n.
        unsafe { _mm256_loadu_si256(row.as_ptr().add(2 * j) as *const __m256i) }
    };
    for j in (0..whole).step_by(16) {
        let sum = _mm256_maddubs_epi16(load(a, j), ones);
        let v = match b {
            None => _mm256_srli_epi16::<1>(_mm256_add_epi16(sum, _mm256_set1_epi32(1 << 16))),
            Some(b) => {
                let sum = _mm256_add_epi16(sum, _mm256_maddubs_epi16(load(b, j), ones));
                let bias = _mm256_set1_epi32(1 | 2 << 16);
                _mm256_srli_epi16::<2>(_mm256_add_epi16(sum, bias))
            }
        };
        let p = _mm256_permute4x64_epi64::<0x08>(_mm256_packus_epi16(v, v));
        // SAFETY: 16 bytes from j, j + 16 <= n.
        _mm_storeu_si128(
            out.as_mut_ptr().add(j) as *mut __m128i,
            _mm256_castsi256_si128(p),
        );
    }
    downsample_row(
        &a[2 * whole..],
        b.map(|b| &b[2 * whole..]),
        &mut out[whole..],
    );
}

/// jcsample.c's `h2v1_downsample` (`b` None) and `h2v2_downsample` of one output row: each
/// sample the mean of its 2 or 4 inputs, rounded with a bias alternating 0,1 (h2v1) or 1,2
/// (h2v2).
#[inline(always)]
pub(super) fn downsample_row(a: &[u8], b: Option<&[u8]>, out: &mut [u8]) {
    let a = &a[..2 * out.len()];
    match b {
        None => {
            for (j, (o, p)) in out.iter_mut().zip(a.chunks_exact(2)).enumerate() {
                let bias = (j & 1) as u16;
                *o = ((u16::from(p[0]) + u16::from(p[1]) + bias) >> 1) as u8;
            }
        }
        Some(b) => {
            let b = &b[..2 * out.len()];
            for (j, ((o, p), q)) in out
                .iter_mut()
                .zip(a.chunks_exact(2))
                .zip(b.chunks_exact(2))
                .enumerate()
            {
                let bias = 1 + (j & 1) as u16;
                let s = u16::from(p[0]) + u16::from(p[1]) + u16::from(q[0]) + u16::from(q[1]);
                *o = ((s + bias) >> 2) as u8;
            }
        }
    }
}

/// The strips of one frame: gray (one component), or Y, Cb, Cr with the chroma subsampled
/// lh x lv (1x1, 2x1 or 2x2); Y is 8 * lv rows, the others 8.
pub(super) struct Strips {
    pub planes: Vec<Plane>,
    w: usize,
    h: usize,
    lv: usize,
    /// Two full-width Cb rows, then two Cr rows, before downsampling.
    chroma_rows: Vec<u8>,
}

impl Strips {
    /// `shapes[c]` = (width, height) in samples of component c's blocks.
    pub(super) fn new(
        w: usize,
        h: usize,
        channels: u8,
        shapes: &[(usize, usize)],
        lh: usize,
        lv: usize,
    ) -> Strips {
        let plane = |stride: usize, rows: usize| Plane {
            data: super::scratch::bytes(stride * rows),
            stride,
        };
        let (planes, chroma_rows) = if channels == 1 {
            (vec![plane(shapes[0].0, 8)], Vec::new())
        } else {
            let cw = shapes[1].0;
            // Luma wide enough for its blocks and for the chroma's inputs.
            let stride = shapes[0].0.max(cw * lh);
            let rows = if lh == 1 {
                Vec::new()
            } else {
                super::scratch::bytes(4 * stride)
            };
            (
                vec![plane(stride, 8 * lv), plane(cw, 8), plane(cw, 8)],
                rows,
            )
        };
        Strips {
            planes,
            w,
            h,
            lv,
            chroma_rows,
        }
    }

    /// Fills the strips with MCU row `m` of `samples` (gray or RGB, as made for).
    pub(super) fn fill(&mut self, samples: &[u8], m: usize) {
        #[cfg(target_arch = "x86_64")]
        if std::arch::is_x86_feature_detected!("avx2") {
            // SAFETY: AVX2 is present (checked just above).
            unsafe { self.fill_avx2(samples, m) };
            return;
        }
        self.fill_scalar(samples, m);
    }

    /// The portable build of `fill` (and the twin the AVX2 build is tested against).
    pub(super) fn fill_scalar(&mut self, samples: &[u8], m: usize) {
        self.fill_body::<false>(samples, m);
    }

    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2")]
    pub(super) unsafe fn fill_avx2(&mut self, samples: &[u8], m: usize) {
        self.fill_body::<true>(samples, m);
    }

    #[inline(always)]
    fn fill_body<const AVX2: bool>(&mut self, samples: &[u8], m: usize) {
        let (w, h, lv) = (self.w, self.h, self.lv);
        if self.planes.len() == 1 {
            // Gray: rows copied, their right edge expanded; rows past the image repeat the last.
            let p = &mut self.planes[0];
            let stride = p.stride;
            for t in 0..8 {
                let r = m * 8 + t;
                if r >= h {
                    copy_row(&mut p.data, stride, h - 1 - m * 8, t);
                    continue;
                }
                let row = &mut p.data[t * stride..][..stride];
                row[..w].copy_from_slice(&samples[r * w..][..w]);
                let last = row[w - 1];
                row[w..].fill(last);
            }
            return;
        }
        let [y, cb, cr] = &mut self.planes[..] else {
            unreachable!("three components")
        };
        let (stride, cw) = (y.stride, cb.stride);
        if self.chroma_rows.is_empty() {
            // 4:4:4: each row converted straight into the three strips.
            for t in 0..8 {
                let r = m * 8 + t;
                if r >= h {
                    for p in [&mut *y, &mut *cb, &mut *cr] {
                        copy_row(&mut p.data, stride, h - 1 - m * 8, t);
                    }
                    continue;
                }
                let [yr, cbr, crr] =
                    [&mut *y, &mut *cb, &mut *cr].map(|p| &mut p.data[t * stride..][..stride]);
                convert::<AVX2>(&samples[r * 3 * w..][..3 * w], yr, cbr, crr);
                for row in [yr, cbr, crr] {
                    let last = row[w - 1];
                    row[w..].fill(last);
                }
            }
            return;
        }
        // Subsampled: row group g is image rows g * lv to g * lv + lv - 1 (row h, for an odd
        // height at 4:2:0, is row h - 1 again); groups past the image repeat the last.
        let groups = h.div_ceil(lv);
        let (cb_rows, cr_rows) = self.chroma_rows.split_at_mut(2 * stride);
        for k in 0..8 {
            let g = m * 8 + k;
            if g >= groups {
                copy_row(&mut cb.data, cw, groups - 1 - m * 8, k);
                copy_row(&mut cr.data, cw, groups - 1 - m * 8, k);
                for j in 0..lv {
                    copy_row(&mut y.data, stride, h - 1 - m * 8 * lv, k * lv + j);
                }
                continue;
            }
            for j in 0..lv {
                let t = k * lv + j;
                if g * lv + j >= h {
                    copy_row(&mut y.data, stride, t - 1, t);
                    let (a, b) = cb_rows.split_at_mut(stride);
                    b.copy_from_slice(a);
                    let (a, b) = cr_rows.split_at_mut(stride);
                    b.copy_from_slice(a);
                    continue;
                }
                let yr = &mut y.data[t * stride..][..stride];
                let cbr = &mut cb_rows[j * stride..][..stride];
                let crr = &mut cr_rows[j * stride..][..stride];
                convert::<AVX2>(&samples[(g * lv + j) * 3 * w..][..3 * w], yr, cbr, crr);
                for row in [yr, cbr, crr] {
                    let last = row[w - 1];
                    row[w..].fill(last);
                }
            }
            let (cb_below, cr_below) = if lv == 2 {
                (Some(&cb_rows[stride..]), Some(&cr_rows[stride..]))
            } else {
                (None, None)
            };
            downsample::<AVX2>(cb_rows, cb_below, &mut cb.data[k * cw..][..cw]);
            downsample::<AVX2>(cr_rows, cr_below, &mut cr.data[k * cw..][..cw]);
        }
    }

    /// Hands the strips' buffers back for the next image on this thread.
    pub(super) fn give_back(self) {
        for p in self.planes {
            super::scratch::give_bytes(p.data);
        }
        if !self.chroma_rows.is_empty() {
            super::scratch::give_bytes(self.chroma_rows);
        }
    }
}

/// Row `to` of rows `stride` wide becomes a copy of row `from`.
#[inline(always)]
fn copy_row(data: &mut [u8], stride: usize, from: usize, to: usize) {
    data.copy_within(from * stride..(from + 1) * stride, to * stride);
}
