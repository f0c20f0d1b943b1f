//! What travels with the pixels: the ICC profile, EXIF (with its orientation tag), XMP, the
//! resolution and PNG's text chunks. `io::image`'s decoders fill a [`Metadata`] and its encoders
//! write what each format can hold (docs/fidelity.md lists it per format). Pixels are never
//! converted between colour spaces: the profile describes the samples as they are.
//!
//! Also here: reading and resetting the EXIF orientation (io/image/orientation.rs turns the
//! pixels upright by it), and the JPEG quality a file was written with, estimated from its quantisation table.

use png::text_metadata::{ITXtChunk, TEXtChunk, ZTXtChunk};

use super::jpeg::Subsampling;

/// The metadata of one image. Each part is kept byte for byte as read.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Metadata {
    /// The ICC profile (PNG iCCP, JPEG APP2, WebP ICCP, TIFF tag 34675).
    pub icc_profile: Option<Vec<u8>>,
    /// EXIF, as the TIFF structure it is (starting `II*\0` or `MM\0*`; JPEG's `Exif\0\0`
    /// prefix is not part of it).
    pub exif: Option<Vec<u8>>,
    /// The XMP packet (PNG iTXt `XML:com.adobe.xmp`, JPEG APP1, WebP `XMP `, TIFF tag 700).
    pub xmp: Option<Vec<u8>>,
    /// Pixels per unit (JPEG JFIF density, PNG pHYs, TIFF X/YResolution).
    pub density: Option<Density>,
    /// PNG text chunks other than XMP, still compressed where they were.
    pub text: PngText,
}

impl Metadata {
    pub fn is_empty(&self) -> bool {
        *self == Metadata::default()
    }

    /// What it holds, in a few words: "ICC profile (3144 bytes), EXIF (orientation 6), 300x300
    /// per inch", or "no metadata".
    pub fn describe(&self) -> String {
        let mut parts = Vec::new();
        if let Some(p) = &self.icc_profile {
            parts.push(format!("ICC profile ({} bytes)", p.len()));
        }
        if self.exif.is_some() {
            parts.push(match self.orientation() {
                Some(o) => format!("EXIF (orientation {o})"),
                None => "EXIF".to_string(),
            });
        }
        if self.xmp.is_some() {
            parts.push("XMP".to_string());
        }
        if let Some(d) = self.density {
            let unit = match d.unit {
                DensityUnit::None => "aspect ratio",
                DensityUnit::Inch => "per inch",
                DensityUnit::Centimeter => "per cm",
                DensityUnit::Meter => "per metre",
            };
            parts.push(format!("{}x{} {unit}", d.x, d.y));
        }
        let t = &self.text;
        let texts = t.latin1.len() + t.compressed.len() + t.utf8.len();
        if texts > 0 {
            parts.push(format!("{texts} text chunks"));
        }
        if parts.is_empty() {
            "no metadata".to_string()
        } else {
            parts.join(", ")
        }
    }

    /// The EXIF orientation, 1 to 8 (1: the pixels are upright as stored); `None` without EXIF
    /// or without a valid tag.
    pub fn orientation(&self) -> Option<u8> {
        let exif = Ifd0::parse(self.exif.as_deref()?)?;
        let v = exif.short(TAG_ORIENTATION)?;
        (1..=8).contains(&v).then_some(v as u8)
    }

    /// The EXIF orientation, and the tag set to 1, for the pixels to be turned upright by it
    /// (`io::image`'s `Metadata::auto_orient`); `None`, and nothing changed, without one.
    pub(crate) fn take_orientation(&mut self) -> Option<u8> {
        let o = self.orientation()?;
        let exif = self.exif.as_mut().expect("orientation comes from the EXIF");
        let ifd = Ifd0::parse(exif).expect("parsed for the orientation");
        let at = ifd.entry(TAG_ORIENTATION).expect("the tag is there") + 8;
        let one = if ifd.big_endian { [0, 1] } else { [1, 0] };
        exif[at..at + 2].copy_from_slice(&one);
        Some(o)
    }
}

