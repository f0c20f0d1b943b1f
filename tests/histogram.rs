//! `histogram`: the GPU against the CPU reference, exactly, over layouts, sizes around the
//! tile and dispatch limits, bin counts, segments and bin ranges; the sum; the JSON
//! document; the plot against its CPU mirror and a golden image; bad inputs.

use std::path::{Path, PathBuf};

use gpukit::gpu::{Gpu, Timings};
use gpukit::io::image::{self, Image};
use gpukit::ops::histogram::{
    channel_stats, plot_cpu, reference as histogram_cpu, Channels, Histogram, HistogramGpu,
};

use crate::util::{dump_mismatch, gpu, random_image, run, run_in, shared_gpu, tempdir};

/// Pseudo-random samples of every value, 0 and the top value included.
fn image(width: u32, height: u32, channels: u8, bits: u32, seed: u32) -> Image {
    let mut img = random_image(width, height, channels, bits, seed);
    if let image::Samples::U16(v) = &mut img.samples {
        // The extremes, where bin arithmetic is most likely to go wrong.
        for (i, x) in [0u16, 1, 65534, 65535].into_iter().enumerate() {
            if i < v.len() {
                v[i] = x;
            }
        }
    }
    img
}

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Writes both results next to the test binary's temp dir and fails, so they can be diffed.
#[track_caller]
fn assert_same(gpu: &Histogram, cpu: &Histogram, what: &str) {
    if gpu != cpu {
        let dir = dump_mismatch(what, "txt", gpu, cpu, |p, h| {
            std::fs::write(p, format!("{h:?}")).unwrap()
        });
        panic!(
            "{what}: GPU and CPU differ; both written to {}",
            dir.display()
        );
    }
    let n = cpu.channels.count() as usize;
    for ch in 0..n {
        let sum: u64 = gpu.channel(ch).iter().sum();
        assert_eq!(sum, gpu.pixels, "{what}: channel {ch} does not add up");
    }
}

/// The GPU histogram of `img` against the CPU reference.
#[track_caller]
fn check(hg: &mut HistogramGpu, img: &Image, channels: Channels, bins: u32) {
    let what = format!(
        "{}x{}x{} {}-bit {:?} {bins} bins",
        img.width,
        img.height,
        img.channels,
        img.bit_depth(),
        channels
    );
    let gpu = hg
        .histogram(img, channels, &mut Timings::default())
        .unwrap_or_else(|e| panic!("{what}: {e:#}"));
    assert_same(&gpu, &histogram_cpu(img, channels, bins), &what);
}

#[test]
fn every_layout_and_size_matches_the_cpu() {
    let g = shared_gpu();
    for bins in [1, 7, 256] {
        let mut hg = HistogramGpu::new(g, bins);
        for channels in 1..=4u8 {
            for bits in [8, 16] {
                for (w, h) in [(1, 1), (3, 5), (7, 9), (17, 13), (31, 33)] {
                    let img = image(w, h, channels, bits, w * h + channels as u32);
                    for alpha in [false, true] {
                        check(&mut hg, &img, Channels::of(channels, alpha), bins);
                    }
                }
            }
        }
    }
}

#[test]
fn sizes_around_the_tile_and_many_tiles_match() {
    let g = shared_gpu();
    let mut hg = HistogramGpu::new(g, 256);
    // One tile is chunk_wg_size units; an RGBA8 unit is 4 pixels.
    let tile = hg.tuning.tunables.chunk_wg_size * 4;
    for w in [tile - 1, tile, tile + 1, 2 * tile + 3] {
        check(&mut hg, &image(w, 1, 4, 8, w), Channels::of(4, false), 256);
    }
    // 40 tiles adding into one image's counts; 4097 wide.
    check(
        &mut hg,
        &image(400, 400, 4, 8, 9),
        Channels::of(4, false),
        256,
    );
    check(
        &mut hg,
        &image(4097, 3, 4, 8, 10),
        Channels::of(4, true),
        256,
    );
    // RGB8: 16 pixels in 3 words, so tiles end mid-word.
    check(
        &mut hg,
        &image(tile / 3 + 1, 7, 3, 8, 5),
        Channels::of(3, false),
        256,
    );
}

