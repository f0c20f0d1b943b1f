//! The resampling weights, computed on the host in f64 exactly as Pillow's
//! `precompute_coeffs` and `normalize_coeffs_8bpc` (src/libImaging/Resample.c) compute them,
//! then quantised to integers that every engine uses as they are; NEAREST's pixel choice as
//! Pillow's `ImagingScaleAffine` makes it; and the order of the 1-D passes.

use std::f64::consts::PI;

use super::Filter;

/// Fractional bits of the integer weights: Pillow's `PRECISION_BITS` (32 - 8 - 2).
pub const PRECISION_BITS: u32 = 22;

/// The overridable constants of wgsl/shared/resize_math.wgsl, which every resize kernel
/// imports: the image's layout (`channels` samples of `depth` bits) and whether the pass
/// premultiplies alpha (the first of an image with alpha) or divides it out (the last).
pub(super) fn math_overrides(
    channels: u8,
    depth: u32,
    (premultiply, unpremultiply): (bool, bool),
) -> [(&'static str, f64); 4] {
    let on = |b: bool| f64::from(u8::from(b));
    [
        ("CHANNELS", f64::from(channels)),
        ("DEPTH", f64::from(depth)),
        ("PREMULTIPLY", on(premultiply)),
        ("UNPREMULTIPLY", on(unpremultiply)),
    ]
}

/// The weights of one axis: output position `i` is the sum over `j < count[i]` of input
/// sample `start[i] + j` times `weights[i * ksize + j]`, in units of 2^-22.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Axis {
    /// Taps reserved per output position (Pillow's `ksize`); `count` may be fewer.
    pub ksize: usize,
    pub start: Vec<u32>,
    pub count: Vec<u32>,
    pub weights: Vec<i32>,
}

impl Axis {
    /// The output length.
    pub fn len(&self) -> usize {
        self.start.len()
    }

    /// Whether the output is empty (never: sizes are at least 1).
    pub fn is_empty(&self) -> bool {
        self.start.is_empty()
    }

    /// The taps of output position `i`: (first input position, weights).
    pub fn taps(&self, i: usize) -> (usize, &[i32]) {
        let k = &self.weights[i * self.ksize..];
        (self.start[i] as usize, &k[..self.count[i] as usize])
    }
}

/// A filter's kernel and support (Resample.c's `struct filter`).
fn kernel(filter: Filter) -> (fn(f64) -> f64, f64) {
    match filter {
        Filter::Box => (box_filter, 0.5),
        Filter::Bilinear => (bilinear_filter, 1.0),
        Filter::Bicubic => (bicubic_filter, 2.0),
        Filter::Lanczos3 => (lanczos_filter, 3.0),
        Filter::Nearest => unreachable!("NEAREST picks pixels: nearest_axis"),
    }
}

fn box_filter(x: f64) -> f64 {
    if x > -0.5 && x <= 0.5 {
        1.0
    } else {
        0.0
    }
}

fn bilinear_filter(x: f64) -> f64 {
    let x = x.abs();
    if x < 1.0 {
        1.0 - x
    } else {
        0.0
    }
}

fn bicubic_filter(x: f64) -> f64 {
    // Pillow's a = -0.5, its expressions in its order.
    let a = -0.5;
    let x = x.abs();
    if x < 1.0 {
        ((a + 2.0) * x - (a + 3.0)) * x * x + 1.0
    } else if x < 2.0 {
        (((x - 5.0) * x + 8.0) * x - 4.0) * a
    } else {
        0.0
    }
}

fn sinc_filter(x: f64) -> f64 {
    if x == 0.0 {
        return 1.0;
    }
    let x = x * PI;
    x.sin() / x
}

fn lanczos_filter(x: f64) -> f64 {
    if (-3.0..3.0).contains(&x) {
        sinc_filter(x) * sinc_filter(x / 3.0)
    } else {
        0.0
    }
}

