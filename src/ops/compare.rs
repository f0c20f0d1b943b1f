//! `compare`: how two images of one layout differ. Exact integer counts and sums per channel
//! (differing samples, largest absolute difference, sums of absolute and squared differences),
//! the number of differing pixels (exact equality, or pixelmatch's YIQ distance over a
//! threshold, with optional anti-aliasing detection), MAE, RMSE, PSNR and SSIM derived from
//! them, and a diff image.
//!
//! The counts and the diff image come from one GPU pass, `compare` (wgsl/compare.wgsl), over
//! strips of rows, with per-workgroup partials summed on the host; [`compare_cpu`] is its
//! reference, pixel for pixel the same arithmetic. The perceptual distance is defined in
//! integers so both agree exactly on every adapter. SSIM ([`ssim`]) is computed on the host
//! in f64, so it is the same whichever engine ran the counts.

use std::borrow::Cow;

use anyhow::{bail, Result};
use rayon::prelude::*;
use serde::Serialize;

use crate::bench::{Case, Unit};
use crate::gpu::{Batch, Engine, Gpu, Kernel, Timings, Usage};
use crate::io::image::{Image, Samples};
use crate::shader;

/// pixelmatch's YIQ coefficients (0.29889531, 0.58662247, 0.11448223 / 0.59597799,
/// -0.27417610, -0.32180189 / 0.21147017, -0.52261711, 0.31114694) scaled by 1024 and
/// rounded so that Y sums to 1024 and I and Q to 0 (gray has no chroma).
/// Keep in sync with wgsl/compare.wgsl.
pub const YIQ_Y: [i64; 3] = [306, 601, 117];
pub const YIQ_I: [i64; 3] = [610, -281, -329];
pub const YIQ_Q: [i64; 3] = [216, -535, 319];
/// The weights of Y², I², Q² in the distance (0.5053, 0.299, 0.1957) scaled by 1024.
pub const YIQ_W: [u64; 3] = [517, 306, 200];
/// pixelmatch's largest distance, 35215: the threshold t stands for 35215 t².
pub const MAX_DELTA: f64 = 35215.0;

/// Colours of the diff image (RGB): a pixel that differs, one taken for anti-aliasing.
pub const RED: [u8; 3] = [255, 0, 0];
pub const YELLOW: [u8; 3] = [255, 255, 0];

// The GPU pass's shape. Keep in sync with wgsl/compare.wgsl.
const WG_SIZE: u32 = 256;
const PER_THREAD: u32 = 16;
const PART_WORDS: usize = 24;
// Rows of halo each side of a strip: anti-aliasing detection looks two pixels away.
const HALO: u32 = 2;

/// A rectangle of pixels, corners included: `x1:y1-x2:y2` on the command line.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Rect {
    pub x1: u32,
    pub y1: u32,
    pub x2: u32,
    pub y2: u32,
}

impl Rect {
    pub fn contains(&self, x: u32, y: u32) -> bool {
        (self.x1..=self.x2).contains(&x) && (self.y1..=self.y2).contains(&y)
    }
}

impl std::str::FromStr for Rect {
    type Err = String;
    fn from_str(s: &str) -> Result<Rect, String> {
        let bad = || format!("expected x1:y1-x2:y2 (corners included), like 0:0-99:19; got {s:?}");
        let (p, q) = s.split_once('-').ok_or_else(bad)?;
        let point = |t: &str| -> Option<(u32, u32)> {
            let (x, y) = t.split_once(':')?;
            Some((x.trim().parse().ok()?, y.trim().parse().ok()?))
        };
        let ((x1, y1), (x2, y2)) = (point(p).ok_or_else(bad)?, point(q).ok_or_else(bad)?);
        if x2 < x1 || y2 < y1 {
            return Err(format!(
                "{s:?}: the second corner must not be left of or above the first"
            ));
        }
        Ok(Rect { x1, y1, x2, y2 })
    }
}

/// What counts as a difference, and what to draw.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Options {
    /// `None`: a pixel differs when any sample differs. `Some(t)`, t in 0..=1: when its YIQ
    /// distance exceeds pixelmatch's threshold t (see [`threshold_units`]).
    pub threshold: Option<f64>,
    /// Pixels that differ but look anti-aliased (pixelmatch's test) are counted apart, not
    /// as differing.
    pub antialiasing: bool,
    /// Pixels inside these are left out of every metric.
    pub ignore: Vec<Rect>,
    /// Draw the diff image.
    pub diff: bool,
}