/// Resolution: pixels per unit along x and y.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Density {
    pub x: u32,
    pub y: u32,
    pub unit: DensityUnit,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DensityUnit {
    /// No unit: x:y is the pixels' aspect ratio.
    None,
    Inch,
    Centimeter,
    Meter,
}

impl Density {
    /// As PNG's pHYs: per metre, or a bare aspect ratio.
    pub fn to_png(self) -> png::PixelDimensions {
        let per_metre = |v: u32| match self.unit {
            DensityUnit::Inch => (f64::from(v) / 0.0254).round() as u32,
            DensityUnit::Centimeter => v.saturating_mul(100),
            DensityUnit::Meter | DensityUnit::None => v,
        };
        png::PixelDimensions {
            xppu: per_metre(self.x),
            yppu: per_metre(self.y),
            unit: if self.unit == DensityUnit::None {
                png::Unit::Unspecified
            } else {
                png::Unit::Meter
            },
        }
    }

    /// As JPEG's JFIF density (16-bit values): a per-metre density is written per centimetre
    /// when that is exact, else in dots per inch (2835 per metre is 72 dpi). `None` when it
    /// does not fit.
    pub fn to_jfif(self) -> Option<(DensityUnit, u16, u16)> {
        let (unit, x, y) = match self.unit {
            DensityUnit::Meter if self.x.is_multiple_of(100) && self.y.is_multiple_of(100) => {
                (DensityUnit::Centimeter, self.x / 100, self.y / 100)
            }
            DensityUnit::Meter => {
                let dpi = |v: u32| (f64::from(v) * 0.0254).round() as u32;
                (DensityUnit::Inch, dpi(self.x), dpi(self.y))
            }
            u => (u, self.x, self.y),
        };
        Some((unit, u16::try_from(x).ok()?, u16::try_from(y).ok()?))
    }

    /// As TIFF's ResolutionUnit and whole values; per metre goes per centimetre, rounded.
    pub fn to_tiff(self) -> (tiff::tags::ResolutionUnit, u32, u32) {
        use tiff::tags::ResolutionUnit as U;
        let per_cm = |v: u32| (v + 50) / 100;
        match self.unit {
            DensityUnit::None => (U::None, self.x, self.y),
            DensityUnit::Inch => (U::Inch, self.x, self.y),
            DensityUnit::Centimeter => (U::Centimeter, self.x, self.y),
            DensityUnit::Meter => (U::Centimeter, per_cm(self.x), per_cm(self.y)),
        }
    }

    pub(crate) fn from_png(d: &png::PixelDimensions) -> Density {
        Density {
            x: d.xppu,
            y: d.yppu,
            unit: match d.unit {
                png::Unit::Meter => DensityUnit::Meter,
                png::Unit::Unspecified => DensityUnit::None,
            },
        }
    }
}

/// PNG's text chunks as the png crate reads and writes them (zTXt and compressed iTXt are
/// kept compressed, so they are written back as they were).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PngText {
    /// tEXt
    pub latin1: Vec<TEXtChunk>,
    /// zTXt
    pub compressed: Vec<ZTXtChunk>,
    /// iTXt
    pub utf8: Vec<ITXtChunk>,
}

/// The iTXt keyword PNG stores XMP under.
pub const PNG_XMP_KEYWORD: &str = "XML:com.adobe.xmp";

/// The metadata a PNG decoder read (call after the last chunk for trailing text chunks).
pub(crate) fn from_png(info: &png::Info) -> Metadata {
    let mut utf8 = info.utf8_text.clone();
    let xmp = utf8
        .iter()
        .position(|c| c.keyword == PNG_XMP_KEYWORD)
        .and_then(|i| {
            let text = utf8[i].get_text().ok()?;
            utf8.remove(i);
            Some(text.into_bytes())
        });
    Metadata {
        icc_profile: info.icc_profile.as_ref().map(|p| p.to_vec()),
        exif: info.exif_metadata.as_ref().map(|e| exif_body(e).to_vec()),
        xmp,
        density: info.pixel_dims.as_ref().map(Density::from_png),
        text: PngText {
            latin1: info.uncompressed_latin1_text.clone(),
            compressed: info.compressed_latin1_text.clone(),
            utf8,
        },
    }
}

