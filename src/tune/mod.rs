//! `gpukit tune`: measures each op's candidate workgroup sizes, tile shapes and work per
//! invocation on this adapter, per size class, and keeps the fastest in a cache that the
//! ops read ([`choice`]). Every candidate is first checked against the CPU reference on a
//! small input; a wrong one is never timed, so it can never win. docs/tune.md explains it.
//!
//! A search runs in stages (coordinate search): each stage varies a few fields around the
//! best so far, over powers of two within the adapter's limits, and always re-times the
//! incumbent and the default, so every stage's choice is measured against them on the same
//! case. Candidates are screened with a few runs first; those clearly slower than the best
//! so far are dropped without the full measurement.
//!
//! This module holds only what is common to every op: the search ([`Search`]), the
//! verdicts, the cache and its lookup. Each op's stages, size classes, checks and cases live
//! beside it (`src/ops/<op>/tune.rs`) and are listed in [`crate::ops::REGISTRY`].

pub mod cache;
mod lookup;
mod search;
#[cfg(test)]
pub(crate) use search::assert_stages_hold_the_default;

use std::any::Any;
use std::cell::OnceCell;
use std::fmt::{Debug, Display};
use std::time::Duration;

use anyhow::Result;
use serde::Serialize;

use crate::bench::{self, Clock, Config, Unit};
use crate::io::image::Image;
pub use cache::{Cache, Entry, StageTime};
pub use lookup::{choice, Settings, Source, Tuned};
pub use search::{gpu_of, tune, OpTuning, Search};

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

    pub(crate) fn screen(self) -> Config {
        Config {
            warmup: 1,
            warmup_time: self.warmup_time(),
            reps: 3,
            breakdown: false,
        }
    }

    pub(crate) fn full(self) -> Config {
        Config {
            warmup: if self.quick { 1 } else { 3 },
            warmup_time: self.warmup_time(),
            reps: if self.quick { 5 } else { 15 },
            breakdown: false,
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

/// One stage of a search: the candidates it tries around the best so far (from the best,
/// the adapter's limits, and whether the tune is quick).
pub struct Stage<T> {
    pub name: &'static str,
    pub candidates: fn(&T, &wgpu::Limits, bool) -> Vec<T>,
}

/// A size class of an op: round(log2) of its size, and the size in words.
pub struct SizeClass {
    pub class: u32,
    pub label: String,
    /// The op's size parameter (image side lengths, elements, matmul n).
    pub dims: (usize, usize),
    /// The op's benchmark input, made once for all its candidates.
    input: OnceCell<Box<dyn Any>>,
}

impl SizeClass {
    pub fn new(class: u32, label: String, dims: (usize, usize)) -> SizeClass {
        SizeClass {
            class,
            label,
            dims,
            input: OnceCell::new(),
        }
    }

    /// The class's input, made by `make` the first time it is asked for.
    pub fn input<T: 'static>(&self, make: impl FnOnce() -> T) -> &T {
        self.input
            .get_or_init(|| Box::new(make()))
            .downcast_ref()
            .expect("one input type per size class")
    }

    /// An RGBA8 noise image of the class's size.
    pub fn image(&self) -> &Image {
        self.input(|| {
            let (w, h) = self.dims;
            Image::new_u8(w as u32, h as u32, 4, bench::noise_bytes(w * h * 4, 3))
        })
    }
}

/// What an op's tunables must offer the search.
pub trait Tunable: Copy + PartialEq + Debug + Display + Serialize {
    fn default_for(limits: &wgpu::Limits) -> Self;
    fn check(&self, limits: &wgpu::Limits) -> Result<()>;
}

/// Powers of two from `lo` to `hi`.
pub fn pow2(lo: u32, hi: u32) -> impl Iterator<Item = u32> + Clone {
    std::iter::successors(Some(lo), |&v| v.checked_mul(2)).take_while(move |&v| v <= hi)
}

/// A 1-D workgroup size `wg` a tuner may try: a power of two from 32 (a warp) to the
/// adapter's [`max_invocations`]; the error names `what` ("compare", "encode huffman").
pub fn check_workgroup(what: &str, wg: u32, limits: &wgpu::Limits) -> Result<()> {
    let max = max_invocations(limits);
    if !wg.is_power_of_two() || !(32..=max).contains(&wg) {
        anyhow::bail!("{what} workgroup size {wg} is not a power of two from 32 to {max}");
    }
    Ok(())
}

/// The most invocations of a 1-D workgroup on an adapter with `limits`.
pub fn max_invocations(limits: &wgpu::Limits) -> u32 {
    limits
        .max_compute_invocations_per_workgroup
        .min(limits.max_compute_workgroup_size_x)
}

/// The result of tuning one op: every trial, and the entry per size class for the cache.
pub struct OpResult {
    pub trials: Vec<Trial>,
    pub entries: Vec<Entry>,
}

fn image_class(w: usize, h: usize) -> SizeClass {
    let class = ((w * h) as f64).log2().round() as u32;
    SizeClass::new(class, format!("{w}x{h}"), (w, h))
}

/// Image sizes: 2^16 pixels quick; 2^18, 2^21 and 2^23 (about 4K) in full.
pub fn image_classes(level: Level) -> Vec<SizeClass> {
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
    fn powers_of_two() {
        assert_eq!(pow2(4, 32).collect::<Vec<_>>(), [4, 8, 16, 32]);
    }
}
