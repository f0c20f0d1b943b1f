//! The horizontal pass over 8-bit samples (wgsl/resize_h8.wgsl): a workgroup per tile of
//! output columns by rows, its input span in workgroup memory a pixel a word, a thread per
//! column of a few rows. Where it applies ([`RowsLayout::new`]) and its workgroup memory's
//! layout, computed here once and handed to the shader as its override constants.

use super::coeffs::{math_overrides, Axis};

/// Threads a workgroup by default (`Tunables::wg_size`: 64, 128 or 256).
pub(super) const WG_SIZE: u32 = 256;

/// Output columns a workgroup, the widest first (`Tunables::tile_w` picks the first tried).
pub(super) const TILE_WIDTHS: [u32; 4] = [64, 32, 16, 8];

/// The workgroup memory (words) a tile may use by default: 24 KiB, so that eight 256-thread
/// workgroups (a full H100 SM of 2048 threads) fit an SM's 228 KiB; less where the adapter
/// has less.
pub(super) const BUDGET_WORDS: u32 = 6144;

/// The most taps a column (Pillow's ksize) the unrolled tap loop takes; larger reductions
/// take the generic kernel.
const MAX_KSIZE: u32 = 64;

/// The input pixels a thread loads at most (registers: `pre_lo` and `pre_hi` in the shader).
const MAX_PF: u32 = 32;

/// How a tile's input loads are spread over `wg` threads: groups of `lpr` threads (a power
/// of two from 4 to `wg`) a row, each group `rw` of the `r` rows, each thread `pq` of a
/// row's `span` pixels; the spread with the fewest loads a thread (`rw * pq`), the widest
/// groups on a tie (longer runs of neighbouring words). Groups of at least 4 make a thread's
/// pixels of a row a whole number of words apart, so they share one shift.
fn load_groups(wg: u32, r: u32, span: u32) -> (u32, u32, u32) {
    (2..=wg.trailing_zeros())
        .map(|k| {
            let lpr = 1 << k;
            (lpr, r.div_ceil(wg / lpr), span.div_ceil(lpr))
        })
        .min_by_key(|&(lpr, rw, pq)| (rw * pq, u32::MAX - lpr))
        .expect("a workgroup has at least 4 threads")
}

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
    /// Threads a workgroup, output columns a workgroup, columns a warp, rows a thread.
    pub wg: u32,
    pub tw: u32,
    pub gu: u32,
    pub rpt: u32,
    /// Taps a column.
    pub ksize: u32,
    /// Words an input row takes in workgroup memory.
    pub in_stride: u32,
    /// The input's loads ([`load_groups`]): threads a row, rows a group, pixels a thread a
    /// row.
    pub lpr: u32,
    pub rw: u32,
    pub pq: u32,
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

/// Whether `axis` over `in_len` input positions is as Pillow makes every axis, which the
/// unchecked 8-bit kernels rely on for their indices to stay in range: every position reads at
/// least one tap and at most ksize, all inside the input, and both ends of its taps move
/// forward (never back) with the position.
pub(super) fn well_formed(axis: &Axis, in_len: u32) -> bool {
    let ends = |i: usize| {
        (
            axis.start[i],
            u64::from(axis.start[i]) + u64::from(axis.count[i]),
        )
    };
    (0..axis.len()).all(|i| {
        let (a, b) = ends(i);
        let forward = i == 0 || {
            let (pa, pb) = ends(i - 1);
            pa <= a && pb <= b
        };
        axis.count[i] >= 1
            && axis.count[i] as usize <= axis.ksize
            && b <= u64::from(in_len)
            && forward
    })
}

