//! Image input: damaged files, decompression bombs, pipes, stdin and stdout, streams of
//! images, animations, CMYK, and the one reader every subcommand uses. Every fixture is made
//! here, in a temp folder, from an image the test encodes.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use ::image::ImageFormat;
use gpukit::io::image::{self, DecodeLimits, Image, ReadOptions};
use gpukit::ops::blur::{reference as blur_reference, Kind as BlurKind, Options as BlurOptions};
use gpukit::ops::histogram::{reference as histogram_reference, Channels, Histogram};

use crate::util::{gpukit, run_in, tempdir};

/// A 64x48 RGB test card with some structure (so that JPEG has something to code).
fn card() -> Image {
    let (w, h) = (64u32, 48u32);
    let data = (0..w * h * 3)
        .map(|i| {
            let (p, c) = (i / 3, i % 3);
            let (x, y) = (p % w, p / w);
            ((x * 4 + y * 2 + c * 80) % 256) as u8
        })
        .collect();
    Image::new_u8(w, h, 3, data)
}

fn encoded(img: &Image, format: ImageFormat) -> Vec<u8> {
    let mut buf = Vec::new();
    image::encode(img.clone(), format, &mut buf).unwrap();
    buf
}

/// CRC-32 (IEEE), as PNG chunks carry it.
fn crc32(bytes: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &b in bytes {
        crc ^= u32::from(b);
        for _ in 0..8 {
            crc = if crc & 1 != 0 {
                (crc >> 1) ^ 0xEDB8_8320
            } else {
                crc >> 1
            };
        }
    }
    !crc
}

/// A PNG chunk with its length and CRC.
fn chunk(kind: &[u8; 4], data: &[u8]) -> Vec<u8> {
    let mut out = (data.len() as u32).to_be_bytes().to_vec();
    out.extend(kind);
    out.extend(data);
    let mut crc_in = kind.to_vec();
    crc_in.extend(data);
    out.extend(crc32(&crc_in).to_be_bytes());
    out
}

/// The PNG's chunks as (type, data).
fn chunks(png: &[u8]) -> Vec<([u8; 4], Vec<u8>)> {
    let mut out = Vec::new();
    let mut at = 8;
    while at + 8 <= png.len() {
        let len = u32::from_be_bytes(png[at..at + 4].try_into().unwrap()) as usize;
        let kind: [u8; 4] = png[at + 4..at + 8].try_into().unwrap();
        out.push((kind, png[at + 8..at + 8 + len].to_vec()));
        at += 12 + len;
    }
    out
}

fn assemble(parts: &[([u8; 4], Vec<u8>)]) -> Vec<u8> {
    let mut out = b"\x89PNG\r\n\x1a\n".to_vec();
    for (kind, data) in parts {
        out.extend(chunk(kind, data));
    }
    out
}

/// A PNG whose zlib stream has a wrong Adler-32 (chunk CRCs all correct), as libpng's
/// crashers/badadler.png: only the zlib checksum catches it.
fn bad_adler_png() -> Vec<u8> {
    let mut parts = chunks(&encoded(&card(), ImageFormat::Png));
    let idats: Vec<usize> = (0..parts.len())
        .filter(|&i| &parts[i].0 == b"IDAT")
        .collect();
    let last = parts[*idats.last().unwrap()].1.len();
    parts[*idats.last().unwrap()].1[last - 1] ^= 0x55;
    assemble(&parts)
}

/// A PNG header declaring `w`x`h` RGBA 8-bit, with one small (valid) IDAT: a bomb's header.
fn huge_png(w: u32, h: u32) -> Vec<u8> {
    let mut ihdr = w.to_be_bytes().to_vec();
    ihdr.extend(h.to_be_bytes());
    ihdr.extend([8, 6, 0, 0, 0]);
    // zlib: an empty stored block would do; a real stream of one zero row prefix is enough.
    let idat = [
        0x78, 0x01, 0x01, 0x01, 0x00, 0xfe, 0xff, 0x00, 0x00, 0x01, 0x00, 0x01,
    ];
    assemble(&[
        (*b"IHDR", ihdr),
        (*b"IDAT", idat.to_vec()),
        (*b"IEND", Vec::new()),
    ])
}

/// The card as a JPEG with its frame header patched to declare 65535x65535.
fn huge_jpeg() -> Vec<u8> {
    let mut jpg = encoded(&card(), ImageFormat::Jpeg);
    let sof = jpg
        .windows(2)
        .position(|w| w == [0xFF, 0xC0])
        .expect("a baseline SOF0 marker");
    // FFC0, length (2), precision (1), height (2), width (2).
    jpg[sof + 5..sof + 9].copy_from_slice(&[0xFF, 0xFF, 0xFF, 0xFF]);
    jpg
}

