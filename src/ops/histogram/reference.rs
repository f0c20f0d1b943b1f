//! The CPU reference: every pixel's channel values binned and counted.

use super::{bin_of, luminance, Channels, Histogram};
use crate::io::image::{Image, Samples};

/// The values of `channels` for one pixel of `px` (its samples: gray, gray+alpha, RGB or
/// RGBA): a gray pixel in a colour histogram counts as R = G = B, a pixel without alpha in a
/// histogram with alpha as opaque. The CPU mirror of `count_pixel` in histogram_chunk.wgsl.
pub(super) fn pixel_values(px: &[u32], channels: Channels, maxval: u32) -> ([u32; 5], usize) {
    let alpha = match px.len() {
        2 => px[1],
        4 => px[3],
        _ => maxval,
    };
    let v = px[0];
    if channels.color {
        let (g, b) = if px.len() >= 3 {
            (px[1], px[2])
        } else {
            (v, v)
        };
        (
            [v, g, b, luminance(v, g, b), alpha],
            4 + usize::from(channels.alpha),
        )
    } else {
        ([v, alpha, 0, 0, 0], 1 + usize::from(channels.alpha))
    }
}

/// The CPU reference: every pixel's channel values binned and counted.
pub fn reference(img: &Image, channels: Channels, bins: u32) -> Histogram {
    let maxval = img.max_value();
    let ic = img.channels as usize;
    let n = channels.count() as usize;
    let mut hist = Histogram::zeros(channels, bins);
    hist.pixels = img.pixels() as u64;
    let mut count = |px: &[u32]| {
        let (values, k) = pixel_values(px, channels, maxval);
        for (c, &v) in values[..k].iter().enumerate() {
            hist.counts[bin_of(v, bins, maxval) as usize * n + c] += 1;
        }
    };
    let mut px = [0u32; 4];
    match &img.samples {
        Samples::U8(s) => {
            for p in s.chunks_exact(ic) {
                for (d, &v) in px.iter_mut().zip(p) {
                    *d = u32::from(v);
                }
                count(&px[..ic]);
            }
        }
        Samples::U16(s) => {
            for p in s.chunks_exact(ic) {
                for (d, &v) in px.iter_mut().zip(p) {
                    *d = u32::from(v);
                }
                count(&px[..ic]);
            }
        }
    }
    hist
}
