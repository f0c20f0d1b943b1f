//! scan on the GPU against the CPU reference: lengths around tiles, levels, segments and the
//! dispatch limit, every op, dtype and mode on both in-tile paths; and the `gpukit scan`
//! command: every input and output format, bad inputs, `bench scan`.

use std::path::Path as FsPath;

use gpukit::gpu::{Engine, Gpu, Timings};
use gpukit::io::array::{self, Array, Data, Format};
use gpukit::ops::scan::{
    f32_sum_depth, layout_for, reference as scan_cpu, run as scan_run, subgroups_usable,
    takes_subgroups, Element, Mode, Op, Options as ScanOptions, Path, ScanPlan, Tunables, WG_SIZE,
};

use crate::util::{dump_mismatch, engine, gpu, run, run_in, tempdir};

/// The scan on `engine`.
fn scan<T: Element>(engine: &Engine, data: &[T], opts: &ScanOptions) -> anyhow::Result<Vec<T>> {
    scan_run(engine, data, opts, &mut Timings::default())
}

const OPS: [Op; 3] = [Op::Sum, Op::Min, Op::Max];
const MODES: [Mode; 2] = [Mode::Exclusive, Mode::Inclusive];
const PATHS: [Path; 2] = [Path::Workgroup, Path::Subgroup];

/// The elements tests scan, with their test inputs and how results are compared.
trait Sample: Element {
    /// Element `i` of a test input for `op`. Sums take values across the whole range (so
    /// integers wrap); min and max take a random walk, whose running extremes change at
    /// random places, so that a lost carry shows.
    fn sample(hash: u32, walk: i64, op: Op) -> Self;
    fn to_f64(self) -> f64;
    fn data(v: Vec<Self>) -> Data;
}

impl Sample for u32 {
    fn sample(hash: u32, walk: i64, op: Op) -> u32 {
        match op {
            Op::Sum => hash,
            _ => (walk + (1 << 31)) as u32,
        }
    }
    fn to_f64(self) -> f64 {
        self as f64
    }
    fn data(v: Vec<u32>) -> Data {
        Data::U32(v)
    }
}

impl Sample for i32 {
    fn sample(hash: u32, walk: i64, op: Op) -> i32 {
        match op {
            Op::Sum => hash as i32,
            _ => walk as i32,
        }
    }
    fn to_f64(self) -> f64 {
        self as f64
    }
    fn data(v: Vec<i32>) -> Data {
        Data::I32(v)
    }
}

impl Sample for f32 {
    fn sample(hash: u32, walk: i64, op: Op) -> f32 {
        match op {
            // Mixed signs and magnitudes in [-8, 8].
            Op::Sum => ((hash % 2001) as f32 - 1000.0) / 1000.0 * (1 << (hash >> 30)) as f32,
            _ => walk as f32 / 16.0,
        }
    }
    fn to_f64(self) -> f64 {
        self as f64
    }
    fn data(v: Vec<f32>) -> Data {
        Data::F32(v)
    }
}

fn input<T: Sample>(n: usize, op: Op) -> Vec<T> {
    let mut walk = 0i64;
    (0..n as u32)
        .map(|i| {
            let hash = i.wrapping_mul(2654435761).rotate_left(13) ^ 0x5bd1e995;
            walk += (hash % 21) as i64 - 10;
            T::sample(hash, walk, op)
        })
        .collect()
}

fn the_gpu(engine: &Engine) -> &Gpu {
    match engine {
        Engine::Gpu(g) => g,
        Engine::Cpu => unreachable!("GPU tests open a GPU"),
    }
}

