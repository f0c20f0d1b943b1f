//! `gpukit compare`: golden-image checks. Two images (or two folders of them, paired by
//! relative path) are compared on the engine; the metrics go to stdout or JSON, a diff image
//! to a file, and the exit code says whether they match, in the `cmp`/`diff` tradition:
//! 0 match, 1 mismatch, 2 trouble.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use anyhow::{Context, Result};
use clap::Args;
use serde::Serialize;

use super::{exit, print_stdout, term, Ctx, Status};
use crate::batch::{self, Pipeline, Stages};
use crate::gpu::{Engine, Timings};
use crate::io::image::{self, Image};
use crate::io::json::{Document, JsonDest, JsonSink};
use crate::io::output::{same_file, PendingFile};
use crate::ops::compare::{self as op, Comparison, Metrics, Options, Rect};

const EXIT_HELP: &str = "\
Exit codes (as cmp and diff; unlike gpukit's other subcommands):
  0  the images match within the limits given (default: no pixel differs)
  1  they do not (or differ in size or layout; in folder mode: a file missing or extra)
  2  bad usage, or an input that cannot be read";

#[derive(Debug, Args)]
#[command(after_help = EXIT_HELP)]
pub struct CompareArgs {
    /// The expected (golden) image, or a folder of them.
    #[arg(value_name = "EXPECTED")]
    expected: PathBuf,
    /// The actual image, or a folder paired with EXPECTED's by relative path.
    #[arg(value_name = "ACTUAL")]
    actual: PathBuf,
    /// Write a diff image (8-bit RGB): differing pixels red, anti-aliased ones yellow, over
    /// a faded gray copy of the expected image; only when the images do not match. In
    /// folder mode a folder, one PNG per differing file at its relative path.
    #[arg(long, value_name = "DIFF.png")]
    diff: Option<PathBuf>,
    /// A pixel differs when its YIQ colour distance (pixelmatch's, alpha blended over white)
    /// exceeds this fraction of the largest, 0 to 1; without it, when any sample differs.
    #[arg(long, value_name = "T", value_parser = parse_threshold)]
    threshold: Option<f64>,
    /// Fail (exit 1) when METRIC passes LIMIT: pixels, fraction, max, mae, rmse (above
    /// LIMIT), psnr, ssim (below LIMIT). Repeatable; replaces the default `pixels=0`.
    #[arg(long = "fail-on", value_name = "METRIC=LIMIT")]
    fail_on: Vec<Limit>,
    /// Leave a rectangle out of every metric, corners included. Repeatable.
    #[arg(long, value_name = "x1:y1-x2:y2")]
    ignore: Vec<Rect>,
    /// Do not count differing pixels that look anti-aliased (pixelmatch's 3x3 test); they
    /// are reported apart and drawn yellow.
    #[arg(long)]
    antialiasing: bool,
    /// Also compute SSIM (on the host; implied by --fail-on ssim=...).
    #[arg(long)]
    ssim: bool,
    /// Images of different sizes are compared over their common top-left area (and say so)
    /// instead of being a mismatch.
    #[arg(long)]
    allow_size_change: bool,
    /// Write the report as JSON to FILE.json, or to stdout with `-` (see docs/formats.md).
    #[arg(long, value_name = "FILE.json|-")]
    json: Option<JsonDest>,
    /// Folder mode: pairs decoded (and diff images encoded) at once (default: the number of
    /// cores).
    #[arg(short, long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=4096))]
    jobs: Option<u32>,
}

fn parse_threshold(s: &str) -> Result<f64, String> {
    match s.trim().parse::<f64>() {
        Ok(t) if (0.0..=1.0).contains(&t) => Ok(t),
        _ => Err(format!("expected a number from 0 to 1; got {s:?}")),
    }
}

/// A metric a `--fail-on` limit applies to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
enum Metric {
    Pixels,
    Fraction,
    Max,
    Mae,
    Rmse,
    Psnr,
    Ssim,
}

#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
struct Limit {
    metric: Metric,
    limit: f64,
}

