//! The native CPU engine for `matmul`: the `matrixmultiply` crate's sgemm (packed panels and
//! runtime-dispatched AVX2/FMA or AVX-512 microkernels, threaded on its own pool of one thread
//! per core, `MATMUL_NUM_THREADS` to change). The result is within `error_bound` of the f64
//! reference (docs/matmul.md): each element is an f32 sum of its K products in some order, and
//! the bound covers every order. f16 inputs are rounded to f16 first (`Precision::round`), as
//! the GPU kernel sees them. The threads split C by rows and columns, never along K, so every
//! element is summed the same way on any number of threads.

use anyhow::Result;

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
    let mut c = vec![0f32; m * n];
    // SAFETY: the pointers and strides describe a (m x k), b (k x n) and c (m x n) within
    // their slices (`check` verified the lengths); with beta = 0, c is only written.
    unsafe {
        matrixmultiply::sgemm(
            m,
            k,
            n,
            1.0,
            a.as_ptr(),
            a_rs as isize,
            a_cs as isize,
            b.as_ptr(),
            b_rs as isize,
            b_cs as isize,
            0.0,
            c.as_mut_ptr(),
            n as isize,
            1,
        );
    }
    Ok(c)
}

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

    /// matrixmultiply reads its thread count (MATMUL_NUM_THREADS) once per process, so this
    /// test runs itself in child processes on 1 and 3 threads and compares their products'
    /// bits.
    #[test]
    fn the_product_is_the_same_on_any_thread_count() {
        const CHILD: &str = "GPUKIT_MATMUL_THREADS_CHILD";
        let name = "ops::matmul::engine::tests::the_product_is_the_same_on_any_thread_count";
        if std::env::var_os(CHILD).is_some() {
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
            let c = matmul(&p).unwrap();
            let h = c
                .iter()
                .fold(0u64, |h, x| h.rotate_left(5) ^ x.to_bits() as u64);
            println!("product bits {h:016x}");
            return;
        }
        let bits = |threads: &str| {
            let out = std::process::Command::new(std::env::current_exe().unwrap())
                .args([name, "--exact", "--nocapture", "--test-threads=1"])
                .env(CHILD, "1")
                .env("MATMUL_NUM_THREADS", threads)
                .output()
                .unwrap();
            let text = String::from_utf8_lossy(&out.stdout).into_owned();
            assert!(out.status.success(), "child on {threads} threads: {text}");
            let at = text.find("product bits");
            let at = at.unwrap_or_else(|| panic!("no product from the child: {text}"));
            text[at..at + 29].to_owned()
        };
        assert_eq!(bits("1"), bits("3"));
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
