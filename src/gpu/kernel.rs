//! The helpers every op uses: pipelines from wgsl/, buffers, bind groups, dispatch grids,
//! command batches with per-pass timestamps, upload and read-back.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use wgpu::util::DeviceExt;

use super::shader::{compose, Shader, Variant};
use super::timing::{PassTime, PassTimer, Timings};
use super::Gpu;

/// Dispatches recorded into one timed submission by [`Gpu::run_timed`]: at most two timestamp
/// queries each (a compute pass's, where its dispatches share one: fewer), within wgpu's 4096
/// queries per set; more go into further submissions, so that memory stays bounded whatever
/// the count.
pub const TIMED_PASSES: u64 = 1024;

/// Pipelines built in this process (on any device) and the wall time spent building them:
/// process-wide, as `--timings` reports a whole run.
static BUILT: Mutex<(u32, Duration)> = Mutex::new((0, Duration::ZERO));

/// How many pipelines this process built, and the wall time that took (shader translation
/// and the driver's compilation, less what the pipeline cache saved).
pub fn pipelines_built() -> (u32, Duration) {
    *BUILT.lock().expect("pipeline counter poisoned")
}

/// A compute pipeline and the name it was built from (used as the label of its passes).
#[derive(Debug)]
pub struct Kernel {
    pub name: String,
    pub pipeline: wgpu::ComputePipeline,
}

/// How a buffer will be used; each maps to the usage flags it needs, said once here.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Usage {
    /// Read or written by shaders; COPY_SRC to read it back, COPY_DST to upload or clear it.
    Storage,
    /// Small parameter blocks; COPY_DST so they can be rewritten between dispatches.
    Uniform,
}

impl Usage {
    fn flags(self) -> wgpu::BufferUsages {
        match self {
            Usage::Storage => {
                wgpu::BufferUsages::STORAGE
                    | wgpu::BufferUsages::COPY_SRC
                    | wgpu::BufferUsages::COPY_DST
            }
            Usage::Uniform => wgpu::BufferUsages::UNIFORM | wgpu::BufferUsages::COPY_DST,
        }
    }
}

impl Gpu {
    /// Builds `entry` of `shader` with pipeline-overridable constants. Shader and pipeline
    /// errors come back as `Err` with the shader's name, not as a panic. Pipelines are cached
    /// per device, so a batch of files compiles each variant once.
    pub fn kernel(
        &self,
        shader: &Shader,
        entry: &str,
        constants: &[(&str, f64)],
    ) -> Result<Kernel> {
        self.kernel_variant(shader, &Variant::default(), entry, constants, false)
    }

    /// Like [`Gpu::kernel`], but without the loop-bounding counter wgpu adds to every loop.
    /// That counter keeps drivers from unrolling a register-blocked kernel's inner loops, and
    /// its register tile then spills to memory. Only for shaders whose every loop has a
    /// bound the shader states (a constant, or a uniform size); bounds checks stay on.
    pub fn kernel_unrolled(
        &self,
        shader: &Shader,
        entry: &str,
        constants: &[(&str, f64)],
    ) -> Result<Kernel> {
        self.kernel_variant(shader, &Variant::default(), entry, constants, true)
    }

    /// [`Gpu::kernel`] (or, with `unrolled`, [`Gpu::kernel_unrolled`]) for a named variant
    /// of `shader` (see [`crate::gpu::shader`]).
    pub fn kernel_variant(
        &self,
        shader: &Shader,
        variant: &Variant,
        entry: &str,
        constants: &[(&str, f64)],
        unrolled: bool,
    ) -> Result<Kernel> {
        let checks = wgpu::ShaderRuntimeChecks {
            force_loop_bounding: !unrolled,
            ..wgpu::ShaderRuntimeChecks::checked()
        };
        // SAFETY: only the loop counter is off, and only where the caller says every loop
        // ends (`kernel_unrolled`'s contract).
        unsafe { self.kernel_checked(shader, variant, entry, constants, checks) }
    }

