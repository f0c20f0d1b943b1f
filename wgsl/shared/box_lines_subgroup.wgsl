// box_lines_subgroup: box_pass's sums across the threads of a line with subgroup shuffles
// (log2 BOX_TPL steps each), for adapters whose every subgroup holds whole lines: the host
// takes it where the smallest subgroup size is a multiple of BOX_TPL and the largest divides
// BOX_WG. A line's threads are consecutive lanes of one subgroup, whatever their
// local_invocation_index. It assumes full subgroups there, as the scan and compare kernels
// do: wgpu does not ask Vulkan for REQUIRE_FULL_SUBGROUPS, but every driver we know fills
// them when the workgroup is a multiple of the subgroup size. Its twin is
// box_lines_workgroup.
// (naga 30 takes subgroup operations on devices with the SUBGROUP feature and rejects
// `enable subgroups;`.)

// import: lane_subgroup

fn line_lane(lane: Lane) -> vec2<u32> {
    let pos = lane.sid * lane.sgs + lane.sgi;
    return vec2<u32>(pos / BOX_TPL, pos % BOX_TPL);
}

fn line_sum(part: vec4<u32>, lane: Lane) -> vec4<u32> {
    var s = part;
    for (var o = 1u; o < BOX_TPL; o <<= 1u) {
        s += subgroupShuffleXor(s, o);
    }
    return s;
}

// Begins with a barrier, as box_lines_workgroup's does: box_pass writes the chunk's tile
// after it, so no thread does while another still stores the last chunk's.
fn line_scan(run: vec4<u32>, lane: Lane) -> LineScan {
    workgroupBarrier();
    let t = line_lane(lane).y;
    var incl = run;
    for (var o = 1u; o < BOX_TPL; o <<= 1u) {
        let up = subgroupShuffleUp(incl, o);
        if t >= o {
            incl += up;
        }
    }
    // The line's last lane holds its total.
    let total = subgroupShuffle(incl, lane.sgi | (BOX_TPL - 1u));
    return LineScan(incl - run, total);
}
