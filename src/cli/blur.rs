//! `gpukit blur`: blur images, one or many, on one device or several: the flags, and one
//! call of the image batch driver.

use std::time::Duration;

use anyhow::Result;
use clap::{Args, ValueEnum};

use super::inputs::InputArgs;
use super::outputs::OutputArgs;
use super::{Ctx, Status};
use crate::batch::images::{self, ImageOp, ImageWorker};
use crate::gpu::{Engine, Timings};
use crate::io::image::{Header, Image};
use crate::ops::blur::{self, Blurrer, Kind, Options};

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum KindArg {
    Box,
    Gaussian,
}

#[derive(Debug, Args)]
#[command(allow_negative_numbers = true)]
pub struct BlurArgs {
    #[command(flatten)]
    input: InputArgs,
    #[command(flatten)]
    output: OutputArgs,
    /// Window radius in pixels: 2R+1 taps each way. Default: 3 for box; ceil(3 sigma) for gaussian.
    #[arg(short, long, value_name = "R")]
    radius: Option<u32>,
    /// Filter kind.
    #[arg(long, value_enum, default_value_t = KindArg::Box)]
    kind: KindArg,
    /// Gaussian standard deviation in pixels (default: radius / 3).
    #[arg(long, value_name = "S", value_parser = positive_f64)]
    sigma: Option<f64>,
    /// Apply the blur N times.
    #[arg(long, value_name = "N", default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..))]
    iterations: u32,
}

fn positive_f64(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(v) if v > 0.0 && v.is_finite() => Ok(v),
        Ok(_) => Err("must be a positive number".into()),
        Err(e) => Err(e.to_string()),
    }
}

impl BlurArgs {
    /// The checked filter, before any file or device is touched.
    fn params(&self) -> Result<Options> {
        let usage = |m: &str| anyhow::Error::new(crate::UsageError(m.into()));
        Ok(match self.kind {
            KindArg::Box => {
                if self.sigma.is_some() {
                    return Err(usage("--sigma applies to --kind gaussian only"));
                }
                Options::new(Kind::Box, self.radius.unwrap_or(3), self.iterations)
            }
            KindArg::Gaussian => {
                let (sigma, radius) = match (self.sigma, self.radius) {
                    (Some(s), Some(r)) => (s, r),
                    (Some(s), None) => (s, blur::gaussian_radius(s)),
                    (None, Some(r)) if r > 0 => (r as f64 / 3.0, r),
                    _ => {
                        return Err(usage(
                            "--kind gaussian needs --sigma or a radius of at least 1",
                        ))
                    }
                };
                Options::new(Kind::Gaussian { sigma }, radius, self.iterations)
            }
        })
        .and_then(|o| o.check().map(|_| o))
    }
}

/// Blur as the batch driver runs it.
struct BlurOp(Options);

impl ImageOp for BlurOp {
    fn name(&self) -> &'static str {
        "blur"
    }

    fn worker<'e>(&'e self, engine: &'e Engine) -> Box<dyn ImageWorker + 'e> {
        Box::new(Blurrer::new(engine, self.0))
    }

    fn gpu_saving(&self, h: &Header, files: u32) -> Duration {
        self.0
            .gpu_saving(h.width, h.height, h.channels, h.bit_depth, files)
    }
}

impl ImageWorker for Blurrer<'_> {
    fn run(&mut self, image: &Image, timings: &mut Timings) -> Result<Image> {
        Blurrer::run(self, image, timings)
    }

    fn run_on_device(
        &mut self,
        image: &Image,
        timings: &mut Timings,
    ) -> Option<Result<wgpu::Buffer>> {
        Blurrer::run_on_device(self, image, timings)
    }
}

pub fn run(ctx: &Ctx, args: BlurArgs) -> Result<Status> {
    let op = BlurOp(args.params()?);
    let list = |exclude: Option<&std::path::Path>| args.input.items(ctx, exclude);
    let pipeline = args.input.pipeline();
    let ok = images::run(ctx, &op, &args.output.outputs(), pipeline, list)?;
    Ok(if ok { Status::Success } else { Status::Failure })
}
