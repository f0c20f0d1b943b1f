// resize_fused: both 1-D passes of Pillow's resampling in one dispatch, for 8-bit images
// whose output rows end on a word. The first pass runs along u, the second along v: u = x and
// v = y where H_FIRST (the horizontal pass first), else u = y and v = x, in Pillow's order.
//
// A workgroup makes TU output positions along u by a segment of SEG along v: it walks down
// the segment in steps of N = LPT * WG_SIZE / TU lines of the first pass's results (the
// intermediate lines, one per input line along v), each computed once and kept in a ring of
// RING lines (`mid`), and after each step makes the output lines whose taps are then all in
// the ring. While a step's first pass sums, the next step's input is already on its way into
// registers (`pre_lo`, `pre_hi`), stored into workgroup memory once the sums are done: the
// global loads overlap the arithmetic, and each step costs two barriers.
//
// A thread of the first pass keeps one position along u and sums LPT lines of it, two at a
// time, each weight read once for both. Along u, a warp covers GU positions of 32 / GU lines, so
// that at a reduction of 2 (4) the input it reads spreads over the banks of workgroup memory.
// A thread of the second pass makes four outputs: where H_FIRST four neighbours along u, one
// weight read a tap and the intermediate read as a vec4; else four neighbours along v. Their
// samples are packed into CHANNELS words and written at once.
//
// Every position sums K1 (K2) taps, Pillow's ksize: the taps past a position's own count have
// weight 0 (the weights are zero-padded to ksize), so what they read adds nothing, and the
// tap loops have a constant count the compiler unrolls. The samples are summed as i32 (a
// product reaches 255 * 2^22: f32 would round it), in CHANNELS lanes (the others constant 0).
//
// Workgroup memory `sh`, in words: the first pass's weights tap-major (tap i of position uu at
// i * TU + uu), the second's (i * SEG + vv), each segment line's first intermediate line
// (relative to the segment's first), the first output unit of each step, then the input of
// a step (line l at l * IN_STRIDE + uu, a pixel a word, premultiplied). Layout and sizes:
// `FusedLayout` in src/ops/resize/fused.rs.

// import: resize_math
// import: grid

// Its Rust twin is `FusedParams` in src/ops/resize/fused.rs (the shader test checks their
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
    _pad0: u32,
    _pad1: u32,
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
// Output positions a workgroup along u (a power of two), and along v (a multiple of 4).
override TU: u32 = 32u;
override SEG: u32 = 64u;
// Whether the horizontal pass comes first.
override H_FIRST: bool = true;
// Taps a position of the first and of the second pass (Pillow's ksize).
override K1: u32;
override K2: u32;
// Intermediate lines a thread sums a step (at most 8).
override LPT: u32 = 4u;
// Positions along u a warp of the first pass covers (a power of two dividing TU).
override GU: u32 = 32u;
// Input pixels a thread loads a step (at most 16), and the words a line of them takes in
// `sh` (odd, at least the widest tile's input span).
override PF: u32;
override IN_STRIDE: u32;
// Lines of the ring, at least N - 1 and the lines a unit of the second pass reads (one output
// line where H_FIRST, else four); and the most steps a segment takes.
override RING: u32;
override MAX_STEPS: u32;

// DEV: whether the next step's input loads while a step sums; 1 (3): the first pass (both
// passes) one tap, 2: the second pass one tap (timing only: wrong results).
override PREFETCH: bool = true;
override DIAG: u32 = 0u;
override KD1: u32 = select(K1, 1u, DIAG == 1u || DIAG == 3u);
override KD2: u32 = select(K2, 1u, DIAG == 2u || DIAG == 3u);

// Intermediate lines a step (LPT rounds of WG_SIZE / TU lines, or fewer where even one
// round's input does not fit).
override N: u32;
// Where the second pass's weights, the segment's first lines, the steps' first units and
// the input start in `sh`, and its size (K1 words of slack past the input: the padded taps
// of the last line's last positions read there, with weight 0).
override OFF_W2: u32 = K1 * TU;
override OFF_S2: u32 = OFF_W2 + K2 * SEG;
override OFF_ROWS: u32 = OFF_S2 + SEG;
override OFF_IN: u32 = OFF_ROWS + MAX_STEPS + 1u;
override SH_WORDS: u32 = OFF_IN + N * IN_STRIDE + K1;

var<workgroup> sh: array<u32, SH_WORDS>;
// The ring of intermediate lines, TU / 4 quads a line: line m at slot m % RING, and the
// first K2 - 1 slots again past the last, so that the K2 lines an output reads are
// consecutive.
var<workgroup> mid: array<vec4<u32>, (RING + K2 - 1u) * (TU / 4u)>;
// The tile's spans: its first input position along u and how many, its first intermediate
// line along v and how many.
var<workgroup> sh_tile: vec4<u32>;

