//! `blur` on a frame stream through one GPU with several frames in flight: a ring of slots
//! (an upload buffer and a read-back buffer each, `gpu::FrameSlot`). A reader thread reads
//! each frame from the stream straight into a free slot's mapped upload buffer; a device
//! thread records and submits the frame's copies and passes without waiting, and polls the
//! device, which runs the mappings' callbacks; the caller's thread writes each frame's
//! read-back bytes, in frame order, straight to the output in one vectored write. So frame
//! n+1 is read in while frame n is blurred and frame n-1 written out.

use std::collections::BTreeMap;
use std::io::Write;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};

use super::video::{Ran, Source, Stream};
use crate::gpu::{Engine, FrameSlot, Gpu, Timings, UploadMemory};
use crate::io::image::Image;
use crate::io::video::{Plane, VideoFormat, VideoWriter};
use crate::ops::blur::{Blurrer, Options as BlurOptions};

/// Frames in flight: one being read in, one on the device, one being written out, and one
/// whose upload buffer is being mapped again meanwhile.
pub const SLOTS: usize = 4;

/// How often the device thread polls while it waits for a frame to submit.
const POLL_EVERY: Duration = Duration::from_micros(100);

/// The GPU ring's time per byte of a frame: the copy to the device, the passes and the copy
/// back, which overlap the host's reading and writing. Measured whole: 158.6 frames/s of a 4K
/// 4:2:0 stream (12.4 MB a frame) through the ring on a 16-core H200 host whose pipes let the
/// native engine run 197 frames/s (docs/BENCHMARKS.md, call AJ-video3-1). The GPU's own work
/// on a frame is far less (a copy of 12.4 MB each way and the passes); what bounds the ring
/// there is not yet measured apart (the host's writes into upload memory, which wgpu places
/// in device memory mapped through the BAR, are the suspect: every GPU frame path measured on
/// that host moved 1.8 to 2.0 GB/s).
pub const DEVICE_NS_PER_BYTE: f64 = 0.51;

/// The pipes' time per byte of a frame, read in and written out side by side: the floor of
/// either engine. 243 frames/s of a 4K 4:2:0 stream (12.4 MB a frame), the native engine's
/// rate on the 16-core H200 host of call AF-video2-1, bound by its pipes.
pub const PIPE_NS_PER_BYTE: f64 = 0.33;

/// What the engine choice weighs for a blur stream: the native CPU engine's threads, and
/// the per-byte times of the GPU ring and of the pipes.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct StreamModel {
    /// Threads the native CPU engine shares a frame's work among.
    pub threads: usize,
    pub device_ns_per_byte: f64,
    pub pipe_ns_per_byte: f64,
}

/// A frame's time on each side, as [`StreamModel::frame_costs`] gives them.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct FrameCosts {
    /// The native CPU engine's blur of every plane, its threads together.
    pub engine: Duration,
    /// The GPU ring's device time.
    pub device: Duration,
    /// Reading the frame in and writing it out.
    pub pipes: Duration,
}

impl StreamModel {
    /// This machine's: the CPU engine's threads, the measured per-byte times.
    pub fn here() -> StreamModel {
        StreamModel {
            threads: rayon::current_num_threads(),
            device_ns_per_byte: DEVICE_NS_PER_BYTE,
            pipe_ns_per_byte: PIPE_NS_PER_BYTE,
        }
    }

    /// One frame of `format` blurred with `luma` (the luma-sized planes) and `chroma`: the
    /// engine's time from [`BlurOptions::cpu_work_ns`], the others from the frame's bytes.
    pub fn frame_costs(
        &self,
        format: &VideoFormat,
        luma: BlurOptions,
        chroma: BlurOptions,
    ) -> FrameCosts {
        let bits = 8 * format.sample_bytes() as u32;
        let work: f64 = format
            .planes()
            .iter()
            .map(|p| {
                let o = if p.chroma { chroma } else { luma };
                o.cpu_work_ns(p.width, p.height, p.channels, bits)
            })
            .sum();
        let bytes = format.frame_bytes() as f64;
        let ns = |v: f64| Duration::try_from_secs_f64(v * 1e-9).unwrap_or(Duration::MAX);
        FrameCosts {
            engine: ns(work / self.threads.max(1) as f64),
            device: ns(bytes * self.device_ns_per_byte),
            pipes: ns(bytes * self.pipe_ns_per_byte),
        }
    }

