//! `encode_png`: PNG encoded on the engine, byte for byte the CPU engine's file at compression
//! level 1 (the png crate, every row Paeth-filtered, fdeflate's fast compressor): the rows
//! filtered on the device, the deflate stream cut into pieces that each code alone once the
//! run of zeros before them is known, placed by a scan of their bit lengths, Adler-32 from
//! per-workgroup sums. Only the coded stream comes back; the host writes the chunks around
//! it. docs/encode.md explains the passes.

mod deflate;
mod plan;
#[cfg(test)]
mod tests;
mod tune;

pub use tune::Tunables;

use anyhow::{bail, Result};

use crate::gpu::{Engine, Gpu, Timings};
use ::image::ImageFormat;

use crate::io::image::{self, Image, Samples, WriteOptions};
use crate::io::metadata::Metadata;
use plan::{PngPlan, Source};

/// `encode_png` in the registry: bench and tune only (the image subcommands write PNG
/// through it).
pub const OP: crate::ops::Op = crate::ops::Op {
    name: "encode_png",
    bench: bench_cases,
    tune: Some(crate::tune::tune::<tune::Tuning>),
    shaders: plan::shaders,
    command: false,
};

/// The layout of an image to encode: samples of 8 or 16 bits, 1 to 4 channels.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Layout {
    pub width: u32,
    pub height: u32,
    pub channels: u8,
    pub sixteen: bool,
}

impl Layout {
    pub fn of(img: &Image) -> Layout {
        Layout {
            width: img.width,
            height: img.height,
            channels: img.channels,
            sixteen: matches!(img.samples, Samples::U16(_)),
        }
    }
}

/// Whether the GPU encodes a PNG of `layout` at `compression` on `gpu`: level 1 (the other
/// levels are zlib's, on the CPU), within the GPU passes' bounds.
pub fn takes(gpu: &Gpu, layout: &Layout, compression: u8) -> bool {
    compression == WriteOptions::FASTEST_COMPRESSION && plan::fits(gpu, layout)
}

/// Encodes `img` with `meta` as a PNG file at `compression` on the engine: the same bytes as
/// [`image::encode_with`] (its reference). The GPU codes level 1; other levels, and an image
/// past what the GPU passes take, are encoded on the CPU, as is the stored data the png
/// crate writes where coding would make it larger (noise).
pub fn encode_png(
    engine: &Engine,
    img: &Image,
    meta: &Metadata,
    compression: u8,
    timings: &mut Timings,
) -> Result<Vec<u8>> {
    let layout = Layout::of(img);
    if let Engine::Gpu(gpu) = engine {
        if takes(gpu, &layout, compression) {
            let samples = crate::ops::sample_bytes(&img.samples);
            if let Some(file) = encode_timed(gpu, &layout, Source::Host(&samples), meta, timings)? {
                return Ok(file);
            }
        }
    }
    cpu_file(img, meta, compression, timings)
}

/// An image already on `gpu` (another op's result, rows packed, 16-bit samples
/// little-endian) of `layout`.
pub struct OnDevice<'a> {
    pub buffer: &'a wgpu::Buffer,
    pub layout: Layout,
}

/// [`encode_png`] at level 1 of an image already on the GPU: the same bytes, and the pixels
/// never cross the bus (but for the stored fallback, which reads them back). Only what
/// [`takes`] accepts.
pub fn encode_on_device(
    gpu: &Gpu,
    img: &OnDevice,
    meta: &Metadata,
    timings: &mut Timings,
) -> Result<Vec<u8>> {
    let compression = WriteOptions::FASTEST_COMPRESSION;
    if !takes(gpu, &img.layout, compression) {
        bail!("the GPU's PNG encoder takes level 1 within one storage binding");
    }
    if let Some(file) = encode_timed(gpu, &img.layout, Source::Device(img.buffer), meta, timings)? {
        return Ok(file);
    }
    encode_read_back(gpu, img, meta, timings)
}

