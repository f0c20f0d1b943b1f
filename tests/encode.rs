//! JPEG encoded on the GPU (lavapipe here): the same bytes as the CPU encoder for gray and
//! RGB, every subsampling, odd sizes, flat and noisy images, Annex K and optimised tables,
//! with and without metadata; libjpeg-turbo's own files (fixtures/jpeg) from the GPU; and the
//! GPU's files decoded by zune-jpeg to what the CPU's decode to.

use std::path::Path;

use gpukit::gpu::Timings;
use gpukit::io::image::Image;
use gpukit::io::jpeg::{self, EncodeOptions, Markers, Subsampling};
use gpukit::ops::encode::encode_jpeg;

use crate::util::{dump_mismatch, engine};

const NO_MARKERS: Markers = Markers {
    density: (0, 1, 1),
    app: &[],
};

/// Deterministic noise (xorshift32), `n` bytes.
fn noise(n: usize, seed: u32) -> Vec<u8> {
    gpukit::bench::noise_bytes(n, seed)
}

/// A photo-like image: gradients, a few edges, and noise of `amp` levels.
fn photo(w: u32, h: u32, channels: u8, amp: u8) -> Vec<u8> {
    let n = noise((w * h * u32::from(channels)) as usize, w ^ h << 8);
    let mut out = Vec::with_capacity(n.len());
    for y in 0..h {
        for x in 0..w {
            for c in 0..u32::from(channels) {
                let edge = if (x / 5 + y / 3) % 4 == 0 { 90 } else { 0 };
                let base = (x * 7 + y * 3 + c * 50 + edge) % 256;
                let i = out.len();
                out.push((base as u8).wrapping_add(n[i] % amp.max(1)));
            }
        }
    }
    out
}

fn cpu_file(samples: &[u8], w: u32, h: u32, ch: u8, o: &EncodeOptions, m: &Markers) -> Vec<u8> {
    let mut out = Vec::new();
    jpeg::encode(samples, w, h, ch, o, m, &mut out).unwrap();
    out
}

/// The file from the GPU passes (never the CPU fallback, which times "encode", not "gpu
/// encode").
fn gpu_file(samples: &[u8], w: u32, h: u32, ch: u8, o: &EncodeOptions, m: &Markers) -> Vec<u8> {
    let mut t = Timings::default();
    let img = Image::new_u8(w, h, ch, samples.to_vec());
    let out = encode_jpeg(engine(), &img, o, m, &mut t).unwrap();
    let phases: Vec<&str> = t.phases.iter().map(|(p, _)| p.as_str()).collect();
    assert_eq!(phases, ["gpu encode"]);
    out
}

/// The GPU's file against the CPU's, both written out on a mismatch.
fn check(what: &str, samples: &[u8], w: u32, h: u32, ch: u8, o: &EncodeOptions, m: &Markers) {
    let cpu = cpu_file(samples, w, h, ch, o, m);
    let gpu = gpu_file(samples, w, h, ch, o, m);
    if gpu != cpu {
        let at = gpu.iter().zip(&cpu).position(|(a, b)| a != b);
        let dir = dump_mismatch(what, "jpg", &gpu[..], &cpu[..], |p: &Path, b: &[u8]| {
            std::fs::write(p, b).unwrap()
        });
        panic!(
            "{what}: GPU {} bytes, CPU {} bytes, first difference at {at:?} ({})",
            gpu.len(),
            cpu.len(),
            dir.display()
        );
    }
}

fn opts(quality: u8, subsampling: Subsampling, optimize: bool) -> EncodeOptions {
    EncodeOptions {
        quality,
        subsampling,
        progressive: false,
        optimize,
    }
}

#[test]
fn rgb_420_standard_tables_equal_the_cpu_bytes() {
    let (w, h) = (67, 45);
    let img = photo(w, h, 3, 40);
    check(
        "rgb 420 std",
        &img,
        w,
        h,
        3,
        &opts(90, Subsampling::S420, false),
        &NO_MARKERS,
    );
}

