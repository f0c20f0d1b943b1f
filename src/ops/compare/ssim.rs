//! SSIM, on the host in f64, so it is the same whichever engine ran the counts.

use rayon::prelude::*;

use super::mask::Ignored;
use super::{ignored_in, Rect};
use crate::io::image::{Image, Samples};

/// SSIM's window: 11 taps of a gaussian with sigma 1.5, normalised to sum 1 (scipy's
/// `gaussian_filter` with `truncate=3.5`, as scikit-image uses it).
pub const SSIM_RADIUS: usize = 5;
pub const SSIM_SIGMA: f64 = 1.5;
pub const SSIM_K1: f64 = 0.01;
pub const SSIM_K2: f64 = 0.03;

pub(super) fn ssim_window() -> [f64; 2 * SSIM_RADIUS + 1] {
    let mut w = [0.0; 2 * SSIM_RADIUS + 1];
    for (i, v) in w.iter_mut().enumerate() {
        let x = i as f64 - SSIM_RADIUS as f64;
        *v = (-0.5 * x * x / (SSIM_SIGMA * SSIM_SIGMA)).exp();
    }
    let sum: f64 = w.iter().sum();
    w.map(|v| v / sum)
}

/// Index `i` (which may lie outside 0..n) reflected into the image the way scipy's
/// `mode='reflect'` does: d c b a | a b c d | d c b a.
pub(super) fn reflect(i: isize, n: usize) -> usize {
    let period = 2 * n as isize;
    let m = i.rem_euclid(period);
    if m >= n as isize {
        (period - 1 - m) as usize
    } else {
        m as usize
    }
}

/// Output rows per parallel band of the SSIM map (each band filters 2 x SSIM_RADIUS rows
/// more than it outputs).
const SSIM_BAND: usize = 128;

/// The five quantities SSIM filters, one plane each: x, y, x², y², xy (x, y the two
/// images' samples).
const PLANES: usize = 5;

/// The gaussian window's sums along row `y` of channel `ch` of `a` and `b`, at every x: of
/// each of the five planes, into `out[p * w..][..w]` for plane p; edges reflected. Each sum
/// adds its 11 terms in tap order from 0, so the result does not depend on how the loop is
/// vectorised.
#[inline(always)]
fn ssim_row(
    a: &Image,
    b: &Image,
    ch: usize,
    y: usize,
    rows: &mut [Vec<f64>; PLANES],
    out: &mut [f64],
) {
    let (w, c) = (a.width as usize, a.channels as usize);
    let fill = |img: &Image, dst: &mut Vec<f64>| {
        let r = y * w * c + ch..(y + 1) * w * c;
        dst.clear();
        match &img.samples {
            Samples::U8(s) => dst.extend(s[r].iter().step_by(c).map(|&v| f64::from(v))),
            Samples::U16(s) => dst.extend(s[r].iter().step_by(c).map(|&v| f64::from(v))),
        }
    };
    let [xs, ys, xx, yy, xy] = rows;
    fill(a, xs);
    fill(b, ys);
    for (((p, q), (pp, qq)), pq) in xs
        .iter()
        .zip(ys.iter())
        .zip(xx.iter_mut().zip(yy.iter_mut()))
        .zip(xy.iter_mut())
    {
        *pp = p * p;
        *qq = q * q;
        *pq = p * q;
    }
    let win = ssim_window();
    let r = SSIM_RADIUS;
    // Interior: x - r ..= x + r inside the row.
    let inner = if w > 2 * r { r..w - r } else { 0..0 };
    for (plane, o) in rows.iter().zip(out.chunks_exact_mut(w)) {
        o.fill(0.0);
        for (k, &wt) in win.iter().enumerate().filter(|_| !inner.is_empty()) {
            let src = &plane[inner.start + k - r..inner.end + k - r];
            for (d, &v) in o[inner.clone()].iter_mut().zip(src) {
                *d += wt * v;
            }
        }
        for x in (0..w).filter(|x| !inner.contains(x)) {
            let mut m = 0.0;
            for (k, &wt) in win.iter().enumerate() {
                m += wt * plane[reflect(x as isize + k as isize - r as isize, w)];
            }
            o[x] = m;
        }
    }
}

