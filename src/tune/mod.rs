//! `gpukit tune`: measures each op's candidate workgroup sizes, tile shapes and work per
//! invocation on this adapter, per size class, and keeps the fastest in a cache that the
//! command line reads. Every candidate is first checked against the CPU reference on a
//! small input; a wrong one is never timed, so it can never win. docs/tune.md explains it.
//!
//! A search runs in stages (coordinate search): each stage varies a few fields around the
//! best so far, over powers of two within the adapter's limits, and always re-times the
//! incumbent and the default, so every stage's choice is measured against them on the same
//! case. Candidates are screened with a few runs first; those clearly slower than the best
//! so far are dropped without the full measurement.

pub mod cache;

use std::cell::OnceCell;
use std::collections::HashMap;
use std::fmt::{Debug, Display};
use std::time::Duration;

use anyhow::{bail, Result};
use serde::Serialize;

use crate::bench::{self, Case, Clock, Config, Measurement, Unit};
use crate::gpu::{Engine, Gpu, Timings};
use crate::io::image::Image;
use crate::ops::{blur, histogram, matmul, scan};
pub use cache::{Cache, Entry, StageTime};

/// The ops `tune` knows, in the order `all` runs them.
pub const OPS: &[&str] = &["blur", "histogram", "scan", "matmul"];

/// A candidate whose screening median is this many times the best so far is dropped.
const DROP_FACTOR: f64 = 1.3;
/// A challenger must beat the incumbent by this fraction to replace it (timing noise must
/// not make a choice slower than the one it replaces).
const MARGIN: f64 = 0.02;

/// How thorough a tune is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Level {
    /// Tiny sizes, a few candidates per stage, few runs: seconds, for a first cache and tests.
    pub quick: bool,
}

impl Level {
    /// Warm-up time before each candidate's runs: building a candidate's pipeline leaves the
    /// GPU idle long enough for its clocks to drop (bench::Config). Quick tunes skip it.
    fn warmup_time(self) -> Duration {
        Duration::from_millis(if self.quick { 0 } else { 100 })
    }

    fn screen(self) -> Config {
        Config {
            warmup: 1,
            warmup_time: self.warmup_time(),
            reps: 3,
        }
    }

    fn full(self) -> Config {
        Config {
            warmup: if self.quick { 1 } else { 3 },
            warmup_time: self.warmup_time(),
            reps: if self.quick { 5 } else { 15 },
        }
    }
}

/// What became of a candidate.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Status {
    /// Right, and timed in full.
    Measured,
    /// Right, but its screening runs were clearly slower than the best so far.
    Dropped,
    /// Its result differed from the CPU reference: never timed, never chosen.
    Wrong,
    /// It cannot run here (a limit, or a pipeline that does not build).
    Unfit,
}

/// One candidate of one stage of one size class. Documented in docs/formats.md.
#[derive(Clone, Debug, Serialize)]
pub struct Trial {
    pub op: &'static str,
    pub size: String,
    pub stage: &'static str,
    /// The choice in words, and field by field.
    pub candidate: String,
    pub choice: serde_json::Value,
    /// Whether this is the op's default.
    pub default: bool,
    pub status: Status,
    /// Why a candidate is wrong or unfit.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    pub median_ms: Option<f64>,
    pub throughput: Option<f64>,
    pub unit: Unit,
    pub clock: Option<Clock>,
    /// Whether the stage chose it.
    pub chosen: bool,
}

/// The trial a stage chooses: the fastest fully measured one, unless it beats the
/// `incumbent` (the best of the stages before, or the default) by less than `MARGIN`.
/// Wrong, unfit and dropped trials never win, whatever their times say.
pub fn choose(trials: &[Trial], incumbent: usize) -> Option<usize> {
    let ms = |i: usize| match trials[i].status {
        Status::Measured => trials[i].median_ms,
        _ => None,
    };
    let best = (0..trials.len())
        .filter_map(|i| ms(i).map(|m| (i, m)))
        .min_by(|a, b| a.1.total_cmp(&b.1))?;
    match ms(incumbent) {
        Some(inc) if best.1 > inc * (1.0 - MARGIN) => Some(incumbent),
        _ => Some(best.0),
    }
}

/// A duel's verdict: the choice stays if it beats the default by `MARGIN` on some case and
/// loses by more than `MARGIN` on none.
pub fn duel_keeps_choice(duel: &[StageTime]) -> bool {
    let slower = duel
        .iter()
        .any(|d| d.tuned_ms > d.default_ms * (1.0 + MARGIN));
    let faster = duel
        .iter()
        .any(|d| d.tuned_ms < d.default_ms * (1.0 - MARGIN));
    faster && !slower
}

