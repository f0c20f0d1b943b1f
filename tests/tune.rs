//! `gpukit tune` and the tune cache: a quick tune end to end, the cache read back by an op
//! (visible with -v), corrupt and stale caches ignored with a warning, the XDG location;
//! and every op bit-identical to its CPU reference (matmul within its bound) for choices
//! other than the defaults (compare's shapes: tests/compare.rs).

use std::path::Path;

use gpukit::gpu::{Engine, Gpu, Timings};
use gpukit::io::array::{self, Array, Data, Format};
use gpukit::io::image::{self, Image};
use gpukit::ops::{blur, compare, histogram, matmul, scan};
use gpukit::tune::Tunable;

use crate::util::{engine, gpukit, random_image, run, tempdir, xorshift, Run};

/// Writes `values` as a u32 .npy.
fn write_u32_npy(path: &Path, values: Vec<u32>) {
    array::write(path, Format::Npy, &Array::vector(Data::U32(values))).unwrap();
}

fn read_u32_npy(path: &Path) -> Vec<u32> {
    match array::read_vector(path, Format::Npy, None, array::Header::Detect).unwrap() {
        Data::U32(v) => v,
        other => panic!("{path:?} holds {:?}", other.dtype()),
    }
}

fn values() -> Vec<u32> {
    (0..5000u32)
        .map(|i| i.wrapping_mul(2654435761) >> 20)
        .collect()
}

fn exclusive_sums(v: &[u32]) -> Vec<u32> {
    scan::reference(v, scan::Op::Sum, scan::Mode::Exclusive)
}

/// `gpukit --backend vulkan scan INPUT -o OUTPUT` with GPUKIT_TUNE_CACHE=CACHE (tuned shapes
/// are the adapter's: name it, or the native CPU engine runs instead).
fn scan_with_cache(input: &Path, output: &Path, cache: &Path) -> Run {
    let args = [
        "--backend",
        "vulkan",
        "scan",
        input.to_str().unwrap(),
        "-o",
        output.to_str().unwrap(),
    ];
    run_env(&args, &[("GPUKIT_TUNE_CACHE", cache)])
}

fn run_env(args: &[&str], env: &[(&str, &Path)]) -> Run {
    let mut cmd = gpukit();
    cmd.args(args);
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().expect("the gpukit binary runs");
    Run {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

#[test]
fn quick_tune_writes_a_cache_that_the_ops_then_use() {
    let d = tempdir();
    let cache = d.path().join("sub/tune.json");
    let c = cache.to_str().unwrap();
    let r = run(&["tune", "--quick", "--tune-cache", c]);
    r.code(0);
    let tunable: Vec<&str> = gpukit::ops::tunable().map(|op| op.name).collect();
    for &op in &tunable {
        assert!(
            r.stdout
                .lines()
                .any(|l| l.starts_with(op) && l.contains(" * ")),
            "no chosen {op} line:\n{}",
            r.stdout
        );
    }
    assert!(r.stderr.contains("tune cache written to"), "{}", r.stderr);
    let mut doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&cache).unwrap()).unwrap();
    assert_eq!(doc["quick"], true);
    for &op in &tunable {
        assert_eq!(doc["ops"][op].as_array().unwrap().len(), 1, "{op}");
    }

    // Put a choice other than the default in the cache: scan must use it and stay exact.
    doc["ops"]["scan"][0]["choice"] = serde_json::json!({ "wg_size": 32, "vec_per_thread": 2 });
    std::fs::write(&cache, serde_json::to_string(&doc).unwrap()).unwrap();
    let (input, output) = (d.path().join("v.npy"), d.path().join("out.npy"));
    write_u32_npy(&input, values());
    // Tuned shapes are the adapter's: name it, or the native CPU engine runs instead.
    let args = [
        "--backend",
        "vulkan",
        "scan",
        input.to_str().unwrap(),
        "-o",
        output.to_str().unwrap(),
    ];
    let r = run(&[&args[..], &["-v", "--tune-cache", c]].concat());
    r.code(0);
    assert!(
        r.stderr.contains("scan: tuned wg=32 vec4s=2 (cache "),
        "{}",
        r.stderr
    );
    assert_eq!(read_u32_npy(&output), exclusive_sums(&values()));

    // --no-tune-cache: the defaults.
    let r = run(&[&args[..], &["-v", "--tune-cache", c, "--no-tune-cache"]].concat());
    r.code(0);
    assert!(
        r.stderr.contains("scan: defaults (--no-tune-cache)"),
        "{}",
        r.stderr
    );

    // compare takes its choice too (capped workgroups, each taking several chunks), and
    // counts exactly what the CPU reference counts.
    doc["ops"]["compare"][0]["choice"] =
        serde_json::json!({ "wg_size": 64, "units": 2, "preload": true, "max_groups": 3 });
    std::fs::write(&cache, serde_json::to_string(&doc).unwrap()).unwrap();
    let a = random_image(301, 19, 3, 8, 21);
    let b = random_image(301, 19, 3, 8, 22);
    let (pa, pb) = (d.path().join("a.png"), d.path().join("b.png"));
    image::save(&pa, a.clone()).unwrap();
    image::save(&pb, b.clone()).unwrap();
    let (pa, pb) = (pa.to_str().unwrap(), pb.to_str().unwrap());
    let args = [
        "--backend",
        "vulkan",
        "compare",
        pa,
        pb,
        "--json",
        "-",
        "-v",
    ];
    let r = run(&[&args[..], &["--tune-cache", c]].concat());
    r.code(1);
    assert!(
        r.stderr
            .contains("compare: tuned wg=64 units=2 preload groups=3 (cache "),
        "{}",
        r.stderr
    );
    let doc: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
    let want = compare::reference(&a, &b, &compare::Options::default()).counts;
    assert_eq!(doc["metrics"]["differing"], want.differing);
    assert_eq!(
        doc["metrics"]["channels"][0]["differing"],
        want.channels[0].differing
    );
}

