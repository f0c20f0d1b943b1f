//! matmul on the GPU against the f64 CPU reference within the documented bound, on shapes
//! around the tile sizes, both layouts of each operand, both precisions, the split path, and
//! the `gpukit matmul` command with every file format and bad inputs.

use std::path::Path;

use gpukit::gpu::{Engine, Gpu, Timings};
use gpukit::ops::matmul::{
    error_bound, exact, outside_bound, plan_split, run, run_gpu, Dims, Matmul, Options, Precision,
    Tunables,
};

use gpukit::io::array::{encode, read_matrix, Array, DType, Data, Format, Header};

use crate::util::{dump_mismatch, gpu, run_in, shared_gpu, tempdir};

/// Deterministic values in [-2, 2) with a few exact zeros, so cancellation happens.
fn values(len: usize, seed: u64) -> Vec<f32> {
    let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..len)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            if s.is_multiple_of(17) {
                0.0
            } else {
                ((s >> 40) as f32 / (1u64 << 24) as f32) * 4.0 - 2.0
            }
        })
        .collect()
}

struct Case {
    dims: Dims,
    trans_a: bool,
    trans_b: bool,
    precision: Precision,
}

fn case(m: usize, n: usize, k: usize) -> Case {
    Case {
        dims: Dims { m, n, k },
        trans_a: false,
        trans_b: false,
        precision: Precision::F32,
    }
}

/// Runs `c` on `gpu` with `options` and checks every element against the reference. On a
/// mismatch both results are written to target/matmul-mismatch/ before failing.
#[track_caller]
fn check(gpu: &Gpu, c: &Case, options: Options) {
    let Dims { m, n, k } = c.dims;
    let a = values(m * k, (m * 31 + k) as u64);
    let b = values(k * n, (n * 37 + k + 1) as u64);
    let p = Matmul {
        a: &a,
        b: &b,
        dims: c.dims,
        trans_a: c.trans_a,
        trans_b: c.trans_b,
        precision: c.precision,
    };
    let got = run_gpu(gpu, &p, &options, &mut Timings::default()).unwrap();
    let (want, abs) = exact(&p);
    assert_eq!(got.len(), m * n);
    // NaN counts as a mismatch.
    let bad = outside_bound(&got, &want, &abs, k);
    if let Some(i) = bad {
        let what = format!("matmul {m}x{n}x{k} {:?}", c.precision);
        // The GPU's f32 as f64, beside the f64 reference.
        let got_f64: Vec<f64> = got.iter().map(|&x| f64::from(x)).collect();
        let dir = dump_mismatch(&what, "txt", &got_f64, &want, |p, v| {
            std::fs::write(p, format!("{v:?}")).unwrap()
        });
        panic!(
            "{m}x{n}x{k} a_t={} b_t={} {:?} {:?}: C[{}, {}] = {} but the reference is {} \
             (bound {}); both written to {}",
            c.trans_a,
            c.trans_b,
            c.precision,
            options.tile,
            i / n,
            i % n,
            got[i],
            want[i],
            error_bound(k, abs[i]),
            dir.display()
        );
    }
}

fn default_options(g: &Gpu) -> Options {
    Options {
        tile: Some(Tunables::for_limits(&g.limits)),
        ..Options::DEFAULT
    }
}

#[test]
fn small_and_degenerate_shapes() {
    let g = shared_gpu();
    let o = default_options(g);
    for (m, n, k) in [
        (1, 1, 1),
        (1, 1, 300),
        (70, 90, 1),
        (3, 5, 7),
        (64, 64, 64),
        (129, 257, 65),
        (1000, 3, 20),
        (2, 700, 33),
    ] {
        check(g, &case(m, n, k), o);
    }
}

/// Every tiling a default can be, where this adapter runs it, and LARGE's blocks at lavapipe's
/// 32 KiB: 4 x 4 and 8 x 8 blocks, with runs of invocations as rows and as 8 x 4 blocks
/// (`warp_tiles`), steps in one loop and in chunks (`k_chunk`), and a 4 x 8 block.
fn tilings(g: &Gpu) -> Vec<Tunables> {
    use gpukit::tune::Tunable;
    let all = [
        Tunables::SAFE,
        Tunables::FAST,
        Tunables::LARGE,
        Tunables {
            bm: 128,
            ..Tunables::LARGE
        },
        Tunables::MID,
        Tunables {
            tn: 8,
            ..Tunables::MID
        },
    ];
    all.into_iter()
        .filter(|t| t.check(&g.limits).is_ok())
        .collect()
}

