//! The copy kernel against the CPU on sizes around the workgroup and dispatch limits, and
//! the `bench` harness on top of it.

use gpukit::gpu::{Engine, Timings};
use gpukit::ops::copy::{reference as copy_cpu, run as copy_run, Options};

use crate::util::{engine, gpu, run};

/// The copy on `engine`.
fn copy(engine: &Engine, data: &[u32]) -> anyhow::Result<Vec<u32>> {
    copy_run(engine, data, &Options, &mut Timings::default())
}

/// Distinct, non-zero words, so a missed or shifted element shows.
fn pattern(n: usize) -> Vec<u32> {
    (0..n as u32)
        .map(|i| i.wrapping_mul(2654435761) | 1)
        .collect()
}

// One workgroup copies 256 vec4 = 1024 words.
const WG_WORDS: usize = 1024;

#[test]
fn copy_matches_cpu_around_workgroup_sizes() {
    let engine = engine();
    for n in [
        0,
        1,
        3,
        4,
        5,
        WG_WORDS - 1,
        WG_WORDS,
        WG_WORDS + 1,
        3 * WG_WORDS + 7,
    ] {
        let data = pattern(n);
        assert_eq!(copy(engine, &data).unwrap(), copy_cpu(&data), "n = {n}");
    }
}

#[test]
fn copy_matches_cpu_across_2d_dispatch() {
    // Lower the per-dimension limit to 7 workgroups so 2-D grids appear at small sizes.
    let mut g = gpu();
    g.set_dispatch_limit(7);
    assert_eq!(g.grid(8), [4, 2, 1]);
    let engine = Engine::Gpu(Box::new(g));
    for wgs in [6, 7, 8, 13, 14, 15, 48, 49] {
        for n in [wgs * WG_WORDS - 1, wgs * WG_WORDS] {
            let data = pattern(n);
            assert_eq!(copy(&engine, &data).unwrap(), copy_cpu(&data), "n = {n}");
        }
    }
}

#[test]
fn copy_beyond_storage_binding_is_a_clear_error() {
    let g = gpu();
    let words = (g.limits.max_storage_buffer_binding_size / 4 + 4) as usize;
    let err = copy(&Engine::Gpu(Box::new(g)), &vec![0u32; words]).unwrap_err();
    assert!(
        err.to_string().contains("largest storage binding"),
        "{err:#}"
    );
}

#[test]
fn bench_copy_json_reports_gpu_time_and_throughput() {
    let r = run(&[
        "bench",
        "copy",
        "--reps",
        "3",
        "--warmup",
        "1",
        "--warmup-ms",
        "20",
        "--copy-mib",
        "4",
        "--json",
        "-",
    ]);
    r.code(0);
    let doc: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
    assert_eq!(doc["warmup"], 1);
    assert_eq!(doc["warmup_ms"], 20);
    let m = &doc["results"][0];
    assert_eq!(m["op"], "copy");
    assert_eq!(m["case"], "4 MiB u32");
    assert_eq!(m["reps"], 3);
    assert_eq!(m["unit"], "GB/s");
    let median = m["median_ms"].as_f64().unwrap();
    assert!(m["min_ms"].as_f64().unwrap() <= median && median <= m["max_ms"].as_f64().unwrap());
    // Throughput is the 8 MiB moved (4 read + 4 written) over the median time.
    let want = 2.0 * 4.0 * 1048576.0 / (median / 1e3) / 1e9;
    assert!(
        (m["throughput"].as_f64().unwrap() - want).abs() < 1e-6 * want,
        "{m}"
    );
}

#[test]
fn bench_runs_on_the_cpu_backend() {
    let r = run(&[
        "--backend",
        "cpu",
        "bench",
        "copy",
        "--reps",
        "2",
        "--copy-mib",
        "1",
    ]);
    r.code(0);
    assert!(r.stdout.contains("adapter: cpu"), "{}", r.stdout);
    assert!(r.stdout.contains("1 MiB u32"), "{}", r.stdout);
}