#[test]
fn tune_json_to_stdout_writes_no_cache_with_no_tune_cache() {
    let d = tempdir();
    let r = run_env(
        &["tune", "scan", "--quick", "--json", "-", "--no-tune-cache"],
        &[("XDG_CACHE_HOME", d.path())],
    );
    r.code(0);
    let doc: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
    assert_eq!(doc["cache"], serde_json::Value::Null);
    let trials = doc["trials"].as_array().unwrap();
    assert!(trials
        .iter()
        .any(|t| t["chosen"] == true && t["status"] == "measured"));
    assert!(trials.iter().all(|t| t["op"] == "scan"));
    assert_eq!(doc["choices"]["scan"][0]["size"], "2^16");
    assert!(!d.path().join("gpukit").exists());
}

#[test]
fn the_cache_lives_in_the_xdg_cache_folder_by_default() {
    let d = tempdir();
    let xdg = [("XDG_CACHE_HOME", d.path())];
    run_env(&["tune", "scan", "--quick"], &xdg).code(0);
    let files: Vec<_> = std::fs::read_dir(d.path().join("gpukit"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert_eq!(files.len(), 1, "{files:?}");
    assert!(files[0].starts_with("tune-") && files[0].ends_with("-vulkan.json"));
    let (input, output) = (d.path().join("v.npy"), d.path().join("out.npy"));
    write_u32_npy(&input, values());
    let r = run_env(
        &[
            "--backend",
            "vulkan",
            "scan",
            input.to_str().unwrap(),
            "-o",
            output.to_str().unwrap(),
            "-v",
        ],
        &xdg,
    );
    r.code(0);
    assert!(r.stderr.contains("scan: tuned "), "{}", r.stderr);
}

// A cache must never be fatal: corrupt, stale and nonsensical ones give one warning each
// and the op runs on its defaults.
#[test]
fn corrupt_stale_and_unfit_caches_are_ignored_with_a_warning() {
    let d = tempdir();
    let (input, output) = (d.path().join("v.npy"), d.path().join("out.npy"));
    write_u32_npy(&input, values());
    let stale = serde_json::json!({
        "format": 1,
        "gpukit_version": "0.0.0-old",
        "adapter": { "name": "x", "vendor_id": 1, "device_id": 2, "driver": "d",
                     "driver_info": "i", "backend": "vulkan" },
        "quick": true,
        "ops": {}
    });
    let cases = [
        (
            "corrupt.json",
            "{not json".to_string(),
            "not a gpukit tune cache",
        ),
        (
            "stale.json",
            stale.to_string(),
            "ignoring a stale tune cache",
        ),
        ("missing.json", String::new(), "cannot read"),
    ];
    for (name, text, warning) in cases {
        let cache = d.path().join(name);
        if !text.is_empty() {
            std::fs::write(&cache, text).unwrap();
        }
        let r = scan_with_cache(&input, &output, &cache);
        r.code(0).one_error_line(warning);
        assert!(r.stderr.starts_with("gpukit: warning:"), "{}", r.stderr);
        assert_eq!(read_u32_npy(&output), exclusive_sums(&values()));
    }

    // A valid cache of this adapter whose choice this adapter cannot run.
    let cache = d.path().join("t.json");
    run(&[
        "tune",
        "scan",
        "--quick",
        "--tune-cache",
        cache.to_str().unwrap(),
    ])
    .code(0);
    let mut doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&cache).unwrap()).unwrap();
    doc["ops"]["scan"][0]["choice"] = serde_json::json!({ "wg_size": 48, "vec_per_thread": 4 });
    std::fs::write(&cache, doc.to_string()).unwrap();
    // Tuned shapes are the adapter's: name it, or the native CPU engine runs instead.
    let r = scan_with_cache(&input, &output, &cache);
    r.code(0)
        .one_error_line("ignoring its scan choice for 2^16");
    assert_eq!(read_u32_npy(&output), exclusive_sums(&values()));
}

