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
//!
//! Where the sums allow it (8-bit images without alpha, on a CPU with AVX2: `Plan::lanes16`),
//! the work runs on 16-bit lanes: the box's row pass keeps its running sums in wrapping u16
//! (`prefix16`), the gaussian multiplies pairs of 16-bit taps into 32-bit sums (pmaddwd:
//! `row_sums16`, `column_gauss16`). The box on 8-bit samples in and out runs wholly in 16-bit
//! lanes where its constants exist (`box8`).

use anyhow::Result;
use rayon::prelude::*;

use super::arith::{arith, Arith, Opaque, Premultiply};
use super::pack::alpha_lane;
use super::Options;
use crate::io::image::{recycle, Image, Samples};

#[cfg(target_arch = "x86_64")]
mod box8;

/// The engine's blur: the same signature and result as `reference`.
pub fn blur(img: &Image, params: &Options) -> Result<Image> {
    blur_tiled(img, params, RING_BYTES, true)
}

/// How much intermediate a tile keeps (its ring of rows): about the L2 cache of one core.
const RING_BYTES: usize = 512 << 10;

/// The blur with tiles sized for `ring_bytes` of intermediate rows each (the tests take small
/// tiles to cover many on small images), on 16-bit lanes where they fit if `lanes16` (the
/// tests also take the 32-bit ones).
fn blur_tiled(img: &Image, params: &Options, ring_bytes: usize, lanes16: bool) -> Result<Image> {
    let max = img.max_value();
    let ar = arith(params, max, alpha_lane(img.channels))?;
    if img.pixels() == 0 {
        return Ok(img.clone());
    }
    let geo = Geometry::of(img, params, ring_bytes, lanes16);
    let n = params.iterations;
    Ok(match &img.samples {
        Samples::U8(s) => {
            let out = match &ar.alpha {
                // A buffer a batch handed back, where there is one: no fresh pages.
                None => run::<u8, u16>(s, &geo, &ar, max, n, recycle::bytes(s.len())),
                Some(p) => run_alpha(s, &geo, &ar, p, n),
            };
            Image::new_u8(img.width, img.height, img.channels, out)
        }
        Samples::U16(s) => {
            let out = match &ar.alpha {
                None => run::<u16, u32>(s, &geo, &ar, max, n, vec![0; s.len()]),
                Some(p) => run_alpha(s, &geo, &ar, p, n),
            };
            Image::new_u16(img.width, img.height, img.channels, out)
        }
    })
}

/// [`blur`] into `out`, which holds the result's samples afterwards. For an image without
/// alpha blurred once, a buffer of the result's type and size is written over in place (a
/// frame stream's planes reuse theirs: no fresh pages to fault in every frame); otherwise
/// `out` is replaced by [`blur`]'s result.
pub fn blur_into(img: &Image, params: &Options, out: &mut Samples) -> Result<()> {
    let max = img.max_value();
    let ar = arith(params, max, alpha_lane(img.channels))?;
    let fits = match (&img.samples, &*out) {
        (Samples::U8(s), Samples::U8(o)) => s.len() == o.len(),
        (Samples::U16(s), Samples::U16(o)) => s.len() == o.len(),
        _ => false,
    };
    if !fits || ar.alpha.is_some() || params.iterations != 1 || img.pixels() == 0 {
        *out = blur(img, params)?.samples;
        return Ok(());
    }
    let geo = Geometry::of(img, params, RING_BYTES, true);
    // `run`'s passes, for its one iteration.
    let passes = Passes {
        row: ar.first,
        column: ColumnArith::Finish(ar.second),
        max_in: max as u64,
    };
    match (&img.samples, out) {
        (Samples::U8(s), Samples::U8(o)) => {
            blur_once_into::<u8, u16, u8>(s, &geo, &ar.weights, &passes, o)
        }
        (Samples::U16(s), Samples::U16(o)) => {
            blur_once_into::<u16, u32, u16>(s, &geo, &ar.weights, &passes, o)
        }
        _ => unreachable!("checked above"),
    }
    Ok(())
}

/// A sample type: the image's (u8, u16) or the intermediate's (u16 for 8-bit images, whose
/// row-pass values are at most 255 * 2^8; u32 for 16-bit ones).
trait Sample: Copy + Default + Send + Sync + 'static {
    fn get(self) -> u32;
    fn put(v: u32) -> Self;
    /// The samples as u16, if that is their type (the gaussian's 16-bit lanes).
    fn as_u16(_: &[Self]) -> Option<&[u16]> {
        None
    }
    fn as_u16_mut(_: &mut [Self]) -> Option<&mut [u16]> {
        None
    }
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
    #[inline(always)]
    fn as_u16(s: &[Self]) -> Option<&[u16]> {
        Some(s)
    }
    #[inline(always)]
    fn as_u16_mut(s: &mut [Self]) -> Option<&mut [u16]> {
        Some(s)
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
    /// Whether 16-bit lanes may be used (`Plan::lanes16`).
    lanes16: bool,
}

