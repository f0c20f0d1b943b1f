//! SSIM, on the host in f64, so it is the same whichever engine ran the counts.

use rayon::prelude::*;

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

/// Output rows per parallel band of the SSIM map.
const SSIM_BAND: usize = 32;

/// The gaussian window's sums along row `y` of channel `ch` of `a` and `b`, at every x:
/// of x, y, x², y², xy (x, y the two images' samples), edges reflected.
fn ssim_row(a: &Image, b: &Image, ch: usize, y: usize, out: &mut [[f64; 5]]) {
    let (w, c) = (a.width as usize, a.channels as usize);
    let row = |img: &Image| -> Vec<f64> {
        let r = y * w * c + ch..(y + 1) * w * c;
        match &img.samples {
            Samples::U8(s) => s[r].iter().step_by(c).map(|&v| f64::from(v)).collect(),
            Samples::U16(s) => s[r].iter().step_by(c).map(|&v| f64::from(v)).collect(),
        }
    };
    let (xs, ys) = (row(a), row(b));
    let win = ssim_window();
    let r = SSIM_RADIUS as isize;
    for (x, o) in out.iter_mut().enumerate() {
        let mut m = [0.0; 5];
        for k in -r..=r {
            let j = reflect(x as isize + k, w);
            let (p, q, wt) = (xs[j], ys[j], win[(k + r) as usize]);
            m[0] += wt * p;
            m[1] += wt * q;
            m[2] += wt * (p * p);
            m[3] += wt * (q * q);
            m[4] += wt * (p * q);
        }
        *o = m;
    }
}

/// The mean SSIM of channel `ch` of `a` and `b` (one layout), with `data_range` the largest
/// sample value: Wang et al. 2004 with an 11x11 gaussian window (sigma 1.5), K1 0.01,
/// K2 0.03, population (not sample) covariances, edges reflected; the map averaged over the
/// pixels at least 5 from every edge (all pixels when the image is smaller than 11 on a
/// side) and outside the ignored rectangles. `None` when no pixel is left to average.
/// scikit-image's `structural_similarity(a, b, gaussian_weights=True, sigma=1.5,
/// use_sample_covariance=False, data_range=...)` computes the same. The window is applied
/// separably (along rows, then down columns) in bands of rows, in parallel.
pub fn ssim_channel(a: &Image, b: &Image, ch: usize, ignore: &[Rect]) -> Option<f64> {
    let (w, h) = (a.width as usize, a.height as usize);
    let range = f64::from(a.max_value());
    let c1 = (SSIM_K1 * range).powi(2);
    let c2 = (SSIM_K2 * range).powi(2);
    let pad = ssim_pad(w, h);
    let win = ssim_window();
    let r = SSIM_RADIUS as isize;
    let bands: Vec<usize> = (pad..h - pad).step_by(SSIM_BAND).collect();
    let (sum, n) = bands
        .into_par_iter()
        .map(|y0| {
            let y1 = (y0 + SSIM_BAND).min(h - pad);
            // Rows y0 - r ..= y1 - 1 + r (reflected) along x.
            let first = y0 as isize - r;
            let count = y1 - y0 + 2 * SSIM_RADIUS;
            let mut across = vec![[0.0; 5]; count * w];
            for (i, out) in across.chunks_exact_mut(w).enumerate() {
                ssim_row(a, b, ch, reflect(first + i as isize, h), out);
            }
            let (mut sum, mut n) = (0.0, 0u64);
            for yy in y0..y1 {
                for xx in pad..w - pad {
                    if ignore.iter().any(|q| q.contains(xx as u32, yy as u32)) {
                        continue;
                    }
                    let mut m = [0.0; 5];
                    for k in 0..2 * SSIM_RADIUS + 1 {
                        let v = &across[(yy - y0 + k) * w + xx];
                        for (mi, vi) in m.iter_mut().zip(v) {
                            *mi += win[k] * vi;
                        }
                    }
                    let [ux, uy, uxx, uyy, uxy] = m;
                    let vx = uxx - ux * ux;
                    let vy = uyy - uy * uy;
                    let vxy = uxy - ux * uy;
                    let num = (2.0 * ux * uy + c1) * (2.0 * vxy + c2);
                    let den = (ux * ux + uy * uy + c1) * (vx + vy + c2);
                    sum += num / den;
                    n += 1;
                }
            }
            (sum, n)
        })
        .reduce(|| (0.0, 0), |p, q| (p.0 + q.0, p.1 + q.1));
    (n > 0).then(|| sum / n as f64)
}

/// SSIM per channel and their mean. Identical samples give exactly 1 without filtering.
pub fn ssim(a: &Image, b: &Image, ignore: &[Rect]) -> Option<(f64, Vec<f64>)> {
    let c = a.channels as usize;
    let per: Option<Vec<f64>> = if a.samples == b.samples {
        let any = ssim_channel_count(a, ignore) > 0;
        any.then(|| vec![1.0; c])
    } else {
        (0..c).map(|ch| ssim_channel(a, b, ch, ignore)).collect()
    };
    let per = per?;
    Some((per.iter().sum::<f64>() / c as f64, per))
}

/// The number of pixels SSIM averages over (see [`ssim_channel`]).
fn ssim_channel_count(a: &Image, ignore: &[Rect]) -> u64 {
    let (w, h) = (a.width, a.height);
    let pad = ssim_pad(w as usize, h as usize) as u32;
    let (xs, ys) = (pad..w - pad, pad..h - pad);
    xs.len() as u64 * ys.len() as u64 - ignored_in(ignore, xs, ys)
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
