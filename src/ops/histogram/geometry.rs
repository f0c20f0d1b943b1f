//! How an image layout is cut up for the GPU: whole pixels in whole vec4 words, tiles per
//! segment, sub-histogram copies and bin ranges that fit workgroup memory.

use super::tune::CHUNK_BUDGET;
use super::Tunables;
use crate::gpu::Gpu;

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
pub(super) fn unit(in_channels: u32, bits: u32) -> (u32, u32) {
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
pub(super) fn copies_and_span(
    hc: u32,
    bins: u32,
    workgroup_bytes: u32,
    max_copies: u32,
) -> (u32, u32, u32) {
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
pub(super) struct Geometry {
    pub(super) wg_size: u32,
    pub(super) unit_pixels: u32,
    pub(super) unit_vecs: u32,
    pub(super) copies: u32,
    pub(super) span: u32,
    pub(super) n_ranges: u32,
    /// Pixels per segment: a whole number of units.
    pub(super) segment_pixels: u64,
    /// Tiles a segment of `segment_pixels` has at most.
    pub(super) max_tiles: u64,
}

impl Geometry {
    pub(super) fn new(
        gpu: &Gpu,
        tuning: &Tuning,
        in_channels: u32,
        bits: u32,
        hc: u32,
        bins: u32,
    ) -> Self {
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
    pub(super) fn tiles(&self, pixels: u64) -> (u32, u32) {
        let units = pixels.div_ceil(self.unit_pixels as u64);
        let tile_units = units.div_ceil(self.max_tiles).max(self.wg_size as u64);
        (tile_units as u32, units.div_ceil(tile_units).max(1) as u32)
    }
}