    /// What the GPU ring would save against the native CPU engine on `frames` frames, for
    /// the engine choice (`gpu::SMALL_JOB`): each runs a frame at the pace of the slower of
    /// its own work and the pipes (reading, the work and writing overlap on both), so the
    /// saving is the difference of the two paces, never negative, times the frames.
    pub fn saving(&self, costs: FrameCosts, frames: u64) -> Duration {
        let cores = costs.engine.max(costs.pipes);
        let gpu = costs.device.max(costs.pipes);
        cores
            .saturating_sub(gpu)
            .checked_mul(u32::try_from(frames).unwrap_or(u32::MAX))
            .unwrap_or(Duration::MAX)
    }
}

/// Where each plane of a frame lies in a slot: planes one after another, each starting on a
/// whole word (GPU copies move words), the padding between them left zero.
struct Layout {
    planes: Vec<(Plane, usize, usize)>,
    bytes: u64,
}

impl Layout {
    fn of(format: &VideoFormat) -> Layout {
        let mut at = 0;
        let planes = format
            .planes()
            .into_iter()
            .zip(format.plane_sizes())
            .map(|(p, n)| {
                let here = at;
                at += n.next_multiple_of(4);
                (p, here, n)
            })
            .collect();
        Layout {
            planes,
            bytes: at as u64,
        }
    }

    /// Each plane's bytes of a slot's bytes.
    fn split_mut<'a>(&self, mut bytes: &'a mut [u8]) -> Vec<&'a mut [u8]> {
        let mut at = 0;
        let mut out = Vec::with_capacity(self.planes.len());
        for &(_, start, n) in &self.planes {
            let rest = std::mem::take(&mut bytes);
            let (plane, tail) = rest[start - at..].split_at_mut(n);
            out.push(plane);
            bytes = tail;
            at = start + n;
        }
        out
    }

    fn split<'a>(&self, bytes: &'a [u8]) -> Vec<&'a [u8]> {
        self.planes
            .iter()
            .map(|&(_, start, n)| &bytes[start..start + n])
            .collect()
    }
}

/// How the ring stages a frame on its way in: the upload memory, and whether the reader
/// reads a frame into host memory first and copies it into the mapped upload buffer (rather
/// than reading straight into it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Staging {
    pub memory: UploadMemory,
    pub bounce: bool,
    pub slots: usize,
}

impl Staging {
    /// The ring's staging on `gpu`, or the variant `GPUKIT_RING` names (`bar`, `bar-copy`,
    /// `host`, `host-copy`; a diagnostic, docs/video.md) with `GPUKIT_RING_SLOTS` slots.
    pub fn for_gpu(gpu: &Gpu) -> Staging {
        let (memory, bounce) = match std::env::var("GPUKIT_RING").as_deref() {
            Ok("bar") => (UploadMemory::Bar, false),
            Ok("bar-copy") => (UploadMemory::Bar, true),
            Ok("host") if gpu.host_uploads() => (UploadMemory::Host, false),
            Ok("host-copy") if gpu.host_uploads() => (UploadMemory::Host, true),
            _ => (UploadMemory::Bar, false),
        };
        let slots = std::env::var("GPUKIT_RING_SLOTS")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(SLOTS)
            .clamp(2, 64);
        Staging {
            memory,
            bounce,
            slots,
        }
    }

    fn describe(&self) -> String {
        let memory = match self.memory {
            UploadMemory::Bar => "upload buffers mapped for writing (device memory where offered)",
            UploadMemory::Host => "upload buffers in host memory",
        };
        let how = match self.bounce {
            true => "read into host memory, then copied in",
            false => "read straight in",
        };
        format!("{} slots, {memory}, each frame {how}", self.slots)
    }
}

