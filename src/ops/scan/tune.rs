//! The scan kernels' shape (workgroup size, vec4s per invocation) and how `gpukit tune`
//! searches it.

use std::fmt;

use anyhow::{bail, Result};

use super::{reference, Mode, Op, Options, ScanPlan, VEC_PER_THREAD, WG_SIZE};
use crate::bench::{self, Case, Unit};
use crate::gpu::{Engine, Gpu, Timings};
use crate::tune::{max_invocations, pow2, Level, OpTuning, SizeClass, Stage, Tunable};

/// The shape of the scan kernels' work, which `gpukit tune` chooses per adapter and size.
/// Results are the same for every choice (within docs/scan.md's bound for f32 sums, which
/// depends on it through [`super::f32_sum_depth`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Tunables {
    /// Invocations per workgroup (the shaders' `WG_SIZE`): a power of two from 4 to the
    /// adapter's limit.
    pub wg_size: u32,
    /// vec4s each invocation owns per tile (the shaders' `VEC_PER_THREAD`, a generated
    /// constant): 1, 2, 4 or 8. A tile is `wg_size * vec_per_thread` vec4s.
    pub vec_per_thread: u32,
}

/// `LOG_BANKS` of wgsl/shared/scan_workgroup.wgsl (the shader test checks they agree): its
/// tree skips one slot in 2^LOG_BANKS.
pub(super) const LOG_BANKS: u32 = 5;

impl Tunables {
    /// The defaults, measured on an H200 (2^28 u32 at 220 Gelem/s) and valid everywhere.
    pub const DEFAULT: Tunables = Tunables {
        wg_size: WG_SIZE,
        vec_per_thread: VEC_PER_THREAD,
    };

    /// The shape for `n` elements without a tune cache, where the adapter allows 512
    /// invocations, from `gpukit tune` on an H200 (docs/BENCHMARKS.md): 512 invocations of
    /// 4 vec4s (8192 elements a tile, half the look-back walks of DEFAULT's 4096) from 2^20
    /// elements, and on the subgroup walk (`subgroup_walk`, which looks back 32 tiles a round
    /// trip) DEFAULT again from 2^24. Serial walk, call AJ-kern3-1: 2^28 u32 in 0.854 ms
    /// against DEFAULT's 1.003, 2^20 in 0.014 against 0.030. Subgroup walk, call AK: 2^20 in
    /// 0.0138 against 0.0284, but 2^24 in 0.0694 against 0.0678 and 2^28 in 0.836 against
    /// 0.802. Else DEFAULT.
    pub fn for_len(n: usize, limits: &wgpu::Limits, subgroup_walk: bool) -> Tunables {
        let large = Tunables {
            wg_size: 512,
            vec_per_thread: 4,
        };
        let long = n >= 1 << 20 && !(subgroup_walk && n >= 1 << 24);
        if long && large.check(limits).is_ok() {
            large
        } else {
            Tunables::DEFAULT
        }
    }

    /// Workgroup memory of the in-tile scan: one total per subgroup and vec4 on the subgroup
    /// path (`subgroup_min` the adapter's smallest subgroup), Blelloch's padded tree of every
    /// vec4 total on the workgroup path. The shaders' arrays take their size from this (the
    /// `SH_WORDS` override the plan sets), so it is worked out here only.
    pub fn workgroup_bytes(&self, subgroup_min: Option<u32>) -> u64 {
        let totals = u64::from(self.wg_size) * u64::from(self.vec_per_thread);
        4 * match subgroup_min {
            Some(min) => totals / u64::from(min.max(1)),
            None => totals + (totals >> LOG_BANKS),
        }
    }
}

impl fmt::Display for Tunables {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "wg={} vec4s={}", self.wg_size, self.vec_per_thread)
    }
}

impl Tunable for Tunables {
    fn default_for(_: &wgpu::Limits) -> Self {
        Tunables::DEFAULT
    }
    /// Whether the kernels can run this choice on an adapter with `limits`.
    fn check(&self, limits: &wgpu::Limits) -> Result<()> {
        let wg = self.wg_size;
        let max_wg = limits
            .max_compute_invocations_per_workgroup
            .min(limits.max_compute_workgroup_size_x);
        if !wg.is_power_of_two() || wg < 4 || wg > max_wg {
            bail!("scan workgroup size {wg} is not a power of two from 4 to {max_wg}");
        }
        if !matches!(self.vec_per_thread, 1 | 2 | 4 | 8) {
            bail!(
                "scan vec4s per invocation must be 1, 2, 4 or 8, not {}",
                self.vec_per_thread
            );
        }
        Ok(())
    }
}

