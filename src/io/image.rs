//! Images: decoded by the `image` crate into 8- or 16-bit interleaved samples (gray,
//! gray+alpha, RGB, RGBA; palettes and sub-byte depths expanded), and encoded back with the
//! same layout in the format the output's extension names, through an atomic `PendingFile`.
//! The metadata (`io::metadata`) is read with the pixels and written where the format holds it.

use std::io::{BufRead, BufWriter, Cursor, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use anyhow::{anyhow, bail, Context, Result};
use image::{DynamicImage, ImageFormat};
use zune_core::bytestream::{ZByteReaderTrait, ZCursor};

use super::frames::FrameStream;
use super::jpeg::{self, Subsampling};
use super::metadata::{self, Metadata};
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
    if !(1.0..=u64::MAX as f64).contains(&bytes) {
        return Err(format!("{s:?}: must be at least one byte"));
    }
    Ok(bytes as u64)
}

fn human_bytes(b: u64) -> String {
    const GIB: f64 = (1u64 << 30) as f64;
    const MIB: f64 = (1u64 << 20) as f64;
    if b >= 1 << 30 {
        format!("{:.1} GiB", b as f64 / GIB)
    } else {
        format!("{:.1} MiB", b as f64 / MIB)
    }
}

fn layout_name(channels: u8) -> &'static str {
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

const READABLE: &str = "PNG, JPEG, WebP, TIFF, BMP, GIF, PNM, TGA, QOI, ICO";

/// Whether `path` is a regular file (not `-`, a FIFO or a device), which can be read twice.
pub fn is_regular_file(path: &Path) -> bool {
    !is_stdin(path) && std::fs::metadata(path).is_ok_and(|m| m.is_file())
}

/// Whether `path` is `-`: stdin.
pub fn is_stdin(path: &Path) -> bool {
    path == Path::new("-")
}

/// How messages name an input: `stdin` for `-`, else the path.
pub fn input_name(path: &Path) -> String {
    if is_stdin(path) {
        "stdin".to_string()
    } else {
        path.display().to_string()
    }
}

/// An image input whose header has been read and checked: `open` it, look at its `header`,
/// then `decode` it (one image) or take its `frames` (every frame of an animation, every
/// image on stdin). A regular file's header is read alone (its decoders seek to what they
/// need), and the file is read whole once, to decode; anything else (a pipe, a FIFO, `<(...)`)
/// is read once and its bytes kept; stdin (`-`) keeps its first image and the stream.
pub struct Source {
    path: PathBuf,
    header: Header,
    kept: Kept,
}

enum Kept {
    /// A regular file, read when decoded.
    Nothing,
    /// An input that can be read only once, read whole.
    Bytes(Vec<u8>),
    /// stdin: its first image, and the rest of the stream.
    Stream(Vec<u8>, FrameStream<std::io::Stdin>),
}

impl Source {
    /// Reads `path`'s header (`-`: stdin's first image) and checks it against the limits.
    /// Errors name the file.
    pub fn open(path: &Path, opts: &ReadOptions) -> Result<Source> {
        let name = input_name(path);
        if is_stdin(path) {
            let mut stream = FrameStream::new(std::io::stdin(), read_cap(opts));
            let first = stream
                .next_frame()
                .with_context(|| name.clone())?
                .unwrap_or_default();
            let header = read_header(Cursor::new(&first), path, opts).context(name)?;
            return Ok(Source {
                path: path.to_path_buf(),
                header,
                kept: Kept::Stream(first, stream),
            });
        }
        let regular = std::fs::metadata(path)
            .with_context(|| format!("{name}: cannot read"))?
            .is_file();
        let (header, kept) = if regular {
            let file = std::fs::File::open(path).with_context(|| format!("{name}: cannot read"))?;
            let reader = std::io::BufReader::new(file);
            (read_header(reader, path, opts), Kept::Nothing)
        } else {
            let bytes = read_input(path, opts)?;
            (
                read_header(Cursor::new(&bytes), path, opts),
                Kept::Bytes(bytes),
            )
        };
        Ok(Source {
            path: path.to_path_buf(),
            header: header.context(name)?,
            kept,
        })
    }

