//! TIFF and BigTIFF: the `tiff` crate reads the strips and tiles (decompression, predictors,
//! planes, bit packing), and gpukit turns the stored samples into its layouts, as libtiff's
//! and Pillow's readers do: palettes expanded through the ColorMap, YCbCr (JPEG in TIFF)
//! converted to RGB as libjpeg does, gray+alpha kept, premultiplied (associated) alpha divided out.
//! Variants it cannot read are refused with one line naming them (docs/formats.md).

use std::io::{Cursor, Read, Seek};

use ::tiff::decoder::{Decoder, DecodingResult, Limits};
use ::tiff::tags::Tag;
use ::tiff::TiffError;
use anyhow::{anyhow, bail, Result};

use super::{describe_io, Decoded, Header, Image, ReadOptions};
use crate::io::metadata;

/// The header of a TIFF's first image, in the layout `decode` gives it.
pub(super) fn header(bytes: &[u8]) -> Result<Header> {
    let mut decoder = open(bytes, &ReadOptions::default())?;
    Ok(plan(&mut decoder)?.header())
}

/// Decodes a TIFF's first image. A strip or tile that runs past the end of the file is
/// damage (libtiff reports a read error), refused unless `allow_damaged`.
pub(super) fn decode(bytes: &[u8], opts: &ReadOptions) -> Result<Decoded> {
    let mut decoder = open(bytes, opts)?;
    let plan = plan(&mut decoder)?;
    opts.limits.check(&plan.header())?;
    let damage = chunks_past_end(&mut decoder, bytes.len())?;
    if let Some(d) = &damage {
        if !opts.allow_damaged {
            bail!("{d}");
        }
    }
    // The tiff crate does not decode palette images; their indices are gray samples to it,
    // once the copy it reads says so.
    let patched;
    if matches!(plan.color, Color::Palette(_)) {
        patched = as_gray(bytes)?;
        decoder = open(&patched, opts)?;
    }
    let mut buf = DecodingResult::U8(Vec::new());
    let layout = decoder.read_image_to_buffer(&mut buf).map_err(tiff_error)?;
    if buf.as_buffer(0).as_bytes().len() < layout.complete_len {
        bail!("the TIFF needs more memory than the limit (--max-image-bytes raises it)");
    }
    let stored = usize::from(decoder.colortype().map_err(tiff_error)?.num_samples());
    let planar = layout.planes > 1;
    let h = plan.header();
    let image = match buf {
        DecodingResult::U8(v) if plan.is_stored_layout(stored, planar) => {
            Image::new_u8(h.width, h.height, h.channels, v)
        }
        DecodingResult::U16(v) if plan.is_stored_layout(stored, planar) => {
            Image::new_u16(h.width, h.height, h.channels, v)
        }
        DecodingResult::U8(v) if plan.bits < 8 => {
            plan.convert(&unpack(&v, plan.width as usize, plan.bits), stored, planar)
        }
        DecodingResult::U8(v) => plan.convert(&v, stored, planar),
        DecodingResult::U16(v) => plan.convert(&v, stored, planar),
        _ => bail!("unsupported TIFF: its samples are neither 8- nor 16-bit"),
    };
    let metadata = metadata::from_tiff(bytes).map_err(tiff_error)?;
    Ok(Decoded {
        image,
        damage,
        metadata,
        jpeg_quality: None,
        jpeg_subsampling: None,
    })
}

fn open<'a>(bytes: &'a [u8], opts: &ReadOptions) -> Result<Decoder<Cursor<&'a [u8]>>> {
    let room =
        usize::try_from(opts.limits.max_bytes.saturating_add(64 << 20)).unwrap_or(usize::MAX);
    let mut limits = Limits::default();
    limits.decoding_buffer_size = room;
    limits.intermediate_buffer_size = room;
    Ok(Decoder::new(Cursor::new(bytes))
        .map_err(tiff_error)?
        .with_limits(limits))
}

