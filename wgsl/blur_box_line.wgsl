// blur_box_line: one pass of a box blur, one line per invocation (CPU adapters; see
// shared/blur_pass.wgsl).

// import: blur_pass

// Each invocation walks one line's segment alone: no workgroup memory and no barriers, which
// CPU implementations (lavapipe) run slowly, while consecutive invocations still store
// consecutive lines of the transposed output. On GPUs the workgroup kernels above are faster.
override LINE_WG: u32 = 64u;

@compute @workgroup_size(LINE_WG)
fn box_line_pass(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let wk = work(wid, nwg, LINE_WG);
    let line = wk.line0 + lid;
    if wk.start >= wk.end || line >= params.lines {
        return;
    }
    let r = i32(params.radius);
    let len = i32(params.len);
    // S at the segment's start - 1, as in box_pass.
    let c = i32(wk.start) - 1;
    let lo = c - r;
    let hi = c + r;
    var s = vec4<u32>(0u);
    for (var j = max(lo, 0); j <= min(hi, len - 1); j++) {
        s += load(line, j);
    }
    let left = max(0, min(hi, -1) - lo + 1);
    let right = max(0, hi - max(lo, len) + 1);
    s += u32(left) * load(line, 0) + u32(right) * load(line, len - 1);
    for (var x = wk.start; x < wk.end; x++) {
        s += load(line, i32(x) + r) - load(line, i32(x) - r - 1);
        store((x - params.out_start) * params.out_pos_stride + line, finish(s));
    }
}