impl std::str::FromStr for Limit {
    type Err = String;
    fn from_str(s: &str) -> Result<Limit, String> {
        let (name, value) = s
            .split_once('=')
            .ok_or_else(|| format!("expected METRIC=LIMIT, like psnr=40; got {s:?}"))?;
        let metric = match name.trim().to_ascii_lowercase().as_str() {
            "pixels" => Metric::Pixels,
            "fraction" => Metric::Fraction,
            "max" => Metric::Max,
            "mae" => Metric::Mae,
            "rmse" => Metric::Rmse,
            "psnr" => Metric::Psnr,
            "ssim" => Metric::Ssim,
            other => {
                return Err(format!(
                    "unknown metric {other:?}: use pixels, fraction, max, mae, rmse, psnr or ssim"
                ))
            }
        };
        let limit = value
            .trim()
            .parse::<f64>()
            .ok()
            .filter(|v| v.is_finite())
            .ok_or_else(|| format!("{s:?}: the limit must be a number"))?;
        // An upper bound below 0 could never pass (psnr and ssim are lower bounds).
        let upper = !matches!(metric, Metric::Psnr | Metric::Ssim);
        if upper && limit < 0.0 {
            return Err(format!(
                "{s:?}: the limit is an upper bound and must be 0 or more"
            ));
        }
        Ok(Limit { metric, limit })
    }
}

impl Limit {
    /// Whether `m` passes this limit. An infinite PSNR (identical) passes any.
    fn holds(&self, m: &Metrics) -> bool {
        match self.metric {
            Metric::Pixels => m.differing as f64 <= self.limit,
            Metric::Fraction => m.differing_fraction <= self.limit,
            Metric::Max => f64::from(m.max_abs_diff) <= self.limit,
            Metric::Mae => m.mae <= self.limit,
            Metric::Rmse => m.rmse <= self.limit,
            Metric::Psnr => m.psnr.is_none_or(|p| p >= self.limit),
            Metric::Ssim => m.ssim.is_some_and(|s| s >= self.limit),
        }
    }
}

/// The verdict on one pair.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
enum Verdict {
    Match,
    Mismatch,
    SizeMismatch,
    LayoutMismatch,
    /// Folder mode only: a file could not be read.
    Error,
}

/// One compared pair in the JSON report. Documented in docs/formats.md.
#[derive(Serialize)]
struct PairDoc {
    expected: String,
    actual: String,
    status: Verdict,
    /// Why the images were not compared sample by sample, or were compared over their
    /// common area only; or the error. Null otherwise.
    reason: Option<String>,
    /// The `--fail-on` metrics whose limits failed (`pixels` for the default).
    failed: Vec<Metric>,
    /// The compared area and the expected image's layout; null when not compared.
    width: Option<u32>,
    height: Option<u32>,
    layout: Option<String>,
    metrics: Option<Metrics>,
    /// The diff image written, if any.
    diff: Option<String>,
}

impl PairDoc {
    /// A warning when `--ignore` left no pixel to compare: such a match checks nothing.
    fn warn_if_unchecked(&self, ctx: &Ctx) {
        if self
            .metrics
            .as_ref()
            .is_some_and(|m| m.compared == 0 && m.pixels > 0)
        {
            ctx.warn(&format!(
                "{}: --ignore covers every pixel, so nothing was compared",
                self.actual
            ));
        }
    }

    /// A pair not compared yet: a match until found otherwise.
    fn new(expected: &Path, actual: &Path) -> PairDoc {
        PairDoc {
            expected: expected.display().to_string(),
            actual: actual.display().to_string(),
            status: Verdict::Match,
            reason: None,
            failed: Vec::new(),
            width: None,
            height: None,
            layout: None,
            metrics: None,
            diff: None,
        }
    }
}

/// `gpukit compare --json` for two images. Documented in docs/formats.md.
#[derive(Serialize)]
struct PairReport<'a> {
    gpukit_version: &'static str,
    settings: Settings<'a>,
    #[serde(flatten)]
    pair: PairDoc,
}

impl<'a> Document for PairReport<'a> {
    const SCHEMA: &'static str = "gpukit.compare/1";
}

#[derive(Serialize)]
struct Settings<'a> {
    threshold: Option<f64>,
    antialiasing: bool,
    ignore: &'a [Rect],
    fail_on: &'a [Limit],
}

