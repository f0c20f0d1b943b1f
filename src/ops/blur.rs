//! `blur`: separable box and gaussian blur in integer fixed-point arithmetic, identical on the
//! GPU (wgsl/blur.wgsl) and in the CPU reference below.
//!
//! Each pass blurs along lines and writes its result transposed, so the first pass (rows of
//! the image) is followed by the same pass over the columns, and the second pass's output is
//! the right way round again. Semantics, rounding and limits: docs/blur.md.

use anyhow::{bail, ensure, Result};
use rayon::prelude::*;

use crate::bench::{Case, Unit};
use crate::gpu::{Batch, Engine, Gpu, Kernel, Timings, Usage};
use crate::io::image::{Image, Samples};
use crate::shader;

pub mod engine;

/// Box (the window mean) or gaussian.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Kind {
    Box,
    Gaussian { sigma: f64 },
}

/// What to blur with.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BlurParams {
    pub kind: Kind,
    /// Window radius: 2r + 1 samples in each direction.
    pub radius: u32,
    /// How many times the whole blur is applied (alpha is premultiplied once, before the first).
    pub iterations: u32,
}

impl BlurParams {
    pub fn new(kind: Kind, radius: u32, iterations: u32) -> BlurParams {
        BlurParams {
            kind,
            radius,
            iterations,
        }
    }
}

/// The gaussian radius used when none is given: ceil(3 sigma), as ImageMagick and OpenCV do
/// for 8-bit images (weights beyond 3 sigma are below 1% of the centre weight).
pub fn gaussian_radius(sigma: f64) -> u32 {
    (3.0 * sigma).ceil().max(1.0) as u32
}

/// Fraction bits kept between the passes, at most 8: the most for which every intermediate
/// sum fits 32 bits (n * 2^F * (maxval + 1) <= 2^32, n the window size or weight total).
fn fraction_bits(n: u64, max_value: u32) -> Option<u32> {
    (0..=8u32)
        .rev()
        .find(|&f| n * (1u64 << f) * (max_value as u64 + 1) <= 1u64 << 32)
}

/// The largest radius a box blur takes for samples up to `max_value` (32767 for 16-bit,
/// 8388607 for 8-bit images): beyond it the window sum no longer fits 32 bits.
pub fn max_box_radius(max_value: u32) -> u32 {
    (((1u64 << 32) / (max_value as u64 + 1) - 1) / 2) as u32
}

/// The largest gaussian radius (the kernel stages a chunk plus its halo in workgroup memory).
pub const MAX_GAUSS_RADIUS: u32 = 500;

/// Integer gaussian weights for offsets -r..=r summing to exactly 2^total_bits: each is
/// round(2^total_bits * g(k) / sum(g)), and the rounding remainder goes to the centre.
pub fn gaussian_weights(sigma: f64, radius: u32, total_bits: u32) -> Vec<u32> {
    let r = radius as i64;
    let g: Vec<f64> = (-r..=r)
        .map(|k| (-((k * k) as f64) / (2.0 * sigma * sigma)).exp())
        .collect();
    let sum: f64 = g.iter().sum();
    let total = 1u64 << total_bits;
    let mut w: Vec<u32> = g
        .iter()
        .map(|x| (x / sum * total as f64).round() as u32)
        .collect();
    let have: u64 = w.iter().map(|&x| x as u64).sum();
    let centre = radius as usize;
    w[centre] = (w[centre] as i64 + total as i64 - have as i64) as u32;
    w
}

/// The arithmetic of one blur, shared by the GPU and the CPU: what each pass does with a sum.
#[derive(Clone, Debug, PartialEq)]
struct Arith {
    /// (mul, add, div) of the first and the second pass: out = (S * mul + add) / div.
    first: (u32, u32, u32),
    second: (u32, u32, u32),
    /// Gaussian weights (empty for box).
    weights: Vec<u32>,
}

fn arith(params: &BlurParams, max_value: u32) -> Result<Arith> {
    let r = params.radius;
    ensure!(params.iterations >= 1, "iterations must be at least 1");
    match params.kind {
        Kind::Box => {
            let max_r = max_box_radius(max_value);
            if r > max_r {
                bail!(crate::UsageError(format!(
                    "radius {r} is too large for {}-bit samples (at most {max_r})",
                    if max_value > 255 { 16 } else { 8 }
                )));
            }
            let n = 2 * r as u64 + 1;
            let f = fraction_bits(n, max_value).expect("radius checked above");
            let first = (1 << f, (n / 2) as u32, n as u32);
            let div2 = (n << f) as u32;
            Ok(Arith {
                first,
                second: (1, div2 / 2, div2),
                weights: Vec::new(),
            })
        }
        Kind::Gaussian { sigma } => {
            if !(sigma > 0.0 && sigma.is_finite()) {
                bail!(crate::UsageError(format!(
                    "sigma must be positive, got {sigma}"
                )));
            }
            if r > MAX_GAUSS_RADIUS {
                bail!(crate::UsageError(format!(
                    "gaussian radius {r} is too large (at most {MAX_GAUSS_RADIUS}; sigma at most {})",
                    MAX_GAUSS_RADIUS / 3
                )));
            }
            // Weights total 2^G and F fraction bits are kept between passes, with
            // 2^(G+F) * (maxval + 1) <= 2^32: G = 16, F = 8 for 8-bit, G = 14, F = 2 for 16-bit.
            let (g, f) = if max_value > 255 { (14, 2) } else { (16, 8) };
            let weights = gaussian_weights(sigma, r, g);
            Ok(Arith {
                first: (1, 1 << (g - f - 1), 1 << (g - f)),
                second: (1, 1 << (g + f - 1), 1 << (g + f)),
                weights,
            })
        }
    }
}

