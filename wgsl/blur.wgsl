// blur: one separable pass of a box (`box_pass`) or gaussian (`gauss_pass`) blur. A pass blurs
// along lines (rows of its input) and writes its result transposed, so the same kernel does
// the horizontal pass and then, on its own output, the vertical one ("flip").
// Integer arithmetic throughout: results are bit-identical to the CPU reference in
// src/ops/blur.rs on every adapter.

// Keep in sync with `PassParams` in src/ops/blur.rs.
struct Params {
    // Lines in this pass and samples per line (the clamp domain).
    lines: u32,
    len: u32,
    // Positions [out_start, out_end) of every line are written.
    out_start: u32,
    out_end: u32,
    // Word offset of line 0 in src, and pixels between lines.
    in_base: u32,
    in_line_stride: u32,
    // Word offset of the first output, and pixels between consecutive positions of a line in
    // dst (lines are adjacent there: the output is transposed).
    out_base: u32,
    out_pos_stride: u32,
    radius: u32,
    // Positions per workgroup: a line is split into segments of this length, each walked by
    // its own workgroup, so that short images still fill the GPU.
    seg_len: u32,
    _pad0: u32,
    _pad1: u32,
}

// The arithmetic is fixed per pipeline, so that every division is by a constant (which
// drivers turn into a multiply and a shift). Each sum S becomes (S * MUL + ADD) / DIV.
override MUL: u32 = 1u;
override ADD: u32 = 0u;
override DIV: u32 = 1u;
// 255 or 65535.
override MAX_VALUE: u32 = 255u;
// Multiply colour by alpha on load (the first pass); divide it out on store (the last).
override PREMULTIPLY: bool = false;
override UNPREMULTIPLY: bool = false;
// 1 (gray+alpha) or 3 (RGBA).
override ALPHA_LANE: u32 = 3u;

@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read> src: array<u32>;
@group(0) @binding(2) var<storage, read_write> dst: array<u32>;
// Gaussian weights w[0..=2r], summing to a power of two, four to a vec4 (uniform arrays
// have 16-byte elements): a uniform, so that an unrolled tap loop reads them as constants.
// 251 vec4s hold 1001 taps, radius 500 (keep in sync with MAX_GAUSS_RADIUS).
@group(0) @binding(3) var<uniform> weights: array<vec4<u32>, 251>;

fn weight(k: u32) -> u32 {
    return weights[k >> 2u][k & 3u];
}

// Pixel formats: 8-bit lanes packed in one word, 16-bit lanes in two words, or one word per
// lane. Between the passes 8-bit images use the 16-bit format (their fixed-point values stay
// below 65536), 16-bit images the one-word format.
const FMT_PACK8: u32 = 0u;
const FMT_PACK16: u32 = 1u;
const FMT_WIDE: u32 = 2u;
override IN_FMT: u32 = 0u;
override OUT_FMT: u32 = 2u;

fn unpack8(w: u32) -> vec4<u32> {
    return vec4<u32>(w & 0xffu, (w >> 8u) & 0xffu, (w >> 16u) & 0xffu, w >> 24u);
}

fn pack8(v: vec4<u32>) -> u32 {
    return v.x | (v.y << 8u) | (v.z << 16u) | (v.w << 24u);
}

fn unpack16(p: vec2<u32>) -> vec4<u32> {
    return vec4<u32>(p.x & 0xffffu, p.x >> 16u, p.y & 0xffffu, p.y >> 16u);
}

fn pack16(v: vec4<u32>) -> vec2<u32> {
    return vec2<u32>(v.x | (v.y << 16u), v.z | (v.w << 16u));
}

fn read_px(word: u32) -> vec4<u32> {
    if IN_FMT == FMT_PACK8 {
        return unpack8(src[word]);
    } else if IN_FMT == FMT_PACK16 {
        return unpack16(vec2<u32>(src[word], src[word + 1u]));
    }
    return vec4<u32>(src[word], src[word + 1u], src[word + 2u], src[word + 3u]);
}

fn words_per_px(fmt: u32) -> u32 {
    return select(select(1u, 2u, fmt == FMT_PACK16), 4u, fmt == FMT_WIDE);
}

// The lines and the segment [start, end) of them that workgroup `wg` handles; start >= end
// for the spare workgroups of a 2-D grid.
struct Work {
    line0: u32,
    start: u32,
    end: u32,
}

fn work(wid: vec3<u32>, nwg: vec3<u32>, rows: u32) -> Work {
    let wg = wid.x + wid.y * nwg.x;
    let groups = (params.lines + rows - 1u) / rows;
    let start = params.out_start + (wg / groups) * params.seg_len;
    return Work((wg % groups) * rows, start, min(params.out_end, start + params.seg_len));
}