// The kernel runs without runtime checks: a group order a tune cache could hold (any positive
// u32 passes `check`) must not wrap the kernel's tile arithmetic to a zero divisor or to
// tiles missed or done twice. 2^31 rows of tiles times 2 or 3 tiles across wrapped before.
#[test]
fn any_group_order_gives_the_product() {
    let g = shared_gpu();
    for group_m in [1, 3, 1 << 28, 1 << 30, 1 << 31, (1 << 31) + 1, u32::MAX] {
        let o = Options {
            tile: Some(Tunables {
                group_m,
                ..Tunables::SAFE
            }),
            ..default_options(g)
        };
        for (m, n, k) in [(200, 100, 9), (130, 190, 5), (700, 65, 3)] {
            check(g, &case(m, n, k), o);
        }
    }
}

#[test]
fn tile_sizes_plus_and_minus_one_in_each_dimension() {
    let g = shared_gpu();
    for tile in tilings(g) {
        let o = Options {
            tile: Some(tile),
            ..default_options(g)
        };
        let (bm, bn, bk) = (tile.bm as usize, tile.bn as usize, tile.bk as usize);
        for d in [-1isize, 0, 1] {
            let f = |x: usize| (x as isize + d) as usize;
            check(g, &case(f(bm), bn, bk), o);
            check(g, &case(bm, f(bn), bk), o);
            check(g, &case(bm, bn, f(bk)), o);
            check(g, &case(f(bm), f(bn), f(2 * bk)), o);
        }
    }
}

#[test]
fn transposed_operands_in_both_configs() {
    let g = shared_gpu();
    for tile in tilings(g) {
        let o = Options {
            tile: Some(tile),
            ..default_options(g)
        };
        for (trans_a, trans_b) in [(true, false), (false, true), (true, true)] {
            for (m, n, k) in [(1, 1, 1), (3, 5, 7), (130, 67, 33), (5, 131, 18)] {
                let c = Case {
                    trans_a,
                    trans_b,
                    ..case(m, n, k)
                };
                check(g, &c, o);
            }
        }
    }
}

#[test]
fn f16_inputs_accumulate_in_f32() {
    let g = shared_gpu();
    assert!(
        g.features.shader_f16,
        "lavapipe has shader-f16; the f16 path must be tested"
    );
    let o = default_options(g);
    for (m, n, k) in [(1, 1, 1), (3, 5, 7), (129, 257, 65), (17, 9, 300)] {
        for (trans_a, trans_b) in [(false, false), (true, true)] {
            let c = Case {
                trans_a,
                trans_b,
                precision: Precision::F16,
                ..case(m, n, k)
            };
            check(g, &c, o);
        }
    }
    let safe = Options {
        tile: Some(Tunables::SAFE),
        ..o
    };
    check(
        g,
        &Case {
            precision: Precision::F16,
            ..case(65, 63, 9)
        },
        safe,
    );
}

// Against the inputs as given (not f16-rounded), f16 adds 2 eps_f16 sum|a||b| to the bound.
#[test]
fn f16_is_within_its_documented_bound_of_the_f32_inputs() {
    let g = gpu();
    let (m, n, k) = (40, 30, 50);
    let (a, b) = (values(m * k, 5), values(k * n, 6));
    let p = |precision| Matmul {
        a: &a,
        b: &b,
        dims: Dims { m, n, k },
        trans_a: false,
        trans_b: false,
        precision,
    };
    let got = run(
        &Engine::Gpu(Box::new(g)),
        &p(Precision::F16),
        &Options::DEFAULT,
        &mut Timings::default(),
    )
    .unwrap();
    let (want, abs) = exact(&p(Precision::F32));
    let eps16 = half::f16::EPSILON.to_f64();
    for i in 0..m * n {
        let bound = error_bound(k, abs[i]) + 2.0 * eps16 * abs[i];
        assert!((got[i] as f64 - want[i]).abs() <= bound, "C[{i}]");
    }
}

#[test]
fn f16_without_the_feature_is_a_clear_error() {
    let mut g = gpu();
    g.features.shader_f16 = false;
    let (a, b) = (vec![1.0; 4], vec![1.0; 4]);
    let p = Matmul {
        a: &a,
        b: &b,
        dims: Dims { m: 2, n: 2, k: 2 },
        trans_a: false,
        trans_b: false,
        precision: Precision::F16,
    };
    let err = run(
        &Engine::Gpu(Box::new(g)),
        &p,
        &Options::DEFAULT,
        &mut Timings::default(),
    )
    .unwrap_err();
    assert!(
        err.to_string().contains("needs the shader-f16 feature"),
        "{err:#}"
    );
}

