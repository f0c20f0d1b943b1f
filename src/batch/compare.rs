//! Golden-image checks: two images compared (decoded on two threads while the engine opens),
//! or two folders paired by relative path and compared through the batch driver, with the
//! verdicts, the diff images and the JSON report of `gpukit compare`.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use anyhow::{Context, Result};

use super::baselines::{self, Update};
use super::driver::{Engines, Env, Run};
use super::masks::Masks;
use super::pipeline::{Pipeline, Stages};
use crate::gpu::{Engine, Timings};
use crate::io::image::{self, Image};
use crate::io::json::{JsonDest, JsonSink};
use crate::io::output::{same_file, PendingFile};
use crate::ops::compare::html::{page, Listing, PairImages};
use crate::ops::compare::junit::{junit, Unpaired};
use crate::ops::compare::verdict::{
    doc_with, finish, folder_verdict, summary_line, FolderReport, Limit, Metric, PairDoc,
    PairReport, Settings, Verdict,
};
use crate::ops::compare::{self as op, Comparison, Ignored, Mask, Options, Rect};

/// What to compare and what to write (checked flags).
pub struct Request {
    /// The expected (golden) image, or a folder of them.
    pub expected: PathBuf,
    /// The actual image, or a folder paired with `expected`'s by relative path.
    pub actual: PathBuf,
    /// The diff image, or in folder mode a folder of them.
    pub diff: Option<PathBuf>,
    pub threshold: Option<f64>,
    pub fail_on: Vec<Limit>,
    pub ignore: Vec<Rect>,
    pub antialiasing: bool,
    pub ssim: bool,
    pub allow_size_change: bool,
    pub json: Option<JsonDest>,
    /// A JUnit XML report.
    pub junit: Option<PathBuf>,
    /// Write actual images over expected ones (missing, or missing and differing).
    pub update: Option<Update>,
    /// Folder mode: files only under EXPECTED, or only under ACTUAL, do not fail the run.
    pub allow_missing: bool,
    pub allow_extra: bool,
    /// A mask image (two images) or a folder of them mirroring the tree (two folders).
    pub mask: Option<PathBuf>,
    /// Folder mode: a JSON file of rectangles to ignore per relative path.
    pub ignore_regions: Option<PathBuf>,
    /// An HTML report: DIR/index.html and DIR/images/.
    pub html: Option<PathBuf>,
    /// Folder mode: pairs decoded at once.
    pub jobs: Option<u32>,
}

/// The report files other than the JSON, created before any work so that a path that
/// cannot be written fails first.
struct Reports {
    junit: Option<PendingFile>,
    /// DIR/index.html of `--html DIR`.
    html: Option<PendingFile>,
    started: std::time::Instant,
}

impl Reports {
    fn open(args: &Request) -> Result<Reports> {
        let html = match &args.html {
            Some(dir) => {
                check_html_dir(args, dir)?;
                crate::io::output::prepare_folder(&dir.join("images"))?.keep();
                Some(PendingFile::create(&dir.join("index.html"))?)
            }
            None => None,
        };
        Ok(Reports {
            junit: args.junit.as_deref().map(PendingFile::create).transpose()?,
            html,
            started: std::time::Instant::now(),
        })
    }

    fn any(&self) -> bool {
        self.junit.is_some() || self.html.is_some()
    }

    /// Writes the JUnit report of `files` and `unpaired`, if asked for.
    fn write(self, args: &Request, files: &[PairDoc], unpaired: &[Unpaired]) -> Result<()> {
        if let Some(out) = self.junit {
            let suite = format!(
                "gpukit compare {} {}",
                args.expected.display(),
                args.actual.display()
            );
            let secs = self.started.elapsed().as_secs_f64();
            out.commit_bytes(junit(&suite, files, unpaired, secs).as_bytes())?;
        }
        if let Some(out) = self.html {
            let names = |kind: &str| -> Vec<String> {
                let of = unpaired.iter().filter(|u| u.kind == kind);
                of.map(|u| u.name.to_string()).collect()
            };
            let updated: Vec<String> = unpaired
                .iter()
                .filter(|u| u.updated)
                .map(|u| u.name.to_string())
                .chain(files.iter().filter(|d| d.updated).map(|d| d.name.clone()))
                .collect();
            let title = format!(
                "gpukit compare {} {}",
                args.expected.display(),
                args.actual.display()
            );
            let listing = Listing {
                title: &title,
                missing: &names("missing"),
                extra: &names("extra"),
                updated: &updated,
                missing_fails: !args.allow_missing,
                extra_fails: !args.allow_extra,
            };
            let pairs: Vec<_> = files.iter().map(|d| (d, d.html.clone())).collect();
            out.commit_bytes(page(&listing, &pairs).as_bytes())?;
        }
        Ok(())
    }
}

