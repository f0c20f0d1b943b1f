//! `compare`: the metrics against computations written here in f64 (counts exact, PSNR and
//! SSIM to 1e-6 relative), the perceptual distance against pixelmatch's float formula, the
//! GPU pass against the CPU reference, the diff image against a golden, exit codes, JSON and
//! folder mode.

use std::path::{Path, PathBuf};

use gpukit::gpu::Timings;
use gpukit::io::image::{self, Image, Samples};
use gpukit::ops::compare::{self as op, CompareGpu, Comparison, Options, Rect, Tunables};

use crate::util::{gpu, gpukit, gpukit_as_nobody, random_image, run, tempdir};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Sample i of an image as f64 and as an integer.
fn samples(img: &Image) -> Vec<i64> {
    match &img.samples {
        Samples::U8(s) => s.iter().map(|&v| i64::from(v)).collect(),
        Samples::U16(s) => s.iter().map(|&v| i64::from(v)).collect(),
    }
}

/// `img` with `f(pixel index, channel, value)` applied to every sample.
fn modified(img: &Image, f: impl Fn(usize, usize, i64) -> i64) -> Image {
    let c = img.channels as usize;
    let max = i64::from(img.max_value());
    let v: Vec<i64> = samples(img)
        .iter()
        .enumerate()
        .map(|(i, &s)| f(i / c, i % c, s).clamp(0, max))
        .collect();
    match img.samples {
        Samples::U8(_) => Image::new_u8(
            img.width,
            img.height,
            img.channels,
            v.iter().map(|&s| s as u8).collect(),
        ),
        Samples::U16(_) => Image::new_u16(
            img.width,
            img.height,
            img.channels,
            v.iter().map(|&s| s as u16).collect(),
        ),
    }
}

/// The SSIM of one channel written out directly: the 2-D 11x11 gaussian window (sigma 1.5)
/// at every pixel with reflected edges, the map averaged over pixels 5 or more from every
/// edge (all of them for images under 11 a side).
fn ssim_direct(a: &Image, b: &Image, ch: usize) -> f64 {
    let (w, h, c) = (a.width as i64, a.height as i64, a.channels as usize);
    let (sa, sb) = (samples(a), samples(b));
    let g: Vec<f64> = (-5..=5)
        .map(|x: i64| (-(x * x) as f64 / 4.5).exp())
        .collect();
    let norm: f64 = g.iter().sum();
    let reflect = |i: i64, n: i64| {
        let m = i.rem_euclid(2 * n);
        if m >= n {
            2 * n - 1 - m
        } else {
            m
        }
    };
    let range = f64::from(a.max_value());
    let (c1, c2) = ((0.01 * range).powi(2), (0.03 * range).powi(2));
    let pad = if w >= 11 && h >= 11 { 5 } else { 0 };
    let (mut sum, mut n) = (0.0, 0.0);
    for y in pad..h - pad {
        for x in pad..w - pad {
            let mut m = [0.0f64; 5];
            for dy in -5..=5i64 {
                for dx in -5..=5i64 {
                    let wt = g[(dy + 5) as usize] * g[(dx + 5) as usize] / (norm * norm);
                    let i = ((reflect(y + dy, h) * w + reflect(x + dx, w)) as usize) * c + ch;
                    let (p, q) = (sa[i] as f64, sb[i] as f64);
                    m[0] += wt * p;
                    m[1] += wt * q;
                    m[2] += wt * p * p;
                    m[3] += wt * q * q;
                    m[4] += wt * p * q;
                }
            }
            let (vx, vy, vxy) = (m[2] - m[0] * m[0], m[3] - m[1] * m[1], m[4] - m[0] * m[1]);
            sum += (2.0 * m[0] * m[1] + c1) * (2.0 * vxy + c2)
                / ((m[0] * m[0] + m[1] * m[1] + c1) * (vx + vy + c2));
            n += 1.0;
        }
    }
    sum / n
}

#[track_caller]
fn close(got: f64, want: f64, what: &str) {
    assert!(
        (got - want).abs() <= 1e-6 * want.abs().max(1e-12),
        "{what}: {got} vs {want}"
    );
}

/// Checks the metrics of `cmp` (for `a` against `b`, exact mode, nothing ignored) against
/// sums and formulas computed here.
#[track_caller]
fn check_metrics(a: &Image, b: &Image, cmp: &Comparison, what: &str) {
    let c = a.channels as usize;
    let (sa, sb) = (samples(a), samples(b));
    let pixels = a.pixels();
    let mut differing = 0u64;
    let mut per = vec![(0u64, 0i64, 0i64, 0i128); c];
    for p in 0..pixels {
        let mut any = false;
        for ch in 0..c {
            let d = (sa[p * c + ch] - sb[p * c + ch]).abs();
            any |= d != 0;
            let e = &mut per[ch];
            e.0 += u64::from(d != 0);
            e.1 = e.1.max(d);
            e.2 += d;
            e.3 += i128::from(d * d);
        }
        differing += u64::from(any);
    }
    let ssim = op::ssim(a, b, &[]);
    let m = op::metrics(&cmp.counts, a.channels, a.max_value(), ssim);
    assert_eq!(m.pixels, pixels as u64, "{what}");
    assert_eq!(m.differing, differing, "{what}: differing pixels");
    let max = f64::from(a.max_value());
    let n = pixels as f64;
    for (ch, e) in per.iter().enumerate() {
        let got = &m.channels[ch];
        assert_eq!(got.differing, e.0, "{what}: channel {ch} differing");
        assert_eq!(i64::from(got.max_abs_diff), e.1, "{what}: channel {ch} max");
        close(
            got.mae,
            e.2 as f64 / n,
            &format!("{what}: channel {ch} MAE"),
        );
        let mse = e.3 as f64 / n;
        match got.psnr {
            None => assert_eq!(e.3, 0, "{what}: channel {ch} PSNR"),
            Some(p) => close(
                p,
                10.0 * (max * max / mse).log10(),
                &format!("{what}: ch {ch} PSNR"),
            ),
        }
        let s = ssim_direct(a, b, ch);
        close(got.ssim.unwrap(), s, &format!("{what}: channel {ch} SSIM"));
    }
    let all: i128 = per.iter().map(|e| e.3).sum();
    if all > 0 {
        let mse = all as f64 / (n * c as f64);
        close(
            m.psnr.unwrap(),
            10.0 * (max * max / mse).log10(),
            &format!("{what}: PSNR"),
        );
    }
    let mean: f64 = (0..c).map(|ch| ssim_direct(a, b, ch)).sum::<f64>() / c as f64;
    close(m.ssim.unwrap(), mean, &format!("{what}: SSIM"));
}

/// Writes both diff images before failing, so they can be looked at.
#[track_caller]
fn assert_same(gpu: &Comparison, cpu: &Comparison, what: &str) {
    if gpu != cpu {
        let dir = std::env::temp_dir();
        let name = what.replace(|c: char| !c.is_ascii_alphanumeric(), "_");
        for (tag, c) in [("gpu", gpu), ("cpu", cpu)] {
            if let Some(d) = &c.diff {
                image::save(&dir.join(format!("compare-{name}-{tag}.png")), d.clone()).unwrap();
            }
        }
        assert_eq!(
            gpu.counts,
            cpu.counts,
            "{what}: counts (diffs in {})",
            dir.display()
        );
        panic!("{what}: diff images differ; see {}", dir.display());
    }
}

