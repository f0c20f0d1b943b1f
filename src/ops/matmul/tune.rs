//! The matmul tiling ([`Tunables`]) and how `gpukit tune` searches it.

use anyhow::{ensure, Result};

use super::{exact, outside_bound, Dims, Matmul, MatmulPlan, Options, Precision};
use crate::bench::{self, Case, Unit};
use crate::gpu::{Engine, Gpu, Timings};
use crate::tune::{pow2, Level, OpTuning, SizeClass, Stage, Tunable};

/// The workgroups of [`Tunables::LARGE`] or [`Tunables::MID`] a large GPU runs at once: one
/// an SM (each fills an SM's registers or workgroup memory on NVIDIA), and an H100 or H200
/// has 132. wgpu does not say how many an adapter has; `gpukit tune` measures instead.
const SLOTS: usize = 132;

/// The tilings [`Tunables::for_dims`] weighs on a large GPU, each with the rate of its full
/// waves on an H100 (TFLOP/s): its rate at 4096^3 (docs/BENCHMARKS.md, call DC), whose waves
/// are 97% busy for both (LARGE 43.0 over 512 tiles in 4 waves of 132, MID 31.6 over 2048 in
/// 16), divided by 0.97.
const BY_WAVES: [(Tunables, f64); 2] = [(Tunables::LARGE, 44.3), (Tunables::MID, 32.6)];

/// The tiling of the kernel: the single place its sizes are chosen. C is cut into BM x BN
/// tiles, one per workgroup; each step stages BM x BK of A and BK x BN of B in workgroup
/// memory (twice: double-buffered); each invocation computes a TM x TN block of its tile.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Tunables {
    pub bm: u32,
    pub bn: u32,
    pub bk: u32,
    pub tm: u32,
    pub tn: u32,
    /// Tile rows a run of consecutive workgroups goes down before moving right (cache reuse).
    pub group_m: u32,
}

impl Tunables {
    /// Fits WebGPU's minimum limits (16 KiB of workgroup storage, 256 invocations), so it
    /// runs on every adapter: 64 x 64 tiles, 4 x 4 per invocation, 8 KiB.
    pub const SAFE: Tunables = Tunables {
        bm: 64,
        bn: 64,
        bk: 8,
        tm: 4,
        tn: 4,
        group_m: 8,
    };
    /// 128 x 128 tiles, 8 x 8 per invocation (64 FMAs per 4 vec4 reads of workgroup memory),
    /// BK 8: 16 KiB and 256 invocations, for adapters short of [`Tunables::LARGE`]'s limits
    /// (lavapipe, many iGPUs).
    pub const FAST: Tunables = Tunables {
        bm: 128,
        bn: 128,
        bk: 8,
        tm: 8,
        tn: 8,
        group_m: 8,
    };
    /// 256 x 128 tiles, 8 x 8 per invocation, BK 16 in chunks of 8 ([`Tunables::k_chunk`]):
    /// 48 KiB and 512 invocations (one workgroup fills an SM's registers on NVIDIA), for
    /// discrete GPUs. The fastest of 30 tilings measured on an H100 with the unchecked kernel:
    /// 43.0 TFLOP/s at 4096^3, 0.83x cuBLAS, 1.27x the 64 x 256 x 16 with 4 x 8 that `gpukit
    /// tune` had chosen before (docs/BENCHMARKS.md, calls CX to DC).
    pub const LARGE: Tunables = Tunables {
        bm: 256,
        bn: 128,
        bk: 16,
        tm: 8,
        tn: 8,
        group_m: 8,
    };
    /// 64 x 128 tiles, 4 x 4 per invocation, BK 16: 24 KiB and 512 invocations, for products
    /// whose C makes too few of [`Tunables::LARGE`]'s tiles to fill the waves of a large GPU
    /// ([`Tunables::for_dims`]): the fastest at 1024^3 on an H100 (docs/BENCHMARKS.md, calls
    /// CB and CX).
    pub const MID: Tunables = Tunables {
        bm: 64,
        bn: 128,
        bk: 16,
        tm: 4,
        tn: 4,
        group_m: 8,
    };

    /// The best configuration the adapter's limits allow: [`Tunables::LARGE`] where it has 48
    /// KiB of workgroup storage and 512 invocations (a discrete GPU), else [`Tunables::FAST`]
    /// where it has more than WebGPU's minimum 16 KiB, else [`Tunables::SAFE`]. FAST's 16 KiB
    /// would fit that minimum, but adapters that offer no more are the smallest GPUs, whose
    /// register files 8 x 8 blocks may overrun, and they keep SAFE. A later `gpukit tune` may
    /// measure instead.
    pub fn for_limits(limits: &wgpu::Limits) -> Tunables {
        if limits.max_compute_workgroup_storage_size <= 16 * 1024 {
            return Tunables::SAFE;
        }
        [Tunables::LARGE, Tunables::FAST]
            .into_iter()
            .find(|t| t.check(limits).is_ok())
            .unwrap_or(Tunables::SAFE)
    }

