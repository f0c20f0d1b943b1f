// compare: per-pixel differences of two images over one strip of rows, summed per workgroup
// (exact integer counts and sums), and the diff image.

// Keep in sync with `Params` in src/ops/compare/gpu.rs.
struct Params {
    // The whole image's size.
    width: u32,
    height: u32,
    // The rows this strip compares: [row0, row0 + rows).
    row0: u32,
    rows: u32,
    // The first row held in `a` and `b` (the strip and up to two rows of halo each side,
    // which anti-aliasing detection reads).
    buf_row0: u32,
    // Bit 0: perceptual distance (else exact equality); bit 1: anti-aliasing detection;
    // bit 2: draw the diff image.
    flags: u32,
    // Rectangles in `ignore`.
    n_ignore: u32,
    // The perceptual threshold T as a 64-bit integer: a pixel differs when D > T.
    t_lo: u32,
    t_hi: u32,
}

@group(0) @binding(0) var<uniform> params: Params;
// The expected and actual images' rows, samples interleaved, packed little-endian into words.
@group(0) @binding(1) var<storage, read> a: array<u32>;
@group(0) @binding(2) var<storage, read> b: array<u32>;
// Ignored rectangles, (x1, y1, x2, y2) inclusive.
@group(0) @binding(3) var<storage, read> ignore: array<vec4<u32>>;
// PART_WORDS words per workgroup; see `sum_partials` in src/ops/compare/gpu.rs for the layout.
@group(0) @binding(4) var<storage, read_write> partials: array<u32>;
// The diff image's pixels for this strip, RGBA8 packed (R in the low byte).
@group(0) @binding(5) var<storage, read_write> diff: array<u32>;

const WG_SIZE: u32 = 256u;
// Pixels per invocation: a workgroup compares WG_SIZE * PER_THREAD consecutive pixels.
const PER_THREAD: u32 = 16u;
// Words of one workgroup's partial: per channel (differing, max, sum_abs, sum_sq lo, sum_sq hi),
// then differing pixels, anti-aliased pixels, ignored pixels.
const PART_WORDS: u32 = 24u;

// Samples per pixel: 1 gray, 2 gray+alpha, 3 RGB, 4 RGBA.
override CHANNELS: u32 = 4u;
// Bits per sample: 8 or 16.
override BITS: u32 = 8u;

const PERCEPTUAL: u32 = 1u;
const ANTIALIASING: u32 = 2u;
const DRAW: u32 = 4u;

// YIQ coefficients of pixelmatch scaled by 1024 and rounded (I and Q sum to 0, Y to 1024),
// and the weights of Y^2, I^2, Q^2 in the distance scaled by 1024.
// Keep in sync with YIQ_* in src/ops/compare/mod.rs.
const YIQ_Y: vec3<i32> = vec3<i32>(306, 601, 117);
const YIQ_I: vec3<i32> = vec3<i32>(610, -281, -329);
const YIQ_Q: vec3<i32> = vec3<i32>(216, -535, 319);
const YIQ_W: vec3<u32> = vec3<u32>(517u, 306u, 200u);

const RED: u32 = 0xff0000ffu;
const YELLOW: u32 = 0xff00ffffu;

var<workgroup> sh_part: array<atomic<u32>, PART_WORDS>;

// Sample s (pixel * CHANNELS + channel, counted from buf_row0) of a or b.
fn sample_a(s: u32) -> u32 {
    if BITS == 8u {
        return (a[s >> 2u] >> ((s & 3u) * 8u)) & 0xffu;
    }
    return (a[s >> 1u] >> ((s & 1u) * 16u)) & 0xffffu;
}

fn sample_b(s: u32) -> u32 {
    if BITS == 8u {
        return (b[s >> 2u] >> ((s & 3u) * 8u)) & 0xffu;
    }
    return (b[s >> 1u] >> ((s & 1u) * 16u)) & 0xffffu;
}

// The samples of pixel (x, y) of image `img` (0: a, 1: b); channels past CHANNELS are 0.
fn pixel(img: u32, x: u32, y: u32) -> vec4<u32> {
    let base = ((y - params.buf_row0) * params.width + x) * CHANNELS;
    var p = vec4<u32>(0u);
    for (var c = 0u; c < CHANNELS; c++) {
        if img == 0u {
            p[c] = sample_a(base + c);
        } else {
            p[c] = sample_b(base + c);
        }
    }
    return p;
}

// The pixel as 8-bit RGBA: gray spread to R = G = B, opaque without alpha, 16-bit samples
// rounded to 8 bits. The CPU mirror is `rgba8`.
fn rgba8(p: vec4<u32>) -> vec4<u32> {
    var q = p;
    if BITS == 16u {
        q = (p * 255u + 32767u) / 65535u;
    }
    switch CHANNELS {
        case 1u: { return vec4<u32>(q.x, q.x, q.x, 255u); }
        case 2u: { return vec4<u32>(q.x, q.x, q.x, q.y); }
        case 3u: { return vec4<u32>(q.xyz, 255u); }
        default: { return q; }
    }
}

