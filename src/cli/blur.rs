//! `gpukit blur`: blur images, one or many, on one device.

use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{Context, Result};
use clap::{Args, ValueEnum};
use image::ImageFormat;
use indicatif::ProgressBar;

use super::inputs::InputArgs;
use super::{term, Ctx, Status};
use crate::batch::report::{FileRecord, FileStatus, Report};
use crate::batch::{outputs, Outcome, StageTimes, Stages};
use crate::gpu::{DeviceSelector, Engine, Timings};
use crate::io::image::{self as img_io, Image, WriteOptions};
use crate::io::jpeg::Subsampling;
use crate::io::json::{JsonDest, JsonSink};
use crate::io::metadata::Metadata;
use crate::io::output::{self, PendingFile};
use crate::ops::blur::{self, Blurrer, Kind, Options};

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum KindArg {
    Box,
    Gaussian,
}

#[derive(Debug, Args)]
#[command(allow_negative_numbers = true)]
#[command(group(clap::ArgGroup::new("destination").required(true).args(["output", "out_dir"])))]
pub struct BlurArgs {
    #[command(flatten)]
    input: InputArgs,
    /// Output file (one input only; may be the input itself). Its extension picks the format;
    /// `-` writes to stdout (not to a terminal), as PNG or as --out-format says.
    #[arg(short, long, value_name = "OUT")]
    output: Option<PathBuf>,
    /// Write each output into DIR under its input's path below the folder or glob it came
    /// from (created when missing).
    #[arg(long, value_name = "DIR")]
    out_dir: Option<PathBuf>,
    /// With --out-dir: write this format (an extension: png, jpg, webp, tif, ...) instead of
    /// the input's; with `-o -`: the format written to stdout (default png).
    #[arg(long, value_name = "EXT", value_parser = out_format)]
    out_format: Option<String>,
    /// With --out-dir: leave an output that exists already alone (resume a batch; an output
    /// is only ever complete or absent).
    #[arg(long, requires = "out_dir")]
    skip_existing: bool,
    /// Let --out-dir write over input files (as when DIR is the inputs' own folder).
    #[arg(long, requires = "out_dir")]
    overwrite: bool,
    /// Write what became of each file as JSON to FILE.json, or to stdout with `-`
    /// (docs/formats.md).
    #[arg(long, value_name = "FILE|-")]
    report: Option<JsonDest>,
    /// Window radius in pixels: 2R+1 taps each way. Default: 3 for box; ceil(3 sigma) for gaussian.
    #[arg(short, long, value_name = "R")]
    radius: Option<u32>,
    /// Filter kind.
    #[arg(long, value_enum, default_value_t = KindArg::Box)]
    kind: KindArg,
    /// Gaussian standard deviation in pixels (default: radius / 3).
    #[arg(long, value_name = "S", value_parser = positive_f64)]
    sigma: Option<f64>,
    /// Apply the blur N times.
    #[arg(long, value_name = "N", default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..))]
    iterations: u32,
    /// Drop the metadata (ICC profile, EXIF, XMP, resolution, PNG text), which is otherwise
    /// kept wherever the output format holds it (docs/fidelity.md).
    #[arg(long)]
    strip: bool,
    /// Turn the pixels upright by their EXIF orientation and set it to 1, as ImageMagick's
    /// -auto-orient and vips autorot do.
    #[arg(long)]
    auto_orient: bool,
    /// JPEG quality, 1 to 100. Default: a JPEG input's own (estimated from its quantisation
    /// table), else 90. WebP output is lossless and takes none.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u8).range(1..=100))]
    quality: Option<u8>,
    /// PNG compression: 0 (none) to 9 (smallest), or fast (1), default (1), best (9).
    #[arg(long, value_name = "LEVEL", value_parser = compression_level)]
    compression: Option<u8>,
    /// JPEG chroma subsampling: 444, 422 or 420. Default: a JPEG input's own, else 420.
    #[arg(long, value_name = "S")]
    subsampling: Option<Subsampling>,
    /// Write progressive JPEG (libjpeg's default script).
    #[arg(long)]
    progressive: bool,
    /// JPEG Huffman tables: optimized for each image (the default) or the standard's
    /// (faster to write, larger files).
    #[arg(long, value_enum, value_name = "T")]
    jpeg_tables: Option<JpegTables>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum JpegTables {
    Optimized,
    Standard,
}

fn compression_level(s: &str) -> Result<u8, String> {
    match s {
        "fast" => Ok(WriteOptions::FASTEST_COMPRESSION),
        "default" => Ok(WriteOptions::DEFAULT_COMPRESSION),
        "best" => Ok(WriteOptions::BEST_COMPRESSION),
        _ => match s.parse::<u8>() {
            Ok(n) if n <= 9 => Ok(n),
            _ => Err("expected 0 to 9, fast, default or best".into()),
        },
    }
}

fn out_format(s: &str) -> Result<String, String> {
    let ext = s.trim_start_matches('.').to_ascii_lowercase();
    img_io::output_format(Path::new(&format!("x.{ext}")))
        .map(|_| ext)
        .map_err(|e| e.to_string().replacen("x.", ".", 1))
}

fn positive_f64(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(v) if v > 0.0 && v.is_finite() => Ok(v),
        Ok(_) => Err("must be a positive number".into()),
        Err(e) => Err(e.to_string()),
    }
}

