// encode_tables: the optimal Huffman tables of a frame from its symbol histogram, one workgroup
// a table, built as jchuff.c's jpeg_gen_optimal_table builds them (the CPU twin is
// `Table::optimal` in src/io/jpeg/huffman.rs, step for step): the symbols with a nonzero count
// and the pseudo-symbol 256 listed in order; then, until one tree is left, the two least
// frequent trees merged (a smaller count first, between equal counts the later entry), both
// found by one parallel reduction of the workgroup, and every entry of either tree one bit
// longer; the lengths over 16 folded as T.81 K.2 says; the symbols sorted by length. Out: the
// canonical codes for the coding passes, and the table as the DHT segment holds it for the
// host's headers.

// import: encode_frame

@group(0) @binding(0) var<uniform> params: Params;
// Symbol counts at table * 256 + symbol, table = t * 2 + class (encode_huffman.wgsl's `count`).
@group(0) @binding(1) var<storage, read> hist: array<u32>;
// Indexed as `hist`: code | length << 16, or 0 for a symbol the table does not code.
@group(0) @binding(2) var<storage, read_write> codes: array<u32>;
// DHT_WORDS words a table: bits[0..17] (bits[k]: codes of length k), then its symbols in code
// order.
@group(0) @binding(3) var<storage, read_write> dht: array<u32>;

// `DHT_WORDS` of src/ops/encode/plan.rs: the shader test checks they agree.
const DHT_WORDS: u32 = 273u;
const WG_SIZE: u32 = 64u;
// 256 symbols and the pseudo-symbol; each invocation holds entries lid + j * WG_SIZE.
const ENTRIES: u32 = 257u;
const PER_INVOCATION: u32 = 5u;
// A tree merged into another (jchuff.c sets its count to the largest value).
const MERGED: u32 = 0xFFFFFFFFu;
const NONE: u32 = 0xFFFFFFFFu;
const MAX_CLEN: u32 = 32u;

// Per entry (the listed symbols, in order): its count (the tree's while it is live), its
// symbol, its code length so far, and the live entry of the tree it is in.
var<workgroup> sh_freq: array<u32, ENTRIES>;
var<workgroup> sh_sym: array<u32, ENTRIES>;
var<workgroup> sh_size: array<u32, ENTRIES>;
var<workgroup> sh_tree: array<u32, ENTRIES>;
// The reduction: each invocation's two least entries, least first.
var<workgroup> sh_best: array<vec2<u32>, WG_SIZE>;
var<workgroup> sh_pair: vec2<u32>;
var<workgroup> sh_nz: u32;
// Codes by symbol, written out by all invocations at the end.
var<workgroup> sh_code: array<u32, 256>;

// Whether entry a is taken before entry b by the minimum search: a smaller count, or an
// equal count and a later entry (jchuff.c's `<=` as it walks the entries in order).
fn before(a: u32, b: u32) -> bool {
    if a == NONE {
        return false;
    }
    if b == NONE {
        return true;
    }
    let fa = sh_freq[a];
    let fb = sh_freq[b];
    return fa < fb || (fa == fb && a > b);
}

// The two least entries of the pairs p and q (each least first, NONE last).
fn least2(p: vec2<u32>, q: vec2<u32>) -> vec2<u32> {
    if before(q.x, p.x) {
        return vec2<u32>(q.x, select(q.y, p.x, before(p.x, q.y)));
    }
    return vec2<u32>(p.x, select(p.y, q.x, before(q.x, p.y)));
}

