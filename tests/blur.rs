//! `blur`: the GPU bit for bit against the CPU reference, golden files, and the command line.

use std::path::Path;

use gpukit::gpu::{Engine, Timings};
use gpukit::io::image::{self, Image, Samples};
use gpukit::ops::blur::{
    gaussian_radius, gaussian_weights, reference, run as blur_run, BlurPlan, Blurrer, GpuOptions,
    Kind, Layout, Options as BlurParams, Tunables,
};

use crate::util::{dump_mismatch, engine, gpu, run, run_in, shared_gpu, tempdir, xorshift};

/// Deterministic noise with every sample value likely, and some fully transparent pixels.
fn noise(w: u32, h: u32, channels: u8, sixteen: bool, seed: u32) -> Image {
    let n = (w * h * channels as u32) as usize;
    let mut next = xorshift(seed);
    let mut img = if sixteen {
        Image::new_u16(w, h, channels, (0..n).map(|_| next() as u16).collect())
    } else {
        Image::new_u8(w, h, channels, (0..n).map(|_| next() as u8).collect())
    };
    // Zero alpha on every 7th pixel: the unpremultiply's a = 0 case.
    if channels == 2 || channels == 4 {
        let c = channels as usize;
        match &mut img.samples {
            Samples::U8(v) => v.chunks_mut(c).step_by(7).for_each(|p| p[c - 1] = 0),
            Samples::U16(v) => v.chunks_mut(c).step_by(7).for_each(|p| p[c - 1] = 0),
        }
    }
    img
}

/// Writes both images as PNGs when they differ, then fails.
#[track_caller]
fn assert_same(gpu: &Image, cpu: &Image, what: &str) {
    if gpu != cpu {
        let dir = dump_mismatch(what, "png", gpu, cpu, |p, img| {
            let _ = image::save(p, img.clone());
        });
        panic!(
            "GPU and CPU differ for {what}; both written to {}",
            dir.display()
        );
    }
}

#[track_caller]
fn check(img: &Image, params: BlurParams) {
    let what = format!(
        "{} {:?} r={} x{}",
        img.describe(),
        params.kind,
        params.radius,
        params.iterations
    );
    let want = reference(img, &params).unwrap();
    for (layout, subgroups) in SHAPES {
        let options = shape_options((layout, subgroups));
        let got = on_gpu(img, params, options);
        assert_same(
            &got,
            &want,
            &format!("{what} {layout:?} subgroups {subgroups}"),
        );
    }
}

/// `img` blurred on the shared GPU engine with `options`.
fn on_gpu(img: &Image, params: BlurParams, options: GpuOptions) -> Image {
    blur_run(
        engine(),
        img,
        &params.with_gpu(options),
        &mut Timings::default(),
    )
    .unwrap()
}

/// Both kernel layouts run on every adapter: the one a GPU uses and the one a CPU adapter
/// uses, whichever this machine has.
const LAYOUTS: [Layout; 2] = [Layout::Workgroup, Layout::LinePerInvocation];

/// The layouts, the workgroup one with the box's sums across a line by subgroup operations
/// and through workgroup memory (`shape_options`).
const SHAPES: [(Layout, bool); 3] = [
    (Layout::Workgroup, true),
    (Layout::Workgroup, false),
    (Layout::LinePerInvocation, false),
];

/// The options of one of SHAPES. The box sums by subgroups only where a subgroup holds whole
/// lines: lavapipe's subgroups are 8 wide, so the subgroup shape takes 8 threads a line, not
/// the default 16 (with which it would sum through workgroup memory, as the other does). An
/// adapter without subgroups keeps the default.
fn shape_options((layout, subgroups): (Layout, bool)) -> GpuOptions {
    let [min, _] = shared_gpu().features.subgroup_size;
    let tpl = match min {
        0 => Tunables::DEFAULT.box_tpl,
        min => Tunables::DEFAULT.box_tpl.min(min),
    };
    GpuOptions {
        layout: Some(layout),
        subgroups,
        tunables: subgroups.then_some(Tunables {
            box_tpl: tpl,
            ..Tunables::DEFAULT
        }),
        ..GpuOptions::DEFAULT
    }
}

const GAUSS1: Kind = Kind::Gaussian { sigma: 1.0 };

#[test]
fn box_sizes_and_radii_match_cpu() {
    // Box workgroups take 8 lines and walk 32 positions a chunk: sizes straddle both.
    let sizes = [
        (1, 1),
        (1, 17),
        (17, 1),
        (2, 3),
        (31, 5),
        (32, 33),
        (33, 31),
        (65, 2),
        (257, 129),
    ];
    for (w, h) in sizes {
        for r in [0, 1, 2, 15, 100] {
            check(
                &noise(w, h, 4, false, w * 31 + h),
                BlurParams::new(Kind::Box, r, 1),
            );
            check(
                &noise(w, h, 1, true, w + h * 7),
                BlurParams::new(Kind::Box, r, 1),
            );
        }
    }
}

#[test]
fn gaussian_sizes_and_radii_match_cpu() {
    // Gaussian chunks are 64 positions: 63, 64, 65 straddle them.
    for (w, h) in [(1, 1), (2, 3), (63, 9), (64, 1), (65, 70), (257, 129)] {
        for r in [1, 2, 15] {
            let sigma = Kind::Gaussian {
                sigma: r as f64 / 2.0,
            };
            check(&noise(w, h, 4, false, w ^ h), BlurParams::new(sigma, r, 1));
            check(&noise(w, h, 3, true, w + h), BlurParams::new(sigma, r, 1));
        }
    }
    check(
        &noise(40, 30, 4, false, 5),
        BlurParams::new(Kind::Gaussian { sigma: 40.0 }, 100, 1),
    );
    // Lines longer than a segment (256 positions): several workgroups walk each line.
    check(&noise(600, 2, 4, false, 8), BlurParams::new(GAUSS1, 3, 1));
}

// Box segments are 256 positions, or a quarter of the first window where that is longer:
// lines of several segments at r = 100, of segments of 512 positions at r = 900, and of
// segments whose first windows pass both ends of the line.
#[test]
fn box_segments_at_large_radius_match_cpu() {
    check(
        &noise(1700, 3, 4, false, 10),
        BlurParams::new(Kind::Box, 100, 1),
    );
    check(
        &noise(3, 1700, 1, true, 11),
        BlurParams::new(Kind::Box, 100, 1),
    );
    check(
        &noise(2100, 2, 4, false, 12),
        BlurParams::new(Kind::Box, 900, 1),
    );
    // Windows longer than the line, which is longer than a segment: two segments, each first
    // window clamped at both ends.
    check(
        &noise(300, 2, 4, false, 13),
        BlurParams::new(Kind::Box, 200, 1),
    );
}

#[test]
fn every_layout_and_depth_matches_cpu() {
    for channels in 1..=4u8 {
        for sixteen in [false, true] {
            let img = noise(33, 31, channels, sixteen, channels as u32);
            for params in [
                BlurParams::new(Kind::Box, 2, 1),
                BlurParams::new(Kind::Box, 2, 3),
                BlurParams::new(GAUSS1, gaussian_radius(1.0), 1),
                BlurParams::new(GAUSS1, gaussian_radius(1.0), 3),
            ] {
                check(&img, params);
            }
        }
    }
}

// Opaque images take the kernels' division by constants wherever a window is all opaque
// (`OPAQUE_SA` in wgsl/shared/blur_pass.wgsl); the translucent block and the edges around it
// take the exact division by the alpha sum.
#[test]
fn mostly_opaque_images_match_cpu() {
    for (channels, sixteen) in [(4u8, false), (4, true), (2, false), (2, true)] {
        let mut img = noise(37, 29, channels, sixteen, 41);
        let c = channels as usize;
        let translucent = |i: usize| (300..340).contains(&i);
        match &mut img.samples {
            Samples::U8(v) => v
                .chunks_mut(c)
                .enumerate()
                .for_each(|(i, p)| p[c - 1] = if translucent(i) { p[c - 1] / 2 } else { 255 }),
            Samples::U16(v) => v
                .chunks_mut(c)
                .enumerate()
                .for_each(|(i, p)| p[c - 1] = if translucent(i) { p[c - 1] / 2 } else { 65535 }),
        }
        for params in [
            BlurParams::new(Kind::Box, 3, 1),
            BlurParams::new(Kind::Box, 15, 2),
            BlurParams::new(GAUSS1, gaussian_radius(1.0), 1),
        ] {
            check(&img, params);
        }
    }
}