/// One stage of a search: the candidates it tries around the best so far.
struct Stage<T> {
    name: &'static str,
    candidates: fn(&T, &wgpu::Limits, bool) -> Vec<T>,
}

/// A size class of an op: round(log2) of its size, and the size in words.
struct SizeClass {
    class: u32,
    label: String,
    /// The op's size parameter (image side lengths, elements, matmul n).
    dims: (usize, usize),
    /// The op's benchmark input, made once for all its candidates.
    image: OnceCell<Image>,
    elements: OnceCell<Vec<u32>>,
    matrices: OnceCell<(Vec<f32>, Vec<f32>)>,
}

impl SizeClass {
    fn new(class: u32, label: String, dims: (usize, usize)) -> SizeClass {
        SizeClass {
            class,
            label,
            dims,
            image: OnceCell::new(),
            elements: OnceCell::new(),
            matrices: OnceCell::new(),
        }
    }

    /// An RGBA8 noise image of the class's size.
    fn image(&self) -> &Image {
        self.image.get_or_init(|| {
            let (w, h) = self.dims;
            Image::new_u8(w as u32, h as u32, 4, bench::noise_bytes(w * h * 4, 3))
        })
    }
}

/// What an op plugs into the search.
trait Tunable: Copy + PartialEq + Debug + Display + Serialize {
    fn default_for(limits: &wgpu::Limits) -> Self;
    fn check(&self, limits: &wgpu::Limits) -> Result<()>;
}

impl Tunable for blur::Tunables {
    fn default_for(_: &wgpu::Limits) -> Self {
        blur::Tunables::DEFAULT
    }
    fn check(&self, limits: &wgpu::Limits) -> Result<()> {
        blur::Tunables::check(self, limits)
    }
}

impl Tunable for histogram::Tunables {
    fn default_for(limits: &wgpu::Limits) -> Self {
        histogram::Tunables::default_for(limits)
    }
    fn check(&self, limits: &wgpu::Limits) -> Result<()> {
        histogram::Tunables::check(self, limits)
    }
}

impl Tunable for scan::Tunables {
    fn default_for(_: &wgpu::Limits) -> Self {
        scan::Tunables::DEFAULT
    }
    fn check(&self, limits: &wgpu::Limits) -> Result<()> {
        scan::Tunables::check(self, limits)
    }
}

impl Tunable for matmul::TileConfig {
    fn default_for(limits: &wgpu::Limits) -> Self {
        matmul::TileConfig::for_limits(limits)
    }
    fn check(&self, limits: &wgpu::Limits) -> Result<()> {
        matmul::TileConfig::check(self, limits)
    }
}

/// Powers of two from `lo` to `hi`.
fn pow2(lo: u32, hi: u32) -> impl Iterator<Item = u32> + Clone {
    std::iter::successors(Some(lo), |&v| v.checked_mul(2)).take_while(move |&v| v <= hi)
}

fn max_invocations(limits: &wgpu::Limits) -> u32 {
    limits
        .max_compute_invocations_per_workgroup
        .min(limits.max_compute_workgroup_size_x)
}

/// The result of tuning one op: every trial, and the entry per size class for the cache.
pub struct OpResult {
    pub trials: Vec<Trial>,
    pub entries: Vec<Entry>,
}

/// Tunes `op` on the engine's GPU. `progress` hears what is being measured.
pub fn tune(
    engine: &Engine,
    op: &str,
    level: Level,
    progress: &mut dyn FnMut(&str),
) -> Result<OpResult> {
    let Engine::Gpu(gpu) = engine else {
        bail!("tune measures GPU kernels; the CPU backend has nothing to tune");
    };
    match op {
        "blur" => Search {
            engine,
            gpu,
            op: "blur",
            level,
            stages: blur_stages(),
            verify: &mut |t| verify_blur(engine, t),
            case: &mut |class, stage, t| blur_case(gpu, class, stage, t),
        }
        .run(&blur_classes(level), progress),
        "histogram" => Search {
            engine,
            gpu,
            op: "histogram",
            level,
            stages: histogram_stages(),
            verify: &mut |t| verify_histogram(gpu, t),
            case: &mut |class, _, t| histogram_case(gpu, class, t),
        }
        .run(&image_classes(level), progress),
        "scan" => Search {
            engine,
            gpu,
            op: "scan",
            level,
            stages: scan_stages(),
            verify: &mut |t| verify_scan(engine, t),
            case: &mut |class, _, t| scan_case(gpu, class, t),
        }
        .run(&scan_classes(gpu, level), progress),
        "matmul" => Search {
            engine,
            gpu,
            op: "matmul",
            level,
            stages: matmul_stages(),
            verify: &mut |t| verify_matmul(gpu, t),
            case: &mut |class, _, t| matmul_case(gpu, class, t),
        }
        .run(&matmul_classes(level), progress),
        _ => bail!(crate::UsageError(format!(
            "unknown tune op {op:?} (known: {}, all)",
            OPS.join(", ")
        ))),
    }
}

