//! `matmul`: C = op(A) op(B) for f32 (or f16-input) matrices, tiled in workgroup memory with
//! register blocking; split into blocks when a matrix exceeds one storage binding. The CPU
//! reference accumulates in f64; docs/matmul.md gives the error bound between the two.

use std::ops::Range;
use std::sync::OnceLock;

use anyhow::{bail, ensure, Result};
use half::f16;

use crate::bench::{Case, Unit};
use crate::gpu::{Batch, Engine, Gpu, Kernel, Shader, Usage};
use crate::shader;

pub mod engine;

/// The element type A and B are multiplied in. Accumulation is f32 either way.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum Precision {
    /// Inputs used as f32 (f16 inputs convert exactly).
    #[default]
    F32,
    /// Inputs rounded to f16 (exact when they already are f16), products summed in f32.
    F16,
}

impl Precision {
    fn size(self) -> u64 {
        match self {
            Precision::F32 => 4,
            Precision::F16 => 2,
        }
    }

    /// An input value as the kernel sees it.
    fn round(self, x: f32) -> f32 {
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
    fn check(&self) -> Result<()> {
        let Dims { m, n, k } = self.dims;
        ensure!(
            m > 0 && n > 0 && k > 0,
            "empty matrix product ({m}x{k} times {k}x{n})"
        );
        ensure!(
            self.a.len() == m * k && self.b.len() == k * n,
            "matmul of {m}x{k} by {k}x{n} got {} and {} elements",
            self.a.len(),
            self.b.len()
        );
        Ok(())
    }

    /// op(A)[i, kk], as the kernel sees it.
    fn a_at(&self, i: usize, kk: usize) -> f32 {
        let Dims { m, k, .. } = self.dims;
        let x = if self.trans_a {
            self.a[kk * m + i]
        } else {
            self.a[i * k + kk]
        };
        self.precision.round(x)
    }

    /// op(B)[kk, j], as the kernel sees it.
    fn b_at(&self, kk: usize, j: usize) -> f32 {
        let Dims { n, k, .. } = self.dims;
        let x = if self.trans_b {
            self.b[j * k + kk]
        } else {
            self.b[kk * n + j]
        };
        self.precision.round(x)
    }
}

/// The product in f64 of the inputs as the kernel sees them (rounded to f16 for
/// `Precision::F16`), and per element sum_k |a_ik b_kj|, which scales the error bound.
pub fn reference(p: &Matmul) -> (Vec<f64>, Vec<f64>) {
    let Dims { m, n, k } = p.dims;
    let mut c = vec![0.0; m * n];
    let mut abs = vec![0.0; m * n];
    for i in 0..m {
        for j in 0..n {
            let (mut sum, mut sum_abs) = (0.0f64, 0.0f64);
            for kk in 0..k {
                let prod = p.a_at(i, kk) as f64 * p.b_at(kk, j) as f64;
                sum += prod;
                sum_abs += prod.abs();
            }
            c[i * n + j] = sum;
            abs[i * n + j] = sum_abs;
        }
    }
    (c, abs)
}

/// The CPU reference and `--backend cpu`: f64 accumulation, rounded to f32 once at the end.
pub fn matmul_cpu(p: &Matmul) -> Vec<f32> {
    reference(p).0.iter().map(|&x| x as f32).collect()
}

/// The documented bound on |c - c_ref| for one element of the GPU result, where c_ref and
/// `abs_sum` = sum_k |a_ik b_kj| come from [`reference`]: (K + 1) eps_f32 abs_sum. For f16
/// the bound is against the f16-rounded inputs; against the inputs as given it grows by
/// 2 eps_f16 abs_sum (docs/matmul.md).
pub fn error_bound(k: usize, abs_sum: f64) -> f64 {
    (k as f64 + 1.0) * f32::EPSILON as f64 * abs_sum
}

/// The tiling of the kernel: the single place its sizes are chosen. C is cut into BM x BN
/// tiles, one per workgroup; each step stages BM x BK of A and BK x BN of B in workgroup
/// memory (twice: double-buffered); each invocation computes a TM x TN block of its tile.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct TileConfig {
    pub bm: u32,
    pub bn: u32,
    pub bk: u32,
    pub tm: u32,
    pub tn: u32,
    /// Tile rows a run of consecutive workgroups goes down before moving right (cache reuse).
    pub group_m: u32,
}