/// Refuses an `--html` folder that is, or lies inside, EXPECTED or ACTUAL (its images would
/// be compared on the next run, or replace those compared), or names a file.
fn check_html_dir(args: &Request, dir: &Path) -> Result<()> {
    if dir.exists() && !dir.is_dir() {
        anyhow::bail!(crate::UsageError(format!(
            "{}: --html names a folder (it gets index.html and images/)",
            dir.display()
        )));
    }
    for (folder, name) in [(&args.expected, "EXPECTED"), (&args.actual, "ACTUAL")] {
        if folder.is_dir() && (super::same_folder(dir, folder) || inside(dir, folder)) {
            anyhow::bail!(crate::UsageError(format!(
                "{}: --html lies in the {name} folder {}: give a folder outside it",
                dir.display(),
                folder.display()
            )));
        }
    }
    Ok(())
}

/// The checked plan of a run.
struct Plan {
    opts: Options,
    limits: Vec<Limit>,
    ssim: bool,
    allow_size_change: bool,
    masks: Masks,
    /// `--html DIR`: where failing pairs' images go.
    html: Option<PathBuf>,
    /// Whether a report lists the regions (`--json`, `--html`): found on the diff image.
    regions: bool,
}

/// Compares two images or two folders as `req` asks: the verdict (an error verdict for an
/// input that could not be read in folder mode, or a pair that could not be compared with
/// a report asked for).
pub fn run(env: &dyn Env, args: Request) -> Result<Verdict> {
    let plan = Plan {
        opts: Options {
            threshold: args.threshold,
            antialiasing: args.antialiasing,
            ignore: args.ignore.clone(),
            // The diff image is drawn for the JSON too: the regions are found on it.
            diff: args.diff.is_some() || args.json.is_some() || args.html.is_some(),
            tunables: None,
        },
        ssim: args.ssim || args.fail_on.iter().any(|l| l.metric == Metric::Ssim),
        limits: args.fail_on.clone(),
        allow_size_change: args.allow_size_change,
        masks: Masks {
            source: args.mask.clone(),
            regions: match &args.ignore_regions {
                Some(p) => {
                    Masks::read_regions(p).map_err(|e| crate::UsageError(format!("{e:#}")))?
                }
                None => Default::default(),
            },
        },
        html: args.html.clone(),
        regions: args.json.is_some() || args.html.is_some(),
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
    let json = args
        .json
        .as_ref()
        .map(|j| j.path().unwrap_or(Path::new("-")));
    let outputs = [
        ("--diff", args.diff.as_deref()),
        ("--json", json),
        ("--junit", args.junit.as_deref()),
    ];
    for (i, a) in outputs.iter().enumerate() {
        for b in &outputs[i + 1..] {
            if let ((na, Some(pa)), (nb, Some(pb))) = (a, b) {
                crate::io::output::refuse_shared_output((na, pa), (nb, pb))?;
            }
        }
    }
    // --update with no EXPECTED folder yet: every actual image is a new baseline. The folder
    // is made once every flag has been checked, so a usage error leaves nothing behind.
    let fresh = args.update.is_some() && !args.expected.exists() && args.actual.is_dir();
    let (e_dir, a_dir) = (args.expected.is_dir() || fresh, args.actual.is_dir());
    if args.update.is_some() && !e_dir && !a_dir {
        baselines::check_pair(&args.expected, &args.actual)?;
    }
    if (args.allow_missing || args.allow_extra || args.ignore_regions.is_some())
        && !(e_dir && a_dir)
    {
        anyhow::bail!(crate::UsageError(
            "--allow-missing, --allow-extra and --ignore-regions are for two folders".into()
        ));
    }
    if let Some(m) = &args.mask {
        let (want_dir, what) = if e_dir {
            (
                true,
                "a folder of masks mirroring the tree, for two folders",
            )
        } else {
            (false, "a mask image, for two images")
        };
        if !m.exists() {
            anyhow::bail!(crate::UsageError(format!(
                "{}: --mask: no such file or folder",
                m.display()
            )));
        }
        if m.is_dir() != want_dir {
            anyhow::bail!(crate::UsageError(format!(
                "{}: --mask names {what}",
                m.display()
            )));
        }
        crate::io::output::note_inputs([m.as_path()]);
    }
    crate::io::output::note_inputs([args.expected.as_path(), args.actual.as_path()]);
    let sink = args.json.as_ref().map(JsonSink::open).transpose()?;
    let reports = Reports::open(&args)?;
    if fresh {
        std::fs::create_dir_all(&args.expected)
            .with_context(|| format!("{}: cannot create", args.expected.display()))?;
    }
    // A missing EXPECTED file is a new baseline for --update to add.
    if args.update.is_some() && !args.expected.exists() && args.actual.is_file() {
        return add_baseline(env, &args, settings, sink, reports);
    }
    let missing = [&args.expected, &args.actual]
        .into_iter()
        .find(|p| !image::is_stdin(p) && !p.exists());
    let trouble = if let Some(path) = missing {
        Some(format!("{}: no such file or folder", path.display()))
    } else if e_dir != a_dir {
        Some(format!(
            "{}: compare two images or two folders, not one of each",
            if e_dir { &args.actual } else { &args.expected }.display()
        ))
    } else {
        None
    };
    if let Some(trouble) = trouble {
        // Still a report, status error, for a CI job that reads it whatever the exit code.
        if sink.is_some() || reports.any() {
            env.error(&trouble);
            write_error(sink, reports, settings, &args, trouble)?;
            return Ok(Verdict::Error);
        }
        anyhow::bail!(trouble);
    }
    let mut timings = Timings::default();
    let status = if e_dir {
        compare_folders(env, &args, &plan, settings, (sink, reports), &mut timings)?
    } else {
        let diff = match &args.diff {
            Some(p) => Some((PendingFile::create(p)?, image::output_format(p)?)),
            None => None,
        };
        // `--diff -` writes the diff image to stdout: the summary line then goes to stderr,
        // as a note, so that the image's bytes stay the image's alone.
        let diff_on_stdout = diff.as_ref().is_some_and(|(f, _)| f.is_stdout());
        let pair = (args.expected.as_path(), args.actual.as_path());
        let mut doc = match compare_pair(env, &plan, pair, diff, &mut timings) {
            Ok(doc) => doc,
            // Trouble is still reported in the JSON, as folder mode does, for a CI job that
            // reads the report whatever the exit code.
            Err(e) if (sink.is_some() || reports.any()) && !crate::is_broken_pipe(&e) => {
                env.error(&format!("{e:#}"));
                write_error(sink, reports, settings, &args, format!("{e:#}"))?;
                return Ok(Verdict::Error);
            }
            Err(e) => return Err(e),
        };
        if args.update == Some(Update::All)
            && matches!(doc.status, Verdict::Mismatch | Verdict::SizeMismatch)
        {
            baselines::accept(&args.expected, &args.actual)?;
            doc.updated = true;
            env.note(&format!(
                "{}: updated from {}",
                args.expected.display(),
                args.actual.display()
            ));
        }
        if let Some(w) = doc.unchecked_warning() {
            env.warn(&w);
        }
        if diff_on_stdout {
            env.note(summary_line(&doc).trim_end());
        } else if !sink.as_ref().is_some_and(JsonSink::is_stdout) {
            crate::io::print_stdout(&summary_line(&doc))?;
        }
        let status = if doc.status == Verdict::Match || doc.updated {
            Verdict::Match
        } else {
            Verdict::Mismatch
        };
        reports.write(&args, std::slice::from_ref(&doc), &[])?;
        if let Some(sink) = sink {
            sink.write(&PairReport {
                gpukit_version: env!("CARGO_PKG_VERSION"),
                settings,
                pair: doc,
            })?;
        }
        status
    };
    env.report_timings(&timings);
    Ok(status)
}

/// The reports of a pair that could not be compared: status `error`, the trouble as its
/// reason.
fn write_error(
    sink: Option<JsonSink>,
    reports: Reports,
    settings: Settings,
    args: &Request,
    trouble: String,
) -> Result<()> {
    let pair = PairDoc {
        status: Verdict::Error,
        reason: Some(trouble),
        ..PairDoc::new(&args.expected, &args.actual)
    };
    reports.write(args, std::slice::from_ref(&pair), &[])?;
    match sink {
        Some(sink) => sink.write(&PairReport {
            gpukit_version: env!("CARGO_PKG_VERSION"),
            settings,
            pair,
        }),
        None => Ok(()),
    }
}

/// `--update` with no EXPECTED file: ACTUAL's bytes become the expected image, and the
/// reports say so (status `mismatch`, `updated`), a match for the exit code.
fn add_baseline(
    env: &dyn Env,
    args: &Request,
    settings: Settings,
    sink: Option<JsonSink>,
    reports: Reports,
) -> Result<Verdict> {
    baselines::accept(&args.expected, &args.actual)?;
    env.note(&format!(
        "{}: added from {}",
        args.expected.display(),
        args.actual.display()
    ));
    let doc = PairDoc {
        status: Verdict::Mismatch,
        reason: Some("no expected image: --update added it".into()),
        updated: true,
        ..PairDoc::new(&args.expected, &args.actual)
    };
    if !sink.as_ref().is_some_and(JsonSink::is_stdout) {
        crate::io::print_stdout(&summary_line(&doc))?;
    }
    reports.write(args, std::slice::from_ref(&doc), &[])?;
    if let Some(sink) = sink {
        sink.write(&PairReport {
            gpukit_version: env!("CARGO_PKG_VERSION"),
            settings,
            pair: doc,
        })?;
    }
    Ok(Verdict::Match)
}

/// Reads two image files at once, on two threads (decoding dominates a comparison), while
/// the engine opens on a third when it is not open yet.
fn load_pair(
    env: &dyn Env,
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
                (open_engine(env, &mut t), t)
            })
        });
        let other = s.spawn(|| env.load_image(actual));
        let a = timings.phase("decode", || env.load_image(expected));
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
fn open_engine(env: &dyn Env, timings: &mut Timings) -> Result<Engine> {
    let mut engines = env.open_engines(false, timings)?;
    Ok(engines.remove(0))
}