    pub fn header(&self) -> Header {
        self.header
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The input's bytes: read now (a regular file), or those kept. Stdin must hold one image.
    fn bytes(self, opts: &ReadOptions) -> Result<Vec<u8>> {
        Ok(match self.kept {
            Kept::Nothing => read_input(&self.path, opts)?,
            Kept::Bytes(b) => b,
            Kept::Stream(first, mut stream) => only_image(first, &mut stream)?,
        })
    }

    /// Decodes the one image the input holds. Errors name the file.
    pub fn decode(self, opts: &ReadOptions) -> Result<Decoded> {
        let (path, header) = (self.path.clone(), self.header);
        let name = input_name(&path);
        let bytes = self.bytes(opts)?;
        let decoded = decode_from(&bytes, &path, opts).context(name.clone())?;
        let (h, i) = (header, &decoded.image);
        if (h.width, h.height, h.channels, h.bit_depth)
            != (i.width, i.height, i.channels, i.bit_depth())
        {
            bail!(
                "{name}: changed while it was read (its header said {}x{} {} {}-bit)",
                h.width,
                h.height,
                layout_name(h.channels),
                h.bit_depth
            );
        }
        Ok(decoded)
    }

    /// Every image the input holds: one; each frame of an animated GIF, PNG or WebP (as
    /// RGBA 8-bit, composed as they are shown); or each image on stdin, decoded on `threads`
    /// threads a few images ahead of the iterator (at most 2 x `threads` read and not yet
    /// handed out, so memory stays bounded however long the stream), handed out in stream
    /// order. Errors name the file (and the image on stdin).
    pub fn frames(self, opts: &ReadOptions, threads: usize) -> Result<Frames> {
        if let Kept::Stream(first, stream) = self.kept {
            return Ok(Frames(FramesKind::Stream(StreamFrames::start(
                first, stream, *opts, threads,
            ))));
        }
        let name = input_name(&self.path);
        let path = self.path.clone();
        let bytes = self.bytes(opts)?;
        let frames = decode_frames(&bytes, &path, opts).context(name)?;
        Ok(Frames(FramesKind::Decoded(frames.into_iter())))
    }
}

/// stdin's one image: its first, with what follows unless that is another image (a file's
/// trailing bytes after its image, as some cameras write after a JPEG's end, are the
/// decoder's to ignore, as they are in a file).
fn only_image(mut first: Vec<u8>, stream: &mut FrameStream<std::io::Stdin>) -> Result<Vec<u8>> {
    let rest = stream.remainder().context("stdin")?;
    let next = rest.trim_ascii_start();
    if !next.is_empty() && kind_of(next, Path::new("-")).is_ok() {
        bail!(
            "stdin: more than one image follows on stdin, where one was expected \
             (`gpukit histogram -` reads a stream of images)"
        );
    }
    first.extend_from_slice(&rest);
    Ok(first)
}

/// The images of one input, from [`Source::frames`]. After an error it ends.
pub struct Frames(FramesKind);

enum FramesKind {
    Decoded(std::vec::IntoIter<Decoded>),
    Stream(StreamFrames),
    Ended,
}

impl Iterator for Frames {
    type Item = Result<Decoded>;

