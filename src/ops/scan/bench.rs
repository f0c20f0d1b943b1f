//! `gpukit bench scan`.

use anyhow::Result;

use super::{engine, subgroups_usable, Mode, Op, Options, Path, ScanPlan, Tunables, WG_SIZE};
use crate::bench::{Case, Sizes, Unit, MAX_PASSES};
use crate::gpu::Engine;

/// `bench scan`: u32 exclusive sums of 2^20 and 2^`max_log2` elements (Gelem/s; one
/// look-back pass), on the path the adapter takes by default and, where that is the subgroup
/// path, on the workgroup path too; the larger also as an f32 sum (reduce-then-scan).
pub(super) fn cases<'e>(engine: &'e Engine, sizes: &Sizes) -> Result<Vec<Case<'e>>> {
    let max_log2 = sizes.scan_max_log2;
    let mut sizes = vec![20.min(max_log2), max_log2];
    sizes.dedup();
    let mut cases = Vec::new();
    for log2 in sizes {
        let n = 1usize << log2;
        let data: Vec<u32> = (0..n as u32).map(|i| i % 1000).collect();
        let gpu = match engine {
            Engine::Cpu => {
                cases.push(Case::cpu(
                    "scan",
                    format!("u32 sum 2^{log2}"),
                    Unit::Gelemps,
                    n as f64,
                    move || {
                        std::hint::black_box(engine::scan(&data, Op::Sum, Mode::Exclusive));
                    },
                ));
                continue;
            }
            Engine::Gpu(gpu) => gpu,
        };
        let mut variants = vec![(Path::Auto, false)];
        if subgroups_usable(gpu, WG_SIZE) {
            variants.push((Path::Workgroup, false));
        }
        if log2 == max_log2 {
            variants.push((Path::Auto, true));
        }
        for (path, f32_sum) in variants {
            // The defaults for the length and algorithm, not the tune cache's shape: bench
            // measures the same kernels everywhere.
            let tunables = if f32_sum {
                Tunables::DEFAULT
            } else {
                let subgroup_walk = path != Path::Workgroup && subgroups_usable(gpu, WG_SIZE);
                Tunables::for_len(n, &gpu.limits, subgroup_walk)
            };
            let opts = Options {
                path,
                tunables: Some(tunables),
                ..Options::default()
            };
            let plan = if f32_sum {
                let plan = ScanPlan::new::<f32>(gpu, n, &opts)?;
                let values: Vec<f32> = data.iter().map(|&v| v as f32 * 1e-3).collect();
                plan.upload(gpu, &values);
                plan
            } else {
                let plan = ScanPlan::new::<u32>(gpu, n, &opts)?;
                plan.upload(gpu, &data);
                plan
            };
            if plan.passes() > u64::from(MAX_PASSES) {
                continue;
            }
            let mut name = format!(
                "{} sum 2^{log2} {}",
                if f32_sum { "f32" } else { "u32" },
                if plan.uses_subgroups() {
                    "subgroup"
                } else {
                    "workgroup"
                }
            );
            let segments = plan.layout().segments.len();
            if segments > 1 {
                name += &format!(" {segments} seg");
            }
            cases.push(Case::gpu("scan", name, Unit::Gelemps, n as f64, move |b| {
                plan.record(b)
            }));
        }
    }
    Ok(cases)
}