/// `gpukit compare --json` for two folders. Documented in docs/formats.md.
#[derive(Serialize)]
struct FolderReport<'a> {
    gpukit_version: &'static str,
    settings: Settings<'a>,
    expected: String,
    actual: String,
    /// "match" when every file matches and none is missing or extra; else "mismatch", or
    /// "error" when a file could not be read.
    status: Verdict,
    files: Vec<PairDoc>,
    /// Relative paths only under EXPECTED, and only under ACTUAL.
    missing: Vec<String>,
    extra: Vec<String>,
}

impl<'a> Document for FolderReport<'a> {
    const SCHEMA: &'static str = "gpukit.compare-folder/1";
}

/// The checked plan of a run.
struct Plan {
    opts: Options,
    limits: Vec<Limit>,
    ssim: bool,
    allow_size_change: bool,
}

pub fn run(ctx: &Ctx, args: CompareArgs) -> Result<Status> {
    // Any error is trouble (2), as with cmp; a closed stdout is not an error at all.
    match compare(ctx, args) {
        Err(e) if exit::is_broken_pipe(&e) => Err(e),
        Err(e) => {
            eprintln!("{} {e:#}", term::error_prefix());
            Ok(Status::Usage)
        }
        ok => ok,
    }
}

fn compare(ctx: &Ctx, args: CompareArgs) -> Result<Status> {
    let plan = Plan {
        opts: Options {
            threshold: args.threshold,
            antialiasing: args.antialiasing,
            ignore: args.ignore.clone(),
            diff: args.diff.is_some(),
            tunables: None,
        },
        ssim: args.ssim || args.fail_on.iter().any(|l| l.metric == Metric::Ssim),
        limits: args.fail_on.clone(),
        allow_size_change: args.allow_size_change,
    };
    let settings = Settings {
        threshold: args.threshold,
        antialiasing: args.antialiasing,
        ignore: &args.ignore,
        fail_on: &args.fail_on,
    };
    if image::is_stdin(&args.expected) && image::is_stdin(&args.actual) {
        anyhow::bail!(crate::UsageError(
            "EXPECTED and ACTUAL are both `-`: stdin holds one image".into()
        ));
    }
    for path in [&args.expected, &args.actual] {
        if !image::is_stdin(path) && !path.exists() {
            anyhow::bail!("{}: no such file or folder", path.display());
        }
    }
    let (e_dir, a_dir) = (args.expected.is_dir(), args.actual.is_dir());
    if e_dir != a_dir {
        anyhow::bail!(
            "{}: compare two images or two folders, not one of each",
            if e_dir { &args.actual } else { &args.expected }.display()
        );
    }
    if let (Some(diff), Some(json)) = (&args.diff, &args.json) {
        let json = json.path().unwrap_or(Path::new("-"));
        crate::io::output::refuse_shared_output(("--diff", diff), ("--json", json))?;
    }
    let sink = args.json.as_ref().map(JsonSink::open).transpose()?;
    let mut timings = Timings::default();
    let status = if e_dir {
        compare_folders(ctx, &args, &plan, settings, sink, &mut timings)?
    } else {
        let inputs = [&args.expected, &args.actual];
        let diff = match &args.diff {
            Some(p) => {
                crate::io::output::refuse_input_as_output("--diff", p, &inputs)?;
                Some((PendingFile::create(p)?, image::output_format(p)?))
            }
            None => None,
        };
        let pair = (args.expected.as_path(), args.actual.as_path());
        let doc = match compare_pair(ctx, &plan, pair, diff, &mut timings) {
            Ok(doc) => doc,
            // Trouble is still reported in the JSON, as folder mode does, for a CI job that
            // reads the report whatever the exit code.
            Err(e) if sink.is_some() && !exit::is_broken_pipe(&e) => {
                eprintln!("{} {e:#}", term::error_prefix());
                let pair = PairDoc {
                    status: Verdict::Error,
                    reason: Some(format!("{e:#}")),
                    ..PairDoc::new(&args.expected, &args.actual)
                };
                sink.expect("checked above").write(&PairReport {
                    gpukit_version: env!("CARGO_PKG_VERSION"),
                    settings,
                    pair,
                })?;
                return Ok(Status::Usage);
            }
            Err(e) => return Err(e),
        };
        doc.warn_if_unchecked(ctx);
        if !sink.as_ref().is_some_and(JsonSink::is_stdout) {
            print_stdout(&summary_line(&doc))?;
        }
        let status = if doc.status == Verdict::Match {
            Status::Success
        } else {
            Status::Failure
        };
        if let Some(sink) = sink {
            sink.write(&PairReport {
                gpukit_version: env!("CARGO_PKG_VERSION"),
                settings,
                pair: doc,
            })?;
        }
        status
    };
    ctx.report_timings(&timings);
    Ok(status)
}

