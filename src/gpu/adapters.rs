//! Adapter discovery: the backends, the adapters of this machine in a stable order (`gpukit
//! devices`), their ranking, `--device` matching, what each can do, and whether the machine
//! has a GPU device node at all (without one, at best a software rasteriser is there). What
//! to do with what is found is the engine choice's (choice.rs).

use std::fmt;

use anyhow::{bail, Result};
use serde::Serialize;

use super::Timings;

/// A backend the user can ask for. `Cpu` is gpukit's own CPU reference backend.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum BackendChoice {
    Vulkan,
    Metal,
    Dx12,
    Gl,
    Cpu,
}

impl BackendChoice {
    fn wgpu(self) -> Option<wgpu::Backends> {
        match self {
            BackendChoice::Vulkan => Some(wgpu::Backends::VULKAN),
            BackendChoice::Metal => Some(wgpu::Backends::METAL),
            BackendChoice::Dx12 => Some(wgpu::Backends::DX12),
            BackendChoice::Gl => Some(wgpu::Backends::GL),
            BackendChoice::Cpu => None,
        }
    }
}

impl fmt::Display for BackendChoice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = match self {
            BackendChoice::Vulkan => "vulkan",
            BackendChoice::Metal => "metal",
            BackendChoice::Dx12 => "dx12",
            BackendChoice::Gl => "gl",
            BackendChoice::Cpu => "cpu",
        };
        f.write_str(s)
    }
}

/// How the user picked an adapter with `--device`: by index in `gpukit devices`, or by a
/// case-insensitive part of its name; or several (`all`, or a list `0,1`) for a batch to
/// share out (a command that runs on one device takes the first of them).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DeviceSelector {
    Index(usize),
    Name(String),
    /// Every hardware adapter (software rasterisers only where there is nothing else).
    All,
    List(Vec<DeviceSelector>),
}

impl fmt::Display for DeviceSelector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DeviceSelector::Index(i) => write!(f, "{i}"),
            DeviceSelector::Name(part) => f.write_str(part),
            DeviceSelector::All => f.write_str("all"),
            DeviceSelector::List(list) => {
                let parts: Vec<String> = list.iter().map(ToString::to_string).collect();
                f.write_str(&parts.join(","))
            }
        }
    }
}

impl std::str::FromStr for DeviceSelector {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let s = s.trim();
        if s.is_empty() {
            return Err("expected an adapter index or a part of its name".into());
        }
        if s.eq_ignore_ascii_case("all") {
            return Ok(DeviceSelector::All);
        }
        if s.contains(',') {
            let parts = s
                .split(',')
                .map(str::parse)
                .collect::<Result<Vec<_>, _>>()?;
            return Ok(DeviceSelector::List(parts));
        }
        Ok(match s.parse::<usize>() {
            Ok(i) => DeviceSelector::Index(i),
            Err(_) => DeviceSelector::Name(s.to_string()),
        })
    }
}

/// Everything `gpukit devices` reports about one adapter. Documented in docs/formats.md.
#[derive(Clone, Debug, Serialize)]
pub struct AdapterReport {
    pub index: usize,
    pub name: String,
    pub backend: String,
    pub device_type: String,
    pub driver: String,
    pub driver_info: String,
    pub vendor_id: u32,
    pub device_id: u32,
    /// Whether gpukit picks this adapter when no `--device` is given.
    pub default: bool,
    pub limits: LimitsReport,
    pub features: FeatureReport,
}

#[derive(Clone, Debug, Serialize)]
pub struct LimitsReport {
    pub max_storage_buffer_binding_size: u64,
    pub max_buffer_size: u64,
    pub max_compute_workgroup_storage_size: u32,
    pub max_compute_invocations_per_workgroup: u32,
    pub max_compute_workgroup_size: [u32; 3],
    pub max_compute_workgroups_per_dimension: u32,
}

/// The optional features gpukit's kernels can use, and whether the device has them.
#[derive(Clone, Copy, Debug, Default, Serialize, PartialEq, Eq)]
pub struct FeatureReport {
    pub timestamp_query: bool,
    pub subgroups: bool,
    /// Smallest and largest subgroup size; meaningful only where `subgroups` is true.
    pub subgroup_size: [u32; 2],
    pub shader_f16: bool,
}

