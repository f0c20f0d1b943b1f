//! The native CPU engine for `scan`: a parallel two-pass scan (reduce, then scan), rayon over
//! blocks. Pass one combines each block into its total; the totals are scanned in order; pass
//! two scans each block from its offset. Integers and min/max go a group of 16 blocks at a
//! time (both passes over a group while it is in cache, so memory is read once). u32 and i32
//! (sums wrap) and every min and max are exact, whatever the blocks, so they equal `reference` (the reference) bit for bit. f32 sums
//! accumulate in f64 like the reference and round each result to f32 once; only the grouping
//! of the f64 additions differs (a block's total is added as one), which moves a result by at
//! most one rounding of f32 from the reference's (docs/scan.md). Blocks are a fixed size, so
//! no result depends on the thread count.

use rayon::prelude::*;

use super::{Elem, Element, Mode, Op};

/// Elements per block: 256 KiB of u32.
const BLOCK: usize = 1 << 16;
/// Elements per group of blocks (4 MiB of u32, well within the last-level cache).
const GROUP: usize = 16 * BLOCK;

/// The engine's scan: the same signature and result as `reference`.
pub fn scan<T: Element>(data: &[T], op: Op, mode: Mode) -> Vec<T> {
    let mut out = vec![T::zeroed(); data.len()];
    scan_into(data, op, mode, &mut out);
    out
}

/// The scan into `out` (as long as `data`), without allocating the result.
pub fn scan_into<T: Element>(data: &[T], op: Op, mode: Mode, out: &mut [T]) {
    assert_eq!(data.len(), out.len(), "scan output length");
    let id = T::identity(op);
    match T::ELEM {
        Elem::U32 => ints::<u32>(cast(data), op, mode, cast_mut(out), cast(&[id])[0]),
        Elem::I32 => ints::<i32>(cast(data), op, mode, cast_mut(out), cast(&[id])[0]),
        Elem::F32 => {
            let (data, out): (&[f32], &mut [f32]) = (cast(data), cast_mut(out));
            match op {
                Op::Sum => sum_f32(data, mode, out),
                // The reference's min and max in f64 of f32 values are the f32 ones.
                Op::Min => exact(data, mode, out, f32::INFINITY, f32::min),
                Op::Max => exact(data, mode, out, f32::NEG_INFINITY, f32::max),
            }
        }
    }
}

fn cast<A: bytemuck::Pod, B: bytemuck::Pod>(v: &[A]) -> &[B] {
    bytemuck::cast_slice(v)
}

fn cast_mut<A: bytemuck::Pod, B: bytemuck::Pod>(v: &mut [A]) -> &mut [B] {
    bytemuck::cast_slice_mut(v)
}

/// The integer types: sums wrap, as in the reference.
trait Int: Copy + Ord + Send + Sync {
    fn wrapping_add(self, other: Self) -> Self;
}

impl Int for u32 {
    #[inline(always)]
    fn wrapping_add(self, other: u32) -> u32 {
        u32::wrapping_add(self, other)
    }
}

impl Int for i32 {
    #[inline(always)]
    fn wrapping_add(self, other: i32) -> i32 {
        i32::wrapping_add(self, other)
    }
}

/// Each arm names its operator, so it inlines to one instruction per element.
fn ints<I: Int>(data: &[I], op: Op, mode: Mode, out: &mut [I], id: I) {
    match op {
        Op::Sum => exact(data, mode, out, id, I::wrapping_add),
        Op::Min => exact(data, mode, out, id, Ord::min),
        Op::Max => exact(data, mode, out, id, Ord::max),
    }
}

/// The two passes with an associative `f` whose identity is `id`: reduce each block, scan
/// the totals, scan each block from its start.
#[inline(always)]
fn exact<T: Copy + Send + Sync, F: Fn(T, T) -> T + Sync>(
    data: &[T],
    mode: Mode,
    out: &mut [T],
    id: T,
    f: F,
) {
    // Groups of blocks are taken in turn, so that a group's data is still in cache when its
    // blocks are scanned, after their totals: the input is read from memory once.
    let mut carry = id;
    for (data, out) in data.chunks(GROUP).zip(out.chunks_mut(GROUP)) {
        let totals: Vec<T> = data
            .par_chunks(BLOCK)
            .map(|block| block.iter().fold(id, |a, &x| f(a, x)))
            .collect();
        // Block b starts from the carry combined with the totals of the group's blocks 0..b.
        let starts: Vec<T> = totals
            .iter()
            .scan(carry, |acc, &t| {
                let start = *acc;
                *acc = f(*acc, t);
                Some(start)
            })
            .collect();
        carry = totals.iter().fold(carry, |a, &t| f(a, t));
        out.par_chunks_mut(BLOCK)
            .zip(data.par_chunks(BLOCK))
            .zip(starts.par_iter())
            .for_each(|((o, d), &start)| {
                let mut acc = start;
                match mode {
                    Mode::Inclusive => {
                        for (o, &x) in o.iter_mut().zip(d) {
                            acc = f(acc, x);
                            *o = acc;
                        }
                    }
                    Mode::Exclusive => {
                        for (o, &x) in o.iter_mut().zip(d) {
                            *o = acc;
                            acc = f(acc, x);
                        }
                    }
                }
            });
    }
}

