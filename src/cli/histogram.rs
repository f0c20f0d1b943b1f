//! `gpukit histogram`: per-channel histograms of images, as a summary on stdout, a JSON
//! document and a plot drawn on the GPU.

use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::Args;
use serde::Serialize;

use super::{print_stdout, term, Ctx, Status};
use crate::gpu::{Engine, Timings};
use crate::io::image;
use crate::io::json::{JsonDest, JsonSink};
use crate::io::output::PendingFile;
use crate::ops::histogram::{
    channel_stats, check_bins, ChannelStats, Channels, Histogram, Histogrammer,
};

#[derive(Debug, Args)]
pub struct HistogramArgs {
    /// Images, or folders of images (the image files directly in them, by name).
    #[arg(value_name = "IN", required = true)]
    inputs: Vec<PathBuf>,
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
    /// Write the histograms as JSON to FILE, or to stdout with `-` (see docs/formats.md).
    #[arg(long, value_name = "FILE|-", num_args = 0..=1, default_missing_value = "-")]
    json: Option<JsonDest>,
    /// Draw the histogram (the sum's, with --sum) into an image file: red, green and blue
    /// overlaid above, luminance below.
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

/// The JSON document of `gpukit histogram --json`. Documented in docs/formats.md.
#[derive(Serialize)]
struct HistogramDoc {
    gpukit_version: &'static str,
    bins: u32,
    alpha: bool,
    inputs: Vec<InputDoc>,
    /// Only with --sum; null otherwise.
    sum: Option<SumDoc>,
}

#[derive(Serialize)]
struct InputDoc {
    path: String,
    width: u32,
    height: u32,
    bit_depth: u32,
    layout: &'static str,
    pixels: u64,
    bins: u32,
    channels: Vec<ChannelDoc>,
}

#[derive(Serialize)]
struct SumDoc {
    inputs: usize,
    pixels: u64,
    bins: u32,
    channels: Vec<ChannelDoc>,
}

#[derive(Serialize)]
struct ChannelDoc {
    name: &'static str,
    #[serde(flatten)]
    stats: ChannelStats,
    counts: Vec<u64>,
}

fn channel_docs(hist: &Histogram) -> Vec<ChannelDoc> {
    hist.channels
        .names()
        .into_iter()
        .enumerate()
        .map(|(c, name)| {
            let counts = hist.channel(c);
            ChannelDoc {
                name,
                stats: channel_stats(&counts),
                counts,
            }
        })
        .collect()
}

fn layout_name(channels: u8) -> &'static str {
    match channels {
        1 => "gray",
        2 => "gray+alpha",
        3 => "RGB",
        _ => "RGBA",
    }
}

/// Extensions of the image files a folder contributes.
const IMAGE_EXTENSIONS: &[&str] = &[
    "png", "jpg", "jpeg", "webp", "tif", "tiff", "bmp", "gif", "pnm", "pbm", "pgm", "ppm", "pam",
    "tga", "qoi", "ico",
];

/// The inputs with folders replaced by the image files directly in them, sorted by name.
fn expand(inputs: &[PathBuf]) -> Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    for p in inputs {
        if !p.is_dir() {
            out.push(p.clone());
            continue;
        }
        let name = p.display();
        let mut files: Vec<PathBuf> = std::fs::read_dir(p)
            .with_context(|| format!("{name}: cannot list the folder"))?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|f| {
                f.is_file()
                    && f.extension()
                        .and_then(|e| e.to_str())
                        .is_some_and(|e| IMAGE_EXTENSIONS.contains(&e.to_lowercase().as_str()))
            })
            .collect();
        if files.is_empty() {
            anyhow::bail!("{name}: no image files in this folder");
        }
        files.sort();
        out.extend(files);
    }
    Ok(out)
}

/// One input's result.
struct Report {
    path: String,
    header: image::Header,
    hist: Histogram,
}