/// The file of an image on the device as the cores encode it, read back first: where the
/// png crate stores the data (the GPU's coded stream would be larger).
pub fn encode_read_back(
    gpu: &Gpu,
    img: &OnDevice,
    meta: &Metadata,
    timings: &mut Timings,
) -> Result<Vec<u8>> {
    let compression = WriteOptions::FASTEST_COMPRESSION;
    let l = img.layout;
    let samples = l.width as usize * l.height as usize * usize::from(l.channels);
    let host = timings.phase("download", || -> Result<Image> {
        Ok(if l.sixteen {
            let v: Vec<u16> = gpu.read_vec(img.buffer, samples)?;
            Image::new_u16(l.width, l.height, l.channels, v)
        } else {
            let v: Vec<u8> = gpu.read(img.buffer, 0, samples as u64)?;
            Image::new_u8(l.width, l.height, l.channels, v)
        })
    })?;
    cpu_file(&host, meta, compression, timings)
}

/// [`encode_on_device`] of the image that `record` makes on the device: its passes (another
/// op's, a blur's) recorded into the encoder's submission, so that a file is one submission,
/// one wait and one mapping. `None` where the png crate stores the data instead (noise): the
/// caller then writes it with [`encode_read_back`]. Only what [`takes`] accepts.
pub fn encode_recorded(
    gpu: &Gpu,
    layout: &Layout,
    meta: &Metadata,
    timings: &mut Timings,
    record: &mut dyn FnMut(&mut crate::gpu::Batch) -> Result<wgpu::Buffer>,
) -> Result<Option<Vec<u8>>> {
    if !takes(gpu, layout, WriteOptions::FASTEST_COMPRESSION) {
        bail!("the GPU's PNG encoder takes level 1 within one storage binding");
    }
    encode_timed(gpu, layout, Source::Recorded(record), meta, timings)
}

/// The CPU engine's file (the reference).
fn cpu_file(
    img: &Image,
    meta: &Metadata,
    compression: u8,
    timings: &mut Timings,
) -> Result<Vec<u8>> {
    let opts = WriteOptions {
        compression,
        ..WriteOptions::default()
    };
    let mut out = Vec::new();
    timings.phase("encode", || {
        image::encode_with(img.clone(), ImageFormat::Png, meta, &opts, &mut out)
    })?;
    Ok(out)
}

/// The GPU passes and the chunks around their stream, their wall time one phase, "gpu encode"
/// (their passes kept); `None` where the png crate stores the data instead.
fn encode_timed(
    gpu: &Gpu,
    layout: &Layout,
    source: Source,
    meta: &Metadata,
    timings: &mut Timings,
) -> Result<Option<Vec<u8>>> {
    let t = Tunables::resolved(gpu, layout.width as usize * layout.height as usize);
    encode_with(gpu, layout, source, meta, t, timings)
}

/// [`encode_timed`] with the kernels shaped by `t`.
fn encode_with(
    gpu: &Gpu,
    layout: &Layout,
    source: Source,
    meta: &Metadata,
    t: Tunables,
    timings: &mut Timings,
) -> Result<Option<Vec<u8>>> {
    let mut own = Timings::default();
    let start = std::time::Instant::now();
    let zlib = zlib_gpu(gpu, layout, source, t, &mut own)?;
    let file = zlib
        .map(|zlib| -> Result<Vec<u8>> {
            let mut out = Vec::with_capacity(zlib.len() + 1024);
            let l = layout;
            image::write_png_with(
                l.width, l.height, l.channels, l.sixteen, meta, &zlib, &mut out,
            )?;
            Ok(out)
        })
        .transpose()?;
    timings.add("gpu encode", start.elapsed());
    timings.add_passes_of(&own);
    Ok(file)
}

/// The zlib stream of the image data, from the GPU passes: one submission, one wait and one
/// mapping.
fn zlib_gpu(
    gpu: &Gpu,
    layout: &Layout,
    source: Source,
    t: Tunables,
    timings: &mut Timings,
) -> Result<Option<Vec<u8>>> {
    with_plan(gpu, layout, t, |plan| {
        let (zlib, times) = plan.run(gpu, source)?;
        timings.add_passes(&times);
        Ok(zlib)
    })
}

/// The plans kept with a device, for the next image of their layout: at most this much
/// device memory (eight 1080p RGB plans; a batch's engine threads are at most 4).
const KEPT_BYTES: u64 = 256 << 20;

/// The PNG plans kept with a device (`Gpu::attached`), idle ones only.
#[derive(Default)]
struct Plans(std::sync::Mutex<Vec<PngPlan>>);

