//! What `gpukit blur` keeps besides the pixels (docs/fidelity.md): ICC profile, EXIF with its
//! orientation, XMP, resolution and PNG text through PNG, JPEG, WebP and TIFF; `--strip`,
//! `--auto-orient`, `--quality` and `--compression`. Inputs are made here with the png, tiff
//! and image-webp encoders (JPEG segments by hand) and outputs read back with them or by hand.

use std::path::Path;

use gpukit::io::image::{self, Image, Samples};

use crate::util::{run, tempdir};

/// Stands in for an ICC profile: only its bytes matter, which must come back unchanged.
fn icc() -> Vec<u8> {
    (0..3000u32).map(|i| (i * 7 % 251) as u8).collect()
}

/// A little-endian EXIF block: Make "gpukit", then Orientation `o`.
fn exif(o: u16) -> Vec<u8> {
    let mut e = b"II*\0\x08\0\0\0".to_vec();
    e.extend_from_slice(&2u16.to_le_bytes());
    // Make (0x010F), ASCII, 7 bytes at offset 38.
    e.extend_from_slice(&[0x0F, 0x01, 2, 0, 7, 0, 0, 0, 38, 0, 0, 0]);
    // Orientation (0x0112), SHORT, 1 value.
    e.extend_from_slice(&[0x12, 0x01, 3, 0, 1, 0, 0, 0]);
    e.extend_from_slice(&o.to_le_bytes());
    e.extend_from_slice(&[0, 0, 0, 0, 0, 0]);
    e.extend_from_slice(b"gpukit\0");
    e
}

/// The orientation tag of an EXIF block as [`exif`] lays it out.
fn orientation_of(exif: &[u8]) -> u16 {
    u16::from_le_bytes([exif[30], exif[31]])
}

const XMP: &[u8] = b"<x:xmpmeta xmlns:x=\"adobe:ns:meta/\"><rdf:RDF/></x:xmpmeta>";

/// A small photo-like RGB image (a gradient with some texture).
fn picture(w: u32, h: u32) -> Image {
    let mut d = Vec::new();
    for y in 0..h {
        for x in 0..w {
            let t = ((x * 7 + y * 13) % 17) as u8;
            d.extend_from_slice(&[
                ((x * 4) as u8).wrapping_add(t),
                (y * 5) as u8,
                ((x + y) as u8) ^ t,
            ]);
        }
    }
    Image::new_u8(w, h, 3, d)
}

/// Writes a PNG with every kind of metadata: iCCP, eXIf, pHYs (72 dpi as 2835 per metre),
/// tEXt, zTXt, iTXt and XMP.
fn png_with_metadata(path: &Path, img: &Image, orientation: u16) {
    let mut info = png::Info::with_size(img.width, img.height);
    info.color_type = match img.channels {
        1 => png::ColorType::Grayscale,
        _ => png::ColorType::Rgb,
    };
    info.bit_depth = png::BitDepth::Eight;
    info.icc_profile = Some(icc().into());
    info.exif_metadata = Some(exif(orientation).into());
    info.pixel_dims = Some(png::PixelDimensions {
        xppu: 2835,
        yppu: 2835,
        unit: png::Unit::Meter,
    });
    let file = std::fs::File::create(path).unwrap();
    let mut enc = png::Encoder::with_info(file, info).unwrap();
    enc.add_text_chunk("Title".into(), "a test".into()).unwrap();
    enc.add_ztxt_chunk("Comment".into(), "compressed words".into())
        .unwrap();
    enc.add_itxt_chunk("Author".into(), "Zoë".into()).unwrap();
    enc.add_itxt_chunk(
        "XML:com.adobe.xmp".into(),
        String::from_utf8(XMP.to_vec()).unwrap(),
    )
    .unwrap();
    let mut w = enc.write_header().unwrap();
    let Samples::U8(d) = &img.samples else {
        unreachable!()
    };
    w.write_image_data(d).unwrap();
    w.finish().unwrap();
}

/// What a PNG holds, read with the png crate.
struct PngMeta {
    icc: Option<Vec<u8>>,
    exif: Option<Vec<u8>>,
    dims: Option<(u32, u32, bool)>,
    /// keyword -> text, over tEXt, zTXt and iTXt.
    text: Vec<(String, String)>,
    bit_depth: png::BitDepth,
}

