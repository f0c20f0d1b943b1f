//! The GPU passes: one dispatch of wgsl/resize.wgsl per 1-D pass, a thread per output word,
//! the weights uploaded as the host computed them; an intermediate buffer between two
//! passes, packed as the image is.

use anyhow::{bail, Result};

use super::coeffs::{Dir, Pass, PRECISION_BITS};
use super::Filter;
use crate::gpu::{Batch, Gpu, Kernel, Usage};
use crate::io::image::Image;
use crate::ops::{sample_bytes, ShaderCase};
use crate::shader;

/// Threads a workgroup.
const WG_SIZE: u32 = 64;

/// Its WGSL twin is `Params` in wgsl/resize.wgsl (the shader test checks their fields).
#[repr(C)]
#[derive(Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
struct ResizeParams {
    in_w: u32,
    out_w: u32,
    ksize: u32,
    n_samples: u32,
    n_words: u32,
    _pad: [u32; 3],
}
crate::ops::params_layout!(ResizeParams {
    in_w,
    out_w,
    ksize,
    n_samples,
    n_words
});

/// Every variant the op builds (the shader's constants are all overridable: a pass of each
/// direction, the first premultiplying and the last dividing alpha out).
pub(super) fn shaders() -> Vec<ShaderCase> {
    let case = |dir, pm, unpm| {
        ShaderCase::params::<ResizeParams>(shader!("resize"))
            .with_const("PRECISION_BITS", PRECISION_BITS)
            .with_overrides(&overrides(4, 16, dir, pm, unpm))
    };
    vec![
        case(Dir::Horizontal, true, false),
        case(Dir::Vertical, false, true),
    ]
}

/// A pass's overridable constants: the image's layout, the pass's direction, and whether
/// it premultiplies alpha (the first pass) or divides it out (the last).
fn overrides(
    channels: u8,
    depth: u32,
    dir: Dir,
    premultiply: bool,
    unpremultiply: bool,
) -> [(&'static str, f64); 6] {
    let on = |b: bool| f64::from(u8::from(b));
    [
        ("WG_SIZE", f64::from(WG_SIZE)),
        ("CHANNELS", f64::from(channels)),
        ("DEPTH", f64::from(depth)),
        ("HORIZONTAL", on(dir == Dir::Horizontal)),
        ("PREMULTIPLY", on(premultiply)),
        ("UNPREMULTIPLY", on(unpremultiply)),
    ]
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
}

impl ResizePlan {
    /// The plan for images like `img` (size, channels, depth) and `passes` (not empty).
    pub fn new(gpu: &Gpu, img: &Image, passes: &[Pass], filter: Filter) -> Result<ResizePlan> {
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
            let (premultiply, unpremultiply) = (alpha && i == 0, alpha && i + 1 == passes.len());
            let constants = overrides(img.channels, depth, pass.dir, premultiply, unpremultiply);
            let kernel = gpu.kernel(&shader!("resize"), "main", &constants)?;
            let bounds: Vec<u32> = pass
                .axis
                .start
                .iter()
                .zip(&pass.axis.count)
                .flat_map(|(&s, &n)| [s, n])
                .collect();
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
                n_words: n_words as u32,
                _pad: [0; 3],
            };
            let label = match pass.dir {
                Dir::Horizontal => "resize horizontal",
                Dir::Vertical => "resize vertical",
            };
            let params = gpu.upload("resize params", Usage::Uniform, &[params]);
            let bounds = gpu.upload("resize bounds", Usage::Storage, &bounds);
            let weights = gpu.upload("resize weights", Usage::Storage, &pass.axis.weights);
            dst = gpu.buffer(label, Usage::Storage, n_words * 4);
            let bind = gpu.bind(&kernel, &[&params, &input, &bounds, &weights, &dst]);
            let workgroups = u32::try_from(n_words.div_ceil(u64::from(WG_SIZE)))?;
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
        })
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