// Sample `pos` of `line`, the position clamped to the line (edges repeat).
fn load(line: u32, pos: i32) -> vec4<u32> {
    let p = u32(clamp(pos, 0, i32(params.len) - 1));
    let v = read_px(params.in_base + (line * params.in_line_stride + p) * words_per_px(IN_FMT));
    if !PREMULTIPLY {
        return v;
    }
    // Colour times alpha over the maximum, rounded: (c * a + max / 2) / max.
    let a = v[ALPHA_LANE];
    var out = (v * a + vec4<u32>(MAX_VALUE / 2u)) / MAX_VALUE;
    out[ALPHA_LANE] = a;
    return out;
}

fn finish(s: vec4<u32>) -> vec4<u32> {
    return (s * MUL + vec4<u32>(ADD)) / DIV;
}

fn store(index: u32, value: vec4<u32>) {
    var v = value;
    if UNPREMULTIPLY {
        // Colour back from premultiplied: (c * max + a / 2) / a, at most max; 0 where a = 0.
        let a = v[ALPHA_LANE];
        if a == 0u {
            v = vec4<u32>(0u);
        } else {
            let x = v * MAX_VALUE + vec4<u32>(a / 2u);
            var q: vec4<u32>;
            if MAX_VALUE == 255u {
                // x < 2^24: f32 holds x and a exactly and its quotient is within 1 of x / a;
                // one integer correction each way makes it exact (and cheaper than a u32
                // division by a variable).
                q = vec4<u32>(vec4<f32>(x) / f32(a));
                q = select(q, q - 1u, q * a > x);
                q = select(q, q + 1u, x - q * a >= vec4<u32>(a));
            } else {
                q = x / a;
            }
            v = min(q, vec4<u32>(MAX_VALUE));
            v[ALPHA_LANE] = a;
        }
    }
    let word = params.out_base + index * words_per_px(OUT_FMT);
    if OUT_FMT == FMT_PACK8 {
        dst[word] = pack8(v);
    } else if OUT_FMT == FMT_PACK16 {
        let p = pack16(v);
        dst[word] = p.x;
        dst[word + 1u] = p.y;
    } else {
        dst[word] = v.x;
        dst[word + 1u] = v.y;
        dst[word + 2u] = v.z;
        dst[word + 3u] = v.w;
    }
}

// ---- box: a sliding window carried along each line, chunk by chunk -------------------------
// Set per pipeline from `Tunables` in src/ops/blur.rs (these are its defaults). BOX_PPT sizes
// a function-scope array, so it is a const that the host rewrites per variant.
override BOX_ROWS: u32 = 8u; // lines per workgroup
override BOX_TPL: u32 = 8u; // threads per line
const BOX_PPT: u32 = 4u; // positions per thread per chunk
override BOX_CH: u32 = BOX_TPL * BOX_PPT; // positions per chunk
override BOX_WG: u32 = BOX_ROWS * BOX_TPL;
// The transposition tile, one vec4 of padding a line so that reading it across lines is
// free of bank conflicts.
override BOX_TILE_STRIDE: u32 = BOX_CH + 1u;
override BOX_OUT_LEN: u32 = BOX_ROWS * BOX_TILE_STRIDE;

var<workgroup> sh_tot: array<vec4<u32>, BOX_WG>;
var<workgroup> sh_carry: array<vec4<u32>, BOX_ROWS>;
var<workgroup> sh_out: array<vec4<u32>, BOX_OUT_LEN>;