/// The optional wgpu features gpukit asks for when the adapter has them (the pipeline
/// cache only where it is used).
pub(crate) const WANTED_FEATURES: wgpu::Features = wgpu::Features::TIMESTAMP_QUERY
    .union(wgpu::Features::SUBGROUP)
    .union(wgpu::Features::SHADER_F16)
    .union(wgpu::Features::PIPELINE_CACHE);

pub(super) fn feature_report(features: wgpu::Features, info: &wgpu::AdapterInfo) -> FeatureReport {
    let subgroups = features.contains(wgpu::Features::SUBGROUP);
    FeatureReport {
        timestamp_query: features.contains(wgpu::Features::TIMESTAMP_QUERY),
        subgroups,
        subgroup_size: if subgroups {
            [info.subgroup_min_size, info.subgroup_max_size]
        } else {
            [0, 0]
        },
        shader_f16: features.contains(wgpu::Features::SHADER_F16),
    }
}

fn limits_report(l: &wgpu::Limits) -> LimitsReport {
    LimitsReport {
        max_storage_buffer_binding_size: l.max_storage_buffer_binding_size,
        max_buffer_size: l.max_buffer_size,
        max_compute_workgroup_storage_size: l.max_compute_workgroup_storage_size,
        max_compute_invocations_per_workgroup: l.max_compute_invocations_per_workgroup,
        max_compute_workgroup_size: [
            l.max_compute_workgroup_size_x,
            l.max_compute_workgroup_size_y,
            l.max_compute_workgroup_size_z,
        ],
        max_compute_workgroups_per_dimension: l.max_compute_workgroups_per_dimension,
    }
}

pub(crate) fn device_type_name(t: wgpu::DeviceType) -> &'static str {
    match t {
        wgpu::DeviceType::DiscreteGpu => "discrete",
        wgpu::DeviceType::IntegratedGpu => "integrated",
        wgpu::DeviceType::VirtualGpu => "virtual",
        wgpu::DeviceType::Cpu => "cpu",
        wgpu::DeviceType::Other => "other",
    }
}

pub(crate) fn backend_name(b: wgpu::Backend) -> &'static str {
    match b {
        wgpu::Backend::Vulkan => "vulkan",
        wgpu::Backend::Metal => "metal",
        wgpu::Backend::Dx12 => "dx12",
        wgpu::Backend::Gl => "gl",
        wgpu::Backend::BrowserWebGpu => "webgpu",
        wgpu::Backend::Noop => "noop",
    }
}

/// Preference order: discrete, integrated, virtual, software, other; then native APIs before GL.
/// Lower is better.
pub fn rank(device_type: wgpu::DeviceType, backend: wgpu::Backend) -> (u8, u8) {
    let t = match device_type {
        wgpu::DeviceType::DiscreteGpu => 0,
        wgpu::DeviceType::IntegratedGpu => 1,
        wgpu::DeviceType::VirtualGpu => 2,
        wgpu::DeviceType::Cpu => 3,
        wgpu::DeviceType::Other => 4,
    };
    let b = match backend {
        wgpu::Backend::Vulkan | wgpu::Backend::Metal | wgpu::Backend::Dx12 => 0,
        wgpu::Backend::Gl => 1,
        _ => 2,
    };
    (t, b)
}

/// The facts selection needs about one adapter, so that the rule can be tested without one.
#[derive(Clone, Debug)]
pub struct Candidate {
    pub name: String,
    pub device_type: wgpu::DeviceType,
    pub backend: wgpu::Backend,
}

