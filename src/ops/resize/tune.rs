//! The fused kernel's shape (its tile and its workgroup-memory budget) and how `gpukit tune
//! resize` searches it. The two-pass kernels have no tunables.

use anyhow::{bail, Result};

use super::fused::{BUDGET_WORDS, STEP_LINES, TILES};
use super::{Filter, ResizePlan};
use crate::bench::{self, Case, Unit};
use crate::gpu::{Engine, Gpu, Timings};
use crate::io::image::Image;
use crate::tune::{self, Level, OpTuning, SizeClass, Stage, Tunable};

/// The fused kernel's shape. Any choice gives the same bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Tunables {
    /// The tile first tried: output positions along the first pass's axis (a power of two)
    /// and along the second's (a multiple of 4: the segment a workgroup walks down); where
    /// it does not fit the budget, the smaller tiles of `fused::TILES` in turn.
    pub tile_u: u32,
    pub tile_v: u32,
    /// The most words of workgroup memory a tile may use (the adapter's limit caps it).
    pub budget_words: u32,
    /// The intermediate lines a step of the walk makes (a power of two from 8 to 64; fewer
    /// where the budget or the registers of the next step's input do not allow them).
    #[serde(default = "default_step_lines")]
    pub step_lines: u32,
}

fn default_step_lines() -> u32 {
    STEP_LINES
}

impl Tunables {
    pub const DEFAULT: Tunables = Tunables {
        tile_u: TILES[0].0,
        tile_v: TILES[0].1,
        budget_words: BUDGET_WORDS,
        step_lines: STEP_LINES,
    };

    /// The tiles to try in turn: this one, then each smaller one of `fused::TILES`.
    pub(super) fn tiles(&self) -> impl Iterator<Item = (u32, u32)> + '_ {
        let area = self.tile_u * self.tile_v;
        std::iter::once((self.tile_u, self.tile_v))
            .chain(TILES.into_iter().filter(move |&(u, v)| u * v < area))
    }
}

impl std::fmt::Display for Tunables {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "tile {}x{}, {} KiB, {} lines a step",
            self.tile_u,
            self.tile_v,
            self.budget_words / 256,
            self.step_lines
        )
    }
}

impl Tunable for Tunables {
    fn default_for(limits: &wgpu::Limits) -> Self {
        Tunables {
            budget_words: BUDGET_WORDS.min(limits.max_compute_workgroup_storage_size / 4),
            ..Tunables::DEFAULT
        }
    }

    /// Whether the kernel can run this choice on an adapter with `limits`.
    fn check(&self, limits: &wgpu::Limits) -> Result<()> {
        if !self.tile_u.is_power_of_two() || !(4..=128).contains(&self.tile_u) {
            bail!("resize's tile width must be a power of two from 4 to 128");
        }
        if !self.tile_v.is_multiple_of(4) || !(4..=256).contains(&self.tile_v) {
            bail!("resize's tile height must be a multiple of 4 from 4 to 256");
        }
        if !self.step_lines.is_power_of_two() || !(8..=64).contains(&self.step_lines) {
            bail!("resize's lines a step must be a power of two from 8 to 64");
        }
        let max = limits.max_compute_workgroup_storage_size / 4;
        if !(256..=max).contains(&self.budget_words) {
            bail!("resize's workgroup-memory budget must be 256 to {max} words");
        }
        Ok(())
    }
}

/// `gpukit tune resize`: the fused kernel's shape, RGBA8 images halved with lanczos3.
pub(super) struct Tuning;

impl OpTuning for Tuning {
    type Tunables = Tunables;

    fn classes(_: &Gpu, level: Level) -> Vec<SizeClass> {
        tune::image_classes(level)
    }

    fn stages() -> Vec<Stage<Tunables>> {
        vec![
            Stage {
                name: "tile",
                candidates: |best, _, quick| {
                    let tiles: &[(u32, u32)] = if quick {
                        &[(32, 32)]
                    } else {
                        &[
                            (16, 32),
                            (16, 64),
                            (32, 32),
                            (32, 64),
                            (32, 128),
                            (64, 32),
                            (64, 64),
                        ]
                    };
                    tiles
                        .iter()
                        .map(|&(tile_u, tile_v)| Tunables {
                            tile_u,
                            tile_v,
                            ..*best
                        })
                        .collect()
                },
            },
            Stage {
                name: "step",
                candidates: |best, _, quick| {
                    let lines: &[u32] = if quick { &[] } else { &[16, 32, 64] };
                    lines
                        .iter()
                        .map(|&step_lines| Tunables {
                            step_lines,
                            ..*best
                        })
                        .collect()
                },
            },
            Stage {
                name: "budget",
                candidates: |best, limits, quick| {
                    let words: &[u32] = if quick {
                        &[]
                    } else {
                        &[4096, 6144, 8192, 12288]
                    };
                    let max = limits.max_compute_workgroup_storage_size / 4;
                    words
                        .iter()
                        .filter(|&&w| w <= max)
                        .map(|&budget_words| Tunables {
                            budget_words,
                            ..*best
                        })
                        .collect()
                },
            },
        ]
    }

    /// Both pass orders (149x103 to 76x50, 97x400 to 88x40), gray to RGBA, against the
    /// CPU engine.
    fn verify(_: &Engine, gpu: &Gpu, t: &Tunables) -> Result<Option<String>> {
        for ((w, h), (ow, oh)) in [((149, 103), (76, 50)), ((97, 400), (88, 40))] {
            for c in 1..=4u8 {
                let n = (w * h * u32::from(c)) as usize;
                let img = Image::new_u8(w, h, c, bench::noise_bytes(n, 5 + u32::from(c)));
                let options = super::Options::new(
                    super::Size::Exact {
                        width: ow,
                        height: oh,
                    },
                    Filter::Lanczos3,
                );
                let want = super::engine::resize(&img, &options)?;
                let passes = super::passes(w, h, ow, oh, Filter::Lanczos3, 8);
                let plan = ResizePlan::with_tunables(gpu, &img, &passes, Filter::Lanczos3, *t)?;
                plan.write(gpu, &img);
                gpu.run_timed(&mut Timings::default(), 1, |b, _| plan.record(b))?;
                if plan.read(gpu)? != want {
                    return Ok(Some(format!(
                        "{} to {ow}x{oh} differs from the CPU engine",
                        img.describe()
                    )));
                }
            }
        }
        Ok(None)
    }

    /// The class's RGBA8 image halved with lanczos3 (both passes fused).
    fn case<'g>(
        gpu: &'g Gpu,
        class: &SizeClass,
        _: &'static str,
        t: &Tunables,
    ) -> Result<Case<'g>> {
        let img = class.image();
        let (ow, oh) = (img.width / 2, img.height / 2);
        let passes = super::passes(img.width, img.height, ow, oh, Filter::Lanczos3, 8);
        let plan = ResizePlan::with_tunables(gpu, img, &passes, Filter::Lanczos3, *t)?;
        plan.write(gpu, img);
        let name = format!("{}x{} to {ow}x{oh} RGBA8 lanczos3", img.width, img.height);
        let work = f64::from(ow) * f64::from(oh);
        Ok(Case::gpu("resize", name, Unit::Gpixps, work, move |b| {
            plan.record(b)
        }))
    }
}