// The next step's input, as loaded: a pixel's word (where an RGB pixel straddles two, the
// second in `pre_hi`).
var<private> pre_lo: array<u32, 16>;
var<private> pre_hi: array<u32, 16>;

fn taps1(p: u32) -> vec2<u32> {
    return vec2<u32>(bounds1[2u * p], min(bounds1[2u * p + 1u], K1));
}

fn taps2(p: u32) -> vec2<u32> {
    return vec2<u32>(bounds2[2u * p], min(bounds2[2u * p + 1u], K2));
}

// A pixel's samples as four lanes (those past CHANNELS 0, so the compiler drops them).
fn lanes(px: u32) -> vec4<i32> {
    let v = vec4<u32>(px & 255u, (px >> 8u) & 255u, (px >> 16u) & 255u, px >> 24u);
    let on = vec4<u32>(0u, 1u, 2u, 3u) < vec4<u32>(CHANNELS);
    return vec4<i32>(select(vec4<u32>(), v, on));
}

// Four sums rounded half up and clipped to 8 bits (Pillow's clip8), packed into a word.
fn pack(acc: vec4<i32>) -> u32 {
    let half = 1i << (PRECISION_BITS - 1u);
    let v = vec4<u32>(clamp((acc + vec4<i32>(half)) >> vec4<u32>(PRECISION_BITS), vec4<i32>(0i), vec4<i32>(255i)));
    return v.x | (v.y << 8u) | (v.z << 16u) | (v.w << 24u);
}

// An output pixel from its sums, alpha divided out where the image has it.
fn finish_pixel(acc: vec4<i32>) -> u32 {
    var px = pack(acc);
    if UNPREMULTIPLY {
        let a = (px >> ((CHANNELS - 1u) * 8u)) & 255u;
        var out = a << ((CHANNELS - 1u) * 8u);
        for (var ch = 0u; ch + 1u < CHANNELS; ch++) {
            out |= unpremultiply((px >> (ch * 8u)) & 255u, a) << (ch * 8u);
        }
        px = out;
    }
    return px;
}

// Word w of four neighbouring output pixels packed as the image is (CHANNELS words).
fn quad_word(px: array<u32, 4>, w: u32) -> u32 {
    var word = 0u;
    for (var j = 0u; j < 4u; j++) {
        let b = 4u * w + j;
        let p = b / CHANNELS;
        word |= ((px[p] >> ((b - p * CHANNELS) * 8u)) & 255u) << (j * 8u);
    }
    return word;
}

// Writes four output pixels from (x, y) on, those inside the row (a row ends on a word, so
// a word's pixels are all inside or all past it).
fn write_quad(px: array<u32, 4>, x: u32, y: u32) {
    let base = (y * params.out_w + x) * CHANNELS / 4u;
    for (var w = 0u; w < CHANNELS; w++) {
        if x + (4u * w) / CHANNELS < params.out_w {
            dst[base + w] = quad_word(px, w);
        }
    }
}

// Lines in step j (0 past the span).
fn step_lines(j: u32, span: u32) -> u32 {
    let l0 = min(j * N, span);
    return min(N, span - l0);
}

// Where a thread's share of a step's input starts: its elements are e = lid + k * WG_SIZE
// of `lines` lines of `tile.y` pixels, neighbouring threads on neighbouring pixels of an
// input row (along a line where H_FIRST, across the lines else). As (e / d, e % d) of the
// divisor d (`tile.y` where H_FIRST, `lines` else), and the step from one k to the next
// (the divisions done once, not per element).
struct Walk {
    q: u32,
    r: u32,
    dq: u32,
    dr: u32,
    d: u32,
}

fn walk(lid: u32, lines: u32, tile: vec4<u32>) -> Walk {
    let d = select(lines, tile.y, H_FIRST);
    return Walk(lid / d, lid % d, WG_SIZE / d, WG_SIZE % d, d);
}

fn next(w: Walk) -> Walk {
    var n = w;
    n.q += w.dq;
    n.r += w.dr;
    if n.r >= w.d {
        n.r -= w.d;
        n.q += 1u;
    }
    return n;
}

// A walk's element: its line and position in the step's input, and the pixel's index in the
// image; whether it is inside the step (its line below `lines`).
fn element(w: Walk, l0: u32, lines: u32, tile: vec4<u32>) -> vec4<u32> {
    if H_FIRST {
        let p = (tile.z + l0 + w.q) * params.in_w + tile.x + w.r;
        return vec4<u32>(w.q, w.r, p, u32(w.q < lines));
    }
    let p = (tile.x + w.q) * params.in_w + tile.z + l0 + w.r;
    return vec4<u32>(w.r, w.q, p, u32(w.q < tile.y));
}