/// The weights for resampling `in_size` samples to `out_size` with `filter` (not NEAREST):
/// Pillow's `precompute_coeffs` over the whole input (box 0..in_size), then
/// `normalize_coeffs_8bpc`.
pub fn axis(in_size: u32, out_size: u32, filter: Filter) -> Axis {
    let (f, support) = kernel(filter);
    // Pillow's box is float; exact for any size an image can have here (< 2^24).
    let scale = f64::from(in_size as f32) / f64::from(out_size);
    let filterscale = scale.max(1.0);
    let support = support * filterscale;
    let ksize = support.ceil() as usize * 2 + 1;
    let out = out_size as usize;
    let mut start = Vec::with_capacity(out);
    let mut count = Vec::with_capacity(out);
    let mut weights = vec![0i32; out * ksize];
    let inv_filterscale = 1.0 / filterscale;
    let mut k = vec![0f64; ksize];
    for xx in 0..out {
        let center = (xx as f64 + 0.5) * scale;
        let mut ww = 0.0;
        // C's (int) truncates towards zero, as `as i64` does.
        let xmin = ((center - support + 0.5) as i64).max(0);
        let xmax = ((center + support + 0.5) as i64).min(i64::from(in_size)) - xmin;
        let n = xmax.max(0) as usize;
        for (x, kx) in k.iter_mut().enumerate().take(n) {
            let w = f(((x as i64 + xmin) as f64 - center + 0.5) * inv_filterscale);
            *kx = w;
            ww += w;
        }
        let row = &mut weights[xx * ksize..][..n];
        for (q, &w) in row.iter_mut().zip(&k[..n]) {
            let w = if ww != 0.0 { w / ww } else { w };
            let scaled = w * f64::from(1u32 << PRECISION_BITS);
            *q = if w < 0.0 {
                (-0.5 + scaled) as i32
            } else {
                (0.5 + scaled) as i32
            };
        }
        start.push(xmin as u32);
        count.push(n as u32);
    }
    Axis {
        ksize,
        start,
        count,
        weights,
    }
}

/// NEAREST's choice as one weight of 1.0 a position: Pillow's `ImagingScaleAffine` for 8-bit
/// images (the position accumulated in f64 from one output pixel to the next) and its generic
/// transform for 16-bit ones (`I;16`: the position multiplied out).
pub fn nearest_axis(in_size: u32, out_size: u32, bit_depth: u32) -> Axis {
    let a0 = f64::from(in_size as f32) / f64::from(out_size);
    let mut start = Vec::with_capacity(out_size as usize);
    let mut xo = a0 * 0.5;
    for x in 0..out_size {
        let pos = if bit_depth == 8 {
            xo
        } else {
            a0 * (f64::from(x) + 0.5)
        };
        // Pillow's COORD; the position stays inside the input for every size up to 2^24
        // (the margin, half an input step, is far above the sum's rounding).
        let i = if pos < 0.0 { 0 } else { pos as u32 };
        start.push(i.min(in_size - 1));
        xo += a0;
    }
    Axis {
        ksize: 1,
        count: vec![1; start.len()],
        weights: vec![1 << PRECISION_BITS; start.len()],
        start,
    }
}

/// The direction of a 1-D pass.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dir {
    /// Along rows: changes the width.
    Horizontal,
    /// Along columns: changes the height.
    Vertical,
}

/// One 1-D pass: its direction and weights. Its result is rounded and clipped to the
/// image's depth before the next pass reads it, as Pillow's intermediate image is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Pass {
    pub dir: Dir,
    pub axis: Axis,
}

/// The passes that resize `in_w` x `in_h` to `out_w` x `out_h`, in Pillow 13.0.0's order
/// (`ImagingResampleInner`): each skipped where its dimension does not change; the
/// horizontal pass first, unless the height shrinks by more than twice as many pixels as the
/// width does. NEAREST picks along each axis in turn, which is Pillow's 2-D pick whatever
/// the order.
pub fn passes(
    in_w: u32,
    in_h: u32,
    out_w: u32,
    out_h: u32,
    filter: Filter,
    depth: u32,
) -> Vec<Pass> {
    let make = |dir, i, o| Pass {
        dir,
        axis: match filter {
            Filter::Nearest => nearest_axis(i, o, depth),
            _ => axis(i, o, filter),
        },
    };
    let h = (out_w != in_w).then(|| make(Dir::Horizontal, in_w, out_w));
    let v = (out_h != in_h).then(|| make(Dir::Vertical, in_h, out_h));
    let shrink_h = i64::from(in_h) - i64::from(out_h);
    let shrink_w = i64::from(in_w) - i64::from(out_w);
    let (first, second) = if shrink_h > 0 && shrink_h > 2 * shrink_w {
        (v, h)
    } else {
        (h, v)
    };
    first.into_iter().chain(second).collect()
}
