//! Histogram batches: every input's histogram counted on one engine through the batch
//! driver (an animation's or a stream's images summed), an optional running total and its
//! plot, and the JSON document and summary of `gpukit histogram`.

use std::path::{Path, PathBuf};
use std::sync::Mutex;

use ::image::ImageFormat;
use anyhow::{Context, Result};

use super::driver::{Engines, Env, Run};
use super::pipeline::{Pipeline, Stages};
use super::report::Summary;
use crate::gpu::{Engine, Timings};
use crate::io::image::{self, Image};
use crate::io::json::{JsonDest, JsonSink};
use crate::io::output::{self, PendingFile};
use crate::ops::histogram::doc::{
    self, layout_name, summary, Counted, FailedDoc, HistogramDoc, InputReport, SumDoc,
};
use crate::ops::histogram::{check_bins, Channels, Histogram, Histogrammer};

/// What to count and what to write (checked flags).
pub struct Settings {
    pub bins: u32,
    /// Also count alpha.
    pub alpha: bool,
    /// Also the sum over all inputs.
    pub sum: bool,
    pub json: Option<JsonDest>,
    pub plot: Option<PathBuf>,
    /// The plot's width and height.
    pub plot_size: (u32, u32),
    /// Measure GPU time per pass (`--timings`).
    pub time_passes: bool,
}

/// What the engine thread hands back: the sum, its plot, and what it measured.
struct Finished {
    total: Option<Histogram>,
    plot: Option<Image>,
}

/// One input: its place among the inputs, and its header and source once probed (or why
/// it could not be); the decode stage takes the source, so that each input is read once.
struct Input {
    index: usize,
    path: PathBuf,
    header: Option<image::Header>,
    source: Mutex<Option<Result<image::Source>>>,
}

/// The plot's output, created up front, and its format.
type Plot = (PendingFile, ImageFormat);

/// Counts `inputs` and writes what `settings` asks for. Returns whether every input was
/// counted; an input that fails is reported and the others go on.
pub fn run(env: &dyn Env, settings: &Settings, inputs: &[PathBuf], jobs: Pipeline) -> Result<bool> {
    if settings.plot.is_some() && inputs.len() > 1 && !settings.sum {
        anyhow::bail!(crate::UsageError(
            "--plot draws one histogram: with several inputs, add --sum to plot their sum".into()
        ));
    }
    let (sink, plot) = open_outputs(env, settings, inputs)?;
    let started = std::time::Instant::now();
    let mut timings = Timings::default();
    let read = env.read_options();
    let probed = timings.phase("probe", || probe(inputs, &read));
    // --bins against each header's depth: a usage error, which ends the run once the
    // inputs before it that could not be read are reported.
    for input in probed.iter() {
        let Some(header) = input.header else { continue };
        let checked = check_bins(settings.bins, header.bit_depth);
        if let Err(e) = checked.with_context(|| image::input_name(&input.path)) {
            for unread in &probed[..input.index] {
                if let Some(Err(e)) = &*unread.source.lock().expect("no decoder yet") {
                    env.error(&format!("{e:#}"));
                }
            }
            return Err(e);
        }
    }
    let headers = || probed.iter().filter_map(|i| i.header);
    // The channels every input is counted with when there is a sum (or its plot).
    let shared = headers()
        .map(|h| Channels::of(h.channels, settings.alpha))
        .reduce(Channels::union)
        .filter(|_| settings.sum || settings.plot.is_some());
    let hide = env.quiet() || sink.as_ref().is_some_and(JsonSink::is_stdout);
    // The device opens on the engine thread while the first inputs decode, unless the job is
    // small enough for the native CPU engine to finish first (an animation's or a stream's
    // first frame stands for each of its images).
    let pixels = headers()
        .map(|h| u64::from(h.width) * u64::from(h.height))
        .sum();
    env.estimate(crate::ops::histogram::cpu_estimate(pixels));
    let (results, finished) = count(env, settings, &probed, shared, plot.is_some(), hide, jobs)?;
    let (finished, engine_timings) = finished;
    timings.merge(&engine_timings);
    let mut reports = Vec::new();
    let mut failures = Vec::new();
    for (input, result) in probed.iter().zip(results) {
        match result {
            Ok(counted) => reports.push(InputReport {
                path: input.path.display().to_string(),
                header: input.header.expect("counted inputs were probed"),
                counted,
            }),
            Err(e) if crate::is_usage(&e) => return Err(e),
            Err(e) => failures.push(FailedDoc::new(&input.path, &e)),
        }
    }
    let all = failures.is_empty();
    let totals = Summary::new(reports.len(), 0, failures.len(), started.elapsed());
    // A sum over some of the inputs would be a wrong answer: it is given only when every
    // input was counted.
    let counted_all = all && !reports.is_empty();
    let total = finished.total.filter(|_| counted_all);
    if let (Some((pending, format)), Some(img), true) = (plot, finished.plot, counted_all) {
        timings.phase("encode", || image::save_to(pending, format, img))?;
    } else if settings.plot.is_some() && !reports.is_empty() {
        env.note("no --plot written, since not every input could be read");
    }
    // The per-input results are written when any input was counted, with the failures
    // listed beside them (docs/formats.md).
    if let Some(sink) = sink.filter(|_| !reports.is_empty()) {
        let doc = HistogramDoc {
            gpukit_version: env!("CARGO_PKG_VERSION"),
            bins: settings.bins,
            alpha: settings.alpha,
            inputs: reports.iter().map(doc::input_doc).collect(),
            failed: failures,
            sum: total.as_ref().filter(|_| settings.sum).map(|t| SumDoc {
                inputs: reports.len(),
                pixels: t.pixels,
                bins: t.bins,
                channels: doc::channel_docs(t),
            }),
        };
        sink.write(&doc)?;
    }
    if settings.json.is_none() && settings.plot.is_none() {
        let sum = total.as_ref().filter(|_| settings.sum);
        crate::io::print_stdout(&summary(&reports, sum))?;
    }
    if inputs.len() > 1 {
        env.note(&totals.line());
    }
    env.report_timings(&timings);
    Ok(all)
}

