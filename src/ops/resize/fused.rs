//! The fused GPU pass (wgsl/resize_fused.wgsl): both 1-D passes of an 8-bit resize in one
//! dispatch, a workgroup per column of output positions along the first pass's axis walking
//! down a segment of the second's, the first pass's results kept in a ring of lines in
//! workgroup memory and the next step's input loaded while a step sums. Where it applies
//! ([`FusedLayout::new`]) and how its workgroup memory is laid out, computed here once and
//! handed to the shader as its override constants.

use super::coeffs::{Axis, Dir, Pass};
use super::tune::Tunables;

/// The tile shapes (output positions along the first pass's axis, a power of two; along
/// the second's, a multiple of 4): the default first, then smaller ones, tried in turn where
/// a tile does not fit the budget ([`Tunables::tiles`]).
pub(super) const TILES: [(u32, u32); 6] = [(32, 64), (32, 32), (16, 32), (16, 16), (8, 16), (4, 8)];

/// Threads a workgroup.
pub(super) const WG_SIZE: u32 = 256;

/// The workgroup memory (words) a tile may use by default: 24 KiB, so that eight 256-thread
/// workgroups (a full H100 SM of 2048 threads) fit an SM's 228 KiB; less where the adapter
/// has less.
pub(super) const BUDGET_WORDS: u32 = 6144;

/// The intermediate lines a thread sums a step at most, and the input pixels it loads a step
/// at most (registers: `pre_lo` and `pre_hi` in the shader).
const MAX_LPT: u32 = 8;
const MAX_PF: u32 = 16;

/// The intermediate lines a step aims at by default (`Tunables::step_lines`): 32 lines of a
/// 2x reduction make 16 output lines, so that a step's two barriers are spread over 13 taps
/// of 32 x 32 sums.
pub(super) const STEP_LINES: u32 = 32;

/// The fewest workgroups a grid aims at (about a wave of an H100's 132 SMs at 4 workgroups
/// each): a tile's segment is halved, down to 16 lines, until its grid has as many.
const MIN_TILES: u32 = 512;

/// The fewest intermediate lines a step makes (fewer, and a step's two barriers cost more
/// than its sums), unless the segment needs fewer.
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
    pub _pad: [u32; 2],
}
crate::ops::params_layout!(FusedParams {
    in_w,
    out_w,
    n1,
    n2,
    tiles_u,
    n_tiles
});

/// A fused resize's tile, its workgroup memory's layout and its grid.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct FusedLayout {
    /// Output positions a workgroup along the first pass's axis and along the second's.
    pub tu: u32,
    pub seg: u32,
    /// Whether the horizontal pass is the first.
    pub h_first: bool,
    /// Taps a position of the first pass and of the second (Pillow's ksize).
    pub k1: u32,
    pub k2: u32,
    /// Intermediate lines a thread sums a step, and a step's lines (at most `lpt` rounds of
    /// `WG_SIZE / tu` lines).
    pub lpt: u32,
    pub lines: u32,
    /// Positions along the first axis a warp of the first pass covers (`GU`).
    pub gu: u32,
    /// Input pixels a thread loads a step, and the words an input line takes.
    pub pf: u32,
    pub in_stride: u32,
    /// Lines of the ring of intermediate lines: a step's and those a unit of the second pass
    /// reads, less one.
    pub ring: u32,
    /// Steps the widest segment takes (`MAX_STEPS`).
    pub steps: u32,
    /// Words of workgroup memory in all.
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

/// Positions along u a warp of the first pass covers, so that the input its lanes read
/// spreads over the 32 banks of workgroup memory: neighbouring positions of a reduction by
/// 2 (4) start 2 (4) words apart, so a warp of 16 (8) positions by 2 (4) lines of odd
/// stride reads each bank once. At most `tu`, at least `tu / 8` (8 warps cover `tu`).
fn warp_positions(axis: &Axis, in_len: u32, tu: u32) -> u32 {
    let scale = (f64::from(in_len) / axis.len() as f64).round() as u32;
    let lines = if scale >= 2 {
        1 << scale.trailing_zeros().min(2)
    } else {
        1
    };
    (32 / lines).min(tu).max(tu / (WG_SIZE / 32))
}

