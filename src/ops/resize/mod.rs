//! `resize`: Pillow's `Image.resize` (LANCZOS, BICUBIC, BILINEAR, BOX, NEAREST) byte for byte
//! on 8-bit images, the same algorithm at 16 bits, identical on the native CPU engine and on
//! every GPU adapter (wgsl/resize_h8s.wgsl or wgsl/resize_h8.wgsl and wgsl/resize_v8.wgsl, or
//! wgsl/resize_h.wgsl and wgsl/resize_v.wgsl).
//!
//! The weights are computed once on the host in f64 as Pillow computes them and quantised to
//! 22-bit integers (`coeffs`); every engine then does integer sums only. An image is resized
//! by at most two 1-D passes (`coeffs::passes`), alpha premultiplied before and divided out
//! after. Semantics and limits: docs/resize.md.
//!
//! Files: `coeffs` (weights and pass order), `reference`, `engine` (the native CPU engine),
//! `plan` (the GPU passes), `rows` (the 8-bit horizontal pass's tile and layout), `stride`
//! (its twin for whole-number reductions, and their regular positions), `columns` (the 8-bit
//! vertical pass's word columns), `tune` (the 8-bit passes' shapes), `bench`.

mod bench;
mod coeffs;
mod columns;
pub mod engine;
mod plan;
mod reference;
mod rows;
mod stride;
mod tune;

use anyhow::{bail, Result};

use crate::gpu::{Engine, Timings};
use crate::io::image::Image;
pub use coeffs::{axis, nearest_axis, passes, Axis, Dir, Pass, PRECISION_BITS};
pub use plan::ResizePlan;
pub use reference::reference;
pub use tune::Tunables;

/// `resize` in the registry.
pub const OP: super::Op = super::Op {
    command: true,
    name: "resize",
    bench: bench::cases,
    tune: Some(crate::tune::tune::<tune::Tuning>),
    shaders: plan::shaders,
};

/// The largest output side: the decoder's default limit on an input side (docs/cli.md).
pub const MAX_SIDE: u32 = 1 << 20;

/// Pillow's resampling filters (Hamming aside).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Filter {
    /// Pillow's `LANCZOS`: a windowed sinc over 3 lobes.
    #[default]
    Lanczos3,
    /// `BICUBIC`, a = -0.5.
    Bicubic,
    /// `BILINEAR` (a triangle).
    Bilinear,
    /// `BOX`: each output pixel the mean of the input pixels it covers.
    Box,
    /// `NEAREST`: each output pixel one input pixel (no alpha weighting).
    Nearest,
}

impl Filter {
    pub const ALL: [Filter; 5] = [
        Filter::Lanczos3,
        Filter::Bicubic,
        Filter::Bilinear,
        Filter::Box,
        Filter::Nearest,
    ];

    /// Its name on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Filter::Lanczos3 => "lanczos3",
            Filter::Bicubic => "bicubic",
            Filter::Bilinear => "bilinear",
            Filter::Box => "box",
            Filter::Nearest => "nearest",
        }
    }
}

impl std::str::FromStr for Filter {
    type Err = String;

    fn from_str(s: &str) -> Result<Filter, String> {
        Filter::ALL
            .into_iter()
            .find(|f| f.name() == s)
            .ok_or_else(|| {
                format!("unknown filter {s:?} (lanczos3, bicubic, bilinear, box, nearest)")
            })
    }
}

/// The output size, or how to derive it from the input's.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Size {
    /// Exactly this many pixels.
    Exact { width: u32, height: u32 },
    /// This width, the height keeping the aspect ratio.
    Width(u32),
    /// This height, the width keeping the aspect ratio.
    Height(u32),
    /// Both sides times this factor.
    Scale(f64),
    /// The largest size with the input's aspect ratio that fits inside (up or down).
    Fit { width: u32, height: u32 },
}

impl Size {
    /// The size the flags `--size WxH`, `--width W`, `--height H` (both: an exact size),
    /// `--scale F`, `--fit WxH` ask for: exactly one of them, checked.
    pub fn from_flags(
        size: Option<(u32, u32)>,
        width: Option<u32>,
        height: Option<u32>,
        scale: Option<f64>,
        fit: Option<(u32, u32)>,
    ) -> Result<Size> {
        let given = [
            size.is_some(),
            width.is_some() || height.is_some(),
            scale.is_some(),
            fit.is_some(),
        ];
        let s = match (size, width, height, scale, fit) {
            _ if given.iter().filter(|&&g| g).count() > 1 => {
                return usage("give one of --size, --width/--height, --scale, --fit".into())
            }
            (Some((width, height)), ..) => Size::Exact { width, height },
            (_, Some(width), Some(height), ..) => Size::Exact { width, height },
            (_, Some(w), None, ..) => Size::Width(w),
            (_, None, Some(h), ..) => Size::Height(h),
            (.., Some(f), _) => Size::Scale(f),
            (.., Some((width, height))) => Size::Fit { width, height },
            _ => {
                return usage(
                    "no output size: give --size, --width, --height, --scale or --fit".into(),
                )
            }
        };
        s.check()?;
        Ok(s)
    }

