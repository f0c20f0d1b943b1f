//! The horizontal pass over 8-bit samples for integer reductions (wgsl/resize_h8s.wgsl):
//! every output column's taps lie in a window of ksize input pixels that starts a whole
//! number of pixels (the step) after its left neighbour's, so a thread can make four
//! neighbouring columns from one walk over the pixels their windows cover. Where it applies
//! ([`StrideLayout::new`]), the weights as the kernel reads them, and the workgroup memory's
//! layout, handed to the shader as its override constants.

use super::coeffs::{math_overrides, Axis};
use super::rows::TILE_WIDTHS;

/// The most words of the input tile a thread loads (`pre` in the shader: registers, each
/// load in flight with the others).
const MAX_LOADS: u32 = 32;

/// The most taps a regular column's weights may have to be the shader's constants (`KW0` to
/// `KW15`): 2x lanczos3 (13 taps), up to 3x bicubic, 7x bilinear and less. At 25 taps (4x
/// lanczos3) the constants made the pass 5% slower than loading the weights (call FP in
/// docs/BENCHMARKS.md); at 13 1.15x faster.
const MAX_KW: usize = 16;

/// The names of those constants.
const KW: [&str; MAX_KW] = [
    "KW0", "KW1", "KW2", "KW3", "KW4", "KW5", "KW6", "KW7", "KW8", "KW9", "KW10", "KW11", "KW12",
    "KW13", "KW14", "KW15",
];

/// The most window pixels a thread walks (`W = 3 S + K`: the kernel's unrolled loop).
const MAX_WINDOW: u32 = 64;

/// Its WGSL twin is `Params` in wgsl/resize_h8s.wgsl (the shader test checks their fields).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, bytemuck::Pod, bytemuck::Zeroable)]
pub(super) struct StrideParams {
    pub in_w: u32,
    pub out_w: u32,
    pub rows: u32,
    pub tile_rows: u32,
    pub first0: i32,
    pub groups: u32,
    pub reg_lo: u32,
    pub reg_hi: u32,
}
crate::ops::params_layout!(StrideParams {
    in_w,
    out_w,
    rows,
    tile_rows,
    first0,
    groups,
    reg_lo,
    reg_hi
});

/// An axis whose every output position x reads only input positions in
/// `first0 + step * x .. first0 + step * x + ksize` (`step` the reduction, at least 2): each
/// window starts `step` after the one before, those cut at the input's ends included.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Windows {
    pub step: u32,
    pub first0: i64,
}

impl Windows {
    /// The windows of `axis` over `in_len` input positions, where the reduction is a whole
    /// number of at least 2 and every position's taps lie in its window; None elsewhere.
    pub fn of(axis: &Axis, in_len: u32) -> Option<Windows> {
        let n = axis.len() as u32;
        if n == 0 || !in_len.is_multiple_of(n) || in_len / n < 2 {
            return None;
        }
        let step = in_len / n;
        // The latest first window that still starts at or before every position's first
        // tap; it must also end at or after every position's last.
        let shifted = |x: usize| i64::from(axis.start[x]) - i64::from(step) * x as i64;
        let first0 = (0..axis.len()).map(shifted).min()?;
        let k = axis.ksize as i64;
        let fits = (0..axis.len())
            .all(|x| axis.count[x] >= 1 && shifted(x) + i64::from(axis.count[x]) <= first0 + k);
        fits.then_some(Windows { step, first0 })
    }

    /// The weights as the kernel reads them: for each of the `3 step + ksize` positions w of
    /// a group's window and each group g of four output positions, at
    /// `(w * groups + g) * 4 + k`, position `4 g + k`'s weight of window pixel w (input
    /// `first0 + 4 g step + w`; 0 where that is not one of its taps, or past the axis).
    pub fn weights(&self, axis: &Axis) -> Vec<i32> {
        let n = axis.len();
        let groups = n.div_ceil(4);
        let (s, ks) = (self.step as usize, axis.ksize);
        let span = 3 * s + ks;
        let mut out = vec![0; span * groups * 4];
        for x in 0..n {
            let (g, k) = (x / 4, x % 4);
            // Tap j of x is input start + j, window position start + j - (first0 + 4 g s).
            let group_first = self.first0 + (4 * g * s) as i64;
            let (start, taps) = axis.taps(x);
            for (j, &wt) in taps.iter().enumerate() {
                let w = (start + j) as i64 - group_first;
                out[(w as usize * groups + g) * 4 + k] = wt;
            }
        }
        out
    }
}

