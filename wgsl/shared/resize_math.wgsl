// resize_math: the arithmetic every resize kernel shares (wgsl/resize_h.wgsl,
// wgsl/resize_v.wgsl, wgsl/resize_h8.wgsl, wgsl/resize_h8s.wgsl, wgsl/resize_v8.wgsl): the image's layout, alpha's integer
// conversions, and a weighted sum rounded and clipped as Pillow's `clip8` does.

// Samples a pixel: 1 to 4 (alpha last).
override CHANNELS: u32 = 4u;
// Bits a sample: 8 or 16.
override DEPTH: u32 = 8u;
// The first pass of an image with alpha premultiplies its colour samples as it reads them;
// the last divides them by alpha as it writes them.
override PREMULTIPLY: bool = false;
override UNPREMULTIPLY: bool = false;

// `PRECISION_BITS` of src/ops/resize/coeffs.rs (the shader test checks they agree).
const PRECISION_BITS: u32 = 22u;

fn max_value() -> u32 {
    return (1u << DEPTH) - 1u;
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

// One tap added to a sum. 8-bit sums fit i32 (as Pillow's do, in .y); a 16-bit sample is
// summed as its high (.x) and low (.y) bytes, which together give exactly the 64-bit sum.
fn tap(acc: vec2<i32>, v: u32, k: i32) -> vec2<i32> {
    if DEPTH == 8u {
        return vec2<i32>(acc.x, acc.y + i32(v) * k);
    }
    return acc + vec2<i32>(i32(v >> 8u) * k, i32(v & 255u) * k);
}

// A sum rounded half up and clipped: (sum + 2^21) >> 22, for 16 bits
// (256 hi + lo + 2^21) >> 22 == (hi + (lo >> 8) + 2^13) >> 14, exactly.
fn finish(acc: vec2<i32>) -> u32 {
    let half = 1i << (PRECISION_BITS - 1u);
    if DEPTH == 8u {
        return u32(clamp((acc.y + half) >> PRECISION_BITS, 0i, 255i));
    }
    let m = acc.x + (acc.y >> 8u) + (half >> 8u);
    return u32(clamp(m >> (PRECISION_BITS - 8u), 0i, 65535i));
}

// The 8-bit horizontal kernels (wgsl/resize_h8.wgsl, wgsl/resize_h8s.wgsl) hold a pixel a word,
// its samples in the low CHANNELS bytes.

// A pixel's samples as four lanes (those past CHANNELS 0, so the compiler drops them).
fn lanes(px: u32) -> vec4<i32> {
    let v = vec4<u32>(px & 255u, (px >> 8u) & 255u, (px >> 16u) & 255u, px >> 24u);
    let on = vec4<u32>(0u, 1u, 2u, 3u) < vec4<u32>(CHANNELS);
    return vec4<i32>(select(vec4<u32>(), v, on));
}

// The value a sum starts from so that `clip8` rounds it half up: 2^21.
fn rounding() -> i32 {
    return 1i << (PRECISION_BITS - 1u);
}

// Four sums that started from `rounding()`, each shifted down and clipped to 8 bits as
// Pillow's clip8 does, packed into a word (lane 0 lowest).
fn clip8(acc: vec4<i32>) -> u32 {
    let v = vec4<u32>(clamp(acc >> vec4<u32>(PRECISION_BITS), vec4<i32>(0i), vec4<i32>(255i)));
    return v.x | (v.y << 8u) | (v.z << 16u) | (v.w << 24u);
}

// An output pixel from its sums, which started from `rounding()`: rounded half up and
// clipped to 8 bits (Pillow's clip8), alpha divided out where the image has it.
fn finish_pixel(acc: vec4<i32>) -> u32 {
    var px = clip8(acc);
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

// A pixel's colour samples premultiplied by its alpha (the last sample).
fn premultiply_pixel(v: u32) -> u32 {
    let a = v >> ((CHANNELS - 1u) * 8u);
    var out = a << ((CHANNELS - 1u) * 8u);
    for (var ch = 0u; ch + 1u < CHANNELS; ch++) {
        out |= premultiply((v >> (ch * 8u)) & 255u, a) << (ch * 8u);
    }
    return out;
}