/// The threshold t as the integer the distance D ([`distance`]) is held against: a pixel
/// differs when D > floor(35215 t² · 1024³ · 255²). D is pixelmatch's distance in units of
/// 1/(1024³ · 255²), so this is pixelmatch's test with its coefficients rounded to 1/1024.
pub fn threshold_units(t: f64) -> u64 {
    (MAX_DELTA * t * t * 65025.0 * (1u64 << 30) as f64).floor() as u64
}

/// One channel's exact sums over the compared (not ignored) pixels.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ChannelSums {
    /// Pixels where this channel's samples differ.
    pub differing: u64,
    pub max_abs: u32,
    pub sum_abs: u64,
    pub sum_sq: u128,
}

/// Exact counts of one comparison.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Counts {
    pub pixels: u64,
    /// Pixels that differ (by the threshold), anti-aliased ones excepted.
    pub differing: u64,
    /// Pixels that differ but were taken for anti-aliasing (only with `antialiasing`).
    pub antialiased: u64,
    /// Pixels inside an ignored rectangle.
    pub ignored: u64,
    pub channels: Vec<ChannelSums>,
}

impl Counts {
    fn zeros(channels: usize) -> Counts {
        Counts {
            pixels: 0,
            differing: 0,
            antialiased: 0,
            ignored: 0,
            channels: vec![ChannelSums::default(); channels],
        }
    }

    fn add(mut self, o: Counts) -> Counts {
        self.pixels += o.pixels;
        self.differing += o.differing;
        self.antialiased += o.antialiased;
        self.ignored += o.ignored;
        for (s, o) in self.channels.iter_mut().zip(o.channels) {
            s.differing += o.differing;
            s.max_abs = s.max_abs.max(o.max_abs);
            s.sum_abs += o.sum_abs;
            s.sum_sq += o.sum_sq;
        }
        self
    }
}

/// The counts, and the diff image (RGB 8-bit) when asked for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Comparison {
    pub counts: Counts,
    pub diff: Option<Image>,
}

/// The names of the channels of an image with `channels` samples per pixel.
pub fn channel_names(channels: u8) -> &'static [&'static str] {
    match channels {
        1 => &["gray"],
        2 => &["gray", "alpha"],
        3 => &["red", "green", "blue"],
        _ => &["red", "green", "blue", "alpha"],
    }
}

/// Why two images cannot be compared sample by sample, if they cannot.
pub fn layout_mismatch(a: &Image, b: &Image) -> Option<String> {
    if (a.width, a.height) != (b.width, b.height) {
        Some(format!(
            "size differs: {}x{} expected, {}x{} actual",
            a.width, a.height, b.width, b.height
        ))
    } else if (a.channels, a.bit_depth()) != (b.channels, b.bit_depth()) {
        Some(format!(
            "layout differs: {} expected, {} actual",
            a.describe(),
            b.describe()
        ))
    } else {
        None
    }
}

/// The top-left `width` x `height` of `img`: the common area `--allow-size-change` compares.
pub fn crop(img: &Image, width: u32, height: u32) -> Image {
    let (w, c) = (img.width as usize, img.channels as usize);
    let row = width as usize * c;
    let rows = 0..height as usize;
    match &img.samples {
        Samples::U8(s) => Image::new_u8(
            width,
            height,
            img.channels,
            rows.flat_map(|y| &s[y * w * c..y * w * c + row])
                .copied()
                .collect(),
        ),
        Samples::U16(s) => Image::new_u16(
            width,
            height,
            img.channels,
            rows.flat_map(|y| &s[y * w * c..y * w * c + row])
                .copied()
                .collect(),
        ),
    }
}

// ---------------------------------------------------------------------------------------
// The CPU reference: the mirror of wgsl/compare.wgsl, function for function.

/// Read access to one image's pixels.
struct View<'a> {
    width: u32,
    height: u32,
    channels: usize,
    samples: &'a Samples,
}

