//! Unit tests of the reference arithmetic and the flag parsing (no GPU).

use super::reference::{distance, threshold_units};
use super::ssim::{reflect, ssim_window};
use super::Rect;

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
fn distance_is_pixelmatchs_within_coefficient_rounding() {
    // Black against white, opaque: pixelmatch gives 0.5053 * 255² (Y only).
    let d = distance([0, 0, 0, 255], [255, 255, 255, 255]) as f64;
    let scaled = d / (65025.0 * (1u64 << 30) as f64);
    let want = 0.5053 * 65025.0;
    assert!((scaled - want).abs() / want < 2e-3, "{scaled}");
    // Transparent pixels are white whatever their colour.
    assert_eq!(distance([0, 0, 0, 0], [255, 255, 255, 255]), 0);
    // Gray has no chroma: only Y contributes.
    let g = distance([10, 10, 10, 255], [20, 20, 20, 255]);
    assert_eq!(g, 517 * (1024 * 10 * 255u64).pow(2));
}

#[test]
fn threshold_units_are_monotone_and_zero_at_zero() {
    assert_eq!(threshold_units(0.0), 0);
    assert!(threshold_units(0.1) < threshold_units(0.2));
    assert!(threshold_units(1.0) as f64 > 2.4e18);
}
