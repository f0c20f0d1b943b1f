//! Video frame streams: YUV4MPEG2 (Y4M, as `ffmpeg -f yuv4mpegpipe` writes it) and raw frames
//! of a named size and pixel format, read one frame at a time in bounded memory and written
//! back in the same format; a frame's planes as gray (or interleaved RGB) images for the ops,
//! and Y'CbCr frames as RGB by the stream's range and matrix (docs/formats.md, "Frame streams").

use std::io::{BufRead, ErrorKind, IoSlice, Read, Write};

use anyhow::{bail, Context, Result};
use rayon::prelude::*;

use super::image::Image;

/// The signature every Y4M stream begins with.
pub const Y4M_SIGNATURE: &[u8] = b"YUV4MPEG2 ";

/// How a frame's samples are laid out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PixFmt {
    /// One plane of gray samples (Y4M `Cmono`, `Cmono16`; raw `gray`, `gray16le`).
    Gray,
    /// Interleaved red, green, blue (raw `rgb24`).
    Rgb,
    /// Interleaved red, green, blue, alpha (raw `rgba`).
    Rgba,
    /// Planar Y', Cb, Cr with the chroma planes subsampled by 2^x across and 2^y down
    /// (4:2:0: 1, 1; 4:2:2: 1, 0; 4:4:4: 0, 0).
    Yuv { x: u8, y: u8 },
}

/// Y'CbCr's range: limited (video: Y' 16 to 235, chroma 16 to 240, scaled for 16 bits) or
/// full (0 to the maximum).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Range {
    Limited,
    Full,
}

/// Y'CbCr's matrix: the luma weights of R' and B'.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Matrix {
    Bt601,
    Bt709,
}

impl Matrix {
    /// (Kr, Kb).
    fn weights(self) -> (f64, f64) {
        match self {
            Matrix::Bt601 => (0.299, 0.114),
            Matrix::Bt709 => (0.2126, 0.0722),
        }
    }
}

/// What every frame of a stream is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VideoFormat {
    pub width: u32,
    pub height: u32,
    pub pix: PixFmt,
    /// 8 or 16 (16-bit samples are little-endian, in Y4M as in `gray16le`).
    pub bit_depth: u32,
    /// Frames per second as a fraction, when the stream says (Y4M's `F`).
    pub rate: Option<(u64, u64)>,
    pub range: Range,
    pub matrix: Matrix,
    /// The Y4M header line (without its newline), written again ahead of the output's
    /// frames; `None` for raw frames.
    pub y4m_header: Option<String>,
}

/// One plane of a frame: its size and samples per pixel.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Plane {
    pub width: u32,
    pub height: u32,
    pub channels: u8,
    /// Whether it is a chroma plane.
    pub chroma: bool,
}

impl VideoFormat {
    /// Raw frames: `WxH` and an ffmpeg pixel format name (`rgb24`, `rgba`, `gray`,
    /// `gray16le`, `yuv420p`, `yuv422p`, `yuv444p`). Raw Y'CbCr is taken as limited-range
    /// BT.601, as ffmpeg takes untagged video.
    pub fn raw(width: u32, height: u32, pix_fmt: &str) -> Result<VideoFormat> {
        let (pix, bit_depth) = match pix_fmt {
            "rgb24" => (PixFmt::Rgb, 8),
            "rgba" => (PixFmt::Rgba, 8),
            other => raw_planar(other).ok_or_else(|| {
                crate::UsageError(format!(
                    "--pix-fmt {other}: gpukit reads rgb24, rgba, gray, yuv420p, yuv422p and \
                     yuv444p, and those of 9 to 16 bits little-endian (gray10le, \
                     yuv420p10le, yuv444p16le, ...)"
                ))
            })?,
        };
        if width == 0 || height == 0 {
            bail!(crate::UsageError(
                "--raw: a frame needs at least one pixel".into()
            ));
        }
        Ok(VideoFormat {
            width,
            height,
            pix,
            bit_depth,
            rate: None,
            range: Range::Limited,
            matrix: Matrix::Bt601,
            y4m_header: None,
        })
    }

    /// The Y4M header `line` (without its newline): `W`, `H`, `F`, `C` and the `XCOLORRANGE`
    /// and `XCOLORMATRIX` extensions; the other tags (interlacing, aspect) are kept but mean
    /// nothing to gpukit.
    pub fn y4m(line: &str) -> Result<VideoFormat> {
        let Some(tags) = line.strip_prefix("YUV4MPEG2 ") else {
            bail!("not a Y4M stream: it does not begin with YUV4MPEG2");
        };
        let (mut width, mut height, mut rate) = (None, None, None);
        let mut colour = "420jpeg";
        let (mut range, mut matrix) = (Range::Limited, Matrix::Bt601);
        let number = |tag: &str, v: &str| {
            v.parse::<u32>()
                .ok()
                .filter(|&n| n > 0)
                .with_context(|| format!("malformed Y4M header: bad {tag} value {v:?}"))
        };
        let mut seen = String::new();
        for tag in tags.split(' ').filter(|t| !t.is_empty()) {
            let mut chars = tag.chars();
            let key = chars.next().map_or(String::new(), String::from);
            let value = chars.as_str();
            // A size, rate or colour space given twice is two answers to one question.
            if matches!(key.as_str(), "W" | "H" | "F" | "C") {
                if seen.contains(key.as_str()) {
                    bail!("malformed Y4M header: the {key} tag is given twice");
                }
                seen.push_str(&key);
            }
            match key.as_str() {
                "W" => width = Some(number("W (width)", value)?),
                "H" => height = Some(number("H (height)", value)?),
                "F" => {
                    let parsed = value
                        .split_once(':')
                        .and_then(|(n, d)| Some((n.parse::<u64>().ok()?, d.parse::<u64>().ok()?)));
                    match parsed {
                        Some((n, d)) if n > 0 && d > 0 => rate = Some((n, d)),
                        Some(_) => {}
                        None => bail!("malformed Y4M header: bad F (frame rate) value {value:?}"),
                    }
                }
                "C" => colour = value,
                "X" => match value {
                    "COLORRANGE=FULL" => range = Range::Full,
                    "COLORRANGE=LIMITED" => range = Range::Limited,
                    "COLORMATRIX=BT709" => matrix = Matrix::Bt709,
                    "COLORMATRIX=BT601" => matrix = Matrix::Bt601,
                    _ => {}
                },
                "I" | "A" => {}
                _ => bail!("malformed Y4M header: unknown tag {tag:?}"),
            }
        }
        let (Some(width), Some(height)) = (width, height) else {
            bail!("malformed Y4M header: it lacks the W (width) or H (height) tag");
        };
        let Some((pix, bit_depth)) = y4m_colour(colour) else {
            bail!(
                "Y4M colour space C{colour} is not read: gpukit reads 420 (jpeg, paldv, mpeg2), \
                 422, 444 and mono, 8-bit or 9- to 16-bit (420p10, 444p16, mono12, ...)"
            );
        };
        Ok(VideoFormat {
            width,
            height,
            pix,
            bit_depth,
            rate,
            range,
            matrix,
            y4m_header: Some(line.to_string()),
        })
    }

