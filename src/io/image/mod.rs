//! Images: decoded into 8- or 16-bit interleaved samples (gray, gray+alpha, RGB, RGBA;
//! palettes and sub-byte depths expanded), and encoded back with the same layout in the format
//! the output's extension names, through an atomic `PendingFile`. The metadata (`io::metadata`)
//! is read with the pixels and written where the format holds it.
//!
//! In floors, each file using only those below it: this file, the types (`Image`, `Header`,
//! `Decoded`, the limits and read options) and `recycle` (sample buffers a batch hands back for
//! the next image); `stream` (where each image on a byte stream ends),
//! `orientation` (pixels turned upright by the EXIF orientation), `tiff` (TIFF's layouts) and
//! `formats` (the PNG, JPEG, GIF decoders and the image crate's others); `decode` (which decoder
//! an input needs, its header, its frame count, one image decoded); `frames` (every frame of an
//! input, and the images on stdin decoded ahead); `read` (inputs: files, pipes, stdin, checked
//! against the limits before their pixels are decoded); `write` (encoders and saving).

use anyhow::{bail, Result};
use image::DynamicImage;

use super::jpeg::Subsampling;
use super::metadata::Metadata;

mod decode;
mod formats;
mod frames;
mod orientation;
mod read;
pub mod recycle;
pub mod stream;
mod tiff;
mod write;

pub use decode::{decode, decode_with};
pub use frames::Frames;
pub use orientation::orient;
pub use read::{input_name, is_regular_file, is_stdin, load, load_with, probe, probe_with, Source};
pub use write::{
    check_layout, encode, encode_with, output_format, save, save_jpeg_to, save_to, save_to_with,
    write_jpeg_with, write_png_with, WriteOptions,
};

/// Interleaved samples, row-major, `channels` per pixel.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Samples {
    U8(Vec<u8>),
    U16(Vec<u16>),
}

/// A decoded image. `channels` is 1 (gray), 2 (gray+alpha), 3 (RGB) or 4 (RGBA).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Image {
    pub width: u32,
    pub height: u32,
    pub channels: u8,
    pub samples: Samples,
}

impl Image {
    pub fn new_u8(width: u32, height: u32, channels: u8, data: Vec<u8>) -> Image {
        assert_eq!(
            data.len(),
            width as usize * height as usize * channels as usize
        );
        Image {
            width,
            height,
            channels,
            samples: Samples::U8(data),
        }
    }

    pub fn new_u16(width: u32, height: u32, channels: u8, data: Vec<u16>) -> Image {
        assert_eq!(
            data.len(),
            width as usize * height as usize * channels as usize
        );
        Image {
            width,
            height,
            channels,
            samples: Samples::U16(data),
        }
    }

    /// 8 or 16.
    pub fn bit_depth(&self) -> u32 {
        match self.samples {
            Samples::U8(_) => 8,
            Samples::U16(_) => 16,
        }
    }

    /// The largest sample value: 255 or 65535.
    pub fn max_value(&self) -> u32 {
        (1 << self.bit_depth()) - 1
    }

    pub fn has_alpha(&self) -> bool {
        self.channels == 2 || self.channels == 4
    }

    pub fn pixels(&self) -> usize {
        self.width as usize * self.height as usize
    }

    /// The samples' size in bytes.
    pub fn samples_bytes(&self) -> u64 {
        self.pixels() as u64 * u64::from(self.channels) * u64::from(self.bit_depth() / 8)
    }

    /// A short description: "640x480 RGBA 8-bit".
    pub fn describe(&self) -> String {
        let layout = match self.channels {
            1 => "gray",
            2 => "gray+alpha",
            3 => "RGB",
            _ => "RGBA",
        };
        format!(
            "{}x{} {layout} {}-bit",
            self.width,
            self.height,
            self.bit_depth()
        )
    }

