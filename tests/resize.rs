//! `resize`: the reference against Pillow's goldens (fixtures/resize/), the native CPU engine
//! against the reference, every GPU path bit for bit against the CPU engine, and the sizes
//! refused as usage errors.

use std::path::Path;

use gpukit::gpu::{Engine, Gpu, PassTimer, Timings};
use gpukit::io::image::{self, Image, Samples};
use gpukit::ops::resize::{self, Filter, Options, Size};
use gpukit::UsageError;

use crate::util::{dump_mismatch, engine, gpu, random_image};

fn exact(width: u32, height: u32) -> Size {
    Size::Exact { width, height }
}

/// The largest difference between two images' samples (None if their shapes differ).
fn max_diff(a: &Image, b: &Image) -> Option<u32> {
    if (a.width, a.height, a.channels) != (b.width, b.height, b.channels) {
        return None;
    }
    Some(match (&a.samples, &b.samples) {
        (Samples::U8(x), Samples::U8(y)) => x
            .iter()
            .zip(y)
            .map(|(&p, &q)| p.abs_diff(q) as u32)
            .max()
            .unwrap_or(0),
        (Samples::U16(x), Samples::U16(y)) => x
            .iter()
            .zip(y)
            .map(|(&p, &q)| p.abs_diff(q) as u32)
            .max()
            .unwrap_or(0),
        _ => return None,
    })
}

/// Every case of fixtures/resize/cases.txt: (input, options, Pillow's output, its name).
fn golden_cases() -> Vec<(Image, Options, Image, String)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/resize");
    let list = std::fs::read_to_string(dir.join("cases.txt")).unwrap();
    let cases: Vec<_> = list
        .lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            let (w, h) = resize::parse_dims(f[2]).unwrap();
            let options = Options::new(exact(w, h), f[1].parse().unwrap());
            let input = image::load(&dir.join(f[0])).unwrap();
            let want = image::load(&dir.join(f[3])).unwrap();
            (input, options, want, l.to_string())
        })
        .collect();
    assert_eq!(cases.len(), 128, "cases in fixtures/resize/cases.txt");
    cases
}

// Pillow's bytes, on every 8-bit case; its 16-bit resampling sums in f64 with unquantised
// weights, gpukit's in integers with 22-bit weights: within one level (docs/resize.md).
#[test]
fn reference_equals_pillow_goldens() {
    let mut bad = Vec::new();
    let mut sixteen = 0;
    for (input, options, want, name) in golden_cases() {
        let got = resize::reference(&input, &options).unwrap();
        let d = max_diff(&got, &want);
        let limit = if input.bit_depth() == 16 { 1 } else { 0 };
        if input.bit_depth() == 16 {
            sixteen += 1;
        }
        if d.is_none_or(|d| d > limit) {
            bad.push(format!("{name}: max difference {d:?}"));
        }
    }
    assert_eq!(sixteen, 10);
    assert!(
        bad.is_empty(),
        "{} of the goldens differ:\n{}",
        bad.len(),
        bad.join("\n")
    );
}

#[test]
fn gpu_equals_pillow_goldens_on_8_bit_images() {
    let mut bad = Vec::new();
    for (input, options, want, name) in golden_cases() {
        if input.bit_depth() != 8 {
            continue;
        }
        let got = resize::run(engine(), &input, &options, &mut Timings::default()).unwrap();
        if got != want {
            bad.push(format!(
                "{name}: max difference {:?}",
                max_diff(&got, &want)
            ));
        }
    }
    assert!(bad.is_empty(), "{} differ:\n{}", bad.len(), bad.join("\n"));
}

type Dims = (u32, u32);