/// EXIF without the `Exif\0\0` prefix some writers put before it (in WebP and PNG too).
pub(crate) fn exif_body(exif: &[u8]) -> &[u8] {
    exif.strip_prefix(b"Exif\0\0").unwrap_or(exif)
}

/// What of the metadata an output keeps: `--keep icc,exif,xmp,resolution,text` (any of them;
/// `exif-no-gps` is EXIF without its GPS directory), `--keep all` (the default), `--keep none`
/// (= `--strip`). docs/fidelity.md.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Keep {
    pub icc: bool,
    pub exif: bool,
    /// EXIF's GPS directory (where the picture was taken), when `exif` is kept.
    pub gps: bool,
    pub xmp: bool,
    pub resolution: bool,
    pub text: bool,
}

/// Everything, as without `--keep`.
impl Default for Keep {
    fn default() -> Keep {
        Keep::ALL
    }
}

impl Keep {
    pub const ALL: Keep = Keep {
        icc: true,
        exif: true,
        gps: true,
        xmp: true,
        resolution: true,
        text: true,
    };
    pub const NONE: Keep = Keep {
        icc: false,
        exif: false,
        gps: false,
        xmp: false,
        resolution: false,
        text: false,
    };

    /// A comma-separated list of `icc`, `exif`, `exif-no-gps`, `xmp`, `resolution`, `text`,
    /// or `all`, or `none`.
    pub fn parse(s: &str) -> Result<Keep, String> {
        let mut keep = Keep::NONE;
        for part in s.split(',').map(str::trim) {
            match part {
                "all" => keep = Keep::ALL,
                "none" => {}
                "icc" => keep.icc = true,
                "exif" => (keep.exif, keep.gps) = (true, true),
                "exif-no-gps" => keep.exif = true,
                "xmp" => keep.xmp = true,
                "resolution" => keep.resolution = true,
                "text" => keep.text = true,
                _ => {
                    return Err(format!(
                        "unknown {part:?}: a list of icc, exif, exif-no-gps, xmp, resolution, \
                         text, or all, or none"
                    ))
                }
            }
        }
        Ok(keep)
    }

    /// `metadata` less what is not kept. EXIF without GPS whose GPS directory cannot be found
    /// safely (a malformed structure) is dropped whole rather than passed on with it.
    pub fn apply(self, mut m: Metadata) -> Metadata {
        if !self.icc {
            m.icc_profile = None;
        }
        m.exif = match m.exif.take() {
            Some(e) if self.exif && self.gps => Some(e),
            Some(e) if self.exif => without_gps(&e),
            _ => None,
        };
        if !self.xmp {
            m.xmp = None;
        }
        if !self.resolution {
            m.density = None;
        }
        if !self.text {
            m.text = PngText::default();
        }
        m
    }
}

/// The EXIF tag of the GPS directory's offset (GPSInfo).
const TAG_GPS_IFD: u16 = 0x8825;

/// `exif` (a TIFF structure, as [`Metadata::exif`] holds it) with its GPS directory gone: the
/// GPSInfo entry taken out of the first directory, and the GPS directory and every value it
/// points to overwritten with zeros, so that no coordinate is left in the bytes. The same
/// length and every other offset unchanged. `None` when the structure is malformed; EXIF
/// without a GPS directory comes back as it is.
pub fn without_gps(exif: &[u8]) -> Option<Vec<u8>> {
    let ifd0 = Ifd0::parse(exif)?;
    let Some(entry) = ifd0.entry(TAG_GPS_IFD) else {
        return Some(exif.to_vec());
    };
    let gps = ifd0.u32_at(entry + 8)? as usize;
    let n0 = usize::from(ifd0.u16_at(ifd0.at)?);
    let n_gps = usize::from(ifd0.u16_at(gps)?);
    // Every value of the GPS directory stored outside its entry, and the directory itself.
    let mut zero = Vec::with_capacity(n_gps + 1);
    zero.push(gps..gps.checked_add(2 + 12 * n_gps + 4)?);
    for i in 0..n_gps {
        let e = gps + 2 + 12 * i;
        let size = match ifd0.u16_at(e + 2)? {
            1 | 2 | 6 | 7 => 1,
            3 | 8 => 2,
            4 | 9 | 11 | 13 => 4,
            5 | 10 | 12 => 8,
            _ => return None,
        } * ifd0.u32_at(e + 4)? as usize;
        if size > 4 {
            let at = ifd0.u32_at(e + 8)? as usize;
            zero.push(at..at.checked_add(size)?);
        }
    }
    let end0 = (ifd0.at + 2 + 12 * n0).checked_add(4)?;
    if zero
        .iter()
        .chain([&(ifd0.at..end0)])
        .any(|r| r.end > exif.len())
    {
        return None;
    }
    let mut out = exif.to_vec();
    // The first directory without the entry: the entries after it and the next-directory
    // offset move up 12 bytes, the count goes down by one, the freed 12 bytes are zeros.
    out.copy_within(entry + 12..end0, entry);
    out[end0 - 12..end0].fill(0);
    let count = (n0 - 1) as u16;
    let count = if ifd0.big_endian {
        count.to_be_bytes()
    } else {
        count.to_le_bytes()
    };
    out[ifd0.at..ifd0.at + 2].copy_from_slice(&count);
    for r in zero {
        out[r].fill(0);
    }
    Some(out)
}

