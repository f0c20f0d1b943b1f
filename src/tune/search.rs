//! The search every op's tuning runs: stages of candidates per size class, each checked
//! against the CPU reference before it is timed, then a duel of the choice against the
//! default (see the module doc of [`crate::tune`]).

use std::collections::HashMap;

use anyhow::{bail, Result};

use super::{choose, duel_keeps_choice, Entry, Level, OpResult, SizeClass, Stage, StageTime};
use super::{Status, Trial, Tunable, DROP_FACTOR};
use crate::bench::{self, Case, Measurement, Unit};
use crate::gpu::{Engine, Gpu};

type CaseFn<'s, 'g, T> = dyn FnMut(&SizeClass, &'static str, &T) -> Result<Case<'g>> + 's;

/// The GPU an op's `tune` measures: tuning has nothing to do on the CPU engine.
pub fn gpu_of(engine: &Engine) -> anyhow::Result<&Gpu> {
    match engine {
        Engine::Gpu(gpu) => Ok(gpu),
        Engine::Cpu => {
            anyhow::bail!("tune measures GPU kernels; the CPU backend has nothing to tune")
        }
    }
}

/// What an op's tuning is made of: its size classes, its stages of candidates, the check of
/// a candidate against the CPU reference and the timed case. [`tune`] runs the one search
/// over it; the registry's `tune` is `tune::<the op's impl>`.
pub trait OpTuning {
    /// The op's shape, which the search chooses.
    type Tunables: Tunable;
    /// The sizes measured at `level` on `gpu`.
    fn classes(gpu: &Gpu, level: Level) -> Vec<SizeClass>;
    /// The stages, each a set of candidates around the best so far.
    fn stages() -> Vec<Stage<Self::Tunables>>;
    /// A candidate on a small input: `Ok(None)` when it equals the CPU reference,
    /// `Ok(Some(why))` when it does not, `Err` when it cannot run here.
    fn verify(engine: &Engine, gpu: &Gpu, t: &Self::Tunables) -> Result<Option<String>>;
    /// The benchmark case of a size class and stage, shaped by a candidate.
    fn case<'g>(
        gpu: &'g Gpu,
        class: &SizeClass,
        stage: &'static str,
        t: &Self::Tunables,
    ) -> Result<Case<'g>>;
}

/// `gpukit tune OP`: the search over `O` on `engine` (a GPU), `op` its registry name.
pub fn tune<O: OpTuning>(
    op: &'static str,
    engine: &Engine,
    level: Level,
    progress: &mut dyn FnMut(&str),
) -> Result<OpResult> {
    let gpu = gpu_of(engine)?;
    Search {
        engine,
        gpu,
        op,
        level,
        stages: O::stages(),
        verify: &mut |t| O::verify(engine, gpu, t),
        case: &mut |class, stage, t| O::case(gpu, class, stage, t),
    }
    .run(&O::classes(gpu, level), progress)
}

/// One op's search over its stages and size classes.
pub struct Search<'s, 'g, T> {
    pub engine: &'g Engine,
    pub gpu: &'g Gpu,
    pub op: &'static str,
    pub level: Level,
    pub stages: Vec<Stage<T>>,
    /// Checks a candidate on a small input: `Ok(None)` when it equals the CPU reference,
    /// `Ok(Some(why))` when it does not, `Err` when it cannot run here.
    pub verify: &'s mut dyn FnMut(&T) -> Result<Option<String>>,
    /// The benchmark case of a size class and stage, shaped by a candidate.
    pub case: &'s mut CaseFn<'s, 'g, T>,
}

/// Whether each candidate matched the reference (by its `Debug` text): checked once, in
/// any class.
type Verified = HashMap<String, Result<Option<String>, String>>;