/// Tells the engine choice the job's size: `pairs` pairs like the one whose expected image is
/// `first` (nothing when its header cannot be read: decoding it will say why). Only a regular
/// file is read twice: a pipe's bytes would be gone.
fn estimate(env: &dyn Env, plan: &Plan, first: &Path, pairs: usize) {
    if !image::is_regular_file(first) {
        return;
    }
    if let Ok(h) = image::probe(first) {
        let pixels = u64::from(h.width) * u64::from(h.height) * pairs as u64;
        env.estimate(plan.opts.cpu_estimate(pixels));
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
    /// The images to compare, of one layout and size (`doc.reason` says what was done),
    /// the pair's mask already applied, and the masked pixels no `--ignore` rectangle holds.
    Images {
        doc: PairDoc,
        aligned: Box<op::Aligned>,
        mask: Option<Mask>,
        masked: u64,
    },
}

/// A pair after the engine: known already, or the engine's counts and diff image.
enum Measured {
    Known(PairDoc),
    Compared {
        doc: PairDoc,
        a: Image,
        b: Image,
        cmp: Box<Comparison>,
        mask: Option<Mask>,
    },
}

/// Reads the pair `expected`, `actual` with `load` unless their bytes are identical, and
/// checks that their layouts can be compared.
fn prepare(
    env: &dyn Env,
    plan: &Plan,
    (expected, actual, rel): (&Path, &Path, Option<&Path>),
    load: impl FnOnce() -> Result<(Image, Image)>,
    timings: &mut Timings,
) -> Result<Prepared> {
    let mut doc = PairDoc::new(expected, actual);
    // Byte-identical files: every metric is known from the header alone (with a mask, the
    // pixels it leaves out must be counted: decoded as any pair).
    if !plan.masks.has(rel) && timings.phase("read", || same_bytes(expected, actual))? {
        let h = image::probe(expected)?;
        let layout = op::layout_name(h.channels, h.bit_depth);
        doc.expected_layout = Some(layout.clone());
        doc.actual_layout = Some(layout);
        let metrics = op::identical(&h, &plan.opts.ignore, plan.ssim);
        if plan.regions {
            doc.regions = Some(Vec::new());
            doc.regions_total = Some(0);
        }
        return Ok(Prepared::Known(finish(
            doc_with(doc, h, metrics),
            &plan.limits,
        )));
    }
    let (a, b) = load()?;
    let mask = plan.masks.load(env, rel, (a.width, a.height))?;
    let mut aligned = match op::align(a, b, plan.allow_size_change) {
        Ok(aligned) => aligned,
        Err(reason) => {
            doc.status = Verdict::SizeMismatch;
            doc.reason = Some(reason);
            return Ok(Prepared::Known(doc));
        }
    };
    let [e, a] = &aligned.layouts;
    let mut notes = Vec::new();
    if aligned.promoted {
        notes.push(format!(
            "layout differs: {e} expected, {a} actual; compared as {}",
            op::layout_name(4, aligned.a.bit_depth())
        ));
    }
    if let Some(s) = aligned.size_change {
        let (w, h) = (aligned.a.width, aligned.a.height);
        notes.push(format!(
            "size differs: {}x{} expected, {}x{} actual; compared the common {w}x{h} area, \
             and the pixels only one image has differ",
            s.expected.0, s.expected.1, s.actual.0, s.actual.1
        ));
    }
    doc.expected_layout = Some(e.clone());
    doc.actual_layout = Some(a.clone());
    if !notes.is_empty() {
        doc.reason = Some(notes.join("; "));
        env.note(&format!("{}: {}", doc.actual, notes.join("; ")));
    }
    let masked = mask.as_ref().map_or(0, |m| {
        m.apply(&aligned.a, &mut aligned.b, &plan.opts.ignore)
    });
    Ok(Prepared::Images {
        doc,
        aligned: Box::new(aligned),
        mask,
        masked,
    })
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
        Prepared::Images {
            doc,
            aligned,
            mask,
            masked,
        } => {
            let op::Aligned {
                a, b, size_change, ..
            } = *aligned;
            let mut cmp = op::run(engine, (&a, &b), &plan.opts, timings)?;
            cmp.counts.ignored += masked;
            if let Some(s) = size_change {
                let ignore = Ignored {
                    rects: &plan.opts.ignore,
                    mask: mask.as_ref(),
                };
                cmp = s.extend(cmp, ignore);
            }
            Measured::Compared {
                doc,
                a,
                b,
                cmp: Box::new(cmp),
                mask,
            }
        }
    })
}

