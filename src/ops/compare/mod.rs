//! `compare`: how two images differ, pixels not layouts ([`align`] promotes two layouts to
//! RGBA and handles sizes that differ; [`run`] compares one layout and size). Exact integer counts and sums per channel
//! (differing samples, largest absolute difference, sums of absolute and squared differences),
//! the number of differing pixels (exact equality, or pixelmatch's YIQ distance over a
//! threshold, with optional anti-aliasing detection), MAE, RMSE, PSNR and SSIM derived from
//! them, and a diff image.
//!
//! The counts and the diff image come from one GPU pass, `compare` (wgsl/compare.wgsl), over
//! strips of rows, with per-workgroup partials summed on the host; [`reference`] is the CPU
//! reference, pixel for pixel the same arithmetic. pixelmatch's perceptual test is decided
//! exactly in integers (128-bit distances), so both give pixelmatch's answer on every adapter. SSIM ([`ssim`]) is computed on the host
//! in f64, so it is the same whichever engine ran the counts.
//!
//! Files: `align` (promotion, size changes), `reference` (the CPU reference and the integer
//! pixel arithmetic), `antialiasing`
//! (pixelmatch's anti-aliasing test), `gpu` (the GPU pass and its plan), `ssim`, `metrics`
//! (MAE, RMSE, PSNR from the counts), `verdict` (the `--fail-on` limits, verdicts and the
//! reports of `gpukit compare`), `bench`, `tune` (the pass's shape, [`Tunables`]).

mod align;
mod antialiasing;
mod bench;
mod gpu;
pub mod html;
pub mod junit;
mod mask;
mod metrics;
mod reference;
mod regions;
mod ssim;
mod tune;
pub mod verdict;

use std::ops::Range;

use anyhow::Result;
use serde::Serialize;

use crate::gpu::{Engine, Timings};
use crate::io::image::Image;
pub use align::{align, layout_name, rgba, Aligned, SizeChange};
pub use gpu::{CompareGpu, ComparePlan};
pub use mask::{Ignored, Mask};
pub use metrics::{identical, metrics, ChannelMetrics, Metrics};
pub use reference::{brightness, distance, reference, threshold_units};
pub use regions::{regions, Region, CELL, MAX_REGIONS};
pub use ssim::{ssim, ssim_channel, ssim_with, SSIM_K1, SSIM_K2, SSIM_RADIUS, SSIM_SIGMA};
pub use tune::{Tunables, MAX_GROUP_UNITS};

/// `compare` in the registry.
pub const OP: super::Op = super::Op {
    name: "compare",
    bench: bench::cases,
    tune: Some(crate::tune::tune::<tune::Tuning>),
    shaders: gpu::shaders,
    command: true,
};

/// pixelmatch's YIQ coefficients as it gives them (0.29889531, 0.58662247, 0.11448223 /
/// 0.59597799, -0.27417610, -0.32180189 / 0.21147017, -0.52261711, 0.31114694), scaled by
/// 10^8: exact integers. wgsl/compare.wgsl has them too (the shader test checks they agree).
pub const YIQ_Y: [i64; 3] = [29_889_531, 58_662_247, 11_448_223];
pub const YIQ_I: [i64; 3] = [59_597_799, -27_417_610, -32_180_189];
pub const YIQ_Q: [i64; 3] = [21_147_017, -52_261_711, 31_114_694];
/// The weights of Y², I², Q² in the distance (0.5053, 0.299, 0.1957) scaled by 10^4.
pub const YIQ_W: [u64; 3] = [5053, 2990, 1957];
/// The integer distance D ([`distance`]) is pixelmatch's distance times this: 10^4 (the
/// weights) · 10^16 (the squared coefficients) · 255² (colours blended in units of 1/255).
pub const DISTANCE_SCALE: u128 = 10_000 * 10u128.pow(16) * 65025;
/// pixelmatch's largest distance, 35215: the threshold t stands for 35215 t².
pub const MAX_DELTA: f64 = 35215.0;

/// Colours of the diff image (RGB): a pixel that differs, one taken for anti-aliasing.
pub const RED: [u8; 3] = [255, 0, 0];
pub const YELLOW: [u8; 3] = [255, 255, 0];

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
    /// The GPU pass's shape; `None`: the tune cache's choice for this adapter and image
    /// size, else [`Tunables::for_pixels`]. Results are the same for every shape.
    pub tunables: Option<Tunables>,
}

impl Options {
    /// The CPU engine's estimated time for a pair of `pixels` pixels each: about 10 ns a
    /// pixel, four times that with anti-aliasing detection ([`super::cpu_time`]).
    pub fn cpu_estimate(&self, pixels: u64) -> std::time::Duration {
        let per_pixel = if self.antialiasing { 40.0 } else { 10.0 };
        super::cpu_time(pixels as f64 * per_pixel, usize::MAX)
    }
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
    /// Pixels only one image has (sizes differing, [`SizeChange`]), not ignored: counted in
    /// `pixels` and `differing` too.
    pub outside: u64,
    pub channels: Vec<ChannelSums>,
}

impl Counts {
    fn zeros(channels: usize) -> Counts {
        Counts {
            pixels: 0,
            differing: 0,
            antialiased: 0,
            ignored: 0,
            outside: 0,
            channels: vec![ChannelSums::default(); channels],
        }
    }

    fn add(mut self, o: Counts) -> Counts {
        self.pixels += o.pixels;
        self.differing += o.differing;
        self.antialiased += o.antialiased;
        self.ignored += o.ignored;
        self.outside += o.outside;
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

/// The pixels in columns `xs` and rows `ys` that lie in an ignored rectangle.
pub(crate) fn ignored_in(ignore: &[Rect], xs: Range<u32>, ys: Range<u32>) -> u64 {
    if ignore.is_empty() {
        return 0;
    }
    let mut n = 0;
    for y in ys {
        for x in xs.clone() {
            n += u64::from(ignore.iter().any(|r| r.contains(x, y)));
        }
    }
    n
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

/// Whether two images have one size and layout, as [`run`] needs ([`align`] makes them so).
pub fn same_shape(a: &Image, b: &Image) -> bool {
    (a.width, a.height, a.channels, a.bit_depth()) == (b.width, b.height, b.channels, b.bit_depth())
}

/// Compares `a` (expected) and `b` (actual), which must have one size and layout
/// ([`same_shape`]), on the engine: the GPU pass, or the CPU reference. Adds wall time
/// per phase and GPU time per pass to `timings`.
pub fn run(
    engine: &Engine,
    (a, b): (&Image, &Image),
    options: &Options,
    timings: &mut Timings,
) -> Result<Comparison> {
    match engine {
        Engine::Gpu(gpu) => CompareGpu::new(gpu).compare(a, b, options, timings),
        Engine::Cpu => Ok(timings.phase("compute", || cpu(a, b, options))),
    }
}

/// The CPU arm of [`run`]: the reference.
fn cpu(a: &Image, b: &Image, options: &Options) -> Comparison {
    reference(a, b, options)
}

#[cfg(test)]
mod tests;
