//! The native CPU engine for `blur`: computes exactly what `reference` (the reference) computes,
//! bit for bit, multi-threaded and in a shape the compiler vectorises.
//!
//! The reference blurs rows, transposes, blurs again and transposes back. The engine gets the
//! same numbers without transposing: the image is cut into tiles (a strip of columns times a
//! band of rows), each tile taken by one rayon task. A tile runs the row pass over each input
//! row it needs (its strip plus an r-pixel halo, clamped at the image edges) into a ring of
//! intermediate rows, and the column pass over that ring, vertically: a sliding window sum for
//! the box, the weighted taps for the gaussian, across a whole row segment at a time (so the
//! loops run along contiguous memory and vectorise). Every intermediate value is the
//! reference's, rounded the same way (`Arith`); the divisions by the window size are done as
//! an exact multiply and shift. Tiles do not depend on the thread count, and neither does any
//! result.

use anyhow::Result;
use rayon::prelude::*;

use super::arith::{arith, Arith, Premultiply};
use super::pack::alpha_lane;
use super::Options;
use crate::io::image::{Image, Samples};

/// The engine's blur: the same signature and result as `reference`.
pub fn blur(img: &Image, params: &Options) -> Result<Image> {
    blur_tiled(img, params, RING_BYTES)
}

/// How much intermediate a tile keeps (its ring of rows): about the L2 cache of one core.
const RING_BYTES: usize = 512 << 10;

/// The blur with tiles sized for `ring_bytes` of intermediate rows each (the tests take small
/// tiles to cover many on small images).
fn blur_tiled(img: &Image, params: &Options, ring_bytes: usize) -> Result<Image> {
    let max = img.max_value();
    let ar = arith(params, max, alpha_lane(img.channels))?;
    if img.pixels() == 0 {
        return Ok(img.clone());
    }
    let (w, h, c) = (
        img.width as usize,
        img.height as usize,
        img.channels as usize,
    );
    let geo = Geometry {
        w,
        h,
        c,
        radius: params.radius as usize,
        ring_bytes,
    };
    let n = params.iterations;
    Ok(match &img.samples {
        Samples::U8(s) => {
            let out = match &ar.alpha {
                None => run::<u8, u16>(s, &geo, &ar, max, n),
                Some(p) => run_alpha(s, &geo, &ar, p, n),
            };
            Image::new_u8(img.width, img.height, img.channels, out)
        }
        Samples::U16(s) => {
            let out = match &ar.alpha {
                None => run::<u16, u32>(s, &geo, &ar, max, n),
                Some(p) => run_alpha(s, &geo, &ar, p, n),
            };
            Image::new_u16(img.width, img.height, img.channels, out)
        }
    })
}

/// A sample type: the image's (u8, u16) or the intermediate's (u16 for 8-bit images, whose
/// row-pass values are at most 255 * 2^8; u32 for 16-bit ones).
trait Sample: Copy + Default + Send + Sync + 'static {
    fn get(self) -> u32;
    fn put(v: u32) -> Self;
}

impl Sample for u8 {
    #[inline(always)]
    fn get(self) -> u32 {
        self as u32
    }
    #[inline(always)]
    fn put(v: u32) -> Self {
        v as u8
    }
}

impl Sample for u16 {
    #[inline(always)]
    fn get(self) -> u32 {
        self as u32
    }
    #[inline(always)]
    fn put(v: u32) -> Self {
        v as u16
    }
}

impl Sample for u32 {
    #[inline(always)]
    fn get(self) -> u32 {
        self
    }
    #[inline(always)]
    fn put(v: u32) -> Self {
        v
    }
}

#[derive(Clone, Copy, Debug)]
struct Geometry {
    w: usize,
    h: usize,
    c: usize,
    radius: usize,
    ring_bytes: usize,
}

/// An image without alpha: the blur `iterations` times, on the image's own sample type.
fn run<T: Sample, M: Sample>(
    src: &[T],
    geo: &Geometry,
    ar: &Arith,
    max: u32,
    iterations: u32,
) -> Vec<T> {
    let passes = Passes {
        row: ar.first,
        column: ColumnArith::Finish(ar.second),
        max_in: max as u64,
    };
    let mut cur = blur_once::<T, M, T>(src, geo, &ar.weights, &passes);
    for _ in 1..iterations {
        cur = blur_once::<T, M, T>(&cur, geo, &ar.weights, &passes);
    }
    cur
}

