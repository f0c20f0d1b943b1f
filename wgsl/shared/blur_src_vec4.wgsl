// blur_src_vec4: a blur pass's input as vec4s, for passes that read the one-word-a-lane
// format (FMT_WIDE): a pixel in one 16-byte load, not four 4-byte ones. A FMT_WIDE pixel
// starts on a vec4 (the host's word offsets of such buffers are multiples of 4: their rows
// are whole pixels of 16 bytes, bound at offsets aligned to at least 16 bytes or at the row
// itself). The box's column passes that load four pixels of the 16-bit intermediate at a
// time (box_load4_pack16) bind it so too, two pixels a vec4, where it is a whole number of
// them (`Shape::pairs` in src/ops/blur/plan.rs). Its twins are blur_src and blur_src_vec2.

@group(0) @binding(1) var<storage, read> src: array<vec4<u32>>;

// Word i of the input.
fn src_word(i: u32) -> u32 {
    return src[i >> 2u][i & 3u];
}

// Words i and i + 1 of the input, i even: a FMT_PACK16 pixel (most FMT_PACK16 passes read
// with blur_src_vec2).
fn src_pair(i: u32) -> vec2<u32> {
    let v = src[i >> 2u];
    return select(v.xy, v.zw, (i & 2u) != 0u);
}

// Words i to i + 3 of the input, i a multiple of 4: a FMT_WIDE pixel.
fn src_wide(i: u32) -> vec4<u32> {
    return src[i >> 2u];
}
