//! `gpukit histogram`: per-channel histograms of images, as a summary on stdout, a JSON
//! document and a plot drawn on the GPU.

use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};

use ::image::ImageFormat;
use anyhow::{Context, Result};
use clap::Args;
use serde::Serialize;

use super::inputs::InputArgs;
use super::{print_stdout, term, Ctx, Status};
use crate::batch::report::Summary;
use crate::batch::Stages;
use crate::gpu::{Engine, Timings};
use crate::io::image::{self, Image};
use crate::io::json::{Document, JsonDest, JsonSink};
use crate::io::output::{self, PendingFile};
use crate::ops::histogram::{
    channel_stats, check_bins, ChannelStats, Channels, Histogram, Histogrammer,
};

#[derive(Debug, Args)]
pub struct HistogramArgs {
    #[command(flatten)]
    input: InputArgs,
    /// The inputs are histogram JSON documents of shards of one run (`--json`): write the
    /// document of the whole run (docs/scale-out.md), to --json or stdout.
    #[arg(long, conflicts_with_all = ["plot", "sum", "alpha"])]
    merge: bool,
    /// Bins per channel: 1 to 256 for 8-bit images, 1 to 65536 for 16-bit ones.
    #[arg(long, default_value_t = 256, value_parser = clap::value_parser!(u32).range(1..=65536))]
    bins: u32,
    /// Also count alpha, for images that have it.
    #[arg(long)]
    alpha: bool,
    /// Also one histogram over all inputs together, accumulated on the GPU and reported after
    /// the per-input ones; every input is then counted with the same channels.
    #[arg(long)]
    sum: bool,
    /// Write the histograms as JSON to FILE.json, or to stdout with `-` (see docs/formats.md).
    #[arg(long, value_name = "FILE|-")]
    json: Option<JsonDest>,
    /// Draw the histogram (the sum's, with --sum) into an image file (`-`: PNG on stdout): red,
    /// green and blue overlaid above, luminance below.
    #[arg(long, value_name = "FILE.png")]
    plot: Option<PathBuf>,
    /// The plot's size in pixels, each side 16 to 16384.
    #[arg(long, value_name = "WxH", default_value = "1024x512", value_parser = parse_size)]
    plot_size: PlotSize,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PlotSize {
    width: u32,
    height: u32,
}

fn parse_size(s: &str) -> Result<PlotSize, String> {
    let bad = || format!("expected WIDTHxHEIGHT, each 16 to 16384, like 1024x512; got {s:?}");
    let (w, h) = s.split_once(['x', 'X']).ok_or_else(bad)?;
    let side = |v: &str| {
        v.trim()
            .parse::<u32>()
            .ok()
            .filter(|v| (16..=16384).contains(v))
    };
    Ok(PlotSize {
        width: side(w).ok_or_else(bad)?,
        height: side(h).ok_or_else(bad)?,
    })
}

/// The JSON document of `gpukit histogram --json`. Documented in docs/formats.md.
#[derive(Serialize)]
pub(super) struct HistogramDoc {
    gpukit_version: &'static str,
    bins: u32,
    alpha: bool,
    inputs: Vec<InputDoc>,
    /// The inputs that could not be counted, in input order.
    failed: Vec<FailedDoc>,
    /// Only with --sum, and only when every input was counted; null otherwise.
    sum: Option<SumDoc>,
}

impl Document for HistogramDoc {
    const SCHEMA: &'static str = "gpukit.histogram/1";
}

#[derive(Serialize)]
struct FailedDoc {
    path: String,
    error: String,
}

impl FailedDoc {
    fn new(path: &std::path::Path, e: &anyhow::Error) -> FailedDoc {
        FailedDoc {
            path: path.display().to_string(),
            error: format!("{e:#}"),
        }
    }
}

#[derive(Serialize)]
struct InputDoc {
    path: String,
    width: u32,
    height: u32,
    bit_depth: u32,
    layout: &'static str,
    /// Images counted: an animation's frames, or the images on stdin; 1 for an image file.
    frames: u32,
    pixels: u64,
    bins: u32,
    channels: Vec<ChannelDoc>,
}

#[derive(Serialize)]
struct SumDoc {
    inputs: usize,
    pixels: u64,
    bins: u32,
    channels: Vec<ChannelDoc>,
}

#[derive(Serialize)]
struct ChannelDoc {
    name: &'static str,
    #[serde(flatten)]
    stats: ChannelStats,
    counts: Vec<u64>,
}

fn channel_docs(hist: &Histogram) -> Vec<ChannelDoc> {
    hist.channels
        .names()
        .into_iter()
        .enumerate()
        .map(|(c, name)| {
            let counts = hist.channel(c);
            ChannelDoc {
                name,
                stats: channel_stats(&counts),
                counts,
            }
        })
        .collect()
}

fn layout_name(channels: u8) -> &'static str {
    match channels {
        1 => "gray",
        2 => "gray+alpha",
        3 => "RGB",
        _ => "RGBA",
    }
}