fn read_png(path: &Path) -> PngMeta {
    let file = std::io::BufReader::new(std::fs::File::open(path).unwrap());
    let mut reader = png::Decoder::new(file).read_info().unwrap();
    let mut buf = vec![0; reader.output_buffer_size().unwrap()];
    reader.next_frame(&mut buf).unwrap();
    reader.finish().unwrap();
    let info = reader.info();
    let mut text: Vec<(String, String)> = info
        .uncompressed_latin1_text
        .iter()
        .map(|c| (c.keyword.clone(), c.text.clone()))
        .collect();
    for c in &info.compressed_latin1_text {
        text.push((c.keyword.clone(), c.get_text().unwrap()));
    }
    for c in &info.utf8_text {
        text.push((c.keyword.clone(), c.get_text().unwrap()));
    }
    text.sort();
    PngMeta {
        icc: info.icc_profile.as_ref().map(|p| p.to_vec()),
        exif: info.exif_metadata.as_ref().map(|p| p.to_vec()),
        dims: info
            .pixel_dims
            .map(|d| (d.xppu, d.yppu, d.unit == png::Unit::Meter)),
        text,
        bit_depth: info.bit_depth,
    }
}

fn all_text() -> Vec<(String, String)> {
    let mut t = vec![
        ("Author".to_string(), "Zoë".to_string()),
        ("Comment".to_string(), "compressed words".to_string()),
        ("Title".to_string(), "a test".to_string()),
        (
            "XML:com.adobe.xmp".to_string(),
            String::from_utf8(XMP.to_vec()).unwrap(),
        ),
    ];
    t.sort();
    t
}

/// A JPEG's segments before the scan, walked by hand: (marker, payload).
fn jpeg_segments(bytes: &[u8]) -> Vec<(u8, Vec<u8>)> {
    assert_eq!(&bytes[..2], &[0xFF, 0xD8]);
    let mut at = 2;
    let mut out = Vec::new();
    while bytes[at] == 0xFF && bytes[at + 1] != 0xDA {
        let len = usize::from(u16::from_be_bytes([bytes[at + 2], bytes[at + 3]]));
        out.push((bytes[at + 1], bytes[at + 4..at + 2 + len].to_vec()));
        at += 2 + len;
    }
    out
}

/// What a JPEG holds: ICC (its APP2 chunks joined), EXIF, XMP, JFIF density (unit, x, y)
/// and the luminance quantisation table in zigzag order.
struct JpegMeta {
    icc: Option<Vec<u8>>,
    exif: Option<Vec<u8>>,
    xmp: Option<Vec<u8>>,
    density: (u8, u16, u16),
    luma: Vec<u8>,
}

fn read_jpeg(path: &Path) -> JpegMeta {
    let bytes = std::fs::read(path).unwrap();
    let mut m = JpegMeta {
        icc: None,
        exif: None,
        xmp: None,
        density: (0, 0, 0),
        luma: Vec::new(),
    };
    for (marker, p) in jpeg_segments(&bytes) {
        match marker {
            0xE0 => {
                m.density = (
                    p[7],
                    u16::from_be_bytes([p[8], p[9]]),
                    u16::from_be_bytes([p[10], p[11]]),
                )
            }
            0xE1 if p.starts_with(b"Exif\0\0") => m.exif = Some(p[6..].to_vec()),
            0xE1 if p.starts_with(b"http://ns.adobe.com/xap/1.0/\0") => {
                m.xmp = Some(p[29..].to_vec())
            }
            0xE2 if p.starts_with(b"ICC_PROFILE\0") => m
                .icc
                .get_or_insert_with(Vec::new)
                .extend_from_slice(&p[14..]),
            0xDB => {
                let mut at = 0;
                while at < p.len() {
                    assert_eq!(p[at] >> 4, 0, "8-bit tables");
                    if p[at] & 15 == 0 {
                        m.luma = p[at + 1..at + 65].to_vec();
                    }
                    at += 65;
                }
            }
            _ => {}
        }
    }
    m
}

