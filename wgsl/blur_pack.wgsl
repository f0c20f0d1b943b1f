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

// The `n` bits (8 to 32) at byte `b` of src, little-endian, so that a pixel of the host's
// layout reads as its packed lanes.
fn bits_at(b: u32, n: u32) -> u32 {
    let i = b >> 2u;
    let shift = (b & 3u) * 8u;
    var v = src[i] >> shift;
    if shift + n > 32u {
        v |= src[i + 1u] << (32u - shift);
    }
    return v & (0xffffffffu >> (32u - n));
}

// Lane c of packed pixel p in src.
fn lane(p: u32, c: u32) -> u32 {
    if BITS == 8u {
        return (src[p] >> (c * 8u)) & 0xffu;
    }
    return (src[2u * p + (c >> 1u)] >> ((c & 1u) * 16u)) & 0xffffu;
}

// Items (pixels for `unpack`, words for `pack`) a thread: the workgroup takes PACK_RUN runs of
// PACK_WG adjacent items. 1 on GPUs; more on CPU adapters, whose cost is per workgroup.
override PACK_RUN: u32 = 1u;

// The first item of this thread; item k * PACK_WG after it is the next.
fn first_item(wid: vec3<u32>, nwg: vec3<u32>, lid: u32) -> u32 {
    return workgroup_index(wid, nwg) * PACK_WG * PACK_RUN + lid;
}

// Packed pixels.
@compute @workgroup_size(PACK_WG)
fn unpack(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let first = first_item(wid, nwg, lid);
    for (var k = 0u; k < PACK_RUN; k++) {
        let p = first + k * PACK_WG;
        if p >= params.pixels {
            return;
        }
        let b = p * CHANNELS * (BITS / 8u);
        if BITS == 8u {
            dst[p] = bits_at(b, 8u * CHANNELS);
        } else {
            // Lanes 0 and 1 in the first word, lane 2 in the second.
            dst[2u * p] = bits_at(b, min(16u * CHANNELS, 32u));
            var high = 0u;
            if CHANNELS == 3u {
                high = bits_at(b + 4u, 16u);
            }
            dst[2u * p + 1u] = high;
        }
    }
}

// Words of the host's layout (32 / BITS samples each; those past the image are 0), so that no
// two threads write the same word.
@compute @workgroup_size(PACK_WG)
fn pack(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let per_word = 32u / BITS;
    let samples = params.pixels * CHANNELS;
    let first = first_item(wid, nwg, lid);
    for (var k = 0u; k < PACK_RUN; k++) {
        let i = first + k * PACK_WG;
        if i * per_word >= samples {
            return;
        }
        var word = 0u;
        for (var j = 0u; j < per_word; j++) {
            let s = i * per_word + j;
            if s < samples {
                word |= lane(s / CHANNELS, s % CHANNELS) << (j * BITS);
            }
        }
        dst[i] = word;
    }
}
