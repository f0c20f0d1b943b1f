//! `encode`: baseline JPEG encoded on the engine, byte for byte the file of gpukit's CPU
//! encoder (src/io/jpeg/, itself libjpeg-turbo's): the blocks made in parallel, one MCU a
//! workgroup; the Huffman codes of every block placed by a scan of their bit lengths; the
//! 0xFF stuffing placed by a second scan. Only the compressed stream comes back.
//! docs/encode.md explains the passes.

mod plan;
pub mod png;
mod tune;

pub use tune::Tunables;

use std::time::Duration;

use anyhow::{anyhow, bail, Result};

use crate::bench::{Case, Sizes, Unit};
use crate::gpu::{Batch, Engine, Gpu, PassTimer, Timings};
use crate::io::image::{Image, Samples};
use crate::io::jpeg::{self, EncodeOptions, Frame, Markers};
use plan::{EncodePlan, Source};

/// `encode` in the registry: bench only (the image subcommands write JPEG through it).
pub const OP: super::Op = super::Op {
    name: "encode",
    bench: bench_cases,
    tune: Some(crate::tune::tune::<tune::Tuning>),
    shaders: plan::shaders,
    command: false,
};

/// Encodes an 8-bit gray or RGB image as a JPEG file on the engine: the same bytes as
/// [`jpeg::encode`] with the same arguments (its reference). The GPU codes baseline scans; a
/// progressive file, or a frame past what one storage binding holds, is encoded on the CPU.
pub fn encode_jpeg(
    engine: &Engine,
    img: &Image,
    opts: &EncodeOptions,
    markers: &Markers,
    timings: &mut Timings,
) -> Result<Vec<u8>> {
    Encoder::default().encode(engine, img, opts, markers, timings)
}

/// Whether [`Encoder::encode_recorded`] takes an image of `width` x `height` x `channels`
/// with `opts`: baseline, gray or RGB, within one storage binding.
pub fn takes_on_device(
    gpu: &Gpu,
    width: u32,
    height: u32,
    channels: u8,
    opts: &EncodeOptions,
) -> bool {
    let len = width as usize * height as usize * usize::from(channels);
    !opts.progressive
        && Frame::new(len, width, height, channels, opts).is_ok_and(|f| plan::fits(gpu, &f, len))
}

/// An engine thread's JPEG encoder: on a GPU its plan (kernels, buffers sized for the worst
/// case, bind groups, read-back) is kept from one file to the next of the same size and
/// settings, and each file is one submission, one wait and one mapping.
#[derive(Default)]
pub struct Encoder {
    plan: Option<EncodePlan>,
    timer: Option<PassTimer>,
}

impl Encoder {
    /// [`encode_jpeg`], keeping the GPU plan for the next image.
    pub fn encode(
        &mut self,
        engine: &Engine,
        img: &Image,
        opts: &EncodeOptions,
        markers: &Markers,
        timings: &mut Timings,
    ) -> Result<Vec<u8>> {
        let Samples::U8(samples) = &img.samples else {
            bail!("JPEG stores neither alpha nor 16-bit samples");
        };
        let (width, height, channels) = (img.width, img.height, img.channels);
        let frame =
            Frame::new(samples.len(), width, height, channels, opts).map_err(|e| anyhow!(e))?;
        match engine {
            Engine::Gpu(gpu) if !opts.progressive && plan::fits(gpu, &frame, samples.len()) => {
                let t = Tunables::resolved(gpu, frame.width as usize * frame.height as usize);
                let source = Source::Host(samples);
                self.run(gpu, &frame, source, opts.optimize, markers, t, timings)
            }
            _ => {
                let mut out = Vec::new();
                timings.phase("encode", || {
                    jpeg::encode(samples, width, height, channels, opts, markers, &mut out)
                        .map_err(|e| anyhow!(e))
                })?;
                Ok(out)
            }
        }
    }