/// The awkward cases: corners, one pixel, everything, odd sizes, both depths, every layout.
#[test]
fn metrics_match_sums_and_ssim_computed_here() {
    let g = gpu();
    let gc = CompareGpu::new(&g);
    let opts = Options::default();
    for (w, h) in [(1, 1), (3, 2), (7, 5), (11, 11), (13, 17), (33, 12)] {
        for channels in 1..=4u8 {
            for bits in [8, 16] {
                let a = random_image(
                    w,
                    h,
                    channels,
                    bits,
                    w * 31 + h * 7 + channels as u32 + bits,
                );
                let (wu, hu) = (w as usize, h as usize);
                let corners = [0, wu - 1, (hu - 1) * wu, hu * wu - 1];
                let cases: Vec<(&str, Image)> = vec![
                    ("identical", a.clone()),
                    (
                        "corners",
                        modified(&a, |p, ch, v| {
                            if corners.contains(&p) && ch == 0 {
                                v ^ 0x25
                            } else {
                                v
                            }
                        }),
                    ),
                    (
                        "all different",
                        modified(&a, |_, _, v| i64::from(a.max_value()) - v),
                    ),
                    ("random", random_image(w, h, channels, bits, 99)),
                ];
                for (name, b) in cases {
                    let what = format!("{w}x{h}x{channels} {bits}-bit {name}");
                    let cpu = op::reference(&a, &b, &opts);
                    check_metrics(&a, &b, &cpu, &what);
                    let gpu = gc.compare(&a, &b, &opts, &mut Timings::default()).unwrap();
                    assert_same(&gpu, &cpu, &what);
                }
            }
        }
    }
}

/// A row wider than a workgroup's pixels, 16-bit RGBA: one differing pixel at each corner
/// (units of 4 pixels straddle the rows), and every sample as far off as it can be (sums of
/// squares past 2^32 in every workgroup), on both reductions and in strips whose units
/// hold pixels of two strips; against sums computed here and the CPU reference.
#[test]
fn wide_16_bit_rows_with_corners_and_large_sums() {
    let g = gpu();
    let mut gc = CompareGpu::new(&g);
    let (w, h) = (4097u32, 3u32);
    let a = random_image(w, h, 4, 16, 4097);
    let n = (w * h) as usize;
    let corners = [0, w as usize - 1, n - w as usize, n - 1];
    let cases = [
        (
            "corners",
            modified(&a, |p, ch, v| {
                if corners.contains(&p) {
                    v ^ (0x1234 << ch)
                } else {
                    v
                }
            }),
        ),
        ("opposite", modified(&a, |_, _, v| 65535 - v)),
    ];
    let opts = Options {
        diff: true,
        ..Options::default()
    };
    for (name, b) in cases {
        let cpu = op::reference(&a, &b, &opts);
        check_metrics(&a, &b, &cpu, name);
        if name == "corners" {
            assert_eq!(cpu.counts.differing, 4, "{name}");
        }
        // One strip; strips of 2 rows and 1 (8194 pixels: a unit straddles them).
        for (binding, subgroups) in [(u64::MAX, gc.subgroups), (u64::MAX, false), (200_000, true)] {
            gc.binding_bytes = binding.min(g.limits.max_storage_buffer_binding_size);
            gc.subgroups = subgroups && CompareGpu::new(&g).subgroups;
            let got = gc.compare(&a, &b, &opts, &mut Timings::default()).unwrap();
            assert_same(
                &got,
                &cpu,
                &format!("{name} binding {binding} subgroups {subgroups}"),
            );
        }
    }
}

/// pixelmatch's `colorDelta` in f64, with alpha blended over white; 16-bit rounded to 8.
fn pixelmatch_delta(p: [f64; 4], q: [f64; 4]) -> f64 {
    let blend = |c: f64, a: f64| 255.0 + (c - 255.0) * a / 255.0;
    let (p, q) = (
        [0, 1, 2].map(|i| blend(p[i], p[3])),
        [0, 1, 2].map(|i| blend(q[i], q[3])),
    );
    let y = |c: [f64; 3]| c[0] * 0.29889531 + c[1] * 0.58662247 + c[2] * 0.11448223;
    let i = |c: [f64; 3]| c[0] * 0.59597799 - c[1] * 0.27417610 - c[2] * 0.32180189;
    let qq = |c: [f64; 3]| c[0] * 0.21147017 - c[1] * 0.52261711 + c[2] * 0.31114694;
    let (dy, di, dq) = (y(p) - y(q), i(p) - i(q), qq(p) - qq(q));
    0.5053 * dy * dy + 0.299 * di * di + 0.1957 * dq * dq
}

fn rgba_f64(s: &[i64], channels: usize, sixteen: bool) -> [f64; 4] {
    let v: Vec<f64> = s
        .iter()
        .map(|&x| {
            if sixteen {
                ((x * 255 + 32767) / 65535) as f64
            } else {
                x as f64
            }
        })
        .collect();
    match channels {
        1 => [v[0], v[0], v[0], 255.0],
        2 => [v[0], v[0], v[0], v[1]],
        3 => [v[0], v[1], v[2], 255.0],
        _ => [v[0], v[1], v[2], v[3]],
    }
}

/// The integer distance is pixelmatch's exactly: counts agree with its float formula except
/// where f64 rounding itself could decide (within 1e-9 of the threshold), which is nowhere
/// in these images.
#[test]
fn perceptual_counts_follow_pixelmatch() {
    let g = gpu();
    let gc = CompareGpu::new(&g);
    for channels in 1..=4u8 {
        for bits in [8, 16] {
            let a = random_image(37, 23, channels, bits, 5 + channels as u32);
            let step = if bits == 8 { 1 } else { 257 };
            // Small changes of varied size, so distances spread around the thresholds.
            let b = modified(&a, |p, ch, v| {
                v + ((p * 7 + ch * 3) % 29) as i64 * step - 14 * step
            });
            let (sa, sb) = (samples(&a), samples(&b));
            let c = channels as usize;
            for t in [0.0, 0.05, 0.1, 0.3] {
                let opts = Options {
                    threshold: Some(t),
                    ..Options::default()
                };
                let cpu = op::reference(&a, &b, &opts);
                let limit = 35215.0 * t * t;
                let (mut want, mut near) = (0u64, 0u64);
                for p in 0..a.pixels() {
                    let (x, y) = (&sa[p * c..p * c + c], &sb[p * c..p * c + c]);
                    if x == y {
                        continue;
                    }
                    let d =
                        pixelmatch_delta(rgba_f64(x, c, bits == 16), rgba_f64(y, c, bits == 16));
                    want += u64::from(d > limit);
                    near += u64::from(limit > 0.0 && (d - limit).abs() < 1e-9 * limit);
                }
                let what = format!("{channels} channels {bits}-bit t={t}");
                let got = cpu.counts.differing;
                assert_eq!(
                    near, 0,
                    "{what}: pixels within f64 rounding of the threshold"
                );
                assert_eq!(got, want, "{what}");
                let gpu = gc.compare(&a, &b, &opts, &mut Timings::default()).unwrap();
                assert_same(&gpu, &cpu, &what);
            }
        }
    }
}