/// Picks an adapter: by index or name part when asked, else the best ranked. Indices are the
/// order of `candidates`, which is the order `gpukit devices` prints.
pub fn select(candidates: &[Candidate], selector: Option<&DeviceSelector>) -> Result<usize> {
    if candidates.is_empty() {
        bail!("no GPU adapter found");
    }
    match selector {
        None => Ok((0..candidates.len())
            .min_by_key(|&i| rank(candidates[i].device_type, candidates[i].backend))
            .expect("candidates is not empty")),
        Some(DeviceSelector::Index(i)) => {
            if *i < candidates.len() {
                Ok(*i)
            } else {
                bail!(
                    "no adapter with index {i}: there are {} (0..={}); see `gpukit devices`",
                    candidates.len(),
                    candidates.len() - 1
                )
            }
        }
        Some(DeviceSelector::All) => select(candidates, None),
        Some(DeviceSelector::List(list)) => select(candidates, list.first()),
        Some(DeviceSelector::Name(part)) => {
            let needle = part.to_lowercase();
            let hits: Vec<usize> = (0..candidates.len())
                .filter(|&i| candidates[i].name.to_lowercase().contains(&needle))
                .collect();
            match hits.as_slice() {
                [] => {
                    let names: Vec<&str> = candidates.iter().map(|c| c.name.as_str()).collect();
                    bail!(
                        "no adapter name contains {part:?} (adapters: {}); see `gpukit devices`",
                        names.join(", ")
                    )
                }
                // Several hits of one name (the same GPU through Vulkan and GL, say): best ranked.
                _ => Ok(*hits
                    .iter()
                    .min_by_key(|&&i| rank(candidates[i].device_type, candidates[i].backend))
                    .expect("hits is not empty")),
            }
        }
    }
}

/// The adapters a selector names, in its order: one for a single selector, each of a list
/// (an adapter may be named twice: two devices on it), or with `all` every hardware adapter
/// (software rasterisers only when there is nothing else).
pub fn select_all(
    candidates: &[Candidate],
    selector: Option<&DeviceSelector>,
) -> Result<Vec<usize>> {
    match selector {
        Some(DeviceSelector::All) => {
            let hardware: Vec<usize> = (0..candidates.len())
                .filter(|&i| candidates[i].device_type != wgpu::DeviceType::Cpu)
                .collect();
            if hardware.is_empty() {
                Ok(vec![select(candidates, None)?])
            } else {
                Ok(hardware)
            }
        }
        Some(DeviceSelector::List(list)) => list
            .iter()
            .map(|one| select(candidates, Some(one)))
            .collect(),
        one => Ok(vec![select(candidates, one)?]),
    }
}

fn instance(backends: wgpu::Backends) -> wgpu::Instance {
    let mut desc = wgpu::InstanceDescriptor::new_without_display_handle();
    desc.backends = backends;
    desc.flags = wgpu::InstanceFlags::empty().with_env();
    wgpu::Instance::new(desc)
}

fn backends_for(choice: Option<BackendChoice>) -> Result<wgpu::Backends> {
    let compiled = wgpu::Instance::enabled_backend_features()
        & (wgpu::Backends::VULKAN
            | wgpu::Backends::METAL
            | wgpu::Backends::DX12
            | wgpu::Backends::GL);
    match choice.and_then(BackendChoice::wgpu) {
        None => Ok(compiled),
        Some(b) if compiled.contains(b) => Ok(b),
        Some(_) => {
            let names: Vec<&str> = [
                (wgpu::Backends::VULKAN, "vulkan"),
                (wgpu::Backends::METAL, "metal"),
                (wgpu::Backends::DX12, "dx12"),
                (wgpu::Backends::GL, "gl"),
            ]
            .iter()
            .filter(|(b, _)| compiled.contains(*b))
            .map(|(_, n)| *n)
            .collect();
            bail!(crate::UsageError(format!(
                "backend {} is not available in this build of gpukit (available: {}, cpu)",
                choice.expect("checked above"),
                names.join(", ")
            )))
        }
    }
}