// Alpha sums past 2^31 (high alphas in wide windows) take the colour's division in a word
// (`remainder_fits_word` in src/ops/blur/arith.rs): 8-bit noise with alphas of 200 to 255,
// colour blocks of 0 and 255 under alphas of 254 and 255, whose quotients lie on or near
// their steps, and 16-bit noise with alphas from 50000. Box r = 64's 8-bit alpha sums stay
// below 2^31, r = 65's and r = 100's pass it, as do the gaussians'.
#[test]
fn high_alpha_sums_divide_in_a_word_and_match_cpu() {
    let (w, h) = (67u32, 45u32);
    let mut high = noise(w, h, 4, false, 23);
    if let Samples::U8(v) = &mut high.samples {
        v.chunks_mut(4).for_each(|p| p[3] = 200 + p[3] % 56);
    }
    let blocks = (0..w * h).flat_map(|i| {
        let (x, y) = (i % w, i / w);
        let v = if (x / 7 + y / 5) % 2 == 1 { 255 } else { 0 };
        let a = if (x * 31 + y * 17) % 13 == 0 {
            254
        } else {
            255
        };
        [v, (x * 255 / (w - 1)) as u8, 255 - v, a]
    });
    let blocks = Image::new_u8(w, h, 4, blocks.collect());
    let mut high16 = noise(w, h, 4, true, 24);
    if let Samples::U16(v) = &mut high16.samples {
        v.chunks_mut(4).for_each(|p| p[3] = 50_000 + p[3] % 15_536);
    }
    // 16-bit: the alpha sums of r = 80 and r = 101 reach 0.63 and 0.79 * 2^32, the word's
    // last radius; r = 102 divides in 48 bits.
    for r in [80, 101, 102] {
        check(&high16, BlurParams::new(Kind::Box, r, 1));
    }
    for img in [&high, &blocks] {
        for params in [
            BlurParams::new(Kind::Box, 64, 1),
            BlurParams::new(Kind::Box, 65, 1),
            BlurParams::new(Kind::Box, 100, 1),
            BlurParams::new(Kind::Gaussian { sigma: 5.0 }, 15, 1),
            BlurParams::new(Kind::Gaussian { sigma: 40.0 }, 100, 1),
        ] {
            check(img, params);
        }
    }
}

/// `noise` as 8-bit RGBA with every alpha opaque.
fn opaque_noise(w: u32, h: u32, seed: u32) -> Image {
    let mut img = noise(w, h, 4, false, seed);
    if let Samples::U8(v) = &mut img.samples {
        v.chunks_mut(4).for_each(|p| p[3] = 255);
    }
    img
}

#[test]
fn an_all_opaque_rgba8_blur_takes_the_opaque_passes_and_matches_cpu() {
    // Every alpha 255, blurred once: the plan takes the narrow intermediate (the box's row
    // sums of plain samples, turned on load into the premultiplied ones; the gaussian's
    // premultiplied values in 18 bits a lane), with the reference's bytes; at the box's
    // largest radius whose row sums fit 16 bits (128; white, at the ceiling), past the
    // image's size, on 4097 columns, and in strips (a 12 KiB binding).
    let g = shared_gpu();
    let gauss5 = Kind::Gaussian { sigma: 5.0 };
    for (w, h, kind, r, max_binding) in [
        (1, 1, Kind::Box, 1, None),
        (7, 9, Kind::Box, 2, None),
        (37, 29, Kind::Box, 3, None),
        (37, 29, Kind::Box, 15, None),
        (30, 20, Kind::Box, 128, None),
        (4097, 3, Kind::Box, 5, None),
        (40, 50, Kind::Box, 3, Some(12 << 10)),
        (1, 1, GAUSS1, 3, None),
        (37, 29, GAUSS1, 3, None),
        (37, 29, gauss5, 15, None),
        (4097, 3, gauss5, 15, None),
        (40, 50, GAUSS1, 3, Some(12 << 10)),
        (23, 17, Kind::Gaussian { sigma: 160.0 }, 500, None),
    ] {
        let img = opaque_noise(w, h, w + r);
        let params = BlurParams::new(kind, r, 1);
        let want = reference(&img, &params).unwrap();
        for (layout, subgroups) in SHAPES {
            let options = GpuOptions {
                max_binding,
                ..shape_options((layout, subgroups))
            };
            let what =
                format!("{w}x{h} {kind:?} r={r} {layout:?} subgroups {subgroups} {max_binding:?}");
            let params = params.with_gpu(options);
            let plan = BlurPlan::new(g, &img, &params).unwrap();
            assert!(plan.opaque_passes(), "{what}");
            assert_eq!(plan.strips > 1, max_binding.is_some(), "{what}");
            let got = blur_run(engine(), &img, &params, &mut Timings::default()).unwrap();
            assert_same(&got, &want, &what);
        }
    }
    // Nearly flat gaussian weights (sigma = r = 402: their rounding once wrapped the centre
    // weight), opaque and not.
    let flat = BlurParams::new(Kind::Gaussian { sigma: 402.0 }, 402, 1);
    check(&opaque_noise(30, 20, 6), flat);
    check(&noise(30, 20, 4, false, 7), flat);
    // The gaussian's values at the 18-bit intermediate's ceiling: white stays white.
    let white = Image::new_u8(1200, 3, 4, vec![255; 1200 * 3 * 4]);
    let params = BlurParams::new(Kind::Gaussian { sigma: 160.0 }, 500, 1);
    for shape in SHAPES {
        let params = params.with_gpu(shape_options(shape));
        assert!(BlurPlan::new(g, &white, &params).unwrap().opaque_passes());
        let got = blur_run(engine(), &white, &params, &mut Timings::default()).unwrap();
        assert_same(&got, &white, &format!("white gaussian r=500 {shape:?}"));
    }
    // Row sums at the 16-bit intermediate's ceiling: 257 samples of 255 (r = 128), 65535.
    let white = Image::new_u8(300, 5, 4, vec![255; 300 * 5 * 4]);
    let params = BlurParams::new(Kind::Box, 128, 1);
    for shape in SHAPES {
        let params = params.with_gpu(shape_options(shape));
        assert!(BlurPlan::new(g, &white, &params).unwrap().opaque_passes());
        let got = blur_run(engine(), &white, &params, &mut Timings::default()).unwrap();
        assert_same(&got, &white, &format!("white r=128 {shape:?}"));
    }
}

#[test]
fn the_gaussians_8_bit_row_passes_by_dot_products_match_cpu() {
    // The workgroup gaussian's row passes of plain 8-bit samples (images without alpha, and
    // all-opaque RGBA blurred once) take four taps of a lane in two 4 x 8-bit dot products
    // (`DOT4` in wgsl/blur_gauss.wgsl): on awkward sizes, at radii whose taps fill a thread's
    // words exactly or not, at the largest radius (its weights' bytes fill their table),
    // twice. Weights that reach 2^16 (sigma 0.2: all at the centre; at 0.25 the side ones
    // are 22), and RGBA blurred twice (premultiplied samples), take the usual sums. (Tune's
    // shapes, strips and 2-D grids take them in the tests of those.)
    let g = shared_gpu();
    let options = GpuOptions {
        layout: Some(Layout::Workgroup),
        ..GpuOptions::DEFAULT
    };
    for (w, h) in [(1, 1), (7, 9), (4097, 3), (130, 67)] {
        let images = [
            noise(w, h, 3, false, w + h),
            noise(w, h, 1, false, w * h),
            opaque_noise(w, h, w),
        ];
        for img in &images {
            for (sigma, r, iterations) in [
                (0.5, 1, 1),
                (1.0, 2, 1),
                (5.0, 15, 1),
                (5.0, 16, 1),
                (1.0, 3, 2),
                (40.0, 100, 1),
                (160.0, 500, 1),
                (0.25, 1, 1),
                (0.2, 1, 1),
            ] {
                let params = BlurParams::new(Kind::Gaussian { sigma }, r, iterations);
                let params = params.with_gpu(options);
                let what = format!("{} sigma {sigma} r={r} x{iterations}", img.describe());
                let plan = BlurPlan::new(g, img, &params).unwrap();
                let dot4 = sigma > 0.2 && (img.channels < 4 || iterations == 1);
                assert_eq!(plan.rows_by_dot_products(), dot4, "{what}");
                let got = blur_run(engine(), img, &params, &mut Timings::default()).unwrap();
                assert_same(&got, &reference(img, &params).unwrap(), &what);
            }
        }
    }
}

