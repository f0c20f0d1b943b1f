// histogram_chunk: one privatised histogram per workgroup, in workgroup memory, over a tile of pixels; added into the image's counts with global atomics.

// Its Rust twin is `ChunkParams` in src/ops/histogram/gpu.rs (the shader test checks their fields).
struct Params {
    // Pixels in this segment of the image.
    n_pixels: u32,
    // Units (UNIT_PIXELS pixels each) in one tile; a tile is one workgroup's share.
    tile_units: u32,
    // Tiles, and so chunks, in this segment.
    n_tiles: u32,
    // Bins per channel.
    bins: u32,
    // Bin ranges of SPAN bins (the last may be shorter): workgroup w does tile w % n_tiles,
    // bins [r * SPAN, r * SPAN + SPAN) with r = w / n_tiles.
    n_ranges: u32,
}

@group(0) @binding(0) var<uniform> params: Params;
// The segment's samples as stored in the image, interleaved, packed little-endian into words.
@group(0) @binding(1) var<storage, read> src: array<vec4<u32>>;
// SLICES copies of the image's bins * HC counts, bin-major: counts[slice * bins * HC +
// bin * HC + channel]. Tile t adds its counts into slice t % SLICES (integer adds: the order
// does not change the sums); the slices spread the adds of many tiles to one count over
// several addresses, and the host and the total pass sum them.
@group(0) @binding(2) var<storage, read_write> counts: array<atomic<u32>>;

override WG_SIZE: u32 = 256u;
// Samples per pixel in the input: 1 gray, 2 gray+alpha, 3 RGB, 4 RGBA.
override IN_CHANNELS: u32 = 4u;
// Bits per sample: 8 or 16.
override BITS: u32 = 8u;
// Histogram channels: 4 (red, green, blue, luminance) or 5 (and alpha) for colour;
// 1 (gray) or 2 (and alpha) for gray.
override HC: u32 = 4u;
// Sub-histograms per workgroup: invocation i counts into copy i % COPIES, so that pixels of
// one colour do not all hit one address. The copies are interleaved word by word
// (word w of copy c at w * COPIES + c), so the lanes of a subgroup that share no copy spread
// over the banks.
override COPIES: u32 = 1u;
// Counters per workgroup word: 1 (32-bit) or 2 (16-bit halves; the host chooses it only where
// no copy's counter can reach 65536 in one tile).
override PACK: u32 = 1u;
// Copies of the image's counts in `counts`.
override SLICES: u32 = 1u;
// Bins of each channel the workgroup histogram holds.
override SPAN: u32 = 256u;
// A unit is UNIT_VECS vec4 words holding UNIT_PIXELS whole pixels; an invocation loads one
// unit at a time, consecutive invocations consecutive units.
override UNIT_PIXELS: u32 = 4u;
override UNIT_VECS: u32 = 1u;
// Set by the host where the bins are one a sample value (bins == MAXVAL + 1) and this
// workgroup holds them all (one range): a sample is then its own bin, which is what the
// general mapping below gives for those bins (v * (MAXVAL + 1) / MAXVAL == v for v < MAXVAL,
// and MAXVAL clamps to MAXVAL), without its multiply, division and range test.
override DIRECT: bool = false;

override MAXVAL: u32 = (1u << BITS) - 1u;
// Samples per 32-bit word.
override SPW: u32 = 32u / BITS;
// Counters of one copy, channel-major (counter ch * SPAN + bin), and the words they take.
override ENTRIES: u32 = HC * SPAN;
override WORDS: u32 = (ENTRIES + PACK - 1u) / PACK;

var<workgroup> sh_hist: array<atomic<u32>, COPIES * WORDS>;

// The unit being counted; UNIT_VECS <= 3.
var<private> unit: array<vec4<u32>, 3>;

// Sample s of the current unit (s = pixel * IN_CHANNELS + channel).
fn sample(s: u32) -> u32 {
    let w = s / SPW;
    return (unit[w / 4u][w % 4u] >> ((s % SPW) * BITS)) & MAXVAL;
}

// Luminance: 0.2126, 0.7152, 0.0722 as integer weights summing to 2^15, rounded; the
// arithmetic of `luminance` in src/ops/histogram/mod.rs, whose LUMA_WEIGHTS and LUMA_SHIFT
// the shader test holds these against.
const LUMA_WEIGHTS: vec3<u32> = vec3<u32>(6966u, 23436u, 2366u);
const LUMA_SHIFT: u32 = 15u;
fn luminance(r: u32, g: u32, b: u32) -> u32 {
    let w = LUMA_WEIGHTS;
    return (w.x * r + w.y * g + w.z * b + (1u << (LUMA_SHIFT - 1u))) >> LUMA_SHIFT;
}

