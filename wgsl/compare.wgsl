// compare: per-pixel differences of two images over one strip of rows, summed per workgroup
// (exact integer counts and sums), and the diff image.
//
// Work is cut in units of 4 consecutive pixels (of the whole image, counted row after row):
// UNIT_WORDS packed words of each image, 3 words of the RGB8 diff image. A chunk is
// WG_SIZE * UNITS units, one workgroup's turn: an invocation takes UNITS units WG_SIZE units
// apart (neighbouring invocations read neighbouring words), loads their words all before
// comparing any (PRELOAD: more loads in flight) or each just before comparing it, and keeps
// its sums in registers. Workgroup g takes chunks g, g + groups, g + 2 groups, ... (one chunk
// each unless the host caps the workgroups), and reduces its sums once (compare_subgroup or
// compare_workgroup) into one partial of PART_WORDS words, summed on the host. The shape
// (WG_SIZE, UNITS, PRELOAD, the workgroups) is `ops::compare::Tunables`, which
// `gpukit tune compare` measures.

// Its Rust twin is `Params` in src/ops/compare/gpu.rs (the shader test checks their fields).
struct Params {
    // The whole image's size.
    width: u32,
    height: u32,
    // The rows this strip compares: [row0, row0 + rows).
    row0: u32,
    rows: u32,
    // The first pixel held in `a` and `b`, a multiple of 4 (they hold the strip and up to
    // two rows of halo each side, which anti-aliasing detection reads).
    buf_px0: u32,
    // Rectangles in `ignore`.
    n_ignore: u32,
    // The perceptual threshold T as a 128-bit integer, t0 its lowest word: a pixel differs
    // when its distance D > T (`threshold_units` in src/ops/compare/reference.rs).
    t0: u32,
    t1: u32,
    t2: u32,
    t3: u32,
    // Workgroups of the pass, each writing one partial; the stride of its chunks.
    groups: u32,
}

@group(0) @binding(0) var<uniform> params: Params;
// The expected and actual images (bindings 1 and 2), read a word at a time or, for layouts
// of 4 or 8 words a unit, a vec4 at a time (compare_words_vec4).
// import: compare_words
// Ignored rectangles, (x1, y1, x2, y2) inclusive.
@group(0) @binding(3) var<storage, read> ignore: array<vec4<u32>>;
// PART_WORDS words per workgroup; see `sum_partials` in src/ops/compare/gpu.rs for the layout.
@group(0) @binding(4) var<storage, read_write> partials: array<u32>;
// The diff image's units of this strip, from the one holding its first pixel: RGB8 packed,
// 4 pixels in 3 words (R of the first pixel in the low byte).
@group(0) @binding(5) var<storage, read_write> diff: array<u32>;

// Invocations per workgroup. Declared before the reduction's workgroup array that it sizes
// (naga 30 panics otherwise).
override WG_SIZE: u32 = 256u;
// Units per invocation and chunk: a chunk is WG_SIZE * UNITS units of 4 pixels. It sizes a
// function-scope array, so it is a generated const (the host rewrites this line per variant).
const UNITS: u32 = 4u;
// Whether an invocation loads the words of all its units of a chunk before comparing any
// (more loads in flight), or each unit's just before comparing it (fewer registers). A
// generated const too: it sizes the arrays of loaded words.
const PRELOAD: bool = false;
// Units whose words are held at once.
const HELD: u32 = select(1u, UNITS, PRELOAD);
// Whether the host caps the workgroups, so that each may take several chunks.
override GRID_STRIDE: bool = false;
// Words of one workgroup's partial: per channel (differing, max, sum_abs, and sum_sq as
// bits 0-15 of its low word summed, bits 16-31 summed, high word summed: no carries), then
// differing pixels, anti-aliased pixels, ignored pixels.
const PART_WORDS: u32 = 27u;

// Samples per pixel: 1 gray, 2 gray+alpha, 3 RGB, 4 RGBA.
override CHANNELS: u32 = 4u;
// Bits per sample: 8 or 16.
override BITS: u32 = 8u;

// Words of one image per unit of 4 pixels.
override UNIT_WORDS: u32 = CHANNELS * BITS / 8u;

