// blur_src: a blur pass's input read a word (u32) at a time. Its twin blur_src_vec4 reads
// the one-word-a-lane format (FMT_WIDE) a vec4 at a time.

@group(0) @binding(1) var<storage, read> src: array<u32>;

// Word i of the input.
fn src_word(i: u32) -> u32 {
    return src[i];
}

// Words i to i + 3 of the input: a FMT_WIDE pixel.
fn src_wide(i: u32) -> vec4<u32> {
    return vec4<u32>(src[i], src[i + 1u], src[i + 2u], src[i + 3u]);
}
