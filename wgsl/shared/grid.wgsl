// grid: the linear index of a workgroup in a 1-D or 2-D dispatch grid (`Gpu::grid` in
// src/gpu/kernel.rs makes the grid). A 2-D grid may have a few spare workgroups past the
// work: every kernel guards against them.
fn workgroup_index(wid: vec3<u32>, nwg: vec3<u32>) -> u32 {
    return wid.x + wid.y * nwg.x;
}
