//! The histogram plot: drawn on the GPU (`histogram_plot_scale`, then `histogram_plot`
//! through a render pipeline) and by its CPU mirror.

use anyhow::Result;

use super::gpu::{float, SCALE_WG_SIZE};
use super::{Channels, Histogram, HistogramGpu};
use crate::gpu::Usage;
use crate::io::image::Image;
use crate::shader;

/// The plot's shaders, for the shader tests.
pub(super) fn shaders() -> Vec<crate::ops::ShaderCase> {
    use crate::ops::ShaderCase;
    vec![
        ShaderCase::params::<ScaleParams>(shader!("histogram_plot_scale"))
            .with_overrides(&float(&SCALE_OVERRIDES)),
        ShaderCase::params::<PlotParams>(shader!("histogram_plot")),
    ]
}

/// The scale pass's overridable constants.
const SCALE_OVERRIDES: [(&str, u32); 1] = [("WG_SIZE", SCALE_WG_SIZE)];

/// Its WGSL twin is `Params` in wgsl/histogram_plot_scale.wgsl (the shader test checks their fields).
#[repr(C)]
#[derive(Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
struct ScaleParams {
    width: u32,
    bins: u32,
    channels: u32,
    plotted: u32,
    top_mask: u32,
    bottom_mask: u32,
}

crate::ops::params_layout!(ScaleParams {
    width,
    bins,
    channels,
    plotted,
    top_mask,
    bottom_mask
});

/// Its WGSL twin is `Params` in wgsl/histogram_plot.wgsl (the shader test checks their fields).
#[repr(C)]
#[derive(Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
struct PlotParams {
    width: u32,
    height: u32,
    top_height: u32,
    gap: u32,
    top_mask: u32,
    bottom_mask: u32,
    _pad: [u32; 2],
    separator: [f32; 4],
    palette: [[f32; 4]; 16],
}

crate::ops::params_layout!(PlotParams {
    width,
    height,
    top_height,
    gap,
    top_mask,
    bottom_mask,
    separator,
    palette
});

/// Separator rows between the two panels.
const PLOT_GAP: u32 = 2;
const PLOT_BACKGROUND: [u8; 3] = [24, 24, 24];
const PLOT_SEPARATOR: [u8; 3] = [96, 96, 96];

/// How the plot is laid out and coloured for a set of channels. Colour: red, green and blue
/// overlaid in the top panel, luminance in the bottom one (alpha is not drawn). Gray: gray in
/// the top panel, alpha (if counted) in the bottom one.
struct PlotLayout {
    plotted: u32,
    top_mask: u32,
    bottom_mask: u32,
    top_height: u32,
    gap: u32,
    palette: [[u8; 3]; 16],
}

impl PlotLayout {
    fn new(channels: Channels, height: u32) -> PlotLayout {
        let mut palette = [PLOT_BACKGROUND; 16];
        let (plotted, top_mask, bottom_mask) = if channels.color {
            // Bits 0, 1, 2 (red, green, blue) mix like light; bit 3 is luminance.
            palette[1] = [230, 60, 60];
            palette[2] = [60, 200, 60];
            palette[3] = [225, 205, 60];
            palette[4] = [70, 110, 240];
            palette[5] = [215, 80, 215];
            palette[6] = [60, 200, 215];
            palette[7] = [235, 235, 235];
            palette[8] = [200, 200, 200];
            (4, 0b0111, 0b1000)
        } else {
            palette[1] = [200, 200, 200];
            palette[2] = [120, 170, 255];
            if channels.alpha {
                (2, 0b01, 0b10)
            } else {
                (1, 0b01, 0)
            }
        };
        let (top_height, gap) = if bottom_mask == 0 {
            (height, 0)
        } else {
            ((height - PLOT_GAP) / 2, PLOT_GAP)
        };
        PlotLayout {
            plotted,
            top_mask,
            bottom_mask,
            top_height,
            gap,
            palette,
        }
    }

    fn params(&self, width: u32, height: u32) -> PlotParams {
        let f = |c: [u8; 3]| [c[0], c[1], c[2], 255].map(|v| v as f32 / 255.0);
        PlotParams {
            width,
            height,
            top_height: self.top_height,
            gap: self.gap,
            top_mask: self.top_mask,
            bottom_mask: self.bottom_mask,
            _pad: [0; 2],
            separator: f(PLOT_SEPARATOR),
            palette: self.palette.map(f),
        }
    }
}

/// A 64-bit count as f32, rounded as the GPU does: the twin of `count_f32` in
/// wgsl/histogram_plot_scale.wgsl. tests/histogram.rs (`plot_matches_its_cpu_mirror`) holds
/// the GPU's plots against this file's pixel for pixel (with counts below 2^24 only: a
/// count's high word is not reached there).
pub(super) fn count_f32(c: u64) -> f32 {
    (c >> 32) as u32 as f32 * 4294967296.0 + c as u32 as f32
}

