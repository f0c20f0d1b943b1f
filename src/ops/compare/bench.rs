//! `gpukit bench compare`, and the pairs and cases `gpukit tune compare` times.

use anyhow::Result;

use super::{reference, CompareGpu, Options, Tunables};
use crate::bench::{noise_bytes, Case, Sizes, Unit};
use crate::gpu::{Engine, Gpu};
use crate::io::image::Image;
use crate::ops::sample_bytes;

/// `gpukit bench compare`'s cases: a 4K RGB8 pair differing in about 0.35% of its pixels,
/// counted and drawn (the CI check of docs/BENCHMARKS.md), and counted only; and a pair
/// differing in every pixel, counted only: each in the default shape for its size
/// ([`Tunables::for_pixels`]). Bytes per second, as `bench copy` counts them: both images
/// read once, and the RGB8 diff image written once when drawn, so the rate compares with
/// copy's directly.
pub(super) fn cases<'e>(engine: &'e Engine, _: &Sizes) -> Result<Vec<Case<'e>>> {
    let (a, b) = pair(3840, 2160);
    let all = every_sample_changed(&a);
    let t = Tunables::for_pixels(a.pixels() as u64);
    let mut cases = Vec::new();
    for (b, share, diff) in [
        (&b, PAIR_SHARE, true),
        (&b, PAIR_SHARE, false),
        (&all, "every pixel", false),
    ] {
        cases.push(match engine {
            Engine::Gpu(gpu) => gpu_case(gpu, &a, b, share, diff, t)?,
            Engine::Cpu => {
                let label = name(&a, share, diff);
                let (a, b) = (a.clone(), b.clone());
                let opts = Options {
                    diff,
                    ..Options::default()
                };
                Case::cpu("compare", label, Unit::GBps, work(&a, diff), move || {
                    std::hint::black_box(reference(&a, &b, &opts));
                })
            }
        });
    }
    Ok(cases)
}

/// How much of [`pair`] differs, for the cases' names.
pub(super) const PAIR_SHARE: &str = "0.35%";

/// An RGB8 noise pair of `w` x `h` differing in every 286th pixel (0.35%).
pub(super) fn pair(w: u32, h: u32) -> (Image, Image) {
    let expected = noise_bytes((w * h * 3) as usize, 0x1f12_3bb5);
    let mut changed = expected.clone();
    for p in (0..(w * h) as usize).step_by(286) {
        changed[p * 3] ^= 0x40;
    }
    (
        Image::new_u8(w, h, 3, expected),
        Image::new_u8(w, h, 3, changed),
    )
}

/// An 8-bit image with one bit of every sample flipped: every pixel differs.
fn every_sample_changed(a: &Image) -> Image {
    let samples = sample_bytes(&a.samples).iter().map(|&v| v ^ 0x04).collect();
    Image::new_u8(a.width, a.height, a.channels, samples)
}

/// A noise pair of `w` x `h` with `channels` samples of `bits` bits, differing in a third of
/// its samples, for the checks of each shape.
pub(super) fn noise_pair(w: u32, h: u32, channels: u8, bits: u32, seed: u32) -> (Image, Image) {
    let n = (w * h) as usize * usize::from(channels);
    let words = |seed| -> Vec<u16> {
        noise_bytes(2 * n, seed)
            .chunks_exact(2)
            .map(|b| u16::from_le_bytes([b[0], b[1]]))
            .collect()
    };
    let (a, b) = (words(seed), words(seed + 1));
    let b: Vec<u16> = a
        .iter()
        .zip(&b)
        .enumerate()
        .map(|(i, (&x, &y))| if i % 3 == 0 { y } else { x })
        .collect();
    let make = |s: Vec<u16>| match bits {
        8 => Image::new_u8(w, h, channels, s.iter().map(|&v| v as u8).collect()),
        _ => Image::new_u16(w, h, channels, s),
    };
    (make(a), make(b))
}

/// The pass over `a` and `b` (one strip), of which `share` differs, in shape `t`, counting
/// only or drawing the diff.
pub(super) fn gpu_case<'g>(
    gpu: &'g Gpu,
    a: &Image,
    b: &Image,
    share: &str,
    diff: bool,
    t: Tunables,
) -> Result<Case<'g>> {
    let opts = Options {
        diff,
        tunables: Some(t),
        ..Options::default()
    };
    let plan = CompareGpu::new(gpu).plan(a, &opts)?;
    plan.upload_single(gpu, &sample_bytes(&a.samples), &sample_bytes(&b.samples))?;
    Ok(Case::gpu(
        "compare",
        name(a, share, diff),
        Unit::GBps,
        work(a, diff),
        move |batch| plan.record(batch, 0),
    ))
}

fn name(a: &Image, share: &str, diff: bool) -> String {
    let what = if diff { "diff image" } else { "metrics only" };
    let size = match (a.width, a.height) {
        (3840, 2160) => "4K".to_string(),
        (w, h) => format!("{w}x{h}"),
    };
    format!("{size} RGB8 pair, {share} differing, {what}")
}

/// Bytes moved: both images read, the RGB8 diff image written when drawn.
fn work(a: &Image, diff: bool) -> f64 {
    let image_bytes = a.pixels() as f64 * f64::from(a.channels) * f64::from(a.bit_depth() / 8);
    let diff_bytes = if diff { a.pixels() as f64 * 3.0 } else { 0.0 };
    2.0 * image_bytes + diff_bytes
}
