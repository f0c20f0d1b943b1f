//! Which decoder reads an input (from its content; the extension only for TGA), the header
//! it gives, how many frames it holds, and one image decoded by it.

use std::io::{BufRead, Cursor, Read, Seek, SeekFrom};
use std::path::Path;

use anyhow::{anyhow, bail, Context, Result};
use image::ImageFormat;

use super::formats::{
    decode_gif, decode_jpeg, decode_other, decode_png, format_name, gif_error, gif_reader,
    jpeg_decoder, other_decoder, other_header, png_header, png_reader,
};
use super::{read_cap, tiff, Decoded, Header, Image, ReadOptions};

const READABLE: &str = "PNG, JPEG, WebP, TIFF, BMP, GIF, PNM, TGA, QOI, ICO";

/// Decodes an image from memory with the default options; the format comes from the content.
pub fn decode(bytes: &[u8]) -> Result<Image> {
    decode_with(bytes, &ReadOptions::default()).map(|d| d.image)
}

/// Decodes an image from memory; the format comes from the content.
pub fn decode_with(bytes: &[u8], opts: &ReadOptions) -> Result<Decoded> {
    decode_from(bytes, Path::new(""), opts)
}

/// The container, from the content; the extension only for TGA (no signature).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Kind {
    Png,
    Jpeg,
    Other(ImageFormat),
}

pub(super) fn kind_of(bytes: &[u8], path: &Path) -> Result<Kind> {
    if bytes.is_empty() {
        bail!("empty file");
    }
    // BigTIFF (version 43) is TIFF to the tiff crate, though image's sniffing misses it.
    let bigtiff = bytes.starts_with(b"II\x2b\x00") || bytes.starts_with(b"MM\x00\x2b");
    let format = match image::guess_format(bytes) {
        _ if bigtiff => ImageFormat::Tiff,
        Ok(f) => f,
        Err(_) => match ImageFormat::from_path(path) {
            Ok(ImageFormat::Tga) => ImageFormat::Tga,
            _ if crate::io::video::is_y4m(bytes) => bail!(
                "a Y4M frame stream, not an image (`histogram FILE --per-frame` and `blur FILE \
                 -o OUT.y4m` read frame streams)"
            ),
            _ => bail!("not an image gpukit can read ({READABLE})"),
        },
    };
    Ok(match format {
        ImageFormat::Png => Kind::Png,
        ImageFormat::Jpeg => Kind::Jpeg,
        f if f.reading_enabled() => Kind::Other(f),
        f => bail!(
            "{} images are not read by gpukit ({READABLE})",
            f.extensions_str().first().unwrap_or(&"?").to_uppercase()
        ),
    })
}

/// The PNG an ICO holds as its chosen entry (the one image's ICO decoder picks: most bits
/// per pixel, then largest), if that entry is a PNG. The PNG path reads it whatever its
/// layout; image's ICO decoder takes only RGBA PNGs.
fn ico_png(bytes: &[u8]) -> Option<&[u8]> {
    let count = usize::from(u16::from_le_bytes([*bytes.get(4)?, *bytes.get(5)?]));
    let entry = |i: usize| -> Option<((u16, u32), &[u8])> {
        let e = bytes.get(6 + 16 * i..6 + 16 * (i + 1))?;
        let side = |b: u8| if b == 0 { 256u32 } else { u32::from(b) };
        let bpp = u16::from_le_bytes([e[6], e[7]]);
        let len = u32::from_le_bytes(e[8..12].try_into().ok()?) as usize;
        let at = u32::from_le_bytes(e[12..16].try_into().ok()?) as usize;
        let data = bytes.get(at..at.checked_add(len)?)?;
        Some(((bpp, side(e[0]) * side(e[1])), data))
    };
    let mut best = entry(count.checked_sub(1)?)?;
    for i in 0..count - 1 {
        let e = entry(i)?;
        if e.0 > best.0 {
            best = e;
        }
    }
    best.1.starts_with(b"\x89PNG\r\n\x1a\n").then_some(best.1)
}

/// The decoder to use and the bytes it reads (an ICO's PNG entry on its own).
pub(super) fn resolve<'a>(bytes: &'a [u8], path: &Path) -> Result<(Kind, &'a [u8])> {
    Ok(match kind_of(bytes, path)? {
        Kind::Other(ImageFormat::Ico) => match ico_png(bytes) {
            Some(png) => (Kind::Png, png),
            None => (Kind::Other(ImageFormat::Ico), bytes),
        },
        kind => (kind, bytes),
    })
}