impl<'a> View<'a> {
    fn new(img: &'a Image) -> View<'a> {
        View {
            width: img.width,
            height: img.height,
            channels: img.channels as usize,
            samples: &img.samples,
        }
    }

    /// The samples of pixel (x, y); channels past `channels` are 0.
    fn pixel(&self, x: u32, y: u32) -> [u32; 4] {
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

    fn sixteen(&self) -> bool {
        matches!(self.samples, Samples::U16(_))
    }
}

/// The pixel as 8-bit RGBA: gray spread to R = G = B, opaque without alpha, 16-bit samples
/// rounded to 8 bits.
fn rgba8(p: [u32; 4], channels: usize, sixteen: bool) -> [u32; 4] {
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
fn blended(p: [u32; 4]) -> [i64; 3] {
    let a = i64::from(p[3]);
    [0, 1, 2].map(|c| i64::from(p[c]) * a + 255 * (255 - a))
}

fn dot(w: [i64; 3], d: [i64; 3]) -> i64 {
    w[0] * d[0] + w[1] * d[1] + w[2] * d[2]
}

/// pixelmatch's YIQ distance of two 8-bit RGBA pixels, as the integer
/// D = 517 Y² + 306 I² + 200 Q² of their blended colours' difference.
pub fn distance(p: [u32; 4], q: [u32; 4]) -> u64 {
    let (bp, bq) = (blended(p), blended(q));
    let d = [bp[0] - bq[0], bp[1] - bq[1], bp[2] - bq[2]];
    let sq = |v: i64| v.unsigned_abs() * v.unsigned_abs();
    YIQ_W[0] * sq(dot(YIQ_Y, d)) + YIQ_W[1] * sq(dot(YIQ_I, d)) + YIQ_W[2] * sq(dot(YIQ_Q, d))
}

/// pixelmatch's brightness delta (Y only) of two pixels of one image: 0 when they are equal.
fn brightness_delta(p: [u32; 4], q: [u32; 4], channels: usize, sixteen: bool) -> i64 {
    if p == q {
        return 0;
    }
    let (bp, bq) = (
        blended(rgba8(p, channels, sixteen)),
        blended(rgba8(q, channels, sixteen)),
    );
    dot(YIQ_Y, [bp[0] - bq[0], bp[1] - bq[1], bp[2] - bq[2]])
}

/// The 3x3 neighbourhood of (x, y) clipped to the image, and whether (x, y) is on its edge.
fn around(v: &View, x: u32, y: u32) -> (u32, u32, u32, u32, u32) {
    let (x0, y0) = (x.saturating_sub(1), y.saturating_sub(1));
    let (x2, y2) = ((x + 1).min(v.width - 1), (y + 1).min(v.height - 1));
    let edge = x == x0 || x == x2 || y == y0 || y == y2;
    (x0, y0, x2, y2, u32::from(edge))
}

/// Whether pixel (x1, y1) has 3 or more neighbours of exactly its value (pixels on the
/// image's edge count one extra): pixelmatch's `hasManySiblings`.
fn has_many_siblings(v: &View, x1: u32, y1: u32) -> bool {
    let (x0, y0, x2, y2, mut zeroes) = around(v, x1, y1);
    let centre = v.pixel(x1, y1);
    for x in x0..=x2 {
        for y in y0..=y2 {
            if x == x1 && y == y1 {
                continue;
            }
            if v.pixel(x, y) == centre {
                zeroes += 1;
            }
            if zeroes > 2 {
                return true;
            }
        }
    }
    false
}

/// Whether pixel (x1, y1) of `img` looks anti-aliased: pixelmatch's `antialiased`, with
/// `other` the other image. Its brightest and darkest neighbours are found in x-major
/// order, first one kept on ties, as pixelmatch does.
fn antialiased(img: &View, other: &View, x1: u32, y1: u32) -> bool {
    let (x0, y0, x2, y2, mut zeroes) = around(img, x1, y1);
    let centre = img.pixel(x1, y1);
    let (mut lo, mut hi) = (0i64, 0i64);
    let (mut lo_at, mut hi_at) = ((0, 0), (0, 0));
    for x in x0..=x2 {
        for y in y0..=y2 {
            if x == x1 && y == y1 {
                continue;
            }
            let delta = brightness_delta(centre, img.pixel(x, y), img.channels, img.sixteen());
            if delta == 0 {
                zeroes += 1;
                if zeroes > 2 {
                    return false;
                }
            } else if delta < lo {
                lo = delta;
                lo_at = (x, y);
            } else if delta > hi {
                hi = delta;
                hi_at = (x, y);
            }
        }
    }
    if lo == 0 || hi == 0 {
        return false;
    }
    (has_many_siblings(img, lo_at.0, lo_at.1) && has_many_siblings(other, lo_at.0, lo_at.1))
        || (has_many_siblings(img, hi_at.0, hi_at.1) && has_many_siblings(other, hi_at.0, hi_at.1))
}

/// The faded gray of the expected pixel that the diff image shows where nothing differs:
/// pixelmatch's 0.1-alpha gray, 255 − (255 − luma) · alpha / 2550, rounded.
fn faded(p: [u32; 4]) -> u8 {
    let luma = (306 * p[0] + 601 * p[1] + 117 * p[2] + 512) >> 10;
    (255 - ((255 - luma) * p[3] + 1275) / 2550) as u8
}

/// The CPU reference: compares `a` (expected) and `b` (actual), which must have the same
/// layout ([`layout_mismatch`]), pixel by pixel; rows run in parallel.
pub fn compare_cpu(a: &Image, b: &Image, opts: &Options) -> Comparison {
    assert!(layout_mismatch(a, b).is_none(), "compare needs one layout");
    let (va, vb) = (View::new(a), View::new(b));
    let threshold = opts.threshold.map(threshold_units);
    let c = va.channels;
    let w = a.width as usize;
    // Pixels xs of row y, one by one: the mirror of the shader's loop body.
    let pixels = |k: &mut Counts, y: u32, xs: std::ops::Range<u32>, mut out: Option<&mut [u8]>| {
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
                if let (Some(t), true) = (threshold, differs) {
                    differs = distance(a8, rgba8(pb, c, vb.sixteen())) > t;
                }
                if differs {
                    if opts.antialiasing
                        && (antialiased(&va, &vb, x, y) || antialiased(&vb, &va, x, y))
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
    };
    // A shortcut, not a different definition: in a span of pixels whose samples are all
    // equal no pixel differs, so only the ignored pixels and the faded gray remain.
    const SPAN: u32 = 64;
    let same = |y: u32, x0: u32, x1: u32| {
        let row = y as usize * w;
        let r = (row + x0 as usize) * c..(row + x1 as usize) * c;
        match (&a.samples, &b.samples) {
            (Samples::U8(p), Samples::U8(q)) => p[r.clone()] == q[r],
            (Samples::U16(p), Samples::U16(q)) => p[r.clone()] == q[r],
            _ => false,
        }
    };
    let row = |y: u32, mut out: Option<&mut [u8]>| -> Counts {
        let mut k = Counts::zeros(c);
        k.pixels = u64::from(a.width);
        for x0 in (0..a.width).step_by(SPAN as usize) {
            let x1 = (x0 + SPAN).min(a.width);
            if same(y, x0, x1) {
                for x in x0..x1 {
                    k.ignored += u64::from(opts.ignore.iter().any(|r| r.contains(x, y)));
                    if let Some(out) = out.as_deref_mut() {
                        let g = faded(rgba8(va.pixel(x, y), c, va.sixteen()));
                        out[x as usize * 3..x as usize * 3 + 3].fill(g);
                    }
                }
            } else {
                pixels(&mut k, y, x0..x1, out.as_deref_mut());
            }
        }
        k
    };
    let zero = || Counts::zeros(c);
    if opts.diff {
        let mut rgb = vec![0u8; a.pixels() * 3];
        let counts = rgb
            .par_chunks_mut(w * 3)
            .enumerate()
            .map(|(y, out)| row(y as u32, Some(out)))
            .reduce(zero, Counts::add);
        let diff = Image::new_u8(a.width, a.height, 3, rgb);
        Comparison {
            counts,
            diff: Some(diff),
        }
    } else {
        let counts = (0..a.height)
            .into_par_iter()
            .map(|y| row(y, None))
            .reduce(zero, Counts::add);
        Comparison { counts, diff: None }
    }
}

// ---------------------------------------------------------------------------------------
// The GPU path.

/// Keep in sync with `Params` in wgsl/compare.wgsl.
#[repr(C)]
#[derive(Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
struct Params {
    width: u32,
    height: u32,
    row0: u32,
    rows: u32,
    buf_row0: u32,
    flags: u32,
    n_ignore: u32,
    t_lo: u32,
    t_hi: u32,
}

const PERCEPTUAL: u32 = 1;
const ANTIALIASING: u32 = 2;
const DRAW: u32 = 4;

/// Comparisons on a GPU.
pub struct CompareGpu<'g> {
    gpu: &'g Gpu,
    /// The most bytes one image strip or the diff strip may take in one binding: the
    /// adapter's limit unless lowered (tests do, to reach the strip path with small images).
    pub binding_bytes: u64,
}

impl<'g> CompareGpu<'g> {
    pub fn new(gpu: &'g Gpu) -> Self {
        CompareGpu {
            gpu,
            binding_bytes: gpu
                .limits
                .max_storage_buffer_binding_size
                .min(gpu.limits.max_buffer_size),
        }
    }

    /// Rows per strip: the strip and its halo must fit one binding, and so must its diff rows.
    fn strip_rows(&self, img: &Image) -> Result<u32> {
        let row_bytes = img.width as u64 * img.channels as u64 * u64::from(img.bit_depth() / 8);
        let by_input = (self.binding_bytes / row_bytes).saturating_sub(2 * HALO as u64);
        let by_diff = self.binding_bytes / (img.width as u64 * 4);
        let rows = by_input.min(by_diff).min(img.height as u64) as u32;
        if rows == 0 {
            bail!(
                "a row of {} pixels is too wide for this adapter's {}-byte bindings",
                img.width,
                self.binding_bytes
            );
        }
        Ok(rows)
    }

    /// The buffers, bind groups and strips that compare images of `img`'s layout and size
    /// under `opts`.
    pub fn plan(&self, img: &Image, opts: &Options) -> Result<ComparePlan> {
        let gpu = self.gpu;
        let (w, h, c) = (img.width, img.height, img.channels as usize);
        let kernel = gpu.kernel(
            &shader!("compare"),
            "main",
            &[
                ("CHANNELS", f64::from(img.channels)),
                ("BITS", f64::from(img.bit_depth())),
            ],
        )?;
        let strip = self.strip_rows(img)?;
        let row_bytes = u64::from(w) * c as u64 * u64::from(img.bit_depth() / 8);
        let buf_rows = u64::from((strip + 2 * HALO).min(h));
        let src_a = gpu.buffer("compare expected", Usage::Storage, buf_rows * row_bytes);
        let src_b = gpu.buffer("compare actual", Usage::Storage, buf_rows * row_bytes);
        let rects: Vec<[u32; 4]> = opts
            .ignore
            .iter()
            .map(|r| [r.x1, r.y1, r.x2, r.y2])
            .collect();
        let ignore = gpu.upload("compare ignore", Usage::Storage, &rects);
        let per_group = u64::from(WG_SIZE * PER_THREAD);
        let max_groups = (u64::from(strip) * u64::from(w)).div_ceil(per_group);
        let partials = gpu.buffer(
            "compare partials",
            Usage::Storage,
            max_groups * PART_WORDS as u64 * 4,
        );
        let diff = gpu.buffer(
            "compare diff",
            Usage::Storage,
            if opts.diff {
                u64::from(strip) * u64::from(w) * 4
            } else {
                0
            },
        );
        let t = opts.threshold.map(threshold_units).unwrap_or(0);
        let flags = if opts.threshold.is_some() {
            PERCEPTUAL
        } else {
            0
        } | if opts.antialiasing { ANTIALIASING } else { 0 }
            | if opts.diff { DRAW } else { 0 };
        let mut strips = Vec::new();
        let mut row0 = 0u32;
        while row0 < h {
            let rows = strip.min(h - row0);
            let buf_row0 = row0.saturating_sub(HALO);
            let params = gpu.upload(
                "compare params",
                Usage::Uniform,
                &[Params {
                    width: w,
                    height: h,
                    row0,
                    rows,
                    buf_row0,
                    flags,
                    n_ignore: rects.len() as u32,
                    t_lo: t as u32,
                    t_hi: (t >> 32) as u32,
                }],
            );
            let bind = gpu.bind(
                &kernel,
                &[&params, &src_a, &src_b, &ignore, &partials, &diff],
            );
            strips.push(Strip {
                row0,
                rows,
                buf_row0,
                buf_end: (row0 + rows + HALO).min(h),
                groups: (u64::from(rows) * u64::from(w)).div_ceil(per_group) as u32,
                bind,
                _params: params,
            });
            row0 += rows;
        }
        Ok(ComparePlan {
            kernel,
            channels: c,
            row_bytes,
            draw: opts.diff,
            src_a,
            src_b,
            partials,
            diff,
            strips,
            _ignore: ignore,
        })
    }

    /// Compares `a` (expected) and `b` (actual), of one layout, as [`compare_cpu`] does.
    pub fn compare(
        &self,
        a: &Image,
        b: &Image,
        opts: &Options,
        timings: &mut Timings,
    ) -> Result<Comparison> {
        assert!(layout_mismatch(a, b).is_none(), "compare needs one layout");
        let gpu = self.gpu;
        let plan = timings.phase("pipeline", || self.plan(a, opts))?;
        let (w, h) = (a.width, a.height);
        let (bytes_a, bytes_b) = (le_bytes(&a.samples), le_bytes(&b.samples));
        let mut counts = Counts::zeros(plan.channels);
        let mut rgb = if opts.diff {
            vec![0u8; a.pixels() * 3]
        } else {
            Vec::new()
        };
        for (i, s) in plan.strips.iter().enumerate() {
            timings.phase("upload", || plan.upload(gpu, s, &bytes_a, &bytes_b));
            gpu.run_timed(timings, 1, |batch, _| plan.record(batch, i))?;
            let pixels = u64::from(s.rows) * u64::from(w);
            let words: Vec<u32> = timings.phase("download", || {
                gpu.read_vec(&plan.partials, s.groups as usize * PART_WORDS)
            })?;
            counts = counts.add(sum_partials(&words, plan.channels, pixels));
            if opts.diff {
                let start = s.row0 as usize * w as usize * 3;
                let out = &mut rgb[start..start + pixels as usize * 3];
                timings.phase("download", || {
                    gpu.read_with(&plan.diff, 0, pixels * 4, |bytes| {
                        for (o, px) in out.chunks_exact_mut(3).zip(bytes.chunks_exact(4)) {
                            o.copy_from_slice(&px[..3]);
                        }
                    })
                })?;
            }
        }
        Ok(Comparison {
            counts,
            diff: opts.diff.then(|| Image::new_u8(w, h, 3, rgb)),
        })
    }
}

/// One strip of rows and its pass.
struct Strip {
    row0: u32,
    rows: u32,
    /// The rows held in the buffers: the strip and its halo, [buf_row0, buf_end).
    buf_row0: u32,
    buf_end: u32,
    groups: u32,
    bind: wgpu::BindGroup,
    _params: wgpu::Buffer,
}

/// One layout's comparison on the device: reusable for every pair of that layout and size.
pub struct ComparePlan {
    kernel: Kernel,
    channels: usize,
    row_bytes: u64,
    draw: bool,
    src_a: wgpu::Buffer,
    src_b: wgpu::Buffer,
    partials: wgpu::Buffer,
    diff: wgpu::Buffer,
    strips: Vec<Strip>,
    _ignore: wgpu::Buffer,
}

impl ComparePlan {
    /// Writes strip `s`'s rows (with halo) of both images' bytes into the device buffers.
    fn upload(&self, gpu: &Gpu, s: &Strip, a: &[u8], b: &[u8]) {
        let from = (u64::from(s.buf_row0) * self.row_bytes) as usize;
        let to = (u64::from(s.buf_end) * self.row_bytes) as usize;
        write_padded(gpu, &self.src_a, &a[from..to]);
        write_padded(gpu, &self.src_b, &b[from..to]);
    }

    /// Records strip `i`'s pass.
    fn record(&self, batch: &mut Batch, i: usize) {
        let s = &self.strips[i];
        batch.dispatch("compare", &self.kernel, &s.bind, s.groups);
    }
}

/// `gpukit bench compare`'s case: a 4K RGB8 pair differing in about 0.35% of its pixels,
/// counted and drawn (the CI check of docs/BENCHMARKS.md). Pixels per second; both images
/// are read once and the diff written once.
pub fn bench_cases(engine: &Engine) -> Result<Vec<Case<'_>>> {
    let (w, h) = (3840u32, 2160u32);
    let a = Image::new_u8(
        w,
        h,
        3,
        crate::bench::noise_bytes((w * h * 3) as usize, 0x1f12_3bb5),
    );
    let mut changed = match &a.samples {
        Samples::U8(s) => s.clone(),
        Samples::U16(_) => unreachable!("made 8-bit above"),
    };
    // Every 286th pixel: 0.35%.
    for p in (0..(w * h) as usize).step_by(286) {
        changed[p * 3] ^= 0x40;
    }
    let b = Image::new_u8(w, h, 3, changed);
    let opts = Options {
        diff: true,
        ..Options::default()
    };
    let name = "4K RGB8 pair, 0.35% differing, diff image".to_string();
    let work = a.pixels() as f64;
    Ok(vec![match engine {
        Engine::Gpu(gpu) => {
            let plan = CompareGpu::new(gpu).plan(&a, &opts)?;
            if plan.strips.len() != 1 || !plan.draw {
                bail!("the compare benchmark pair must fit one strip");
            }
            plan.upload(
                gpu,
                &plan.strips[0],
                &le_bytes(&a.samples),
                &le_bytes(&b.samples),
            );
            Case::gpu("compare", name, Unit::Gpixps, work, move |batch| {
                plan.record(batch, 0)
            })
        }
        Engine::Cpu => Case::cpu("compare", name, Unit::Gpixps, work, move || {
            std::hint::black_box(compare_cpu(&a, &b, &opts));
        }),
    }])
}

/// The workgroups' partials (PART_WORDS words each) summed into the counts of `pixels` pixels.
fn sum_partials(words: &[u32], channels: usize, pixels: u64) -> Counts {
    let mut k = Counts::zeros(channels);
    k.pixels = pixels;
    for part in words.chunks_exact(PART_WORDS) {
        for (ch, s) in k.channels.iter_mut().enumerate() {
            let p = &part[ch * 5..ch * 5 + 5];
            s.differing += u64::from(p[0]);
            s.max_abs = s.max_abs.max(p[1]);
            s.sum_abs += u64::from(p[2]);
            s.sum_sq += u128::from(p[3]) | u128::from(p[4]) << 32;
        }
        k.differing += u64::from(part[20]);
        k.antialiased += u64::from(part[21]);
        k.ignored += u64::from(part[22]);
    }
    k
}

/// The samples as the bytes the GPU reads: 8-bit as they are, 16-bit little-endian.
fn le_bytes(samples: &Samples) -> Cow<'_, [u8]> {
    match samples {
        Samples::U8(s) => Cow::Borrowed(s),
        Samples::U16(s) if cfg!(target_endian = "little") => Cow::Borrowed(bytemuck::cast_slice(s)),
        Samples::U16(s) => Cow::Owned(s.iter().flat_map(|v| v.to_le_bytes()).collect()),
    }
}

/// Writes `bytes` at the start of `buffer`; a tail short of a word is padded with zeros.
fn write_padded(gpu: &Gpu, buffer: &wgpu::Buffer, bytes: &[u8]) {
    let whole = bytes.len() / 4 * 4;
    if whole > 0 {
        gpu.queue.write_buffer(buffer, 0, &bytes[..whole]);
    }
    if whole < bytes.len() {
        let mut tail = [0u8; 4];
        tail[..bytes.len() - whole].copy_from_slice(&bytes[whole..]);
        gpu.queue.write_buffer(buffer, whole as u64, &tail);
    }
}

/// Compares on `engine`: the GPU pass, or the CPU reference.
pub fn compare(
    engine: &Engine,
    a: &Image,
    b: &Image,
    opts: &Options,
    timings: &mut Timings,
) -> Result<Comparison> {
    match engine {
        Engine::Gpu(gpu) => CompareGpu::new(gpu).compare(a, b, opts, timings),
        Engine::Cpu => Ok(timings.phase("compute", || compare_cpu(a, b, opts))),
    }
}

// ---------------------------------------------------------------------------------------
// SSIM, on the host in f64.

/// SSIM's window: 11 taps of a gaussian with sigma 1.5, normalised to sum 1 (scipy's
/// `gaussian_filter` with `truncate=3.5`, as scikit-image uses it).
pub const SSIM_RADIUS: usize = 5;
pub const SSIM_SIGMA: f64 = 1.5;
pub const SSIM_K1: f64 = 0.01;
pub const SSIM_K2: f64 = 0.03;

fn ssim_window() -> [f64; 2 * SSIM_RADIUS + 1] {
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
fn reflect(i: isize, n: usize) -> usize {
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
    let pad = if w > 2 * SSIM_RADIUS && h > 2 * SSIM_RADIUS {
        SSIM_RADIUS
    } else {
        0
    };
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
    let (w, h) = (a.width as usize, a.height as usize);
    let pad = if w > 2 * SSIM_RADIUS && h > 2 * SSIM_RADIUS {
        SSIM_RADIUS
    } else {
        0
    };
    let mut n = 0;
    for y in pad..h - pad {
        for x in pad..w - pad {
            n += u64::from(!ignore.iter().any(|r| r.contains(x as u32, y as u32)));
        }
    }
    n
}

// ---------------------------------------------------------------------------------------
// Metrics.

/// One channel's metrics, in sample units (0..255 or 0..65535).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ChannelMetrics {
    pub name: &'static str,
    /// Compared pixels where this channel differs.
    pub differing: u64,
    pub max_abs_diff: u32,
    pub mae: f64,
    pub rmse: f64,
    /// 10 log10(max² / MSE); null when the channel is identical (infinite).
    pub psnr: Option<f64>,
    /// Null unless SSIM was asked for.
    pub ssim: Option<f64>,
}

/// The metrics of one comparison.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Metrics {
    pub pixels: u64,
    /// Pixels compared: all but the ignored ones.
    pub compared: u64,
    pub ignored: u64,
    /// Compared pixels that differ (by the threshold), anti-aliased ones excepted.
    pub differing: u64,
    /// `differing` / `compared` (0 when nothing was compared).
    pub differing_fraction: f64,
    pub antialiased: u64,
    pub max_abs_diff: u32,
    pub mae: f64,
    pub rmse: f64,
    pub psnr: Option<f64>,
    pub ssim: Option<f64>,
    pub channels: Vec<ChannelMetrics>,
}

