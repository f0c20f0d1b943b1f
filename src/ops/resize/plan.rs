//! The GPU passes: one dispatch per 1-D pass, with an intermediate buffer between two passes,
//! packed as the image is (Pillow rounds and clips to the sample type between them). 8-bit
//! samples whose output rows end on a word take wgsl/resize_h8s.wgsl at a whole-number
//! reduction (four columns a thread from one walk over their windows: `stride::StrideLayout`),
//! else wgsl/resize_h8.wgsl (a tile of columns by rows a workgroup: `rows::RowsLayout`), for
//! the horizontal pass, and wgsl/resize_v8.wgsl (a thread a few words of a few rows:
//! `columns::WordColumns`) for the vertical one (where the input has at least ksize rows).
//! At a whole-number reduction both take the weights of the positions away from the edges
//! as constants built into the kernel (`stride::Windows::regular`). The rest (16-bit, odd rows, very
//! large reductions, inputs shorter than a window) wgsl/resize_h.wgsl (a workgroup per run
//! of output words, its input in workgroup memory, a thread per output pixel) and
//! wgsl/resize_v.wgsl (a thread per output word). The weights are uploaded tap-major (the
//! threads of a horizontal pass read neighbouring positions), but for the word columns,
//! whose threads share a row: position-major, each window moved inside the input; and for
//! resize_h8s, a vec4 of four columns' weights a window pixel (`stride::Windows::weights`).

use anyhow::{bail, Result};

use super::coeffs::{math_overrides, Axis, Dir, Pass, PRECISION_BITS};
use super::columns::{self, ColumnParams, WordColumns};
use super::rows::{RowsLayout, RowsParams};
use super::stride::{StrideLayout, StrideParams};
use super::tune::Tunables;
use super::Filter;
use crate::gpu::{Batch, Gpu, Kernel, Usage, Variant};
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
        ShaderCase::params::<StrideParams>(shader!("resize_h8s"))
            .with_const("PRECISION_BITS", PRECISION_BITS)
            .with_overrides(&stride_example().overrides(4, true, false)),
    ]
    .into_iter()
    .chain([1, 2, 4].map(|words| {
        ShaderCase::variant::<ColumnParams>(shader!("resize_v8"), columns::variant(words))
            .with_const("PRECISION_BITS", PRECISION_BITS)
            .with_const("VW", words)
            .with_overrides(&columns_example().overrides(WG_SIZE_V, 4, false, true))
    }))
    .collect()
}

/// The vertical pass's word columns as a plan makes them (4K RGBA to 1080p, lanczos3, the
/// last pass), for the shader test.
fn columns_example() -> WordColumns {
    let p = super::passes(3840, 2160, 1920, 1080, Filter::Lanczos3, 8);
    let t = Tunables::DEFAULT;
    let shapes = [(t.v_rows, t.v_words), t.v_regular];
    WordColumns::new(&p[1].axis, (1920, 2160), 4, shapes, (WG_SIZE_V, 65535))
        .expect("the 4K case has word columns")
}

/// A horizontal pass's layout as a plan makes one (4K RGBA to 1080p, lanczos3), for the
/// shader test.
fn rows_example() -> RowsLayout {
    let p = super::passes(3840, 2160, 1920, 1080, Filter::Lanczos3, 8);
    let t = Tunables::DEFAULT;
    RowsLayout::new(
        &p[0].axis,
        (3840, 2160),
        4,
        (t.tile_w, t.rows_a_thread, t.wg_size),
        t.budget_words,
    )
    .expect("the 4K case has a tile")
}

/// The whole-number reduction's horizontal layout as a plan makes one (4K RGBA to 1080p,
/// lanczos3), for the shader test.
fn stride_example() -> StrideLayout {
    let p = super::passes(3840, 2160, 1920, 1080, Filter::Lanczos3, 8);
    let t = Tunables::DEFAULT;
    StrideLayout::new(
        &p[0].axis,
        (3840, 2160),
        4,
        t.whole,
        (t.budget_words, 65535),
    )
    .expect("the 4K case has whole-number windows")
}

