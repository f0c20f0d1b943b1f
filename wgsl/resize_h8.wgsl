// resize_h8: the horizontal 1-D pass of Pillow's resampling over 8-bit samples, for outputs
// whose rows end on a word. A workgroup makes a tile of TW output columns by R rows: it loads
// the input span those columns read, R rows of it, into workgroup memory once (a pixel a
// word, premultiplied where the image has alpha), then a thread sums one column of RPT rows,
// each weight read once for all of them (from global memory, where neighbouring threads read
// neighbouring words), and the tile's pixels are packed into words and written coalesced.
//
// Every column sums KSIZE taps, Pillow's ksize: the taps past a column's own count have
// weight 0 (the weights are zero-padded to ksize), so what they read adds nothing, and the
// tap loop has a constant count the compiler unrolls. The samples are summed as i32 (a
// product reaches 255 * 2^22: f32 would round it), in CHANNELS lanes (the others constant 0).
//
// Workgroup memory: `sh`, the input (row r of the tile at r * IN_STRIDE, its first pixel the
// first column's first tap), with KSIZE words of slack past the last row (the padded taps of
// the last row's last columns read there, with weight 0); `res`, the tile's output pixels.
// Layout and sizes: `RowsLayout` in src/ops/resize/rows.rs.
//
// The module is built without bounds checks (`Gpu::kernel_unchecked`): every index below is
// in range by construction, given what the plan guarantees (every column's count at least 1
// and its taps inside the input row, start and end moving right with the column; the
// output rows ending on a word; span at most IN_STRIDE; the loads' groups cover the tile:
// RW * (WG_SIZE / LPR) >= R rows, PQ * LPR >= span pixels, RW * PQ <= 32). Each index
// says why where it is made.

// import: resize_math
// import: grid

// Its Rust twin is `RowsParams` in src/ops/resize/rows.rs (the shader test checks their
// fields).
struct Params {
    // Pixels per input row and per output row (the output columns: the stride between taps
    // in `weights`).
    in_w: u32,
    out_w: u32,
    // Rows, the same in the input and the output.
    rows: u32,
    // Tiles along a row, and in all.
    tiles_x: u32,
    n_tiles: u32,
    _pad0: u32,
    _pad1: u32,
    _pad2: u32,
}

@group(0) @binding(0) var<uniform> params: Params;
// Input samples, packed little-endian, 4 a word.
@group(0) @binding(1) var<storage, read> src: array<u32>;
// Per output column: the first input column it reads, and how many.
@group(0) @binding(2) var<storage, read> bounds: array<u32>;
// Weights in units of 2^-22, tap-major: tap t of column x at t * out_w + x.
@group(0) @binding(3) var<storage, read> weights: array<i32>;
// Output samples, packed as the input's.
@group(0) @binding(4) var<storage, read_write> dst: array<u32>;

override WG_SIZE: u32 = 256u;
// Output columns a workgroup (a power of two, at least WG_SIZE / 8 and 4), and columns a
// warp covers (a power of two dividing TW, at least TW / 8): a warp sums GU columns of
// 32 / GU rows, so that at a reduction of 2 (4) the input it reads spreads over the banks.
override TW: u32 = 64u;
override GU: u32 = 32u;
// Rows a thread sums (at most 8).
override RPT: u32 = 4u;
// Taps a column (Pillow's ksize).
override KSIZE: u32;
// Words an input row takes in `sh` (odd, at least the widest tile's span).
override IN_STRIDE: u32;
// The input's loads: the threads in groups of LPR (a power of two, at least 4), group g
// loading rows g, g + WG_SIZE / LPR, ... (RW of them), a thread every LPR-th pixel of a row
// (PQ of them): RW * PQ pixels a thread, at most 32.
override LPR: u32;
override RW: u32;
override PQ: u32;

// Rows a round of the workgroup's threads, and rows a tile.
override G: u32 = WG_SIZE / TW;
override R: u32 = G * RPT;

var<workgroup> sh: array<u32, R * IN_STRIDE + KSIZE>;
var<workgroup> res: array<u32, R * TW>;

// The input pixels a thread loads, as loaded: a pixel's word (where an RGB pixel straddles
// two, the second in `pre_hi`).
var<private> pre_lo: array<u32, 32>;
var<private> pre_hi: array<u32, 32>;

