// lane_subgroup: the builtins a kernel on the subgroup path takes, and the adapter's smallest
// subgroup size. Its twin without subgroup ids is lane_workgroup.

struct Lane {
    @builtin(local_invocation_index) lid: u32,
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(subgroup_invocation_id) sgi: u32,
    @builtin(subgroup_size) sgs: u32,
    @builtin(subgroup_id) sid: u32,
}

// The adapter's smallest subgroup size (the host passes it).
override SUBGROUP_MIN: u32 = 1u;
