// blur_pack: an image from the packed pixels that the blur passes write (four lanes, missing
// ones zero: a word a pixel for 8-bit images, two for 16-bit; see shared/blur_pass.wgsl) to
// the host's layout (CHANNELS samples a pixel, 8- or 16-bit, pixels adjacent: the bytes the
// host will encode), after the last pass where that pass cannot write the host's layout
// itself (`Direct` in src/ops/blur/plan.rs), so the host only copies bytes. The first row
// pass always reads the host's layout; four-channel images are packed already.

// import: grid

// Its Rust twin is `PackParams` in src/ops/blur/plan.rs (the shader test checks their fields).
struct Params {
    // Pixels in this chunk of the image.
    pixels: u32,
    _pad0: u32,
    _pad1: u32,
    _pad2: u32,
}

// 1, 2 or 3.
override CHANNELS: u32 = 3u;
// Bits per sample: 8 or 16.
override BITS: u32 = 8u;
const PACK_WG: u32 = 64u; // src/ops/blur/plan.rs's too (the shader test checks it)

@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read> src: array<u32>;
@group(0) @binding(2) var<storage, read_write> dst: array<u32>;

// Words of the host's layout a quad of 4 pixels takes (CHANNELS samples of BITS each: 1 to 6),
// and words of the packed layout (a word a pixel for 8-bit, two for 16-bit).
override RAW_WORDS: u32 = CHANNELS * BITS / 8u;
override PACKED_WORDS: u32 = 4u * BITS / 8u;

// A workgroup converts groups of PACK_WG quads (4 PACK_WG pixels): it reads the group's packed
// words, a word a thread at a time, into workgroup memory, and writes the host's words from
// there, again a word a thread at a time, so that both the loads and the stores of a warp are
// of adjacent words. The most words a group takes packed.
const GROUP_WORDS: u32 = PACK_WG * 8u;
var<workgroup> sh: array<u32, GROUP_WORDS>;

// Groups a workgroup takes in turn: 1 on GPUs; more on CPU adapters, whose cost is per
// workgroup.
override PACK_RUN: u32 = 1u;

// Lane c of pixel i of the group, from the packed words in `sh`.
fn packed_lane(i: u32, c: u32) -> u32 {
    if BITS == 8u {
        return (sh[i] >> (c * 8u)) & 0xffu;
    }
    return (sh[2u * i + (c >> 1u)] >> ((c & 1u) * 16u)) & 0xffffu;
}

// The chunk's words in the host's layout: its bytes rounded up to a word.
fn raw_len() -> u32 {
    return (params.pixels * CHANNELS * (BITS / 8u) + 3u) / 4u;
}

// Words of the host's layout (samples past the chunk are 0; words past its last one are not
// there), so that no two threads write the same word.
@compute @workgroup_size(PACK_WG)
fn pack(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let per_word = 32u / BITS;
    let raw_end = raw_len();
    for (var k = 0u; k < PACK_RUN; k++) {
        let g = workgroup_index(wid, nwg) * PACK_RUN + k;
        let p0 = g * 4u * PACK_WG;
        if p0 >= params.pixels {
            return;
        }
        // The group's pixels inside the chunk.
        let inside = min(params.pixels - p0, 4u * PACK_WG);
        for (var j = 0u; j < PACKED_WORDS; j++) {
            let w = j * PACK_WG + lid;
            if w / (BITS / 8u) < inside {
                sh[w] = src[g * PACKED_WORDS * PACK_WG + w];
            }
        }
        workgroupBarrier();
        for (var j = 0u; j < RAW_WORDS; j++) {
            let w = j * PACK_WG + lid;
            if g * RAW_WORDS * PACK_WG + w < raw_end {
                var word = 0u;
                for (var s = 0u; s < per_word; s++) {
                    let sample = w * per_word + s;
                    let i = sample / CHANNELS;
                    if i < inside {
                        word |= packed_lane(i, sample % CHANNELS) << (s * BITS);
                    }
                }
                dst[g * RAW_WORDS * PACK_WG + w] = word;
            }
        }
        workgroupBarrier();
    }
}
