//! Writing images: the format an output's extension names, whether it keeps the image's
//! layout, the encoders (PNG, gpukit's JPEG, lossless WebP, TIFF, the image crate's others)
//! with the metadata each format holds, and saving through an atomic `PendingFile`.

use std::io::{BufWriter, Cursor, Write};
use std::path::Path;

use anyhow::{anyhow, bail, Context, Result};
use image::ImageFormat;

use super::{Image, Samples};
use crate::io::jpeg::{self, Subsampling};
use crate::io::metadata::{self, Metadata};
use crate::io::output::PendingFile;

/// The format an output path's extension names; a path without one (`-o out`, stdin under
/// `--out-dir`, an input named without one) is PNG. An unknown extension is a usage error,
/// not PNG, so a typo never writes a surprise format.
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
        ImageFormat::Tiff if channels == 2 => Some("gpukit writes gray+alpha as PNG only"),
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
        // Its encoder would write gray+alpha as RGB, dropping the alpha.
        ImageFormat::Bmp if channels == 2 => Some("BMP stores no gray+alpha"),
        ImageFormat::WebP | ImageFormat::Gif | ImageFormat::Ico if channels < 3 => {
            Some("this format stores only colour images")
        }
        _ => None,
    };
    match problem {
        Some(p) => bail!(
            "{}: cannot keep the input's layout ({p}); use .png{}",
            path.display(),
            if format == ImageFormat::Tiff {
                ""
            } else {
                " or .tif"
            }
        ),
        None => Ok(()),
    }
}

/// How outputs are encoded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WriteOptions {
    /// JPEG quality, 1 to 100 (the IJG scale libjpeg, ImageMagick and vips use).
    pub quality: u8,
    /// PNG compression, 0 (none) to 9 (smallest): 1 is fdeflate's fast mode with every row
    /// Paeth-filtered, 2 to 9 zlib's levels with each row's filter chosen adaptively (9: or
    /// the fast mode's output where that is smaller).
    pub compression: u8,
    /// JPEG chroma subsampling (RGB only).
    pub subsampling: Subsampling,
    /// Progressive JPEG (libjpeg's default script, optimised tables).
    pub progressive: bool,
    /// JPEG Huffman tables made for the image rather than the standard's.
    pub optimize: bool,
}

impl WriteOptions {
    /// JPEG quality when the input was not a JPEG (a JPEG's own is kept, estimated).
    pub const DEFAULT_QUALITY: u8 = 90;
    /// PNG compression: chosen by measurement (docs/BENCHMARKS.md, "PNG compression").
    pub const DEFAULT_COMPRESSION: u8 = 1;
    pub const FASTEST_COMPRESSION: u8 = 1;
    pub const BEST_COMPRESSION: u8 = 9;
    /// Optimised JPEG tables by default: chosen by measurement (docs/BENCHMARKS.md, "JPEG
    /// encoder").
    pub const DEFAULT_OPTIMIZE: bool = true;
}

impl Default for WriteOptions {
    fn default() -> Self {
        WriteOptions {
            quality: WriteOptions::DEFAULT_QUALITY,
            compression: WriteOptions::DEFAULT_COMPRESSION,
            subsampling: Subsampling::DEFAULT,
            progressive: false,
            optimize: WriteOptions::DEFAULT_OPTIMIZE,
        }
    }
}

/// Encodes `img` as `format` into `w`, with no metadata and the default settings.
pub fn encode(img: Image, format: ImageFormat, w: &mut dyn Write) -> Result<()> {
    encode_with(
        img,
        format,
        &Metadata::default(),
        &WriteOptions::default(),
        w,
    )
}

