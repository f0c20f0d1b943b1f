//! The CPU reference (one pass, left to right), and the GPU passes' stages run on the CPU
//! in the plan's order, which tests hold against it.

use super::{Element, Mode, Op};

/// The CPU reference: one pass, left to right. Integers wrap; f32 accumulates in f64 and
/// rounds each result once.
pub fn reference<T: Element>(data: &[T], op: Op, mode: Mode) -> Vec<T> {
    let mut acc = T::acc_identity(op);
    data.iter()
        .map(|&x| {
            let before = acc;
            acc = T::acc_combine(op, acc, x);
            T::from_acc(match mode {
                Mode::Exclusive => before,
                Mode::Inclusive => acc,
            })
        })
        .collect()
}

/// The shape of the work: segments of the input, and the levels of each segment.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Layout {
    /// Elements per tile (one workgroup's share).
    pub tile: usize,
    pub segments: Vec<Segment>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Segment {
    /// Index of the segment's first element in the input.
    pub start: usize,
    /// Lengths of the levels: `levels[0]` is the segment's length, `levels[l + 1]` the number
    /// of tiles of `levels[l]`; the last level fits in one tile.
    pub levels: Vec<usize>,
}

impl Layout {
    /// Cuts `n` elements into segments of `segment_len` (whole tiles; the last may be shorter)
    /// and each segment into levels.
    pub fn new(n: usize, tile: usize, segment_len: usize) -> Layout {
        assert!(tile > 1 && segment_len >= tile && segment_len.is_multiple_of(tile));
        let segments = (0..n)
            .step_by(segment_len)
            .map(|start| {
                let mut levels = vec![segment_len.min(n - start)];
                while *levels.last().expect("one level") > tile {
                    levels.push(levels.last().expect("one level").div_ceil(tile));
                }
                Segment { start, levels }
            })
            .collect();
        Layout { tile, segments }
    }

    /// Compute passes of reduce-then-scan (the f32 sum's `ScanPlan`): a reduce below the
    /// top, a block scan on every level.
    pub fn passes(&self) -> usize {
        self.segments.iter().map(|s| 2 * s.levels.len() - 1).sum()
    }
}

/// CPU mirror of wgsl/scan_reduce.wgsl: the total of each tile of a level.
pub fn reduce_tiles<T: Element>(op: Op, level: &[T], tile: usize) -> Vec<T> {
    level
        .chunks(tile)
        .map(|t| t.iter().fold(T::identity(op), |a, &x| T::combine(op, a, x)))
        .collect()
}

/// CPU mirror of wgsl/scan_block.wgsl: scans each tile of a level in place, tile `t` starting
/// from `carries[t]`. Returns the last tile's carry combined with its total, which the top
/// level (one tile) writes for the next segment.
pub fn scan_tiles<T: Element>(
    op: Op,
    mode: Mode,
    level: &mut [T],
    carries: &[T],
    tile: usize,
) -> T {
    let mut run = T::identity(op);
    for (t, chunk) in level.chunks_mut(tile).enumerate() {
        run = carries[t];
        for x in chunk {
            let before = run;
            run = T::combine(op, run, *x);
            *x = match mode {
                Mode::Exclusive => before,
                Mode::Inclusive => run,
            };
        }
    }
    run
}

/// The GPU pipeline's stages run on the CPU, in `ScanPlan::record`'s order: reductions up the
/// levels, then block scans down them, segment after segment, each starting from the carry
/// the previous one left in `chain`. Tests hold it against [`reference()`].
pub fn scan_staged_cpu<T: Element>(data: &[T], op: Op, mode: Mode, layout: &Layout) -> Vec<T> {
    let tile = layout.tile;
    let mut out = Vec::with_capacity(data.len());
    let mut chain = vec![T::identity(op)];
    for (s, seg) in layout.segments.iter().enumerate() {
        let mut levels = vec![data[seg.start..seg.start + seg.levels[0]].to_vec()];
        for l in 1..seg.levels.len() {
            let totals = reduce_tiles(op, &levels[l - 1], tile);
            levels.push(totals);
        }
        let top = levels.len() - 1;
        let mode_at = |l: usize| if l == 0 { mode } else { Mode::Exclusive };
        let total = scan_tiles(op, mode_at(top), &mut levels[top], &chain[s..], tile);
        chain.push(total);
        for l in (0..top).rev() {
            let (below, above) = levels.split_at_mut(l + 1);
            scan_tiles(op, mode_at(l), &mut below[l], &above[0], tile);
        }
        out.extend_from_slice(&levels[0]);
    }
    out
}