/// Shapes that reach every path: both passes either way round, one pass, none; rows whose
/// samples end inside a word; workgroup tiles that cross rows (short rows) and spans too long
/// for workgroup memory (a 4097-wide row to 3); a reduction large enough that a workgroup
/// takes fewer pixels to keep its input in workgroup memory (2000 to 50); words of a
/// vertical pass across two rows and across two input words; 1x1; the tall path (height
/// first).
const SHAPES: &[(Dims, Dims)] = &[
    ((1, 1), (1, 1)),
    ((1, 1), (5, 3)),
    ((7, 9), (3, 2)),
    ((33, 17), (71, 40)),
    ((64, 48), (16, 12)),
    ((64, 48), (64, 13)),
    ((64, 48), (23, 48)),
    ((5, 3), (2, 1)),
    ((4097, 2), (3, 2)),
    ((4097, 3), (1021, 5)),
    ((2000, 3), (50, 2)),
    ((300, 7), (1200, 3)),
    ((2, 301), (3, 40)),
    ((3, 400), (2, 31)),
];

fn images(seed: u32) -> Vec<Image> {
    let mut out = Vec::new();
    for (k, &((w, h), _)) in SHAPES.iter().enumerate() {
        for channels in 1..=4u8 {
            for bits in [8, 16] {
                out.push(random_image(
                    w,
                    h,
                    channels,
                    bits,
                    seed + k as u32 * 8 + u32::from(channels) * 2 + bits,
                ));
            }
        }
    }
    out
}

fn each_case(mut f: impl FnMut(&Image, &Options, String)) {
    let imgs = images(17);
    for filter in Filter::ALL {
        for img in &imgs {
            let &(_, (w, h)) = SHAPES
                .iter()
                .find(|(i, _)| *i == (img.width, img.height))
                .unwrap();
            let what = format!("{} to {w}x{h} {}", img.describe(), filter.name());
            f(img, &Options::new(exact(w, h), filter), what);
        }
    }
}

#[test]
fn cpu_engine_equals_reference() {
    each_case(|img, options, what| {
        let want = resize::reference(img, options).unwrap();
        let got = resize::run(&Engine::Cpu, img, options, &mut Timings::default()).unwrap();
        assert!(
            got == want,
            "{what}: engine and reference differ by {:?}",
            max_diff(&got, &want)
        );
    });
}

#[test]
fn every_gpu_path_equals_the_cpu_engine() {
    each_case(|img, options, what| {
        let cpu = resize::run(&Engine::Cpu, img, options, &mut Timings::default()).unwrap();
        let gpu = resize::run(engine(), img, options, &mut Timings::default()).unwrap();
        if gpu != cpu {
            let dir = dump_mismatch(&what, "png", &gpu, &cpu, |p, i| {
                let _ = image::save(p, i.clone());
            });
            panic!(
                "{what}: GPU and CPU differ by {:?}; written to {}",
                max_diff(&gpu, &cpu),
                dir.display()
            );
        }
    });
}

/// `plan` run once on `img`: its result.
fn run_plan(gpu: &Gpu, plan: &resize::ResizePlan, img: &Image) -> Image {
    plan.write(gpu, img);
    gpu.run_timed(&mut Timings::default(), 1, |b, _| plan.record(b))
        .unwrap();
    plan.read(gpu).unwrap()
}