// What the pass does, fixed per pipeline so that a pass without them carries none of their
// code (fewer registers; and Mesa's lavapipe, which runs both sides of every branch, skips
// them): the perceptual distance (else exact equality), anti-aliasing detection, ignored
// rectangles, drawing the diff image.
override PERCEPTUAL: bool = false;
override ANTIALIASING: bool = false;
override IGNORE: bool = false;
override DRAW: bool = false;

// pixelmatch's YIQ coefficients as it gives them, scaled by 10^8 (exact integers), and the
// weights of Y^2, I^2, Q^2 in the distance scaled by 10^4.
// The shader test holds them against YIQ_* in src/ops/compare/mod.rs.
const YIQ_Y: vec3<i32> = vec3<i32>(29889531, 58662247, 11448223);
const YIQ_I: vec3<i32> = vec3<i32>(59597799, -27417610, -32180189);
const YIQ_Q: vec3<i32> = vec3<i32>(21147017, -52261711, 31114694);
const YIQ_W: vec3<u32> = vec3<u32>(5053u, 2990u, 1957u);

// RGB, R in the low byte.
const RED: u32 = 0x0000ffu;
const YELLOW: u32 = 0x00ffffu;

// The workgroup reduction: compare_subgroup where the adapter has subgroups.
// import: compare_workgroup

// Whether word `slot` of a partial holds a largest value (else a sum).
fn is_max_slot(slot: u32) -> bool {
    return slot < 24u && slot % 6u == 1u;
}

// Sample s (pixel * CHANNELS + channel, counted from buf_px0) of a or b.
fn sample_a(s: u32) -> u32 {
    if BITS == 8u {
        return (word_a(s >> 2u) >> ((s & 3u) * 8u)) & 0xffu;
    }
    return (word_a(s >> 1u) >> ((s & 1u) * 16u)) & 0xffffu;
}

fn sample_b(s: u32) -> u32 {
    if BITS == 8u {
        return (word_b(s >> 2u) >> ((s & 3u) * 8u)) & 0xffu;
    }
    return (word_b(s >> 1u) >> ((s & 1u) * 16u)) & 0xffffu;
}

