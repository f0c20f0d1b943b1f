//! `scan`: prefix sums, minima and maxima of u32, i32 and f32 arrays of any length.
//!
//! Reduce-then-scan over as many levels as the length needs. Per segment of the input:
//! `scan_reduce` writes the total of each tile of level 0 (the data) as level 1, and so on
//! until a level fits in one tile; `scan_block` then scans that top level in place, starting
//! from the segment's carry, and each level below it tile by tile, starting from the tile's
//! scanned total in the level above. The top level's pass also writes carry + segment total
//! for the next segment, so segments (inputs larger than one storage binding) chain on the
//! GPU without a read-back. The data is read twice and written once: 12 bytes per u32.
//!
//! Inside a tile, each invocation owns `VEC_PER_THREAD` vec4s, `WG_SIZE` vec4s apart (every
//! load and store is coalesced), scans each vec4 serially, and the workgroup scans the vec4
//! totals: with subgroup operations where the adapter has them, else with Blelloch's
//! work-efficient up-sweep and down-sweep in bank-conflict-free workgroup memory.

use std::fmt;

use anyhow::{bail, Result};

use crate::bench::{Case, Unit, MAX_PASSES};
use crate::gpu::{Batch, Engine, Gpu, Kernel, Shader, Timings, Usage};

pub mod engine;

/// Invocations per workgroup by default (`Tunables::wg_size`).
pub const WG_SIZE: u32 = 256;
/// vec4s each invocation owns per tile by default (`Tunables::vec_per_thread`). Keep in
/// sync with wgsl/shared/scan_op.wgsl.
pub const VEC_PER_THREAD: u32 = 4;
/// Element indices in the shaders are u32 (`4 * vec4 index`), so no segment is longer.
const MAX_SEGMENT: usize = 1 << 30;

/// The operator of a scan.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Op {
    Sum,
    Min,
    Max,
}

impl Op {
    /// The shaders' `OP` code (wgsl/shared/scan_op.wgsl).
    fn code(self) -> u32 {
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

#[derive(Clone, Copy, Debug)]
pub struct ScanOptions {
    pub op: Op,
    pub mode: Mode,
    pub path: Path,
    /// The most elements one segment holds. Default (`None`): as many as one storage binding
    /// and one 2-D dispatch take. Rounded down to whole tiles, at least one; tests lower it to
    /// reach chained segments with small inputs.
    pub segment_len: Option<usize>,
    /// Workgroup size and work per invocation (`gpukit tune` measures them).
    pub tunables: Tunables,
}

/// The shape of the scan kernels' work, which `gpukit tune` chooses per adapter and size.
/// Results are the same for every choice (within docs/scan.md's bound for f32 sums, which
/// depends on it through [`f32_sum_depth`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Tunables {
    /// Invocations per workgroup (the shaders' `WG_SIZE`): a power of two from 4 to the
    /// adapter's limit.
    pub wg_size: u32,
    /// vec4s each invocation owns per tile (the shaders' `VEC_PER_THREAD`, a generated
    /// constant): 1, 2, 4 or 8. A tile is `wg_size * vec_per_thread` vec4s.
    pub vec_per_thread: u32,
}

impl Tunables {
    /// The defaults, measured on an H200 (2^28 u32 at 220 Gelem/s) and valid everywhere.
    pub const DEFAULT: Tunables = Tunables {
        wg_size: WG_SIZE,
        vec_per_thread: VEC_PER_THREAD,
    };

    /// Whether the kernels can run this choice on an adapter with `limits`.
    pub fn check(&self, limits: &wgpu::Limits) -> Result<()> {
        let wg = self.wg_size;
        let max_wg = limits
            .max_compute_invocations_per_workgroup
            .min(limits.max_compute_workgroup_size_x);
        if !wg.is_power_of_two() || wg < 4 || wg > max_wg {
            bail!("scan workgroup size {wg} is not a power of two from 4 to {max_wg}");
        }
        if !matches!(self.vec_per_thread, 1 | 2 | 4 | 8) {
            bail!(
                "scan vec4s per invocation must be 1, 2, 4 or 8, not {}",
                self.vec_per_thread
            );
        }
        Ok(())
    }

