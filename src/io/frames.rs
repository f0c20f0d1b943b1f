//! Images one after another on one stream, as `cat a.png b.png` or `ffmpeg -f image2pipe`
//! write them: each frame's end is found from its own format (PNG: the IEND chunk; JPEG: the
//! EOI marker after the last scan; binary PNM and PAM: the header's size), so frames are read
//! one at a time, in bounded memory, without reading the stream to its end first. A frame of
//! any other format (or ASCII PNM, whose size the header does not give) runs to the end of
//! the stream.

use std::io::{BufRead, BufReader, ErrorKind, Read};

use anyhow::{bail, Context, Result};

/// Frames read one at a time from `R`.
pub struct FrameStream<R> {
    reader: BufReader<R>,
    /// The most bytes one frame may take.
    cap: u64,
}

impl<R: Read> FrameStream<R> {
    /// A stream whose frames may each take up to `cap` bytes.
    pub fn new(reader: R, cap: u64) -> FrameStream<R> {
        FrameStream {
            reader: BufReader::with_capacity(1 << 16, reader),
            cap,
        }
    }

    /// Whether the stream has ended (nothing more than blank space is left).
    fn at_end(&mut self) -> Result<bool> {
        loop {
            let buf = fill(&mut self.reader)?;
            if buf.is_empty() {
                return Ok(true);
            }
            // Blank space between or after frames (`echo`, a trailing newline) is no frame.
            let blank = buf.iter().take_while(|b| b.is_ascii_whitespace()).count();
            if blank < buf.len() {
                return Ok(false);
            }
            self.reader.consume(blank);
        }
    }

    /// Everything left on the stream (a frame may take no more).
    pub fn remainder(&mut self) -> Result<Vec<u8>> {
        let mut frame = Frame {
            bytes: Vec::new(),
            cap: self.cap,
        };
        frame.rest(&mut self.reader)?;
        Ok(frame.bytes)
    }

    /// The next frame's bytes, or `None` when the stream has ended. A frame cut short by the
    /// end of the stream is returned as it is, for its decoder to call it truncated.
    pub fn next_frame(&mut self) -> Result<Option<Vec<u8>>> {
        if self.at_end()? {
            return Ok(None);
        }
        // The first bytes, however the pipe delivers them (the reader's buffer may end a byte
        // into the image), to tell its format; then read again, ahead of the rest.
        let mut head = Vec::with_capacity(8);
        (&mut self.reader)
            .take(8)
            .read_to_end(&mut head)
            .context("cannot read")?;
        let mut r = (&head[..]).chain(&mut self.reader);
        let mut frame = Frame {
            bytes: Vec::new(),
            cap: self.cap,
        };
        if head.starts_with(b"\x89PNG") {
            frame.png(&mut r)?;
        } else if head.starts_with(&[0xFF, 0xD8]) {
            frame.jpeg(&mut r)?;
        } else if head.len() >= 2 && head[0] == b'P' && (b'4'..=b'7').contains(&head[1]) {
            frame.pnm(&mut r)?;
        } else {
            frame.rest(&mut r)?;
        }
        Ok(Some(frame.bytes))
    }
}

/// What the reader holds, read when it holds nothing; empty at the end of the stream.
fn fill<B: BufRead>(r: &mut B) -> Result<&[u8]> {
    loop {
        match r.fill_buf() {
            Ok(_) => break,
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(e) => return Err(e).context("cannot read"),
        }
    }
    // Filled now (or at the end): this returns what is held.
    r.fill_buf().context("cannot read")
}

/// One frame being collected.
struct Frame {
    bytes: Vec<u8>,
    cap: u64,
}

impl Frame {
    fn check_cap(&self, more: u64) -> Result<()> {
        if self.bytes.len() as u64 + more > self.cap {
            bail!(
                "an image in the stream is larger than {} MiB (--max-image-bytes raises the limit)",
                self.cap >> 20
            );
        }
        Ok(())
    }

    /// Appends up to `n` bytes; false when the stream ended first.
    fn take<B: BufRead>(&mut self, r: &mut B, n: u64) -> Result<bool> {
        self.check_cap(n)?;
        let got = r
            .by_ref()
            .take(n)
            .read_to_end(&mut self.bytes)
            .context("cannot read")?;
        Ok(got as u64 == n)
    }

    /// The next byte, appended; `None` at the end of the stream.
    fn byte<B: BufRead>(&mut self, r: &mut B) -> Result<Option<u8>> {
        let Some(&b) = fill(r)?.first() else {
            return Ok(None);
        };
        r.consume(1);
        self.check_cap(1)?;
        self.bytes.push(b);
        Ok(Some(b))
    }