/// The mean SSIM of channel `ch` of `a` and `b` (one layout), with `data_range` the largest
/// sample value: Wang et al. 2004 with an 11x11 gaussian window (sigma 1.5), K1 0.01,
/// K2 0.03, population (not sample) covariances, edges reflected; the map averaged over the
/// pixels at least 5 from every edge (all pixels when the image is smaller than 11 on a
/// side) and outside the ignored rectangles. `None` when no pixel is left to average.
/// scikit-image's `structural_similarity(a, b, gaussian_weights=True, sigma=1.5,
/// use_sample_covariance=False, data_range=...)` computes the same. The window is applied
/// separably (along rows, then down columns) in bands of rows, in parallel; the bands' sums
/// are added in order, so the result is the same on any number of threads.
pub fn ssim_channel(a: &Image, b: &Image, ch: usize, ignore: &[Rect]) -> Option<f64> {
    ssim_channel_with(
        a,
        b,
        ch,
        Ignored {
            rects: ignore,
            mask: None,
        },
    )
}

/// [`ssim_channel`] leaving out the pixels of a mask too.
fn ssim_channel_with(a: &Image, b: &Image, ch: usize, ignore: Ignored) -> Option<f64> {
    let (w, h) = (a.width as usize, a.height as usize);
    let range = f64::from(a.max_value());
    let pad = ssim_pad(w, h);
    let band = Band {
        a,
        b,
        ch,
        ignore,
        c1: (SSIM_K1 * range).powi(2),
        c2: (SSIM_K2 * range).powi(2),
        pad,
    };
    let avx2 = has_avx2();
    let bands: Vec<usize> = (pad..h - pad).step_by(SSIM_BAND).collect();
    let sums: Vec<(f64, u64)> = bands
        .into_par_iter()
        .map(|y0| {
            #[cfg(target_arch = "x86_64")]
            if avx2 {
                // SAFETY: the CPU has AVX2 (`has_avx2`).
                return unsafe { band.run_avx2(y0) };
            }
            #[cfg(not(target_arch = "x86_64"))]
            let _ = avx2;
            band.run(y0)
        })
        .collect();
    let (sum, n) = sums.iter().fold((0.0, 0), |p, q| (p.0 + q.0, p.1 + q.1));
    (n > 0).then(|| sum / n as f64)
}

/// Whether this CPU runs AVX2 (a band's code is compiled twice: for it, and for the target's
/// baseline; without FMA, so both give the same bits).
fn has_avx2() -> bool {
    #[cfg(target_arch = "x86_64")]
    return std::arch::is_x86_feature_detected!("avx2");
    #[cfg(not(target_arch = "x86_64"))]
    false
}

/// One channel's SSIM over bands of output rows.
struct Band<'a> {
    a: &'a Image,
    b: &'a Image,
    ch: usize,
    ignore: Ignored<'a>,
    c1: f64,
    c2: f64,
    /// Rows and columns this far from the edges are left out of the mean.
    pad: usize,
}

