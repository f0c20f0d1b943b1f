//! The fused GPU pass (wgsl/resize_fused.wgsl): both 1-D passes of an 8-bit resize in one
//! dispatch, a workgroup per output tile with its input, the first pass's results and both
//! passes' weights in workgroup memory. Where it applies ([`FusedLayout::new`]) and how its
//! workgroup memory is laid out, computed here once and handed to the shader (offsets in its
//! params, the size as its `SH_WORDS` override).

use super::coeffs::{Axis, Dir, Pass};
use super::tune::Tunables;

/// The tile shapes (output positions along the first pass's axis, along the second's): the
/// default first, then smaller ones, tried in turn where a tile does not fit the budget
/// ([`Tunables::tiles`]). Each side a multiple of 4, so that a tile's rows of output start
/// and end on a word.
pub(super) const TILES: [(u32, u32); 4] = [(32, 16), (16, 16), (16, 8), (8, 8)];

/// Threads a workgroup.
pub(super) const WG_SIZE: u32 = 256;

/// The workgroup memory (words) a tile may use by default: 24 KiB, so that eight 256-thread
/// workgroups (a full H100 SM of 2048 threads) fit an SM's 228 KiB; less where the adapter
/// has less.
pub(super) const BUDGET_WORDS: u32 = 6144;

/// The fewest lines of input a chunk holds (fewer, and the barriers of each chunk cost more
/// than the sums), unless the tile needs fewer.
const MIN_LINES: u32 = 8;

/// Its WGSL twin is `Params` in wgsl/resize_fused.wgsl (the shader test checks their fields).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, bytemuck::Pod, bytemuck::Zeroable)]
pub(super) struct FusedParams {
    pub in_w: u32,
    pub out_w: u32,
    pub n1: u32,
    pub n2: u32,
    pub tiles_u: u32,
    pub n_tiles: u32,
    pub in_stride: u32,
    pub rv: u32,
    pub off_w2: u32,
    pub off_s: u32,
    pub off_mid: u32,
    pub off_in: u32,
}
crate::ops::params_layout!(FusedParams {
    in_w,
    out_w,
    n1,
    n2,
    tiles_u,
    n_tiles,
    in_stride,
    rv,
    off_w2,
    off_s,
    off_mid,
    off_in
});

/// A fused resize's tile, its workgroup memory's layout and its grid.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct FusedLayout {
    /// Output positions a tile along the first pass's axis and along the second's.
    pub tu: u32,
    pub tv: u32,
    /// Whether the horizontal pass is the first.
    pub h_first: bool,
    /// Taps a position of the first pass and of the second (Pillow's ksize).
    pub k1: u32,
    pub k2: u32,
    /// Chunks of input the widest tile loads (one where its whole input fits).
    pub chunks: u32,
    /// Words of workgroup memory (`SH_WORDS`), rounded up to a multiple of 256 words so that
    /// images of nearby sizes share a pipeline.
    pub words: u32,
    pub params: FusedParams,
}

/// The most input (or intermediate) positions one tile of `t` consecutive output positions of
/// `axis` spans.
fn widest_span(axis: &Axis, t: u32) -> u32 {
    let n = axis.len();
    let t = t as usize;
    (0..n.div_ceil(t))
        .map(|i| {
            let (a, b) = (i * t, ((i + 1) * t).min(n) - 1);
            axis.start[b] + axis.count[b].min(axis.ksize as u32) - axis.start[a]
        })
        .max()
        .unwrap_or(0)
}

impl FusedLayout {
    /// The layout for resizing a `in_w`-wide image of `channels` 8-bit samples by `passes`,
    /// with tiles of `tile` and at most `budget` words of workgroup memory; None where the
    /// fused pass does not apply: one pass or none, 16-bit samples, output rows that do not
    /// end on a word (a word would then hold two tiles' pixels), or a tile that does not fit
    /// (very large reductions: each output line of the second pass reads `ksize` lines of
    /// the first's results).
    pub fn new(
        in_w: u32,
        channels: u32,
        depth: u32,
        passes: &[Pass],
        tile: (u32, u32),
        budget: u32,
    ) -> Option<FusedLayout> {
        let [first, second] = passes else {
            return None;
        };
        let h_first = first.dir == Dir::Horizontal;
        let (tu, tv) = tile;
        let (tx, ty) = if h_first { (tu, tv) } else { (tv, tu) };
        let out_w = if h_first {
            first.axis.len()
        } else {
            second.axis.len()
        } as u32;
        if depth != 8
            || !tx.is_multiple_of(4)
            || !(u64::from(out_w) * u64::from(channels)).is_multiple_of(4)
        {
            return None;
        }
        let (a1, a2) = (&first.axis, &second.axis);
        let (k1, k2) = (a1.ksize as u32, a2.ksize as u32);
        let nu = widest_span(a1, tu);
        let nv = widest_span(a2, tv);
        let in_stride = nu | 1;
        let off_w2 = k1 * tu;
        let off_s = off_w2 + k2 * tv;
        let off_mid = off_s + tu + tv;
        let off_in = off_mid + tu * nv;
        let room = budget.checked_sub(off_in)?;
        let rv = (room / in_stride).min(nv);
        let stage = ty * (tx + 1);
        let words = off_in + (rv * in_stride).max(stage);
        if rv < nv.min(MIN_LINES) || words > budget {
            return None;
        }
        let tiles_u = (a1.len() as u32).div_ceil(tu);
        let n_tiles = tiles_u.checked_mul((a2.len() as u32).div_ceil(tv))?;
        Some(FusedLayout {
            tu,
            tv,
            h_first,
            k1,
            k2,
            chunks: nv.div_ceil(rv),
            words: words.next_multiple_of(256).min(budget),
            params: FusedParams {
                in_w,
                out_w,
                n1: a1.len() as u32,
                n2: a2.len() as u32,
                tiles_u,
                n_tiles,
                in_stride,
                rv,
                off_w2,
                off_s,
                off_mid,
                off_in,
            },
        })
    }

