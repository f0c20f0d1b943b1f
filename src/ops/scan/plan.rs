//! The GPU passes of a scan: the kernels (stage file, operator and in-tile path), the
//! segments and levels of the input, and the bindings of each pass.

use anyhow::{bail, Result};

use super::{Elem, Element, Layout, Mode, Op, Options, Path, Tunables, MAX_SEGMENT};
use crate::gpu::{Batch, Gpu, Kernel, Usage, Variant};
use crate::shader;
use crate::tune::Tunable;

/// Its WGSL twin is `Params` in wgsl/scan_reduce.wgsl (the shader test checks their fields).
#[repr(C)]
#[derive(Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
struct ReduceParams {
    n: u32,
}

crate::ops::params_layout!(ReduceParams { n });

/// Its WGSL twin is `Params` in wgsl/scan_block.wgsl (the shader test checks their fields).
#[repr(C)]
#[derive(Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
struct BlockParams {
    n: u32,
    inclusive: u32,
    carry_base: u32,
    /// `NO_TOTAL` below a segment's top level.
    total_slot: u32,
}

crate::ops::params_layout!(BlockParams {
    n,
    inclusive,
    carry_base,
    total_slot
});

const NO_TOTAL: u32 = u32::MAX;

/// Its WGSL twin is `Params` in wgsl/scan_lookback.wgsl (the shader test checks their fields).
#[repr(C)]
#[derive(Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
struct LookbackParams {
    n: u32,
    inclusive: u32,
    carry_slot: u32,
    _pad: u32,
}

crate::ops::params_layout!(LookbackParams {
    n,
    inclusive,
    carry_slot
});

/// Whether a scan of `elem` with `op` runs in one pass per segment by decoupled look-back
/// (wgsl/scan_lookback.wgsl): every operator but the f32 sum, which keeps reduce-then-scan
/// because its error bound ([`f32_sum_depth`]) rests on that tree's depth, and a look-back
/// adds one rounding for every tile it walks over.
pub fn single_pass(op: super::Op, elem: super::Elem) -> bool {
    !(op == super::Op::Sum && elem == super::Elem::F32)
}

/// The stage files' variant: the in-tile path in the `scan_tile` slot, on the subgroup path
/// the look-back's walk by a subgroup in the `scan_walk_serial` slot, and VEC_PER_THREAD (it
/// sizes function-scope arrays, so it is a const).
fn variant(path: &str, tile_snippet: &'static str, vpt: u32) -> Variant {
    let v = Variant::consts(format!("{path} vpt{vpt}"), &[("VEC_PER_THREAD", vpt)])
        .slot("scan_tile", tile_snippet);
    if tile_snippet == "scan_subgroup" {
        v.slot("scan_walk_serial", "scan_walk_subgroup")
    } else {
        v
    }
}

/// Every scan kernel and variant, for the shader tests.
pub(super) fn shaders() -> Vec<crate::ops::ShaderCase> {
    use crate::ops::ShaderCase;
    let mut cases = Vec::new();
    for (path, snippet) in [
        ("workgroup", "scan_workgroup"),
        ("subgroup", "scan_subgroup"),
    ] {
        let subgroup_min = (path == "subgroup").then_some(8);
        for vpt in [1, 2, 4, 8] {
            let t = Tunables {
                wg_size: 256,
                vec_per_thread: vpt,
            };
            let constants = overrides(&t, Op::Min, Elem::F32, subgroup_min);
            let v = variant(path, snippet, vpt);
            cases.push(
                ShaderCase::variant::<ReduceParams>(shader!("scan_reduce"), v.clone())
                    .with_overrides(&constants),
            );
            cases.push(
                ShaderCase::variant::<BlockParams>(shader!("scan_block"), v.clone())
                    .with_overrides(&constants),
            );
            cases.push(
                ShaderCase::variant::<LookbackParams>(shader!("scan_lookback"), v)
                    .with_overrides(&constants),
            );
        }
    }
    // The op and element codes the overrides carry, named in scan_op.wgsl; the workgroup
    // path's bank padding, which `Tunables::workgroup_bytes` counts.
    let ops = [Op::Sum, Op::Min, Op::Max];
    let elems = [Elem::U32, Elem::I32, Elem::F32];
    cases
        .into_iter()
        .map(|case| {
            let case = if case.variant.name.starts_with("workgroup") {
                case.with_const("LOG_BANKS", super::tune::LOG_BANKS)
            } else {
                case
            };
            let case = ["OP_SUM", "OP_MIN", "OP_MAX"]
                .into_iter()
                .zip(ops)
                .fold(case, |c, (name, op)| c.with_const(name, op.code()));
            ["DTYPE_U32", "DTYPE_I32", "DTYPE_F32"]
                .into_iter()
                .zip(elems)
                .fold(case, |c, (name, e)| c.with_const(name, e.code()))
        })
        .collect()
}

