//! The JPEG encoder's tunables (the workgroup sizes of its Huffman and stuffing kernels; the
//! block kernel's shape is fixed, one MCU a workgroup) and how `gpukit tune` searches them.
//! The scans between them are the scan op's, tuned as `scan`.

use std::fmt;

use anyhow::Result;

use crate::bench::{Case, Unit};
use crate::gpu::{Engine, Gpu, Timings};
use crate::io::image::Image;
use crate::io::jpeg::{self, EncodeOptions, Frame, Markers, Subsampling};
use crate::tune::{
    check_workgroup, image_classes, max_invocations, pow2, Level, OpTuning, SizeClass, Stage,
    Tunable,
};

use super::plan::EncodePlan;

/// The encoder kernels' workgroup sizes, which `gpukit tune` chooses per adapter and image
/// size. The bytes are the same for every choice.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Tunables {
    /// Invocations a workgroup of wgsl/encode_huffman.wgsl (one block each).
    pub huffman_wg: u32,
    /// Invocations a workgroup of wgsl/encode_stuff.wgsl (one coded word each).
    pub stuff_wg: u32,
}

impl Tunables {
    /// The defaults: valid on every adapter (WebGPU's 256 invocations).
    pub const DEFAULT: Tunables = Tunables {
        huffman_wg: 64,
        stuff_wg: 256,
    };

    /// The tune cache's choice on `gpu` for images of `pixels`, else the defaults.
    pub fn resolved(gpu: &Gpu, pixels: usize) -> Tunables {
        crate::tune::choice(gpu, super::OP.name, pixels as f64, Tunables::check)
            .unwrap_or(Tunables::DEFAULT)
    }
}

impl fmt::Display for Tunables {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "huffman wg={} stuff wg={}",
            self.huffman_wg, self.stuff_wg
        )
    }
}

impl Tunable for Tunables {
    fn default_for(_: &wgpu::Limits) -> Self {
        Tunables::DEFAULT
    }

    fn check(&self, limits: &wgpu::Limits) -> Result<()> {
        check_workgroup("encode huffman", self.huffman_wg, limits)?;
        check_workgroup("encode stuff", self.stuff_wg, limits)
    }
}

/// `gpukit tune encode`: the two workgroup sizes, one after the other, on photo-like RGB
/// images of the image classes, baseline 4:2:0 with Annex K tables.
pub(super) struct Tuning;

impl OpTuning for Tuning {
    type Tunables = Tunables;

    fn classes(_: &Gpu, level: Level) -> Vec<SizeClass> {
        image_classes(level)
    }

    fn stages() -> Vec<Stage<Tunables>> {
        vec![
            Stage {
                name: "huffman",
                candidates: |best, limits, quick| {
                    let hi = if quick { 128 } else { max_invocations(limits) };
                    pow2(32, hi)
                        .map(|huffman_wg| Tunables {
                            huffman_wg,
                            ..*best
                        })
                        .collect()
                },
            },
            Stage {
                name: "stuff",
                candidates: |best, limits, quick| {
                    let hi = if quick { 256 } else { max_invocations(limits) };
                    pow2(if quick { 128 } else { 32 }, hi)
                        .map(|stuff_wg| Tunables { stuff_wg, ..*best })
                        .collect()
                },
            },
        ]
    }

    /// A 37x29 noisy RGB image, 4:2:0 with optimised tables (dummy blocks, long codes, 0xFF
    /// bytes to stuff), byte for byte against the CPU encoder.
    fn verify(_: &Engine, gpu: &Gpu, t: &Tunables) -> Result<Option<String>> {
        let (w, h) = (37, 29);
        let samples = crate::bench::noise_bytes((w * h * 3) as usize, 37);
        let opts = options(true);
        let markers = Markers {
            density: (0, 1, 1),
            app: &[],
        };
        let mut want = Vec::new();
        jpeg::encode(&samples, w, h, 3, &opts, &markers, &mut want).map_err(anyhow::Error::msg)?;
        let frame = Frame::new(samples.len(), w, h, 3, &opts).map_err(anyhow::Error::msg)?;
        let got = super::Encoder::default().run(
            gpu,
            &frame,
            super::Source::Host(&samples),
            true,
            &markers,
            *t,
            &mut Timings::default(),
        )?;
        Ok((got != want).then(|| "the file differs from the CPU encoder's".into()))
    }

    fn case<'g>(
        gpu: &'g Gpu,
        class: &SizeClass,
        _: &'static str,
        t: &Tunables,
    ) -> Result<Case<'g>> {
        let (w, h) = (class.dims.0 as u32, class.dims.1 as u32);
        let img: &Image = class.input(|| Image::new_u8(w, h, 3, super::bench_image(w, h)));
        let crate::io::image::Samples::U8(samples) = &img.samples else {
            unreachable!("made 8-bit")
        };
        let frame =
            Frame::new(samples.len(), w, h, 3, &options(false)).map_err(anyhow::Error::msg)?;
        let mut plan = EncodePlan::new(gpu, &frame, false, *t)?;
        let src = plan.host_samples(gpu, samples);
        Ok(Case::gpu(
            super::OP.name,
            format!("RGB 4:2:0 {}", class.label),
            Unit::GBps,
            samples.len() as f64,
            move |b| plan.record(gpu, b, &src),
        ))
    }
}

/// Baseline 4:2:0 at quality 90.
fn options(optimize: bool) -> EncodeOptions {
    EncodeOptions {
        quality: 90,
        subsampling: Subsampling::S420,
        progressive: false,
        optimize,
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
            huffman_wg: 48,
            ..Tunables::DEFAULT
        };
        assert!(odd.check(&limits).is_err());
        let big = Tunables {
            stuff_wg: 512,
            ..Tunables::DEFAULT
        };
        assert!(big.check(&limits).is_err());
    }
}