    /// The signature, then chunks (length, type, data, CRC) up to and including IEND.
    fn png<B: BufRead>(&mut self, r: &mut B) -> Result<()> {
        if !self.take(r, 8)? {
            return Ok(());
        }
        loop {
            let at = self.bytes.len();
            if !self.take(r, 8)? {
                return Ok(());
            }
            let len = u32::from_be_bytes(self.bytes[at..at + 4].try_into().expect("4 bytes"));
            let iend = &self.bytes[at + 4..at + 8] == b"IEND";
            if !self.take(r, u64::from(len) + 4)? || iend {
                return Ok(());
            }
        }
    }

    /// SOI, then marker segments (their length skips what they hold, an EXIF thumbnail's own
    /// EOI included); after a scan header (SOS), entropy-coded data up to the next marker
    /// (0xFF00 is a stuffed 0xFF; restarts carry no length); the frame ends at EOI.
    fn jpeg<B: BufRead>(&mut self, r: &mut B) -> Result<()> {
        if !self.take(r, 2)? {
            return Ok(());
        }
        loop {
            // Up to the next 0xFF: entropy-coded data in a scan, stray bytes outside one (the
            // decoder judges those).
            let chunk = fill(r)?;
            if chunk.is_empty() {
                return Ok(());
            }
            let n = chunk.iter().position(|&b| b == 0xFF).unwrap_or(chunk.len());
            self.check_cap(n as u64)?;
            self.bytes.extend_from_slice(&chunk[..n]);
            r.consume(n);
            if n > 0 {
                continue;
            }
            self.byte(r)?;
            // Fill bytes: any number of 0xFF before the marker code.
            let code = loop {
                match self.byte(r)? {
                    None => return Ok(()),
                    Some(0xFF) => continue,
                    Some(c) => break c,
                }
            };
            match code {
                0xD9 => return Ok(()),
                // A stuffed 0xFF, TEM, a restart, SOI: no length follows.
                0x00 | 0x01 | 0xD0..=0xD8 => {}
                _ => {
                    let at = self.bytes.len();
                    if !self.take(r, 2)? {
                        return Ok(());
                    }
                    let len = u16::from_be_bytes([self.bytes[at], self.bytes[at + 1]]);
                    if !self.take(r, u64::from(len.saturating_sub(2)))? {
                        return Ok(());
                    }
                }
            }
        }
    }

    /// Binary PNM (P4, P5, P6) or PAM (P7): the header, then the raster its numbers give.
    fn pnm<B: BufRead>(&mut self, r: &mut B) -> Result<()> {
        self.take(r, 2)?;
        let kind = self.bytes[1];
        let size = if kind == b'7' {
            self.pam_header(r)?
        } else {
            let fields = if kind == b'4' { 2 } else { 3 };
            let mut v = [1u64; 3];
            for f in v.iter_mut().take(fields) {
                match self.pnm_number(r)? {
                    Some(n) => *f = n,
                    None => return Ok(()),
                }
            }
            // One whitespace byte ends the header (the number's reader took it).
            let [w, h, maxval] = v;
            match kind {
                b'4' => w.div_ceil(8).checked_mul(h),
                b'5' => sample_bytes(maxval).and_then(|s| w.checked_mul(h)?.checked_mul(s)),
                _ => sample_bytes(maxval).and_then(|s| w.checked_mul(h)?.checked_mul(3 * s)),
            }
        };
        match size {
            Some(n) => {
                self.take(r, n)?;
                Ok(())
            }
            None => bail!("a PNM header in the stream declares an impossible size"),
        }
    }

    /// A decimal number after blank space and comments, with the one byte that ends it.
    fn pnm_number<B: BufRead>(&mut self, r: &mut B) -> Result<Option<u64>> {
        let mut value: Option<u64> = None;
        let mut comment = false;
        loop {
            let Some(b) = self.byte(r)? else {
                return Ok(None);
            };
            match b {
                b'\n' | b'\r' if comment => comment = false,
                _ if comment => {}
                b'#' if value.is_none() => comment = true,
                b'0'..=b'9' => {
                    let v = value.unwrap_or(0);
                    value = v
                        .checked_mul(10)
                        .and_then(|v| v.checked_add(u64::from(b - b'0')));
                    if value.is_none() {
                        bail!("a PNM header in the stream holds a number too large");
                    }
                }
                _ if b.is_ascii_whitespace() && value.is_none() => {}
                _ if b.is_ascii_whitespace() => return Ok(value),
                _ => bail!("a PNM header in the stream is malformed"),
            }
        }
    }