// ---------------------------------------------------------------------------------------
// Pixels as four lanes. 8-bit images travel as one word per pixel (lane k in byte k), 16-bit
// ones as two words; missing lanes are zero. The alpha lane is 1 (gray+alpha) or 3 (RGBA).

fn alpha_lane(channels: u8) -> Option<usize> {
    match channels {
        2 => Some(1),
        4 => Some(3),
        _ => None,
    }
}

/// Writes `img` packed (one word a pixel for 8-bit images, two for 16-bit) into `out`, which
/// holds exactly that many bytes; pixels of fewer than 4 channels are packed a chunk at a
/// time, so no packed copy of the whole image is made.
fn write_words(img: &Image, out: &mut wgpu::BufferViewMut) {
    const CHUNK: usize = 1 << 14; // pixels
    let c = img.channels as usize;
    let mut words: Vec<u32> = Vec::with_capacity(2 * CHUNK);
    // Chunk i of `words_per_px`-word pixels.
    let mut put = |i: usize, words_per_px: usize, words: &[u32]| {
        let at = i * CHUNK * words_per_px * 4;
        out.slice(at..at + 4 * words.len())
            .copy_from_slice(bytemuck::cast_slice(words));
    };
    match &img.samples {
        Samples::U8(s) if c == 4 => out.copy_from_slice(s),
        Samples::U16(s) if c == 4 => out.copy_from_slice(bytemuck::cast_slice(s)),
        Samples::U8(s) => {
            for (i, chunk) in s.chunks(c * CHUNK).enumerate() {
                words.clear();
                words.extend(chunk.chunks(c).map(|px| {
                    px.iter()
                        .enumerate()
                        .fold(0u32, |w, (k, &v)| w | (v as u32) << (8 * k))
                }));
                put(i, 1, &words);
            }
        }
        Samples::U16(s) => {
            for (i, chunk) in s.chunks(c * CHUNK).enumerate() {
                words.clear();
                words.extend(chunk.chunks(c).flat_map(|px| {
                    let mut lanes = [0u32; 4];
                    for (k, &v) in px.iter().enumerate() {
                        lanes[k] = v as u32;
                    }
                    [lanes[0] | lanes[1] << 16, lanes[2] | lanes[3] << 16]
                }));
                put(i, 2, &words);
            }
        }
    }
}

fn from_words(words: &[u32], like: &Image) -> Image {
    let c = like.channels as usize;
    let (w, h) = (like.width, like.height);
    match like.samples {
        Samples::U8(_) if c == 4 => Image::new_u8(w, h, 4, bytemuck::pod_collect_to_vec(words)),
        Samples::U8(_) => {
            let mut out = vec![0u8; words.len() * c];
            out.par_chunks_mut(c)
                .zip(words.par_iter())
                .for_each(|(px, &word)| px.copy_from_slice(&word.to_le_bytes()[..c]));
            Image::new_u8(w, h, like.channels, out)
        }
        Samples::U16(_) if c == 4 => Image::new_u16(w, h, 4, bytemuck::pod_collect_to_vec(words)),
        Samples::U16(_) => {
            let mut out = vec![0u16; words.len() / 2 * c];
            out.par_chunks_mut(c)
                .zip(words.par_chunks(2))
                .for_each(|(px, pair)| {
                    for (k, v) in px.iter_mut().enumerate() {
                        *v = (pair[k / 2] >> (16 * (k % 2))) as u16;
                    }
                });
            Image::new_u16(w, h, like.channels, out)
        }
    }
}

// ---------------------------------------------------------------------------------------
// The CPU reference. Mirrors wgsl/blur.wgsl: the same premultiply, window sums, rounding,
// transposed output and unpremultiply.

type Px = [u64; 4];

fn lanes(img: &Image) -> Vec<Px> {
    let c = img.channels as usize;
    let mut out = vec![[0u64; 4]; img.pixels()];
    match &img.samples {
        Samples::U8(s) => out.par_iter_mut().zip(s.par_chunks(c)).for_each(|(o, px)| {
            for k in 0..c {
                o[k] = px[k] as u64;
            }
        }),
        Samples::U16(s) => out.par_iter_mut().zip(s.par_chunks(c)).for_each(|(o, px)| {
            for k in 0..c {
                o[k] = px[k] as u64;
            }
        }),
    }
    out
}

/// (c * a + max / 2) / max for colour lanes.
fn premultiply(px: &mut [Px], alpha: usize, max: u64) {
    px.par_iter_mut().for_each(|p| {
        let a = p[alpha];
        for (k, v) in p.iter_mut().enumerate() {
            if k != alpha {
                *v = (*v * a + max / 2) / max;
            }
        }
    });
}

/// (c * max + a / 2) / a, at most max, for colour lanes; all zero where a = 0.
fn unpremultiply(px: &mut [Px], alpha: usize, max: u64) {
    px.par_iter_mut().for_each(|p| {
        let a = p[alpha];
        for (k, v) in p.iter_mut().enumerate() {
            if a == 0 {
                *v = 0;
            } else if k != alpha {
                *v = ((*v * max + a / 2) / a).min(max);
            }
        }
    });
}