fn write(dir: &Path, name: &str, bytes: &[u8]) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, bytes).unwrap();
    p
}

/// blur and histogram both refuse `name` in one line naming it and containing `needle`.
#[track_caller]
fn both_refuse(dir: &Path, name: &str, needle: &str) {
    let blur = run_in(
        Some(dir),
        &["--backend", "cpu", "blur", name, "-o", "out.png"],
    );
    blur.code(1).one_error_line(&format!("{name}: "));
    blur.one_error_line(needle);
    assert!(!dir.join("out.png").exists(), "blur left an output");
    let hist = run_in(Some(dir), &["--backend", "cpu", "histogram", name]);
    hist.code(1).one_error_line(&format!("{name}: "));
    hist.one_error_line(needle);
    // The file is named once, not twice.
    assert_eq!(hist.stderr.matches(name).count(), 1, "{}", hist.stderr);
    assert_eq!(hist.stdout, "");
}

#[test]
fn truncated_images_are_refused_by_default() {
    let dir = tempdir();
    let png = encoded(&card(), ImageFormat::Png);
    let jpg = encoded(&card(), ImageFormat::Jpeg);
    write(dir.path(), "cut.png", &png[..png.len() / 2]);
    write(dir.path(), "cut.jpg", &jpg[..jpg.len() / 2]);
    both_refuse(dir.path(), "cut.png", "truncated PNG");
    both_refuse(dir.path(), "cut.jpg", "truncated JPEG");
    // Cut in a JPEG's headers, half a GIF and half a QOI: each decoder says so in its own
    // words (not enough bytes, an unexpected end of file, a buffer it could not fill), which
    // read as "corrupt"; all are one sentence.
    write(dir.path(), "head.jpg", &jpg[..100]);
    for (format, ext) in [(ImageFormat::Gif, "gif"), (ImageFormat::Qoi, "qoi")] {
        let bytes = encoded(&card(), format);
        write(
            dir.path(),
            &format!("half.{ext}"),
            &bytes[..bytes.len() / 2],
        );
    }
    for (name, format) in [
        ("head.jpg", "JPEG"),
        ("half.gif", "GIF"),
        ("half.qoi", "QOI"),
    ] {
        both_refuse(
            dir.path(),
            name,
            &format!("{name}: truncated {format}: the data ends early"),
        );
    }
}

#[test]
fn allow_damaged_reads_them_with_one_warning() {
    let dir = tempdir();
    let jpg = encoded(&card(), ImageFormat::Jpeg);
    write(dir.path(), "cut.jpg", &jpg[..jpg.len() / 2]);
    write(dir.path(), "adler.png", &bad_adler_png());
    for name in ["cut.jpg", "adler.png"] {
        let r = run_in(
            Some(dir.path()),
            &["--backend", "cpu", "--allow-damaged", "histogram", name],
        );
        r.code(0);
        assert!(
            r.stdout.starts_with(&format!("{name}: 64x48 RGB 8-bit")),
            "{}",
            r.stdout
        );
        let lines: Vec<&str> = r.stderr.lines().collect();
        assert_eq!(lines.len(), 1, "{}", r.stderr);
        assert!(
            lines[0].starts_with("gpukit: warning: ") && lines[0].contains(name),
            "{}",
            r.stderr
        );
    }
    // The bad checksum is the only damage: the pixels are the card's.
    let opts = ReadOptions {
        allow_damaged: true,
        ..ReadOptions::default()
    };
    let d = image::decode_with(&bad_adler_png(), &opts).unwrap();
    assert_eq!(d.image, card());
    assert!(d.damage.unwrap().contains("corrupt PNG"));
}

/// Where the entropy-coded data of `jpeg`'s `nth` scan starts and ends (at the marker after it).
fn scan_data(jpeg: &[u8], nth: usize) -> (usize, usize) {
    let sos = jpeg
        .windows(2)
        .enumerate()
        .filter(|(_, w)| w == &[0xFF, 0xDA])
        .nth(nth)
        .expect("that many scans")
        .0;
    let start = sos + 2 + usize::from(u16::from_be_bytes([jpeg[sos + 2], jpeg[sos + 3]]));
    let end = (start..jpeg.len() - 1)
        .find(|&i| jpeg[i] == 0xFF && !matches!(jpeg[i + 1], 0x00 | 0xD0..=0xD7 | 0xFF))
        .unwrap();
    (start, end)
}

