//! The JSON documents of shards (docs/scale-out.md) merged into the one an unsharded run
//! would have written: histogram documents and batch reports, for `gpukit merge` and
//! `gpukit histogram --merge`.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use serde_json::{Map, Value};

use crate::ops::histogram::channel_stats;

/// A merged document with its schema, which is that of the documents merged: its first key,
/// as every document gpukit writes has it (keys keep their order: serde_json's
/// preserve_order).
pub fn with_schema(doc: Value, schema: &str) -> Value {
    let Value::Object(fields) = doc else {
        return doc;
    };
    let mut out = Map::new();
    out.insert("schema".into(), schema.into());
    out.extend(fields.into_iter().filter(|(k, _)| k != "schema"));
    Value::Object(out)
}

/// A usage error when one document is given twice (by any name): its counts would be added
/// twice.
pub fn distinct(paths: &[PathBuf]) -> Result<()> {
    let mut seen = std::collections::HashMap::new();
    for p in paths {
        if let Some(id) = crate::io::output::file_id(p) {
            if let Some(first) = seen.insert(id, p) {
                bail!(crate::UsageError(format!(
                    "{}: given twice (also as {}); each shard's document is merged once",
                    p.display(),
                    first.display()
                )));
            }
        }
    }
    Ok(())
}

/// A usage error when two documents list the same input: they are not disjoint shards of
/// one run (a document given twice, or a merged document among its own shards).
fn disjoint<'v>(entries: impl IntoIterator<Item = (&'v Path, &'v Value)>) -> Result<()> {
    let mut seen = std::collections::HashMap::<&str, &Path>::new();
    for (doc, entry) in entries {
        let Some(input) = entry["path"].as_str().or(entry["input"].as_str()) else {
            continue;
        };
        if let Some(first) = seen.insert(input, doc) {
            bail!(crate::UsageError(format!(
                "{}: lists {input}, which {} lists too; only disjoint shards of one run can be merged",
                doc.display(),
                first.display()
            )));
        }
    }
    Ok(())
}

/// The JSON document at `path`.
pub fn read(path: &Path) -> Result<Value> {
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
    crate::io::output::note_inputs(paths.iter().map(PathBuf::as_path));
    distinct(paths)?;
    let docs = paths
        .iter()
        .map(|p| Ok((p.as_path(), read(p)?)))
        .collect::<Result<Vec<_>>>()?;
    // A file skipped in one report (a --skip-existing re-run) may be done in another.
    disjoint(docs.iter().flat_map(|(p, d)| {
        d["files"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|f| f["status"] != "skipped")
            .map(move |f| (*p, f))
    }))?;
    for (path, doc) in docs {
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
    crate::io::output::note_inputs(paths.iter().map(PathBuf::as_path));
    distinct(paths)?;
    let mut docs = Vec::new();
    for p in paths {
        docs.push((p.as_path(), read(p)?));
    }
    widen_to_union(&mut docs)?;
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
    // After the bins and alpha: documents of other runs are told apart by those first.
    disjoint(docs.iter().flat_map(|(p, d)| {
        let listed = ["inputs", "failed"].map(|k| d[k].as_array().into_iter().flatten());
        listed.into_iter().flatten().map(move |e| (*p, e))
    }))?;
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

/// Gives every histogram in `docs` (each input's and each sum) the channels that cover all of
/// them, as an unsharded `--sum` run counts them (docs/histogram.md): gray as R = G = B with
/// its luminance the gray value, a missing alpha as opaque. A shard of gray images alone and
/// one with colour images can then be added.
fn widen_to_union(docs: &mut [(&Path, Value)]) -> Result<()> {
    let names = |d: &Value| -> Vec<String> {
        let sum = d["sum"]["channels"].as_array().into_iter().flatten();
        let inputs = d["inputs"].as_array().into_iter().flatten();
        let per_input = inputs.flat_map(|i| i["channels"].as_array().into_iter().flatten());
        sum.chain(per_input)
            .filter_map(|c| c["name"].as_str().map(str::to_string))
            .collect()
    };
    let all: Vec<String> = docs.iter().flat_map(|(_, d)| names(d)).collect();
    let color = all.iter().any(|n| n == "red");
    let alpha = all.iter().any(|n| n == "alpha");
    // Only a document that holds a sum (every input counted alike) is widened: without
    // --sum, each input keeps its own channels, as in an unsharded run.
    if !docs.iter().all(|(_, d)| d["sum"].is_object()) {
        return Ok(());
    }
    for (path, doc) in docs.iter_mut() {
        let mut histograms: Vec<&mut Value> = Vec::new();
        let (sum, inputs) = match doc {
            Value::Object(m) => {
                let mut sum = None;
                let mut inputs = None;
                for (k, v) in m.iter_mut() {
                    match k.as_str() {
                        "sum" => sum = Some(v),
                        "inputs" => inputs = Some(v),
                        _ => {}
                    }
                }
                (sum, inputs)
            }
            _ => (None, None),
        };
        histograms.extend(sum);
        histograms.extend(inputs.and_then(Value::as_array_mut).into_iter().flatten());
        for h in histograms {
            let pixels = h["pixels"].as_u64();
            let Some((pixels, channels)) = pixels.zip(h["channels"].as_array_mut()) else {
                bail!(
                    "{}: not a gpukit histogram document (a histogram without pixels or channels)",
                    path.display()
                );
            };
            widen(channels, color, alpha, pixels);
        }
    }
    Ok(())
}

/// One histogram's channels widened to colour and alpha (see [`widen_to_union`]).
fn widen(channels: &mut Vec<Value>, color: bool, alpha: bool, pixels: u64) {
    if color && channels.first().is_some_and(|c| c["name"] == "gray") {
        let gray = channels.remove(0);
        for (i, name) in ["red", "green", "blue", "luminance"]
            .into_iter()
            .enumerate()
        {
            let mut c = gray.clone();
            c["name"] = name.into();
            channels.insert(i, c);
        }
    }
    if alpha && !channels.iter().any(|c| c["name"] == "alpha") {
        let bins = channels
            .first()
            .and_then(|c| c["counts"].as_array())
            .map_or(0, Vec::len);
        if bins > 0 {
            let mut counts = vec![0u64; bins];
            counts[bins - 1] = pixels;
            let mut c = serde_json::json!({ "name": "alpha" });
            if let Ok(Value::Object(stats)) = serde_json::to_value(channel_stats(&counts)) {
                for (k, v) in stats {
                    c[k] = v;
                }
            }
            c["counts"] = counts.into();
            channels.push(c);
        }
    }
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
