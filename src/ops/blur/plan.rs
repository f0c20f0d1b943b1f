//! The GPU passes of a blur: strips of rows that fit one binding, the kernels' constants,
//! and the bindings of each pass, planned once per image size.

use anyhow::{bail, Result};

use super::arith::{arith, gaussian_weights, remainder_fits_word, Arith, Opaque, Premultiply};
use super::pack::{alpha_lane, image_from_bytes};
use super::tune::Tunables;
use super::{Kind, Options};
use crate::gpu::{Batch, Download, Gpu, Kernel, Shader, Upload, Usage, Variant};
use crate::io::image::Image;
use crate::ops::{sample_bytes, ShaderCase};
use crate::shader;
use crate::tune::Tunable;

// The pixel formats, `FMT_*` of wgsl/shared/blur_pass.wgsl, are checked against the shaders'
// by the shader test (`shaders`).
const FMT_PACK8: u32 = 0;
const FMT_PACK16: u32 = 1;
const FMT_WIDE: u32 = 2;
const FMT_HOST: u32 = 3;
const FMT_PACK18: u32 = 4;
const FMT_PACK24: u32 = 5;

/// The format, and its words a pixel, of the intermediate and the states between iterations
/// of the images of `channels` whose lanes there are wider than 16 bits (images with alpha,
/// 16-bit images; below 2^24: `Arith::largest_between`). The box's take 24 bits a lane
/// (`FMT_PACK24`: 12 bytes a pixel, not 16, and a word a channel for fewer than three
/// channels): on an H100 the 4K RGBA8 box ran 1.06x faster (call GS). The
/// gaussian's keep a word a lane (`FMT_WIDE`): its row pass writes 2 lines a position
/// (`gauss_rows_wide`), 24 bytes where a 32-byte sector takes 32, and 24-bit lanes ran it
/// 1.13x slower; at 4 or 8 lines 1.07x and 1.14x slower than a word a lane at 2 (call GT).
fn wide_fmt(kind: Kind, channels: u8) -> (u32, u64) {
    match kind {
        Kind::Box => (FMT_PACK24, u64::from(channels.min(3))),
        Kind::Gaussian { .. } => (FMT_WIDE, 4),
    }
}

/// Whether a pass pair's intermediate in `fmt` holds lanes wider than 16 bits, as a word a
/// lane or 24 bits a lane (`FMT_PACK24`): a pixel of them is a vec4 once read.
fn wide_lanes(fmt: u32) -> bool {
    fmt == FMT_WIDE || fmt == FMT_PACK24
}

/// Outputs per gaussian thread (`GAUSS_PPT` of wgsl/blur_gauss.wgsl, a generated const the
/// host rewrites per variant), for a pass pair whose intermediate is `mid_fmt`. A thread's
/// outputs share their staged samples, one load a tap for all of them: four a thread took
/// the 4K RGB8 gaussian from 0.248 to 0.227 ms on an H100 and the all-opaque RGBA8 one from
/// 0.223 to 0.199, but the RGBA8 one whose alpha varies (a word a channel between the passes,
/// its row pass premultiplying) from 0.353 to 0.386 (call EP), which keeps two.
pub(super) fn gauss_ppt(mid_fmt: u32) -> u32 {
    if wide_lanes(mid_fmt) {
        2
    } else {
        4
    }
}

/// Its WGSL twin is `Params` in wgsl/blur_pack.wgsl (the shader test checks their fields).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, bytemuck::Pod, bytemuck::Zeroable)]
struct PackParams {
    pixels: u32,
    _pad: [u32; 3],
}

crate::ops::params_layout!(PackParams { pixels });

/// Threads per workgroup of wgsl/blur_pack.wgsl: its `PACK_WG` (the shader test checks it).
const PACK_WG: u64 = 64;

/// Groups of quads of pixels a workgroup of wgsl/blur_pack.wgsl converts in turn (PACK_RUN):
/// one on GPUs, a run on CPU adapters (lavapipe pays per workgroup).
fn pack_run(layout: Layout) -> u64 {
    match layout {
        Layout::Workgroup => 1,
        Layout::LinePerInvocation => 64,
    }
}

/// Its WGSL twin is `Params` in wgsl/shared/blur_pass.wgsl (the shader test checks their fields).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, bytemuck::Pod, bytemuck::Zeroable)]
struct PassParams {
    lines: u32,
    len: u32,
    out_start: u32,
    out_end: u32,
    in_base: u32,
    in_line_stride: u32,
    out_base: u32,
    out_pos_stride: u32,
    radius: u32,
    seg_len: u32,
    _pad: [u32; 2],
}

crate::ops::params_layout!(PassParams {
    lines,
    len,
    out_start,
    out_end,
    in_base,
    in_line_stride,
    out_base,
    out_pos_stride,
    radius,
    seg_len
});

/// Positions one workgroup walks along a line (`len` of them to walk, of a line of
/// `line_len`). Lines are split into segments so that a
/// 2160-row image gives the GPU thousands of workgroups, not 68. Each box segment pays
/// min(2r + 1, line_len) loads for its first window sum (spread over the line's threads),
/// and more segments make more workgroups: box segments are 256 positions, or a quarter of
/// that first window where it is longer. On an H100 a quarter of the window (2r + 1, without
/// the cap at the line, which changes only windows longer than the line) beat segments of 4
/// windows, the rule before, at every radius from 40 to 1000 on 4K, 1080p and 1024x1024
/// RGBA8, most on the smaller images (1080p r = 300 2.0x faster, 4K r = 1000 1.29x), and lost
/// 1.7-3.6% on the 4K RGB8 box at r = 40 and the gray8 one at r = 100 (docs/BENCHMARKS.md,
/// calls HA and HB).
/// Segments are whole chunks (`chunk` positions a workgroup does at a time). With one line
/// per invocation (CPU adapters, which have few cores to fill) a segment is as long as
/// LINE_LOOP_BUDGET allows: a whole line, unless it is long or the radius large.
pub(super) fn segment_len(
    kind: Kind,
    layout: Layout,
    radius: u32,
    (len, line_len): (u32, u32),
    chunk: u32,
) -> u32 {
    let taps = 2 * radius + 1;
    let want = match (layout, kind) {
        // A segment's loop iterations stay within LINE_LOOP_BUDGET: the box's first window
        // sum (its taps inside the line, at most `line_len`) and one a position, the
        // gaussian's taps and one a position.
        (Layout::LinePerInvocation, Kind::Box) => {
            let window = taps.min(line_len);
            return LINE_LOOP_BUDGET.saturating_sub(window).clamp(1, len.max(1));
        }
        (Layout::LinePerInvocation, Kind::Gaussian { .. }) => {
            return (LINE_LOOP_BUDGET / (taps + 1)).clamp(1, len.max(1));
        }
        (Layout::Workgroup, Kind::Box) => (taps.min(line_len) / 4).max(256),
        (Layout::Workgroup, Kind::Gaussian { .. }) => 256,
    };
    want.next_multiple_of(chunk.max(64)).min(len.max(1))
}

/// Loop iterations an invocation of the one-line-per-invocation kernels runs at most, its
/// nested loops' together. Mesa's llvmpipe (lavapipe) ends a shader's loops after 65535
/// iterations (gallivm's `LP_MAX_TGSI_LOOP_ITERATIONS`), nested loops counted together as
/// measured here: a gaussian line of 2048 positions at r = 15 (31 taps a position) came out
/// wrong from position 1986 on, where the count passed 2^16. Half of it leaves room for the
/// loops' own bookkeeping. A box whose first window alone (its taps inside the line) would
/// pass it is refused on this layout (`for_layout`): its segments cannot be shorter than one
/// window.
const LINE_LOOP_BUDGET: u32 = 1 << 15;

/// Pixels between consecutive lines of the transposed intermediate (a row pass writes one
/// position of `lines` lines at a time, lines adjacent). From 256 lines on, `lines` rounded
/// up to 64 plus 16: never a multiple of a large power of two, so that a chunk's writes, one
/// stride apart, spread over the memory partitions (unpadded, a 4096x2048 image blurred at
/// half the speed of a 3840x2160 one on the H200).
pub(super) fn mid_stride(lines: u32) -> u32 {
    if lines >= 256 {
        lines.next_multiple_of(64) + 16
    } else {
        lines
    }
}

/// The input rows `s0..s1` of strip `y0..y1`'s row pass: `r` rows of halo on each side,
/// within the image's `h` (the intermediate's lines of that strip).
fn strip_input((y0, y1): (u32, u32), r: u32, h: u32) -> (u32, u32) {
    (y0.saturating_sub(r), (y1 + r).min(h))
}

/// The most lines whose padded stride fits `cap` pixels (the inverse of `mid_stride`).
pub(super) fn max_lines(cap: u64) -> u64 {
    if cap >= 256 + 80 {
        (cap - 16) / 64 * 64
    } else {
        cap.min(255)
    }
}

/// How a pass's work is laid out on the device.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Layout {
    /// Workgroups cooperate through workgroup memory (box_pass, gauss_pass): for GPUs.
    Workgroup,
    /// Each invocation walks one line alone, without workgroup memory or barriers
    /// (box_line_pass, gauss_line_pass): for CPU adapters such as lavapipe.
    LinePerInvocation,
}

impl Layout {
    /// The layout for an adapter: one line per invocation on CPU adapters.
    pub fn for_gpu(gpu: &Gpu) -> Layout {
        if gpu.info.device_type == wgpu::DeviceType::Cpu {
            Layout::LinePerInvocation
        } else {
            Layout::Workgroup
        }
    }
}

/// Lines per workgroup of the one-line-per-invocation kernels (set as their `LINE_WG`).
const LINE_WG: u32 = 64;

