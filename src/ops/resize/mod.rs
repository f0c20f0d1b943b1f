//! `resize`: Pillow's `Image.resize` (LANCZOS, BICUBIC, BILINEAR, BOX, NEAREST) byte for byte
//! on 8-bit images, the same algorithm at 16 bits, identical on the native CPU engine and on
//! every GPU adapter (wgsl/resize_h.wgsl, wgsl/resize_v.wgsl).
//!
//! The weights are computed once on the host in f64 as Pillow computes them and quantised to
//! 22-bit integers (`coeffs`); every engine then does integer sums only. An image is resized
//! by at most two 1-D passes (`coeffs::passes`), alpha premultiplied before and divided out
//! after. Semantics and limits: docs/resize.md.
//!
//! Files: `coeffs` (weights and pass order), `reference`, `engine` (the native CPU engine),
//! `plan` (the GPU passes), `bench`.

mod bench;
mod coeffs;
pub mod engine;
mod plan;
mod reference;

use anyhow::{bail, Result};

use crate::gpu::{Engine, Timings};
use crate::io::image::Image;
pub use coeffs::{axis, nearest_axis, passes, Axis, Dir, Pass, PRECISION_BITS};
pub use plan::ResizePlan;
pub use reference::reference;

/// `resize` in the registry.
pub const OP: super::Op = super::Op {
    command: true,
    name: "resize",
    bench: bench::cases,
    tune: None,
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
}

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