/// One input's result.
struct Report {
    path: String,
    header: image::Header,
    counted: Counted,
}

/// An input's counts: the sum over its frames.
struct Counted {
    hist: Histogram,
    frames: u32,
}

/// What the engine thread hands back: the sum, its plot, and what it measured.
struct Finished {
    total: Option<Histogram>,
    plot: Option<Image>,
    timings: Timings,
}

/// What the engine stage keeps across the batch.
struct EngineState<'e> {
    hist: Histogrammer<'e>,
    timings: Timings,
}

pub fn run(ctx: &Ctx, args: HistogramArgs) -> Result<Status> {
    if args.merge {
        let sink = JsonSink::open(args.json.as_ref().unwrap_or(&JsonDest::Stdout))?;
        sink.write_value(&super::merge::with_schema(
            super::merge::histograms(&args.input.inputs)?,
            HistogramDoc::SCHEMA,
        ))?;
        return Ok(Status::Success);
    }
    let inputs: Vec<PathBuf> = args
        .input
        .items(ctx, None)?
        .into_iter()
        .map(|i| i.path)
        .collect();
    if inputs.is_empty() {
        ctx.note("this shard holds none of the inputs");
        return Ok(Status::Success);
    }
    if args.plot.is_some() && inputs.len() > 1 && !args.sum {
        anyhow::bail!(crate::UsageError(
            "--plot draws one histogram: with several inputs, add --sum to plot their sum".into()
        ));
    }
    let (sink, plot) = open_outputs(ctx, &args, &inputs)?;
    let started = std::time::Instant::now();
    let mut timings = Timings::default();
    let read = ctx.read_options();
    let (headers, unread) = timings.phase("probe", || probe(&inputs, &read))?;
    // --bins against each header's depth: a usage error, which ends the run once the
    // inputs before it that could not be read are reported.
    for input in &headers {
        let checked = check_bins(args.bins, input.header.bit_depth);
        if let Err(e) = checked.with_context(|| image::input_name(&input.path)) {
            for (_, unread) in unread.iter().filter(|(i, _)| *i < input.index) {
                eprintln!("{} {unread:#}", term::error_prefix());
            }
            return Err(e);
        }
    }
    // Errors print in input order, each once every input before it has ended.
    let mut printer = InOrder::new(inputs.len());
    for (i, e) in &unread {
        printer.end(*i, Some(e));
    }
    // The channels every input is counted with when there is a sum (or its plot).
    let shared = headers
        .iter()
        .map(|i| Channels::of(i.header.channels, args.alpha))
        .reduce(Channels::union)
        .filter(|_| args.sum || args.plot.is_some());
    let hide = ctx.global.quiet || sink.as_ref().is_some_and(JsonSink::is_stdout);
    let (results, finished) = count(
        ctx,
        &args,
        &headers,
        shared,
        plot.is_some(),
        hide,
        |i, r| {
            // A usage error (bins against the decoded depth) ends the run, and prints then.
            let error = r.err().filter(|e| Status::of_error(e) != Status::Usage);
            printer.end(headers[i].index, error);
        },
    )?;
    timings.merge(&finished.timings);
    let mut reports = Vec::new();
    let mut errors: Vec<Option<anyhow::Error>> = inputs.iter().map(|_| None).collect();
    for (i, e) in unread {
        errors[i] = Some(e);
    }
    for (input, result) in headers.iter().zip(results) {
        match result {
            Ok(counted) => reports.push(Report {
                path: input.path.display().to_string(),
                header: input.header,
                counted,
            }),
            Err(e) if Status::of_error(&e) == Status::Usage => return Err(e),
            Err(e) => errors[input.index] = Some(e),
        }
    }
    let failures: Vec<FailedDoc> = inputs
        .iter()
        .zip(&errors)
        .filter_map(|(path, e)| e.as_ref().map(|e| FailedDoc::new(path, e)))
        .collect();
    let status = if failures.is_empty() {
        Status::Success
    } else {
        Status::Failure
    };
    let totals = Summary::new(reports.len(), 0, failures.len(), started.elapsed());
    // A sum over some of the inputs would be a wrong answer: it is given only when every
    // input was counted.
    let counted_all = status == Status::Success && !reports.is_empty();
    let total = finished.total.filter(|_| counted_all);
    if let (Some((pending, format)), Some(img), true) = (plot, finished.plot, counted_all) {
        timings.phase("encode", || image::save_to(pending, format, img))?;
    } else if args.plot.is_some() && !reports.is_empty() {
        ctx.note("no --plot written, since not every input could be read");
    }
    // The per-input results are written when any input was counted, with the failures
    // listed beside them (docs/formats.md).
    if let Some(sink) = sink.filter(|_| !reports.is_empty()) {
        let doc = HistogramDoc {
            gpukit_version: env!("CARGO_PKG_VERSION"),
            bins: args.bins,
            alpha: args.alpha,
            inputs: reports.iter().map(input_doc).collect(),
            failed: failures,
            sum: total.as_ref().filter(|_| args.sum).map(|t| SumDoc {
                inputs: reports.len(),
                pixels: t.pixels,
                bins: t.bins,
                channels: channel_docs(t),
            }),
        };
        sink.write(&doc)?;
    }
    if args.json.is_none() && args.plot.is_none() {
        let sum = total.as_ref().filter(|_| args.sum);
        print_stdout(&summary(&reports, sum))?;
    }
    if inputs.len() > 1 {
        ctx.note(&totals.line());
    }
    ctx.report_timings(&timings);
    Ok(status)
}

