//! Unit tests of the blur's arithmetic, layout helpers and CPU reference.

use super::arith::fraction_bits;
use super::plan::{max_lines, mid_stride};
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
