//! The frame-stream options `histogram` and `blur` share (`--raw`, `--pix-fmt`), and telling
//! a frame stream (Y4M, raw frames) from images on the command line: Y4M is sniffed by its
//! signature on stdin and in a regular file; raw frames are named.

use std::io::{BufRead, BufReader};
use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::Args;

use crate::batch::video::{Source, Stream};
use crate::io::image::stream::FrameStream;
use crate::io::image::{input_name, is_stdin};
use crate::io::video::{VideoFormat, VideoReader};

/// What `required` names for a stream that may also be images one after another
/// (`histogram --per-frame`).
pub const IMAGES_TOO: &str = "--per-frame";

#[derive(Debug, Args)]
pub struct VideoArgs {
    /// The input is raw video frames of this size, one after another with nothing between
    /// them (`ffmpeg -f rawvideo`); --pix-fmt gives their layout. (Y4M needs no flag: it is
    /// known by its signature.)
    #[arg(long, value_name = "WxH", value_parser = parse_frame_size, requires = "pix_fmt")]
    raw: Option<(u32, u32)>,
    /// Raw frames' pixel format, as ffmpeg names it: rgb24, rgba, gray, yuv420p, yuv422p,
    /// yuv444p, and the planar ones of 9 to 16 bits (gray16le, yuv420p10le, ...).
    #[arg(long, value_name = "FMT", requires = "raw")]
    pix_fmt: Option<String>,
}

fn parse_frame_size(s: &str) -> Result<(u32, u32), String> {
    let bad = || format!("expected WIDTHxHEIGHT, like 1920x1080; got {s:?}");
    let (w, h) = s.split_once(['x', 'X']).ok_or_else(bad)?;
    let side = |v: &str| v.trim().parse::<u32>().ok().filter(|&v| v > 0);
    Ok((side(w).ok_or_else(bad)?, side(h).ok_or_else(bad)?))
}

impl VideoArgs {
    /// Whether raw frames were named.
    pub fn is_raw(&self) -> bool {
        self.raw.is_some()
    }

    /// The input as a frame stream, if it is one: raw frames when named; else a Y4M stream
    /// on stdin or in a regular file (its first byte is `Y`, which begins no image format).
    /// `None`: the inputs are images. `required`: an option that needs a stream was given;
    /// with [`IMAGES_TOO`], a stream that is no Y4M is read as images one after another.
    /// Each frame may take up to `cap` bytes (`--max-image-bytes`).
    pub fn stream(
        &self,
        inputs: &[PathBuf],
        required: Option<&str>,
        cap: u64,
    ) -> Result<Option<Stream>> {
        let wanted = self.raw.is_some() || required.is_some();
        let [path] = inputs else {
            if wanted {
                anyhow::bail!(crate::UsageError(format!(
                    "{}: give one input, the frame stream (`-` for stdin)",
                    required.unwrap_or("--raw")
                )));
            }
            return Ok(None);
        };
        let name = input_name(path);
        let (mut reader, size): (Box<dyn BufRead + Send>, Option<u64>) = if is_stdin(path) {
            // A pipe on stdin carries frames in 1 MiB pieces, not 64 KiB ones.
            crate::io::video::widen_pipe(std::io::stdin());
            (
                Box::new(BufReader::with_capacity(1 << 20, std::io::stdin())),
                None,
            )
        } else {
            let meta = match (std::fs::metadata(path), wanted) {
                (Ok(meta), true) => meta,
                (Ok(meta), false) if meta.is_file() => meta,
                (Err(e), true) => return Err(e).with_context(|| format!("{name}: cannot open")),
                // A missing file or a glob is the image reader's to report; a FIFO read to
                // sniff it could not be read again as images.
                _ => return Ok(None),
            };
            let file = std::fs::File::open(path).with_context(|| format!("{name}: cannot open"))?;
            crate::io::video::widen_pipe(&file);
            // No output may land on the stream being read (-o, --json, --plot-frames).
            crate::io::output::note_input(path);
            let size = meta.is_file().then_some(meta.len());
            (Box::new(BufReader::with_capacity(1 << 20, file)), size)
        };
        if let Some((w, h)) = self.raw {
            let pix = self.pix_fmt.as_deref().expect("clap requires --pix-fmt");
            let format = VideoFormat::raw(w, h, pix)?;
            let frames = size.map(|s| s / format.frame_bytes().max(1));
            return Ok(Some(Stream {
                source: Source::Video(
                    VideoReader::raw(reader, format, cap).with_context(|| name.clone())?,
                ),
                name,
                frames,
            }));
        }
        // What the stream's first read holds, peeked in the buffer that reads it on (a FIFO
        // cannot be opened again to look: that waits for another writer). It may be shorter
        // than the signature (a pipe's first read), so as much of it as there is must match.
        let head = if is_stdin(path) {
            // Stdin's own buffer holds what is peeked here, for the image reader too.
            let mut lock = std::io::stdin().lock();
            lock.fill_buf().map(|b| b[..b.len().min(16)].to_vec())
        } else {
            reader.fill_buf().map(|b| b[..b.len().min(16)].to_vec())
        }
        .with_context(|| format!("{name}: cannot read"))?;
        let first = head.first().copied();
        if !starts_y4m(&head) {
            return match (required, first) {
                (None, _) => Ok(None),
                (Some(_), None) => anyhow::bail!("{name}: the stream is empty: no frames"),
                // Images one after another, each decoded by a worker.
                (Some(images), _) if images == IMAGES_TOO => Ok(Some(Stream {
                    source: Source::Images(FrameStream::new(reader, cap + (64 << 20))),
                    name,
                    frames: None,
                })),
                (Some(option), _) => anyhow::bail!(crate::UsageError(format!(
                    "{name}: {option} reads a Y4M stream or raw frames (--raw WxH --pix-fmt FMT)"
                ))),
            };
        }
        let reader = VideoReader::y4m(reader, cap).with_context(|| name.clone())?;
        let frames = size.map(|s| s / (reader.format().frame_bytes() + 6).max(1));
        Ok(Some(Stream {
            source: Source::Video(reader),
            name,
            frames,
        }))
    }
}

/// Whether a stream whose first bytes are `head` (at least one) begins with Y4M's signature,
/// as far as `head` goes.
fn starts_y4m(head: &[u8]) -> bool {
    let sig = crate::io::video::Y4M_SIGNATURE;
    let n = head.len().min(sig.len());
    n > 0 && head[..n] == sig[..n]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frame_size_parses() {
        assert_eq!(parse_frame_size("64x48"), Ok((64, 48)));
        for bad in ["64", "0x4", "ax4", "64x"] {
            assert!(parse_frame_size(bad).is_err(), "{bad}");
        }
    }
}