/// The 8-bit kernels (resize_h8s and resize_h8 with their tiles at several budgets,
/// resize_v8 at 1, 2 and 4 words a thread) and the generic kernels (budget 0) on the same
/// images, both pass orders, an upscale, every layout: each equals the CPU engine, and each
/// plan runs the kernels its shape calls for.
#[test]
fn the_8_bit_kernels_and_the_generic_ones_equal_the_cpu_engine() {
    let Engine::Gpu(gpu) = engine() else {
        panic!("the tests' engine is a GPU adapter");
    };
    let mut narrow = 0;
    // Horizontal first, vertical first (the height shrinks by more than twice the width),
    // an upscale one way; the widths give whole output words at every layout.
    let shapes = [
        ((64, 48), (16, 12)),
        ((48, 160), (44, 20)),
        ((33, 17), (12, 40)),
    ];
    for (k, &((w, h), (ow, oh))) in shapes.iter().enumerate() {
        for channels in 1..=4u8 {
            let img = random_image(w, h, channels, 8, 91 + k as u32 * 4 + u32::from(channels));
            for filter in [Filter::Lanczos3, Filter::Bilinear, Filter::Nearest] {
                let options = Options::new(exact(ow, oh), filter);
                let want =
                    resize::run(&Engine::Cpu, &img, &options, &mut Timings::default()).unwrap();
                let passes = resize::passes(w, h, ow, oh, filter, 8);
                for (budget, rows, (v_rows, v_words), wg_size) in [
                    (0, 4, (4, 2), 256),
                    (700, 4, (1, 1), 64),
                    (1100, 2, (3, 4), 128),
                    (6144, 8, (8, 2), 256),
                ] {
                    let t = resize::Tunables {
                        budget_words: budget,
                        rows_a_thread: rows,
                        v_rows,
                        v_words,
                        wg_size,
                        ..resize::Tunables::DEFAULT
                    };
                    let plan =
                        resize::ResizePlan::with_tunables(gpu, &img, &passes, filter, t).unwrap();
                    let kernels = plan.kernels();
                    // 64 to 16 is a whole-number reduction, whose tile (4 rows of up to
                    // 277 pixels at 4x, and the output's) fits the largest budget, the
                    // smaller ones for some filters only.
                    let whole = w % ow == 0;
                    let want_kernels: Vec<&str> = passes
                        .iter()
                        .zip(&kernels)
                        .map(|(p, &got)| match (p.dir, budget) {
                            (resize::Dir::Horizontal, 0) => "resize_h",
                            (resize::Dir::Horizontal, 6144) if whole => "resize_h8s",
                            (resize::Dir::Horizontal, _) if whole && got == "resize_h8s" => got,
                            (resize::Dir::Horizontal, _) => "resize_h8",
                            (resize::Dir::Vertical, 0) => "resize_v",
                            (resize::Dir::Vertical, _) => "resize_v8",
                        })
                        .collect();
                    assert_eq!(
                        kernels, want_kernels,
                        "{w}x{h} to {ow}x{oh}, budget {budget}"
                    );
                    narrow += usize::from(budget == 700 && kernels.contains(&"resize_h8"));
                    let got = run_plan(gpu, &plan, &img);
                    let what = format!(
                        "{} to {ow}x{oh} {} with {budget} words, {rows} and {v_rows} rows, {v_words} words, {wg_size} threads: {kernels:?}",
                        img.describe(),
                        filter.name(),
                    );
                    assert!(
                        got == want,
                        "{what}: differs by {:?}",
                        max_diff(&got, &want)
                    );
                }
            }
        }
    }
    assert!(
        narrow > 0,
        "no small budget took the 8-bit horizontal kernel"
    );
    // The 8-bit kernels are built without bounds checks, for the shapes `check_shape` allows:
    // a plan refuses any other, whichever way its tunables come.
    let img = random_image(64, 48, 4, 8, 5);
    let passes = resize::passes(64, 48, 16, 12, Filter::Lanczos3, 8);
    for t in [
        resize::Tunables {
            wg_size: 96,
            ..resize::Tunables::DEFAULT
        },
        resize::Tunables {
            rows_a_thread: 9,
            ..resize::Tunables::DEFAULT
        },
        resize::Tunables {
            tile_w: 48,
            ..resize::Tunables::DEFAULT
        },
        resize::Tunables {
            v_words: 3,
            ..resize::Tunables::DEFAULT
        },
        resize::Tunables {
            v_regular: (9, 1),
            ..resize::Tunables::DEFAULT
        },
        resize::Tunables {
            v_regular: (2, 8),
            ..resize::Tunables::DEFAULT
        },
    ] {
        let err = resize::ResizePlan::with_tunables(gpu, &img, &passes, Filter::Lanczos3, t)
            .err()
            .expect("a shape the kernels' index arguments do not cover");
        assert!(err.to_string().contains("resize's"), "{err}");
    }
}