/// Time each stage of the ring spent, summed over the frames, for `-vv`.
#[derive(Default)]
struct Stages {
    /// The reader waiting for a free slot.
    slot_wait: AtomicU64,
    /// Reading a frame from the stream (into the slot, or into host memory to copy).
    read: AtomicU64,
    /// Copying a frame from host memory into the slot.
    copy: AtomicU64,
    /// Recording and submitting a frame's copies and passes.
    submit: AtomicU64,
    /// From a frame's submission to its read-back mapped (the device's copies and passes,
    /// and the wait behind earlier frames).
    device: AtomicU64,
    /// The writer waiting for the next frame in order.
    write_wait: AtomicU64,
    /// Writing a frame out.
    write: AtomicU64,
}

impl Stages {
    fn add(stage: &AtomicU64, since: Instant) {
        let ns = u64::try_from(since.elapsed().as_nanos()).unwrap_or(u64::MAX);
        stage.fetch_add(ns, Ordering::Relaxed);
    }

    /// `ring: per frame: ...` in milliseconds, each stage's mean over `frames`.
    fn line(&self, frames: u64) -> String {
        let ms = |a: &AtomicU64| a.load(Ordering::Relaxed) as f64 * 1e-6 / frames.max(1) as f64;
        format!(
            "ring, per frame: read {:.2} ms (waiting for a slot {:.2}), copy in {:.2}, submit \
             {:.2}, submission to read-back mapped {:.2}, write {:.2} (waiting for the frame \
             {:.2})",
            ms(&self.read),
            ms(&self.slot_wait),
            ms(&self.copy),
            ms(&self.submit),
            ms(&self.device),
            ms(&self.write),
            ms(&self.write_wait),
        )
    }
}

/// What the device thread tells the writer.
enum Done {
    /// Frame `.0` is in slot `.1`'s read-back buffer, mapped.
    Frame(u64, usize),
    /// The stream ended after this many frames.
    End(u64),
    Failed(anyhow::Error),
}

