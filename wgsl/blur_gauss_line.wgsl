// blur_gauss_line: one pass of a gaussian blur, one line per invocation (CPU adapters; see
// shared/blur_pass.wgsl and blur_box_line.wgsl).

// import: blur_pass

override LINE_WG: u32 = 64u;

@compute @workgroup_size(LINE_WG)
fn gauss_line_pass(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let wk = work(wid, nwg, LINE_WG);
    let line = wk.line0 + lid;
    if wk.start >= wk.end || line >= params.lines {
        return;
    }
    let taps = 2u * params.radius + 1u;
    for (var x = wk.start; x < wk.end; x++) {
        let first = i32(x) - i32(params.radius);
        var s = vec4<u32>(0u);
        for (var k = 0u; k < taps; k++) {
            s += weight(k) * load(line, first + i32(k));
        }
        store((x - params.out_start) * params.out_pos_stride + line, finish(s));
    }
}
