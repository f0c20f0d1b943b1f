//! The encoder against libjpeg-turbo's own files (fixtures/jpeg, made by Pillow) and its
//! vector builds against their scalar twins.

use super::*;
use std::path::Path;

fn fixture(name: &str) -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures/jpeg")
        .join(name)
}

const NO_MARKERS: Markers = Markers {
    density: (0, 1, 1),
    app: &[],
};

/// Every golden of scripts/make_jpeg_goldens.py, re-encoded from its PNG input.
#[test]
fn files_equal_libjpeg_turbos_byte_for_byte() {
    let mut checked = 0;
    let mut failed = Vec::new();
    let mut names: Vec<String> = std::fs::read_dir(fixture(""))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.ends_with(".jpg"))
        .collect();
    names.sort();
    for name in names {
        let stem = name.trim_end_matches(".jpg");
        let mut parts = stem.split('-');
        let input = parts.next().unwrap();
        let quality: u8 = parts.next().unwrap()[1..].parse().unwrap();
        let subsampling: Subsampling = parts.next().unwrap().parse().unwrap();
        let rest: Vec<&str> = parts.collect();
        let opts = EncodeOptions {
            quality,
            subsampling,
            optimize: rest.contains(&"opt"),
            progressive: rest.contains(&"prog"),
        };
        let img = crate::io::image::load(&fixture(&format!("{input}.png"))).unwrap();
        let crate::io::image::Samples::U8(samples) = &img.samples else {
            panic!("{input}: 8-bit expected")
        };
        let mut got = Vec::new();
        encode(
            samples,
            img.width,
            img.height,
            img.channels,
            &opts,
            &NO_MARKERS,
            &mut got,
        )
        .unwrap();
        let want = std::fs::read(fixture(&name)).unwrap();
        if got != want {
            let at = got
                .iter()
                .zip(&want)
                .position(|(a, b)| a != b)
                .unwrap_or(got.len().min(want.len()));
            let dump = std::env::temp_dir().join(format!("gpukit-{name}"));
            std::fs::write(&dump, &got).unwrap();
            failed.push(format!(
                "{name}: {} bytes, libjpeg-turbo's {}; first difference at byte {at} (ours in {})",
                got.len(),
                want.len(),
                dump.display()
            ));
        }
        checked += 1;
    }
    assert!(failed.is_empty(), "{}", failed.join("\n"));
    assert_eq!(checked, 15, "goldens checked");
}

#[test]
fn quality_scales_the_standard_tables_as_libjpeg_does() {
    assert_eq!(quant_table(&STD_LUMA_QT, 50), STD_LUMA_QT);
    assert_eq!(quant_table(&STD_LUMA_QT, 100), [1; 64]);
    // q = 90: scale 20%, 16 * 20 / 100 = 3.2 -> 3; 11 -> 2.2 -> 2; 10 -> 2.
    assert_eq!(quant_table(&STD_LUMA_QT, 90)[..3], [3, 2, 2]);
    // q = 1: scale 5000%, clamped to 255 (baseline).
    assert_eq!(quant_table(&STD_CHROMA_QT, 1), [255; 64]);
}

/// A reproducible stream of bytes (xorshift), for the twin tests.
fn noise(n: usize, mut s: u64) -> Vec<u8> {
    (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            (s >> 24) as u8
        })
        .collect()
}

#[test]
fn the_avx2_dct_equals_its_scalar_twin() {
    if !std::arch::is_x86_feature_detected!("avx2") {
        return;
    }
    let plane = noise(64 * 8 * 4, 7);
    for q in [1u8, 50, 90, 100] {
        let div = dct::Divisors::new(&quant_table(&STD_LUMA_QT, q));
        let mut a = vec![[0i16; 64]; 8];
        let mut b = vec![[0i16; 64]; 8];
        dct::block_row_scalar(&plane, 64, &div, &mut a);
        // SAFETY: AVX2 is present (checked above).
        unsafe { dct::block_row_avx2(&plane, 64, &div, &mut b) };
        assert_eq!(a, b, "quality {q}");
    }
}