impl TileConfig {
    /// Fits WebGPU's minimum limits (16 KiB of workgroup storage, 256 invocations), so it
    /// runs on every adapter: 64 x 64 tiles, 4 x 4 per invocation, 8.5 KiB.
    pub const SAFE: TileConfig = TileConfig {
        bm: 64,
        bn: 64,
        bk: 8,
        tm: 4,
        tn: 4,
        group_m: 8,
    };
    /// 128 x 128 tiles, 8 x 8 per invocation (64 FMAs per 4 vec4 reads of workgroup memory),
    /// BK 16: 33 KiB, for adapters with more than 32 KiB of workgroup storage (NVIDIA: 48).
    pub const FAST: TileConfig = TileConfig {
        bm: 128,
        bn: 128,
        bk: 16,
        tm: 8,
        tn: 8,
        group_m: 8,
    };
    /// [`TileConfig::FAST`] with BK 8, 16.5 KiB: for 32 KiB adapters (lavapipe, many iGPUs).
    pub const FAST_BK8: TileConfig = TileConfig {
        bk: 8,
        ..TileConfig::FAST
    };

    /// The best configuration the adapter's limits allow. A later `gpukit tune` may measure
    /// instead.
    pub fn for_limits(limits: &wgpu::Limits) -> TileConfig {
        [TileConfig::FAST, TileConfig::FAST_BK8]
            .into_iter()
            .find(|t| t.check(limits).is_ok())
            .unwrap_or(TileConfig::SAFE)
    }

    pub fn wg_size(&self) -> u32 {
        (self.bm / self.tm) * (self.bn / self.tn)
    }

    /// Workgroup memory: two buffers of each tile, rows padded by one vec4.
    pub fn workgroup_bytes(&self) -> u32 {
        2 * self.bk * ((self.bm / 4 + 1) + (self.bn / 4 + 1)) * 16
    }

    /// Whether the kernel can run this configuration on an adapter with `limits`.
    pub fn check(&self, limits: &wgpu::Limits) -> Result<()> {
        let TileConfig {
            bm,
            bn,
            bk,
            tm,
            tn,
            group_m,
        } = *self;
        ensure!(
            matches!(tm, 4 | 8) && matches!(tn, 4 | 8),
            "TM and TN must be 4 or 8"
        );
        ensure!(
            bm % (4 * tm) == 0 && bn % (4 * tn) == 0,
            "BM and BN must be multiples of 4 TM and 4 TN"
        );
        ensure!(bk % 4 == 0 && bk > 0, "BK must be a multiple of 4");
        ensure!(group_m > 0, "GROUP_M must be positive");
        let wg = self.wg_size();
        ensure!(
            bm.max(bn) * bk / 4 <= 4 * wg,
            "a tile must take at most 4 vec4 loads per invocation"
        );
        ensure!(
            wg <= limits.max_compute_invocations_per_workgroup
                && wg <= limits.max_compute_workgroup_size_x,
            "{wg} invocations per workgroup exceed this adapter's limit"
        );
        ensure!(
            self.workgroup_bytes() <= limits.max_compute_workgroup_storage_size,
            "{} bytes of workgroup memory exceed this adapter's {}",
            self.workgroup_bytes(),
            limits.max_compute_workgroup_storage_size
        );
        Ok(())
    }