/// Runs `f` on a plan for `layout` and `t`: a kept one, else a new one, kept afterwards while
/// the kept plans stay within [`KEPT_BYTES`].
fn with_plan<T>(
    gpu: &Gpu,
    layout: &Layout,
    t: Tunables,
    f: impl FnOnce(&mut PngPlan) -> Result<T>,
) -> Result<T> {
    let plans = gpu.attached(Plans::default);
    let lock = || {
        plans
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    };
    let kept = {
        let mut kept = lock();
        let at = kept.iter().position(|p| p.takes(layout, &t));
        at.map(|i| kept.swap_remove(i))
    };
    let mut plan = match kept {
        Some(p) => p,
        None => PngPlan::new(gpu, layout, t)?,
    };
    let out = f(&mut plan)?;
    let mut kept = lock();
    if kept.iter().map(PngPlan::bytes).sum::<u64>() + plan.bytes() <= KEPT_BYTES {
        kept.push(plan);
    }
    Ok(out)
}

/// The CPU engine's PNG encode time a byte of samples, one thread: 15.6 ms for a blurred
/// 1920x1080 RGB photo at level 1 on the 2-core development machine (docs/BENCHMARKS.md, "PNG
/// decode and encode per image"); the 16-core H100 host's batch spent 55 ms of oversubscribed
/// thread time a file (issue 26), so this is the low side.
const CPU_NS_PER_BYTE: f64 = 2.5;
/// The GPU path's host time a byte of samples: the coded stream (about 0.4 of them) read
/// back, its CRC and the chunks around it.
const HOST_NS_PER_BYTE: f64 = 0.25;
/// The time an engine thread spends on each file it encodes on the GPU: 4.9 ms a 1920x1080
/// photo in the 16-core batch on an H200 host (`gpu encode` 4.3 ms, the blur's passes and
/// the encoder's in one submission, one wait and one mapping; the plans and the uploads of
/// the files decoded before the device was open 0.6 ms; 128 files, call AJ-gpubatch2-2 of
/// docs/BENCHMARKS.md) for 0.21 ms of passes. On 16 cores with 4 engine threads the GPU path
/// and the cores were level there (244 and 239 images/s).
const ENGINE_NS_PER_FILE: f64 = 4.9e6;

/// What encoding `files` level-1 PNGs of `width` x `height` pixels of `bytes_per_pixel` on a
/// GPU saves: the CPU engine's encoding on the cores, less the GPU path's host time, less the
/// waits it puts on the batch's `engine_threads`. Zero where the waits cost more.
pub fn gpu_saving(
    width: u32,
    height: u32,
    bytes_per_pixel: u8,
    files: u32,
    engine_threads: usize,
) -> std::time::Duration {
    let bytes = f64::from(width) * f64::from(height) * f64::from(bytes_per_pixel);
    let cores = crate::ops::cpu_time(bytes * (CPU_NS_PER_BYTE - HOST_NS_PER_BYTE), usize::MAX);
    let waits = std::time::Duration::from_secs_f64(
        ENGINE_NS_PER_FILE * 1e-9 / engine_threads.max(1) as f64,
    );
    cores
        .saturating_sub(waits)
        .checked_mul(files)
        .unwrap_or(std::time::Duration::MAX)
}

/// `bench encode_png`: a 1920x1080 RGB image of smooth gradients and noise (the JPEG bench's),
/// every pass on the device; throughput counts the input bytes.
fn bench_cases<'e>(
    engine: &'e Engine,
    _: &crate::bench::Sizes,
) -> Result<Vec<crate::bench::Case<'e>>> {
    use crate::bench::{Case, Unit};
    let (w, h) = (1920u32, 1080u32);
    let img = Image::new_u8(w, h, 3, super::bench_image(w, h));
    let name = format!("{w}x{h} RGB level 1");
    let Samples::U8(samples) = &img.samples else {
        unreachable!("made 8-bit")
    };
    let work = samples.len() as f64;
    Ok(vec![match engine {
        Engine::Gpu(gpu) => {
            let layout = Layout::of(&img);
            let t = Tunables::resolved(gpu, (w * h) as usize);
            let mut plan = PngPlan::new(gpu, &layout, t)?;
            plan.set_source(gpu, Source::Host(samples));
            Case::gpu(OP.name, name, Unit::GBps, work, move |b| plan.record(b))
        }
        Engine::Cpu => Case::cpu(OP.name, name, Unit::GBps, work, move || {
            let mut out = Vec::new();
            image::encode(img.clone(), ImageFormat::Png, &mut out).expect("a valid image");
            std::hint::black_box(out);
        }),
    }])
}