#[test]
fn the_avx2_colour_conversion_equals_its_scalar_twin() {
    if !std::arch::is_x86_feature_detected!("avx2") {
        return;
    }
    let (w, h) = (37, 5);
    let rgb = noise(w * h * 3, 11);
    let mut a = vec![vec![0u8; 40 * h]; 3];
    let mut b = a.clone();
    let [a0, a1, a2] = &mut a[..] else { panic!() };
    color::convert_rows_scalar(&rgb, w, [a0, a1, a2], 40);
    let [b0, b1, b2] = &mut b[..] else { panic!() };
    // SAFETY: AVX2 is present (checked above).
    unsafe { color::convert_rows_avx2(&rgb, w, [b0, b1, b2], 40) };
    assert_eq!(a, b);
}

#[test]
fn the_avx2_subsampled_planes_equal_their_scalar_twin() {
    if !std::arch::is_x86_feature_detected!("avx2") {
        return;
    }
    // Odd sizes: the right and bottom edges expanded, row h of an odd-height 4:2:0 repeated.
    for (w, h, lv) in [
        (37usize, 5usize, 2usize),
        (37, 5, 1),
        (16, 16, 2),
        (1, 1, 2),
    ] {
        let rgb = noise(w * h * 3, 13);
        let (cw, ch) = (w.div_ceil(16) * 8, h.div_ceil(8 * lv) * 8);
        let (stride, rows) = (2 * cw, h.div_ceil(8) * 8);
        let planes = || {
            [(stride, rows), (cw, ch), (cw, ch)].map(|(s, r)| color::Plane {
                data: vec![0u8; s * r],
                stride: s,
            })
        };
        let [mut a0, mut a1, mut a2] = planes();
        color::subsampled_scalar(&rgb, w, h, lv, [&mut a0, &mut a1, &mut a2]);
        let [mut b0, mut b1, mut b2] = planes();
        // SAFETY: AVX2 is present (checked above).
        unsafe { color::subsampled_avx2(&rgb, w, h, lv, [&mut b0, &mut b1, &mut b2]) };
        for (a, b) in [(a0, b0), (a1, b1), (a2, b2)] {
            assert_eq!(a.data, b.data, "{w}x{h}, lv {lv}");
        }
    }
}

/// 4:2:0 by hand: a 2x2 RGB block's Y as it is, its Cb and Cr the rounded means (bias 1).
#[test]
fn subsampling_averages_each_2x2_group_with_libjpegs_bias() {
    // Red, then three black pixels. Cr of red is 255, of black 128: (255 + 3 * 128 + 1) >> 2.
    let rgb = [255u8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0];
    let mut p = [(16usize, 8usize), (8, 8), (8, 8)].map(|(s, r)| color::Plane {
        data: vec![0u8; s * r],
        stride: s,
    });
    let [y, cb, cr] = &mut p;
    color::subsampled_scalar(&rgb, 2, 2, 2, [y, cb, cr]);
    assert_eq!(&p[0].data[..3], &[76, 0, 0]);
    assert_eq!(&p[0].data[16..19], &[0, 0, 0]);
    // Cb of red: 85 (above); black 128: (85 + 3 * 128 + 1) >> 2 = 117.
    assert_eq!(p[1].data[0], 117);
    assert_eq!(p[2].data[0], 160);
    // Right of the image, the edge (black): (4 * 128 + 2) >> 2; rows below repeat row 0.
    assert_eq!(&p[2].data[1..8], &[128; 7]);
    assert!(p[2].data.chunks(8).all(|row| row == &p[2].data[..8]));
}

/// jccolor.c by hand: white, black, pure red.
#[test]
fn colour_conversion_matches_hand_computed_values() {
    let rgb = [255u8, 255, 255, 0, 0, 0, 255, 0, 0];
    let (mut y, mut cb, mut cr) = ([0u8; 3], [0u8; 3], [0u8; 3]);
    color::convert_rows_scalar(&rgb, 3, [&mut y, &mut cb, &mut cr], 3);
    assert_eq!(y, [255, 0, 76]); // 0.299 * 255 = 76.2
    assert_eq!(cb, [128, 128, 85]); // 128 - 0.16874 * 255 = 84.97
    assert_eq!(cr, [128, 128, 255]); // 128 + 0.5 * 255 = 255.5, floor after the -1 bias
}