    /// The limits that hold for every image: sides from 1 to [`MAX_SIDE`], a finite positive
    /// scale no larger than `MAX_SIDE`. A failure is a usage error.
    pub fn check(&self) -> Result<()> {
        let side = |name: &str, v: u32| {
            if v == 0 || v > MAX_SIDE {
                usage(format!(
                    "{name} {v} is out of range (1 to {MAX_SIDE} pixels)"
                ))
            } else {
                Ok(())
            }
        };
        match *self {
            Size::Exact { width, height } | Size::Fit { width, height } => {
                side("width", width)?;
                side("height", height)
            }
            Size::Width(w) => side("width", w),
            Size::Height(h) => side("height", h),
            Size::Scale(f) => {
                if f.is_finite() && f > 0.0 && f <= f64::from(MAX_SIDE) {
                    Ok(())
                } else {
                    usage(format!(
                        "scale {f} is out of range (above 0, at most {MAX_SIDE})"
                    ))
                }
            }
        }
    }

    /// The output size for an input of `w` x `h`. Sides derived from a ratio are rounded to
    /// the nearest pixel (halves up) and are at least 1; an output side over [`MAX_SIDE`]
    /// fails this input.
    pub fn resolve(&self, w: u32, h: u32) -> Result<(u32, u32)> {
        if w == 0 || h == 0 {
            bail!("cannot resize an empty {w}x{h} image");
        }
        // round(a * b / c), halves up, at least 1.
        let ratio = |a: u32, b: u32, c: u32| {
            ((2 * u128::from(a) * u128::from(b) + u128::from(c)) / (2 * u128::from(c))).max(1)
        };
        let (ow, oh): (u128, u128) = match *self {
            Size::Exact { width, height } => (width.into(), height.into()),
            Size::Width(ow) => (ow.into(), ratio(h, ow, w)),
            Size::Height(oh) => (ratio(w, oh, h), oh.into()),
            Size::Scale(f) => {
                let side = |v: u32| (f64::from(v) * f).round().max(1.0) as u128;
                (side(w), side(h))
            }
            Size::Fit { width, height } => {
                if u64::from(width) * u64::from(h) <= u64::from(height) * u64::from(w) {
                    (width.into(), ratio(h, width, w).min(height.into()))
                } else {
                    (ratio(w, height, h).min(width.into()), height.into())
                }
            }
        };
        let max = u128::from(MAX_SIDE);
        if ow > max || oh > max {
            bail!("the output {ow}x{oh} is over the limit of {MAX_SIDE} pixels a side");
        }
        Ok((ow as u32, oh as u32))
    }
}

/// `WxH` (as `--size` and `--fit` take it): two whole numbers.
pub fn parse_dims(s: &str) -> Result<(u32, u32), String> {
    let bad = || format!("expected WIDTHxHEIGHT in whole pixels, got {s:?}");
    let (w, h) = s.split_once(['x', 'X']).ok_or_else(bad)?;
    Ok((
        w.trim().parse().map_err(|_| bad())?,
        h.trim().parse().map_err(|_| bad())?,
    ))
}

fn usage<T>(m: String) -> Result<T> {
    Err(crate::UsageError(m).into())
}

/// What to resize to, and with which filter.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Options {
    pub size: Size,
    pub filter: Filter,
}

impl Options {
    pub fn new(size: Size, filter: Filter) -> Options {
        Options { size, filter }
    }

    /// The limits that hold for every image (the size's), checked before any file or device
    /// is touched: a failure is a usage error.
    pub fn check(&self) -> Result<()> {
        self.size.check()
    }

    /// The native CPU engine's estimated time for an image of `width` x `height` with
    /// `channels` samples a pixel of `bit_depth` bits, at [`CPU_RATES`] ([`super::cpu_time`]);
    /// zero for a size this image cannot take (it fails on any engine).
    pub fn cpu_estimate(
        &self,
        width: u32,
        height: u32,
        channels: u8,
        bit_depth: u32,
    ) -> std::time::Duration {
        self.cpu_estimate_at(&CPU_RATES, width, height, channels, bit_depth)
    }

