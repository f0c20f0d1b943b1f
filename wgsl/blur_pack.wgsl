// blur_pack: an image between the host's layout (CHANNELS samples a pixel, 8- or 16-bit,
// pixels adjacent: the bytes the host decoded and will encode) and the packed pixels that the
// blur passes read and write (four lanes, missing ones zero: a word a pixel for 8-bit images,
// two for 16-bit; see shared/blur_pass.wgsl). `unpack` runs before the first pass and `pack`
// after the last, so the host only copies bytes. Four-channel images are packed already.

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

// Quads a thread: the workgroup takes PACK_RUN runs of PACK_WG adjacent quads. 1 on GPUs; more
// on CPU adapters, whose cost is per workgroup.
override PACK_RUN: u32 = 1u;

// The first quad of this thread; quad k * PACK_WG after it is the next.
fn first_quad(wid: vec3<u32>, nwg: vec3<u32>, lid: u32) -> u32 {
    return workgroup_index(wid, nwg) * PACK_WG * PACK_RUN + lid;
}

// Sample k (counted along the host's layout: pixel k / CHANNELS, lane k % CHANNELS) of a
// quad's host words. A sample never straddles two words (BITS divides 32).
fn raw_sample(raw: array<u32, 6>, k: u32) -> u32 {
    let bit = k * BITS;
    return (raw[bit / 32u] >> (bit % 32u)) & (0xffffffffu >> (32u - BITS));
}

// Lane c of pixel i of a quad's packed words.
fn packed_lane(packed: array<u32, 8>, i: u32, c: u32) -> u32 {
    if BITS == 8u {
        return (packed[i] >> (c * 8u)) & 0xffu;
    }
    return (packed[2u * i + (c >> 1u)] >> ((c & 1u) * 16u)) & 0xffffu;
}

// Packed pixels, a quad of them a thread: the quad's RAW_WORDS words of the host's layout read
// (those past the chunk's last word are not there, and hold none of its pixels), its pixels'
// PACKED_WORDS words written (those of pixels past the chunk are not).
@compute @workgroup_size(PACK_WG)
fn unpack(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let first = first_quad(wid, nwg, lid);
    // The host's words of the chunk: its bytes rounded up to a word.
    let raw_len = (params.pixels * CHANNELS * (BITS / 8u) + 3u) / 4u;
    for (var k = 0u; k < PACK_RUN; k++) {
        let q = first + k * PACK_WG;
        if 4u * q >= params.pixels {
            return;
        }
        var raw: array<u32, 6>;
        for (var j = 0u; j < RAW_WORDS; j++) {
            let w = q * RAW_WORDS + j;
            if w < raw_len {
                raw[j] = src[w];
            }
        }
        for (var i = 0u; i < 4u; i++) {
            let p = 4u * q + i;
            if p < params.pixels {
                if BITS == 8u {
                    var word = 0u;
                    for (var c = 0u; c < CHANNELS; c++) {
                        word |= raw_sample(raw, i * CHANNELS + c) << (c * 8u);
                    }
                    dst[p] = word;
                } else {
                    // Lanes 0 and 1 in the first word, lane 2 in the second.
                    var lo = raw_sample(raw, i * CHANNELS);
                    var hi = 0u;
                    if CHANNELS > 1u {
                        lo |= raw_sample(raw, i * CHANNELS + 1u) << 16u;
                    }
                    if CHANNELS > 2u {
                        hi = raw_sample(raw, i * CHANNELS + 2u);
                    }
                    dst[2u * p] = lo;
                    dst[2u * p + 1u] = hi;
                }
            }
        }
    }
}

// Words of the host's layout, a quad of pixels' RAW_WORDS a thread (samples past the chunk
// are 0; words past its last one are not there), so that no two threads write the same word.
@compute @workgroup_size(PACK_WG)
fn pack(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let per_word = 32u / BITS;
    let first = first_quad(wid, nwg, lid);
    let raw_len = (params.pixels * CHANNELS * (BITS / 8u) + 3u) / 4u;
    for (var k = 0u; k < PACK_RUN; k++) {
        let q = first + k * PACK_WG;
        if 4u * q >= params.pixels {
            return;
        }
        // The quad's packed words; those of pixels past the chunk are not there and stay 0.
        var packed: array<u32, 8>;
        for (var j = 0u; j < PACKED_WORDS; j++) {
            if 4u * q + j / (BITS / 8u) < params.pixels {
                packed[j] = src[q * PACKED_WORDS + j];
            }
        }
        for (var j = 0u; j < RAW_WORDS; j++) {
            let w = q * RAW_WORDS + j;
            if w < raw_len {
                var word = 0u;
                for (var s = 0u; s < per_word; s++) {
                    let sample = j * per_word + s;
                    word |= packed_lane(packed, sample / CHANNELS, sample % CHANNELS) << (s * BITS);
                }
                dst[w] = word;
            }
        }
    }
}
