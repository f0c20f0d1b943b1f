//! Image-to-image batches (blur, and any op that makes one image of another, of the same size
//! or not): inputs paired with outputs up front, each decoded with its metadata, the op run on
//! the engines, the result encoded with the metadata kept, `--skip-existing`, the per-file
//! `--report` and the batch's timings. The op comes in as an [`ImageOp`].

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use image::ImageFormat;

use super::driver::{Engines, Env, Run};
use super::inputs::Item;
use super::pipeline::{Pipeline, StageTimes, Stages};
use super::report::{FileRecord, FileStatus, Report};
use super::staging::Staging;
use super::{outputs, Outcome};
use crate::gpu::{Batch, Engine, Timings, Upload};
use crate::io::image::{self as img_io, recycle, Header, Image, WriteOptions};
use crate::io::jpeg::Subsampling;
use crate::io::json::{JsonDest, JsonSink};
use crate::io::metadata::Metadata;
use crate::io::output::{self, PendingFile};

/// An op that makes one image of another: what the batch needs to know of it.
pub trait ImageOp: Sync {
    /// Its name in the `--report` document.
    fn name(&self) -> &'static str;
    /// A worker on `engine`; each engine thread holds one for the whole batch, so that it
    /// may keep its GPU plan from one image to the next.
    fn worker<'e>(&'e self, engine: &'e Engine) -> Box<dyn ImageWorker + 'e>;
    /// What a GPU would save against the native CPU engine on `files` images like `header`.
    fn gpu_saving(&self, header: &Header, files: u32) -> Duration;
    /// The output's width and height for an input like `header`, where known before any file
    /// is decoded: the engine choice counts a JPEG output's encoding at that size (`None`:
    /// not counted).
    fn output_size(&self, header: &Header) -> Option<(u32, u32)> {
        Some((header.width, header.height))
    }
    /// The output's metadata, from the input's (`input` is the input's width and height):
    /// as it is by default; an op that changes the size scales what depends on it.
    fn metadata(&self, _input: (u32, u32), _output: &Image, _metadata: &mut Metadata) {}
    /// Whether its workers' [`ImageWorker::record_on_device`] take an upload staged by the
    /// decoding threads (the decoded samples as they are, in the host's layout), so that the
    /// batch writes each image into one there: `false` (the default) stages none.
    fn stages_samples(&self) -> bool {
        false
    }
    /// Whether a staged `image` is checked for all-opaque 8-bit RGBA pixels on the way
    /// ([`Upload::opaque_rgba8`]), for workers that take such an image faster: `false` (the
    /// default).
    fn checks_opaque(&self, _image: &Image) -> bool {
        false
    }
}

/// An op on one engine, image after image.
pub trait ImageWorker {
    /// The op's result for `image`, adding phases (and GPU passes) to `timings`.
    fn run(&mut self, image: &Image, timings: &mut Timings) -> Result<Image>;
    /// Whether [`ImageWorker::record_on_device`] takes `image`: on a GPU engine, where the
    /// result has `image`'s size and layout. `false` (the default, and any CPU engine): only
    /// `run`.
    fn records_on_device(&self, _image: &Image) -> bool {
        false
    }
    /// Records the op's passes for `image` into `batch` and leaves the result on the GPU
    /// (`run`'s samples in a storage buffer, a byte each, rows packed), for the engine to
    /// encode in the same submission; `staged`, where given, holds `image`'s samples already
    /// written (`ImageOp::stages_samples`). Only where `records_on_device`; `submitted`
    /// follows once the batch ran.
    fn record_on_device(
        &mut self,
        _image: &Image,
        _staged: Option<&Upload>,
        _batch: &mut Batch,
        _timings: &mut Timings,
    ) -> Result<wgpu::Buffer> {
        bail!("this op leaves no result on the device")
    }
    /// After a batch `record_on_device` recorded into was submitted.
    fn submitted(&mut self) {}
}

/// Where and how the outputs are written (checked by [`run`] before any file is read).
#[derive(Clone, Debug, Default)]
pub struct Outputs {
    /// One named output (`-`: stdout).
    pub output: Option<PathBuf>,
    /// Each output under this folder at its input's relative path.
    pub out_dir: Option<PathBuf>,
    /// The format (an extension) with `out_dir` or on stdout.
    pub out_format: Option<String>,
    pub skip_existing: bool,
    pub overwrite: bool,
    /// The per-file report's destination.
    pub report: Option<JsonDest>,
    /// The metadata kept (`--keep`; `--strip` keeps none).
    pub keep: crate::io::metadata::Keep,
    /// Turn the pixels upright by their EXIF orientation.
    pub auto_orient: bool,
    pub quality: Option<u8>,
    pub compression: Option<u8>,
    /// JPEG chroma subsampling (default: a JPEG input's own, else 4:2:0).
    pub subsampling: Option<Subsampling>,
    /// Progressive JPEG.
    pub progressive: bool,
    /// JPEG Huffman tables optimized for each image (`Some(false)`: the standard's).
    pub optimize: Option<bool>,
}

