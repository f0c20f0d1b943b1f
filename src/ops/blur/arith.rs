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
/// round(2^total_bits * g(k) / sum(g)), and the rounding remainder goes to the centre. Where
/// the weights are nearly flat (sigma large against a large radius) the rounded ones can
/// overshoot the total by more than the centre's weight: then each is rounded down and the
/// units left go to the centre (one, where they are odd) and to the pairs of taps with the
/// largest fractions, so the weights stay symmetric and none is negative.
pub fn gaussian_weights(sigma: f64, radius: u32, total_bits: u32) -> Vec<u32> {
    let r = radius as i64;
    let g: Vec<f64> = (-r..=r)
        .map(|k| (-((k * k) as f64) / (2.0 * sigma * sigma)).exp())
        .collect();
    let sum: f64 = g.iter().sum();
    let total = 1u64 << total_bits;
    let exact: Vec<f64> = g.iter().map(|x| x / sum * total as f64).collect();
    let mut w: Vec<u32> = exact.iter().map(|x| x.round() as u32).collect();
    let have: i64 = w.iter().map(|&x| x as i64).sum();
    let centre = radius as usize;
    let at_centre = w[centre] as i64 + total as i64 - have;
    if at_centre >= 0 {
        w[centre] = at_centre as u32;
        return w;
    }
    let mut w: Vec<u32> = exact.iter().map(|x| x.floor() as u32).collect();
    let mut left = total as i64 - w.iter().map(|&x| x as i64).sum::<i64>();
    if left % 2 == 1 {
        w[centre] += 1;
        left -= 1;
    }
    // The left side's taps by their fraction, largest first (each gives its pair a unit).
    let mut by_fraction: Vec<usize> = (0..centre).collect();
    by_fraction.sort_by(|&a, &b| {
        let f = |k: usize| exact[k] - exact[k].floor();
        f(b).total_cmp(&f(a)).then(a.cmp(&b))
    });
    for &k in by_fraction.iter().take((left / 2) as usize) {
        w[k] += 1;
        w[2 * centre - k] += 1;
    }
    w
}

/// The arithmetic of one blur, shared by the GPU and the CPU: what each pass does with a sum.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct Arith {
    /// (mul, add, div) of a pass: out = (S * mul + add) / div. `first` is the row pass of
    /// the first iteration (it adds F fraction bits). `second` is every column pass of an
    /// image without alpha (it removes them); with alpha, only the last one's, and only for
    /// its alpha lane (it also divides out the alpha scale).
    pub first: (u32, u32, u32),
    pub second: (u32, u32, u32),
    /// Images with alpha: every other pass (row passes after the first iteration, column
    /// passes before the last), which keeps the F fraction bits: (1, W / 2, W), W the window
    /// size or weight total.
    pub keep: (u32, u32, u32),
    /// Gaussian weights (empty for box).
    pub weights: Vec<u32>,
    /// How colour is weighted by alpha, for images with an alpha channel.
    pub alpha: Option<Premultiply>,
}

impl Arith {
    /// The (mul, add, div) of the row pass (`column` false) or the column pass of iteration
    /// `it` of `iterations`. For the last column pass of an image with alpha it applies to the
    /// alpha lane only (the colour lanes are divided by it: [`Premultiply::unpremultiply`]).
    pub fn pass(&self, it: u32, iterations: u32, column: bool) -> (u32, u32, u32) {
        match (self.alpha.is_some(), column) {
            (false, false) => self.first,
            (false, true) => self.second,
            (true, false) if it == 0 => self.first,
            (true, true) if it + 1 == iterations => self.second,
            (true, _) => self.keep,
        }
    }
}

impl Arith {
    /// The largest value a pass writes between the passes (the intermediate, and the state
    /// between iterations) of an image whose samples go up to `max_value`: the first row pass
    /// makes L * 2^F of a window of the largest lane L (the premultiplied one's where the
    /// image has alpha), and every later pass's output is at most the largest of its inputs
    /// ((S + W / 2) / W for sums S of W of them). Below 2^24 for every blur gpukit makes
    /// (`FMT_PACK24` in src/ops/blur/plan.rs).
    pub fn largest_between(&self, max_value: u32) -> u64 {
        let lane = self.alpha.map_or(max_value, |p| p.max_lane()) as u64;
        let (mul, add, div) = self.first;
        (self.keep.2 as u64 * lane * mul as u64 + add as u64) / div as u64
    }