    fn constants(&self, trans_a: bool, trans_b: bool) -> Vec<(&'static str, f64)> {
        vec![
            ("BM", self.bm as f64),
            ("BN", self.bn as f64),
            ("BK", self.bk as f64),
            ("TM", self.tm as f64),
            ("TN", self.tn as f64),
            ("WG_SIZE", self.wg_size() as f64),
            ("GROUP_M", self.group_m as f64),
            ("A_T", trans_a as u8 as f64),
            ("B_T", trans_b as u8 as f64),
        ]
    }
}

impl std::fmt::Display for TileConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}x{}x{} tiles, {}x{} per invocation, group {}",
            self.bm, self.bn, self.bk, self.tm, self.tn, self.group_m
        )
    }
}

/// How a product runs on a GPU: the tiling, and the largest storage binding a block of A, B
/// or C may take (the adapter's limit; tests lower it to reach the split path cheaply).
#[derive(Clone, Copy, Debug)]
pub struct Options {
    pub tile: TileConfig,
    pub max_binding: u64,
}

impl Options {
    pub fn for_gpu(gpu: &Gpu) -> Options {
        Options {
            tile: TileConfig::for_limits(&gpu.limits),
            max_binding: gpu
                .limits
                .max_storage_buffer_binding_size
                .min(gpu.limits.max_buffer_size),
        }
    }
}

/// Multiplies on the engine: the GPU with [`Options::for_gpu`], or the CPU reference.
pub fn matmul(engine: &Engine, p: &Matmul) -> Result<Vec<f32>> {
    match engine {
        Engine::Cpu => {
            p.check()?;
            Ok(matmul_cpu(p))
        }
        Engine::Gpu(gpu) => matmul_with(gpu, p, Options::for_gpu(gpu)),
    }
}

/// Multiplies on `gpu` with explicit options.
pub fn matmul_with(gpu: &Gpu, p: &Matmul, options: Options) -> Result<Vec<f32>> {
    let plan = MatmulPlan::new(gpu, p, options)?;
    let mut batch = gpu.batch(None);
    plan.record(&mut batch);
    batch.submit()?;
    plan.read(gpu)
}

/// Keep in sync with `Params` in wgsl/matmul.wgsl.
#[repr(C)]
#[derive(Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
struct MatmulParams {
    m: u32,
    n: u32,
    k: u32,
    lda4: u32,
    ldb4: u32,
    ldc4: u32,
    accumulate: u32,
    _pad: u32,
}

/// wgsl/matmul.wgsl with f16 inputs: `enable f16;` and the element alias swapped.
fn f16_source() -> &'static str {
    static SOURCE: OnceLock<String> = OnceLock::new();
    SOURCE.get_or_init(|| {
        let f32_alias = "alias Elem4 = vec4<f32>;";
        let source = shader!("matmul").source;
        assert!(
            source.contains(f32_alias),
            "matmul.wgsl lost its Elem4 alias"
        );
        format!(
            "enable f16;\n{}",
            source.replace(f32_alias, "alias Elem4 = vec4<f16>;")
        )
    })
}

/// Chunk lengths along m, n and k: every block of A, B and C fits one binding.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Split {
    pub mc: usize,
    pub nc: usize,
    pub kc: usize,
}

fn round4(x: usize) -> usize {
    x.next_multiple_of(4)
}

