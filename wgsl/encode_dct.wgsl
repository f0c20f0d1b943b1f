// encode_dct: one MCU per workgroup, its blocks in the scan's coding order: the MCU's pixels
// converted once into workgroup memory (jccolor.c's fixed-point YCbCr, edges repeated as
// libjpeg expands them), the chroma downsampled there (jcsample.c's biased means), then
// jfdctint.c's islow DCT (rows, then columns, eight invocations a block), quantisation by
// jcdctmgr.c's reciprocals, zigzag order, two coefficients a word. A dummy block (past the
// image, to whole MCUs) keeps only the DC of the block jccoefct.c takes it from, which lies
// in the same MCU. CPU twins: src/io/jpeg/color.rs, dct.rs and `pad` in mod.rs.

// import: grid
// import: encode_frame

@group(0) @binding(0) var<uniform> params: Params;
// The samples, gray or RGB, 4 bytes a word (little-endian).
@group(0) @binding(1) var<storage, read> src: array<u32>;
// Per quantisation table and coefficient (natural order): reciprocal, correction, shift.
@group(0) @binding(2) var<storage, read> divisors: array<vec4<u32>, 128>;
// 32 words a block, coding order: coefficient 2k in the low half of word k, 2k+1 the high.
@group(0) @binding(3) var<storage, read_write> coefs: array<u32>;

// The kernel's shape is fixed: an 8x8 block's samples, one an invocation.
const WG_SIZE: u32 = 64u;
// The largest MCU: 16x16 pixels, six blocks (4:2:0).
const MCU_PIXELS: u32 = 256u;
const MCU_BLOCKS: u32 = 6u;

// The MCU's pixels (clamped to the image), 8 * lh across: Y (or gray), Cb, Cr.
var<workgroup> sh_y: array<i32, MCU_PIXELS>;
var<workgroup> sh_cb: array<i32, MCU_PIXELS>;
var<workgroup> sh_cr: array<i32, MCU_PIXELS>;
// Each block's samples less 128, then its DCT, natural order.
var<workgroup> sh_blk: array<i32, 384>;

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