#[test]
fn a_file_that_is_not_a_tune_cache_is_never_replaced() {
    // `--tune-cache photo.png` replaced the photo with a cache ("replacing an unreadable tune
    // cache"); now tune refuses before measuring, and leaves the file as it was.
    let d = tempdir();
    let photo = d.path().join("photo.png");
    let bytes = b"\x89PNG\r\n\x1a\n not a cache".to_vec();
    std::fs::write(&photo, &bytes).unwrap();
    let p = photo.to_str().unwrap();
    run(&["tune", "scan", "--quick", "--tune-cache", p])
        .code(1)
        .one_error_line("photo.png: not a gpukit tune cache, so it is not replaced");
    assert_eq!(std::fs::read(&photo).unwrap(), bytes);
    // An empty file, and a cache of gpukit's (valid or not for this adapter), are replaced.
    let cache = d.path().join("t.json");
    std::fs::write(&cache, b"").unwrap();
    let c = cache.to_str().unwrap();
    run(&["tune", "scan", "--quick", "--tune-cache", c]).code(0);
    let mut doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&cache).unwrap()).unwrap();
    assert!(doc["ops"]["scan"].is_array(), "{doc}");
    doc["gpukit_version"] = "0.0.1".into();
    std::fs::write(&cache, doc.to_string()).unwrap();
    run(&["tune", "scan", "--quick", "--tune-cache", c]).code(0);
    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&cache).unwrap()).unwrap();
    assert_eq!(doc["gpukit_version"], env!("CARGO_PKG_VERSION"));
}

#[test]
fn unknown_op_is_a_usage_error() {
    run(&["tune", "sort", "--quick"])
        .code(2)
        .one_error_line("invalid value 'sort'")
        .one_error_line(&format!(
            "[possible values: {}, all]",
            crate::cli::registry_names(|op| op.tune.is_some())
        ));
}

fn noise(len: usize, seed: u32) -> Vec<u32> {
    let mut next = xorshift(seed);
    (0..len).map(|_| next()).collect()
}

fn the_gpu(e: &Engine) -> &Gpu {
    match e {
        Engine::Gpu(g) => g,
        Engine::Cpu => unreachable!(),
    }
}

