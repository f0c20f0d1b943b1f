//! Histograms of 8-bit Y'CbCr video frames on the native CPU engine: each row is converted to
//! R'G'B' (`io::video::YuvToRgb`, its integer formula) and counted at once, with no RGB image
//! between; the same counts as converting the frame and counting the image (`reference`), as
//! the tests check. Rows are taken a band per rayon task; within a row the conversion and the
//! luminance run on whole rows of lanes (vectorised), then each sample is counted.

use std::ops::Range;

use rayon::prelude::*;

use super::{bin_of, Channels, Histogram, LUMA_SHIFT, LUMA_WEIGHTS};
use crate::io::video::YuvToRgb;

/// Rows per task.
const BAND: usize = 16;

/// One frame's planes: Y' (`width` x `height`), then Cb and Cr, subsampled by 2^`sx` across
/// and 2^`sy` down (`ceil` sizes, as ffmpeg lays them out).
pub struct Planes<'a> {
    pub y: &'a [u8],
    pub u: &'a [u8],
    pub v: &'a [u8],
    pub width: usize,
    pub height: usize,
    pub sx: u8,
    pub sy: u8,
}

/// The histogram (red, green, blue, luminance) of the frame's R'G'B' by `conv` (8-bit).
pub fn yuv8(conv: &YuvToRgb, p: &Planes<'_>, bins: u32) -> Histogram {
    let (w, h) = (p.width, p.height);
    let raw = (0..h.div_ceil(BAND))
        .into_par_iter()
        .map(|band| {
            // Per channel, COPIES tables that take the pixels in turn (runs of one value do
            // not wait on one counter).
            let mut counts = vec![[0u32; 256]; 4 * COPIES];
            count_band(
                conv,
                p,
                band * BAND..((band + 1) * BAND).min(h),
                &mut counts,
            );
            counts
        })
        .reduce(
            || vec![[0u32; 256]; 4 * COPIES],
            |mut a, b| {
                for (x, y) in a.iter_mut().zip(&b) {
                    for (s, t) in x.iter_mut().zip(y) {
                        *s += t;
                    }
                }
                a
            },
        );
    let channels = Channels {
        color: true,
        alpha: false,
    };
    let mut hist = Histogram::zeros(channels, bins);
    hist.pixels = (w * h) as u64;
    for c in 0..4 {
        for value in 0..256u32 {
            let n: u64 = (0..COPIES)
                .map(|k| u64::from(raw[COPIES * c + k][value as usize]))
                .sum();
            hist.counts[bin_of(value, bins, 255) as usize * 4 + c] += n;
        }
    }
    hist
}

/// Tables per channel.
const COPIES: usize = 4;

/// The rows `rows` converted and counted into `t`, compiled for AVX2 where the CPU has it.
fn count_band(conv: &YuvToRgb, p: &Planes<'_>, rows: Range<usize>, t: &mut [[u32; 256]]) {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: the CPU has AVX2.
        return unsafe { count_band_avx2(conv, p, rows, t) };
    }
    count_band_with(conv, p, rows, t)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn count_band_avx2(conv: &YuvToRgb, p: &Planes<'_>, rows: Range<usize>, t: &mut [[u32; 256]]) {
    count_band_with(conv, p, rows, t)
}

#[inline(always)]
fn count_band_with(conv: &YuvToRgb, p: &Planes<'_>, rows: Range<usize>, t: &mut [[u32; 256]]) {
    let w = p.width;
    let cw = w.div_ceil(1 << p.sx);
    let mut buf = Rows::new(w);
    for r in rows {
        let c0 = (r >> p.sy) * cw;
        let (u, v) = (&p.u[c0..c0 + cw], &p.v[c0..c0 + cw]);
        buf.convert(conv, &p.y[r * w..(r + 1) * w], u, v, p.sx);
        buf.count(t);
    }
}

/// One row's samples, channel by channel.
struct Rows {
    u: Vec<i32>,
    v: Vec<i32>,
    rgbl: [Vec<u8>; 4],
}

impl Rows {
    fn new(w: usize) -> Rows {
        Rows {
            u: vec![0; w],
            v: vec![0; w],
            rgbl: std::array::from_fn(|_| vec![0; w]),
        }
    }

