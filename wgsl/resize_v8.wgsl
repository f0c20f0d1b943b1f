// resize_v8: the vertical 1-D pass of Pillow's resampling over 8-bit samples whose rows end on
// a word. The pass keeps the width, so an output word's samples lie under one input word in
// each row: a thread makes VW neighbouring words (read and written as one u32, vec2 or vec4:
// the import below) of RV consecutive output rows, each a sum of KSIZE rows with one weight a
// row for all its samples. Neighbouring threads take neighbouring words.
//
// Each output row's window is KSIZE rows that lie inside the input (moved back at the bottom
// edge, weights 0 outside the row's own taps), its weights position-major (tap i of row y at
// y * KSIZE + i): `device_axis_windows` in src/ops/resize/plan.rs. At a whole-number
// reduction (S rows, where REGULAR) the rows from `reg_lo` to `reg_hi` all weigh their
// windows, which start at `first0 + S y`, with the override constants KW0 to KW15 (those
// near the edges, their taps cut there, do not: `Windows::regular` in
// src/ops/resize/stride.rs). A thread whose rows are all regular walks the S (RV - 1) + KSIZE
// input rows their windows cover once, adding each to every row whose window holds it, with
// weights the compiler folds into the multiply-adds; the others load each row's weights and
// rows.
//
// The module is built without bounds checks (`Gpu::kernel_unchecked`): every index below is
// in range by construction (each says why), given what the plan guarantees (`WordColumns`
// in src/ops/resize/columns.rs): rows of a whole number of VW-word units, every window
// inside the input, the regular rows' windows too.
//
// The grid is 2-D (or 3-D past the dispatch limit): x blocks of WG_SIZE units along a row,
// y (and z) the groups of RV rows, so that no thread divides to find its row (a division by
// a size known only at run time is a dozen instructions).

// import: resize_math

// Its Rust twin is `ColumnParams` in src/ops/resize/columns.rs (the shader test checks their
// fields).
struct Params {
    // Units of VW words a row, the same in the input and the output (at least 1).
    units: u32,
    // Output rows.
    rows: u32,
    // The regular rows: reg_lo <= y < reg_hi (where REGULAR).
    reg_lo: u32,
    reg_hi: u32,
    // The first input row of output row 0's window (regular rows: first0 + S y).
    first0: i32,
    _pad0: u32,
    _pad1: u32,
    _pad2: u32,
}

@group(0) @binding(0) var<uniform> params: Params;
// Per output row: the first input row of its window, and KSIZE.
@group(0) @binding(2) var<storage, read> bounds: array<u32>;
// Per output row and tap: its weight in units of 2^-22.
@group(0) @binding(3) var<storage, read> weights: array<i32>;
// The input and output (bindings 1 and 4), VW words a unit: `load_vec`, `store_vec`.
// import: resize_v8_word

override WG_SIZE: u32 = 64u;
// Taps a row (Pillow's ksize): every output row sums this many, those past its own count
// with weight 0, so that the tap loop has a constant count the compiler unrolls.
override KSIZE: u32;
// Output rows a thread makes (at most 8).
override RV: u32 = 2u;
// The reduction's step: input rows from one regular row's window to the next's.
override S: u32 = 1u;
// The regular rows' weights: REGULAR, KW0 to KW15 and `kw`.
// import: resize_regular

// A word's four samples as lanes.
fn lanes4(v: u32) -> vec4<i32> {
    return vec4<i32>(vec4<u32>(v & 255u, (v >> 8u) & 255u, (v >> 16u) & 255u, v >> 24u));
}

// The colour samples of a word of whole pixels (CHANNELS 1, 2 or 4) premultiplied by their
// pixel's alpha (`premultiply`), or divided by it (`unpremultiply`).
fn alpha_word(v: u32, divide: bool) -> u32 {
    var out = v;
    for (var b = 0u; b < 4u; b++) {
        let ch = b % CHANNELS;
        if ch != CHANNELS - 1u {
            let c = (v >> (8u * b)) & 255u;
            let a = (v >> (8u * (b - ch + CHANNELS - 1u))) & 255u;
            var x = premultiply(c, a);
            if divide {
                x = unpremultiply(c, a);
            }
            out = (out & ~(255u << (8u * b))) | (x << (8u * b));
        }
    }
    return out;
}

// A unit as the pass sums it: premultiplied in the first pass of an image with alpha.
fn input(i: u32) -> vec4<u32> {
    var v = load_vec(i);
    if PREMULTIPLY {
        for (var q = 0u; q < VW; q++) {
            v[q] = alpha_word(v[q], false);
        }
    }
    return v;
}

// Output row y's unit `col` from its sums (started from `rounding()`).
fn finish_unit(y: u32, col: u32, acc: array<vec4<i32>, 4>) {
    var out = vec4<u32>();
    for (var q = 0u; q < VW; q++) {
        var o = clip8(acc[q]);
        if UNPREMULTIPLY {
            o = alpha_word(o, true);
        }
        out[q] = o;
    }
    // y < rows output rows, col < units.
    store_vec(y * params.units + col, out);
}

@compute @workgroup_size(WG_SIZE)
fn main(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let units = params.units;
    let col = wid.x * WG_SIZE + lid;
    let y0 = (wid.y + wid.z * nwg.y) * RV;
    if col >= units || y0 >= params.rows {
        return;
    }
    if REGULAR && y0 >= params.reg_lo && y0 + RV <= params.reg_hi {
        // Rows y0 to y0 + RV - 1, all regular: their windows cover input rows top to
        // top + S (RV - 1) + KSIZE - 1, inside the input (the plan's regular rows).
        let top = u32(params.first0 + i32(S * y0));
        var acc: array<vec4<i32>, 32>;
        for (var j = 0u; j < RV * VW; j++) {
            acc[j] = vec4<i32>(rounding());
        }
        for (var d = 0u; d < S * (RV - 1u) + KSIZE; d++) {
            let v = input((top + d) * units + col);
            for (var j = 0u; j < RV; j++) {
                // Input row top + d is row y0 + j's tap d - S j, where that is one of its.
                let t = i32(d) - i32(S * j);
                if t >= 0 && t < i32(KSIZE) {
                    for (var q = 0u; q < VW; q++) {
                        acc[j * VW + q] += lanes4(v[q]) * kw(t, KSIZE);
                    }
                }
            }
        }
        for (var j = 0u; j < RV; j++) {
            finish_unit(y0 + j, col, array<vec4<i32>, 4>(acc[j * VW], acc[j * VW + 1u], acc[j * VW + 2u], acc[j * VW + 3u]));
        }
        return;
    }
    for (var j = 0u; j < RV; j++) {
        let y = y0 + j;
        if y < params.rows {
            // y < rows: inside the bounds (2 rows words) and the weights (rows of KSIZE).
            let first = bounds[2u * y];
            var acc: array<vec4<i32>, 4>;
            for (var q = 0u; q < VW; q++) {
                acc[q] = vec4<i32>(rounding());
            }
            for (var i = 0u; i < KSIZE; i++) {
                // Rows first to first + KSIZE - 1 are inside the input, col < units.
                let v = input((first + i) * units + col);
                let k = weights[y * KSIZE + i];
                for (var q = 0u; q < VW; q++) {
                    acc[q] += lanes4(v[q]) * k;
                }
            }
            finish_unit(y, col, acc);
        }
    }
}
