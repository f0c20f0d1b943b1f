//! Reading inputs: a file (its header read alone, checked against the limits before any pixel
//! is decoded), a pipe or FIFO (read once, its bytes kept), or stdin (`-`: an image, or a
//! stream of them).

use std::io::{BufRead, Cursor, Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use image::ImageFormat;

use super::decode::{decode_from, header_of, kind_of, resolve, Kind};
use super::frames::{decode_frames, Frames, FramesKind, StreamFrames};
use super::stream::FrameStream;
use super::{human_bytes, layout_name, read_cap, Decoded, Header, Image, ReadOptions};

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
    crate::io::output::note_input(path);
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

/// Reads the header from `r`, which is read only as far as its decoder needs (a regular
/// file's pixels are not read; a TIFF's directory is sought).
pub(super) fn read_header<R: BufRead + Seek>(
    mut r: R,
    path: &Path,
    opts: &ReadOptions,
) -> Result<Header> {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::image::{decode, DecodeLimits};

    #[test]
    fn byte_sizes_parse_and_a_size_too_large_says_so() {
        use crate::io::image::parse_byte_size;
        assert_eq!(parse_byte_size("100"), Ok(100));
        assert_eq!(parse_byte_size("1.5KiB"), Ok(1536));
        assert_eq!(parse_byte_size("2G"), Ok(2 << 30));
        assert_eq!(parse_byte_size("16777215TiB"), Ok(16777215 << 40));
        let e = parse_byte_size("99999999999TiB").unwrap_err();
        assert_eq!(
            e,
            "\"99999999999TiB\": too large: at most 16 EiB (16777216TiB)"
        );
        let e = parse_byte_size("0.5").unwrap_err();
        assert_eq!(e, "\"0.5\": must be at least one byte");
    }

    #[test]
    fn sizes_in_messages_are_never_zero() {
        let cases = [
            (0, "0 bytes"),
            (1, "1 byte"),
            (100, "100 bytes"),
            (1023, "1023 bytes"),
            (1024, "1.0 KiB"),
            (9216, "9.0 KiB"),
            (5 << 20, "5.0 MiB"),
            (60000 * 60000 * 4, "13.4 GiB"),
        ];
        for (bytes, want) in cases {
            assert_eq!(human_bytes(bytes), want);
        }
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
}