/// An image with alpha: premultiplied into 16-bit lanes, blurred `iterations` times with
/// 32-bit fixed point between the iterations, and divided out of the last column pass's
/// window sums (the reference's steps).
fn run_alpha<T: Sample>(
    src: &[T],
    geo: &Geometry,
    ar: &Arith,
    p: &Premultiply,
    iterations: u32,
) -> Vec<T> {
    let c = geo.c;
    let mut premultiplied = vec![0u16; src.len()];
    premultiplied
        .par_chunks_mut(c * 4096)
        .zip(src.par_chunks(c * 4096))
        .for_each(|(dst, chunk)| {
            for (d, px) in dst.chunks_exact_mut(c).zip(chunk.chunks_exact(c)) {
                let a = px[p.lane].get();
                for (k, (o, s)) in d.iter_mut().zip(px).enumerate() {
                    let q = if k == p.lane {
                        a * p.scale
                    } else {
                        p.colour(s.get(), a)
                    };
                    *o = q as u16;
                }
            }
        });
    let w = &ar.weights;
    let last = ColumnArith::Unpremultiply(ar.second, *p);
    let first = |column| Passes {
        row: ar.first,
        column,
        max_in: p.max_lane() as u64,
    };
    if iterations == 1 {
        return blur_once::<u16, u32, T>(&premultiplied, geo, w, &first(last));
    }
    let keep = ColumnArith::Finish(ar.keep);
    let mut state = blur_once::<u16, u32, u32>(&premultiplied, geo, w, &first(keep));
    // The fixed point between iterations: the first row pass's largest output.
    let total = if w.is_empty() {
        2 * geo.radius as u64 + 1
    } else {
        w.iter().map(|&x| x as u64).sum()
    };
    let (mul, add, div) = ar.first;
    let later = |column| Passes {
        row: ar.keep,
        column,
        max_in: (total * p.max_lane() as u64 * mul as u64 + add as u64) / div as u64,
    };
    for _ in 2..iterations {
        state = blur_once::<u32, u32, u32>(&state, geo, w, &later(keep));
    }
    blur_once::<u32, u32, T>(&state, geo, w, &later(last))
}

/// What one application of both passes does: the row pass's rounding, what the column pass
/// makes of its sums, and the largest input sample.
struct Passes {
    row: (u32, u32, u32),
    column: ColumnArith,
    max_in: u64,
}

#[derive(Clone, Copy, Debug)]
enum ColumnArith {
    /// (S * mul + add) / div on every lane.
    Finish((u32, u32, u32)),
    /// The last pass of an image with alpha: that rounding on the alpha lane, the colour
    /// divided by the alpha sum.
    Unpremultiply((u32, u32, u32), Premultiply),
}

/// The column pass's output, with its divisions chosen for its sums.
#[derive(Clone, Copy, Debug)]
enum Column {
    Finish(Finish),
    Unpremultiply { alpha: Finish, p: Premultiply },
}

/// out = (S * mul + add) / div for every S a pass can produce, in the cheapest way that is
/// exact for every x = S * mul + add up to the pass's largest (checked when it is chosen).
#[derive(Clone, Copy, Debug)]
struct Finish {
    mul: u32,
    add: u32,
    how: Division,
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Division {
    /// div = 2^s: x >> s.
    Shift(u32),
    /// div = 2^s d with (x >> s) + 1 <= 2^22: ((x >> s) + 0.5) * fl(1/d) in f32, truncated.
    /// y = x >> s and y + 0.5 are exact in f32; the product is within a relative 2^-23 of
    /// (y + 0.5) / d < 2^22 / d, so within 0.5 / d of it, and (y + 0.5) / d lies at least
    /// 0.5 / d from every integer: the truncation is floor(y / d) = floor(x / div).
    Float { shift: u32, inv: f32 },
    /// (x * m) >> s, with m = ceil(2^s / div) < 2^32 and x (m div - 2^s) < 2^s for every x.
    Magic { m: u64, s: u32 },
    /// None of the above: a plain division.
    Divide(u32),
}

impl Finish {
    /// `max_sum`: the largest window sum S of the pass (it and S * mul + add fit 32 bits).
    fn new((mul, add, div): (u32, u32, u32), max_sum: u64) -> Finish {
        let x_max = max_sum * mul as u64 + add as u64;
        debug_assert!(x_max < 1 << 32);
        let shift = div.trailing_zeros();
        let d = div >> shift;
        let magic = || {
            (0..64u32).find_map(|s| {
                let m = (1u128 << s).div_ceil(div as u128);
                let e = m * div as u128 - (1u128 << s);
                (m <= u32::MAX as u128 && (x_max as u128) * e < 1u128 << s)
                    .then_some(Division::Magic { m: m as u64, s })
            })
        };
        let how = if d == 1 {
            Division::Shift(shift)
        } else if (x_max >> shift) < (1 << 22) - 1 {
            Division::Float {
                shift,
                inv: 1.0 / d as f32,
            }
        } else {
            magic().unwrap_or(Division::Divide(div))
        };
        Finish { mul, add, how }
    }