#[test]
fn many_tiles_and_2d_dispatch_match() {
    let mut g = gpu();
    // 40 workgroups per dimension: the big passes here need a 2-D grid.
    g.set_dispatch_limit(40);
    let mut hg = HistogramGpu::new(&g, 256);
    // 64-invocation tiles, as many as it takes: 530 x 531 RGBA8 is 1100 tiles, all adding
    // into the same counts.
    hg.tuning.tunables.chunk_wg_size = 64;
    hg.tuning.tunables.target_tiles = 1 << 20;
    check(
        &mut hg,
        &image(530, 531, 4, 8, 3),
        Channels::of(4, true),
        256,
    );
    check(
        &mut hg,
        &image(57, 61, 1, 16, 4),
        Channels::of(1, false),
        256,
    );
}

#[test]
fn sixteen_bit_counters_stop_short_of_overflow() {
    let g = shared_gpu();
    let mut hg = HistogramGpu::new(g, 256);
    // One copy of 64 invocations, 16 gray pixels a unit: a tile of 16-bit counters holds at
    // most 63 units an invocation (64512 pixels), so 300 x 300 pixels of one value, which
    // one tile would count 90000 times in one counter, must be cut into two tiles.
    hg.tuning.tunables.chunk_wg_size = 64;
    hg.tuning.tunables.max_copies = 1;
    hg.tuning.tunables.packed = true;
    hg.tuning.tunables.target_tiles = 1;
    let img = Image::new_u8(300, 300, 1, vec![77; 90000]);
    let got = hg
        .histogram(&img, Channels::of(1, false), &mut Timings::default())
        .unwrap();
    assert_eq!(got.counts[77], 90000);
    assert_same(
        &got,
        &histogram_cpu(&img, Channels::of(1, false), 256),
        "one value",
    );
    // Bins 76 and 77 share a word: 90000 each, neither half may carry into the other.
    let img = Image::new_u8(600, 300, 1, [76u8, 77].repeat(90000));
    let got = hg
        .histogram(&img, Channels::of(1, false), &mut Timings::default())
        .unwrap();
    assert_eq!((got.counts[76], got.counts[77]), (90000, 90000));
    // Colour with alpha, every channel in one bin: 5 counters a pixel.
    let img = Image::new_u8(300, 300, 4, [9u8, 9, 9, 9].repeat(90000));
    let got = hg
        .histogram(&img, Channels::of(4, true), &mut Timings::default())
        .unwrap();
    assert_same(
        &got,
        &histogram_cpu(&img, Channels::of(4, true), 256),
        "one grey",
    );
}

#[test]
fn sixteen_bit_bins_up_to_65536_match() {
    let g = shared_gpu();
    for bins in [1000, 4097, 65536] {
        let mut hg = HistogramGpu::new(g, bins);
        for (channels, alpha) in [(4, true), (3, false), (1, false), (2, true)] {
            let img = image(45, 37, channels, 16, bins + channels as u32);
            check(&mut hg, &img, Channels::of(channels, alpha), bins);
        }
    }
}

#[test]
fn top_and_bottom_values_land_in_the_end_bins() {
    // 65535 * 65536 is the largest product of the bin formula: it must not overflow.
    let g = shared_gpu();
    let mut hg = HistogramGpu::new(g, 65536);
    let img = Image::new_u16(4, 1, 1, vec![0, 1, 65534, 65535]);
    let h = hg
        .histogram(&img, Channels::of(1, false), &mut Timings::default())
        .unwrap();
    let hit: Vec<usize> = (0..65536).filter(|&b| h.counts[b] > 0).collect();
    assert_eq!(hit, [0, 1, 65534, 65535]);
}

