//! The vertical pass over 8-bit rows that end on a word (wgsl/resize_v8.wgsl): a pass that
//! keeps the width has each output word under one input word a row, so a thread makes a few
//! neighbouring words of a few consecutive rows with one weight a row for all their samples.
//! Where it applies ([`WordColumns::new`]), its threads, and its regular rows (at a
//! whole-number reduction, those whose weights are one kernel: `Windows::regular`), handed to
//! the shader as its parameters and override constants.

use super::coeffs::{math_overrides, Axis};
use super::rows::well_formed;
use super::stride::{grid, Regular, Windows};
use crate::gpu::Variant;

/// Its WGSL twin is `Params` in wgsl/resize_v8.wgsl (the shader test checks their fields).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, bytemuck::Pod, bytemuck::Zeroable)]
pub(super) struct ColumnParams {
    pub units: u32,
    pub rows: u32,
    pub reg_lo: u32,
    pub reg_hi: u32,
    pub first0: i32,
    pub _pad: [u32; 3],
}
crate::ops::params_layout!(ColumnParams {
    units,
    rows,
    reg_lo,
    reg_hi,
    first0
});

/// A vertical pass's word columns: the words and rows a thread makes, its regular rows, its
/// grid.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct WordColumns {
    /// Words a thread makes in each of its rows (1, 2 or 4: one access), and its rows.
    pub words: u32,
    pub rows_a_thread: u32,
    /// The windows' step (1 where the reduction is not a whole number), and ksize.
    pub step: u32,
    pub ksize: u32,
    pub regular: Regular,
    pub params: ColumnParams,
    /// The dispatch: blocks of a workgroup's threads along a row, then the groups of rows
    /// (over y, and z where they pass the dispatch limit).
    pub grid: [u32; 3],
}

impl WordColumns {
    /// The word columns for the vertical pass `axis` over `h` rows of `w` pixels of
    /// `channels` 8-bit samples, in workgroups of `wg` threads and grids of at most `limit`
    /// workgroups a dimension. A thread makes `rows_a_thread` rows (1 to 8: the tunables'
    /// `check_shape`, which every plan runs first) of at most `words` words (1, 2 or 4: the
    /// most of 4, 2 and 1 that divides a row's words), as
    /// `shapes` gives them: its first where no row is regular, its second where some are (a
    /// thread's rows walked together favour more rows). None where it does not apply: rows
    /// that do not end on a word, an axis whose taps are not all inside the input
    /// ([`well_formed`]), fewer input rows than a window (every window of ksize rows is moved
    /// inside the input), or a grid past the limit.
    pub fn new(
        axis: &Axis,
        (w, h): (u32, u32),
        channels: u32,
        shapes: [(u32, u32); 2],
        (wg, limit): (u32, u32),
    ) -> Option<WordColumns> {
        let row_bytes = u64::from(w) * u64::from(channels);
        if !row_bytes.is_multiple_of(4) || !well_formed(axis, h) || (h as usize) < axis.ksize {
            return None;
        }
        let (step, first0, regular) = match Windows::of(axis, h) {
            Some(win) => (
                win.step,
                i32::try_from(win.first0).ok()?,
                win.regular(axis, h),
            ),
            None => (1, 0, Regular::NONE),
        };
        let (rows_a_thread, words) = shapes[usize::from(regular.lo < regular.hi)];
        let row_words = row_bytes / 4;
        let words = [4, 2, 1]
            .into_iter()
            .find(|&n| n <= words && row_words.is_multiple_of(u64::from(n)))
            .unwrap_or(1);
        let units = u32::try_from(row_words / u64::from(words)).ok()?;
        let rows = axis.len() as u32;
        let grid = grid(units.div_ceil(wg), rows.div_ceil(rows_a_thread), limit)?;
        Some(WordColumns {
            words,
            rows_a_thread,
            step,
            ksize: axis.ksize as u32,
            regular,
            params: ColumnParams {
                units,
                rows,
                reg_lo: regular.lo,
                reg_hi: regular.hi,
                first0,
                _pad: [0; 3],
            },
            grid,
        })
    }

    /// The kernel's variant: its input and output read and written `words` words at a time.
    pub fn variant(&self) -> Variant {
        variant(self.words)
    }

