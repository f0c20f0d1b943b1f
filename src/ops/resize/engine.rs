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
    /// 8-bit samples as bytes (the i32 lanes' paths); None for 16-bit.
    fn bytes(s: &[Self]) -> Option<&[u8]>;
    fn bytes_mut(s: &mut [Self]) -> Option<&mut [u8]>;
}

impl Sample for u8 {
    const MAX: u32 = 255;
    fn from_u32(v: u32) -> u8 {
        v as u8
    }
    fn bytes(s: &[u8]) -> Option<&[u8]> {
        Some(s)
    }
    fn bytes_mut(s: &mut [u8]) -> Option<&mut [u8]> {
        Some(s)
    }
}

impl Sample for u16 {
    const MAX: u32 = 65535;
    fn from_u32(v: u32) -> u16 {
        v as u16
    }
    fn bytes(_: &[u16]) -> Option<&[u8]> {
        None
    }
    fn bytes_mut(_: &mut [u16]) -> Option<&mut [u8]> {
        None
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
    let bytes = T::bytes(src).filter(|_| fits_i32(axis, T::MAX));
    // Each weight four times, for pixels widened to 4 lanes.
    let k4: Vec<i32> = match bytes {
        Some(_) if c > 1 => axis.weights.iter().flat_map(|&k| [k; 4]).collect(),
        _ => Vec::new(),
    };
    let rows_per_task = (16384 / (w * c).max(1)).max(1);
    out.par_chunks_mut(ow * c * rows_per_task)
        .enumerate()
        .for_each_init(Vec::new, |row4, (t, o)| {
            let first_row = t * rows_per_task;
            for (r, o) in o.chunks_exact_mut(ow * c).enumerate() {
                let at = (first_row + r) * w * c;
                match (bytes, T::bytes_mut(o)) {
                    (Some(s), Some(o)) if c == 1 => row_gray(&s[at..at + w], o, axis),
                    (Some(s), Some(o)) => {
                        widen(&s[at..at + w * c], c, row4);
                        row_lanes(row4, o, c, axis, &k4);
                    }
                    _ => row_i64(&src[at..at + w * c], o, c, axis),
                }
            }
        });
    out
}

/// One row of 8-bit pixels of `c` samples as 4 bytes each (the rest zero).
fn widen(s: &[u8], c: usize, row4: &mut Vec<u8>) {
    row4.clear();
    row4.resize(s.len() / c * 4, 0);
    match c {
        4 => row4.copy_from_slice(s),
        3 => {
            // Four bytes read a pixel, the next pixel's first one masked off; the last
            // pixel copied on its own.
            let n = s.len() / 3;
            let (body, last) = row4.split_at_mut((n - 1) * 4);
            for (i, q) in body.chunks_exact_mut(4).enumerate() {
                let w = u32::from_le_bytes(s[i * 3..i * 3 + 4].try_into().expect("4 bytes"));
                q.copy_from_slice(&(w & 0x00ff_ffff).to_le_bytes());
            }
            last[..3].copy_from_slice(&s[(n - 1) * 3..]);
        }
        _ => {
            for (q, p) in row4.chunks_exact_mut(4).zip(s.chunks_exact(2)) {
                q[..2].copy_from_slice(p);
            }
        }
    }
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
fn row_gray(s: &[u8], o: &mut [u8], axis: &Axis) {
    #[inline(always)]
    fn body(s: &[u8], o: &mut [u8], axis: &Axis) {
        for (x, o) in o.iter_mut().enumerate() {
            let (first, ks) = axis.taps(x);
            let sum: i32 = s[first..first + ks.len()]
                .iter()
                .zip(ks)
                .map(|(&v, &k)| i32::from(v) * k)
                .sum();
            *o = finish32(sum, 255) as u8;
        }
    }
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2")]
    fn avx2(s: &[u8], o: &mut [u8], axis: &Axis) {
        body(s, o, axis)
    }
    #[cfg(target_arch = "x86_64")]
    if has_avx2() {
        // SAFETY: the CPU has AVX2 (checked just above).
        return unsafe { avx2(s, o, axis) };
    }
    body(s, o, axis)
}

/// One 8-bit row of pixels as 4 bytes each (`s4`), with each weight four times (`k4`): two
/// taps a step in 8 i32 lanes (AVX2 intrinsics where the CPU has it).
fn row_lanes(s4: &[u8], o: &mut [u8], c: usize, axis: &Axis, k4: &[i32]) {
    #[cfg(target_arch = "x86_64")]
    if has_avx2() {
        // SAFETY: the CPU has AVX2 (checked just above).
        return unsafe { row_lanes_avx2(s4, o, c, axis, k4) };
    }
    row_lanes_portable(s4, o, c, axis, k4)
}

/// [`row_lanes`] without AVX2: one tap a step in 4 lanes.
fn row_lanes_portable(s4: &[u8], o: &mut [u8], c: usize, axis: &Axis, k4: &[i32]) {
    for x in 0..axis.len() {
        let (first, ks) = axis.taps(x);
        let n = ks.len();
        let px = &s4[first * 4..(first + n) * 4];
        let kk = &k4[x * axis.ksize * 4..][..n * 4];
        let mut acc = [0i32; 4];
        for (p, k) in px.chunks_exact(4).zip(kk.chunks_exact(4)) {
            for l in 0..4 {
                acc[l] += i32::from(p[l]) * k[l];
            }
        }
        for ch in 0..c {
            o[x * c + ch] = finish32(acc[ch], 255) as u8;
        }
    }
}

/// [`row_lanes`] in AVX2: per output pixel, two taps (8 bytes widened to 8 i32 lanes) times
/// their weights a step; the halves added, rounded, shifted and clamped with saturating
/// packs (the same clip to 0..255).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn row_lanes_avx2(s4: &[u8], o: &mut [u8], c: usize, axis: &Axis, k4: &[i32]) {
    use std::arch::x86_64::*;
    for x in 0..axis.len() {
        let (first, ks) = axis.taps(x);
        let n = ks.len();
        // The loads below stay inside these slices.
        let px = &s4[first * 4..(first + n) * 4];
        let kk = &k4[x * axis.ksize * 4..][..n * 4];
        let mut acc = _mm256_setzero_si256();
        let mut j = 0;
        while j + 2 <= n {
            let p = _mm256_cvtepu8_epi32(_mm_loadl_epi64(px.as_ptr().add(j * 4).cast()));
            let k = _mm256_loadu_si256(kk.as_ptr().add(j * 4).cast());
            acc = _mm256_add_epi32(acc, _mm256_mullo_epi32(p, k));
            j += 2;
        }
        let mut sum = _mm_add_epi32(
            _mm256_castsi256_si128(acc),
            _mm256_extracti128_si256::<1>(acc),
        );
        if j < n {
            let word = i32::from_le_bytes(px[j * 4..j * 4 + 4].try_into().expect("4 bytes"));
            let p = _mm_cvtepu8_epi32(_mm_cvtsi32_si128(word));
            let k = _mm_loadu_si128(kk.as_ptr().add(j * 4).cast());
            sum = _mm_add_epi32(sum, _mm_mullo_epi32(p, k));
        }
        let half = _mm_set1_epi32(1 << (PRECISION_BITS - 1));
        let r = _mm_srai_epi32::<{ PRECISION_BITS as i32 }>(_mm_add_epi32(sum, half));
        let r = _mm_packus_epi16(_mm_packs_epi32(r, r), _mm_setzero_si128());
        let v = (_mm_cvtsi128_si32(r) as u32).to_le_bytes();
        o[x * c..x * c + c].copy_from_slice(&v[..c]);
    }
}

/// The vertical pass over rows of `row` samples: each output row a weighted sum of input
/// rows, a whole row of lanes at a time.
fn vertical<T: Sample>(src: &[T], row: usize, axis: &Axis) -> Vec<T> {
    let oh = axis.len();
    let mut out = vec![T::default(); oh * row];
    let bytes = T::bytes(src).filter(|_| fits_i32(axis, T::MAX));
    out.par_chunks_mut(row)
        .enumerate()
        .for_each_init(Vec::new, |acc, (y, o)| {
            let (first, ks) = axis.taps(y);
            match (bytes, T::bytes_mut(o)) {
                (Some(s), Some(o)) => column_sums(s, o, row, first, ks, acc),
                _ => {
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
            }
        });
    out
}

/// One 8-bit output row of the vertical pass, summed in i32 lanes.
fn column_sums(s: &[u8], o: &mut [u8], row: usize, first: usize, ks: &[i32], acc: &mut Vec<i32>) {
    #[inline(always)]
    fn body(s: &[u8], o: &mut [u8], row: usize, first: usize, ks: &[i32], acc: &mut Vec<i32>) {
        acc.clear();
        acc.resize(row, 0);
        for (j, &k) in ks.iter().enumerate() {
            let r = &s[(first + j) * row..][..row];
            for (a, &v) in acc.iter_mut().zip(r) {
                *a += i32::from(v) * k;
            }
        }
        for (o, &a) in o.iter_mut().zip(acc.iter()) {
            *o = finish32(a, 255) as u8;
        }
    }
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2")]
    fn avx2(s: &[u8], o: &mut [u8], row: usize, first: usize, ks: &[i32], acc: &mut Vec<i32>) {
        body(s, o, row, first, ks, acc)
    }
    #[cfg(target_arch = "x86_64")]
    if has_avx2() {
        // SAFETY: the CPU has AVX2 (checked just above).
        return unsafe { avx2(s, o, row, first, ks, acc) };
    }
    body(s, o, row, first, ks, acc)
}

pub(super) fn has_avx2() -> bool {
    super::super::blur::engine::has_avx2()
}

#[cfg(test)]
mod tests {
    use super::super::coeffs::axis;
    use super::super::{reference, Filter, Options, Size};
    use super::{row_lanes_portable, widen};
    use crate::io::image::{Image, Samples};

    // The path machines without AVX2 (ARM among them) run, which the tests elsewhere do not
    // reach on an AVX2 machine: rows resized by it against the reference's horizontal pass.
    #[test]
    fn portable_row_path_equals_the_reference() {
        for c in 2..=4u8 {
            let (w, h, ow) = (29u32, 3u32, 11u32);
            let mut s = 7u32;
            let data: Vec<u8> = (0..w * h * u32::from(c))
                .map(|_| {
                    s ^= s << 13;
                    s ^= s >> 17;
                    s ^= s << 5;
                    s as u8
                })
                .collect();
            // Opaque alpha, so that the reference's premultiply changes nothing and its
            // result is the horizontal pass alone.
            let data: Vec<u8> = data
                .chunks(usize::from(c))
                .flat_map(|p| {
                    let mut p = p.to_vec();
                    if c % 2 == 0 {
                        p[usize::from(c) - 1] = 255;
                    }
                    p
                })
                .collect();
            let img = Image::new_u8(w, h, c, data.clone());
            let size = Size::Exact {
                width: ow,
                height: h,
            };
            let want = reference(&img, &Options::new(size, Filter::Lanczos3)).unwrap();
            let a = axis(w, ow, Filter::Lanczos3);
            let k4: Vec<i32> = a.weights.iter().flat_map(|&k| [k; 4]).collect();
            let cu = usize::from(c);
            let mut got = vec![0u8; (ow * h) as usize * cu];
            let mut row4 = Vec::new();
            for (o, r) in got
                .chunks_mut(ow as usize * cu)
                .zip(data.chunks(w as usize * cu))
            {
                widen(r, cu, &mut row4);
                row_lanes_portable(&row4, o, cu, &a, &k4);
            }
            assert_eq!(Samples::U8(got), want.samples, "{c} channels");
        }
    }
}
