// box_load4_pack16: `load4` of box_runs_quads for a pass reading the 16-bit intermediate
// (FMT_PACK16) of an image without alpha bound as vec4s, two pixels each (blur_src_pairs; see
// box_load4).

// Pixels x to x + 3 of `line`, all inside the line: the two vec4s that hold them where they
// start one, else the three around them.
fn load4(line: u32, x: u32) -> array<vec4<u32>, 4> {
    let word = params.in_base + (line * params.in_line_stride + x) * 2u;
    let q = word >> 2u;
    let a = src[q];
    let b = src[q + 1u];
    var px: array<vec4<u32>, 4>;
    if (word & 2u) == 0u {
        px[0] = live(unpack16(a.xy));
        px[1] = live(unpack16(a.zw));
        px[2] = live(unpack16(b.xy));
        px[3] = live(unpack16(b.zw));
    } else {
        let c = src[q + 2u];
        px[0] = live(unpack16(a.zw));
        px[1] = live(unpack16(b.xy));
        px[2] = live(unpack16(b.zw));
        px[3] = live(unpack16(c.xy));
    }
    return px;
}
