//! The PNG encoder's tunables (the workgroup sizes of its filter and deflate kernels) and how
//! `gpukit tune encode_png` searches them. The scan between them is the scan op's, tuned as
//! `scan`.

use std::fmt;

use anyhow::Result;

use crate::bench::{Case, Unit};
use crate::gpu::{Engine, Gpu, Timings};
use crate::io::image::{Image, Samples};
use crate::io::metadata::Metadata;
use crate::tune::{
    check_workgroup, image_classes, max_invocations, pow2, Level, OpTuning, SizeClass, Stage,
    Tunable,
};

use super::plan::{PngPlan, Source};
use super::{Layout, OP};

/// The PNG kernels' workgroup sizes. The bytes are the same for every choice.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Tunables {
    /// Invocations a workgroup of wgsl/encode_png_filter.wgsl (one piece each).
    pub filter_wg: u32,
    /// Invocations a workgroup of wgsl/encode_png_deflate.wgsl (one piece each).
    pub deflate_wg: u32,
}

impl Tunables {
    /// The defaults: valid on every adapter (WebGPU's 256 invocations).
    pub const DEFAULT: Tunables = Tunables {
        filter_wg: 256,
        deflate_wg: 64,
    };

    /// The tune cache's choice on `gpu` for images of `pixels`, else the defaults.
    pub fn resolved(gpu: &Gpu, pixels: usize) -> Tunables {
        crate::tune::choice(gpu, OP.name, pixels as f64, Tunables::check)
            .unwrap_or(Tunables::DEFAULT)
    }
}

impl fmt::Display for Tunables {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "filter wg={} deflate wg={}",
            self.filter_wg, self.deflate_wg
        )
    }
}

impl Tunable for Tunables {
    fn default_for(_: &wgpu::Limits) -> Self {
        Tunables::DEFAULT
    }

    fn check(&self, limits: &wgpu::Limits) -> Result<()> {
        check_workgroup("encode_png filter", self.filter_wg, limits)?;
        check_workgroup("encode_png deflate", self.deflate_wg, limits)
    }
}

/// `gpukit tune encode_png`: the two workgroup sizes, one after the other, on photo-like RGB
/// images of the image classes.
pub(super) struct Tuning;

impl OpTuning for Tuning {
    type Tunables = Tunables;

    fn classes(_: &Gpu, level: Level) -> Vec<SizeClass> {
        image_classes(level)
    }

    fn stages() -> Vec<Stage<Tunables>> {
        vec![
            Stage {
                name: "filter",
                candidates: |best, limits, quick| {
                    let hi = if quick { 256 } else { max_invocations(limits) };
                    pow2(if quick { 64 } else { 32 }, hi)
                        .map(|filter_wg| Tunables { filter_wg, ..*best })
                        .collect()
                },
            },
            Stage {
                name: "deflate",
                candidates: |best, limits, quick| {
                    let hi = if quick { 128 } else { max_invocations(limits) };
                    pow2(32, hi)
                        .map(|deflate_wg| Tunables {
                            deflate_wg,
                            ..*best
                        })
                        .collect()
                },
            },
        ]
    }

    /// A 67x23 RGBA image, 16-bit, smooth with flat stretches (zero runs across pieces and
    /// rows, several workgroups), byte for byte against the CPU engine.
    fn verify(_: &Engine, gpu: &Gpu, t: &Tunables) -> Result<Option<String>> {
        let (w, h) = (67u32, 23u32);
        let noise = crate::bench::noise_bytes((w * h * 4) as usize, 67);
        let samples: Vec<u16> = noise
            .iter()
            .enumerate()
            .map(|(i, &n)| {
                if (i / 40) % 3 == 0 {
                    500
                } else {
                    (i as u16).wrapping_mul(31).wrapping_add(u16::from(n >> 5))
                }
            })
            .collect();
        let img = Image::new_u16(w, h, 4, samples);
        let meta = Metadata::default();
        let mut want = Vec::new();
        crate::io::image::encode(img.clone(), ::image::ImageFormat::Png, &mut want)?;
        let bytes = crate::ops::sample_bytes(&img.samples);
        let layout = Layout::of(&img);
        let got = super::encode_with(
            gpu,
            &layout,
            Source::Host(&bytes),
            &meta,
            *t,
            &mut Timings::default(),
        )?;
        Ok((got.as_ref() != Some(&want)).then(|| "the file differs from the CPU engine's".into()))
    }

    fn case<'g>(
        gpu: &'g Gpu,
        class: &SizeClass,
        _: &'static str,
        t: &Tunables,
    ) -> Result<Case<'g>> {
        let (w, h) = (class.dims.0 as u32, class.dims.1 as u32);
        let img: &Image =
            class.input(|| Image::new_u8(w, h, 3, crate::ops::encode::bench_image(w, h)));
        let Samples::U8(samples) = &img.samples else {
            unreachable!("made 8-bit")
        };
        let mut plan = PngPlan::new(gpu, &Layout::of(img), *t)?;
        plan.set_source(gpu, Source::Host(samples));
        Ok(Case::gpu(
            OP.name,
            format!("RGB {}", class.label),
            Unit::GBps,
            samples.len() as f64,
            move |b| plan.record(b),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn candidate_spaces_fit_the_limits_and_hold_the_defaults() {
        crate::tune::assert_stages_hold_the_default::<Tuning>();
        let limits = wgpu::Limits::default();
        let odd = Tunables {
            filter_wg: 48,
            ..Tunables::DEFAULT
        };
        assert!(odd.check(&limits).is_err());
        let big = Tunables {
            deflate_wg: 512,
            ..Tunables::DEFAULT
        };
        assert!(big.check(&limits).is_err());
    }
}