/// A black-to-white edge with a gray column between: changing the gray is anti-aliasing
/// (each gray pixel has a darker and a brighter neighbour with many equal siblings).
#[test]
fn antialiased_edge_is_counted_apart() {
    let (w, h) = (10u32, 6u32);
    let edge = |gray: u8| {
        let px: Vec<u8> = (0..w * h)
            .map(|i| match i % w {
                x if x < 5 => 0,
                5 => gray,
                _ => 255,
            })
            .collect();
        Image::new_u8(w, h, 1, px)
    };
    let (a, b) = (edge(100), edge(160));
    let plain = op::reference(&a, &b, &Options::default());
    assert_eq!(plain.counts.differing, h as u64);
    let opts = Options {
        antialiasing: true,
        diff: true,
        ..Options::default()
    };
    let cpu = op::reference(&a, &b, &opts);
    assert_eq!(
        (cpu.counts.differing, cpu.counts.antialiased),
        (0, h as u64)
    );
    let diff = cpu.diff.as_ref().unwrap();
    let Samples::U8(px) = &diff.samples else {
        panic!("8-bit diff")
    };
    for y in 0..h as usize {
        assert_eq!(px[(y * w as usize + 5) * 3..][..3], op::YELLOW, "row {y}");
    }
    // A change inside the flat white area is a real difference.
    let mut c = edge(100);
    if let Samples::U8(s) = &mut c.samples {
        s[2 * w as usize + 8] = 0;
    }
    let k = op::reference(&a, &c, &opts).counts;
    assert_eq!((k.differing, k.antialiased), (1, 0));
    let g = gpu();
    let gc = CompareGpu::new(&g);
    for other in [&b, &c] {
        let gpu = gc
            .compare(&a, other, &opts, &mut Timings::default())
            .unwrap();
        assert_same(&gpu, &op::reference(&a, other, &opts), "antialiasing");
    }
}

/// Strips (bindings lowered), ignored rectangles, thresholds, anti-aliasing and the diff
/// image: the GPU pass equals the CPU reference exactly.
#[test]
fn gpu_equals_cpu_with_every_option_and_in_strips() {
    let g = gpu();
    let mut gc = CompareGpu::new(&g);
    for (w, h, channels, bits) in [
        (64, 40, 3, 8),
        (31, 29, 4, 16),
        (17, 50, 2, 8),
        (5, 9, 1, 16),
    ] {
        let a = random_image(w, h, channels, bits, 7);
        // Flat blocks with some noise, so anti-aliasing detection finds equal siblings.
        let a = modified(&a, |p, _, v| if (p / 3) % 4 == 0 { v } else { 0 });
        let b = modified(&a, |p, ch, v| {
            if p % 11 == 3 {
                v + 40 * (ch as i64 + 1)
            } else {
                v
            }
        });
        // Both workgroup reductions: on subgroups (where the adapter has them) and atomics.
        let reductions = [gc.subgroups, false];
        for (binding, subgroups) in [u64::MAX, 2000, 100]
            .into_iter()
            .flat_map(|b| reductions.map(|sg| (b, sg)))
        {
            gc.binding_bytes = binding.min(g.limits.max_storage_buffer_binding_size);
            gc.subgroups = subgroups;
            for opts in [
                Options {
                    diff: true,
                    ..Options::default()
                },
                Options {
                    threshold: Some(0.1),
                    antialiasing: true,
                    ignore: vec![
                        Rect {
                            x1: 1,
                            y1: 2,
                            x2: 3,
                            y2: 6,
                        },
                        Rect {
                            x1: 0,
                            y1: 0,
                            x2: 0,
                            y2: 0,
                        },
                    ],
                    diff: true,
                    tunables: None,
                },
                Options {
                    antialiasing: true,
                    ..Options::default()
                },
            ] {
                let what = format!(
                    "{w}x{h}x{channels} {bits}-bit binding {binding} subgroups {subgroups} {opts:?}"
                );
                let cpu = op::reference(&a, &b, &opts);
                let gpu = match gc.compare(&a, &b, &opts, &mut Timings::default()) {
                    Ok(c) => c,
                    // A row wider than the lowered binding is refused, not mis-compared.
                    Err(e) if binding < 1000 && format!("{e}").contains("too wide") => continue,
                    Err(e) => panic!("{what}: {e:#}"),
                };
                assert_same(&gpu, &cpu, &what);
                let ignored: u64 = (0..h)
                    .flat_map(|y| (0..w).map(move |x| (x, y)))
                    .filter(|&(x, y)| opts.ignore.iter().any(|r| r.contains(x, y)))
                    .count() as u64;
                assert_eq!(cpu.counts.ignored, ignored, "{what}");
            }
        }
    }
}

fn fixture(name: &str) -> String {
    root()
        .join("fixtures/compare")
        .join(name)
        .display()
        .to_string()
}

/// The diff image of fixtures/compare against the golden made by fixtures/compare/make.py.
#[test]
fn diff_image_equals_the_golden() {
    let dir = tempdir();
    for backend in ["cpu", "vulkan"] {
        let out = dir.path().join(format!("diff-{backend}.png"));
        let o = out.display().to_string();
        let r = run(&[
            "--backend",
            backend,
            "compare",
            &fixture("expected.png"),
            &fixture("actual.png"),
            "--diff",
            &o,
        ]);
        r.code(1);
        assert!(r.stdout.contains("18 of 384 pixels differ"), "{}", r.stdout);
        let got = image::load(&out).unwrap();
        let want = image::load(&root().join("fixtures/compare/diff.png")).unwrap();
        assert_eq!(got, want, "{backend}");
    }
}

// `--diff -`: stdout holds the diff image alone; the summary line goes to stderr (it once
// followed the image's bytes on stdout).
#[test]
fn a_diff_on_stdout_is_the_image_alone() {
    let dir = tempdir();
    let out = gpukit()
        .args(["compare", &fixture("expected.png"), &fixture("actual.png")])
        .args(["--diff", "-"])
        .output()
        .expect("the gpukit binary runs");
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("18 of 384 pixels differ"), "{stderr}");
    let path = dir.path().join("diff.png");
    std::fs::write(&path, &out.stdout).unwrap();
    assert_eq!(
        image::load(&path).unwrap(),
        image::load(&root().join("fixtures/compare/diff.png")).unwrap()
    );
    // Nothing past the PNG's end: its last chunk, IEND, ends the stream.
    assert!(
        out.stdout.ends_with(&[0xae, 0x42, 0x60, 0x82]),
        "{} bytes",
        out.stdout.len()
    );
}

