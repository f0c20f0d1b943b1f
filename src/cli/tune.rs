//! `gpukit tune`: measures the kernels' shapes on this adapter and writes the tune cache;
//! and [`Tuned`], the cache as the other commands read it (once per run).

use std::cell::RefCell;
use std::fmt::Display;
use std::path::PathBuf;

use anyhow::Result;
use clap::Args;
use serde::de::DeserializeOwned;
use serde::Serialize;

use super::{print_stdout, term, Ctx, Status};
use crate::bench::Clock;
use crate::gpu::{Engine, Timings};
use crate::io::json::{JsonDest, JsonSink};
use crate::tune::{self, cache, Cache, Entry, Level, Trial};

#[derive(Debug, Args)]
pub struct TuneArgs {
    /// Ops to tune (default: all): blur, histogram, scan, matmul.
    #[arg(value_name = "OP")]
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

pub fn run(ctx: &Ctx, args: TuneArgs) -> Result<Status> {
    let ops: Vec<&str> = if args.ops.is_empty() || args.ops.iter().any(|o| o == "all") {
        tune::OPS.to_vec()
    } else {
        for o in &args.ops {
            if !tune::OPS.contains(&o.as_str()) {
                anyhow::bail!(crate::UsageError(format!(
                    "unknown tune op {o:?} (known: {}, all)",
                    tune::OPS.join(", ")
                )));
            }
        }
        args.ops.iter().map(String::as_str).collect()
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
    }
    let level = Level { quick: args.quick };
    // The choices of ops not tuned now are kept from a valid cache of this adapter.
    let mut doc = match path.as_ref().filter(|p| p.exists()) {
        Some(p) => match Cache::read(p) {
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
    };
    doc.quick |= level.quick;
    let hide = ctx.global.quiet || sink.as_ref().is_some_and(JsonSink::is_stdout);
    let bar = term::progress(ops.len() as u64, hide);
    let mut trials = Vec::new();
    let mut tuned = std::collections::BTreeMap::new();
    for op in ops {
        let result = tune::tune(&engine, op, level, &mut |msg| {
            bar.set_message(msg.to_string())
        })?;
        trials.extend(result.trials);
        tuned.insert(op.to_string(), result.entries.clone());
        doc.ops.insert(op.to_string(), result.entries);
        bar.inc(1);
    }
    bar.finish_and_clear();
    if let Some(p) = &path {
        doc.write(p)?;
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

/// The tune cache for this run's adapter, read once; each op asks it for its choice.
pub struct Tuned {
    cache: Option<(PathBuf, Cache)>,
    /// Why there is no cache, for `-v`.
    why_none: String,
    limits: Option<wgpu::Limits>,
    verbose: bool,
    /// The last `-v` line, so that a batch of files says it once.
    said: RefCell<String>,
}

impl Tuned {
    /// Reads the cache `--tune-cache`, GPUKIT_TUNE_CACHE or the cache folder names for the
    /// engine's adapter. A stale, corrupt or unreadable one is ignored with a warning.
    pub fn load(ctx: &Ctx, engine: &Engine) -> Tuned {
        let mut t = Tuned {
            cache: None,
            why_none: String::new(),
            limits: None,
            verbose: ctx.global.verbose > 0 && !ctx.global.quiet,
            said: RefCell::new(String::new()),
        };
        let Engine::Gpu(gpu) = engine else {
            return t;
        };
        t.limits = Some(gpu.limits.clone());
        if ctx.global.no_tune_cache {
            t.why_none = "--no-tune-cache".into();
            return t;
        }
        let explicit = ctx.global.tune_cache.as_deref();
        let path = match cache::path_for(gpu, explicit) {
            Ok(p) => p,
            Err(e) => {
                t.why_none = format!("{e:#}");
                return t;
            }
        };
        if explicit.is_none() && !path.exists() {
            t.why_none = format!("no tune cache at {}", path.display());
            return t;
        }
        match Cache::read(&path) {
            Err(e) => {
                ctx.warn(&format!("ignoring the tune cache: {e:#}"));
                t.why_none = "the tune cache is unreadable".into();
            }
            Ok(c) => match c.stale_for(gpu) {
                Some(why) => {
                    ctx.warn(&format!(
                        "{}: ignoring a stale tune cache ({why}); run `gpukit tune`",
                        path.display()
                    ));
                    t.why_none = "the tune cache is stale".into();
                }
                None => t.cache = Some((path, c)),
            },
        }
        t
    }

    /// The tuned choice of `op` for a problem of `size` (pixels, elements, or matmul's cube
    /// root of m n k), if the cache has one that `check` accepts on this adapter; `None`
    /// means the op's defaults. With `-v`, says which.
    pub fn choice<T: DeserializeOwned + Display>(
        &self,
        ctx: &Ctx,
        op: &str,
        size: f64,
        check: impl Fn(&T, &wgpu::Limits) -> Result<()>,
    ) -> Option<T> {
        let limits = self.limits.as_ref()?;
        let found = self.cache.as_ref().and_then(|(path, c)| {
            let entry = c.entry(op, size)?;
            match Cache::choice::<T>(entry).and_then(|t| check(&t, limits).map(|_| t)) {
                Ok(t) => Some((t, path, entry)),
                Err(e) => {
                    ctx.warn(&format!(
                        "{}: ignoring its {op} choice for {}: {e:#}",
                        path.display(),
                        entry.size
                    ));
                    None
                }
            }
        });
        if self.verbose {
            let line = match &found {
                Some((t, path, entry)) => format!(
                    "{op}: tuned {t} (cache {}, size class {})",
                    path.display(),
                    entry.size
                ),
                None if self.cache.is_some() => {
                    format!("{op}: defaults (no {op} entry in the tune cache)")
                }
                None => format!("{op}: defaults ({})", self.why_none),
            };
            if *self.said.borrow() != line {
                ctx.note(&line);
                *self.said.borrow_mut() = line;
            }
        }
        found.map(|(t, _, _)| t)
    }
}
