//! Adapter discovery, ranking and selection, and opening a headless device.

use std::fmt;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{bail, Context, Result};
use serde::Serialize;

use super::pipeline_cache::{self, PipelineCache};
use super::Timings;

/// A backend the user can ask for. `Cpu` is gpukit's own CPU reference backend.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum, Serialize)]
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

/// What the user asked for; the default picks the best adapter of any compiled-in backend,
/// with the user's tune cache and no pipeline cache.
#[derive(Clone, Debug)]
pub struct DeviceRequest {
    pub backend: Option<BackendChoice>,
    pub device: Option<DeviceSelector>,
    /// Where the ops find this device's tuned shapes (the tune cache is per adapter).
    pub tune: super::cache_files::Settings,
    /// Where the device keeps its compiled pipelines between runs (off by default).
    pub pipelines: pipeline_cache::Settings,
    /// Run on gpukit's native CPU engine rather than on a software rasteriser (Mesa
    /// lavapipe, WARP, SwiftShader) when that is the best adapter and neither `device` nor
    /// `backend` names one: the engine is many times faster. Off for measuring kernels.
    pub prefer_native_cpu: bool,
    /// The time a GPU would save against the native CPU engine on the whole job (the
    /// engine's estimate, less the GPU path's own host time where the op knows it), where the
    /// command knows the job's size before the device opens. With `prefer_native_cpu` and
    /// nothing named, a job whose saving is under [`SMALL_JOB`] runs on that engine.
    pub gpu_saving: Option<Duration>,
}

impl Default for DeviceRequest {
    fn default() -> Self {
        DeviceRequest {
            backend: None,
            device: None,
            tune: super::cache_files::Settings::default(),
            pipelines: pipeline_cache::Settings::off(),
            prefer_native_cpu: false,
            gpu_saving: None,
        }
    }
}

/// The least time a GPU must be estimated to save ([`DeviceRequest::gpu_saving`]) for a job
/// to open one. Opening one takes 50 to 700 ms where it was measured (loading the driver,
/// creating the device and the pipelines: 180-300 ms warm on an H100 host, over 1 s on its
/// first run after boot), partly hidden behind the first decodes. 100 ms is where batches of
/// 1080p blurs on the H100 host (16 cores) crossed from the engine to the GPU: a 128-photo
/// gaussian of sigma 5 (a 108 ms estimate) was a tie, sigma 10 (220 ms) 1.4x faster on the
/// GPU, a box (10 ms) 1.4x faster on the engine (docs/BENCHMARKS.md, call S).
pub const SMALL_JOB: Duration = Duration::from_millis(100);

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