#[test]
fn a_jpeg_cut_short_by_a_marker_is_refused_as_truncated() {
    // zune-jpeg decodes on past a marker inside a scan's data as if zero bits followed: without
    // the check, these decoded with exit 0 and the rows after the cut lost.
    let dir = tempdir();
    let noise = crate::util::random_image(96, 64, 3, 8, 7);
    let progressive = gpukit::io::image::WriteOptions {
        progressive: true,
        ..Default::default()
    };
    let mut files = Vec::new();
    for (kind, opts, nth) in [
        ("baseline", Default::default(), 0),
        // The second scan: the first AC scan of libjpeg's script (its refinement scans are
        // not caught, docs/formats.md).
        ("progressive", progressive, 1),
    ] {
        let mut jpg = Vec::new();
        image::encode_with(
            noise.clone(),
            ImageFormat::Jpeg,
            &Default::default(),
            &opts,
            &mut jpg,
        )
        .unwrap();
        // The whole file decodes, to the pixels zune-jpeg gives without the check.
        assert!(image::decode(&jpg).is_ok(), "{kind}");
        let (start, end) = scan_data(&jpg, nth);
        let cut = &jpg[..(start + end) / 2];
        let cut = &cut[..cut.iter().rposition(|&b| b != 0xFF).unwrap() + 1];
        let eoi = [cut, &[0xFF, 0xD9]].concat();
        // A stray EOI inside the data, the rest of the file after it.
        let stray = [cut, &[0xFF, 0xD9], &jpg[cut.len()..]].concat();
        let comment = [cut, &[0xFF, 0xFE, 0x00, 0x02, 0xFF, 0xD9]].concat();
        for (name, bytes) in [("eoi", eoi), ("stray", stray), ("comment", comment)] {
            let name = format!("{kind}-{name}.jpg");
            write(dir.path(), &name, &bytes);
            files.push(name);
        }
    }
    for name in &files {
        both_refuse(
            dir.path(),
            name,
            "truncated JPEG: a scan's data ends before its last block",
        );
        // --allow-damaged reads it, with a warning.
        let r = run_in(
            Some(dir.path()),
            &["--backend", "cpu", "--allow-damaged", "histogram", name],
        );
        r.code(0);
        assert!(r.stderr.starts_with("gpukit: warning: "), "{}", r.stderr);
        assert!(r.stderr.contains("truncated JPEG"), "{}", r.stderr);
    }
}

#[test]
fn a_wrong_zlib_checksum_is_refused() {
    let dir = tempdir();
    write(dir.path(), "adler.png", &bad_adler_png());
    both_refuse(dir.path(), "adler.png", "corrupt PNG");
    // A byte of the last IDAT's data (the zlib stream fails before the CRC is read).
    let mut png = encoded(&card(), ImageFormat::Png);
    let n = png.len();
    png[n - 20] ^= 1; // inside the last IDAT's data, before IEND
    write(dir.path(), "data.png", &png);
    both_refuse(dir.path(), "data.png", "corrupt PNG");
    // And a wrong chunk CRC, the last IDAT's (IEND's 12 bytes after it): the chunk named by
    // its type, not as the png crate's struct.
    png[n - 20] ^= 1;
    png[n - 13] ^= 1;
    write(dir.path(), "crc.png", &png);
    both_refuse(
        dir.path(),
        "crc.png",
        "crc.png: corrupt PNG: CRC error in an IDAT chunk",
    );
}

#[test]
fn decompression_bombs_are_refused_from_the_header() {
    let dir = tempdir();
    write(dir.path(), "bomb.png", &huge_png(40000, 40000));
    write(dir.path(), "bomb.jpg", &huge_jpeg());
    for name in ["bomb.png", "bomb.jpg"] {
        let start = Instant::now();
        both_refuse(dir.path(), name, "over the limit");
        // Two processes each, on a debug build: well under what decoding would take.
        assert!(start.elapsed() < Duration::from_secs(20), "{name}");
    }
    // The limit is the user's: raised, the PNG header passes and the (tiny) data fails.
    let r = run_in(
        Some(dir.path()),
        &[
            "--max-image-bytes",
            "8GiB",
            "--backend",
            "cpu",
            "histogram",
            "bomb.png",
        ],
    );
    r.code(1).one_error_line("bomb.png: ");
    assert!(!r.stderr.contains("over the limit"), "{}", r.stderr);
    let r = run_in(
        Some(dir.path()),
        &["--max-image-bytes", "lots", "histogram", "x.png"],
    );
    r.code(2).one_error_line("--max-image-bytes");
    // The message gives the header's layout and its real size (it said "gray 8-bit" and a
    // quarter of it), small sizes in bytes or KiB (not "0.0 MiB").
    write(dir.path(), "bomb6.png", &huge_png(60000, 60000));
    both_refuse(
        dir.path(),
        "bomb6.png",
        "bomb6.png: 60000x60000 RGBA 8-bit would take 13.4 GiB decoded, over the limit of",
    );
    write(dir.path(), "card.png", &encoded(&card(), ImageFormat::Png));
    let r = run_in(
        Some(dir.path()),
        &[
            "--max-image-bytes",
            "100",
            "--backend",
            "cpu",
            "histogram",
            "card.png",
        ],
    );
    r.code(1).one_error_line(
        "card.png: 64x48 RGB 8-bit would take 9.0 KiB decoded, over the limit of 100 bytes",
    );
}