impl Geometry {
    fn of(img: &Image, params: &Options, ring_bytes: usize, lanes16: bool) -> Geometry {
        Geometry {
            w: img.width as usize,
            h: img.height as usize,
            c: img.channels as usize,
            radius: params.radius as usize,
            ring_bytes,
            lanes16,
        }
    }
}

/// An image without alpha: the blur `iterations` times, on the image's own sample type, the
/// first into `out` (of the image's size; every sample is written).
fn run<T: Sample, M: Sample>(
    src: &[T],
    geo: &Geometry,
    ar: &Arith,
    max: u32,
    iterations: u32,
    mut out: Vec<T>,
) -> Vec<T> {
    let passes = Passes {
        row: ar.first,
        column: ColumnArith::Finish(ar.second),
        max_in: max as u64,
    };
    blur_once_into::<T, M, T>(src, geo, &ar.weights, &passes, &mut out);
    let mut cur = out;
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
    let premultiplied = match p.div {
        1 => premultiply::<T, 1>(src, geo.c, p),
        _ => premultiply::<T, 65535>(src, geo.c, p),
    };
    let w = &ar.weights;
    let last = ColumnArith::Unpremultiply(ar.second, *p, ar.opaque());
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

/// The premultiplied lanes of an image with alpha (`DIV` is `p.div`).
fn premultiply<T: Sample, const DIV: u32>(src: &[T], c: usize, p: &Premultiply) -> Vec<u16> {
    debug_assert_eq!(DIV, p.div);
    let mut out = vec![0u16; src.len()];
    out.par_chunks_mut(c * 4096)
        .zip(src.par_chunks(c * 4096))
        .for_each(|(dst, chunk)| {
            for (d, px) in dst.chunks_exact_mut(c).zip(chunk.chunks_exact(c)) {
                let a = px[p.lane].get();
                for (k, (o, s)) in d.iter_mut().zip(px).enumerate() {
                    let q = if k == p.lane {
                        a * p.scale
                    } else {
                        Premultiply::colour_by::<DIV>(s.get(), a)
                    };
                    *o = q as u16;
                }
            }
        });
    out
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
    /// divided by the alpha sum (by a constant where the window is all opaque).
    Unpremultiply((u32, u32, u32), Premultiply, Option<Opaque>),
}

/// The column pass's output, with its divisions chosen for its sums.
#[derive(Clone, Copy, Debug)]
enum Column {
    Finish(Finish),
    Unpremultiply {
        alpha: Finish,
        p: Premultiply,
        opaque: Option<Opaque>,
    },
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
        // A shift where mul is a power of two (the vector units multiply 32-bit lanes slowly).
        if mul.is_power_of_two() {
            let k = mul.trailing_zeros();
            self.divide(out, sums, |s: u32| (s << k).wrapping_add(add))
        } else {
            self.divide(out, sums, |s: u32| s.wrapping_mul(mul).wrapping_add(add))
        }
    }

    /// `apply_iter` with x(S) = S * mul + add (wrapping) given.
    #[inline(always)]
    fn divide<M: Sample>(
        &self,
        out: &mut [M],
        sums: impl Iterator<Item = u32>,
        x: impl Fn(u32) -> u32,
    ) {
        let (mul, add) = (self.mul, self.add);
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
    /// 16-bit lanes where the sums allow them (and the CPU has AVX2): the box's row pass
    /// (`row_box16`), the gaussian's two passes (`row_gauss16`, `column_gauss16`; the ring
    /// then holds the intermediate biased, x ^ 0x8000).
    lanes16: bool,
    /// The box on 8-bit samples in and out, all in 16-bit lanes (`box8`), where its
    /// constants exist; implies `lanes16`.
    #[cfg(target_arch = "x86_64")]
    box8: Option<box8::Box8>,
}

/// One application of both passes.
fn blur_once<T: Sample, M: Sample, O: Sample>(
    src: &[T],
    geo: &Geometry,
    weights: &[u32],
    passes: &Passes,
) -> Vec<O> {
    let mut out = vec![O::default(); geo.w * geo.h * geo.c];
    blur_once_into::<T, M, O>(src, geo, weights, passes, &mut out);
    out
}

/// [`blur_once`] into `out` (of the image's size; every sample is written).
fn blur_once_into<T: Sample, M: Sample, O: Sample>(
    src: &[T],
    geo: &Geometry,
    weights: &[u32],
    passes: &Passes,
    out: &mut [O],
) {
    let Geometry {
        w,
        h,
        c,
        radius: r,
        ring_bytes,
        lanes16,
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
        ColumnArith::Unpremultiply(a, p, opaque) => Column::Unpremultiply {
            alpha: Finish::new(a, n * mid_max),
            p,
            opaque,
        },
    };
    let lanes16 = lanes16
        && has_avx2()
        && match gauss {
            true => fits_lanes16::<M>(weights, max_in),
            false => n * max_in <= u16::MAX as u64,
        };
    #[cfg(target_arch = "x86_64")]
    let box8 = match passes.column {
        ColumnArith::Finish(second)
            if lanes16 && !gauss && max_in == 255 && is::<T, u8>() && is::<O, u8>() =>
        {
            box8::Box8::new(n as u32, row, second)
        }
        _ => None,
    };
    #[cfg(target_arch = "x86_64")]
    let box8_rows = box8.map(|_| box8::Box8::ring_rows(r, h));
    #[cfg(not(target_arch = "x86_64"))]
    let box8_rows = None;
    let ring_rows = box8_rows.unwrap_or(if gauss { 2 * r + 1 } else { 2 * r + 2 }.min(h));
    let plan = Plan {
        geo: *geo,
        weights,
        first,
        column,
        ring_rows,
        lanes16,
        #[cfg(target_arch = "x86_64")]
        box8,
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

    assert_eq!(out.len(), w * h * c, "the output has the image's size");
    let ptr = OutPtr(out.as_mut_ptr());
    let avx2 = has_avx2();
    // Scratch is reused from tile to tile of one task (every value is written before it is
    // read).
    tiles
        .par_iter()
        .for_each_init(Scratch::default, |sc, &(xs, ys)| {
            #[cfg(target_arch = "x86_64")]
            if avx2 {
                // SAFETY: the CPU has AVX2 (checked above).
                return unsafe { tile_avx2::<T, M, O>(src, &plan, xs, ys, ptr, sc) };
            }
            #[cfg(not(target_arch = "x86_64"))]
            let _ = avx2;
            tile::<T, M, O>(src, &plan, xs, ys, ptr, sc);
        });
}

/// Whether `A` is the type `B`.
#[cfg(target_arch = "x86_64")]
fn is<A: 'static, B: 'static>() -> bool {
    std::any::TypeId::of::<A>() == std::any::TypeId::of::<B>()
}

/// Whether this CPU runs AVX2 (the tile code is compiled twice: for it, and for the target's
/// baseline).
pub(crate) fn has_avx2() -> bool {
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
    sc: &mut Scratch<M>,
) {
    tile::<T, M, O>(src, plan, xs, ys, out, sc)
}

/// Scratch of a tile.
#[derive(Default)]
struct Scratch<M> {
    /// The row pass's running sums over one row segment and its clamped halo (box), or that
    /// segment and halo widened (gaussian).
    pad: Vec<u32>,
    /// The same widened to 16 bits, for `row_gauss16`.
    pad16: Vec<u16>,
    /// Window sums of a row segment, for box radii past the padded path and `row_gauss16`.
    sums: Vec<u32>,
    /// Intermediate rows, row y in slot y % ring_rows.
    ring: Vec<M>,
    /// `box8`'s buffers, for its tiles.
    #[cfg(target_arch = "x86_64")]
    box8: box8::Scratch,
}

/// Blurs the tile of columns `xs` and rows `ys` into `out`.
#[inline(always)]
fn tile<T: Sample, M: Sample, O: Sample>(
    src: &[T],
    plan: &Plan,
    (x0, x1): (usize, usize),
    (y0, y1): (usize, usize),
    out: OutPtr<O>,
    sc: &mut Scratch<M>,
) {
    #[cfg(target_arch = "x86_64")]
    if let Some(bx) = &plan.box8 {
        // SAFETY: `box8` is set only where T and O are u8 (`blur_once_into`), so these are
        // the same slice and pointer.
        let src = unsafe { std::slice::from_raw_parts(src.as_ptr().cast::<u8>(), src.len()) };
        let out = OutPtr(out.0.cast::<u8>());
        return box8::tile(src, plan, bx, (x0, x1), (y0, y1), out, &mut sc.box8);
    }
    let Geometry {
        w, h, c, radius: r, ..
    } = plan.geo;
    let seg = (x1 - x0) * c;
    let gauss = !plan.weights.is_empty();
    sc.sums.resize(seg, 0);
    sc.ring.resize(plan.ring_rows * seg, M::default());
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
            fill_ring(src, plan, (x0, x1), sc, &mut last, clamp((y + r) as i64));
            let rows: Vec<&[M]> = (0..taps)
                .map(|k| {
                    let slot = clamp(y as i64 + k as i64 - r as i64) % plan.ring_rows;
                    &sc.ring[slot * seg..(slot + 1) * seg]
                })
                .collect();
            match plan.lanes16 {
                true => {
                    let rows: Vec<&[u16]> = rows.iter().map(|r| M::as_u16(r).unwrap()).collect();
                    // SAFETY: `lanes16` is set only where the CPU has AVX2.
                    #[cfg(target_arch = "x86_64")]
                    unsafe {
                        column_gauss16(&rows, plan.weights, &mut outrow)
                    };
                    #[cfg(not(target_arch = "x86_64"))]
                    unreachable!("{rows:?}");
                }
                false => column_gauss(&rows, plan.weights, &mut outrow),
            }
            plan.column_out(&outrow, out_row(y));
        }
    } else {
        // The window sum at y0: rows y0 - r ..= y0 + r, clamped, as counts of distinct rows.
        let (lo, hi) = (y0 as i64 - r as i64, y0 as i64 + r as i64);
        fill_ring(src, plan, (x0, x1), sc, &mut last, clamp(hi));
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
            fill_ring(src, plan, (x0, x1), sc, &mut last, add);
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
            Column::Unpremultiply { alpha, p, opaque } => {
                let c = self.geo.c;
                let opaque_sa = opaque.map_or(0, |o| o.sa);
                for (s, o) in sums.chunks_exact(c).zip(out.chunks_exact_mut(c)) {
                    let sa = s[p.lane];
                    let a = alpha.one(sa);
                    if let Some(op) = opaque.filter(|_| sa == opaque_sa && a != 0) {
                        for (k, (o, &v)) in o.iter_mut().zip(s).enumerate() {
                            *o = O::put(if k == p.lane { a } else { op.colour(v) });
                        }
                        continue;
                    }
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
        let Scratch {
            pad,
            pad16,
            sums,
            ring,
            ..
        } = sc;
        let dst = &mut ring[slot * seg..(slot + 1) * seg];
        if plan.weights.is_empty() && plan.lanes16 {
            row_box16(row, plan, x0, x1, pad16, dst);
        } else if plan.weights.is_empty() {
            row_box(row, plan, x0, x1, pad, sums, dst);
        } else if plan.lanes16 {
            row_gauss16(row, plan, x0, x1, pad16, sums, dst);
        } else {
            row_gauss(row, plan, x0, x1, pad, dst);
        }
        *last = y;
    }
}

/// Fills `pad` with pixels x0 - left .. x1 + right of `row`, clamped to the row, widened.
#[inline(always)]
fn fill_pad<T: Sample, P: Sample>(
    row: &[T],
    c: usize,
    w: usize,
    (x0, x1): (usize, usize),
    (left, right): (usize, usize),
    pad: &mut Vec<P>,
) {
    pad.clear();
    let first = x0 as i64 - left as i64;
    let end = (x1 + right) as i64;
    let inside = (first.max(0) as usize, (end.min(w as i64)) as usize);
    let widen = |v: &T| P::put(v.get());
    for _ in first..0 {
        pad.extend(row[..c].iter().map(widen));
    }
    pad.extend(row[inside.0 * c..inside.1 * c].iter().map(widen));
    for _ in (w as i64).max(first)..end {
        pad.extend(row[(w - 1) * c..].iter().map(widen));
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

/// `row_box` where every window sum fits 16 bits (`Plan::lanes16`): the running sums of the
/// row segment and its clamped halo in wrapping u16 lanes (`prefix16`), whose differences
/// are the window sums.
#[inline(always)]
fn row_box16<T: Sample, M: Sample>(
    row: &[T],
    plan: &Plan,
    x0: usize,
    x1: usize,
    pad: &mut Vec<u16>,
    dst: &mut [M],
) {
    let Geometry {
        w, c, radius: r, ..
    } = plan.geo;
    // Pixels x0 - r - 1 .. x1 + r, as `row_box`'s running sums start.
    fill_pad(row, c, w, (x0, x1), (r + 1, r), pad);
    // SAFETY: `lanes16` is set only where the CPU has AVX2.
    #[cfg(target_arch = "x86_64")]
    unsafe {
        match c {
            1 => prefix16::<1>(pad),
            2 => prefix16::<2>(pad),
            3 => prefix16::<3>(pad),
            _ => prefix16::<4>(pad),
        }
    };
    let off = (2 * r + 1) * c;
    let (lo, hi) = (&pad[..dst.len()], &pad[off..off + dst.len()]);
    let sums = hi.iter().zip(lo).map(|(h, l)| h.wrapping_sub(*l) as u32);
    plan.first.apply_iter(dst, sums);
}

/// p[j] becomes the sum of p[j], p[j - C], p[j - 2C], ... (wrapping): per channel running
/// sums of C-channel pixels, 16 lanes at a time (within a vector in log steps, then the last
/// pixel's sums of the vector before added).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn prefix16<const C: usize>(p: &mut [u16]) {
    use std::arch::x86_64::*;
    let n = p.len();
    // Lane i takes the sum in lane 16 - C + i % C of the vector before: lane 8 - C + i % C
    // of its upper half, which `carry` broadcasts to both halves first.
    let mut mask = [0u8; 32];
    for i in 0..16 {
        let lane = (8 - C + i % C) as u8;
        mask[2 * i] = 2 * lane;
        mask[2 * i + 1] = 2 * lane + 1;
    }
    let mask = _mm256_loadu_si256(mask.as_ptr() as *const __m256i);
    let mut carry = _mm256_setzero_si256();
    let mut i = 0;
    while i + 16 <= n {
        let at = p.as_mut_ptr().add(i) as *mut __m256i;
        let mut x = _mm256_loadu_si256(at);
        let mut s = C;
        while s < 16 {
            x = _mm256_add_epi16(x, shift_lanes(x, s));
            s *= 2;
        }
        x = _mm256_add_epi16(x, carry);
        _mm256_storeu_si256(at, x);
        carry = _mm256_shuffle_epi8(_mm256_permute2x128_si256(x, x, 0x11), mask);
        i += 16;
    }
    for j in i.max(C)..n {
        p[j] = p[j].wrapping_add(p[j - C]);
    }
}

/// The 16 u16 lanes of x moved up by s lanes (s in 1, 2, 3, 4, 6, 8, 12), zeros below.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
#[inline]
unsafe fn shift_lanes(x: std::arch::x86_64::__m256i, s: usize) -> std::arch::x86_64::__m256i {
    use std::arch::x86_64::*;
    // The low half moved to the high one, zeros below: what crosses the halves.
    let t = _mm256_permute2x128_si256(x, x, 0x08);
    match s {
        1 => _mm256_alignr_epi8(x, t, 14),
        2 => _mm256_alignr_epi8(x, t, 12),
        3 => _mm256_alignr_epi8(x, t, 10),
        4 => _mm256_alignr_epi8(x, t, 8),
        6 => _mm256_alignr_epi8(x, t, 4),
        8 => t,
        12 => _mm256_slli_si256(t, 8),
        _ => unreachable!("shift by {s} lanes"),
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

/// Whether the gaussian can run on 16-bit lanes (`row_gauss16`, `column_gauss16`): the
/// intermediate is 16-bit, every weight and the sum of two input samples fit i16.
fn fits_lanes16<M: Sample>(weights: &[u32], max_in: u64) -> bool {
    M::as_u16(&[]).is_some()
        && 2 * max_in <= i16::MAX as u64
        && weights.iter().all(|&w| w <= i16::MAX as u32)
}

/// `row_gauss` on 16-bit lanes (`Plan::lanes16`): the row segment widened to u16, the sums
/// by `row_sums16`, the ring's values biased.
#[inline(always)]
fn row_gauss16<T: Sample, M: Sample>(
    row: &[T],
    plan: &Plan,
    x0: usize,
    x1: usize,
    pad: &mut Vec<u16>,
    sums: &mut [u32],
    dst: &mut [M],
) {
    let Geometry {
        w, c, radius: r, ..
    } = plan.geo;
    fill_pad(row, c, w, (x0, x1), (r, r), pad);
    let sums = &mut sums[..dst.len()];
    // SAFETY: `lanes16` is set only where the CPU has AVX2.
    #[cfg(target_arch = "x86_64")]
    unsafe {
        row_sums16(pad, c, plan.weights, sums)
    };
    plan.first.apply(sums, dst);
    for v in M::as_u16_mut(dst).expect("lanes16: a 16-bit ring") {
        *v ^= 0x8000;
    }
}

/// The gaussian's row sums out[i] = sum over k of w[k] pad[i + k c], for i below out.len(),
/// with the weights symmetric (w[k] = w[2r - k]) and each below 2^15, and every
/// pad[j] + pad[j'] below 2^15: pmaddwd on pairs of the folded terms
/// pad[i + k c] + pad[i + (2r - k) c], 16 outputs at a time; the sums wrap as the
/// reference's do.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn row_sums16(pad: &[u16], c: usize, wt: &[u32], out: &mut [u32]) {
    use std::arch::x86_64::*;
    const L: usize = 16;
    let r = wt.len() / 2;
    let n = out.len();
    assert!(pad.len() >= n + 2 * r * c);
    let pair = |lo: u32, hi: u32| _mm256_set1_epi32((lo | hi << 16) as i32);
    // Folded pairs of taps (k, 2r - k) for k below r, two at a time; then the last
    // fold (if r is odd) with the centre, or the centre alone.
    let folds: Vec<_> = (0..r / 2).map(|j| pair(wt[2 * j], wt[2 * j + 1])).collect();
    let last = match r % 2 {
        1 => pair(wt[r - 1], wt[r]),
        _ => pair(wt[r], 0),
    };
    let p = pad.as_ptr();
    let load = |at: usize| _mm256_loadu_si256(p.add(at).cast());
    let fold = |i: usize, k: usize| _mm256_add_epi16(load(i + k * c), load(i + (2 * r - k) * c));
    let madd = |acc, a, b, w| {
        let (lo, hi) = acc;
        (
            _mm256_add_epi32(lo, _mm256_madd_epi16(_mm256_unpacklo_epi16(a, b), w)),
            _mm256_add_epi32(hi, _mm256_madd_epi16(_mm256_unpackhi_epi16(a, b), w)),
        )
    };
    let zero = _mm256_setzero_si256();
    let centre = |i: usize| match r % 2 {
        1 => (fold(i, r - 1), load(i + r * c)),
        _ => (load(i + r * c), zero),
    };
    let mut i = 0;
    // Two blocks of L at a time, then one.
    while i + L <= n {
        let two = i + 2 * L <= n;
        let (mut x, mut y) = ((zero, zero), (zero, zero));
        for (j, &w) in folds.iter().enumerate() {
            x = madd(x, fold(i, 2 * j), fold(i, 2 * j + 1), w);
            if two {
                y = madd(y, fold(i + L, 2 * j), fold(i + L, 2 * j + 1), w);
            }
        }
        let (a, b) = centre(i);
        x = madd(x, a, b, last);
        store_sums(out, i, x.0, x.1);
        if two {
            let (a, b) = centre(i + L);
            y = madd(y, a, b, last);
            store_sums(out, i + L, y.0, y.1);
            i += L;
        }
        i += L;
    }
    for (i, o) in out.iter_mut().enumerate().skip(i) {
        *o = (0..wt.len()).fold(0u32, |s, k| {
            s.wrapping_add(wt[k].wrapping_mul(pad[i + k * c] as u32))
        });
    }
}

/// The column pass of the gaussian on 16-bit lanes, from rows biased as `row_gauss16` leaves
/// them (x ^ 0x8000, which is x - 2^15 as i16): pmaddwd on pairs of rows, each weight below
/// 2^15, and 2^15 times the weights' total added back (the sums wrap as the reference's do).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn column_gauss16(rows: &[&[u16]], wt: &[u32], out: &mut [u32]) {
    use std::arch::x86_64::*;
    const L: usize = 16;
    let n = out.len();
    assert!(rows.len() == wt.len() && rows.iter().all(|r| r.len() >= n));
    let bias = wt
        .iter()
        .fold(0u32, |s, &w| s.wrapping_add(w))
        .wrapping_mul(1 << 15);
    let taps = wt.len();
    let pair = |lo: u32, hi: u32| _mm256_set1_epi32((lo | hi << 16) as i32);
    // Rows 2j and 2j + 1; then the last row alone if there is an odd number.
    let pairs: Vec<_> = (0..taps / 2)
        .map(|j| {
            let (a, b) = (rows[2 * j], rows[2 * j + 1]);
            (pair(wt[2 * j], wt[2 * j + 1]), a.as_ptr(), b.as_ptr())
        })
        .collect();
    let odd = (taps % 2 == 1).then(|| (pair(wt[taps - 1], 0), rows[taps - 1].as_ptr()));
    let load = |p: *const u16, at: usize| _mm256_loadu_si256(p.add(at).cast());
    let madd = |acc, a, b, w| {
        let (lo, hi) = acc;
        (
            _mm256_add_epi32(lo, _mm256_madd_epi16(_mm256_unpacklo_epi16(a, b), w)),
            _mm256_add_epi32(hi, _mm256_madd_epi16(_mm256_unpackhi_epi16(a, b), w)),
        )
    };
    let zero = _mm256_setzero_si256();
    let start = (
        _mm256_set1_epi32(bias as i32),
        _mm256_set1_epi32(bias as i32),
    );
    let mut i = 0;
    // Two blocks of L at a time, then one.
    while i + L <= n {
        let two = i + 2 * L <= n;
        let (mut x, mut y) = (start, start);
        for &(w, a, b) in &pairs {
            x = madd(x, load(a, i), load(b, i), w);
            if two {
                y = madd(y, load(a, i + L), load(b, i + L), w);
            }
        }
        if let Some((w, a)) = odd {
            x = madd(x, load(a, i), zero, w);
            if two {
                y = madd(y, load(a, i + L), zero, w);
            }
        }
        store_sums(out, i, x.0, x.1);
        if two {
            store_sums(out, i + L, y.0, y.1);
            i += L;
        }
        i += L;
    }
    for (i, o) in out.iter_mut().enumerate().skip(i) {
        *o = (0..taps).fold(0u32, |s, k| {
            s.wrapping_add(wt[k].wrapping_mul((rows[k][i] ^ 0x8000) as u32))
        });
    }
}

/// Stores 16 sums at out[i..]: `lo` holds those of lanes 0-3 and 8-11 of an unpack, `hi`
/// those of lanes 4-7 and 12-15.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn store_sums(
    out: &mut [u32],
    i: usize,
    lo: std::arch::x86_64::__m256i,
    hi: std::arch::x86_64::__m256i,
) {
    use std::arch::x86_64::*;
    let o = out[i..i + 16].as_mut_ptr() as *mut __m256i;
    _mm256_storeu_si256(o, _mm256_permute2x128_si256(lo, hi, 0x20));
    _mm256_storeu_si256(o.add(1), _mm256_permute2x128_si256(lo, hi, 0x31));
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
            for (ring_bytes, lanes16) in [(RING_BYTES, true), (1 << 10, true), (1 << 10, false)] {
                let got = pool
                    .install(|| blur_tiled(img, &params, ring_bytes, lanes16))
                    .unwrap();
                assert!(
                    got == want,
                    "{} {:?} r={} x{} on {threads} threads, {ring_bytes}-byte rings, 16-bit lanes {lanes16}",
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

    /// The 16-bit kernels against plain loops over the same values, at every width around
    /// their 16 lanes and at the extremes of their ranges.
    #[cfg(target_arch = "x86_64")]
    #[test]
    fn lanes16_kernels_match_plain_loops() {
        assert!(has_avx2(), "these kernels need AVX2, which this CPU lacks");
        let mut next = xorshift(99);
        for n in (0..=50).chain([255, 256, 257]) {
            for c in 1..=4 {
                let p: Vec<u16> = (0..n).map(|_| next() as u16).collect();
                let mut want = p.clone();
                for j in c..n {
                    want[j] = want[j].wrapping_add(want[j - c]);
                }
                let mut got = p.clone();
                // SAFETY: the CPU has AVX2 (checked above).
                unsafe {
                    match c {
                        1 => prefix16::<1>(&mut got),
                        2 => prefix16::<2>(&mut got),
                        3 => prefix16::<3>(&mut got),
                        _ => prefix16::<4>(&mut got),
                    }
                }
                assert_eq!(got, want, "prefix16 of {n} samples, {c} channels");
            }
            for (r, top) in [(0usize, 255u32), (1, 255), (2, 16383), (15, 255), (16, 255)] {
                for c in [1, 3, 4] {
                    // Weights up to 2^15 - 1, symmetric; samples random or all at the top.
                    let half: Vec<u32> = (0..=r).map(|_| next() % 32768).collect();
                    let wt: Vec<u32> = (0..=2 * r).map(|k| half[k.min(2 * r - k)]).collect();
                    for flat in [false, true] {
                        let sample = |x: u32| if flat { top } else { x % (top + 1) };
                        let pad: Vec<u16> =
                            (0..n + 2 * r * c).map(|_| sample(next()) as u16).collect();
                        let want: Vec<u32> = (0..n)
                            .map(|i| {
                                (0..=2 * r).fold(0u32, |s, k| {
                                    s.wrapping_add(wt[k] * pad[i + k * c] as u32)
                                })
                            })
                            .collect();
                        let mut got = vec![0u32; n];
                        // SAFETY: the CPU has AVX2 (checked above).
                        unsafe { row_sums16(&pad, c, &wt, &mut got) };
                        assert_eq!(got, want, "row_sums16 of {n}, r={r}, {c} channels");
                        // Rows of 16-bit intermediates, biased for column_gauss16.
                        let rows: Vec<Vec<u16>> = (0..=2 * r)
                            .map(|_| {
                                (0..n)
                                    .map(|_| if flat { 65535 } else { next() as u16 })
                                    .collect()
                            })
                            .collect();
                        let plain: Vec<&[u16]> = rows.iter().map(|r| &r[..]).collect();
                        let mut want = vec![0u32; n];
                        column_gauss(&plain, &wt, &mut want);
                        let biased: Vec<Vec<u16>> = rows
                            .iter()
                            .map(|r| r.iter().map(|v| v ^ 0x8000).collect())
                            .collect();
                        let biased: Vec<&[u16]> = biased.iter().map(|r| &r[..]).collect();
                        // SAFETY: the CPU has AVX2 (checked above).
                        unsafe { column_gauss16(&biased, &wt, &mut got) };
                        assert_eq!(got, want, "column_gauss16 of {n}, r={r}");
                    }
                }
            }
        }
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

    /// 8-bit images without alpha, which take the 16-bit lanes: the gaussian over several
    /// strips and bands, the box up to the largest radius whose sums fit 16 bits (128, at
    /// which a white image's sums are exactly 65535) and one beyond it.
    #[test]
    fn lanes16_paths_match_the_reference() {
        let g = Kind::Gaussian { sigma: 5.0 };
        check(&noise(700, 90, 3, false, 15), Options::new(g, 15, 1));
        check(&noise(300, 40, 1, false, 16), Options::new(g, 15, 2));
        let white = Image::new_u8(300, 20, 3, vec![255; 300 * 20 * 3]);
        for params in [
            Options::new(Kind::Box, 128, 1),
            Options::new(Kind::Box, 129, 1),
            Options::new(g, 15, 1),
        ] {
            check(&white, params);
            check(&noise(300, 20, 3, false, 17), params);
        }
    }

    /// 8-bit gray and RGB, which take `box8` where its constants exist and the other
    /// 16-bit lanes elsewhere: every radius to 40 and some beyond, on noise and on white (the
    /// largest sums), at odd sizes whose windows clamp at every edge, once and twice.
    #[test]
    fn box8_every_radius_matches_the_reference() {
        for r in (0..=40).chain([42, 63, 127, 128]) {
            for (w, h, c) in [(37, 23, 3), (130, 9, 1), (5, 41, 3), (1, 1, 1), (2, 70, 1)] {
                let img = noise(w, h, c, false, r * 7 + w);
                check(&img, Options::new(Kind::Box, r, 1));
                let white = Image::new_u8(w, h, c, vec![255; (w * h * c as u32) as usize]);
                check(&white, Options::new(Kind::Box, r, 1));
            }
            check(&noise(40, 30, 3, false, r), Options::new(Kind::Box, r, 2));
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

    // A frame stream's planes are blurred into the buffers of earlier frames: every sample of
    // a reused buffer is written over (its old ones gone), and a buffer of another size or
    // type, an image with alpha or several iterations still give the reference's result.
    #[test]
    fn blur_into_a_reused_buffer_equals_the_reference() {
        let cases = [
            (noise(37, 21, 1, false, 1), Options::new(Kind::Box, 5, 1)),
            (noise(37, 21, 1, true, 2), Options::new(Kind::Box, 3, 1)),
            (
                noise(19, 33, 3, false, 3),
                Options::new(Kind::Gaussian { sigma: 1.5 }, 3, 1),
            ),
            (noise(19, 33, 4, false, 4), Options::new(Kind::Box, 2, 1)),
            (noise(19, 33, 1, false, 5), Options::new(Kind::Box, 2, 3)),
        ];
        for (img, params) in cases {
            let want = reference(&img, &params).unwrap().samples;
            let n = img.pixels() * img.channels as usize;
            let stale = match &img.samples {
                Samples::U8(_) => Samples::U8(vec![0xa5; n]),
                Samples::U16(_) => Samples::U16(vec![0xa5a5; n]),
            };
            for mut out in [stale, Samples::U8(vec![1; 3]), Samples::U16(Vec::new())] {
                blur_into(&img, &params, &mut out).unwrap();
                assert!(
                    out == want,
                    "{}x{}x{} {params:?}",
                    img.width,
                    img.height,
                    img.channels
                );
            }
        }
    }
}
