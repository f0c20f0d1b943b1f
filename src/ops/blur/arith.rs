//! The arithmetic of a blur, shared by the GPU passes and the CPU reference: fixed-point
//! fraction bits, gaussian weights, and what each pass does with a window sum.

use anyhow::{bail, ensure, Result};

use super::{Kind, Options};

/// The gaussian radius used when none is given: ceil(3 sigma), as ImageMagick and OpenCV do
/// for 8-bit images (weights beyond 3 sigma are below 1% of the centre weight).
pub fn gaussian_radius(sigma: f64) -> u32 {
    (3.0 * sigma).ceil().max(1.0) as u32
}

/// Fraction bits kept between the passes, at most 8: the most for which every intermediate
/// sum fits 32 bits (n * 2^F * (maxval + 1) <= 2^32, n the window size or weight total).
pub(super) fn fraction_bits(n: u64, max_value: u32) -> Option<u32> {
    (0..=8u32)
        .rev()
        .find(|&f| n * (1u64 << f) * (max_value as u64 + 1) <= 1u64 << 32)
}

/// The largest radius a box blur takes for samples up to `max_value` (32767 for 16-bit,
/// 8388607 for 8-bit images): beyond it the window sum no longer fits 32 bits.
pub fn max_box_radius(max_value: u32) -> u32 {
    (((1u64 << 32) / (max_value as u64 + 1) - 1) / 2) as u32
}

/// The largest gaussian radius (the kernel stages a chunk plus its halo in workgroup memory).
pub const MAX_GAUSS_RADIUS: u32 = 500;

/// Integer gaussian weights for offsets -r..=r summing to exactly 2^total_bits: each is
/// round(2^total_bits * g(k) / sum(g)), and the rounding remainder goes to the centre.
pub fn gaussian_weights(sigma: f64, radius: u32, total_bits: u32) -> Vec<u32> {
    let r = radius as i64;
    let g: Vec<f64> = (-r..=r)
        .map(|k| (-((k * k) as f64) / (2.0 * sigma * sigma)).exp())
        .collect();
    let sum: f64 = g.iter().sum();
    let total = 1u64 << total_bits;
    let mut w: Vec<u32> = g
        .iter()
        .map(|x| (x / sum * total as f64).round() as u32)
        .collect();
    let have: u64 = w.iter().map(|&x| x as u64).sum();
    let centre = radius as usize;
    w[centre] = (w[centre] as i64 + total as i64 - have as i64) as u32;
    w
}

/// The arithmetic of one blur, shared by the GPU and the CPU: what each pass does with a sum.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct Arith {
    /// (mul, add, div) of the first and the second pass: out = (S * mul + add) / div.
    pub first: (u32, u32, u32),
    pub second: (u32, u32, u32),
    /// Gaussian weights (empty for box).
    pub weights: Vec<u32>,
}

pub(super) fn arith(params: &Options, max_value: u32) -> Result<Arith> {
    let r = params.radius;
    ensure!(params.iterations >= 1, "iterations must be at least 1");
    match params.kind {
        Kind::Box => {
            let max_r = max_box_radius(max_value);
            if r > max_r {
                bail!(crate::UsageError(format!(
                    "radius {r} is too large for {}-bit samples (at most {max_r})",
                    if max_value > 255 { 16 } else { 8 }
                )));
            }
            let n = 2 * r as u64 + 1;
            let f = fraction_bits(n, max_value).expect("radius checked above");
            let first = (1 << f, (n / 2) as u32, n as u32);
            let div2 = (n << f) as u32;
            Ok(Arith {
                first,
                second: (1, div2 / 2, div2),
                weights: Vec::new(),
            })
        }
        Kind::Gaussian { sigma } => {
            if !(sigma > 0.0 && sigma.is_finite()) {
                bail!(crate::UsageError(format!(
                    "sigma must be positive, got {sigma}"
                )));
            }
            if r > MAX_GAUSS_RADIUS {
                bail!(crate::UsageError(gauss_radius_message(r)));
            }
            // Weights total 2^G and F fraction bits are kept between passes, with
            // 2^(G+F) * (maxval + 1) <= 2^32: G = 16, F = 8 for 8-bit, G = 14, F = 2 for 16-bit.
            let (g, f) = if max_value > 255 { (14, 2) } else { (16, 8) };
            let weights = gaussian_weights(sigma, r, g);
            Ok(Arith {
                first: (1, 1 << (g - f - 1), 1 << (g - f)),
                second: (1, 1 << (g + f - 1), 1 << (g + f)),
                weights,
            })
        }
    }
}

/// Why a gaussian radius is refused.
pub(super) fn gauss_radius_message(r: u32) -> String {
    format!(
        "gaussian radius {r} is too large (at most {MAX_GAUSS_RADIUS}; sigma at most {})",
        MAX_GAUSS_RADIUS / 3
    )
}
