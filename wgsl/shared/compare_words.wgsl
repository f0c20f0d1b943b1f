// compare_words: the compare kernel's two images read a word (u32) at a time. Its twin
// compare_words_vec4 reads layouts of 4 or 8 words a unit a vec4 at a time.

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