    /// The last column pass of a window whose every alpha is the maximum, for images with
    /// alpha: its alpha sum is then one constant, so the colour's division is by a constant.
    /// The first row pass turns the maximum premultiplied alpha lane A into
    /// v = (A * W * mul + add) / div (A * 2^F) and every later pass keeps it
    /// ((v * W + W / 2) / W = v, W the window size or weight total), so the sum is v * W.
    /// None where that sum is not a multiple of M (not the case for any blur gpukit makes).
    /// Every pass is monotone in its sums and the weights total W, so `sa` is also the
    /// largest alpha sum the last pass sees in any window: the kernels choose their division
    /// by alpha by it (`DIV_32` in plan.rs).
    pub fn opaque(&self) -> Option<Opaque> {
        let p = self.alpha?;
        let w = self.keep.2 as u64;
        let (mul, add, div) = self.first;
        let v = (p.max_lane() as u64 * w * mul as u64 + add as u64) / div as u64;
        let sa = v * w;
        let m = p.max as u64;
        if sa == 0 || sa > u32::MAX as u64 || !sa.is_multiple_of(m) {
            return None;
        }
        Some(Opaque {
            sa: sa as u32,
            d: (sa / m) as u32,
            t: sa.div_ceil(2).div_ceil(m) as u32,
            max: p.max,
        })
    }
}

/// [`Premultiply::unpremultiply`] for the one alpha sum `sa` of an all-opaque window, with
/// sa = M * d. Writing s = q d + r (r < d): M s + floor(sa / 2) = q sa + M r + floor(sa / 2),
/// and M r + floor(sa / 2) < 2 sa, so the quotient is q, plus 1 where
/// M r >= sa - floor(sa / 2) = ceil(sa / 2), that is where r >= t = ceil(ceil(sa / 2) / M).
/// Two divisions by constants instead of a 48-bit one by a variable; the same results.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) struct Opaque {
    pub sa: u32,
    pub d: u32,
    pub t: u32,
    pub max: u32,
}

impl Opaque {
    /// The colour out of its window sum `s`, when the alpha sum is `self.sa`.
    #[inline(always)]
    pub fn colour(&self, s: u32) -> u32 {
        let (q, r) = (s / self.d, s % self.d);
        (q + (r >= self.t) as u32).min(self.max)
    }
}

/// Whether the kernels' division of a colour by alpha sums up to `sa`, for samples up to
/// `max` (M), may take its remainder in one 32-bit word (`DIV_32`, `unpremultiply_32` in
/// wgsl/shared/blur_pass.wgsl). Their estimate q of the quotient
/// x = (M s + floor(sa / 2)) / sa (at most M + 1/2) is the f32 estimate, within
/// 15 * 2^-24 * x < (M + 1) 2^-20 of x, lowered by (M + 1) 2^-19 (that subtraction rounded
/// within (M + 1) 2^-24) and truncated: so q > x - 1 - (M + 1) 2^-18, and the remainder
/// M s + floor(sa / 2) - q sa, a whole number, is below sa (1 + (M + 1) 2^-18). Where that
/// is at most 2^32 the remainder fits a word, and the wrapped arithmetic of the low words
/// gives it exactly: for every blur of 8-bit images (alpha sums below 65793 * 65025,
/// 0.996 * 2^32), for those of 16-bit ones whose alpha sums stay at most 0.8 * 2^32.
pub(super) fn remainder_fits_word(sa: u32, max: u32) -> bool {
    sa as u64 * ((1 << 18) + max as u64 + 1) <= 1 << 50
}

/// Colour weighted by alpha (docs/blur.md, "Alpha"). With maxval M, the premultiplied lanes
/// are q = (c * a + div / 2) / div for colour and a * scale for alpha, where div * scale = M:
/// div = 1, scale = 255 for 8-bit images (q = c * a exactly, at most 65025), div = 65535,
/// scale = 1 for 16-bit ones. The last column pass divides its window sums S (of which the
/// colour's is at most the alpha's) directly:
/// c = floor((M * S_colour + floor(S_alpha / 2)) / S_alpha), 0 where the alpha out is 0.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) struct Premultiply {
    /// The alpha lane: 1 (gray+alpha) or 3 (RGBA).
    pub lane: usize,
    pub div: u32,
    pub scale: u32,
    /// M, 255 or 65535.
    pub max: u32,
}

