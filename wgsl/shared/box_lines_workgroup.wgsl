// box_lines_workgroup: box_pass's sums across the threads of a line, through workgroup
// memory (a barrier each). Its twin box_lines_subgroup takes them with subgroup shuffles:
// no workgroup memory and no barrier.

// import: lane_workgroup

var<workgroup> sh_tot: array<vec4<u32>, BOX_WG>;
var<workgroup> sh_sum: array<vec4<u32>, BOX_ROWS>;

// This invocation's line of the workgroup's (.x) and its place along it (.y).
fn line_lane(lane: Lane) -> vec2<u32> {
    return vec2<u32>(lane.lid / BOX_TPL, lane.lid % BOX_TPL);
}

// The sum of `part` over the line's threads, for each of them. Once, before line_scan.
fn line_sum(part: vec4<u32>, lane: Lane) -> vec4<u32> {
    let p = line_lane(lane);
    sh_tot[lane.lid] = part;
    workgroupBarrier();
    if p.y == 0u {
        var s = vec4<u32>(0u);
        for (var k = 0u; k < BOX_TPL; k++) {
            s += sh_tot[p.x * BOX_TPL + k];
        }
        sh_sum[p.x] = s;
    }
    workgroupBarrier();
    return sh_sum[p.x];
}

// `run` summed over the line's threads before this one, and over all of them. The caller
// passes a barrier before its next call (the tile's), so that every thread has read `sh_tot`
// before it is written again; and it writes the tile only after this one's barrier, so that
// no thread does while another still stores the last chunk's.
fn line_scan(run: vec4<u32>, lane: Lane) -> LineScan {
    let p = line_lane(lane);
    sh_tot[lane.lid] = run;
    workgroupBarrier();
    var before = vec4<u32>(0u);
    var total = vec4<u32>(0u);
    for (var k = 0u; k < BOX_TPL; k++) {
        let v = sh_tot[p.x * BOX_TPL + k];
        if k < p.y {
            before += v;
        }
        total += v;
    }
    return LineScan(before, total);
}