    /// Whether samples take two bytes (9 to 16 bits, little-endian).
    pub fn wide(&self) -> bool {
        self.bit_depth > 8
    }

    /// The planes of a frame, in stream order.
    pub fn planes(&self) -> Vec<Plane> {
        let whole = |channels| Plane {
            width: self.width,
            height: self.height,
            channels,
            chroma: false,
        };
        match self.pix {
            PixFmt::Gray => vec![whole(1)],
            PixFmt::Rgb => vec![whole(3)],
            PixFmt::Rgba => vec![whole(4)],
            PixFmt::Yuv { x, y } => {
                let c = Plane {
                    width: self.width.div_ceil(1 << x),
                    height: self.height.div_ceil(1 << y),
                    channels: 1,
                    chroma: true,
                };
                vec![whole(1), c, c]
            }
        }
    }

    /// Bytes per sample.
    pub fn sample_bytes(&self) -> usize {
        if self.wide() {
            2
        } else {
            1
        }
    }

    /// Each plane's size in bytes, in stream order.
    pub fn plane_sizes(&self) -> Vec<usize> {
        self.planes()
            .iter()
            .map(|p| {
                p.width as usize * p.height as usize * p.channels as usize * self.sample_bytes()
            })
            .collect()
    }

    /// A frame's size in bytes.
    pub fn frame_bytes(&self) -> u64 {
        self.planes()
            .iter()
            .map(|p| {
                u64::from(p.width)
                    * u64::from(p.height)
                    * u64::from(p.channels)
                    * self.sample_bytes() as u64
            })
            .sum()
    }

    /// The time of frame `index` in seconds, when the rate is known.
    pub fn time_of(&self, index: u64) -> Option<f64> {
        self.rate.map(|(n, d)| index as f64 * d as f64 / n as f64)
    }

    /// A short description: `1920x1080 yuv420p 8-bit, 25 fps`.
    pub fn describe(&self) -> String {
        let pix = match self.pix {
            PixFmt::Gray => "gray".to_string(),
            PixFmt::Rgb => "rgb".to_string(),
            PixFmt::Rgba => "rgba".to_string(),
            PixFmt::Yuv { x, y } => format!("yuv4{}{}p", 4 >> x, if y > 0 { 0 } else { 4 >> x }),
        };
        let rate = self.rate.map_or(String::new(), |(n, d)| {
            format!(", {} fps", n as f64 / d as f64)
        });
        format!(
            "{}x{} {pix} {}-bit{rate}",
            self.width, self.height, self.bit_depth
        )
    }

    /// The planes of `frame` as images: gray for each plane of a planar format (8 or 16
    /// bits), the interleaved image of an RGB or RGBA frame.
    pub fn split(&self, frame: &[u8]) -> Vec<Image> {
        let mut at = 0;
        self.planes()
            .iter()
            .map(|p| {
                let n = p.width as usize * p.height as usize * p.channels as usize;
                let img = if !self.wide() {
                    Image::new_u8(p.width, p.height, p.channels, frame[at..at + n].to_vec())
                } else {
                    let bytes = &frame[at..at + 2 * n];
                    let samples = bytes
                        .chunks_exact(2)
                        .map(|b| u16::from_le_bytes([b[0], b[1]]))
                        .collect();
                    Image::new_u16(p.width, p.height, p.channels, samples)
                };
                at += n * self.sample_bytes();
                img
            })
            .collect()
    }

    /// The frame's bytes from its planes (as [`VideoFormat::split`] gave them).
    pub fn join(&self, planes: &[Image]) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.frame_bytes() as usize);
        for p in planes {
            match &p.samples {
                super::image::Samples::U8(s) => out.extend_from_slice(s),
                super::image::Samples::U16(s) => {
                    out.extend(s.iter().flat_map(|v| v.to_le_bytes()));
                }
            }
        }
        out
    }

    /// The planes (each plane's bytes, as [`VideoReader::next_planes`] reads them) as
    /// images, as [`VideoFormat::split`] gives them; 8-bit planes are moved, not copied.
    pub fn images(&self, planes: Vec<Vec<u8>>) -> Vec<Image> {
        if self.wide() {
            return self.split(&planes.concat());
        }
        self.planes()
            .iter()
            .zip(planes)
            .map(|(p, bytes)| Image::new_u8(p.width, p.height, p.channels, bytes))
            .collect()
    }

    /// Each image's bytes, as the stream holds them: 8-bit samples moved, not copied.
    pub fn plane_bytes(&self, images: Vec<Image>) -> Vec<Vec<u8>> {
        images
            .into_iter()
            .map(|img| match img.samples {
                super::image::Samples::U8(s) => s,
                super::image::Samples::U16(s) => s.iter().flat_map(|v| v.to_le_bytes()).collect(),
            })
            .collect()
    }

    /// The frame as the image the histogram counts: gray, RGB or RGBA as they are; Y'CbCr
    /// converted to RGB of the same depth ([`YuvToRgb`]).
    pub fn to_image(&self, frame: &[u8]) -> Image {
        self.image_of(self.split(frame))
    }

    /// [`VideoFormat::to_image`] of the frame's planes as images.
    pub fn image_of(&self, mut planes: Vec<Image>) -> Image {
        match self.pix {
            PixFmt::Yuv { x, y } => {
                YuvToRgb::new(self.range, self.matrix, self.bit_depth).convert(&planes, x, y)
            }
            _ => planes.remove(0),
        }
    }
}

