//! The GPU passes of a histogram: the chunk pass (per-tile histograms in workgroup memory,
//! added into the image's counts with global atomics) and the running total; and
//! [`HistogramGpu`], which keeps kernels and the last plan between images.

use std::collections::HashMap;
use std::rc::Rc;

use anyhow::{bail, Result};

use super::geometry::{Geometry, Tuning};
use super::{check_bins, Channels, Histogram, Tunables};
use crate::gpu::{Batch, Gpu, Kernel, PassTimer, Timings, Usage};
use crate::io::image::Image;
use crate::shader;
use crate::tune::Tunable;

// The running total and the plot's scale pass (a power of two: a tree reduction).
pub(super) const TOTAL_WG_SIZE: u32 = 256;
pub(super) const SCALE_WG_SIZE: u32 = 256;

/// The running total's overridable constants.
pub(super) const TOTAL_OVERRIDES: [(&str, u32); 1] = [("WG_SIZE", TOTAL_WG_SIZE)];

/// The counting kernels, for the shader tests, with the constants of RGBA 16-bit luminance
/// counted in two copies.
pub(super) fn shaders() -> Vec<crate::ops::ShaderCase> {
    use crate::ops::ShaderCase;
    let g = Geometry {
        wg_size: 256,
        unit_pixels: 2,
        unit_vecs: 1,
        copies: 2,
        pack: 2,
        span: 4096,
        n_ranges: 16,
        segment_pixels: 1 << 20,
        max_tiles: 64,
        max_tile_units: 1 << 16,
        grid: 1 << 20,
        slices: 4,
    };
    vec![
        ShaderCase::params::<ChunkParams>(shader!("histogram_chunk"))
            .with_const("LUMA_WEIGHTS", super::LUMA_WEIGHTS)
            .with_const("LUMA_SHIFT", super::LUMA_SHIFT)
            .with_overrides(&float(&chunk_overrides(&g, 4, 16, 4, 1 << 16))),
        ShaderCase::params::<TotalParams>(shader!("histogram_total"))
            .with_overrides(&float(&TOTAL_OVERRIDES)),
    ]
}