/// The engine's result: pixels for the encoders, or a JPEG file the GPU encoded (baseline
/// output on a GPU engine: only the compressed stream comes back from the device).
enum Made {
    Pixels(Image),
    Jpeg {
        file: Vec<u8>,
        channels: u8,
    },
    /// A PNG file the GPU encoded at level 1 (ops/encode/png).
    Png {
        file: Vec<u8>,
        channels: u8,
    },
}

impl Made {
    fn channels(&self) -> u8 {
        match self {
            Made::Pixels(img) => img.channels,
            Made::Jpeg { channels, .. } | Made::Png { channels, .. } => *channels,
        }
    }
}

/// Whether the engine encodes an output as JPEG itself: a GPU, baseline, 8-bit gray or RGB
/// (what the GPU encoder codes; anything else goes to the encoders on the cores).
fn encodes_on_engine(
    engine: &Engine,
    format: ImageFormat,
    write: &WriteOptions,
    img: &Image,
) -> bool {
    matches!(engine, Engine::Gpu(_))
        && format == ImageFormat::Jpeg
        && !write.progressive
        && img.bit_depth() == 8
        && matches!(img.channels, 1 | 3)
}

/// The JPEG file of the op's result on `image`, the op's passes and the encoder's recorded
/// into one submission (the result never comes back, only the file): where the engine
/// encodes the output and the worker can leave its result on the device. `None`: the result
/// comes back (`ImageWorker::run`).
fn encode_on_device(
    w: &mut dyn ImageWorker,
    encoder: &mut crate::ops::encode::Encoder,
    engine: &Engine,
    job: &Job,
    (image, staged): (&Image, Option<&Upload>),
    carried: &Carried,
    timings: &mut Timings,
) -> Option<Result<Vec<u8>>> {
    use crate::ops::encode;
    let Engine::Gpu(gpu) = engine else {
        return None;
    };
    let (meta, write) = (&carried.metadata, &carried.write);
    let (width, height, channels) = (image.width, image.height, image.channels);
    let options = crate::io::jpeg::EncodeOptions {
        quality: write.quality.clamp(1, 100),
        subsampling: write.subsampling,
        progressive: write.progressive,
        optimize: write.optimize,
    };
    if !encodes_on_engine(engine, job.format, write, image)
        || !encode::takes_on_device(gpu, width, height, channels, &options)
        || !w.records_on_device(image)
    {
        return None;
    }
    let mut file = Vec::new();
    let written = img_io::write_jpeg_with(channels, meta, write, &mut file, |o, m, out| {
        let mut timed = Timings::default();
        let mut record = |batch: &mut Batch| {
            w.record_on_device(image, staged, batch, &mut timed)
                .with_context(|| job.input.display().to_string())
        };
        let made =
            encoder.encode_recorded(gpu, width, height, channels, o, m, timings, &mut record);
        w.submitted();
        timings.merge(&timed);
        out.extend(made?);
        Ok(())
    });
    Some(
        written
            .with_context(|| format!("{}: encoding failed", job.output.display()))
            .map(|()| file),
    )
}

/// Whether the engine encodes a PNG output itself: a GPU, compression level 1 (the other
/// levels are zlib's, on the cores).
fn png_on_engine(engine: &Engine, format: ImageFormat, write: &WriteOptions) -> bool {
    matches!(engine, Engine::Gpu(_))
        && format == ImageFormat::Png
        && write.compression == WriteOptions::FASTEST_COMPRESSION
}

/// The PNG file of the op's result on `image`, left on the GPU and encoded there, as
/// [`encode_on_device`] does for JPEG. `None`: the result comes back.
fn png_on_device(
    w: &mut dyn ImageWorker,
    engine: &Engine,
    job: &Job,
    (image, staged): (&Image, Option<&Upload>),
    carried: &Carried,
    timings: &mut Timings,
) -> Option<Result<Vec<u8>>> {
    use crate::ops::encode::png;
    let Engine::Gpu(gpu) = engine else {
        return None;
    };
    let layout = png::Layout::of(image);
    if !png_on_engine(engine, job.format, &carried.write)
        || !png::takes(gpu, &layout, carried.write.compression)
        || !w.records_on_device(image)
    {
        return None;
    }
    // The op's passes and the encoder's in one submission, as for JPEG.
    let (meta, mut made, mut timed) = (&carried.metadata, None, Timings::default());
    let mut recorded = false;
    let mut record = |batch: &mut Batch| {
        let buffer = w.record_on_device(image, staged, batch, &mut timed)?;
        recorded = true;
        made = Some(buffer.clone());
        Ok(buffer)
    };
    let coded = png::encode_recorded(gpu, &layout, meta, timings, &mut record);
    w.submitted();
    timings.merge(&timed);
    let file = coded.and_then(|coded| match (coded, &made) {
        (Some(file), _) => Ok(file),
        (None, Some(buffer)) => {
            png::encode_read_back(gpu, &png::OnDevice { buffer, layout }, meta, timings)
        }
        (None, None) => unreachable!("the image was made before it was coded"),
    });
    // The op's errors name the input, the encoder's the output.
    Some(match recorded {
        true => file.with_context(|| format!("{}: encoding failed", job.output.display())),
        false => file.with_context(|| job.input.display().to_string()),
    })
}

