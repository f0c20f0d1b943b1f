//! `gpukit devices`: every adapter with the limits and features gpukit's kernels depend on.

use anyhow::Result;
use clap::Args;
use serde::Serialize;

use super::{print_stdout, Ctx, Status};
use crate::gpu::{list_adapters, AdapterReport, BackendChoice, DeviceSelector};
use crate::io::json::{Document, JsonDest, JsonSink};

#[derive(Debug, Args)]
pub struct DevicesArgs {
    /// Write the list as JSON to FILE, or to stdout with `-` (documented in docs/formats.md).
    #[arg(long, value_name = "FILE|-")]
    json: Option<JsonDest>,
}

/// The JSON document of `gpukit devices --json`.
#[derive(Serialize)]
struct DevicesDoc {
    gpukit_version: &'static str,
    adapters: Vec<AdapterReport>,
    /// Where `bench` and `tune` run when no --device is given: "gpu" (the adapter marked
    /// default) or "cpu".
    default_engine: &'static str,
    /// Where the commands that do work (every op's but copy's, `ops::command_names`) run: "cpu"
    /// also when the default adapter is a software rasteriser (docs/cli.md).
    work_engine: &'static str,
    cpu_engine: CpuEngineDoc,
}

impl Document for DevicesDoc {
    const SCHEMA: &'static str = "gpukit.devices/1";
}

/// gpukit's native CPU engine, an entry beside the adapters.
#[derive(Serialize)]
struct CpuEngineDoc {
    threads: usize,
}

pub fn run(ctx: &Ctx, args: DevicesArgs) -> Result<Status> {
    let sink = args.json.as_ref().map(JsonSink::open).transpose()?;
    for how in sink.iter().map(JsonSink::describe) {
        ctx.detail(&how);
    }
    let mut adapters = list_adapters(ctx.global.backend.map(Into::into))?;
    // `--device` (or GPUKIT_DEVICE) lists the adapter it picks, or fails as other commands do.
    if let Some(selector) = &ctx.global.device {
        adapters = selected(adapters, selector)?;
    }
    let named = ctx.global.device.is_some() || ctx.global.backend.is_some();
    let software = adapters.iter().any(|a| a.default && a.device_type == "cpu");
    let default_engine = if adapters.is_empty() { "cpu" } else { "gpu" };
    let doc = DevicesDoc {
        gpukit_version: env!("CARGO_PKG_VERSION"),
        default_engine,
        work_engine: if software && !named {
            "cpu"
        } else {
            default_engine
        },
        cpu_engine: CpuEngineDoc {
            threads: rayon::current_num_threads(),
        },
        adapters,
    };
    match sink {
        Some(sink) => sink.write(&doc)?,
        None => {
            let mut out = text(&doc.adapters, ctx.global.backend.map(Into::into));
            if !doc.adapters.is_empty() {
                out += &format!(
                    "[cpu] gpukit's native CPU engine, {} threads{}\n",
                    doc.cpu_engine.threads,
                    if doc.work_engine == "cpu" {
                        format!(
                            "  (runs {}: the default adapter is a software rasteriser)",
                            crate::ops::command_names()
                        )
                    } else {
                        "  (runs jobs too small to open a GPU for, and --backend cpu)".into()
                    }
                );
            }
            print_stdout(&out)?
        }
    }
    Ok(Status::Success)
}

/// The adapters `selector` names: the one of that index, or those whose name contains the
/// part (a run takes the best ranked of them), or for `all` and lists the union of what
/// they name; none is an error, as for every other command.
fn selected(adapters: Vec<AdapterReport>, selector: &DeviceSelector) -> Result<Vec<AdapterReport>> {
    let names: Vec<String> = adapters.iter().map(|a| a.name.clone()).collect();
    let names_it = |a: &AdapterReport, one: &DeviceSelector| match one {
        DeviceSelector::Index(i) => a.index == *i,
        DeviceSelector::Name(part) => a.name.to_lowercase().contains(&part.to_lowercase()),
        DeviceSelector::All | DeviceSelector::List(_) => false,
    };
    let hits: Vec<AdapterReport> = match selector {
        DeviceSelector::All => adapters,
        DeviceSelector::List(list) => adapters
            .into_iter()
            .filter(|a| list.iter().any(|one| names_it(a, one)))
            .collect(),
        one => adapters.into_iter().filter(|a| names_it(a, one)).collect(),
    };
    if hits.is_empty() {
        let what = match selector {
            DeviceSelector::Index(i) => format!("no adapter with index {i}"),
            DeviceSelector::Name(part) => format!("no adapter name contains {part:?}"),
            DeviceSelector::All | DeviceSelector::List(_) => "no adapter".to_string(),
        };
        anyhow::bail!(
            "--device: {what} (adapters: {})",
            if names.is_empty() {
                "none".to_string()
            } else {
                names.join(", ")
            }
        );
    }
    Ok(hits)
}

fn mib(bytes: u64) -> String {
    if bytes >= 1 << 30 && bytes.is_multiple_of(1 << 30) {
        format!("{} GiB", bytes >> 30)
    } else if bytes >= 1 << 20 {
        format!("{} MiB", bytes >> 20)
    } else {
        format!("{} KiB", bytes >> 10)
    }
}

fn text(adapters: &[AdapterReport], backend: Option<BackendChoice>) -> String {
    if adapters.is_empty() {
        return if backend == Some(BackendChoice::Cpu) {
            format!(
                "cpu: gpukit's native CPU engine, {} threads\n",
                rayon::current_num_threads()
            )
        } else {
            "no GPU adapter found; gpukit runs on its CPU backend\n".into()
        };
    }
    let mut out = String::new();
    for a in adapters {
        let l = &a.limits;
        let f = &a.features;
        out += &format!(
            "[{}] {}{}\n    backend {}, type {}, driver {} {}\n",
            a.index,
            a.name,
            if a.default { "  (default)" } else { "" },
            a.backend,
            a.device_type,
            a.driver,
            a.driver_info
        );
        out += &format!(
            "    storage binding {}, buffer {}, workgroup storage {}, invocations/workgroup {}, workgroup size {}x{}x{}, workgroups/dimension {}\n",
            mib(l.max_storage_buffer_binding_size),
            mib(l.max_buffer_size),
            mib(l.max_compute_workgroup_storage_size as u64),
            l.max_compute_invocations_per_workgroup,
            l.max_compute_workgroup_size[0],
            l.max_compute_workgroup_size[1],
            l.max_compute_workgroup_size[2],
            l.max_compute_workgroups_per_dimension
        );
        let yes = |b: bool| if b { "yes" } else { "no" };
        let subgroups = if f.subgroups {
            if f.subgroup_size[0] == f.subgroup_size[1] {
                format!("yes ({} wide)", f.subgroup_size[0])
            } else {
                format!("yes ({}..{} wide)", f.subgroup_size[0], f.subgroup_size[1])
            }
        } else {
            "no".into()
        };
        out += &format!(
            "    timestamps {}, subgroups {}, f16 {}\n",
            yes(f.timestamp_query),
            subgroups,
            yes(f.shader_f16)
        );
    }
    out
}
