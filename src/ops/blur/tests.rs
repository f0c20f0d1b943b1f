//! Unit tests of the blur's arithmetic, layout helpers and CPU reference.

use super::arith::fraction_bits;
use super::plan::{
    dot4_layout, dot4_words, max_lines, mid_stride, opaque_arith, segment_len, weight_slots,
    WEIGHT_SLOTS,
};
use super::*;
use crate::io::image::Samples;

#[test]
fn weights_sum_to_a_power_of_two_and_are_symmetric() {
    for sigma in [0.5, 1.0, 5.0, 30.0] {
        let r = gaussian_radius(sigma);
        let w = gaussian_weights(sigma, r, 16);
        assert_eq!(w.iter().map(|&x| x as u64).sum::<u64>(), 1 << 16);
        assert_eq!(w.len(), 2 * r as usize + 1);
        for k in 0..r as usize {
            assert_eq!(w[k], w[w.len() - 1 - k], "sigma {sigma}");
        }
    }
    // Nearly flat weights, where the rounded ones overshoot the total by more than the
    // centre's weight (at sigma = r = 402 on 14 bits, and sigma 10^6, r = 400 on 16, the centre
    // wrapped below zero before):
    // still the total and symmetric, and there each within one of its exact share. Where the
    // centre can take the remainder (sigma 1000, r 200), it still does.
    for (sigma, r, bits, near) in [
        (402.0, 402, 14, true),
        (1e6, 400, 16, true),
        (5000.0, 500, 16, false),
        (1000.0, 200, 14, false),
    ] {
        let w = gaussian_weights(sigma, r, bits);
        assert_eq!(w.iter().map(|&x| x as u64).sum::<u64>(), 1 << bits);
        let g: Vec<f64> = (-(r as i64)..=r as i64)
            .map(|k| (-((k * k) as f64) / (2.0 * sigma * sigma)).exp())
            .collect();
        let sum: f64 = g.iter().sum();
        for (k, &x) in w.iter().enumerate() {
            assert_eq!(x, w[w.len() - 1 - k], "sigma {sigma} r {r}");
            let share = g[k] / sum * (1u64 << bits) as f64;
            let off = (x as f64 - share).abs();
            assert!(
                off < if near { 1.0 } else { share },
                "sigma {sigma} r {r}: {x} against {share}"
            );
        }
    }
}

#[test]
fn padded_strides_fit_their_budget_and_avoid_powers_of_two() {
    for cap in [1u64, 38, 255, 300, 336, 337, 5000, 1 << 20] {
        let lines = max_lines(cap);
        assert!(mid_stride(lines as u32) as u64 <= cap, "{cap}");
        assert!(lines > 0);
    }
    assert_eq!(mid_stride(2048), 2064);
    assert_eq!(mid_stride(2160), 2192);
    assert_eq!(mid_stride(100), 100);
}

#[test]
fn fraction_bits_and_radius_limits() {
    assert_eq!(fraction_bits(31, 255), Some(8));
    assert_eq!(fraction_bits(31, 65535), Some(8));
    assert_eq!(fraction_bits(65535, 65535), Some(0));
    assert_eq!(fraction_bits(65537, 65535), None);
    assert_eq!(max_box_radius(65535), 32767);
    assert_eq!(max_box_radius(255), 8388607);
}

