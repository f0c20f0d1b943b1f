//! Frame streams through an op: one thread reads frames, worker threads (several frames in
//! flight on one engine) run the op on them, and the caller's thread writes the results in
//! frame order as each is done. Frames in flight are bounded by tokens (memory is bounded
//! whatever the stream's length). `histogram --per-frame` and `blur` on a stream run here.

use std::collections::BTreeMap;
use std::io::{BufRead, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, Sender, SyncSender};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use serde::Serialize;

use super::driver::Env;
use crate::gpu::{Engine, Timings};
use crate::io::image::stream::FrameStream;
use crate::io::image::Image;
use crate::io::image::Samples;
use crate::io::output::PendingFile;
use crate::io::video::{
    give_back, spare_buffer, PixFmt, Spare, VideoFormat, VideoReader, VideoWriter, YuvToRgb,
};
use crate::ops::blur::{Blurrer, Options as BlurOptions};
use crate::ops::histogram::doc::{channel_docs, ChannelDoc};
use crate::ops::histogram::frames::{self, Planes};
use crate::ops::histogram::{check_bins, plot_cpu, Channels, Histogram, Histogrammer};

/// Frames assumed in a stream whose length cannot be known (a pipe, a FIFO), for the engine
/// choice: ten seconds at 30 frames a second.
pub const ASSUMED_STREAM_FRAMES: u64 = 300;

/// Where a stream's frames come from.
pub enum Source {
    /// Y4M or raw video frames.
    Video(VideoReader<Box<dyn BufRead + Send>>),
    /// Encoded images one after another (`ffmpeg -f image2pipe`), each decoded by a worker.
    Images(FrameStream<Box<dyn BufRead + Send>>),
}

/// A frame stream opened for reading: its frames, what messages call it, and how many frames
/// it holds when that is known (a regular file's size over a frame's).
pub struct Stream {
    pub source: Source,
    pub name: String,
    pub frames: Option<u64>,
}

impl Stream {
    /// The frames the engine choice counts on.
    pub fn expected_frames(&self) -> u64 {
        self.frames.unwrap_or(ASSUMED_STREAM_FRAMES).max(1)
    }

    /// Converts the stream's Y'CbCr frames with `matrix`, whatever its header says (images
    /// one after another have none).
    pub fn set_matrix(&mut self, matrix: crate::io::video::Matrix) {
        if let Source::Video(r) = &mut self.source {
            r.set_matrix(matrix);
        }
    }

    /// The video frames' format; `None` for a stream of images.
    pub fn video_format(&self) -> Option<&VideoFormat> {
        match &self.source {
            Source::Video(r) => Some(r.format()),
            Source::Images(_) => None,
        }
    }
}

/// A frame as the reader hands it on: its index from 0 and its planes' bytes (an image
/// stream's image as one).
type RawFrame = (u64, Vec<Vec<u8>>);

/// A worker's side of the stream: the next frame to work on, and where its result goes.
pub struct Jobs<O> {
    frames: Arc<Mutex<Receiver<RawFrame>>>,
    results: Sender<(u64, Result<O>)>,
}

impl<O> Jobs<O> {
    /// The next frame (its index from 0 and bytes), `None` when the stream has ended or the
    /// run stopped.
    pub fn next(&self) -> Option<RawFrame> {
        self.frames.lock().ok()?.recv().ok()
    }

    /// Hands frame `index`'s result on; false when the run has stopped.
    pub fn done(&self, index: u64, result: Result<O>) -> bool {
        self.results.send((index, result)).is_ok()
    }
}

/// What a stream run did: frames, and the wall time from the first frame read.
pub struct Ran {
    pub frames: u64,
    pub elapsed: Duration,
}

impl Ran {
    /// The run in one line, for `-v`: `300 frames in 2.00 s (150.0 frames/s)`.
    pub fn summary(&self) -> String {
        let secs = self.elapsed.as_secs_f64();
        format!(
            "{} frames in {secs:.2} s ({:.1} frames/s)",
            self.frames,
            self.frames as f64 / secs.max(1e-9)
        )
    }
}