#[test]
fn exit_codes_follow_cmp() {
    let dir = tempdir();
    let d = |n: &str| dir.path().join(n).display().to_string();
    let (e, a) = (fixture("expected.png"), fixture("actual.png"));
    run(&["compare", &e, &e]).code(0);
    run(&["compare", &e, &a]).code(1);
    // Limits loose enough make the pair a match.
    run(&[
        "compare",
        &e,
        &a,
        "--fail-on",
        "pixels=18",
        "--fail-on",
        "psnr=10",
    ])
    .code(0);
    run(&["compare", &e, &a, "--fail-on", "max=10"]).code(1);
    // An upper bound below 0 could never pass: bad usage. A lower bound may be negative.
    run(&["compare", &e, &a, "--fail-on", "pixels=-1"])
        .code(2)
        .one_error_line("must be 0 or more");
    let loose = ["--fail-on", "pixels=18"];
    run(&[&["compare", &e, &a, "--fail-on", "ssim=-0.5"][..], &loose].concat()).code(0);
    // Everything that differs is inside the ignored rectangles.
    run(&[
        "compare",
        &e,
        &a,
        "--ignore",
        "0:0-23:0",
        "--ignore",
        "0:15-23:15",
        "--ignore",
        "5:2-20:12",
    ])
    .code(0);
    // A different size is a mismatch with its reason, or compared over the common area.
    let small = Image::new_u8(2, 2, 4, vec![0; 16]);
    image::save(Path::new(&d("small.png")), small).unwrap();
    let r = run(&["compare", &e, &d("small.png")]);
    r.code(1);
    assert!(
        r.stdout
            .contains("size differs: 24x16 expected, 2x2 actual"),
        "{}",
        r.stdout
    );
    let r = run(&[
        "compare",
        &e,
        &d("small.png"),
        "--allow-size-change",
        "--json",
        "-",
    ]);
    r.code(1);
    let doc: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
    assert_eq!(doc["status"], "mismatch");
    assert_eq!(doc["width"], 2);
    assert!(doc["reason"].as_str().unwrap().contains("common 2x2 area"));
    // The pixels only one image has differ: all but the common 2x2, whose 4 pixels differ
    // too (transparent black against the fixture's colours).
    assert_eq!(doc["metrics"]["outside"], 24 * 16 - 4);
    assert_eq!(doc["metrics"]["differing"], 24 * 16);
    // Another layout is compared after promotion to RGBA: black RGB against the fixture's
    // RGBA differs wherever the fixture is not opaque black.
    let rgb = Image::new_u8(24, 16, 3, vec![0; 24 * 16 * 3]);
    image::save(Path::new(&d("rgb.png")), rgb).unwrap();
    let r = run(&["compare", &e, &d("rgb.png"), "--json", "-"]);
    r.code(1);
    let doc: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
    assert_eq!(doc["status"], "mismatch");
    assert_eq!(doc["layout"], "RGBA 8-bit");
    assert_eq!(doc["expected_layout"], "RGBA 8-bit");
    assert_eq!(doc["actual_layout"], "RGB 8-bit");
    assert_eq!(doc["metrics"]["differing"], 24 * 16 - 1);
    // Unreadable input and bad usage are trouble: 2, one line on stderr.
    std::fs::write(d("bad.png"), b"not a png").unwrap();
    run(&["compare", &e, &d("bad.png")])
        .code(2)
        .one_error_line("bad.png");
    // The JSON report is still written, with the trouble in it.
    let r = run(&["compare", &e, &d("bad.png"), "--json", "-"]);
    r.code(2).one_error_line("bad.png");
    let doc: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
    assert_eq!(doc["status"], "error");
    assert!(doc["reason"].as_str().unwrap().contains("bad.png"), "{doc}");
    run(&["compare", &e, &d("missing.png")])
        .code(2)
        .one_error_line("missing.png");
    // A missing input still gets its report (docs/compare.md: always written).
    let r = run(&["compare", &d("missing.png"), &e, "--json", "-"]);
    r.code(2).one_error_line("missing.png: no such file");
    let doc: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
    assert_eq!(doc["status"], "error");
    assert!(
        doc["reason"].as_str().unwrap().contains("missing.png"),
        "{doc}"
    );
    run(&["compare", &e, &d("missing.png"), "--json", &d("r.json")]).code(2);
    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(d("r.json")).unwrap()).unwrap();
    assert_eq!(doc["status"], "error");
    run(&["compare", &e, &a, "--threshold", "2"])
        .code(2)
        .one_error_line("--threshold");
    run(&["compare", &e, &a, "--fail-on", "speed=1"])
        .code(2)
        .one_error_line("unknown metric");
    run(&["compare", &e, &a, "--ignore", "5:5-1:1"])
        .code(2)
        .one_error_line("--ignore");
}

#[test]
fn json_report_has_the_metrics() {
    let r = run(&[
        "compare",
        &fixture("expected.png"),
        &fixture("actual.png"),
        "--json",
        "-",
        "--ssim",
        "--threshold",
        "0",
    ]);
    r.code(1);
    let doc: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
    assert_eq!(doc["status"], "mismatch");
    assert_eq!(doc["failed"], serde_json::json!(["pixels"]));
    let m = &doc["metrics"];
    // At threshold 0 every visible change counts: the 12 pixels made transparent (white
    // over white, against a half-transparent colour) and the 6 colour changes.
    assert_eq!(m["pixels"], 384);
    assert_eq!(m["channels"][3]["name"], "alpha");
    assert_eq!(m["channels"][3]["differing"], 12);
    // scikit-image 0.26 on this pair: structural_similarity(a, b, channel_axis=-1,
    // gaussian_weights=True, sigma=1.5, use_sample_covariance=False, data_range=255) and
    // peak_signal_noise_ratio(a, b, data_range=255).
    let ssim = m["ssim"].as_f64().unwrap();
    assert!((ssim - 0.8862003011140416).abs() < 1e-12, "{ssim}");
    let psnr = m["psnr"].as_f64().unwrap();
    assert!((psnr - 22.669483519437904).abs() < 1e-9, "{psnr}");
    assert_eq!(doc["settings"]["threshold"], 0.0);
}

#[test]
fn folders_pair_files_and_list_missing_and_extra() {
    let dir = tempdir();
    let (golden, out) = (dir.path().join("golden"), dir.path().join("out"));
    for p in [golden.join("sub"), out.join("sub")] {
        std::fs::create_dir_all(p).unwrap();
    }
    let e = std::fs::read(fixture("expected.png")).unwrap();
    let a = std::fs::read(fixture("actual.png")).unwrap();
    for (path, bytes) in [
        (golden.join("same.png"), &e),
        (out.join("same.png"), &e),
        (golden.join("sub/changed.png"), &e),
        (out.join("sub/changed.png"), &a),
        (golden.join("gone.png"), &e),
        (out.join("new.png"), &a),
    ] {
        std::fs::write(path, bytes).unwrap();
    }
    let diffs = dir.path().join("diffs");
    let s = |p: &Path| p.display().to_string();
    let doc = folder_report(&golden, &out, &diffs, 1);
    assert_eq!(doc["status"], "mismatch");
    assert_eq!(doc["missing"], serde_json::json!(["gone.png"]));
    assert_eq!(doc["extra"], serde_json::json!(["new.png"]));
    let files = doc["files"].as_array().unwrap();
    assert_eq!(files.len(), 2);
    assert_eq!(files[0]["status"], "match");
    assert_eq!(files[1]["status"], "mismatch");
    assert_eq!(files[1]["metrics"]["differing"], 18);
    let diff = diffs.join("sub/changed.png");
    assert_eq!(files[1]["diff"], s(&diff));
    assert_eq!(
        image::load(&diff).unwrap(),
        image::load(&root().join("fixtures/compare/diff.png")).unwrap()
    );
    assert!(!diffs.join("same.png").exists());
    // Only matching files: 0.
    std::fs::remove_file(golden.join("gone.png")).unwrap();
    std::fs::remove_file(out.join("new.png")).unwrap();
    std::fs::write(out.join("sub/changed.png"), &e).unwrap();
    run(&["compare", &s(&golden), &s(&out)]).code(0);
    // An unreadable file is trouble: 2, and the others are still compared.
    std::fs::write(out.join("same.png"), b"broken").unwrap();
    let r = run(&["compare", &s(&golden), &s(&out)]);
    r.code(2);
    assert!(r.stdout.contains("sub/changed.png: match"), "{}", r.stdout);
}

