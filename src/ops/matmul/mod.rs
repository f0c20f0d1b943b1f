//! `matmul`: C = op(A) op(B) for f32 (or f16-input) matrices, tiled in workgroup memory with
//! register blocking; split into blocks when a matrix exceeds one storage binding. The CPU
//! reference accumulates in f64; docs/matmul.md gives the error bound between the two.
//!
//! Files: `reference` (the CPU reference and the error bound), `plan` (the GPU blocks and
//! passes), `tune` (the tiling), `bench`.

mod bench;
pub mod engine;
mod plan;
mod reference;
mod tune;

use anyhow::{bail, ensure, Context, Result};
use half::f16;

use crate::gpu::{Engine, Gpu, Timings};
use crate::tune::Tunable;
pub use plan::{plan_split, MatmulPlan, Split};
pub use reference::{error_bound, exact, outside_bound, reference};
pub use tune::Tunables;

/// `matmul` in the registry.
pub const OP: super::Op = super::Op {
    name: "matmul",
    bench: bench::cases,
    tune: Some(crate::tune::tune::<tune::Tuning>),
    shaders: plan::shaders,
    command: true,
};

/// The element type A and B are multiplied in. Accumulation is f32 either way.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Precision {
    /// Inputs used as f32 (f16 inputs convert exactly).
    #[default]
    F32,
    /// Inputs rounded to f16 (exact when they already are f16), products summed in f32.
    F16,
}

impl Precision {
    pub(super) fn size(self) -> u64 {
        match self {
            Precision::F32 => 4,
            Precision::F16 => 2,
        }
    }

    /// An input value as the kernel sees it.
    pub(super) fn round(self, x: f32) -> f32 {
        match self {
            Precision::F32 => x,
            Precision::F16 => f16::from_f32(x).to_f32(),
        }
    }
}

/// C is m x n; the product runs over k.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Dims {
    pub m: usize,
    pub n: usize,
    pub k: usize,
}

impl Dims {
    /// 2 m n k: the flops of one product.
    pub fn flops(self) -> f64 {
        2.0 * self.m as f64 * self.n as f64 * self.k as f64
    }

    /// The native CPU engine's estimated time for one product: about 15 GFLOP/s a thread
    /// ([`super::cpu_time`]).
    pub fn cpu_estimate(self) -> std::time::Duration {
        super::cpu_time(self.flops() / 15.0, usize::MAX)
    }
}

/// One product. Matrices are row-major; `a` is m x k, or k x m when `trans_a` (C = A^T B);
/// `b` is k x n, or n x k when `trans_b`.
#[derive(Clone, Copy, Debug)]
pub struct Matmul<'a> {
    pub a: &'a [f32],
    pub b: &'a [f32],
    pub dims: Dims,
    pub trans_a: bool,
    pub trans_b: bool,
    pub precision: Precision,
}

impl Matmul<'_> {
    /// The shapes agree, nothing is empty, and f16 inputs fit f16's range.
    pub fn check(&self) -> Result<()> {
        let Dims { m, n, k } = self.dims;
        ensure!(
            m > 0 && n > 0 && k > 0,
            "empty matrix product ({m}x{k} times {k}x{n})"
        );
        // C lives in host memory whole, on every engine: checked before anything is allocated.
        let c_bytes = (m as u128) * (n as u128) * 4;
        let memory = crate::ops::physical_memory().map_or(usize::MAX as u128, u128::from);
        ensure!(
            c_bytes <= memory,
            "the product {m}x{n} of f32 needs {:.1} GB, more than this machine's memory ({:.1} GB)",
            c_bytes as f64 / 1e9,
            memory as f64 / 1e9
        );
        ensure!(
            self.a.len() == m * k && self.b.len() == k * n,
            "matmul of {m}x{k} by {k}x{n} got {} and {} elements",
            self.a.len(),
            self.b.len()
        );
        if self.precision == Precision::F16 {
            let Dims { m, n, k } = self.dims;
            let (a_cols, b_cols) = (
                if self.trans_a { m } else { k },
                if self.trans_b { k } else { n },
            );
            check_f16_range(self.a, a_cols).context("A")?;
            check_f16_range(self.b, b_cols).context("B")?;
        }
        Ok(())
    }

    /// op(A)[i, kk], as the kernel sees it.
    pub(super) fn a_at(&self, i: usize, kk: usize) -> f32 {
        let Dims { m, k, .. } = self.dims;
        let x = if self.trans_a {
            self.a[kk * m + i]
        } else {
            self.a[i * k + kk]
        };
        self.precision.round(x)
    }

    /// op(B)[kk, j], as the kernel sees it.
    pub(super) fn b_at(&self, kk: usize, j: usize) -> f32 {
        let Dims { n, k, .. } = self.dims;
        let x = if self.trans_b {
            self.b[j * k + kk]
        } else {
            self.b[kk * n + j]
        };
        self.precision.round(x)
    }
}

