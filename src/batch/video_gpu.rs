//! `blur` on a frame stream through one GPU with several frames in flight: a ring of slots
//! (an upload buffer and a read-back buffer each, `gpu::FrameSlot`). A reader thread reads
//! each frame from the stream straight into a free slot's mapped upload buffer; a device
//! thread records and submits the frame's copies and passes without waiting, and polls the
//! device, which runs the mappings' callbacks; the caller's thread writes each frame's
//! read-back bytes, in frame order, straight to the output in one vectored write. So frame
//! n+1 is read in while frame n is blurred and frame n-1 written out. Each stage's time a
//! frame goes to `-vv`. The stream's engine choice (`StreamModel`) is here too.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};

use super::video::{Ran, Source, Stream};
use crate::gpu::{Engine, FrameSlot, Gpu, Timings};
use crate::io::image::Image;
use crate::io::video::{Plane, VideoFormat, VideoWriter};
use crate::ops::blur::{Blurrer, Options as BlurOptions};

/// Frames in flight: one being read in, one on the device, one being written out, and one
/// whose upload buffer is being mapped again meanwhile.
const SLOTS: usize = 4;

/// The ring: [`SLOTS`] frame slots of `bytes` each on `gpu`. Their buffers take a while to
/// create and map, so the bridge makes them while the GPU opens (`blur_frames` otherwise).
pub fn ring_slots(gpu: &Gpu, bytes: u64) -> Vec<FrameSlot> {
    (0..SLOTS).map(|_| gpu.frame_slot(bytes)).collect()
}

/// How often the device thread polls while it waits for a frame to submit.
const POLL_EVERY: Duration = Duration::from_micros(100);

/// The GPU ring's own time per byte of a frame, apart from the pipes: recording and
/// submitting a frame's copies and passes, and the device's work on it (the copy in, the
/// passes, the copy back) until its read-back is mapped. Measured stage by stage on a 4K
/// 4:2:0 stream (12.4 MB a frame) on a 16-core H200 host (docs/BENCHMARKS.md, call
/// AP-video4-1): 0.3-0.5 ms to submit, 0.9-1.3 ms from submission to read-back mapped, so
/// 1.5 ms a frame; the reading into the slots and the writing out of them are the pipes'.
pub const DEVICE_NS_PER_BYTE: f64 = 0.12;

/// The pipes' time per byte of a frame, read in and written out side by side: the floor of
/// either engine. 555 frames/s of a 4K 4:2:0 stream (12.4 MB a frame), the native engine's
/// rate on the 16-core H100 host of call BZ, the pipe written by reference (src/io/pipe.rs).
pub const PIPE_NS_PER_BYTE: f64 = 0.145;

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

    /// What the GPU ring gains over the native CPU engine on `frames` frames, for the
    /// engine choice (`gpu::SMALL_JOB`). Each engine runs a frame at the pace of the slower of
    /// its own work and the pipes (reading, the work and writing overlap on both), so the
    /// ring saves the difference of the two paces on each frame. And where the ring keeps up
    /// with the pipes, it also leaves the cores free for the processes on either side of the
    /// pipes (the decoder that feeds the stream and the encoder that takes it), which need
    /// them: the engine's time on a frame, all its threads together, counts as gained too. So
    /// where both keep up with the pipes, a stream long enough that the cores' work on it
    /// outweighs opening a GPU goes to the GPU.
    pub fn saving(&self, costs: FrameCosts, frames: u64) -> Duration {
        let cores = costs.engine.max(costs.pipes);
        let gpu = costs.device.max(costs.pipes);
        let freed = match self.keeps_up(costs) {
            true => costs.engine,
            false => Duration::ZERO,
        };
        (cores.saturating_sub(gpu) + freed)
            .checked_mul(u32::try_from(frames).unwrap_or(u32::MAX))
            .unwrap_or(Duration::MAX)
    }

    /// Whether the GPU ring runs a frame within the pipes' time.
    pub fn keeps_up(&self, costs: FrameCosts) -> bool {
        costs.device <= costs.pipes
    }

    /// The choice [`StreamModel::saving`] makes, in words, for `-v`.
    pub fn explain(&self, costs: FrameCosts, frames: u64) -> String {
        let ms = |d: Duration| d.as_secs_f64() * 1e3;
        let saving = self.saving(costs, frames);
        let open = ms(crate::gpu::SMALL_JOB);
        let per_frame = format!(
            "a frame takes about {:.2} ms on the cores ({} threads), {:.2} ms on a GPU, {:.2} ms \
             through the pipes",
            ms(costs.engine),
            self.threads,
            ms(costs.device),
            ms(costs.pipes)
        );
        let why = match (self.keeps_up(costs), saving >= crate::gpu::SMALL_JOB) {
            (true, true) => format!(
                "a GPU keeps up with the pipes, so a GPU takes the stream (the cores' {:.0} ms \
                 over {frames} frames, more than the {open:.0} ms opening one costs, go to the \
                 processes either side of the pipes) unless the only adapter is a software one",
                ms(saving)
            ),
            (true, false) => format!(
                "a GPU keeps up with the pipes, but the cores' work on {frames} frames ({:.0} \
                 ms) is less than the {open:.0} ms opening a GPU costs: the cores",
                ms(saving)
            ),
            (false, true) => format!(
                "a GPU saves about {:.0} ms over {frames} frames, more than the {open:.0} ms \
                 opening one costs, so a GPU takes the stream unless the only adapter is a \
                 software one",
                ms(saving)
            ),
            (false, false) => format!(
                "a GPU keeps up with neither the pipes nor the cores on {frames} frames: the \
                 cores"
            ),
        };
        format!("{per_frame}; {why}")
    }
}