/// The header of an image of `kind`: the layout `decode` gives one image, or
/// [`Source::frames`] gives each frame of an animation (RGBA 8-bit).
pub(super) fn header_of<R: BufRead + Seek>(
    mut r: R,
    kind: Kind,
    opts: &ReadOptions,
) -> Result<Header> {
    let rgba8 = |h: Header| Header {
        channels: 4,
        bit_depth: 8,
        ..h
    };
    Ok(match kind {
        Kind::Png => {
            let reader = png_reader(r, opts, false)?;
            let header = png_header(&reader)?;
            match png_frames(&reader) {
                1 => header,
                _ => rgba8(header),
            }
        }
        Kind::Jpeg => jpeg_decoder(r, true)?.1,
        // The tiff crate's decoder of src/io/image/tiff/ reads the layouts the image crate
        // refuses; it takes the file whole (its directories may be anywhere in it).
        Kind::Other(ImageFormat::Tiff) => {
            tiff::pages(&mut r)?;
            r.seek(SeekFrom::Start(0)).context("cannot read")?;
            let mut bytes = Vec::new();
            r.take(read_cap(opts))
                .read_to_end(&mut bytes)
                .context("cannot read")?;
            tiff::header(&bytes)?
        }
        // The logical screen: a frame's size, an animation's too.
        Kind::Other(ImageFormat::Gif) => gif_reader(r, opts)?.1,
        Kind::Other(f) => {
            let animated = f == ImageFormat::WebP && webp_frames(&mut r)? > 1;
            r.seek(SeekFrom::Start(0)).context("cannot read")?;
            let decoder = other_decoder(r, f)?;
            let header = other_header(decoder.as_ref(), f)?;
            match animated {
                true => rgba8(header),
                false => header,
            }
        }
    })
}

pub(super) fn decode_from(bytes: &[u8], path: &Path, opts: &ReadOptions) -> Result<Decoded> {
    let (kind, bytes) = resolve(bytes, path)?;
    let frames = frame_count(kind, bytes)?;
    if frames > 1 {
        bail!(multi_frame(kind, frames));
    }
    match kind {
        Kind::Png => decode_png(bytes, opts),
        Kind::Jpeg => decode_jpeg(bytes, opts),
        Kind::Other(ImageFormat::Tiff) => tiff::decode(bytes, opts),
        Kind::Other(ImageFormat::Gif) => decode_gif(bytes, opts),
        Kind::Other(f) => decode_other(bytes, f, opts),
    }
}

/// How many frames (pages of a TIFF) an image holds.
pub(super) fn frame_count(kind: Kind, bytes: &[u8]) -> Result<u32> {
    Ok(match kind {
        // A PNG that does not parse is one image, for the PNG path to say what is wrong.
        Kind::Png => {
            let mut decoder = png::Decoder::new_with_limits(
                Cursor::new(bytes),
                png::Limits { bytes: usize::MAX },
            );
            decoder.ignore_checksums(true);
            decoder.read_info().map_or(1, |r| png_frames(&r))
        }
        Kind::Jpeg => 1,
        Kind::Other(ImageFormat::Gif) => gif_frames(bytes)?,
        Kind::Other(ImageFormat::WebP) => webp_frames(&mut Cursor::new(bytes))?,
        Kind::Other(ImageFormat::Tiff) => tiff::pages(&mut Cursor::new(bytes))?.len() as u32,
        Kind::Other(_) => 1,
    })
}

/// The one line refusing an image of several frames where one image is expected.
pub(super) fn multi_frame(kind: Kind, frames: u32) -> String {
    let (what, unit) = match kind {
        Kind::Other(ImageFormat::Tiff) => ("multi-page TIFF".to_string(), "page"),
        Kind::Other(ImageFormat::WebP) => ("animated WebP".to_string(), "frame"),
        Kind::Other(f) => (format!("animated {}", format_name(f)), "frame"),
        _ => ("animated PNG".to_string(), "frame"),
    };
    format!(
        "{what} with {frames} {unit}s: not supported here, where one image is expected \
         (`gpukit histogram` counts every {unit}; to blur or compare it, split it into images \
         first)"
    )
}

pub(super) fn png_frames<R: BufRead + Seek>(reader: &png::Reader<R>) -> u32 {
    match reader.info().animation_control() {
        Some(actl) => actl.num_frames.max(1),
        None => 1,
    }
}

/// A GIF's frames, counted without decoding their pixels.
fn gif_frames(bytes: &[u8]) -> Result<u32> {
    let mut options = gif::DecodeOptions::new();
    options.skip_frame_decoding(true);
    // As gif_reader: unknown extension blocks are skipped (GIF89a), not an error.
    options.allow_unknown_blocks(true);
    let mut decoder = options.read_info(Cursor::new(bytes)).map_err(gif_error)?;
    let mut frames = 0;
    while decoder.read_next_frame().map_err(gif_error)?.is_some() {
        frames += 1;
    }
    Ok(frames)
}

fn webp_frames<R: BufRead + Seek>(r: &mut R) -> Result<u32> {
    let decoder = image_webp::WebPDecoder::new(r).map_err(|e| anyhow!("corrupt WEBP: {e}"))?;
    Ok(if decoder.is_animated() {
        decoder.num_frames()
    } else {
        1
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_bytes_are_clear_errors() {
        assert_eq!(decode(b"").unwrap_err().to_string(), "empty file");
        let e = decode(b"hello, not an image").unwrap_err();
        assert!(
            e.to_string().starts_with("not an image gpukit can read"),
            "{e}"
        );
    }
}