impl BlurArgs {
    /// The checked filter, before any file or device is touched.
    fn params(&self) -> Result<Options> {
        let usage = |m: &str| anyhow::Error::new(crate::UsageError(m.into()));
        Ok(match self.kind {
            KindArg::Box => {
                if self.sigma.is_some() {
                    return Err(usage("--sigma applies to --kind gaussian only"));
                }
                Options::new(Kind::Box, self.radius.unwrap_or(3), self.iterations)
            }
            KindArg::Gaussian => {
                let (sigma, radius) = match (self.sigma, self.radius) {
                    (Some(s), Some(r)) => (s, r),
                    (Some(s), None) => (s, blur::gaussian_radius(s)),
                    (None, Some(r)) if r > 0 => (r as f64 / 3.0, r),
                    _ => {
                        return Err(usage(
                            "--kind gaussian needs --sigma or a radius of at least 1",
                        ))
                    }
                };
                Options::new(Kind::Gaussian { sigma }, radius, self.iterations)
            }
        })
        .and_then(|o| o.check().map(|_| o))
    }

    /// Inputs paired with their outputs, checked up front (nothing is created but the
    /// output folder).
    fn jobs(&self, ctx: &Ctx) -> Result<Vec<Job>> {
        let usage = |m: String| anyhow::Error::new(crate::UsageError(m));
        let items = self.input.items(ctx, self.out_dir.as_deref())?;
        let outputs = match (&self.output, &self.out_dir) {
            (Some(out), _) => {
                if items.len() > 1 {
                    return Err(usage(format!(
                        "-o names one output but {} inputs were given; use --out-dir",
                        items.len()
                    )));
                }
                if self.out_format.is_some() && !output::names_stream(out) {
                    return Err(usage(format!(
                        "{}: --out-format applies to --out-dir and to -o - (a file's extension names its format)",
                        out.display()
                    )));
                }
                img_io::output_format(out)?;
                if output::names_stream(out) {
                    PendingFile::create(out)?.refuse_terminal("a binary image")?;
                }
                vec![out.clone()]
            }
            (None, Some(dir)) => {
                let format = self.out_format.as_deref();
                outputs::under_dir(&items, dir, format, self.overwrite)?
            }
            (None, None) => unreachable!("clap requires -o or --out-dir"),
        };
        let jobs = items
            .into_iter()
            .zip(outputs)
            .map(|(item, output)| {
                let format = match &self.out_format {
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
        self.check_encoding(&jobs)?;
        if let Some(dir) = &self.out_dir {
            std::fs::create_dir_all(dir)
                .with_context(|| format!("{}: cannot create the folder", dir.display()))?;
        }
        Ok(jobs)
    }
}

impl BlurArgs {
    /// `--quality` and `--compression` must apply to some output.
    fn check_encoding(&self, jobs: &[Job]) -> Result<()> {
        let usage = |m: &str| Err(crate::UsageError(m.into()).into());
        let any = |f: ImageFormat| jobs.iter().any(|j| j.format == f);
        if self.quality.is_some() && !jobs.is_empty() && !any(ImageFormat::Jpeg) {
            return if any(ImageFormat::WebP) {
                usage("--quality: WebP output is lossless (gpukit has no lossy WebP encoder); --quality applies to JPEG")
            } else {
                usage("--quality applies to JPEG output only")
            };
        }
        if self.compression.is_some() && !jobs.is_empty() && !any(ImageFormat::Png) {
            return usage("--compression applies to PNG output only");
        }
        let jpeg_flag = if self.subsampling.is_some() {
            Some("--subsampling")
        } else if self.progressive {
            Some("--progressive")
        } else if self.jpeg_tables.is_some() {
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
        &self,
        format: ImageFormat,
        mut decoded: img_io::Decoded,
        accept: impl FnOnce(img_io::Decoded) -> Image,
    ) -> (Image, Carried) {
        let mut metadata = std::mem::take(&mut decoded.metadata);
        let jpeg_quality = decoded.jpeg_quality;
        let jpeg_subsampling = decoded.jpeg_subsampling;
        let mut image = accept(decoded);
        if self.auto_orient {
            image = metadata.auto_orient(image);
        }
        if self.strip {
            metadata = Metadata::default();
        }
        // A JPEG input's own quality and subsampling when it is written as JPEG again.
        let kept = jpeg_quality.filter(|_| format == ImageFormat::Jpeg);
        let kept_subsampling = jpeg_subsampling.filter(|_| format == ImageFormat::Jpeg);
        let write = WriteOptions {
            quality: self
                .quality
                .or(kept)
                .unwrap_or(WriteOptions::DEFAULT_QUALITY),
            compression: self
                .compression
                .unwrap_or(WriteOptions::DEFAULT_COMPRESSION),
            subsampling: self
                .subsampling
                .or(kept_subsampling)
                .unwrap_or(Subsampling::DEFAULT),
            progressive: self.progressive,
            optimize: self
                .jpeg_tables
                .map_or(WriteOptions::DEFAULT_OPTIMIZE, |t| {
                    t == JpegTables::Optimized
                }),
        };
        (image, Carried { metadata, write })
    }
}

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

/// What an engine thread keeps across the batch: its blur on the device (which reads its tune
/// cache itself), with the plan and staging of the last image size, and its timings.
struct EngineState<'e> {
    blur: Blurrer<'e>,
    timings: Timings,
}

/// The devices (one, or those `--device all` or a list names), opened once by whichever
/// engine thread starts first; the others wait for them. An error is kept as its exit status
/// and message, for every thread to return.
type SharedEngines = std::sync::OnceLock<Result<Vec<Engine>, (Status, String)>>;

fn shared_engines<'e>(
    ctx: &Ctx,
    cell: &'e SharedEngines,
    timings: &mut Timings,
) -> Result<&'e [Engine]> {
    let opened = cell.get_or_init(|| {
        ctx.work_engines(timings)
            .map_err(|e| (Status::of_error(&e), format!("{e:#}")))
    });
    match opened {
        Ok(engines) => Ok(engines),
        Err((Status::Usage, msg)) => Err(crate::UsageError(msg.clone()).into()),
        Err((_, msg)) => Err(anyhow::anyhow!("{msg}")),
    }
}

pub fn run(ctx: &Ctx, args: BlurArgs) -> Result<Status> {
    let params = args.params()?;
    if let (Some(out), Some(report)) = (&args.output, &args.report) {
        let report = report.path().unwrap_or(Path::new("-"));
        output::refuse_shared_output(("-o", out), ("--report", report))?;
    }
    // Opened before the inputs are listed and the output folder is made, so a bad path
    // fails at once and leaves nothing behind.
    let report_sink = args
        .report
        .as_ref()
        .map(|r| JsonSink::open_as(r, "--report"))
        .transpose()?;
    let jobs = args.jobs(ctx)?;
    if jobs.is_empty() {
        ctx.note("this shard holds none of the inputs");
        return Ok(Status::Success);
    }
    // `-o`'s output is created before the work, so an unwritable place fails before any
    // decoding; removed on any error, it leaves nothing behind.
    let named = match &args.output {
        Some(_) => Some(PendingFile::create(&jobs[0].output)?),
        None => None,
    };
    let named = std::sync::Mutex::new(named);
    let started = Instant::now();
    let (mut ledger, todo) = Ledger::new(&jobs, args.skip_existing);
    if todo.iter().any(|&i| jobs[i].format == ImageFormat::Gif) {
        ctx.warn(
            "GIF holds at most 256 colours: the outputs are reduced to a palette, not exact \
             (.png, .webp or .tif keep every colour)",
        );
    }
    let mut pipeline = args.input.pipeline();
    // Engine threads sharing the device: each copies its image into staging and the result
    // out on the host, so with several threads one copies while another's image is on the
    // device.
    pipeline.engines = (pipeline.jobs / 4).clamp(1, 4);
    let devices = SharedEngines::new();
    let mut device_timings = Timings::default();
    if matches!(
        ctx.global.device,
        Some(DeviceSelector::All | DeviceSelector::List(_))
    ) {
        // Several devices: opened first, so that each gets engine threads of its own (a
        // slower one takes fewer images, since every thread takes the next when free).
        let n = shared_engines(ctx, &devices, &mut device_timings)?.len();
        pipeline.engines = pipeline.engines.max(n);
    }
    let read = ctx.read_options();
    // The job's size for the engine choice, from the first file to do: the batch is taken to
    // be that many files like it (a wrong guess costs speed, never results: engines agree).
    // Only a regular file is read twice: a pipe's bytes would be gone.
    let first = todo.first().map(|&i| &jobs[i]);
    if let Some(job) = first.filter(|j| img_io::is_regular_file(&j.input)) {
        if let Ok(h) = img_io::probe_with(&job.input, &read) {
            let files = u32::try_from(todo.len()).unwrap_or(u32::MAX);
            ctx.estimate(params.gpu_saving(h.width, h.height, h.channels, h.bit_depth, files));
        }
    }
    let hide = ctx.global.quiet
        || jobs.len() == 1
        || report_sink.as_ref().is_some_and(JsonSink::is_stdout);
    let bar = term::progress(todo.len() as u64, hide);
    let stages = Stages {
        decode: |&i: &usize| {
            let job = &jobs[i];
            let decoded = img_io::load_with(&job.input, &read)?;
            Ok(args.prepare(job.format, decoded, |d| ctx.accept(&job.input, d)))
        },
        start: |n| -> Result<EngineState<'_>> {
            let mut timings = Timings::default();
            let engines = shared_engines(ctx, &devices, &mut timings)?;
            let blur = Blurrer::new(&engines[n % engines.len()], params);
            Ok(EngineState { blur, timings })
        },
        engine: |s: &mut EngineState<'_>, &i: &usize, (image, carried): (Image, Carried)| {
            let job = &jobs[i];
            ctx.detail(&format!(
                "{}: {}x{}, {} channels, {}-bit",
                job.input.display(),
                image.width,
                image.height,
                image.channels,
                image.bit_depth()
            ));
            img_io::check_layout(&job.output, job.format, image.channels, image.bit_depth())?;
            s.blur
                .run(&image, &mut s.timings)
                .with_context(|| format!("{}", job.input.display()))
                .map(|blurred| (blurred, carried))
        },
        encode: |&i: &usize, (blurred, carried): (Image, Carried)| {
            let job = &jobs[i];
            outputs::create_parent(&job.output)?;
            let created = named.lock().expect("no encoder panics").take();
            let pending = match created {
                Some(p) => p,
                None => PendingFile::create(&job.output)?,
            };
            ctx.detail(&pending.describe());
            ctx.detail(&format!(
                "{}: {}{}",
                job.output.display(),
                match job.format {
                    ImageFormat::Jpeg => format!(
                        "quality {}, {}{}, ",
                        carried.write.quality,
                        if blurred.channels == 1 {
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
            img_io::save_to_with(
                pending,
                job.format,
                blurred,
                &carried.metadata,
                &carried.write,
            )
        },
        finish: |s: EngineState<'_>| Ok(s.timings),
    };
    let engine_timings = pipeline.run(&todo, stages, |outcome| {
        ledger.end(todo[outcome.index], outcome, &bar);
    });
    bar.finish_and_clear();
    let opened: &[Engine] = match devices.get() {
        Some(Ok(engines)) => engines,
        _ => &[],
    };
    let (records, stages) = ledger.close(opened.len())?;
    ctx.report_timings(&batch_timings(stages, device_timings, engine_timings?));
    let names = opened.iter().map(Engine::describe).collect();
    let report = Report::new("blur", names, records, started.elapsed());
    if jobs.len() > 1 {
        ctx.note(&report.summary_line());
    }
    let failed = report.summary.failed;
    if let Some(sink) = report_sink {
        sink.write(&report)?;
    }
    Ok(if failed > 0 {
        Status::Failure
    } else {
        Status::Success
    })
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

/// What became of each file, its errors printed in input order whatever order the files end
/// in, and the stages' times.
struct Ledger<'j> {
    jobs: &'j [Job],
    records: Vec<Option<FileRecord>>,
    printed: usize,
    /// The stages' times, summed over the files.
    stage_times: StageTimes,
    /// A closed stdout (`-o - | head`) ends the run, quietly.
    broken_pipe: Option<anyhow::Error>,
}

impl<'j> Ledger<'j> {
    /// The ledger, with the files whose output exists already skipped (`--skip-existing`),
    /// and the indices of the files to do.
    fn new(jobs: &'j [Job], skip_existing: bool) -> (Ledger<'j>, Vec<usize>) {
        let mut records = vec![None; jobs.len()];
        let mut todo = Vec::new();
        for (i, job) in jobs.iter().enumerate() {
            // A folder where the output should be is no output: writing it fails, and says so.
            let done = job.output.symlink_metadata().is_ok() && !job.output.is_dir();
            if skip_existing && done {
                records[i] = Some(record(job, FileStatus::Skipped, None, None));
            } else {
                todo.push(i);
            }
        }
        let ledger = Ledger {
            jobs,
            records,
            printed: 0,
            stage_times: StageTimes::default(),
            broken_pipe: None,
        };
        (ledger, todo)
    }

    /// File `i` ended.
    fn end(&mut self, i: usize, outcome: Outcome<()>, bar: &ProgressBar) {
        self.stage_times.add(&outcome.times);
        let (status, error) = match outcome.result {
            Ok(()) => (FileStatus::Ok, None),
            Err(e) if super::exit::is_broken_pipe(&e) => {
                self.broken_pipe = Some(e);
                (FileStatus::Failed, None)
            }
            Err(e) => (FileStatus::Failed, Some(format!("{e:#}"))),
        };
        let job = &self.jobs[i];
        let mut r = record(job, status, error, Some(outcome.times));
        // The engine thread for now; `close` turns it into the device's index.
        r.device = outcome.engine;
        self.records[i] = Some(r);
        bar.set_message(job.input.display().to_string());
        bar.inc(1);
        while let Some(Some(r)) = self.records.get(self.printed) {
            if let Some(e) = &r.error {
                bar.suspend(|| eprintln!("{} {e}", term::error_prefix()));
            }
            self.printed += 1;
        }
    }

    /// Every file's record, in input order, and the stages' times. Engine thread `n` worked
    /// on device `n % devices`.
    fn close(self, devices: usize) -> Result<(Vec<FileRecord>, StageTimes)> {
        if let Some(e) = self.broken_pipe {
            return Err(e);
        }
        let records = self
            .records
            .into_iter()
            .map(|r| {
                let mut r = r.expect("every file ends");
                r.device = r.device.map(|n| n % devices.max(1));
                r
            })
            .collect();
        Ok((records, self.stage_times))
    }
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
