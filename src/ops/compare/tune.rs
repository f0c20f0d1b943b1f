//! The compare pass's shape (workgroup size, units per invocation, the most workgroups) and
//! how `gpukit tune` searches it.

use anyhow::{ensure, Result};

use super::{bench, reference, CompareGpu, Options};
use crate::bench::Case;
use crate::gpu::{Engine, Gpu, Timings};
use crate::io::image::Image;
use crate::tune::{self, max_invocations, pow2, Level, OpTuning, SizeClass, Stage, Tunable};

/// The most units of 4 pixels one workgroup compares (65536 pixels): its 32-bit sums stay
/// exact (65536 * 65535 < 2^32). A capped pass gets more workgroups where it would exceed
/// this. wgsl/compare.wgsl's `Sums` relies on it, as its `MAX_GROUP_UNITS` (the shader test
/// checks they agree).
pub const MAX_GROUP_UNITS: u64 = 16384;

/// The shape of the compare pass's work, which `gpukit tune` chooses per adapter and size.
/// Counts and the diff image are identical for every choice.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Tunables {
    /// Invocations per workgroup (the shader's `WG_SIZE`): a power of two from 32 to the
    /// adapter's limit.
    pub wg_size: u32,
    /// Units of 4 pixels per invocation and chunk (the shader's `UNITS`, a generated const):
    /// 1, 2, 4, 8, 16 or 32. A chunk is `wg_size * units` units, at most [`MAX_GROUP_UNITS`].
    pub units: u32,
    /// Load the words of all of an invocation's units of a chunk before comparing any (more
    /// loads in flight, more registers), else each unit's just before comparing it (the
    /// shader's `PRELOAD`, a generated const).
    pub preload: bool,
    /// The most workgroups of a pass: each takes every `groups`-th chunk (a grid-stride
    /// loop), so that fewer workgroups, resident at once, cover the image. 0: no cap, one
    /// chunk per workgroup. More are taken where a workgroup would exceed
    /// [`MAX_GROUP_UNITS`].
    pub max_groups: u32,
}

impl Tunables {
    /// The shape the pass had before it was tunable (0.042 ms for the 4K RGB8 pair without
    /// the diff image on an H100, 40% of `bench copy`).
    pub const DEFAULT: Tunables = Tunables {
        wg_size: 256,
        units: 4,
        preload: false,
        max_groups: 0,
    };

    /// The shape for a pair of `pixels` pixels each when the tune cache has none: DEFAULT's
    /// workgroups, each invocation taking more units on larger images (16 from 4 Mpx, 8 from
    /// 1 Mpx), so that a 4K pair makes about 500 workgroups, one wave on a large GPU. From
    /// `gpukit tune compare` on an H100 (docs/BENCHMARKS.md, call M): 4 units took 0.044 ms
    /// for the 4096x2048 pair, 16 took 0.034; 8 was best at 2048x1024 and 4 at 512x512.
    pub fn for_pixels(pixels: u64) -> Tunables {
        let units = match pixels {
            p if p >= 4 << 20 => 16,
            p if p >= 1 << 20 => 8,
            _ => Tunables::DEFAULT.units,
        };
        Tunables {
            units,
            ..Tunables::DEFAULT
        }
    }

    /// Units per chunk: one workgroup's turn.
    pub fn chunk_units(&self) -> u64 {
        u64::from(self.wg_size) * u64::from(self.units)
    }

    /// Workgroups of a pass over `units` units: one per chunk, or `max_groups`, but never
    /// so few that one would take more than [`MAX_GROUP_UNITS`].
    pub fn groups(&self, units: u64) -> u32 {
        let chunks = units.div_ceil(self.chunk_units());
        if self.max_groups == 0 {
            return chunks as u32;
        }
        let least = chunks.div_ceil(MAX_GROUP_UNITS / self.chunk_units());
        u64::from(self.max_groups).max(least).min(chunks) as u32
    }
}

impl std::fmt::Display for Tunables {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let preload = if self.preload { " preload" } else { "" };
        write!(
            f,
            "wg={} units={}{preload} groups=",
            self.wg_size, self.units
        )?;
        match self.max_groups {
            0 => write!(f, "all"),
            g => write!(f, "{g}"),
        }
    }
}

