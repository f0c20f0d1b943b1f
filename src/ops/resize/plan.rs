//! The GPU passes. Where it applies (8-bit, both dimensions changing, output rows ending on
//! a word, the tile fitting workgroup memory: `fused::FusedLayout`), one dispatch of
//! wgsl/resize_fused.wgsl does both passes. Otherwise one dispatch per 1-D pass,
//! wgsl/resize_h.wgsl (a workgroup per run of output words, its input in workgroup memory, a
//! thread per output pixel) or wgsl/resize_v.wgsl (a thread per output word), with an
//! intermediate buffer between two passes, packed as the image is. The weights are uploaded
//! tap-major either way.

use anyhow::{bail, Result};

use super::coeffs::{Axis, Dir, Pass, PRECISION_BITS};
use super::fused::{FusedLayout, FusedParams};
use super::rows::{RowsLayout, RowsParams};
use super::tune::Tunables;
use super::Filter;
use crate::gpu::{Batch, Gpu, Kernel, Usage};
use crate::io::image::Image;
use crate::ops::{sample_bytes, ShaderCase};
use crate::shader;
use crate::tune::Tunable;

/// Threads a workgroup of the horizontal pass (a thread an output pixel) and of the vertical
/// one (a thread an output word).
const WG_SIZE_H: u32 = 128;
const WG_SIZE_V: u32 = 64;

/// `SH_SAMPLES` of wgsl/resize_h.wgsl, the input samples a workgroup holds (the shader test
/// checks they agree).
const SH_SAMPLES: u32 = 4092;
/// `PIXELS_PER_THREAD` of wgsl/resize_h.wgsl, the output pixels a thread of the horizontal
/// pass sums (the shader test checks they agree).
const PIXELS_PER_THREAD: u32 = 2;

/// Its WGSL twin is `Params` in wgsl/shared/resize_pass.wgsl (the shader test checks their
/// fields).
#[repr(C)]
#[derive(Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
struct ResizeParams {
    in_w: u32,
    out_w: u32,
    ksize: u32,
    n_samples: u32,
    n_words: u32,
    n_pos: u32,
    wg_words: u32,
    _pad: u32,
}
crate::ops::params_layout!(ResizeParams {
    in_w,
    out_w,
    ksize,
    n_samples,
    n_words,
    n_pos,
    wg_words
});

/// Every variant the op builds (the shaders' constants are all overridable: a pass of each
/// direction, the first premultiplying and the last dividing alpha out).
pub(super) fn shaders() -> Vec<ShaderCase> {
    vec![
        ShaderCase::params::<ResizeParams>(shader!("resize_h"))
            .with_const("PRECISION_BITS", PRECISION_BITS)
            .with_const("SH_SAMPLES", SH_SAMPLES)
            .with_const("PIXELS_PER_THREAD", PIXELS_PER_THREAD)
            .with_overrides(&overrides(4, 16, Dir::Horizontal, (true, false), 13)),
        ShaderCase::params::<ResizeParams>(shader!("resize_v"))
            .with_const("PRECISION_BITS", PRECISION_BITS)
            .with_overrides(&overrides(4, 16, Dir::Vertical, (false, true), 13)),
        ShaderCase::params::<RowsParams>(shader!("resize_h8"))
            .with_const("PRECISION_BITS", PRECISION_BITS)
            .with_overrides(&rows_example().overrides(4, true, false)),
        ShaderCase::params::<FusedParams>(shader!("resize_fused"))
            .with_const("PRECISION_BITS", PRECISION_BITS)
            .with_overrides(&fused_example().overrides(4, true)),
    ]
}

/// A fused layout as a plan makes one (4K RGBA to 1080p, lanczos3), for the shader test.
fn fused_example() -> FusedLayout {
    let p = super::passes(3840, 2160, 1920, 1080, Filter::Lanczos3, 8);
    FusedLayout::choose((3840, 2160), 4, 8, &p, &Tunables::DEFAULT, u32::MAX)
        .expect("the 4K case fuses")
}

/// A horizontal pass's layout as a plan makes one (4K RGBA to 1080p, lanczos3), for the
/// shader test.
fn rows_example() -> RowsLayout {
    let p = super::passes(3840, 2160, 1920, 1080, Filter::Lanczos3, 8);
    RowsLayout::new(&p[0].axis, 3840, 2160, 4, 6144, super::rows::ROWS_A_THREAD)
        .expect("the 4K case has a tile")
}

