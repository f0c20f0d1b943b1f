//! `gpukit compare`: golden-image checks. Two images (or two folders of them, paired by
//! relative path) are compared on the engine; the metrics go to stdout or JSON, a diff image
//! to a file, and the exit code says whether they match, in the `cmp`/`diff` tradition:
//! 0 match, 1 mismatch, 2 trouble. The flags, and one call of the compare batch.

use std::path::PathBuf;

use anyhow::Result;
use clap::Args;

use super::{exit, term, Ctx, Status};
use crate::batch::baselines::Update;
use crate::batch::compare::{self, Request};
use crate::io::json::JsonDest;
use crate::ops::compare::verdict::{Limit, Verdict};
use crate::ops::compare::Rect;

const EXIT_HELP: &str = "\
Exit codes (as cmp and diff; unlike gpukit's other subcommands):
  0  the images match within the limits given (default: no pixel differs)
  1  they do not (or differ in size; in folder mode: a file missing or extra)
  2  bad usage, or an input that cannot be read";

#[derive(Debug, Args)]
#[command(after_help = EXIT_HELP, allow_negative_numbers = true)]
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
    /// Leave out the pixels a mask image makes non-black (of the expected image's size). In
    /// folder mode a folder mirroring the tree: DIR/REL (or REL with .png) masks REL.
    #[arg(long, value_name = "FILE|DIR")]
    mask: Option<PathBuf>,
    /// Folder mode: a JSON file of rectangles to leave out per relative path, like
    /// {"sub/a.png": ["0:0-99:19"]}.
    #[arg(long, value_name = "FILE.json")]
    ignore_regions: Option<PathBuf>,
    /// Do not count differing pixels that look anti-aliased (pixelmatch's 3x3 test); they
    /// are reported apart and drawn yellow.
    #[arg(long)]
    antialiasing: bool,
    /// Also compute SSIM (on the host; implied by --fail-on ssim=...).
    #[arg(long)]
    ssim: bool,
    /// Images of different sizes are compared over their common top-left area instead of
    /// being a size mismatch; the pixels only one image has count as differing (and are
    /// drawn red on a diff image covering both).
    #[arg(long)]
    allow_size_change: bool,
    /// Write the report as JSON to FILE.json, or to stdout with `-` (see docs/formats.md).
    #[arg(long, value_name = "FILE.json|-")]
    json: Option<JsonDest>,
    /// Also write a JUnit XML report to FILE: one test case per compared file (and per
    /// missing or extra file), a mismatch a failure with its counts and diff image.
    #[arg(long, value_name = "FILE.xml")]
    junit: Option<PathBuf>,
    /// Also write an HTML report to DIR (index.html and images/, works offline): a summary,
    /// then each failing pair's expected, actual and diff images, a slider between them and
    /// its metrics.
    #[arg(long, value_name = "DIR")]
    html: Option<PathBuf>,
    /// Accept the actual images as new baselines: copy each over its expected image where
    /// that is missing or differs (`all`, the default), or only where it is missing
    /// (`missing`). Updated pairs do not fail the run; the reports list them.
    #[arg(long, value_enum, value_name = "WHICH", num_args = 0..=1, require_equals = true,
          default_missing_value = "all")]
    update: Option<Update>,
    /// Folder mode: files only under EXPECTED are listed but do not fail the run.
    #[arg(long)]
    allow_missing: bool,
    /// Folder mode: files only under ACTUAL are listed but do not fail the run.
    #[arg(long)]
    allow_extra: bool,
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

pub fn run(ctx: &Ctx, args: CompareArgs) -> Result<Status> {
    if let Some(j) = &args.junit {
        crate::io::output::check_extension("--junit", j, &["xml"], "a JUnit report")?;
    }
    let request = Request {
        expected: args.expected,
        actual: args.actual,
        diff: args.diff,
        threshold: args.threshold,
        fail_on: args.fail_on,
        ignore: args.ignore,
        antialiasing: args.antialiasing,
        ssim: args.ssim,
        allow_size_change: args.allow_size_change,
        json: args.json,
        junit: args.junit,
        update: args.update,
        allow_missing: args.allow_missing,
        allow_extra: args.allow_extra,
        mask: args.mask,
        ignore_regions: args.ignore_regions,
        html: args.html,
        jobs: args.jobs,
    };
    // Any error is trouble (2), as with cmp; a closed stdout is not an error at all.
    match compare::run(ctx, request) {
        Err(e) if exit::is_broken_pipe(&e) => Err(e),
        Err(e) => {
            term::stderr_line(term::error_prefix(), &format!("{e:#}"));
            Ok(Status::Usage)
        }
        Ok(Verdict::Match) => Ok(Status::Success),
        Ok(Verdict::Error) => Ok(Status::Usage),
        Ok(_) => Ok(Status::Failure),
    }
}
