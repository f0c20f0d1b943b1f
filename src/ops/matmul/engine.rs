//! The native CPU engine for `matmul`: the `matrixmultiply` crate's sgemm (packed panels and
//! runtime-dispatched AVX2/FMA or AVX-512 microkernels) on tiles of C, one tile a rayon task,
//! so that the product uses every core (matrixmultiply's own threading stops at 4 threads).
//! The result is within `error_bound` of the f64 reference (docs/matmul.md): each element is
//! an f32 sum of its K products in some order, and the bound covers every order. f16 inputs
//! are rounded to f16 first (`Precision::round`), as the GPU kernel sees them. The tiles split
//! C by rows and columns, never along K, and sgemm sums each element of a tile the same way
//! wherever the tile starts, so the product is the same on any number of threads.

use anyhow::Result;
use rayon::prelude::*;

use super::{Dims, Matmul, Precision};

/// The engine's product: C (m x n, row-major) of `p`, within `error_bound` of `exact`, the f64 product.
pub fn matmul(p: &Matmul) -> Result<Vec<f32>> {
    p.check()?;
    let Dims { m, n, k } = p.dims;
    let rounded = |x: &[f32]| -> Option<Vec<f32>> {
        (p.precision == Precision::F16).then(|| x.iter().map(|&v| p.precision.round(v)).collect())
    };
    let (a16, b16) = (rounded(p.a), rounded(p.b));
    let a = a16.as_deref().unwrap_or(p.a);
    let b = b16.as_deref().unwrap_or(p.b);
    // (row stride, column stride) of op(A) (m x k) and op(B) (k x n) in their row-major
    // storage.
    let (a_rs, a_cs) = if p.trans_a { (1, m) } else { (k, 1) };
    let (b_rs, b_cs) = if p.trans_b { (1, k) } else { (n, 1) };
    let mut c: Vec<f32> = crate::ops::zeroed(m * n, "the product")?;
    let (rows, cols) = tiles(p.dims, rayon::current_num_threads());
    let out = SendPtr(c.as_mut_ptr());
    (0..m.div_ceil(rows) * n.div_ceil(cols))
        .into_par_iter()
        .for_each(|t| {
            let (r0, c0) = ((t / n.div_ceil(cols)) * rows, (t % n.div_ceil(cols)) * cols);
            let (tm, tn) = (rows.min(m - r0), cols.min(n - c0));
            let out = &out;
            // SAFETY: the pointers and strides describe op(A)'s rows r0..r0 + tm (tm x k),
            // op(B)'s columns c0..c0 + tn (k x tn) and C's tile (tm x tn, row stride n), within
            // their slices (`check` verified the lengths). Tiles do not overlap, so each task
            // writes its own elements of C only; with beta = 0, C is only written.
            unsafe {
                matrixmultiply::sgemm(
                    tm,
                    k,
                    tn,
                    1.0,
                    a.as_ptr().add(r0 * a_rs),
                    a_rs as isize,
                    a_cs as isize,
                    b.as_ptr().add(c0 * b_cs),
                    b_rs as isize,
                    b_cs as isize,
                    0.0,
                    out.0.add(r0 * n + c0),
                    n as isize,
                    1,
                );
            }
        });
    Ok(c)
}

/// C's tile shape (rows, columns) for `threads` threads: about one tile a thread (each tile
/// packs its own panels of A and B, so more tiles cost more packing: two a thread measured
/// 0.70x numpy's speed at 1024^3 on 2 cores, one 0.85x), as square as C allows, whole
/// multiples of 64; one tile when the product is small.
fn tiles(Dims { m, n, k }: Dims, threads: usize) -> (usize, usize) {
    const STEP: usize = 64;
    if threads <= 1 || (m * n).saturating_mul(k) < 1 << 21 {
        return (m.max(1), n.max(1));
    }
    let tiles = threads;
    // rows x cols tiles with rows / cols about m / n.
    let across = ((tiles as f64 * n as f64 / m as f64).sqrt().round() as usize).clamp(1, tiles);
    let down = tiles.div_ceil(across);
    let size = |len: usize, parts: usize| len.div_ceil(parts).div_ceil(STEP).max(1) * STEP;
    (size(m, down).min(m.max(1)), size(n, across).min(n.max(1)))
}

/// C's pointer, shared by the tasks that write its disjoint tiles.
struct SendPtr(*mut f32);
// SAFETY: the tasks write disjoint elements through it (see `matmul`), and C outlives them.
unsafe impl Sync for SendPtr {}

#[cfg(test)]
mod tests {
    use super::super::{error_bound, exact};
    use super::*;