/// Encodes `img` as `format` into `w`, with the metadata the format can hold: ICC, EXIF and
/// XMP in PNG, JPEG, WebP (TIFF: ICC, XMP and the EXIF orientation as its own tag), the
/// density in PNG, JPEG and TIFF, text chunks in PNG (docs/fidelity.md).
pub fn encode_with(
    img: Image,
    format: ImageFormat,
    meta: &Metadata,
    opts: &WriteOptions,
    w: &mut dyn Write,
) -> Result<()> {
    if format == ImageFormat::Ico && (img.width > 256 || img.height > 256) {
        bail!(
            "ICO stores images up to 256x256 pixels; this one is {}x{}",
            img.width,
            img.height
        );
    }
    let mut w = BufWriter::new(w);
    if format == ImageFormat::Png {
        write_png(img, meta, opts.compression, &mut w)?;
    } else if format == ImageFormat::Pnm {
        write_pnm(&img, &mut w)?;
    } else {
        // Some encoders need Seek (TIFF), JPEG's XMP is inserted afterwards: in memory.
        let mut buf = Vec::new();
        match format {
            ImageFormat::Jpeg => write_jpeg(&img, meta, opts, &mut buf)?,
            ImageFormat::WebP => write_webp(&img, meta, &mut buf)?,
            ImageFormat::Tiff => write_tiff(&img, meta, &mut Cursor::new(&mut buf))?,
            _ => img
                .into_dynamic()
                .write_to(&mut Cursor::new(&mut buf), format)?,
        }
        w.write_all(&buf)?;
    }
    w.flush()?;
    Ok(())
}

/// Gray as PGM (P5), RGB as PPM (P6), 8- or 16-bit (maxval 65535, samples big-endian), as
/// netpbm writes them: the image crate's encoder writes PAM (P7) for every layout unless told
/// a subtype, which it has only for 8 bits, and many PPM readers refuse P7.
fn write_pnm(img: &Image, w: &mut dyn Write) -> Result<()> {
    let magic = match img.channels {
        1 => "P5",
        3 => "P6",
        _ => bail!("PNM stores no alpha"),
    };
    let maxval = (1u32 << img.bit_depth()) - 1;
    write!(w, "{magic}\n{} {}\n{maxval}\n", img.width, img.height)?;
    match &img.samples {
        Samples::U8(d) => w.write_all(d)?,
        Samples::U16(d) => {
            let bytes: Vec<u8> = d.iter().flat_map(|v| v.to_be_bytes()).collect();
            w.write_all(&bytes)?;
        }
    }
    Ok(())
}

/// Level 9 writes the smaller of zlib's level 9 and the fast mode: on photos fdeflate's fast
/// mode, tuned for PNG, can beat zlib's best (docs/BENCHMARKS.md, "PNG compression").
fn write_png(mut img: Image, meta: &Metadata, level: u8, w: &mut dyn Write) -> Result<()> {
    // PNG stores 16-bit samples big-endian: swapped in place, in the image this owns, rather
    // than copied (a fresh buffer of twice the samples).
    if let Samples::U16(d) = &mut img.samples {
        d.iter_mut().for_each(|v| *v = v.to_be());
    }
    let data: &[u8] = match &img.samples {
        Samples::U8(d) => d,
        Samples::U16(d) => bytemuck::cast_slice(d),
    };
    if level < WriteOptions::BEST_COMPRESSION {
        return write_png_level(&img, data, meta, level, w);
    }
    let (mut best, mut fast) = (Vec::new(), Vec::new());
    write_png_level(&img, data, meta, WriteOptions::BEST_COMPRESSION, &mut best)?;
    write_png_level(
        &img,
        data,
        meta,
        WriteOptions::FASTEST_COMPRESSION,
        &mut fast,
    )?;
    w.write_all(if best.len() <= fast.len() {
        &best
    } else {
        &fast
    })?;
    Ok(())
}

