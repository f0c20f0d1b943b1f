//! `scan`: prefix sums, minima and maxima of u32, i32 and f32 arrays of any length.
//!
//! One pass per segment by decoupled look-back (`scan_lookback`): each workgroup draws a
//! ticket, scans that tile, publishes its total, walks back over the tiles before it to the
//! first that has published its inclusive prefix, publishes its own and writes its tile;
//! the data is read and written once (8 bytes per u32). A wait that gives up sets a fault
//! flag and `run` scans again by reduce-then-scan, which f32 sums always take (their error
//! bound rests on its tree; docs/scan.md): `scan_reduce` writes the total of each tile of
//! level 0 (the data) as level 1, and so on until a level fits in one tile; `scan_block`
//! then scans that top level in place, starting from the segment's carry, and each level
//! below it tile by tile. Either way the segment's last step writes carry + segment total
//! for the next segment, so segments (inputs larger than one storage binding) chain on the
//! GPU without a read-back.
//!
//! Inside a tile, each invocation owns `VEC_PER_THREAD` vec4s, `WG_SIZE` vec4s apart (every
//! load and store is coalesced), scans each vec4 serially, and the workgroup scans the vec4
//! totals: with subgroup operations where the adapter has them, else with Blelloch's
//! work-efficient up-sweep and down-sweep in bank-conflict-free workgroup memory.
//!
//! Files: `element` (the element types' arithmetic), `reference` (the CPU reference and the
//! staged mirror of the GPU passes), `plan` (the GPU passes), `tune`, `bench`.

mod bench;
mod element;
pub mod engine;
mod plan;
mod reference;
mod tune;

use std::fmt;

use anyhow::Result;

use crate::gpu::{Engine, Gpu, Timings};
use crate::tune::Tunable;
pub use element::Element;
pub use plan::{f32_sum_depth, layout_for, subgroups_usable, takes_subgroups, ScanPlan};
pub use reference::{reduce_tiles, reference, scan_staged_cpu, scan_tiles, Layout, Segment};
pub use tune::Tunables;

/// `scan` in the registry.
pub const OP: super::Op = super::Op {
    name: "scan",
    bench: bench::cases,
    tune: Some(crate::tune::tune::<tune::Tuning>),
    shaders: plan::shaders,
    command: true,
};

/// Invocations per workgroup by default (`Tunables::wg_size`).
pub const WG_SIZE: u32 = 256;
/// vec4s each invocation owns per tile by default (`Tunables::vec_per_thread`). Keep in
/// sync with wgsl/shared/scan_op.wgsl.
pub const VEC_PER_THREAD: u32 = 4;
/// Element indices in the shaders are u32 (`4 * vec4 index`), so no segment is longer.
const MAX_SEGMENT: usize = 1 << 30;

/// The operator of a scan.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Op {
    Sum,
    Min,
    Max,
}

impl Op {
    /// The shaders' `OP` code (wgsl/shared/scan_op.wgsl).
    pub(super) fn code(self) -> u32 {
        match self {
            Op::Sum => 0,
            Op::Min => 1,
            Op::Max => 2,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Op::Sum => "sum",
            Op::Min => "min",
            Op::Max => "max",
        }
    }
}

/// Whether `out[i]` includes `in[i]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// `out[i] = in[0] op ... op in[i-1]`; `out[0]` is the identity.
    Exclusive,
    /// `out[i] = in[0] op ... op in[i]`.
    Inclusive,
}

/// How the workgroup scans inside a tile.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Path {
    /// Subgroup operations where the adapter has them, else workgroup memory.
    Auto,
    /// Subgroup operations; an error where the adapter has none.
    Subgroup,
    /// Workgroup memory only (Blelloch), on any adapter.
    Workgroup,
}

impl fmt::Display for Path {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Path::Auto => "auto",
            Path::Subgroup => "subgroup",
            Path::Workgroup => "workgroup",
        })
    }
}

/// What to scan with, and how the GPU runs it.
#[derive(Clone, Copy, Debug)]
pub struct Options {
    pub op: Op,
    pub mode: Mode,
    pub path: Path,
    /// The most elements one segment holds. Default (`None`): as many as one storage binding
    /// and one 2-D dispatch take. Rounded down to whole tiles, at least one; tests lower it to
    /// reach chained segments with small inputs.
    pub segment_len: Option<usize>,
    /// Workgroup size and work per invocation (`gpukit tune` measures them). `None`: the
    /// tune cache's choice for this adapter and length, else [`Tunables::for_len`].
    pub tunables: Option<Tunables>,
}

/// The native CPU engine's estimated time for a scan of `len` elements: about 1 ns an
/// element, on at most 4 threads (memory bound beyond) ([`super::cpu_time`]).
pub fn cpu_estimate(len: usize) -> std::time::Duration {
    super::cpu_time(len as f64, 4)
}

impl Options {
    /// Elements per tile: what one workgroup scans.
    pub fn tile(&self) -> usize {
        let t = self.tunables();
        (t.wg_size * t.vec_per_thread * 4) as usize
    }

    /// The kernels' shape: the one given, else the defaults.
    pub fn tunables(&self) -> Tunables {
        self.tunables.unwrap_or(Tunables::DEFAULT)
    }