/// One pass: blurs each of `lines` lines of `len` pixels and returns the result transposed
/// (`len` lines of `lines` pixels).
fn pass_cpu(
    src: &[Px],
    lines: usize,
    len: usize,
    radius: u32,
    kind: &Arith,
    second: bool,
) -> Vec<Px> {
    let (mul, add, div) = if second { kind.second } else { kind.first };
    let r = radius as i64;
    let at = |line: &[Px], i: i64| line[i.clamp(0, len as i64 - 1) as usize];
    let finish = |s: Px| s.map(|v| (v * mul as u64 + add as u64) / div as u64);
    let rows: Vec<Vec<Px>> = src
        .par_chunks(len)
        .map(|line| {
            if kind.weights.is_empty() {
                // Box: the window sum slides along the line.
                let mut s = [0u64; 4];
                for i in -1 - r..=-1 + r {
                    let p = at(line, i);
                    (0..4).for_each(|k| s[k] += p[k]);
                }
                (0..len as i64)
                    .map(|x| {
                        let (add, sub) = (at(line, x + r), at(line, x - r - 1));
                        (0..4).for_each(|k| s[k] = s[k] + add[k] - sub[k]);
                        finish(s)
                    })
                    .collect()
            } else {
                // Gaussian: weights[k] applies to the sample at offset k - r.
                (0..len as i64)
                    .map(|x| {
                        let mut s = [0u64; 4];
                        for (k, &w) in kind.weights.iter().enumerate() {
                            let p = at(line, x + k as i64 - r);
                            (0..4).for_each(|c| s[c] += w as u64 * p[c]);
                        }
                        finish(s)
                    })
                    .collect()
            }
        })
        .collect();
    let mut out = vec![[0u64; 4]; lines * len];
    for (y, row) in rows.iter().enumerate() {
        for (x, v) in row.iter().enumerate() {
            out[x * lines + y] = *v;
        }
    }
    out
}

/// The CPU reference blur: what every GPU result must equal, bit for bit.
pub fn blur_cpu(img: &Image, params: &BlurParams) -> Result<Image> {
    let max = img.max_value();
    let ar = arith(params, max)?;
    let (w, h) = (img.width as usize, img.height as usize);
    if w == 0 || h == 0 {
        return Ok(img.clone());
    }
    let mut px = lanes(img);
    let alpha = alpha_lane(img.channels);
    if let Some(a) = alpha {
        premultiply(&mut px, a, max as u64);
    }
    for _ in 0..params.iterations {
        let mid = pass_cpu(&px, h, w, params.radius, &ar, false);
        px = pass_cpu(&mid, w, h, params.radius, &ar, true);
    }
    if let Some(a) = alpha {
        unpremultiply(&mut px, a, max as u64);
    }
    let words: Vec<u32> = match img.samples {
        Samples::U8(_) => px
            .iter()
            .map(|p| (p[0] | p[1] << 8 | p[2] << 16 | p[3] << 24) as u32)
            .collect(),
        Samples::U16(_) => px
            .iter()
            .flat_map(|p| [(p[0] | p[1] << 16) as u32, (p[2] | p[3] << 16) as u32])
            .collect(),
    };
    Ok(from_words(&words, img))
}

// ---------------------------------------------------------------------------------------
// The GPU path.

// Keep in sync with wgsl/blur.wgsl: outputs per gaussian thread (its register reuse is
// written for two).
const GAUSS_PPT: u32 = 2;
const FMT_PACK8: u32 = 0;
const FMT_PACK16: u32 = 1;
const FMT_WIDE: u32 = 2;

/// Keep in sync with `Params` in wgsl/blur.wgsl.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, bytemuck::Pod, bytemuck::Zeroable)]
struct PassParams {
    lines: u32,
    len: u32,
    out_start: u32,
    out_end: u32,
    in_base: u32,
    in_line_stride: u32,
    out_base: u32,
    out_pos_stride: u32,
    radius: u32,
    seg_len: u32,
    _pad: [u32; 2],
}

/// The shape of the blur kernels' work, which `gpukit tune` chooses per adapter and size.
/// Results are bit-identical for every choice.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Tunables {
    /// Box: lines per workgroup, threads per line, positions per thread per chunk (1, 2, 4
    /// or 8: the shader's `BOX_PPT`, a generated constant).
    pub box_rows: u32,
    pub box_tpl: u32,
    pub box_ppt: u32,
    /// Gaussian: the most lines per workgroup (fewer where the radius's staging does not
    /// fit workgroup memory), and threads per line (two outputs each).
    pub gauss_rows: u32,
    pub gauss_tpl: u32,
}

impl Tunables {
    /// The defaults, measured on an H200 at 4K (box r = 3, 15, 100 in 0.215, 0.201, 0.229 ms;
    /// gaussian sigma 5 in 0.312 ms): 64 invocations and 5.3 KiB of workgroup memory for the
    /// box, 128 invocations for the gaussian (which takes fewer lines where its staging does
    /// not fit), within the limits of every adapter.
    pub const DEFAULT: Tunables = Tunables {
        box_rows: 8,
        box_tpl: 8,
        box_ppt: 4,
        gauss_rows: 4,
        gauss_tpl: 32,
    };