    /// The rounding of one sum.
    #[inline(always)]
    fn one(&self, v: u32) -> u32 {
        let mut out = [0u32];
        self.apply(&[v], &mut out);
        out[0]
    }

    /// Applies the rounding to `sums`, writing `out`.
    #[inline(always)]
    fn apply<M: Sample>(&self, sums: &[u32], out: &mut [M]) {
        self.apply_iter(out, sums.iter().copied());
    }

    /// Applies the rounding to each of `sums` (an iterator, so that a pass can compute its
    /// sums in the same vectorised loop), writing `out`. One loop per kind of division.
    #[inline(always)]
    fn apply_iter<M: Sample>(&self, out: &mut [M], sums: impl Iterator<Item = u32>) {
        let (mul, add) = (self.mul, self.add);
        let x = |s: u32| s.wrapping_mul(mul).wrapping_add(add);
        match self.how {
            Division::Shift(s) => {
                for (o, v) in out.iter_mut().zip(sums) {
                    *o = M::put(x(v) >> s);
                }
            }
            Division::Float { shift, inv } => {
                for (o, v) in out.iter_mut().zip(sums) {
                    // Through i32, which the vector units convert to and from f32 directly.
                    let q = ((x(v) >> shift) as i32 as f32 + 0.5) * inv;
                    // SAFETY: q is finite and in [0, 2^22) (see `Division::Float`).
                    *o = M::put(unsafe { q.to_int_unchecked::<i32>() } as u32);
                }
            }
            Division::Magic { m, s } => {
                for (o, v) in out.iter_mut().zip(sums) {
                    *o = M::put(((x(v) as u64 * m) >> s) as u32);
                }
            }
            Division::Divide(div) => {
                for (o, v) in out.iter_mut().zip(sums) {
                    *o = M::put(((v as u64 * mul as u64 + add as u64) / div as u64) as u32);
                }
            }
        }
    }
}

/// The output image, shared by the tile tasks, each of which writes only its own tile.
#[derive(Clone, Copy)]
struct OutPtr<T>(*mut T);
// SAFETY: tiles are disjoint, so no two tasks write the same element, and nothing reads the
// output until every task has finished.
unsafe impl<T: Send> Send for OutPtr<T> {}
unsafe impl<T: Send> Sync for OutPtr<T> {}

/// The constants of one blur over one image size.
struct Plan<'a> {
    geo: Geometry,
    /// Gaussian weights (empty for the box).
    weights: &'a [u32],
    first: Finish,
    column: Column,
    /// Rows of intermediate kept: the column pass's window (plus the row leaving it).
    ring_rows: usize,
}

/// One application of both passes.
fn blur_once<T: Sample, M: Sample, O: Sample>(
    src: &[T],
    geo: &Geometry,
    weights: &[u32],
    passes: &Passes,
) -> Vec<O> {
    let Geometry {
        w,
        h,
        c,
        radius: r,
        ring_bytes,
    } = *geo;
    let max_in = passes.max_in;
    let gauss = !weights.is_empty();
    let n = if gauss {
        weights.iter().map(|&x| x as u64).sum::<u64>()
    } else {
        2 * r as u64 + 1
    };
    let row = passes.row;
    let first = Finish::new(row, n * max_in);
    let mid_max = (n * max_in * row.0 as u64 + row.1 as u64) / row.2 as u64;
    let column = match passes.column {
        ColumnArith::Finish(a) => Column::Finish(Finish::new(a, n * mid_max)),
        ColumnArith::Unpremultiply(a, p) => Column::Unpremultiply {
            alpha: Finish::new(a, n * mid_max),
            p,
        },
    };
    let ring_rows = if gauss { 2 * r + 1 } else { 2 * r + 2 }.min(h);
    let plan = Plan {
        geo: *geo,
        weights,
        first,
        column,
        ring_rows,
    };

    // Strips keep a tile's ring of intermediate rows within `ring_bytes`, but are at least 4 windows wide so the halo stays a small part of each row's work.
    let row_bytes = c * std::mem::size_of::<M>();
    let strip = (ring_bytes / (ring_rows * row_bytes))
        .max(4 * (2 * r + 1))
        .max(64)
        .min(w);
    // Bands: each costs 2r extra intermediate rows, so they are at least 16r rows long.
    let band = (16 * r).max(64).min(h);
    let strips: Vec<(usize, usize)> = (0..w.div_ceil(strip))
        .map(|i| (i * strip, ((i + 1) * strip).min(w)))
        .collect();
    let bands: Vec<(usize, usize)> = (0..h.div_ceil(band))
        .map(|i| (i * band, ((i + 1) * band).min(h)))
        .collect();
    let tiles: Vec<((usize, usize), (usize, usize))> = bands
        .iter()
        .flat_map(|&b| strips.iter().map(move |&s| (s, b)))
        .collect();

    let mut out = vec![O::default(); w * h * c];
    let ptr = OutPtr(out.as_mut_ptr());
    let avx2 = has_avx2();
    tiles.par_iter().for_each(|&(xs, ys)| {
        #[cfg(target_arch = "x86_64")]
        if avx2 {
            // SAFETY: the CPU has AVX2 (checked above).
            return unsafe { tile_avx2::<T, M, O>(src, &plan, xs, ys, ptr) };
        }
        #[cfg(not(target_arch = "x86_64"))]
        let _ = avx2;
        tile::<T, M, O>(src, &plan, xs, ys, ptr);
    });
    out
}

