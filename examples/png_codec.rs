//! Times gpukit's PNG decode and encode on one thread, per image, for bench/png_codec.py,
//! which times OpenCV's `cv2.imdecode` and `cv2.imencode` on the same files in the same run.
//! Each pass goes over every file; a figure is the median over RUNS passes after a warm-up
//! of the mean per image, in milliseconds of this process's CPU time (steadier than wall
//! time on a shared machine) and of wall time. Prints three lines:
//!
//!     decode CPU_MS WALL_MS           io::image::decode_with, the file's bytes in memory
//!     load CPU_MS WALL_MS             io::image::load_with: reading the file, then the same
//!     encode CPU_MS WALL_MS BYTES     io::image::encode_with into memory, default settings
//!                                     (BYTES: the mean output size)
//!
//!     cargo run --release --example png_codec -- RUNS FILE...

use std::path::PathBuf;
use std::time::Instant;

use anyhow::{Context, Result};
use gpukit::io::image::{self, ReadOptions, WriteOptions};
use gpukit::io::metadata::Metadata;

mod timing;
use timing::{cpu_seconds, median};

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let usage = "usage: png_codec RUNS FILE...";
    let runs: usize = args.first().context(usage)?.parse()?;
    let paths: Vec<PathBuf> = args[1..].iter().map(PathBuf::from).collect();
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

    let (cpu, wall) = per_image(
        runs,
        files.len(),
        || (),
        |()| {
            for bytes in &files {
                std::hint::black_box(image::decode_with(bytes, &opts)?);
            }
            Ok(())
        },
    )?;
    println!("decode {cpu:.3} {wall:.3}");

    let (cpu, wall) = per_image(
        runs,
        paths.len(),
        || (),
        |()| {
            for path in &paths {
                std::hint::black_box(image::load_with(path, &opts)?);
            }
            Ok(())
        },
    )?;
    println!("load {cpu:.3} {wall:.3}");

    let mut bytes = 0;
    let (cpu, wall) = per_image(
        runs,
        images.len(),
        || images.clone(),
        |copies| {
            bytes = 0;
            for img in copies {
                let mut out = Vec::new();
                image::encode_with(
                    img,
                    ::image::ImageFormat::Png,
                    &Metadata::default(),
                    &WriteOptions::default(),
                    &mut out,
                )?;
                bytes += out.len();
            }
            Ok(())
        },
    )?;
    println!("encode {cpu:.3} {wall:.3} {}", bytes / images.len());
    Ok(())
}

/// Runs `pass` once to warm up and `runs` times more, each time on what `prepare` made
/// before the clocks start: the medians of CPU and wall time per item, in ms.
fn per_image<T>(
    runs: usize,
    items: usize,
    mut prepare: impl FnMut() -> T,
    mut pass: impl FnMut(T) -> Result<()>,
) -> Result<(f64, f64)> {
    pass(prepare())?;
    let (mut cpu, mut wall) = (Vec::with_capacity(runs), Vec::with_capacity(runs));
    for _ in 0..runs {
        let input = prepare();
        let (start, start_cpu) = (Instant::now(), cpu_seconds());
        pass(input)?;
        wall.push(start.elapsed().as_secs_f64() * 1e3 / items as f64);
        cpu.push((cpu_seconds() - start_cpu) * 1e3 / items as f64);
    }
    Ok((median(&mut cpu), median(&mut wall)))
}