    fn next(&mut self) -> Option<Result<Decoded>> {
        let next = match &mut self.0 {
            FramesKind::Decoded(frames) => return frames.next().map(Ok),
            FramesKind::Stream(stream) => stream.next(),
            FramesKind::Ended => return None,
        };
        if !matches!(next, Some(Ok(_))) {
            // Dropping the stream's receiving ends stops its threads.
            self.0 = FramesKind::Ended;
        }
        next
    }
}

/// The images on stdin: one thread splits the stream into images, `threads` others decode
/// them (an animation into its frames), and they are handed out in stream order.
struct StreamFrames {
    decoded: std::sync::mpsc::Receiver<(usize, Result<Vec<Decoded>>)>,
    /// Decoded out of order, waiting for those before them.
    ahead: std::collections::BTreeMap<usize, Result<Vec<Decoded>>>,
    /// The frames of the image handed out last, still to hand out.
    frames: std::vec::IntoIter<Decoded>,
    /// The index of the next image to hand out.
    next: usize,
    /// One entry per image read and not yet handed out: the splitter waits while it is full.
    in_flight: std::sync::mpsc::Receiver<()>,
}

impl StreamFrames {
    fn start<R: Read + Send + 'static>(
        first: Vec<u8>,
        mut stream: FrameStream<R>,
        opts: ReadOptions,
        threads: usize,
    ) -> StreamFrames {
        use std::sync::{mpsc, Arc, Mutex};
        let threads = threads.max(1);
        let (slot_tx, in_flight) = mpsc::sync_channel::<()>(2 * threads);
        let (split_tx, split_rx) = mpsc::sync_channel::<(usize, Result<Vec<u8>>)>(threads);
        let (decoded_tx, decoded) = mpsc::channel();
        std::thread::spawn(move || {
            let mut first = Some(first);
            for index in 0.. {
                if slot_tx.send(()).is_err() {
                    break;
                }
                let bytes = match first.take() {
                    Some(b) => Ok(Some(b)),
                    None => stream.next_frame(),
                };
                let (job, last) = match bytes {
                    Ok(None) => break,
                    Ok(Some(b)) => ((index, Ok(b)), false),
                    Err(e) => ((index, Err(e)), true),
                };
                if split_tx.send(job).is_err() || last {
                    break;
                }
            }
        });
        let split_rx = Arc::new(Mutex::new(split_rx));
        for _ in 0..threads {
            let (split_rx, decoded_tx) = (split_rx.clone(), decoded_tx.clone());
            std::thread::spawn(move || loop {
                let job = split_rx.lock().unwrap_or_else(|e| e.into_inner()).recv();
                let Ok((index, bytes)) = job else {
                    break;
                };
                let result = bytes
                    .and_then(|b| decode_frames(&b, Path::new("-"), &opts))
                    .with_context(|| format!("stdin, image {}", index + 1));
                if decoded_tx.send((index, result)).is_err() {
                    break;
                }
            });
        }
        StreamFrames {
            decoded,
            ahead: Default::default(),
            frames: Vec::new().into_iter(),
            next: 0,
            in_flight,
        }
    }

    fn next(&mut self) -> Option<Result<Decoded>> {
        loop {
            if let Some(frame) = self.frames.next() {
                return Some(Ok(frame));
            }
            if let Some(result) = self.ahead.remove(&self.next) {
                self.next += 1;
                // Its slot is free: the splitter may read one more.
                let _ = self.in_flight.recv();
                match result {
                    Ok(frames) => self.frames = frames.into_iter(),
                    Err(e) => return Some(Err(e)),
                }
                continue;
            }
            // Every thread has ended: the stream has, and all it held was handed out.
            let (index, result) = self.decoded.recv().ok()?;
            self.ahead.insert(index, result);
        }
    }
}

/// Reads an image's header without decoding its pixels, with the default options. Errors
/// name the file.
pub fn probe(path: &Path) -> Result<Header> {
    probe_with(path, &ReadOptions::default())
}

/// Reads an image's header and checks it against the limits. An input that can be read only
/// once (a pipe, a FIFO, stdin) is used up: open a [`Source`] to decode it afterwards.
/// Errors name the file.
pub fn probe_with(path: &Path, opts: &ReadOptions) -> Result<Header> {
    Source::open(path, opts).map(|s| s.header())
}

/// Reads and decodes an image with the default options: damaged files and images over
/// [`DecodeLimits::DEFAULT`] are refused. Errors name the file.
pub fn load(path: &Path) -> Result<Image> {
    load_with(path, &ReadOptions::default()).map(|d| d.image)
}

/// Reads and decodes one image (`-`: from stdin); the format comes from the content (the
/// extension only for TGA, which has no signature). Errors name the file.
pub fn load_with(path: &Path, opts: &ReadOptions) -> Result<Decoded> {
    let bytes = read_input(path, opts)?;
    decode_from(&bytes, path, opts).with_context(|| input_name(path))
}

