//! The engine choice: what the caller asks for (`DeviceRequest`), and the policy that turns it
//! into an engine, a GPU or gpukit's native CPU engine, with the reason (`--backend cpu`, no
//! adapter, no GPU device node, a software rasteriser, a job too small to open a GPU for).

use std::time::Duration;

use anyhow::{bail, Result};

use super::adapters::{
    candidates, enumerate, gpu_node_present, select, select_all, BackendChoice, DeviceSelector,
    GPU_NODES,
};
use super::device::open_adapter;
use super::{pipeline_cache, Gpu, Timings};

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
            let gpu = open_adapter(
                &adapters[i],
                &request.tune,
                &request.pipelines,
                &mut timings,
            )?;
            Ok(Engine::Gpu(Box::new(gpu)))
        })
        .collect::<Result<Vec<_>>>()?;
    let reason = Reason::Device(selector.to_string());
    Ok((engines, Choice { reason, timings }))
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
    let gpu = open_adapter(
        &adapters[index],
        &request.tune,
        &request.pipelines,
        &mut timings,
    )?;
    Ok((Engine::Gpu(Box::new(gpu)), Choice { reason, timings }))
}

/// Whether [`open`] gives `request` the native CPU engine without loading any driver
/// (`--backend cpu`, no GPU device node, a small job): then opening it costs nothing, and a
/// batch may open it before its first file.
pub fn native_cpu_at_once(request: &DeviceRequest) -> bool {
    let named = request.device.is_some() || request.backend.is_some();
    (request.backend == Some(BackendChoice::Cpu) && request.device.is_none())
        || (request.prefer_native_cpu && !named && !gpu_node_present())
        || small_job(request).is_some()
}

/// The estimate of a job that [`open`] gives to the native CPU engine without asking for
/// adapters: a GPU saving under [`SMALL_JOB`], where the request names no device or backend.
fn small_job(request: &DeviceRequest) -> Option<Duration> {
    let named = request.device.is_some() || request.backend.is_some();
    let t = request.gpu_saving?;
    (request.prefer_native_cpu && !named && t < SMALL_JOB).then_some(t)
}

/// Opens a GPU and fails if there is none: for code (tests, benchmarks) that must not fall
/// back to the CPU.
pub fn open_gpu(request: &DeviceRequest) -> Result<Gpu> {
    match open(request)? {
        (Engine::Gpu(gpu), _) => Ok(*gpu),
        (Engine::Cpu, _) => bail!("no GPU adapter found"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