/// Scans `data` on the GPU and holds the result against the CPU reference: bit for bit for
/// integers and for f32 min and max; within docs/scan.md's bound for f32 sums. On a mismatch
/// both results go to files in the temp folder before the test fails.
#[track_caller]
fn check<T: Sample>(engine: &Engine, data: &[T], opts: &ScanOptions, what: &str) {
    let got = scan(engine, data, opts).unwrap_or_else(|e| panic!("{what}: {e:#}"));
    let want = scan_cpu(data, opts.op, opts.mode);
    assert_eq!(got.len(), want.len(), "{what}: length");
    let bad = if T::ELEM == gpukit::ops::scan::Elem::F32 && opts.op == Op::Sum {
        let gpu = the_gpu(engine);
        let subgroups = takes_subgroups(gpu, opts).unwrap();
        let depth = f32_sum_depth(
            &layout_for(gpu, data.len(), opts),
            opts.tunables(),
            subgroups.then_some(gpu.features.subgroup_size),
        );
        // One more rounding: the reference's own, from f64 to f32.
        let du = (depth + 1) as f64 * 2f64.powi(-24);
        let gamma = du / (1.0 - du);
        let mut abs_sum = 0.0f64;
        (0..data.len()).find(|&i| {
            if opts.mode == Mode::Inclusive {
                abs_sum += data[i].to_f64().abs();
            }
            let bound = gamma * abs_sum;
            if opts.mode == Mode::Exclusive {
                abs_sum += data[i].to_f64().abs();
            }
            let err = (got[i].to_f64() - want[i].to_f64()).abs();
            // A NaN error is a mismatch too.
            err.is_nan() || err > bound
        })
    } else {
        (0..data.len()).find(|&i| got[i] != want[i])
    };
    if let Some(i) = bad {
        let dir = dump_mismatch(what, "npy", &got, &want, |p, v| {
            array::write(p, Format::Npy, &Array::vector(T::data(v.clone()))).unwrap()
        });
        panic!(
            "{what}: first mismatch at {i} of {}: gpu {:?}, cpu {:?} (both written to {})",
            data.len(),
            got[i],
            want[i],
            dir.display()
        );
    }
}

/// Every op and mode of one dtype on both paths, on lengths around one tile and past 2^20.
fn every_op_mode_path_around_tiles<T: Sample>() {
    let engine = engine();
    let tile = ScanOptions::default().tile();
    for path in PATHS {
        for op in OPS {
            for n in [0, 1, tile - 1, tile, tile + 1, (1 << 20) + 3] {
                let data = input::<T>(n, op);
                for mode in MODES {
                    let opts = ScanOptions {
                        op,
                        mode,
                        path,
                        ..ScanOptions::default()
                    };
                    let what = format!("{:?} {path} {op:?} {mode:?} n={n}", T::ELEM);
                    check(engine, &data, &opts, &what);
                }
            }
        }
    }
}

#[test]
fn u32_matches_cpu_for_every_op_mode_and_path() {
    every_op_mode_path_around_tiles::<u32>();
}

#[test]
fn i32_matches_cpu_for_every_op_mode_and_path() {
    every_op_mode_path_around_tiles::<i32>();
}

#[test]
fn f32_matches_cpu_for_every_op_mode_and_path() {
    every_op_mode_path_around_tiles::<f32>();
}

// The largest length that stays quick on lavapipe: three levels of default tiles are out of
// reach there (2^24 elements), so small workgroups reach three and four levels instead.
#[test]
fn large_inputs_and_deep_levels_match_cpu() {
    let engine = engine();
    for path in PATHS {
        let n = (4 << 20) + 5;
        let opts = ScanOptions {
            path,
            mode: Mode::Inclusive,
            ..ScanOptions::default()
        };
        check(
            engine,
            &input::<u32>(n, Op::Sum),
            &opts,
            &format!("{path} n={n}"),
        );
        // 8 invocations: 128-element tiles, four levels for 2^21 + 129 elements.
        for (wg_size, n) in [(32, 512 * 512 + 513), (8, (1 << 21) + 129)] {
            let opts = ScanOptions {
                path,
                tunables: Some(Tunables {
                    wg_size,
                    ..Tunables::DEFAULT
                }),
                ..ScanOptions::default()
            };
            let levels = layout_for(the_gpu(engine), n, &opts).segments[0]
                .levels
                .len();
            assert_eq!(levels, if wg_size == 32 { 3 } else { 4 });
            for op in OPS {
                let what = format!("{path} wg={wg_size} {op:?} n={n}");
                check(
                    engine,
                    &input::<i32>(n, op),
                    &ScanOptions { op, ..opts },
                    &what,
                );
            }
            let what = format!("{path} wg={wg_size} f32 n={n}");
            check(engine, &input::<f32>(n, Op::Sum), &opts, &what);
        }
    }
}