fn tiff_error(e: TiffError) -> anyhow::Error {
    let text = match e {
        TiffError::IoError(io) => return anyhow!(describe_io(&io, "TIFF")),
        TiffError::LimitsExceeded => {
            return anyhow!(
                "the TIFF needs more memory than the limit (--max-image-bytes raises it)"
            )
        }
        TiffError::UnsupportedError(u) => format!("unsupported TIFF: {u}"),
        TiffError::FormatError(f) => format!("corrupt TIFF: {f}"),
        other => format!("corrupt TIFF: {other}"),
    };
    anyhow!(text.split_whitespace().collect::<Vec<_>>().join(" "))
}

/// How the stored colour samples become gpukit's.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Color {
    Gray,
    Rgb,
    /// JPEG in TIFF, converted to RGB as libjpeg does.
    YCbCr,
    /// 8-bit RGB entries (the ColorMap's 16-bit values, high byte, as libtiff and Pillow).
    Palette(Vec<[u8; 3]>),
}

impl Color {
    /// Stored samples per pixel before any extra (alpha) sample.
    fn samples(&self) -> usize {
        match self {
            Color::Gray | Color::Palette(_) => 1,
            Color::Rgb | Color::YCbCr => 3,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Alpha {
    None,
    Straight,
    /// Associated alpha: the colour samples are multiplied by it.
    Premultiplied,
}

/// What a TIFF's first image holds and how it is laid out for gpukit.
#[derive(Debug)]
struct Plan {
    width: u32,
    height: u32,
    color: Color,
    alpha: Alpha,
    /// Bits per stored sample: 1, 2, 4 (gray and palette), 8 or 16.
    bits: u8,
}

fn unsupported(what: &str) -> anyhow::Error {
    anyhow!("unsupported TIFF: {what} (docs/formats.md says which TIFFs gpukit reads)")
}

fn plan(decoder: &mut Decoder<Cursor<&[u8]>>) -> Result<Plan> {
    let (width, height) = decoder.dimensions().map_err(tiff_error)?;
    let mut tag = |t: Tag| decoder.find_tag_unsigned_vec::<u16>(t).map_err(tiff_error);
    let first =
        |v: Option<Vec<u16>>, default: u16| v.and_then(|v| v.first().copied()).unwrap_or(default);
    let compression = first(tag(Tag::Compression)?, 1);
    let format = first(tag(Tag::SampleFormat)?, 1);
    let samples = usize::from(first(tag(Tag::SamplesPerPixel)?, 1));
    let bits = first(tag(Tag::BitsPerSample)?, 1);
    let extra = tag(Tag::ExtraSamples)?;
    let photometric = first(tag(Tag::PhotometricInterpretation)?, 1);
    let colormap = if photometric == 3 {
        tag(Tag::ColorMap)?
    } else {
        None
    };
    match compression {
        1 | 4 | 5 | 7 | 8 | 32773 | 32946 => {}
        2 => return Err(unsupported("CCITT modified Huffman (RLE) compression")),
        3 => return Err(unsupported("CCITT fax 3 compression")),
        6 => return Err(unsupported("old-style JPEG compression (6)")),
        c => return Err(unsupported(&format!("compression method {c}"))),
    }
    match format {
        1 => {}
        2 => return Err(unsupported("signed integer samples")),
        3 => return Err(unsupported("floating-point samples")),
        f => return Err(unsupported(&format!("sample format {f}"))),
    }
    let color = match photometric {
        0 | 1 => Color::Gray,
        2 => Color::Rgb,
        3 => Color::Palette(Vec::new()),
        // Converting would change the pixels' colour space, which gpukit never does.
        5 => bail!(
            "CMYK TIFF: not supported (gpukit never converts between colour spaces; \
             convert it to RGB first)"
        ),
        6 if compression == 7 => Color::YCbCr,
        6 => return Err(unsupported("YCbCr without JPEG compression")),
        4 => return Err(unsupported("a transparency mask")),
        8..=10 => return Err(unsupported("CIE L*a*b* colour")),
        p => return Err(unsupported(&format!("photometric interpretation {p}"))),
    };
    if samples < color.samples() {
        bail!("corrupt TIFF: {samples} samples per pixel are too few for its colour");
    }
    let alpha = if samples == color.samples() {
        Alpha::None
    } else {
        // The first extra sample is alpha if ExtraSamples says so, or says nothing.
        match extra.as_deref().and_then(|e| e.first()) {
            None | Some(2) => Alpha::Straight,
            Some(1) => Alpha::Premultiplied,
            Some(_) => Alpha::None,
        }
    };
    let sub_byte_ok = samples == 1 && matches!(color, Color::Gray | Color::Palette(_));
    match bits {
        8 | 16 => {}
        1 | 2 | 4 if sub_byte_ok => {}
        b => return Err(unsupported(&format!("{b}-bit samples"))),
    }
    let color = match color {
        Color::Palette(_) => {
            if samples != 1 {
                return Err(unsupported("a palette with extra samples"));
            }
            // Neither libtiff's RGBA interface nor Pillow reads 16-bit indices.
            if bits > 8 {
                return Err(unsupported("16-bit palette indices"));
            }
            let entries = 1usize << bits;
            let map = colormap
                .ok_or_else(|| anyhow!("corrupt TIFF: a palette image without a ColorMap"))?;
            if map.len() != 3 * entries {
                bail!(
                    "corrupt TIFF: its ColorMap has {} values, not 3 x {entries}",
                    map.len()
                );
            }
            let high = |v: u16| (v >> 8) as u8;
            Color::Palette(
                (0..entries)
                    .map(|i| {
                        [
                            high(map[i]),
                            high(map[entries + i]),
                            high(map[2 * entries + i]),
                        ]
                    })
                    .collect(),
            )
        }
        c => c,
    };
    if color == Color::YCbCr && bits != 8 {
        return Err(unsupported(&format!("{bits}-bit JPEG")));
    }
    Ok(Plan {
        width,
        height,
        color,
        alpha,
        bits: bits as u8,
    })
}

impl Plan {
    fn header(&self) -> Header {
        let color = if self.color == Color::Gray { 1 } else { 3 };
        Header {
            width: self.width,
            height: self.height,
            channels: color + u8::from(self.alpha != Alpha::None),
            bit_depth: if self.bits == 16 && !matches!(self.color, Color::Palette(_)) {
                16
            } else {
                8
            },
        }
    }

    /// Whether the stored samples are gpukit's already: interleaved 8- or 16-bit gray or RGB,
    /// with straight alpha or none, and no other extra sample.
    fn is_stored_layout(&self, stored: usize, planar: bool) -> bool {
        matches!(self.color, Color::Gray | Color::Rgb)
            && self.alpha != Alpha::Premultiplied
            && self.bits >= 8
            && !planar
            && stored == usize::from(self.header().channels)
    }

    /// gpukit's image from the samples the tiff crate read: `stored` samples per pixel,
    /// interleaved, or one plane after the other when `planar`; sub-byte samples unpacked.
    fn convert<T: Sample>(&self, data: &[T], stored: usize, planar: bool) -> Image {
        let h = self.header();
        if h.bit_depth == 16 {
            let s = self.samples::<T, u16>(data, stored, planar);
            Image::new_u16(h.width, h.height, h.channels, s)
        } else {
            let s = self.samples::<T, u8>(data, stored, planar);
            Image::new_u8(h.width, h.height, h.channels, s)
        }
    }

    fn samples<T: Sample, O: Sample>(&self, data: &[T], stored: usize, planar: bool) -> Vec<O> {
        let h = self.header();
        let pixels = h.width as usize * h.height as usize;
        let at = |i: usize, s: usize| -> u32 {
            let k = if planar {
                s * pixels + i
            } else {
                i * stored + s
            };
            data[k].into()
        };
        let max = if self.bits == 16 { 65535 } else { 255 };
        let alpha_at = self.color.samples();
        let mut out = Vec::with_capacity(pixels * usize::from(h.channels));
        let mut put = |colour: &[u32], i: usize| match self.alpha {
            Alpha::None => out.extend(colour.iter().map(|&v| O::narrow(v))),
            Alpha::Straight => {
                out.extend(colour.iter().map(|&v| O::narrow(v)));
                out.push(O::narrow(at(i, alpha_at)));
            }
            Alpha::Premultiplied => {
                let a = at(i, alpha_at);
                out.extend(colour.iter().map(|&v| O::narrow(unpremultiply(v, a, max))));
                out.push(O::narrow(a));
            }
        };
        for i in 0..pixels {
            match &self.color {
                Color::Gray if self.bits < 8 => put(&[at(i, 0) * 255 / ((1 << self.bits) - 1)], i),
                Color::Gray => put(&[at(i, 0)], i),
                Color::Rgb => put(&[at(i, 0), at(i, 1), at(i, 2)], i),
                Color::YCbCr => put(&ycbcr_to_rgb(at(i, 0), at(i, 1), at(i, 2)), i),
                Color::Palette(map) => put(&map[at(i, 0) as usize].map(u32::from), i),
            }
        }
        out
    }
}

/// A sample type of the tiff crate's results and of gpukit's images.
trait Sample: Copy + Into<u32> {
    /// The value, known to fit.
    fn narrow(v: u32) -> Self;
}

impl Sample for u8 {
    fn narrow(v: u32) -> u8 {
        v as u8
    }
}

impl Sample for u16 {
    fn narrow(v: u32) -> u16 {
        v as u16
    }
}

/// Rows of `bits`-bit samples, each row starting on a byte, to one byte per sample.
fn unpack(packed: &[u8], width: usize, bits: u8) -> Vec<u8> {
    let row_bytes = (width * usize::from(bits)).div_ceil(8);
    let per_byte = 8 / usize::from(bits);
    let mask = (1u8 << bits) - 1;
    packed
        .chunks_exact(row_bytes)
        .flat_map(|row| {
            (0..width).map(move |x| {
                let shift = 8 - usize::from(bits) * (x % per_byte + 1);
                (row[x / per_byte] >> shift) & mask
            })
        })
        .collect()
}

/// Straight colour from associated (premultiplied) colour, rounded; 0 where alpha is 0.
fn unpremultiply(v: u32, a: u32, max: u32) -> u32 {
    if a == 0 {
        0
    } else {
        ((u64::from(v) * u64::from(max) + u64::from(a / 2)) / u64::from(a)).min(u64::from(max))
            as u32
    }
}

/// JFIF YCbCr to RGB in libjpeg's fixed-point arithmetic (jdcolor.c, 16 fraction bits).
fn ycbcr_to_rgb(y: u32, cb: u32, cr: u32) -> [u32; 3] {
    const HALF: i32 = 1 << 15;
    let (y, cb, cr) = (y as i32, cb as i32 - 128, cr as i32 - 128);
    let r = y + ((91881 * cr + HALF) >> 16);
    let g = y + ((-22554 * cb - 46802 * cr + HALF) >> 16);
    let b = y + ((116130 * cb + HALF) >> 16);
    [r, g, b].map(|v| v.clamp(0, 255) as u32)
}

/// Damage that the tiff crate lets through: a strip or tile that runs past the end of the
/// file (what libtiff calls a read error), when the data it needs was complete before that.
fn chunks_past_end(decoder: &mut Decoder<Cursor<&[u8]>>, len: usize) -> Result<Option<String>> {
    for (offsets, counts, what) in [
        (Tag::StripOffsets, Tag::StripByteCounts, "strip"),
        (Tag::TileOffsets, Tag::TileByteCounts, "tile"),
    ] {
        let offsets = decoder
            .find_tag_unsigned_vec::<u64>(offsets)
            .map_err(tiff_error)?;
        let counts = decoder
            .find_tag_unsigned_vec::<u64>(counts)
            .map_err(tiff_error)?;
        if let (Some(offsets), Some(counts)) = (offsets, counts) {
            for (i, (o, c)) in offsets.iter().zip(&counts).enumerate() {
                if o.checked_add(*c).is_none_or(|end| end > len as u64) {
                    return Ok(Some(format!(
                        "corrupt TIFF: {what} {i} ({c} bytes at {o}) runs past the end of the file ({len} bytes)"
                    )));
                }
            }
        }
    }
    Ok(None)
}

/// A copy of a TIFF whose first image says it is gray (PhotometricInterpretation 1): how a
/// palette image's indices are read as samples.
fn as_gray(bytes: &[u8]) -> Result<Vec<u8>> {
    let (at, ty) = first_ifd_value(bytes, Tag::PhotometricInterpretation.to_u16())
        .filter(|&(_, ty)| ty == 3)
        .ok_or_else(|| anyhow!("corrupt TIFF: cannot find its PhotometricInterpretation"))?;
    debug_assert_eq!(ty, 3, "a SHORT");
    let mut copy = bytes.to_vec();
    let one = if bytes[0] == b'I' {
        1u16.to_le_bytes()
    } else {
        1u16.to_be_bytes()
    };
    copy[at..at + 2].copy_from_slice(&one);
    Ok(copy)
}

/// Where the value of `tag` in a TIFF's first IFD is stored (in the entry itself when it
/// fits), and its field type (3 SHORT, 4 LONG...).
fn first_ifd_value(bytes: &[u8], tag: u16) -> Option<(usize, u16)> {
    let le = match bytes.get(..2)? {
        b"II" => true,
        b"MM" => false,
        _ => return None,
    };
    let int = |at: usize, n: usize| -> Option<u64> {
        let b = bytes.get(at..at.checked_add(n)?)?;
        Some(b.iter().enumerate().fold(0u64, |v, (k, &x)| {
            let shift = if le { 8 * k } else { 8 * (n - 1 - k) };
            v | u64::from(x) << shift
        }))
    };
    // Classic TIFF: a 4-byte IFD offset, 2-byte entry count, 12-byte entries with the value
    // at 8; BigTIFF (version 43): 8, 8 and 20 bytes, the value at 12.
    let (ifd, count_len, entry_len, value_at) = match int(2, 2)? {
        42 => (int(4, 4)?, 2, 12, 8),
        43 => (int(8, 8)?, 8, 20, 12),
        _ => return None,
    };
    let ifd = usize::try_from(ifd).ok()?;
    let count = usize::try_from(int(ifd, count_len)?).ok()?;
    (0..count)
        .map(|i| ifd + count_len + i * entry_len)
        .find(|&e| int(e, 2) == Some(u64::from(tag)))
        .and_then(|e| Some((e + value_at, int(e + 2, 2)? as u16)))
}

/// The offsets of a TIFF's pages' directories, in order.
pub(super) fn pages<R: Read + Seek>(r: &mut R) -> Result<Vec<u64>> {
    let tiff_error = |e: TiffError| anyhow!("corrupt TIFF: {e}");
    let mut decoder = Decoder::new(r).map_err(tiff_error)?;
    let mut pages = Vec::new();
    loop {
        pages.extend(decoder.ifd_pointer().map(|p| p.0));
        if !decoder.more_images() {
            return Ok(pages);
        }
        decoder.next_image().map_err(tiff_error)?;
    }
}

/// A copy of a TIFF whose first and only page is the one whose directory is at `ifd`, for
/// `decode`, which reads the first page only.
pub(super) fn page(bytes: &[u8], ifd: u64) -> Option<Vec<u8>> {
    let le = bytes.starts_with(b"II");
    let mut out = bytes.to_vec();
    let get = |out: &[u8], at: u64, n: usize| -> Option<u64> {
        let at = usize::try_from(at).ok()?;
        let b = out.get(at..at.checked_add(n)?)?;
        Some(b.iter().enumerate().fold(0u64, |v, (i, &x)| {
            let shift = if le { 8 * i } else { 8 * (n - 1 - i) };
            v | u64::from(x) << shift
        }))
    };
    let put = |out: &mut [u8], at: u64, n: usize, v: u64| -> Option<()> {
        let at = usize::try_from(at).ok()?;
        for (i, b) in out.get_mut(at..at.checked_add(n)?)?.iter_mut().enumerate() {
            let shift = if le { 8 * i } else { 8 * (n - 1 - i) };
            *b = (v >> shift) as u8;
        }
        Some(())
    };
    // Classic TIFF: 4-byte offsets (the first at byte 4), 2-byte entry counts, 12-byte
    // entries; BigTIFF (version 43): 8-byte offsets (the first at byte 8), 8, 20.
    let (offset, count, entry) = match get(&out, 2, 2)? {
        43 => (8, 8, 20),
        _ => (4, 2, 12),
    };
    put(&mut out, offset as u64, offset, ifd)?;
    let entries = get(&out, ifd, count)?;
    let next = ifd
        .checked_add(count as u64)?
        .checked_add(entries.checked_mul(entry)?)?;
    put(&mut out, next, offset, 0)?;
    Some(out)
}

#[cfg(test)]
mod tests;
