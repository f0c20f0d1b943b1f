//! The horizontal pass over 8-bit samples (wgsl/resize_h8.wgsl): a workgroup per tile of
//! output columns by rows, its input span in workgroup memory a pixel a word, a thread per
//! column of a few rows. Where it applies ([`RowsLayout::new`]) and its workgroup memory's
//! layout, computed here once and handed to the shader as its override constants.

use super::coeffs::Axis;

/// Threads a workgroup.
const WG_SIZE: u32 = 256;

/// Output columns a workgroup, the widest first: a narrower tile where the wide one's input
/// does not fit the budget (large reductions).
const TILE_WIDTHS: [u32; 4] = [64, 32, 16, 8];

/// Rows a thread sums (`RPT`).
pub(super) const ROWS_A_THREAD: u32 = 4;

/// The most taps a column (Pillow's ksize) the unrolled tap loop takes; larger reductions
/// take the generic kernel.
const MAX_KSIZE: u32 = 64;

/// The input pixels a thread loads at most (registers: `pre_lo` and `pre_hi` in the shader).
const MAX_PF: u32 = 32;

/// Its WGSL twin is `Params` in wgsl/resize_h8.wgsl (the shader test checks their fields).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, bytemuck::Pod, bytemuck::Zeroable)]
pub(super) struct RowsParams {
    pub in_w: u32,
    pub out_w: u32,
    pub rows: u32,
    pub tiles_x: u32,
    pub n_tiles: u32,
    pub _pad: [u32; 3],
}
crate::ops::params_layout!(RowsParams {
    in_w,
    out_w,
    rows,
    tiles_x,
    n_tiles
});

/// A horizontal pass's tile, its workgroup memory and its grid.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct RowsLayout {
    /// Output columns a workgroup, columns a warp, rows a thread.
    pub tw: u32,
    pub gu: u32,
    pub rpt: u32,
    /// Taps a column.
    pub ksize: u32,
    /// Words an input row takes in workgroup memory, and the input pixels a thread loads.
    pub in_stride: u32,
    pub pf: u32,
    /// Words of workgroup memory in all.
    pub words: u32,
    pub params: RowsParams,
}

/// The most input positions one tile of `t` consecutive output positions of `axis` spans.
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

impl RowsLayout {
    /// The layout for the horizontal pass `axis` over `rows` rows of `in_w` pixels of
    /// `channels` 8-bit samples, in at most `budget` words of workgroup memory; None where it
    /// does not apply: output rows that do not end on a word (a word would then hold two
    /// tiles' pixels), more than [`MAX_KSIZE`] taps, or no tile that fits.
    pub fn new(
        axis: &Axis,
        in_w: u32,
        rows: u32,
        channels: u32,
        budget: u32,
        rpt: u32,
    ) -> Option<RowsLayout> {
        let out_w = axis.len() as u32;
        let ksize = axis.ksize as u32;
        if !(u64::from(out_w) * u64::from(channels)).is_multiple_of(4)
            || ksize > MAX_KSIZE
            || out_w == 0
            || rows == 0
        {
            return None;
        }
        let scale = (f64::from(in_w) / f64::from(out_w)).round() as u32;
        let lines = if scale >= 2 {
            1 << scale.trailing_zeros().min(2)
        } else {
            1
        };
        let widest: u32 = std::env::var("GPUKIT_RESIZE_DEV")
            .unwrap_or_default()
            .split(',')
            .find_map(|f| f.strip_prefix("tw="))
            .and_then(|v| v.parse().ok())
            .unwrap_or(TILE_WIDTHS[0]);
        TILE_WIDTHS
            .iter()
            .filter(|&&tw| tw <= widest)
            .find_map(|&tw| {
                let span = widest_span(axis, tw);
                let in_stride = span | 1;
                let r = WG_SIZE / tw * rpt;
                let words = r * in_stride + ksize + r * tw;
                let pf = (r * span).div_ceil(WG_SIZE);
                if words > budget || pf > MAX_PF {
                    return None;
                }
                let tiles_x = out_w.div_ceil(tw);
                Some(RowsLayout {
                    tw,
                    gu: (32 / lines).min(tw).max(tw / (WG_SIZE / 32)),
                    rpt,
                    ksize,
                    in_stride,
                    pf,
                    words,
                    params: RowsParams {
                        in_w,
                        out_w,
                        rows,
                        tiles_x,
                        n_tiles: tiles_x.checked_mul(rows.div_ceil(r))?,
                        _pad: [0; 3],
                    },
                })
            })
    }

    /// The pipeline's overridable constants.
    pub fn overrides(
        &self,
        channels: u8,
        premultiply: bool,
        unpremultiply: bool,
    ) -> [(&'static str, f64); 11] {
        let on = |b: bool| f64::from(u8::from(b));
        [
            ("WG_SIZE", f64::from(WG_SIZE)),
            ("TW", f64::from(self.tw)),
            ("GU", f64::from(self.gu)),
            ("RPT", f64::from(self.rpt)),
            ("KSIZE", f64::from(self.ksize)),
            ("IN_STRIDE", f64::from(self.in_stride)),
            ("PF", f64::from(self.pf)),
            ("CHANNELS", f64::from(channels)),
            ("DEPTH", 8.0),
            ("PREMULTIPLY", on(premultiply)),
            ("UNPREMULTIPLY", on(unpremultiply)),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::super::coeffs::passes;
    use super::super::Filter;
    use super::*;

    // 4K to 1080p lanczos3: 64 output columns read 63 * 2 + 12 = 138 input columns (139
    // words a row, odd); 16 rows of them, 13 words of slack, 16 x 64 output pixels.
    #[test]
    fn the_4k_to_1080p_layout_is_hand_counted() {
        let p = passes(3840, 2160, 1920, 1080, Filter::Lanczos3, 8);
        let l = RowsLayout::new(&p[0].axis, 3840, 2160, 3, 6144, ROWS_A_THREAD).unwrap();
        assert_eq!((l.tw, l.gu, l.rpt, l.ksize), (64, 16, 4, 13));
        // 16 rows of 138 pixels over 256 threads.
        assert_eq!((l.in_stride, l.pf), (139, 9));
        assert_eq!(l.words, 16 * 139 + 13 + 16 * 64);
        assert_eq!((l.params.tiles_x, l.params.n_tiles), (30, 30 * 135));
    }

    #[test]
    fn it_applies_only_where_its_tiles_write_whole_words() {
        let p = passes(100, 80, 30, 20, Filter::Bicubic, 8);
        assert!(RowsLayout::new(&p[0].axis, 100, 80, 4, 6144, 4).is_some());
        // 30 RGB pixels end a row mid-word.
        assert!(RowsLayout::new(&p[0].axis, 100, 80, 3, 6144, 4).is_none());
        // A 40x reduction: 241 taps a column.
        let big = passes(4000, 4000, 100, 100, Filter::Lanczos3, 8);
        assert!(RowsLayout::new(&big[0].axis, 4000, 4000, 4, 1 << 20, 4).is_none());
    }
}