pub fn run(ctx: &Ctx, args: HistogramArgs) -> Result<Status> {
    let inputs = expand(&args.inputs)?;
    if args.plot.is_some() && inputs.len() > 1 && !args.sum {
        anyhow::bail!(crate::UsageError(
            "--plot draws one histogram: with several inputs, add --sum to plot their sum".into()
        ));
    }
    // Outputs are created first, so a path that cannot be written fails before any work.
    let sink = args.json.as_ref().map(JsonSink::open).transpose()?;
    let plot = match &args.plot {
        Some(p) => Some((PendingFile::create(p)?, image::output_format(p)?)),
        None => None,
    };
    let mut timings = Timings::default();
    let mut status = Status::Success;
    let fail = |err: &anyhow::Error| eprintln!("{} {err:#}", term::error_prefix());

    // Headers: every input's bit depth against --bins, and the channels a sum needs. A pipe
    // is read whole here (it can be read only once) and its bytes kept for the decode.
    let read = ctx.read_options();
    let mut headers = Vec::new();
    timings.phase("probe", || -> Result<()> {
        for path in &inputs {
            match image::Source::open(path, &read) {
                Ok(source) => {
                    check_bins(args.bins, source.header().bit_depth)
                        .with_context(|| path.display().to_string())?;
                    headers.push((path, source.header(), Some(source)));
                }
                Err(e) => {
                    fail(&e);
                    status = Status::Failure;
                }
            }
        }
        Ok(())
    })?;
    let shared = headers
        .iter()
        .map(|(_, h, _)| Channels::of(h.channels, args.alpha))
        .reduce(Channels::union);
    let shared = match shared {
        Some(c) if args.sum || args.plot.is_some() => Some(c),
        _ => None,
    };

    // The device opens (tens of milliseconds, more on software adapters) while the first
    // input decodes.
    let decode = |path: &std::path::Path, source: Option<image::Source>| {
        let source = source.expect("each input is decoded once");
        source.decode(&read).map(|d| ctx.accept(path, d))
    };
    let (engine, mut first) = ctx.engine_alongside(&mut timings, |t| {
        headers
            .first_mut()
            .map(|(path, _, source)| t.phase("decode", || decode(path, source.take())))
    });
    let engine = engine?;
    if let (Engine::Gpu(gpu), Some(_)) = (&engine, &plot) {
        let max = gpu.limits.max_texture_dimension_2d;
        let PlotSize { width, height } = args.plot_size;
        if width > max || height > max {
            anyhow::bail!(crate::UsageError(format!(
                "--plot-size {width}x{height}: this adapter draws at most {max} pixels a side"
            )));
        }
    }
    let tuned = ctx.tuned(&engine);
    let mut hist = Histogrammer::new(&engine, args.bins);
    if ctx.global.timings {
        hist.time_passes();
    }
    if let Some(c) = shared {
        hist.start_total(c);
    }
    let hide = ctx.global.quiet || sink.as_ref().is_some_and(JsonSink::is_stdout);
    let bar = term::progress(headers.len() as u64, hide);
    let mut reports = Vec::new();
    for (path, header, source) in &mut headers {
        bar.set_message(path.display().to_string());
        let result = (|| -> Result<Histogram> {
            let img = match first.take() {
                Some(img) => img?,
                None => timings.phase("decode", || decode(path, source.take()))?,
            };
            let own = Channels::of(img.channels, args.alpha);
            let channels = shared.unwrap_or(own);
            if channels.union(own) != channels {
                anyhow::bail!(
                    "{}: its header and its pixels disagree on the layout",
                    path.display()
                );
            }
            if let Engine::Gpu(gpu) = &engine {
                let tunables = bar
                    .suspend(|| {
                        let check = crate::ops::histogram::Tunables::check;
                        tuned.choice(ctx, "histogram", img.pixels() as f64, check)
                    })
                    .unwrap_or_else(|| crate::ops::histogram::Tunables::default_for(&gpu.limits));
                hist.set_tunables(tunables);
            }
            // Decode errors name the file already; the histogram's are given its name.
            hist.histogram(&img, channels, &mut timings)
                .with_context(|| path.display().to_string())
        })();
        match result {
            Ok(h) => reports.push(Report {
                path: path.display().to_string(),
                header: *header,
                hist: h,
            }),
            // A usage error (bins against the decoded depth) ends the run.
            Err(e) if Status::of_error(&e) == Status::Usage => return Err(e),
            Err(e) => {
                fail(&e);
                status = Status::Failure;
            }
        }
        bar.inc(1);
    }
    bar.finish_and_clear();

    let total = match shared {
        Some(_) if !reports.is_empty() => Some(timings.phase("download", || hist.total())?),
        _ => None,
    };
    if status == Status::Success {
        if let Some((pending, format)) = plot {
            let PlotSize { width, height } = args.plot_size;
            let img = timings.phase("plot", || hist.plot_total(width, height))?;
            timings.phase("encode", || image::save_to(pending, format, img))?;
        }
        if let Some(sink) = sink {
            let doc = HistogramDoc {
                gpukit_version: env!("CARGO_PKG_VERSION"),
                bins: args.bins,
                alpha: args.alpha,
                inputs: reports.iter().map(input_doc).collect(),
                sum: total.as_ref().filter(|_| args.sum).map(|t| SumDoc {
                    inputs: reports.len(),
                    pixels: t.pixels,
                    bins: t.bins,
                    channels: channel_docs(t),
                }),
            };
            sink.write(&doc)?;
        }
    } else if (sink.is_some() || plot.is_some()) && !reports.is_empty() {
        ctx.note("no --json or --plot output written, since not every input could be read");
    }
    if args.json.is_none() && args.plot.is_none() {
        let sum = total.as_ref().filter(|_| args.sum);
        print_stdout(&summary(&reports, sum))?;
    }
    ctx.report_timings(&timings);
    Ok(status)
}

