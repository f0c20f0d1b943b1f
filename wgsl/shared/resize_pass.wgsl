// resize_pass: what both 1-D passes of Pillow's resampling (wgsl/resize_h.wgsl,
// wgsl/resize_v.wgsl) share: the parameters and bindings, the packed 8- or 16-bit samples,
// alpha, the integer weighted sum, and an output sample computed with every tap read from
// global memory (the path of inputs too long for a workgroup's memory).

// Its Rust twin is `ResizeParams` in src/ops/resize/plan.rs (the shader test checks their
// fields).
struct Params {
    // Pixels per input row.
    in_w: u32,
    // Pixels per output row.
    out_w: u32,
    // Weights reserved per output position (Pillow's ksize).
    ksize: u32,
    // Output samples, and the words they are packed in.
    n_samples: u32,
    n_words: u32,
    // Output positions along the pass (columns of a horizontal pass, rows of a vertical
    // one): the stride between taps in `weights`.
    n_pos: u32,
    // Horizontal pass: the output words each workgroup writes.
    wg_words: u32,
    _pad0: u32,
}

@group(0) @binding(0) var<uniform> params: Params;
// Input samples, packed little-endian, 32 / DEPTH a word.
@group(0) @binding(1) var<storage, read> src: array<u32>;
// Per output position: the first input position it reads, and how many. (The vertical
// word columns of wgsl/resize_v8.wgsl get their window's first row and ksize
// instead: `taps` does not apply there.)
@group(0) @binding(2) var<storage, read> bounds: array<u32>;
// Weights in units of 2^-22, tap-major: tap t of output position p at t * n_pos + p, so
// that neighbouring threads read neighbouring words. (Position-major for the vertical word
// columns of wgsl/resize_v8.wgsl: `weight` does not apply there.)
@group(0) @binding(3) var<storage, read> weights: array<i32>;
// Output samples, packed as the input's.
@group(0) @binding(4) var<storage, read_write> dst: array<u32>;

// import: resize_math

// Input sample i, as stored.
fn load(i: u32) -> u32 {
    let per = 32u / DEPTH;
    return (src[i / per] >> ((i % per) * DEPTH)) & max_value();
}

// Input sample i as the pass sums it: premultiplied by its pixel's alpha in the first pass
// of an image with alpha.
fn input(i: u32) -> u32 {
    let v = load(i);
    if PREMULTIPLY {
        let ch = i % CHANNELS;
        if ch != CHANNELS - 1u {
            return premultiply(v, load(i - ch + CHANNELS - 1u));
        }
    }
    return v;
}

// Weight t of output position pos.
fn weight(pos: u32, t: u32) -> i32 {
    return weights[t * params.n_pos + pos];
}

// Taps of output position pos: its first input position and how many (at most ksize).
fn taps(pos: u32) -> vec2<u32> {
    return vec2<u32>(bounds[2u * pos], min(bounds[2u * pos + 1u], params.ksize));
}

// Output sample s with every tap read from global memory.
fn sample_global(s: u32, horizontal: bool) -> u32 {
    let p = s / CHANNELS;
    let ch = s % CHANNELS;
    let x = p % params.out_w;
    let y = p / params.out_w;
    var pos = y;
    var stride = params.in_w * CHANNELS;
    if horizontal {
        pos = x;
        stride = CHANNELS;
    }
    let span = taps(pos);
    var base = (span.x * params.in_w + x) * CHANNELS + ch;
    if horizontal {
        base = (y * params.in_w + span.x) * CHANNELS + ch;
    }
    var acc = vec2<i32>(0i, 0i);
    for (var t = 0u; t < span.y; t++) {
        acc = tap(acc, input(base + t * stride), weight(pos, t));
    }
    return finish(acc);
}