/// Blurs every frame of `stream` on `engine` (a GPU) through `slots` slots, the luma-sized
/// planes with `luma` and the chroma planes with `chroma`, and writes them to `out` in the
/// input's format, in order. The bytes are those of the CPU engine. As with the worker
/// threads of [`super::video::run_frames`], the first error ends the run and a reader blocked
/// on a silent upstream does not hold the process.
pub fn blur_frames(
    engine: Arc<Engine>,
    stream: Stream,
    (luma, chroma): (BlurOptions, BlurOptions),
    out: &mut dyn Write,
    staging: Staging,
    report: &dyn Fn(&str),
) -> Result<Ran> {
    let Stream { source, name, .. } = stream;
    let Source::Video(mut reader) = source else {
        anyhow::bail!("{name}: a GPU stream blurs video frames");
    };
    let Engine::Gpu(gpu) = &*engine else {
        anyhow::bail!("the GPU frame stream needs a GPU");
    };
    let format = reader.format().clone();
    let layout = Arc::new(Layout::of(&format));
    let ring: Arc<Vec<FrameSlot>> = Arc::new(
        (0..staging.slots.max(2))
            .map(|_| gpu.frame_slot(layout.bytes, staging.memory))
            .collect(),
    );
    let stop = Arc::new(AtomicBool::new(false));
    let stages = Arc::new(Stages::default());
    report(&format!("{name}: GPU ring: {}", staging.describe()));
    // Slots whose upload buffer is mapped and whose read-back buffer is free: at first all.
    let (free_tx, free_rx) = mpsc::channel::<Result<usize>>();
    for slot in 0..ring.len() {
        free_tx.send(Ok(slot)).expect("the receiver is held");
    }
    let (frames_tx, frames_rx) = mpsc::channel::<Result<(u64, usize)>>();
    let (done_tx, done_rx) = mpsc::channel::<Done>();
    let started = Instant::now();
    {
        let (ring, layout, stop) = (ring.clone(), layout.clone(), stop.clone());
        let stages = stages.clone();
        // Where a frame is read first when it is copied into its slot after.
        let mut host = vec![
            0u8;
            if staging.bounce {
                layout.bytes as usize
            } else {
                0
            }
        ];
        std::thread::Builder::new()
            .name("gpukit-read".into())
            .spawn(move || loop {
                let waited = Instant::now();
                let slot = match free_rx.recv() {
                    Ok(Ok(slot)) => slot,
                    Ok(Err(e)) => {
                        let _ = frames_tx.send(Err(e));
                        return;
                    }
                    Err(_) => return,
                };
                Stages::add(&stages.slot_wait, waited);
                if stop.load(Ordering::Relaxed) {
                    return;
                }
                let t = Instant::now();
                let read = match staging.bounce {
                    false => ring[slot]
                        .fill(|bytes| reader.next_into(&mut layout.split_mut(bytes)))
                        .and_then(|r| r),
                    true => reader.next_into(&mut layout.split_mut(&mut host)),
                };
                Stages::add(&stages.read, t);
                let read = match read {
                    Ok(Some(index)) if staging.bounce => {
                        let t = Instant::now();
                        let copied = ring[slot].fill(|bytes| bytes.copy_from_slice(&host));
                        Stages::add(&stages.copy, t);
                        copied.map(|()| Some(index))
                    }
                    other => other,
                };
                match read {
                    Ok(Some(index)) => {
                        if frames_tx.send(Ok((index, slot))).is_err() {
                            return;
                        }
                    }
                    Ok(None) => return,
                    Err(e) => {
                        let _ = frames_tx.send(Err(e));
                        return;
                    }
                }
            })
            .context("cannot start a thread")?;
    }
    let device = {
        let (engine, ring, layout, stop) =
            (engine.clone(), ring.clone(), layout.clone(), stop.clone());
        let stages = stages.clone();
        let format = format.clone();
        std::thread::Builder::new()
            .name("gpukit-device".into())
            .spawn(move || {
                let Engine::Gpu(gpu) = &*engine else {
                    unreachable!("checked above");
                };
                let mut device = Device {
                    gpu,
                    luma: Blurrer::new(&engine, luma),
                    chroma: Blurrer::new(&engine, chroma),
                    likes: layout
                        .planes
                        .iter()
                        .map(|(p, ..)| like(p, &format))
                        .collect(),
                    timings: Timings::default(),
                    stages,
                };
                if let Err(e) = device.run(&frames_rx, &done_tx, &ring, &layout, &stop) {
                    let _ = done_tx.send(Done::Failed(e));
                }
            })
            .context("cannot start a thread")?
    };
    let written = write_frames(
        out, &format, &done_rx, &ring, &layout, &free_tx, &name, &stages,
    );
    // The device thread stops polling before the process may end (a driver torn down at
    // exit under a thread still in it can crash); the reader has ended or touches only its
    // slot and the stream.
    stop.store(true, Ordering::Relaxed);
    let _ = device.join();
    let frames = written?;
    report(&format!("{name}: {}", stages.line(frames)));
    Ok(Ran {
        frames,
        elapsed: started.elapsed(),
    })
}