    fn from_dynamic(img: DynamicImage) -> Result<Image> {
        let (w, h) = (img.width(), img.height());
        Ok(match img {
            DynamicImage::ImageLuma8(b) => Image::new_u8(w, h, 1, b.into_raw()),
            DynamicImage::ImageLumaA8(b) => Image::new_u8(w, h, 2, b.into_raw()),
            DynamicImage::ImageRgb8(b) => Image::new_u8(w, h, 3, b.into_raw()),
            DynamicImage::ImageRgba8(b) => Image::new_u8(w, h, 4, b.into_raw()),
            DynamicImage::ImageLuma16(b) => Image::new_u16(w, h, 1, b.into_raw()),
            DynamicImage::ImageLumaA16(b) => Image::new_u16(w, h, 2, b.into_raw()),
            DynamicImage::ImageRgb16(b) => Image::new_u16(w, h, 3, b.into_raw()),
            DynamicImage::ImageRgba16(b) => Image::new_u16(w, h, 4, b.into_raw()),
            other => bail!(
                "{:?} images (floating point) are not supported; gpukit takes 8- and 16-bit images",
                other.color()
            ),
        })
    }

    fn into_dynamic(self) -> DynamicImage {
        let (w, h) = (self.width, self.height);
        let bad = "sample count matches the dimensions (checked in Image::new_*)";
        match (self.channels, self.samples) {
            (1, Samples::U8(d)) => {
                DynamicImage::ImageLuma8(image::ImageBuffer::from_raw(w, h, d).expect(bad))
            }
            (2, Samples::U8(d)) => {
                DynamicImage::ImageLumaA8(image::ImageBuffer::from_raw(w, h, d).expect(bad))
            }
            (3, Samples::U8(d)) => {
                DynamicImage::ImageRgb8(image::ImageBuffer::from_raw(w, h, d).expect(bad))
            }
            (_, Samples::U8(d)) => {
                DynamicImage::ImageRgba8(image::ImageBuffer::from_raw(w, h, d).expect(bad))
            }
            (1, Samples::U16(d)) => {
                DynamicImage::ImageLuma16(image::ImageBuffer::from_raw(w, h, d).expect(bad))
            }
            (2, Samples::U16(d)) => {
                DynamicImage::ImageLumaA16(image::ImageBuffer::from_raw(w, h, d).expect(bad))
            }
            (3, Samples::U16(d)) => {
                DynamicImage::ImageRgb16(image::ImageBuffer::from_raw(w, h, d).expect(bad))
            }
            (_, Samples::U16(d)) => {
                DynamicImage::ImageRgba16(image::ImageBuffer::from_raw(w, h, d).expect(bad))
            }
        }
    }
}

/// Limits an image's header is checked against before any pixel is decoded, so that a
/// decompression bomb (a few kilobytes declaring gigapixels) is refused in milliseconds. The
/// byte limit also caps what the decoders may allocate.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DecodeLimits {
    pub max_width: u32,
    pub max_height: u32,
    /// The decoded samples' size: width x height x channels x bytes per sample.
    pub max_bytes: u64,
}

impl DecodeLimits {
    /// The command line's defaults (docs/cli.md): any side up to 1,048,576 pixels, and 2 GiB
    /// of decoded samples (a 23170x23170 RGBA 8-bit image, or 16384x16384 RGBA 16-bit).
    pub const DEFAULT: DecodeLimits = DecodeLimits {
        max_width: 1 << 20,
        max_height: 1 << 20,
        max_bytes: 2 << 30,
    };

    /// The tighter of two limits (the user's and what an engine can take).
    pub fn min(self, other: DecodeLimits) -> DecodeLimits {
        DecodeLimits {
            max_width: self.max_width.min(other.max_width),
            max_height: self.max_height.min(other.max_height),
            max_bytes: self.max_bytes.min(other.max_bytes),
        }
    }

    /// Checks a header against the limits.
    pub fn check(&self, h: &Header) -> Result<()> {
        if h.width > self.max_width || h.height > self.max_height {
            bail!(
                "{}x{} pixels is over the limit of {}x{}",
                h.width,
                h.height,
                self.max_width,
                self.max_height
            );
        }
        let bytes = h.decoded_bytes();
        if bytes > self.max_bytes {
            bail!(
                "{}x{} {} {}-bit would take {} decoded, over the limit of {} \
                 (--max-image-bytes or GPUKIT_MAX_IMAGE_BYTES raise it)",
                h.width,
                h.height,
                layout_name(h.channels),
                h.bit_depth,
                human_bytes(bytes),
                human_bytes(self.max_bytes)
            );
        }
        Ok(())
    }
}

