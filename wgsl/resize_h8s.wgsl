// resize_h8s: the horizontal 1-D pass of Pillow's resampling over 8-bit samples for an
// integer reduction (2x, 3x, 4x ...), where every output column's taps lie in a window of K
// input pixels that starts S pixels after its left neighbour's. `StrideLayout` in
// src/ops/resize/stride.rs checks that of the axis and moves each column's weights into its
// window (0 outside the column's own taps).
//
// A thread makes four neighbouring output pixels of RPT rows. Their windows together cover
// W = 3 S + K input pixels a row; the thread walks them once, takes each pixel's samples out
// of its word once and adds them to every output whose window holds it, then packs the four
// pixels into CHANNELS words. resize_h8 (a column a thread) loads and unpacks a pixel for
// every tap, up to K / S times each.
//
// A workgroup makes a tile of 4 TG output columns by R rows: it first copies the words that
// hold the SPAN input pixels its columns' windows cover, R rows of them, into workgroup
// memory as they are (premultiplied where the image has alpha: a word is one RGBA pixel or
// two gray+alpha ones). The input's rows start on a word (in_w * CHANNELS = S * out_w *
// CHANNELS, out_w * CHANNELS a multiple of 4), and a group's first window pixel lies
// 4 S CHANNELS bytes, a whole number of words, after its left neighbour's: so window pixel w
// of every group starts at the same byte of a word, OFF0 + CHANNELS w bytes after the
// group's first word, and its samples come out of one or two words with shifts known when
// the kernel is built. Words left of the image's first or past its last are not copied: only
// weights of 0 fall on the pixels in them (Pillow's windows are cut at the edges).
//
// Workgroup memory: `sh`, row r of the tile at r * IN_STRIDE, its word 0 the one holding the
// tile's first window pixel's first byte; `res`, the tile's output words, row r at
// r * OUT_STRIDE. Layout and sizes: `StrideLayout` in src/ops/resize/stride.rs.
//
// Weights: at a whole-number reduction every column away from the image's edges has the same
// K weights over its window (Pillow computes them from the same offsets), so the groups from
// `reg_lo` to `reg_hi` take theirs from the override constants KW0 to KW15, which the
// compiler folds into the multiply-adds; the groups near the edges load theirs (`weights`).
// `Windows::regular` in src/ops/resize/stride.rs finds the regular groups. (Up to 16 taps,
// K <= 16: at 2x the 4K to 1080p lanczos3 pass 1.15x faster; at 25 taps, a 4x lanczos3,
// 5% slower than loading them, call FP in docs/BENCHMARKS.md.)
//
// The module is built without bounds checks (`Gpu::kernel_unchecked`): every index below is
// in range by construction, given what the plan guarantees (the rows ending on a word; NW
// at most IN_STRIDE; R LPR at most 32; `groups` groups of weights a window position, W
// positions; K at most 16 where REGULAR). Each index says why where it is
// made.

// import: resize_math

// Its Rust twin is `StrideParams` in src/ops/resize/stride.rs (the shader test checks their
// fields).
struct Params {
    // Pixels per input row and per output row.
    in_w: u32,
    out_w: u32,
    // Rows, the same in the input and the output.
    rows: u32,
    // Tiles down the image (the grid's x is the tiles along a row; its y, and z past the
    // dispatch limit, those down it: no thread divides to find its tile).
    tile_rows: u32,
    // The input pixel where output column 0's window starts (negative where it starts left
    // of the image).
    first0: i32,
    // Groups of four output columns a row (the last may be partial): the stride between
    // window positions in `weights`.
    groups: u32,
    // The groups whose weights are KW0 to KW15 (where REGULAR): reg_lo <= group < reg_hi.
    reg_lo: u32,
    reg_hi: u32,
}

@group(0) @binding(0) var<uniform> params: Params;
// Input samples, packed little-endian, 4 a word.
@group(0) @binding(1) var<storage, read> src: array<u32>;
// Per window position w < W and group g of four output columns, at w * groups + g: the four
// columns' weights there in units of 2^-22 (column 4 g + k's tap w - S k).
@group(0) @binding(2) var<storage, read> weights: array<vec4<i32>>;
// Output samples, packed as the input's.
@group(0) @binding(3) var<storage, read_write> dst: array<u32>;

override WG_SIZE: u32 = 256u;
// Groups of four output columns a tile (a power of two, 2 to 16), and groups a warp covers
// (a power of two dividing TG and 32, TG / GU dividing the warps of a workgroup): a warp
// makes GU groups of 32 / GU rows, so that its lanes, 4 S pixels apart along a row, read
// distinct banks.
override TG: u32 = 16u;
override GU: u32 = 4u;
// Rows a thread makes (at most 8).
override RPT: u32 = 2u;
// The windows' step and length.
override S: u32;
override K: u32;
// Where window pixel 0 of column 0 starts in its word (bytes: CHANNELS * first0 mod 4).
override OFF0: u32;
// Words an input row takes in `sh` (odd, at least NW).
override IN_STRIDE: u32;