/// A JPEG of `img` (made by the image crate) with EXIF, ICC (in two APP2 chunks), XMP and a
/// 300 dpi JFIF density put in by hand.
fn jpeg_with_metadata(path: &Path, img: &Image, quality: u8, orientation: u16) {
    let plain = plain_jpeg(img, quality);
    let segs = jpeg_segments(&plain);
    assert_eq!(segs[0].0, 0xE0, "the encoder starts with JFIF");
    let app0_end = 4 + segs[0].1.len() + 2;
    let mut out = plain[..app0_end].to_vec();
    // JFIF density: units 1 (dpi), 300 x 300.
    out[13] = 1;
    out[14..16].copy_from_slice(&300u16.to_be_bytes());
    out[16..18].copy_from_slice(&300u16.to_be_bytes());
    let segment = |out: &mut Vec<u8>, marker: u8, payload: &[u8]| {
        out.extend_from_slice(&[0xFF, marker]);
        out.extend_from_slice(&(payload.len() as u16 + 2).to_be_bytes());
        out.extend_from_slice(payload);
    };
    let mut app1 = b"Exif\0\0".to_vec();
    app1.extend_from_slice(&exif(orientation));
    segment(&mut out, 0xE1, &app1);
    let profile = icc();
    let halves = profile.split_at(1000);
    for (i, part) in [halves.0, halves.1].iter().enumerate() {
        let mut p = b"ICC_PROFILE\0".to_vec();
        p.extend_from_slice(&[i as u8 + 1, 2]);
        p.extend_from_slice(part);
        segment(&mut out, 0xE2, &p);
    }
    let mut xmp = b"http://ns.adobe.com/xap/1.0/\0".to_vec();
    xmp.extend_from_slice(XMP);
    segment(&mut out, 0xE1, &xmp);
    out.extend_from_slice(&plain[app0_end..]);
    std::fs::write(path, out).unwrap();
}

/// A JPEG of `img` at `quality`, made by the image crate's encoder, without metadata.
fn plain_jpeg(img: &Image, quality: u8) -> Vec<u8> {
    use ::image::ImageEncoder;
    let Samples::U8(d) = &img.samples else {
        unreachable!()
    };
    let mut out = Vec::new();
    ::image::codecs::jpeg::JpegEncoder::new_with_quality(&mut out, quality)
        .write_image(d, img.width, img.height, ::image::ExtendedColorType::Rgb8)
        .unwrap();
    out
}

/// The IJG (libjpeg) luminance table for `quality`, in zigzag order: the standard's table
/// (ITU T.81 K.1) scaled by 5000/q below 50 and 200-2q from 50, each value rounded and kept
/// within 1 to 255.
fn ijg_luma(quality: u32) -> Vec<u8> {
    const K1_ZIGZAG: [u32; 64] = [
        16, 11, 12, 14, 12, 10, 16, 14, 13, 14, 18, 17, 16, 19, 24, 40, 26, 24, 22, 22, 24, 49, 35,
        37, 29, 40, 58, 51, 61, 60, 57, 51, 56, 55, 64, 72, 92, 78, 64, 68, 87, 69, 55, 56, 80,
        109, 81, 87, 95, 98, 103, 104, 103, 62, 77, 113, 121, 112, 100, 120, 92, 101, 103, 99,
    ];
    let scale = if quality < 50 {
        5000 / quality
    } else {
        200 - 2 * quality
    };
    K1_ZIGZAG
        .iter()
        .map(|&v| ((v * scale + 50) / 100).clamp(1, 255) as u8)
        .collect()
}

/// Some bytes, or none.
type Part = Option<Vec<u8>>;

/// What a WebP holds: ICC, EXIF, XMP.
fn read_webp(path: &Path) -> (Part, Part, Part) {
    let file = std::io::BufReader::new(std::fs::File::open(path).unwrap());
    let mut d = image_webp::WebPDecoder::new(file).unwrap();
    (
        d.icc_profile().unwrap(),
        d.exif_metadata().unwrap(),
        d.xmp_metadata().unwrap(),
    )
}

/// What a TIFF holds: ICC, XMP, orientation, (resolution unit, x, y).
struct TiffMeta {
    icc: Option<Vec<u8>>,
    xmp: Option<Vec<u8>>,
    orientation: Option<u16>,
    resolution: Option<(u16, f64, f64)>,
}