impl FusedLayout {
    /// The layout for resizing a `in_w` x `in_h` image of `channels` 8-bit samples by
    /// `passes`, with tiles of `tile` and at most `budget` words of workgroup memory; None
    /// where the fused pass does not apply: one pass or none, 16-bit samples, output rows
    /// that do not end on a word (a word would then hold two tiles' pixels), or a tile that
    /// does not fit (very large reductions: each output line of the second pass reads
    /// `ksize` lines of the first's results, all in the ring).
    pub fn new(
        (in_w, in_h): (u32, u32),
        channels: u32,
        depth: u32,
        passes: &[Pass],
        tile: (u32, u32),
        budget: u32,
        step_lines: u32,
    ) -> Option<FusedLayout> {
        let [first, second] = passes else {
            return None;
        };
        let h_first = first.dir == Dir::Horizontal;
        let (tu, seg) = tile;
        let out_w = if h_first {
            first.axis.len()
        } else {
            second.axis.len()
        } as u32;
        if depth != 8
            || !tu.is_power_of_two()
            || !(4..=128).contains(&tu)
            || !seg.is_multiple_of(4)
            || seg == 0
            || !(u64::from(out_w) * u64::from(channels)).is_multiple_of(4)
        {
            return None;
        }
        let (a1, a2) = (&first.axis, &second.axis);
        let (k1, k2) = (a1.ksize as u32, a2.ksize as u32);
        let in_len = if h_first { in_w } else { in_h };
        let nu = widest_span(a1, tu);
        let span = widest_span(a2, seg);
        let in_stride = nu | 1;
        let round = WG_SIZE / tu;
        // The second pass makes units of one output line, or of four where the vertical
        // pass is first (four neighbours along x); the intermediate lines a unit reads.
        let unit = widest_span(a2, if h_first { 1 } else { 4 });
        let most = (step_lines * tu / WG_SIZE).clamp(1, MAX_LPT);
        // A step of lpt rounds of lines, or of part of one round where even one does not fit.
        let steps = (1..=most)
            .rev()
            .map(|lpt| (lpt, lpt * round))
            .chain((0..round.trailing_zeros()).map(|s| (1, round >> (s + 1))));
        let (lpt, lines, pf, ring, max_steps, words) = steps
            .map(|(lpt, n)| {
                let pf = (n * nu).div_ceil(WG_SIZE);
                // Step j writes lines up to (j + 1) n - 1 over line m - ring; a unit not made
                // before it ends past line j n, so starts at or after j n + 1 - unit.
                let ring = n + unit - 1;
                let max_steps = span.div_ceil(n);
                let sh = k1 * tu + k2 * seg + seg + max_steps + 1 + n * in_stride + k1;
                let mid = (ring + k2 - 1) * tu;
                (lpt, n, pf, ring, max_steps, sh + mid + 4)
            })
            .find(|&(_, n, pf, _, _, words)| {
                n >= MIN_LINES.min(span) && pf <= MAX_PF && words <= budget
            })?;
        let tiles_u = (a1.len() as u32).div_ceil(tu);
        let n_tiles = tiles_u.checked_mul((a2.len() as u32).div_ceil(seg))?;
        Some(FusedLayout {
            tu,
            seg,
            h_first,
            k1,
            k2,
            lpt,
            lines,
            gu: warp_positions(a1, in_len, tu),
            pf,
            in_stride,
            ring,
            steps: max_steps,
            words,
            params: FusedParams {
                in_w,
                out_w,
                n1: a1.len() as u32,
                n2: a2.len() as u32,
                tiles_u,
                n_tiles,
                _pad: [0; 2],
            },
        })
    }

    /// The first of `t`'s tiles ([`Tunables::tiles`]) that fits its budget, capped by the
    /// adapter's `limit_words`, its segment shortened where the grid would have fewer than
    /// `MIN_TILES` workgroups.
    pub fn choose(
        size: (u32, u32),
        channels: u32,
        depth: u32,
        passes: &[Pass],
        t: &Tunables,
        limit_words: u32,
    ) -> Option<FusedLayout> {
        let budget = t.budget_words.min(limit_words);
        let [a1, a2] = passes else {
            return None;
        };
        t.tiles().find_map(|(tu, mut seg)| {
            let grid = |seg: u32| {
                (a1.axis.len() as u32).div_ceil(tu) * (a2.axis.len() as u32).div_ceil(seg)
            };
            while seg >= 32 && grid(seg) < MIN_TILES {
                seg = (seg / 2).next_multiple_of(4);
            }
            FusedLayout::new(
                size,
                channels,
                depth,
                passes,
                (tu, seg),
                budget,
                t.step_lines,
            )
        })
    }

