//! `gpukit histogram`: per-channel histograms of images, as a summary on stdout, a JSON
//! document and a plot drawn on the GPU: the flags, and one call of the histogram batch.

use std::path::PathBuf;

use anyhow::Result;
use clap::Args;

use super::inputs::InputArgs;
use super::{Ctx, Status};
use crate::batch::histogram::{self, Settings};
use crate::io::json::{Document, JsonDest, JsonSink};
use crate::ops::histogram::doc::HistogramDoc;

#[derive(Debug, Args)]
pub struct HistogramArgs {
    #[command(flatten)]
    input: InputArgs,
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
