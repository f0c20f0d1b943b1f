//! `gpukit bench resize`: 4K to 1080p, the throughput in pixels of output.

use anyhow::Result;

use super::{passes, Filter, Options, ResizePlan, Size, Tunables};
use crate::bench::{Case, Sizes, Unit};
use crate::gpu::Engine;
use crate::io::image::Image;
use crate::tune::Tunable;

/// `bench resize`: a 3840x2160 RGB8 image (noise) to 1920x1080 with lanczos3 (the target
/// case), bicubic and box, and to 1440x810 (a reduction by 8/3: resize_h8 where the others
/// take resize_h8s); as RGBA8 (premultiplied) with lanczos3; and a 2048x1536 RGB8 photo's
/// size to 512x384 with lanczos3 (the batch scripts' case, bench/resize_batch.py).
pub(super) fn cases<'e>(engine: &'e Engine, _: &Sizes) -> Result<Vec<Case<'e>>> {
    let (w, h) = (3840u32, 2160u32);
    let rgba = crate::bench::noise_bytes((w * h * 4) as usize, 0x9e37_79b9);
    let rgb: Vec<u8> = rgba.chunks(4).flat_map(|p| [p[0], p[1], p[2]]).collect();
    let rgb = Image::new_u8(w, h, 3, rgb);
    let rgba = Image::new_u8(w, h, 4, rgba);
    let photo = Image::new_u8(
        2048,
        1536,
        3,
        crate::bench::noise_bytes(2048 * 1536 * 3, 0x85eb_ca6b),
    );
    let configs = [
        (
            "4K to 1080p RGB8 lanczos3",
            &rgb,
            (1920, 1080),
            Filter::Lanczos3,
        ),
        (
            "4K to 1080p RGB8 bicubic",
            &rgb,
            (1920, 1080),
            Filter::Bicubic,
        ),
        ("4K to 1080p RGB8 box", &rgb, (1920, 1080), Filter::Box),
        (
            "4K to 1440x810 RGB8 lanczos3",
            &rgb,
            (1440, 810),
            Filter::Lanczos3,
        ),
        (
            "4K to 1080p RGBA8 lanczos3",
            &rgba,
            (1920, 1080),
            Filter::Lanczos3,
        ),
        (
            "2048x1536 to 512x384 RGB8 lanczos3",
            &photo,
            (512, 384),
            Filter::Lanczos3,
        ),
    ];
    let mut cases = Vec::new();
    for (name, img, (ow, oh), filter) in configs {
        let to = Size::Exact {
            width: ow,
            height: oh,
        };
        let options = Options::new(to, filter);
        let work = f64::from(ow) * f64::from(oh);
        cases.push(match engine {
            Engine::Gpu(gpu) => {
                let p = passes(img.width, img.height, ow, oh, filter, 8);
                // The defaults, as every op's bench measures (not the tune cache's choice).
                let t = Tunables::default_for(&gpu.limits);
                let plan = ResizePlan::with_tunables(gpu, img, &p, filter, t)?;
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