/// A Y4M `C` tag's layout and bit depth, as ffmpeg's yuv4mpegpipe writes them: `420jpeg`,
/// `420paldv`, `420mpeg2`, `420`, `422`, `444` and `mono` (8-bit); `420p10`, `422p12`,
/// `444p16`, ... (`p` and 9 to 16 bits) and `mono10`, `mono16`, ... (samples of two bytes,
/// little-endian, holding the stated depth).
fn y4m_colour(tag: &str) -> Option<(PixFmt, u32)> {
    let depth = |bits: &str| {
        bits.parse::<u32>()
            .ok()
            .filter(|b| (9..=16).contains(b) && !bits.starts_with('0'))
    };
    if let Some(bits) = tag.strip_prefix("mono") {
        return match bits {
            "" => Some((PixFmt::Gray, 8)),
            _ => Some((PixFmt::Gray, depth(bits)?)),
        };
    }
    let (pix, rest) = match tag.get(..3)? {
        "420" => (PixFmt::Yuv { x: 1, y: 1 }, &tag[3..]),
        "422" => (PixFmt::Yuv { x: 1, y: 0 }, &tag[3..]),
        "444" => (PixFmt::Yuv { x: 0, y: 0 }, &tag[3..]),
        _ => return None,
    };
    match rest {
        "" => Some((pix, 8)),
        "jpeg" | "paldv" | "mpeg2" if tag.starts_with("420") => Some((pix, 8)),
        _ => Some((pix, depth(rest.strip_prefix('p')?)?)),
    }
}

/// A raw planar pixel format's layout and bit depth, as ffmpeg names it: `gray`, `yuv420p`,
/// `yuv422p`, `yuv444p`, and each with `10le`, `12le`, `16le`, ... (9 to 16 bits).
fn raw_planar(name: &str) -> Option<(PixFmt, u32)> {
    let (pix, rest) = if let Some(rest) = name.strip_prefix("gray") {
        (PixFmt::Gray, rest)
    } else {
        let rest = name.strip_prefix("yuv")?;
        let pix = match rest.get(..4)? {
            "420p" => PixFmt::Yuv { x: 1, y: 1 },
            "422p" => PixFmt::Yuv { x: 1, y: 0 },
            "444p" => PixFmt::Yuv { x: 0, y: 0 },
            _ => return None,
        };
        (pix, &rest[4..])
    };
    if rest.is_empty() {
        return Some((pix, 8));
    }
    let bits = rest.strip_suffix("le")?;
    let depth = bits.parse::<u32>().ok()?;
    ((9..=16).contains(&depth) && !bits.starts_with('0')).then_some((pix, depth))
}

/// Y'CbCr to R'G'B' in integers, the same on every machine (docs/formats.md): with
/// `yoff`, `half` the offsets of Y' and chroma, and `cy`, `crv`, `cgu`, `cgv`, `cbu` the
/// matrix's factors (range scaling included) times 2^16, rounded to the nearest integer,
///
///   R = (cy (Y - yoff) + crv (V - half) + 2^15) >> 16
///   G = (cy (Y - yoff) - cgu (U - half) - cgv (V - half) + 2^15) >> 16
///   B = (cy (Y - yoff) + cbu (U - half) + 2^15) >> 16
///
/// each clamped to 0..=max (`>>` floors). A pixel takes the chroma sample its position falls
/// in (x >> sx, y >> sy), as ffmpeg's nearest-neighbour upsampling does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct YuvToRgb {
    pub yoff: i64,
    pub half: i64,
    pub max: i64,
    pub cy: i64,
    pub crv: i64,
    pub cgu: i64,
    pub cgv: i64,
    pub cbu: i64,
}

impl YuvToRgb {
    pub fn new(range: Range, matrix: Matrix, bit_depth: u32) -> YuvToRgb {
        let max = (1i64 << bit_depth) - 1;
        let scale = 1i64 << (bit_depth - 8);
        let (yoff, ky, kc) = match range {
            Range::Limited => (
                16 * scale,
                max as f64 / (219 * scale) as f64,
                max as f64 / (224 * scale) as f64,
            ),
            Range::Full => (0, 1.0, 1.0),
        };
        let (kr, kb) = matrix.weights();
        let kg = 1.0 - kr - kb;
        let q = |v: f64| (v * 65536.0).round() as i64;
        YuvToRgb {
            yoff,
            half: 1 << (bit_depth - 1),
            max,
            cy: q(ky),
            crv: q(kc * 2.0 * (1.0 - kr)),
            cgu: q(kc * 2.0 * kb * (1.0 - kb) / kg),
            cgv: q(kc * 2.0 * kr * (1.0 - kr) / kg),
            cbu: q(kc * 2.0 * (1.0 - kb)),
        }
    }

    /// One pixel's R, G, B.
    pub fn pixel(&self, y: i64, u: i64, v: i64) -> [i64; 3] {
        let (y, u, v) = (self.cy * (y - self.yoff), u - self.half, v - self.half);
        let f = |s: i64| ((s + (1 << 15)) >> 16).clamp(0, self.max);
        [
            f(y + self.crv * v),
            f(y - self.cgu * u - self.cgv * v),
            f(y + self.cbu * u),
        ]
    }

