//! Times the native CPU engine in-process, for bench/cpu_engine.py (which times the peers in
//! the same run). Prints one line per case: `NAME SECONDS` (the median of the runs after one
//! warm-up).
//!
//!     cargo run --release --example engine_bench -- blur-box IN.png R RUNS
//!     cargo run --release --example engine_bench -- blur-gauss IN.png SIGMA RUNS
//!     cargo run --release --example engine_bench -- histogram IN.png BINS RUNS
//!     cargo run --release --example engine_bench -- scan-i32 IN.npy - RUNS
//!     cargo run --release --example engine_bench -- scan-u32 IN.npy - RUNS
//!     cargo run --release --example engine_bench -- matmul A.npy B.npy RUNS
//!
//! The histogram counts red, green, blue and luminance; the scans are inclusive sums into a
//! buffer made once (as `np.cumsum(v, out=buf)`), scan-u32 reading the i32 input as u32.

use std::path::Path;
use std::time::Instant;

use anyhow::{bail, Context, Result};
use gpukit::io::array::{self, Data, Format};
use gpukit::io::image;
use gpukit::ops::blur::{self, gaussian_radius, Kind, Options};
use gpukit::ops::histogram::{self, Channels};
use gpukit::ops::matmul::{self, Dims, Matmul, Precision};
use gpukit::ops::scan::{self, Mode, Op};

fn median_secs(runs: usize, mut f: impl FnMut()) -> f64 {
    f();
    let mut t: Vec<f64> = (0..runs)
        .map(|_| {
            let start = Instant::now();
            f();
            start.elapsed().as_secs_f64()
        })
        .collect();
    t.sort_by(f64::total_cmp);
    t[t.len() / 2]
}

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let arg = |i: usize| {
        args.get(i)
            .context("missing argument (see the file's header)")
    };
    let runs: usize = arg(3)?.parse()?;
    match arg(0)?.as_str() {
        "blur-box" | "blur-gauss" => {
            let img = image::load(Path::new(arg(1)?))?;
            let params = if arg(0)? == "blur-box" {
                Options::new(Kind::Box, arg(2)?.parse()?, 1)
            } else {
                let sigma: f64 = arg(2)?.parse()?;
                Options::new(Kind::Gaussian { sigma }, gaussian_radius(sigma), 1)
            };
            let secs = median_secs(runs, || {
                std::hint::black_box(blur::engine::blur(&img, &params).unwrap());
            });
            println!("{} {secs:.6}", args[0]);
        }
        "histogram" => {
            let img = image::load(Path::new(arg(1)?))?;
            let bins: u32 = arg(2)?.parse()?;
            let channels = Channels {
                color: true,
                alpha: false,
            };
            let secs = median_secs(runs, || {
                std::hint::black_box(histogram::engine::histogram(&img, channels, bins));
            });
            println!("{} {secs:.6}", args[0]);
        }
        "scan-i32" | "scan-u32" => {
            let v = match array::read_vector(
                Path::new(arg(1)?),
                Format::Npy,
                None,
                array::Header::Detect,
            )? {
                Data::I32(v) => v,
                _ => bail!("{}: not an i32 vector", arg(1)?),
            };
            let secs = if arg(0)? == "scan-i32" {
                let mut out = vec![0i32; v.len()];
                median_secs(runs, || {
                    scan::engine::scan_into(&v, Op::Sum, Mode::Inclusive, &mut out);
                    std::hint::black_box(&out);
                })
            } else {
                let v: Vec<u32> = bytemuck::cast_slice(&v).to_vec();
                let mut out = vec![0u32; v.len()];
                median_secs(runs, || {
                    scan::engine::scan_into(&v, Op::Sum, Mode::Inclusive, &mut out);
                    std::hint::black_box(&out);
                })
            };
            println!("{} {secs:.6}", args[0]);
        }
        "matmul" => {
            let a =
                array::read_matrix(Path::new(arg(1)?), Format::Npy, None, array::Header::Detect)?;
            let b =
                array::read_matrix(Path::new(arg(2)?), Format::Npy, None, array::Header::Detect)?;
            let (av, bv) = (a.data.to_f32(), b.data.to_f32());
            let p = Matmul {
                a: &av,
                b: &bv,
                dims: Dims {
                    m: a.shape[0],
                    n: b.shape[1],
                    k: a.shape[1],
                },
                trans_a: false,
                trans_b: false,
                precision: Precision::F32,
            };
            let secs = median_secs(runs, || {
                std::hint::black_box(matmul::engine::matmul(&p).unwrap());
            });
            println!("{} {secs:.6}", args[0]);
        }
        other => bail!("unknown case {other}"),
    }
    Ok(())
}