#[test]
fn the_boxs_loads_of_four_pixels_at_a_time_match_cpu() {
    // The workgroup box of 8-bit images without alpha (1 and 3 channels), four positions a
    // thread, reads a thread's four entering and four leaving pixels at a time where all its
    // windows lie inside the line (wgsl/shared/box_runs_quads.wgsl), a pixel at a time
    // elsewhere: in its first row pass from the host's layout, and in its column passes from
    // the 16-bit intermediate bound as vec4s where that is a whole number of them (an even
    // number of pixels: width times the padded lines, which are the image's rows below 256).
    // Lines shorter than a window, a window just inside or outside each end (r = 1, 2, 3 on
    // 7 to 13 pixels), rows that start at every byte of a word (odd widths), pixels that
    // start a vec4 or its middle, 4097 wide, a radius past the image, twice. Images with
    // alpha (premultiplied on load) never take it, but for the all-opaque RGBA8 box's column
    // pass, which reads a 16-bit intermediate too (and expands what it loads).
    let g = shared_gpu();
    let options = GpuOptions {
        layout: Some(Layout::Workgroup),
        ..GpuOptions::DEFAULT
    };
    let sizes = [
        (1, 1),
        (7, 9),
        (9, 8),
        (13, 5),
        (12, 7),
        (4097, 3),
        (130, 67),
        (131, 300),
    ];
    for (w, h) in sizes {
        let even = w % 2 == 0 || h % 2 == 0 || h >= 256;
        let mut images: Vec<(Image, bool)> = (1..=4u8)
            .map(|c| (noise(w, h, c, false, w * 7 + h + c as u32), false))
            .collect();
        images.push((opaque_noise(w, h, w + h), true));
        for (img, all_opaque) in &images {
            let plain = img.channels % 2 == 1;
            for (r, iterations) in [(1, 1), (2, 1), (3, 1), (15, 1), (5000, 1), (2, 2)] {
                let params = BlurParams::new(Kind::Box, r, iterations).with_gpu(options);
                let what = format!("{} r={r} x{iterations}", img.describe());
                let plan = BlurPlan::new(g, img, &params).unwrap();
                let opaque = *all_opaque && iterations == 1 && r <= 128;
                assert_eq!(plan.opaque_passes(), opaque, "{what}");
                let quads = (plain, (plain || opaque) && even);
                assert_eq!(plan.reads_quads(), quads, "{what}");
                let got = blur_run(engine(), img, &params, &mut Timings::default()).unwrap();
                assert_same(&got, &reference(img, &params).unwrap(), &what);
            }
        }
    }
}

#[test]
fn blurs_the_opaque_passes_do_not_take_match_cpu_the_usual_way() {
    // One alpha of 254 (first or last), a radius whose row sums pass 16 bits, two iterations
    // of either kind, 16-bit RGBA and gray+alpha all take the usual passes.
    let g = shared_gpu();
    let mut one_translucent = opaque_noise(23, 17, 5);
    if let Samples::U8(v) = &mut one_translucent.samples {
        v[4 * 200 + 3] = 254;
    }
    // 40,000 bytes: the upload checks its alpha in chunks of 16 KiB, this one in the last.
    let mut last_translucent = opaque_noise(100, 100, 9);
    if let Samples::U8(v) = &mut last_translucent.samples {
        *v.last_mut().unwrap() = 254;
    }
    let mut deep = noise(23, 17, 4, true, 6);
    let mut gray_alpha = noise(23, 17, 2, false, 7);
    match (&mut deep.samples, &mut gray_alpha.samples) {
        (Samples::U16(d), Samples::U8(ga)) => {
            d.chunks_mut(4).for_each(|p| p[3] = 65535);
            ga.chunks_mut(2).for_each(|p| p[1] = 255);
        }
        _ => unreachable!("made so above"),
    }
    let opaque = opaque_noise(23, 17, 8);
    for (what, img, params) in [
        (
            "alpha 254",
            &one_translucent,
            BlurParams::new(Kind::Box, 3, 1),
        ),
        (
            "last alpha 254",
            &last_translucent,
            BlurParams::new(Kind::Box, 3, 1),
        ),
        ("r = 129", &opaque, BlurParams::new(Kind::Box, 129, 1)),
        ("two iterations", &opaque, BlurParams::new(Kind::Box, 3, 2)),
        ("gaussian twice", &opaque, BlurParams::new(GAUSS1, 3, 2)),
        ("16-bit", &deep, BlurParams::new(Kind::Box, 3, 1)),
        ("gray+alpha", &gray_alpha, BlurParams::new(Kind::Box, 3, 1)),
    ] {
        for layout in LAYOUTS {
            let options = GpuOptions {
                layout: Some(layout),
                ..GpuOptions::DEFAULT
            };
            let params = params.with_gpu(options);
            let plan = BlurPlan::new(g, img, &params).unwrap();
            assert!(!plan.opaque_passes(), "{what} {layout:?}");
            let got = blur_run(engine(), img, &params, &mut Timings::default()).unwrap();
            assert_same(&got, &reference(img, &params).unwrap(), what);
        }
    }
}

#[test]
fn a_blurrer_switches_between_the_opaque_and_the_usual_passes_image_by_image() {
    // One plan for every image (the same size and layout): each image takes the passes its
    // own alpha allows, whatever the one before took.
    let params = BlurParams::new(Kind::Box, 4, 1);
    let mut blur = Blurrer::new(engine(), params);
    for (i, opaque) in [true, false, true, true, false, false, true]
        .into_iter()
        .enumerate()
    {
        let seed = 90 + i as u32;
        let img = match opaque {
            true => opaque_noise(29, 13, seed),
            false => noise(29, 13, 4, false, seed),
        };
        let got = blur.run(&img, &mut Timings::default()).unwrap();
        assert_same(
            &got,
            &reference(&img, &params).unwrap(),
            &format!("image {i}"),
        );
    }
}

#[test]
fn a_gpu_batch_of_opaque_rgba_pngs_takes_the_opaque_passes_and_writes_the_cpu_batchs_files() {
    // The batch stages each decoded image for the device, and the staging's copy finds it
    // all opaque (the passes' labels say so in --timings); a translucent one beside them
    // takes the usual passes. Every file is byte for byte the CPU engine's.
    let dir = tempdir();
    let d = dir.path();
    std::fs::create_dir(d.join("in")).unwrap();
    for (name, img) in [
        ("a.png", opaque_noise(64, 48, 1)),
        ("b.png", opaque_noise(64, 48, 2)),
        ("c.png", noise(64, 48, 4, false, 3)),
    ] {
        image::save(&d.join("in").join(name), img).unwrap();
    }
    let batch = |backend: &str, out: &str| {
        let args = ["--timings", "--backend", backend, "blur", "in", "-r", "3"];
        let r = run_in(
            Some(d),
            &[&args[..], &["--out-dir", out, "-j", "1"]].concat(),
        );
        r.code(0);
        r.stderr
    };
    let timings = batch("vulkan", "gpu");
    assert!(
        timings.contains("gpu blur rows (opaque) + blur columns (opaque)"),
        "{timings}"
    );
    assert!(
        timings.contains("gpu blur rows + blur columns"),
        "{timings}"
    );
    batch("cpu", "cpu");
    for name in ["a.png", "b.png", "c.png"] {
        let cpu = std::fs::read(d.join("cpu").join(name)).unwrap();
        let gpu = std::fs::read(d.join("gpu").join(name)).unwrap();
        assert!(cpu == gpu, "{name}: the GPU batch's file differs");
    }
}

