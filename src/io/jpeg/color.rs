//! The encoder's sample planes: jccolor.c's fixed-point RGB to YCbCr, jcsample.c's
//! downsampling (alternating rounding bias) and libjpeg's edge expansion (the last column
//! and row repeated to whole blocks; a subsampled plane's last row repeated to whole MCUs).

/// A component's samples, `stride` across (at least its blocks' width), row by row.
pub(super) struct Plane {
    pub data: Vec<u8>,
    pub stride: usize,
}

/// jccolor.c's `rgb_ycc_convert` for one row of `rgb`: FIX(x) = round(x * 2^16).
#[inline(always)]
fn convert_row(rgb: &[u8], y: &mut [u8], cb: &mut [u8], cr: &mut [u8]) {
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

pub(super) fn convert_rows_scalar(rgb: &[u8], w: usize, out: [&mut [u8]; 3], stride: usize) {
    let [y, cb, cr] = out;
    for (row, ((y, cb), cr)) in rgb.chunks_exact(3 * w).zip(
        y.chunks_exact_mut(stride)
            .zip(cb.chunks_exact_mut(stride))
            .zip(cr.chunks_exact_mut(stride)),
    ) {
        convert_row(row, y, cb, cr);
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
pub(super) unsafe fn convert_rows_avx2(rgb: &[u8], w: usize, out: [&mut [u8]; 3], stride: usize) {
    let [y, cb, cr] = out;
    for (row, ((y, cb), cr)) in rgb.chunks_exact(3 * w).zip(
        y.chunks_exact_mut(stride)
            .zip(cb.chunks_exact_mut(stride))
            .zip(cr.chunks_exact_mut(stride)),
    ) {
        convert_row(row, y, cb, cr);
    }
}

/// RGB rows to Y, Cb and Cr planes `stride` wide (the first `w` samples of each row).
pub(super) fn convert_rows(rgb: &[u8], w: usize, out: [&mut [u8]; 3], stride: usize) {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: AVX2 is present (checked just above).
        unsafe { convert_rows_avx2(rgb, w, out, stride) };
        return;
    }
    convert_rows_scalar(rgb, w, out, stride);
}

/// Repeats each row's sample `w - 1` to the end of the row, and row `h - 1` to the end of
/// the plane (jcsample.c's `expand_right_edge`, jcprep.c's `expand_bottom_edge`).
fn expand(data: &mut [u8], stride: usize, w: usize, h: usize) {
    for row in data.chunks_exact_mut(stride).take(h) {
        let last = row[w - 1];
        row[w..].fill(last);
    }
    let (top, bottom) = data.split_at_mut(h * stride);
    let last = &top[(h - 1) * stride..];
    for row in bottom.chunks_exact_mut(stride) {
        row.copy_from_slice(last);
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

/// The Y, Cb and Cr planes of RGB samples with chroma subsampled lh x lv (2x1 or 2x2), made
/// row group by row group so that each group's full-size chroma rows stay in cache: each
/// image row converted (its right edge expanded), its group's chroma downsampled, then the
/// rows below the image repeat the last (jcprep.c's `expand_bottom_edge`, and for the
/// chroma the last downsampled row).
#[inline(always)]
fn subsampled_body(rgb: &[u8], w: usize, h: usize, lv: usize, planes: [&mut Plane; 3]) {
    let [y, cb, cr] = planes;
    let (stride, cw) = (y.stride, cb.stride);
    let mut rows = super::scratch::bytes(4 * 2 * cw);
    let (cb_rows, cr_rows) = rows.split_at_mut(4 * cw);
    let groups = h.div_ceil(lv);
    for g in 0..groups {
        for k in 0..lv {
            let r = (g * lv + k).min(h - 1);
            if g * lv + k >= h {
                // Row h (h odd, 4:2:0) is row h - 1 again.
                let (a, b) = cb_rows.split_at_mut(2 * cw);
                b.copy_from_slice(a);
                let (a, b) = cr_rows.split_at_mut(2 * cw);
                b.copy_from_slice(a);
                continue;
            }
            let yr = &mut y.data[r * stride..][..stride];
            let cbr = &mut cb_rows[k * 2 * cw..][..2 * cw];
            let crr = &mut cr_rows[k * 2 * cw..][..2 * cw];
            convert_row(&rgb[r * 3 * w..][..3 * w], yr, cbr, crr);
            for row in [yr, cbr, crr] {
                let last = row[w - 1];
                row[w..].fill(last);
            }
        }
        let out = |p: &mut Plane, rows: &[u8]| {
            let o = &mut p.data[g * cw..][..cw];
            if lv == 2 {
                downsample_row(&rows[..2 * cw], Some(&rows[2 * cw..]), o);
            } else {
                downsample_row(&rows[..2 * cw], None, o);
            }
        };
        out(cb, cb_rows);
        out(cr, cr_rows);
    }
    super::scratch::give_bytes(rows);
    repeat_last_rows(&mut y.data, stride, h);
    repeat_last_rows(&mut cb.data, cw, groups);
    repeat_last_rows(&mut cr.data, cw, groups);
}

/// Rows `filled` onwards of a plane `stride` wide repeat row `filled - 1`.
fn repeat_last_rows(data: &mut [u8], stride: usize, filled: usize) {
    let (top, bottom) = data.split_at_mut(filled * stride);
    let last = &top[(filled - 1) * stride..];
    for row in bottom.chunks_exact_mut(stride) {
        row.copy_from_slice(last);
    }
}

/// The portable build of [`subsampled_body`] (and the twin the AVX2 build is tested against).
pub(super) fn subsampled_scalar(rgb: &[u8], w: usize, h: usize, lv: usize, p: [&mut Plane; 3]) {
    subsampled_body(rgb, w, h, lv, p);
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
pub(super) unsafe fn subsampled_avx2(
    rgb: &[u8],
    w: usize,
    h: usize,
    lv: usize,
    p: [&mut Plane; 3],
) {
    subsampled_body(rgb, w, h, lv, p);
}

/// The planes of each component, `shapes[c]` = (width, height) of its blocks in samples:
/// gray as it is, RGB as Y at full size (lh x lv of the chroma's) and Cb, Cr subsampled.
pub(super) fn planes(
    samples: &[u8],
    w: usize,
    h: usize,
    channels: u8,
    shapes: &[(usize, usize)],
    lh: usize,
    lv: usize,
) -> Vec<Plane> {
    if channels == 1 {
        let (pw, ph) = shapes[0];
        let mut data = super::scratch::bytes(pw * ph);
        for (src, dst) in samples.chunks_exact(w).zip(data.chunks_exact_mut(pw)) {
            dst[..w].copy_from_slice(src);
        }
        expand(&mut data, pw, w, h);
        return vec![Plane { data, stride: pw }];
    }
    let (cw, ch) = shapes[1];
    if lh == 1 && lv == 1 {
        let (stride, rows) = shapes[0];
        let mut y = super::scratch::bytes(stride * rows);
        let mut cb = super::scratch::bytes(stride * rows);
        let mut cr = super::scratch::bytes(stride * rows);
        convert_rows(samples, w, [&mut y, &mut cb, &mut cr], stride);
        for p in [&mut y, &mut cb, &mut cr] {
            expand(p, stride, w, h);
        }
        return [y, cb, cr].map(|data| Plane { data, stride }).into();
    }
    // Luma wide enough for its blocks and for the chroma's inputs, tall enough for its blocks.
    let stride = shapes[0].0.max(cw * lh);
    let plane = |stride: usize, rows: usize| Plane {
        data: super::scratch::bytes(stride * rows),
        stride,
    };
    let mut y = plane(stride, shapes[0].1);
    let mut cb = plane(cw, ch);
    let mut cr = plane(cw, ch);
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: AVX2 is present (checked just above).
        unsafe { subsampled_avx2(samples, w, h, lv, [&mut y, &mut cb, &mut cr]) };
        return vec![y, cb, cr];
    }
    subsampled_scalar(samples, w, h, lv, [&mut y, &mut cb, &mut cr]);
    vec![y, cb, cr]
}
