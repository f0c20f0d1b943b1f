//! `copy`: a plain copy kernel. It does no useful work: it is the memory-bandwidth speed of
//! light that `gpukit bench` holds every other op against on the same adapter.

use anyhow::{bail, Result};

use crate::bench::{Case, Sizes, Unit};
use crate::gpu::{Batch, Engine, Gpu, Kernel, Timings, Usage};
use crate::shader;

/// `copy` in the registry (bench only: a copy has nothing to tune).
pub const OP: super::Op = super::Op {
    name: "copy",
    bench: bench_cases,
    tune: None,
    shaders,
    command: false,
};

fn shaders() -> Vec<super::ShaderCase> {
    vec![super::ShaderCase::params::<CopyParams>(shader!("copy")).with_overrides(&overrides())]
}

/// A copy has no options; the type is here so that every op has the same shape.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Options;

const WG_SIZE: u32 = 256;
const VEC_PER_THREAD: u32 = 1;

/// The kernel's overridable constants.
fn overrides() -> [(&'static str, f64); 2] {
    [
        ("WG_SIZE", WG_SIZE as f64),
        ("VEC_PER_THREAD", VEC_PER_THREAD as f64),
    ]
}

/// Its WGSL twin is `Params` in wgsl/copy.wgsl (the shader test checks their fields).
#[repr(C)]
#[derive(Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
struct CopyParams {
    n_vec4: u32,
}

crate::ops::params_layout!(CopyParams { n_vec4 });

/// The CPU reference: a copy.
pub fn reference(data: &[u32]) -> Vec<u32> {
    data.to_vec()
}

/// Copies `data` on the engine and returns the copy.
pub fn run(engine: &Engine, data: &[u32], _: &Options, timings: &mut Timings) -> Result<Vec<u32>> {
    match engine {
        Engine::Cpu => Ok(timings.phase("compute", || reference(data))),
        Engine::Gpu(gpu) => {
            let plan = timings.phase("upload", || CopyPlan::new(gpu, data))?;
            gpu.run_timed(timings, 1, |b, _| plan.record(b))?;
            timings.phase("download", || plan.read(gpu))
        }
    }
}

/// A copy with its buffers on the device, recordable many times (for `bench`).
pub struct CopyPlan {
    kernel: Kernel,
    bind: wgpu::BindGroup,
    dst: wgpu::Buffer,
    n: usize,
    workgroups: u32,
}

impl CopyPlan {
    pub fn new(gpu: &Gpu, data: &[u32]) -> Result<Self> {
        let n = data.len();
        let n_vec4 = n.div_ceil(4);
        let bytes = n_vec4 as u64 * 16;
        let max = gpu.limits.max_storage_buffer_binding_size;
        if bytes > max {
            bail!("a copy of {bytes} bytes exceeds this adapter's largest storage binding ({max} bytes)");
        }
        let kernel = gpu.kernel(&shader!("copy"), "main", &overrides())?;
        // The shader moves whole vec4s: pad the source to a multiple of 4 words.
        let mut padded = Vec::with_capacity(n_vec4 * 4);
        padded.extend_from_slice(data);
        padded.resize(n_vec4 * 4, 0);
        let src = gpu.upload("copy src", Usage::Storage, &padded);
        let dst = gpu.buffer("copy dst", Usage::Storage, bytes);
        let params = gpu.upload(
            "copy params",
            Usage::Uniform,
            &[CopyParams {
                n_vec4: n_vec4 as u32,
            }],
        );
        let bind = gpu.bind(&kernel, &[&params, &src, &dst]);
        let workgroups = (n_vec4 as u32).div_ceil(WG_SIZE * VEC_PER_THREAD);
        Ok(CopyPlan {
            kernel,
            bind,
            dst,
            n,
            workgroups,
        })
    }

    pub fn record(&self, batch: &mut Batch) {
        batch.dispatch("copy", &self.kernel, &self.bind, self.workgroups);
    }

    pub fn read(&self, gpu: &Gpu) -> Result<Vec<u32>> {
        gpu.read_vec(&self.dst, self.n)
    }
}

/// `bench copy`: `sizes.copy_bytes` bytes of u32 read and written once; throughput counts
/// both.
fn bench_cases<'e>(engine: &'e Engine, sizes: &Sizes) -> Result<Vec<Case<'e>>> {
    let bytes = sizes.copy_bytes;
    let bytes = match engine {
        Engine::Gpu(gpu) => bytes.min(gpu.limits.max_storage_buffer_binding_size),
        Engine::Cpu => bytes,
    } / 16
        * 16;
    let n = (bytes / 4) as usize;
    let data: Vec<u32> = (0..n as u32).collect();
    let name = format!("{} MiB u32", bytes >> 20);
    let work = 2.0 * bytes as f64;
    Ok(vec![match engine {
        Engine::Gpu(gpu) => {
            let plan = CopyPlan::new(gpu, &data)?;
            Case::gpu("copy", name, Unit::GBps, work, move |b| plan.record(b))
        }
        Engine::Cpu => Case::cpu("copy", name, Unit::GBps, work, move || {
            std::hint::black_box(reference(&data));
        }),
    }])
}