/// `gpukit tune scan`: the kernels' shape on 2^16 to 2^28 u32.
pub(super) struct Tuning;

impl OpTuning for Tuning {
    type Tunables = Tunables;

    fn classes(gpu: &Gpu, level: Level) -> Vec<SizeClass> {
        classes(gpu, level)
    }

    fn stages() -> Vec<Stage<Tunables>> {
        stages()
    }

    fn verify(engine: &Engine, _: &Gpu, t: &Tunables) -> Result<Option<String>> {
        verify(engine, t)
    }

    fn case<'g>(
        gpu: &'g Gpu,
        class: &SizeClass,
        _: &'static str,
        t: &Tunables,
    ) -> Result<Case<'g>> {
        case(gpu, class, t)
    }
}

/// Elements: 2^16 quick; 2^16, 2^20, 2^24 and (where a 1 GiB buffer fits) 2^28 in full.
fn classes(gpu: &Gpu, level: Level) -> Vec<SizeClass> {
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

fn stages() -> Vec<Stage<Tunables>> {
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
                .map(|(wg_size, vec_per_thread)| Tunables {
                    wg_size,
                    vec_per_thread,
                })
                .collect()
        },
    }]
}

/// An exclusive u32 sum of 2.5 tiles in segments of two tiles (two levels, two chained
/// segments, a partial tile), element for element against the CPU reference.
fn verify(engine: &Engine, t: &Tunables) -> Result<Option<String>> {
    let opts = Options {
        tunables: Some(*t),
        ..Options::default()
    };
    let tile = opts.tile();
    let opts = Options {
        segment_len: Some(2 * tile),
        ..opts
    };
    let data: Vec<u32> = bench::noise_bytes(5 * tile / 2 + 3, 13)
        .into_iter()
        .map(u32::from)
        .collect();
    let got = super::run(engine, &data, &opts, &mut Timings::default())?;
    let want = reference(&data, Op::Sum, Mode::Exclusive);
    Ok((got != want).then(|| "sums differ from the CPU reference".into()))
}

fn case<'g>(gpu: &'g Gpu, class: &SizeClass, t: &Tunables) -> Result<Case<'g>> {
    let n = class.dims.0;
    let opts = Options {
        tunables: Some(*t),
        ..Options::default()
    };
    let plan = ScanPlan::new::<u32>(gpu, n, &opts)?;
    if plan.passes() > u64::from(bench::MAX_PASSES) {
        bail!("more passes than one timed batch holds");
    }
    let data: &Vec<u32> = class.input(|| (0..n as u32).map(|i| i % 1000).collect());
    plan.upload(gpu, data);
    Ok(Case::gpu(
        super::OP.name,
        format!("u32 sum {}", class.label),
        Unit::Gelemps,
        n as f64,
        move |b| plan.record(b),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_scans_take_bigger_tiles_where_the_adapter_allows() {
        let big = wgpu::Limits {
            max_compute_invocations_per_workgroup: 1024,
            max_compute_workgroup_size_x: 1024,
            ..wgpu::Limits::default()
        };
        let large = Tunables {
            wg_size: 512,
            vec_per_thread: 4,
        };
        assert_eq!(Tunables::for_len(1 << 28, &big, false), large);
        assert_eq!(Tunables::for_len(1 << 20, &big, false), large);
        assert_eq!(
            Tunables::for_len((1 << 20) - 1, &big, false),
            Tunables::DEFAULT
        );
        // The subgroup walk: the bigger tiles only between 2^20 and 2^24.
        assert_eq!(Tunables::for_len(1 << 20, &big, true), large);
        assert_eq!(Tunables::for_len((1 << 24) - 1, &big, true), large);
        assert_eq!(Tunables::for_len(1 << 24, &big, true), Tunables::DEFAULT);
        assert_eq!(Tunables::for_len(1 << 28, &big, true), Tunables::DEFAULT);
        // WebGPU's portable 256 invocations.
        assert_eq!(
            Tunables::for_len(1 << 28, &wgpu::Limits::default(), false),
            Tunables::DEFAULT
        );
    }

    #[test]
    fn candidate_spaces_fit_the_limits_and_hold_the_defaults() {
        let limits = wgpu::Limits::default();
        for s in stages() {
            let c = (s.candidates)(&Tunables::DEFAULT, &limits, false);
            assert!(c.contains(&Tunables::DEFAULT));
            assert!(c.iter().all(|t| t.wg_size <= 256));
        }
    }
}