// The single-pass scan with thousands of tiles, every tile's look-back waiting on tiles that
// other workgroups (lavapipe's threads) are still scanning: the look-back itself, not the
// reduce-then-scan that `run` falls back to where a wait gives up, must give the CPU's
// result. The shapes: 8193 tiles of 128 elements; 1025 of 4096; 782 of 128 in 7 chained
// segments of 128 tiles.
#[test]
fn lookback_with_many_tiles_in_flight_matches_cpu() {
    let gpu = the_gpu(engine());
    for (wg_size, vec_per_thread, n, segment_len) in [
        (32, 1, (1 << 20) + 7, None),
        (256, 4, (1 << 22) + 1, None),
        (32, 1, 100_000, Some(128 * 128)),
    ] {
        for path in PATHS {
            if path == Path::Subgroup && !subgroups_usable(gpu, wg_size) {
                continue;
            }
            for (op, mode) in [(Op::Sum, Mode::Exclusive), (Op::Max, Mode::Inclusive)] {
                let what = format!("{path} wg={wg_size} vec4s={vec_per_thread} {op:?} n={n}");
                let opts = ScanOptions {
                    op,
                    mode,
                    path,
                    segment_len,
                    tunables: Some(Tunables {
                        wg_size,
                        vec_per_thread,
                    }),
                };
                let data = input::<i32>(n, op);
                let plan = ScanPlan::new::<i32>(gpu, n, &opts).unwrap();
                assert!(plan.single_pass(), "{what}");
                let segments = plan.layout().segments.len();
                assert_eq!(
                    segments > 1,
                    segment_len.is_some(),
                    "{what}: {segments} segments"
                );
                plan.upload(gpu, &data);
                let mut batch = gpu.batch(None);
                plan.record(&mut batch);
                batch.submit().unwrap();
                assert!(!plan.faulted(gpu).unwrap(), "{what}: a look-back gave up");
                let got = plan.read::<i32>(gpu).unwrap();
                let want = scan_cpu(&data, op, mode);
                if let Some(i) = (0..n).find(|&i| got[i] != want[i]) {
                    panic!(
                        "{what}: first mismatch at {i}: {} against {}",
                        got[i], want[i]
                    );
                }
            }
        }
    }
}

#[test]
fn integer_sums_wrap_exactly_like_the_cpu() {
    let engine = engine();
    let inclusive = ScanOptions {
        mode: Mode::Inclusive,
        ..ScanOptions::default()
    };
    // By hand.
    let got = scan(engine, &[u32::MAX, 1, 2, u32::MAX], &inclusive).unwrap();
    assert_eq!(got, [u32::MAX, 0, 2, 1]);
    let got = scan(engine, &[i32::MAX, 1, i32::MIN, -1], &inclusive).unwrap();
    assert_eq!(got, [i32::MAX, i32::MIN, 0, -1]);
    // Large values, so that sums wrap inside vec4s, tiles and levels, on both paths.
    let tile = inclusive.tile();
    let n = 3 * tile * tile / 2 + 7;
    let big_u: Vec<u32> = (0..n as u32).map(|i| u32::MAX - (i % 7)).collect();
    let big_i: Vec<i32> = (0..n as i32)
        .map(|i| {
            if i % 3 == 0 {
                i32::MIN + i % 5
            } else {
                i32::MAX - i % 11
            }
        })
        .collect();
    for path in PATHS {
        for mode in MODES {
            let opts = ScanOptions {
                path,
                mode,
                ..ScanOptions::default()
            };
            check(engine, &big_u, &opts, &format!("u32 wrap {path} {mode:?}"));
            check(engine, &big_i, &opts, &format!("i32 wrap {path} {mode:?}"));
        }
    }
}

#[test]
fn identities_start_exclusive_scans() {
    let engine = engine();
    let first = |op: Op| ScanOptions {
        op,
        ..ScanOptions::default()
    };
    assert_eq!(scan(engine, &[5u32], &first(Op::Min)).unwrap(), [u32::MAX]);
    assert_eq!(scan(engine, &[5u32], &first(Op::Max)).unwrap(), [0]);
    assert_eq!(scan(engine, &[5i32], &first(Op::Min)).unwrap(), [i32::MAX]);
    assert_eq!(scan(engine, &[5i32], &first(Op::Max)).unwrap(), [i32::MIN]);
    assert_eq!(scan(engine, &[5f32], &first(Op::Sum)).unwrap(), [0.0]);
    assert_eq!(
        scan(engine, &[5f32], &first(Op::Min)).unwrap(),
        [f32::INFINITY]
    );
    assert_eq!(
        scan(engine, &[5f32], &first(Op::Max)).unwrap(),
        [f32::NEG_INFINITY]
    );
}