/// What a GPU saves on a batch of `files` images like `header`: the op's own saving, and,
/// for baseline JPEG output of a size the op knows in advance, the encoding it takes off
/// the cores, less what it costs the batch's `engine_threads`.
fn job_saving(
    op: &dyn ImageOp,
    out: &Outputs,
    format: ImageFormat,
    header: &Header,
    files: u32,
    engine_threads: usize,
) -> Duration {
    let saving = op.gpu_saving(header, files);
    let baseline = format == ImageFormat::Jpeg && !out.progressive;
    let layout = header.bit_depth == 8 && matches!(header.channels, 1 | 3);
    let png_level1 = format == ImageFormat::Png
        && out.compression.unwrap_or(WriteOptions::DEFAULT_COMPRESSION)
            == WriteOptions::FASTEST_COMPRESSION;
    match op.output_size(header) {
        Some((w, h)) if baseline && layout => saving.saturating_add(
            crate::ops::encode::gpu_saving(w, h, header.channels, files, engine_threads),
        ),
        Some((w, h)) if png_level1 => {
            let bytes = header.channels * if header.bit_depth > 8 { 2 } else { 1 };
            saving.saturating_add(crate::ops::encode::png::gpu_saving(
                w,
                h,
                bytes,
                files,
                engine_threads,
            ))
        }
        _ => saving,
    }
}

/// An engine thread's state: the op's worker, its engine and the GPU encoder's plans.
type Worker<'e> = (
    Box<dyn ImageWorker + 'e>,
    &'e Engine,
    crate::ops::encode::Encoder,
);

/// The bytes the upload buffers the decoding threads write may hold together: 41 RGB 1080p
/// images, more than a batch has between its decoders and its engines at once.
const STAGING_BUDGET: usize = 256 << 20;

/// What travels with an image from decoder to encoder.
struct Carried {
    metadata: Metadata,
    write: WriteOptions,
}

/// One file of the batch.
struct Job {
    input: PathBuf,
    output: PathBuf,
    format: ImageFormat,
}