// Window sums S(x) = S(x-1) + e(x+r) - e(x-r-1) over the clamped line e, in wrapping u32
// arithmetic: the true S always fits (the host checks), so the wrapped result is exact. The
// cost per output is two loads whatever the radius.
@compute @workgroup_size(BOX_WG)
fn box_pass(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let wk = work(wid, nwg, BOX_ROWS);
    let line0 = wk.line0;
    if wk.start >= wk.end {
        return;
    }
    let row = lid / BOX_TPL;
    let t = lid % BOX_TPL;
    let line = line0 + row;
    let in_range = line < params.lines;
    let r = i32(params.radius);
    let len = i32(params.len);

    // S at the segment's start - 1: the in-line part summed by the line's threads, the clamped
    // parts as counts times the edge samples.
    let c = i32(wk.start) - 1;
    let lo = c - r;
    let hi = c + r;
    var part = vec4<u32>(0u);
    if in_range {
        for (var j = max(lo, 0) + i32(t); j <= min(hi, len - 1); j += i32(BOX_TPL)) {
            part += load(line, j);
        }
        if t == 0u {
            let left = max(0, min(hi, -1) - lo + 1);
            let right = max(0, hi - max(lo, len) + 1);
            part += u32(left) * load(line, 0) + u32(right) * load(line, len - 1);
        }
    }
    sh_tot[lid] = part;
    workgroupBarrier();
    if t == 0u {
        var s = vec4<u32>(0u);
        for (var k = 0u; k < BOX_TPL; k++) {
            s += sh_tot[row * BOX_TPL + k];
        }
        sh_carry[row] = s;
    }
    workgroupBarrier();

    for (var c0 = wk.start; c0 < wk.end; c0 += BOX_CH) {
        var local: array<vec4<u32>, BOX_PPT>;
        var run = vec4<u32>(0u);
        for (var i = 0u; i < BOX_PPT; i++) {
            let x = i32(c0 + t * BOX_PPT + i);
            if in_range && x < i32(wk.end) {
                run += load(line, x + r) - load(line, x - r - 1);
            }
            local[i] = run;
        }
        sh_tot[lid] = run;
        workgroupBarrier();
        var excl = sh_carry[row];
        for (var k = 0u; k < t; k++) {
            excl += sh_tot[row * BOX_TPL + k];
        }
        for (var i = 0u; i < BOX_PPT; i++) {
            sh_out[row * BOX_TILE_STRIDE + t * BOX_PPT + i] = finish(excl + local[i]);
        }
        let carry = excl + run;
        workgroupBarrier();
        if t == BOX_TPL - 1u {
            sh_carry[row] = carry;
        }
        // Transposed store: consecutive threads take consecutive lines of one position.
        for (var k = 0u; k < BOX_PPT; k++) {
            let flat = k * BOX_WG + lid;
            let p = flat / BOX_ROWS;
            let rr = flat % BOX_ROWS;
            if c0 + p < wk.end && line0 + rr < params.lines {
                store((c0 + p - params.out_start) * params.out_pos_stride + line0 + rr, sh_out[rr * BOX_TILE_STRIDE + p]);
            }
        }
    }
}

// ---- one line per invocation (CPU adapters) -------------------------------------------------
// Each invocation walks one line's segment alone: no workgroup memory and no barriers, which
// CPU implementations (lavapipe) run slowly, while consecutive invocations still store
// consecutive lines of the transposed output. On GPUs the workgroup kernels above are faster.
override LINE_WG: u32 = 64u;

@compute @workgroup_size(LINE_WG)
fn box_line_pass(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let wk = work(wid, nwg, LINE_WG);
    let line = wk.line0 + lid;
    if wk.start >= wk.end || line >= params.lines {
        return;
    }
    let r = i32(params.radius);
    let len = i32(params.len);
    // S at the segment's start - 1, as in box_pass.
    let c = i32(wk.start) - 1;
    let lo = c - r;
    let hi = c + r;
    var s = vec4<u32>(0u);
    for (var j = max(lo, 0); j <= min(hi, len - 1); j++) {
        s += load(line, j);
    }
    let left = max(0, min(hi, -1) - lo + 1);
    let right = max(0, hi - max(lo, len) + 1);
    s += u32(left) * load(line, 0) + u32(right) * load(line, len - 1);
    for (var x = wk.start; x < wk.end; x++) {
        s += load(line, i32(x) + r) - load(line, i32(x) - r - 1);
        store((x - params.out_start) * params.out_pos_stride + line, finish(s));
    }
}

@compute @workgroup_size(LINE_WG)
fn gauss_line_pass(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let wk = work(wid, nwg, LINE_WG);
    let line = wk.line0 + lid;
    if wk.start >= wk.end || line >= params.lines {
        return;
    }
    let taps = 2u * params.radius + 1u;
    for (var x = wk.start; x < wk.end; x++) {
        let first = i32(x) - i32(params.radius);
        var s = vec4<u32>(0u);
        for (var k = 0u; k < taps; k++) {
            s += weight(k) * load(line, first + i32(k));
        }
        store((x - params.out_start) * params.out_pos_stride + line, finish(s));
    }
}

// ---- gaussian: each chunk plus its halo staged in workgroup memory --------------------------
// Keep in sync with GAUSS_PPT, `Tunables` and the G_* constants set in src/ops/blur.rs.
override GAUSS_TPL: u32 = 32u; // threads per line
const GAUSS_PPT: u32 = 2u;
override GAUSS_CH: u32 = GAUSS_TPL * GAUSS_PPT;
override G_ROWS: u32 = 4u; // lines per workgroup
override G_WG: u32 = 128u; // G_ROWS * GAUSS_TPL
override G_IN_LEN: u32 = 1u; // G_ROWS * gauss_stride(GAUSS_CH + 2r), in staged elements
override G_OUT_LEN: u32 = 260u; // G_ROWS * (GAUSS_CH + 1): padded like the box tile
override G_TAPS: u32 = 1u; // 2r + 1

