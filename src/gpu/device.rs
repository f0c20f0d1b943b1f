//! An open GPU device (`Gpu`): its queue, limits and features, its pipelines, and what the
//! layers above keep with it (`Gpu::attached`); opened on an adapter that discovery found.

use std::any::{Any, TypeId};
use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

use anyhow::{Context, Result};

use super::adapters::{
    backend_name, device_type_name, feature_report, FeatureReport, WANTED_FEATURES,
};
use super::pipeline_cache::{self, PipelineCache};
use super::Timings;

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
    /// Where the ops find this adapter's tune cache (`crate::tune` reads it, and keeps it
    /// with the device through [`Gpu::attached`]).
    pub tune: super::cache_files::Settings,
    /// What the layers above keep with this device, one value per type ([`Gpu::attached`]).
    attached: Mutex<HashMap<TypeId, Arc<dyn Any + Send + Sync>>>,
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

    /// The value of type `T` that a layer above keeps with this device (the tune cache, read
    /// once per device), made by `make` on the first call and dropped with the device. gpu
    /// holds it without knowing what it is.
    pub fn attached<T: Any + Send + Sync>(&self, make: impl FnOnce() -> T) -> Arc<T> {
        let slot = {
            let mut slots = self.attached.lock().unwrap_or_else(PoisonError::into_inner);
            let slot = slots
                .entry(TypeId::of::<T>())
                .or_insert_with(|| Arc::new(OnceLock::<Arc<T>>::new()));
            Arc::clone(slot)
                .downcast::<OnceLock<Arc<T>>>()
                .expect("slots are keyed by their type")
        };
        // Made outside the lock: `make` may ask for another type's value.
        Arc::clone(slot.get_or_init(|| Arc::new(make())))
    }

    /// Lowers the per-dimension workgroup count used for dispatch grids (never above the
    /// adapter's own limit), so tests can reach the 2-D dispatch path with small inputs.
    pub fn set_dispatch_limit(&mut self, limit: u32) {
        self.dispatch_limit = limit.clamp(1, self.limits.max_compute_workgroups_per_dimension);
    }
}

/// Opens a device on `adapter` (phase `device`) and reads its pipeline cache (phase
/// `pipeline cache`).
pub(super) fn open_adapter(
    adapter: &wgpu::Adapter,
    tune: &super::cache_files::Settings,
    pipelines: &pipeline_cache::Settings,
    timings: &mut Timings,
) -> Result<Gpu> {
    let info = adapter.get_info();
    let mut features = adapter.features() & WANTED_FEATURES;
    if matches!(pipelines.source, pipeline_cache::Source::Off) {
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
        PipelineCache::open(&device, &info, pipelines)
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
        tune: tune.clone(),
        attached: Mutex::default(),
    })
}