/// The whole-number reductions' horizontal kernel (resize_h8s) against the CPU engine: 2x,
/// 3x and 4x, alone and before a vertical pass (so with alpha divided out in it or not),
/// every layout and filter, rows whose last group of four columns is partial (258 wide) and
/// tiles whose last is (260 wide: five tiles of 64), a single output column, a single row,
/// after a vertical pass (so dividing alpha out, not premultiplying: 200 rows to 20 first),
/// and tiles of 8 to 64 columns, 1 to 5 rows a thread and 64 to 256 threads (as many as the
/// budget and 32 loads a thread take); where the output rows end on a word it is the kernel
/// the plan runs.
#[test]
fn the_whole_number_kernel_equals_the_cpu_engine() {
    let Engine::Gpu(gpu) = engine() else {
        panic!("the tests' engine is a GPU adapter");
    };
    let shapes = [
        ((8, 5), (4, 5)),
        ((24, 7), (8, 7)),
        ((1040, 3), (260, 3)),
        ((516, 9), (258, 9)),
        ((2, 3), (1, 3)),
        ((36, 40), (12, 20)),
        ((8, 1), (4, 1)),
        ((36, 200), (12, 20)),
    ];
    let shaped = |tile_w, rows, wg_size| resize::Tunables {
        whole: (tile_w, rows, wg_size),
        ..resize::Tunables::DEFAULT
    };
    let mut ran = 0;
    for (k, &((w, h), (ow, oh))) in shapes.iter().enumerate() {
        for channels in 1..=4u8 {
            let img = random_image(w, h, channels, 8, 311 + k as u32 * 4 + u32::from(channels));
            for filter in Filter::ALL {
                let options = Options::new(exact(ow, oh), filter);
                let want =
                    resize::run(&Engine::Cpu, &img, &options, &mut Timings::default()).unwrap();
                let passes = resize::passes(w, h, ow, oh, filter, 8);
                let mut shapes = vec![resize::Tunables::DEFAULT];
                if matches!(filter, Filter::Lanczos3 | Filter::Box) {
                    shapes.extend([shaped(8, 1, 64), shaped(16, 3, 128), shaped(64, 8, 64)]);
                }
                for t in shapes {
                    let plan =
                        resize::ResizePlan::with_tunables(gpu, &img, &passes, filter, t).unwrap();
                    let kernels = plan.kernels();
                    let whole_words = (ow * u32::from(channels)).is_multiple_of(4);
                    let across = passes
                        .iter()
                        .position(|p| p.dir == resize::Dir::Horizontal)
                        .expect("every shape resizes its width");
                    assert_eq!(
                        kernels[across] == "resize_h8s",
                        whole_words,
                        "{w}x{h} to {ow}x{oh}, {channels} channels: {kernels:?}"
                    );
                    ran += usize::from(whole_words);
                    let got = run_plan(gpu, &plan, &img);
                    assert!(
                        got == want,
                        "{} to {ow}x{oh} {} with {t}: {kernels:?} differs by {:?}",
                        img.describe(),
                        filter.name(),
                        max_diff(&got, &want)
                    );
                }
            }
        }
    }
    assert!(ran > 100, "{ran} plans ran resize_h8s");
}