    /// The RGB image of the planes Y', Cb, Cr, the chroma subsampled by 2^sx, 2^sy, rows on
    /// all cores.
    pub fn convert(&self, planes: &[Image], sx: u8, sy: u8) -> Image {
        use super::image::Samples::{U16, U8};
        let (w, h) = (planes[0].width as usize, planes[0].height as usize);
        let cw = planes[1].width as usize;
        match (&planes[0].samples, &planes[1].samples, &planes[2].samples) {
            (U8(y), U8(u), U8(v)) => {
                // Each term of a pixel's sums by table: the same products, looked up.
                let table = |c: i64, off: i64| -> Vec<i32> {
                    (0..256).map(|s| (c * (s - off)) as i32).collect()
                };
                let (ty, trv) = (table(self.cy, self.yoff), table(self.crv, self.half));
                let (tgu, tgv) = (table(self.cgu, self.half), table(self.cgv, self.half));
                let tbu = table(self.cbu, self.half);
                let f = |s: i32| ((s + (1 << 15)) >> 16).clamp(0, 255) as u8;
                let mut rgb = vec![0u8; w * h * 3];
                rgb.par_chunks_mut(w * 3).enumerate().for_each(|(r, line)| {
                    let (yr, c0) = (&y[r * w..(r + 1) * w], (r >> sy) * cw);
                    let (ur, vr) = (&u[c0..c0 + cw], &v[c0..c0 + cw]);
                    for ((x, &yv), px) in yr.iter().enumerate().zip(line.chunks_exact_mut(3)) {
                        let (uv, vv) = (ur[x >> sx] as usize, vr[x >> sx] as usize);
                        let l = ty[yv as usize];
                        px[0] = f(l + trv[vv]);
                        px[1] = f(l - tgu[uv] - tgv[vv]);
                        px[2] = f(l + tbu[uv]);
                    }
                });
                Image::new_u8(w as u32, h as u32, 3, rgb)
            }
            (U16(y), U16(u), U16(v)) => {
                let mut rgb = vec![0u16; w * h * 3];
                rgb.par_chunks_mut(w * 3).enumerate().for_each(|(r, line)| {
                    let (yr, c0) = (&y[r * w..(r + 1) * w], (r >> sy) * cw);
                    for ((x, &yv), px) in yr.iter().enumerate().zip(line.chunks_exact_mut(3)) {
                        let c = c0 + (x >> sx);
                        let p = self.pixel(i64::from(yv), i64::from(u[c]), i64::from(v[c]));
                        for (o, s) in px.iter_mut().zip(p) {
                            *o = s as u16;
                        }
                    }
                });
                Image::new_u16(w as u32, h as u32, 3, rgb)
            }
            _ => unreachable!("a frame's planes share its depth"),
        }
    }
}

/// The longest Y4M header or frame header line read.
const MAX_LINE: usize = 4096;

/// Spare plane buffers, handed back to a [`VideoReader`].
pub type Spare = std::sync::Arc<std::sync::Mutex<Vec<Vec<u8>>>>;

/// A buffer of `n` bytes from `spare` (its old bytes left in it), or a new one.
pub fn spare_buffer(spare: &Spare, n: usize) -> Vec<u8> {
    let reused = spare.lock().ok().and_then(|mut held| {
        let at = held.iter().position(|b| b.len() == n)?;
        Some(held.swap_remove(at))
    });
    reused.unwrap_or_else(|| vec![0u8; n])
}

/// Hands `buffers` back to `spare`, keeping at most `most` there (the rest are dropped).
pub fn give_back(spare: &Spare, buffers: impl IntoIterator<Item = Vec<u8>>, most: usize) {
    if let Ok(mut held) = spare.lock() {
        for b in buffers {
            if held.len() >= most {
                return;
            }
            held.push(b);
        }
    }
}

/// Frames read one at a time.
pub struct VideoReader<R> {
    reader: R,
    format: VideoFormat,
    /// The most bytes a frame may take.
    cap: u64,
    /// Buffers handed back by whoever took earlier frames, reused for the next ones.
    spare: Option<Spare>,
    /// The index of the next frame (from 0).
    next: u64,
}

impl<R: BufRead> VideoReader<R> {
    /// A Y4M stream whose frames may take up to `cap` bytes each: its header is read now. An
    /// empty stream, one that is no Y4M, or frames over the cap are an error.
    pub fn y4m(mut reader: R, cap: u64) -> Result<VideoReader<R>> {
        let line = match read_line(&mut reader)? {
            Some(line) => line,
            None => bail!("the stream is empty: no Y4M header and no frames"),
        };
        let format = VideoFormat::y4m(&line)?;
        VideoReader::raw(reader, format, cap)
    }

    /// Frames of `format` (raw, or after a Y4M header), each within `cap` bytes.
    pub fn raw(reader: R, format: VideoFormat, cap: u64) -> Result<VideoReader<R>> {
        let size = format.frame_bytes();
        if size > cap {
            bail!(
                "a {}x{} frame takes {size} bytes, more than the {} MiB limit \
                 (--max-image-bytes raises it)",
                format.width,
                format.height,
                cap >> 20
            );
        }
        Ok(VideoReader {
            reader,
            format,
            cap,
            spare: None,
            next: 0,
        })
    }

    /// Takes plane buffers from `spare` (of the plane's size; others are dropped) before
    /// allocating new ones: a stream filter hands back the planes it has written.
    pub fn reuse(&mut self, spare: Spare) {
        self.spare = Some(spare);
    }

    /// A buffer of `n` bytes to read a plane into: a spare one, or a new one.
    fn buffer(&mut self, n: usize) -> Vec<u8> {
        match &self.spare {
            Some(spare) => spare_buffer(spare, n),
            None => vec![0u8; n],
        }
    }

    pub fn format(&self) -> &VideoFormat {
        &self.format
    }

    /// The index of the frame to be read next (the frames read so far).
    pub fn next_index(&self) -> u64 {
        self.next
    }