/// Decodes an image from memory with the default options; the format comes from the content.
pub fn decode(bytes: &[u8]) -> Result<Image> {
    decode_with(bytes, &ReadOptions::default()).map(|d| d.image)
}

/// Decodes an image from memory; the format comes from the content.
pub fn decode_with(bytes: &[u8], opts: &ReadOptions) -> Result<Decoded> {
    decode_from(bytes, Path::new(""), opts)
}

/// The most bytes one input may take: no image format compresses below a bit per pixel...
/// except PNG, far: the decoded limit plus room for metadata.
fn read_cap(opts: &ReadOptions) -> u64 {
    opts.limits.max_bytes.saturating_add(64 << 20)
}

/// Reads a whole input: a file, or anything that reads like one (pipes and FIFOs included;
/// their size is not known in advance, so what is read is capped); `-` is stdin, which must
/// hold one image.
fn read_input(path: &Path, opts: &ReadOptions) -> Result<Vec<u8>> {
    let cap = read_cap(opts);
    if is_stdin(path) {
        let mut stream = FrameStream::new(std::io::stdin(), cap);
        let first = stream.next_frame().context("stdin")?.unwrap_or_default();
        return only_image(first, &mut stream);
    }
    let name = path.display();
    // A folder among a batch's inputs is one a --recursive walk could not list.
    if path.is_dir() {
        match std::fs::read_dir(path) {
            Err(e) => bail!("{name}: cannot list the folder: {e}; the images in it are not read"),
            Ok(_) => bail!("{name}: is a folder, not an image"),
        }
    }
    let file = std::fs::File::open(path).with_context(|| format!("{name}: cannot read"))?;
    super::output::note_input(path);
    let mut bytes = Vec::new();
    file.take(cap.saturating_add(1))
        .read_to_end(&mut bytes)
        .with_context(|| format!("{name}: cannot read"))?;
    if bytes.len() as u64 > cap {
        bail!(
            "{name}: larger than {} (--max-image-bytes raises the limit)",
            human_bytes(cap)
        );
    }
    Ok(bytes)
}

/// The container, from the content; the extension only for TGA (no signature).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Png,
    Jpeg,
    Other(ImageFormat),
}

fn kind_of(bytes: &[u8], path: &Path) -> Result<Kind> {
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
fn resolve<'a>(bytes: &'a [u8], path: &Path) -> Result<(Kind, &'a [u8])> {
    Ok(match kind_of(bytes, path)? {
        Kind::Other(ImageFormat::Ico) => match ico_png(bytes) {
            Some(png) => (Kind::Png, png),
            None => (Kind::Other(ImageFormat::Ico), bytes),
        },
        kind => (kind, bytes),
    })
}

/// Reads the header from `r`, which is read only as far as its decoder needs (a regular
/// file's pixels are not read; a TIFF's directory is sought).
fn read_header<R: BufRead + Seek>(mut r: R, path: &Path, opts: &ReadOptions) -> Result<Header> {
    let mut head = Vec::with_capacity(16);
    (&mut r)
        .take(16)
        .read_to_end(&mut head)
        .context("cannot read")?;
    r.seek(SeekFrom::Start(0)).context("cannot read")?;
    let header = match kind_of(&head, path)? {
        // An ICO's directory points anywhere in it: read it whole (they are small).
        Kind::Other(ImageFormat::Ico) => {
            let mut bytes = Vec::new();
            r.take(read_cap(opts))
                .read_to_end(&mut bytes)
                .context("cannot read")?;
            let (kind, inner) = resolve(&bytes, path)?;
            header_of(Cursor::new(inner), kind, opts)?
        }
        kind => header_of(r, kind, opts)?,
    };
    opts.limits.check(&header)?;
    Ok(header)
}

