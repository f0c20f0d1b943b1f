//! `histogram`: exact per-channel histograms of 8- and 16-bit images (red, green, blue and
//! luminance, or gray; alpha on request), built on the GPU from privatised workgroup
//! histograms and summed by reduce passes; per-channel statistics; and the histogram plot,
//! drawn by a render pipeline.
//!
//! Passes per image (segment by segment when the pixels exceed one storage binding):
//! `histogram_chunk` (one histogram per tile of pixels, in workgroup memory, written out as
//! a chunk), `histogram_reduce` (levels of FAN_IN chunks into one, the last adding into the
//! image's counts), and `histogram_total` (the image's counts into a 64-bit running total,
//! for `--sum` and the plot). The plot is `histogram_plot_scale` then `histogram_plot`.

use std::borrow::Cow;
use std::collections::HashMap;
use std::rc::Rc;

use anyhow::{bail, Result};
use serde::Serialize;

use crate::bench::{Case, Unit};
use crate::gpu::{Batch, Engine, Gpu, Kernel, PassTimer, Timings, Usage};
use crate::io::image::{Image, Samples};
use crate::shader;

pub mod engine;

/// The most bins an 8-bit image can use: one per value.
pub const MAX_BINS_8BIT: u32 = 256;
/// The most bins a 16-bit image can use.
pub const MAX_BINS_16BIT: u32 = 65536;

/// Luminance weights for 0.2126, 0.7152, 0.0722, scaled by 2^15 and rounded so that they sum
/// to 2^15 exactly (so gray stays gray: R = G = B = v gives Y = v).
pub const LUMA_WEIGHTS: [u32; 3] = [6966, 23436, 2366];
pub const LUMA_SHIFT: u32 = 15;

// The defaults of `Tunables`. The chunk pass: invocations per workgroup (capped by the adapter), sub-histograms
// per workgroup (capped by workgroup storage), and tiles per image aimed at (two
// 1024-invocation workgroups on each of an H100's 132 SMs: one wave); chunks are kept within
// CHUNK_BUDGET bytes, so bigger bin counts get fewer, bigger tiles.
const CHUNK_WG_SIZE: u32 = 1024;
const MAX_COPIES: u32 = 8;
const TARGET_TILES: u64 = 256;
const CHUNK_BUDGET: u64 = 32 << 20;
// The reduce pass: invocations per workgroup, consecutive entries per workgroup, and chunks
// summed into one per level.
const REDUCE_WG_SIZE: u32 = 256;
const ENTRIES_PER_WG: u32 = 16;
const FAN_IN: u32 = 256;
// The running total and the plot's scale pass (a power of two: a tree reduction).
const TOTAL_WG_SIZE: u32 = 256;
const SCALE_WG_SIZE: u32 = 256;

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

/// Integer luminance, the same on every adapter. Keep in sync with `luminance` in
/// wgsl/histogram_chunk.wgsl.
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

/// The values of `channels` for one pixel of `px` (its samples: gray, gray+alpha, RGB or
/// RGBA): a gray pixel in a colour histogram counts as R = G = B, a pixel without alpha in a
/// histogram with alpha as opaque. The CPU mirror of `count_pixel` in histogram_chunk.wgsl.
fn pixel_values(px: &[u32], channels: Channels, maxval: u32) -> ([u32; 5], usize) {
    let alpha = match px.len() {
        2 => px[1],
        4 => px[3],
        _ => maxval,
    };
    let v = px[0];
    if channels.color {
        let (g, b) = if px.len() >= 3 {
            (px[1], px[2])
        } else {
            (v, v)
        };
        (
            [v, g, b, luminance(v, g, b), alpha],
            4 + usize::from(channels.alpha),
        )
    } else {
        ([v, alpha, 0, 0, 0], 1 + usize::from(channels.alpha))
    }
}

/// The CPU reference: every pixel's channel values binned and counted.
pub fn histogram_cpu(img: &Image, channels: Channels, bins: u32) -> Histogram {
    let maxval = img.max_value();
    let ic = img.channels as usize;
    let n = channels.count() as usize;
    let mut hist = Histogram::zeros(channels, bins);
    hist.pixels = img.pixels() as u64;
    let mut count = |px: &[u32]| {
        let (values, k) = pixel_values(px, channels, maxval);
        for (c, &v) in values[..k].iter().enumerate() {
            hist.counts[bin_of(v, bins, maxval) as usize * n + c] += 1;
        }
    };
    let mut px = [0u32; 4];
    match &img.samples {
        Samples::U8(s) => {
            for p in s.chunks_exact(ic) {
                for (d, &v) in px.iter_mut().zip(p) {
                    *d = u32::from(v);
                }
                count(&px[..ic]);
            }
        }
        Samples::U16(s) => {
            for p in s.chunks_exact(ic) {
                for (d, &v) in px.iter_mut().zip(p) {
                    *d = u32::from(v);
                }
                count(&px[..ic]);
            }
        }
    }
    hist
}

/// One channel's statistics, in bins (with 256 bins on an 8-bit image a bin is a value).
/// `None` (null in JSON) when nothing was counted.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ChannelStats {
    /// The lowest and highest bin with a count.
    pub min: Option<u32>,
    pub max: Option<u32>,
    /// The mean bin: sum of bin * count over the total count.
    pub mean: Option<f64>,
    /// The 50th, 1st and 99th percentiles: the lowest bin at which the running count
    /// reaches ceil(p% of the total) (at least 1).
    pub median: Option<u32>,
    pub p1: Option<u32>,
    pub p99: Option<u32>,
}