// Colour blended over white by alpha, in units of 1/255: c * a + 255 * (255 - a).
fn blended(p: vec4<u32>) -> vec3<i32> {
    return vec3<i32>(p.xyz * p.w + 255u * (255u - p.w));
}

// 32 x 32 -> 64-bit product as (low, high) words.
fn mul_wide(x: u32, y: u32) -> vec2<u32> {
    let x0 = x & 0xffffu;
    let x1 = x >> 16u;
    let y0 = y & 0xffffu;
    let y1 = y >> 16u;
    let p00 = x0 * y0;
    let p01 = x0 * y1;
    let p10 = x1 * y0;
    let mid = (p00 >> 16u) + (p01 & 0xffffu) + (p10 & 0xffffu);
    return vec2<u32>((p00 & 0xffffu) | (mid << 16u), x1 * y1 + (p01 >> 16u) + (p10 >> 16u) + (mid >> 16u));
}

fn add64(x: vec2<u32>, y: vec2<u32>) -> vec2<u32> {
    let lo = x.x + y.x;
    return vec2<u32>(lo, x.y + y.y + select(0u, 1u, lo < x.x));
}

// w * v^2 for |v| < 2^27 and w < 2^10 (the product stays below 2^64).
fn weighted_square(v: i32, w: u32) -> vec2<u32> {
    let s = mul_wide(u32(abs(v)), u32(abs(v)));
    let lo = mul_wide(s.x, w);
    return vec2<u32>(lo.x, lo.y + s.y * w);
}

// pixelmatch's YIQ distance of two 8-bit RGBA pixels as the integer D; the CPU mirror is
// `distance`.
fn distance(p: vec4<u32>, q: vec4<u32>) -> vec2<u32> {
    let d = blended(p) - blended(q);
    let y = dot(YIQ_Y, d);
    let i = dot(YIQ_I, d);
    let qq = dot(YIQ_Q, d);
    return add64(add64(weighted_square(y, YIQ_W.x), weighted_square(i, YIQ_W.y)), weighted_square(qq, YIQ_W.z));
}

// pixelmatch's brightness delta (Y only) of two pixels of one image: 0 when they are equal.
fn brightness_delta(p: vec4<u32>, q: vec4<u32>) -> i32 {
    if all(p == q) {
        return 0;
    }
    return dot(YIQ_Y, blended(rgba8(p)) - blended(rgba8(q)));
}

// Whether pixel (x1, y1) of `img` has 3 or more neighbours of exactly its value (pixels on
// the image's edge count one extra). pixelmatch's `hasManySiblings`.
fn has_many_siblings(img: u32, x1: u32, y1: u32) -> bool {
    let x0 = max(x1, 1u) - 1u;
    let y0 = max(y1, 1u) - 1u;
    let x2 = min(x1 + 1u, params.width - 1u);
    let y2 = min(y1 + 1u, params.height - 1u);
    let v = pixel(img, x1, y1);
    var zeroes = select(0u, 1u, x1 == x0 || x1 == x2 || y1 == y0 || y1 == y2);
    for (var x = x0; x <= x2; x++) {
        for (var y = y0; y <= y2; y++) {
            if x == x1 && y == y1 {
                continue;
            }
            if all(pixel(img, x, y) == v) {
                zeroes += 1u;
            }
            if zeroes > 2u {
                return true;
            }
        }
    }
    return false;
}

// Whether pixel (x1, y1) of `img` looks anti-aliased: pixelmatch's `antialiased`, with
// `img` and `other` its two images.
fn antialiased(img: u32, other: u32, x1: u32, y1: u32) -> bool {
    let x0 = max(x1, 1u) - 1u;
    let y0 = max(y1, 1u) - 1u;
    let x2 = min(x1 + 1u, params.width - 1u);
    let y2 = min(y1 + 1u, params.height - 1u);
    let centre = pixel(img, x1, y1);
    var zeroes = select(0u, 1u, x1 == x0 || x1 == x2 || y1 == y0 || y1 == y2);
    var lo = 0;
    var hi = 0;
    var lo_at = vec2<u32>(0u);
    var hi_at = vec2<u32>(0u);
    for (var x = x0; x <= x2; x++) {
        for (var y = y0; y <= y2; y++) {
            if x == x1 && y == y1 {
                continue;
            }
            let delta = brightness_delta(centre, pixel(img, x, y));
            if delta == 0 {
                zeroes += 1u;
                if zeroes > 2u {
                    return false;
                }
            } else if delta < lo {
                lo = delta;
                lo_at = vec2<u32>(x, y);
            } else if delta > hi {
                hi = delta;
                hi_at = vec2<u32>(x, y);
            }
        }
    }
    if lo == 0 || hi == 0 {
        return false;
    }
    return (has_many_siblings(img, lo_at.x, lo_at.y) && has_many_siblings(other, lo_at.x, lo_at.y))
        || (has_many_siblings(img, hi_at.x, hi_at.y) && has_many_siblings(other, hi_at.x, hi_at.y));
}