/// RGBA with alpha ramps 1..=255 along the rows (up on even rows, down on odd ones; times
/// 257 for 16-bit), every 5th pixel fully transparent, and noise for colour.
fn alpha_ramps(sixteen: bool) -> Image {
    let (w, h) = (255u32, 6u32);
    let mut next = xorshift(77);
    let mut px = Vec::new();
    for y in 0..h {
        for x in 0..w {
            let ramp = if y % 2 == 0 { x + 1 } else { w - x };
            let a = if (x + 3 * y) % 5 == 0 { 0 } else { ramp };
            let scale = if sixteen { 257 } else { 1 };
            let max = 255 * scale;
            px.extend([
                next() % (max + 1),
                next() % (max + 1),
                next() % (max + 1),
                a * scale,
            ]);
        }
    }
    if sixteen {
        Image::new_u16(w, h, 4, px.iter().map(|&v| v as u16).collect())
    } else {
        Image::new_u8(w, h, 4, px.iter().map(|&v| v as u8).collect())
    }
}

/// One 1-D pass in f64 along rows (`along_x`) or columns, edges clamped, weights `wt`.
fn pass_f64(v: &[f64], (w, h): (usize, usize), wt: &[f64], along_x: bool) -> Vec<f64> {
    let r = (wt.len() / 2) as i64;
    let total: f64 = wt.iter().sum();
    let mut out = vec![0f64; v.len()];
    for y in 0..h as i64 {
        for x in 0..w as i64 {
            let mut s = 0f64;
            for (k, &wk) in wt.iter().enumerate() {
                let d = k as i64 - r;
                let (xx, yy) = if along_x {
                    ((x + d).clamp(0, w as i64 - 1), y)
                } else {
                    (x, (y + d).clamp(0, h as i64 - 1))
                };
                s += wk * v[(yy * w as i64 + xx) as usize];
            }
            out[(y * w as i64 + x) as usize] = s / total;
        }
    }
    out
}

/// The exact alpha-weighted blur of an RGBA image, in f64: per pixel the colour
/// sum(c * a * w) / sum(a * w) (w the blur's weights over the clamped window, `iterations`
/// times) and the blurred alpha, both in sample levels.
fn exact_alpha_blur(img: &Image, wt: &[f64], iterations: u32) -> Vec<[f64; 4]> {
    let (w, h) = (img.width as usize, img.height as usize);
    let s: Vec<f64> = match &img.samples {
        Samples::U8(v) => v.iter().map(|&x| x as f64).collect(),
        Samples::U16(v) => v.iter().map(|&x| x as f64).collect(),
    };
    let mut planes: Vec<Vec<f64>> = (0..4)
        .map(|k| {
            s.chunks(4)
                .map(|p| if k == 3 { p[3] } else { p[k] * p[3] })
                .collect()
        })
        .collect();
    for plane in &mut planes {
        for _ in 0..iterations {
            *plane = pass_f64(&pass_f64(plane, (w, h), wt, true), (w, h), wt, false);
        }
    }
    (0..w * h)
        .map(|i| {
            let a = planes[3][i];
            let c = |k: usize| if a > 0.0 { planes[k][i] / a } else { 0.0 };
            [c(0), c(1), c(2), a]
        })
        .collect()
}

// Colour is weighted by alpha at full precision: within 1 level of the exact weighted mean
// wherever the blurred alpha is at least 1 (8-bit), and within the bound docs/blur.md gives
// for 16-bit images; on the GPU in both layouts and in the native CPU engine.
#[test]
fn alpha_weighted_colour_is_within_one_level_of_the_exact_mean() {
    let gpu_engine = engine();
    let cpu = Engine::Cpu;
    for sixteen in [false, true] {
        let img = alpha_ramps(sixteen);
        let max = if sixteen { 65535f64 } else { 255.0 };
        for params in [
            BlurParams::new(Kind::Box, 1, 1),
            BlurParams::new(Kind::Box, 4, 1),
            BlurParams::new(Kind::Box, 2, 3),
            BlurParams::new(Kind::Gaussian { sigma: 1.5 }, 5, 1),
            BlurParams::new(Kind::Gaussian { sigma: 3.0 }, 9, 1),
            BlurParams::new(GAUSS1, 3, 2),
        ] {
            let (wt, f): (Vec<f64>, i32) = match params.kind {
                Kind::Box => (vec![1.0; 2 * params.radius as usize + 1], 8),
                Kind::Gaussian { sigma } => (
                    gaussian_weights(sigma, params.radius, 14)
                        .iter()
                        .map(|&x| x as f64)
                        .collect(),
                    2,
                ),
            };
            let exact = exact_alpha_blur(&img, &wt, params.iterations);
            // docs/blur.md, "Alpha": R = 2 N - 1 roundings of 2^-F; 16-bit colour is also
            // premultiplied into 16 bits (half a level).
            let rounding = (2 * params.iterations - 1) as f64 * 2f64.powi(-f);
            let premultiply = if sixteen { 0.5 } else { 0.0 };
            let mut results = vec![(
                "cpu engine",
                blur_run(&cpu, &img, &params, &mut Timings::default()).unwrap(),
            )];
            for layout in LAYOUTS {
                let options = GpuOptions {
                    layout: Some(layout),
                    ..GpuOptions::DEFAULT
                };
                let got = blur_run(
                    gpu_engine,
                    &img,
                    &params.with_gpu(options),
                    &mut Timings::default(),
                )
                .unwrap();
                results.push((
                    if layout == Layout::Workgroup {
                        "gpu workgroup"
                    } else {
                        "gpu line"
                    },
                    got,
                ));
            }
            for (what, got) in &results {
                let out: Vec<f64> = match &got.samples {
                    Samples::U8(v) => v.iter().map(|&x| x as f64).collect(),
                    Samples::U16(v) => v.iter().map(|&x| x as f64).collect(),
                };
                let mut worst = 0f64;
                for (i, (px, want)) in out.chunks(4).zip(&exact).enumerate() {
                    if px[3] < 1.0 {
                        continue;
                    }
                    // The blur's own alpha before rounding is within half a level of px[3].
                    let a = want[3].max(px[3] - 0.5);
                    let bound = if sixteen {
                        0.5 + max * (premultiply + rounding) / a
                    } else {
                        1.0
                    };
                    for k in 0..3 {
                        let err = (px[k] - want[k]).abs();
                        worst = worst.max(err);
                        assert!(
                            err <= bound + 1e-9,
                            "{what} {} {:?} r={} x{}: pixel {i} lane {k}: {} vs exact {} (alpha {}, bound {bound})",
                            img.describe(), params.kind, params.radius, params.iterations, px[k], want[k], want[3]
                        );
                    }
                }
                assert!(worst > 0.0, "{what}: nothing compared");
            }
        }
    }
}

#[test]
fn images_converted_in_several_chunks_match_cpu() {
    // Images of fewer than 4 channels travel in the host's layout, which the row pass reads,
    // and where the last pass cannot write it (strips here) the GPU converts the packed
    // result back, in chunks whose bindings fit the largest binding: at 12 KiB,
    // 61x53 pixels take several chunks in every channel count and depth, and an odd count of
    // them leaves the last word of the host's layout partly filled.
    let g = shared_gpu();
    for channels in 1..=3u8 {
        for sixteen in [false, true] {
            let img = noise(61, 53, channels, sixteen, 40 + channels as u32);
            let params = BlurParams::new(Kind::Box, 2, 1).with_gpu(GpuOptions {
                max_binding: Some(12 << 10),
                ..GpuOptions::DEFAULT
            });
            let plan = BlurPlan::new(g, &img, &params).unwrap();
            // One pack pass a chunk beside the row and column pass a strip (the row pass reads
            // the host's layout).
            let chunks = plan.passes() - 2 * plan.strips as u64;
            assert!(chunks > 1, "{}: {chunks} chunks", img.describe());
            let got = blur_run(engine(), &img, &params, &mut Timings::default()).unwrap();
            assert_same(&got, &reference(&img, &params).unwrap(), "chunks");
        }
    }
}

