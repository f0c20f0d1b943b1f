// blur_src_vec2: a blur pass's input as vec2s, for passes that read a two-word format
// (FMT_PACK16: 8-bit images' 16-bit intermediate, 16-bit images' packed pixels; FMT_PACK18,
// the all-opaque gaussian's intermediate): a pixel in one 8-byte load, not two 4-byte ones.
// A two-word pixel starts on a vec2: its buffers' rows are whole pixels of 8 bytes, bound at
// offsets aligned to at least 8 bytes or at the row itself, so every word offset the host
// passes is even. Its twins are blur_src and blur_src_vec4.

@group(0) @binding(1) var<storage, read> src: array<vec2<u32>>;

// Word i of the input.
fn src_word(i: u32) -> u32 {
    return src[i >> 1u][i & 1u];
}

// Words i and i + 1 of the input, i even: a FMT_PACK16 or FMT_PACK18 pixel.
fn src_pair(i: u32) -> vec2<u32> {
    return src[i >> 1u];
}

// Words i to i + 3 of the input, i even (the twins' interface; FMT_WIDE passes read with
// blur_src_vec4).
fn src_wide(i: u32) -> vec4<u32> {
    return vec4<u32>(src[i >> 1u], src[(i >> 1u) + 1u]);
}