/// Halves the larger dimension of whichever block is too big (m and n before k, so that the
/// K split, which re-reads C, is the last resort) until each block of A, B and C fits
/// `max_binding` bytes and each chunk of C needs at most `max_workgroups` workgroups.
pub fn plan_split(
    p: &Matmul,
    tile: TileConfig,
    max_binding: u64,
    max_workgroups: u64,
) -> Result<Split> {
    let Dims { m, n, k } = p.dims;
    let s = p.precision.size();
    let (mut mc, mut nc, mut kc) = (m, n, k);
    fn half(x: &mut usize, max_binding: u64) -> Result<()> {
        if *x <= 4 {
            bail!("a matrix block cannot be made to fit a {max_binding}-byte storage binding");
        }
        *x = round4(x.div_ceil(2));
        Ok(())
    }
    loop {
        let a = if p.trans_a {
            kc * round4(mc)
        } else {
            mc * round4(kc)
        } as u64
            * s;
        let b = if p.trans_b {
            nc * round4(kc)
        } else {
            kc * round4(nc)
        } as u64
            * s;
        let c = (mc * round4(nc)) as u64 * 4;
        let workgroups =
            mc.div_ceil(tile.bm as usize) as u64 * nc.div_ceil(tile.bn as usize) as u64;
        if c > max_binding || workgroups > max_workgroups {
            if mc >= nc {
                half(&mut mc, max_binding)?
            } else {
                half(&mut nc, max_binding)?
            }
        } else if a > max_binding {
            if mc >= kc {
                half(&mut mc, max_binding)?
            } else {
                half(&mut kc, max_binding)?
            }
        } else if b > max_binding {
            if nc >= kc {
                half(&mut nc, max_binding)?
            } else {
                half(&mut kc, max_binding)?
            }
        } else {
            return Ok(Split { mc, nc, kc });
        }
    }
}

fn chunks(len: usize, chunk: usize) -> Vec<Range<usize>> {
    (0..len)
        .step_by(chunk)
        .map(|s| s..(s + chunk).min(len))
        .collect()
}

/// Rows `rows` and columns `cols` of a row-major matrix with `width` columns, as a row-major
/// block whose rows are zero-padded to `ld` elements, converted by `f`.
fn gather<T: bytemuck::Pod>(
    src: &[f32],
    width: usize,
    rows: Range<usize>,
    cols: Range<usize>,
    ld: usize,
    f: impl Fn(f32) -> T,
) -> Vec<T> {
    let mut out = vec![T::zeroed(); rows.len() * ld];
    for (r, row) in rows.enumerate() {
        let src_row = &src[row * width + cols.start..row * width + cols.end];
        for (o, &x) in out[r * ld..].iter_mut().zip(src_row) {
            *o = f(x);
        }
    }
    out
}

/// One block of a stored matrix on the device, padded to whole vec4 rows.
fn upload_block(
    gpu: &Gpu,
    label: &str,
    src: &[f32],
    width: usize,
    rows: Range<usize>,
    cols: Range<usize>,
    precision: Precision,
) -> (wgpu::Buffer, u32) {
    let ld = round4(cols.len());
    let whole = rows.len() * width == src.len() && cols.len() == width;
    let buffer = match precision {
        // The common case needs no copy: the whole matrix, rows already whole vec4s.
        Precision::F32 if whole && ld == width => gpu.upload(label, Usage::Storage, src),
        Precision::F32 => gpu.upload(
            label,
            Usage::Storage,
            &gather(src, width, rows, cols, ld, |x| x),
        ),
        Precision::F16 => gpu.upload(
            label,
            Usage::Storage,
            &gather(src, width, rows, cols, ld, f16::from_f32),
        ),
    };
    (buffer, (ld / 4) as u32)
}

/// One block of C: its buffer and where it goes.
struct CBlock {
    buffer: wgpu::Buffer,
    rows: Range<usize>,
    cols: Range<usize>,
    ld: usize,
}

