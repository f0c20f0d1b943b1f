//! PNG encoded on the GPU (lavapipe here): the same bytes as the native CPU engine for gray,
//! gray+alpha, RGB and RGBA, 8 and 16 bits, odd sizes, flat, smooth and noisy images (the
//! stored fallback), with and without metadata; each file decoded by zune-png (not the png
//! crate that wrote the CPU's) to the pixels it was made from.

use std::path::Path;

use gpukit::gpu::{Engine, Timings};
use gpukit::io::image::{self, Image, Samples};
use gpukit::io::metadata::{Density, DensityUnit, Metadata};
use gpukit::ops::encode::png::encode_png;

use crate::util::{dump_mismatch, engine, random_image, xorshift};

/// A smooth image with flat stretches and a little noise, of `bits` 8 or 16.
fn smooth(w: u32, h: u32, channels: u8, bits: u32, seed: u32) -> Image {
    let mut next = xorshift(seed);
    let mut v = Vec::new();
    for y in 0..h {
        for x in 0..w {
            for c in 0..u32::from(channels) {
                let flat = (x / 11 + y / 5) % 3 == 0;
                let base = if flat {
                    3000
                } else {
                    x * 700 + y * 300 + c * 9000
                };
                v.push(base + if flat { 0 } else { next() % 600 });
            }
        }
    }
    if bits == 8 {
        Image::new_u8(w, h, channels, v.iter().map(|&s| (s >> 6) as u8).collect())
    } else {
        Image::new_u16(w, h, channels, v.iter().map(|&s| s as u16).collect())
    }
}

fn flat(w: u32, h: u32, channels: u8) -> Image {
    Image::new_u8(
        w,
        h,
        channels,
        vec![200; (w * h * u32::from(channels)) as usize],
    )
}

fn metadata() -> Metadata {
    Metadata {
        icc_profile: Some(b"not really a profile, but bytes to carry".to_vec()),
        exif: Some(b"II*\0\x08\0\0\0\0\0".to_vec()),
        xmp: Some(b"<x:xmpmeta xmlns:x='adobe:ns:meta/'/>".to_vec()),
        density: Some(Density {
            x: 300,
            y: 300,
            unit: DensityUnit::Inch,
        }),
        ..Metadata::default()
    }
}

/// The pixels zune-png decodes from `png`, 16-bit ones as native u16.
fn zune_decode(png: &[u8]) -> Samples {
    use zune_core::result::DecodingResult;
    let mut d = zune_png::PngDecoder::new(zune_core::bytestream::ZCursor::new(png));
    match d.decode().expect("zune-png decodes the file") {
        DecodingResult::U8(v) => Samples::U8(v),
        DecodingResult::U16(v) => Samples::U16(v),
        _ => panic!("an unexpected sample type"),
    }
}

/// Whether a PNG file's image data is stored (its first deflate block of type 0), as the png
/// crate writes it where coding would make it larger.
fn stored(png: &[u8]) -> bool {
    let idat = png
        .windows(4)
        .position(|w| w == b"IDAT")
        .expect("an IDAT chunk");
    png[idat + 6] & 6 == 0
}

/// The GPU's file against the CPU engine's, both written out on a mismatch, and decoded by
/// zune-png to `img`'s pixels. The GPU must have coded it unless the CPU's is stored (then the
/// CPU writes it after the GPU's passes).
fn check(what: &str, img: &Image, meta: &Metadata) {
    let mut cpu = Vec::new();
    let opts = image::WriteOptions::default();
    image::encode_with(
        img.clone(),
        ::image::ImageFormat::Png,
        meta,
        &opts,
        &mut cpu,
    )
    .unwrap();
    let mut t = Timings::default();
    let gpu = encode_png(engine(), img, meta, opts.compression, &mut t).unwrap();
    let phases: Vec<&str> = t.phases.iter().map(|(p, _)| p.as_str()).collect();
    let want: &[&str] = if stored(&cpu) {
        &["gpu encode", "encode"]
    } else {
        &["gpu encode"]
    };
    assert_eq!(phases, want, "{what}");
    if gpu != cpu {
        let at = gpu.iter().zip(&cpu).position(|(a, b)| a != b);
        let dir = dump_mismatch(what, "png", &gpu[..], &cpu[..], |p: &Path, b: &[u8]| {
            std::fs::write(p, b).unwrap()
        });
        panic!(
            "{what}: GPU {} bytes, CPU {} bytes, first difference at {at:?} ({})",
            gpu.len(),
            cpu.len(),
            dir.display()
        );
    }
    assert!(
        zune_decode(&gpu) == img.samples,
        "{what}: decoded pixels differ"
    );
}