type CaseFn<'s, 'g, T> = dyn FnMut(&SizeClass, &'static str, &T) -> Result<Case<'g>> + 's;

/// One op's search over its stages and size classes.
struct Search<'s, 'g, T> {
    engine: &'g Engine,
    gpu: &'g Gpu,
    op: &'static str,
    level: Level,
    stages: Vec<Stage<T>>,
    /// Checks a candidate on a small input: `Ok(None)` when it equals the CPU reference,
    /// `Ok(Some(why))` when it does not, `Err` when it cannot run here.
    verify: &'s mut dyn FnMut(&T) -> Result<Option<String>>,
    /// The benchmark case of a size class and stage, shaped by a candidate.
    case: &'s mut CaseFn<'s, 'g, T>,
}

impl<T: Tunable> Search<'_, '_, T> {
    fn run(mut self, classes: &[SizeClass], progress: &mut dyn FnMut(&str)) -> Result<OpResult> {
        let limits = self.gpu.limits.clone();
        let default = T::default_for(&limits);
        // Whether each candidate matched the reference: checked once, in any class.
        let mut verified: HashMap<String, Result<Option<String>, String>> = HashMap::new();
        let mut trials = Vec::new();
        let mut entries = Vec::new();
        let stages = std::mem::take(&mut self.stages);
        for class in classes {
            let mut best = default;
            let mut times = Vec::new();
            for stage in &stages {
                let mut candidates = vec![best, default];
                candidates.extend(
                    (stage.candidates)(&best, &limits, self.level.quick)
                        .into_iter()
                        .filter(|t| t.check(&limits).is_ok()),
                );
                let mut unique: Vec<T> = Vec::new();
                for t in candidates {
                    if !unique.contains(&t) {
                        unique.push(t);
                    }
                }
                let first = trials.len();
                let mut best_ms: Option<f64> = None;
                let mut case_name = String::new();
                for t in &unique {
                    progress(&format!("{} {} {}: {t}", self.op, class.label, stage.name));
                    let key = format!("{t:?}");
                    let check = verified
                        .entry(key)
                        .or_insert_with(|| (self.verify)(t).map_err(|e| format!("{e:#}")))
                        .clone();
                    let mut trial = Trial {
                        op: self.op,
                        size: class.label.clone(),
                        stage: stage.name,
                        candidate: t.to_string(),
                        choice: serde_json::to_value(t)?,
                        default: *t == default,
                        status: Status::Unfit,
                        note: None,
                        median_ms: None,
                        throughput: None,
                        unit: Unit::Gelemps,
                        clock: None,
                        chosen: false,
                    };
                    match check {
                        Err(e) => trial.note = Some(e),
                        Ok(Some(why)) => {
                            trial.status = Status::Wrong;
                            trial.note = Some(why);
                        }
                        Ok(None) => match self.time(class, stage.name, t, best_ms) {
                            Err(e) => trial.note = Some(format!("{e:#}")),
                            Ok((m, full)) => {
                                case_name = m.case.clone();
                                trial.status = if full {
                                    Status::Measured
                                } else {
                                    Status::Dropped
                                };
                                trial.median_ms = Some(m.median_ms);
                                trial.throughput = Some(m.throughput);
                                trial.unit = m.unit;
                                trial.clock = Some(m.clock);
                                if full {
                                    best_ms =
                                        Some(best_ms.map_or(m.median_ms, |b| b.min(m.median_ms)));
                                }
                            }
                        },
                    }
                    trials.push(trial);
                }
                let stage_trials = &mut trials[first..];
                // The incumbent is the stage's first candidate.
                let Some(chosen) = choose(stage_trials, 0) else {
                    bail!(
                        "{} {}: no candidate of stage {} ran correctly, not even the default",
                        self.op,
                        class.label,
                        stage.name
                    );
                };
                stage_trials[chosen].chosen = true;
                best = unique[chosen];
                let default_ms = stage_trials
                    .iter()
                    .find(|t| t.default)
                    .and_then(|t| t.median_ms);
                if let (Some(default_ms), Some(tuned_ms)) =
                    (default_ms, stage_trials[chosen].median_ms)
                {
                    times.push(StageTime {
                        stage: stage.name.to_string(),
                        case: case_name.clone(),
                        default_ms,
                        tuned_ms,
                    });
                }
            }
            // Stages compare candidates timed seconds apart, while a GPU's clocks move (the
            // first cases of a class run on a cold GPU). The last word is a duel on every
            // stage's case, default and choice timed alternately: the choice stays only if it
            // is faster somewhere and slower nowhere, so tuning never slows an op down.
            if best != default {
                progress(&format!(
                    "{} {}: default against {best}",
                    self.op, class.label
                ));
                let mut duel = Vec::new();
                for stage in &stages {
                    if duel.iter().any(|d: &StageTime| d.stage == stage.name) {
                        continue;
                    }
                    let (case, default_ms, tuned_ms) =
                        self.duel(class, stage.name, &default, &best)?;
                    duel.push(StageTime {
                        stage: stage.name.to_string(),
                        case,
                        default_ms,
                        tuned_ms,
                    });
                }
                if !duel_keeps_choice(&duel) {
                    best = default;
                }
                times = duel;
            }
            entries.push(Entry {
                size_class: class.class,
                size: class.label.clone(),
                choice: serde_json::to_value(best)?,
                times,
            });
        }
        Ok(OpResult { trials, entries })
    }

    /// Times the default and `best` on one stage's case, alternately, three rounds each;
    /// returns the case and the fastest median of each (the one the clocks disturbed least).
    fn duel(
        &mut self,
        class: &SizeClass,
        stage: &'static str,
        default: &T,
        best: &T,
    ) -> Result<(String, f64, f64)> {
        let mut d_case = (self.case)(class, stage, default)?;
        let mut b_case = (self.case)(class, stage, best)?;
        let (mut d_ms, mut b_ms) = (f64::INFINITY, f64::INFINITY);
        let mut name = String::new();
        for _ in 0..3 {
            let d = bench::measure(self.engine, &mut d_case, self.level.full())?;
            let b = bench::measure(self.engine, &mut b_case, self.level.full())?;
            d_ms = d_ms.min(d.median_ms);
            b_ms = b_ms.min(b.median_ms);
            name = d.case;
        }
        Ok((name, d_ms, b_ms))
    }

    /// Screens a candidate, then measures it in full unless it is clearly slower than
    /// `best_ms`. Returns the measurement and whether it is the full one.
    fn time(
        &mut self,
        class: &SizeClass,
        stage: &'static str,
        t: &T,
        best_ms: Option<f64>,
    ) -> Result<(Measurement, bool)> {
        let mut case = (self.case)(class, stage, t)?;
        let screen = bench::measure(self.engine, &mut case, self.level.screen())?;
        if best_ms.is_some_and(|b| screen.median_ms > b * DROP_FACTOR) {
            return Ok((screen, false));
        }
        Ok((
            bench::measure(self.engine, &mut case, self.level.full())?,
            true,
        ))
    }
}

fn image_class(w: usize, h: usize) -> SizeClass {
    let class = ((w * h) as f64).log2().round() as u32;
    SizeClass::new(class, format!("{w}x{h}"), (w, h))
}

/// Image sizes: 2^16 pixels quick; 2^18, 2^21 and 2^23 (about 4K) in full.
fn image_classes(level: Level) -> Vec<SizeClass> {
    if level.quick {
        vec![image_class(256, 256)]
    } else {
        vec![
            image_class(512, 512),
            image_class(2048, 1024),
            image_class(4096, 2048),
        ]
    }
}

// ---- blur ------------------------------------------------------------------------------

fn blur_classes(level: Level) -> Vec<SizeClass> {
    image_classes(level)
}

/// The filters blur is timed and checked with: box r = 15 for the box stages, gaussian
/// sigma 5 (r = 15) for the gaussian one.
fn blur_params(stage: &str) -> blur::BlurParams {
    if stage == "gaussian" {
        blur::BlurParams::new(blur::Kind::Gaussian { sigma: 5.0 }, 15, 1)
    } else {
        blur::BlurParams::new(blur::Kind::Box, 15, 1)
    }
}

fn blur_stages() -> Vec<Stage<blur::Tunables>> {
    vec![
        Stage {
            name: "box shape",
            candidates: |best, limits, quick| {
                let shapes: Vec<(u32, u32)> = if quick {
                    vec![(16, 8), (32, 16)]
                } else {
                    let max = max_invocations(limits);
                    pow2(4, 128)
                        .flat_map(|rows| pow2(2, 32).map(move |tpl| (rows, tpl)))
                        .filter(|&(r, t)| (64..=max).contains(&(r * t)))
                        .collect()
                };
                shapes
                    .into_iter()
                    .map(|(box_rows, box_tpl)| blur::Tunables {
                        box_rows,
                        box_tpl,
                        ..*best
                    })
                    .collect()
            },
        },
        Stage {
            name: "box ppt",
            candidates: |best, _, quick| {
                let ppts: &[u32] = if quick { &[2] } else { &[1, 2, 4, 8] };
                ppts.iter()
                    .map(|&box_ppt| blur::Tunables { box_ppt, ..*best })
                    .collect()
            },
        },
        Stage {
            name: "gaussian",
            candidates: |best, limits, quick| {
                let shapes: Vec<(u32, u32)> = if quick {
                    vec![(4, 32), (8, 16)]
                } else {
                    let max = max_invocations(limits);
                    pow2(1, 16)
                        .flat_map(|rows| pow2(8, 128).map(move |tpl| (rows, tpl)))
                        .filter(|&(r, t)| (32..=max).contains(&(r * t)))
                        .collect()
                };
                shapes
                    .into_iter()
                    .map(|(gauss_rows, gauss_tpl)| blur::Tunables {
                        gauss_rows,
                        gauss_tpl,
                        ..*best
                    })
                    .collect()
            },
        },
    ]
}

/// Both filters on a 300x45 RGBA8 image (lines longer than one segment, partial chunks),
/// bit for bit against the CPU reference.
fn verify_blur(engine: &Engine, t: &blur::Tunables) -> Result<Option<String>> {
    let img = Image::new_u8(300, 45, 4, bench::noise_bytes(300 * 45 * 4, 7));
    for stage in ["box shape", "gaussian"] {
        let params = blur_params(stage);
        let options = blur::GpuOptions {
            tunables: *t,
            // The shapes belong to the workgroup kernels, whatever the adapter's layout.
            layout: Some(blur::Layout::Workgroup),
            ..blur::GpuOptions::DEFAULT
        };
        let got = blur::blur_with(engine, &img, &params, options, &mut Timings::default())?;
        if got.samples != blur::blur_cpu(&img, &params)?.samples {
            return Ok(Some(format!("{stage}: differs from the CPU reference")));
        }
    }
    Ok(None)
}

fn blur_case<'g>(
    gpu: &'g Gpu,
    class: &SizeClass,
    stage: &'static str,
    t: &blur::Tunables,
) -> Result<Case<'g>> {
    let (w, h) = class.dims;
    let img = class.image();
    let params = blur_params(stage);
    let options = blur::GpuOptions {
        tunables: *t,
        layout: Some(blur::Layout::Workgroup),
        ..blur::GpuOptions::DEFAULT
    };
    let plan = blur::BlurPlan::new(gpu, img, &params, options)?;
    let name = match params.kind {
        blur::Kind::Box => format!("{w}x{h} RGBA8 box r=15"),
        blur::Kind::Gaussian { .. } => format!("{w}x{h} RGBA8 gaussian sigma=5"),
    };
    Ok(Case::gpu(
        "blur",
        name,
        Unit::Gpixps,
        (w * h) as f64,
        move |b| plan.record(b),
    ))
}