/// The statistics of one channel's counts.
pub fn channel_stats(counts: &[u64]) -> ChannelStats {
    let total: u64 = counts.iter().sum();
    if total == 0 {
        return ChannelStats {
            min: None,
            max: None,
            mean: None,
            median: None,
            p1: None,
            p99: None,
        };
    }
    let min = counts.iter().position(|&c| c > 0).map(|b| b as u32);
    let max = counts.iter().rposition(|&c| c > 0).map(|b| b as u32);
    let weighted: u128 = counts
        .iter()
        .enumerate()
        .map(|(b, &c)| b as u128 * c as u128)
        .sum();
    let percentile = |p: u128| {
        let rank = (p * total as u128).div_ceil(100).max(1);
        let mut seen = 0u128;
        counts.iter().position(|&c| {
            seen += c as u128;
            seen >= rank
        })
    };
    ChannelStats {
        min,
        max,
        mean: Some(weighted as f64 / total as f64),
        median: percentile(50).map(|b| b as u32),
        p1: percentile(1).map(|b| b as u32),
        p99: percentile(99).map(|b| b as u32),
    }
}

/// Keep in sync with `Params` in wgsl/histogram_chunk.wgsl.
#[repr(C)]
#[derive(Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
struct ChunkParams {
    n_pixels: u32,
    tile_units: u32,
    n_tiles: u32,
    bins: u32,
    n_ranges: u32,
}

/// Keep in sync with `Params` in wgsl/histogram_reduce.wgsl.
#[repr(C)]
#[derive(Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
struct ReduceParams {
    entries: u32,
    n_in: u32,
    fan_in: u32,
    n_out: u32,
    blocks: u32,
    accumulate: u32,
}

/// Keep in sync with `Params` in wgsl/histogram_total.wgsl.
#[repr(C)]
#[derive(Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
struct TotalParams {
    entries: u32,
}

/// The shape of the histogram kernels' work, which `gpukit tune` chooses per adapter and
/// size. Counts are exact for every choice.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Tunables {
    /// Invocations per chunk-pass workgroup (a power of two).
    pub chunk_wg_size: u32,
    /// The most sub-histograms per chunk-pass workgroup (fewer where workgroup storage is short).
    pub max_copies: u32,
    /// Tiles (chunks) per segment aimed at; fewer when the chunks would not fit CHUNK_BUDGET.
    pub target_tiles: u64,
    /// Invocations per reduce workgroup (a power of two), consecutive entries it sums (a power
    /// of two up to it), and chunks summed into one per level (at least 2).
    pub reduce_wg_size: u32,
    pub entries_per_wg: u32,
    pub fan_in: u32,
}

impl Tunables {
    /// The defaults (measured on an H200: 101 Gpix/s at 4K RGBA8), the chunk workgroup
    /// capped by the adapter's limits.
    pub fn default_for(limits: &wgpu::Limits) -> Tunables {
        Tunables {
            chunk_wg_size: CHUNK_WG_SIZE.min(max_invocations(limits)),
            max_copies: MAX_COPIES,
            target_tiles: TARGET_TILES,
            reduce_wg_size: REDUCE_WG_SIZE.min(max_invocations(limits)),
            entries_per_wg: ENTRIES_PER_WG,
            fan_in: FAN_IN,
        }
    }

    /// Whether the kernels can run this choice on an adapter with `limits`.
    pub fn check(&self, limits: &wgpu::Limits) -> Result<()> {
        let max = max_invocations(limits);
        let wg_ok = |v: u32| v.is_power_of_two() && v <= max;
        if !wg_ok(self.chunk_wg_size) || !wg_ok(self.reduce_wg_size) {
            bail!("histogram workgroup sizes must be powers of two up to {max}");
        }
        if !self.entries_per_wg.is_power_of_two() || self.entries_per_wg > self.reduce_wg_size {
            bail!("histogram entries per reduce workgroup must be a power of two up to its size");
        }
        if !(1..=64).contains(&self.max_copies) || self.target_tiles == 0 || self.fan_in < 2 {
            bail!("histogram copies must be 1 to 64, target tiles at least 1, fan-in at least 2");
        }
        Ok(())
    }
}

impl std::fmt::Display for Tunables {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "chunk wg={} copies={} tiles={}, reduce wg={} entries={} fan-in={}",
            self.chunk_wg_size,
            self.max_copies,
            self.target_tiles,
            self.reduce_wg_size,
            self.entries_per_wg,
            self.fan_in
        )
    }
}

fn max_invocations(limits: &wgpu::Limits) -> u32 {
    limits
        .max_compute_invocations_per_workgroup
        .min(limits.max_compute_workgroup_size_x)
}

/// Limits the plan works within: the adapter's, unless lowered (tests do, to reach the
/// segmented and bin-range paths with small images); and the kernels' shape.
#[derive(Clone, Copy, Debug)]
pub struct Tuning {
    /// The most bytes of pixels uploaded and bound at once (one segment).
    pub segment_bytes: u64,
    /// The workgroup storage the chunk pass may use.
    pub workgroup_bytes: u32,
    pub tunables: Tunables,
}

impl Tuning {
    pub fn for_gpu(gpu: &Gpu) -> Tuning {
        Tuning {
            segment_bytes: gpu
                .limits
                .max_storage_buffer_binding_size
                .min(gpu.limits.max_buffer_size),
            workgroup_bytes: gpu.limits.max_compute_workgroup_storage_size,
            tunables: Tunables::default_for(&gpu.limits),
        }
    }
}