/// Runs the stream's frames through `workers` worker threads that `spawn` starts (each takes
/// frames from its [`Jobs`] until `None`), with at most `in_flight` frames read and not yet
/// written; `write` gets each result in frame order. The first error (reading, a frame's
/// work, writing) ends the run: the reader and the workers are left to stop on their own
/// (a reader blocked on a silent upstream does not hold the process).
pub fn run_frames<O: Send + 'static>(
    stream: Stream,
    workers: usize,
    in_flight: usize,
    spawn: impl Fn(Jobs<O>),
    mut write: impl FnMut(u64, O) -> Result<()>,
) -> Result<Ran> {
    let Stream {
        mut source, name, ..
    } = stream;
    // A stream whose first frames were done elsewhere (`blur`'s bridge) goes on from there.
    let first = match &source {
        Source::Video(r) => r.next_index(),
        Source::Images(_) => 0,
    };
    let mut index = 0u64;
    let mut next_frame = move || match &mut source {
        Source::Video(r) => r.next_planes(),
        Source::Images(s) => {
            let frame = s
                .next_frame()
                .with_context(|| format!("image {}", index + 1))?;
            index += 1;
            Ok(frame.map(|bytes| (index - 1, vec![bytes])))
        }
    };
    let started = Instant::now();
    let in_flight = in_flight.max(workers).max(1);
    let (token_tx, token_rx) = mpsc::sync_channel::<()>(in_flight);
    for _ in 0..in_flight {
        token_tx.send(()).expect("room for every token");
    }
    let (frame_tx, frame_rx): (SyncSender<RawFrame>, _) = mpsc::sync_channel(in_flight);
    let (result_tx, result_rx) = mpsc::channel::<(u64, Result<O>)>();
    let read_error: Arc<Mutex<Option<anyhow::Error>>> = Arc::default();
    let stop = Arc::new(AtomicBool::new(false));
    {
        let (read_error, stop) = (read_error.clone(), stop.clone());
        std::thread::Builder::new()
            .name("gpukit-read".into())
            .spawn(move || loop {
                if token_rx.recv().is_err() || stop.load(Ordering::Relaxed) {
                    return;
                }
                match next_frame() {
                    Ok(Some(frame)) => {
                        if frame_tx.send(frame).is_err() {
                            return;
                        }
                    }
                    Ok(None) => return,
                    Err(e) => {
                        *read_error.lock().expect("read error lock") = Some(e);
                        return;
                    }
                }
            })
            .context("cannot start a thread")?;
    }
    let frames = Arc::new(Mutex::new(frame_rx));
    for _ in 0..workers {
        spawn(Jobs {
            frames: frames.clone(),
            results: result_tx.clone(),
        });
    }
    drop(result_tx);
    let mut pending = BTreeMap::new();
    let mut next = first;
    let fail = |e: anyhow::Error| {
        stop.store(true, Ordering::Relaxed);
        Err(e)
    };
    for (index, result) in result_rx {
        pending.insert(index, result);
        while let Some(result) = pending.remove(&next) {
            match result.and_then(|o| write(next, o)) {
                Ok(()) => {}
                Err(e) => return fail(e.context(name.clone())),
            }
            next += 1;
            // The token comes back: one more frame may be read.
            let _ = token_tx.send(());
        }
    }
    if let Some(e) = read_error.lock().expect("read error lock").take() {
        return fail(e.context(name));
    }
    if next == 0 {
        return fail(anyhow::anyhow!("{name}: the stream holds no frames"));
    }
    Ok(Ran {
        frames: next,
        elapsed: started.elapsed(),
    })
}

/// How many worker threads a stream keeps busy on an engine (a blur stream on a GPU runs
/// through the ring of src/batch/video_gpu.rs instead): on a GPU three, each waiting for its
/// own submission; the native CPU engine works on each frame with every core and keeps a
/// second frame ready.
pub fn workers_for(engine: &Engine) -> usize {
    match engine {
        Engine::Gpu(_) => 3,
        Engine::Cpu => 2,
    }
}

/// One line of `histogram --per-frame` (docs/schemas/histogram-frame.schema.json).
#[derive(Serialize)]
pub struct FrameDoc {
    pub schema: &'static str,
    /// The frame's index, from 0.
    pub frame: u64,
    /// Its time in seconds from the stream's frame rate; null when the stream has none.
    pub time: Option<f64>,
    pub width: u32,
    pub height: u32,
    pub pixels: u64,
    pub bins: u32,
    pub channels: Vec<ChannelDoc>,
}

/// The schema every line of `histogram --per-frame` names.
pub const FRAME_SCHEMA: &str = "gpukit.histogram-frame/1";

/// How `histogram --per-frame` writes its plots.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PlotFormat {
    /// A Y4M stream, 4:4:4 full range (BT.601).
    Y4m,
    /// PNG images one after another (`ffmpeg -f image2pipe`).
    Png,
}

/// What `histogram --per-frame` writes.
pub struct PerFrame<'w> {
    pub bins: u32,
    pub alpha: bool,
    /// Where the JSON lines go.
    pub json: Option<&'w mut dyn Write>,
    /// Where the plots go, their size and format.
    pub plot: Option<(&'w mut dyn Write, (u32, u32), PlotFormat)>,
}

/// A frame counted: its JSON line and its plot.
struct Counted {
    line: Option<Vec<u8>>,
    plot: Option<Vec<u8>>,
}

