//! `gpukit bench`: runs the ops' benchmark cases and prints a table or JSON.

use anyhow::Result;
use clap::Args;
use serde::Serialize;

use super::{print_stdout, term, Ctx, Status};
use crate::bench::{self, Case, Config, Measurement, Sizes};
use crate::gpu::{Engine, Timings};
use crate::io::json::{Document, JsonDest, JsonSink};
use crate::ops::{self, Op};

#[derive(Debug, Args)]
pub struct BenchArgs {
    /// Ops to measure (default: all).
    #[arg(value_name = "OP", value_parser = op_names())]
    ops: Vec<String>,
    /// Timed runs per case.
    #[arg(long, default_value_t = 20, value_parser = clap::value_parser!(u32).range(1..))]
    reps: u32,
    /// Untimed runs before the timed ones (at least; see --warmup-ms).
    #[arg(long, default_value_t = 3)]
    warmup: u32,
    /// Untimed runs go on until this many milliseconds have passed, so that the GPU's clocks
    /// are up when timing starts (GPUs lower them within a fraction of a second of idling).
    #[arg(long, value_name = "MS", default_value_t = 300)]
    warmup_ms: u64,
    /// Size of the `copy` buffer in MiB (capped at the adapter's largest storage binding).
    #[arg(long, default_value_t = 256, value_parser = clap::value_parser!(u64).range(1..))]
    copy_mib: u64,
    /// Size N of the `matmul` cases: f32 1024^3 (when N > 1024), N^3 and
    /// (N+1)x(N-1)x(N-3). The CPU backend caps N at 512.
    #[arg(long, default_value_t = 4096, value_parser = clap::value_parser!(u64).range(8..=65536))]
    matmul_size: u64,
    /// The larger `scan` case is 2^N u32 (the other 2^20; both capped at N).
    #[arg(long, default_value_t = 28, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=30))]
    scan_max_log2: u32,
    /// Write the results as JSON to FILE, or to stdout with `-` (documented in docs/formats.md).
    #[arg(long, value_name = "FILE|-")]
    json: Option<JsonDest>,
}

#[derive(Serialize)]
struct BenchDoc<'a> {
    gpukit_version: &'static str,
    adapter: String,
    warmup: u32,
    warmup_ms: u64,
    reps: u32,
    results: &'a [Measurement],
}

impl<'a> Document for BenchDoc<'a> {
    const SCHEMA: &'static str = "gpukit.bench/1";
}

pub fn run(ctx: &Ctx, args: BenchArgs) -> Result<Status> {
    let ops: Vec<&Op> = if args.ops.is_empty() || args.ops.iter().any(|o| o == "all") {
        ops::REGISTRY.iter().collect()
    } else {
        args.ops
            .iter()
            .map(|o| ops::find(o).expect("clap checked the name"))
            .collect()
    };
    let sizes = Sizes {
        copy_bytes: args.copy_mib << 20,
        matmul: args.matmul_size as usize,
        scan_max_log2: args.scan_max_log2,
    };
    let sink = args.json.as_ref().map(JsonSink::open).transpose()?;
    let mut timings = Timings::default();
    let engine = ctx.engine(&mut timings)?;
    let adapter = match &engine {
        Engine::Gpu(g) => g.describe(),
        Engine::Cpu => "cpu".to_string(),
    };
    let hide = ctx.global.quiet || sink.as_ref().is_some_and(JsonSink::is_stdout);
    let config = Config {
        warmup: args.warmup,
        warmup_time: std::time::Duration::from_millis(args.warmup_ms),
        reps: args.reps,
        breakdown: true,
    };
    let mut results = Vec::new();
    for op in ops {
        let mut cases: Vec<Case> = (op.bench)(&engine, &sizes)?;
        let bar = term::progress(cases.len() as u64, hide);
        for case in &mut cases {
            bar.set_message(format!("{} {}", case.op, case.name));
            results.push(bench::measure(&engine, case, config)?);
            bar.inc(1);
        }
        bar.finish_and_clear();
    }
    let doc = BenchDoc {
        gpukit_version: env!("CARGO_PKG_VERSION"),
        adapter: adapter.clone(),
        warmup: args.warmup,
        warmup_ms: args.warmup_ms,
        reps: args.reps,
        results: &results,
    };
    match sink {
        Some(sink) => {
            let to_stdout = sink.is_stdout();
            sink.write(&doc)?;
            if !to_stdout {
                print_stdout(&format!("adapter: {adapter}\n{}", bench::table(&results)))?;
            }
        }
        None => print_stdout(&format!("adapter: {adapter}\n{}", bench::table(&results)))?,
    }
    if results.iter().any(|m| m.clock == bench::Clock::Wall) {
        ctx.warn(
            "this adapter has no timestamp queries: times are wall clock around each submission",
        );
    }
    Ok(Status::Success)
}

/// The names `gpukit bench` takes: the registry's ops, and `all`.
fn op_names() -> clap::builder::PossibleValuesParser {
    let names: Vec<&'static str> = ops::REGISTRY
        .iter()
        .map(|op| op.name)
        .chain(["all"])
        .collect();
    clap::builder::PossibleValuesParser::new(names)
}