// ---- histogram -------------------------------------------------------------------------

fn histogram_stages() -> Vec<Stage<histogram::Tunables>> {
    vec![
        Stage {
            name: "chunk",
            candidates: |best, limits, quick| {
                let shapes: Vec<(u32, u32)> = if quick {
                    vec![(256, 4)]
                } else {
                    pow2(64, max_invocations(limits))
                        .flat_map(|wg| pow2(1, 16).map(move |c| (wg, c)))
                        .collect()
                };
                shapes
                    .into_iter()
                    .map(|(chunk_wg_size, max_copies)| histogram::Tunables {
                        chunk_wg_size,
                        max_copies,
                        ..*best
                    })
                    .collect()
            },
        },
        Stage {
            name: "tiles",
            candidates: |best, _, quick| {
                let tiles: Vec<u32> = if quick {
                    vec![64]
                } else {
                    pow2(32, 2048).collect()
                };
                tiles
                    .into_iter()
                    .map(|t| histogram::Tunables {
                        target_tiles: t as u64,
                        ..*best
                    })
                    .collect()
            },
        },
        Stage {
            name: "reduce",
            candidates: |best, limits, quick| {
                let shapes: Vec<(u32, u32)> = if quick {
                    vec![(128, 8)]
                } else {
                    pow2(64, max_invocations(limits).min(1024))
                        .flat_map(|wg| pow2(4, 64.min(wg)).map(move |e| (wg, e)))
                        .collect()
                };
                shapes
                    .into_iter()
                    .map(|(reduce_wg_size, entries_per_wg)| histogram::Tunables {
                        reduce_wg_size,
                        entries_per_wg,
                        ..*best
                    })
                    .collect()
            },
        },
        Stage {
            name: "fan-in",
            candidates: |best, _, quick| {
                let fans: &[u32] = if quick { &[] } else { &[16, 64, 256, 1024] };
                fans.iter()
                    .map(|&fan_in| histogram::Tunables { fan_in, ..*best })
                    .collect()
            },
        },
    ]
}