    /// A PAM header's lines up to ENDHDR; the raster's size.
    fn pam_header<B: BufRead>(&mut self, r: &mut B) -> Result<Option<u64>> {
        let (mut w, mut h, mut depth, mut maxval) = (0u64, 0u64, 0u64, 0u64);
        loop {
            let start = self.bytes.len();
            loop {
                match self.byte(r)? {
                    None => return Ok(Some(0)),
                    Some(b'\n') => break,
                    Some(_) if self.bytes.len() - start > 1024 => {
                        bail!("a PAM header in the stream is malformed")
                    }
                    Some(_) => {}
                }
            }
            let line = String::from_utf8_lossy(&self.bytes[start..]).into_owned();
            let mut words = line.split_whitespace();
            let (key, value) = (words.next(), words.next().and_then(|v| v.parse().ok()));
            match (key, value) {
                (Some("ENDHDR"), _) => break,
                (Some("WIDTH"), Some(v)) => w = v,
                (Some("HEIGHT"), Some(v)) => h = v,
                (Some("DEPTH"), Some(v)) => depth = v,
                (Some("MAXVAL"), Some(v)) => maxval = v,
                _ => {}
            }
        }
        Ok(sample_bytes(maxval).and_then(|s| w.checked_mul(h)?.checked_mul(depth)?.checked_mul(s)))
    }

    /// Everything up to the end of the stream.
    fn rest<B: BufRead>(&mut self, r: &mut B) -> Result<()> {
        let room = self.cap - self.bytes.len() as u64;
        self.take(r, room)?;
        if !fill(r)?.is_empty() {
            self.check_cap(1)?;
        }
        Ok(())
    }
}

/// Bytes per sample for a PNM maxval: 1 up to 255, 2 up to 65535.
fn sample_bytes(maxval: u64) -> Option<u64> {
    match maxval {
        1..=255 => Some(1),
        256..=65535 => Some(2),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn split(bytes: &[u8]) -> Vec<Vec<u8>> {
        let mut s = FrameStream::new(bytes, 1 << 20);
        std::iter::from_fn(|| s.next_frame().unwrap()).collect()
    }

    fn encoded(format: image::ImageFormat, channels: u8) -> Vec<u8> {
        let img = crate::io::image::Image::new_u8(
            5,
            3,
            channels,
            (0..15 * channels as usize)
                .map(|i| (i * 53 % 256) as u8)
                .collect(),
        );
        let mut buf = Vec::new();
        crate::io::image::encode(img, format, &mut buf).unwrap();
        buf
    }

    #[test]
    fn concatenated_frames_split_at_their_own_ends() {
        use image::ImageFormat as F;
        let png = encoded(F::Png, 4);
        let jpeg = encoded(F::Jpeg, 3);
        let ppm = encoded(F::Pnm, 3);
        let pgm = b"P5\n# a comment\n2 2\n65535\n\x00\x01\x00\x02\x00\x03\x00\x04".to_vec();
        let pam =
            b"P7\nWIDTH 2\nHEIGHT 1\nDEPTH 4\nMAXVAL 255\nTUPLTYPE RGB_ALPHA\nENDHDR\n12345678"
                .to_vec();
        let tiff = encoded(F::Tiff, 3);
        let parts = [png, jpeg, ppm, pgm, pam, tiff];
        let stream: Vec<u8> = parts.concat();
        assert_eq!(split(&stream), parts);
        // Delivered a byte at a time, as a slow pipe may: each image's first bytes arrive
        // alone at the end of the reader's buffer.
        struct Trickle<'a>(&'a [u8]);
        impl Read for Trickle<'_> {
            fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
                let n = self.0.len().min(buf.len()).min(1);
                buf[..n].copy_from_slice(&self.0[..n]);
                self.0 = &self.0[n..];
                Ok(n)
            }
        }
        let mut s = FrameStream::new(Trickle(&stream), 1 << 20);
        let trickled: Vec<Vec<u8>> = std::iter::from_fn(|| s.next_frame().unwrap()).collect();
        assert_eq!(trickled, parts);
        // Blank space after the last frame is no frame.
        assert_eq!(split(&[&parts[0][..], b"\n"].concat()), parts[..1]);
        assert!(split(b"").is_empty());
    }

    #[test]
    fn jpeg_scans_end_at_the_first_real_marker() {
        // SOI, a tiny APP0 holding FFD9 (inside a segment: no end), SOS, entropy data with a
        // stuffed FF00 and a restart marker, EOI; then a second "frame".
        let frame = b"\xFF\xD8\xFF\xE0\x00\x04\xFF\xD9\xFF\xDA\x00\x02\x12\xFF\x00\x34\xFF\xD0\x56\xFF\xFF\xD9";
        let stream = [&frame[..], &frame[..]].concat();
        assert_eq!(split(&stream), [frame.to_vec(), frame.to_vec()]);
    }

    #[test]
    fn a_cut_frame_is_returned_as_it_is_and_a_huge_one_refused() {
        let png = encoded(image::ImageFormat::Png, 3);
        let cut = &png[..png.len() - 5];
        assert_eq!(split(cut), [cut.to_vec()]);
        let mut s = FrameStream::new(&png[..], 10);
        assert!(s.next_frame().unwrap_err().to_string().contains("larger"));
    }
}