/// The writer's side: each frame, as the device thread reports it done, written out in
/// frame order from its slot's mapped read-back bytes, and the slot handed back to the
/// reader once its upload buffer is mapped again. Returns the frames written.
fn write_frames(
    out: &mut dyn Write,
    format: &VideoFormat,
    done_rx: &mpsc::Receiver<Done>,
    ring: &[FrameSlot],
    layout: &Layout,
    free_tx: &mpsc::Sender<Result<usize>>,
    name: &str,
    stages: &Stages,
) -> Result<u64> {
    let mut writer = VideoWriter::new(out, format);
    let mut pending = BTreeMap::new();
    let (mut next, mut end) = (0u64, None);
    while end != Some(next) {
        let waited = Instant::now();
        let done = done_rx.recv();
        Stages::add(&stages.write_wait, waited);
        match done {
            Ok(Done::Frame(index, slot)) => {
                pending.insert(index, slot);
            }
            Ok(Done::End(frames)) => end = Some(frames),
            Ok(Done::Failed(e)) => return Err(e.context(name.to_string())),
            Err(_) => anyhow::bail!("{name}: the GPU stream's device thread ended early"),
        }
        while let Some(slot) = pending.remove(&next) {
            let s = &ring[slot];
            let t = Instant::now();
            s.read(|bytes| writer.planes(&layout.split(bytes)))?
                .map_err(|e| anyhow::Error::from(e).context(name.to_string()))?;
            Stages::add(&stages.write, t);
            // The slot goes back to the reader once its upload buffer is mapped again.
            let free = free_tx.clone();
            s.remap_upload(move |r| {
                let _ = free.send(r.map(|()| slot));
            });
            next += 1;
        }
    }
    if next == 0 {
        anyhow::bail!("{name}: the stream holds no frames");
    }
    writer.flush()?;
    Ok(next)
}

/// An image shaped like `plane` of `format`'s frames, for the blurrers to plan with (its
/// samples are never read).
fn like(plane: &Plane, format: &VideoFormat) -> Image {
    let n = plane.width as usize * plane.height as usize * plane.channels as usize;
    match format.wide() {
        false => Image::new_u8(plane.width, plane.height, plane.channels, vec![0; n]),
        true => Image::new_u16(plane.width, plane.height, plane.channels, vec![0; n]),
    }
}

/// The device thread's state: a blurrer (and its plan) for the luma-sized planes and one for
/// the chroma planes, shared by every slot (the device runs submissions in order).
struct Device<'e> {
    gpu: &'e Gpu,
    luma: Blurrer<'e>,
    chroma: Blurrer<'e>,
    likes: Vec<Image>,
    timings: Timings,
    stages: Arc<Stages>,
}