/// Runs `op` over the items `list` gives (called with the output folder, which it passes
/// over) on `pipeline`, writing each result. Returns whether every file was done (or
/// skipped); a file's failure is reported and the batch goes on.
pub fn run(
    env: &dyn Env,
    op: &dyn ImageOp,
    out: &Outputs,
    mut pipeline: Pipeline,
    list: impl FnOnce(Option<&Path>) -> Result<Vec<Item>>,
) -> Result<bool> {
    if let (Some(o), Some(report)) = (&out.output, &out.report) {
        let report = report.path().unwrap_or(Path::new("-"));
        output::refuse_shared_output(("-o", o), ("--report", report))?;
    }
    // Opened before the inputs are listed and the output folder is made, so a bad path
    // fails at once and leaves nothing behind.
    let report_sink = out
        .report
        .as_ref()
        .map(|r| JsonSink::open_as(r, "--report"))
        .transpose()?;
    // `_made`: an `--out-dir` this run made is removed again if nothing was written into it.
    let (jobs, _made) = jobs(out, list(out.out_dir.as_deref())?)?;
    if jobs.is_empty() {
        env.note("this shard holds none of the inputs");
        return Ok(true);
    }
    // `-o`'s output is created before the work, so an unwritable place fails before any
    // decoding; removed on any error, it leaves nothing behind.
    // `--overwrite` lets an output replace its input; any other input is refused.
    // `--skip-existing` counts an output that exists as done, so its outputs are flushed to
    // disk before they are named: a crash of the system cannot leave one named but empty.
    let create = |p: &Path| {
        let file = match out.overwrite {
            true => PendingFile::create_over_input(p),
            false => PendingFile::create(p),
        }?;
        Ok::<_, anyhow::Error>(match out.skip_existing {
            true => file.durable(),
            false => file,
        })
    };
    // `IN -o IN` (`blur IN -o IN`) replaces its one input on purpose (docs/cli.md).
    let named = match &out.output {
        Some(_) if output::same_file(&jobs[0].output, &jobs[0].input) => {
            Some(PendingFile::create_over_input(&jobs[0].output)?)
        }
        Some(_) => Some(create(&jobs[0].output)?),
        None => None,
    };
    let named = std::sync::Mutex::new(named);
    let started = Instant::now();
    let (mut records, todo) = skip_existing(&jobs, out.skip_existing);
    // Said once, so that a resumed run (or `-o FILE` over a finished output) is not silent.
    match jobs.len() - todo.len() {
        0 => {}
        1 if jobs.len() == 1 => env.note(&format!(
            "{}: exists already: left alone (--skip-existing)",
            jobs[0].output.display()
        )),
        n => env.note(&format!(
            "{n} of {} outputs exist already: left alone (--skip-existing)",
            jobs.len()
        )),
    }
    if todo.iter().any(|&i| jobs[i].format == ImageFormat::Gif) {
        env.warn(
            "GIF holds at most 256 colours: the outputs are reduced to a palette, not exact \
             (.png, .webp or .tif keep every colour)",
        );
    }
    // Engine threads sharing the device: each copies its image into staging and the result
    // out on the host, so with several threads one copies while another's image is on the
    // device.
    pipeline.engines = (pipeline.jobs / 4).clamp(1, 4);
    let devices = Engines::new(true);
    let mut device_timings = Timings::default();
    if env.several_devices() {
        // Several devices: opened first, so that each gets engine threads of its own (a
        // slower one takes fewer images, since every thread takes the next when free).
        let n = devices.get(env, &mut device_timings)?.len();
        pipeline.engines = pipeline.engines.max(n);
    }
    let read = env.read_options();
    // The job's size for the engine choice, from the first file to do: the batch is taken to
    // be that many files like it (a wrong guess costs speed, never results: engines agree).
    // Only a regular file is read twice: a pipe's bytes would be gone.
    let first = todo.first().map(|&i| &jobs[i]);
    if let Some(job) = first.filter(|j| img_io::is_regular_file(&j.input)) {
        if let Ok(h) = img_io::probe_with(&job.input, &read) {
            let files = u32::try_from(todo.len()).unwrap_or(u32::MAX);
            env.estimate(job_saving(op, out, job.format, &h, files, pipeline.engines));
        }
    }
    // The native CPU engine, chosen without loading a driver, is opened now (it costs
    // nothing), so that the batch runs every stage of a file on one thread (`run_fused`).
    if env.native_cpu_at_once() {
        devices.get(env, &mut device_timings)?;
    }
    let hide =
        env.quiet() || jobs.len() == 1 || report_sink.as_ref().is_some_and(JsonSink::is_stdout);
    // Each decoded image bound for the GPU's encoder is written into an upload buffer on the
    // decoding thread (the cores), so the engine thread only records and submits.
    let staging = Staging::new(STAGING_BUDGET);
    let stage = |image: &Image, job: &Job, carried: &Carried| -> Option<Upload> {
        if !op.stages_samples() || image.pixels() == 0 {
            return None;
        }
        let [engine @ Engine::Gpu(gpu)] = devices.opened() else {
            return None;
        };
        let write = &carried.write;
        if !png_on_engine(engine, job.format, write)
            && !encodes_on_engine(engine, job.format, write, image)
        {
            return None;
        }
        // A failure here is met again, and reported, where the engine thread writes its own
        // upload.
        let bytes = crate::ops::sample_bytes(&image.samples);
        staging
            .stage(gpu, &bytes, op.checks_opaque(image))
            .ok()
            .flatten()
    };
    let made = |(w, engine, encoder): &mut Worker<'_>,
                timings: &mut Timings,
                i: usize,
                (image, staged): (&Image, Option<&Upload>),
                mut carried: Carried|
     -> Result<(Made, Carried)> {
        let job = &jobs[i];
        env.detail(&format!(
            "{}: {}x{}, {} channels, {}-bit",
            job.input.display(),
            image.width,
            image.height,
            image.channels,
            image.bit_depth()
        ));
        img_io::check_layout(&job.output, job.format, image.channels, image.bit_depth())?;
        if let Some(file) =
            png_on_device(w.as_mut(), engine, job, (image, staged), &carried, timings)
        {
            let channels = image.channels;
            return Ok((
                Made::Png {
                    file: file?,
                    channels,
                },
                carried,
            ));
        }
        let on_device = encode_on_device(
            w.as_mut(),
            encoder,
            engine,
            job,
            (image, staged),
            &carried,
            timings,
        );
        if let Some(file) = on_device {
            let channels = image.channels;
            return Ok((
                Made::Jpeg {
                    file: file?,
                    channels,
                },
                carried,
            ));
        }
        let made = w
            .run(image, timings)
            .with_context(|| format!("{}", job.input.display()))?;
        op.metadata((image.width, image.height), &made, &mut carried.metadata);
        if png_on_engine(engine, job.format, &carried.write) {
            let (meta, level) = (&carried.metadata, carried.write.compression);
            let file = crate::ops::encode::png::encode_png(engine, &made, meta, level, timings)
                .with_context(|| format!("{}: encoding failed", job.output.display()))?;
            let channels = made.channels;
            return Ok((Made::Png { file, channels }, carried));
        }
        if !encodes_on_engine(engine, job.format, &carried.write, &made) {
            return Ok((Made::Pixels(made), carried));
        }
        let mut file = Vec::new();
        let (meta, write) = (&carried.metadata, &carried.write);
        img_io::write_jpeg_with(made.channels, meta, write, &mut file, |o, m, out| {
            out.extend(encoder.encode(engine, &made, o, m, timings)?);
            Ok(())
        })
        .with_context(|| format!("{}: encoding failed", job.output.display()))?;
        let channels = made.channels;
        Ok((Made::Jpeg { file, channels }, carried))
    };
    let stages = Stages {
        decode: |&i: &usize| {
            let job = &jobs[i];
            let decoded = img_io::load_with(&job.input, &read)?;
            let (image, mut carried) =
                prepare(out, job.format, decoded, |d| env.accept(&job.input, d));
            if job.format == ImageFormat::Jpeg {
                for dropped in carried.metadata.fit_jpeg() {
                    env.warn(&format!("{}: {dropped}", job.output.display()));
                }
            }
            let staged = stage(&image, job, &carried);
            Ok((image, carried, staged))
        },
        start: |engine, _| {
            let encoder = crate::ops::encode::Encoder::default();
            Ok((op.worker(engine), engine, encoder))
        },
        engine: |state: &mut Worker<'_>,
                 timings: &mut Timings,
                 &i: &usize,
                 (image, carried, staged): (Image, Carried, Option<Upload>)| {
            let made = made(state, timings, i, (&image, staged.as_ref()), carried);
            if let Some(upload) = staged {
                staging.give_back(upload);
            }
            // The input's samples, for a later image to be decoded or made into.
            recycle::give(image.samples);
            made
        },
        encode: |&i: &usize, (made, carried): (Made, Carried)| {
            let job = &jobs[i];
            outputs::create_parent(&job.output)?;
            let created = named.lock().expect("no encoder panics").take();
            let pending = match created {
                Some(p) => p,
                None => create(&job.output)?,
            };
            env.detail(&pending.describe());
            env.detail(&format!(
                "{}: {}{}",
                job.output.display(),
                match job.format {
                    ImageFormat::Jpeg => format!(
                        "quality {}, {}{}, ",
                        carried.write.quality,
                        if made.channels() == 1 {
                            "gray"
                        } else {
                            carried.write.subsampling.name()
                        },
                        if carried.write.progressive {
                            ", progressive"
                        } else {
                            ""
                        }
                    ),
                    ImageFormat::Png => format!("compression {}, ", carried.write.compression),
                    _ => String::new(),
                },
                carried.metadata.describe()
            ));
            match made {
                // JPEG is encoded from a borrow, and the samples handed back.
                Made::Pixels(img) if job.format == ImageFormat::Jpeg => {
                    let saved =
                        img_io::save_jpeg_to(pending, &img, &carried.metadata, &carried.write);
                    recycle::give(img.samples);
                    saved
                }
                Made::Pixels(img) => img_io::save_to_with(
                    pending,
                    job.format,
                    img,
                    &carried.metadata,
                    &carried.write,
                ),
                Made::Jpeg { file, .. } | Made::Png { file, .. } => {
                    pending.commit_with(|w| Ok(w.write_all(&file)?))
                }
            }
        },
        finish: |_, _: &mut Timings| Ok(()),
    };
    let batch = Run {
        env,
        pipeline,
        engines: &devices,
        hide,
    };
    let name = |&i: &usize| jobs[i].input.display().to_string();
    let not_pipe = |e: &anyhow::Error| !crate::is_broken_pipe(e);
    let driven = batch.drive(&todo, name, stages, not_pipe, |_, _| {})?;
    let stage_times = driven.stage_times();
    for outcome in driven.outcomes {
        let i = todo[outcome.index];
        records[i] = Some(ended(&jobs[i], outcome)?);
    }
    let records: Vec<FileRecord> = records
        .into_iter()
        .map(|r| r.expect("every file ends"))
        .collect();
    env.report_timings(&batch_timings(
        stage_times,
        device_timings,
        driven.engine_timings,
    ));
    let names = devices.opened().iter().map(Engine::describe).collect();
    let report = Report::new(op.name(), names, records, started.elapsed());
    if jobs.len() > 1 {
        env.note(&report.summary_line());
    }
    let failed = report.summary.failed;
    if let Some(sink) = report_sink {
        sink.write(&report)?;
    }
    Ok(failed == 0)
}

