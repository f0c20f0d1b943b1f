//! Images one after another on one stream, as `cat a.png b.png` or `ffmpeg -f image2pipe`
//! write them: each frame's end is found from its own format (PNG: the IEND chunk; JPEG: the
//! EOI marker after the last scan; binary PNM and PAM: the header's size; ASCII PNM: the
//! count of samples its header gives; BMP and WebP: the size in their header; TIFF: the end
//! of the last structure or strip its directories point to), so frames are read one at a
//! time, in bounded memory, without reading the stream to its end first. GIF, QOI and ICO
//! frames run to the end of the stream (they must come last). Bytes that begin no image
//! format are refused at once, not read to the size limit.

use std::io::{BufRead, BufReader, ErrorKind, Read};

use anyhow::{bail, Context, Result};

/// Frames read one at a time from `R`.
pub struct FrameStream<R> {
    reader: BufReader<R>,
    /// The most bytes one frame may take.
    cap: u64,
    /// Bytes read past the end of the last frame (a TIFF's end is found after reading on):
    /// they come before the reader's.
    pending: Vec<u8>,
}

impl<R: Read> FrameStream<R> {
    /// A stream whose frames may each take up to `cap` bytes.
    pub fn new(reader: R, cap: u64) -> FrameStream<R> {
        FrameStream {
            reader: BufReader::with_capacity(1 << 16, reader),
            cap,
            pending: Vec::new(),
        }
    }

    /// Whether the stream has ended (nothing more than blank space is left).
    fn at_end(&mut self) -> Result<bool> {
        // Blank space between or after frames (`echo`, a trailing newline) is no frame.
        let blank = self
            .pending
            .iter()
            .take_while(|b| b.is_ascii_whitespace())
            .count();
        self.pending.drain(..blank);
        if !self.pending.is_empty() {
            return Ok(false);
        }
        loop {
            let buf = fill(&mut self.reader)?;
            if buf.is_empty() {
                return Ok(true);
            }
            let (blank, held) = (
                buf.iter().take_while(|b| b.is_ascii_whitespace()).count(),
                buf.len(),
            );
            self.reader.consume(blank);
            if blank < held {
                return Ok(false);
            }
        }
    }