// The passes' values between them fit the intermediates' lanes: 16 bits for 8-bit images
// without alpha (FMT_PACK16), 24 for the others (FMT_PACK24), at every radius. Hand-computed
// largest values first: L * 2^F for the largest lane L.
#[test]
fn the_values_between_the_passes_fit_their_lanes() {
    let largest = |kind, r, max, lane| {
        arith::arith(&Options::new(kind, r, 1), max, lane)
            .unwrap()
            .largest_between(max)
    };
    // RGBA8 box r=15: c * a = 65025, F = 8.
    assert_eq!(largest(Kind::Box, 15, 255, Some(3)), 65025 * 256);
    // 16-bit gray box r=1, F = 8: 2^24 - 256, the closest to the bound.
    assert_eq!(largest(Kind::Box, 1, 65535, None), 16_776_960);
    // 16-bit box r=128 (n = 257): F = 7.
    assert_eq!(largest(Kind::Box, 128, 65535, None), 65535 * 128);
    // RGB8 box r=15 and gaussian: F = 8; gaussians with alpha or 16 bits: F = 2.
    assert_eq!(largest(Kind::Box, 15, 255, None), 255 * 256);
    let gauss = Kind::Gaussian { sigma: 5.0 };
    assert_eq!(largest(gauss, 15, 255, None), 255 * 256);
    assert_eq!(largest(gauss, 15, 255, Some(1)), 65025 * 4);
    assert_eq!(largest(gauss, 15, 65535, Some(3)), 65535 * 4);

    let mut radii: Vec<u32> = (0..=1100).collect();
    radii.extend((11..=23).flat_map(|b| [(1u32 << b) - 1, 1 << b, (1 << b) + 1]));
    // The largest radii: 16-bit samples, 8-bit ones with alpha, 8-bit ones.
    radii.extend([32767, 32895, 8388607]);
    for (max, lane) in [
        (255, None),
        (255, Some(1)),
        (255, Some(3)),
        (65535, None),
        (65535, Some(3)),
    ] {
        let bound = if max == 255 && lane.is_none() {
            1 << 16
        } else {
            1 << 24
        };
        for &r in &radii {
            if let Ok(ar) = arith::arith(&Options::new(Kind::Box, r, 1), max, lane) {
                assert!(
                    ar.largest_between(max) < bound,
                    "box r {r}, max {max}, {lane:?}"
                );
            }
        }
        for r in 1..=arith::MAX_GAUSS_RADIUS {
            for sigma in [0.3, r as f64 / 3.0, r as f64] {
                let ar =
                    arith::arith(&Options::new(Kind::Gaussian { sigma }, r, 1), max, lane).unwrap();
                assert!(
                    ar.largest_between(max) < bound,
                    "gaussian r {r} sigma {sigma}, max {max}"
                );
            }
        }
    }
}

// Hand-computed: a 3-pixel gray row 0, 30, 255 with r = 1 and clamped edges has window
// sums 30, 285, 540; the column pass of a 1-row image repeats each value 3 times.
#[test]
fn box_by_hand() {
    let img = Image::new_u8(3, 1, 1, vec![0, 30, 255]);
    let out = reference(&img, &Options::new(Kind::Box, 1, 1)).unwrap();
    // Row pass: round(256 * S / 3) = 2560, 24320, 46080; column pass: round(3 * v / 768).
    assert_eq!(out.samples, Samples::U8(vec![10, 95, 180]));
}

#[test]
fn box_is_within_one_of_the_exact_mean() {
    let (w, h) = (13usize, 7usize);
    let data: Vec<u8> = (0..w * h).map(|i| (i * 97 % 256) as u8).collect();
    let img = Image::new_u8(w as u32, h as u32, 1, data.clone());
    for r in [0i64, 1, 2, 5, 20] {
        let out = reference(&img, &Options::new(Kind::Box, r as u32, 1)).unwrap();
        let Samples::U8(out) = out.samples else {
            unreachable!()
        };
        for y in 0..h as i64 {
            for x in 0..w as i64 {
                let mut s = 0f64;
                for dy in -r..=r {
                    for dx in -r..=r {
                        let (xx, yy) = (
                            (x + dx).clamp(0, w as i64 - 1),
                            (y + dy).clamp(0, h as i64 - 1),
                        );
                        s += data[(yy * w as i64 + xx) as usize] as f64;
                    }
                }
                let exact = s / ((2 * r + 1) * (2 * r + 1)) as f64;
                let got = out[(y * w as i64 + x) as usize] as f64;
                assert!(
                    (got - exact).abs() <= 1.0,
                    "r {r} ({x},{y}): {got} vs {exact}"
                );
            }
        }
    }
}

// Hand-computed: gray+alpha (200, 1), (10, 3), box r = 1 on one row. The clamped windows
// weigh colour by alpha exactly: (200 + 200 + 30) / (1 + 1 + 3) = 86.0 and
// (200 + 30 + 30) / (1 + 3 + 3) = 37.1; alpha 5 / 3 and 7 / 3 round to 2. (Premultiplied into
// 8 bits first, as before, 200 * 1 / 255 rounds to 1 and 10 * 3 / 255 to 0: 128 and 0.)
#[test]
fn low_alpha_colour_is_the_exact_weighted_mean() {
    let img = Image::new_u8(2, 1, 2, vec![200, 1, 10, 3]);
    let out = reference(&img, &Options::new(Kind::Box, 1, 1)).unwrap();
    assert_eq!(out.samples, Samples::U8(vec![86, 2, 37, 2]));
    assert_eq!(
        engine::blur(&img, &Options::new(Kind::Box, 1, 1)).unwrap(),
        out
    );
}