/// An axis's bounds (first input position, taps, a pair per output position) and its
/// weights tap-major (tap t of position p at t * len + p), as the kernels read them.
fn device_axis(axis: &Axis) -> (Vec<u32>, Vec<i32>) {
    let bounds = axis
        .start
        .iter()
        .zip(&axis.count)
        .flat_map(|(&s, &n)| [s, n])
        .collect();
    let n = axis.len();
    let weights = (0..axis.ksize)
        .flat_map(|t| (0..n).map(move |p| (p, t)))
        .map(|(p, t)| axis.weights[p * axis.ksize + t])
        .collect();
    (bounds, weights)
}

/// A pass's overridable constants: its workgroup size, the image's layout, whether it
/// premultiplies alpha (the first pass) or divides it out (the last), and the vertical
/// pass's taps a position (`ksize`).
fn overrides(
    channels: u8,
    depth: u32,
    dir: Dir,
    (premultiply, unpremultiply): (bool, bool),
    ksize: usize,
) -> Vec<(&'static str, f64)> {
    let on = |b: bool| f64::from(u8::from(b));
    let wg_size = match dir {
        Dir::Horizontal => WG_SIZE_H,
        Dir::Vertical => WG_SIZE_V,
    };
    let mut c = vec![
        ("WG_SIZE", f64::from(wg_size)),
        ("CHANNELS", f64::from(channels)),
        ("DEPTH", f64::from(depth)),
        ("PREMULTIPLY", on(premultiply)),
        ("UNPREMULTIPLY", on(unpremultiply)),
    ];
    if dir == Dir::Vertical {
        c.push(("KSIZE", ksize as f64));
    }
    c
}

/// The output words a workgroup of the horizontal pass writes: as many as keep the pixels
/// they touch at most `WG_SIZE_H * PIXELS_PER_THREAD`, and fewer for a large reduction, so that
/// the input those pixels read (about `scale` pixels each, and the taps at both ends) fits
/// the workgroup's memory; a workgroup whose input still does not fit reads its taps from
/// global memory.
fn wg_words(channels: u32, depth: u32, in_len: u32, out_len: u32, ksize: u32) -> u32 {
    let per = 32 / depth;
    let scale = f64::from(in_len) / f64::from(out_len);
    let room = f64::from(SH_SAMPLES / channels) - 2.0 * f64::from(ksize) - 2.0;
    let pixels = (room / scale.max(1.0))
        .floor()
        .clamp(2.0, f64::from(WG_SIZE_H * PIXELS_PER_THREAD)) as u32;
    // n words span at most (n * per + channels - 2) / channels + 1 pixels.
    (((pixels - 2) * channels + 2) / per).max(1)
}

/// One pass on the device.
struct GpuPass {
    kernel: Kernel,
    bind: wgpu::BindGroup,
    workgroups: u32,
    label: &'static str,
}

/// A resize with its buffers on the device: write an image, record, read the result.
pub struct ResizePlan {
    passes: Vec<GpuPass>,
    src: wgpu::Buffer,
    dst: wgpu::Buffer,
    out: (u32, u32),
    channels: u8,
    depth: u32,
    chunks: Option<u32>,
}

impl ResizePlan {
    /// The plan for images like `img` (size, channels, depth) and `passes` (not empty).
    pub fn new(gpu: &Gpu, img: &Image, passes: &[Pass], filter: Filter) -> Result<ResizePlan> {
        let pixels = f64::from(img.width) * f64::from(img.height);
        let t = crate::tune::choice(gpu, super::OP.name, pixels, Tunables::check)
            .unwrap_or_else(|| Tunables::default_for(&gpu.limits));
        ResizePlan::with_tunables(gpu, img, passes, filter, t)
    }