/// Inputs paired with their outputs, checked up front (nothing is created but the output
/// folder).
fn jobs(out: &Outputs, items: Vec<Item>) -> Result<(Vec<Job>, Option<output::MadeFolders>)> {
    let usage = |m: String| anyhow::Error::new(crate::UsageError(m));
    let outputs = match (&out.output, &out.out_dir) {
        (Some(o), _) => {
            if items.len() > 1 {
                return Err(usage(format!(
                    "-o names one output but {} inputs were given; use --out-dir",
                    items.len()
                )));
            }
            if out.out_format.is_some() && !output::names_stream(o) {
                return Err(usage(format!(
                    "{}: --out-format applies to --out-dir and to -o - (a file's extension names its format)",
                    o.display()
                )));
            }
            img_io::output_format(o)?;
            if output::names_stream(o) {
                PendingFile::create(o)?.refuse_terminal("a binary image")?;
            }
            vec![o.clone()]
        }
        (None, Some(dir)) => {
            let format = out.out_format.as_deref();
            outputs::under_dir(&items, dir, format, out.overwrite)?
        }
        (None, None) => unreachable!("the command line requires -o or --out-dir"),
    };
    let jobs = items
        .into_iter()
        .zip(outputs)
        .map(|(item, output)| {
            let format = match &out.out_format {
                Some(ext) if output::names_stream(&output) => {
                    img_io::output_format(Path::new(&format!("x.{ext}")))?
                }
                _ => img_io::output_format(&output)?,
            };
            Ok(Job {
                input: item.path,
                output,
                format,
            })
        })
        .collect::<Result<Vec<_>>>()?;
    check_encoding(out, &jobs)?;
    let made = out
        .out_dir
        .as_deref()
        .map(output::prepare_folder)
        .transpose()?;
    Ok((jobs, made))
}