#[test]
fn segments_chain_their_carries() {
    let engine = engine();
    let tile = ScanOptions::default().tile();
    let n = 13 * tile + 77;
    for path in PATHS {
        for segment_tiles in [1, 2, 5] {
            let opts = ScanOptions {
                path,
                segment_len: Some(segment_tiles * tile),
                ..ScanOptions::default()
            };
            let segments = layout_for(the_gpu(engine), n, &opts).segments.len();
            assert_eq!(segments, n.div_ceil(segment_tiles * tile));
            for mode in MODES {
                let what = format!("{path} {segment_tiles}-tile segments {mode:?}");
                let o = ScanOptions { mode, ..opts };
                check(
                    engine,
                    &input::<u32>(n, Op::Sum),
                    &o,
                    &format!("u32 {what}"),
                );
                let max = ScanOptions { op: Op::Max, ..o };
                check(
                    engine,
                    &input::<i32>(n, Op::Max),
                    &max,
                    &format!("i32 max {what}"),
                );
                check(
                    engine,
                    &input::<f32>(n, Op::Sum),
                    &o,
                    &format!("f32 {what}"),
                );
            }
        }
    }
}

#[test]
fn two_d_dispatch_matches_cpu() {
    // At most 3 workgroups per dimension: grids of 3 x 3 tiles, segments of 9 tiles.
    let mut g = gpu();
    g.set_dispatch_limit(3);
    assert_eq!(g.grid(7), [3, 3, 1]);
    let engine = Engine::Gpu(Box::new(g));
    let tile = ScanOptions::default().tile();
    for path in PATHS {
        for n in [4 * tile + 1, 9 * tile, 9 * tile + 1, 30 * tile - 3] {
            for mode in MODES {
                let opts = ScanOptions {
                    path,
                    mode,
                    ..ScanOptions::default()
                };
                let what = format!("2-D {path} {mode:?} n={n}");
                check(&engine, &input::<u32>(n, Op::Sum), &opts, &what);
            }
        }
    }
}

#[test]
fn forced_subgroup_path_is_refused_where_subgroups_do_not_fit() {
    let engine = engine();
    let g = the_gpu(engine);
    assert!(
        g.features.subgroups,
        "lavapipe has subgroups; the subgroup path must be tested"
    );
    // Workgroups smaller than a subgroup cannot hold full subgroups.
    let opts = ScanOptions {
        path: Path::Subgroup,
        tunables: Some(Tunables {
            wg_size: 4,
            ..Tunables::DEFAULT
        }),
        ..ScanOptions::default()
    };
    if g.features.subgroup_size[1] > 4 {
        let err = scan(engine, &[1u32, 2], &opts).unwrap_err();
        assert!(err.to_string().contains("subgroup path needs"), "{err:#}");
    }
    let err = scan(
        engine,
        &[1u32],
        &ScanOptions {
            tunables: Some(Tunables {
                wg_size: 48,
                ..Tunables::DEFAULT
            }),
            ..ScanOptions::default()
        },
    )
    .unwrap_err();
    assert!(err.to_string().contains("not a power of two"), "{err:#}");
    assert_eq!(WG_SIZE, ScanOptions::default().tunables().wg_size);
}

/// The CPU backend runs the native engine; integer sums equal the reference's exactly.
#[test]
fn cpu_backend_equals_the_reference() {
    let data = input::<i32>(1_000_000, Op::Sum);
    let opts = ScanOptions::default();
    assert_eq!(
        scan(&Engine::Cpu, &data, &opts).unwrap(),
        scan_cpu(&data, Op::Sum, Mode::Exclusive)
    );
}