/// Writes `img`'s layout with `data`, its samples as PNG stores them.
fn write_png_level(
    img: &Image,
    data: &[u8],
    meta: &Metadata,
    level: u8,
    w: &mut dyn Write,
) -> Result<()> {
    use png::{Compression, DeflateCompression, Filter};
    let sixteen = matches!(img.samples, Samples::U16(_));
    let info = png_info(img.width, img.height, img.channels, sixteen, meta);
    let mut encoder = png::Encoder::with_info(w, info)?;
    match level {
        0 => encoder.set_compression(Compression::NoCompression),
        // Every row Paeth-filtered: what the adaptive choice picks for nearly every row of
        // a photo or a blurred image, in 0.8x its time (docs/BENCHMARKS.md, "PNG decode and
        // encode per image").
        1 => {
            encoder.set_deflate_compression(DeflateCompression::FdeflateUltraFast);
            encoder.set_filter(Filter::Paeth);
        }
        n => {
            encoder.set_deflate_compression(DeflateCompression::Level(n.min(9)));
            encoder.set_filter(Filter::Adaptive);
        }
    }
    let mut writer = encoder.write_header()?;
    writer.write_image_data(data)?;
    writer.finish()?;
    Ok(())
}

/// The PNG header and ancillary chunks of an image of this layout with `meta`.
fn png_info(
    width: u32,
    height: u32,
    channels: u8,
    sixteen: bool,
    meta: &Metadata,
) -> png::Info<'_> {
    use png::{BitDepth, ColorType};
    let mut info = png::Info::with_size(width, height);
    info.color_type = match channels {
        1 => ColorType::Grayscale,
        2 => ColorType::GrayscaleAlpha,
        3 => ColorType::Rgb,
        _ => ColorType::Rgba,
    };
    info.bit_depth = if sixteen {
        BitDepth::Sixteen
    } else {
        BitDepth::Eight
    };
    info.icc_profile = meta.icc_profile.as_deref().map(Into::into);
    info.exif_metadata = meta.exif.as_deref().map(Into::into);
    info.pixel_dims = meta.density.map(metadata::Density::to_png);
    info.uncompressed_latin1_text = meta.text.latin1.clone();
    info.compressed_latin1_text = meta.text.compressed.clone();
    info.utf8_text = meta.text.utf8.clone();
    if let Some(xmp) = meta
        .xmp
        .as_deref()
        .and_then(|x| std::str::from_utf8(x).ok())
    {
        info.utf8_text.push(png::text_metadata::ITXtChunk::new(
            metadata::PNG_XMP_KEYWORD,
            xmp,
        ));
    }
    info
}

/// Writes a PNG file of `width` x `height` x `channels` (16-bit samples with `sixteen`) with
/// `meta` around `zlib`, its image data already compressed (the GPU's, ops/encode/png): the
/// chunks as the png crate writes them at level 1, the data split into IDAT chunks where
/// it does.
pub fn write_png_with(
    width: u32,
    height: u32,
    channels: u8,
    sixteen: bool,
    meta: &Metadata,
    zlib: &[u8],
    w: &mut dyn Write,
) -> Result<()> {
    /// The png crate's `MAX_IDAT_CHUNK_LEN`.
    const MAX_IDAT: usize = (u32::MAX >> 1) as usize;
    let info = png_info(width, height, channels, sixteen, meta);
    let mut writer = png::Encoder::with_info(w, info)?.write_header()?;
    for chunk in zlib.chunks(MAX_IDAT) {
        writer.write_chunk(png::chunk::IDAT, chunk)?;
    }
    writer.finish()?;
    Ok(())
}

/// The 8-bit samples of an image the layout check let through to an 8-bit format.
fn bytes_u8(img: &Image) -> Result<&[u8]> {
    match &img.samples {
        Samples::U8(d) => Ok(d),
        Samples::U16(_) => bail!("this format stores only 8-bit samples"),
    }
}

fn write_jpeg(img: &Image, meta: &Metadata, opts: &WriteOptions, out: &mut Vec<u8>) -> Result<()> {
    write_jpeg_with(img.channels, meta, opts, out, |o, m, out| {
        let (w, h, c) = (img.width, img.height, img.channels);
        jpeg::encode(bytes_u8(img)?, w, h, c, o, m, out).map_err(|e| anyhow!(e))
    })
}