/// `--quality`, `--compression` and the JPEG flags must apply to some output.
fn check_encoding(out: &Outputs, jobs: &[Job]) -> Result<()> {
    let usage = |m: &str| Err(crate::UsageError(m.into()).into());
    let any = |f: ImageFormat| jobs.iter().any(|j| j.format == f);
    if out.quality.is_some() && !jobs.is_empty() && !any(ImageFormat::Jpeg) {
        return if any(ImageFormat::WebP) {
            usage("--quality: WebP output is lossless (gpukit has no lossy WebP encoder); --quality applies to JPEG")
        } else {
            usage("--quality applies to JPEG output only")
        };
    }
    if out.compression.is_some() && !jobs.is_empty() && !any(ImageFormat::Png) {
        return usage("--compression applies to PNG output only");
    }
    let jpeg_flag = if out.subsampling.is_some() {
        Some("--subsampling")
    } else if out.progressive {
        Some("--progressive")
    } else if out.optimize.is_some() {
        Some("--jpeg-tables")
    } else {
        None
    };
    if let Some(flag) = jpeg_flag.filter(|_| !jobs.is_empty() && !any(ImageFormat::Jpeg)) {
        return usage(&format!("{flag} applies to JPEG output only"));
    }
    Ok(())
}

/// What is written with a decoded input: its metadata (none with --strip) and the
/// settings, after turning it upright with --auto-orient.
fn prepare(
    out: &Outputs,
    format: ImageFormat,
    mut decoded: img_io::Decoded,
    accept: impl FnOnce(img_io::Decoded) -> Image,
) -> (Image, Carried) {
    let mut metadata = std::mem::take(&mut decoded.metadata);
    let jpeg_quality = decoded.jpeg_quality;
    let jpeg_subsampling = decoded.jpeg_subsampling;
    let mut image = accept(decoded);
    if out.auto_orient {
        image = metadata.auto_orient(image);
    }
    metadata = out.keep.apply(metadata);
    // A JPEG input's own quality and subsampling when it is written as JPEG again.
    let kept = jpeg_quality.filter(|_| format == ImageFormat::Jpeg);
    let kept_subsampling = jpeg_subsampling.filter(|_| format == ImageFormat::Jpeg);
    let write = WriteOptions {
        quality: out
            .quality
            .or(kept)
            .unwrap_or(WriteOptions::DEFAULT_QUALITY),
        compression: out.compression.unwrap_or(WriteOptions::DEFAULT_COMPRESSION),
        subsampling: out
            .subsampling
            .or(kept_subsampling)
            .unwrap_or(Subsampling::DEFAULT),
        progressive: out.progressive,
        optimize: out.optimize.unwrap_or(WriteOptions::DEFAULT_OPTIMIZE),
    };
    (image, Carried { metadata, write })
}