// Issue 24: an f32 sum whose running total leaves f32's range gave finite sums after the
// overflow on the CPU engine (it adds in f64) and infinity on the GPU: both refuse it now,
// at the same element; a total that stays in range is still summed.
#[test]
fn f32_sums_past_the_range_are_refused_on_every_engine() {
    let data = [3e38f32, 3e38, -3e38, 1.0, 3e38, -3e38, -3e38, 5.0];
    for mode in MODES {
        let opts = ScanOptions {
            op: Op::Sum,
            mode,
            ..ScanOptions::default()
        };
        for e in [&Engine::Cpu, engine()] {
            let err = scan(e, &data, &opts).unwrap_err().to_string();
            let at = if mode == Mode::Inclusive { 1 } else { 2 };
            assert!(
                err.starts_with(&format!("element {at}: the running sum passes f32's range")),
                "{mode:?}: {err}"
            );
        }
        let fine = [3e38f32, -3e38, 3e38, 1.0];
        for e in [&Engine::Cpu, engine()] {
            assert!(scan(e, &fine, &opts).is_ok());
        }
    }
}

// ---- the command line ----

fn write_file(path: &FsPath, bytes: &[u8]) {
    std::fs::write(path, bytes).unwrap();
}

fn npy(data: Data) -> Vec<u8> {
    let mut buf = Vec::new();
    array::encode(&mut buf, Format::Npy, &Array::vector(data)).unwrap();
    buf
}

