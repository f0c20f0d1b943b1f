// resize_fused: both 1-D passes of Pillow's resampling in one dispatch, for 8-bit images
// whose output rows end on a word. A workgroup makes a tile of TU x TV output positions (TU
// along the first pass's axis, TV along the second's): it loads the input its tile needs
// into workgroup memory, a pixel a word (unpacked once, premultiplied there), in chunks of
// `rv` lines along the second axis; runs the first pass's taps over each chunk into an
// intermediate of TU positions by the lines the second pass reads (each value rounded and
// clipped to 8 bits, as Pillow's intermediate image is); then the second pass's taps over
// that; and writes the tile's packed words. The first pass is the horizontal one (u = x,
// v = y) where H_FIRST, else the vertical one (u = y, v = x), in Pillow's order.
//
// Workgroup memory `sh`, laid out by `FusedLayout` in src/ops/resize/fused.rs (offsets in
// `params`, the whole size SH_WORDS): the first pass's weights tap-major (tap i of tile
// position uu at i * TU + uu), the second's at `off_w2` (i * TV + vv), the tile positions'
// first input positions at `off_s` (TU of the first pass, then TV of the second), the
// intermediate at `off_mid` (line vv of the tile's second-axis span at vv * TU + uu), the
// input chunk at `off_in` (line vv at vv * in_stride + uu), which the output tile reuses
// once the sums are done (row y at y * (TX + 1) + x).
//
// Every position sums K1 (K2) taps, Pillow's ksize: the taps past a position's own count
// have weight 0 (the weights are zero-padded to ksize), so what they read, wherever it is
// in `sh`, adds nothing, and the tap loops have a constant count the compiler unrolls.

// import: resize_math
// import: grid

// Its Rust twin is `FusedParams` in src/ops/resize/plan.rs (the shader test checks their
// fields).
struct Params {
    // Pixels per input row and per output row.
    in_w: u32,
    out_w: u32,
    // Output positions of the first and the second pass (the stride between taps in their
    // weights).
    n1: u32,
    n2: u32,
    // Tiles along the first pass's axis, and in all.
    tiles_u: u32,
    n_tiles: u32,
    // Words a line of the input chunk (at least any tile's input span, odd), and lines a
    // chunk.
    in_stride: u32,
    rv: u32,
    // Where the second pass's weights, the first input positions, the intermediate and the
    // input chunk start in `sh`.
    off_w2: u32,
    off_s: u32,
    off_mid: u32,
    off_in: u32,
}

@group(0) @binding(0) var<uniform> params: Params;
// Input samples, packed little-endian, 4 a word.
@group(0) @binding(1) var<storage, read> src: array<u32>;
// Per output position of each pass: the first input position it reads, and how many; and
// its weights in units of 2^-22, tap-major (tap t of position p at t * n + p).
@group(0) @binding(2) var<storage, read> bounds1: array<u32>;
@group(0) @binding(3) var<storage, read> weights1: array<i32>;
@group(0) @binding(4) var<storage, read> bounds2: array<u32>;
@group(0) @binding(5) var<storage, read> weights2: array<i32>;
// Output samples, packed as the input's.
@group(0) @binding(6) var<storage, read_write> dst: array<u32>;

override WG_SIZE: u32 = 256u;
// The tile: output positions along the first pass's axis and along the second's.
override TU: u32 = 32u;
override TV: u32 = 16u;
// Whether the horizontal pass comes first.
override H_FIRST: bool = true;
// Taps a position of the first and of the second pass (Pillow's ksize).
override K1: u32;
override K2: u32;
// Words of workgroup memory: `FusedLayout::words`.
override SH_WORDS: u32;

var<workgroup> sh: array<u32, SH_WORDS>;
// The tile's spans: its first input position along u and how many, its first intermediate
// line along v and how many.
var<workgroup> sh_tile: vec4<u32>;

fn taps1(p: u32) -> vec2<u32> {
    return vec2<u32>(bounds1[2u * p], min(bounds1[2u * p + 1u], K1));
}

fn taps2(p: u32) -> vec2<u32> {
    return vec2<u32>(bounds2[2u * p], min(bounds2[2u * p + 1u], K2));
}

// Input pixel p (row-major), its samples in the low bytes of a word (the rest zero), colour
// premultiplied by alpha in the first pass of an image with alpha.
fn load_pixel(p: u32) -> u32 {
    let b = p * CHANNELS;
    let shift = (b % 4u) * 8u;
    var v = src[b / 4u] >> shift;
    if shift + CHANNELS * 8u > 32u {
        v |= src[b / 4u + 1u] << (32u - shift);
    }
    v &= 0xffffffffu >> ((4u - CHANNELS) * 8u);
    if PREMULTIPLY {
        let a = v >> ((CHANNELS - 1u) * 8u);
        var out = a << ((CHANNELS - 1u) * 8u);
        for (var ch = 0u; ch + 1u < CHANNELS; ch++) {
            out |= premultiply((v >> (ch * 8u)) & 255u, a) << (ch * 8u);
        }
        v = out;
    }
    return v;
}

// A pixel's samples as four lanes.
fn lanes(px: u32) -> vec4<i32> {
    return vec4<i32>(vec4<u32>(px & 255u, (px >> 8u) & 255u, (px >> 16u) & 255u, px >> 24u));
}

