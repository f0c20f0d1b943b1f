//! `gpukit bench compare`.

use anyhow::Result;

use super::{reference, CompareGpu, Options};
use crate::bench::{Case, Sizes, Unit};
use crate::gpu::Engine;
use crate::io::image::Image;
use crate::ops::sample_bytes;

/// `gpukit bench compare`'s case: a 4K RGB8 pair differing in about 0.35% of its pixels,
/// counted and drawn (the CI check of docs/BENCHMARKS.md). Pixels per second; both images
/// are read once and the diff written once.
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
    let opts = Options {
        diff: true,
        ..Options::default()
    };
    let name = "4K RGB8 pair, 0.35% differing, diff image".to_string();
    let work = a.pixels() as f64;
    Ok(vec![match engine {
        Engine::Gpu(gpu) => {
            let plan = CompareGpu::new(gpu).plan(&a, &opts)?;
            plan.upload_single(gpu, &sample_bytes(&a.samples), &sample_bytes(&b.samples))?;
            Case::gpu("compare", name, Unit::Gpixps, work, move |batch| {
                plan.record(batch, 0)
            })
        }
        Engine::Cpu => Case::cpu("compare", name, Unit::Gpixps, work, move || {
            std::hint::black_box(reference(&a, &b, &opts));
        }),
    }])
}