// No dark fringe: a red pixel next to transparent black blurs to red, not dark red.
#[test]
fn colour_is_weighted_by_alpha() {
    let img = Image::new_u8(2, 1, 4, vec![255, 0, 0, 255, 0, 0, 0, 0]);
    let out = reference(&img, &Options::new(Kind::Box, 1, 1)).unwrap();
    let Samples::U8(px) = out.samples else {
        unreachable!()
    };
    assert_eq!(&px[0..3], &[255, 0, 0]);
    assert_eq!(&px[4..7], &[255, 0, 0]);
    assert!(px[7] > 0 && px[7] < 255);
}

/// `wide_mul` of wgsl/shared/blur_pass.wgsl: x * m as (low word, high word), m <= 65537.
fn wide_mul(x: u32, m: u32) -> (u32, u32) {
    let lo = (x & 0xffff) * m;
    let hi = (x >> 16) * m;
    let low = lo.wrapping_add(hi << 16);
    (low, (hi >> 16) + u32::from(low < lo))
}

/// The kernels' correction of an estimate q of the colour's division (`unpremultiply` of
/// wgsl/shared/blur_pass.wgsl in 48-bit words, or `unpremultiply_32` in one wrapped word).
fn kernel_correct(s: u32, sa: u32, max: u32, q: u32, div_32: bool) -> u32 {
    let up = if div_32 {
        let r = s
            .wrapping_mul(max)
            .wrapping_add(sa >> 1)
            .wrapping_sub(sa.wrapping_mul(q));
        r >= sa
    } else {
        let p = wide_mul(s, max);
        let low = p.0.wrapping_add(sa >> 1);
        let num = (low, p.1 + u32::from(low < p.0));
        let prod = wide_mul(sa, q);
        let r_lo = num.0.wrapping_sub(prod.0);
        let r_hi = num
            .1
            .wrapping_sub(prod.1)
            .wrapping_sub(u32::from(num.0 < prod.0));
        r_hi != 0 || r_lo >= sa
    };
    (q + u32::from(up)).min(max)
}

/// The kernels' estimate (`estimate` of wgsl/shared/blur_pass.wgsl) with IEEE rounding, the
/// fma fused or as a product and a sum.
fn kernel_estimate(s: u32, sa: u32, max: u32, fused: bool) -> u32 {
    let inv = 1.0f32 / sa as f32;
    let h = (sa >> 1) as f32;
    let n = match fused {
        true => (s as f32).mul_add(max as f32, h),
        false => s as f32 * max as f32 + h,
    };
    let under = (max + 1) as f32 / 524_288.0;
    (n * inv - under).max(0.0) as u32
}