impl Premultiply {
    pub fn new(lane: usize, max: u32) -> Premultiply {
        let div = if max > 255 { max } else { 1 };
        Premultiply {
            lane,
            div,
            scale: max / div,
            max,
        }
    }

    /// The largest premultiplied lane, M * M / div (65025 or 65535).
    pub fn max_lane(&self) -> u32 {
        self.max * self.scale
    }

    /// A colour lane premultiplied: (c * a + div / 2) / div.
    #[inline(always)]
    pub fn colour(&self, c: u32, a: u32) -> u32 {
        match self.div {
            1 => Self::colour_by::<1>(c, a),
            _ => Self::colour_by::<65535>(c, a),
        }
    }

    /// [`Premultiply::colour`] with div as a constant (1 or 65535, as `new` sets it), so that
    /// a loop over pixels divides by a multiply.
    #[inline(always)]
    pub fn colour_by<const DIV: u32>(c: u32, a: u32) -> u32 {
        (c * a + DIV / 2) / DIV
    }

    /// A colour out of the last column pass's window sums s (colour) and sa (alpha, > 0):
    /// round half up of M * s / sa, at most M. M * s + sa / 2 < 2^48 and sa < 2^32, so the
    /// f64 quotient is within 2^-37 relative of the exact one and never reaches the next
    /// integer (at least 1 / sa >= 2^-32 away): its truncation is the integer quotient.
    #[inline(always)]
    pub fn unpremultiply(&self, s: u32, sa: u32) -> u32 {
        let num = s as u64 * self.max as u64 + (sa / 2) as u64;
        ((num as f64 / sa as f64) as u32).min(self.max)
    }
}

/// The arithmetic of a blur of an image whose samples go up to `max_value`, with its alpha
/// channel in `alpha_lane` if it has one.
pub(super) fn arith(params: &Options, max_value: u32, alpha_lane: Option<usize>) -> Result<Arith> {
    let r = params.radius;
    ensure!(params.iterations >= 1, "iterations must be at least 1");
    let alpha = alpha_lane.map(|lane| Premultiply::new(lane, max_value));
    // The largest value a pass's lanes carry, with room for rounding the alpha lane out of
    // its scale: M for images without alpha, 65025 + 255 or 65535 + 1 with it.
    let bound = alpha.map_or(max_value, |p| p.max_lane() + p.scale);
    let scale = alpha.map_or(1, |p| p.scale);
    match params.kind {
        Kind::Box => {
            let max_r = max_box_radius(bound);
            if r > max_r {
                bail!(crate::UsageError(format!(
                    "radius {r} is too large for {}-bit samples{} (at most {max_r})",
                    if max_value > 255 { 16 } else { 8 },
                    if alpha.is_some() { " with alpha" } else { "" }
                )));
            }
            let n = 2 * r as u64 + 1;
            let f = fraction_bits(n, bound).expect("radius checked above");
            let div2 = (n << f) as u32 * if alpha.is_some() { scale } else { 1 };
            Ok(Arith {
                first: (1 << f, (n / 2) as u32, n as u32),
                second: (1, div2 / 2, div2),
                keep: (1, (n / 2) as u32, n as u32),
                weights: Vec::new(),
                alpha,
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
            // 2^(G+F) * (bound + 1) <= 2^32: G = 16, F = 8 for 8-bit images without alpha,
            // G = 14, F = 2 for the others.
            let (g, f) = if bound > 255 { (14, 2) } else { (16, 8) };
            let weights = gaussian_weights(sigma, r, g);
            let div2 = (1u32 << (g + f)) * scale;
            Ok(Arith {
                first: (1, 1 << (g - f - 1), 1 << (g - f)),
                second: (1, div2 / 2, div2),
                keep: (1, 1 << (g - 1), 1 << g),
                weights,
                alpha,
            })
        }
    }
}

/// Why a gaussian radius is refused.
pub(super) fn gauss_radius_message(r: u32) -> String {
    // The default radius is ceil(3 sigma): at most MAX_GAUSS_RADIUS for sigma up to a third
    // of it (166.666..., shown rounded down so that the figure itself is taken).
    let sigma = (MAX_GAUSS_RADIUS as f64 / 3.0 * 1000.0).floor() / 1000.0;
    format!(
        "gaussian radius {r} is too large (at most {MAX_GAUSS_RADIUS}; sigma at most {sigma} without --radius)"
    )
}