/// Whether this CPU runs AVX2 (the tile code is compiled twice: for it, and for the target's
/// baseline).
fn has_avx2() -> bool {
    #[cfg(target_arch = "x86_64")]
    return std::arch::is_x86_feature_detected!("avx2");
    #[cfg(not(target_arch = "x86_64"))]
    false
}

/// `tile` compiled for AVX2: everything it calls is inlined into it, so its loops vectorise
/// 8 lanes wide.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn tile_avx2<T: Sample, M: Sample, O: Sample>(
    src: &[T],
    plan: &Plan,
    xs: (usize, usize),
    ys: (usize, usize),
    out: OutPtr<O>,
) {
    tile::<T, M, O>(src, plan, xs, ys, out)
}

/// Scratch of one tile.
struct Scratch<M> {
    /// The row pass's running sums over one row segment and its clamped halo (box), or that
    /// segment and halo widened (gaussian).
    pad: Vec<u32>,
    /// Window sums of a row segment, for box radii past the padded path.
    sums: Vec<u32>,
    /// Intermediate rows, row y in slot y % ring_rows.
    ring: Vec<M>,
}

/// Blurs the tile of columns `xs` and rows `ys` into `out`.
#[inline(always)]
fn tile<T: Sample, M: Sample, O: Sample>(
    src: &[T],
    plan: &Plan,
    (x0, x1): (usize, usize),
    (y0, y1): (usize, usize),
    out: OutPtr<O>,
) {
    let Geometry {
        w, h, c, radius: r, ..
    } = plan.geo;
    let seg = (x1 - x0) * c;
    let gauss = !plan.weights.is_empty();
    let mut sc = Scratch {
        pad: Vec::new(),
        sums: vec![0u32; seg],
        ring: vec![M::default(); plan.ring_rows * seg],
    };
    let clamp = |y: i64| y.clamp(0, h as i64 - 1) as usize;
    // The intermediate rows computed so far: all of first..=last are in the ring.
    let mut last = clamp(y0 as i64 - r as i64).wrapping_sub(1);
    let out_row = |y: usize| -> &mut [O] {
        // SAFETY: row y, columns x0..x1 of the output belong to this tile alone, and the slice
        // is dropped before the next one of the same row is made.
        unsafe { std::slice::from_raw_parts_mut(out.0.add((y * w + x0) * c), seg) }
    };
    let mut outrow = vec![0u32; seg];
    if gauss {
        let taps = plan.weights.len();
        for y in y0..y1 {
            fill_ring(
                src,
                plan,
                (x0, x1),
                &mut sc,
                &mut last,
                clamp((y + r) as i64),
            );
            let rows: Vec<&[M]> = (0..taps)
                .map(|k| {
                    let slot = clamp(y as i64 + k as i64 - r as i64) % plan.ring_rows;
                    &sc.ring[slot * seg..(slot + 1) * seg]
                })
                .collect();
            column_gauss(&rows, plan.weights, &mut outrow);
            plan.column_out(&outrow, out_row(y));
        }
    } else {
        // The window sum at y0: rows y0 - r ..= y0 + r, clamped, as counts of distinct rows.
        let (lo, hi) = (y0 as i64 - r as i64, y0 as i64 + r as i64);
        fill_ring(src, plan, (x0, x1), &mut sc, &mut last, clamp(hi));
        let mut sum = vec![0u32; seg];
        for y in clamp(lo)..=clamp(hi) {
            let times = (y as i64 == 0) as i64 * (-lo).max(0)
                + (y == h - 1) as i64 * (hi - (h as i64 - 1)).max(0)
                + 1;
            let slot = y % plan.ring_rows;
            let row = &sc.ring[slot * seg..(slot + 1) * seg];
            for (s, &v) in sum.iter_mut().zip(row) {
                *s = s.wrapping_add(v.get().wrapping_mul(times as u32));
            }
        }
        plan.column_out(&sum, out_row(y0));
        for y in y0 + 1..y1 {
            let add = clamp((y + r) as i64);
            let sub = clamp(y as i64 - r as i64 - 1);
            fill_ring(src, plan, (x0, x1), &mut sc, &mut last, add);
            let (sa, ss) = (add % plan.ring_rows, sub % plan.ring_rows);
            let a = &sc.ring[sa * seg..(sa + 1) * seg];
            let b = &sc.ring[ss * seg..(ss + 1) * seg];
            let sums = sum.iter_mut().zip(a).zip(b).map(|((s, &p), &q)| {
                *s = s.wrapping_add(p.get()).wrapping_sub(q.get());
                *s
            });
            match plan.column {
                Column::Finish(f) => f.apply_iter(out_row(y), sums),
                Column::Unpremultiply { .. } => {
                    for (o, s) in outrow.iter_mut().zip(sums) {
                        *o = s;
                    }
                    plan.column_out(&outrow, out_row(y));
                }
            }
        }
    }
}