/// The vertical pass's word columns (resize_v8) against the CPU engine at whole-number
/// reductions, where the rows away from the edges take their weights as constants and a
/// thread whose rows are all such walks their windows once: 2x, 3x and 4x (up to 16 taps:
/// lanczos3 at 2x, bicubic to 3x, bilinear and box at all three; the others load every
/// weight), every filter, units of 1, 2 and 4 words (rows of 5 RGBA pixels, 5 words; of 8
/// RGB, 6 words; of 16 gray, 4 words), 1, 2, 3 and 8 rows a thread of up to 1, 4, 2 and 4
/// words, in both shapes (`v_rows` and `v_words` where no row is regular, `v_regular` where
/// some are), so that threads straddle the regular rows' ends and the last is partial.
#[test]
fn the_word_columns_equal_the_cpu_engine_at_whole_number_reductions() {
    let Engine::Gpu(gpu) = engine() else {
        panic!("the tests' engine is a GPU adapter");
    };
    let mut ran = 0;
    for (k, &(h, oh)) in [(40, 20), (63, 21), (48, 12)].iter().enumerate() {
        for (w, channels) in [(5, 4), (8, 3), (16, 1)] {
            let img = random_image(w, h, channels, 8, 517 + k as u32 * 8 + u32::from(channels));
            for filter in Filter::ALL {
                let options = Options::new(exact(w, oh), filter);
                let want =
                    resize::run(&Engine::Cpu, &img, &options, &mut Timings::default()).unwrap();
                let passes = resize::passes(w, h, w, oh, filter, 8);
                for (v_rows, v_words) in [(1, 1), (2, 4), (3, 2), (8, 4)] {
                    let t = resize::Tunables {
                        v_rows,
                        v_words,
                        v_regular: (v_rows, v_words),
                        ..resize::Tunables::DEFAULT
                    };
                    let plan =
                        resize::ResizePlan::with_tunables(gpu, &img, &passes, filter, t).unwrap();
                    assert_eq!(plan.kernels(), ["resize_v8"], "{w}x{h} to {w}x{oh}");
                    let got = run_plan(gpu, &plan, &img);
                    assert!(
                        got == want,
                        "{} to {w}x{oh} {} with {v_rows} rows of {v_words} words: differs by {:?}",
                        img.describe(),
                        filter.name(),
                        max_diff(&got, &want)
                    );
                    ran += 1;
                }
            }
        }
    }
    assert_eq!(ran, 3 * 3 * 5 * 4);
}

/// Grids past the dispatch limit (lowered to 8 workgroups a dimension): resize_v8's groups
/// of rows and resize_h8s's rows of tiles go over y and z (a halving of 200 rows, the
/// vertical pass first: 25 groups of 4 regular rows, 8 by 4, then 25 rows of tiles; to 80
/// rows: 40 groups of 2, 8 by 5, then 20 rows of tiles, 8 by 3), and the results equal the
/// CPU engine's.
#[test]
fn grids_past_the_dispatch_limit_equal_the_cpu_engine() {
    let mut g = gpu();
    g.set_dispatch_limit(8);
    let img = random_image(64, 200, 4, 8, 71);
    for (ow, oh) in [(32, 100), (32, 80)] {
        let options = Options::new(exact(ow, oh), Filter::Lanczos3);
        let want = resize::run(&Engine::Cpu, &img, &options, &mut Timings::default()).unwrap();
        let passes = resize::passes(64, 200, ow, oh, Filter::Lanczos3, 8);
        let plan = resize::ResizePlan::new(&g, &img, &passes, Filter::Lanczos3).unwrap();
        assert_eq!(plan.kernels(), ["resize_v8", "resize_h8s"], "to {ow}x{oh}");
        let got = run_plan(&g, &plan, &img);
        assert!(
            got == want,
            "64x200 to {ow}x{oh}: differs by {:?}",
            max_diff(&got, &want)
        );
    }
}

// An image resized to its own size is returned as it is: Pillow copies it (no premultiply
// round trip).
#[test]
fn same_size_is_an_exact_copy() {
    let img = random_image(9, 5, 4, 8, 3);
    for e in [&Engine::Cpu, engine()] {
        let out = resize::run(
            e,
            &img,
            &Options::new(exact(9, 5), Filter::Lanczos3),
            &mut Timings::default(),
        )
        .unwrap();
        assert_eq!(out, img);
    }
}

