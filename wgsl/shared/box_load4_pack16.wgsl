// box_load4_pack16: `load4` of box_runs_quads for a pass reading the 16-bit intermediate
// (FMT_PACK16) bound as vec4s, two pixels each (blur_src_vec4; see box_load4): of an image
// without alpha, or the all-opaque box's, whose pixels are expanded as `load` expands them.

// Pixels x to x + 3 of `line`, all inside the line: the two vec4s that hold them where they
// start one, else the three around them.
fn load4(line: u32, x: u32) -> array<vec4<u32>, 4> {
    let word = params.in_base + (line * params.in_line_stride + x) * 2u;
    let q = word >> 2u;
    let a = src[q];
    let b = src[q + 1u];
    var px: array<vec4<u32>, 4>;
    if (word & 2u) == 0u {
        px[0] = loaded16(a.xy);
        px[1] = loaded16(a.zw);
        px[2] = loaded16(b.xy);
        px[3] = loaded16(b.zw);
    } else {
        let c = src[q + 2u];
        px[0] = loaded16(a.zw);
        px[1] = loaded16(b.xy);
        px[2] = loaded16(b.zw);
        px[3] = loaded16(c.xy);
    }
    return px;
}

// A pixel of the intermediate as `load` of wgsl/shared/blur_pass.wgsl returns it, its twin
// (these passes never premultiply; the all-opaque column pass expands).
fn loaded16(p: vec2<u32>) -> vec4<u32> {
    let v = live(unpack16(p));
    if OPAQUE_COLUMNS {
        return vec4<u32>((v.xyz * EXPAND_MUL + vec3<u32>(EXPAND_ADD)) / EXPAND_DIV, 0u);
    }
    return v;
}