    /// The pipeline's overridable constants (alpha's as the two-pass kernels take them).
    pub fn overrides(&self, channels: u8, alpha: bool) -> [(&'static str, f64); 17] {
        let on = |b: bool| f64::from(u8::from(b));
        [
            ("WG_SIZE", f64::from(WG_SIZE)),
            ("TU", f64::from(self.tu)),
            ("SEG", f64::from(self.seg)),
            ("H_FIRST", on(self.h_first)),
            ("K1", f64::from(self.k1)),
            ("K2", f64::from(self.k2)),
            ("LPT", f64::from(self.lpt)),
            ("N", f64::from(self.lines)),
            ("GU", f64::from(self.gu)),
            ("PF", f64::from(self.pf)),
            ("IN_STRIDE", f64::from(self.in_stride)),
            ("RING", f64::from(self.ring)),
            ("MAX_STEPS", f64::from(self.steps)),
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
    // column of 32 output positions reads 31 * 2 + 12 = 74 input columns (75 words a line,
    // odd), and a segment of 64 output rows 63 * 2 + 12 = 138 intermediate lines, made in 5
    // steps of 32 lines (4 a thread).
    #[test]
    fn the_4k_to_1080p_layout_is_hand_counted() {
        let p = passes(3840, 2160, 1920, 1080, Filter::Lanczos3, 8);
        let l = FusedLayout::choose((3840, 2160), 3, 8, &p, &Tunables::DEFAULT, 1 << 20).unwrap();
        assert!(l.h_first);
        assert_eq!((l.tu, l.seg), (32, 64));
        assert_eq!((l.k1, l.k2), (13, 13));
        assert_eq!((l.lpt, l.lines, l.in_stride, l.steps), (4, 32, 75, 5));
        // 32 lines of 74 pixels over 256 threads; a ring of a step's 32 lines and the 12 an
        // output line reads, less one.
        assert_eq!((l.pf, l.ring), (10, 43));
        // A reduction by 2: a warp covers 16 positions of 2 lines.
        assert_eq!(l.gu, 16);
        // Weights 13 x 32 and 13 x 64, first lines 64, steps' first rows 6, input 32 x 75
        // and 13 words of slack; the ring (43 + 12 lines of 32) and the tile's spans.
        assert_eq!(l.words, 416 + 832 + 64 + 6 + 32 * 75 + 13 + 55 * 32 + 4);
        assert_eq!((l.params.tiles_u, l.params.n_tiles), (60, 60 * 17));
    }

    #[test]
    fn it_applies_only_where_its_tiles_write_whole_words() {
        let p = passes(100, 80, 30, 20, Filter::Bicubic, 8);
        let fits = |c, d, p: &[Pass]| {
            FusedLayout::choose((100, 80), c, d, p, &Tunables::DEFAULT, 1 << 20).is_some()
        };
        assert!(fits(4, 8, &p));
        // 30 RGB pixels end a row mid-word; 16-bit; one pass.
        assert!(!fits(3, 8, &p));
        assert!(!fits(4, 16, &p));
        assert!(!fits(4, 8, &passes(100, 80, 100, 20, Filter::Bicubic, 8)));
        // A 40x reduction: 241 taps a position; no tile fits 24 KiB.
        let big = passes(4000, 4000, 100, 100, Filter::Lanczos3, 8);
        let l = FusedLayout::choose((4000, 4000), 4, 8, &big, &Tunables::DEFAULT, 1 << 20);
        assert!(l.is_none());
    }

    // A small output's segments are shortened until the grid has MIN_TILES workgroups (or
    // the segment 16 lines): 2048x1536 to 512x384 has 16 columns of 32, 6 segments of 64,
    // 12 of 32, 24 of 16.
    #[test]
    fn a_small_grid_takes_shorter_segments() {
        let p = passes(2048, 1536, 512, 384, Filter::Lanczos3, 8);
        let l = FusedLayout::choose((2048, 1536), 3, 8, &p, &Tunables::DEFAULT, 1 << 20).unwrap();
        assert_eq!((l.tu, l.seg), (32, 16));
        assert_eq!(l.params.n_tiles, 16 * 24);
    }

    // A small budget shortens the steps before it narrows the tile.
    #[test]
    fn a_small_budget_takes_fewer_lines_a_step() {
        let p = passes(3840, 2160, 1920, 1080, Filter::Lanczos3, 8);
        let t = Tunables {
            budget_words: 4096,
            ..Tunables::DEFAULT
        };
        let l = FusedLayout::choose((3840, 2160), 3, 8, &p, &t, 1 << 20).unwrap();
        assert_eq!((l.tu, l.seg), (32, 64));
        assert!(l.lines < 32 && l.lines >= MIN_LINES, "{} lines", l.lines);
        assert!(l.words <= 4096);
    }
}
