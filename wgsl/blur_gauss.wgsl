// blur_gauss: one pass of a gaussian blur (see shared/blur_pass.wgsl).

// import: blur_pass

// ---- gaussian: each chunk plus its halo staged in workgroup memory --------------------------
// GAUSS_PPT, the outputs a thread, sizes function-scope arrays, so it is a const that the
// host rewrites per variant (`gauss_ppt` in src/ops/blur/plan.rs); the overrides are those
// its `shape` and `pass_overrides` set (the shader test checks both).
override GAUSS_TPL: u32 = 32u; // threads per line
const GAUSS_PPT: u32 = 4u;
override GAUSS_CH: u32 = GAUSS_TPL * GAUSS_PPT;
override G_ROWS: u32 = 4u; // lines per workgroup
override G_WG: u32 = 128u; // G_ROWS * GAUSS_TPL
override G_IN_LEN: u32 = 1u; // G_ROWS * G_STRIDE, in staged elements
// A staged line's elements and the padding's period, 2^G_SKEW_SHIFT (`skew` below). Every
// override stays above the workgroup arrays: naga 30's `process_overrides` panicked on two
// declared below them.
override G_STRIDE: u32 = 1u;
override G_SKEW_SHIFT: u32 = 5u;
override G_TAPS: u32 = 1u; // 2r + 1
override STAGE_FMT: u32 = 0u;
// DOT4: the pass's samples are 8-bit (STAGE_FMT is FMT_PACK8), its weights below 2^16 and a
// thread makes 4 outputs (`takes_dot4` in src/ops/blur/plan.rs). Each lane of a line is staged
// as a plane of bytes, four positions a word, and 4 taps of a lane take two 4 x 8-bit dot
// products (`dot4U8Packed`: one instruction where the adapter has integer dot products), one
// with the weights' high bytes and one with their low bytes, instead of 4 multiply-adds. A
// line's planes start at the chunk's first tap, c0 - r; thread t's 4 outputs take words t to
// t + D_WORDS - 1 of each; a plane takes D_STRIDE words, a line's planes D_LINE (padded so
// that the lines one warp reads, where a line has fewer than 32 threads, fall on different
// banks), a workgroup's D_LEN (`dot4_layout` in src/ops/blur/plan.rs).
override DOT4: bool = false;
override D_WORDS: u32 = 1u;
override D_STRIDE: u32 = 1u;
override D_LINE: u32 = 1u;
override D_LEN: u32 = 1u;
// The tile: G_ROWS * (GAUSS_CH + 1) elements (its TILE_LEN), padded like the box's.
// import: blur_tile

// Staged samples keep the input's packing, so a tap reads as few workgroup-memory bytes as
// possible (the loads, not the multiplies, bound this kernel): a word per 8-bit pixel, a
// pair of words per 16-bit one or per FMT_PACK18 one, a vec4 for the wide format. 8-bit pixels premultiplied on
// load are staged as 16-bit ones (c * a needs 16 bits). Only the array of the staging format
// has G_IN_LEN elements. Set from `stage_fmt` in src/ops/blur/plan.rs (STAGE_FMT).
var<workgroup> sh_in8: array<u32, select(1u, G_IN_LEN, STAGE_FMT == FMT_PACK8)>;
var<workgroup> sh_in16: array<vec2<u32>, select(1u, G_IN_LEN, STAGE_FMT == FMT_PACK16 || STAGE_FMT == FMT_PACK18)>;
var<workgroup> sh_in32: array<vec4<u32>, select(1u, G_IN_LEN, STAGE_FMT == FMT_WIDE)>;
var<workgroup> sh_planes: array<u32, D_LEN>;

fn stage(i: u32, v: vec4<u32>) {
    if STAGE_FMT == FMT_PACK8 {
        sh_in8[i] = pack8(v);
    } else if STAGE_FMT == FMT_PACK16 {
        sh_in16[i] = pack16(v);
    } else if STAGE_FMT == FMT_PACK18 {
        sh_in16[i] = pack18(v);
    } else {
        sh_in32[i] = v;
    }
}

fn staged(i: u32) -> vec4<u32> {
    if STAGE_FMT == FMT_PACK8 {
        return live(unpack8(sh_in8[i]));
    } else if STAGE_FMT == FMT_PACK16 {
        return live(unpack16(sh_in16[i]));
    } else if STAGE_FMT == FMT_PACK18 {
        return live(unpack18(sh_in16[i]));
    }
    return live(sh_in32[i]);
}

// Staged sample j of a line sits at skew(j), one element of padding every 128 bytes (32
// words, 16 pairs or 8 vec4s: 2^G_SKEW_SHIFT elements): a thread's outputs start 2 samples
// after its neighbour's, and unpadded, lanes half a warp apart would hit the same banks. A
// line takes G_STRIDE elements. Both are set from `gauss_stride` in src/ops/blur/plan.rs,
// which also sizes G_IN_LEN = G_ROWS * G_STRIDE.

