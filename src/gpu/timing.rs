//! Timing: GPU time per pass from timestamp queries, and wall time per phase.

use std::time::{Duration, Instant};

use anyhow::Result;
use serde::Serialize;

use super::Gpu;

/// Timestamp queries for up to `capacity` passes of one batch. Inert (it writes nothing)
/// on adapters without `TIMESTAMP_QUERY`.
///
/// A batch records consecutive dispatches in one compute pass (a pass boundary cost about
/// 10 us on an H100, call DZ in docs/BENCHMARKS.md), and a timer made by [`PassTimer::new`]
/// times that pass as one, under its dispatches' labels joined by " + ". One made by
/// [`PassTimer::split`] gives each dispatch a pass of its own, timed apart: the breakdown
/// `gpukit bench` prints, at the cost of the boundaries.
pub struct PassTimer {
    queries: Option<Queries>,
    capacity: u32,
    labels: Vec<String>,
    split: bool,
    dispatches: u32,
    /// Whether the pass the last `next` began is timed (the last label is its): a pass begun
    /// past the capacity is not, and its dispatches join no label.
    open_timed: bool,
}

struct Queries {
    set: wgpu::QuerySet,
    resolve: wgpu::Buffer,
    period_ns: f64,
}

impl PassTimer {
    pub fn new(gpu: &Gpu, capacity: u32) -> Self {
        let queries = gpu.features.timestamp_query.then(|| {
            let count = 2 * capacity;
            Queries {
                set: gpu.device.create_query_set(&wgpu::QuerySetDescriptor {
                    label: Some("pass timestamps"),
                    ty: wgpu::QueryType::Timestamp,
                    count,
                }),
                // QUERY_RESOLVE to receive the timestamps, COPY_SRC to read them back.
                resolve: gpu.device.create_buffer(&wgpu::BufferDescriptor {
                    label: Some("pass timestamps"),
                    size: count as u64 * 8,
                    usage: wgpu::BufferUsages::QUERY_RESOLVE | wgpu::BufferUsages::COPY_SRC,
                    mapped_at_creation: false,
                }),
                period_ns: gpu.queue.get_timestamp_period() as f64,
            }
        });
        PassTimer {
            queries,
            capacity,
            labels: Vec::new(),
            split: false,
            dispatches: 0,
            open_timed: false,
        }
    }

    /// A timer that gives each dispatch a compute pass of its own, timed apart.
    pub fn split(gpu: &Gpu, capacity: u32) -> Self {
        PassTimer {
            split: true,
            ..PassTimer::new(gpu, capacity)
        }
    }

    /// Whether each dispatch gets a pass of its own.
    pub(crate) fn splits(&self) -> bool {
        self.split
    }

    /// Dispatches recorded since the last `take`, timed or not.
    pub fn dispatches(&self) -> u32 {
        self.dispatches
    }

    /// A dispatch recorded into the pass the last [`PassTimer::next`] timed: its label joins
    /// that pass's (once).
    pub(crate) fn join(&mut self, label: &str) {
        self.dispatches += 1;
        if !self.open_timed {
            return;
        }
        if let Some(last) = self.labels.last_mut() {
            if !last.split(" + ").any(|l| l == label) {
                last.push_str(" + ");
                last.push_str(label);
            }
        }
    }

    /// Whether this timer measures anything.
    pub fn is_active(&self) -> bool {
        self.queries.is_some()
    }

    /// The timestamp writes for the next pass, or `None` when inactive or full.
    pub(crate) fn next(&mut self, label: &str) -> Option<wgpu::ComputePassTimestampWrites<'_>> {
        self.dispatches += 1;
        self.open_timed = false;
        let q = self.queries.as_ref()?;
        let i = self.labels.len() as u32;
        if i >= self.capacity {
            return None;
        }
        self.open_timed = true;
        self.labels.push(label.to_string());
        Some(wgpu::ComputePassTimestampWrites {
            query_set: &q.set,
            beginning_of_pass_write_index: Some(2 * i),
            end_of_pass_write_index: Some(2 * i + 1),
        })
    }

    pub(crate) fn resolve(&self, encoder: &mut wgpu::CommandEncoder) {
        if let Some(q) = &self.queries {
            let n = 2 * self.labels.len() as u32;
            if n > 0 {
                encoder.resolve_query_set(&q.set, 0..n, &q.resolve, 0);
            }
        }
    }

    /// Records resolving the timestamps of the passes so far and copying them to `offset` of
    /// `dst` (room for 16 bytes a pass of the capacity), for [`PassTimer::take_from`] to read
    /// them there: no read-back of their own.
    pub(crate) fn resolve_to(
        &self,
        encoder: &mut wgpu::CommandEncoder,
        dst: &wgpu::Buffer,
        offset: u64,
    ) {
        if let Some(q) = &self.queries {
            let n = 2 * self.labels.len() as u64;
            if n > 0 {
                self.resolve(encoder);
                encoder.copy_buffer_to_buffer(&q.resolve, 0, dst, offset, n * 8);
            }
        }
    }

    /// Like [`PassTimer::take`], from the timestamps [`PassTimer::resolve_to`] copied into
    /// `bytes` (the mapped read-back, from that offset on).
    pub fn take_from(&mut self, bytes: &[u8]) -> Vec<PassTime> {
        self.dispatches = 0;
        let labels = std::mem::take(&mut self.labels);
        let Some(q) = &self.queries else {
            return Vec::new();
        };
        let tick = |i: usize| {
            let b: [u8; 8] = bytes[8 * i..8 * i + 8].try_into().expect("8 bytes");
            u64::from_le_bytes(b) as f64 * q.period_ns
        };
        labels
            .into_iter()
            .enumerate()
            .map(|(i, label)| PassTime {
                label,
                start_ns: tick(2 * i),
                end_ns: tick(2 * i + 1),
            })
            .collect()
    }

    /// The passes recorded since the last `take`, with their GPU times, after the batch ran.
    /// Resets the timer for the next batch.
    pub fn take(&mut self, gpu: &Gpu) -> Result<Vec<PassTime>> {
        self.dispatches = 0;
        let labels = std::mem::take(&mut self.labels);
        let Some(q) = &self.queries else {
            return Ok(Vec::new());
        };
        if labels.is_empty() {
            return Ok(Vec::new());
        }
        let ticks: Vec<u64> = gpu.read_vec(&q.resolve, 2 * labels.len())?;
        Ok(labels
            .into_iter()
            .enumerate()
            .map(|(i, label)| PassTime {
                label,
                start_ns: ticks[2 * i] as f64 * q.period_ns,
                end_ns: ticks[2 * i + 1] as f64 * q.period_ns,
            })
            .collect())
    }
}

