//! `gpukit devices` and adapter selection on the machine's real adapters.

use std::path::Path;

use gpukit::io::image;
use gpukit::ops::blur::{reference, Kind, Options};

use crate::util::{gpukit, run};

fn devices_json(extra_env: &[(&str, &str)]) -> serde_json::Value {
    let mut cmd = gpukit();
    cmd.args(["devices", "--json", "-"]);
    for (k, v) in extra_env {
        cmd.env(k, v);
    }
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.stdout.ends_with(b"}\n"), "JSON ends with a newline");
    serde_json::from_slice(&out.stdout).expect("devices --json is JSON")
}

#[test]
fn devices_json_lists_an_adapter_with_limits_and_features() {
    let doc = devices_json(&[]);
    assert_eq!(doc["gpukit_version"], env!("CARGO_PKG_VERSION"));
    assert_eq!(doc["default_engine"], "gpu");
    let adapters = doc["adapters"].as_array().unwrap();
    assert!(
        !adapters.is_empty(),
        "there is always an adapter (lavapipe in CI)"
    );
    let defaults = adapters.iter().filter(|a| a["default"] == true).count();
    assert_eq!(defaults, 1);
    for (i, a) in adapters.iter().enumerate() {
        assert_eq!(a["index"], i);
        assert!(a["name"].as_str().is_some_and(|n| !n.is_empty()));
        let l = &a["limits"];
        // WebGPU's guaranteed minimums: a device below these is not a wgpu device.
        assert!(l["max_storage_buffer_binding_size"].as_u64().unwrap() >= 128 << 20);
        assert!(l["max_compute_workgroup_storage_size"].as_u64().unwrap() >= 16384);
        assert!(l["max_compute_invocations_per_workgroup"].as_u64().unwrap() >= 256);
        assert!(l["max_compute_workgroups_per_dimension"].as_u64().unwrap() >= 65535);
        let f = &a["features"];
        assert!(f["timestamp_query"].is_boolean() && f["shader_f16"].is_boolean());
        if f["subgroups"] == true {
            let [min, max] = [0, 1].map(|k| f["subgroup_size"][k].as_u64().unwrap());
            assert!(min >= 1 && min <= max && max <= 128, "{f}");
        }
    }
}

#[test]
fn devices_text_marks_the_default() {
    let r = run(&["devices"]);
    r.code(0);
    assert!(r.stdout.starts_with("[0] "), "{}", r.stdout);
    assert!(r.stdout.contains("(default)"), "{}", r.stdout);
    assert!(r.stdout.contains("workgroups/dimension"), "{}", r.stdout);
}

#[test]
fn backend_and_device_come_from_the_environment() {
    let doc = devices_json(&[("GPUKIT_BACKEND", "cpu")]);
    assert_eq!(doc["adapters"].as_array().unwrap().len(), 0);
    assert_eq!(doc["default_engine"], "cpu");

    let mut cmd = gpukit();
    let out = cmd
        .args([
            "bench",
            "copy",
            "--reps",
            "1",
            "--warmup",
            "0",
            "--warmup-ms",
            "0",
            "--copy-mib",
            "1",
        ])
        .env("GPUKIT_DEVICE", "99")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no adapter with index 99"));
}

/// `gpukit -v bench copy` as short as it goes, with `global` options first; it has succeeded.
fn quick_bench(global: &[&str]) -> crate::util::Run {
    let bench = [
        "-v",
        "bench",
        "copy",
        "--reps",
        "1",
        "--warmup",
        "0",
        "--warmup-ms",
        "0",
        "--copy-mib",
        "1",
    ];
    let r = run(&[global, &bench[..]].concat());
    r.code(0);
    r
}

#[test]
fn device_by_index_and_name_part_opens_that_adapter() {
    let doc = devices_json(&[]);
    let name = doc["adapters"][0]["name"].as_str().unwrap().to_string();
    let part: String = name.chars().take(4).collect::<String>().to_uppercase();
    for sel in ["0", part.as_str()] {
        let r = quick_bench(&["--device", sel]);
        assert!(
            r.stderr.contains(&format!("engine: {name} ("))
                && r.stderr.contains(&format!(": named by --device {sel}\n")),
            "{}",
            r.stderr
        );
    }
}

