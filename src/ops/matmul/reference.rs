//! The CPU reference: the product in f64 of the inputs as the kernel sees them, and the
//! documented bound between it and the GPU's f32 sums (docs/matmul.md).

use super::{Dims, Matmul};

/// The product in f64 of the inputs as the kernel sees them (rounded to f16 for
/// `Precision::F16`), and per element sum_k |a_ik b_kj|, which scales the error bound.
pub fn exact(p: &Matmul) -> (Vec<f64>, Vec<f64>) {
    let Dims { m, n, k } = p.dims;
    let mut c = vec![0.0; m * n];
    let mut abs = vec![0.0; m * n];
    for i in 0..m {
        for j in 0..n {
            let (mut sum, mut sum_abs) = (0.0f64, 0.0f64);
            for kk in 0..k {
                let prod = p.a_at(i, kk) as f64 * p.b_at(kk, j) as f64;
                sum += prod;
                sum_abs += prod.abs();
            }
            c[i * n + j] = sum;
            abs[i * n + j] = sum_abs;
        }
    }
    (c, abs)
}

/// The CPU reference: f64 accumulation, rounded to f32 once at the end.
pub fn reference(p: &Matmul) -> Vec<f32> {
    exact(p).0.iter().map(|&x| x as f32).collect()
}

/// The documented bound on |c - c_ref| for one element of the GPU result, where c_ref and
/// `abs_sum` = sum_k |a_ik b_kj| come from [`exact`]: (K + 1) eps_f32 abs_sum. For f16
/// the bound is against the f16-rounded inputs; against the inputs as given it grows by
/// 2 eps_f16 abs_sum (docs/matmul.md).
pub fn error_bound(k: usize, abs_sum: f64) -> f64 {
    (k as f64 + 1.0) * f32::EPSILON as f64 * abs_sum
}

/// The first element of `got` outside the documented bound of the exact product `want`
/// (with `abs` from [`exact`]; NaN is outside): the one tolerance check of tests and tune.
pub fn outside_bound(got: &[f32], want: &[f64], abs: &[f64], k: usize) -> Option<usize> {
    (0..want.len()).find(|&i| {
        let diff = (got[i] as f64 - want[i]).abs();
        !matches!(
            diff.partial_cmp(&error_bound(k, abs[i])),
            Some(std::cmp::Ordering::Less | std::cmp::Ordering::Equal)
        )
    })
}