/// A product with its blocks on the device, recordable many times (for `bench`).
pub struct MatmulPlan {
    kernel: Kernel,
    /// One dispatch per (C block, K chunk): bind group and workgroup count.
    passes: Vec<(wgpu::BindGroup, u32)>,
    c_blocks: Vec<CBlock>,
    dims: Dims,
    pub split: Split,
    pub tile: TileConfig,
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

impl MatmulPlan {
    pub fn new(gpu: &Gpu, p: &Matmul, options: Options) -> Result<Self> {
        p.check()?;
        check_precision(gpu, p.precision)?;
        let tile = options.tile;
        tile.check(&gpu.limits)?;
        let shader = match p.precision {
            Precision::F32 => shader!("matmul"),
            Precision::F16 => Shader {
                name: "matmul_f16.wgsl",
                source: f16_source(),
            },
        };
        let kernel = gpu.kernel_unrolled(&shader, "main", &tile.constants(p.trans_a, p.trans_b))?;
        let limit = gpu.dispatch_limit as u64;
        let split = plan_split(p, tile, options.max_binding, limit * limit)?;
        let Dims { m, n, k } = p.dims;
        let (m_chunks, n_chunks, k_chunks) = (
            chunks(m, split.mc),
            chunks(n, split.nc),
            chunks(k, split.kc),
        );

        // Blocks of A and B as stored (transposed ones stay transposed).
        let a_blocks: Vec<Vec<(wgpu::Buffer, u32)>> = m_chunks
            .iter()
            .map(|mr| {
                k_chunks
                    .iter()
                    .map(|kr| match p.trans_a {
                        false => upload_block(
                            gpu,
                            "matmul a",
                            p.a,
                            k,
                            mr.clone(),
                            kr.clone(),
                            p.precision,
                        ),
                        true => upload_block(
                            gpu,
                            "matmul a",
                            p.a,
                            m,
                            kr.clone(),
                            mr.clone(),
                            p.precision,
                        ),
                    })
                    .collect()
            })
            .collect();
        let b_blocks: Vec<Vec<(wgpu::Buffer, u32)>> = k_chunks
            .iter()
            .map(|kr| {
                n_chunks
                    .iter()
                    .map(|nr| match p.trans_b {
                        false => upload_block(
                            gpu,
                            "matmul b",
                            p.b,
                            n,
                            kr.clone(),
                            nr.clone(),
                            p.precision,
                        ),
                        true => upload_block(
                            gpu,
                            "matmul b",
                            p.b,
                            k,
                            nr.clone(),
                            kr.clone(),
                            p.precision,
                        ),
                    })
                    .collect()
            })
            .collect();

        let mut passes = Vec::new();
        let mut c_blocks = Vec::new();
        for (mi, mr) in m_chunks.iter().enumerate() {
            for (ni, nr) in n_chunks.iter().enumerate() {
                let ld = round4(nr.len());
                let c = gpu.buffer("matmul c", Usage::Storage, (mr.len() * ld * 4) as u64);
                let workgroups = (mr.len().div_ceil(tile.bm as usize)
                    * nr.len().div_ceil(tile.bn as usize)) as u32;
                for (ki, kr) in k_chunks.iter().enumerate() {
                    let (a, lda4) = &a_blocks[mi][ki];
                    let (b, ldb4) = &b_blocks[ki][ni];
                    let params = MatmulParams {
                        m: mr.len() as u32,
                        n: nr.len() as u32,
                        k: kr.len() as u32,
                        lda4: *lda4,
                        ldb4: *ldb4,
                        ldc4: (ld / 4) as u32,
                        accumulate: (ki > 0) as u32,
                        _pad: 0,
                    };
                    let params = gpu.upload("matmul params", Usage::Uniform, &[params]);
                    passes.push((gpu.bind(&kernel, &[&params, a, b, &c]), workgroups));
                }
                c_blocks.push(CBlock {
                    buffer: c,
                    rows: mr.clone(),
                    cols: nr.clone(),
                    ld,
                });
            }
        }
        Ok(MatmulPlan {
            kernel,
            passes,
            c_blocks,
            dims: p.dims,
            split,
            tile,
        })
    }

    pub fn record(&self, batch: &mut Batch) {
        for (bind, workgroups) in &self.passes {
            batch.dispatch("matmul", &self.kernel, bind, *workgroups);
        }
    }