/// Gaussian lines per workgroup: as many (`t.gauss_rows`, or `t.gauss_rows_wide` where the
/// column pass stages the wide format, halved down to 1) as fit the workgroup storage (lines
/// staged in format `fmt`, the wider pass's, and the output tile, counted as vec4s, its
/// widest; the weights are a uniform).
fn gauss_rows(radius: u32, storage: u32, t: &Tunables, fmt: u32) -> Option<u32> {
    let ch = t.gauss_chunk(gauss_ppt(fmt));
    let most = match wide_lanes(fmt) {
        true => t.gauss_rows_wide,
        false => t.gauss_rows,
    };
    std::iter::successors(Some(most), |&r| (r > 1).then_some(r / 2)).find(|&rows| {
        let staged = staged_bytes(fmt) * rows * gauss_stride(ch + 2 * radius, fmt);
        staged + 16 * rows * (ch + 1) + UNUSED_ARRAYS <= storage
    })
}

/// Bytes of the one-element arrays wgsl/blur_gauss.wgsl declares in place of the staging,
/// tile and plane arrays a pipeline does not use (at most 52: two of the three staging
/// arrays, two of the three tiles, the planes), which count against the workgroup storage
/// too. (The DOT4 planes take less than the staging `gauss_rows` counts: they occur only
/// where that is two words a sample, and take at most 4 lanes of a byte a sample and 31
/// words of padding a line.)
const UNUSED_ARRAYS: u32 = 64;

/// Bytes of one staged gaussian sample: staging keeps the pass's input packing (`stage` in
/// wgsl/blur_gauss.wgsl).
fn staged_bytes(fmt: u32) -> u32 {
    match fmt {
        FMT_PACK8 => 4,
        FMT_PACK16 | FMT_PACK18 => 8,
        _ => 16,
    }
}

/// log2 of the staged elements between two of padding in workgroup memory: one every 128
/// bytes (`G_SKEW_SHIFT` of wgsl/blur_gauss.wgsl, set from this).
fn skew_shift(fmt: u32) -> u32 {
    (128 / staged_bytes(fmt)).trailing_zeros()
}

/// Elements a staged gaussian line of `width` samples in format `fmt` takes in workgroup
/// memory (`G_STRIDE` of wgsl/blur_gauss.wgsl, set from this): `skew(width) + 1`.
fn gauss_stride(width: u32, fmt: u32) -> u32 {
    width + (width >> skew_shift(fmt)) + 1
}

/// The uniform array of gaussian weights: `WEIGHT_VEC4S` of wgsl/shared/blur_pass.wgsl (the
/// shader test checks they agree), enough for the 2 MAX_GAUSS_RADIUS + 1 taps of the widest.
const WEIGHT_VEC4S: u32 = (2 * super::MAX_GAUSS_RADIUS + 1).div_ceil(4);
pub(super) const WEIGHT_SLOTS: usize = 4 * WEIGHT_VEC4S as usize;

/// Words of a staged plane that one DOT4 thread's 4 outputs read at radius `r` (`D_WORDS` of
/// wgsl/blur_gauss.wgsl): output i's tap k is byte i + k of them.
pub(super) const fn dot4_words(r: u32) -> u32 {
    // Bytes 0 to 2r + 3.
    r.div_ceil(2) + 1
}

/// `DOT4_VEC4S` of wgsl/shared/blur_pass.wgsl (the shader test checks they agree): the
/// weights' bytes of the widest DOT4 pass, after the weights (`weight_slots`).
const DOT4_VEC4S: u32 = (8 * dot4_words(super::MAX_GAUSS_RADIUS)).div_ceil(4);

/// The weights uniform's words: the weights, padded to `WEIGHT_SLOTS`, then their bytes as
/// the DOT4 passes multiply them (`dot4_weight` of wgsl/blur_gauss.wgsl): for each of a
/// thread's outputs i and words j of a plane, the high bytes and the low bytes of the taps
/// k = 4j + b - i that bytes b = 0..3 of word j meet (0 for none). Weights of 2^16 or more
/// (a gaussian whose every weight is its centre's) have no such bytes: their passes do not
/// take DOT4 (`dot4_fits`), and their table is not read.
pub(super) fn weight_slots(weights: &[u32]) -> Vec<u32> {
    let mut slots = weights.to_vec();
    slots.resize(WEIGHT_SLOTS + 4 * DOT4_VEC4S as usize, 0);
    let taps = weights.len() as i64;
    let words = dot4_words((weights.len().max(1) as u32 - 1) / 2) as usize;
    for i in 0..4 {
        for j in 0..words {
            let (mut hi, mut lo) = (0, 0);
            for b in 0..4 {
                let k = (4 * j + b) as i64 - i as i64;
                if (0..taps).contains(&k) {
                    let w = weights[k as usize] & 0xffff;
                    hi |= (w >> 8) << (8 * b);
                    lo |= (w & 0xff) << (8 * b);
                }
            }
            let at = WEIGHT_SLOTS + 2 * (i * words + j);
            slots[at] = hi;
            slots[at + 1] = lo;
        }
    }
    slots
}

/// The staged planes of a DOT4 pass (`D_WORDS`, `D_STRIDE`, `D_LINE` of
/// wgsl/blur_gauss.wgsl).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Dot4Layout {
    /// Words of each plane a thread reads.
    pub words: u32,
    /// Words of a plane: the line's threads' (`tpl`) and the last one's `words` - 1 more.
    pub stride: u32,
    /// Words of a line's `lanes` planes, padded where a line has fewer than 32 threads to
    /// `tpl` words past a multiple of 32, so that the 32 / `tpl` lines a warp reads at once
    /// start on different banks (4-byte banks, 32 of them).
    pub line: u32,
}

pub(super) fn dot4_layout(tpl: u32, r: u32, lanes: u32) -> Dot4Layout {
    let words = dot4_words(r);
    let stride = tpl + words - 1;
    let mut line = lanes * stride;
    if tpl < 32 {
        line += (tpl + 32 - line % 32) % 32;
    }
    Dot4Layout {
        words,
        stride,
        line,
    }
}

/// Whether a pass of `shape` whose staging format is `stage` takes DOT4 (wgsl/blur_gauss.wgsl):
/// its samples are 8-bit.
fn takes_dot4(shape: &Shape, stage: u32) -> bool {
    shape.dot4 && stage == FMT_PACK8
}

/// Whether a gaussian of `params` has weights that fit two bytes (below 2^16) whatever
/// the image (weights total 2^16 or 2^14: `arith`), as DOT4 needs.
fn dot4_fits(params: &Options) -> bool {
    match params.kind {
        Kind::Gaussian { sigma } => gaussian_weights(sigma, params.radius, 16)
            .iter()
            .all(|&w| w < 1 << 16),
        Kind::Box => false,
    }
}

/// A blur planned for one image size and layout on one device: pipelines, buffers, strips and
/// their bindings, and the staging the images travel through. Ready to record (many times,
/// for `bench`) once an image is written, and reused for every image of that size and layout:
/// per image the host copies its bytes in and the result's out, and the GPU does the rest.
/// Its memory does not grow with the iteration count: each strip's bindings are made once
/// and reused by every iteration.
pub struct BlurPlan {
    /// The usual passes: their kernels (the row pass with and without premultiply, the column
    /// pass with and without unpremultiply; only those some iteration uses, two for one) and
    /// each strip's bindings.
    usual: LazyPasses,
    iterations: u32,
    /// What the plan fits: width, height, channels, largest sample value.
    layout: (u32, u32, u8, u32),
    /// The passes from the packed layout to the host's after the last pass (none for four
    /// channels, or where the last pass writes the host's layout).
    conversion: Option<Conversion>,
    /// Where uploads are copied to (the image in the host's layout, or the first image buffer
    /// when that is the same) and downloads copied from.
    upload_dst: wgpu::Buffer,
    download_src: wgpu::Buffer,
    upload: Upload,
    download: Download,
    pub strips: usize,
    /// The all-opaque passes ([`OpaqueArith`]), for plans that have them (8-bit RGBA blurred
    /// once).
    opaque: Option<LazyPasses>,
    /// Whether the image to blur next takes them.
    opaque_now: bool,
    /// Whether the row passes take DOT4 (wgsl/blur_gauss.wgsl): the usual ones, the
    /// all-opaque ones.
    dot4: (bool, bool),
    /// Whether the first row pass reads the host's layout, and the column passes the 16-bit
    /// intermediate, four pixels at a time (wgsl/shared/box_runs_quads.wgsl); whether the
    /// all-opaque column pass does.
    quads: ((bool, bool), bool),
}

/// One strip's two passes: their bind groups by kernel and by which image buffer holds the
/// input (iterations alternate), and their workgroup counts.
struct StripPasses {
    binds: [[Option<wgpu::BindGroup>; 2]; 4],
    rows_workgroups: u32,
    cols_workgroups: u32,
}

/// The kernels of iteration `it` of `iterations`: the first row pass premultiplies, the last
/// column pass divides alpha out.
fn kernels_of(it: u32, iterations: u32) -> (usize, usize) {
    let k1 = if it == 0 { 0 } else { 1 };
    let k2 = if it + 1 == iterations { 2 } else { 3 };
    (k1, k2)
}

/// The box kernel's variant with `ppt` positions per thread (a function-scope array's
/// length, so a const).
fn box_variant(ppt: u32, subgroups: bool) -> Variant {
    let v = Variant::consts(
        format!("ppt{ppt}{}", if subgroups { " subgroup" } else { "" }),
        &[("BOX_PPT", ppt)],
    );
    if subgroups {
        v.slot("box_lines_workgroup", "box_lines_subgroup")
    } else {
        v
    }
}