/// The smallest run of whole pixels that fills whole vec4 words: (pixels, vec4s). RGBA8 is
/// 4 pixels in one vec4, RGB8 16 pixels in three.
fn unit(in_channels: u32, bits: u32) -> (u32, u32) {
    let bytes = in_channels * bits / 8;
    let pixels = 16 / gcd(16, bytes);
    (pixels, pixels * bytes / 16)
}

fn gcd(a: u32, b: u32) -> u32 {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

/// Sub-histograms per workgroup, bins per range and ranges, for `hc` channels of `bins`
/// bins in `workgroup_bytes` of storage: as many copies as fit (up to `max_copies`) when all
/// bins fit; else one copy and the bins split into ranges of even size, one pass each.
fn copies_and_span(hc: u32, bins: u32, workgroup_bytes: u32, max_copies: u32) -> (u32, u32, u32) {
    let words = workgroup_bytes / 4;
    let per_copy = hc * bins + 1;
    if per_copy <= words {
        (max_copies.min(words / per_copy), bins, 1)
    } else {
        let most = (words - 1) / hc;
        let ranges = bins.div_ceil(most);
        (1, bins.div_ceil(ranges), ranges)
    }
}

/// How one layout of image is cut up: shared by all its segments.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Geometry {
    wg_size: u32,
    unit_pixels: u32,
    unit_vecs: u32,
    copies: u32,
    span: u32,
    n_ranges: u32,
    /// Pixels per segment: a whole number of units.
    segment_pixels: u64,
    /// Tiles a segment of `segment_pixels` has at most.
    max_tiles: u64,
}

impl Geometry {
    fn new(gpu: &Gpu, tuning: &Tuning, in_channels: u32, bits: u32, hc: u32, bins: u32) -> Self {
        let (unit_pixels, unit_vecs) = unit(in_channels, bits);
        let t = tuning.tunables;
        let (copies, span, n_ranges) =
            copies_and_span(hc, bins, tuning.workgroup_bytes, t.max_copies);
        let pixel_bytes = (in_channels * bits / 8) as u64;
        let unit_bytes = unit_pixels as u64 * pixel_bytes;
        let segment_pixels = (tuning.segment_bytes / unit_bytes).max(1) * unit_pixels as u64;
        let chunk_bytes = bins as u64 * hc as u64 * 4;
        let budget = CHUNK_BUDGET.min(gpu.limits.max_storage_buffer_binding_size);
        // The chunk pass's tiles x ranges workgroups must fit a 2-D grid.
        let grid = u64::from(gpu.dispatch_limit).pow(2) / u64::from(n_ranges);
        let max_tiles = t.target_tiles.min(budget / chunk_bytes).min(grid).max(1);
        Geometry {
            wg_size: t.chunk_wg_size,
            unit_pixels,
            unit_vecs,
            copies,
            span,
            n_ranges,
            segment_pixels,
            max_tiles,
        }
    }

    /// (units per tile, tiles) for a segment of `pixels` pixels: at least one unit per
    /// invocation, at most `max_tiles` tiles.
    fn tiles(&self, pixels: u64) -> (u32, u32) {
        let units = pixels.div_ceil(self.unit_pixels as u64);
        let tile_units = units.div_ceil(self.max_tiles).max(self.wg_size as u64);
        (tile_units as u32, units.div_ceil(tile_units).max(1) as u32)
    }
}

/// The passes of one segment size: the chunk pass and the reduce levels.
struct SegmentPasses {
    pixels: u64,
    chunk_bind: wgpu::BindGroup,
    chunk_workgroups: u32,
    levels: Vec<(wgpu::BindGroup, u32)>,
}

/// One image layout's histogram on the device: buffers, bind groups and passes, reusable for
/// every image of that layout (frames of a video, `bench`).
pub struct HistogramPlan {
    chunk: Rc<Kernel>,
    reduce: Rc<Kernel>,
    geometry: Geometry,
    pixels: u64,
    in_channels: u8,
    bit_depth: u32,
    pixel_bytes: u64,
    entries: u32,
    channels: Channels,
    bins: u32,
    /// One segment's pixels, packed into words as the image stores them.
    src: wgpu::Buffer,
    /// The image's counts (u32, bin-major), added into by the last reduce level.
    counts: wgpu::Buffer,
    segments: Vec<SegmentPasses>,
    // Kept alive for the bind groups.
    _chunks: wgpu::Buffer,
    _scratch: wgpu::Buffer,
    _params: Vec<wgpu::Buffer>,
}

impl HistogramPlan {
    /// The segment sizes, in order: full segments, then the remainder.
    fn segment_sizes(pixels: u64, segment_pixels: u64) -> Vec<u64> {
        let full = pixels / segment_pixels;
        let rest = pixels % segment_pixels;
        let mut sizes = vec![segment_pixels; full as usize];
        if rest > 0 || pixels == 0 {
            sizes.push(rest);
        }
        sizes
    }

    /// Records one segment's passes (chunk, then reduce levels adding into `counts`).
    fn record(&self, batch: &mut Batch, seg: &SegmentPasses) {
        batch.dispatch(
            "histogram chunk",
            &self.chunk,
            &seg.chunk_bind,
            seg.chunk_workgroups,
        );
        for (bind, workgroups) in &seg.levels {
            batch.dispatch("histogram reduce", &self.reduce, bind, *workgroups);
        }
    }

    /// The passes for a segment of `pixels` pixels.
    fn passes(&self, pixels: u64) -> &SegmentPasses {
        self.segments
            .iter()
            .find(|s| s.pixels == pixels)
            .expect("a pass list for every segment size")
    }
}