fn ignored(x: u32, y: u32) -> bool {
    for (var i = 0u; i < params.n_ignore; i++) {
        let r = ignore[i];
        if x >= r.x && x <= r.z && y >= r.y && y <= r.w {
            return true;
        }
    }
    return false;
}

// The faded gray of the expected pixel that the diff image shows where nothing differs:
// pixelmatch's 0.1-alpha gray, 255 - (255 - luma) * alpha / 2550 rounded.
fn faded(p: vec4<u32>) -> u32 {
    let luma = (306u * p.x + 601u * p.y + 117u * p.z + 512u) >> 10u;
    let g = 255u - ((255u - luma) * p.w + 1275u) / 2550u;
    return g | (g << 8u) | (g << 16u) | 0xff000000u;
}

@compute @workgroup_size(WG_SIZE)
fn main(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let group = workgroup_index(wid, nwg);
    if lid < PART_WORDS {
        atomicStore(&sh_part[lid], 0u);
    }
    workgroupBarrier();
    let n = params.rows * params.width;
    let perceptual = (params.flags & PERCEPTUAL) != 0u;
    let aa = (params.flags & ANTIALIASING) != 0u;
    let draw = (params.flags & DRAW) != 0u;
    let threshold = vec2<u32>(params.t_lo, params.t_hi);
    var differing = vec4<u32>(0u);
    var max_abs = vec4<u32>(0u);
    var sum_abs = vec4<u32>(0u);
    var sum_sq = array<vec2<u32>, 4>();
    var px_differing = 0u;
    var px_aa = 0u;
    var px_ignored = 0u;
    let start = group * WG_SIZE * PER_THREAD + lid;
    for (var k = 0u; k < PER_THREAD; k++) {
        let p = start + k * WG_SIZE;
        if p >= n {
            break;
        }
        let x = p % params.width;
        let y = params.row0 + p / params.width;
        let pa = pixel(0u, x, y);
        let pb = pixel(1u, x, y);
        let a8 = rgba8(pa);
        var colour = faded(a8);
        if ignored(x, y) {
            px_ignored += 1u;
        } else {
            let d = max(pa, pb) - min(pa, pb);
            differing += select(vec4<u32>(0u), vec4<u32>(1u), d != vec4<u32>(0u));
            max_abs = max(max_abs, d);
            sum_abs += d;
            for (var c = 0u; c < CHANNELS; c++) {
                sum_sq[c] = add64(sum_sq[c], vec2<u32>(d[c] * d[c], 0u));
            }
            var differs = any(d != vec4<u32>(0u));
            if perceptual && differs {
                let dist = distance(a8, rgba8(pb));
                differs = dist.y > threshold.y || (dist.y == threshold.y && dist.x > threshold.x);
            }
            if differs {
                if aa && (antialiased(0u, 1u, x, y) || antialiased(1u, 0u, x, y)) {
                    px_aa += 1u;
                    colour = YELLOW;
                } else {
                    px_differing += 1u;
                    colour = RED;
                }
            }
        }
        if draw {
            diff[p] = colour;
        }
    }
    for (var c = 0u; c < CHANNELS; c++) {
        atomicAdd(&sh_part[c * 5u], differing[c]);
        atomicMax(&sh_part[c * 5u + 1u], max_abs[c]);
        atomicAdd(&sh_part[c * 5u + 2u], sum_abs[c]);
        let old = atomicAdd(&sh_part[c * 5u + 3u], sum_sq[c].x);
        atomicAdd(&sh_part[c * 5u + 4u], sum_sq[c].y + select(0u, 1u, old + sum_sq[c].x < old));
    }
    atomicAdd(&sh_part[20], px_differing);
    atomicAdd(&sh_part[21], px_aa);
    atomicAdd(&sh_part[22], px_ignored);
    workgroupBarrier();
    // A 2-D grid may have a few workgroups past the last one: they write nothing.
    let groups = (n + WG_SIZE * PER_THREAD - 1u) / (WG_SIZE * PER_THREAD);
    if lid < PART_WORDS && group < groups {
        partials[group * PART_WORDS + lid] = atomicLoad(&sh_part[lid]);
    }
}

// import: grid
