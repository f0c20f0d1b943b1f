//! The native CPU engine for `histogram`: the same counts as `reference` (the
//! reference), multi-threaded. Pixels are taken a chunk per rayon task, each counting into its
//! own tables (copies per channel that alternate pixel by pixel, so that runs of equal values
//! do not wait on one counter); bins come from a table of `bin_of` per value (none where the
//! bin is the value), luminance from the reference's integer formula. 8-bit RGB(A) with 256
//! bins, the common case, has its own loop (`count_rgb8`): fixed 256-entry tables indexed by
//! the sample itself, four copies per channel, luminance computed a block at a time. Counts are exact, so the result does not depend on how
//! the pixels were split.

use rayon::prelude::*;

use super::{bin_of, Channels, Histogram, LUMA_SHIFT, LUMA_WEIGHTS};
use crate::io::image::{Image, Samples};

/// Pixels per task.
const CHUNK: usize = 1 << 16;

/// The engine's histogram: the same signature and result as `reference`.
pub fn histogram(img: &Image, channels: Channels, bins: u32) -> Histogram {
    let maxval = img.max_value();
    let lut: Vec<u32> = (0..=maxval).map(|v| bin_of(v, bins, maxval)).collect();
    let counts = match &img.samples {
        Samples::U8(s) => count_all(s, img.channels as usize, channels, bins, &lut),
        Samples::U16(s) => count_all(s, img.channels as usize, channels, bins, &lut),
    };
    let n = channels.count() as usize;
    let mut hist = Histogram::zeros(channels, bins);
    hist.pixels = img.pixels() as u64;
    // Channel-major tables (two copies each) to the bin-major counts of `Histogram`.
    let b = bins as usize;
    for c in 0..n {
        for bin in 0..b {
            hist.counts[bin * n + c] = counts[(2 * c) * b + bin] + counts[(2 * c + 1) * b + bin];
        }
    }
    hist
}

/// The reference's `luminance`, here so that it inlines into the counting loops.
#[inline(always)]
fn luminance(r: u32, g: u32, b: u32) -> u32 {
    let [wr, wg, wb] = LUMA_WEIGHTS;
    (wr * r + wg * g + wb * b + (1 << (LUMA_SHIFT - 1))) >> LUMA_SHIFT
}

trait Value: Copy + Send + Sync {
    /// Whether the samples are 8-bit (every value below 256).
    const BYTE: bool;
    fn get(self) -> u32;
}

impl Value for u8 {
    const BYTE: bool = true;
    #[inline(always)]
    fn get(self) -> u32 {
        self as u32
    }
}

impl Value for u16 {
    const BYTE: bool = false;
    #[inline(always)]
    fn get(self) -> u32 {
        self as u32
    }
}

/// Channel c, copy k (0 for even pixels, 1 for odd), bin at `(2c + k) * bins + bin`.
fn count_all<V: Value>(s: &[V], ic: usize, channels: Channels, bins: u32, lut: &[u32]) -> Vec<u64> {
    let n = channels.count() as usize;
    let len = 2 * n * bins as usize;
    s.par_chunks(CHUNK * ic)
        .fold(
            || vec![0u64; len],
            |mut t, chunk| {
                match (ic, channels.color, channels.alpha) {
                    (3, true, false) if bins == 256 && V::BYTE => count_rgb8::<V, 3>(chunk, &mut t),
                    (4, true, false) if bins == 256 && V::BYTE => count_rgb8::<V, 4>(chunk, &mut t),
                    (3, true, false) => count_rgb::<V, 3>(chunk, bins, lut, &mut t),
                    (4, true, false) => count_rgb::<V, 4>(chunk, bins, lut, &mut t),
                    (1, false, false) => count_gray(chunk, bins, lut, &mut t),
                    _ => count_any(chunk, ic, channels, bins, lut, &mut t),
                }
                t
            },
        )
        .reduce(
            || vec![0u64; len],
            |mut a, b| {
                a.iter_mut().zip(&b).for_each(|(x, y)| *x += y);
                a
            },
        )
}