#[test]
fn blur_is_bit_identical_for_other_choices() {
    let e = engine();
    let rgba8 = Image::new_u8(
        301,
        23,
        4,
        noise(301 * 23 * 4, 1).iter().map(|&v| v as u8).collect(),
    );
    let gray16 = Image::new_u16(
        77,
        290,
        1,
        noise(77 * 290, 2).iter().map(|&v| v as u16).collect(),
    );
    let choices = [
        blur::Tunables {
            box_rows: 8,
            box_tpl: 16,
            box_ppt: 1,
            box_ppt_narrow: 8,
            box_rows_host: 4,
            gauss_rows: 2,
            gauss_tpl: 64,
            gauss_rows_wide: 1,
        },
        blur::Tunables {
            box_rows: 64,
            box_tpl: 2,
            box_ppt: 8,
            box_ppt_narrow: 1,
            box_rows_host: 32,
            gauss_rows: 16,
            gauss_tpl: 8,
            gauss_rows_wide: 8,
        },
        blur::Tunables {
            box_rows: 4,
            box_tpl: 32,
            box_ppt: 2,
            box_ppt_narrow: 4,
            box_rows_host: 8,
            gauss_rows: 1,
            gauss_tpl: 16,
            gauss_rows_wide: 2,
        },
    ];
    let params = [
        blur::Options::new(blur::Kind::Box, 9, 1),
        blur::Options::new(blur::Kind::Gaussian { sigma: 2.0 }, 6, 2),
    ];
    for t in choices {
        for img in [&rgba8, &gray16] {
            for p in &params {
                let options = blur::GpuOptions {
                    tunables: Some(t),
                    layout: Some(blur::Layout::Workgroup),
                    ..blur::GpuOptions::DEFAULT
                };
                let p = &p.with_gpu(options);
                let got = blur::run(e, img, p, &mut Timings::default()).unwrap();
                let want = blur::reference(img, p).unwrap();
                assert!(
                    got.samples == want.samples,
                    "{t} {p:?} {}x{}",
                    img.width,
                    img.height
                );
            }
        }
    }
}

#[test]
fn histogram_counts_are_exact_for_other_choices() {
    let e = engine();
    let g = the_gpu(e);
    let img = Image::new_u8(
        211,
        97,
        3,
        noise(211 * 97 * 3, 3).iter().map(|&v| v as u8).collect(),
    );
    let channels = histogram::Channels::of(3, false);
    let choices = [
        // Many tiny tiles adding into the counts, one copy of 16-bit counters.
        histogram::Tunables {
            chunk_wg_size: 64,
            max_copies: 1,
            packed: true,
            target_tiles: 2048,
            slices: 1,
        },
        histogram::Tunables {
            chunk_wg_size: 512,
            max_copies: 16,
            packed: false,
            target_tiles: 3,
            // More copies of the counts than tiles: some stay zero.
            slices: 64,
        },
        // 16-bit counters, an odd number of copies (lavapipe's 32 KiB hold 16 of 512 words).
        histogram::Tunables {
            chunk_wg_size: 128,
            max_copies: 3,
            packed: true,
            target_tiles: 5,
            slices: 3,
        },
    ];
    for t in choices {
        let mut hg = histogram::HistogramGpu::new(g, 256);
        hg.set_tunables(t);
        let got = hg
            .histogram(&img, channels, &mut Timings::default())
            .unwrap();
        assert_eq!(
            got.counts,
            histogram::reference(&img, channels, 256).counts,
            "{t}"
        );
    }
}

#[test]
fn scan_is_exact_for_other_choices() {
    let e = engine();
    let data = noise(70_001, 4);
    let shapes = [(32, 1), (64, 8), (1024, 2), (128, 4)];
    for (wg_size, vec_per_thread) in shapes {
        for (op, mode) in [
            (scan::Op::Sum, scan::Mode::Exclusive),
            (scan::Op::Max, scan::Mode::Inclusive),
        ] {
            let opts = scan::Options {
                op,
                mode,
                tunables: Some(scan::Tunables {
                    wg_size,
                    vec_per_thread,
                }),
                ..scan::Options::default()
            };
            let got = scan::run(e, &data, &opts, &mut Timings::default()).unwrap();
            assert!(
                got == scan::reference(&data, op, mode),
                "{} {op:?} {mode:?}",
                opts.tunables()
            );
        }
    }
}