// Quantised coefficient n (natural order) of a block's DCT value x, with table t's divisors.
fn quantise(x: i32, t: u32, n: u32) -> i32 {
    let d = divisors[t * 64u + n];
    let m = i32(((u32(abs(x)) + d.y) * d.x) >> d.z);
    return select(m, -m, x < 0);
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
    // Every invocation reaches every barrier: the guard only skips the work.
    let mcu = workgroup_index(wid, nwg);
    let live = mcu * params.blocks_per_mcu < params.nblocks;
    let gray = params.channels == 1u;
    let lh = params.comp[0].x;
    let lv = params.comp[0].y;
    let tile_w = 8u * lh;
    let mx = mcu % params.mcus_x;
    let my = mcu / params.mcus_x;
    let x0 = mx * tile_w;
    let y0 = my * 8u * lv;
    // The MCU's pixels, each converted once.
    if live {
        for (var p = lid; p < tile_w * 8u * lv; p += WG_SIZE) {
            let x = min(x0 + p % tile_w, params.width - 1u);
            let y = min(y0 + p / tile_w, params.height - 1u);
            let at = y * params.width + x;
            if gray {
                sh_y[p] = byte_at(at);
            } else {
                let r = byte_at(3u * at);
                let g = byte_at(3u * at + 1u);
                let b = byte_at(3u * at + 2u);
                let offset = (128 << 16u) + (1 << 15u) - 1;
                sh_y[p] = (19595 * r + 38470 * g + 7471 * b + (1 << 15u)) >> 16u;
                sh_cb[p] = (-11059 * r - 21709 * g + 32768 * b + offset) >> 16u;
                sh_cr[p] = (32768 * r - 27439 * g - 5329 * b + offset) >> 16u;
            }
        }
    }
    workgroupBarrier();
    // Each block's samples less 128: luma's lh x lv blocks, then Cb's and Cr's one, the
    // chroma downsampled on the way. Invocation lid makes sample lid of each.
    let nluma = lh * lv;
    let nb = params.blocks_per_mcu;
    let r = lid / 8u;
    let k = lid % 8u;
    if live {
        for (var b = 0u; b < nluma; b++) {
            let p = ((b / lh) * 8u + r) * tile_w + (b % lh) * 8u + k;
            sh_blk[b * 64u + lid] = sh_y[p] - 128;
        }
        if !gray {
            // h2v2_downsample reads rows 2g and 2g + 1 of row group g, the last group's for
            // rows past it (its second row the first again past the image); h2v1 one row.
            var cb: i32;
            var cr: i32;
            if lh == 1u {
                cb = sh_cb[lid];
                cr = sh_cr[lid];
            } else if lv == 1u {
                let p = r * tile_w + 2u * k;
                cb = (sh_cb[p] + sh_cb[p + 1u] + i32(k & 1u)) >> 1u;
                cr = (sh_cr[p] + sh_cr[p + 1u] + i32(k & 1u)) >> 1u;
            } else {
                let groups = (params.height + 1u) / 2u;
                let g = min(my * 8u + r, groups - 1u);
                let row0 = 2u * g;
                let row1 = min(row0 + 1u, params.height - 1u);
                let p0 = (row0 - 2u * my * 8u) * tile_w + 2u * k;
                let p1 = (row1 - 2u * my * 8u) * tile_w + 2u * k;
                let bias = 1 + i32(k & 1u);
                cb = (sh_cb[p0] + sh_cb[p0 + 1u] + sh_cb[p1] + sh_cb[p1 + 1u] + bias) >> 2u;
                cr = (sh_cr[p0] + sh_cr[p0 + 1u] + sh_cr[p1] + sh_cr[p1 + 1u] + bias) >> 2u;
            }
            sh_blk[nluma * 64u + lid] = cb - 128;
            sh_blk[(nluma + 1u) * 64u + lid] = cr - 128;
        }
    }
    workgroupBarrier();
    // Rows, then columns: invocation lid takes line lid % 8 of block lid / 8.
    let line = lid % 8u;
    let blk = lid / 8u;
    if live && blk < nb {
        var v: array<i32, 8>;
        for (var j = 0u; j < 8u; j++) {
            v[j] = sh_blk[blk * 64u + line * 8u + j];
        }
        let o = dct_1d(v, true);
        for (var j = 0u; j < 8u; j++) {
            sh_blk[blk * 64u + line * 8u + j] = o[j];
        }
    }
    workgroupBarrier();
    if live && blk < nb {
        var v: array<i32, 8>;
        for (var j = 0u; j < 8u; j++) {
            v[j] = sh_blk[blk * 64u + j * 8u + line];
        }
        let o = dct_1d(v, false);
        for (var j = 0u; j < 8u; j++) {
            sh_blk[blk * 64u + j * 8u + line] = o[j];
        }
    }
    workgroupBarrier();
    if !live {
        return;
    }
    // Quantised, two coefficients a word: 32 invocations a block, two blocks at a time.
    let wb = params.comp[0].z;
    let hb = params.comp[0].w;
    for (var b = lid / 32u; b < nb; b += 2u) {
        let word = lid % 32u;
        let c = select(0u, b - nluma + 1u, b >= nluma);
        let t = params.place[c].y;
        var w = 0u;
        // Luma block (bxi, byi) of the MCU is a dummy past the image's blocks.
        let bx = mx * lh + b % lh;
        let by = my * lv + b / lh;
        if c == 0u && (bx >= wb || by >= hb) {
            // Its DC: the last real block's to its left, or, past the last block row, that
            // of the MCU's last block in the row above (itself maybe a right-edge dummy).
            var sy = by;
            var sx = bx;
            if by >= hb {
                sy = hb - 1u;
                sx = mx * lh + lh - 1u;
            }
            sx = min(sx, wb - 1u);
            let sb = (sy - my * lv) * lh + (sx - mx * lh);
            if word == 0u {
                w = u32(quantise(sh_blk[sb * 64u], t, 0u)) & 0xFFFFu;
            }
        } else {
            let n0 = zigzag[2u * word];
            let n1 = zigzag[2u * word + 1u];
            let lo = quantise(sh_blk[b * 64u + n0], t, n0);
            let hi = quantise(sh_blk[b * 64u + n1], t, n1);
            w = (u32(lo) & 0xFFFFu) | (u32(hi) << 16u);
        }
        coefs[(mcu * nb + b) * 32u + word] = w;
    }
}