impl Tunable for Tunables {
    fn default_for(_: &wgpu::Limits) -> Self {
        Tunables::DEFAULT
    }
    /// Whether the pass can run this choice on an adapter with `limits`.
    fn check(&self, limits: &wgpu::Limits) -> Result<()> {
        let wg = self.wg_size;
        crate::tune::check_workgroup("compare", wg, limits)?;
        ensure!(
            matches!(self.units, 1 | 2 | 4 | 8 | 16 | 32),
            "compare units per invocation must be 1, 2, 4, 8, 16 or 32, not {}",
            self.units
        );
        ensure!(
            self.chunk_units() <= MAX_GROUP_UNITS,
            "compare chunks of {wg} x {} units exceed {MAX_GROUP_UNITS}",
            self.units
        );
        Ok(())
    }
}

/// `gpukit tune compare`: the pass's shape on RGB8 pairs of 2^18 to 2^23 pixels.
pub(super) struct Tuning;

impl OpTuning for Tuning {
    type Tunables = Tunables;

    fn classes(_: &Gpu, level: Level) -> Vec<SizeClass> {
        tune::image_classes(level)
    }

    fn stages() -> Vec<Stage<Tunables>> {
        stages()
    }

    fn verify(_: &Engine, gpu: &Gpu, t: &Tunables) -> Result<Option<String>> {
        verify(gpu, t)
    }

    fn case<'g>(
        gpu: &'g Gpu,
        class: &SizeClass,
        stage: &'static str,
        t: &Tunables,
    ) -> Result<Case<'g>> {
        case(gpu, class, stage, t)
    }
}

/// The stage timed with the diff image drawn (the others count only).
const DRAWN: &str = "diff image";

fn stages() -> Vec<Stage<Tunables>> {
    vec![
        Stage {
            name: "shape",
            candidates: |best, limits, quick| {
                let shapes: Vec<(u32, u32, bool)> = if quick {
                    vec![(128, 8, true), (512, 1, false)]
                } else {
                    // Preloading one unit is loading it when it is compared.
                    pow2(64, max_invocations(limits).min(512))
                        .flat_map(|wg| pow2(1, 32).map(move |u| (wg, u)))
                        .flat_map(|(wg, u)| [(wg, u, false), (wg, u, true)])
                        .filter(|&(_, u, preload)| u > 1 || !preload)
                        .collect()
                };
                shapes
                    .into_iter()
                    .map(|(wg_size, units, preload)| Tunables {
                        wg_size,
                        units,
                        preload,
                        ..*best
                    })
                    .collect()
            },
        },
        Stage {
            name: "groups",
            candidates: |best, _, quick| {
                let caps: Vec<u32> = if quick {
                    vec![0, 64]
                } else {
                    [0].into_iter().chain(pow2(128, 8192)).collect()
                };
                caps.into_iter()
                    .map(|max_groups| Tunables {
                        max_groups,
                        ..*best
                    })
                    .collect()
            },
        },
        // No new candidates: the choice so far and the default, timed drawing the diff
        // image, so that the duel keeps no choice that is slower there.
        Stage {
            name: DRAWN,
            candidates: |_, _, _| Vec::new(),
        },
    ]
}

/// Pairs of awkward widths, 8- and 16-bit, RGB and RGBA, with the diff image and in two
/// workgroup caps, against the CPU reference.
fn verify(gpu: &Gpu, t: &Tunables) -> Result<Option<String>> {
    let cases = [
        (bench::noise_pair(333, 129, 3, 8, 17), "333x129 RGB8"),
        (bench::noise_pair(97, 61, 4, 16, 19), "97x61 RGBA16"),
    ];
    let cg = CompareGpu::new(gpu);
    for ((a, b), what) in &cases {
        // As chosen, and capped at 3 workgroups (most take several chunks).
        for max_groups in [t.max_groups, 3] {
            let opts = Options {
                diff: true,
                tunables: Some(Tunables { max_groups, ..*t }),
                ..Options::default()
            };
            let got = cg.compare(a, b, &opts, &mut Timings::default())?;
            if got != reference(a, b, &opts) {
                return Ok(Some(format!(
                    "{what}, at most {max_groups} workgroups: differs from the CPU reference"
                )));
            }
        }
    }
    Ok(None)
}

