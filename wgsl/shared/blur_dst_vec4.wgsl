// blur_dst_vec4: a blur pass's output as vec4s, for passes that write the one-word-a-lane
// format (FMT_WIDE): a pixel in one 16-byte store (a pixel starts on a vec4, as in
// blur_src_vec4). Its twin is blur_dst.

@group(0) @binding(2) var<storage, read_write> dst: array<vec4<u32>>;

// Sets word i of the output.
fn dst_word(i: u32, v: u32) {
    dst[i >> 2u][i & 3u] = v;
}

// Sets words i and i + 1 of the output, i even (the twins' interface; FMT_PACK16 passes
// write with blur_dst_vec2).
fn dst_pair(i: u32, v: vec2<u32>) {
    dst[i >> 2u][i & 3u] = v.x;
    dst[i >> 2u][(i & 3u) + 1u] = v.y;
}

// Sets words i to i + 3 of the output, i a multiple of 4: a FMT_WIDE pixel.
fn dst_wide(i: u32, v: vec4<u32>) {
    dst[i >> 2u] = v;
}