/// An input whose header was read, and its source, which the decode stage takes: each input
/// is read once.
struct Input {
    /// Its place among the inputs.
    index: usize,
    path: PathBuf,
    header: image::Header,
    source: Mutex<Option<image::Source>>,
}
/// The plot's output, created up front, and its format.
type Plot = (PendingFile, ImageFormat);

/// Prints the inputs' errors in input order: each once every input before it has ended.
struct InOrder {
    ended: Vec<bool>,
    errors: Vec<Option<String>>,
    next: usize,
}

impl InOrder {
    fn new(inputs: usize) -> InOrder {
        InOrder {
            ended: vec![false; inputs],
            errors: vec![None; inputs],
            next: 0,
        }
    }

    /// Input `i` has ended, with `error` if it failed.
    fn end(&mut self, i: usize, error: Option<&anyhow::Error>) {
        self.ended[i] = true;
        self.errors[i] = error.map(|e| format!("{e:#}"));
        while self.ended.get(self.next) == Some(&true) {
            if let Some(e) = self.errors[self.next].take() {
                eprintln!("{} {e}", term::error_prefix());
            }
            self.next += 1;
        }
    }
}

/// The `--json` and `--plot` outputs, checked and created before any work so that a bad
/// path fails at once.
fn open_outputs(
    ctx: &Ctx,
    args: &HistogramArgs,
    inputs: &[PathBuf],
) -> Result<(Option<JsonSink>, Option<Plot>)> {
    if let Some(p) = args.json.as_ref().and_then(JsonDest::path) {
        output::refuse_input_as_output("--json", p, inputs)?;
    }
    if let Some(p) = &args.plot {
        output::refuse_input_as_output("--plot", p, inputs)?;
        if let Some(json) = &args.json {
            let json = json.path().unwrap_or(Path::new("-"));
            output::refuse_shared_output(("--json", json), ("--plot", p))?;
        }
    }
    let sink = args.json.as_ref().map(JsonSink::open).transpose()?;
    let plot = match &args.plot {
        Some(p) => {
            let format = image::output_format(p)?;
            let pending = PendingFile::create(p)?;
            pending.refuse_terminal("a binary image")?;
            Some((pending, format))
        }
        None => None,
    };
    for how in sink.iter().map(JsonSink::describe) {
        ctx.detail(&how);
    }
    if let Some((pending, _)) = &plot {
        ctx.detail(&pending.describe());
    }
    Ok((sink, plot))
}