impl Plan<'_> {
    /// The column pass's output from its window `sums` of one row segment.
    #[inline(always)]
    fn column_out<O: Sample>(&self, sums: &[u32], out: &mut [O]) {
        match &self.column {
            Column::Finish(f) => f.apply(sums, out),
            Column::Unpremultiply { alpha, p } => {
                let c = self.geo.c;
                for (s, o) in sums.chunks_exact(c).zip(out.chunks_exact_mut(c)) {
                    let sa = s[p.lane];
                    let a = alpha.one(sa);
                    for (k, (o, &v)) in o.iter_mut().zip(s).enumerate() {
                        *o = O::put(if a == 0 {
                            0
                        } else if k == p.lane {
                            a
                        } else {
                            p.unpremultiply(v, sa)
                        });
                    }
                }
            }
        }
    }
}

/// Runs the row pass over rows last + 1 ..= upto into the ring (`last` wraps below 0 when no
/// row has been computed yet).
#[inline(always)]
fn fill_ring<T: Sample, M: Sample>(
    src: &[T],
    plan: &Plan,
    (x0, x1): (usize, usize),
    sc: &mut Scratch<M>,
    last: &mut usize,
    upto: usize,
) {
    let Geometry { w, c, .. } = plan.geo;
    let seg = (x1 - x0) * c;
    for y in last.wrapping_add(1)..=upto {
        let slot = y % plan.ring_rows;
        let row = &src[y * w * c..(y + 1) * w * c];
        let Scratch { pad, sums, ring } = sc;
        let dst = &mut ring[slot * seg..(slot + 1) * seg];
        if plan.weights.is_empty() {
            row_box(row, plan, x0, x1, pad, sums, dst);
        } else {
            row_gauss(row, plan, x0, x1, pad, dst);
        }
        *last = y;
    }
}

/// Fills `pad` with pixels x0 - left .. x1 + right of `row`, clamped to the row, widened.
#[inline(always)]
fn fill_pad<T: Sample>(
    row: &[T],
    c: usize,
    w: usize,
    (x0, x1): (usize, usize),
    (left, right): (usize, usize),
    pad: &mut Vec<u32>,
) {
    pad.clear();
    let first = x0 as i64 - left as i64;
    let end = (x1 + right) as i64;
    let inside = (first.max(0) as usize, (end.min(w as i64)) as usize);
    for _ in first..0 {
        pad.extend(row[..c].iter().map(|v| v.get()));
    }
    pad.extend(row[inside.0 * c..inside.1 * c].iter().map(|v| v.get()));
    for _ in (w as i64).max(first)..end {
        pad.extend(row[(w - 1) * c..].iter().map(|v| v.get()));
    }
}