/// The TIFF tag XMP is stored under (XMLPacket).
pub const TIFF_TAG_XMP: u16 = 700;
const TAG_ORIENTATION: u16 = 0x0112;

/// The first directory of an EXIF block (a TIFF structure).
struct Ifd0<'a> {
    data: &'a [u8],
    big_endian: bool,
    at: usize,
}

impl<'a> Ifd0<'a> {
    fn parse(data: &'a [u8]) -> Option<Ifd0<'a>> {
        let big_endian = match data.get(..4)? {
            b"II*\0" => false,
            b"MM\0*" => true,
            _ => return None,
        };
        let mut ifd = Ifd0 {
            data,
            big_endian,
            at: 0,
        };
        ifd.at = ifd.u32_at(4)? as usize;
        Some(ifd)
    }

    fn u16_at(&self, at: usize) -> Option<u16> {
        let b: [u8; 2] = self.data.get(at..at.checked_add(2)?)?.try_into().ok()?;
        Some(if self.big_endian {
            u16::from_be_bytes(b)
        } else {
            u16::from_le_bytes(b)
        })
    }

    fn u32_at(&self, at: usize) -> Option<u32> {
        let b: [u8; 4] = self.data.get(at..at.checked_add(4)?)?.try_into().ok()?;
        Some(if self.big_endian {
            u32::from_be_bytes(b)
        } else {
            u32::from_le_bytes(b)
        })
    }

    /// Where the tag's 12-byte entry starts.
    fn entry(&self, tag: u16) -> Option<usize> {
        let n = usize::from(self.u16_at(self.at)?);
        (0..n)
            .map(|i| self.at + 2 + 12 * i)
            .find(|&e| self.u16_at(e) == Some(tag))
    }

    /// A SHORT tag's (first) value.
    fn short(&self, tag: u16) -> Option<u16> {
        let e = self.entry(tag)?;
        (self.u16_at(e + 2)? == 3 && self.u32_at(e + 4)? >= 1).then_some(())?;
        self.u16_at(e + 8)
    }
}

/// A TIFF's ICC profile, XMP, resolution and orientation (its own tag, carried as EXIF to the
/// formats that keep it there), read with the tiff crate: the image crate's TIFF decoder
/// caps a tag's size at the image's, which drops a small image's profile.
pub(crate) fn from_tiff(file: &[u8]) -> Result<Metadata, tiff::TiffError> {
    use tiff::decoder::{ifd::Value, Decoder};
    use tiff::tags::Tag;
    let mut d = Decoder::new(std::io::Cursor::new(file))?;
    let mut bytes = |tag| -> Result<Option<Vec<u8>>, tiff::TiffError> {
        d.find_tag(tag)?.map(Value::into_u8_vec).transpose()
    };
    let icc_profile = bytes(Tag::IccProfile)?;
    let xmp = bytes(Tag::Unknown(TIFF_TAG_XMP))?;
    let whole = |v: Option<Value>| match v {
        Some(Value::Rational(n, d)) if d != 0 => {
            Some(((u64::from(n) + u64::from(d) / 2) / u64::from(d)) as u32)
        }
        _ => None,
    };
    let (x, y) = (
        whole(d.find_tag(Tag::XResolution)?),
        whole(d.find_tag(Tag::YResolution)?),
    );
    let unit = match d.find_tag_unsigned::<u16>(Tag::ResolutionUnit)? {
        Some(1) => DensityUnit::None,
        Some(3) => DensityUnit::Centimeter,
        _ => DensityUnit::Inch,
    };
    let orientation = d.find_tag_unsigned::<u16>(Tag::Orientation)?;
    Ok(Metadata {
        icc_profile,
        exif: orientation
            .filter(|o| (2..=8).contains(o))
            .map(|o| exif_with_orientation(o as u8)),
        xmp,
        density: x.zip(y).map(|(x, y)| Density { x, y, unit }),
        text: PngText::default(),
    })
}

/// An EXIF block holding only an orientation tag: how a TIFF input's own Orientation tag
/// travels to formats that keep it in EXIF.
pub(crate) fn exif_with_orientation(orientation: u8) -> Vec<u8> {
    let mut e = b"II*\0\x08\0\0\0\x01\0".to_vec();
    e.extend_from_slice(&TAG_ORIENTATION.to_le_bytes());
    e.extend_from_slice(&3u16.to_le_bytes()); // SHORT
    e.extend_from_slice(&1u32.to_le_bytes()); // one value
    e.extend_from_slice(&[orientation, 0, 0, 0]);
    e.extend_from_slice(&0u32.to_le_bytes()); // no next directory
    e
}

// ---- JPEG: the JFIF density and the quantisation tables, from the segments before the scan ----

/// What a JPEG's headers say beyond what its decoder reports.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct JpegHeaders {
    pub density: Option<Density>,
    /// The quality the file was written with, estimated (see [`estimate_quality`]).
    pub quality: Option<u8>,
    /// A YCbCr frame's chroma subsampling (None for gray and for layouts gpukit does not write).
    pub subsampling: Option<Subsampling>,
}