#[test]
fn derived_sizes_round_to_the_nearest_pixel() {
    assert_eq!(Size::Width(512).resolve(2048, 1536).unwrap(), (512, 384));
    assert_eq!(Size::Height(100).resolve(640, 480).unwrap(), (133, 100));
    // 3 * 0.5 = 1.5 rounds up; a side never goes below 1.
    assert_eq!(Size::Scale(0.5).resolve(3, 1).unwrap(), (2, 1));
    assert_eq!(Size::Width(1).resolve(1000, 10).unwrap(), (1, 1));
    // Fit inside 100x100: the longer side is 100.
    assert_eq!(
        Size::Fit {
            width: 100,
            height: 100
        }
        .resolve(400, 300)
        .unwrap(),
        (100, 75)
    );
    assert_eq!(
        Size::Fit {
            width: 100,
            height: 100
        }
        .resolve(30, 60)
        .unwrap(),
        (50, 100)
    );
    // An input too large for the factor fails that input, not the command.
    let e = Size::Scale(1000.0).resolve(2000, 10).unwrap_err();
    assert!(e.downcast_ref::<UsageError>().is_none(), "{e}");
}

#[test]
fn bad_sizes_are_usage_errors() {
    let usage = |r: anyhow::Result<Size>| {
        let e = r.unwrap_err();
        assert!(e.downcast_ref::<UsageError>().is_some(), "{e:#}");
        e.to_string()
    };
    let m = usage(Size::from_flags(Some((0, 10)), None, None, None, None));
    assert!(m.contains("width 0"), "{m}");
    usage(Size::from_flags(None, None, Some(0), None, None));
    usage(Size::from_flags(
        Some((1 << 21, 10)),
        None,
        None,
        None,
        None,
    ));
    usage(Size::from_flags(None, None, None, Some(0.0), None));
    usage(Size::from_flags(None, None, None, Some(-2.0), None));
    usage(Size::from_flags(None, None, None, Some(f64::NAN), None));
    usage(Size::from_flags(None, None, None, Some(1e300), None));
    let m = usage(Size::from_flags(
        Some((10, 10)),
        None,
        None,
        Some(2.0),
        None,
    ));
    assert!(m.contains("one of"), "{m}");
    usage(Size::from_flags(None, Some(3), None, None, Some((4, 4))));
    usage(Size::from_flags(None, None, None, None, None));
    assert!(resize::parse_dims("-3x4").is_err());
    assert!(resize::parse_dims("3x").is_err());
    assert_eq!(resize::parse_dims("640x480"), Ok((640, 480)));
    assert_eq!(
        Size::from_flags(None, Some(3), Some(4), None, None).unwrap(),
        exact(3, 4)
    );
}

/// `gpukit resize` on Pillow's golden inputs gives Pillow's pixels, each filter, through a
/// batch with --out-dir and through -o, on the native CPU engine and on the GPU.
#[test]
fn the_command_writes_pillows_pixels() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/resize");
    let tmp = crate::util::tempdir();
    let input = dir.join("rgb_37x23.png");
    for backend in ["cpu", "vulkan"] {
        for filter in ["lanczos3", "bicubic", "bilinear", "box", "nearest"] {
            let out = tmp.path().join(format!("{backend}-{filter}.png"));
            crate::util::run(&[
                "--backend",
                backend,
                "resize",
                input.to_str().unwrap(),
                "--size",
                "13x8",
                "--filter",
                filter,
                "-o",
                out.to_str().unwrap(),
            ])
            .code(0);
            let want = image::load(&dir.join(format!("rgb_37x23_{filter}_13x8.png"))).unwrap();
            let got = image::load(&out).unwrap();
            assert_eq!(max_diff(&got, &want), Some(0), "{backend} {filter}");
        }
    }
    // A folder, the width alone: 37x23 to 61 wide keeps the aspect ratio (61x38).
    let folder = tmp.path().join("in");
    std::fs::create_dir(&folder).unwrap();
    std::fs::copy(&input, folder.join("a.png")).unwrap();
    let out_dir = tmp.path().join("out");
    crate::util::run(&[
        "--backend",
        "cpu",
        "resize",
        folder.to_str().unwrap(),
        "--width",
        "61",
        "--out-dir",
        out_dir.to_str().unwrap(),
    ])
    .code(0);
    let got = image::load(&out_dir.join("a.png")).unwrap();
    assert_eq!((got.width, got.height), (61, 38));
}