/// `compare GOLDEN OUT --json - --diff DIFFS`: its JSON report, after checking the exit code.
#[track_caller]
fn folder_report(golden: &Path, out: &Path, diffs: &Path, code: i32) -> serde_json::Value {
    let s = |p: &Path| p.display().to_string();
    let r = run(&[
        "compare",
        &s(golden),
        &s(out),
        "--json",
        "-",
        "--diff",
        &s(diffs),
    ]);
    r.code(code);
    serde_json::from_str(&r.stdout).unwrap()
}

/// Folder mode never writes a diff image over an image compared, keeps diff images of files
/// that differ only in their extension apart, and passes over a --diff folder inside ACTUAL.
#[test]
fn folder_diffs_never_replace_the_images_compared() {
    let dir = tempdir();
    let d = dir.path();
    let (golden, out) = (d.join("golden"), d.join("out"));
    let e = image::load(Path::new(&fixture("expected.png"))).unwrap();
    let a = image::load(Path::new(&fixture("actual.png"))).unwrap();
    for (folder, img) in [(&golden, &e), (&out, &a)] {
        std::fs::create_dir_all(folder).unwrap();
        image::save(&folder.join("x.png"), img.clone()).unwrap();
        image::save(&folder.join("x.bmp"), img.clone()).unwrap();
    }
    let golden_bytes = std::fs::read(golden.join("x.png")).unwrap();
    let s = |p: &Path| p.display().to_string();
    let mut named = vec![golden.clone(), out.clone(), d.join("./golden/")];
    #[cfg(unix)]
    {
        std::os::unix::fs::symlink(&golden, d.join("link")).unwrap();
        named.push(d.join("link"));
    }
    for diff in named {
        let r = run(&["compare", &s(&golden), &s(&out), "--diff", &s(&diff)]);
        r.code(2).one_error_line("--diff names the");
        assert_eq!(std::fs::read(golden.join("x.png")).unwrap(), golden_bytes);
    }
    // x.png and x.bmp: two diff images, each the golden's.
    let diffs = out.join("diffs");
    let doc = folder_report(&golden, &out, &diffs, 1);
    let want = image::load(&root().join("fixtures/compare/diff.png")).unwrap();
    for (file, name) in doc["files"]
        .as_array()
        .unwrap()
        .iter()
        .zip(["x.bmp", "x.png"])
    {
        let path = diffs.join(format!("{name}.png"));
        assert_eq!(file["diff"], s(&path));
        assert_eq!(image::load(&path).unwrap(), want, "{name}");
    }
    // Run again: the diff folder inside ACTUAL holds no images to compare.
    let doc = folder_report(&golden, &out, &diffs, 1);
    assert_eq!(doc["extra"], serde_json::json!([]));
    // Two streams that would mix, a folder of diffs on stdout, and folders with nothing
    // to compare: trouble.
    let (ep, ap) = (fixture("expected.png"), fixture("actual.png"));
    run(&["compare", &ep, &ap, "--diff", "-", "--json", "-"])
        .code(2)
        .one_error_line("--diff and --json both name -");
    run(&["compare", &s(&golden), &s(&out), "--diff", "-"])
        .code(2)
        .one_error_line("in folder mode --diff names a folder");
    let (e1, e2) = (d.join("e1"), d.join("e2"));
    std::fs::create_dir(&e1).unwrap();
    std::fs::create_dir(&e2).unwrap();
    std::fs::write(e1.join("README.txt"), b"no images").unwrap();
    run(&["compare", &s(&e1), &s(&e2)])
        .code(2)
        .one_error_line("no image files in either folder");
    run(&["compare", &s(&e1), &s(&d.join("nowhere"))])
        .code(2)
        .one_error_line("nowhere: no such file or folder");
}

/// `--allow-damaged` lets compare read what blur and histogram read, with a warning; an
/// --ignore over every pixel is a match that says it checked nothing.
#[test]
fn compare_reads_damaged_files_when_allowed_and_warns_of_an_empty_check() {
    let dir = tempdir();
    let expected = std::fs::read(fixture("expected.png")).unwrap();
    let cut = dir.path().join("cut.png");
    std::fs::write(&cut, &expected[..expected.len() - 20]).unwrap();
    let (ep, cp) = (fixture("expected.png"), cut.display().to_string());
    run(&["compare", &ep, &cp])
        .code(2)
        .one_error_line("cut.png");
    // Only the file's end is cut: every pixel decodes, equal to the expected image's.
    let r = run(&["--allow-damaged", "compare", &ep, &cp]);
    r.code(0)
        .one_error_line("truncated PNG: the data ends early (decoded anyway)");
    assert!(
        r.stdout.contains("match: 0 of 384 pixels differ"),
        "{}",
        r.stdout
    );
    let r = run(&[
        "compare",
        &ep,
        &fixture("actual.png"),
        "--ignore",
        "0:0-100:100",
    ]);
    r.code(0)
        .one_error_line("cover every pixel, so nothing was compared");
    // Issue 24: whatever --fail-on asks (SSIM of no pixels was a mismatch).
    for limit in ["ssim=0.99", "psnr=40", "mae=0", "fraction=0"] {
        let r = run(&[
            "compare",
            &ep,
            &fixture("actual.png"),
            "--ignore",
            "0:0-100:100",
            "--fail-on",
            limit,
        ]);
        r.code(0)
            .one_error_line("cover every pixel, so nothing was compared");
        assert!(
            r.stdout.contains(": match: 0 of 0 pixels"),
            "{limit}: {}",
            r.stdout
        );
    }
}

