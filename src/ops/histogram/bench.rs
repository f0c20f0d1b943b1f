//! `gpukit bench histogram`, and the GPU case that `gpukit tune histogram` times.

use anyhow::{bail, Result};

use super::{engine, Channels, HistogramGpu, Tunables};
use crate::bench::{Case, Sizes, Unit};
use crate::gpu::{Engine, Gpu};
use crate::io::image::Image;
use crate::ops::sample_bytes;

/// `bench histogram`: a 3840x2160 RGBA8 image, 4 channels (red, green, blue, luminance),
/// 256 bins; random pixels, and pixels of one colour (every pixel of a channel in one bin:
/// the worst case for atomics).
pub(super) fn cases<'e>(engine: &'e Engine, _: &Sizes) -> Result<Vec<Case<'e>>> {
    let (w, h) = (3840u32, 2160u32);
    let random = crate::bench::noise_bytes((w * h * 4) as usize, 0x2545_f491);
    let flat: Vec<u8> = [200u8, 120, 40, 255].repeat((w * h) as usize);
    let channels = Channels::of(4, false);
    let mut cases = Vec::new();
    for (name, data) in [("4K RGBA8 random", random), ("4K RGBA8 one colour", flat)] {
        let img = Image::new_u8(w, h, 4, data);
        let work = img.pixels() as f64;
        cases.push(match engine {
            Engine::Gpu(gpu) => {
                let tunables = Tunables::default_for(&gpu.limits);
                gpu_case(gpu, name.into(), &img, channels, 256, tunables)?
            }
            Engine::Cpu => Case::cpu("histogram", name.into(), Unit::Gpixps, work, move || {
                std::hint::black_box(engine::histogram(&img, channels, 256));
            }),
        });
    }
    Ok(cases)
}

/// A benchmark case on the GPU: the histogram of `img` (within one segment) with `tunables`.
pub(super) fn gpu_case<'g>(
    gpu: &'g Gpu,
    name: String,
    img: &Image,
    channels: Channels,
    bins: u32,
    tunables: Tunables,
) -> Result<Case<'g>> {
    let mut hg = HistogramGpu::new(gpu, bins);
    hg.tuning.tunables = tunables;
    let plan = hg.plan(
        img.width,
        img.height,
        img.channels,
        img.bit_depth(),
        channels,
    )?;
    if plan.segments.len() != 1 {
        bail!("a benchmark image must fit one segment");
    }
    gpu.write_padded(&plan.src, &sample_bytes(&img.samples));
    let work = img.pixels() as f64;
    Ok(Case::gpu("histogram", name, Unit::Gpixps, work, move |b| {
        b.clear_buffer(&plan.counts);
        plan.record(b, &plan.segments[0]);
    }))
}