// A software rasteriser (lavapipe here and in CI) is passed over for the native CPU engine by
// the commands that do work, unless the adapter is named; a real GPU is always used.
#[test]
fn a_software_adapter_is_passed_over_unless_named() {
    let doc = devices_json(&[]);
    let best = doc["adapters"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["default"] == true)
        .expect("a default adapter");
    let name = best["name"].as_str().unwrap();
    let software = best["device_type"] == "cpu";
    // `gpukit devices` says the same.
    let expect = if software { "cpu" } else { "gpu" };
    assert_eq!(doc["work_engine"], expect);
    assert!(doc["cpu_engine"]["threads"].as_u64().unwrap() >= 1);
    let dir = crate::util::tempdir();
    let input = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/fixtures/pngsuite/basn2c08.png"
    );
    let out = dir.path().join("o.png");
    let out = out.to_str().unwrap();
    let by_default = run(&["-v", "blur", input, "-o", out]);
    by_default.code(0);
    if software {
        // Passed over after asking the drivers, or (no GPU device node) without loading them.
        let why = [
            format!("the best adapter, {name}, is a software rasteriser"),
            "no GPU device node (/dev/dri, ".to_string(),
        ];
        assert!(
            by_default.stderr.contains("engine: native CPU (")
                && why.iter().any(|w| by_default.stderr.contains(w.as_str())),
            "{}",
            by_default.stderr
        );
    } else {
        assert!(
            by_default.stderr.contains(&format!("engine: {name} (")),
            "{}",
            by_default.stderr
        );
    }
    let backend = best["backend"].as_str().unwrap();
    for (named, why) in [
        (["--device", "0"], "named by --device 0".to_string()),
        (
            ["--backend", backend],
            format!("the best {backend} adapter (--backend {backend})"),
        ),
    ] {
        let r = run(&[named[0], named[1], "-v", "blur", input, "-o", out]);
        r.code(0);
        assert!(
            r.stderr.contains(&format!("engine: {name} (")) && r.stderr.contains(&why),
            "{named:?}: {}",
            r.stderr
        );
    }
    // Measuring kernels never passes an adapter over.
    let bench = quick_bench(&[]);
    assert!(
        bench.stderr.contains(&format!("engine: {name} (")),
        "{}",
        bench.stderr
    );
}

// ---- the engine line and the pipeline cache ---------------------------------------------

/// `--timings` (without `-v`) names the engine and why, for each way of choosing it.
#[test]
fn timings_name_the_engine_and_why() {
    let dir = crate::util::tempdir();
    let out = dir.path().join("o.png");
    let out = out.to_str().unwrap();
    let input = fixture("pngsuite/basn2c08.png");
    let engine_line = |args: &[&str]| {
        let r = run(&[args, &["--timings", "blur", &input, "-o", out]].concat());
        r.code(0);
        let lines: Vec<&str> = r
            .stderr
            .lines()
            .filter(|l| l.starts_with("gpukit: timing: engine: "))
            .collect();
        assert_eq!(lines.len(), 1, "{}", r.stderr);
        lines[0].to_string()
    };
    let threads = devices_json(&[])["cpu_engine"]["threads"].as_u64().unwrap();
    assert_eq!(
        engine_line(&["--backend", "cpu"]),
        format!("gpukit: timing: engine: native CPU ({threads} threads): --backend cpu")
    );
    let line = engine_line(&["--device", "llvmpipe"]);
    assert!(
        line.starts_with("gpukit: timing: engine: llvmpipe")
            && line.ends_with(": named by --device llvmpipe"),
        "{line}"
    );
    let line = engine_line(&["--backend", "vulkan"]);
    assert!(
        line.ends_with("the best vulkan adapter (--backend vulkan)"),
        "{line}"
    );
}

fn fixture(name: &str) -> String {
    format!("{}/fixtures/{name}", env!("CARGO_MANIFEST_DIR"))
}

/// Blurs the 32x32 fixture on lavapipe with `args`, checks the output against the CPU
/// reference, and returns stderr.
fn blur_on_lavapipe(dir: &Path, args: &[&str]) -> String {
    let input = fixture("pngsuite/basn2c08.png");
    let out = dir.join("o.png");
    let mut cmd = gpukit();
    cmd.args(["--device", "llvmpipe", "-v"])
        .args(args)
        .args(["blur", &input, "-r", "2", "-o", out.to_str().unwrap()])
        .env("XDG_CACHE_HOME", dir.join("cache"));
    let r = cmd.output().unwrap();
    let stderr = String::from_utf8_lossy(&r.stderr).into_owned();
    assert!(r.status.success(), "{stderr}");
    let img = image::load(Path::new(&input)).unwrap();
    let want = reference(&img, &Options::new(Kind::Box, 2, 1)).unwrap();
    assert!(
        image::load(&out).unwrap() == want,
        "the blur differs from the reference"
    );
    stderr
}