    /// The JPEG file (the same bytes as [`encode_jpeg`]'s) of an 8-bit gray or RGB image of
    /// `width` x `height` x `channels` that `record` makes on `gpu`: it records its passes
    /// into the encoder's batch and returns their result's buffer (a byte a sample, rows
    /// packed), which the encoder reads there. One submission for both, and only the file
    /// comes back. Only what [`takes_on_device`] accepts.
    #[expect(
        clippy::too_many_arguments,
        reason = "the image's shape, the file's settings and the recorder, each needed once"
    )]
    pub fn encode_recorded(
        &mut self,
        gpu: &Gpu,
        width: u32,
        height: u32,
        channels: u8,
        opts: &EncodeOptions,
        markers: &Markers,
        timings: &mut Timings,
        record: &mut dyn FnMut(&mut Batch) -> Result<wgpu::Buffer>,
    ) -> Result<Vec<u8>> {
        if !takes_on_device(gpu, width, height, channels, opts) {
            bail!("the GPU encoder codes baseline gray or RGB frames within one storage binding");
        }
        let len = width as usize * height as usize * usize::from(channels);
        let frame = Frame::new(len, width, height, channels, opts).map_err(|e| anyhow!(e))?;
        let t = Tunables::resolved(gpu, width as usize * height as usize);
        let source = Source::Recorded(record);
        self.run(gpu, &frame, source, opts.optimize, markers, t, timings)
    }

    /// One file on the GPU: the passes that make the samples (if any) and every encode pass
    /// in one batch, its wall time one phase, "gpu encode", and its passes timed.
    #[expect(
        clippy::too_many_arguments,
        reason = "the frame, its samples and settings, the tunables and the timings"
    )]
    fn run(
        &mut self,
        gpu: &Gpu,
        frame: &Frame,
        source: Source,
        optimize: bool,
        markers: &Markers,
        t: Tunables,
        timings: &mut Timings,
    ) -> Result<Vec<u8>> {
        let start = std::time::Instant::now();
        let mut plan = match self.plan.take() {
            Some(p) if p.fits(frame, optimize, t) => p,
            other => {
                drop(other);
                EncodePlan::new(gpu, frame, optimize, t)?
            }
        };
        // A timer left with passes of a batch that failed before its submission is dropped.
        let mut timer = self
            .timer
            .take()
            .unwrap_or_else(|| PassTimer::new(gpu, plan::TIMED_PASSES));
        let mut batch = gpu.batch(Some(&mut timer));
        let src = plan.samples(gpu, &mut batch, source)?;
        plan.record(gpu, &mut batch, &src);
        let mut out = Vec::new();
        let headers = |o: &mut Vec<u8>| frame.write_headers(markers, o).map_err(|e| anyhow!(e));
        let times = plan.submit(gpu, batch, frame, headers, &mut out)?;
        timings.add("gpu encode", start.elapsed());
        timings.add_passes(&times);
        self.plan = Some(plan);
        self.timer = Some(timer);
        Ok(out)
    }
}

/// The CPU encoder's time a byte of input, one thread: 18.9 ms for a 1920x1080 RGB photo at
/// quality 90, optimised tables, 4:2:0, on the 16-core H100 host (the CLI's encode phase,
/// docs/BENCHMARKS.md, call AA), where the choice matters; 8.6 ms on the 2-core development
/// machine.
const CPU_NS_PER_BYTE: f64 = 3.0;
/// The GPU encoder's host time a byte of input, on the cores: the samples written into an
/// upload buffer by the decoding threads (a third of the blur's 0.65 ns for both copies) and
/// the file, about a tenth of them, copied back.
const HOST_NS_PER_BYTE: f64 = 0.25;
/// The time an engine thread spends on each file it encodes on the GPU: one submission (the
/// op's passes and the encoder's, the samples copied from an upload a decoding thread
/// wrote) waited on until its read-back is mapped, and the file copied out: 4.6-5.0 ms a
/// 1920x1080 photo in the 16-core batch on H200 hosts (`gpu encode` 4.2-4.5 ms, the plans
/// and the uploads of the files decoded before the device was open 0.4-0.5 ms, 128 files,
/// calls AJ-gpubatch2-1 and -2 of docs/BENCHMARKS.md; 6.3 ms before the decoding threads
/// wrote the uploads), for 0.46 ms of passes. The engine threads are few (a quarter of the
/// cores, at most 4), so this, not the GPU, bounds the batch there: the GPU path made 276-282
/// images/s where the cores made 306-322.
const ENGINE_NS_PER_FILE: f64 = 4.8e6;