/// With no adapter named, resize runs on the native CPU engine here: a small job (the
/// estimate, `Options::gpu_saving`), and lavapipe, CI's only adapter, a software rasteriser.
#[test]
fn by_default_resize_runs_on_the_cores() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/resize");
    let tmp = crate::util::tempdir();
    let out = tmp.path().join("o.png");
    let r = crate::util::run(&[
        "-v",
        "resize",
        dir.join("rgb_37x23.png").to_str().unwrap(),
        "--width",
        "13",
        "-o",
        out.to_str().unwrap(),
    ]);
    r.code(0);
    assert!(r.stderr.contains("engine: native CPU ("), "{}", r.stderr);
}

/// The resolution is scaled with the pixels (a 300 dpi image halved is 150 dpi), so that the
/// picture keeps its printed size.
#[test]
fn the_resolution_follows_the_size() {
    use gpukit::io::metadata::{Density, DensityUnit, Metadata};
    let tmp = crate::util::tempdir();
    let input = tmp.path().join("dpi.png");
    let meta = Metadata {
        density: Some(Density {
            x: 300,
            y: 200,
            unit: DensityUnit::Inch,
        }),
        ..Metadata::default()
    };
    let file = gpukit::io::output::PendingFile::create(&input).unwrap();
    image::save_to_with(
        file,
        ::image::ImageFormat::Png,
        random_image(40, 30, 3, 8, 5),
        &meta,
        &image::WriteOptions::default(),
    )
    .unwrap();
    let out = tmp.path().join("half.png");
    crate::util::run(&[
        "--backend",
        "cpu",
        "resize",
        input.to_str().unwrap(),
        "--scale",
        "0.5",
        "-o",
        out.to_str().unwrap(),
    ])
    .code(0);
    let read = image::load_with(&out, &image::ReadOptions::default()).unwrap();
    assert_eq!((read.image.width, read.image.height), (20, 15));
    let d = read.metadata.density.expect("a resolution");
    // PNG stores pixels per metre: 150 and 100 dpi, within the metre's rounding.
    let per_inch = |v: u32| match d.unit {
        DensityUnit::Meter => (f64::from(v) * 0.0254).round() as u32,
        DensityUnit::Inch => v,
        u => panic!("unit {u:?}"),
    };
    assert_eq!((per_inch(d.x), per_inch(d.y)), (150, 100));
}

/// Bad sizes fail as usage errors before any input is read (this one does not exist).
#[test]
fn bad_size_flags_fail_before_any_input_is_read() {
    for (args, needle) in [
        (vec!["--width", "0"], "width 0 is out of range"),
        (vec!["--size", "10x10", "--scale", "2"], "give one of"),
        (vec![], "no output size"),
        (vec!["--size", "10by10"], "expected WIDTHxHEIGHT"),
    ] {
        let mut all = vec!["resize", "no-such-file.png", "-o", "x.png"];
        all.extend(args);
        crate::util::run(&all).code(2).one_error_line(needle);
    }
}