#[test]
fn the_library_takes_decode_limits() {
    let png = encoded(&card(), ImageFormat::Png);
    let jpg = encoded(&card(), ImageFormat::Jpeg);
    let tiff = encoded(&card(), ImageFormat::Tiff);
    // 64x48 RGB 8-bit is 9216 bytes decoded.
    for (bytes, what) in [(&png, "png"), (&jpg, "jpeg"), (&tiff, "tiff")] {
        let fits = ReadOptions {
            limits: DecodeLimits {
                max_bytes: 9216,
                ..DecodeLimits::DEFAULT
            },
            ..ReadOptions::default()
        };
        assert!(image::decode_with(bytes, &fits).is_ok(), "{what}");
        let small = ReadOptions {
            limits: DecodeLimits {
                max_bytes: 9215,
                ..DecodeLimits::DEFAULT
            },
            ..ReadOptions::default()
        };
        let e = image::decode_with(bytes, &small).unwrap_err().to_string();
        assert!(e.contains("over the limit"), "{what}: {e}");
        let narrow = ReadOptions {
            limits: DecodeLimits {
                max_width: 63,
                ..DecodeLimits::DEFAULT
            },
            ..ReadOptions::default()
        };
        let e = image::decode_with(bytes, &narrow).unwrap_err().to_string();
        assert!(e.contains("over the limit"), "{what}: {e}");
    }
}

#[test]
fn every_subcommand_reads_by_content_not_extension() {
    let dir = tempdir();
    let img = card();
    // A PNG named .jpg, a JPEG named .png, and a TGA (no signature: its extension counts).
    write(dir.path(), "png.jpg", &encoded(&img, ImageFormat::Png));
    write(dir.path(), "tga.tga", &encoded(&img, ImageFormat::Tga));
    for name in ["png.jpg", "tga.tga"] {
        run_in(
            Some(dir.path()),
            &["--backend", "cpu", "blur", "-r", "0", name, "-o", "out.png"],
        )
        .code(0);
        assert_eq!(
            image::load(&dir.path().join("out.png")).unwrap(),
            img,
            "{name}"
        );
        let r = run_in(Some(dir.path()), &["--backend", "cpu", "histogram", name]);
        r.code(0);
        assert!(
            r.stdout.starts_with(&format!("{name}: 64x48 RGB")),
            "{}",
            r.stdout
        );
    }
}

/// Writes `bytes` into a new FIFO at `path` from another thread, once a reader opens it.
fn fifo(path: &Path, bytes: Vec<u8>) -> std::thread::JoinHandle<()> {
    let made = std::process::Command::new("mkfifo")
        .arg(path)
        .status()
        .unwrap();
    assert!(made.success());
    let path = path.to_path_buf();
    std::thread::spawn(move || {
        let mut f = std::fs::OpenOptions::new().write(true).open(path).unwrap();
        // The reader may stop early on an error; a broken pipe is fine then.
        let _ = f.write_all(&bytes);
    })
}

#[test]
fn pipes_and_fifos_are_read_like_files() {
    let dir = tempdir();
    let img = card();
    let png = encoded(&img, ImageFormat::Png);
    let writer = fifo(&dir.path().join("in.fifo"), png.clone());
    let r = run_in(
        Some(dir.path()),
        &["--backend", "cpu", "histogram", "in.fifo"],
    );
    writer.join().unwrap();
    r.code(0);
    assert!(
        r.stdout.starts_with("in.fifo: 64x48 RGB 8-bit"),
        "{}",
        r.stdout
    );
    // The same counts as from a regular file.
    write(dir.path(), "in.png", &png);
    let file = run_in(
        Some(dir.path()),
        &["--backend", "cpu", "histogram", "in.png"],
    );
    assert_eq!(r.stdout.replacen("in.fifo", "in.png", 1), file.stdout);
    // blur reads a FIFO too, and a pipe on its stdin.
    std::fs::remove_file(dir.path().join("in.fifo")).unwrap();
    let writer = fifo(&dir.path().join("in.fifo"), png.clone());
    run_in(
        Some(dir.path()),
        &[
            "--backend",
            "cpu",
            "blur",
            "-r",
            "0",
            "in.fifo",
            "-o",
            "out.png",
        ],
    )
    .code(0);
    writer.join().unwrap();
    assert_eq!(image::load(&dir.path().join("out.png")).unwrap(), img);
    let mut child = gpukit()
        .args(["--backend", "cpu", "histogram", "/dev/stdin"])
        .current_dir(dir.path())
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(&png).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("64x48 RGB 8-bit"));
    // An empty pipe is an empty file.
    let writer = fifo(&dir.path().join("empty.fifo"), Vec::new());
    let r = run_in(
        Some(dir.path()),
        &["--backend", "cpu", "histogram", "empty.fifo"],
    );
    writer.join().unwrap();
    r.code(1).one_error_line("empty.fifo: empty file");
}

