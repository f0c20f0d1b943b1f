// blur_dst_vec2: a blur pass's output as vec2s, for passes that write a two-word format
// (FMT_PACK16, FMT_PACK18): a pixel in one 8-byte store (a pixel starts on a vec2, as in
// blur_src_vec2). Its twins are blur_dst and blur_dst_vec4.

@group(0) @binding(2) var<storage, read_write> dst: array<vec2<u32>>;

// Sets word i of the output.
fn dst_word(i: u32, v: u32) {
    dst[i >> 1u][i & 1u] = v;
}

// Sets words i and i + 1 of the output, i even: a FMT_PACK16 or FMT_PACK18 pixel.
fn dst_pair(i: u32, v: vec2<u32>) {
    dst[i >> 1u] = v;
}

// Sets words i to i + 3 of the output, i even (the twins' interface; FMT_WIDE passes write
// with blur_dst_vec4).
fn dst_wide(i: u32, v: vec4<u32>) {
    dst[i >> 1u] = v.xy;
    dst[(i >> 1u) + 1u] = v.zw;
}