/// A 333x129 RGBA8 image, 256 bins of red, green, blue and luminance, count for count
/// against the CPU reference.
fn verify_histogram(gpu: &Gpu, t: &histogram::Tunables) -> Result<Option<String>> {
    let img = Image::new_u8(333, 129, 4, bench::noise_bytes(333 * 129 * 4, 11));
    let channels = histogram::Channels::of(4, false);
    let mut hg = histogram::HistogramGpu::new(gpu, 256);
    hg.set_tunables(*t);
    let got = hg.histogram(&img, channels, &mut Timings::default())?;
    let want = histogram::histogram_cpu(&img, channels, 256);
    Ok((got.counts != want.counts).then(|| "counts differ from the CPU reference".into()))
}

fn histogram_case<'g>(
    gpu: &'g Gpu,
    class: &SizeClass,
    t: &histogram::Tunables,
) -> Result<Case<'g>> {
    let (w, h) = class.dims;
    let channels = histogram::Channels::of(4, false);
    histogram::gpu_case(
        gpu,
        format!("{w}x{h} RGBA8 random"),
        class.image(),
        channels,
        256,
        *t,
    )
}

// ---- scan ------------------------------------------------------------------------------

/// Elements: 2^16 quick; 2^16, 2^20, 2^24 and (where a 1 GiB buffer fits) 2^28 in full.
fn scan_classes(gpu: &Gpu, level: Level) -> Vec<SizeClass> {
    let logs: Vec<u32> = if level.quick {
        vec![16]
    } else if gpu.limits.max_buffer_size >= 1 << 30 {
        vec![16, 20, 24, 28]
    } else {
        vec![16, 20, 24]
    };
    logs.into_iter()
        .map(|l| SizeClass::new(l, format!("2^{l}"), (1 << l, 1)))
        .collect()
}

