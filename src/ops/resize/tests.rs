//! Unit tests (no GPU): the weights, the NEAREST choice, the pass order and the alpha
//! arithmetic against hand-computed cases.

use super::reference::{premultiply, round_clip, unpremultiply};
use super::*;

const ONE: i32 = 1 << PRECISION_BITS;

#[test]
fn box_halving_averages_pairs() {
    let a = axis(4, 2, Filter::Box);
    assert_eq!(a.start, [0, 2]);
    assert_eq!(a.count, [2, 2]);
    assert_eq!(a.taps(0).1, [ONE / 2, ONE / 2]);
    assert_eq!(a.taps(1).1, [ONE / 2, ONE / 2]);
}

#[test]
fn bilinear_doubling_matches_hand_computed_weights() {
    // 2 -> 4: centres 0.25, 0.75, 1.25, 1.75 in input pixels; support 1.
    let a = axis(2, 4, Filter::Bilinear);
    assert_eq!(a.ksize, 3);
    // Position 0 reads pixel 0 alone (weight 0.75, normalised to 1).
    assert_eq!((a.start[0], a.taps(0).1), (0, &[ONE][..]));
    // Position 1: pixels 0 and 1 at 0.75 and 0.25.
    assert_eq!((a.start[1], a.taps(1).1), (0, &[3 * ONE / 4, ONE / 4][..]));
    assert_eq!((a.start[2], a.taps(2).1), (0, &[ONE / 4, 3 * ONE / 4][..]));
    assert_eq!((a.start[3], a.taps(3).1), (1, &[ONE][..]));
}

#[test]
fn lanczos_weights_sum_to_one_and_have_negative_lobes() {
    let a = axis(100, 37, Filter::Lanczos3);
    for i in 0..a.len() {
        let (_, ks) = a.taps(i);
        let sum: i32 = ks.iter().sum();
        // Each weight rounds on its own: within half a unit per tap of 1.0.
        assert!((sum - ONE).abs() <= ks.len() as i32, "{i}: {sum}");
    }
    assert!(a.weights.iter().any(|&k| k < 0));
}

#[test]
fn nearest_picks_pillows_pixels() {
    // 3 -> 2: positions 0.75 and 2.25.
    assert_eq!(nearest_axis(3, 2, 8).start, [0, 2]);
    // 2 -> 5: 0.2, 0.6, 1.0, 1.4, 1.8.
    assert_eq!(nearest_axis(2, 5, 8).start, [0, 0, 1, 1, 1]);
    assert_eq!(nearest_axis(2, 5, 16).start, [0, 0, 1, 1, 1]);
}

#[test]
fn passes_run_horizontal_first_unless_the_height_shrinks_twice_as_much() {
    let dirs = |iw, ih, ow, oh| -> Vec<Dir> {
        passes(iw, ih, ow, oh, Filter::Bilinear, 8)
            .iter()
            .map(|p| p.dir)
            .collect()
    };
    use Dir::{Horizontal as H, Vertical as V};
    assert_eq!(dirs(60, 60, 40, 20), [H, V]);
    assert_eq!(dirs(60, 60, 50, 30), [V, H]);
    assert_eq!(dirs(60, 60, 90, 59), [V, H]);
    assert_eq!(dirs(60, 60, 90, 90), [H, V]);
    assert_eq!(dirs(60, 60, 60, 30), [V]);
    assert_eq!(dirs(60, 60, 30, 60), [H]);
    assert!(dirs(60, 60, 60, 60).is_empty());
}

#[test]
fn alpha_arithmetic_matches_pillows_integer_conversions() {
    // MULDIV255: round(c * a / 255).
    assert_eq!(premultiply(200, 100, 8), 78);
    assert_eq!(premultiply(255, 128, 8), 128);
    assert_eq!(premultiply(255, 255, 8), 255);
    assert_eq!(premultiply(65535, 32768, 16), 32768);
    // rgba2rgbA: 255 * c / a, truncated and clipped; alpha 0 and full keep the colour.
    assert_eq!(unpremultiply(78, 100, 255), 198);
    assert_eq!(unpremultiply(200, 100, 255), 255);
    assert_eq!(unpremultiply(7, 0, 255), 7);
    assert_eq!(unpremultiply(7, 255, 255), 7);
    // Rounding half up, clipping both ways.
    assert_eq!(round_clip(i64::from(ONE) * 3 / 2, 255), 2);
    assert_eq!(round_clip(-5 * i64::from(ONE), 255), 0);
    assert_eq!(round_clip(300 * i64::from(ONE), 255), 255);
}
