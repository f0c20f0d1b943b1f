//! The GPU path: one pass, `compare` (wgsl/compare.wgsl), over strips of rows small enough
//! for one storage binding, each with two rows of halo each side for anti-aliasing
//! detection; per-workgroup partials summed on the host.

use anyhow::{bail, Result};

use super::reference::threshold_units;
use super::{layout_mismatch, Comparison, Counts, Options};
use crate::gpu::{Batch, Gpu, Kernel, Timings, Usage};
use crate::io::image::Image;
use crate::ops::{sample_bytes, ShaderCase};
use crate::shader;

// The GPU pass's shape. Keep in sync with wgsl/compare.wgsl.
const WG_SIZE: u32 = 256;
const PER_THREAD: u32 = 16;
const PART_WORDS: usize = 24;
// Rows of halo each side of a strip: anti-aliasing detection looks two pixels away.
const HALO: u32 = 2;

/// The compare kernel, for the shader tests.
pub(super) fn shaders() -> Vec<ShaderCase> {
    vec![ShaderCase::params::<Params>(shader!("compare"))]
}

/// Keep in sync with `Params` in wgsl/compare.wgsl.
#[repr(C)]
#[derive(Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
struct Params {
    width: u32,
    height: u32,
    row0: u32,
    rows: u32,
    buf_row0: u32,
    flags: u32,
    n_ignore: u32,
    t_lo: u32,
    t_hi: u32,
}

const PERCEPTUAL: u32 = 1;
const ANTIALIASING: u32 = 2;
const DRAW: u32 = 4;

/// Comparisons on a GPU.
pub struct CompareGpu<'g> {
    gpu: &'g Gpu,
    /// The most bytes one image strip or the diff strip may take in one binding: the
    /// adapter's limit unless lowered (tests do, to reach the strip path with small images).
    pub binding_bytes: u64,
}

impl<'g> CompareGpu<'g> {
    pub fn new(gpu: &'g Gpu) -> Self {
        CompareGpu {
            gpu,
            binding_bytes: gpu
                .limits
                .max_storage_buffer_binding_size
                .min(gpu.limits.max_buffer_size),
        }
    }

    /// Rows per strip: the strip and its halo must fit one binding, and so must its diff rows.
    fn strip_rows(&self, img: &Image) -> Result<u32> {
        let row_bytes = img.width as u64 * img.channels as u64 * u64::from(img.bit_depth() / 8);
        let by_input = (self.binding_bytes / row_bytes).saturating_sub(2 * HALO as u64);
        let by_diff = self.binding_bytes / (img.width as u64 * 4);
        let rows = by_input.min(by_diff).min(img.height as u64) as u32;
        if rows == 0 {
            bail!(
                "a row of {} pixels is too wide for this adapter's {}-byte bindings",
                img.width,
                self.binding_bytes
            );
        }
        Ok(rows)
    }

    /// The buffers, bind groups and strips that compare images of `img`'s layout and size
    /// under `opts`.
    pub fn plan(&self, img: &Image, opts: &Options) -> Result<ComparePlan> {
        let gpu = self.gpu;
        let (w, c) = (img.width, img.channels as usize);
        let kernel = gpu.kernel(
            &shader!("compare"),
            "main",
            &[
                ("CHANNELS", f64::from(img.channels)),
                ("BITS", f64::from(img.bit_depth())),
            ],
        )?;
        let strip = self.strip_rows(img)?;
        let row_bytes = u64::from(w) * c as u64 * u64::from(img.bit_depth() / 8);
        let buf_rows = u64::from((strip + 2 * HALO).min(img.height));
        let rects: Vec<[u32; 4]> = opts
            .ignore
            .iter()
            .map(|r| [r.x1, r.y1, r.x2, r.y2])
            .collect();
        let max_groups = (u64::from(strip) * u64::from(w)).div_ceil(per_group());
        let diff_bytes = if opts.diff {
            u64::from(strip) * u64::from(w) * 4
        } else {
            0
        };
        let buffers = Buffers {
            src_a: gpu.buffer("compare expected", Usage::Storage, buf_rows * row_bytes),
            src_b: gpu.buffer("compare actual", Usage::Storage, buf_rows * row_bytes),
            ignore: gpu.upload("compare ignore", Usage::Storage, &rects),
            partials: gpu.buffer(
                "compare partials",
                Usage::Storage,
                max_groups * PART_WORDS as u64 * 4,
            ),
            diff: gpu.buffer("compare diff", Usage::Storage, diff_bytes),
        };
        let strips = self.strips(&kernel, &buffers, img, opts, strip, rects.len() as u32);
        Ok(ComparePlan {
            kernel,
            channels: c,
            row_bytes,
            draw: opts.diff,
            buffers,
            strips,
        })
    }