#[test]
fn one_colour_image_counts_every_pixel_in_one_bin() {
    let g = shared_gpu();
    let mut hg = HistogramGpu::new(g, 256);
    let (w, h) = (300u32, 200u32);
    let img = Image::new_u8(w, h, 4, [200u8, 120, 40, 255].repeat((w * h) as usize));
    let got = hg
        .histogram(&img, Channels::of(4, true), &mut Timings::default())
        .unwrap();
    assert_same(
        &got,
        &histogram_cpu(&img, Channels::of(4, true), 256),
        "one colour",
    );
    // Luminance by hand: (6966 * 200 + 23436 * 120 + 2366 * 40 + 16384) >> 15 = 131.
    for (ch, bin) in [(0, 200), (1, 120), (2, 40), (3, 131), (4, 255)] {
        assert_eq!(got.channel(ch)[bin], (w * h) as u64, "channel {ch}");
    }
}

#[test]
fn segments_and_bin_ranges_match() {
    let g = shared_gpu();
    let mut hg = HistogramGpu::new(g, 256);
    // 4 KiB segments: an image of many, the last one short and not a whole word.
    hg.tuning.segment_bytes = 4096;
    for (channels, bits) in [(3, 8), (3, 16), (4, 8), (1, 8), (2, 16)] {
        let img = image(101, 23, channels, bits, 7 + channels as u32);
        check(&mut hg, &img, Channels::of(channels, true), 256);
    }
    // 2 KiB of workgroup storage: 4 x 256 bins split into ranges.
    let mut hg = HistogramGpu::new(g, 256);
    hg.tuning.workgroup_bytes = 2048;
    check(&mut hg, &image(77, 19, 4, 8, 1), Channels::of(4, true), 256);
    check(
        &mut hg,
        &image(77, 19, 1, 8, 2),
        Channels::of(1, false),
        256,
    );
}

#[test]
fn sum_over_images_of_mixed_layouts_matches() {
    let g = shared_gpu();
    let mut hg = HistogramGpu::new(g, 64);
    let images = [
        image(13, 7, 1, 8, 1),
        image(20, 20, 4, 16, 2),
        image(5, 9, 3, 8, 3),
        image(13, 7, 1, 8, 4),
        image(8, 8, 2, 8, 5),
    ];
    let channels = images
        .iter()
        .map(|i| Channels::of(i.channels, true))
        .reduce(Channels::union)
        .unwrap();
    assert_eq!(
        channels,
        Channels {
            color: true,
            alpha: true
        }
    );
    hg.start_total(channels);
    let mut want = Histogram::zeros(channels, 64);
    for img in &images {
        let cpu = histogram_cpu(img, channels, 64);
        let gpu = hg
            .histogram(img, channels, &mut Timings::default())
            .unwrap();
        assert_same(&gpu, &cpu, "one of the sum");
        want.add(&cpu);
    }
    assert_same(&hg.total().unwrap(), &want, "sum");
}

fn plot_of(g: &Gpu, img: &Image, channels: Channels, bins: u32, w: u32, h: u32) -> Image {
    let mut hg = HistogramGpu::new(g, bins);
    hg.start_total(channels);
    hg.histogram(img, channels, &mut Timings::default())
        .unwrap();
    let gpu = hg.plot_total(w, h).unwrap();
    let cpu = plot_cpu(&hg.total().unwrap(), w, h);
    if gpu != cpu {
        let dir = std::env::temp_dir();
        image::save(&dir.join("histogram-plot-gpu.png"), gpu.clone()).unwrap();
        image::save(&dir.join("histogram-plot-cpu.png"), cpu.clone()).unwrap();
        panic!("plot differs from its CPU mirror; see histogram-plot-*.png in {dir:?}");
    }
    gpu
}