/// How a product runs on a GPU: the tiling, and the largest storage binding a block of A, B
/// or C may take (tests lower it to reach the split path cheaply).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Options {
    /// `None`: the tune cache's choice for this adapter and size, else
    /// [`Tunables::for_dims`].
    pub tile: Option<Tunables>,
    /// `None`: the adapter's limit.
    pub max_binding: Option<u64>,
}

impl Options {
    pub const DEFAULT: Options = Options {
        tile: None,
        max_binding: None,
    };

    /// The tiling of `p` on `gpu`: the one given, else the tune cache's, else the default.
    pub fn tile(&self, gpu: &Gpu, p: &Matmul) -> Tunables {
        let Dims { m, n, k } = p.dims;
        let size = ((m * n * k) as f64).cbrt();
        self.tile
            .or_else(|| crate::tune::choice(gpu, OP.name, size, Tunables::check))
            .unwrap_or_else(|| Tunables::for_dims(&gpu.limits, m, n))
    }

    /// The largest binding a block may take on `gpu`.
    pub fn max_binding(&self, gpu: &Gpu) -> u64 {
        self.max_binding.unwrap_or(
            gpu.limits
                .max_storage_buffer_binding_size
                .min(gpu.limits.max_buffer_size),
        )
    }
}

/// Multiplies on the engine, adding wall time per phase and GPU time per pass to `timings`.
pub fn run(
    engine: &Engine,
    p: &Matmul,
    options: &Options,
    timings: &mut Timings,
) -> Result<Vec<f32>> {
    p.check()?;
    match engine {
        Engine::Cpu => timings.phase("compute", || cpu(p)),
        Engine::Gpu(gpu) => run_gpu(gpu, p, options, timings),
    }
}

/// The GPU arm of [`run`], for callers that hold a [`Gpu`].
pub fn run_gpu(
    gpu: &Gpu,
    p: &Matmul,
    options: &Options,
    timings: &mut Timings,
) -> Result<Vec<f32>> {
    let plan = timings.phase("upload", || MatmulPlan::new(gpu, p, options))?;
    gpu.run_timed(timings, plan.passes(), |b, range| {
        plan.record_passes(b, range)
    })?;
    timings.phase("download", || plan.read(gpu))
}

/// The CPU engine's product: the native engine, within `error_bound` of [`exact`].
fn cpu(p: &Matmul) -> Result<Vec<f32>> {
    engine::matmul(p)
}

/// Checks that every element of a `cols`-column row-major matrix fits float16's range.
pub fn check_f16_range(values: &[f32], cols: usize) -> Result<()> {
    let max = f16::MAX.to_f32();
    if let Some(i) = values.iter().position(|x| x.abs() > max) {
        bail!(
            "element [{}, {}] = {} is outside float16's range (±{max}); use --dtype f32",
            i / cols.max(1),
            i % cols.max(1),
            values[i]
        );
    }
    Ok(())
}

/// Whether `gpu` can multiply in `precision`: f16 needs the shader-f16 feature.
pub fn check_precision(gpu: &Gpu, precision: Precision) -> Result<()> {
    if precision == Precision::F16 && !gpu.features.shader_f16 {
        bail!(
            "f16 matmul needs the shader-f16 feature, which {} does not have; use f32",
            gpu.info.name
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests;