/// The row pass of the box over columns x0..x1 of one row.
#[inline(always)]
fn row_box<T: Sample, M: Sample>(
    row: &[T],
    plan: &Plan,
    x0: usize,
    x1: usize,
    pad: &mut Vec<u32>,
    sums: &mut [u32],
    dst: &mut [M],
) {
    let Geometry {
        w, c, radius: r, ..
    } = plan.geo;
    const PAD_LIMIT: usize = 1 << 14;
    if r <= PAD_LIMIT {
        // With P the running sum of e(x0 - r - 1 + j), j = 0, 1, ... (clamped to the row),
        // S(x0 + t) = P[t + 2r + 1] - P[t]: a serial pass of one add a sample, then a
        // vectorised one.
        let first = x0 as i64 - r as i64 - 1;
        let count = x1 - x0 + 2 * r + 1;
        pad.resize(count * c, 0);
        match c {
            1 => prefix::<T, 1>(row, w, first, count, pad),
            2 => prefix::<T, 2>(row, w, first, count, pad),
            3 => prefix::<T, 3>(row, w, first, count, pad),
            _ => prefix::<T, 4>(row, w, first, count, pad),
        }
        let off = (2 * r + 1) * c;
        let (lo, hi) = (&pad[..dst.len()], &pad[off..off + dst.len()]);
        let sums = hi.iter().zip(lo).map(|(h, l)| h.wrapping_sub(*l));
        plan.first.apply_iter(dst, sums);
    } else {
        // Radii far beyond any row: clamp each index instead of padding.
        let at = |x: i64, k: usize| row[x.clamp(0, w as i64 - 1) as usize * c + k].get();
        for k in 0..c {
            let (lo, hi) = (x0 as i64 - r as i64, x0 as i64 + r as i64);
            let inner: u32 = (lo.max(0)..=hi.min(w as i64 - 1))
                .map(|x| at(x, k))
                .fold(0, u32::wrapping_add);
            let mut s = inner
                .wrapping_add(at(0, k).wrapping_mul((-lo).max(0) as u32))
                .wrapping_add(
                    at(w as i64 - 1, k).wrapping_mul((hi - (w as i64 - 1)).max(0) as u32),
                );
            sums[k] = s;
            for x in x0 as i64 + 1..x1 as i64 {
                s = s
                    .wrapping_add(at(x + r as i64, k))
                    .wrapping_sub(at(x - r as i64 - 1, k));
                sums[(x as usize - x0) * c + k] = s;
            }
        }
        plan.first.apply(sums, dst);
    }
}

/// p[j] = the sum of e(first + i) over i in 0..=j, per channel, for `count` pixels, with e the
/// row clamped at its ends (wrapping: only differences of these are used).
#[inline(always)]
fn prefix<T: Sample, const C: usize>(row: &[T], w: usize, first: i64, count: usize, p: &mut [u32]) {
    let mut acc = [0u32; C];
    // Pixels j < left lie before the row, pixels j >= inside after it.
    let left = ((-first).max(0) as usize).min(count);
    let inside = ((w as i64 - first).max(0) as usize).min(count);
    let mut step = |dst: &mut [u32], src: &[T]| {
        for k in 0..C {
            acc[k] = acc[k].wrapping_add(src[k].get());
            dst[k] = acc[k];
        }
    };
    for dst in p[..left * C].chunks_exact_mut(C) {
        step(dst, &row[..C]);
    }
    let start = (first + left as i64) as usize * C;
    for (dst, src) in p[left * C..inside * C]
        .chunks_exact_mut(C)
        .zip(row[start..].chunks_exact(C))
    {
        step(dst, src);
    }
    for dst in p[inside * C..count * C].chunks_exact_mut(C) {
        step(dst, &row[(w - 1) * C..]);
    }
}

/// Vector width of the weighted sums, in samples.
const LANES: usize = 16;

/// The row pass of the gaussian over columns x0..x1 of one row.
#[inline(always)]
fn row_gauss<T: Sample, M: Sample>(
    row: &[T],
    plan: &Plan,
    x0: usize,
    x1: usize,
    pad: &mut Vec<u32>,
    dst: &mut [M],
) {
    let Geometry {
        w, c, radius: r, ..
    } = plan.geo;
    fill_pad(row, c, w, (x0, x1), (r, r), pad);
    let wt = plan.weights;
    let f = plan.first;
    let n = dst.len();
    let mut i = 0;
    // acc[i] = sum over k of w[k] * pad[i + k c]; the weights are symmetric, w[k] = w[2r - k].
    while i + LANES <= n {
        let mut acc = [0u32; LANES];
        let mid = &pad[i + r * c..][..LANES];
        for j in 0..LANES {
            acc[j] = wt[r].wrapping_mul(mid[j]);
        }
        for k in 0..r {
            let a = &pad[i + k * c..][..LANES];
            let b = &pad[i + (2 * r - k) * c..][..LANES];
            for j in 0..LANES {
                acc[j] = acc[j].wrapping_add(wt[k].wrapping_mul(a[j].wrapping_add(b[j])));
            }
        }
        f.apply(&acc, &mut dst[i..i + LANES]);
        i += LANES;
    }
    for i in i..n {
        let s = (0..wt.len()).fold(0u32, |s, k| {
            s.wrapping_add(wt[k].wrapping_mul(pad[i + k * c]))
        });
        f.apply(&[s], &mut dst[i..i + 1]);
    }
}