    /// Values in [-2, 2) with a few exact zeros, as tests/matmul.rs makes them.
    fn values(len: usize, seed: u64) -> Vec<f32> {
        let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
        (0..len)
            .map(|_| {
                s ^= s << 13;
                s ^= s >> 7;
                s ^= s << 17;
                if s.is_multiple_of(17) {
                    0.0
                } else {
                    ((s >> 40) as f32 / (1u64 << 24) as f32) * 4.0 - 2.0
                }
            })
            .collect()
    }

    /// Every element within the documented bound of the f64 reference.
    fn check(m: usize, n: usize, k: usize, trans_a: bool, trans_b: bool, precision: Precision) {
        let a = values(m * k, (m * 31 + k) as u64);
        let b = values(k * n, (n * 37 + k + 1) as u64);
        let p = Matmul {
            a: &a,
            b: &b,
            dims: Dims { m, n, k },
            trans_a,
            trans_b,
            precision,
        };
        let (want, abs) = exact(&p);
        let got = matmul(&p).unwrap();
        for i in 0..m * n {
            let err = (got[i] as f64 - want[i]).abs();
            assert!(
                err <= error_bound(k, abs[i]),
                "{m}x{k} by {k}x{n} {trans_a} {trans_b} {precision:?}: element {i} is {} for {}",
                got[i],
                want[i]
            );
        }
    }

    #[test]
    fn shapes_layouts_and_precisions_are_within_the_bound() {
        for (m, n, k) in [
            (1, 1, 1),
            (1, 1, 300),
            (70, 90, 1),
            (3, 5, 7),
            (64, 64, 64),
            (129, 257, 65),
            (1000, 3, 20),
            (2, 700, 33),
        ] {
            check(m, n, k, false, false, Precision::F32);
        }
        for (trans_a, trans_b) in [(true, false), (false, true), (true, true)] {
            for (m, n, k) in [(1, 1, 1), (3, 5, 7), (130, 67, 33), (5, 131, 18)] {
                check(m, n, k, trans_a, trans_b, Precision::F32);
            }
        }
        for (m, n, k) in [(1, 1, 1), (3, 5, 7), (129, 257, 65), (17, 9, 300)] {
            check(m, n, k, false, false, Precision::F16);
            check(m, n, k, true, true, Precision::F16);
        }
    }

    /// The same bits on 1, 2, 3 and 8 threads: tiles of other shapes and places, one sum.
    #[test]
    fn the_product_is_the_same_on_any_thread_count() {
        let (m, n, k) = (300, 260, 500);
        let (a, b) = (values(m * k, 1), values(k * n, 2));
        let p = Matmul {
            a: &a,
            b: &b,
            dims: Dims { m, n, k },
            trans_a: false,
            trans_b: true,
            precision: Precision::F32,
        };
        let on = |threads: usize| {
            let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build();
            pool.unwrap().install(|| matmul(&p).unwrap())
        };
        let bits = |c: Vec<f32>| c.into_iter().map(f32::to_bits).collect::<Vec<_>>();
        let one = bits(on(1));
        for threads in [2, 3, 8] {
            assert_ne!(
                tiles(p.dims, threads),
                (m, n),
                "{threads} threads: one tile"
            );
            assert!(
                bits(on(threads)) == one,
                "{threads} threads differ from one"
            );
        }
    }

    #[test]
    fn tiles_cover_c_in_about_one_a_thread() {
        for (m, n, threads) in [
            (2048, 2048, 16),
            (1000, 3000, 6),
            (5000, 70, 2),
            (64, 9000, 8),
        ] {
            let (rows, cols) = tiles(Dims { m, n, k: 512 }, threads);
            let count = m.div_ceil(rows) * n.div_ceil(cols);
            assert!(rows <= m && cols <= n && rows > 0 && cols > 0);
            assert!(
                (threads..=4 * threads).contains(&count),
                "{m}x{n} on {threads}: {count} tiles"
            );
        }
        // Small products are one tile.
        assert_eq!(
            tiles(
                Dims {
                    m: 64,
                    n: 64,
                    k: 64
                },
                16
            ),
            (64, 64)
        );
    }

    #[test]
    fn mismatched_lengths_are_an_error() {
        let a = [1.0f32; 6];
        let p = Matmul {
            a: &a,
            b: &a[..5],
            dims: Dims { m: 2, n: 2, k: 3 },
            trans_a: false,
            trans_b: false,
            precision: Precision::F32,
        };
        assert!(matmul(&p).is_err());
    }
}