/// Reads two image files at once, on two threads (decoding dominates a comparison), while
/// the engine opens on a third when it is not open yet.
fn load_pair(
    ctx: &Ctx,
    expected: &Path,
    actual: &Path,
    engine: &OnceLock<Engine>,
    timings: &mut Timings,
) -> Result<(Image, Image)> {
    let need_engine = engine.get().is_none();
    let (opened, pair) = std::thread::scope(|s| {
        let opening = need_engine.then(|| {
            s.spawn(|| {
                let mut t = Timings::default();
                (open_engine(ctx, &mut t), t)
            })
        });
        let other = s.spawn(|| ctx.load_image(actual));
        let a = timings.phase("decode", || ctx.load_image(expected));
        let b = other.join().expect("decoding does not panic");
        let opened = opening.map(|o| {
            let (engine, t) = o.join().expect("opening the device does not panic");
            timings.merge(&t);
            engine
        });
        (opened, a.and_then(|a| Ok((a, b?))))
    });
    let pair = pair?;
    if let Some(opened) = opened {
        // One pair, so one call: the cell is empty here.
        let _ = engine.set(opened?);
    }
    Ok(pair)
}

/// The engine for compare. A software rasteriser (Mesa lavapipe, WARP) picked by default is
/// slower than the CPU engine on the same cores, so compare runs on the CPU engine then,
/// without opening the device; one named with --device or --backend is used as asked (the
/// tests do).
fn open_engine(ctx: &Ctx, timings: &mut Timings) -> Result<Engine> {
    ctx.work_engine(timings)
}

/// Tells the engine choice the job's size: `pairs` pairs like the one whose expected image is
/// `first` (nothing when its header cannot be read: decoding it will say why). Only a regular
/// file is read twice: a pipe's bytes would be gone.
fn estimate(ctx: &Ctx, plan: &Plan, first: &Path, pairs: usize) {
    if !image::is_regular_file(first) {
        return;
    }
    if let Ok(h) = image::probe(first) {
        let pixels = u64::from(h.width) * u64::from(h.height) * pairs as u64;
        ctx.estimate(plan.opts.cpu_estimate(pixels));
    }
}

/// Whether two files hold the same bytes (then their pixels are the same without decoding).
/// Only regular files are compared so: a pipe or stdin can be read only once, to decode.
fn same_bytes(a: &Path, b: &Path) -> Result<bool> {
    let regular = |p: &Path| std::fs::metadata(p).is_ok_and(|m| m.is_file());
    if !(regular(a) && regular(b)) {
        return Ok(false);
    }
    let len = |p: &Path| {
        std::fs::metadata(p)
            .map(|m| m.len())
            .with_context(|| format!("{}: cannot read", p.display()))
    };
    if len(a)? != len(b)? {
        return Ok(false);
    }
    let read = |p: &Path| std::fs::read(p).with_context(|| format!("{}: cannot read", p.display()));
    Ok(read(a)? == read(b)?)
}

/// A pair read and checked: known already, or two images of one layout for the engine.
enum Prepared {
    /// Byte-identical files (metrics from the header), or a size or layout mismatch.
    Known(PairDoc),
    /// The images to compare (cropped to their common area with --allow-size-change, which
    /// `doc.reason` says).
    Images { doc: PairDoc, a: Image, b: Image },
}

/// A pair after the engine: known already, or the engine's counts and diff image.
enum Measured {
    Known(PairDoc),
    Compared {
        doc: PairDoc,
        a: Image,
        b: Image,
        cmp: Comparison,
    },
}