/// The header of an image of `kind`: the layout `decode` gives one image, or
/// [`Source::frames`] gives each frame of an animation (RGBA 8-bit).
fn header_of<R: BufRead + Seek>(mut r: R, kind: Kind, opts: &ReadOptions) -> Result<Header> {
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
        // The tiff crate's decoder of src/io/tiff.rs reads the layouts the image crate
        // refuses; it takes the file whole (its directories may be anywhere in it).
        Kind::Other(ImageFormat::Tiff) => {
            tiff_pages(&mut r)?;
            r.seek(SeekFrom::Start(0)).context("cannot read")?;
            let mut bytes = Vec::new();
            r.take(read_cap(opts))
                .read_to_end(&mut bytes)
                .context("cannot read")?;
            super::tiff::header(&bytes)?
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

fn decode_from(bytes: &[u8], path: &Path, opts: &ReadOptions) -> Result<Decoded> {
    let (kind, bytes) = resolve(bytes, path)?;
    let frames = frame_count(kind, bytes)?;
    if frames > 1 {
        bail!(multi_frame(kind, frames));
    }
    match kind {
        Kind::Png => decode_png(bytes, opts),
        Kind::Jpeg => decode_jpeg(bytes, opts),
        Kind::Other(ImageFormat::Tiff) => super::tiff::decode(bytes, opts),
        Kind::Other(ImageFormat::Gif) => decode_gif(bytes, opts),
        Kind::Other(f) => decode_other(bytes, f, opts),
    }
}

/// Every frame of an image: the one image, or an animation's frames as RGBA 8-bit, composed
/// as they are shown. The frames together must fit the decoded-bytes limit.
fn decode_frames(bytes: &[u8], path: &Path, opts: &ReadOptions) -> Result<Vec<Decoded>> {
    let (kind, inner) = resolve(bytes, path)?;
    let count = frame_count(kind, inner)?;
    if count <= 1 {
        return Ok(vec![decode_from(bytes, path, opts)?]);
    }
    use image::AnimationDecoder;
    let (format, frames) = match kind {
        Kind::Png => {
            let decoder = image::codecs::png::PngDecoder::new(Cursor::new(inner))
                .and_then(|d| d.apng())
                .map_err(|e| image_error(e, ImageFormat::Png))?;
            (ImageFormat::Png, decoder.into_frames())
        }
        Kind::Other(f @ ImageFormat::Gif) => {
            let decoder = image::codecs::gif::GifDecoder::new(Cursor::new(inner))
                .map_err(|e| image_error(e, f))?;
            (f, decoder.into_frames())
        }
        Kind::Other(f @ ImageFormat::WebP) => {
            let decoder = image::codecs::webp::WebPDecoder::new(Cursor::new(inner))
                .map_err(|e| image_error(e, f))?;
            (f, decoder.into_frames())
        }
        Kind::Other(ImageFormat::Tiff) => {
            let pages = tiff_pages(&mut Cursor::new(inner))?;
            let mut out = Vec::new();
            let mut total = 0u64;
            for (n, &ifd) in pages.iter().enumerate() {
                let page = tiff_page(inner, ifd)
                    .ok_or_else(|| anyhow!("corrupt TIFF: page {} is out of the file", n + 1))?;
                let decoded =
                    super::tiff::decode(&page, opts).with_context(|| format!("page {}", n + 1))?;
                total += decoded.image.samples_bytes();
                check_frames_total(total, count, opts)?;
                out.push(decoded);
            }
            return Ok(out);
        }
        _ => bail!(multi_frame(kind, count)),
    };
    let mut out = Vec::new();
    let mut total = 0u64;
    for frame in frames {
        let buffer = frame.map_err(|e| image_error(e, format))?.into_buffer();
        let (w, h) = buffer.dimensions();
        let header = Header {
            width: w,
            height: h,
            channels: 4,
            bit_depth: 8,
        };
        opts.limits.check(&header)?;
        total += header.decoded_bytes();
        check_frames_total(total, count, opts)?;
        out.push(Decoded {
            image: Image::new_u8(w, h, 4, buffer.into_raw()),
            damage: None,
            metadata: Metadata::default(),
            jpeg_quality: None,
            jpeg_subsampling: None,
        });
    }
    Ok(out)
}

/// The frames of an image decoded so far must fit the limit together.
fn check_frames_total(total: u64, count: u32, opts: &ReadOptions) -> Result<()> {
    if total > opts.limits.max_bytes {
        bail!(
            "its {count} frames would take more than {} decoded, the limit \
             (--max-image-bytes or GPUKIT_MAX_IMAGE_BYTES raise it)",
            human_bytes(opts.limits.max_bytes)
        );
    }
    Ok(())
}

/// How many frames (pages of a TIFF) an image holds.
fn frame_count(kind: Kind, bytes: &[u8]) -> Result<u32> {
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
        Kind::Other(ImageFormat::Tiff) => tiff_pages(&mut Cursor::new(bytes))?.len() as u32,
        Kind::Other(_) => 1,
    })
}