/// An ICO of one entry holding `png`.
fn ico_with_png(png: &[u8], side: u8) -> Vec<u8> {
    let mut ico = vec![0, 0, 1, 0, 1, 0];
    ico.extend([side, side, 0, 0, 1, 0, 32, 0]);
    ico.extend((png.len() as u32).to_le_bytes());
    ico.extend(22u32.to_le_bytes());
    ico.extend(png);
    ico
}

#[test]
fn ico_entries_holding_any_png_are_read() {
    // Gray, and 16-bit RGB: PNGs that are not RGBA, which image's ICO decoder refuses.
    let gray = Image::new_u8(16, 16, 1, (0..256).map(|i| i as u8).collect());
    let rgb16 = Image::new_u16(16, 16, 3, (0..768).map(|i| (i * 85) as u16).collect());
    for img in [gray, rgb16] {
        let ico = ico_with_png(&encoded(&img, ImageFormat::Png), 16);
        assert_eq!(image::decode(&ico).unwrap(), img, "{}", img.describe());
    }
}

// ---- Streams: `-` on stdin and stdout, concatenated images, animations, CMYK ----

/// Runs gpukit in `dir` with `input` written to its stdin through a pipe: the exit code,
/// stdout's bytes and stderr.
fn piped(dir: &Path, args: &[&str], input: Vec<u8>) -> (i32, Vec<u8>, String) {
    let mut child = gpukit()
        .args(args)
        .current_dir(dir)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    // Written from another thread, so that a child writing its stdout meanwhile never waits
    // on us; a child that stops reading early makes this a broken pipe, which is fine.
    let writer = std::thread::spawn(move || {
        let _ = stdin.write_all(&input);
    });
    let out = child.wait_with_output().unwrap();
    writer.join().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    (out.status.code().unwrap_or(-1), out.stdout, stderr)
}

/// The counts of channel `c` of a histogram document's input or sum.
fn counts(doc: &serde_json::Value, c: usize) -> Vec<u64> {
    serde_json::from_value(doc["channels"][c]["counts"].clone()).unwrap()
}

#[test]
fn stdin_to_stdout_through_real_pipes() {
    let dir = tempdir();
    let img = card();
    let png = encoded(&img, ImageFormat::Png);
    let want = blur_reference(&img, &BlurOptions::new(BlurKind::Box, 3, 1)).unwrap();
    let blur = ["--backend", "cpu", "blur", "-", "-r", "3", "-o", "-"];
    // PNG on stdout by default: the CPU reference's pixels.
    let (code, out, err) = piped(dir.path(), &blur, png.clone());
    assert_eq!(code, 0, "{err}");
    assert!(out.starts_with(b"\x89PNG"), "not a PNG on stdout");
    assert_eq!(image::decode(&out).unwrap(), want);
    // --out-format names stdout's format.
    let tiff = [&blur[..], &["--out-format", "tif"]].concat();
    let (code, out, err) = piped(dir.path(), &tiff, png.clone());
    assert_eq!(code, 0, "{err}");
    assert!(
        out.starts_with(b"II*\0") || out.starts_with(b"MM\0*"),
        "not a TIFF"
    );
    assert_eq!(image::decode(&out).unwrap(), want);
    // A file's extension names its format: --out-format beside it is a usage error.
    let (code, _, err) = piped(
        dir.path(),
        &[&blur[..7], &["x.png", "--out-format", "jpg"]].concat(),
        png.clone(),
    );
    assert_eq!(code, 2, "{err}");

    // cat card.png | gpukit blur - -r 3 -o - | gpukit histogram - --json -: two processes
    // joined by a pipe of their own.
    let mut first = gpukit()
        .args(blur)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let second = gpukit()
        .args(["--backend", "cpu", "histogram", "-", "--json", "-"])
        .stdin(Stdio::from(first.stdout.take().unwrap()))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    first.stdin.take().unwrap().write_all(&png).unwrap();
    assert!(first.wait().unwrap().success());
    let out = second.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let input = &doc["inputs"][0];
    assert_eq!(input["path"], "-");
    assert_eq!(input["frames"], 1);
    let hist = histogram_reference(&want, Channels::of(3, false), 256);
    for c in 0..4 {
        assert_eq!(counts(input, c), hist.channel(c), "channel {c}");
    }
}