/// The `--json` and `--plot` outputs, checked and created before any work so that a bad
/// path fails at once.
fn open_outputs(
    env: &dyn Env,
    settings: &Settings,
    inputs: &[PathBuf],
) -> Result<(Option<JsonSink>, Option<Plot>)> {
    output::note_inputs(inputs.iter().map(PathBuf::as_path));
    if let Some(p) = &settings.plot {
        if let Some(json) = &settings.json {
            let json = json.path().unwrap_or(Path::new("-"));
            output::refuse_shared_output(("--json", json), ("--plot", p))?;
        }
    }
    let sink = settings.json.as_ref().map(JsonSink::open).transpose()?;
    let plot = match &settings.plot {
        Some(p) => {
            let format = image::output_format(p)?;
            let pending = PendingFile::create(p)?;
            pending.refuse_terminal("a binary image")?;
            Some((pending, format))
        }
        None => None,
    };
    for how in sink.iter().map(JsonSink::describe) {
        env.detail(&how);
    }
    if let Some((pending, _)) = &plot {
        env.detail(&pending.describe());
    }
    Ok((sink, plot))
}

/// Every input's header, or why it cannot be read. A file's header is read alone; a pipe is
/// read whole, stdin up to its first image, and what was read is kept for the count.
fn probe(inputs: &[PathBuf], read: &image::ReadOptions) -> Vec<Input> {
    inputs
        .iter()
        .enumerate()
        .map(|(index, path)| {
            let source = image::Source::open(path, read);
            Input {
                index,
                path: path.clone(),
                header: source.as_ref().ok().map(image::Source::header),
                source: Mutex::new(Some(source)),
            }
        })
        .collect()
}

