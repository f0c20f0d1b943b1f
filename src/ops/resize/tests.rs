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

// The engine's estimate at made-up rates, counted by hand: 4x4 to 2x2 with BOX reads 2 taps
// a position. RGB: the horizontal pass 2 taps x 2 columns x 4 rows x 3 samples = 48
// sample-taps, the vertical 2 x 2 rows x 2 columns x 3 = 24. RGBA: 64 + 32, and alpha's
// conversions over the 16 input and 4 output pixels' 4 samples.
#[test]
fn the_engine_estimate_counts_each_pass_s_sample_taps_at_the_given_rates() {
    let rates = CpuRates {
        tap_ns_8bit: 1.0,
        tap_ns_wide: 3.0,
        alpha_ns: 10.0,
    };
    let o = Options::new(
        Size::Exact {
            width: 2,
            height: 2,
        },
        Filter::Box,
    );
    let ns = |d: std::time::Duration| d.as_secs_f64() * 1e9;
    let threads = rayon::current_num_threads() as f64;
    // Within the nanosecond each estimate is rounded to.
    let close = |got: f64, want: f64| assert!((got - want / threads).abs() <= 1.0, "{got} {want}");
    let lanes = super::engine::has_avx2();
    let rgb8 = if lanes { 72.0 } else { 3.0 * 72.0 };
    close(ns(o.cpu_estimate_at(&rates, 4, 4, 3, 8)), rgb8);
    close(ns(o.cpu_estimate_at(&rates, 4, 4, 3, 16)), 3.0 * 72.0);
    let rgba8 = if lanes { 96.0 } else { 3.0 * 96.0 };
    close(
        ns(o.cpu_estimate_at(&rates, 4, 4, 4, 8)),
        rgba8 + (16.0 + 4.0) * 4.0 * 10.0,
    );
    // NEAREST (one tap, no alpha): 2 x 4 x 4 + 2 x 2 x 4 sample-taps.
    let n = Options::new(o.size, Filter::Nearest);
    close(
        ns(n.cpu_estimate_at(&rates, 4, 4, 4, 16)),
        3.0 * (32.0 + 16.0),
    );
    // The saving: the estimate less 0.325 ns a byte of the image and of the result, per
    // file; never negative.
    let one = ns(o.gpu_saving_at(&rates, 4, 4, 3, 16, 1));
    close(one, 3.0 * 72.0 - (16.0 + 4.0) * 3.0 * 2.0 * 0.325);
    close(
        ns(o.gpu_saving_at(&rates, 4, 4, 3, 16, 5)),
        5.0 * one * threads,
    );
    let free = CpuRates {
        tap_ns_8bit: 0.0,
        tap_ns_wide: 0.0,
        alpha_ns: 0.0,
    };
    assert_eq!(
        o.gpu_saving_at(&free, 4, 4, 3, 8, 9),
        std::time::Duration::ZERO
    );
    // A size the image cannot take estimates nothing.
    let huge = Options::new(Size::Scale(1e6), Filter::Box);
    assert_eq!(
        huge.cpu_estimate(4096, 4096, 3, 8),
        std::time::Duration::ZERO
    );
}

// The real rates: one photo is a small job on any machine; issue 23's batch (64 photos of
// 2048x1536 to 512 wide) on 2 threads saves more than opening a GPU costs, so only the
// software-rasteriser rule keeps it on the cores in CI (tests/resize.rs checks the line).
#[test]
fn one_photo_is_a_small_job_and_a_batch_of_64_is_not() {
    let o = Options::new(Size::Width(512), Filter::Lanczos3);
    assert!(o.gpu_saving(2048, 1536, 3, 8, 1) < crate::gpu::SMALL_JOB);
    let threads = rayon::current_num_threads() as f64;
    let batch = o.gpu_saving(2048, 1536, 3, 8, 64).as_secs_f64() * threads / 2.0;
    assert!(batch > crate::gpu::SMALL_JOB.as_secs_f64(), "{batch}");
}
