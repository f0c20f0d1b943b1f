//! `gpukit bench resize`: 4K to 1080p, the throughput in pixels of output.

use anyhow::Result;

use super::{passes, Filter, Options, ResizePlan, Size};
use crate::bench::{Case, Sizes, Unit};
use crate::gpu::Engine;
use crate::io::image::Image;

/// `bench resize`: a 3840x2160 RGB8 image (noise) to 1920x1080 with lanczos3 (the target
/// case), bicubic and box; and as RGBA8 (premultiplied) with lanczos3.
pub(super) fn cases<'e>(engine: &'e Engine, _: &Sizes) -> Result<Vec<Case<'e>>> {
    let (w, h) = (3840u32, 2160u32);
    let rgba = crate::bench::noise_bytes((w * h * 4) as usize, 0x9e37_79b9);
    let rgb: Vec<u8> = rgba.chunks(4).flat_map(|p| [p[0], p[1], p[2]]).collect();
    let rgb = Image::new_u8(w, h, 3, rgb);
    let rgba = Image::new_u8(w, h, 4, rgba);
    let to = Size::Exact {
        width: 1920,
        height: 1080,
    };
    let configs = [
        ("4K to 1080p RGB8 lanczos3", &rgb, Filter::Lanczos3),
        ("4K to 1080p RGB8 bicubic", &rgb, Filter::Bicubic),
        ("4K to 1080p RGB8 box", &rgb, Filter::Box),
        ("4K to 1080p RGBA8 lanczos3", &rgba, Filter::Lanczos3),
    ];
    let mut cases = Vec::new();
    for (name, img, filter) in configs {
        let options = Options::new(to, filter);
        let work = 1920.0 * 1080.0;
        cases.push(match engine {
            Engine::Gpu(gpu) => {
                let p = passes(w, h, 1920, 1080, filter, 8);
                let plan = ResizePlan::new(gpu, img, &p, filter)?;
                plan.write(gpu, img);
                Case::gpu("resize", name.into(), Unit::Gpixps, work, move |b| {
                    plan.record(b)
                })
            }
            Engine::Cpu => {
                let img = img.clone();
                Case::cpu("resize", name.into(), Unit::Gpixps, work, move || {
                    std::hint::black_box(super::engine::resize(&img, &options).expect("resizes"));
                })
            }
        });
    }
    Ok(cases)
}
