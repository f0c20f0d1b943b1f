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
    // Noise, then the extremes: flat 0, flat 255, columns and rows alternating 0 and 255.
    let mut plane = noise(64 * 8 * 4, 7);
    plane.extend((0..64 * 8).map(|_| 0u8));
    plane.extend((0..64 * 8).map(|_| 255u8));
    plane.extend((0..64 * 8).map(|i| if i % 2 == 0 { 0u8 } else { 255 }));
    plane.extend((0..64 * 8).map(|i| if (i / 64) % 2 == 0 { 255u8 } else { 0 }));
    // Each coefficient at its largest and smallest (the 16-bit lanes' widest values): 255
    // where the DCT basis function (u, v) is positive and 0 where negative, and the reverse,
    // eight blocks to a band of 8 rows.
    let extremes: Vec<[[u8; 8]; 8]> = (0..128)
        .map(|k| {
            let (u, v, flip) = (k / 2 % 8, k / 16, k % 2 == 1);
            std::array::from_fn(|r| {
                std::array::from_fn(|c| {
                    let cos = |f: usize, x: usize| {
                        ((2 * x + 1) as f64 * f as f64 * std::f64::consts::PI / 16.0).cos()
                    };
                    if (cos(v, r) * cos(u, c) > 0.0) != flip {
                        255
                    } else {
                        0
                    }
                })
            })
        })
        .collect();
    for band in extremes.chunks_exact(8) {
        for r in 0..8 {
            for block in band {
                plane.extend_from_slice(&block[r]);
            }
        }
    }
    for q in [1u8, 50, 90, 100] {
        let div = dct::Divisors::new(&quant_table(&STD_LUMA_QT, q));
        for band in plane.chunks_exact(64 * 8) {
            let mut a = vec![[0i16; 64]; 8];
            let mut b = vec![[0i16; 64]; 8];
            dct::block_row_scalar(band, 64, &div, &mut a);
            // SAFETY: AVX2 is present (checked above).
            unsafe { dct::block_row_avx2(band, 64, &div, &mut b) };
            assert_eq!(a, b, "quality {q}");
        }
    }
}

#[test]
fn the_avx2_strips_equal_their_scalar_twin() {
    if !std::arch::is_x86_feature_detected!("avx2") {
        return;
    }
    // Gray, 4:4:4, 4:2:2, 4:2:0 at odd sizes: the right and bottom edges expanded, row h of
    // an odd-height 4:2:0 repeated, MCU rows past the image.
    for (w, h) in [(37usize, 21usize), (16, 16), (1, 1), (70, 9)] {
        for (channels, lh, lv) in [(1u8, 1usize, 1usize), (3, 1, 1), (3, 2, 1), (3, 2, 2)] {
            let samples = noise(w * h * channels as usize, 13);
            let comps = component_layout(w, h, channels, lh, lv);
            let shapes = comps_shape(&comps);
            let mut a = color::Strips::new(w, h, channels, &shapes, lh, lv);
            let mut b = color::Strips::new(w, h, channels, &shapes, lh, lv);
            for m in 0..h.div_ceil(8 * lv) {
                a.fill_scalar(&samples, m);
                // SAFETY: AVX2 is present (checked above).
                unsafe { b.fill_avx2(&samples, m) };
                for (pa, pb) in a.planes.iter().zip(&b.planes) {
                    assert_eq!(
                        pa.data, pb.data,
                        "{w}x{h}, {channels} channels, {lh}x{lv}, row {m}"
                    );
                }
            }
        }
    }
}

/// Every mix of the extremes and the middle (0, 1, 127, 128, 254, 255) of R, G and B, then
/// noise: 1216 pixels, 38 vector steps and no tail, then the same less 7 pixels (a tail).
#[test]
fn the_avx2_colour_conversion_equals_its_scalar_twin() {
    if !std::arch::is_x86_feature_detected!("avx2") {
        return;
    }
    let levels = [0u8, 1, 127, 128, 254, 255];
    let mut rgb: Vec<u8> = (0..216)
        .flat_map(|i| [levels[i % 6], levels[i / 6 % 6], levels[i / 36]])
        .collect();
    rgb.extend(noise(3 * 1000, 5));
    for n in [1216, 1209] {
        let rgb = &rgb[..3 * n];
        let mut a = vec![vec![0u8; n]; 3];
        let mut b = vec![vec![0u8; n]; 3];
        let [ya, cba, cra] = &mut a[..] else {
            unreachable!()
        };
        color::convert_row(rgb, ya, cba, cra);
        let [yb, cbb, crb] = &mut b[..] else {
            unreachable!()
        };
        // SAFETY: AVX2 is present (checked above).
        unsafe { color::convert_row_avx2(rgb, yb, cbb, crb) };
        assert_eq!(a, b, "{n} pixels");
    }
}

