//! The stream splitter's tests: frames of every format split at their own ends.

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
    let pam = b"P7\nWIDTH 2\nHEIGHT 1\nDEPTH 4\nMAXVAL 255\nTUPLTYPE RGB_ALPHA\nENDHDR\n12345678"
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

// Issue 24: BMP, WebP, TIFF and ASCII PNM frames ran to the end of the stream, so
// `cat a.bmp b.png | gpukit histogram -` counted one image; blank lines between frames
// were skipped only when the reader's whole buffer was blank.
#[test]
fn every_format_with_a_findable_end_splits_and_blank_lines_between_are_skipped() {
    use image::ImageFormat as F;
    let (bmp, webp, tiff) = (encoded(F::Bmp, 3), encoded(F::WebP, 4), encoded(F::Tiff, 1));
    let p1 = b"P1\n3 2\n1 0 1\n010".to_vec();
    let p2 = b"P2\n# c\n2 1\n65535\n1 65535".to_vec();
    let p3 = b"P3 2 1 255 1 2 3\n 4 5 6".to_vec();
    let png = encoded(F::Png, 2);
    let parts = [bmp, webp, tiff, p1, p2, p3, png];
    let spaced: Vec<u8> = parts.join(&b"\n\n"[..]);
    assert_eq!(split(&spaced), parts);
    assert_eq!(split(&parts.concat()), parts);
    for part in &parts {
        let img = crate::io::image::decode(part).unwrap();
        assert!(img.width > 0, "{}", String::from_utf8_lossy(&part[..2]));
    }
}

// Issue 24: `yes | gpukit histogram -` read 2 GB before refusing what is no image.
#[test]
fn bytes_that_begin_no_image_are_refused_at_once() {
    struct Yes(u64);
    impl Read for Yes {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            self.0 += buf.len() as u64;
            assert!(self.0 < 1 << 20, "read on past the first bytes");
            buf.iter_mut().for_each(|b| *b = b'y');
            Ok(buf.len())
        }
    }
    let mut s = FrameStream::new(Yes(0), 1 << 40);
    let err = s.next_frame().unwrap_err().to_string();
    assert!(err.contains("not an image"), "{err}");
}

#[test]
fn jpeg_scans_end_at_the_first_real_marker() {
    // SOI, a tiny APP0 holding FFD9 (inside a segment: no end), SOS, entropy data with a
    // stuffed FF00 and a restart marker, EOI; then a second "frame".
    let frame =
        b"\xFF\xD8\xFF\xE0\x00\x04\xFF\xD9\xFF\xDA\x00\x02\x12\xFF\x00\x34\xFF\xD0\x56\xFF\xFF\xD9";
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
