//! The histogram chunk kernel's shape (workgroup, copies, counter width, tiles) and how
//! `gpukit tune` searches it.

use anyhow::{bail, Result};

use super::{reference, Channels, HistogramGpu};
use crate::bench::{self, Case};
use crate::gpu::{Engine, Gpu, Timings};
use crate::io::image::Image;
use crate::tune::{self, pow2, Level, OpTuning, SizeClass, Stage, Tunable};

// The defaults of `Tunables`, as `gpukit tune` chose them on an H200 for 4096x2048 RGBA8
// (call AJ-kern3-1 of docs/BENCHMARKS.md): the chunk pass's invocations per workgroup (capped
// by the adapter), sub-histograms per workgroup (capped by workgroup storage), 32-bit
// counters (16-bit ones, two a word, lost at every size there), tiles per image aimed at
// (one 1024-invocation workgroup on each of an H100's 132 SMs; more tiles mean more global
// adds to the same counts, which cost more than the occupancy gains), and copies of the
// image's counts the tiles add into. The tiles' counts are kept within CHUNK_BUDGET bytes of
// 32-bit counts, so bigger bin counts get fewer, bigger tiles.
const CHUNK_WG_SIZE: u32 = 1024;
const MAX_COPIES: u32 = 2;
const PACKED: bool = false;
const TARGET_TILES: u64 = 128;
const SLICES: u32 = 8;
pub(super) const CHUNK_BUDGET: u64 = 32 << 20;
// The most bytes the copies of the image's counts take (read back per image): 16-bit bin
// counts get one.
pub(super) const SLICE_BUDGET: u64 = 1 << 20;

/// The shape of the histogram kernels' work, which `gpukit tune` chooses per adapter and
/// size. Counts are exact for every choice.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Tunables {
    /// Invocations per chunk-pass workgroup (a power of two).
    pub chunk_wg_size: u32,
    /// The most sub-histograms per chunk-pass workgroup (fewer where workgroup storage is short).
    pub max_copies: u32,
    /// 16-bit workgroup counters, two a word (tiles then kept small enough that none can
    /// overflow), rather than 32-bit ones.
    pub packed: bool,
    /// Tiles per segment aimed at; fewer when their counts would pass CHUNK_BUDGET.
    pub target_tiles: u64,
    /// Copies of the image's counts in device memory (1 to 64): tile t adds into copy
    /// t % slices, so fewer tiles add into one address; the copies are summed on reading.
    pub slices: u32,
}

impl Tunables {
    /// The defaults, the chunk workgroup capped by the adapter's limits.
    pub fn default_for(limits: &wgpu::Limits) -> Tunables {
        Tunables {
            chunk_wg_size: CHUNK_WG_SIZE.min(max_invocations(limits)),
            max_copies: MAX_COPIES,
            packed: PACKED,
            target_tiles: TARGET_TILES,
            slices: SLICES,
        }
    }
}

impl std::fmt::Display for Tunables {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "chunk wg={} copies={} counters={} tiles={} slices={}",
            self.chunk_wg_size,
            self.max_copies,
            if self.packed { 16 } else { 32 },
            self.target_tiles,
            self.slices,
        )
    }
}

pub(super) fn max_invocations(limits: &wgpu::Limits) -> u32 {
    limits
        .max_compute_invocations_per_workgroup
        .min(limits.max_compute_workgroup_size_x)
}

impl Tunable for Tunables {
    fn default_for(limits: &wgpu::Limits) -> Self {
        Tunables::default_for(limits)
    }
    /// Whether the kernels can run this choice on an adapter with `limits`.
    fn check(&self, limits: &wgpu::Limits) -> Result<()> {
        let max = max_invocations(limits);
        if !self.chunk_wg_size.is_power_of_two() || self.chunk_wg_size > max {
            bail!("histogram workgroup sizes must be powers of two up to {max}");
        }
        if !(1..=64).contains(&self.max_copies)
            || !(1..=64).contains(&self.slices)
            || self.target_tiles == 0
        {
            bail!("histogram copies and slices must be 1 to 64, target tiles at least 1");
        }
        Ok(())
    }
}

/// `gpukit tune histogram`: the kernels' shape on RGBA8 images of 2^18 to 2^23 pixels.
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
        _: &'static str,
        t: &Tunables,
    ) -> Result<Case<'g>> {
        case(gpu, class, t)
    }
}

fn stages() -> Vec<Stage<Tunables>> {
    vec![
        Stage {
            name: "chunk",
            candidates: |best, limits, quick| {
                let shapes: Vec<(u32, u32)> = if quick {
                    vec![(256, 4)]
                } else {
                    pow2(64, max_invocations(limits))
                        .flat_map(|wg| pow2(1, 32).map(move |c| (wg, c)))
                        .collect()
                };
                shapes
                    .into_iter()
                    .map(|(chunk_wg_size, max_copies)| Tunables {
                        chunk_wg_size,
                        max_copies,
                        ..*best
                    })
                    .collect()
            },
        },
        Stage {
            name: "tiles",
            candidates: |best, _, quick| {
                let tiles: Vec<u32> = if quick {
                    vec![64]
                } else {
                    pow2(32, 2048).collect()
                };
                tiles
                    .into_iter()
                    .map(|t| Tunables {
                        target_tiles: t as u64,
                        ..*best
                    })
                    .collect()
            },
        },
        Stage {
            name: "counters",
            candidates: |best, _, _| {
                vec![Tunables {
                    packed: !best.packed,
                    ..*best
                }]
            },
        },
        Stage {
            name: "slices",
            candidates: |best, _, quick| {
                let slices: Vec<u32> = if quick {
                    vec![1]
                } else {
                    pow2(1, 64).collect()
                };
                slices
                    .into_iter()
                    .map(|slices| Tunables { slices, ..*best })
                    .collect()
            },
        },
    ]
}

/// A 333x129 RGBA8 image, 256 bins of red, green, blue and luminance, count for count
/// against the CPU reference.
fn verify(gpu: &Gpu, t: &Tunables) -> Result<Option<String>> {
    let img = Image::new_u8(333, 129, 4, bench::noise_bytes(333 * 129 * 4, 11));
    let channels = Channels::of(4, false);
    let mut hg = HistogramGpu::new(gpu, 256);
    hg.set_tunables(*t);
    let got = hg.histogram(&img, channels, &mut Timings::default())?;
    let want = reference(&img, channels, 256);
    Ok((got.counts != want.counts).then(|| "counts differ from the CPU reference".into()))
}

fn case<'g>(gpu: &'g Gpu, class: &SizeClass, t: &Tunables) -> Result<Case<'g>> {
    let (w, h) = class.dims;
    let channels = Channels::of(4, false);
    super::bench::gpu_case(
        gpu,
        format!("{w}x{h} RGBA8 random"),
        class.image(),
        channels,
        256,
        *t,
    )
}
