//! The CPU reference: the mirror of wgsl/compare.wgsl, function for function, and the
//! integer pixel arithmetic both share (8-bit RGBA, blending over white, pixelmatch's YIQ
//! distance, the diff image's faded gray).

use rayon::prelude::*;

use super::antialiasing::antialiased;
use super::{
    same_shape, Comparison, Counts, Options, MAX_DELTA, RED, YELLOW, YIQ_I, YIQ_Q, YIQ_W, YIQ_Y,
};
use crate::io::image::{Image, Samples};

/// The threshold t as the integer the distance D ([`distance`]) is held against: a pixel
/// differs when D > floor(m · S), m = 35215 · t · t computed in f64 as
/// pixelmatch computes its `maxDelta`. D is pixelmatch's distance times
/// S = [`DISTANCE_SCALE`](super::DISTANCE_SCALE) exactly, so this is pixelmatch's test `delta > maxDelta` without rounding: for an integer
/// D, D > m · S exactly when D > floor(m · S).
pub fn threshold_units(t: f64) -> u128 {
    let m = MAX_DELTA * t * t;
    assert!((0.0..=MAX_DELTA).contains(&m), "threshold out of 0..=1");
    if m == 0.0 {
        return 0;
    }
    // m = mantissa · 2^exp exactly; S = 65025 · 5^20 · 2^20.
    let bits = m.to_bits();
    let biased = ((bits >> 52) & 0x7ff) as i32;
    let fraction = u128::from(bits & ((1u64 << 52) - 1));
    let (mantissa, exp) = if biased == 0 {
        (fraction, -1074)
    } else {
        (fraction | (1 << 52), biased - 1075)
    };
    // Below 2^53 · 2^63: no overflow.
    let product = mantissa * 65025 * 5u128.pow(20);
    let shift = exp + 20;
    if shift >= 0 {
        product << shift
    } else if shift > -128 {
        product >> -shift
    } else {
        0
    }
}

/// Read access to one image's pixels.
pub(super) struct View<'a> {
    pub(super) width: u32,
    pub(super) height: u32,
    pub(super) channels: usize,
    samples: &'a Samples,
}