// The kernels' division of a colour sum by the alpha sum (wgsl/shared/blur_pass.wgsl) run in
// Rust: the estimate, with IEEE rounding and at the worst any adapter may round, is the
// quotient or one less with its remainder below sa (1 + (M + 1) 2^-18), and from every such
// estimate the 48-bit correction (any alpha sum) and the 32-bit one (alpha sums for which
// `remainder_fits_word`, `DIV_32`) make `Premultiply::unpremultiply`'s quotient; the 48-bit
// one also from an estimate one less wherever. Alpha sums up to 2^32 - 1, colour sums up to
// them: the range's edges, quotients' steps, pseudo-random pairs.
#[test]
fn the_division_by_alpha_corrects_its_estimate_exactly() {
    for max in [255u32, 65535] {
        let p = arith::Premultiply::new(3, max);
        let mut x = 0x2545_f491_u64;
        let mut next = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let top = [(1u64 << 30) - 1, 1 << 31, u32::MAX as u64];
        let mut pairs: Vec<(u32, u32)> = vec![(0, 1), (1, 1)];
        pairs.extend(
            top.iter()
                .flat_map(|&sa| [(0, sa as u32), (sa as u32, sa as u32)]),
        );
        for k in 0..200_000 {
            let bound = top[k % 3];
            let sa = (next() % (bound + 1)).max(1) as u32;
            let s = (next() % (sa as u64 + 1)) as u32;
            pairs.push((s, sa));
            // A colour sum on a quotient's step: M s + sa / 2 >= q sa first.
            let q = next() % (max as u64 + 1);
            let step = (q * sa as u64)
                .saturating_sub(sa as u64 / 2)
                .div_ceil(max as u64);
            if step <= sa as u64 {
                pairs.push((step as u32, sa));
            }
        }
        // Estimates one less corrected in a word where the alpha sum passes 2^31.
        let mut past_2_31 = 0;
        for (s, sa) in pairs {
            let want = p.unpremultiply(s, sa);
            let num = s as u64 * max as u64 + sa as u64 / 2;
            let exact = num / sa as u64;
            assert_eq!(want as u64, exact.min(max as u64));
            let what = format!("max {max}: s {s}, sa {sa}");
            // The remainder of an estimate q below sa (1 + (M + 1) 2^-18).
            let bounded =
                |q: u64| (num - q * sa as u64) << 18 < sa as u64 * ((1 << 18) + max as u64 + 1);
            for fused in [true, false] {
                let q = kernel_estimate(s, sa, max, fused) as u64;
                assert!(q == exact || q + 1 == exact, "{what}: estimate {q}");
                assert!(bounded(q), "{what}: estimate {q}'s remainder");
            }
            // The lowest and highest estimates any adapter may make (`remainder_fits_word`'s
            // analysis): the f32 quotient 15 * 2^-24 of it off, the subtraction of `under()`
            // (M + 1) 2^-24 off, both one way or the other, then truncated.
            let x = num as f64 / sa as f64;
            let m1 = (max + 1) as f64;
            let off = 15.0 * x / 16_777_216.0 + m1 / 16_777_216.0;
            let under = m1 / 524_288.0;
            let lowest = (x - under - off).max(0.0) as u64;
            let highest = (x - under + off).max(0.0) as u64;
            assert!(
                lowest + 1 >= exact && highest <= exact,
                "{what}: {lowest}..={highest}"
            );
            let fits = arith::remainder_fits_word(sa, max);
            for q in lowest..=highest {
                assert!(bounded(q), "{what}: estimate {q}'s remainder");
                past_2_31 += (fits && q < exact && sa > 1 << 31) as u32;
                for div_32 in [false, fits] {
                    let got = kernel_correct(s, sa, max, q as u32, div_32);
                    assert_eq!(got, want, "{what}: estimate {q}, 32-bit {div_32}");
                }
            }
            // The 48-bit correction from either, whatever the alpha sum.
            for q in [exact.saturating_sub(1), exact] {
                assert_eq!(
                    kernel_correct(s, sa, max, q as u32, false),
                    want,
                    "{what}: {q}"
                );
            }
        }
        assert!(past_2_31 > 1000, "max {max}: {past_2_31}");
    }
}

// Which blurs of images with alpha divide in a word (`DIV_32`): every blur of 8-bit images
// (their alpha sums stay below 65793 * 65025, 0.996 * 2^32), and those of 16-bit images whose
// alpha sums stay at most 0.8 * 2^32.
#[test]
fn the_division_by_alpha_takes_a_word_where_its_remainder_fits() {
    let fits = |options: Options, max: u32| {
        let o = arith::arith(&options, max, Some(1))
            .unwrap()
            .opaque()
            .unwrap();
        arith::remainder_fits_word(o.sa, o.max)
    };
    let largest = arith::max_box_radius(65025 + 255);
    assert!((0..=largest).all(|r| fits(Options::new(Kind::Box, r, 1), 255)));
    for (sigma, r) in [(0.5, 2), (5.0, 15), (160.0, 500)] {
        assert!(fits(Options::new(Kind::Gaussian { sigma }, r, 1), 255));
        assert!(!fits(Options::new(Kind::Gaussian { sigma }, r, 1), 65535));
    }
    // 16-bit: 31 * 2^8 * 65535 = 0.12 * 2^32; 203 * 2^8 * 65535 = 0.793 * 2^32 (r = 101);
    // 205 * 2^8 * 65535 = 0.801 * 2^32 (r = 102); 255 * 2^8 * 65535 = 0.995 * 2^32.
    assert!(fits(Options::new(Kind::Box, 15, 1), 65535));
    assert!(fits(Options::new(Kind::Box, 101, 1), 65535));
    assert!(!fits(Options::new(Kind::Box, 102, 1), 65535));
    assert!(!fits(Options::new(Kind::Box, 127, 1), 65535));
}

