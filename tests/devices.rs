//! `gpukit devices` and adapter selection on the machine's real adapters.

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
            r.stderr.contains(&format!("adapter: {name}")),
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
        assert!(
            by_default
                .stderr
                .contains(&format!("{name} is a software rasteriser"))
                && by_default
                    .stderr
                    .contains("adapter: cpu (gpukit's native CPU engine)"),
            "{}",
            by_default.stderr
        );
    } else {
        assert!(
            by_default.stderr.contains(&format!("adapter: {name}")),
            "{}",
            by_default.stderr
        );
    }
    for named in [
        ["--device", "0"],
        ["--backend", best["backend"].as_str().unwrap()],
    ] {
        let r = run(&[named[0], named[1], "-v", "blur", input, "-o", out]);
        r.code(0);
        assert!(
            r.stderr.contains(&format!("adapter: {name}")),
            "{named:?}: {}",
            r.stderr
        );
    }
    // Measuring kernels never passes an adapter over.
    let bench = quick_bench(&[]);
    assert!(
        bench.stderr.contains(&format!("adapter: {name}")),
        "{}",
        bench.stderr
    );
}
