//! The decoders of each format: PNG (the png crate, both checksums verified), JPEG
//! (zune-jpeg, strict), GIF (the gif crate) and the image crate's others, each reading the
//! pixels and the metadata the format holds into a `Decoded`. TIFF has its own module (tiff/).

use std::borrow::Cow;
use std::io::{BufRead, Cursor, Read, Seek};

use anyhow::{anyhow, bail, Result};
use image::{DynamicImage, ImageFormat};
use zune_core::bytestream::{ZByteReaderTrait, ZCursor};

use super::{describe_io, Decoded, Header, Image, ReadOptions};
use crate::io::metadata::{self, Metadata};

// ---- PNG: the png crate directly, with both checksums (chunk CRC, zlib Adler-32) verified ----

pub(super) fn png_reader<R: BufRead + Seek>(
    r: R,
    opts: &ReadOptions,
    ignore_checksums: bool,
) -> Result<png::Reader<R>> {
    let limit = usize::try_from(opts.limits.max_bytes).unwrap_or(usize::MAX);
    let mut decoder = png::Decoder::new_with_limits(r, png::Limits { bytes: limit });
    // The png crate skips the Adler-32 check by default; libpng makes it.
    decoder.ignore_checksums(ignore_checksums);
    decoder.set_transformations(png::Transformations::EXPAND);
    let info = decoder.read_header_info().map_err(png_error)?;
    // The layout EXPAND decodes to, from the header alone: a tRNS chunk, read later, may add
    // alpha to a palette or gray image (png_header, after read_info, knows), so this is
    // what the image takes at least.
    use png::ColorType as C;
    let h = Header {
        width: info.width,
        height: info.height,
        channels: match info.color_type {
            C::Grayscale => 1,
            C::GrayscaleAlpha => 2,
            C::Rgb | C::Indexed => 3,
            C::Rgba => 4,
        },
        bit_depth: if info.bit_depth == png::BitDepth::Sixteen {
            16
        } else {
            8
        },
    };
    opts.limits.check(&h)?;
    decoder.read_info().map_err(png_error)
}

fn png_error(e: png::DecodingError) -> anyhow::Error {
    match e {
        png::DecodingError::IoError(e) => anyhow!(describe_io(&e, "PNG")),
        png::DecodingError::LimitsExceeded => {
            anyhow!("the PNG needs more memory than the limit (--max-image-bytes raises it)")
        }
        e => anyhow!("corrupt PNG: {}", png_text(&e.to_string())),
    }
}

/// A Rust name in words: `InvalidDistanceCode` as "invalid distance code".
fn words(name: &str) -> String {
    let mut out = String::new();
    for c in name.chars() {
        if c.is_uppercase() && !out.is_empty() {
            out.push(' ');
        }
        out.extend(c.to_lowercase());
    }
    out
}

/// The png crate's message with each chunk named by its type: it writes a chunk as its Rust
/// struct (`ChunkType { type: IDAT, critical: true, ... }`), and a CRC error with both sums.
fn png_text(text: &str) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(at) = rest.find("ChunkType { type: ") {
        out.push_str(&rest[..at]);
        let after = &rest[at + "ChunkType { type: ".len()..];
        let kind = after.split([',', ' ']).next().unwrap_or_default();
        out.push_str(kind);
        rest = after.find('}').map_or("", |end| &after[end + 1..]);
    }
    out.push_str(rest);
    // fdeflate's reason, by its Rust name (`Corrupt deflate stream. WrongChecksum`).
    if let Some(reason) = out.strip_prefix("Corrupt deflate stream. ") {
        return match reason.trim() {
            "WrongChecksum" => "its compressed data fails its Adler-32 checksum".into(),
            other => format!("its compressed data is damaged ({})", words(other)),
        };
    }
    match out
        .strip_prefix("CRC error: ")
        .and_then(|t| t.split_once("while decoding "))
    {
        Some((_, chunk)) => {
            let kind = chunk.trim_end_matches('.').trim_end_matches(" chunk");
            // The article for the name of its first letter (an IDAT, an sRGB, a PLTE).
            let vowel = kind.starts_with(|c: char| "aefhilmnorsxAEFHILMNORSX".contains(c));
            format!(
                "CRC error in {} {kind} chunk",
                if vowel { "an" } else { "a" }
            )
        }
        None => out,
    }
}

pub(super) fn png_header<R: BufRead + Seek>(reader: &png::Reader<R>) -> Result<Header> {
    let info = reader.info();
    let (color, depth) = reader.output_color_type();
    Ok(Header {
        width: info.width,
        height: info.height,
        channels: color.samples() as u8,
        bit_depth: if depth == png::BitDepth::Sixteen {
            16
        } else {
            8
        },
    })
}