/// The running 64-bit total on the device.
struct Total {
    channels: Channels,
    pixels: u64,
    /// (low, high) words of each count.
    buffer: wgpu::Buffer,
}

/// Histograms on the GPU: compiled kernels and the last plan kept between images, and the
/// running total for `--sum` and the plot.
pub struct HistogramGpu<'g> {
    gpu: &'g Gpu,
    bins: u32,
    pub tuning: Tuning,
    kernels: HashMap<String, Rc<Kernel>>,
    plan: Option<HistogramPlan>,
    total: Option<Total>,
    timer: Option<PassTimer>,
}

impl<'g> HistogramGpu<'g> {
    pub fn new(gpu: &'g Gpu, bins: u32) -> Self {
        HistogramGpu {
            gpu,
            bins,
            tuning: Tuning::for_gpu(gpu),
            kernels: HashMap::new(),
            plan: None,
            total: None,
            timer: None,
        }
    }

    /// Times each pass with timestamp queries, into the `Timings` given to `histogram`.
    pub fn time_passes(&mut self) {
        self.timer = Some(PassTimer::new(self.gpu, 64));
    }

    /// Shapes the kernels of the images histogrammed from now on (the next one is planned
    /// afresh when this changes anything).
    pub fn set_tunables(&mut self, tunables: Tunables) {
        if self.tuning.tunables != tunables {
            self.tuning.tunables = tunables;
            self.plan = None;
        }
    }

    fn kernel(&mut self, name: &str, constants: &[(&str, u32)]) -> Result<Rc<Kernel>> {
        let key = format!("{name}{constants:?}");
        if let Some(k) = self.kernels.get(&key) {
            return Ok(Rc::clone(k));
        }
        let shader = match name {
            "chunk" => shader!("histogram_chunk"),
            "reduce" => shader!("histogram_reduce"),
            "total" => shader!("histogram_total"),
            _ => shader!("histogram_plot_scale"),
        };
        let constants: Vec<(&str, f64)> = constants.iter().map(|&(k, v)| (k, v as f64)).collect();
        let kernel = Rc::new(self.gpu.kernel(&shader, "main", &constants)?);
        self.kernels.insert(key, Rc::clone(&kernel));
        Ok(kernel)
    }

    /// A plan for images of this layout and these channels.
    pub fn plan(
        &mut self,
        width: u32,
        height: u32,
        in_channels: u8,
        bit_depth: u32,
        channels: Channels,
    ) -> Result<HistogramPlan> {
        let gpu = self.gpu;
        check_bins(self.bins, bit_depth)?;
        let pixels = width as u64 * height as u64;
        if pixels > u32::MAX as u64 {
            bail!("{width}x{height} is more pixels than a 32-bit count holds");
        }
        let (ic, bits, hc, bins) = (
            u32::from(in_channels),
            bit_depth,
            channels.count(),
            self.bins,
        );
        let t = self.tuning.tunables;
        t.check(&gpu.limits)?;
        let g = Geometry::new(gpu, &self.tuning, ic, bits, hc, bins);
        let chunk = self.kernel(
            "chunk",
            &[
                ("WG_SIZE", g.wg_size),
                ("IN_CHANNELS", ic),
                ("BITS", bits),
                ("HC", hc),
                ("COPIES", g.copies),
                ("SPAN", g.span),
                ("UNIT_PIXELS", g.unit_pixels),
                ("UNIT_VECS", g.unit_vecs),
            ],
        )?;
        let reduce = self.kernel(
            "reduce",
            &[
                ("WG_SIZE", t.reduce_wg_size),
                ("ENTRIES_PER_WG", t.entries_per_wg),
            ],
        )?;
        let entries = bins * hc;
        let pixel_bytes = u64::from(ic * bits / 8);
        let sizes = HistogramPlan::segment_sizes(pixels, g.segment_pixels);
        let first = sizes[0];
        let (_, max_tiles) = g.tiles(first);
        let src_bytes = first.div_ceil(g.unit_pixels as u64) * g.unit_vecs as u64 * 16;
        let src = gpu.buffer("histogram pixels", Usage::Storage, src_bytes);
        let chunks = gpu.buffer(
            "histogram chunks",
            Usage::Storage,
            max_tiles as u64 * entries as u64 * 4,
        );
        let scratch = gpu.buffer(
            "histogram scratch",
            Usage::Storage,
            max_tiles.div_ceil(t.fan_in) as u64 * entries as u64 * 4,
        );
        let counts = gpu.buffer("histogram counts", Usage::Storage, entries as u64 * 4);
        let mut params = Vec::new();
        let mut segments = Vec::new();
        for &seg_pixels in &sizes {
            if segments
                .iter()
                .any(|s: &SegmentPasses| s.pixels == seg_pixels)
            {
                continue;
            }
            let (tile_units, n_tiles) = g.tiles(seg_pixels);
            let p = gpu.upload(
                "histogram chunk params",
                Usage::Uniform,
                &[ChunkParams {
                    n_pixels: seg_pixels as u32,
                    tile_units,
                    n_tiles,
                    bins,
                    n_ranges: g.n_ranges,
                }],
            );
            let chunk_bind = gpu.bind(&chunk, &[&p, &src, &chunks]);
            params.push(p);
            let mut levels = Vec::new();
            let (mut n_in, mut in_chunks) = (n_tiles, true);
            let blocks = entries.div_ceil(t.entries_per_wg);
            loop {
                let n_out = n_in.div_ceil(t.fan_in);
                let last = n_out == 1;
                let p = gpu.upload(
                    "histogram reduce params",
                    Usage::Uniform,
                    &[ReduceParams {
                        entries,
                        n_in,
                        fan_in: t.fan_in,
                        n_out,
                        blocks,
                        accumulate: u32::from(last),
                    }],
                );
                let (from, to) = match (in_chunks, last) {
                    (true, true) => (&chunks, &counts),
                    (true, false) => (&chunks, &scratch),
                    (false, true) => (&scratch, &counts),
                    (false, false) => (&scratch, &chunks),
                };
                levels.push((gpu.bind(&reduce, &[&p, from, to]), n_out * blocks));
                params.push(p);
                if last {
                    break;
                }
                n_in = n_out;
                in_chunks = !in_chunks;
            }
            segments.push(SegmentPasses {
                pixels: seg_pixels,
                chunk_bind,
                chunk_workgroups: n_tiles * g.n_ranges,
                levels,
            });
        }
        Ok(HistogramPlan {
            chunk,
            reduce,
            geometry: g,
            pixels,
            in_channels,
            bit_depth,
            pixel_bytes,
            entries,
            channels,
            bins,
            src,
            counts,
            segments,
            _chunks: chunks,
            _scratch: scratch,
            _params: params,
        })
    }

