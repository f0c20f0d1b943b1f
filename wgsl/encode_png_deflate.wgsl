// encode_png_deflate: one piece per invocation (wgsl/shared/encode_png.wgsl), coded as
// fdeflate 0.3.7's fast compressor codes it row by row: a run of zero bytes, open from the
// pieces before, is coded at the first non-zero chunk (with that chunk's leading zeros) or
// at the row's tail, as one literal zero and distance-1 matches; the other bytes as literals
// of its one fixed code; a chunk's trailing zeros open the next run. `lens` writes each
// piece's length in bits (an exclusive scan then gives its offset), `pack` ORs its codes
// into little-endian words at that offset, after the block header. CPU twin: `put_piece`
// in src/ops/encode/png/deflate.rs.

// import: grid
// import: encode_png

@group(0) @binding(0) var<uniform> params: Params;
// encode_png_filter.wgsl's output.
@group(0) @binding(1) var<storage, read> filtered: array<vec2<u32>>;
// Literals 0..286: code | length << 16; then two words per match length 3..258: the code
// with its extra bits and the distance bit, and their bit count (`table_words`).
@group(0) @binding(2) var<storage, read> table: array<u32>;
// Bit lengths (`lens`), then, scanned, offsets (`pack`); one more slot than pieces.
@group(0) @binding(3) var<storage, read_write> offsets: array<u32>;
// The coded stream, first bit at the bottom of word 0 (`pack`).
@group(0) @binding(4) var<storage, read_write> words: array<atomic<u32>>;
// Word 0: the total bit count, copied from the scan's last slot. (Last: `lens`, which does
// not use it, binds the others.)
@group(0) @binding(5) var<storage, read_write> total: array<u32>;

override WG_SIZE: u32 = 64u;
// Bits of the zlib and block headers, which the host writes before the coded pieces.
override HEADER_BITS: u32 = 429u;

// Bits so far (`lens`) or the next bit's position (`pack`).
var<private> cursor: u32;
var<private> packing: bool;

// ORs the low n bits of `bits` (n at most 32) in at the cursor, LSB first.
fn put(bits: u32, n: u32) {
    if packing && bits != 0u {
        let p = cursor + HEADER_BITS;
        let w = p >> 5u;
        let off = p & 31u;
        atomicOr(&words[w], bits << off);
        if off + n > 32u {
            atomicOr(&words[w + 1u], bits >> (32u - off));
        }
    }
    cursor += n;
}

fn literal(b: u32) {
    let e = table[b];
    put(e & 0xFFFFu, e >> 16u);
}

fn matched(len: u32) {
    let at = 286u + 2u * (len - 3u);
    put(table[at], table[at + 1u]);
}

// fdeflate's `write_run`.
fn run_of(length: u32) {
    literal(0u);
    var run = length - 1u;
    while run >= 258u {
        matched(258u);
        run -= 258u;
    }
    if run > 4u {
        matched(run);
    } else {
        for (var i = 0u; i < run; i++) {
            literal(0u);
        }
    }
}

fn byte_of(w: vec2<u32>, j: u32) -> u32 {
    return (w[j >> 2u] >> ((j & 3u) * 8u)) & 0xFFu;
}

fn lead_zeros(w: vec2<u32>) -> u32 {
    if w.x == 0u {
        return 4u + countTrailingZeros(w.y) / 8u;
    }
    return countTrailingZeros(w.x) / 8u;
}

fn trail_zeros(w: vec2<u32>) -> u32 {
    if w.y == 0u {
        return 4u + countLeadingZeros(w.x) / 8u;
    }
    return countLeadingZeros(w.y) / 8u;
}

// The run of zeros open before piece c of the row whose first piece is `first`.
fn run_before(first: u32, c: u32) -> u32 {
    var run = 0u;
    var j = c;
    while j > 0u {
        j -= 1u;
        let w = filtered[first + j];
        if w.x == 0u && w.y == 0u {
            run += 8u;
        } else {
            return run + trail_zeros(w);
        }
    }
    return run;
}

fn code_piece(p: u32) {
    let c = p % params.pieces_per_row;
    let w = filtered[p];
    let chunk = c < params.chunks_per_row;
    if chunk && w.x == 0u && w.y == 0u {
        return;
    }
    let run = run_before(p - c, c);
    var start = 0u;
    var end = piece_len(c);
    if chunk {
        end = 8u - trail_zeros(w);
        if run > 0u {
            start = lead_zeros(w);
        }
    }
    if run > 0u {
        run_of(run + start);
    }
    for (var j = start; j < end; j++) {
        literal(byte_of(w, j));
    }
}

@compute @workgroup_size(WG_SIZE)
fn lens(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let p = workgroup_index(wid, nwg) * WG_SIZE + lid;
    if p > params.npieces {
        return;
    }
    cursor = 0u;
    packing = false;
    if p < params.npieces {
        code_piece(p);
    }
    offsets[p] = cursor;
}

@compute @workgroup_size(WG_SIZE)
fn pack(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let p = workgroup_index(wid, nwg) * WG_SIZE + lid;
    if p > params.npieces {
        return;
    }
    if p == params.npieces {
        total[0] = offsets[p];
        return;
    }
    cursor = offsets[p];
    packing = true;
    code_piece(p);
}