#[test]
fn one_image_is_expected_on_stdin_except_by_histogram() {
    let dir = tempdir();
    let png = encoded(&card(), ImageFormat::Png);
    let two = [&png[..], &png[..]].concat();
    let (code, out, err) = piped(
        dir.path(),
        &["--backend", "cpu", "blur", "-", "-o", "out.png"],
        two.clone(),
    );
    assert_eq!((code, out.len()), (1, 0), "{err}");
    assert!(
        err.starts_with("gpukit: stdin: more than one image"),
        "{err}"
    );
    assert!(!dir.path().join("out.png").exists());
    // Bytes after the image that are no image are its trailing data, as in a file.
    let jpeg = [&encoded(&card(), ImageFormat::Jpeg)[..], b"camera trailer"].concat();
    let (code, _, err) = piped(
        dir.path(),
        &["--backend", "cpu", "blur", "-", "-r", "0", "-o", "out.png"],
        jpeg.clone(),
    );
    assert_eq!(code, 0, "{err}");
    write(dir.path(), "trailer.jpg", &jpeg);
    assert_eq!(
        image::load(&dir.path().join("out.png")).unwrap(),
        image::load(&dir.path().join("trailer.jpg")).unwrap()
    );
    // stdin can be read once.
    let (code, _, err) = piped(dir.path(), &["histogram", "-", "-"], two);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("stdin (`-`) can be read once"), "{err}");
    // compare reads one side from stdin.
    write(dir.path(), "card.png", &png);
    let (code, out, err) = piped(
        dir.path(),
        &["--backend", "cpu", "compare", "card.png", "-"],
        png.clone(),
    );
    assert_eq!(code, 0, "{err}");
    assert!(String::from_utf8_lossy(&out).contains("match"));
}

#[test]
fn concatenated_images_on_stdin_sum_like_the_files() {
    let dir = tempdir();
    // PNG with alpha, JPEG, binary PPM: as `cat` or `ffmpeg -f image2pipe` write them.
    let mut rgba = Image::new_u8(20, 12, 4, (0..960).map(|i| (i * 7 % 256) as u8).collect());
    if let gpukit::io::image::Samples::U8(v) = &mut rgba.samples {
        v.chunks_mut(4).for_each(|p| p[3] = 255);
    }
    let files = [
        ("a.png", encoded(&rgba, ImageFormat::Png)),
        ("b.jpg", encoded(&card(), ImageFormat::Jpeg)),
        ("c.ppm", encoded(&card(), ImageFormat::Pnm)),
    ];
    let mut want = Histogram::zeros(Channels::of(4, false), 64);
    for (name, bytes) in &files {
        let path = write(dir.path(), name, bytes);
        want.add(&histogram_reference(
            &image::load(&path).unwrap(),
            want.channels,
            64,
        ));
    }
    let stream: Vec<u8> = files.iter().flat_map(|(_, b)| b.clone()).collect();
    let args = [
        "--backend",
        "cpu",
        "histogram",
        "--bins",
        "64",
        "--sum",
        "--json",
        "-",
    ];
    let (code, out, err) = piped(dir.path(), &[&args[..], &["-"]].concat(), stream.clone());
    assert_eq!(code, 0, "{err}");
    let doc: serde_json::Value = serde_json::from_slice(&out).unwrap();
    assert_eq!(doc["inputs"][0]["frames"], 3);
    assert_eq!(doc["inputs"][0]["pixels"], want.pixels);
    assert_eq!(doc["sum"]["pixels"], want.pixels);
    for c in 0..4 {
        assert_eq!(counts(&doc["sum"], c), want.channel(c), "channel {c}");
        assert_eq!(counts(&doc["inputs"][0], c), want.channel(c), "channel {c}");
    }
    // The same sum from the files themselves.
    let r = run_in(
        Some(dir.path()),
        &[&args[..], &["a.png", "b.jpg", "c.ppm"]].concat(),
    );
    r.code(0);
    let files_doc: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
    assert_eq!(files_doc["sum"]["channels"], doc["sum"]["channels"]);
    // The summary says how many images it counted; a cut last image fails the input.
    let (code, out, _) = piped(
        dir.path(),
        &args[..3].iter().chain(&["-"]).copied().collect::<Vec<_>>(),
        stream.clone(),
    );
    assert_eq!(code, 0);
    let first = String::from_utf8_lossy(&out)
        .lines()
        .next()
        .unwrap()
        .to_string();
    // Named `stdin`, as messages name it (it said `-`); the document keeps the path given.
    assert!(
        first.starts_with("stdin: 20x12 RGBA 8-bit, 3 frames of "),
        "{first}"
    );
    assert_eq!(doc["inputs"][0]["path"], "-");
    let cut = &stream[..stream.len() - 10];
    let (code, _, err) = piped(dir.path(), &[&args[..3], &["-"]].concat(), cut.to_vec());
    assert_eq!(code, 1);
    assert!(err.contains("stdin, image 3: "), "{err}");
}