/// The column pass of the gaussian for one output row: out[x] = sum over k of w[k] rows[k][x].
#[inline(always)]
fn column_gauss<M: Sample>(rows: &[&[M]], wt: &[u32], out: &mut [u32]) {
    let r = wt.len() / 2;
    let n = out.len();
    let mut i = 0;
    while i + LANES <= n {
        let mut acc = [0u32; LANES];
        let mid = &rows[r][i..i + LANES];
        for j in 0..LANES {
            acc[j] = wt[r].wrapping_mul(mid[j].get());
        }
        for k in 0..r {
            let a = &rows[k][i..i + LANES];
            let b = &rows[2 * r - k][i..i + LANES];
            for j in 0..LANES {
                acc[j] =
                    acc[j].wrapping_add(wt[k].wrapping_mul(a[j].get().wrapping_add(b[j].get())));
            }
        }
        out[i..i + LANES].copy_from_slice(&acc);
        i += LANES;
    }
    for i in i..n {
        out[i] = (0..wt.len()).fold(0u32, |s, k| {
            s.wrapping_add(wt[k].wrapping_mul(rows[k][i].get()))
        });
    }
}

#[cfg(test)]
mod tests {
    use super::super::{gaussian_radius, reference, Kind};
    use super::*;

    fn xorshift(mut x: u32) -> impl FnMut() -> u32 {
        move || {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            x
        }
    }

    /// Noise with every sample value likely, and zero alpha on every 7th pixel.
    fn noise(w: u32, h: u32, channels: u8, sixteen: bool, seed: u32) -> Image {
        let n = (w * h * channels as u32) as usize;
        let mut next = xorshift(seed.wrapping_mul(2654435761) | 1);
        let c = channels as usize;
        // Indices of the alpha samples to zero.
        let zeroed: Vec<usize> = if c == 2 || c == 4 {
            (0..n / c).step_by(7).map(|i| i * c + c - 1).collect()
        } else {
            Vec::new()
        };
        if sixteen {
            let mut v: Vec<u16> = (0..n).map(|_| next() as u16).collect();
            zeroed.iter().for_each(|&i| v[i] = 0);
            Image::new_u16(w, h, channels, v)
        } else {
            let mut v: Vec<u8> = (0..n).map(|_| next() as u8).collect();
            zeroed.iter().for_each(|&i| v[i] = 0);
            Image::new_u8(w, h, channels, v)
        }
    }

    /// The engine equals the reference bit for bit, on one thread and on several.
    #[track_caller]
    fn check(img: &Image, params: Options) {
        let want = reference(img, &params).unwrap();
        for threads in [1, 3] {
            let pool = rayon::ThreadPoolBuilder::new()
                .num_threads(threads)
                .build()
                .unwrap();
            for ring_bytes in [RING_BYTES, 1 << 10] {
                let got = pool
                    .install(|| blur_tiled(img, &params, ring_bytes))
                    .unwrap();
                assert!(
                    got == want,
                    "{} {:?} r={} x{} on {threads} threads, {ring_bytes}-byte rings",
                    img.describe(),
                    params.kind,
                    params.radius,
                    params.iterations
                );
            }
        }
    }

