// encode_png_filter: one piece per invocation (wgsl/shared/encode_png.wgsl): its bytes
// Paeth-filtered against the row above, as the png crate filters every row at compression
// level 1 (filter byte 4 first), written two words a piece; and each workgroup's Adler-32
// sums of its pieces, which the host combines. CPU twin: `filter_rows` and `adler32` in
// src/ops/encode/png/deflate.rs.

// import: grid
// import: encode_png

@group(0) @binding(0) var<uniform> params: Params;
// The samples, rows packed, 16-bit ones little-endian.
@group(0) @binding(1) var<storage, read> src: array<u32>;
// Two words a piece: its filtered bytes, little-endian, zeros past its length.
@group(0) @binding(2) var<storage, read_write> filtered: array<vec2<u32>>;
// Word 0 is the bit count (encode_png_deflate.wgsl); then per workgroup: A (the sum of its bytes), B (each byte times the count of bytes from it to
// the end of the workgroup's, itself included), both mod 65521, and its byte count.
@group(0) @binding(3) var<storage, read_write> adler: array<u32>;

override WG_SIZE: u32 = 256u;

const MOD: u32 = 65521u;

var<workgroup> sh_a: array<u32, WG_SIZE>;
var<workgroup> sh_b: array<u32, WG_SIZE>;
var<workgroup> sh_n: array<u32, WG_SIZE>;

// Byte i of row y as PNG stores it.
fn raw(y: u32, i: u32) -> u32 {
    let k = (y * params.row_len + i) ^ params.swap;
    return (src[k >> 2u] >> ((k & 3u) * 8u)) & 0xFFu;
}

fn paeth(a: u32, b: u32, c: u32) -> u32 {
    let p = i32(a + b) - i32(c);
    let pa = abs(p - i32(a));
    let pb = abs(p - i32(b));
    let pc = abs(p - i32(c));
    if pa <= pb && pa <= pc {
        return a;
    }
    if pb <= pc {
        return b;
    }
    return c;
}

// Byte k of filtered row y (k = 0: the filter type).
fn filtered_byte(y: u32, k: u32) -> u32 {
    if k == 0u {
        return 4u;
    }
    let i = k - 1u;
    var a = 0u;
    var b = 0u;
    var c = 0u;
    if i >= params.bpp {
        a = raw(y, i - params.bpp);
    }
    if y > 0u {
        b = raw(y - 1u, i);
        if i >= params.bpp {
            c = raw(y - 1u, i - params.bpp);
        }
    }
    return (raw(y, i) - paeth(a, b, c)) & 0xFFu;
}

@compute @workgroup_size(WG_SIZE)
fn main(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let wg = workgroup_index(wid, nwg);
    let p = wg * WG_SIZE + lid;
    var a = 0u;
    var b = 0u;
    var n = 0u;
    if p < params.npieces {
        let y = p / params.pieces_per_row;
        let c = p % params.pieces_per_row;
        n = piece_len(c);
        var words = vec2<u32>(0u, 0u);
        for (var j = 0u; j < n; j++) {
            let v = filtered_byte(y, 8u * c + j);
            words[j >> 2u] |= v << ((j & 3u) * 8u);
            a += v;
            b += (n - j) * v;
        }
        filtered[p] = words;
    }
    sh_a[lid] = a;
    sh_b[lid] = b;
    sh_n[lid] = n;
    workgroupBarrier();
    // Pairs of neighbouring spans joined, left to right: B = B1 + n2 * A1 + B2.
    for (var s = 1u; s < WG_SIZE; s *= 2u) {
        if lid % (2u * s) == 0u && lid + s < WG_SIZE {
            let a1 = sh_a[lid] % MOD;
            let b2 = sh_b[lid + s] % MOD;
            let n2 = sh_n[lid + s];
            sh_b[lid] = (sh_b[lid] % MOD + (n2 % MOD) * a1 % MOD + b2) % MOD;
            sh_a[lid] = (a1 + sh_a[lid + s] % MOD) % MOD;
            sh_n[lid] += n2;
        }
        workgroupBarrier();
    }
    if lid == 0u && wg * WG_SIZE < params.npieces {
        adler[1u + 3u * wg] = sh_a[0];
        adler[2u + 3u * wg] = sh_b[0];
        adler[3u + 3u * wg] = sh_n[0];
    }
}
