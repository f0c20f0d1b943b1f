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

/// jcsample.c's `h2v1_downsample` and `h2v2_downsample` (`v` 1 or 2): each output sample the
/// mean of its 2 or 4 inputs, rounded with a bias alternating 0,1 (h2v1) or 1,2 (h2v2).
fn downsample(full: &[u8], stride: usize, v: usize, rows: usize, out: &mut Plane) {
    let ow = out.stride;
    for (i, o) in out.data.chunks_exact_mut(ow).take(rows).enumerate() {
        let a = &full[i * v * stride..][..2 * ow];
        if v == 1 {
            for (j, o) in o.iter_mut().enumerate() {
                let bias = (j & 1) as u16;
                *o = ((u16::from(a[2 * j]) + u16::from(a[2 * j + 1]) + bias) >> 1) as u8;
            }
        } else {
            let b = &full[(i * 2 + 1) * stride..][..2 * ow];
            for (j, o) in o.iter_mut().enumerate() {
                let bias = 1 + (j & 1) as u16;
                let s = u16::from(a[2 * j])
                    + u16::from(a[2 * j + 1])
                    + u16::from(b[2 * j])
                    + u16::from(b[2 * j + 1]);
                *o = ((s + bias) >> 2) as u8;
            }
        }
    }
    // Rows past the image's last row group repeat the last downsampled row (jcprep.c).
    let (top, bottom) = out.data.split_at_mut(rows * ow);
    let last = &top[(rows - 1) * ow..];
    for row in bottom.chunks_exact_mut(ow) {
        row.copy_from_slice(last);
    }
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
    // Full-size planes wide and tall enough for luma's blocks and for the chroma's inputs.
    let (cw, ch) = shapes[1];
    let stride = shapes[0].0.max(cw * lh);
    let rows = shapes[0].1.max(ch * lv);
    let mut y = super::scratch::bytes(stride * rows);
    let mut cb = super::scratch::bytes(stride * rows);
    let mut cr = super::scratch::bytes(stride * rows);
    convert_rows(samples, w, [&mut y, &mut cb, &mut cr], stride);
    for p in [&mut y, &mut cb, &mut cr] {
        expand(p, stride, w, h);
    }
    if lh == 1 && lv == 1 {
        return [y, cb, cr].map(|data| Plane { data, stride }).into();
    }
    let groups = h.div_ceil(lv);
    let mut out = vec![Plane { data: y, stride }];
    for p in [cb, cr] {
        let mut plane = Plane {
            data: super::scratch::bytes(cw * ch),
            stride: cw,
        };
        downsample(&p, stride, lv, groups, &mut plane);
        super::scratch::give_bytes(p);
        out.push(plane);
    }
    out
}