/// The number in `pipeline cache: <verb> N bytes` of stderr.
fn cache_bytes(stderr: &str, verb: &str) -> Option<u64> {
    let at = stderr.find(&format!("pipeline cache: {verb} "))? + 16 + verb.len() + 1;
    stderr[at..].split(' ').next()?.parse().ok()
}

#[test]
fn the_pipeline_cache_is_written_once_then_read() {
    let dir = crate::util::tempdir();
    // In the cache folder, beside the tune cache, named after the adapter.
    let first = blur_on_lavapipe(dir.path(), &[]);
    assert!(first.contains("pipeline cache: none yet at "), "{first}");
    let wrote = cache_bytes(&first, "wrote").unwrap_or_else(|| panic!("{first}"));
    let folder = dir.path().join("cache").join("gpukit");
    let files: Vec<String> = std::fs::read_dir(&folder)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(files.len(), 1, "{files:?}");
    assert!(
        files[0].starts_with("pipelines-llvmpipe-") && files[0].ends_with("-vulkan.bin"),
        "{files:?}"
    );
    let file = folder.join(&files[0]);
    assert!(std::fs::read(&file)
        .unwrap()
        .starts_with(b"gpukit pipeline cache\n"));
    // The second run reads what the first wrote, and has nothing new to write.
    let second = blur_on_lavapipe(dir.path(), &[]);
    assert_eq!(cache_bytes(&second, "read"), Some(wrote), "{second}");
    assert!(
        second.contains("pipeline cache: unchanged, not written"),
        "{second}"
    );
    // A file named by the flag (or the variable) instead; off reads and writes nothing.
    let named = dir.path().join("named.bin");
    let r = blur_on_lavapipe(dir.path(), &["--pipeline-cache", named.to_str().unwrap()]);
    assert_eq!(cache_bytes(&r, "wrote"), Some(wrote), "{r}");
    let before = std::fs::metadata(&file).unwrap().modified().unwrap();
    let off = blur_on_lavapipe(dir.path(), &["--no-pipeline-cache"]);
    assert!(off.contains("pipeline cache: off"), "{off}");
    assert_eq!(
        std::fs::metadata(&file).unwrap().modified().unwrap(),
        before
    );
}

/// FNV-1a 64, as the file's header states it (www.isthe.com/chongo/tech/comp/fnv).
fn fnv1a64(data: &[u8]) -> u64 {
    data.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ b as u64).wrapping_mul(0x0100_0000_01b3)
    })
}

/// `file` with wgpu's data changed by `change` and the header's checksum made to match, so
/// that the damage reaches wgpu and the driver.
fn with_data_changed(file: &[u8], change: impl Fn(&mut Vec<u8>)) -> Vec<u8> {
    let magic = b"gpukit pipeline cache\n".len();
    let end = magic + file[magic..].iter().position(|&b| b == b'\n').unwrap();
    let mut header: serde_json::Value = serde_json::from_slice(&file[magic..end]).unwrap();
    let mut data = file[end + 1..].to_vec();
    change(&mut data);
    header["bytes"] = data.len().into();
    header["fnv1a64"] = format!("{:016x}", fnv1a64(&data)).into();
    let mut out = file[..magic].to_vec();
    out.extend(serde_json::to_vec(&header).unwrap());
    out.push(b'\n');
    out.extend(data);
    out
}