#[test]
fn plot_matches_its_cpu_mirror() {
    let g = shared_gpu();
    let rgb = image(64, 48, 3, 8, 11);
    // Colour: more bins than columns, fewer, and as many.
    for (bins, w) in [(256, 100), (64, 300), (256, 256)] {
        plot_of(g, &rgb, Channels::of(3, false), bins, w, 90);
    }
    // Gray alone (one panel) and gray with alpha (two).
    let ga = image(30, 30, 2, 16, 12);
    plot_of(g, &ga, Channels::of(2, false), 1000, 200, 64);
    plot_of(g, &ga, Channels::of(2, true), 1000, 200, 65);
    // Every pixel one colour: one full-height bar per channel.
    let flat = Image::new_u8(10, 10, 3, [10u8, 128, 250].repeat(100));
    let p = plot_of(g, &flat, Channels::of(3, false), 256, 256, 64);
    let image::Samples::U8(px) = &p.samples else {
        panic!("the plot is 8-bit")
    };
    // Column 10, top row: red's bar reaches it, nothing else does.
    assert_eq!(&px[10 * 3..10 * 3 + 3], &[230, 60, 60]);
}

#[test]
fn plot_matches_the_golden_image() {
    let dir = tempdir();
    let out = dir.path().join("plot.png");
    let input = root().join("fixtures/pngsuite/basn2c08.png");
    run(&[
        "histogram",
        input.to_str().unwrap(),
        "--plot",
        out.to_str().unwrap(),
        "--plot-size",
        "256x128",
    ])
    .code(0);
    let got = image::load(&out).unwrap();
    let want = image::load(&root().join("fixtures/histogram/plot-basn2c08.png")).unwrap();
    assert!(
        got == want,
        "{} differs from the golden plot",
        out.display()
    );
}

#[test]
fn json_document_has_its_documented_shape_and_values() {
    let files = ["basn2c08.png", "basn0g16.png", "basn6a08.png"];
    let paths: Vec<String> = files
        .iter()
        .map(|f| {
            root()
                .join("fixtures/pngsuite")
                .join(f)
                .display()
                .to_string()
        })
        .collect();
    let mut args = vec![
        "histogram",
        "--bins",
        "16",
        "--alpha",
        "--sum",
        "--json",
        "-",
    ];
    args.extend(paths.iter().map(String::as_str));
    let r = run(&args);
    r.code(0)
        .batch_errors(&[], &format!("{} done, 0 skipped, 0 failed", paths.len()));
    let doc: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
    assert_eq!(doc["gpukit_version"], env!("CARGO_PKG_VERSION"));
    assert_eq!(doc["bins"], 16);
    assert_eq!(doc["alpha"], true);
    let inputs = doc["inputs"].as_array().unwrap();
    assert_eq!(inputs.len(), 3);
    // The sum counts every input as colour with alpha, since some have colour and alpha.
    let channels = Channels {
        color: true,
        alpha: true,
    };
    let mut want_sum = Histogram::zeros(channels, 16);
    for (input, path) in inputs.iter().zip(&paths) {
        let img = image::load(Path::new(path)).unwrap();
        assert_eq!(input["path"], path.as_str());
        assert_eq!(input["width"], img.width);
        assert_eq!(input["height"], img.height);
        assert_eq!(input["bit_depth"], img.bit_depth());
        assert_eq!(input["pixels"], img.pixels() as u64);
        assert_eq!(input["bins"], 16);
        let want = histogram_cpu(&img, channels, 16);
        want_sum.add(&want);
        check_channels(&input["channels"], &want);
    }
    assert_eq!(inputs[0]["layout"], "RGB");
    assert_eq!(inputs[1]["layout"], "gray");
    assert_eq!(inputs[2]["layout"], "RGBA");
    let sum = &doc["sum"];
    assert_eq!(sum["inputs"], 3);
    assert_eq!(sum["pixels"], want_sum.pixels);
    assert_eq!(sum["bins"], 16);
    check_channels(&sum["channels"], &want_sum);

    // Without --sum: each input its own channels, and "sum" is null.
    let r = run(&["histogram", "--json", "-", &paths[1]]);
    r.code(0);
    let doc: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
    assert!(doc["sum"].is_null());
    let names: Vec<&str> = doc["inputs"][0]["channels"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["gray"]);
}

