//! `gpukit blur`: blur images, one or many, on one device.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use clap::{Args, ValueEnum};

use super::{term, Ctx, Status};
use crate::gpu::Timings;
use crate::io::image::{self as img_io, Image};
use crate::io::output::PendingFile;
use crate::ops::blur::{self, BlurParams, Kind};

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum KindArg {
    Box,
    Gaussian,
}

#[derive(Debug, Args)]
#[command(allow_negative_numbers = true)]
pub struct BlurArgs {
    /// Input images (PNG, JPEG, WebP, TIFF, BMP, GIF, PNM, TGA, QOI, ICO; 8 or 16 bits).
    #[arg(value_name = "IN", required = true)]
    inputs: Vec<PathBuf>,
    /// Output file (one input only; may be the input itself). Its extension picks the format.
    #[arg(
        short,
        long,
        value_name = "OUT",
        conflicts_with = "out_dir",
        required_unless_present = "out_dir"
    )]
    output: Option<PathBuf>,
    /// Write each output into DIR under its input's name (created when missing).
    #[arg(long, value_name = "DIR")]
    out_dir: Option<PathBuf>,
    /// Window radius in pixels: 2R+1 taps each way. Default: 3 for box; ceil(3 sigma) for gaussian.
    #[arg(short, long, value_name = "R")]
    radius: Option<u32>,
    /// Filter kind.
    #[arg(long, value_enum, default_value_t = KindArg::Box)]
    kind: KindArg,
    /// Gaussian standard deviation in pixels (default: radius / 3).
    #[arg(long, value_name = "S", value_parser = positive_f64)]
    sigma: Option<f64>,
    /// Apply the blur N times.
    #[arg(long, value_name = "N", default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..))]
    iterations: u32,
}

fn positive_f64(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(v) if v > 0.0 && v.is_finite() => Ok(v),
        Ok(_) => Err("must be a positive number".into()),
        Err(e) => Err(e.to_string()),
    }
}

impl BlurArgs {
    /// The checked filter, before any file or device is touched.
    fn params(&self) -> Result<BlurParams> {
        let usage = |m: &str| anyhow::Error::new(crate::UsageError(m.into()));
        Ok(match self.kind {
            KindArg::Box => {
                if self.sigma.is_some() {
                    return Err(usage("--sigma applies to --kind gaussian only"));
                }
                BlurParams::new(Kind::Box, self.radius.unwrap_or(3), self.iterations)
            }
            KindArg::Gaussian => {
                let (sigma, radius) = match (self.sigma, self.radius) {
                    (Some(s), Some(r)) => (s, r),
                    (Some(s), None) => (s, blur::gaussian_radius(s)),
                    (None, Some(r)) if r > 0 => (r as f64 / 3.0, r),
                    _ => {
                        return Err(usage(
                            "--kind gaussian needs --sigma or a radius of at least 1",
                        ))
                    }
                };
                BlurParams::new(Kind::Gaussian { sigma }, radius, self.iterations)
            }
        })
    }

    /// Inputs paired with their outputs, checked up front.
    fn jobs(&self) -> Result<Vec<(PathBuf, PathBuf)>> {
        let usage = |m: String| anyhow::Error::new(crate::UsageError(m));
        if let Some(out) = &self.output {
            if self.inputs.len() > 1 {
                return Err(usage(format!(
                    "-o names one output but {} inputs were given; use --out-dir",
                    self.inputs.len()
                )));
            }
            img_io::output_format(out)?;
            return Ok(vec![(self.inputs[0].clone(), out.clone())]);
        }
        let dir = self
            .out_dir
            .as_ref()
            .expect("clap requires -o or --out-dir");
        if dir.exists() && !dir.is_dir() {
            return Err(usage(format!(
                "{}: --out-dir names a file, not a folder",
                dir.display()
            )));
        }
        let mut seen = HashSet::new();
        let mut jobs = Vec::new();
        for input in &self.inputs {
            let name = input
                .file_name()
                .ok_or_else(|| usage(format!("{}: not a file name", input.display())))?;
            let out = dir.join(name);
            if !seen.insert(out.clone()) {
                return Err(usage(format!(
                    "two inputs would both be written to {}",
                    out.display()
                )));
            }
            img_io::output_format(&out)?;
            jobs.push((input.clone(), out));
        }
        std::fs::create_dir_all(dir)
            .with_context(|| format!("{}: cannot create the folder", dir.display()))?;
        Ok(jobs)
    }
}

pub fn run(ctx: &Ctx, args: BlurArgs) -> Result<Status> {
    let params = args.params()?;
    let jobs = args.jobs()?;
    let read = ctx.read_options();
    let load = |path: &Path| img_io::load_with(path, &read).map(|d| ctx.accept(path, d));
    let mut timings = Timings::default();
    // The first input decodes while the device opens.
    let (engine, first) =
        ctx.engine_alongside(&mut timings, |t| t.phase("decode", || load(&jobs[0].0)));
    let engine = engine?;
    let tuned = ctx.tuned(&engine);
    let mut first = Some(first);
    let bar = term::progress(jobs.len() as u64, ctx.global.quiet || jobs.len() == 1);
    let mut failed = 0;
    for (input, output) in &jobs {
        bar.set_message(input.display().to_string());
        let options = |pixels: usize| blur::GpuOptions {
            tunables: bar
                .suspend(|| tuned.choice(ctx, "blur", pixels as f64, blur::Tunables::check))
                .unwrap_or(blur::Tunables::DEFAULT),
            ..blur::GpuOptions::DEFAULT
        };
        let decoded = first.take();
        let job = (input.as_path(), output.as_path(), decoded);
        if let Err(e) = blur_file(&engine, job, &load, &params, &options, &mut timings) {
            bar.suspend(|| eprintln!("{} {e:#}", term::error_prefix()));
            failed += 1;
        }
        bar.inc(1);
    }
    bar.finish_and_clear();
    ctx.report_timings(&timings);
    if failed > 0 && jobs.len() > 1 {
        ctx.warn(&format!("{failed} of {} files failed", jobs.len()));
    }
    Ok(if failed > 0 {
        Status::Failure
    } else {
        Status::Success
    })
}

fn blur_file(
    engine: &crate::gpu::Engine,
    (input, output, decoded): (&Path, &Path, Option<Result<Image>>),
    load: &dyn Fn(&Path) -> Result<Image>,
    params: &BlurParams,
    options: &dyn Fn(usize) -> blur::GpuOptions,
    timings: &mut Timings,
) -> Result<()> {
    let format = img_io::output_format(output)?;
    // Created before the work so an unwritable place fails at once; removed on any error.
    let pending = PendingFile::create(output)?;
    let image: Image = match decoded {
        Some(image) => image?,
        None => timings.phase("decode", || load(input))?,
    };
    img_io::check_layout(output, format, image.channels, image.bit_depth())?;
    let blurred = blur::blur_with(engine, &image, params, options(image.pixels()), timings)
        .with_context(|| format!("{}", input.display()))?;
    timings.phase("encode", || img_io::save_to(pending, format, blurred))
}
