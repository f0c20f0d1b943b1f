//! The GPU layer: the only module that talks to wgpu. It opens a headless device, builds
//! pipelines from wgsl/, moves data and times passes. It knows nothing of images or arrays,
//! of the ops or of the tune cache above it (which it holds for them, `Gpu::attached`), nor
//! of the command line. In floors: adapters.rs (discovery), device.rs (an open device),
//! choice.rs (the engine choice); the pipelines, buffers and timing beside them.

mod adapters;
pub mod cache_files;
mod choice;
mod device;
mod kernel;
pub mod pipeline_cache;
mod render;
mod ring;
pub mod shader;
mod timing;
mod transfer;

pub use adapters::{
    list_adapters, rank, select, select_all, AdapterReport, BackendChoice, Candidate,
    DeviceSelector, FeatureReport, LimitsReport,
};
pub use choice::{
    native_cpu_at_once, open, open_all, open_gpu, Choice, DeviceRequest, Engine, Reason, SMALL_JOB,
};
pub use device::Gpu;
pub use kernel::{grid, pipelines_built, Batch, Kernel, Usage, TIMED_PASSES};
pub use ring::{FrameSlot, Mapped};
pub use shader::{compose, Composed, Shader, Variant};
pub use timing::{span_ns, PassTime, PassTimer, Timings};
pub use transfer::{Download, Upload};