#[test]
fn every_subsampling_size_and_table_mode_equals_the_cpu_bytes() {
    let subs = [Subsampling::S444, Subsampling::S422, Subsampling::S420];
    // Odd sizes: one pixel, less than a block, an odd number of MCUs each way (dummy blocks
    // at the right and bottom), past a 64-invocation workgroup of blocks.
    for (w, h) in [(1, 1), (7, 9), (17, 33), (33, 17), (129, 70)] {
        for (amp, q) in [(1, 75), (255, 90), (30, 20)] {
            for optimize in [false, true] {
                let gray = photo(w, h, 1, amp);
                let o = opts(q, Subsampling::S420, optimize);
                check(
                    &format!("gray {w}x{h} amp{amp} q{q} opt{optimize}"),
                    &gray,
                    w,
                    h,
                    1,
                    &o,
                    &NO_MARKERS,
                );
                let rgb = photo(w, h, 3, amp);
                for s in subs {
                    let o = opts(q, s, optimize);
                    let what = format!("rgb {w}x{h} {} amp{amp} q{q} opt{optimize}", s.name());
                    check(&what, &rgb, w, h, 3, &o, &NO_MARKERS);
                }
            }
        }
    }
}

// 4097 wide: past 4096 (a common tile and texture size) and an odd number of 16-wide MCUs.
#[test]
fn a_4097_wide_image_equals_the_cpu_bytes() {
    let (w, h) = (4097, 10);
    let rgb = photo(w, h, 3, 60);
    for optimize in [false, true] {
        let o = opts(85, Subsampling::S420, optimize);
        check(
            &format!("rgb 4097 opt{optimize}"),
            &rgb,
            w,
            h,
            3,
            &o,
            &NO_MARKERS,
        );
    }
}

// Pure noise at quality 100: long codes, many 0xFF bytes to stuff, and every bit offset
// crossing word boundaries.
#[test]
fn noise_at_quality_100_equals_the_cpu_bytes() {
    let (w, h) = (40, 24);
    let rgb = noise((w * h * 3) as usize, 7);
    for s in [Subsampling::S444, Subsampling::S420] {
        for optimize in [false, true] {
            let o = opts(100, s, optimize);
            check(
                &format!("noise {} opt{optimize}", s.name()),
                &rgb,
                w,
                h,
                3,
                &o,
                &NO_MARKERS,
            );
        }
    }
}

#[test]
fn metadata_segments_and_density_are_written_as_the_cpu_writes_them() {
    let (w, h) = (19, 11);
    let rgb = photo(w, h, 3, 50);
    let exif = [&b"Exif\0\0"[..], &[0x4D, 0x4D, 0, 42, 0, 0, 0, 8, 0, 0]].concat();
    let icc = [&b"ICC_PROFILE\0"[..], &[1, 1], &[7u8; 300][..]].concat();
    let app = [(0xE1, &exif[..]), (0xE2, &icc[..])];
    let m = Markers {
        density: (1, 300, 72),
        app: &app,
    };
    check(
        "metadata",
        &rgb,
        w,
        h,
        3,
        &opts(90, Subsampling::S420, true),
        &m,
    );
}

/// libjpeg-turbo's own baseline files (fixtures/jpeg, made by Pillow), byte for byte from the
/// GPU: an expectation independent of gpukit's CPU encoder.
#[test]
fn gpu_files_equal_libjpeg_turbos_baseline_files() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/jpeg");
    let mut checked = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let name = entry.unwrap().file_name().into_string().unwrap();
        let Some(stem) = name.strip_suffix(".jpg") else {
            continue;
        };
        let mut parts = stem.split('-');
        let input = parts.next().unwrap();
        let quality: u8 = parts.next().unwrap()[1..].parse().unwrap();
        let subsampling: Subsampling = parts.next().unwrap().parse().unwrap();
        let rest: Vec<&str> = parts.collect();
        if rest.contains(&"prog") {
            continue;
        }
        let o = opts(quality, subsampling, rest.contains(&"opt"));
        let img = gpukit::io::image::load(&dir.join(format!("{input}.png"))).unwrap();
        let gpukit::io::image::Samples::U8(samples) = &img.samples else {
            panic!("{input}: 8-bit expected")
        };
        let got = gpu_file(
            samples,
            img.width,
            img.height,
            img.channels,
            &o,
            &NO_MARKERS,
        );
        let want = std::fs::read(dir.join(&name)).unwrap();
        assert!(
            got == want,
            "{name}: the GPU's file differs from libjpeg-turbo's"
        );
        checked += 1;
    }
    assert!(checked >= 10, "{checked} files");
}