/// The stage kernels' overridable constants: the workgroup size, the in-tile scan's words of
/// workgroup memory (`Tunables::workgroup_bytes`, the one place their count is worked out),
/// the op and element type, and on the subgroup path the adapter's smallest subgroup size.
fn overrides(
    t: &Tunables,
    op: Op,
    elem: Elem,
    subgroup_min: Option<u32>,
) -> Vec<(&'static str, f64)> {
    let mut constants = vec![
        ("WG_SIZE", f64::from(t.wg_size)),
        ("SH_WORDS", (t.workgroup_bytes(subgroup_min) / 4) as f64),
        ("OP", f64::from(op.code())),
        ("DTYPE", f64::from(elem.code())),
    ];
    if let Some(min) = subgroup_min {
        constants.push(("SUBGROUP_MIN", f64::from(min)));
    }
    constants
}

/// Whether the subgroup path can run here with `wg_size` invocations: the adapter has
/// subgroups, and they are full (the largest subgroup size divides `wg_size`), which
/// `lane_position` in wgsl/shared/scan_subgroup.wgsl relies on.
pub fn subgroups_usable(gpu: &Gpu, wg_size: u32) -> bool {
    let [min, max] = gpu.features.subgroup_size;
    gpu.features.subgroups && min > 0 && max <= wg_size && wg_size.is_multiple_of(max)
}

