// compare_words: the compare kernel's two images read a word (u32) at a time. Its twin
// compare_words_vec4 reads layouts of 4 or 8 words a unit, and quads (WIDE), a vec4 at a time.

// The expected and actual images' rows, samples interleaved, packed little-endian into words.
@group(0) @binding(1) var<storage, read> a: array<u32>;
@group(0) @binding(2) var<storage, read> b: array<u32>;

// Word i of a or b.
fn word_a(i: u32) -> u32 {
    return a[i];
}

fn word_b(i: u32) -> u32 {
    return b[i];
}

// The UNIT_WORDS words of a unit of a or b from word w.
fn words_a(w: u32) -> array<u32, 8> {
    var r: array<u32, 8>;
    for (var j = 0u; j < UNIT_WORDS; j++) {
        r[j] = a[w + j];
    }
    return r;
}

fn words_b(w: u32) -> array<u32, 8> {
    var r: array<u32, 8>;
    for (var j = 0u; j < UNIT_WORDS; j++) {
        r[j] = b[w + j];
    }
    return r;
}

// The UNIT_WORDS vec4s of quad q (4 units) of a or b, a word at a time. The host reads quads
// through compare_words_vec4; the kernel's quad path needs these to type-check.
fn quad_a(q: u32) -> array<vec4<u32>, 4> {
    var r: array<vec4<u32>, 4>;
    for (var i = 0u; i < UNIT_WORDS; i++) {
        let w = (q * UNIT_WORDS + i) * 4u;
        r[i] = vec4<u32>(a[w], a[w + 1u], a[w + 2u], a[w + 3u]);
    }
    return r;
}

fn quad_b(q: u32) -> array<vec4<u32>, 4> {
    var r: array<vec4<u32>, 4>;
    for (var i = 0u; i < UNIT_WORDS; i++) {
        let w = (q * UNIT_WORDS + i) * 4u;
        r[i] = vec4<u32>(b[w], b[w + 1u], b[w + 2u], b[w + 3u]);
    }
    return r;
}
