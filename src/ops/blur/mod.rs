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

use anyhow::{bail, Result};

use crate::gpu::{Batch, Engine, Gpu, Timings, Upload};
use crate::io::image::Image;
use crate::tune::Tunable;
pub use arith::{gaussian_radius, gaussian_weights, max_box_radius, MAX_GAUSS_RADIUS};
pub use plan::{BlurPlan, Layout};
pub use reference::reference;
pub use tune::Tunables;

/// `blur` in the registry.
pub const OP: super::Op = super::Op {
    name: "blur",
    bench: bench::cases,
    tune: Some(crate::tune::tune::<tune::Tuning>),
    shaders: plan::shaders,
    command: true,
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

    /// The native CPU engine's estimated time for an image of `width` x `height` with
    /// `channels` samples a pixel of `bit_depth` bits ([`super::cpu_time`]). Per sample and
    /// iteration on one core (measured: docs/BENCHMARKS.md, "The native CPU engine's rates"):
    /// - 8 bits without alpha, in 16-bit AVX2 lanes: 0.9 ns for a box (a running sum, any
    ///   radius up to 128) and 0.5 + 0.075 ns a tap (2R+1 taps) for a gaussian;
    /// - 16 bits, or without AVX2: 1.2 ns for a box, 0.2 ns a tap;
    /// - with alpha (premultiplied, in 32-bit lanes): 5 ns for a box, 2.5 + 0.2 ns a tap.
    pub fn cpu_estimate(
        &self,
        width: u32,
        height: u32,
        channels: u8,
        bit_depth: u32,
    ) -> std::time::Duration {
        super::cpu_time(
            self.cpu_work_ns(width, height, channels, bit_depth),
            usize::MAX,
        )
    }

    /// [`Options::cpu_estimate`]'s work before it is shared among the threads: nanoseconds
    /// on one core.
    pub fn cpu_work_ns(&self, width: u32, height: u32, channels: u8, bit_depth: u32) -> f64 {
        let taps = 2.0 * f64::from(self.radius) + 1.0;
        let alpha = channels.is_multiple_of(2);
        let lanes = !alpha && bit_depth == 8 && engine::has_avx2();
        let per_sample = match (self.kind, alpha) {
            (Kind::Box, true) => 5.0,
            (Kind::Box, false) if lanes && self.radius <= 128 => 0.9,
            (Kind::Box, false) => 1.2,
            (Kind::Gaussian { .. }, true) => 2.5 + 0.2 * taps,
            (Kind::Gaussian { .. }, false) if lanes => 0.5 + 0.075 * taps,
            (Kind::Gaussian { .. }, false) => 0.2 * taps,
        };
        let samples = f64::from(width) * f64::from(height) * f64::from(channels);
        samples * per_sample * f64::from(self.iterations)
    }

    /// Whether the GPU blurs an all-opaque 8-bit RGBA image like `img` with these options
    /// through its faster passes, so that its upload is worth checking
    /// ([`crate::gpu::Upload::check_opaque_rgba8`]).
    pub fn has_opaque_passes(&self, img: &Image) -> bool {
        plan::has_opaque_passes(self, img)
    }

    /// What a GPU would save against the native CPU engine on `files` images like this one
    /// ([`Options::cpu_estimate`]), for the engine choice (`gpu::SMALL_JOB`): the engine's
    /// time less the GPU path's own host time, which copies each image into staging and the
    /// result, of the same size, out of it ([`super::gpu_saving_over_copies`]).
    pub fn gpu_saving(
        &self,
        width: u32,
        height: u32,
        channels: u8,
        bit_depth: u32,
        files: u32,
    ) -> std::time::Duration {
        let engine = self.cpu_estimate(width, height, channels, bit_depth);
        let bytes =
            f64::from(width) * f64::from(height) * f64::from(channels) * f64::from(bit_depth / 8);
        super::gpu_saving_over_copies(engine, 2.0 * bytes, files)
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
    /// Whether the box kernel may sum across a line's threads with subgroup operations, where
    /// the adapter's subgroups hold whole lines (false: through workgroup memory, as on
    /// adapters without subgroups; the results are the same).
    pub subgroups: bool,
}

impl GpuOptions {
    pub const DEFAULT: GpuOptions = GpuOptions {
        max_binding: None,
        layout: None,
        tunables: None,
        subgroups: true,
    };

    /// The kernels' shape for an image of `pixels` on `gpu`.
    fn tunables(&self, gpu: &Gpu, pixels: usize) -> Tunables {
        self.tunables
            .or_else(|| crate::tune::choice(gpu, OP.name, pixels as f64, Tunables::check))
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
    Blurrer::new(engine, *options).run(img, timings)
}

/// Blurs image after image on one engine with the same options, as [`run`] does, keeping the
/// GPU plan (pipelines, buffers, bindings, staging) from one image to the next of the same
/// size and layout: per image the host copies the samples in and the result out, and the
/// GPU does the rest. A batch's engine thread holds one.
pub struct Blurrer<'e> {
    engine: &'e Engine,
    options: Options,
    plan: Option<BlurPlan>,
}

impl<'e> Blurrer<'e> {
    pub fn new(engine: &'e Engine, options: Options) -> Blurrer<'e> {
        Blurrer {
            engine,
            options,
            plan: None,
        }
    }

    /// Blurs `img`, adding phases to `timings` as [`run`] does, and "plan" on a GPU: a new
    /// plan where the image needs one, and the passes chosen for it (their pipelines built
    /// the first time an image takes them).
    pub fn run(&mut self, img: &Image, timings: &mut Timings) -> Result<Image> {
        match self.engine {
            Engine::Cpu => timings.phase("compute", || cpu(img, &self.options)),
            Engine::Gpu(gpu) => self.run_gpu(gpu, img, timings),
        }
    }

    /// As [`Blurrer::run`], the result's samples into `out`: written over in place on the CPU
    /// engine where it fits ([`engine::blur_into`]), replaced otherwise.
    pub fn run_into(
        &mut self,
        img: &Image,
        out: &mut crate::io::image::Samples,
        timings: &mut Timings,
    ) -> Result<()> {
        match self.engine {
            Engine::Cpu => timings.phase("compute", || engine::blur_into(img, &self.options, out)),
            Engine::Gpu(gpu) => {
                *out = self.run_gpu(gpu, img, timings)?.samples;
                Ok(())
            }
        }
    }

    /// Whether [`Blurrer::record_on_device`] takes `img`: a GPU engine and an image of at
    /// least one pixel.
    pub fn records_on_device(&self, img: &Image) -> bool {
        matches!(self.engine, Engine::Gpu(_)) && img.pixels() > 0
    }

    /// Records the blur of `img` into `batch` (the samples written to the upload buffer at
    /// once, the copy to the device and every pass recorded) and leaves the result there:
    /// its buffer, in the host's layout (the bytes `run` would return, rows packed), for
    /// another kernel recorded after it to read (the JPEG encoder, src/ops/encode/). Where
    /// `staged` holds `img`'s samples already (written by a decoding thread), the copy is
    /// recorded from it and nothing is written here. Only where
    /// [`Blurrer::records_on_device`]; call [`Blurrer::submitted`] once the batch ran.
    pub fn record_on_device(
        &mut self,
        img: &Image,
        staged: Option<&Upload>,
        batch: &mut Batch,
        timings: &mut Timings,
    ) -> Result<wgpu::Buffer> {
        let Engine::Gpu(gpu) = self.engine else {
            bail!("the CPU engine leaves nothing on a device");
        };
        let mut plan = self.plan_for(gpu, img, timings)?;
        match staged.filter(|u| u.bytes() == plan.upload_bytes()) {
            Some(upload) => {
                let from = (upload.buffer(), 0);
                timings.phase("plan", || {
                    plan.record_upload_from(gpu, batch, from, upload.opaque_rgba8())
                })?
            }
            None => {
                timings.phase("upload", || plan.write_samples(gpu, img))?;
                timings.phase("plan", || plan.choose_passes(gpu))?;
                plan.record_upload(batch);
            }
        }
        plan.record(batch);
        let out = plan.result_on_device();
        self.plan = Some(plan);
        Ok(out)
    }

    /// Records the blur of an image shaped like `like` whose samples, in the host's layout,
    /// lie in `src` at `src.1`, and the copy of the result to `dst` at `dst.1` (offsets a
    /// multiple of 4, each image's bytes padded to a whole word): the host copies nothing and
    /// nothing waits, for a caller that keeps its own staging and submits the batch when it
    /// likes (the GPU frame stream, src/batch/video_gpu.rs). Only where
    /// [`Blurrer::records_on_device`]; `like`'s samples are not read.
    pub fn record_between(
        &mut self,
        like: &Image,
        batch: &mut Batch,
        src: (&wgpu::Buffer, u64),
        dst: (&wgpu::Buffer, u64),
        timings: &mut Timings,
    ) -> Result<()> {
        let Engine::Gpu(gpu) = self.engine else {
            bail!("the CPU engine records nothing on a device");
        };
        let mut plan = self.plan_for(gpu, like, timings)?;
        // Nothing says whether these samples are all opaque: the usual passes.
        timings.phase("plan", || plan.record_upload_from(gpu, batch, src, false))?;
        plan.record(batch);
        plan.record_download_to(batch, dst.0, dst.1);
        self.plan = Some(plan);
        Ok(())
    }

    /// After the batch [`Blurrer::record_on_device`] recorded into ran: the upload buffer
    /// mapped again for the next image.
    pub fn submitted(&mut self) {
        if let Some(plan) = self.plan.as_mut() {
            plan.remap_upload();
        }
    }

    fn run_gpu(&mut self, gpu: &Gpu, img: &Image, timings: &mut Timings) -> Result<Image> {
        if img.pixels() == 0 {
            arith::arith(
                &self.options,
                img.max_value(),
                pack::alpha_lane(img.channels),
            )?;
            return Ok(img.clone());
        }
        let mut plan = self.blur_gpu(gpu, img, timings, true)?;
        let out = timings.phase("download", || plan.read(gpu, img))?;
        self.plan = Some(plan);
        Ok(out)
    }

    /// The plan for `img`: the last one where it fits. Taken out while in use: after an error
    /// it is dropped, whatever state its staging was left in.
    fn plan_for(&mut self, gpu: &Gpu, img: &Image, timings: &mut Timings) -> Result<BlurPlan> {
        match self.plan.take() {
            Some(plan) if plan.fits(img) => Ok(plan),
            other => {
                drop(other);
                timings.phase("plan", || BlurPlan::for_layout(gpu, img, &self.options))
            }
        }
    }

    /// The blur's passes on `img` (of at least one pixel), with the copy to the read-back
    /// buffer when `download`; the plan is handed back for the caller to read and keep.
    fn blur_gpu(
        &mut self,
        gpu: &Gpu,
        img: &Image,
        timings: &mut Timings,
        download: bool,
    ) -> Result<BlurPlan> {
        let mut plan = self.plan_for(gpu, img, timings)?;
        timings.phase("upload", || plan.write_samples(gpu, img))?;
        timings.phase("plan", || plan.choose_passes(gpu))?;
        let passes = plan.passes();
        gpu.run_timed(timings, passes, |b, range| {
            if range.start == 0 {
                plan.record_upload(b);
            }
            let last = range.end == passes;
            plan.record_passes(b, range);
            if last && download {
                plan.record_download(b);
            }
        })?;
        Ok(plan)
    }
}

/// The CPU engine's blur: the native engine, bit for bit the reference's result.
fn cpu(img: &Image, options: &Options) -> Result<Image> {
    engine::blur(img, options)
}

#[cfg(test)]
mod tests;