// Staged samples keep the input's packing, so a tap reads as few workgroup-memory bytes as
// possible (the loads, not the multiplies, bound this kernel): a word per 8-bit pixel, a
// pair of words per 16-bit one, a vec4 for the wide format. Only the array of the pass's
// input format has G_IN_LEN elements.
var<workgroup> sh_in8: array<u32, select(1u, G_IN_LEN, IN_FMT == FMT_PACK8)>;
var<workgroup> sh_in16: array<vec2<u32>, select(1u, G_IN_LEN, IN_FMT == FMT_PACK16)>;
var<workgroup> sh_in32: array<vec4<u32>, select(1u, G_IN_LEN, IN_FMT == FMT_WIDE)>;
var<workgroup> sh_gout: array<vec4<u32>, G_OUT_LEN>;

fn stage(i: u32, v: vec4<u32>) {
    if IN_FMT == FMT_PACK8 {
        // Premultiplied 8-bit samples are still at most 255.
        sh_in8[i] = pack8(v);
    } else if IN_FMT == FMT_PACK16 {
        sh_in16[i] = pack16(v);
    } else {
        sh_in32[i] = v;
    }
}

fn staged(i: u32) -> vec4<u32> {
    if IN_FMT == FMT_PACK8 {
        return unpack8(sh_in8[i]);
    } else if IN_FMT == FMT_PACK16 {
        return unpack16(sh_in16[i]);
    }
    return sh_in32[i];
}

// Staged sample j of a line sits at skew(j), one element of padding every 128 bytes (32
// words, 16 pairs or 8 vec4s): a thread's outputs start 2 samples after its neighbour's, and
// unpadded, lanes half a warp apart would hit the same banks. A line of `width` samples takes
// gauss_stride(width) elements. Keep in sync with `gauss_stride` in src/ops/blur.rs.
fn skew(j: u32) -> u32 {
    if IN_FMT == FMT_PACK8 {
        return j + (j >> 5u);
    } else if IN_FMT == FMT_PACK16 {
        return j + (j >> 4u);
    }
    return j + (j >> 3u);
}

fn gauss_stride(width: u32) -> u32 {
    return skew(width) + 1u;
}

@compute @workgroup_size(G_WG)
fn gauss_pass(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let wk = work(wid, nwg, G_ROWS);
    let line0 = wk.line0;
    if wk.start >= wk.end {
        return;
    }
    let row = lid / GAUSS_TPL;
    let t = lid % GAUSS_TPL;
    // The pipeline's constant, not the uniform's radius: a loop bound the compiler knows
    // lets it unroll the taps and issue their workgroup-memory loads ahead of the sums.
    let taps = G_TAPS;
    let width = GAUSS_CH + taps - 1u;
    let stride = gauss_stride(width);
    for (var c0 = wk.start; c0 < wk.end; c0 += GAUSS_CH) {
        // Stage the chunk and its halo, positions c0 - r .. c0 + CH + r - 1, of every line.
        for (var k = lid; k < G_ROWS * width; k += G_WG) {
            let rr = k / width;
            let j = k % width;
            var v = vec4<u32>(0u);
            if line0 + rr < params.lines {
                v = load(line0 + rr, i32(c0 + j) - i32(params.radius));
            }
            stage(rr * stride + skew(j), v);
        }
        workgroupBarrier();
        // A thread's two adjacent outputs share all but one staged sample: each is loaded
        // once (GAUSS_PPT is 2).
        let rb = row * stride;
        let p0 = t * GAUSS_PPT;
        var s0 = vec4<u32>(0u);
        var s1 = vec4<u32>(0u);
        var prev = staged(rb + skew(p0));
        for (var k = 0u; k < taps; k++) {
            let next = staged(rb + skew(p0 + k + 1u));
            let w = weight(k);
            s0 += w * prev;
            s1 += w * next;
            prev = next;
        }
        sh_gout[row * (GAUSS_CH + 1u) + t * GAUSS_PPT] = finish(s0);
        sh_gout[row * (GAUSS_CH + 1u) + t * GAUSS_PPT + 1u] = finish(s1);
        workgroupBarrier();
        for (var k = lid; k < G_ROWS * GAUSS_CH; k += G_WG) {
            let p = k / G_ROWS;
            let rr = k % G_ROWS;
            if c0 + p < wk.end && line0 + rr < params.lines {
                store((c0 + p - params.out_start) * params.out_pos_stride + line0 + rr, sh_gout[rr * (GAUSS_CH + 1u) + p]);
            }
        }
    }
}
