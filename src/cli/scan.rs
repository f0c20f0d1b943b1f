//! `gpukit scan`: prefix sum, min or max of one array file, written by extension or as JSON
//! on stdout.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use clap::Args;

use super::text::HeaderArgs;
use super::{Ctx, Status};
use crate::gpu::{Engine, Timings};
use crate::io::array::{self, Array, DType, Data, Format};
use crate::io::output::{self, PendingFile};
use crate::ops::scan::{self, Elem, Mode, Op, Options};

#[derive(Debug, Args)]
#[command(after_help = "\
Input formats: .npy (1-D uint32, int32 or float32, little-endian), .json (an array of numbers),
.txt/.csv (numbers separated by commas, spaces or newlines; a first line of names is skipped), raw .bin with --dtype; a file of
any other extension is read as raw with --dtype. Text and JSON without --dtype are read as u32
when every value is a non-negative integer, i32 when some are negative, else f32.
Output: by the extension of -o (.npy .json .txt .csv .bin); without -o, JSON on stdout.
See docs/scan.md.")]
pub struct ScanArgs {
    /// Input array file, or `-` for stdin (with --format).
    #[arg(value_name = "IN")]
    input: PathBuf,
    /// Output file (format by extension); `-` or none: JSON on stdout.
    #[arg(short, long, value_name = "OUT")]
    output: Option<PathBuf>,
    /// out[i] combines in[0..i], without in[i] (the default).
    #[arg(long, conflicts_with = "inclusive")]
    exclusive: bool,
    /// out[i] combines in[0..=i].
    #[arg(long)]
    inclusive: bool,
    /// The operator.
    #[arg(long, value_enum, default_value_t = Op::Sum)]
    op: Op,
    /// Element type of raw input, and what text and JSON are read as; a .npy must hold it.
    #[arg(long, value_enum)]
    dtype: Option<Elem>,
    /// Input format, for stdin or to override the extension.
    #[arg(long, value_enum)]
    format: Option<Format>,
    #[command(flatten)]
    text: HeaderArgs,
}

fn io_dtype(e: Elem) -> DType {
    match e {
        Elem::U32 => DType::U32,
        Elem::I32 => DType::I32,
        Elem::F32 => DType::F32,
    }
}

fn input_format(args: &ScanArgs) -> Result<Format> {
    if let Some(f) = args.format {
        return Ok(f);
    }
    if args.input == Path::new("-") {
        bail!(crate::UsageError(
            "reading stdin (-) needs --format npy|json|text|bin".into()
        ));
    }
    match (Format::from_path(&args.input), args.dtype) {
        (Some(f), _) => Ok(f),
        (None, Some(_)) => Ok(Format::Bin),
        (None, None) => bail!(crate::UsageError(format!(
            "{}: unknown extension (.npy, .json, .txt, .csv, .bin); give --format, or --dtype to read it as raw",
            args.input.display()
        ))),
    }
}

/// Where the result goes (`-` or no -o: JSON on stdout), created before any work so that a
/// bad path fails at once.
fn dest(args: &ScanArgs) -> Result<(PendingFile, Format)> {
    let path = args.output.as_deref().unwrap_or(Path::new("-"));
    let format = if output::names_stream(path) {
        Format::from_path(path).unwrap_or(Format::Json)
    } else {
        match Format::from_path(path) {
            Some(f) => f,
            None => bail!(crate::UsageError(format!(
                "{}: unknown output extension (.npy, .json, .txt, .csv or .bin)",
                path.display()
            ))),
        }
    };
    output::note_input(&args.input);
    let file = PendingFile::create(path)?;
    if matches!(format, Format::Npy | Format::Bin) {
        file.refuse_terminal("binary array data")?;
    }
    Ok((file, format))
}

pub fn run(ctx: &Ctx, args: ScanArgs) -> Result<Status> {
    let format = input_format(&args)?;
    let dest = dest(&args)?;
    ctx.detail(&dest.0.describe());
    let mut timings = Timings::default();
    let data = timings.phase("decode", || {
        array::read_vector(
            &args.input,
            format,
            args.dtype.map(io_dtype),
            args.text.header(),
        )
        .map_err(|e| {
            array::name_dtypes(
                e,
                &args.input,
                "scan",
                "real numbers, read as uint32, int32 or float32",
            )
        })
    })?;
    let opts = Options {
        op: args.op,
        mode: if args.inclusive {
            Mode::Inclusive
        } else {
            Mode::Exclusive
        },
        ..Options::default()
    };
    ctx.estimate(scan::cpu_estimate(data.len()));
    let engine = ctx.work_engine(&mut timings)?;
    let mut opts = opts;
    if let Engine::Gpu(gpu) = &engine {
        // The shape settled once, so that `-v` says the path the scan takes.
        let elem = match &data {
            Data::U32(_) => scan::Elem::U32,
            Data::I32(_) => scan::Elem::I32,
            Data::F32(_) | Data::F16(_) => scan::Elem::F32,
        };
        opts = opts.resolved_as(gpu, data.len(), elem);
        if ctx.global.verbose > 0 {
            let path = if scan::takes_subgroups(gpu, &opts)? {
                "subgroup"
            } else {
                "workgroup"
            };
            ctx.note(&format!("scan: {path} path"));
        }
    }
    let out = match data {
        Data::U32(v) => Data::U32(scan::run(&engine, &v, &opts, &mut timings)?),
        Data::I32(v) => Data::I32(scan::run(&engine, &v, &opts, &mut timings)?),
        Data::F32(v) => Data::F32(
            scan::run(&engine, &v, &opts, &mut timings)
                .with_context(|| args.input.display().to_string())?,
        ),
        // float16 values are all float32 values: scanned as float32.
        Data::F16(v) => Data::F32(
            scan::run(
                &engine,
                &v.iter().map(|x| x.to_f32()).collect::<Vec<_>>(),
                &opts,
                &mut timings,
            )
            .with_context(|| args.input.display().to_string())?,
        ),
    };
    let out = Array::vector(out);
    let (file, out_format) = dest;
    timings.phase("encode", || {
        file.commit_with(|w| array::encode(w, out_format, &out))
    })?;
    ctx.report_timings(&timings);
    Ok(Status::Success)
}

impl clap::ValueEnum for Op {
    fn value_variants<'a>() -> &'a [Self] {
        &[Op::Sum, Op::Min, Op::Max]
    }

    fn to_possible_value(&self) -> Option<clap::builder::PossibleValue> {
        Some(clap::builder::PossibleValue::new(self.name()))
    }
}

impl clap::ValueEnum for Elem {
    fn value_variants<'a>() -> &'a [Self] {
        &[Elem::U32, Elem::I32, Elem::F32]
    }

    fn to_possible_value(&self) -> Option<clap::builder::PossibleValue> {
        Some(clap::builder::PossibleValue::new(self.name()))
    }
}

impl clap::ValueEnum for Format {
    fn value_variants<'a>() -> &'a [Self] {
        &[Format::Npy, Format::Json, Format::Text, Format::Bin]
    }

    fn to_possible_value(&self) -> Option<clap::builder::PossibleValue> {
        use clap::builder::PossibleValue;
        Some(match self {
            Format::Npy => PossibleValue::new("npy"),
            Format::Json => PossibleValue::new("json"),
            Format::Text => PossibleValue::new("text").help("Text: `.txt` or `.csv`"),
            Format::Bin => {
                PossibleValue::new("bin").help("Raw little-endian elements; needs a dtype")
            }
        })
    }
}