#[test]
fn the_host_layout_read_and_written_by_the_passes_matches_cpu() {
    // 8- and 16-bit images of 1 to 3 channels: the first row pass reads the host's layout on
    // every kernel, and the workgroup kernels' last column pass writes it where each row and
    // each workgroup's lines (16 in the box's column passes, 4 for the gaussian; 2 for
    // gaussians with alpha or 16-bit samples, still whole words) start and end on a word: at
    // 64 columns for
    // every channel count, at 62 for two channels and for 16-bit samples, at 61 for none (a
    // pack pass converts those). Strips at a 12 KiB binding put row starts off the binding alignment;
    // there the pack pass writes the host's layout (a strip's row pass reads the rows around
    // it, which the strip before it would have written already).
    let g = shared_gpu();
    for (channels, sixteen) in (1..=3u8).flat_map(|c| [(c, false), (c, true)]) {
        for w in [64, 62, 61] {
            let img = noise(w, 45, channels, sixteen, w + channels as u32);
            let bytes = if sixteen { 2 } else { 1 };
            let writes = (w * channels as u32 * bytes).is_multiple_of(4);
            for (params, max_binding) in [
                (BlurParams::new(Kind::Box, 3, 1), None),
                (BlurParams::new(Kind::Box, 2, 2), None),
                (BlurParams::new(Kind::Box, 5, 1), Some(12 << 10)),
                (BlurParams::new(GAUSS1, 3, 1), None),
                (BlurParams::new(GAUSS1, 3, 1), Some(12 << 10)),
            ] {
                let want = reference(&img, &params).unwrap();
                for layout in LAYOUTS {
                    let options = GpuOptions {
                        max_binding,
                        layout: Some(layout),
                        ..GpuOptions::DEFAULT
                    };
                    let params = params.with_gpu(options);
                    let plan = BlurPlan::new(g, &img, &params).unwrap();
                    let blur = 2 * plan.strips as u64 * params.iterations as u64;
                    let direct = writes && layout == Layout::Workgroup && plan.strips == 1;
                    let what = format!(
                        "{} {:?} r={} x{} {layout:?} binding {max_binding:?}",
                        img.describe(),
                        params.kind,
                        params.radius,
                        params.iterations
                    );
                    assert_eq!(
                        plan.passes() == blur,
                        direct,
                        "{what}: {} passes",
                        plan.passes()
                    );
                    if max_binding.is_some() {
                        assert!(plan.strips > 1, "{what}: {} strips", plan.strips);
                    }
                    let got = blur_run(engine(), &img, &params, &mut Timings::default()).unwrap();
                    assert_same(&got, &want, &what);
                }
            }
        }
    }
}

#[test]
fn every_workgroup_shape_matches_cpu() {
    // Shapes `gpukit tune blur` tries (`Tunables`): results are bit-identical for every one,
    // including a single line a workgroup (which cannot write whole words of the host's
    // layout: RGB8 then takes the pack pass).
    // The box's positions a thread differ between the intermediates (RGBA8's and the 16-bit
    // images' 24-bit lanes, RGB8's 16-bit) in each shape.
    // The box's column passes of images in the host's layout take lines of their own, as do
    // the gaussian's passes where the intermediate is a word a channel; four positions a
    // thread read the host's layout four pixels at a time.
    let shapes = [
        ((1, 1), 8, (4, 1), (1, 1), 32),
        ((2, 16), 8, (2, 8), (2, 4), 16),
        ((16, 4), 4, (8, 2), (8, 8), 32),
        ((4, 2), 16, (4, 4), (4, 2), 8),
    ];
    for ((box_rows, box_rows_host), box_tpl, (box_ppt, box_ppt_narrow), gauss, gauss_tpl) in shapes
    {
        let tunables = Tunables {
            box_rows,
            box_rows_host,
            box_tpl,
            box_ppt,
            box_ppt_narrow,
            gauss_rows: gauss.0,
            gauss_rows_wide: gauss.1,
            gauss_tpl,
        };
        let options = GpuOptions {
            layout: Some(Layout::Workgroup),
            tunables: Some(tunables),
            ..GpuOptions::DEFAULT
        };
        for (channels, w, sixteen) in [
            (4, 37, false),
            (3, 36, false),
            (2, 38, false),
            (1, 41, false),
            (2, 38, true),
            (1, 41, true),
            (1, 42, true),
            (3, 36, true),
        ] {
            let img = noise(w, 19, channels, sixteen, box_rows + channels as u32);
            for params in [
                BlurParams::new(Kind::Box, 4, 1),
                BlurParams::new(GAUSS1, 3, 1),
            ] {
                let got = on_gpu(&img, params, options);
                let what = format!("{} {:?} {tunables}", img.describe(), params.kind);
                assert_same(&got, &reference(&img, &params).unwrap(), &what);
            }
        }
    }
}

#[test]
fn a_blurrer_reused_image_after_image_matches_the_reference() {
    // A batch's engine thread keeps one plan while the images' size and layout stay the same:
    // its staging is written, copied from and mapped again for each; another layout, or
    // another size, gets a new plan.
    let params = BlurParams::new(Kind::Box, 3, 1);
    let mut blur = Blurrer::new(engine(), params);
    for (i, (w, h, c, sixteen)) in [
        (33, 17, 3, false),
        (33, 17, 3, false),
        (33, 17, 3, false),
        (20, 9, 1, true),
        (20, 9, 1, true),
        (33, 17, 4, false),
        (33, 17, 4, false),
        (34, 17, 3, false),
        (33, 17, 3, false),
    ]
    .into_iter()
    .enumerate()
    {
        let img = noise(w, h, c, sixteen, 70 + i as u32);
        let got = blur.run(&img, &mut Timings::default()).unwrap();
        assert_same(&got, &reference(&img, &params).unwrap(), "reused plan");
    }
}

// The box's 24-bit lanes between its passes (and between iterations) at their largest
// values: a 16-bit image at r = 1 keeps 65535 * 2^8 = 2^24 - 256, premultiplied 8-bit RGBA
// colour 65025 * 2^8. A constant image blurs to itself (hand-computed: every window mean is
// the constant, and colour weighted by a constant alpha is the colour); blocks of 0 and the
// maximum, and noise, against the reference.
#[test]
fn the_boxs_24_bit_lanes_hold_the_largest_values() {
    let (w, h) = (37, 23);
    let n = (w * h) as usize;
    let constants = [
        Image::new_u16(w, h, 4, vec![65535; 4 * n]),
        Image::new_u16(w, h, 3, vec![65535; 3 * n]),
        Image::new_u16(w, h, 1, vec![65535; n]),
        // Translucent: the usual passes, not the all-opaque ones.
        Image::new_u8(w, h, 4, [255, 255, 255, 254].repeat(n)),
        Image::new_u8(w, h, 2, [255, 1].repeat(n)),
    ];
    for img in &constants {
        for params in [
            BlurParams::new(Kind::Box, 1, 1),
            BlurParams::new(Kind::Box, 5, 2),
        ] {
            for layout in LAYOUTS {
                let options = GpuOptions {
                    layout: Some(layout),
                    ..GpuOptions::DEFAULT
                };
                let got = on_gpu(img, params, options);
                assert_same(
                    &got,
                    img,
                    &format!("constant {} {layout:?}", img.describe()),
                );
            }
        }
    }
    let blocks = |channels: u8, sixteen: bool| {
        let max = if sixteen { 65535 } else { 255 };
        let v: Vec<u16> = (0..n * channels as usize)
            .map(|i| {
                let (p, c) = (i / channels as usize, i % channels as usize);
                let on = (p % w as usize / 5 + p / w as usize / 4 + c).is_multiple_of(2);
                if on || (c + 1 == channels as usize && channels.is_multiple_of(2)) {
                    max
                } else {
                    0
                }
            })
            .collect();
        match sixteen {
            true => Image::new_u16(w, h, channels, v),
            // One translucent pixel: the usual passes, not the all-opaque ones.
            false => {
                let mut v: Vec<u8> = v.iter().map(|&s| s as u8).collect();
                if channels == 4 {
                    v[3] = 254;
                }
                Image::new_u8(w, h, channels, v)
            }
        }
    };
    for img in [
        blocks(4, true),
        blocks(3, true),
        blocks(4, false),
        blocks(2, false),
        noise(w, h, 4, true, 11),
        noise(w, h, 4, false, 12),
    ] {
        for (r, iterations) in [(1, 1), (2, 3), (40, 1)] {
            check(&img, BlurParams::new(Kind::Box, r, iterations));
        }
    }
}

