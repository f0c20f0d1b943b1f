//! How an image layout is cut up for the GPU: whole pixels in whole vec4 words, tiles per
//! segment, sub-histogram copies and bin ranges that fit workgroup memory.

use super::tune::{CHUNK_BUDGET, SLICE_BUDGET};
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
/// bins, `pack` counters a word, in `workgroup_bytes` of storage: as many copies as fit (up
/// to `max_copies`) when all bins fit; else one copy and the bins split into ranges of even
/// size, one workgroup each.
pub(super) fn copies_and_span(
    hc: u32,
    bins: u32,
    pack: u32,
    workgroup_bytes: u32,
    max_copies: u32,
) -> (u32, u32, u32) {
    let words = workgroup_bytes / 4;
    let per_copy = (hc * bins).div_ceil(pack);
    if per_copy <= words {
        (max_copies.min(words / per_copy), bins, 1)
    } else {
        let most = words * pack / hc;
        let ranges = bins.div_ceil(most);
        (1, bins.div_ceil(ranges), ranges)
    }
}

/// The most units an invocation may count in one tile with 16-bit counters: a copy's counter
/// sees every pixel of its `wg_size / copies` invocations and must stay below 65536.
pub(super) fn packed_units_per_invocation(wg_size: u32, copies: u32, unit_pixels: u32) -> u32 {
    u16::MAX as u32 / (wg_size.div_ceil(copies) * unit_pixels)
}

/// How one layout of image is cut up: shared by all its segments.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Geometry {
    pub(super) wg_size: u32,
    pub(super) unit_pixels: u32,
    pub(super) unit_vecs: u32,
    pub(super) copies: u32,
    /// Counters a workgroup word: 1 (32-bit) or 2 (16-bit; tiles are then kept small enough).
    pub(super) pack: u32,
    pub(super) span: u32,
    pub(super) n_ranges: u32,
    /// Pixels per segment: a whole number of units.
    pub(super) segment_pixels: u64,
    /// Tiles a segment is cut into at most, unless 16-bit counters need smaller tiles.
    pub(super) max_tiles: u64,
    /// The most units a tile may have (16-bit counters), else `u64::MAX`.
    pub(super) max_tile_units: u64,
    /// The most tiles the grid holds (tiles x ranges workgroups in a 2-D grid).
    pub(super) grid: u64,
    /// Copies of the image's counts the tiles add into (tile t into copy t % slices).
    pub(super) slices: u32,
}

impl Geometry {
    /// The geometry of this layout with the tunables' counters: 16-bit ones where they are
    /// chosen and every segment's tiles can be kept small enough for them, else 32-bit.
    pub(super) fn new(
        gpu: &Gpu,
        tuning: &Tuning,
        in_channels: u32,
        bits: u32,
        hc: u32,
        bins: u32,
    ) -> Self {
        let layout = (in_channels, bits, hc, bins);
        if tuning.tunables.packed {
            let g = Self::with_pack(gpu, tuning, layout, 2);
            let units = g.segment_pixels.div_ceil(g.unit_pixels as u64);
            if g.max_tile_units > 0 && units.div_ceil(g.max_tile_units) <= g.grid {
                return g;
            }
        }
        Self::with_pack(gpu, tuning, layout, 1)
    }

    fn with_pack(
        gpu: &Gpu,
        tuning: &Tuning,
        (in_channels, bits, hc, bins): (u32, u32, u32, u32),
        pack: u32,
    ) -> Self {
        let (unit_pixels, unit_vecs) = unit(in_channels, bits);
        let t = tuning.tunables;
        let wg_size = t.chunk_wg_size;
        let (copies, span, n_ranges) =
            copies_and_span(hc, bins, pack, tuning.workgroup_bytes, t.max_copies);
        let pixel_bytes = (in_channels * bits / 8) as u64;
        let unit_bytes = unit_pixels as u64 * pixel_bytes;
        let segment_pixels = (tuning.segment_bytes / unit_bytes).max(1) * unit_pixels as u64;
        // Each tile adds up to bins * hc counts into the image's with global atomics: bigger
        // bin counts get fewer, bigger tiles.
        let chunk_bytes = bins as u64 * hc as u64 * 4;
        let max_tiles = t.target_tiles.min(CHUNK_BUDGET / chunk_bytes).max(1);
        // The chunk pass's tiles x ranges workgroups must fit a 2-D grid.
        let grid = u64::from(gpu.dispatch_limit).pow(2) / u64::from(n_ranges);
        let max_tile_units = if pack == 2 {
            u64::from(packed_units_per_invocation(wg_size, copies, unit_pixels))
                * u64::from(wg_size)
        } else {
            u64::MAX
        };
        Geometry {
            wg_size,
            unit_pixels,
            unit_vecs,
            copies,
            pack,
            span,
            n_ranges,
            segment_pixels,
            max_tiles,
            max_tile_units,
            grid,
            // No more slices than tiles, nor than SLICE_BUDGET bytes of counts to read back.
            slices: (t.slices as u64)
                .min(max_tiles)
                .min(SLICE_BUDGET / chunk_bytes)
                .max(1) as u32,
        }
    }

    /// (units per tile, tiles) for a segment of `pixels` pixels: at least one unit per
    /// invocation, at most `max_tiles` tiles unless 16-bit counters need smaller tiles (at
    /// most `max_tile_units`), and within the grid.
    pub(super) fn tiles(&self, pixels: u64) -> (u32, u32) {
        let units = pixels.div_ceil(self.unit_pixels as u64);
        let tile_units = units
            .div_ceil(self.max_tiles)
            .max(self.wg_size as u64)
            .min(self.max_tile_units)
            .max(units.div_ceil(self.grid));
        (tile_units as u32, units.div_ceil(tile_units).max(1) as u32)
    }
}