// Counts value v of channel ch into the invocation's copy (`base`), if its bin is in this range.
fn count(base: u32, lo: u32, span: u32, ch: u32, v: u32) {
    if DIRECT {
        let e = ch * SPAN + v;
        atomicAdd(&sh_hist[(e / PACK) * COPIES + base], 1u << ((e % PACK) * 16u));
        return;
    }
    // v * bins <= 65535 * 65536 < 2^32.
    let bin = min(v * params.bins / MAXVAL, params.bins - 1u);
    // Wraps for bin < lo, so one comparison checks both ends.
    let r = bin - lo;
    if r < span {
        let e = ch * SPAN + r;
        atomicAdd(&sh_hist[(e / PACK) * COPIES + base], 1u << ((e % PACK) * 16u));
    }
}

// Adds counter e of the workgroup's histogram (summed over the copies) into the image's
// counts; counters past this range's bins stay zero and add nothing.
fn flush(e: u32, n: u32, lo: u32, slice: u32) {
    if n != 0u {
        atomicAdd(&counts[slice + (lo + e % SPAN) * HC + e / SPAN], n);
    }
}

// Counts pixel k of the current unit. A gray input in a colour histogram (--sum) counts as
// R = G = B; an input without alpha in a histogram with alpha counts as opaque.
fn count_pixel(k: u32, base: u32, lo: u32, span: u32) {
    let s = k * IN_CHANNELS;
    let v = sample(s);
    var alpha = MAXVAL;
    if IN_CHANNELS == 2u {
        alpha = sample(s + 1u);
    } else if IN_CHANNELS == 4u {
        alpha = sample(s + 3u);
    }
    if HC >= 4u {
        var g = v;
        var b = v;
        if IN_CHANNELS >= 3u {
            g = sample(s + 1u);
            b = sample(s + 2u);
        }
        count(base, lo, span, 0u, v);
        count(base, lo, span, 1u, g);
        count(base, lo, span, 2u, b);
        count(base, lo, span, 3u, luminance(v, g, b));
        if HC == 5u {
            count(base, lo, span, 4u, alpha);
        }
    } else {
        count(base, lo, span, 0u, v);
        if HC == 2u {
            count(base, lo, span, 1u, alpha);
        }
    }
}

@compute @workgroup_size(WG_SIZE)
fn main(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let wg = workgroup_index(wid, nwg);
    if wg >= params.n_tiles * params.n_ranges {
        return;
    }
    let tile = wg % params.n_tiles;
    let lo = (wg / params.n_tiles) * SPAN;
    let span = min(SPAN, params.bins - lo);

    for (var i = lid; i < COPIES * WORDS; i += WG_SIZE) {
        atomicStore(&sh_hist[i], 0u);
    }
    workgroupBarrier();

    let base = lid % COPIES;
    let n_units = (params.n_pixels + UNIT_PIXELS - 1u) / UNIT_PIXELS;
    let u0 = tile * params.tile_units;
    let u1 = min(u0 + params.tile_units, n_units);
    for (var u = u0 + lid; u < u1; u += WG_SIZE) {
        for (var j = 0u; j < UNIT_VECS; j++) {
            unit[j] = src[u * UNIT_VECS + j];
        }
        let first = u * UNIT_PIXELS;
        for (var k = 0u; k < UNIT_PIXELS; k++) {
            if first + k < params.n_pixels {
                count_pixel(k, base, lo, span);
            }
        }
    }
    workgroupBarrier();

    // The copies summed (each half apart: two 16-bit counters of several copies can pass
    // 65535) and added into the image's counts of bins [lo, lo + span).
    let slice = (tile % SLICES) * params.bins * HC;
    for (var w = lid; w < WORDS; w += WG_SIZE) {
        var low = 0u;
        var high = 0u;
        for (var c = 0u; c < COPIES; c++) {
            let v = atomicLoad(&sh_hist[w * COPIES + c]);
            if PACK == 1u {
                low += v;
            } else {
                low += v & 0xffffu;
                high += v >> 16u;
            }
        }
        flush(w * PACK, low, lo, slice);
        if PACK == 2u && w * 2u + 1u < ENTRIES {
            flush(w * 2u + 1u, high, lo, slice);
        }
    }
}

// import: grid