#[test]
fn radius_beyond_the_image_matches_cpu() {
    for (w, h) in [(1, 1), (7, 5), (5, 40)] {
        check(
            &noise(w, h, 4, false, 9),
            BlurParams::new(Kind::Box, 300, 1),
        );
        check(
            &noise(w, h, 2, true, 9),
            BlurParams::new(Kind::Box, 1000, 2),
        );
        check(
            &noise(w, h, 4, false, 9),
            BlurParams::new(Kind::Gaussian { sigma: 30.0 }, 90, 1),
        );
        // The largest gaussian radius fits lavapipe's 32 KiB of workgroup storage.
        check(
            &noise(w, h, 3, false, 9),
            BlurParams::new(Kind::Gaussian { sigma: 160.0 }, 500, 1),
        );
    }
}

#[test]
fn strips_give_the_unsplit_result() {
    // 40 RGBA8 columns: 480 bytes a row of intermediate; a 12 KiB binding forces strips, and
    // 160-byte rows put most strip starts off the 256-byte binding alignment.
    let g = shared_gpu();
    for layout in LAYOUTS {
        let options = GpuOptions {
            max_binding: Some(12 << 10),
            layout: Some(layout),
            ..GpuOptions::DEFAULT
        };
        for (img, params) in [
            (noise(40, 50, 4, false, 1), BlurParams::new(Kind::Box, 2, 1)),
            (noise(40, 50, 4, false, 2), BlurParams::new(Kind::Box, 3, 3)),
            (noise(40, 61, 3, true, 3), BlurParams::new(GAUSS1, 3, 2)),
        ] {
            let plan = BlurPlan::new(g, &img, &params.with_gpu(options)).unwrap();
            assert!(plan.strips > 1, "{} strips", plan.strips);
            let got = on_gpu(&img, params, options);
            assert_same(&got, &reference(&img, &params).unwrap(), "strips");
        }
    }
}

// On lavapipe the largest storage binding is 128 MiB, so the 137 MB intermediate of a
// 3000x3800 RGBA16 image (12 bytes a pixel) needs strips with the adapter's own limits.
#[test]
fn large_image_takes_strips_at_the_adapters_limit() {
    let g = shared_gpu();
    let img = noise(3000, 3800, 4, true, 4);
    let params = BlurParams::new(Kind::Box, 2, 1);
    let plan = BlurPlan::new(g, &img, &params.with_gpu(GpuOptions::DEFAULT)).unwrap();
    if g.limits.max_storage_buffer_binding_size < 3000 * 3800 * 12 {
        assert!(plan.strips > 1);
    }
    drop(plan);
    check(&img, params);
}

#[test]
fn two_d_dispatch_matches_cpu() {
    // 257 rows are 33 box workgroups of 8 lines: a 6x6 grid at a limit of 6. Gaussian
    // workgroups take 2 lines of RGBA8 (the wide intermediate): 129, an 11x12 grid at 12, and
    // 4 of RGB8: 65, 6x12. One line an invocation: 5 workgroups of 64 lines, a 3x2 grid at a
    // limit of 3. RGB8 72 wide: the row pass reads the host's layout and, on the workgroup
    // layout, the column pass writes it.
    for img in [noise(70, 257, 4, false, 6), noise(72, 257, 3, false, 7)] {
        two_d_dispatch_matches_cpu_on(&img);
    }
}

fn two_d_dispatch_matches_cpu_on(img: &Image) {
    for (params, layout, limit) in [
        (BlurParams::new(Kind::Box, 4, 1), Layout::Workgroup, 6),
        (BlurParams::new(GAUSS1, 3, 1), Layout::Workgroup, 12),
        (
            BlurParams::new(Kind::Box, 4, 1),
            Layout::LinePerInvocation,
            3,
        ),
        (BlurParams::new(GAUSS1, 3, 1), Layout::LinePerInvocation, 3),
    ] {
        let mut g = gpu();
        g.set_dispatch_limit(limit);
        let engine = Engine::Gpu(Box::new(g));
        let options = GpuOptions {
            layout: Some(layout),
            ..GpuOptions::DEFAULT
        };
        let got = blur_run(
            &engine,
            img,
            &params.with_gpu(options),
            &mut Timings::default(),
        )
        .unwrap();
        assert_same(&got, &reference(img, &params).unwrap(), "2-D dispatch");
    }
}

#[test]
fn frame_planes_recorded_between_buffers_match_cpu_on_the_workgroup_layout() {
    // The GPU frame stream's path (`Blurrer::record_between`): two 4:2:0 frames' planes at
    // word-padded offsets of one upload buffer, blurred in one batch into one read-back
    // buffer, with the workgroup kernels, whose column pass writes the host's layout where
    // the plane's width is a multiple of 4 (40 and 20; 36 and 18 take the pack pass; 8x3
    // with 4x2 chroma is smaller than a workgroup), with one iteration and two.
    let g = shared_gpu();
    for (luma, chroma, iterations) in [
        ((40, 20), (20, 10), 1),
        ((36, 22), (18, 11), 1),
        ((40, 20), (20, 10), 2),
        ((8, 3), (4, 2), 1),
    ] {
        for kind in [Kind::Box, GAUSS1] {
            let params = BlurParams::new(kind, 2, iterations).with_gpu(GpuOptions {
                layout: Some(Layout::Workgroup),
                ..GpuOptions::DEFAULT
            });
            let planes: Vec<Image> = [luma, chroma, chroma, luma, chroma, chroma]
                .iter()
                .enumerate()
                .map(|(i, &(w, h))| noise(w, h, 1, false, 500 + i as u32))
                .collect();
            let mut at = Vec::new();
            let mut total = 0;
            for p in &planes {
                at.push(total);
                total += p.pixels().next_multiple_of(4);
            }
            let mut bytes = vec![0xaa_u8; total];
            for (p, &a) in planes.iter().zip(&at) {
                let Samples::U8(s) = &p.samples else {
                    unreachable!("8-bit planes")
                };
                bytes[a..a + s.len()].copy_from_slice(s);
            }
            let mut up = g.upload_buffer("test planes", total);
            up.write(g, &bytes).unwrap();
            let down = g.download_buffer("test planes out", total);
            let mut luma_blur = Blurrer::new(engine(), params);
            let mut chroma_blur = Blurrer::new(engine(), params);
            let mut batch = g.batch(None);
            for (i, p) in planes.iter().enumerate() {
                let blur = if i % 3 == 0 {
                    &mut luma_blur
                } else {
                    &mut chroma_blur
                };
                let (src, dst) = ((up.buffer(), at[i] as u64), (down.buffer(), at[i] as u64));
                blur.record_between(p, &mut batch, src, dst, &mut Timings::default())
                    .unwrap();
            }
            batch.submit().unwrap();
            let out = down.read(g, |b| b.to_vec()).unwrap();
            for (i, p) in planes.iter().enumerate() {
                let want = reference(p, &params).unwrap();
                let Samples::U8(s) = &want.samples else {
                    unreachable!("8-bit planes")
                };
                let what = format!("plane {i}, {} {kind:?} x{iterations}", p.describe());
                assert!(out[at[i]..at[i] + s.len()] == s[..], "{what}: differs");
            }
        }
    }
}

// ---- golden files and the command line -------------------------------------------------

fn fixture(name: &str) -> String {
    format!("{}/fixtures/{name}", env!("CARGO_MANIFEST_DIR"))
}

