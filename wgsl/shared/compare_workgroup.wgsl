// compare_workgroup: the compare kernel's workgroup reduction of its partial sums without
// subgroup operations: atomics on workgroup memory, skipped for values that add nothing
// (identical regions cost no atomics). Its twin with subgroups is compare_subgroup.

// import: lane_workgroup

var<workgroup> sh_part: array<atomic<u32>, PART_WORDS>;

// Before any value is given: the sums start at 0.
fn reduce_begin(lane: Lane) {
    if lane.lid < PART_WORDS {
        atomicStore(&sh_part[lane.lid], 0u);
    }
    workgroupBarrier();
}

// Adds this invocation's `v` to word `slot` of the workgroup's partial.
fn reduce_add(v: u32, slot: u32, lane: Lane) {
    if v != 0u {
        atomicAdd(&sh_part[slot], v);
    }
}

// The largest of every invocation's `v` into word `slot`.
fn reduce_max(v: u32, slot: u32, lane: Lane) {
    if v != 0u {
        atomicMax(&sh_part[slot], v);
    }
}

// Word `slot` of the workgroup's partial, after a barrier that follows every reduce_*.
fn reduce_result(slot: u32, lane: Lane) -> u32 {
    return atomicLoad(&sh_part[slot]);
}