#[test]
fn rgb_8bit_equals_the_cpu_engine() {
    for (w, h) in [(1, 1), (7, 9), (64, 48), (4097, 3)] {
        check(
            &format!("smooth {w}x{h}"),
            &smooth(w, h, 3, 8, w),
            &Metadata::default(),
        );
    }
}

#[test]
fn every_layout_and_depth_equals_the_cpu_engine() {
    for channels in 1..=4u8 {
        for bits in [8, 16] {
            for (w, h) in [(1, 1), (7, 9), (61, 13)] {
                let what = format!("{w}x{h}x{channels} {bits}-bit");
                check(
                    &what,
                    &smooth(w, h, channels, bits, w ^ h),
                    &Metadata::default(),
                );
            }
        }
    }
}

#[test]
fn flat_images_code_long_runs_as_the_cpu_engine() {
    for (w, channels) in [(1, 1), (33, 3), (700, 4), (4097, 1)] {
        check(
            &format!("flat {w}x{channels}"),
            &flat(w, 5, channels),
            &Metadata::default(),
        );
    }
}

#[test]
fn noise_falls_back_to_stored_rows_as_the_cpu_engine() {
    for (channels, bits) in [(3, 8), (4, 16), (1, 8)] {
        let img = random_image(37, 11, channels, bits, 5);
        check(
            &format!("noise {channels} {bits}"),
            &img,
            &Metadata::default(),
        );
    }
}

#[test]
fn metadata_travels_as_the_cpu_engine_writes_it() {
    let meta = metadata();
    check("rgb with metadata", &smooth(45, 20, 3, 8, 1), &meta);
    check("gray16 with metadata", &smooth(9, 7, 1, 16, 2), &meta);
}

#[test]
fn other_levels_and_the_cpu_engine_encode_on_the_cores() {
    // Level 6 is zlib's: the CPU writes it on a GPU engine too, the same bytes.
    let img = smooth(30, 10, 3, 8, 9);
    let meta = Metadata::default();
    for (engine, level) in [(engine(), 6), (&Engine::Cpu, 1)] {
        let mut want = Vec::new();
        let opts = image::WriteOptions {
            compression: level,
            ..image::WriteOptions::default()
        };
        image::encode_with(
            img.clone(),
            ::image::ImageFormat::Png,
            &meta,
            &opts,
            &mut want,
        )
        .unwrap();
        let mut t = Timings::default();
        let got = encode_png(engine, &img, &meta, level, &mut t).unwrap();
        assert!(got == want, "level {level}");
        let phases: Vec<&str> = t.phases.iter().map(|(p, _)| p.as_str()).collect();
        assert_eq!(phases, ["encode"]);
    }
}

