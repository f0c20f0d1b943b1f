//! Images: decoded by the `image` crate into 8- or 16-bit interleaved samples (gray,
//! gray+alpha, RGB, RGBA; palettes and sub-byte depths expanded), and encoded back with the
//! same layout in the format the output's extension names, through an atomic `PendingFile`.

use std::io::{BufWriter, Cursor, Write};
use std::path::Path;

use anyhow::{anyhow, bail, Context, Result};
use image::{DynamicImage, ImageFormat};

use super::output::PendingFile;

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

/// The largest decoded image gpukit accepts, in bytes (a guard against decompression bombs).
const MAX_DECODED_BYTES: u64 = 8 << 30;

/// Reads and decodes an image; the format comes from the file's content. Errors name the file.
pub fn load(path: &Path) -> Result<Image> {
    let name = path.display();
    let bytes = std::fs::read(path).with_context(|| format!("{name}: cannot read"))?;
    // The content decides the format; the extension only for formats without a signature (TGA).
    decode_as(&bytes, ImageFormat::from_path(path).ok()).with_context(|| format!("{name}"))
}

/// Decodes an image from memory; the format comes from the content.
pub fn decode(bytes: &[u8]) -> Result<Image> {
    decode_as(bytes, None)
}

fn decode_as(bytes: &[u8], fallback: Option<ImageFormat>) -> Result<Image> {
    if bytes.is_empty() {
        bail!("empty file");
    }
    let mut reader = image::ImageReader::new(Cursor::new(bytes));
    if let Some(f) = fallback {
        reader.set_format(f);
    }
    let mut reader = reader.with_guessed_format().context("reading the header")?;
    if reader.format().is_none() {
        bail!("not an image gpukit can read (PNG, JPEG, WebP, TIFF, BMP, GIF, PNM, TGA, QOI, ICO)");
    }
    let mut limits = image::Limits::default();
    limits.max_alloc = Some(MAX_DECODED_BYTES);
    reader.limits(limits);
    let img = reader.decode().map_err(|e| anyhow!("cannot decode: {e}"))?;
    Image::from_dynamic(img)
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

/// Reads an image's header without decoding its pixels, so a batch can be checked before
/// any work starts. Errors name the file.
pub fn probe(path: &Path) -> Result<Header> {
    let name = path.display();
    let probe = || -> Result<Header> {
        let file = std::fs::File::open(path).context("cannot read")?;
        if file.metadata().context("cannot read")?.len() == 0 {
            bail!("empty file");
        }
        let reader = image::ImageReader::new(std::io::BufReader::new(file))
            .with_guessed_format()
            .context("reading the header")?;
        if reader.format().is_none() {
            bail!("not an image gpukit can read (PNG, JPEG, WebP, TIFF, BMP, GIF, PNM, TGA, QOI, ICO)");
        }
        let decoder = reader
            .into_decoder()
            .map_err(|e| anyhow!("cannot decode: {e}"))?;
        let (width, height) = image::ImageDecoder::dimensions(&decoder);
        let color = image::ImageDecoder::color_type(&decoder);
        let channels = color.channel_count();
        let bit_depth = 8 * u32::from(color.bytes_per_pixel() / channels);
        if !matches!(bit_depth, 8 | 16) {
            bail!("{color:?} images (floating point) are not supported; gpukit takes 8- and 16-bit images");
        }
        Ok(Header {
            width,
            height,
            channels,
            bit_depth,
        })
    };
    probe().with_context(|| format!("{name}"))
}

/// The format an output path's extension names; PNG for no or an unknown extension is not
/// guessed: an unknown extension is a usage error, so a typo never writes a surprise format.
pub fn output_format(path: &Path) -> Result<ImageFormat> {
    let ext = path.extension().and_then(|e| e.to_str()).unwrap_or("");
    if ext.is_empty() {
        return Ok(ImageFormat::Png);
    }
    match ImageFormat::from_extension(ext) {
        Some(f) if f.writing_enabled() && f != ImageFormat::Avif => Ok(f),
        _ => Err(crate::UsageError(format!(
            "{}: no encoder for .{ext} (use .png, .tif, .webp, .bmp, .jpg, .pnm, .tga, .qoi, .gif, .ico)",
            path.display()
        ))
        .into()),
    }
}

/// Checks that `format` can store an image of this layout without changing it.
pub fn check_layout(path: &Path, format: ImageFormat, channels: u8, bit_depth: u32) -> Result<()> {
    let (alpha, sixteen) = (channels == 2 || channels == 4, bit_depth == 16);
    let problem = match format {
        ImageFormat::Png | ImageFormat::Tiff => None,
        ImageFormat::Jpeg if alpha || sixteen => {
            Some("JPEG stores neither alpha nor 16-bit samples")
        }
        ImageFormat::Pnm if alpha => Some("PNM stores no alpha"),
        ImageFormat::Bmp
        | ImageFormat::Tga
        | ImageFormat::Ico
        | ImageFormat::Gif
        | ImageFormat::Qoi
        | ImageFormat::WebP
            if sixteen =>
        {
            Some("this format stores only 8-bit samples")
        }
        ImageFormat::Qoi if channels < 3 => Some("QOI stores only RGB and RGBA"),
        ImageFormat::WebP | ImageFormat::Gif | ImageFormat::Ico if channels < 3 => {
            Some("this format stores only colour images")
        }
        _ => None,
    };
    match problem {
        Some(p) => bail!(
            "{}: cannot keep the input's layout ({p}); use .png or .tif",
            path.display()
        ),
        None => Ok(()),
    }
}

/// Encodes `img` as `format` into `w`. PNG uses adaptive filtering with fast deflate: files
/// close to zlib's default size at a fraction of its time.
pub fn encode(img: Image, format: ImageFormat, w: &mut dyn Write) -> Result<()> {
    let dynamic = img.into_dynamic();
    let mut w = BufWriter::new(w);
    match format {
        ImageFormat::Png => {
            let encoder = image::codecs::png::PngEncoder::new_with_quality(
                &mut w,
                image::codecs::png::CompressionType::Fast,
                image::codecs::png::FilterType::Adaptive,
            );
            dynamic.write_with_encoder(encoder)?;
        }
        _ => {
            // write_to needs Seek for some formats (TIFF): encode in memory.
            let mut buf = Cursor::new(Vec::new());
            dynamic.write_to(&mut buf, format)?;
            w.write_all(buf.get_ref())?;
        }
    }
    w.flush()?;
    Ok(())
}

/// Encodes `img` and writes it to `path` atomically, in the format its extension names.
pub fn save(path: &Path, img: Image) -> Result<()> {
    let format = output_format(path)?;
    check_layout(path, format, img.channels, img.bit_depth())?;
    let pending = PendingFile::create(path)?;
    save_to(pending, format, img)
}

/// Encodes into an already created output (so the path was checked before the work).
pub fn save_to(pending: PendingFile, format: ImageFormat, img: Image) -> Result<()> {
    // A failed write is named by the output itself; only the encoder's own errors get this.
    let name = pending.path().display().to_string();
    pending
        .commit_with(|w| encode(img, format, w).with_context(|| format!("{name}: encoding failed")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn png_round_trips_every_layout() {
        for channels in 1..=4u8 {
            let n = 5 * 3 * channels as usize;
            let a = Image::new_u8(
                5,
                3,
                channels,
                (0..n).map(|i| (i * 37 % 256) as u8).collect(),
            );
            let b = Image::new_u16(
                5,
                3,
                channels,
                (0..n).map(|i| (i * 4099 % 65536) as u16).collect(),
            );
            for img in [a, b] {
                let mut buf = Vec::new();
                encode(img.clone(), ImageFormat::Png, &mut buf).unwrap();
                assert_eq!(decode(&buf).unwrap(), img);
            }
        }
    }

    #[test]
    fn bad_bytes_are_clear_errors() {
        assert_eq!(decode(b"").unwrap_err().to_string(), "empty file");
        let e = decode(b"hello, not an image").unwrap_err();
        assert!(
            e.to_string().starts_with("not an image gpukit can read"),
            "{e}"
        );
    }

    #[test]
    fn output_layout_rules() {
        let p = Path::new("x.jpg");
        assert!(check_layout(p, ImageFormat::Jpeg, 3, 8).is_ok());
        assert!(check_layout(p, ImageFormat::Jpeg, 4, 8).is_err());
        assert!(output_format(Path::new("x.png")).is_ok());
        assert!(output_format(Path::new("x.nope")).is_err());
    }
}