/// Whether `path` runs on subgroup operations on this adapter.
pub fn takes_subgroups(gpu: &Gpu, opts: &Options) -> Result<bool> {
    let usable = subgroups_usable(gpu, opts.tunables().wg_size);
    Ok(match opts.path {
        Path::Auto => usable,
        Path::Workgroup => false,
        Path::Subgroup if usable => true,
        Path::Subgroup => bail!(
            "the subgroup path needs subgroups whose size divides {}; this adapter has {}",
            opts.tunables().wg_size,
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
pub fn layout_for(gpu: &Gpu, n: usize, opts: &Options) -> Layout {
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
    Lookback,
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
    kernels: Kernels,
    /// The look-back's ticket and tile flags (zeroed before each pass), and its fault flag
    /// (set by a workgroup that gave up waiting; zeroed before each record, read with the
    /// result).
    state: Option<(wgpu::Buffer, wgpu::Buffer)>,
    layout: Layout,
    /// The input, then the result: one buffer per segment.
    data: Vec<wgpu::Buffer>,
    passes: Vec<Pass>,
    subgroups: bool,
    /// Level totals, the segment chain and the params, held for the bind groups.
    _held: Vec<wgpu::Buffer>,
}

/// The kernels for `T` and `opts` on `gpu` (look-back, or reduce and block), and whether
/// they take the subgroup path.
fn kernels<T: Element>(gpu: &Gpu, opts: &Options, single: bool) -> Result<(Kernels, bool)> {
    opts.tunables().check(&gpu.limits)?;
    let subgroups = takes_subgroups(gpu, opts)?;
    let subgroup_min = subgroups.then_some(gpu.features.subgroup_size[0]);
    let constants = overrides(&opts.tunables(), opts.op, T::ELEM, subgroup_min);
    // The in-tile path fills the stage files' `scan_tile` slot; VEC_PER_THREAD sizes
    // function-scope arrays, so it is a const the variant sets.
    let (path, tile_snippet) = if subgroups {
        ("subgroup", "scan_subgroup")
    } else {
        ("workgroup", "scan_workgroup")
    };
    let bytes = opts
        .tunables()
        .workgroup_bytes(subgroups.then_some(gpu.features.subgroup_size[0]));
    if bytes > u64::from(gpu.limits.max_compute_workgroup_storage_size) {
        bail!(
            "scan with {} needs {bytes} bytes of workgroup memory; this adapter has {}",
            opts.tunables(),
            gpu.limits.max_compute_workgroup_storage_size
        );
    }
    let variant = variant(path, tile_snippet, opts.tunables().vec_per_thread);
    // Every loop of the scan kernels has a constant or uniform bound (the look-back's walk
    // and wait included): no loop counter keeping the driver from unrolling the loops over
    // an invocation's vec4s, whose arrays would then spill (docs of `Gpu::kernel_unrolled`).
    let build = |file| gpu.kernel_variant(&file, &variant, "main", &constants, true);
    let kernels = if single {
        Kernels::Lookback(build(shader!("scan_lookback"))?)
    } else {
        Kernels::Levels {
            reduce: build(shader!("scan_reduce"))?,
            block: build(shader!("scan_block"))?,
        }
    };
    Ok((kernels, subgroups))
}

/// A plan's kernels: one look-back pass per segment, or reduce-then-scan over levels.
enum Kernels {
    Lookback(Kernel),
    Levels { reduce: Kernel, block: Kernel },
}

/// The data buffer of each segment, the level totals the segments share, and the chain of
/// carries between segments.
struct Buffers<'a> {
    data: &'a [wgpu::Buffer],
    totals: &'a [wgpu::Buffer],
    chain: &'a wgpu::Buffer,
}

impl Buffers<'_> {
    /// One look-back pass per segment, sharing `state` (zeroed before each); their params
    /// buffers go to `held`.
    fn lookback_passes(
        &self,
        gpu: &Gpu,
        layout: &Layout,
        mode: Mode,
        (kernel, state, fault): (&Kernel, &wgpu::Buffer, &wgpu::Buffer),
        held: &mut Vec<wgpu::Buffer>,
    ) -> Vec<Pass> {
        let mut passes = Vec::new();
        for (s, seg) in layout.segments.iter().enumerate() {
            let params = gpu.upload(
                "scan params",
                Usage::Uniform,
                &[LookbackParams {
                    n: seg.levels[0] as u32,
                    inclusive: (mode == Mode::Inclusive) as u32,
                    carry_slot: s as u32,
                    _pad: 0,
                }],
            );
            passes.push(Pass {
                label: "scan_lookback".into(),
                stage: Stage::Lookback,
                bind: gpu.bind(kernel, &[&params, self.chain, &self.data[s], state, fault]),
                workgroups: seg.levels[0].div_ceil(layout.tile) as u32,
            });
            held.push(params);
        }
        passes
    }

    /// Every pass, in order: per segment, reductions up the levels, then block scans down
    /// them. Their params buffers go to `held`.
    fn passes(
        &self,
        gpu: &Gpu,
        layout: &Layout,
        mode: Mode,
        [reduce, block]: [&Kernel; 2],
        held: &mut Vec<wgpu::Buffer>,
    ) -> Vec<Pass> {
        let tile = layout.tile;
        let mut passes = Vec::new();
        for (s, seg) in layout.segments.iter().enumerate() {
            let level_buf = |l: usize| {
                if l == 0 {
                    &self.data[s]
                } else {
                    &self.totals[l - 1]
                }
            };
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
                    bind: gpu.bind(reduce, &[&params, level_buf(l), level_buf(l + 1)]),
                    workgroups: tiles(l),
                });
                held.push(params);
            }
            for l in (0..=top).rev() {
                let inclusive = l == 0 && mode == Mode::Inclusive;
                let (carries, carry_base, total_slot) = if l == top {
                    (self.chain, s as u32, s as u32 + 1)
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
                    bind: gpu.bind(block, &[&params, carries, level_buf(l)]),
                    workgroups: tiles(l),
                });
                held.push(params);
            }
        }
        passes
    }
}

impl ScanPlan {
    /// Builds the pipelines and buffers for `n` elements of `T`: one look-back pass per
    /// segment where [`single_pass`] says so, else reduce-then-scan.
    pub fn new<T: Element>(gpu: &Gpu, n: usize, opts: &Options) -> Result<ScanPlan> {
        ScanPlan::build::<T>(gpu, n, opts, single_pass(opts.op, T::ELEM))
    }

    /// Like [`ScanPlan::new`], always reduce-then-scan: where a look-back gave up
    /// ([`ScanPlan::faulted`]).
    pub fn new_levels<T: Element>(gpu: &Gpu, n: usize, opts: &Options) -> Result<ScanPlan> {
        ScanPlan::build::<T>(gpu, n, opts, false)
    }