fn read_tiff(path: &Path) -> TiffMeta {
    use tiff::tags::Tag;
    let file = std::io::BufReader::new(std::fs::File::open(path).unwrap());
    let mut d = tiff::decoder::Decoder::new(file).unwrap();
    let rational = |d: &mut tiff::decoder::Decoder<_>, tag| -> Option<f64> {
        match d.find_tag(tag).unwrap()? {
            tiff::decoder::ifd::Value::Rational(n, den) => Some(f64::from(n) / f64::from(den)),
            other => panic!("{other:?}"),
        }
    };
    let resolution = match (
        d.find_tag_unsigned::<u16>(Tag::ResolutionUnit).unwrap(),
        rational(&mut d, Tag::XResolution),
        rational(&mut d, Tag::YResolution),
    ) {
        (Some(u), Some(x), Some(y)) => Some((u, x, y)),
        _ => None,
    };
    TiffMeta {
        icc: d
            .find_tag(Tag::IccProfile)
            .unwrap()
            .map(|v| v.into_u8_vec().unwrap()),
        xmp: d
            .find_tag(Tag::Unknown(700))
            .unwrap()
            .map(|v| v.into_u8_vec().unwrap()),
        orientation: d.find_tag_unsigned::<u16>(Tag::Orientation).unwrap(),
        resolution,
    }
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

// The issue's first complaint: an Adobe RGB photo lost its profile, a phone photo its
// orientation. Everything a PNG carries comes back from a PNG, and goes on to each format as
// far as it holds it.
#[test]
fn png_metadata_survives_blur_into_every_format() {
    let dir = tempdir();
    let input = dir.path().join("in.png");
    png_with_metadata(&input, &picture(12, 9), 6);
    let out = dir.path().join("out.png");
    run(&["blur", s(&input), "-r", "1", "-o", s(&out)]).code(0);
    let m = read_png(&out);
    assert_eq!(m.icc, Some(icc()));
    assert_eq!(m.exif, Some(exif(6)));
    assert_eq!(m.dims, Some((2835, 2835, true)));
    assert_eq!(m.text, all_text());

    let jpg = dir.path().join("out.jpg");
    run(&["blur", s(&input), "-r", "1", "-o", s(&jpg)]).code(0);
    let j = read_jpeg(&jpg);
    assert_eq!(j.icc, Some(icc()));
    assert_eq!(j.exif, Some(exif(6)));
    assert_eq!(j.xmp.as_deref(), Some(XMP));
    // 2835 per metre is 72 dpi.
    assert_eq!(j.density, (1, 72, 72));
    // Not from a JPEG: quality 90.
    assert_eq!(j.luma, ijg_luma(90));

    let webp = dir.path().join("out.webp");
    run(&["blur", s(&input), "-r", "1", "-o", s(&webp)]).code(0);
    assert_eq!(
        read_webp(&webp),
        (Some(icc()), Some(exif(6)), Some(XMP.to_vec()))
    );

    let tif = dir.path().join("out.tif");
    run(&["blur", s(&input), "-r", "1", "-o", s(&tif)]).code(0);
    let t = read_tiff(&tif);
    assert_eq!(t.icc, Some(icc()));
    assert_eq!(t.xmp.as_deref(), Some(XMP));
    assert_eq!(t.orientation, Some(6));
    // Per metre goes per centimetre: 28 (2835 / 100, rounded).
    assert_eq!(t.resolution, Some((3, 28.0, 28.0)));

    // And back from each to PNG: what each held comes back.
    for (from, density) in [(&jpg, (2835, 2835, true)), (&webp, (0, 0, false))] {
        let back = dir.path().join("back.png");
        run(&["blur", s(from), "-r", "1", "-o", s(&back)]).code(0);
        let b = read_png(&back);
        assert_eq!(b.icc, Some(icc()), "{}", from.display());
        assert_eq!(b.exif, Some(exif(6)), "{}", from.display());
        let xmp = vec![(
            "XML:com.adobe.xmp".to_string(),
            String::from_utf8(XMP.to_vec()).unwrap(),
        )];
        assert_eq!(b.text, xmp, "{}", from.display());
        let want = (density.2).then_some(density);
        assert_eq!(b.dims, want, "{}", from.display());
    }
    let back = dir.path().join("back.jpg");
    run(&["blur", s(&tif), "-r", "1", "-o", s(&back)]).code(0);
    let b = read_jpeg(&back);
    assert_eq!(b.icc, Some(icc()));
    assert_eq!(b.xmp.as_deref(), Some(XMP));
    assert_eq!(b.density, (2, 28, 28));
    // A TIFF's own orientation tag travels as EXIF.
    let e = b.exif.expect("the orientation as EXIF");
    assert_eq!(&e[..4], b"II*\0");
    assert_eq!(u16::from_le_bytes([e[18], e[19]]), 6);
}

#[test]
fn jpeg_metadata_and_quality_survive_blur() {
    let dir = tempdir();
    let input = dir.path().join("in.jpg");
    jpeg_with_metadata(&input, &picture(16, 16), 70, 3);
    let out = dir.path().join("out.jpg");
    run(&["blur", s(&input), "-r", "1", "-o", s(&out)]).code(0);
    let j = read_jpeg(&out);
    assert_eq!(j.icc, Some(icc()));
    assert_eq!(j.exif, Some(exif(3)));
    assert_eq!(j.xmp.as_deref(), Some(XMP));
    assert_eq!(j.density, (1, 300, 300));
    // JPEG to JPEG keeps the input's quality.
    assert_eq!(j.luma, ijg_luma(70));
    assert_eq!(j.luma, read_jpeg(&input).luma);

    // --quality sets it.
    for q in [20u8, 50, 95] {
        run(&[
            "blur",
            s(&input),
            "-r",
            "1",
            "--quality",
            &q.to_string(),
            "-o",
            s(&out),
        ])
        .code(0);
        assert_eq!(read_jpeg(&out).luma, ijg_luma(u32::from(q)), "quality {q}");
    }
    // At 50 the table is the standard's own.
    assert_eq!(ijg_luma(50)[..8], [16, 11, 12, 14, 12, 10, 16, 14]);

    // Through a batch, converted to PNG: the DPI goes per metre (300 dpi is 11811).
    let outdir = dir.path().join("o");
    run(&[
        "blur",
        s(&input),
        "-r",
        "1",
        "--out-dir",
        s(&outdir),
        "--out-format",
        "png",
    ])
    .code(0);
    let p = read_png(&outdir.join("in.png"));
    assert_eq!(p.icc, Some(icc()));
    assert_eq!(p.exif, Some(exif(3)));
    assert_eq!(p.dims, Some((11811, 11811, true)));
}

#[test]
fn strip_drops_all_metadata() {
    let dir = tempdir();
    let input = dir.path().join("in.png");
    png_with_metadata(&input, &picture(8, 5), 6);
    let out = dir.path().join("out.png");
    run(&["blur", s(&input), "-r", "1", "--strip", "-o", s(&out)]).code(0);
    let m = read_png(&out);
    assert_eq!((m.icc, m.exif, m.dims), (None, None, None));
    assert!(m.text.is_empty(), "{:?}", m.text);

    let jin = dir.path().join("in.jpg");
    jpeg_with_metadata(&jin, &picture(8, 8), 80, 6);
    let jout = dir.path().join("out.jpg");
    run(&["blur", s(&jin), "-r", "1", "--strip", "-o", s(&jout)]).code(0);
    let j = read_jpeg(&jout);
    assert_eq!((j.icc, j.exif, j.xmp), (None, None, None));
    // JFIF's "no density": aspect ratio 1:1.
    assert_eq!(j.density, (0, 1, 1));
    // Stripping keeps the quality: it is how the file was made, not metadata.
    assert_eq!(j.luma, ijg_luma(80));

    let wout = dir.path().join("out.webp");
    run(&["blur", s(&input), "-r", "1", "--strip", "-o", s(&wout)]).code(0);
    assert_eq!(read_webp(&wout), (None, None, None));
}

// --keep chooses what travels, per format; --keep none is --strip; bad lists and
// --strip with --keep are usage errors; --out-dir - makes no folder named -.
#[test]
fn keep_chooses_the_metadata_that_travels() {
    let dir = tempdir();
    let input = dir.path().join("in.png");
    png_with_metadata(&input, &picture(8, 5), 6);
    let out = dir.path().join("out.png");
    run(&[
        "blur",
        s(&input),
        "-r",
        "1",
        "--keep",
        "icc,resolution",
        "-o",
        s(&out),
    ])
    .code(0);
    let m = read_png(&out);
    assert_eq!(m.icc, Some(icc()));
    assert_eq!(m.exif, None);
    assert!(m.dims.is_some());
    assert!(m.text.is_empty(), "{:?}", m.text);

    let jin = dir.path().join("in.jpg");
    jpeg_with_metadata(&jin, &picture(8, 8), 80, 6);
    let jout = dir.path().join("out.jpg");
    run(&[
        "blur",
        s(&jin),
        "-r",
        "1",
        "--keep",
        "exif-no-gps,xmp",
        "-o",
        s(&jout),
    ])
    .code(0);
    let j = read_jpeg(&jout);
    // The input's EXIF has no GPS directory: it travels as it is.
    assert_eq!(
        (j.icc, j.exif, j.xmp),
        (None, Some(exif(6)), Some(XMP.to_vec()))
    );
    assert_eq!(j.density, (0, 1, 1));

    let none = dir.path().join("none.jpg");
    run(&["blur", s(&jin), "-r", "1", "--keep", "none", "-o", s(&none)]).code(0);
    let n = read_jpeg(&none);
    assert_eq!(
        (n.icc, n.exif, n.xmp, n.density),
        (None, None, None, (0, 1, 1))
    );

    let bad = dir.path().join("bad.jpg");
    run(&[
        "blur",
        s(&jin),
        "-r",
        "1",
        "--keep",
        "icc,gps",
        "-o",
        s(&bad),
    ])
    .code(2)
    .one_error_line("unknown \"gps\"");
    run(&[
        "blur",
        s(&jin),
        "-r",
        "1",
        "--keep",
        "icc",
        "--strip",
        "-o",
        s(&bad),
    ])
    .code(2);
    run(&["blur", s(&jin), "-r", "1", "--out-dir", "-"])
        .code(2)
        .one_error_line("a folder, not -");
    assert!(!bad.exists());
}

// A 3x2 image (a b c / d e f) as each EXIF orientation stores it, and what it looks like
// upright, written out by hand.
#[test]
fn auto_orient_turns_all_eight_orientations_upright() {
    let (a, b, c, d, e, f) = (10u8, 20, 30, 40, 50, 60);
    let stored = Image::new_u8(3, 2, 1, vec![a, b, c, d, e, f]);
    let upright: [(u32, u32, Vec<u8>); 8] = [
        (3, 2, vec![a, b, c, d, e, f]), // 1: as stored
        (3, 2, vec![c, b, a, f, e, d]), // 2: mirrored
        (3, 2, vec![f, e, d, c, b, a]), // 3: turned 180 degrees
        (3, 2, vec![d, e, f, a, b, c]), // 4: flipped
        (2, 3, vec![a, d, b, e, c, f]), // 5: transposed
        (2, 3, vec![d, a, e, b, f, c]), // 6: turned 90 degrees clockwise
        (2, 3, vec![f, c, e, b, d, a]), // 7: transversed
        (2, 3, vec![c, f, b, e, a, d]), // 8: turned 90 degrees counter-clockwise
    ];
    let dir = tempdir();
    for (o, (w, h, want)) in (1..=8u16).zip(upright) {
        let input = dir.path().join(format!("o{o}.png"));
        png_with_metadata(&input, &stored, o);
        let out = dir.path().join(format!("o{o}-out.png"));
        run(&["blur", s(&input), "-r", "0", "--auto-orient", "-o", s(&out)]).code(0);
        let got = image::load(&out).unwrap();
        assert_eq!(got, Image::new_u8(w, h, 1, want), "orientation {o}");
        let m = read_png(&out);
        assert_eq!(
            m.exif.map(|e| orientation_of(&e)),
            Some(1),
            "orientation {o}"
        );
        assert_eq!(m.icc, Some(icc()));
        // Without --auto-orient the pixels stay as stored and the tag says how to show them.
        run(&["blur", s(&input), "-r", "0", "-o", s(&out)]).code(0);
        assert_eq!(image::load(&out).unwrap(), stored, "orientation {o}");
        assert_eq!(read_png(&out).exif.map(|e| orientation_of(&e)), Some(o));
    }
}

#[test]
fn compression_best_is_no_larger_than_fast_and_sixteen_bits_stay() {
    let dir = tempdir();
    let input = dir.path().join("in.png");
    image::save(&input, picture(64, 48)).unwrap();
    let size = |level: &str| {
        let out = dir.path().join(format!("c-{level}.png"));
        run(&[
            "blur",
            s(&input),
            "-r",
            "2",
            "--compression",
            level,
            "-o",
            s(&out),
        ])
        .code(0);
        std::fs::metadata(&out).unwrap().len()
    };
    let (none, fast, best) = (size("0"), size("fast"), size("best"));
    assert!(
        best <= fast && fast < none,
        "0: {none}, fast: {fast}, best: {best}"
    );
    // Every level writes the same pixels.
    let want = image::load(&dir.path().join("c-0.png")).unwrap();
    for level in ["fast", "best"] {
        let got = image::load(&dir.path().join(format!("c-{level}.png"))).unwrap();
        assert_eq!(got, want, "{level}");
    }

    let deep = Image::new_u16(5, 4, 3, (0..60).map(|i| i * 1000 + 7).collect());
    let input16 = dir.path().join("deep.png");
    image::save(&input16, deep).unwrap();
    let out16 = dir.path().join("deep-out.png");
    run(&[
        "blur",
        s(&input16),
        "-r",
        "1",
        "--compression",
        "9",
        "-o",
        s(&out16),
    ])
    .code(0);
    assert_eq!(read_png(&out16).bit_depth, png::BitDepth::Sixteen);
}

#[test]
fn encoding_options_that_apply_to_no_output_are_usage_errors() {
    let dir = tempdir();
    let input = dir.path().join("in.png");
    image::save(&input, picture(4, 4)).unwrap();
    let out = |ext: &str| dir.path().join(format!("out.{ext}"));
    run(&["blur", s(&input), "--quality", "80", "-o", s(&out("png"))])
        .code(2)
        .one_error_line("--quality applies to JPEG");
    run(&["blur", s(&input), "--quality", "80", "-o", s(&out("webp"))])
        .code(2)
        .one_error_line("WebP output is lossless");
    run(&[
        "blur",
        s(&input),
        "--compression",
        "best",
        "-o",
        s(&out("jpg")),
    ])
    .code(2)
    .one_error_line("--compression applies to PNG");
    run(&["blur", s(&input), "--quality", "0", "-o", s(&out("jpg"))]).code(2);
    run(&[
        "blur",
        s(&input),
        "--compression",
        "10",
        "-o",
        s(&out("png")),
    ])
    .code(2);
    for ext in ["png", "webp", "jpg"] {
        assert!(!out(ext).exists(), "{ext}");
    }
}

// JPEG's segments hold 64 KiB: a larger EXIF (possible in PNG) is dropped with one warning
// line (issue 24: it failed the file) instead of a corrupt length field; the image is
// written, and --strip says nothing.
#[test]
fn exif_too_large_for_jpeg_is_dropped_with_a_warning() {
    let dir = tempdir();
    let input = dir.path().join("in.png");
    let mut big = exif(1);
    big.resize(70_000, 0);
    let mut info = png::Info::with_size(4, 4);
    info.color_type = png::ColorType::Grayscale;
    info.bit_depth = png::BitDepth::Eight;
    info.exif_metadata = Some(big.into());
    let file = std::fs::File::create(&input).unwrap();
    let mut w = png::Encoder::with_info(file, info)
        .unwrap()
        .write_header()
        .unwrap();
    w.write_image_data(&[7; 16]).unwrap();
    w.finish().unwrap();
    let out = dir.path().join("out.jpg");
    run(&["blur", s(&input), "-o", s(&out)])
        .code(0)
        .one_error_line(
            "out.jpg: its EXIF (70000 bytes) is more than a JPEG segment holds (64 KiB); dropped",
        );
    assert_eq!(read_jpeg(&out).exif, None);
    std::fs::remove_file(&out).unwrap();
    let r = run(&["blur", s(&input), "--strip", "-o", s(&out)]);
    r.code(0);
    assert!(r.stderr.is_empty(), "{}", r.stderr);
    assert_eq!(read_jpeg(&out).exif, None);
}
