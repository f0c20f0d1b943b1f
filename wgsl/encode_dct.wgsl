// encode_dct: one 8x8 block per invocation, in the scan's coding order: its samples made as
// libjpeg-turbo makes them (jccolor.c's fixed-point YCbCr, jcsample.c's biased downsampling,
// edges repeated), jfdctint.c's islow DCT, quantisation by jcdctmgr.c's reciprocals, zigzag
// order, two coefficients a word. A dummy block (past the image, to whole MCUs) keeps only
// the DC of the block jccoefct.c takes it from. CPU twins: src/io/jpeg/color.rs, dct.rs and
// `pad` in mod.rs.

// import: grid
// import: encode_frame

@group(0) @binding(0) var<uniform> params: Params;
// The samples, gray or RGB, 4 bytes a word (little-endian).
@group(0) @binding(1) var<storage, read> src: array<u32>;
// Per quantisation table and coefficient (natural order): reciprocal, correction, shift.
@group(0) @binding(2) var<storage, read> divisors: array<vec4<u32>, 128>;
// 32 words a block, coding order: coefficient 2k in the low half of word k, 2k+1 the high.
@group(0) @binding(3) var<storage, read_write> coefs: array<u32>;

override WG_SIZE: u32 = 64u;

// The natural index of the k-th coefficient in zigzag order (a private copy: indexed at run
// time).
var<private> zigzag: array<u32, 64> = array<u32, 64>(
    0u, 1u, 8u, 16u, 9u, 2u, 3u, 10u, 17u, 24u, 32u, 25u, 18u, 11u, 4u, 5u, 12u, 19u, 26u,
    33u, 40u, 48u, 41u, 34u, 27u, 20u, 13u, 6u, 7u, 14u, 21u, 28u, 35u, 42u, 49u, 56u, 57u,
    50u, 43u, 36u, 29u, 22u, 15u, 23u, 30u, 37u, 44u, 51u, 58u, 59u, 52u, 45u, 38u, 31u, 39u,
    46u, 53u, 60u, 61u, 54u, 47u, 55u, 62u, 63u,
);

fn byte_at(k: u32) -> i32 {
    return i32((src[k >> 2u] >> ((k & 3u) * 8u)) & 0xFFu);
}

// jccolor.c's rgb_ycc_convert of pixel (x, y), clamped to the image (libjpeg's edge
// expansion); FIX(v) = round(v * 2^16).
fn ycc(x: u32, y: u32) -> vec3<i32> {
    let at = 3u * (min(y, params.height - 1u) * params.width + min(x, params.width - 1u));
    let r = byte_at(at);
    let g = byte_at(at + 1u);
    let b = byte_at(at + 2u);
    let offset = (128 << 16u) + (1 << 15u) - 1;
    return vec3<i32>(
        (19595 * r + 38470 * g + 7471 * b + (1 << 15u)) >> 16u,
        (-11059 * r - 21709 * g + 32768 * b + offset) >> 16u,
        (32768 * r - 27439 * g - 5329 * b + offset) >> 16u,
    );
}

// Sample (x, y) of component c's plane (its blocks' samples, edges repeated).
fn sample(c: u32, x: u32, y: u32) -> i32 {
    if params.channels == 1u {
        return byte_at(min(y, params.height - 1u) * params.width + min(x, params.width - 1u));
    }
    if c == 0u {
        return ycc(x, y).x;
    }
    let lh = params.comp[0].x;
    let lv = params.comp[0].y;
    if lh == 1u {
        return ycc(x, y)[c];
    }
    if lv == 1u {
        // h2v1_downsample: bias 0, 1 alternating by column.
        let s = ycc(2u * x, y)[c] + ycc(2u * x + 1u, y)[c];
        return (s + i32(x & 1u)) >> 1u;
    }
    // h2v2_downsample: rows 2g and 2g + 1 of the last row group past the image, the second
    // row the first again past the last image row; bias 1, 2 alternating.
    let g = min(y, (params.height + 1u) / 2u - 1u);
    let r0 = 2u * g;
    let r1 = min(r0 + 1u, params.height - 1u);
    let s = ycc(2u * x, r0)[c] + ycc(2u * x + 1u, r0)[c] + ycc(2u * x, r1)[c]
        + ycc(2u * x + 1u, r1)[c];
    return (s + 1 + i32(x & 1u)) >> 2u;
}

const CONST_BITS: u32 = 13u;
const PASS1_BITS: u32 = 2u;

