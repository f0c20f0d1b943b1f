//! Many images on one engine, with an optional running total: what `gpukit histogram`
//! drives.

use anyhow::Result;

use super::{check_bins, engine, plot_cpu, Channels, Histogram, HistogramGpu, Tunables};
use crate::gpu::{Engine, Timings};
use crate::io::image::Image;
use crate::tune::Tunable;

/// Histograms of many images on one engine, with an optional running total: the GPU path
/// or the CPU engine behind one interface. On the GPU each image takes the tune cache's
/// shape for its size unless [`Histogrammer::set_tunables`] fixed one.
pub enum Histogrammer<'g> {
    Gpu {
        hg: Box<HistogramGpu<'g>>,
        /// Whether the caller fixed the kernels' shape.
        fixed: bool,
    },
    Cpu {
        bins: u32,
        total: Option<Histogram>,
    },
}

impl<'g> Histogrammer<'g> {
    pub fn new(engine: &'g Engine, bins: u32) -> Self {
        match engine {
            Engine::Gpu(gpu) => Histogrammer::Gpu {
                hg: Box::new(HistogramGpu::new(gpu, bins)),
                fixed: false,
            },
            Engine::Cpu => Histogrammer::Cpu { bins, total: None },
        }
    }

    /// Times each GPU pass (with `--timings`); nothing on the CPU backend.
    pub fn time_passes(&mut self) {
        if let Histogrammer::Gpu { hg, .. } = self {
            hg.time_passes();
        }
    }

    /// Fixes the kernels' shape for the images from now on (see
    /// [`HistogramGpu::set_tunables`]); nothing on the CPU engine.
    pub fn set_tunables(&mut self, tunables: Tunables) {
        if let Histogrammer::Gpu { hg, fixed } = self {
            hg.set_tunables(tunables);
            *fixed = true;
        }
    }

    pub fn start_total(&mut self, channels: Channels) {
        match self {
            Histogrammer::Gpu { hg, .. } => hg.start_total(channels),
            Histogrammer::Cpu { bins, total } => *total = Some(Histogram::zeros(channels, *bins)),
        }
    }

    pub fn histogram(
        &mut self,
        img: &Image,
        channels: Channels,
        timings: &mut Timings,
    ) -> Result<Histogram> {
        match self {
            Histogrammer::Gpu { hg, fixed } => {
                if !*fixed {
                    let gpu = hg.gpu();
                    let t = crate::tune::choice(
                        gpu,
                        super::OP.name,
                        img.pixels() as f64,
                        Tunables::check,
                    )
                    .unwrap_or_else(|| Tunables::default_for(&gpu.limits));
                    hg.set_tunables(t);
                }
                hg.histogram(img, channels, timings)
            }
            Histogrammer::Cpu { bins, total } => {
                check_bins(*bins, img.bit_depth())?;
                let hist = timings.phase("compute", || cpu(img, channels, *bins));
                if let Some(t) = total {
                    t.add(&hist);
                }
                Ok(hist)
            }
        }
    }

    pub fn total(&self) -> Result<Histogram> {
        match self {
            Histogrammer::Gpu { hg, .. } => hg.total(),
            Histogrammer::Cpu { total, .. } => Ok(total.clone().expect("start_total was called")),
        }
    }

    /// The plot of the running total.
    pub fn plot_total(&mut self, width: u32, height: u32) -> Result<Image> {
        match self {
            Histogrammer::Gpu { hg, .. } => hg.plot_total(width, height),
            Histogrammer::Cpu { total, .. } => Ok(plot_cpu(
                total.as_ref().expect("start_total was called"),
                width,
                height,
            )),
        }
    }
}

/// The CPU engine's histogram: the native engine, the reference's counts.
fn cpu(img: &Image, channels: Channels, bins: u32) -> Histogram {
    engine::histogram(img, channels, bins)
}