    /// The strips of `strip` rows (the last one shorter) that cover `img`, each with its
    /// params and bind group.
    fn strips(
        &self,
        kernel: &Kernel,
        buffers: &Buffers,
        img: &Image,
        opts: &Options,
        strip: u32,
        n_ignore: u32,
    ) -> Vec<Strip> {
        let (w, h) = (img.width, img.height);
        let t = opts.threshold.map(threshold_units).unwrap_or(0);
        let mut strips = Vec::new();
        let mut row0 = 0u32;
        while row0 < h {
            let rows = strip.min(h - row0);
            let buf_row0 = row0.saturating_sub(HALO);
            let params = self.gpu.upload(
                "compare params",
                Usage::Uniform,
                &[Params {
                    width: w,
                    height: h,
                    row0,
                    rows,
                    buf_row0,
                    flags: flags(opts),
                    n_ignore,
                    t_lo: t as u32,
                    t_hi: (t >> 32) as u32,
                }],
            );
            let b = buffers;
            let bind = self.gpu.bind(
                kernel,
                &[&params, &b.src_a, &b.src_b, &b.ignore, &b.partials, &b.diff],
            );
            strips.push(Strip {
                row0,
                rows,
                buf_row0,
                buf_end: (row0 + rows + HALO).min(h),
                groups: (u64::from(rows) * u64::from(w)).div_ceil(per_group()) as u32,
                bind,
                _params: params,
            });
            row0 += rows;
        }
        strips
    }

    /// Compares `a` (expected) and `b` (actual), of one layout, as [`super::reference`] does.
    pub fn compare(
        &self,
        a: &Image,
        b: &Image,
        opts: &Options,
        timings: &mut Timings,
    ) -> Result<Comparison> {
        assert!(layout_mismatch(a, b).is_none(), "compare needs one layout");
        let gpu = self.gpu;
        let plan = timings.phase("pipeline", || self.plan(a, opts))?;
        let (w, h) = (a.width, a.height);
        let (bytes_a, bytes_b) = (sample_bytes(&a.samples), sample_bytes(&b.samples));
        let mut counts = Counts::zeros(plan.channels);
        let mut rgb = if opts.diff {
            vec![0u8; a.pixels() * 3]
        } else {
            Vec::new()
        };
        for (i, s) in plan.strips.iter().enumerate() {
            timings.phase("upload", || plan.upload(gpu, s, &bytes_a, &bytes_b));
            gpu.run_timed(timings, 1, |batch, _| plan.record(batch, i))?;
            let pixels = u64::from(s.rows) * u64::from(w);
            let words: Vec<u32> = timings.phase("download", || {
                gpu.read_vec(&plan.buffers.partials, s.groups as usize * PART_WORDS)
            })?;
            counts = counts.add(sum_partials(&words, plan.channels, pixels));
            if opts.diff {
                let start = s.row0 as usize * w as usize * 3;
                let out = &mut rgb[start..start + pixels as usize * 3];
                timings.phase("download", || {
                    gpu.read_with(&plan.buffers.diff, 0, pixels * 4, |bytes| {
                        for (o, px) in out.chunks_exact_mut(3).zip(bytes.chunks_exact(4)) {
                            o.copy_from_slice(&px[..3]);
                        }
                    })
                })?;
            }
        }
        Ok(Comparison {
            counts,
            diff: opts.diff.then(|| Image::new_u8(w, h, 3, rgb)),
        })
    }
}