#[test]
fn split_into_blocks_along_m_n_and_k_matches_the_reference() {
    let g = shared_gpu();
    let tile = Tunables::for_limits(&g.limits);
    // 8 KiB bindings: 2048 f32 per block of A, B or C.
    let o = Options {
        tile: Some(tile),
        max_binding: Some(8192),
    };
    for (m, n, k, ta, tb) in [
        (200, 150, 90, false, false),
        (67, 300, 41, true, false),
        (150, 67, 2500, false, true),
        (3, 3000, 5, true, true),
    ] {
        let c = Case {
            trans_a: ta,
            trans_b: tb,
            ..case(m, n, k)
        };
        let a = vec![0.0; m * k];
        let b = vec![0.0; k * n];
        let p = Matmul {
            a: &a,
            b: &b,
            dims: c.dims,
            trans_a: ta,
            trans_b: tb,
            precision: Precision::F32,
        };
        let split = plan_split(&p, tile, 8192, u64::MAX).unwrap();
        assert!(split.mc < m || split.nc < n || split.kc < k, "{split:?}");
        check(g, &c, o);
    }
    // K alone is too long for a binding: chunks of K accumulate into C.
    let (a, b) = (vec![0.0; 4 * 2500], vec![0.0; 2500 * 4]);
    let p = Matmul {
        a: &a,
        b: &b,
        dims: Dims {
            m: 4,
            n: 4,
            k: 2500,
        },
        trans_a: false,
        trans_b: false,
        precision: Precision::F32,
    };
    assert!(plan_split(&p, tile, 8192, u64::MAX).unwrap().kc < 2500);
    check(g, &case(4, 4, 2500), o);
    check(
        g,
        &Case {
            precision: Precision::F16,
            ..case(4, 4, 2500)
        },
        o,
    );
}

#[test]
fn many_tiles_across_a_2d_dispatch_grid() {
    // A per-dimension limit of 3 workgroups makes the 9 x 5 tiles of C a 2-D grid and forces
    // chunks of at most 9 tiles.
    let mut g = gpu();
    g.set_dispatch_limit(3);
    let o = Options {
        tile: Some(Tunables::SAFE),
        ..default_options(&g)
    };
    check(&g, &case(9 * 64 - 5, 5 * 64, 12), o);
}

/// The CPU backend runs the native engine (f32 sums): within the documented bound of the
/// product computed by hand in f64.
#[test]
fn cpu_backend_is_within_the_bound_of_the_exact_product() {
    let (m, n, k) = (37, 29, 300);
    let (a, b) = (values(m * k, 1), values(k * n, 2));
    let p = Matmul {
        a: &a,
        b: &b,
        dims: Dims { m, n, k },
        trans_a: true,
        trans_b: false,
        precision: Precision::F32,
    };
    let got = run(&Engine::Cpu, &p, &Options::DEFAULT, &mut Timings::default()).unwrap();
    // By hand: C[i, j] = sum_k A[k, i] B[k, j] (A stored k x m).
    for i in 0..m {
        for j in 0..n {
            let prods = (0..k).map(|kk| a[kk * m + i] as f64 * b[kk * n + j] as f64);
            let want: f64 = prods.clone().sum();
            let abs: f64 = prods.map(f64::abs).sum();
            let err = (got[i * n + j] as f64 - want).abs();
            assert!(
                err <= error_bound(k, abs),
                "C[{i}, {j}] = {} for {want}",
                got[i * n + j]
            );
        }
    }
}

// --- the command line ---

/// A .npy file of `shape` holding `data` in Fortran (column-major) order, as numpy writes
/// `np.asfortranarray(x)`.
fn fortran_npy(rows: usize, cols: usize, c_order: &[f32]) -> Vec<u8> {
    let dict = format!("{{'descr': '<f4', 'fortran_order': True, 'shape': ({rows}, {cols}), }}");
    let pad = (10 + dict.len() + 1).next_multiple_of(64) - 10 - dict.len() - 1;
    let header = format!("{dict}{}\n", " ".repeat(pad));
    let mut buf = b"\x93NUMPY\x01\x00".to_vec();
    buf.extend((header.len() as u16).to_le_bytes());
    buf.extend(header.as_bytes());
    for j in 0..cols {
        for i in 0..rows {
            buf.extend(c_order[i * cols + j].to_le_bytes());
        }
    }
    buf
}