/// Counts every input through the batch driver: each input's histogram (or its error) in
/// input order, and what the engine thread made of the batch (the sum, its plot) with its
/// timings and the stages'.
#[allow(clippy::type_complexity)]
fn count(
    env: &dyn Env,
    settings: &Settings,
    inputs: &[Input],
    shared: Option<Channels>,
    plot_wanted: bool,
    hide: bool,
    pipeline: Pipeline,
) -> Result<(Vec<Result<Counted>>, (Finished, Timings))> {
    let read = env.read_options();
    // Images on stdin decode on as many threads as files do.
    let jobs = pipeline.jobs;
    let engines = Engines::new(false);
    let stages = Stages {
        decode: |input: &Input| {
            let source = input
                .source
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .take();
            source
                .expect("each input decodes once")?
                .frames(&read, jobs)
        },
        start: |engine, _| {
            check_plot_size(engine, plot_wanted, settings.plot_size)?;
            let mut hist = Histogrammer::new(engine, settings.bins);
            if settings.time_passes {
                hist.time_passes();
            }
            if let Some(c) = shared {
                hist.start_total(c);
            }
            Ok::<_, anyhow::Error>(hist)
        },
        engine: |hist: &mut Histogrammer<'_>,
                 timings: &mut Timings,
                 input: &Input,
                 frames: image::Frames| {
            let header = input.header.expect("a decoded input was probed");
            let name = image::input_name(&input.path);
            env.detail(&format!(
                "{name}: {}x{} {} {}-bit",
                header.width,
                header.height,
                layout_name(header.channels),
                header.bit_depth
            ));
            let channels = shared.unwrap_or(Channels::of(header.channels, settings.alpha));
            let mut sum: Option<Histogram> = None;
            let mut count = 0;
            for frame in frames {
                let img = env.accept(Path::new(&name), frame?);
                count += 1;
                if channels.union(Channels::of(img.channels, settings.alpha)) != channels {
                    anyhow::bail!(
                        "{name}: image {count} is {} {}-bit, but the first is {} {}-bit: an \
                         input's images are counted with the first one's channels",
                        layout_name(img.channels),
                        img.bit_depth(),
                        layout_name(header.channels),
                        header.bit_depth
                    );
                }
                let hist = hist
                    .histogram(&img, channels, timings)
                    .with_context(|| name.clone())?;
                match &mut sum {
                    Some(total) => total.add(&hist),
                    None => sum = Some(hist),
                }
            }
            let hist = sum.ok_or_else(|| anyhow::anyhow!("{name}: empty file"))?;
            Ok(Counted {
                hist,
                frames: count,
            })
        },
        encode: |_: &Input, c: Counted| Ok(c),
        // The sum and its plot are made on the engine thread; they are used only if every
        // input was counted.
        finish: |hist: Histogrammer<'_>, timings: &mut Timings| {
            finish(
                hist,
                timings,
                shared.is_some(),
                plot_wanted,
                settings.plot_size,
            )
        },
    };
    let batch = Run {
        env,
        pipeline,
        engines: &engines,
        hide,
    };
    let name = |i: &Input| i.path.display().to_string();
    // A usage error (bins against the decoded depth) ends the run, and prints then.
    let print = |e: &anyhow::Error| !crate::is_usage(e);
    let driven = batch.drive(inputs, name, stages, print, |_, _| {})?;
    let mut timings = Timings::default();
    // The engine's phases come from its thread; the encode stage only hands results on.
    let [decode, wait, ..] = driven.stage_times().phases();
    let mut engine_timings = driven.engine_timings;
    let mut finished = driven.finished;
    // One engine: its sum and plot are the batch's.
    let mut ran = engine_timings.pop().expect("one engine");
    for (phase, d) in [decode, wait] {
        timings.add(phase, d);
    }
    ran.merge(&timings);
    let results = driven.outcomes.into_iter().map(|o| o.result).collect();
    Ok((results, (finished.pop().expect("one engine"), ran)))
}

/// The engine thread's last step: the running total and its plot.
fn finish(
    mut hist: Histogrammer<'_>,
    timings: &mut Timings,
    total_wanted: bool,
    plot_wanted: bool,
    (width, height): (u32, u32),
) -> Result<Finished> {
    let total = match total_wanted {
        true => Some(timings.phase("download", || hist.total())?),
        false => None,
    };
    let plot = match (&total, plot_wanted) {
        (Some(_), true) => Some(timings.phase("plot", || hist.plot_total(width, height))?),
        _ => None,
    };
    Ok(Finished { total, plot })
}

/// A plot larger than the adapter draws is a usage error, found before any counting.
fn check_plot_size(engine: &Engine, plot: bool, (width, height): (u32, u32)) -> Result<()> {
    if let (Engine::Gpu(gpu), true) = (engine, plot) {
        let max = gpu.limits.max_texture_dimension_2d;
        if width > max || height > max {
            anyhow::bail!(crate::UsageError(format!(
                "--plot-size {width}x{height}: this adapter draws at most {max} pixels a side"
            )));
        }
    }
    Ok(())
}