/// An input whose header could not be read: its place among the inputs, and why.
type Unread = (usize, anyhow::Error);

/// Every input's header, and the inputs whose header cannot be read (by their place among
/// the inputs). A file's header is read alone; a pipe is read whole, stdin up to its first
/// image, and what was read is kept for the count.
fn probe(inputs: &[PathBuf], read: &image::ReadOptions) -> Result<(Vec<Input>, Vec<Unread>)> {
    let mut headers = Vec::new();
    let mut failures = Vec::new();
    for (index, path) in inputs.iter().enumerate() {
        match image::Source::open(path, read) {
            Ok(source) => {
                let header = source.header();
                headers.push(Input {
                    index,
                    path: path.clone(),
                    header,
                    source: Mutex::new(Some(source)),
                });
            }
            Err(e) => failures.push((index, e)),
        }
    }
    Ok((headers, failures))
}

/// Counts every input through the batch pipeline: each input's histogram (or its error) in
/// input order, and what the engine thread made of the batch (the sum, its plot).
fn count(
    ctx: &Ctx,
    args: &HistogramArgs,
    headers: &[Input],
    shared: Option<Channels>,
    plot_wanted: bool,
    hide: bool,
    mut ended: impl FnMut(usize, Result<&Counted, &anyhow::Error>),
) -> Result<(Vec<Result<Counted>>, Finished)> {
    // The device opens on the engine thread while the first inputs decode, unless the job is
    // small enough for the native CPU engine to finish first (an animation's or a stream's
    // first frame stands for each of its images).
    let pixels = headers
        .iter()
        .map(|i| u64::from(i.header.width) * u64::from(i.header.height))
        .sum();
    ctx.estimate(crate::ops::histogram::cpu_estimate(pixels));
    let engine_cell = OnceLock::new();
    let read = ctx.read_options();
    // Images on stdin decode on as many threads as files do.
    let jobs = args.input.pipeline().jobs;
    let stages = Stages {
        decode: |input: &Input| {
            let source = input
                .source
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .take();
            source.expect("each input decodes once").frames(&read, jobs)
        },
        start: |_| -> Result<EngineState<'_>> {
            let mut timings = Timings::default();
            let opened = ctx.work_engine(&mut timings)?;
            let engine = engine_cell.get_or_init(|| opened);
            check_plot_size(engine, plot_wanted, args.plot_size)?;
            let mut hist = Histogrammer::new(engine, args.bins);
            if ctx.global.timings {
                hist.time_passes();
            }
            if let Some(c) = shared {
                hist.start_total(c);
            }
            Ok(EngineState { hist, timings })
        },
        engine: |s: &mut EngineState<'_>, input: &Input, frames: image::Frames| {
            let (name, header) = (image::input_name(&input.path), input.header);
            ctx.detail(&format!(
                "{name}: {}x{} {} {}-bit",
                header.width,
                header.height,
                layout_name(header.channels),
                header.bit_depth
            ));
            let channels = shared.unwrap_or(Channels::of(header.channels, args.alpha));
            let mut sum: Option<Histogram> = None;
            let mut count = 0;
            for frame in frames {
                let img = ctx.accept(Path::new(&name), frame?);
                count += 1;
                if channels.union(Channels::of(img.channels, args.alpha)) != channels {
                    anyhow::bail!(
                        "{name}: image {count} is {} {}-bit, but the first is {} {}-bit: an \
                         input's images are counted with the first one's channels",
                        layout_name(img.channels),
                        img.bit_depth(),
                        layout_name(header.channels),
                        header.bit_depth
                    );
                }
                let hist = s
                    .hist
                    .histogram(&img, channels, &mut s.timings)
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
        finish: |s: EngineState<'_>| finish(s, shared.is_some(), plot_wanted, args.plot_size),
    };
    let bar = term::progress(headers.len() as u64, hide);
    let mut results: Vec<Option<Result<Counted>>> = (0..headers.len()).map(|_| None).collect();
    let mut stage_times = Timings::default();
    let state = args.input.pipeline().run(headers, stages, |outcome| {
        // The engine's phases come from its thread; the encode stage only hands results on.
        for (phase, d) in outcome.times.phases() {
            if !matches!(phase, "engine" | "encode wait" | "encode") {
                stage_times.add(phase, d);
            }
        }
        bar.suspend(|| ended(outcome.index, outcome.result.as_ref()));
        results[outcome.index] = Some(outcome.result);
        bar.inc(1);
    });
    bar.finish_and_clear();
    // One engine: its sum and plot are the batch's.
    let mut finished = state?.pop().expect("one engine");
    finished.timings.merge(&stage_times);
    let results = results
        .into_iter()
        .map(|r| r.expect("every input ends"))
        .collect();
    Ok((results, finished))
}