/// Overridable constants as wgpu takes them.
pub(super) fn float(constants: &[(&'static str, u32)]) -> Vec<(&'static str, f64)> {
    constants.iter().map(|&(k, v)| (k, f64::from(v))).collect()
}

/// The chunk kernel's overridable constants: the geometry, the input's channels (`ic`) and
/// bits, the channels counted (`hc`), and whether a sample is its own bin (`bins` one per
/// value, all in one range: `DIRECT`).
fn chunk_overrides(
    g: &Geometry,
    ic: u32,
    bits: u32,
    hc: u32,
    bins: u32,
) -> [(&'static str, u32); 11] {
    let direct = u64::from(bins) == 1 << bits && g.n_ranges == 1 && g.span == bins;
    [
        ("WG_SIZE", g.wg_size),
        ("IN_CHANNELS", ic),
        ("BITS", bits),
        ("HC", hc),
        ("COPIES", g.copies),
        ("PACK", g.pack),
        ("SLICES", g.slices),
        ("SPAN", g.span),
        ("UNIT_PIXELS", g.unit_pixels),
        ("UNIT_VECS", g.unit_vecs),
        ("DIRECT", direct as u32),
    ]
}

/// Its WGSL twin is `Params` in wgsl/histogram_chunk.wgsl (the shader test checks their fields).
#[repr(C)]
#[derive(Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
struct ChunkParams {
    n_pixels: u32,
    tile_units: u32,
    n_tiles: u32,
    bins: u32,
    n_ranges: u32,
}

crate::ops::params_layout!(ChunkParams {
    n_pixels,
    tile_units,
    n_tiles,
    bins,
    n_ranges
});

/// Its WGSL twin is `Params` in wgsl/histogram_total.wgsl (the shader test checks their fields).
#[repr(C)]
#[derive(Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
struct TotalParams {
    entries: u32,
    slices: u32,
}

crate::ops::params_layout!(TotalParams { entries, slices });

/// The pass of one segment size: the chunk pass, adding into the image's counts.
pub(super) struct SegmentPasses {
    pixels: u64,
    chunk_bind: wgpu::BindGroup,
    chunk_workgroups: u32,
}

/// One image layout's histogram on the device: buffers, bind groups and passes, reusable for
/// every image of that layout (frames of a video, `bench`).
pub struct HistogramPlan {
    pub(super) chunk: Rc<Kernel>,
    geometry: Geometry,
    pub(super) pixels: u64,
    pub(super) in_channels: u8,
    pub(super) bit_depth: u32,
    pub(super) pixel_bytes: u64,
    pub(super) entries: u32,
    pub(super) channels: Channels,
    pub(super) bins: u32,
    /// One segment's pixels, packed into words as the image stores them.
    pub(super) src: wgpu::Buffer,
    /// The image's counts (u32, bin-major) in `slices` copies, added into by the chunk
    /// workgroups (tile t into slice t % slices).
    pub(super) counts: wgpu::Buffer,
    pub(super) slices: u32,
    pub(super) segments: Vec<SegmentPasses>,
    // Kept alive for the bind groups.
    pub(super) _params: Vec<wgpu::Buffer>,
}

impl HistogramPlan {
    /// The segment sizes, in order: full segments, then the remainder.
    fn segment_sizes(pixels: u64, segment_pixels: u64) -> Vec<u64> {
        let full = pixels / segment_pixels;
        let rest = pixels % segment_pixels;
        let mut sizes = vec![segment_pixels; full as usize];
        if rest > 0 || pixels == 0 {
            sizes.push(rest);
        }
        sizes
    }

    /// Records one segment's pass (its chunks adding into `counts`).
    pub(super) fn record(&self, batch: &mut Batch, seg: &SegmentPasses) {
        batch.dispatch(
            "histogram chunk",
            &self.chunk,
            &seg.chunk_bind,
            seg.chunk_workgroups,
        );
    }

    /// The passes for a segment of `pixels` pixels.
    fn passes(&self, pixels: u64) -> &SegmentPasses {
        self.segments
            .iter()
            .find(|s| s.pixels == pixels)
            .expect("a pass list for every segment size")
    }
}

/// The running 64-bit total on the device.
pub(super) struct Total {
    pub(super) channels: Channels,
    pub(super) pixels: u64,
    /// (low, high) words of each count.
    pub(super) buffer: wgpu::Buffer,
}

/// Histograms on the GPU: compiled kernels and the last plan kept between images, and the
/// running total for `--sum` and the plot.
pub struct HistogramGpu<'g> {
    pub(super) gpu: &'g Gpu,
    pub(super) bins: u32,
    pub tuning: Tuning,
    pub(super) kernels: HashMap<String, Rc<Kernel>>,
    pub(super) plan: Option<HistogramPlan>,
    pub(super) total: Option<Total>,
    pub(super) timer: Option<PassTimer>,
}

impl<'g> HistogramGpu<'g> {
    pub fn new(gpu: &'g Gpu, bins: u32) -> Self {
        HistogramGpu {
            gpu,
            bins,
            tuning: Tuning::for_gpu(gpu),
            kernels: HashMap::new(),
            plan: None,
            total: None,
            timer: None,
        }
    }

    /// The device this runs on.
    pub fn gpu(&self) -> &'g Gpu {
        self.gpu
    }

    /// Times each pass with timestamp queries, into the `Timings` given to `histogram`.
    pub fn time_passes(&mut self) {
        self.timer = Some(PassTimer::new(self.gpu, 64));
    }

    /// Shapes the kernels of the images histogrammed from now on (the next one is planned
    /// afresh when this changes anything).
    pub fn set_tunables(&mut self, tunables: Tunables) {
        if self.tuning.tunables != tunables {
            self.tuning.tunables = tunables;
            self.plan = None;
        }
    }

    pub(super) fn kernel(
        &mut self,
        name: &str,
        constants: &[(&'static str, u32)],
    ) -> Result<Rc<Kernel>> {
        let key = format!("{name}{constants:?}");
        if let Some(k) = self.kernels.get(&key) {
            return Ok(Rc::clone(k));
        }
        let shader = match name {
            "chunk" => shader!("histogram_chunk"),
            "total" => shader!("histogram_total"),
            _ => shader!("histogram_plot_scale"),
        };
        // The chunk kernel bounds every loop by a constant or a uniform size: no loop counter
        // in the way of unrolling its loops over units, pixels and copies (docs of
        // `Gpu::kernel_unrolled`).
        let kernel = Rc::new(if name == "chunk" {
            self.gpu
                .kernel_unrolled(&shader, "main", &float(constants))?
        } else {
            self.gpu.kernel(&shader, "main", &float(constants))?
        });
        self.kernels.insert(key, Rc::clone(&kernel));
        Ok(kernel)
    }

    /// A plan for images of this layout and these channels.
    ///
    pub fn plan(
        &mut self,
        width: u32,
        height: u32,
        in_channels: u8,
        bit_depth: u32,
        channels: Channels,
    ) -> Result<HistogramPlan> {
        let gpu = self.gpu;
        check_bins(self.bins, bit_depth)?;
        let pixels = width as u64 * height as u64;
        if pixels > u32::MAX as u64 {
            bail!("{width}x{height} is more pixels than a 32-bit count holds");
        }
        let (ic, bits, hc, bins) = (
            u32::from(in_channels),
            bit_depth,
            channels.count(),
            self.bins,
        );
        self.tuning.tunables.check(&gpu.limits)?;
        let g = Geometry::new(gpu, &self.tuning, ic, bits, hc, bins);
        let chunk = self.kernel("chunk", &chunk_overrides(&g, ic, bits, hc, bins))?;
        let entries = bins * hc;
        let pixel_bytes = u64::from(ic * bits / 8);
        let sizes = HistogramPlan::segment_sizes(pixels, g.segment_pixels);
        let first = sizes[0];
        let src_bytes = first.div_ceil(g.unit_pixels as u64) * g.unit_vecs as u64 * 16;
        let src = gpu.buffer("histogram pixels", Usage::Storage, src_bytes);
        let counts = gpu.buffer(
            "histogram counts",
            Usage::Storage,
            u64::from(g.slices) * u64::from(entries) * 4,
        );
        let mut params = Vec::new();
        let mut segments = Vec::new();
        for &seg_pixels in &sizes {
            if segments
                .iter()
                .any(|s: &SegmentPasses| s.pixels == seg_pixels)
            {
                continue;
            }
            let (tile_units, n_tiles) = g.tiles(seg_pixels);
            let p = gpu.upload(
                "histogram chunk params",
                Usage::Uniform,
                &[ChunkParams {
                    n_pixels: seg_pixels as u32,
                    tile_units,
                    n_tiles,
                    bins,
                    n_ranges: g.n_ranges,
                }],
            );
            let chunk_bind = gpu.bind(&chunk, &[&p, &src, &counts]);
            params.push(p);
            segments.push(SegmentPasses {
                pixels: seg_pixels,
                chunk_bind,
                chunk_workgroups: n_tiles * g.n_ranges,
            });
        }
        Ok(HistogramPlan {
            chunk,
            geometry: g,
            pixels,
            in_channels,
            bit_depth,
            pixel_bytes,
            entries,
            channels,
            bins,
            src,
            counts,
            slices: g.slices,
            segments,
            _params: params,
        })
    }

    /// Starts a running total on the device over the images histogrammed from now on, all
    /// counted with `channels`.
    pub fn start_total(&mut self, channels: Channels) {
        let entries = self.bins as u64 * channels.count() as u64;
        self.total = Some(Total {
            channels,
            pixels: 0,
            buffer: self
                .gpu
                .buffer("histogram total", Usage::Storage, entries * 8),
        });
    }

    /// The histogram of `img` counted as `channels`, added into the running total if one was
    /// started (its channels must then be `channels`).
    pub fn histogram(
        &mut self,
        img: &Image,
        channels: Channels,
        timings: &mut Timings,
    ) -> Result<Histogram> {
        let gpu = self.gpu;
        let same = self.plan.as_ref().is_some_and(|p| {
            (p.pixels, p.in_channels, p.bit_depth, p.channels)
                == (img.pixels() as u64, img.channels, img.bit_depth(), channels)
        });
        if !same {
            let plan = timings.phase("pipeline", || {
                self.plan(
                    img.width,
                    img.height,
                    img.channels,
                    img.bit_depth(),
                    channels,
                )
            })?;
            self.plan = Some(plan);
        }
        let total_kernel = match &self.total {
            Some(t) => {
                assert_eq!(t.channels, channels, "one set of channels per total");
                Some(self.kernel("total", &TOTAL_OVERRIDES)?)
            }
            None => None,
        };
        let plan = self.plan.as_ref().expect("planned above");
        let bytes = crate::ops::sample_bytes(&img.samples);
        let sizes = HistogramPlan::segment_sizes(plan.pixels, plan.geometry.segment_pixels);
        let mut start = 0u64;
        for (i, &seg_pixels) in sizes.iter().enumerate() {
            timings.phase("upload", || {
                let from = (start * plan.pixel_bytes) as usize;
                let to = ((start + seg_pixels) * plan.pixel_bytes) as usize;
                gpu.write_padded(&plan.src, &bytes[from..to]);
            });
            let mut batch = gpu.batch(self.timer.as_mut());
            if i == 0 {
                batch.clear_buffer(&plan.counts);
            }
            plan.record(&mut batch, plan.passes(seg_pixels));
            if i + 1 == sizes.len() {
                if let (Some(t), Some(k)) = (&self.total, &total_kernel) {
                    let p = gpu.upload(
                        "histogram total params",
                        Usage::Uniform,
                        &[TotalParams {
                            entries: plan.entries,
                            slices: plan.slices,
                        }],
                    );
                    let bind = gpu.bind(k, &[&p, &plan.counts, &t.buffer]);
                    batch.dispatch(
                        "histogram total",
                        k,
                        &bind,
                        plan.entries.div_ceil(TOTAL_WG_SIZE),
                    );
                }
            }
            timings.phase("compute", || batch.submit())?;
            if let Some(timer) = self.timer.as_mut() {
                timings.add_passes(&timer.take(gpu)?);
            }
            start += seg_pixels;
        }
        if let Some(t) = self.total.as_mut() {
            t.pixels += plan.pixels;
        }
        let slices: Vec<u32> = timings.phase("download", || {
            gpu.read_vec(&plan.counts, (plan.slices * plan.entries) as usize)
        })?;
        let mut counts = vec![0u64; plan.entries as usize];
        for slice in slices.chunks_exact(plan.entries as usize) {
            for (c, &n) in counts.iter_mut().zip(slice) {
                *c += u64::from(n);
            }
        }
        Ok(Histogram {
            channels,
            bins: plan.bins,
            pixels: plan.pixels,
            counts,
        })
    }

    /// The running total so far.
    pub fn total(&self) -> Result<Histogram> {
        let t = self.total.as_ref().expect("start_total was called");
        let entries = self.bins as usize * t.channels.count() as usize;
        let words: Vec<u32> = self.gpu.read_vec(&t.buffer, 2 * entries)?;
        Ok(Histogram {
            channels: t.channels,
            bins: self.bins,
            pixels: t.pixels,
            counts: words
                .chunks_exact(2)
                .map(|w| u64::from(w[0]) | u64::from(w[1]) << 32)
                .collect(),
        })
    }
}
