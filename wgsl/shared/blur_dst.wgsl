// blur_dst: a blur pass's output written a word (u32) at a time. Its twins blur_dst_vec2 and
// blur_dst_vec4 write the two-word (FMT_PACK16) and one-word-a-lane (FMT_WIDE) formats a
// pixel at a time.

@group(0) @binding(2) var<storage, read_write> dst: array<u32>;

// Sets word i of the output.
fn dst_word(i: u32, v: u32) {
    dst[i] = v;
}

// Sets words i and i + 1 of the output: a FMT_PACK16 pixel.
fn dst_pair(i: u32, v: vec2<u32>) {
    dst[i] = v.x;
    dst[i + 1u] = v.y;
}

// Sets words i to i + 3 of the output: a FMT_WIDE pixel.
fn dst_wide(i: u32, v: vec4<u32>) {
    dst[i] = v.x;
    dst[i + 1u] = v.y;
    dst[i + 2u] = v.z;
    dst[i + 3u] = v.w;
}