    /// Everything left on the stream (a frame may take no more).
    pub fn remainder(&mut self) -> Result<Vec<u8>> {
        let pending = std::mem::take(&mut self.pending);
        let mut frame = Frame {
            bytes: Vec::new(),
            cap: self.cap,
        };
        frame.rest(&mut (&pending[..]).chain(&mut self.reader))?;
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
        let pending = std::mem::take(&mut self.pending);
        let mut left: &[u8] = &pending;
        let mut source = (&mut left).chain(&mut self.reader);
        let mut head = Vec::with_capacity(12);
        (&mut source)
            .take(12)
            .read_to_end(&mut head)
            .context("cannot read")?;
        let mut r = (&head[..]).chain(source);
        let mut frame = Frame {
            bytes: Vec::new(),
            cap: self.cap,
        };
        let pnm = |kinds: std::ops::RangeInclusive<u8>| {
            head.len() >= 2 && head[0] == b'P' && kinds.contains(&head[1])
        };
        if head.starts_with(b"\x89PNG") {
            frame.png(&mut r)?;
        } else if head.starts_with(&[0xFF, 0xD8]) {
            frame.jpeg(&mut r)?;
        } else if pnm(b'4'..=b'7') {
            frame.pnm(&mut r)?;
        } else if pnm(b'1'..=b'3') {
            frame.ascii_pnm(&mut r)?;
        } else if head.starts_with(b"BM") {
            frame.sized(&mut r, 14, |h| u64::from(le32(&h[2..6])))?;
        } else if head.starts_with(b"RIFF") && head.get(8..12) == Some(b"WEBP") {
            frame.sized(&mut r, 8, |h| {
                let n = u64::from(le32(&h[4..8]));
                8 + n + (n & 1)
            })?;
        } else if head.starts_with(b"II*\0") || head.starts_with(b"MM\0*") {
            frame.rest(&mut r)?;
            if let Some(end) = tiff_end(&frame.bytes).filter(|&e| e < frame.bytes.len()) {
                let mut tail = frame.bytes.split_off(end);
                // A pad byte may end a TIFF written with word-aligned data.
                if tail.first() == Some(&0) {
                    tail.remove(0);
                }
                self.pending = tail;
            }
            return Ok(Some(frame.bytes));
        } else if head.starts_with(b"GIF8")
            || head.starts_with(b"qoif")
            || head.starts_with(&[0, 0, 1, 0])
        {
            frame.rest(&mut r)?;
        } else if crate::io::video::is_y4m(&head) {
            bail!("a Y4M frame stream, not concatenated images: give --per-frame");
        } else {
            bail!("not an image: its first bytes begin no image format gpukit reads");
        }
        // What this frame left of the pending bytes comes first next time.
        self.pending = left.to_vec();
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

    /// A frame whose header's first `head` bytes give its whole size (`size`).
    fn sized<B: BufRead>(
        &mut self,
        r: &mut B,
        head: u64,
        size: impl Fn(&[u8]) -> u64,
    ) -> Result<()> {
        if !self.take(r, head)? {
            return Ok(());
        }
        let total = size(&self.bytes);
        if total < head {
            bail!("an image header in the stream declares an impossible size");
        }
        self.take(r, total - head)?;
        Ok(())
    }

    /// ASCII PNM (P1, P2, P3): the header's numbers, then as many samples as they give (P1's
    /// bits may be written without space between them).
    fn ascii_pnm<B: BufRead>(&mut self, r: &mut B) -> Result<()> {
        self.take(r, 2)?;
        let kind = self.bytes[1];
        let fields = if kind == b'1' { 2 } else { 3 };
        let mut v = [1u64; 3];
        for f in v.iter_mut().take(fields) {
            match self.pnm_number(r)? {
                Some(n) => *f = n,
                None => return Ok(()),
            }
        }
        let per_pixel = if kind == b'3' { 3 } else { 1 };
        let Some(mut samples) = v[0]
            .checked_mul(v[1])
            .and_then(|n| n.checked_mul(per_pixel))
        else {
            bail!("a PNM header in the stream declares an impossible size");
        };
        if samples == 0 {
            return Ok(());
        }
        if kind == b'1' {
            let mut comment = false;
            while let Some(b) = self.byte(r)? {
                match b {
                    b'\n' | b'\r' if comment => comment = false,
                    _ if comment => {}
                    b'#' => comment = true,
                    b'0' | b'1' => {
                        samples -= 1;
                        if samples == 0 {
                            return Ok(());
                        }
                    }
                    _ if b.is_ascii_whitespace() => {}
                    _ => bail!("an ASCII PNM image in the stream holds a stray byte"),
                }
            }
            return Ok(());
        }
        // Each number but the last takes the one byte after it; the last ends at its digits.
        for _ in 1..samples {
            if self.pnm_number(r)?.is_none() {
                return Ok(());
            }
        }
        self.number_then_end(r)
    }

    /// The last ASCII number of a frame, begun or not: its digits, and nothing after them.
    fn number_then_end<B: BufRead>(&mut self, r: &mut B) -> Result<()> {
        loop {
            let Some(&b) = fill(r)?.first() else {
                return Ok(());
            };
            if b.is_ascii_digit() {
                return self.digits(r);
            }
            self.byte(r)?;
            if b == b'#' {
                while !matches!(self.byte(r)?, None | Some(b'\n' | b'\r')) {}
            } else if !b.is_ascii_whitespace() {
                bail!("an ASCII PNM image in the stream holds a stray byte");
            }
        }
    }

    /// Digits up to the first byte that is not one (left on the stream).
    fn digits<B: BufRead>(&mut self, r: &mut B) -> Result<()> {
        while fill(r)?.first().is_some_and(u8::is_ascii_digit) {
            self.byte(r)?;
        }
        Ok(())
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

fn le32(b: &[u8]) -> u32 {
    u32::from_le_bytes(b[..4].try_into().expect("4 bytes"))
}

/// Where a classic TIFF in `b` ends: past the last directory, value, strip or tile its
/// directories point to (sub-IFDs and the EXIF and GPS directories followed). `None` if the
/// structure cannot be read (BigTIFF, a cut file): the frame is then the whole rest.
fn tiff_end(b: &[u8]) -> Option<usize> {
    let le = b.starts_with(b"II");
    let u16_at = |o: usize| {
        let x: [u8; 2] = b.get(o..o + 2)?.try_into().ok()?;
        Some(usize::from(if le {
            u16::from_le_bytes(x)
        } else {
            u16::from_be_bytes(x)
        }))
    };
    let u32_at = |o: usize| {
        let x: [u8; 4] = b.get(o..o + 4)?.try_into().ok()?;
        Some(if le {
            u32::from_le_bytes(x)
        } else {
            u32::from_be_bytes(x)
        } as usize)
    };
    let mut end = 8;
    let mut todo = vec![u32_at(4)?];
    let mut seen = std::collections::HashSet::new();
    while let Some(ifd) = todo.pop() {
        if ifd == 0 || !seen.insert(ifd) || seen.len() > 4096 {
            continue;
        }
        let n = u16_at(ifd)?;
        let entries = ifd + 2;
        end = end.max(entries + 12 * n + 4);
        let mut data: [Vec<usize>; 4] = Default::default();
        for i in 0..n {
            let e = entries + 12 * i;
            let (tag, kind, count) = (u16_at(e)?, u16_at(e + 2)?, u32_at(e + 4)?);
            let unit = match kind {
                1 | 2 | 6 | 7 => 1,
                3 | 8 => 2,
                4 | 9 | 11 | 13 => 4,
                5 | 10 | 12 => 8,
                _ => 1,
            };
            let size = count.checked_mul(unit)?;
            let at = if size <= 4 { e + 8 } else { u32_at(e + 8)? };
            end = end.max(at.checked_add(size)?);
            let values = || -> Option<Vec<usize>> {
                (0..count.min(1 << 20))
                    .map(|k| match kind {
                        3 => u16_at(at + 2 * k),
                        _ => u32_at(at + 4 * k),
                    })
                    .collect()
            };
            match tag {
                273 => data[0] = values()?,
                279 => data[1] = values()?,
                324 => data[2] = values()?,
                325 => data[3] = values()?,
                330 | 34665 | 34853 | 40965 => todo.extend(values()?),
                _ => {}
            }
        }
        for (offsets, counts) in [(&data[0], &data[1]), (&data[2], &data[3])] {
            for (o, c) in offsets.iter().zip(counts) {
                end = end.max(o.checked_add(*c)?);
            }
        }
        todo.push(u32_at(entries + 12 * n)?);
    }
    Some(end)
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
mod tests;
