// encode_stuff: JPEG's byte stuffing (a 0x00 after every 0xFF of entropy-coded data) in two
// entry points over the coded words: `count` writes each word's count of 0xFF bytes (an
// exclusive scan then gives each word its shift), `stuff` writes each word's bytes at their
// place in the output. Both run over the words' capacity (the host does not wait for the bit
// count) and stop at the count encode_huffman.wgsl's scan left. The CPU twin is
// `BitWriter::flush_word` in src/io/jpeg/huffman.rs.

// import: grid
// import: encode_frame

@group(0) @binding(0) var<uniform> params: Params;
// The coded bits (encode_huffman.wgsl's `pack`), first byte at the top of word 0.
@group(0) @binding(1) var<storage, read> words: array<u32>;
// The blocks' bit offsets, scanned: at params.nblocks the total bit count.
@group(0) @binding(2) var<storage, read> offsets: array<u32>;
// 0xFF counts per word (0 past the coded words, up to params.nwords, the capacity), then,
// scanned, each word's extra bytes before it; one more slot, the total.
@group(0) @binding(3) var<storage, read_write> shifts: array<u32>;
// The stuffed bytes, 4 a word little-endian (as they read back). (Last: `count`, which does
// not use it, binds the others.)
@group(0) @binding(4) var<storage, read_write> out: array<atomic<u32>>;

override WG_SIZE: u32 = 256u;

// The coded words: the bit count in whole words.
fn coded_words() -> u32 {
    return (offsets[params.nblocks] + 31u) / 32u;
}

fn byte_of(w: u32, j: u32) -> u32 {
    return (w >> (24u - 8u * j)) & 0xFFu;
}

@compute @workgroup_size(WG_SIZE)
fn count(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let i = workgroup_index(wid, nwg) * WG_SIZE + lid;
    if i > params.nwords {
        return;
    }
    var n = 0u;
    if i < coded_words() {
        let w = words[i];
        for (var j = 0u; j < 4u; j++) {
            n += u32(byte_of(w, j) == 0xFFu);
        }
    }
    shifts[i] = n;
}

@compute @workgroup_size(WG_SIZE)
fn stuff(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let i = workgroup_index(wid, nwg) * WG_SIZE + lid;
    if i >= coded_words() {
        return;
    }
    let w = words[i];
    var pos = 4u * i + shifts[i];
    for (var j = 0u; j < 4u; j++) {
        let b = byte_of(w, j);
        atomicOr(&out[pos >> 2u], b << ((pos & 3u) * 8u));
        pos += 1u + u32(b == 0xFFu);
    }
}