impl RowsLayout {
    /// The layout for the horizontal pass `axis` over `rows` rows of `in_w` pixels of
    /// `channels` 8-bit samples, a tile at most `widest` columns wide, at most `rpt` rows a
    /// thread and `wg` threads (64, 128 or 256), in at most `budget` words of workgroup memory
    /// (the widest tile that fits at `rpt` rows a thread, else at one row fewer, and so on);
    /// None where it does not apply:
    /// output rows that do not end on a word (a word would then hold two tiles' pixels), more
    /// than [`MAX_KSIZE`] taps, or no tile that fits.
    pub fn new(
        axis: &Axis,
        (in_w, rows): (u32, u32),
        channels: u32,
        (widest, rpt, wg): (u32, u32, u32),
        budget: u32,
    ) -> Option<RowsLayout> {
        let out_w = axis.len() as u32;
        let ksize = axis.ksize as u32;
        if !(u64::from(out_w) * u64::from(channels)).is_multiple_of(4)
            || ksize > MAX_KSIZE
            || out_w == 0
            || rows == 0
            || !well_formed(axis, in_w)
        {
            return None;
        }
        let scale = (f64::from(in_w) / f64::from(out_w)).round() as u32;
        let lines = if scale >= 2 {
            1 << scale.trailing_zeros().min(2)
        } else {
            1
        };
        let shapes = (1..=rpt.clamp(1, 8)).rev().flat_map(|rpt| {
            TILE_WIDTHS
                .into_iter()
                .filter(move |&tw| tw <= widest && tw <= wg)
                .map(move |tw| (tw, rpt))
        });
        shapes.into_iter().find_map(|(tw, rpt)| {
            let span = widest_span(axis, tw);
            let in_stride = span | 1;
            let r = wg / tw * rpt;
            let words = r * in_stride + ksize + r * tw;
            let (lpr, rw, pq) = load_groups(wg, r, span);
            if words > budget || rw * pq > MAX_PF {
                return None;
            }
            let tiles_x = out_w.div_ceil(tw);
            Some(RowsLayout {
                tw,
                wg,
                gu: (32 / lines).min(tw).max(tw / (wg / 32)),
                rpt,
                ksize,
                in_stride,
                lpr,
                rw,
                pq,
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
    ) -> Vec<(&'static str, f64)> {
        let mut c = vec![
            ("WG_SIZE", f64::from(self.wg)),
            ("TW", f64::from(self.tw)),
            ("GU", f64::from(self.gu)),
            ("RPT", f64::from(self.rpt)),
            ("KSIZE", f64::from(self.ksize)),
            ("IN_STRIDE", f64::from(self.in_stride)),
            ("LPR", f64::from(self.lpr)),
            ("RW", f64::from(self.rw)),
            ("PQ", f64::from(self.pq)),
        ];
        c.extend(math_overrides(channels, 8, (premultiply, unpremultiply)));
        c
    }
}

#[cfg(test)]
mod tests {
    use super::super::coeffs::{passes, Pass};
    use super::super::Filter;
    use super::*;

    // 4K to 1080p lanczos3: 64 output columns read 63 * 2 + 12 = 138 input columns (139
    // words a row, odd); 8 rows of them (4 rounds of 2 rows a thread), 13 words of slack,
    // 8 x 64 output pixels; 8 rows of 138 pixels over 256 threads: a warp a row, 5 pixels
    // a thread (groups of 16 would take 9, of 64 two rows of 3).
    #[test]
    fn the_4k_to_1080p_layout_is_hand_counted() {
        let p = passes(3840, 2160, 1920, 1080, Filter::Lanczos3, 8);
        let l =
            RowsLayout::new(&p[0].axis, (3840, 2160), 3, (64, 2, WG_SIZE), BUDGET_WORDS).unwrap();
        assert_eq!((l.tw, l.gu, l.rpt, l.ksize), (64, 16, 2, 13));
        assert_eq!(l.in_stride, 139);
        assert_eq!((l.lpr, l.rw, l.pq), (32, 1, 5));
        assert_eq!(l.words, 8 * 139 + 13 + 8 * 64);
        assert_eq!((l.params.tiles_x, l.params.n_tiles), (30, 30 * 270));
    }

    // Every spread covers the tile's rows and span; the fewest loads win, counted by hand.
    #[test]
    fn the_loads_cover_the_tile_in_the_fewest_a_thread() {
        for (wg, r, span, want) in [
            // Groups of 4: 16 groups of 2 rows, 5 pixels each (8: 4 rows of 3, 12 loads).
            (64, 32, 20, (4, 2, 5)),
            // A tie at 8 loads among 32, 64, 128 and 256 threads a row: the widest.
            (256, 8, 256, (256, 8, 1)),
            (256, 8, 138, (32, 1, 5)),
            (128, 1, 1, (128, 1, 1)),
        ] {
            let (lpr, rw, pq) = load_groups(wg, r, span);
            assert_eq!((lpr, rw, pq), want, "{wg} threads, {r} rows of {span}");
            assert!(rw * (wg / lpr) >= r && pq * lpr >= span);
        }
    }

    #[test]
    fn it_applies_only_where_its_tiles_write_whole_words() {
        let p = passes(100, 80, 30, 20, Filter::Bicubic, 8);
        let fits = |c, p: &[Pass], budget| {
            RowsLayout::new(&p[0].axis, (100, 80), c, (64, 4, WG_SIZE), budget).is_some()
        };
        assert!(fits(4, &p, BUDGET_WORDS));
        // 30 RGB pixels end a row mid-word.
        assert!(!fits(3, &p, BUDGET_WORDS));
        // No tile fits 100 words (8 columns of 4 rows read 16 pixels each: 4 x 32 rows).
        assert!(!fits(4, &p, 100));
        // A 40x reduction: 241 taps a column.
        let big = passes(4000, 4000, 100, 100, Filter::Lanczos3, 8);
        assert!(!fits(4, &big, 1 << 20));
    }

    // Fewer rows a thread where a tile's input does not fit: 64 columns of a 4x reduction
    // read about 63 * 4 + 25 pixels a row, 16 rows (4 a thread) over 4096 words, 8 rows under.
    #[test]
    fn a_small_budget_takes_fewer_rows_a_thread() {
        let p = passes(4096, 512, 1024, 512, Filter::Lanczos3, 8);
        let l = RowsLayout::new(&p[0].axis, (4096, 512), 4, (64, 4, WG_SIZE), 4096).unwrap();
        assert_eq!((l.tw, l.rpt), (64, 2));
        assert!(l.words <= 4096 && l.in_stride >= 63 * 4 + 24);
    }

    // Pillow's axes are well formed at any scale, both ways; an axis with a position that
    // reads nothing, past the input, or back from its neighbour is not.
    #[test]
    fn pillows_axes_are_well_formed_and_broken_ones_are_not() {
        for (a, b) in [
            (3840, 1920),
            (7, 3),
            (1, 5),
            (4097, 1021),
            (300, 1200),
            (2, 3),
        ] {
            for f in [
                Filter::Lanczos3,
                Filter::Bicubic,
                Filter::Bilinear,
                Filter::Box,
            ] {
                assert!(
                    well_formed(&super::super::axis(a, b, f), a),
                    "{a} to {b} {f:?}"
                );
            }
            assert!(well_formed(&super::super::nearest_axis(a, b, 8), a));
        }
        let good = super::super::axis(100, 30, Filter::Bicubic);
        let mut none = good.clone();
        none.count[3] = 0;
        let mut past = good.clone();
        past.count[29] += 1;
        let mut back = good.clone();
        back.start[10] = back.start[9] - 1;
        for broken in [none, past, back] {
            assert!(!well_formed(&broken, 100));
        }
    }
}