/// Reads the pair `expected`, `actual` with `load` unless their bytes are identical, and
/// checks that their layouts can be compared.
fn prepare(
    ctx: &Ctx,
    plan: &Plan,
    (expected, actual): (&Path, &Path),
    load: impl FnOnce() -> Result<(Image, Image)>,
    timings: &mut Timings,
) -> Result<Prepared> {
    let mut doc = PairDoc::new(expected, actual);
    // Byte-identical files: every metric is known from the header alone.
    if timings.phase("read", || same_bytes(expected, actual))? {
        let h = image::probe(expected)?;
        let metrics = op::identical(&h, &plan.opts.ignore, plan.ssim);
        return Ok(Prepared::Known(finish(doc_with(doc, h, metrics), plan)));
    }
    let (mut a, mut b) = load()?;
    if let Some(reason) = op::layout_mismatch(&a, &b) {
        let same_layout = (a.channels, a.bit_depth()) == (b.channels, b.bit_depth());
        if !(plan.allow_size_change && same_layout) {
            doc.status = if same_layout {
                Verdict::SizeMismatch
            } else {
                Verdict::LayoutMismatch
            };
            doc.reason = Some(reason);
            return Ok(Prepared::Known(doc));
        }
        let (w, h) = (a.width.min(b.width), a.height.min(b.height));
        doc.reason = Some(format!("{reason}; compared the common {w}x{h} area"));
        ctx.note(&format!(
            "{}: {}",
            doc.actual,
            doc.reason.as_deref().unwrap_or_default()
        ));
        a = op::crop(&a, w, h);
        b = op::crop(&b, w, h);
    }
    Ok(Prepared::Images { doc, a, b })
}

/// The engine's part: the counts and the diff image.
fn measure(
    engine: &Engine,
    plan: &Plan,
    prepared: Prepared,
    timings: &mut Timings,
) -> Result<Measured> {
    Ok(match prepared {
        Prepared::Known(doc) => Measured::Known(doc),
        Prepared::Images { doc, a, b } => {
            let cmp = op::run(engine, (&a, &b), &plan.opts, timings)?;
            Measured::Compared { doc, a, b, cmp }
        }
    })
}

/// The host's part after the engine: SSIM when asked for, the metrics and the verdict; and
/// the diff image when one was asked for and the pair does not match.
fn conclude(plan: &Plan, measured: Measured, timings: &mut Timings) -> (PairDoc, Option<Image>) {
    let (doc, a, b, cmp) = match measured {
        Measured::Known(doc) => return (doc, None),
        Measured::Compared { doc, a, b, cmp } => (doc, a, b, cmp),
    };
    let ssim = if plan.ssim && cmp.counts.pixels > cmp.counts.ignored {
        timings.phase("ssim", || op::ssim(&a, &b, &plan.opts.ignore))
    } else {
        None
    };
    let metrics = op::metrics(&cmp.counts, a.channels, a.max_value(), ssim);
    let header = image::Header {
        width: a.width,
        height: a.height,
        channels: a.channels,
        bit_depth: a.bit_depth(),
    };
    let doc = finish(doc_with(doc, header, metrics), plan);
    let diff = cmp.diff.filter(|_| doc.status == Verdict::Mismatch);
    (doc, diff)
}

/// Compares one pair of files (the two decoded on two threads while the engine opens); the
/// diff image goes to `diff` when they do not match.
fn compare_pair(
    ctx: &Ctx,
    plan: &Plan,
    (expected, actual): (&Path, &Path),
    diff: Option<(PendingFile, ::image::ImageFormat)>,
    timings: &mut Timings,
) -> Result<PairDoc> {
    estimate(ctx, plan, expected, 1);
    let engine = OnceLock::new();
    let prepared = {
        let t = &mut *timings;
        let load = || load_pair(ctx, expected, actual, &engine, t);
        let mut own = Timings::default();
        let prepared = prepare(ctx, plan, (expected, actual), load, &mut own)?;
        timings.merge(&own);
        prepared
    };
    let measured = match prepared {
        Prepared::Known(doc) => Measured::Known(doc),
        images => measure(
            engine.get().expect("opened by load_pair"),
            plan,
            images,
            timings,
        )?,
    };
    let (mut doc, image) = conclude(plan, measured, timings);
    if let (Some((pending, format)), Some(img)) = (diff, image) {
        doc.diff = Some(pending.path().display().to_string());
        timings.phase("encode", || image::save_to(pending, format, img))?;
    }
    Ok(doc)
}