#[test]
fn histogram_reads_each_input_once_fifos_and_stdin_included() {
    let dir = tempdir();
    let a = card();
    let b = Image::new_u8(9, 7, 3, (0..189).map(|i| (i * 29 % 256) as u8).collect());
    let writer = fifo(&dir.path().join("a.fifo"), encoded(&a, ImageFormat::Png));
    let (code, out, err) = piped(
        dir.path(),
        &[
            "--backend",
            "cpu",
            "histogram",
            "--sum",
            "--json",
            "-",
            "a.fifo",
            "-",
        ],
        encoded(&b, ImageFormat::Png),
    );
    writer.join().unwrap();
    assert_eq!(code, 0, "{err}");
    let doc: serde_json::Value = serde_json::from_slice(&out).unwrap();
    let mut want = histogram_reference(&a, Channels::of(3, false), 256);
    want.add(&histogram_reference(&b, want.channels, 256));
    assert_eq!(doc["inputs"][0]["path"], "a.fifo");
    assert_eq!(doc["inputs"][1]["path"], "-");
    for c in 0..4 {
        assert_eq!(counts(&doc["sum"], c), want.channel(c), "channel {c}");
    }
}

/// A GIF of three full, opaque 20x10 frames of few colours (so its palette is exact), and
/// the frames.
fn three_frame_gif() -> (Vec<u8>, Vec<Image>) {
    let frames: Vec<Image> = (0..3u32)
        .map(|f| {
            let data = (0..200u32)
                .flat_map(|p| {
                    let v = ((p / 20 + p % 7 + f * 3) % 4 * 60 + f * 10) as u8;
                    [v, 255 - v, v / 2, 255]
                })
                .collect();
            Image::new_u8(20, 10, 4, data)
        })
        .collect();
    let mut gif = Vec::new();
    {
        let mut encoder = ::image::codecs::gif::GifEncoder::new(&mut gif);
        encoder
            .set_repeat(::image::codecs::gif::Repeat::Infinite)
            .unwrap();
        for img in &frames {
            let gpukit::io::image::Samples::U8(data) = &img.samples else {
                unreachable!()
            };
            let buffer = ::image::RgbaImage::from_raw(20, 10, data.clone()).unwrap();
            let delay = ::image::Delay::from_numer_denom_ms(100, 1);
            encoder
                .encode_frame(::image::Frame::from_parts(buffer, 0, 0, delay))
                .unwrap();
        }
    }
    (gif, frames)
}

#[test]
fn an_animated_gif_is_counted_whole_by_histogram_and_refused_where_one_image_is_expected() {
    let dir = tempdir();
    let (gif, frames) = three_frame_gif();
    write(dir.path(), "anim.gif", &gif);
    let r = run_in(
        Some(dir.path()),
        &["--backend", "cpu", "histogram", "--json", "-", "anim.gif"],
    );
    r.code(0);
    let doc: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
    let input = &doc["inputs"][0];
    assert_eq!(input["frames"], 3);
    assert_eq!(input["pixels"], 600);
    let mut want = Histogram::zeros(Channels::of(4, false), 256);
    for f in &frames {
        want.add(&histogram_reference(f, want.channels, 256));
    }
    for c in 0..4 {
        assert_eq!(counts(input, c), want.channel(c), "channel {c}");
    }
    // The same from stdin, where it is the last (or only) image.
    let (code, out, err) = piped(
        dir.path(),
        &["--backend", "cpu", "histogram", "--json", "-", "-"],
        gif.clone(),
    );
    assert_eq!(code, 0, "{err}");
    let piped_doc: serde_json::Value = serde_json::from_slice(&out).unwrap();
    assert_eq!(piped_doc["inputs"][0]["frames"], 3);
    assert_eq!(piped_doc["inputs"][0]["channels"], input["channels"]);
    let blur = run_in(
        Some(dir.path()),
        &["--backend", "cpu", "blur", "anim.gif", "-o", "out.png"],
    );
    blur.code(1)
        .one_error_line("anim.gif: animated GIF with 3 frames: not supported");
    assert!(!dir.path().join("out.png").exists());
    write(
        dir.path(),
        "still.png",
        &encoded(&frames[0], ImageFormat::Png),
    );
    let compare = run_in(
        Some(dir.path()),
        &["--backend", "cpu", "compare", "still.png", "anim.gif"],
    );
    compare.code(2).one_error_line("animated GIF with 3 frames");
}