/// The positions whose weights are all one kernel over their windows, and that kernel:
/// [`Windows::regular`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Regular {
    /// The kernel: a regular position's weight of each of its window's ksize pixels (all 0
    /// where none is regular).
    pub kernel: [i32; MAX_KW],
    /// The regular positions, `lo..hi` (empty where there are none).
    pub lo: u32,
    pub hi: u32,
}

impl Regular {
    /// No regular position.
    pub const NONE: Regular = Regular {
        kernel: [0; MAX_KW],
        lo: 0,
        hi: 0,
    };

    /// The kernel's constants for a shader (wgsl/shared/resize_regular.wgsl): `REGULAR`
    /// (`any`: whether the shader has any regular unit to take them, so that one with none
    /// builds no constant path) and `KW0` to `KW15`.
    pub fn overrides(&self, any: bool) -> impl Iterator<Item = (&'static str, f64)> + '_ {
        let on = f64::from(u8::from(any));
        std::iter::once(("REGULAR", on))
            .chain(KW.iter().zip(self.kernel).map(|(&k, v)| (k, f64::from(v))))
    }
}

impl Windows {
    /// The run of positions around the middle one that weigh their windows with the middle
    /// one's weights, and whose windows lie inside the input's `in_len` positions. At a
    /// whole-number reduction Pillow computes every position away from the edges from the
    /// same offsets, so they all do; those near the edges, whose taps are cut there, do not.
    /// None regular where the kernel is longer than the shaders' constants ([`MAX_KW`]).
    pub fn regular(&self, axis: &Axis, in_len: u32) -> Regular {
        let n = axis.len();
        let (s, ks) = (i64::from(self.step), axis.ksize);
        // Position x's weights over its window, first0 + s x onwards (None where the
        // window leaves the input).
        let window = |x: usize| {
            let first = self.first0 + s * x as i64;
            if first < 0 || first + ks as i64 > i64::from(in_len) {
                return None;
            }
            let mut w = vec![0; ks];
            let (start, taps) = axis.taps(x);
            let off = (start as i64 - first) as usize;
            w[off..off + taps.len()].copy_from_slice(taps);
            Some(w)
        };
        let none = Regular::NONE;
        let mid = n / 2;
        let Some(kernel) = window(mid).filter(|_| ks <= MAX_KW) else {
            return none;
        };
        let regular = |x: usize| window(x).as_ref() == Some(&kernel);
        let lo = (0..mid).rev().find(|&x| !regular(x)).map_or(0, |x| x + 1);
        let hi = (mid + 1..n).find(|&x| !regular(x)).unwrap_or(n);
        let mut k = [0; MAX_KW];
        k[..ks].copy_from_slice(&kernel);
        Regular {
            kernel: k,
            lo: lo as u32,
            hi: hi as u32,
        }
    }
}

/// A horizontal pass's tile, its workgroup memory and its grid.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct StrideLayout {
    /// Threads a workgroup, groups of four output columns a tile and a warp, rows a thread.
    pub wg: u32,
    pub tg: u32,
    pub gu: u32,
    pub rpt: u32,
    /// The windows' step and length (ksize).
    pub step: u32,
    pub ksize: u32,
    /// Where the first window's first pixel starts in its word (bytes).
    pub off0: u32,
    /// Words an input row takes in workgroup memory, and a row of the output tile staged
    /// there.
    pub in_stride: u32,
    pub out_stride: u32,
    /// Words of workgroup memory in all.
    pub words: u32,
    pub params: StrideParams,
    /// The regular columns' weights (the override constants KW0 to KW15); the groups whose
    /// four columns are all regular are `params.reg_lo..params.reg_hi`.
    pub regular: Regular,
    /// The dispatch: the tiles along a row, then those down the image ([`grid`]).
    pub grid: [u32; 3],
}

/// A grid of `across` workgroups along x by `down` over y, and over z where `down` passes
/// `limit` (a shader finds its place as `wid.x` and `wid.y + wid.z * nwg.y`, and skips
/// the few past `down`); None where a dimension would pass the limit.
pub(super) fn grid(across: u32, down: u32, limit: u32) -> Option<[u32; 3]> {
    let y = down.min(limit);
    let g = [across, y, down.div_ceil(y.max(1))];
    g.iter().all(|&n| n <= limit).then_some(g)
}