// A thread's window, the tile's, rows a round of the workgroup's threads and rows a tile.
override W: u32 = 3u * S + K;
override SPAN: u32 = S * (4u * TG - 1u) + K;
// The words a tile row's SPAN pixels lie in, from the one holding the first's first byte.
override NW: u32 = (OFF0 + SPAN * CHANNELS + 3u) / 4u;
override G: u32 = WG_SIZE / TG;
override R: u32 = G * RPT;

// Words a row of the staged output tile (odd, at least TG * CHANNELS).
override OUT_STRIDE: u32 = 1u;

// The words a thread loads of each tile row (R LPR at most 32 in all).
override LPR: u32 = (NW + WG_SIZE - 1u) / WG_SIZE;

// The regular groups' weights: REGULAR, KW0 to KW15 and `kw`.
// import: resize_regular

var<workgroup> sh: array<u32, R * IN_STRIDE>;
var<workgroup> res: array<u32, R * OUT_STRIDE>;

// The words a thread loads, as loaded.
var<private> pre: array<u32, 32>;

// Copies the tile's words into `sh`, row by row, neighbouring threads on neighbouring words:
// word j of row r is thread j % WG_SIZE's load r LPR + j / WG_SIZE (a row's words counted
// from the tile's first, not divided out of one running index). All of a thread's loads are
// issued before the first is stored, so that they are in flight together. The tile's rows
// are y0 to y0 + ny - 1 and its words word0 to word0 + NW - 1 of each; words outside the
// image are not copied, unless `inside` (a constant where this is called) says none is:
// then no load is checked (the 4K to 1080p's horizontal pass 3% faster, call FS).
fn copy_tile(inside: bool, y0: u32, ny: u32, word0: i32, row_words_in: i32, lid: u32) {
    for (var r = 0u; r < R; r++) {
        for (var m = 0u; m < LPR; m++) {
            let j = lid + m * WG_SIZE;
            let wi = word0 + i32(j);
            if j < NW && (inside || (r < ny && wi >= 0 && wi < row_words_in)) {
                // Row y0 + r < rows, word 0 <= wi < the row's: a word of the image;
                // r LPR + m < R LPR <= 32.
                pre[r * LPR + m] = src[(y0 + r) * u32(row_words_in) + u32(wi)];
            }
        }
    }
    for (var r = 0u; r < R; r++) {
        for (var m = 0u; m < LPR; m++) {
            let j = lid + m * WG_SIZE;
            let wi = word0 + i32(j);
            if j < NW && (inside || (r < ny && wi >= 0 && wi < row_words_in)) {
                var v = pre[r * LPR + m];
                if PREMULTIPLY {
                    if CHANNELS == 2u {
                        v = premultiply_pixel(v & 0xffffu) | (premultiply_pixel(v >> 16u) << 16u);
                    } else {
                        v = premultiply_pixel(v);
                    }
                }
                // r < ny <= R, j < NW <= IN_STRIDE.
                sh[r * IN_STRIDE + j] = v;
            }
        }
    }
}

// The sums of a thread's pixels, row j's four at 4 j to 4 j + 3, each started from
// `rounding()`: the thread's group `wg` (its weights' column in `weights`), its group's
// first word `base` in a row of `sh`, its first row `rg`. A regular group (`regular`, a
// constant where this is called) multiplies by the constants KW, the others by the weights
// they load.
fn walk(regular: bool, wg: u32, base: u32, rg: u32) -> array<vec4<i32>, 32> {
    var acc: array<vec4<i32>, 32>;
    for (var j = 0u; j < 4u * RPT; j++) {
        acc[j] = vec4<i32>(rounding());
    }
    for (var w = 0u; w < W; w++) {
        // Window position w is column k's tap w - S k, where that is one of its K.
        var k4: vec4<i32>;
        if regular {
            let iw = i32(w);
            let s = i32(S);
            k4 = vec4<i32>(kw(iw, K), kw(iw - s, K), kw(iw - 2 * s, K), kw(iw - 3 * s, K));
        } else {
            // w < W window positions, wg < groups.
            k4 = weights[w * params.groups + wg];
        }
        // Window pixel w: at byte b of the group's words, in one word, or two where an RGB
        // pixel straddles them (b % 4 > 1).
        let b = OFF0 + CHANNELS * w;
        let shift = (b % 4u) * 8u;
        for (var j = 0u; j < RPT; j++) {
            // Row rg + j * G < R; the pixel's words end at most at word
            // (OFF0 + CHANNELS * (4 S (TG - 1) + W) - 1) / 4 = (OFF0 + CHANNELS * SPAN - 1) / 4
            // < NW <= IN_STRIDE.
            let at = (rg + j * G) * IN_STRIDE + base + b / 4u;
            var v = sh[at] >> shift;
            if CHANNELS == 3u && shift > 8u {
                v |= sh[at + 1u] << (32u - shift);
            }
            let px = lanes(v);
            for (var k = 0u; k < 4u; k++) {
                if w >= S * k && w < S * k + K {
                    acc[j * 4u + k] += px * k4[k];
                }
            }
        }
    }
    return acc;
}

