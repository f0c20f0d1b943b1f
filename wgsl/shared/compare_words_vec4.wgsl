// compare_words_vec4: the compare kernel's two images read a vec4<u32> at a time, for
// layouts of 4 or 8 words a unit of 4 pixels (RGBA8, 16-bit gray and alpha, RGBA16), whose
// units start on a vec4 (the host's buffers start on a unit). Its twin is compare_words.

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

// The UNIT_WORDS words of a unit of a or b from word w (a multiple of 4).
fn words_a(w: u32) -> array<u32, 8> {
    var r: array<u32, 8>;
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
    for (var q = 0u; q < UNIT_WORDS / 4u; q++) {
        let v = b[w / 4u + q];
        r[4u * q] = v.x;
        r[4u * q + 1u] = v.y;
        r[4u * q + 2u] = v.z;
        r[4u * q + 3u] = v.w;
    }
    return r;
}