fn feature_report(features: wgpu::Features, info: &wgpu::AdapterInfo) -> FeatureReport {
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

/// Opens every device the request names (`--device all` or a list; one otherwise), for a
/// batch that shares its images among them. The software-rasteriser rule of [`open`] applies
/// when no device is named.
pub fn open_all(request: &DeviceRequest) -> Result<(Vec<Engine>, Choice)> {
    let Some(selector @ (DeviceSelector::All | DeviceSelector::List(_))) = &request.device else {
        let (engine, choice) = open(request)?;
        return Ok((vec![engine], choice));
    };
    if request.backend == Some(BackendChoice::Cpu) {
        bail!(crate::UsageError(
            "--device cannot be combined with --backend cpu".into()
        ));
    }
    let mut timings = Timings::default();
    let adapters = enumerate(request.backend, &mut timings)?;
    let indices = select_all(&candidates(&adapters), Some(selector))?;
    let engines = indices
        .into_iter()
        .map(|i| {
            let gpu = open_adapter(&adapters[i], request, &mut timings)?;
            Ok(Engine::Gpu(Box::new(gpu)))
        })
        .collect::<Result<Vec<_>>>()?;
    let reason = Reason::Device(selector.to_string());
    Ok((engines, Choice { reason, timings }))
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
fn enumerate(choice: Option<BackendChoice>, timings: &mut Timings) -> Result<Vec<wgpu::Adapter>> {
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

fn candidates(adapters: &[wgpu::Adapter]) -> Vec<Candidate> {
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

/// An open GPU device and what it can do. Ops receive `&Gpu` and never open devices.
pub struct Gpu {
    pub device: wgpu::Device,
    pub queue: wgpu::Queue,
    pub info: wgpu::AdapterInfo,
    pub limits: wgpu::Limits,
    pub features: FeatureReport,
    /// The largest workgroup count per dispatch dimension that `grid` uses. The adapter's
    /// limit unless lowered with `set_dispatch_limit` (tests do, to reach 2-D grids cheaply).
    pub(crate) dispatch_limit: u32,
    /// Errors wgpu reported outside an error scope; turned into `Err` by `Gpu::check`.
    pub(crate) errors: Arc<Mutex<Vec<String>>>,
    /// Pipelines by shader, entry point and constants: each built once, by the first thread
    /// that asks for it, while others asking for it wait (`Gpu::kernel_variant`).
    pub(crate) pipelines: Mutex<std::collections::HashMap<String, PipelineSlot>>,
    /// The driver's compiled pipelines, kept on disk between runs where the backend can.
    pub(crate) pipeline_cache: Option<PipelineCache>,
    /// How the ops read this adapter's tune cache; the cache itself, read on first use.
    /// This layer only holds them: what a choice means is the ops' business.
    pub tune: super::cache_files::Settings,
    pub(crate) tuned: std::sync::OnceLock<crate::tune::Tuned>,
}

/// One pipeline of [`Gpu::pipelines`]: empty until built.
pub(crate) type PipelineSlot = Arc<Mutex<Option<wgpu::ComputePipeline>>>;

impl fmt::Debug for Gpu {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Gpu")
            .field("adapter", &self.info.name)
            .field("backend", &self.info.backend)
            .finish_non_exhaustive()
    }
}

impl Drop for Gpu {
    /// Writes the pipeline cache back when pipelines were built (and it changed).
    fn drop(&mut self) {
        let built = self.pipelines.get_mut().is_ok_and(|p| {
            p.values()
                .any(|slot| slot.lock().is_ok_and(|s| s.is_some()))
        });
        if let Some(cache) = self.pipeline_cache.as_ref().filter(|_| built) {
            cache.save();
        }
    }
}

impl Gpu {
    /// A one-line description: name, backend and type.
    pub fn describe(&self) -> String {
        format!(
            "{} ({}, {}, driver {} {})",
            self.info.name,
            backend_name(self.info.backend),
            device_type_name(self.info.device_type),
            self.info.driver,
            self.info.driver_info
        )
    }

    /// Lowers the per-dimension workgroup count used for dispatch grids (never above the
    /// adapter's own limit), so tests can reach the 2-D dispatch path with small inputs.
    pub fn set_dispatch_limit(&mut self, limit: u32) {
        self.dispatch_limit = limit.clamp(1, self.limits.max_compute_workgroups_per_dimension);
    }
}

/// The compute backend the ops run on.
#[derive(Debug)]
pub enum Engine {
    Gpu(Box<Gpu>),
    /// gpukit's native CPU engine; used with `--backend cpu`, when no adapter exists, and in
    /// place of a software rasteriser ([`DeviceRequest::prefer_native_cpu`]).
    Cpu,
}

impl Engine {
    /// One line: the adapter's description, or `cpu`.
    pub fn describe(&self) -> String {
        match self {
            Engine::Gpu(g) => g.describe(),
            Engine::Cpu => "cpu (gpukit's native CPU engine)".into(),
        }
    }
}

/// Why `open` chose its engine, for the line `-v` and `--timings` print.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Reason {
    /// `--backend cpu`.
    BackendCpu,
    /// No adapter was found and the user asked for none in particular.
    NoAdapter,
    /// The best adapter is a software rasteriser (its name), passed over for the native CPU
    /// engine ([`DeviceRequest::prefer_native_cpu`]).
    SoftwareAdapter(String),
    /// The machine has no GPU device node, so at best a software rasteriser: the native CPU
    /// engine, without loading the drivers to ask ([`DeviceRequest::prefer_native_cpu`]).
    NoGpuNode,
    /// The job is small: a GPU would save less than [`SMALL_JOB`] (the estimate, from
    /// [`DeviceRequest::gpu_saving`]), less than opening one costs.
    SmallJob(Duration),
    /// The best ranked adapter, of this type; nothing was named.
    Best(wgpu::DeviceType),
    /// Named by `--device` (as given).
    Device(String),
    /// The best adapter of the backend `--backend` names.
    Backend(BackendChoice),
}

impl Reason {
    fn of(request: &DeviceRequest, device_type: wgpu::DeviceType) -> Reason {
        match (&request.device, request.backend) {
            (Some(selector), _) => Reason::Device(selector.to_string()),
            (None, Some(backend)) => Reason::Backend(backend),
            (None, None) => Reason::Best(device_type),
        }
    }

    /// `engine: WHAT: WHY`, e.g. `engine: native CPU (8 threads): no GPU adapter found`.
    pub fn line(&self, engines: &[Engine]) -> String {
        let what: Vec<String> = engines
            .iter()
            .map(|e| match e {
                Engine::Gpu(g) => g.describe(),
                Engine::Cpu => format!("native CPU ({} threads)", rayon::current_num_threads()),
            })
            .collect();
        let why = match self {
            Reason::BackendCpu => "--backend cpu".to_string(),
            Reason::NoAdapter => "no GPU adapter found".to_string(),
            Reason::NoGpuNode => {
                let nodes: Vec<String> = GPU_NODES
                    .iter()
                    .map(|n| format!("/dev/{}", n.trim_end_matches('/')))
                    .collect();
                format!(
                    "no GPU device node ({}), so no adapter but software rasterisers; \
                     drivers not loaded (--device or --backend asks them)",
                    nodes.join(", ")
                )
            }
            Reason::SmallJob(t) => format!(
                "a small job (a GPU would save about {:.1} ms, less than opening it costs) \
                 (--device or --backend runs on the adapter)",
                t.as_secs_f64() * 1e3
            ),
            Reason::SoftwareAdapter(name) => format!(
                "the best adapter, {name}, is a software rasteriser, and this engine is faster \
                 (--device or --backend runs on the adapter)"
            ),
            Reason::Best(wgpu::DeviceType::Cpu) => {
                "the best adapter, a software rasteriser (bench and tune measure adapters)".into()
            }
            Reason::Best(t) => format!("the best adapter, {}", type_words(*t)),
            Reason::Device(selector) => format!("named by --device {selector}"),
            Reason::Backend(b) => format!("the best {b} adapter (--backend {b})"),
        };
        format!("engine: {}: {why}", what.join(", "))
    }
}

fn type_words(t: wgpu::DeviceType) -> &'static str {
    match t {
        wgpu::DeviceType::DiscreteGpu => "a discrete GPU",
        wgpu::DeviceType::IntegratedGpu => "an integrated GPU",
        wgpu::DeviceType::VirtualGpu => "a virtual GPU",
        wgpu::DeviceType::Cpu => "a software rasteriser",
        wgpu::DeviceType::Other => "of no known type",
    }
}

/// How `open` came to its engine, and the time each step of opening took (phases
/// `instance`, `adapters`, `device`, `pipeline cache`), for `--timings`.
#[derive(Debug)]
pub struct Choice {
    pub reason: Reason,
    pub timings: Timings,
}

/// Opens the engine the request names. Without a request it takes the best adapter, or the
/// CPU backend when there is none at all; a named backend or device that is missing is an error.
pub fn open(request: &DeviceRequest) -> Result<(Engine, Choice)> {
    let mut timings = Timings::default();
    let cpu = |reason, timings| Ok((Engine::Cpu, Choice { reason, timings }));
    if request.backend == Some(BackendChoice::Cpu) {
        if request.device.is_some() {
            bail!(crate::UsageError(
                "--device cannot be combined with --backend cpu".into()
            ));
        }
        return cpu(Reason::BackendCpu, timings);
    }
    let named = request.device.is_some() || request.backend.is_some();
    if request.prefer_native_cpu && !named && !timings.phase("adapters", gpu_node_present) {
        return cpu(Reason::NoGpuNode, timings);
    }
    if let Some(t) = small_job(request) {
        return cpu(Reason::SmallJob(t), timings);
    }
    let adapters = enumerate(request.backend, &mut timings)?;
    if adapters.is_empty() {
        if let Some(b) = request.backend {
            bail!("no {b} adapter found (is its driver installed? `gpukit devices` lists what is there)");
        }
        if request.device.is_some() {
            bail!("no GPU adapter found, so --device cannot pick one (`gpukit devices` lists adapters)");
        }
        return cpu(Reason::NoAdapter, timings);
    }
    let index = select(&candidates(&adapters), request.device.as_ref())?;
    let info = adapters[index].get_info();
    let reason = Reason::of(request, info.device_type);
    if request.prefer_native_cpu && reason == Reason::Best(wgpu::DeviceType::Cpu) {
        return cpu(Reason::SoftwareAdapter(info.name), timings);
    }
    let gpu = open_adapter(&adapters[index], request, &mut timings)?;
    Ok((Engine::Gpu(Box::new(gpu)), Choice { reason, timings }))
}

/// The estimate of a job that [`open`] gives to the native CPU engine without asking for
/// adapters: a GPU saving under [`SMALL_JOB`], where the request names no device or backend.
fn small_job(request: &DeviceRequest) -> Option<Duration> {
    let named = request.device.is_some() || request.backend.is_some();
    let t = request.gpu_saving?;
    (request.prefer_native_cpu && !named && t < SMALL_JOB).then_some(t)
}

/// The device nodes (in /dev) through which GPU drivers reach hardware on Linux: DRM (Mesa's
/// drivers, AMD, Intel, and most others), NVIDIA's, WSL's, and those of some mobile parts.
/// Software rasterisers (lavapipe, SwiftShader) need none.
const GPU_NODES: [&str; 6] = ["dri/", "nvidia*", "dxg", "kgsl*", "mali*", "galcore"];

/// Whether `name`, an entry of /dev, is one of [`GPU_NODES`].
fn is_gpu_node(name: &str, is_dir: bool) -> bool {
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
fn gpu_node_present() -> bool {
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

/// Opens a GPU and fails if there is none: for code (tests, benchmarks) that must not fall
/// back to the CPU.
pub fn open_gpu(request: &DeviceRequest) -> Result<Gpu> {
    match open(request)? {
        (Engine::Gpu(gpu), _) => Ok(*gpu),
        (Engine::Cpu, _) => bail!("no GPU adapter found"),
    }
}

/// Opens a device on `adapter` (phase `device`) and reads its pipeline cache (phase
/// `pipeline cache`).
fn open_adapter(
    adapter: &wgpu::Adapter,
    request: &DeviceRequest,
    timings: &mut Timings,
) -> Result<Gpu> {
    let info = adapter.get_info();
    let mut features = adapter.features() & WANTED_FEATURES;
    if matches!(request.pipelines.source, pipeline_cache::Source::Off) {
        features.remove(wgpu::Features::PIPELINE_CACHE);
    }
    // The adapter's real limits, not the WebGPU defaults: ops size their work to them.
    let limits = adapter.limits();
    let (device, queue) = timings
        .phase("device", || {
            pollster::block_on(adapter.request_device(&wgpu::DeviceDescriptor {
                label: Some("gpukit"),
                required_features: features,
                required_limits: limits.clone(),
                memory_hints: wgpu::MemoryHints::Performance,
                ..Default::default()
            }))
        })
        .with_context(|| format!("could not open a device on adapter {}", info.name))?;
    let pipeline_cache = timings.phase("pipeline cache", || {
        PipelineCache::open(&device, &info, &request.pipelines)
    });

    let errors = Arc::new(Mutex::new(Vec::new()));
    let sink = Arc::clone(&errors);
    device.on_uncaptured_error(Arc::new(move |e: wgpu::Error| {
        sink.lock()
            .expect("error sink poisoned")
            .push(e.to_string());
    }));
    let report = feature_report(device.features(), &info);
    let dispatch_limit = limits.max_compute_workgroups_per_dimension;
    Ok(Gpu {
        device,
        queue,
        info,
        limits,
        features: report,
        dispatch_limit,
        errors,
        pipelines: Mutex::default(),
        pipeline_cache,
        tune: request.tune.clone(),
        tuned: std::sync::OnceLock::new(),
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
    fn small_jobs_run_on_the_cpu_engine_unless_an_adapter_is_named() {
        let request = |estimate_ms: Option<u64>, backend, device: Option<&str>| DeviceRequest {
            backend,
            device: device.map(|d| d.parse().unwrap()),
            prefer_native_cpu: true,
            gpu_saving: estimate_ms.map(Duration::from_millis),
            ..DeviceRequest::default()
        };
        let ms = Duration::from_millis;
        assert_eq!(small_job(&request(Some(3), None, None)), Some(ms(3)));
        assert_eq!(small_job(&request(Some(99), None, None)), Some(ms(99)));
        // At the limit and over it, or with no estimate: the GPU is asked for.
        assert_eq!(small_job(&request(Some(100), None, None)), None);
        assert_eq!(small_job(&request(Some(500), None, None)), None);
        assert_eq!(small_job(&request(None, None, None)), None);
        // A named device or backend is used whatever the size.
        assert_eq!(small_job(&request(Some(3), None, Some("0"))), None);
        assert_eq!(
            small_job(&request(Some(3), Some(BackendChoice::Vulkan), None)),
            None
        );
        // bench and tune measure adapters: they never prefer the CPU engine.
        let measuring = DeviceRequest {
            prefer_native_cpu: false,
            ..request(Some(3), None, None)
        };
        assert_eq!(small_job(&measuring), None);
        // The engine line says why.
        let line = Reason::SmallJob(ms(3)).line(&[Engine::Cpu]);
        assert!(line.starts_with("engine: native CPU ("), "{line}");
        assert!(
            line.contains(
                "a small job (a GPU would save about 3.0 ms, less than opening it costs)"
            ),
            "{line}"
        );
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
    fn reasons_read_as_sentences() {
        let cpu = [Engine::Cpu];
        let line = Reason::SoftwareAdapter("llvmpipe (LLVM 15)".into()).line(&cpu);
        assert!(
            line.starts_with("engine: native CPU (")
                && line.contains("threads): the best adapter, llvmpipe (LLVM 15), is a software"),
            "{line}"
        );
        assert!(Reason::NoGpuNode
            .line(&cpu)
            .contains("no GPU device node (/dev/dri, /dev/nvidia*, /dev/dxg,"));
        assert!(Reason::BackendCpu.line(&cpu).ends_with(": --backend cpu"));
        assert_eq!(
            Reason::Device("0,llvm".parse::<DeviceSelector>().unwrap().to_string()),
            Reason::Device("0,llvm".into())
        );
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