@compute @workgroup_size(WG_SIZE)
fn main(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let t = workgroup_index(wid, nwg);
    if t >= params.n_tiles {
        return;
    }
    let ty = t / params.tiles_x;
    let x0 = (t - ty * params.tiles_x) * TW;
    let y0 = ty * R;
    let nx = min(TW, params.out_w - x0);
    let ny = min(R, params.rows - y0);
    // Both ends of the taps move right with the column, so the first column's first tap and
    // the last one's last tap bound the span (x0 <= last < out_w: the tile is inside the
    // grid). span >= 1 (counts are at least 1) and at most IN_STRIDE (the widest tile's).
    let first = bounds[2u * x0];
    let last = x0 + nx - 1u;
    let span = bounds[2u * last] + min(bounds[2u * last + 1u], KSIZE) - first;

    // The input, a pixel a word, the tile's rows one after another. A thread's pixels of a
    // row lie LPR apart, a multiple of 4 pixels, so they start at the same byte of a word:
    // one word's shift for all of them, and a second word only where a 3-byte pixel
    // straddles two (it starts at byte 2 or 3). All of a thread's loads are issued before
    // the first is stored, so that they are in flight together.
    let g = lid / LPR;
    let gl = lid % LPR;
    let step = LPR * CHANNELS / 4u;
    for (var j = 0u; j < RW; j++) {
        let r = g + j * (WG_SIZE / LPR);
        // Row y0 + r < rows, column first + q < first + span <= in_w (q = gl + i * LPR):
        // a pixel of the image, whose bytes lie in src's words; a straddling RGB pixel ends
        // in the word after its first.
        let b = ((y0 + r) * params.in_w + first + gl) * CHANNELS;
        for (var i = 0u; i < PQ; i++) {
            if r < ny && gl + i * LPR < span {
                let w = b / 4u + i * step;
                pre_lo[j * PQ + i] = src[w];
                if CHANNELS == 3u && b % 4u > 1u {
                    pre_hi[j * PQ + i] = src[w + 1u];
                }
            }
        }
    }
    for (var j = 0u; j < RW; j++) {
        let r = g + j * (WG_SIZE / LPR);
        let shift = ((((y0 + r) * params.in_w + first + gl) * CHANNELS) % 4u) * 8u;
        for (var i = 0u; i < PQ; i++) {
            let q = gl + i * LPR;
            if r < ny && q < span {
                var v = pre_lo[j * PQ + i] >> shift;
                if CHANNELS == 3u && shift > 8u {
                    v |= pre_hi[j * PQ + i] << (32u - shift);
                }
                v &= 0xffffffffu >> ((4u - CHANNELS) * 8u);
                if PREMULTIPLY {
                    v = premultiply_pixel(v);
                }
                // r < ny <= R, q < span <= IN_STRIDE.
                sh[r * IN_STRIDE + q] = v;
            }
        }
    }
    workgroupBarrier();

    // This thread's column and its first row; a column past the tile's reads the last
    // column's taps and writes nothing.
    let warp = lid / 32u;
    let lane = lid % 32u;
    let blocks = TW / GU;
    let c = (warp % blocks) * GU + lane % GU;
    let rg = (warp / blocks) * (32u / GU) + lane / GU;
    let x = min(x0 + c, last);
    let s = bounds[2u * x] - first;
    var acc: array<vec4<i32>, 8>;
    for (var j = 0u; j < RPT; j++) {
        acc[j] = vec4<i32>(rounding());
    }
    // Tap i < KSIZE of column x < out_w: inside the tap-major weights (KSIZE x out_w). The
    // row rg + j * G < R; s + i <= span - 1 + KSIZE - 1 (the column's taps end inside the
    // span), so the index stays below R * IN_STRIDE + KSIZE, the size of `sh`.
    for (var i = 0u; i < KSIZE; i++) {
        let k = weights[i * params.out_w + x];
        for (var j = 0u; j < RPT; j++) {
            acc[j] += lanes(sh[(rg + j * G) * IN_STRIDE + s + i]) * k;
        }
    }
    for (var j = 0u; j < RPT; j++) {
        let r = rg + j * G;
        if r < ny && c < nx {
            // r < R, c < TW.
            res[r * TW + c] = finish_pixel(acc[j]);
        }
    }
    workgroupBarrier();

    // The tile's words, a row's after another: a tile's row starts on a word (TW is a
    // multiple of 4, a row ends on one) and ends on one (the last tile's ends with the row).
    let wpr = TW * CHANNELS / 4u;
    let nw = nx * CHANNELS / 4u;
    let row_words = params.out_w * CHANNELS / 4u;
    for (var e = lid; e < ny * wpr; e += WG_SIZE) {
        let r = e / wpr;
        let w = e - r * wpr;
        if w < nw {
            // The word's bytes lie in at most two pixels of 2 or 3 channels (four of 1), from
            // pixel p's lane l on, each read once; a pixel's lanes past CHANNELS are 0.
            let b = 4u * w;
            let p = b / CHANNELS;
            let l = b - p * CHANNELS;
            let at = r * TW + p;
            var word: u32;
            if CHANNELS == 4u {
                word = res[at];
            } else if CHANNELS == 3u {
                word = (res[at] >> (8u * l)) | (res[at + 1u] << (8u * (3u - l)));
            } else if CHANNELS == 2u {
                word = res[at] | (res[at + 1u] << 16u);
            } else {
                word = res[at] | (res[at + 1u] << 8u) | (res[at + 2u] << 16u) | (res[at + 3u] << 24u);
            }
            // Every pixel read is below nx: the last one holds the word's last byte, and
            // b + 3 < nw * 4 = nx * CHANNELS. The word lies in row y0 + r < rows, at most
            // (x0 + nx) * CHANNELS / 4 <= row_words into it.
            dst[(y0 + r) * row_words + x0 * CHANNELS / 4u + w] = word;
        }
    }
}
