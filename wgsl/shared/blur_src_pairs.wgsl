// blur_src_pairs: a blur pass's FMT_PACK16 input bound as vec4s, two pixels each, for the
// box's loads of four pixels at a time (box_load4_pack16). The binding's bytes are a whole
// number of vec4s: the plan takes it only where they are (`Shape::pairs` in
// src/ops/blur/plan.rs). Its twins are blur_src, blur_src_vec2 and blur_src_vec4.

@group(0) @binding(1) var<storage, read> src: array<vec4<u32>>;

// Word i of the input.
fn src_word(i: u32) -> u32 {
    return src[i >> 2u][i & 3u];
}

// Words i and i + 1 of the input, i even: a FMT_PACK16 pixel.
fn src_pair(i: u32) -> vec2<u32> {
    let v = src[i >> 2u];
    return select(v.xy, v.zw, (i & 2u) != 0u);
}

// Words i to i + 3 of the input, i a multiple of 4 (the twins' interface; FMT_WIDE passes
// read with blur_src_vec4).
fn src_wide(i: u32) -> vec4<u32> {
    return src[i >> 2u];
}
