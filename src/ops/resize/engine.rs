//! The native CPU engine: what `--backend cpu` and the no-adapter fallback run. The same
//! integer sums as the reference, bit for bit, in a different order of work: rows in
//! parallel (rayon); 8-bit sums in i32 lanes (AVX2 where the CPU has it), pixels of 2 to 4
//! samples widened to 4 lanes so that two taps fill one 8-lane vector; 16-bit sums in i64.

use anyhow::Result;
use rayon::prelude::*;

use super::coeffs::{passes, Axis, Dir, PRECISION_BITS};
use super::reference::{premultiply, unpremultiply};
use super::{Filter, Options};
use crate::io::image::{Image, Samples};

/// A sample type and the accumulator its sums fit in exactly.
trait Sample: Copy + Default + Send + Sync + Into<u32> {
    const MAX: u32;
    fn from_u32(v: u32) -> Self;
}

impl Sample for u8 {
    const MAX: u32 = 255;
    fn from_u32(v: u32) -> u8 {
        v as u8
    }
}

impl Sample for u16 {
    const MAX: u32 = 65535;
    fn from_u32(v: u32) -> u16 {
        v as u16
    }
}

const HALF: i64 = 1 << (PRECISION_BITS - 1);

#[inline(always)]
fn finish32(sum: i32, max: u32) -> u32 {
    ((sum + HALF as i32) >> PRECISION_BITS).clamp(0, max as i32) as u32
}

#[inline(always)]
fn finish64(sum: i64, max: u32) -> u32 {
    ((sum + HALF) >> PRECISION_BITS).clamp(0, i64::from(max)) as u32
}

/// Resizes `img` as [`super::reference`] does.
pub fn resize(img: &Image, options: &Options) -> Result<Image> {
    let (out_w, out_h) = options.size.resolve(img.width, img.height)?;
    let plan = passes(
        img.width,
        img.height,
        out_w,
        out_h,
        options.filter,
        img.bit_depth(),
    );
    if plan.is_empty() {
        return Ok(img.clone());
    }
    let alpha = img.has_alpha() && options.filter != Filter::Nearest;
    let c = img.channels as usize;
    let (w, h) = (img.width as usize, img.height as usize);
    Ok(match &img.samples {
        Samples::U8(s) => {
            let (s, w, h) = run_passes(s, w, h, c, alpha, &plan);
            Image::new_u8(w as u32, h as u32, img.channels, s)
        }
        Samples::U16(s) => {
            let (s, w, h) = run_passes(s, w, h, c, alpha, &plan);
            Image::new_u16(w as u32, h as u32, img.channels, s)
        }
    })
}

fn run_passes<T: Sample>(
    src: &[T],
    mut w: usize,
    mut h: usize,
    c: usize,
    alpha: bool,
    plan: &[super::Pass],
) -> (Vec<T>, usize, usize) {
    let bits = if T::MAX == 255 { 8 } else { 16 };
    let mut cur: Vec<T> = if alpha {
        let mut v = src.to_vec();
        v.par_chunks_mut(c * 4096).for_each(|chunk| {
            for px in chunk.chunks_exact_mut(c) {
                let a = px[c - 1].into();
                for s in &mut px[..c - 1] {
                    *s = T::from_u32(premultiply((*s).into(), a, bits));
                }
            }
        });
        v
    } else {
        Vec::new()
    };
    for pass in plan {
        let input: &[T] = if alpha || !cur.is_empty() { &cur } else { src };
        let out = match pass.dir {
            Dir::Horizontal => horizontal(input, w, h, c, &pass.axis),
            Dir::Vertical => vertical(input, w * c, &pass.axis),
        };
        match pass.dir {
            Dir::Horizontal => w = pass.axis.len(),
            Dir::Vertical => h = pass.axis.len(),
        }
        cur = out;
    }
    if alpha {
        cur.par_chunks_mut(c * 4096).for_each(|chunk| {
            for px in chunk.chunks_exact_mut(c) {
                let a = px[c - 1].into();
                for s in &mut px[..c - 1] {
                    *s = T::from_u32(unpremultiply((*s).into(), a, T::MAX));
                }
            }
        });
    }
    (cur, w, h)
}

/// Whether every sum of `axis` over samples up to `max` fits in i32 with the rounding half
/// added: true for every filter and size (sums of |weight| stay near 1), checked anyway.
fn fits_i32(axis: &Axis, max: u32) -> bool {
    (0..axis.len()).all(|i| {
        let abs: i64 = axis
            .taps(i)
            .1
            .iter()
            .map(|&k| i64::from(k.unsigned_abs()))
            .sum();
        abs * i64::from(max) + HALF < i64::from(i32::MAX)
    })
}