    /// Starts a running total on the device over the images histogrammed from now on, all
    /// counted with `channels`.
    pub fn start_total(&mut self, channels: Channels) {
        let entries = self.bins as u64 * channels.count() as u64;
        self.total = Some(Total {
            channels,
            pixels: 0,
            buffer: self
                .gpu
                .buffer("histogram total", Usage::Storage, entries * 8),
        });
    }

    /// The histogram of `img` counted as `channels`, added into the running total if one was
    /// started (its channels must then be `channels`).
    pub fn histogram(
        &mut self,
        img: &Image,
        channels: Channels,
        timings: &mut Timings,
    ) -> Result<Histogram> {
        let gpu = self.gpu;
        let same = self.plan.as_ref().is_some_and(|p| {
            (p.pixels, p.in_channels, p.bit_depth, p.channels)
                == (img.pixels() as u64, img.channels, img.bit_depth(), channels)
        });
        if !same {
            let plan = timings.phase("pipeline", || {
                self.plan(
                    img.width,
                    img.height,
                    img.channels,
                    img.bit_depth(),
                    channels,
                )
            })?;
            self.plan = Some(plan);
        }
        let total_kernel = match &self.total {
            Some(t) => {
                assert_eq!(t.channels, channels, "one set of channels per total");
                Some(self.kernel("total", &[("WG_SIZE", TOTAL_WG_SIZE)])?)
            }
            None => None,
        };
        let plan = self.plan.as_ref().expect("planned above");
        let bytes = sample_bytes(&img.samples);
        let sizes = HistogramPlan::segment_sizes(plan.pixels, plan.geometry.segment_pixels);
        let mut start = 0u64;
        for (i, &seg_pixels) in sizes.iter().enumerate() {
            timings.phase("upload", || {
                let from = (start * plan.pixel_bytes) as usize;
                let to = ((start + seg_pixels) * plan.pixel_bytes) as usize;
                write_padded(gpu, &plan.src, &bytes[from..to]);
            });
            let mut batch = gpu.batch(self.timer.as_mut());
            if i == 0 {
                batch.encoder.clear_buffer(&plan.counts, 0, None);
            }
            plan.record(&mut batch, plan.passes(seg_pixels));
            if i + 1 == sizes.len() {
                if let (Some(t), Some(k)) = (&self.total, &total_kernel) {
                    let p = gpu.upload(
                        "histogram total params",
                        Usage::Uniform,
                        &[TotalParams {
                            entries: plan.entries,
                        }],
                    );
                    let bind = gpu.bind(k, &[&p, &plan.counts, &t.buffer]);
                    batch.dispatch(
                        "histogram total",
                        k,
                        &bind,
                        plan.entries.div_ceil(TOTAL_WG_SIZE),
                    );
                }
            }
            timings.phase("compute", || batch.submit())?;
            if let Some(timer) = self.timer.as_mut() {
                timings.add_passes(&timer.take(gpu)?);
            }
            start += seg_pixels;
        }
        if let Some(t) = self.total.as_mut() {
            t.pixels += plan.pixels;
        }
        let counts: Vec<u32> = timings.phase("download", || {
            gpu.read_vec(&plan.counts, plan.entries as usize)
        })?;
        Ok(Histogram {
            channels,
            bins: plan.bins,
            pixels: plan.pixels,
            counts: counts.into_iter().map(u64::from).collect(),
        })
    }

    /// The running total so far.
    pub fn total(&self) -> Result<Histogram> {
        let t = self.total.as_ref().expect("start_total was called");
        let entries = self.bins as usize * t.channels.count() as usize;
        let words: Vec<u32> = self.gpu.read_vec(&t.buffer, 2 * entries)?;
        Ok(Histogram {
            channels: t.channels,
            bins: self.bins,
            pixels: t.pixels,
            counts: words
                .chunks_exact(2)
                .map(|w| u64::from(w[0]) | u64::from(w[1]) << 32)
                .collect(),
        })
    }