#[test]
fn a_target_over_the_byte_limit_fails_its_file_in_one_line() {
    // A 1x1 image to 1048576 wide keeps its aspect: 1048576x1048576, 3 TiB. It aborted on
    // the allocation; now its size is held to --max-image-bytes, as decoding is.
    let dir = crate::util::tempdir();
    let input = dir.path().join("one.png");
    image::save(&input, Image::new_u8(1, 1, 3, vec![7, 8, 9])).unwrap();
    let input = input.to_str().unwrap();
    let out = dir.path().join("out.png");
    let out_s = out.to_str().unwrap();
    crate::util::run(&["resize", input, "--width", "1048576", "-o", out_s])
        .code(1)
        .one_error_line(
            "one.png: resizing 1x1 to 1048576x1048576 makes a 3072.0 GiB image (RGB 8-bit), \
             over the limit of 2.0 GiB",
        );
    assert!(!out.exists());
    // 100x100 RGB is 30000 bytes: over a 20000-byte limit, within a 40000-byte one.
    let limited = |limit: &str| {
        crate::util::run(&[
            "--max-image-bytes",
            limit,
            "resize",
            input,
            "--size",
            "100x100",
            "-o",
            out_s,
        ])
    };
    limited("20000")
        .code(1)
        .one_error_line("makes a 29.3 KiB image (RGB 8-bit), over the limit of 19.5 KiB");
    assert!(!out.exists());
    limited("40000").code(0);
    let img = image::load(&out).unwrap();
    assert_eq!((img.width, img.height), (100, 100));
    let Samples::U8(samples) = &img.samples else {
        panic!("8-bit in, 8-bit out");
    };
    assert!(samples.chunks(3).all(|p| p == [7, 8, 9]));
}

/// A plan's two passes are recorded into one compute pass, timed as one under both labels;
/// a split timer gives each a pass of its own, timed apart. The result is the CPU engine's
/// either way.
#[test]
fn the_passes_share_one_compute_pass_unless_the_timer_splits_them() {
    let Engine::Gpu(gpu) = engine() else {
        panic!("the tests' engine is a GPU adapter");
    };
    assert!(
        gpu.features.timestamp_query,
        "lavapipe has timestamp queries"
    );
    let img = random_image(64, 48, 3, 8, 17);
    let options = Options::new(exact(16, 12), Filter::Lanczos3);
    let want = resize::run(&Engine::Cpu, &img, &options, &mut Timings::default()).unwrap();
    let passes = resize::passes(64, 48, 16, 12, Filter::Lanczos3, 8);
    let labels: Vec<&str> = passes
        .iter()
        .map(|p| match p.dir {
            resize::Dir::Horizontal => "resize horizontal",
            resize::Dir::Vertical => "resize vertical",
        })
        .collect();
    assert_eq!(labels.len(), 2);
    let plan = resize::ResizePlan::with_tunables(
        gpu,
        &img,
        &passes,
        Filter::Lanczos3,
        resize::Tunables::DEFAULT,
    )
    .unwrap();
    let labels_of = |timer: &mut PassTimer| -> Vec<String> {
        let passes = timer.take(gpu).unwrap();
        passes.into_iter().map(|p| p.label).collect()
    };
    for (timer, want_labels) in [
        (PassTimer::new(gpu, 4), vec![labels.join(" + ")]),
        (
            PassTimer::split(gpu, 4),
            labels.iter().map(|l| l.to_string()).collect(),
        ),
    ] {
        let mut timer = timer;
        plan.write(gpu, &img);
        let mut batch = gpu.batch(Some(&mut timer));
        plan.record(&mut batch);
        batch.submit().unwrap();
        assert_eq!(timer.dispatches(), 2);
        assert_eq!(labels_of(&mut timer), want_labels);
        assert!(plan.read(gpu).unwrap() == want, "{want_labels:?}");
    }
    // Past the timer's capacity a pass goes untimed, and its dispatches join no timed pass's
    // label: a copy timed, a clear ending its pass, then the resize's two passes untimed.
    let copy = gpukit::ops::copy::CopyPlan::new(gpu, &[7u32; 64]).unwrap();
    let scratch = gpu.buffer("scratch", gpukit::gpu::Usage::Storage, 256);
    let mut timer = PassTimer::new(gpu, 1);
    let mut batch = gpu.batch(Some(&mut timer));
    copy.record(&mut batch);
    batch.clear_buffer(&scratch);
    plan.record(&mut batch);
    batch.submit().unwrap();
    assert_eq!(timer.dispatches(), 3);
    assert_eq!(labels_of(&mut timer), ["copy"]);
    assert!(plan.read(gpu).unwrap() == want);
}