    /// Workgroup memory of the in-tile scan: one total per subgroup and vec4 on the subgroup
    /// path (`subgroup_min` the adapter's smallest subgroup), Blelloch's padded tree of every
    /// vec4 total on the workgroup path. Keep in sync with wgsl/shared/scan_*.wgsl.
    pub fn workgroup_bytes(&self, subgroup_min: Option<u32>) -> u32 {
        let totals = self.wg_size * self.vec_per_thread;
        4 * match subgroup_min {
            Some(min) => totals / min,
            None => totals + (totals >> 5),
        }
    }
}

impl fmt::Display for Tunables {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "wg={} vec4s={}", self.wg_size, self.vec_per_thread)
    }
}

impl ScanOptions {
    /// Elements per tile: what one workgroup scans.
    pub fn tile(&self) -> usize {
        (self.tunables.wg_size * self.tunables.vec_per_thread * 4) as usize
    }
}

impl Default for ScanOptions {
    fn default() -> Self {
        ScanOptions {
            op: Op::Sum,
            mode: Mode::Exclusive,
            path: Path::Auto,
            segment_len: None,
            tunables: Tunables::DEFAULT,
        }
    }
}

/// The element types scan takes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Elem {
    U32,
    I32,
    F32,
}

impl Elem {
    /// The shaders' `DTYPE` code (wgsl/shared/scan_op.wgsl).
    fn code(self) -> u32 {
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

/// A type scan takes, with its arithmetic: as the GPU does it (`identity`, `combine`), and as
/// the CPU reference does it (`Acc`: wrapping integers, f64 for f32).
pub trait Element: bytemuck::Pod + PartialEq + fmt::Debug {
    const ELEM: Elem;
    /// The CPU reference's accumulator.
    type Acc: Copy;
    /// Keep in sync with `identity` in wgsl/shared/scan_op.wgsl.
    fn identity(op: Op) -> Self;
    /// Keep in sync with `combine` in wgsl/shared/scan_op.wgsl.
    fn combine(op: Op, a: Self, b: Self) -> Self;
    fn acc_identity(op: Op) -> Self::Acc;
    fn acc_combine(op: Op, a: Self::Acc, x: Self) -> Self::Acc;
    fn from_acc(a: Self::Acc) -> Self;
}

impl Element for u32 {
    const ELEM: Elem = Elem::U32;
    type Acc = u32;
    fn identity(op: Op) -> u32 {
        match op {
            Op::Sum => 0,
            Op::Min => u32::MAX,
            Op::Max => 0,
        }
    }
    fn combine(op: Op, a: u32, b: u32) -> u32 {
        match op {
            Op::Sum => a.wrapping_add(b),
            Op::Min => a.min(b),
            Op::Max => a.max(b),
        }
    }
    fn acc_identity(op: Op) -> u32 {
        Self::identity(op)
    }
    fn acc_combine(op: Op, a: u32, x: u32) -> u32 {
        Self::combine(op, a, x)
    }
    fn from_acc(a: u32) -> u32 {
        a
    }
}

impl Element for i32 {
    const ELEM: Elem = Elem::I32;
    type Acc = i32;
    fn identity(op: Op) -> i32 {
        match op {
            Op::Sum => 0,
            Op::Min => i32::MAX,
            Op::Max => i32::MIN,
        }
    }
    fn combine(op: Op, a: i32, b: i32) -> i32 {
        match op {
            Op::Sum => a.wrapping_add(b),
            Op::Min => a.min(b),
            Op::Max => a.max(b),
        }
    }
    fn acc_identity(op: Op) -> i32 {
        Self::identity(op)
    }
    fn acc_combine(op: Op, a: i32, x: i32) -> i32 {
        Self::combine(op, a, x)
    }
    fn from_acc(a: i32) -> i32 {
        a
    }
}

impl Element for f32 {
    const ELEM: Elem = Elem::F32;
    type Acc = f64;
    fn identity(op: Op) -> f32 {
        match op {
            Op::Sum => 0.0,
            Op::Min => f32::INFINITY,
            Op::Max => f32::NEG_INFINITY,
        }
    }
    fn combine(op: Op, a: f32, b: f32) -> f32 {
        match op {
            Op::Sum => a + b,
            Op::Min => a.min(b),
            Op::Max => a.max(b),
        }
    }
    fn acc_identity(op: Op) -> f64 {
        Self::identity(op) as f64
    }
    fn acc_combine(op: Op, a: f64, x: f32) -> f64 {
        match op {
            Op::Sum => a + x as f64,
            Op::Min => a.min(x as f64),
            Op::Max => a.max(x as f64),
        }
    }
    fn from_acc(a: f64) -> f32 {
        a as f32
    }
}

/// The CPU reference: one pass, left to right. Integers wrap; f32 accumulates in f64 and
/// rounds each result once.
pub fn scan_cpu<T: Element>(data: &[T], op: Op, mode: Mode) -> Vec<T> {
    let mut acc = T::acc_identity(op);
    data.iter()
        .map(|&x| {
            let before = acc;
            acc = T::acc_combine(op, acc, x);
            T::from_acc(match mode {
                Mode::Exclusive => before,
                Mode::Inclusive => acc,
            })
        })
        .collect()
}

/// The shape of the work: segments of the input, and the levels of each segment.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Layout {
    /// Elements per tile (one workgroup's share).
    pub tile: usize,
    pub segments: Vec<Segment>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Segment {
    /// Index of the segment's first element in the input.
    pub start: usize,
    /// Lengths of the levels: `levels[0]` is the segment's length, `levels[l + 1]` the number
    /// of tiles of `levels[l]`; the last level fits in one tile.
    pub levels: Vec<usize>,
}

impl Layout {
    /// Cuts `n` elements into segments of `segment_len` (whole tiles; the last may be shorter)
    /// and each segment into levels.
    pub fn new(n: usize, tile: usize, segment_len: usize) -> Layout {
        assert!(tile > 1 && segment_len >= tile && segment_len.is_multiple_of(tile));
        let segments = (0..n)
            .step_by(segment_len)
            .map(|start| {
                let mut levels = vec![segment_len.min(n - start)];
                while *levels.last().expect("one level") > tile {
                    levels.push(levels.last().expect("one level").div_ceil(tile));
                }
                Segment { start, levels }
            })
            .collect();
        Layout { tile, segments }
    }

    /// Compute passes `ScanPlan::record` makes: a reduce below the top, a block scan on every level.
    pub fn passes(&self) -> usize {
        self.segments.iter().map(|s| 2 * s.levels.len() - 1).sum()
    }
}

/// CPU mirror of wgsl/scan_reduce.wgsl: the total of each tile of a level.
pub fn reduce_tiles<T: Element>(op: Op, level: &[T], tile: usize) -> Vec<T> {
    level
        .chunks(tile)
        .map(|t| t.iter().fold(T::identity(op), |a, &x| T::combine(op, a, x)))
        .collect()
}

/// CPU mirror of wgsl/scan_block.wgsl: scans each tile of a level in place, tile `t` starting
/// from `carries[t]`. Returns the last tile's carry combined with its total, which the top
/// level (one tile) writes for the next segment.
pub fn scan_tiles<T: Element>(
    op: Op,
    mode: Mode,
    level: &mut [T],
    carries: &[T],
    tile: usize,
) -> T {
    let mut run = T::identity(op);
    for (t, chunk) in level.chunks_mut(tile).enumerate() {
        run = carries[t];
        for x in chunk {
            let before = run;
            run = T::combine(op, run, *x);
            *x = match mode {
                Mode::Exclusive => before,
                Mode::Inclusive => run,
            };
        }
    }
    run
}

/// The GPU pipeline's stages run on the CPU, in `ScanPlan::record`'s order: reductions up the
/// levels, then block scans down them, segment after segment, each starting from the carry
/// the previous one left in `chain`. Tests hold it against [`scan_cpu`].
pub fn scan_staged_cpu<T: Element>(data: &[T], op: Op, mode: Mode, layout: &Layout) -> Vec<T> {
    let tile = layout.tile;
    let mut out = Vec::with_capacity(data.len());
    let mut chain = vec![T::identity(op)];
    for (s, seg) in layout.segments.iter().enumerate() {
        let mut levels = vec![data[seg.start..seg.start + seg.levels[0]].to_vec()];
        for l in 1..seg.levels.len() {
            let totals = reduce_tiles(op, &levels[l - 1], tile);
            levels.push(totals);
        }
        let top = levels.len() - 1;
        let mode_at = |l: usize| if l == 0 { mode } else { Mode::Exclusive };
        let total = scan_tiles(op, mode_at(top), &mut levels[top], &chain[s..], tile);
        chain.push(total);
        for l in (0..top).rev() {
            let (below, above) = levels.split_at_mut(l + 1);
            scan_tiles(op, mode_at(l), &mut below[l], &above[0], tile);
        }
        out.extend_from_slice(&levels[0]);
    }
    out
}

/// Keep in sync with `Params` in wgsl/scan_reduce.wgsl.
#[repr(C)]
#[derive(Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
struct ReduceParams {
    n: u32,
}

/// Keep in sync with `Params` in wgsl/scan_block.wgsl.
#[repr(C)]
#[derive(Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
struct BlockParams {
    n: u32,
    inclusive: u32,
    carry_base: u32,
    /// `NO_TOTAL` below a segment's top level.
    total_slot: u32,
}

const NO_TOTAL: u32 = u32::MAX;

/// A scan kernel: its stage file, then the operator and in-tile path snippets. The stage file
/// comes first because naga 30 panics when an override (`WG_SIZE`) is declared after a
/// workgroup array sized by it.
macro_rules! scan_shader {
    ($path:literal, $stage:literal) => {
        Shader {
            name: concat!($stage, ".wgsl"),
            source: concat!(
                include_str!(concat!(
                    env!("CARGO_MANIFEST_DIR"),
                    "/wgsl/",
                    $stage,
                    ".wgsl"
                )),
                include_str!(concat!(
                    env!("CARGO_MANIFEST_DIR"),
                    "/wgsl/shared/scan_op.wgsl"
                )),
                include_str!(concat!(
                    env!("CARGO_MANIFEST_DIR"),
                    "/wgsl/shared/",
                    $path,
                    ".wgsl"
                )),
            ),
        }
    };
}

/// Whether the subgroup path can run here with `wg_size` invocations: the adapter has
/// subgroups, and they are full (the largest subgroup size divides `wg_size`), which
/// `lane_position` in wgsl/shared/scan_subgroup.wgsl relies on.
pub fn subgroups_usable(gpu: &Gpu, wg_size: u32) -> bool {
    let [min, max] = gpu.features.subgroup_size;
    gpu.features.subgroups && min > 0 && max <= wg_size && wg_size.is_multiple_of(max)
}

/// Whether `path` runs on subgroup operations on this adapter.
pub fn takes_subgroups(gpu: &Gpu, opts: &ScanOptions) -> Result<bool> {
    let usable = subgroups_usable(gpu, opts.tunables.wg_size);
    Ok(match opts.path {
        Path::Auto => usable,
        Path::Workgroup => false,
        Path::Subgroup if usable => true,
        Path::Subgroup => bail!(
            "the subgroup path needs subgroups whose size divides {}; this adapter has {}",
            opts.tunables.wg_size,
            if gpu.features.subgroups {
                format!("sizes {:?}", gpu.features.subgroup_size)
            } else {
                "none".into()
            }
        ),
    })
}

/// The layout `ScanPlan` uses for `n` elements on this adapter: segments as long as one
/// storage binding and one 2-D dispatch of tiles allow (or `opts.segment_len`), whole tiles.
pub fn layout_for(gpu: &Gpu, n: usize, opts: &ScanOptions) -> Layout {
    let bytes = gpu
        .limits
        .max_storage_buffer_binding_size
        .min(gpu.limits.max_buffer_size);
    let by_binding = (bytes / 4) as usize;
    let tile = opts.tile();
    let by_dispatch = gpu.dispatch_limit as usize * gpu.dispatch_limit as usize * tile;
    let max_len = (by_binding.min(by_dispatch).min(MAX_SEGMENT) / tile * tile).max(tile);
    let segment_len = opts
        .segment_len
        .map_or(max_len, |s| (s / tile * tile).clamp(tile, max_len));
    Layout::new(n, tile, segment_len)
}

/// The most f32 additions any input passes through on its way into any result of a sum on
/// `layout` with the kernels shaped by `tunables`; `subgroup_size` is the adapter's
/// `[min, max]` on the subgroup path, `None` on the workgroup path. Subgroup reductions and scans count as serial (size - 1 additions), the
/// worst any hardware may do. docs/scan.md derives it and the bound it gives:
/// `|gpu[i] - exact[i]| <= D u / (1 - D u) * sum(|x[j]|, j <= i)`, `u = 2^-24`.
pub fn f32_sum_depth(layout: &Layout, tunables: Tunables, subgroup_size: Option<[u32; 2]>) -> u32 {
    let Tunables {
        wg_size,
        vec_per_thread,
    } = tunables;
    let levels = layout.segments.first().map_or(1, |s| s.levels.len()) as u32;
    let segments = layout.segments.len() as u32;
    // One invocation's share: a vec4 left to right (3), then its vec4 totals in a row.
    let in_thread = 3 + vec_per_thread;
    // `reduce`: scan_reduce's depth; `tile`: tile_exclusive's, from a vec4 total to a prefix.
    let (reduce, tile) = match subgroup_size {
        // A tree over wg_size; Blelloch's up-sweep and down-sweep over wg_size * vec_per_thread.
        None => (
            in_thread + wg_size.ilog2(),
            2 * (wg_size * vec_per_thread).ilog2(),
        ),
        Some([min, max]) => {
            let subgroups = wg_size / min;
            let chunks = (vec_per_thread * subgroups).div_ceil(min);
            // Reduce: subgroup sum, then the subgroups' totals in a row. Scan: a subgroup
            // scan of the vec4 totals (inclusive = exclusive + own: up to `max`), a subgroup
            // scan of the subgroup totals with its carry across chunks, and the two combines
            // that join them.
            (in_thread + (max - 1) + subgroups, 2 * max + chunks + 2)
        }
    };
    // In scan_block: the vec4 total (3), the tile prefix, + carry (1), the vec4's running sum
    // (4); the carry itself passes through 5 at every level below the top. Across segments
    // the chain adds one per segment.
    (levels - 1) * (reduce + 5) + tile + 8 + segments
}

enum Stage {
    Reduce,
    Block,
}

struct Pass {
    label: String,
    stage: Stage,
    bind: wgpu::BindGroup,
    workgroups: u32,
}

/// A scan with its buffers on the device, recordable many times (for `bench`). It scans in
/// place: each record scans what the data buffers hold.
pub struct ScanPlan {
    reduce: Kernel,
    block: Kernel,
    layout: Layout,
    /// The input, then the result: one buffer per segment.
    data: Vec<wgpu::Buffer>,
    passes: Vec<Pass>,
    subgroups: bool,
    /// Level totals, the segment chain and the params, held for the bind groups.
    _held: Vec<wgpu::Buffer>,
}

impl ScanPlan {
    /// Builds the pipelines and buffers for `n` elements of `T`.
    pub fn new<T: Element>(gpu: &Gpu, n: usize, opts: &ScanOptions) -> Result<ScanPlan> {
        opts.tunables.check(&gpu.limits)?;
        let wg = opts.tunables.wg_size;
        let subgroups = takes_subgroups(gpu, opts)?;
        let mut constants = vec![
            ("WG_SIZE", wg as f64),
            ("OP", opts.op.code() as f64),
            ("DTYPE", T::ELEM.code() as f64),
        ];
        if subgroups {
            let min = gpu.features.subgroup_size[0];
            constants.push(("SUBGROUP_MIN", min as f64));
        }
        let (reduce_src, block_src) = if subgroups {
            (
                scan_shader!("scan_subgroup", "scan_reduce"),
                scan_shader!("scan_subgroup", "scan_block"),
            )
        } else {
            (
                scan_shader!("scan_workgroup", "scan_reduce"),
                scan_shader!("scan_workgroup", "scan_block"),
            )
        };
        let bytes = opts
            .tunables
            .workgroup_bytes(subgroups.then_some(gpu.features.subgroup_size[0]));
        if bytes > gpu.limits.max_compute_workgroup_storage_size {
            bail!(
                "scan with {} needs {bytes} bytes of workgroup memory; this adapter has {}",
                opts.tunables,
                gpu.limits.max_compute_workgroup_storage_size
            );
        }
        let consts = [("VEC_PER_THREAD", opts.tunables.vec_per_thread)];
        let reduce = gpu.kernel_variant(&reduce_src, &consts, "main", &constants, false)?;
        let block = gpu.kernel_variant(&block_src, &consts, "main", &constants, false)?;

        let layout = layout_for(gpu, n, opts);
        let tile = layout.tile;
        let vec4_bytes = |len: usize| len.div_ceil(4) as u64 * 16;
        let data: Vec<wgpu::Buffer> = layout
            .segments
            .iter()
            .map(|s| gpu.buffer("scan data", Usage::Storage, vec4_bytes(s.levels[0])))
            .collect();
        // Levels 1.. are shared by the segments; the first segment has the longest.
        let level_lens = layout.segments.first().map_or(&[][..], |s| &s.levels[1..]);
        let totals: Vec<wgpu::Buffer> = level_lens
            .iter()
            .map(|&len| gpu.buffer("scan totals", Usage::Storage, vec4_bytes(len)))
            .collect();
        // chain[s] is the carry into segment s; chain[0] stays the identity.
        let identity: u32 = bytemuck::cast(T::identity(opts.op));
        let chain = gpu.upload(
            "scan chain",
            Usage::Storage,
            &vec![identity; layout.segments.len() + 1],
        );

        let mut held = Vec::new();
        let mut passes = Vec::new();
        for (s, seg) in layout.segments.iter().enumerate() {
            let level_buf = |l: usize| if l == 0 { &data[s] } else { &totals[l - 1] };
            let tiles = |l: usize| seg.levels[l].div_ceil(tile) as u32;
            let top = seg.levels.len() - 1;
            for l in 0..top {
                let params = gpu.upload(
                    "scan params",
                    Usage::Uniform,
                    &[ReduceParams {
                        n: seg.levels[l] as u32,
                    }],
                );
                passes.push(Pass {
                    label: format!("scan_reduce.{l}"),
                    stage: Stage::Reduce,
                    bind: gpu.bind(&reduce, &[&params, level_buf(l), level_buf(l + 1)]),
                    workgroups: tiles(l),
                });
                held.push(params);
            }
            for l in (0..=top).rev() {
                let inclusive = l == 0 && opts.mode == Mode::Inclusive;
                let (carries, carry_base, total_slot) = if l == top {
                    (&chain, s as u32, s as u32 + 1)
                } else {
                    (level_buf(l + 1), 0, NO_TOTAL)
                };
                let params = gpu.upload(
                    "scan params",
                    Usage::Uniform,
                    &[BlockParams {
                        n: seg.levels[l] as u32,
                        inclusive: inclusive as u32,
                        carry_base,
                        total_slot,
                    }],
                );
                passes.push(Pass {
                    label: format!("scan_block.{l}"),
                    stage: Stage::Block,
                    bind: gpu.bind(&block, &[&params, carries, level_buf(l)]),
                    workgroups: tiles(l),
                });
                held.push(params);
            }
        }
        held.extend(totals);
        held.push(chain);
        Ok(ScanPlan {
            reduce,
            block,
            layout,
            data,
            passes,
            subgroups,
            _held: held,
        })
    }

    pub fn layout(&self) -> &Layout {
        &self.layout
    }

    /// Whether the in-tile scan uses subgroup operations.
    pub fn uses_subgroups(&self) -> bool {
        self.subgroups
    }

    /// Copies the input into the segments' buffers.
    pub fn upload<T: Element>(&self, gpu: &Gpu, input: &[T]) {
        for (seg, buf) in self.layout.segments.iter().zip(&self.data) {
            let part = &input[seg.start..seg.start + seg.levels[0]];
            gpu.queue.write_buffer(buf, 0, bytemuck::cast_slice(part));
        }
    }

    pub fn record(&self, batch: &mut Batch) {
        for p in &self.passes {
            let kernel = match p.stage {
                Stage::Reduce => &self.reduce,
                Stage::Block => &self.block,
            };
            batch.dispatch(&p.label, kernel, &p.bind, p.workgroups);
        }
    }

    /// The result, after a recorded batch ran.
    pub fn read<T: Element>(&self, gpu: &Gpu) -> Result<Vec<T>> {
        let mut out = Vec::new();
        for (seg, buf) in self.layout.segments.iter().zip(&self.data) {
            out.extend(gpu.read_vec::<T>(buf, seg.levels[0])?);
        }
        Ok(out)
    }
}

/// Scans `data` on the engine.
pub fn scan<T: Element>(engine: &Engine, data: &[T], opts: &ScanOptions) -> Result<Vec<T>> {
    scan_timed(engine, data, opts, &mut Timings::default())
}

/// [`scan`], adding wall time per phase and GPU time per pass to `timings`.
pub fn scan_timed<T: Element>(
    engine: &Engine,
    data: &[T],
    opts: &ScanOptions,
    timings: &mut Timings,
) -> Result<Vec<T>> {
    let gpu = match engine {
        Engine::Cpu => return Ok(timings.phase("compute", || scan_cpu(data, opts.op, opts.mode))),
        Engine::Gpu(_) if data.is_empty() => return Ok(Vec::new()),
        Engine::Gpu(gpu) => gpu,
    };
    let plan = timings.phase("pipeline", || ScanPlan::new::<T>(gpu, data.len(), opts))?;
    timings.phase("upload", || plan.upload(gpu, data));
    gpu.run_timed(timings, plan.layout.passes() as u32, |b| plan.record(b))?;
    timings.phase("download", || plan.read(gpu))
}

/// Segment length of the bench's L2-sized variant: 32 MiB of u32, within the L2 cache of
/// large GPUs (50 MiB on an H100), so that scan_block may re-read a segment from L2 rather
/// than memory (8 bytes per element from memory instead of 12).
const L2_SEGMENT: usize = 1 << 23;

/// `bench scan`: u32 exclusive sums of 2^20 and 2^`max_log2` elements (Gelem/s), on the path
/// the adapter takes by default and, where that is the subgroup path, on the workgroup path
/// too; the larger also in L2-sized segments (up to 2^28, within `MAX_PASSES`).
pub fn bench_cases(engine: &Engine, max_log2: u32) -> Result<Vec<Case<'_>>> {
    let mut sizes = vec![20.min(max_log2), max_log2];
    sizes.dedup();
    let mut cases = Vec::new();
    for log2 in sizes {
        let n = 1usize << log2;
        let data: Vec<u32> = (0..n as u32).map(|i| i % 1000).collect();
        let gpu = match engine {
            Engine::Cpu => {
                cases.push(Case::cpu(
                    "scan",
                    format!("u32 sum 2^{log2}"),
                    Unit::Gelemps,
                    n as f64,
                    move || {
                        std::hint::black_box(scan_cpu(&data, Op::Sum, Mode::Exclusive));
                    },
                ));
                continue;
            }
            Engine::Gpu(gpu) => gpu,
        };
        let mut variants = vec![(Path::Auto, None)];
        if subgroups_usable(gpu, WG_SIZE) {
            variants.push((Path::Workgroup, None));
        }
        if n > L2_SEGMENT {
            variants.push((Path::Auto, Some(L2_SEGMENT)));
        }
        for (path, segment_len) in variants {
            let opts = ScanOptions {
                path,
                segment_len,
                ..ScanOptions::default()
            };
            let plan = ScanPlan::new::<u32>(gpu, n, &opts)?;
            if plan.layout().passes() > MAX_PASSES as usize {
                // Only L2-sized segments of the largest inputs come here.
                continue;
            }
            plan.upload(gpu, &data);
            let mut name = format!(
                "u32 sum 2^{log2} {}",
                if plan.uses_subgroups() {
                    "subgroup"
                } else {
                    "workgroup"
                }
            );
            let segments = plan.layout().segments.len();
            if segments > 1 {
                name += &format!(" {segments} seg");
            }
            cases.push(Case::gpu("scan", name, Unit::Gelemps, n as f64, move |b| {
                plan.record(b)
            }));
        }
    }
    Ok(cases)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layout_levels_shrink_by_tiles_until_one_tile() {
        let l = Layout::new(10, 4, 8);
        assert_eq!(
            l.segments,
            vec![
                Segment {
                    start: 0,
                    levels: vec![8, 2]
                },
                Segment {
                    start: 8,
                    levels: vec![2]
                },
            ]
        );
        assert_eq!(l.passes(), 3 + 1);
        let l = Layout::new(65, 4, 1 << 20);
        assert_eq!(l.segments[0].levels, vec![65, 17, 5, 2]);
        assert!(Layout::new(0, 4, 4).segments.is_empty());
    }

    #[test]
    fn f32_depths_quoted_in_docs() {
        // docs/scan.md, "f32 sums": 2^28 elements in one segment of 4096-element tiles.
        let layout = Layout::new(1 << 28, 4096, 1 << 30);
        assert_eq!(layout.segments[0].levels, vec![1 << 28, 65536, 16]);
        assert_eq!(f32_sum_depth(&layout, Tunables::DEFAULT, None), 69);
        assert_eq!(
            f32_sum_depth(&layout, Tunables::DEFAULT, Some([32, 32])),
            178
        );
        let layout = Layout::new((1 << 20) + 3, 4096, 1 << 30);
        assert_eq!(f32_sum_depth(&layout, Tunables::DEFAULT, None), 49);
        assert_eq!(f32_sum_depth(&layout, Tunables::DEFAULT, Some([8, 8])), 94);
        assert_eq!(
            f32_sum_depth(&layout, Tunables::DEFAULT, Some([32, 32])),
            127
        );
    }

    #[test]
    fn cpu_reference_by_hand() {
        let x = [3u32, 1, 4, 1, 5];
        assert_eq!(scan_cpu(&x, Op::Sum, Mode::Exclusive), [0, 3, 4, 8, 9]);
        assert_eq!(scan_cpu(&x, Op::Sum, Mode::Inclusive), [3, 4, 8, 9, 14]);
        assert_eq!(
            scan_cpu(&x, Op::Min, Mode::Exclusive),
            [u32::MAX, 3, 1, 1, 1]
        );
        assert_eq!(scan_cpu(&x, Op::Max, Mode::Inclusive), [3, 3, 4, 4, 5]);
        assert_eq!(
            scan_cpu(&[u32::MAX, 2], Op::Sum, Mode::Inclusive),
            [u32::MAX, 1]
        );
        assert_eq!(
            scan_cpu(&[i32::MAX, 1, -5], Op::Sum, Mode::Inclusive),
            [i32::MAX, i32::MIN, i32::MIN.wrapping_sub(5)]
        );
        assert_eq!(
            scan_cpu(&[-1i32, 7], Op::Max, Mode::Exclusive),
            [i32::MIN, -1]
        );
        // f32 accumulates in f64: 1e8 + 1 + ... keeps the ones that f32 sums would drop.
        let f = scan_cpu(&[1e8f32, 1.0, 1.0, 1.0, 1.0], Op::Sum, Mode::Inclusive);
        assert_eq!(f[4], 100_000_004.0);
        assert_eq!(
            scan_cpu(&[2.0f32], Op::Min, Mode::Exclusive),
            [f32::INFINITY]
        );
    }

    #[test]
    fn staged_mirror_matches_reference_on_many_layouts() {
        let data: Vec<u32> = (0..200u32).map(|i| i.wrapping_mul(2654435761)).collect();
        let signed: Vec<i32> = (0..200i32).map(|i| (i * 7919) % 211 - 105).collect();
        for n in [0, 1, 3, 4, 5, 15, 16, 17, 63, 64, 65, 200] {
            for (tile, seg) in [(4, 4), (4, 8), (4, 64), (2, 6), (8, 1 << 20)] {
                let layout = Layout::new(n, tile, seg);
                for op in [Op::Sum, Op::Min, Op::Max] {
                    for mode in [Mode::Exclusive, Mode::Inclusive] {
                        assert_eq!(
                            scan_staged_cpu(&data[..n], op, mode, &layout),
                            scan_cpu(&data[..n], op, mode),
                            "u32 n={n} tile={tile} seg={seg} {op:?} {mode:?}"
                        );
                        assert_eq!(
                            scan_staged_cpu(&signed[..n], op, mode, &layout),
                            scan_cpu(&signed[..n], op, mode),
                            "i32 n={n} tile={tile} seg={seg} {op:?} {mode:?}"
                        );
                    }
                }
            }
        }
    }
}
