//! The PNG kernels' CPU twin against the CPU engine's files (no GPU): the pieces, coded one by
//! one, make the png crate's zlib stream.

use super::deflate::stored_size;
use super::deflate::twin::{filter_rows, zlib_stream};
use ::image::ImageFormat;

use crate::io::image::{self, Image, Samples};

/// The image data of a PNG file: its IDAT chunks joined.
pub(super) fn idat(png: &[u8]) -> Vec<u8> {
    let mut at = 8;
    let mut data = Vec::new();
    while at + 8 <= png.len() {
        let len = u32::from_be_bytes(png[at..at + 4].try_into().unwrap()) as usize;
        if &png[at + 4..at + 8] == b"IDAT" {
            data.extend_from_slice(&png[at + 8..at + 8 + len]);
        }
        at += 12 + len;
    }
    data
}

/// The twin's stream for `img`, as the GPU would make it.
fn twin(img: &Image) -> Vec<u8> {
    let bytes: Vec<u8> = match &img.samples {
        Samples::U8(d) => d.clone(),
        Samples::U16(d) => d.iter().flat_map(|v| v.to_be_bytes()).collect(),
    };
    let sample = if matches!(img.samples, Samples::U16(_)) {
        2
    } else {
        1
    };
    let bpp = usize::from(img.channels) * sample;
    let row_len = img.width as usize * bpp;
    zlib_stream(&filter_rows(&bytes, row_len, bpp), row_len + 1)
}

/// A smooth image with flat stretches (long zero runs), edges and a little noise.
fn smooth(w: u32, h: u32, channels: u8, amp: u32, seed: u32) -> Vec<u8> {
    let noise = crate::bench::noise_bytes((w * h * u32::from(channels)) as usize, seed);
    let mut out = Vec::with_capacity(noise.len());
    for y in 0..h {
        for x in 0..w {
            for c in 0..u32::from(channels) {
                let flat = (x / 13 + y / 7) % 3 == 0;
                let base = if flat {
                    77
                } else {
                    (x * 3 + y * 2 + c * 40) % 256
                };
                let n = if flat || amp == 0 {
                    0
                } else {
                    u32::from(noise[out.len()]) % amp
                };
                out.push((base + n) as u8);
            }
        }
    }
    out
}

#[test]
fn the_twin_writes_the_cpu_engines_stream() {
    for (w, h) in [(1, 1), (7, 9), (8, 3), (33, 17), (300, 5), (1021, 3)] {
        for channels in 1..=4u8 {
            for amp in [0, 3, 200] {
                let samples = smooth(w, h, channels, amp, w ^ h);
                let eight = Image::new_u8(w, h, channels, samples.clone());
                let sixteen = Image::new_u16(
                    w,
                    h,
                    channels,
                    samples
                        .iter()
                        .map(|&v| (u16::from(v) * 257) ^ u16::from(v & 3))
                        .collect(),
                );
                for img in [eight, sixteen] {
                    let mut file = Vec::new();
                    image::encode(img.clone(), ImageFormat::Png, &mut file).unwrap();
                    let want = idat(&file);
                    let got = twin(&img);
                    // Where the coded stream is larger the png crate stores the rows instead.
                    let raw = (img.width as usize
                        * usize::from(channels)
                        * (img.bit_depth() as usize / 8)
                        + 1)
                        * h as usize;
                    if got.len() > stored_size(raw) {
                        assert_eq!(want.len(), stored_size(raw), "{w}x{h}x{channels} amp {amp}");
                    } else {
                        assert!(
                            want == got,
                            "{w}x{h}x{channels} amp {amp}: {} vs {} bytes",
                            got.len(),
                            want.len()
                        );
                    }
                }
            }
        }
    }
}

#[test]
fn the_twin_codes_long_runs_and_flat_rows() {
    // Flat rows: one run of zeros a row, past 258 (the longest match).
    for w in [40, 100, 700, 4097] {
        let img = Image::new_u8(w, 4, 3, vec![9; w as usize * 12]);
        let mut file = Vec::new();
        image::encode(img.clone(), ImageFormat::Png, &mut file).unwrap();
        assert!(idat(&file) == twin(&img), "{w} wide");
    }
}