    /// [`ResizePlan::new`] with the fused kernel shaped by `t`. A budget too small for any
    /// tile (0) makes the two-pass plan: tests reach the fused pass's chunked loads and the
    /// two-pass kernels on small images so.
    pub fn with_tunables(
        gpu: &Gpu,
        img: &Image,
        passes: &[Pass],
        filter: Filter,
        t: Tunables,
    ) -> Result<ResizePlan> {
        let c = u64::from(img.channels);
        let depth = img.bit_depth();
        let per = u64::from(32 / depth);
        let alpha = img.has_alpha() && filter != Filter::Nearest;
        let max = gpu.limits.max_storage_buffer_binding_size;
        let words = |w: u32, h: u32| (u64::from(w) * u64::from(h) * c).div_ceil(per);
        let (mut w, mut h) = (img.width, img.height);
        let check = |what: &str, bytes: u64| {
            if bytes > max {
                bail!(
                    "{}: the {what} ({bytes} bytes) is over this adapter's largest storage \
                     binding ({max} bytes); --backend cpu resizes it",
                    img.describe()
                );
            }
            Ok(())
        };
        check("image", words(w, h) * 4)?;
        let src = gpu.buffer("resize src", Usage::Storage, words(w, h) * 4);
        let limit = gpu.limits.max_compute_workgroup_storage_size / 4;
        let dev = std::env::var("GPUKIT_RESIZE_DEV").unwrap_or_default();
        let split = dev.contains("split");
        let fused = if split {
            None
        } else {
            FusedLayout::choose((w, h), c as u32, depth, passes, &t, limit)
        };
        if let Some(layout) = fused {
            let (ow, oh) = match passes[0].dir {
                Dir::Horizontal => (passes[0].axis.len(), passes[1].axis.len()),
                Dir::Vertical => (passes[1].axis.len(), passes[0].axis.len()),
            };
            let (ow, oh) = (ow as u32, oh as u32);
            let n_words = words(ow, oh);
            check("result", n_words * 4)?;
            let mut constants = layout.overrides(img.channels, alpha).to_vec();
            // DEV (call AP-resize4-1 only): variants switched at run time.
            let dev = std::env::var("GPUKIT_RESIZE_DEV").unwrap_or_default();
            if dev.contains("noprefetch") {
                constants.push(("PREFETCH", 0.0));
            }
            if let Some(d) = dev.split(',').find_map(|f| f.strip_prefix("diag=")) {
                constants.push(("DIAG", d.parse::<f64>()?));
            }
            let kernel = if dev.contains("unchecked") {
                // SAFETY: DEV measurement only.
                unsafe { gpu.kernel_unchecked(&shader!("resize_fused"), "main", &constants)? }
            } else {
                // Every loop ends by construction (bounded by the uniform sizes and the tile).
                gpu.kernel_unrolled(&shader!("resize_fused"), "main", &constants)?
            };
            let mut buffers = vec![
                gpu.upload("resize params", Usage::Uniform, &[layout.params]),
                src.clone(),
            ];
            for pass in passes {
                check("weights", pass.axis.weights.len() as u64 * 4)?;
                let (bounds, weights) = device_axis(&pass.axis);
                buffers.push(gpu.upload("resize bounds", Usage::Storage, &bounds));
                buffers.push(gpu.upload("resize weights", Usage::Storage, &weights));
            }
            let dst = gpu.buffer("resize fused", Usage::Storage, n_words * 4);
            buffers.push(dst.clone());
            let bind = gpu.bind(&kernel, &buffers.iter().collect::<Vec<_>>());
            return Ok(ResizePlan {
                passes: vec![GpuPass {
                    kernel,
                    bind,
                    workgroups: layout.params.n_tiles,
                    label: "resize fused",
                }],
                src,
                dst,
                out: (ow, oh),
                channels: img.channels,
                depth,
                chunks: Some(layout.steps),
            });
        }
        let mut input = src.clone();
        let mut out = Vec::new();
        let mut dst = src.clone();
        for (i, pass) in passes.iter().enumerate() {
            let n = pass.axis.len() as u32;
            let (ow, oh) = match pass.dir {
                Dir::Horizontal => (n, h),
                Dir::Vertical => (w, n),
            };
            let n_words = words(ow, oh);
            check("result", n_words * 4)?;
            check("weights", pass.axis.weights.len() as u64 * 4)?;
            let horizontal = pass.dir == Dir::Horizontal;
            let (premultiply, unpremultiply) = (alpha && i == 0, alpha && i + 1 == passes.len());
            let rpt = dev
                .split(',')
                .find_map(|f| f.strip_prefix("rpt="))
                .map_or(Ok(super::rows::ROWS_A_THREAD), str::parse)?;
            let rows = if horizontal && depth == 8 {
                RowsLayout::new(&pass.axis, w, h, c as u32, limit.min(6144), rpt)
            } else {
                None
            };
            if let Some(layout) = rows {
                let constants = layout.overrides(img.channels, premultiply, unpremultiply);
                // Every loop ends by construction (bounded by the uniform sizes and the tile).
                let kernel = if dev.contains("unchecked") {
                    // SAFETY: DEV measurement only.
                    unsafe { gpu.kernel_unchecked(&shader!("resize_h8"), "main", &constants)? }
                } else {
                    gpu.kernel_unrolled(&shader!("resize_h8"), "main", &constants)?
                };
                let (bounds, weights) = device_axis(&pass.axis);
                let params = gpu.upload("resize params", Usage::Uniform, &[layout.params]);
                let bounds = gpu.upload("resize bounds", Usage::Storage, &bounds);
                let weights = gpu.upload("resize weights", Usage::Storage, &weights);
                dst = gpu.buffer("resize horizontal", Usage::Storage, n_words * 4);
                let bind = gpu.bind(&kernel, &[&params, &input, &bounds, &weights, &dst]);
                out.push(GpuPass {
                    kernel,
                    bind,
                    workgroups: layout.params.n_tiles,
                    label: "resize horizontal",
                });
                input = dst.clone();
                (w, h) = (ow, oh);
                continue;
            }
            let vwg: u32 = dev
                .split(',')
                .find_map(|f| f.strip_prefix("vwg="))
                .map_or(Ok(WG_SIZE_V), str::parse)?;
            let mut constants = overrides(
                img.channels,
                depth,
                pass.dir,
                (premultiply, unpremultiply),
                pass.axis.ksize,
            );
            let rv: u32 = dev
                .split(',')
                .find_map(|f| f.strip_prefix("rv="))
                .map_or(Ok(0), str::parse)?;
            let rv = if !horizontal && depth == 8 && (u64::from(w) * c).is_multiple_of(4) {
                rv
            } else {
                0
            };
            if rv > 0 {
                constants.push(("RV", f64::from(rv)));
            }
            if !horizontal {
                constants[0].1 = f64::from(vwg);
            }
            // The threads: a word each, or a column of `rv` words.
            let threads = if rv > 0 {
                u64::from(ow) * c / 4 * u64::from(n.div_ceil(rv))
            } else {
                n_words
            };
            let file = if horizontal {
                shader!("resize_h")
            } else {
                shader!("resize_v")
            };
            // Every loop of both kernels ends by construction (taps, words and pixels
            // bounded by the uniform sizes): no loop counter in the way of unrolling.
            let kernel = if rv > 0 && dev.contains("unchecked") {
                // SAFETY: DEV measurement only.
                unsafe { gpu.kernel_unchecked(&file, "main", &constants)? }
            } else {
                gpu.kernel_unrolled(&file, "main", &constants)?
            };
            let (bounds, weights) = device_axis(&pass.axis);
            let ksize = pass.axis.ksize;
            let wg_words = if horizontal {
                wg_words(c as u32, depth, w, n, ksize as u32)
            } else {
                vwg
            };
            let params = ResizeParams {
                in_w: w,
                out_w: ow,
                ksize: pass.axis.ksize as u32,
                n_samples: u32::try_from(u64::from(ow) * u64::from(oh) * c).map_err(|_| {
                    anyhow::anyhow!(
                        "{}: over 2^32 samples a pass; --backend cpu resizes it",
                        img.describe()
                    )
                })?,
                n_words: threads as u32,
                n_pos: n,
                wg_words,
                _pad: 0,
            };
            let label = match pass.dir {
                Dir::Horizontal => "resize horizontal",
                Dir::Vertical => "resize vertical",
            };
            let params = gpu.upload("resize params", Usage::Uniform, &[params]);
            let bounds = gpu.upload("resize bounds", Usage::Storage, &bounds);
            let weights = gpu.upload("resize weights", Usage::Storage, &weights);
            dst = gpu.buffer(label, Usage::Storage, n_words * 4);
            let bind = gpu.bind(&kernel, &[&params, &input, &bounds, &weights, &dst]);
            let workgroups = u32::try_from(threads.div_ceil(u64::from(wg_words)))?;
            out.push(GpuPass {
                kernel,
                bind,
                workgroups,
                label,
            });
            input = dst.clone();
            (w, h) = (ow, oh);
        }
        Ok(ResizePlan {
            passes: out,
            src,
            dst,
            out: (w, h),
            channels: img.channels,
            depth,
            chunks: None,
        })
    }