/// The host's part after the engine: SSIM when asked for, the metrics and the verdict; and
/// the diff image when one was asked for and the pair does not match.
///
/// With `--html`, a failing pair's images (as compared) and diff image are written as
/// DIR/images/NNNN-{expected,actual,diff}.png, NNNN the pair's `index`.
fn conclude(
    plan: &Plan,
    measured: Measured,
    index: usize,
    timings: &mut Timings,
) -> Result<(PairDoc, Option<Image>)> {
    let (mut doc, a, b, cmp, mask) = match measured {
        Measured::Known(doc) => return Ok((doc, None)),
        Measured::Compared {
            doc,
            a,
            b,
            cmp,
            mask,
        } => (doc, a, b, cmp, mask),
    };
    let ignore = Ignored {
        rects: &plan.opts.ignore,
        mask: mask.as_ref(),
    };
    let ssim = if plan.ssim && cmp.counts.pixels > cmp.counts.ignored {
        timings.phase("ssim", || op::ssim_with(&a, &b, ignore))
    } else {
        None
    };
    if let Some(d) = cmp.diff.as_ref().filter(|_| plan.regions) {
        let (regions, total) = timings.phase("regions", || op::regions(d));
        doc.regions = Some(regions);
        doc.regions_total = Some(total);
    }
    let metrics = op::metrics(&cmp.counts, a.channels, a.max_value(), ssim);
    let header = image::Header {
        width: a.width,
        height: a.height,
        channels: a.channels,
        bit_depth: a.bit_depth(),
    };
    let mut doc = finish(doc_with(doc, header, metrics), &plan.limits);
    let diff = cmp.diff.filter(|_| doc.status == Verdict::Mismatch);
    if let Some(dir) = plan
        .html
        .as_ref()
        .filter(|_| doc.status == Verdict::Mismatch)
    {
        let name = |what: &str| format!("images/{index:04}-{what}.png");
        let save = |what: &str, img: Image| -> Result<String> {
            let rel = name(what);
            let pending = PendingFile::create(&dir.join(&rel))?;
            image::save_to(pending, ::image::ImageFormat::Png, img)?;
            Ok(rel)
        };
        doc.html = Some(timings.phase("encode", || -> Result<PairImages> {
            Ok(PairImages {
                expected: save("expected", a)?,
                actual: save("actual", b)?,
                diff: diff.clone().map(|d| save("diff", d)).transpose()?,
            })
        })?);
    }
    Ok((doc, diff))
}