/// `histogram --per-frame`: every frame's histogram, its JSON line and its plot written as
/// each frame is done, in frame order.
pub fn histogram_frames(env: &dyn Env, stream: Stream, out: PerFrame<'_>) -> Result<Ran> {
    let format = stream.video_format().cloned();
    let alpha = out.alpha;
    match &format {
        Some(format) => {
            match narrow_maxval(format) {
                Some(maxval) => check_narrow_bins(out.bins, format.bit_depth, maxval)?,
                None => check_bins(out.bins, format.bit_depth)?,
            }
            let frames = stream.expected_frames();
            env.estimate(crate::ops::histogram::stream_gpu_saving(
                u64::from(format.width) * u64::from(format.height),
                format.frame_bytes(),
                frames,
            ));
            env.detail(&format!("{}: {}", stream.name, format.describe()));
        }
        // Decoding takes most of an image stream's time, on the workers whichever engine
        // counts: no GPU is opened for it unless named.
        None => env.estimate(Duration::ZERO),
    }
    let engine = open_engine(env)?;
    let rate = format.as_ref().and_then(|f| f.rate);
    let (bins, want_line) = (out.bins, out.json.is_some());
    let plot_spec = out.plot.as_ref().map(|(_, size, f)| (*size, *f));
    let PerFrame { json, plot, .. } = out;
    let mut json = json;
    let (mut plot_out, plot_header) = match plot {
        Some((w, (pw, ph), PlotFormat::Y4m)) => {
            (Some(w), Some(VideoWriter::y4m_header(pw, ph, rate, false)))
        }
        Some((w, _, PlotFormat::Png)) => (Some(w), None),
        None => (None, None),
    };
    let mut plot_writer = plot_out
        .as_mut()
        .map(|w| VideoWriter::with_header(&mut **w, plot_header.clone()));
    let shared = Arc::new(format);
    let read = env.read_options();
    let spawn = |jobs: Jobs<Counted>| {
        let (engine, format) = (engine.clone(), shared.clone());
        std::thread::spawn(move || {
            let format: Option<&VideoFormat> = Option::as_ref(&format);
            let narrow = format.and_then(narrow_maxval);
            // 9- to 15-bit frames are counted value by value (65536 bins on their 16-bit
            // samples), then folded into `bins` on their own maximum.
            let mut hist = Histogrammer::new(&engine, narrow.map_or(bins, |_| 1 << 16));
            let conv = format.map(|f| YuvToRgb::new(f.range, f.matrix, f.bit_depth));
            let mut timings = Timings::default();
            while let Some((index, bytes)) = jobs.next() {
                let result: Result<Counted> = (|| {
                    let Some(format) = format else {
                        // An image of an image stream: decoded here, counted with its own
                        // channels and depth.
                        let decoded = crate::io::image::decode_with(&bytes.concat(), &read)?;
                        if let Some(damage) = &decoded.damage {
                            anyhow::bail!("{damage}");
                        }
                        let img = decoded.image;
                        check_bins(bins, img.bit_depth())?;
                        let h =
                            hist.histogram(&img, Channels::of(img.channels, alpha), &mut timings)?;
                        return counted(
                            index,
                            None,
                            (img.width, img.height),
                            &h,
                            want_line,
                            plot_spec,
                        );
                    };
                    let h = match (&*engine, format.pix, format.bit_depth, &conv) {
                        // The CPU engine converts and counts a row at a time.
                        (Engine::Cpu, PixFmt::Yuv { x, y }, 8, Some(conv)) => {
                            let planes = Planes {
                                y: &bytes[0],
                                u: &bytes[1],
                                v: &bytes[2],
                                width: format.width as usize,
                                height: format.height as usize,
                                sx: x,
                                sy: y,
                            };
                            frames::yuv8(conv, &planes, bins)
                        }
                        _ => {
                            let img = format.image_of(format.images(bytes));
                            let h =
                                hist.histogram(&img, channels_of(format, alpha), &mut timings)?;
                            match narrow {
                                Some(maxval) => fold_values(&h, bins, maxval),
                                None => h,
                            }
                        }
                    };
                    let size = (format.width, format.height);
                    counted(index, format.time_of(index), size, &h, want_line, plot_spec)
                })();
                let what = match format.is_some() {
                    true => format!("frame {index}"),
                    false => format!("image {}", index + 1),
                };
                if !jobs.done(index, result.with_context(|| what)) {
                    return;
                }
            }
        });
    };
    let workers = workers_for(&engine);
    let ran = run_frames(stream, workers, 2 * workers, spawn, |_, c: Counted| {
        if let (Some(w), Some(line)) = (json.as_mut(), c.line) {
            w.write_all(&line)?;
            w.flush()?;
        }
        if let (Some(w), Some(plot)) = (plot_writer.as_mut(), c.plot) {
            w.frame(&plot)?;
            w.flush()?;
        }
        Ok(())
    })?;
    Ok(ran)
}

/// The top value of a stream of 9- to 15-bit samples (each held in two bytes), which its
/// histogram's bins divide as 255 and 65535 do for 8- and 16-bit ones; `None` for those.
fn narrow_maxval(format: &VideoFormat) -> Option<u32> {
    (9..=15)
        .contains(&format.bit_depth)
        .then(|| (1 << format.bit_depth) - 1)
}

/// `bins` must be 1 to one a value of a `bits`-bit stream's (as for 8- and 16-bit images).
fn check_narrow_bins(bins: u32, bits: u32, maxval: u32) -> Result<()> {
    if bins == 0 || bins > maxval + 1 {
        anyhow::bail!(crate::UsageError(format!(
            "--bins {bins}: {bits}-bit frames take 1 to {} bins",
            maxval + 1
        )));
    }
    Ok(())
}

/// The counts of `values` (one bin a 16-bit value, as 65536 bins on 16-bit samples give:
/// bin = v for every v below 65535) folded into `bins` bins on `maxval`:
/// bin = min(floor(v * bins / maxval), bins - 1), as every histogram bins (a sample above
/// `maxval`, which a malformed stream may hold, lands in the last bin).
fn fold_values(values: &Histogram, bins: u32, maxval: u32) -> Histogram {
    debug_assert_eq!(values.bins, 1 << 16);
    let n = values.channels.count() as usize;
    let mut out = Histogram::zeros(values.channels, bins);
    out.pixels = values.pixels;
    for (v, counts) in values.counts.chunks_exact(n).enumerate() {
        let b = crate::ops::histogram::bin_of(v as u32, bins, maxval) as usize;
        for (o, c) in out.counts[b * n..(b + 1) * n].iter_mut().zip(counts) {
            *o += c;
        }
    }
    out
}

/// The histogram's channels for `format`'s frames (Y'CbCr counts as RGB).
fn channels_of(format: &VideoFormat, alpha: bool) -> Channels {
    let samples = match format.pix {
        PixFmt::Gray => 1,
        PixFmt::Rgba => 4,
        _ => 3,
    };
    Channels::of(samples, alpha)
}

/// A frame's JSON line (when wanted) and plot (when asked for).
fn counted(
    index: u64,
    time: Option<f64>,
    (width, height): (u32, u32),
    h: &Histogram,
    want_line: bool,
    plot: Option<((u32, u32), PlotFormat)>,
) -> Result<Counted> {
    let line = match want_line {
        true => {
            let doc = FrameDoc {
                schema: FRAME_SCHEMA,
                frame: index,
                time,
                width,
                height,
                pixels: h.pixels,
                bins: h.bins,
                channels: channel_docs(h),
            };
            let mut line = serde_json::to_vec(&doc)?;
            line.push(b'\n');
            Some(line)
        }
        false => None,
    };
    let plot = match plot {
        Some(((w, h2), f)) => Some(plot_bytes(&plot_cpu(h, w, h2), f)?),
        None => None,
    };
    Ok(Counted { line, plot })
}

