//! Unit tests of the bins, the layout helpers, the statistics and the CPU reference.

use super::geometry::{copies_and_span, packed_units_per_invocation, unit};
use super::*;

#[test]
fn bins_at_the_extremes() {
    // The largest product, 65535 * 65536, fits a u32.
    assert_eq!(65535u32.checked_mul(65536), Some(u32::MAX - 65535));
    assert_eq!(bin_of(65535, 65536, 65535), 65535);
    assert_eq!(bin_of(65534, 65536, 65535), 65534);
    assert_eq!(bin_of(1, 65536, 65535), 1);
    assert_eq!(bin_of(0, 65536, 65535), 0);
    assert_eq!(bin_of(255, 256, 255), 255);
    assert_eq!(bin_of(254, 256, 255), 254);
    assert_eq!(bin_of(255, 1, 255), 0);
    assert_eq!(bin_of(127, 2, 255), 0);
    assert_eq!(bin_of(128, 2, 255), 1);
    assert_eq!(bin_of(36, 7, 255), 0);
    assert_eq!(bin_of(37, 7, 255), 1);
}

#[test]
fn luminance_keeps_gray_and_the_top_value() {
    assert_eq!(LUMA_WEIGHTS.iter().sum::<u32>(), 1 << LUMA_SHIFT);
    for v in [0, 1, 127, 255, 256, 65534, 65535] {
        assert_eq!(luminance(v, v, v), v);
    }
    // 0.2126 * 255 = 54.2, 0.7152 * 255 = 182.4, 0.0722 * 255 = 18.4.
    assert_eq!(luminance(255, 0, 0), 54);
    assert_eq!(luminance(0, 255, 0), 182);
    assert_eq!(luminance(0, 0, 255), 18);
}

#[test]
fn units_hold_whole_pixels_in_whole_vec4s() {
    for (ic, bits, want) in [
        (1, 8, (16, 1)),
        (2, 8, (8, 1)),
        (3, 8, (16, 3)),
        (4, 8, (4, 1)),
        (1, 16, (8, 1)),
        (2, 16, (4, 1)),
        (3, 16, (8, 3)),
        (4, 16, (2, 1)),
    ] {
        assert_eq!(unit(ic, bits), want, "{ic} x {bits}");
    }
}

#[test]
fn bins_split_into_ranges_that_fit() {
    // lavapipe's 32 KiB: 4 x 256 32-bit counters (4 KiB) fit 8 times, 16-bit ones 16 times;
    // the H100's 48 KiB 12 and 24 times, capped at 16 here.
    assert_eq!(copies_and_span(4, 256, 1, 32768, 16), (8, 256, 1));
    assert_eq!(copies_and_span(4, 256, 2, 32768, 16), (16, 256, 1));
    assert_eq!(copies_and_span(4, 256, 1, 49152, 16), (12, 256, 1));
    assert_eq!(copies_and_span(4, 256, 2, 49152, 16), (16, 256, 1));
    // 65536 bins need ranges.
    for (hc, bins, pack, bytes) in [
        (4, 65536, 1, 32768),
        (5, 65536, 2, 49152),
        (1, 1000, 1, 2048),
        (5, 1001, 2, 2048),
    ] {
        let (copies, span, ranges) = copies_and_span(hc, bins, pack, bytes, 16);
        assert_eq!(copies, 1);
        assert!(copies * (hc * span).div_ceil(pack) * 4 <= bytes);
        assert!(span * ranges >= bins && span * (ranges - 1) < bins);
    }
}

#[test]
fn packed_counters_cannot_overflow() {
    // 1024 invocations in 16 copies: 64 invocations a copy, 4 pixels a unit: 255 units each
    // (65280 pixels a counter at most; 256 units would reach 65536).
    assert_eq!(packed_units_per_invocation(1024, 16, 4), 255);
    assert_eq!(64 * 4 * 255, 65280);
    // One copy of 1024 invocations, 16 gray pixels a unit: 3 units (49152 pixels).
    assert_eq!(packed_units_per_invocation(1024, 1, 16), 3);
    assert_eq!(packed_units_per_invocation(4096, 1, 16), 0);
}

#[test]
fn stats_from_counts() {
    // Values 0, 1, 1, 3 (and nothing else) in 4 bins.
    let s = channel_stats(&[1, 2, 0, 1]);
    assert_eq!((s.min, s.max, s.median), (Some(0), Some(3), Some(1)));
    assert_eq!(s.mean, Some(1.25));
    assert_eq!((s.p1, s.p99), (Some(0), Some(3)));
    let empty = channel_stats(&[0, 0]);
    assert_eq!((empty.min, empty.mean), (None, None));
    // 200 values: the 1st percentile is the 2nd smallest, the 99th the 198th.
    let mut c = vec![0u64; 200];
    c.iter_mut().for_each(|v| *v = 1);
    let s = channel_stats(&c);
    assert_eq!((s.p1, s.median, s.p99), (Some(1), Some(99), Some(197)));
}

#[test]
fn cpu_reference_by_hand() {
    // Two RGB pixels: pure red and white; 2 bins.
    let img = Image::new_u8(2, 1, 3, vec![255, 0, 0, 255, 255, 255]);
    let h = reference(&img, Channels::of(3, false), 2);
    assert_eq!(h.channel(0), [0, 2]); // red
    assert_eq!(h.channel(1), [1, 1]); // green
    assert_eq!(h.channel(2), [1, 1]); // blue
    assert_eq!(h.channel(3), [1, 1]); // luminance 54 and 255
                                      // Gray+alpha counted as colour with alpha: R = G = B, alpha kept.
    let img = Image::new_u16(1, 1, 2, vec![65535, 0]);
    let h = reference(
        &img,
        Channels {
            color: true,
            alpha: true,
        },
        4,
    );
    assert_eq!(
        h.counts,
        [0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 0]
    );
}

// A stream's saving: the cores' 4 ns a pixel over the threads, less 0.33 ns a byte of copies
// on the one thread that feeds the device, per frame.
#[test]
fn a_stream_saves_the_counting_less_the_copies() {
    let pool = |n| {
        rayon::ThreadPoolBuilder::new()
            .num_threads(n)
            .build()
            .unwrap()
    };
    let (pixels, bytes) = (3840 * 2160u64, 3840 * 2160 * 3 / 2u64);
    let per_frame =
        |threads: f64| (pixels as f64 * 4e-9 / threads - bytes as f64 * 0.33e-9).max(0.0);
    // 2 cores: 16.6 ms of counting against 4.1 ms of copies a 4K 4:2:0 frame.
    pool(2).install(|| {
        let s = stream_gpu_saving(pixels, bytes, 300).as_secs_f64();
        assert!((s - 300.0 * per_frame(2.0)).abs() < 1e-6, "{s}");
        assert!(s > crate::gpu::SMALL_JOB.as_secs_f64());
    });
    // 16 cores (the H100 host of call AD): the copies cost more than the counting.
    pool(16).install(|| {
        assert_eq!(per_frame(16.0), 0.0);
        assert_eq!(
            stream_gpu_saving(pixels, bytes, 300),
            std::time::Duration::ZERO
        );
    });
}