fn doc_with(mut doc: PairDoc, h: image::Header, metrics: Metrics) -> PairDoc {
    let layout = match h.channels {
        1 => "gray",
        2 => "gray+alpha",
        3 => "RGB",
        _ => "RGBA",
    };
    doc.width = Some(h.width);
    doc.height = Some(h.height);
    doc.layout = Some(format!("{layout} {}-bit", h.bit_depth));
    doc.metrics = Some(metrics);
    doc
}

/// Holds the metrics against the limits (default: no differing pixel).
fn finish(mut doc: PairDoc, plan: &Plan) -> PairDoc {
    let m = doc.metrics.as_ref().expect("set by doc_with");
    doc.failed = if plan.limits.is_empty() {
        if m.differing > 0 {
            vec![Metric::Pixels]
        } else {
            Vec::new()
        }
    } else {
        plan.limits
            .iter()
            .filter(|l| !l.holds(m))
            .map(|l| l.metric)
            .collect()
    };
    doc.status = if doc.failed.is_empty() {
        Verdict::Match
    } else {
        Verdict::Mismatch
    };
    doc
}

/// The stdout line for one pair.
fn summary_line(doc: &PairDoc) -> String {
    let name = &doc.actual;
    let Some(m) = &doc.metrics else {
        return format!(
            "{name}: {}: {}\n",
            verdict_word(doc.status),
            doc.reason.as_deref().unwrap_or("")
        );
    };
    let psnr = m.psnr.map_or("inf".to_string(), |p| format!("{p:.2} dB"));
    let mut line = format!(
        "{name}: {}: {} of {} pixels differ ({:.4}%), max diff {}, MAE {:.4}, RMSE {:.4}, PSNR {psnr}",
        verdict_word(doc.status),
        m.differing,
        m.compared,
        m.differing_fraction * 100.0,
        m.max_abs_diff,
        m.mae,
        m.rmse,
    );
    if let Some(s) = m.ssim {
        line += &format!(", SSIM {s:.6}");
    }
    if m.antialiased > 0 {
        line += &format!(", {} anti-aliased", m.antialiased);
    }
    if let Some(r) = &doc.reason {
        line += &format!(" ({r})");
    }
    line.push('\n');
    line
}

fn verdict_word(v: Verdict) -> &'static str {
    match v {
        Verdict::Match => "match",
        Verdict::Mismatch => "MISMATCH",
        Verdict::SizeMismatch => "MISMATCH (size)",
        Verdict::LayoutMismatch => "MISMATCH (layout)",
        Verdict::Error => "ERROR",
    }
}

/// Extensions of the image files folder mode pairs up.
const IMAGE_EXTENSIONS: &[&str] = &[
    "png", "jpg", "jpeg", "webp", "tif", "tiff", "bmp", "gif", "pnm", "pbm", "pgm", "ppm", "pam",
    "tga", "qoi", "ico",
];

/// Where each pair's diff image goes under `dir`: its relative path with the extension
/// `.png`, or with `.png` added to its name where two pairs would otherwise share one
/// (`x.png` and `x.bmp` give `x.png.png` and `x.bmp.png`).
fn diff_paths(dir: &Path, both: &[&PathBuf]) -> Vec<PathBuf> {
    let plain: Vec<PathBuf> = both.iter().map(|r| r.with_extension("png")).collect();
    let mut uses = std::collections::HashMap::<&PathBuf, usize>::new();
    for p in &plain {
        *uses.entry(p).or_default() += 1;
    }
    let shared = |p: &PathBuf| uses[p] > 1;
    both.iter()
        .zip(&plain)
        .map(|(rel, p)| {
            if shared(p) {
                let mut name = rel.as_os_str().to_owned();
                name.push(".png");
                dir.join(name)
            } else {
                dir.join(p)
            }
        })
        .collect()
}

/// The image files under `root`, as sorted relative paths, passing over the folder `skip`
/// (the --diff folder).
fn image_files(root: &Path, skip: Option<&Path>) -> Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    let mut stack = vec![PathBuf::new()];
    while let Some(rel) = stack.pop() {
        let dir = root.join(&rel);
        let entries = std::fs::read_dir(&dir)
            .with_context(|| format!("{}: cannot list the folder", dir.display()))?;
        for e in entries {
            let e = e.with_context(|| format!("{}: cannot list the folder", dir.display()))?;
            let path = rel.join(e.file_name());
            let full = root.join(&path);
            if full.is_dir() {
                if !skip.is_some_and(|s| batch::same_folder(&full, s)) {
                    stack.push(path);
                }
            } else if full
                .extension()
                .and_then(|x| x.to_str())
                .is_some_and(|x| IMAGE_EXTENSIONS.contains(&x.to_ascii_lowercase().as_str()))
            {
                out.push(path);
            }
        }
    }
    out.sort();
    Ok(out)
}