fn scan_stages() -> Vec<Stage<scan::Tunables>> {
    vec![Stage {
        name: "shape",
        candidates: |_, limits, quick| {
            let shapes: Vec<(u32, u32)> = if quick {
                vec![(128, 4), (512, 2)]
            } else {
                pow2(32, max_invocations(limits))
                    .flat_map(|wg| pow2(1, 8).map(move |v| (wg, v)))
                    .collect()
            };
            shapes
                .into_iter()
                .map(|(wg_size, vec_per_thread)| scan::Tunables {
                    wg_size,
                    vec_per_thread,
                })
                .collect()
        },
    }]
}

/// An exclusive u32 sum of 2.5 tiles in segments of two tiles (two levels, two chained
/// segments, a partial tile), element for element against the CPU reference.
fn verify_scan(engine: &Engine, t: &scan::Tunables) -> Result<Option<String>> {
    let opts = scan::ScanOptions {
        tunables: *t,
        ..scan::ScanOptions::default()
    };
    let tile = opts.tile();
    let opts = scan::ScanOptions {
        segment_len: Some(2 * tile),
        ..opts
    };
    let data: Vec<u32> = bench::noise_bytes(5 * tile / 2 + 3, 13)
        .into_iter()
        .map(u32::from)
        .collect();
    let got = scan::scan(engine, &data, &opts)?;
    let want = scan::scan_cpu(&data, scan::Op::Sum, scan::Mode::Exclusive);
    Ok((got != want).then(|| "sums differ from the CPU reference".into()))
}

