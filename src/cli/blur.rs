//! `gpukit blur`: blur images, one or many, on one device or several: the flags, and one
//! call of the image batch driver.

use std::time::Duration;

use anyhow::Result;
use clap::{Args, ValueEnum};

use super::inputs::InputArgs;
use super::outputs::OutputArgs;
use super::video::VideoArgs;
use super::{Ctx, Status};
use crate::batch::images::{self, ImageOp, ImageWorker};
use crate::gpu::{Batch, Engine, Timings, Upload};
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
    #[command(flatten)]
    video: VideoArgs,
    /// On a Y'CbCr frame stream: the chroma planes' radius, in their own samples. Default:
    /// the radius scaled to their subsampling across (half, rounded up, for 4:2:0 and 4:2:2);
    /// give the radius itself to blur as ffmpeg's avgblur and gblur do (docs/blur.md).
    #[arg(long, value_name = "R")]
    chroma_radius: Option<u32>,
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

    fn stages_samples(&self) -> bool {
        true
    }

    fn checks_opaque(&self, image: &Image) -> bool {
        self.0.has_opaque_passes(image)
    }
}

impl ImageWorker for Blurrer<'_> {
    fn run(&mut self, image: &Image, timings: &mut Timings) -> Result<Image> {
        Blurrer::run(self, image, timings)
    }

    fn records_on_device(&self, image: &Image) -> bool {
        Blurrer::records_on_device(self, image)
    }

    fn record_on_device(
        &mut self,
        image: &Image,
        staged: Option<&Upload>,
        batch: &mut Batch,
        timings: &mut Timings,
    ) -> Result<wgpu::Buffer> {
        Blurrer::record_on_device(self, image, staged, batch, timings)
    }

    fn submitted(&mut self) {
        Blurrer::submitted(self)
    }
}

pub fn run(ctx: &Ctx, args: BlurArgs) -> Result<Status> {
    let params = args.params()?;
    // A .y4m output asks for a frame stream, whatever the input holds.
    let y4m_out = args
        .output
        .outputs()
        .output
        .is_some_and(|o| has_extension(&o, "y4m"));
    let required = y4m_out.then_some("a .y4m output");
    // Several inputs are images; a Y4M file among them could only fail as one.
    let inputs = &args.input.inputs;
    if let Some(y4m) = inputs.iter().find(|p| has_extension(p, "y4m")) {
        if inputs.len() > 1 {
            anyhow::bail!(crate::UsageError(format!(
                "{}: a frame stream is blurred on its own: give it as the only input, with -o \
                 FILE.y4m or -o - (stdout)",
                y4m.display()
            )));
        }
    }
    if let Some(stream) =
        args.video
            .stream(&args.input.inputs, required, ctx.global.max_image_bytes)?
    {
        return blur_stream(ctx, &args, params, stream);
    }
    if args.chroma_radius.is_some() {
        anyhow::bail!(crate::UsageError(
            "--chroma-radius applies to Y'CbCr frame streams (Y4M, raw yuv)".into()
        ));
    }
    let op = BlurOp(params);
    let list = |exclude: Option<&std::path::Path>| args.input.items(ctx, exclude);
    let pipeline = args.input.pipeline();
    let ok = images::run(ctx, &op, &args.output.outputs(), pipeline, list)?;
    Ok(if ok { Status::Success } else { Status::Failure })
}

/// Whether `path`'s extension is `ext`, in any case.
fn has_extension(path: &std::path::Path, ext: &str) -> bool {
    path.extension()
        .is_some_and(|e| e.eq_ignore_ascii_case(ext))
}

/// `blur` on a frame stream: frames in, blurred frames out in the same format, to `-o`.
fn blur_stream(
    ctx: &Ctx,
    args: &BlurArgs,
    luma: Options,
    stream: crate::batch::video::Stream,
) -> Result<Status> {
    use crate::batch::video::{blur_frames, chroma_options};
    let raw = args.video.is_raw();
    let Some(path) = args.output.outputs().output else {
        let file = if raw { "FILE" } else { "FILE.y4m" };
        anyhow::bail!(crate::UsageError(format!(
            "a frame stream is blurred into one output: give -o {file} or -o - (stdout)"
        )));
    };
    // The output is the stream's own format: a Y4M stream's extension, if it has one, is
    // .y4m; raw frames' may be any (as ffmpeg's -f rawvideo takes) but an image's or .y4m.
    if path != std::path::Path::new("-") {
        let wrong = match raw {
            false if path.extension().is_some() && !has_extension(&path, "y4m") => {
                Some("a Y4M stream is blurred into Y4M")
            }
            true if has_extension(&path, "y4m") => Some("raw frames are blurred into raw frames"),
            true if crate::batch::inputs::has_image_extension(&path) => {
                Some("raw frames are blurred into raw frames, not an image")
            }
            _ => None,
        };
        if let Some(wrong) = wrong {
            let name = if raw { ".yuv, .rgb or .raw" } else { ".y4m" };
            anyhow::bail!(crate::UsageError(format!(
                "{}: {wrong}: name the output {name}, or give -o - (stdout)",
                path.display()
            )));
        }
    }
    let format = stream.video_format().expect("blur reads video streams");
    let chroma = chroma_options(luma, format, args.chroma_radius);
    chroma.check()?;
    let out = crate::io::output::PendingFile::create(&path)?;
    out.refuse_terminal("a video stream")?;
    let mut ran = None;
    crate::batch::video::write_stream(out, |w| {
        let verbose = ctx.global.verbose > 0 && !ctx.global.quiet;
        // The cores may start the stream while a GPU opens, unless an engine is named.
        let bridge = ctx.global.device.is_none() && ctx.global.backend.is_none();
        ran = Some(blur_frames(
            ctx,
            stream,
            luma,
            chroma,
            w,
            (verbose, bridge),
        )?);
        Ok(())
    })?;
    if let Some(ran) = ran.filter(|_| ctx.global.verbose > 0) {
        ctx.note(&ran.summary());
    }
    Ok(Status::Success)
}