// The samples of pixel (x, y) of image `img` (0: a, 1: b); channels past CHANNELS are 0.
fn pixel(img: u32, x: u32, y: u32) -> vec4<u32> {
    let base = (y * params.width + x - params.buf_px0) * CHANNELS;
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

// Signed 64-bit integers are (low, high) words in two's complement.
fn neg64(x: vec2<u32>) -> vec2<u32> {
    return add64(~x, vec2<u32>(1u, 0u));
}

fn negative64(x: vec2<u32>) -> bool {
    return bitcast<i32>(x.y) < 0;
}

// Whether x < y, signed.
fn less64(x: vec2<u32>, y: vec2<u32>) -> bool {
    return bitcast<i32>(x.y) < bitcast<i32>(y.y) || (x.y == y.y && x.x < y.x);
}

// The signed 64-bit product c * v.
fn mul_signed(c: i32, v: i32) -> vec2<u32> {
    let m = mul_wide(u32(abs(c)), u32(abs(v)));
    return select(m, neg64(m), (c < 0) != (v < 0));
}

// w . d as a signed 64-bit integer (|w| < 2^26, |d| < 2^16: below 2^44 in size).
fn dot64(w: vec3<i32>, d: vec3<i32>) -> vec2<u32> {
    return add64(add64(mul_signed(w.x, d.x), mul_signed(w.y, d.y)), mul_signed(w.z, d.z));
}

// 128-bit unsigned integers are 4 words, x the lowest.
fn add128(x: vec4<u32>, y: vec4<u32>) -> vec4<u32> {
    let lo = add64(x.xy, y.xy);
    let carry = select(0u, 1u, lo.y < x.y || (lo.y == x.y && lo.x < x.x));
    let hi = add64(add64(x.zw, y.zw), vec2<u32>(carry, 0u));
    return vec4<u32>(lo, hi);
}

// Whether x > y.
fn greater128(x: vec4<u32>, y: vec4<u32>) -> bool {
    if x.w != y.w {
        return x.w > y.w;
    }
    if x.z != y.z {
        return x.z > y.z;
    }
    if x.y != y.y {
        return x.y > y.y;
    }
    return x.x > y.x;
}

// w * v^2 exactly, for a signed v below 2^44 in size and w < 2^13 (below 2^101).
fn weighted_square(v: vec2<u32>, w: u32) -> vec4<u32> {
    let m = select(v, neg64(v), negative64(v));
    // m = lo + hi 2^32 with hi < 2^12: m^2 = lo^2 + 2 lo hi 2^32 + hi^2 2^64.
    let lo2 = mul_wide(m.x, m.x);
    let lh = mul_wide(m.x, m.y);
    let sq = add128(
        vec4<u32>(lo2, m.y * m.y, 0u),
        vec4<u32>(0u, lh.x << 1u, (lh.y << 1u) | (lh.x >> 31u), 0u),
    );
    // Times w, word by word with the carry.
    let p0 = mul_wide(sq.x, w);
    let p1 = add64(mul_wide(sq.y, w), vec2<u32>(p0.y, 0u));
    let p2 = add64(mul_wide(sq.z, w), vec2<u32>(p1.y, 0u));
    return vec4<u32>(p0.x, p1.x, p2.x, sq.w * w + p2.y);
}

// pixelmatch's YIQ distance of two 8-bit RGBA pixels, exactly, as the 128-bit integer D;
// the CPU mirror is `distance`.
fn distance(p: vec4<u32>, q: vec4<u32>) -> vec4<u32> {
    let d = blended(p) - blended(q);
    let y = weighted_square(dot64(YIQ_Y, d), YIQ_W.x);
    let i = weighted_square(dot64(YIQ_I, d), YIQ_W.y);
    let qq = weighted_square(dot64(YIQ_Q, d), YIQ_W.z);
    return add128(add128(y, i), qq);
}

// pixelmatch's brightness delta of two 8-bit RGBA pixels of one image, exactly (signed
// 64-bit): 0 when they are equal. The CPU mirror is `brightness_delta`.
fn brightness_delta(p: vec4<u32>, q: vec4<u32>) -> vec2<u32> {
    if all(p == q) {
        return vec2<u32>(0u);
    }
    return dot64(YIQ_Y, blended(p) - blended(q));
}

// Pixel (x, y) of `img` as 8-bit RGBA, the pixels pixelmatch sees.
fn rgba(img: u32, x: u32, y: u32) -> vec4<u32> {
    return rgba8(pixel(img, x, y));
}

// Whether pixel (x1, y1) of `img` has 3 or more neighbours of exactly its value (pixels on
// the image's edge count one extra). pixelmatch's `hasManySiblings`.
fn has_many_siblings(img: u32, x1: u32, y1: u32) -> bool {
    let x0 = max(x1, 1u) - 1u;
    let y0 = max(y1, 1u) - 1u;
    let x2 = min(x1 + 1u, params.width - 1u);
    let y2 = min(y1 + 1u, params.height - 1u);
    let v = rgba(img, x1, y1);
    var zeroes = select(0u, 1u, x1 == x0 || x1 == x2 || y1 == y0 || y1 == y2);
    for (var x = x0; x <= x2; x++) {
        for (var y = y0; y <= y2; y++) {
            if x == x1 && y == y1 {
                continue;
            }
            if all(rgba(img, x, y) == v) {
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
    let centre = rgba(img, x1, y1);
    var zeroes = select(0u, 1u, x1 == x0 || x1 == x2 || y1 == y0 || y1 == y2);
    var lo = vec2<u32>(0u);
    var hi = vec2<u32>(0u);
    var lo_at = vec2<u32>(0u);
    var hi_at = vec2<u32>(0u);
    for (var x = x0; x <= x2; x++) {
        for (var y = y0; y <= y2; y++) {
            if x == x1 && y == y1 {
                continue;
            }
            let delta = brightness_delta(centre, rgba(img, x, y));
            if all(delta == vec2<u32>(0u)) {
                zeroes += 1u;
                if zeroes > 2u {
                    return false;
                }
            } else if less64(delta, lo) {
                lo = delta;
                lo_at = vec2<u32>(x, y);
            } else if less64(hi, delta) {
                hi = delta;
                hi_at = vec2<u32>(x, y);
            }
        }
    }
    if all(lo == vec2<u32>(0u)) || all(hi == vec2<u32>(0u)) {
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
    return g | (g << 8u) | (g << 16u);
}

// Sample s of a unit's words (s < 4 * CHANNELS).
fn unit_sample(w: array<u32, 8>, s: u32) -> u32 {
    if BITS == 8u {
        return (w[s >> 2u] >> ((s & 3u) * 8u)) & 0xffu;
    }
    return (w[s >> 1u] >> ((s & 1u) * 16u)) & 0xffffu;
}

// Pixel i (0 to 3) of a unit; channels past CHANNELS are 0.
fn unit_pixel(w: array<u32, 8>, i: u32) -> vec4<u32> {
    var p = vec4<u32>(0u);
    for (var c = 0u; c < CHANNELS; c++) {
        p[c] = unit_sample(w, i * CHANNELS + c);
    }
    return p;
}

// The most units of 4 pixels the host gives a workgroup (`MAX_GROUP_UNITS` of
// src/ops/compare/tune.rs, which caps the chunks; the shader test checks the two agree):
// 65536 pixels, so one invocation's sums and the workgroup's fit 32 bits, 65536 * 65535 < 2^32.
const MAX_GROUP_UNITS: u32 = 16384u;
const_assert MAX_GROUP_UNITS * 4u <= 65536u;

// One invocation's sums, kept in registers until the workgroup reduces them (within 32 bits:
// MAX_GROUP_UNITS above).
struct Sums {
    differing: vec4<u32>,
    max_abs: vec4<u32>,
    sum_abs: vec4<u32>,
    // Squares as a 64-bit sum per channel, low and high words.
    sq_lo: vec4<u32>,
    sq_hi: vec4<u32>,
    px_differing: u32,
    px_aa: u32,
    px_ignored: u32,
}

// Compares pixel p (of the whole image; samples pa and pb) into `sums` and returns its colour
// in the diff image (0 outside the strip; RED when it differs, which `main` may yet find
// anti-aliased). Called once per pixel of a unit with constant sample positions, so the
// unit's words stay in registers.
fn compare_pixel(pa: vec4<u32>, pb: vec4<u32>, p: u32, sums: ptr<function, Sums>) -> u32 {
    let first = params.row0 * params.width;
    if p < first || p >= first + params.rows * params.width {
        return 0u;
    }
    // Pixels need their coordinates only for ignored rectangles and anti-aliasing.
    var colour = 0u;
    if DRAW {
        colour = faded(rgba8(pa));
    }
    if IGNORE {
        let y = p / params.width;
        if ignored(p - y * params.width, y) {
            (*sums).px_ignored += 1u;
            return colour;
        }
    }
    let d = max(pa, pb) - min(pa, pb);
    let nonzero = d != vec4<u32>(0u);
    (*sums).differing += select(vec4<u32>(0u), vec4<u32>(1u), nonzero);
    (*sums).max_abs = max((*sums).max_abs, d);
    (*sums).sum_abs += d;
    let sq = d * d;
    (*sums).sq_lo += sq;
    if BITS == 16u {
        // 8-bit squares cannot carry: an invocation compares at most 65536 pixels (see
        // Sums), and 65536 * 255^2 < 2^32.
        (*sums).sq_hi += select(vec4<u32>(0u), vec4<u32>(1u), (*sums).sq_lo < sq);
    }
    var differs = any(nonzero);
    if PERCEPTUAL {
        if differs {
            let t = vec4<u32>(params.t0, params.t1, params.t2, params.t3);
            differs = greater128(distance(rgba8(pa), rgba8(pb)), t);
        }
    }
    (*sums).px_differing += select(0u, 1u, differs);
    return select(colour, RED, differs);
}

// Compares this invocation's units of chunk `chunk` into `sums`, drawing them with DRAW.
// The strip holds `units` units from unit `unit0`, whose words start at word `word0`.
// Whether a unit's UNIT_WORDS words are the same in both images.
fn same_words(x: array<u32, 8>, y: array<u32, 8>) -> bool {
    var same = true;
    for (var j = 0u; j < UNIT_WORDS; j++) {
        same = same && x[j] == y[j];
    }
    return same;
}

fn compare_chunk(
    chunk: u32,
    lid: u32,
    units: u32,
    unit0: u32,
    word0: u32,
    sums: ptr<function, Sums>,
) {
    let base = chunk * WG_SIZE * UNITS + lid;
    var wa: array<array<u32, 8>, HELD>;
    var wb: array<array<u32, 8>, HELD>;
    if PRELOAD {
        for (var k = 0u; k < UNITS; k++) {
            let u = base + k * WG_SIZE;
            if u < units {
                wa[k] = words_a(word0 + u * UNIT_WORDS);
                wb[k] = words_b(word0 + u * UNIT_WORDS);
            }
        }
    }
    for (var k = 0u; k < UNITS; k++) {
        let u = base + k * WG_SIZE;
        if u >= units {
            break;
        }
        let h = select(0u, k, PRELOAD);
        if !PRELOAD {
            wa[h] = words_a(word0 + u * UNIT_WORDS);
            wb[h] = words_b(word0 + u * UNIT_WORDS);
        }
        // Counting only, nothing ignored: a unit whose words are equal adds nothing to any
        // sum (none of its pixels differs), so its per-pixel work is skipped.
        if !DRAW && !IGNORE && same_words(wa[h], wb[h]) {
            continue;
        }
        let p = (unit0 + u) * 4u;
        let c0 = compare_pixel(unit_pixel(wa[h], 0u), unit_pixel(wb[h], 0u), p, sums);
        let c1 = compare_pixel(unit_pixel(wa[h], 1u), unit_pixel(wb[h], 1u), p + 1u, sums);
        let c2 = compare_pixel(unit_pixel(wa[h], 2u), unit_pixel(wb[h], 2u), p + 2u, sums);
        let c3 = compare_pixel(unit_pixel(wa[h], 3u), unit_pixel(wb[h], 3u), p + 3u, sums);
        var colours = array<u32, 4>(c0, c1, c2, c3);
        if ANTIALIASING {
            // Differing pixels that look anti-aliased, tested once per unit (the test's
            // code is large) by their coordinates.
            for (var i = 0u; i < 4u; i++) {
                if colours[i] == RED {
                    let y = (p + i) / params.width;
                    let x = p + i - y * params.width;
                    if antialiased(0u, 1u, x, y) || antialiased(1u, 0u, x, y) {
                        colours[i] = YELLOW;
                        (*sums).px_differing -= 1u;
                        (*sums).px_aa += 1u;
                    }
                }
            }
        }
        if DRAW {
            let o = u * 3u;
            diff[o] = colours[0] | (colours[1] << 24u);
            diff[o + 1u] = (colours[1] >> 8u) | (colours[2] << 16u);
            diff[o + 2u] = (colours[2] >> 16u) | (colours[3] << 8u);
        }
    }
}

@compute @workgroup_size(WG_SIZE)
fn main(lane: Lane) {
    let group = workgroup_index(lane.wid, lane.nwg);
    let lid = lane.lid;
    reduce_begin(lane);
    // The strip's pixels and its units, from the one holding its first pixel.
    let first = params.row0 * params.width;
    let end = first + params.rows * params.width;
    let unit0 = first / 4u;
    let units = (end + 3u) / 4u - unit0;
    let word0 = (unit0 - params.buf_px0 / 4u) * UNIT_WORDS;
    let chunks = (units + WG_SIZE * UNITS - 1u) / (WG_SIZE * UNITS);
    var sums: Sums;
    // One chunk per workgroup unless the workgroups are capped (a grid-stride loop, its
    // code apart so that the uncapped pass has no loop). A 2-D grid may have a few
    // workgroups past the last one: they take no chunk.
    if GRID_STRIDE {
        for (var chunk = group; chunk < chunks && group < params.groups; chunk += params.groups) {
            compare_chunk(chunk, lid, units, unit0, word0, &sums);
        }
    } else if group < chunks {
        compare_chunk(group, lid, units, unit0, word0, &sums);
    }
    for (var c = 0u; c < CHANNELS; c++) {
        reduce_add(sums.differing[c], c * 6u, lane);
        reduce_max(sums.max_abs[c], c * 6u + 1u, lane);
        reduce_add(sums.sum_abs[c], c * 6u + 2u, lane);
        reduce_add(sums.sq_lo[c] & 0xffffu, c * 6u + 3u, lane);
        reduce_add(sums.sq_lo[c] >> 16u, c * 6u + 4u, lane);
        reduce_add(sums.sq_hi[c], c * 6u + 5u, lane);
    }
    reduce_add(sums.px_differing, 24u, lane);
    reduce_add(sums.px_aa, 25u, lane);
    reduce_add(sums.px_ignored, 26u, lane);
    workgroupBarrier();
    if lid < PART_WORDS && group < params.groups {
        partials[group * PART_WORDS + lid] = reduce_result(lid, lane);
    }
}

// import: grid
