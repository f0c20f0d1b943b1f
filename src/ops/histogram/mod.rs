//! `histogram`: exact per-channel histograms of 8- and 16-bit images (red, green, blue and
//! luminance, or gray; alpha on request), built on the GPU from privatised workgroup
//! histograms added into the image's counts with global atomics; per-channel statistics;
//! and the histogram plot, drawn by a render pipeline.
//!
//! Passes per image (segment by segment when the pixels exceed one storage binding):
//! `histogram_chunk` (one histogram per tile of pixels, in workgroup memory, added into the
//! image's counts), and `histogram_total` (the image's counts into a 64-bit running total,
//! for `--sum` and the plot). The plot is `histogram_plot_scale` then `histogram_plot`.
//!
//! Files: `reference` (the CPU reference), `stats`, `gpu` (the GPU passes and their plan),
//! `geometry` (how a layout is cut into tiles, segments and bin ranges),
//! `histogrammer` (many images on one engine, with a running total), `plot`, `doc` (the JSON
//! document and the summary), `frames` (8-bit Y'CbCr video frames converted and counted in
//! one pass on the CPU engine), `tune`, `bench`.

mod bench;
pub mod doc;
pub mod engine;
pub mod frames;
mod geometry;
mod gpu;
mod histogrammer;
mod plot;
mod reference;
mod stats;
mod tune;

use anyhow::{bail, Result};

use crate::gpu::{Engine, Timings};
use crate::io::image::Image;
pub use geometry::Tuning;
pub use gpu::{HistogramGpu, HistogramPlan};
pub use histogrammer::Histogrammer;
pub use plot::plot_cpu;
pub use reference::reference;
pub use stats::{channel_stats, ChannelStats};
pub use tune::Tunables;

/// `histogram` in the registry.
pub const OP: super::Op = super::Op {
    name: "histogram",
    bench: bench::cases,
    tune: Some(crate::tune::tune::<tune::Tuning>),
    shaders,
    command: true,
};

fn shaders() -> Vec<super::ShaderCase> {
    let mut cases = gpu::shaders();
    cases.extend(plot::shaders());
    cases
}

/// The most bins an 8-bit image can use: one per value.
pub const MAX_BINS_8BIT: u32 = 256;
/// The most bins a 16-bit image can use.
pub const MAX_BINS_16BIT: u32 = 65536;

/// Luminance weights for 0.2126, 0.7152, 0.0722, scaled by 2^15 and rounded so that they sum
/// to 2^15 exactly (so gray stays gray: R = G = B = v gives Y = v).
pub const LUMA_WEIGHTS: [u32; 3] = [6966, 23436, 2366];
pub const LUMA_SHIFT: u32 = 15;

/// Which channels a histogram counts: red, green, blue and luminance for colour, gray
/// otherwise; then alpha when asked for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Channels {
    pub color: bool,
    pub alpha: bool,
}

impl Channels {
    /// The channels of an image with `channels` samples per pixel: colour for RGB and RGBA,
    /// alpha when asked for and the image has it.
    pub fn of(channels: u8, alpha: bool) -> Channels {
        Channels {
            color: channels >= 3,
            alpha: alpha && (channels == 2 || channels == 4),
        }
    }

    /// Channels that hold both: the channels of a sum over images of either kind.
    pub fn union(self, other: Channels) -> Channels {
        Channels {
            color: self.color || other.color,
            alpha: self.alpha || other.alpha,
        }
    }

    /// How many channels: 1, 2, 4 or 5.
    pub fn count(self) -> u32 {
        (if self.color { 4 } else { 1 }) + u32::from(self.alpha)
    }

    /// Their names, in the order counts interleave them.
    pub fn names(self) -> Vec<&'static str> {
        let mut names = if self.color {
            vec!["red", "green", "blue", "luminance"]
        } else {
            vec!["gray"]
        };
        if self.alpha {
            names.push("alpha");
        }
        names
    }
}

/// The most bins an image of `bit_depth` bits can use.
pub fn max_bins(bit_depth: u32) -> u32 {
    if bit_depth == 16 {
        MAX_BINS_16BIT
    } else {
        MAX_BINS_8BIT
    }
}

/// `bins` must be 1 to `max_bins(bit_depth)`: more bins than values is a usage error.
pub fn check_bins(bins: u32, bit_depth: u32) -> Result<()> {
    let max = max_bins(bit_depth);
    if bins == 0 || bins > max {
        bail!(crate::UsageError(format!(
            "--bins {bins}: {bit_depth}-bit images take 1 to {max} bins"
        )));
    }
    Ok(())
}