/// A plot as one frame of the plot stream: Y'CbCr 4:4:4 planes for Y4M, a PNG file for PNG.
fn plot_bytes(img: &Image, format: PlotFormat) -> Result<Vec<u8>> {
    match format {
        PlotFormat::Png => {
            let mut out = Vec::new();
            crate::io::image::encode(img.clone(), ::image::ImageFormat::Png, &mut out)?;
            Ok(out)
        }
        PlotFormat::Y4m => Ok(rgb_to_yuv444(img)),
    }
}

/// An 8-bit RGB or RGBA image as full-range BT.601 Y'CbCr 4:4:4 planes (JPEG's integer
/// factors; alpha dropped):
/// Y = (19595 R + 38470 G + 7471 B + 2^15) >> 16,
/// Cb = 128 + ((-11059 R - 21709 G + 32768 B + 2^15) >> 16),
/// Cr = 128 + ((32768 R - 27439 G - 5329 B + 2^15) >> 16), each clamped to 0..=255.
pub fn rgb_to_yuv444(img: &Image) -> Vec<u8> {
    let crate::io::image::Samples::U8(s) = &img.samples else {
        unreachable!("the plot is 8-bit");
    };
    let (n, c) = (img.pixels(), img.channels as usize);
    let mut out = vec![0u8; 3 * n];
    let (y, rest) = out.split_at_mut(n);
    let (cb, cr) = rest.split_at_mut(n);
    let f = |v: i32| (v + (1 << 15)) >> 16;
    for (i, p) in s.chunks_exact(c).enumerate() {
        let (r, g, b) = (i32::from(p[0]), i32::from(p[1]), i32::from(p[2]));
        y[i] = f(19595 * r + 38470 * g + 7471 * b).clamp(0, 255) as u8;
        cb[i] = (128 + f(-11059 * r - 21709 * g + 32768 * b)).clamp(0, 255) as u8;
        cr[i] = (128 + f(32768 * r - 27439 * g - 5329 * b)).clamp(0, 255) as u8;
    }
    out
}

/// The radius a chroma plane is blurred with: `radius` scaled to the plane's subsampling
/// across (half, rounded up, for 4:2:0 and 4:2:2), unless `chroma` gives it.
pub fn chroma_options(
    options: BlurOptions,
    format: &VideoFormat,
    chroma: Option<u32>,
) -> BlurOptions {
    let PixFmt::Yuv { x, .. } = format.pix else {
        return options;
    };
    let radius = chroma.unwrap_or((options.radius + (1 << x) - 1) >> x);
    let kind = match options.kind {
        crate::ops::blur::Kind::Gaussian { sigma } if chroma.is_none() => {
            crate::ops::blur::Kind::Gaussian {
                sigma: sigma / f64::from(1u32 << x),
            }
        }
        crate::ops::blur::Kind::Gaussian { sigma } => crate::ops::blur::Kind::Gaussian {
            sigma: sigma * f64::from(radius) / f64::from(options.radius.max(1)),
        },
        k => k,
    };
    BlurOptions {
        kind,
        radius,
        ..options
    }
}

/// `blur` on a stream: every frame's planes blurred (chroma with `chroma`'s options) and
/// written to `out` in the input's format, in order. The engine as `StreamModel` chooses
/// (said in words with `verbose`), unless one is named. With `bridge` (nothing named), a
/// stream the estimate gives to a GPU starts on the cores while the GPU opens
/// ([`bridge_opening`]).
pub fn blur_frames(
    env: &dyn Env,
    stream: Stream,
    luma: BlurOptions,
    chroma: BlurOptions,
    out: &mut dyn Write,
    (verbose, bridge): (bool, bool),
) -> Result<Ran> {
    let format = stream
        .video_format()
        .cloned()
        .expect("blur streams are video frames");
    let frames = stream.expected_frames();
    let model = super::video_gpu::StreamModel::here();
    let costs = model.frame_costs(&format, luma, chroma);
    if verbose {
        env.note(&format!(
            "{}: {}",
            stream.name,
            model.explain(costs, frames)
        ));
    }
    let saving = model.saving(costs, frames);
    env.estimate(saving);
    let bridge = bridge && saving >= crate::gpu::SMALL_JOB;
    blur_stream(env, stream, format, (luma, chroma), out, (verbose, bridge))
}

