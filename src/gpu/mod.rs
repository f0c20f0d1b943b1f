//! The GPU layer: the only module that talks to wgpu. It opens a headless device, builds
//! pipelines from wgsl/, moves data and times passes. It knows nothing of images or arrays.

pub mod cache_files;
mod device;
mod kernel;
pub mod pipeline_cache;
mod render;
pub mod shader;
mod timing;
mod transfer;

pub use device::{
    list_adapters, open, open_all, open_gpu, rank, select, select_all, AdapterReport,
    BackendChoice, Candidate, Choice, DeviceRequest, DeviceSelector, Engine, FeatureReport, Gpu,
    LimitsReport, Reason, SMALL_JOB,
};
pub use kernel::{grid, pipelines_built, Batch, Kernel, Usage, TIMED_PASSES};
pub use shader::{compose, Composed, Shader, Variant};
pub use timing::{span_ns, PassTime, PassTimer, Timings};
pub use transfer::{Download, Upload};
