// blur_src: a blur pass's input read a word (u32) at a time. Its twins blur_src_vec2 and
// blur_src_vec4 read the two-word (FMT_PACK16) and one-word-a-lane (FMT_WIDE) formats a
// pixel at a time.

@group(0) @binding(1) var<storage, read> src: array<u32>;

// Word i of the input.
fn src_word(i: u32) -> u32 {
    return src[i];
}

// Words i and i + 1 of the input: a FMT_PACK16 pixel.
fn src_pair(i: u32) -> vec2<u32> {
    return vec2<u32>(src[i], src[i + 1u]);
}

// Words i to i + 3 of the input: a FMT_WIDE pixel.
fn src_wide(i: u32) -> vec4<u32> {
    return vec4<u32>(src[i], src[i + 1u], src[i + 2u], src[i + 3u]);
}