// Four sums rounded half up and clipped to 8 bits (Pillow's clip8), packed into a word.
fn pack(acc: vec4<i32>) -> u32 {
    let half = 1i << (PRECISION_BITS - 1u);
    let v = vec4<u32>(clamp((acc + vec4<i32>(half)) >> vec4<u32>(PRECISION_BITS), vec4<i32>(0i), vec4<i32>(255i)));
    return v.x | (v.y << 8u) | (v.z << 16u) | (v.w << 24u);
}

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
    let tv = t / params.tiles_u;
    let u0 = (t - tv * params.tiles_u) * TU;
    let v0 = tv * TV;
    let nu_out = min(TU, params.n1 - u0);
    let nv_out = min(TV, params.n2 - v0);
    if lid == 0u {
        // Both ends of the taps move forward with the position, so the first position's
        // first tap and the last one's last tap bound the span.
        let a = taps1(u0);
        let b = taps1(u0 + nu_out - 1u);
        let c = taps2(v0);
        let d = taps2(v0 + nv_out - 1u);
        sh_tile = vec4<u32>(a.x, b.x + b.y - a.x, c.x, d.x + d.y - c.x);
    }
    for (var e = lid; e < K1 * TU; e += WG_SIZE) {
        let i = e / TU;
        let uu = e - i * TU;
        var k = 0i;
        if uu < nu_out {
            k = weights1[i * params.n1 + u0 + uu];
        }
        sh[e] = bitcast<u32>(k);
    }
    for (var e = lid; e < K2 * TV; e += WG_SIZE) {
        let i = e / TV;
        let vv = e - i * TV;
        var k = 0i;
        if vv < nv_out {
            k = weights2[i * params.n2 + v0 + vv];
        }
        sh[params.off_w2 + e] = bitcast<u32>(k);
    }
    // The first input position of each tile position (positions past the image: unused).
    for (var e = lid; e < TU + TV; e += WG_SIZE) {
        var p = v0 + e - TU;
        var n = params.n2;
        if e < TU {
            p = u0 + e;
            n = params.n1;
        }
        var s = 0u;
        if p < n {
            if e < TU {
                s = bounds1[2u * p];
            } else {
                s = bounds2[2u * p];
            }
        }
        sh[params.off_s + e] = s;
    }
    // A barrier: the weights, the first positions and the spans are in place after it.
    let tile = workgroupUniformLoad(&sh_tile);
    let ub = tile.x;
    let nu = tile.y;
    let vb = tile.z;
    let nv = tile.w;
    let stride = params.in_stride;
    let inb = params.off_in;
    let mid = params.off_mid;

    // The first pass, a chunk of lines at a time.
    for (var c = 0u; c < nv; c += params.rv) {
        let rows = min(params.rv, nv - c);
        workgroupBarrier();
        for (var e = lid; e < rows * nu; e += WG_SIZE) {
            // Neighbouring threads take neighbouring pixels of an input row.
            var uu: u32;
            var vv: u32;
            var p: u32;
            if H_FIRST {
                vv = e / nu;
                uu = e - vv * nu;
                p = (vb + c + vv) * params.in_w + ub + uu;
            } else {
                uu = e / rows;
                vv = e - uu * rows;
                p = (ub + uu) * params.in_w + vb + c + vv;
            }
            sh[inb + vv * stride + uu] = load_pixel(p);
        }
        workgroupBarrier();
        for (var e = lid; e < rows * TU; e += WG_SIZE) {
            let vv = e / TU;
            let uu = e - vv * TU;
            if uu < nu_out {
                let base = inb + vv * stride + sh[params.off_s + uu] - ub;
                var acc = vec4<i32>();
                for (var i = 0u; i < K1; i++) {
                    acc += lanes(sh[base + i]) * bitcast<i32>(sh[i * TU + uu]);
                }
                sh[mid + (c + vv) * TU + uu] = pack(acc);
            }
        }
    }
    workgroupBarrier();

    // The second pass, into the output tile (over the input chunk, done with).
    let tx = select(TV, TU, H_FIRST);
    for (var e = lid; e < TU * TV; e += WG_SIZE) {
        let vv = e / TU;
        let uu = e - vv * TU;
        if uu < nu_out && vv < nv_out {
            let base = mid + (sh[params.off_s + TU + vv] - vb) * TU + uu;
            var acc = vec4<i32>();
            for (var i = 0u; i < K2; i++) {
                acc += lanes(sh[base + i * TU]) * bitcast<i32>(sh[params.off_w2 + i * TV + vv]);
            }
            var px = pack(acc);
            if UNPREMULTIPLY {
                let a = (px >> ((CHANNELS - 1u) * 8u)) & 255u;
                var out = a << ((CHANNELS - 1u) * 8u);
                for (var ch = 0u; ch + 1u < CHANNELS; ch++) {
                    out |= unpremultiply((px >> (ch * 8u)) & 255u, a) << (ch * 8u);
                }
                px = out;
            }
            var at = vv * (tx + 1u) + uu;
            if !H_FIRST {
                at = uu * (tx + 1u) + vv;
            }
            sh[inb + at] = px;
        }
    }
    workgroupBarrier();

    // The tile's words, row by row (a row's words all inside the tile: see `FusedLayout`).
    var x0 = u0;
    var y0 = v0;
    var nx = nu_out;
    var ny = nv_out;
    if !H_FIRST {
        x0 = v0;
        y0 = u0;
        nx = nv_out;
        ny = nu_out;
    }
    let wpr = nx * CHANNELS / 4u;
    let row_words = params.out_w * CHANNELS / 4u;
    for (var e = lid; e < ny * wpr; e += WG_SIZE) {
        let r = e / wpr;
        let wd = e - r * wpr;
        let row = inb + r * (tx + 1u);
        var word = 0u;
        if CHANNELS == 4u {
            word = sh[row + wd];
        } else {
            for (var j = 0u; j < 4u; j++) {
                let b = wd * 4u + j;
                let p = b / CHANNELS;
                word |= ((sh[row + p] >> ((b - p * CHANNELS) * 8u)) & 255u) << (j * 8u);
            }
        }
        dst[(y0 + r) * row_words + x0 * CHANNELS / 4u + wd] = word;
    }
}