/// The bin of value `v` (0..=maxval): floor(v * bins / maxval), the top value folded into
/// the last bin. The product is at most 65535 * 65536 = 2^32 - 2^16, so it fits a u32.
pub fn bin_of(v: u32, bins: u32, maxval: u32) -> u32 {
    (v * bins / maxval).min(bins - 1)
}

/// Integer luminance, the same on every adapter: `luminance` in wgsl/histogram_chunk.wgsl
/// computes it with the same weights (the shader test checks them).
pub fn luminance(r: u32, g: u32, b: u32) -> u32 {
    let [wr, wg, wb] = LUMA_WEIGHTS;
    (wr * r + wg * g + wb * b + (1 << (LUMA_SHIFT - 1))) >> LUMA_SHIFT
}

/// Counts of one image or of a sum of images.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Histogram {
    pub channels: Channels,
    pub bins: u32,
    /// Pixels counted (each channel's counts add up to it).
    pub pixels: u64,
    /// Bin-major: `counts[bin * channels.count() + channel]`.
    pub counts: Vec<u64>,
}

impl Histogram {
    pub fn zeros(channels: Channels, bins: u32) -> Histogram {
        Histogram {
            channels,
            bins,
            pixels: 0,
            counts: vec![0; bins as usize * channels.count() as usize],
        }
    }

    /// The counts of channel `c`, bin by bin.
    pub fn channel(&self, c: usize) -> Vec<u64> {
        let n = self.channels.count() as usize;
        self.counts.iter().skip(c).step_by(n).copied().collect()
    }

    /// Adds `other` (same channels and bins) into this one: `--sum` on the CPU backend.
    pub fn add(&mut self, other: &Histogram) {
        assert_eq!((self.channels, self.bins), (other.channels, other.bins));
        self.pixels += other.pixels;
        for (a, b) in self.counts.iter_mut().zip(&other.counts) {
            *a += b;
        }
    }
}

/// What to count.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Options {
    pub channels: Channels,
    /// Bins per channel: 1 to [`max_bins`] of the image's depth.
    pub bins: u32,
    /// The GPU kernels' shape; `None`: the tune cache's choice for this adapter and image
    /// size, else [`Tunables::default_for`] the adapter.
    pub tunables: Option<Tunables>,
}

/// The native CPU engine's estimated time for the histograms of `pixels` pixels, about 4 ns
/// a pixel ([`super::cpu_time`]).
pub fn cpu_estimate(pixels: u64) -> std::time::Duration {
    super::cpu_time(pixels as f64 * 4.0, usize::MAX)
}

/// What a GPU saves on the histograms of `frames` video frames of `pixels` pixels and `bytes`
/// bytes each (`histogram --per-frame`): the native CPU engine's time less the GPU path's
/// host time, which copies every frame into staging on the one thread that feeds the device,
/// about 0.33 ns a byte (half the blur's 0.65 ns for both copies: a histogram sends nothing
/// back but its counts). On the 16-core H100 host a 4K 4:2:0 stream ran at 231 frames/s on
/// the cores and 152-164 on the GPU (call AD of docs/BENCHMARKS.md): the copies, not the
/// counting, bound the GPU path there, so the saving is zero; on 2 cores it is not.
pub fn stream_gpu_saving(pixels: u64, bytes: u64, frames: u64) -> std::time::Duration {
    let copies = std::time::Duration::from_secs_f64(bytes as f64 * 0.33e-9);
    cpu_estimate(pixels)
        .saturating_sub(copies)
        .checked_mul(u32::try_from(frames).unwrap_or(u32::MAX))
        .unwrap_or(std::time::Duration::MAX)
}

/// The histogram of `img` on the engine, adding wall time per phase and GPU time per pass
/// to `timings`. (Many images, or a running total over them: [`Histogrammer`].)
pub fn run(
    engine: &Engine,
    img: &Image,
    options: &Options,
    timings: &mut Timings,
) -> Result<Histogram> {
    let mut h = Histogrammer::new(engine, options.bins);
    if let Some(t) = options.tunables {
        h.set_tunables(t);
    }
    h.time_passes();
    h.histogram(img, options.channels, timings)
}

#[cfg(test)]
mod tests;