/// One strip of rows and its pass.
struct Strip {
    row0: u32,
    rows: u32,
    /// The rows held in the buffers: the strip and its halo, [buf_row0, buf_end).
    buf_row0: u32,
    buf_end: u32,
    groups: u32,
    bind: wgpu::BindGroup,
    _params: wgpu::Buffer,
}

/// The device buffers of one plan.
struct Buffers {
    src_a: wgpu::Buffer,
    src_b: wgpu::Buffer,
    ignore: wgpu::Buffer,
    partials: wgpu::Buffer,
    diff: wgpu::Buffer,
}

/// One layout's comparison on the device: reusable for every pair of that layout and size.
pub struct ComparePlan {
    kernel: Kernel,
    channels: usize,
    row_bytes: u64,
    draw: bool,
    buffers: Buffers,
    strips: Vec<Strip>,
}

impl ComparePlan {
    /// Writes strip `s`'s rows (with halo) of both images' bytes into the device buffers.
    fn upload(&self, gpu: &Gpu, s: &Strip, a: &[u8], b: &[u8]) {
        let from = (u64::from(s.buf_row0) * self.row_bytes) as usize;
        let to = (u64::from(s.buf_end) * self.row_bytes) as usize;
        gpu.write_padded(&self.buffers.src_a, &a[from..to]);
        gpu.write_padded(&self.buffers.src_b, &b[from..to]);
    }

    /// Writes both images whole, for a plan of one strip that draws (the bench case).
    pub(super) fn upload_single(&self, gpu: &Gpu, a: &[u8], b: &[u8]) -> Result<()> {
        if self.strips.len() != 1 || !self.draw {
            bail!("the compare benchmark pair must fit one strip");
        }
        self.upload(gpu, &self.strips[0], a, b);
        Ok(())
    }

    /// Records strip `i`'s pass.
    pub(super) fn record(&self, batch: &mut Batch, i: usize) {
        let s = &self.strips[i];
        batch.dispatch("compare", &self.kernel, &s.bind, s.groups);
    }
}

/// The workgroups' partials (PART_WORDS words each) summed into the counts of `pixels` pixels.
fn sum_partials(words: &[u32], channels: usize, pixels: u64) -> Counts {
    let mut k = Counts::zeros(channels);
    k.pixels = pixels;
    for part in words.chunks_exact(PART_WORDS) {
        for (ch, s) in k.channels.iter_mut().enumerate() {
            let p = &part[ch * 5..ch * 5 + 5];
            s.differing += u64::from(p[0]);
            s.max_abs = s.max_abs.max(p[1]);
            s.sum_abs += u64::from(p[2]);
            s.sum_sq += u128::from(p[3]) | u128::from(p[4]) << 32;
        }
        k.differing += u64::from(part[20]);
        k.antialiased += u64::from(part[21]);
        k.ignored += u64::from(part[22]);
    }
    k
}

/// Workgroups' pixels: each compares WG_SIZE * PER_THREAD consecutive pixels.
fn per_group() -> u64 {
    u64::from(WG_SIZE * PER_THREAD)
}

/// The pass's flags for `opts`: perceptual distance, anti-aliasing detection, drawing.
fn flags(opts: &Options) -> u32 {
    let mut flags = 0;
    if opts.threshold.is_some() {
        flags |= PERCEPTUAL;
    }
    if opts.antialiasing {
        flags |= ANTIALIASING;
    }
    if opts.diff {
        flags |= DRAW;
    }
    flags
}