// `Opaque::colour` is `Premultiply::unpremultiply` at the all-opaque alpha sum, for every
// blur arithmetic: every colour sum from 0 to sa where sa is small, else those around each
// quotient's step and the rounding threshold, and a stride through the rest.
#[test]
fn the_opaque_division_by_constants_equals_the_exact_unpremultiply() {
    let mut cases = Vec::new();
    for r in [0, 1, 2, 7, 15, 100, 1000] {
        cases.push(Options::new(Kind::Box, r, 1));
    }
    for (sigma, r) in [(0.5, 2), (1.0, 3), (5.0, 15), (30.0, 90)] {
        cases.push(Options::new(Kind::Gaussian { sigma }, r, 1));
    }
    for options in &cases {
        for (max, lane) in [(255, 3), (65535, 1)] {
            let ar = arith::arith(options, max, Some(lane)).unwrap();
            let p = ar.alpha.unwrap();
            let o = ar.opaque().unwrap_or_else(|| panic!("{options:?} {max}"));
            assert_eq!(o.sa as u64, o.d as u64 * max as u64);
            let check = |s: u32| {
                assert_eq!(
                    o.colour(s),
                    p.unpremultiply(s, o.sa),
                    "{options:?} max {max}: s {s}, sa {}",
                    o.sa
                )
            };
            if o.sa <= 1 << 20 {
                (0..=o.sa).for_each(check);
                continue;
            }
            for q in (0..=max).step_by(if max > 255 { 97 } else { 1 }) {
                let base = q * o.d;
                for s in [base, base + 1, base + o.t - 1, base + o.t, base + o.d - 1] {
                    if s <= o.sa {
                        check(s);
                    }
                }
            }
            (0..=o.sa).step_by(o.sa as usize / 5003).for_each(check);
        }
    }
}

// The all-opaque alpha sum is the one an opaque image's windows give: an opaque image with
// one translucent pixel blurs on the native engine (which divides by constants wherever the
// window is all opaque) as the reference does (which always divides by the alpha sum).
#[test]
fn opaque_windows_blur_as_the_reference_does() {
    for sixteen in [false, true] {
        for (c, (w, h)) in [(4u8, (23u32, 19u32)), (2, (9, 31))] {
            let n = (w * h * c as u32) as usize;
            let max = if sixteen { 65535 } else { 255 };
            let samples: Vec<u32> = (0..n)
                .map(|i| {
                    if i % c as usize == c as usize - 1 {
                        if i / c as usize == 40 {
                            max / 3
                        } else {
                            max
                        }
                    } else {
                        (i as u32).wrapping_mul(2654435761) >> 7 & max
                    }
                })
                .collect();
            let img = if sixteen {
                Image::new_u16(w, h, c, samples.iter().map(|&v| v as u16).collect())
            } else {
                Image::new_u8(w, h, c, samples.iter().map(|&v| v as u8).collect())
            };
            for options in [
                Options::new(Kind::Box, 1, 1),
                Options::new(Kind::Box, 4, 2),
                Options::new(Kind::Gaussian { sigma: 1.5 }, 5, 1),
            ] {
                let want = reference(&img, &options).unwrap();
                assert_eq!(engine::blur(&img, &options).unwrap(), want, "{options:?}");
            }
        }
    }
}

// The all-opaque passes' column pass turns each row sum S of plain 8-bit samples into what
// the premultiplying row pass writes for the same row with every alpha 255 (`opaque_expand`):
// for every sum of every radius they take, within a word as the shader computes it; and its
// alpha out, 255, is what the usual last pass makes of the all-opaque alpha sum. The radius
// past them has none.
/// An 8-bit RGBA blur's arithmetic, its all-opaque passes' (which it must have), and its
/// usual first row pass as a function of a premultiplied row sum.
fn opaque_case(
    options: &Options,
) -> (
    arith::Arith,
    arith::Premultiply,
    plan::OpaqueArith,
    impl Fn(u64) -> u64,
) {
    let ar = arith::arith(options, 255, Some(3)).unwrap();
    let p = ar.alpha.unwrap();
    let oa = opaque_arith(options, &ar, 255, 4).unwrap();
    let (mul, add, div) = ar.first;
    let row_pass = move |premultiplied: u64| (premultiplied * mul as u64 + add as u64) / div as u64;
    (ar, p, oa, row_pass)
}