/// The one line refusing an image of several frames where one image is expected.
fn multi_frame(kind: Kind, frames: u32) -> String {
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

fn png_frames<R: BufRead + Seek>(reader: &png::Reader<R>) -> u32 {
    match reader.info().animation_control() {
        Some(actl) => actl.num_frames.max(1),
        None => 1,
    }
}

/// A GIF's frames, counted without decoding their pixels.
fn gif_frames(bytes: &[u8]) -> Result<u32> {
    let gif_error = |e: gif::DecodingError| anyhow!("corrupt GIF: {e}");
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

/// The offsets of a TIFF's pages' directories, in order.
fn tiff_pages<R: Read + Seek>(r: &mut R) -> Result<Vec<u64>> {
    let tiff_error = |e: tiff::TiffError| anyhow!("corrupt TIFF: {e}");
    let mut decoder = tiff::decoder::Decoder::new(r).map_err(tiff_error)?;
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
/// src/io/tiff.rs, which reads the first page only.
fn tiff_page(bytes: &[u8], ifd: u64) -> Option<Vec<u8>> {
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

/// A decoder error as one line; an early end of the data is called what it is.
pub(super) fn describe_io(e: &std::io::Error, format: &str) -> String {
    if e.kind() == std::io::ErrorKind::UnexpectedEof {
        format!("truncated {format}: the data ends early")
    } else {
        format!("cannot decode the {format}: {e}")
    }
}

// ---- PNG: the png crate directly, with both checksums (chunk CRC, zlib Adler-32) verified ----

fn png_reader<R: BufRead + Seek>(
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
    let (width, height) = (info.width, info.height);
    if width > opts.limits.max_width
        || height > opts.limits.max_height
        // At least one byte per pixel, whatever the layout.
        || u64::from(width) * u64::from(height) > opts.limits.max_bytes
    {
        let h = Header {
            width,
            height,
            channels: 1,
            bit_depth: 8,
        };
        opts.limits.check(&h)?;
        bail!("{width}x{height} pixels is over the limit");
    }
    decoder.read_info().map_err(png_error)
}

fn png_error(e: png::DecodingError) -> anyhow::Error {
    match e {
        png::DecodingError::IoError(e) => anyhow!(describe_io(&e, "PNG")),
        png::DecodingError::LimitsExceeded => {
            anyhow!("the PNG needs more memory than the limit (--max-image-bytes raises it)")
        }
        e => anyhow!("corrupt PNG: {e}"),
    }
}

fn png_header<R: BufRead + Seek>(reader: &png::Reader<R>) -> Result<Header> {
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

fn decode_png(bytes: &[u8], opts: &ReadOptions) -> Result<Decoded> {
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

fn jpeg_decoder<R: ZByteReaderTrait>(
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
    use zune_jpeg::errors::DecodeErrors as E;
    let text = match &e {
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
    if lower.contains("premature end")
        || lower.contains("no more bytes")
        || lower.contains("exhausted")
        || lower.contains("eof")
        || matches!(e, E::ExhaustedData)
    {
        anyhow!("truncated JPEG: {text}")
    } else {
        anyhow!("corrupt JPEG: {text}")
    }
}

fn decode_jpeg(bytes: &[u8], opts: &ReadOptions) -> Result<Decoded> {
    let pixels = |strict: bool| -> Result<(Image, Metadata)> {
        let (mut decoder, h) = jpeg_decoder(ZCursor::new(bytes), strict)?;
        opts.limits.check(&h)?;
        let data = decoder.decode().map_err(jpeg_error)?;
        if data.len() != h.width as usize * h.height as usize * h.channels as usize {
            bail!("corrupt JPEG: decoded size differs from the header");
        }
        let metadata = Metadata {
            icc_profile: decoder.icc_profile(),
            exif: decoder.exif().cloned(),
            xmp: decoder.xmp().cloned(),
            ..Metadata::default()
        };
        Ok((Image::new_u8(h.width, h.height, h.channels, data), metadata))
    };
    let headers = metadata::jpeg_headers(bytes);
    let ((image, mut metadata), damage) = match pixels(true) {
        Ok(decoded) => (decoded, None),
        Err(e) if opts.allow_damaged && !is_limit(&e) => (pixels(false)?, Some(e.to_string())),
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

fn is_limit(e: &anyhow::Error) -> bool {
    e.to_string().contains("over the limit")
}

// ---- Everything else: the image crate's decoders, with its limits set ----

fn other_decoder<'a, R: BufRead + Seek + 'a>(
    r: R,
    format: ImageFormat,
) -> Result<Box<dyn image::ImageDecoder + 'a>> {
    let mut reader = image::ImageReader::new(r);
    reader.set_format(format);
    reader.no_limits();
    let decoder = reader.into_decoder().map_err(|e| image_error(e, format))?;
    Ok(Box::new(decoder))
}

fn format_name(format: ImageFormat) -> String {
    format!("{format:?}").to_uppercase()
}

fn image_error(e: image::ImageError, format: ImageFormat) -> anyhow::Error {
    let name = format_name(format);
    let text = match e {
        image::ImageError::IoError(io) => return anyhow!(describe_io(&io, &name)),
        image::ImageError::Unsupported(u) => return anyhow!("unsupported {name}: {u}"),
        image::ImageError::Limits(_) => {
            return anyhow!("the {name} needs more memory than the limit (--max-image-bytes)")
        }
        other => other.to_string(),
    };
    let text = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if text.to_lowercase().contains("eof") || text.to_lowercase().contains("end of file") {
        anyhow!("truncated {name}: {text}")
    } else {
        anyhow!("corrupt {name}: {text}")
    }
}

fn other_header(decoder: &dyn image::ImageDecoder, format: ImageFormat) -> Result<Header> {
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

fn decode_other(bytes: &[u8], format: ImageFormat, opts: &ReadOptions) -> Result<Decoded> {
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
        damage: None,
        metadata,
        jpeg_quality: None,
        jpeg_subsampling: None,
    })
}

/// What the image crate's decoders report (ICC, EXIF, XMP: WebP's). TIFF (io/tiff.rs) and GIF
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

fn gif_error(e: gif::DecodingError) -> anyhow::Error {
    match e {
        gif::DecodingError::Io(io) => anyhow!(describe_io(&io, "GIF")),
        e => anyhow!("corrupt GIF: {e}"),
    }
}

/// A GIF read with the gif crate directly, so that unknown extension blocks are skipped, as
/// GIF89a asks of decoders (image's decoder refuses them), and its header: the logical screen.
fn gif_reader<R: Read>(r: R, opts: &ReadOptions) -> Result<(gif::Decoder<R>, Header)> {
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
fn decode_gif(bytes: &[u8], opts: &ReadOptions) -> Result<Decoded> {
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
    let mut w = BufWriter::new(w);
    if format == ImageFormat::Png {
        write_png(img, meta, opts.compression, &mut w)?;
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
    use png::{BitDepth, ColorType, Compression, DeflateCompression, Filter};
    let mut info = png::Info::with_size(img.width, img.height);
    info.color_type = match img.channels {
        1 => ColorType::Grayscale,
        2 => ColorType::GrayscaleAlpha,
        3 => ColorType::Rgb,
        _ => ColorType::Rgba,
    };
    info.bit_depth = match img.samples {
        Samples::U8(_) => BitDepth::Eight,
        Samples::U16(_) => BitDepth::Sixteen,
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
    fn bad_bytes_are_clear_errors() {
        assert_eq!(decode(b"").unwrap_err().to_string(), "empty file");
        let e = decode(b"hello, not an image").unwrap_err();
        assert!(
            e.to_string().starts_with("not an image gpukit can read"),
            "{e}"
        );
    }

    #[test]
    fn an_animation_is_refused_as_one_image_and_read_whole_as_frames() {
        // An APNG of two 3x2 RGB frames, the first its default image.
        let mut apng = Vec::new();
        {
            let mut encoder = png::Encoder::new(&mut apng, 3, 2);
            encoder.set_color(png::ColorType::Rgb);
            encoder.set_animated(2, 0).unwrap();
            let mut writer = encoder.write_header().unwrap();
            writer.write_image_data(&[10; 18]).unwrap();
            writer.write_image_data(&[200; 18]).unwrap();
            writer.finish().unwrap();
        }
        let err = decode(&apng).unwrap_err().to_string();
        assert!(
            err.starts_with("animated PNG with 2 frames: not supported"),
            "{err}"
        );
        let opts = ReadOptions::default();
        let header = read_header(Cursor::new(&apng), Path::new(""), &opts).unwrap();
        assert_eq!((header.channels, header.bit_depth), (4, 8));
        let frames = decode_frames(&apng, Path::new(""), &opts).unwrap();
        let opaque = |v: u8| Image::new_u8(3, 2, 4, [v, v, v, 255].repeat(6));
        let images: Vec<Image> = frames.into_iter().map(|d| d.image).collect();
        assert_eq!(images, [opaque(10), opaque(200)]);
        // The frames together count against the limit.
        let tight = ReadOptions {
            limits: DecodeLimits {
                max_bytes: 40,
                ..DecodeLimits::DEFAULT
            },
            ..opts
        };
        let err = decode_frames(&apng, Path::new(""), &tight).unwrap_err();
        assert!(err.to_string().contains("its 2 frames"), "{err}");
    }

    #[test]
    fn images_on_a_stream_decode_ahead_and_come_out_in_order() {
        let images: Vec<Image> = (0..40u8)
            .map(|i| {
                Image::new_u8(
                    3 + u32::from(i % 5),
                    2,
                    1,
                    vec![i; 6 + 2 * usize::from(i % 5)],
                )
            })
            .collect();
        let mut bytes = Vec::new();
        for img in &images {
            encode(img.clone(), ImageFormat::Png, &mut bytes).unwrap();
        }
        let opts = ReadOptions::default();
        let stream = |bytes: Vec<u8>| {
            let mut s = FrameStream::new(Cursor::new(bytes), 1 << 20);
            let first = s.next_frame().unwrap().unwrap();
            Frames(FramesKind::Stream(StreamFrames::start(first, s, opts, 3)))
        };
        let got: Vec<Image> = stream(bytes.clone()).map(|d| d.unwrap().image).collect();
        assert_eq!(got, images);
        // Image 8 is damaged: the seven before it come out, then its error, then nothing.
        let mut damaged = Vec::new();
        for (i, img) in images.iter().enumerate() {
            let mut png = Vec::new();
            encode(img.clone(), ImageFormat::Png, &mut png).unwrap();
            if i == 7 {
                png[40] ^= 0xFF;
            }
            damaged.extend(png);
        }
        let results: Vec<Result<Decoded>> = stream(damaged).collect();
        assert_eq!(results.len(), 8);
        assert!(results[..7].iter().all(Result::is_ok));
        let err = format!("{:#}", results[7].as_ref().unwrap_err());
        assert!(err.starts_with("stdin, image 8: corrupt PNG"), "{err}");
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

    #[test]
    fn output_layout_rules() {
        let p = Path::new("x.jpg");
        assert!(check_layout(p, ImageFormat::Jpeg, 3, 8).is_ok());
        assert!(check_layout(p, ImageFormat::Jpeg, 4, 8).is_err());
        assert!(output_format(Path::new("x.png")).is_ok());
        assert!(output_format(Path::new("x.nope")).is_err());
    }
}
