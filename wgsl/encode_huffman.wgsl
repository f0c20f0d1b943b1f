// encode_huffman: one block per invocation, coded as jchuff.c's encode_one_block codes it
// (the DC difference from the component's previous block, AC runs, ZRL, EOB). Three entry
// points walk the same symbols: `count` adds them to the symbol histogram (optimised
// tables), `lens` writes each block's length in bits (an exclusive scan then gives every
// block its bit offset), `pack` ORs the codes into big-endian 32-bit words at that offset.
// CPU twins: `encode_block` and `count_block` in src/io/jpeg/huffman.rs.

// import: grid
// import: encode_frame

@group(0) @binding(0) var<uniform> params: Params;
// 32 words a block (encode_dct.wgsl).
@group(0) @binding(1) var<storage, read> coefs: array<u32>;
// At t * 512 + class * 256 + symbol (class 0 DC, 1 AC): code | length << 16.
@group(0) @binding(2) var<storage, read> codes: array<u32>;
// Symbol counts, indexed as `codes`.
@group(0) @binding(3) var<storage, read_write> hist: array<atomic<u32>>;
// The entropy-coded bits, first bit at the top of word 0.
@group(0) @binding(4) var<storage, read_write> words: array<atomic<u32>>;
// Bit lengths (`lens`), then, scanned, bit offsets (`pack`); one more slot than blocks.
// (Last: `count`, which does not use it, binds the others.)
@group(0) @binding(5) var<storage, read_write> offsets: array<u32>;

override WG_SIZE: u32 = 64u;

const MODE_COUNT: u32 = 0u;
const MODE_LENS: u32 = 1u;
const MODE_PACK: u32 = 2u;

// Bits so far (`lens`) or the next bit's position (`pack`).
var<private> cursor: u32;

fn coef(i: u32, k: u32) -> i32 {
    let w = coefs[i * 32u + (k >> 1u)];
    return (i32(w << (16u - (k & 1u) * 16u))) >> 16u;
}

// The number of bits of |v| (JPEG's magnitude category).
fn nbits(v: i32) -> u32 {
    return 32u - countLeadingZeros(u32(abs(v)));
}

// The n value bits of v: v itself, or v - 1 for negative v, low n bits.
fn value_bits(v: i32, n: u32) -> u32 {
    return u32(select(v, v - 1, v < 0)) & ((1u << n) - 1u);
}

// ORs the low n bits of `bits` (n at most 32) in at bit position p.
fn put(bits: u32, n: u32, p: u32) {
    let word = p >> 5u;
    let off = p & 31u;
    if off + n <= 32u {
        atomicOr(&words[word], bits << (32u - off - n));
    } else {
        let rem = off + n - 32u;
        atomicOr(&words[word], bits >> rem);
        atomicOr(&words[word + 1u], bits << (32u - rem));
    }
}

// One symbol at slot (see `codes`) followed by n value bits.
fn emit(mode: u32, slot: u32, value: u32, n: u32) {
    if mode == MODE_COUNT {
        atomicAdd(&hist[slot], 1u);
        return;
    }
    let e = codes[slot];
    let len = (e >> 16u) + n;
    if mode == MODE_PACK {
        put(((e & 0xFFFFu) << n) | value, len, cursor);
    }
    cursor += len;
}

fn code_block(i: u32, mode: u32) {
    let loc = locate(i);
    let t = params.place[loc.c].y * 512u;
    var last = 0;
    if loc.prev != NO_BLOCK {
        last = coef(loc.prev, 0u);
    }
    let diff = coef(i, 0u) - last;
    let n = nbits(diff);
    emit(mode, t + n, value_bits(diff, n), n);
    var run = 0u;
    for (var k = 1u; k < 64u; k++) {
        let c = coef(i, k);
        if c == 0 {
            run++;
            continue;
        }
        while run > 15u {
            emit(mode, t + 256u + 0xF0u, 0u, 0u);
            run -= 16u;
        }
        let m = nbits(c);
        emit(mode, t + 256u + (run << 4u) + m, value_bits(c, m), m);
        run = 0u;
    }
    if run > 0u {
        emit(mode, t + 256u, 0u, 0u);
    }
}

@compute @workgroup_size(WG_SIZE)
fn count(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let i = workgroup_index(wid, nwg) * WG_SIZE + lid;
    if i < params.nblocks {
        code_block(i, MODE_COUNT);
    }
}

@compute @workgroup_size(WG_SIZE)
fn lens(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let i = workgroup_index(wid, nwg) * WG_SIZE + lid;
    if i > params.nblocks {
        return;
    }
    // The slot past the last block scans to the total.
    cursor = 0u;
    if i < params.nblocks {
        code_block(i, MODE_LENS);
    }
    offsets[i] = cursor;
}

@compute @workgroup_size(WG_SIZE)
fn pack(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let i = workgroup_index(wid, nwg) * WG_SIZE + lid;
    if i >= params.nblocks {
        return;
    }
    cursor = offsets[i];
    code_block(i, MODE_PACK);
    if i == params.nblocks - 1u {
        // jchuff.c's flush_bits: the last byte filled with 1 bits.
        let pad = (8u - (cursor & 7u)) & 7u;
        if pad > 0u {
            put((1u << pad) - 1u, pad, cursor);
        }
    }
}