impl StrideLayout {
    /// The layout for the horizontal pass `axis` over `rows` rows of `in_w` pixels of
    /// `channels` 8-bit samples, a tile at most `widest` columns wide, at most `rpt` rows a
    /// thread and `wg` threads (64, 128 or 256), in at most `budget` words of workgroup
    /// memory and [`MAX_LOADS`] words a thread (the widest tile that fits at `rpt` rows a
    /// thread, else at one row fewer, and so on); None where it does not apply: an axis whose taps are not all inside the input
    /// ([`super::rows::well_formed`]: the tile's pixels past the image's edges are left
    /// unloaded, so only weights of 0 may fall on them), no whole-number windows
    /// ([`Windows::of`]), output rows that do not end on a word, a window longer than
    /// [`MAX_WINDOW`], no tile that fits, or a grid past `limit` workgroups a dimension.
    pub fn new(
        axis: &Axis,
        (in_w, rows): (u32, u32),
        channels: u32,
        (widest, rpt, wg): (u32, u32, u32),
        (budget, limit): (u32, u32),
    ) -> Option<StrideLayout> {
        let out_w = axis.len() as u32;
        let ksize = axis.ksize as u32;
        if !(u64::from(out_w) * u64::from(channels)).is_multiple_of(4)
            || rows == 0
            || !super::rows::well_formed(axis, in_w)
        {
            return None;
        }
        let windows = Windows::of(axis, in_w)?;
        let step = windows.step;
        if 3 * step + ksize > MAX_WINDOW {
            return None;
        }
        let first0 = i32::try_from(windows.first0).ok()?;
        let groups = out_w.div_ceil(4);
        let regular = windows.regular(axis, in_w);
        // The groups whose four columns are all regular.
        let reg_lo = regular.lo.div_ceil(4);
        let reg_hi = (regular.hi / 4).max(reg_lo);
        // A group's words start step * channels words after its neighbour's: lanes that far
        // apart fall on 32 / gcd(step * channels, 32) distinct banks.
        let distinct = 32 >> (step * channels).trailing_zeros().min(5);
        let off0 = (i64::from(first0) * i64::from(channels)).rem_euclid(4) as u32;
        let shapes = (1..=rpt.clamp(1, 8)).rev().flat_map(|rpt| {
            TILE_WIDTHS
                .into_iter()
                .filter(move |&tw| tw <= widest && tw / 4 <= wg && tw >= 8)
                .map(move |tw| (tw / 4, rpt))
        });
        shapes.into_iter().find_map(|(tg, rpt)| {
            let span = step * (4 * tg - 1) + ksize;
            let in_stride = (off0 + span * channels).div_ceil(4) | 1;
            let out_stride = (tg * channels) | 1;
            let r = wg / tg * rpt;
            let words = r * (in_stride + out_stride);
            // A thread's loads: a tile row's words over the threads, rounded up, each row.
            let loads = r * (off0 + span * channels).div_ceil(4).div_ceil(wg);
            if words > budget || loads > MAX_LOADS {
                return None;
            }
            let tile_rows = rows.div_ceil(r);
            let grid = grid(groups.div_ceil(tg), tile_rows, limit)?;
            Some(StrideLayout {
                wg,
                tg,
                gu: distinct.min(tg).max(tg / (wg / 32)),
                rpt,
                step,
                ksize,
                off0,
                in_stride,
                out_stride,
                words,
                params: StrideParams {
                    in_w,
                    out_w,
                    rows,
                    tile_rows,
                    first0,
                    groups,
                    reg_lo,
                    reg_hi,
                },
                regular,
                grid,
            })
        })
    }

    /// The weights as the kernel reads them ([`Windows::weights`]).
    pub fn weights(&self, axis: &Axis) -> Vec<i32> {
        Windows {
            step: self.step,
            first0: i64::from(self.params.first0),
        }
        .weights(axis)
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
            ("TG", f64::from(self.tg)),
            ("GU", f64::from(self.gu)),
            ("RPT", f64::from(self.rpt)),
            ("S", f64::from(self.step)),
            ("K", f64::from(self.ksize)),
            ("OFF0", f64::from(self.off0)),
            ("IN_STRIDE", f64::from(self.in_stride)),
            ("OUT_STRIDE", f64::from(self.out_stride)),
        ];
        c.extend(math_overrides(channels, 8, (premultiply, unpremultiply)));
        let groups = self.params.reg_lo < self.params.reg_hi;
        c.extend(self.regular.overrides(groups));
        c
    }
}

#[cfg(test)]
mod tests {
    use super::super::coeffs::passes;
    use super::super::{axis, nearest_axis, Filter};
    use super::*;