/// The engine thread's state in folder mode: the engine, and what it measured.
struct EngineState<'e> {
    engine: &'e Engine,
    timings: Timings,
}

/// Compares the pairs `both` of the two folders through the batch pipeline: each pair's two
/// files decode on a thread of the pool, the engine (opened on its own thread while the
/// first pairs decode) counts, and the pool computes SSIM and writes the diff image (as PNG,
/// at the pair's relative path under the --diff folder). A pair that fails is reported on
/// stderr and listed with status `error`. The documents come back in the order of `both`.
fn compare_pairs(
    ctx: &Ctx,
    args: &CompareArgs,
    plan: &Plan,
    (both, diffs): (&[&PathBuf], Option<&[PathBuf]>),
    hide: bool,
    timings: &mut Timings,
) -> Result<Vec<PairDoc>> {
    // Each pair with where its diff image goes.
    let items: Vec<(&PathBuf, Option<&PathBuf>)> = both
        .iter()
        .enumerate()
        .map(|(i, rel)| (*rel, diffs.map(|d| &d[i])))
        .collect();
    let engine_cell = OnceLock::new();
    let stages = Stages {
        decode: |&(rel, _): &(&PathBuf, Option<&PathBuf>)| {
            let (e, a) = (args.expected.join(rel), args.actual.join(rel));
            let mut t = Timings::default();
            let load = || Ok((ctx.load_image(&e)?, ctx.load_image(&a)?));
            prepare(ctx, plan, (&e, &a), load, &mut t)
        },
        start: |_| -> Result<EngineState<'_>> {
            let mut timings = Timings::default();
            let opened = open_engine(ctx, &mut timings)?;
            let engine = engine_cell.get_or_init(|| opened);
            Ok(EngineState { engine, timings })
        },
        engine: |s: &mut EngineState<'_>, &(rel, _): &(&PathBuf, Option<&PathBuf>), prepared| {
            measure(s.engine, plan, prepared, &mut s.timings)
                .with_context(|| args.actual.join(rel).display().to_string())
        },
        encode: |&(rel, diff): &(&PathBuf, Option<&PathBuf>), measured: Measured| {
            let mut t = Timings::default();
            let (mut doc, image) = conclude(plan, measured, &mut t);
            if let (Some(path), Some(img)) = (diff, image) {
                let (e, a) = (args.expected.join(rel), args.actual.join(rel));
                if same_file(path, &e) || same_file(path, &a) {
                    anyhow::bail!(
                        "{}: the diff image would replace an image compared; refusing",
                        path.display()
                    );
                }
                let parent = path.parent().expect("a file in a folder");
                std::fs::create_dir_all(parent)
                    .with_context(|| format!("{}: cannot create", parent.display()))?;
                let pending = PendingFile::create(path)?;
                doc.diff = Some(path.display().to_string());
                image::save_to(pending, ::image::ImageFormat::Png, img)?;
            }
            Ok(doc)
        },
        finish: |s: EngineState<'_>| Ok(s.timings),
    };
    let bar = term::progress(both.len() as u64, hide);
    let mut docs: Vec<Option<PairDoc>> = both.iter().map(|_| None).collect();
    let pipeline = Pipeline::new(args.jobs.map(|j| j as usize));
    let finished = pipeline.run(&items, stages, |outcome| {
        for (phase, d) in outcome.times.phases() {
            if phase != "engine" {
                timings.add(phase, d);
            }
        }
        let rel = both[outcome.index];
        let doc = outcome.result.unwrap_or_else(|err| {
            bar.suspend(|| eprintln!("{} {err:#}", term::error_prefix()));
            PairDoc {
                status: Verdict::Error,
                reason: Some(format!("{err:#}")),
                ..PairDoc::new(&args.expected.join(rel), &args.actual.join(rel))
            }
        });
        bar.suspend(|| doc.warn_if_unchecked(ctx));
        docs[outcome.index] = Some(doc);
        bar.inc(1);
    });
    bar.finish_and_clear();
    for t in finished? {
        timings.merge(&t);
    }
    Ok(docs
        .into_iter()
        .map(|d| d.expect("every pair ends"))
        .collect())
}