    /// Takes the frames' Y'CbCr as of `matrix`, whatever the header said.
    pub fn set_matrix(&mut self, matrix: Matrix) {
        self.format.matrix = matrix;
    }

    /// The next frame's index and bytes, or `None` at the end of the stream. A stream that
    /// ends inside a frame is an error naming the frame (counted from 0).
    pub fn next_frame(&mut self) -> Result<Option<(u64, Vec<u8>)>> {
        Ok(self.next_planes()?.map(|(i, planes)| (i, planes.concat())))
    }

    /// As [`VideoReader::next_frame`], each plane's bytes read into a buffer of its own
    /// (straight from the source where the reader holds nothing).
    pub fn next_planes(&mut self) -> Result<Option<(u64, Vec<Vec<u8>>)>> {
        let sizes = self.format.plane_sizes();
        let mut planes: Vec<Vec<u8>> = sizes.iter().map(|&n| self.buffer(n)).collect();
        let mut slices: Vec<&mut [u8]> = planes.iter_mut().map(Vec::as_mut_slice).collect();
        let index = self.next_into(&mut slices)?;
        Ok(index.map(|i| (i, planes)))
    }

    /// The next frame's planes read into `planes` (one slice a plane, each of its
    /// [`VideoFormat::plane_sizes`] length: a GPU stream's mapped staging, say), straight
    /// from the source where the reader holds nothing; the frame's index, or `None` at the
    /// end of the stream. A stream that ends inside a frame is an error naming the frame.
    pub fn next_into(&mut self, planes: &mut [&mut [u8]]) -> Result<Option<u64>> {
        let index = self.next;
        if self.format.y4m_header.is_some() {
            match read_line(&mut self.reader).with_context(|| format!("frame {index}"))? {
                None => return Ok(None),
                Some(l) if l == "FRAME" || l.starts_with("FRAME ") => {}
                Some(l) => bail!(
                    "frame {index}: expected a FRAME header, found {:?}",
                    l.chars().take(20).collect::<String>()
                ),
            }
        }
        let size = self.format.frame_bytes();
        debug_assert!(size <= self.cap, "checked when the stream was opened");
        debug_assert_eq!(
            planes.iter().map(|p| p.len()).collect::<Vec<_>>(),
            self.format.plane_sizes()
        );
        let mut got = 0u64;
        for plane in planes.iter_mut() {
            let n = plane.len();
            let read = read_full(&mut self.reader, plane)
                .with_context(|| format!("frame {index}: cannot read"))?;
            got += read as u64;
            if read < n {
                if got == 0 && self.format.y4m_header.is_none() {
                    return Ok(None);
                }
                bail!("frame {index} is cut short: the stream ended {got} bytes into its {size}");
            }
        }
        self.next += 1;
        Ok(Some(index))
    }
}

/// Reads until `buf` is full or the stream ends; how many bytes were read.
fn read_full<R: Read>(r: &mut R, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut got = 0;
    while got < buf.len() {
        match r.read(&mut buf[got..]) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(got)
}

/// A line up to its newline (not included), or `None` at the end of the stream. A line cut
/// short by the end, or longer than [`MAX_LINE`], is an error.
fn read_line<R: BufRead>(r: &mut R) -> Result<Option<String>> {
    let mut line = Vec::new();
    loop {
        let buf = match r.fill_buf() {
            Ok(b) => b,
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(e) => return Err(e).context("cannot read"),
        };
        if buf.is_empty() {
            if line.is_empty() {
                return Ok(None);
            }
            bail!("the stream ends inside a header line");
        }
        let (take, done) = match buf.iter().position(|&b| b == b'\n') {
            Some(i) => (i, true),
            None => (buf.len(), false),
        };
        line.extend_from_slice(&buf[..take]);
        r.consume(take + usize::from(done));
        if line.len() > MAX_LINE {
            bail!("malformed header: a line longer than {MAX_LINE} bytes");
        }
        if done {
            return String::from_utf8(line)
                .map(Some)
                .map_err(|_| anyhow::anyhow!("malformed header: it is not text"));
        }
    }
}

/// Frames written in a stream's own format: a Y4M header once, then `FRAME` and each frame's
/// bytes; raw frames as they are.
pub struct VideoWriter<'w> {
    out: &'w mut dyn Write,
    /// The Y4M header, until it is written.
    header: Option<String>,
    /// Whether frames are Y4M's (each after `FRAME`).
    y4m: bool,
}