/// 10 log10(max² / MSE), `None` for MSE 0.
fn psnr(max_value: u32, sum_sq: u128, samples: u64) -> Option<f64> {
    (sum_sq > 0).then(|| {
        let mse = sum_sq as f64 / samples as f64;
        10.0 * (f64::from(max_value).powi(2) / mse).log10()
    })
}

/// The metrics of `counts` for images of `channels` channels whose largest sample is
/// `max_value`, with SSIM (overall, per channel) when computed.
pub fn metrics(
    counts: &Counts,
    channels: u8,
    max_value: u32,
    ssim: Option<(f64, Vec<f64>)>,
) -> Metrics {
    let compared = counts.pixels - counts.ignored;
    let names = channel_names(channels);
    let n = compared.max(1);
    let per: Vec<ChannelMetrics> = counts
        .channels
        .iter()
        .enumerate()
        .map(|(ch, s)| ChannelMetrics {
            name: names[ch],
            differing: s.differing,
            max_abs_diff: s.max_abs,
            mae: s.sum_abs as f64 / n as f64,
            rmse: (s.sum_sq as f64 / n as f64).sqrt(),
            psnr: if compared == 0 {
                None
            } else {
                psnr(max_value, s.sum_sq, compared)
            },
            ssim: ssim.as_ref().map(|(_, v)| v[ch]),
        })
        .collect();
    let samples = n * counts.channels.len() as u64;
    let sum_abs: u64 = counts.channels.iter().map(|s| s.sum_abs).sum();
    let sum_sq: u128 = counts.channels.iter().map(|s| s.sum_sq).sum();
    Metrics {
        pixels: counts.pixels,
        compared,
        ignored: counts.ignored,
        differing: counts.differing,
        differing_fraction: if compared == 0 {
            0.0
        } else {
            counts.differing as f64 / compared as f64
        },
        antialiased: counts.antialiased,
        max_abs_diff: counts.channels.iter().map(|s| s.max_abs).max().unwrap_or(0),
        mae: sum_abs as f64 / samples as f64,
        rmse: (sum_sq as f64 / samples as f64).sqrt(),
        psnr: if compared == 0 {
            None
        } else {
            psnr(max_value, sum_sq, samples)
        },
        ssim: ssim.map(|(s, _)| s),
        channels: per,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rects_parse_with_corners_included() {
        let r: Rect = "1:2-3:4".parse().unwrap();
        assert_eq!(
            r,
            Rect {
                x1: 1,
                y1: 2,
                x2: 3,
                y2: 4
            }
        );
        assert!(r.contains(3, 4) && r.contains(1, 2) && !r.contains(4, 4));
        for bad in ["", "1:2", "1:2-3", "3:3-1:1", "a:b-c:d"] {
            assert!(bad.parse::<Rect>().is_err(), "{bad}");
        }
    }

    #[test]
    fn reflect_matches_scipy_reflect_mode() {
        // scipy 'reflect' on n = 3: ... 2 | 2 1 0 | 0 1 2 | 2 1 0 | 0 ...
        let got: Vec<usize> = (-4..7).map(|i| reflect(i, 3)).collect();
        assert_eq!(got, [2, 2, 1, 0, 0, 1, 2, 2, 1, 0, 0]);
        assert_eq!(reflect(-1, 1), 0);
    }

    #[test]
    fn window_is_scipys_gaussian() {
        let w = ssim_window();
        assert!((w.iter().sum::<f64>() - 1.0).abs() < 1e-15);
        // exp(-0.5 * 25 / 2.25) / sum, with the sum of exp(-x²/4.5) for x in -5..=5.
        let sum: f64 = (-5..=5).map(|x: i32| (-(x * x) as f64 / 4.5).exp()).sum();
        assert!((w[0] - (-25.0f64 / 4.5).exp() / sum).abs() < 1e-17);
    }

    #[test]
    fn distance_is_pixelmatchs_within_coefficient_rounding() {
        // Black against white, opaque: pixelmatch gives 0.5053 * 255² (Y only).
        let d = distance([0, 0, 0, 255], [255, 255, 255, 255]) as f64;
        let scaled = d / (65025.0 * (1u64 << 30) as f64);
        let want = 0.5053 * 65025.0;
        assert!((scaled - want).abs() / want < 2e-3, "{scaled}");
        // Transparent pixels are white whatever their colour.
        assert_eq!(distance([0, 0, 0, 0], [255, 255, 255, 255]), 0);
        // Gray has no chroma: only Y contributes.
        let g = distance([10, 10, 10, 255], [20, 20, 20, 255]);
        assert_eq!(g, 517 * (1024 * 10 * 255u64).pow(2));
    }

    #[test]
    fn threshold_units_are_monotone_and_zero_at_zero() {
        assert_eq!(threshold_units(0.0), 0);
        assert!(threshold_units(0.1) < threshold_units(0.2));
        assert!(threshold_units(1.0) as f64 > 2.4e18);
    }
}