impl Device<'_> {
    /// Submits each frame the reader hands on, asks for its read-back to be mapped (the
    /// callback hands the frame to the writer), and polls the device meanwhile, until the
    /// writer is done.
    fn run(
        &mut self,
        frames: &mpsc::Receiver<Result<(u64, usize)>>,
        done: &mpsc::Sender<Done>,
        ring: &[FrameSlot],
        layout: &Layout,
        stop: &AtomicBool,
    ) -> Result<()> {
        let (mut submitted, mut reading) = (0u64, true);
        while !stop.load(Ordering::Relaxed) {
            if !reading {
                std::thread::sleep(POLL_EVERY);
            } else {
                match frames.recv_timeout(POLL_EVERY) {
                    Ok(frame) => {
                        let (index, slot) = frame?;
                        let t = Instant::now();
                        self.submit(&ring[slot], layout)
                            .with_context(|| format!("frame {index}"))?;
                        Stages::add(&self.stages.submit, t);
                        let (done, stages, submitted_at) =
                            (done.clone(), self.stages.clone(), Instant::now());
                        ring[slot].map_readback(move |r| {
                            Stages::add(&stages.device, submitted_at);
                            let _ = done.send(match r {
                                Ok(()) => Done::Frame(index, slot),
                                Err(e) => Done::Failed(e.context(format!("frame {index}"))),
                            });
                        });
                        submitted += 1;
                    }
                    Err(RecvTimeoutError::Timeout) => {}
                    Err(RecvTimeoutError::Disconnected) => {
                        reading = false;
                        let _ = done.send(Done::End(submitted));
                    }
                }
            }
            self.gpu.poll()?;
        }
        Ok(())
    }

    /// Records the frame in `slot`: each plane copied in, blurred and copied to the slot's
    /// read-back buffer, in one submission that nothing waits for.
    fn submit(&mut self, slot: &FrameSlot, layout: &Layout) -> Result<()> {
        let mut batch = self.gpu.batch(None);
        for ((plane, at, _), like) in layout.planes.iter().zip(&self.likes) {
            let blurrer = match plane.chroma {
                true => &mut self.chroma,
                false => &mut self.luma,
            };
            let at = *at as u64;
            blurrer.record_between(
                like,
                &mut batch,
                (slot.upload(), at),
                (slot.readback(), at),
                &mut self.timings,
            )?;
        }
        batch.submit_queued()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::blur::Kind;

    fn stream_4k() -> VideoFormat {
        VideoFormat::raw(3840, 2160, "yuv420p").unwrap()
    }

    #[test]
    fn frame_costs_by_hand() {
        // 8 294 400 luma and 2 x 2 073 600 chroma samples, 12 441 600 bytes; a box below
        // radius 128 costs 0.9 ns a sample on one core with AVX2, 1.2 without.
        let f = stream_4k();
        let o = BlurOptions::new(Kind::Box, 15, 1);
        let model = StreamModel {
            threads: 16,
            device_ns_per_byte: 0.1,
            pipe_ns_per_byte: 0.2,
        };
        let c = model.frame_costs(&f, o, o);
        let per_sample = if crate::ops::blur::engine::has_avx2() {
            0.9
        } else {
            1.2
        };
        let engine_ms = 12_441_600.0 * per_sample / 16.0 * 1e-6;
        assert!(
            (c.engine.as_secs_f64() * 1e3 - engine_ms).abs() < 1e-6,
            "{c:?}"
        );
        assert!(
            (c.device.as_secs_f64() * 1e3 - 1.24416).abs() < 1e-6,
            "{c:?}"
        );
        assert!(
            (c.pipes.as_secs_f64() * 1e3 - 2.48832).abs() < 1e-6,
            "{c:?}"
        );
    }

    // A long 4K stream on a 16-core host: the GPU ring is chosen where its per-frame cost is
    // below the cores' and the pipes allow the difference to show; the cores where the GPU
    // costs more, or where the pipes bound both.
    #[test]
    fn a_long_4k_stream_opens_the_gpu_only_where_it_is_faster() {
        let f = stream_4k();
        let gauss = BlurOptions::new(Kind::Gaussian { sigma: 10.0 }, 30, 1);
        let model = |device, pipes| StreamModel {
            threads: 16,
            device_ns_per_byte: device,
            pipe_ns_per_byte: pipes,
        };
        let saving = |m: StreamModel| m.saving(m.frame_costs(&f, gauss, gauss), 300);
        // The cores take 12.4 M samples x (0.5 + 0.075 x 61) ns / 16 = 3.9 ms a frame (AVX2).
        let fast_gpu = model(0.1, 0.05);
        let c = fast_gpu.frame_costs(&f, gauss, gauss);
        assert!(c.device < c.engine, "{c:?}");
        assert!(saving(fast_gpu) > crate::gpu::SMALL_JOB, "{c:?}");
        // A GPU ring slower than the cores: no saving at all.
        assert_eq!(saving(model(0.5, 0.05)), Duration::ZERO);
        // Pipes slower than either: both run at the pipes' pace.
        assert_eq!(saving(model(0.1, 0.5)), Duration::ZERO);
        // A box of radius 15 on 16 cores (0.7 ms a frame) against the measured GPU ring:
        // the cores.
        let o = BlurOptions::new(Kind::Box, 15, 1);
        let m = StreamModel {
            threads: 16,
            ..StreamModel::here()
        };
        assert!(m.saving(m.frame_costs(&f, o, o), 300) < crate::gpu::SMALL_JOB);
        // The 2-core development machine (CI, AVX2): the cores' 5.6 ms a frame is under the
        // ring's 6.3, so the stream stays on them before any adapter is asked for; without
        // AVX2 the cores take 7.5 ms and a real GPU would be worth opening.
        let two = StreamModel {
            threads: 2,
            ..StreamModel::here()
        };
        let c = two.frame_costs(&f, o, o);
        let avx2 = crate::ops::blur::engine::has_avx2();
        assert_eq!(c.engine < c.device, avx2, "{c:?}");
        assert_eq!(two.saving(c, 300) == Duration::ZERO, avx2, "{c:?}");
    }
}