/// Writes a rows x cols matrix in `format` ("npy", "fnpy" for Fortran order, "f16.npy",
/// "json", "csv") and returns its file name.
fn write_matrix(
    dir: &Path,
    stem: &str,
    format: &str,
    rows: usize,
    cols: usize,
    v: &[f32],
) -> String {
    let name = match format {
        "fnpy" => format!("{stem}_f.npy"),
        "f16.npy" => format!("{stem}_h.npy"),
        f => format!("{stem}.{f}"),
    };
    let array = |data| Array {
        shape: vec![rows, cols],
        data,
    };
    let bytes = match format {
        "fnpy" => fortran_npy(rows, cols, v),
        "f16.npy" => encoded(
            Format::Npy,
            &array(Data::F16(
                v.iter().map(|&x| half::f16::from_f32(x)).collect(),
            )),
        ),
        "npy" => encoded(Format::Npy, &array(Data::F32(v.to_vec()))),
        "json" => encoded(Format::Json, &array(Data::F32(v.to_vec()))),
        "csv" => encoded(Format::Text, &array(Data::F32(v.to_vec()))),
        f => panic!("no format {f}"),
    };
    std::fs::write(dir.join(&name), bytes).unwrap();
    name
}

fn encoded(format: Format, a: &Array) -> Vec<u8> {
    let mut buf = Vec::new();
    encode(&mut buf, format, a).unwrap();
    buf
}

/// Small integers and halves: exact in f16, f32 and text, so every format carries them
/// unchanged and the products are exact.
fn exact_values(len: usize, seed: usize) -> Vec<f32> {
    (0..len)
        .map(|i| ((i * 7 + seed * 3) % 11) as f32 * 0.5 - 2.5)
        .collect()
}

fn exact_product(a: &[f32], b: &[f32], m: usize, n: usize, k: usize) -> Vec<f32> {
    let mut c = vec![0.0f32; m * n];
    for i in 0..m {
        for j in 0..n {
            c[i * n + j] = (0..k).map(|kk| a[i * k + kk] * b[kk * n + j]).sum();
        }
    }
    c
}

#[test]
fn every_file_format_round_trips_through_the_cli() {
    let dir = tempdir();
    let (m, n, k) = (5, 3, 7);
    let a = exact_values(m * k, 1);
    let b = exact_values(k * n, 2);
    let want = exact_product(&a, &b, m, n, k);
    for fa in ["npy", "fnpy", "f16.npy", "json", "csv"] {
        for fb in ["npy", "fnpy", "json", "csv"] {
            let an = write_matrix(dir.path(), "a", fa, m, k, &a);
            let bn = write_matrix(dir.path(), "b", fb, k, n, &b);
            for out in ["c.npy", "c.json", "c.csv", "c.txt"] {
                run_in(Some(dir.path()), &["matmul", &an, &bn, "-o", out]).code(0);
                let format = Format::from_path(Path::new(out)).unwrap();
                let c = read_matrix(
                    &dir.path().join(out),
                    format,
                    Some(DType::F32),
                    Header::Detect,
                )
                .unwrap();
                assert_eq!(c.shape, vec![m, n], "{fa} {fb} {out}");
                assert_eq!(c.data, Data::F32(want.clone()), "{fa} {fb} {out}");
            }
        }
    }
}

#[test]
fn json_on_stdout_without_output_and_cpu_backend_agrees() {
    let dir = tempdir();
    std::fs::write(dir.path().join("a.csv"), "1,2,3\n4,5,6\n").unwrap();
    std::fs::write(dir.path().join("b.json"), "[[1, 0], [0, 1], [1, 1]]").unwrap();
    let want = "[\n  [4.0, 5.0],\n  [10.0, 11.0]\n]\n";
    for backend in [&[][..], &["--backend", "cpu"][..]] {
        let mut args = backend.to_vec();
        args.extend(["matmul", "a.csv", "b.json"]);
        let r = run_in(Some(dir.path()), &args);
        r.code(0);
        assert_eq!(r.stdout, want);
        assert_eq!(r.stderr, "");
        let mut args = backend.to_vec();
        args.extend(["matmul", "a.csv", "b.json", "-o", "-"]);
        assert_eq!(run_in(Some(dir.path()), &args).code(0).stdout, want);
    }
}