/// RGB or RGBA pixels into red, green, blue and luminance: with a bin per value (`lut` the
/// identity) or through `lut`, compiled for AVX2 where the CPU has it.
fn count_rgb<V: Value, const IC: usize>(chunk: &[V], bins: u32, lut: &[u32], t: &mut [u64]) {
    let identity = lut.len() == bins as usize;
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: the CPU has AVX2.
        return unsafe {
            match identity {
                true => count_rgb_avx2::<V, IC, true>(chunk, bins, lut, t),
                false => count_rgb_avx2::<V, IC, false>(chunk, bins, lut, t),
            }
        };
    }
    match identity {
        true => count_rgb_with::<V, IC, true>(chunk, bins, lut, t),
        false => count_rgb_with::<V, IC, false>(chunk, bins, lut, t),
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn count_rgb_avx2<V: Value, const IC: usize, const IDENTITY: bool>(
    chunk: &[V],
    bins: u32,
    lut: &[u32],
    t: &mut [u64],
) {
    count_rgb_with::<V, IC, IDENTITY>(chunk, bins, lut, t)
}

/// Pixels luminance is computed for at a time, in a vectorised loop before they are counted.
const LUMA_BLOCK: usize = 256;

#[inline(always)]
fn count_rgb_with<V: Value, const IC: usize, const IDENTITY: bool>(
    chunk: &[V],
    bins: u32,
    lut: &[u32],
    t: &mut [u64],
) {
    let b = bins as usize;
    let bin = |v: u32| {
        if IDENTITY {
            v as usize
        } else {
            lut[v as usize] as usize
        }
    };
    let mut luma = [0u32; LUMA_BLOCK];
    if b > 4096 {
        // Large tables: straight into `t`, whose two copies per channel take even and odd
        // pixels.
        let (t0, rest) = t.split_at_mut(2 * b);
        let (t1, rest) = rest.split_at_mut(2 * b);
        let (t2, t3) = rest.split_at_mut(2 * b);
        for block in chunk.chunks(LUMA_BLOCK * IC) {
            for (i, px) in block.chunks_exact(IC).enumerate() {
                let k = (i & 1) * b;
                let (r, g, bl) = (px[0].get(), px[1].get(), px[2].get());
                t0[k + bin(r)] += 1;
                t1[k + bin(g)] += 1;
                t2[k + bin(bl)] += 1;
                t3[k + bin(luminance(r, g, bl))] += 1;
            }
        }
        return;
    }
    // Small tables: 32-bit ones for this chunk (fewer than 2^32 pixels), four copies per
    // channel: pixel i counts into copy i % 4, so a run of one value waits on a counter every
    // fourth pixel.
    let mut local = vec![0u32; 16 * b];
    let (t0, rest) = local.split_at_mut(4 * b);
    let (t1, rest) = rest.split_at_mut(4 * b);
    let (t2, t3) = rest.split_at_mut(4 * b);
    for block in chunk.chunks(LUMA_BLOCK * IC) {
        let luma = &mut luma[..block.len() / IC];
        for (y, px) in luma.iter_mut().zip(block.chunks_exact(IC)) {
            *y = luminance(px[0].get(), px[1].get(), px[2].get());
        }
        for (i, (px, &y)) in block.chunks_exact(IC).zip(luma.iter()).enumerate() {
            let k = (i & 3) * b;
            t0[k + bin(px[0].get())] += 1;
            t1[k + bin(px[1].get())] += 1;
            t2[k + bin(px[2].get())] += 1;
            t3[k + bin(y)] += 1;
        }
    }
    // Into the two u64 copies of each channel that `count_all` keeps.
    for (c, table) in local.chunks_exact(4 * b).enumerate() {
        for (bin, counts) in t[2 * c * b..(2 * c + 1) * b].iter_mut().enumerate() {
            *counts += (0..4).map(|k| table[k * b + bin] as u64).sum::<u64>();
        }
    }
}

/// 8-bit RGB or RGBA pixels into red, green, blue and luminance with 256 bins (a bin per
/// value, so the value indexes a 256-entry table with no bounds check), compiled for AVX2
/// where the CPU has it.
fn count_rgb8<V: Value, const IC: usize>(chunk: &[V], t: &mut [u64]) {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: the CPU has AVX2.
        return unsafe { count_rgb8_avx2::<V, IC>(chunk, t) };
    }
    count_rgb8_with::<V, IC>(chunk, t)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn count_rgb8_avx2<V: Value, const IC: usize>(chunk: &[V], t: &mut [u64]) {
    count_rgb8_with::<V, IC>(chunk, t)
}

/// Copies of each channel's table in `count_rgb8`: pixel i counts into copy i % COPIES.
const COPIES: usize = 4;

#[inline(always)]
fn count_rgb8_with<V: Value, const IC: usize>(chunk: &[V], t: &mut [u64]) {
    // [channel][copy][value], 32-bit (a chunk has fewer than 2^32 pixels).
    let mut local = [[[0u32; 256]; COPIES]; 4];
    let mut luma = [0u8; LUMA_BLOCK];
    let byte = |v: V| v.get() as u8 as usize;
    for block in chunk.chunks(LUMA_BLOCK * IC) {
        let n = block.len() / IC;
        // Luminance of 8-bit samples is at most 255.
        for (y, px) in luma.iter_mut().zip(block.chunks_exact(IC)) {
            *y = luminance(px[0].get(), px[1].get(), px[2].get()) as u8;
        }
        let groups = block.chunks_exact(COPIES * IC);
        let rest = groups.remainder();
        for (g, ys) in groups.zip(luma.chunks_exact(COPIES)) {
            let (g, ys) = (&g[..COPIES * IC], &ys[..COPIES]);
            for k in 0..COPIES {
                local[0][k][byte(g[k * IC])] += 1;
                local[1][k][byte(g[k * IC + 1])] += 1;
                local[2][k][byte(g[k * IC + 2])] += 1;
                local[3][k][ys[k] as usize] += 1;
            }
        }
        let done = n - rest.len() / IC;
        for (px, &y) in rest.chunks_exact(IC).zip(&luma[done..n]) {
            local[0][0][byte(px[0])] += 1;
            local[1][0][byte(px[1])] += 1;
            local[2][0][byte(px[2])] += 1;
            local[3][0][y as usize] += 1;
        }
    }
    // Into the first of the two u64 copies of each channel that `count_all` keeps.
    for (c, copies) in local.iter().enumerate() {
        for (bin, counts) in t[2 * c * 256..(2 * c + 1) * 256].iter_mut().enumerate() {
            *counts += copies.iter().map(|k| k[bin] as u64).sum::<u64>();
        }
    }
}

/// Gray pixels into gray.
fn count_gray<V: Value>(chunk: &[V], bins: u32, lut: &[u32], t: &mut [u64]) {
    let b = bins as usize;
    let mut pairs = chunk.chunks_exact(2);
    for pair in &mut pairs {
        t[lut[pair[0].get() as usize] as usize] += 1;
        t[b + lut[pair[1].get() as usize] as usize] += 1;
    }
    for v in pairs.remainder() {
        t[lut[v.get() as usize] as usize] += 1;
    }
}

/// Any other layout (gray in a colour histogram, alpha counted), as the reference reads it.
fn count_any<V: Value>(
    chunk: &[V],
    ic: usize,
    channels: Channels,
    bins: u32,
    lut: &[u32],
    t: &mut [u64],
) {
    let b = bins as usize;
    let maxval = lut.len() as u32 - 1;
    for p in chunk.chunks_exact(ic) {
        let v = p[0].get();
        let alpha = match ic {
            2 => p[1].get(),
            4 => p[3].get(),
            _ => maxval,
        };
        let mut vals = [0u32; 5];
        let k = if channels.color {
            let (g, bl) = if ic >= 3 {
                (p[1].get(), p[2].get())
            } else {
                (v, v)
            };
            vals[..4].copy_from_slice(&[v, g, bl, luminance(v, g, bl)]);
            4
        } else {
            vals[0] = v;
            1
        };
        vals[k] = alpha;
        let n = k + usize::from(channels.alpha);
        for (c, &x) in vals[..n].iter().enumerate() {
            t[2 * c * b + lut[x as usize] as usize] += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::reference;
    use super::*;

    fn noise(w: u32, h: u32, channels: u8, sixteen: bool, seed: u32) -> Image {
        let n = (w * h * channels as u32) as usize;
        let mut x = seed.wrapping_mul(2654435761) | 1;
        let mut next = move || {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            x
        };
        if sixteen {
            Image::new_u16(w, h, channels, (0..n).map(|_| next() as u16).collect())
        } else {
            Image::new_u8(w, h, channels, (0..n).map(|_| next() as u8).collect())
        }
    }

    /// The engine's counts equal the reference's, on one thread and on several.
    #[track_caller]
    fn check(img: &Image, channels: Channels, bins: u32) {
        let want = reference(img, channels, bins);
        for threads in [1, 3] {
            let pool = rayon::ThreadPoolBuilder::new()
                .num_threads(threads)
                .build()
                .unwrap();
            let got = pool.install(|| histogram(img, channels, bins));
            assert!(
                got == want,
                "{} {channels:?} {bins} bins on {threads} threads",
                img.describe()
            );
        }
    }

    #[test]
    fn every_layout_depth_and_bin_count_matches_the_reference() {
        for (w, h) in [(1, 1), (3, 5), (33, 31)] {
            for ic in 1..=4u8 {
                for sixteen in [false, true] {
                    let img = noise(w, h, ic, sixteen, w + h + ic as u32);
                    let bins_all: &[u32] = if sixteen {
                        &[1, 7, 256, 1000, 65536]
                    } else {
                        &[1, 7, 100, 255, 256]
                    };
                    for &bins in bins_all {
                        for alpha in [false, true] {
                            check(&img, Channels::of(ic, alpha), bins);
                        }
                        // A gray image in a colour histogram (a `--sum` over mixed images).
                        check(
                            &img,
                            Channels {
                                color: true,
                                alpha: true,
                            },
                            bins,
                        );
                    }
                }
            }
        }
    }

    // More pixels than one task takes (CHUNK).
    #[test]
    fn several_chunks_match_the_reference() {
        for (ic, sixteen) in [(3, false), (4, false), (4, true), (1, true)] {
            let img = noise(300, 250, ic, sixteen, 77);
            for bins in [7, 256] {
                check(&img, Channels::of(ic, false), bins);
            }
            check(&img, Channels::of(ic, true), 256);
        }
    }

    // Runs of one value: every increment of a pixel pair lands in the same bin.
    #[test]
    fn flat_images_match_the_reference() {
        let img = Image::new_u8(257, 3, 3, vec![200; 257 * 3 * 3]);
        check(&img, Channels::of(3, false), 256);
        let img = Image::new_u16(5, 3, 4, vec![65535; 5 * 3 * 4]);
        check(&img, Channels::of(4, true), 65536);
    }
}
