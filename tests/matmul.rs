//! matmul on the GPU against the f64 CPU reference within the documented bound, on shapes
//! around the tile sizes, both layouts of each operand, both precisions, the split path, and
//! the `gpukit matmul` command with every file format and bad inputs.

use std::cmp::Ordering::{Equal, Less};
use std::path::Path;

use gpukit::gpu::{Engine, Gpu};
use gpukit::ops::matmul::{
    error_bound, matmul, matmul_with, plan_split, reference, Dims, Matmul, Options, Precision,
    TileConfig,
};

use crate::util::gpu;

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
    let got = matmul_with(gpu, &p, options).unwrap();
    let (want, abs) = reference(&p);
    assert_eq!(got.len(), m * n);
    let bad = (0..m * n).find(|&i| {
        // NaN counts as a mismatch.
        let diff = (got[i] as f64 - want[i]).abs();
        !matches!(
            diff.partial_cmp(&error_bound(k, abs[i])),
            Some(Less | Equal)
        )
    });
    if let Some(i) = bad {
        let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("matmul-mismatch");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("gpu.txt"), format!("{got:?}")).unwrap();
        std::fs::write(dir.join("cpu.txt"), format!("{want:?}")).unwrap();
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
    Options::for_gpu(g)
}

#[test]
fn small_and_degenerate_shapes() {
    let g = gpu();
    let o = default_options(&g);
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
        check(&g, &case(m, n, k), o);
    }
}

#[test]
fn tile_sizes_plus_and_minus_one_in_each_dimension() {
    let g = gpu();
    for tile in [TileConfig::SAFE, TileConfig::for_limits(&g.limits)] {
        let o = Options {
            tile,
            ..default_options(&g)
        };
        let (bm, bn, bk) = (tile.bm as usize, tile.bn as usize, tile.bk as usize);
        for d in [-1isize, 0, 1] {
            let f = |x: usize| (x as isize + d) as usize;
            check(&g, &case(f(bm), bn, bk), o);
            check(&g, &case(bm, f(bn), bk), o);
            check(&g, &case(bm, bn, f(bk)), o);
            check(&g, &case(f(bm), f(bn), f(2 * bk)), o);
        }
    }
}

#[test]
fn transposed_operands_in_both_configs() {
    let g = gpu();
    for tile in [TileConfig::SAFE, TileConfig::for_limits(&g.limits)] {
        let o = Options {
            tile,
            ..default_options(&g)
        };
        for (trans_a, trans_b) in [(true, false), (false, true), (true, true)] {
            for (m, n, k) in [(1, 1, 1), (3, 5, 7), (130, 67, 33), (5, 131, 18)] {
                let c = Case {
                    trans_a,
                    trans_b,
                    ..case(m, n, k)
                };
                check(&g, &c, o);
            }
        }
    }
}

#[test]
fn f16_inputs_accumulate_in_f32() {
    let g = gpu();
    assert!(
        g.features.shader_f16,
        "lavapipe has shader-f16; the f16 path must be tested"
    );
    let o = default_options(&g);
    for (m, n, k) in [(1, 1, 1), (3, 5, 7), (129, 257, 65), (17, 9, 300)] {
        for (trans_a, trans_b) in [(false, false), (true, true)] {
            let c = Case {
                trans_a,
                trans_b,
                precision: Precision::F16,
                ..case(m, n, k)
            };
            check(&g, &c, o);
        }
    }
    let safe = Options {
        tile: TileConfig::SAFE,
        ..o
    };
    check(
        &g,
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
    let got = matmul(&Engine::Gpu(Box::new(g)), &p(Precision::F16)).unwrap();
    let (want, abs) = reference(&p(Precision::F32));
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
    let err = matmul(&Engine::Gpu(Box::new(g)), &p).unwrap_err();
    assert!(
        err.to_string().contains("needs the shader-f16 feature"),
        "{err:#}"
    );
}

#[test]
fn split_into_blocks_along_m_n_and_k_matches_the_reference() {
    let g = gpu();
    let tile = TileConfig::for_limits(&g.limits);
    // 8 KiB bindings: 2048 f32 per block of A, B or C.
    let o = Options {
        tile,
        max_binding: 8192,
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
        let split = plan_split(&p, tile, o.max_binding, u64::MAX).unwrap();
        assert!(split.mc < m || split.nc < n || split.kc < k, "{split:?}");
        check(&g, &c, o);
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
    assert!(plan_split(&p, tile, o.max_binding, u64::MAX).unwrap().kc < 2500);
    check(&g, &case(4, 4, 2500), o);
    check(
        &g,
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
        tile: TileConfig::SAFE,
        ..default_options(&g)
    };
    check(&g, &case(9 * 64 - 5, 5 * 64, 12), o);
}

#[test]
fn cpu_backend_is_the_reference() {
    let (m, n, k) = (4, 3, 5);
    let (a, b) = (values(m * k, 1), values(k * n, 2));
    let p = Matmul {
        a: &a,
        b: &b,
        dims: Dims { m, n, k },
        trans_a: true,
        trans_b: false,
        precision: Precision::F32,
    };
    let got = matmul(&Engine::Cpu, &p).unwrap();
    // By hand: C[i, j] = sum_k A[k, i] B[k, j] (A stored k x m).
    for i in 0..m {
        for j in 0..n {
            let want: f64 = (0..k)
                .map(|kk| a[kk * m + i] as f64 * b[kk * n + j] as f64)
                .sum();
            assert_eq!(got[i * n + j], want as f32);
        }
    }
}
