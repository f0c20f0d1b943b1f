//! `gpukit histogram`: per-channel histograms of images, as a summary on stdout, a JSON
//! document and a plot drawn on the GPU: the flags, and one call of the histogram batch.

use std::path::PathBuf;

use anyhow::Result;
use clap::Args;

use super::inputs::InputArgs;
use super::video::VideoArgs;
use super::{Ctx, Status};
use crate::batch::histogram::{self, Settings};
use crate::io::json::{Document, JsonDest, JsonSink};
use crate::ops::histogram::doc::HistogramDoc;

#[derive(Debug, Args)]
#[command(allow_negative_numbers = true)]
pub struct HistogramArgs {
    #[command(flatten)]
    input: InputArgs,
    #[command(flatten)]
    video: VideoArgs,
    /// One histogram per frame of a frame stream (Y4M, raw frames, images one after another):
    /// a JSON line each, to --json or stdout, written as each frame is done (docs/histogram.md).
    #[arg(long, conflicts_with_all = ["merge", "sum", "plot"])]
    per_frame: bool,
    /// With --per-frame: draw every frame's histogram into a stream of plots, Y4M (4:4:4) or
    /// PNG images one after another (--plot-format), for ffmpeg to encode (`-`: stdout).
    #[arg(long, value_name = "FILE|-", requires = "per_frame")]
    plot_frames: Option<PathBuf>,
    /// The format of --plot-frames: y4m or png.
    #[arg(long, value_enum, default_value_t = PlotFormatArg::Y4m, requires = "plot_frames")]
    plot_format: PlotFormatArg,
    /// With --per-frame on Y'CbCr frames: the matrix they are converted to R'G'B' with
    /// (bt601 or bt709), over what the stream says (Y4M's XCOLORMATRIX, which ffmpeg does not
    /// write; BT.601 when it says nothing).
    #[arg(long, value_enum, requires = "per_frame")]
    matrix: Option<MatrixArg>,
    /// The inputs are histogram JSON documents of shards of one run (`--json`): write the
    /// document of the whole run (docs/scale-out.md), to --json or stdout.
    #[arg(long, conflicts_with_all = ["plot", "sum", "alpha"])]
    merge: bool,
    /// Bins per channel: 1 to 256 for 8-bit images, 1 to 65536 for 16-bit ones.
    #[arg(long, default_value_t = 256, value_parser = clap::value_parser!(u32).range(1..=65536))]
    bins: u32,
    /// Also count alpha, for images that have it.
    #[arg(long)]
    alpha: bool,
    /// Also one histogram over all inputs together, accumulated on the GPU and reported after
    /// the per-input ones; every input is then counted with the same channels.
    #[arg(long)]
    sum: bool,
    /// Write the histograms as JSON to FILE.json, or to stdout with `-` (see docs/formats.md).
    #[arg(long, value_name = "FILE|-")]
    json: Option<JsonDest>,
    /// Draw the histogram (the sum's, with --sum) into an image file (`-`: PNG on stdout): red,
    /// green and blue overlaid above, luminance below.
    #[arg(long, value_name = "FILE.png")]
    plot: Option<PathBuf>,
    /// The plot's size in pixels, each side 16 to 16384.
    #[arg(long, value_name = "WxH", default_value = "1024x512", value_parser = parse_size)]
    plot_size: PlotSize,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum MatrixArg {
    Bt601,
    Bt709,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum PlotFormatArg {
    Y4m,
    Png,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PlotSize {
    width: u32,
    height: u32,
}

fn parse_size(s: &str) -> Result<PlotSize, String> {
    let bad = || format!("expected WIDTHxHEIGHT, each 16 to 16384, like 1024x512; got {s:?}");
    let (w, h) = s.split_once(['x', 'X']).ok_or_else(bad)?;
    let side = |v: &str| {
        v.trim()
            .parse::<u32>()
            .ok()
            .filter(|v| (16..=16384).contains(v))
    };
    Ok(PlotSize {
        width: side(w).ok_or_else(bad)?,
        height: side(h).ok_or_else(bad)?,
    })
}

pub fn run(ctx: &Ctx, args: HistogramArgs) -> Result<Status> {
    if args.merge {
        let sink = JsonSink::open(args.json.as_ref().unwrap_or(&JsonDest::Stdout))?;
        sink.write_value(&crate::batch::merge::with_schema(
            crate::batch::merge::histograms(&args.input.inputs)?,
            HistogramDoc::SCHEMA,
        ))?;
        return Ok(Status::Success);
    }
    if args.per_frame || args.video.is_raw() {
        return per_frame(ctx, &args);
    }
    let inputs: Vec<PathBuf> = args
        .input
        .items(ctx, None)?
        .into_iter()
        .map(|i| i.path)
        .collect();
    if inputs.is_empty() {
        ctx.note("this shard holds none of the inputs");
        return Ok(Status::Success);
    }
    let settings = Settings {
        bins: args.bins,
        alpha: args.alpha,
        sum: args.sum,
        json: args.json,
        plot: args.plot,
        plot_size: (args.plot_size.width, args.plot_size.height),
        time_passes: ctx.global.timings,
    };
    let ok = histogram::run(ctx, &settings, &inputs, args.input.pipeline())?;
    Ok(if ok { Status::Success } else { Status::Failure })
}

/// `--per-frame` on a frame stream: a JSON line per frame, and the plots' stream.
fn per_frame(ctx: &Ctx, args: &HistogramArgs) -> Result<Status> {
    use crate::batch::video::{write_stream, PlotFormat};
    use crate::io::output::PendingFile;
    if !args.per_frame {
        anyhow::bail!(crate::UsageError(
            "--raw frames are counted with --per-frame (one histogram a frame)".into()
        ));
    }
    let stream = args
        .video
        .stream(
            &args.input.inputs,
            Some(super::video::IMAGES_TOO),
            ctx.global.max_image_bytes,
        )?
        .expect("a stream is required");
    let mut stream = stream;
    if let Some(m) = args.matrix {
        stream.set_matrix(match m {
            MatrixArg::Bt601 => crate::io::video::Matrix::Bt601,
            MatrixArg::Bt709 => crate::io::video::Matrix::Bt709,
        });
    }
    let json_path = match (&args.json, &args.plot_frames) {
        (Some(JsonDest::File(p)), _) => {
            let exts = ["jsonl", "json"];
            crate::io::output::check_extension("--json", p, &exts, "a JSON-lines file")?;
            Some(p.clone())
        }
        (Some(JsonDest::Stdout), _) | (None, None) => Some(PathBuf::from("-")),
        (None, Some(_)) => None,
    };
    if let (Some(j), Some(p)) = (&json_path, &args.plot_frames) {
        crate::io::output::refuse_shared_output(("--json", j), ("--plot-frames", p))?;
    }
    if let Some(p) = &args.plot_frames {
        let (ext, what) = match args.plot_format {
            PlotFormatArg::Y4m => ("y4m", "a Y4M stream (--plot-format y4m)"),
            PlotFormatArg::Png => ("png", "a PNG stream (--plot-format png)"),
        };
        crate::io::output::check_extension("--plot-frames", p, &[ext], what)?;
    }
    let json = json_path.map(|p| PendingFile::create(&p)).transpose()?;
    let plot = args
        .plot_frames
        .as_ref()
        .map(|p| PendingFile::create(p))
        .transpose()?;
    if let Some(p) = &plot {
        p.refuse_terminal("a video stream")?;
    }
    let size = (args.plot_size.width, args.plot_size.height);
    let format = match args.plot_format {
        PlotFormatArg::Y4m => PlotFormat::Y4m,
        PlotFormatArg::Png => PlotFormat::Png,
    };
    let spec = (args.bins, args.alpha, size, format);
    let mut ran = None;
    match (json, plot) {
        (Some(j), Some(p)) => write_stream(p, |pw| {
            j.commit_with(|jw| {
                ran = Some(count(ctx, stream, spec, Some(jw), Some(pw))?);
                Ok(())
            })
        })?,
        (Some(j), None) => j.commit_with(|jw| {
            ran = Some(count(ctx, stream, spec, Some(jw), None)?);
            Ok(())
        })?,
        (None, Some(p)) => write_stream(p, |pw| {
            ran = Some(count(ctx, stream, spec, None, Some(pw))?);
            Ok(())
        })?,
        (None, None) => unreachable!("the JSON lines go to stdout without --plot-frames"),
    }
    if let Some(ran) = ran.filter(|_| ctx.global.verbose > 0) {
        ctx.note(&ran.summary());
    }
    Ok(Status::Success)
}

/// Counts the stream's frames into the JSON lines and the plots.
fn count<'w>(
    ctx: &Ctx,
    stream: crate::batch::video::Stream,
    (bins, alpha, size, format): (u32, bool, (u32, u32), crate::batch::video::PlotFormat),
    json: Option<&'w mut dyn std::io::Write>,
    plot: Option<&'w mut dyn std::io::Write>,
) -> Result<crate::batch::video::Ran> {
    let out = crate::batch::video::PerFrame {
        bins,
        alpha,
        json,
        plot: plot.map(|w| (w, size, format)),
    };
    crate::batch::video::histogram_frames(ctx, stream, out)
}

#[cfg(test)]
mod tests {

    use super::*;

    #[test]
    fn plot_size_parses_and_checks_its_range() {
        assert_eq!(
            parse_size("640x480"),
            Ok(PlotSize {
                width: 640,
                height: 480
            })
        );
        for bad in ["640", "0x480", "15x100", "100x16385", "axb", "640x"] {
            assert!(parse_size(bad).is_err(), "{bad}");
        }
    }
}