/// Walks the segments from SOI to the first scan.
pub(crate) fn jpeg_headers(bytes: &[u8]) -> JpegHeaders {
    let mut found = JpegHeaders::default();
    for (marker, payload) in jpeg_segments(bytes) {
        match marker {
            0xE0 if payload.len() >= 12 && payload.starts_with(b"JFIF\0") => {
                let x = u32::from(u16::from_be_bytes([payload[8], payload[9]]));
                let y = u32::from(u16::from_be_bytes([payload[10], payload[11]]));
                let unit = match payload[7] {
                    1 => DensityUnit::Inch,
                    2 => DensityUnit::Centimeter,
                    _ => DensityUnit::None,
                };
                // 1:1 without a unit is JFIF's way of saying nothing.
                if x > 0 && y > 0 && !(unit == DensityUnit::None && x == y) {
                    found.density = Some(Density { x, y, unit });
                }
            }
            0xDB => {
                if let Some(t) = luma_table(payload) {
                    found.quality = Some(estimate_quality(&t));
                }
            }
            // SOF0 to SOF15 but DHT (C4), JPG (C8) and DAC (CC): precision, height, width,
            // components, then (id, factors, table) for each.
            0xC0..=0xCF
                if !matches!(marker, 0xC4 | 0xC8 | 0xCC)
                    && payload.len() >= 15
                    && payload[5] == 3
                    && payload[10] == 0x11
                    && payload[13] == 0x11 =>
            {
                found.subsampling = Subsampling::from_factors(payload[7] >> 4, payload[7] & 15);
            }
            _ => {}
        }
    }
    found
}