/// Runs gpukit with `stdin` on its standard input.
fn run_with_stdin(dir: &FsPath, args: &[&str], stdin: &[u8]) -> crate::util::Run {
    use std::io::Write;
    let mut child = crate::util::gpukit()
        .args(args)
        .current_dir(dir)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(stdin).unwrap();
    let out = child.wait_with_output().unwrap();
    crate::util::Run {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

#[test]
fn scan_prints_json_on_stdout() {
    let dir = tempdir();
    write_file(&dir.path().join("v.txt"), b"3 1 4\n1, 5\n");
    let r = run_in(Some(dir.path()), &["scan", "v.txt"]);
    r.code(0);
    assert_eq!(r.stdout, "[0, 3, 4, 8, 9]\n");
    assert_eq!(r.stderr, "");
    let r = run_in(
        Some(dir.path()),
        &["scan", "v.txt", "--inclusive", "--op", "max", "-o", "-"],
    );
    r.code(0);
    assert_eq!(r.stdout, "[3, 3, 4, 4, 5]\n");
    let r = run_in(
        Some(dir.path()),
        &["scan", "v.txt", "--op", "min", "--dtype", "i32"],
    );
    r.code(0);
    assert_eq!(r.stdout, "[2147483647, 3, 1, 1, 1]\n");
    write_file(&dir.path().join("e.json"), b"[]");
    let r = run_in(Some(dir.path()), &["scan", "e.json"]);
    r.code(0);
    assert_eq!(r.stdout, "[]\n");
}

#[test]
fn a_byte_order_mark_keeps_the_first_value() {
    let dir = tempdir();
    write_file(&dir.path().join("bom.csv"), b"\xEF\xBB\xBF1\n2\n");
    let r = run_in(Some(dir.path()), &["scan", "bom.csv", "--inclusive"]);
    r.code(0);
    assert_eq!(r.stdout, "[1, 3]\n");
}

#[test]
fn a_csv_header_is_detected_or_named() {
    let dir = tempdir();
    // Names: skipped when detected; numbers as names (years) are data unless --header.
    write_file(&dir.path().join("names.csv"), b"count\n3\n1\n4\n");
    write_file(&dir.path().join("years.csv"), b"2024\n3\n1\n4\n");
    let r = run_in(Some(dir.path()), &["scan", "names.csv", "--inclusive"]);
    r.code(0);
    assert_eq!(r.stdout, "[3, 4, 8]\n");
    let r = run_in(Some(dir.path()), &["scan", "years.csv", "--inclusive"]);
    r.code(0);
    assert_eq!(r.stdout, "[2024, 2027, 2028, 2032]\n");
    let r = run_in(
        Some(dir.path()),
        &["scan", "years.csv", "--inclusive", "--header"],
    );
    r.code(0);
    assert_eq!(r.stdout, "[3, 4, 8]\n");
    // --no-header: a line of names is an error naming the file and the line.
    let r = run_in(Some(dir.path()), &["scan", "names.csv", "--no-header"]);
    r.code(1);
    assert!(
        r.stderr
            .contains("names.csv: line 1, value 1: \"count\" is not a number"),
        "{}",
        r.stderr
    );
    let r = run_in(
        Some(dir.path()),
        &["scan", "names.csv", "--header", "--no-header"],
    );
    r.code(2);
}

#[test]
fn json_with_infinities_reads_back() {
    // An exclusive f32 min starts with +inf; gpukit reads back the JSON it wrote.
    let dir = tempdir();
    write_file(&dir.path().join("v.txt"), b"2.5 -1 7\n");
    run_in(
        Some(dir.path()),
        &[
            "scan", "v.txt", "--dtype", "f32", "--op", "min", "-o", "m.json",
        ],
    )
    .code(0);
    let written = std::fs::read_to_string(dir.path().join("m.json")).unwrap();
    assert_eq!(written, "[Infinity, 2.5, -1.0]\n");
    let r = run_in(
        Some(dir.path()),
        &["scan", "m.json", "--inclusive", "--op", "max"],
    );
    r.code(0);
    assert_eq!(r.stdout, "[Infinity, Infinity, Infinity]\n");
}

#[test]
fn every_input_and_output_format_round_trips() {
    let dir = tempdir();
    let d = dir.path();
    let values: Vec<i32> = input::<i32>(5000, Op::Sum).iter().map(|v| v / 4).collect();
    let want = Data::I32(scan_cpu(&values, Op::Sum, Mode::Inclusive));
    let text: Vec<String> = values.iter().map(|v| v.to_string()).collect();
    write_file(&d.join("in.npy"), &npy(Data::I32(values.clone())));
    write_file(
        &d.join("in.json"),
        format!("[{}]", text.join(", ")).as_bytes(),
    );
    write_file(&d.join("in.txt"), text.join("\n").as_bytes());
    write_file(&d.join("in.csv"), text.join(",").as_bytes());
    write_file(&d.join("in.bin"), bytemuck::cast_slice(&values));
    write_file(&d.join("in.dat"), bytemuck::cast_slice(&values));
    let inputs: [(&str, &[&str]); 6] = [
        ("in.npy", &[]),
        ("in.json", &["--dtype", "i32"]),
        ("in.txt", &[]),
        ("in.csv", &[]),
        ("in.bin", &["--dtype", "i32"]),
        ("in.dat", &["--dtype", "i32"]),
    ];
    let outputs = [
        ("out.npy", Format::Npy),
        ("out.json", Format::Json),
        ("out.txt", Format::Text),
        ("out.csv", Format::Text),
        ("out.bin", Format::Bin),
    ];
    for (file, flags) in inputs {
        for (out, format) in outputs {
            let mut args = vec!["scan", file, "--inclusive", "-o", out];
            args.extend_from_slice(flags);
            run_in(Some(d), &args).code(0);
            let got = array::read(&d.join(out), format, Some(array::DType::I32)).unwrap();
            assert_eq!(got.data, want, "{file} -> {out}");
            assert_eq!(got.shape, vec![5000], "{file} -> {out}");
        }
        // The same file through stdin.
        let format = match file.rsplit('.').next().unwrap() {
            "npy" => "npy",
            "json" => "json",
            "txt" | "csv" => "text",
            _ => "bin",
        };
        let mut args = vec![
            "scan",
            "-",
            "--inclusive",
            "--format",
            format,
            "--dtype",
            "i32",
        ];
        args.truncate(if format == "npy" { 5 } else { 7 });
        let r = run_with_stdin(d, &args, &std::fs::read(d.join(file)).unwrap());
        r.code(0);
        let got = array::parse(r.stdout.as_bytes(), Format::Json, Some(array::DType::I32)).unwrap();
        assert_eq!(got.data, want, "stdin {file}");
    }
    // u32 and f32 .npy keep their dtype.
    write_file(&d.join("u.npy"), &npy(Data::U32(vec![u32::MAX, 2, 3])));
    run_in(Some(d), &["scan", "u.npy", "-o", "u_out.npy"]).code(0);
    let got = array::read(&d.join("u_out.npy"), Format::Npy, None).unwrap();
    assert_eq!(got.data, Data::U32(vec![0, u32::MAX, 1]));
    write_file(&d.join("f.npy"), &npy(Data::F32(vec![0.5, 0.25, -2.0])));
    run_in(
        Some(d),
        &["scan", "f.npy", "-o", "f_out.npy", "--inclusive"],
    )
    .code(0);
    let got = array::read(&d.join("f_out.npy"), Format::Npy, None).unwrap();
    assert_eq!(got.data, Data::F32(vec![0.5, 0.75, -1.25]));
}

#[test]
fn cpu_backend_gives_the_same_file() {
    let dir = tempdir();
    let d = dir.path();
    let values = input::<u32>(3000, Op::Sum);
    write_file(&d.join("in.npy"), &npy(Data::U32(values)));
    run_in(Some(d), &["scan", "in.npy", "-o", "gpu.npy"]).code(0);
    run_in(
        Some(d),
        &["--backend", "cpu", "scan", "in.npy", "-o", "cpu.npy"],
    )
    .code(0);
    assert_eq!(
        std::fs::read(d.join("gpu.npy")).unwrap(),
        std::fs::read(d.join("cpu.npy")).unwrap()
    );
}

/// Runs a failing scan in a fresh folder holding `files`, writing to out.npy: one error line
/// with `needle`, exit `code`, and nothing left besides the inputs.
#[track_caller]
fn fails(files: &[(&str, &[u8])], args: &[&str], code: i32, needle: &str) {
    let dir = tempdir();
    for (name, bytes) in files {
        write_file(&dir.path().join(name), bytes);
    }
    let mut all = vec!["scan"];
    all.extend_from_slice(args);
    all.extend_from_slice(&["-o", "out.npy"]);
    run_in(Some(dir.path()), &all)
        .code(code)
        .one_error_line(needle);
    let left = std::fs::read_dir(dir.path()).unwrap().count();
    assert_eq!(left, files.len(), "scan {args:?} left files behind");
}

fn npy_with(descr: &str, shape: &str, data: &[u8]) -> Vec<u8> {
    let dict = format!("{{'descr': '{descr}', 'fortran_order': False, 'shape': {shape}, }}");
    let pad = (10 + dict.len() + 1).next_multiple_of(64) - 10 - dict.len() - 1;
    let header = format!("{dict}{}\n", " ".repeat(pad));
    let mut buf = b"\x93NUMPY\x01\x00".to_vec();
    buf.extend((header.len() as u16).to_le_bytes());
    buf.extend(header.as_bytes());
    buf.extend(data);
    buf
}

#[test]
fn bad_inputs_fail_in_one_line_and_write_nothing() {
    fails(&[], &["missing.npy"], 1, "missing.npy: cannot read");
    fails(
        &[("v.dat", b"1 2")],
        &["v.dat"],
        2,
        "v.dat: unknown extension",
    );
    let two_d = npy_with("<u4", "(2, 2)", &[0; 16]);
    fails(
        &[("m.npy", &two_d)],
        &["m.npy"],
        1,
        "m.npy: expected a 1-D array, got shape [2, 2]",
    );
    // Big-endian, float64 and float16 arrays are read now (tests/npy.rs); what is no real
    // number is not, and a value that does not fit the asked dtype is named.
    let complex = npy_with("<c8", "(1,)", &[0; 8]);
    fails(
        &[("c.npy", &complex)],
        &["c.npy"],
        1,
        "c.npy: dtype <c8 is not supported by scan (real numbers, read as uint32, int32 or float32)",
    );
    // Strings, as docs/scan.md lists beside complex numbers.
    let strings = npy_with("<U1", "(1,)", &[b'a', 0, 0, 0]);
    fails(
        &[("s.npy", &strings)],
        &["s.npy"],
        1,
        "s.npy: dtype <U1 is not supported by scan (real numbers, read as uint32, int32 or float32)",
    );
    let i32s = npy_with("<i4", "(1,)", &(-1i32).to_le_bytes());
    fails(
        &[("i.npy", &i32s)],
        &["i.npy", "--dtype", "u32"],
        1,
        "i.npy: element [0]: -1 does not fit u32",
    );
    fails(
        &[("v.json", b"[1, 2,, 3]")],
        &["v.json"],
        1,
        "v.json: not valid JSON: expected value at line 1 column 7",
    );
    // A shape whose byte count overflows: (2^62 + 3,) u32 with 16 bytes of data.
    let huge = npy_with("<u4", "(4611686018427387907,)", &[1; 16]);
    fails(
        &[("huge.npy", &huge)],
        &["huge.npy"],
        1,
        "huge.npy: shape [4611686018427387907] of u32 elements overflows",
    );
    fails(
        &[("v.json", b"[1, 18446744073709551616]")],
        &["v.json"],
        1,
        "v.json: element [1]: 18446744073709551616 does not fit u32",
    );
    fails(
        &[("v.json", b"[1, \"x\"]")],
        &["v.json"],
        1,
        "v.json: element [1] is not a number",
    );
    fails(
        &[("v.json", b"[1, -2]")],
        &["v.json", "--dtype", "u32"],
        1,
        "v.json: element [1]: -2 does not fit u32",
    );
    fails(
        &[("v.json", b"[[1], [2]]")],
        &["v.json"],
        1,
        "expected a 1-D array, got shape [2, 1]",
    );
    fails(
        &[("v.txt", b"1 2\n3 4x 5\n")],
        &["v.txt"],
        1,
        "v.txt: line 2, value 2: \"4x\" is not a number",
    );
    fails(
        &[("v.csv", b"1,2.5")],
        &["v.csv", "--dtype", "i32"],
        1,
        "v.csv: line 1, value 2: 2.5 is not an integer (i32)",
    );
    fails(
        &[("v.bin", &[0; 7])],
        &["v.bin", "--dtype", "u32"],
        1,
        "v.bin: 7 bytes is not a whole number of u32 elements",
    );
    fails(
        &[("v.bin", &[0; 8])],
        &["v.bin"],
        2,
        "v.bin: raw .bin input needs --dtype",
    );
    fails(
        &[("v.txt", b"1")],
        &["-"],
        2,
        "reading stdin (-) needs --format",
    );
    fails(
        &[("v.txt", b"1")],
        &["v.txt", "--op", "mean"],
        2,
        "invalid value 'mean'",
    );
    fails(
        &[("v.txt", b"1")],
        &["v.txt", "--exclusive", "--inclusive"],
        2,
        "cannot be used with",
    );
}

#[test]
fn bad_output_paths_fail_before_any_work() {
    let dir = tempdir();
    write_file(&dir.path().join("v.txt"), b"1 2 3");
    run_in(Some(dir.path()), &["scan", "v.txt", "-o", "out.xyz"])
        .code(2)
        .one_error_line("out.xyz: unknown output extension");
    run_in(
        Some(dir.path()),
        &["scan", "v.txt", "-o", "no/such/dir/out.npy"],
    )
    .code(1)
    .one_error_line("cannot write here");
    // A failed scan leaves an existing output as it was.
    write_file(&dir.path().join("old.json"), b"[7]\n");
    write_file(&dir.path().join("bad.txt"), b"1 x");
    run_in(Some(dir.path()), &["scan", "bad.txt", "-o", "old.json"]).code(1);
    assert_eq!(
        std::fs::read(dir.path().join("old.json")).unwrap(),
        b"[7]\n"
    );
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 3);
}

#[test]
fn help_describes_scan() {
    let r = run(&["scan", "--help"]);
    r.code(0);
    for needle in [
        "--inclusive",
        "--op",
        "--dtype",
        "--format",
        "Input formats",
    ] {
        assert!(r.stdout.contains(needle), "{needle} not in\n{}", r.stdout);
    }
}

#[test]
fn bench_scan_reports_gelem_per_second() {
    let r = run(&[
        "bench",
        "scan",
        "--reps",
        "2",
        "--warmup",
        "1",
        "--warmup-ms",
        "0",
        "--scan-max-log2",
        "14",
        "--json",
        "-",
    ]);
    r.code(0);
    let doc: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
    let results = doc["results"].as_array().unwrap();
    // 2^14 on the default (subgroup) path, then on the workgroup path.
    let names: Vec<&str> = results
        .iter()
        .map(|m| m["case"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "u32 sum 2^14 subgroup",
            "u32 sum 2^14 workgroup",
            "f32 sum 2^14 subgroup"
        ]
    );
    for m in results {
        assert_eq!(m["op"], "scan");
        assert_eq!(m["unit"], "Gelem/s");
        let median = m["median_ms"].as_f64().unwrap();
        let want = 16384.0 / (median / 1e3) / 1e9;
        let got = m["throughput"].as_f64().unwrap();
        assert!((got - want).abs() < 1e-6 * want, "{m}");
        // u32: one look-back pass, a single dispatch, which has no breakdown. f32: one
        // reduce and two block passes (2^14 is 4 tiles, whose totals fit one), timed apart.
        let passes = if m["case"].as_str().unwrap().starts_with("f32") {
            3
        } else {
            0
        };
        assert_eq!(m["passes"].as_array().unwrap().len(), passes, "{m}");
    }
}
