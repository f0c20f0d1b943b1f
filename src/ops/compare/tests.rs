//! Unit tests of the reference arithmetic and the flag parsing (no GPU).

use super::reference::{distance, threshold_units};
use super::ssim::{reflect, ssim_window};
use super::{Rect, DISTANCE_SCALE};

#[test]
fn rects_parse_with_corners_included() {
    let r: Rect = "1:2-3:4".parse().unwrap();
    assert_eq!(
        r,
        Rect {
            x1: 1,
            y1: 2,
            x2: 3,
            y2: 4
        }
    );
    assert!(r.contains(3, 4) && r.contains(1, 2) && !r.contains(4, 4));
    for bad in ["", "1:2", "1:2-3", "3:3-1:1", "a:b-c:d"] {
        assert!(bad.parse::<Rect>().is_err(), "{bad}");
    }
}

#[test]
fn reflect_matches_scipy_reflect_mode() {
    // scipy 'reflect' on n = 3: ... 2 | 2 1 0 | 0 1 2 | 2 1 0 | 0 ...
    let got: Vec<usize> = (-4..7).map(|i| reflect(i, 3)).collect();
    assert_eq!(got, [2, 2, 1, 0, 0, 1, 2, 2, 1, 0, 0]);
    assert_eq!(reflect(-1, 1), 0);
}

#[test]
fn window_is_scipys_gaussian() {
    let w = ssim_window();
    assert!((w.iter().sum::<f64>() - 1.0).abs() < 1e-15);
    // exp(-0.5 * 25 / 2.25) / sum, with the sum of exp(-x²/4.5) for x in -5..=5.
    let sum: f64 = (-5..=5).map(|x: i32| (-(x * x) as f64 / 4.5).exp()).sum();
    assert!((w[0] - (-25.0f64 / 4.5).exp() / sum).abs() < 1e-17);
}

#[test]
fn distance_is_pixelmatchs_exactly() {
    // Black against white, opaque: pixelmatch's 0.5053 * 255² (Y only, as Y sums to
    // 1.00000001 and I and Q to 0.00000000 and 0.00000000): by hand,
    // Y = 255 * 255 * 100000001, I = 0, Q = 0, D = 5053 Y².
    let y = 255u128 * 255 * 100_000_001;
    assert_eq!(distance([0, 0, 0, 255], [255, 255, 255, 255]), 5053 * y * y);
    // Transparent pixels are white whatever their colour.
    assert_eq!(distance([0, 0, 0, 0], [255, 255, 255, 255]), 0);
    // Red against black, opaque: by hand from the coefficients times 255 * 255.
    let r = 255u128 * 255;
    let want = 5053 * (29_889_531 * r).pow(2)
        + 2990 * (59_597_799 * r).pow(2)
        + 1957 * (21_147_017 * r).pow(2);
    assert_eq!(distance([255, 0, 0, 255], [0, 0, 0, 255]), want);
    // Half-transparent red (alpha 128) over white against white, in 1/255 units:
    // R 255 * 128 + 255 * 127 - 65025 = 0, G and B 0 * 128 + 255 * 127 - 65025 = -255 * 128.
    let d = [0i128, -255 * 128, -255 * 128];
    let dot = |w: [i128; 3]| (w[0] * d[0] + w[1] * d[1] + w[2] * d[2]).unsigned_abs();
    let want = 5053 * dot([29_889_531, 58_662_247, 11_448_223]).pow(2)
        + 2990 * dot([59_597_799, -27_417_610, -32_180_189]).pow(2)
        + 1957 * dot([21_147_017, -52_261_711, 31_114_694]).pow(2);
    assert_eq!(distance([255, 0, 0, 128], [255, 255, 255, 255]), want);
}

#[test]
fn threshold_units_are_pixelmatchs_limit_exactly() {
    assert_eq!(threshold_units(0.0), 0);
    assert!(threshold_units(0.1) < threshold_units(0.2));
    // t = 0.5: 35215 * 0.25 = 8803.75 exactly in f64, so T = 8803.75 * S exactly.
    assert_eq!(threshold_units(0.5), 880_375 * DISTANCE_SCALE / 100);
    // t = 1: 35215 * S.
    assert_eq!(threshold_units(1.0), 35215 * DISTANCE_SCALE);
    // t = 0.1: 35215 * 0.1 * 0.1 is 352.15000000000003 in f64 (above 352.15), so T is
    // above 352.15 * S and below 352.1500001 * S.
    let m = 35215.0 * 0.1 * 0.1;
    assert!(m > 352.15);
    let t = threshold_units(0.1);
    assert!(t > 35_215 * DISTANCE_SCALE / 100 && t < 3_521_500_001 * DISTANCE_SCALE / 10_000_000);
}