/// Each channel object: name, counts equal to `want`'s, and statistics of those counts.
#[track_caller]
fn check_channels(doc: &serde_json::Value, want: &Histogram) {
    let chans = doc.as_array().unwrap();
    let names = want.channels.names();
    assert_eq!(chans.len(), names.len());
    for (c, (ch, name)) in chans.iter().zip(names).enumerate() {
        let keys: Vec<&str> = ch.as_object().unwrap().keys().map(String::as_str).collect();
        let mut sorted = keys.clone();
        sorted.sort();
        assert_eq!(
            sorted,
            ["counts", "max", "mean", "median", "min", "name", "p1", "p99"]
        );
        assert_eq!(ch["name"], name);
        let counts: Vec<u64> = serde_json::from_value(ch["counts"].clone()).unwrap();
        assert_eq!(counts, want.channel(c), "{name}");
        let stats = serde_json::to_value(channel_stats(&counts)).unwrap();
        for k in ["min", "max", "mean", "median", "p1", "p99"] {
            assert_eq!(ch[k], stats[k], "{name} {k}");
        }
    }
}

#[test]
fn human_summary_by_default() {
    let input = root().join("fixtures/pngsuite/basn0g08.png");
    let r = run(&["histogram", input.to_str().unwrap()]);
    r.code(0);
    let lines: Vec<&str> = r.stdout.lines().collect();
    assert_eq!(lines.len(), 2, "{}", r.stdout);
    assert!(lines[0].ends_with("basn0g08.png: 32x32 gray 8-bit, 256 bins"));
    let cpu = histogram_cpu(&image::load(&input).unwrap(), Channels::of(1, false), 256);
    let s = channel_stats(&cpu.channel(0));
    let want = format!(
        "  gray       min {:>5}  max {:>5}  mean {:>9.2}  median {:>5}  p1 {:>5}  p99 {:>5}",
        s.min.unwrap(),
        s.max.unwrap(),
        s.mean.unwrap(),
        s.median.unwrap(),
        s.p1.unwrap(),
        s.p99.unwrap()
    );
    assert_eq!(lines[1], want);
}

#[test]
fn every_valid_pngsuite_file_matches_the_cpu() {
    let g = shared_gpu();
    let mut hg = HistogramGpu::new(g, 256);
    let mut files: Vec<PathBuf> = std::fs::read_dir(root().join("fixtures/pngsuite"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            let name = p.file_name().unwrap().to_str().unwrap();
            name.ends_with(".png") && !name.starts_with('x')
        })
        .collect();
    files.sort();
    assert!(files.len() > 150);
    for f in &files {
        let img = image::load(f).unwrap_or_else(|e| panic!("{e:#}"));
        let channels = Channels::of(img.channels, true);
        let got = hg
            .histogram(&img, channels, &mut Timings::default())
            .unwrap_or_else(|e| panic!("{}: {e:#}", f.display()));
        assert_same(
            &got,
            &histogram_cpu(&img, channels, 256),
            &f.display().to_string(),
        );
    }
    // And through the command line, all at once with a sum.
    let mut args = vec!["histogram", "--sum", "--alpha", "--json", "-"];
    args.extend(files.iter().map(|f| f.to_str().unwrap()));
    let r = run(&args);
    r.code(0);
    let doc: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
    assert_eq!(doc["inputs"].as_array().unwrap().len(), files.len());
}