    /// The row's R', G', B' and luminance. The sums fit i32 for 8-bit samples (each factor
    /// below 2^18, each difference below 2^8).
    #[inline(always)]
    fn convert(&mut self, c: &YuvToRgb, y: &[u8], u: &[u8], v: &[u8], sx: u8) {
        let half = c.half as i32;
        for (x, (uo, vo)) in self.u.iter_mut().zip(self.v.iter_mut()).enumerate() {
            *uo = i32::from(u[x >> sx]) - half;
            *vo = i32::from(v[x >> sx]) - half;
        }
        let (cy, yoff) = (c.cy as i32, c.yoff as i32);
        let (crv, cgu, cgv, cbu) = (c.crv as i32, c.cgu as i32, c.cgv as i32, c.cbu as i32);
        let f = |s: i32| ((s + (1 << 15)) >> 16).clamp(0, 255) as u8;
        let [r, g, b, l] = &mut self.rgbl;
        for x in 0..y.len() {
            let (yy, uu, vv) = (cy * (i32::from(y[x]) - yoff), self.u[x], self.v[x]);
            r[x] = f(yy + crv * vv);
            g[x] = f(yy - cgu * uu - cgv * vv);
            b[x] = f(yy + cbu * uu);
        }
        let [wr, wg, wb] = LUMA_WEIGHTS;
        for x in 0..y.len() {
            let s = wr * u32::from(r[x]) + wg * u32::from(g[x]) + wb * u32::from(b[x]);
            l[x] = ((s + (1 << (LUMA_SHIFT - 1))) >> LUMA_SHIFT) as u8;
        }
    }

    /// Counts the row into `counts` (channel c's tables from COPIES c on).
    #[inline(always)]
    fn count(&self, counts: &mut [[u32; 256]]) {
        for (c, row) in self.rgbl.iter().enumerate() {
            let [a, b, cc, d] = &mut counts[COPIES * c..COPIES * (c + 1)] else {
                unreachable!("COPIES tables a channel")
            };
            let mut quads = row.chunks_exact(COPIES);
            for q in &mut quads {
                a[q[0] as usize] += 1;
                b[q[1] as usize] += 1;
                cc[q[2] as usize] += 1;
                d[q[3] as usize] += 1;
            }
            for &s in quads.remainder() {
                a[s as usize] += 1;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::image::Image;
    use crate::io::video::{Matrix, Range};

    // Odd sizes, every subsampling, both matrices and ranges, a few bin counts: the same
    // counts as the reference on the converted frame.
    #[test]
    fn counts_equal_the_reference_on_the_converted_frame() {
        let mut seed = 7u32;
        let mut next = move || {
            seed ^= seed << 13;
            seed ^= seed >> 17;
            seed ^= seed << 5;
            (seed >> 8) as u8
        };
        for (w, h, sx, sy) in [(37usize, 21usize, 1u8, 1u8), (16, 40, 1, 0), (9, 5, 0, 0)] {
            let (cw, ch) = (w.div_ceil(1 << sx), h.div_ceil(1 << sy));
            let y: Vec<u8> = (0..w * h).map(|_| next()).collect();
            let u: Vec<u8> = (0..cw * ch).map(|_| next()).collect();
            let v: Vec<u8> = (0..cw * ch).map(|_| next()).collect();
            for (range, matrix) in [
                (Range::Limited, Matrix::Bt601),
                (Range::Full, Matrix::Bt709),
            ] {
                let conv = YuvToRgb::new(range, matrix, 8);
                let planes = [
                    Image::new_u8(w as u32, h as u32, 1, y.clone()),
                    Image::new_u8(cw as u32, ch as u32, 1, u.clone()),
                    Image::new_u8(cw as u32, ch as u32, 1, v.clone()),
                ];
                let rgb = conv.convert(&planes, sx, sy);
                for bins in [256, 7, 1] {
                    let p = Planes {
                        y: &y,
                        u: &u,
                        v: &v,
                        width: w,
                        height: h,
                        sx,
                        sy,
                    };
                    let want = super::super::reference(&rgb, Channels::of(3, false), bins);
                    assert_eq!(yuv8(&conv, &p, bins), want, "{w}x{h} {sx}{sy} {bins} bins");
                }
            }
        }
    }
}
