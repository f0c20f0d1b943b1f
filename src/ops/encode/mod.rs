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
use crate::gpu::{Engine, Gpu, Timings};
use crate::io::image::{Image, Samples};
use crate::io::jpeg::{self, EncodeOptions, Frame, Markers, Table};
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
    let Samples::U8(samples) = &img.samples else {
        bail!("JPEG stores neither alpha nor 16-bit samples");
    };
    let (width, height, channels) = (img.width, img.height, img.channels);
    let frame = Frame::new(samples.len(), width, height, channels, opts).map_err(|e| anyhow!(e))?;
    let mut out = Vec::new();
    match engine {
        Engine::Gpu(gpu) if !opts.progressive && plan::fits(gpu, &frame, samples.len()) => {
            out = encode_timed(gpu, &frame, Source::Host(samples), opts, markers, timings)?;
        }
        _ => timings.phase("encode", || {
            jpeg::encode(samples, width, height, channels, opts, markers, &mut out)
                .map_err(|e| anyhow!(e))
        })?,
    }
    Ok(out)
}

/// An 8-bit gray or RGB image already on `gpu` (another op's result, a byte a sample, rows
/// packed), of `width` x `height` x `channels`.
pub struct OnDevice<'a> {
    pub buffer: &'a wgpu::Buffer,
    pub width: u32,
    pub height: u32,
    pub channels: u8,
}

/// Whether [`encode_on_device`] takes an image of `width` x `height` x `channels` with
/// `opts`: baseline, gray or RGB, within one storage binding.
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

/// [`encode_jpeg`] of an image already on the GPU: the same bytes, and the pixels never
/// cross the bus. Only what [`takes_on_device`] accepts.
pub fn encode_on_device(
    gpu: &Gpu,
    img: &OnDevice,
    opts: &EncodeOptions,
    markers: &Markers,
    timings: &mut Timings,
) -> Result<Vec<u8>> {
    if !takes_on_device(gpu, img.width, img.height, img.channels, opts) {
        bail!("the GPU encoder codes baseline gray or RGB frames within one storage binding");
    }
    let len = img.width as usize * img.height as usize * usize::from(img.channels);
    let frame =
        Frame::new(len, img.width, img.height, img.channels, opts).map_err(|e| anyhow!(e))?;
    encode_timed(
        gpu,
        &frame,
        Source::Device(img.buffer),
        opts,
        markers,
        timings,
    )
}

/// The GPU passes, their wall time one phase, "gpu encode" (their passes kept), beside the op's
/// own upload, compute and download in a batch's --timings.
fn encode_timed(
    gpu: &Gpu,
    frame: &Frame,
    source: Source,
    opts: &EncodeOptions,
    markers: &Markers,
    timings: &mut Timings,
) -> Result<Vec<u8>> {
    let t = Tunables::resolved(gpu, frame.width as usize * frame.height as usize);
    let mut own = Timings::default();
    let start = std::time::Instant::now();
    let out = encode_gpu(gpu, frame, source, opts.optimize, markers, t, &mut own)?;
    timings.add("gpu encode", start.elapsed());
    timings.add_passes_of(&own);
    Ok(out)
}

/// The CPU encoder's time a byte of input, one thread: 18.9 ms for a 1920x1080 RGB photo at
/// quality 90, optimised tables, 4:2:0, on the 16-core H100 host (the CLI's encode phase,
/// docs/BENCHMARKS.md, call AA), where the choice matters; 8.6 ms on the 2-core development
/// machine.
const CPU_NS_PER_BYTE: f64 = 3.0;
/// The GPU encoder's host time a byte of input: the samples copied up (a third of the
/// blur's 0.65 ns for both copies) and the file, about a tenth of them, copied back.
const HOST_NS_PER_BYTE: f64 = 0.25;
/// The time an engine thread spends on each file it encodes on the GPU, waiting on the device
/// (the symbol counts, the bit count, the stuffed length, the stream: each a round trip) and
/// building the tables: 6.7 ms a 1920x1080 photo in the 16-core batch on the H100 host (the
/// `gpu encode` phase, 858 ms over 128 files, call AB of docs/BENCHMARKS.md). The engine
/// threads are few (a quarter of the cores, at most 4), so this, not the GPU, bounds the
/// batch there: the GPU path made 233 images/s where the cores alone made 382.
const ENGINE_NS_PER_FILE: f64 = 6.7e6;

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

fn encode_gpu(
    gpu: &Gpu,
    frame: &Frame,
    samples: Source,
    optimize: bool,
    markers: &Markers,
    t: Tunables,
    timings: &mut Timings,
) -> Result<Vec<u8>> {
    let mut out = Vec::new();
    let mut plan = timings.phase("upload", || EncodePlan::new(gpu, frame, samples, t))?;
    let ntables = if frame.comps.len() == 1 { 1 } else { 2 };
    gpu.run_timed(timings, 1, |b, _| plan.record_blocks(gpu, b, optimize))?;
    let (dc, ac) = if optimize {
        let counts = timings.phase("download", || plan.read_counts(gpu, ntables))?;
        counts
            .iter()
            .map(|[dc, ac]| (Table::optimal(dc), Table::optimal(ac)))
            .unzip()
    } else {
        jpeg::std_tables(ntables)
    };
    timings.phase("compute", || plan.size_for(gpu, &dc, &ac))?;
    gpu.run_timed(timings, 1, |b, _| plan.record_tail(b))?;
    frame
        .write_headers(markers, &mut out)
        .map_err(|e| anyhow!(e))?;
    jpeg::baseline_headers(&frame.comps, &dc, &ac, &mut out);
    timings.phase("download", || plan.read_stream(gpu, &mut out))?;
    out.extend_from_slice(&[0xFF, 0xD9]);
    Ok(out)
}

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
            let mut plan = EncodePlan::new(gpu, &frame, Source::Host(&samples), t)?;
            let (dc, ac) = jpeg::std_tables(2);
            plan.size_for(gpu, &dc, &ac)?;
            Case::gpu("encode", name, Unit::GBps, work, move |b| {
                plan.record_blocks(gpu, b, false);
                plan.record_tail(b);
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