pub(super) fn decode_png(bytes: &[u8], opts: &ReadOptions) -> Result<Decoded> {
    let strict = png_pixels(bytes, opts, false);
    match strict {
        Ok((image, metadata, None)) => Ok(Decoded {
            image,
            damage: None,
            metadata,
            jpeg_quality: None,
            jpeg_subsampling: None,
        }),
        Err(e) if !opts.allow_damaged => Err(e),
        _ => {
            // Damaged: decode again without checksums, keeping what decodes.
            let damage = match strict {
                Err(e) => e.to_string(),
                Ok((_, _, d)) => d.unwrap_or_default(),
            };
            let (image, metadata, _) = png_pixels(bytes, opts, true)?;
            Ok(Decoded {
                image,
                damage: Some(damage),
                metadata,
                jpeg_quality: None,
                jpeg_subsampling: None,
            })
        }
    }
}

/// The pixels and the metadata, or with `lenient`, as many rows as decode (the rest zero) and
/// what stopped it.
fn png_pixels(
    bytes: &[u8],
    opts: &ReadOptions,
    lenient: bool,
) -> Result<(Image, Metadata, Option<String>)> {
    let mut reader = png_reader(Cursor::new(bytes), opts, lenient)?;
    let header = png_header(&reader)?;
    opts.limits.check(&header)?;
    let size = reader
        .output_buffer_size()
        .ok_or_else(|| anyhow!("{}x{} is too large", header.width, header.height))?;
    // 16-bit samples are decoded into the bytes of the buffer they end in, then put in this
    // machine's byte order in place.
    let sixteen = header.bit_depth == 16;
    let mut wide = vec![0u16; if sixteen { size.div_ceil(2) } else { 0 }];
    let mut narrow = vec![0u8; if sixteen { 0 } else { size }];
    let buf: &mut [u8] = match sixteen {
        true => &mut bytemuck::cast_slice_mut(&mut wide)[..size],
        false => &mut narrow,
    };
    let mut damage = None;
    if let Err(e) = reader.next_frame(buf) {
        let e = png_error(e);
        if !lenient {
            return Err(e);
        }
        damage = Some(e.to_string());
    } else if !lenient {
        // The rest of the file: trailing chunks with their checksums, and IEND.
        reader.finish().map_err(png_error)?;
    }
    // After the last chunk: text may follow the image data.
    let metadata = metadata::from_png(reader.info());
    let Header {
        width: w,
        height: h,
        channels: c,
        ..
    } = header;
    let n = w as usize * h as usize * c as usize;
    let image = if sixteen {
        wide.truncate(n);
        wide.iter_mut().for_each(|v| *v = u16::from_be(*v));
        Image::new_u16(w, h, c, wide)
    } else {
        narrow.truncate(n);
        Image::new_u8(w, h, c, narrow)
    };
    Ok((image, metadata, damage))
}

// ---- JPEG: zune-jpeg directly, strict (image's wrapper turns its strict mode off) ----

pub(super) fn jpeg_decoder<R: ZByteReaderTrait>(
    reader: R,
    strict: bool,
) -> Result<(zune_jpeg::JpegDecoder<R>, Header)> {
    use zune_core::colorspace::ColorSpace;
    // Reading the headers allocates no pixels: gpukit checks its limits on what they say.
    let options = zune_core::options::DecoderOptions::default()
        .set_strict_mode(strict)
        .set_max_width(u16::MAX as usize)
        .set_max_height(u16::MAX as usize);
    let mut decoder = zune_jpeg::JpegDecoder::new_with_options(reader, options);
    decoder.decode_headers().map_err(jpeg_error)?;
    let (width, height) = decoder
        .dimensions()
        .ok_or_else(|| anyhow!("corrupt JPEG: no frame header"))?;
    let input = decoder
        .input_colorspace()
        .ok_or_else(|| anyhow!("corrupt JPEG: no frame header"))?;
    // CMYK would have to be converted to be shown: gpukit keeps pixels in their colour space.
    if matches!(input, ColorSpace::CMYK | ColorSpace::YCCK) {
        bail!(
            "CMYK JPEG ({} components, {input:?}): not supported (gpukit never converts \
             between colour spaces; convert it to RGB first)",
            input.num_components()
        );
    }
    // Gray stays gray; YCbCr and RGB are decoded to RGB.
    let out = if input == ColorSpace::Luma {
        ColorSpace::Luma
    } else {
        ColorSpace::RGB
    };
    decoder.set_options(decoder.options().jpeg_set_out_colorspace(out));
    let header = Header {
        width: width as u32,
        height: height as u32,
        channels: out.num_components() as u8,
        bit_depth: 8,
    };
    Ok((decoder, header))
}

