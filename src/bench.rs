//! The benchmark harness behind `gpukit bench`: synthetic inputs built by each op, warm-up,
//! repeated runs timed with timestamp queries (wall time where the adapter has none), median
//! and spread, and throughput in the op's natural unit.

use std::time::{Duration, Instant};

use anyhow::{bail, Result};
use serde::Serialize;

use crate::gpu::{span_ns, Batch, Engine, Gpu, PassTime, PassTimer};

/// The unit an op's throughput is given in.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum Unit {
    #[serde(rename = "GB/s")]
    GBps,
    #[serde(rename = "Gpix/s")]
    Gpixps,
    #[serde(rename = "Gelem/s")]
    Gelemps,
    #[serde(rename = "TFLOP/s")]
    Tflops,
}

impl Unit {
    pub fn label(self) -> &'static str {
        match self {
            Unit::GBps => "GB/s",
            Unit::Gpixps => "Gpix/s",
            Unit::Gelemps => "Gelem/s",
            Unit::Tflops => "TFLOP/s",
        }
    }

    /// Throughput of `work` units (bytes, pixels, elements, flops) in `seconds`.
    fn rate(self, work: f64, seconds: f64) -> f64 {
        let scale = match self {
            Unit::Tflops => 1e12,
            _ => 1e9,
        };
        work / seconds / scale
    }
}

/// The most passes one GPU case may record: passes past it would go untimed and shorten the
/// measured span, so ops keep their cases within it.
pub const MAX_PASSES: u32 = 256;

enum Runner<'a> {
    Gpu(Box<dyn FnMut(&mut Batch) + 'a>),
    Cpu(Box<dyn FnMut() + 'a>),
}

/// One benchmark case: an op on one synthetic input, ready to run many times.
pub struct Case<'a> {
    pub op: &'static str,
    pub name: String,
    pub unit: Unit,
    /// Work per run in the unit's base (bytes, pixels, elements or flops).
    pub work: f64,
    runner: Runner<'a>,
}

impl<'a> Case<'a> {
    /// A case that records its passes into a batch; timed on the GPU.
    pub fn gpu(
        op: &'static str,
        name: String,
        unit: Unit,
        work: f64,
        f: impl FnMut(&mut Batch) + 'a,
    ) -> Self {
        Case {
            op,
            name,
            unit,
            work,
            runner: Runner::Gpu(Box::new(f)),
        }
    }

    /// A case on the CPU backend; timed by the wall clock.
    pub fn cpu(
        op: &'static str,
        name: String,
        unit: Unit,
        work: f64,
        f: impl FnMut() + 'a,
    ) -> Self {
        Case {
            op,
            name,
            unit,
            work,
            runner: Runner::Cpu(Box::new(f)),
        }
    }
}

/// `n` bytes of deterministic noise (xorshift32), the synthetic image data of the image
/// benchmarks: no pass can skip work on it, and every run measures the same input.
pub fn noise_bytes(n: usize, seed: u32) -> Vec<u8> {
    let mut state = seed | 1;
    (0..n)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 17;
            state ^= state << 5;
            (state >> 24) as u8
        })
        .collect()
}

/// The `gpukit bench` flags that size some ops' cases; each op reads what concerns it.
#[derive(Clone, Copy, Debug)]
pub struct Sizes {
    /// Bytes of the `copy` case (capped at the adapter's largest storage binding).
    pub copy_bytes: u64,
    /// N of the `matmul` cases.
    pub matmul: usize,
    /// The larger `scan` case is 2^N elements.
    pub scan_max_log2: u32,
}

/// How many runs to make.
#[derive(Clone, Copy, Debug)]
pub struct Config {
    /// Untimed runs: at least `warmup`, and more until `warmup_time` has passed.
    pub warmup: u32,
    pub warmup_time: Duration,
    pub reps: u32,
    /// Whether a case of more than one dispatch runs `reps` times again, each dispatch a
    /// compute pass of its own, for the time of each (`Measurement::passes`): `gpukit
    /// bench`'s table and JSON; `tune` needs the totals only.
    pub breakdown: bool,
}