/// The segments (marker, payload) of a JPEG up to its first scan.
pub fn jpeg_segments(bytes: &[u8]) -> impl Iterator<Item = (u8, &[u8])> {
    let mut at = if bytes.starts_with(&[0xFF, 0xD8]) {
        2
    } else {
        bytes.len()
    };
    std::iter::from_fn(move || loop {
        if bytes.get(at) != Some(&0xFF) {
            return None;
        }
        while bytes.get(at) == Some(&0xFF) {
            at += 1;
        }
        let marker = *bytes.get(at)?;
        at += 1;
        if matches!(marker, 0x01 | 0xD0..=0xD7) {
            continue;
        }
        if matches!(marker, 0xD9 | 0xDA) {
            return None;
        }
        let len = usize::from(u16::from_be_bytes([*bytes.get(at)?, *bytes.get(at + 1)?]));
        let payload = bytes.get(at + 2..(at + len).max(at + 2))?;
        at += len.max(2);
        return Some((marker, payload));
    })
}

/// Quantisation table 0 (luminance, by convention) from a DQT segment, in zigzag order.
fn luma_table(dqt: &[u8]) -> Option<[u16; 64]> {
    let mut at = 0;
    while at < dqt.len() {
        let (precision, id) = (dqt[at] >> 4, dqt[at] & 15);
        let size = if precision == 0 { 64 } else { 128 };
        let values = dqt.get(at + 1..at + 1 + size)?;
        if id == 0 {
            let mut t = [0u16; 64];
            for (k, v) in t.iter_mut().enumerate() {
                *v = if precision == 0 {
                    u16::from(values[k])
                } else {
                    u16::from_be_bytes([values[2 * k], values[2 * k + 1]])
                };
            }
            return Some(t);
        }
        at += 1 + size;
    }
    None
}

/// Position k of the zigzag scan is natural (row-major) index `ZIGZAG[k]`.
const ZIGZAG: [usize; 64] = [
    0, 1, 8, 16, 9, 2, 3, 10, 17, 24, 32, 25, 18, 11, 4, 5, 12, 19, 26, 33, 40, 48, 41, 34, 27, 20,
    13, 6, 7, 14, 21, 28, 35, 42, 49, 56, 57, 50, 43, 36, 29, 22, 15, 23, 30, 37, 44, 51, 58, 59,
    52, 45, 38, 31, 39, 46, 53, 60, 61, 54, 47, 55, 62, 63,
];

/// The JPEG standard's luminance table (ITU T.81 K.1), row-major.
#[rustfmt::skip]
const STD_LUMA: [u16; 64] = [
    16, 11, 10, 16,  24,  40,  51,  61,
    12, 12, 14, 19,  26,  58,  60,  55,
    14, 13, 16, 24,  40,  57,  69,  56,
    14, 17, 22, 29,  51,  87,  80,  62,
    18, 22, 37, 56,  68, 109, 103,  77,
    24, 35, 55, 64,  81, 104, 113,  92,
    49, 64, 78, 87, 103, 121, 120, 101,
    72, 92, 95, 98, 112, 100, 103,  99,
];

/// The quality (1-100) whose IJG-scaled standard luminance table (libjpeg's
/// `jpeg_set_quality`, baseline: values 1 to 255) is nearest to `zigzag`, the file's table in
/// zigzag order: exact for files libjpeg, ImageMagick, vips, OpenCV or gpukit wrote, the
/// nearest IJG quality for others (as ImageMagick's estimate is).
pub fn estimate_quality(zigzag: &[u16; 64]) -> u8 {
    let distance = |q: u32| -> u32 {
        let scale = if q < 50 { 5000 / q } else { 200 - 2 * q };
        (0..64)
            .map(|k| {
                let v = ((u32::from(STD_LUMA[ZIGZAG[k]]) * scale + 50) / 100).clamp(1, 255);
                v.abs_diff(u32::from(zigzag[k]))
            })
            .sum()
    };
    // Ties (the lowest qualities clamp alike) go to the higher quality.
    (1..=100u32)
        .min_by_key(|&q| (distance(q), std::cmp::Reverse(q)))
        .expect("a non-empty range") as u8
}

/// The most a JPEG segment holds after its length field and `prefix`, or an error naming
/// `what` when `len` bytes do not fit.
pub(crate) fn jpeg_segment_fits(what: &str, prefix: usize, len: usize) -> Result<(), String> {
    if 2 + prefix + len > usize::from(u16::MAX) {
        return Err(format!(
            "its {what} ({len} bytes) is more than a JPEG segment holds (64 KiB); --strip drops it"
        ));
    }
    Ok(())
}