/// The batch's `--timings`, in the order an image goes: opening the devices, decoding and
/// waiting for an engine (summed over the files), the engine threads' phases (planning, upload,
/// compute, download on a GPU), then waiting for an encoder and encoding.
fn batch_timings(stages: StageTimes, device: Timings, engines: Vec<Timings>) -> Timings {
    // Opening the engine comes first, whichever thread did it: slots in the order it goes.
    let opening = ["instance", "adapters", "device"];
    let mut timings = Timings::default();
    for phase in opening {
        timings.add(phase, std::time::Duration::ZERO);
    }
    timings.merge(&device);
    let [decode, wait, _engine, encode_wait, encode] = stages.phases();
    for (phase, d) in [decode, wait] {
        timings.add(phase, d);
    }
    for t in &engines {
        timings.merge(t);
    }
    for (phase, d) in [encode_wait, encode] {
        timings.add(phase, d);
    }
    // Slots left empty (the native CPU engine opens no device) are not phases.
    timings
        .phases
        .retain(|(p, ms)| !opening.contains(&p.as_str()) || *ms > 0.0);
    timings
}

/// The records of the files whose output exists already (`--skip-existing`), and the
/// indices of the files to do.
fn skip_existing(jobs: &[Job], skip: bool) -> (Vec<Option<FileRecord>>, Vec<usize>) {
    let mut records = vec![None; jobs.len()];
    let mut todo = Vec::new();
    for (i, job) in jobs.iter().enumerate() {
        // A folder where the output should be is no output: writing it fails, and says so.
        // Stdout (`-o -`) is always written, whatever a file named `-` in this folder holds.
        let done = job.output != Path::new("-")
            && job.output.symlink_metadata().is_ok()
            && !job.output.is_dir();
        if skip && done {
            records[i] = Some(record(job, FileStatus::Skipped, None, None));
        } else {
            todo.push(i);
        }
    }
    (records, todo)
}

/// The record of a file that went through the pipeline. A closed stdout (`-o - | head`)
/// ends the run, quietly.
fn ended(job: &Job, outcome: Outcome<()>) -> Result<FileRecord> {
    let (status, error) = match outcome.result {
        Ok(()) => (FileStatus::Ok, None),
        Err(e) if crate::is_broken_pipe(&e) => return Err(e),
        Err(e) => (FileStatus::Failed, Some(format!("{e:#}"))),
    };
    let mut r = record(job, status, error, Some(outcome.times));
    r.device = outcome.engine;
    Ok(r)
}