/// Lists adapters in a stable order: by rank, then by name, so that indices do not depend
/// on driver enumeration order. Without an explicit backend, GL is asked only when no native
/// API (Vulkan, Metal, DX12) has an adapter: on Linux, probing EGL is slow and noisy.
pub(super) fn enumerate(
    choice: Option<BackendChoice>,
    timings: &mut Timings,
) -> Result<Vec<wgpu::Adapter>> {
    let backends = backends_for(choice)?;
    let mut adapters = if choice.is_none() {
        let primary = enumerate_in(backends & wgpu::Backends::PRIMARY, timings);
        if primary.is_empty() {
            enumerate_in(backends & wgpu::Backends::GL, timings)
        } else {
            primary
        }
    } else {
        enumerate_in(backends, timings)
    };
    adapters.sort_by_key(|a| {
        let info = a.get_info();
        (rank(info.device_type, info.backend), info.name.clone())
    });
    Ok(adapters)
}

/// The adapters of `backends`; the time to create the instance (loading the drivers) and to
/// list them goes to the phases `instance` and `adapters`.
fn enumerate_in(backends: wgpu::Backends, timings: &mut Timings) -> Vec<wgpu::Adapter> {
    if backends.is_empty() {
        return Vec::new();
    }
    let instance = timings.phase("instance", || instance(backends));
    timings.phase("adapters", || {
        pollster::block_on(instance.enumerate_adapters(backends))
    })
}

pub(super) fn candidates(adapters: &[wgpu::Adapter]) -> Vec<Candidate> {
    adapters
        .iter()
        .map(|a| {
            let info = a.get_info();
            Candidate {
                name: info.name,
                device_type: info.device_type,
                backend: info.backend,
            }
        })
        .collect()
}

/// Every adapter of the requested backends, as `gpukit devices` prints them.
pub fn list_adapters(backend: Option<BackendChoice>) -> Result<Vec<AdapterReport>> {
    if backend == Some(BackendChoice::Cpu) {
        return Ok(Vec::new());
    }
    let adapters = enumerate(backend, &mut Timings::default())?;
    let default = select(&candidates(&adapters), None).ok();
    Ok(adapters
        .iter()
        .enumerate()
        .map(|(index, a)| {
            let info = a.get_info();
            AdapterReport {
                index,
                name: info.name.clone(),
                backend: backend_name(info.backend).into(),
                device_type: device_type_name(info.device_type).into(),
                driver: info.driver.clone(),
                driver_info: info.driver_info.clone(),
                vendor_id: info.vendor,
                device_id: info.device,
                default: default == Some(index),
                limits: limits_report(&a.limits()),
                features: feature_report(a.features(), &info),
            }
        })
        .collect())
}

/// The device nodes (in /dev) through which GPU drivers reach hardware on Linux: DRM (Mesa's
/// drivers, AMD, Intel, and most others), NVIDIA's, WSL's, and those of some mobile parts.
/// Software rasterisers (lavapipe, SwiftShader) need none.
pub(super) const GPU_NODES: [&str; 6] = ["dri/", "nvidia*", "dxg", "kgsl*", "mali*", "galcore"];

/// Whether `name`, an entry of /dev, is one of [`GPU_NODES`].
pub(super) fn is_gpu_node(name: &str, is_dir: bool) -> bool {
    GPU_NODES.iter().any(|pattern| {
        if let Some(dir) = pattern.strip_suffix('/') {
            is_dir && name == dir
        } else if let Some(prefix) = pattern.strip_suffix('*') {
            name.starts_with(prefix)
        } else {
            name == *pattern
        }
    })
}