/// What encoding `files` baseline JPEGs of `width` x `height` x `channels` on a GPU saves:
/// the CPU encoder's time on the cores, less the GPU path's host copies and the waits it puts
/// on the batch's `engine_threads` (which the other stages do not share). Zero where the
/// waits cost more than the encoding, as on many cores today.
pub fn gpu_saving(
    width: u32,
    height: u32,
    channels: u8,
    files: u32,
    engine_threads: usize,
) -> Duration {
    let bytes = f64::from(width) * f64::from(height) * f64::from(channels);
    let cores = super::cpu_time(bytes * (CPU_NS_PER_BYTE - HOST_NS_PER_BYTE), usize::MAX);
    let waits = Duration::from_secs_f64(ENGINE_NS_PER_FILE * 1e-9 / engine_threads.max(1) as f64);
    cores
        .saturating_sub(waits)
        .checked_mul(files)
        .unwrap_or(Duration::MAX)
}

#[cfg(test)]
mod tests;

/// `bench encode`: a 1920x1080 RGB image of smooth gradients and noise, baseline 4:2:0 at
/// quality 90 with Annex K tables, every pass on the device (tables and sizes settled by one
/// untimed run); throughput counts the input bytes.
fn bench_cases<'e>(engine: &'e Engine, _: &Sizes) -> Result<Vec<Case<'e>>> {
    let (w, h) = (1920u32, 1080u32);
    let samples = bench_image(w, h);
    let opts = EncodeOptions {
        quality: 90,
        subsampling: jpeg::Subsampling::S420,
        progressive: false,
        optimize: false,
    };
    let name = format!("{w}x{h} RGB 4:2:0 q90");
    let work = samples.len() as f64;
    let markers = Markers {
        density: (0, 1, 1),
        app: &[],
    };
    Ok(vec![match engine {
        Engine::Gpu(gpu) => {
            let frame = Frame::new(samples.len(), w, h, 3, &opts).map_err(|e| anyhow!(e))?;
            let t = Tunables::resolved(gpu, (w * h) as usize);
            let mut plan = EncodePlan::new(gpu, &frame, false, t)?;
            let src = plan.host_samples(gpu, &samples);
            Case::gpu("encode", name, Unit::GBps, work, move |b| {
                plan.record(gpu, b, &src)
            })
        }
        Engine::Cpu => Case::cpu("encode", name, Unit::GBps, work, move || {
            let mut out = Vec::new();
            jpeg::encode(&samples, w, h, 3, &opts, &markers, &mut out).expect("a valid frame");
            std::hint::black_box(out);
        }),
    }])
}

/// A photo-like RGB test image: gradients with a little noise (a JPEG of pure noise codes
/// far more bits a block than a photo does).
pub(crate) fn bench_image(w: u32, h: u32) -> Vec<u8> {
    let noise = crate::bench::noise_bytes((w * h * 3) as usize, 26);
    let mut out = Vec::with_capacity(noise.len());
    for y in 0..h {
        for x in 0..w {
            let i = ((y * w + x) * 3) as usize;
            let base = [x * 255 / w, y * 255 / h, (x + y) * 255 / (w + h)];
            for c in 0..3 {
                out.push((base[c] as u8).wrapping_add(noise[i + c] >> 4));
            }
        }
    }
    out
}