impl<'a> View<'a> {
    pub(super) fn new(img: &'a Image) -> View<'a> {
        View {
            width: img.width,
            height: img.height,
            channels: img.channels as usize,
            samples: &img.samples,
        }
    }

    /// The samples of pixel (x, y); channels past `channels` are 0.
    pub(super) fn pixel(&self, x: u32, y: u32) -> [u32; 4] {
        let base = (y as usize * self.width as usize + x as usize) * self.channels;
        let mut p = [0u32; 4];
        match self.samples {
            Samples::U8(s) => {
                for (d, &v) in p.iter_mut().zip(&s[base..base + self.channels]) {
                    *d = u32::from(v);
                }
            }
            Samples::U16(s) => {
                for (d, &v) in p.iter_mut().zip(&s[base..base + self.channels]) {
                    *d = u32::from(v);
                }
            }
        }
        p
    }

    pub(super) fn sixteen(&self) -> bool {
        matches!(self.samples, Samples::U16(_))
    }
}

/// The pixel as 8-bit RGBA: gray spread to R = G = B, opaque without alpha, 16-bit samples
/// rounded to 8 bits.
pub(super) fn rgba8(p: [u32; 4], channels: usize, sixteen: bool) -> [u32; 4] {
    let q = if sixteen {
        p.map(|v| (v * 255 + 32767) / 65535)
    } else {
        p
    };
    match channels {
        1 => [q[0], q[0], q[0], 255],
        2 => [q[0], q[0], q[0], q[1]],
        3 => [q[0], q[1], q[2], 255],
        _ => q,
    }
}

/// Colour blended over white by alpha, in units of 1/255: c · a + 255 · (255 − a).
pub(super) fn blended(p: [u32; 4]) -> [i64; 3] {
    let a = i64::from(p[3]);
    [0, 1, 2].map(|c| i64::from(p[c]) * a + 255 * (255 - a))
}

pub(super) fn dot(w: [i64; 3], d: [i64; 3]) -> i64 {
    w[0] * d[0] + w[1] * d[1] + w[2] * d[2]
}

/// The blended colours' difference of two 8-bit RGBA pixels, in units of 1/255 (each
/// component below 65026 in size).
fn blended_difference(p: [u32; 4], q: [u32; 4]) -> [i64; 3] {
    let (bp, bq) = (blended(p), blended(q));
    [bp[0] - bq[0], bp[1] - bq[1], bp[2] - bq[2]]
}

/// pixelmatch's YIQ distance of two 8-bit RGBA pixels (blended over white), exactly, as the
/// integer D = 5053 Y² + 2990 I² + 1957 Q² of the difference with the coefficients scaled
/// to integers: pixelmatch's distance times [`DISTANCE_SCALE`](super::DISTANCE_SCALE). Y, I and Q stay below 2^44
/// and D below 2^99.
pub fn distance(p: [u32; 4], q: [u32; 4]) -> u128 {
    let d = blended_difference(p, q);
    let sq = |v: i64| u128::from(v.unsigned_abs()) * u128::from(v.unsigned_abs());
    u128::from(YIQ_W[0]) * sq(dot(YIQ_Y, d))
        + u128::from(YIQ_W[1]) * sq(dot(YIQ_I, d))
        + u128::from(YIQ_W[2]) * sq(dot(YIQ_Q, d))
}

/// pixelmatch's brightness delta of two 8-bit RGBA pixels, the Y of their blended colours'
/// difference, exactly, times 255 · 10^8: its sign and order are pixelmatch's.
pub fn brightness(p: [u32; 4], q: [u32; 4]) -> i64 {
    dot(YIQ_Y, blended_difference(p, q))
}

/// The faded gray of the expected pixel that the diff image shows where nothing differs:
/// pixelmatch's 0.1-alpha gray, 255 − (255 − luma) · alpha / 2550, rounded.
fn faded(p: [u32; 4]) -> u8 {
    let luma = (306 * p[0] + 601 * p[1] + 117 * p[2] + 512) >> 10;
    (255 - ((255 - luma) * p[3] + 1275) / 2550) as u8
}

/// The CPU reference: compares `a` (expected) and `b` (actual), which must have the same
/// size and layout ([`same_shape`](super::same_shape)), pixel by pixel; rows run in parallel.
pub fn reference(a: &Image, b: &Image, opts: &Options) -> Comparison {
    assert!(same_shape(a, b), "compare needs one size and layout");
    let pass = Pass {
        a,
        b,
        va: View::new(a),
        vb: View::new(b),
        opts,
        threshold: opts.threshold.map(threshold_units),
        c: a.channels as usize,
        opaque_gray: std::array::from_fn(|l| faded([l as u32, l as u32, l as u32, 255])),
    };
    let zero = || Counts::zeros(pass.c);
    if opts.diff {
        let mut rgb = vec![0u8; a.pixels() * 3];
        let counts = rgb
            .par_chunks_mut(a.width as usize * 3)
            .enumerate()
            .map(|(y, out)| pass.row(y as u32, Some(out)))
            .reduce(zero, Counts::add);
        let diff = Image::new_u8(a.width, a.height, 3, rgb);
        Comparison {
            counts,
            diff: Some(diff),
        }
    } else {
        let counts = (0..a.height)
            .into_par_iter()
            .map(|y| pass.row(y, None))
            .reduce(zero, Counts::add);
        Comparison { counts, diff: None }
    }
}

/// One comparison of two images, row by row.
struct Pass<'a> {
    a: &'a Image,
    b: &'a Image,
    va: View<'a>,
    vb: View<'a>,
    opts: &'a Options,
    threshold: Option<u128>,
    c: usize,
    /// [`faded`] of an opaque pixel, by its luma.
    opaque_gray: [u8; 256],
}

/// Pixels per span that [`Pass::row`] checks for equal samples first.
const SPAN: u32 = 64;