#[test]
fn a_gpu_batch_encodes_its_pngs_on_the_device_as_the_cpu_batch_writes_them() {
    let dir = crate::util::tempdir();
    let d = dir.path();
    std::fs::create_dir(d.join("in")).unwrap();
    for (name, channels, bits) in [
        ("g8", 1, 8),
        ("ga16", 2, 16),
        ("rgb8", 3, 8),
        ("rgba16", 4, 16),
    ] {
        let img = smooth(53, 31, channels, bits, 7);
        let mut file = Vec::new();
        image::encode(img, ::image::ImageFormat::Png, &mut file).unwrap();
        std::fs::write(d.join("in").join(format!("{name}.png")), file).unwrap();
    }
    for level in ["1", "6"] {
        let batch = |backend: &str, out: &str| {
            let args = ["--timings", "--backend", backend, "blur", "in", "-r", "2"];
            let r = crate::util::run_in(
                Some(d),
                &[&args[..], &["--out-dir", out, "--compression", level]].concat(),
            );
            r.code(0);
            r.stderr
        };
        let gpu_stderr = batch("vulkan", &format!("gpu{level}"));
        batch("cpu", &format!("cpu{level}"));
        let on_device = gpu_stderr.contains("timing: gpu encode");
        assert_eq!(on_device, level == "1", "level {level}: {gpu_stderr}");
        // Encoded on the device, the blurred pixels never come back: no download phase.
        let downloaded = gpu_stderr.contains("timing: download");
        assert_eq!(downloaded, !on_device, "level {level}: {gpu_stderr}");
        for entry in std::fs::read_dir(d.join(format!("cpu{level}"))).unwrap() {
            let name = entry.unwrap().file_name();
            let cpu = std::fs::read(d.join(format!("cpu{level}")).join(&name)).unwrap();
            let gpu = std::fs::read(d.join(format!("gpu{level}")).join(&name)).unwrap();
            assert!(
                cpu == gpu,
                "level {level} {name:?}: the GPU batch's file differs"
            );
        }
    }
}

// Plans are kept between images of one layout: each image is coded from clean buffers (a
// short stream after a long one, another Adler-32, a stored one between).
#[test]
fn images_of_one_layout_in_a_row_each_equal_the_cpu_engine() {
    let (w, h) = (90, 17);
    let meta = Metadata::default();
    check("busy", &smooth(w, h, 3, 8, 1), &meta);
    check("flat", &flat(w, h, 3), &meta);
    check("noise", &random_image(w, h, 3, 8, 3), &meta);
    check("smooth again", &smooth(w, h, 3, 8, 2), &meta);
    check("busy again", &smooth(w, h, 3, 8, 1), &meta);
}

/// An image made on the device by passes recorded into the encoder's own submission (as the
/// batch's blur is): smooth images code to the CPU engine's bytes; noise comes back as `None`
/// (the png crate stores it) and is written from the read-back as the CPU writes it.
#[test]
fn an_image_recorded_into_the_encoders_submission_codes_as_the_cpu_engine() {
    use gpukit::gpu::{Batch, Usage};
    use gpukit::ops::encode::png::{encode_read_back, encode_recorded, Layout, OnDevice};
    let gpu = crate::util::shared_gpu();
    let meta = metadata();
    for (what, img) in [
        ("smooth rgb", smooth(45, 20, 3, 8, 4)),
        ("smooth rgba16", smooth(23, 9, 4, 16, 6)),
        ("noise rgb", random_image(37, 11, 3, 8, 5)),
    ] {
        let mut cpu = Vec::new();
        image::encode_with(
            img.clone(),
            ::image::ImageFormat::Png,
            &meta,
            &image::WriteOptions::default(),
            &mut cpu,
        )
        .unwrap();
        let bytes = match &img.samples {
            Samples::U8(s) => s.clone(),
            Samples::U16(s) => s.iter().flat_map(|v| v.to_le_bytes()).collect(),
        };
        let src = gpu.buffer("test samples", Usage::Storage, bytes.len() as u64);
        gpu.write_padded(&src, &bytes);
        let made = gpu.buffer("test image", Usage::Storage, src.size());
        let mut record = |b: &mut Batch| {
            b.copy(&src, &made, src.size());
            Ok(made.clone())
        };
        let layout = Layout::of(&img);
        let mut t = Timings::default();
        let coded = encode_recorded(gpu, &layout, &meta, &mut t, &mut record).unwrap();
        assert_eq!(stored(&cpu), what.starts_with("noise"), "{what}");
        assert_eq!(coded.is_none(), stored(&cpu), "{what}");
        let file = match coded {
            Some(file) => file,
            None => {
                let on_device = OnDevice {
                    buffer: &made,
                    layout,
                };
                encode_read_back(gpu, &on_device, &meta, &mut t).unwrap()
            }
        };
        assert!(
            file == cpu,
            "{what}: the file differs from the CPU engine's"
        );
    }
}