/// Runs the CLI blur on a fixture and compares the decoded output with a golden file.
#[track_caller]
fn golden(input: &str, args: &[&str], golden: &str) {
    let dir = tempdir();
    let out = dir.path().join("out.png");
    let mut full = vec!["blur", input];
    full.extend_from_slice(args);
    full.extend_from_slice(&["-o", out.to_str().unwrap()]);
    run(&full).code(0);
    let got = image::load(&out).unwrap();
    let want = image::load(Path::new(&fixture(golden))).unwrap();
    assert_same(&got, &want, golden);
}

#[test]
fn goldens() {
    golden(
        &fixture("hopper.png"),
        &["-r", "15"],
        "golden/hopper-box-r15.png",
    );
    golden(
        &fixture("pngsuite/basn6a08.png"),
        &["--kind", "gaussian", "--sigma", "2"],
        "golden/basn6a08-gauss-s2.png",
    );
    golden(
        &fixture("pngsuite/basn2c16.png"),
        &["-r", "4", "--iterations", "3"],
        "golden/basn2c16-box-r4-x3.png",
    );
    golden(
        &fixture("pngsuite/basn4a16.png"),
        &["-r", "1"],
        "golden/basn4a16-box-r1.png",
    );
}

fn pngsuite(corrupt: bool) -> Vec<String> {
    let mut files: Vec<String> = std::fs::read_dir(fixture("pngsuite"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".png") && n.starts_with('x') == corrupt)
        .map(|n| fixture(&format!("pngsuite/{n}")))
        .collect();
    files.sort();
    files
}

#[test]
fn every_valid_pngsuite_file_blurs() {
    let dir = tempdir();
    let files = pngsuite(false);
    assert!(files.len() > 150);
    let mut args = vec!["blur", "-r", "2", "--out-dir", "out"];
    args.extend(files.iter().map(String::as_str));
    run_in(Some(dir.path()), &args).code(0);
    for f in &files {
        let name = Path::new(f).file_name().unwrap();
        let out = image::load(&dir.path().join("out").join(name)).unwrap();
        let input = image::load(Path::new(f)).unwrap();
        assert_eq!(
            (out.width, out.height, out.channels),
            (input.width, input.height, input.channels),
            "{f}"
        );
        assert_eq!(out.bit_depth(), input.bit_depth(), "{f}");
    }
}

#[test]
fn corrupt_pngsuite_files_fail_one_line_each_and_write_nothing() {
    let dir = tempdir();
    let files = pngsuite(true);
    assert!(files.len() >= 10);
    // One good file among them: it is still written.
    let good = fixture("pngsuite/basn0g08.png");
    let mut args = vec!["blur", "--out-dir", "out"];
    args.extend(files.iter().map(String::as_str));
    args.push(&good);
    let r = run_in(Some(dir.path()), &args);
    r.code(1);
    let lines: Vec<&str> = r.stderr.lines().collect();
    // One line per corrupt file, then the summary warning.
    assert_eq!(lines.len(), files.len() + 1, "{}", r.stderr);
    for (line, f) in lines.iter().zip(&files) {
        assert!(line.starts_with(&format!("gpukit: {f}: ")), "{line}");
    }
    let written: Vec<_> = std::fs::read_dir(dir.path().join("out"))
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(written, vec![std::ffi::OsString::from("basn0g08.png")]);
}

#[test]
fn output_may_be_the_input_itself() {
    let dir = tempdir();
    let path = dir.path().join("in.png");
    std::fs::copy(fixture("pngsuite/basn2c08.png"), &path).unwrap();
    let before = image::load(&path).unwrap();
    run(&[
        "blur",
        path.to_str().unwrap(),
        "-r",
        "1",
        "-o",
        path.to_str().unwrap(),
    ])
    .code(0);
    let after = image::load(&path).unwrap();
    let want = reference(&before, &BlurParams::new(Kind::Box, 1, 1)).unwrap();
    assert_same(&after, &want, "in place");
    assert_eq!(
        std::fs::read_dir(dir.path()).unwrap().count(),
        1,
        "no temporary file left"
    );
}

#[test]
fn bad_usage_exits_2_with_one_line() {
    let dir = tempdir();
    let run = |args: &[&str]| run_in(Some(dir.path()), args);
    let input = fixture("pngsuite/basn0g08.png");
    let i = input.as_str();
    run(&["blur", i, "-r", "-3", "-o", "x.png"])
        .code(2)
        .one_error_line("'-3'");
    run(&["blur", i, "-r", "three", "-o", "x.png"])
        .code(2)
        .one_error_line("'three'");
    run(&[
        "blur", i, "--kind", "gaussian", "--sigma", "0", "-o", "x.png",
    ])
    .code(2)
    .one_error_line("positive");
    run(&[
        "blur", i, "--kind", "gaussian", "--sigma", "-1", "-o", "x.png",
    ])
    .code(2)
    .one_error_line("positive");
    run(&["blur", i, "--iterations", "0", "-o", "x.png"])
        .code(2)
        .one_error_line("--iterations");
    run(&["blur", "-o", "x.png"]).code(2).one_error_line("IN");
    run(&["blur", i, i, "-o", "x.png"])
        .code(2)
        .one_error_line("use --out-dir");
    run(&["blur", i]).code(2).one_error_line("--output");
    run(&["blur", i, "-o", "x.pdfx"])
        .code(2)
        .one_error_line("no encoder for .pdfx");
    run(&["blur", i, "--sigma", "2", "-o", "x.png"])
        .code(2)
        .one_error_line("--sigma applies to --kind gaussian");
    run(&["blur", i, "-r", "40000", "-o", "x.png"]).code(0);
    let sixteen = fixture("pngsuite/basn0g16.png");
    // The limit depends on the file's depth, so it fails that file (exit 1), not the usage.
    run(&["blur", &sixteen, "-r", "40000", "-o", "x.png"])
        .code(1)
        .one_error_line("too large for 16-bit");
}

// Fixed limits are usage errors found before any file is read (issue 12, item 10): the input
// here does not exist, so reading it would have failed with exit 1 instead.
#[test]
fn fixed_limits_are_usage_errors_before_any_file_is_read() {
    let dir = tempdir();
    let missing = dir.path().join("missing.png");
    let out = dir.path().join("out.png");
    let (i, o) = (missing.to_str().unwrap(), out.to_str().unwrap());
    run(&["blur", i, "--kind", "gaussian", "--sigma", "167", "-o", o])
        .code(2)
        .one_error_line("gaussian radius 501 is too large");
    run(&["blur", i, "--kind", "gaussian", "-r", "501", "-o", o])
        .code(2)
        .one_error_line("gaussian radius 501 is too large");
    run(&["blur", i, "-r", "8388608", "-o", o])
        .code(2)
        .one_error_line("radius 8388608 is too large for any image");
    assert!(!out.exists());
}

// Folders stand for their images in blur as in histogram (the expansion is shared).
#[test]
fn a_folder_blurs_each_of_its_images() {
    let dir = tempdir();
    let (inp, out) = (dir.path().join("in"), dir.path().join("out"));
    std::fs::create_dir(&inp).unwrap();
    std::fs::write(inp.join("notes.txt"), b"not an image").unwrap();
    let imgs = [
        ("a.png", noise(9, 7, 4, false, 31)),
        ("b.png", noise(5, 11, 1, false, 32)),
    ];
    for (name, img) in &imgs {
        image::save(&inp.join(name), img.clone()).unwrap();
    }
    let (i, o) = (inp.to_str().unwrap(), out.to_str().unwrap());
    run(&["blur", i, "-r", "2", "--out-dir", o]).code(0);
    for (name, img) in &imgs {
        let got = image::load(&out.join(name)).unwrap();
        let want = reference(img, &BlurParams::new(Kind::Box, 2, 1)).unwrap();
        assert_same(&got, &want, name);
    }
    assert!(!out.join("notes.txt").exists());
}