/// Compares one pair of files (the two decoded on two threads while the engine opens); the
/// diff image goes to `diff` when they do not match.
fn compare_pair(
    env: &dyn Env,
    plan: &Plan,
    (expected, actual): (&Path, &Path),
    diff: Option<(PendingFile, ::image::ImageFormat)>,
    timings: &mut Timings,
) -> Result<PairDoc> {
    estimate(env, plan, expected, 1);
    let engine = OnceLock::new();
    let prepared = {
        let t = &mut *timings;
        let load = || load_pair(env, expected, actual, &engine, t);
        let mut own = Timings::default();
        let prepared = prepare(env, plan, (expected, actual, None), load, &mut own)?;
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
    let (mut doc, image) = conclude(plan, measured, 0, timings)?;
    if let (Some((pending, format)), Some(img)) = (diff, image) {
        doc.diff = Some(pending.path().display().to_string());
        timings.phase("encode", || image::save_to(pending, format, img))?;
    }
    Ok(doc)
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

/// The image files under `root`, as sorted relative paths, passing over the folders `skip`
/// (the --diff folder, and the other compared folder where it lies inside this one). Links
/// to folders are followed, but never into a folder already listed or one that holds the
/// link (a loop): those are left out with a warning.
fn image_files(env: &dyn Env, root: &Path, skip: &[&Path]) -> Result<Vec<PathBuf>> {
    use crate::io::output::file_id;
    let mut out = Vec::new();
    // Each folder to list with the identities of the folders above it (itself included).
    let mut stack = vec![(PathBuf::new(), Vec::from_iter(file_id(root)))];
    while let Some((rel, chain)) = stack.pop() {
        let dir = root.join(&rel);
        let entries = std::fs::read_dir(&dir)
            .with_context(|| format!("{}: cannot list the folder", dir.display()))?;
        for e in entries {
            let e = e.with_context(|| format!("{}: cannot list the folder", dir.display()))?;
            let path = rel.join(e.file_name());
            let full = root.join(&path);
            if full.is_dir() {
                let Some(id) = file_id(&full) else { continue };
                let linked = e.file_type().is_ok_and(|t| t.is_symlink());
                if chain.contains(&id) || (linked && holds(&full, &dir)) {
                    env.warn(&format!(
                        "{}: left out, a link to a folder that holds it (it would loop)",
                        full.display()
                    ));
                    continue;
                }
                if !skip.iter().any(|s| super::same_folder(&full, s)) {
                    let mut below = chain.clone();
                    below.push(id);
                    stack.push((path, below));
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
    crate::io::output::note_inputs(
        out.iter()
            .map(|p| root.join(p))
            .collect::<Vec<_>>()
            .iter()
            .map(PathBuf::as_path),
    );
    Ok(out)
}

/// Whether the folder `link` leads to holds `dir` (is it or one of its ancestors).
fn holds(link: &Path, dir: &Path) -> bool {
    match (std::fs::canonicalize(link), std::fs::canonicalize(dir)) {
        (Ok(to), Ok(dir)) => dir.starts_with(to),
        _ => false,
    }
}

/// Whether `path` (which may not exist yet) lies inside the folder `folder`, by identity:
/// one of its existing ancestors is that folder.
fn inside(path: &Path, folder: &Path) -> bool {
    let Some(id) = crate::io::output::file_id(folder) else {
        return false;
    };
    // The deepest part of `path` that exists, with links and `..` resolved.
    let Some(real) = path
        .ancestors()
        .map(|a| {
            if a.as_os_str().is_empty() {
                Path::new(".")
            } else {
                a
            }
        })
        .find_map(|a| std::fs::canonicalize(a).ok())
    else {
        return false;
    };
    real.ancestors()
        .any(|a| crate::io::output::file_id(a).as_ref() == Some(&id))
}

/// A pair of folder mode: its index, relative path and diff image's path.
type Item<'a> = (usize, &'a PathBuf, Option<&'a PathBuf>);

/// Compares the pairs `both` of the two folders through the batch pipeline: each pair's two
/// files decode on a thread of the pool, the engine (opened on its own thread while the
/// first pairs decode) counts, and the pool computes SSIM and writes the diff image (as PNG,
/// at the pair's relative path under the --diff folder). A pair that fails is reported on
/// stderr and listed with status `error`. The documents come back in the order of `both`.
fn compare_pairs(
    env: &dyn Env,
    args: &Request,
    plan: &Plan,
    (both, diffs): (&[&PathBuf], Option<&[PathBuf]>),
    hide: bool,
    timings: &mut Timings,
) -> Result<Vec<PairDoc>> {
    // Each pair with where its diff image goes.
    let items: Vec<Item> = both
        .iter()
        .enumerate()
        .map(|(i, rel)| (i, *rel, diffs.map(|d| &d[i])))
        .collect();
    let engines = Engines::new(false);
    let stages = Stages {
        decode: |&(_, rel, _): &Item| {
            let (e, a) = (args.expected.join(rel), args.actual.join(rel));
            let mut t = Timings::default();
            let load = || Ok((env.load_image(&e)?, env.load_image(&a)?));
            prepare(env, plan, (&e, &a, Some(rel.as_path())), load, &mut t)
        },
        start: |engine, _| Ok(engine),
        engine: |engine: &mut &Engine, t: &mut Timings, &(_, rel, _): &Item, prepared| {
            measure(engine, plan, prepared, t)
                .with_context(|| args.actual.join(rel).display().to_string())
        },
        encode: |&(i, rel, diff): &Item, measured: Measured| {
            let mut t = Timings::default();
            let (mut doc, image) = conclude(plan, measured, i, &mut t)?;
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
        finish: |_, _: &mut Timings| Ok(()),
    };
    let batch = Run {
        env,
        pipeline: Pipeline::new(args.jobs.map(|j| j as usize)),
        engines: &engines,
        hide,
    };
    let name = |(_, rel, _): &Item| rel.display().to_string();
    let warn = |_: usize, r: &Result<PairDoc>| {
        if let Some(w) = r.as_ref().ok().and_then(PairDoc::unchecked_warning) {
            env.warn(&w);
        }
    };
    let driven = batch.drive(&items, name, stages, |_| true, warn)?;
    for (phase, d) in driven.stage_times().phases() {
        if phase != "engine" {
            timings.add(phase, d);
        }
    }
    for t in &driven.engine_timings {
        timings.merge(t);
    }
    let docs = driven.outcomes.into_iter().zip(both).map(|(outcome, rel)| {
        let mut doc = outcome.result.unwrap_or_else(|err| PairDoc {
            status: Verdict::Error,
            reason: Some(format!("{err:#}")),
            ..PairDoc::new(&args.expected.join(rel), &args.actual.join(rel))
        });
        doc.name = rel.display().to_string();
        doc
    });
    Ok(docs.collect())
}

fn compare_folders(
    env: &dyn Env,
    args: &Request,
    plan: &Plan,
    settings: Settings,
    (sink, reports): (Option<JsonSink>, Reports),
    timings: &mut Timings,
) -> Result<Verdict> {
    if let Some(dir) = &args.diff {
        if crate::io::output::names_stream(dir) || (dir.exists() && !dir.is_dir()) {
            anyhow::bail!(crate::UsageError(format!(
                "{}: in folder mode --diff names a folder",
                dir.display()
            )));
        }
        for (folder, name) in [(&args.expected, "EXPECTED"), (&args.actual, "ACTUAL")] {
            if super::same_folder(dir, folder) {
                anyhow::bail!(crate::UsageError(format!(
                    "{}: --diff names the {name} folder; its diff images would replace the \
                     images compared",
                    dir.display()
                )));
            }
        }
        if inside(dir, &args.expected) {
            anyhow::bail!(crate::UsageError(format!(
                "{}: --diff lies inside the EXPECTED folder {}; diff images would be written \
                 among (and over) the golden images: give a folder outside it",
                dir.display(),
                args.expected.display()
            )));
        }
    }
    // The --diff folder is made, and checked writable, before any pair is read: an unwritable
    // one fails once, here, not once per differing pair at the end. Folders made for it are
    // removed again if no diff image went into them.
    let _diff_folder = args
        .diff
        .as_deref()
        .map(crate::io::output::prepare_folder)
        .transpose()?;
    // A --diff folder inside either folder holds diff images, not images to compare; nor does
    // one compared folder inside the other (`compare golden/ .`) hold the other's images:
    // listed, they were all missing or extra, and --update copied golden into itself.
    let diff = args.diff.as_deref().into_iter();
    let skip_in_expected: Vec<&Path> = diff.clone().chain([args.actual.as_path()]).collect();
    let skip_in_actual: Vec<&Path> = diff.chain([args.expected.as_path()]).collect();
    let expected = image_files(env, &args.expected, &skip_in_expected)?;
    let actual = image_files(env, &args.actual, &skip_in_actual)?;
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
    // A run that would pass having compared nothing (every file missing or extra, and
    // allowed) is trouble, as two empty folders are: a job pointed at the wrong folder.
    let allowed =
        (missing.is_empty() || args.allow_missing) && (extra.is_empty() || args.allow_extra);
    if both.is_empty() && args.update.is_none() && allowed {
        anyhow::bail!(
            "{} and {}: no image is in both folders, so nothing was compared",
            args.expected.display(),
            args.actual.display()
        );
    }
    plan.masks.warn_unused(env, &both);
    let diffs = args.diff.as_ref().map(|dir| diff_paths(dir, &both));
    if let Some(first) = both.first() {
        estimate(env, plan, &args.expected.join(first), both.len());
    }
    let json_stdout = sink.as_ref().is_some_and(JsonSink::is_stdout);
    let files = if both.is_empty() {
        Vec::new()
    } else {
        compare_pairs(
            env,
            args,
            plan,
            (&both, diffs.as_deref()),
            env.quiet() || json_stdout,
            timings,
        )?
    };
    let mut files = files;
    let updated = update_folder(env, args, &mut files, &extra)?;
    let mut text = String::new();
    for doc in files.iter().filter(|d| d.status != Verdict::Error) {
        text += &summary_line(doc);
    }
    for p in &missing {
        text += &format!("{}: MISSING from {}\n", p.display(), args.actual.display());
    }
    let added = |p: &PathBuf| updated.iter().any(|u| u == p);
    for p in &extra {
        let what = if added(p) { "ADDED to" } else { "EXTRA in" };
        let folder = if added(p) {
            &args.expected
        } else {
            &args.actual
        };
        text += &format!("{}: {what} {}\n", p.display(), folder.display());
    }
    let paired = (missing.is_empty() || args.allow_missing)
        && (args.allow_extra || extra.iter().all(|p| added(p)));
    let status = folder_verdict(&files, paired);
    if !json_stdout {
        crate::io::print_stdout(&text)?;
    }
    let (e_name, a_name) = (
        args.expected.display().to_string(),
        args.actual.display().to_string(),
    );
    let names: Vec<(String, &str, &str, bool, bool)> = missing
        .iter()
        .map(|p| {
            let n = p.display().to_string();
            (n, "missing", a_name.as_str(), args.allow_missing, false)
        })
        .chain(extra.iter().map(|p| {
            let n = p.display().to_string();
            (n, "extra", e_name.as_str(), args.allow_extra, added(p))
        }))
        .collect();
    let unpaired: Vec<Unpaired> = names
        .iter()
        .map(|(name, kind, from, allowed, updated)| Unpaired {
            name,
            kind,
            from,
            allowed: *allowed,
            updated: *updated,
        })
        .collect();
    reports.write(args, &files, &unpaired)?;
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
            updated: show(updated.iter().collect()),
        })?;
    }
    Ok(match status {
        Verdict::Match => Verdict::Match,
        Verdict::Error => Verdict::Error,
        _ => Verdict::Mismatch,
    })
}

/// `--update` in folder mode: each differing pair's actual file written over its expected one
/// (with `--update` or `--update=all`), each extra file copied into EXPECTED at its relative
/// path; pairs that could not be compared are left alone. The relative paths written, sorted.
fn update_folder(
    env: &dyn Env,
    args: &Request,
    files: &mut [PairDoc],
    extra: &[&PathBuf],
) -> Result<Vec<PathBuf>> {
    let Some(mode) = args.update else {
        return Ok(Vec::new());
    };
    let mut written = Vec::new();
    if mode == Update::All {
        for doc in files.iter_mut() {
            if matches!(doc.status, Verdict::Mismatch | Verdict::SizeMismatch) {
                let rel = PathBuf::from(&doc.name);
                baselines::accept(&args.expected.join(&rel), &args.actual.join(&rel))?;
                doc.updated = true;
                written.push(rel);
            }
        }
    }
    for rel in extra {
        baselines::accept(&args.expected.join(rel), &args.actual.join(rel))?;
        written.push(PathBuf::from(rel));
    }
    written.sort();
    if !written.is_empty() {
        env.note(&format!(
            "{} expected image(s) written under {} by --update",
            written.len(),
            args.expected.display()
        ));
    }
    Ok(written)
}
