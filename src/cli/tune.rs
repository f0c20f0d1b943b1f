//! `gpukit tune`: measures the kernels' shapes on this adapter and writes the tune cache
//! (which the ops read through [`crate::tune::choice`]).

use anyhow::Result;
use clap::Args;
use serde::Serialize;

use super::{print_stdout, term, Ctx, Status};
use crate::bench::Clock;
use crate::gpu::{Engine, Gpu, Timings};
use crate::io::json::{Document, JsonDest, JsonSink};
use crate::ops::{self, Op};
use crate::tune::{self, cache, Cache, Entry, Level, Trial};

#[derive(Debug, Args)]
pub struct TuneArgs {
    /// Ops to tune (default: all).
    #[arg(value_name = "OP", value_parser = op_names())]
    ops: Vec<String>,
    /// Tiny sizes and a few candidates: seconds, not minutes. Its choices are rough.
    #[arg(long)]
    quick: bool,
    /// Write every trial and the choices as JSON to FILE, or to stdout with `-`
    /// (documented in docs/formats.md).
    #[arg(long, value_name = "FILE|-")]
    json: Option<JsonDest>,
}

#[derive(Serialize)]
struct TuneDoc<'a> {
    gpukit_version: &'static str,
    adapter: String,
    quick: bool,
    /// Where the choices were written; null with --no-tune-cache.
    cache: Option<String>,
    trials: &'a [Trial],
    /// Op name to its entries, as in the cache.
    choices: &'a std::collections::BTreeMap<String, Vec<Entry>>,
}

impl<'a> Document for TuneDoc<'a> {
    const SCHEMA: &'static str = "gpukit.tune/1";
}

pub fn run(ctx: &Ctx, args: TuneArgs) -> Result<Status> {
    let ops: Vec<&Op> = if args.ops.is_empty() || args.ops.iter().any(|o| o == "all") {
        ops::tunable().collect()
    } else {
        args.ops
            .iter()
            .map(|o| ops::find(o).expect("clap checked the name"))
            .collect()
    };
    let sink = args.json.as_ref().map(JsonSink::open).transpose()?;
    let mut timings = Timings::default();
    let engine = ctx.engine(&mut timings)?;
    let Engine::Gpu(gpu) = &engine else {
        anyhow::bail!(
            "tune measures GPU kernels, and there is no GPU adapter here (or --backend cpu)"
        );
    };
    let path = if ctx.global.no_tune_cache {
        None
    } else {
        Some(cache::path_for(gpu, ctx.global.tune_cache.as_deref())?)
    };
    // An unusable cache path (a folder, a read-only one) fails now, not after measuring.
    if let Some(p) = &path {
        crate::io::output::check_writable(p)?;
        Cache::check_replaceable(p)?;
    }
    let level = Level { quick: args.quick };
    let hide = ctx.global.quiet || sink.as_ref().is_some_and(JsonSink::is_stdout);
    let bar = term::progress(ops.len() as u64, hide);
    let mut trials = Vec::new();
    let mut tuned = std::collections::BTreeMap::new();
    for op in ops {
        let tune = op.tune.expect("only tunable ops are accepted");
        let result = tune(op.name, &engine, level, &mut |msg| {
            bar.set_message(msg.to_string())
        })?;
        trials.extend(result.trials);
        tuned.insert(op.name.to_string(), result.entries);
        bar.inc(1);
    }
    bar.finish_and_clear();
    if let Some(p) = &path {
        // Read, merged and replaced under a lock: two tunes on one cache keep both results.
        Cache::update(p, |current| {
            let mut doc = starting_cache(ctx, gpu, current, p, level);
            doc.quick |= level.quick;
            doc.ops.extend(tuned.clone());
            doc
        })?;
    }
    let adapter = gpu.describe();
    let report = TuneDoc {
        gpukit_version: env!("CARGO_PKG_VERSION"),
        adapter: adapter.clone(),
        quick: level.quick,
        cache: path.as_ref().map(|p| p.display().to_string()),
        trials: &trials,
        choices: &tuned,
    };
    let to_stdout = sink.as_ref().is_some_and(JsonSink::is_stdout);
    if let Some(sink) = sink {
        sink.write(&report)?;
    }
    if !to_stdout {
        print_stdout(&format!("adapter: {adapter}\n{}", table(&trials)))?;
    }
    match &path {
        Some(p) => ctx.note(&format!("tune cache written to {}", p.display())),
        None => ctx.note("--no-tune-cache: nothing written"),
    }
    if trials.iter().any(|t| t.clock == Some(Clock::Wall)) {
        ctx.warn(
            "this adapter has no timestamp queries: times are wall clock around each submission",
        );
    }
    Ok(Status::Success)
}

/// The cache this tune adds to (`current`, the file as it is now under the lock): the choices
/// of ops not tuned now are kept from a valid cache of this adapter; a stale or unreadable one
/// is replaced, with a warning.
fn starting_cache(
    ctx: &Ctx,
    gpu: &Gpu,
    current: Option<Result<Cache>>,
    p: &std::path::Path,
    level: Level,
) -> Cache {
    match current {
        Some(read) => match read {
            Ok(c) if c.stale_for(gpu).is_none() => c,
            Ok(c) => {
                let why = c.stale_for(gpu).unwrap_or_default();
                ctx.warn(&format!(
                    "{}: replacing a stale tune cache ({why})",
                    p.display()
                ));
                Cache::new(gpu, level.quick)
            }
            Err(e) => {
                ctx.warn(&format!("replacing an unreadable tune cache: {e:#}"));
                Cache::new(gpu, level.quick)
            }
        },
        None => Cache::new(gpu, level.quick),
    }
}

/// The table `gpukit tune` prints: one line per trial, `*` on the chosen ones.
fn table(trials: &[Trial]) -> String {
    let mut out = format!(
        "{:<10} {:<10} {:<10} {:<1} {:>10} {:>12} {:<8} {:<9} candidate\n",
        "op", "size", "stage", "", "median ms", "throughput", "unit", "status"
    );
    for t in trials {
        let status = match t.status {
            tune::Status::Measured => "measured",
            tune::Status::Dropped => "dropped",
            tune::Status::Wrong => "WRONG",
            tune::Status::Unfit => "unfit",
        };
        let num = |v: Option<f64>, prec: usize| {
            v.map_or_else(|| "-".to_string(), |v| format!("{v:.prec$}"))
        };
        out += &format!(
            "{:<10} {:<10} {:<10} {:<1} {:>10} {:>12} {:<8} {:<9} {}{}{}\n",
            t.op,
            t.size,
            t.stage,
            if t.chosen { "*" } else { "" },
            num(t.median_ms, 4),
            num(t.throughput, 2),
            if t.throughput.is_some() {
                t.unit.label()
            } else {
                ""
            },
            status,
            t.candidate,
            if t.default { " (default)" } else { "" },
            t.note.as_ref().map_or(String::new(), |n| format!(" ({n})")),
        );
    }
    out
}

/// The names `gpukit tune` takes: the registry's tunable ops, and `all`.
fn op_names() -> clap::builder::PossibleValuesParser {
    let names: Vec<&'static str> = ops::tunable().map(|op| op.name).chain(["all"]).collect();
    clap::builder::PossibleValuesParser::new(names)
}
