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

/// jcsample.c's `h2v1_downsample` (`b` None) and `h2v2_downsample` of one output row: each
/// sample the mean of its 2 or 4 inputs, rounded with a bias alternating 0,1 (h2v1) or 1,2
/// (h2v2).
#[inline(always)]
fn downsample_row(a: &[u8], b: Option<&[u8]>, out: &mut [u8]) {
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
        self.fill_body(samples, m);
    }

    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2")]
    pub(super) unsafe fn fill_avx2(&mut self, samples: &[u8], m: usize) {
        self.fill_body(samples, m);
    }

    #[inline(always)]
    fn fill_body(&mut self, samples: &[u8], m: usize) {
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
                convert_row(&samples[r * 3 * w..][..3 * w], yr, cbr, crr);
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
                convert_row(&samples[(g * lv + j) * 3 * w..][..3 * w], yr, cbr, crr);
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
            downsample_row(cb_rows, cb_below, &mut cb.data[k * cw..][..cw]);
            downsample_row(cr_rows, cr_below, &mut cr.data[k * cw..][..cw]);
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