/// What the all-opaque column pass writes for alpha, 255, is what the usual last pass makes
/// of the all-opaque alpha sum.
fn assert_opaque_alpha_out(ar: &arith::Arith, what: &str) {
    let (_, add2, div2) = ar.second;
    let o = ar.opaque().unwrap();
    assert_eq!((o.sa as u64 + add2 as u64) / div2 as u64, 255, "{what}");
}

#[test]
fn the_opaque_expansion_is_the_premultiplying_row_pass() {
    for r in [0, 1, 2, 3, 7, 15, 64, 100, 128] {
        let options = Options::new(Kind::Box, r, 1);
        let (ar, p, oa, row_pass) = opaque_case(&options);
        assert_eq!(oa.rows, (1, 0, 1), "r = {r}: plain sums");
        let (em, ea, ed) = oa.expand;
        let n = 2 * r + 1;
        for s in 0..=255 * n {
            // A row of n samples summing to s: full ones, then the rest, then zeros.
            let row = (0..n).map(|i| (s - (255 * i).min(s)).min(255));
            let colour: u64 = row.map(|c| p.colour(c, 255) as u64).sum();
            let expanded = s.checked_mul(em).and_then(|v| v.checked_add(ea)).unwrap() / ed;
            assert_eq!(expanded as u64, row_pass(colour), "r = {r}, s = {s}");
        }
        // The all-opaque alpha sum is n rows of what the row pass writes for an opaque row.
        let sa = ar.opaque().unwrap().sa as u64;
        assert_eq!(sa, n as u64 * row_pass((255 * p.scale * n) as u64));
        assert_opaque_alpha_out(&ar, &format!("r = {r}"));
    }
    let past = Options::new(Kind::Box, 129, 1);
    let ar = arith::arith(&past, 255, Some(3)).unwrap();
    assert_eq!(opaque_arith(&past, &ar, 255, 4), None);
}

// The all-opaque gaussian's row pass makes, from its weighted sum X of plain 8-bit samples,
// what the premultiplying row pass writes for the same row with every alpha 255: for rows of
// every constant value and of noise, at radii up to the largest; its values fit the 18 bits
// a lane of its intermediate has, and the alpha out is 255 as in the box's case.
#[test]
fn the_opaque_gaussian_rows_are_the_premultiplying_row_pass() {
    for (sigma, r) in [(0.5, 1), (1.0, 3), (5.0, 15), (20.0, 60), (160.0, 500)] {
        let options = Options::new(Kind::Gaussian { sigma }, r, 1);
        let (ar, p, oa, row_pass) = opaque_case(&options);
        assert_eq!(oa.expand, (1, 0, 1), "sigma {sigma}: nothing on load");
        let (rm, ra, rd) = oa.rows;
        let mut next = 0x2545_f491_u32;
        let rows: Vec<Vec<u32>> = (0..=255)
            .map(|c| vec![c; ar.weights.len()])
            .chain((0..64).map(|_| {
                (0..ar.weights.len())
                    .map(|_| {
                        next ^= next << 13;
                        next ^= next >> 17;
                        next ^= next << 5;
                        next & 255
                    })
                    .collect()
            }))
            .collect();
        for row in rows {
            let x: u64 = row
                .iter()
                .zip(&ar.weights)
                .map(|(&c, &w)| c as u64 * w as u64)
                .sum();
            let premultiplied: u64 = row
                .iter()
                .zip(&ar.weights)
                .map(|(&c, &w)| p.colour(c, 255) as u64 * w as u64)
                .sum();
            let usual = row_pass(premultiplied);
            let opaque = (x as u32)
                .checked_mul(rm)
                .and_then(|v| v.checked_add(ra))
                .unwrap()
                / rd;
            assert_eq!(opaque as u64, usual, "sigma {sigma}");
            assert!(opaque < 1 << 18, "sigma {sigma}: {opaque}");
        }
        assert_opaque_alpha_out(&ar, &format!("sigma {sigma}"));
    }
    let twice = Options::new(Kind::Gaussian { sigma: 1.0 }, 3, 2);
    let ar = arith::arith(&twice, 255, Some(3)).unwrap();
    assert_eq!(opaque_arith(&twice, &ar, 255, 4), None);
}

