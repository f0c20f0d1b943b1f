//! `gpukit resize`: resize images as Pillow's `Image.resize` does, one or many, on one device
//! or several: the flags, and one call of the image batch driver.

use std::time::Duration;

use anyhow::{bail, Result};
use clap::Args;

use super::inputs::InputArgs;
use super::outputs::OutputArgs;
use super::{Ctx, Status};
use crate::batch::images::{self, ImageOp, ImageWorker};
use crate::gpu::{Engine, Timings};
use crate::io::image::{human_bytes, layout_name, DecodeLimits, Header, Image};
use crate::io::metadata::Metadata;
use crate::ops::resize::{self, parse_dims, Filter, Options, Size};

#[derive(Debug, Args)]
#[command(allow_negative_numbers = true)]
pub struct ResizeArgs {
    #[command(flatten)]
    input: InputArgs,
    #[command(flatten)]
    output: OutputArgs,
    /// The output size, exactly (the aspect ratio may change).
    #[arg(long, value_name = "WxH", value_parser = parse_dims)]
    size: Option<(u32, u32)>,
    /// The output width; the height keeps the aspect ratio (with --height: an exact size).
    #[arg(long, value_name = "W")]
    width: Option<u32>,
    /// The output height; the width keeps the aspect ratio.
    #[arg(long, value_name = "H")]
    height: Option<u32>,
    /// Both sides times F (0.5 halves them), rounded to whole pixels.
    #[arg(long, value_name = "F")]
    scale: Option<f64>,
    /// The largest size with the input's aspect ratio inside WxH (up or down).
    #[arg(long, value_name = "WxH", value_parser = parse_dims)]
    fit: Option<(u32, u32)>,
    /// The resampling filter: Pillow's LANCZOS, BICUBIC, BILINEAR, BOX or NEAREST.
    #[arg(long, default_value = "lanczos3", value_parser = ["lanczos3", "bicubic", "bilinear", "box", "nearest"])]
    filter: String,
}

/// Resize as the batch driver runs it, and the limits of `--max-image-bytes`.
struct ResizeOp(Options, DecodeLimits);

impl ImageOp for ResizeOp {
    fn name(&self) -> &'static str {
        "resize"
    }

    fn worker<'e>(&'e self, engine: &'e Engine) -> Box<dyn ImageWorker + 'e> {
        Box::new(Resizer {
            engine,
            options: self.0,
            limits: self.1,
        })
    }

    fn gpu_saving(&self, h: &Header, files: u32) -> Duration {
        self.0
            .gpu_saving(h.width, h.height, h.channels, h.bit_depth, files)
    }

    /// Not counted: resize's choice rests on its own sums (so a JPEG output's encoding alone
    /// does not move resize to a GPU).
    fn output_size(&self, _header: &Header) -> Option<(u32, u32)> {
        None
    }

    /// The resolution scaled with the pixels, so that the picture keeps its printed size.
    fn metadata(&self, input: (u32, u32), output: &Image, metadata: &mut Metadata) {
        if let Some(d) = &mut metadata.density {
            let scale = |v: u32, to: u32, from: u32| {
                let v = (u64::from(v) * u64::from(to) + u64::from(from) / 2) / u64::from(from);
                u32::try_from(v.max(1)).unwrap_or(u32::MAX)
            };
            if input.0 > 0 && input.1 > 0 {
                d.x = scale(d.x, output.width, input.0);
                d.y = scale(d.y, output.height, input.1);
            }
        }
    }
}

struct Resizer<'e> {
    engine: &'e Engine,
    options: Options,
    limits: DecodeLimits,
}

impl ImageWorker for Resizer<'_> {
    fn run(&mut self, image: &Image, timings: &mut Timings) -> Result<Image> {
        self.check_size(image)?;
        resize::run(self.engine, image, &self.options, timings)
    }
}

impl Resizer<'_> {
    /// The output against `--max-image-bytes`, the limit decoding is held to, so that a huge
    /// target (`--width 1048576` of a square) is one error line, not an allocation that
    /// aborts. The output is the largest image a resize makes: its one intermediate (the
    /// first pass's, `coeffs::passes`) is no larger than the input (which decoded within the
    /// limit) or the output.
    fn check_size(&self, image: &Image) -> Result<()> {
        let (ow, oh) = self.options.size.resolve(image.width, image.height)?;
        let output = Header {
            width: ow,
            height: oh,
            channels: image.channels,
            bit_depth: image.bit_depth(),
        };
        let (bytes, max) = (output.decoded_bytes(), self.limits.max_bytes);
        if bytes > max {
            bail!(
                "resizing {}x{} to {ow}x{oh} makes a {} image ({} {}-bit), over the limit of {} \
                 (--max-image-bytes or GPUKIT_MAX_IMAGE_BYTES raise it)",
                image.width,
                image.height,
                human_bytes(bytes),
                layout_name(image.channels),
                image.bit_depth(),
                human_bytes(max)
            );
        }
        Ok(())
    }
}

pub fn run(ctx: &Ctx, args: ResizeArgs) -> Result<Status> {
    let size = Size::from_flags(args.size, args.width, args.height, args.scale, args.fit)?;
    let filter: Filter = args.filter.parse().map_err(crate::UsageError)?;
    let options = Options::new(size, filter);
    options.check()?;
    let op = ResizeOp(options, ctx.read_options().limits);
    let list = |exclude: Option<&std::path::Path>| args.input.items(ctx, exclude);
    let pipeline = args.input.pipeline();
    let ok = images::run(ctx, &op, &args.output.outputs(), pipeline, list)?;
    Ok(if ok { Status::Success } else { Status::Failure })
}