    /// The default for a product whose C is `m` x `n`: [`Tunables::for_limits`], except that
    /// where that is [`Tunables::LARGE`], the one of [`BY_WAVES`] whose waves on [`SLOTS`] SMs
    /// take the least time: each wave as long as one tile takes at the tiling's rate (a last
    /// wave that is partly idle counts whole, and a tile past the matrix's edge whole too).
    /// On an H100 this model gave LARGE's measured time within 10% at 1024^3, 2048^3,
    /// 2049 x 2047 and 4097 x 4095, and MID's within 18% at 1024^3 and 2049 x 2047
    /// (docs/BENCHMARKS.md, calls DC and DD).
    pub fn for_dims(limits: &wgpu::Limits, m: usize, n: usize) -> Tunables {
        let best = Tunables::for_limits(limits);
        if best != Tunables::LARGE {
            return best;
        }
        let time = |&(t, rate): &(Tunables, f64)| {
            let tiles = m.div_ceil(t.bm as usize) * n.div_ceil(t.bn as usize);
            tiles.div_ceil(SLOTS) as f64 * f64::from(t.bm * t.bn) / rate
        };
        BY_WAVES
            .iter()
            .filter(|(t, _)| t.check(limits).is_ok())
            .min_by(|x, y| time(x).total_cmp(&time(y)))
            .map_or(best, |&(t, _)| t)
    }

    /// The rows of a step's tiles the kernel runs as one unrolled loop (`KCHUNK` in
    /// wgsl/matmul.wgsl): 8 for 8 x 8 blocks (or 4 where BK is not a multiple of 8), whose
    /// 1024 FMAs at BK 16 the driver did not unroll in one loop (0.75x, call DB); BK for the
    /// others, for which chunks of 8 were the same or up to 1.5% slower (call DC).
    pub fn k_chunk(&self) -> u32 {
        match (self.tm * self.tn, self.bk % 8) {
            (64, 0) => 8,
            (64, _) => 4,
            _ => self.bk,
        }
    }

    /// Whether the kernel lays runs of 32 invocations out as 8 x 4 blocks (`WARP_TILE` in
    /// wgsl/matmul.wgsl): for 8 x 8 blocks, where the invocation grid divides into them. 1%
    /// faster for those on an H100, 1-2% slower for 4 x 4 (docs/BENCHMARKS.md, call CY).
    pub fn warp_tiles(&self) -> bool {
        let (tx, ty) = (self.bn / self.tn.max(1), self.bm / self.tm.max(1));
        self.tm == 8 && self.tn == 8 && tx % 8 == 0 && ty % 4 == 0
    }

    /// In u64, as the sizes below: a cache's values are checked with them, whatever they are.
    pub fn wg_size(&self) -> u64 {
        u64::from(self.bm / self.tm.max(1)) * u64::from(self.bn / self.tn.max(1))
    }

    /// Workgroup memory: two buffers of each tile.
    pub fn workgroup_bytes(&self) -> u64 {
        2 * u64::from(self.bk) * (u64::from(self.bm) + u64::from(self.bn)) * 4
    }

    pub(super) fn constants(&self, trans_a: bool, trans_b: bool) -> Vec<(&'static str, f64)> {
        vec![
            ("BM", self.bm as f64),
            ("BN", self.bn as f64),
            ("BK", self.bk as f64),
            ("TM", self.tm as f64),
            ("TN", self.tn as f64),
            ("WG_SIZE", self.wg_size() as f64),
            ("GROUP_M", self.group_m as f64),
            ("WARP_TILE", self.warp_tiles() as u8 as f64),
            ("KCHUNK", self.k_chunk() as f64),
            ("A_T", trans_a as u8 as f64),
            ("B_T", trans_b as u8 as f64),
        ]
    }
}

impl std::fmt::Display for Tunables {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}x{}x{} tiles, {}x{} per invocation, group {}",
            self.bm, self.bn, self.bk, self.tm, self.tn, self.group_m
        )
    }
}