fn input_doc(r: &Report) -> InputDoc {
    InputDoc {
        path: r.path.clone(),
        width: r.header.width,
        height: r.header.height,
        bit_depth: r.header.bit_depth,
        layout: layout_name(r.header.channels),
        pixels: r.hist.pixels,
        bins: r.hist.bins,
        channels: channel_docs(&r.hist),
    }
}

fn channel_lines(hist: &Histogram) -> String {
    let show = |v: Option<u32>| v.map_or("-".to_string(), |v| v.to_string());
    let mut out = String::new();
    for ch in channel_docs(hist) {
        let s = &ch.stats;
        out += &format!(
            "  {:<10} min {:>5}  max {:>5}  mean {:>9}  median {:>5}  p1 {:>5}  p99 {:>5}\n",
            ch.name,
            show(s.min),
            show(s.max),
            s.mean.map_or("-".to_string(), |m| format!("{m:.2}")),
            show(s.median),
            show(s.p1),
            show(s.p99)
        );
    }
    out
}

/// The short human summary: per input its layout and each channel's statistics (in bins).
fn summary(reports: &[Report], sum: Option<&Histogram>) -> String {
    let mut out = String::new();
    for r in reports {
        let h = &r.header;
        out += &format!(
            "{}: {}x{} {} {}-bit, {} bins\n",
            r.path,
            h.width,
            h.height,
            layout_name(h.channels),
            h.bit_depth,
            r.hist.bins
        );
        out += &channel_lines(&r.hist);
    }
    if let Some(t) = sum {
        out += &format!(
            "sum of {} inputs: {} pixels, {} bins\n",
            reports.len(),
            t.pixels,
            t.bins
        );
        out += &channel_lines(t);
    }
    out
}

#[cfg(test)]
mod tests {
    use std::path::Path;

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

    #[test]
    fn folders_expand_to_their_images_by_name() {
        let dir = tempfile::tempdir().unwrap();
        for f in ["b.png", "a.JPG", "notes.txt"] {
            std::fs::write(dir.path().join(f), b"x").unwrap();
        }
        let got = expand(&[dir.path().to_path_buf(), Path::new("c.png").into()]).unwrap();
        let names: Vec<_> = got
            .iter()
            .map(|p| p.file_name().unwrap().to_str().unwrap())
            .collect();
        assert_eq!(names, ["a.JPG", "b.png", "c.png"]);
        let empty = tempfile::tempdir().unwrap();
        let err = expand(&[empty.path().to_path_buf()]).unwrap_err();
        assert!(err.to_string().contains("no image files"), "{err}");
    }
}