// A damaged cache costs compile time, never a wrong result or a failed run: gpukit's own
// checks catch damage (one warning); what passes them is wgpu's and the driver's to check.
#[test]
fn a_damaged_pipeline_cache_is_ignored_with_one_warning() {
    let dir = crate::util::tempdir();
    let path = dir.path().join("p.bin");
    let flag = ["--pipeline-cache", path.to_str().unwrap()];
    blur_on_lavapipe(dir.path(), &flag);
    let whole = std::fs::read(&path).unwrap();
    let warnings = |stderr: &str| -> Vec<String> {
        stderr
            .lines()
            .filter(|l| l.starts_with("gpukit: warning:"))
            .map(str::to_string)
            .collect()
    };
    for (what, bytes, warning) in [
        (
            "cut short",
            whole[..whole.len() - 1].to_vec(),
            "bytes of data where its header says",
        ),
        (
            "a flipped bit",
            {
                let mut b = whole.clone();
                *b.last_mut().unwrap() ^= 4;
                b
            },
            "its data does not match its checksum",
        ),
        // wgpu's header names another device: wgpu refuses it.
        (
            "another device",
            with_data_changed(&whole, |d| d[20] ^= 1),
            "wgpu refused it",
        ),
    ] {
        std::fs::write(&path, &bytes).unwrap();
        let stderr = blur_on_lavapipe(dir.path(), &flag);
        let w = warnings(&stderr);
        assert!(w.len() == 1 && w[0].contains(warning), "{what}: {stderr}");
        assert!(w[0].contains(path.to_str().unwrap()), "{what}: {stderr}");
        // Rebuilt: the next run reads it without a word.
        assert!(
            stderr.contains("pipeline cache: wrote "),
            "{what}: {stderr}"
        );
        let again = blur_on_lavapipe(dir.path(), &flag);
        assert!(warnings(&again).is_empty(), "{what}: {again}");
        assert!(again.contains("pipeline cache: read "), "{what}: {again}");
    }
    // Someone's file named by mistake is not a cache at all: one warning, no cache this run,
    // and the file is left as it was (before, a cache replaced it).
    let garbage = b"\x89PNG not a cache".to_vec();
    std::fs::write(&path, &garbage).unwrap();
    let stderr = blur_on_lavapipe(dir.path(), &flag);
    let w = warnings(&stderr);
    assert!(
        w.len() == 1 && w[0].contains("not a gpukit pipeline cache, so it is not replaced"),
        "{stderr}"
    );
    assert!(!stderr.contains("pipeline cache: wrote "), "{stderr}");
    assert_eq!(std::fs::read(&path).unwrap(), garbage);
    // Damage past gpukit's checks: wgpu's own header (it starts afresh, silently), and the
    // driver's data after it (Vulkan drivers check their header and ignore the rest).
    let wgpu_header = 64;
    for (what, at) in [
        ("wgpu's magic", 0),
        ("the driver's header", wgpu_header + 4),
    ] {
        let bytes = with_data_changed(&whole, |d| {
            if at < d.len() {
                d[at] ^= 0x55;
            }
        });
        std::fs::write(&path, &bytes).unwrap();
        let stderr = blur_on_lavapipe(dir.path(), &flag);
        assert!(warnings(&stderr).is_empty(), "{what}: {stderr}");
    }
}

// Building a pipeline is much of a small job's run: one blur iteration runs two kernels (a
// row pass, premultiplying where there is alpha, and a column pass, dividing it out), and
// builds those two, not the four that several iterations use. An image of fewer than four
// channels, 8- or 16-bit, is read in its own layout by the row pass; lavapipe's kernels (a
// line an invocation) cannot write it whole words at a time, so it adds the pass that
// converts the result back from the packed layout.
#[test]
fn a_blur_builds_only_the_pipelines_it_runs() {
    let dir = crate::util::tempdir();
    let out = dir.path().join("o.png");
    for (input, built) in [
        ("pngsuite/basn6a08.png", 2),
        ("pngsuite/basn2c08.png", 3),
        ("pngsuite/basn2c16.png", 3),
    ] {
        // Level 6: the PNG is encoded on the cores, so only the blur's pipelines are built.
        let r = run(&[
            "--device",
            "llvmpipe",
            "--timings",
            "blur",
            &fixture(input),
            "--compression",
            "6",
            "-o",
            out.to_str().unwrap(),
        ]);
        r.code(0);
        assert!(
            r.stderr
                .contains(&format!(" ms ({built} built; within the phases above)")),
            "{input}: {}",
            r.stderr
        );
    }
}

// The tune cache is kept with its device by the layer above gpu, through `Gpu::attached`:
// one value per type, made once per device, never shared between devices.
#[test]
fn values_attached_to_a_device_are_made_once_per_type_and_device() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    let made = AtomicUsize::new(0);
    let make = |v: u32| {
        made.fetch_add(1, Ordering::SeqCst);
        v
    };
    let (a, b) = (crate::util::gpu(), crate::util::gpu());
    assert_eq!(*a.attached(|| make(7)), 7);
    assert_eq!(
        *a.attached(|| make(8)),
        7,
        "made once: the first value stays"
    );
    assert_eq!(*a.attached(|| String::from("other type")), "other type");
    assert_eq!(*b.attached(|| make(9)), 9, "another device has its own");
    assert_eq!(made.load(Ordering::SeqCst), 2);
    assert!(std::sync::Arc::ptr_eq(
        &a.attached(|| make(0)),
        &a.attached(|| make(0))
    ));
}