fn jpeg_error(e: zune_jpeg::errors::DecodeErrors) -> anyhow::Error {
    use zune_core::bytestream::ZByteIoError as Io;
    use zune_jpeg::errors::DecodeErrors as E;
    let text = match &e {
        E::ExhaustedData | E::IoErrors(Io::NotEnoughBytes(..)) => {
            return anyhow!("truncated JPEG: the data ends early")
        }
        E::IoErrors(Io::StdIoError(io)) => return anyhow!(describe_io(io, "JPEG")),
        E::Format(s)
        | E::HuffmanDecode(s)
        | E::DqtError(s)
        | E::SosError(s)
        | E::SofError(s)
        | E::MCUError(s) => s.clone(),
        E::FormatStatic(s) => s.to_string(),
        E::LargeDimensions(n) => {
            return anyhow!("a side of {n} pixels is over the limit (--max-image-bytes)")
        }
        E::Unsupported(u) => return anyhow!("unsupported JPEG: {u:?}"),
        other => format!("{other:?}"),
    };
    // zune-jpeg's messages may carry line breaks; one line each.
    let text = text.split_whitespace().collect::<Vec<_>>().join(" ");
    let lower = text.to_lowercase();
    // The strict decoder's "Premature end of buffer" (data read past the end of the file).
    let words = ["premature end", "no more bytes", "exhausted", "eof"];
    if words.iter().any(|w| lower.contains(w)) {
        anyhow!("truncated JPEG: the data ends early")
    } else {
        anyhow!("corrupt JPEG: {text}")
    }
}

pub(super) fn decode_jpeg(bytes: &[u8], opts: &ReadOptions) -> Result<Decoded> {
    // The pixels and the metadata, or the decoder's own error (a header or a limit fails
    // outside it).
    type Pixels = std::result::Result<(Image, Metadata), zune_jpeg::errors::DecodeErrors>;
    let pixels = |input: &[u8], strict: bool| -> Result<Pixels> {
        let (mut decoder, h) = jpeg_decoder(ZCursor::new(input), strict)?;
        opts.limits.check(&h)?;
        let n = h.width as usize * h.height as usize * h.channels as usize;
        if decoder.output_buffer_size() != Some(n) {
            bail!("corrupt JPEG: decoded size differs from the header");
        }
        // A buffer handed back by an earlier image, zeroed: a decode may leave samples
        // unwritten without an error (a lenient one stops early; zune-jpeg, even strict, ends
        // at a second scan after a complete first one, and at an EOI after a marker inside
        // the entropy-coded data, which `jpeg_guarded` turns into errors of strict decodes),
        // and those must be zeros, never another image's. The memset of a warm buffer costs
        // far less than the fresh pages it saves.
        let mut data = super::recycle::zeroed(n);
        if let Err(e) = decoder.decode_into(&mut data) {
            return Ok(Err(e));
        }
        let metadata = Metadata {
            icc_profile: decoder.icc_profile(),
            exif: decoder.exif().cloned(),
            xmp: decoder.xmp().cloned(),
            ..Metadata::default()
        };
        Ok(Ok((
            Image::new_u8(h.width, h.height, h.channels, data),
            metadata,
        )))
    };
    let strict = || -> Result<(Image, Metadata)> {
        let guarded = jpeg_guarded(bytes);
        let e = match pixels(&guarded, true)? {
            Ok(decoded) => return Ok(decoded),
            Err(e) if matches!(guarded, Cow::Borrowed(_)) => return Err(jpeg_error(e)),
            Err(e) => e,
        };
        // The file itself tells whether the 1-bits were read or the file is damaged elsewhere
        // (its own error, as it was). A rare file decodes without them only: a progressive
        // file of one scan, whose end zune-jpeg finds only by reading ahead to its marker.
        match pixels(bytes, true)? {
            Ok(_) if read_the_ones(&e) => {
                bail!("truncated JPEG: a scan's data ends before its last block")
            }
            Ok(decoded) => Ok(decoded),
            Err(e) => Err(jpeg_error(e)),
        }
    };
    let headers = metadata::jpeg_headers(bytes);
    let ((image, mut metadata), damage) = match strict() {
        Ok(decoded) => (decoded, None),
        Err(e) if opts.allow_damaged && !is_limit(&e) => {
            let lenient = pixels(bytes, false)?.map_err(jpeg_error)?;
            (lenient, Some(e.to_string()))
        }
        Err(e) => return Err(e),
    };
    metadata.density = headers.density;
    Ok(Decoded {
        image,
        damage,
        metadata,
        jpeg_quality: headers.quality,
        jpeg_subsampling: headers.subsampling,
    })
}

