//! `gpukit bench scan`.

use anyhow::Result;

use super::{engine, subgroups_usable, Mode, Op, Options, Path, ScanPlan, Tunables, WG_SIZE};
use crate::bench::{Case, Sizes, Unit, MAX_PASSES};
use crate::gpu::Engine;

/// Segment length of the bench's L2-sized variant: 32 MiB of u32, within the L2 cache of
/// large GPUs (50 MiB on an H100), so that scan_block may re-read a segment from L2 rather
/// than memory (8 bytes per element from memory instead of 12).
const L2_SEGMENT: usize = 1 << 23;

/// `bench scan`: u32 exclusive sums of 2^20 and 2^`max_log2` elements (Gelem/s), on the path
/// the adapter takes by default and, where that is the subgroup path, on the workgroup path
/// too; the larger also in L2-sized segments (up to 2^28, within `MAX_PASSES`).
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
        let mut variants = vec![(Path::Auto, None)];
        if subgroups_usable(gpu, WG_SIZE) {
            variants.push((Path::Workgroup, None));
        }
        if n > L2_SEGMENT {
            variants.push((Path::Auto, Some(L2_SEGMENT)));
        }
        for (path, segment_len) in variants {
            // The defaults, not the tune cache's shape: bench measures the same kernels
            // everywhere.
            let opts = Options {
                path,
                segment_len,
                tunables: Some(Tunables::DEFAULT),
                ..Options::default()
            };
            let plan = ScanPlan::new::<u32>(gpu, n, &opts)?;
            if plan.layout().passes() > MAX_PASSES as usize {
                // Only L2-sized segments of the largest inputs come here.
                continue;
            }
            plan.upload(gpu, &data);
            let mut name = format!(
                "u32 sum 2^{log2} {}",
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
