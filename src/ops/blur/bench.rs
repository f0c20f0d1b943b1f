//! `gpukit bench blur`.

use anyhow::Result;

use super::{engine, gaussian_radius, BlurPlan, GpuOptions, Kind, Options, Tunables};
use crate::bench::{Case, Sizes, Unit};
use crate::gpu::Engine;
use crate::io::image::Image;

/// `bench blur`: a 3840x2160 RGBA8 image (noise, alpha included), box r = 3, 15, 100 and
/// gaussian sigma 5, and with its alpha all opaque, box r = 15 and gaussian sigma 5; a
/// 4096x2048 one, box r = 15, where every line length is a power of two; the 3840x2160
/// image as RGB8 (no alpha), box r = 15 and gaussian sigma 5; and box r = 15 of the other
/// layouts at 3840x2160: gray and gray+alpha 8-bit, gray and RGBA 16-bit (noise too).
pub(super) fn cases<'e>(engine: &'e Engine, _: &Sizes) -> Result<Vec<Case<'e>>> {
    let image = |w: u32, h: u32| {
        Image::new_u8(
            w,
            h,
            4,
            crate::bench::noise_bytes((w * h * 4) as usize, 0x9e37_79b9),
        )
    };
    let uhd = image(3840, 2160);
    let pow2 = image(4096, 2048);
    let rgb = match &uhd.samples {
        crate::io::image::Samples::U8(s) => Image::new_u8(
            uhd.width,
            uhd.height,
            3,
            s.chunks(4).flat_map(|p| [p[0], p[1], p[2]]).collect(),
        ),
        crate::io::image::Samples::U16(_) => unreachable!("made 8-bit above"),
    };
    // The same colours with every alpha opaque, as most photos with an alpha channel are:
    // windows divide by constants (`Opaque` in arith.rs).
    let mut opaque = uhd.clone();
    if let crate::io::image::Samples::U8(s) = &mut opaque.samples {
        s.chunks_mut(4).for_each(|p| p[3] = 255);
    }
    // The other layouts, from noise of their own.
    let layout = |channels: u8, sixteen: bool| {
        let n = 3840 * 2160 * channels as usize;
        let bytes = crate::bench::noise_bytes(n * (1 + sixteen as usize), 0x85eb_ca6b);
        match sixteen {
            true => Image::new_u16(
                3840,
                2160,
                channels,
                bytes
                    .chunks(2)
                    .map(|b| u16::from_le_bytes([b[0], b[1]]))
                    .collect(),
            ),
            false => Image::new_u8(3840, 2160, channels, bytes),
        }
    };
    let (gray, gray_alpha) = (layout(1, false), layout(2, false));
    let (gray16, rgba16) = (layout(1, true), layout(4, true));
    let gauss5 = Options::new(Kind::Gaussian { sigma: 5.0 }, gaussian_radius(5.0), 1);
    let configs = [
        ("4K RGBA8 box r=3", &uhd, Options::new(Kind::Box, 3, 1)),
        ("4K RGBA8 box r=15", &uhd, Options::new(Kind::Box, 15, 1)),
        ("4K RGBA8 box r=100", &uhd, Options::new(Kind::Box, 100, 1)),
        (
            "4K RGBA8 box r=1000",
            &uhd,
            Options::new(Kind::Box, 1000, 1),
        ),
        ("4K RGBA8 gaussian sigma=5", &uhd, gauss5),
        (
            "4K RGBA8 opaque box r=15",
            &opaque,
            Options::new(Kind::Box, 15, 1),
        ),
        ("4K RGBA8 opaque gaussian sigma=5", &opaque, gauss5),
        (
            "4096x2048 RGBA8 box r=15",
            &pow2,
            Options::new(Kind::Box, 15, 1),
        ),
        // Without alpha: the same pixels as RGB, which the kernels also read a word at a time.
        ("4K RGB8 box r=15", &rgb, Options::new(Kind::Box, 15, 1)),
        ("4K RGB8 gaussian sigma=5", &rgb, gauss5),
        ("4K gray8 box r=15", &gray, Options::new(Kind::Box, 15, 1)),
        (
            "4K gray+alpha8 box r=15",
            &gray_alpha,
            Options::new(Kind::Box, 15, 1),
        ),
        (
            "4K gray16 box r=15",
            &gray16,
            Options::new(Kind::Box, 15, 1),
        ),
        (
            "4K RGBA16 box r=15",
            &rgba16,
            Options::new(Kind::Box, 15, 1),
        ),
    ];
    let mut cases = Vec::new();
    for (name, img, params) in configs {
        let pixels = img.pixels() as f64;
        cases.push(match engine {
            Engine::Gpu(gpu) => {
                // The defaults, not the tune cache's shapes: bench measures the same kernels
                // everywhere.
                let params = params.with_gpu(GpuOptions {
                    tunables: Some(Tunables::DEFAULT),
                    ..GpuOptions::DEFAULT
                });
                let plan = BlurPlan::new(gpu, img, &params)?;
                Case::gpu("blur", name.into(), Unit::Gpixps, pixels, move |b| {
                    plan.record(b)
                })
            }
            Engine::Cpu => {
                let img = img.clone();
                Case::cpu("blur", name.into(), Unit::Gpixps, pixels, move || {
                    std::hint::black_box(engine::blur(&img, &params).expect("valid bench params"));
                })
            }
        });
    }
    Ok(cases)
}