/// A JPEG's bytes with a run of 1-bits (`FF 00` stuffed bytes) before each marker that ends a
/// scan's entropy-coded data, or the bytes themselves where no marker is to have one.
/// zune-jpeg, even strict, decodes on after such a marker as if zero bits followed (an EOI
/// appended to a cut file, a stray EOI inside the data, a comment or another scan after a cut
/// one), so the blocks the data lacks decode without an error into whatever zeros code for.
/// No Huffman code is all 1-bits (zune-jpeg refuses such a table): a decoder that needs more
/// bits than the scan holds reads the run and fails on it, and one that does not never reads
/// it. Not caught: a cut inside a refinement scan of a progressive file (correction bits, no
/// Huffman codes, may take the whole run), and a progressive file cut between its scans (a
/// coarser image, as libjpeg-turbo decodes it too).
///
/// The run goes only where zune-jpeg does not need the marker read ahead: in a sequential
/// frame, after the scan that completes its components (zune-jpeg finds the scans before
/// that one by the marker its last refill read); in a progressive frame, after every scan but
/// the first (the same) unless EOI ends that one. And only before the markers zune-jpeg takes
/// after a scan: any other one it refuses when it reads it, run or no run.
fn jpeg_guarded(bytes: &[u8]) -> Cow<'_, [u8]> {
    const RUN: [[u8; 2]; 16] = [[0xFF, 0x00]; 16];
    let mut at_runs = Vec::new();
    let (mut progressive, mut components, mut seen, mut scans) = (false, 0, 0, 0);
    let mut at = 2;
    while bytes.starts_with(&[0xFF, 0xD8]) && bytes.get(at) == Some(&0xFF) {
        while bytes.get(at) == Some(&0xFF) {
            at += 1;
        }
        let Some(&marker) = bytes.get(at) else { break };
        at += 1;
        match marker {
            0x01 | 0xD0..=0xD7 => continue,
            0xD9 => break,
            _ => {}
        }
        let Some(&[hi, lo, count]) = bytes.get(at..at + 3) else {
            break;
        };
        let len = usize::from(u16::from_be_bytes([hi, lo]));
        // SOF0 to SOF15 but DHT, JPG and DAC: their segment gives the components after the
        // precision and the size.
        if matches!(marker, 0xC0..=0xCF) && !matches!(marker, 0xC4 | 0xC8 | 0xCC) {
            progressive = matches!(marker, 0xC2 | 0xC6 | 0xCA | 0xCE);
            components = bytes.get(at + 7).map_or(0, |&n| usize::from(n));
        }
        at += len;
        if marker != 0xDA {
            continue;
        }
        (seen, scans) = (seen + usize::from(count), scans + 1);
        // The entropy-coded data runs to the first marker but RSTn (FF 00 is a stuffed byte,
        // FF FF fill before a marker).
        let end = loop {
            let Some(ff) = bytes.get(at..).and_then(|rest| memchr::memchr(0xFF, rest)) else {
                break None;
            };
            at += ff + 1;
            match bytes.get(at) {
                None => break None,
                Some(0x00 | 0xD0..=0xD7 | 0xFF) => {}
                Some(&next) => break Some(next),
            }
        };
        let Some(next) = end else { break };
        at -= 1;
        let taken = matches!(next, 0xD9 | 0xDA | 0xC4 | 0xDB | 0xDD | 0xFE);
        let last = match progressive {
            true => scans > 1 || next == 0xD9,
            false => seen >= components,
        };
        if taken && last {
            // Before the fill bytes too.
            let start = bytes[..at]
                .iter()
                .rposition(|&b| b != 0xFF)
                .map_or(0, |i| i + 1);
            at_runs.push(start);
        }
    }
    if at_runs.is_empty() {
        return Cow::Borrowed(bytes);
    }
    let mut guarded = Vec::with_capacity(bytes.len() + 32 * at_runs.len());
    let mut from = 0;
    for to in at_runs {
        guarded.extend_from_slice(&bytes[from..to]);
        guarded.extend_from_slice(RUN.as_flattened());
        from = to;
    }
    guarded.extend_from_slice(&bytes[from..]);
    Cow::Owned(guarded)
}