fn record(
    job: &Job,
    status: FileStatus,
    error: Option<String>,
    times: Option<StageTimes>,
) -> FileRecord {
    FileRecord {
        input: job.input.display().to_string(),
        output: Some(job.output.display().to_string()),
        status,
        error,
        times,
        device: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A timing model: an op that saves a fixed time on a GPU (its worker copies the image).
    struct Fake(Duration);

    struct Copier;

    impl ImageWorker for Copier {
        fn run(&mut self, image: &Image, _: &mut Timings) -> Result<Image> {
            Ok(image.clone())
        }
    }

    impl ImageOp for Fake {
        fn name(&self) -> &'static str {
            "fake"
        }
        fn worker<'e>(&'e self, _: &'e Engine) -> Box<dyn ImageWorker + 'e> {
            Box::new(Copier)
        }
        fn gpu_saving(&self, _: &Header, _: u32) -> Duration {
            self.0
        }
    }

    fn header(channels: u8, bit_depth: u32) -> Header {
        Header {
            width: 1920,
            height: 1080,
            channels,
            bit_depth,
        }
    }

    // The engine choice counts a baseline JPEG output's encoding (what the GPU takes off the
    // cores) less the waits it puts on the engine threads, and nothing the GPU does not
    // encode.
    #[test]
    fn the_estimate_counts_the_jpeg_encoding_a_gpu_takes_off_the_cores() {
        use crate::gpu::SMALL_JOB;
        let op = Fake(SMALL_JOB - Duration::from_millis(1));
        let out = Outputs::default();
        let rgb = header(3, 8);
        let pool = |n| {
            rayon::ThreadPoolBuilder::new()
                .num_threads(n)
                .build()
                .unwrap()
        };
        // 128 photos: 1920 x 1080 x 3 bytes at 3.0 - 0.25 ns a byte of one thread's time over
        // the cores, less 4.8 ms a file over the engine threads.
        let encode = |cores: f64, engines: f64| {
            128.0 * (1920.0 * 1080.0 * 3.0 * 2.75e-9 / cores - 4.8e-3 / engines).max(0.0)
        };
        // Two cores, one engine thread: the cores are the bottleneck and the GPU's encoding
        // pays (8.6 ms of the cores a file against 4.8 ms of the engine thread).
        pool(2).install(|| {
            let jpeg = job_saving(&op, &out, ImageFormat::Jpeg, &rgb, 128, 1);
            let want = op.0.as_secs_f64() + encode(2.0, 1.0);
            assert!((jpeg.as_secs_f64() - want).abs() < 1e-6, "{jpeg:?} {want}");
            // A small job on its own (PNG at zlib's level 6 stays on the cores); not one once
            // its encoding moves to the GPU.
            let zlib = Outputs {
                compression: Some(6),
                ..Outputs::default()
            };
            assert!(job_saving(&op, &zlib, ImageFormat::Png, &rgb, 128, 1) < SMALL_JOB);
            assert!(jpeg > SMALL_JOB);
            // Gray: a third of the bytes.
            let gray = job_saving(&op, &out, ImageFormat::Jpeg, &header(1, 8), 128, 1);
            let want = op.0.as_secs_f64() + encode(6.0, 1.0);
            assert!((gray.as_secs_f64() - want).abs() < 1e-6, "{gray:?} {want}");
        });
        // Sixteen cores, four engine threads (the H200 hosts of calls AJ-gpubatch2-1 and -2,
        // where the GPU path was still slower: 1.07 ms of the cores a file against 1.2 ms of
        // the engine threads): the waits cost more than the encoding saves, nothing is added.
        pool(16).install(|| {
            assert_eq!(encode(16.0, 4.0), 0.0);
            assert_eq!(job_saving(&op, &out, ImageFormat::Jpeg, &rgb, 128, 4), op.0);
        });
        // Progressive output, 16-bit and alpha layouts: encoded on the cores, not counted.
        let progressive = Outputs {
            progressive: true,
            ..Outputs::default()
        };
        assert_eq!(
            job_saving(&op, &progressive, ImageFormat::Jpeg, &rgb, 128, 1),
            op.0
        );
        assert_eq!(
            job_saving(&op, &out, ImageFormat::Jpeg, &header(3, 16), 9, 1),
            op.0
        );
        assert_eq!(
            job_saving(&op, &out, ImageFormat::Jpeg, &header(4, 8), 9, 1),
            op.0
        );
    }

    // The engine choice counts a level-1 PNG output's encoding, every layout and depth (the
    // GPU encodes them all), less the waits on the engine threads; not other levels.
    #[test]
    fn the_estimate_counts_the_png_encoding_a_gpu_takes_off_the_cores() {
        use crate::gpu::SMALL_JOB;
        let op = Fake(SMALL_JOB - Duration::from_millis(1));
        let out = Outputs::default();
        let pool = |n| {
            rayon::ThreadPoolBuilder::new()
                .num_threads(n)
                .build()
                .unwrap()
        };
        // 128 images of 1920 x 1080 x `bytes` at 2.5 - 0.25 ns a byte of one thread's time
        // over the cores, less 4.9 ms a file over the engine threads.
        let encode = |bytes: f64, cores: f64, engines: f64| {
            128.0 * (1920.0 * 1080.0 * bytes * 2.25e-9 / cores - 4.9e-3 / engines).max(0.0)
        };
        let close = |got: Duration, want: f64| {
            assert!((got.as_secs_f64() - want).abs() < 1e-6, "{got:?} {want}");
        };
        pool(2).install(|| {
            let rgb = job_saving(&op, &out, ImageFormat::Png, &header(3, 8), 128, 1);
            close(rgb, op.0.as_secs_f64() + encode(3.0, 2.0, 1.0));
            assert!(rgb > SMALL_JOB);
            let rgba16 = job_saving(&op, &out, ImageFormat::Png, &header(4, 16), 128, 1);
            close(rgba16, op.0.as_secs_f64() + encode(8.0, 2.0, 1.0));
            let level9 = Outputs {
                compression: Some(9),
                ..Outputs::default()
            };
            assert_eq!(
                job_saving(&op, &level9, ImageFormat::Png, &header(3, 8), 128, 1),
                op.0
            );
        });
        // Sixteen cores, four engine threads (the H200 host of call AJ-gpubatch2-2, where the
        // GPU path and the cores were level): 0.87 ms of the cores a file against 1.23 ms of
        // waits, so nothing is added; the RGBA 16-bit
        // file's 2.3 ms of the cores still pays.
        pool(16).install(|| {
            assert_eq!(encode(3.0, 16.0, 4.0), 0.0);
            assert_eq!(
                job_saving(&op, &out, ImageFormat::Png, &header(3, 8), 128, 4),
                op.0
            );
            let rgba16 = job_saving(&op, &out, ImageFormat::Png, &header(4, 16), 128, 4);
            close(rgba16, op.0.as_secs_f64() + encode(8.0, 16.0, 4.0));
            assert!(encode(8.0, 16.0, 4.0) > 0.0);
        });
    }
}