/// An axis's windows as wgsl/resize_v8.wgsl's word columns read them, for an input
/// of `in_len` >= ksize positions: each position's window of ksize taps moved back where it
/// would run past the input (first input position, ksize: a pair a position), its weights
/// position-major (tap t of position p at p * ksize + t) and zero outside its own taps. So
/// that every tap reads a row of the input with no clamp, and a position's weights lie
/// together (all of a warp's threads read the same ones).
fn device_axis_windows(axis: &Axis, in_len: u32) -> (Vec<u32>, Vec<i32>) {
    let k = axis.ksize;
    let mut bounds = Vec::with_capacity(2 * axis.len());
    let mut weights = vec![0; axis.len() * k];
    for p in 0..axis.len() {
        let (start, taps) = axis.taps(p);
        let first = start.min(in_len as usize - k);
        bounds.extend([first as u32, k as u32]);
        let at = p * k + start - first;
        weights[at..at + taps.len()].copy_from_slice(taps);
    }
    (bounds, weights)
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
    alpha: (bool, bool),
    ksize: usize,
) -> Vec<(&'static str, f64)> {
    let wg_size = match dir {
        Dir::Horizontal => WG_SIZE_H,
        Dir::Vertical => WG_SIZE_V,
    };
    let mut c = vec![("WG_SIZE", f64::from(wg_size))];
    c.extend(math_overrides(channels, depth, alpha));
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
    grid: [u32; 3],
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
        let pixels = f64::from(img.width) * f64::from(img.height);
        let t = crate::tune::choice(gpu, super::OP.name, pixels, Tunables::check)
            .unwrap_or_else(|| Tunables::default_for(&gpu.limits));
        ResizePlan::with_tunables(gpu, img, passes, filter, t)
    }

    /// [`ResizePlan::new`] with the 8-bit passes shaped by `t`. A budget of 0 takes the
    /// generic kernels for every image: tests reach them on 8-bit images so.
    pub fn with_tunables(
        gpu: &Gpu,
        img: &Image,
        passes: &[Pass],
        filter: Filter,
        t: Tunables,
    ) -> Result<ResizePlan> {
        // The unchecked 8-bit kernels' index arguments hold only for these shapes.
        t.check_shape()?;
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
        let budget = t
            .budget_words
            .min(gpu.limits.max_compute_workgroup_storage_size / 4);
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
            let label = match pass.dir {
                Dir::Horizontal => "resize horizontal",
                Dir::Vertical => "resize vertical",
            };
            dst = gpu.buffer(label, Usage::Storage, n_words * 4);
            // The pass's kernel, its bindings and its grid: resize_h8s, resize_v8, resize_h8,
            // or the generic kernels, the first that applies.
            let (kernel, bind, grid) = 'built: {
                let eight = horizontal && depth == 8 && budget > 0;
                let stride = eight
                    .then(|| {
                        StrideLayout::new(
                            &pass.axis,
                            (w, h),
                            c as u32,
                            t.whole,
                            (budget, gpu.dispatch_limit),
                        )
                    })
                    .flatten();
                if let Some(layout) = stride {
                    let weights = layout.weights(&pass.axis);
                    check("weights", weights.len() as u64 * 4)?;
                    let weights = gpu.upload("resize weights", Usage::Storage, &weights);
                    let constants = layout.overrides(img.channels, premultiply, unpremultiply);
                    // SAFETY: every index wgsl/resize_h8s.wgsl makes is in range for the buffers
                    // bound here (its comments argue each one from `StrideLayout`'s sizes and
                    // weights, for the shapes `check_shape` allowed above), every divisor is a
                    // nonzero size, and every loop ends (bounded by the tile's constants).
                    let kernel = unsafe {
                        gpu.kernel_unchecked(
                            &shader!("resize_h8s"),
                            &Variant::default(),
                            "main",
                            &constants,
                        )?
                    };
                    let params = gpu.upload("resize params", Usage::Uniform, &[layout.params]);
                    let bind = gpu.bind(&kernel, &[&params, &input, &weights, &dst]);
                    break 'built (kernel, bind, layout.grid);
                }
                let columns = (!horizontal && depth == 8 && budget > 0)
                    .then(|| {
                        WordColumns::new(
                            &pass.axis,
                            (w, h),
                            c as u32,
                            [(t.v_rows, t.v_words), t.v_regular],
                            (WG_SIZE_V, gpu.dispatch_limit),
                        )
                    })
                    .flatten();
                if let Some(layout) = columns {
                    let (bounds, weights) = device_axis_windows(&pass.axis, h);
                    let bounds = gpu.upload("resize bounds", Usage::Storage, &bounds);
                    let weights = gpu.upload("resize weights", Usage::Storage, &weights);
                    let constants =
                        layout.overrides(WG_SIZE_V, img.channels, premultiply, unpremultiply);
                    // SAFETY: every index wgsl/resize_v8.wgsl makes is in range for the buffers
                    // bound here (its comments argue each one from what `WordColumns::new`
                    // checked: rows of whole units, every window and every regular row's window
                    // inside the input; the grid's threads past a row's units or the rows return
                    // first), its divisors are nonzero sizes, and its loops all end (constant
                    // counts).
                    let kernel = unsafe {
                        gpu.kernel_unchecked(
                            &shader!("resize_v8"),
                            &layout.variant(),
                            "main",
                            &constants,
                        )?
                    };
                    let params = gpu.upload("resize params", Usage::Uniform, &[layout.params]);
                    let bind = gpu.bind(&kernel, &[&params, &input, &bounds, &weights, &dst]);
                    break 'built (kernel, bind, layout.grid);
                }
                let shape = (t.tile_w, t.rows_a_thread, t.wg_size);
                let rows = eight
                    .then(|| RowsLayout::new(&pass.axis, (w, h), c as u32, shape, budget))
                    .flatten();
                let (bounds, weights) = device_axis(&pass.axis);
                let bounds = gpu.upload("resize bounds", Usage::Storage, &bounds);
                let weights = gpu.upload("resize weights", Usage::Storage, &weights);
                let (kernel, params, workgroups) = if let Some(layout) = rows {
                    let constants = layout.overrides(img.channels, premultiply, unpremultiply);
                    // SAFETY: every index wgsl/resize_h8.wgsl makes is in range for the buffers
                    // bound here (its comments argue each one from `RowsLayout`'s sizes, for the
                    // shapes `check_shape` allowed above), every divisor is a nonzero size, and
                    // every loop ends (bounded by the uniform sizes and the tile).
                    let kernel = unsafe {
                        gpu.kernel_unchecked(
                            &shader!("resize_h8"),
                            &Variant::default(),
                            "main",
                            &constants,
                        )?
                    };
                    let params = gpu.upload("resize params", Usage::Uniform, &[layout.params]);
                    (kernel, params, layout.params.n_tiles)
                } else {
                    let constants = overrides(
                        img.channels,
                        depth,
                        pass.dir,
                        (premultiply, unpremultiply),
                        pass.axis.ksize,
                    );
                    let file = if horizontal {
                        shader!("resize_h")
                    } else {
                        shader!("resize_v")
                    };
                    // Every loop of both kernels ends by construction (taps, words and pixels
                    // bounded by the uniform sizes): no loop counter in the way of unrolling.
                    let kernel = gpu.kernel_unrolled(&file, "main", &constants)?;
                    let ksize = pass.axis.ksize;
                    // The threads: a word each.
                    let threads = n_words;
                    let wg_words = if horizontal {
                        wg_words(c as u32, depth, w, n, ksize as u32)
                    } else {
                        WG_SIZE_V
                    };
                    let params = ResizeParams {
                        in_w: w,
                        out_w: ow,
                        ksize: ksize as u32,
                        n_samples: u32::try_from(u64::from(ow) * u64::from(oh) * c).map_err(
                            |_| {
                                anyhow::anyhow!(
                                    "{}: over 2^32 samples a pass; --backend cpu resizes it",
                                    img.describe()
                                )
                            },
                        )?,
                        n_words: threads as u32,
                        n_pos: n,
                        wg_words,
                        _pad: 0,
                    };
                    let params = gpu.upload("resize params", Usage::Uniform, &[params]);
                    let workgroups = u32::try_from(threads.div_ceil(u64::from(wg_words)))?;
                    (kernel, params, workgroups)
                };
                let bind = gpu.bind(&kernel, &[&params, &input, &bounds, &weights, &dst]);
                (kernel, bind, gpu.grid(workgroups))
            };
            out.push(GpuPass {
                kernel,
                bind,
                grid,
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

    /// The kernels the plan runs, a pass's after another (their file's names: `resize_h8`,
    /// `resize_v`, ...), for tests.
    pub fn kernels(&self) -> Vec<&str> {
        self.passes
            .iter()
            .map(|p| p.kernel.name.split(':').next().unwrap_or_default())
            .collect()
    }

    /// Queues `img`'s samples (like the plan's image) for upload.
    pub fn write(&self, gpu: &Gpu, img: &Image) {
        gpu.write_padded(&self.src, &sample_bytes(&img.samples));
    }

    /// Records the passes.
    pub fn record(&self, batch: &mut Batch) {
        for p in &self.passes {
            if p.grid.iter().all(|&n| n > 0) {
                batch.dispatch_xyz(p.label, &p.kernel, &p.bind, p.grid);
            }
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

#[cfg(test)]
mod tests {
    use super::*;

    // Three positions of 3 taps over 5 inputs: the last window would end past the input
    // (3 + 3 > 5), so it moves back one row, its weights one place on.
    #[test]
    fn windows_move_back_inside_the_input_with_their_weights() {
        let axis = Axis {
            ksize: 3,
            start: vec![0, 2, 3],
            count: vec![2, 3, 2],
            weights: vec![1, 2, 0, 3, 4, 5, 6, 7, 0],
        };
        let (bounds, weights) = device_axis_windows(&axis, 5);
        assert_eq!(bounds, [0, 3, 2, 3, 2, 3]);
        assert_eq!(weights, [1, 2, 0, 3, 4, 5, 0, 6, 7]);
    }
}
