//! Host-visible buffers made once and reused from one piece of work to the next of the same
//! size: an [`Upload`] that the host writes while it is mapped and a batch copies from, and a
//! [`Download`] that a batch copies into and the host reads. Per use the host copies the
//! bytes once each way (read-back memory may be uncached on some drivers: one sequential copy
//! reads it fastest) and no buffer is created.

use std::sync::mpsc;

use anyhow::{anyhow, Context, Result};

use super::Gpu;

type MapResult = Result<(), wgpu::BufferAsyncError>;

/// Where a staging buffer's mapping stands.
enum Mapping {
    Mapped,
    /// Asked for; the callback sends the outcome once the GPU is done with the buffer.
    Pending(mpsc::Receiver<MapResult>),
    Unmapped,
}

/// A buffer `len` bytes long (padded to whole words) for the host to write and batches to
/// copy from ([`Upload::buffer`]).
pub struct Upload {
    buffer: wgpu::Buffer,
    len: usize,
    mapping: Mapping,
    /// Whether writes check their bytes for [`Upload::opaque_rgba8`], and what the last one
    /// found.
    check_opaque: bool,
    opaque_rgba8: bool,
}

/// A buffer `len` bytes long (padded to whole words) for batches to copy into
/// ([`Download::buffer`]) and the host to read.
pub struct Download {
    buffer: wgpu::Buffer,
    len: usize,
}

/// Bytes copied into an upload between two checks of [`every_fourth_byte_max`]: a multiple of
/// 4, small enough to be checked from L1.
const CHECK_CHUNK: usize = 16 << 10;

/// Whether every fourth byte of `bytes` (a whole number of words), from the fourth, is 255:
/// pairs of words ANDed together, which compilers turn into vector ANDs.
fn every_fourth_byte_max(bytes: &[u8]) -> bool {
    let pairs = bytes.chunks_exact(8);
    let rest = pairs.remainder();
    let all = pairs.fold(u64::MAX, |acc, w| {
        acc & u64::from_le_bytes(w.try_into().expect("8 bytes"))
    });
    all & 0xff00_0000_ff00_0000 == 0xff00_0000_ff00_0000
        && rest.chunks_exact(4).all(|px| px[3] == 255)
}

/// The size of a staging buffer holding `len` bytes: whole words, at least one.
fn padded(len: usize) -> u64 {
    (len as u64)
        .max(1)
        .next_multiple_of(wgpu::COPY_BUFFER_ALIGNMENT)
}

/// Asks for `buffer` to be mapped; the receiver gets the outcome.
fn map(buffer: &wgpu::Buffer, mode: wgpu::MapMode) -> mpsc::Receiver<MapResult> {
    let (tx, rx) = mpsc::channel();
    buffer.map_async(mode, .., move |r| {
        let _ = tx.send(r);
    });
    rx
}

impl Gpu {
    /// An [`Upload`] of `len` bytes, mapped and ready to write.
    pub fn upload_buffer(&self, label: &str, len: usize) -> Upload {
        // MAP_WRITE to be written in place, COPY_SRC for batches to copy from.
        let buffer = self.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some(label),
            size: padded(len),
            usage: wgpu::BufferUsages::MAP_WRITE | wgpu::BufferUsages::COPY_SRC,
            mapped_at_creation: true,
        });
        Upload {
            buffer,
            len,
            mapping: Mapping::Mapped,
            check_opaque: false,
            opaque_rgba8: false,
        }
    }

    /// A [`Download`] of `len` bytes.
    pub fn download_buffer(&self, label: &str, len: usize) -> Download {
        // MAP_READ to be read in place, COPY_DST for batches to copy into.
        let buffer = self.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some(label),
            size: padded(len),
            usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        Download { buffer, len }
    }

    /// The outcome of a mapping asked for with `map`: polls once without blocking (the work
    /// using the buffer is usually done), else waits for the queue.
    fn mapped(&self, rx: &mpsc::Receiver<MapResult>, what: &str) -> Result<()> {
        self.device
            .poll(wgpu::PollType::Poll)
            .map_err(|e| anyhow!("polling the GPU failed: {e}"))?;
        let outcome = match rx.try_recv() {
            Ok(r) => r,
            Err(_) => {
                self.wait()?;
                rx.recv()
                    .with_context(|| format!("mapping {what} never ended"))?
            }
        };
        outcome.map_err(|e| anyhow!("mapping {what} failed: {e}"))?;
        self.check()
    }
}

impl Upload {
    /// The buffer batches copy from; whole words, `len` bytes of them written.
    pub fn buffer(&self) -> &wgpu::Buffer {
        &self.buffer
    }