#[test]
fn a_csv_header_row_is_skipped_when_named() {
    // Column names that are numbers are a row of data unless --header says otherwise.
    let dir = tempdir();
    std::fs::write(dir.path().join("a.csv"), "10,20,30\n1,2,3\n4,5,6\n").unwrap();
    std::fs::write(dir.path().join("b.csv"), "x,y\n1,0\n0,1\n1,1\n").unwrap();
    let r = run_in(Some(dir.path()), &["matmul", "a.csv", "b.csv", "--header"]);
    r.code(0);
    assert_eq!(r.stdout, "[\n  [4.0, 5.0],\n  [10.0, 11.0]\n]\n");
    let r = run_in(Some(dir.path()), &["matmul", "a.csv", "b.csv"]);
    r.code(0);
    assert_eq!(
        r.stdout,
        "[\n  [40.0, 50.0],\n  [4.0, 5.0],\n  [10.0, 11.0]\n]\n"
    );
}

#[test]
fn a_byte_order_mark_keeps_the_first_row() {
    let dir = tempdir();
    std::fs::write(dir.path().join("a.csv"), "\u{FEFF}1,2\n3,4\n").unwrap();
    std::fs::write(dir.path().join("i.csv"), "1,0\n0,1\n").unwrap();
    let r = run_in(Some(dir.path()), &["matmul", "a.csv", "i.csv"]);
    r.code(0);
    assert_eq!(r.stdout, "[\n  [1.0, 2.0],\n  [3.0, 4.0]\n]\n");
}

#[test]
fn cli_transposes_and_f16() {
    let dir = tempdir();
    let (m, n, k) = (4, 6, 9);
    let a = exact_values(m * k, 3);
    let b = exact_values(k * n, 4);
    let want = exact_product(&a, &b, m, n, k);
    let t = |v: &[f32], rows: usize, cols: usize| -> Vec<f32> {
        (0..rows * cols)
            .map(|i| v[(i % rows) * cols + i / rows])
            .collect()
    };
    write_matrix(dir.path(), "a", "npy", m, k, &a);
    write_matrix(dir.path(), "b", "npy", k, n, &b);
    write_matrix(dir.path(), "at", "npy", k, m, &t(&a, m, k));
    write_matrix(dir.path(), "bt", "npy", n, k, &t(&b, k, n));
    for args in [
        &["a.npy", "b.npy"][..],
        &["at.npy", "b.npy", "--transpose-a"],
        &["a.npy", "bt.npy", "--transpose-b"],
        &["at.npy", "bt.npy", "--transpose-a", "--transpose-b"],
        &[
            "at.npy",
            "bt.npy",
            "--transpose-a",
            "--transpose-b",
            "--dtype",
            "f16",
        ],
    ] {
        let mut all = vec!["matmul"];
        all.extend(args);
        all.extend(["-o", "c.npy"]);
        run_in(Some(dir.path()), &all).code(0);
        let c = read_matrix(&dir.path().join("c.npy"), Format::Npy, None, Header::Detect).unwrap();
        assert_eq!(c.shape, vec![m, n], "{args:?}");
        assert_eq!(c.data, Data::F32(want.clone()), "{args:?}");
    }
}

/// Runs `matmul a b -o c.npy` in `dir` and checks it fails with `code` and one line holding
/// `needle`, leaving no c.npy behind.
#[track_caller]
fn fails(dir: &Path, args: &[&str], code: i32, needle: &str) {
    let mut all = vec!["matmul"];
    all.extend(args);
    all.extend(["-o", "c.npy"]);
    run_in(Some(dir), &all).code(code).one_error_line(needle);
    let left: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.contains("c.npy"))
        .collect();
    assert!(left.is_empty(), "{left:?} left behind by {args:?}");
}