/// Folder mode through the batch pipeline: a differing pair, pixels equal in different
/// files, a size mismatch, 16-bit gray, a missing and an extra file; one worker or four,
/// on the CPU engine or the GPU, the same report and the same diff images.
#[test]
fn folder_reports_do_not_depend_on_the_jobs_or_the_engine() {
    let dir = tempdir();
    let (golden, out) = (dir.path().join("golden"), dir.path().join("out"));
    for p in [golden.join("a/b"), out.join("a/b")] {
        std::fs::create_dir_all(p).unwrap();
    }
    let save = |path: PathBuf, img: &Image| image::save(&path, img.clone()).unwrap();
    let rgb = random_image(23, 9, 3, 8, 5);
    let changed = modified(
        &rgb,
        |p, ch, v| if p % 7 == 2 && ch == 1 { v ^ 0x80 } else { v },
    );
    let gray16 = random_image(6, 5, 1, 16, 6);
    for i in 0..6 {
        save(golden.join(format!("same{i}.png")), &rgb);
        save(out.join(format!("same{i}.png")), &rgb);
        save(golden.join(format!("a/changed{i}.png")), &rgb);
        save(out.join(format!("a/changed{i}.png")), &changed);
    }
    save(golden.join("a/b/gray16.png"), &gray16);
    save(
        out.join("a/b/gray16.png"),
        &modified(&gray16, |p, _, v| v + p as i64),
    );
    save(golden.join("size.png"), &rgb);
    save(out.join("size.png"), &random_image(9, 23, 3, 8, 5));
    save(golden.join("gone.png"), &rgb);
    save(out.join("a/new.png"), &rgb);
    let s = |p: &Path| p.display().to_string();
    let diffs = dir.path().join("diffs");
    let mut first: Option<(serde_json::Value, Vec<Image>)> = None;
    for (backend, jobs) in [("cpu", "1"), ("cpu", "4"), ("vulkan", "1"), ("vulkan", "4")] {
        if diffs.exists() {
            std::fs::remove_dir_all(&diffs).unwrap();
        }
        let r = run(&[
            "--backend",
            backend,
            "compare",
            &s(&golden),
            &s(&out),
            "--json",
            "-",
            "--diff",
            &s(&diffs),
            "-j",
            jobs,
        ]);
        r.code(1);
        let doc: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
        let files = doc["files"].as_array().unwrap();
        let status: Vec<(&str, &str)> = files
            .iter()
            .map(|f| (f["actual"].as_str().unwrap(), f["status"].as_str().unwrap()))
            .collect();
        let name = |f: &str| s(&out.join(f));
        let mut want = vec![(name("a/b/gray16.png"), "mismatch")];
        want.extend((0..6).map(|i| (name(&format!("a/changed{i}.png")), "mismatch")));
        want.extend((0..6).map(|i| (name(&format!("same{i}.png")), "match")));
        want.push((name("size.png"), "size-mismatch"));
        let want: Vec<(&str, &str)> = want.iter().map(|(n, st)| (n.as_str(), *st)).collect();
        assert_eq!(status, want, "{backend} -j {jobs}");
        assert_eq!(doc["missing"], serde_json::json!(["gone.png"]));
        assert_eq!(doc["extra"], serde_json::json!(["a/new.png"]));
        // Every 7th pixel of 207, in one channel.
        assert_eq!(files[1]["metrics"]["differing"], 30);
        let diff_images: Vec<Image> = (0..6)
            .map(|i| image::load(&diffs.join(format!("a/changed{i}.png"))).unwrap())
            .chain([image::load(&diffs.join("a/b/gray16.png")).unwrap()])
            .collect();
        assert!(!diffs.join("same0.png").exists());
        match &first {
            None => first = Some((doc, diff_images)),
            Some((d, imgs)) => {
                assert_eq!(&doc, d, "{backend} -j {jobs}: the report");
                assert!(imgs == &diff_images, "{backend} -j {jobs}: the diff images");
            }
        }
    }
}

/// Every shape of the pass (`gpukit tune compare`'s candidates and beyond: the smallest and
/// largest workgroups and units, workgroups capped so that each takes several chunks) gives
/// the CPU reference's counts and diff image, on odd widths, one pixel, 8 and 16 bits, RGB
/// (read a word at a time) and RGBA (a vec4 at a time), with and without the anti-aliasing
/// test, in one strip and in strips whose
/// units hold pixels of two strips, on both reductions.
#[test]
fn every_shape_is_exact() {
    let g = gpu();
    let mut gc = CompareGpu::new(&g);
    let max = g
        .limits
        .max_compute_invocations_per_workgroup
        .min(g.limits.max_compute_workgroup_size_x);
    let shape = |wg_size, units, preload, max_groups| Tunables {
        wg_size,
        units,
        preload,
        max_groups,
    };
    let shapes = [
        Tunables::DEFAULT,
        // The defaults for 1 Mpx and 4 Mpx pairs.
        Tunables::for_pixels(1 << 20),
        Tunables::for_pixels(3840 * 2160),
        shape(32, 1, false, 0),
        shape(32, 1, false, 1),
        shape(64, 2, true, 3),
        shape(128, 16, false, 0),
        shape(512.min(max), 32, true, 0),
        shape(512.min(max), 32, false, 1),
        shape(256, 4, true, 7),
    ];
    let pairs: Vec<(Image, Image)> = [
        (1, 1, 3, 8),
        (1031, 9, 3, 8),
        (333, 17, 4, 16),
        (77, 5, 4, 8),
        (19, 23, 3, 16),
    ]
    .into_iter()
    .map(|(w, h, channels, bits)| {
        // Flat runs with noise between, so that the anti-aliasing test finds siblings.
        let a = random_image(w, h, channels, bits, w + h);
        let a = modified(&a, |p, _, v| if (p / 3) % 4 == 0 { v } else { 0 });
        // Every few samples differ, or (the 1031-wide pair) one pixel in 29: whole units
        // then match, which a pass without the diff image skips.
        let b = if w == 1031 {
            modified(&a, |p, _, v| if p % 29 == 0 { v ^ 0x31 } else { v })
        } else {
            modified(&a, |p, ch, v| if (p + ch) % 5 == 0 { v ^ 0x31 } else { v })
        };
        (a, b)
    })
    .collect();
    let reductions = [gc.subgroups, false];
    for t in shapes {
        for (a, b) in &pairs {
            for opts in [
                Options {
                    diff: true,
                    tunables: Some(t),
                    ..Options::default()
                },
                Options {
                    tunables: Some(t),
                    ..Options::default()
                },
                Options {
                    threshold: Some(0.05),
                    antialiasing: true,
                    diff: true,
                    tunables: Some(t),
                    ..Options::default()
                },
            ] {
                let cpu = op::reference(a, b, &opts);
                // One strip, and strips of 3 rows (the pixels of a row of 1031 are not a
                // whole number of units).
                let row = a.width as u64 * a.channels as u64 * u64::from(a.bit_depth() / 8);
                for (binding, subgroups) in [u64::MAX, 7 * row + 200]
                    .into_iter()
                    .flat_map(|b| reductions.map(|sg| (b, sg)))
                {
                    gc.binding_bytes = binding.min(g.limits.max_storage_buffer_binding_size);
                    gc.subgroups = subgroups;
                    let what = format!(
                        "{t} {}x{} {} binding {binding} subgroups {subgroups} aa {}",
                        a.width,
                        a.height,
                        a.describe(),
                        opts.antialiasing
                    );
                    let got = gc.compare(a, b, &opts, &mut Timings::default()).unwrap();
                    assert_same(&got, &cpu, &what);
                }
            }
        }
    }
}

// A missing --mask was reported as the wrong kind of mask ("names a mask image, for two
// images").
#[test]
fn a_missing_mask_is_named_missing() {
    let dir = tempdir();
    let m = dir.path().join("nope.png").display().to_string();
    let r = run(&[
        "compare",
        &fixture("expected.png"),
        &fixture("actual.png"),
        "--mask",
        &m,
    ]);
    r.code(2)
        .one_error_line("nope.png: --mask: no such file or folder");
}