/// A JPEG file of an image of `channels` with `meta` as [`encode_with`] writes it, the frame
/// made by `encode` (the CPU encoder, or the GPU's in src/ops/encode/: the same bytes).
pub fn write_jpeg_with(
    channels: u8,
    meta: &Metadata,
    opts: &WriteOptions,
    out: &mut Vec<u8>,
    encode: impl FnOnce(&jpeg::EncodeOptions, &jpeg::Markers, &mut Vec<u8>) -> Result<()>,
) -> Result<()> {
    use metadata::DensityUnit;
    if channels != 1 && channels != 3 {
        bail!("JPEG stores neither alpha nor 16-bit samples");
    }
    let mut app: Vec<(u8, Vec<u8>)> = Vec::new();
    if let Some(e) = &meta.exif {
        metadata::jpeg_segment_fits("EXIF", b"Exif\0\0".len(), e.len()).map_err(|e| anyhow!(e))?;
        app.push((0xE1, [&b"Exif\0\0"[..], e].concat()));
    }
    if let Some(p) = &meta.icc_profile {
        // APP2 segments of at most 65519 bytes of profile, numbered from 1 (ICC.1 B.4).
        const CHUNK: usize = 65533 - 14;
        let count = p.len().div_ceil(CHUNK);
        if count > 255 {
            bail!(
                "ICC profile too large for JPEG ({} bytes; at most {})",
                p.len(),
                CHUNK * 255
            );
        }
        for (i, chunk) in p.chunks(CHUNK).enumerate() {
            let head = [&b"ICC_PROFILE\0"[..], &[(i + 1) as u8, count as u8]].concat();
            app.push((0xE2, [&head[..], chunk].concat()));
        }
    }
    let density = match meta.density.and_then(metadata::Density::to_jfif) {
        Some((unit, x, y)) => {
            let unit = match unit {
                DensityUnit::Inch => 1,
                DensityUnit::Centimeter => 2,
                _ => 0,
            };
            (unit, x, y)
        }
        None => (0, 1, 1),
    };
    let app: Vec<(u8, &[u8])> = app.iter().map(|(m, p)| (*m, &p[..])).collect();
    let markers = jpeg::Markers { density, app: &app };
    let options = jpeg::EncodeOptions {
        quality: opts.quality.clamp(1, 100),
        subsampling: opts.subsampling,
        progressive: opts.progressive,
        optimize: opts.optimize,
    };
    encode(&options, &markers, out)?;
    if let Some(xmp) = &meta.xmp {
        metadata::jpeg_insert_xmp(out, xmp).map_err(|e| anyhow!(e))?;
    }
    Ok(())
}

/// Lossless WebP (the only kind the image crate's encoder writes).
fn write_webp(img: &Image, meta: &Metadata, out: &mut Vec<u8>) -> Result<()> {
    use image_webp::ColorType;
    let color = match img.channels {
        1 => ColorType::L8,
        2 => ColorType::La8,
        3 => ColorType::Rgb8,
        _ => ColorType::Rgba8,
    };
    let mut encoder = image_webp::WebPEncoder::new(&mut *out);
    if let Some(p) = &meta.icc_profile {
        encoder.set_icc_profile(p.clone());
    }
    if let Some(e) = &meta.exif {
        encoder.set_exif_metadata(e.clone());
    }
    if let Some(x) = &meta.xmp {
        encoder.set_xmp_metadata(x.clone());
    }
    encoder.encode(bytes_u8(img)?, img.width, img.height, color)?;
    Ok(())
}

