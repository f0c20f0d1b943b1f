//! Merging the JSON documents of shards (docs/scale-out.md) into the one an unsharded run
//! would have written: `gpukit merge shard-*.json` (histogram documents or batch reports),
//! and `gpukit histogram --merge`.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use clap::Args;
use serde_json::{Map, Value};

use super::{Ctx, Status};
use crate::io::json::{Document, JsonDest, JsonSink};
use crate::ops::histogram::channel_stats;

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
            super::histogram::HistogramDoc::SCHEMA,
        )
    } else {
        with_schema(reports(&args.inputs)?, crate::batch::report::Report::SCHEMA)
    };
    sink.write_value(&merged)?;
    Ok(Status::Success)
}

/// A merged document with its schema, which is that of the documents merged.
pub fn with_schema(mut doc: Value, schema: &str) -> Value {
    doc["schema"] = schema.into();
    doc
}

fn read(path: &Path) -> Result<Value> {
    let bytes = std::fs::read(path).with_context(|| format!("{}: cannot read", path.display()))?;
    serde_json::from_slice(&bytes)
        .with_context(|| format!("{}: not a gpukit JSON document", path.display()))
}

fn array<'v>(doc: &'v Value, key: &str, path: &Path) -> Result<&'v Vec<Value>> {
    doc[key].as_array().with_context(|| {
        format!(
            "{}: not a gpukit histogram document or batch report (no {key:?} list)",
            path.display()
        )
    })
}

/// Batch reports (`blur --report`) of the shards of one run as one: every file in input-path
/// order, the devices of all shards (each file's `device` pointing into that list), and the
/// totals recounted. The shards ran side by side, so `seconds` is the longest shard's and
/// `images_per_second` the files done over it.
pub fn reports(paths: &[PathBuf]) -> Result<Value> {
    let mut devices: Vec<Value> = Vec::new();
    let mut files = Vec::new();
    let mut seconds = 0f64;
    let mut command = Value::Null;
    for path in paths {
        let doc = read(path)?;
        if !command.is_null() && doc["command"] != command {
            bail!(
                "{}: a report of {}, the others of {command}",
                path.display(),
                doc["command"]
            );
        }
        command = doc["command"].clone();
        let mut index = Vec::new();
        for d in array(&doc, "devices", path)? {
            let at = devices.iter().position(|x| x == d).unwrap_or_else(|| {
                devices.push(d.clone());
                devices.len() - 1
            });
            index.push(at);
        }
        for f in array(&doc, "files", path)? {
            let mut f = f.clone();
            if let Some(i) = f["device"].as_u64() {
                let at = index.get(i as usize).with_context(|| {
                    format!(
                        "{}: a file's device is not in its devices list",
                        path.display()
                    )
                })?;
                f["device"] = (*at).into();
            }
            files.push(f);
        }
        seconds = seconds.max(doc["summary"]["seconds"].as_f64().unwrap_or(0.0));
    }
    files.sort_by_key(|f| PathBuf::from(f["input"].as_str().unwrap_or_default()));
    let count = |s: &str| files.iter().filter(|f| f["status"] == s).count();
    let done = count("ok");
    let summary = serde_json::json!({
        "files": files.len(),
        "done": done,
        "skipped": count("skipped"),
        "failed": count("failed"),
        "seconds": seconds,
        "images_per_second": if seconds > 0.0 { done as f64 / seconds } else { 0.0 },
    });
    let mut out = Map::new();
    out.insert("gpukit_version".into(), env!("CARGO_PKG_VERSION").into());
    out.insert("command".into(), command);
    out.insert("devices".into(), Value::Array(devices));
    out.insert("files".into(), Value::Array(files));
    out.insert("summary".into(), summary);
    Ok(Value::Object(out))
}

/// The histogram documents of `paths` as one: their inputs and failures in path order (the
/// order an unsharded run over a folder lists them), and the sum of their sums with its
/// statistics recomputed. Every document must have the same bins and alpha; the sum is null
/// unless every document has one.
pub fn histograms(paths: &[PathBuf]) -> Result<Value> {
    let mut docs = Vec::new();
    for p in paths {
        docs.push((p.as_path(), read(p)?));
    }
    let (first_path, first) = docs
        .first()
        .context("--merge needs at least one document")?;
    let mut inputs = Vec::new();
    let mut failed = Vec::new();
    for (path, doc) in &docs {
        for key in ["bins", "alpha"] {
            if doc[key] != first[key] {
                bail!(
                    "{}: {key} is {}, but {} has {}; only shards of one run can be merged",
                    path.display(),
                    doc[key],
                    first_path.display(),
                    first[key]
                );
            }
        }
        inputs.extend(array(doc, "inputs", path)?.iter().cloned());
        failed.extend(array(doc, "failed", path)?.iter().cloned());
    }
    let by_path = |v: &Value| PathBuf::from(v["path"].as_str().unwrap_or_default());
    inputs.sort_by_key(by_path);
    failed.sort_by_key(by_path);
    let sums: Vec<&Value> = docs.iter().map(|(_, d)| &d["sum"]).collect();
    let sum = if !failed.is_empty() || sums.iter().any(|s| s.is_null()) {
        Value::Null
    } else {
        add_sums(&docs, &sums)?
    };
    let mut out = Map::new();
    out.insert("gpukit_version".into(), env!("CARGO_PKG_VERSION").into());
    out.insert("bins".into(), first["bins"].clone());
    out.insert("alpha".into(), first["alpha"].clone());
    out.insert("inputs".into(), Value::Array(inputs));
    out.insert("failed".into(), Value::Array(failed));
    out.insert("sum".into(), sum);
    Ok(Value::Object(out))
}

fn add_sums(docs: &[(&Path, Value)], sums: &[&Value]) -> Result<Value> {
    let bad = |i: usize| {
        format!(
            "{}: its sum does not match the others'",
            docs[i].0.display()
        )
    };
    let mut total = sums[0].clone();
    for (i, s) in sums.iter().enumerate().skip(1) {
        for key in ["inputs", "pixels"] {
            let n = total[key]
                .as_u64()
                .zip(s[key].as_u64())
                .with_context(|| bad(i))?;
            total[key] = (n.0 + n.1).into();
        }
        let (Some(mine), Some(theirs)) =
            (total["channels"].as_array_mut(), s["channels"].as_array())
        else {
            bail!(bad(i));
        };
        if mine.len() != theirs.len() {
            bail!(bad(i));
        }
        for (a, b) in mine.iter_mut().zip(theirs) {
            let (Some(ca), Some(cb)) = (a["counts"].as_array(), b["counts"].as_array()) else {
                bail!(bad(i));
            };
            if a["name"] != b["name"] || ca.len() != cb.len() {
                bail!(bad(i));
            }
            let added: Option<Vec<u64>> = ca
                .iter()
                .zip(cb)
                .map(|(x, y)| Some(x.as_u64()? + y.as_u64()?))
                .collect();
            a["counts"] = added.with_context(|| bad(i))?.into();
        }
    }
    // The statistics of the added counts, as a run over all the inputs computes them.
    for channel in total["channels"].as_array_mut().into_iter().flatten() {
        let counts: Vec<u64> = channel["counts"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_u64)
            .collect();
        let stats = serde_json::to_value(channel_stats(&counts))?;
        for (k, v) in stats.as_object().into_iter().flatten() {
            channel[k.as_str()] = v.clone();
        }
    }
    Ok(total)
}