    /// Every way of dividing equals the division, for every sum of a pass (sampled where
    /// there are many), with the constants of 8- and 16-bit box blurs.
    #[test]
    fn divisions_are_exact() {
        let mut seen = Vec::new();
        for max in [255u32, 65535] {
            for r in [0, 1, 2, 15, 31, 32, 100, 2000, 30000] {
                let Ok(ar) = arith(&Options::new(Kind::Box, r, 1), max, None) else {
                    continue;
                };
                let n = 2 * r as u64 + 1;
                let mid_max =
                    (n * max as u64 * ar.first.0 as u64 + ar.first.1 as u64) / ar.first.2 as u64;
                for (abc, max_sum) in [(ar.first, n * max as u64), (ar.second, n * mid_max)] {
                    let f = Finish::new(abc, max_sum);
                    seen.push(std::mem::discriminant(&f.how));
                    let (mul, add, div) = (abc.0 as u64, abc.1 as u64, abc.2 as u64);
                    let step = (max_sum / 300_000).max(1);
                    // Sums just below and at each multiple of div are where a quotient steps.
                    let sums = (0..=max_sum).step_by(step as usize).chain(
                        (1..=max_sum * mul / div)
                            .step_by((max_sum * mul / div / 30_000).max(1) as usize)
                            .flat_map(|q| [(q * div - add) / mul, (q * div - add).div_ceil(mul)]),
                    );
                    let sums: Vec<u32> = sums.filter(|&s| s <= max_sum).map(|s| s as u32).collect();
                    let mut got = vec![0u32; sums.len()];
                    f.apply(&sums, &mut got);
                    for (&s, &q) in sums.iter().zip(&got) {
                        assert_eq!(
                            q as u64,
                            (s as u64 * mul + add) / div,
                            "{abc:?} {:?} at {s}",
                            f.how
                        );
                    }
                }
            }
        }
        // Each kind was taken at least once.
        seen.sort_by_key(|d| format!("{d:?}"));
        seen.dedup();
        assert!(seen.len() >= 3, "{seen:?}");
    }

    #[test]
    fn box_sizes_and_radii_match_the_reference() {
        for (w, h) in [
            (1, 1),
            (1, 17),
            (17, 1),
            (2, 3),
            (31, 5),
            (33, 31),
            (65, 2),
            (257, 129),
        ] {
            for r in [0, 1, 2, 15, 100] {
                check(
                    &noise(w, h, 4, false, w * 31 + h),
                    Options::new(Kind::Box, r, 1),
                );
                check(
                    &noise(w, h, 1, true, w + h * 7),
                    Options::new(Kind::Box, r, 1),
                );
            }
        }
    }

    #[test]
    fn gaussian_sizes_and_radii_match_the_reference() {
        for (w, h) in [(1, 1), (2, 3), (63, 9), (64, 1), (65, 70), (257, 129)] {
            for r in [1, 2, 15] {
                let kind = Kind::Gaussian {
                    sigma: r as f64 / 2.0,
                };
                check(&noise(w, h, 4, false, w ^ h), Options::new(kind, r, 1));
                check(&noise(w, h, 3, true, w + h), Options::new(kind, r, 1));
            }
        }
        let wide = Kind::Gaussian { sigma: 40.0 };
        check(&noise(40, 30, 4, false, 5), Options::new(wide, 100, 1));
    }

    #[test]
    fn every_layout_depth_and_iteration_count_matches_the_reference() {
        let gauss1 = Kind::Gaussian { sigma: 1.0 };
        for channels in 1..=4u8 {
            for sixteen in [false, true] {
                let img = noise(33, 31, channels, sixteen, channels as u32);
                for params in [
                    Options::new(Kind::Box, 2, 1),
                    Options::new(Kind::Box, 2, 3),
                    Options::new(gauss1, gaussian_radius(1.0), 1),
                    Options::new(gauss1, gaussian_radius(1.0), 3),
                ] {
                    check(&img, params);
                }
            }
        }
    }

    #[test]
    fn tiles_and_large_radii_match_the_reference() {
        // Wide enough for several strips and tall enough for several bands.
        check(
            &noise(1500, 70, 3, false, 12),
            Options::new(Kind::Box, 2, 1),
        );
        check(&noise(700, 150, 1, true, 13), Options::new(Kind::Box, 3, 2));
        let g = Kind::Gaussian { sigma: 1.5 };
        check(&noise(1500, 70, 4, false, 14), Options::new(g, 4, 1));
        check(
            &noise(1700, 3, 4, false, 10),
            Options::new(Kind::Box, 100, 1),
        );
        check(
            &noise(3, 1700, 1, true, 11),
            Options::new(Kind::Box, 100, 1),
        );
        for (w, h) in [(1, 1), (7, 5), (5, 40)] {
            check(&noise(w, h, 4, false, 9), Options::new(Kind::Box, 300, 1));
            check(&noise(w, h, 2, true, 9), Options::new(Kind::Box, 1000, 2));
            // Beyond the padded path's limit: clamped indices.
            check(&noise(w, h, 3, false, 9), Options::new(Kind::Box, 20000, 1));
            let g = Kind::Gaussian { sigma: 160.0 };
            check(&noise(w, h, 3, false, 9), Options::new(g, 500, 1));
        }
    }
}