impl Default for DecodeLimits {
    fn default() -> Self {
        DecodeLimits::DEFAULT
    }
}

/// Parses a size in bytes: a number with an optional binary suffix (`K`, `M`, `G`, `T`,
/// with or without `iB`; `B` alone for bytes), as `--max-image-bytes` takes it.
pub fn parse_byte_size(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let unit = unit.trim().to_ascii_lowercase();
    let shift = match unit.trim_end_matches("ib").trim_end_matches('b') {
        "" => 0,
        "k" => 10,
        "m" => 20,
        "g" => 30,
        "t" => 40,
        _ => return Err(format!("{s:?}: expected a size like 512MiB or 4GiB")),
    };
    let v: f64 = num
        .parse()
        .map_err(|_| format!("{s:?}: expected a size like 512MiB or 4GiB"))?;
    let bytes = v * (1u64 << shift) as f64;
    if bytes > u64::MAX as f64 {
        return Err(format!("{s:?}: too large: at most 16 EiB (16777216TiB)"));
    }
    if bytes < 1.0 {
        return Err(format!("{s:?}: must be at least one byte"));
    }
    Ok(bytes as u64)
}

/// A size in bytes as a message gives it: in bytes under 1 KiB, else in KiB, MiB or GiB to
/// a tenth (never "0.0 MiB").
pub(crate) fn human_bytes(b: u64) -> String {
    let unit = |shift: u32, name: &str| format!("{:.1} {name}", b as f64 / (1u64 << shift) as f64);
    if b == 1 {
        "1 byte".into()
    } else if b < 1 << 10 {
        format!("{b} bytes")
    } else if b < 1 << 20 {
        unit(10, "KiB")
    } else if b < 1 << 30 {
        unit(20, "MiB")
    } else {
        unit(30, "GiB")
    }
}

pub(crate) fn layout_name(channels: u8) -> &'static str {
    match channels {
        1 => "gray",
        2 => "gray+alpha",
        3 => "RGB",
        _ => "RGBA",
    }
}

/// How images are read.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ReadOptions {
    pub limits: DecodeLimits,
    /// Accept truncated or corrupt images (bad checksums, damaged entropy-coded data) as far
    /// as they decode, with a warning, instead of refusing them.
    pub allow_damaged: bool,
}

/// A decoded image, its metadata, and what was wrong with it when damage was allowed.
#[derive(Debug)]
pub struct Decoded {
    pub image: Image,
    /// Set when the file was damaged and `allow_damaged` let it through: the problem.
    pub damage: Option<String>,
    pub metadata: Metadata,
    /// A JPEG's quality, estimated from its luminance quantisation table
    /// ([`metadata::estimate_quality`]): the default when it is written as JPEG again.
    pub jpeg_quality: Option<u8>,
    /// A YCbCr JPEG's chroma subsampling: the default when it is written as JPEG again.
    pub jpeg_subsampling: Option<Subsampling>,
}

/// What an image file holds, read from its header alone: the layout `load` decodes it to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Header {
    pub width: u32,
    pub height: u32,
    /// 1 (gray), 2 (gray+alpha), 3 (RGB) or 4 (RGBA), palettes expanded.
    pub channels: u8,
    /// 8 or 16.
    pub bit_depth: u32,
}

impl Header {
    /// The decoded samples' size in bytes.
    pub fn decoded_bytes(&self) -> u64 {
        u64::from(self.width)
            * u64::from(self.height)
            * u64::from(self.channels)
            * u64::from(self.bit_depth / 8)
    }
}

/// The most bytes one input may take: no image format compresses below a bit per pixel...
/// except PNG, far: the decoded limit plus room for metadata.
pub(super) fn read_cap(opts: &ReadOptions) -> u64 {
    opts.limits.max_bytes.saturating_add(64 << 20)
}

/// A decoder error as one line; an early end of the data is called what it is.
pub(super) fn describe_io(e: &std::io::Error, format: &str) -> String {
    if e.kind() == std::io::ErrorKind::UnexpectedEof {
        format!("truncated {format}: the data ends early")
    } else {
        format!("cannot decode the {format}: {e}")
    }
}