/// Whether the box kernel's lines fit the adapter's subgroups (`box_lines_subgroup.wgsl`):
/// every subgroup whole lines (its smallest size a multiple of the threads a line) and every
/// workgroup whole subgroups (its size a multiple of the largest).
fn box_subgroups(gpu: &Gpu, t: &Tunables) -> bool {
    let [min, max] = gpu.features.subgroup_size;
    gpu.features.subgroups
        && min >= t.box_tpl
        && min.is_multiple_of(t.box_tpl)
        && (t.box_rows * t.box_tpl).is_multiple_of(max)
}

/// `variant` with the input and output read and written a pixel at a time where the pass's
/// format there is [`FMT_PACK16`] (one 8-byte access, not two 4-byte ones) or [`FMT_WIDE`]
/// (one 16-byte access, not four; every such pixel starts on a vec2 or vec4:
/// wgsl/shared/blur_src_vec2.wgsl and blur_src_vec4.wgsl say why).
///
/// A box pass of four positions a thread (`Shape::quads`) that reads the host's layout, or
/// the 16-bit intermediate bound as vec4s (`Shape::pairs`), takes its loads four pixels at a
/// time (wgsl/shared/box_runs_quads.wgsl).
fn io_variant(shape: &Shape, (fmt_in, fmt_out): (u32, u32)) -> Variant {
    let snippet = |fmt, word, vec2, vec4| match fmt {
        FMT_PACK16 | FMT_PACK18 => Some((word, vec2)),
        FMT_WIDE => Some((word, vec4)),
        _ => None,
    };
    let mut v = shape.variant.clone();
    let load4 = match fmt_in {
        FMT_HOST if shape.quads => Some("box_load4_host8"),
        FMT_PACK16 if shape.quads && shape.pairs => Some("box_load4_pack16"),
        _ => None,
    };
    if let Some(load4) = load4 {
        v = v.slot("box_runs", "box_runs_quads");
        v = v.slot("box_load4", load4);
        if fmt_in == FMT_PACK16 {
            // Before the usual twin, below: the first slot of a name is the one taken.
            v = v.slot("blur_src", "blur_src_vec4");
        }
        v.name += " quads";
    }
    if let Some((slot, twin)) = snippet(fmt_in, "blur_src", "blur_src_vec2", "blur_src_vec4") {
        v = v.slot(slot, twin);
    }
    if let Some((slot, twin)) = snippet(fmt_out, "blur_dst", "blur_dst_vec2", "blur_dst_vec4") {
        v = v.slot(slot, twin);
    }
    v
}

/// Every blur kernel and variant, for the shader tests, with the constants of the last column
/// pass of an 8-bit RGBA radius-5 blur on the WebGPU default limits (the pass that sets
/// every override, the opaque division's too), and an 8-bit RGB blur's two passes.
pub(super) fn shaders() -> Vec<ShaderCase> {
    /// Which pass a case is: the last column pass, or the first row pass (`first`); of RGBA
    /// (the box's 24-bit lanes, a word at a time; the gaussian's word a lane, as vec4s) or of
    /// RGB (`rgb`: the 16-bit one, as vec2s, or as vec4s four pixels at a time: `pairs`; of
    /// 16-bit RGB, `deep`, the wider ones); reading or writing the host's layout (`host`);
    /// the box's sums across a line by subgroup operations (`sg`).
    #[derive(Clone, Copy, Default)]
    struct Pass {
        first: bool,
        rgb: bool,
        host: bool,
        sg: bool,
        pairs: bool,
        deep: bool,
    }
    let t = Tunables::default_for(&wgpu::Limits::default());
    let storage = wgpu::Limits::default().max_compute_workgroup_storage_size;
    let case = |layout, kind, t: &Tunables, p: Pass| {
        let options = Options::new(kind, 5, 1);
        let (alpha_lane, mid) = match (p.rgb, p.deep) {
            (true, false) => (None, FMT_PACK16),
            (true, true) => (None, wide_fmt(kind, 3).0),
            (false, _) => (Some(3), wide_fmt(kind, 4).0),
        };
        let max = if p.deep { 65535 } else { 255 };
        let ar = arith(&options, max, alpha_lane).expect("radius 5 is valid");
        let shape = shape(storage, layout, &options, t, (mid, p.sg))
            .expect("radius 5 fits the default limits");
        let shape = Shape {
            pairs: p.pairs,
            ..shape
        };
        let alpha = (ar.alpha, ar.opaque());
        let image = if p.host { FMT_HOST } else { FMT_PACK8 };
        let (fmts, arith, k) = match p.first {
            true => ((image, mid), ar.first, 0),
            false => ((mid, image), ar.second, 2),
        };
        let channels = if p.rgb { 3 } else { 4 };
        let c = pass_overrides(&shape, alpha, (max, channels), fmts, arith, k);
        let case = pass_case(&shape, fmts, &c);
        match (layout, kind) {
            (Layout::Workgroup, Kind::Gaussian { .. }) => {
                case.with_const("GAUSS_PPT", gauss_ppt(mid))
            }
            _ => case,
        }
    };
    let (wg, line) = (Layout::Workgroup, Layout::LinePerInvocation);
    let gauss = Kind::Gaussian { sigma: 2.0 };
    let last = Pass::default();
    let mut cases: Vec<ShaderCase> = [1, 2, 4, 8]
        .map(|box_ppt| case(wg, Kind::Box, &Tunables { box_ppt, ..t }, last))
        .into();
    // The 16-bit intermediate's (RGB) last pass at each of its positions a thread but the
    // default's (below).
    let rgb_last = Pass { rgb: true, ..last };
    cases.extend([1, 2, 8].map(|box_ppt_narrow| {
        let t = Tunables {
            box_ppt_narrow,
            ..t
        };
        case(wg, Kind::Box, &t, rgb_last)
    }));
    let host_rgb = Pass {
        rgb: true,
        host: true,
        ..last
    };
    for (layout, kind, p) in [
        // The box's line sums with subgroup operations: the RGBA column pass, the RGB row pass.
        (wg, Kind::Box, Pass { sg: true, ..last }),
        (
            wg,
            Kind::Box,
            Pass {
                first: true,
                sg: true,
                ..host_rgb
            },
        ),
        (line, Kind::Box, last),
        (line, gauss, last),
        (wg, gauss, last),
        // The RGBA gaussian's row pass, writing a word a lane (the box's writes 24-bit lanes).
        (
            wg,
            gauss,
            Pass {
                first: true,
                ..last
            },
        ),
        (
            wg,
            Kind::Box,
            Pass {
                first: true,
                ..last
            },
        ),
        (
            line,
            Kind::Box,
            Pass {
                first: true,
                ..host_rgb
            },
        ),
    ] {
        cases.push(case(layout, kind, &t, p));
    }
    for first in [true, false] {
        let rgb = Pass {
            first,
            rgb: true,
            ..last
        };
        cases.push(case(wg, Kind::Box, &t, rgb));
        // The host's layout read by the first row pass, written by the last column pass.
        cases.push(case(wg, Kind::Box, &t, Pass { host: true, ..rgb }));
        cases.push(case(wg, gauss, &t, Pass { host: true, ..rgb }));
        // 16-bit samples in the host's layout.
        let deep = Pass {
            host: true,
            deep: true,
            ..rgb
        };
        cases.push(case(wg, Kind::Box, &t, deep));
        cases.push(case(wg, gauss, &t, deep));
        cases.push(case(line, Kind::Box, &t, deep));
    }
    // The RGB column pass reading the intermediate four pixels at a time (at 4 positions a
    // thread, whatever the default).
    let pairs = Pass {
        rgb: true,
        host: true,
        pairs: true,
        ..last
    };
    let quads = Tunables {
        box_ppt_narrow: 4,
        ..t
    };
    cases.push(case(wg, Kind::Box, &quads, pairs));
    // The all-opaque passes (`OpaqueArith`), of each kind on each layout.
    for kind in [Kind::Box, gauss] {
        let options = Options::new(kind, 5, 1);
        let ar = arith(&options, 255, Some(3)).expect("radius 5 is valid");
        let oa = opaque_arith(&options, &ar, 255, 4).expect("an RGBA8 blur has them");
        for layout in [wg, line] {
            let shape = shape(storage, layout, &options, &quads, (oa.mid_fmt, false))
                .expect("radius 5 fits the default limits");
            // The box's column pass reading the intermediate four pixels at a time.
            let shape = Shape {
                pairs: true,
                ..shape
            };
            for (c, fmts) in opaque_constants(&shape, &ar, oa).iter().zip(oa.fmts()) {
                let case = pass_case(&shape, fmts, c);
                cases.push(match (layout, kind) {
                    (Layout::Workgroup, Kind::Gaussian { .. }) => {
                        case.with_const("GAUSS_PPT", gauss_ppt(oa.mid_fmt))
                    }
                    _ => case,
                });
            }
        }
    }
    cases.push(
        ShaderCase::params::<PackParams>(shader!("blur_pack"))
            .with_const("PACK_WG", u32::try_from(PACK_WG).expect("a workgroup size"))
            .with_overrides(&pack_overrides(4, 2, 1)),
    );
    cases
}