    fn box_chunk(&self) -> u32 {
        self.box_tpl * self.box_ppt
    }

    fn gauss_chunk(&self) -> u32 {
        self.gauss_tpl * GAUSS_PPT
    }

    /// Workgroup memory of the box pass (window totals, carries, the transposition tile).
    /// Keep in sync with wgsl/blur.wgsl.
    pub fn box_workgroup_bytes(&self) -> u32 {
        16 * (self.box_rows * self.box_tpl + self.box_rows + self.box_rows * (self.box_chunk() + 1))
    }

    /// Whether the kernels can run this choice on an adapter with `limits` (the gaussian
    /// with one line per workgroup; more lines are taken where they fit).
    pub fn check(&self, limits: &wgpu::Limits) -> Result<()> {
        let max_wg = limits
            .max_compute_invocations_per_workgroup
            .min(limits.max_compute_workgroup_size_x);
        let pow2 = |v: u32| v.is_power_of_two();
        ensure!(
            pow2(self.box_rows) && pow2(self.box_tpl) && matches!(self.box_ppt, 1 | 2 | 4 | 8),
            "blur box rows and threads per line must be powers of two, positions per thread 1, 2, 4 or 8"
        );
        ensure!(
            pow2(self.gauss_rows) && pow2(self.gauss_tpl),
            "blur gaussian rows and threads per line must be powers of two"
        );
        ensure!(
            self.box_rows * self.box_tpl <= max_wg && self.gauss_tpl <= max_wg,
            "blur workgroups exceed this adapter's {max_wg} invocations"
        );
        ensure!(
            self.box_workgroup_bytes() <= limits.max_compute_workgroup_storage_size,
            "blur box needs {} bytes of workgroup memory; this adapter has {}",
            self.box_workgroup_bytes(),
            limits.max_compute_workgroup_storage_size
        );
        Ok(())
    }
}

impl std::fmt::Display for Tunables {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "box rows={} tpl={} ppt={}, gaussian rows={} tpl={}",
            self.box_rows, self.box_tpl, self.box_ppt, self.gauss_rows, self.gauss_tpl
        )
    }
}

/// Positions one workgroup walks along a line. Lines are split into segments so that a
/// 2160-row image gives the GPU hundreds of workgroups, not 68. Each box segment pays
/// min(2r + 1, len) loads for its first window sum, so box segments are at least 4 windows
/// long (that cost stays under a quarter of the two loads an output).
/// Segments are whole chunks (`chunk` positions a workgroup does at a time). With one line
/// per invocation (CPU adapters, which have few cores to fill) a whole line is one segment.
fn segment_len(kind: Kind, layout: Layout, radius: u32, len: u32, chunk: u32) -> u32 {
    let want = match (layout, kind) {
        (Layout::LinePerInvocation, _) => len,
        (Layout::Workgroup, Kind::Box) => (4 * (2 * radius + 1)).max(256),
        (Layout::Workgroup, Kind::Gaussian { .. }) => 256,
    };
    want.next_multiple_of(chunk.max(64)).min(len.max(1))
}

/// Pixels between consecutive lines of the transposed intermediate (a row pass writes one
/// position of `lines` lines at a time, lines adjacent). From 256 lines on, `lines` rounded
/// up to 64 plus 16: never a multiple of a large power of two, so that a chunk's writes, one
/// stride apart, spread over the memory partitions (unpadded, a 4096x2048 image blurred at
/// half the speed of a 3840x2160 one on the H200).
fn mid_stride(lines: u32) -> u32 {
    if lines >= 256 {
        lines.next_multiple_of(64) + 16
    } else {
        lines
    }
}

/// The most lines whose padded stride fits `cap` pixels (the inverse of `mid_stride`).
fn max_lines(cap: u64) -> u64 {
    if cap >= 256 + 80 {
        (cap - 16) / 64 * 64
    } else {
        cap.min(255)
    }
}

/// How a pass's work is laid out on the device.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Layout {
    /// Workgroups cooperate through workgroup memory (box_pass, gauss_pass): for GPUs.
    Workgroup,
    /// Each invocation walks one line alone, without workgroup memory or barriers
    /// (box_line_pass, gauss_line_pass): for CPU adapters such as lavapipe.
    LinePerInvocation,
}

impl Layout {
    /// The layout for an adapter: one line per invocation on CPU adapters.
    pub fn for_gpu(gpu: &Gpu) -> Layout {
        if gpu.info.device_type == wgpu::DeviceType::Cpu {
            Layout::LinePerInvocation
        } else {
            Layout::Workgroup
        }
    }
}

/// Lines per workgroup of the one-line-per-invocation kernels (keep in sync with LINE_WG).
const LINE_WG: u32 = 64;

/// How a blur runs on a GPU: the kernels' layout and shape, and the limits the plan works
/// within (tests lower `max_binding` to force strips on small images, and pick the layout to
/// test both on any adapter).
#[derive(Clone, Copy, Debug)]
pub struct GpuOptions {
    /// Largest storage binding to use (bytes); `None` is the adapter's limit.
    pub max_binding: Option<u64>,
    /// `None`: the adapter's layout ([`Layout::for_gpu`]).
    pub layout: Option<Layout>,
    pub tunables: Tunables,
}

impl GpuOptions {
    pub const DEFAULT: GpuOptions = GpuOptions {
        max_binding: None,
        layout: None,
        tunables: Tunables::DEFAULT,
    };
}