fn case<'g>(
    gpu: &'g Gpu,
    class: &SizeClass,
    stage: &'static str,
    t: &Tunables,
) -> Result<Case<'g>> {
    let (w, h) = class.dims;
    let (a, b): &(Image, Image) = class.input(|| bench::pair(w as u32, h as u32));
    let diff = stage == DRAWN;
    bench::gpu_case(gpu, a, b, bench::PAIR_SHARE, diff, *t)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Limits of a GPU with 1024 invocations per workgroup.
    fn limits() -> wgpu::Limits {
        wgpu::Limits {
            max_compute_invocations_per_workgroup: 1024,
            max_compute_workgroup_size_x: 1024,
            ..wgpu::Limits::default()
        }
    }

    #[test]
    fn larger_pairs_take_more_units_by_default() {
        let units = |w: u64, h: u64| Tunables::for_pixels(w * h).units;
        assert_eq!(units(512, 512), 4);
        assert_eq!(units(1023, 1024), 4);
        assert_eq!(units(1024, 1024), 8);
        assert_eq!(units(2048, 1024), 8);
        assert_eq!(units(2048, 2048), 16);
        assert_eq!(units(3840, 2160), 16);
        let limits = wgpu::Limits::default();
        for p in [1, 1 << 20, 4 << 20, 1 << 30] {
            let t = Tunables::for_pixels(p);
            assert!(t.check(&limits).is_ok(), "{t:?}");
            assert_eq!((t.wg_size, t.preload, t.max_groups), (256, false, 0));
        }
    }

    #[test]
    fn candidates_fit_the_limits_and_hold_the_defaults() {
        let limits = limits();
        let shapes = (stages()[0].candidates)(&Tunables::DEFAULT, &limits, false);
        assert!(shapes.contains(&Tunables::DEFAULT));
        assert_eq!(shapes.len(), 4 * (6 + 5));
        for s in stages() {
            for t in (s.candidates)(&Tunables::DEFAULT, &limits, false) {
                t.check(&limits).unwrap();
            }
        }
        assert!(Tunables::DEFAULT.check(&limits).is_ok());
    }

    #[test]
    fn groups_are_capped_but_never_take_more_than_their_sums_hold() {
        let t = |wg_size, units, max_groups| Tunables {
            wg_size,
            units,
            preload: false,
            max_groups,
        };
        // 4K: 2073600 units, 2025 chunks of 1024.
        assert_eq!(Tunables::DEFAULT.groups(2_073_600), 2025);
        assert_eq!(t(256, 4, 1024).groups(2_073_600), 1024);
        assert_eq!(t(256, 4, 4096).groups(2_073_600), 2025);
        // One workgroup may take 16 chunks of 1024: 2025 / 16 rounded up.
        assert_eq!(t(256, 4, 1).groups(2_073_600), 127);
        assert_eq!(t(512, 32, 1).groups(2_073_600), 127);
        assert_eq!(t(64, 1, 5).groups(1), 1);
        for wg in [32, 64, 512] {
            for units in [1, 32] {
                let t = t(wg, units, 1);
                t.check(&limits()).unwrap();
                for n in [1, 1000, 16384, 16385, 1 << 24, 123_456_789] {
                    let g = u64::from(t.groups(n));
                    let chunks = n.div_ceil(t.chunk_units());
                    assert!(
                        chunks.div_ceil(g) * t.chunk_units() <= MAX_GROUP_UNITS,
                        "{t} {n}"
                    );
                }
            }
        }
        assert!(t(512, 32, 0).check(&limits()).is_ok());
        for bad in [t(1024, 32, 0), t(512, 64, 0), t(16, 4, 0), t(96, 4, 0)] {
            assert!(bad.check(&limits()).is_err(), "{bad}");
        }
        assert!(t(512, 4, 0).check(&wgpu::Limits::default()).is_err());
    }
}