    /// Copies `bytes` (exactly `len` of them) into the buffer, zeroes the padding, and unmaps
    /// it for a batch to copy from. Waits first if the buffer is still being mapped again.
    pub fn write(&mut self, gpu: &Gpu, bytes: &[u8]) -> Result<()> {
        assert_eq!(bytes.len(), self.len, "an upload is written whole");
        match std::mem::replace(&mut self.mapping, Mapping::Unmapped) {
            Mapping::Mapped => {}
            Mapping::Pending(rx) => gpu.mapped(&rx, "the upload buffer")?,
            Mapping::Unmapped => {
                let rx = map(&self.buffer, wgpu::MapMode::Write);
                gpu.mapped(&rx, "the upload buffer")?;
            }
        }
        {
            let mut view = self
                .buffer
                .get_mapped_range_mut(..)
                .map_err(|e| anyhow!("mapping the upload buffer failed: {e}"))?;
            let n = bytes.len();
            let mut opaque = self.check_opaque && n.is_multiple_of(4);
            if opaque {
                // Chunk by chunk, each checked while it is still in the cache: an all-opaque
                // RGBA8 image costs the check little more than the copy, and the check stops
                // at the first chunk with a translucent pixel.
                for (at, chunk) in (0..).step_by(CHECK_CHUNK).zip(bytes.chunks(CHECK_CHUNK)) {
                    view.slice(at..at + chunk.len()).copy_from_slice(chunk);
                    opaque = opaque && every_fourth_byte_max(chunk);
                }
            } else {
                view.slice(..n).copy_from_slice(bytes);
            }
            self.opaque_rgba8 = opaque;
            let pad = view.len() - n;
            view.slice(n..).copy_from_slice(&[0; 4][..pad]);
        }
        self.buffer.unmap();
        Ok(())
    }

    /// The bytes it holds ([`Upload::write`] takes exactly these).
    pub fn bytes(&self) -> usize {
        self.len
    }

    /// Whether later [`Upload::write`]s find if their bytes are 8-bit RGBA pixels whose every
    /// alpha is 255 ([`Upload::opaque_rgba8`]), for a user that can take an all-opaque image
    /// faster (a blur). Off until set: the check costs the copy a fifth more for an all-opaque
    /// image (about 0.5 ms for a 4K one on the 2-core development machine).
    pub fn check_opaque_rgba8(&mut self, on: bool) {
        self.check_opaque = on;
    }

    /// Whether the bytes [`Upload::write`] copied last are 8-bit RGBA pixels whose every
    /// alpha is 255 (every fourth byte, from the fourth), where the upload checks
    /// ([`Upload::check_opaque_rgba8`]): found during the copy, so that a blur can take its
    /// all-opaque passes. False before any write, and wherever the upload does not check.
    pub fn opaque_rgba8(&self) -> bool {
        self.opaque_rgba8
    }

    /// Whether [`Upload::write`] would find the buffer mapped without waiting: mapped, or its
    /// mapping asked for and done (seen without polling: another thread's poll ends it).
    /// `None`: the mapping failed, and the buffer is no use.
    pub fn ready(&mut self) -> Option<bool> {
        match &self.mapping {
            Mapping::Mapped => Some(true),
            Mapping::Unmapped => Some(false),
            Mapping::Pending(rx) => match rx.try_recv() {
                Ok(Ok(())) => {
                    self.mapping = Mapping::Mapped;
                    Some(true)
                }
                Ok(Err(_)) | Err(mpsc::TryRecvError::Disconnected) => None,
                Err(mpsc::TryRecvError::Empty) => Some(false),
            },
        }
    }

    /// Asks for the buffer to be mapped again once the submitted work that copies from it is
    /// done, so that the next [`Upload::write`] finds it mapped.
    pub fn remap(&mut self) {
        if matches!(self.mapping, Mapping::Unmapped) {
            self.mapping = Mapping::Pending(map(&self.buffer, wgpu::MapMode::Write));
        }
    }
}

impl Download {
    /// The buffer batches copy into; whole words.
    pub fn buffer(&self) -> &wgpu::Buffer {
        &self.buffer
    }

    /// Once the submitted work that copies into the buffer is done, hands its `len` bytes to
    /// `f` in the mapped memory, then unmaps it.
    pub fn read<T>(&self, gpu: &Gpu, f: impl FnOnce(&[u8]) -> T) -> Result<T> {
        let rx = map(&self.buffer, wgpu::MapMode::Read);
        gpu.mapped(&rx, "the read-back buffer")?;
        let out = {
            let view = self
                .buffer
                .get_mapped_range(..)
                .map_err(|e| anyhow!("mapping the read-back buffer failed: {e}"))?;
            f(&view[..self.len])
        };
        self.buffer.unmap();
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::every_fourth_byte_max;

    #[test]
    fn every_fourth_byte_is_checked_wherever_it_lies() {
        // Lengths with and without a word past the last pair; each alpha byte lowered in
        // turn, and a non-alpha byte lowered changes nothing.
        for len in [4, 8, 12, 40, 44] {
            let opaque: Vec<u8> = (0..len).map(|i| if i % 4 == 3 { 255 } else { 7 }).collect();
            assert!(every_fourth_byte_max(&opaque), "{len}");
            for i in 0..len {
                let mut b = opaque.clone();
                b[i] = 254;
                assert_eq!(every_fourth_byte_max(&b), i % 4 != 3, "{len} {i}");
            }
        }
        assert!(every_fourth_byte_max(&[]));
    }
}