/// The GPU's file through an independent decoder (zune-jpeg) gives the pixels the CPU's file
/// gives.
#[test]
fn gpu_files_decode_to_what_the_cpu_files_decode_to() {
    let (w, h) = (45, 31);
    let rgb = photo(w, h, 3, 80);
    let decode = |b: &[u8]| {
        zune_jpeg::JpegDecoder::new(zune_core::bytestream::ZCursor::new(b))
            .decode()
            .unwrap()
    };
    for s in [Subsampling::S444, Subsampling::S422, Subsampling::S420] {
        let o = opts(80, s, true);
        let gpu = decode(&gpu_file(&rgb, w, h, 3, &o, &NO_MARKERS));
        let cpu = decode(&cpu_file(&rgb, w, h, 3, &o, &NO_MARKERS));
        assert_eq!(gpu.len(), (w * h * 3) as usize);
        assert!(gpu == cpu, "{}: decoded pixels differ", s.name());
    }
}

/// A batch blurred on the GPU (lavapipe) with JPEG out: each file encoded on the device where
/// the blur left it (a "gpu encode" phase in --timings, no download), byte for byte the file
/// the native CPU engine's batch writes, in both table modes; progressive output goes to the
/// encoders on the cores, equal too.
#[test]
fn a_gpu_batch_encodes_its_jpegs_on_the_device_as_the_cpu_batch_writes_them() {
    let dir = crate::util::tempdir();
    let d = dir.path();
    std::fs::create_dir(d.join("in")).unwrap();
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures");
    for name in [
        "rgb17x33.png",
        "gray17x33.png",
        "rgb64x48.png",
        "rgb1x1.png",
    ] {
        std::fs::copy(fixtures.join("jpeg").join(name), d.join("in").join(name)).unwrap();
    }
    std::fs::copy(fixtures.join("hopper.png"), d.join("in/hopper.png")).unwrap();
    for flags in [&[][..], &["--jpeg-tables", "standard"], &["--progressive"]] {
        let batch = |backend: &str, out: &str| {
            let args = [
                &["--timings", "--backend", backend, "blur", "in", "-r", "3"][..],
                &["--out-dir", out, "--out-format", "jpg"],
                flags,
            ]
            .concat();
            let r = crate::util::run_in(Some(d), &args);
            r.code(0);
            r.stderr
        };
        let gpu_stderr = batch("vulkan", "gpu");
        batch("cpu", "cpu");
        let on_device = gpu_stderr.contains("timing: gpu encode");
        assert_eq!(
            on_device,
            flags != ["--progressive"],
            "{flags:?}: {gpu_stderr}"
        );
        // Encoded on the device, the blurred pixels never come back: no download phase.
        let downloaded = gpu_stderr.contains("timing: download");
        assert_eq!(downloaded, !on_device, "{flags:?}: {gpu_stderr}");
        for entry in std::fs::read_dir(d.join("cpu")).unwrap() {
            let name = entry.unwrap().file_name();
            let cpu = std::fs::read(d.join("cpu").join(&name)).unwrap();
            let gpu = std::fs::read(d.join("gpu").join(&name)).unwrap();
            assert!(
                cpu == gpu,
                "{flags:?} {name:?}: the GPU batch's file differs"
            );
        }
        assert_eq!(std::fs::read_dir(d.join("gpu")).unwrap().count(), 5);
    }
}