impl<T: Tunable> Search<'_, '_, T> {
    /// Runs every stage on every class; `progress` hears what is being measured.
    pub fn run(
        mut self,
        classes: &[SizeClass],
        progress: &mut dyn FnMut(&str),
    ) -> Result<OpResult> {
        let default = T::default_for(&self.gpu.limits);
        let mut verified = Verified::new();
        let mut trials = Vec::new();
        let mut entries = Vec::new();
        let stages = std::mem::take(&mut self.stages);
        for class in classes {
            let mut best = default;
            let mut times = Vec::new();
            for stage in &stages {
                let first = trials.len();
                let unique = self.candidates(stage, &best, &default);
                let case_name = self.run_stage(
                    class,
                    stage,
                    &unique,
                    &default,
                    &mut verified,
                    &mut trials,
                    progress,
                )?;
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
                        case: case_name,
                        default_ms,
                        tuned_ms,
                    });
                }
            }
            if best != default {
                progress(&format!(
                    "{} {}: default against {best}",
                    self.op, class.label
                ));
                let duel = self.final_duel(class, &stages, &default, &best)?;
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

    /// The incumbent, the default, then the stage's candidates that fit this adapter, each
    /// once.
    fn candidates(&self, stage: &Stage<T>, best: &T, default: &T) -> Vec<T> {
        let limits = &self.gpu.limits;
        let mut candidates = vec![*best, *default];
        candidates.extend(
            (stage.candidates)(best, limits, self.level.quick)
                .into_iter()
                .filter(|t| t.check(limits).is_ok()),
        );
        let mut unique: Vec<T> = Vec::new();
        for t in candidates {
            if !unique.contains(&t) {
                unique.push(t);
            }
        }
        unique
    }

    /// Checks and times each of `unique` on `class`, adding one trial each to `trials`;
    /// returns the name of the stage's case.
    #[expect(
        clippy::too_many_arguments,
        reason = "the search's state, passed down once"
    )]
    fn run_stage(
        &mut self,
        class: &SizeClass,
        stage: &Stage<T>,
        unique: &[T],
        default: &T,
        verified: &mut Verified,
        trials: &mut Vec<Trial>,
        progress: &mut dyn FnMut(&str),
    ) -> Result<String> {
        let mut best_ms: Option<f64> = None;
        let mut case_name = String::new();
        for t in unique {
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
                default: t == default,
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
                            best_ms = Some(best_ms.map_or(m.median_ms, |b| b.min(m.median_ms)));
                        }
                    }
                },
            }
            trials.push(trial);
        }
        Ok(case_name)
    }

    /// Stages compare candidates timed seconds apart, while a GPU's clocks move (the first
    /// cases of a class run on a cold GPU). The last word is a duel on every stage's case,
    /// default and choice timed alternately: the choice stays only if it is faster somewhere
    /// and slower nowhere, so tuning never slows an op down.
    fn final_duel(
        &mut self,
        class: &SizeClass,
        stages: &[Stage<T>],
        default: &T,
        best: &T,
    ) -> Result<Vec<StageTime>> {
        let mut duel = Vec::new();
        for stage in stages {
            if duel.iter().any(|d: &StageTime| d.stage == stage.name) {
                continue;
            }
            let (case, default_ms, tuned_ms) = self.duel(class, stage.name, default, best)?;
            duel.push(StageTime {
                stage: stage.name.to_string(),
                case,
                default_ms,
                tuned_ms,
            });
        }
        Ok(duel)
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

/// For an op's tests: every stage's candidates around `T`'s default, quick or full, hold the
/// default and pass its limits check on the WebGPU default limits.
#[cfg(test)]
pub(crate) fn assert_stages_hold_the_default<O: OpTuning>() {
    let limits = wgpu::Limits::default();
    let default = O::Tunables::default_for(&limits);
    for quick in [false, true] {
        for s in O::stages() {
            let c = (s.candidates)(&default, &limits, quick);
            assert!(c.contains(&default), "{} quick {quick}", s.name);
            assert!(c.iter().all(|t| t.check(&limits).is_ok()), "{}", s.name);
        }
    }
}