/// A blur planned for one image size on one device: pipelines, buffers and strips, ready
/// to record (many times, for `bench`).
pub struct BlurPlan {
    /// Row pass with and without premultiply; column pass with and without unpremultiply.
    kernels: [Kernel; 4],
    passes: Vec<Pass>,
    /// The full-image buffer the last pass writes.
    result: wgpu::Buffer,
    words: usize,
    pub strips: usize,
}

/// One dispatch of a plan.
struct Pass {
    label: &'static str,
    kernel: usize,
    bind: wgpu::BindGroup,
    workgroups: u32,
}

/// Gaussian lines per workgroup: as many (`t.gauss_rows`, halved down to 1) as fit the
/// workgroup storage (lines staged in format `fmt` and the output tile; the weights are a
/// uniform).
fn gauss_rows(radius: u32, storage: u32, t: &Tunables, fmt: u32) -> Option<u32> {
    let ch = t.gauss_chunk();
    std::iter::successors(Some(t.gauss_rows), |&r| (r > 1).then_some(r / 2)).find(|&rows| {
        let staged = staged_bytes(fmt) * rows * gauss_stride(ch + 2 * radius, fmt);
        staged + 16 * rows * (ch + 1) <= storage
    })
}

/// Bytes of one staged gaussian sample: staging keeps the pass's input packing (`stage` in
/// wgsl/blur.wgsl).
fn staged_bytes(fmt: u32) -> u32 {
    match fmt {
        FMT_PACK8 => 4,
        FMT_PACK16 => 8,
        _ => 16,
    }
}

/// Elements a staged gaussian line of `width` samples in format `fmt` takes in workgroup
/// memory: one of padding every 128 bytes (`skew` in wgsl/blur.wgsl; keep in sync).
fn gauss_stride(width: u32, fmt: u32) -> u32 {
    width + width / (128 / staged_bytes(fmt)) + 1
}

/// The uniform array of gaussian weights: 251 vec4s, 1001 taps (wgsl/blur.wgsl).
const WEIGHT_SLOTS: usize = 4 * 251;

