//! `gpukit bench matmul`.

use anyhow::Result;

use super::{engine, Dims, Matmul, MatmulPlan, Options, Precision, Tunables};
use crate::bench::{Case, Sizes, Unit};
use crate::gpu::Engine;

/// Deterministic values in [-1, 1) for benchmarks.
fn synthetic(len: usize, seed: u32) -> Vec<f32> {
    (0..len as u32)
        .map(|i| {
            let h = (i ^ seed).wrapping_mul(0x9E37_79B9).rotate_left(13) ^ seed;
            (h.wrapping_mul(0x85EB_CA6B) >> 8) as f32 / (1u32 << 23) as f32 - 1.0
        })
        .collect()
}

/// The CPU backend's sizes are capped here, to keep `bench --backend cpu` short.
const CPU_BENCH_MAX: usize = 512;

/// `bench matmul`: f32 `small`^3, `size`^3 and the odd (size+1) x (size-1) x (size-3), in
/// TFLOP/s (2 m n k flops per product).
pub(super) fn cases<'e>(engine: &'e Engine, sizes: &Sizes) -> Result<Vec<Case<'e>>> {
    let size = sizes.matmul;
    let size = match engine {
        Engine::Gpu(_) => size,
        Engine::Cpu => size.min(CPU_BENCH_MAX),
    }
    .max(4);
    let mut shapes = vec![];
    if size > 1024 {
        shapes.push(Dims {
            m: 1024,
            n: 1024,
            k: 1024,
        });
    }
    shapes.push(Dims {
        m: size,
        n: size,
        k: size,
    });
    shapes.push(Dims {
        m: size + 1,
        n: size - 1,
        k: size - 3,
    });
    let mut cases = Vec::new();
    for dims in shapes {
        let a = synthetic(dims.m * dims.k, 1);
        let b = synthetic(dims.k * dims.n, 2);
        let name = if dims.m == dims.n && dims.n == dims.k {
            format!("f32 {}^3", dims.m)
        } else {
            format!("f32 {}x{}x{}", dims.m, dims.n, dims.k)
        };
        let work = dims.flops();
        cases.push(match engine {
            Engine::Gpu(gpu) => {
                let p = Matmul {
                    a: &a,
                    b: &b,
                    dims,
                    trans_a: false,
                    trans_b: false,
                    precision: Precision::F32,
                };
                // The default tiling, not the tune cache's: bench measures the same kernels
                // everywhere.
                let options = Options {
                    tile: Some(Tunables::for_dims(&gpu.limits, dims.m, dims.n)),
                    ..Options::DEFAULT
                };
                let plan = MatmulPlan::new(gpu, &p, &options)?;
                Case::gpu("matmul", name, Unit::Tflops, work, move |batch| {
                    plan.record(batch)
                })
            }
            Engine::Cpu => Case::cpu("matmul", name, Unit::Tflops, work, move || {
                let p = Matmul {
                    a: &a,
                    b: &b,
                    dims,
                    trans_a: false,
                    trans_b: false,
                    precision: Precision::F32,
                };
                std::hint::black_box(engine::matmul(&p).expect("valid bench product"));
            }),
        });
    }
    Ok(cases)
}