impl<'w> VideoWriter<'w> {
    /// A writer of `format`'s frames to `out` (the header goes out with the first frame).
    pub fn new(out: &'w mut dyn Write, format: &VideoFormat) -> VideoWriter<'w> {
        VideoWriter::with_header(out, format.y4m_header.clone())
    }

    /// A Y4M writer of frames of another kind than the input's (the plot's): 4:4:4 or mono,
    /// 8-bit, full range.
    pub fn y4m_header(width: u32, height: u32, rate: Option<(u64, u64)>, mono: bool) -> String {
        let (n, d) = rate.unwrap_or((25, 1));
        let c = if mono { "mono" } else { "444" };
        format!("YUV4MPEG2 W{width} H{height} F{n}:{d} Ip A1:1 C{c} XCOLORRANGE=FULL")
    }

    /// A writer whose Y4M header is `header` (`None`: raw frames).
    pub fn with_header(out: &'w mut dyn Write, header: Option<String>) -> VideoWriter<'w> {
        let y4m = header.is_some();
        VideoWriter { out, header, y4m }
    }

    /// Writes one frame given as its planes' bytes: Y4M's `FRAME` line and the planes (a
    /// vectored write, which the buffered output takes a slice at a time, passing large ones
    /// straight on), then flushes, so that each frame leaves as it is done: a live stream of
    /// small frames is not held back in a buffer, and a stream that fails later has given
    /// every whole frame.
    pub fn planes<P: AsRef<[u8]>>(&mut self, planes: &[P]) -> std::io::Result<()> {
        if let Some(h) = self.header.take() {
            self.out.write_all(h.as_bytes())?;
            self.out.write_all(b"\n")?;
        }
        let frame: &[u8] = if self.y4m { b"FRAME\n" } else { b"" };
        let mut slices: Vec<IoSlice> = std::iter::once(frame)
            .chain(planes.iter().map(AsRef::as_ref))
            .filter(|s| !s.is_empty())
            .map(IoSlice::new)
            .collect();
        let mut left = &mut slices[..];
        while !left.is_empty() {
            match self.out.write_vectored(left) {
                Ok(0) => return Err(ErrorKind::WriteZero.into()),
                Ok(n) => IoSlice::advance_slices(&mut left, n),
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        self.out.flush()
    }

    /// Writes one frame, and flushes it as [`VideoWriter::planes`] does.
    pub fn frame(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        self.begin()?;
        self.out.write_all(bytes)?;
        self.out.flush()
    }

    /// The header before the first frame, and `FRAME` before each of Y4M's.
    fn begin(&mut self) -> std::io::Result<()> {
        if let Some(h) = self.header.take() {
            self.out.write_all(h.as_bytes())?;
            self.out.write_all(b"\n")?;
        }
        if self.y4m {
            self.out.write_all(b"FRAME\n")?;
        }
        Ok(())
    }

    pub fn flush(&mut self) -> std::io::Result<()> {
        self.out.flush()
    }
}

/// The size a frame stream asks for on a pipe it reads or writes: 1 MiB, the most Linux gives
/// a process without privileges (`/proc/sys/fs/pipe-max-size`). A 4K frame crosses the
/// default 64 KiB pipe in some 190 pieces, each a switch between the writer and the reader;
/// in 1 MiB pieces the two run side by side (docs/BENCHMARKS.md, call AF-video2-1).
pub const PIPE_BYTES: usize = 1 << 20;

/// Widens `fd` to [`PIPE_BYTES`] when it is a pipe or a FIFO smaller than that, and gives its
/// size then; `None` for anything else. Best effort: where Linux refuses (a lower
/// `pipe-max-size`, a user over its pipe quota) the pipe stays as it was.
#[cfg(target_os = "linux")]
pub fn widen_pipe(fd: impl std::os::fd::AsFd) -> Option<usize> {
    use rustix::fs::{fstat, FileType};
    use std::os::fd::AsRawFd;
    let stat = fstat(&fd).ok()?;
    if FileType::from_raw_mode(stat.st_mode) != FileType::Fifo {
        return None;
    }
    let raw = fd.as_fd().as_raw_fd();
    // SAFETY: F_GETPIPE_SZ and F_SETPIPE_SZ take and give plain integers on a descriptor that
    // `fd` keeps open for the call (rustix has them behind its `pipe` feature, whose change
    // would rebuild wgpu's whole tree for two calls).
    let size = unsafe { libc::fcntl(raw, libc::F_GETPIPE_SZ) };
    let size = usize::try_from(size).ok()?;
    if size >= PIPE_BYTES {
        return Some(size);
    }
    // SAFETY: as above.
    let wide = unsafe { libc::fcntl(raw, libc::F_SETPIPE_SZ, PIPE_BYTES as libc::c_int) };
    Some(usize::try_from(wide).unwrap_or(size))
}

/// Pipes keep their size where Linux's F_SETPIPE_SZ is not.
#[cfg(not(target_os = "linux"))]
pub fn widen_pipe<T>(_fd: T) -> Option<usize> {
    None
}

/// Whether `head` (a stream's first bytes) begins a Y4M stream.
pub fn is_y4m(head: &[u8]) -> bool {
    head.starts_with(Y4M_SIGNATURE)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read_all(bytes: &[u8]) -> Result<(VideoFormat, Vec<Vec<u8>>)> {
        let mut r = VideoReader::y4m(bytes, 1 << 20)?;
        let mut frames = Vec::new();
        while let Some((i, f)) = r.next_frame()? {
            assert_eq!(i as usize, frames.len());
            frames.push(f);
        }
        Ok((r.format().clone(), frames))
    }

    #[test]
    fn y4m_header_and_frames_with_odd_420_sizes() {
        // 3x3 4:2:0: 9 luma bytes and 2x2 of each chroma plane.
        let frame: Vec<u8> = (0..17).collect();
        let stream = [
            &b"YUV4MPEG2 W3 H3 F30000:1001 Ip A1:1 C420jpeg XYSCSS=420JPEG\n"[..],
            b"FRAME\n",
            &frame,
            b"FRAME Ixyz\n",
            &frame,
        ]
        .concat();
        let (f, frames) = read_all(&stream).unwrap();
        assert_eq!(
            (f.width, f.height, f.pix),
            (3, 3, PixFmt::Yuv { x: 1, y: 1 })
        );
        assert_eq!(f.frame_bytes(), 17);
        assert_eq!(frames, [frame.clone(), frame.clone()]);
        assert!((f.time_of(3).unwrap() - 3.0 * 1001.0 / 30000.0).abs() < 1e-12);
        let planes = f.split(&frame);
        assert_eq!((planes[1].width, planes[1].height), (2, 2));
        assert_eq!(f.join(&planes), frame);
        let by_plane = vec![
            frame[..9].to_vec(),
            frame[9..13].to_vec(),
            frame[13..].to_vec(),
        ];
        assert_eq!(f.images(by_plane.clone()), planes);
        assert_eq!(f.plane_bytes(planes), by_plane);
    }

    #[test]
    fn malformed_and_cut_streams_name_the_problem() {
        let err = |s: &[u8]| format!("{:#}", read_all(s).unwrap_err());
        assert!(err(b"").contains("empty"));
        assert!(err(b"YUV4MPEG2 W3\n").contains("lacks"));
        assert!(err(b"YUV4MPEG2 W0 H2\n").contains("bad W"));
        assert!(err(b"YUV4MPEG2 W2 H2 C411\n").contains("C411"));
        assert!(err(b"YUV4MPEG2 W2 H2 C420p17\n").contains("C420p17"));
        assert!(err(b"YUV4MPEG2 W2 H2 C422p8\n").contains("C422p8"));
        assert!(err(b"YUV4MPEG2 W2 H2 Cmono010\n").contains("Cmono010"));
        assert!(err(b"YUV4MPEG2 W2 H2 Q1\n").contains("unknown tag"));
        // A tag given twice: the last one took silently.
        for twice in [
            "W2 W4 H2",
            "W2 H2 H3",
            "W2 H2 F30:1 F25:1",
            "W2 H2 Cmono C420jpeg",
        ] {
            let header = format!("YUV4MPEG2 {twice}\n");
            assert!(err(header.as_bytes()).contains("is given twice"), "{twice}");
        }
        assert!(err("YUV4MPEG2 W2 H2 \u{e9}1\n".as_bytes()).contains("unknown tag"));
        assert!(err(b"YUV4MPEG2 W4000000 H4000000\n").contains("more than the 1 MiB limit"));
        let cut = [&b"YUV4MPEG2 W2 H2 Cmono\nFRAME\n1234FRAME\n12"[..]].concat();
        assert_eq!(
            err(&cut),
            "frame 1 is cut short: the stream ended 2 bytes into its 4"
        );
        assert!(err(b"YUV4MPEG2 W2 H2 Cmono\nFRAMX\n1234").contains("frame 0: expected"));
    }

    // What ffmpeg's yuv4mpegpipe writes for 9- to 16-bit frames (ffmpeg 5.1 and 7.0:
    // `-pix_fmt yuv420p10le` gives `C420p10 XYSCSS=420P10`, `gray12le` gives `Cmono12`): two
    // bytes a sample, the planes subsampled as their 8-bit kin; raw names as ffmpeg's.
    #[test]
    fn wide_y4m_colour_tags_and_raw_names() {
        let f = |c: &str| VideoFormat::y4m(&format!("YUV4MPEG2 W5 H3 C{c}")).unwrap();
        for (c, pix, bits, bytes) in [
            ("420p10", PixFmt::Yuv { x: 1, y: 1 }, 10, 2 * (15 + 2 * 6)),
            ("422p12", PixFmt::Yuv { x: 1, y: 0 }, 12, 2 * (15 + 2 * 9)),
            ("444p9", PixFmt::Yuv { x: 0, y: 0 }, 9, 2 * 45),
            ("420p14", PixFmt::Yuv { x: 1, y: 1 }, 14, 2 * (15 + 2 * 6)),
            ("mono12", PixFmt::Gray, 12, 30),
            ("mono", PixFmt::Gray, 8, 15),
            ("420mpeg2", PixFmt::Yuv { x: 1, y: 1 }, 8, 15 + 2 * 6),
        ] {
            let v = f(c);
            assert_eq!(
                (v.pix, v.bit_depth, v.frame_bytes()),
                (pix, bits, bytes),
                "{c}"
            );
        }
        let ten = f("420p10");
        let frame: Vec<u8> = (0..54u32).map(|i| (i * 37 % 256) as u8).collect();
        let planes = ten.split(&frame);
        assert_eq!((planes[0].bit_depth(), planes[1].width), (16, 3));
        assert_eq!(ten.join(&planes), frame);
        assert_eq!(ten.describe(), "5x3 yuv420p 10-bit");
        for (name, pix, bits) in [
            ("yuv420p10le", PixFmt::Yuv { x: 1, y: 1 }, 10),
            ("yuv444p16le", PixFmt::Yuv { x: 0, y: 0 }, 16),
            ("gray12le", PixFmt::Gray, 12),
            ("gray16le", PixFmt::Gray, 16),
            ("yuv422p", PixFmt::Yuv { x: 1, y: 0 }, 8),
        ] {
            let v = VideoFormat::raw(4, 2, name).unwrap();
            assert_eq!((v.pix, v.bit_depth), (pix, bits), "{name}");
        }
        for bad in [
            "yuv420p10be",
            "yuv420p8le",
            "gray17le",
            "yuv411p",
            "gray010le",
            "nv12",
        ] {
            assert!(VideoFormat::raw(4, 2, bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn raw_frames_end_cleanly_only_between_frames() {
        let f = VideoFormat::raw(2, 1, "rgb24").unwrap();
        let mut r = VideoReader::raw(&b"abcdefghijkl"[..], f.clone(), 6).unwrap();
        assert_eq!(r.next_frame().unwrap().unwrap().1, b"abcdef");
        assert_eq!(r.next_frame().unwrap().unwrap().1, b"ghijkl");
        assert!(r.next_frame().unwrap().is_none());
        let mut r = VideoReader::raw(&b"abcdefgh"[..], f.clone(), 6).unwrap();
        r.next_frame().unwrap();
        assert!(r
            .next_frame()
            .unwrap_err()
            .to_string()
            .contains("frame 1 is cut short"));
        assert!(VideoFormat::raw(2, 2, "nv12").is_err());
        let huge = VideoReader::raw(&b""[..], f, 5).err().unwrap().to_string();
        assert!(huge.contains("a 2x1 frame takes 6 bytes"), "{huge}");
    }

    // A spare buffer of a plane's size is taken and filled whole (its old bytes gone); one of
    // another size is left.
    #[test]
    fn spare_buffers_are_reused_and_overwritten() {
        let f = VideoFormat::raw(2, 1, "rgb24").unwrap();
        let spare = Spare::default();
        spare.lock().unwrap().extend([vec![9u8; 6], vec![7u8; 5]]);
        let mut r = VideoReader::raw(&b"abcdefghijkl"[..], f, 6).unwrap();
        r.reuse(spare.clone());
        assert_eq!(r.next_planes().unwrap().unwrap().1, [b"abcdef".to_vec()]);
        assert_eq!(*spare.lock().unwrap(), [vec![7u8; 5]]);
        assert_eq!(r.next_planes().unwrap().unwrap().1, [b"ghijkl".to_vec()]);
    }

    #[test]
    fn yuv_to_rgb_by_hand() {
        let c = YuvToRgb::new(Range::Limited, Matrix::Bt601, 8);
        // The classic 8-bit BT.601 factors: 1.164, 1.596, 0.392, 0.813, 2.017.
        assert_eq!(
            (c.cy, c.crv, c.cgu, c.cgv, c.cbu),
            (76309, 104597, 25675, 53279, 132201)
        );
        assert_eq!(c.pixel(16, 128, 128), [0, 0, 0]);
        assert_eq!(c.pixel(235, 128, 128), [255, 255, 255]);
        // Pure red in BT.601 limited range, Y 81, Cb 90, Cr 240 rounded: 75.68 + 178.75 = 254.4.
        assert_eq!(c.pixel(81, 90, 240), [254, 0, 0]);
        let full = YuvToRgb::new(Range::Full, Matrix::Bt709, 16);
        assert_eq!(full.pixel(40000, 32768, 32768), [40000, 40000, 40000]);
    }

    #[test]
    fn the_8_bit_tables_give_what_pixel_gives() {
        let (w, h) = (5u32, 3u32);
        let y: Vec<u8> = (0..15).map(|i| (i * 17 + 3) as u8).collect();
        let u: Vec<u8> = (0..6).map(|i| (i * 45 + 7) as u8).collect();
        let v: Vec<u8> = (0..6).map(|i| (250 - i * 41) as u8).collect();
        let planes = [
            Image::new_u8(w, h, 1, y.clone()),
            Image::new_u8(3, 2, 1, u.clone()),
            Image::new_u8(3, 2, 1, v.clone()),
        ];
        for (range, matrix) in [
            (Range::Limited, Matrix::Bt601),
            (Range::Full, Matrix::Bt709),
        ] {
            let c = YuvToRgb::new(range, matrix, 8);
            let img = c.convert(&planes, 1, 1);
            let crate::io::image::Samples::U8(rgb) = &img.samples else {
                panic!("8-bit")
            };
            for i in 0..15 {
                let k = (i / 5 / 2) * 3 + (i % 5) / 2;
                let p = c.pixel(y[i].into(), u[k].into(), v[k].into());
                assert_eq!(rgb[3 * i..3 * i + 3], p.map(|s| s as u8), "pixel {i}");
            }
        }
    }

    // A pipe is widened to 1 MiB, never narrowed; a regular file is left alone.
    #[cfg(target_os = "linux")]
    #[test]
    fn pipes_are_widened_and_files_left_alone() {
        use std::os::fd::{AsRawFd, FromRawFd};
        let mut fds = [0; 2];
        // SAFETY: pipe(2) fills the two descriptors, owned here from then on.
        assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
        let [r, w] = fds.map(|fd| unsafe { std::os::fd::OwnedFd::from_raw_fd(fd) });
        // SAFETY: a query on an open descriptor.
        let size =
            |fd: &std::os::fd::OwnedFd| unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_GETPIPE_SZ) };
        assert_eq!(size(&r), 64 << 10);
        assert_eq!(widen_pipe(&w), Some(PIPE_BYTES));
        assert_eq!(size(&r) as usize, PIPE_BYTES);
        // SAFETY: as above; a larger size than 1 MiB needs privileges, and may be refused.
        unsafe {
            libc::fcntl(
                r.as_raw_fd(),
                libc::F_SETPIPE_SZ,
                2 * PIPE_BYTES as libc::c_int,
            )
        };
        let wide = size(&r) as usize;
        assert!(wide >= PIPE_BYTES);
        assert_eq!(widen_pipe(&r), Some(wide));
        let file = tempfile::tempfile().unwrap();
        assert_eq!(widen_pipe(&file), None);
    }

    // A frame goes out in one vectored write where the output takes it whole, and in order
    // where it takes a few bytes at a time (a full pipe, a slow reader).
    #[test]
    fn planes_are_written_whole_and_in_order_whatever_each_write_takes() {
        struct Few(Vec<u8>);
        impl Write for Few {
            fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
                let n = buf.len().min(3);
                self.0.extend_from_slice(&buf[..n]);
                Ok(n)
            }
            fn flush(&mut self) -> std::io::Result<()> {
                Ok(())
            }
        }
        let f = VideoFormat::y4m("YUV4MPEG2 W2 H2 C420jpeg").unwrap();
        let planes = [b"abcd".to_vec(), b"e".to_vec(), b"f".to_vec()];
        let want = b"YUV4MPEG2 W2 H2 C420jpeg\nFRAME\nabcdefFRAME\nabcdef".to_vec();
        let mut few = Few(Vec::new());
        let mut w = VideoWriter::new(&mut few, &f);
        w.planes(&planes).unwrap();
        w.planes(&planes).unwrap();
        assert_eq!(few.0, want);
        let mut whole = Vec::new();
        let mut w = VideoWriter::new(&mut whole, &f);
        w.planes(&planes).unwrap();
        w.planes(&planes).unwrap();
        assert_eq!(whole, want);
        let raw = VideoFormat::raw(2, 1, "gray").unwrap();
        let mut out = Vec::new();
        VideoWriter::new(&mut out, &raw)
            .planes(&[b"xy".to_vec()])
            .unwrap();
        assert_eq!(out, b"xy");
    }

    #[test]
    fn writer_repeats_the_y4m_header_once() {
        let f = VideoFormat::y4m("YUV4MPEG2 W1 H1 Cmono").unwrap();
        let mut out = Vec::new();
        let mut w = VideoWriter::new(&mut out, &f);
        w.frame(b"a").unwrap();
        w.frame(b"b").unwrap();
        assert_eq!(out, b"YUV4MPEG2 W1 H1 Cmono\nFRAME\naFRAME\nb");
    }
}
