// box_runs_host4: box_runs for a pass that reads the host's 8-bit layout (FMT_HOST8) of an
// image without alpha, four positions a thread (`BOX_PPT`). Where all of a thread's windows'
// ends lie inside the line, its four entering and four leaving pixels are read as the
// HOST_CHANNELS + 1 words around each four and shifted into place once (`load4_host8` of
// box_load4_host8), not a pixel at a time with half of them straddling two words: the 4K
// RGB8 box's row pass 0.057 to 0.052 ms on an H100 (call GM). Elsewhere, box_runs' loop.
fn box_runs(line: u32, x0: i32, end: i32, in_range: bool) -> array<vec4<u32>, BOX_PPT> {
    let r = i32(params.radius);
    let len = i32(params.len);
    var local: array<vec4<u32>, BOX_PPT>;
    var run = vec4<u32>(0u);
    if in_range && x0 + 3 < end && x0 - r - 1 >= 0 && x0 + 3 + r < len {
        let enter = load4_host8(line, u32(x0 + r));
        let leave = load4_host8(line, u32(x0 - r - 1));
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