impl BlurPlan {
    pub fn new(
        gpu: &Gpu,
        img: &Image,
        params: &BlurParams,
        options: GpuOptions,
    ) -> Result<BlurPlan> {
        let max = img.max_value();
        let ar = arith(params, max)?;
        let t = options.tunables;
        t.check(&gpu.limits)?;
        let (w, h) = (img.width, img.height);
        let r = params.radius;
        let wpp: u64 = if max > 255 { 2 } else { 1 };
        let in_fmt = if max > 255 { FMT_PACK16 } else { FMT_PACK8 };
        // Between the passes 8-bit images keep 16-bit fixed point (F <= 8 fraction bits on top
        // of 8 integer bits), 16-bit images a word per channel.
        let (mid_fmt, mid_px_bytes) = if max > 255 {
            (FMT_WIDE, 16)
        } else {
            (FMT_PACK16, 8)
        };
        let limit = options
            .max_binding
            .unwrap_or(u64::MAX)
            .min(gpu.limits.max_storage_buffer_binding_size);
        let align = gpu.limits.min_storage_buffer_offset_alignment as u64;
        let image_bytes = w as u64 * h as u64 * wpp * 4;
        if image_bytes > gpu.limits.max_buffer_size {
            bail!(
                "a {w}x{h} image needs a {image_bytes}-byte buffer; this adapter's largest is {}",
                gpu.limits.max_buffer_size
            );
        }

        // Strips of output rows: the first pass covers them plus r rows of halo on each side
        // (clamped to the image) and its intermediate (8 or 16 bytes a pixel) must fit one binding,
        // as must each strip of the packed input and output.
        let budget = limit.saturating_sub(align) / 4 * 4;
        let rows_in_budget =
            max_lines(budget / (w as u64 * mid_px_bytes)).min(budget / (w as u64 * wpp * 4));
        let halo = 2 * r as u64;
        let strip_rows = if rows_in_budget >= h as u64 {
            h as u64
        } else if rows_in_budget > halo {
            rows_in_budget - halo
        } else {
            bail!(
                "a {w}-pixel-wide image with radius {r} does not fit this adapter's {limit}-byte storage binding, even in strips"
            );
        };
        let strips: Vec<(u32, u32)> = (0..h)
            .step_by(strip_rows as usize)
            .map(|y0| (y0, (y0 as u64 + strip_rows).min(h as u64) as u32))
            .collect();

        let layout = options.layout.unwrap_or_else(|| Layout::for_gpu(gpu));
        // The gaussian's staged lines per workgroup and samples per line, when it stages.
        let mut staging: Option<(u32, u32)> = None;
        let (entry, constants, rows_per_wg, chunk): (&str, Vec<(&str, f64)>, u32, u32) =
            match (layout, params.kind) {
                (Layout::LinePerInvocation, Kind::Box) => (
                    "box_line_pass",
                    vec![("LINE_WG", LINE_WG as f64)],
                    LINE_WG,
                    1,
                ),
                (Layout::LinePerInvocation, Kind::Gaussian { .. }) => (
                    "gauss_line_pass",
                    vec![("LINE_WG", LINE_WG as f64)],
                    LINE_WG,
                    1,
                ),
                (Layout::Workgroup, Kind::Box) => (
                    "box_pass",
                    vec![
                        ("BOX_ROWS", t.box_rows as f64),
                        ("BOX_TPL", t.box_tpl as f64),
                    ],
                    t.box_rows,
                    t.box_chunk(),
                ),
                (Layout::Workgroup, Kind::Gaussian { .. }) => {
                    let storage = gpu.limits.max_compute_workgroup_storage_size;
                    // The second pass stages the wider format (the intermediate).
                    let rows = gauss_rows(r, storage, &t, mid_fmt).ok_or_else(|| {
                        anyhow::anyhow!(
                        "gaussian radius {r} needs more workgroup storage than this adapter has"
                    )
                    })?;
                    let ch = t.gauss_chunk();
                    staging = Some((rows, ch + 2 * r));
                    (
                        "gauss_pass",
                        vec![
                            ("GAUSS_TPL", t.gauss_tpl as f64),
                            ("G_ROWS", rows as f64),
                            ("G_WG", (rows * t.gauss_tpl) as f64),
                            ("G_OUT_LEN", (rows * (ch + 1)) as f64),
                            ("G_TAPS", (2 * r + 1) as f64),
                        ],
                        rows,
                        ch,
                    )
                }
            };
        let alpha = alpha_lane(img.channels);
        // A pass's pipeline: its formats and arithmetic are constants, so every division in
        // it is by a constant. Every loop in blur.wgsl is bounded by a constant or a uniform,
        // so drivers may unroll them.
        let kernel = |second: bool, premultiply: bool, unpremultiply: bool| {
            let (fmt_in, fmt_out, (mul, add, div)) = if second {
                (mid_fmt, in_fmt, ar.second)
            } else {
                (in_fmt, mid_fmt, ar.first)
            };
            let mut c = constants.clone();
            if let Some((rows, width)) = staging {
                c.push(("G_IN_LEN", (rows * gauss_stride(width, fmt_in)) as f64));
            }
            c.extend([
                ("IN_FMT", fmt_in as f64),
                ("OUT_FMT", fmt_out as f64),
                ("MUL", mul as f64),
                ("ADD", add as f64),
                ("DIV", div as f64),
                ("MAX_VALUE", max as f64),
                ("PREMULTIPLY", premultiply as u32 as f64),
                ("UNPREMULTIPLY", unpremultiply as u32 as f64),
                ("ALPHA_LANE", alpha.unwrap_or(3) as f64),
            ]);
            gpu.kernel_variant(&shader!("blur"), &[("BOX_PPT", t.box_ppt)], entry, &c, true)
        };
        let has_alpha = alpha.is_some();
        // The first iteration's row pass premultiplies, the last one's column pass divides out.
        let kernels = [
            kernel(false, has_alpha, false)?,
            kernel(false, false, false)?,
            kernel(true, false, has_alpha)?,
            kernel(true, false, false)?,
        ];

        let a = gpu.upload_with("blur image a", Usage::Storage, image_bytes, |view| {
            write_words(img, view)
        })?;
        let b = gpu.buffer("blur image b", Usage::Storage, image_bytes);
        let max_strip_in = strips
            .iter()
            .map(|&(y0, y1)| mid_stride((y1 + r).min(h) - y0.saturating_sub(r)))
            .max()
            .unwrap_or(0) as u64;
        let mid = gpu.buffer(
            "blur intermediate",
            Usage::Storage,
            w as u64 * max_strip_in * mid_px_bytes,
        );
        let mut slots = ar.weights.clone();
        slots.resize(WEIGHT_SLOTS, 0);
        let weights = gpu.upload("blur weights", Usage::Uniform, &slots);

        let mut passes = Vec::new();
        let row_bytes = w as u64 * wpp * 4;
        // A binding of `rows` image rows from row `y0`, its offset aligned down; returns the
        // binding and the word offset of row y0 inside it.
        let rows_binding = |y0: u32, rows: u32| {
            let start = y0 as u64 * row_bytes;
            let offset = start / align * align;
            let size = (start - offset + rows as u64 * row_bytes).max(4);
            (offset, size, ((start - offset) / 4) as u32)
        };
        for it in 0..params.iterations {
            let (src, dst) = if it % 2 == 0 { (&a, &b) } else { (&b, &a) };
            for &(y0, y1) in &strips {
                let s0 = y0.saturating_sub(r);
                let s1 = (y1 + r).min(h);
                let (ioff, isize, ibase) = rows_binding(s0, s1 - s0);
                let (ooff, osize, obase) = rows_binding(y0, y1 - y0);
                let stride = mid_stride(s1 - s0);
                let mid_size = w as u64 * stride as u64 * mid_px_bytes;
                let p1 = PassParams {
                    lines: s1 - s0,
                    len: w,
                    out_start: 0,
                    out_end: w,
                    in_base: ibase,
                    in_line_stride: w,
                    out_base: 0,
                    out_pos_stride: stride,
                    radius: r,
                    seg_len: segment_len(params.kind, layout, r, w, chunk),
                    _pad: [0; 2],
                };
                // The second pass's lines are the image's columns, read from the transposed
                // intermediate; it writes rows y0..y1 (positions y0 - s0 .. y1 - s0).
                let p2 = PassParams {
                    lines: w,
                    len: s1 - s0,
                    out_start: y0 - s0,
                    out_end: y1 - s0,
                    in_base: 0,
                    in_line_stride: stride,
                    out_base: obase,
                    out_pos_stride: w,
                    seg_len: segment_len(params.kind, layout, r, y1 - y0, chunk),
                    ..p1
                };
                let u1 = gpu.upload("blur params", Usage::Uniform, &[p1]);
                let u2 = gpu.upload("blur params", Usage::Uniform, &[p2]);
                let psize = std::mem::size_of::<PassParams>() as u64;
                let mut g1: Vec<(&wgpu::Buffer, u64, u64)> =
                    vec![(&u1, 0, psize), (src, ioff, isize), (&mid, 0, mid_size)];
                let mut g2: Vec<(&wgpu::Buffer, u64, u64)> =
                    vec![(&u2, 0, psize), (&mid, 0, mid_size), (dst, ooff, osize)];
                if !ar.weights.is_empty() {
                    let wsize = 4 * WEIGHT_SLOTS as u64;
                    g1.push((&weights, 0, wsize));
                    g2.push((&weights, 0, wsize));
                }
                let k1 = if it == 0 { 0 } else { 1 };
                let k2 = if it + 1 == params.iterations { 2 } else { 3 };
                passes.push(Pass {
                    label: "blur rows",
                    kernel: k1,
                    bind: gpu.bind_ranges(&kernels[k1], &g1),
                    workgroups: (s1 - s0).div_ceil(rows_per_wg) * w.div_ceil(p1.seg_len),
                });
                passes.push(Pass {
                    label: "blur columns",
                    kernel: k2,
                    bind: gpu.bind_ranges(&kernels[k2], &g2),
                    workgroups: w.div_ceil(rows_per_wg) * (y1 - y0).div_ceil(p2.seg_len),
                });
            }
        }
        Ok(BlurPlan {
            kernels,
            passes,
            result: if params.iterations.is_multiple_of(2) {
                a
            } else {
                b
            },
            words: (image_bytes / 4) as usize,
            strips: strips.len(),
        })
    }