/// Whether a hardware GPU could be here. Loading the Vulkan drivers to find out takes tens
/// of milliseconds (most of a small job's run), and a machine without a GPU device node
/// (a container, a CI runner) can have at most a software rasteriser, which the native CPU
/// engine outruns. Outside Linux: always (every adapter is asked).
pub(super) fn gpu_node_present() -> bool {
    if !cfg!(target_os = "linux") {
        return true;
    }
    let Ok(entries) = std::fs::read_dir("/dev") else {
        return true;
    };
    entries.flatten().any(|e| {
        let is_dir = e.file_type().is_ok_and(|t| t.is_dir());
        is_gpu_node(&e.file_name().to_string_lossy(), is_dir)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use wgpu::{Backend, DeviceType};

    fn c(name: &str, device_type: DeviceType, backend: Backend) -> Candidate {
        Candidate {
            name: name.into(),
            device_type,
            backend,
        }
    }

    #[test]
    fn all_and_lists_select_several_adapters() {
        let gpu = c("NVIDIA H200", DeviceType::DiscreteGpu, Backend::Vulkan);
        let lvp = c("llvmpipe", DeviceType::Cpu, Backend::Vulkan);
        let both = [lvp.clone(), gpu.clone(), gpu];
        let sel = |s: &str| s.parse::<DeviceSelector>().unwrap();
        // `all`: every hardware adapter, not the software rasteriser...
        assert_eq!(select_all(&both, Some(&sel("all"))).unwrap(), [1, 2]);
        // ...unless it is all there is.
        assert_eq!(
            select_all(std::slice::from_ref(&lvp), Some(&sel("ALL"))).unwrap(),
            [0]
        );
        // A list, in its order, an adapter named twice opened twice.
        assert_eq!(
            select_all(&both, Some(&sel("2,0,h200"))).unwrap(),
            [2, 0, 1]
        );
        assert_eq!(select_all(&both, Some(&sel("0,0"))).unwrap(), [0, 0]);
        assert!(select_all(&both, Some(&sel("0,7"))).is_err());
        // One device, or none named: one adapter, the best ranked for none.
        assert_eq!(select_all(&both, None).unwrap(), [1]);
        // A command that runs on one device takes the first of a list.
        assert_eq!(select(&both, Some(&sel("2,0"))).unwrap(), 2);
        assert!(",".parse::<DeviceSelector>().is_err());
    }

    #[test]
    fn default_prefers_discrete_then_native_backend() {
        let list = [
            c("llvmpipe", DeviceType::Cpu, Backend::Vulkan),
            c("Intel UHD", DeviceType::IntegratedGpu, Backend::Vulkan),
            c("NVIDIA H100", DeviceType::DiscreteGpu, Backend::Gl),
            c("NVIDIA H100", DeviceType::DiscreteGpu, Backend::Vulkan),
        ];
        assert_eq!(select(&list, None).unwrap(), 3);
        assert_eq!(select(&list[..2], None).unwrap(), 1);
        assert_eq!(select(&list[..1], None).unwrap(), 0);
    }

    #[test]
    fn pick_by_index_and_name_part() {
        let list = [
            c("NVIDIA H100", DeviceType::DiscreteGpu, Backend::Vulkan),
            c("llvmpipe (LLVM 15)", DeviceType::Cpu, Backend::Vulkan),
        ];
        assert_eq!(select(&list, Some(&DeviceSelector::Index(1))).unwrap(), 1);
        let by_name = DeviceSelector::Name("LLVMPIPE".into());
        assert_eq!(select(&list, Some(&by_name)).unwrap(), 1);
        let err = select(&list, Some(&DeviceSelector::Index(2))).unwrap_err();
        assert!(err.to_string().contains("no adapter with index 2"), "{err}");
        let err = select(&list, Some(&DeviceSelector::Name("radeon".into()))).unwrap_err();
        assert!(err.to_string().contains("\"radeon\""), "{err}");
        assert!(select(&[], None).is_err());
    }

    #[test]
    fn gpu_nodes_are_recognised() {
        assert!(is_gpu_node("dri", true));
        assert!(!is_gpu_node("dri", false));
        assert!(is_gpu_node("nvidia0", false));
        assert!(is_gpu_node("nvidiactl", false));
        assert!(is_gpu_node("dxg", false));
        assert!(is_gpu_node("kgsl-3d0", false));
        for other in ["null", "tty0", "shm", "dxgx", "input", "drix"] {
            assert!(!is_gpu_node(other, true), "{other}");
        }
    }

    #[test]
    fn selector_parses_index_or_name() {
        assert_eq!("2".parse::<DeviceSelector>(), Ok(DeviceSelector::Index(2)));
        assert_eq!(
            "h100".parse::<DeviceSelector>(),
            Ok(DeviceSelector::Name("h100".into()))
        );
        assert!("  ".parse::<DeviceSelector>().is_err());
    }
}