/// One pass's timestamps, in nanoseconds on the GPU's clock.
#[derive(Clone, Debug, Serialize)]
pub struct PassTime {
    pub label: String,
    #[serde(skip)]
    pub start_ns: f64,
    #[serde(skip)]
    pub end_ns: f64,
}

impl PassTime {
    pub fn ms(&self) -> f64 {
        (self.end_ns - self.start_ns).max(0.0) / 1e6
    }
}

/// GPU time from the first pass's start to the last pass's end, in nanoseconds: the passes
/// and the gaps between them, which are part of an op's cost.
pub fn span_ns(passes: &[PassTime]) -> Option<f64> {
    let start = passes.iter().map(|p| p.start_ns).reduce(f64::min)?;
    let end = passes.iter().map(|p| p.end_ns).reduce(f64::max)?;
    Some((end - start).max(0.0))
}

/// Wall time per phase (device, pipelines, decode, upload, compute, download, encode...) and
/// GPU time per pass, for `--timings` and JSON reports.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Timings {
    /// (phase, milliseconds), in order; a phase seen twice accumulates.
    pub phases: Vec<(String, f64)>,
    /// (pass label, GPU milliseconds) from timestamp queries; empty without them.
    pub gpu_passes: Vec<(String, f64)>,
}

impl Timings {
    /// Runs `f`, adding its wall time to `phase`.
    pub fn phase<T>(&mut self, phase: &str, f: impl FnOnce() -> T) -> T {
        let start = Instant::now();
        let out = f();
        self.add(phase, start.elapsed());
        out
    }

    pub fn add(&mut self, phase: &str, d: Duration) {
        let ms = d.as_secs_f64() * 1e3;
        match self.phases.iter_mut().find(|(p, _)| p == phase) {
            Some((_, total)) => *total += ms,
            None => self.phases.push((phase.to_string(), ms)),
        }
    }

    pub fn add_passes(&mut self, passes: &[PassTime]) {
        for p in passes {
            match self.gpu_passes.iter_mut().find(|(l, _)| *l == p.label) {
                Some((_, total)) => *total += p.ms(),
                None => self.gpu_passes.push((p.label.clone(), p.ms())),
            }
        }
    }

    /// Adds another report's GPU passes, not its phases (work whose wall time this report
    /// counts as one phase).
    pub fn add_passes_of(&mut self, other: &Timings) {
        for (l, ms) in &other.gpu_passes {
            match self.gpu_passes.iter_mut().find(|(x, _)| x == l) {
                Some((_, total)) => *total += ms,
                None => self.gpu_passes.push((l.clone(), *ms)),
            }
        }
    }

    /// Folds another report into this one (a batch of files).
    pub fn merge(&mut self, other: &Timings) {
        for (p, ms) in &other.phases {
            self.add(p, Duration::from_secs_f64(ms / 1e3));
        }
        self.add_passes_of(other);
    }

    /// The lines `--timings` prints on stderr.
    pub fn lines(&self) -> Vec<String> {
        let mut out = Vec::new();
        let total: f64 = self.phases.iter().map(|(_, ms)| ms).sum();
        for (p, ms) in &self.phases {
            out.push(format!("timing: {p:<14} {ms:9.3} ms"));
        }
        out.push(format!("timing: {:<14} {total:9.3} ms", "sum"));
        for (l, ms) in &self.gpu_passes {
            out.push(format!("timing: gpu {l:<24} {ms:9.3} ms"));
        }
        out
    }
}