@compute @workgroup_size(WG_SIZE)
fn main(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let table = wid.x;
    // A DC and an AC table for luma, and for chroma unless gray.
    if table >= select(4u, 2u, params.channels == 1u) {
        return;
    }
    let slot = table * 256u;
    // The counts, the pseudo-symbol's 1 after them (read in parallel; listed by one).
    for (var j = 0u; j < PER_INVOCATION; j++) {
        let s = lid + j * WG_SIZE;
        if s < 256u {
            sh_size[s] = hist[slot + s];
            sh_code[s] = 0u;
        } else if s == 256u {
            sh_size[s] = 1u;
        }
    }
    workgroupBarrier();
    if lid == 0u {
        var nz = 0u;
        for (var s = 0u; s < ENTRIES; s++) {
            let f = sh_size[s];
            if f != 0u {
                sh_sym[nz] = s;
                sh_freq[nz] = f;
                nz++;
            }
        }
        sh_nz = nz;
    }
    let nz = workgroupUniformLoad(&sh_nz);
    for (var j = 0u; j < PER_INVOCATION; j++) {
        let k = lid + j * WG_SIZE;
        if k < ENTRIES {
            sh_size[k] = 0u;
            sh_tree[k] = k;
        }
    }
    loop {
        var best = vec2<u32>(NONE, NONE);
        for (var j = 0u; j < PER_INVOCATION; j++) {
            let k = lid + j * WG_SIZE;
            if k < nz && sh_freq[k] != MERGED {
                best = least2(best, vec2<u32>(k, NONE));
            }
        }
        sh_best[lid] = best;
        workgroupBarrier();
        for (var stride = WG_SIZE / 2u; stride > 0u; stride >>= 1u) {
            if lid < stride {
                sh_best[lid] = least2(sh_best[lid], sh_best[lid + stride]);
            }
            workgroupBarrier();
        }
        if lid == 0u {
            sh_pair = sh_best[0];
        }
        let pair = workgroupUniformLoad(&sh_pair);
        if pair.y == NONE {
            break;
        }
        let c1 = pair.x;
        let c2 = pair.y;
        let merged = sh_freq[c1] + sh_freq[c2];
        workgroupBarrier();
        // Both trees one bit deeper, now c1's; c1 holds their count, c2 is gone.
        for (var j = 0u; j < PER_INVOCATION; j++) {
            let k = lid + j * WG_SIZE;
            if k < nz {
                let tree = sh_tree[k];
                if tree == c1 || tree == c2 {
                    sh_size[k] += 1u;
                    sh_tree[k] = c1;
                }
                if k == c1 {
                    sh_freq[k] = merged;
                } else if k == c2 {
                    sh_freq[k] = MERGED;
                }
            }
        }
        workgroupBarrier();
    }
    if lid == 0u {
        let out = table * DHT_WORDS;
        // Codes of each length (a length past MAX_CLEN + 1 cannot occur with counts that fit
        // a u32; clamped to stay in bounds).
        var bits: array<u32, 34>;
        for (var k = 0u; k < nz; k++) {
            bits[min(sh_size[k], MAX_CLEN + 1u)] += 1u;
        }
        var bit_pos: array<u32, 34>;
        var p = 0u;
        for (var i = 1u; i <= MAX_CLEN; i++) {
            bit_pos[i] = p;
            p += bits[i];
        }
        // Lengths over 16 folded: two codes of length i replaced by one of i - 1 and two of
        // j + 1 in place of one of j, the longest j < i - 1 there is.
        var i = MAX_CLEN;
        while i > 16u {
            while bits[i] > 0u {
                var j = i - 2u;
                while bits[j] == 0u {
                    j--;
                }
                bits[i] -= 2u;
                bits[i - 1u] += 1u;
                bits[j + 1u] += 2u;
                bits[j] -= 1u;
            }
            i--;
        }
        // The pseudo-symbol's code, the longest, dropped.
        while bits[i] == 0u {
            i--;
        }
        bits[i] -= 1u;
        for (var b = 0u; b < 17u; b++) {
            dht[out + b] = bits[b];
        }
        // The symbols by their unfolded length, in order within a length (the pseudo-symbol,
        // the last entry, left out).
        for (var k = 0u; k + 1u < nz; k++) {
            let cs = min(sh_size[k], MAX_CLEN + 1u);
            dht[out + 17u + bit_pos[cs]] = sh_sym[k];
            sh_tree[bit_pos[cs]] = sh_sym[k];
            bit_pos[cs] += 1u;
        }
        // The canonical codes (T.81 Annex C).
        var code = 0u;
        var v = 0u;
        for (var len = 1u; len <= 16u; len++) {
            for (var n = 0u; n < bits[len]; n++) {
                sh_code[sh_tree[v]] = code | (len << 16u);
                code++;
                v++;
            }
            code <<= 1u;
        }
    }
    workgroupBarrier();
    for (var j = 0u; j < PER_INVOCATION; j++) {
        let s = lid + j * WG_SIZE;
        if s < 256u {
            codes[slot + s] = sh_code[s];
        }
    }
}
