//! Times gpukit's PNG encoder in-process, in memory (no file, no fsync), for
//! bench/png_compression.py, which times OpenCV's `cv2.imencode` in the same run. Prints one
//! line per level: `LEVEL BYTES WALL_SECONDS CPU_SECONDS` (medians of the runs after one
//! warm-up; CPU time is the process's, which a loaded machine disturbs less than wall time).
//!
//!     cargo run --release --example png_encode -- IN.png RUNS [LEVEL...]

use std::path::Path;
use std::time::Instant;

use anyhow::{Context, Result};
use gpukit::io::image::{self, WriteOptions};
use gpukit::io::metadata::Metadata;

mod timing;
use timing::{cpu_seconds, median};

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let usage = "usage: png_encode IN.png RUNS [LEVEL...]";
    let img = image::load(Path::new(args.first().context(usage)?))?;
    let runs: usize = args.get(1).context(usage)?.parse()?;
    let levels: Vec<u8> = match &args[2..] {
        [] => (0..=9).collect(),
        some => some.iter().map(|s| s.parse()).collect::<Result<_, _>>()?,
    };
    for compression in levels {
        let opts = WriteOptions {
            compression,
            ..WriteOptions::default()
        };
        let mut bytes = 0;
        let (mut wall, mut cpu) = (Vec::with_capacity(runs), Vec::with_capacity(runs));
        for run in 0..=runs {
            let input = img.clone();
            let mut out = Vec::new();
            let (start, start_cpu) = (Instant::now(), cpu_seconds());
            image::encode_with(
                input,
                ::image::ImageFormat::Png,
                &Metadata::default(),
                &opts,
                &mut out,
            )?;
            if run > 0 {
                wall.push(start.elapsed().as_secs_f64());
                cpu.push(cpu_seconds() - start_cpu);
            }
            bytes = out.len();
        }
        println!(
            "{compression} {bytes} {:.6} {:.6}",
            median(&mut wall),
            median(&mut cpu)
        );
    }
    Ok(())
}