fn scan_case<'g>(gpu: &'g Gpu, class: &SizeClass, t: &scan::Tunables) -> Result<Case<'g>> {
    let n = class.dims.0;
    let opts = scan::ScanOptions {
        tunables: *t,
        ..scan::ScanOptions::default()
    };
    let plan = scan::ScanPlan::new::<u32>(gpu, n, &opts)?;
    if plan.layout().passes() > bench::MAX_PASSES as usize {
        bail!("more passes than one timed batch holds");
    }
    let data = class
        .elements
        .get_or_init(|| (0..n as u32).map(|i| i % 1000).collect());
    plan.upload(gpu, data);
    Ok(Case::gpu(
        "scan",
        format!("u32 sum {}", class.label),
        Unit::Gelemps,
        n as f64,
        move |b| plan.record(b),
    ))
}

// ---- matmul ----------------------------------------------------------------------------

/// n^3 products: 128 quick; 256, 1024 and 4096 in full.
fn matmul_classes(level: Level) -> Vec<SizeClass> {
    let sizes: &[usize] = if level.quick {
        &[128]
    } else {
        &[256, 1024, 4096]
    };
    sizes
        .iter()
        .map(|&n| SizeClass::new(n.ilog2(), format!("{n}^3"), (n, n)))
        .collect()
}

fn matmul_stages() -> Vec<Stage<matmul::TileConfig>> {
    vec![
        Stage {
            name: "tile",
            candidates: |best, _, quick| {
                let shapes: Vec<(u32, u32, u32, u32)> = if quick {
                    vec![(64, 64, 4, 4), (128, 64, 8, 4)]
                } else {
                    pow2(32, 256)
                        .flat_map(|bm| pow2(32, 256).map(move |bn| (bm, bn)))
                        .flat_map(|(bm, bn)| {
                            [(4, 4), (4, 8), (8, 4), (8, 8)].map(|(tm, tn)| (bm, bn, tm, tn))
                        })
                        // At least 32 invocations.
                        .filter(|&(bm, bn, tm, tn)| (bm / tm) * (bn / tn) >= 32)
                        .collect()
                };
                shapes
                    .into_iter()
                    .map(|(bm, bn, tm, tn)| matmul::TileConfig {
                        bm,
                        bn,
                        tm,
                        tn,
                        ..*best
                    })
                    .collect()
            },
        },
        Stage {
            name: "depth",
            candidates: |best, _, quick| {
                let bks: &[u32] = if quick { &[16] } else { &[4, 8, 16, 32] };
                bks.iter()
                    .map(|&bk| matmul::TileConfig { bk, ..*best })
                    .collect()
            },
        },
        Stage {
            name: "order",
            candidates: |best, _, quick| {
                let groups: &[u32] = if quick { &[] } else { &[1, 4, 8, 16] };
                groups
                    .iter()
                    .map(|&group_m| matmul::TileConfig { group_m, ..*best })
                    .collect()
            },
        },
    ]
}

/// A 67x45x37 f32 product (no dimension a multiple of a tile), every element within the
/// documented bound of the exact product.
fn verify_matmul(gpu: &Gpu, t: &matmul::TileConfig) -> Result<Option<String>> {
    let (m, n, k) = (67, 45, 37);
    let a: Vec<f32> = bench::noise_bytes(m * k, 17)
        .into_iter()
        .map(|v| v as f32 / 128.0 - 1.0)
        .collect();
    let b: Vec<f32> = bench::noise_bytes(k * n, 19)
        .into_iter()
        .map(|v| v as f32 / 128.0 - 1.0)
        .collect();
    let p = matmul::Matmul {
        a: &a,
        b: &b,
        dims: matmul::Dims { m, n, k },
        trans_a: false,
        trans_b: false,
        precision: matmul::Precision::F32,
    };
    let options = matmul::Options {
        tile: *t,
        ..matmul::Options::for_gpu(gpu)
    };
    let got = matmul::matmul_with(gpu, &p, options)?;
    let (want, abs) = matmul::reference(&p);
    let bad = (0..m * n).find(|&i| {
        let diff = (got[i] as f64 - want[i]).abs();
        // NaN is a mismatch.
        !matches!(
            diff.partial_cmp(&matmul::error_bound(k, abs[i])),
            Some(std::cmp::Ordering::Less | std::cmp::Ordering::Equal)
        )
    });
    Ok(bad.map(|i| {
        format!(
            "C[{}, {}] = {} is outside the bound of the reference {}",
            i / n,
            i % n,
            got[i],
            want[i]
        )
    }))
}