// Issues the loads of step j's input into `pre_lo` and `pre_hi`.
fn prefetch(j: u32, tile: vec4<u32>, lid: u32) {
    let lines = step_lines(j, tile.w);
    if lines == 0u {
        return;
    }
    var w = walk(lid, lines, tile);
    for (var k = 0u; k < PF; k++) {
        let at = element(w, j * N, lines, tile);
        if at.w != 0u {
            let b = at.z * CHANNELS;
            pre_lo[k] = src[b / 4u];
            if CHANNELS == 3u && b % 4u > 1u {
                pre_hi[k] = src[b / 4u + 1u];
            }
        }
        w = next(w);
    }
}

// Stores what `prefetch` loaded for step j into the input lines of `sh`, a pixel a word,
// colour premultiplied by alpha in an image with alpha.
fn store(j: u32, tile: vec4<u32>, lid: u32) {
    let lines = step_lines(j, tile.w);
    if lines == 0u {
        return;
    }
    var w = walk(lid, lines, tile);
    for (var k = 0u; k < PF; k++) {
        let at = element(w, j * N, lines, tile);
        if at.w != 0u {
            let shift = ((at.z * CHANNELS) % 4u) * 8u;
            var v = pre_lo[k] >> shift;
            if CHANNELS == 3u && shift > 8u {
                v |= pre_hi[k] << (32u - shift);
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
            sh[OFF_IN + at.x * IN_STRIDE + at.y] = v;
        }
        w = next(w);
    }
}

// Intermediate line m (relative to the segment's first) at tile position uu, in the ring.
fn put_mid(m: u32, uu: u32, px: u32) {
    let slot = m % RING;
    mid[(slot * TU + uu) / 4u][uu % 4u] = px;
    if slot + 1u < K2 {
        mid[((slot + RING) * TU + uu) / 4u][uu % 4u] = px;
    }
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
    let sv = t / params.tiles_u;
    let u0 = (t - sv * params.tiles_u) * TU;
    let v0 = sv * SEG;
    let nu_out = min(TU, params.n1 - u0);
    let nv_out = min(SEG, params.n2 - v0);
    if lid == 0u {
        // Both ends of the taps move forward with the position, so the first position's
        // first tap and the last one's last tap bound the span.
        let a = taps1(u0);
        let b = taps1(u0 + nu_out - 1u);
        let c = taps2(v0);
        let d = taps2(v0 + nv_out - 1u);
        sh_tile = vec4<u32>(a.x, b.x + b.y - a.x, c.x, d.x + d.y - c.x);
    }
    // A barrier: the spans are in place after it.
    let tile = workgroupUniformLoad(&sh_tile);
    let steps = (tile.w + N - 1u) / N;
    prefetch(0u, tile, lid);

    for (var e = lid; e < K1 * TU; e += WG_SIZE) {
        let i = e / TU;
        let uu = e - i * TU;
        var k = 0i;
        if uu < nu_out {
            k = weights1[i * params.n1 + u0 + uu];
        }
        sh[e] = bitcast<u32>(k);
    }
    for (var e = lid; e < K2 * SEG; e += WG_SIZE) {
        let i = e / SEG;
        let vv = e - i * SEG;
        var k = 0i;
        if vv < nv_out {
            k = weights2[i * params.n2 + v0 + vv];
        }
        sh[OFF_W2 + e] = bitcast<u32>(k);
    }
    // The second pass makes units of one output line (where H_FIRST) or of four (else):
    // unit r is ready once the step holding its last line's last tap is done.
    let per_unit = select(4u, 1u, H_FIRST);
    let n_units = (nv_out + per_unit - 1u) / per_unit;
    for (var e = lid; e < SEG; e += WG_SIZE) {
        var s = 0u;
        if e < nv_out {
            s = taps2(v0 + e).x - tile.z;
        }
        sh[OFF_S2 + e] = s;
    }
    for (var r = lid; r < n_units; r += WG_SIZE) {
        // The step that makes unit r ready, and the one before's (-1 for the first).
        let last = min(r * per_unit + per_unit - 1u, nv_out - 1u);
        let a = taps2(v0 + last);
        let ready = (a.x + a.y - tile.z - 1u) / N;
        var before = 0u;
        if r > 0u {
            let b = taps2(v0 + r * per_unit - 1u);
            before = (b.x + b.y - tile.z - 1u) / N + 1u;
        }
        for (var j = before; j <= ready; j++) {
            sh[OFF_ROWS + j] = r;
        }
        if r + 1u == n_units {
            for (var j = ready + 1u; j <= steps; j++) {
                sh[OFF_ROWS + j] = n_units;
            }
        }
    }
    store(0u, tile, lid);

    // The first pass's thread: its position along u (fixed), its first line of a step.
    let warp = lid / 32u;
    let lane = lid % 32u;
    let blocks = TU / GU;
    let uu = (warp % blocks) * GU + lane % GU;
    let line0 = (warp / blocks) * (32u / GU) + lane / GU;
    let lines_a_round = WG_SIZE / TU;
    var s1 = 0u;
    if uu < nu_out {
        s1 = taps1(u0 + uu).x - tile.x;
    }
    let tq = TU / 4u;

    for (var j = 0u; j < steps; j++) {
        // A barrier: step j's input is in place, and the last step's outputs are made.
        workgroupBarrier();
        if PREFETCH && j + 1u < steps {
            prefetch(j + 1u, tile, lid);
        }

        // The first pass: this thread's LPT lines of the step at uu, two at a time (each
        // weight read once for both).
        let lines = step_lines(j, tile.w);
        for (var q = 0u; q < LPT; q += 2u) {
            let l = line0 + q * lines_a_round;
            let l2 = l + lines_a_round;
            let at = OFF_IN + l * IN_STRIDE + s1;
            let at2 = at + lines_a_round * IN_STRIDE;
            if q + 1u < LPT && l2 < lines {
                var a = vec4<i32>();
                var a2 = vec4<i32>();
                for (var i = 0u; i < KD1; i++) {
                    let k = bitcast<i32>(sh[i * TU + uu]);
                    a += lanes(sh[at + i]) * k;
                    a2 += lanes(sh[at2 + i]) * k;
                }
                if uu < nu_out {
                    put_mid(j * N + l, uu, pack(a));
                    put_mid(j * N + l2, uu, pack(a2));
                }
            } else if l < lines {
                var a = vec4<i32>();
                for (var i = 0u; i < KD1; i++) {
                    a += lanes(sh[at + i]) * bitcast<i32>(sh[i * TU + uu]);
                }
                if uu < nu_out {
                    put_mid(j * N + l, uu, pack(a));
                }
            }
        }
        // A barrier: the step's intermediate lines are in place, its input read.
        workgroupBarrier();
        if j + 1u < steps {
            if !PREFETCH {
                prefetch(j + 1u, tile, lid);
            }
            store(j + 1u, tile, lid);
        }

        // The second pass: the units ready after this step.
        let r0 = sh[OFF_ROWS + j];
        let r1 = sh[OFF_ROWS + j + 1u];
        if H_FIRST {
            for (var e = lid; e < (r1 - r0) * tq; e += WG_SIZE) {
                let r = r0 + e / tq;
                let q = e % tq;
                if 4u * q < nu_out {
                    let at = (sh[OFF_S2 + r] % RING) * tq + q;
                    var sum = array<vec4<i32>, 4>();
                    for (var i = 0u; i < KD2; i++) {
                        let k = bitcast<i32>(sh[OFF_W2 + i * SEG + r]);
                        let m = mid[at + i * tq];
                        sum[0] += lanes(m.x) * k;
                        sum[1] += lanes(m.y) * k;
                        sum[2] += lanes(m.z) * k;
                        sum[3] += lanes(m.w) * k;
                    }
                    var px = array<u32, 4>();
                    for (var c = 0u; c < 4u; c++) {
                        px[c] = finish_pixel(sum[c]);
                    }
                    write_quad(px, u0 + 4u * q, v0 + r);
                }
            }
        } else {
            for (var e = lid; e < (r1 - r0) * TU; e += WG_SIZE) {
                let r = r0 + e / TU;
                let u = e % TU;
                if u < nu_out {
                    var px = array<u32, 4>();
                    for (var c = 0u; c < 4u; c++) {
                        // Lines past the segment's end have first line 0 and weights 0.
                        let vv = min(4u * r + c, SEG - 1u);
                        let at = (sh[OFF_S2 + vv] % RING) * TU + u;
                        var sum = vec4<i32>();
                        for (var i = 0u; i < KD2; i++) {
                            let k = bitcast<i32>(sh[OFF_W2 + i * SEG + vv]);
                            let w = at + i * TU;
                            sum += lanes(mid[w / 4u][w % 4u]) * k;
                        }
                        px[c] = finish_pixel(sum);
                    }
                    write_quad(px, v0 + 4u * r, u0 + u);
                }
            }
        }
    }
}
