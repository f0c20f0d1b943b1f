//! The GPU side of a product: the kernel (f32 or f16 inputs), blocks of A, B and C that fit
//! one binding each, and one pass per block of C and step along k.

use std::ops::Range;

use anyhow::{bail, Result};
use half::f16;

use super::{check_precision, Dims, Matmul, Options, Precision, Tunables};
use crate::gpu::{Batch, Gpu, Kernel, Usage, Variant};
use crate::shader;
use crate::tune::Tunable;

/// Its WGSL twin is `Params` in wgsl/matmul.wgsl (the shader test checks their fields).
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

crate::ops::params_layout!(MatmulParams {
    m,
    n,
    k,
    lda4,
    ldb4,
    ldc4,
    accumulate
});

/// The variant of wgsl/matmul.wgsl for `precision`: f16 inputs enable f16 and change the
/// element type.
pub(super) fn variant(precision: Precision) -> Variant {
    match precision {
        Precision::F32 => Variant::default(),
        Precision::F16 => Variant {
            name: "f16".into(),
            enables: vec!["f16"],
            decls: vec![("Elem4", "vec4<f16>".into())],
            ..Variant::default()
        },
    }
}

/// Blocks of a `rows` x `cols` operand (stored transposed when `trans`), one per pair of
/// chunks, uploaded as the kernel reads them: block [i][j] covers row chunk i and column
/// chunk j. Each chunk list comes with the full length along it.
fn blocks(
    gpu: &Gpu,
    label: &str,
    data: &[f32],
    trans: bool,
    (row_chunks, rows): (&[Range<usize>], usize),
    (col_chunks, cols): (&[Range<usize>], usize),
    precision: Precision,
) -> Vec<Vec<(wgpu::Buffer, u32)>> {
    row_chunks
        .iter()
        .map(|rr| {
            col_chunks
                .iter()
                .map(|cr| match trans {
                    false => {
                        upload_block(gpu, label, data, cols, rr.clone(), cr.clone(), precision)
                    }
                    true => upload_block(gpu, label, data, rows, cr.clone(), rr.clone(), precision),
                })
                .collect()
        })
        .collect()
}

/// Both variants of the kernel, with the constants of the default tiles on the WebGPU
/// default limits, transposed and not, for the shader tests.
pub(super) fn shaders() -> Vec<crate::ops::ShaderCase> {
    let tile = Tunables::default_for(&wgpu::Limits::default());
    [(Precision::F32, false, false), (Precision::F16, true, true)]
        .map(|(p, ta, tb)| {
            crate::ops::ShaderCase::variant::<MatmulParams>(shader!("matmul"), variant(p))
                .with_overrides(&tile.constants(ta, tb))
        })
        .into()
}

/// Chunk lengths along m, n and k: every block of A, B and C fits one binding.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Split {
    pub mc: usize,
    pub nc: usize,
    pub kc: usize,
}

pub(super) fn round4(x: usize) -> usize {
    x.next_multiple_of(4)
}

/// Halves the larger dimension of whichever block is too big (m and n before k, so that the
/// K split, which re-reads C, is the last resort) until each block of A, B and C fits
/// `max_binding` bytes and each chunk of C needs at most `max_workgroups` workgroups.
pub fn plan_split(
    p: &Matmul,
    tile: Tunables,
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
    pub tile: Tunables,
}

impl MatmulPlan {
    pub fn new(gpu: &Gpu, p: &Matmul, options: &Options) -> Result<Self> {
        p.check()?;
        check_precision(gpu, p.precision)?;
        let tile = options.tile(gpu, p);
        tile.check(&gpu.limits)?;
        let constants = tile.constants(p.trans_a, p.trans_b);
        // SAFETY: wgsl/matmul.wgsl argues each of its indices in range for the constants
        // `Tunables::check` allowed above and for the buffers bound below: A, B and C blocks
        // of whole rows (`upload_block`, and C's `rows * ld`) of the lda4, ldb4 and ldc4
        // vec4s its params give. Its divisors are nonzero (`Matmul::check` refuses empty
        // products, `check` zero tiles, and the kernel caps GROUP_M before multiplying by
        // it), and every loop runs to a constant or a size.
        let kernel = unsafe {
            gpu.kernel_unchecked(
                &shader!("matmul"),
                &variant(p.precision),
                "main",
                &constants,
            )?
        };
        let limit = gpu.dispatch_limit as u64;
        let split = plan_split(p, tile, options.max_binding(gpu), limit * limit)?;
        let Dims { m, n, k } = p.dims;
        let (m_chunks, n_chunks, k_chunks) = (
            chunks(m, split.mc),
            chunks(n, split.nc),
            chunks(k, split.kc),
        );

        // Blocks of A and B as stored (transposed ones stay transposed).
        let a_blocks = blocks(
            gpu,
            "matmul a",
            p.a,
            p.trans_a,
            (&m_chunks, m),
            (&k_chunks, k),
            p.precision,
        );
        let b_blocks = blocks(
            gpu,
            "matmul b",
            p.b,
            p.trans_b,
            (&k_chunks, k),
            (&n_chunks, n),
            p.precision,
        );

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

    /// Passes in all: one per block of C and step along k.
    pub fn passes(&self) -> u64 {
        self.passes.len() as u64
    }

    /// Records every pass.
    pub fn record(&self, batch: &mut Batch) {
        self.record_passes(batch, 0..self.passes());
    }

    /// Records passes `range`, in order.
    pub fn record_passes(&self, batch: &mut Batch, range: std::ops::Range<u64>) {
        for (bind, workgroups) in &self.passes[range.start as usize..range.end as usize] {
            batch.dispatch("matmul", &self.kernel, bind, *workgroups);
        }
    }

    /// C, m x n row-major, assembled from its blocks.
    pub fn read(&self, gpu: &Gpu) -> Result<Vec<f32>> {
        let Dims { m, n, .. } = self.dims;
        let mut c: Vec<f32> = crate::ops::zeroed(m * n, "the product")?;
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