/// `blur` on a stream of frames of `format` on the engine `env` opens: with `bridge`, the
/// native CPU engine blurs the first frames while it opens ([`bridge_opening`]); notes of
/// that with `verbose`.
fn blur_stream(
    env: &dyn Env,
    mut stream: Stream,
    format: VideoFormat,
    (luma, chroma): (BlurOptions, BlurOptions),
    out: &mut dyn Write,
    (verbose, bridge): (bool, bool),
) -> Result<Ran> {
    let started = Instant::now();
    let mut writer = VideoWriter::new(out, &format);
    // The planes written go back to the reader for the frames to come.
    let spare = Spare::default();
    let (engine, slots) = match bridge {
        true => {
            let (opened, bridged, rest, took) =
                bridge_opening(env, stream, (luma, chroma), &mut writer, &spare)?;
            stream = rest;
            if verbose && bridged > 0 {
                env.note(&format!(
                    "{}: the cores blurred the first {bridged} frames while the engine opened \
                     ({:.0} ms)",
                    stream.name,
                    took.as_secs_f64() * 1e3
                ));
            }
            opened
        }
        false => (open_engine(env)?, None),
    };
    env.detail(&format!("{}: {}", stream.name, format.describe()));
    if let Engine::Gpu(_) = &*engine {
        // The bridge's plane buffers: the ring reads into buffers of its own.
        if let Ok(mut held) = spare.lock() {
            held.clear();
        }
        let report = |line: &str| env.detail(line);
        let ran = super::video_gpu::blur_frames(
            engine.clone(),
            stream,
            (luma, chroma),
            &mut writer,
            slots,
            &report,
        )?;
        return Ok(Ran {
            frames: ran.frames,
            elapsed: started.elapsed(),
        });
    }
    if let Source::Video(r) = &mut stream.source {
        r.reuse(spare.clone());
    }
    let shared = Arc::new(format.clone());
    let workers = workers_for(&engine);
    let in_flight = 2 * workers;
    let spawn = |jobs: Jobs<Vec<Vec<u8>>>| {
        let (engine, format, spare) = (engine.clone(), shared.clone(), spare.clone());
        std::thread::spawn(move || {
            // One blurrer for the luma-sized planes and one for the chroma ones, so that each
            // keeps its GPU plan from frame to frame.
            let mut blurrers = (Blurrer::new(&engine, luma), Blurrer::new(&engine, chroma));
            let mut timings = Timings::default();
            while let Some((index, bytes)) = jobs.next() {
                let result = blur_planes(&format, &mut blurrers, bytes, &spare, &mut timings);
                if !jobs.done(index, result.with_context(|| format!("frame {index}"))) {
                    return;
                }
            }
        });
    };
    let mut writing = Duration::ZERO;
    let name = stream.name.clone();
    let ran = run_frames(
        stream,
        workers,
        in_flight,
        spawn,
        |_, frame: Vec<Vec<u8>>| {
            let t = Instant::now();
            writer.planes(&frame)?;
            writing += t.elapsed();
            give_back(&spare, frame, MOST_SPARE);
            Ok(())
        },
    )?;
    writer.flush()?;
    env.detail(&format!(
        "{name}: writing took {:.2} ms a frame",
        writing.as_secs_f64() * 1e3 / ran.frames.max(1) as f64
    ));
    Ok(Ran {
        frames: ran.frames,
        elapsed: started.elapsed(),
    })
}

/// Plane buffers kept for reuse: every one a frame in flight on the native CPU engine may
/// hold (two workers, four frames in flight, one more being read), its input's and its
/// output's.
const MOST_SPARE: usize = 2 * 3 * (4 + 1);

/// One frame's planes blurred on `blurrers`' engine (luma-sized planes, chroma planes), the
/// 8-bit ones into buffers from `spare`, the input's buffers given back to it.
fn blur_planes<'e>(
    format: &VideoFormat,
    (blur_luma, blur_chroma): &mut (Blurrer<'e>, Blurrer<'e>),
    bytes: Vec<Vec<u8>>,
    spare: &Spare,
    timings: &mut Timings,
) -> Result<Vec<Vec<u8>>> {
    let planes = format.images(bytes);
    let mut blurred = Vec::with_capacity(planes.len());
    for (plane, img) in format.planes().iter().zip(&planes) {
        let b = match plane.chroma {
            true => &mut *blur_chroma,
            false => &mut *blur_luma,
        };
        let mut out = match &img.samples {
            Samples::U8(s) => Samples::U8(spare_buffer(spare, s.len())),
            Samples::U16(_) => Samples::U16(Vec::new()),
        };
        b.run_into(img, &mut out, timings)?;
        blurred.push(Image {
            width: img.width,
            height: img.height,
            channels: img.channels,
            samples: out,
        });
    }
    if !format.wide() {
        give_back(spare, format.plane_bytes(planes), MOST_SPARE);
    }
    Ok(format.plane_bytes(blurred))
}