    /// The plot of the running total, `width` x `height`, drawn on the GPU: the columns and
    /// scales by `histogram_plot_scale`, the picture by `histogram_plot` through a render
    /// pipeline.
    pub fn plot_total(&mut self, width: u32, height: u32) -> Result<Image> {
        let gpu = self.gpu;
        let channels = self
            .total
            .as_ref()
            .expect("start_total was called")
            .channels;
        let layout = PlotLayout::new(channels, height);
        let kernel = self.kernel("scale", &[("WG_SIZE", SCALE_WG_SIZE)])?;
        let t = self.total.as_ref().expect("checked above");
        let p = gpu.upload(
            "histogram plot scale params",
            Usage::Uniform,
            &[ScaleParams {
                width,
                bins: self.bins,
                channels: channels.count(),
                plotted: layout.plotted,
                top_mask: layout.top_mask,
                bottom_mask: layout.bottom_mask,
            }],
        );
        let columns = gpu.buffer("histogram plot columns", Usage::Storage, width as u64 * 16);
        let scale = gpu.buffer("histogram plot scale", Usage::Storage, 8);
        let bind = gpu.bind(&kernel, &[&p, &t.buffer, &columns, &scale]);
        let mut batch = gpu.batch(None);
        batch.dispatch("histogram plot scale", &kernel, &bind, 1);
        batch.submit()?;
        let params = gpu.upload(
            "histogram plot params",
            Usage::Uniform,
            &[layout.params(width, height)],
        );
        let rgba = gpu.render_fullscreen(
            &shader!("histogram_plot"),
            &[&params, &columns, &scale],
            width,
            height,
        )?;
        let rgb = rgba
            .chunks_exact(4)
            .flat_map(|p| [p[0], p[1], p[2]])
            .collect();
        Ok(Image::new_u8(width, height, 3, rgb))
    }
}

/// The samples as the bytes the GPU reads: 8-bit as they are, 16-bit little-endian.
fn sample_bytes(samples: &Samples) -> Cow<'_, [u8]> {
    match samples {
        Samples::U8(s) => Cow::Borrowed(s),
        Samples::U16(s) if cfg!(target_endian = "little") => Cow::Borrowed(bytemuck::cast_slice(s)),
        Samples::U16(s) => Cow::Owned(s.iter().flat_map(|v| v.to_le_bytes()).collect()),
    }
}

/// Writes `bytes` at the start of `buffer`; a tail short of a word is padded with zeros.
fn write_padded(gpu: &Gpu, buffer: &wgpu::Buffer, bytes: &[u8]) {
    let whole = bytes.len() / 4 * 4;
    if whole > 0 {
        gpu.queue.write_buffer(buffer, 0, &bytes[..whole]);
    }
    if whole < bytes.len() {
        let mut tail = [0u8; 4];
        tail[..bytes.len() - whole].copy_from_slice(&bytes[whole..]);
        gpu.queue.write_buffer(buffer, whole as u64, &tail);
    }
}

/// Histograms of many images on one engine, with an optional running total: the GPU path
/// or the CPU reference behind one interface, for the command line.
pub enum Histogrammer<'g> {
    Gpu(Box<HistogramGpu<'g>>),
    Cpu { bins: u32, total: Option<Histogram> },
}

impl<'g> Histogrammer<'g> {
    pub fn new(engine: &'g Engine, bins: u32) -> Self {
        match engine {
            Engine::Gpu(gpu) => Histogrammer::Gpu(Box::new(HistogramGpu::new(gpu, bins))),
            Engine::Cpu => Histogrammer::Cpu { bins, total: None },
        }
    }

    /// Times each GPU pass (with `--timings`); nothing on the CPU backend.
    pub fn time_passes(&mut self) {
        if let Histogrammer::Gpu(h) = self {
            h.time_passes();
        }
    }

    /// See [`HistogramGpu::set_tunables`]; nothing on the CPU backend.
    pub fn set_tunables(&mut self, tunables: Tunables) {
        if let Histogrammer::Gpu(h) = self {
            h.set_tunables(tunables);
        }
    }

    pub fn start_total(&mut self, channels: Channels) {
        match self {
            Histogrammer::Gpu(h) => h.start_total(channels),
            Histogrammer::Cpu { bins, total } => *total = Some(Histogram::zeros(channels, *bins)),
        }
    }

    pub fn histogram(
        &mut self,
        img: &Image,
        channels: Channels,
        timings: &mut Timings,
    ) -> Result<Histogram> {
        match self {
            Histogrammer::Gpu(h) => h.histogram(img, channels, timings),
            Histogrammer::Cpu { bins, total } => {
                check_bins(*bins, img.bit_depth())?;
                let hist = timings.phase("compute", || histogram_cpu(img, channels, *bins));
                if let Some(t) = total {
                    t.add(&hist);
                }
                Ok(hist)
            }
        }
    }

    pub fn total(&self) -> Result<Histogram> {
        match self {
            Histogrammer::Gpu(h) => h.total(),
            Histogrammer::Cpu { total, .. } => Ok(total.clone().expect("start_total was called")),
        }
    }

    /// The plot of the running total.
    pub fn plot_total(&mut self, width: u32, height: u32) -> Result<Image> {
        match self {
            Histogrammer::Gpu(h) => h.plot_total(width, height),
            Histogrammer::Cpu { total, .. } => Ok(plot_cpu(
                total.as_ref().expect("start_total was called"),
                width,
                height,
            )),
        }
    }
}

/// Keep in sync with `Params` in wgsl/histogram_plot_scale.wgsl.
#[repr(C)]
#[derive(Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
struct ScaleParams {
    width: u32,
    bins: u32,
    channels: u32,
    plotted: u32,
    top_mask: u32,
    bottom_mask: u32,
}