    /// Records every pass: per iteration and strip, the row pass then the column pass.
    pub fn record(&self, batch: &mut Batch) {
        for p in &self.passes {
            batch.dispatch(p.label, &self.kernels[p.kernel], &p.bind, p.workgroups);
        }
    }

    /// The result as an image like `like`, converted straight from the read-back memory.
    fn read(&self, gpu: &Gpu, like: &Image) -> Result<Image> {
        gpu.read_with(&self.result, 0, 4 * self.words as u64, |bytes| {
            from_words(bytemuck::cast_slice(bytes), like)
        })
    }
}

/// Blurs `img` on the engine. With timings, adds upload, compute and download phases and GPU
/// time per pass.
pub fn blur(
    engine: &Engine,
    img: &Image,
    params: &BlurParams,
    timings: &mut Timings,
) -> Result<Image> {
    blur_with(engine, img, params, GpuOptions::DEFAULT, timings)
}

/// `blur` with explicit GPU limits (tests force strips with these).
pub fn blur_with(
    engine: &Engine,
    img: &Image,
    params: &BlurParams,
    options: GpuOptions,
    timings: &mut Timings,
) -> Result<Image> {
    let gpu = match engine {
        Engine::Cpu => return timings.phase("compute", || blur_cpu(img, params)),
        Engine::Gpu(gpu) => gpu,
    };
    if img.pixels() == 0 {
        arith(params, img.max_value())?;
        return Ok(img.clone());
    }
    let plan = timings.phase("upload", || BlurPlan::new(gpu, img, params, options))?;
    gpu.run_timed(timings, plan.passes.len() as u32, |b| plan.record(b))?;
    timings.phase("download", || plan.read(gpu, img))
}