/// Opens the engine on a thread of its own while the native CPU engine blurs the stream's
/// first frames and writes them: opening a GPU takes a few hundred milliseconds, in which the
/// output would otherwise stand still. A reader thread reads each next frame while the cores
/// blur and write the one before, so the cores keep the pace of their own path; the opening
/// thread also makes a GPU's ring of frame slots, so that the ring starts at once. Returns the
/// engine (and its ring) once open, the frames the cores did, the stream (going on from the
/// next frame) and the time the engine took to open.
fn bridge_opening(
    env: &dyn Env,
    stream: Stream,
    (luma, chroma): (BlurOptions, BlurOptions),
    writer: &mut VideoWriter<'_>,
    spare: &Spare,
) -> Result<(Opened, u64, Stream, Duration)> {
    let Stream {
        source,
        name,
        frames,
    } = stream;
    let mut reader = match source {
        Source::Video(reader) => reader,
        source => {
            let stream = Stream {
                source,
                name,
                frames,
            };
            let t = Instant::now();
            return Ok(((open_engine(env)?, None), 0, stream, t.elapsed()));
        }
    };
    let format = reader.format().clone();
    // The frames read take their planes from `spare`, which the blurred ones go back to: a
    // few frames' buffers, not a new set each frame.
    reader.reuse(spare.clone());
    let bytes = super::video_gpu::Layout::of(&format).bytes;
    // One frame read ahead, on a thread that owns the reader until it stops (once `stop` is
    // set, after the frame it is reading) and hands it back; every frame it read is blurred
    // here. The channel holds none: the reader hands a frame over when it is taken, so at
    // most one is read ahead. Not a scoped thread: a reader blocked on a silent upstream must
    // not hold an error's way out.
    let stop = Arc::new(AtomicBool::new(false));
    let (frame_tx, frame_rx) = mpsc::sync_channel::<Result<Option<RawFrame>>>(0);
    let reading = {
        let stop = stop.clone();
        std::thread::Builder::new()
            .name("gpukit-read".into())
            .spawn(move || {
                while !stop.load(Ordering::SeqCst) {
                    let frame = reader.next_planes();
                    let more = matches!(frame, Ok(Some(_)));
                    if frame_tx.send(frame).is_err() || !more {
                        break;
                    }
                }
                reader
            })
            .context("cannot start a thread")?
    };
    std::thread::scope(|scope| {
        let opening = std::thread::Builder::new()
            .name("gpukit-open".into())
            .spawn_scoped(scope, || {
                let t = Instant::now();
                let engine = open_engine(env)?;
                let slots = match &*engine {
                    Engine::Gpu(gpu) => Some(super::video_gpu::ring_slots(gpu, bytes)),
                    _ => None,
                };
                Ok::<_, anyhow::Error>(((engine, slots), t.elapsed()))
            })
            .context("cannot start a thread")?;
        let cpu = Engine::Cpu;
        let mut blurrers = (Blurrer::new(&cpu, luma), Blurrer::new(&cpu, chroma));
        let mut timings = Timings::default();
        let mut bridged = 0u64;
        let mut step = |frame: Result<Option<RawFrame>>| -> Result<bool> {
            let Some((index, bytes)) = frame? else {
                return Ok(false);
            };
            let planes = blur_planes(&format, &mut blurrers, bytes, spare, &mut timings)
                .with_context(|| format!("frame {index}"))?;
            writer.planes(&planes)?;
            give_back(spare, planes, MOST_SPARE);
            bridged += 1;
            Ok(true)
        };
        let mut more = true;
        while more && !opening.is_finished() {
            more =
                step(frame_rx.recv().unwrap_or(Ok(None))).map_err(|e| e.context(name.clone()))?;
        }
        // The engine is open (or the stream ended): the frames read already are the cores'
        // too, then the reader hands the stream back where they end.
        stop.store(true, Ordering::SeqCst);
        while more {
            let Ok(frame) = frame_rx.recv() else {
                break;
            };
            more = step(frame).map_err(|e| e.context(name.clone()))?;
        }
        drop(frame_rx);
        let reader = reading
            .join()
            .unwrap_or_else(|panic| std::panic::resume_unwind(panic));
        let (engine, took) = opening
            .join()
            .unwrap_or_else(|panic| std::panic::resume_unwind(panic))?;
        let stream = Stream {
            source: Source::Video(reader),
            name: name.clone(),
            frames,
        };
        Ok((engine, bridged, stream, took))
    })
}

/// An opened engine, with the GPU stream's frame slots made while it opened.
type Opened = (Arc<Engine>, Option<Vec<crate::gpu::FrameSlot>>);

/// Writes a stream to `out` through `f`: stdout through a file handle of its own (Rust's
/// stdout scans every write for line ends, which costs a frame stream dearly); anything
/// else as [`PendingFile::commit_with`] does (a regular file replaced when complete).
pub fn write_stream(out: PendingFile, f: impl FnOnce(&mut dyn Write) -> Result<()>) -> Result<()> {
    if !out.is_stdout() {
        return out.commit_with(f);
    }
    use std::os::fd::AsFd;
    let fd = std::io::stdout()
        .as_fd()
        .try_clone_to_owned()
        .context("stdout: cannot write")?;
    let file = std::fs::File::from(fd);
    // A pipe is widened, and on a machine of many cores written by reference (src/io/
    // pipe.rs): the frames are copied once, not twice in turns with the reader.
    #[cfg(target_os = "linux")]
    if crate::io::video::widen_pipe(&file).is_some() && crate::io::pipe::GiftPipe::pays() {
        let mut pipe = crate::io::pipe::GiftPipe::new(file);
        crate::io::output::write_to("stdout", &mut pipe, f)?;
        // The last frames may still be on their way.
        return pipe
            .finish()
            .map_err(|e| crate::io::output::write_error("stdout", e));
    }
    #[cfg(not(target_os = "linux"))]
    crate::io::video::widen_pipe(&file);
    crate::io::output::write_to("stdout", file, f)
}

