//! `gpukit matmul`: C = op(A) op(B) from .npy, .json or .csv matrices, written by extension.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use clap::Args;

use super::text::HeaderArgs;
use super::{Ctx, Status};
use crate::gpu::{Engine, Timings};
use crate::io::array::{self, Array, DType, Data, Format, Header};
use crate::io::output::{self, PendingFile};
use crate::ops::matmul::{self, Dims, Matmul, Precision};

#[derive(Debug, Args)]
pub struct MatmulArgs {
    /// Left matrix A: .npy (float32 or float16, C or Fortran order), .json (nested arrays)
    /// or .csv/.txt (one row per line).
    #[arg(value_name = "A")]
    a: PathBuf,
    /// Right matrix B, in the same formats.
    #[arg(value_name = "B")]
    b: PathBuf,
    /// Write C to FILE: .npy (float32), .json or .csv by extension; `-` or no -o prints JSON
    /// on stdout.
    #[arg(short, long, value_name = "FILE")]
    output: Option<PathBuf>,
    /// Precision of the inputs: f16 rounds them to float16 (needs an adapter with
    /// shader-f16). Products are summed in f32 and C is float32 either way.
    #[arg(long, value_enum, default_value_t = Precision::F32)]
    dtype: Precision,
    /// Use A transposed: the file holds A as k x m.
    #[arg(long)]
    transpose_a: bool,
    /// Use B transposed: the file holds B as n x k.
    #[arg(long)]
    transpose_b: bool,
    #[command(flatten)]
    text: HeaderArgs,
}

fn input_format(path: &Path) -> Result<Format> {
    match Format::from_path(path) {
        Some(f @ (Format::Npy | Format::Json | Format::Text)) => Ok(f),
        _ => bail!(crate::UsageError(format!(
            "{}: matmul reads .npy, .json, .csv or .txt matrices",
            path.display()
        ))),
    }
}

/// Where C goes (`-` or no -o: JSON on stdout), created before the work starts so that a bad
/// path fails at once.
fn open_sink(args: &MatmulArgs) -> Result<(PendingFile, Format)> {
    let path = args.output.as_deref().unwrap_or(Path::new("-"));
    let format = match Format::from_path(path) {
        Some(f @ (Format::Npy | Format::Json | Format::Text)) => f,
        _ if output::names_stream(path) => Format::Json,
        _ => bail!(crate::UsageError(format!(
            "{}: matmul writes .npy, .json, .csv or .txt (by extension), or - for stdout",
            path.display()
        ))),
    };
    output::note_inputs([args.a.as_path(), args.b.as_path()]);
    let file = PendingFile::create(path)?;
    if format == Format::Npy {
        file.refuse_terminal("binary .npy data")?;
    }
    Ok((file, format))
}

/// A matrix file as f32 values and its stored shape.
fn read(path: &Path, precision: Precision, header: Header) -> Result<(Vec<f32>, usize, usize)> {
    let format = input_format(path)?;
    let name = path.display();
    // Every format is read as f32 (a float16 .npy as it is: its values are all f32 values).
    let Array { shape, data } = array::read_matrix(path, format, Some(DType::F32), header)
        .map_err(|e| array::name_dtypes(e, path, "matmul", "real numbers, read as float32"))?;
    let values = match data {
        Data::F32(v) => v,
        other => other.to_f32(),
    };
    let cols = shape[1];
    if precision == Precision::F16 {
        matmul::check_f16_range(&values, cols).with_context(|| name.to_string())?;
    }
    Ok((values, shape[0], cols))
}

pub fn run(ctx: &Ctx, args: MatmulArgs) -> Result<Status> {
    input_format(&args.a)?;
    input_format(&args.b)?;
    let (sink, out_format) = open_sink(&args)?;
    ctx.detail(&sink.describe());
    let mut timings = Timings::default();
    let ((a, ar, ac), (b, br, bc)) = timings.phase("decode", || -> Result<_> {
        let header = args.text.header();
        Ok((
            read(&args.a, args.dtype, header)?,
            read(&args.b, args.dtype, header)?,
        ))
    })?;
    let (m, k) = if args.transpose_a { (ac, ar) } else { (ar, ac) };
    let (kb, n) = if args.transpose_b { (bc, br) } else { (br, bc) };
    if k != kb {
        let used = |t: bool| if t { ", used transposed" } else { "" };
        bail!(
            "inner dimensions differ: {} is {ar}x{ac}{} and {} is {br}x{bc}{}, so A has {k} \
             columns but B has {kb} rows",
            args.a.display(),
            used(args.transpose_a),
            args.b.display(),
            used(args.transpose_b)
        );
    }
    // The engine opens once the size is known: a small product runs on the native CPU engine
    // before a GPU would be open.
    let dims = Dims { m, n, k };
    ctx.estimate(dims.cpu_estimate());
    let engine = ctx.work_engine(&mut timings)?;
    if let Engine::Gpu(gpu) = &engine {
        matmul::check_precision(gpu, args.dtype)?;
    }
    let p = Matmul {
        a: &a,
        b: &b,
        dims,
        trans_a: args.transpose_a,
        trans_b: args.transpose_b,
        precision: args.dtype,
    };
    let c = matmul::run(&engine, &p, &matmul::Options::DEFAULT, &mut timings)?;
    let c = Array {
        shape: vec![m, n],
        data: Data::F32(c),
    };
    timings.phase("encode", || {
        sink.commit_with(|w| array::encode(w, out_format, &c))
    })?;
    ctx.report_timings(&timings);
    Ok(Status::Success)
}

impl clap::ValueEnum for Precision {
    fn value_variants<'a>() -> &'a [Self] {
        &[Precision::F32, Precision::F16]
    }

    fn to_possible_value(&self) -> Option<clap::builder::PossibleValue> {
        use clap::builder::PossibleValue;
        Some(match self {
            Precision::F32 => {
                PossibleValue::new("f32").help("Inputs used as f32 (f16 inputs convert exactly)")
            }
            Precision::F16 => PossibleValue::new("f16").help(
                "Inputs rounded to f16 (exact when they already are f16), products summed in f32",
            ),
        })
    }
}