    fn build<T: Element>(gpu: &Gpu, n: usize, opts: &Options, single: bool) -> Result<ScanPlan> {
        let (kernels, subgroups) = kernels::<T>(gpu, opts, single)?;
        let layout = layout_for(gpu, n, opts);
        let vec4_bytes = |len: usize| len.div_ceil(4) as u64 * 16;
        let data: Vec<wgpu::Buffer> = layout
            .segments
            .iter()
            .map(|s| gpu.buffer("scan data", Usage::Storage, vec4_bytes(s.levels[0])))
            .collect();
        // chain[s] is the carry into segment s; chain[0] stays the identity.
        let identity: u32 = bytemuck::cast(T::identity(opts.op));
        let chain = gpu.upload(
            "scan chain",
            Usage::Storage,
            &vec![identity; layout.segments.len() + 1],
        );
        let mut held = Vec::new();
        let (passes, state) = match &kernels {
            Kernels::Lookback(kernel) => {
                // A ticket, then two words a tile of the longest (the first) segment.
                let tiles = layout
                    .segments
                    .first()
                    .map_or(0, |s| s.levels[0].div_ceil(layout.tile));
                let state = gpu.buffer("scan state", Usage::Storage, 4 * (1 + 2 * tiles as u64));
                let fault = gpu.buffer("scan fault", Usage::Storage, 4);
                let bufs = Buffers {
                    data: &data,
                    totals: &[],
                    chain: &chain,
                };
                let passes = bufs.lookback_passes(
                    gpu,
                    &layout,
                    opts.mode,
                    (kernel, &state, &fault),
                    &mut held,
                );
                (passes, Some((state, fault)))
            }
            Kernels::Levels { reduce, block } => {
                // Levels 1.. are shared by the segments; the first segment has the longest.
                let level_lens = layout.segments.first().map_or(&[][..], |s| &s.levels[1..]);
                let totals: Vec<wgpu::Buffer> = level_lens
                    .iter()
                    .map(|&len| gpu.buffer("scan totals", Usage::Storage, vec4_bytes(len)))
                    .collect();
                let bufs = Buffers {
                    data: &data,
                    totals: &totals,
                    chain: &chain,
                };
                let passes = bufs.passes(gpu, &layout, opts.mode, [reduce, block], &mut held);
                held.extend(totals);
                (passes, None)
            }
        };
        held.push(chain);
        Ok(ScanPlan {
            kernels,
            state,
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

    /// Whether a look-back of the last recorded run gave up waiting for a tile before it
    /// (an adapter that did not keep a started workgroup running, or lavapipe's loop limit):
    /// its result is wrong and is not to be used. Always false for reduce-then-scan.
    pub fn faulted(&self, gpu: &Gpu) -> Result<bool> {
        Ok(match &self.state {
            Some((_, fault)) => gpu.read_vec::<u32>(fault, 1)?[0] != 0,
            None => false,
        })
    }

    /// Whether the plan scans by look-back (one pass a segment).
    pub fn single_pass(&self) -> bool {
        matches!(self.kernels, Kernels::Lookback(_))
    }

    /// Whether the in-tile scan uses subgroup operations.
    pub fn uses_subgroups(&self) -> bool {
        self.subgroups
    }

    /// The one data buffer of a scan that fits one segment (`None` past that): what another
    /// op's passes write before the scan and read after it (the JPEG encoder's offsets).
    pub fn single_buffer(&self) -> Option<&wgpu::Buffer> {
        match &self.data[..] {
            [one] => Some(one),
            _ => None,
        }
    }

    /// Copies the input into the segments' buffers.
    pub fn upload<T: Element>(&self, gpu: &Gpu, input: &[T]) {
        for (seg, buf) in self.layout.segments.iter().zip(&self.data) {
            let part = &input[seg.start..seg.start + seg.levels[0]];
            gpu.write_buffer(buf, 0, bytemuck::cast_slice(part));
        }
    }

    /// Passes in all (see [`Layout::passes`]).
    pub fn passes(&self) -> u64 {
        self.passes.len() as u64
    }

    /// Records every pass.
    pub fn record(&self, batch: &mut Batch) {
        self.record_passes(batch, 0..self.passes());
    }

    /// Records passes `range`, in order.
    pub fn record_passes(&self, batch: &mut Batch, range: std::ops::Range<u64>) {
        for p in &self.passes[range.start as usize..range.end as usize] {
            let kernel = match (&self.kernels, &p.stage) {
                (Kernels::Lookback(k), _) => k,
                (Kernels::Levels { reduce, .. }, Stage::Reduce) => reduce,
                (Kernels::Levels { block, .. }, _) => block,
            };
            if let (Stage::Lookback, Some((state, fault))) = (&p.stage, &self.state) {
                if std::ptr::eq(p, &self.passes[0]) {
                    batch.clear_buffer(fault);
                }
                batch.clear_buffer(state);
            }
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