/// The engine thread's last step: the running total and its plot.
fn finish(
    mut s: EngineState<'_>,
    total_wanted: bool,
    plot_wanted: bool,
    size: PlotSize,
) -> Result<Finished> {
    let total = match total_wanted {
        true => Some(s.timings.phase("download", || s.hist.total())?),
        false => None,
    };
    let plot = match (&total, plot_wanted) {
        (Some(_), true) => Some(
            s.timings
                .phase("plot", || s.hist.plot_total(size.width, size.height))?,
        ),
        _ => None,
    };
    Ok(Finished {
        total,
        plot,
        timings: s.timings,
    })
}

/// A plot larger than the adapter draws is a usage error, found before any counting.
fn check_plot_size(engine: &Engine, plot: bool, size: PlotSize) -> Result<()> {
    if let (Engine::Gpu(gpu), true) = (engine, plot) {
        let max = gpu.limits.max_texture_dimension_2d;
        let PlotSize { width, height } = size;
        if width > max || height > max {
            anyhow::bail!(crate::UsageError(format!(
                "--plot-size {width}x{height}: this adapter draws at most {max} pixels a side"
            )));
        }
    }
    Ok(())
}

fn input_doc(r: &Report) -> InputDoc {
    InputDoc {
        path: r.path.clone(),
        width: r.header.width,
        height: r.header.height,
        bit_depth: r.header.bit_depth,
        layout: layout_name(r.header.channels),
        frames: r.counted.frames,
        pixels: r.counted.hist.pixels,
        bins: r.counted.hist.bins,
        channels: channel_docs(&r.counted.hist),
    }
}

fn channel_lines(hist: &Histogram) -> String {
    let show = |v: Option<u32>| v.map_or("-".to_string(), |v| v.to_string());
    let mut out = String::new();
    for ch in channel_docs(hist) {
        let s = &ch.stats;
        out += &format!(
            "  {:<10} min {:>5}  max {:>5}  mean {:>9}  median {:>5}  p1 {:>5}  p99 {:>5}\n",
            ch.name,
            show(s.min),
            show(s.max),
            s.mean.map_or("-".to_string(), |m| format!("{m:.2}")),
            show(s.median),
            show(s.p1),
            show(s.p99)
        );
    }
    out
}

/// The short human summary: per input its layout and each channel's statistics (in bins).
fn summary(reports: &[Report], sum: Option<&Histogram>) -> String {
    let mut out = String::new();
    for r in reports {
        let (h, c) = (&r.header, &r.counted);
        let frames = match c.frames {
            1 => String::new(),
            n => format!(", {n} frames of {} pixels in all", c.hist.pixels),
        };
        out += &format!(
            "{}: {}x{} {} {}-bit{frames}, {} bins\n",
            r.path,
            h.width,
            h.height,
            layout_name(h.channels),
            h.bit_depth,
            c.hist.bins
        );
        out += &channel_lines(&c.hist);
    }
    if let Some(t) = sum {
        out += &format!(
            "sum of {} inputs: {} pixels, {} bins\n",
            reports.len(),
            t.pixels,
            t.bins
        );
        out += &channel_lines(t);
    }
    out
}

#[cfg(test)]
mod tests {

    use super::*;

    #[test]
    fn plot_size_parses_and_checks_its_range() {
        assert_eq!(
            parse_size("640x480"),
            Ok(PlotSize {
                width: 640,
                height: 480
            })
        );
        for bad in ["640", "0x480", "15x100", "100x16385", "axb", "640x"] {
            assert!(parse_size(bad).is_err(), "{bad}");
        }
    }
}