    /// C, m x n row-major, assembled from its blocks.
    pub fn read(&self, gpu: &Gpu) -> Result<Vec<f32>> {
        let Dims { m, n, .. } = self.dims;
        let mut c = vec![0.0f32; m * n];
        for block in &self.c_blocks {
            let data: Vec<f32> = gpu.read_vec(&block.buffer, block.rows.len() * block.ld)?;
            for (r, row) in block.rows.clone().enumerate() {
                c[row * n + block.cols.start..row * n + block.cols.end]
                    .copy_from_slice(&data[r * block.ld..r * block.ld + block.cols.len()]);
            }
        }
        Ok(c)
    }
}

/// Deterministic values in [-1, 1) for benchmarks.
fn synthetic(len: usize, seed: u32) -> Vec<f32> {
    (0..len as u32)
        .map(|i| {
            let h = (i ^ seed).wrapping_mul(0x9E37_79B9).rotate_left(13) ^ seed;
            (h.wrapping_mul(0x85EB_CA6B) >> 8) as f32 / (1u32 << 23) as f32 - 1.0
        })
        .collect()
}

/// The CPU backend's sizes are capped here: its reference loop would take minutes at 4096.
const CPU_BENCH_MAX: usize = 512;

/// `bench matmul`: f32 `small`^3, `size`^3 and the odd (size+1) x (size-1) x (size-3), in
/// TFLOP/s (2 m n k flops per product).
pub fn bench_cases(engine: &Engine, size: usize) -> Result<Vec<Case<'_>>> {
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
                let plan = MatmulPlan::new(gpu, &p, Options::for_gpu(gpu))?;
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
                std::hint::black_box(matmul_cpu(&p));
            }),
        });
    }
    Ok(cases)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn configs_fit_the_limits_they_are_chosen_for() {
        let webgpu = wgpu::Limits::default();
        assert_eq!(webgpu.max_compute_workgroup_storage_size, 16384);
        TileConfig::SAFE.check(&webgpu).unwrap();
        assert_eq!(TileConfig::for_limits(&webgpu), TileConfig::SAFE);
        let lavapipe = wgpu::Limits {
            max_compute_workgroup_storage_size: 32768,
            ..webgpu.clone()
        };
        assert_eq!(TileConfig::for_limits(&lavapipe), TileConfig::FAST_BK8);
        let nvidia = wgpu::Limits {
            max_compute_workgroup_storage_size: 49152,
            max_compute_invocations_per_workgroup: 1024,
            ..webgpu.clone()
        };
        assert_eq!(TileConfig::for_limits(&nvidia), TileConfig::FAST);
        assert_eq!(TileConfig::FAST.wg_size(), 256);
        let bad = TileConfig {
            tm: 3,
            ..TileConfig::SAFE
        };
        assert!(bad.check(&nvidia).is_err());
    }

    #[test]
    fn split_keeps_every_block_within_the_binding() {
        let a = vec![0.0; 100 * 60];
        let b = vec![0.0; 60 * 30];
        let p = Matmul {
            a: &a,
            b: &b,
            dims: Dims {
                m: 100,
                n: 30,
                k: 60,
            },
            trans_a: false,
            trans_b: false,
            precision: Precision::F32,
        };
        let whole = plan_split(&p, TileConfig::SAFE, 1 << 20, u64::MAX).unwrap();
        assert_eq!(
            whole,
            Split {
                mc: 100,
                nc: 30,
                kc: 60
            }
        );
        // 1 KiB: 256 f32 per block.
        let s = plan_split(&p, TileConfig::SAFE, 1024, u64::MAX).unwrap();
        assert!(s.mc * round4(s.kc) * 4 <= 1024, "{s:?}");
        assert!(s.kc * round4(s.nc) * 4 <= 1024, "{s:?}");
        assert!(s.mc * round4(s.nc) * 4 <= 1024, "{s:?}");
        assert!(s.kc < 60 && s.kc.is_multiple_of(4), "{s:?}");
        assert!(plan_split(&p, TileConfig::SAFE, 32, u64::MAX).is_err());
    }
}