    /// [`Gpu::kernel_unrolled`] with none of wgpu's runtime checks
    /// (`ShaderRuntimeChecks::unchecked`): no clamp on any array index, no guard on integer
    /// division.
    ///
    /// # Safety
    /// Every index `shader` makes into a buffer or an array (workgroup, private, storage)
    /// must be in range for every input the caller binds, no integer division or remainder
    /// may be by zero (or i32::MIN by -1), and every loop must end.
    pub unsafe fn kernel_unchecked(
        &self,
        shader: &Shader,
        variant: &Variant,
        entry: &str,
        constants: &[(&str, f64)],
    ) -> Result<Kernel> {
        let checks = wgpu::ShaderRuntimeChecks::unchecked();
        // SAFETY: the caller's contract.
        unsafe { self.kernel_checked(shader, variant, entry, constants, checks) }
    }

    /// The pipeline with the runtime checks `checks`.
    ///
    /// # Safety
    /// As `wgpu::Device::create_shader_module_trusted`: what `checks` turns off must not be
    /// needed (indices in range, loops that end).
    unsafe fn kernel_checked(
        &self,
        shader: &Shader,
        variant: &Variant,
        entry: &str,
        constants: &[(&str, f64)],
        checks: wgpu::ShaderRuntimeChecks,
    ) -> Result<Kernel> {
        let label = format!("{}:{entry}", shader.name.trim_end_matches(".wgsl"));
        let key = format!(
            "{label}{variant:?}{constants:?}{} {} {}",
            checks.force_loop_bounding, checks.bounds_checks, checks.int_div_checks
        );
        // One slot per key: the first thread to ask builds the pipeline while the others
        // wait on the slot (the engine threads of a batch ask for the same ones at once, and
        // drivers compile one at a time: 16 builds of 4 pipelines took 0.94 s on an H100).
        let slot = Arc::clone(
            self.pipelines
                .lock()
                .expect("pipeline cache poisoned")
                .entry(key)
                .or_default(),
        );
        let mut slot = slot.lock().expect("pipeline slot poisoned");
        if let Some(pipeline) = slot.as_ref() {
            return Ok(Kernel {
                name: label,
                pipeline: pipeline.clone(),
            });
        }
        let start = Instant::now();
        let composed = compose(shader, variant)?;
        let scope = self.device.push_error_scope(wgpu::ErrorFilter::Validation);
        let desc = wgpu::ShaderModuleDescriptor {
            label: Some(&composed.label),
            source: wgpu::ShaderSource::Wgsl(composed.source.into()),
        };
        // SAFETY: what `checks` turns off is not needed (this function's contract).
        let module = unsafe { self.device.create_shader_module_trusted(desc, checks) };
        let pipeline = self
            .device
            .create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
                label: Some(&label),
                layout: None,
                module: &module,
                entry_point: Some(entry),
                compilation_options: wgpu::PipelineCompilationOptions {
                    constants,
                    // Every kernel writes its workgroup memory before reading it.
                    zero_initialize_workgroup_memory: false,
                },
                cache: self.pipeline_cache.as_ref().map(|c| &c.cache),
            });
        if let Some(e) = pollster::block_on(scope.pop()) {
            bail!("building {label} failed: {}", one_line(&e.to_string()));
        }
        {
            let mut built = BUILT.lock().expect("pipeline counter poisoned");
            built.0 += 1;
            built.1 += start.elapsed();
        }
        *slot = Some(pipeline.clone());
        Ok(Kernel {
            name: label,
            pipeline,
        })
    }

    /// A buffer holding `data`.
    pub fn upload<T: bytemuck::Pod>(&self, label: &str, usage: Usage, data: &[T]) -> wgpu::Buffer {
        let bytes: &[u8] = bytemuck::cast_slice(data);
        if bytes.is_empty() {
            // Bindings may not be empty: keep a minimal buffer.
            return self.buffer(label, usage, 0);
        }
        self.device
            .create_buffer_init(&wgpu::util::BufferInitDescriptor {
                label: Some(label),
                contents: bytes,
                usage: usage.flags(),
            })
    }

    /// A zeroed buffer of `size` bytes, rounded up to 4 and at least 16, so that even an empty
    /// input binds as an array of vec4.
    pub fn buffer(&self, label: &str, usage: Usage, size: u64) -> wgpu::Buffer {
        self.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some(label),
            size: size.max(16).next_multiple_of(wgpu::COPY_BUFFER_ALIGNMENT),
            usage: usage.flags(),
            mapped_at_creation: false,
        })
    }

    /// A bind group for group 0 with `buffers[i]` at binding i, whole buffers.
    pub fn bind(&self, kernel: &Kernel, buffers: &[&wgpu::Buffer]) -> wgpu::BindGroup {
        let entries: Vec<wgpu::BindGroupEntry> = buffers
            .iter()
            .enumerate()
            .map(|(i, b)| wgpu::BindGroupEntry {
                binding: i as u32,
                resource: b.as_entire_binding(),
            })
            .collect();
        self.device.create_bind_group(&wgpu::BindGroupDescriptor {
            label: Some(&kernel.name),
            layout: &kernel.pipeline.get_bind_group_layout(0),
            entries: &entries,
        })
    }

    /// A bind group for group 0 with `(buffer, offset, size)` ranges at bindings 0, 1, ...
    pub fn bind_ranges(
        &self,
        kernel: &Kernel,
        ranges: &[(&wgpu::Buffer, u64, u64)],
    ) -> wgpu::BindGroup {
        let entries: Vec<wgpu::BindGroupEntry> = ranges
            .iter()
            .enumerate()
            .map(|(i, &(buffer, offset, size))| wgpu::BindGroupEntry {
                binding: i as u32,
                resource: wgpu::BindingResource::Buffer(wgpu::BufferBinding {
                    buffer,
                    offset,
                    size: std::num::NonZeroU64::new(size),
                }),
            })
            .collect();
        self.device.create_bind_group(&wgpu::BindGroupDescriptor {
            label: Some(&kernel.name),
            layout: &kernel.pipeline.get_bind_group_layout(0),
            entries: &entries,
        })
    }

    /// The dispatch grid for `workgroups` workgroups: 1-D while it fits the per-dimension
    /// limit, else 2-D. Shaders recover the linear index as `wid.x + wid.y * nwg.x` and guard
    /// against the few extra workgroups a 2-D grid may have.
    pub fn grid(&self, workgroups: u32) -> [u32; 3] {
        grid(workgroups, self.dispatch_limit)
    }

    /// A command batch: record passes into it, then `submit` it.
    pub fn batch<'a>(&'a self, timer: Option<&'a mut PassTimer>) -> Batch<'a> {
        let encoder = self
            .device
            .create_command_encoder(&wgpu::CommandEncoderDescriptor {
                label: Some("gpukit"),
            });
        Batch {
            pass: None,
            gpu: self,
            encoder,
            timer,
        }
    }

    /// Blocks until the queue is idle, then reports any error wgpu raised meanwhile.
    pub fn wait(&self) -> Result<()> {
        self.device
            .poll(wgpu::PollType::wait_indefinitely())
            .map_err(|e| anyhow!("waiting for the GPU failed: {e}"))?;
        self.check()
    }

    /// Turns errors wgpu reported outside an error scope into an `Err`.
    pub fn check(&self) -> Result<()> {
        let mut errors = self.errors.lock().expect("error sink poisoned");
        if errors.is_empty() {
            return Ok(());
        }
        let first = errors.remove(0);
        errors.clear();
        bail!("GPU error: {}", one_line(&first))
    }

    /// Reads `size` bytes at `offset` of `buffer` back to the host.
    pub fn read(&self, buffer: &wgpu::Buffer, offset: u64, size: u64) -> Result<Vec<u8>> {
        self.read_with(buffer, offset, size, <[u8]>::to_vec)
    }

    /// Hands the `size` bytes at `offset` of `buffer` to `f` in the mapped read-back memory
    /// (4-byte aligned), so that callers convert them without copying them first.
    pub fn read_with<T>(
        &self,
        buffer: &wgpu::Buffer,
        offset: u64,
        size: u64,
        f: impl FnOnce(&[u8]) -> T,
    ) -> Result<T> {
        if size == 0 {
            return Ok(f(&[]));
        }
        let padded = size.next_multiple_of(wgpu::COPY_BUFFER_ALIGNMENT);
        // MAP_READ buffers can only be copy destinations: stage through one.
        let staging = self.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("read-back"),
            size: padded,
            usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        let mut encoder = self
            .device
            .create_command_encoder(&wgpu::CommandEncoderDescriptor {
                label: Some("read-back"),
            });
        encoder.copy_buffer_to_buffer(buffer, offset, &staging, 0, padded);
        self.queue.submit([encoder.finish()]);
        self.read_mapped(&staging, |bytes| f(&bytes[..size as usize]))
    }

    /// Maps a MAP_READ staging buffer once the submitted work is done, hands its bytes to
    /// `f` and unmaps it.
    pub(crate) fn read_mapped<T>(
        &self,
        staging: &wgpu::Buffer,
        f: impl FnOnce(&[u8]) -> T,
    ) -> Result<T> {
        let (tx, rx) = std::sync::mpsc::channel();
        staging.map_async(wgpu::MapMode::Read, .., move |r| {
            let _ = tx.send(r);
        });
        self.wait()?;
        rx.recv()
            .context("read-back callback never ran")?
            .map_err(|e| anyhow!("mapping the read-back buffer failed: {e}"))?;
        let out = {
            let view = staging
                .get_mapped_range(..)
                .map_err(|e| anyhow!("mapping the read-back buffer failed: {e}"))?;
            f(&view)
        };
        staging.unmap();
        Ok(out)
    }

    /// Records passes `0..passes` (by ranges of at most [`TIMED_PASSES`], one submission
    /// each) with `record`, submits and waits: the wall time goes to the "compute" phase of
    /// `timings`, each pass's GPU time to its passes. Memory stays bounded for any count.
    pub fn run_timed(
        &self,
        timings: &mut Timings,
        passes: u64,
        mut record: impl FnMut(&mut Batch, std::ops::Range<u64>),
    ) -> Result<()> {
        let mut timer = PassTimer::new(self, passes.clamp(1, TIMED_PASSES) as u32);
        let mut start = 0;
        loop {
            let end = passes.min(start + TIMED_PASSES);
            timings.phase("compute", || {
                let mut batch = self.batch(Some(&mut timer));
                record(&mut batch, start..end);
                batch.submit()
            })?;
            timings.add_passes(&timer.take(self)?);
            start = end;
            if start >= passes {
                return Ok(());
            }
        }
    }

    /// Writes `bytes` into `buffer` at `offset` (queued before the next submission).
    pub fn write_buffer(&self, buffer: &wgpu::Buffer, offset: u64, bytes: &[u8]) {
        self.queue.write_buffer(buffer, offset, bytes);
    }

    /// Writes `bytes` at the start of `buffer`; a tail short of a word is padded with zeros
    /// (a queue write must be a whole number of words).
    pub fn write_padded(&self, buffer: &wgpu::Buffer, bytes: &[u8]) {
        let whole = bytes.len() / 4 * 4;
        if whole > 0 {
            self.write_buffer(buffer, 0, &bytes[..whole]);
        }
        if whole < bytes.len() {
            let mut tail = [0u8; 4];
            tail[..bytes.len() - whole].copy_from_slice(&bytes[whole..]);
            self.write_buffer(buffer, whole as u64, &tail);
        }
    }

    /// Reads `len` values of type `T` from the start of `buffer`.
    pub fn read_vec<T: bytemuck::Pod>(&self, buffer: &wgpu::Buffer, len: usize) -> Result<Vec<T>> {
        let size = (len * std::mem::size_of::<T>()) as u64;
        self.read_with(buffer, 0, size, bytemuck::pod_collect_to_vec)
    }
}