/// The shader test's case of a pass of `shape` with formats `fmts` and constants `c`.
fn pass_case(shape: &Shape, fmts: (u32, u32), c: &[(&'static str, f64)]) -> ShaderCase {
    ShaderCase::variant::<PassParams>(shape.shader, io_variant(shape, fmts))
        .with_const("FMT_PACK8", FMT_PACK8)
        .with_const("FMT_PACK16", FMT_PACK16)
        .with_const("FMT_WIDE", FMT_WIDE)
        .with_const("FMT_HOST", FMT_HOST)
        .with_const("FMT_PACK18", FMT_PACK18)
        .with_const("FMT_PACK24", FMT_PACK24)
        .with_const("WEIGHT_VEC4S", WEIGHT_VEC4S)
        .with_const("DOT4_VEC4S", DOT4_VEC4S)
        .with_overrides(c)
}

/// The pack kernels' overridable constants: the image's channels, bytes a sample (`wpp`,
/// words a packed pixel: 1 for 8-bit, 2 for 16-bit) and groups a workgroup converts.
fn pack_overrides(channels: u8, wpp: u64, run: u64) -> [(&'static str, f64); 3] {
    [
        ("CHANNELS", channels as f64),
        ("BITS", (8 * wpp) as f64),
        ("PACK_RUN", run as f64),
    ]
}

/// The kernels' file and entry point, variant and constants, lines per workgroup and
/// positions per chunk.
#[derive(Clone)]
struct Shape {
    shader: Shader,
    entry: &'static str,
    variant: Variant,
    constants: Vec<(&'static str, f64)>,
    rows_per_wg: u32,
    chunk: u32,
    /// The gaussian's staged lines per workgroup and samples per line, when it stages.
    staging: Option<(u32, u32)>,
    /// Whether its passes of 8-bit samples may take DOT4 (4 outputs a thread, weights below
    /// 2^16).
    dot4: bool,
    /// Whether it is the box's with four positions a thread, whose loads of the host's layout
    /// (or, with `pairs`, of the 16-bit intermediate) may take four pixels at a time
    /// (`io_variant`).
    quads: bool,
    /// Whether its passes that read the 16-bit intermediate of an image without alpha (or
    /// the all-opaque box's) may, with `quads`, bind it as vec4s (wgsl/shared/blur_src_vec4.wgsl)
    /// and take four pixels at a time: every strip's intermediate a whole number of vec4s
    /// (`BlurPlan::for_layout`).
    pairs: bool,
}

/// The kernels' shape for `layout` and `params` with `t`, on an adapter of `storage` bytes
/// of workgroup memory.
fn shape(
    storage: u32,
    layout: Layout,
    params: &Options,
    t: &Tunables,
    (mid_fmt, subgroups): (u32, bool),
) -> Result<Shape> {
    let r = params.radius;
    let line = |shader, entry| Shape {
        shader,
        entry,
        variant: Variant::default(),
        constants: vec![("LINE_WG", LINE_WG as f64)],
        rows_per_wg: LINE_WG,
        chunk: 1,
        staging: None,
        dot4: false,
        quads: false,
        pairs: false,
    };
    Ok(match (layout, params.kind) {
        (Layout::LinePerInvocation, Kind::Box) => line(shader!("blur_box_line"), "box_line_pass"),
        (Layout::LinePerInvocation, Kind::Gaussian { .. }) => {
            line(shader!("blur_gauss_line"), "gauss_line_pass")
        }
        (Layout::Workgroup, Kind::Box) => {
            let wide = wide_lanes(mid_fmt);
            Shape {
                shader: shader!("blur_box"),
                entry: "box_pass",
                variant: box_variant(t.box_ppt_for(wide), subgroups),
                constants: t.box_overrides(wide).map(|(k, v)| (k, v as f64)).into(),
                rows_per_wg: t.box_rows,
                chunk: t.box_chunk(wide),
                staging: None,
                dot4: false,
                quads: t.box_ppt_for(wide) == 4,
                pairs: false,
            }
        }
        (Layout::Workgroup, Kind::Gaussian { .. }) => {
            // The second pass stages the wider format (the intermediate).
            let rows = gauss_rows(r, storage, t, mid_fmt).ok_or_else(|| {
                anyhow::anyhow!(
                    "gaussian radius {r} needs more workgroup storage than this adapter has"
                )
            })?;
            let ppt = gauss_ppt(mid_fmt);
            let ch = t.gauss_chunk(ppt);
            Shape {
                shader: shader!("blur_gauss"),
                entry: "gauss_pass",
                variant: Variant::consts(format!("ppt{ppt}"), &[("GAUSS_PPT", ppt)]),
                constants: vec![
                    ("GAUSS_TPL", t.gauss_tpl as f64),
                    ("G_ROWS", rows as f64),
                    ("G_WG", (rows * t.gauss_tpl) as f64),
                    ("TILE_LEN", (rows * (ch + 1)) as f64),
                    ("G_TAPS", (2 * r + 1) as f64),
                ],
                rows_per_wg: rows,
                chunk: ch,
                staging: Some((rows, ch + 2 * r)),
                dot4: ppt == 4 && dot4_fits(params),
                quads: false,
                pairs: false,
            }
        }
    })
}

/// Strips of output rows: the first pass covers them plus r rows of halo on each side
/// (clamped to the image) and its intermediate (`mid_px_bytes` a pixel) must fit one
/// binding of `budget` bytes, as must each strip of the packed input and output.
fn strips(
    w: u32,
    h: u32,
    r: u32,
    wpp: u64,
    mid_px_bytes: u64,
    budget: u64,
    limit: u64,
) -> Result<Vec<(u32, u32)>> {
    let rows_in_budget =
        max_lines(budget / (w as u64 * mid_px_bytes)).min(budget / (w as u64 * wpp * 4));
    let halo = 2 * r as u64;
    let strip_rows = if rows_in_budget >= h as u64 {
        h as u64
    } else if rows_in_budget > halo {
        rows_in_budget - halo
    } else {
        bail!(
            "a {w}-pixel-wide image with radius {r} does not fit this adapter's {limit}-byte storage binding, even in strips"
        );
    };
    Ok((0..h)
        .step_by(strip_rows as usize)
        .map(|y0| (y0, (y0 as u64 + strip_rows).min(h as u64) as u32))
        .collect())
}

impl BlurPlan {
    /// Plans a blur of `img`'s size and layout and uploads `img`: ready to record.
    pub fn new(gpu: &Gpu, img: &Image, params: &Options) -> Result<BlurPlan> {
        let mut plan = BlurPlan::for_layout(gpu, img, params)?;
        plan.write_samples(gpu, img)?;
        plan.choose_passes(gpu)?;
        let mut batch = gpu.batch(None);
        plan.record_upload(&mut batch);
        batch.submit()?;
        Ok(plan)
    }

    /// Plans a blur of images of `img`'s size and layout; each is then written
    /// ([`BlurPlan::write_samples`], [`BlurPlan::choose_passes`]) and uploaded in a batch
    /// ([`BlurPlan::record_upload`]).
    pub(super) fn for_layout(gpu: &Gpu, img: &Image, params: &Options) -> Result<BlurPlan> {
        let max = img.max_value();
        let alpha = alpha_lane(img.channels);
        let ar = arith(params, max, alpha)?;
        let t = params.gpu.tunables(gpu, img.pixels());
        t.check(&gpu.limits)?;
        let (w, h) = (img.width, img.height);
        let r = params.radius;
        let wpp: u64 = if max > 255 { 2 } else { 1 };
        let in_fmt = if max > 255 { FMT_PACK16 } else { FMT_PACK8 };
        // Between the passes 8-bit images without alpha keep 16-bit fixed point (F <= 8
        // fraction bits on top of 8 integer bits), the others wider lanes (`wide_fmt`; all-
        // opaque 8-bit RGBA images take `opaque`'s passes, below). Between iterations, images
        // without alpha are packed as they came, images with alpha keep the wider lanes.
        debug_assert!(ar.largest_between(max) < 1 << 24);
        let wide = wide_fmt(params.kind, img.channels);
        let (mid_fmt, mid_px_bytes) = if max > 255 || alpha.is_some() {
            (wide.0, 4 * wide.1)
        } else {
            (FMT_PACK16, 8)
        };
        let wide_states = alpha.is_some() && params.iterations > 1;
        let (state_fmt, state_wpp) = if wide_states { wide } else { (in_fmt, wpp) };
        let limit = params
            .gpu
            .max_binding
            .unwrap_or(u64::MAX)
            .min(gpu.limits.max_storage_buffer_binding_size);
        let align = gpu.limits.min_storage_buffer_offset_alignment as u64;
        let image_bytes = w as u64 * h as u64 * wpp * 4;
        let state_bytes = w as u64 * h as u64 * state_wpp * 4;
        if state_bytes > gpu.limits.max_buffer_size {
            bail!(
                "a {w}x{h} image needs a {state_bytes}-byte buffer; this adapter's largest is {}",
                gpu.limits.max_buffer_size
            );
        }
        let budget = limit.saturating_sub(align) / 4 * 4;
        let strips = strips(w, h, r, state_wpp, mid_px_bytes, budget, limit)?;
        let layout = params.gpu.layout.unwrap_or_else(|| Layout::for_gpu(gpu));
        let window = (2 * r + 1).min(w.max(h));
        if layout == Layout::LinePerInvocation
            && params.kind == Kind::Box
            && window > LINE_LOOP_BUDGET
        {
            bail!(
                "a box window of {window} pixels is more than this CPU adapter's one-line kernels sum (at most {LINE_LOOP_BUDGET} pixels); the native CPU engine takes it (--backend cpu)"
            );
        }
        let storage = gpu.limits.max_compute_workgroup_storage_size;
        let subgroups = params.gpu.subgroups && box_subgroups(gpu, &t);
        // The quads' pixels are not premultiplied: images without alpha only.
        let plain = alpha.is_none();
        let mut shape = shape(storage, layout, params, &t, (mid_fmt, subgroups))?;
        // And 8-bit: `box_load4_host8` reads bytes.
        shape.quads &= plain && wpp == 1;
        // Every strip's intermediate a whole number of vec4s (an even number of pixels).
        let even = strips.iter().all(|&strip| {
            let (s0, s1) = strip_input(strip, r, h);
            (w as u64 * mid_stride(s1 - s0) as u64).is_multiple_of(2)
        });
        // The box's column passes of images read in the host's layout take lines of their
        // own (`Tunables::box_rows_host`); every other pass, the row passes' shape.
        let columns = match Direct::reads(img) && matches!(params.kind, Kind::Box) {
            true => {
                let t = t.host_columns();
                let subgroups = params.gpu.subgroups && box_subgroups(gpu, &t);
                self::shape(storage, layout, params, &t, (mid_fmt, subgroups))?
            }
            false => shape.clone(),
        };
        let columns = Shape {
            quads: columns.quads && plain,
            pairs: plain && mid_fmt == FMT_PACK16 && even,
            ..columns
        };
        let direct = Direct::new(img, layout, &columns, strips.len());
        let quads = (shape.quads && direct.read, columns.quads && columns.pairs);
        let used = used_binds(params.iterations);
        let formats = (in_fmt, mid_fmt, state_fmt);
        // Of one iteration, `a` holds the packed input (none where the row pass reads the
        // host's layout: fewer than four channels) and `b` the packed result (none where the
        // column pass writes the host's layout); more iterations take both between them.
        let single = params.iterations == 1;
        let bytes_of = |unused: bool| if unused { 4 } else { image_bytes };
        let a = gpu.buffer(
            "blur image a",
            Usage::Storage,
            bytes_of(single && direct.read),
        );
        let b = gpu.buffer(
            "blur image b",
            Usage::Storage,
            bytes_of(single && direct.write),
        );
        let bytes = img.pixels() * img.channels as usize * (wpp as usize);
        let raw = (img.channels < 4)
            .then(|| gpu.buffer("blur image, host layout", Usage::Storage, bytes as u64));
        // Images with alpha blurred more than once: the iterations' wide fixed point.
        let wide = wide_states
            .then(|| [0, 1].map(|_| gpu.buffer("blur state", Usage::Storage, state_bytes)));
        let buffers = OwnedBuffers {
            images: [a.clone(), b.clone()],
            states: wide,
            host: raw
                .as_ref()
                .map(|raw| (raw.clone(), w as u64 * img.channels as u64 * wpp, direct)),
            mid_px_bytes,
            row_bytes: w as u64 * wpp * 4,
            state_row_bytes: w as u64 * state_wpp * 4,
            align,
        };
        let geometry = Geometry {
            w,
            h,
            r,
            kind: params.kind,
            layout,
            iterations: params.iterations,
        };
        let mid = gpu.buffer(
            "blur intermediate",
            Usage::Storage,
            mid_bytes(&geometry, &strips, mid_px_bytes),
        );
        // The first row pass's staging: the image's samples, premultiplied where it has alpha
        // (the all-opaque row pass's are plain 8-bit ones).
        let mut dot4 = (
            takes_dot4(&shape, stage_fmt(in_fmt, ar.alpha.is_some(), max)),
            false,
        );
        let mut opaque_quads = false;
        let opaque = match opaque_arith(params, &ar, max, img.channels) {
            Some(oa) => {
                let shape = self::shape(storage, layout, params, &t, (oa.mid_fmt, subgroups))?;
                // Its column pass expands what it loads (`OPAQUE_COLUMNS`), `load4` too.
                let shape = Shape {
                    pairs: even && oa.mid_fmt == FMT_PACK16,
                    ..shape
                };
                opaque_quads = shape.quads && shape.pairs;
                dot4.1 = takes_dot4(&shape, stage_fmt(oa.fmts()[0].0, false, 255));
                let constants = opaque_constants(&shape, &ar, oa);
                let buffers = OwnedBuffers {
                    images: [a.clone(), b.clone()],
                    states: None,
                    host: None,
                    mid_px_bytes: 8,
                    row_bytes: w as u64 * wpp * 4,
                    state_row_bytes: w as u64 * wpp * 4,
                    align,
                };
                let (strips, mid, weights) = (strips.clone(), mid.clone(), ar.weights.clone());
                Some(LazyPasses::new(move |gpu| {
                    let mut kernels: [Option<Kernel>; 4] = Default::default();
                    for (i, k) in [0, 2].into_iter().enumerate() {
                        let variant = io_variant(&shape, oa.fmts()[i]);
                        kernels[k] = Some(gpu.kernel_variant(
                            &shape.shader,
                            &variant,
                            shape.entry,
                            &constants[i],
                            true,
                        )?);
                    }
                    let passes = buffers.view().strip_passes(
                        gpu,
                        (&geometry, (&shape, &shape)),
                        (&kernels, &strips),
                        &weights,
                        &mid,
                    );
                    Ok((kernels, passes))
                }))
            }
            None => None,
        };
        let usual = {
            let image = (max, img.channels);
            let strips = strips.clone();
            LazyPasses::new(move |gpu| {
                let shapes = (&shape, &columns);
                let kernels = kernels(gpu, shapes, &ar, formats, image, &used, direct)?;
                let passes = buffers.view().strip_passes(
                    gpu,
                    (&geometry, shapes),
                    (&kernels, &strips),
                    &ar.weights,
                    &mid,
                );
                Ok((kernels, passes))
            })
        };
        let result = if params.iterations.is_multiple_of(2) {
            a.clone()
        } else {
            b
        };
        let host = HostLayout {
            pixels: img.pixels() as u64,
            channels: img.channels,
            wpp,
            align,
            budget,
            run: pack_run(layout),
        };
        let mut upload = gpu.upload_buffer("blur upload", bytes);
        upload.check_opaque_rgba8(opaque.is_some());
        let (upload_dst, download_src, conversion) = match raw {
            None => (a, result, None),
            Some(raw) => {
                let conversion = host.conversion(gpu, &raw, &result, direct)?;
                (raw.clone(), raw, conversion)
            }
        };
        Ok(BlurPlan {
            usual,
            iterations: params.iterations,
            layout: (w, h, img.channels, max),
            conversion,
            upload_dst,
            download_src,
            upload,
            download: gpu.download_buffer("blur read-back", bytes),
            strips: strips.len(),
            opaque,
            opaque_now: false,
            dot4,
            quads: (quads, opaque_quads),
        })
    }

    /// Whether images like `img` blur with this plan.
    pub(super) fn fits(&self, img: &Image) -> bool {
        self.layout == (img.width, img.height, img.channels, img.max_value())
    }

    /// Copies `img`'s samples into the upload buffer, for the next [`BlurPlan::record_upload`];
    /// [`BlurPlan::choose_passes`] must follow before the passes are recorded.
    pub(super) fn write_samples(&mut self, gpu: &Gpu, img: &Image) -> Result<()> {
        debug_assert!(self.fits(img));
        self.upload.write(gpu, &sample_bytes(&img.samples))
    }

    /// Chooses the passes for the image written last (all-opaque or usual, by what its copy
    /// found), building them the first time: the pipelines' time, where they are built.
    pub(super) fn choose_passes(&mut self, gpu: &Gpu) -> Result<()> {
        self.next_opaque(gpu, self.upload.opaque_rgba8())
    }

    /// Says whether the image to blur next is all opaque (`opaque_rgba8`, from the
    /// [`Upload`] it was written to): where the plan has all-opaque passes, it then takes
    /// them, else the usual ones; either set is built the first time an image takes it.
    fn next_opaque(&mut self, gpu: &Gpu, opaque_rgba8: bool) -> Result<()> {
        self.opaque_now = false;
        match self.opaque.as_mut().filter(|_| opaque_rgba8) {
            Some(o) => o.build(gpu)?,
            None => return self.usual.build(gpu),
        }
        self.opaque_now = true;
        Ok(())
    }

    /// Whether the image written last takes the all-opaque passes (an all-opaque 8-bit RGBA
    /// image blurred once: docs/blur.md).
    pub fn opaque_passes(&self) -> bool {
        self.opaque_now
    }

    /// Whether the image to blur next has its row passes' sums taken by 4 x 8-bit dot
    /// products (`DOT4` of wgsl/blur_gauss.wgsl).
    pub fn rows_by_dot_products(&self) -> bool {
        if self.opaque_now {
            self.dot4.1
        } else {
            self.dot4.0
        }
    }

    /// Whether the first row pass reads the host's layout, and whether the column passes
    /// read the 16-bit intermediate, four pixels at a time where a thread's windows lie
    /// inside the line (wgsl/shared/box_runs_quads.wgsl).
    pub fn reads_quads(&self) -> (bool, bool) {
        match self.opaque_now {
            true => (false, self.quads.1),
            false => self.quads.0,
        }
    }

    /// Records copying the written image to the device: before the passes.
    pub(super) fn record_upload(&self, batch: &mut Batch) {
        batch.copy(
            self.upload.buffer(),
            &self.upload_dst,
            self.upload.buffer().size(),
        );
    }

    /// The bytes an upload of an image this plan fits holds.
    pub(super) fn upload_bytes(&self) -> usize {
        self.upload.bytes()
    }

    /// Records copying an image's samples, in the host's layout, from `src` at `at` (a
    /// multiple of 4, with the padding to a whole word after them) to the device: before the
    /// passes, in place of [`BlurPlan::write_samples`] and [`BlurPlan::record_upload`].
    /// `opaque_rgba8` says whether they are all-opaque 8-bit RGBA pixels
    /// ([`Upload::opaque_rgba8`]); false where unknown.
    pub(super) fn record_upload_from(
        &mut self,
        gpu: &Gpu,
        batch: &mut Batch,
        (src, at): (&wgpu::Buffer, u64),
        opaque_rgba8: bool,
    ) -> Result<()> {
        self.next_opaque(gpu, opaque_rgba8)?;
        let size = self.upload.buffer().size();
        batch.copy_at(src, at, &self.upload_dst, 0, size);
        Ok(())
    }

    /// Records copying the result, in the host's layout and padded to a whole word, to `dst`
    /// at `at` (a multiple of 4): after the passes, in place of
    /// [`BlurPlan::record_download`].
    pub(super) fn record_download_to(&self, batch: &mut Batch, dst: &wgpu::Buffer, at: u64) {
        let size = self.download.buffer().size();
        batch.copy_at(&self.download_src, 0, dst, at, size);
    }

    /// Records copying the result to the read-back buffer: after the passes.
    pub(super) fn record_download(&self, batch: &mut Batch) {
        batch.copy(
            &self.download_src,
            self.download.buffer(),
            self.download.buffer().size(),
        );
    }

    /// Passes in all: per iteration and strip the row pass then the column pass, and those
    /// back to the host's layout.
    pub fn passes(&self) -> u64 {
        self.conversion_passes().len() as u64 + self.blur_passes()
    }

    fn conversion_passes(&self) -> &[PackPass] {
        match &self.conversion {
            Some(c) => &c.pack,
            None => &[],
        }
    }

    fn blur_passes(&self) -> u64 {
        2 * self.iterations as u64 * self.strips as u64
    }

    /// Records every pass.
    pub fn record(&self, batch: &mut Batch) {
        self.record_passes(batch, 0..self.passes());
    }

    /// Records passes `range` of [`BlurPlan::passes`], in order.
    pub fn record_passes(&self, batch: &mut Batch, range: std::ops::Range<u64>) {
        let blur = self.blur_passes();
        let per_iteration = 2 * self.strips as u64;
        for i in range {
            if let Some(c) = self.conversion.as_ref().filter(|_| i >= blur) {
                let p = &c.pack[(i - blur) as usize];
                batch.dispatch("blur pack", &c.kernel, &p.bind, p.workgroups);
                continue;
            }
            let it = (i / per_iteration) as u32;
            let j = (i % per_iteration) as usize;
            let (passes, labels) = match &self.opaque {
                Some(o) if self.opaque_now => (o, ["blur rows (opaque)", "blur columns (opaque)"]),
                _ => (&self.usual, ["blur rows", "blur columns"]),
            };
            let (kernels, strip_passes) = passes.built();
            let strip = &strip_passes[j / 2];
            let (k1, k2) = kernels_of(it, self.iterations);
            let parity = (it % 2) as usize;
            let (label, k, workgroups) = if j.is_multiple_of(2) {
                (labels[0], k1, strip.rows_workgroups)
            } else {
                (labels[1], k2, strip.cols_workgroups)
            };
            let bind = strip.binds[k][parity]
                .as_ref()
                .expect("every bind group an iteration uses is made");
            let kernel = kernels[k]
                .as_ref()
                .expect("every kernel an iteration uses is built");
            batch.dispatch(label, kernel, bind, workgroups);
        }
    }

    /// The result on the device, in the host's layout (what `read` copies out), once a batch
    /// without the download runs.
    pub(super) fn result_on_device(&self) -> wgpu::Buffer {
        self.download_src.clone()
    }

    /// Asks for the upload staging to be mapped again for the next image, once the batch
    /// that copies from it was submitted.
    pub(super) fn remap_upload(&mut self) {
        self.upload.remap();
    }

    /// The result, after a batch with [`BlurPlan::record_download`] ran, as an image like
    /// `like`: one copy out of the read-back memory. The upload buffer is mapped again
    /// meanwhile, for the next image.
    pub(super) fn read(&mut self, gpu: &Gpu, like: &Image) -> Result<Image> {
        self.upload.remap();
        self.download
            .read(gpu, |bytes| image_from_bytes(bytes, like))
    }
}

/// The passes from the packed layout to the host's (wgsl/blur_pack.wgsl), for images of
/// fewer than four channels whose last pass does not write the host's layout, by chunks of
/// the image.
struct Conversion {
    kernel: Kernel,
    pack: Vec<PackPass>,
}

/// One chunk's bindings and workgroups.
struct PackPass {
    bind: wgpu::BindGroup,
    workgroups: u32,
}

/// An image in the host's layout, and the bindings its conversion passes may use.
struct HostLayout {
    pixels: u64,
    channels: u8,
    /// Words per packed pixel, which is also bytes per sample.
    wpp: u64,
    align: u64,
    budget: u64,
    /// Groups a workgroup (`pack_run`).
    run: u64,
}

impl HostLayout {
    /// The `pack` passes from `packed` to `raw`, in chunks of pixels whose bindings fit the
    /// budget; none where the last pass writes `raw` itself (`direct`). A chunk is a multiple
    /// of the binding alignment (and of 4) pixels long, so that every chunk starts on it in
    /// both layouts, and on a word in the host's.
    fn conversion(
        &self,
        gpu: &Gpu,
        raw: &wgpu::Buffer,
        packed: &wgpu::Buffer,
        direct: Direct,
    ) -> Result<Option<Conversion>> {
        if direct.write {
            return Ok(None);
        }
        let constants = pack_overrides(self.channels, self.wpp, self.run);
        let kernel = gpu.kernel(&shader!("blur_pack"), "pack", &constants)?;
        let step = self.align.max(4);
        let packed_px = 4 * self.wpp;
        let raw_px = self.channels as u64 * self.wpp;
        let chunk = self.budget / packed_px / step * step;
        if chunk == 0 {
            bail!(
                "a {}-byte binding holds no chunk of {step} pixels to convert",
                self.budget
            );
        }
        let psize = std::mem::size_of::<PackParams>() as u64;
        let mut pack = Vec::new();
        for p0 in (0..self.pixels).step_by(chunk as usize) {
            let n = chunk.min(self.pixels - p0);
            let params = PackParams {
                pixels: n as u32,
                _pad: [0; 3],
            };
            let u = gpu.upload("blur pack params", Usage::Uniform, &[params]);
            let raw_at = p0 * raw_px;
            let host = (raw, raw_at, (n * raw_px).next_multiple_of(4));
            let at = p0 * packed_px;
            // Groups of PACK_WG quads of pixels, a workgroup each (for `pack`, their words of
            // the host's layout).
            let workgroups = n.div_ceil(4 * PACK_WG * self.run) as u32;
            let bind = gpu.bind_ranges(
                &kernel,
                &[(&u, 0, psize), (packed, at, n * packed_px), host],
            );
            pack.push(PackPass { bind, workgroups });
        }
        Ok(Some(Conversion { kernel, pack }))
    }
}

/// Where the passes read and write the host's layout themselves (`FMT_HOST` of
/// wgsl/shared/blur_pass.wgsl), so that no conversion pass runs before or after them: images
/// of fewer than four channels, 8- or 16-bit. The first row pass reads it with every kernel; the
/// last column pass writes it with the workgroup kernels, whole words at a time, where each
/// workgroup's lines and each row of the image start and end on a word, and where the image
/// is one strip: the host's buffer is both the input and the output, and a later strip's row
/// pass reads rows an earlier strip's column pass has written.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Direct {
    read: bool,
    write: bool,
}

impl Direct {
    /// Whether the first row pass reads `img` in the host's layout.
    fn reads(img: &Image) -> bool {
        img.channels < 4
    }

    /// Where the passes read and write `img`'s layout, with the column passes of `shape`.
    fn new(img: &Image, layout: Layout, shape: &Shape, strips: usize) -> Direct {
        let c = u64::from(img.channels) * if img.max_value() > 255 { 2 } else { 1 };
        let read = Direct::reads(img);
        let words = |pixels: u32| (u64::from(pixels) * c).is_multiple_of(4);
        let write = read
            && strips == 1
            && layout == Layout::Workgroup
            && words(img.width)
            && words(shape.rows_per_wg);
        Direct { read, write }
    }
}

/// The overridable constants of pipeline `k` of [`kernels`] (0 premultiplies, 2 divides
/// alpha out) of `shape`: its formats in and out, its arithmetic (multiply, add, divide),
/// the image's maxval, channels (the lanes its pixels use: `LANES`) and alpha.
fn pass_overrides(
    shape: &Shape,
    (alpha, opaque): (Option<Premultiply>, Option<Opaque>),
    (max, channels): (u32, u8),
    (fmt_in, fmt_out): (u32, u32),
    (mul, add, div): (u32, u32, u32),
    k: usize,
) -> Vec<(&'static str, f64)> {
    let (premultiply, unpremultiply) = (k == 0 && alpha.is_some(), k == 2 && alpha.is_some());
    let mut c = shape.constants.clone();
    if let Some((rows, width)) = shape.staging {
        let stage = stage_fmt(fmt_in, premultiply, max);
        // The gaussian's intermediate keeps a word a lane (`wide_fmt`): no staging of
        // 24-bit lanes.
        debug_assert_ne!(stage, FMT_PACK24);
        let dot4 = takes_dot4(shape, stage);
        if dot4 {
            let r = (width - shape.chunk) / 2;
            let d = dot4_layout(shape.chunk / 4, r, u32::from(channels));
            c.extend([
                ("DOT4", 1.0),
                ("D_WORDS", d.words as f64),
                ("D_STRIDE", d.stride as f64),
                ("D_LINE", d.line as f64),
                ("D_LEN", (rows * d.line) as f64),
                ("G_IN_LEN", 1.0),
            ]);
        } else {
            c.push(("G_IN_LEN", (rows * gauss_stride(width, stage)) as f64));
        }
        c.push(("G_STRIDE", gauss_stride(width, stage) as f64));
        c.push(("G_SKEW_SHIFT", skew_shift(stage) as f64));
        c.push(("STAGE_FMT", stage as f64));
    }
    c.extend([
        ("IN_FMT", fmt_in as f64),
        ("OUT_FMT", fmt_out as f64),
        ("MUL", mul as f64),
        ("ADD", add as f64),
        ("DIV", div as f64),
        ("MAX_VALUE", max as f64),
        ("PREMULTIPLY", premultiply as u32 as f64),
        ("UNPREMULTIPLY", unpremultiply as u32 as f64),
        ("ALPHA_LANE", alpha.map_or(3, |p| p.lane) as f64),
        ("PM_DIV", alpha.map_or(1, |p| p.div) as f64),
        ("ALPHA_SCALE", alpha.map_or(1, |p| p.scale) as f64),
        ("LANES", channels as f64),
    ]);
    if fmt_in == FMT_HOST || fmt_out == FMT_HOST {
        c.push(("HOST_CHANNELS", channels as f64));
        c.push(("HOST_BYTES", if max > 255 { 2.0 } else { 1.0 }));
    }
    if let Some(o) = opaque.filter(|_| unpremultiply) {
        c.extend([
            ("OPAQUE_SA", o.sa as f64),
            ("OPAQUE_D", o.d as f64),
            ("OPAQUE_T", o.t as f64),
            // The largest alpha sum the pass sees (`Arith::opaque`) bounds the colour's
            // remainder (`remainder_fits_word` in arith.rs).
            ("DIV_32", remainder_fits_word(o.sa, o.max) as u32 as f64),
        ]);
    }
    c
}

/// The four pipelines of a blur: the row pass with and without premultiplying, the column
/// pass with and without dividing alpha out; each only where `used` says an iteration runs
/// it (building a pipeline is much of a small job's time). A pass's formats and arithmetic are constants,
/// so every division in it is by a constant. Every loop in the blur kernels is bounded by a
/// constant or a uniform, so drivers may unroll them. `state_fmt` is the format between
/// iterations; the first row pass reads and the last column pass writes the host's layout
/// where `direct` says.
fn kernels(
    gpu: &Gpu,
    (rows, columns): (&Shape, &Shape),
    ar: &Arith,
    (in_fmt, mid_fmt, state_fmt): (u32, u32, u32),
    image: (u32, u8),
    used: &[[bool; 2]; 4],
    direct: Direct,
) -> Result<[Option<Kernel>; 4]> {
    let kernel = |fmt_in: u32, fmt_out: u32, arith: (u32, u32, u32), k: usize| {
        let shape = if k < 2 { rows } else { columns };
        let alpha = (ar.alpha, ar.opaque());
        let c = pass_overrides(shape, alpha, image, (fmt_in, fmt_out), arith, k);
        let variant = io_variant(shape, (fmt_in, fmt_out));
        gpu.kernel_variant(&shape.shader, &variant, shape.entry, &c, true)
    };
    // The first iteration's row pass premultiplies, the last one's column pass divides out;
    // kernels 1 and 3 are the row pass of a later iteration and the column pass of an
    // earlier one (the second and the first of two).
    let host = |fmt, on| if on { FMT_HOST } else { fmt };
    let passes = [
        (host(in_fmt, direct.read), mid_fmt, ar.pass(0, 1, false)),
        (state_fmt, mid_fmt, ar.pass(1, 2, false)),
        (mid_fmt, host(in_fmt, direct.write), ar.pass(0, 1, true)),
        (mid_fmt, state_fmt, ar.pass(0, 2, true)),
    ];
    let mut out: [Option<Kernel>; 4] = Default::default();
    for (k, (fmt_in, fmt_out, arith)) in passes.into_iter().enumerate() {
        if used[k].contains(&true) {
            out[k] = Some(kernel(fmt_in, fmt_out, arith, k)?);
        }
    }
    Ok(out)
}

/// The format the gaussian stages a pass's input in: the input's (the host's layout as packed
/// pixels of its samples, up to `max`), but 8-bit pixels premultiplied on load take 16 bits a
/// lane (`STAGE_FMT` in wgsl/blur_gauss.wgsl).
fn stage_fmt(fmt_in: u32, premultiply: bool, max: u32) -> u32 {
    match fmt_in {
        FMT_HOST if max > 255 => FMT_PACK16,
        FMT_PACK8 | FMT_HOST if premultiply => FMT_PACK16,
        FMT_HOST => FMT_PACK8,
        fmt => fmt,
    }
}

/// Which (kernel, parity) bind groups some iteration of `iterations` uses: iterations 0, 1
/// and 2 and the last cover every pair (the middle ones repeat 1 and 2).
fn used_binds(iterations: u32) -> [[bool; 2]; 4] {
    let mut used = [[false; 2]; 4];
    for it in [0, 1, 2, iterations - 1]
        .into_iter()
        .filter(|&i| i < iterations)
    {
        let (k1, k2) = kernels_of(it, iterations);
        used[k1][(it % 2) as usize] = true;
        used[k2][(it % 2) as usize] = true;
    }
    used
}

/// What the passes' bindings depend on, besides the buffers.
#[derive(Clone, Copy)]
struct Geometry {
    w: u32,
    h: u32,
    r: u32,
    kind: Kind,
    layout: Layout,
    iterations: u32,
}

impl Geometry {
    /// The row and column passes' parameters of the strip of output rows `y0..y1`, its
    /// input and output word offsets, and the intermediate's line stride.
    fn pass_params(
        &self,
        (rows, columns): (&Shape, &Shape),
        (y0, y1): (u32, u32),
        (ibase, obase): (u32, u32),
        stride: u32,
    ) -> [PassParams; 2] {
        let (w, r) = (self.w, self.r);
        let (s0, s1) = strip_input((y0, y1), r, self.h);
        let p1 = PassParams {
            lines: s1 - s0,
            len: w,
            out_start: 0,
            out_end: w,
            in_base: ibase,
            in_line_stride: w,
            out_base: 0,
            out_pos_stride: stride,
            radius: r,
            seg_len: segment_len(self.kind, self.layout, r, (w, w), rows.chunk),
            _pad: [0; 2],
        };
        // The second pass's lines are the image's columns, read from the transposed
        // intermediate; it writes rows y0..y1 (positions y0 - s0 .. y1 - s0).
        let p2 = PassParams {
            lines: w,
            len: s1 - s0,
            out_start: y0 - s0,
            out_end: y1 - s0,
            in_base: 0,
            in_line_stride: stride,
            out_base: obase,
            out_pos_stride: w,
            seg_len: segment_len(self.kind, self.layout, r, (y1 - y0, s1 - s0), columns.chunk),
            ..p1
        };
        [p1, p2]
    }
}

/// The bytes of an intermediate holding the largest of `strips`' row-pass outputs, `px_bytes` a
/// pixel.
fn mid_bytes(g: &Geometry, strips: &[(u32, u32)], px_bytes: u64) -> u64 {
    let max_strip_in = strips
        .iter()
        .map(|&strip| {
            let (s0, s1) = strip_input(strip, g.r, g.h);
            mid_stride(s1 - s0)
        })
        .max()
        .unwrap_or(0) as u64;
    g.w as u64 * max_strip_in * px_bytes
}

/// The constants of the all-opaque row and column kernels of `shape` (`OPAQUE_ROWS`,
/// `OPAQUE_COLUMNS` in wgsl/shared/blur_pass.wgsl) for the arithmetic `oa`.
fn opaque_constants(shape: &Shape, ar: &Arith, oa: OpaqueArith) -> [Vec<(&'static str, f64)>; 2] {
    // Three live lanes: these passes drop the alpha lane (`LANES`).
    let image = (255, 3);
    let [rows_fmts, columns_fmts] = oa.fmts();
    let mut rows = pass_overrides(shape, (None, None), image, rows_fmts, oa.rows, 0);
    rows.push(("OPAQUE_ROWS", 1.0));
    let mut columns = pass_overrides(
        shape,
        (ar.alpha, ar.opaque()),
        image,
        columns_fmts,
        ar.second,
        2,
    );
    let (mul, add, div) = oa.expand;
    columns.extend([
        ("OPAQUE_COLUMNS", 1.0),
        ("EXPAND_MUL", mul as f64),
        ("EXPAND_ADD", add as f64),
        ("EXPAND_DIV", div as f64),
    ]);
    [rows, columns]
}

/// The arithmetic of the all-opaque passes ([`LazyPasses`]). Where every alpha is the maximum
/// M, the premultiplying first row pass (`ar.first` = (mul, add, div)) writes
/// (S * M * mul + add) / div for a row whose plain colour sum is S (premultiplied colour lanes
/// are c * M where div = 1). The box keeps S itself (at most M (2r + 1) < 2^16 for r <= 128,
/// in the 16-bit intermediate) and its column pass makes that value on load (`expand`); the
/// gaussian's row pass makes it (`rows`), below 2^18 for its weights, three of which fit two
/// words (`FMT_PACK18`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) struct OpaqueArith {
    /// The row pass's (multiply, add, divide) of its sums of plain samples.
    pub rows: (u32, u32, u32),
    /// What the column pass does to each value it loads (`EXPAND_*`).
    pub expand: (u32, u32, u32),
    /// The intermediate's format.
    pub mid_fmt: u32,
}

impl OpaqueArith {
    /// The formats in and out of the row pass, and of the column pass.
    fn fmts(&self) -> [(u32, u32); 2] {
        [(FMT_PACK8, self.mid_fmt), (self.mid_fmt, FMT_PACK8)]
    }
}

/// Whether a blur with `params` of images like `img` has all-opaque passes ([`OpaqueArith`]),
/// which an all-opaque image of them takes.
pub(super) fn has_opaque_passes(params: &Options, img: &Image) -> bool {
    let (max, channels) = (img.max_value(), img.channels);
    arith(params, max, alpha_lane(channels))
        .is_ok_and(|ar| opaque_arith(params, &ar, max, channels).is_some())
}

/// [`OpaqueArith`] for `params` on an image of maxval `max` and `channels` channels: None
/// where the blur has no all-opaque passes. They take 8-bit RGBA (div = 1) blurred once (its
/// last pass is the first's column pass), with an all-opaque alpha sum that divides by
/// constants ([`Arith::opaque`]; the column pass divides by nothing else), and every value
/// within a word on the way and within its intermediate's bits.
pub(super) fn opaque_arith(
    params: &Options,
    ar: &Arith,
    max: u32,
    channels: u8,
) -> Option<OpaqueArith> {
    let p = ar.alpha?;
    ar.opaque()?;
    if params.iterations != 1 || max != 255 || channels != 4 || p.div != 1 {
        return None;
    }
    let (mul, add, div) = ar.first;
    // The largest plain row sum: M times the window size or the weights' total.
    let s_max = max as u64 * ar.keep.2 as u64;
    let m = mul as u64 * max as u64;
    let top = s_max * m + add as u64;
    if top > u32::MAX as u64 {
        return None;
    }
    match params.kind {
        Kind::Box => (s_max <= 0xffff).then_some(OpaqueArith {
            rows: (1, 0, 1),
            expand: (m as u32, add, div),
            mid_fmt: FMT_PACK16,
        }),
        Kind::Gaussian { .. } => (top / (div as u64) < 1 << 18).then_some(OpaqueArith {
            rows: (m as u32, add, div),
            expand: (1, 0, 1),
            mid_fmt: FMT_PACK18,
        }),
    }
}

/// A kernel for each of the row and column passes some iteration takes, and each strip's
/// bindings.
type Passes = ([Option<Kernel>; 4], Vec<StripPasses>);

/// What builds a [`LazyPasses`].
type BuildPasses = Box<dyn FnOnce(&Gpu) -> Result<Passes> + Send>;

/// A set of passes, built the first time an image takes it (building pipelines is much of a
/// small job's time): the usual ones, or an all-opaque image's. The all-opaque ones
/// ([`OpaqueArith`]) sum the colour samples, the alpha lane dropped, into an intermediate of
/// 8 bytes a pixel, not the box's 12 or the gaussian's 16, and their column pass divides by the all-opaque alpha sum by
/// constants, as the usual last pass does where a window is all opaque: the usual passes'
/// bytes, for less of the intermediate's traffic and less arithmetic.
struct LazyPasses {
    build: Option<BuildPasses>,
    built: Option<Passes>,
}

impl LazyPasses {
    fn new(build: impl FnOnce(&Gpu) -> Result<Passes> + Send + 'static) -> LazyPasses {
        LazyPasses {
            build: Some(Box::new(build)),
            built: None,
        }
    }

    /// Builds the passes unless they are: an error leaves them unbuilt for good (the plan is
    /// dropped after one).
    fn build(&mut self, gpu: &Gpu) -> Result<()> {
        if self.built.is_none() {
            let build = self
                .build
                .take()
                .ok_or_else(|| anyhow::anyhow!("building the blur's passes failed before"))?;
            self.built = Some(build(gpu)?);
        }
        Ok(())
    }

    /// The built passes: an image written or its upload recorded chose and built them.
    fn built(&self) -> (&[Option<Kernel>; 4], &[StripPasses]) {
        let (kernels, passes) = self
            .built
            .as_ref()
            .expect("passes are recorded after an image's write or upload built them");
        (kernels, passes)
    }
}

/// The buffers of [`Buffers`], held by a set of passes until it builds its bindings.
struct OwnedBuffers {
    images: [wgpu::Buffer; 2],
    /// The wide buffers between iterations, where the images' are not.
    states: Option<[wgpu::Buffer; 2]>,
    host: Option<(wgpu::Buffer, u64, Direct)>,
    mid_px_bytes: u64,
    row_bytes: u64,
    state_row_bytes: u64,
    align: u64,
}

impl OwnedBuffers {
    fn view(&self) -> Buffers<'_> {
        let [a, b] = &self.images;
        Buffers {
            images: [a, b],
            states: self.states.as_ref().map_or([a, b], |[s0, s1]| [s0, s1]),
            host: self.host.as_ref().map(|(raw, bytes, d)| (raw, *bytes, *d)),
            mid_px_bytes: self.mid_px_bytes,
            row_bytes: self.row_bytes,
            state_row_bytes: self.state_row_bytes,
            align: self.align,
        }
    }
}

/// The image buffers (input of even iterations first), the buffers between iterations (the
/// image buffers themselves, or wide ones for images with alpha) and how rows lie in them.
struct Buffers<'a> {
    images: [&'a wgpu::Buffer; 2],
    states: [&'a wgpu::Buffer; 2],
    /// The image in the host's layout, its row bytes, and which passes read or write it.
    host: Option<(&'a wgpu::Buffer, u64, Direct)>,
    mid_px_bytes: u64,
    row_bytes: u64,
    state_row_bytes: u64,
    align: u64,
}

impl Buffers<'_> {
    /// A binding of `rows` rows of `row_bytes` from row `y0`, its offset aligned down and its
    /// size rounded up to a word: (offset, size, byte offset of row y0 inside it).
    fn rows_binding(&self, y0: u32, rows: u32, row_bytes: u64) -> (u64, u64, u32) {
        let start = y0 as u64 * row_bytes;
        let offset = start / self.align * self.align;
        let size = (start - offset + rows as u64 * row_bytes)
            .max(4)
            .next_multiple_of(4);
        (offset, size, (start - offset) as u32)
    }

    /// Each strip's parameters and bind groups (only those some iteration uses); the bind
    /// groups keep the intermediate and weights buffers alive.
    fn strip_passes(
        &self,
        gpu: &Gpu,
        (g, shapes): (&Geometry, (&Shape, &Shape)),
        (kernels, strips): (&[Option<Kernel>; 4], &[(u32, u32)]),
        weights: &[u32],
        mid: &wgpu::Buffer,
    ) -> Vec<StripPasses> {
        let (w, h, r) = (g.w, g.h, g.r);
        let slots = weight_slots(weights);
        let weight_buf = gpu.upload("blur weights", Usage::Uniform, &slots);
        let used = used_binds(g.iterations);
        let passes = strips
            .iter()
            .map(|&(y0, y1)| {
                let (s0, s1) = strip_input((y0, y1), r, h);
                let stride = mid_stride(s1 - s0);
                let mid_size = w as u64 * stride as u64 * self.mid_px_bytes;
                let psize = std::mem::size_of::<PassParams>() as u64;
                let wsize = 4 * slots.len() as u64;
                let bind = |k: usize, parity: usize| {
                    if !used[k][parity] {
                        return None;
                    }
                    // Row passes (0, 1) read the image, column passes (2, 3) write it. Kernels
                    // 0 and 2 read and write the image buffers, 1 and 3 the states; but the
                    // first row pass reads, and the last column pass writes, the host's layout
                    // where `Direct` says.
                    let row_pass = k < 2;
                    let host = self.host.filter(|&(_, _, d)| match k {
                        0 => d.read,
                        2 => d.write,
                        _ => false,
                    });
                    let (bufs, row_bytes) = match host {
                        Some((raw, row_bytes, _)) => ([raw, raw], row_bytes),
                        None if k.is_multiple_of(2) => (self.images, self.row_bytes),
                        None => (self.states, self.state_row_bytes),
                    };
                    let (buf, (off, size, base)) = match row_pass {
                        true => (bufs[parity], self.rows_binding(s0, s1 - s0, row_bytes)),
                        false => (bufs[1 - parity], self.rows_binding(y0, y1 - y0, row_bytes)),
                    };
                    // Offsets in words, but in bytes where a pass reads the host's layout.
                    let base = if row_pass && host.is_some() {
                        base
                    } else {
                        base / 4
                    };
                    let [p1, p2] = g.pass_params(shapes, (y0, y1), (base, base), stride);
                    let u = gpu.upload(
                        "blur params",
                        Usage::Uniform,
                        &[if row_pass { p1 } else { p2 }],
                    );
                    let mut entries: Vec<(&wgpu::Buffer, u64, u64)> = if row_pass {
                        vec![(&u, 0, psize), (buf, off, size), (mid, 0, mid_size)]
                    } else {
                        vec![(&u, 0, psize), (mid, 0, mid_size), (buf, off, size)]
                    };
                    if !weights.is_empty() {
                        entries.push((&weight_buf, 0, wsize));
                    }
                    let kernel = kernels[k]
                        .as_ref()
                        .expect("every kernel an iteration uses is built");
                    Some(gpu.bind_ranges(kernel, &entries))
                };
                let [p1, p2] = g.pass_params(shapes, (y0, y1), (0, 0), stride);
                StripPasses {
                    binds: std::array::from_fn(|k| std::array::from_fn(|p| bind(k, p))),
                    rows_workgroups: (s1 - s0).div_ceil(shapes.0.rows_per_wg)
                        * w.div_ceil(p1.seg_len),
                    cols_workgroups: w.div_ceil(shapes.1.rows_per_wg)
                        * (y1 - y0).div_ceil(p2.seg_len),
                }
            })
            .collect();
        passes
    }
}