impl Band<'_> {
    /// [`Band::run`] compiled for AVX2, everything inlined into it.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2")]
    fn run_avx2(&self, y0: usize) -> (f64, u64) {
        self.run(y0)
    }

    /// The sum of the SSIM map over output rows y0 .. y0 + SSIM_BAND (fewer at the bottom)
    /// and the pixels summed. Within a row the map's values are added in 4 running sums (x
    /// mod 4), then those sums, then the rows in order: a fixed order.
    #[inline(always)]
    fn run(&self, y0: usize) -> (f64, u64) {
        let Band { a, b, ch, pad, .. } = *self;
        let (w, h) = (a.width as usize, a.height as usize);
        let y1 = (y0 + SSIM_BAND).min(h - pad);
        let win = ssim_window();
        // Rows y0 - r ..= y1 - 1 + r (reflected) along x, PLANES planes of w a row, in a ring
        // of the window's 2r + 1 rows (small enough to stay in cache).
        let first = y0 as isize - SSIM_RADIUS as isize;
        let taps = 2 * SSIM_RADIUS + 1;
        let mut ring = vec![0.0; taps * PLANES * w];
        let mut rows: [Vec<f64>; PLANES] = std::array::from_fn(|_| vec![0.0; w]);
        let mut along = |i: usize, ring: &mut [f64]| {
            let slot = &mut ring[(i % taps) * PLANES * w..][..PLANES * w];
            ssim_row(a, b, ch, reflect(first + i as isize, h), &mut rows, slot);
        };
        for i in 0..taps - 1 {
            along(i, &mut ring);
        }
        // Down the columns, a row of every plane at a time.
        let mut m = vec![0.0; PLANES * w];
        let mut map = vec![0.0; w - 2 * pad];
        let (mut sum, mut n) = (0.0, 0u64);
        for yy in y0..y1 {
            let i0 = yy - y0;
            along(i0 + taps - 1, &mut ring);
            m.fill(0.0);
            for (k, &wt) in win.iter().enumerate() {
                let src = &ring[((i0 + k) % taps) * PLANES * w..][..PLANES * w];
                for (d, &v) in m.iter_mut().zip(src) {
                    *d += wt * v;
                }
            }
            let cols = pad..w - pad;
            let (ux, rest) = m.split_at(w);
            let (uy, rest) = rest.split_at(w);
            let (uxx, rest) = rest.split_at(w);
            let (uyy, uxy) = rest.split_at(w);
            let moments = ux[cols.clone()]
                .iter()
                .zip(&uy[cols.clone()])
                .zip(uxx[cols.clone()].iter().zip(&uyy[cols.clone()]))
                .zip(&uxy[cols.clone()]);
            for (v, (((&ux, &uy), (&uxx, &uyy)), &uxy)) in map.iter_mut().zip(moments) {
                *v = self.value(ux, uy, uxx, uyy, uxy);
            }
            if self.ignore.is_empty() {
                let mut lanes = [0.0; 4];
                let mut chunks = map.chunks_exact(4);
                for c in &mut chunks {
                    for (l, v) in lanes.iter_mut().zip(c) {
                        *l += v;
                    }
                }
                let tail: f64 = chunks.remainder().iter().sum();
                sum += (lanes[0] + lanes[1]) + (lanes[2] + lanes[3]) + tail;
                n += map.len() as u64;
            } else {
                for (x, v) in cols.zip(&map) {
                    if !self.ignore.contains(x as u32, yy as u32) {
                        sum += v;
                        n += 1;
                    }
                }
            }
        }
        (sum, n)
    }

    /// SSIM from the window's means of x, y, x², y², xy.
    #[inline(always)]
    fn value(&self, ux: f64, uy: f64, uxx: f64, uyy: f64, uxy: f64) -> f64 {
        let vx = uxx - ux * ux;
        let vy = uyy - uy * uy;
        let vxy = uxy - ux * uy;
        let num = (2.0 * ux * uy + self.c1) * (2.0 * vxy + self.c2);
        let den = (ux * ux + uy * uy + self.c1) * (vx + vy + self.c2);
        num / den
    }
}

/// SSIM per channel and their mean. Identical samples give exactly 1 without filtering.
pub fn ssim(a: &Image, b: &Image, ignore: &[Rect]) -> Option<(f64, Vec<f64>)> {
    ssim_with(
        a,
        b,
        Ignored {
            rects: ignore,
            mask: None,
        },
    )
}

/// [`ssim`] leaving out the pixels of a mask too (masked pixels are equal in both images,
/// [`super::Mask::apply`], and are left out of the mean like ignored rectangles).
pub fn ssim_with(a: &Image, b: &Image, ignore: Ignored) -> Option<(f64, Vec<f64>)> {
    let c = a.channels as usize;
    let per: Option<Vec<f64>> = if a.samples == b.samples {
        let any = ssim_channel_count(a, ignore) > 0;
        any.then(|| vec![1.0; c])
    } else {
        (0..c)
            .map(|ch| ssim_channel_with(a, b, ch, ignore))
            .collect()
    };
    let per = per?;
    Some((per.iter().sum::<f64>() / c as f64, per))
}

/// The number of pixels SSIM averages over (see [`ssim_channel`]).
fn ssim_channel_count(a: &Image, ignore: Ignored) -> u64 {
    let (w, h) = (a.width, a.height);
    let pad = ssim_pad(w as usize, h as usize) as u32;
    let (xs, ys) = (pad..w - pad, pad..h - pad);
    match ignore.mask {
        None => xs.len() as u64 * ys.len() as u64 - ignored_in(ignore.rects, xs, ys),
        Some(_) => ys
            .flat_map(|y| xs.clone().map(move |x| (x, y)))
            .filter(|&(x, y)| !ignore.contains(x, y))
            .count() as u64,
    }
}

/// How far from each edge the SSIM map is averaged: the window's radius, or 0 when the
/// image is smaller than the window on a side.
fn ssim_pad(w: usize, h: usize) -> usize {
    if w > 2 * SSIM_RADIUS && h > 2 * SSIM_RADIUS {
        SSIM_RADIUS
    } else {
        0
    }
}