/// Whether a decode failed on a Huffman code that is no code: the 1-bits `jpeg_guarded` puts
/// after a scan, where the file itself decodes.
fn read_the_ones(e: &zune_jpeg::errors::DecodeErrors) -> bool {
    use zune_jpeg::errors::DecodeErrors as E;
    match e {
        E::Format(s) => s.starts_with("Bad Huffman Code"),
        E::FormatStatic(s) => s.starts_with("Bad Huffman Code"),
        _ => false,
    }
}

fn is_limit(e: &anyhow::Error) -> bool {
    e.to_string().contains("over the limit")
}

// ---- Everything else: the image crate's decoders, with its limits set ----

pub(super) fn other_decoder<'a, R: BufRead + Seek + 'a>(
    r: R,
    format: ImageFormat,
) -> Result<Box<dyn image::ImageDecoder + 'a>> {
    let mut reader = image::ImageReader::new(r);
    reader.set_format(format);
    reader.no_limits();
    let decoder = reader.into_decoder().map_err(|e| image_error(e, format))?;
    Ok(Box::new(decoder))
}

pub(super) fn format_name(format: ImageFormat) -> String {
    format!("{format:?}").to_uppercase()
}

pub(super) fn image_error(e: image::ImageError, format: ImageFormat) -> anyhow::Error {
    let name = format_name(format);
    let text = match &e {
        image::ImageError::IoError(io) => return anyhow!(describe_io(io, &name)),
        image::ImageError::Unsupported(u) => return anyhow!("unsupported {name}: {u}"),
        image::ImageError::Limits(_) => {
            return anyhow!("the {name} needs more memory than the limit (--max-image-bytes)")
        }
        other => other.to_string(),
    };
    let text = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if ends_early(&e) {
        anyhow!("truncated {name}: the data ends early")
    } else {
        anyhow!("corrupt {name}: {text}")
    }
}