// One line an invocation: segments keep an invocation's loop iterations (a box's first window,
// its taps inside the line, and a position each; a gaussian's taps and one a position) within
// 2^15, and are whole lines where that allows.
#[test]
fn line_segments_stay_within_the_loop_budget() {
    let line = Layout::LinePerInvocation;
    let gauss = Kind::Gaussian { sigma: 5.0 };
    // A box radius past the line: its first window is the line, so the segment is too.
    assert_eq!(segment_len(Kind::Box, line, 16_400, (8000, 8000), 1), 8000);
    assert_eq!(segment_len(Kind::Box, line, 2, (70_000, 70_000), 1), 32_763);
    assert_eq!(segment_len(Kind::Box, line, 2, (100, 5000), 1), 100);
    assert_eq!(segment_len(gauss, line, 15, (2100, 2100), 1), 1024);
    assert_eq!(segment_len(gauss, line, 500, (2100, 2100), 1), 32);
    assert_eq!(segment_len(gauss, line, 15, (0, 0), 1), 1);
}

// Workgroups walk box segments of 256 positions, or a quarter of the first window (its taps
// inside the line) where that is longer, in whole chunks and at most the line.
#[test]
fn box_segments_are_256_positions_or_a_quarter_of_the_first_window() {
    let wg = Layout::Workgroup;
    assert_eq!(segment_len(Kind::Box, wg, 15, (2160, 2160), 32), 256);
    assert_eq!(segment_len(Kind::Box, wg, 100, (3840, 3840), 32), 256);
    // 2001 taps: 500 positions, rounded up to whole chunks of at least 64.
    assert_eq!(segment_len(Kind::Box, wg, 1000, (3840, 3840), 32), 512);
    assert_eq!(segment_len(Kind::Box, wg, 1000, (2160, 2160), 128), 512);
    // The first window is the line (1024), a quarter of it 256; past the image, the same.
    assert_eq!(segment_len(Kind::Box, wg, 1000, (1024, 1024), 32), 256);
    assert_eq!(segment_len(Kind::Box, wg, 30_000, (1024, 1024), 32), 256);
    // A strip's rows (`len`) of a longer line, and lines shorter than a segment.
    assert_eq!(segment_len(Kind::Box, wg, 2000, (300, 2100), 32), 300);
    assert_eq!(segment_len(Kind::Box, wg, 3, (37, 37), 32), 37);
}

// Which blurs have all-opaque passes, so that the batch checks their staged uploads: 8-bit
// RGBA blurred once, the box at r <= 128; nothing else.
#[test]
fn the_opaque_passes_are_for_8_bit_rgba_blurred_once() {
    let rgba = Image::new_u8(4, 4, 4, vec![255; 64]);
    let gauss = Kind::Gaussian { sigma: 2.0 };
    for (options, img, has) in [
        (Options::new(Kind::Box, 3, 1), &rgba, true),
        (Options::new(Kind::Box, 128, 1), &rgba, true),
        (Options::new(gauss, 6, 1), &rgba, true),
        (Options::new(Kind::Box, 129, 1), &rgba, false),
        (Options::new(Kind::Box, 3, 2), &rgba, false),
        (Options::new(gauss, 6, 2), &rgba, false),
        (
            Options::new(Kind::Box, 3, 1),
            &Image::new_u8(4, 4, 3, vec![255; 48]),
            false,
        ),
        (
            Options::new(Kind::Box, 3, 1),
            &Image::new_u8(4, 4, 2, vec![255; 32]),
            false,
        ),
        (
            Options::new(Kind::Box, 3, 1),
            &Image::new_u16(4, 4, 4, vec![65535; 64]),
            false,
        ),
    ] {
        assert_eq!(
            options.has_opaque_passes(img),
            has,
            "{options:?} {}",
            img.describe()
        );
    }
}