/// Uncompressed TIFF, as the image crate writes it, with the ICC profile, XMP, the resolution
/// and the EXIF orientation in TIFF's own tags.
fn write_tiff(img: &Image, meta: &Metadata, w: &mut Cursor<&mut Vec<u8>>) -> Result<()> {
    use tiff::encoder::{colortype as ct, TiffEncoder, TiffValue};
    fn write<C: ct::ColorType>(
        mut encoder: TiffEncoder<&mut Cursor<&mut Vec<u8>>>,
        img: &Image,
        meta: &Metadata,
        data: &[C::Inner],
    ) -> tiff::TiffResult<()>
    where
        [C::Inner]: TiffValue,
    {
        use tiff::encoder::Rational;
        use tiff::tags::Tag;
        let mut image = encoder.new_image::<C>(img.width, img.height)?;
        let dir = image.encoder();
        if let Some((unit, x, y)) = meta.density.map(metadata::Density::to_tiff) {
            dir.write_tag(Tag::ResolutionUnit, unit)?;
            dir.write_tag(Tag::XResolution, Rational { n: x, d: 1 })?;
            dir.write_tag(Tag::YResolution, Rational { n: y, d: 1 })?;
        }
        if let Some(p) = &meta.icc_profile {
            dir.write_tag(Tag::IccProfile, p.as_slice())?;
        }
        if let Some(x) = &meta.xmp {
            dir.write_tag(Tag::Unknown(metadata::TIFF_TAG_XMP), x.as_slice())?;
        }
        if let Some(o) = meta.orientation() {
            dir.write_tag(Tag::Orientation, u16::from(o))?;
        }
        image.write_data(data)
    }
    let encoder = TiffEncoder::new(w)?;
    match (img.channels, &img.samples) {
        (1, Samples::U8(d)) => write::<ct::Gray8>(encoder, img, meta, d)?,
        (3, Samples::U8(d)) => write::<ct::RGB8>(encoder, img, meta, d)?,
        (4, Samples::U8(d)) => write::<ct::RGBA8>(encoder, img, meta, d)?,
        (1, Samples::U16(d)) => write::<ct::Gray16>(encoder, img, meta, d)?,
        (3, Samples::U16(d)) => write::<ct::RGB16>(encoder, img, meta, d)?,
        (4, Samples::U16(d)) => write::<ct::RGBA16>(encoder, img, meta, d)?,
        _ => bail!("gpukit writes no gray+alpha TIFF; use .png"),
    }
    Ok(())
}

/// Encodes `img` and writes it to `path` atomically, in the format its extension names.
pub fn save(path: &Path, img: Image) -> Result<()> {
    let format = output_format(path)?;
    check_layout(path, format, img.channels, img.bit_depth())?;
    let pending = PendingFile::create(path)?;
    save_to(pending, format, img)
}

/// Encodes into an already created output (so the path was checked before the work), with no
/// metadata and the default settings.
pub fn save_to(pending: PendingFile, format: ImageFormat, img: Image) -> Result<()> {
    save_to_with(
        pending,
        format,
        img,
        &Metadata::default(),
        &WriteOptions::default(),
    )
}

/// Encodes into an already created output with metadata and settings ([`encode_with`]).
pub fn save_to_with(
    pending: PendingFile,
    format: ImageFormat,
    img: Image,
    meta: &Metadata,
    opts: &WriteOptions,
) -> Result<()> {
    // A failed write is named by the output itself; only the encoder's own errors get this.
    let name = pending.path().display().to_string();
    pending.commit_with(|w| {
        encode_with(img, format, meta, opts, w).with_context(|| format!("{name}: encoding failed"))
    })
}