impl Pass<'_> {
    /// Row `y`'s counts, its diff pixels (RGB) written to `out` when drawn.
    ///
    /// A shortcut, not a different definition: in a span of pixels whose samples are all
    /// equal no pixel differs, so only the ignored pixels and the faded gray remain.
    fn row(&self, y: u32, mut out: Option<&mut [u8]>) -> Counts {
        let (a, va, c) = (self.a, &self.va, self.c);
        let mut k = Counts::zeros(c);
        k.pixels = u64::from(a.width);
        for x0 in (0..a.width).step_by(SPAN as usize) {
            let x1 = (x0 + SPAN).min(a.width);
            if self.same(y, x0, x1) {
                if let (Some(out), Samples::U8(s), true) =
                    (out.as_deref_mut(), &a.samples, self.opts.ignore.is_empty())
                {
                    // The common case of a diff image, 8-bit with nothing ignored: the same
                    // faded gray straight from the row's bytes.
                    let row = y as usize * a.width as usize;
                    let (x0, x1) = (x0 as usize, x1 as usize);
                    let pixels = s[(row + x0) * c..(row + x1) * c].chunks_exact(c);
                    if c == 3 {
                        // Opaque: the gray is a function of the luma alone.
                        for (p, o) in pixels.zip(out[x0 * 3..x1 * 3].chunks_exact_mut(3)) {
                            let [r, g, b] = [p[0], p[1], p[2]].map(u32::from);
                            let luma = (306 * r + 601 * g + 117 * b + 512) >> 10;
                            o.fill(self.opaque_gray[luma as usize]);
                        }
                        continue;
                    }
                    for (p, o) in pixels.zip(out[x0 * 3..x1 * 3].chunks_exact_mut(3)) {
                        let p = match *p {
                            [g] => [g, g, g, 255],
                            [g, a] => [g, g, g, a],
                            [r, g, b] => [r, g, b, 255],
                            [r, g, b, a, ..] => [r, g, b, a],
                            [] => unreachable!("an image has at least one channel"),
                        };
                        o.fill(faded(p.map(u32::from)));
                    }
                    continue;
                }
                for x in x0..x1 {
                    k.ignored += u64::from(self.opts.ignore.iter().any(|r| r.contains(x, y)));
                    if let Some(out) = out.as_deref_mut() {
                        let g = faded(rgba8(va.pixel(x, y), c, va.sixteen()));
                        out[x as usize * 3..x as usize * 3 + 3].fill(g);
                    }
                }
            } else {
                self.pixels(&mut k, y, x0..x1, out.as_deref_mut());
            }
        }
        k
    }

    /// Whether pixels x0..x1 of row `y` have the same samples in both images.
    fn same(&self, y: u32, x0: u32, x1: u32) -> bool {
        let row = y as usize * self.a.width as usize;
        let r = (row + x0 as usize) * self.c..(row + x1 as usize) * self.c;
        match (&self.a.samples, &self.b.samples) {
            (Samples::U8(p), Samples::U8(q)) => p[r.clone()] == q[r],
            (Samples::U16(p), Samples::U16(q)) => p[r.clone()] == q[r],
            _ => false,
        }
    }

    /// Pixels `xs` of row `y`, one by one, into `k` and `out`: the mirror of the shader's
    /// loop body.
    fn pixels(&self, k: &mut Counts, y: u32, xs: std::ops::Range<u32>, mut out: Option<&mut [u8]>) {
        let (va, vb, c, opts) = (&self.va, &self.vb, self.c, self.opts);
        for x in xs {
            let (pa, pb) = (va.pixel(x, y), vb.pixel(x, y));
            let a8 = rgba8(pa, c, va.sixteen());
            let mut colour = [faded(a8); 3];
            if opts.ignore.iter().any(|r| r.contains(x, y)) {
                k.ignored += 1;
            } else {
                for (ch, s) in k.channels.iter_mut().enumerate() {
                    let d = pa[ch].abs_diff(pb[ch]);
                    s.differing += u64::from(d != 0);
                    s.max_abs = s.max_abs.max(d);
                    s.sum_abs += u64::from(d);
                    s.sum_sq += u128::from(d * d);
                }
                let mut differs = pa != pb;
                if let (Some(t), true) = (self.threshold, differs) {
                    differs = distance(a8, rgba8(pb, c, vb.sixteen())) > t;
                }
                if differs {
                    if opts.antialiasing && (antialiased(va, vb, x, y) || antialiased(vb, va, x, y))
                    {
                        k.antialiased += 1;
                        colour = YELLOW;
                    } else {
                        k.differing += 1;
                        colour = RED;
                    }
                }
            }
            if let Some(out) = out.as_deref_mut() {
                out[x as usize * 3..x as usize * 3 + 3].copy_from_slice(&colour);
            }
        }
    }
}
