//! The output options every image-to-image subcommand shares: where the results go, how they
//! are encoded and what metadata travels with them (docs/cli.md), beside the input options.

use std::path::{Path, PathBuf};

use clap::Args;

use crate::batch::images::Outputs;
use crate::io::image::{self as img_io, WriteOptions};
use crate::io::jpeg::Subsampling;
use crate::io::json::JsonDest;
use crate::io::metadata::Keep;

#[derive(Debug, Args)]
#[command(group(clap::ArgGroup::new("destination").required(true).args(["output", "out_dir"])))]
pub struct OutputArgs {
    /// Output file (one input only; may be the input itself). Its extension picks the format
    /// (none: PNG); `-` writes to stdout (not to a terminal), as PNG or as --out-format says.
    #[arg(short, long, value_name = "OUT")]
    output: Option<PathBuf>,
    /// Write each output into DIR under its input's path below the folder or glob it came
    /// from (created when missing).
    #[arg(long, value_name = "DIR", value_parser = out_dir)]
    out_dir: Option<PathBuf>,
    /// With --out-dir: write this format (an extension: png, jpg, webp, tif, ...) instead of
    /// the input's; with `-o -`: the format written to stdout (default png).
    #[arg(long, value_name = "EXT", value_parser = out_format)]
    out_format: Option<String>,
    /// Leave an output that exists already alone, -o FILE's or each under --out-dir (resume a
    /// batch; an output is only ever complete or absent); stdout is always written.
    #[arg(long)]
    skip_existing: bool,
    /// Let --out-dir write over input files (as when DIR is the inputs' own folder). `-o`
    /// needs no leave: it names the one file it writes, the input itself if given so.
    #[arg(long, conflicts_with = "output")]
    overwrite: bool,
    /// Write what became of each file as JSON to FILE.json, or to stdout with `-`
    /// (docs/formats.md).
    #[arg(long, value_name = "FILE|-")]
    report: Option<JsonDest>,
    /// Drop the metadata (ICC profile, EXIF, XMP, resolution, PNG text), which is otherwise
    /// kept wherever the output format holds it (docs/fidelity.md); `--keep none`.
    #[arg(long, conflicts_with = "keep")]
    strip: bool,
    /// Keep only this metadata: a list of icc, exif, exif-no-gps (EXIF without where the
    /// picture was taken), xmp, resolution, text; or all (the default), or none.
    #[arg(long, value_name = "LIST", value_parser = Keep::parse)]
    keep: Option<Keep>,
    /// Turn the pixels upright by their EXIF orientation and set it to 1, as ImageMagick's
    /// -auto-orient and vips autorot do.
    #[arg(long)]
    auto_orient: bool,
    /// JPEG quality, 1 to 100. Default: a JPEG input's own (estimated from its quantisation
    /// table), else 90. WebP output is lossless and takes none.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u8).range(1..=100))]
    quality: Option<u8>,
    /// PNG compression: 0 (none) to 9 (smallest), or fast (1), default (1), best (9).
    #[arg(long, value_name = "LEVEL", value_parser = compression_level)]
    compression: Option<u8>,
    /// JPEG chroma subsampling: 444, 422 or 420. Default: a JPEG input's own, else 420.
    #[arg(long, value_name = "S")]
    subsampling: Option<Subsampling>,
    /// Write progressive JPEG (libjpeg's default script).
    #[arg(long)]
    progressive: bool,
    /// JPEG Huffman tables: optimized for each image (the default) or the standard's
    /// (faster to write, larger files).
    #[arg(long, value_enum, value_name = "T")]
    jpeg_tables: Option<JpegTables>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum JpegTables {
    Optimized,
    Standard,
}

impl OutputArgs {
    /// The options as the batch driver takes them.
    pub fn outputs(&self) -> Outputs {
        Outputs {
            output: self.output.clone(),
            out_dir: self.out_dir.clone(),
            out_format: self.out_format.clone(),
            skip_existing: self.skip_existing,
            overwrite: self.overwrite,
            report: self.report.clone(),
            keep: if self.strip {
                Keep::NONE
            } else {
                self.keep.unwrap_or(Keep::ALL)
            },
            auto_orient: self.auto_orient,
            quality: self.quality,
            compression: self.compression,
            subsampling: self.subsampling,
            progressive: self.progressive,
            optimize: self.jpeg_tables.map(|t| t == JpegTables::Optimized),
        }
    }
}

fn compression_level(s: &str) -> Result<u8, String> {
    match s {
        "fast" => Ok(WriteOptions::FASTEST_COMPRESSION),
        "default" => Ok(WriteOptions::DEFAULT_COMPRESSION),
        "best" => Ok(WriteOptions::BEST_COMPRESSION),
        _ => match s.parse::<u8>() {
            Ok(n) if n <= 9 => Ok(n),
            _ => Err("expected 0 to 9, fast, default or best".into()),
        },
    }
}

fn out_format(s: &str) -> Result<String, String> {
    let ext = s.trim_start_matches('.').to_ascii_lowercase();
    img_io::output_format(Path::new(&format!("x.{ext}")))
        .map(|_| ext)
        .map_err(|e| e.to_string().replacen("x.", ".", 1))
}

/// A folder: `-` is refused (stdout takes one image: `-o -`), so that no folder named `-` is
/// made.
fn out_dir(s: &str) -> Result<PathBuf, String> {
    if s == "-" {
        return Err("a folder, not - (one image goes to stdout with -o -)".into());
    }
    Ok(PathBuf::from(s))
}
