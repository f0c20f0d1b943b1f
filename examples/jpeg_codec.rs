//! Times gpukit's JPEG decode and encode on one thread, per image, for bench/jpeg_codec.py,
//! which times Pillow (libjpeg-turbo) and OpenCV on the same files in the same run. A figure
//! is the median over RUNS passes after a warm-up of the mean per image, in ms of this
//! process's CPU time and of wall time. Prints one line per stage:
//!
//!     decode CPU_MS WALL_MS                 io::image::decode_with, the bytes in memory
//!     encode-std CPU_MS WALL_MS BYTES       quality 90, 4:2:0, the standard tables
//!     encode-opt CPU_MS WALL_MS BYTES       the same with optimised tables
//!     encode-prog CPU_MS WALL_MS BYTES      the same, progressive
//!     encode-image-crate CPU_MS WALL_MS BYTES   the image crate's encoder (gpukit's before)
//!
//!     cargo run --release --example jpeg_codec -- RUNS [--out DIR] FILE...
//!
//! With --out, the outputs are written to DIR under the inputs' names: NAME.jpg (standard
//! tables), NAME-opt.jpg and NAME-prog.jpg, for the script to compare with Pillow's.

use std::path::PathBuf;
use std::time::Instant;

use anyhow::{Context, Result};
use gpukit::io::image::{self, Image, ReadOptions, Samples, WriteOptions};
use gpukit::io::jpeg::{self, Subsampling};
use gpukit::io::metadata::Metadata;

mod timing;
use timing::{cpu_seconds, median};

fn main() -> Result<()> {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    let usage = "usage: jpeg_codec RUNS [--out DIR] FILE...";
    let runs: usize = args.first().context(usage)?.parse()?;
    args.remove(0);
    let out_dir = match args.iter().position(|a| a == "--out") {
        Some(i) => {
            args.remove(i);
            Some(PathBuf::from(args.remove(i)))
        }
        None => None,
    };
    let paths: Vec<PathBuf> = args.iter().map(PathBuf::from).collect();
    anyhow::ensure!(runs > 0 && !paths.is_empty(), usage);
    let opts = ReadOptions::default();
    let files = paths
        .iter()
        .map(|p| std::fs::read(p).with_context(|| p.display().to_string()))
        .collect::<Result<Vec<_>>>()?;
    let images = files
        .iter()
        .map(|b| image::decode_with(b, &opts).map(|d| d.image))
        .collect::<Result<Vec<_>>>()?;

    let (cpu, wall) = per_image(runs, files.len(), || {
        for bytes in &files {
            std::hint::black_box(image::decode_with(bytes, &opts)?);
        }
        Ok(())
    })?;
    println!("decode {cpu:.3} {wall:.3}");

    let base = WriteOptions {
        quality: 90,
        subsampling: Subsampling::S420,
        ..WriteOptions::default()
    };
    let settings = [
        (
            "encode-std",
            WriteOptions {
                optimize: false,
                ..base
            },
        ),
        (
            "encode-opt",
            WriteOptions {
                optimize: true,
                ..base
            },
        ),
        (
            "encode-prog",
            WriteOptions {
                progressive: true,
                ..base
            },
        ),
    ];
    for (name, write) in &settings {
        let mut bytes = 0;
        let (cpu, wall) = per_image(runs, images.len(), || {
            bytes = 0;
            for img in &images {
                let mut out = Vec::new();
                encode_jpeg(img, write, &mut out)?;
                bytes += out.len();
            }
            Ok(())
        })?;
        println!("{name} {cpu:.3} {wall:.3} {}", bytes / images.len());
    }
    let mut bytes = 0;
    let (cpu, wall) = per_image(runs, images.len(), || {
        bytes = 0;
        for img in &images {
            bytes += image_crate(img)?.len();
        }
        Ok(())
    })?;
    println!(
        "encode-image-crate {cpu:.3} {wall:.3} {}",
        bytes / images.len()
    );

    if let Some(dir) = out_dir {
        std::fs::create_dir_all(&dir)?;
        for (img, path) in images.iter().zip(&paths) {
            let stem = path.file_stem().context("file name")?.to_string_lossy();
            for ((_, write), suffix) in settings.iter().zip(["", "-opt", "-prog"]) {
                let mut out = Vec::new();
                encode_jpeg(img, write, &mut out)?;
                std::fs::write(dir.join(format!("{stem}{suffix}.jpg")), out)?;
            }
        }
    }
    Ok(())
}

/// gpukit's JPEG file of `img` from a borrow of its samples, as `image::encode_with` writes
/// it (which takes the image by value: the timed pass would copy each image first, a copy
/// Pillow's `save` does not make).
fn encode_jpeg(img: &Image, write: &WriteOptions, out: &mut Vec<u8>) -> Result<()> {
    let Samples::U8(data) = &img.samples else {
        anyhow::bail!("8-bit images only")
    };
    image::write_jpeg_with(
        img.channels,
        &Metadata::default(),
        write,
        out,
        |o, m, out| {
            jpeg::encode(data, img.width, img.height, img.channels, o, m, out)
                .map_err(anyhow::Error::msg)
        },
    )
}

/// The image crate's baseline encoder at quality 90 (4:4:4 only): what gpukit used before.
fn image_crate(img: &Image) -> Result<Vec<u8>> {
    use ::image::ImageEncoder;
    let Samples::U8(data) = &img.samples else {
        anyhow::bail!("8-bit images only")
    };
    let color = if img.channels == 1 {
        ::image::ExtendedColorType::L8
    } else {
        ::image::ExtendedColorType::Rgb8
    };
    let mut out = Vec::new();
    ::image::codecs::jpeg::JpegEncoder::new_with_quality(&mut out, 90)
        .write_image(data, img.width, img.height, color)?;
    Ok(out)
}

/// Runs `pass` once to warm up and `runs` times more: the medians of CPU and wall time per
/// item, in ms.
fn per_image(
    runs: usize,
    items: usize,
    mut pass: impl FnMut() -> Result<()>,
) -> Result<(f64, f64)> {
    pass()?;
    let (mut cpu, mut wall) = (Vec::with_capacity(runs), Vec::with_capacity(runs));
    for _ in 0..runs {
        let (start, start_cpu) = (Instant::now(), cpu_seconds());
        pass()?;
        wall.push(start.elapsed().as_secs_f64() * 1e3 / items as f64);
        cpu.push((cpu_seconds() - start_cpu) * 1e3 / items as f64);
    }
    Ok((median(&mut cpu), median(&mut wall)))
}
