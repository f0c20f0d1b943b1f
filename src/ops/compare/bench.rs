//! `gpukit bench compare`.

use anyhow::Result;

use super::{reference, CompareGpu, Options};
use crate::bench::{Case, Sizes, Unit};
use crate::gpu::Engine;
use crate::io::image::Image;
use crate::ops::sample_bytes;

/// `gpukit bench compare`'s cases: a 4K RGB8 pair differing in about 0.35% of its pixels,
/// counted and drawn (the CI check of docs/BENCHMARKS.md), and counted only. Bytes per
/// second, as `bench copy` counts them: both images read once, and the RGB8 diff image
/// written once when drawn, so the rate compares with copy's directly.
pub(super) fn cases<'e>(engine: &'e Engine, _: &Sizes) -> Result<Vec<Case<'e>>> {
    let (w, h) = (3840u32, 2160u32);
    let expected = crate::bench::noise_bytes((w * h * 3) as usize, 0x1f12_3bb5);
    let mut changed = expected.clone();
    // Every 286th pixel: 0.35%.
    for p in (0..(w * h) as usize).step_by(286) {
        changed[p * 3] ^= 0x40;
    }
    let a = Image::new_u8(w, h, 3, expected);
    let b = Image::new_u8(w, h, 3, changed);
    let image_bytes = f64::from(w * h * 3);
    let mut cases = Vec::new();
    for (diff, what, work) in [
        (true, "diff image", 3.0 * image_bytes),
        (false, "metrics only", 2.0 * image_bytes),
    ] {
        let opts = Options {
            diff,
            ..Options::default()
        };
        let name = format!("4K RGB8 pair, 0.35% differing, {what}");
        cases.push(match engine {
            Engine::Gpu(gpu) => {
                let plan = CompareGpu::new(gpu).plan(&a, &opts)?;
                plan.upload_single(gpu, &sample_bytes(&a.samples), &sample_bytes(&b.samples))?;
                Case::gpu("compare", name, Unit::GBps, work, move |batch| {
                    plan.record(batch, 0)
                })
            }
            Engine::Cpu => {
                let (a, b) = (a.clone(), b.clone());
                Case::cpu("compare", name, Unit::GBps, work, move || {
                    std::hint::black_box(reference(&a, &b, &opts));
                })
            }
        });
    }
    Ok(cases)
}
