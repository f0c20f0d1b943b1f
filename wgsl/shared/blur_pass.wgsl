// blur_pass: what every blur kernel shares: the pass's parameters and bindings, the pixel
// formats, the arithmetic of a pass (set per pipeline), and loading, finishing and storing a
// sample. A pass blurs along lines (rows of its input) and writes its result transposed, so
// the same kernel does the horizontal pass and then, on its own output, the vertical one.
// Integer arithmetic throughout: results are bit-identical to the CPU reference in
// src/ops/blur/reference.rs on every adapter.

// Its Rust twin is `PassParams` in src/ops/blur/plan.rs (the shader test checks their fields).
struct Params {
    // Lines in this pass and samples per line (the clamp domain).
    lines: u32,
    len: u32,
    // Positions [out_start, out_end) of every line are written.
    out_start: u32,
    out_end: u32,
    // Word offset of line 0 in src (byte offset where the pass reads FMT_HOST), and pixels
    // between lines.
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
// Weight colour by alpha on load (the first pass); divide it out of the sums (the last).
override PREMULTIPLY: bool = false;
override UNPREMULTIPLY: bool = false;
// 1 (gray+alpha) or 3 (RGBA).
override ALPHA_LANE: u32 = 3u;
// Premultiplied lanes: colour (c * a + PM_DIV / 2) / PM_DIV, alpha a * ALPHA_SCALE, with
// PM_DIV * ALPHA_SCALE = MAX_VALUE: c * a and 255 a for 8-bit images, as they were rounded
// into 16 bits and a for 16-bit ones. The CPU twin is `Premultiply` in src/ops/blur/arith.rs
// (the GPU == CPU tests check they agree).
override PM_DIV: u32 = 1u;
override ALPHA_SCALE: u32 = 255u;
// The last pass's alpha sum of a window whose every alpha is the maximum (0: none), and
// the constants that divide colour by it: `Opaque` in src/ops/blur/arith.rs.
override OPAQUE_SA: u32 = 0u;
override OPAQUE_D: u32 = 1u;
override OPAQUE_T: u32 = 0u;
// The passes of an all-opaque 8-bit RGBA image (`OpaqueArith` in src/ops/blur/plan.rs): the
// same bytes as the passes above, from an intermediate of two words a pixel (FMT_PACK16 for
// the box, FMT_PACK18 for the gaussian) instead of three (FMT_PACK24) or four. Their row pass
// (OPAQUE_ROWS) sums the colour samples as they are and drops the alpha lane. Their column
// pass (OPAQUE_COLUMNS) turns each value on load by (S * EXPAND_MUL + EXPAND_ADD) /
// EXPAND_DIV (the box's row sums into what the premultiplying row pass writes for such a row;
// the gaussian's row pass wrote that already), sums those, and divides them by the all-opaque
// alpha sum (by constants, as `finish` does where a window is all opaque); its alpha out is
// MAX_VALUE, what the usual passes give.
override OPAQUE_ROWS: bool = false;
override OPAQUE_COLUMNS: bool = false;
override EXPAND_MUL: u32 = 1u;
override EXPAND_ADD: u32 = 0u;
override EXPAND_DIV: u32 = 1u;
// Whether every alpha sum of the last pass is small enough for the colour's remainder to fit
// a word (the host knows the largest, OPAQUE_SA: `remainder_fits_word` in
// src/ops/blur/arith.rs): the division then corrects its estimate in 32 bits
// (`unpremultiply_32`).
override DIV_32: bool = false;

@group(0) @binding(0) var<uniform> params: Params;
// The input (binding 1, `src_word`, `src_pair`, `src_wide`) and output (binding 2,
// `dst_word`, `dst_pair`, `dst_wide`): blur_src and blur_dst, or their vec2 or vec4 twins for
// a pass whose input or output is FMT_PACK16 or FMT_WIDE (`io_variant` in
// src/ops/blur/plan.rs).
// import: blur_src
// import: blur_dst
// Gaussian weights w[0..=2r], summing to a power of two, four to a vec4 (uniform arrays
// have 16-byte elements): a uniform, so that an unrolled tap loop reads them as constants.
// WEIGHT_VEC4S vec4s hold 1001 taps, radius 500: `WEIGHT_VEC4S` of src/ops/blur/plan.rs, made
// from MAX_GAUSS_RADIUS (the shader test checks they agree). DOT4_VEC4S more hold the
// weights' bytes for DOT4 passes (`dot4_weight` of blur_gauss.wgsl).
const WEIGHT_VEC4S: u32 = 251u;
const DOT4_VEC4S: u32 = 502u;
@group(0) @binding(3) var<uniform> weights: array<vec4<u32>, WEIGHT_VEC4S + DOT4_VEC4S>;

fn weight(k: u32) -> u32 {
    return weights[k >> 2u][k & 3u];
}

// Pixel formats: 8-bit lanes packed in one word, 16-bit lanes in two words, or one word per
// lane. Between the passes 8-bit images without alpha use the 16-bit format (their fixed-point
// values stay below 65536), the others 24-bit lanes in the box (FMT_PACK24, below) and the
// one-word format in the gaussian (also between the iterations of an image with alpha), but
// all-opaque 8-bit RGBA images blurred once a two-word one (FMT_PACK16 or FMT_PACK18, below):
// `wide_fmt` in src/ops/blur/plan.rs, which has the same constants (the shader test checks
// them).
const FMT_PACK8: u32 = 0u;
const FMT_PACK16: u32 = 1u;
const FMT_WIDE: u32 = 2u;
// The host's layout of an image of fewer than four channels (HOST_CHANNELS samples a pixel of
// HOST_BYTES bytes each, 1 or 2, little-endian; pixels adjacent; lanes past them 0 once
// read): the first row pass reads it and, where the plan allows, the last column pass writes
// it, so that no conversion pass (wgsl/blur_pack.wgsl) runs before or after them. A pass
// reading it takes `in_base` in bytes.
const FMT_HOST: u32 = 3u;
// Three lanes of 18 bits in two words (the fourth lane is 0): the intermediate of the
// all-opaque gaussian passes, whose values stay below 2^18 (`OpaqueArith` in
// src/ops/blur/plan.rs).
const FMT_PACK18: u32 = 4u;
// Four lanes of 24 bits in three words, the fourth lane's bytes in the top bytes of the
// three: the box's intermediate (and state between iterations) where the gaussian's is a
// word a lane, whose values stay below 2^24 (`Arith::largest_between` in
// src/ops/blur/arith.rs): 12 bytes a pixel, not 16. Read and written a word at a time, only
// the words of live lanes (`LANES`, below): a word for gray, two for gray+alpha.
const FMT_PACK24: u32 = 5u;
override IN_FMT: u32 = 0u;
override OUT_FMT: u32 = 2u;
override HOST_CHANNELS: u32 = 3u;
override HOST_BYTES: u32 = 1u;
// Bytes of a pixel in the host's layout.
override HOST_PX_BYTES: u32 = HOST_CHANNELS * HOST_BYTES;
// The lanes a pass's pixels can hold something other than 0 in: the image's channels, 3 in
// the all-opaque passes (their alpha lane dropped). `live` zeroes the others as a constant
// wherever a pixel is read, so the driver drops their sums and multiplies: an RGB8 gaussian
// otherwise multiplies a fourth lane of zeros at every tap (docs/blur.md).
override LANES: u32 = 4u;

fn live(v: vec4<u32>) -> vec4<u32> {
    return vec4<u32>(v.x, select(0u, v.y, LANES > 1u), select(0u, v.z, LANES > 2u), select(0u, v.w, LANES > 3u));
}

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

fn pack18(v: vec4<u32>) -> vec2<u32> {
    return vec2<u32>(v.x | (v.y << 18u), (v.y >> 14u) | (v.z << 4u));
}

fn unpack18(p: vec2<u32>) -> vec4<u32> {
    return vec4<u32>(p.x & 0x3ffffu, (p.x >> 18u) | ((p.y & 0xfu) << 14u), p.y >> 4u, 0u);
}

fn pack24(v: vec4<u32>) -> vec3<u32> {
    return v.xyz | ((vec3<u32>(v.w) >> vec3<u32>(0u, 8u, 16u)) << vec3<u32>(24u));
}

fn unpack24(p: vec3<u32>) -> vec4<u32> {
    let top = p >> vec3<u32>(24u);
    return vec4<u32>(p & vec3<u32>(0xffffffu), top.x | (top.y << 8u) | (top.z << 16u));
}

fn read_px(word: u32) -> vec4<u32> {
    if IN_FMT == FMT_PACK24 {
        var p = vec3<u32>(src_word(word), 0u, 0u);
        if LANES > 1u {
            p.y = src_word(word + 1u);
        }
        if LANES > 2u {
            p.z = src_word(word + 2u);
        }
        return unpack24(p);
    }
    if IN_FMT == FMT_PACK8 {
        return unpack8(src_word(word));
    } else if IN_FMT == FMT_PACK16 {
        return unpack16(src_pair(word));
    } else if IN_FMT == FMT_PACK18 {
        return unpack18(src_pair(word));
    }
    return src_wide(word);
}

// The pixel at byte `b` of the host's layout (FMT_HOST): its samples in the low lanes. It
// straddles two words where its last byte, b + HOST_CHANNELS - 1, lies in the next one (never
// when it starts a word, so the shift below is below 32). 16-bit samples: `read_host16`.
fn read_host(b: u32) -> vec4<u32> {
    if HOST_BYTES == 2u {
        return read_host16(b);
    }
    let shift = (b & 3u) * 8u;
    var bits = src_word(b >> 2u) >> shift;
    if (b & 3u) + HOST_CHANNELS > 4u {
        bits |= src_word((b >> 2u) + 1u) << (32u - shift);
    }
    return unpack8(bits & (0xffffffffu >> (32u - 8u * HOST_CHANNELS)));
}

// The pixel at byte `b` (even) of the host's layout of 16-bit samples. Its 2 to 6 bytes
// straddle two words where they pass the first one's end: 6 bytes always, from a word's
// start too (its third sample is then the next word's low half).
fn read_host16(b: u32) -> vec4<u32> {
    let shift = (b & 3u) * 8u;
    var bits = src_word(b >> 2u) >> shift;
    var high = 0u;
    if (b & 3u) + HOST_PX_BYTES > 4u {
        let next = src_word((b >> 2u) + 1u);
        bits |= select(next << (32u - shift), 0u, shift == 0u);
        high = next >> shift;
    }
    return vec4<u32>(
        bits & 0xffffu,
        select(0u, bits >> 16u, HOST_CHANNELS > 1u),
        select(0u, high & 0xffffu, HOST_CHANNELS > 2u),
        0u,
    );
}

fn words_per_px(fmt: u32) -> u32 {
    if fmt == FMT_PACK24 {
        return min(LANES, 3u);
    }
    return select(select(1u, 2u, fmt == FMT_PACK16 || fmt == FMT_PACK18), 4u, fmt == FMT_WIDE);
}

// The lines and the segment [start, end) of them that workgroup `wg` handles; start >= end
// for the spare workgroups of a 2-D grid.
struct Work {
    line0: u32,
    start: u32,
    end: u32,
}

fn work(wid: vec3<u32>, nwg: vec3<u32>, rows: u32) -> Work {
    let wg = workgroup_index(wid, nwg);
    let groups = (params.lines + rows - 1u) / rows;
    let start = params.out_start + (wg / groups) * params.seg_len;
    return Work((wg % groups) * rows, start, min(params.out_end, start + params.seg_len));
}

// Sample `pos` of `line`, the position clamped to the line (edges repeat).
fn load(line: u32, pos: i32) -> vec4<u32> {
    let p = u32(clamp(pos, 0, i32(params.len) - 1));
    let at = line * params.in_line_stride + p;
    var v: vec4<u32>;
    if IN_FMT == FMT_HOST {
        v = read_host(params.in_base + at * HOST_CHANNELS * HOST_BYTES);
    } else {
        v = read_px(params.in_base + at * words_per_px(IN_FMT));
    }
    v = live(v);
    if OPAQUE_ROWS {
        return vec4<u32>(v.xyz, 0u);
    }
    if OPAQUE_COLUMNS {
        return vec4<u32>((v.xyz * EXPAND_MUL + vec3<u32>(EXPAND_ADD)) / EXPAND_DIV, 0u);
    }
    if !PREMULTIPLY {
        return v;
    }
    let a = v[ALPHA_LANE];
    var out = (v * a + vec4<u32>(PM_DIV / 2u)) / PM_DIV;
    out[ALPHA_LANE] = a * ALPHA_SCALE;
    return out;
}

// x * m as (low word, high word), for m <= 65537.
fn wide_mul(x: u32, m: u32) -> vec2<u32> {
    let lo = (x & 0xffffu) * m;
    let hi = (x >> 16u) * m;
    let low = lo + (hi << 16u);
    return vec2<u32>(low, (hi >> 16u) + select(0u, 1u, low < lo));
}

// How far below the f32 quotient of a colour's division the kernels start: (MAX_VALUE + 1)
// * 2^-19, more than twice the estimate's error and less than half a unit (below).
fn under() -> f32 {
    return f32(MAX_VALUE + 1u) * 0.0000019073486328125;
}

// A colour out of its window sum s and the alpha lane's sa > 0 (s <= sa), given inv = 1 /
// f32(sa): round half up of MAX_VALUE * s / sa, floor((MAX_VALUE * s + floor(sa / 2)) / sa).
// The f32 estimate fma(s, MAX_VALUE, sa / 2) * inv is within 15 * 2^-24 of the quotient
// relatively on every adapter (WGSL's conversions and correctly rounded steps within 1
// ulp, its division within 2.5; fma perhaps as a product and a sum): below 0.06 for
// quotients up to 65535.5. Truncating it less `under()` gives the quotient or one less (the
// subtraction's own rounding is far smaller than the margins), so the remainder MAX_VALUE *
// s + sa / 2 - sa * q lies in [0, sa (1 + (MAX_VALUE + 1) 2^-18)), and one comparison makes
// q exact: in 48-bit arithmetic here, in 32 bits (`unpremultiply_32`) where every alpha sum
// of the pass is small enough for that bound to fit a word (`DIV_32`). The CPU twin is
// `Premultiply::unpremultiply`
// in src/ops/blur/arith.rs (the GPU == CPU tests check they agree); the unit test
// `the_division_by_alpha_corrects_its_estimate_exactly` runs this arithmetic in Rust.
fn unpremultiply(s: u32, sa: u32, inv: f32) -> u32 {
    let p = wide_mul(s, MAX_VALUE);
    let low = p.x + (sa >> 1u);
    let num = vec2<u32>(low, p.y + select(0u, 1u, low < p.x));
    let q = estimate(s, sa, inv);
    // q <= MAX_VALUE (the estimate less `under()` is at most the quotient): wide_mul's m.
    let prod = wide_mul(sa, q);
    let r_lo = num.x - prod.x;
    let r_hi = num.y - prod.y - select(0u, 1u, num.x < prod.x);
    return min(q + select(0u, 1u, r_hi != 0u || r_lo >= sa), MAX_VALUE);
}

fn unpremultiply_32(s: u32, sa: u32, inv: f32) -> u32 {
    let q = estimate(s, sa, inv);
    let r = s * MAX_VALUE + (sa >> 1u) - sa * q;
    return min(q + select(0u, 1u, r >= sa), MAX_VALUE);
}

// The quotient of a colour's division or one less (`unpremultiply`).
fn estimate(s: u32, sa: u32, inv: f32) -> u32 {
    return u32(max(fma(f32(s), f32(MAX_VALUE), f32(sa >> 1u)) * inv - under(), 0.0));
}

// Colours out of the window sums of an all-opaque window, whose alpha sum is OPAQUE_SA: the
// same quotients as `unpremultiply`, by constants (`Opaque::colour` in src/ops/blur/arith.rs).
fn opaque_colour(s: vec4<u32>) -> vec4<u32> {
    let q = s / OPAQUE_D;
    let up = select(vec4<u32>(0u), vec4<u32>(1u), s - q * OPAQUE_D >= vec4<u32>(OPAQUE_T));
    return min(q + up, vec4<u32>(MAX_VALUE));
}

// A pass's output from its window sums: (S * MUL + ADD) / DIV. The last pass of an image with
// alpha rounds only the alpha lane so, divides the colour sums by the alpha sum, and gives 0
// where the alpha out is 0.
fn finish(s: vec4<u32>) -> vec4<u32> {
    if OPAQUE_COLUMNS {
        return vec4<u32>(opaque_colour(s).xyz, MAX_VALUE);
    }
    let v = (s * MUL + vec4<u32>(ADD)) / DIV;
    if !UNPREMULTIPLY {
        return v;
    }
    let a = v[ALPHA_LANE];
    if a == 0u {
        return vec4<u32>(0u);
    }
    let sa = s[ALPHA_LANE];
    var out: vec4<u32>;
    if sa == OPAQUE_SA {
        out = opaque_colour(s);
    } else {
        let inv = 1.0 / f32(sa);
        for (var k = 0u; k < 4u; k++) {
            if k != ALPHA_LANE {
                if DIV_32 {
                    out[k] = unpremultiply_32(s[k], sa, inv);
                } else {
                    out[k] = unpremultiply(s[k], sa, inv);
                }
            }
        }
    }
    out[ALPHA_LANE] = a;
    return out;
}

fn store(index: u32, v: vec4<u32>) {
    let word = params.out_base + index * words_per_px(OUT_FMT);
    if OUT_FMT == FMT_PACK8 {
        dst_word(word, pack8(v));
    } else if OUT_FMT == FMT_PACK16 {
        dst_pair(word, pack16(v));
    } else if OUT_FMT == FMT_PACK18 {
        dst_pair(word, pack18(v));
    } else if OUT_FMT == FMT_PACK24 {
        let p = pack24(v);
        dst_word(word, p.x);
        if LANES > 1u {
            dst_word(word + 1u, p.y);
        }
        if LANES > 2u {
            dst_word(word + 2u, p.z);
        }
    } else {
        dst_wide(word, v);
    }
}

// The host's layout out (FMT_HOST, the last column pass of the workgroup kernels): each
// position's outputs of a workgroup's lines are written a whole word at a time, its bytes
// gathered from the workgroup's tile (`tile_host_word`, `tile_host16_word` of
// blur_tile.wgsl), so that no two
// invocations write one word. The plan takes this format only where every workgroup's lines
// start and end on a word (its lines times HOST_PX_BYTES, and the image's, multiples of 4).
// Sets word `wi` of position `pos` of the lines from `line0`.
fn store_host(pos: u32, line0: u32, wi: u32, word: u32) {
    let px = (pos - params.out_start) * params.out_pos_stride + line0;
    dst_word(params.out_base + px * HOST_PX_BYTES / 4u + wi, word);
}

// Words of the host's layout a position's outputs of `lines` lines take (at least 1: where
// the plan never writes this format, the divisions by it must still not be by a constant 0).
fn host_words(lines: u32) -> u32 {
    return max(lines * HOST_PX_BYTES / 4u, 1u);
}

// The first of the lines from `line0` that word `wi` of a position holds samples of (a
// word's lines are all in the image or all past it).
fn host_word_line(line0: u32, wi: u32) -> u32 {
    return line0 + 4u * wi / HOST_PX_BYTES;
}

// import: grid