/// The horizontal pass over `h` rows of `w` pixels of `c` samples.
fn horizontal<T: Sample>(src: &[T], w: usize, h: usize, c: usize, axis: &Axis) -> Vec<T> {
    let ow = axis.len();
    let mut out = vec![T::default(); ow * h * c];
    let wide = T::MAX == 255 && fits_i32(axis, T::MAX);
    // Each weight four times, for pixels widened to 4 lanes.
    let k4: Vec<i32> = if wide && c > 1 {
        axis.weights.iter().flat_map(|&k| [k; 4]).collect()
    } else {
        Vec::new()
    };
    let rows_per_task = (16384 / (w * c).max(1)).max(1);
    out.par_chunks_mut(ow * c * rows_per_task)
        .zip(src.par_chunks(w * c * rows_per_task))
        .for_each_init(Vec::new, |row4, (o, s)| {
            for (o, s) in o.chunks_exact_mut(ow * c).zip(s.chunks_exact(w * c)) {
                if !wide {
                    row_i64(s, o, c, axis);
                } else if c == 1 {
                    row_gray(s, o, axis);
                } else {
                    row4.clear();
                    row4.extend(s.chunks_exact(c).flat_map(|p| {
                        let mut q = [0i32; 4];
                        for (q, &v) in q.iter_mut().zip(p) {
                            *q = v.into() as i32;
                        }
                        q
                    }));
                    row_lanes(row4, o, c, axis, &k4);
                }
            }
        });
    out
}

/// One row, any depth: sums in i64.
fn row_i64<T: Sample>(s: &[T], o: &mut [T], c: usize, axis: &Axis) {
    for x in 0..axis.len() {
        let (first, ks) = axis.taps(x);
        for ch in 0..c {
            let sum: i64 = ks
                .iter()
                .enumerate()
                .map(|(j, &k)| i64::from(s[(first + j) * c + ch].into()) * i64::from(k))
                .sum();
            o[x * c + ch] = T::from_u32(finish64(sum, T::MAX));
        }
    }
}

/// One gray 8-bit row: a dot product per output sample.
fn row_gray<T: Sample>(s: &[T], o: &mut [T], axis: &Axis) {
    dispatch(|| {
        for (x, o) in o.iter_mut().enumerate() {
            let (first, ks) = axis.taps(x);
            let sum: i32 = s[first..first + ks.len()]
                .iter()
                .zip(ks)
                .map(|(&v, &k)| v.into() as i32 * k)
                .sum();
            *o = T::from_u32(finish32(sum, T::MAX));
        }
    })
}

/// One 8-bit row of pixels widened to 4 lanes (`s4`), with each weight four times (`k4`):
/// two taps a step in 8 lanes.
fn row_lanes<T: Sample>(s4: &[i32], o: &mut [T], c: usize, axis: &Axis, k4: &[i32]) {
    dispatch(|| {
        for x in 0..axis.len() {
            let (first, ks) = axis.taps(x);
            let n = ks.len();
            let px = &s4[first * 4..(first + n) * 4];
            let kk = &k4[x * axis.ksize * 4..][..n * 4];
            let mut acc = [0i32; 8];
            let pairs = px.chunks_exact(8).zip(kk.chunks_exact(8));
            for (p, k) in pairs {
                for l in 0..8 {
                    acc[l] += p[l] * k[l];
                }
            }
            if n % 2 == 1 {
                let (p, k) = (&px[(n - 1) * 4..], &kk[(n - 1) * 4..]);
                for l in 0..4 {
                    acc[l] += p[l] * k[l];
                }
            }
            for ch in 0..c {
                o[x * c + ch] = T::from_u32(finish32(acc[ch] + acc[ch + 4], T::MAX));
            }
        }
    })
}

/// The vertical pass over rows of `row` samples: each output row a weighted sum of input
/// rows, a whole row of lanes at a time.
fn vertical<T: Sample>(src: &[T], row: usize, axis: &Axis) -> Vec<T> {
    let oh = axis.len();
    let mut out = vec![T::default(); oh * row];
    let wide = T::MAX == 255 && fits_i32(axis, T::MAX);
    out.par_chunks_mut(row)
        .enumerate()
        .for_each_init(Vec::new, |acc, (y, o)| {
            let (first, ks) = axis.taps(y);
            if wide {
                dispatch(|| {
                    acc.clear();
                    acc.resize(row, 0i32);
                    for (j, &k) in ks.iter().enumerate() {
                        let r = &src[(first + j) * row..][..row];
                        for (a, &v) in acc.iter_mut().zip(r) {
                            *a += v.into() as i32 * k;
                        }
                    }
                    for (o, &a) in o.iter_mut().zip(acc.iter()) {
                        *o = T::from_u32(finish32(a, T::MAX));
                    }
                })
            } else {
                let mut acc64 = vec![0i64; row];
                for (j, &k) in ks.iter().enumerate() {
                    let r = &src[(first + j) * row..][..row];
                    for (a, &v) in acc64.iter_mut().zip(r) {
                        *a += i64::from(v.into()) * i64::from(k);
                    }
                }
                for (o, &a) in o.iter_mut().zip(&acc64) {
                    *o = T::from_u32(finish64(a, T::MAX));
                }
            }
        });
    out
}

/// Runs `f` compiled for AVX2 where the CPU has it (everything it calls inlined into it, so
/// its loops vectorise 8 lanes wide), else as it is.
#[inline(always)]
fn dispatch(f: impl FnOnce()) {
    #[cfg(target_arch = "x86_64")]
    if super::super::blur::engine::has_avx2() {
        // SAFETY: the CPU has AVX2 (checked just above).
        unsafe { avx2(f) };
        return;
    }
    f()
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn avx2(f: impl FnOnce()) {
    f()
}