    /// The pipeline's overridable constants.
    pub fn overrides(
        &self,
        wg_size: u32,
        channels: u8,
        premultiply: bool,
        unpremultiply: bool,
    ) -> Vec<(&'static str, f64)> {
        let mut c = vec![
            ("WG_SIZE", f64::from(wg_size)),
            ("KSIZE", f64::from(self.ksize)),
            ("RV", f64::from(self.rows_a_thread)),
            ("S", f64::from(self.step)),
        ];
        c.extend(math_overrides(channels, 8, (premultiply, unpremultiply)));
        c.extend(self.regular.overrides(self.regular.lo < self.regular.hi));
        c
    }
}

/// wgsl/resize_v8.wgsl reading and writing `words` words (1, 2 or 4) at a time.
pub(super) fn variant(words: u32) -> Variant {
    let io = match words {
        4 => "resize_v8_vec4",
        2 => "resize_v8_vec2",
        _ => "resize_v8_word",
    };
    Variant {
        name: format!("{words} words"),
        ..Variant::default()
    }
    .slot("resize_v8_word", io)
}

#[cfg(test)]
mod tests {
    use super::super::axis;
    use super::super::coeffs::passes;
    use super::super::Filter;
    use super::*;

    // 4K to 1080p lanczos3, the vertical pass over 1920 RGB pixels (1440 words a row): rows
    // 3 to 1076 regular (as the columns of the horizontal pass: their windows 2y - 5 to
    // 2y + 7 inside 2160 rows), from row -5, so the second shape: a word of 4 rows a
    // thread, 1440 units in 23 blocks of 64 by 270 groups of rows. With the dispatch limit
    // at 100 the groups go over y and z: 100 by 3.
    #[test]
    fn the_4k_to_1080p_columns_are_hand_counted() {
        let p = passes(3840, 2160, 1920, 1080, Filter::Lanczos3, 8);
        let shapes = [(2, 2), (4, 1)];
        let l = WordColumns::new(&p[1].axis, (1920, 2160), 3, shapes, (64, 65535)).unwrap();
        assert_eq!((l.words, l.rows_a_thread, l.step, l.ksize), (1, 4, 2, 13));
        let want = ColumnParams {
            units: 1440,
            rows: 1080,
            reg_lo: 3,
            reg_hi: 1077,
            first0: -5,
            _pad: [0; 3],
        };
        assert_eq!(l.params, want);
        assert_eq!(l.grid, [23, 270, 1]);
        let l = WordColumns::new(&p[1].axis, (1920, 2160), 3, shapes, (64, 100)).unwrap();
        assert_eq!(l.grid, [23, 100, 3]);
        assert!(WordColumns::new(&p[1].axis, (1920, 2160), 3, shapes, (64, 20)).is_none());
    }

    // Rows of 6 words take pairs when four are asked for, rows of 3 single words; rows that
    // do not end on a word, and inputs shorter than a window, take none. A reduction that is
    // not a whole number has no regular rows, so it takes the first shape.
    #[test]
    fn the_words_divide_the_row_or_the_columns_do_not_apply() {
        let a = axis(64, 16, Filter::Bilinear);
        let four = [(1, 4), (1, 4)];
        let l = WordColumns::new(&a, (8, 64), 3, four, (64, 65535)).unwrap();
        assert_eq!((l.words, l.params.units, l.step), (2, 3, 4));
        let l = WordColumns::new(&a, (4, 64), 3, four, (64, 65535)).unwrap();
        assert_eq!((l.words, l.params.units), (1, 3));
        assert!(WordColumns::new(&a, (5, 64), 3, four, (64, 65535)).is_none());
        let short = axis(3, 1, Filter::Lanczos3);
        assert!(WordColumns::new(&short, (64, 3), 4, four, (64, 65535)).is_none());
        let odd = axis(30, 20, Filter::Bicubic);
        let l = WordColumns::new(&odd, (64, 30), 4, [(2, 2), (4, 1)], (64, 65535)).unwrap();
        assert_eq!((l.step, l.regular.lo, l.regular.hi), (1, 0, 0));
        assert_eq!((l.rows_a_thread, l.words), (2, 2));
    }
}