/// wgpu's errors span several lines (with source excerpts); gpukit's errors are one line.
pub(crate) fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// See [`Gpu::grid`]. Ops size their dispatches (by splitting into strips or segments) so
/// that `workgroups <= limit * limit`; more is a bug in the op.
pub fn grid(workgroups: u32, limit: u32) -> [u32; 3] {
    if workgroups <= limit {
        [workgroups, 1, 1]
    } else {
        let y = workgroups.div_ceil(limit);
        assert!(
            y <= limit,
            "{workgroups} workgroups exceed a {limit} x {limit} grid"
        );
        [workgroups.div_ceil(y), y, 1]
    }
}

/// Commands being recorded for one submission. Consecutive dispatches go into one compute
/// pass (wgpu still places a barrier between two that share a buffer): each pass boundary
/// cost about 10 us on an H100 (call DZ in docs/BENCHMARKS.md), 13% of a 4K resize. A copy,
/// a clear or the submission ends the pass; a [`PassTimer::split`] timer gives each dispatch
/// a pass of its own.
pub struct Batch<'a> {
    // The open pass, declared first so that it ends before the encoder is dropped.
    pass: Option<wgpu::ComputePass<'static>>,
    gpu: &'a Gpu,
    encoder: wgpu::CommandEncoder,
    timer: Option<&'a mut PassTimer>,
}