#[test]
fn corrupt_inputs_fail_in_one_line_and_write_nothing() {
    let suite = root().join("fixtures/pngsuite");
    let mut corrupt: Vec<PathBuf> = std::fs::read_dir(&suite)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.file_name().unwrap().to_str().unwrap().starts_with('x'))
        .collect();
    corrupt.sort();
    assert!(!corrupt.is_empty());
    for f in &corrupt {
        let dir = tempdir();
        let name = f.to_str().unwrap();
        let r = run_in(
            Some(dir.path()),
            &["histogram", name, "--json", "out.json", "--plot", "p.png"],
        );
        r.code(1).one_error_line(name);
        assert!(r.stdout.is_empty(), "{}", r.stdout);
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0, "{name}");
    }
    // A bad file among good ones: the good ones are still summarised, the exit code is 1.
    let good = suite.join("basn2c08.png");
    let r = run(&[
        "histogram",
        good.to_str().unwrap(),
        corrupt[0].to_str().unwrap(),
    ]);
    r.code(1).batch_errors(
        &[corrupt[0].to_str().unwrap()],
        "1 done, 0 skipped, 1 failed",
    );
    assert!(r.stdout.contains("basn2c08.png: 32x32 RGB 8-bit"));
    // Missing and empty files.
    let dir = tempdir();
    std::fs::write(dir.path().join("empty.png"), b"").unwrap();
    run_in(Some(dir.path()), &["histogram", "empty.png"])
        .code(1)
        .one_error_line("empty.png: empty file");
    run_in(Some(dir.path()), &["histogram", "nope.png"])
        .code(1)
        .one_error_line("nope.png: cannot read");
}

#[test]
fn bad_bins_and_plot_places_are_caught_before_work() {
    let dir = tempdir();
    let rgb8 = root().join("fixtures/pngsuite/basn2c08.png");
    let rgb8 = rgb8.to_str().unwrap();
    let at = |args: &[&str]| run_in(Some(dir.path()), args);
    at(&["histogram", rgb8, "--bins", "0", "--json", "o.json"])
        .code(2)
        .one_error_line("--bins");
    at(&["histogram", rgb8, "--bins", "65537"])
        .code(2)
        .one_error_line("--bins");
    at(&["histogram", rgb8, "--bins", "257", "--json", "o.json"])
        .code(2)
        .one_error_line("basn2c08.png: --bins 257: 8-bit images take 1 to 256 bins");
    at(&["histogram", rgb8, "--plot", "missing/dir/p.png"])
        .code(1)
        .one_error_line("missing/dir/p.png: cannot write here");
    at(&["histogram", rgb8, "--plot", "p.nope"])
        .code(2)
        .one_error_line("p.nope: no encoder for .nope");
    at(&["histogram", rgb8, rgb8, "--plot", "p.png"])
        .code(2)
        .one_error_line("add --sum");
    at(&["histogram", rgb8, "--plot", "p.png", "--plot-size", "10x10"])
        .code(2)
        .one_error_line("--plot-size");
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
}

#[test]
fn cpu_backend_gives_the_same_document() {
    let input = root().join("fixtures/pngsuite/basn6a16.png");
    let input = input.to_str().unwrap();
    let args = [
        "histogram",
        input,
        "--alpha",
        "--bins",
        "300",
        "--json",
        "-",
    ];
    let gpu = run(&args);
    gpu.code(0);
    let mut cpu_args = vec!["--backend", "cpu"];
    cpu_args.extend(args);
    let cpu = run(&cpu_args);
    cpu.code(0);
    assert_eq!(gpu.stdout, cpu.stdout);
}