fn matmul_case<'g>(gpu: &'g Gpu, class: &SizeClass, t: &matmul::TileConfig) -> Result<Case<'g>> {
    let n = class.dims.0;
    let (a, b) = class.matrices.get_or_init(|| {
        let values = |seed| {
            bench::noise_bytes(n * n, seed)
                .into_iter()
                .map(|v| v as f32 / 128.0 - 1.0)
                .collect::<Vec<f32>>()
        };
        (values(23), values(29))
    });
    let dims = matmul::Dims { m: n, n, k: n };
    let p = matmul::Matmul {
        a,
        b,
        dims,
        trans_a: false,
        trans_b: false,
        precision: matmul::Precision::F32,
    };
    let options = matmul::Options {
        tile: *t,
        ..matmul::Options::for_gpu(gpu)
    };
    let plan = matmul::MatmulPlan::new(gpu, &p, options)?;
    Ok(Case::gpu(
        "matmul",
        format!("f32 {}", class.label),
        Unit::Tflops,
        dims.flops(),
        move |b| plan.record(b),
    ))
}

#[cfg(test)]
mod tests {

    fn time(default_ms: f64, tuned_ms: f64) -> StageTime {
        StageTime {
            stage: "s".into(),
            case: "c".into(),
            default_ms,
            tuned_ms,
        }
    }

    // Tuning must never make an op slower: a choice that loses anywhere is undone.
    #[test]
    fn duel_keeps_a_choice_only_if_faster_somewhere_and_slower_nowhere() {
        assert!(duel_keeps_choice(&[time(1.0, 0.9)]));
        assert!(duel_keeps_choice(&[time(1.0, 0.9), time(2.0, 2.01)]));
        assert!(!duel_keeps_choice(&[time(1.0, 0.99)]), "within the margin");
        assert!(
            !duel_keeps_choice(&[time(1.0, 0.5), time(2.0, 2.1)]),
            "slower on one case"
        );
        assert!(!duel_keeps_choice(&[]));
    }
    use super::*;

    fn trial(status: Status, ms: Option<f64>) -> Trial {
        Trial {
            op: "scan",
            size: "2^16".into(),
            stage: "shape",
            candidate: String::new(),
            choice: serde_json::Value::Null,
            default: false,
            status,
            note: None,
            median_ms: ms,
            throughput: None,
            unit: Unit::Gelemps,
            clock: None,
            chosen: false,
        }
    }

    // A fast wrong kernel must never enter the cache, whatever its time.
    #[test]
    fn wrong_unfit_and_dropped_candidates_never_win() {
        let trials = [
            trial(Status::Measured, Some(1.0)),
            trial(Status::Wrong, Some(0.1)),
            trial(Status::Unfit, Some(0.2)),
            trial(Status::Dropped, Some(0.3)),
            trial(Status::Measured, Some(0.5)),
        ];
        assert_eq!(choose(&trials, 0), Some(4));
        let only_bad = [trial(Status::Wrong, Some(0.1)), trial(Status::Unfit, None)];
        assert_eq!(choose(&only_bad, 0), None);
    }

    #[test]
    fn the_incumbent_stays_unless_clearly_beaten() {
        let close = [
            trial(Status::Measured, Some(1.0)),
            trial(Status::Measured, Some(0.99)),
        ];
        assert_eq!(choose(&close, 0), Some(0));
        let clear = [
            trial(Status::Measured, Some(1.0)),
            trial(Status::Measured, Some(0.9)),
        ];
        assert_eq!(choose(&clear, 0), Some(1));
        // An incumbent that did not run loses to any measured candidate.
        let gone = [
            trial(Status::Unfit, None),
            trial(Status::Measured, Some(2.0)),
        ];
        assert_eq!(choose(&gone, 0), Some(1));
    }

    #[test]
    fn candidate_spaces_fit_the_limits_and_hold_the_defaults() {
        let limits = wgpu::Limits::default();
        let n: usize = blur_stages()
            .iter()
            .map(|s| (s.candidates)(&blur::Tunables::DEFAULT, &limits, false).len())
            .sum();
        assert!(n > 20, "{n}");
        for s in scan_stages() {
            let c = (s.candidates)(&scan::Tunables::DEFAULT, &limits, false);
            assert!(c.contains(&scan::Tunables::DEFAULT));
            assert!(c.iter().all(|t| t.wg_size <= 256));
        }
        assert_eq!(pow2(4, 32).collect::<Vec<_>>(), [4, 8, 16, 32]);
    }
}