/// Keep in sync with `Params` in wgsl/histogram_plot.wgsl.
#[repr(C)]
#[derive(Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
struct PlotParams {
    width: u32,
    height: u32,
    top_height: u32,
    gap: u32,
    top_mask: u32,
    bottom_mask: u32,
    _pad: [u32; 2],
    separator: [f32; 4],
    palette: [[f32; 4]; 16],
}

/// Separator rows between the two panels.
const PLOT_GAP: u32 = 2;
const PLOT_BACKGROUND: [u8; 3] = [24, 24, 24];
const PLOT_SEPARATOR: [u8; 3] = [96, 96, 96];

/// How the plot is laid out and coloured for a set of channels. Colour: red, green and blue
/// overlaid in the top panel, luminance in the bottom one (alpha is not drawn). Gray: gray in
/// the top panel, alpha (if counted) in the bottom one.
struct PlotLayout {
    plotted: u32,
    top_mask: u32,
    bottom_mask: u32,
    top_height: u32,
    gap: u32,
    palette: [[u8; 3]; 16],
}

impl PlotLayout {
    fn new(channels: Channels, height: u32) -> PlotLayout {
        let mut palette = [PLOT_BACKGROUND; 16];
        let (plotted, top_mask, bottom_mask) = if channels.color {
            // Bits 0, 1, 2 (red, green, blue) mix like light; bit 3 is luminance.
            palette[1] = [230, 60, 60];
            palette[2] = [60, 200, 60];
            palette[3] = [225, 205, 60];
            palette[4] = [70, 110, 240];
            palette[5] = [215, 80, 215];
            palette[6] = [60, 200, 215];
            palette[7] = [235, 235, 235];
            palette[8] = [200, 200, 200];
            (4, 0b0111, 0b1000)
        } else {
            palette[1] = [200, 200, 200];
            palette[2] = [120, 170, 255];
            if channels.alpha {
                (2, 0b01, 0b10)
            } else {
                (1, 0b01, 0)
            }
        };
        let (top_height, gap) = if bottom_mask == 0 {
            (height, 0)
        } else {
            ((height - PLOT_GAP) / 2, PLOT_GAP)
        };
        PlotLayout {
            plotted,
            top_mask,
            bottom_mask,
            top_height,
            gap,
            palette,
        }
    }

    fn params(&self, width: u32, height: u32) -> PlotParams {
        let f = |c: [u8; 3]| [c[0], c[1], c[2], 255].map(|v| v as f32 / 255.0);
        PlotParams {
            width,
            height,
            top_height: self.top_height,
            gap: self.gap,
            top_mask: self.top_mask,
            bottom_mask: self.bottom_mask,
            _pad: [0; 2],
            separator: f(PLOT_SEPARATOR),
            palette: self.palette.map(f),
        }
    }
}

/// A 64-bit count as f32, rounded as the GPU does. Keep in sync with `count_f32` in
/// wgsl/histogram_plot_scale.wgsl.
fn count_f32(c: u64) -> f32 {
    (c >> 32) as u32 as f32 * 4294967296.0 + c as u32 as f32
}

/// Whether a bar of value `v` on scale `s` (square root) reaches row `r` of a panel of `h`
/// rows. Keep in sync with `lit` in wgsl/histogram_plot.wgsl.
fn lit(v: f32, s: f32, h: u32, r: u32) -> bool {
    let y = r as f32 + 0.5;
    let hf = h as f32;
    v > 0.0 && (r == 0 || y * y * s < v * hf * hf)
}

/// The plot's CPU mirror: the same columns, scales and per-pixel test as
/// histogram_plot_scale.wgsl and histogram_plot.wgsl.
pub fn plot_cpu(hist: &Histogram, width: u32, height: u32) -> Image {
    let layout = PlotLayout::new(hist.channels, height);
    let n = hist.channels.count() as usize;
    let bins = hist.bins as u64;
    let mut columns = vec![[0f32; 4]; width as usize];
    let mut scale = [0f32; 2];
    for (x, col) in columns.iter_mut().enumerate() {
        let x = x as u64;
        let b0 = x * bins / width as u64;
        let b1 = ((x + 1) * bins / width as u64).max(b0 + 1);
        for b in b0..b1 {
            for (c, m) in col.iter_mut().enumerate().take(layout.plotted as usize) {
                *m = m.max(count_f32(hist.counts[b as usize * n + c]));
            }
        }
        for (c, &m) in col.iter().enumerate().take(layout.plotted as usize) {
            if (layout.top_mask >> c) & 1 != 0 {
                scale[0] = scale[0].max(m);
            }
            if (layout.bottom_mask >> c) & 1 != 0 {
                scale[1] = scale[1].max(m);
            }
        }
    }
    let mut rgb = Vec::with_capacity(width as usize * height as usize * 3);
    for y in 0..height {
        let (mask, h, r, s) = if y < layout.top_height {
            (
                layout.top_mask,
                layout.top_height,
                layout.top_height - 1 - y,
                scale[0],
            )
        } else if y < layout.top_height + layout.gap {
            for _ in 0..width {
                rgb.extend_from_slice(&PLOT_SEPARATOR);
            }
            continue;
        } else {
            (
                layout.bottom_mask,
                height - layout.top_height - layout.gap,
                height - 1 - y,
                scale[1],
            )
        };
        for col in &columns {
            let mut bits = 0;
            for (c, &v) in col.iter().enumerate() {
                if (mask >> c) & 1 != 0 && lit(v, s, h, r) {
                    bits |= 1 << c;
                }
            }
            rgb.extend_from_slice(&layout.palette[bits]);
        }
    }
    Image::new_u8(width, height, 3, rgb)
}