@compute @workgroup_size(WG_SIZE)
fn main(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let ty = wid.y + wid.z * nwg.y;
    if ty >= params.tile_rows {
        return;
    }
    let gx0 = wid.x * TG;
    let y0 = ty * R;
    let ny = min(R, params.rows - y0);
    // The tile's first window pixel, 4 S pixels a group on from column 0's, and the first
    // word (of its row) that holds it: the byte offset is signed (the first window may start
    // left of the image), its word rounded down.
    let first = params.first0 + i32(4u * S * gx0);
    let word0 = (first * i32(CHANNELS)) >> 2u;
    let row_words_in = i32(params.in_w * CHANNELS / 4u);

    // The tile's words; a tile inside the image (all its rows, all their words) checks none.
    if ny == R && word0 >= 0 && word0 + i32(NW) <= row_words_in {
        copy_tile(true, y0, ny, word0, row_words_in, lid);
    } else {
        copy_tile(false, y0, ny, word0, row_words_in, lid);
    }
    workgroupBarrier();

    // This thread's group and its first row. A group past the row's reads the last group's
    // weights and writes nothing.
    let warp = lid / 32u;
    let lane = lid % 32u;
    let blocks = TG / GU;
    let g = (warp % blocks) * GU + lane % GU;
    let rg = (warp / blocks) * (32u / GU) + lane / GU;
    let wg = min(gx0 + g, params.groups - 1u);
    // The group's first window pixel starts at byte OFF0 of word S CHANNELS g of the row.
    let base = S * CHANNELS * g;
    var acc: array<vec4<i32>, 32>;
    if REGULAR && gx0 + g >= params.reg_lo && gx0 + g < params.reg_hi {
        acc = walk(true, wg, base, rg);
    } else {
        acc = walk(false, wg, base, rg);
    }

    // The group's pixels, packed: four pixels of CHANNELS bytes make CHANNELS words, staged
    // in `res` a tile row after another, then written a row at a time (coalesced; each
    // thread writing its own words where they lie was 2% slower, call FC).
    for (var j = 0u; j < RPT; j++) {
        let r = rg + j * G;
        let p0 = finish_pixel(acc[j * 4u]);
        let p1 = finish_pixel(acc[j * 4u + 1u]);
        let p2 = finish_pixel(acc[j * 4u + 2u]);
        let p3 = finish_pixel(acc[j * 4u + 3u]);
        var words = vec4<u32>(p0, p1, p2, p3);
        if CHANNELS == 3u {
            words = vec4<u32>(p0 | (p1 << 24u), (p1 >> 8u) | (p2 << 16u), (p2 >> 16u) | (p3 << 8u), 0u);
        } else if CHANNELS == 2u {
            words = vec4<u32>(p0 | (p1 << 16u), p2 | (p3 << 16u), 0u, 0u);
        } else if CHANNELS == 1u {
            words = vec4<u32>(p0 | (p1 << 8u) | (p2 << 16u) | (p3 << 24u), 0u, 0u, 0u);
        }
        for (var i = 0u; i < CHANNELS; i++) {
            // r < R, g * CHANNELS + i < TG * CHANNELS <= OUT_STRIDE.
            res[r * OUT_STRIDE + g * CHANNELS + i] = words[i];
        }
    }
    workgroupBarrier();

    // The tile's words a row after another, those before the row's end: the group's words
    // lie in its row from word (gx0 + g) * CHANNELS on, and a row ends on a word, so a word
    // before the row's end holds only the row's columns.
    let row_words = params.out_w * CHANNELS / 4u;
    let wpr = TG * CHANNELS;
    let nw = min(wpr, row_words - gx0 * CHANNELS);
    if ny == R && nw == wpr {
        // A whole tile: a loop of a constant count, unrolled, no word checked but those past
        // the tile's last where the threads do not divide it (2-3% faster, call FU).
        for (var i = 0u; i < (R * wpr + WG_SIZE - 1u) / WG_SIZE; i++) {
            let e = lid + i * WG_SIZE;
            if e < R * wpr {
                let r = e / wpr;
                let w = e - r * wpr;
                // r < R, w < wpr <= OUT_STRIDE; row y0 + r < rows, word
                // gx0 * CHANNELS + w < row_words.
                dst[(y0 + r) * row_words + gx0 * CHANNELS + w] = res[r * OUT_STRIDE + w];
            }
        }
        return;
    }
    for (var e = lid; e < ny * wpr; e += WG_SIZE) {
        let r = e / wpr;
        let w = e - r * wpr;
        if w < nw {
            // r < ny <= R, w < wpr <= OUT_STRIDE; row y0 + r < rows, word
            // gx0 * CHANNELS + w < row_words.
            dst[(y0 + r) * row_words + gx0 * CHANNELS + w] = res[r * OUT_STRIDE + w];
        }
    }
}