/// Whether a bar of value `v` on scale `s` (square root) reaches row `r` of a panel of `h`
/// rows: the twin of `lit` in wgsl/histogram_plot.wgsl, held against it pixel for pixel by
/// tests/histogram.rs (`plot_matches_its_cpu_mirror`).
fn lit(v: f32, s: f32, h: u32, r: u32) -> bool {
    let y = r as f32 + 0.5;
    let hf = h as f32;
    v > 0.0 && (r == 0 || y * y * s < v * hf * hf)
}

/// The plot's CPU mirror: the same columns, scales and per-pixel test as
/// histogram_plot_scale.wgsl and histogram_plot.wgsl.
pub fn plot_cpu(hist: &Histogram, width: u32, height: u32) -> Image {
    let layout = PlotLayout::new(hist.channels, height);
    let n = hist.channels.count() as usize;
    let bins = hist.bins as u64;
    let mut columns = vec![[0f32; 4]; width as usize];
    let mut scale = [0f32; 2];
    for (x, col) in columns.iter_mut().enumerate() {
        let x = x as u64;
        let b0 = x * bins / width as u64;
        let b1 = ((x + 1) * bins / width as u64).max(b0 + 1);
        for b in b0..b1 {
            for (c, m) in col.iter_mut().enumerate().take(layout.plotted as usize) {
                *m = m.max(count_f32(hist.counts[b as usize * n + c]));
            }
        }
        for (c, &m) in col.iter().enumerate().take(layout.plotted as usize) {
            if (layout.top_mask >> c) & 1 != 0 {
                scale[0] = scale[0].max(m);
            }
            if (layout.bottom_mask >> c) & 1 != 0 {
                scale[1] = scale[1].max(m);
            }
        }
    }
    let mut rgb = Vec::with_capacity(width as usize * height as usize * 3);
    for y in 0..height {
        let (mask, h, r, s) = if y < layout.top_height {
            (
                layout.top_mask,
                layout.top_height,
                layout.top_height - 1 - y,
                scale[0],
            )
        } else if y < layout.top_height + layout.gap {
            for _ in 0..width {
                rgb.extend_from_slice(&PLOT_SEPARATOR);
            }
            continue;
        } else {
            (
                layout.bottom_mask,
                height - layout.top_height - layout.gap,
                height - 1 - y,
                scale[1],
            )
        };
        for col in &columns {
            let mut bits = 0;
            for (c, &v) in col.iter().enumerate() {
                if (mask >> c) & 1 != 0 && lit(v, s, h, r) {
                    bits |= 1 << c;
                }
            }
            rgb.extend_from_slice(&layout.palette[bits]);
        }
    }
    Image::new_u8(width, height, 3, rgb)
}

impl HistogramGpu<'_> {
    /// The plot of the running total, `width` x `height`, drawn on the GPU: the columns and
    /// scales by `histogram_plot_scale`, the picture by `histogram_plot` through a render
    /// pipeline.
    pub fn plot_total(&mut self, width: u32, height: u32) -> Result<Image> {
        let gpu = self.gpu;
        let channels = self
            .total
            .as_ref()
            .expect("start_total was called")
            .channels;
        let layout = PlotLayout::new(channels, height);
        let kernel = self.kernel("scale", &SCALE_OVERRIDES)?;
        let t = self.total.as_ref().expect("checked above");
        let p = gpu.upload(
            "histogram plot scale params",
            Usage::Uniform,
            &[ScaleParams {
                width,
                bins: self.bins,
                channels: channels.count(),
                plotted: layout.plotted,
                top_mask: layout.top_mask,
                bottom_mask: layout.bottom_mask,
            }],
        );
        let columns = gpu.buffer("histogram plot columns", Usage::Storage, width as u64 * 16);
        let scale = gpu.buffer("histogram plot scale", Usage::Storage, 8);
        let bind = gpu.bind(&kernel, &[&p, &t.buffer, &columns, &scale]);
        let mut batch = gpu.batch(None);
        batch.dispatch("histogram plot scale", &kernel, &bind, 1);
        batch.submit()?;
        let params = gpu.upload(
            "histogram plot params",
            Usage::Uniform,
            &[layout.params(width, height)],
        );
        let rgba = gpu.render_fullscreen(
            &shader!("histogram_plot"),
            &[&params, &columns, &scale],
            width,
            height,
        )?;
        let rgb = rgba
            .chunks_exact(4)
            .flat_map(|p| [p[0], p[1], p[2]])
            .collect();
        Ok(Image::new_u8(width, height, 3, rgb))
    }
}