// jfdctint.c's 1-D transform of v (pass 1 over rows, pass 2 over columns); the CPU twin is
// `dct_1d` in src/io/jpeg/dct.rs.
fn dct_1d(v: array<i32, 8>, pass1: bool) -> array<i32, 8> {
    var out: array<i32, 8>;
    var down = CONST_BITS + PASS1_BITS;
    if pass1 {
        down = CONST_BITS - PASS1_BITS;
    }
    let round = 1 << (down - 1u);
    let tmp0 = v[0] + v[7];
    let tmp7 = v[0] - v[7];
    let tmp1 = v[1] + v[6];
    let tmp6 = v[1] - v[6];
    let tmp2 = v[2] + v[5];
    let tmp5 = v[2] - v[5];
    let tmp3 = v[3] + v[4];
    let tmp4 = v[3] - v[4];
    let tmp10 = tmp0 + tmp3;
    let tmp13 = tmp0 - tmp3;
    let tmp11 = tmp1 + tmp2;
    let tmp12 = tmp1 - tmp2;
    if pass1 {
        out[0] = (tmp10 + tmp11) << PASS1_BITS;
        out[4] = (tmp10 - tmp11) << PASS1_BITS;
    } else {
        let r = 1 << (PASS1_BITS - 1u);
        out[0] = (tmp10 + tmp11 + r) >> PASS1_BITS;
        out[4] = (tmp10 - tmp11 + r) >> PASS1_BITS;
    }
    let z1 = (tmp12 + tmp13) * 4433;
    out[2] = (z1 + tmp13 * 6270 + round) >> down;
    out[6] = (z1 - tmp12 * 15137 + round) >> down;
    let o1 = tmp4 + tmp7;
    let o2 = tmp5 + tmp6;
    let o3 = tmp4 + tmp6;
    let o4 = tmp5 + tmp7;
    let z5 = (o3 + o4) * 9633;
    let t4 = tmp4 * 2446;
    let t5 = tmp5 * 16819;
    let t6 = tmp6 * 25172;
    let t7 = tmp7 * 12299;
    let y1 = o1 * -7373;
    let y2 = o2 * -20995;
    let y3 = o3 * -16069 + z5;
    let y4 = o4 * -3196 + z5;
    out[7] = (t4 + y1 + y3 + round) >> down;
    out[5] = (t5 + y2 + y4 + round) >> down;
    out[3] = (t6 + y2 + y3 + round) >> down;
    out[1] = (t7 + y1 + y4 + round) >> down;
    return out;
}

@compute @workgroup_size(WG_SIZE)
fn main(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let i = workgroup_index(wid, nwg) * WG_SIZE + lid;
    if i >= params.nblocks {
        return;
    }
    let loc = locate(i);
    let c = loc.c;
    let h = params.comp[c].x;
    let wb = params.comp[c].z;
    let hb = params.comp[c].w;
    // A dummy block takes the DC of the last real block to its left (right edge), or of its
    // MCU's last block in the last real row (bottom edge, itself maybe a right-edge dummy).
    var sx = loc.bx;
    var sy = loc.by;
    let dummy = sx >= wb || sy >= hb;
    if sy >= hb {
        sy = hb - 1u;
        sx = (sx / h) * h + h - 1u;
    }
    sx = min(sx, wb - 1u);
    var blk: array<i32, 64>;
    for (var r = 0u; r < 8u; r++) {
        var row: array<i32, 8>;
        for (var k = 0u; k < 8u; k++) {
            row[k] = sample(c, sx * 8u + k, sy * 8u + r) - 128;
        }
        let o = dct_1d(row, true);
        for (var k = 0u; k < 8u; k++) {
            blk[r * 8u + k] = o[k];
        }
    }
    for (var k = 0u; k < 8u; k++) {
        var col: array<i32, 8>;
        for (var r = 0u; r < 8u; r++) {
            col[r] = blk[r * 8u + k];
        }
        let o = dct_1d(col, false);
        for (var r = 0u; r < 8u; r++) {
            blk[r * 8u + k] = o[r];
        }
    }
    let t = params.place[c].y * 64u;
    var q: array<i32, 64>;
    for (var n = 0u; n < 64u; n++) {
        let d = divisors[t + n];
        let x = blk[n];
        let m = i32(((u32(abs(x)) + d.y) * d.x) >> d.z);
        q[n] = select(m, -m, x < 0);
    }
    for (var k = 0u; k < 32u; k++) {
        var w = (u32(q[zigzag[2u * k]]) & 0xFFFFu) | (u32(q[zigzag[2u * k + 1u]]) << 16u);
        if dummy {
            w = select(0u, u32(q[0]) & 0xFFFFu, k == 0u);
        }
        coefs[i * 32u + k] = w;
    }
}
