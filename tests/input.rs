//! Image input: damaged files, decompression bombs, pipes and the one reader every subcommand
//! uses. Every fixture is made here, in a temp folder, from an image the test encodes.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use ::image::ImageFormat;
use gpukit::io::image::{self, DecodeLimits, Image, ReadOptions};

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

#[test]
fn a_wrong_zlib_checksum_is_refused() {
    let dir = tempdir();
    write(dir.path(), "adler.png", &bad_adler_png());
    both_refuse(dir.path(), "adler.png", "corrupt PNG");
    // And a wrong chunk CRC.
    let mut png = encoded(&card(), ImageFormat::Png);
    let n = png.len();
    png[n - 20] ^= 1; // inside the last IDAT's data, before IEND
    write(dir.path(), "crc.png", &png);
    both_refuse(dir.path(), "crc.png", "corrupt PNG");
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