impl Metadata {
    /// Drops an EXIF block or XMP packet too large for one JPEG segment (64 KiB), so that the
    /// image is still written as JPEG; says what was dropped, one line each, for a warning.
    pub fn fit_jpeg(&mut self) -> Vec<String> {
        let mut dropped = Vec::new();
        if let Some(e) = self.exif.take() {
            match jpeg_segment_fits("EXIF", b"Exif\0\0".len(), e.len()) {
                Ok(()) => self.exif = Some(e),
                Err(why) => dropped.push(why.replace("; --strip drops it", "; dropped")),
            }
        }
        if let Some(x) = self.xmp.take() {
            match jpeg_segment_fits("XMP", XMP_NS.len(), x.len()) {
                Ok(()) => self.xmp = Some(x),
                Err(why) => dropped.push(why.replace("; --strip drops it", "; dropped")),
            }
        }
        dropped
    }
}

/// The name an XMP packet's JPEG APP1 segment starts with.
const XMP_NS: &[u8] = b"http://ns.adobe.com/xap/1.0/\0";

/// Inserts an XMP packet as an APP1 segment after a JPEG's leading APPn segments (where the
/// encoder put JFIF, EXIF and the ICC profile).
pub(crate) fn jpeg_insert_xmp(jpeg: &mut Vec<u8>, xmp: &[u8]) -> Result<(), String> {
    const NS: &[u8] = XMP_NS;
    jpeg_segment_fits("XMP", NS.len(), xmp.len())?;
    let len16 = (2 + NS.len() + xmp.len()) as u16;
    // After SOI and every APPn that follows it.
    let mut at = 2;
    while jpeg.get(at) == Some(&0xFF) && matches!(jpeg.get(at + 1), Some(0xE0..=0xEF)) {
        at += 2 + usize::from(u16::from_be_bytes([jpeg[at + 2], jpeg[at + 3]]));
    }
    let mut segment = vec![0xFF, 0xE1];
    segment.extend_from_slice(&len16.to_be_bytes());
    segment.extend_from_slice(NS);
    segment.extend_from_slice(xmp);
    jpeg.splice(at..at, segment);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    // Issue 24: more than 64 KiB of EXIF or XMP failed the whole file when written as JPEG;
    // the block that cannot fit is dropped with a warning, the rest is kept.
    #[test]
    fn blocks_too_large_for_a_jpeg_segment_are_dropped_with_a_line_each() {
        let small_xmp = b"<x:xmpmeta/>".to_vec();
        let mut m = Metadata {
            exif: Some(vec![0; 70_000]),
            xmp: Some(small_xmp.clone()),
            ..Metadata::default()
        };
        let dropped = m.fit_jpeg();
        assert_eq!(dropped.len(), 1, "{dropped:?}");
        assert!(dropped[0].contains("EXIF (70000 bytes)"), "{}", dropped[0]);
        assert!(dropped[0].ends_with("dropped"), "{}", dropped[0]);
        assert_eq!((m.exif, m.xmp.as_ref()), (None, Some(&small_xmp)));
        let mut m = Metadata {
            exif: Some(vec![0; 1000]),
            xmp: Some(vec![b' '; 65_600]),
            ..Metadata::default()
        };
        assert_eq!(m.fit_jpeg().len(), 1);
        assert!(m.exif.is_some() && m.xmp.is_none());
    }

    /// A little-endian EXIF block: IFD0 with Orientation 6, GPSInfo and one more tag
    /// (Software), then the GPS directory with a latitude (3 RATIONALs, stored outside it).
    fn exif_with_gps() -> Vec<u8> {
        let mut b = b"II*\0".to_vec();
        b.extend(8u32.to_le_bytes());
        // IFD0 at 8: 3 entries, then the next-IFD offset 0.
        b.extend(3u16.to_le_bytes());
        let entry = |b: &mut Vec<u8>, tag: u16, ty: u16, count: u32, value: u32| {
            b.extend(tag.to_le_bytes());
            b.extend(ty.to_le_bytes());
            b.extend(count.to_le_bytes());
            b.extend(value.to_le_bytes());
        };
        entry(&mut b, 0x0112, 3, 1, 6);
        entry(&mut b, 0x0131, 2, 4, u32::from_le_bytes(*b"gpk\0"));
        entry(&mut b, 0x8825, 4, 1, 50);
        b.extend(0u32.to_le_bytes());
        assert_eq!(b.len(), 50);
        // The GPS IFD at 50: GPSLatitudeRef "N", GPSLatitude 3 RATIONALs at 80.
        b.extend(2u16.to_le_bytes());
        entry(&mut b, 0x0001, 2, 2, u32::from_le_bytes(*b"N\0\0\0"));
        entry(&mut b, 0x0002, 5, 3, 80);
        b.extend(0u32.to_le_bytes());
        assert_eq!(b.len(), 80);
        for v in [52u32, 1, 31, 1, 4711, 100] {
            b.extend(v.to_le_bytes());
        }
        b
    }

    #[test]
    fn exif_without_gps_keeps_the_rest_and_no_coordinate() {
        let exif = exif_with_gps();
        let out = without_gps(&exif).unwrap();
        assert_eq!(out.len(), exif.len());
        let m = Metadata {
            exif: Some(out.clone()),
            ..Metadata::default()
        };
        assert_eq!(m.orientation(), Some(6));
        let ifd = Ifd0::parse(&out).unwrap();
        assert_eq!(ifd.entry(TAG_GPS_IFD), None);
        assert!(ifd.entry(0x0131).is_some());
        // Nothing of the GPS directory is left: the latitude's 4711 and its "N" are gone.
        assert!(!out.windows(4).any(|w| w == 4711u32.to_le_bytes()));
        assert!(!out[50..].iter().any(|&b| b != 0), "{:?}", &out[50..]);
        // Without GPS it is unchanged; malformed, it is None (dropped by Keep::apply).
        assert_eq!(without_gps(&out).unwrap(), out);
        assert_eq!(without_gps(&exif[..60]), None);
        let kept = Keep::parse("icc,exif-no-gps").unwrap().apply(Metadata {
            exif: Some(exif[..60].to_vec()),
            xmp: Some(b"x".to_vec()),
            ..Metadata::default()
        });
        assert_eq!((kept.exif, kept.xmp), (None, None));
    }

    #[test]
    fn keep_lists_parse() {
        assert_eq!(Keep::parse("all"), Ok(Keep::ALL));
        assert_eq!(Keep::parse("none"), Ok(Keep::NONE));
        let k = Keep::parse("icc, exif-no-gps,resolution").unwrap();
        assert_eq!(
            (k.icc, k.exif, k.gps, k.xmp, k.resolution, k.text),
            (true, true, false, false, true, false)
        );
        assert!(Keep::parse("icc,gps")
            .unwrap_err()
            .contains("unknown \"gps\""));
    }

    #[test]
    fn density_converts_between_units() {
        let dpi = Density {
            x: 72,
            y: 300,
            unit: DensityUnit::Inch,
        };
        let png = dpi.to_png();
        assert_eq!((png.xppu, png.yppu), (2835, 11811));
        let back = Density::from_png(&png).to_jfif();
        assert_eq!(back, Some((DensityUnit::Inch, 72, 300)));
        let cm = Density {
            x: 4000,
            y: 4000,
            unit: DensityUnit::Meter,
        };
        assert_eq!(cm.to_jfif(), Some((DensityUnit::Centimeter, 40, 40)));
        assert_eq!(
            cm.to_tiff(),
            (tiff::tags::ResolutionUnit::Centimeter, 40, 40)
        );
    }

    #[test]
    fn quality_of_a_standard_table_is_found_exactly() {
        for q in [1u32, 10, 25, 50, 75, 90, 92, 100] {
            let scale = if q < 50 { 5000 / q } else { 200 - 2 * q };
            let mut t = [0u16; 64];
            for k in 0..64 {
                t[k] = ((u32::from(STD_LUMA[ZIGZAG[k]]) * scale + 50) / 100).clamp(1, 255) as u16;
            }
            assert_eq!(u32::from(estimate_quality(&t)), q);
        }
    }
}
