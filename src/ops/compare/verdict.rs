//! What `gpukit compare` reports: the `--fail-on` limits, the verdict on a pair, the JSON
//! documents of a pair and of two folders (docs/formats.md) and the summary lines.

use std::path::Path;

use serde::Serialize;

use super::{Metrics, Rect, Region};
use crate::io::image;
use crate::io::json::Document;

/// A metric a `--fail-on` limit applies to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Metric {
    Pixels,
    Fraction,
    Max,
    Mae,
    Rmse,
    Psnr,
    Ssim,
}

#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Limit {
    pub metric: Metric,
    pub limit: f64,
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
    pub fn holds(&self, m: &Metrics) -> bool {
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
pub enum Verdict {
    Match,
    Mismatch,
    SizeMismatch,
    /// Folder mode only: a file could not be read.
    Error,
}

/// One compared pair in the JSON report. Documented in docs/formats.md.
#[derive(Serialize)]
pub struct PairDoc {
    /// What the reports call the pair: its relative path in folder mode, else the actual
    /// image's path.
    #[serde(skip)]
    pub name: String,
    pub expected: String,
    pub actual: String,
    pub status: Verdict,
    /// Why the images were not compared sample by sample, or were compared over their
    /// common area only; or the error. Null otherwise.
    pub reason: Option<String>,
    /// The `--fail-on` metrics whose limits failed (`pixels` for the default).
    pub failed: Vec<Metric>,
    /// The compared area and the layout compared in; null when not compared.
    pub width: Option<u32>,
    pub height: Option<u32>,
    pub layout: Option<String>,
    /// The layouts as decoded; null when not decoded.
    pub expected_layout: Option<String>,
    pub actual_layout: Option<String>,
    pub metrics: Option<Metrics>,
    /// The diff image written, if any.
    pub diff: Option<String>,
    /// The bounding boxes of the differing regions (ops::compare::regions), the largest
    /// first, at most `MAX_REGIONS`; null when no diff image was drawn.
    pub regions: Option<Vec<Region>>,
    /// How many regions there were (more than `regions` lists when over the bound).
    pub regions_total: Option<usize>,
    /// The `--html` report's images of this pair, when written.
    #[serde(skip)]
    pub html: Option<super::html::PairImages>,
    /// Whether `--update` wrote the actual image over the expected one (then the pair does
    /// not fail the run, whatever its status).
    pub updated: bool,
}

impl PairDoc {
    /// The warning when `--ignore` left no pixel to compare: such a match checks nothing.
    pub fn unchecked_warning(&self) -> Option<String> {
        self.metrics
            .as_ref()
            .is_some_and(|m| m.compared == 0 && m.pixels > 0)
            .then(|| {
                format!(
                    "{}: --ignore, --mask and --ignore-regions together cover every pixel, so \
                     nothing was compared",
                    self.actual
                )
            })
    }

    /// A pair not compared yet: a match until found otherwise.
    pub fn new(expected: &Path, actual: &Path) -> PairDoc {
        PairDoc {
            name: actual.display().to_string(),
            expected: expected.display().to_string(),
            actual: actual.display().to_string(),
            status: Verdict::Match,
            reason: None,
            failed: Vec::new(),
            width: None,
            height: None,
            layout: None,
            expected_layout: None,
            actual_layout: None,
            metrics: None,
            diff: None,
            regions: None,
            regions_total: None,
            html: None,
            updated: false,
        }
    }
}

/// `gpukit compare --json` for two images. Documented in docs/formats.md.
#[derive(Serialize)]
pub struct PairReport<'a> {
    pub gpukit_version: &'static str,
    pub settings: Settings<'a>,
    #[serde(flatten)]
    pub pair: PairDoc,
}

impl<'a> Document for PairReport<'a> {
    const SCHEMA: &'static str = "gpukit.compare/1";
}

#[derive(Serialize)]
pub struct Settings<'a> {
    pub threshold: Option<f64>,
    pub antialiasing: bool,
    pub ignore: &'a [Rect],
    pub fail_on: &'a [Limit],
}

/// `gpukit compare --json` for two folders. Documented in docs/formats.md.
#[derive(Serialize)]
pub struct FolderReport<'a> {
    pub gpukit_version: &'static str,
    pub settings: Settings<'a>,
    pub expected: String,
    pub actual: String,
    /// "match" when every file matches and none is missing or extra; else "mismatch", or
    /// "error" when a file could not be read.
    pub status: Verdict,
    pub files: Vec<PairDoc>,
    /// Relative paths only under EXPECTED, and only under ACTUAL.
    pub missing: Vec<String>,
    pub extra: Vec<String>,
    /// Relative paths `--update` wrote under EXPECTED: differing pairs replaced and extra
    /// files added.
    pub updated: Vec<String>,
}

impl<'a> Document for FolderReport<'a> {
    const SCHEMA: &'static str = "gpukit.compare-folder/1";
}

pub fn doc_with(mut doc: PairDoc, h: image::Header, metrics: Metrics) -> PairDoc {
    doc.width = Some(h.width);
    doc.height = Some(h.height);
    doc.layout = Some(super::layout_name(h.channels, h.bit_depth));
    doc.metrics = Some(metrics);
    doc
}

/// Holds the metrics against the limits (default: no differing pixel).
pub fn finish(mut doc: PairDoc, limits: &[Limit]) -> PairDoc {
    let m = doc.metrics.as_ref().expect("set by doc_with");
    // A pair --ignore covers whole compared nothing: a match, whatever the limits
    // (docs/compare.md); SSIM over no pixels is no measurement to hold a limit against.
    doc.failed = if m.compared == 0 {
        Vec::new()
    } else if limits.is_empty() {
        if m.differing > 0 {
            vec![Metric::Pixels]
        } else {
            Vec::new()
        }
    } else {
        limits
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
pub fn summary_line(doc: &PairDoc) -> String {
    // stdin by name, as every message calls it (the document keeps the path given, `-`).
    let name = crate::io::image::input_name(std::path::Path::new(&doc.actual));
    let Some(m) = &doc.metrics else {
        let updated = if doc.updated {
            "; expected image updated"
        } else {
            ""
        };
        return format!(
            "{name}: {}: {}{updated}\n",
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
    if doc.updated {
        line += "; expected image updated";
    }
    line.push('\n');
    line
}

pub fn verdict_word(v: Verdict) -> &'static str {
    match v {
        Verdict::Match => "match",
        Verdict::Mismatch => "MISMATCH",
        Verdict::SizeMismatch => "MISMATCH (size)",
        Verdict::Error => "ERROR",
    }
}

/// The verdict on two folders: an error if any pair failed to compare, else a match when
/// every file has its pair (`paired`: or is allowed to lack it) and every pair matches or
/// was updated.
pub fn folder_verdict(files: &[PairDoc], paired: bool) -> Verdict {
    if files.iter().any(|f| f.status == Verdict::Error) {
        Verdict::Error
    } else if paired
        && files
            .iter()
            .all(|f| f.status == Verdict::Match || f.updated)
    {
        Verdict::Match
    } else {
        Verdict::Mismatch
    }
}