/// `bench blur`: a 3840x2160 RGBA8 image, box r = 3, 15, 100 and gaussian sigma 5; and a
/// 4096x2048 one, box r = 15, where every line length is a power of two.
pub fn bench_cases(engine: &Engine) -> Result<Vec<Case<'_>>> {
    let image = |w: u32, h: u32| {
        Image::new_u8(
            w,
            h,
            4,
            crate::bench::noise_bytes((w * h * 4) as usize, 0x9e37_79b9),
        )
    };
    let uhd = image(3840, 2160);
    let pow2 = image(4096, 2048);
    let gauss5 = BlurParams::new(Kind::Gaussian { sigma: 5.0 }, gaussian_radius(5.0), 1);
    let configs = [
        ("4K RGBA8 box r=3", &uhd, BlurParams::new(Kind::Box, 3, 1)),
        ("4K RGBA8 box r=15", &uhd, BlurParams::new(Kind::Box, 15, 1)),
        (
            "4K RGBA8 box r=100",
            &uhd,
            BlurParams::new(Kind::Box, 100, 1),
        ),
        ("4K RGBA8 gaussian sigma=5", &uhd, gauss5),
        (
            "4096x2048 RGBA8 box r=15",
            &pow2,
            BlurParams::new(Kind::Box, 15, 1),
        ),
    ];
    let mut cases = Vec::new();
    for (name, img, params) in configs {
        let pixels = img.pixels() as f64;
        cases.push(match engine {
            Engine::Gpu(gpu) => {
                let plan = BlurPlan::new(gpu, img, &params, GpuOptions::DEFAULT)?;
                Case::gpu("blur", name.into(), Unit::Gpixps, pixels, move |b| {
                    plan.record(b)
                })
            }
            Engine::Cpu => {
                let img = img.clone();
                Case::cpu("blur", name.into(), Unit::Gpixps, pixels, move || {
                    std::hint::black_box(blur_cpu(&img, &params).expect("valid bench params"));
                })
            }
        });
    }
    Ok(cases)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn weights_sum_to_a_power_of_two_and_are_symmetric() {
        for sigma in [0.5, 1.0, 5.0, 30.0] {
            let r = gaussian_radius(sigma);
            let w = gaussian_weights(sigma, r, 16);
            assert_eq!(w.iter().map(|&x| x as u64).sum::<u64>(), 1 << 16);
            assert_eq!(w.len(), 2 * r as usize + 1);
            for k in 0..r as usize {
                assert_eq!(w[k], w[w.len() - 1 - k], "sigma {sigma}");
            }
        }
    }

    #[test]
    fn padded_strides_fit_their_budget_and_avoid_powers_of_two() {
        for cap in [1u64, 38, 255, 300, 336, 337, 5000, 1 << 20] {
            let lines = max_lines(cap);
            assert!(mid_stride(lines as u32) as u64 <= cap, "{cap}");
            assert!(lines > 0);
        }
        assert_eq!(mid_stride(2048), 2064);
        assert_eq!(mid_stride(2160), 2192);
        assert_eq!(mid_stride(100), 100);
    }

    #[test]
    fn fraction_bits_and_radius_limits() {
        assert_eq!(fraction_bits(31, 255), Some(8));
        assert_eq!(fraction_bits(31, 65535), Some(8));
        assert_eq!(fraction_bits(65535, 65535), Some(0));
        assert_eq!(fraction_bits(65537, 65535), None);
        assert_eq!(max_box_radius(65535), 32767);
        assert_eq!(max_box_radius(255), 8388607);
    }

    // Hand-computed: a 3-pixel gray row 0, 30, 255 with r = 1 and clamped edges has window
    // sums 30, 285, 540; the column pass of a 1-row image repeats each value 3 times.
    #[test]
    fn box_by_hand() {
        let img = Image::new_u8(3, 1, 1, vec![0, 30, 255]);
        let out = blur_cpu(&img, &BlurParams::new(Kind::Box, 1, 1)).unwrap();
        // Row pass: round(256 * S / 3) = 2560, 24320, 46080; column pass: round(3 * v / 768).
        assert_eq!(out.samples, Samples::U8(vec![10, 95, 180]));
    }

    #[test]
    fn box_is_within_one_of_the_exact_mean() {
        let (w, h) = (13usize, 7usize);
        let data: Vec<u8> = (0..w * h).map(|i| (i * 97 % 256) as u8).collect();
        let img = Image::new_u8(w as u32, h as u32, 1, data.clone());
        for r in [0i64, 1, 2, 5, 20] {
            let out = blur_cpu(&img, &BlurParams::new(Kind::Box, r as u32, 1)).unwrap();
            let Samples::U8(out) = out.samples else {
                unreachable!()
            };
            for y in 0..h as i64 {
                for x in 0..w as i64 {
                    let mut s = 0f64;
                    for dy in -r..=r {
                        for dx in -r..=r {
                            let (xx, yy) = (
                                (x + dx).clamp(0, w as i64 - 1),
                                (y + dy).clamp(0, h as i64 - 1),
                            );
                            s += data[(yy * w as i64 + xx) as usize] as f64;
                        }
                    }
                    let exact = s / ((2 * r + 1) * (2 * r + 1)) as f64;
                    let got = out[(y * w as i64 + x) as usize] as f64;
                    assert!(
                        (got - exact).abs() <= 1.0,
                        "r {r} ({x},{y}): {got} vs {exact}"
                    );
                }
            }
        }
    }

    #[test]
    fn opaque_alpha_blurs_like_no_alpha() {
        let rgb: Vec<u8> = (0..5 * 4 * 3).map(|i| (i * 53 % 256) as u8).collect();
        let rgba: Vec<u8> = rgb
            .chunks(3)
            .flat_map(|p| [p[0], p[1], p[2], 255])
            .collect();
        let p = BlurParams::new(Kind::Gaussian { sigma: 1.5 }, 5, 2);
        let a = blur_cpu(&Image::new_u8(5, 4, 3, rgb), &p).unwrap();
        let b = blur_cpu(&Image::new_u8(5, 4, 4, rgba), &p).unwrap();
        let (Samples::U8(a), Samples::U8(b)) = (a.samples, b.samples) else {
            unreachable!()
        };
        let b3: Vec<u8> = b.chunks(4).flat_map(|p| [p[0], p[1], p[2]]).collect();
        assert_eq!(a, b3);
    }

    // No dark fringe: a red pixel next to transparent black blurs to red, not dark red.
    #[test]
    fn colour_is_weighted_by_alpha() {
        let img = Image::new_u8(2, 1, 4, vec![255, 0, 0, 255, 0, 0, 0, 0]);
        let out = blur_cpu(&img, &BlurParams::new(Kind::Box, 1, 1)).unwrap();
        let Samples::U8(px) = out.samples else {
            unreachable!()
        };
        assert_eq!(&px[0..3], &[255, 0, 0]);
        assert_eq!(&px[4..7], &[255, 0, 0]);
        assert!(px[7] > 0 && px[7] < 255);
    }
}