impl Tunable for Tunables {
    fn default_for(limits: &wgpu::Limits) -> Self {
        Tunables::for_limits(limits)
    }
    /// Whether the kernel can run this configuration on an adapter with `limits`.
    fn check(&self, limits: &wgpu::Limits) -> Result<()> {
        let Tunables {
            bm,
            bn,
            bk,
            tm,
            tn,
            group_m,
        } = *self;
        ensure!(
            matches!(tm, 4 | 8) && matches!(tn, 4 | 8),
            "TM and TN must be 4 or 8"
        );
        // Positive too: the kernel runs without runtime checks, and divides by its tiles.
        ensure!(
            bm > 0 && bn > 0 && bm % (4 * tm) == 0 && bn % (4 * tn) == 0,
            "BM and BN must be positive multiples of 4 TM and 4 TN"
        );
        ensure!(bk % 4 == 0 && bk > 0, "BK must be a multiple of 4");
        ensure!(group_m > 0, "GROUP_M must be positive");
        let wg = self.wg_size();
        ensure!(
            u64::from(bm.max(bn)) * u64::from(bk) / 4 <= 4 * wg,
            "a tile must take at most 4 vec4 loads per invocation"
        );
        ensure!(
            wg <= u64::from(limits.max_compute_invocations_per_workgroup)
                && wg <= u64::from(limits.max_compute_workgroup_size_x),
            "{wg} invocations per workgroup exceed this adapter's limit"
        );
        ensure!(
            self.workgroup_bytes() <= u64::from(limits.max_compute_workgroup_storage_size),
            "{} bytes of workgroup memory exceed this adapter's {}",
            self.workgroup_bytes(),
            limits.max_compute_workgroup_storage_size
        );
        Ok(())
    }
}

/// `gpukit tune matmul`: the tiling on f32 products of 256^3 to 4096^3.
pub(super) struct Tuning;

impl OpTuning for Tuning {
    type Tunables = Tunables;

    fn classes(_: &Gpu, level: Level) -> Vec<SizeClass> {
        classes(level)
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

/// n^3 products: 128 quick; 256, 1024 and 4096 in full.
fn classes(level: Level) -> Vec<SizeClass> {
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

fn stages() -> Vec<Stage<Tunables>> {
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
                    .map(|(bm, bn, tm, tn)| Tunables {
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
                bks.iter().map(|&bk| Tunables { bk, ..*best }).collect()
            },
        },
        Stage {
            name: "order",
            candidates: |best, _, quick| {
                let groups: &[u32] = if quick { &[] } else { &[1, 4, 8, 16] };
                groups
                    .iter()
                    .map(|&group_m| Tunables { group_m, ..*best })
                    .collect()
            },
        },
    ]
}

/// A 67x45x37 f32 product (no dimension a multiple of a tile), every element within the
/// documented bound of the exact product.
fn verify(engine: &Engine, t: &Tunables) -> Result<Option<String>> {
    let (m, n, k) = (67, 45, 37);
    let a: Vec<f32> = bench::noise_bytes(m * k, 17)
        .into_iter()
        .map(|v| v as f32 / 128.0 - 1.0)
        .collect();
    let b: Vec<f32> = bench::noise_bytes(k * n, 19)
        .into_iter()
        .map(|v| v as f32 / 128.0 - 1.0)
        .collect();
    let p = Matmul {
        a: &a,
        b: &b,
        dims: Dims { m, n, k },
        trans_a: false,
        trans_b: false,
        precision: Precision::F32,
    };
    let options = Options {
        tile: Some(*t),
        ..Options::DEFAULT
    };
    let got = super::run(engine, &p, &options, &mut Timings::default())?;
    let (want, abs) = exact(&p);
    let bad = outside_bound(&got, &want, &abs, k);
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

fn case<'g>(gpu: &'g Gpu, class: &SizeClass, t: &Tunables) -> Result<Case<'g>> {
    let n = class.dims.0;
    let (a, b): &(Vec<f32>, Vec<f32>) = class.input(|| {
        let values = |seed| {
            bench::noise_bytes(n * n, seed)
                .into_iter()
                .map(|v| v as f32 / 128.0 - 1.0)
                .collect::<Vec<f32>>()
        };
        (values(23), values(29))
    });
    let dims = Dims { m: n, n, k: n };
    let p = Matmul {
        a,
        b,
        dims,
        trans_a: false,
        trans_b: false,
        precision: Precision::F32,
    };
    let options = Options {
        tile: Some(*t),
        ..Options::DEFAULT
    };
    let plan = MatmulPlan::new(gpu, &p, &options)?;
    Ok(Case::gpu(
        super::OP.name,
        format!("f32 {}", class.label),
        Unit::Tflops,
        dims.flops(),
        move |b| plan.record(b),
    ))
}