// What the GPU does not code goes to the CPU encoder (progressive) or fails with the CPU's
// message (16-bit, alpha), never a half-made file.
#[test]
fn progressive_goes_to_the_cpu_and_16_bit_or_alpha_fail_as_the_cpu_fails() {
    let (w, h) = (21, 13);
    let rgb = photo(w, h, 3, 40);
    let o = EncodeOptions {
        progressive: true,
        ..opts(90, Subsampling::S420, true)
    };
    let mut t = Timings::default();
    let img = Image::new_u8(w, h, 3, rgb.clone());
    let got = encode_jpeg(engine(), &img, &o, &NO_MARKERS, &mut t).unwrap();
    assert_eq!(got, cpu_file(&rgb, w, h, 3, &o, &NO_MARKERS));
    let phases: Vec<&str> = t.phases.iter().map(|(p, _)| p.as_str()).collect();
    assert_eq!(phases, ["encode"]);
    let o = opts(90, Subsampling::S420, false);
    let deep = Image::new_u16(w, h, 3, vec![7; (w * h * 3) as usize]);
    let rgba = Image::new_u8(w, h, 4, vec![7; (w * h * 4) as usize]);
    for img in [deep, rgba] {
        let e = encode_jpeg(engine(), &img, &o, &NO_MARKERS, &mut t).unwrap_err();
        assert_eq!(
            e.to_string(),
            "JPEG stores neither alpha nor 16-bit samples"
        );
    }
}

/// The batch's staged uploads (src/batch/staging.rs): a blur recorded from an upload a
/// decoding thread wrote blurs that upload's samples, not the image's (nothing is written on
/// the engine's side: no "upload" phase), and the file is the CPU's blur encoded by the CPU;
/// the pool reuses its buffers within its budget and refuses past it.
#[test]
fn a_blur_recorded_from_a_staged_upload_encodes_the_staged_samples_as_the_cpu() {
    use gpukit::batch::staging::Staging;
    use gpukit::ops::blur::{run as blur_run, Blurrer, Kind, Options};
    use gpukit::ops::encode::Encoder;
    let gpu = crate::util::shared_gpu();
    let (w, h) = (37, 29);
    let len = (w * h * 3) as usize;
    let blur = Options::new(Kind::Box, 3, 1);
    let o = opts(90, Subsampling::S420, true);
    let staging = Staging::new(2 * len);
    let mut blurrer = Blurrer::new(engine(), blur);
    let mut encoder = Encoder::default();
    for seed in 0..4u32 {
        let other = Image::new_u8(w, h, 3, photo(w + seed, h, 3, 40)[..len].to_vec());
        let staged_img = Image::new_u8(w, h, 3, noise(len, seed + 1));
        let gpukit::io::image::Samples::U8(bytes) = &staged_img.samples else {
            unreachable!("8-bit")
        };
        let staged = staging
            .stage(gpu, bytes, false)
            .unwrap()
            .expect("room in the pool");
        let mut t = Timings::default();
        let mut inner = Timings::default();
        let file = encoder
            .encode_recorded(gpu, w, h, 3, &o, &NO_MARKERS, &mut t, &mut |b| {
                blurrer.record_on_device(&other, Some(&staged), b, &mut inner)
            })
            .unwrap();
        blurrer.submitted();
        staging.give_back(staged);
        assert!(
            inner.phases.iter().all(|(p, _)| p != "upload"),
            "{:?}",
            inner.phases
        );
        let cpu_blur = blur_run(&gpukit::gpu::Engine::Cpu, &staged_img, &blur, &mut t).unwrap();
        let gpukit::io::image::Samples::U8(blurred) = &cpu_blur.samples else {
            unreachable!("8-bit")
        };
        let want = cpu_file(blurred, w, h, 3, &o, &NO_MARKERS);
        assert!(
            file == want,
            "image {seed}: the file differs from the CPU's"
        );
    }
    // Every mapping done: the two buffers made are reused, a third is past the budget.
    gpu.wait().unwrap();
    let bytes = noise(len, 9);
    let a = staging.stage(gpu, &bytes, false).unwrap();
    let b = staging.stage(gpu, &bytes, false).unwrap();
    let c = staging.stage(gpu, &bytes, false).unwrap();
    assert!(a.is_some() && b.is_some() && c.is_none());
}