/// Where each plane of a frame lies in a slot: planes one after another, each starting on a
/// whole word (GPU copies move words), the padding between them left zero.
pub(super) struct Layout {
    planes: Vec<(Plane, usize, usize)>,
    /// A slot's bytes.
    pub bytes: u64,
}

impl Layout {
    pub(super) fn of(format: &VideoFormat) -> Layout {
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

/// Time each stage of the ring spent, summed over the frames, for `-vv`.
#[derive(Default)]
struct Stages {
    /// The reader waiting for a free slot.
    slot_wait: AtomicU64,
    /// Reading a frame from the stream into its slot.
    read: AtomicU64,
    /// Recording and submitting a frame's copies and passes.
    submit: AtomicU64,
    /// From a frame's submission to its read-back mapped (the device's copies and passes,
    /// and the wait behind earlier frames).
    device: AtomicU64,
    /// The writer waiting for the next frame in order.
    write_wait: AtomicU64,
    /// Writing a frame out.
    write: AtomicU64,
    /// From the ring's start to its first frame written (the ring filling: its first read,
    /// the kernels' plans made, the first frame's passes).
    first_out: AtomicU64,
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
            "ring, per frame: read {:.2} ms (waiting for a slot {:.2}), submit {:.2}, \
             submission to read-back mapped {:.2}, write {:.2} (waiting for the frame {:.2}); \
             its first frame out {:.1} ms after it started",
            ms(&self.read),
            ms(&self.slot_wait),
            ms(&self.submit),
            ms(&self.device),
            ms(&self.write),
            ms(&self.write_wait),
            self.first_out.load(Ordering::Relaxed) as f64 * 1e-6,
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

/// Blurs every frame of `stream` on `engine` (a GPU) through the ring `slots` (made here
/// when `None`), the luma-sized planes with `luma` and the chroma planes with `chroma`, and
/// writes them to `out` in the input's format, in order. The bytes are those of the CPU
/// engine. As with the worker
/// threads of [`super::video::run_frames`], the first error ends the run and a reader blocked
/// on a silent upstream does not hold the process.
pub fn blur_frames(
    engine: Arc<Engine>,
    stream: Stream,
    (luma, chroma): (BlurOptions, BlurOptions),
    writer: &mut VideoWriter<'_>,
    slots: Option<Vec<FrameSlot>>,
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
    // Where the stream goes on from (its first frames may have been blurred elsewhere).
    let first = reader.next_index();
    let layout = Arc::new(Layout::of(&format));
    let ring = Arc::new(slots.unwrap_or_else(|| ring_slots(gpu, layout.bytes)));
    let stop = Arc::new(AtomicBool::new(false));
    let stages = Arc::new(Stages::default());
    report(&format!("{name}: GPU ring of {} slots", ring.len()));
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
                let read = ring[slot]
                    .fill(|bytes| reader.next_into(&mut layout.split_mut(bytes)))
                    .and_then(|r| r);
                Stages::add(&stages.read, t);
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
                let run = device.run(&frames_rx, (&done_tx, first), &ring, &layout, &stop);
                if let Err(e) = run {
                    let _ = done_tx.send(Done::Failed(e));
                }
            })
            .context("cannot start a thread")?
    };
    let written = write_frames(
        writer,
        (first, started),
        &done_rx,
        (&ring, &free_tx),
        &layout,
        &name,
        &stages,
    );
    // The device thread stops polling before the process may end (a driver torn down at
    // exit under a thread still in it can crash); the reader has ended or touches only its
    // slot and the stream.
    stop.store(true, Ordering::Relaxed);
    let _ = device.join();
    let frames = written?;
    report(&format!("{name}: {}", stages.line(frames - first)));
    Ok(Ran {
        frames,
        elapsed: started.elapsed(),
    })
}