    // 4K to 1080p lanczos3: support 6 at 2x, 13 taps a window; column x's taps start at
    // int(2x + 1 - 6 + 0.5) = 2x - 5 (cut to 0 for x < 3), so the windows start at -5 and
    // step 2.
    #[test]
    fn the_4k_to_1080p_windows_are_hand_counted() {
        let p = passes(3840, 2160, 1920, 1080, Filter::Lanczos3, 8);
        let w = Windows::of(&p[0].axis, 3840).unwrap();
        assert_eq!(
            w,
            Windows {
                step: 2,
                first0: -5
            }
        );
        // The default shape: 64 columns (16 groups) of windows, 2 * 63 + 13 = 139 pixels a
        // row, from byte 1 of a word (3 * -5 = -15 = 1 mod 4): (1 + 417) / 4, 105 words;
        // 64 threads make 16 groups of 4 rows, a row each; 16 groups a warp (their words 6
        // apart fall on 16 even banks, the warp's second row, 105 words on, on the odd
        // ones); the output tile staged in rows of 16 x 3 words (49, odd).
        let t = super::super::Tunables::DEFAULT;
        let l = StrideLayout::new(&p[0].axis, (3840, 2160), 3, t.whole, (6144, 65535)).unwrap();
        assert_eq!((l.tg, l.gu, l.rpt, l.step, l.ksize), (16, 16, 1, 2, 13));
        assert_eq!((l.off0, l.in_stride, l.out_stride), (1, 105, 49));
        assert_eq!(l.words, 4 * (105 + 49));
        assert_eq!((l.params.groups, l.params.tile_rows), (480, 540));
        assert_eq!((l.grid, l.params.first0), ([30, 540, 1], -5));
        // Past a dispatch limit of 100 the 540 rows of tiles go over y and z; at 20 the 30
        // tiles of a row do not fit x.
        let l = StrideLayout::new(&p[0].axis, (3840, 2160), 3, t.whole, (6144, 100)).unwrap();
        assert_eq!(l.grid, [30, 100, 6]);
        assert!(StrideLayout::new(&p[0].axis, (3840, 2160), 3, t.whole, (6144, 20)).is_none());
    }

    // Each column's weights land at their window positions, zero around them: 8 to 4 with
    // BOX reads pairs (taps 2x and 2x + 1, weights 1/2), in windows of 3 from 2x.
    #[test]
    fn the_weights_sit_at_their_window_positions() {
        let a = axis(8, 4, Filter::Box);
        assert_eq!((a.ksize, &a.start[..]), (3, &[0, 2, 4, 6][..]));
        let w = Windows::of(&a, 8).unwrap();
        assert_eq!(w, Windows { step: 2, first0: 0 });
        let got = w.weights(&a);
        let half = 1 << 21;
        // One group, 3 * 2 + 3 = 9 window positions from input 0: column k's taps at
        // inputs (and positions) 2k and 2k + 1.
        let mut want = vec![0; 9 * 4];
        for k in 0..4 {
            want[2 * k * 4 + k] = half;
            want[(2 * k + 1) * 4 + k] = half;
        }
        assert_eq!(got, want);
    }

    // Whole-number reductions of every filter and NEAREST have windows; other ratios, an
    // upscale, and a same-size axis do not; neither does an axis with a tap outside its
    // window.
    #[test]
    fn only_whole_number_reductions_have_windows() {
        for (a, b) in [(3840, 1920), (2048, 512), (4097 * 3, 4097), (7, 1), (12, 4)] {
            for f in [
                Filter::Lanczos3,
                Filter::Bicubic,
                Filter::Bilinear,
                Filter::Box,
            ] {
                let w = Windows::of(&axis(a, b, f), a).expect("a whole-number reduction");
                assert_eq!(w.step, a / b, "{a} to {b} {f:?}");
            }
            assert!(
                Windows::of(&nearest_axis(a, b, 8), a).is_some(),
                "{a} to {b}"
            );
        }
        for (a, b) in [(3840, 1080), (100, 30), (300, 1200), (5, 5)] {
            assert!(
                Windows::of(&axis(a, b, Filter::Bicubic), a).is_none(),
                "{a} to {b}"
            );
        }
        let mut off = axis(64, 16, Filter::Bilinear);
        off.start[7] += 2;
        assert!(Windows::of(&off, 64).is_none());
    }