/// The verdict on two folders: an error if any pair failed to compare, else a match when
/// every file has its pair (`paired`) and every pair matches.
fn folder_verdict(files: &[PairDoc], paired: bool) -> Verdict {
    if files.iter().any(|f| f.status == Verdict::Error) {
        Verdict::Error
    } else if paired && files.iter().all(|f| f.status == Verdict::Match) {
        Verdict::Match
    } else {
        Verdict::Mismatch
    }
}

fn compare_folders(
    ctx: &Ctx,
    args: &CompareArgs,
    plan: &Plan,
    settings: Settings,
    sink: Option<JsonSink>,
    timings: &mut Timings,
) -> Result<Status> {
    if let Some(dir) = &args.diff {
        if crate::io::output::names_stream(dir) || (dir.exists() && !dir.is_dir()) {
            anyhow::bail!(crate::UsageError(format!(
                "{}: in folder mode --diff names a folder",
                dir.display()
            )));
        }
        for (folder, name) in [(&args.expected, "EXPECTED"), (&args.actual, "ACTUAL")] {
            if batch::same_folder(dir, folder) {
                anyhow::bail!(crate::UsageError(format!(
                    "{}: --diff names the {name} folder; its diff images would replace the \
                     images compared",
                    dir.display()
                )));
            }
        }
    }
    // A --diff folder inside either folder holds diff images, not images to compare.
    let skip = args.diff.as_deref();
    let expected = image_files(&args.expected, skip)?;
    let actual = image_files(&args.actual, skip)?;
    if expected.is_empty() && actual.is_empty() {
        anyhow::bail!(
            "{} and {}: no image files in either folder, nothing to compare",
            args.expected.display(),
            args.actual.display()
        );
    }
    // Both lists are sorted: a lookup is a binary search, not a scan of the other folder.
    let has = |list: &[PathBuf], p: &PathBuf| list.binary_search(p).is_ok();
    let missing: Vec<&PathBuf> = expected.iter().filter(|p| !has(&actual, p)).collect();
    let extra: Vec<&PathBuf> = actual.iter().filter(|p| !has(&expected, p)).collect();
    let both: Vec<&PathBuf> = expected.iter().filter(|p| has(&actual, p)).collect();
    let diffs = args.diff.as_ref().map(|dir| diff_paths(dir, &both));
    if let Some(first) = both.first() {
        estimate(ctx, plan, &args.expected.join(first), both.len());
    }
    let json_stdout = sink.as_ref().is_some_and(JsonSink::is_stdout);
    let files = if both.is_empty() {
        Vec::new()
    } else {
        compare_pairs(
            ctx,
            args,
            plan,
            (&both, diffs.as_deref()),
            ctx.global.quiet || json_stdout,
            timings,
        )?
    };
    let mut text = String::new();
    for doc in files.iter().filter(|d| d.status != Verdict::Error) {
        text += &summary_line(doc);
    }
    for p in &missing {
        text += &format!("{}: MISSING from {}\n", p.display(), args.actual.display());
    }
    for p in &extra {
        text += &format!("{}: EXTRA in {}\n", p.display(), args.actual.display());
    }
    let status = folder_verdict(&files, missing.is_empty() && extra.is_empty());
    if !json_stdout {
        print_stdout(&text)?;
    }
    if let Some(sink) = sink {
        let show = |v: Vec<&PathBuf>| v.iter().map(|p| p.display().to_string()).collect();
        sink.write(&FolderReport {
            gpukit_version: env!("CARGO_PKG_VERSION"),
            settings,
            expected: args.expected.display().to_string(),
            actual: args.actual.display().to_string(),
            status,
            files,
            missing: show(missing),
            extra: show(extra),
        })?;
    }
    Ok(match status {
        Verdict::Match => Status::Success,
        Verdict::Error => Status::Usage,
        _ => Status::Failure,
    })
}