/// The writer's side: each frame, as the device thread reports it done, written out in
/// frame order from its slot's mapped read-back bytes, and the slot handed back to the
/// reader once its upload buffer is mapped again. Returns the frames written.
fn write_frames(
    writer: &mut VideoWriter<'_>,
    (first, started): (u64, Instant),
    done_rx: &mpsc::Receiver<Done>,
    (ring, free_tx): (&[FrameSlot], &mpsc::Sender<Result<usize>>),
    layout: &Layout,
    name: &str,
    stages: &Stages,
) -> Result<u64> {
    let mut pending = BTreeMap::new();
    let (mut next, mut end) = (first, None);
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
            if next == first {
                Stages::add(&stages.first_out, started);
            }
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
        (done, first): (&mpsc::Sender<Done>, u64),
        ring: &[FrameSlot],
        layout: &Layout,
        stop: &AtomicBool,
    ) -> Result<()> {
        // Frames are counted from the stream's first: the writer's end is the last index + 1.
        let (mut submitted, mut reading) = (first, true);
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

    // Fake timing models on a 4K 4:2:0 stream (12 441 600 bytes a frame) and a box of radius
    // 15 (0.9 ns a sample with AVX2, 1.2 without: 11.2 or 14.9 ms of one core's work).
    fn box_costs(model: StreamModel) -> FrameCosts {
        let o = BlurOptions::new(Kind::Box, 15, 1);
        model.frame_costs(&stream_4k(), o, o)
    }

    fn model(threads: usize, device: f64, pipes: f64) -> StreamModel {
        StreamModel {
            threads,
            device_ns_per_byte: device,
            pipe_ns_per_byte: pipes,
        }
    }

    // 16 cores (0.70 ms a frame, 0.93 without AVX2) and a GPU ring (1.24 ms) both within the
    // pipes' 4.98 ms: a long stream goes to the GPU, which leaves the cores' work to the
    // processes either side of the pipes; a short one stays on the cores, since their work
    // on it is less than opening a GPU costs.
    #[test]
    fn where_both_keep_up_a_long_stream_goes_to_the_gpu_a_short_one_stays() {
        let m = model(16, 0.1, 0.4);
        let c = box_costs(m);
        assert!(c.engine < c.pipes && c.device < c.pipes, "{c:?}");
        assert!(m.keeps_up(c));
        // The whole saving is the cores' work: the pace is the pipes' on both.
        assert_eq!(m.saving(c, 300), c.engine * 300);
        assert!(m.saving(c, 300) > crate::gpu::SMALL_JOB, "{c:?}");
        assert!(m.saving(c, 30) < crate::gpu::SMALL_JOB, "{c:?}");
        assert!(m
            .explain(c, 300)
            .contains("a GPU keeps up with the pipes, so a GPU takes"));
        assert!(m.explain(c, 30).contains("opening a GPU costs: the cores"));
    }

    // A GPU ring slower than the pipes frees no cores: it gains only where the cores are
    // slower still, by the difference of the paces.
    #[test]
    fn a_ring_slower_than_the_pipes_gains_only_the_difference_of_the_paces() {
        // The ring 6.22 ms, the pipes 2.49, the cores 0.70: nothing to gain.
        let m = model(16, 0.5, 0.2);
        let c = box_costs(m);
        assert!(!m.keeps_up(c));
        assert_eq!(m.saving(c, 300), Duration::ZERO);
        assert!(m
            .explain(c, 300)
            .contains("neither the pipes nor the cores"));
        // One core (11.2 or 14.9 ms a frame) against the same ring: the difference.
        let m = model(1, 0.5, 0.2);
        let c = box_costs(m);
        assert_eq!(m.saving(c, 300), (c.engine - c.device) * 300);
    }

    // The 2-core development machine with this build's figures: the cores (5.6 ms a frame
    // with AVX2) fall behind the pipes (4.1 ms) and the ring keeps up, so the estimate asks
    // for an adapter; the choice then runs the stream on the cores all the same where the
    // only adapter is a software one (lavapipe: gpu::choice, tests/video.rs).
    #[test]
    fn two_cores_fall_behind_the_pipes_so_the_estimate_asks_for_a_gpu() {
        let two = StreamModel {
            threads: 2,
            ..StreamModel::here()
        };
        let c = box_costs(two);
        assert!(c.engine > c.pipes, "{c:?}");
        assert!(two.keeps_up(c), "{c:?}");
        assert!(two.saving(c, 300) > crate::gpu::SMALL_JOB);
        // This build's 16-core figures: a box blur of a long 4K stream goes to the GPU.
        let sixteen = StreamModel {
            threads: 16,
            ..StreamModel::here()
        };
        let c = box_costs(sixteen);
        assert!(c.engine < c.pipes && sixteen.keeps_up(c), "{c:?}");
        assert!(sixteen.saving(c, 300) > crate::gpu::SMALL_JOB);
    }
}