impl Batch<'_> {
    /// Records dispatching `kernel` over `workgroups` workgroups (a 2-D grid when needed),
    /// timed under `label` when the batch has a timer.
    pub fn dispatch(
        &mut self,
        label: &str,
        kernel: &Kernel,
        bind: &wgpu::BindGroup,
        workgroups: u32,
    ) {
        if workgroups == 0 {
            return;
        }
        let [x, y, z] = self.gpu.grid(workgroups);
        self.dispatch_xyz(label, kernel, bind, [x, y, z]);
    }

    /// Records a dispatch with an explicit 3-D grid, in the open compute pass or a new one.
    pub fn dispatch_xyz(
        &mut self,
        label: &str,
        kernel: &Kernel,
        bind: &wgpu::BindGroup,
        grid: [u32; 3],
    ) {
        let split = self.timer.as_deref().is_some_and(PassTimer::splits);
        if split {
            self.end_pass();
        }
        let pass = match &mut self.pass {
            Some(pass) => {
                if let Some(t) = self.timer.as_deref_mut() {
                    t.join(label);
                }
                pass
            }
            None => {
                let timestamp_writes = self.timer.as_deref_mut().and_then(|t| t.next(label));
                let pass = self
                    .encoder
                    .begin_compute_pass(&wgpu::ComputePassDescriptor {
                        label: Some(label),
                        timestamp_writes,
                    })
                    .forget_lifetime();
                self.pass.insert(pass)
            }
        };
        pass.set_pipeline(&kernel.pipeline);
        pass.set_bind_group(0, bind, &[]);
        pass.dispatch_workgroups(grid[0], grid[1], grid[2]);
    }

    /// Ends the open compute pass, if any: before the encoder records anything else.
    fn end_pass(&mut self) {
        self.pass = None;
    }

    /// Records zeroing the whole of `buffer`.
    pub fn clear_buffer(&mut self, buffer: &wgpu::Buffer) {
        self.end_pass();
        self.encoder.clear_buffer(buffer, 0, None);
    }

    /// Records copying the first `size` bytes (a multiple of 4) of `src` to the start of `dst`.
    pub fn copy(&mut self, src: &wgpu::Buffer, dst: &wgpu::Buffer, size: u64) {
        self.end_pass();
        self.encoder.copy_buffer_to_buffer(src, 0, dst, 0, size);
    }

    /// Records copying `size` bytes (a multiple of 4) at `src_offset` of `src` to `dst_offset`
    /// of `dst`.
    pub fn copy_at(
        &mut self,
        src: &wgpu::Buffer,
        src_offset: u64,
        dst: &wgpu::Buffer,
        dst_offset: u64,
        size: u64,
    ) {
        self.end_pass();
        self.encoder
            .copy_buffer_to_buffer(src, src_offset, dst, dst_offset, size);
    }

    /// Submits the batch and, once it is done, hands `staging` (a MAP_READ buffer that its
    /// copies fill) to `f` in the mapped memory: one wait, for this submission alone (not for
    /// work other threads submitted after it), and one mapping. The timer's pass times are
    /// copied into `staging` at `times_at` (16 bytes a pass of its capacity) and read from
    /// the same mapping.
    ///
    /// The wait polls without blocking (a blocking poll holds wgpu's device lock while it
    /// waits, and any other thread's submission or clean-up then waits behind it: engine
    /// threads sharing a device took turns, 6 ms a file for 0.45 ms of GPU work on an H200).
    pub fn submit_read<T>(
        mut self,
        staging: &wgpu::Buffer,
        times_at: u64,
        f: impl FnOnce(&[u8]) -> T,
    ) -> Result<(T, Vec<PassTime>)> {
        self.end_pass();
        if let Some(timer) = self.timer.as_deref() {
            timer.resolve_to(&mut self.encoder, staging, times_at);
        }
        let index = self.gpu.queue.submit([self.encoder.finish()]);
        let (tx, rx) = std::sync::mpsc::channel();
        staging.map_async(wgpu::MapMode::Read, .., move |r| {
            let _ = tx.send(r);
        });
        let mapped = loop {
            self.gpu
                .device
                .poll(wgpu::PollType::Poll)
                .map_err(|e| anyhow!("polling the GPU failed: {e}"))?;
            // An error (a failed submission) ends the wait rather than a mapping that may
            // never come.
            self.gpu.check()?;
            match rx.try_recv() {
                Ok(r) => break r,
                Err(std::sync::mpsc::TryRecvError::Empty) => {
                    std::thread::sleep(Duration::from_micros(20));
                }
                Err(std::sync::mpsc::TryRecvError::Disconnected) => {
                    bail!("read-back callback never ran (submission {index:?})")
                }
            }
        };
        self.gpu.check()?;
        mapped.map_err(|e| anyhow!("mapping the read-back buffer failed: {e}"))?;
        let out = {
            let view = staging
                .get_mapped_range(..)
                .map_err(|e| anyhow!("mapping the read-back buffer failed: {e}"))?;
            let times = match self.timer.as_deref_mut() {
                Some(timer) => timer.take_from(&view[times_at as usize..]),
                None => Vec::new(),
            };
            (f(&view), times)
        };
        staging.unmap();
        Ok(out)
    }

    /// Submits the batch without waiting for it: what it did is known from the mappings
    /// asked for after it ([`super::FrameSlot`]), whose callbacks a poll runs.
    /// A batch with a timer is submitted with [`Batch::submit`], which reads the times.
    pub fn submit_queued(mut self) -> Result<()> {
        self.end_pass();
        debug_assert!(self.timer.is_none(), "timed batches are read when done");
        self.gpu.queue.submit([self.encoder.finish()]);
        self.gpu.check()
    }

    /// Submits the batch and waits for it to finish (not for work submitted after it, by
    /// other threads sharing the device).
    pub fn submit(mut self) -> Result<()> {
        self.end_pass();
        if let Some(timer) = self.timer.as_deref_mut() {
            timer.resolve(&mut self.encoder);
        }
        let index = self.gpu.queue.submit([self.encoder.finish()]);
        self.gpu
            .device
            .poll(wgpu::PollType::Wait {
                submission_index: Some(index),
                timeout: None,
            })
            .map_err(|e| anyhow!("waiting for the GPU failed: {e}"))?;
        self.gpu.check()
    }
}

#[cfg(test)]
mod tests {
    use super::grid;

    #[test]
    fn grid_stays_1d_within_limit_and_covers_beyond() {
        assert_eq!(grid(1, 65535), [1, 1, 1]);
        assert_eq!(grid(65535, 65535), [65535, 1, 1]);
        assert_eq!(grid(65536, 65535), [32768, 2, 1]);
        for n in [1u32, 8, 9, 10, 48, 49, 63, 64, 65, 1000, 4_000_000_000] {
            for limit in [1u32, 7, 8, 65535] {
                if n as u64 > limit as u64 * limit as u64 {
                    continue;
                }
                let [x, y, _] = grid(n, limit);
                assert!(x <= limit && y <= limit, "{n} {limit}");
                assert!(x as u64 * y as u64 >= n as u64, "{n} {limit}");
                // No more than one row of spare workgroups.
                assert!((x as u64 * y as u64) < n as u64 + x as u64, "{n} {limit}");
            }
        }
    }
}