/// Whether a decoder's error says its data ended early: an I/O error of that kind in its
/// chain, or, where a decoder kept only the text of one (qoi: "i/o error: failed to fill
/// whole buffer"), that text or an end of file named in words.
fn ends_early(e: &(dyn std::error::Error + 'static)) -> bool {
    let mut at = Some(e);
    while let Some(e) = at {
        if let Some(io) = e.downcast_ref::<std::io::Error>() {
            return io.kind() == std::io::ErrorKind::UnexpectedEof;
        }
        let text = e.to_string().to_lowercase();
        let words = [
            "failed to fill whole buffer",
            "end of file",
            "unexpected eof",
            " eof",
        ];
        if words.iter().any(|w| text.contains(w)) {
            return true;
        }
        at = e.source();
    }
    false
}

pub(super) fn other_header(
    decoder: &dyn image::ImageDecoder,
    format: ImageFormat,
) -> Result<Header> {
    let (width, height) = decoder.dimensions();
    let color = decoder.color_type();
    let channels = color.channel_count();
    let bit_depth = 8 * u32::from(color.bytes_per_pixel() / channels);
    if !matches!(bit_depth, 8 | 16) {
        bail!(
            "{:?} {} images (floating point) are not supported; gpukit takes 8- and 16-bit images",
            color,
            format_name(format)
        );
    }
    Ok(Header {
        width,
        height,
        channels,
        bit_depth,
    })
}

pub(super) fn decode_other(
    bytes: &[u8],
    format: ImageFormat,
    opts: &ReadOptions,
) -> Result<Decoded> {
    let damage = match format {
        ImageFormat::Pnm => pnm_sample_over_maxval(bytes)?,
        _ => None,
    };
    if let (Some(d), false) = (&damage, opts.allow_damaged) {
        bail!("{d}");
    }
    let mut decoder = other_decoder(Cursor::new(bytes), format)?;
    let header = other_header(decoder.as_ref(), format)?;
    opts.limits.check(&header)?;
    let mut limits = image::Limits::default();
    limits.max_image_width = Some(opts.limits.max_width);
    limits.max_image_height = Some(opts.limits.max_height);
    // The decoded image was checked above; this caps the decoder's other buffers (strips,
    // tiles, frames), which are small next to it.
    limits.max_alloc = Some(opts.limits.max_bytes.saturating_add(64 << 20));
    decoder
        .set_limits(limits)
        .map_err(|e| image_error(e, format))?;
    let metadata = other_metadata(decoder.as_mut(), format)?;
    let img = DynamicImage::from_decoder(decoder).map_err(|e| image_error(e, format))?;
    Ok(Decoded {
        image: Image::from_dynamic(img)?,
        damage,
        metadata,
        jpeg_quality: None,
        jpeg_subsampling: None,
    })
}

/// A PNM sample above its header's maxval, as the damage it is: the image crate scales
/// samples by 255 (or 65535) over maxval and saturates, so such a file would otherwise pass
/// with the sample read as white. Only a maxval below 255, or between 256 and 65534, leaves
/// room for one; bitmaps (P1, P4) cannot hold one. The samples past the raster's end are the
/// decoder's to refuse.
fn pnm_sample_over_maxval(bytes: &[u8]) -> Result<Option<String>> {
    use image::codecs::pnm::{PnmDecoder, PnmSubtype, SampleEncoding};
    let decoder =
        PnmDecoder::new(Cursor::new(bytes)).map_err(|e| image_error(e, ImageFormat::Pnm))?;
    let (raster, header) = decoder.into_inner();
    let max = header.maximal_sample();
    let depth = match header.subtype() {
        _ if max == 0xff || max == 0xffff => return Ok(None),
        PnmSubtype::Bitmap(_) => return Ok(None),
        PnmSubtype::Graymap(_) => 1,
        PnmSubtype::Pixmap(_) => 3,
        PnmSubtype::ArbitraryMap => header.as_arbitrary().map_or(1, |a| a.depth),
    };
    let count = header.width() as usize * header.height() as usize * depth as usize;
    let raster = &bytes[(raster.position() as usize).min(bytes.len())..];
    let above = match header.subtype().sample_encoding() {
        SampleEncoding::Binary if max <= 0xff => {
            raster.iter().take(count).position(|&v| u32::from(v) > max)
        }
        SampleEncoding::Binary => raster
            .chunks_exact(2)
            .take(count)
            .position(|c| u32::from(u16::from_be_bytes([c[0], c[1]])) > max),
        SampleEncoding::Ascii => raster
            .split(|b| b.is_ascii_whitespace())
            .filter(|t| !t.is_empty())
            .take(count)
            .position(|t| {
                std::str::from_utf8(t)
                    .ok()
                    .and_then(|t| t.parse::<u32>().ok())
                    .is_some_and(|v| v > max)
            }),
    };
    Ok(above.map(|i| format!("damaged PNM: sample {i} is above the header's maxval {max}")))
}

/// What the image crate's decoders report (ICC, EXIF, XMP: WebP's). TIFF (tiff/) and GIF
/// (`decode_gif`) have their own readers.
fn other_metadata(decoder: &mut dyn image::ImageDecoder, format: ImageFormat) -> Result<Metadata> {
    let err = |e| image_error(e, format);
    Ok(Metadata {
        icc_profile: decoder.icc_profile().map_err(err)?,
        exif: decoder
            .exif_metadata()
            .map_err(err)?
            .map(|e| metadata::exif_body(&e).to_vec()),
        xmp: decoder.xmp_metadata().map_err(err)?,
        ..Metadata::default()
    })
}

pub(super) fn gif_error(e: gif::DecodingError) -> anyhow::Error {
    match e {
        gif::DecodingError::Io(io) => anyhow!(describe_io(&io, "GIF")),
        gif::DecodingError::UnexpectedEof => anyhow!("truncated GIF: the data ends early"),
        e => anyhow!("corrupt GIF: {e}"),
    }
}

/// A GIF read with the gif crate directly, so that unknown extension blocks are skipped, as
/// GIF89a asks of decoders (image's decoder refuses them), and its header: the logical screen.
pub(super) fn gif_reader<R: Read>(r: R, opts: &ReadOptions) -> Result<(gif::Decoder<R>, Header)> {
    let mut options = gif::DecodeOptions::new();
    options.set_color_output(gif::ColorOutput::RGBA);
    options.allow_unknown_blocks(true);
    let cap = opts.limits.max_bytes.saturating_add(64 << 20);
    options.set_memory_limit(gif::MemoryLimit::Bytes(
        std::num::NonZeroU64::new(cap).expect("the cap is at least 64 MiB"),
    ));
    let reader = options.read_info(r).map_err(gif_error)?;
    let header = Header {
        width: u32::from(reader.width()),
        height: u32::from(reader.height()),
        channels: 4,
        bit_depth: 8,
    };
    Ok((reader, header))
}

/// GIF: the first frame on its logical screen as RGBA (as image's decoder gives it: the area
/// the frame does not cover transparent, what reaches outside the screen clipped).
pub(super) fn decode_gif(bytes: &[u8], opts: &ReadOptions) -> Result<Decoded> {
    let (mut reader, header) = gif_reader(Cursor::new(bytes), opts)?;
    opts.limits.check(&header)?;
    let (w, h) = (header.width as usize, header.height as usize);
    let frame = reader
        .next_frame_info()
        .map_err(gif_error)?
        .ok_or_else(|| anyhow!("corrupt GIF: it holds no image"))?;
    let (left, top) = (usize::from(frame.left), usize::from(frame.top));
    let fw = usize::from(frame.width);
    let mut pixels = vec![0u8; reader.buffer_size()];
    reader.read_into_buffer(&mut pixels).map_err(gif_error)?;
    let mut screen = vec![0u8; w * h * 4];
    let across = fw.min(w.saturating_sub(left));
    if across > 0 {
        let rows = pixels.chunks_exact(4 * fw).take(h.saturating_sub(top));
        for (y, row) in rows.enumerate() {
            let at = 4 * ((top + y) * w + left);
            screen[at..at + 4 * across].copy_from_slice(&row[..4 * across]);
        }
    }
    // The ICC and XMP application extensions come before the first frame.
    let metadata = Metadata {
        icc_profile: reader.icc_profile().map(Vec::from),
        xmp: reader.xmp_metadata().map(Vec::from),
        ..Metadata::default()
    };
    Ok(Decoded {
        image: Image::new_u8(header.width, header.height, 4, screen),
        damage: None,
        metadata,
        jpeg_quality: None,
        jpeg_subsampling: None,
    })
}

#[cfg(test)]
mod tests {
    use crate::io::image::{decode, Samples};

    // A PNM sample above the header's maxval is damage, binary or ASCII, 8 or 16 bits, PGM,
    // PPM or PAM: refused, or decoded with the damage named where damage is allowed (the
    // image crate saturates it to white). At maxval 255 or 65535 every sample is in range, and
    // samples past the raster (none here) are not looked at.
    #[test]
    fn pnm_samples_above_maxval_are_damage() {
        let pam = b"P7\nWIDTH 2\nHEIGHT 1\nDEPTH 2\nMAXVAL 15\nTUPLTYPE GRAYSCALE_ALPHA\nENDHDR\n";
        let p16 = [&b"P6\n1 1\n1000\n"[..], &[0x03, 0xE9, 0, 5, 0, 7]].concat();
        // (the file, the first sample above maxval and maxval)
        type Case<'a> = (&'a [u8], Option<(u32, u32)>);
        let cases: [Case; 7] = [
            (b"P5\n4 1\n100\n\x32\x64\x65\xff", Some((2, 100))),
            (b"P5\n4 1\n100\n\x32\x64\x00\x07", None),
            (b"P2\n4 1\n100\n50 100 101 3\n", Some((2, 100))),
            (b"P3\n2 1\n1000\n1 2 3 1000 0 999\n", None),
            (&p16, Some((0, 1000))),
            (&[&pam[..], &[1, 15, 16, 2]].concat(), Some((2, 15))),
            (b"P5\n2 1\n255\n\xff\x00", None),
        ];
        let lenient = super::ReadOptions {
            allow_damaged: true,
            ..super::ReadOptions::default()
        };
        for (bytes, above) in cases {
            let what = String::from_utf8_lossy(&bytes[..2]).into_owned();
            let want = above.map(|(i, max)| {
                format!("damaged PNM: sample {i} is above the header's maxval {max}")
            });
            match &want {
                Some(w) => assert_eq!(decode(bytes).unwrap_err().to_string(), *w, "{what}"),
                None => assert!(decode(bytes).is_ok(), "{what}"),
            }
            let got = super::super::decode::decode_with(bytes, &lenient).unwrap();
            assert_eq!(got.damage, want, "{what}");
        }
    }

    #[test]
    fn png_messages_name_chunks_by_their_type() {
        let crc = "CRC error: expected 0x1a2b have 0x3c4d while decoding ChunkType { type: \
                   IDAT, critical: true, private: false, reserved: false, safecopy: false } chunk.";
        assert_eq!(super::png_text(crc), "CRC error in an IDAT chunk");
        let crc = crc.replace("IDAT", "tEXt");
        assert_eq!(super::png_text(&crc), "CRC error in a tEXt chunk");
        let order = "Chunk ChunkType { type: PLTE, critical: true, private: false, reserved: \
                     false, safecopy: false } is invalid after IDAT chunk.";
        assert_eq!(
            super::png_text(order),
            "Chunk PLTE is invalid after IDAT chunk."
        );
        assert_eq!(super::png_text("Invalid signature."), "Invalid signature.");
        // fdeflate's reasons, in words.
        assert_eq!(
            super::png_text("Corrupt deflate stream. WrongChecksum"),
            "its compressed data fails its Adler-32 checksum"
        );
        assert_eq!(
            super::png_text("Corrupt deflate stream. InvalidDistanceCode"),
            "its compressed data is damaged (invalid distance code)"
        );
    }

    #[test]
    fn gif_frames_sit_on_the_logical_screen_and_unknown_extensions_are_skipped() {
        // A 4x2 screen and a 2x2 frame at (3, 1): one of its pixels is on the screen.
        let mut bytes = Vec::new();
        {
            let palette = [10, 20, 30, 40, 50, 60];
            let mut enc = gif::Encoder::new(&mut bytes, 4, 2, &palette).unwrap();
            let frame = gif::Frame {
                left: 3,
                top: 1,
                width: 2,
                height: 2,
                buffer: std::borrow::Cow::Borrowed(&[1, 0, 0, 0]),
                ..gif::Frame::default()
            };
            enc.write_frame(&frame).unwrap();
        }
        let img = decode(&bytes).unwrap();
        let mut want = vec![0u8; 4 * 2 * 4];
        want[4 * 7..].copy_from_slice(&[40, 50, 60, 255]);
        assert_eq!((img.width, img.height, img.channels), (4, 2, 4));
        assert_eq!(img.samples, Samples::U8(want));
        // An extension of an unknown label (0x99) after the 2-colour global palette.
        let at = 13 + 6;
        let mut with = bytes.clone();
        with.splice(at..at, [0x21, 0x99, 3, b'a', b'b', b'c', 0]);
        assert_eq!(decode(&with).unwrap(), img);
    }

    /// A batch hands decoded buffers back: a decode into one must not let its old samples
    /// through (guards the one-scan test and the zeroed buffers of lenient decodes).
    #[test]
    fn jpegs_decoded_into_handed_back_buffers_equal_fresh_decodes() {
        use crate::io::image::{recycle, ReadOptions};
        use zune_core::bytestream::ZCursor;
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/jpeg");
        let mut names: Vec<_> = std::fs::read_dir(&dir)
            .unwrap()
            .flatten()
            .map(|e| e.path())
            .collect();
        names.retain(|p| p.extension().is_some_and(|e| e == "jpg"));
        names.sort();
        assert!(names.len() >= 10, "{names:?}");
        let lenient = ReadOptions {
            allow_damaged: true,
            ..ReadOptions::default()
        };
        let (count, mut damaged) = (names.len(), 0);
        for path in names {
            let bytes = std::fs::read(&path).unwrap();
            // Cut inside the entropy-coded data: only a lenient decode takes it.
            let sos = bytes.windows(2).rposition(|w| w == [0xFF, 0xDA]).unwrap();
            let data = sos + 2 + usize::from(u16::from_be_bytes([bytes[sos + 2], bytes[sos + 3]]));
            let cut = &bytes[..(data + bytes.len()) / 2];
            // A second scan where the first ends early: zune-jpeg takes it, even strict, and
            // leaves the rows after the cut unwritten.
            let rescan = [cut, &bytes[sos..]].concat();
            // A marker inside the entropy-coded data (an empty COM), then EOI: zune-jpeg
            // takes that too, and leaves the rows after the cut unwritten.
            let comment = [cut, &[0xFF, 0xFE, 0x00, 0x02, 0xFF, 0xD9]].concat();
            for (input, strict) in [
                (&bytes[..], true),
                (cut, false),
                (&rescan[..], false),
                (&comment[..], false),
            ] {
                let (mut decoder, _) = super::jpeg_decoder(ZCursor::new(input), strict).unwrap();
                let fresh = decoder.decode().unwrap();
                for _ in 0..4 {
                    recycle::give(Samples::U8(vec![0xA5; fresh.len()]));
                }
                let opts = if strict {
                    ReadOptions::default()
                } else {
                    lenient
                };
                let got = super::decode_jpeg(input, &opts).unwrap();
                damaged += usize::from(got.damage.is_some());
                let Samples::U8(got) = got.image.samples else {
                    panic!("8-bit")
                };
                assert!(got == fresh, "{} (strict {strict})", path.display());
            }
        }
        assert!(
            damaged > 3 * count / 2,
            "{damaged} of {count} cut files decoded as damaged"
        );
    }
}