/// [`save_to_with`] for JPEG, from a borrow (the caller keeps the samples: a batch hands
/// them back for the next image).
pub fn save_jpeg_to(
    pending: PendingFile,
    img: &Image,
    meta: &Metadata,
    opts: &WriteOptions,
) -> Result<()> {
    let name = pending.path().display().to_string();
    pending.commit_with(|w| {
        let mut buf = Vec::new();
        write_jpeg(img, meta, opts, &mut buf)
            .with_context(|| format!("{name}: encoding failed"))?;
        Ok(w.write_all(&buf)?)
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn no_extension_is_png_and_an_unknown_one_a_usage_error() {
        use super::output_format;
        use image::ImageFormat;
        use std::path::Path;
        assert_eq!(
            output_format(Path::new("o/noext")).unwrap(),
            ImageFormat::Png
        );
        assert_eq!(
            output_format(Path::new("o/x.JPG")).unwrap(),
            ImageFormat::Jpeg
        );
        let e = output_format(Path::new("o/x.pdfx")).unwrap_err();
        assert!(e.downcast_ref::<crate::UsageError>().is_some(), "{e}");
    }

    use super::*;
    use crate::io::image::decode;

    // The image crate's encoder wrote .ppm and .pgm as PAM (P7), which many PPM readers
    // refuse. Bytes written out here from the format's definition (netpbm's P5 and P6).
    #[test]
    fn ico_over_256_pixels_is_refused_with_its_limit() {
        for (w, h) in [(257, 1), (1, 300)] {
            let img = Image::new_u8(w, h, 4, vec![7; (w * h * 4) as usize]);
            let e = encode(img, ImageFormat::Ico, &mut Vec::new()).unwrap_err();
            let want = format!("ICO stores images up to 256x256 pixels; this one is {w}x{h}");
            assert_eq!(e.to_string(), want);
        }
        let img = Image::new_u8(256, 256, 4, vec![7; 256 * 256 * 4]);
        assert!(encode(img, ImageFormat::Ico, &mut Vec::new()).is_ok());
    }

    #[test]
    fn pnm_is_written_as_p5_and_p6_in_8_and_16_bits() {
        let gray = Image::new_u8(3, 2, 1, vec![0, 1, 2, 253, 254, 255]);
        let rgb16 = Image::new_u16(1, 2, 3, vec![1, 2, 3, 0x1234, 0xfffe, 0xffff]);
        let mut want_rgb16 = b"P6\n1 2\n65535\n".to_vec();
        want_rgb16.extend([0, 1, 0, 2, 0, 3, 0x12, 0x34, 0xff, 0xfe, 0xff, 0xff]);
        for (img, want) in [
            (
                gray.clone(),
                b"P5\n3 2\n255\n\x00\x01\x02\xfd\xfe\xff".to_vec(),
            ),
            (rgb16.clone(), want_rgb16),
        ] {
            let mut buf = Vec::new();
            encode(img.clone(), ImageFormat::Pnm, &mut buf).unwrap();
            assert_eq!(buf, want);
            assert_eq!(decode(&buf).unwrap(), img, "read back");
        }
        let rgba = Image::new_u8(1, 1, 4, vec![1, 2, 3, 4]);
        assert!(encode(rgba, ImageFormat::Pnm, &mut Vec::new()).is_err());
    }

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

    /// A PNG's image data inflated: each row is its filter type, then the filtered bytes.
    fn png_filtered_rows(png: &[u8]) -> Vec<u8> {
        let (mut at, mut zlib) = (8, Vec::new());
        while at + 8 <= png.len() {
            let len = u32::from_be_bytes(png[at..at + 4].try_into().unwrap()) as usize;
            if &png[at + 4..at + 8] == b"IDAT" {
                zlib.extend_from_slice(&png[at + 8..at + 8 + len]);
            }
            at += 12 + len;
        }
        fdeflate::decompress_to_vec(&zlib).unwrap()
    }

    #[test]
    fn the_default_compression_paeth_filters_every_row() {
        // A gradient, then flat rows: every row Paeth-filtered whatever it holds
        // (docs/fidelity.md). Large enough to compress (a PNG stored raw is not filtered).
        let (w, h) = (32usize, 8usize);
        let sample = |i: usize| {
            if i < 3 * w * 4 {
                (i % 97 + i / 96) as u8
            } else {
                7
            }
        };
        let a = Image::new_u8(w as u32, h as u32, 3, (0..3 * w * h).map(sample).collect());
        let b = Image::new_u16(
            w as u32,
            h as u32,
            3,
            (0..3 * w * h).map(|i| 257 * u16::from(sample(i))).collect(),
        );
        for (img, stride) in [(a, 1 + 3 * w), (b, 1 + 6 * w)] {
            let mut png = Vec::new();
            encode(img.clone(), ImageFormat::Png, &mut png).unwrap();
            let filtered = png_filtered_rows(&png);
            assert_eq!(filtered.len(), h * stride);
            let types: Vec<u8> = filtered.chunks(stride).map(|row| row[0]).collect();
            assert_eq!(types, [4; 8], "PNG filter type 4 is Paeth");
            assert_eq!(decode(&png).unwrap(), img);
        }
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