/// A valid 8x8 baseline JPEG of four components with an Adobe marker saying CMYK (transform
/// 0): one block each, every coefficient zero, one-code Huffman tables.
fn cmyk_jpeg() -> Vec<u8> {
    let mut j = vec![0xFF, 0xD8];
    j.extend([0xFF, 0xEE, 0, 14]);
    j.extend(b"Adobe\x00\x64\x00\x00\x00\x00\x00");
    j.extend([0xFF, 0xDB, 0, 67, 0]);
    j.extend([1u8; 64]);
    j.extend([0xFF, 0xC0, 0, 20, 8, 0, 8, 0, 8, 4]);
    for id in 1..=4 {
        j.extend([id, 0x11, 0]);
    }
    for class in [0x00, 0x10] {
        j.extend([0xFF, 0xC4, 0, 20, class, 1]);
        j.extend([0u8; 15]);
        j.push(0);
    }
    j.extend([0xFF, 0xDA, 0, 14, 4]);
    for id in 1..=4 {
        j.extend([id, 0x00]);
    }
    j.extend([0, 63, 0]);
    // Four blocks of (DC category 0, end of block): eight zero bits.
    j.push(0x00);
    j.extend([0xFF, 0xD9]);
    j
}

#[test]
fn cmyk_images_are_refused_not_converted() {
    let dir = tempdir();
    let jpeg = cmyk_jpeg();
    // A real CMYK JPEG: zune-jpeg reads it (and would convert it to RGB).
    let mut decoder = zune_jpeg::JpegDecoder::new(zune_core::bytestream::ZCursor::new(&jpeg));
    assert_eq!(decoder.decode().unwrap().len(), 8 * 8 * 3);
    assert_eq!(
        decoder.input_colorspace(),
        Some(zune_core::colorspace::ColorSpace::CMYK)
    );
    write(dir.path(), "cmyk.jpg", &jpeg);
    both_refuse(
        dir.path(),
        "cmyk.jpg",
        "CMYK JPEG (4 components, CMYK): not supported",
    );
    let mut tiff = std::io::Cursor::new(Vec::new());
    tiff::encoder::TiffEncoder::new(&mut tiff)
        .unwrap()
        .write_image::<tiff::encoder::colortype::CMYK8>(2, 2, &[0, 64, 128, 255].repeat(4))
        .unwrap();
    write(dir.path(), "cmyk.tif", tiff.get_ref());
    both_refuse(dir.path(), "cmyk.tif", "CMYK TIFF: not supported");
}

#[test]
fn a_multi_page_tiff_is_counted_page_by_page_by_histogram_and_refused_by_blur() {
    let dir = tempdir();
    let first = Image::new_u8(3, 2, 3, (0..18).map(|i| i * 13).collect());
    let second = Image::new_u8(2, 2, 3, (0..12).map(|i| 250 - i * 7).collect());
    let pixels = |img: &Image| match &img.samples {
        gpukit::io::image::Samples::U8(v) => v.clone(),
        _ => unreachable!(),
    };
    let mut want = Histogram::zeros(Channels::of(3, false), 256);
    want.add(&histogram_reference(&first, want.channels, 256));
    want.add(&histogram_reference(&second, want.channels, 256));
    for big in [false, true] {
        let mut tiff = std::io::Cursor::new(Vec::new());
        macro_rules! pages {
            ($encoder:expr) => {{
                let mut e = $encoder.unwrap();
                for img in [&first, &second] {
                    e.write_image::<tiff::encoder::colortype::RGB8>(
                        img.width,
                        img.height,
                        &pixels(img),
                    )
                    .unwrap();
                }
            }};
        }
        if big {
            pages!(tiff::encoder::TiffEncoder::new_big(&mut tiff));
        } else {
            pages!(tiff::encoder::TiffEncoder::new(&mut tiff));
        }
        let name = if big { "pages.btf.tif" } else { "pages.tif" };
        write(dir.path(), name, tiff.get_ref());
        let r = run_in(
            Some(dir.path()),
            &["--backend", "cpu", "histogram", "--json", "-", name],
        );
        r.code(0);
        let doc: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
        let input = &doc["inputs"][0];
        assert_eq!(
            (input["frames"].as_u64(), input["width"].as_u64()),
            (Some(2), Some(3))
        );
        for c in 0..4 {
            assert_eq!(counts(input, c), want.channel(c), "{name} channel {c}");
        }
        let blur = run_in(
            Some(dir.path()),
            &["--backend", "cpu", "blur", name, "-o", "out.png"],
        );
        blur.code(1).one_error_line(&format!(
            "{name}: multi-page TIFF with 2 pages: not supported"
        ));
    }
}