/// Both downsamplings of rows of noise and of the extremes, 16-sample steps and tails.
#[test]
fn the_avx2_downsampling_equals_its_scalar_twin() {
    if !std::arch::is_x86_feature_detected!("avx2") {
        return;
    }
    let mut a = noise(200, 3);
    a.extend([255u8; 40]);
    a.extend([0u8; 40]);
    let mut b = noise(200, 4);
    b.extend([255u8; 40]);
    b.extend([255u8; 40]);
    for n in [140, 133, 16, 5] {
        for below in [None, Some(&b[..])] {
            let (mut x, mut y) = (vec![0u8; n], vec![0u8; n]);
            color::downsample_row(&a, below, &mut x);
            // SAFETY: AVX2 is present (checked above).
            unsafe { color::downsample_row_avx2(&a, below, &mut y) };
            assert_eq!(x, y, "{n} samples, two rows: {}", below.is_some());
        }
    }
}

/// 4:2:0 by hand: a 2x2 RGB image's Y as it is, its Cb and Cr the rounded means (bias 1,
/// then 2), the edges repeated to the whole MCU.
#[test]
fn subsampling_averages_each_2x2_group_with_libjpegs_bias() {
    // Red, then three black pixels. Cr of red is 255, of black 128: (255 + 3 * 128 + 1) >> 2.
    let rgb = [255u8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0];
    let shapes = comps_shape(&component_layout(2, 2, 3, 2, 2));
    assert_eq!(shapes, [(8, 8), (8, 8), (8, 8)]);
    let mut s = color::Strips::new(2, 2, 3, &shapes, 2, 2);
    s.fill_scalar(&rgb, 0);
    let [y, cb, cr] = &s.planes[..] else { panic!() };
    assert_eq!((y.stride, cb.stride, cr.stride), (16, 8, 8));
    assert_eq!(&y.data[..3], &[76, 0, 0]);
    assert_eq!(&y.data[16..19], &[0, 0, 0]);
    // Rows below the image repeat its last row.
    assert!(y.data[16..].chunks(16).all(|row| row == [0; 16]));
    // Cb of red: 85 (below); black 128: (85 + 3 * 128 + 1) >> 2 = 117.
    assert_eq!(cb.data[0], 117);
    assert_eq!(cr.data[0], 160);
    // Right of the image, the edge (black): (4 * 128 + 2) >> 2; rows below repeat row 0.
    assert_eq!(&cr.data[1..8], &[128; 7]);
    assert!(cr.data.chunks(8).all(|row| row == &cr.data[..8]));
}

#[test]
fn the_avx2_nonzero_mask_equals_its_scalar_twin() {
    if !std::arch::is_x86_feature_detected!("avx2") {
        return;
    }
    // Blocks from dense to empty, extreme values included, with a hand-made one.
    let bytes = noise(64 * 200, 5);
    for (i, b) in bytes.chunks_exact(64).enumerate() {
        let keep = i % 9;
        let block: [i16; 64] = std::array::from_fn(|k| match b[k] % 9 {
            x if x < keep as u8 => [i16::MIN, -1, 1, i16::MAX, 7][k % 5],
            _ => 0,
        });
        // SAFETY: AVX2 is present (checked above).
        assert_eq!(
            unsafe { huffman::ac_mask_avx2(&block) },
            huffman::ac_mask(&block)
        );
    }
    let mut block = [0i16; 64];
    block[0] = 5;
    block[1] = -1;
    block[17] = 300;
    block[63] = 2;
    // SAFETY: AVX2 is present (checked above).
    assert_eq!(
        unsafe { huffman::ac_mask_avx2(&block) },
        1 << 1 | 1 << 17 | 1 << 63
    );
}

