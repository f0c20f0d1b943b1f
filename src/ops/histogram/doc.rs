//! What `gpukit histogram` reports: the JSON document (docs/formats.md) and the short human
//! summary, from the histograms counted.

use serde::Serialize;

use super::{channel_stats, ChannelStats, Histogram};
use crate::io::image;
use crate::io::json::Document;

/// The JSON document of `gpukit histogram --json`. Documented in docs/formats.md.
#[derive(Serialize)]
pub struct HistogramDoc {
    pub gpukit_version: &'static str,
    pub bins: u32,
    pub alpha: bool,
    pub inputs: Vec<InputDoc>,
    /// The inputs that could not be counted, in input order.
    pub failed: Vec<FailedDoc>,
    /// Only with --sum, and only when every input was counted; null otherwise.
    pub sum: Option<SumDoc>,
}

impl Document for HistogramDoc {
    const SCHEMA: &'static str = "gpukit.histogram/1";
}

#[derive(Serialize)]
pub struct FailedDoc {
    pub path: String,
    pub error: String,
}

impl FailedDoc {
    pub fn new(path: &std::path::Path, e: &anyhow::Error) -> FailedDoc {
        FailedDoc {
            path: path.display().to_string(),
            error: format!("{e:#}"),
        }
    }
}

#[derive(Serialize)]
pub struct InputDoc {
    pub path: String,
    pub width: u32,
    pub height: u32,
    pub bit_depth: u32,
    pub layout: &'static str,
    /// Images counted: an animation's frames, or the images on stdin; 1 for an image file.
    pub frames: u32,
    pub pixels: u64,
    pub bins: u32,
    pub channels: Vec<ChannelDoc>,
}

#[derive(Serialize)]
pub struct SumDoc {
    pub inputs: usize,
    pub pixels: u64,
    pub bins: u32,
    pub channels: Vec<ChannelDoc>,
}

#[derive(Serialize)]
pub struct ChannelDoc {
    pub name: &'static str,
    #[serde(flatten)]
    pub stats: ChannelStats,
    pub counts: Vec<u64>,
}

pub fn channel_docs(hist: &Histogram) -> Vec<ChannelDoc> {
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

pub fn layout_name(channels: u8) -> &'static str {
    match channels {
        1 => "gray",
        2 => "gray+alpha",
        3 => "RGB",
        _ => "RGBA",
    }
}

/// One input's result.
pub struct InputReport {
    pub path: String,
    pub header: image::Header,
    pub counted: Counted,
}

/// An input's counts: the sum over its frames.
pub struct Counted {
    pub hist: Histogram,
    pub frames: u32,
}

pub fn input_doc(r: &InputReport) -> InputDoc {
    InputDoc {
        path: r.path.clone(),
        width: r.header.width,
        height: r.header.height,
        bit_depth: r.header.bit_depth,
        layout: layout_name(r.header.channels),
        frames: r.counted.frames,
        pixels: r.counted.hist.pixels,
        bins: r.counted.hist.bins,
        channels: channel_docs(&r.counted.hist),
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
pub fn summary(reports: &[InputReport], sum: Option<&Histogram>) -> String {
    let mut out = String::new();
    for r in reports {
        let (h, c) = (&r.header, &r.counted);
        let frames = match c.frames {
            1 => String::new(),
            n => format!(", {n} frames of {} pixels in all", c.hist.pixels),
        };
        // Named as messages name it (`stdin` for `-`); the document keeps the path given.
        out += &format!(
            "{}: {}x{} {} {}-bit{frames}, {} bins\n",
            crate::io::image::input_name(std::path::Path::new(&r.path)),
            h.width,
            h.height,
            layout_name(h.channels),
            h.bit_depth,
            c.hist.bins
        );
        out += &channel_lines(&c.hist);
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
