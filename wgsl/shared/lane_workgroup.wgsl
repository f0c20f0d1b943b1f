// lane_workgroup: the builtins a kernel on the workgroup-memory path takes. Its twin with
// subgroup ids is lane_subgroup.

struct Lane {
    @builtin(local_invocation_index) lid: u32,
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
}
