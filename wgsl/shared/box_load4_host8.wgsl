// box_load4_host8: `load4` of box_runs_quads for a pass reading the host's layout (see
// box_load4).

// Pixels x to x + 3 of `line` in the host's layout (FMT_HOST), all inside the line: their 4
// HOST_CHANNELS bytes from the HOST_CHANNELS + 1 words around them, shifted into place once.
fn load4(line: u32, x: u32) -> array<vec4<u32>, 4> {
    let b = params.in_base + (line * params.in_line_stride + x) * HOST_CHANNELS;
    let w0 = b >> 2u;
    let a = (b & 3u) * 8u;
    // The pixels' bytes from a word boundary: u[j] is bytes 4j to 4j + 3 of them (where they
    // start a word, the select takes `lo` as it is and the shifted value, whose shift by 32
    // WGSL masks, is unused; so is the last word read, which may then lie past the image's
    // end, where the bounds-checked load reads some other word).
    var u: array<u32, 4>;
    var lo = src_word(w0);
    for (var j = 0u; j < HOST_CHANNELS; j++) {
        let hi = src_word(w0 + j + 1u);
        u[j] = select((lo >> a) | (hi << (32u - a)), lo, a == 0u);
        lo = hi;
    }
    var px: array<vec4<u32>, 4>;
    let mask = 0xffffffffu >> (32u - 8u * HOST_CHANNELS);
    for (var k = 0u; k < 4u; k++) {
        let bit = 8u * HOST_CHANNELS * k;
        let sh = bit & 31u;
        var bits = u[bit >> 5u] >> sh;
        if sh + 8u * HOST_CHANNELS > 32u {
            bits |= u[(bit >> 5u) + 1u] << (32u - sh);
        }
        px[k] = live(unpack8(bits & mask));
    }
    return px;
}