fn skew(j: u32) -> u32 {
    return j + (j >> G_SKEW_SHIFT);
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
    let stride = G_STRIDE;
    for (var c0 = wk.start; c0 < wk.end; c0 += GAUSS_CH) {
        if DOT4 {
            dot4_chunk(c0, line0, lid, wk.end);
            continue;
        }
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
        // A thread's GAUSS_PPT adjacent outputs share all but one staged sample a tap: each
        // is loaded once, into a window of registers that slides one sample a tap.
        let rb = row * stride;
        let p0 = t * GAUSS_PPT;
        var s: array<vec4<u32>, GAUSS_PPT>;
        var win: array<vec4<u32>, GAUSS_PPT>;
        for (var i = 0u; i + 1u < GAUSS_PPT; i++) {
            win[i] = staged(rb + skew(p0 + i));
        }
        for (var k = 0u; k < taps; k++) {
            win[GAUSS_PPT - 1u] = staged(rb + skew(p0 + k + GAUSS_PPT - 1u));
            let w = weight(k);
            for (var i = 0u; i < GAUSS_PPT; i++) {
                s[i] += w * win[i];
            }
            for (var i = 0u; i + 1u < GAUSS_PPT; i++) {
                win[i] = win[i + 1u];
            }
        }
        for (var i = 0u; i < GAUSS_PPT; i++) {
            tile_set(row * (GAUSS_CH + 1u) + p0 + i, finish(s[i]));
        }
        workgroupBarrier();
        store_chunk(c0, line0, lid, wk.end);
    }
}

// The chunk's outputs from the tile to the pass's output (after a barrier).
fn store_chunk(c0: u32, line0: u32, lid: u32, end: u32) {
    if OUT_FMT == FMT_HOST {
        // As box_pass: whole words of the host's layout.
        let words = host_words(G_ROWS);
        for (var k = lid; k < GAUSS_CH * words; k += G_WG) {
            let p = k / words;
            let wi = k % words;
            if c0 + p < end && host_word_line(line0, wi) < params.lines {
                var word: u32;
                if HOST_BYTES == 2u {
                    word = tile_host16_word(wi, p, GAUSS_CH + 1u);
                } else {
                    word = tile_host_word(wi, p, GAUSS_CH + 1u);
                }
                store_host(c0 + p, line0, wi, word);
            }
        }
    } else {
        for (var k = lid; k < G_ROWS * GAUSS_CH; k += G_WG) {
            let p = k / G_ROWS;
            let rr = k % G_ROWS;
            if c0 + p < end && line0 + rr < params.lines {
                store_from_tile((c0 + p - params.out_start) * params.out_pos_stride + line0 + rr, rr * (GAUSS_CH + 1u) + p);
            }
        }
    }
}

// The weights' bytes for DOT4: word j of output i's (0 to 3 of a thread's), its high bytes
// (h = 0) or low bytes (h = 1), after the WEIGHT_VEC4S vec4s of weights (`weight_slots` in
// src/ops/blur/plan.rs).
fn dot4_weight(i: u32, j: u32, h: u32) -> u32 {
    let k = 4u * WEIGHT_VEC4S + (i * D_WORDS + j) * 2u + h;
    return weights[k >> 2u][k & 3u];
}

// One chunk of a DOT4 pass: its lines staged as planes, sums by dot products, stored.
fn dot4_chunk(c0: u32, line0: u32, lid: u32, end: u32) {
    let first = i32(c0) - i32(params.radius);
    // Word g of line rr's planes: positions first + 4g .. + 3, each lane's bytes in its own.
    for (var k = lid; k < G_ROWS * D_STRIDE; k += G_WG) {
        let rr = k / D_STRIDE;
        let g = k % D_STRIDE;
        var words = vec4<u32>(0u);
        if line0 + rr < params.lines {
            for (var b = 0u; b < 4u; b++) {
                words |= load(line0 + rr, first + i32(4u * g + b)) << vec4<u32>(8u * b);
            }
        }
        for (var c = 0u; c < LANES; c++) {
            sh_planes[rr * D_LINE + c * D_STRIDE + g] = words[c];
        }
    }
    workgroupBarrier();
    let row = lid / GAUSS_TPL;
    let t = lid % GAUSS_TPL;
    var hi: array<vec4<u32>, 4>;
    var lo: array<vec4<u32>, 4>;
    for (var c = 0u; c < LANES; c++) {
        let base = row * D_LINE + c * D_STRIDE + t;
        for (var j = 0u; j < D_WORDS; j++) {
            let x = sh_planes[base + j];
            for (var i = 0u; i < 4u; i++) {
                hi[i][c] += dot4U8Packed(x, dot4_weight(i, j, 0u));
                lo[i][c] += dot4U8Packed(x, dot4_weight(i, j, 1u));
            }
        }
    }
    for (var i = 0u; i < 4u; i++) {
        tile_set(row * (GAUSS_CH + 1u) + 4u * t + i, finish((hi[i] << vec4<u32>(8u)) + lo[i]));
    }
    workgroupBarrier();
    store_chunk(c0, line0, lid, end);
}
