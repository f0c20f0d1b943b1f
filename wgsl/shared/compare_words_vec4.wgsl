// compare_words_vec4: the compare kernel's two images read a vec4<u32> at a time, for
// layouts of 4 or 8 words a unit of 4 pixels (RGBA8, 16-bit gray and alpha, RGBA16), whose
// units start on a vec4 (the host's buffers start on a unit), and for quads of 4 units
// (WIDE, layouts of at most 4 words a unit), which start on a vec4 too; the units of other
// layouts (a quad's tail) a word at a time. Its twin is compare_words.

// The expected and actual images' rows, samples interleaved, packed little-endian into words.
@group(0) @binding(1) var<storage, read> a: array<vec4<u32>>;
@group(0) @binding(2) var<storage, read> b: array<vec4<u32>>;

// Word i of a or b.
fn word_a(i: u32) -> u32 {
    return a[i >> 2u][i & 3u];
}

fn word_b(i: u32) -> u32 {
    return b[i >> 2u][i & 3u];
}

// The UNIT_WORDS words of a unit of a or b from word w: a vec4 at a time where UNIT_WORDS
// is a multiple of 4 (w is then one too), else a word at a time.
fn words_a(w: u32) -> array<u32, 8> {
    var r: array<u32, 8>;
    if UNIT_WORDS % 4u != 0u {
        for (var j = 0u; j < UNIT_WORDS; j++) {
            r[j] = word_a(w + j);
        }
        return r;
    }
    for (var q = 0u; q < UNIT_WORDS / 4u; q++) {
        let v = a[w / 4u + q];
        r[4u * q] = v.x;
        r[4u * q + 1u] = v.y;
        r[4u * q + 2u] = v.z;
        r[4u * q + 3u] = v.w;
    }
    return r;
}

fn words_b(w: u32) -> array<u32, 8> {
    var r: array<u32, 8>;
    if UNIT_WORDS % 4u != 0u {
        for (var j = 0u; j < UNIT_WORDS; j++) {
            r[j] = word_b(w + j);
        }
        return r;
    }
    for (var q = 0u; q < UNIT_WORDS / 4u; q++) {
        let v = b[w / 4u + q];
        r[4u * q] = v.x;
        r[4u * q + 1u] = v.y;
        r[4u * q + 2u] = v.z;
        r[4u * q + 3u] = v.w;
    }
    return r;
}

// The UNIT_WORDS vec4s of quad q (4 units, UNIT_WORDS at most 4) of a or b.
fn quad_a(q: u32) -> array<vec4<u32>, 4> {
    var r: array<vec4<u32>, 4>;
    for (var i = 0u; i < UNIT_WORDS; i++) {
        r[i] = a[q * UNIT_WORDS + i];
    }
    return r;
}

fn quad_b(q: u32) -> array<vec4<u32>, 4> {
    var r: array<vec4<u32>, 4>;
    for (var i = 0u; i < UNIT_WORDS; i++) {
        r[i] = b[q * UNIT_WORDS + i];
    }
    return r;
}