#[test]
fn matmul_is_within_its_bound_for_other_choices() {
    let e = engine();
    let g = the_gpu(e);
    let (m, n, k) = (70, 93, 45);
    let a: Vec<f32> = noise(m * k, 5)
        .iter()
        .map(|&v| (v >> 8) as f32 / (1 << 23) as f32 - 1.0)
        .collect();
    let b: Vec<f32> = noise(k * n, 6)
        .iter()
        .map(|&v| (v >> 8) as f32 / (1 << 23) as f32 - 1.0)
        .collect();
    let p = matmul::Matmul {
        a: &a,
        b: &b,
        dims: matmul::Dims { m, n, k },
        trans_a: false,
        trans_b: true,
        precision: matmul::Precision::F32,
    };
    let (want, abs) = matmul::exact(&p);
    let tile = |bm, bn, bk, tm, tn, group_m| matmul::Tunables {
        bm,
        bn,
        bk,
        tm,
        tn,
        group_m,
    };
    for t in [
        tile(32, 32, 4, 4, 4, 1),
        tile(64, 128, 8, 4, 8, 4),
        tile(128, 32, 4, 8, 4, 16),
        // The shape of the 64 x 256 x 16 tiles `gpukit tune` chose on H100s and H200s before
        // call DD, at the BK lavapipe's 32 KiB allow.
        tile(64, 256, 8, 4, 8, 8),
    ] {
        t.check(&g.limits).unwrap();
        let options = matmul::Options {
            tile: Some(t),
            ..matmul::Options::DEFAULT
        };
        let got = matmul::run_gpu(g, &p, &options, &mut Timings::default()).unwrap();
        if let Some(i) = matmul::outside_bound(&got, &want, &abs, k) {
            panic!("{t}: C[{i}] {} vs {}", got[i], want[i]);
        }
    }
}

// Issue 24: a cache's values are checked in wide arithmetic: 65536 x 65536 wrapped to 0 in
// u32 and passed the check, failing the op later; and a huge (sparse) file is not read whole.
#[test]
fn cache_values_past_u32_and_huge_caches_are_refused() {
    let limits = the_gpu(engine()).limits.clone();
    let wide = blur::Tunables {
        box_rows: 1 << 16,
        box_tpl: 1 << 16,
        ..blur::Tunables::DEFAULT
    };
    let err = wide.check(&limits).unwrap_err().to_string();
    assert!(err.contains("exceed"), "{err}");
    let wide = matmul::Tunables {
        bm: 1 << 31,
        bn: 1 << 31,
        bk: 1 << 30,
        ..matmul::Tunables::FAST
    };
    assert!(wide.check(&limits).is_err());
    assert!(blur::Tunables::DEFAULT.check(&limits).is_ok());
    assert!(matmul::Tunables::FAST.check(&limits).is_ok());

    let d = tempdir();
    let (input, output) = (d.path().join("v.npy"), d.path().join("out.npy"));
    write_u32_npy(&input, values());
    let cache = d.path().join("huge.json");
    let file = std::fs::File::create(&cache).unwrap();
    file.set_len(3 << 30).unwrap();
    drop(file);
    let r = scan_with_cache(&input, &output, &cache);
    r.code(0)
        .one_error_line("huge.json: larger than 16 MiB, not a gpukit tune cache");
    assert_eq!(read_u32_npy(&output), exclusive_sums(&values()));
}

// Issue 24: two `gpukit tune` runs on one cache each wrote what they had read at their start
// plus their own ops, so the later one lost the other's results.
#[test]
fn two_tunes_on_one_cache_keep_both_results() {
    let d = tempdir();
    let cache = d.path().join("cache.json");
    let start = |op: &str| {
        gpukit()
            .args(["tune", op, "--quick", "-q", "--tune-cache"])
            .arg(&cache)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap()
    };
    let runs = [start("scan"), start("compare")];
    for r in runs {
        let out = r.wait_with_output().unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&cache).unwrap()).unwrap();
    let ops: Vec<&String> = doc["ops"].as_object().unwrap().keys().collect();
    assert_eq!(ops, ["compare", "scan"]);
}