// Folder mode with an unwritable --diff folder failed once per differing pair, at the end,
// naming only the folder; it fails once now, before any pair is read. A --diff folder made
// for a run that writes no diff image is removed again.
#[test]
fn an_unwritable_diff_folder_fails_before_any_pair() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempdir();
    let d = dir.path();
    let e = image::load(Path::new(&fixture("expected.png"))).unwrap();
    let a = image::load(Path::new(&fixture("actual.png"))).unwrap();
    for (folder, img) in [("golden", &e), ("out", &a), ("same", &e)] {
        std::fs::create_dir_all(d.join(folder)).unwrap();
        for name in ["x.png", "y.png"] {
            image::save(&d.join(folder).join(name), img.clone()).unwrap();
        }
        std::fs::set_permissions(d.join(folder), std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    std::fs::create_dir(d.join("ro")).unwrap();
    std::fs::set_permissions(d.join("ro"), std::fs::Permissions::from_mode(0o555)).unwrap();
    std::fs::set_permissions(d, std::fs::Permissions::from_mode(0o755)).unwrap();
    let out = gpukit_as_nobody()
        .current_dir(d)
        .args(["compare", "golden", "out", "--diff", "ro/dd"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains("ro/dd") && err.contains("cannot create"),
        "{err}"
    );
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "",
        "no pair is compared"
    );
    // Matching folders: the folder made for the diff images is gone again.
    let s = |p: &Path| p.display().to_string();
    let new = d.join("new");
    let r = run(&[
        "compare",
        &s(&d.join("golden")),
        &s(&d.join("same")),
        "--diff",
        &s(&new.join("dd")),
    ]);
    r.code(0);
    assert!(!new.exists());
}

// Issue 24: `out/up -> ..` made folder mode list the parent's images as 80 false extras,
// and two such links made it walk for ever; a link to a folder holding it is left out.
#[test]
fn folder_mode_does_not_follow_links_in_a_loop() {
    let dir = tempdir();
    let (golden, out) = (dir.path().join("golden"), dir.path().join("out"));
    let e = std::fs::read(fixture("expected.png")).unwrap();
    for folder in [&golden, &out] {
        std::fs::create_dir_all(folder.join("sub")).unwrap();
        std::fs::write(folder.join("sub/x.png"), &e).unwrap();
    }
    std::os::unix::fs::symlink("..", out.join("up")).unwrap();
    std::os::unix::fs::symlink("../..", out.join("sub/top")).unwrap();
    // Two links that lead into each other's folders.
    std::fs::create_dir_all(golden.join("a")).unwrap();
    std::fs::create_dir_all(golden.join("b")).unwrap();
    std::os::unix::fs::symlink("../b", golden.join("a/to-b")).unwrap();
    std::os::unix::fs::symlink("../a", golden.join("b/to-a")).unwrap();
    let s = |p: &Path| p.display().to_string();
    let r = run(&["compare", &s(&golden), &s(&out), "--json", "-"]);
    r.code(0);
    let doc: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
    assert_eq!(doc["extra"], serde_json::json!([]));
    assert_eq!(doc["missing"], serde_json::json!([]));
    let files: Vec<&str> = doc["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["expected"].as_str().unwrap())
        .collect();
    assert_eq!(files.len(), 1, "{files:?}");
    // out/up, out/sub/top, golden/a/to-b/to-a, golden/b/to-a/to-b.
    assert_eq!(r.stderr.matches("it would loop").count(), 4, "{}", r.stderr);
}

/// Pixel pairs within 0.2% of pixelmatch's threshold (35215 t²), above and below it, for
/// t = 0.05 (row 0), 0.1 (row 1), 0.2 (row 2) and 0.5 (row 3), found by a search in exact
/// rational arithmetic; unused places hold equal pixels. The integer weights gpukit used
/// before (517/306/200 of 1024) counted 9 of the 12 pairs just above as not differing.
const NEAR_THRESHOLD: [[([u8; 4], [u8; 4]); 8]; 4] = [
    [
        ([59, 187, 98, 255], [69, 197, 90, 246]),
        ([56, 29, 70, 255], [61, 38, 61, 247]),
        ([124, 47, 83, 255], [122, 57, 91, 247]),
        ([244, 58, 107, 255], [238, 68, 115, 247]),
        ([235, 132, 7, 255], [232, 142, 16, 245]),
        ([16, 10, 36, 255], [12, 18, 45, 247]),
        ([11, 70, 28, 255], [13, 78, 34, 246]),
        ([16, 11, 82, 255], [13, 20, 88, 247]),
    ],
    [
        ([205, 17, 147, 255], [187, 34, 153, 235]),
        ([1, 164, 4, 255], [11, 183, 18, 236]),
        ([26, 51, 47, 255], [44, 65, 64, 241]),
        ([156, 47, 84, 255], [172, 67, 100, 242]),
        ([52, 62, 252, 255], [68, 82, 233, 242]),
        ([138, 37, 124, 255], [141, 56, 135, 237]),
        ([64, 65, 118, 255], [77, 83, 119, 238]),
        ([3, 16, 94, 255], [3, 34, 78, 237]),
    ],
    [
        ([20, 5, 237, 255], [28, 36, 247, 217]),
        ([75, 23, 78, 255], [111, 43, 91, 216]),
        ([16, 13, 109, 255], [20, 43, 105, 215]),
        ([210, 1, 37, 255], [226, 31, 50, 215]),
        ([10, 36, 11, 255], [0, 76, 0, 217]),
        ([14, 110, 41, 255], [42, 150, 4, 219]),
        ([41, 31, 244, 255], [63, 64, 255, 219]),
        ([0, 0, 0, 255], [0, 0, 0, 255]),
    ],
    [
        ([64, 3, 40, 255], [149, 93, 111, 174]),
        ([2, 15, 200, 255], [70, 115, 197, 170]),
        ([6, 27, 204, 255], [92, 125, 179, 171]),
        ([41, 7, 136, 255], [74, 104, 156, 155]),
        ([0, 0, 0, 255], [0, 0, 0, 255]),
        ([0, 0, 0, 255], [0, 0, 0, 255]),
        ([0, 0, 0, 255], [0, 0, 0, 255]),
        ([0, 0, 0, 255], [0, 0, 0, 255]),
    ],
];

/// The expected and actual 8x4 RGBA images of [`NEAR_THRESHOLD`].
fn near_threshold_pair() -> (Image, Image) {
    let side = |k: usize| {
        let px: Vec<u8> = NEAR_THRESHOLD
            .iter()
            .flat_map(|row| row.iter().flat_map(move |p| if k == 0 { p.0 } else { p.1 }))
            .collect();
        Image::new_u8(8, 4, 4, px)
    };
    (side(0), side(1))
}

/// Counts right at the threshold are pixelmatch's on the CPU reference and on every GPU
/// path (both reductions, one strip and strips), and after promotion to 16 bits.
#[test]
fn counts_at_the_threshold_are_pixelmatchs() {
    let (a, b) = near_threshold_pair();
    // pixelmatch 6.0.0 and 7.2.0 (npm; 7 with checkerboard: false) on these two images, run
    // with node: (threshold, differing without anti-aliasing detection, then with it:
    // differing and anti-aliased, its yellow pixels). Both versions give the same.
    let want = [
        (0.0, 27, 24, 3),
        (0.05, 23, 20, 3),
        (0.1, 15, 14, 1),
        (0.2, 7, 7, 0),
        (0.5, 1, 1, 0),
    ];
    // 16-bit copies (v * 257), read back to the same 8-bit pixels.
    let wide = |img: &Image| op::rgba(img, true);
    let g = gpu();
    let mut gc = CompareGpu::new(&g);
    for (t, plain, differing, antialiased) in want {
        for aa in [false, true] {
            let opts = Options {
                threshold: Some(t),
                antialiasing: aa,
                diff: true,
                ..Options::default()
            };
            let what = format!("t={t} antialiasing {aa}");
            let cpu = op::reference(&a, &b, &opts);
            let (d, y) = if aa {
                (differing, antialiased)
            } else {
                (plain, 0)
            };
            assert_eq!(
                (cpu.counts.differing, cpu.counts.antialiased),
                (d, y),
                "{what}"
            );
            let cpu16 = op::reference(&wide(&a), &wide(&b), &opts);
            assert_eq!(cpu16.counts.differing, d, "{what} 16-bit");
            assert_eq!(cpu16.diff, cpu.diff, "{what} 16-bit");
            for subgroups in [gc.subgroups, false] {
                for binding in [u64::MAX, 300] {
                    gc.subgroups = subgroups;
                    gc.binding_bytes = binding.min(g.limits.max_storage_buffer_binding_size);
                    let gpu = gc.compare(&a, &b, &opts, &mut Timings::default()).unwrap();
                    assert_same(
                        &gpu,
                        &cpu,
                        &format!("{what} subgroups {subgroups} {binding}"),
                    );
                }
            }
        }
    }
}

/// Pixels, not layouts: one picture saved as gray, gray+alpha, RGB and RGBA, 8 and 16 bits,
/// matches itself across layouts (each against the next, and against RGBA 8-bit both ways),
/// and the reports name both layouts.
#[test]
fn layouts_are_compared_after_promotion() {
    let dir = tempdir();
    let gray = random_image(9, 7, 1, 8, 11);
    let Samples::U8(g) = &gray.samples else {
        unreachable!()
    };
    let spread = |c: u8, alpha: bool| -> Image {
        let px = g
            .iter()
            .flat_map(|&v| {
                let mut p = vec![v; usize::from(c)];
                if alpha {
                    *p.last_mut().unwrap() = 255;
                }
                p
            })
            .collect();
        Image::new_u8(9, 7, c, px)
    };
    let eight = [
        ("gray", gray.clone()),
        ("gray+alpha", spread(2, true)),
        ("RGB", spread(3, false)),
        ("RGBA", spread(4, true)),
    ];
    let mut files = Vec::new();
    for (name, img) in eight {
        for sixteen in [false, true] {
            let img = if sixteen {
                let Samples::U8(s) = &img.samples else {
                    unreachable!()
                };
                let wide = s.iter().map(|&v| u16::from(v) * 257).collect();
                Image::new_u16(img.width, img.height, img.channels, wide)
            } else {
                img.clone()
            };
            let bits = if sixteen { 16 } else { 8 };
            let path = dir
                .path()
                .join(format!("{}-{bits}.png", name.replace('+', "")));
            image::save(&path, img).unwrap();
            files.push((format!("{name} {bits}-bit"), path.display().to_string()));
        }
    }
    let rgba8 = files[6].clone();
    let n = files.len();
    let pairs = (0..n).flat_map(|i| {
        [
            (files[i].clone(), files[(i + 1) % n].clone()),
            (files[i].clone(), rgba8.clone()),
            (rgba8.clone(), files[i].clone()),
        ]
    });
    for ((ln, e), (la, a)) in pairs {
        {
            for backend in ["cpu", "vulkan"] {
                let r = run(&["--backend", backend, "compare", &e, &a, "--json", "-"]);
                r.code(0);
                let doc: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
                assert_eq!(doc["expected_layout"], ln.as_str(), "{ln} {la}");
                assert_eq!(doc["actual_layout"], la.as_str(), "{ln} {la}");
                if ln != la {
                    assert!(doc["reason"].as_str().unwrap().contains("compared as RGBA"));
                }
            }
        }
    }
    // A real difference is still one after promotion: gray 8-bit against RGB with one
    // pixel's green raised by one.
    let mut rgb = spread(3, false);
    if let Samples::U8(s) = &mut rgb.samples {
        s[3 * 10 + 1] ^= 1;
    }
    let changed = dir.path().join("changed.png");
    image::save(&changed, rgb).unwrap();
    let r = run(&[
        "compare",
        &files[0].1,
        &changed.display().to_string(),
        "--json",
        "-",
    ]);
    r.code(1);
    let doc: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
    assert_eq!(doc["metrics"]["differing"], 1);
    assert_eq!(doc["metrics"]["channels"][1]["name"], "green");
    assert_eq!(doc["metrics"]["channels"][1]["differing"], 1);
}

/// No silent pass: with --allow-size-change, an image with extra rows or columns fails, the
/// pixels only one image has are counted (`outside`) and drawn red on a diff image covering
/// both, and the pixels neither has are white.
#[test]
fn a_size_change_counts_the_pixels_only_one_image_has() {
    let dir = tempdir();
    let d = |n: &str| dir.path().join(n).display().to_string();
    let a = random_image(6, 4, 3, 8, 3);
    // 8 wide, 3 high: the same top-left 6x3, two more columns.
    let Samples::U8(s) = &a.samples else {
        unreachable!()
    };
    let mut px = Vec::new();
    for y in 0..3 {
        px.extend_from_slice(&s[y * 18..y * 18 + 18]);
        px.extend_from_slice(&[1, 2, 3, 4, 5, 6]);
    }
    let b = Image::new_u8(8, 3, 3, px);
    image::save(Path::new(&d("a.png")), a.clone()).unwrap();
    image::save(Path::new(&d("b.png")), b).unwrap();
    for backend in ["cpu", "vulkan"] {
        let diff = d(&format!("diff-{backend}.png"));
        let r = run(&[
            "--backend",
            backend,
            "compare",
            &d("a.png"),
            &d("b.png"),
            "--allow-size-change",
            "--json",
            "-",
            "--diff",
            &diff,
        ]);
        r.code(1);
        let doc: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
        // Only the expected has row 3's first 6 pixels; only the actual columns 6-7 of rows
        // 0-2; neither has (6..8, 3). The common 6x3 is equal.
        let m = &doc["metrics"];
        assert_eq!(m["outside"], 6 + 6, "{backend}");
        assert_eq!(m["differing"], 12, "{backend}");
        assert_eq!(m["pixels"], 18 + 12, "{backend}");
        assert_eq!(
            (doc["width"].clone(), doc["height"].clone()),
            (6.into(), 3.into())
        );
        let img = image::load(Path::new(&diff)).unwrap();
        assert_eq!((img.width, img.height), (8, 4));
        let Samples::U8(px) = &img.samples else {
            unreachable!()
        };
        let at = |x: usize, y: usize| &px[(y * 8 + x) * 3..(y * 8 + x) * 3 + 3];
        for y in 0..4 {
            for x in 0..8 {
                let want: Option<[u8; 3]> = match (x < 6, y < 3) {
                    (true, true) => None, // the faded gray of the common area
                    (false, false) => Some([255, 255, 255]),
                    _ => Some([255, 0, 0]),
                };
                if let Some(want) = want {
                    assert_eq!(at(x, y), want, "{backend} ({x}, {y})");
                } else {
                    assert_eq!(at(x, y)[0], at(x, y)[1], "{backend} ({x}, {y}) is gray");
                }
            }
        }
        // Rows and columns ignored are not counted.
        let r = run(&[
            "--backend",
            backend,
            "compare",
            &d("a.png"),
            &d("b.png"),
            "--allow-size-change",
            "--ignore",
            "6:0-7:3",
            "--ignore",
            "0:3-5:3",
        ]);
        r.code(0);
    }
}

#[test]
fn stdin_is_named_stdin_in_the_summary_and_kept_as_given_in_the_json() {
    let fixture = |n: &str| format!("{}/fixtures/compare/{n}", env!("CARGO_MANIFEST_DIR"));
    let (e, a) = (fixture("expected.png"), fixture("actual.png"));
    let run_stdin = |extra: &[&str]| {
        crate::util::gpukit()
            .args(["compare", &e, "-"])
            .args(extra)
            .stdin(std::fs::File::open(&a).unwrap())
            .output()
            .unwrap()
    };
    let out = run_stdin(&[]);
    assert_eq!(out.status.code(), Some(1));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.starts_with("stdin: MISMATCH: 18 of 384 pixels differ"),
        "{text}"
    );
    let out = run_stdin(&["--json", "-"]);
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["actual"], "-", "{doc}");
}