    /// The first of `t`'s tiles ([`Tunables::tiles`]) that fits its budget, capped by the
    /// adapter's `limit_words`.
    pub fn choose(
        in_w: u32,
        channels: u32,
        depth: u32,
        passes: &[Pass],
        t: &Tunables,
        limit_words: u32,
    ) -> Option<FusedLayout> {
        let budget = t.budget_words.min(limit_words);
        t.tiles()
            .find_map(|tile| FusedLayout::new(in_w, channels, depth, passes, tile, budget))
    }

    /// The pipeline's overridable constants (alpha's as the two-pass kernels take them).
    pub fn overrides(&self, channels: u8, alpha: bool) -> [(&'static str, f64); 11] {
        let on = |b: bool| f64::from(u8::from(b));
        [
            ("WG_SIZE", f64::from(WG_SIZE)),
            ("TU", f64::from(self.tu)),
            ("TV", f64::from(self.tv)),
            ("H_FIRST", on(self.h_first)),
            ("K1", f64::from(self.k1)),
            ("K2", f64::from(self.k2)),
            ("SH_WORDS", f64::from(self.words)),
            ("CHANNELS", f64::from(channels)),
            ("DEPTH", 8.0),
            ("PREMULTIPLY", on(alpha)),
            ("UNPREMULTIPLY", on(alpha)),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::super::coeffs::passes;
    use super::super::Filter;
    use super::*;

    // 4K to 1080p lanczos3 (2x: 13 taps reserved a position, 12 used inside the image): a
    // 32x16 tile reads 31 * 2 + 12 = 74 input columns (75 words a line, odd) and
    // 15 * 2 + 12 = 42 intermediate rows, all in one chunk.
    #[test]
    fn the_4k_to_1080p_tile_is_one_chunk_of_hand_counted_size() {
        let p = passes(3840, 2160, 1920, 1080, Filter::Lanczos3, 8);
        let l = FusedLayout::choose(3840, 3, 8, &p, &Tunables::DEFAULT, 1 << 20).unwrap();
        assert!(l.h_first);
        assert_eq!((l.tu, l.tv), (32, 16));
        let q = l.params;
        assert_eq!((l.k1, l.k2), (13, 13));
        assert_eq!((q.in_stride, q.rv), (75, 42));
        // Weights 13 x 32 and 13 x 16, first positions 32 + 16, intermediate 32 x 42.
        assert_eq!((q.off_w2, q.off_s, q.off_mid), (416, 624, 672));
        assert_eq!(q.off_in, 672 + 32 * 42);
        assert_eq!(q.off_in + 75 * 42, 5166);
        assert_eq!((l.words, l.chunks), (5376, 1));
        assert_eq!((q.tiles_u, q.n_tiles), (60, 60 * 68));
    }

    #[test]
    fn it_applies_only_where_its_tiles_write_whole_words() {
        let p = passes(100, 80, 30, 20, Filter::Bicubic, 8);
        assert!(FusedLayout::choose(100, 4, 8, &p, &Tunables::DEFAULT, 1 << 20).is_some());
        // 30 RGB pixels end a row mid-word; 16-bit; one pass.
        assert!(FusedLayout::choose(100, 3, 8, &p, &Tunables::DEFAULT, 1 << 20).is_none());
        assert!(FusedLayout::choose(100, 4, 16, &p, &Tunables::DEFAULT, 1 << 20).is_none());
        let one = passes(100, 80, 100, 20, Filter::Bicubic, 8);
        assert!(FusedLayout::choose(100, 4, 8, &one, &Tunables::DEFAULT, 1 << 20).is_none());
        // A 40x reduction: 241 taps a position; no tile fits 24 KiB.
        let big = passes(4000, 4000, 100, 100, Filter::Lanczos3, 8);
        assert!(FusedLayout::choose(4000, 4, 8, &big, &Tunables::DEFAULT, 1 << 20).is_none());
    }
}