    /// [`Options::cpu_estimate`] at `rates`: every pass's sample-taps (output samples times
    /// the taps each reads, counted from the weights), plus alpha's two conversions where
    /// the image has alpha.
    pub fn cpu_estimate_at(
        &self,
        rates: &CpuRates,
        width: u32,
        height: u32,
        channels: u8,
        bit_depth: u32,
    ) -> std::time::Duration {
        let Ok((ow, oh)) = self.size.resolve(width, height) else {
            return std::time::Duration::ZERO;
        };
        let c = f64::from(channels);
        let lanes = bit_depth == 8 && engine::has_avx2();
        let per_tap = if lanes {
            rates.tap_ns_8bit
        } else {
            rates.tap_ns_wide
        };
        let (mut w, mut h) = (f64::from(width), f64::from(height));
        let mut ns = 0.0;
        for pass in passes(width, height, ow, oh, self.filter, bit_depth) {
            let taps: f64 = pass.axis.count.iter().map(|&n| f64::from(n)).sum();
            let len = pass.axis.len() as f64;
            // Each output position's taps, over the lines across the pass.
            let lines = match pass.dir {
                Dir::Horizontal => h,
                Dir::Vertical => w,
            };
            ns += taps * lines * c * per_tap;
            match pass.dir {
                Dir::Horizontal => w = len,
                Dir::Vertical => h = len,
            }
        }
        let alpha = channels.is_multiple_of(2) && self.filter != Filter::Nearest;
        if alpha && (ow, oh) != (width, height) {
            let samples = f64::from(width) * f64::from(height) + f64::from(ow) * f64::from(oh);
            ns += samples * c * rates.alpha_ns;
        }
        super::cpu_time(ns, usize::MAX)
    }

    /// What a GPU would save against the native CPU engine on `files` images like this one
    /// ([`Options::cpu_estimate`]), for the engine choice (`gpu::SMALL_JOB`): the engine's
    /// time less the GPU path's own host time, copying the image into staging and the result
    /// out of it ([`super::gpu_saving_over_copies`]).
    pub fn gpu_saving(
        &self,
        width: u32,
        height: u32,
        channels: u8,
        bit_depth: u32,
        files: u32,
    ) -> std::time::Duration {
        self.gpu_saving_at(&CPU_RATES, width, height, channels, bit_depth, files)
    }

    /// [`Options::gpu_saving`] with the engine's time at `rates`.
    pub fn gpu_saving_at(
        &self,
        rates: &CpuRates,
        width: u32,
        height: u32,
        channels: u8,
        bit_depth: u32,
        files: u32,
    ) -> std::time::Duration {
        let engine = self.cpu_estimate_at(rates, width, height, channels, bit_depth);
        let (ow, oh) = self.size.resolve(width, height).unwrap_or((0, 0));
        let pixels = f64::from(width) * f64::from(height) + f64::from(ow) * f64::from(oh);
        let bytes = pixels * f64::from(channels) * f64::from(bit_depth / 8);
        super::gpu_saving_over_copies(engine, bytes, files)
    }
}

/// The native CPU engine's speeds on one core, for its time estimate.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CpuRates {
    /// Nanoseconds a sample-tap (one sample times one weight) of an 8-bit image in i32 lanes
    /// (AVX2).
    pub tap_ns_8bit: f64,
    /// The same for 16-bit images (i64 sums), or without AVX2.
    pub tap_ns_wide: f64,
    /// Nanoseconds a sample of the input and of the output for alpha's premultiply and its
    /// inverse.
    pub alpha_ns: f64,
}

/// The engine's speeds, rounded towards slower. 8-bit: 2048x1536 to 512x384 RGB8 lanczos3 (25
/// taps a position: 59.0 M sample-taps in the horizontal pass, 14.7 M in the vertical) took
/// 9.3 ms on one thread of the 2-core development machine (docs/BENCHMARKS.md, "resize: the
/// native CPU engine against Pillow"): 0.126 ns. 16-bit and alpha: not measured; the i64 sums
/// and the per-sample conversions are taken as a scalar loop's 0.5 ns a tap and 1 ns a sample.
pub const CPU_RATES: CpuRates = CpuRates {
    tap_ns_8bit: 0.13,
    tap_ns_wide: 0.5,
    alpha_ns: 1.0,
};

/// Resizes `img` on the engine. Adds plan, upload, compute and download phases to `timings`,
/// and GPU time per pass where the adapter has timestamps.
pub fn run(
    engine: &Engine,
    img: &Image,
    options: &Options,
    timings: &mut Timings,
) -> Result<Image> {
    match engine {
        Engine::Cpu => timings.phase("compute", || cpu(img, options)),
        Engine::Gpu(gpu) => {
            let (w, h) = options.size.resolve(img.width, img.height)?;
            let passes = passes(img.width, img.height, w, h, options.filter, img.bit_depth());
            if passes.is_empty() {
                return Ok(img.clone());
            }
            let plan = timings.phase("plan", || {
                ResizePlan::new(gpu, img, &passes, options.filter)
            })?;
            timings.phase("upload", || plan.write(gpu, img));
            gpu.run_timed(timings, 1, |b, _| plan.record(b))?;
            timings.phase("download", || plan.read(gpu))
        }
    }
}

/// The CPU engine's resize: the native engine, bit for bit the reference's result.
fn cpu(img: &Image, options: &Options) -> Result<Image> {
    engine::resize(img, options)
}

#[cfg(test)]
mod tests;