    // 4K to 1080p lanczos3: columns 0 to 2 have taps cut at the left edge (they start at
    // 2x - 5 < 0), and 1917 to 1919 at the right (2x + 6 > 3839), so columns 3 to 1916 are
    // regular and the groups 1 to 478 (columns 4 to 1915) take the constants. A regular
    // column's window, 2x - 5 to 2x + 7, holds pixel centres 5.5 before to 6.5 after its
    // centre 2x + 1: its weights are symmetric about 5.5, the 13th (3.25 source pixels out,
    // past lanczos3's 3) is 0, and they sum to 2^22 within rounding. A box halving (8 to 4,
    // windows of 3 from 2x) has every column's taps at 2x and 2x + 1, but column 3's window
    // would end past the input. A 4x lanczos3's 25 taps are more than the shaders' 16
    // constants, so none is regular; nor is any where the windows are longer than the input.
    #[test]
    fn the_regular_positions_are_those_away_from_the_edges() {
        let p = passes(3840, 2160, 1920, 1080, Filter::Lanczos3, 8);
        let w = Windows::of(&p[0].axis, 3840).unwrap();
        let r = w.regular(&p[0].axis, 3840);
        assert_eq!((r.lo, r.hi), (3, 1917));
        assert_eq!(r.kernel[12..], [0; 4]);
        for i in 0..6 {
            assert_eq!(r.kernel[i], r.kernel[11 - i], "{:?}", r.kernel);
        }
        let sum: i32 = r.kernel.iter().sum();
        assert!((sum - (1 << 22)).abs() <= 13, "{sum}");
        let t = super::super::Tunables::DEFAULT;
        let l = StrideLayout::new(&p[0].axis, (3840, 2160), 3, t.whole, (6144, 65535)).unwrap();
        assert_eq!((l.params.reg_lo, l.params.reg_hi), (1, 479));
        let b = axis(8, 4, Filter::Box);
        let r = Windows::of(&b, 8).unwrap().regular(&b, 8);
        assert_eq!((r.lo, r.hi), (0, 3));
        assert_eq!(r.kernel[..4], [1 << 21, 1 << 21, 0, 0]);
        // 4 to 2 with lanczos3: 13-tap windows, longer than the input, so none is regular.
        let short = axis(4, 2, Filter::Lanczos3);
        let r = Windows::of(&short, 4).unwrap().regular(&short, 4);
        assert_eq!((r.lo, r.hi), (0, 0));
        let big = passes(2048, 64, 512, 64, Filter::Lanczos3, 8);
        assert_eq!(big[0].axis.ksize, 25);
        let r = Windows::of(&big[0].axis, 2048)
            .unwrap()
            .regular(&big[0].axis, 2048);
        assert_eq!((r.lo, r.hi), (0, 0));
    }

    // Tiles that do not fit the budget or the loads a thread take fewer rows a thread (a
    // narrower tile at as many has more rows, and needs more words); a window past
    // MAX_WINDOW (an 8x lanczos3: 49 taps) and odd RGB rows take none. A box halving asked
    // for 8 rows a thread of 64 threads gets 4: rows of 2 * 63 + 3 = 129 pixels from byte 0
    // take 97 words, 2 loads a thread a row, and 16 rows of them are 32 loads (20 rows would
    // be 40); with the output's 16 x 3 (49) words, 2336 words.
    #[test]
    fn the_layout_fits_the_budget_or_does_not_apply() {
        let b = passes(1024, 64, 512, 64, Filter::Box, 8);
        let l = StrideLayout::new(&b[0].axis, (1024, 64), 3, (64, 8, 64), (6144, 65535)).unwrap();
        assert_eq!(
            (l.tg, l.rpt, l.off0, l.in_stride, l.out_stride),
            (16, 4, 0, 97, 49)
        );
        assert_eq!(l.words, 16 * (97 + 49));
        let p = passes(2048, 1536, 512, 384, Filter::Lanczos3, 8);
        let l =
            StrideLayout::new(&p[0].axis, (2048, 1536), 3, (64, 2, 256), (6144, 65535)).unwrap();
        // 4x: 4 * 63 + 25 = 277 pixels a row from byte 2 (3 * -10 = 2 mod 4), 209 words
        // and 49 for the output; 32 rows over 6144 words, 16 rows under.
        assert_eq!((l.tg, l.rpt, l.off0, l.in_stride), (16, 1, 2, 209));
        assert_eq!(l.words, 16 * (209 + 49));
        let big = passes(4096, 64, 512, 64, Filter::Lanczos3, 8);
        assert!(
            StrideLayout::new(&big[0].axis, (4096, 64), 4, (64, 2, 256), (6144, 65535)).is_none()
        );
        let odd = passes(14, 4, 7, 4, Filter::Box, 8);
        assert!(StrideLayout::new(&odd[0].axis, (14, 4), 3, (64, 2, 256), (6144, 65535)).is_none());
    }
}
