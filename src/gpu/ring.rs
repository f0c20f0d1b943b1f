//! Staging for frames that stream through the GPU several at a time: each [`FrameSlot`] is
//! an upload buffer that the host fills while it is mapped and a read-back buffer that a
//! batch copies results into. Mappings are asked for without waiting; their callbacks run
//! in whichever thread polls the device ([`Gpu::poll`]), so that one frame's upload, another's
//! passes and a third's download overlap.

use anyhow::{anyhow, Result};

use super::Gpu;

/// One frame's staging: both buffers whole words long.
pub struct FrameSlot {
    upload: wgpu::Buffer,
    readback: wgpu::Buffer,
}

impl Gpu {
    /// A slot for frames of `bytes` bytes, its upload buffer mapped and ready to fill.
    pub fn frame_slot(&self, bytes: u64) -> FrameSlot {
        let size = bytes.max(4).next_multiple_of(wgpu::COPY_BUFFER_ALIGNMENT);
        let buffer = |label, usage, mapped_at_creation| {
            self.device.create_buffer(&wgpu::BufferDescriptor {
                label: Some(label),
                size,
                usage,
                mapped_at_creation,
            })
        };
        FrameSlot {
            // MAP_WRITE to be filled in place, COPY_SRC for batches to copy from.
            upload: buffer(
                "frame upload",
                wgpu::BufferUsages::MAP_WRITE | wgpu::BufferUsages::COPY_SRC,
                true,
            ),
            // MAP_READ to be read in place, COPY_DST for batches to copy into.
            readback: buffer(
                "frame read-back",
                wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
                false,
            ),
        }
    }

    /// Runs the callbacks of the mappings that are done, without blocking (a blocking poll
    /// holds the device while it waits, and other threads' submissions wait behind it), and
    /// reports any error wgpu raised.
    pub fn poll(&self) -> Result<()> {
        self.device
            .poll(wgpu::PollType::Poll)
            .map_err(|e| anyhow!("polling the GPU failed: {e}"))?;
        self.check()
    }
}

/// A mapping's outcome, for the callback that hears it.
pub type Mapped = Result<()>;

impl FrameSlot {
    /// The buffer batches copy the frame from.
    pub fn upload(&self) -> &wgpu::Buffer {
        &self.upload
    }

    /// The buffer batches copy results into.
    pub fn readback(&self) -> &wgpu::Buffer {
        &self.readback
    }

    /// Hands the upload buffer's bytes (mapped: at creation or by [`FrameSlot::remap_upload`]
    /// once its callback said so) to `f` to write, then unmaps them for a batch to copy from.
    /// The bytes `f` leaves alone keep what they held (zeros at first).
    pub fn fill<T>(&self, f: impl FnOnce(&mut [u8]) -> T) -> Result<T> {
        let out = {
            let mut view = self
                .upload
                .get_mapped_range_mut(..)
                .map_err(|e| anyhow!("mapping the frame upload buffer failed: {e}"))?;
            let mut write = view.slice(..);
            let len = write.len();
            let ptr = write.as_raw_element_ptr();
            // SAFETY: the view maps the whole buffer for writing and lives until `f` returns;
            // no other view of it exists (one slot is filled by one thread at a time); the
            // bytes are initialised (wgpu zeroes a buffer at creation, and a mapping again
            // gives back what it held). Upload memory may be write-combined: `f` only writes
            // (a read(2) from a pipe into it), which is what the mapping is for.
            let bytes = unsafe { std::slice::from_raw_parts_mut(ptr.as_ptr(), len) };
            f(bytes)
        };
        self.upload.unmap();
        Ok(out)
    }

    /// Asks for the upload buffer to be mapped again once the work copying from it is done;
    /// `done` hears the outcome when a thread polls the device.
    pub fn remap_upload(&self, done: impl FnOnce(Mapped) + Send + 'static) {
        self.upload.map_async(wgpu::MapMode::Write, .., move |r| {
            done(r.map_err(|e| anyhow!("mapping the frame upload buffer failed: {e}")))
        });
    }

    /// Asks for the read-back buffer to be mapped once the submitted work copying into it is
    /// done; `done` hears the outcome when a thread polls the device.
    pub fn map_readback(&self, done: impl FnOnce(Mapped) + Send + 'static) {
        self.readback.map_async(wgpu::MapMode::Read, .., move |r| {
            done(r.map_err(|e| anyhow!("mapping the frame read-back buffer failed: {e}")))
        });
    }

    /// Hands the read-back bytes (mapped, once [`FrameSlot::map_readback`]'s callback said
    /// so) to `f`, then unmaps them for the next batch to copy into.
    pub fn read<T>(&self, f: impl FnOnce(&[u8]) -> T) -> Result<T> {
        let out = {
            let view = self
                .readback
                .get_mapped_range(..)
                .map_err(|e| anyhow!("mapping the frame read-back buffer failed: {e}"))?;
            f(&view)
        };
        self.readback.unmap();
        Ok(out)
    }
}