    /// Where the plan is the fused pass, the steps (chunks of input lines) its widest segment
    /// loads; None for the 1-D passes.
    pub fn fused_chunks(&self) -> Option<u32> {
        self.chunks
    }

    /// Queues `img`'s samples (like the plan's image) for upload.
    pub fn write(&self, gpu: &Gpu, img: &Image) {
        gpu.write_padded(&self.src, &sample_bytes(&img.samples));
    }

    /// Records the passes.
    pub fn record(&self, batch: &mut Batch) {
        for p in &self.passes {
            batch.dispatch(p.label, &p.kernel, &p.bind, p.workgroups);
        }
    }

    /// The resized image, once the recorded passes ran.
    pub fn read(&self, gpu: &Gpu) -> Result<Image> {
        let (w, h) = self.out;
        let c = self.channels;
        let samples = u64::from(w) * u64::from(h) * u64::from(c);
        Ok(match self.depth {
            8 => Image::new_u8(w, h, c, gpu.read(&self.dst, 0, samples)?),
            _ => {
                let mut s: Vec<u16> =
                    gpu.read_with(&self.dst, 0, samples * 2, bytemuck::pod_collect_to_vec)?;
                if cfg!(target_endian = "big") {
                    s.iter_mut().for_each(|v| *v = u16::from_le(*v));
                }
                Image::new_u16(w, h, c, s)
            }
        })
    }
}