#[test]
fn the_dot_product_passes_weight_bytes_are_laid_out_by_output_and_word() {
    // r = 1: taps 0x0001, 0x0203, 0x0405; two words a thread (bytes 0..7). Output i's tap k
    // is byte i + k: for each output (0..3) and word, the high bytes, then the low bytes.
    assert_eq!(dot4_words(1), 2);
    assert_eq!((dot4_words(15), dot4_words(16)), (9, 9));
    let slots = weight_slots(&[0x0001, 0x0203, 0x0405]);
    assert_eq!(&slots[..4], &[0x0001, 0x0203, 0x0405, 0]);
    let table: Vec<u32> = slots[WEIGHT_SLOTS..WEIGHT_SLOTS + 16].to_vec();
    #[rustfmt::skip]
    let want = [
        0x0004_0200, 0x0005_0301, 0, 0, // output 0: bytes 0, 1, 2
        0x0402_0000, 0x0503_0100, 0, 0, // output 1: bytes 1, 2, 3
        0x0200_0000, 0x0301_0000, 0x0000_0004, 0x0000_0005, // output 2: bytes 2, 3, 4
        0, 0x0100_0000, 0x0000_0402, 0x0000_0503, // output 3: bytes 3, 4, 5
    ];
    assert_eq!(table, want);
    assert!(slots[WEIGHT_SLOTS + 16..].iter().all(|&w| w == 0));
}

#[test]
fn dot_products_of_the_weights_bytes_give_the_direct_sums_at_every_radius() {
    // What a DOT4 thread computes (wgsl/blur_gauss.wgsl `dot4_chunk`): output i of thread t
    // sums, over words j of each lane's plane (bytes: positions 4(t + j) .. + 3 from the first
    // tap), two 4 x 8-bit dot products with the weights' high and low bytes, 256 H + L. It
    // must equal the direct sum of w_k x_(4t + i + k), for weights totalling 2^16 and 2^14.
    let dot4 = |a: u32, b: u32| -> u32 {
        (0..4)
            .map(|k| ((a >> (8 * k)) & 255) * ((b >> (8 * k)) & 255))
            .sum()
    };
    let mut state = 7u32;
    let mut next = || {
        state ^= state << 13;
        state ^= state >> 17;
        state ^= state << 5;
        state
    };
    for r in [0u32, 1, 2, 3, 4, 5, 15, 16, 31, 100, 333, 499, 500] {
        for bits in [16, 14] {
            let w = gaussian_weights((r.max(1) as f64) / 3.0, r, bits);
            if w.iter().any(|&x| x >= 1 << 16) {
                continue;
            }
            let slots = weight_slots(&w);
            let words = dot4_words(r) as usize;
            let threads = 5;
            let x: Vec<u32> = (0..4 * (threads + words)).map(|_| next() & 255).collect();
            let plane = |g: usize| (0..4).map(|b| x[4 * g + b] << (8 * b)).sum::<u32>();
            for t in 0..threads {
                for i in 0..4 {
                    let (mut hi, mut lo) = (0u32, 0u32);
                    for j in 0..words {
                        let at = WEIGHT_SLOTS + 2 * (i * words + j);
                        hi += dot4(plane(t + j), slots[at]);
                        lo += dot4(plane(t + j), slots[at + 1]);
                    }
                    let want: u32 = (0..w.len()).map(|k| w[k] * x[4 * t + i + k]).sum();
                    assert_eq!(
                        hi * 256 + lo,
                        want,
                        "r={r} bits {bits} thread {t} output {i}"
                    );
                }
            }
        }
    }
}

#[test]
fn the_dot_product_planes_of_lines_a_warp_shares_start_on_different_banks() {
    // Thread t of line q reads word q * line + t (+ j, the same for all): the 32 / tpl lines
    // of a warp must not share a bank (32 of 4 bytes).
    for tpl in [1u32, 2, 4, 8, 16, 32, 64] {
        for (r, lanes) in [(1, 1), (15, 3), (16, 3), (100, 4), (500, 3)] {
            let d = dot4_layout(tpl, r, lanes);
            assert_eq!(d.stride, tpl + dot4_words(r) - 1);
            assert!(d.line >= lanes * d.stride && d.line < lanes * d.stride + 32);
            let lines = (32 / tpl).max(1);
            let mut banks: Vec<u32> = (0..lines)
                .flat_map(|q| (0..tpl.min(32)).map(move |t| (q * d.line + t) % 32))
                .collect();
            banks.sort_unstable();
            banks.dedup();
            assert_eq!(banks.len(), 32.min(lines * tpl) as usize, "{d:?} tpl {tpl}");
        }
    }
}