/// `bench histogram`: a 3840x2160 RGBA8 image, 4 channels (red, green, blue, luminance),
/// 256 bins; random pixels, and pixels of one colour (every pixel of a channel in one bin:
/// the worst case for atomics).
pub fn bench_cases(engine: &Engine) -> Result<Vec<Case<'_>>> {
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
                std::hint::black_box(histogram_cpu(&img, channels, 256));
            }),
        });
    }
    Ok(cases)
}

/// A benchmark case on the GPU: the histogram of `img` (within one segment) with `tunables`.
pub fn gpu_case<'g>(
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
    write_padded(gpu, &plan.src, &sample_bytes(&img.samples));
    let work = img.pixels() as f64;
    Ok(Case::gpu("histogram", name, Unit::Gpixps, work, move |b| {
        b.encoder.clear_buffer(&plan.counts, 0, None);
        plan.record(b, &plan.segments[0]);
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bins_at_the_extremes() {
        // The largest product, 65535 * 65536, fits a u32.
        assert_eq!(65535u32.checked_mul(65536), Some(u32::MAX - 65535));
        assert_eq!(bin_of(65535, 65536, 65535), 65535);
        assert_eq!(bin_of(65534, 65536, 65535), 65534);
        assert_eq!(bin_of(1, 65536, 65535), 1);
        assert_eq!(bin_of(0, 65536, 65535), 0);
        assert_eq!(bin_of(255, 256, 255), 255);
        assert_eq!(bin_of(254, 256, 255), 254);
        assert_eq!(bin_of(255, 1, 255), 0);
        assert_eq!(bin_of(127, 2, 255), 0);
        assert_eq!(bin_of(128, 2, 255), 1);
        assert_eq!(bin_of(36, 7, 255), 0);
        assert_eq!(bin_of(37, 7, 255), 1);
    }

    #[test]
    fn luminance_keeps_gray_and_the_top_value() {
        assert_eq!(LUMA_WEIGHTS.iter().sum::<u32>(), 1 << LUMA_SHIFT);
        for v in [0, 1, 127, 255, 256, 65534, 65535] {
            assert_eq!(luminance(v, v, v), v);
        }
        // 0.2126 * 255 = 54.2, 0.7152 * 255 = 182.4, 0.0722 * 255 = 18.4.
        assert_eq!(luminance(255, 0, 0), 54);
        assert_eq!(luminance(0, 255, 0), 182);
        assert_eq!(luminance(0, 0, 255), 18);
    }

    #[test]
    fn units_hold_whole_pixels_in_whole_vec4s() {
        for (ic, bits, want) in [
            (1, 8, (16, 1)),
            (2, 8, (8, 1)),
            (3, 8, (16, 3)),
            (4, 8, (4, 1)),
            (1, 16, (8, 1)),
            (2, 16, (4, 1)),
            (3, 16, (8, 3)),
            (4, 16, (2, 1)),
        ] {
            assert_eq!(unit(ic, bits), want, "{ic} x {bits}");
        }
    }

    #[test]
    fn bins_split_into_ranges_that_fit() {
        // lavapipe's 32 KiB: 4 x 256 bins fit 7 times; 65536 bins need ranges.
        assert_eq!(copies_and_span(4, 256, 32768, MAX_COPIES), (7, 256, 1));
        assert_eq!(copies_and_span(4, 256, 49152, MAX_COPIES), (8, 256, 1));
        for (hc, bins, bytes) in [(4, 65536, 32768), (5, 65536, 49152), (1, 1000, 2048)] {
            let (copies, span, ranges) = copies_and_span(hc, bins, bytes, MAX_COPIES);
            assert_eq!(copies, 1);
            assert!(copies * (hc * span + 1) * 4 <= bytes);
            assert!(span * ranges >= bins && span * (ranges - 1) < bins);
        }
    }

    #[test]
    fn stats_from_counts() {
        // Values 0, 1, 1, 3 (and nothing else) in 4 bins.
        let s = channel_stats(&[1, 2, 0, 1]);
        assert_eq!((s.min, s.max, s.median), (Some(0), Some(3), Some(1)));
        assert_eq!(s.mean, Some(1.25));
        assert_eq!((s.p1, s.p99), (Some(0), Some(3)));
        let empty = channel_stats(&[0, 0]);
        assert_eq!((empty.min, empty.mean), (None, None));
        // 200 values: the 1st percentile is the 2nd smallest, the 99th the 198th.
        let mut c = vec![0u64; 200];
        c.iter_mut().for_each(|v| *v = 1);
        let s = channel_stats(&c);
        assert_eq!((s.p1, s.median, s.p99), (Some(1), Some(99), Some(197)));
    }

    #[test]
    fn cpu_reference_by_hand() {
        // Two RGB pixels: pure red and white; 2 bins.
        let img = Image::new_u8(2, 1, 3, vec![255, 0, 0, 255, 255, 255]);
        let h = histogram_cpu(&img, Channels::of(3, false), 2);
        assert_eq!(h.channel(0), [0, 2]); // red
        assert_eq!(h.channel(1), [1, 1]); // green
        assert_eq!(h.channel(2), [1, 1]); // blue
        assert_eq!(h.channel(3), [1, 1]); // luminance 54 and 255
                                          // Gray+alpha counted as colour with alpha: R = G = B, alpha kept.
        let img = Image::new_u16(1, 1, 2, vec![65535, 0]);
        let h = histogram_cpu(
            &img,
            Channels {
                color: true,
                alpha: true,
            },
            4,
        );
        assert_eq!(
            h.counts,
            [0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 0]
        );
    }
}