/// Runs `run` as `config`'s warm-up says. The time matters more than the count: GPUs lower
/// their clocks within a fraction of a second of idling (an H200 went from 1980 to 615 MHz
/// while a bench case built its 1 GiB input on the CPU) and take about as long to raise
/// them, while three runs of a 1 ms kernel are over in 3 ms: without a timed warm-up that
/// case measured 3.7 ms for what takes 1.2.
fn warm_up(config: Config, mut run: impl FnMut() -> Result<()>) -> Result<()> {
    let start = Instant::now();
    let mut runs = 0;
    while runs < config.warmup || start.elapsed() < config.warmup_time {
        run()?;
        runs += 1;
    }
    Ok(())
}

/// Where a measurement's time came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Clock {
    /// GPU timestamp queries: first pass start to last pass end.
    GpuTimestamps,
    /// Wall time around submit-and-wait (the adapter has no timestamp queries).
    Wall,
    /// Wall time of the CPU backend.
    CpuWall,
}

/// The result of one case. Documented in docs/formats.md.
#[derive(Clone, Debug, Serialize)]
pub struct Measurement {
    pub op: &'static str,
    pub case: String,
    pub clock: Clock,
    pub reps: u32,
    pub median_ms: f64,
    pub min_ms: f64,
    pub max_ms: f64,
    /// Median absolute deviation over the median, in percent.
    pub spread_pct: f64,
    pub unit: Unit,
    /// Throughput at the median time.
    pub throughput: f64,
    /// Median GPU time of each pass label, passes of one label added up (timestamp clock
    /// only), from runs of their own that give each dispatch a compute pass (empty for a
    /// case of one dispatch).
    pub passes: Vec<(String, f64)>,
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// Runs one case: the warm-up, then `reps` timed runs.
pub fn measure(engine: &Engine, case: &mut Case, config: Config) -> Result<Measurement> {
    if config.reps == 0 {
        bail!("bench needs at least one repetition");
    }
    let mut times_ms = Vec::with_capacity(config.reps as usize);
    let mut pass_ms: Vec<(String, Vec<f64>)> = Vec::new();
    let clock;
    match (&mut case.runner, engine) {
        (Runner::Cpu(f), _) => {
            clock = Clock::CpuWall;
            warm_up(config, || {
                f();
                Ok(())
            })?;
            for _ in 0..config.reps {
                let t = Instant::now();
                f();
                times_ms.push(t.elapsed().as_secs_f64() * 1e3);
            }
        }
        (Runner::Gpu(f), Engine::Gpu(gpu)) => {
            // The times: the case recorded as the ops record it, consecutive dispatches in
            // one compute pass.
            let mut timer = PassTimer::new(gpu, MAX_PASSES);
            clock = if timer.is_active() {
                Clock::GpuTimestamps
            } else {
                Clock::Wall
            };
            warm_up(config, || run_gpu(gpu, f, None))?;
            let mut dispatches = 0;
            for _ in 0..config.reps {
                let t = Instant::now();
                run_gpu(gpu, f, Some(&mut timer))?;
                let wall = t.elapsed().as_secs_f64() * 1e3;
                dispatches = timer.dispatches();
                let passes = timer.take(gpu)?;
                match span_ns(&passes) {
                    Some(ns) if clock == Clock::GpuTimestamps => times_ms.push(ns / 1e6),
                    _ => times_ms.push(wall),
                }
            }
            // The breakdown: as many runs again with each dispatch a pass of its own, timed
            // apart (each then pays a pass boundary: the shares, not parts of the times above).
            if config.breakdown && clock == Clock::GpuTimestamps && dispatches > 1 {
                let mut timer = PassTimer::split(gpu, MAX_PASSES);
                for _ in 0..config.reps {
                    run_gpu(gpu, f, Some(&mut timer))?;
                    add_rep(&mut pass_ms, &timer.take(gpu)?);
                }
            }
        }
        (Runner::Gpu(_), Engine::Cpu) => bail!("case {} needs a GPU", case.name),
    }
    let min_ms = times_ms.iter().copied().fold(f64::INFINITY, f64::min);
    let max_ms = times_ms.iter().copied().fold(0.0, f64::max);
    let median_ms = median(&mut times_ms);
    let mut dev: Vec<f64> = times_ms.iter().map(|t| (t - median_ms).abs()).collect();
    let mad = median(&mut dev);
    Ok(Measurement {
        op: case.op,
        case: case.name.clone(),
        clock,
        reps: config.reps,
        median_ms,
        min_ms,
        max_ms,
        spread_pct: if median_ms > 0.0 {
            100.0 * mad / median_ms
        } else {
            0.0
        },
        unit: case.unit,
        throughput: case.unit.rate(case.work, median_ms / 1e3),
        passes: pass_ms
            .into_iter()
            .map(|(label, mut v)| (label, median(&mut v)))
            .collect(),
    })
}

/// Adds one run's pass times to `pass_ms` (a list of times per label); passes of one label
/// (a multi-segment scan repeats its stages) add up within the run.
fn add_rep(pass_ms: &mut Vec<(String, Vec<f64>)>, passes: &[PassTime]) {
    let mut this_rep: Vec<(String, f64)> = Vec::new();
    for p in passes {
        match this_rep.iter_mut().find(|(l, _)| *l == p.label) {
            Some((_, ms)) => *ms += p.ms(),
            None => this_rep.push((p.label.clone(), p.ms())),
        }
    }
    for (label, ms) in this_rep {
        match pass_ms.iter_mut().find(|(l, _)| *l == label) {
            Some((_, v)) => v.push(ms),
            None => pass_ms.push((label, vec![ms])),
        }
    }
}

fn run_gpu(
    gpu: &Gpu,
    f: &mut Box<dyn FnMut(&mut Batch) + '_>,
    timer: Option<&mut PassTimer>,
) -> Result<()> {
    let mut batch = gpu.batch(timer);
    f(&mut batch);
    batch.submit()
}

/// The table `gpukit bench` prints.
pub fn table(results: &[Measurement]) -> String {
    let mut out = format!(
        "{:<10} {:<28} {:>6} {:>11} {:>11} {:>11} {:>7} {:>12}\n",
        "op", "case", "clock", "median ms", "min ms", "max ms", "spread", "throughput"
    );
    for m in results {
        let clock = match m.clock {
            Clock::GpuTimestamps => "gpu",
            Clock::Wall => "wall",
            Clock::CpuWall => "cpu",
        };
        out += &format!(
            "{:<10} {:<28} {:>6} {:>11.4} {:>11.4} {:>11.4} {:>6.1}% {:>12.2} {}\n",
            m.op,
            m.case,
            clock,
            m.median_ms,
            m.min_ms,
            m.max_ms,
            m.spread_pct,
            m.throughput,
            m.unit.label()
        );
        if m.passes.len() > 1 {
            for (label, ms) in &m.passes {
                out += &format!("{:<10}   pass {:<23} {:>6} {:>11.4}\n", "", label, "", ms);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_of_odd_and_even() {
        assert_eq!(median(&mut [3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&mut [4.0, 1.0, 3.0, 2.0]), 2.5);
    }

    /// Runs of a CPU case that takes 1 ms, measured with `config`: (runs, wall time).
    fn count_runs(config: Config) -> (u32, Duration) {
        let runs = std::cell::Cell::new(0u32);
        let mut case = Case::cpu("test", "sleep".into(), Unit::GBps, 1.0, || {
            runs.set(runs.get() + 1);
            std::thread::sleep(Duration::from_millis(1));
        });
        let start = Instant::now();
        let m = measure(&Engine::Cpu, &mut case, config).unwrap();
        assert_eq!(m.reps, config.reps);
        let elapsed = start.elapsed();
        drop(case);
        (runs.get(), elapsed)
    }

    #[test]
    fn warm_up_runs_at_least_its_count_and_its_time() {
        let by_count = Config {
            warmup: 3,
            warmup_time: Duration::ZERO,
            reps: 2,
            breakdown: true,
        };
        assert_eq!(count_runs(by_count).0, 5);
        let none = Config {
            warmup: 0,
            ..by_count
        };
        assert_eq!(count_runs(none).0, 2);
        // 40 ms of warm-up: more runs than the count asks for (each takes 1 ms or more), and
        // timing starts only after 40 ms.
        let by_time = Config {
            warmup: 1,
            warmup_time: Duration::from_millis(40),
            reps: 2,
            breakdown: true,
        };
        let (runs, elapsed) = count_runs(by_time);
        assert!(runs > 1 + 2, "{runs} runs");
        assert!(elapsed >= Duration::from_millis(40 + 2), "{elapsed:?}");
    }

    #[test]
    fn units_scale() {
        assert_eq!(Unit::GBps.rate(2e9, 1.0), 2.0);
        assert_eq!(Unit::Tflops.rate(3e12, 0.5), 6.0);
    }
}
