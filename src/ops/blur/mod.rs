//! `blur`: separable box and gaussian blur in integer fixed-point arithmetic, identical on the
//! GPU (wgsl/blur_*.wgsl) and in the CPU reference.
//!
//! Each pass blurs along lines and writes its result transposed, so the first pass (rows of
//! the image) is followed by the same pass over the columns, and the second pass's output is
//! the right way round again. Semantics, rounding and limits: docs/blur.md.
//!
//! Files: `arith` (the arithmetic both sides share), `pack` (pixels as words), `reference`
//! (the CPU reference), `plan` (the GPU passes), `tune` (the kernels' shapes), `bench`.

mod arith;
mod bench;
pub mod engine;
mod pack;
mod plan;
mod reference;
mod tune;

use anyhow::Result;

use crate::gpu::{Engine, Gpu, Timings};
use crate::io::image::Image;
pub use arith::{gaussian_radius, gaussian_weights, max_box_radius, MAX_GAUSS_RADIUS};
pub use plan::{BlurPlan, Layout};
pub use reference::reference;
pub use tune::Tunables;

/// `blur` in the registry.
pub const OP: super::Op = super::Op {
    name: "blur",
    bench: bench::cases,
    tune: Some(tune::tune),
    shaders: plan::shaders,
};

/// Box (the window mean) or gaussian.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Kind {
    Box,
    Gaussian { sigma: f64 },
}

/// What to blur with, and how the GPU runs it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Options {
    pub kind: Kind,
    /// Window radius: 2r + 1 samples in each direction.
    pub radius: u32,
    /// How many times the whole blur is applied (alpha is premultiplied once, before the first).
    pub iterations: u32,
    /// The GPU's layout, shape and limits; the CPU ignores them (results are the same).
    pub gpu: GpuOptions,
}

impl Options {
    /// A blur with the GPU's defaults (the tune cache's shapes where there are some).
    pub fn new(kind: Kind, radius: u32, iterations: u32) -> Options {
        Options {
            kind,
            radius,
            iterations,
            gpu: GpuOptions::DEFAULT,
        }
    }

    /// These options with `gpu` for the GPU.
    pub fn with_gpu(self, gpu: GpuOptions) -> Options {
        Options { gpu, ..self }
    }

    /// The limits that hold for every image, checked before any file or device is touched:
    /// a failure is a usage error. (The box radius also has a limit that depends on the
    /// image's bit depth, checked when the image is known.)
    pub fn check(&self) -> Result<()> {
        let usage = |m: String| Err(crate::UsageError(m).into());
        if self.iterations < 1 {
            return usage("iterations must be at least 1".into());
        }
        match self.kind {
            Kind::Box => {
                let max = max_box_radius(255);
                if self.radius > max {
                    return usage(format!(
                        "radius {} is too large for any image (at most {max})",
                        self.radius
                    ));
                }
            }
            Kind::Gaussian { sigma } => {
                if !(sigma > 0.0 && sigma.is_finite()) {
                    return usage(format!("sigma must be positive, got {sigma}"));
                }
                if self.radius > MAX_GAUSS_RADIUS {
                    return usage(arith::gauss_radius_message(self.radius));
                }
            }
        }
        Ok(())
    }
}

/// How a blur runs on a GPU: the kernels' layout and shape, and the limits the plan works
/// within (tests lower `max_binding` to force strips on small images, and pick the layout to
/// test both on any adapter).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct GpuOptions {
    /// Largest storage binding to use (bytes); `None` is the adapter's limit.
    pub max_binding: Option<u64>,
    /// `None`: the adapter's layout ([`Layout::for_gpu`]).
    pub layout: Option<Layout>,
    /// `None`: the tune cache's choice for this adapter and image size, else
    /// [`Tunables::DEFAULT`].
    pub tunables: Option<Tunables>,
}

impl GpuOptions {
    pub const DEFAULT: GpuOptions = GpuOptions {
        max_binding: None,
        layout: None,
        tunables: None,
    };

    /// The kernels' shape for an image of `pixels` on `gpu`.
    fn tunables(&self, gpu: &Gpu, pixels: usize) -> Tunables {
        self.tunables
            .or_else(|| crate::tune::choice(gpu, "blur", pixels as f64, Tunables::check))
            .unwrap_or(Tunables::DEFAULT)
    }
}

/// Blurs `img` on the engine. Adds upload, compute and download phases to `timings`, and
/// GPU time per pass where the adapter has timestamps.
pub fn run(
    engine: &Engine,
    img: &Image,
    options: &Options,
    timings: &mut Timings,
) -> Result<Image> {
    match engine {
        Engine::Cpu => timings.phase("compute", || cpu(img, options)),
        Engine::Gpu(gpu) => run_gpu(gpu, img, options, timings),
    }
}

/// The CPU engine's blur: the native engine, bit for bit the reference's result.
fn cpu(img: &Image, options: &Options) -> Result<Image> {
    engine::blur(img, options)
}

fn run_gpu(gpu: &Gpu, img: &Image, options: &Options, timings: &mut Timings) -> Result<Image> {
    if img.pixels() == 0 {
        arith::arith(options, img.max_value(), pack::alpha_lane(img.channels))?;
        return Ok(img.clone());
    }
    let plan = timings.phase("upload", || BlurPlan::new(gpu, img, options))?;
    gpu.run_timed(timings, plan.passes(), |b, range| {
        plan.record_passes(b, range)
    })?;
    timings.phase("download", || plan.read(gpu, img))
}

#[cfg(test)]
mod tests;