    /// Whether the look-back walks by subgroup with these options on `gpu` (the subgroup
    /// path, which every shape `for_len` gives keeps: both sizes are multiples of 32).
    fn walks_by_subgroup(&self, gpu: &Gpu) -> bool {
        let t = self.tunables.unwrap_or(Tunables::DEFAULT);
        match self.path {
            Path::Workgroup => false,
            Path::Auto | Path::Subgroup => plan::subgroups_usable(gpu, t.wg_size),
        }
    }

    /// These options with the shape settled for `n` u32 or i32 elements on `gpu`: the one
    /// given, else the tune cache's, else the defaults for that length.
    pub fn resolved(&self, gpu: &Gpu, n: usize) -> Options {
        self.resolved_as(gpu, n, Elem::U32)
    }

    /// [`Options::resolved`] for elements of `elem`. What [`run`] scans with. Without a tune
    /// cache the single-pass scans take [`Tunables::for_len`]'s shape, the f32 sum's
    /// reduce-then-scan DEFAULT's (512 x 4 took it from 0.908 to 0.998 ms at 2^28 on an
    /// H200, call AJ-kern3-2 of docs/BENCHMARKS.md).
    pub fn resolved_as(&self, gpu: &Gpu, n: usize, elem: Elem) -> Options {
        let t = self
            .tunables
            .or_else(|| crate::tune::choice(gpu, OP.name, n as f64, Tunables::check))
            .unwrap_or_else(|| {
                if plan::single_pass(self.op, elem) {
                    Tunables::for_len(n, &gpu.limits, self.walks_by_subgroup(gpu))
                } else {
                    Tunables::DEFAULT
                }
            });
        Options {
            tunables: Some(t),
            ..*self
        }
    }
}

impl Default for Options {
    fn default() -> Self {
        Options {
            op: Op::Sum,
            mode: Mode::Exclusive,
            path: Path::Auto,
            segment_len: None,
            tunables: None,
        }
    }
}

/// The element types scan takes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Elem {
    U32,
    I32,
    F32,
}

impl Elem {
    /// The shaders' `DTYPE` code (wgsl/shared/scan_op.wgsl).
    pub(super) fn code(self) -> u32 {
        match self {
            Elem::U32 => 0,
            Elem::I32 => 1,
            Elem::F32 => 2,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Elem::U32 => "u32",
            Elem::I32 => "i32",
            Elem::F32 => "f32",
        }
    }
}

/// Scans `data` on the engine, adding wall time per phase and GPU time per pass to
/// `timings`.
pub fn run<T: Element>(
    engine: &Engine,
    data: &[T],
    opts: &Options,
    timings: &mut Timings,
) -> Result<Vec<T>> {
    let out = match engine {
        Engine::Cpu => timings.phase("compute", || cpu(data, opts)),
        Engine::Gpu(_) if data.is_empty() => Vec::new(),
        Engine::Gpu(gpu) => {
            let opts = opts.resolved_as(gpu, data.len(), T::ELEM);
            let n = data.len();
            let plan = timings.phase("pipeline", || ScanPlan::new::<T>(gpu, n, &opts))?;
            match gpu_run(gpu, &plan, data, timings)? {
                Some(out) => out,
                // A look-back that gave up waiting left a wrong result: reduce-then-scan,
                // which never waits on another workgroup, scans it again.
                None => {
                    let plan =
                        timings.phase("pipeline", || ScanPlan::new_levels::<T>(gpu, n, &opts))?;
                    gpu_run(gpu, &plan, data, timings)?.expect("reduce-then-scan never faults")
                }
            }
        }
    };
    if T::ELEM == Elem::F32 && opts.op == Op::Sum {
        check_f32_sums(bytemuck::cast_slice(data), bytemuck::cast_slice(&out))?;
    }
    Ok(out)
}

/// One run of `plan` over `data`: the result, or `None` where its look-back gave up.
fn gpu_run<T: Element>(
    gpu: &Gpu,
    plan: &ScanPlan,
    data: &[T],
    timings: &mut Timings,
) -> Result<Option<Vec<T>>> {
    timings.phase("upload", || plan.upload(gpu, data));
    gpu.run_timed(timings, plan.passes(), |b, range| {
        plan.record_passes(b, range)
    })?;
    if plan.faulted(gpu)? {
        return Ok(None);
    }
    Ok(Some(timings.phase("download", || plan.read(gpu))?))
}

/// An f32 sum whose running total leaves f32's range is refused on every engine: past it
/// the CPU engine (adding in f64) comes back with finite sums where the GPU (adding in f32)
/// stays at infinity, and neither is the answer.
fn check_f32_sums(data: &[f32], out: &[f32]) -> Result<()> {
    if data.iter().all(|x| x.is_finite()) {
        if let Some(i) = out.iter().position(|x| !x.is_finite()) {
            anyhow::bail!(
                "element {i}: the running sum passes f32's range (±{:e}); f32 sums must stay within it",
                f32::MAX
            );
        }
    }
    Ok(())
}

/// The CPU engine's scan: the native engine (exact for integers and min/max; f32 sums within
/// docs/scan.md's bound of the reference).
fn cpu<T: Element>(data: &[T], opts: &Options) -> Vec<T> {
    engine::scan(data, opts.op, opts.mode)
}

#[cfg(test)]
mod tests;
