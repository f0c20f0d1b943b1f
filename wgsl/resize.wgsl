// resize: one 1-D pass of Pillow's resampling (horizontal or vertical) over packed 8- or
// 16-bit samples, with integer weights made on the host (src/ops/resize/coeffs.rs).

// import: grid

// Its Rust twin is `ResizeParams` in src/ops/resize/plan.rs (the shader test checks their fields).
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
    _pad0: u32,
    _pad1: u32,
    _pad2: u32,
}

@group(0) @binding(0) var<uniform> params: Params;
// Input samples, packed little-endian, 32 / DEPTH a word.
@group(0) @binding(1) var<storage, read> src: array<u32>;
// Per output position (column of a horizontal pass, row of a vertical one): the first input
// position it reads, and how many.
@group(0) @binding(2) var<storage, read> bounds: array<u32>;
// Per output position, ksize weights in units of 2^-22 (the first `count` used).
@group(0) @binding(3) var<storage, read> weights: array<i32>;
// Output samples, packed as the input's.
@group(0) @binding(4) var<storage, read_write> dst: array<u32>;

override WG_SIZE: u32 = 64u;
// Samples a pixel: 1 to 4 (alpha last).
override CHANNELS: u32 = 4u;
// Bits a sample: 8 or 16.
override DEPTH: u32 = 8u;
// Along rows (true) or columns.
override HORIZONTAL: bool = true;
// The first pass of an image with alpha premultiplies its colour samples as it reads them;
// the last divides them by alpha as it writes them.
override PREMULTIPLY: bool = false;
override UNPREMULTIPLY: bool = false;

// `PRECISION_BITS` of src/ops/resize/coeffs.rs (the shader test checks they agree).
const PRECISION_BITS: u32 = 22u;
// The input samples a horizontal pass's workgroup can hold (16 KiB, the WebGPU default limit).
const SH_SAMPLES: u32 = 4096u;

// A horizontal tile's input span: its first sample, and its length (0: not tiled).
var<workgroup> sh_span: vec2<u32>;
var<workgroup> sh_in: array<u32, SH_SAMPLES>;

fn max_value() -> u32 {
    return (1u << DEPTH) - 1u;
}

// Input sample i, as stored.
fn load(i: u32) -> u32 {
    let per = 32u / DEPTH;
    return (src[i / per] >> ((i % per) * DEPTH)) & max_value();
}

// c * a / max rounded: Pillow's MULDIV255 ((t >> 8) + t) >> 8, t = c * a + 128, and its
// 16-bit twin; written so that no step overflows 32 bits.
fn premultiply(c: u32, a: u32) -> u32 {
    let t = c * a + (1u << (DEPTH - 1u));
    let q = t >> DEPTH;
    return q + (((t & max_value()) + q) >> DEPTH);
}

// Pillow's rgba2rgbA: kept where alpha is 0 or full, else min(max * c / a, max).
fn unpremultiply(c: u32, a: u32) -> u32 {
    if a == 0u || a == max_value() {
        return c;
    }
    return min(max_value() * c / a, max_value());
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

// Output sample s: its weighted sum, rounded half up and clipped. 8-bit sums fit i32 (as
// Pillow's do); a 16-bit sample is summed as its high and low bytes, which together give
// exactly the 64-bit sum's (sum + 2^21) >> 22.
fn sample_at(s: u32, tile: vec2<u32>) -> u32 {
    let p = s / CHANNELS;
    let ch = s % CHANNELS;
    let x = p % params.out_w;
    let y = p / params.out_w;
    var pos = y;
    if HORIZONTAL {
        pos = x;
    }
    let first = bounds[2u * pos];
    let count = bounds[2u * pos + 1u];
    var base: u32;
    var stride: u32;
    if HORIZONTAL {
        base = (y * params.in_w + first) * CHANNELS + ch;
        stride = CHANNELS;
    } else {
        base = (first * params.in_w + x) * CHANNELS + ch;
        stride = params.in_w * CHANNELS;
    }
    let kbase = pos * params.ksize;
    var hi = 0i;
    var lo = 0i;
    for (var t = 0u; t < count; t++) {
        let i = base + t * stride;
        var v: u32;
        if tile.y > 0u {
            v = sh_in[i - tile.x];
        } else {
            v = input(i);
        }
        let k = weights[kbase + t];
        if DEPTH == 8u {
            lo += i32(v) * k;
        } else {
            hi += i32(v >> 8u) * k;
            lo += i32(v & 255u) * k;
        }
    }
    let half = 1i << (PRECISION_BITS - 1u);
    if DEPTH == 8u {
        return u32(clamp((lo + half) >> PRECISION_BITS, 0i, 255i));
    }
    // (256 hi + lo + 2^21) >> 22 == (hi + (lo >> 8) + 2^13) >> 14, exactly.
    let m = hi + (lo >> 8u) + (half >> 8u);
    return u32(clamp(m >> (PRECISION_BITS - 8u), 0i, 65535i));
}

@compute @workgroup_size(WG_SIZE)
fn main(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let wg = workgroup_index(wid, nwg);
    let per = 32u / DEPTH;
    // A horizontal pass whose workgroup's samples lie in one row reads the input span they
    // need from workgroup memory, loaded (and premultiplied) once.
    var tile = vec2<u32>(0u, 0u);
    if HORIZONTAL {
        if lid == 0u {
            var span = vec2<u32>(0u, 0u);
            let s0 = wg * WG_SIZE * per;
            if s0 < params.n_samples {
                let s1 = min(s0 + WG_SIZE * per, params.n_samples) - 1u;
                let p0 = s0 / CHANNELS;
                let p1 = s1 / CHANNELS;
                let y = p0 / params.out_w;
                if y == p1 / params.out_w {
                    let x0 = p0 % params.out_w;
                    let x1 = p1 % params.out_w;
                    let first = bounds[2u * x0];
                    let n = (bounds[2u * x1] + bounds[2u * x1 + 1u] - first) * CHANNELS;
                    if n <= SH_SAMPLES {
                        span = vec2<u32>((y * params.in_w + first) * CHANNELS, n);
                    }
                }
            }
            sh_span = span;
        }
        tile = workgroupUniformLoad(&sh_span);
        if tile.y > 0u {
            for (var i = lid; i < tile.y; i += WG_SIZE) {
                sh_in[i] = input(tile.x + i);
            }
            workgroupBarrier();
        }
    }
    let word = wg * WG_SIZE + lid;
    if word >= params.n_words {
        return;
    }
    var out = 0u;
    var alpha_px = 0xffffffffu;
    var alpha = 0u;
    for (var j = 0u; j < per; j++) {
        let s = word * per + j;
        if s >= params.n_samples {
            break;
        }
        var v = sample_at(s, tile);
        if UNPREMULTIPLY {
            let ch = s % CHANNELS;
            if ch != CHANNELS - 1u {
                let p = s / CHANNELS;
                if p != alpha_px {
                    alpha = sample_at(p * CHANNELS + CHANNELS - 1u, tile);
                    alpha_px = p;
                }
                v = unpremultiply(v, alpha);
            }
        }
        out |= v << (j * DEPTH);
    }
    dst[word] = out;
}