#[test]
fn bad_inputs_fail_in_one_line_naming_the_file() {
    let dir = tempdir();
    let d = dir.path();
    let w = |name: &str, bytes: &[u8]| std::fs::write(d.join(name), bytes).unwrap();
    w("a.csv", b"1,2,3\n4,5,6\n");
    w("b.csv", b"1,2\n3,4\n");
    w("v.json", b"[1, 2, 3, 4, 5]");
    w("empty.csv", b"");
    w("empty.json", b"[[]]");
    w("word.csv", b"1,2\nthree,4\n");
    w("ragged.csv", b"1,2\n3\n");
    w("ragged.json", b"[[1, 2], [3]]");
    w("text.npy", b"1,2\n3,4\n");
    w(
        "npy.json",
        &encoded(Format::Npy, &Array::vector(Data::F32(vec![1.0]))),
    );
    w("big.csv", b"1,70000\n3,4\n");
    let ints = Array {
        shape: vec![2, 2],
        // 2^24 + 1: no float32 holds it (smaller integers are read as floats exactly).
        data: Data::I32(vec![1, 2, 3, 16_777_217]),
    };
    w("ints.npy", &encoded(Format::Npy, &ints));

    fails(
        d,
        &["v.json", "b.csv"],
        1,
        "v.json: expected a 2-D matrix, got shape [5]",
    );
    fails(
        d,
        &["a.csv", "b.csv"],
        1,
        "inner dimensions differ: a.csv is 2x3 and b.csv is 2x2",
    );
    fails(d, &["a.csv", "a.csv"], 1, "a.csv is 2x3 and a.csv is 2x3");
    fails(d, &["empty.csv", "b.csv"], 1, "empty.csv: empty matrix");
    fails(
        d,
        &["b.csv", "empty.json"],
        1,
        "empty.json: empty matrix (shape [1, 0])",
    );
    fails(
        d,
        &["word.csv", "b.csv"],
        1,
        "word.csv: line 2, value 1: \"three\" is not a number",
    );
    fails(d, &["ragged.csv", "b.csv"], 1, "ragged.csv: ragged rows");
    fails(d, &["b.csv", "ragged.json"], 1, "ragged.json: ragged rows");
    fails(
        d,
        &["ints.npy", "b.csv"],
        1,
        "ints.npy: element [1, 1]: 16777217 is not exactly a float32",
    );
    fails(
        d,
        &["text.npy", "b.csv"],
        1,
        "text.npy: not a valid .npy file",
    );
    fails(d, &["b.csv", "npy.json"], 1, "npy.json: not valid JSON");
    fails(d, &["missing.csv", "b.csv"], 1, "missing.csv: cannot read");
    fails(
        d,
        &["big.csv", "b.csv", "--dtype", "f16"],
        1,
        "big.csv: element [0, 1] = 70000 is outside float16's range",
    );
    fails(
        d,
        &["b.xlsx", "b.csv"],
        2,
        "b.xlsx: matmul reads .npy, .json, .csv or .txt",
    );
    fails(
        d,
        &["b.csv", "b.csv", "--dtype", "f64"],
        2,
        "invalid value 'f64'",
    );
    run_in(Some(d), &["matmul", "b.csv", "b.csv", "-o", "c.png"])
        .code(2)
        .one_error_line("c.png: matmul writes .npy, .json, .csv or .txt");
    run_in(Some(d), &["matmul", "b.csv"]).code(2);
}

#[test]
fn bench_matmul_reports_tflops_of_2mnk() {
    let r = crate::util::run(&[
        "bench",
        "matmul",
        "--matmul-size",
        "32",
        "--reps",
        "2",
        "--warmup",
        "1",
        "--warmup-ms",
        "0",
        "--json",
        "-",
    ]);
    r.code(0);
    let doc: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
    let results = doc["results"].as_array().unwrap();
    let cases: Vec<&str> = results
        .iter()
        .map(|m| m["case"].as_str().unwrap())
        .collect();
    assert_eq!(cases, ["f32 32^3", "f32 33x31x29"]);
    for (m, flops) in results
        .iter()
        .zip([2.0 * 32f64.powi(3), 2.0 * 33.0 * 31.0 * 29.0])
    {
        assert_eq!(m["unit"], "TFLOP/s");
        let want = flops / (m["median_ms"].as_f64().unwrap() / 1e3) / 1e12;
        let got = m["throughput"].as_f64().unwrap();
        assert!((got - want).abs() <= 1e-9 * want, "{m}");
    }
}

// Issue 24: a product too large for this machine aborted with an allocation backtrace (CPU
// engine) or a wgpu message; its size is checked first, in one line naming the limit.
#[test]
fn a_product_larger_than_memory_is_one_error_line() {
    let dir = tempdir();
    let d = dir.path();
    let n = 1_000_000;
    let a = write_matrix(d, "a", "npy", n, 1, &vec![1.0; n]);
    let b = write_matrix(d, "b", "npy", 1, n, &vec![1.0; n]);
    for backend in [&["--backend", "cpu"][..], &["--backend", "vulkan"]] {
        let mut args = backend.to_vec();
        args.extend(["matmul", &a, &b, "-o", "c.npy"]);
        run_in(Some(d), &args).code(1).one_error_line(
            "the product 1000000x1000000 of f32 needs 4000.0 GB, more than this machine's memory",
        );
    }
    assert!(!d.join("c.npy").exists());
}