/// f32 sums: block totals in f64 (in eight interleaved partial sums, which the compiler keeps
/// in one vector), then each block scanned in f64 from its offset, each result rounded once.
fn sum_f32(data: &[f32], mode: Mode, out: &mut [f32]) {
    let totals: Vec<f64> = data
        .par_chunks(BLOCK)
        .map(|block| {
            let mut lanes = [0f64; 8];
            let mut chunks = block.chunks_exact(8);
            for c in &mut chunks {
                for (l, &x) in lanes.iter_mut().zip(c) {
                    *l += x as f64;
                }
            }
            let rest: f64 = chunks.remainder().iter().map(|&x| x as f64).sum();
            lanes.iter().sum::<f64>() + rest
        })
        .collect();
    let starts: Vec<f64> = totals
        .iter()
        .scan(0f64, |acc, &t| {
            let start = *acc;
            *acc += t;
            Some(start)
        })
        .collect();
    out.par_chunks_mut(BLOCK)
        .zip(data.par_chunks(BLOCK))
        .zip(starts.par_iter())
        .for_each(|((o, d), &start)| {
            let mut acc = start;
            for (o, &x) in o.iter_mut().zip(d) {
                let before = acc;
                acc += x as f64;
                *o = match mode {
                    Mode::Inclusive => acc,
                    Mode::Exclusive => before,
                } as f32;
            }
        });
}

#[cfg(test)]
mod tests {
    use super::super::reference;
    use super::*;

    const SIZES: [usize; 9] = [
        0,
        1,
        7,
        1000,
        BLOCK - 1,
        BLOCK,
        BLOCK + 1,
        3 * BLOCK + 5,
        GROUP + 5,
    ];

    fn hashes(n: usize) -> impl Iterator<Item = u32> {
        (0..n as u32).map(|i| i.wrapping_mul(2654435761).rotate_left(13) ^ 0x5bd1e995)
    }

    fn pools() -> Vec<rayon::ThreadPool> {
        [1, 3]
            .map(|n| {
                rayon::ThreadPoolBuilder::new()
                    .num_threads(n)
                    .build()
                    .unwrap()
            })
            .into()
    }

    /// Integer scans (sums wrapping past the type's range) and f32 min and max equal the
    /// reference bit for bit, on one thread and on several.
    #[test]
    fn exact_scans_match_the_reference() {
        for pool in pools() {
            for n in SIZES {
                let u: Vec<u32> = hashes(n).collect();
                let i: Vec<i32> = hashes(n).map(|h| h as i32).collect();
                let f: Vec<f32> = hashes(n).map(|h| (h % 2001) as f32 - 1000.0).collect();
                for op in [Op::Sum, Op::Min, Op::Max] {
                    for mode in [Mode::Inclusive, Mode::Exclusive] {
                        let what = format!("n={n} {op:?} {mode:?}");
                        pool.install(|| {
                            assert!(scan(&u, op, mode) == reference(&u, op, mode), "u32 {what}");
                            assert!(scan(&i, op, mode) == reference(&i, op, mode), "i32 {what}");
                            if op != Op::Sum {
                                assert!(
                                    scan(&f, op, mode) == reference(&f, op, mode),
                                    "f32 {what}"
                                );
                            }
                        });
                    }
                }
            }
        }
    }

    /// f32 sums are within docs/scan.md's bound of the reference for a tree of depth 1 (the
    /// block totals) plus the reference's own rounding: |got - want| <= gamma(2) sum |x|.
    #[test]
    fn f32_sums_are_within_the_bound() {
        let u = 2f64.powi(-24);
        let gamma = 2.0 * u / (1.0 - 2.0 * u);
        for pool in pools() {
            for n in SIZES {
                // Mixed signs and magnitudes in [-8, 8].
                let data: Vec<f32> = hashes(n)
                    .map(|h| ((h % 2001) as f32 - 1000.0) / 1000.0 * (1 << (h >> 30)) as f32)
                    .collect();
                for mode in [Mode::Inclusive, Mode::Exclusive] {
                    let got = pool.install(|| scan(&data, Op::Sum, mode));
                    let want = reference(&data, Op::Sum, mode);
                    let mut abs_sum = 0.0f64;
                    for i in 0..n {
                        if mode == Mode::Inclusive {
                            abs_sum += (data[i] as f64).abs();
                        }
                        let err = (got[i] as f64 - want[i] as f64).abs();
                        assert!(err <= gamma * abs_sum, "n={n} {mode:?} at {i}: {err}");
                        if mode == Mode::Exclusive {
                            abs_sum += (data[i] as f64).abs();
                        }
                    }
                }
            }
        }
    }
}
