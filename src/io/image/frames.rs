//! Every frame of an input: the one image, an animation's frames, a TIFF's pages, or each
//! image on stdin, decoded a few images ahead on several threads and handed out in order.

use std::io::{Cursor, Read};
use std::path::Path;

use anyhow::{anyhow, bail, Context, Result};
use image::ImageFormat;

use super::decode::{decode_from, frame_count, multi_frame, resolve, Kind};
use super::formats::image_error;
use super::stream::FrameStream;
use super::{human_bytes, tiff, Decoded, Header, Image, ReadOptions};
use crate::io::metadata::Metadata;

/// The images of one input, from [`Source::frames`]. After an error it ends.
pub struct Frames(pub(super) FramesKind);

pub(super) enum FramesKind {
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
pub(super) struct StreamFrames {
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
    pub(super) fn start<R: Read + Send + 'static>(
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

/// Every frame of an image: the one image, or an animation's frames as RGBA 8-bit, composed
/// as they are shown. The frames together must fit the decoded-bytes limit.
pub(super) fn decode_frames(bytes: &[u8], path: &Path, opts: &ReadOptions) -> Result<Vec<Decoded>> {
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
            let pages = tiff::pages(&mut Cursor::new(inner))?;
            let mut out = Vec::new();
            let mut total = 0u64;
            for (n, &ifd) in pages.iter().enumerate() {
                let page = tiff::page(inner, ifd)
                    .ok_or_else(|| anyhow!("corrupt TIFF: page {} is out of the file", n + 1))?;
                let decoded =
                    tiff::decode(&page, opts).with_context(|| format!("page {}", n + 1))?;
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::image::encode;

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
}