/// jccolor.c by hand: white, black, pure red.
#[test]
fn colour_conversion_matches_hand_computed_values() {
    let rgb = [255u8, 255, 255, 0, 0, 0, 255, 0, 0];
    let (mut y, mut cb, mut cr) = ([0u8; 3], [0u8; 3], [0u8; 3]);
    color::convert_row(&rgb, &mut y, &mut cb, &mut cr);
    assert_eq!(y, [255, 0, 76]); // 0.299 * 255 = 76.2
    assert_eq!(cb, [128, 128, 85]); // 128 - 0.16874 * 255 = 84.97
    assert_eq!(cr, [128, 128, 255]); // 128 + 0.5 * 255 = 255.5, floor after the -1 bias
}

/// Images for the entropy coders' twin tests: noise (dense blocks, large values), a smooth
/// ramp (long zero runs, EOB runs across blocks) and a flat field (empty blocks).
fn twin_images(w: usize, h: usize, channels: usize) -> Vec<Vec<u8>> {
    let n = w * h * channels;
    let ramp = (0..n)
        .map(|i| {
            let (x, y) = ((i / channels) % w, (i / channels) / w);
            ((x * 3 + y * 2 + (i % channels) * 40) % 256) as u8
        })
        .collect();
    vec![noise(n, 11), ramp, vec![97; n]]
}

#[test]
fn the_vector_entropy_coders_equal_their_scalar_twins() {
    if !super::coder_features() {
        return;
    }
    for (w, h, channels) in [(67usize, 45usize, 3u8), (40, 33, 1), (9, 200, 3)] {
        for (i, samples) in twin_images(w, h, channels.into()).iter().enumerate() {
            for quality in [10u8, 75, 95, 100] {
                for subsampling in [Subsampling::S444, Subsampling::S420] {
                    let opts = EncodeOptions {
                        quality,
                        subsampling,
                        optimize: false,
                        progressive: false,
                    };
                    let frame = transformed(samples, w as u32, h as u32, channels, &opts).unwrap();
                    let what = format!("{w}x{h}x{channels} image {i}, q{quality} {subsampling:?}");
                    for optimize in [false, true] {
                        let (mut a, mut b) = (Vec::new(), Vec::new());
                        baseline_scalar(&frame.comps, optimize, &mut a);
                        // SAFETY: the features are present (checked above).
                        unsafe { baseline_avx2(&frame.comps, optimize, &mut b) };
                        assert!(a == b, "baseline, optimised {optimize}: {what}");
                        if optimize {
                            continue;
                        }
                        // The standard tables coded MCU row by MCU row: the same bytes.
                        let (w, h) = (w as u32, h as u32);
                        let (mut c, mut d) = (Vec::new(), Vec::new());
                        let mut f = Frame::new(samples.len(), w, h, channels, &opts).unwrap();
                        streamed_scalar(&mut f, samples, &mut c);
                        // SAFETY: the features are present (checked above).
                        unsafe { streamed_avx2(&mut f, samples, &mut d) };
                        assert!(a == c, "streamed: {what}");
                        assert!(a == d, "streamed, AVX2: {what}");
                    }
                    let (mut a, mut b) = (Vec::new(), Vec::new());
                    progressive::encode_scalar(&frame.comps, &mut a);
                    // SAFETY: the features are present (checked above).
                    unsafe { progressive::encode_avx2(&frame.comps, &mut b) };
                    assert!(a == b, "progressive: {what}");
                }
            }
        }
    }
}

#[test]
fn the_avx2_band_masks_equal_their_scalar_twin() {
    if !std::arch::is_x86_feature_detected!("avx2") {
        return;
    }
    let bytes = noise(64 * 200, 9);
    for (i, b) in bytes.chunks_exact(64).enumerate() {
        let keep = i % 9;
        let block: [i16; 64] = std::array::from_fn(|k| match b[k] % 9 {
            x if x < keep as u8 => [i16::MIN, -1, 1, i16::MAX, 7, -2, 3, -4][k % 8],
            _ => 0,
        });
        for al in 0..4 {
            // SAFETY: AVX2 is present (checked above).
            assert_eq!(
                unsafe { progressive::band_masks_avx2(&block, al) },
                progressive::band_masks(&block, al)
            );
        }
    }
    // By hand: |x| >> 1 of 0, 1, -2, 3, -4 is 0, 0, 1, 1, 2.
    let mut block = [0i16; 64];
    block[1..5].copy_from_slice(&[1, -2, 3, -4]);
    let want = (0b11100, 0b01100);
    assert_eq!(progressive::band_masks(&block, 1), want);
    // SAFETY: AVX2 is present (checked above).
    assert_eq!(unsafe { progressive::band_masks_avx2(&block, 1) }, want);
}