/// The one engine a stream runs on, shared by its workers.
fn open_engine(env: &dyn Env) -> Result<Arc<Engine>> {
    let mut timings = Timings::default();
    let mut engines = env.open_engines(false, &mut timings)?;
    Ok(Arc::new(engines.remove(0)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plot_frames_convert_by_hand() {
        let img = Image::new_u8(3, 1, 3, vec![255, 255, 255, 0, 0, 0, 255, 0, 0]);
        // White: Y 255, Cb = Cr = 128; black: 0, 128, 128; red: Y 76, Cb 85, Cr 255.
        assert_eq!(
            rgb_to_yuv444(&img),
            [255, 0, 76, 128, 128, 85, 128, 128, 255]
        );
    }

    #[test]
    fn narrow_values_fold_into_bins_on_their_own_maximum() {
        // Three 10-bit gray values, one channel: 0, 512 and 1023 (and a stray 2000) in 4
        // bins on 1023: floor(v * 4 / 1023) = 0, 2, 4 -> 3, and 7 -> 3.
        let mut values = Histogram::zeros(Channels::of(1, false), 1 << 16);
        values.pixels = 5;
        for (v, n) in [(0, 1), (512, 2), (1023, 1), (2000, 1)] {
            values.counts[v] = n;
        }
        let f = fold_values(&values, 4, 1023);
        assert_eq!((f.bins, f.pixels), (4, 5));
        assert_eq!(f.counts, [1, 0, 2, 2]);
        let ten = VideoFormat::raw(4, 4, "gray10le").unwrap();
        assert_eq!(narrow_maxval(&ten), Some(1023));
        assert_eq!(
            narrow_maxval(&VideoFormat::raw(4, 4, "gray16le").unwrap()),
            None
        );
        assert!(check_narrow_bins(1024, 10, 1023).is_ok());
        assert!(check_narrow_bins(1025, 10, 1023).is_err());
    }

    /// A stream read from memory that stops once `hold` bytes are consumed (saying so in
    /// `reached`) until the engine has opened (`opened`), and pauses 100 ms more at `pause`,
    /// by when the thread that opened it has long returned.
    struct Held {
        bytes: std::io::Cursor<Vec<u8>>,
        hold: u64,
        pause: u64,
        reached: Arc<AtomicBool>,
        opened: Arc<AtomicBool>,
    }

    impl std::io::Read for Held {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            let n = std::io::BufRead::fill_buf(self)?.len().min(buf.len());
            let at = self.bytes.position() as usize;
            buf[..n].copy_from_slice(&self.bytes.get_ref()[at..at + n]);
            std::io::BufRead::consume(self, n);
            Ok(n)
        }
    }

    impl BufRead for Held {
        fn fill_buf(&mut self) -> std::io::Result<&[u8]> {
            let at = self.bytes.position();
            if at >= self.hold {
                self.reached.store(true, Ordering::SeqCst);
            }
            while at >= self.hold && !self.opened.load(Ordering::SeqCst) {
                std::thread::sleep(Duration::from_millis(1));
            }
            if at == self.pause {
                std::thread::sleep(Duration::from_millis(100));
                self.pause = u64::MAX;
            }
            // Never past the hold before the engine is open, nor past the pause before it.
            let end = match (self.opened.load(Ordering::SeqCst), at < self.pause) {
                (false, _) => self.hold,
                (true, true) => self.pause.min(self.bytes.get_ref().len() as u64),
                (true, false) => self.bytes.get_ref().len() as u64,
            };
            Ok(&self.bytes.get_ref()[at as usize..end as usize])
        }

        fn consume(&mut self, n: usize) {
            self.bytes.set_position(self.bytes.position() + n as u64);
        }
    }

    /// An `Env` whose engine is a GPU (lavapipe), opened beforehand and handed over only
    /// once the stream has been read up to its hold; its notes kept.
    struct SlowOpen {
        gpu: Mutex<Option<crate::gpu::Gpu>>,
        reached: Arc<AtomicBool>,
        opened: Arc<AtomicBool>,
        notes: Mutex<Vec<String>>,
    }

    impl Env for SlowOpen {
        fn note(&self, msg: &str) {
            self.notes.lock().unwrap().push(msg.to_string());
        }
        fn detail(&self, msg: &str) {
            self.note(msg);
        }
        fn warn(&self, msg: &str) {
            self.note(msg);
        }
        fn error(&self, msg: &str) {
            self.note(msg);
        }
        fn quiet(&self) -> bool {
            false
        }
        fn progress(&self, _: u64, _: bool) -> indicatif::ProgressBar {
            indicatif::ProgressBar::hidden()
        }
        fn read_options(&self) -> crate::io::image::ReadOptions {
            crate::io::image::ReadOptions::default()
        }
        fn estimate(&self, _: Duration) {}
        fn several_devices(&self) -> bool {
            false
        }
        fn open_engines(&self, _: bool, _: &mut Timings) -> Result<Vec<Engine>> {
            // The "opening" lasts until the bridge has blurred the frames before the hold.
            while !self.reached.load(Ordering::SeqCst) {
                std::thread::sleep(Duration::from_millis(1));
            }
            let gpu = self.gpu.lock().unwrap().take().expect("opened once");
            self.opened.store(true, Ordering::SeqCst);
            Ok(vec![Engine::Gpu(Box::new(gpu))])
        }
        fn report_timings(&self, _: &Timings) {}
    }

    // 24 frames of 4:2:0 at an odd size: the cores blur the first ones while the GPU
    // "opens" (the engine comes once 5 frames have been read), the GPU ring the rest, and
    // every plane of every frame is the reference blur of the input's, in order, under one
    // header.
    #[test]
    fn the_cores_bridge_the_gpus_opening_and_the_ring_goes_on_exactly() {
        let (w, h, frames) = (37u32, 23u32, 24u64);
        let header = format!("YUV4MPEG2 W{w} H{h} F30:1 Ip A1:1 C420jpeg\n");
        let format = VideoFormat::y4m(header.trim_end()).unwrap();
        let frame_bytes = format.frame_bytes() as usize;
        let mut stream = header.clone().into_bytes();
        let mut seed = 12345u32;
        let mut inputs = Vec::new();
        for _ in 0..frames {
            stream.extend_from_slice(b"FRAME\n");
            let bytes: Vec<u8> = (0..frame_bytes)
                .map(|_| {
                    seed = seed.wrapping_mul(1_103_515_245).wrapping_add(12345);
                    (seed >> 16) as u8
                })
                .collect();
            stream.extend_from_slice(&bytes);
            inputs.push(bytes);
        }
        let (reached, opened) = (Arc::default(), Arc::<AtomicBool>::default());
        // Held once frames 0-4 and the FRAME line of 5 are read; the engine then opens, and
        // the cores do frame 5 too (and 6, where the reader had read it ahead).
        let hold = (header.len() + 5 * (6 + frame_bytes) + 6) as u64;
        let reader = Held {
            bytes: std::io::Cursor::new(stream),
            hold,
            pause: hold,
            reached: Arc::clone(&reached),
            opened: opened.clone(),
        };
        let gpu = crate::gpu::open_gpu(&crate::gpu::DeviceRequest {
            tune: crate::tune::Settings::off(),
            ..Default::default()
        })
        .expect("GPU tests need a wgpu adapter: install mesa-vulkan-drivers for lavapipe");
        let env = SlowOpen {
            gpu: Mutex::new(Some(gpu)),
            reached,
            opened,
            notes: Mutex::default(),
        };
        let boxed: Box<dyn BufRead + Send> = Box::new(reader);
        let stream = Stream {
            source: Source::Video(VideoReader::y4m(boxed, u64::MAX).unwrap()),
            name: "stdin".into(),
            frames: Some(frames),
        };
        let luma = BlurOptions::new(crate::ops::blur::Kind::Box, 3, 1);
        let chroma = BlurOptions::new(crate::ops::blur::Kind::Box, 2, 1);
        let mut out = Vec::new();
        let streamed = stream.video_format().cloned().unwrap();
        let ran = blur_stream(
            &env,
            stream,
            streamed,
            (luma, chroma),
            &mut out,
            (true, true),
        )
        .unwrap();
        assert_eq!(ran.frames, frames);
        let notes = env.notes.lock().unwrap().clone();
        let bridged: u64 = notes
            .iter()
            .find_map(|n| {
                n.strip_prefix("stdin: the cores blurred the first ")
                    .and_then(|r| r.split(' ').next())
                    .and_then(|k| k.parse().ok())
            })
            .unwrap_or_else(|| panic!("no bridge note in {notes:?}"));
        // Frames 0-5, and the one the reader had read ahead when the engine came (if any).
        assert!((6..=7).contains(&bridged), "{notes:?}");
        assert!(
            notes.iter().any(|n| n.contains("GPU ring of 4 slots")),
            "the ring took no frames: {notes:?}"
        );
        // One header, then each frame blurred as the reference does.
        assert!(out.starts_with(header.as_bytes()));
        let mut at = header.len();
        for (i, input) in inputs.into_iter().enumerate() {
            assert_eq!(&out[at..at + 6], b"FRAME\n", "frame {i}");
            at += 6;
            let got = format.images(
                format
                    .plane_sizes()
                    .iter()
                    .scan(at, |p, &n| {
                        *p += n;
                        Some(out[*p - n..*p].to_vec())
                    })
                    .collect(),
            );
            at += frame_bytes;
            let planes = format.images(
                format
                    .plane_sizes()
                    .iter()
                    .scan(0, |p, &n| {
                        *p += n;
                        Some(input[*p - n..*p].to_vec())
                    })
                    .collect(),
            );
            for (p, (img, got)) in planes.iter().zip(&got).enumerate() {
                let o = if p == 0 { luma } else { chroma };
                let want = crate::ops::blur::reference(img, &o).unwrap();
                assert!(want == *got, "frame {i}, plane {p} differs");
            }
        }
        assert_eq!(at, out.len());
    }

    /// A sink that refuses every write, as a downstream that has gone away.
    struct Closed;

    impl Write for Closed {
        fn write(&mut self, _: &[u8]) -> std::io::Result<usize> {
            Err(std::io::ErrorKind::BrokenPipe.into())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    // The output fails while the cores bridge the opening, and the upstream has sent one
    // frame and then nothing (its end held open): the error comes back at once, and the
    // reader blocked on the silent upstream does not hold it.
    #[cfg(unix)]
    #[test]
    fn a_failed_write_while_bridging_returns_though_the_upstream_is_silent() {
        let header = "YUV4MPEG2 W8 H8 F30:1 Ip A1:1 C420jpeg\n";
        let format = VideoFormat::y4m(header.trim_end()).unwrap();
        let (upstream, held_open) = std::os::unix::net::UnixStream::pair().unwrap();
        let mut w = &held_open;
        w.write_all(header.as_bytes()).unwrap();
        w.write_all(b"FRAME\n").unwrap();
        w.write_all(&vec![7u8; format.frame_bytes() as usize])
            .unwrap();
        let gpu = crate::gpu::open_gpu(&crate::gpu::DeviceRequest {
            tune: crate::tune::Settings::off(),
            ..Default::default()
        })
        .expect("GPU tests need a wgpu adapter: install mesa-vulkan-drivers for lavapipe");
        let (done_tx, done_rx) = mpsc::channel();
        std::thread::spawn(move || {
            let env = SlowOpen {
                gpu: Mutex::new(Some(gpu)),
                reached: Arc::new(AtomicBool::new(true)),
                opened: Arc::default(),
                notes: Mutex::default(),
            };
            let boxed: Box<dyn BufRead + Send> = Box::new(std::io::BufReader::new(upstream));
            let stream = Stream {
                source: Source::Video(VideoReader::y4m(boxed, u64::MAX).unwrap()),
                name: "stdin".into(),
                frames: None,
            };
            let o = BlurOptions::new(crate::ops::blur::Kind::Box, 1, 1);
            let format = stream.video_format().cloned().unwrap();
            let ran = blur_stream(&env, stream, format, (o, o), &mut Closed, (false, true));
            let _ = done_tx.send(ran.map(|r| r.frames).map_err(|e| format!("{e:#}")));
        });
        let got = done_rx
            .recv_timeout(Duration::from_secs(20))
            .expect("blur_stream returned while its reader waits on the upstream");
        let err = got.expect_err("nothing can be written");
        assert!(
            err.contains("Broken pipe") || err.contains("broken pipe"),
            "{err}"
        );
        drop(held_open);
    }

    #[test]
    fn chroma_radius_follows_the_subsampling() {
        let f = VideoFormat::raw(4, 4, "yuv420p").unwrap();
        let o = BlurOptions::new(crate::ops::blur::Kind::Box, 15, 1);
        assert_eq!(chroma_options(o, &f, None).radius, 8);
        assert_eq!(chroma_options(o, &f, Some(15)).radius, 15);
        let f = VideoFormat::raw(4, 4, "yuv444p").unwrap();
        assert_eq!(chroma_options(o, &f, None).radius, 15);
    }
}
