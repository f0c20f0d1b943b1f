// box_runs_quads: box_runs for a pass of four positions a thread (`BOX_PPT`) that reads four
// pixels at a time (`load4`, of box_load4_host8 or box_load4_pack16, in place of box_load4):
// where all of a thread's windows' ends lie inside the line, its four entering and four
// leaving pixels each as one group of loads, not a pixel at a time. The host's 8-bit layout
// of an image without alpha: the channels + 1 words around four pixels, shifted into place
// once, where half of them straddle two words (the 4K RGB8 box's row pass 0.057 to 0.052 ms
// on an H100, call GM); the 16-bit intermediate of such an image: two or three vec4s, not
// four vec2s (its column pass 0.056 to 0.053 ms, call GN). Elsewhere, box_runs' loop,
// written again: as a function both call, the RGB8 and all-opaque box column passes ran 1-2%
// slower (call GR).
const_assert BOX_PPT == 4u;

fn box_runs(line: u32, x0: i32, end: i32, in_range: bool) -> array<vec4<u32>, BOX_PPT> {
    let r = i32(params.radius);
    let len = i32(params.len);
    var local: array<vec4<u32>, BOX_PPT>;
    var run = vec4<u32>(0u);
    if in_range && x0 + 3 < end && x0 - r - 1 >= 0 && x0 + 3 + r < len {
        let enter = load4(line, u32(x0 + r));
        let leave = load4(line, u32(x0 - r - 1));
        for (var i = 0u; i < 4u; i++) {
            run += enter[i] - leave[i];
            local[i] = run;
        }
        return local;
    }
    for (var i = 0u; i < BOX_PPT; i++) {
        let x = x0 + i32(i);
        if in_range && x < end {
            run += load(line, x + r) - load(line, x - r - 1);
        }
        local[i] = run;
    }
    return local;
}
