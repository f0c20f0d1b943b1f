//! `gpukit merge shard-*.json`: the JSON documents of shards (histogram documents or batch
//! reports, docs/scale-out.md) as the one an unsharded run would have written: the flags,
//! and the merge of src/batch/merge.rs.

use std::path::PathBuf;

use anyhow::Result;
use clap::Args;

use super::{Ctx, Status};
use crate::batch::merge::{distinct, histograms, read, reports, with_schema};
use crate::io::json::{Document, JsonDest, JsonSink};

#[derive(Debug, Args)]
pub struct MergeArgs {
    /// The shards' documents: `histogram --json` documents, or `blur --report` reports.
    #[arg(value_name = "SHARD.json", required = true)]
    inputs: Vec<PathBuf>,
    /// Write the merged document to FILE.json, or to stdout with `-` (the default).
    #[arg(long, value_name = "FILE.json|-")]
    json: Option<JsonDest>,
}

pub fn run(_ctx: &Ctx, args: MergeArgs) -> Result<Status> {
    // Noted before the output is opened: `merge rep/*.json --json rep/all.json` run again
    // must not merge (or replace) its earlier output, nor any other document it reads.
    crate::io::output::note_inputs(args.inputs.iter().map(PathBuf::as_path));
    distinct(&args.inputs)?;
    let sink = JsonSink::open(args.json.as_ref().unwrap_or(&JsonDest::Stdout))?;
    let first = read(&args.inputs[0])?;
    // By the first document's schema; one written before documents had one, by its keys.
    let histogram = match first["schema"].as_str() {
        Some(s) => s.starts_with("gpukit.histogram/"),
        None => first.get("bins").is_some(),
    };
    let merged = if histogram {
        with_schema(
            histograms(&args.inputs)?,
            crate::ops::histogram::doc::HistogramDoc::SCHEMA,
        )
    } else {
        with_schema(reports(&args.inputs)?, crate::batch::report::Report::SCHEMA)
    };
    sink.write_value(&merged)?;
    Ok(Status::Success)
}