#[test]
fn bench_histogram_reports_both_cases_in_gpix_per_second() {
    let r = run(&[
        "bench",
        "histogram",
        "--reps",
        "1",
        "--warmup",
        "0",
        "--warmup-ms",
        "0",
        "--json",
        "-",
    ]);
    r.code(0);
    let doc: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
    let cases: Vec<&str> = doc["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            assert_eq!(m["unit"], "Gpix/s");
            assert!(m["throughput"].as_f64().unwrap() > 0.0);
            m["case"].as_str().unwrap()
        })
        .collect();
    assert_eq!(cases, ["4K RGBA8 random", "4K RGBA8 one colour"]);
}

// Issue 24: the shards of a `--sum` run over gray and colour images could not be merged (a
// shard of gray images alone has a gray sum), and merged means differed from the unsharded
// run's in the last digit (a float read and written again): the merged document must be the
// unsharded one, byte for byte, with and without --alpha.
#[test]
fn merged_shards_equal_the_unsharded_document() {
    let dir = tempdir();
    let d = dir.path();
    std::fs::create_dir(d.join("mix")).unwrap();
    image::save(&d.join("mix/c1.png"), random_image(37, 23, 3, 8, 1)).unwrap();
    image::save(&d.join("mix/c2.png"), random_image(19, 41, 4, 16, 2)).unwrap();
    for i in 1..=6 {
        let gray = random_image(13 + i, 7 * i, 1 + (i % 2) as u8, 8, 10 + i);
        image::save(&d.join(format!("mix/g{i}.png")), gray).unwrap();
    }
    for alpha in [false, true] {
        let mut common = vec!["--backend", "cpu", "histogram", "mix", "--sum", "-q"];
        if alpha {
            common.push("--alpha");
        }
        let with = |extra: &[&str]| {
            let mut args = common.clone();
            args.extend_from_slice(extra);
            run_in(Some(d), &args).code(0);
        };
        with(&["--json", "full.json"]);
        let mut shards = Vec::new();
        for i in 1..=3 {
            let (shard, out) = (format!("{i}/3"), format!("s{i}.json"));
            with(&["--shard", &shard, "--json", &out]);
            shards.push(out);
        }
        let mut args = vec!["merge"];
        args.extend(shards.iter().map(String::as_str));
        args.extend(["--json", "merged.json"]);
        run_in(Some(d), &args).code(0);
        let full = std::fs::read_to_string(d.join("full.json")).unwrap();
        // An input without alpha counts as opaque (the CPU engine left a gray one's alpha
        // empty in a gray+alpha union).
        if alpha {
            let doc: serde_json::Value = serde_json::from_str(&full).unwrap();
            for input in doc["inputs"].as_array().unwrap() {
                let a = input["channels"].as_array().unwrap().last().unwrap();
                assert_eq!(a["name"], "alpha");
                let total: u64 = a["counts"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|c| c.as_u64().unwrap())
                    .sum();
                assert_eq!(
                    total,
                    input["pixels"].as_u64().unwrap(),
                    "{}",
                    input["path"]
                );
            }
        }
        let merged = std::fs::read_to_string(d.join("merged.json")).unwrap();
        if merged != full {
            // "gpu" holds the merged document, "cpu" the unsharded one.
            let write = |p: &Path, b: &[u8]| std::fs::write(p, b).unwrap();
            let at = dump_mismatch(
                "merged_shards",
                "json",
                merged.as_bytes(),
                full.as_bytes(),
                write,
            );
            panic!(
                "--alpha {alpha}: the merged document differs; both in {}",
                at.display()
            );
        }
        // Some shard held gray images only: the case that could not be merged.
        let gray_only = shards.iter().any(|s| {
            let doc: serde_json::Value =
                serde_json::from_str(&std::fs::read_to_string(d.join(s)).unwrap()).unwrap();
            doc["inputs"].as_array().unwrap().iter().all(|i| {
                let p = i["path"].as_str().unwrap();
                p.contains("/g")
            })
        });
        assert!(gray_only);
        for f in ["full.json", "merged.json", "s1.json", "s2.json", "s3.json"] {
            std::fs::remove_file(d.join(f)).unwrap();
        }
    }
}
