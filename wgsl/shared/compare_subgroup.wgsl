// compare_subgroup: the compare kernel's workgroup reduction of its partial sums with subgroup
// operations: each subgroup reduces a value in registers and its first lane writes it to
// workgroup memory; after one barrier an invocation per word combines the subgroups' values.
// (naga 30 takes subgroup operations on devices with the SUBGROUP feature and rejects
// `enable subgroups;`.) Its twin without subgroups is compare_workgroup.

// import: lane_subgroup
// Subgroups are full: the host takes this path only when the largest subgroup size divides
// WG_SIZE.

// PART_WORDS values per subgroup.
var<workgroup> sh_sub: array<u32, PART_WORDS * (WG_SIZE / SUBGROUP_MIN)>;

fn reduce_begin(lane: Lane) {}

fn reduce_add(v: u32, slot: u32, lane: Lane) {
    let s = subgroupAdd(v);
    if lane.sgi == 0u {
        sh_sub[lane.sid * PART_WORDS + slot] = s;
    }
}

fn reduce_max(v: u32, slot: u32, lane: Lane) {
    let s = subgroupMax(v);
    if lane.sgi == 0u {
        sh_sub[lane.sid * PART_WORDS + slot] = s;
    }
}

// Word `slot` of the workgroup's partial, after a barrier that follows every reduce_*; a
// slot given to reduce_max (MAX_SLOT) takes the largest, the others the sum.
fn reduce_result(slot: u32, lane: Lane) -> u32 {
    var r = 0u;
    for (var s = 0u; s < WG_SIZE / lane.sgs; s++) {
        let v = sh_sub[s * PART_WORDS + slot];
        if is_max_slot(slot) {
            r = max(r, v);
        } else {
            r += v;
        }
    }
    return r;
}