// More passes than one timed submission holds (two per iteration) once failed with wgpu's
// timestamp-query limit and grew memory with the count (issue 12, item 9).
#[test]
fn iterations_beyond_one_timed_submission_match_the_reference() {
    let img = noise(6, 5, 4, false, 21);
    let params = BlurParams::new(Kind::Box, 1, 1100);
    let mut timings = Timings::default();
    let got = blur_run(engine(), &img, &params, &mut timings).unwrap();
    assert_same(&got, &reference(&img, &params).unwrap(), "1100 iterations");
    let dir = tempdir();
    let input = dir.path().join("in.png");
    let out = dir.path().join("out.png");
    image::save(&input, img).unwrap();
    let (i, o) = (input.to_str().unwrap(), out.to_str().unwrap());
    // On the adapter, not the native CPU engine: it is the timestamp queries that overflowed.
    run(&[
        "--backend",
        "vulkan",
        "blur",
        i,
        "--iterations",
        "1025",
        "--timings",
        "-o",
        o,
    ])
    .code(0);
    assert!(out.exists());
}

#[test]
fn bad_files_exit_1_and_leave_nothing() {
    let dir = tempdir();
    let d = dir.path();
    std::fs::write(d.join("empty.png"), b"").unwrap();
    let full = std::fs::read(fixture("hopper.png")).unwrap();
    std::fs::write(d.join("truncated.png"), &full[..full.len() / 2]).unwrap();
    std::fs::write(d.join("text.png"), b"this is not an image at all").unwrap();
    std::fs::write(d.join("afile"), b"x").unwrap();
    for (input, needle) in [
        ("missing.png", "missing.png: cannot read"),
        ("empty.png", "empty.png: empty file"),
        ("truncated.png", "truncated.png: truncated PNG"),
        ("text.png", "text.png: not an image gpukit can read"),
    ] {
        run_in(Some(d), &["blur", input, "-o", "out.png"])
            .code(1)
            .one_error_line(needle);
    }
    run_in(Some(d), &["blur", "missing.png", "--out-dir", "afile"])
        .code(2)
        .one_error_line("afile: --out-dir names a file");
    run_in(
        Some(d),
        &["blur", &fixture("pngsuite/basn6a08.png"), "-o", "out.jpg"],
    )
    .code(1)
    .one_error_line("JPEG stores neither alpha");
    run_in(
        Some(d),
        &["blur", &fixture("hopper.png"), "-o", "no/such/dir/out.png"],
    )
    .code(1)
    .one_error_line("cannot write here");
    let mut left: Vec<String> = std::fs::read_dir(d)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    left.sort();
    assert_eq!(left, ["afile", "empty.png", "text.png", "truncated.png"]);
}

#[test]
fn other_formats_keep_their_layout() {
    let dir = tempdir();
    let input = fixture("hopper.png");
    for ext in ["tif", "bmp", "webp", "qoi", "pnm", "tga"] {
        let out = dir.path().join(format!("out.{ext}"));
        run(&["blur", &input, "-r", "2", "-o", out.to_str().unwrap()]).code(0);
        let img = image::load(&out).unwrap();
        let want = reference(
            &image::load(Path::new(&input)).unwrap(),
            &BlurParams::new(Kind::Box, 2, 1),
        )
        .unwrap();
        // These formats are lossless: the pixels are the blur's.
        assert_same(&img, &want, ext);
    }
}

#[test]
fn timings_name_the_phases() {
    let dir = tempdir();
    let out = dir.path().join("o.png");
    // The GPU's phases: on the adapter, not the native CPU engine (lavapipe here). Level 6:
    // the PNG is encoded on the cores, so the blurred pixels come back (a download).
    let r = run(&[
        "--backend",
        "vulkan",
        "blur",
        &fixture("hopper.png"),
        "-r",
        "3",
        "--timings",
        "--compression",
        "6",
        "-o",
        out.to_str().unwrap(),
    ]);
    r.code(0);
    for phase in [
        "device", "decode", "upload", "compute", "download", "encode", "sum", "wall",
    ] {
        assert!(
            r.stderr.contains(&format!("timing: {phase}")),
            "{phase}: {}",
            r.stderr
        );
    }
    // The native CPU engine, named or chosen (a small job), opens no device and copies
    // nothing: no such phases.
    for backend in [&["--backend", "cpu"][..], &[]] {
        let mut args = backend.to_vec();
        let hopper = fixture("hopper.png");
        args.extend(["blur", &hopper, "-r", "3", "--timings"]);
        args.extend(["-o", out.to_str().unwrap()]);
        let r = run(&args);
        r.code(0);
        assert!(r.stderr.contains("engine: native CPU"), "{}", r.stderr);
        for phase in ["decode", "compute", "encode", "sum", "wall"] {
            assert!(r.stderr.contains(&format!("timing: {phase}")), "{phase}");
        }
        for phase in ["instance", "device", "upload", "download"] {
            assert!(!r.stderr.contains(&format!("timing: {phase}")), "{phase}");
        }
    }
}

#[test]
fn a_gif_output_is_written_with_a_warning_that_its_colours_are_reduced() {
    let dir = tempdir();
    let warning = "GIF holds at most 256 colours";
    let blur_to = |out: &Path| {
        let (hopper, out) = (fixture("hopper.png"), out.to_str().unwrap());
        run(&["blur", &hopper, "-r", "2", "-o", out])
    };
    let gif = dir.path().join("o.gif");
    let r = blur_to(&gif);
    r.code(0);
    assert!(r.stderr.contains(warning), "{}", r.stderr);
    // Reduced, not exact: near the blur, within a palette's error.
    let img = image::load(Path::new(&fixture("hopper.png"))).unwrap();
    let want = reference(&img, &BlurParams::new(Kind::Box, 2, 1)).unwrap();
    let got = image::load(&gif).unwrap();
    assert_eq!((got.width, got.height), (want.width, want.height));
    let (Samples::U8(w), Samples::U8(g)) = (&want.samples, &got.samples) else {
        panic!("8-bit images");
    };
    let (wc, gc) = (usize::from(want.channels), usize::from(got.channels));
    let pixels = w.len() / wc;
    let (mut total, mut exact) = (0u64, 0usize);
    for p in 0..pixels {
        for c in 0..3 {
            let d = w[p * wc + c].abs_diff(g[p * gc + c]);
            total += u64::from(d);
            exact += usize::from(d == 0);
        }
    }
    let mean = total as f64 / (3 * pixels) as f64;
    assert!(mean < 8.0, "mean error {mean}");
    assert!(
        exact < 3 * pixels,
        "a palette of 256 cannot hold every colour exactly"
    );
    // Lossless formats say nothing.
    let r = blur_to(&dir.path().join("o.webp"));
    r.code(0);
    assert!(!r.stderr.contains(warning), "{}", r.stderr);
}

#[test]
fn one_line_an_invocation_stays_within_llvmpipes_loop_limit() {
    // Mesa's llvmpipe ends an invocation's loops after 65535 iterations, nested loops
    // counted together: on one line per invocation, a gaussian line of 2100 positions at
    // r = 15 (31 taps each), along the rows and along the columns, and a box line of 70,000
    // positions, were cut short (wrong outputs past the 65535th iteration). Segments keep
    // every invocation within half of it; a box whose first window alone would pass that is
    // refused, with the engine that takes it named.
    let options = GpuOptions {
        layout: Some(Layout::LinePerInvocation),
        ..GpuOptions::DEFAULT
    };
    for (img, params) in [
        (
            noise(2100, 2, 3, false, 11),
            BlurParams::new(Kind::Gaussian { sigma: 5.0 }, 15, 1),
        ),
        (
            noise(2, 2100, 4, false, 12),
            BlurParams::new(Kind::Gaussian { sigma: 5.0 }, 15, 1),
        ),
        (
            noise(70_000, 1, 1, false, 13),
            BlurParams::new(Kind::Box, 2, 1),
        ),
    ] {
        let what = format!("{} {:?}", img.describe(), params.kind);
        assert_same(
            &on_gpu(&img, params, options),
            &reference(&img, &params).unwrap(),
            &what,
        );
    }
    let wide = noise(40_000, 1, 1, false, 15);
    let err = blur_run(
        engine(),
        &wide,
        &BlurParams::new(Kind::Box, 20_000, 1).with_gpu(options),
        &mut Timings::default(),
    )
    .unwrap_err();
    assert!(err.to_string().contains("--backend cpu"), "{err:#}");
}
